/*
 * writer.h — group commit on a dedicated storage thread.
 *
 * The server's event-loop thread submits batches; the storage thread takes
 * everything queued, writes it through the synchronous WAL (wal.h), issues
 * ONE fdatasync for all of it, and then completes each batch in submission
 * order by calling `done` ON THE STORAGE THREAD. The server forwards the
 * completion to its loop (e.g. with uv_async_send); this module knows
 * nothing about libuv.
 *
 * A batch carries, applied in this order:
 *   hard_state     saved (temp file, fsync, rename, fsync dir) before any
 *                  batch of the same group is written; when several batches
 *                  of a group carry one, the newest is saved once
 *   prelude        the caller's own work, run on the storage thread with
 *                  the batch's user_data and the WAL (e.g. writing received
 *                  snapshot chunks and installing a snapshot: rename, sync,
 *                  then wal_reset or wal_compact as the log on disk says)
 *   truncate_from  drop entries from this index on (wal_truncate_suffix;
 *                  the index after the log's last is allowed: no-op)
 *   entries        appended
 *   compact_upto   segments wholly at or below this index removed
 *                  (wal_compact; a durable snapshot must cover it)
 *   prune_snapshots  snapshot files past config.snapshots_retained removed
 *                  (wal_snapshot_prune; best effort, a failure is ignored)
 *
 * install_index: a batch whose prelude installs a snapshot at this index
 * says so, because submit checks where each batch's entries continue and
 * the prelude decides on the storage thread whether the log is reset (it
 * then continues at install_index+1) or kept (it continues where it did).
 * After such a batch submit accepts entries at the later of the two, and a
 * truncate_from anywhere above install_index up to it; an append that then
 * does not fit the log on disk fails the group like any write error.
 *
 * A prelude error fails the group like a write error (sticky); the prelude
 * puts its reason into the errmsg it is given. A prelude must not append
 * entries: the writer's idea of the next index would go wrong.
 *
 * Ownership: submit COPIES the entries, their data and the hard state's
 * extra blob into one allocation owned by the writer; the caller may reuse
 * or free its memory as soon as submit returns. The completion passed to
 * `done` lives only during the call.
 *
 * Completion: result KEEL_OK means every entry of the batch, and of every
 * earlier batch, is durable; durable_index/durable_term are the last
 * durable entry (or snapshot) of the log at that moment. `group` numbers
 * the write+sync rounds (every batch of one round has the same number, and
 * the numbers increase); sync_ns is that round's fdatasync time by the
 * configured clock (0 without one), the same in each of its batches.
 *
 * Failure is sticky: after any failed write, sync, truncation, hard-state
 * save or compaction — or an invalid batch that slipped past submit's
 * checks — the group's batches complete with the error, every batch still
 * queued completes with KEEL_FAILED, and every later submit returns
 * KEEL_FAILED at once (without a callback). Nothing is acknowledged after a
 * failure; the server must stop serving and restart (recovery).
 *
 * Back-pressure: at most max_queued_batches batches and max_queued_bytes
 * bytes of copies may wait or be in flight; past either, submit returns
 * KEEL_BUSY (no callback) and the caller retries after a completion.
 *
 * When a submit returns an error, `done` never runs for that batch.
 *
 * Lifetime:  wal_open -> wal_writer_start -> submit... -> wal_writer_stop
 *            (completes everything queued, joins) -> wal_close.
 *
 * Manual mode (config.manual, for the deterministic simulator): no storage
 * thread. The caller's thread runs each group itself with wal_writer_run
 * (the `done` callbacks run inside it) and the idle work with
 * wal_writer_idle_step; wal_writer_drop_queued forgets what is queued
 * without a callback (the process died). Everything else is the same code:
 * submit's checks, the group's order, sticky failure.
 * While the writer runs, only the storage thread touches the struct wal;
 * snapshots (snapshot.h) may be written by any other thread meanwhile.
 */
#ifndef KEEL_WAL_WRITER_H
#define KEEL_WAL_WRITER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "wal/wal.h"

/* Runs on the storage thread before the batch's truncate/entries; on
 * an error it writes the reason into errmsg. */
typedef enum keel_err (*wal_prelude_fn)(void *user_data, struct wal *wal,
					char errmsg[WAL_ERRMSG_SIZE]);

struct wal_batch {
	const struct wal_hard_state *hard_state; /* NULL: none */
	wal_prelude_fn prelude; /* NULL: none; called with user_data */
	uint64_t install_index; /* 0: none; the prelude installs a snapshot here */
	uint64_t truncate_from; /* 0: none */
	const struct wal_entry *entries;
	size_t entry_count;
	uint64_t compact_upto;  /* 0: none */
	bool prune_snapshots;
	void *user_data;        /* handed back in the completion */
};

struct wal_completion {
	uint64_t seq;          /* from submit, increasing by one per batch */
	void *user_data;
	enum keel_err result;
	uint64_t durable_index;
	uint64_t durable_term;
	uint64_t group;        /* the write+sync round, from 1, increasing */
	uint64_t sync_ns;      /* that round's fdatasync (0: no clock or no sync) */
	const char *errmsg;    /* "" on success; valid during the callback */
};

/* A monotonic clock in nanoseconds, for sync_ns. */
typedef uint64_t (*wal_clock_fn)(void *arg);

typedef void (*wal_writer_done_fn)(void *arg, const struct wal_completion *completion);

struct wal_writer_config {
	wal_writer_done_fn done; /* required */
	void *done_arg;
	uint32_t max_queued_batches; /* 0 means 1024 */
	uint64_t max_queued_bytes;   /* 0 means 64 MiB */
	/* Zero-fill spare segments while idle, this many bytes per step
	 * between checks of the queue (0 means 1 MiB); false disables. */
	bool prepare_spares;
	uint64_t prepare_step_bytes;
	wal_clock_fn clock; /* NULL: sync_ns stays 0 */
	void *clock_arg;
	bool manual; /* no thread: the caller runs groups (wal_writer_run) */
};

struct wal_writer_stats {
	uint64_t batches;   /* completed */
	uint64_t groups;    /* write+fdatasync rounds */
	uint64_t entries;
	uint64_t max_group; /* most batches in one round */
};

struct wal_pending;

struct wal_writer {
	struct wal *wal;
	struct wal_writer_config config;
	pthread_t thread;
	pthread_mutex_t mutex;
	pthread_cond_t wake;
	struct wal_pending *head; /* queued, not yet taken by the thread */
	struct wal_pending *tail;
	uint32_t queued_batches;  /* queued + in flight */
	uint64_t queued_bytes;
	uint64_t next_seq;
	uint64_t next_index;      /* what the next entry submitted must be */
	uint64_t rounds;          /* write+sync rounds begun (storage thread) */
	bool stopping;
	bool failed;
	bool running;
	struct wal_writer_stats stats;
	char errmsg[WAL_ERRMSG_SIZE]; /* the failure, once failed */
};

/* Starts the storage thread over an open WAL (which it then owns until
 * stop). KEEL_INVAL without a done callback; KEEL_IO if the thread cannot
 * start. */
enum keel_err wal_writer_start(struct wal_writer *w, struct wal *wal,
			       const struct wal_writer_config *config);

/* Queues a batch (copied). KEEL_OK with *seq set; KEEL_FAILED after a
 * failure; KEEL_BUSY over a limit; KEEL_SHUTDOWN after stop began;
 * KEEL_INVAL/KEEL_TOOBIG for a batch that can never be written (wrong
 * first index, an entry over max_entry_size_bytes, a batch larger than
 * max_queued_bytes) — not sticky. Call from one thread at a time (the
 * event loop; the `done` callback may submit too). */
enum keel_err wal_writer_submit(struct wal_writer *w, const struct wal_batch *batch,
				uint64_t *seq);

/* Completes everything queued (callbacks run), stops and joins the thread.
 * The WAL is the caller's again afterwards. */
void wal_writer_stop(struct wal_writer *w);

bool wal_writer_failed(struct wal_writer *w);

/* Manual mode only. Writes and syncs everything queued as one group and
 * completes each batch (callbacks run inside); returns how many batches it
 * completed (0: nothing was queued). */
size_t wal_writer_run(struct wal_writer *w);
/* Manual mode only, with nothing queued: one step of the idle work (a
 * spare segment zero-filled, config.prepare_step_bytes at a time); *done
 * is true when there is no more. */
enum keel_err wal_writer_idle_step(struct wal_writer *w, bool *done);
/* Manual mode only: frees every queued batch without a callback (a crash:
 * nothing of it was written); returns how many. */
size_t wal_writer_drop_queued(struct wal_writer *w);
void wal_writer_get_stats(struct wal_writer *w, struct wal_writer_stats *stats);

#endif
