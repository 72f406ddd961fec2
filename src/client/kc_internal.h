/*
 * kc_internal.h — what the client's files share (not part of the API).
 *
 *	kc_conn.c   life cycle, dialing, the handshake, framing, the wait
 *	            loop (replies, pings, read timeout), reconnects, kc_poll
 *	kc_ops.c    the typed calls: encode with zk_proto, decode the reply
 *	kc_watch.c  the watches this session holds (setWatches after a
 *	            reconnect) and event delivery (callback or queue)
 *
 * Every public call starts with kc_conn_begin(), which ends the life of the
 * previous call's results (they point into the receive buffer) and of the
 * event kc_next_event() handed out.
 */
#ifndef KEEL_CLIENT_KC_INTERNAL_H
#define KEEL_CLIENT_KC_INTERNAL_H

#include "client/kc.h"

/* One reply, its body pointing into c->rx (valid until the next call). */
struct kc_reply {
	int32_t xid;
	int64_t zxid;
	int32_t err;
	const uint8_t *body;
	size_t body_size;
};

/* Largest setWatches packet (ZooKeeper's client uses 128 KiB too). */
#define KC_SET_WATCHES_CHUNK (128u * 1024u)

/* watch flags: what the session holds at a path */
enum {
	KC_WATCH_DATA = 1u << 0,       /* getData / exists on a node */
	KC_WATCH_EXIST = 1u << 1,      /* exists on a missing node */
	KC_WATCH_CHILD = 1u << 2,      /* getChildren */
	KC_WATCH_PERSISTENT = 1u << 3, /* addWatch PERSISTENT */
	KC_WATCH_RECURSIVE = 1u << 4,  /* addWatch PERSISTENT_RECURSIVE */
};

/* ---- kc_conn.c ---- */

/* Starts a public call (asserts it is not made from an event callback). */
void kc_conn_begin(struct kc_client *c);
/* Sets kc_message(); returns `err` for chaining. */
int32_t kc_fail(struct kc_client *c, int32_t err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Drops the connection (session kept): state DISCONNECTED, event
 * Disconnected. No-op when not connected. */
void kc_conn_lose(struct kc_client *c, const char *why);
/* A reply that does not decode: drops the connection, ZK_MARSHALLING_ERROR. */
int32_t kc_conn_bad_reply(struct kc_client *c, const char *what);

/* Sends RequestHeader{xid, opcode} + body and waits for the reply to that
 * xid (reconnecting first if needed). xid 0 picks the next xid; ZK_XID_AUTH
 * is used as given. Returns ZK_OK with *out filled (out->err is the
 * server's), or a client-side error. */
int32_t kc_conn_call(struct kc_client *c, int32_t xid, int32_t opcode, const void *body,
		     size_t body_size, struct kc_reply *out);
/* Same, the body encoded from req->u by zk_request_body_encode(). */
int32_t kc_conn_request(struct kc_client *c, int32_t xid, const struct zk_request *req,
			struct kc_reply *out);
/* The server rejected a credential: the session is over (KC_AUTH_FAILED,
 * an AuthFailed event). Returns ZK_AUTH_FAILED. */
int32_t kc_conn_auth_failed(struct kc_client *c, const char *scheme);
/* Queues one whole frame (header included) on the socket without waiting
 * for a reply (setWatches). ZK_OK or ZK_CONNECTION_LOSS. */
int32_t kc_conn_send_payload(struct kc_client *c, const void *payload, size_t size,
			     uint64_t deadline_ms);

/* ---- kc_watch.c ---- */

enum keel_err kc_watch_init(struct kc_client *c);
void kc_watch_close(struct kc_client *c);
/* May the session add a watch at path (already tracked, or room left)? */
bool kc_watch_room(const struct kc_client *c, const char *path, size_t size);
/* Notes flags at path (the caller checked kc_watch_room). */
enum keel_err kc_watch_add(struct kc_client *c, const char *path, size_t size, uint32_t flags);
void kc_watch_drop(struct kc_client *c, const char *path, size_t size, uint32_t flags);
/* One-shot watches an event consumed. */
void kc_watch_on_event(struct kc_client *c, int32_t type, const char *path, size_t size);
uint32_t kc_watch_count(const struct kc_client *c);
/* After a reconnect: setWatches/setWatches2 packets (xid -8) for every
 * watch held, relative to lastZxidSeen. */
int32_t kc_watch_restore(struct kc_client *c, uint64_t deadline_ms);

/* Delivers one event (callback or queue). */
void kc_event_dispatch(struct kc_client *c, int32_t type, int32_t state, const uint8_t *path,
		       size_t path_size, int64_t zxid);
/* Frees the event kc_next_event() handed out last. */
void kc_event_release(struct kc_client *c);
/* Frees every queued event. */
void kc_event_close(struct kc_client *c);

#endif
