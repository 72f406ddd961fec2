/* Unit tests: the synchronous WAL API on the fault vfs — append, sync,
 * segment rolls, truncation (and the stale-record hazard), compaction and
 * spare reuse, reset after an installed snapshot, hard state, and recovery
 * from a crash with and without unsynced data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_wal_util.h"

#define MAX_MODEL 2048

struct model {
	struct model_entry entries[MAX_MODEL];
	size_t count;
	uint64_t salt;
};

/* Appends indexes from the model's end: `count` entries of `term`, in
 * batches of `batch`, syncing after each batch when `sync`. */
static void grow(struct wal_fixture *fx, struct model *m, uint64_t first, size_t count,
		 uint64_t term, size_t batch, bool sync)
{
	for (size_t done = 0; done < count;) {
		size_t n = KEEL_MIN(batch, count - done);
		struct model_entry *e = &m->entries[m->count];
		for (size_t i = 0; i < n; i++) {
			e[i] = (struct model_entry){.index = first + done + i, .term = term,
						    .salt = m->salt};
		}
		assert_int_equal(append_model(&fx->wal, e, n), KEEL_OK);
		m->count += n;
		done += n;
		if (sync) {
			assert_int_equal(wal_sync(&fx->wal), KEEL_OK);
		}
	}
}

static void save_term(struct wal_fixture *fx, uint64_t term, uint64_t vote)
{
	struct wal_hard_state hs = {.term = term, .voted_for = vote};
	assert_int_equal(wal_save_hard_state(&fx->wal, &hs), KEEL_OK);
}

static size_t count_files(struct wal_fixture *fx, enum wal_file_kind kind);

static void test_fresh_open(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 1);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_false(fx.rec.has_hard_state);
	assert_false(fx.rec.has_snapshot);
	assert_int_equal(fx.rec.entry_count, 0);
	assert_int_equal(fx.rec.last_index, 0);
	assert_int_equal(wal_last_index(&fx.wal), 0);
	/* Bad appends change nothing and are not sticky. */
	struct model_entry bad = {.index = 2, .term = 1};
	assert_int_equal(append_model(&fx.wal, &bad, 1), KEEL_INVAL);
	assert_non_null(strstr(fx.wal.errmsg, "expected 1"));
	assert_false(wal_failed(&fx.wal));
	fixture_free(&fx);
}

static void test_append_sync_reopen_many_segments(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 2);
	static struct model m;
	memset(&m, 0, sizeof(m));
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	save_term(&fx, 3, 1);
	grow(&fx, &m, 1, 100, 1, 7, true);
	grow(&fx, &m, 101, 100, 3, 13, true);
	assert_true(count_files(&fx, WAL_FILE_SEGMENT) > 5); /* 4 KiB segments rolled */
	assert_int_equal(wal_durable_index(&fx.wal), 200);
	assert_int_equal(wal_durable_term(&fx.wal), 3);
	assert_int_equal(wal_term_at(&fx.wal, 100), 1);
	assert_int_equal(wal_term_at(&fx.wal, 101), 3);
	fixture_crash(&fx, WAL_VFS_CRASH_DROP_UNSYNCED, true);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_true(fx.rec.has_hard_state);
	assert_int_equal(fx.rec.hard_state.term, 3);
	assert_int_equal(fx.rec.hard_state.voted_for, 1);
	assert_log(&fx.rec, m.entries, m.count);
	assert_int_equal(fx.rec.last_index, 200);
	assert_int_equal(fx.rec.last_term, 3);
	assert_string_equal(fx.rec.notes, "");
	/* Appending continues after recovery. */
	grow(&fx, &m, 201, 10, 3, 10, true);
	fixture_crash(&fx, WAL_VFS_CRASH_DROP_UNSYNCED, true);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_log(&fx.rec, m.entries, m.count);
	fixture_free(&fx);
}

static void test_unsynced_entries_may_vanish(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 3);
	static struct model m;
	memset(&m, 0, sizeof(m));
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	save_term(&fx, 1, 0);
	grow(&fx, &m, 1, 30, 1, 5, true);
	size_t synced = m.count;
	grow(&fx, &m, 31, 40, 1, 5, false); /* written (buffer flushes), not synced */
	/* Segment rolls sync the segment they close: more may be durable. */
	uint64_t durable = wal_durable_index(&fx.wal);
	assert_true(durable >= synced);
	assert_true(durable < 70);
	fixture_crash(&fx, WAL_VFS_CRASH_DROP_UNSYNCED, false);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_int_equal(fx.rec.entry_count, durable);
	assert_log(&fx.rec, m.entries, (size_t)durable);
	fixture_free(&fx);
}

/* The hazard: after a truncation, a rewritten entry of the same size makes
 * an old, checksum-valid entry line up right after the new tail. */
static void test_truncation_never_resurrects_stale_entries(void **state)
{
	(void)state;
	for (int variant = 0; variant < 2; variant++) {
		struct wal_fixture fx;
		fixture_init(&fx, 4);
		static struct model m;
		memset(&m, 0, sizeof(m));
		assert_int_equal(fixture_open(&fx), KEEL_OK);
		save_term(&fx, 4, 0);
		grow(&fx, &m, 1, 15, 1, 15, true);
		grow(&fx, &m, 16, 2, 4, 2, true); /* old 16 and 17, term 4 */
		assert_int_equal(wal_truncate_suffix(&fx.wal, 16), KEEL_OK);
		assert_int_equal(wal_last_index(&fx.wal), 15);
		assert_int_equal(wal_last_term(&fx.wal), 1);
		m.count = 15;
		/* New 16 with term 3, same payload size and salt as the old one. */
		struct model_entry e = {.index = 16, .term = 3, .salt = 0};
		assert_int_equal(append_model(&fx.wal, &e, 1), KEEL_OK);
		m.entries[m.count++] = e;
		if (variant == 1) {
			assert_int_equal(wal_sync(&fx.wal), KEEL_OK);
		}
		fixture_crash(&fx, WAL_VFS_CRASH_TORN, true);
		assert_int_equal(fixture_open(&fx), KEEL_OK);
		/* 1..15 always; new 16 only if synced (or lucky); never old 17. */
		assert_true(fx.rec.entry_count == 15 || fx.rec.entry_count == 16);
		if (variant == 1) {
			assert_int_equal(fx.rec.entry_count, 16);
		}
		assert_log(&fx.rec, m.entries, fx.rec.entry_count);
		for (size_t i = 0; i < fx.rec.entry_count; i++) {
			assert_true(fx.rec.entries[i].term != 4);
		}
		fixture_free(&fx);
	}
}

static void test_truncate_arguments(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 5);
	static struct model m;
	memset(&m, 0, sizeof(m));
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	save_term(&fx, 1, 0);
	grow(&fx, &m, 1, 10, 1, 10, true);
	assert_int_equal(wal_truncate_suffix(&fx.wal, 11), KEEL_OK); /* no-op */
	assert_int_equal(wal_truncate_suffix(&fx.wal, 12), KEEL_INVAL);
	assert_int_equal(wal_truncate_suffix(&fx.wal, 0), KEEL_INVAL);
	assert_false(wal_failed(&fx.wal));
	/* Truncating everything, then appending again from 1. */
	assert_int_equal(wal_truncate_suffix(&fx.wal, 1), KEEL_OK);
	assert_int_equal(wal_last_index(&fx.wal), 0);
	m.count = 0;
	m.salt = 9;
	grow(&fx, &m, 1, 3, 1, 3, true);
	fixture_crash(&fx, WAL_VFS_CRASH_SCRAMBLE, true);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_log(&fx.rec, m.entries, m.count);
	fixture_free(&fx);
}

struct kind_count {
	enum wal_file_kind kind;
	size_t count;
};

static void count_one(void *arg, const char *name)
{
	struct kind_count *kc = arg;
	uint64_t a;
	uint64_t b;
	kc->count += wal_parse_file_name(name, &a, &b) == kc->kind;
}

static size_t count_files(struct wal_fixture *fx, enum wal_file_kind kind)
{
	struct kind_count kc = {.kind = kind};
	assert_int_equal(wal_vfs_list(&fx->vfs, TEST_DIR, count_one, &kc), KEEL_OK);
	return kc.count;
}

static void take_snapshot(struct wal_fixture *fx, uint64_t index, uint64_t term)
{
	char payload[64];
	snprintf(payload, sizeof(payload), "state at %llu", (unsigned long long)index);
	char errmsg[WAL_ERRMSG_SIZE];
	assert_int_equal(wal_snapshot_save(&fx->config, index, term, "m", 1, payload,
					   strlen(payload), errmsg),
			 KEEL_OK);
}

static void test_compaction_reuses_segments(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 6);
	static struct model m;
	memset(&m, 0, sizeof(m));
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	save_term(&fx, 2, 0);
	assert_int_equal(wal_compact(&fx.wal, 1), KEEL_INVAL); /* no snapshot yet */
	uint64_t next = 1;
	for (int round = 0; round < 6; round++) {
		grow(&fx, &m, next, 60, 2, 9, true);
		next += 60;
		uint64_t snap = next - 10;
		take_snapshot(&fx, snap, 2);
		assert_int_equal(wal_compact(&fx.wal, snap), KEEL_OK);
		assert_true(count_files(&fx, WAL_FILE_SEGMENT) <= 4);
		assert_true(count_files(&fx, WAL_FILE_SPARE) <= 2);
		assert_true(count_files(&fx, WAL_FILE_SNAPSHOT) <= 2);
	}
	struct wal_vfs_fault_stats stats;
	wal_vfs_fault_get_stats(&fx.vfs, &stats);
	assert_true(stats.calls[WAL_VFS_OP_RENAME] > 20); /* spares were recycled */
	fixture_crash(&fx, WAL_VFS_CRASH_DROP_UNSYNCED, true);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_true(fx.rec.has_snapshot);
	assert_int_equal(fx.rec.snapshot.index, next - 10);
	assert_int_equal(fx.rec.snapshot.term, 2);
	assert_int_equal(fx.rec.snapshot.membership_size, 1);
	/* Entries after the snapshot, exactly. */
	assert_log(&fx.rec, m.entries + m.count - 9, 9);
	fixture_free(&fx);
}

static void test_reset_after_installed_snapshot(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 7);
	static struct model m;
	memset(&m, 0, sizeof(m));
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	save_term(&fx, 5, 0);
	grow(&fx, &m, 1, 40, 1, 8, true);
	/* The leader sends a snapshot at 100 (term 5): a different history. */
	take_snapshot(&fx, 100, 5);
	assert_int_equal(wal_reset(&fx.wal, 100, 4), KEEL_INVAL); /* no such file */
	assert_int_equal(wal_reset(&fx.wal, 100, 5), KEEL_OK);
	assert_int_equal(wal_last_index(&fx.wal), 100);
	assert_int_equal(wal_last_term(&fx.wal), 5);
	m.count = 0;
	m.salt = 1;
	grow(&fx, &m, 101, 20, 5, 6, true);
	fixture_crash(&fx, WAL_VFS_CRASH_SCRAMBLE, true);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_int_equal(fx.rec.snapshot.index, 100);
	assert_log(&fx.rec, m.entries, m.count);
	fixture_free(&fx);
}

/* A crash after the installed snapshot was saved but before wal_reset: the
 * old log's entry at the snapshot index has another term, so the entries
 * after it are dropped. */
static void test_snapshot_conflict_drops_old_history(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 8);
	static struct model m;
	memset(&m, 0, sizeof(m));
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	save_term(&fx, 6, 0);
	grow(&fx, &m, 1, 40, 2, 8, true);
	take_snapshot(&fx, 30, 6);
	fixture_crash(&fx, WAL_VFS_CRASH_DROP_UNSYNCED, false);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_int_equal(fx.rec.snapshot.index, 30);
	assert_int_equal(fx.rec.entry_count, 0);
	assert_int_equal(fx.rec.last_index, 30);
	assert_int_equal(fx.rec.last_term, 6);
	assert_non_null(strstr(fx.rec.notes, "dropped"));
	/* Appends continue after the snapshot; the old 31..40 stay gone. */
	m.count = 0;
	m.salt = 3;
	grow(&fx, &m, 31, 5, 6, 5, true);
	fixture_crash(&fx, WAL_VFS_CRASH_DROP_UNSYNCED, false);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_log(&fx.rec, m.entries, m.count);
	/* A snapshot that matches the log keeps the entries after it. */
	take_snapshot(&fx, 33, 6);
	fixture_close(&fx);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_int_equal(fx.rec.snapshot.index, 33);
	assert_log(&fx.rec, m.entries + 3, 2);
	fixture_free(&fx);
}

static void test_hard_state_round_trip_and_check(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 9);
	static struct model m;
	memset(&m, 0, sizeof(m));
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	uint8_t extra[3] = {7, 8, 9};
	struct wal_hard_state hs = {.term = 2, .voted_for = 5, .commit_index = 4,
				    .extra_size = 3, .extra = extra};
	assert_int_equal(wal_save_hard_state(&fx.wal, &hs), KEEL_OK);
	hs.term = 3;
	assert_int_equal(wal_save_hard_state(&fx.wal, &hs), KEEL_OK);
	fixture_crash(&fx, WAL_VFS_CRASH_TORN, true);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_int_equal(fx.rec.hard_state.term, 3);
	assert_int_equal(fx.rec.hard_state.voted_for, 5);
	assert_int_equal(fx.rec.hard_state.commit_index, 4);
	assert_int_equal(fx.rec.hard_state.extra_size, 3);
	assert_memory_equal(fx.rec.hard_state.extra, extra, 3);
	/* Entries of a term above the saved term: the hard state is behind. */
	grow(&fx, &m, 1, 5, 7, 5, true);
	fixture_close(&fx);
	assert_int_equal(fixture_open(&fx), KEEL_CORRUPT);
	assert_non_null(strstr(fx.wal.errmsg, "hard state"));
	assert_non_null(strstr(fx.wal.errmsg, "term 7"));
	fixture_free(&fx);
}

static void test_spares_survive_restart(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 10);
	static struct model m;
	memset(&m, 0, sizeof(m));
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	save_term(&fx, 1, 0);
	assert_int_equal(wal_prepare_spare(&fx.wal), KEEL_OK);
	assert_int_equal(wal_prepare_spare(&fx.wal), KEEL_OK);
	assert_int_equal(wal_prepare_spare(&fx.wal), KEEL_OK); /* pool full: no-op */
	assert_int_equal(count_files(&fx, WAL_FILE_SPARE), 2);
	grow(&fx, &m, 1, 5, 1, 5, true);
	assert_int_equal(count_files(&fx, WAL_FILE_SPARE), 1); /* one became a segment */
	fixture_crash(&fx, WAL_VFS_CRASH_DROP_UNSYNCED, false);
	/* A spare of the wrong size is removed at open. */
	fx.config.segment_size_bytes = 2 * TEST_SEGMENT_SIZE;
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_int_equal(count_files(&fx, WAL_FILE_SPARE), 0);
	assert_log(&fx.rec, m.entries, m.count);
	fixture_free(&fx);
}

static void test_spare_prepared_in_steps(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 13);
	fx.config.spare_segments = 1;
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	bool done = false;
	int steps = 0;
	while (!done) {
		assert_int_equal(wal_prepare_spare_step(&fx.wal, 1000, &done), KEEL_OK);
		steps++;
		assert_int_equal(count_files(&fx, WAL_FILE_SPARE), 1); /* partial or complete */
	}
	assert_int_equal(steps, (TEST_SEGMENT_SIZE + 999) / 1000);
	assert_int_equal(fx.wal.spare_count, 1);
	/* Start another, then let compaction refill the pool: the partial one
	 * is dropped at the next step. */
	static struct model m;
	memset(&m, 0, sizeof(m));
	save_term(&fx, 1, 0);
	grow(&fx, &m, 1, 40, 1, 8, true); /* takes the spare, rolls segments */
	assert_int_equal(fx.wal.spare_count, 0);
	assert_int_equal(wal_prepare_spare_step(&fx.wal, 1000, &done), KEEL_OK);
	assert_false(done);
	take_snapshot(&fx, 40, 1);
	assert_int_equal(wal_compact(&fx.wal, 40), KEEL_OK);
	assert_int_equal(fx.wal.spare_count, 1); /* a recycled segment */
	assert_int_equal(count_files(&fx, WAL_FILE_SPARE), 2);
	assert_int_equal(wal_prepare_spare_step(&fx.wal, 1000, &done), KEEL_OK);
	assert_true(done);
	assert_int_equal(count_files(&fx, WAL_FILE_SPARE), 1);
	fixture_free(&fx);
}

static void test_large_entries_bypass_the_buffer(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 11);
	fx.config.segment_size_bytes = 64 * 1024;
	fx.config.max_entry_size_bytes = 20000;
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	save_term(&fx, 1, 0);
	static uint8_t big[20001];
	for (size_t i = 0; i < sizeof(big); i++) {
		big[i] = (uint8_t)(i * 13);
	}
	struct wal_entry e[3] = {
		{.index = 1, .term = 1, .size = 20000, .data = big},
		{.index = 2, .term = 1, .size = 3, .data = big},
		{.index = 3, .term = 1, .size = 19999, .data = big + 1},
	};
	assert_int_equal(wal_append(&fx.wal, e, 3), KEEL_OK);
	struct wal_entry too_big = {.index = 4, .term = 1, .size = 20001, .data = big};
	assert_int_equal(wal_append(&fx.wal, &too_big, 1), KEEL_TOOBIG);
	assert_int_equal(wal_sync(&fx.wal), KEEL_OK);
	fixture_crash(&fx, WAL_VFS_CRASH_DROP_UNSYNCED, false);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_int_equal(fx.rec.entry_count, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(fx.rec.entries[i].size, e[i].size);
		assert_memory_equal(fx.rec.entries[i].data, e[i].data, e[i].size);
	}
	fixture_free(&fx);
}

static void test_snapshot_stream_and_verify(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 12);
	assert_int_equal(wal_vfs_mkdir(&fx.vfs, TEST_DIR), KEEL_OK);
	struct wal_snapshot_writer w;
	assert_int_equal(wal_snapshot_begin(&w, &fx.config, 10, 2, "abc", 3), KEEL_OK);
	uint8_t chunk[1000];
	for (int i = 0; i < 50; i++) {
		memset(chunk, i, sizeof(chunk));
		assert_int_equal(wal_snapshot_append(&w, chunk, sizeof(chunk)), KEEL_OK);
	}
	assert_int_equal(wal_snapshot_commit(&w), KEEL_OK);
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct wal_snapshot_reader r;
	char name[WAL_NAME_MAX];
	wal_snapshot_name(name, 10, 2, false);
	assert_int_equal(wal_snapshot_open(&r, &fx.config, name, &arena), KEEL_OK);
	assert_int_equal(r.meta.payload_size, 50000);
	assert_memory_equal(r.meta.membership, "abc", 3);
	size_t total = 0;
	size_t n;
	do {
		assert_int_equal(wal_snapshot_read(&r, chunk, 777, &n), KEEL_OK);
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(chunk[i], (uint8_t)((total + i) / 1000));
		}
		total += n;
	} while (n > 0);
	assert_int_equal(total, 50000);
	wal_snapshot_close(&r);
	/* A damaged payload byte fails the read that reaches the end. */
	char path[WAL_VFS_PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", TEST_DIR, name);
	assert_int_equal(wal_vfs_fault_corrupt(&fx.vfs, path, 20000, 0x40), KEEL_OK);
	struct wal_snapshot_meta meta;
	char errmsg[WAL_ERRMSG_SIZE];
	assert_int_equal(wal_snapshot_verify(&fx.config, name, &arena, &meta, errmsg), KEEL_CORRUPT);
	assert_non_null(strstr(errmsg, "checksum"));
	/* An aborted snapshot leaves nothing behind. */
	assert_int_equal(wal_snapshot_begin(&w, &fx.config, 20, 2, NULL, 0), KEEL_OK);
	assert_int_equal(wal_snapshot_append(&w, chunk, 10), KEEL_OK);
	wal_snapshot_abort(&w);
	assert_int_equal(count_files(&fx, WAL_FILE_SNAPSHOT_TMP), 0);
	/* Pruning keeps the newest two. */
	take_snapshot(&fx, 11, 2);
	take_snapshot(&fx, 12, 2);
	struct wal_snapshot_list list;
	assert_int_equal(wal_snapshot_list(&fx.config, &list, errmsg), KEEL_OK);
	assert_int_equal(list.count, 2);
	assert_int_equal(list.items[0].index, 12);
	assert_int_equal(list.items[1].index, 11);
	keel_arena_close(&arena);
	fixture_free(&fx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fresh_open),
		cmocka_unit_test(test_append_sync_reopen_many_segments),
		cmocka_unit_test(test_unsynced_entries_may_vanish),
		cmocka_unit_test(test_truncation_never_resurrects_stale_entries),
		cmocka_unit_test(test_truncate_arguments),
		cmocka_unit_test(test_compaction_reuses_segments),
		cmocka_unit_test(test_reset_after_installed_snapshot),
		cmocka_unit_test(test_snapshot_conflict_drops_old_history),
		cmocka_unit_test(test_hard_state_round_trip_and_check),
		cmocka_unit_test(test_spares_survive_restart),
		cmocka_unit_test(test_spare_prepared_in_steps),
		cmocka_unit_test(test_large_entries_bypass_the_buffer),
		cmocka_unit_test(test_snapshot_stream_and_verify),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
