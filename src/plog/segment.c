/*
 * segment.c — one segment: its in-memory indexes, the batch scanner, index
 * files, and offset/position lookups (internal.h).
 *
 * The scanner reads the file in chunks of the log's scan buffer (which holds
 * the largest batch) and validates each batch in memory; lookups hop from
 * the nearest index entry reading only batch headers.
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "plog/internal.h"

struct plog_segment *plog_segment_new(int64_t base_offset)
{
	KEEL_ASSERT(base_offset >= 0);
	struct plog_segment *seg = calloc(1, sizeof(*seg));
	if (seg == NULL) {
		return NULL;
	}
	seg->base_offset = base_offset;
	seg->end_offset = base_offset;
	seg->max_timestamp = -1;
	seg->first_timestamp = -1;
	return seg;
}

void plog_segment_free(struct plog_segment *seg)
{
	if (seg == NULL) {
		return;
	}
	if (seg->file != NULL) {
		wal_vfs_close(seg->file);
	}
	free(seg->index);
	free(seg->times);
	free(seg);
}

void plog_segment_clear(struct plog_segment *seg)
{
	seg->end_offset = seg->base_offset;
	seg->size_bytes = 0;
	seg->max_timestamp = -1;
	seg->first_timestamp = -1;
	seg->index_count = 0;
	seg->time_count = 0;
	seg->bytes_since_index = 0;
}

/* Grows an array of `elem` bytes to hold `need` elements. */
static bool grow(void **array, uint32_t *capacity, uint32_t need, size_t elem)
{
	if (need <= *capacity) {
		return true;
	}
	uint32_t cap = *capacity == 0 ? 64 : *capacity * 2;
	while (cap < need) {
		cap *= 2;
	}
	void *n = realloc(*array, (size_t)cap * elem);
	if (n == NULL) {
		return false;
	}
	*array = n;
	*capacity = cap;
	return true;
}

enum keel_err plog_segment_note(struct plog_segment *seg, const struct plog_batch *batch,
				uint32_t index_interval_bytes)
{
	KEEL_ASSERT(batch->base_offset == seg->end_offset);
	KEEL_ASSERT(seg->size_bytes + batch->size <= UINT32_MAX);
	KEEL_ASSERT(plog_batch_last_offset(batch) - seg->base_offset <= INT32_MAX);
	uint32_t rel = (uint32_t)(batch->base_offset - seg->base_offset);
	if (seg->size_bytes > 0 && seg->bytes_since_index >= index_interval_bytes) {
		if (!grow((void **)&seg->index, &seg->index_capacity, seg->index_count + 1,
			  sizeof(*seg->index))) {
			return KEEL_NOMEM;
		}
		seg->index[seg->index_count++] =
			(struct plog_index_entry){rel, (uint32_t)seg->size_bytes};
		seg->bytes_since_index = 0;
		int64_t last = seg->time_count > 0 ? seg->times[seg->time_count - 1].timestamp : -1;
		if (seg->max_timestamp > last) {
			if (!grow((void **)&seg->times, &seg->time_capacity, seg->time_count + 1,
				  sizeof(*seg->times))) {
				return KEEL_NOMEM;
			}
			seg->times[seg->time_count++] =
				(struct plog_time_entry){seg->max_timestamp, rel};
		}
	}
	if (seg->size_bytes == 0) {
		seg->first_timestamp = batch->max_timestamp;
	}
	if (batch->max_timestamp > seg->max_timestamp) {
		seg->max_timestamp = batch->max_timestamp;
	}
	seg->size_bytes += batch->size;
	seg->bytes_since_index += batch->size;
	seg->end_offset = plog_batch_last_offset(batch) + 1;
	return KEEL_OK;
}

/* ---- scanning ---- */

struct scanner {
	struct plog *log;
	struct wal_vfs_file *file;
	uint64_t file_size;
	uint64_t buf_position; /* file position of scan_buf[0] */
	size_t buf_len;
};

/* Makes [position, position + n) present in the buffer; KEEL_SHORT when the
 * file ends first. */
static enum keel_err scanner_need(struct scanner *s, uint64_t position, size_t n)
{
	if (position >= s->buf_position && position + n <= s->buf_position + s->buf_len) {
		return KEEL_OK;
	}
	if (position + n > s->file_size) {
		return KEEL_SHORT;
	}
	KEEL_ASSERT(n <= s->log->scan_buf_size);
	uint64_t left = s->file_size - position;
	size_t want = left < s->log->scan_buf_size ? (size_t)left : s->log->scan_buf_size;
	enum keel_err err = wal_vfs_pread_exact(s->file, s->log->scan_buf, want, position);
	if (err != KEEL_OK) {
		s->buf_len = 0;
		return err;
	}
	s->buf_position = position;
	s->buf_len = want;
	return KEEL_OK;
}

/* Validates the batch at `position`; I/O errors in *err. */
static enum plog_batch_check scan_batch(struct scanner *s, uint64_t position,
					struct plog_batch *batch, enum keel_err *err)
{
	uint32_t max_length = s->log->config.max_batch_bytes - PLOG_BATCH_LOG_OVERHEAD;
	*err = scanner_need(s, position, PLOG_BATCH_HEADER_SIZE);
	if (*err == KEEL_SHORT) {
		*err = KEEL_OK;
		return PLOG_BATCH_SHORT;
	}
	if (*err != KEEL_OK) {
		return PLOG_BATCH_SHORT;
	}
	const uint8_t *p = s->log->scan_buf + (position - s->buf_position);
	enum plog_batch_check check = plog_batch_parse_header(
		p, PLOG_BATCH_HEADER_SIZE, max_length, batch);
	if (check != PLOG_BATCH_OK) {
		return check;
	}
	*err = scanner_need(s, position, batch->size);
	if (*err == KEEL_SHORT) {
		*err = KEEL_OK;
		return PLOG_BATCH_SHORT;
	}
	if (*err != KEEL_OK) {
		return PLOG_BATCH_SHORT;
	}
	p = s->log->scan_buf + (position - s->buf_position);
	return plog_batch_validate(p, batch->size, max_length, batch);
}

enum keel_err plog_segment_scan(struct plog *log, struct plog_segment *seg, plog_epoch_fn fn,
				void *arg, enum plog_batch_check *stop, uint64_t *stop_position)
{
	struct scanner s = {.log = log, .file = seg->file};
	enum keel_err err = wal_vfs_size(seg->file, &s.file_size);
	if (err != KEEL_OK) {
		return err;
	}
	plog_segment_clear(seg);
	int32_t last_epoch = -1;
	uint64_t position = 0;
	*stop = PLOG_BATCH_OK;
	while (position < s.file_size) {
		struct plog_batch batch;
		enum plog_batch_check check = scan_batch(&s, position, &batch, &err);
		if (err != KEEL_OK) {
			return err;
		}
		/* Offsets are outside the CRC: they must follow on. */
		if (check == PLOG_BATCH_OK && batch.base_offset != seg->end_offset) {
			check = PLOG_BATCH_BAD_RECORDS;
		}
		if (check == PLOG_BATCH_OK && batch.size + seg->size_bytes > UINT32_MAX) {
			check = PLOG_BATCH_BAD_LENGTH;
		}
		if (check != PLOG_BATCH_OK) {
			*stop = check;
			break;
		}
		err = plog_segment_note(seg, &batch, log->config.index_interval_bytes);
		if (err == KEEL_OK && fn != NULL && batch.leader_epoch != last_epoch) {
			err = fn(arg, batch.leader_epoch, batch.base_offset);
			last_epoch = batch.leader_epoch;
		}
		if (err != KEEL_OK) {
			return err;
		}
		position += batch.size;
	}
	*stop_position = position;
	return KEEL_OK;
}

/* ---- index files ---- */

enum keel_err plog_write_file(struct plog *log, const char *path, const uint8_t *data,
				      size_t size)
{
	struct wal_vfs_file *f;
	enum keel_err err = wal_vfs_open(log->config.vfs, path, WAL_VFS_CREATE, &f);
	if (err != KEEL_OK) {
		return err;
	}
	err = wal_vfs_truncate(f, 0);
	if (err == KEEL_OK) {
		err = wal_vfs_pwrite(f, data, size, 0);
	}
	if (err == KEEL_OK) {
		err = wal_vfs_datasync(f);
	}
	wal_vfs_close(f);
	return err;
}

enum keel_err plog_segment_write_indexes(struct plog *log, const struct plog_segment *seg)
{
	struct plog_index_header h = {
		.entry_count = seg->index_count,
		.log_size = seg->size_bytes,
		.end_offset = seg->end_offset,
		.max_timestamp = seg->max_timestamp,
	};
	size_t index_size = plog_index_file_size(seg->index_count, PLOG_INDEX_ENTRY_SIZE);
	size_t time_size = plog_index_file_size(seg->time_count, PLOG_TIMEINDEX_ENTRY_SIZE);
	uint8_t *buf = malloc(index_size > time_size ? index_size : time_size);
	if (buf == NULL) {
		return KEEL_NOMEM;
	}
	char path[WAL_VFS_PATH_MAX];
	plog_index_encode(buf, &h, seg->index);
	enum keel_err err = plog_segment_file_path(log, seg->base_offset, PLOG_FILE_INDEX, path,
						   sizeof(path));
	if (err == KEEL_OK) {
		err = plog_write_file(log, path, buf, index_size);
	}
	if (err == KEEL_OK) {
		h.entry_count = seg->time_count;
		plog_timeindex_encode(buf, &h, seg->times);
		err = plog_segment_file_path(log, seg->base_offset, PLOG_FILE_TIMEINDEX, path,
					     sizeof(path));
	}
	if (err == KEEL_OK) {
		err = plog_write_file(log, path, buf, time_size);
	}
	free(buf);
	return err;
}

enum keel_err plog_read_file(struct plog *log, const char *path, uint64_t max_size,
				     uint8_t **data, size_t *size)
{
	struct wal_vfs_file *f;
	enum keel_err err = wal_vfs_open(log->config.vfs, path, WAL_VFS_READ_ONLY, &f);
	if (err != KEEL_OK) {
		return err;
	}
	uint64_t file_size = 0;
	err = wal_vfs_size(f, &file_size);
	if (err == KEEL_OK && file_size > max_size) {
		err = KEEL_TOOBIG;
	}
	uint8_t *buf = NULL;
	if (err == KEEL_OK) {
		buf = malloc(file_size > 0 ? (size_t)file_size : 1);
		err = buf == NULL ? KEEL_NOMEM : KEEL_OK;
	}
	if (err == KEEL_OK) {
		err = wal_vfs_pread_exact(f, buf, (size_t)file_size, 0);
	}
	wal_vfs_close(f);
	if (err != KEEL_OK) {
		free(buf);
		return err;
	}
	*data = buf;
	*size = (size_t)file_size;
	return KEEL_OK;
}

/* Entries must rise, stay inside the segment and (offset index) point at
 * positions below the log size. */
static bool index_sane(const struct plog_segment *seg, const struct plog_index_header *h,
		       uint64_t log_size)
{
	if (h->log_size != log_size || h->end_offset < seg->base_offset ||
	    (h->end_offset == seg->base_offset) != (log_size == 0)) {
		return false;
	}
	uint64_t span = (uint64_t)(h->end_offset - seg->base_offset);
	for (uint32_t i = 0; i < seg->index_count; i++) {
		const struct plog_index_entry *e = &seg->index[i];
		if (e->relative_offset >= span || e->position >= log_size ||
		    (i > 0 && (e->relative_offset <= seg->index[i - 1].relative_offset ||
			       e->position <= seg->index[i - 1].position))) {
			return false;
		}
	}
	for (uint32_t i = 0; i < seg->time_count; i++) {
		const struct plog_time_entry *t = &seg->times[i];
		if (t->relative_offset >= span ||
		    (i > 0 && t->timestamp <= seg->times[i - 1].timestamp)) {
			return false;
		}
	}
	return true;
}

static bool load_one(struct plog *log, struct plog_segment *seg, bool time_index,
		     struct plog_index_header *h)
{
	char path[WAL_VFS_PATH_MAX];
	enum plog_file_kind kind = time_index ? PLOG_FILE_TIMEINDEX : PLOG_FILE_INDEX;
	if (plog_segment_file_path(log, seg->base_offset, kind, path, sizeof(path)) != KEEL_OK) {
		return false;
	}
	uint8_t *data = NULL;
	size_t size = 0;
	/* A segment of at most 4 GiB has at most that many entries. */
	if (plog_read_file(log, path, (uint64_t)UINT32_MAX, &data, &size) != KEEL_OK) {
		return false;
	}
	uint32_t count = 0;
	bool ok = plog_index_peek_count(data, size, time_index, &count) == KEEL_OK;
	if (ok && time_index) {
		ok = grow((void **)&seg->times, &seg->time_capacity, count, sizeof(*seg->times)) &&
		     plog_timeindex_decode(data, size, h, seg->times) == KEEL_OK;
		seg->time_count = ok ? count : 0;
	} else if (ok) {
		ok = grow((void **)&seg->index, &seg->index_capacity, count, sizeof(*seg->index)) &&
		     plog_index_decode(data, size, h, seg->index) == KEEL_OK;
		seg->index_count = ok ? count : 0;
	}
	free(data);
	return ok;
}

bool plog_segment_load_indexes(struct plog *log, struct plog_segment *seg, uint64_t log_size)
{
	plog_segment_clear(seg);
	struct plog_index_header hi;
	struct plog_index_header ht;
	if (!load_one(log, seg, false, &hi) || !load_one(log, seg, true, &ht) ||
	    hi.log_size != ht.log_size || hi.end_offset != ht.end_offset ||
	    hi.max_timestamp != ht.max_timestamp || !index_sane(seg, &hi, log_size)) {
		plog_segment_clear(seg);
		return false;
	}
	seg->size_bytes = log_size;
	seg->end_offset = hi.end_offset;
	seg->max_timestamp = hi.max_timestamp;
	return true;
}

/* ---- lookups ---- */

enum keel_err plog_segment_read_header(struct plog *log, const struct plog_segment *seg,
				       uint64_t position, struct plog_batch *batch)
{
	KEEL_ASSERT(position < seg->size_bytes);
	uint8_t header[PLOG_BATCH_HEADER_SIZE];
	enum keel_err err = wal_vfs_pread_exact(seg->file, header, sizeof(header), position);
	if (err != KEEL_OK) {
		plog_set_why(log, "cannot read a batch header at position", (int64_t)position);
		return err == KEEL_SHORT ? KEEL_CORRUPT : err;
	}
	uint32_t max_length = log->config.max_batch_bytes - PLOG_BATCH_LOG_OVERHEAD;
	if (plog_batch_parse_header(header, sizeof(header), max_length, batch) != PLOG_BATCH_OK ||
	    position + batch->size > seg->size_bytes || batch->base_offset < seg->base_offset ||
	    plog_batch_last_offset(batch) >= seg->end_offset) {
		plog_set_why(log, "bad batch header at position", (int64_t)position);
		return KEEL_CORRUPT;
	}
	batch->data = NULL;
	return KEEL_OK;
}

enum keel_err plog_segment_position_of(struct plog *log, const struct plog_segment *seg,
				       int64_t offset, uint64_t *position)
{
	if (offset >= seg->end_offset) {
		*position = seg->size_bytes;
		return KEEL_OK;
	}
	KEEL_ASSERT(offset >= seg->base_offset);
	uint64_t rel = (uint64_t)(offset - seg->base_offset);
	/* The last index entry at or before the offset. */
	uint32_t lo = 0;
	uint32_t hi = seg->index_count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (seg->index[mid].relative_offset <= rel) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	uint64_t pos = lo == 0 ? 0 : seg->index[lo - 1].position;
	for (;;) {
		struct plog_batch batch;
		enum keel_err err = plog_segment_read_header(log, seg, pos, &batch);
		if (err != KEEL_OK) {
			return err;
		}
		if (plog_batch_last_offset(&batch) >= offset) {
			*position = pos;
			return KEEL_OK;
		}
		pos += batch.size;
	}
}

enum keel_err plog_segment_boundary_before(struct plog *log, const struct plog_segment *seg,
					   uint64_t start, uint64_t limit, uint64_t *boundary)
{
	KEEL_ASSERT(start < seg->size_bytes);
	if (limit >= seg->size_bytes) {
		*boundary = seg->size_bytes;
		return KEEL_OK;
	}
	/* Jump to the last indexed batch start in (start, limit]. */
	uint32_t lo = 0;
	uint32_t hi = seg->index_count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (seg->index[mid].position <= limit) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	uint64_t pos = start;
	if (lo > 0 && seg->index[lo - 1].position > start) {
		pos = seg->index[lo - 1].position;
	}
	*boundary = pos == start ? 0 : pos;
	while (pos < seg->size_bytes) {
		struct plog_batch batch;
		enum keel_err err = plog_segment_read_header(log, seg, pos, &batch);
		if (err != KEEL_OK) {
			return err;
		}
		if (pos + batch.size > limit) {
			break;
		}
		pos += batch.size;
		*boundary = pos;
	}
	return KEEL_OK;
}
