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
 *                  entry of the same group is written; when several batches
 *                  of a group carry one, the newest is saved once
 *   reset_index    discard the log after an installed snapshot (wal_reset)
 *   truncate_from  drop entries from this index on (wal_truncate_suffix)
 *   entries        appended
 *   compact_upto   segments wholly at or below this index removed
 *                  (wal_compact; a durable snapshot must cover it)
 *
 * Ownership: submit COPIES the entries, their data and the hard state's
 * extra blob into one allocation owned by the writer; the caller may reuse
 * or free its memory as soon as submit returns. The completion passed to
 * `done` lives only during the call.
 *
 * Completion: result KEEL_OK means every entry of the batch, and of every
 * earlier batch, is durable; durable_index/durable_term are the last
 * durable entry (or snapshot) of the log at that moment.
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

struct wal_batch {
	const struct wal_hard_state *hard_state; /* NULL: none */
	uint64_t reset_index;   /* 0: none; else with reset_term */
	uint64_t reset_term;
	uint64_t truncate_from; /* 0: none */
	const struct wal_entry *entries;
	size_t entry_count;
	uint64_t compact_upto;  /* 0: none */
	void *user_data;        /* handed back in the completion */
};

struct wal_completion {
	uint64_t seq;          /* from submit, increasing by one per batch */
	void *user_data;
	enum keel_err result;
	uint64_t durable_index;
	uint64_t durable_term;
	const char *errmsg;    /* "" on success; valid during the callback */
};

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
void wal_writer_get_stats(struct wal_writer *w, struct wal_writer_stats *stats);

#endif
