/*
 * core.h — the server core and its interface to its host.
 *
 * The server core does no I/O of its own and reads no clock or random
 * source (scripts/check-pure.sh checks src/core like the other pure
 * layers). Everything it needs from the outside world it asks of its host
 * through `struct core_host`; everything the outside world tells it
 * arrives through the inputs below. Two hosts implement it: the libuv
 * shell of `keel server` (node/host.c, node/node.c) and the simulator
 * (sim/host.c, docs/simulator.md).
 *
 * In the core (src/core): the ready loop and the peer, storage and tick
 * inputs (drive.c), the state machine (fsm.c), the request tracker
 * (tracker.c), the entry envelope (entry.c), latency histograms (hist.c),
 * the ZooKeeper clients (client_zk.c: sessions, requests, watches,
 * forwarding, reconfig, read-only mode, SASL), the change feed (feed.c),
 * membership changes and
 * leadership transfers (membership.c) and the controller glue
 * (controller.c). The ready loop calls each of them directly. In the
 * shell, for good: sockets and the client port's classification (ZooKeeper,
 * admin or four-letter word), the admin protocol's credential check, TLS,
 * the storage thread and the forked snapshotter (node/).
 *
 * Effects (core -> host), through `host.ops`, `host.ctx` first. None of
 * them calls back into the core, except snapshot_load (which reads the file
 * into c->fsm with fsm_snapshot_read) and client_pause(false) (which may
 * deliver that connection's buffered frames before it returns, as
 * net_conn_resume does — but never inside a ready, where they wait for the
 * loop's next check phase):
 *   persist        hand a persist batch (a ready with persist_id != 0) to
 *                  storage; the host later calls core_on_durable() for it.
 *                  The ready is borrowed: the host copies what it keeps
 *                  before returning (it is released at raft_advance).
 *                  Non-OK: the batch was refused, the core stops.
 *   peer_begin/end start and finish one frame of `type` to peer `to`:
 *                  begin returns a writer (host-owned, valid until end) the
 *                  core appends the body to, or NULL when there is no link
 *                  (the frame is dropped; deadlines and Raft's retries
 *                  cover the loss). Every non-NULL begin is followed by
 *                  exactly one end for the same peer before any other
 *                  effect.
 *   peer_connected whether a link to `to` is up now.
 *   client_*       a frame to, pause/resume of, and close of one client
 *                  connection, named by the host's 64-bit id (never 0;
 *                  the core keeps its own state per id: core/client_zk.h).
 *                  client_begin/end pair like peer_begin/end (begin is
 *                  NULL once the connection is gone or closing);
 *                  client_send copies `payload`; after client_close the
 *                  host delivers the connection's close later, from its
 *                  loop, never from inside client_close. client_paused:
 *                  reading is paused (by the core or by the host's
 *                  limits), or the connection is gone.
 *   now_ms         monotonic milliseconds (deadlines, session timeouts);
 *   wall_ms        the wall clock in ms (znode ctime/mtime, entry times);
 *   mono_ns        monotonic nanoseconds (latency histograms only);
 *   random_bytes   fills a buffer from an unpredictable source (ZooKeeper
 *                  session passwords: base/rng.h is not for secrets).
 *                  Every other random choice derives from the start seed
 *                  (core_init) through core_seed_next: election jitter,
 *                  the first request id, watch hashing, the controller.
 *   log            one operator line; the host formats it.
 *   snapshot_read  a chunk of a snapshot file, for InstallSnapshot.
 *   snapshot_load  a received snapshot is durable: load it into c->fsm.
 *   schedule_drive run core_drive() soon, after the inputs already queued.
 *   on_failed      c->failed became true: stop the server.
 *   book_changed   the address book changed (an applied CLUSTER entry):
 *                  update the peer links. Runs between raft_ready and
 *                  raft_advance; a link it drops may be reported
 *                  (core_on_peer_link) before it returns.
 *   maybe_snapshot entries were applied (after raft_advance): the host may
 *                  start a snapshot of c->fsm (it forks, node/snapshot.c).
 *   addr_ok        whether "HOST:PORT" is an address the host can dial (a
 *                  new member's peer address).
 *   session_proof_ok  the ZooKeeper session credential (addauth "keel"):
 *                  the cluster secret's HMAC, which stays in the host.
 *   client_output_bytes  the unsent output of a client connection (the
 *                  change feed waits while it is above its high water).
 *   feed_wait      (true) call node_feed_pump() once per turn of the host's
 *                  loop, after its I/O, until (false).
 *
 * Inputs (host -> core): one thread, one at a time. core_drive may be
 * called from inside an effect (it folds into the running drive); no other
 * input may be, except as said above.
 *   core_init / core_open   the start seed and options; then the host
 *                    restores Raft from its storage (raft_restore) and
 *                    opens the parts: node_ctl_create (controller.h),
 *                    zk_clients_open (client_zk.h).
 *   core_on_durable  persist batch `persist_id` is durable, or storage
 *                    failed (err). In persist order, once per batch.
 *   core_on_peer_frame   a frame from authenticated peer `from` (body
 *                    borrowed for the call).
 *   core_on_peer_link    the link to peer `id` went up or down.
 *   core_tick        the periodic timer (monotonic ms); the host calls
 *                    core_drive after it.
 *   core_drive       runs the ready loop; the host calls it after inputs it
 *                    batched (schedule_drive).
 *   core_stop        shutdown: later inputs are not acted on.
 *   zk_conn_open, zk_conn_on_frame, zk_conn_on_close   a ZooKeeper
 *                    connection of the client port (core/client_zk.h).
 *   node_feed_pump   while feed_wait is on (core/feed.h);
 *   node_feed_on_snapshot_taken   the host's snapshotter compacted the log.
 *   admin_request, admin_on_conn_closed   an operator's membership change
 *                    or transfer on an admin connection, after the host
 *                    checked the credential (core/membership.h).
 *
 * Inside the ready loop, the parts' apply, read and leader-change entries
 * run between raft_ready and raft_advance and must not call core_propose
 * (asserted); the after-apply entries run after raft_advance and may.
 */
#ifndef KEEL_CORE_CORE_H
#define KEEL_CORE_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/list.h"
#include "core/hist.h"
#include "core/tracker.h"
#include "raft/raft.h"

struct node_fsm;
struct node_core;
struct zk_server;
struct node_feeds;
struct node_ctl;

/* Servers an address book holds at most, and the longest address. */
#define CORE_MEMBERS_MAX 32
#define CORE_ADDR_SIZE   128

/* The address book: where each server's peer and client ports are. Part of
 * the replicated state (changed by NODE_ENTRY_CLUSTER entries, core/fsm.h). */
struct node_addr {
	uint64_t id;
	char peer_addr[CORE_ADDR_SIZE];
	char client_addr[CORE_ADDR_SIZE];
};

struct node_addr_book {
	struct node_addr addrs[CORE_MEMBERS_MAX];
	size_t count;
};

/* Frame types on a peer link (the handshake's are the shell's, peer_auth.h). */
enum peer_frame_type {
	PEER_FRAME_HELLO = 1,         /* 1, 10, 11: the handshake (peer_auth.h) */
	PEER_FRAME_RAFT = 2,          /* a Raft message */
	PEER_FRAME_SESSION_TOUCH = 5, /* follower -> leader: sessions heard from */
	PEER_FRAME_SESSION_MOVED = 6, /* to every peer: a session now lives on the sender */
	PEER_FRAME_REQUEST = 12,      /* to the leader: a tracked request (tracker.h) */
	PEER_FRAME_REPLY = 13,        /* from the leader: its answer to one */
};

struct fsm_applied;

/* Log levels of the `log` effect (the same order as os/log.h). */
enum core_log_level {
	CORE_LOG_DEBUG = 0,
	CORE_LOG_INFO = 1,
	CORE_LOG_WARN = 2,
	CORE_LOG_ERROR = 3,
};

struct zk_result;
struct zk_ids;

struct core_host_ops {
	enum keel_err (*persist)(void *ctx, const struct raft_ready *rd);

	struct keel_wbuf *(*peer_begin)(void *ctx, uint64_t to, uint8_t type, size_t *mark);
	void (*peer_end)(void *ctx, uint64_t to, size_t mark);
	bool (*peer_connected)(void *ctx, uint64_t to);

	/* A client connection is named by the host's id (never 0). */
	struct keel_wbuf *(*client_begin)(void *ctx, uint64_t conn, size_t *mark);
	void (*client_end)(void *ctx, uint64_t conn, size_t mark);
	void (*client_send)(void *ctx, uint64_t conn, const void *payload, size_t size);
	void (*client_pause)(void *ctx, uint64_t conn, bool paused);
	void (*client_close)(void *ctx, uint64_t conn, enum keel_err reason, bool flush);
	bool (*client_paused)(void *ctx, uint64_t conn);

	uint64_t (*now_ms)(void *ctx);
	int64_t (*wall_ms)(void *ctx);
	uint64_t (*mono_ns)(void *ctx);
	enum keel_err (*random_bytes)(void *ctx, void *buf, size_t size);
	/* One operator log line; `fmt` and `ap` as vprintf, borrowed. */
	void (*log)(void *ctx, enum core_log_level level, const char *fmt, va_list ap);

	/* Snapshot files (the host's storage). snapshot_read fills `buf`
	 * with `size` bytes at `offset` of snapshot (index, term), for a
	 * chunk to a peer; snapshot_load replaces the state machine with a
	 * received snapshot made durable (fsm_snapshot_read over the file)
	 * and logs why when it cannot. */
	enum keel_err (*snapshot_read)(void *ctx, uint64_t index, uint64_t term, uint64_t offset,
	                               void *buf, size_t size, size_t *got);
	enum keel_err (*snapshot_load)(void *ctx, const struct raft_snapshot_meta *meta);
	/* Run core_drive() soon (after the inputs already queued). */
	void (*schedule_drive)(void *ctx);
	/* The core cannot go on (c->failed): stop the server. */
	void (*on_failed)(void *ctx);

	/* The address book changed (a NODE_ENTRY_CLUSTER entry applied):
	 * the host updates its peer links. */
	void (*book_changed)(void *ctx);
	/* Entries were applied (after raft_advance): the host may start a
	 * snapshot of the state (it forks: node/snapshot.c). */
	void (*maybe_snapshot)(void *ctx);
	/* The ZooKeeper session credential (addauth "keel"): true when
	 * `proof` is the cluster secret's proof for (session_id, passwd).
	 * The secret and its HMAC stay in the host. */
	/* Whether `addr` ("HOST:PORT") is an address the host can dial (a
	 * new member's peer address). */
	bool (*addr_ok)(void *ctx, const char *addr);
	bool (*session_proof_ok)(void *ctx, uint64_t session_id, const uint8_t passwd[16],
	                         const uint8_t *proof, size_t size);

	/* The change feed (core/feed.c): the unsent output bytes of client
	 * connection `conn` (0 when it is gone), and feed_wait(true): a
	 * subscriber waits for its output to drain, call node_feed_pump()
	 * once per turn of the host's loop until feed_wait(false). */
	size_t (*client_output_bytes)(void *ctx, uint64_t conn);
	void (*feed_wait)(void *ctx, bool waiting);
};

struct core_host {
	const struct core_host_ops *ops;
	void *ctx;
};

/* A test host's view of what the ready loop hands its own parts (the
 * simulator's checkers; NULL in the server, which needs none of it):
 * each applied entry with what it produced, and the ReadIndex results.
 * Called after the core's parts got the same. */
struct core_observer {
	void (*applied)(void *ctx, const struct raft_entry *entry,
	                const struct fsm_applied *applied);
	void (*reads)(void *ctx, const struct raft_read_result *reads, size_t count);
	void *ctx;
};

/* Something waiting for its Raft entry to commit (admin operations on the
 * leader). Matched by (index, term) in commit order. `link` puts it in
 * c->waiters (index order), then in c->done until its callback runs; it is
 * in no list before core_wait_commit and after the callback. */
struct node_waiter {
	uint64_t index;
	uint64_t term;
	void (*done)(struct node_core *c, struct node_waiter *w, enum keel_err err);
	void *ctx;
	enum keel_err result;
	struct keel_list link;
};

struct node_stats {
	uint64_t proposals;
	uint64_t proposals_failed;
	uint64_t entries_applied;
	uint64_t elections_seen;
	uint64_t leader_changes;
	uint64_t persist_batches;
	uint64_t snapshots_taken;
	uint64_t snapshots_installed;
	uint64_t client_connections_total;
	uint64_t requests;
	struct metrics_hist append_latency;  /* submit -> durable, per batch */
	struct metrics_hist fsync_latency;   /* storage thread's fdatasync */
	struct metrics_hist commit_latency;  /* propose -> applied (local writes) */
	struct metrics_hist request_latency; /* client request -> reply */
};

/* The server core's state. Being split out of struct node (node/node.h)
 * part by part: what is here is reached by the pure core files (src/core)
 * and by nothing that needs the host's handles. */
struct node_core {
	struct core_host host;
	const struct core_observer *observer; /* NULL but in a test host */
	uint64_t id;         /* this server's id */
	uint64_t seed_state; /* core_seed_next() */
	/* The replicated state machine (core/fsm.h) and the address book,
	 * changed only by applying committed entries (and loading snapshots). */
	struct node_fsm *fsm;
	struct node_addr_book book;
	bool failed;  /* cannot follow the log or make writes durable: stop */
	bool stopped; /* core_stop(): inputs are no longer acted on */

	struct raft *raft;
	struct raft_options raft_opts;
	struct raft_msg_limits msg_limits;
	struct raft_entry *decode_entries; /* scratch for raft_msg_decode */
	uint8_t *snapshot_chunk_buf;

	/* Soft state from the last ready. */
	uint8_t role;
	uint64_t leader;
	uint64_t term;
	uint64_t commit_index;
	uint64_t applied_index;
	uint64_t applied_term;             /* term of the entry at applied_index */
	struct raft_config applied_config; /* membership in force at applied_index */
	bool in_ready;                     /* between raft_ready and raft_advance */
	bool drive_again;                  /* a drive was asked for while in_ready */

	/* Work for after raft_advance (the core forbids calls before). */
	uint64_t deferred_snap_fail[CORE_MEMBERS_MAX];
	size_t deferred_snap_fail_count;
	uint64_t deferred_unreachable[CORE_MEMBERS_MAX];
	size_t deferred_unreachable_count;
	struct keel_list done; /* of node_waiter, decided, callbacks due */

	/* Snapshots received from the leader, being made durable, in persist
	 * order (the core may hand out another before the first is durable). */
	struct {
		uint64_t persist_id;
		struct raft_snapshot_meta meta;
	} installs[8];
	size_t n_installs;

	/* Our own snapshots. */
	uint64_t snapshot_index;
	uint64_t bytes_since_snapshot; /* entry bytes applied since the last one */

	/* Persist batches in flight: submit time per id, for latency. */
	uint64_t persist_submitted_ns[256];

	/* Admin waiters (leader) in index order. */
	struct keel_list waiters; /* of node_waiter */
	/* Membership changes and transfers being run (core/membership.c). */
	struct keel_list admin_reqs;

	/* Requests decided by the leader, of every kind (core/tracker.h). */
	struct tracker tracker;

	/* The ZooKeeper sessions and requests of this server's clients. */
	struct zk_server *zk_server;
	/* The change feed's history and subscriptions (core/feed.h). */
	struct node_feeds *feeds;
	/* The cluster controller's glue. */
	struct node_ctl *ctl;

	struct node_stats stats;
};

/* Sets up the core's own fields (the rest of the state is set up by its
 * owners); `seed` is the start seed every pseudo-random choice derives
 * from. */
void core_init(struct node_core *c, uint64_t id, const struct core_host *host, uint64_t seed);

/* What core_open needs: Raft's timing and limits, the state machine's. */
struct fsm_image_ops;
struct zk_config;
struct core_options {
	uint32_t election_timeout_ms;
	uint32_t heartbeat_ms;
	uint32_t snapshot_chunk_bytes;
	uint64_t snapshot_trailing;
	uint32_t max_entry_bytes;
	const struct zk_config *zk_config; /* copied */
	const struct fsm_image_ops *image; /* copied; image->ctx must outlive the core */
	/* Optional: every other Raft option (window sizes, read timeout ...)
	 * instead of raft_options_default(); the fields above, the id and the
	 * seeded rng still come from the core. The simulator draws them. */
	const struct raft_options *raft;
};

/* After core_init: creates the Raft core, the request tracker (request ids
 * start at a seeded random point; its TRACK_ADMIN kind is the core's
 * membership.c, TRACK_ZK_WRITE and TRACK_META are set by zk_clients_open
 * and node_ctl_create) and the state machine. The caller then restores
 * Raft (raft_restore on c->raft). On error `err` says why; core_close()
 * frees what was made. */
enum keel_err core_open(struct node_core *c, const struct core_options *o, char *err,
                        size_t err_size);
void core_close(struct node_core *c);

/* The next derived seed (splitmix64 over the start seed). */
uint64_t core_seed_next(struct node_core *c);

/* The book entry of server `id`, or NULL. */
const struct node_addr *core_addr_find(const struct node_core *c, uint64_t id);

/* One log line through the host. */
__attribute__((format(printf, 3, 4))) void
core_log(const struct node_core *c, enum core_log_level level, const char *fmt, ...);
#define CORE_DEBUG(c, ...) core_log((c), CORE_LOG_DEBUG, __VA_ARGS__)
#define CORE_INFO(c, ...)  core_log((c), CORE_LOG_INFO, __VA_ARGS__)
#define CORE_WARN(c, ...)  core_log((c), CORE_LOG_WARN, __VA_ARGS__)
#define CORE_ERROR(c, ...) core_log((c), CORE_LOG_ERROR, __VA_ARGS__)

/* Shorthands for the effects. */
uint64_t core_now_ms(const struct node_core *c);
int64_t core_wall_ms(const struct node_core *c);
uint64_t core_mono_ns(const struct node_core *c);
struct keel_wbuf *core_peer_begin(struct node_core *c, uint64_t to, uint8_t type, size_t *mark);
void core_peer_end(struct node_core *c, uint64_t to, size_t mark);
bool core_peer_connected(struct node_core *c, uint64_t to);
enum keel_err core_random(struct node_core *c, void *buf, size_t size);
struct keel_wbuf *core_client_begin(struct node_core *c, uint64_t conn, size_t *mark);
void core_client_end(struct node_core *c, uint64_t conn, size_t mark);
void core_client_send(struct node_core *c, uint64_t conn, const void *payload, size_t size);
void core_client_pause(struct node_core *c, uint64_t conn, bool paused);
void core_client_close(struct node_core *c, uint64_t conn, enum keel_err reason, bool flush);
bool core_client_paused(const struct node_core *c, uint64_t conn);

/* ---- inputs ---- */

/* Runs the ready loop: collects and handles every ready. Call after any
 * input (step, tick, propose, persisted). A call made while a ready is
 * being handled is folded into the running one. */
void core_drive(struct node_core *c);
/* Persist batch `persist_id` is durable (err: storage failed). In persist
 * order, once per batch. */
void core_on_durable(struct node_core *c, uint64_t persist_id, enum keel_err err);
/* A frame from authenticated peer `from`; `body` is borrowed. */
void core_on_peer_frame(struct node_core *c, uint64_t from, uint8_t type, const uint8_t *body,
                        size_t size);
/* The link to peer `id` went up or down. */
void core_on_peer_link(struct node_core *c, uint64_t id, bool up);
/* The periodic timer (monotonic ms); the host drives after it. */
void core_tick(struct node_core *c, uint64_t now_ms);
/* Shutdown: nothing more is acted on (late completions acknowledge no one). */
void core_stop(struct node_core *c);

/* ---- requests of the parts ---- */

/* Proposes `data` (an encoded envelope) on the leader. Not between ready
 * and advance. */
enum keel_err core_propose(struct node_core *c, const void *data, uint32_t size, uint64_t *index,
                           uint64_t *term);
/* Adds a waiter for (index, term); `w` stays owned by the caller until done.
 * A caller that frees `w` earlier unlinks it first (keel_list_remove). */
void core_wait_commit(struct node_core *c, struct node_waiter *w);
/* Starts a PEER_FRAME_REQUEST for tracked request `request_id` to the
 * leader: returns the writer (append the body, then core_peer_end(c, *to,
 * *mark)) or NULL when no leader is known or there is no link to it. */
struct keel_wbuf *core_request_begin(struct node_core *c, enum tracker_kind kind,
                                     uint64_t request_id, uint64_t *to, size_t *mark);
/* Starts a PEER_FRAME_REPLY to hdr->origin (the same pairing, to the
 * origin); NULL when there is no link (the origin's deadline answers). */
struct keel_wbuf *core_reply_begin(struct node_core *c, const struct tracker_reply *hdr,
                                   size_t *mark);

#endif
