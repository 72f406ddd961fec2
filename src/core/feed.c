/*
 * feed.c — the change feed on this server's ZooKeeper connections (feed.h).
 *
 * A subscription's life:
 *
 *   node_feed_serve --start held--> STREAMING --position dropped--> COMPACTED
 *        |                            |  ^                          event sent,
 *        | start too old: reply       |  | output drained            connection
 *        v COMPACTED (no stream)      v  |                           closed
 *                                   WAITING (output above the high water)
 *
 * STREAMING and WAITING are one state in code: `pump` sends from the
 * position until it reaches the end of the history or the connection's
 * unsent output (the host's client_output_bytes) passes its high water
 * (FEED_HIGH_WATER_BYTES unless the host asked for less). While any subscriber is behind, the core asks the
 * host (feed_wait) to call node_feed_pump() once per turn of its loop, so
 * a waiting one resumes once its writes complete.
 */
#include "core/feed.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/fmt.h"
#include "base/list.h"
#include "core/core.h"
#include "core/fsm.h"
#include "zk/zk_feed.h"
#include "zk/zk_path.h"

struct feed_sub {
	struct keel_list link;
	uint64_t conn;                  /* the host's connection id */
	char peer_addr[CORE_ADDR_SIZE]; /* for logs */
	uint8_t *prefix; /* the cursor's prefix */
	struct zk_feed_cursor cur;
};

struct node_feeds {
	struct node_core *core;
	uint64_t snapshot_trailing; /* log entries kept behind a snapshot */
	size_t high_water_bytes;    /* unsent output a subscriber may have */
	struct zk_feed_log log;
	struct keel_list subs; /* of feed_sub */
	uint64_t sub_count;
	bool waiting; /* feed_wait(true) is in force */
	struct keel_wbuf scratch;
};

static struct node_feeds *feeds_of(const struct node_core *core)
{
	return core->feeds;
}

enum keel_err node_feeds_init(struct node_core *core, uint64_t retain_bytes,
			      uint32_t high_water_bytes, uint32_t max_packet_bytes)
{
	struct node_feeds *f = calloc(1, sizeof(*f));
	if (f == NULL) {
		return KEEL_NOMEM;
	}
	f->core = core;
	f->snapshot_trailing = core->raft_opts.snapshot_trailing_entries;
	f->high_water_bytes = high_water_bytes > 0 ? high_water_bytes : FEED_HIGH_WATER_BYTES;
	zk_feed_log_init(&f->log, retain_bytes, (int64_t)core->applied_index);
	keel_list_init(&f->subs);
	keel_wbuf_init_dynamic(&f->scratch, 256, (size_t)max_packet_bytes + 4096u);
	core->feeds = f;
	return KEEL_OK;
}

static void set_waiting(struct node_feeds *f, bool waiting)
{
	if (f->waiting != waiting) {
		f->waiting = waiting;
		f->core->host.ops->feed_wait(f->core->host.ctx, waiting);
	}
}

void node_feeds_close(struct node_core *core)
{
	struct node_feeds *f = feeds_of(core);
	if (f == NULL) {
		return;
	}
	struct keel_list *it;
	while ((it = keel_list_pop_front(&f->subs)) != NULL) {
		struct feed_sub *s = KEEL_LIST_ITEM(it, struct feed_sub, link);
		free(s->prefix);
		free(s);
	}
	set_waiting(f, false);
	zk_feed_log_close(&f->log);
	keel_wbuf_free(&f->scratch);
	free(f);
	core->feeds = NULL;
}

static void sub_free(struct node_feeds *f, struct feed_sub *s)
{
	keel_list_remove(&s->link);
	KEEL_ASSERT(f->sub_count > 0);
	f->sub_count--;
	free(s->prefix);
	free(s);
}

/* One frame: ReplyHeader{xid, zxid, err} + body (the body only with err 0). */
static void send_frame(struct node_core *core, uint64_t conn, int32_t xid, int64_t zxid,
		       int32_t err, const struct keel_wbuf *body)
{
	size_t mark;
	struct keel_wbuf *w = core_client_begin(core, conn, &mark);
	if (w == NULL) {
		return;
	}
	zk_reply_header_encode(w, xid, zxid, err);
	if (err == ZK_OK) {
		keel_wbuf_bytes(w, body->data, body->size);
	}
	core_client_end(core, conn, mark);
}

static bool output_full(const struct node_feeds *f, const struct feed_sub *s)
{
	return f->core->host.ops->client_output_bytes(f->core->host.ctx, s->conn) >
	       f->high_water_bytes;
}

static void send_event(struct node_feeds *f, struct feed_sub *s, const struct zk_feed_change *ch,
		       uint32_t i)
{
	struct zk_feed_event ev;
	zk_feed_event_of(ch, i, s->cur.flags, &ev);
	keel_wbuf_reset(&f->scratch);
	zk_feed_event_encode(&f->scratch, &ev);
	if (!keel_wbuf_ok(&f->scratch)) {
		CORE_WARN(f->core, "feed to %s: the event at zxid %lld is larger than a frame",
			  s->peer_addr, (long long)ch->zxid);
		core_client_close(f->core, s->conn, KEEL_TOOBIG, true);
		return;
	}
	send_frame(f->core, s->conn, ZK_XID_FEED, ch->zxid, ZK_OK, &f->scratch);
}

/* The subscriber's position left the history: a final event, then close. */
static void end_compacted(struct node_feeds *f, struct feed_sub *s)
{
	CORE_INFO(f->core, "feed to %s fell behind the history (oldest zxid held %lld): closing",
		  s->peer_addr, (long long)zk_feed_log_oldest(&f->log));
	struct zk_feed_event ev = {
		.status = ZK_FEED_COMPACTED,
		.zxid = zk_feed_log_oldest(&f->log),
		.path = ZK_BYTES_NULL,
		.data = ZK_BYTES_NULL,
	};
	keel_wbuf_reset(&f->scratch);
	zk_feed_event_encode(&f->scratch, &ev);
	send_frame(f->core, s->conn, ZK_XID_FEED, ev.zxid, ZK_OK, &f->scratch);
	core_client_close(f->core, s->conn, KEEL_LIMIT, true);
	sub_free(f, s);
}

/* Sends from the subscriber's position. Returns false when it waits on its
 * connection's output (still behind), true when caught up or gone. */
static bool pump(struct node_feeds *f, struct feed_sub *s)
{
	for (;;) {
		if (output_full(f, s)) {
			return false;
		}
		const struct zk_feed_change *ch;
		uint32_t i;
		switch (zk_feed_cursor_next(&s->cur, &f->log, &ch, &i)) {
		case ZK_FEED_STEP_EVENT:
			send_event(f, s, ch, i);
			break;
		case ZK_FEED_STEP_END:
			return true;
		case ZK_FEED_STEP_COMPACTED:
			end_compacted(f, s);
			return true;
		}
	}
}

/* Pumps every subscriber; asks the host to keep calling while any waits. */
static void pump_all(struct node_feeds *f)
{
	bool behind = false;
	struct keel_list *it = keel_list_first(&f->subs);
	while (it != NULL) {
		struct keel_list *next = it->next != &f->subs ? it->next : NULL;
		struct feed_sub *s = KEEL_LIST_ITEM(it, struct feed_sub, link);
		if (!pump(f, s)) {
			behind = true;
		}
		it = next;
	}
	set_waiting(f, behind);
}

void node_feed_pump(struct node_core *core)
{
	struct node_feeds *f = feeds_of(core);
	if (f != NULL) {
		pump_all(f);
	}
}

static struct feed_sub *sub_of(struct node_feeds *f, uint64_t conn)
{
	for (struct keel_list *it = keel_list_first(&f->subs); it != NULL;
	     it = it->next != &f->subs ? it->next : NULL) {
		struct feed_sub *s = KEEL_LIST_ITEM(it, struct feed_sub, link);
		if (s->conn == conn) {
			return s;
		}
	}
	return NULL;
}

static void reply(struct node_core *core, uint64_t conn, int32_t xid, int32_t err,
		  const struct zk_feed_response *rs)
{
	struct node_feeds *f = feeds_of(core);
	keel_wbuf_reset(&f->scratch);
	if (err == ZK_OK) {
		zk_feed_response_encode(&f->scratch, rs);
	}
	send_frame(core, conn, xid, (int64_t)core->applied_index, err, &f->scratch);
}

/* Checks a request; ZK_OK or the ReplyHeader.err to answer. */
static int32_t check_request(struct node_feeds *f, uint64_t conn, const char *peer_addr,
			     const struct zk_feed_request *rq)
{
	struct zk_path_error perr;
	size_t len = zk_bytes_len(rq->path);
	if (!zk_path_validate((const char *)rq->path.data, len, &perr)) {
		CORE_DEBUG(f->core, "feed from %s: bad path (%s)", peer_addr,
			   zk_path_reason_message(perr.reason));
		return ZK_BAD_ARGUMENTS;
	}
	if (sub_of(f, conn) != NULL) {
		CORE_DEBUG(f->core, "feed from %s: the connection already has a feed", peer_addr);
		return ZK_BAD_ARGUMENTS;
	}
	return ZK_OK;
}

void node_feed_serve(struct node_core *core, uint64_t conn, const char *peer_addr,
		     const struct zk_ids *ids, int32_t xid, const uint8_t *body, size_t size)
{
	struct node_feeds *f = feeds_of(core);
	struct zk_feed_request rq;
	if (zk_feed_request_decode(&rq, body, size) != KEEL_OK) {
		reply(core, conn, xid, ZK_MARSHALLING_ERROR, NULL);
		return;
	}
	int32_t err = check_request(f, conn, peer_addr, &rq);
	if (err != ZK_OK) {
		reply(core, conn, xid, err, NULL);
		return;
	}
	/* 0 (or less): from the oldest this server holds. */
	int64_t from = rq.from_zxid > 0 ? rq.from_zxid : zk_feed_log_oldest(&f->log);
	struct zk_feed_response rs = {
		.error = ZK_FEED_OK,
		.oldest_zxid = zk_feed_log_oldest(&f->log),
		.last_zxid = (int64_t)core->applied_index,
	};
	if (from < rs.oldest_zxid) {
		rs.error = ZK_FEED_COMPACTED;
		reply(core, conn, xid, ZK_OK, &rs);
		return;
	}
	struct feed_sub *s = calloc(1, sizeof(*s));
	size_t len = zk_bytes_len(rq.path);
	uint8_t *prefix = malloc(len + 1);
	if (s == NULL || prefix == NULL) {
		free(s);
		free(prefix);
		core_client_close(core, conn, KEEL_NOMEM, false);
		return;
	}
	memcpy(prefix, rq.path.data, len);
	s->conn = conn;
	keel_fmt(s->peer_addr, sizeof(s->peer_addr), "%s", peer_addr);
	s->prefix = prefix;
	zk_feed_cursor_init(&s->cur, &f->log, from, rq.from_zxid < 1 ? 0 : rq.from_seq,
			    zk_bytes_of(prefix, len), rq.flags, ids);
	keel_list_init(&s->link);
	keel_list_push_back(&f->subs, &s->link);
	f->sub_count++;
	reply(core, conn, xid, ZK_OK, &rs);
	pump_all(f);
}

void node_feed_on_close(struct node_core *core, uint64_t conn)
{
	struct node_feeds *f = feeds_of(core);
	if (f == NULL) {
		return;
	}
	struct feed_sub *s = sub_of(f, conn);
	if (s != NULL) {
		sub_free(f, s);
	}
}

/* The history lost the changes up to `zxid` that it had not recorded:
 * every subscriber that still needs one of them ends COMPACTED. */
static void end_before(struct node_feeds *f, int64_t zxid)
{
	struct keel_list *it = keel_list_first(&f->subs);
	while (it != NULL) {
		struct keel_list *next = it->next != &f->subs ? it->next : NULL;
		struct feed_sub *s = KEEL_LIST_ITEM(it, struct feed_sub, link);
		if (s->cur.from_zxid <= zxid) {
			end_compacted(f, s);
		} else {
			zk_feed_cursor_init(&s->cur, &f->log, s->cur.from_zxid, s->cur.from_seq,
					    s->cur.prefix, s->cur.flags, s->cur.ids);
		}
		it = next;
	}
}

void node_feed_on_applied(struct node_core *core, const struct zk_result *res)
{
	struct node_feeds *f = feeds_of(core);
	if (f == NULL || res->zxid <= f->log.last_zxid) {
		return;
	}
	if (zk_feed_log_append(&f->log, fsm_zk(core->fsm), res) != KEEL_OK) {
		CORE_WARN(core,
		          "change feed: out of memory at zxid %lld; the history restarts there",
		          (long long)res->zxid);
		end_before(f, res->zxid);
	}
	if (f->sub_count > 0) {
		pump_all(f);
	}
}

void node_feed_on_snapshot_taken(struct node_core *core, uint64_t index)
{
	struct node_feeds *f = feeds_of(core);
	if (f == NULL || index <= f->snapshot_trailing) {
		return;
	}
	zk_feed_log_trim(&f->log, (int64_t)(index - f->snapshot_trailing));
	if (f->sub_count > 0) {
		pump_all(f);
	}
}

void node_feed_on_snapshot_installed(struct node_core *core, uint64_t index)
{
	struct node_feeds *f = feeds_of(core);
	if (f == NULL) {
		return;
	}
	/* The changes between what we held and the snapshot are unknown. */
	zk_feed_log_reset(&f->log, (int64_t)index);
	end_before(f, (int64_t)index);
}

void node_feed_stats(const struct node_core *core, struct node_feed_stats *out)
{
	const struct node_feeds *f = feeds_of(core);
	memset(out, 0, sizeof(*out));
	if (f == NULL) {
		return;
	}
	out->subscriptions = f->sub_count;
	out->history_changes = f->log.count;
	out->history_bytes = f->log.bytes;
	out->oldest_zxid = zk_feed_log_oldest(&f->log);
}
