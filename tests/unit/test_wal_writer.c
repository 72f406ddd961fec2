/* Unit tests: the group-commit writer — completions in order with the
 * durable index, one fdatasync for everything queued, copies of the
 * caller's memory, back-pressure, sticky failure after EIO (nothing
 * acknowledged afterwards), and the batch operations (hard state, truncate,
 * compact, reset) surviving a crash. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "os/log.h"
#include "test_wal_util.h"
#include "wal/writer.h"

#define MAX_COMPLETIONS 4096

struct collector {
	pthread_mutex_t mutex;
	pthread_cond_t changed;
	struct wal_completion done[MAX_COMPLETIONS];
	size_t count;
	/* Holding the storage thread inside the callback of seq == hold_seq. */
	bool holding;
	uint64_t hold_seq;
	bool release;
};

static void collector_init(struct collector *c)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->mutex, NULL);
	pthread_cond_init(&c->changed, NULL);
	c->hold_seq = UINT64_MAX;
}

static void collector_free(struct collector *c)
{
	pthread_cond_destroy(&c->changed);
	pthread_mutex_destroy(&c->mutex);
}

static void on_done(void *arg, const struct wal_completion *completion)
{
	struct collector *c = arg;
	pthread_mutex_lock(&c->mutex);
	assert_true(c->count < MAX_COMPLETIONS);
	c->done[c->count] = *completion;
	c->done[c->count].errmsg = NULL; /* only valid during the call */
	c->count++;
	if (completion->seq == c->hold_seq) {
		c->holding = true;
		pthread_cond_broadcast(&c->changed);
		while (!c->release) {
			pthread_cond_wait(&c->changed, &c->mutex);
		}
	}
	pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->mutex);
}

static void wait_for(struct collector *c, size_t count)
{
	pthread_mutex_lock(&c->mutex);
	while (c->count < count) {
		pthread_cond_wait(&c->changed, &c->mutex);
	}
	pthread_mutex_unlock(&c->mutex);
}

static void wait_holding(struct collector *c)
{
	pthread_mutex_lock(&c->mutex);
	while (!c->holding) {
		pthread_cond_wait(&c->changed, &c->mutex);
	}
	pthread_mutex_unlock(&c->mutex);
}

static void release(struct collector *c)
{
	pthread_mutex_lock(&c->mutex);
	c->release = true;
	pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->mutex);
}

static struct wal_writer writer;
static struct collector col;
static struct model_entry model[2048];

static void start(struct wal_fixture *fx, uint32_t max_batches)
{
	collector_init(&col);
	struct wal_writer_config wc = {.done = on_done, .done_arg = &col,
				       .max_queued_batches = max_batches, .prepare_spares = true,
				       .prepare_step_bytes = 1024};
	assert_int_equal(wal_writer_start(&writer, &fx->wal, &wc), KEEL_OK);
}

static void stop(void)
{
	wal_writer_stop(&writer);
	collector_free(&col);
}

/* Submits entries [first, first+count) of `term` as one batch. */
static enum keel_err submit(uint64_t first, size_t count, uint64_t term, uint64_t salt,
			    const struct wal_hard_state *hs, uint64_t truncate_from,
			    uint64_t compact_upto)
{
	struct wal_entry entries[32];
	uint8_t payloads[32][TEST_MAX_PAYLOAD];
	assert_true(count <= 32);
	for (size_t i = 0; i < count; i++) {
		struct model_entry *m = &model[first + i];
		*m = (struct model_entry){.index = first + i, .term = term, .salt = salt};
		payload_fill(payloads[i], m->index, m->term, m->salt);
		entries[i] = (struct wal_entry){.index = m->index, .term = m->term,
						.type = (uint8_t)(m->index % 3),
						.size = payload_size(m->index, m->salt),
						.data = payloads[i]};
	}
	struct wal_batch b = {.hard_state = hs, .truncate_from = truncate_from,
			      .entries = entries, .entry_count = count,
			      .compact_upto = compact_upto};
	uint64_t seq;
	enum keel_err err = wal_writer_submit(&writer, &b, &seq);
	/* The writer copied: scribbling over our memory changes nothing. */
	memset(payloads, 0xee, sizeof(payloads));
	memset(entries, 0xee, sizeof(entries));
	return err;
}

static void test_completions_in_order_and_durable(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 41);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	start(&fx, 0);
	struct wal_hard_state hs = {.term = 1, .voted_for = 2};
	uint64_t next = 1;
	for (int i = 0; i < 100; i++) {
		size_t n = (size_t)(i % 5) + 1;
		assert_int_equal(submit(next, n, 1, 0, i == 0 ? &hs : NULL, 0, 0), KEEL_OK);
		next += n;
	}
	wait_for(&col, 100);
	uint64_t last_durable = 0;
	uint64_t covered = 0;
	for (size_t i = 0; i < 100; i++) {
		assert_int_equal(col.done[i].seq, i);
		assert_int_equal(col.done[i].result, KEEL_OK);
		assert_true(col.done[i].durable_index >= last_durable);
		covered += (i % 5) + 1;
		assert_true(col.done[i].durable_index >= covered); /* its own entries */
		assert_int_equal(col.done[i].durable_term, 1);
		last_durable = col.done[i].durable_index;
	}
	assert_int_equal(last_durable, next - 1);
	/* A wrong first index is refused at once and is not sticky. */
	assert_int_equal(submit(next + 1, 1, 1, 0, NULL, 0, 0), KEEL_INVAL);
	assert_int_equal(submit(next, 1, 1, 0, NULL, 0, 0), KEEL_OK);
	next++;
	stop();
	assert_false(wal_failed(&fx.wal));
	fixture_crash(&fx, WAL_VFS_CRASH_DROP_UNSYNCED, true);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_int_equal(fx.rec.hard_state.term, 1);
	assert_log(&fx.rec, model + 1, (size_t)(next - 1));
	fixture_free(&fx);
}

static void test_group_commit_one_sync_for_many(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 42);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	struct wal_hard_state hs = {.term = 1};
	assert_int_equal(wal_save_hard_state(&fx.wal, &hs), KEEL_OK);
	start(&fx, 0);
	col.hold_seq = 0; /* the storage thread waits in the first callback */
	assert_int_equal(submit(1, 1, 1, 0, NULL, 0, 0), KEEL_OK);
	wait_holding(&col);
	struct wal_vfs_fault_stats before;
	wal_vfs_fault_get_stats(&fx.vfs, &before);
	for (uint64_t i = 0; i < 50; i++) {
		assert_int_equal(submit(2 + i, 1, 1, 0, NULL, 0, 0), KEEL_OK);
	}
	release(&col);
	wait_for(&col, 51);
	stop();
	struct wal_writer_stats stats;
	wal_writer_get_stats(&writer, &stats);
	assert_int_equal(stats.batches, 51);
	assert_int_equal(stats.groups, 2);
	assert_int_equal(stats.max_group, 50);
	struct wal_vfs_fault_stats after;
	wal_vfs_fault_get_stats(&fx.vfs, &after);
	/* 50 batches, one group: a handful of syncs (segment rolls), not 50. */
	assert_true(after.calls[WAL_VFS_OP_SYNC] - before.calls[WAL_VFS_OP_SYNC] < 10);
	for (size_t i = 1; i < 51; i++) {
		assert_int_equal(col.done[i].durable_index, 51);
	}
	fixture_free(&fx);
}

static void test_back_pressure(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 43);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	struct wal_hard_state hs = {.term = 1};
	assert_int_equal(wal_save_hard_state(&fx.wal, &hs), KEEL_OK);
	start(&fx, 4);
	col.hold_seq = 0;
	assert_int_equal(submit(1, 1, 1, 0, NULL, 0, 0), KEEL_OK);
	wait_holding(&col);
	/* The held batch still counts: three more fit, then BUSY. */
	assert_int_equal(submit(2, 1, 1, 0, NULL, 0, 0), KEEL_OK);
	assert_int_equal(submit(3, 1, 1, 0, NULL, 0, 0), KEEL_OK);
	assert_int_equal(submit(4, 1, 1, 0, NULL, 0, 0), KEEL_OK);
	assert_int_equal(submit(5, 1, 1, 0, NULL, 0, 0), KEEL_BUSY);
	assert_int_equal(submit(5, 1, 1, 0, NULL, 0, 0), KEEL_BUSY);
	release(&col);
	wait_for(&col, 4);
	assert_int_equal(submit(5, 1, 1, 0, NULL, 0, 0), KEEL_OK);
	wait_for(&col, 5);
	stop();
	assert_int_equal(col.done[4].durable_index, 5);
	/* A batch bigger than the byte limit can never fit. */
	collector_init(&col);
	struct wal_writer_config wc = {.done = on_done, .done_arg = &col,
				       .max_queued_bytes = 256};
	assert_int_equal(wal_writer_start(&writer, &fx.wal, &wc), KEEL_OK);
	assert_int_equal(submit(6, 3, 1, 1, NULL, 0, 0), KEEL_TOOBIG);
	stop();
	fixture_free(&fx);
}

static void test_sticky_failure_acknowledges_nothing_after(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 44);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	struct wal_hard_state hs = {.term = 1};
	assert_int_equal(wal_save_hard_state(&fx.wal, &hs), KEEL_OK);
	start(&fx, 0);
	col.hold_seq = 0;
	assert_int_equal(submit(1, 2, 1, 0, NULL, 0, 0), KEEL_OK);
	wait_holding(&col);
	/* The next group's fdatasync fails. */
	wal_vfs_fault_fail_nth(&fx.vfs, WAL_VFS_OP_SYNC, 1, KEEL_IO);
	assert_int_equal(submit(3, 2, 1, 0, NULL, 0, 0), KEEL_OK);
	assert_int_equal(submit(5, 2, 1, 0, NULL, 0, 0), KEEL_OK);
	release(&col);
	wait_for(&col, 3);
	assert_int_equal(col.done[0].result, KEEL_OK);
	assert_int_equal(col.done[1].result, KEEL_IO);
	assert_int_equal(col.done[2].result, KEEL_IO);
	assert_int_equal(col.done[2].durable_index, 2);
	assert_true(wal_writer_failed(&writer));
	assert_non_null(strstr(writer.errmsg, "fdatasync"));
	/* Every later submit fails at once, with no callback. */
	assert_int_equal(submit(7, 1, 1, 0, NULL, 0, 0), KEEL_FAILED);
	assert_int_equal(submit(3, 1, 1, 0, NULL, 3, 0), KEEL_FAILED);
	stop();
	assert_int_equal(col.count, 3);
	assert_true(wal_failed(&fx.wal));
	fixture_crash(&fx, WAL_VFS_CRASH_TORN, true);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	/* The acknowledged entries are there; the others may or may not be. */
	assert_true(fx.rec.entry_count >= 2);
	assert_true(fx.rec.entry_count <= 6);
	assert_log(&fx.rec, model + 1, fx.rec.entry_count);
	fixture_free(&fx);
}

/* Batches queued behind a failure complete with KEEL_FAILED. */
static void test_failure_fails_the_queue(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 45);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	struct wal_hard_state hs = {.term = 1};
	assert_int_equal(wal_save_hard_state(&fx.wal, &hs), KEEL_OK);
	start(&fx, 0);
	wal_vfs_fault_fail_nth(&fx.vfs, WAL_VFS_OP_SYNC, 1, KEEL_IO);
	col.hold_seq = 0; /* the failing group's callback holds the thread */
	assert_int_equal(submit(1, 1, 1, 0, NULL, 0, 0), KEEL_OK);
	wait_holding(&col);
	assert_int_equal(submit(2, 1, 1, 0, NULL, 0, 0), KEEL_FAILED); /* already failed */
	release(&col);
	stop();
	assert_int_equal(col.count, 1);
	assert_int_equal(col.done[0].result, KEEL_IO);
	fixture_free(&fx);
}

static void test_batch_operations_survive_a_crash(void **state)
{
	(void)state;
	keel_log_set_level(KEEL_LOG_ERROR);
	struct wal_fixture fx;
	fixture_init(&fx, 46);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	start(&fx, 0);
	struct wal_hard_state hs1 = {.term = 1};
	struct wal_hard_state hs2 = {.term = 2, .voted_for = 3};
	assert_int_equal(submit(1, 20, 1, 0, &hs1, 0, 0), KEEL_OK);
	assert_int_equal(submit(21, 20, 1, 0, NULL, 0, 0), KEEL_OK);
	wait_for(&col, 2);
	/* A snapshot written by another thread (this one) meanwhile. */
	char errmsg[WAL_ERRMSG_SIZE];
	assert_int_equal(wal_snapshot_save(&fx.config, 30, 1, NULL, 0, "s", 1, errmsg), KEEL_OK);
	/* New term: truncate from 35, append, compact to the snapshot. */
	assert_int_equal(submit(35, 10, 2, 1, &hs2, 35, 30), KEEL_OK);
	assert_int_equal(submit(45, 5, 2, 1, NULL, 0, 0), KEEL_OK);
	wait_for(&col, 4);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(col.done[i].result, KEEL_OK);
	}
	assert_int_equal(col.done[3].durable_index, 49);
	assert_int_equal(col.done[3].durable_term, 2);
	/* An installed snapshot: reset, then the leader's entries. */
	assert_int_equal(wal_snapshot_save(&fx.config, 100, 2, NULL, 0, "L", 1, errmsg), KEEL_OK);
	struct wal_batch reset = {.reset_index = 100, .reset_term = 2};
	uint64_t seq;
	assert_int_equal(wal_writer_submit(&writer, &reset, &seq), KEEL_OK);
	assert_int_equal(submit(101, 5, 2, 2, NULL, 0, 0), KEEL_OK);
	wait_for(&col, 6);
	assert_int_equal(col.done[5].result, KEEL_OK);
	assert_int_equal(col.done[5].durable_index, 105);
	stop();
	fixture_crash(&fx, WAL_VFS_CRASH_SCRAMBLE, true);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_int_equal(fx.rec.hard_state.term, 2);
	assert_int_equal(fx.rec.hard_state.voted_for, 3);
	assert_int_equal(fx.rec.snapshot.index, 100);
	assert_log(&fx.rec, model + 101, 5);
	fixture_free(&fx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_completions_in_order_and_durable),
		cmocka_unit_test(test_group_commit_one_sync_for_many),
		cmocka_unit_test(test_back_pressure),
		cmocka_unit_test(test_sticky_failure_acknowledges_nothing_after),
		cmocka_unit_test(test_failure_fails_the_queue),
		cmocka_unit_test(test_batch_operations_survive_a_crash),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
