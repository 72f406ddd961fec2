/*
 * zk_feed.c — change-feed consumers under the ZooKeeper workload
 * (zk_sim.h, docs/change-feed.md), and their checker.
 *
 * Three consumers (under "/", "/w" and "/e", each with or without child
 * changes and data) subscribe on the servers' real feed (core/feed.c)
 * through the transport (zkfeedworld.c) and speak its wire protocol: a
 * FeedRequest, the FeedResponse, then FeedEvent frames, each encoded by
 * the server and decoded here with keel's decoders. A consumer follows
 * the client's rules (kc_feed):
 *
 *	SUBSCRIBE from the position after the last change it got, on its
 *	server or the next one that can be reached; a server that no longer
 *	holds the position answers COMPACTED: try the next; every reachable
 *	one did: an announced gap, and it restarts from the oldest the last
 *	one holds
 *	  -> READ a few frames at a time (the server sends while the unread
 *	     bytes beyond the socket buffers stay under its high water)
 *	  -> now and then its server "dies": it hangs up and subscribes on
 *	     another one
 *	  -> now and then it stops reading for a while (the server's history
 *	     moves on; once its position is dropped the server sends a
 *	     COMPACTED event and closes)
 *
 * The checker: each consumer's output is exactly the committed changes
 * under its path (a reference history appended as the log commits), in
 * position order, each once, with the same type, path, Stat version,
 * mzxid (and data) — except inside the gaps it announced — and no server
 * broke the protocol (a reply first, a COMPACTED answer only for a
 * position it really does not hold, frames that decode).
 *
 * Randomness is the feed's own PRNG, so the workload's runs are the same
 * with or without it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"
#include "sim/zk_sim.h"
#include "zk/zk_codes.h"
#include "zk/zk_proto.h"

static const char *const prefixes[SIMZK_FEED_CONSUMERS] = {"/", "/w", "/e"};

void simzk_feed_init(struct simzk_feed *f, uint64_t seed, enum simzk_bug bug,
		     const struct simzk_feed_transport *tr)
{
	memset(f, 0, sizeof(*f));
	keel_rng_seed(&f->rng, seed);
	f->bug = bug;
	f->tr = *tr;
	zk_feed_log_init(&f->ref, SIZE_MAX, 0);
	for (uint32_t i = 0; i < SIMZK_FEED_CONSUMERS; i++) {
		struct simzk_feed_consumer *c = &f->c[i];
		c->prefix = prefixes[i];
		c->flags = (keel_rng_chance(&f->rng, 1, 2) ? ZK_FEED_CHILDREN : 0) |
			   (keel_rng_chance(&f->rng, 1, 2) ? ZK_FEED_WITH_DATA : 0);
		c->window_bytes = (size_t)keel_rng_below(&f->rng, 4096);
		c->server = (uint32_t)keel_rng_below(&f->rng, tr->servers);
		c->next_zxid = 1;
	}
}

static void inbox_clear(struct simzk_feed_consumer *c)
{
	while (c->in_count > 0) {
		free(c->inbox[c->in_head].data);
		c->in_head = (c->in_head + 1) % c->in_cap;
		c->in_count--;
	}
	c->unread_bytes = 0;
}

void simzk_feed_free(struct simzk_feed *f)
{
	zk_feed_log_close(&f->ref);
	for (uint32_t i = 0; i < SIMZK_FEED_CONSUMERS; i++) {
		inbox_clear(&f->c[i]);
		free(f->c[i].inbox);
		free(f->c[i].got);
		free(f->c[i].gaps);
	}
}

size_t simzk_feed_history_bytes(struct simzk_feed *f)
{
	return (size_t)keel_rng_between(&f->rng, 16u << 10, 1u << 20);
}

uint32_t simzk_feed_high_water_bytes(struct simzk_feed *f)
{
	return (uint32_t)keel_rng_between(&f->rng, 1u << 10, 8u << 10);
}

void simzk_feed_on_commit(struct simzk_feed *f, const struct zk_state *st,
			  const struct zk_result *res)
{
	KEEL_ASSERT(zk_feed_log_append(&f->ref, st, res) == KEEL_OK);
}

static void *grow(void *p, size_t *cap, size_t need, size_t item)
{
	if (need <= *cap) {
		return p;
	}
	size_t cap2 = *cap == 0 ? 64 : *cap * 2;
	void *q = realloc(p, cap2 * item);
	KEEL_ASSERT(q != NULL);
	*cap = cap2;
	return q;
}

__attribute__((format(printf, 2, 3))) static void broken(struct simzk_feed *f, const char *fmt,
							  ...)
{
	if (f->broken) {
		return;
	}
	f->broken = true;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->why, sizeof(f->why), fmt, ap);
	va_end(ap);
}

/* ---- the connection ---- */

static struct simzk_feed_consumer *consumer_of(struct simzk_feed *f, uint64_t conn)
{
	struct simzk_feed_consumer *c = &f->c[conn % SIMZK_FEED_CONSUMERS];
	return c->conn == conn ? c : NULL;
}

void simzk_feed_on_frame(struct simzk_feed *f, uint64_t conn, const uint8_t *frame, size_t size)
{
	struct simzk_feed_consumer *c = consumer_of(f, conn);
	if (c == NULL) {
		broken(f, "feed: a frame on connection %llu, which its consumer hung up",
		       (unsigned long long)conn);
		return;
	}
	if (c->in_count == c->in_cap) {
		size_t cap = c->in_cap == 0 ? 16 : 2 * c->in_cap;
		struct simzk_feed_frame *n = malloc(cap * sizeof(*n));
		KEEL_ASSERT(n != NULL);
		for (size_t i = 0; i < c->in_count; i++) {
			n[i] = c->inbox[(c->in_head + i) % c->in_cap];
		}
		free(c->inbox);
		c->inbox = n;
		c->in_head = 0;
		c->in_cap = cap;
	}
	struct simzk_feed_frame fr = {NULL, 0};
	if (frame != NULL) {
		fr.data = malloc(size > 0 ? size : 1);
		KEEL_ASSERT(fr.data != NULL);
		memcpy(fr.data, frame, size);
		fr.size = size;
		c->unread_bytes += size + 4; /* with its length prefix */
	}
	c->inbox[(c->in_head + c->in_count) % c->in_cap] = fr;
	c->in_count++;
}

size_t simzk_feed_unsent_bytes(const struct simzk_feed *f, uint64_t conn)
{
	const struct simzk_feed_consumer *c = &f->c[conn % SIMZK_FEED_CONSUMERS];
	if (c->conn != conn || c->unread_bytes <= c->window_bytes) {
		return 0;
	}
	return c->unread_bytes - c->window_bytes;
}

/* Pops the oldest unread frame (false: none). */
static bool inbox_pop(struct simzk_feed_consumer *c, struct simzk_feed_frame *out)
{
	if (c->in_count == 0) {
		return false;
	}
	*out = c->inbox[c->in_head];
	c->in_head = (c->in_head + 1) % c->in_cap;
	c->in_count--;
	if (out->data != NULL) {
		c->unread_bytes -= out->size + 4;
	}
	return true;
}

static void hang_up(struct simzk_feed *f, struct simzk_feed_consumer *c)
{
	if (c->conn != 0) {
		uint64_t conn = c->conn;
		c->conn = 0;
		f->tr.hang_up(f->tr.ctx, conn);
	}
	inbox_clear(c);
}

/* The server closed the connection (after the frames before it). */
static void closed_by_server(struct simzk_feed_consumer *c)
{
	c->conn = 0;
	inbox_clear(c);
}

/* ---- subscribing ---- */

enum sub_outcome { SUB_OK, SUB_UNREACHABLE, SUB_COMPACTED, SUB_BROKEN };

/* Reads the FeedResponse to the request just sent. */
static enum sub_outcome read_reply(struct simzk_feed *f, struct simzk_feed_consumer *c,
				   uint32_t server, int64_t from_zxid, int64_t *oldest)
{
	struct simzk_feed_frame fr;
	if (!inbox_pop(c, &fr) || fr.data == NULL) {
		broken(f, "feed: server %u sent no reply to consumer %s's FeedRequest", server,
		       c->prefix);
		return SUB_BROKEN;
	}
	struct keel_rbuf r;
	keel_rbuf_init(&r, fr.data, fr.size);
	struct zk_reply_header rh;
	struct zk_feed_response rs;
	enum sub_outcome out = SUB_BROKEN;
	if (zk_reply_header_decode(&rh, &r) != KEEL_OK || rh.xid != c->xid || rh.err != ZK_OK ||
	    zk_feed_response_decode(&rs, r.data + r.pos, keel_rbuf_remaining(&r)) != KEEL_OK) {
		broken(f, "feed: server %u answered consumer %s's FeedRequest (xid %d) with a "
			  "frame of %zu bytes that is not its FeedResponse",
		       server, c->prefix, (int)c->xid, fr.size);
	} else if (rs.error == ZK_FEED_COMPACTED && rs.oldest_zxid <= from_zxid) {
		broken(f, "feed: server %u said COMPACTED from zxid %lld, yet holds from %lld",
		       server, (long long)from_zxid, (long long)rs.oldest_zxid);
	} else if (rs.error == ZK_FEED_OK && rs.oldest_zxid > from_zxid) {
		broken(f, "feed: server %u accepted zxid %lld though it holds only from %lld",
		       server, (long long)from_zxid, (long long)rs.oldest_zxid);
	} else if (rs.error == ZK_FEED_COMPACTED) {
		*oldest = rs.oldest_zxid;
		out = SUB_COMPACTED;
	} else {
		out = SUB_OK;
	}
	free(fr.data);
	return out;
}

/* One FeedRequest on `server` from the consumer's position. */
static enum sub_outcome try_subscribe(struct simzk_feed *f, struct simzk_feed_consumer *c,
				      uint32_t server, int64_t *oldest)
{
	KEEL_ASSERT(c->conn == 0 && c->in_count == 0);
	struct zk_feed_request rq = {
		.from_zxid = c->next_zxid,
		.from_seq = c->next_seq,
		.path = zk_bytes_str(c->prefix),
		.flags = c->flags,
	};
	if (f->bug == SIMZK_BUG_FEED_RESUME_BY_ZXID && rq.from_seq > 0) {
		/* PLANTED BUG: resume after the last transaction seen, not after
		 * the last change: the rest of a half-read multi is lost. */
		rq.from_zxid++;
		rq.from_seq = 0;
	}
	uint8_t body[512];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, body, sizeof(body));
	zk_feed_request_encode(&w, &rq);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	uint32_t k = (uint32_t)(c - f->c);
	c->conn = ++f->next_conn * SIMZK_FEED_CONSUMERS + k;
	c->xid++;
	if (!f->tr.subscribe(f->tr.ctx, server, c->conn, c->xid, w.data, w.size)) {
		c->conn = 0;
		return SUB_UNREACHABLE;
	}
	enum sub_outcome out = read_reply(f, c, server, rq.from_zxid, oldest);
	if (out != SUB_OK) {
		hang_up(f, c);
		return out;
	}
	c->server = server;
	c->subscriptions++;
	return SUB_OK;
}

static void announce_gap(struct simzk_feed_consumer *c, int64_t to_zxid)
{
	c->gaps = grow(c->gaps, &c->gap_cap, c->gap_count + 1, sizeof(*c->gaps));
	c->gaps[c->gap_count++] = (struct simzk_feed_gap){c->next_zxid, c->next_seq, to_zxid};
	c->next_zxid = to_zxid + 1;
	c->next_seq = 0;
}

/* Subscribes on the consumer's server or the next one that takes it
 * (`final`: only settled servers). Every reachable one answered
 * COMPACTED: a gap up to the oldest the last one holds, and it starts
 * there. None reachable: it stays unsubscribed (tries again later). */
static void subscribe(struct simzk_feed *f, struct simzk_feed_consumer *c, bool final)
{
	uint32_t n = f->tr.servers;
	uint32_t refused = 0, last = 0;
	int64_t oldest = 0;
	for (uint32_t k = 0; k < n && !f->broken; k++) {
		uint32_t server = (c->server + k) % n;
		if (final && !f->tr.settled(f->tr.ctx, server)) {
			continue;
		}
		switch (try_subscribe(f, c, server, &oldest)) {
		case SUB_OK:
			return;
		case SUB_COMPACTED:
			c->compacted++;
			refused++;
			last = server;
			break;
		case SUB_UNREACHABLE:
		case SUB_BROKEN:
			break;
		}
	}
	if (refused == 0 || f->broken) {
		return;
	}
	announce_gap(c, oldest - 1);
	int64_t again;
	if (try_subscribe(f, c, last, &again) == SUB_COMPACTED) {
		broken(f, "feed: server %u said COMPACTED from %lld, the oldest it had just said it "
			  "holds",
		       last, (long long)c->next_zxid);
	}
}

/* ---- reading ---- */

static void record(struct simzk_feed_consumer *c, const struct zk_feed_event *ev)
{
	c->got = grow(c->got, &c->got_cap, c->got_count + 1, sizeof(*c->got));
	c->got[c->got_count++] = (struct simzk_feed_got){
		.zxid = ev->zxid,
		.seq = ev->seq,
		.type = ev->type,
		.path_hash = keel_hash_bytes(ev->path.data, zk_bytes_len(ev->path), 0),
		.data_hash = (c->flags & ZK_FEED_WITH_DATA) != 0
				     ? keel_hash_bytes(ev->data.data, zk_bytes_len(ev->data),
						       (uint64_t)ev->data.size)
				     : 0,
		.version = ev->stat.version,
		.mzxid = ev->stat.mzxid,
	};
	c->next_zxid = ev->zxid;
	c->next_seq = ev->seq + 1;
}

/* One event frame; false when the stream ended (COMPACTED, or broken). */
static bool read_event(struct simzk_feed *f, struct simzk_feed_consumer *c,
		       const struct simzk_feed_frame *fr)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, fr->data, fr->size);
	struct zk_reply_header rh;
	struct zk_feed_event ev;
	if (zk_reply_header_decode(&rh, &r) != KEEL_OK || rh.xid != ZK_XID_FEED ||
	    rh.err != ZK_OK ||
	    zk_feed_event_decode(&ev, r.data + r.pos, keel_rbuf_remaining(&r)) != KEEL_OK) {
		broken(f, "feed: server %u sent consumer %s a frame of %zu bytes that is not a "
			  "FeedEvent",
		       c->server, c->prefix, fr->size);
		return false;
	}
	if (ev.status == ZK_FEED_COMPACTED) {
		if (ev.zxid <= c->next_zxid) {
			broken(f, "feed: server %u told consumer %s at %lld.%d its position was "
				  "compacted, yet holds from %lld",
			       c->server, c->prefix, (long long)c->next_zxid, (int)c->next_seq,
			       (long long)ev.zxid);
		}
		c->compacted++;
		return false;
	}
	record(c, &ev);
	return true;
}

/* Reads up to `max` frames (all there are with max 0). */
static void consume(struct simzk_feed *f, struct simzk_feed_consumer *c, uint64_t max)
{
	uint64_t n = 0;
	struct simzk_feed_frame fr;
	while ((max == 0 || n < max) && c->conn != 0 && inbox_pop(c, &fr)) {
		n++;
		if (fr.data == NULL) {
			closed_by_server(c);
			return;
		}
		bool more = read_event(f, c, &fr);
		free(fr.data);
		if (!more) {
			/* the server closes after a COMPACTED event */
			hang_up(f, c);
			return;
		}
	}
	if (n > 0 && c->conn != 0) {
		f->tr.drained(f->tr.ctx, c->conn);
	}
}

void simzk_feed_step(struct simzk_feed *f)
{
	f->steps++;
	struct simzk_feed_consumer *c = &f->c[keel_rng_below(&f->rng, SIMZK_FEED_CONSUMERS)];
	uint64_t r = keel_rng_below(&f->rng, 1000);
	if (f->steps < c->stalled_until || f->broken) {
		return;
	}
	if (r < 10) {
		/* Its server dies: it goes on on another one. */
		hang_up(f, c);
		c->server = (c->server + 1 + (uint32_t)keel_rng_below(&f->rng, f->tr.servers - 1)) %
			    f->tr.servers;
		c->moves++;
		return;
	}
	if (r < 14) {
		/* It stops reading for a while (the histories move on). */
		c->stalled_until = f->steps + keel_rng_between(&f->rng, 100, 1500);
		return;
	}
	if (c->conn == 0) {
		subscribe(f, c, false);
	}
	if (c->conn != 0) {
		consume(f, c, keel_rng_between(&f->rng, 1, 6));
	}
}

void simzk_feed_drain(struct simzk_feed *f)
{
	for (uint32_t i = 0; i < SIMZK_FEED_CONSUMERS && !f->broken; i++) {
		struct simzk_feed_consumer *c = &f->c[i];
		/* What it already has, then on a server that holds everything. */
		consume(f, c, 0);
		hang_up(f, c);
		subscribe(f, c, true);
		if (c->conn == 0) {
			broken(f, "feed: consumer %s found no settled server to read to the end",
			       c->prefix);
			return;
		}
		while (c->conn != 0 && c->in_count > 0 && !f->broken) {
			consume(f, c, 0);
		}
		hang_up(f, c);
	}
}

/* ---- the checker ---- */

static bool in_gap(const struct simzk_feed_consumer *c, int64_t zxid, int32_t seq)
{
	for (size_t g = 0; g < c->gap_count; g++) {
		const struct simzk_feed_gap *gap = &c->gaps[g];
		if (!zk_feed_position_before(zxid, seq, gap->from_zxid, gap->from_seq) &&
		    zxid <= gap->to_zxid) {
			return true;
		}
	}
	return false;
}

static uint64_t ref_data_hash(const struct simzk_feed_consumer *c, const struct zk_feed_change *ch,
			      const struct zk_feed_rec *r)
{
	if ((c->flags & ZK_FEED_WITH_DATA) == 0) {
		return 0;
	}
	struct zk_feed_event ev;
	zk_feed_event_of(ch, (uint32_t)(r - ch->recs), c->flags, &ev);
	return keel_hash_bytes(ev.data.data, zk_bytes_len(ev.data), (uint64_t)ev.data.size);
}

static bool check_consumer(const struct simzk_feed *f, uint32_t n, char *why, size_t why_size)
{
	const struct simzk_feed_consumer *c = &f->c[n];
	struct zk_feed_cursor cur;
	zk_feed_cursor_init(&cur, &f->ref, 1, 0, zk_bytes_str(c->prefix), c->flags, NULL);
	size_t k = 0;
	const struct zk_feed_change *ch;
	uint32_t i;
	while (zk_feed_cursor_next(&cur, &f->ref, &ch, &i) == ZK_FEED_STEP_EVENT) {
		if (in_gap(c, ch->zxid, (int32_t)i)) {
			continue;
		}
		const struct zk_feed_rec *r = &ch->recs[i];
		struct zk_bytes path = zk_feed_rec_path(ch, r);
		if (k == c->got_count) {
			snprintf(why, why_size, "feed: consumer %u (%s) missed %lld.%u %s %.*s", n,
				 c->prefix, (long long)ch->zxid, i, zk_feed_type_name(r->type),
				 (int)zk_bytes_len(path), (const char *)path.data);
			return false;
		}
		const struct simzk_feed_got *g = &c->got[k++];
		if (g->zxid != ch->zxid || g->seq != (int32_t)i || g->type != r->type ||
		    g->path_hash != keel_hash_bytes(path.data, zk_bytes_len(path), 0) ||
		    g->version != r->stat.version || g->mzxid != r->stat.mzxid ||
		    g->data_hash != ref_data_hash(c, ch, r)) {
			snprintf(why, why_size,
				 "feed: consumer %u (%s) change %zu is %lld.%d %s, expected %lld.%u %s "
				 "%.*s",
				 n, c->prefix, k - 1, (long long)g->zxid, g->seq,
				 zk_feed_type_name(g->type), (long long)ch->zxid, i,
				 zk_feed_type_name(r->type), (int)zk_bytes_len(path),
				 (const char *)path.data);
			return false;
		}
	}
	if (k != c->got_count) {
		snprintf(why, why_size, "feed: consumer %u (%s) got %zu changes, %zu committed", n,
			 c->prefix, c->got_count, k);
		return false;
	}
	return true;
}

bool simzk_check_feed(const struct simzk_feed *f, char *why, size_t why_size)
{
	if (f->broken) {
		snprintf(why, why_size, "%s", f->why);
		return false;
	}
	for (uint32_t n = 0; n < SIMZK_FEED_CONSUMERS; n++) {
		if (!check_consumer(f, n, why, why_size)) {
			return false;
		}
	}
	return true;
}

void simzk_feed_counts(const struct simzk_feed *f, struct simzk_result *r, uint64_t *trace)
{
	for (uint32_t i = 0; i < SIMZK_FEED_CONSUMERS; i++) {
		const struct simzk_feed_consumer *c = &f->c[i];
		for (size_t k = 0; k < c->got_count; k++) {
			const struct simzk_feed_got *g = &c->got[k];
			uint64_t fw[] = {i, (uint64_t)g->zxid, (uint64_t)g->seq};
			*trace = keel_hash_bytes(fw, sizeof(fw), *trace);
		}
		r->feed_changes += c->got_count;
		r->feed_subscriptions += c->subscriptions;
		r->feed_moves += c->moves;
		r->feed_compacted += c->compacted;
		r->feed_gaps += c->gap_count;
	}
}
