/*
 * Unit tests of ReadIndex: confirmation by a quorum heartbeat round, the
 * wait for the term's first commit, forwarding from followers, and the
 * exactly-one-result rule (success, NOTLEADER, TIMEOUT).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_raft_harness.h"

static struct th_cluster cl;

static int teardown(void **state)
{
	(void)state;
	th_close(&cl);
	return 0;
}

/* The result for ctx on node id, or NULL. */
static const struct raft_read_result *result(uint64_t id, uint64_t ctx)
{
	struct th_node *n = th_node(&cl, id);
	const struct raft_read_result *found = NULL;
	for (size_t i = 0; i < n->n_reads; i++) {
		if (n->reads[i].ctx == ctx) {
			assert_null(found); /* exactly once */
			found = &n->reads[i];
		}
	}
	return found;
}

static void test_leader_read_needs_quorum_round(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 1);
	th_elect(&cl, 1);
	th_propose(&cl, 1, "a", NULL);
	th_stabilize(&cl, true);
	struct raft *r1 = th_node(&cl, 1)->r;
	assert_int_equal(raft_read_index(r1, 7), KEEL_OK);
	th_ready_all(&cl);
	assert_null(result(1, 7)); /* heartbeats out, no answers yet */
	bool heartbeat = false;
	for (size_t i = 0; i < cl.n_queue; i++) {
		heartbeat |= cl.queue[i].m.type == RAFT_MSG_HEARTBEAT && cl.queue[i].m.heartbeat.read_seq > 0;
	}
	assert_true(heartbeat);
	th_stabilize(&cl, true);
	const struct raft_read_result *res = result(1, 7);
	assert_non_null(res);
	assert_int_equal(res->err, KEEL_OK);
	assert_int_equal(res->index, 3);
}

/* A partitioned leader (a minority) cannot confirm a read: it would be
 * stale. It fails with a timeout (or NOTLEADER once check-quorum fires). */
static void test_minority_leader_cannot_read(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 2);
	th_elect(&cl, 1);
	th_isolate(&cl, 1, true);
	assert_int_equal(raft_read_index(th_node(&cl, 1)->r, 9), KEEL_OK);
	for (int i = 0; i < 30 && result(1, 9) == NULL; i++) {
		th_tick(&cl, 1, th_node(&cl, 1)->now_ms + 100);
		th_stabilize(&cl, true);
	}
	const struct raft_read_result *res = result(1, 9);
	assert_non_null(res);
	assert_true(res->err == KEEL_TIMEOUT || res->err == KEEL_NOTLEADER);
	/* and no second result comes later */
	th_heal(&cl);
	th_tick_all(&cl, 3000);
	th_stabilize(&cl, true);
	assert_non_null(result(1, 9));
}

/* A new leader answers reads only after its no-op committed; the index is
 * the commit index at that point. */
static void test_read_waits_for_term_commit(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 3);
	th_tick(&cl, 1, 5000);
	th_stabilize(&cl, false);
	th_persist(&cl, 2);
	th_stabilize(&cl, false);
	th_persist(&cl, 1);
	th_ready_all(&cl);
	assert_int_equal(th_status(&cl, 1).role, RAFT_LEADER);
	assert_int_equal(th_status(&cl, 1).commit_index, 0);
	assert_int_equal(raft_read_index(th_node(&cl, 1)->r, 5), KEEL_OK);
	th_ready_all(&cl);
	assert_null(result(1, 5));
	th_stabilize(&cl, true);
	const struct raft_read_result *res = result(1, 5);
	assert_non_null(res);
	assert_int_equal(res->err, KEEL_OK);
	assert_int_equal(res->index, 2); /* the no-op */
}

/* Followers forward to the leader; the answer comes back to them. */
static void test_follower_read_forwarded(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 4);
	th_elect(&cl, 1);
	th_propose(&cl, 1, "a", NULL);
	th_propose(&cl, 1, "b", NULL);
	th_stabilize(&cl, true);
	assert_int_equal(raft_read_index(th_node(&cl, 3)->r, 11), KEEL_OK);
	th_ready_all(&cl);
	assert_int_equal(cl.queue[0].m.type, RAFT_MSG_READ_INDEX);
	assert_int_equal(cl.queue[0].m.to, 1);
	th_stabilize(&cl, true);
	const struct raft_read_result *res = result(3, 11);
	assert_non_null(res);
	assert_int_equal(res->err, KEEL_OK);
	assert_int_equal(res->index, 4);
	assert_null(result(1, 11)); /* the leader answered by message */
}

/* A follower that knows no leader refuses at once; one whose leader
 * changes gets NOTLEADER for what it forwarded. */
static void test_follower_read_errors(void **state)
{
	(void)state;
	struct raft_options o;
	raft_options_default(&o);
	o.read_timeout_ms = 60000; /* the leader change comes first */
	th_init(&cl, 3, 0, &o, 5);
	assert_int_equal(raft_read_index(th_node(&cl, 2)->r, 1), KEEL_NOLEADER);
	th_elect(&cl, 1);
	th_isolate(&cl, 1, true);
	assert_int_equal(raft_read_index(th_node(&cl, 2)->r, 2), KEEL_OK);
	th_stabilize(&cl, true);
	assert_null(result(2, 2));
	/* the forward was lost; a new leader shows up */
	th_tick_all(&cl, 3000);
	th_stabilize(&cl, true);
	th_elect(&cl, 3);
	assert_int_equal(th_status(&cl, 2).leader, 3);
	const struct raft_read_result *res = result(2, 2);
	assert_non_null(res);
	assert_int_equal(res->err, KEEL_NOTLEADER);
}

/* A forwarded read whose answer is lost times out after read_timeout_ms. */
static void test_follower_read_times_out(void **state)
{
	(void)state;
	struct raft_options o;
	raft_options_default(&o);
	o.election_timeout_ms = 5000; /* no election before the timeout */
	o.read_timeout_ms = 1000;
	th_init(&cl, 3, 0, &o, 6);
	th_elect(&cl, 1);
	assert_int_equal(raft_read_index(th_node(&cl, 2)->r, 3), KEEL_OK);
	th_ready_all(&cl);
	/* drop the forward on the floor */
	struct th_msg q = cl.queue[0];
	assert_int_equal(q.m.type, RAFT_MSG_READ_INDEX);
	memmove(&cl.queue[0], &cl.queue[1], (cl.n_queue - 1) * sizeof(*cl.queue));
	cl.n_queue--;
	th_msg_free(&q);
	th_tick(&cl, 2, th_node(&cl, 2)->now_ms + cl.opts.read_timeout_ms - 1);
	th_ready_all(&cl);
	assert_null(result(2, 3));
	th_tick(&cl, 2, th_node(&cl, 2)->now_ms + 1);
	th_ready_all(&cl);
	const struct raft_read_result *res = result(2, 3);
	assert_non_null(res);
	assert_int_equal(res->err, KEEL_TIMEOUT);
}

/* Pending reads on a leader that steps down fail with NOTLEADER. */
static void test_reads_fail_on_step_down(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 7);
	th_elect(&cl, 1);
	assert_int_equal(raft_read_index(th_node(&cl, 1)->r, 4), KEEL_OK);
	th_ready_all(&cl);
	/* a higher term arrives before the round completes */
	struct raft_msg m = {.type = RAFT_MSG_HEARTBEAT, .from = 2, .to = 1, .term = 9};
	assert_int_equal(raft_step(th_node(&cl, 1)->r, &m), KEEL_OK);
	th_ready_all(&cl);
	const struct raft_read_result *res = result(1, 4);
	assert_non_null(res);
	assert_int_equal(res->err, KEEL_NOTLEADER);
}

/* The pending-read limit. */
static void test_read_limit(void **state)
{
	(void)state;
	struct raft_options o;
	raft_options_default(&o);
	o.max_pending_reads = 3;
	th_init(&cl, 3, 0, &o, 8);
	th_elect(&cl, 1);
	struct raft *r = th_node(&cl, 1)->r;
	assert_int_equal(raft_read_index(r, 1), KEEL_OK);
	assert_int_equal(raft_read_index(r, 2), KEEL_OK);
	assert_int_equal(raft_read_index(r, 3), KEEL_OK);
	assert_int_equal(raft_read_index(r, 4), KEEL_LIMIT);
	th_stabilize(&cl, true);
	for (uint64_t ctx = 1; ctx <= 3; ctx++) {
		assert_non_null(result(1, ctx));
	}
	assert_null(result(1, 4));
}

static void test_single_node_read(void **state)
{
	(void)state;
	th_init(&cl, 1, 0, NULL, 9);
	th_elect(&cl, 1);
	assert_int_equal(raft_read_index(th_node(&cl, 1)->r, 1), KEEL_OK);
	th_ready_all(&cl);
	const struct raft_read_result *res = result(1, 1);
	assert_non_null(res);
	assert_int_equal(res->err, KEEL_OK);
	assert_int_equal(res->index, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_leader_read_needs_quorum_round, teardown),
		cmocka_unit_test_teardown(test_minority_leader_cannot_read, teardown),
		cmocka_unit_test_teardown(test_read_waits_for_term_commit, teardown),
		cmocka_unit_test_teardown(test_follower_read_forwarded, teardown),
		cmocka_unit_test_teardown(test_follower_read_errors, teardown),
		cmocka_unit_test_teardown(test_follower_read_times_out, teardown),
		cmocka_unit_test_teardown(test_reads_fail_on_step_down, teardown),
		cmocka_unit_test_teardown(test_read_limit, teardown),
		cmocka_unit_test_teardown(test_single_node_read, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
