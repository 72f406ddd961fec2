/* recover.c — wal_open(): reading the WAL directory back after a crash.
 *
 * Steps, each refusing with KEEL_CORRUPT (file, offset, what to do) when
 * synced data is damaged or missing:
 *
 *  1. list the directory: segments seg-G, spares, snapshots, temp files;
 *     remove temp files and spares of the wrong size.
 *  2. load the hard state (missing = fresh; damaged = corrupt).
 *  3. load the newest snapshot whose header and payload verify; a damaged
 *     one is renamed to <name>.corrupt (kept for inspection, never used) and
 *     the next older one is tried. Whether the log still covers the gap is
 *     checked in step 5.
 *  4. read every segment header (damaged = corrupt: a segment name exists
 *     only after its header was synced) and build the chain: segments in
 *     generation order, each superseding every older one at or after its
 *     first index. The survivors, in index order, are the log; a segment
 *     that is followed in the chain is limited to end just before the next.
 *  5. scan each chain segment that reaches past the snapshot. A segment
 *     followed by another must have valid records up to its limit (else
 *     synced entries are missing); the last one may end CLEAN or TORN (cut
 *     there) but not CORRUPT. Entries after the snapshot must follow it
 *     without a gap, and each segment's prev_term must match the entry
 *     before it. The one legitimate mismatch: the log's entry at the
 *     snapshot index has another term than the snapshot (a crash between
 *     saving an installed snapshot and wal_reset) — then the entries after
 *     it belong to a discarded history and are dropped, as Raft would.
 *  6. check the hard state's term is not below the last entry's term.
 *  7. sync the chain segments and the directory, so that nothing recovery
 *     read from the page cache (after a process crash without a power loss)
 *     is newer than the disk; then install the in-memory state. Appends
 *     always start a new segment: a recovered tail is never written to
 *     again, so records past a cut torn tail can never line up with new
 *     ones.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "wal/internal.h"
#include "wal/wal.h"

#define RESTORE_HINT                                                                            \
	" Refusing to start: move the WAL directory aside and restart this server empty so it "  \
	"rejoins and copies the log from the leader (docs/storage-format.md)."

#define MAX_SEGMENT_FILE (4ull << 30)

struct rsegment {
	uint64_t generation;
	struct wal_segment_header header;
	uint64_t limit; /* UINT64_MAX when nothing follows it in the chain */
	bool in_chain;
	bool scanned;
	uint64_t last_index; /* after scanning (else the limit) */
	uint64_t last_term;  /* after scanning (else 0) */
};

struct recovery {
	struct wal *wal;
	struct wal_recovered *out;
	char *errmsg;
	bool dry_run; /* wal_check: decide, change nothing */

	uint64_t *generations; /* from seg-G names */
	size_t generation_count;
	size_t generation_capacity;
	char (*leftovers)[WAL_NAME_MAX]; /* temp files to remove */
	size_t leftover_count;
	size_t leftover_capacity;
	uint64_t max_generation;
	bool list_nomem;

	struct rsegment *segments; /* generation order */
	size_t *chain;             /* indexes into segments, in log order */
	size_t chain_count;

	uint64_t snapshot_index;
	uint64_t snapshot_term;

	/* Collecting entries after the snapshot. */
	const char *segment_name;
	uint64_t expected;   /* the next index the entry list needs */
	bool discarding;     /* after a conflict with the snapshot */
	size_t entry_capacity;
	uint64_t entry_bytes;
};

static void note(struct recovery *rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(struct recovery *rc, const char *fmt, ...)
{
	char *notes = rc->out->notes;
	size_t used = strlen(notes);
	if (used + 3 >= sizeof(rc->out->notes)) {
		return;
	}
	if (used > 0) {
		strcpy(notes + used, "; ");
		used += 2;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(notes + used, sizeof(rc->out->notes) - used, fmt, ap);
	va_end(ap);
}

/* ---- 1. the directory ---- */

static void list_entry(void *arg, const char *name)
{
	struct recovery *rc = arg;
	struct wal *wal = rc->wal;
	uint64_t a;
	uint64_t b;
	enum wal_file_kind kind = wal_parse_file_name(name, &a, &b);
	bool ok = true;
	switch (kind) {
	case WAL_FILE_SEGMENT:
		ok = wal_grow((void **)&rc->generations, &rc->generation_capacity,
			      rc->generation_count + 1, sizeof(uint64_t));
		if (ok) {
			rc->generations[rc->generation_count++] = a;
		}
		rc->max_generation = KEEL_MAX(rc->max_generation, a);
		break;
	case WAL_FILE_SPARE:
		ok = wal_grow((void **)&wal->spares, &wal->spare_capacity, wal->spare_count + 1,
			      sizeof(uint64_t));
		if (ok) {
			wal->spares[wal->spare_count++] = a;
		}
		rc->max_generation = KEEL_MAX(rc->max_generation, a);
		break;
	case WAL_FILE_SNAPSHOT_TMP:
	case WAL_FILE_HARD_STATE_TMP:
		ok = wal_grow((void **)&rc->leftovers, &rc->leftover_capacity,
			      rc->leftover_count + 1, WAL_NAME_MAX);
		if (ok) {
			snprintf(rc->leftovers[rc->leftover_count++], WAL_NAME_MAX, "%s", name);
		}
		break;
	case WAL_FILE_SNAPSHOT:
	case WAL_FILE_HARD_STATE:
	case WAL_FILE_OTHER:
		break;
	}
	rc->list_nomem |= !ok;
}

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a;
	uint64_t y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Keeps the spares that can be reused as they are; removes the rest. */
static enum keel_err check_spares(struct recovery *rc)
{
	struct wal *wal = rc->wal;
	size_t kept = 0;
	for (size_t i = 0; i < wal->spare_count; i++) {
		char name[WAL_NAME_MAX];
		char path[WAL_VFS_PATH_MAX];
		wal_spare_name(name, wal->spares[i]);
		wal_path(path, wal->dir, name);
		bool keep = false;
		if (wal->config.prealloc != WAL_PREALLOC_NONE && kept < wal->config.spare_segments) {
			struct wal_vfs_file *f;
			uint64_t size = 0;
			if (wal_vfs_open(wal->config.vfs, path, WAL_VFS_READ_ONLY, &f) == KEEL_OK) {
				keep = wal_vfs_size(f, &size) == KEEL_OK &&
				       size == wal->config.segment_size_bytes;
				wal_vfs_close(f);
			}
		}
		if (keep) {
			wal->spares[kept++] = wal->spares[i];
			continue;
		}
		if (rc->dry_run) {
			continue;
		}
		enum keel_err err = wal_vfs_unlink(wal->config.vfs, path);
		if (err != KEEL_OK) {
			return wal_fail_io(rc->errmsg, err, "wal: remove %s", path);
		}
	}
	wal->spare_count = kept;
	if (kept > 1) {
		qsort(wal->spares, wal->spare_count, sizeof(uint64_t), compare_u64);
	}
	return KEEL_OK;
}

static enum keel_err scan_directory(struct recovery *rc)
{
	struct wal *wal = rc->wal;
	enum keel_err err = wal_vfs_list(wal->config.vfs, wal->dir, list_entry, rc);
	if (err != KEEL_OK) {
		return wal_fail_io(rc->errmsg, err, "wal: list %s", wal->dir);
	}
	if (rc->list_nomem) {
		return wal_fail(rc->errmsg, KEEL_NOMEM, "wal: no memory to list %s", wal->dir);
	}
	for (size_t i = 0; !rc->dry_run && i < rc->leftover_count; i++) {
		char path[WAL_VFS_PATH_MAX];
		wal_path(path, wal->dir, rc->leftovers[i]);
		err = wal_vfs_unlink(wal->config.vfs, path);
		if (err != KEEL_OK) {
			return wal_fail_io(rc->errmsg, err, "wal: remove leftover %s", path);
		}
	}
	if (rc->leftover_count > 0) {
		note(rc, "%s %zu unfinished temp file(s)", rc->dry_run ? "would remove" : "removed",
		     rc->leftover_count);
	}
	if (rc->generation_count > 1) {
		qsort(rc->generations, rc->generation_count, sizeof(uint64_t), compare_u64);
	}
	return check_spares(rc);
}

/* ---- 3. the snapshot ---- */

static enum keel_err load_snapshot(struct recovery *rc)
{
	struct wal *wal = rc->wal;
	struct wal_snapshot_list *list = malloc(sizeof(*list));
	if (list == NULL) {
		return wal_fail(rc->errmsg, KEEL_NOMEM, "wal: no memory to list snapshots");
	}
	enum keel_err err = wal_snapshot_list(&wal->config, list, rc->errmsg);
	for (size_t i = 0; err == KEEL_OK && i < list->count; i++) {
		char why[WAL_ERRMSG_SIZE];
		struct wal_snapshot_meta meta;
		err = wal_snapshot_verify(&wal->config, list->items[i].name, &rc->out->arena, &meta,
					  why);
		if (err == KEEL_OK && (meta.index != list->items[i].index ||
				       meta.term != list->items[i].term)) {
			snprintf(why, sizeof(why), "wal: snapshot %s: header says index %" PRIu64
				 " term %" PRIu64, list->items[i].name, meta.index, meta.term);
			err = KEEL_CORRUPT;
		}
		if (err == KEEL_OK) {
			rc->out->has_snapshot = true;
			rc->out->snapshot = meta;
			rc->snapshot_index = meta.index;
			rc->snapshot_term = meta.term;
			break;
		}
		if (err != KEEL_CORRUPT) {
			memcpy(rc->errmsg, why, WAL_ERRMSG_SIZE);
			break;
		}
		/* Damaged: set it aside so that nothing ever counts on it. */
		if (rc->dry_run) {
			note(rc, "snapshot %s is damaged (%s)", list->items[i].name, why);
			err = KEEL_OK;
			continue;
		}
		char from[WAL_VFS_PATH_MAX];
		char to[WAL_VFS_PATH_MAX];
		char corrupt_name[WAL_NAME_MAX + 8];
		snprintf(corrupt_name, sizeof(corrupt_name), "%s.corrupt", list->items[i].name);
		wal_path(from, wal->dir, list->items[i].name);
		wal_path(to, wal->dir, corrupt_name);
		err = wal_vfs_rename(wal->config.vfs, from, to);
		if (err != KEEL_OK) {
			err = wal_fail_io(rc->errmsg, err, "wal: set aside damaged snapshot %s", from);
			break;
		}
		note(rc, "snapshot %s is damaged (%s), renamed to %s", list->items[i].name, why,
		     corrupt_name);
	}
	free(list);
	return err;
}

/* ---- 4. segment headers and the chain ---- */

static enum keel_err read_header(struct recovery *rc, uint64_t generation,
				 struct wal_segment_header *out)
{
	struct wal *wal = rc->wal;
	char name[WAL_NAME_MAX];
	char path[WAL_VFS_PATH_MAX];
	wal_segment_name(name, generation);
	wal_path(path, wal->dir, name);
	char why[128] = "";
	enum keel_err err = KEEL_OK;
	for (int attempt = 0; attempt < 2; attempt++) { /* a second read rides out a flipped bit */
		struct wal_vfs_file *f;
		err = wal_vfs_open(wal->config.vfs, path, WAL_VFS_READ_ONLY, &f);
		if (err != KEEL_OK) {
			return wal_fail_io(rc->errmsg, err, "wal: open %s", path);
		}
		uint8_t buf[WAL_SEGMENT_HEADER_SIZE];
		size_t n = 0;
		err = wal_vfs_pread(f, buf, sizeof(buf), 0, &n);
		wal_vfs_close(f);
		if (err != KEEL_OK) {
			return wal_fail_io(rc->errmsg, err, "wal: read %s", path);
		}
		err = wal_segment_header_decode(buf, n, out, why, sizeof(why));
		if (err == KEEL_OK && out->generation != generation) {
			snprintf(why, sizeof(why), "header has generation %" PRIu64 ", the name %" PRIu64,
				 out->generation, generation);
			err = KEEL_CORRUPT;
		}
		if (err == KEEL_OK || err == KEEL_UNSUPPORTED) {
			break;
		}
	}
	if (err == KEEL_UNSUPPORTED) {
		return wal_fail(rc->errmsg, err, "wal: %s: %s", path, why);
	}
	if (err != KEEL_OK) {
		return wal_fail(rc->errmsg, KEEL_CORRUPT,
				"wal: segment %s at offset 0: %s (a segment is named only after its "
				"header is synced, so this is damage)." RESTORE_HINT,
				path, why);
	}
	return KEEL_OK;
}

static enum keel_err build_chain(struct recovery *rc)
{
	size_t count = rc->generation_count;
	rc->segments = calloc(count > 0 ? count : 1, sizeof(rc->segments[0]));
	rc->chain = calloc(count > 0 ? count : 1, sizeof(size_t));
	if (rc->segments == NULL || rc->chain == NULL) {
		return wal_fail(rc->errmsg, KEEL_NOMEM, "wal: no memory for %zu segments", count);
	}
	for (size_t i = 0; i < count; i++) {
		struct rsegment *s = &rc->segments[i];
		s->generation = rc->generations[i];
		enum keel_err err = read_header(rc, s->generation, &s->header);
		if (err != KEEL_OK) {
			return err;
		}
		s->limit = UINT64_MAX;
		/* A newer generation supersedes everything at or after its start. */
		while (rc->chain_count > 0 &&
		       rc->segments[rc->chain[rc->chain_count - 1]].header.first_index >=
			       s->header.first_index) {
			rc->segments[rc->chain[--rc->chain_count]].in_chain = false;
		}
		if (rc->chain_count > 0) {
			struct rsegment *prev = &rc->segments[rc->chain[rc->chain_count - 1]];
			prev->limit = KEEL_MIN(prev->limit, s->header.first_index - 1);
		}
		s->in_chain = true;
		rc->chain[rc->chain_count++] = i;
	}
	return KEEL_OK;
}

/* ---- 5. scanning ---- */

static enum keel_err collect_entry(void *arg, const struct wal_record *rec, uint64_t offset)
{
	struct recovery *rc = arg;
	struct wal_recovered *out = rc->out;
	if (rec->index < rc->snapshot_index) {
		return KEEL_OK;
	}
	if (rec->index == rc->snapshot_index) {
		rc->discarding = rec->term != rc->snapshot_term;
		if (rc->discarding) {
			note(rc, "the log's entry %" PRIu64 " has term %" PRIu64 " but the snapshot "
				 "term %" PRIu64 ": dropped the entries after it (an installed "
				 "snapshot replaces them)",
			     rec->index, rec->term, rc->snapshot_term);
		}
		return KEEL_OK;
	}
	if (rc->discarding) {
		return KEEL_OK;
	}
	if (rec->index != rc->expected) {
		return wal_fail(rc->errmsg, KEEL_CORRUPT,
				"wal: segment %s offset %" PRIu64 " holds entry %" PRIu64
				" but the log needs %" PRIu64 " next: entries are missing "
				"(a segment or snapshot may have been removed)." RESTORE_HINT,
				rc->segment_name, offset, rec->index, rc->expected);
	}
	uint64_t cost = rec->size + sizeof(struct wal_entry);
	if (cost > rc->wal->config.max_recovery_bytes - rc->entry_bytes) {
		return wal_fail(rc->errmsg, KEEL_TOOBIG,
				"wal: the entries after the snapshot take more than "
				"max_recovery_bytes (%llu); raise it or snapshot more often",
				(unsigned long long)rc->wal->config.max_recovery_bytes);
	}
	if (!wal_grow((void **)&out->entries, &rc->entry_capacity, out->entry_count + 1,
		      sizeof(struct wal_entry))) {
		return wal_fail(rc->errmsg, KEEL_NOMEM, "wal: no memory for recovered entries");
	}
	const uint8_t *data = NULL;
	if (rec->size > 0) {
		data = keel_arena_dup(&out->arena, rec->data, rec->size);
		if (data == NULL) {
			return wal_fail(rc->errmsg, KEEL_NOMEM, "wal: no memory for recovered entries");
		}
	}
	out->entries[out->entry_count++] = (struct wal_entry){
		.index = rec->index,
		.term = rec->term,
		.type = rec->type,
		.size = rec->size,
		.data = data,
	};
	rc->entry_bytes += cost;
	rc->expected++;
	return KEEL_OK;
}

/* Believed on one read: the limit reached, or the last segment's records
 * ending at zeros (a flipped bit cannot make a written record header all
 * zeros). A clean end at a record of another generation is read again: a
 * bit flipped in transit in the last record's generation field makes a
 * synced, acknowledged entry look like a stale one, and trusting that
 * read would silently drop it. */
static bool scan_good(const struct rsegment *s, const struct wal_scan_result *r)
{
	return r->end == WAL_SCAN_LIMIT ||
	       (s->limit == UINT64_MAX && r->end == WAL_SCAN_CLEAN && r->ends_in_zeros);
}

static bool same_verdict(const struct wal_scan_result *a, const struct wal_scan_result *b)
{
	return a->end == b->end && a->bad_offset == b->bad_offset &&
	       a->record_count == b->record_count && a->last_index == b->last_index;
}

/* Reads and scans one segment; reads it again before believing damage, or
 * an end at a stale record (a bit flipped on the way from the disk is gone
 * then). A verdict counts
 * once two reads agree: a torn tail, damaged for real, is read twice —
 * and a flip on the second read must not turn it into corruption. */
static enum keel_err scan_one(struct recovery *rc, struct rsegment *s, const char *path,
			      struct wal_scan_result *result)
{
	size_t saved_count = rc->out->entry_count;
	uint64_t saved_bytes = rc->entry_bytes;
	uint64_t saved_expected = rc->expected;
	bool saved_discarding = rc->discarding;
	enum keel_err err = KEEL_OK;
	struct wal_scan_result seen[2];
	for (int attempt = 0; attempt < 3; attempt++) {
		rc->out->entry_count = saved_count;
		rc->entry_bytes = saved_bytes;
		rc->expected = saved_expected;
		rc->discarding = saved_discarding;
		uint8_t *data = NULL;
		size_t size = 0;
		err = wal_read_whole(rc->wal->config.vfs, path, MAX_SEGMENT_FILE, &data, &size,
				     rc->errmsg);
		if (err != KEEL_OK) {
			return err;
		}
		if (size < WAL_SEGMENT_HEADER_SIZE) {
			free(data);
			return wal_fail(rc->errmsg, KEEL_CORRUPT, "wal: segment %s shrank to %zu bytes",
					path, size);
		}
		err = wal_scan_segment(data, size, &s->header, s->header.prev_term, s->limit,
				       rc->wal->config.max_entry_size_bytes, collect_entry, rc,
				       result);
		free(data);
		if (err != KEEL_OK || scan_good(s, result)) {
			break;
		}
		bool agreed = false;
		for (int i = 0; i < attempt && i < 2; i++) {
			agreed |= same_verdict(&seen[i], result);
		}
		if (agreed || attempt == 2) {
			break;
		}
		seen[attempt] = *result;
	}
	return err;
}

/* Before a segment's records: does it continue the log built so far? */
static enum keel_err check_boundary(struct recovery *rc, const struct rsegment *s,
				    uint64_t chain_last_index, uint64_t chain_last_term,
				    const char *path)
{
	uint64_t first = s->header.first_index;
	if (rc->out->has_snapshot && first == rc->snapshot_index + 1) {
		/* Follows the snapshot directly: it belongs to the snapshot's
		 * history exactly when it says the entry before it has the
		 * snapshot's term (a segment started by wal_reset does). */
		bool was = rc->discarding;
		rc->discarding = s->header.prev_term != rc->snapshot_term;
		if (rc->discarding && !was) {
			note(rc, "segment %s continues term %" PRIu64 " after index %" PRIu64
				 " but the snapshot has term %" PRIu64 ": dropped its entries",
			     path, s->header.prev_term, rc->snapshot_index, rc->snapshot_term);
		}
		return KEEL_OK;
	}
	if (first <= rc->snapshot_index || rc->discarding) {
		return KEEL_OK; /* its entry at the snapshot index decides */
	}
	if (chain_last_index + 1 != first) {
		return wal_fail(rc->errmsg, KEEL_CORRUPT,
				"wal: segment %s starts at index %" PRIu64 " but the log before it "
				"ends at %" PRIu64 " (snapshot %" PRIu64 "): segments are missing."
				RESTORE_HINT,
				path, first, chain_last_index, rc->snapshot_index);
	}
	if (s->header.prev_term != chain_last_term) {
		return wal_fail(rc->errmsg, KEEL_CORRUPT,
				"wal: segment %s follows entry %" PRIu64 " of term %" PRIu64
				" but was started after term %" PRIu64 ": the log does not match "
				"itself." RESTORE_HINT,
				path, chain_last_index, chain_last_term, s->header.prev_term);
	}
	return KEEL_OK;
}

static enum keel_err scan_chain(struct recovery *rc)
{
	struct wal *wal = rc->wal;
	rc->expected = rc->snapshot_index + 1;
	uint64_t chain_last_index = rc->snapshot_index;
	uint64_t chain_last_term = rc->snapshot_term;
	for (size_t c = 0; c < rc->chain_count; c++) {
		struct rsegment *s = &rc->segments[rc->chain[c]];
		char name[WAL_NAME_MAX];
		char path[WAL_VFS_PATH_MAX];
		wal_segment_name(name, s->generation);
		wal_path(path, wal->dir, name);
		if (s->limit != UINT64_MAX && s->limit <= rc->snapshot_index) {
			s->last_index = s->limit; /* wholly covered by the snapshot */
			continue;
		}
		enum keel_err err = check_boundary(rc, s, chain_last_index, chain_last_term, name);
		if (err != KEEL_OK) {
			return err;
		}
		rc->segment_name = name;
		struct wal_scan_result r;
		err = scan_one(rc, s, path, &r);
		if (err != KEEL_OK) {
			return err;
		}
		s->scanned = true;
		s->last_index = r.last_index;
		s->last_term = r.record_count > 0 ? r.last_term : s->header.prev_term;
		if (r.end == WAL_SCAN_CORRUPT) {
			return wal_fail(rc->errmsg, KEEL_CORRUPT,
					"wal: segment %s is damaged at offset %" PRIu64 ": %s." RESTORE_HINT,
					path, r.bad_offset, r.reason);
		}
		if (s->limit != UINT64_MAX && r.end != WAL_SCAN_LIMIT) {
			return wal_fail(rc->errmsg, KEEL_CORRUPT,
					"wal: segment %s ends at index %" PRIu64 " (offset %" PRIu64
					": %s) but the next segment starts at %" PRIu64
					": synced entries are missing." RESTORE_HINT,
					path, r.last_index, r.bad_offset, r.reason, s->limit + 1);
		}
		if (r.end == WAL_SCAN_TORN) {
			note(rc, "%s: cut a torn tail at offset %" PRIu64 " after index %" PRIu64
				 " (%s)",
			     name, r.bad_offset, r.last_index, r.reason);
		}
		chain_last_index = s->last_index;
		chain_last_term = s->last_term;
	}
	return KEEL_OK;
}

/* ---- 6. consistency with the hard state ---- */

static enum keel_err check_terms(struct recovery *rc)
{
	struct wal_recovered *out = rc->out;
	if (out->entry_count > 0 && out->entries[0].term < rc->snapshot_term) {
		return wal_fail(rc->errmsg, KEEL_CORRUPT,
				"wal: entry %" PRIu64 " has term %" PRIu64 ", below the snapshot's "
				"term %" PRIu64 "." RESTORE_HINT,
				out->entries[0].index, out->entries[0].term, rc->snapshot_term);
	}
	out->last_index = rc->snapshot_index;
	out->last_term = rc->snapshot_term;
	if (out->entry_count > 0) {
		out->last_index = out->entries[out->entry_count - 1].index;
		out->last_term = out->entries[out->entry_count - 1].term;
	}
	if (out->last_term > out->hard_state.term) {
		return wal_fail(rc->errmsg, KEEL_CORRUPT,
				"wal: the hard state (%s) has term %" PRIu64 " but the log holds "
				"term %" PRIu64 " at index %" PRIu64 ": the hard state is older than "
				"the log." RESTORE_HINT,
				out->has_hard_state ? WAL_HARD_STATE_NAME : "missing",
				out->hard_state.term, out->last_term, out->last_index);
	}
	return KEEL_OK;
}

/* ---- 7. sync and install ---- */

static enum keel_err sync_recovered(struct recovery *rc)
{
	struct wal *wal = rc->wal;
	for (size_t c = 0; c < rc->chain_count; c++) {
		const struct rsegment *s = &rc->segments[rc->chain[c]];
		if (!s->scanned) {
			continue;
		}
		char name[WAL_NAME_MAX];
		char path[WAL_VFS_PATH_MAX];
		wal_segment_name(name, s->generation);
		wal_path(path, wal->dir, name);
		struct wal_vfs_file *f;
		enum keel_err err = wal_vfs_open(wal->config.vfs, path, 0, &f);
		if (err == KEEL_OK) {
			err = wal_vfs_datasync(f);
			wal_vfs_close(f);
		}
		if (err != KEEL_OK) {
			return wal_fail_io(rc->errmsg, err, "wal: sync %s", path);
		}
	}
	enum keel_err err = wal_vfs_sync_dir(wal->config.vfs, wal->dir);
	if (err != KEEL_OK) {
		return wal_fail_io(rc->errmsg, err, "wal: sync directory %s", wal->dir);
	}
	return KEEL_OK;
}

static enum keel_err install_state(struct recovery *rc)
{
	struct wal *wal = rc->wal;
	struct wal_recovered *out = rc->out;
	size_t obsolete = rc->generation_count - rc->chain_count;
	if (!wal_grow((void **)&wal->segments, &wal->segment_capacity, rc->chain_count + 1,
		      sizeof(wal->segments[0])) ||
	    !wal_grow((void **)&wal->obsolete, &wal->obsolete_capacity, obsolete + 1,
		      sizeof(uint64_t)) ||
	    !wal_grow((void **)&wal->terms, &wal->term_capacity, out->entry_count + 1,
		      sizeof(wal->terms[0]))) {
		return wal_fail(rc->errmsg, KEEL_NOMEM, "wal: no memory for the segment list");
	}
	for (size_t i = 0; i < rc->generation_count; i++) {
		const struct rsegment *s = &rc->segments[i];
		if (!s->in_chain) {
			wal->obsolete[wal->obsolete_count++] = s->generation;
		}
	}
	for (size_t c = 0; c < rc->chain_count; c++) {
		const struct rsegment *s = &rc->segments[rc->chain[c]];
		wal->segments[wal->segment_count++] = (struct wal_segment_info){
			.generation = s->generation,
			.first_index = s->header.first_index,
			.last_index = s->last_index,
		};
		rc->max_generation = KEEL_MAX(rc->max_generation, s->header.generation);
	}
	for (size_t i = 0; i < out->entry_count; i++) {
		const struct wal_entry *e = &out->entries[i];
		if (wal->term_count == 0 || wal->terms[wal->term_count - 1].term != e->term) {
			wal->terms[wal->term_count++] =
				(struct wal_term_run){.first_index = e->index, .term = e->term};
		}
	}
	wal->next_generation = rc->max_generation + 1;
	wal->snapshot_index = rc->snapshot_index;
	wal->snapshot_term = rc->snapshot_term;
	wal->last_index = out->last_index;
	wal->last_term = out->last_term;
	wal->durable_index = out->last_index;
	return KEEL_OK;
}

/* ---- wal_open ---- */

static void free_state(struct wal *wal)
{
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
}

void wal_recovered_free(struct wal_recovered *r)
{
	free(r->entries);
	r->entries = NULL;
	r->entry_count = 0;
	keel_arena_close(&r->arena);
}

static enum keel_err recover(struct recovery *rc)
{
	struct wal *wal = rc->wal;
	enum keel_err err = KEEL_OK;
	if (!rc->dry_run) {
		err = wal_vfs_mkdir(wal->config.vfs, wal->dir);
		if (err != KEEL_OK && err != KEEL_EXIST) {
			return wal_fail_io(rc->errmsg, err, "wal: create directory %s", wal->dir);
		}
	}
	err = scan_directory(rc);
	if (err == KEEL_OK) {
		err = wal_hard_state_load(&wal->config, &rc->out->arena, &rc->out->hard_state,
					  &rc->out->has_hard_state, rc->errmsg);
	}
	if (err == KEEL_OK) {
		err = load_snapshot(rc);
	}
	if (err == KEEL_OK) {
		err = build_chain(rc);
	}
	if (err == KEEL_OK) {
		err = scan_chain(rc);
	}
	if (err == KEEL_OK) {
		err = check_terms(rc);
	}
	if (err == KEEL_OK && !rc->dry_run) {
		err = sync_recovered(rc);
	}
	if (err == KEEL_OK) {
		err = install_state(rc);
	}
	return err;
}

static enum keel_err open_or_check(struct wal *wal, const struct wal_config *config,
				   struct wal_recovered *out, bool dry_run)
{
	memset(wal, 0, sizeof(*wal));
	memset(out, 0, sizeof(*out));
	keel_arena_init(&out->arena, 64 * 1024);
	enum keel_err err = wal_config_check(config, wal->errmsg);
	if (err != KEEL_OK) {
		return err;
	}
	wal->config = *config;
	snprintf(wal->dir, sizeof(wal->dir), "%s", config->dir);
	wal->config.dir = wal->dir;
	wal->buf_capacity = config->write_buffer_bytes;
	wal->buf = malloc(wal->buf_capacity);
	if (wal->buf == NULL) {
		return wal_fail(wal->errmsg, KEEL_NOMEM, "wal: no memory for the write buffer");
	}
	struct recovery rc = {.wal = wal, .out = out, .errmsg = wal->errmsg, .dry_run = dry_run};
	err = recover(&rc);
	free(rc.generations);
	free(rc.leftovers);
	free(rc.segments);
	free(rc.chain);
	if (err != KEEL_OK || dry_run) {
		free_state(wal);
	}
	if (err != KEEL_OK) {
		wal_recovered_free(out);
		return err;
	}
	wal->open = !dry_run;
	return KEEL_OK;
}

enum keel_err wal_open(struct wal *wal, const struct wal_config *config,
		       struct wal_recovered *out)
{
	return open_or_check(wal, config, out, false);
}

enum keel_err wal_check(const struct wal_config *config, struct wal_recovered *out,
			char errmsg[WAL_ERRMSG_SIZE])
{
	struct wal *wal = malloc(sizeof(*wal));
	if (wal == NULL) {
		memset(out, 0, sizeof(*out));
		return wal_fail(errmsg, KEEL_NOMEM, "wal: no memory");
	}
	enum keel_err err = open_or_check(wal, config, out, true);
	memcpy(errmsg, wal->errmsg, WAL_ERRMSG_SIZE);
	free(wal);
	return err;
}
