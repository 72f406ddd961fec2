/*
 * wal.h — the write-ahead log: a synchronous API over segment files, the
 * hard state and snapshots in one directory, with crash recovery.
 *
 * Used directly by unit tests and by the simulator (through the fault vfs),
 * and by the server through the group-commit writer (writer.h), which calls
 * it from its storage thread. A `struct wal` is single-threaded: one thread
 * at a time, and never while a writer thread owns it.
 *
 * The log is a sequence of entries {index, term, type, data} with
 * consecutive indexes and non-decreasing terms, preceded by the newest
 * snapshot (index, term). The WAL stores them; it does not interpret them.
 *
 *   wal_open()          recover: hard state, newest valid snapshot, entries
 *                       after it; or a precise corruption error
 *   wal_append()        buffer entries (pwrite when the buffer fills)
 *   wal_sync()          write what is buffered and fdatasync: everything
 *                       appended so far is durable when it returns KEEL_OK
 *   wal_truncate_suffix() drop entries from an index on (durable on return)
 *   wal_save_hard_state() term/vote, atomically and durably
 *   wal_compact()       delete segments wholly covered by a durable snapshot
 *   wal_reset()         after installing a snapshot: discard the whole log
 *   wal_close()
 *
 * Durability contract: an entry is durable once a wal_sync() (or a
 * truncation, reset or segment roll, which sync internally) that followed
 * its append returned KEEL_OK. A crash may keep any prefix of what was
 * appended after the last sync, never less than what was synced, and never
 * an entry that a durable truncation removed.
 *
 * Failure: any failed write, sync, rename or directory sync puts the WAL in
 * a sticky failed state (wal_failed()): every later call that would write
 * returns KEEL_FAILED, because after a failed fsync nothing about the data
 * can be known (the page cache may have dropped it). The server must stop
 * acknowledging and restart, which runs recovery. Invalid arguments
 * (KEEL_INVAL: an index gap, a term going back) change nothing and are not
 * sticky. Every error leaves a human-readable reason in wal->errmsg.
 *
 * Recovery refuses to start (KEEL_CORRUPT, the file and offset in errmsg)
 * when synced data is damaged or missing: a bad record followed by a later
 * sync batch, a segment that ends before the next one starts, a missing
 * segment, a log that starts after the newest valid snapshot, a hard-state
 * term below the last entry's term, a damaged hard state or segment header.
 * It repairs without asking only what a crash can leave: a torn last sync
 * batch of a segment, stale records from an earlier life of a reused file,
 * leftover temp files, a log that was about to be replaced by an installed
 * snapshot. docs/storage-format.md explains each case and what the operator
 * does.
 */
#ifndef KEEL_WAL_WAL_H
#define KEEL_WAL_WAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/err.h"
#include "wal/config.h"
#include "wal/format.h"
#include "wal/hard_state.h"
#include "wal/snapshot.h"
#include "wal/vfs.h"

/* One log entry. In wal_append() the data is the caller's and is copied
 * before the call returns; in a recovery result it lives in the result. */
struct wal_entry {
	uint64_t index;
	uint64_t term;
	uint8_t type;
	uint32_t size;
	const uint8_t *data;
};

/* What wal_open() found. Owns its memory: free with wal_recovered_free(). */
struct wal_recovered {
	bool has_hard_state;               /* false: fresh (term 0, no vote) */
	struct wal_hard_state hard_state;  /* extra points into this result */
	bool has_snapshot;
	struct wal_snapshot_meta snapshot; /* membership points into this result */
	/* Entries snapshot.index+1 .. last_index (all of the log when there
	 * is no snapshot), in order. */
	struct wal_entry *entries;
	size_t entry_count;
	uint64_t last_index; /* of the log, or of the snapshot if no entries */
	uint64_t last_term;
	/* What recovery repaired or skipped ("" if nothing): worth a log line. */
	char notes[WAL_ERRMSG_SIZE];
	struct keel_arena arena; /* private */
};

void wal_recovered_free(struct wal_recovered *r);

/* A segment of the log, in index order. last_index < first_index when it
 * holds no entry yet. */
struct wal_segment_info {
	uint64_t generation;
	uint64_t first_index;
	uint64_t last_index;
};

struct wal_term_run {
	uint64_t first_index; /* the first entry with this term */
	uint64_t term;
};

/* Caller-allocated; the fields are private except errmsg. */
struct wal {
	struct wal_config config;
	char dir[WAL_VFS_PATH_MAX];
	/* Why the last call failed (or the failure that made the WAL sticky). */
	char errmsg[WAL_ERRMSG_SIZE];
	enum keel_err failed; /* KEEL_OK, or the error that made it sticky */
	bool open;

	/* The log. */
	struct wal_segment_info *segments; /* index order; the last is the tail */
	size_t segment_count;
	size_t segment_capacity;
	uint64_t *obsolete; /* generations of superseded segment files */
	size_t obsolete_count;
	size_t obsolete_capacity;
	uint64_t *spares; /* generations of spare files ready for reuse */
	size_t spare_count;
	size_t spare_capacity;
	struct wal_term_run *terms; /* term changes after the snapshot */
	size_t term_count;
	size_t term_capacity;
	uint64_t next_generation;
	uint64_t snapshot_index;
	uint64_t snapshot_term;
	uint64_t last_index;
	uint64_t last_term;
	uint64_t durable_index;

	/* The open tail segment (NULL until the first write after open). */
	struct wal_vfs_file *active;
	uint64_t active_offset;     /* where the next record goes */
	uint64_t flushed_offset;    /* bytes handed to pwrite; buf starts here */
	uint64_t batch_first_index; /* first index since the last sync, 0 if none */
	bool active_unsynced;       /* pwrites since the last fdatasync */
	uint8_t *buf;
	size_t buf_used;
	size_t buf_capacity;

	/* A spare being zero-filled step by step (wal_prepare_spare_step). */
	struct wal_vfs_file *preparing;
	uint64_t preparing_generation;
	uint64_t preparing_offset;
};

/*
 * Opens (creating the directory if needed) and recovers the WAL in
 * config->dir. On KEEL_OK `out` holds what was found (free it with
 * wal_recovered_free) and the WAL is ready for appends at out->last_index+1.
 * On error the WAL is not open (nothing to close), wal->errmsg says what is
 * wrong, which file, at which offset, and what to do; `out` needs no free.
 */
enum keel_err wal_open(struct wal *wal, const struct wal_config *config,
		       struct wal_recovered *out);

/* What wal_open() would decide, without changing anything on disk (no
 * directory creation, no temp file removal, no renames, no syncs): for
 * operators' tools. On KEEL_OK `out` is filled (free it); on error errmsg
 * holds the same message wal_open() would give. */
enum keel_err wal_check(const struct wal_config *config, struct wal_recovered *out,
			char errmsg[WAL_ERRMSG_SIZE]);

/* Closes files and frees memory. Does not sync: what was not synced may be
 * lost, as in a crash. */
void wal_close(struct wal *wal);

/* Appends entries: entries[0].index must be wal_last_index()+1, indexes
 * consecutive, terms non-decreasing from wal_last_term(), sizes within
 * max_entry_size_bytes (else KEEL_INVAL/KEEL_TOOBIG, nothing written). The
 * data is copied (into the write buffer or written) before return. */
enum keel_err wal_append(struct wal *wal, const struct wal_entry *entries, size_t count);

/* Writes the buffer and fdatasyncs the tail segment. */
enum keel_err wal_sync(struct wal *wal);

/* Removes entries from_index .. last. from_index must be above the newest
 * snapshot's index and at most wal_last_index()+1 (which is a no-op). On
 * KEEL_OK the truncation is durable (a new segment generation supersedes
 * the old entries; see docs/storage-format.md). */
enum keel_err wal_truncate_suffix(struct wal *wal, uint64_t from_index);

/* Saves the hard state durably (hard_state.h); a failure is sticky. */
enum keel_err wal_save_hard_state(struct wal *wal, const struct wal_hard_state *hs);

/* Removes segments whose entries are all <= upto_index. A durable snapshot
 * file with index >= upto_index must exist (KEEL_INVAL otherwise), which the
 * WAL checks in the directory. The tail segment always stays. Removed files
 * become spares (up to config->spare_segments) or are deleted. */
enum keel_err wal_compact(struct wal *wal, uint64_t upto_index);

/* After a snapshot (index, term) from the leader was committed to disk
 * (wal_snapshot_commit): discards the whole log, durably, so that the next
 * append is snapshot_index+1. The snapshot file must exist (KEEL_INVAL). */
enum keel_err wal_reset(struct wal *wal, uint64_t snapshot_index, uint64_t snapshot_term);

/* Prepares one spare segment file if fewer than config->spare_segments are
 * ready (idle-time work; it moves the cost of preallocation off the append
 * path). Returns KEEL_OK with nothing done when the pool is full or
 * preallocation is off. A failure here is not sticky (no log data is
 * involved): the partial file is removed. */
enum keel_err wal_prepare_spare(struct wal *wal);

/* The same in steps of at most budget_bytes of zero-filling, so that the
 * storage thread can check for new batches in between; *done is true when
 * nothing (more) is needed right now. */
enum keel_err wal_prepare_spare_step(struct wal *wal, uint64_t budget_bytes, bool *done);

bool wal_failed(const struct wal *wal);
uint64_t wal_last_index(const struct wal *wal);
uint64_t wal_last_term(const struct wal *wal);
/* The last index known durable (synced), and its term. */
uint64_t wal_durable_index(const struct wal *wal);
uint64_t wal_durable_term(const struct wal *wal);
/* Term of the entry at `index` if the WAL knows it (snapshot index .. last
 * index), else 0. */
uint64_t wal_term_at(const struct wal *wal, uint64_t index);

#endif
