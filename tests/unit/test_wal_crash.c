/*
 * Unit test: crash at every write/sync point of a scripted workload, then
 * recover and check against a model.
 *
 * The workload (appends, syncs, hard-state saves, truncations that line new
 * entries up with stale ones, local snapshots with compaction and segment
 * reuse, an installed snapshot with reset) runs on the fault vfs with
 * power_off_after(N) for every N from 0 to the number of mutating calls the
 * whole workload makes. The op that hits the power-off fails; the vfs then
 * simulates the crash (torn, scrambled or dropped unsynced writes, lost
 * directory operations) and the WAL is opened again.
 *
 * What recovery returns must be one of the states the WAL could legally be
 * in: the model's state before the interrupted op or after it, with any
 * suffix the WAL never claimed durable possibly missing:
 *   - every entry up to the durable index the WAL reported after the last
 *     completed op is present (unless the interrupted op truncated it);
 *   - nothing else: no entry that was never appended, no stale entry from
 *     before a completed truncation, no entry whose content differs;
 *   - the snapshot and the hard state are the old or the new one.
 * Then the recovered log must accept new entries that survive another
 * crash: the torn tail was repaired for good.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "os/log.h"
#include "test_wal_util.h"

#define MAX_ENTRIES 256

struct mlog {
	uint64_t snap_index;
	uint64_t snap_term;
	size_t count;
	struct model_entry e[MAX_ENTRIES]; /* e[0].index == snap_index + 1 */
};

struct mstate {
	struct mlog log;
	uint64_t hs_term;
	uint64_t durable; /* what the WAL reported durable */
};

enum op_kind {
	OP_HARD_STATE, /* a = term */
	OP_APPEND,     /* a = first index, b = count, c = term, d = salt */
	OP_SYNC,
	OP_TRUNCATE,   /* a = from index */
	OP_SNAPSHOT,   /* a = index (term from the log) */
	OP_COMPACT,    /* a = up to index */
	OP_INSTALL,    /* a = index, b = term: a leader's snapshot saved */
	OP_RESET,      /* a = index, b = term */
	OP_SPARE,
};

struct op {
	enum op_kind kind;
	uint64_t a, b, c, d;
};

static const struct op workload[] = {
	{OP_HARD_STATE, 1, 0, 0, 0},
	{OP_APPEND, 1, 3, 1, 0},
	{OP_SYNC, 0, 0, 0, 0},
	{OP_APPEND, 4, 3, 1, 0},
	{OP_APPEND, 7, 4, 1, 0},
	{OP_SYNC, 0, 0, 0, 0},
	{OP_APPEND, 11, 15, 1, 0}, /* rolls a segment mid-append */
	{OP_SYNC, 0, 0, 0, 0},
	{OP_SPARE, 0, 0, 0, 0},
	{OP_HARD_STATE, 2, 0, 0, 0},
	{OP_APPEND, 26, 8, 2, 0},
	{OP_APPEND, 34, 8, 2, 0},
	{OP_SYNC, 0, 0, 0, 0},
	{OP_APPEND, 42, 12, 2, 0},
	{OP_SYNC, 0, 0, 0, 0},
	{OP_HARD_STATE, 3, 0, 0, 0},
	{OP_TRUNCATE, 50, 0, 0, 0},
	{OP_APPEND, 50, 1, 3, 0}, /* same size as the old 50: old 51 lines up */
	{OP_SYNC, 0, 0, 0, 0},
	{OP_APPEND, 51, 8, 3, 1},
	{OP_SYNC, 0, 0, 0, 0},
	{OP_SNAPSHOT, 40, 0, 0, 0},
	{OP_COMPACT, 40, 0, 0, 0},
	{OP_APPEND, 59, 20, 3, 1},
	{OP_SYNC, 0, 0, 0, 0},
	{OP_APPEND, 79, 21, 3, 1},
	{OP_SYNC, 0, 0, 0, 0},
	{OP_TRUNCATE, 95, 0, 0, 0},
	{OP_APPEND, 95, 5, 3, 1}, /* identical sizes again */
	{OP_SNAPSHOT, 90, 0, 0, 0},
	{OP_COMPACT, 90, 0, 0, 0},
	{OP_SYNC, 0, 0, 0, 0},
	{OP_HARD_STATE, 5, 0, 0, 0},
	{OP_INSTALL, 130, 5, 0, 0},
	{OP_RESET, 130, 5, 0, 0},
	{OP_APPEND, 131, 10, 5, 2},
	{OP_SYNC, 0, 0, 0, 0},
	{OP_APPEND, 141, 10, 5, 2},
	{OP_SYNC, 0, 0, 0, 0},
	{OP_TRUNCATE, 145, 0, 0, 0},
	{OP_APPEND, 145, 12, 5, 3},
	{OP_SYNC, 0, 0, 0, 0},
	{OP_SNAPSHOT, 150, 0, 0, 0},
	{OP_COMPACT, 150, 0, 0, 0},
	{OP_APPEND, 157, 6, 5, 3}, /* never synced */
};

static uint64_t mlog_last(const struct mlog *l)
{
	return l->snap_index + l->count;
}

static uint64_t mlog_term_at(const struct mlog *l, uint64_t index)
{
	if (index == l->snap_index) {
		return l->snap_term;
	}
	assert_true(index > l->snap_index && index <= mlog_last(l));
	return l->e[index - l->snap_index - 1].term;
}

/* Raft's rule for a snapshot arriving over a log: keep the entries after it
 * only if the log holds the snapshot's last entry with the same term. */
static void mlog_apply_snapshot(struct mlog *l, uint64_t index, uint64_t term)
{
	if (index >= l->snap_index && index <= mlog_last(l) && mlog_term_at(l, index) == term) {
		size_t drop = (size_t)(index - l->snap_index);
		memmove(l->e, l->e + drop, (l->count - drop) * sizeof(l->e[0]));
		l->count -= drop;
	} else {
		l->count = 0;
	}
	l->snap_index = index;
	l->snap_term = term;
}

/* Runs one op; on success updates the model. */
static enum keel_err run_op(struct wal_fixture *fx, const struct op *op, struct mstate *m)
{
	struct wal *wal = &fx->wal;
	char errmsg[WAL_ERRMSG_SIZE];
	enum keel_err err = KEEL_OK;
	switch (op->kind) {
	case OP_HARD_STATE: {
		struct wal_hard_state hs = {.term = op->a, .voted_for = op->a % 3};
		err = wal_save_hard_state(wal, &hs);
		if (err == KEEL_OK) {
			m->hs_term = op->a;
		}
		break;
	}
	case OP_APPEND: {
		struct model_entry e[64];
		for (uint64_t i = 0; i < op->b; i++) {
			e[i] = (struct model_entry){.index = op->a + i, .term = op->c, .salt = op->d};
		}
		err = append_model(wal, e, (size_t)op->b);
		if (err == KEEL_OK) {
			assert_int_equal(mlog_last(&m->log) + 1, op->a);
			memcpy(&m->log.e[m->log.count], e, (size_t)op->b * sizeof(e[0]));
			m->log.count += (size_t)op->b;
		}
		break;
	}
	case OP_SYNC:
		err = wal_sync(wal);
		break;
	case OP_TRUNCATE:
		err = wal_truncate_suffix(wal, op->a);
		if (err == KEEL_OK) {
			m->log.count = (size_t)(op->a - 1 - m->log.snap_index);
		}
		break;
	case OP_SNAPSHOT: {
		uint64_t term = mlog_term_at(&m->log, op->a);
		err = wal_snapshot_save(&fx->config, op->a, term, "cfg", 3, "state", 5, errmsg);
		if (err == KEEL_OK) {
			mlog_apply_snapshot(&m->log, op->a, term);
		}
		break;
	}
	case OP_COMPACT:
		err = wal_compact(wal, op->a);
		break;
	case OP_INSTALL:
		err = wal_snapshot_save(&fx->config, op->a, op->b, "cfg2", 4, "leader", 6, errmsg);
		if (err == KEEL_OK) {
			mlog_apply_snapshot(&m->log, op->a, op->b);
		}
		break;
	case OP_RESET:
		err = wal_reset(wal, op->a, op->b);
		break;
	case OP_SPARE:
		err = wal_prepare_spare(wal);
		break;
	}
	if (err == KEEL_OK) {
		m->durable = wal_durable_index(wal);
	}
	return err;
}

/* The model state the interrupted op would have produced. */
static void apply_interrupted(const struct op *op, struct mstate *m)
{
	switch (op->kind) {
	case OP_HARD_STATE:
		m->hs_term = op->a;
		break;
	case OP_APPEND:
		for (uint64_t i = 0; i < op->b; i++) {
			m->log.e[m->log.count++] = (struct model_entry){
				.index = op->a + i, .term = op->c, .salt = op->d};
		}
		break;
	case OP_TRUNCATE:
		m->log.count = (size_t)(op->a - 1 - m->log.snap_index);
		break;
	case OP_SNAPSHOT:
		mlog_apply_snapshot(&m->log, op->a, mlog_term_at(&m->log, op->a));
		break;
	case OP_INSTALL:
		mlog_apply_snapshot(&m->log, op->a, op->b);
		break;
	case OP_SYNC:
	case OP_COMPACT:
	case OP_RESET:
	case OP_SPARE:
		break;
	}
}

/* Does `rec` match candidate log `cand`, given what was durable in
 * `before`? See the file comment. */
static bool acceptable(const struct wal_recovered *rec, const struct mlog *cand,
		       const struct mstate *before, char *why, size_t why_size)
{
	uint64_t snap = rec->has_snapshot ? rec->snapshot.index : 0;
	uint64_t snap_term = rec->has_snapshot ? rec->snapshot.term : 0;
	if (snap != cand->snap_index || snap_term != cand->snap_term) {
		snprintf(why, why_size, "snapshot %llu/%llu, candidate %llu/%llu",
			 (unsigned long long)snap, (unsigned long long)snap_term,
			 (unsigned long long)cand->snap_index, (unsigned long long)cand->snap_term);
		return false;
	}
	if (rec->entry_count > cand->count) {
		snprintf(why, why_size, "%zu entries, candidate has %zu", rec->entry_count,
			 cand->count);
		return false;
	}
	for (size_t i = 0; i < rec->entry_count; i++) {
		if (!entry_matches(&rec->entries[i], &cand->e[i])) {
			snprintf(why, why_size, "entry %llu differs (term %llu vs %llu)",
				 (unsigned long long)rec->entries[i].index,
				 (unsigned long long)rec->entries[i].term,
				 (unsigned long long)cand->e[i].term);
			return false;
		}
	}
	/* Entries durable before the interrupted op, unless the candidate no
	 * longer holds them (truncated or replaced by a snapshot). */
	uint64_t need = before->durable;
	const struct mlog *old = &before->log;
	for (uint64_t idx = cand->snap_index + 1; idx <= need; idx++) {
		bool in_old = idx > old->snap_index && idx <= mlog_last(old);
		bool same = in_old && idx <= mlog_last(cand) &&
			    memcmp(&old->e[idx - old->snap_index - 1], &cand->e[idx - cand->snap_index - 1],
				   sizeof(struct model_entry)) == 0;
		if (!same) {
			need = idx - 1;
			break;
		}
	}
	uint64_t got = rec->has_snapshot ? rec->snapshot.index + rec->entry_count : rec->entry_count;
	if (got < need) {
		snprintf(why, why_size, "recovered up to %llu, %llu was durable",
			 (unsigned long long)got, (unsigned long long)need);
		return false;
	}
	return true;
}

struct crash_case {
	uint64_t power_budget;
	enum wal_vfs_crash_mode mode;
	bool lose_dir_ops;
	uint64_t seed;
};

static struct mstate before;
static struct mstate after;

static void check_recovery(struct wal_fixture *fx, const struct crash_case *cc)
{
	char why[2][200] = {"", ""};
	const struct mlog *cands[2] = {&before.log, &after.log};
	bool ok = false;
	for (int c = 0; c < 2 && !ok; c++) {
		ok = acceptable(&fx->rec, cands[c], &before, why[c], sizeof(why[c]));
	}
	uint64_t hs = fx->rec.hard_state.term;
	if (!ok || (hs != before.hs_term && hs != after.hs_term)) {
		fprintf(stderr,
			"crash after %llu mutations (mode %d, lose_dir_ops %d): %s / %s; hard "
			"state %llu (want %llu or %llu); notes: %s\n",
			(unsigned long long)cc->power_budget, cc->mode, cc->lose_dir_ops, why[0],
			why[1], (unsigned long long)hs, (unsigned long long)before.hs_term,
			(unsigned long long)after.hs_term, fx->rec.notes);
		fail();
	}
}

/* After recovery: new entries go on top and survive the next crash. */
static void check_continuation(struct wal_fixture *fx)
{
	struct wal_recovered *rec = &fx->rec;
	static struct model_entry kept[MAX_ENTRIES + 8];
	size_t n = rec->entry_count;
	for (size_t i = 0; i < n; i++) { /* the model entry of each recovered one */
		const struct wal_entry *e = &rec->entries[i];
		const struct mlog *l = &before.log;
		bool found = false;
		for (int c = 0; c < 2 && !found; c++) {
			l = c == 0 ? &before.log : &after.log;
			if (e->index > l->snap_index && e->index <= mlog_last(l)) {
				kept[i] = l->e[e->index - l->snap_index - 1];
				found = entry_matches(e, &kept[i]);
			}
		}
		assert_true(found);
	}
	uint64_t term = KEEL_MAX(rec->last_term, rec->hard_state.term);
	struct wal_hard_state hs = {.term = term};
	assert_int_equal(wal_save_hard_state(&fx->wal, &hs), KEEL_OK);
	for (size_t i = 0; i < 4; i++) {
		kept[n + i] = (struct model_entry){.index = rec->last_index + 1 + i, .term = term,
						   .salt = 7};
	}
	assert_int_equal(append_model(&fx->wal, kept + n, 4), KEEL_OK);
	assert_int_equal(wal_sync(&fx->wal), KEEL_OK);
	bool had_snapshot = rec->has_snapshot;
	uint64_t snap = rec->snapshot.index;
	fixture_crash(fx, WAL_VFS_CRASH_SCRAMBLE, true);
	enum keel_err err = fixture_open(fx);
	if (err != KEEL_OK) {
		fprintf(stderr, "reopen after continuing: %s\n", fx->wal.errmsg);
	}
	assert_int_equal(err, KEEL_OK);
	assert_int_equal(fx->rec.has_snapshot, had_snapshot);
	assert_int_equal(fx->rec.snapshot.index, snap);
	assert_log(&fx->rec, kept, n + 4);
}

/* Runs the workload until the power goes off; returns the mutations made. */
static uint64_t run_case(const struct crash_case *cc, bool crash)
{
	struct wal_fixture fx;
	fixture_init(&fx, cc->seed);
	memset(&before, 0, sizeof(before));
	if (crash) {
		wal_vfs_fault_power_off_after(&fx.vfs, cc->power_budget);
	}
	enum keel_err err = fixture_open(&fx);
	size_t step = 0;
	for (; err == KEEL_OK && step < KEEL_ARRAY_SIZE(workload); step++) {
		after = before;
		err = run_op(&fx, &workload[step], &after);
		if (err == KEEL_OK) {
			before = after;
		}
	}
	if (err != KEEL_OK) {
		assert_true(crash);
		if (!wal_vfs_fault_powered_off(&fx.vfs)) {
			fprintf(stderr, "step %zu failed without a crash: %s\n", step - 1,
				fx.open ? fx.wal.errmsg : "open");
		}
		assert_true(wal_vfs_fault_powered_off(&fx.vfs));
		after = before;
		if (fx.open) {
			apply_interrupted(&workload[step - 1], &after);
		}
	} else {
		after = before;
	}
	struct wal_vfs_fault_stats stats;
	wal_vfs_fault_get_stats(&fx.vfs, &stats);
	if (crash) {
		fixture_crash(&fx, cc->mode, cc->lose_dir_ops);
		err = fixture_open(&fx);
		if (err != KEEL_OK) {
			fprintf(stderr, "crash after %llu mutations (mode %d, lose %d): open: %s\n",
				(unsigned long long)cc->power_budget, cc->mode, cc->lose_dir_ops,
				fx.wal.errmsg);
		}
		assert_int_equal(err, KEEL_OK);
		check_recovery(&fx, cc);
		check_continuation(&fx);
	} else {
		assert_int_equal(before.log.count, 6 + (156 - 150));
	}
	fixture_free(&fx);
	return stats.mutations;
}

/* Every crash point, `seeds` times with different random crash outcomes. */
static void sweep(enum wal_vfs_crash_mode mode, bool lose_dir_ops, uint64_t seed, int seeds)
{
	struct crash_case full = {.seed = seed};
	uint64_t total = run_case(&full, false);
	assert_true(total > 100);
	for (int s = 0; s < seeds; s++) {
		for (uint64_t n = 0; n <= total; n++) {
			struct crash_case cc = {.power_budget = n, .mode = mode,
						.lose_dir_ops = lose_dir_ops,
						.seed = seed + (uint64_t)s * 100000 + n};
			run_case(&cc, true);
		}
	}
}

static void test_crash_everywhere_drop_unsynced(void **state)
{
	(void)state;
	sweep(WAL_VFS_CRASH_DROP_UNSYNCED, false, 1000, 1);
}

static void test_crash_everywhere_torn_lose_dir_ops(void **state)
{
	(void)state;
	sweep(WAL_VFS_CRASH_TORN, true, 2000, 8);
}

static void test_crash_everywhere_scrambled_lose_dir_ops(void **state)
{
	(void)state;
	sweep(WAL_VFS_CRASH_SCRAMBLE, true, 3000, 8);
}

static void test_crash_everywhere_torn_keep_dir_ops(void **state)
{
	(void)state;
	sweep(WAL_VFS_CRASH_TORN, false, 4000, 4);
}

int main(void)
{
	/* Pruning old snapshots fails (and warns) whenever the power goes off
	 * right then; the warnings are expected here. */
	keel_log_set_level(KEEL_LOG_ERROR);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crash_everywhere_drop_unsynced),
		cmocka_unit_test(test_crash_everywhere_torn_lose_dir_ops),
		cmocka_unit_test(test_crash_everywhere_scrambled_lose_dir_ops),
		cmocka_unit_test(test_crash_everywhere_torn_keep_dir_ops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
