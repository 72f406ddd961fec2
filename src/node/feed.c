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
 * output passes FEED_HIGH_WATER_BYTES. The check handle runs `pump` for
 * every subscriber after each loop turn while any is behind, so a waiting
 * one resumes once its writes complete.
 */
#include "node/feed.h"

#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "base/assert.h"
#include "base/list.h"
#include "core/core.h"
#include "core/fsm.h"
#include "net/net.h"
#include "node/client.h"
#include "node/metrics.h"
#include "node/node.h"
#include "os/log.h"
#include "zk/zk_feed.h"
#include "zk/zk_path.h"

struct feed_sub {
	struct keel_list link;
	struct node_client *client;
	uint8_t *prefix; /* the cursor's prefix */
	struct zk_feed_cursor cur;
};

struct node_feeds {
	struct node *n;
	struct zk_feed_log log;
	struct keel_list subs; /* of feed_sub */
	uint64_t sub_count;
	uv_check_t check;
	bool check_active;
	struct keel_wbuf scratch;
};

static struct node_feeds *feeds_of(struct node *n)
{
	return n->feeds;
}

static void on_check(uv_check_t *h);

enum keel_err node_feeds_init(struct node *n)
{
	struct node_feeds *f = calloc(1, sizeof(*f));
	if (f == NULL) {
		return KEEL_NOMEM;
	}
	f->n = n;
	zk_feed_log_init(&f->log, n->cfg.feed_retain_bytes, (int64_t)n->core.applied_index);
	keel_list_init(&f->subs);
	keel_wbuf_init_dynamic(&f->scratch, 256, (size_t)n->cfg.max_packet_bytes + 4096u);
	uv_check_init(n->loop, &f->check);
	f->check.data = f;
	n->feeds = f;
	return KEEL_OK;
}

static void on_check_closed(uv_handle_t *h)
{
	struct node_feeds *f = h->data;
	keel_wbuf_free(&f->scratch);
	free(f);
}

void node_feeds_close(struct node *n)
{
	struct node_feeds *f = feeds_of(n);
	if (f == NULL) {
		return;
	}
	struct keel_list *it;
	while ((it = keel_list_pop_front(&f->subs)) != NULL) {
		struct feed_sub *s = KEEL_LIST_ITEM(it, struct feed_sub, link);
		free(s->prefix);
		free(s);
	}
	zk_feed_log_close(&f->log);
	n->feeds = NULL;
	uv_check_stop(&f->check);
	if (uv_is_closing((uv_handle_t *)&f->check)) {
		/* node_close closed every handle and ran the loop: it is closed. */
		on_check_closed((uv_handle_t *)&f->check);
	} else {
		uv_close((uv_handle_t *)&f->check, on_check_closed);
	}
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
static void send_frame(struct node *n, struct node_client *c, int32_t xid, int64_t zxid,
		       int32_t err, const struct keel_wbuf *body)
{
	size_t mark;
	struct keel_wbuf *w = core_client_begin(&n->core, c->id, &mark);
	if (w == NULL) {
		return;
	}
	zk_reply_header_encode(w, xid, zxid, err);
	if (err == ZK_OK) {
		keel_wbuf_bytes(w, body->data, body->size);
	}
	core_client_end(&n->core, c->id, mark);
}

static bool output_full(const struct node_client *c)
{
	return net_conn_pending_output(&c->conn) > FEED_HIGH_WATER_BYTES;
}

static void send_event(struct node_feeds *f, struct feed_sub *s, const struct zk_feed_change *ch,
		       uint32_t i)
{
	struct zk_feed_event ev;
	zk_feed_event_of(ch, i, s->cur.flags, &ev);
	keel_wbuf_reset(&f->scratch);
	zk_feed_event_encode(&f->scratch, &ev);
	if (!keel_wbuf_ok(&f->scratch)) {
		KEEL_WARN("feed to %s: the event at zxid %lld is larger than a frame",
			  s->client->conn.peer_addr, (long long)ch->zxid);
		core_client_close(&f->n->core, s->client->id, KEEL_TOOBIG, true);
		return;
	}
	send_frame(f->n, s->client, ZK_XID_FEED, ch->zxid, ZK_OK, &f->scratch);
}

/* The subscriber's position left the history: a final event, then close. */
static void end_compacted(struct node_feeds *f, struct feed_sub *s)
{
	KEEL_INFO("feed to %s fell behind the history (oldest zxid held %lld): closing",
		  s->client->conn.peer_addr,
		  (long long)zk_feed_log_oldest(&f->log));
	struct zk_feed_event ev = {
		.status = ZK_FEED_COMPACTED,
		.zxid = zk_feed_log_oldest(&f->log),
		.path = ZK_BYTES_NULL,
		.data = ZK_BYTES_NULL,
	};
	keel_wbuf_reset(&f->scratch);
	zk_feed_event_encode(&f->scratch, &ev);
	send_frame(f->n, s->client, ZK_XID_FEED, ev.zxid, ZK_OK, &f->scratch);
	core_client_close(&f->n->core, s->client->id, KEEL_LIMIT, true);
	sub_free(f, s);
}

/* Sends from the subscriber's position. Returns false when it waits on its
 * connection's output (still behind), true when caught up or gone. */
static bool pump(struct node_feeds *f, struct feed_sub *s)
{
	for (;;) {
		if (output_full(s->client)) {
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

/* Pumps every subscriber; keeps the check handle on while any waits. */
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
	if (behind && !f->check_active) {
		uv_check_start(&f->check, on_check);
		f->check_active = true;
	} else if (!behind && f->check_active) {
		uv_check_stop(&f->check);
		f->check_active = false;
	}
}

static void on_check(uv_check_t *h)
{
	pump_all(h->data);
}

static struct feed_sub *sub_of(struct node_feeds *f, const struct node_client *c)
{
	for (struct keel_list *it = keel_list_first(&f->subs); it != NULL;
	     it = it->next != &f->subs ? it->next : NULL) {
		struct feed_sub *s = KEEL_LIST_ITEM(it, struct feed_sub, link);
		if (s->client == c) {
			return s;
		}
	}
	return NULL;
}

static void reply(struct node *n, struct node_client *c, int32_t xid, int32_t err,
		  const struct zk_feed_response *rs)
{
	struct node_feeds *f = feeds_of(n);
	keel_wbuf_reset(&f->scratch);
	if (err == ZK_OK) {
		zk_feed_response_encode(&f->scratch, rs);
	}
	send_frame(n, c, xid, (int64_t)n->core.applied_index, err, &f->scratch);
}

/* Checks a request; ZK_OK or the ReplyHeader.err to answer. */
static int32_t check_request(struct node_feeds *f, struct node_client *c,
			     const struct zk_feed_request *rq)
{
	struct zk_path_error perr;
	size_t len = zk_bytes_len(rq->path);
	if (!zk_path_validate((const char *)rq->path.data, len, &perr)) {
		KEEL_DEBUG("feed from %s: bad path (%s)", c->conn.peer_addr,
			   zk_path_reason_message(perr.reason));
		return ZK_BAD_ARGUMENTS;
	}
	if (sub_of(f, c) != NULL) {
		KEEL_DEBUG("feed from %s: the connection already has a feed",
			   c->conn.peer_addr);
		return ZK_BAD_ARGUMENTS;
	}
	return ZK_OK;
}

void node_feed_serve(struct node *n, struct node_client *c, const struct zk_ids *ids, int32_t xid,
		     const uint8_t *body, size_t size)
{
	struct node_feeds *f = feeds_of(n);
	struct zk_feed_request rq;
	if (zk_feed_request_decode(&rq, body, size) != KEEL_OK) {
		reply(n, c, xid, ZK_MARSHALLING_ERROR, NULL);
		return;
	}
	int32_t err = check_request(f, c, &rq);
	if (err != ZK_OK) {
		reply(n, c, xid, err, NULL);
		return;
	}
	/* 0 (or less): from the oldest this server holds. */
	int64_t from = rq.from_zxid > 0 ? rq.from_zxid : zk_feed_log_oldest(&f->log);
	struct zk_feed_response rs = {
		.error = ZK_FEED_OK,
		.oldest_zxid = zk_feed_log_oldest(&f->log),
		.last_zxid = (int64_t)n->core.applied_index,
	};
	if (from < rs.oldest_zxid) {
		rs.error = ZK_FEED_COMPACTED;
		reply(n, c, xid, ZK_OK, &rs);
		return;
	}
	struct feed_sub *s = calloc(1, sizeof(*s));
	size_t len = zk_bytes_len(rq.path);
	uint8_t *prefix = malloc(len + 1);
	if (s == NULL || prefix == NULL) {
		free(s);
		free(prefix);
		core_client_close(&n->core, c->id, KEEL_NOMEM, false);
		return;
	}
	memcpy(prefix, rq.path.data, len);
	s->client = c;
	s->prefix = prefix;
	zk_feed_cursor_init(&s->cur, &f->log, from, rq.from_zxid < 1 ? 0 : rq.from_seq,
			    zk_bytes_of(prefix, len), rq.flags, ids);
	keel_list_init(&s->link);
	keel_list_push_back(&f->subs, &s->link);
	f->sub_count++;
	reply(n, c, xid, ZK_OK, &rs);
	pump_all(f);
}

void node_feed_on_close(struct node *n, struct node_client *c)
{
	struct node_feeds *f = feeds_of(n);
	if (f == NULL) {
		return;
	}
	struct feed_sub *s = sub_of(f, c);
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

void node_feed_on_applied(struct node *n, const struct zk_result *res)
{
	struct node_feeds *f = feeds_of(n);
	if (f == NULL || res->zxid <= f->log.last_zxid) {
		return;
	}
	if (zk_feed_log_append(&f->log, fsm_zk(n->core.fsm), res) != KEEL_OK) {
		KEEL_WARN("change feed: out of memory at zxid %lld; the history restarts there",
			  (long long)res->zxid);
		end_before(f, res->zxid);
	}
	if (f->sub_count > 0) {
		pump_all(f);
	}
}

void node_feed_on_snapshot_taken(struct node *n, uint64_t index)
{
	struct node_feeds *f = feeds_of(n);
	if (f == NULL || index <= n->cfg.snapshot_trailing) {
		return;
	}
	zk_feed_log_trim(&f->log, (int64_t)(index - n->cfg.snapshot_trailing));
	if (f->sub_count > 0) {
		pump_all(f);
	}
}

void node_feed_on_snapshot_installed(struct node *n, uint64_t index)
{
	struct node_feeds *f = feeds_of(n);
	if (f == NULL) {
		return;
	}
	/* The changes between what we held and the snapshot are unknown. */
	zk_feed_log_reset(&f->log, (int64_t)index);
	end_before(f, (int64_t)index);
}

void node_feed_metrics(struct node *n, struct keel_wbuf *w)
{
	struct node_feeds *f = feeds_of(n);
	if (f == NULL) {
		return;
	}
	metrics_gauge(w, "keel_feed_subscriptions", "Change feed subscriptions on this server",
		      (double)f->sub_count);
	metrics_gauge(w, "keel_feed_history_changes",
	              "Transactions held in the change feed history", (double)f->log.count);
	metrics_gauge(w, "keel_feed_history_bytes", "Bytes of the change feed history",
		      (double)f->log.bytes);
	metrics_gauge(w, "keel_feed_oldest_zxid", "Oldest start the change feed accepts",
		      (double)zk_feed_log_oldest(&f->log));
}
