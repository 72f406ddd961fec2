/*
 * node.h — a keel server: one libuv loop wiring Raft, storage, peers, the
 * client port and the state machine.
 *
 * Threads: the loop thread runs everything here; the storage thread (see
 * storage.h) writes and syncs the WAL; snapshots are written by a forked
 * child. Ordering rules kept here (DESIGN.md), asserted where they can break:
 *   - the Raft core releases only messages whose state is durable, and the
 *     leader counts itself only after its own fsync (raft.h); the node
 *     reports durability strictly in persist order;
 *   - committed entries are applied in index order exactly once
 *     (KEEL_ASSERT on applied_index + 1 == entry index);
 *   - a client's write is answered only after the entry is applied on the
 *     server the client is connected to.
 *
 * Lifecycle:  node_init -> node_run (until SIGTERM/SIGINT) -> node_close.
 */
#ifndef KEEL_NODE_NODE_H
#define KEEL_NODE_NODE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "base/err.h"
#include "base/hash.h"
#include "base/list.h"
#include "core/core.h"
#include "core/tracker.h"
#include "net/http.h"
#include "net/net.h"
#include "node/config.h"
#include "node/limits.h"
#include "node/metrics.h"
#include "node/peers.h"
#include "node/storage.h"
#include "raft/raft.h"

struct node_client;
struct node_admin_conn;
struct node_ctl;

_Static_assert(PEERS_MAX == CORE_MEMBERS_MAX, "one server limit for peers and the book");
_Static_assert(NODE_ADDR_SIZE == CORE_ADDR_SIZE, "one address size");

/* Something waiting for its Raft entry to commit (admin operations on the
 * leader). Matched by (index, term) in commit order. `link` puts it in
 * n->waiters (index order), then in n->done until its callback runs; it is
 * in no list before node_wait_commit and after the callback. */
struct node;

struct node_waiter {
	uint64_t index;
	uint64_t term;
	void (*done)(struct node *n, struct node_waiter *w, enum keel_err err);
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

struct node {
	struct node_core core; /* the pure part (core/core.h) */
	struct node_config cfg;
	uv_loop_t *loop;
	struct net_loop nl;
	struct peers peers;
	uv_tcp_t client_listener;
	bool client_listening;
	struct http_server http;
	bool http_running;
	uv_timer_t tick_timer;
	uv_signal_t sigterm;
	uv_signal_t sigint;
	uint64_t start_ms;

	struct node_storage *storage;
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
	bool in_ready;    /* between raft_ready and raft_advance */
	bool drive_again; /* node_drive was asked for while in_ready */
	bool drive_scheduled;
	uv_check_t drive_check; /* runs a scheduled drive once per loop turn */
	uv_idle_t drive_idle;   /* keeps the loop from blocking while one is due */

	/* Work for after raft_advance (the core forbids calls before). */
	uint64_t deferred_snap_fail[PEERS_MAX];
	size_t deferred_snap_fail_count;
	uint64_t deferred_unreachable[PEERS_MAX];
	size_t deferred_unreachable_count;
	struct keel_list done; /* of node_waiter, decided, callbacks due */

	/* Snapshots received from the leader, being made durable, in persist
	 * order (the core may hand out another before the first is durable). */
	struct {
		uint64_t persist_id;
		struct raft_snapshot_meta meta;
	} installs[8];
	size_t n_installs;

	/* Our own snapshots (node/snapshot.c). */
	uint64_t snapshot_index;
	uint64_t bytes_since_snapshot; /* entry bytes applied since the last one */
	struct node_snapshotter *snapshotter;
	struct node_admin *admin;

	/* Persist batches in flight: submit time per id, for latency. */
	uint64_t persist_submitted_ns[256];

	/* Admin waiters (leader) in index order. */
	struct keel_list waiters; /* of node_waiter */

	/* Requests decided by the leader, of every kind (tracker.h). */
	struct tracker tracker;

	/* Client side. */
	struct node_clients *clients;
	struct zk_server *zk_server;

	/* The cluster controller's glue (node/controller.h). */
	struct node_ctl *ctl;

	struct node_stats stats;
	struct node_limits limits; /* connection, fd and byte limits (limits.h) */
	bool stopping;
	int exit_code;
};

/* Sets up everything (storage recovery, Raft restore, listeners). On error
 * writes a message for the operator and returns non-OK. */
enum keel_err node_init(struct node *n, uv_loop_t *loop, const struct node_config *cfg, char *err,
			size_t err_size);

/* Runs the loop until shutdown; returns the process exit code. */
int node_run(struct node *n);

void node_close(struct node *n);

/* Drives the Raft core: collects and handles every ready. Call after any
 * input (step, tick, propose, persisted). Safe to call re-entrantly: a call
 * made while a ready is being handled is folded into the running one. */
void node_drive(struct node *n);

/* Asks for node_drive() at the end of this loop iteration, so that every
 * input of the iteration (client writes, peer messages, completions) is
 * handled in one ready: one persist batch, one AppendEntries per peer. */
void node_schedule_drive(struct node *n);

/* Proposes `data` (an encoded envelope) on the leader. */
enum keel_err node_propose(struct node *n, const void *data, uint32_t size, uint64_t *index,
			   uint64_t *term);

/* Adds a waiter for (index, term); `w` stays owned by the caller until done.
 * A caller that frees `w` earlier unlinks it first (keel_list_remove). */
void node_wait_commit(struct node *n, struct node_waiter *w);

/* Starts a PEER_FRAME_REQUEST for tracked request `request_id` to the
 * leader: returns the writer (append the body, then peers_send_end(&n->peers,
 * *to, *mark)) or NULL when no leader is known or there is no link to it. */
struct keel_wbuf *node_request_begin(struct node *n, enum tracker_kind kind, uint64_t request_id,
				     uint64_t *to, size_t *mark);
/* Starts a PEER_FRAME_REPLY to hdr->origin (the same pairing, to the
 * origin); NULL when there is no link (the origin's deadline answers). */
struct keel_wbuf *node_reply_begin(struct node *n, const struct tracker_reply *hdr, size_t *mark);

/* Monotonic milliseconds of the loop. */
uint64_t node_now_ms(const struct node *n);

/* The address book changed: update peer links. */
void node_book_changed(struct node *n);

#endif
