/*
 * plog.h — one partition's log: segments of record batches, their indexes,
 * the leader-epoch checkpoint, recovery, truncation and retention.
 *
 * Pure apart from file I/O, which goes only through the injected
 * `struct wal_vfs` (POSIX in production, the fault vfs in tests and the
 * simulator). Time comes in as arguments; nothing here reads a clock.
 * Blocking: every call does its I/O before it returns; one thread at a time.
 *
 * Layout and formats: format.h and docs/plog-format.md.
 *
 * Offsets. log_start_offset <= durable_offset <= log_end_offset. The log
 * holds the offsets [log start, log end); the next append gets log end.
 * Segments are contiguous: each one's base offset is the previous one's end.
 *
 * Durability. plog_append writes but does not sync; plog_sync makes
 * everything appended so far durable and reports the durable offset, so the
 * broker acknowledges only what plog_sync covered and many appends share one
 * fdatasync (group commit). Rolling a segment syncs the old one first, so
 * every segment but the last is always wholly durable; recovery relies on it.
 * The epoch file and partition.metadata are replaced atomically and durably
 * before the call that changes them returns.
 *
 * Recovery (plog_open). The last segment is rescanned batch by batch (CRC,
 * header, record count, offsets following on): the first invalid batch and
 * everything after it is cut off (a torn tail, like the WAL's). Older
 * segments were synced before their successor existed, so damage there is
 * corruption: with verify_all_segments every one is CRC-scanned and a bad
 * batch fails the open with KEEL_CORRUPT; otherwise an older segment is
 * trusted when its index files match it (checksum, log size, end offset) and
 * scanned, with the same rule, when they do not. Offsets must follow on from
 * segment to segment, or the open fails with KEEL_CORRUPT. The epoch cache
 * is cut to the recovered log end and completed from the rescanned batches.
 *
 * Errors. KEEL_RANGE for offsets outside [log start, log end]; KEEL_CORRUPT,
 * KEEL_UNSUPPORTED (magic < 2) and KEEL_TOOBIG for bad batches, leaving the
 * log unchanged; I/O errors during a write, sync or delete put the log in a
 * sticky failed state (every later change returns KEEL_FAILED; reopen to
 * recover), as a failed fdatasync promises nothing. plog_why() says more.
 *
 * Memory: the caller owns `struct plog`; plog_open/plog_close pair up.
 */
#ifndef KEEL_PLOG_PLOG_H
#define KEEL_PLOG_PLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "plog/batch.h"
#include "plog/epoch.h"
#include "plog/format.h"
#include "wal/vfs.h"

struct plog_config {
	struct wal_vfs *vfs;            /* not owned; outlives the log */
	const char *dir;                /* the partition directory; copied */
	uint64_t segment_bytes;         /* roll before a segment would exceed it */
	int64_t segment_ms;             /* roll when a batch's max timestamp is this
					   far past the segment's first; <= 0: never */
	uint32_t index_interval_bytes;  /* bytes between offset/time index entries */
	int64_t retention_ms;           /* < 0: keep forever */
	int64_t retention_bytes;        /* < 0: no size limit */
	uint32_t max_batch_bytes;       /* largest batch (whole, with its header) */
	bool verify_all_segments;       /* open: CRC-scan older segments too */
};

/* Kafka's defaults: 1 GiB segments, 7 days of retention, 4 KiB between
 * index entries, batches up to 1 MiB + 12. */
void plog_config_init(struct plog_config *config, struct wal_vfs *vfs, const char *dir);

/* What plog_open found and did, for logs and tests. */
struct plog_recovery {
	uint32_t segment_count;
	uint32_t scanned_segments;     /* segments read batch by batch */
	uint32_t rebuilt_indexes;      /* older segments whose index files were redone */
	uint64_t truncated_bytes;      /* cut from the tail */
	enum plog_batch_check tail_check; /* why the tail scan stopped early (OK: it did not) */
	int64_t log_end_offset;
};

struct plog_segment;

enum plog_state {
	PLOG_CLOSED,
	PLOG_OPEN,   /* serving */
	PLOG_FAILED, /* a write, sync or delete failed: reads only, reopen to recover */
};

struct plog {
	enum plog_state state;
	struct plog_config config;
	char dir[WAL_VFS_PATH_MAX];
	struct plog_segment **segments; /* ascending base offsets; last = active */
	uint32_t segment_count;
	uint32_t segment_capacity;
	struct plog_epochs epochs;
	int64_t log_end_offset;
	int64_t durable_offset;
	bool has_topic_id;
	uint8_t topic_id[PLOG_TOPIC_ID_SIZE];
	uint8_t *scan_buf; /* read buffer for scans: max_batch_bytes + 64 KiB */
	size_t scan_buf_size;
	char why[192];     /* detail of the last error */
};

/* Opens (creating the directory and a first empty segment at offset 0 when
 * missing) and recovers. `recovery` may be NULL. On error nothing stays open
 * and plog_why(log) says why. */
enum keel_err plog_open(struct plog *log, const struct plog_config *config,
			struct plog_recovery *recovery);
void plog_close(struct plog *log);

const char *plog_why(const struct plog *log);

int64_t plog_log_start_offset(const struct plog *log);
static inline int64_t plog_log_end_offset(const struct plog *log)
{
	return log->log_end_offset;
}
static inline int64_t plog_durable_offset(const struct plog *log)
{
	return log->durable_offset;
}
/* Bytes of all segments. */
uint64_t plog_size_bytes(const struct plog *log);

/* One segment, for tools and tests: i < log->segment_count, 0 = oldest. */
struct plog_segment_info {
	int64_t base_offset;
	int64_t end_offset;
	uint64_t size_bytes;
	int64_t max_timestamp; /* -1: no batch had one */
	uint32_t index_entries;
	uint32_t time_entries;
};
void plog_segment_info(const struct plog *log, uint32_t i, struct plog_segment_info *info);

/* ---- appends ---- */

struct plog_append_info {
	int64_t first_offset; /* base offset of the first batch */
	int64_t last_offset;  /* last offset of the last batch */
	int64_t max_timestamp;
	uint32_t batch_count;
	int64_t record_count;
};

/* Leader append: validates every batch of `data` (concatenated batches; all
 * or nothing), gives them offsets from the log end, stamps leader_epoch into
 * each (rewriting `data` in place) and writes them. Records the epoch in the
 * epoch file when it is new. Not durable until plog_sync. */
enum keel_err plog_append(struct plog *log, uint8_t *data, size_t size, int32_t leader_epoch,
			  struct plog_append_info *info);

/* Follower append: the batches keep their offsets and epochs; the first must
 * start exactly at the log end and each following batch where the previous
 * ended (KEEL_INVAL otherwise). Epochs newer than the latest are recorded. */
enum keel_err plog_append_follower(struct plog *log, const uint8_t *data, size_t size,
				   struct plog_append_info *info);

/* A new leader's epoch starts at the log end (Kafka's makeLeader): records
 * it in the epoch file, durably, so that OffsetForLeaderEpoch answers a
 * follower whose last epoch is newer than this log's batches. No change
 * when epoch is not newer than the latest known. */
enum keel_err plog_assign_epoch(struct plog *log, int32_t epoch);

/* Makes everything appended durable; *durable_offset (may be NULL) becomes
 * the log end offset. */
enum keel_err plog_sync(struct plog *log, int64_t *durable_offset);

/* ---- reads ---- */

/* A byte range of one segment file: whole batches, to send as they are. */
struct plog_read_result {
	struct wal_vfs_file *file;   /* the segment's handle (NULL when empty) */
	int64_t segment_base_offset; /* names the file: plog_segment_path */
	uint64_t position;
	uint64_t size;               /* 0: nothing to return (at the end or the bound) */
	int64_t first_offset;        /* base offset of the first batch returned */
	int64_t next_offset;         /* the offset after the last batch returned */
};

/* Finds the batches from the one holding fetch_offset, stopping before the
 * first batch that reaches max_offset (exclusive bound, e.g. the high
 * watermark; pass the log end for none) and after max_bytes — but always
 * one whole batch when any is visible, even if it is larger (as Kafka does).
 * One segment per call: the caller continues at next_offset.
 * KEEL_RANGE when fetch_offset < log start or > log end.
 * The file handle stays valid until the next plog_truncate, plog_reset,
 * plog_retain or plog_close; the shell may instead open the path for
 * sendfile (on POSIX an unlinked file stays readable through an open fd). */
enum keel_err plog_read(struct plog *log, int64_t fetch_offset, int64_t max_offset,
			uint64_t max_bytes, struct plog_read_result *result);

/* Copies a read result's bytes into buf (result->size bytes). */
enum keel_err plog_read_copy(struct plog *log, const struct plog_read_result *result,
			     uint8_t *buf);

/* "<dir>/<base:20>.log" into out; KEEL_TOOBIG when it does not fit. */
enum keel_err plog_segment_path(const struct plog *log, int64_t base_offset, char *out,
				size_t out_size);

/* ListOffsets by timestamp: the first record whose timestamp is >= target
 * (for compressed batches: the batch's base offset, as the batch is not
 * decompressed). KEEL_NOENT when no record is that late. */
enum keel_err plog_offset_for_timestamp(struct plog *log, int64_t target, int64_t *offset,
					int64_t *timestamp);

/* OffsetForLeaderEpoch (epoch.h's rules) against this log. */
void plog_end_offset_for_epoch(const struct plog *log, int32_t epoch, int32_t *found_epoch,
			       int64_t *end_offset);

/* ---- changes ---- */

/* Cuts the log so that it ends at `offset` — or, when offset falls inside a
 * batch, at that batch's start (the log end offset says where it ended).
 * Later segments are deleted, the epoch file follows. Durable on return.
 * KEEL_RANGE when offset < log start or > log end. */
enum keel_err plog_truncate(struct plog *log, int64_t offset);

/* Deletes everything and starts an empty log at `start_offset` (a follower
 * whose log is behind the leader's log start). Durable on return. */
enum keel_err plog_reset(struct plog *log, int64_t start_offset);

/* Retention: deletes whole oldest segments whose max timestamp is more than
 * retention_ms before now_ms, or while the log is over retention_bytes
 * without them. Never the active segment. *deleted (may be NULL) counts. */
enum keel_err plog_retain(struct plog *log, int64_t now_ms, uint32_t *deleted);

/* partition.metadata: records the topic id (durably). */
enum keel_err plog_set_topic_id(struct plog *log, const uint8_t topic_id[PLOG_TOPIC_ID_SIZE]);

/* ---- checks ---- */

/* Rescans every segment (CRC and all) and compares what it finds with the
 * in-memory indexes and offsets: KEEL_CORRUPT with plog_why() on the first
 * difference. O(log size); for tests, tools and the simulator. */
enum keel_err plog_check(struct plog *log);

#endif
