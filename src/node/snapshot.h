/*
 * snapshot.h — the server's own snapshots, written without stopping the loop.
 *
 * When enough entries were applied since the last snapshot (or an operator
 * asks), the server forks: the child holds a copy-on-write image of the
 * state at the applied index, writes it through the WAL's snapshot writer
 * (temp file, checksum, fsync, rename, directory fsync) and exits; the loop
 * keeps serving. When the child succeeds, the Raft core is told
 * (raft_snapshot_taken) and the log behind it is compacted.
 */
#ifndef KEEL_NODE_SNAPSHOT_H
#define KEEL_NODE_SNAPSHOT_H

#include "base/err.h"
#include "node/node.h"

void snapshot_maybe_start(struct node *n);
/* Starts one now; KEEL_BUSY if one is running. */
enum keel_err snapshot_request(struct node *n);
/* Reaps a finished child. */
void snapshot_tick(struct node *n);
/* Waits for a running child (shutdown). */
void snapshot_close(struct node *n);

/* Replaces the whole state with the snapshot in `path` (a WAL snapshot
 * file) taken at `index` (fsm_snapshot_read over the file; the same caveat
 * on error: the state may be partly replaced). */
enum keel_err fsm_snapshot_load(struct node *n, const char *path, uint64_t index, char *err,
				size_t err_size);

#endif
