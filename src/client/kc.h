/*
 * kc.h — keel's own small ZooKeeper client: one session, synchronous calls.
 *
 * What it is for: the `keel` CLI (get/set/create/ls/watch/shell) and keel's
 * own processes that talk to the servers over the ZooKeeper port (the
 * broker, with keel extension opcodes through kc_call_raw()). It speaks the
 * plain ZooKeeper 3.8 client protocol through the codec in src/zk, so it
 * works against Apache ZooKeeper too.
 *
 * Model. A `struct kc_client` is one ZooKeeper session used by one thread.
 * Every call is synchronous: it sends one request and waits for its reply;
 * there is no background thread. The library only runs inside kc_* calls:
 * it answers nothing, pings nothing and delivers no event while the caller
 * is elsewhere, so a caller that idles must call kc_poll() at least every
 * kc_poll_timeout_ms() (or wait on kc_fd() and then call kc_poll()).
 *
 * Session states:
 *
 *	          kc_connect() / any call
 *	  IDLE ---------------------------> CONNECTED <-----------+
 *	                                     |   |  \             | reconnect: same
 *	          connection lost, bad frame,|   |   \ closeSession| session id,
 *	          server silent 2/3 timeout  v   |    v           | password and
 *	                            DISCONNECTED-+  CLOSED        | lastZxidSeen,
 *	                                 |       |                | auth re-sent,
 *	       server answers timeOut<=0 v       v auth rejected  | watches re-set
 *	                              EXPIRED   AUTH_FAILED       |
 *	                          DISCONNECTED -------------------+
 *
 * EXPIRED, AUTH_FAILED and CLOSED are final: every later call fails at
 * once. A call made while DISCONNECTED first reconnects (servers tried in
 * the shuffled order, starting after the one that failed, each with
 * connect_timeout_ms), bounded by call_timeout_ms.
 *
 * Results. Calls return a ZooKeeper error code (enum zk_err in
 * zk/zk_codes.h): ZK_OK, a server's verdict (ZK_NO_NODE, ZK_NODE_EXISTS,
 * ZK_BAD_VERSION, ...), or what the client found, named as ZooKeeper's
 * clients name it:
 *	ZK_CONNECTION_LOSS    no server reachable, or the connection broke
 *	                      while the request was out (a write may or may
 *	                      not have happened — ZooKeeper's rule);
 *	ZK_OPERATION_TIMEOUT  call_timeout_ms passed while waiting for the
 *	                      reply (the connection is dropped too);
 *	ZK_MARSHALLING_ERROR  the server sent something that does not decode
 *	                      (the connection is dropped);
 *	ZK_BAD_ARGUMENTS      an invalid path, mode or size, before sending;
 *	ZK_SESSION_EXPIRED, ZK_AUTH_FAILED   the session is over.
 * kc_message() says more about the last client-side failure.
 *
 * Ownership. Byte strings, vectors, stats and iterators returned by a call
 * point into the client's receive buffer and stay valid until the next
 * kc_* call on the same client (LMDB's mdb_get rule); copy what must live
 * longer. Arguments are only read during the call.
 *
 * Events. Watch notifications and session state changes are delivered in
 * the order the server sent them, each before the reply of any request sent
 * after it: to options.on_event if set (called from inside kc_* calls; it
 * must not call kc_* on the same client), otherwise to a queue read with
 * kc_next_event() (at most max_queued_events; events past that are dropped
 * and counted in kc_events_dropped()).
 *
 * Bounds. Every length the server sends is checked before anything is
 * allocated: a frame longer than max_packet drops the connection; vectors
 * are validated by the zk codec. The receive buffer never exceeds
 * max_packet + 4 bytes, the queue max_queued_events, the watch table
 * max_watches paths, stored credentials KC_MAX_AUTHS.
 */
#ifndef KEEL_CLIENT_KC_H
#define KEEL_CLIENT_KC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/hash.h"
#include "base/rng.h"
#include "zk/zk_codes.h"
#include "zk/zk_jute.h"
#include "zk/zk_proto.h"

/* Incoming frames up to 1 MiB: a getData reply for the largest node a
 * server with jute.maxbuffer 0xfffff accepts, plus header and Stat. */
#define KC_DEFAULT_MAX_PACKET (1u << 20)
#define KC_DEFAULT_SESSION_TIMEOUT_MS 30000
#define KC_DEFAULT_MAX_WATCHES 65536u
#define KC_DEFAULT_MAX_QUEUED_EVENTS 4096u
#define KC_MAX_SERVERS 64
#define KC_MAX_AUTHS 8
#define KC_MAX_AUTH_SIZE 1024

enum kc_state {
	KC_IDLE = 0,          /* never connected */
	KC_CONNECTED = 1,
	KC_DISCONNECTED = 2,  /* session may live; the next call reconnects */
	KC_EXPIRED = 3,       /* final */
	KC_AUTH_FAILED = 4,   /* final */
	KC_CLOSED = 5,        /* final: closeSession done */
};

/* A watch notification (type > 0) or a session state change
 * (type ZK_EVENT_NONE, path ""). `path` is NUL-terminated; it lives during
 * the callback, or until the next kc_* call for kc_next_event(). */
struct kc_event {
	int32_t type;  /* enum zk_event_type */
	int32_t state; /* enum zk_keeper_state */
	const char *path;
	size_t path_size;
	int64_t zxid;  /* from the notification header; -1 if the server sent none */
};

typedef void (*kc_event_fn)(void *ctx, const struct kc_event *ev);

/* A frame the server pushed with a negative xid the ZooKeeper protocol
 * does not use (not -1, -2, -4, -8): room for keel extensions that stream
 * (e.g. metadata records after an extension request). Called from inside
 * kc_* calls, in stream order with events (it must not call kc_* on the
 * same client); `body` (after the ReplyHeader) lives during the call only.
 * Without a handler such a frame is a protocol error that drops the
 * connection. */
typedef void (*kc_push_fn)(void *ctx, int32_t xid, int64_t zxid, int32_t err,
			   const uint8_t *body, size_t body_size);

/* Opens a stream to `server` ("host:port" as given in options.servers)
 * within timeout_ms; returns a connected fd the client then owns, or -1
 * with a reason in err. The default dials TCP; tests plug a fake server. */
typedef int (*kc_dial_fn)(void *ctx, const char *server, int timeout_ms, char *err,
			  size_t err_size);

struct kc_options {
	const char *servers;        /* "host:port[,host:port...]", required */
	int32_t session_timeout_ms; /* asked for; the server negotiates. 0: default */
	int32_t connect_timeout_ms; /* per server (TCP + handshake). 0: session
				     * timeout / number of servers, >= 1000 */
	int32_t call_timeout_ms;    /* a whole call, reconnecting included.
				     * 0: the requested session timeout */
	uint32_t max_packet;        /* 0: KC_DEFAULT_MAX_PACKET */
	uint32_t max_watches;       /* watched paths tracked. 0: default */
	uint32_t max_queued_events; /* queue mode. 0: default */
	int64_t session_id;         /* non-zero: resume this session ... */
	uint8_t passwd[ZK_PASSWD_SIZE]; /* ... with this password */
	uint64_t seed;              /* server shuffle; 0: from the OS */
	kc_event_fn on_event;       /* NULL: queue events for kc_next_event() */
	void *event_ctx;
	kc_dial_fn dial;            /* NULL: TCP */
	void *dial_ctx;
	kc_push_fn on_push;         /* NULL: pushed frames are protocol errors */
	void *push_ctx;
};

struct kc_server {
	char *addr; /* "host:port", points into kc_client.servers_text */
};

struct kc_auth {
	char scheme[32];
	uint8_t cred[KC_MAX_AUTH_SIZE];
	uint32_t cred_size;
};

struct kc_queued_event;

struct kc_client {
	/* configuration (copied at init) */
	struct kc_options opt;
	char *servers_text;
	struct kc_server servers[KC_MAX_SERVERS];
	uint32_t server_count;
	/* session */
	enum kc_state state;
	int64_t session_id;
	uint8_t passwd[ZK_PASSWD_SIZE];
	int32_t timeout_ms;       /* negotiated (requested until the first connect) */
	int64_t last_zxid;        /* lastZxidSeen */
	/* connection */
	int fd;                   /* -1 when not connected */
	uint64_t connects;        /* sessions established or resumed so far */
	uint32_t server_index;    /* the server connected to (or tried last) */
	uint32_t server_next;     /* the next server to try */
	uint64_t last_send_ms;
	uint64_t last_recv_ms;
	uint64_t disconnected_at_ms;
	int32_t next_xid;
	/* receive buffer: [rx_start, rx_end) unprocessed */
	uint8_t *rx;
	size_t rx_capacity;
	size_t rx_start;
	size_t rx_end;
	bool rx_eof;              /* the server ended the stream after rx_end */
	struct keel_wbuf tx;      /* one outgoing frame */
	struct keel_wbuf scratch; /* ACL vectors, multi ops, setWatches lists */
	struct keel_wbuf event_path; /* NUL-terminated path for the callback */
	/* credentials, re-sent on reconnect */
	struct kc_auth auths[KC_MAX_AUTHS];
	uint32_t auth_count;
	/* watches this session holds (for setWatches after a reconnect) */
	struct keel_hmap watches;
	uint64_t watch_seed;
	/* queued events */
	struct kc_queued_event *ev_head;
	struct kc_queued_event *ev_tail;
	struct kc_queued_event *ev_taken; /* returned by kc_next_event, freed later */
	uint32_t ev_count;
	uint64_t ev_dropped;
	bool in_callback;
	bool in_poll;             /* a signal ends kc_poll's wait */
	bool closing;             /* kc_close: never reconnect */
	struct keel_rng rng;
	char message[256];
};

/* ---- life cycle ---- */

/* Parses the server list, shuffles it, allocates buffers. Does not
 * connect. KEEL_INVAL for a bad server list or option (message in
 * kc_message()), KEEL_NOMEM. On failure nothing needs closing. */
enum keel_err kc_init(struct kc_client *c, const struct kc_options *opt);

/* Closes the session if it is connected (closeSession, waiting up to
 * 2 s), closes the socket and frees everything. A disconnected session is
 * left to expire on the servers. */
void kc_close(struct kc_client *c);

/* Connects (or reconnects) now; ZK_OK once the session is established. */
int32_t kc_connect(struct kc_client *c);

/* closeSession: the servers remove the session's ephemerals now. The
 * client ends in KC_CLOSED. */
int32_t kc_close_session(struct kc_client *c);

/* ---- session facts ---- */

enum kc_state kc_state(const struct kc_client *c);
int64_t kc_session_id(const struct kc_client *c);
/* The session password (ZK_PASSWD_SIZE bytes), for resuming elsewhere. */
const uint8_t *kc_session_passwd(const struct kc_client *c);
int32_t kc_session_timeout_ms(const struct kc_client *c);
int64_t kc_last_zxid(const struct kc_client *c);
/* "host:port" of the server connected to, or NULL. */
const char *kc_server(const struct kc_client *c);
/* Milliseconds since the connection was lost (0 when connected). A caller
 * that has heard from no server for longer than the session timeout should
 * assume the session (and its ephemerals) may be gone. */
uint64_t kc_disconnected_ms(const struct kc_client *c);
/* Detail of the last client-side failure ("" if none). */
const char *kc_message(const struct kc_client *c);

/* ---- node operations ---- */

struct kc_create_args {
	int32_t mode;              /* enum zk_create_mode */
	int64_t ttl_ms;            /* TTL modes: 1..ZK_TTL_MAX_MS */
	const struct zk_acl *acl;  /* NULL: world:anyone:cdrwa */
	size_t acl_count;
};

/* Creates `path` (create2; createContainer / createTTL for those modes).
 * args NULL: persistent, open ACL. *created (may be NULL) is the path the
 * server made — with the sequence suffix for sequential modes. */
int32_t kc_create(struct kc_client *c, const char *path, struct zk_bytes data,
		  const struct kc_create_args *args, struct zk_bytes *created,
		  struct zk_stat *stat);

/* version -1: any. */
int32_t kc_delete(struct kc_client *c, const char *path, int32_t version);

/* ZK_OK with *stat, or ZK_NO_NODE. watch: a one-shot data watch (an exist
 * watch when the node is missing). stat may be NULL. */
int32_t kc_exists(struct kc_client *c, const char *path, bool watch, struct zk_stat *stat);

/* getData. *data is ZK_BYTES_NULL for a node holding null. */
int32_t kc_get(struct kc_client *c, const char *path, bool watch, struct zk_bytes *data,
	       struct zk_stat *stat);

int32_t kc_set(struct kc_client *c, const char *path, struct zk_bytes data, int32_t version,
	       struct zk_stat *stat);

/* getChildren2 (getChildren when stat is NULL). Walk *children with
 * zk_str_iter_init()/zk_str_iter_next(); the server's order (unsorted). */
int32_t kc_get_children(struct kc_client *c, const char *path, bool watch,
			struct zk_str_vec *children, struct zk_stat *stat);

/* Walk *acl with zk_acl_iter_init()/zk_acl_iter_next(). */
int32_t kc_get_acl(struct kc_client *c, const char *path, struct zk_acl_vec *acl,
		   struct zk_stat *stat);
int32_t kc_set_acl(struct kc_client *c, const char *path, const struct zk_acl *acl,
		   size_t count, int32_t version, struct zk_stat *stat);

/* A barrier: later reads see every write committed before it. */
int32_t kc_sync(struct kc_client *c, const char *path);

/* multi: all ops or none. Returns ZK_OK, or the error of the first op that
 * failed (its place in *results is the first result with err != 0 and
 * type -1); other client-side errors leave *results empty. Walk results
 * with zk_multi_result_next(). */
int32_t kc_multi(struct kc_client *c, const struct zk_multi_op *ops, size_t count,
		 struct zk_multi_result_iter *results);

/* ---- sessions, auth, watches ---- */

/* auth packet (e.g. "digest", "user:password"). The credential is kept
 * and re-sent after every reconnect. ZK_AUTH_FAILED ends the session, as
 * in ZooKeeper. More than KC_MAX_AUTHS credentials, or one over
 * KC_MAX_AUTH_SIZE bytes, is ZK_BAD_ARGUMENTS. Connects an idle client. */
int32_t kc_add_auth(struct kc_client *c, const char *scheme, struct zk_bytes cred);

/* addWatch: mode ZK_ADD_WATCH_PERSISTENT or _PERSISTENT_RECURSIVE. */
int32_t kc_add_watch(struct kc_client *c, const char *path, int32_t mode);

/* removeWatches for `type` (enum zk_watcher_type) at path. */
int32_t kc_remove_watches(struct kc_client *c, const char *path, int32_t type);

/* ---- extension opcodes ---- */

struct kc_raw_reply {
	int32_t err;          /* ReplyHeader.err */
	int64_t zxid;         /* ReplyHeader.zxid */
	const uint8_t *body;  /* the bytes after the ReplyHeader */
	size_t body_size;
};

/* Sends RequestHeader{xid, opcode} + body (opaque bytes) and waits for the
 * reply with that xid. For keel extension opcodes (>= 1000) and anything
 * else the typed calls do not cover. Returns reply->err when a reply came,
 * else the client-side error (reply is then zeroed). */
int32_t kc_call_raw(struct kc_client *c, int32_t opcode, const void *body, size_t size,
		    struct kc_raw_reply *reply);

/* ---- the change feed (keel extension, docs/change-feed.md) ----
 *
 * A stream of every committed change under a path, from a position
 * (zxid, seq) on: kc_feed_poll() subscribes (ZK_OP_KEEL_FEED) and, after
 * every reconnect (to any server of the list), subscribes again from the
 * position after the last change it delivered, so the callback sees each
 * change exactly once, in position order. The feed does not depend on the
 * session: after ZK_SESSION_EXPIRED the caller may give it a new client
 * (kc_feed_rebind) and it resumes just the same.
 */

/* kc_feed_poll(): the start is older than what the servers hold (or the
 * feed fell that far behind): each server of the list in turn said so;
 * f->oldest_zxid is the oldest start the last one holds. Final. Not a
 * ZooKeeper error code. */
#define KC_FEED_COMPACTED (-1000)

/* kc_feed_init raises the client's max_packet to at least this: an event
 * frame is a node's data plus its path (up to 64 KiB here) and Stat. */
#define KC_FEED_MAX_PACKET (KC_DEFAULT_MAX_PACKET + (64u << 10))

struct kc_feed_change {
	int64_t zxid;
	int32_t seq;  /* the change's place in its transaction, from 0 */
	int32_t type; /* enum zk_feed_type (zk/zk_feed.h) */
	struct zk_bytes path;
	struct zk_stat stat;  /* the node after the transaction; zero when deleted */
	struct zk_bytes data; /* with ZK_FEED_WITH_DATA; null otherwise */
};

/* Called from inside kc_* calls (it must not call kc_* on the client);
 * `ch` and what it points to live during the call only. */
typedef void (*kc_feed_fn)(void *ctx, const struct kc_feed_change *ch);

struct kc_feed {
	struct kc_client *c;
	char *path;
	int32_t flags;         /* enum zk_feed_flags */
	int64_t next_zxid;     /* the position to resume from */
	int32_t next_seq;
	uint64_t subscribed_on; /* c->connects when subscribed; 0: not subscribed */
	int64_t oldest_zxid;   /* after KC_FEED_COMPACTED */
	bool compacted;
	uint32_t compacted_tries; /* servers in a row that no longer held it */
	bool bad_frame;
	kc_feed_fn on_change;
	void *ctx;
};

/* Binds a feed of changes under `path` from zxid `from_zxid` (inclusive;
 * 0: from the oldest the server holds — until a change arrives, each
 * subscription asks that of its server) to client `c`, whose pushed frames
 * it takes (c->opt.on_push). Nothing is sent yet. KEEL_INVAL for a bad
 * path or flags, KEEL_NOMEM. */
enum keel_err kc_feed_init(struct kc_feed *f, struct kc_client *c, const char *path,
			   int64_t from_zxid, int32_t flags, kc_feed_fn on_change, void *ctx);
/* Moves the feed to another client (after the old session ended). */
void kc_feed_rebind(struct kc_feed *f, struct kc_client *c);
void kc_feed_close(struct kc_feed *f);

/* Subscribes when needed, then kc_poll(timeout_ms). ZK_OK,
 * KC_FEED_COMPACTED, ZK_MARSHALLING_ERROR (a feed frame that does not
 * decode; the connection is dropped), or kc_poll's and the subscribe
 * call's errors (ZK_CONNECTION_LOSS: the next poll tries again). */
int32_t kc_feed_poll(struct kc_feed *f, int timeout_ms);

/* ---- idling ---- */

/* Keeps the session alive and delivers events: connects when idle or
 * disconnected (one round over the servers, which may take longer than
 * timeout_ms), pings when due, waits up to timeout_ms for input and
 * processes it (timeout 0: what has arrived). Returns early after
 * dispatching events or when a signal interrupted the wait. ZK_OK,
 * ZK_CONNECTION_LOSS (the connection was lost now, or reconnecting
 * failed; the next call tries again), or the final state's error. */
int32_t kc_poll(struct kc_client *c, int timeout_ms);

/* The socket to wait on for readability (-1 when not connected) and the
 * longest wait before kc_poll() must run again: 0 when disconnected (to
 * reconnect) or input is buffered, -1 when idle or final (nothing due). */
int kc_fd(const struct kc_client *c);
int kc_poll_timeout_ms(const struct kc_client *c);

/* Queue mode: the next event, false when none is queued. */
bool kc_next_event(struct kc_client *c, struct kc_event *ev);
uint64_t kc_events_dropped(const struct kc_client *c);

/* The ZooKeeper name of a code as Java's KeeperException prints it
 * ("NoNode", "Directory not empty", ...). */
const char *kc_err_message(int32_t err);

#endif
