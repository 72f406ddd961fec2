/* wal.c — the write path of the WAL: append, sync, truncation, segment
 * rolling and reuse, compaction, reset, hard state (recovery is in
 * recover.c; the contract is in wal.h).
 *
 * Segment life cycle (names carry the generation):
 *
 *   (created) spare-G --header G' written, synced--> --rename, dir sync-->
 *   seg-G' (the tail: appends) --roll/truncate--> seg-G' (sealed)
 *   --compact--> spare-G' (recycled: stale records keep generation G') or
 *   deleted
 *
 * Invariants:
 *  - A record of generation G is only ever written to a file whose name
 *    seg-G is durable (header synced, renamed, directory synced), and G is
 *    above every generation in any file name, so a reused file's old
 *    records never match its new generation.
 *  - Before the first record goes into a new segment, the previous tail is
 *    synced. So records of a later segment being on disk proves every
 *    earlier segment complete, and unsynced data only ever sits in the last
 *    sync batch of the tail segment.
 *  - Within a segment records are only appended; a truncation starts a new
 *    segment (higher generation, first index = the truncation point) that
 *    supersedes every older entry at or after its first index.
 *  - Segment files are removed in generation order, so a segment never
 *    disappears while an older one that it supersedes survives.
 */
#include "wal/wal.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "wal/internal.h"

/* ---- state helpers ---- */

/* Records `err` as the sticky failure; errmsg already says why. */
static enum keel_err stick(struct wal *wal, enum keel_err err)
{
	KEEL_ASSERT(err != KEEL_OK);
	if (wal->failed == KEEL_OK) {
		wal->failed = err;
	}
	return err;
}

static enum keel_err refuse_if_failed(const struct wal *wal)
{
	KEEL_ASSERT(wal->open);
	/* errmsg keeps the original failure: that is what the operator needs. */
	return wal->failed != KEEL_OK ? KEEL_FAILED : KEEL_OK;
}

bool wal_failed(const struct wal *wal)
{
	return wal->failed != KEEL_OK;
}

uint64_t wal_last_index(const struct wal *wal)
{
	return wal->last_index;
}

uint64_t wal_last_term(const struct wal *wal)
{
	return wal->last_term;
}

uint64_t wal_durable_index(const struct wal *wal)
{
	return wal->durable_index;
}

uint64_t wal_term_at(const struct wal *wal, uint64_t index)
{
	if (index == wal->snapshot_index) {
		return wal->snapshot_term;
	}
	if (index < wal->snapshot_index || index > wal->last_index) {
		return 0;
	}
	size_t lo = 0;
	size_t hi = wal->term_count;
	while (lo < hi) { /* the last run starting at or before index */
		size_t mid = lo + (hi - lo) / 2;
		if (wal->terms[mid].first_index <= index) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo == 0 ? 0 : wal->terms[lo - 1].term;
}

uint64_t wal_durable_term(const struct wal *wal)
{
	return wal_term_at(wal, wal->durable_index);
}

static void terms_truncate(struct wal *wal, uint64_t from_index)
{
	while (wal->term_count > 0 && wal->terms[wal->term_count - 1].first_index >= from_index) {
		wal->term_count--;
	}
}

/* Drops runs that end at or before the snapshot index. */
static void terms_trim_front(struct wal *wal)
{
	size_t drop = 0;
	while (drop + 1 < wal->term_count && wal->terms[drop + 1].first_index <= wal->snapshot_index + 1) {
		drop++;
	}
	if (drop > 0) {
		memmove(wal->terms, wal->terms + drop,
			(wal->term_count - drop) * sizeof(wal->terms[0]));
		wal->term_count -= drop;
	}
}

/* Capacity was reserved by the caller. */
static void terms_note(struct wal *wal, uint64_t index, uint64_t term)
{
	if (wal->term_count > 0 && wal->terms[wal->term_count - 1].term == term) {
		return;
	}
	KEEL_ASSERT(wal->term_count < wal->term_capacity);
	wal->terms[wal->term_count++] = (struct wal_term_run){.first_index = index, .term = term};
}

static struct wal_segment_info *tail_segment(struct wal *wal)
{
	return wal->segment_count > 0 ? &wal->segments[wal->segment_count - 1] : NULL;
}

/* ---- writing the buffer ---- */

static enum keel_err flush_buffer(struct wal *wal)
{
	if (wal->buf_used == 0) {
		return KEEL_OK;
	}
	KEEL_ASSERT(wal->active != NULL);
	enum keel_err err = wal_vfs_pwrite(wal->active, wal->buf, wal->buf_used, wal->flushed_offset);
	if (err != KEEL_OK) {
		char name[WAL_NAME_MAX];
		wal_segment_name(name, tail_segment(wal)->generation);
		wal_fail_io(wal->errmsg, err, "wal: write %s at offset %llu", name,
			    (unsigned long long)wal->flushed_offset);
		return stick(wal, err);
	}
	wal->flushed_offset += wal->buf_used;
	wal->buf_used = 0;
	wal->active_unsynced = true;
	return KEEL_OK;
}

static enum keel_err sync_active(struct wal *wal)
{
	enum keel_err err = flush_buffer(wal);
	if (err != KEEL_OK) {
		return err;
	}
	if (wal->active != NULL && wal->active_unsynced) {
		err = wal_vfs_datasync(wal->active);
		if (err != KEEL_OK) {
			char name[WAL_NAME_MAX];
			wal_segment_name(name, tail_segment(wal)->generation);
			wal_fail_io(wal->errmsg, err, "wal: fdatasync %s", name);
			return stick(wal, err);
		}
	}
	wal->active_unsynced = false;
	wal->batch_first_index = 0;
	wal->durable_index = wal->last_index;
	return KEEL_OK;
}

/* ---- segment files ---- */

/* Creates spare-<generation> sized for a segment per the prealloc mode.
 * Leaves it open in *out. Removes it again on failure. */
static enum keel_err create_spare(struct wal *wal, uint64_t generation, bool sync,
				  struct wal_vfs_file **out)
{
	char name[WAL_NAME_MAX];
	char path[WAL_VFS_PATH_MAX];
	wal_spare_name(name, generation);
	wal_path(path, wal->dir, name);
	struct wal_vfs_file *f;
	enum keel_err err = wal_vfs_open(wal->config.vfs, path, WAL_VFS_CREATE | WAL_VFS_EXCLUSIVE, &f);
	if (err != KEEL_OK) {
		return wal_fail_io(wal->errmsg, err, "wal: create %s", path);
	}
	switch (wal->config.prealloc) {
	case WAL_PREALLOC_ZERO_FILL:
		err = wal_vfs_write_zeros(f, 0, wal->config.segment_size_bytes);
		break;
	case WAL_PREALLOC_FALLOCATE:
		err = wal_vfs_allocate(f, wal->config.segment_size_bytes);
		break;
	case WAL_PREALLOC_NONE:
		break;
	}
	if (err == KEEL_OK && sync) {
		err = wal_vfs_datasync(f);
	}
	if (err != KEEL_OK) {
		wal_fail_io(wal->errmsg, err, "wal: preallocate %s", path);
		wal_vfs_close(f);
		(void)wal_vfs_unlink(wal->config.vfs, path);
		return err;
	}
	*out = f;
	return KEEL_OK;
}

/* Abandons a half-prepared spare (its file is removed, best effort). */
static void drop_preparing(struct wal *wal)
{
	if (wal->preparing == NULL) {
		return;
	}
	wal_vfs_close(wal->preparing);
	wal->preparing = NULL;
	char name[WAL_NAME_MAX];
	char path[WAL_VFS_PATH_MAX];
	wal_spare_name(name, wal->preparing_generation);
	wal_path(path, wal->dir, name);
	(void)wal_vfs_unlink(wal->config.vfs, path);
}

enum keel_err wal_prepare_spare_step(struct wal *wal, uint64_t budget_bytes, bool *done)
{
	*done = true;
	enum keel_err err = refuse_if_failed(wal);
	if (err != KEEL_OK) {
		return err;
	}
	if (wal->config.prealloc == WAL_PREALLOC_NONE ||
	    wal->spare_count >= wal->config.spare_segments) {
		drop_preparing(wal); /* compaction refilled the pool meanwhile */
		return KEEL_OK;
	}
	if (!wal_grow((void **)&wal->spares, &wal->spare_capacity, wal->spare_count + 1,
		      sizeof(uint64_t))) {
		return wal_fail(wal->errmsg, KEEL_NOMEM, "wal: no memory for the spare list");
	}
	char name[WAL_NAME_MAX];
	char path[WAL_VFS_PATH_MAX];
	if (wal->preparing == NULL) {
		wal->preparing_generation = wal->next_generation++;
		wal->preparing_offset = 0;
		wal_spare_name(name, wal->preparing_generation);
		wal_path(path, wal->dir, name);
		err = wal_vfs_open(wal->config.vfs, path, WAL_VFS_CREATE | WAL_VFS_EXCLUSIVE,
				   &wal->preparing);
		if (err != KEEL_OK) {
			wal->preparing = NULL;
			return wal_fail_io(wal->errmsg, err, "wal: create %s", path);
		}
	}
	uint64_t size = wal->config.segment_size_bytes;
	if (wal->config.prealloc == WAL_PREALLOC_FALLOCATE) {
		err = wal_vfs_allocate(wal->preparing, size);
		wal->preparing_offset = size;
	} else {
		uint64_t n = KEEL_MIN(budget_bytes, size - wal->preparing_offset);
		err = wal_vfs_write_zeros(wal->preparing, wal->preparing_offset, n);
		wal->preparing_offset += n;
	}
	if (err == KEEL_OK && wal->preparing_offset == size) {
		err = wal_vfs_datasync(wal->preparing);
		if (err == KEEL_OK) {
			wal_vfs_close(wal->preparing);
			wal->preparing = NULL;
			wal->spares[wal->spare_count++] = wal->preparing_generation;
			*done = wal->spare_count >= wal->config.spare_segments;
			return KEEL_OK;
		}
	}
	if (err != KEEL_OK) {
		wal_spare_name(name, wal->preparing_generation);
		wal_fail_io(wal->errmsg, err, "wal: preallocate %s", name);
		drop_preparing(wal);
		return err; /* not sticky: no log data was involved */
	}
	*done = false;
	return KEEL_OK;
}

enum keel_err wal_prepare_spare(struct wal *wal)
{
	bool done = false;
	enum keel_err err = KEEL_OK;
	uint64_t target = wal->spare_count + 1;
	while (err == KEEL_OK && !done && wal->spare_count < target) {
		err = wal_prepare_spare_step(wal, UINT64_MAX, &done);
	}
	return err;
}

/* Moves every segment at or after first_index to the obsolete list and
 * ends the one before at first_index - 1. Capacity was reserved. */
static void segments_cut(struct wal *wal, uint64_t first_index)
{
	while (wal->segment_count > 0 && tail_segment(wal)->first_index >= first_index) {
		KEEL_ASSERT(wal->obsolete_count < wal->obsolete_capacity);
		wal->obsolete[wal->obsolete_count++] = tail_segment(wal)->generation;
		wal->segment_count--;
	}
	struct wal_segment_info *tail = tail_segment(wal);
	if (tail != NULL && tail->last_index >= first_index) {
		tail->last_index = first_index - 1;
	}
}

/* Takes a spare (or makes a file), writes and syncs the header of a new
 * generation starting at first_index, renames it to its segment name and
 * syncs the directory. Returns the open file and its generation, which is
 * above every generation in any file name (so above the generation of any
 * stale record the reused file may still hold). */
static enum keel_err install_segment(struct wal *wal, uint64_t first_index, uint64_t prev_term,
				     struct wal_vfs_file **out, uint64_t *generation_out)
{
	struct wal_vfs *vfs = wal->config.vfs;
	char spare[WAL_VFS_PATH_MAX];
	char path[WAL_VFS_PATH_MAX];
	char name[WAL_NAME_MAX];
	struct wal_vfs_file *f = NULL;
	enum keel_err err;
	bool reuse = wal->config.prealloc != WAL_PREALLOC_NONE && wal->spare_count > 0;
	uint64_t spare_generation = reuse ? wal->spares[0] : wal->next_generation++;
	wal_spare_name(name, spare_generation);
	wal_path(spare, wal->dir, name);
	if (reuse) {
		err = wal_vfs_open(vfs, spare, 0, &f);
		if (err != KEEL_OK) {
			return wal_fail_io(wal->errmsg, err, "wal: open %s", spare);
		}
	} else {
		err = create_spare(wal, spare_generation, false, &f);
		if (err != KEEL_OK) {
			return err;
		}
	}
	uint64_t generation = wal->next_generation++;
	uint8_t header[WAL_SEGMENT_HEADER_SIZE];
	wal_segment_header_encode(header, &(struct wal_segment_header){
						  .version = WAL_FORMAT_VERSION,
						  .generation = generation,
						  .first_index = first_index,
						  .segment_size_bytes = wal->config.segment_size_bytes,
						  .prev_term = prev_term,
					  });
	err = wal_vfs_pwrite(f, header, sizeof(header), 0);
	if (err == KEEL_OK) {
		err = wal_vfs_datasync(f);
	}
	if (err != KEEL_OK) {
		wal_vfs_close(f);
		return wal_fail_io(wal->errmsg, err, "wal: write segment header to %s", spare);
	}
	if (reuse) { /* the file is no longer a spare, whatever happens next */
		wal->spare_count--;
		if (wal->spare_count > 0) {
			memmove(wal->spares, wal->spares + 1, wal->spare_count * sizeof(uint64_t));
		}
	}
	wal_segment_name(name, generation);
	wal_path(path, wal->dir, name);
	err = wal_vfs_rename(vfs, spare, path);
	if (err == KEEL_OK) {
		err = wal_vfs_sync_dir(vfs, wal->dir);
	}
	if (err != KEEL_OK) {
		wal_vfs_close(f);
		return wal_fail_io(wal->errmsg, err, "wal: install segment %s", path);
	}
	*out = f;
	*generation_out = generation;
	return KEEL_OK;
}

/* Ends the current tail (synced) and starts a new segment at first_index,
 * superseding any entry at or after it; prev_term is the term of the entry
 * (or snapshot) at first_index - 1. Every failure is sticky. */
static enum keel_err start_segment(struct wal *wal, uint64_t first_index, uint64_t prev_term)
{
	if (!wal_grow((void **)&wal->segments, &wal->segment_capacity, wal->segment_count + 1,
		      sizeof(wal->segments[0])) ||
	    !wal_grow((void **)&wal->obsolete, &wal->obsolete_capacity,
		      wal->obsolete_count + wal->segment_count, sizeof(uint64_t))) {
		return wal_fail(wal->errmsg, KEEL_NOMEM, "wal: no memory for the segment list");
	}
	enum keel_err err = sync_active(wal);
	if (err != KEEL_OK) {
		return err;
	}
	if (wal->active != NULL) {
		wal_vfs_close(wal->active);
		wal->active = NULL;
	}
	uint64_t generation;
	struct wal_vfs_file *f;
	err = install_segment(wal, first_index, prev_term, &f, &generation);
	if (err != KEEL_OK) {
		return stick(wal, err);
	}
	segments_cut(wal, first_index);
	wal->segments[wal->segment_count++] = (struct wal_segment_info){
		.generation = generation,
		.first_index = first_index,
		.last_index = first_index - 1,
	};
	wal->active = f;
	wal->active_offset = WAL_SEGMENT_HEADER_SIZE;
	wal->flushed_offset = WAL_SEGMENT_HEADER_SIZE;
	wal->active_unsynced = false;
	wal->batch_first_index = 0;
	return KEEL_OK;
}

/* ---- append ---- */

static enum keel_err check_entries(struct wal *wal, const struct wal_entry *entries, size_t count,
				   size_t *term_changes)
{
	uint64_t term = wal->last_term;
	*term_changes = 0;
	for (size_t i = 0; i < count; i++) {
		const struct wal_entry *e = &entries[i];
		if (e->index != wal->last_index + 1 + i) {
			return wal_fail(wal->errmsg, KEEL_INVAL,
					"wal: append of index %llu, expected %llu",
					(unsigned long long)e->index,
					(unsigned long long)(wal->last_index + 1 + i));
		}
		if (e->term < term) {
			return wal_fail(wal->errmsg, KEEL_INVAL,
					"wal: entry %llu has term %llu, below the previous term %llu",
					(unsigned long long)e->index, (unsigned long long)e->term,
					(unsigned long long)term);
		}
		if (e->size > wal->config.max_entry_size_bytes) {
			return wal_fail(wal->errmsg, KEEL_TOOBIG,
					"wal: entry %llu is %u bytes, over max_entry_size_bytes %u",
					(unsigned long long)e->index, e->size,
					wal->config.max_entry_size_bytes);
		}
		if (e->size > 0 && e->data == NULL) {
			return wal_fail(wal->errmsg, KEEL_INVAL, "wal: entry %llu has no data",
					(unsigned long long)e->index);
		}
		*term_changes += e->term != term || (i == 0 && wal->term_count == 0);
		term = e->term;
	}
	return KEEL_OK;
}

/* A record larger than the buffer: header, payload and padding written
 * straight from the caller's memory. */
static enum keel_err write_record_direct(struct wal *wal, const struct wal_record *rec)
{
	enum keel_err err = flush_buffer(wal);
	if (err != KEEL_OK) {
		return err;
	}
	static const uint8_t zeros[WAL_RECORD_ALIGN];
	uint8_t header[WAL_RECORD_HEADER_SIZE];
	wal_record_encode_header(header, rec);
	uint64_t padding = wal_record_encoded_size(rec->size) - WAL_RECORD_HEADER_SIZE - rec->size;
	uint64_t at = wal->flushed_offset;
	err = wal_vfs_pwrite(wal->active, header, sizeof(header), at);
	if (err == KEEL_OK) {
		err = wal_vfs_pwrite(wal->active, rec->data, rec->size, at + sizeof(header));
	}
	if (err == KEEL_OK && padding > 0) {
		err = wal_vfs_pwrite(wal->active, zeros, (size_t)padding,
				     at + sizeof(header) + rec->size);
	}
	if (err != KEEL_OK) {
		char name[WAL_NAME_MAX];
		wal_segment_name(name, tail_segment(wal)->generation);
		wal_fail_io(wal->errmsg, err, "wal: write %s at offset %llu", name,
			    (unsigned long long)at);
		return stick(wal, err);
	}
	wal->flushed_offset += wal_record_encoded_size(rec->size);
	wal->active_unsynced = true;
	return KEEL_OK;
}

static enum keel_err append_one(struct wal *wal, const struct wal_entry *e)
{
	uint64_t size = wal_record_encoded_size(e->size);
	if (wal->active == NULL || wal->active_offset + size > wal->config.segment_size_bytes) {
		enum keel_err err = start_segment(wal, e->index, wal->last_term);
		if (err != KEEL_OK) {
			return err;
		}
	}
	if (wal->batch_first_index == 0) {
		wal->batch_first_index = e->index;
	}
	struct wal_record rec = {
		.generation = tail_segment(wal)->generation,
		.term = e->term,
		.index = e->index,
		.batch_offset = (uint32_t)(e->index - wal->batch_first_index),
		.type = e->type,
		.size = e->size,
		.data = e->data,
	};
	KEEL_ASSERT(e->index - wal->batch_first_index < UINT32_MAX);
	if (size > wal->buf_capacity) {
		enum keel_err err = write_record_direct(wal, &rec);
		if (err != KEEL_OK) {
			return err;
		}
	} else {
		if (size > wal->buf_capacity - wal->buf_used) {
			enum keel_err err = flush_buffer(wal);
			if (err != KEEL_OK) {
				return err;
			}
		}
		wal_record_encode(wal->buf + wal->buf_used, &rec);
		wal->buf_used += (size_t)size;
	}
	wal->active_offset += size;
	tail_segment(wal)->last_index = e->index;
	terms_note(wal, e->index, e->term);
	wal->last_index = e->index;
	wal->last_term = e->term;
	return KEEL_OK;
}

enum keel_err wal_append(struct wal *wal, const struct wal_entry *entries, size_t count)
{
	enum keel_err err = refuse_if_failed(wal);
	if (err != KEEL_OK) {
		return err;
	}
	size_t term_changes = 0;
	err = check_entries(wal, entries, count, &term_changes);
	if (err != KEEL_OK) {
		return err;
	}
	if (!wal_grow((void **)&wal->terms, &wal->term_capacity, wal->term_count + term_changes,
		      sizeof(wal->terms[0]))) {
		return wal_fail(wal->errmsg, KEEL_NOMEM, "wal: no memory for the term list");
	}
	for (size_t i = 0; i < count; i++) {
		err = append_one(wal, &entries[i]);
		if (err != KEEL_OK) {
			KEEL_ASSERT(wal_failed(wal) || err == KEEL_NOMEM);
			return stick(wal, err);
		}
	}
	return KEEL_OK;
}

enum keel_err wal_sync(struct wal *wal)
{
	enum keel_err err = refuse_if_failed(wal);
	if (err != KEEL_OK) {
		return err;
	}
	return sync_active(wal);
}

/* ---- truncation, reset, hard state ---- */

enum keel_err wal_truncate_suffix(struct wal *wal, uint64_t from_index)
{
	enum keel_err err = refuse_if_failed(wal);
	if (err != KEEL_OK) {
		return err;
	}
	if (from_index == wal->last_index + 1) {
		return KEEL_OK;
	}
	if (from_index > wal->last_index + 1 || from_index <= wal->snapshot_index) {
		return wal_fail(wal->errmsg, KEEL_INVAL,
				"wal: cannot truncate from index %llu (log holds %llu..%llu)",
				(unsigned long long)from_index,
				(unsigned long long)(wal->snapshot_index + 1),
				(unsigned long long)wal->last_index);
	}
	err = start_segment(wal, from_index, wal_term_at(wal, from_index - 1));
	if (err != KEEL_OK) {
		return err;
	}
	terms_truncate(wal, from_index);
	wal->last_index = from_index - 1;
	wal->last_term = wal_term_at(wal, wal->last_index);
	wal->durable_index = wal->last_index;
	return KEEL_OK;
}

/* Looks for a snapshot file: the newest one, and whether (index, term)
 * exists. */
static enum keel_err find_snapshots(struct wal *wal, uint64_t index, uint64_t term, bool *exact,
				    uint64_t *newest_index, uint64_t *newest_term)
{
	struct wal_snapshot_list *list = malloc(sizeof(*list));
	if (list == NULL) {
		return wal_fail(wal->errmsg, KEEL_NOMEM, "wal: no memory to list snapshots");
	}
	enum keel_err err = wal_snapshot_list(&wal->config, list, wal->errmsg);
	*exact = false;
	*newest_index = 0;
	*newest_term = 0;
	if (err == KEEL_OK && list->count > 0) {
		*newest_index = list->items[0].index;
		*newest_term = list->items[0].term;
		for (size_t i = 0; i < list->count; i++) {
			*exact |= list->items[i].index == index && list->items[i].term == term;
		}
	}
	free(list);
	return err;
}

enum keel_err wal_reset(struct wal *wal, uint64_t snapshot_index, uint64_t snapshot_term)
{
	enum keel_err err = refuse_if_failed(wal);
	if (err != KEEL_OK) {
		return err;
	}
	bool exact;
	uint64_t newest_index;
	uint64_t newest_term;
	err = find_snapshots(wal, snapshot_index, snapshot_term, &exact, &newest_index, &newest_term);
	if (err != KEEL_OK) {
		return err;
	}
	if (!exact || snapshot_index < wal->snapshot_index) {
		return wal_fail(wal->errmsg, KEEL_INVAL,
				"wal: reset to snapshot %llu (term %llu) that is not on disk or older "
				"than snapshot %llu",
				(unsigned long long)snapshot_index, (unsigned long long)snapshot_term,
				(unsigned long long)wal->snapshot_index);
	}
	err = start_segment(wal, snapshot_index + 1, snapshot_term);
	if (err != KEEL_OK) {
		return err;
	}
	wal->snapshot_index = snapshot_index;
	wal->snapshot_term = snapshot_term;
	wal->term_count = 0;
	wal->last_index = snapshot_index;
	wal->last_term = snapshot_term;
	wal->durable_index = snapshot_index;
	return wal_compact(wal, snapshot_index);
}

enum keel_err wal_save_hard_state(struct wal *wal, const struct wal_hard_state *hs)
{
	enum keel_err err = refuse_if_failed(wal);
	if (err != KEEL_OK) {
		return err;
	}
	if (hs->extra_size > WAL_HARD_STATE_MAX_EXTRA) {
		return wal_fail(wal->errmsg, KEEL_TOOBIG, "wal: hard state extra blob too large");
	}
	err = wal_hard_state_save(&wal->config, hs, wal->errmsg);
	if (err != KEEL_OK) {
		return stick(wal, err);
	}
	return KEEL_OK;
}

/* ---- compaction ---- */

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a;
	uint64_t y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Recycles seg-<generation> as a spare if the pool has room and the file
 * has the configured size, else deletes it. */
static enum keel_err retire_segment(struct wal *wal, uint64_t generation)
{
	struct wal_vfs *vfs = wal->config.vfs;
	char name[WAL_NAME_MAX];
	char path[WAL_VFS_PATH_MAX];
	wal_segment_name(name, generation);
	wal_path(path, wal->dir, name);
	bool recycle = false;
	if (wal->config.prealloc != WAL_PREALLOC_NONE &&
	    wal->spare_count < wal->config.spare_segments) {
		struct wal_vfs_file *f;
		uint64_t size = 0;
		if (wal_vfs_open(vfs, path, WAL_VFS_READ_ONLY, &f) == KEEL_OK) {
			recycle = wal_vfs_size(f, &size) == KEEL_OK &&
				  size == wal->config.segment_size_bytes;
			wal_vfs_close(f);
		}
	}
	enum keel_err err;
	if (recycle) {
		char spare[WAL_VFS_PATH_MAX];
		wal_spare_name(name, generation);
		wal_path(spare, wal->dir, name);
		err = wal_vfs_rename(vfs, path, spare);
		if (err == KEEL_OK) {
			wal->spares[wal->spare_count++] = generation;
		}
	} else {
		err = wal_vfs_unlink(vfs, path);
	}
	if (err != KEEL_OK) {
		return wal_fail_io(wal->errmsg, err, "wal: remove %s", path);
	}
	return KEEL_OK;
}

enum keel_err wal_compact(struct wal *wal, uint64_t upto_index)
{
	enum keel_err err = refuse_if_failed(wal);
	if (err != KEEL_OK) {
		return err;
	}
	bool exact;
	uint64_t newest_index;
	uint64_t newest_term;
	err = find_snapshots(wal, 0, 0, &exact, &newest_index, &newest_term);
	if (err != KEEL_OK) {
		return err;
	}
	if (newest_index < upto_index) {
		return wal_fail(wal->errmsg, KEEL_INVAL,
				"wal: compaction to index %llu without a durable snapshot at or "
				"after it (newest: %llu)",
				(unsigned long long)upto_index, (unsigned long long)newest_index);
	}
	if (newest_index > wal->snapshot_index && newest_index <= wal->last_index) {
		wal->snapshot_index = newest_index;
		wal->snapshot_term = newest_term;
		terms_trim_front(wal);
	}
	/* Victims: superseded files, then whole segments at the front (never
	 * the tail), removed in generation order. */
	size_t front = 0;
	while (front + 1 < wal->segment_count && wal->segments[front].last_index <= upto_index) {
		front++;
	}
	size_t victim_count = wal->obsolete_count + front;
	if (victim_count == 0) {
		return KEEL_OK;
	}
	uint64_t *victims = malloc(victim_count * sizeof(uint64_t));
	if (victims == NULL ||
	    !wal_grow((void **)&wal->spares, &wal->spare_capacity,
		      wal->spare_count + victim_count, sizeof(uint64_t))) {
		free(victims);
		return wal_fail(wal->errmsg, KEEL_NOMEM, "wal: no memory to compact");
	}
	if (wal->obsolete_count > 0) {
		memcpy(victims, wal->obsolete, wal->obsolete_count * sizeof(uint64_t));
	}
	for (size_t i = 0; i < front; i++) {
		victims[wal->obsolete_count + i] = wal->segments[i].generation;
	}
	qsort(victims, victim_count, sizeof(uint64_t), compare_u64);
	for (size_t i = 0; err == KEEL_OK && i < victim_count; i++) {
		err = retire_segment(wal, victims[i]);
	}
	free(victims);
	if (err == KEEL_OK) {
		err = wal_vfs_sync_dir(wal->config.vfs, wal->dir);
		if (err != KEEL_OK) {
			wal_fail_io(wal->errmsg, err, "wal: sync directory %s", wal->dir);
		}
	}
	if (err != KEEL_OK) {
		return stick(wal, err);
	}
	wal->obsolete_count = 0;
	if (front > 0) {
		memmove(wal->segments, wal->segments + front,
			(wal->segment_count - front) * sizeof(wal->segments[0]));
		wal->segment_count -= front;
	}
	return KEEL_OK;
}

/* ---- close ---- */

void wal_close(struct wal *wal)
{
	if (!wal->open) {
		return;
	}
	if (wal->active != NULL) {
		wal_vfs_close(wal->active);
		wal->active = NULL;
	}
	if (wal->preparing != NULL) { /* a partial spare: removed at the next open */
		wal_vfs_close(wal->preparing);
		wal->preparing = NULL;
	}
	free(wal->segments);
	free(wal->obsolete);
	free(wal->spares);
	free(wal->terms);
	free(wal->buf);
	wal->segments = NULL;
	wal->obsolete = NULL;
	wal->spares = NULL;
	wal->terms = NULL;
	wal->buf = NULL;
	wal->open = false;
}
