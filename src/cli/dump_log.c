/*
 * dump_log.c — `keel dump-log DIR [--no-batches]`: what is in a partition
 * directory (docs/plog-format.md), for operators.
 *
 * Prints partition.metadata (the topic id), the leader-epoch checkpoint,
 * the idempotent producers' state snapshots, then every segment in offset order: each batch (position, offsets, record
 * count, leader epoch, codec, timestamps, producer, CRC state), how the
 * segment ends, and whether its index files match it. Reads only, through
 * the POSIX vfs; it never repairs, so it is safe on a stopped broker's
 * directory (a running broker's active segment may show a torn tail).
 *
 * Exit status: 0 when recovery would open the log (a torn tail in the last
 * segment is cut by recovery), 1 when damage in an older segment or a gap
 * between segments would make it refuse, 2 on a usage or I/O error.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "cli/cli.h"
#include "plog/batch.h"
#include "plog/format.h"
#include "plog/producer.h"
#include "wal/vfs.h"

/* Larger than any batch a broker accepts; bounds the read buffer. */
#define DUMP_MAX_BATCH_BYTES (64u << 20)
#define DUMP_MAX_SEGMENTS 100000u
#define DUMP_MAX_SNAPSHOTS 16u

struct segments {
	int64_t bases[DUMP_MAX_SEGMENTS];
	uint32_t count;
	bool has_epochs;
	bool has_metadata;
	int64_t snapshots[DUMP_MAX_SNAPSHOTS];
	uint32_t snapshot_count;
};

static void list_one(void *arg, const char *name)
{
	struct segments *s = arg;
	int64_t base;
	enum plog_file_kind kind = plog_parse_file_name(name, &base);
	if (kind == PLOG_FILE_LOG && s->count < DUMP_MAX_SEGMENTS) {
		s->bases[s->count++] = base;
	} else if (kind == PLOG_FILE_SNAPSHOT && s->snapshot_count < DUMP_MAX_SNAPSHOTS) {
		s->snapshots[s->snapshot_count++] = base;
	} else if (strcmp(name, PLOG_EPOCH_FILE) == 0) {
		s->has_epochs = true;
	} else if (strcmp(name, PLOG_METADATA_FILE) == 0) {
		s->has_metadata = true;
	}
}

static int compare_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a;
	int64_t y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Reads a whole file of at most max bytes; NULL on any failure. */
static uint8_t *slurp(struct wal_vfs *vfs, const char *path, uint64_t max, size_t *size)
{
	struct wal_vfs_file *f;
	if (wal_vfs_open(vfs, path, WAL_VFS_READ_ONLY, &f) != KEEL_OK) {
		return NULL;
	}
	uint64_t n = 0;
	uint8_t *data = NULL;
	if (wal_vfs_size(f, &n) == KEEL_OK && n <= max) {
		data = malloc(n > 0 ? (size_t)n : 1);
		if (data != NULL && wal_vfs_pread_exact(f, data, (size_t)n, 0) != KEEL_OK) {
			free(data);
			data = NULL;
		}
	}
	wal_vfs_close(f);
	*size = (size_t)n;
	return data;
}

static void print_metadata(struct wal_vfs *vfs, const char *dir)
{
	char path[WAL_VFS_PATH_MAX];
	size_t size = 0;
	wal_vfs_join(path, sizeof(path), dir, PLOG_METADATA_FILE);
	uint8_t *data = slurp(vfs, path, 4096, &size);
	uint8_t id[PLOG_TOPIC_ID_SIZE];
	if (data == NULL || plog_metadata_decode(data, size, id) != KEEL_OK) {
		printf("partition.metadata: unreadable or damaged\n");
	} else {
		printf("partition.metadata: topic id ");
		for (int i = 0; i < PLOG_TOPIC_ID_SIZE; i++) {
			printf("%02x", id[i]);
		}
		printf("\n");
	}
	free(data);
}

static void print_epochs(struct wal_vfs *vfs, const char *dir)
{
	char path[WAL_VFS_PATH_MAX];
	size_t size = 0;
	wal_vfs_join(path, sizeof(path), dir, PLOG_EPOCH_FILE);
	uint8_t *data = slurp(vfs, path, plog_epoch_file_size(PLOG_EPOCH_MAX_ENTRIES), &size);
	struct plog_epoch_entry *entries = malloc(PLOG_EPOCH_MAX_ENTRIES * sizeof(*entries));
	uint32_t count = 0;
	if (data == NULL || entries == NULL ||
	    plog_epoch_file_decode(data, size, entries, PLOG_EPOCH_MAX_ENTRIES, &count) != KEEL_OK) {
		printf("leader-epoch-checkpoint: unreadable or damaged\n");
	} else {
		printf("leader-epoch-checkpoint: %" PRIu32 " entries\n", count);
		for (uint32_t i = 0; i < count; i++) {
			printf("  epoch %" PRId32 " starts at offset %" PRId64 "\n", entries[i].epoch,
			       entries[i].start_offset);
		}
	}
	free(entries);
	free(data);
}

/* One producer state snapshot: its header and every producer's batches. */
static void print_snapshot(struct wal_vfs *vfs, const char *dir, int64_t offset)
{
	char name[PLOG_NAME_MAX];
	char path[WAL_VFS_PATH_MAX];
	plog_file_name(name, offset, PLOG_FILE_SNAPSHOT);
	wal_vfs_join(path, sizeof(path), dir, name);
	size_t size = 0;
	uint8_t *data = slurp(vfs, path, 64u << 20, &size);
	struct plog_producers ps;
	plog_producers_init(&ps);
	int64_t at;
	int32_t epoch;
	uint8_t topic_id[PLOG_TOPIC_ID_SIZE];
	if (data == NULL ||
	    plog_producers_decode(&ps, data, size, &at, &epoch, topic_id) != KEEL_OK || at != offset) {
		printf("producer snapshot %s: unreadable or damaged (a rebuild skips it)\n", name);
	} else {
		printf("producer snapshot %s: %" PRIu32 " producers before offset %" PRId64
		       " (leader epoch %" PRId32 " there)\n",
		       name, ps.count, at, epoch);
		for (uint32_t i = 0; i < ps.count; i++) {
			const struct plog_producer *p = &ps.items[i];
			printf("  producer %" PRId64 " epoch %d:", p->producer_id, p->epoch);
			for (uint32_t j = 0; j < p->count; j++) {
				const struct plog_producer_batch *b = &p->batches[j];
				printf(" seq %" PRId32 "..%" PRId32 " @ %" PRId64 "..%" PRId64, b->first_seq,
				       b->last_seq, b->first_offset, b->last_offset);
			}
			printf("\n");
		}
	}
	plog_producers_close(&ps);
	free(data);
}

static const char *codec_name(enum plog_compression c)
{
	static const char *names[] = {"none", "gzip", "snappy", "lz4", "zstd"};
	return (unsigned)c < 5 ? names[c] : "unknown";
}

/* Whether the segment's .index says it describes `size` bytes ending at
 * `end` (what recovery checks before trusting it). */
static const char *index_state(struct wal_vfs *vfs, const char *dir, int64_t base, uint64_t size,
			       int64_t end, bool last)
{
	if (last) {
		return "active segment: indexes rebuilt by a scan on open";
	}
	char name[PLOG_NAME_MAX];
	char path[WAL_VFS_PATH_MAX];
	plog_file_name(name, base, PLOG_FILE_INDEX);
	wal_vfs_join(path, sizeof(path), dir, name);
	size_t n = 0;
	uint8_t *data = slurp(vfs, path, UINT32_MAX, &n);
	uint32_t count = 0;
	const char *state = "missing or damaged (recovery rebuilds it)";
	if (data != NULL && plog_index_peek_count(data, n, false, &count) == KEEL_OK) {
		struct plog_index_entry *e = malloc((count + 1u) * sizeof(*e));
		struct plog_index_header h;
		if (e != NULL && plog_index_decode(data, n, &h, e) == KEEL_OK) {
			state = h.log_size == size && h.end_offset == end
					? "index files match"
					: "index describes another size or end (recovery rebuilds it)";
		}
		free(e);
	}
	free(data);
	return state;
}

struct seg_result {
	int64_t end_offset;
	bool damaged; /* an invalid batch before the end of the file */
};

static int dump_segment(struct wal_vfs *vfs, const char *dir, int64_t base, bool batches,
			bool last, uint8_t *buf, struct seg_result *out)
{
	char name[PLOG_NAME_MAX];
	char path[WAL_VFS_PATH_MAX];
	plog_file_name(name, base, PLOG_FILE_LOG);
	wal_vfs_join(path, sizeof(path), dir, name);
	struct wal_vfs_file *f;
	uint64_t size = 0;
	if (wal_vfs_open(vfs, path, WAL_VFS_READ_ONLY, &f) != KEEL_OK ||
	    wal_vfs_size(f, &size) != KEEL_OK) {
		fprintf(stderr, "keel dump-log: cannot read %s: %s\n", path, wal_vfs_last_error());
		return 2;
	}
	printf("segment %s: base offset %" PRId64 ", %" PRIu64 " bytes\n", name, base, size);
	uint64_t pos = 0;
	int64_t next = base;
	uint64_t count = 0;
	enum plog_batch_check check = PLOG_BATCH_OK;
	while (pos < size) {
		size_t avail = size - pos < DUMP_MAX_BATCH_BYTES ? (size_t)(size - pos)
								 : DUMP_MAX_BATCH_BYTES;
		size_t head = avail < PLOG_BATCH_HEADER_SIZE ? avail : PLOG_BATCH_HEADER_SIZE;
		struct plog_batch b;
		if (wal_vfs_pread_exact(f, buf, head, pos) != KEEL_OK) {
			check = PLOG_BATCH_SHORT;
			break;
		}
		check = plog_batch_parse_header(buf, head, DUMP_MAX_BATCH_BYTES, &b);
		if (check == PLOG_BATCH_OK && b.size > avail) {
			check = PLOG_BATCH_SHORT;
		}
		if (check == PLOG_BATCH_OK) {
			if (wal_vfs_pread_exact(f, buf, b.size, pos) != KEEL_OK) {
				check = PLOG_BATCH_SHORT;
				break;
			}
			check = plog_batch_validate(buf, b.size, DUMP_MAX_BATCH_BYTES, &b);
		}
		if (check == PLOG_BATCH_OK && b.base_offset != next) {
			printf("  position %" PRIu64 ": batch at offset %" PRId64 ", expected %" PRId64
			       "\n",
			       pos, b.base_offset, next);
			check = PLOG_BATCH_BAD_RECORDS;
		}
		if (check != PLOG_BATCH_OK) {
			break;
		}
		if (batches) {
			printf("  offset %" PRId64 "..%" PRId64 " position %" PRIu64 " size %zu records %" PRId32
			       " epoch %" PRId32 " codec %s crc ok timestamps %" PRId64 "..%" PRId64
			       " producer %" PRId64 "/%d seq %" PRId32 "%s%s\n",
			       b.base_offset, plog_batch_last_offset(&b), pos, b.size, b.record_count,
			       b.leader_epoch, codec_name(plog_batch_compression(&b)), b.base_timestamp,
			       b.max_timestamp, b.producer_id, b.producer_epoch, b.base_sequence,
			       (b.attributes & PLOG_ATTR_TRANSACTIONAL) ? " transactional" : "",
			       (b.attributes & PLOG_ATTR_CONTROL) ? " control" : "");
		}
		count++;
		next = plog_batch_last_offset(&b) + 1;
		pos += b.size;
	}
	wal_vfs_close(f);
	out->end_offset = next;
	out->damaged = pos < size;
	if (pos < size) {
		printf("  stops at position %" PRIu64 ": %s; %" PRIu64 " bytes after it (%s)\n", pos,
		       plog_batch_check_name(check), size - pos,
		       last ? "a torn tail: recovery cuts it" : "corruption: recovery refuses");
	}
	printf("  %" PRIu64 " batches, offsets %" PRId64 "..%" PRId64 "; %s\n", count, base, next - 1,
	       index_state(vfs, dir, base, pos, next, last));
	return 0;
}

static int dump(const char *dir, bool batches)
{
	struct wal_vfs vfs;
	wal_vfs_posix_init(&vfs);
	struct segments *s = calloc(1, sizeof(*s));
	uint8_t *buf = malloc(DUMP_MAX_BATCH_BYTES);
	if (s == NULL || buf == NULL) {
		fprintf(stderr, "keel dump-log: out of memory\n");
		free(s);
		free(buf);
		return 2;
	}
	int status = 0;
	if (wal_vfs_list(&vfs, dir, list_one, s) != KEEL_OK) {
		fprintf(stderr, "keel dump-log: cannot list %s: %s\n", dir, wal_vfs_last_error());
		status = 2;
		goto out;
	}
	printf("partition directory %s: %" PRIu32 " segments\n", dir, s->count);
	if (s->has_metadata) {
		print_metadata(&vfs, dir);
	}
	if (s->has_epochs) {
		print_epochs(&vfs, dir);
	}
	qsort(s->snapshots, s->snapshot_count, sizeof(*s->snapshots), compare_i64);
	for (uint32_t i = 0; i < s->snapshot_count; i++) {
		print_snapshot(&vfs, dir, s->snapshots[i]);
	}
	qsort(s->bases, s->count, sizeof(*s->bases), compare_i64);
	int64_t expect = s->count > 0 ? s->bases[0] : 0;
	for (uint32_t i = 0; i < s->count && status != 2; i++) {
		bool last = i + 1 == s->count;
		if (s->bases[i] != expect) {
			printf("gap: segment %" PRId64 " does not follow the previous end %" PRId64 "\n",
			       s->bases[i], expect);
			status = 1;
		}
		struct seg_result r;
		int rc = dump_segment(&vfs, dir, s->bases[i], batches, last, buf, &r);
		if (rc != 0) {
			status = rc;
		} else if (r.damaged && !last) {
			status = 1;
		}
		expect = r.end_offset;
	}
	if (status != 2) {
		printf("log %s: %s\n", status == 0 ? "ok" : "damaged",
		       status == 0 ? "recovery would open it"
				   : "recovery would refuse it (an older segment is damaged)");
	}
out:
	free(buf);
	free(s);
	return status;
}

static int usage(FILE *out)
{
	fprintf(out, "usage: keel dump-log DIR [--no-batches]\n"
		     "  decodes a partition directory (<topic>-<partition>): its segments'\n"
		     "  batches (offsets, epochs, record counts, CRC state), the leader-epoch\n"
		     "  checkpoint, partition.metadata and producer state snapshots.\n"
		     "  Reads only.\n"
		     "  exit 0: recovery would open it; 1: it would refuse; 2: error\n");
	return out == stdout ? 0 : 2;
}

int cli_dump_log(int argc, char **argv)
{
	const char *dir = NULL;
	bool batches = true;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			return usage(stdout);
		}
		if (strcmp(argv[i], "--no-batches") == 0) {
			batches = false;
		} else if (dir == NULL && argv[i][0] != '-') {
			dir = argv[i];
		} else {
			fprintf(stderr, "keel dump-log: unexpected argument '%s'\n", argv[i]);
			return usage(stderr);
		}
	}
	if (dir == NULL) {
		return usage(stderr);
	}
	if (strlen(dir) + PLOG_NAME_MAX + 2 > WAL_VFS_PATH_MAX) {
		fprintf(stderr, "keel dump-log: directory name too long\n");
		return 2;
	}
	return dump(dir, batches);
}
