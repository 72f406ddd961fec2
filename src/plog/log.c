/*
 * log.c — a partition log's life: appends, sync, rolls, the epoch and
 * metadata files, close (plog.h); opening and recovery are in recover.c.
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
#define SEVEN_DAYS_MS (7ll * 24 * 3600 * 1000)
#define DEFAULT_INDEX_INTERVAL_BYTES 4096
#define DEFAULT_MAX_BATCH_BYTES (1024u * 1024 + 12)

void plog_config_init(struct plog_config *config, struct wal_vfs *vfs, const char *dir)
{
	memset(config, 0, sizeof(*config));
	config->vfs = vfs;
	config->dir = dir;
	config->segment_bytes = DEFAULT_SEGMENT_BYTES;
	config->segment_ms = SEVEN_DAYS_MS;
	config->index_interval_bytes = DEFAULT_INDEX_INTERVAL_BYTES;
	config->retention_ms = SEVEN_DAYS_MS;
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

enum keel_err plog_replace_file(struct plog *log, const char *name, const uint8_t *data,
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
	enum keel_err err = plog_replace_file(log, PLOG_EPOCH_FILE, buf, size);
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
	enum keel_err err = plog_replace_file(log, PLOG_METADATA_FILE, buf, sizeof(buf));
	if (err != KEEL_OK) {
		return plog_fail(log, err, "cannot write partition.metadata");
	}
	memcpy(log->topic_id, topic_id, PLOG_TOPIC_ID_SIZE);
	log->has_topic_id = true;
	return KEEL_OK;
}

/* ---- segments ---- */

enum keel_err plog_push_segment(struct plog *log, struct plog_segment *seg)
{
	if (log->segment_count == log->segment_capacity) {
		if (log->segment_count >= PLOG_MAX_SEGMENTS) {
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

enum keel_err plog_open_segment_file(struct plog *log, struct plog_segment *seg, unsigned flags)
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
	enum keel_err err = plog_open_segment_file(log, seg, WAL_VFS_CREATE | WAL_VFS_EXCLUSIVE);
	if (err == KEEL_OK) {
		err = wal_vfs_sync_dir(log->config.vfs, log->dir);
	}
	if (err == KEEL_OK) {
		err = plog_push_segment(log, seg);
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

enum keel_err plog_assign_epoch(struct plog *log, int32_t epoch)
{
	KEEL_ASSERT(epoch >= 0);
	if (log->state != PLOG_OPEN) {
		return KEEL_FAILED;
	}
	if (epoch <= plog_epochs_latest(&log->epochs)) {
		return KEEL_OK; /* known already (or older: the batches decide) */
	}
	return record_epoch(log, epoch, log->log_end_offset);
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
