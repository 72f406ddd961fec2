/*
 * log.c — a partition log's life: open and recovery, appends, sync, rolls,
 * the epoch and metadata files, close (plog.h).
 *
 *   plog_open ──> OPEN ──(write/sync/delete fails)──> FAILED
 *                  │                                    │
 *                  └──────────── plog_close ────────────┴──> CLOSED
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "plog/internal.h"

#define DEFAULT_SEGMENT_BYTES (1024ull * 1024 * 1024)
#define DEFAULT_RETENTION_MS (7ll * 24 * 3600 * 1000)
#define DEFAULT_INDEX_INTERVAL_BYTES 4096
#define DEFAULT_MAX_BATCH_BYTES (1024u * 1024 + 12)
/* Positions in index entries are 32-bit. */
#define MAX_SEGMENT_BYTES ((uint64_t)INT32_MAX)
#define SCAN_SLACK_BYTES (64u * 1024)
#define MAX_SEGMENTS 1000000u

void plog_config_init(struct plog_config *config, struct wal_vfs *vfs, const char *dir)
{
	memset(config, 0, sizeof(*config));
	config->vfs = vfs;
	config->dir = dir;
	config->segment_bytes = DEFAULT_SEGMENT_BYTES;
	config->segment_ms = 7ll * 24 * 3600 * 1000;
	config->index_interval_bytes = DEFAULT_INDEX_INTERVAL_BYTES;
	config->retention_ms = DEFAULT_RETENTION_MS;
	config->retention_bytes = -1;
	config->max_batch_bytes = DEFAULT_MAX_BATCH_BYTES;
}

const char *plog_why(const struct plog *log)
{
	return log->why;
}

void plog_set_why(struct plog *log, const char *what, int64_t number)
{
	size_t cap = sizeof(log->why) - 1;
	size_t n = strlen(what);
	n = n < cap ? n : cap;
	memcpy(log->why, what, n);
	if (number >= 0 && n + 22 <= cap) {
		char digits[20];
		size_t d = 0;
		uint64_t v = (uint64_t)number;
		do {
			digits[d++] = (char)('0' + v % 10);
			v /= 10;
		} while (v > 0);
		log->why[n++] = ' ';
		while (d > 0) {
			log->why[n++] = digits[--d];
		}
	}
	log->why[n] = '\0';
}

enum keel_err plog_fail(struct plog *log, enum keel_err err, const char *what)
{
	KEEL_ASSERT(err != KEEL_OK);
	if (log->state == PLOG_OPEN) {
		log->state = PLOG_FAILED;
	}
	plog_set_why(log, what, -1);
	return err;
}

enum keel_err plog_path(const struct plog *log, char *out, size_t out_size, const char *name)
{
	return wal_vfs_join(out, out_size, log->dir, name);
}

enum keel_err plog_segment_file_path(const struct plog *log, int64_t base_offset,
				     enum plog_file_kind kind, char *out, size_t out_size)
{
	char name[PLOG_NAME_MAX];
	plog_file_name(name, base_offset, kind);
	return plog_path(log, out, out_size, name);
}

enum keel_err plog_segment_path(const struct plog *log, int64_t base_offset, char *out,
				size_t out_size)
{
	return plog_segment_file_path(log, base_offset, PLOG_FILE_LOG, out, out_size);
}

int64_t plog_log_start_offset(const struct plog *log)
{
	return log->segments[0]->base_offset;
}

uint64_t plog_size_bytes(const struct plog *log)
{
	uint64_t total = 0;
	for (uint32_t i = 0; i < log->segment_count; i++) {
		total += log->segments[i]->size_bytes;
	}
	return total;
}

void plog_segment_info(const struct plog *log, uint32_t i, struct plog_segment_info *info)
{
	KEEL_ASSERT(i < log->segment_count);
	const struct plog_segment *seg = log->segments[i];
	info->base_offset = seg->base_offset;
	info->end_offset = seg->end_offset;
	info->size_bytes = seg->size_bytes;
	info->max_timestamp = seg->max_timestamp;
	info->index_entries = seg->index_count;
	info->time_entries = seg->time_count;
}

uint32_t plog_find_segment(const struct plog *log, int64_t offset)
{
	KEEL_ASSERT(log->segment_count > 0);
	uint32_t lo = 0;
	uint32_t hi = log->segment_count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (log->segments[mid]->base_offset <= offset) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo == 0 ? 0 : lo - 1;
}

/* ---- whole-file replacement (epoch checkpoint, metadata) ---- */

static enum keel_err replace_file(struct plog *log, const char *name, const uint8_t *data,
				  size_t size)
{
	char tmp_name[64];
	size_t n = strlen(name);
	KEEL_ASSERT(n + sizeof(PLOG_TEMP_SUFFIX) <= sizeof(tmp_name));
	memcpy(tmp_name, name, n);
	memcpy(tmp_name + n, PLOG_TEMP_SUFFIX, sizeof(PLOG_TEMP_SUFFIX));
	char tmp[WAL_VFS_PATH_MAX];
	char path[WAL_VFS_PATH_MAX];
	enum keel_err err = plog_path(log, tmp, sizeof(tmp), tmp_name);
	if (err == KEEL_OK) {
		err = plog_path(log, path, sizeof(path), name);
	}
	if (err != KEEL_OK) {
		return err;
	}
	err = plog_write_file(log, tmp, data, size);
	if (err == KEEL_OK) {
		err = wal_vfs_rename(log->config.vfs, tmp, path);
	}
	if (err == KEEL_OK) {
		err = wal_vfs_sync_dir(log->config.vfs, log->dir);
	}
	return err;
}

enum keel_err plog_write_epochs(struct plog *log)
{
	size_t size = plog_epoch_file_size(log->epochs.count);
	uint8_t *buf = malloc(size);
	if (buf == NULL) {
		return KEEL_NOMEM;
	}
	plog_epoch_file_encode(buf, log->epochs.entries, log->epochs.count);
	enum keel_err err = replace_file(log, PLOG_EPOCH_FILE, buf, size);
	free(buf);
	return err;
}

enum keel_err plog_set_topic_id(struct plog *log, const uint8_t topic_id[PLOG_TOPIC_ID_SIZE])
{
	if (log->state != PLOG_OPEN) {
		return KEEL_FAILED;
	}
	uint8_t buf[PLOG_METADATA_FILE_SIZE];
	plog_metadata_encode(buf, topic_id);
	enum keel_err err = replace_file(log, PLOG_METADATA_FILE, buf, sizeof(buf));
	if (err != KEEL_OK) {
		return plog_fail(log, err, "cannot write partition.metadata");
	}
	memcpy(log->topic_id, topic_id, PLOG_TOPIC_ID_SIZE);
	log->has_topic_id = true;
	return KEEL_OK;
}

/* ---- segments ---- */

static enum keel_err push_segment(struct plog *log, struct plog_segment *seg)
{
	if (log->segment_count == log->segment_capacity) {
		if (log->segment_count >= MAX_SEGMENTS) {
			return KEEL_LIMIT;
		}
		uint32_t cap = log->segment_capacity == 0 ? 16 : log->segment_capacity * 2;
		struct plog_segment **n = realloc(log->segments, (size_t)cap * sizeof(*n));
		if (n == NULL) {
			return KEEL_NOMEM;
		}
		log->segments = n;
		log->segment_capacity = cap;
	}
	log->segments[log->segment_count++] = seg;
	return KEEL_OK;
}

static enum keel_err open_segment_file(struct plog *log, struct plog_segment *seg, unsigned flags)
{
	char path[WAL_VFS_PATH_MAX];
	enum keel_err err =
		plog_segment_file_path(log, seg->base_offset, PLOG_FILE_LOG, path, sizeof(path));
	if (err == KEEL_OK) {
		err = wal_vfs_open(log->config.vfs, path, flags, &seg->file);
	}
	return err;
}

enum keel_err plog_add_segment(struct plog *log, int64_t base_offset)
{
	struct plog_segment *seg = plog_segment_new(base_offset);
	if (seg == NULL) {
		return KEEL_NOMEM;
	}
	enum keel_err err = open_segment_file(log, seg, WAL_VFS_CREATE | WAL_VFS_EXCLUSIVE);
	if (err == KEEL_OK) {
		err = wal_vfs_sync_dir(log->config.vfs, log->dir);
	}
	if (err == KEEL_OK) {
		err = push_segment(log, seg);
	}
	if (err != KEEL_OK) {
		plog_segment_free(seg);
	}
	return err;
}

enum keel_err plog_unlink_segment_files(struct plog *log, int64_t base_offset, bool indexes_only)
{
	/* The log file first: index files without it are ignored. */
	const enum plog_file_kind kinds[] = {PLOG_FILE_LOG, PLOG_FILE_INDEX, PLOG_FILE_TIMEINDEX};
	for (size_t i = indexes_only ? 1 : 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		char path[WAL_VFS_PATH_MAX];
		enum keel_err err =
			plog_segment_file_path(log, base_offset, kinds[i], path, sizeof(path));
		if (err == KEEL_OK) {
			err = wal_vfs_unlink(log->config.vfs, path);
		}
		if (err != KEEL_OK && err != KEEL_NOENT) {
			return err;
		}
	}
	return KEEL_OK;
}

enum keel_err plog_delete_segment_files(struct plog *log, struct plog_segment *seg)
{
	if (seg->file != NULL) {
		wal_vfs_close(seg->file);
		seg->file = NULL;
	}
	return plog_unlink_segment_files(log, seg->base_offset, false);
}

/* Rolls: the old active segment is synced and its indexes written before
 * the new one exists, so only the last segment can ever hold a torn tail. */
static enum keel_err roll(struct plog *log)
{
	struct plog_segment *old = plog_active(log);
	enum keel_err err = wal_vfs_datasync(old->file);
	if (err != KEEL_OK) {
		return plog_fail(log, err, "cannot sync the segment being rolled");
	}
	if (log->durable_offset < old->end_offset) {
		log->durable_offset = old->end_offset;
	}
	err = plog_segment_write_indexes(log, old);
	if (err == KEEL_OK) {
		err = plog_add_segment(log, old->end_offset);
	}
	if (err != KEEL_OK) {
		return plog_fail(log, err, "cannot roll to a new segment");
	}
	return KEEL_OK;
}

static bool needs_roll(const struct plog *log, const struct plog_segment *seg,
		       const struct plog_batch *batch)
{
	if (seg->size_bytes == 0) {
		return false;
	}
	if (seg->size_bytes + batch->size > log->config.segment_bytes) {
		return true;
	}
	if (plog_batch_last_offset(batch) - seg->base_offset > INT32_MAX) {
		return true;
	}
	return log->config.segment_ms > 0 && seg->first_timestamp >= 0 &&
	       batch->max_timestamp - seg->first_timestamp >= log->config.segment_ms;
}

/* Writes one validated batch (already carrying its offset) at the end. */
static enum keel_err write_batch(struct plog *log, const struct plog_batch *batch)
{
	KEEL_ASSERT(batch->base_offset == log->log_end_offset);
	if (needs_roll(log, plog_active(log), batch)) {
		enum keel_err err = roll(log);
		if (err != KEEL_OK) {
			return err;
		}
	}
	struct plog_segment *seg = plog_active(log);
	enum keel_err err = wal_vfs_pwrite(seg->file, batch->data, batch->size, seg->size_bytes);
	if (err == KEEL_OK) {
		err = plog_segment_note(seg, batch, log->config.index_interval_bytes);
	}
	if (err != KEEL_OK) {
		return plog_fail(log, err, "cannot write a batch");
	}
	log->log_end_offset = seg->end_offset;
	return KEEL_OK;
}

static enum keel_err record_epoch(struct plog *log, int32_t epoch, int64_t start_offset)
{
	bool changed = false;
	enum keel_err err = plog_epochs_assign(&log->epochs, epoch, start_offset, &changed);
	if (err != KEEL_OK) {
		plog_set_why(log, "leader epoch goes backwards:", epoch);
		return err;
	}
	if (changed) {
		err = plog_write_epochs(log);
		if (err != KEEL_OK) {
			return plog_fail(log, err, "cannot write leader-epoch-checkpoint");
		}
	}
	return KEEL_OK;
}

/* Validates a payload of concatenated batches; counts them. */
static enum keel_err validate_payload(struct plog *log, const uint8_t *data, size_t size,
				      uint32_t *count)
{
	uint32_t max_length = log->config.max_batch_bytes - PLOG_BATCH_LOG_OVERHEAD;
	size_t pos = 0;
	*count = 0;
	if (size == 0) {
		plog_set_why(log, "no batches", -1);
		return KEEL_CORRUPT;
	}
	while (pos < size) {
		struct plog_batch batch;
		enum plog_batch_check check = plog_batch_next(data, size, &pos, max_length, &batch);
		if (check != PLOG_BATCH_OK) {
			plog_set_why(log, plog_batch_check_name(check), -1);
			return plog_batch_check_err(check);
		}
		(*count)++;
	}
	return KEEL_OK;
}

static void info_add(struct plog_append_info *info, const struct plog_batch *batch)
{
	if (info->batch_count == 0) {
		info->first_offset = batch->base_offset;
		info->max_timestamp = batch->max_timestamp;
	}
	info->batch_count++;
	info->last_offset = plog_batch_last_offset(batch);
	info->record_count += batch->record_count;
	if (batch->max_timestamp > info->max_timestamp) {
		info->max_timestamp = batch->max_timestamp;
	}
}

/* What both appends check first: an open log and a valid payload. */
static enum keel_err begin_append(struct plog *log, const uint8_t *data, size_t size,
				  struct plog_append_info *info, uint32_t *count)
{
	memset(info, 0, sizeof(*info));
	if (log->state != PLOG_OPEN) {
		return KEEL_FAILED;
	}
	return validate_payload(log, data, size, count);
}

enum keel_err plog_append(struct plog *log, uint8_t *data, size_t size, int32_t leader_epoch,
			  struct plog_append_info *info)
{
	KEEL_ASSERT(leader_epoch >= 0);
	uint32_t count;
	enum keel_err err = begin_append(log, data, size, info, &count);
	if (err != KEEL_OK) {
		return err;
	}
	err = record_epoch(log, leader_epoch, log->log_end_offset);
	if (err != KEEL_OK) {
		return err;
	}
	uint32_t max_length = log->config.max_batch_bytes - PLOG_BATCH_LOG_OVERHEAD;
	size_t pos = 0;
	while (pos < size) {
		uint8_t *p = data + pos;
		plog_batch_set_base_offset(p, log->log_end_offset);
		plog_batch_set_leader_epoch(p, leader_epoch);
		struct plog_batch batch;
		enum plog_batch_check check = plog_batch_next(data, size, &pos, max_length, &batch);
		KEEL_ASSERT(check == PLOG_BATCH_OK); /* the rewrite is outside the CRC */
		err = write_batch(log, &batch);
		if (err != KEEL_OK) {
			return err;
		}
		info_add(info, &batch);
	}
	KEEL_ASSERT(info->batch_count == count);
	return KEEL_OK;
}

enum keel_err plog_append_follower(struct plog *log, const uint8_t *data, size_t size,
				   struct plog_append_info *info)
{
	uint32_t count;
	enum keel_err err = begin_append(log, data, size, info, &count);
	if (err != KEEL_OK) {
		return err;
	}
	uint32_t max_length = log->config.max_batch_bytes - PLOG_BATCH_LOG_OVERHEAD;
	/* Offsets must follow on and epochs must not go back, before any write. */
	int64_t next = log->log_end_offset;
	int32_t epoch = plog_epochs_latest(&log->epochs);
	for (size_t pos = 0; pos < size;) {
		struct plog_batch batch;
		(void)plog_batch_next(data, size, &pos, max_length, &batch);
		if (batch.base_offset != next) {
			plog_set_why(log, "follower batch does not start at the log end; it starts at",
				     batch.base_offset);
			return KEEL_INVAL;
		}
		if (batch.leader_epoch < 0 || batch.leader_epoch < epoch) {
			plog_set_why(log, "follower batch has an older leader epoch:",
				     batch.leader_epoch);
			return KEEL_STALE;
		}
		epoch = batch.leader_epoch;
		next = plog_batch_last_offset(&batch) + 1;
	}
	for (size_t pos = 0; pos < size;) {
		struct plog_batch batch;
		(void)plog_batch_next(data, size, &pos, max_length, &batch);
		err = record_epoch(log, batch.leader_epoch, batch.base_offset);
		if (err == KEEL_OK) {
			err = write_batch(log, &batch);
		}
		if (err != KEEL_OK) {
			return err;
		}
		info_add(info, &batch);
	}
	return KEEL_OK;
}

enum keel_err plog_sync(struct plog *log, int64_t *durable_offset)
{
	if (log->state != PLOG_OPEN) {
		return KEEL_FAILED;
	}
	if (log->durable_offset < log->log_end_offset) {
		enum keel_err err = wal_vfs_datasync(plog_active(log)->file);
		if (err != KEEL_OK) {
			return plog_fail(log, err, "fdatasync of the active segment failed");
		}
		log->durable_offset = log->log_end_offset;
	}
	if (durable_offset != NULL) {
		*durable_offset = log->durable_offset;
	}
	return KEEL_OK;
}

/* ---- open and recovery ---- */

struct listing {
	int64_t *bases;
	uint32_t count;
	uint32_t capacity;
	bool has_epoch_file;
	bool has_metadata;
	bool failed;
	char (*temps)[64];
	uint32_t temp_count;
};

static void list_one(void *arg, const char *name)
{
	struct listing *l = arg;
	int64_t base = 0;
	enum plog_file_kind kind = plog_parse_file_name(name, &base);
	if (kind == PLOG_FILE_LOG) {
		if (l->count == l->capacity) {
			uint32_t cap = l->capacity == 0 ? 16 : l->capacity * 2;
			int64_t *n = l->count >= MAX_SEGMENTS ? NULL
							      : realloc(l->bases, cap * sizeof(*n));
			if (n == NULL) {
				l->failed = true;
				return;
			}
			l->bases = n;
			l->capacity = cap;
		}
		l->bases[l->count++] = base;
	} else if (kind == PLOG_FILE_TEMP && strlen(name) < 64 && l->temp_count < 8) {
		memcpy(l->temps[l->temp_count++], name, strlen(name) + 1);
	} else if (strcmp(name, PLOG_EPOCH_FILE) == 0) {
		l->has_epoch_file = true;
	} else if (strcmp(name, PLOG_METADATA_FILE) == 0) {
		l->has_metadata = true;
	}
}

static int compare_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a;
	int64_t y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Reads a small whole file of this directory (epoch checkpoint, metadata). */
static enum keel_err read_small(struct plog *log, const char *name, uint64_t max_size,
				uint8_t **data, size_t *size)
{
	char path[WAL_VFS_PATH_MAX];
	enum keel_err err = plog_path(log, path, sizeof(path), name);
	return err != KEEL_OK ? err : plog_read_file(log, path, max_size, data, size);
}

static enum keel_err load_epochs(struct plog *log)
{
	uint8_t *buf = NULL;
	size_t size = 0;
	uint32_t count = 0;
	struct plog_epoch_entry *entries = NULL;
	enum keel_err err = read_small(log, PLOG_EPOCH_FILE,
				       plog_epoch_file_size(PLOG_EPOCH_MAX_ENTRIES), &buf, &size);
	if (err == KEEL_OK && size >= PLOG_EPOCH_HEADER_SIZE) {
		/* Sized by the header's count, which the decoder checks. */
		uint32_t n = (uint32_t)((size - PLOG_EPOCH_HEADER_SIZE) / PLOG_EPOCH_ENTRY_SIZE);
		entries = malloc((n > 0 ? n : 1) * sizeof(*entries));
		err = entries == NULL ? KEEL_NOMEM : KEEL_OK;
		count = n;
	}
	if (err == KEEL_OK) {
		uint32_t max = count;
		err = plog_epoch_file_decode(buf, size, entries, max, &count);
		if (err != KEEL_OK) {
			plog_set_why(log, "leader-epoch-checkpoint is damaged", -1);
		}
	}
	if (err == KEEL_OK) {
		err = plog_epochs_set(&log->epochs, entries, count);
	}
	free(buf);
	free(entries);
	return err;
}

static enum keel_err load_metadata(struct plog *log)
{
	uint8_t *buf = NULL;
	size_t size = 0;
	enum keel_err err = read_small(log, PLOG_METADATA_FILE, 4096, &buf, &size);
	if (err == KEEL_OK) {
		err = plog_metadata_decode(buf, size, log->topic_id);
		if (err != KEEL_OK) {
			plog_set_why(log, "partition.metadata is damaged", -1);
		}
	}
	free(buf);
	log->has_topic_id = err == KEEL_OK;
	return err;
}

/* Epoch changes seen in the rescanned tail, applied after the cut. */
struct tail_epochs {
	struct plog_epoch_entry *entries;
	uint32_t count;
	uint32_t capacity;
};

static enum keel_err note_tail_epoch(void *arg, int32_t epoch, int64_t base_offset)
{
	struct tail_epochs *t = arg;
	if (t->count == t->capacity) {
		if (t->count >= PLOG_EPOCH_MAX_ENTRIES) {
			return KEEL_LIMIT;
		}
		uint32_t cap = t->capacity == 0 ? 8 : t->capacity * 2;
		struct plog_epoch_entry *n = realloc(t->entries, cap * sizeof(*n));
		if (n == NULL) {
			return KEEL_NOMEM;
		}
		t->entries = n;
		t->capacity = cap;
	}
	t->entries[t->count++] = (struct plog_epoch_entry){epoch, base_offset};
	return KEEL_OK;
}

/* An older (frozen) segment: trusted through its index files, or scanned;
 * any invalid batch in it is corruption. */
static enum keel_err recover_older(struct plog *log, struct plog_segment *seg,
				   struct plog_recovery *rec)
{
	uint64_t size = 0;
	enum keel_err err = wal_vfs_size(seg->file, &size);
	if (err != KEEL_OK) {
		return err;
	}
	bool indexed = plog_segment_load_indexes(log, seg, size);
	if (indexed && !log->config.verify_all_segments) {
		return KEEL_OK;
	}
	enum plog_batch_check stop;
	uint64_t stop_position = 0;
	rec->scanned_segments++;
	err = plog_segment_scan(log, seg, NULL, NULL, &stop, &stop_position);
	if (err != KEEL_OK) {
		return err;
	}
	if (stop != PLOG_BATCH_OK || seg->size_bytes == 0) {
		char what[96] = "older segment damaged (";
		size_t n = strlen(what);
		const char *name = stop == PLOG_BATCH_OK ? "empty" : plog_batch_check_name(stop);
		size_t m = strlen(name);
		memcpy(what + n, name, m);
		memcpy(what + n + m, ") at position", sizeof(") at position"));
		plog_set_why(log, what, (int64_t)stop_position);
		return KEEL_CORRUPT;
	}
	if (!indexed) {
		rec->rebuilt_indexes++;
		return plog_segment_write_indexes(log, seg);
	}
	return KEEL_OK;
}

/* The last segment: rescanned, cut at the first invalid batch, synced. */
static enum keel_err recover_tail(struct plog *log, struct plog_segment *seg,
				  struct tail_epochs *tail, struct plog_recovery *rec)
{
	uint64_t file_size = 0;
	enum keel_err err = wal_vfs_size(seg->file, &file_size);
	if (err != KEEL_OK) {
		return err;
	}
	enum plog_batch_check stop;
	uint64_t stop_position = 0;
	rec->scanned_segments++;
	err = plog_segment_scan(log, seg, note_tail_epoch, tail, &stop, &stop_position);
	if (err != KEEL_OK) {
		return err;
	}
	rec->tail_check = stop;
	if (stop_position < file_size) {
		rec->truncated_bytes = file_size - stop_position;
		err = wal_vfs_truncate(seg->file, stop_position);
		if (err != KEEL_OK) {
			return err;
		}
	}
	/* What a killed process left in the page cache becomes durable here. */
	return wal_vfs_datasync(seg->file);
}

static enum keel_err load_segments(struct plog *log, struct listing *l,
				   struct tail_epochs *tail, struct plog_recovery *rec)
{
	qsort(l->bases, l->count, sizeof(*l->bases), compare_i64);
	for (uint32_t i = 0; i < l->count; i++) {
		struct plog_segment *seg = plog_segment_new(l->bases[i]);
		if (seg == NULL) {
			return KEEL_NOMEM;
		}
		enum keel_err err = push_segment(log, seg);
		if (err != KEEL_OK) {
			plog_segment_free(seg);
			return err;
		}
		err = open_segment_file(log, seg, 0);
		if (err != KEEL_OK) {
			return err;
		}
		bool last = i + 1 == l->count;
		err = last ? recover_tail(log, seg, tail, rec) : recover_older(log, seg, rec);
		if (err != KEEL_OK) {
			return err;
		}
		if (i > 0 && log->segments[i - 1]->end_offset != seg->base_offset) {
			plog_set_why(log, "segments do not follow on at offset", seg->base_offset);
			return KEEL_CORRUPT;
		}
	}
	rec->segment_count = l->count;
	return KEEL_OK;
}

/* Cuts the epoch cache to the recovered log, completes it from the tail. */
static enum keel_err recover_epochs(struct plog *log, const struct tail_epochs *tail)
{
	bool changed = plog_epochs_truncate_end(&log->epochs, log->log_end_offset);
	/* As Kafka does: only epochs newer than the checkpoint's latest are
	 * added; the checkpoint is written before the data, so older ones are
	 * already there (and the epoch field is outside the CRC: a damaged
	 * one must not make the log unopenable). */
	for (uint32_t i = 0; i < tail->count; i++) {
		const struct plog_epoch_entry *t = &tail->entries[i];
		const struct plog_epochs *e = &log->epochs;
		if (t->epoch <= plog_epochs_latest(e) ||
		    (e->count > 0 && t->start_offset < e->entries[e->count - 1].start_offset)) {
			continue;
		}
		bool added = false;
		enum keel_err err = plog_epochs_assign(&log->epochs, t->epoch, t->start_offset, &added);
		if (err != KEEL_OK) {
			return err;
		}
		changed = changed || added;
	}
	changed = plog_epochs_truncate_start(&log->epochs, plog_log_start_offset(log)) || changed;
	return changed ? plog_write_epochs(log) : KEEL_OK;
}

static enum keel_err make_dir(struct plog *log)
{
	enum keel_err err = wal_vfs_mkdir(log->config.vfs, log->dir);
	if (err == KEEL_EXIST) {
		return KEEL_OK;
	}
	if (err != KEEL_OK) {
		return err;
	}
	/* Make the new directory's name durable in its parent. */
	char parent[WAL_VFS_PATH_MAX];
	size_t n = strlen(log->dir);
	while (n > 1 && log->dir[n - 1] == '/') {
		n--;
	}
	while (n > 0 && log->dir[n - 1] != '/') {
		n--;
	}
	if (n == 0) {
		memcpy(parent, ".", 2);
	} else {
		memcpy(parent, log->dir, n);
		parent[n > 1 ? n - 1 : 1] = '\0';
	}
	return wal_vfs_sync_dir(log->config.vfs, parent);
}

static enum keel_err check_config(struct plog *log, const struct plog_config *config)
{
	if (config->vfs == NULL || config->dir == NULL ||
	    strlen(config->dir) + PLOG_NAME_MAX + 2 > WAL_VFS_PATH_MAX) {
		plog_set_why(log, "no vfs or a bad directory name", -1);
		return KEEL_CONFIG;
	}
	if (config->segment_bytes < PLOG_BATCH_HEADER_SIZE ||
	    config->segment_bytes > MAX_SEGMENT_BYTES ||
	    config->max_batch_bytes < PLOG_BATCH_HEADER_SIZE ||
	    config->max_batch_bytes > MAX_SEGMENT_BYTES / 2 || config->index_interval_bytes == 0) {
		plog_set_why(log, "segment_bytes, max_batch_bytes or index_interval_bytes out of range",
			     -1);
		return KEEL_CONFIG;
	}
	return KEEL_OK;
}

static enum keel_err open_steps(struct plog *log, struct listing *l, struct tail_epochs *tail,
				struct plog_recovery *rec)
{
	enum keel_err err = make_dir(log);
	if (err != KEEL_OK) {
		plog_set_why(log, "cannot create the partition directory", -1);
		return err;
	}
	err = wal_vfs_list(log->config.vfs, log->dir, list_one, l);
	if (err == KEEL_OK && l->failed) {
		err = KEEL_NOMEM;
	}
	for (uint32_t i = 0; err == KEEL_OK && i < l->temp_count; i++) {
		char path[WAL_VFS_PATH_MAX];
		err = plog_path(log, path, sizeof(path), l->temps[i]);
		if (err == KEEL_OK) {
			err = wal_vfs_unlink(log->config.vfs, path);
		}
	}
	if (err != KEEL_OK) {
		plog_set_why(log, "cannot list the partition directory", -1);
		return err;
	}
	if (l->has_epoch_file && (err = load_epochs(log)) != KEEL_OK) {
		return err;
	}
	if (l->has_metadata && (err = load_metadata(log)) != KEEL_OK) {
		return err;
	}
	err = l->count == 0 ? plog_add_segment(log, 0) : load_segments(log, l, tail, rec);
	if (err != KEEL_OK) {
		if (log->why[0] == '\0') {
			plog_set_why(log, "cannot open the segments", -1);
		}
		return err;
	}
	log->log_end_offset = plog_active(log)->end_offset;
	log->durable_offset = log->log_end_offset;
	return recover_epochs(log, tail);
}

enum keel_err plog_open(struct plog *log, const struct plog_config *config,
			struct plog_recovery *recovery)
{
	memset(log, 0, sizeof(*log));
	struct plog_recovery scratch;
	struct plog_recovery *rec = recovery != NULL ? recovery : &scratch;
	memset(rec, 0, sizeof(*rec));
	enum keel_err err = check_config(log, config);
	if (err != KEEL_OK) {
		return err;
	}
	log->config = *config;
	memcpy(log->dir, config->dir, strlen(config->dir) + 1);
	log->config.dir = log->dir;
	plog_epochs_init(&log->epochs);
	log->scan_buf_size = config->max_batch_bytes + SCAN_SLACK_BYTES;
	log->scan_buf = malloc(log->scan_buf_size);
	char temps[8][64];
	struct listing l = {.temps = temps};
	struct tail_epochs tail = {0};
	err = log->scan_buf == NULL ? KEEL_NOMEM : open_steps(log, &l, &tail, rec);
	free(l.bases);
	free(tail.entries);
	if (err != KEEL_OK) {
		char why[sizeof(log->why)];
		memcpy(why, log->why, sizeof(why));
		log->state = PLOG_OPEN;
		plog_close(log);
		memcpy(log->why, why, sizeof(why));
		return err;
	}
	rec->log_end_offset = log->log_end_offset;
	log->state = PLOG_OPEN;
	return KEEL_OK;
}

void plog_close(struct plog *log)
{
	if (log->state == PLOG_CLOSED) {
		return;
	}
	for (uint32_t i = 0; i < log->segment_count; i++) {
		plog_segment_free(log->segments[i]);
	}
	free(log->segments);
	free(log->scan_buf);
	plog_epochs_close(&log->epochs);
	memset(log, 0, sizeof(*log));
	log->state = PLOG_CLOSED;
}
