/*
 * core.h — the server core's interface to its host.
 *
 * The server core (the Raft ready loop, the state machine, the ZooKeeper
 * sessions and requests, the controller glue, the request tracker) does no
 * I/O of its own and reads no clock or random source. Everything it needs
 * from the outside world it asks of its host through `struct core_host`;
 * everything the outside world tells it arrives through the inputs below.
 * Two hosts implement it: the libuv shell of `keel server` (node/host.c)
 * and, next, the simulator (docs/simulator.md, "the real server core under
 * the simulator").
 *
 * Effects (core -> host), all through `host->ops`, `host->ctx` first:
 *   persist        hand a persist batch (a ready with persist_id != 0) to
 *                  storage; the host later calls core_on_durable() for it.
 *                  Borrowed: the host copies what it keeps before returning
 *                  (the ready is released at raft_advance). Non-OK means
 *                  the batch was refused and no completion will come.
 *   peer_begin/end start and finish one frame of `type` to peer `to`:
 *                  begin returns a writer the core appends the body to, or
 *                  NULL when there is no link (the frame is dropped; the
 *                  core's deadlines and Raft's retries cover the loss).
 *                  Every non-NULL begin is followed by exactly one end for
 *                  the same peer before any other effect.
 *   peer_connected whether a link to `to` is up now.
 *   client_*       frames to, pause/resume of and close of one client
 *                  connection (an opaque host handle, struct node_client).
 *                  client_begin/end pair like peer_begin/end. client_send
 *                  copies `payload`. client_close: the host stops reading
 *                  and calls core_on_client_closed() later, from its own
 *                  loop, never from inside client_close.
 *   now_ms         monotonic milliseconds (deadlines, session timeouts);
 *   wall_ms        the wall clock in milliseconds (znode ctime/mtime, txn
 *                  timestamps);
 *   mono_ns        monotonic nanoseconds (latency histograms only);
 *   random         fills a buffer from an unpredictable source (ZooKeeper
 *                  session passwords; base/rng.h is not for secrets).
 *                  Every other random choice comes from `seed` (below).
 * Effects never call back into the core: each returns before the host
 * delivers anything.
 *
 * Inputs (host -> core), one at a time, never re-entrantly, on one thread:
 *   core_seed        a 64-bit seed given once at start; every pseudo-random
 *                    choice (request ids, election jitter, watch hashing,
 *                    the controller's) derives from it via core_seed_next.
 *   core_on_durable  persist batch `persist_id` is durable (or storage
 *                    failed: err). Called in persist order, once per batch.
 *   core_on_peer_frame   a frame from authenticated peer `from`; the body
 *                    is borrowed for the call.
 *   core_on_peer_link    the link to peer `id` went up or down.
 *   core_on_client_frame / core_on_client_closed   see client.c: a frame
 *                    of a ZooKeeper connection (borrowed), its close.
 *   core_tick        the periodic timer: now_ms is monotonic.
 *   core_drive       runs the ready loop; the host calls it after inputs it
 *                    batched (node_schedule_drive). Re-entrant calls fold
 *                    into the running one.
 */
#ifndef KEEL_NODE_CORE_H
#define KEEL_NODE_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "raft/raft.h"

struct node;
struct node_client;

struct core_host_ops {
	enum keel_err (*persist)(void *ctx, const struct raft_ready *rd);

	struct keel_wbuf *(*peer_begin)(void *ctx, uint64_t to, uint8_t type, size_t *mark);
	void (*peer_end)(void *ctx, uint64_t to, size_t mark);
	bool (*peer_connected)(void *ctx, uint64_t to);

	struct keel_wbuf *(*client_begin)(void *ctx, struct node_client *c, size_t *mark);
	void (*client_end)(void *ctx, struct node_client *c, size_t mark);
	void (*client_send)(void *ctx, struct node_client *c, const void *payload, size_t size);
	void (*client_pause)(void *ctx, struct node_client *c, bool paused);
	void (*client_close)(void *ctx, struct node_client *c, enum keel_err reason, bool flush);

	uint64_t (*now_ms)(void *ctx);
	int64_t (*wall_ms)(void *ctx);
	uint64_t (*mono_ns)(void *ctx);
	enum keel_err (*random)(void *ctx, void *buf, size_t size);
};

struct core_host {
	const struct core_host_ops *ops;
	void *ctx;
};

/* The next derived seed (splitmix64 over the start seed). */
uint64_t core_seed_next(struct node *n);

/* Shorthands for the effects. */
uint64_t core_now_ms(const struct node *n);
int64_t core_wall_ms(const struct node *n);
uint64_t core_mono_ns(const struct node *n);
struct keel_wbuf *core_peer_begin(struct node *n, uint64_t to, uint8_t type, size_t *mark);
void core_peer_end(struct node *n, uint64_t to, size_t mark);
bool core_peer_connected(struct node *n, uint64_t to);
enum keel_err core_random(struct node *n, void *buf, size_t size);
struct keel_wbuf *core_client_begin(struct node *n, struct node_client *c, size_t *mark);
void core_client_end(struct node *n, struct node_client *c, size_t mark);
void core_client_send(struct node *n, struct node_client *c, const void *payload, size_t size);
void core_client_pause(struct node *n, struct node_client *c, bool paused);
void core_client_close(struct node *n, struct node_client *c, enum keel_err reason, bool flush);

/* Inputs. */
void core_on_durable(struct node *n, uint64_t persist_id, enum keel_err err);
void core_on_peer_frame(struct node *n, uint64_t from, uint8_t type, const uint8_t *body,
			size_t size);
void core_on_peer_link(struct node *n, uint64_t id, bool up);
void core_tick(struct node *n, uint64_t now_ms);
void core_drive(struct node *n);

#endif
