/*
 * zk_housekeeping.h — which container and TTL nodes are due for deletion.
 *
 * ZooKeeper's ContainerManager, as a pure scan the leader runs on a timer
 * (ZooKeeper: every 60 s by default). Rules (probe p10 on ZooKeeper 3.8):
 *
 *   container  no children, and it had one once (persisted cversion > 0),
 *              or — when config.container_max_never_used_ms != 0 — it never
 *              had one and now - mtime > that limit;
 *   TTL node   no children and now - mtime > ttl (setData renews it).
 *
 * For each candidate the leader proposes a DELETE_CONTAINER / DELETE_TTL
 * txn (zk_txn_encode_delete) stamped with its time; zk_apply() checks the
 * same rule again at that time, so a stale proposal (a child was added, the
 * node was touched) changes nothing.
 */
#ifndef KEEL_ZK_HOUSEKEEPING_H
#define KEEL_ZK_HOUSEKEEPING_H

#include <stddef.h>
#include <stdint.h>

#include "zk/zk_state.h"
#include "zk/zk_txn.h"

/* One candidate; `path` is valid during the call only. */
typedef void (*zk_reap_fn)(void *ctx, enum zk_txn_kind kind, struct zk_bytes path);

/* Is node `id` due at `now_ms`? (The rule apply re-checks.) */
bool zk_housekeeping_due(const struct zk_state *st, uint32_t id, int64_t now_ms,
			 enum zk_txn_kind *kind);

/* Calls `emit` for at most `max` due nodes, in path order. Returns how
 * many were due in total (may exceed max), or 0 when out of memory. */
size_t zk_housekeeping_scan(const struct zk_state *st, int64_t now_ms, size_t max,
			    zk_reap_fn emit, void *ctx);

#endif
