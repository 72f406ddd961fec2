/*
 * Unit test: the partition log (src/plog/) on the fault vfs — appends and
 * reads across segment rolls, index and time lookups, the epoch cache and
 * file, follower appends, truncation, retention, recovery from bit flips,
 * and the failed state after an I/O error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <unistd.h>

#include "plog/epoch.h"
#include "test_plog_util.h"

static struct plog_segment_info seg_info(const struct plog *log, uint32_t i)
{
	struct plog_segment_info info;
	plog_segment_info(log, i, &info);
	return info;
}

static void test_append_read_across_rolls(void **state)
{
	(void)state;
	struct plog_fixture fx;
	struct model m = {0};
	plog_fixture_init(&fx, 1);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	assert_int_equal(plog_log_end_offset(&fx.log), 0);
	append_batches(&fx, &m, 120, 3, 1000000);
	assert_true(fx.log.segment_count > 5);
	/* Reads with a byte limit smaller than any batch, medium, and huge. */
	const uint64_t limits[] = {1, 500, 1500, 1 << 30};
	for (size_t i = 0; i < 4; i++) {
		expect_log_equals_model(&fx, &m, limits[i]);
	}
	assert_int_equal(plog_check(&fx.log), KEEL_OK);
	int64_t durable = 0;
	assert_int_equal(plog_sync(&fx.log, &durable), KEEL_OK);
	assert_int_equal(durable, plog_log_end_offset(&fx.log));

	/* Reopen: older segments come from their index files, the tail from a
	 * scan; everything reads the same and the indexes agree with a scan. */
	int64_t end = plog_log_end_offset(&fx.log);
	uint32_t segments = fx.log.segment_count;
	plog_fixture_close(&fx);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	assert_int_equal(plog_log_end_offset(&fx.log), end);
	assert_int_equal(fx.log.segment_count, segments);
	assert_int_equal(fx.rec.scanned_segments, 1);
	assert_int_equal(fx.rec.truncated_bytes, 0);
	assert_int_equal(plog_check(&fx.log), KEEL_OK);
	expect_log_equals_model(&fx, &m, 700);
	/* And appends continue where they were. */
	append_batches(&fx, &m, 10, 3, 2000000);
	expect_log_equals_model(&fx, &m, 1 << 20);
	plog_fixture_free(&fx);
	free(m.bytes);
}

static void test_read_bounds(void **state)
{
	(void)state;
	struct plog_fixture fx;
	struct model m = {0};
	plog_fixture_init(&fx, 2);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	append_batches(&fx, &m, 40, 1, 0);
	int64_t end = plog_log_end_offset(&fx.log);
	struct plog_read_result r;

	/* Every offset: the result starts with the batch that holds it. */
	for (int64_t off = 0; off < end; off++) {
		assert_int_equal(plog_read(&fx.log, off, end, 1, &r), KEEL_OK);
		size_t pos = model_pos_of(&m, off);
		size_t b = 0;
		while (m.batch_pos[b] != pos) {
			b++;
		}
		assert_int_equal(r.first_offset, m.batch_base[b]);
		assert_true(r.first_offset <= off && off < r.next_offset);
		size_t batch_size = (b + 1 < m.batch_count ? m.batch_pos[b + 1] : m.size) - pos;
		assert_int_equal(r.size, batch_size); /* max_bytes 1: one whole batch */
		uint8_t buf[8192];
		assert_int_equal(plog_read_copy(&fx.log, &r, buf), KEEL_OK);
		assert_memory_equal(buf, m.bytes + pos, batch_size);
	}
	/* The upper bound: a batch that reaches it is left out. */
	int64_t hw = m.batch_base[10] + 1; /* inside batch 10 (it has >= 2 records) */
	assert_true(m.batch_base[11] > hw);
	assert_int_equal(plog_read(&fx.log, m.batch_base[9], hw, 1 << 20, &r), KEEL_OK);
	assert_int_equal(r.first_offset, m.batch_base[9]);
	assert_int_equal(r.next_offset, m.batch_base[10]);
	assert_int_equal(plog_read(&fx.log, m.batch_base[10], hw, 1 << 20, &r), KEEL_OK);
	assert_int_equal(r.size, 0);
	assert_int_equal(plog_read(&fx.log, hw + 3, hw, 1 << 20, &r), KEEL_OK);
	assert_int_equal(r.size, 0);
	/* At the end: empty; past it or below the start: out of range. */
	assert_int_equal(plog_read(&fx.log, end, end, 100, &r), KEEL_OK);
	assert_int_equal(r.size, 0);
	assert_int_equal(plog_read(&fx.log, end + 1, end + 1, 100, &r), KEEL_RANGE);
	assert_int_equal(plog_read(&fx.log, -1, end, 100, &r), KEEL_RANGE);
	/* The segment path names the file the range is in. */
	assert_int_equal(plog_read(&fx.log, 0, end, 100, &r), KEEL_OK);
	char path[WAL_VFS_PATH_MAX];
	assert_int_equal(plog_segment_path(&fx.log, r.segment_base_offset, path, sizeof(path)),
			 KEEL_OK);
	assert_string_equal(path, TEST_PLOG_DIR "/00000000000000000000.log");
	plog_fixture_free(&fx);
	free(m.bytes);
}

static void test_bad_payloads_change_nothing(void **state)
{
	(void)state;
	struct plog_fixture fx;
	struct model m = {0};
	plog_fixture_init(&fx, 3);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	append_batches(&fx, &m, 3, 0, 0);
	uint8_t buf[16384];
	size_t a = build_batch(buf, sizeof(buf), 2, 0, 1, 10, 'a');
	size_t b = build_batch(buf + a, sizeof(buf) - a, 2, 0, 1, 10, 'b');
	int64_t end = plog_log_end_offset(&fx.log);
	uint64_t size = plog_size_bytes(&fx.log);
	struct plog_append_info info;
	/* The second batch is broken: the first is not written either. */
	buf[a + b - 1] ^= 1;
	assert_int_equal(plog_append(&fx.log, buf, a + b, 0, &info), KEEL_CORRUPT);
	buf[a + b - 1] ^= 1;
	buf[a + PLOG_BATCH_OFF_MAGIC] = 1;
	assert_int_equal(plog_append(&fx.log, buf, a + b, 0, &info), KEEL_UNSUPPORTED);
	buf[a + PLOG_BATCH_OFF_MAGIC] = 2;
	assert_int_equal(plog_append(&fx.log, buf, a + b - 5, 0, &info), KEEL_CORRUPT);
	assert_int_equal(plog_append(&fx.log, buf, 0, 0, &info), KEEL_CORRUPT);
	fx.log.config.max_batch_bytes = 64;
	assert_int_equal(plog_append(&fx.log, buf, a + b, 0, &info), KEEL_TOOBIG);
	fx.log.config.max_batch_bytes = fx.config.max_batch_bytes;
	assert_int_equal(plog_log_end_offset(&fx.log), end);
	assert_int_equal(plog_size_bytes(&fx.log), size);
	/* Two good batches in one payload get consecutive offsets. */
	assert_int_equal(plog_append(&fx.log, buf, a + b, 7, &info), KEEL_OK);
	assert_int_equal(info.batch_count, 2);
	assert_int_equal(info.first_offset, end);
	assert_int_equal(info.last_offset, end + 3);
	assert_int_equal(info.record_count, 4);
	assert_int_equal(plog_check(&fx.log), KEEL_OK);
	plog_fixture_free(&fx);
	free(m.bytes);
}

/* Brute force: the first record (uncompressed) with timestamp >= target. */
static int64_t brute_time_lookup(const struct model *m, int64_t target)
{
	for (size_t b = 0; b < m->batch_count; b++) {
		struct plog_batch batch;
		size_t end = b + 1 < m->batch_count ? m->batch_pos[b + 1] : m->size;
		assert_int_equal(plog_batch_validate(m->bytes + m->batch_pos[b], end - m->batch_pos[b],
						     1 << 20, &batch),
				 PLOG_BATCH_OK);
		for (int32_t i = 0; i < batch.record_count; i++) {
			/* build_batch: record i at base_timestamp + 3 i */
			if (batch.base_timestamp + 3 * i >= target) {
				return m->batch_base[b] + i;
			}
		}
	}
	return -1;
}

static void test_time_lookups(void **state)
{
	(void)state;
	struct plog_fixture fx;
	struct model m = {0};
	plog_fixture_init(&fx, 4);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	append_batches(&fx, &m, 30, 0, 10000);
	/* Timestamps that go back (a slow producer), then forward again. */
	append_batches(&fx, &m, 10, 0, 5000);
	append_batches(&fx, &m, 30, 0, 20000);
	for (int pass = 0; pass < 2; pass++) {
		for (int64_t t = 4000; t < 24000; t += 37) {
			int64_t want = brute_time_lookup(&m, t);
			int64_t got = -1;
			int64_t ts = -1;
			enum keel_err err = plog_offset_for_timestamp(&fx.log, t, &got, &ts);
			if (want < 0) {
				assert_int_equal(err, KEEL_NOENT);
			} else {
				assert_int_equal(err, KEEL_OK);
				assert_int_equal(got, want);
				assert_true(ts >= t);
			}
		}
		plog_fixture_close(&fx); /* the second pass uses the index files */
		assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	}
	plog_fixture_free(&fx);
	free(m.bytes);
}

static void test_epoch_cache(void **state)
{
	(void)state;
	struct plog_epochs e;
	plog_epochs_init(&e);
	int32_t epoch;
	int64_t end;
	plog_epochs_end_offset_for(&e, 0, 10, &epoch, &end);
	assert_int_equal(epoch, PLOG_UNDEFINED_EPOCH);
	assert_int_equal(end, PLOG_UNDEFINED_OFFSET);
	bool changed;
	assert_int_equal(plog_epochs_assign(&e, 2, 0, &changed), KEEL_OK);
	assert_true(changed);
	assert_int_equal(plog_epochs_assign(&e, 2, 5, &changed), KEEL_OK);
	assert_false(changed);
	assert_int_equal(plog_epochs_assign(&e, 4, 10, &changed), KEEL_OK);
	assert_int_equal(plog_epochs_assign(&e, 7, 25, &changed), KEEL_OK);
	assert_int_equal(plog_epochs_assign(&e, 6, 30, &changed), KEEL_STALE);
	assert_int_equal(plog_epochs_assign(&e, 8, 20, &changed), KEEL_STALE);
	/* Kafka's cases: latest -> log end; between -> next start with the
	 * floor epoch; older than all -> (requested, first start); newer -> undefined. */
	plog_epochs_end_offset_for(&e, 7, 40, &epoch, &end);
	assert_int_equal(epoch, 7);
	assert_int_equal(end, 40);
	plog_epochs_end_offset_for(&e, 4, 40, &epoch, &end);
	assert_int_equal(epoch, 4);
	assert_int_equal(end, 25);
	plog_epochs_end_offset_for(&e, 5, 40, &epoch, &end);
	assert_int_equal(epoch, 4);
	assert_int_equal(end, 25);
	plog_epochs_end_offset_for(&e, 3, 40, &epoch, &end);
	assert_int_equal(epoch, 2);
	assert_int_equal(end, 10);
	plog_epochs_end_offset_for(&e, 1, 40, &epoch, &end);
	assert_int_equal(epoch, 1);
	assert_int_equal(end, 0);
	plog_epochs_end_offset_for(&e, 9, 40, &epoch, &end);
	assert_int_equal(epoch, PLOG_UNDEFINED_EPOCH);
	assert_int_equal(end, PLOG_UNDEFINED_OFFSET);
	/* Truncation from the end and from the start. */
	assert_true(plog_epochs_truncate_end(&e, 25));
	assert_int_equal(plog_epochs_latest(&e), 4);
	assert_false(plog_epochs_truncate_end(&e, 25));
	assert_true(plog_epochs_truncate_start(&e, 12));
	assert_int_equal(e.count, 1);
	assert_int_equal(e.entries[0].epoch, 4);
	assert_int_equal(e.entries[0].start_offset, 12);
	/* An epoch that wrote nothing is replaced by the next at the same start. */
	assert_int_equal(plog_epochs_assign(&e, 9, 12, &changed), KEEL_OK);
	assert_int_equal(e.count, 1);
	assert_int_equal(e.entries[0].epoch, 9);
	plog_epochs_close(&e);
}

static void test_epochs_in_the_log(void **state)
{
	(void)state;
	struct plog_fixture fx;
	struct model m = {0};
	plog_fixture_init(&fx, 5);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	append_batches(&fx, &m, 5, 1, 0);
	int64_t e2_start = plog_log_end_offset(&fx.log);
	append_batches(&fx, &m, 5, 2, 0);
	int64_t e5_start = plog_log_end_offset(&fx.log);
	append_batches(&fx, &m, 20, 5, 0);
	int64_t end = plog_log_end_offset(&fx.log);
	struct plog_read_result r;
	uint8_t buf[8192];
	assert_int_equal(plog_read(&fx.log, e2_start, end, 1, &r), KEEL_OK);
	assert_int_equal(plog_read_copy(&fx.log, &r, buf), KEEL_OK);
	struct plog_batch b;
	assert_int_equal(plog_batch_validate(buf, r.size, 1 << 20, &b), PLOG_BATCH_OK);
	assert_int_equal(b.leader_epoch, 2); /* stamped into the stored batch */

	/* Older epochs than the latest are refused. */
	struct plog_append_info info;
	size_t size = build_batch(buf, sizeof(buf), 1, 0, 1, 5, 'z');
	assert_int_equal(plog_append(&fx.log, buf, size, 4, &info), KEEL_STALE);

	for (int pass = 0; pass < 2; pass++) {
		int32_t epoch;
		int64_t off;
		plog_end_offset_for_epoch(&fx.log, 1, &epoch, &off);
		assert_int_equal(epoch, 1);
		assert_int_equal(off, e2_start);
		plog_end_offset_for_epoch(&fx.log, 3, &epoch, &off);
		assert_int_equal(epoch, 2);
		assert_int_equal(off, e5_start);
		plog_end_offset_for_epoch(&fx.log, 5, &epoch, &off);
		assert_int_equal(epoch, 5);
		assert_int_equal(off, end);
		plog_fixture_close(&fx); /* the second pass reads the checkpoint */
		assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	}
	/* Truncating into epoch 2 drops epoch 5 from the checkpoint, durably. */
	assert_int_equal(plog_truncate(&fx.log, e5_start - 2), KEEL_OK);
	int64_t cut = plog_log_end_offset(&fx.log);
	assert_true(cut <= e5_start - 2 && cut > e2_start);
	plog_fixture_close(&fx);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	assert_int_equal(plog_log_end_offset(&fx.log), cut);
	int32_t epoch;
	int64_t off;
	plog_end_offset_for_epoch(&fx.log, 5, &epoch, &off);
	assert_int_equal(epoch, PLOG_UNDEFINED_EPOCH);
	plog_end_offset_for_epoch(&fx.log, 2, &epoch, &off);
	assert_int_equal(epoch, 2);
	assert_int_equal(off, cut);
	assert_int_equal(plog_check(&fx.log), KEEL_OK);
	plog_fixture_free(&fx);
	free(m.bytes);
}

static void test_follower_append(void **state)
{
	(void)state;
	struct plog_fixture leader;
	struct plog_fixture follower;
	struct model m = {0};
	plog_fixture_init(&leader, 6);
	plog_fixture_init(&follower, 7);
	assert_int_equal(plog_fixture_open(&leader), KEEL_OK);
	assert_int_equal(plog_fixture_open(&follower), KEEL_OK);
	append_batches(&leader, &m, 10, 3, 0);
	append_batches(&leader, &m, 30, 4, 0);
	/* The follower copies the leader's fetch results as they are. */
	int64_t end = plog_log_end_offset(&leader.log);
	while (plog_log_end_offset(&follower.log) < end) {
		struct plog_read_result r;
		uint8_t buf[1 << 16];
		assert_int_equal(plog_read(&leader.log, plog_log_end_offset(&follower.log), end, 3000,
					   &r),
				 KEEL_OK);
		assert_int_equal(plog_read_copy(&leader.log, &r, buf), KEEL_OK);
		struct plog_append_info info;
		assert_int_equal(plog_append_follower(&follower.log, buf, r.size, &info), KEEL_OK);
		assert_int_equal(info.first_offset, r.first_offset);
		assert_int_equal(info.last_offset + 1, r.next_offset);
		/* The same batches again do not fit at the new log end. */
		assert_int_equal(plog_append_follower(&follower.log, buf, r.size, &info), KEEL_INVAL);
	}
	expect_log_equals_model(&follower, &m, 1 << 20);
	int32_t epoch;
	int64_t off;
	int32_t epoch2;
	int64_t off2;
	plog_end_offset_for_epoch(&leader.log, 3, &epoch, &off);
	plog_end_offset_for_epoch(&follower.log, 3, &epoch2, &off2);
	assert_int_equal(epoch, epoch2);
	assert_int_equal(off, off2);
	assert_int_equal(plog_check(&follower.log), KEEL_OK);
	/* reset: a follower behind the leader's log start starts over there. */
	assert_int_equal(plog_reset(&follower.log, 1000), KEEL_OK);
	assert_int_equal(plog_log_start_offset(&follower.log), 1000);
	assert_int_equal(plog_log_end_offset(&follower.log), 1000);
	plog_fixture_close(&follower);
	assert_int_equal(plog_fixture_open(&follower), KEEL_OK);
	assert_int_equal(plog_log_start_offset(&follower.log), 1000);
	assert_int_equal(plog_log_end_offset(&follower.log), 1000);
	plog_fixture_free(&leader);
	plog_fixture_free(&follower);
	free(m.bytes);
}

/* Copies the leader's log from the follower's end until they are equal. */
static void catch_up(struct plog *leader, struct plog *follower)
{
	int64_t end = plog_log_end_offset(leader);
	while (plog_log_end_offset(follower) < end) {
		struct plog_read_result r;
		uint8_t buf[1 << 16];
		assert_int_equal(plog_read(leader, plog_log_end_offset(follower), end, 2000, &r),
				 KEEL_OK);
		assert_int_equal(plog_read_copy(leader, &r, buf), KEEL_OK);
		struct plog_append_info info;
		assert_int_equal(plog_append_follower(follower, buf, r.size, &info), KEEL_OK);
	}
}

/* KIP-101's scenario, through this layer's API: a leader writes batches a
 * follower never got, dies; the follower leads a new epoch and writes
 * others at the same offsets; the old leader comes back as a follower,
 * asks for the end of its latest epoch, truncates there (not to a high
 * watermark) and copies the new leader's log: both end byte-identical. */
static void test_divergent_follower_truncates_by_epoch(void **state)
{
	(void)state;
	struct plog_fixture a;
	struct plog_fixture b;
	struct model ma = {0};
	struct model mb = {0};
	plog_fixture_init(&a, 20);
	plog_fixture_init(&b, 21);
	assert_int_equal(plog_fixture_open(&a), KEEL_OK);
	assert_int_equal(plog_fixture_open(&b), KEEL_OK);
	append_batches(&a, &ma, 30, 1, 0);
	catch_up(&a.log, &b.log);
	int64_t replicated = plog_log_end_offset(&b.log);
	append_batches(&a, &ma, 7, 1, 50000); /* never replicated */
	append_batches(&b, &mb, 9, 2, 90000); /* b leads epoch 2 */
	assert_true(plog_log_end_offset(&a.log) > replicated);

	/* a, now a follower: where does its epoch 1 end on the leader? */
	int32_t epoch;
	int64_t end;
	plog_end_offset_for_epoch(&b.log, plog_epochs_latest(&a.log.epochs), &epoch, &end);
	assert_int_equal(epoch, 1);
	assert_int_equal(end, replicated);
	assert_int_equal(plog_truncate(&a.log, end), KEEL_OK);
	assert_int_equal(plog_log_end_offset(&a.log), replicated);
	catch_up(&b.log, &a.log);
	size_t size_a = 0;
	size_t size_b = 0;
	uint8_t *all_a = read_all(&a.log, 0, 1 << 20, &size_a);
	uint8_t *all_b = read_all(&b.log, 0, 1 << 20, &size_b);
	assert_int_equal(size_a, size_b);
	assert_memory_equal(all_a, all_b, size_a);
	plog_end_offset_for_epoch(&a.log, 1, &epoch, &end);
	assert_int_equal(end, replicated);
	plog_end_offset_for_epoch(&a.log, 2, &epoch, &end);
	assert_int_equal(end, plog_log_end_offset(&b.log));
	assert_int_equal(plog_check(&a.log), KEEL_OK);
	free(all_a);
	free(all_b);
	free(ma.bytes);
	free(mb.bytes);
	plog_fixture_free(&a);
	plog_fixture_free(&b);
}

static void test_truncation(void **state)
{
	(void)state;
	struct plog_fixture fx;
	struct model m = {0};
	plog_fixture_init(&fx, 8);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	append_batches(&fx, &m, 80, 1, 0);
	uint32_t segments = fx.log.segment_count;
	assert_true(segments > 4);
	/* Cut at a batch boundary two segments back. */
	size_t b = m.batch_count / 2;
	int64_t to = m.batch_base[b];
	assert_int_equal(plog_truncate(&fx.log, to), KEEL_OK);
	assert_int_equal(plog_log_end_offset(&fx.log), to);
	assert_true(fx.log.segment_count < segments);
	m.size = m.batch_pos[b];
	m.batch_count = b;
	expect_log_equals_model(&fx, &m, 999);
	assert_int_equal(plog_check(&fx.log), KEEL_OK);
	assert_int_equal(plog_truncate(&fx.log, to + 1), KEEL_RANGE);
	/* Appends go on from the cut, and survive a reopen. */
	append_batches(&fx, &m, 20, 2, 0);
	plog_fixture_close(&fx);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	expect_log_equals_model(&fx, &m, 999);
	assert_int_equal(plog_check(&fx.log), KEEL_OK);
	/* To the very start. */
	assert_int_equal(plog_truncate(&fx.log, 0), KEEL_OK);
	assert_int_equal(plog_log_end_offset(&fx.log), 0);
	assert_int_equal(fx.log.segment_count, 1);
	plog_fixture_free(&fx);
	free(m.bytes);
}

static void test_retention(void **state)
{
	(void)state;
	struct plog_fixture fx;
	struct model m = {0};
	plog_fixture_init(&fx, 9);
	fx.config.retention_bytes = 6000;
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	append_batches(&fx, &m, 100, 1, 0);
	uint32_t before = fx.log.segment_count;
	uint32_t deleted = 0;
	assert_int_equal(plog_retain(&fx.log, 0, &deleted), KEEL_OK);
	assert_true(deleted > 0);
	assert_int_equal(fx.log.segment_count, before - deleted);
	/* Deleting one more would drop the log to or below the limit. */
	assert_true(plog_size_bytes(&fx.log) > 6000);
	assert_true(plog_size_bytes(&fx.log) - seg_info(&fx.log, 0).size_bytes < 6000);
	int64_t start = plog_log_start_offset(&fx.log);
	assert_true(start > 0);
	struct plog_read_result r;
	assert_int_equal(plog_read(&fx.log, start - 1, start + 1, 10, &r), KEEL_RANGE);
	expect_log_equals_model(&fx, &m, 4096);
	plog_fixture_close(&fx);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	assert_int_equal(plog_log_start_offset(&fx.log), start);
	assert_int_equal(plog_check(&fx.log), KEEL_OK);

	/* By time: segments whose newest record is older than retention_ms.
	 * Batch i of the next appends has timestamps near 1e6 + 100 i. */
	fx.log.config.retention_bytes = -1;
	fx.log.config.retention_ms = 1000;
	append_batches(&fx, &m, 60, 1, 1000000);
	int64_t newest = m.batch_ts[m.batch_count - 1];
	assert_int_equal(plog_retain(&fx.log, newest + 500, &deleted), KEEL_OK);
	assert_true(deleted > 0);
	for (uint32_t i = 0; i + 1 < fx.log.segment_count; i++) {
		assert_true(newest + 500 - seg_info(&fx.log, i).max_timestamp <= 1000);
	}
	/* Far in the future: all but the active segment go, never the active. */
	assert_int_equal(plog_retain(&fx.log, newest + 1000000, &deleted), KEEL_OK);
	assert_int_equal(fx.log.segment_count, 1);
	assert_int_equal(plog_retain(&fx.log, newest + 1000000, &deleted), KEEL_OK);
	assert_int_equal(deleted, 0);
	assert_int_equal(fx.log.segment_count, 1);
	expect_log_equals_model(&fx, &m, 4096);
	int32_t epoch;
	int64_t off;
	plog_end_offset_for_epoch(&fx.log, 1, &epoch, &off);
	assert_int_equal(epoch, 1);
	assert_int_equal(fx.log.epochs.entries[0].start_offset, plog_log_start_offset(&fx.log));
	plog_fixture_free(&fx);
	free(m.bytes);
}

static void test_segment_ms_roll(void **state)
{
	(void)state;
	struct plog_fixture fx;
	struct model m = {0};
	plog_fixture_init(&fx, 10);
	fx.config.segment_bytes = 1 << 20;
	fx.config.segment_ms = 1000;
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	append_batches(&fx, &m, 9, 1, 0); /* timestamps 0..800+: one segment */
	assert_int_equal(fx.log.segment_count, 1);
	append_batches(&fx, &m, 3, 1, 1000); /* 1000 past the first: a roll */
	assert_int_equal(fx.log.segment_count, 2);
	expect_log_equals_model(&fx, &m, 1 << 20);
	plog_fixture_free(&fx);
	free(m.bytes);
}

static void test_bit_flip_in_tail_truncates(void **state)
{
	(void)state;
	struct plog_fixture fx;
	struct model m = {0};
	plog_fixture_init(&fx, 11);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	append_batches(&fx, &m, 50, 1, 0);
	assert_int_equal(plog_sync(&fx.log, NULL), KEEL_OK);
	struct plog_segment_info tail = seg_info(&fx.log, fx.log.segment_count - 1);
	assert_true(tail.size_bytes > 600);
	int64_t tail_base = tail.base_offset;
	uint64_t tail_size = tail.size_bytes;
	/* Find the batch that holds byte 500 of the tail. */
	size_t tail_start = model_pos_of(&m, tail_base);
	size_t b = 0;
	while (b + 1 < m.batch_count && m.batch_pos[b + 1] <= tail_start + 500) {
		b++;
	}
	plog_fixture_close(&fx);
	char path[WAL_VFS_PATH_MAX];
	snprintf(path, sizeof(path), "%s/%020lld.log", TEST_PLOG_DIR, (long long)tail_base);
	assert_int_equal(wal_vfs_fault_corrupt(&fx.vfs, path, 500, 0x08), KEEL_OK);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	assert_int_equal(plog_log_end_offset(&fx.log), m.batch_base[b]);
	assert_int_equal(fx.rec.truncated_bytes, tail_size - (m.batch_pos[b] - tail_start));
	assert_int_not_equal(fx.rec.tail_check, PLOG_BATCH_OK);
	m.size = m.batch_pos[b];
	m.batch_count = b;
	expect_log_equals_model(&fx, &m, 4096);
	assert_int_equal(plog_check(&fx.log), KEEL_OK);
	plog_fixture_free(&fx);
	free(m.bytes);
}

static void test_bit_flip_in_older_segment_is_an_error(void **state)
{
	(void)state;
	struct plog_fixture fx;
	struct model m = {0};
	plog_fixture_init(&fx, 12);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	append_batches(&fx, &m, 50, 1, 0);
	assert_true(fx.log.segment_count >= 3);
	int64_t older = seg_info(&fx.log, 1).base_offset;
	plog_fixture_close(&fx);
	char path[WAL_VFS_PATH_MAX];
	snprintf(path, sizeof(path), "%s/%020lld.log", TEST_PLOG_DIR, (long long)older);
	assert_int_equal(wal_vfs_fault_corrupt(&fx.vfs, path, 300, 0x01), KEEL_OK);
	/* Trusted through its index files, the open succeeds but the check and
	 * a full verification find it. */
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	assert_int_equal(plog_check(&fx.log), KEEL_CORRUPT);
	plog_fixture_close(&fx);
	fx.config.verify_all_segments = true;
	assert_int_equal(plog_fixture_open(&fx), KEEL_CORRUPT);
	assert_non_null(strstr(plog_why(&fx.log), "older segment damaged"));
	/* Without verification, a damaged index file makes the open scan the
	 * segment, which finds the flip too. */
	fx.config.verify_all_segments = false;
	snprintf(path, sizeof(path), "%s/%020lld.index", TEST_PLOG_DIR, (long long)older);
	assert_int_equal(wal_vfs_fault_corrupt(&fx.vfs, path, 20, 0x01), KEEL_OK);
	assert_int_equal(plog_fixture_open(&fx), KEEL_CORRUPT);
	plog_fixture_free(&fx);
	free(m.bytes);
}

static void test_damaged_index_is_rebuilt(void **state)
{
	(void)state;
	struct plog_fixture fx;
	struct model m = {0};
	plog_fixture_init(&fx, 13);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	append_batches(&fx, &m, 50, 1, 0);
	int64_t older = seg_info(&fx.log, 1).base_offset;
	plog_fixture_close(&fx);
	char path[WAL_VFS_PATH_MAX];
	snprintf(path, sizeof(path), "%s/%020lld.timeindex", TEST_PLOG_DIR, (long long)older);
	assert_int_equal(wal_vfs_fault_corrupt(&fx.vfs, path, 10, 0x01), KEEL_OK);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	assert_int_equal(fx.rec.rebuilt_indexes, 1);
	assert_int_equal(plog_check(&fx.log), KEEL_OK);
	expect_log_equals_model(&fx, &m, 4096);
	plog_fixture_close(&fx);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	assert_int_equal(fx.rec.rebuilt_indexes, 0); /* rewritten the first time */
	plog_fixture_free(&fx);
	free(m.bytes);
}

/* Retention cut short by a crash after a segment's .log was unlinked: its
 * index files are removed on the next open; temp files too. */
static void test_stray_files_are_removed(void **state)
{
	(void)state;
	struct plog_fixture fx;
	struct model m = {0};
	plog_fixture_init(&fx, 17);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	append_batches(&fx, &m, 30, 1, 0);
	int64_t first = seg_info(&fx.log, 0).base_offset;
	int64_t second = seg_info(&fx.log, 1).base_offset;
	plog_fixture_close(&fx);
	char path[WAL_VFS_PATH_MAX];
	snprintf(path, sizeof(path), "%s/%020lld.log", TEST_PLOG_DIR, (long long)first);
	assert_int_equal(wal_vfs_unlink(&fx.vfs, path), KEEL_OK);
	snprintf(path, sizeof(path), "%s/%s.tmp", TEST_PLOG_DIR, PLOG_EPOCH_FILE);
	struct wal_vfs_file *f;
	assert_int_equal(wal_vfs_open(&fx.vfs, path, WAL_VFS_CREATE, &f), KEEL_OK);
	wal_vfs_close(f);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	assert_int_equal(plog_log_start_offset(&fx.log), second);
	const char *gone[] = {".index", ".timeindex"};
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%020lld%s", TEST_PLOG_DIR, (long long)first, gone[i]);
		assert_int_equal(wal_vfs_open(&fx.vfs, path, WAL_VFS_READ_ONLY, &f), KEEL_NOENT);
	}
	snprintf(path, sizeof(path), "%s/%s.tmp", TEST_PLOG_DIR, PLOG_EPOCH_FILE);
	assert_int_equal(wal_vfs_open(&fx.vfs, path, WAL_VFS_READ_ONLY, &f), KEEL_NOENT);
	/* The second segment's index files stay. */
	snprintf(path, sizeof(path), "%s/%020lld.index", TEST_PLOG_DIR, (long long)second);
	assert_int_equal(wal_vfs_open(&fx.vfs, path, WAL_VFS_READ_ONLY, &f), KEEL_OK);
	wal_vfs_close(f);
	assert_int_equal(plog_check(&fx.log), KEEL_OK);
	plog_fixture_free(&fx);
	free(m.bytes);
}

static void test_failed_sync_is_sticky(void **state)
{
	(void)state;
	struct plog_fixture fx;
	struct model m = {0};
	plog_fixture_init(&fx, 14);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	append_batches(&fx, &m, 2, 1, 0);
	wal_vfs_fault_fail_nth(&fx.vfs, WAL_VFS_OP_SYNC, 1, KEEL_IO);
	int64_t durable = -1;
	assert_int_equal(plog_sync(&fx.log, &durable), KEEL_IO);
	assert_int_equal(fx.log.state, PLOG_FAILED);
	assert_int_equal(plog_durable_offset(&fx.log), 0);
	assert_int_equal(plog_sync(&fx.log, &durable), KEEL_FAILED);
	uint8_t buf[1024];
	size_t size = build_batch(buf, sizeof(buf), 1, 0, 1, 5, 'q');
	struct plog_append_info info;
	assert_int_equal(plog_append(&fx.log, buf, size, 1, &info), KEEL_FAILED);
	/* Reads still work; a reopen recovers. */
	struct plog_read_result r;
	assert_int_equal(plog_read(&fx.log, 0, 100, 100, &r), KEEL_OK);
	plog_fixture_close(&fx);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	expect_log_equals_model(&fx, &m, 4096);
	plog_fixture_free(&fx);
	free(m.bytes);
}

static void test_topic_id(void **state)
{
	(void)state;
	struct plog_fixture fx;
	plog_fixture_init(&fx, 15);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	assert_false(fx.log.has_topic_id);
	uint8_t id[PLOG_TOPIC_ID_SIZE];
	memset(id, 0xab, sizeof(id));
	id[0] = 1;
	assert_int_equal(plog_set_topic_id(&fx.log, id), KEEL_OK);
	plog_fixture_close(&fx);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	assert_true(fx.log.has_topic_id);
	assert_memory_equal(fx.log.topic_id, id, sizeof(id));
	plog_fixture_free(&fx);
}

/* The same code on the real file system (POSIX vfs, a temp directory):
 * directory creation, listing, renames and reopen behave as on the fault vfs. */
static void test_posix_round_trip(void **state)
{
	(void)state;
	char root[] = "/tmp/keel-plog-XXXXXX";
	assert_non_null(mkdtemp(root));
	char dir[256];
	snprintf(dir, sizeof(dir), "%s/topic-3", root);
	struct plog_fixture fx;
	plog_fixture_init(&fx, 16);
	struct wal_vfs posix;
	wal_vfs_posix_init(&posix);
	fx.config.vfs = &posix;
	fx.config.dir = dir;
	struct model m = {0};
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	append_batches(&fx, &m, 40, 2, 0);
	assert_int_equal(plog_sync(&fx.log, NULL), KEEL_OK);
	uint32_t segments = fx.log.segment_count;
	assert_true(segments > 2);
	plog_fixture_close(&fx);
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	assert_int_equal(fx.log.segment_count, segments);
	assert_int_equal(fx.rec.rebuilt_indexes, 0);
	assert_int_equal(plog_check(&fx.log), KEEL_OK);
	expect_log_equals_model(&fx, &m, 3000);
	/* Clean up through the log itself, then the directory. */
	assert_int_equal(plog_reset(&fx.log, 0), KEEL_OK);
	plog_fixture_close(&fx);
	const char *names[] = {"00000000000000000000.log", PLOG_EPOCH_FILE};
	for (size_t i = 0; i < 2; i++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		assert_int_equal(unlink(path), 0);
	}
	assert_int_equal(rmdir(dir), 0);
	assert_int_equal(rmdir(root), 0);
	plog_fixture_free(&fx);
	free(m.bytes);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_append_read_across_rolls),
		cmocka_unit_test(test_read_bounds),
		cmocka_unit_test(test_bad_payloads_change_nothing),
		cmocka_unit_test(test_time_lookups),
		cmocka_unit_test(test_epoch_cache),
		cmocka_unit_test(test_epochs_in_the_log),
		cmocka_unit_test(test_follower_append),
		cmocka_unit_test(test_divergent_follower_truncates_by_epoch),
		cmocka_unit_test(test_truncation),
		cmocka_unit_test(test_retention),
		cmocka_unit_test(test_segment_ms_roll),
		cmocka_unit_test(test_bit_flip_in_tail_truncates),
		cmocka_unit_test(test_bit_flip_in_older_segment_is_an_error),
		cmocka_unit_test(test_damaged_index_is_rebuilt),
		cmocka_unit_test(test_stray_files_are_removed),
		cmocka_unit_test(test_failed_sync_is_sticky),
		cmocka_unit_test(test_topic_id),
		cmocka_unit_test(test_posix_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
