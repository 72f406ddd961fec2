/*
 * storage.h — the node's durable storage: the WAL behind a storage thread.
 *
 * The loop thread hands each Raft ready's persist batch to
 * node_storage_submit(), which copies what it needs and queues it for the
 * storage thread (the WAL writer's, wal/writer.h); the thread writes queued
 * batches, makes them durable with one fdatasync (group commit) and reports
 * them through on_durable() ON THE LOOP THREAD, in persist_id order. A
 * write or sync failure is sticky: the batch and every later one report
 * the error, and the node stops serving.
 *
 * Snapshots: the node's own snapshots are written by a forked child (see
 * node/snapshot.c) into the WAL's snapshot files; this module reads chunks
 * of them for InstallSnapshot, stores received chunks, and installs them.
 */
#ifndef KEEL_NODE_STORAGE_H
#define KEEL_NODE_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/err.h"
#include "node/metrics.h"
#include "raft/raft.h"

struct node_storage;

/* What recovery found; memory owned by the storage until
 * node_storage_release_recovered(). */
struct node_recovered {
	struct raft_hard_state hard_state;
	bool has_snapshot;
	struct raft_snapshot_meta snapshot;
	char snapshot_path[2048];
	struct raft_entry *entries;
	size_t n_entries;
	bool empty; /* nothing on disk at all: a brand-new server */
};

typedef void (*node_storage_durable_fn)(void *ctx, uint64_t persist_id, enum keel_err err);

struct node_storage_options {
	const char *data_dir;
	uint64_t segment_bytes;
	uint32_t max_entry_bytes;
	uv_loop_t *loop;
	node_storage_durable_fn on_durable;
	void *ctx;
	struct metrics_hist *fsync_hist; /* fdatasync durations (loop thread) */
};

enum keel_err node_storage_open(struct node_storage **out, const struct node_storage_options *opts,
				struct node_recovered *rec, char *err, size_t err_size);
void node_storage_release_recovered(struct node_storage *s, struct node_recovered *rec);

/* Writes the bootstrap entry and hard state of a brand-new cluster member
 * synchronously (before the loop runs). */
enum keel_err node_storage_bootstrap(struct node_storage *s, const struct raft_entry *entry,
				     const struct raft_hard_state *hs, char *err, size_t err_size);

/* Queues a ready's persist batch (rd->persist_id != 0). Copies every byte. */
enum keel_err node_storage_submit(struct node_storage *s, const struct raft_ready *rd);

/* Reads up to `size` bytes of snapshot (index, term) at offset into buf. */
enum keel_err node_storage_snapshot_read(struct node_storage *s, uint64_t index, uint64_t term,
					 uint64_t offset, void *buf, size_t size, size_t *got);

/* The path of the newest snapshot file (for loading at start or after an
 * install), or an empty string. */
void node_storage_snapshot_path(struct node_storage *s, char *out, size_t size);

/* The path of snapshot (index, term) in the data directory. */
void node_storage_snapshot_path_for(struct node_storage *s, uint64_t index, uint64_t term,
				    char *out, size_t size);

/* The file system every storage file goes through (the POSIX vfs; it keeps
 * no state, so a forked child may use it too). Lives as long as `s`. */
struct wal_vfs *node_storage_vfs(struct node_storage *s);

/* The size of snapshot file (index, term): KEEL_NOENT when it is missing. */
enum keel_err node_storage_snapshot_size(struct node_storage *s, uint64_t index, uint64_t term,
					 uint64_t *size);

/* Our own snapshot (index, term) is now the newest. */
void node_storage_note_snapshot(struct node_storage *s, uint64_t index, uint64_t term);

/* Frees log segments wholly before `index` and old snapshots (queued behind
 * the batches submitted so far; a failure is sticky like a write's). */
void node_storage_compact(struct node_storage *s, uint64_t index);

/* True after a write or sync failed (sticky). */
bool node_storage_failed(const struct node_storage *s);

/* Waits for queued batches, stops the thread, closes files. The memory is
 * released once the loop runs the handle's close (node_close does). */
void node_storage_close(struct node_storage *s);

#endif
