/*
 * read.c — reads: fetch ranges, ListOffsets by timestamp, OffsetForLeaderEpoch
 * and the full consistency check (plog.h).
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "plog/internal.h"

enum keel_err plog_read(struct plog *log, int64_t fetch_offset, int64_t max_offset,
			uint64_t max_bytes, struct plog_read_result *result)
{
	KEEL_ASSERT(log->state != PLOG_CLOSED);
	memset(result, 0, sizeof(*result));
	result->first_offset = fetch_offset;
	result->next_offset = fetch_offset;
	if (fetch_offset < plog_log_start_offset(log) || fetch_offset > log->log_end_offset) {
		plog_set_why(log, "fetch offset out of range:", fetch_offset);
		return KEEL_RANGE;
	}
	if (max_offset > log->log_end_offset) {
		max_offset = log->log_end_offset;
	}
	if (fetch_offset >= max_offset) {
		return KEEL_OK;
	}
	uint32_t i = plog_find_segment(log, fetch_offset);
	struct plog_segment *seg = log->segments[i];
	/* A segment that ends exactly at the fetch offset: go on to the next. */
	while (fetch_offset >= seg->end_offset) {
		KEEL_ASSERT(i + 1 < log->segment_count);
		seg = log->segments[++i];
	}
	uint64_t start;
	enum keel_err err = plog_segment_position_of(log, seg, fetch_offset, &start);
	if (err != KEEL_OK) {
		return err;
	}
	/* The bound: the first batch that reaches max_offset is left out. */
	uint64_t end_by_offset = seg->size_bytes;
	if (max_offset < seg->end_offset) {
		err = plog_segment_position_of(log, seg, max_offset, &end_by_offset);
		if (err != KEEL_OK) {
			return err;
		}
	}
	if (end_by_offset <= start) {
		return KEEL_OK; /* the batch holding fetch_offset is not wholly visible */
	}
	uint64_t limit = max_bytes > end_by_offset - start ? end_by_offset : start + max_bytes;
	uint64_t end;
	err = plog_segment_boundary_before(log, seg, start, limit, &end);
	if (err != KEEL_OK) {
		return err;
	}
	struct plog_batch first;
	err = plog_segment_read_header(log, seg, start, &first);
	if (err != KEEL_OK) {
		return err;
	}
	if (end == 0) {
		end = start + first.size; /* at least one whole batch */
	}
	KEEL_ASSERT(end <= end_by_offset);
	struct plog_batch last = first;
	/* next_offset: the end of the last batch included. */
	if (end == seg->size_bytes) {
		result->next_offset = seg->end_offset;
	} else {
		err = plog_segment_read_header(log, seg, end, &last);
		if (err != KEEL_OK) {
			return err;
		}
		result->next_offset = last.base_offset;
	}
	result->file = seg->file;
	result->segment_base_offset = seg->base_offset;
	result->position = start;
	result->size = end - start;
	result->first_offset = first.base_offset;
	return KEEL_OK;
}

enum keel_err plog_read_copy(struct plog *log, const struct plog_read_result *result,
			     uint8_t *buf)
{
	(void)log;
	if (result->size == 0) {
		return KEEL_OK;
	}
	return wal_vfs_pread_exact(result->file, buf, (size_t)result->size, result->position);
}

/* ---- by timestamp ---- */

struct first_late {
	int64_t target;
	int32_t offset_delta; /* -1 until found */
	int64_t timestamp;
};

static void find_late_record(void *arg, int32_t offset_delta, int64_t timestamp)
{
	struct first_late *f = arg;
	if (f->offset_delta < 0 && timestamp >= f->target) {
		f->offset_delta = offset_delta;
		f->timestamp = timestamp;
	}
}

/* The batch at `position` reaches target: which record does. */
static enum keel_err pick_record(struct plog *log, const struct plog_segment *seg,
				 uint64_t position, const struct plog_batch *header,
				 int64_t target, int64_t *offset, int64_t *timestamp)
{
	*offset = header->base_offset;
	*timestamp = header->max_timestamp;
	if (plog_batch_compression(header) != PLOG_COMPRESSION_NONE ||
	    (header->attributes & PLOG_ATTR_LOG_APPEND_TIME) != 0) {
		return KEEL_OK;
	}
	KEEL_ASSERT(header->size <= log->scan_buf_size);
	enum keel_err err = wal_vfs_pread_exact(seg->file, log->scan_buf, header->size, position);
	if (err != KEEL_OK) {
		return err;
	}
	struct plog_batch batch;
	uint32_t max_length = log->config.max_batch_bytes - PLOG_BATCH_LOG_OVERHEAD;
	struct first_late f = {.target = target, .offset_delta = -1};
	if (plog_batch_validate(log->scan_buf, header->size, max_length, &batch) != PLOG_BATCH_OK ||
	    plog_batch_walk_records(&batch, find_late_record, &f) != PLOG_BATCH_OK) {
		plog_set_why(log, "damaged batch at position", (int64_t)position);
		return KEEL_CORRUPT;
	}
	if (f.offset_delta >= 0) {
		*offset = batch.base_offset + f.offset_delta;
		*timestamp = f.timestamp;
	}
	return KEEL_OK;
}

enum keel_err plog_offset_for_timestamp(struct plog *log, int64_t target, int64_t *offset,
					int64_t *timestamp)
{
	KEEL_ASSERT(log->state != PLOG_CLOSED);
	for (uint32_t i = 0; i < log->segment_count; i++) {
		struct plog_segment *seg = log->segments[i];
		if (seg->max_timestamp < target || seg->size_bytes == 0) {
			continue;
		}
		/* The last time entry below target: everything before it is earlier. */
		uint32_t lo = 0;
		uint32_t hi = seg->time_count;
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;
			if (seg->times[mid].timestamp < target) {
				lo = mid + 1;
			} else {
				hi = mid;
			}
		}
		uint64_t pos = 0;
		if (lo > 0) {
			int64_t from = seg->base_offset + seg->times[lo - 1].relative_offset;
			enum keel_err err = plog_segment_position_of(log, seg, from, &pos);
			if (err != KEEL_OK) {
				return err;
			}
		}
		while (pos < seg->size_bytes) {
			struct plog_batch batch;
			enum keel_err err = plog_segment_read_header(log, seg, pos, &batch);
			if (err != KEEL_OK) {
				return err;
			}
			if (batch.max_timestamp >= target) {
				return pick_record(log, seg, pos, &batch, target, offset, timestamp);
			}
			pos += batch.size;
		}
	}
	return KEEL_NOENT;
}

void plog_end_offset_for_epoch(const struct plog *log, int32_t epoch, int32_t *found_epoch,
			       int64_t *end_offset)
{
	plog_epochs_end_offset_for(&log->epochs, epoch, log->log_end_offset, found_epoch,
				   end_offset);
}

/* ---- the full check ---- */

static bool same_indexes(const struct plog_segment *a, const struct plog_segment *b)
{
	if (a->index_count != b->index_count || a->time_count != b->time_count ||
	    a->end_offset != b->end_offset || a->size_bytes != b->size_bytes ||
	    a->max_timestamp != b->max_timestamp) {
		return false;
	}
	for (uint32_t i = 0; i < a->index_count; i++) {
		if (a->index[i].relative_offset != b->index[i].relative_offset ||
		    a->index[i].position != b->index[i].position) {
			return false;
		}
	}
	for (uint32_t i = 0; i < a->time_count; i++) {
		if (a->times[i].timestamp != b->times[i].timestamp ||
		    a->times[i].relative_offset != b->times[i].relative_offset) {
			return false;
		}
	}
	return true;
}

enum keel_err plog_check(struct plog *log)
{
	KEEL_ASSERT(log->state != PLOG_CLOSED);
	for (uint32_t i = 0; i < log->segment_count; i++) {
		struct plog_segment *seg = log->segments[i];
		struct plog_segment *fresh = plog_segment_new(seg->base_offset);
		if (fresh == NULL) {
			return KEEL_NOMEM;
		}
		fresh->file = seg->file;
		enum plog_batch_check stop;
		uint64_t stop_position = 0;
		enum keel_err err = plog_segment_scan(log, fresh, NULL, NULL, &stop, &stop_position);
		fresh->file = NULL;
		if (err == KEEL_OK && stop != PLOG_BATCH_OK) {
			plog_set_why(log, "invalid batch at position", (int64_t)stop_position);
			err = KEEL_CORRUPT;
		}
		if (err == KEEL_OK && !same_indexes(seg, fresh)) {
			plog_set_why(log, "indexes disagree with a scan of segment", seg->base_offset);
			err = KEEL_CORRUPT;
		}
		if (err == KEEL_OK && i > 0 && log->segments[i - 1]->end_offset != seg->base_offset) {
			plog_set_why(log, "segments do not follow on at", seg->base_offset);
			err = KEEL_CORRUPT;
		}
		plog_segment_free(fresh);
		if (err != KEEL_OK) {
			return err;
		}
	}
	if (plog_active(log)->end_offset != log->log_end_offset) {
		plog_set_why(log, "log end offset disagrees with the active segment", -1);
		return KEEL_CORRUPT;
	}
	return KEEL_OK;
}
