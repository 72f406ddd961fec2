/*
 * zk_sim.h — the ZooKeeper workload of the simulator (docs/simulator.md,
 * "ZooKeeper workload"): simulated clients, their history and the checkers
 * (zkworld.c runs them against the servers' real cores).
 *
 *	simzk_clients --frames--> struct simzk_transport --> cluster under test
 *	      ^                                                  |
 *	      +--- simzk_clients_on_frame / _on_closed <---------+
 *	      |
 *	      v
 *	struct simzk_history --> simzk_check_*()  (pure functions over the
 *	                          history and, through struct simzk_view, the
 *	                          servers' final ZooKeeper states)
 *
 * The clients are deterministic (one seeded PRNG, simulated milliseconds
 * given by the caller, no wall clock). They build every request with keel's
 * own encoders (zk_proto.h), so a server decodes real frames, and they
 * decode replies and watch events with keel's decoders.
 *
 * The history records, for every operation, its client, connection,
 * session, server, request, invoke and complete time (history ticks: one
 * strictly increasing counter shared by every record, so "before" is a
 * total order) and its result, or UNKNOWN when the connection went away
 * first; every watch event received; and every reply the client could not
 * match to a request (a stray).
 *
 * Paths: the workload uses the directories /w (persistent registers),
 * /e (ephemeral registers) and /s (sequential nodes), which client 0
 * creates first. Every write writes a unique 8-byte value.
 */
#ifndef KEEL_SIM_ZK_SIM_H
#define KEEL_SIM_ZK_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/buf.h"
#include "base/rng.h"
#include "zk/zk_feed.h"
#include "zk/zk_jute.h"
#include "zk/zk_proto.h"
#include "zk/zk_state.h"

#define SIMZK_PATH_MAX 40
#define SIMZK_MULTI_MAX 3
#define SIMZK_MAX_OUT 6     /* requests in flight per connection */
#define SIMZK_KEYS 4        /* registers per directory */
#define SIMZK_NONE SIZE_MAX /* no history index */
#define SIMZK_TIME_INF UINT64_MAX

/* ---- history ---- */

enum simzk_kind {
	SIMZK_CONNECT = 1, /* a ConnectRequest (new session or a move) */
	SIMZK_REQUEST = 2, /* a request with an xid (pings included) */
	SIMZK_EXPIRE = 3,  /* the client abandons its session (stops pinging) */
};

enum simzk_status {
	SIMZK_PENDING = 0,
	SIMZK_OK = 1,      /* answered (err says how) */
	SIMZK_UNKNOWN = 2, /* the connection went away before the answer */
};

/* One op inside a multi. */
struct simzk_sub {
	int32_t opcode;
	int32_t flags;
	int32_t version;
	uint64_t value;
	char path[SIMZK_PATH_MAX];
	int32_t err; /* result */
};

struct simzk_op {
	uint8_t kind;   /* enum simzk_kind */
	uint8_t status; /* enum simzk_status */
	uint32_t client;
	uint32_t server;
	uint64_t conn;    /* connection number, unique over the run */
	int64_t session;  /* the session it ran in (CONNECT: the one asked for, 0 new) */
	int32_t xid;
	int32_t opcode;
	uint64_t invoke;   /* history ticks */
	uint64_t complete; /* SIMZK_TIME_INF until answered */
	uint64_t invoke_ms; /* simulated milliseconds (for reading a history) */
	uint64_t complete_ms;
	/* arguments */
	char path[SIMZK_PATH_MAX];
	uint64_t value; /* written data (unique), 0 for none */
	int32_t version;
	int32_t flags; /* create mode */
	int32_t mode;  /* addWatch mode */
	bool watch;
	uint32_t sub_count;
	struct simzk_sub sub[SIMZK_MULTI_MAX];
	size_t after_sync; /* a read sent right behind a sync: the sync's index */
	/* UNKNOWN write that no server ever applied (the run resolves it from
	 * the servers' committed logs): it never took effect */
	bool never_applied;
	/* setWatches(2) after a move: the watches set again (bit i: path
	 * simzk_path_name(i)) and the last zxid the client saw */
	uint16_t sw_data;
	uint16_t sw_exist;
	uint16_t sw_child;
	uint16_t sw_persistent;
	uint16_t sw_recursive;
	int64_t relative_zxid;
	/* result */
	int32_t err;
	int64_t zxid;
	char created[SIMZK_PATH_MAX]; /* create: the path made */
	uint64_t read_value;          /* getData */
	struct zk_stat stat;          /* create2, setData, getData, exists */
	int64_t new_session;          /* CONNECT: the session it got (0: expired) */
	bool expired;                 /* CONNECT: told the session expired; EXPIRE: learned */
};

struct simzk_event {
	uint32_t client;
	uint32_t server;
	uint64_t conn;
	int64_t session;
	int32_t type;
	int64_t zxid;
	uint64_t at;
	char path[SIMZK_PATH_MAX];
};

/* A reply that matched no request in flight, or did not decode. */
struct simzk_stray {
	uint32_t client;
	uint64_t conn;
	int32_t xid;
	uint64_t at;
	char what[64];
};

struct simzk_history {
	struct simzk_op *ops; /* in invoke order */
	size_t op_count;
	size_t op_capacity;
	struct simzk_event *events;
	size_t event_count;
	size_t event_capacity;
	struct simzk_stray *strays;
	size_t stray_count;
	size_t stray_capacity;
	uint64_t clock; /* the last tick handed out */
};

void simzk_history_init(struct simzk_history *h);
void simzk_history_free(struct simzk_history *h);
/* Appends a copy of `op` invoked now (a new tick); returns its index. */
size_t simzk_history_invoke(struct simzk_history *h, const struct simzk_op *op);
/* The op was answered now; its result fields are filled by the caller. */
struct simzk_op *simzk_history_complete(struct simzk_history *h, size_t index);
/* The op's outcome will never be known. */
void simzk_history_unknown(struct simzk_history *h, size_t index);
void simzk_history_event(struct simzk_history *h, const struct simzk_event *ev);
void simzk_history_stray(struct simzk_history *h, uint32_t client, uint64_t conn, int32_t xid,
			 const char *what);
/* Every op, event and stray in tick order, one line each (--verbose). */
void simzk_history_print(const struct simzk_history *h, FILE *out);

/* The paths a client may watch, numbered for watch sets: /w, /e, /s, then
 * /w/k0.., /e/k0... simzk_path_index is -1 for any other path. */
#define SIMZK_WATCHABLE (3 + 2 * SIMZK_KEYS)
int simzk_path_index(const char *path);
const char *simzk_path_name(int index);

/* ---- the checkers (zk_check.c) ----
 * Each is a pure function of the history (and the final states); on a
 * violation it returns false and writes one line into why. */

/* The cluster's final state, read through callbacks (zkworld.c: the
 * servers' real cores). */
struct simzk_view {
	void *ctx;
	uint32_t servers; /* numbered 0..servers-1 */
	/* The server's applied ZooKeeper state, NULL when it is down. */
	const struct zk_state *(*state)(void *ctx, uint32_t server);
	uint64_t (*applied_index)(void *ctx, uint32_t server);
};

/* Replies in request order per connection, no reply without a request,
 * zxids never decreasing per session. */
bool simzk_check_fifo(const struct simzk_history *h, char *why, size_t why_size);
/* Per path: writes (create/set/delete/multi, ephemerals ended with their
 * session) and sync-then-read reads are linearizable; every read shows the
 * path's state at its reply zxid; sequence numbers rise with zxids. */
bool simzk_check_paths(const struct simzk_history *h, char *why, size_t why_size);
/* A watch event arrives before any reply that shows the change. */
bool simzk_check_watch_order(const struct simzk_history *h, char *why, size_t why_size);
/* A change made after a watch was set reaches the connection, if it lived
 * to see a reply with the change's zxid. */
bool simzk_check_watch_lost(const struct simzk_history *h, char *why, size_t why_size);
/* No server holds a session that was closed or expired, nor its ephemerals. */
bool simzk_check_ephemerals(const struct simzk_history *h, const struct simzk_view *v, char *why,
			    size_t why_size);
/* Every running server applied the same index and has the same tree hash
 * (recomputed, and equal to the incremental one). */
bool simzk_check_tree_hash(const struct simzk_view *v, char *why, size_t why_size);
/* All of the above; why names the checker that failed. */
bool simzk_check_all(const struct simzk_history *h, const struct simzk_view *v, char *why,
		     size_t why_size);

/* ---- the clients (zk_client.c) ---- */

/* The cluster under test, as the clients see it. Frames are whole (4-byte
 * length + payload). Replies, events and closes come back through
 * simzk_clients_on_frame() / simzk_clients_on_closed(), never from inside
 * these calls. */
struct simzk_transport {
	void *ctx;
	void (*open)(void *ctx, uint32_t server, uint64_t conn);
	void (*send)(void *ctx, uint64_t conn, const uint8_t *frame, size_t size);
	void (*close)(void *ctx, uint64_t conn); /* the client hangs up */
};

enum simzk_client_state {
	SIMZK_C_IDLE = 0,     /* no connection */
	SIMZK_C_CONNECTING,   /* ConnectRequest sent */
	SIMZK_C_ACTIVE,
	SIMZK_C_ABANDONED,    /* silent until its session must have expired */
};

struct simzk_out {
	int32_t xid;
	int32_t opcode;
	size_t op; /* history index */
};

struct simzk_client {
	uint32_t id;
	uint8_t state;
	uint64_t conn;
	uint32_t server;
	int64_t session; /* 0: none */
	uint8_t passwd[ZK_PASSWD_SIZE];
	int32_t timeout_ms;
	int64_t last_zxid;
	int32_t next_xid;
	struct simzk_out out[SIMZK_MAX_OUT];
	uint32_t out_count;
	size_t connect_op;
	size_t expire_op; /* SIMZK_EXPIRE waiting to learn the outcome */
	uint64_t last_send_ms;
	uint64_t oldest_sent_ms; /* of out[0] or of the connect */
	uint64_t quiet_until_ms; /* ABANDONED / backing off */
	uint32_t setup_step;     /* client 0: directories made */
	/* Watches the session holds, to set again after a move (setWatches):
	 * bit simzk_path_index(path). A one-shot watch is dropped when an
	 * event that consumes it arrives. */
	uint16_t w_data;
	uint16_t w_exist;
	uint16_t w_child;
	uint16_t w_persistent;
	uint16_t w_recursive;
};

struct simzk_clients {
	struct simzk_transport tr;
	struct simzk_history *hist;
	struct keel_rng rng;
	uint32_t servers;
	struct simzk_client *c;
	uint32_t count;
	uint64_t now_ms;
	uint64_t next_conn;
	uint64_t next_value;
	int32_t session_timeout_ms; /* asked for */
	uint64_t op_timeout_ms;     /* a request unanswered this long: hang up */
	bool setup_done;
	bool finishing; /* no new work but the final sync + read */
	struct keel_wbuf w;
	/* counts */
	uint64_t sessions;   /* sessions created */
	uint64_t watches;    /* watch registrations sent */
	uint64_t moves;
	uint64_t expiries;   /* sessions abandoned */
	uint64_t closes;
	uint64_t events;
	uint64_t ops;
};

void simzk_clients_init(struct simzk_clients *cs, uint32_t count, uint32_t servers, uint64_t seed,
			const struct simzk_transport *tr, struct simzk_history *h);
void simzk_clients_free(struct simzk_clients *cs);
/* Time passes; every client may act (connect, send, ping, time out). */
void simzk_clients_step(struct simzk_clients *cs, uint64_t now_ms);
/* Stop new work; each client with a session sends a final sync + read
 * (which gives every watch checker a reply with the last zxid). */
void simzk_clients_finish(struct simzk_clients *cs);
/* No client is waiting for anything. */
bool simzk_clients_idle(const struct simzk_clients *cs);
void simzk_clients_on_frame(struct simzk_clients *cs, uint64_t conn, const uint8_t *frame,
			    size_t size);
void simzk_clients_on_closed(struct simzk_clients *cs, uint64_t conn);

/* ---- the run (zkworld.c, on the real server core) ---- */

/* Bugs the feed consumers can plant (zk_feed.c). */
enum simzk_bug {
	SIMZK_BUG_NONE = 0,
	SIMZK_BUG_FEED_RESUME_BY_ZXID = 5, /* zk_feed.c: resumes after the last zxid */
};

struct simzk_result {
	bool ok;
	char why[512];
	uint64_t trace;
	uint64_t sim_ms;
	uint64_t ops;
	uint64_t events;
	uint64_t sessions;
	uint64_t watches;
	uint64_t moves;
	uint64_t expiries;
	uint64_t closes;
	uint64_t unknown;
	uint64_t leader_changes;
	uint64_t expired_by_server;
	uint64_t zxid;
	uint64_t feed_changes; /* changes the feed consumers got */
	uint64_t feed_subscriptions; /* FeedRequests answered */
	uint64_t feed_moves;   /* times a consumer's server "died" */
	uint64_t feed_compacted; /* COMPACTED answers and events */
	uint64_t feed_gaps;    /* announced gaps (no server held the position) */
};

/* ---- the change feed (zk_feed.c) ----
 *
 * Consumers of the change feed (docs/change-feed.md) on the servers'
 * feed connections. A consumer speaks the wire protocol: it sends a
 * FeedRequest, reads the FeedResponse and then the FeedEvent frames, a
 * few at a time; the frames it has not read are the connection's unsent
 * output as the server sees it (beyond the socket buffers). */

#define SIMZK_FEED_CONSUMERS 3

/* How the consumers reach the servers (0-based server numbers). */
struct simzk_feed_transport {
	void *ctx;
	uint32_t servers;
	/* Opens connection `conn` to `server` and sends it the FeedRequest
	 * (`body`, with `xid`). The server's reply, and the events it sends
	 * at once, come back through simzk_feed_on_frame() before this
	 * returns. false: the server cannot be reached (nothing was sent). */
	bool (*subscribe)(void *ctx, uint32_t server, uint64_t conn, int32_t xid,
			  const uint8_t *body, size_t size);
	/* The consumer hangs up `conn` (what it did not read is lost). */
	void (*hang_up)(void *ctx, uint64_t conn);
	/* The consumer read from `conn`: its server may send more. */
	void (*drained)(void *ctx, uint64_t conn);
	/* At the end: whether `server` holds every committed change (it
	 * runs, is a member and applied the whole log). */
	bool (*settled)(void *ctx, uint32_t server);
};

struct simzk_feed_got {
	int64_t zxid;
	int32_t seq;
	int32_t type;
	uint64_t path_hash;
	uint64_t data_hash; /* with ZK_FEED_WITH_DATA; 0 otherwise */
	int32_t version;
	int64_t mzxid;
};

/* Changes a consumer announced it lost: from (from_zxid, from_seq) to the
 * end of to_zxid. */
struct simzk_feed_gap {
	int64_t from_zxid;
	int32_t from_seq;
	int64_t to_zxid;
};

/* A frame a server sent, not yet read (data NULL: the server closed). */
struct simzk_feed_frame {
	uint8_t *data;
	size_t size;
};

struct simzk_feed_consumer {
	const char *prefix;
	int32_t flags;
	uint32_t server;
	uint64_t conn;	     /* 0: not subscribed */
	int32_t xid;	     /* of its last FeedRequest */
	size_t window_bytes; /* unread bytes the socket buffers hold */
	struct simzk_feed_frame *inbox; /* a ring */
	size_t in_head, in_count, in_cap;
	size_t unread_bytes;
	int64_t next_zxid; /* the position after the last change it got */
	int32_t next_seq;
	struct simzk_feed_got *got;
	size_t got_count;
	size_t got_cap;
	struct simzk_feed_gap *gaps;
	size_t gap_count;
	size_t gap_cap;
	uint64_t stalled_until; /* no reading before this step */
	uint64_t subscriptions;
	uint64_t moves;
	uint64_t compacted; /* COMPACTED answers and events */
};

struct simzk_feed {
	struct keel_rng rng; /* the feed's own: the workload's runs do not change */
	enum simzk_bug bug;
	struct simzk_feed_transport tr;
	uint64_t steps;
	uint64_t next_conn;
	struct zk_feed_log ref; /* every committed change */
	struct simzk_feed_consumer c[SIMZK_FEED_CONSUMERS];
	bool broken; /* a server broke the protocol: why */
	char why[256];
};

void simzk_feed_init(struct simzk_feed *f, uint64_t seed, enum simzk_bug bug,
		     const struct simzk_feed_transport *tr);
void simzk_feed_free(struct simzk_feed *f);
/* A byte bound for one server's history (16 KiB .. 1 MiB) and the unsent
 * output its feed waits above (1 .. 8 KiB): from the feed's PRNG. */
size_t simzk_feed_history_bytes(struct simzk_feed *f);
uint32_t simzk_feed_high_water_bytes(struct simzk_feed *f);
/* The committed state applied res->zxid: the reference history. */
void simzk_feed_on_commit(struct simzk_feed *f, const struct zk_state *st,
			  const struct zk_result *res);
/* A server sent a frame on `conn` (payload without its length), or closed
 * it (frame NULL). */
void simzk_feed_on_frame(struct simzk_feed *f, uint64_t conn, const uint8_t *frame, size_t size);
/* The bytes on `conn` the server would count as unsent output. */
size_t simzk_feed_unsent_bytes(const struct simzk_feed *f, uint64_t conn);
/* One random step: a consumer reads a few changes, or its server dies
 * (it subscribes on another), or it stops reading for a while. */
void simzk_feed_step(struct simzk_feed *f);
/* Every consumer reads to the end on a settled server (the cluster is
 * quiet). */
void simzk_feed_drain(struct simzk_feed *f);
/* No server broke the protocol, and each consumer got every committed
 * change under its path once, in position order, with its Stat (and
 * data), outside the gaps it announced. */
bool simzk_check_feed(const struct simzk_feed *f, char *why, size_t why_size);
/* Counts for the run line, and the consumers' output mixed into `trace`. */
void simzk_feed_counts(const struct simzk_feed *f, struct simzk_result *r, uint64_t *trace);


#endif
