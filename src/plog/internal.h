/*
 * internal.h — what the plog/ files share: a segment's in-memory state and
 * the helpers over it. Not for use outside src/plog/.
 *
 * A segment is one `.log` file plus its sparse indexes, held in memory:
 *   index[i]  = (relative base offset, position) of a batch start, one per
 *               index_interval_bytes of data (positions and offsets rise);
 *   times[i]  = (t, relative offset r): every record in the batches before
 *               offset base+r has a timestamp <= t; t rises strictly.
 * The active (last) segment grows; older ones are frozen, their indexes
 * written to disk when they were rolled.
 */
#ifndef KEEL_PLOG_INTERNAL_H
#define KEEL_PLOG_INTERNAL_H

#include "plog/plog.h"

/* Positions in index entries are 32-bit: no segment grows past this. */
#define PLOG_MAX_SEGMENT_BYTES ((uint64_t)INT32_MAX)
/* Most segments one log may have. */
#define PLOG_MAX_SEGMENTS 1000000u

struct plog_segment {
	int64_t base_offset;
	int64_t end_offset;      /* the offset after its last batch */
	uint64_t size_bytes;
	int64_t max_timestamp;   /* -1 while no batch had one */
	int64_t first_timestamp; /* max timestamp of its first batch (segment.ms) */
	struct wal_vfs_file *file;
	struct plog_index_entry *index;
	uint32_t index_count;
	uint32_t index_capacity;
	struct plog_time_entry *times;
	uint32_t time_count;
	uint32_t time_capacity;
	uint64_t bytes_since_index;
};

/* ---- segment.c ---- */

/* Allocates a segment with no file and no batches. */
struct plog_segment *plog_segment_new(int64_t base_offset);
void plog_segment_free(struct plog_segment *seg);
/* Forgets every batch (indexes and counters) but keeps base and file. */
void plog_segment_clear(struct plog_segment *seg);

/* Accounts a batch written at `position` (the segment's current size):
 * index entries, timestamps, size, end offset. KEEL_NOMEM. */
enum keel_err plog_segment_note(struct plog_segment *seg, const struct plog_batch *batch,
				uint32_t index_interval_bytes);

/* Calls fn for every epoch change seen while scanning (recovery). */
typedef enum keel_err (*plog_epoch_fn)(void *arg, int32_t epoch, int64_t base_offset);

/* Scans seg's file from position 0, validating every batch and rebuilding
 * the in-memory state. Stops at the first invalid batch: *stop is its check
 * (PLOG_BATCH_OK when the file ended cleanly) and *stop_position its
 * position. I/O errors are returned. */
enum keel_err plog_segment_scan(struct plog *log, struct plog_segment *seg, plog_epoch_fn fn,
				void *arg, enum plog_batch_check *stop, uint64_t *stop_position);

/* Creates or replaces the file at path with data, datasynced. */
enum keel_err plog_write_file(struct plog *log, const char *path, const uint8_t *data,
			      size_t size);
/* Reads a whole file of at most max_size bytes (KEEL_TOOBIG beyond) into a
 * fresh buffer the caller frees. */
enum keel_err plog_read_file(struct plog *log, const char *path, uint64_t max_size,
			     uint8_t **data, size_t *size);

/* Writes the segment's .index and .timeindex files (datasynced). */
enum keel_err plog_segment_write_indexes(struct plog *log, const struct plog_segment *seg);

/* Loads the index files of a frozen segment whose .log has `log_size`
 * bytes: true when both are present, intact and describe this log. */
bool plog_segment_load_indexes(struct plog *log, struct plog_segment *seg, uint64_t log_size);

/* Reads the header of the batch at `position` (must lie inside the segment):
 * KEEL_CORRUPT when it does not parse. */
enum keel_err plog_segment_read_header(struct plog *log, const struct plog_segment *seg,
				       uint64_t position, struct plog_batch *batch);

/* Position of the batch that holds `offset` (size_bytes when offset >=
 * end_offset), through the index and a short forward scan. */
enum keel_err plog_segment_position_of(struct plog *log, const struct plog_segment *seg,
				       int64_t offset, uint64_t *position);

/* The largest batch boundary <= limit that is > start (0 when the first
 * batch at `start` ends past limit). */
enum keel_err plog_segment_boundary_before(struct plog *log, const struct plog_segment *seg,
					   uint64_t start, uint64_t limit, uint64_t *boundary);

/* ---- log.c (recover.c: plog_open) ---- */

/* Joins dir and a file name of this log ("<dir>/<name>"). */
enum keel_err plog_path(const struct plog *log, char *out, size_t out_size, const char *name);
enum keel_err plog_segment_file_path(const struct plog *log, int64_t base_offset,
				     enum plog_file_kind kind, char *out, size_t out_size);

/* Sets log->why to "<what> <number>" (number < 0: left out). */
void plog_set_why(struct plog *log, const char *what, int64_t number);

/* Enters the failed state; returns err for the caller to pass on. */
enum keel_err plog_fail(struct plog *log, enum keel_err err, const char *what);

/* Replaces the file `name` of this log whole: "<name>.tmp" written and
 * datasynced, renamed over it, the directory synced. */
enum keel_err plog_replace_file(struct plog *log, const char *name, const uint8_t *data,
				size_t size);

/* Persists the epoch cache as leader-epoch-checkpoint (temp, datasync,
 * rename, sync_dir). */
enum keel_err plog_write_epochs(struct plog *log);

/* Unlinks a segment's files (only .index and .timeindex when indexes_only);
 * missing ones are fine. */
enum keel_err plog_unlink_segment_files(struct plog *log, int64_t base_offset, bool indexes_only);

/* Closes and unlinks a segment's three files (missing ones are fine). */
enum keel_err plog_delete_segment_files(struct plog *log, struct plog_segment *seg);

/* Appends a segment to the log's array (KEEL_NOMEM, KEEL_LIMIT). */
enum keel_err plog_push_segment(struct plog *log, struct plog_segment *seg);

/* Opens the segment's .log file with `flags` (wal_vfs_open_flag). */
enum keel_err plog_open_segment_file(struct plog *log, struct plog_segment *seg, unsigned flags);

/* Creates the empty file of a new active segment and appends it. */
enum keel_err plog_add_segment(struct plog *log, int64_t base_offset);

static inline struct plog_segment *plog_active(const struct plog *log)
{
	return log->segments[log->segment_count - 1];
}

/* The last segment whose base offset is <= offset. */
uint32_t plog_find_segment(const struct plog *log, int64_t offset);

#endif
