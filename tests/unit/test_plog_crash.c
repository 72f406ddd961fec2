/*
 * Unit test: power loss at every mutating call of a scripted workload on a
 * partition log, in every crash mode of the fault vfs.
 *
 * The script opens a log with small segments, appends batches under rising
 * leader epochs (rolling many segments), syncs every few appends, runs
 * retention by size once, truncates back into an older segment (as a
 * follower does when a new leader's log diverges) and appends again under
 * a newer epoch, rewriting the cut offsets. For each n, the power
 * goes off after n mutations; the script runs until a call fails; then the
 * vfs crashes (dropping, tearing or scrambling unsynced writes, with or
 * without losing unsynced directory operations) and the log is reopened.
 * After recovery:
 *   - the log holds exactly the appended batches from its start to its end
 *     (a contiguous run of what was appended, byte for byte) — of the first
 *     history until the truncation returned, of the rewritten one after;
 *   - everything synced before the crash is there (up to the truncation
 *     point once the truncation had begun);
 *   - the indexes agree with a full scan (plog_check);
 *   - the epoch cache covers the log and ends with the last batch's epoch;
 *   - the repair is durable: a new append, synced, survives another crash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_plog_util.h"

#define APPENDS 36
#define SYNC_EVERY 3
#define RETAIN_AT 24

#define REWRITES 6

/* One history of the log: the batches in offset order and their epochs. */
struct history {
	struct model m;
	int32_t epochs[4096]; /* leader epoch of model batch i */
};

struct run {
	struct plog_fixture fx;
	struct history first;     /* what was appended before the truncation */
	struct history second;    /* the first cut back, then the rewrites */
	bool truncated;           /* plog_truncate returned: second history */
	int64_t durable;          /* synced before the crash */
	int64_t trunc_to;         /* -1 until the truncation began */
	bool completed;
	uint32_t segments_dropped; /* by the truncation */
};

static bool append_one(struct run *r, struct history *h, int i, int32_t epoch)
{
	struct plog_fixture *fx = &r->fx;
	uint8_t buf[4096];
	int32_t count = 1 + i % 3;
	size_t size = build_batch(buf, sizeof(buf), count, 1000 * (int64_t)i, 3,
				  (size_t)(100 + (i * 53) % 400), (uint8_t)i);
	struct plog_append_info info;
	int64_t end = plog_log_end_offset(&fx->log);
	if (plog_append(&fx->log, buf, size, epoch, &info) != KEEL_OK) {
		return false;
	}
	h->epochs[h->m.batch_count] = epoch;
	model_add(&h->m, buf, size, end, 1000 * (int64_t)i + 3 * (count - 1));
	/* A roll syncs the segment it closes. */
	r->durable = plog_durable_offset(&fx->log);
	return true;
}

/* The second history starts as the first cut at `end`. */
static void start_second(struct run *r, int64_t end)
{
	const struct model *a = &r->first.m;
	size_t keep = 0;
	while (keep < a->batch_count && a->batch_base[keep] < end) {
		keep++;
	}
	for (size_t i = 0; i < keep; i++) {
		size_t stop = i + 1 < a->batch_count ? a->batch_pos[i + 1] : a->size;
		model_add(&r->second.m, a->bytes + a->batch_pos[i], stop - a->batch_pos[i],
			  a->batch_base[i], a->batch_ts[i]);
		r->second.epochs[i] = r->first.epochs[i];
	}
}

static int32_t epoch_of_step(int i)
{
	return 1 + i / 10;
}

/* Runs the script until a call fails (the power went off). */
static void run_script(struct run *r)
{
	struct plog_fixture *fx = &r->fx;
	if (plog_fixture_open(fx) != KEEL_OK) {
		return;
	}
	for (int i = 0; i < APPENDS; i++) {
		if (!append_one(r, &r->first, i, epoch_of_step(i))) {
			return;
		}
		if (i % SYNC_EVERY == SYNC_EVERY - 1 && plog_sync(&fx->log, &r->durable) != KEEL_OK) {
			return;
		}
		if (i == RETAIN_AT) {
			fx->log.config.retention_bytes = 4000;
			if (plog_retain(&fx->log, 0, NULL) != KEEL_OK) {
				return;
			}
			fx->log.config.retention_bytes = -1;
		}
	}
	if (plog_sync(&fx->log, &r->durable) != KEEL_OK) {
		return;
	}
	/* Back into an older segment, inside a batch. */
	r->trunc_to = r->first.m.batch_base[r->first.m.batch_count - 8] + 1;
	uint32_t segments = fx->log.segment_count;
	if (plog_truncate(&fx->log, r->trunc_to) != KEEL_OK) {
		return;
	}
	r->segments_dropped = segments - fx->log.segment_count;
	r->truncated = true;
	r->durable = plog_durable_offset(&fx->log);
	start_second(r, plog_log_end_offset(&fx->log));
	for (int i = 0; i < REWRITES; i++) {
		if (!append_one(r, &r->second, APPENDS + i, epoch_of_step(APPENDS) + 1)) {
			return;
		}
		if (i % 2 == 1 && plog_sync(&fx->log, &r->durable) != KEEL_OK) {
			return;
		}
	}
	r->completed = true;
}

static void check_recovered(struct run *r)
{
	struct plog *log = &r->fx.log;
	const struct history *h = r->truncated ? &r->second : &r->first;
	const struct model *m = &h->m;
	char what[128];
	snprintf(what, sizeof(what), "%s", plog_why(log));
	assert_int_equal(plog_check(log), KEEL_OK);
	int64_t start = plog_log_start_offset(log);
	int64_t end = plog_log_end_offset(log);
	int64_t must = r->durable;
	/* The truncation cuts at the start of the batch holding trunc_to. */
	if (!r->truncated && r->trunc_to >= 0 && r->trunc_to - 1 < must) {
		must = r->trunc_to - 1;
	}
	/* The log before the script wrote anything is empty; otherwise its
	 * content is the model's [start, end). */
	if (end > start) {
		size_t first = m->batch_count;
		size_t stop = m->batch_count;
		for (size_t i = 0; i < m->batch_count; i++) {
			if (m->batch_base[i] == start) {
				first = i;
			}
			if (m->batch_base[i] == end) {
				stop = i;
			}
		}
		assert_true(first < m->batch_count);
		size_t from = m->batch_pos[first];
		size_t to = stop < m->batch_count ? m->batch_pos[stop] : m->size;
		if (stop == m->batch_count) {
			int64_t model_end = m->batch_count == 0
						    ? 0
						    : m->batch_base[m->batch_count - 1];
			assert_true(end > model_end); /* the end is the model's end */
		}
		size_t size = 0;
		uint8_t *all = read_all(log, start, 5000, &size);
		assert_int_equal(size, to - from);
		assert_memory_equal(all, m->bytes + from, size);
		free(all);
		/* Epochs: the latest is the last batch's. */
		assert_int_equal(plog_epochs_latest(&log->epochs), h->epochs[stop - 1]);
	}
	if (end < must) {
		fprintf(stderr, "log ends at %lld, below the synced %lld (%s)\n", (long long)end,
			(long long)must, what);
	}
	assert_true(end >= must);
	for (uint32_t i = 0; i < log->epochs.count; i++) {
		assert_true(log->epochs.entries[i].start_offset < end);
		assert_true(log->epochs.entries[i].start_offset >= start);
	}
}

static void after_repair(struct run *r, uint64_t seed)
{
	struct plog_fixture *fx = &r->fx;
	uint8_t buf[1024];
	size_t size = build_batch(buf, sizeof(buf), 2, 999999, 1, 10, 'r');
	struct plog_append_info info;
	int32_t epoch = plog_epochs_latest(&fx->log.epochs);
	assert_int_equal(plog_append(&fx->log, buf, size, epoch < 0 ? 0 : epoch, &info), KEEL_OK);
	int64_t durable;
	assert_int_equal(plog_sync(&fx->log, &durable), KEEL_OK);
	plog_fixture_close(fx);
	struct wal_vfs_crash crash = {.mode = (enum wal_vfs_crash_mode)(seed % 3),
				      .lose_dir_ops = true};
	wal_vfs_fault_crash(&fx->vfs, &crash);
	assert_int_equal(plog_fixture_open(fx), KEEL_OK);
	assert_int_equal(plog_log_end_offset(&fx->log), durable);
	assert_int_equal(plog_check(&fx->log), KEEL_OK);
}

static uint64_t run_case(uint64_t budget, enum wal_vfs_crash_mode mode, bool lose_dir_ops,
			 uint64_t seed, bool crash)
{
	struct run *r = calloc(1, sizeof(*r));
	assert_non_null(r);
	r->trunc_to = -1;
	plog_fixture_init(&r->fx, seed);
	if (crash) {
		wal_vfs_fault_power_off_after(&r->fx.vfs, budget);
	}
	run_script(r);
	struct wal_vfs_fault_stats stats;
	wal_vfs_fault_get_stats(&r->fx.vfs, &stats);
	if (!crash) {
		assert_true(r->completed);
		assert_true(r->segments_dropped > 0); /* the cut is in an older segment */
	} else {
		plog_fixture_close(&r->fx);
		struct wal_vfs_crash c = {.mode = mode, .lose_dir_ops = lose_dir_ops};
		wal_vfs_fault_crash(&r->fx.vfs, &c);
		enum keel_err err = plog_fixture_open(&r->fx);
		if (err != KEEL_OK) {
			fprintf(stderr, "budget %llu mode %d lose %d: open: %s (%s)\n",
				(unsigned long long)budget, mode, lose_dir_ops, keel_errname(err),
				plog_why(&r->fx.log));
		}
		assert_int_equal(err, KEEL_OK);
		check_recovered(r);
		after_repair(r, seed);
	}
	plog_fixture_free(&r->fx);
	free(r->first.m.bytes);
	free(r->second.m.bytes);
	free(r);
	return stats.mutations;
}

/* Every crash point, `seeds` times with different random crash outcomes. */
static void sweep(enum wal_vfs_crash_mode mode, bool lose_dir_ops, uint64_t seed, int seeds)
{
	uint64_t total = run_case(0, mode, lose_dir_ops, seed, false);
	assert_true(total > 50);
	if (seed == 100) {
		fprintf(stderr, "the script makes %llu mutations\n", (unsigned long long)total);
	}
	for (uint64_t n = 0; n <= total; n++) {
		for (int k = 0; k < seeds; k++) {
			run_case(n, mode, lose_dir_ops, seed + 1000 * (uint64_t)k + n, true);
		}
	}
}

static void test_crash_drop_unsynced(void **state)
{
	(void)state;
	sweep(WAL_VFS_CRASH_DROP_UNSYNCED, false, 100, 1);
	sweep(WAL_VFS_CRASH_DROP_UNSYNCED, true, 200, 2);
}

static void test_crash_torn(void **state)
{
	(void)state;
	sweep(WAL_VFS_CRASH_TORN, false, 300, 2);
	sweep(WAL_VFS_CRASH_TORN, true, 400, 2);
}

static void test_crash_scrambled(void **state)
{
	(void)state;
	sweep(WAL_VFS_CRASH_SCRAMBLE, false, 500, 3);
	sweep(WAL_VFS_CRASH_SCRAMBLE, true, 600, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crash_drop_unsynced),
		cmocka_unit_test(test_crash_torn),
		cmocka_unit_test(test_crash_scrambled),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
