/* Unit tests: idempotent producer state (src/plog/producer.c) — the
 * sequence rules, the snapshot codec, and the rebuild from snapshots and
 * the log over the fault vfs: at every crash point of a workload the
 * rebuilt state equals a full scan of the recovered log, and every batch
 * synced before the crash is still detected as a duplicate with its
 * original offset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/crc32c.h"
#include "plog/producer.h"
#include "test_plog_util.h"

static const uint8_t topic_a[PLOG_TOPIC_ID_SIZE] = {7, 7, 7, 7, 7, 7, 7, 7,
						    7, 7, 7, 7, 7, 7, 7, 7};

static struct plog_producer_batch pb(int32_t first_seq, int32_t last_seq, int64_t first_offset,
				     int64_t last_offset)
{
	struct plog_producer_batch b = {first_seq, last_seq, first_offset, last_offset};
	return b;
}

static void test_sequence_rules(void **state)
{
	(void)state;
	struct plog_producers ps;
	plog_producers_init(&ps);
	struct plog_producer_batch dup;
	/* Unknown producers: any sequence (KIP-360). */
	assert_int_equal(plog_producers_check(&ps, 7, 0, 0, 1, NULL), PLOG_SEQ_APPEND);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 42, 43, NULL), PLOG_SEQ_APPEND);

	struct plog_producer_batch b = pb(0, 1, 100, 101);
	assert_int_equal(plog_producers_update(&ps, 7, 0, &b), KEEL_OK);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 0, 1, &dup), PLOG_SEQ_DUPLICATE);
	assert_int_equal(dup.first_offset, 100);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 2, 2, NULL), PLOG_SEQ_APPEND);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 3, 3, NULL), PLOG_SEQ_OUT_OF_ORDER);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 1, 1, NULL), PLOG_SEQ_OUT_OF_ORDER);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 0, 0, NULL), PLOG_SEQ_OUT_OF_ORDER);
	/* Another producer is independent. */
	assert_int_equal(plog_producers_check(&ps, 8, 3, 9, 9, NULL), PLOG_SEQ_APPEND);

	/* Only the last 5 batches are kept. */
	for (int32_t i = 1; i <= 5; i++) {
		b = pb(2 * i, 2 * i + 1, 100 + 2 * i, 101 + 2 * i);
		assert_int_equal(plog_producers_check(&ps, 7, 0, b.first_seq, b.last_seq, NULL),
				 PLOG_SEQ_APPEND);
		assert_int_equal(plog_producers_update(&ps, 7, 0, &b), KEEL_OK);
	}
	assert_int_equal(plog_producers_find(&ps, 7)->count, PLOG_PRODUCER_BATCHES);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 0, 1, NULL), PLOG_SEQ_OUT_OF_ORDER);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 2, 3, &dup), PLOG_SEQ_DUPLICATE);
	assert_int_equal(dup.first_offset, 102);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 10, 11, &dup), PLOG_SEQ_DUPLICATE);
	assert_int_equal(dup.last_offset, 111);

	/* A newer epoch starts at 0; then the old epoch is fenced and its
	 * batches are forgotten. */
	assert_int_equal(plog_producers_check(&ps, 7, 1, 12, 12, NULL), PLOG_SEQ_OUT_OF_ORDER);
	assert_int_equal(plog_producers_check(&ps, 7, 1, 0, 4, NULL), PLOG_SEQ_APPEND);
	b = pb(0, 4, 200, 204);
	assert_int_equal(plog_producers_update(&ps, 7, 1, &b), KEEL_OK);
	assert_int_equal(plog_producers_find(&ps, 7)->count, 1);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 12, 12, NULL), PLOG_SEQ_OLD_EPOCH);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 10, 11, NULL), PLOG_SEQ_OLD_EPOCH);
	assert_int_equal(plog_producers_check(&ps, 7, 1, 5, 5, NULL), PLOG_SEQ_APPEND);

	/* Sequences wrap after INT32_MAX. */
	assert_int_equal(plog_producer_last_seq(INT32_MAX - 1, 3), 1);
	assert_int_equal(plog_producer_last_seq(5, 0), 5);
	b = pb(INT32_MAX - 2, INT32_MAX, 300, 302);
	assert_int_equal(plog_producers_update(&ps, 9, 0, &b), KEEL_OK);
	assert_int_equal(plog_producers_check(&ps, 9, 0, 0, 3, NULL), PLOG_SEQ_APPEND);
	assert_int_equal(plog_producers_check(&ps, 9, 0, 1, 3, NULL), PLOG_SEQ_OUT_OF_ORDER);

	/* Sorted by id whatever the insertion order. */
	for (uint32_t i = 1; i < ps.count; i++) {
		assert_true(ps.items[i - 1].producer_id < ps.items[i].producer_id);
	}
	plog_producers_close(&ps);
}

/* A refused next batch (plog_producers_refuse): the gap behind it is
 * answered like it until a batch is written or the epoch changes. */
static void test_refused_batch_rules(void **state)
{
	(void)state;
	struct plog_producers ps;
	plog_producers_init(&ps);
	struct plog_producer_batch b = pb(0, 2, 100, 102);
	assert_int_equal(plog_producers_update(&ps, 7, 0, &b), KEEL_OK);
	/* Not next in sequence, another epoch, an unknown producer: no mark. */
	plog_producers_refuse(&ps, 7, 0, 5);
	plog_producers_refuse(&ps, 7, 1, 3);
	plog_producers_refuse(&ps, 8, 0, 3);
	assert_int_equal(plog_producers_find(&ps, 7)->refused_seq, -1);
	assert_null(plog_producers_find(&ps, 8));
	assert_int_equal(plog_producers_check(&ps, 7, 0, 6, 8, NULL), PLOG_SEQ_OUT_OF_ORDER);
	/* Batch 3..5 refused: 6..8 behind it is refused alike, 3..5 itself
	 * still goes in, older sequences and other epochs are unchanged. */
	plog_producers_refuse(&ps, 7, 0, 3);
	assert_int_equal(plog_producers_find(&ps, 7)->refused_seq, 3);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 6, 8, NULL), PLOG_SEQ_AFTER_REFUSED);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 30, 30, NULL), PLOG_SEQ_AFTER_REFUSED);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 3, 5, NULL), PLOG_SEQ_APPEND);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 0, 2, NULL), PLOG_SEQ_DUPLICATE);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 1, 1, NULL), PLOG_SEQ_OUT_OF_ORDER);
	assert_int_equal(plog_producers_check(&ps, 7, 1, 6, 8, NULL), PLOG_SEQ_OUT_OF_ORDER);
	/* Written: the mark is gone, a gap is out of order again. */
	b = pb(3, 5, 103, 105);
	assert_int_equal(plog_producers_update(&ps, 7, 0, &b), KEEL_OK);
	assert_int_equal(plog_producers_find(&ps, 7)->refused_seq, -1);
	assert_int_equal(plog_producers_check(&ps, 7, 0, 9, 9, NULL), PLOG_SEQ_OUT_OF_ORDER);
	/* Across the wrap after INT32_MAX. */
	b = pb(INT32_MAX - 2, INT32_MAX, 300, 302);
	assert_int_equal(plog_producers_update(&ps, 9, 0, &b), KEEL_OK);
	plog_producers_refuse(&ps, 9, 0, 0);
	assert_int_equal(plog_producers_check(&ps, 9, 0, 4, 4, NULL), PLOG_SEQ_AFTER_REFUSED);
	assert_int_equal(plog_producers_check(&ps, 9, 0, INT32_MAX - 5, INT32_MAX - 3, NULL),
			 PLOG_SEQ_OUT_OF_ORDER);
	/* A snapshot does not carry the mark (memory only). */
	size_t size = 0;
	uint8_t *data = plog_producers_encode(&ps, 400, 3, topic_a, &size);
	assert_non_null(data);
	struct plog_producers back;
	plog_producers_init(&back);
	int64_t at;
	int32_t epoch;
	uint8_t id[PLOG_TOPIC_ID_SIZE];
	assert_int_equal(plog_producers_decode(&back, data, size, &at, &epoch, id), KEEL_OK);
	assert_int_equal(plog_producers_find(&back, 9)->refused_seq, -1);
	assert_int_equal(plog_producers_check(&back, 9, 0, 4, 4, NULL), PLOG_SEQ_OUT_OF_ORDER);
	free(data);
	plog_producers_close(&back);
	plog_producers_close(&ps);
}

static uint8_t *encode(const struct plog_producers *ps, int64_t offset, size_t *size)
{
	uint8_t *data = plog_producers_encode(ps, offset, 3, topic_a, size);
	assert_non_null(data);
	return data;
}

static void test_snapshot_codec(void **state)
{
	(void)state;
	struct plog_producers ps, back;
	plog_producers_init(&ps);
	plog_producers_init(&back);
	for (int64_t pid = 1; pid <= 4; pid++) {
		for (int32_t i = 0; i < (int32_t)pid + 2; i++) {
			struct plog_producer_batch b = pb(i, i, 10 * pid + i, 10 * pid + i);
			assert_int_equal(plog_producers_update(&ps, pid * 1000, (int16_t)pid, &b),
					 KEEL_OK);
		}
	}
	size_t size;
	uint8_t *data = encode(&ps, 100, &size);
	int64_t offset;
	int32_t epoch;
	uint8_t tid[PLOG_TOPIC_ID_SIZE];
	assert_int_equal(plog_producers_decode(&back, data, size, &offset, &epoch, tid), KEEL_OK);
	assert_int_equal(offset, 100);
	assert_int_equal(epoch, 3);
	assert_memory_equal(tid, topic_a, PLOG_TOPIC_ID_SIZE);
	assert_int_equal(back.count, 4);
	size_t size2;
	uint8_t *data2 = encode(&back, 100, &size2);
	assert_int_equal(size2, size);
	assert_memory_equal(data2, data, size);
	free(data2);
	assert_int_equal(plog_producers_find(&back, 4000)->count, PLOG_PRODUCER_BATCHES);

	/* Every bit flip and every truncation is refused, leaving it empty. */
	for (size_t i = 0; i < size; i++) {
		for (int bit = 0; bit < 8; bit += 3) {
			data[i] ^= (uint8_t)(1u << bit);
			assert_int_not_equal(
				plog_producers_decode(&back, data, size, &offset, &epoch, tid), KEEL_OK);
			assert_int_equal(back.count, 0);
			data[i] ^= (uint8_t)(1u << bit);
		}
	}
	for (size_t cut = 0; cut < size; cut++) {
		assert_int_not_equal(plog_producers_decode(&back, data, cut, &offset, &epoch, tid),
				     KEEL_OK);
	}
	/* A newer version (checksum fixed up) is UNSUPPORTED. */
	keel_store_be32(data + 8, 2);
	keel_store_be32(data + size - 4, keel_crc32c(0, data, size - 4));
	assert_int_equal(plog_producers_decode(&back, data, size, &offset, &epoch, tid),
			 KEEL_UNSUPPORTED);
	/* A batch at or past the snapshot's offset is refused. */
	free(data);
	data = encode(&ps, 40, &size);
	assert_int_equal(plog_producers_decode(&back, data, size, &offset, &epoch, tid),
			 KEEL_CORRUPT);
	free(data);
	plog_producers_close(&ps);
	plog_producers_close(&back);
}

/* ---- rebuild over the fault vfs ---- */

#define PRODUCERS 3
#define ROUNDS 40

/* An idempotent batch of `count` records of producer pid. */
static size_t idem_batch(uint8_t *out, size_t cap, int64_t pid, int16_t epoch, int32_t seq,
			 int32_t count)
{
	size_t size = build_batch(out, cap, count, 1000 + seq, 1, 40, (uint8_t)('a' + pid));
	keel_store_be64(out + 43, (uint64_t)pid);
	keel_store_be16(out + 51, (uint16_t)epoch);
	keel_store_be32(out + 53, (uint32_t)seq);
	plog_batch_seal(out, size);
	return size;
}

struct sent {
	int64_t pid;
	int16_t epoch;
	int32_t first_seq, last_seq;
	int64_t first_offset;
};

struct workload {
	struct plog_fixture fx;
	struct plog_producers ps;
	int32_t next_seq[PRODUCERS];
	struct sent durable[PRODUCERS]; /* the last batch of each synced before the end */
	bool has_durable[PRODUCERS];
	struct sent pending[PRODUCERS];
	bool has_pending[PRODUCERS];
	int64_t saved_segment; /* active segment base at the last snapshot */
	uint32_t snapshots;
	bool completed;
};

static int64_t active_base(struct plog *log)
{
	struct plog_segment_info info;
	plog_segment_info(log, log->segment_count - 1, &info);
	return info.base_offset;
}

/* Appends like a leader would (check, append, update); false when the
 * power went off. */
static bool append_one(struct workload *w, int p, int16_t epoch)
{
	uint8_t buf[4096];
	int32_t count = 1 + p;
	size_t size = idem_batch(buf, sizeof(buf), 100 + p, epoch, w->next_seq[p], count);
	int32_t last = plog_producer_last_seq(w->next_seq[p], count - 1);
	assert_int_equal(plog_producers_check(&w->ps, 100 + p, epoch, w->next_seq[p], last, NULL),
			 PLOG_SEQ_APPEND);
	struct plog_append_info info;
	if (plog_append(&w->fx.log, buf, size, 1, &info) != KEEL_OK) {
		return false;
	}
	struct plog_producer_batch b = pb(w->next_seq[p], last, info.first_offset, info.last_offset);
	assert_int_equal(plog_producers_update(&w->ps, 100 + p, epoch, &b), KEEL_OK);
	w->pending[p] = (struct sent){100 + p, epoch, w->next_seq[p], last, info.first_offset};
	w->has_pending[p] = true;
	w->next_seq[p] = last + 1;
	return true;
}

static void run_workload(struct workload *w)
{
	struct plog_fixture *fx = &w->fx;
	if (plog_fixture_open(fx) != KEEL_OK) {
		return; /* the power went off at once */
	}
	if (plog_set_topic_id(&fx->log, topic_a) != KEEL_OK) {
		return;
	}
	plog_producers_init(&w->ps);
	w->saved_segment = active_base(&fx->log);
	for (int round = 0; round < ROUNDS; round++) {
		for (int p = 0; p < PRODUCERS; p++) {
			if (!append_one(w, p, 0)) {
				return;
			}
		}
		if (plog_sync(&fx->log, NULL) != KEEL_OK) {
			return;
		}
		for (int p = 0; p < PRODUCERS; p++) {
			if (w->has_pending[p]) {
				w->durable[p] = w->pending[p];
				w->has_durable[p] = true;
			}
		}
		if (active_base(&fx->log) != w->saved_segment) {
			if (plog_producers_save(&fx->log, &w->ps) != KEEL_OK) {
				return;
			}
			w->saved_segment = active_base(&fx->log);
			w->snapshots++;
		}
	}
	w->completed = true;
}

/* The state a full scan of the log gives (no snapshot). */
static void full_scan(struct plog *log, struct plog_producers *out)
{
	size_t size;
	uint8_t *all = read_all(log, plog_log_start_offset(log), 1 << 20, &size);
	plog_producers_init(out);
	assert_int_equal(plog_producers_update_from(out, all, size), KEEL_OK);
	free(all);
}

static void assert_same_state(const struct plog_producers *a, const struct plog_producers *b)
{
	size_t na, nb;
	uint8_t *ea = plog_producers_encode(a, 0, 0, topic_a, &na);
	uint8_t *eb = plog_producers_encode(b, 0, 0, topic_a, &nb);
	assert_non_null(ea);
	assert_non_null(eb);
	assert_int_equal(na, nb);
	assert_memory_equal(ea, eb, na);
	free(ea);
	free(eb);
}

/* After recovery: rebuilt == full scan; every durable last batch is a
 * duplicate with its offset. Returns the rebuild's info. */
static struct plog_producers_rebuild_info check_recovered(struct workload *w)
{
	struct plog *log = &w->fx.log;
	struct plog_producers rebuilt, ref;
	plog_producers_init(&rebuilt);
	struct plog_producers_rebuild_info info;
	assert_int_equal(plog_producers_rebuild(log, &rebuilt, &info), KEEL_OK);
	full_scan(log, &ref);
	assert_same_state(&rebuilt, &ref);
	for (int p = 0; p < PRODUCERS; p++) {
		if (!w->has_durable[p]) {
			continue;
		}
		const struct sent *s = &w->durable[p];
		struct plog_producer_batch dup;
		assert_int_equal(plog_producers_check(&rebuilt, s->pid, s->epoch, s->first_seq,
						      s->last_seq, &dup),
				 PLOG_SEQ_DUPLICATE);
		assert_int_equal(dup.first_offset, s->first_offset);
	}
	plog_producers_close(&rebuilt);
	plog_producers_close(&ref);
	return info;
}

static void test_rebuild_uses_snapshots_and_ignores_stale_ones(void **state)
{
	(void)state;
	struct workload *w = calloc(1, sizeof(*w));
	assert_non_null(w);
	plog_fixture_init(&w->fx, 11);
	run_workload(w);
	assert_true(w->completed);
	assert_true(w->snapshots >= 3);
	plog_fixture_close(&w->fx);
	assert_int_equal(plog_fixture_open(&w->fx), KEEL_OK);
	struct plog_producers_rebuild_info info = check_recovered(w);
	assert_true(info.snapshot_offset > 0);
	assert_int_equal(info.snapshots_ignored, 0);
	int64_t total = plog_log_end_offset(&w->fx.log);
	assert_true(info.scanned_batches < ROUNDS * PRODUCERS / 2);

	/* Truncate below the newest snapshot and write another history under
	 * a newer leader epoch past it: the stale snapshot must not be used. */
	int64_t snap = info.snapshot_offset;
	assert_int_equal(plog_truncate(&w->fx.log, snap - 3), KEEL_OK);
	int64_t end = plog_log_end_offset(&w->fx.log);
	struct plog_producers fresh;
	plog_producers_init(&fresh);
	while (plog_log_end_offset(&w->fx.log) <= snap + 5) {
		uint8_t buf[4096];
		size_t size = idem_batch(buf, sizeof(buf), 555, 0,
					 (int32_t)(plog_log_end_offset(&w->fx.log) - end), 1);
		struct plog_append_info ai;
		assert_int_equal(plog_append(&w->fx.log, buf, size, 2, &ai), KEEL_OK);
	}
	assert_int_equal(plog_sync(&w->fx.log, NULL), KEEL_OK);
	struct plog_producers_rebuild_info info2;
	assert_int_equal(plog_producers_rebuild(&w->fx.log, &fresh, &info2), KEEL_OK);
	assert_true(info2.snapshot_offset < end);
	assert_true(info2.snapshots_ignored >= 1);
	struct plog_producers ref;
	full_scan(&w->fx.log, &ref);
	assert_same_state(&fresh, &ref);
	assert_non_null(plog_producers_find(&fresh, 555));
	assert_true(total > 0);
	plog_producers_close(&ref);
	plog_producers_close(&fresh);

	/* Dropping snapshots from an offset removes them. */
	assert_int_equal(plog_producers_drop_snapshots(&w->fx.log, 0), KEEL_OK);
	assert_int_equal(plog_producers_rebuild(&w->fx.log, &fresh, &info2), KEEL_OK);
	assert_int_equal(info2.snapshot_offset, -1);
	assert_int_equal(info2.snapshots_ignored, 0);
	plog_producers_close(&fresh);
	plog_producers_close(&w->ps);
	plog_fixture_free(&w->fx);
	free(w);
}

/* Cuts the power after `budget` mutations, crashes in `mode`, recovers. */
static uint64_t crash_case(uint64_t budget, enum wal_vfs_crash_mode mode, bool crash)
{
	struct workload *w = calloc(1, sizeof(*w));
	assert_non_null(w);
	plog_fixture_init(&w->fx, budget * 3 + (uint64_t)mode);
	if (crash) {
		wal_vfs_fault_power_off_after(&w->fx.vfs, budget);
	}
	run_workload(w);
	struct wal_vfs_fault_stats stats;
	wal_vfs_fault_get_stats(&w->fx.vfs, &stats);
	if (crash) {
		plog_fixture_close(&w->fx);
		struct wal_vfs_crash c = {.mode = mode, .lose_dir_ops = (budget & 1) != 0};
		wal_vfs_fault_crash(&w->fx.vfs, &c);
		assert_int_equal(plog_fixture_open(&w->fx), KEEL_OK);
		check_recovered(w);
	}
	plog_producers_close(&w->ps);
	plog_fixture_free(&w->fx);
	free(w);
	return stats.mutations;
}

static void test_crash_at_every_point(void **state)
{
	(void)state;
	uint64_t total = crash_case(0, WAL_VFS_CRASH_DROP_UNSYNCED, false);
	assert_true(total > 100);
	for (uint64_t budget = 0; budget <= total; budget++) {
		crash_case(budget, (enum wal_vfs_crash_mode)(budget % 3), true);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sequence_rules),
		cmocka_unit_test(test_refused_batch_rules),
		cmocka_unit_test(test_snapshot_codec),
		cmocka_unit_test(test_rebuild_uses_snapshots_and_ignores_stale_ones),
		cmocka_unit_test(test_crash_at_every_point),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
