/*
 * Unit tests of snapshots: compaction behind a node-made snapshot, chunked
 * InstallSnapshot (bytes supplied by the sending node, acked after they are
 * durable), install on a follower that already holds the entry, a pruned
 * snapshot reported by the node, restart from a snapshot.
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

static void propose_n(uint64_t leader, int n)
{
	char buf[24];
	for (int i = 0; i < n; i++) {
		snprintf(buf, sizeof(buf), "v%d", i);
		assert_int_equal(th_propose(&cl, leader, buf, NULL), KEEL_OK);
	}
}

static void test_compaction_keeps_trailing_entries(void **state)
{
	(void)state;
	struct raft_options o;
	raft_options_default(&o);
	o.snapshot_trailing_entries = 5;
	th_init(&cl, 3, 0, &o, 1);
	th_elect(&cl, 1);
	propose_n(1, 20);
	th_stabilize(&cl, true);
	assert_int_equal(th_node(&cl, 1)->applied, 22);
	th_take_snapshot(&cl, 1);
	struct raft_status st = th_status(&cl, 1);
	assert_int_equal(st.snapshot_index, 22);
	assert_int_equal(st.first_index, 18); /* 22 - 5 + 1 */
	assert_int_equal(st.last_index, 22);
	/* a snapshot beyond applied, or with a wrong term, is refused */
	struct raft_snapshot_meta meta = th_node(&cl, 1)->snap;
	meta.index = 23;
	assert_int_equal(raft_snapshot_taken(th_node(&cl, 1)->r, &meta), KEEL_INVAL);
	meta.index = 20;
	assert_int_equal(raft_snapshot_taken(th_node(&cl, 1)->r, &meta), KEEL_STALE);
}

/* A follower too far behind gets the snapshot in chunks whose bytes the
 * leader's node supplies; each ack leaves only after the chunk is durable;
 * the last chunk installs it. */
static void test_install_snapshot_chunked(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 2); /* chunks of 40 bytes, snapshot 100 bytes */
	th_elect(&cl, 1);
	th_isolate(&cl, 3, true);
	propose_n(1, 30);
	th_stabilize(&cl, true);
	th_take_snapshot(&cl, 1); /* trailing 0: the log starts after 32 */
	assert_int_equal(th_status(&cl, 1).first_index, 33);
	th_isolate(&cl, 3, false);
	th_tick(&cl, 1, th_node(&cl, 1)->now_ms + 100);
	th_ready_all(&cl);
	/* deliver until node 3 has received its first chunk; its ack waits */
	bool saw_chunk = false;
	while (cl.n_queue > 0 && !saw_chunk) {
		saw_chunk = cl.queue[0].m.type == RAFT_MSG_SNAPSHOT && cl.queue[0].m.to == 3;
		th_deliver_one(&cl);
		th_ready_all(&cl);
		th_persist(&cl, 1);
		th_persist(&cl, 2);
	}
	assert_true(saw_chunk);
	struct th_node *n3 = th_node(&cl, 3);
	assert_true(n3->n_pending > 0); /* the chunk is in a persist batch */
	for (size_t i = 0; i < cl.n_queue; i++) {
		assert_false(cl.queue[i].m.type == RAFT_MSG_SNAPSHOT_RESP && cl.queue[i].m.from == 3);
	}
	th_stabilize(&cl, true);
	th_tick_all(&cl, 100);
	th_stabilize(&cl, true);
	struct raft_status st = th_status(&cl, 3);
	assert_int_equal(st.snapshot_index, 32);
	assert_true(n3->has_snap);
	assert_int_equal(n3->snap.index, 32);
	assert_memory_equal(n3->snap_bytes, th_node(&cl, 1)->snap_bytes, cl.snap_size);
	assert_int_equal(n3->applied, 32);
	assert_true(n3->sm_hash == th_node(&cl, 1)->applied_hash[32]);
	/* and it keeps replicating after the snapshot */
	propose_n(1, 3);
	th_stabilize(&cl, true);
	assert_int_equal(n3->applied, 35);
	assert_true(n3->sm_hash == th_node(&cl, 1)->sm_hash);
}

/* A snapshot whose entry the follower already holds keeps the follower's
 * suffix (the install does not discard the log). */
static void test_install_keeps_matching_suffix(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 3);
	th_elect(&cl, 1);
	propose_n(1, 5);
	th_stabilize(&cl, true);
	/* node 3 has all entries, but its commit lags: craft the message */
	th_take_snapshot(&cl, 1);
	struct th_node *n1 = th_node(&cl, 1);
	struct th_node *n3 = th_node(&cl, 3);
	th_restart(&cl, 3); /* commit back to 0, log 1..7 still on disk */
	assert_int_equal(th_status(&cl, 3).commit_index, 0);
	assert_int_equal(th_status(&cl, 3).last_index, 7);
	struct raft_msg m = {.type = RAFT_MSG_SNAPSHOT, .from = 1, .to = 3, .term = 2};
	m.snapshot.meta = n1->snap;
	m.snapshot.offset = 0;
	m.snapshot.size = (uint32_t)cl.snap_size;
	m.snapshot.last = true;
	m.snapshot.data = n1->snap_bytes;
	assert_int_equal(raft_step(n3->r, &m), KEEL_OK);
	struct raft_ready rd;
	assert_true(raft_ready(n3->r, &rd));
	assert_non_null(rd.install);
	assert_false(rd.install->discard_log);
	assert_int_equal(rd.n_chunks, 1);
	raft_advance(n3->r, &rd);
	assert_int_equal(th_status(&cl, 3).last_index, 7);
	assert_int_equal(th_status(&cl, 3).commit_index, 7);
}

/* A snapshot that does not match the follower's log replaces it. */
static void test_install_discards_conflicting_log(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 4);
	th_elect(&cl, 1);
	th_isolate(&cl, 3, true);
	propose_n(1, 4);
	th_stabilize(&cl, true);
	th_take_snapshot(&cl, 1);
	struct th_node *n3 = th_node(&cl, 3);
	struct th_node *n1 = th_node(&cl, 1);
	/* 3 has a conflicting entry at 3 (a term-1 stray it never got) */
	struct raft_msg m = {.type = RAFT_MSG_SNAPSHOT, .from = 1, .to = 3, .term = 2};
	m.snapshot.meta = n1->snap;
	m.snapshot.size = (uint32_t)cl.snap_size;
	m.snapshot.last = true;
	m.snapshot.data = n1->snap_bytes;
	assert_int_equal(raft_step(n3->r, &m), KEEL_OK);
	struct raft_ready rd;
	assert_true(raft_ready(n3->r, &rd));
	assert_non_null(rd.install);
	assert_true(rd.install->discard_log);
	/* nothing is applied before the install is durable */
	assert_int_equal(rd.n_committed, 0);
	raft_advance(n3->r, &rd);
	assert_int_equal(th_status(&cl, 3).first_index, 7);
	assert_int_equal(th_status(&cl, 3).last_index, 6);
}

/* Bad chunks are ignored: wrong offset gets a reject naming the offset to
 * resume from; inconsistent sizes are dropped. */
static void test_chunk_validation(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 5);
	th_elect(&cl, 1);
	propose_n(1, 4);
	th_stabilize(&cl, true);
	th_take_snapshot(&cl, 1);
	struct th_node *n1 = th_node(&cl, 1);
	struct raft *r3 = th_node(&cl, 3)->r;
	th_restart(&cl, 3);
	r3 = th_node(&cl, 3)->r;
	struct raft_msg m = {.type = RAFT_MSG_SNAPSHOT, .from = 1, .to = 3, .term = 2};
	m.snapshot.meta = n1->snap;
	m.snapshot.offset = 40; /* nothing received yet */
	m.snapshot.size = 40;
	m.snapshot.data = n1->snap_bytes + 40;
	assert_int_equal(raft_step(r3, &m), KEEL_OK);
	struct raft_ready rd;
	assert_true(raft_ready(r3, &rd));
	assert_int_equal(rd.n_chunks, 0);
	bool rejected = false;
	for (size_t i = 0; i < rd.n_msgs; i++) {
		if (rd.msgs[i].type == RAFT_MSG_SNAPSHOT_RESP) {
			rejected = rd.msgs[i].snapshot_resp.reject &&
				   rd.msgs[i].snapshot_resp.next_offset == 0;
		}
	}
	assert_true(rejected);
	raft_advance(r3, &rd);
	/* last flag inconsistent with the size: dropped */
	m.snapshot.offset = 0;
	m.snapshot.last = true;
	m.snapshot.data = n1->snap_bytes;
	assert_int_equal(raft_step(r3, &m), KEEL_OK);
	if (raft_ready(r3, &rd)) {
		assert_int_equal(rd.n_chunks, 0);
		assert_null(rd.install);
		raft_advance(r3, &rd);
	}
}

/* The node lost the snapshot a chunk asks for: it reports failure and the
 * core starts over with the newest snapshot. */
static void test_report_snapshot_failed_restarts(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 6);
	th_elect(&cl, 1);
	th_isolate(&cl, 3, true);
	propose_n(1, 10);
	th_stabilize(&cl, true);
	th_take_snapshot(&cl, 1); /* A, at 12 */
	th_isolate(&cl, 3, false);
	th_tick(&cl, 1, th_node(&cl, 1)->now_ms + 100);
	th_ready_all(&cl);
	bool first_chunk = false;
	while (cl.n_queue > 0 && !first_chunk) {
		first_chunk = cl.queue[0].m.type == RAFT_MSG_SNAPSHOT && cl.queue[0].m.to == 3;
		th_deliver_one(&cl);
		th_ready_all(&cl);
	}
	assert_true(first_chunk);
	/* cut off mid-transfer; the leader moves on to snapshot B and prunes A */
	th_isolate(&cl, 3, true);
	propose_n(1, 5);
	th_stabilize(&cl, true);
	th_take_snapshot(&cl, 1); /* B, at 17; the harness keeps only B */
	assert_int_equal(th_status(&cl, 1).members[2].state, RAFT_PROGRESS_SNAPSHOT);
	assert_int_equal(th_status(&cl, 1).members[2].snapshot_index, 12);
	th_isolate(&cl, 3, false);
	for (int i = 0; i < 6; i++) {
		th_tick_all(&cl, 100);
		th_stabilize(&cl, true);
	}
	struct th_node *n3 = th_node(&cl, 3);
	assert_true(n3->has_snap);
	assert_int_equal(n3->snap.index, 17);
	assert_int_equal(n3->applied, th_node(&cl, 1)->applied);
	assert_true(n3->sm_hash == th_node(&cl, 1)->sm_hash);
}

/* A server restarts from its snapshot plus the entries after it. */
static void test_restart_from_snapshot(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 7);
	th_elect(&cl, 1);
	propose_n(1, 10);
	th_stabilize(&cl, true);
	th_take_snapshot(&cl, 2);
	propose_n(1, 3);
	th_stabilize(&cl, true);
	uint64_t hash = th_node(&cl, 2)->sm_hash;
	th_restart(&cl, 2);
	struct raft_status st = th_status(&cl, 2);
	assert_int_equal(st.snapshot_index, 12);
	assert_int_equal(st.commit_index, 12);
	assert_int_equal(st.last_index, 15);
	th_tick_all(&cl, 100);
	th_stabilize(&cl, true);
	assert_int_equal(th_node(&cl, 2)->applied, 15);
	assert_true(th_node(&cl, 2)->sm_hash == hash);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_compaction_keeps_trailing_entries, teardown),
		cmocka_unit_test_teardown(test_install_snapshot_chunked, teardown),
		cmocka_unit_test_teardown(test_install_keeps_matching_suffix, teardown),
		cmocka_unit_test_teardown(test_install_discards_conflicting_log, teardown),
		cmocka_unit_test_teardown(test_chunk_validation, teardown),
		cmocka_unit_test_teardown(test_report_snapshot_failed_restarts, teardown),
		cmocka_unit_test_teardown(test_restart_from_snapshot, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
