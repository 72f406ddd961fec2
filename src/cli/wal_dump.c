/*
 * wal_dump.c — `keel wal dump --data-dir DIR [--no-records]`: what is in a
 * WAL directory, for operators.
 *
 * Prints the hard state, every snapshot file (checked), every segment file
 * in generation order with its header, each record (index, term, type,
 * size, offset) and how the segment ends (clean, torn, corrupt, or cut by a
 * newer segment), the spares, a summary, and finally the verdict recovery
 * would reach (wal_check: the same decision as a server start, without
 * changing anything). Reads only; safe on a stopped server's directory.
 *
 * Exit status: 0 when recovery would succeed, 1 when it would refuse, 2 on
 * a usage or I/O error.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/assert.h"
#include "cli/cli.h"
#include "wal/format.h"
#include "wal/hard_state.h"
#include "wal/snapshot.h"
#include "wal/wal.h"

#define MAX_FILES 4096

struct listing {
	uint64_t segments[MAX_FILES];
	size_t segment_count;
	uint64_t spares[MAX_FILES];
	size_t spare_count;
	size_t other_count;
	bool truncated;
};

static void list_one(void *arg, const char *name)
{
	struct listing *l = arg;
	uint64_t a;
	uint64_t b;
	switch (wal_parse_file_name(name, &a, &b)) {
	case WAL_FILE_SEGMENT:
		if (l->segment_count < MAX_FILES) {
			l->segments[l->segment_count++] = a;
		} else {
			l->truncated = true;
		}
		break;
	case WAL_FILE_SPARE:
		if (l->spare_count < MAX_FILES) {
			l->spares[l->spare_count++] = a;
		}
		break;
	default:
		l->other_count++;
		break;
	}
}

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a;
	uint64_t y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint8_t *read_file(struct wal_vfs *vfs, const char *path, size_t *size)
{
	struct wal_vfs_file *f;
	if (wal_vfs_open(vfs, path, WAL_VFS_READ_ONLY, &f) != KEEL_OK) {
		return NULL;
	}
	uint64_t file_size = 0;
	uint8_t *data = NULL;
	if (wal_vfs_size(f, &file_size) == KEEL_OK && file_size <= (4ull << 30)) {
		data = malloc(file_size > 0 ? (size_t)file_size : 1);
		if (data != NULL && wal_vfs_pread_exact(f, data, (size_t)file_size, 0) != KEEL_OK) {
			free(data);
			data = NULL;
		}
	}
	wal_vfs_close(f);
	*size = (size_t)file_size;
	return data;
}

struct dump_ctx {
	bool records;
	uint64_t limit;
	uint64_t superseded;
};

static enum keel_err print_record(void *arg, const struct wal_record *rec, uint64_t offset)
{
	struct dump_ctx *ctx = arg;
	bool beyond = rec->index > ctx->limit;
	ctx->superseded += beyond;
	if (ctx->records) {
		printf("    index %-10" PRIu64 " term %-6" PRIu64 " type %-3u size %-8u offset %" PRIu64
		       "%s\n",
		       rec->index, rec->term, rec->type, rec->size, offset,
		       beyond ? "  (superseded by a newer segment)" : "");
	}
	return KEEL_OK;
}

struct totals {
	uint64_t records;
	uint64_t bytes;
	uint64_t damaged;
};

static void dump_segment(struct wal_vfs *vfs, const char *dir, uint64_t generation,
			 uint64_t limit, bool records, struct totals *totals)
{
	char name[WAL_NAME_MAX];
	char path[WAL_VFS_PATH_MAX];
	wal_segment_name(name, generation);
	if (wal_vfs_join(path, sizeof(path), dir, name) != KEEL_OK) {
		return;
	}
	size_t size = 0;
	uint8_t *data = read_file(vfs, path, &size);
	if (data == NULL) {
		printf("  %s: cannot read: %s\n", name, wal_vfs_last_error());
		totals->damaged++;
		return;
	}
	struct wal_segment_header h;
	char why[128];
	if (wal_segment_header_decode(data, size, &h, why, sizeof(why)) != KEEL_OK) {
		printf("  %s: DAMAGED HEADER at offset 0: %s\n", name, why);
		totals->damaged++;
		free(data);
		return;
	}
	printf("  %s  generation %" PRIu64 "  first index %" PRIu64 "  prev term %" PRIu64
	       "  file %zu bytes\n",
	       name, h.generation, h.first_index, h.prev_term, size);
	struct dump_ctx ctx = {.records = records, .limit = limit};
	struct wal_scan_result r;
	/* Scan without a limit to show everything, and mark what is cut. */
	(void)wal_scan_segment(data, size, &h, h.prev_term, UINT64_MAX, UINT32_MAX, print_record,
			       &ctx, &r);
	const char *state = r.end == WAL_SCAN_CORRUPT ? "CORRUPT" : wal_scan_end_name(r.end);
	if (r.end == WAL_SCAN_CLEAN) {
		printf("    end: clean at offset %" PRIu64 "\n", r.end_offset);
	} else {
		printf("    end: %s at offset %" PRIu64 ": %s\n", state, r.bad_offset, r.reason);
	}
	if (limit != UINT64_MAX) {
		printf("    a newer segment takes over from index %" PRIu64 "%s\n", limit + 1,
		       r.last_index < limit ? " (THIS SEGMENT ENDS BEFORE THAT)" : "");
	}
	totals->records += r.record_count - ctx.superseded;
	totals->bytes += r.end_offset - WAL_SEGMENT_HEADER_SIZE;
	totals->damaged += r.end == WAL_SCAN_CORRUPT;
	printf("    %" PRIu64 " records (%" PRIu64 "..%" PRIu64 "), %" PRIu64 " superseded\n",
	       r.record_count, h.first_index, r.last_index, ctx.superseded);
	free(data);
}

/* The chain limit of each segment: a newer generation starting at or before
 * an older one's range cuts it (as recovery does). */
static void chain_limits(struct wal_vfs *vfs, const char *dir, const struct listing *l,
			 uint64_t *limits)
{
	uint64_t *firsts = calloc(l->segment_count + 1, sizeof(uint64_t));
	KEEL_ASSERT(firsts != NULL);
	for (size_t i = 0; i < l->segment_count; i++) {
		limits[i] = UINT64_MAX;
		char name[WAL_NAME_MAX];
		char path[WAL_VFS_PATH_MAX];
		wal_segment_name(name, l->segments[i]);
		struct wal_vfs_file *f;
		uint8_t buf[WAL_SEGMENT_HEADER_SIZE];
		struct wal_segment_header h = {0};
		if (wal_vfs_join(path, sizeof(path), dir, name) == KEEL_OK &&
		    wal_vfs_open(vfs, path, WAL_VFS_READ_ONLY, &f) == KEEL_OK) {
			if (wal_vfs_pread_exact(f, buf, sizeof(buf), 0) != KEEL_OK ||
			    wal_segment_header_decode(buf, sizeof(buf), &h, NULL, 0) != KEEL_OK) {
				h.first_index = 0;
			}
			wal_vfs_close(f);
		}
		firsts[i] = h.first_index;
		for (size_t j = 0; j < i; j++) { /* older generations */
			if (firsts[i] > 0 && firsts[j] > 0 && firsts[j] < firsts[i]) {
				limits[j] = KEEL_MIN(limits[j], firsts[i] - 1);
			} else if (firsts[i] > 0 && firsts[j] >= firsts[i]) {
				limits[j] = 0; /* wholly superseded */
			}
		}
	}
	free(firsts);
}

static void dump_hard_state(const struct wal_config *config)
{
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct wal_hard_state hs;
	bool found;
	char errmsg[WAL_ERRMSG_SIZE];
	if (wal_hard_state_load(config, &arena, &hs, &found, errmsg) != KEEL_OK) {
		printf("hard state: DAMAGED: %s\n", errmsg);
	} else if (!found) {
		printf("hard state: none (term 0, no vote)\n");
	} else {
		printf("hard state: term %" PRIu64 ", voted for %" PRIu64 ", commit index %" PRIu64
		       ", extra %u bytes\n",
		       hs.term, hs.voted_for, hs.commit_index, hs.extra_size);
	}
	keel_arena_close(&arena);
}

static void dump_snapshots(const struct wal_config *config)
{
	struct wal_snapshot_list *list = malloc(sizeof(*list));
	char errmsg[WAL_ERRMSG_SIZE];
	KEEL_ASSERT(list != NULL);
	if (wal_snapshot_list(config, list, errmsg) != KEEL_OK) {
		printf("snapshots: cannot list: %s\n", errmsg);
		free(list);
		return;
	}
	printf("snapshots: %zu\n", list->count);
	for (size_t i = 0; i < list->count; i++) {
		struct keel_arena arena;
		keel_arena_init(&arena, 4096);
		struct wal_snapshot_meta meta;
		enum keel_err err = wal_snapshot_verify(config, list->items[i].name, &arena, &meta,
							errmsg);
		if (err == KEEL_OK) {
			printf("  %s  index %" PRIu64 "  term %" PRIu64 "  membership %u bytes  "
			       "payload %" PRIu64 " bytes  checksum ok\n",
			       meta.name, meta.index, meta.term, meta.membership_size,
			       meta.payload_size);
		} else {
			printf("  %s  DAMAGED: %s\n", list->items[i].name, errmsg);
		}
		keel_arena_close(&arena);
	}
	free(list);
}

static int usage(FILE *out)
{
	fprintf(out, "usage: keel wal dump --data-dir DIR [--no-records]\n\n"
		     "Prints the WAL in DIR: hard state, snapshots, segments and their records\n"
		     "(index, term, type, size), and whether a server would start from it.\n");
	return out == stdout ? 0 : 2;
}

static int wal_dump(const char *dir, bool records)
{
	struct wal_vfs vfs;
	wal_vfs_posix_init(&vfs);
	struct wal_config config;
	wal_config_init(&config, &vfs, dir);
	struct listing *l = calloc(1, sizeof(*l));
	KEEL_ASSERT(l != NULL);
	if (wal_vfs_list(&vfs, dir, list_one, l) != KEEL_OK) {
		fprintf(stderr, "keel wal dump: %s\n", wal_vfs_last_error());
		free(l);
		return 2;
	}
	qsort(l->segments, l->segment_count, sizeof(uint64_t), compare_u64);
	qsort(l->spares, l->spare_count, sizeof(uint64_t), compare_u64);
	printf("WAL directory %s\n", dir);
	dump_hard_state(&config);
	dump_snapshots(&config);
	printf("segments: %zu (generation order)%s\n", l->segment_count,
	       l->truncated ? " (listing truncated)" : "");
	uint64_t *limits = calloc(l->segment_count + 1, sizeof(uint64_t));
	KEEL_ASSERT(limits != NULL);
	chain_limits(&vfs, dir, l, limits);
	struct totals totals = {0};
	for (size_t i = 0; i < l->segment_count; i++) {
		dump_segment(&vfs, dir, l->segments[i], limits[i], records, &totals);
	}
	free(limits);
	printf("spares: %zu", l->spare_count);
	for (size_t i = 0; i < l->spare_count; i++) {
		char name[WAL_NAME_MAX];
		wal_spare_name(name, l->spares[i]);
		printf("%s%s", i == 0 ? " (" : ", ", name);
	}
	printf("%s\n", l->spare_count > 0 ? ")" : "");
	printf("summary: %zu segments, %" PRIu64 " live records, %" PRIu64 " bytes of records, %"
	       PRIu64 " damaged, %zu other files\n",
	       l->segment_count, totals.records, totals.bytes, totals.damaged, l->other_count);
	free(l);

	struct wal_recovered rec;
	char errmsg[WAL_ERRMSG_SIZE];
	enum keel_err err = wal_check(&config, &rec, errmsg);
	if (err != KEEL_OK) {
		printf("recovery: REFUSES TO START: %s\n", errmsg);
		return 1;
	}
	printf("recovery: OK: hard state term %" PRIu64 ", snapshot %" PRIu64 ", %zu entries after "
	       "it, last index %" PRIu64 " (term %" PRIu64 ")%s%s\n",
	       rec.hard_state.term, rec.has_snapshot ? rec.snapshot.index : 0, rec.entry_count,
	       rec.last_index, rec.last_term, rec.notes[0] ? "; " : "", rec.notes);
	wal_recovered_free(&rec);
	return 0;
}

int cli_wal(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		return usage(argc < 2 ? stderr : stdout);
	}
	if (strcmp(argv[1], "dump") != 0) {
		fprintf(stderr, "keel wal: unknown subcommand '%s'\n", argv[1]);
		return usage(stderr);
	}
	const char *dir = NULL;
	bool records = true;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--data-dir") == 0 && i + 1 < argc) {
			dir = argv[++i];
		} else if (strcmp(argv[i], "--no-records") == 0) {
			records = false;
		} else if (strcmp(argv[i], "--help") == 0) {
			return usage(stdout);
		} else {
			fprintf(stderr, "keel wal dump: unexpected argument '%s'\n", argv[i]);
			return usage(stderr);
		}
	}
	if (dir == NULL) {
		return usage(stderr);
	}
	if (strlen(dir) + WAL_NAME_MAX + 2 > WAL_VFS_PATH_MAX) {
		fprintf(stderr, "keel wal dump: directory name too long\n");
		return 2;
	}
	return wal_dump(dir, records);
}
