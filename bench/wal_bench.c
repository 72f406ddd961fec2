/*
 * wal_bench.c — how fast the WAL appends durably on this machine's disk.
 *
 *	keel-wal-bench DIR [--seconds S] [--repeat N] [--segment-mib M]
 *	               [--modes zero,falloc,grow]
 *
 * For each segment preparation mode (zero-filled preallocated file, fallocated
 * file, growing file), each payload size (100 B, 1 KiB) and each batch size
 * (1, 8, 64, 512 entries per fdatasync), appends batches through the
 * synchronous WAL API (wal_append + wal_sync, one fdatasync per batch) for S
 * seconds (default 0.5), N times (default 3) — the modes' runs interleaved so
 * that other load on the disk hits them alike — and prints the median run's
 * records/s, MB/s of payload, fdatasyncs/s and mean time per batch. One WAL
 * per mode lives in a fresh directory under DIR; between runs, off the
 * clock, a snapshot plus compaction recycles used segments into the spare
 * pool and the pool is filled (what the storage thread does while idle), so
 * the preallocated modes measure steady state: overwriting reused files.
 * Everything created under DIR is removed afterwards. Not a test.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/clock.h"
#include "wal/wal.h"

struct mode {
	const char *name;
	enum wal_prealloc prealloc;
};

static const struct mode modes[] = {
	{"zero", WAL_PREALLOC_ZERO_FILL},
	{"falloc", WAL_PREALLOC_FALLOCATE},
	{"grow", WAL_PREALLOC_NONE},
};

static const uint32_t payload_sizes[] = {100, 1024};
static const size_t batch_sizes[] = {1, 8, 64, 512};

struct cleanup {
	const char *dir;
	int failures;
};

static void remove_one(void *arg, const char *name)
{
	struct cleanup *c = arg;
	char path[WAL_VFS_PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", c->dir, name);
	c->failures += unlink(path) != 0;
}

static void remove_dir(struct wal_vfs *vfs, const char *dir)
{
	struct cleanup c = {.dir = dir};
	(void)wal_vfs_list(vfs, dir, remove_one, &c);
	if (c.failures > 0 || rmdir(dir) != 0) {
		fprintf(stderr, "keel-wal-bench: could not remove %s\n", dir);
	}
}

struct result {
	uint64_t records;
	uint64_t batches;
	uint64_t ns;
};

struct bench {
	struct wal_vfs vfs;
	struct wal_config config;
	struct wal wal;
	char dir[WAL_VFS_PATH_MAX];
	uint64_t next_index;
	struct wal_entry *entries;
	uint8_t *data;
};

static int bench_open(struct bench *b, const char *root, const struct mode *mode,
		      uint64_t segment_bytes)
{
	memset(b, 0, sizeof(*b));
	snprintf(b->dir, sizeof(b->dir), "%s/keel-wal-bench-%s", root, mode->name);
	wal_vfs_posix_init(&b->vfs);
	wal_config_init(&b->config, &b->vfs, b->dir);
	b->config.prealloc = mode->prealloc;
	b->config.segment_size_bytes = segment_bytes;
	b->config.spare_segments = 3;
	struct wal_recovered rec;
	if (wal_open(&b->wal, &b->config, &rec) != KEEL_OK) {
		fprintf(stderr, "keel-wal-bench: %s\n", b->wal.errmsg);
		return -1;
	}
	wal_recovered_free(&rec);
	b->next_index = rec.last_index + 1;
	struct wal_hard_state hs = {.term = 1};
	b->entries = calloc(512, sizeof(struct wal_entry));
	b->data = calloc(1, 1024);
	if (b->entries == NULL || b->data == NULL || wal_save_hard_state(&b->wal, &hs) != KEEL_OK) {
		fprintf(stderr, "keel-wal-bench: %s\n", b->wal.errmsg);
		return -1;
	}
	memset(b->data, 0x5a, 1024);
	return 0;
}

static void bench_close(struct bench *b)
{
	wal_close(&b->wal);
	free(b->entries);
	free(b->data);
	remove_dir(&b->vfs, b->dir);
}

/* Off the clock, as the storage thread does while idle: snapshot and
 * compact so that used segments go back to the spare pool, and fill the
 * pool. */
static int bench_recycle(struct bench *b)
{
	uint64_t last = b->next_index - 1;
	char errmsg[WAL_ERRMSG_SIZE];
	if (last > 0 &&
	    (wal_snapshot_save(&b->config, last, 1, NULL, 0, "x", 1, errmsg) != KEEL_OK ||
	     wal_compact(&b->wal, last) != KEEL_OK)) {
		fprintf(stderr, "keel-wal-bench: %s %s\n", errmsg, b->wal.errmsg);
		return -1;
	}
	for (uint32_t i = 0; i < b->config.spare_segments; i++) {
		if (wal_prepare_spare(&b->wal) != KEEL_OK) {
			fprintf(stderr, "keel-wal-bench: %s\n", b->wal.errmsg);
			return -1;
		}
	}
	return 0;
}

static int run_one(struct bench *b, uint32_t payload, size_t batch, double seconds,
		   struct result *out)
{
	if (bench_recycle(b) != 0) {
		return -1;
	}
	/* Stay within the tail and the prepared spares: measure appends. */
	uint64_t max_bytes = b->config.segment_size_bytes * b->config.spare_segments;
	uint64_t record_bytes = wal_record_encoded_size(payload);
	uint64_t first = b->next_index;
	uint64_t start = keel_clock_mono_ns();
	uint64_t deadline = start + (uint64_t)(seconds * 1e9);
	uint64_t now = start;
	enum keel_err err = KEEL_OK;
	*out = (struct result){0};
	while (err == KEEL_OK && now < deadline &&
	       (b->next_index - first + batch) * record_bytes < max_bytes) {
		for (size_t i = 0; i < batch; i++) {
			b->entries[i] = (struct wal_entry){
				.index = b->next_index + i, .term = 1, .size = payload, .data = b->data};
		}
		err = wal_append(&b->wal, b->entries, batch);
		if (err == KEEL_OK) {
			err = wal_sync(&b->wal);
		}
		b->next_index += batch;
		out->batches++;
		now = keel_clock_mono_ns();
	}
	out->records = b->next_index - first;
	out->ns = now - start;
	if (err != KEEL_OK) {
		fprintf(stderr, "keel-wal-bench: %s\n", b->wal.errmsg);
		return -1;
	}
	return 0;
}

static int compare_rate(const void *a, const void *b)
{
	const struct result *x = a;
	const struct result *y = b;
	double rx = (double)x->records / (double)x->ns;
	double ry = (double)y->records / (double)y->ns;
	return rx < ry ? -1 : rx > ry;
}

#define MODE_COUNT (sizeof(modes) / sizeof(modes[0]))

/* `repeat` interleaved runs of one payload/batch configuration in every open
 * mode; prints each mode's median. */
static int run_config(struct bench **benches, uint32_t payload, size_t batch, double seconds,
		      int repeat)
{
	struct result runs[MODE_COUNT][9];
	int ok[MODE_COUNT] = {0};
	int status = 0;
	for (int r = 0; r < repeat; r++) {
		for (size_t m = 0; m < MODE_COUNT; m++) {
			if (benches[m] != NULL &&
			    run_one(benches[m], payload, batch, seconds, &runs[m][ok[m]]) == 0) {
				ok[m]++;
			}
		}
	}
	for (size_t m = 0; m < MODE_COUNT; m++) {
		if (benches[m] == NULL) {
			continue;
		}
		if (ok[m] == 0) {
			status = 1;
			continue;
		}
		qsort(runs[m], (size_t)ok[m], sizeof(runs[m][0]), compare_rate);
		const struct result *res = &runs[m][ok[m] / 2]; /* the median */
		double s = (double)res->ns / 1e9;
		printf("%-7s %8u %6zu %12.0f %10.2f %10.0f %12.1f\n", modes[m].name, payload, batch,
		       (double)res->records / s, (double)res->records * payload / s / 1e6,
		       (double)res->batches / s, s * 1e6 / (double)res->batches);
	}
	fflush(stdout);
	return status;
}

static int usage(void)
{
	fprintf(stderr, "usage: keel-wal-bench DIR [--seconds S] [--repeat N] [--segment-mib M] "
			"[--modes zero,falloc,grow]\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argv[1][0] == '-') {
		return usage();
	}
	const char *root = argv[1];
	double seconds = 0.5;
	int repeat = 3;
	uint64_t segment_mib = 32;
	const char *mode_list = "zero,falloc,grow";
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
			seconds = atof(argv[++i]);
		} else if (strcmp(argv[i], "--segment-mib") == 0 && i + 1 < argc) {
			segment_mib = strtoull(argv[++i], NULL, 10);
		} else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
			repeat = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--modes") == 0 && i + 1 < argc) {
			mode_list = argv[++i];
		} else {
			return usage();
		}
	}
	if (seconds <= 0 || segment_mib == 0 || segment_mib > 4096 || repeat < 1 || repeat > 9) {
		return usage();
	}
	printf("keel-wal-bench: %s, median of %d runs of %.1f s, %" PRIu64 " MiB segments, "
	       "one fdatasync per batch\n",
	       root, repeat, seconds, segment_mib);
	printf("%-7s %8s %6s %12s %10s %10s %12s\n", "segment", "payload", "batch", "records/s",
	       "MB/s", "syncs/s", "us/batch");
	/* One WAL per mode, all open at once: the runs of the modes are
	 * interleaved, so that other load on the disk hits them alike. */
	struct bench *benches[MODE_COUNT] = {NULL};
	int status = 0;
	for (size_t m = 0; m < MODE_COUNT; m++) {
		if (strstr(mode_list, modes[m].name) == NULL) {
			continue;
		}
		benches[m] = malloc(sizeof(struct bench));
		if (benches[m] == NULL || bench_open(benches[m], root, &modes[m], segment_mib << 20) != 0) {
			status = 1;
			goto out;
		}
	}
	for (size_t p = 0; p < sizeof(payload_sizes) / sizeof(payload_sizes[0]); p++) {
		for (size_t k = 0; k < sizeof(batch_sizes) / sizeof(batch_sizes[0]); k++) {
			if (run_config(benches, payload_sizes[p], batch_sizes[k], seconds, repeat) != 0) {
				status = 1;
			}
		}
	}
out:
	for (size_t m = 0; m < MODE_COUNT; m++) {
		if (benches[m] != NULL) {
			bench_close(benches[m]);
			free(benches[m]);
		}
	}
	return status;
}
