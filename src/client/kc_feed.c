/*
 * kc_feed.c — the change feed on keel's client (kc.h, zk/zk_feed.h).
 *
 *   NOT SUBSCRIBED --kc_feed_poll: FeedRequest from next position--> SUBSCRIBED
 *        ^                                                            |
 *        +------ c->connects moved on (a reconnect, any server) -------+
 *
 * Delivered changes advance the position (next_zxid, next_seq); a change
 * at an earlier position is never delivered twice.
 */
#include <stdlib.h>
#include <string.h>

#include "client/kc.h"
#include "client/kc_internal.h"
#include "zk/zk_feed.h"
#include "zk/zk_path.h"

static void on_push(void *ctx, int32_t xid, int64_t zxid, int32_t err, const uint8_t *body,
		    size_t body_size)
{
	(void)zxid;
	(void)err;
	struct kc_feed *f = ctx;
	if (xid != ZK_XID_FEED) {
		return; /* not ours: no other keel push is in use on this client */
	}
	struct zk_feed_event ev;
	if (zk_feed_event_decode(&ev, body, body_size) != KEEL_OK) {
		f->bad_frame = true;
		return;
	}
	if (ev.status == ZK_FEED_COMPACTED) {
		f->compacted = true;
		f->oldest_zxid = ev.zxid;
		return;
	}
	if (ev.status != ZK_FEED_OK || zk_feed_position_before(ev.zxid, ev.seq, f->next_zxid, f->next_seq)) {
		return;
	}
	struct kc_feed_change ch = {ev.zxid, ev.seq, ev.type, ev.path, ev.stat, ev.data};
	f->compacted_tries = 0;
	f->next_zxid = ev.zxid;
	f->next_seq = ev.seq + 1;
	f->on_change(f->ctx, &ch);
}

enum keel_err kc_feed_init(struct kc_feed *f, struct kc_client *c, const char *path,
			   int64_t from_zxid, int32_t flags, kc_feed_fn on_change, void *ctx)
{
	memset(f, 0, sizeof(*f));
	struct zk_path_error perr;
	if (path == NULL || on_change == NULL || (flags & ~ZK_FEED_FLAGS_ALL) != 0 ||
	    !zk_path_validate(path, strlen(path), &perr)) {
		return KEEL_INVAL;
	}
	f->path = strdup(path);
	if (f->path == NULL) {
		return KEEL_NOMEM;
	}
	f->flags = flags;
	f->next_zxid = from_zxid < 0 ? 0 : from_zxid; /* 0: the server's oldest */
	f->on_change = on_change;
	f->ctx = ctx;
	kc_feed_rebind(f, c);
	return KEEL_OK;
}

void kc_feed_rebind(struct kc_feed *f, struct kc_client *c)
{
	/* An event carries a whole node's data plus its path and Stat: room
	 * for the largest node a server with jute.maxbuffer 0xfffff holds. The
	 * receive buffer grows on demand up to this bound. */
	if (c->opt.max_packet < KC_FEED_MAX_PACKET) {
		c->opt.max_packet = KC_FEED_MAX_PACKET;
	}
	f->c = c;
	f->subscribed_on = 0;
	c->opt.on_push = on_push;
	c->opt.push_ctx = f;
}

void kc_feed_close(struct kc_feed *f)
{
	if (f->c != NULL && f->c->opt.push_ctx == f) {
		f->c->opt.on_push = NULL;
		f->c->opt.push_ctx = NULL;
	}
	free(f->path);
	f->path = NULL;
}

static int32_t subscribe(struct kc_feed *f)
{
	struct zk_feed_request rq = {f->next_zxid, f->next_seq, zk_bytes_str(f->path), f->flags};
	uint8_t mem[64 + 4096];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, mem, sizeof(mem));
	zk_feed_request_encode(&w, &rq);
	if (!keel_wbuf_ok(&w)) {
		return ZK_BAD_ARGUMENTS;
	}
	struct kc_raw_reply reply;
	int32_t rc = kc_call_raw(f->c, ZK_OP_KEEL_FEED, w.data, w.size, &reply);
	if (rc != ZK_OK) {
		return rc;
	}
	struct zk_feed_response rs;
	if (zk_feed_response_decode(&rs, reply.body, reply.body_size) != KEEL_OK) {
		kc_conn_lose(f->c, "feed: the reply does not decode");
		return ZK_MARSHALLING_ERROR;
	}
	if (rs.error == ZK_FEED_COMPACTED) {
		f->compacted = true;
		f->oldest_zxid = rs.oldest_zxid;
		return KC_FEED_COMPACTED;
	}
	f->subscribed_on = f->c->connects;
	return ZK_OK;
}

/* Not subscribed on the current connection: never yet, a new connection
 * since, or none (the subscribe call reconnects, so no change can pass
 * between a reconnect and the subscription). */
static bool needs_subscribe(const struct kc_feed *f)
{
	return f->subscribed_on == 0 || f->subscribed_on != f->c->connects ||
	       kc_state(f->c) == KC_DISCONNECTED || kc_state(f->c) == KC_IDLE;
}

/* A server no longer holds the position: try the others (each holds its
 * own range) before giving up. */
static int32_t on_compacted(struct kc_feed *f)
{
	f->compacted_tries++;
	if (f->compacted_tries >= f->c->server_count) {
		return KC_FEED_COMPACTED;
	}
	f->compacted = false;
	f->subscribed_on = 0;
	kc_conn_lose(f->c, "feed: this server no longer holds the position; trying another");
	return ZK_CONNECTION_LOSS;
}

int32_t kc_feed_poll(struct kc_feed *f, int timeout_ms)
{
	if (f->compacted) {
		return KC_FEED_COMPACTED; /* final */
	}
	int32_t rc = ZK_OK;
	if (needs_subscribe(f)) {
		f->subscribed_on = 0;
		rc = subscribe(f);
	}
	if (rc == ZK_OK && !f->compacted && !f->bad_frame) {
		rc = kc_poll(f->c, timeout_ms);
	}
	if (f->bad_frame) {
		f->bad_frame = false;
		f->subscribed_on = 0;
		kc_conn_lose(f->c, "feed: an event does not decode");
		return ZK_MARSHALLING_ERROR;
	}
	return f->compacted ? on_compacted(f) : rc;
}
