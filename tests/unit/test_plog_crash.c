/*
 * Unit test: power loss at every mutating call of a scripted workload on a
 * partition log, in every crash mode of the fault vfs.
 *
 * The script opens a log with small segments, appends batches under rising
 * leader epochs (rolling many segments), syncs every few appends, runs
 * retention by size once, and ends with a truncation. For each n, the power
 * goes off after n mutations; the script runs until a call fails; then the
 * vfs crashes (dropping, tearing or scrambling unsynced writes, with or
 * without losing unsynced directory operations) and the log is reopened.
 * After recovery:
 *   - the log holds exactly the appended batches from its start to its end
 *     (a contiguous run of what was appended, byte for byte);
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

struct run {
	struct plog_fixture fx;
	struct model m;
	int64_t durable;     /* synced before the crash */
	int64_t trunc_to;    /* -1 until the truncation began */
	bool completed;
	int32_t epochs[4096]; /* leader epoch of model batch i */
};

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
		uint8_t buf[4096];
		int32_t count = 1 + i % 3;
		size_t size = build_batch(buf, sizeof(buf), count, 1000 * (int64_t)i, 3,
					  (size_t)(100 + (i * 53) % 400), (uint8_t)i);
		struct plog_append_info info;
		int64_t end = plog_log_end_offset(&fx->log);
		if (plog_append(&fx->log, buf, size, epoch_of_step(i), &info) != KEEL_OK) {
			return;
		}
		r->epochs[r->m.batch_count] = epoch_of_step(i);
		model_add(&r->m, buf, size, end, 1000 * (int64_t)i + 3 * (count - 1));
		/* A roll syncs the segment it closes. */
		r->durable = plog_durable_offset(&fx->log);
		if (i % SYNC_EVERY == SYNC_EVERY - 1) {
			if (plog_sync(&fx->log, &r->durable) != KEEL_OK) {
				return;
			}
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
	r->trunc_to = r->m.batch_base[r->m.batch_count - 5] + 1;
	if (plog_truncate(&fx->log, r->trunc_to) != KEEL_OK) {
		return;
	}
	r->completed = true;
}

static void check_recovered(struct run *r)
{
	struct plog *log = &r->fx.log;
	char what[128];
	snprintf(what, sizeof(what), "%s", plog_why(log));
	assert_int_equal(plog_check(log), KEEL_OK);
	int64_t start = plog_log_start_offset(log);
	int64_t end = plog_log_end_offset(log);
	int64_t must = r->durable;
	/* The truncation cuts at the start of the batch holding trunc_to. */
	if (r->trunc_to >= 0 && r->trunc_to - 1 < must) {
		must = r->trunc_to - 1;
	}
	/* The log before the script wrote anything is empty; otherwise its
	 * content is the model's [start, end). */
	if (end > start) {
		size_t first = r->m.batch_count;
		size_t stop = r->m.batch_count;
		for (size_t i = 0; i < r->m.batch_count; i++) {
			if (r->m.batch_base[i] == start) {
				first = i;
			}
			if (r->m.batch_base[i] == end) {
				stop = i;
			}
		}
		assert_true(first < r->m.batch_count);
		size_t from = r->m.batch_pos[first];
		size_t to = stop < r->m.batch_count ? r->m.batch_pos[stop] : r->m.size;
		if (stop == r->m.batch_count) {
			int64_t model_end = r->m.batch_count == 0
						    ? 0
						    : r->m.batch_base[r->m.batch_count - 1];
			assert_true(end > model_end); /* the end is the model's end */
		}
		size_t size = 0;
		uint8_t *all = read_all(log, start, 5000, &size);
		assert_int_equal(size, to - from);
		assert_memory_equal(all, r->m.bytes + from, size);
		free(all);
		/* Epochs: the latest is the last batch's. */
		assert_int_equal(plog_epochs_latest(&log->epochs), r->epochs[stop - 1]);
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
	free(r->m.bytes);
	free(r);
	return stats.mutations;
}

static void sweep(enum wal_vfs_crash_mode mode, bool lose_dir_ops, uint64_t seed)
{
	uint64_t total = run_case(0, mode, lose_dir_ops, seed, false);
	assert_true(total > 50);
	if (seed == 100) {
		fprintf(stderr, "the script makes %llu mutations\n", (unsigned long long)total);
	}
	for (uint64_t n = 0; n <= total; n++) {
		run_case(n, mode, lose_dir_ops, seed + n, true);
	}
}

static void test_crash_drop_unsynced(void **state)
{
	(void)state;
	sweep(WAL_VFS_CRASH_DROP_UNSYNCED, false, 100);
	sweep(WAL_VFS_CRASH_DROP_UNSYNCED, true, 200);
}

static void test_crash_torn(void **state)
{
	(void)state;
	sweep(WAL_VFS_CRASH_TORN, false, 300);
	sweep(WAL_VFS_CRASH_TORN, true, 400);
}

static void test_crash_scrambled(void **state)
{
	(void)state;
	sweep(WAL_VFS_CRASH_SCRAMBLE, false, 500);
	sweep(WAL_VFS_CRASH_SCRAMBLE, true, 600);
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
