/*
 * change.c — changes that remove data: truncation (replication's rewind),
 * reset (start over at an offset) and retention (plog.h).
 *
 * Order on disk, so that a crash at any point leaves contiguous segments:
 * truncation deletes the later segments newest first, syncs the directory,
 * then cuts the segment that holds the new end; retention deletes the oldest
 * segment first. The epoch file is rewritten after the data changed (on
 * open, recovery cuts it to the log end again if the crash came between).
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "plog/internal.h"

/* Deletes segments [from, count) newest first, then syncs the directory. */
static enum keel_err drop_segments_after(struct plog *log, uint32_t keep)
{
	while (log->segment_count > keep) {
		struct plog_segment *seg = log->segments[log->segment_count - 1];
		enum keel_err err = plog_delete_segment_files(log, seg);
		if (err != KEEL_OK) {
			return err;
		}
		plog_segment_free(seg);
		log->segment_count--;
	}
	return wal_vfs_sync_dir(log->config.vfs, log->dir);
}

static enum keel_err cut_active(struct plog *log, uint64_t position)
{
	struct plog_segment *seg = plog_active(log);
	enum keel_err err = wal_vfs_truncate(seg->file, position);
	if (err == KEEL_OK) {
		err = wal_vfs_datasync(seg->file);
	}
	if (err != KEEL_OK) {
		return err;
	}
	/* Rebuild its indexes from what is left (truncation is rare). */
	enum plog_batch_check stop;
	uint64_t stop_position = 0;
	err = plog_segment_scan(log, seg, NULL, NULL, &stop, &stop_position);
	if (err == KEEL_OK && (stop != PLOG_BATCH_OK || stop_position != position)) {
		plog_set_why(log, "segment damaged below the truncation point at", (int64_t)stop_position);
		err = KEEL_CORRUPT;
	}
	return err;
}

enum keel_err plog_truncate(struct plog *log, int64_t offset)
{
	if (log->state != PLOG_OPEN) {
		return KEEL_FAILED;
	}
	if (offset < plog_log_start_offset(log) || offset > log->log_end_offset) {
		plog_set_why(log, "truncation offset out of range:", offset);
		return KEEL_RANGE;
	}
	if (offset == log->log_end_offset) {
		return KEEL_OK;
	}
	uint32_t i = plog_find_segment(log, offset);
	struct plog_segment *seg = log->segments[i];
	uint64_t position;
	enum keel_err err = plog_segment_position_of(log, seg, offset, &position);
	if (err != KEEL_OK) {
		return err;
	}
	bool was_frozen = i + 1 < log->segment_count;
	err = drop_segments_after(log, i + 1);
	if (err == KEEL_OK && was_frozen) {
		err = plog_unlink_segment_files(log, seg->base_offset, true);
	}
	if (err == KEEL_OK) {
		err = cut_active(log, position);
	}
	if (err != KEEL_OK) {
		return plog_fail(log, err, "truncation failed");
	}
	log->log_end_offset = seg->end_offset;
	KEEL_ASSERT(log->log_end_offset <= offset);
	if (log->durable_offset > log->log_end_offset) {
		log->durable_offset = log->log_end_offset;
	}
	if (plog_epochs_truncate_end(&log->epochs, log->log_end_offset)) {
		err = plog_write_epochs(log);
		if (err != KEEL_OK) {
			return plog_fail(log, err, "cannot write leader-epoch-checkpoint");
		}
	}
	return KEEL_OK;
}

enum keel_err plog_reset(struct plog *log, int64_t start_offset)
{
	KEEL_ASSERT(start_offset >= 0);
	if (log->state != PLOG_OPEN) {
		return KEEL_FAILED;
	}
	enum keel_err err = drop_segments_after(log, 0);
	if (err == KEEL_OK) {
		err = plog_add_segment(log, start_offset);
	}
	if (err == KEEL_OK) {
		plog_epochs_truncate_end(&log->epochs, 0);
		err = plog_write_epochs(log);
	}
	if (err != KEEL_OK) {
		return plog_fail(log, err, "reset failed");
	}
	log->log_end_offset = start_offset;
	log->durable_offset = start_offset;
	return KEEL_OK;
}

static bool expired(const struct plog *log, const struct plog_segment *seg, int64_t now_ms,
		    uint64_t total_bytes)
{
	const struct plog_config *c = &log->config;
	/* A segment without timestamps never expires by time. */
	if (c->retention_ms >= 0 && seg->max_timestamp >= 0 &&
	    now_ms - seg->max_timestamp > c->retention_ms) {
		return true;
	}
	return c->retention_bytes >= 0 &&
	       total_bytes - seg->size_bytes >= (uint64_t)c->retention_bytes;
}

enum keel_err plog_retain(struct plog *log, int64_t now_ms, uint32_t *deleted)
{
	if (deleted != NULL) {
		*deleted = 0;
	}
	if (log->state != PLOG_OPEN) {
		return KEEL_FAILED;
	}
	uint64_t total = plog_size_bytes(log);
	uint32_t drop = 0;
	while (drop + 1 < log->segment_count && expired(log, log->segments[drop], now_ms, total)) {
		total -= log->segments[drop]->size_bytes;
		drop++;
	}
	if (drop == 0) {
		return KEEL_OK;
	}
	enum keel_err err = KEEL_OK;
	uint32_t gone = 0;
	while (gone < drop && err == KEEL_OK) {
		err = plog_delete_segment_files(log, log->segments[gone]);
		plog_segment_free(log->segments[gone]);
		gone++;
	}
	memmove(log->segments, log->segments + gone,
		(size_t)(log->segment_count - gone) * sizeof(*log->segments));
	log->segment_count -= gone;
	if (err == KEEL_OK) {
		err = wal_vfs_sync_dir(log->config.vfs, log->dir);
	}
	if (err != KEEL_OK) {
		return plog_fail(log, err, "cannot delete an expired segment");
	}
	if (plog_epochs_truncate_start(&log->epochs, plog_log_start_offset(log))) {
		err = plog_write_epochs(log);
		if (err != KEEL_OK) {
			return plog_fail(log, err, "cannot write leader-epoch-checkpoint");
		}
	}
	if (deleted != NULL) {
		*deleted = drop;
	}
	return KEEL_OK;
}
