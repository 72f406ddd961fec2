/*
 * recover.c — opening a partition log: the directory listing, older
 * segments trusted through their index files or scanned, the tail rescanned
 * and cut at the first invalid batch, the epoch cache cut and completed
 * (plog.h states the rules; docs/plog-format.md explains them).
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "plog/internal.h"

#define SCAN_SLACK_BYTES (64u * 1024)

struct base_list {
	int64_t *bases;
	uint32_t count;
	uint32_t capacity;
};

struct listing {
	struct base_list logs;    /* segments */
	struct base_list indexes; /* segments named by an .index or .timeindex */
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
	if (kind == PLOG_FILE_LOG || kind == PLOG_FILE_INDEX || kind == PLOG_FILE_TIMEINDEX) {
		struct base_list *b = kind == PLOG_FILE_LOG ? &l->logs : &l->indexes;
		if (b->count == b->capacity) {
			uint32_t cap = b->capacity == 0 ? 16 : b->capacity * 2;
			int64_t *n = b->count >= 2 * PLOG_MAX_SEGMENTS ? NULL
								  : realloc(b->bases, cap * sizeof(*n));
			if (n == NULL) {
				l->failed = true;
				return;
			}
			b->bases = n;
			b->capacity = cap;
		}
		b->bases[b->count++] = base;
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
	const struct base_list *logs = &l->logs;
	for (uint32_t i = 0; i < logs->count; i++) {
		struct plog_segment *seg = plog_segment_new(logs->bases[i]);
		if (seg == NULL) {
			return KEEL_NOMEM;
		}
		enum keel_err err = plog_push_segment(log, seg);
		if (err != KEEL_OK) {
			plog_segment_free(seg);
			return err;
		}
		err = plog_open_segment_file(log, seg, 0);
		if (err != KEEL_OK) {
			return err;
		}
		bool last = i + 1 == logs->count;
		err = last ? recover_tail(log, seg, tail, rec) : recover_older(log, seg, rec);
		if (err != KEEL_OK) {
			return err;
		}
		if (i > 0 && log->segments[i - 1]->end_offset != seg->base_offset) {
			plog_set_why(log, "segments do not follow on at offset", seg->base_offset);
			return KEEL_CORRUPT;
		}
	}
	rec->segment_count = logs->count;
	return KEEL_OK;
}

/* Index files whose segment is gone (a deletion cut short by a crash: the
 * .log goes first) are removed. */
static enum keel_err remove_stray_indexes(struct plog *log, const struct listing *l)
{
	for (uint32_t i = 0; i < l->indexes.count; i++) {
		int64_t base = l->indexes.bases[i];
		if (bsearch(&base, l->logs.bases, l->logs.count, sizeof(base), compare_i64) != NULL) {
			continue;
		}
		enum keel_err err = plog_unlink_segment_files(log, base, true);
		if (err != KEEL_OK) {
			return err;
		}
	}
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
	    config->segment_bytes > PLOG_MAX_SEGMENT_BYTES ||
	    config->max_batch_bytes < PLOG_BATCH_HEADER_SIZE ||
	    config->max_batch_bytes > PLOG_MAX_SEGMENT_BYTES / 2 || config->index_interval_bytes == 0) {
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
	if (l->logs.count > 0) {
		qsort(l->logs.bases, l->logs.count, sizeof(*l->logs.bases), compare_i64);
	}
	if ((err = remove_stray_indexes(log, l)) != KEEL_OK) {
		plog_set_why(log, "cannot remove index files of a deleted segment", -1);
		return err;
	}
	if (l->has_epoch_file && (err = load_epochs(log)) != KEEL_OK) {
		return err;
	}
	if (l->has_metadata && (err = load_metadata(log)) != KEEL_OK) {
		return err;
	}
	err = l->logs.count == 0 ? plog_add_segment(log, 0) : load_segments(log, l, tail, rec);
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
	free(l.logs.bases);
	free(l.indexes.bases);
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

