/*
 * node.h — a keel server: the libuv shell around the server core
 * (core/core.h, n->core): storage, peers, the client port, admin and
 * metrics, and the host table the core does its effects through
 * (node/host.c).
 *
 * Threads: the loop thread runs everything here and in the core; the storage thread (see
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

#include "base/assert.h"
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
struct node_ctl;
struct sasl_users;

_Static_assert(PEERS_MAX == CORE_MEMBERS_MAX, "one server limit for peers and the book");
_Static_assert(NODE_ADDR_SIZE == CORE_ADDR_SIZE, "one address size");

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
	bool drive_scheduled;
	uv_check_t drive_check; /* runs a scheduled drive once per loop turn */
	uv_idle_t drive_idle;   /* keeps the loop from blocking while one is due */
	uv_check_t feed_check;  /* pumps the change feed while it waits (feed_wait) */

	/* Our own snapshots (node/snapshot.c). */
	struct node_snapshotter *snapshotter;

	/* Client side. */
	struct node_clients *clients;

	struct node_limits limits; /* connection, fd and byte limits (limits.h) */
	struct sasl_users *sasl_users; /* ZooKeeper SASL users; NULL: no mechanism */
	/* TLS contexts (node_tls.c); NULL when that TLS is off. */
	struct net_tls_ctx *client_tls;
	struct net_tls_ctx *peer_tls_accept;
	struct net_tls_ctx *peer_tls_dial;
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

/* The node around a core. */
static inline struct node *node_of(struct node_core *c)
{
	return KEEL_CONTAINER_OF(c, struct node, core);
}

/* Asks for core_drive() at the end of this loop iteration, so that every
 * input of the iteration (client writes, peer messages, completions) is
 * handled in one ready: one persist batch, one AppendEntries per peer. */
void node_schedule_drive(struct node *n);

/* Monotonic milliseconds of the loop. */
uint64_t node_now_ms(const struct node *n);

/* Loads the certificates of the secure client port and of peer mutual
 * TLS named in n->cfg (node_tls.c); node_tls_close frees them once every
 * connection is closed. */
enum keel_err node_tls_open(struct node *n, char *err, size_t err_size);
void node_tls_close(struct node *n);

/* The address book changed: update peer links. */
void node_book_changed(struct node *n);

#endif
