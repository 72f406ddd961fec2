/*
 * Unit tests of the Raft core: one test per rule of the paper (and of the
 * extensions keel relies on), each on a small harness cluster.
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

static size_t count_msgs(const struct raft_ready *rd, uint8_t type)
{
	size_t n = 0;
	for (size_t i = 0; i < rd->n_msgs; i++) {
		n += rd->msgs[i].type == type;
	}
	return n;
}

/* ---- election ---- */

static void test_election_basic(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 1);
	th_elect(&cl, 1);
	assert_int_equal(th_leader(&cl), 1);
	struct raft_status st = th_status(&cl, 1);
	assert_int_equal(st.term, 2);
	for (uint64_t id = 2; id <= 3; id++) {
		st = th_status(&cl, id);
		assert_int_equal(st.role, RAFT_FOLLOWER);
		assert_int_equal(st.leader, 1);
		assert_int_equal(st.term, 2);
		assert_int_equal(st.vote, 1);
	}
	/* the no-op of term 2 is committed and applied everywhere */
	for (uint64_t id = 1; id <= 3; id++) {
		assert_int_equal(th_status(&cl, id).commit_index, 2);
		assert_int_equal(th_node(&cl, id)->applied, 2);
	}
}

/* Election safety: one vote per term; a candidate without a quorum never
 * leads, and two candidates of one term cannot both win. */
static void test_election_safety_split_vote(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 2);
	cl.opts.pre_vote = false;
	/* restart nodes without pre-vote so that both campaign for real */
	th_close(&cl);
	struct raft_options o;
	raft_options_default(&o);
	o.pre_vote = false;
	th_init(&cl, 3, 0, &o, 2);
	th_tick(&cl, 1, 5000);
	th_tick(&cl, 2, 5000);
	th_ready_all(&cl);
	/* both are candidates in term 2, each voted for itself */
	assert_int_equal(th_status(&cl, 1).role, RAFT_CANDIDATE);
	assert_int_equal(th_status(&cl, 2).role, RAFT_CANDIDATE);
	assert_int_equal(th_status(&cl, 1).term, 2);
	assert_int_equal(th_status(&cl, 2).term, 2);
	th_stabilize(&cl, true);
	/* node 3 votes for whichever asked first, once: exactly one leader */
	uint32_t leaders = 0;
	for (uint64_t id = 1; id <= 3; id++) {
		leaders += th_status(&cl, id).role == RAFT_LEADER;
	}
	assert_int_equal(leaders, 1);
	assert_int_equal(th_status(&cl, 3).vote, th_leader(&cl));
}

static void test_candidate_needs_quorum(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 3);
	th_isolate(&cl, 1, true);
	th_elect(&cl, 1);
	assert_int_not_equal(th_status(&cl, 1).role, RAFT_LEADER);
	/* pre-vote: an isolated node does not even raise its term */
	assert_int_equal(th_status(&cl, 1).term, 1);
	assert_int_equal(th_status(&cl, 1).role, RAFT_PRE_CANDIDATE);
}

/* Vote restriction (§5.4.1): a voter refuses a candidate whose log is
 * behind its own. */
static void test_vote_requires_up_to_date_log(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 4);
	th_elect(&cl, 1);
	th_isolate(&cl, 3, true);
	th_propose(&cl, 1, "a", NULL);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 2).last_index, 3);
	assert_int_equal(th_status(&cl, 3).last_index, 2);
	/* node 1 goes away; node 3 (behind) campaigns: 2 refuses it */
	th_isolate(&cl, 1, true);
	th_isolate(&cl, 3, false);
	th_isolate(&cl, 1, true);
	th_tick_all(&cl, 5000); /* leases of 2 and 3 expire */
	th_stabilize(&cl, true);
	th_elect(&cl, 3);
	assert_int_not_equal(th_status(&cl, 3).role, RAFT_LEADER);
	th_elect(&cl, 2);
	assert_int_equal(th_status(&cl, 2).role, RAFT_LEADER);
}

/* A candidate counts its own vote only once term+vote are durable, and a
 * voter sends its grant only after its vote is durable. */
static void test_vote_after_persist(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 5);
	struct raft_options o = cl.opts;
	(void)o;
	th_tick(&cl, 1, 5000);
	th_stabilize(&cl, false); /* pre-vote round needs no disk */
	assert_int_equal(th_status(&cl, 1).role, RAFT_CANDIDATE);
	/* voters got the real request but persisted nothing: no grant out */
	for (uint64_t id = 2; id <= 3; id++) {
		struct th_node *n = th_node(&cl, id);
		assert_int_equal(th_status(&cl, id).vote, 1);
		assert_true(n->n_pending > 0);
		assert_int_equal(n->hs.vote, 0);
	}
	assert_int_equal(th_status(&cl, 1).role, RAFT_CANDIDATE);
	/* voter 2 persists: its grant goes out, but the candidate's own
	 * vote is not durable yet, so one grant of three is not a quorum */
	th_persist(&cl, 2);
	th_stabilize(&cl, false);
	assert_int_equal(th_status(&cl, 1).role, RAFT_CANDIDATE);
	/* the candidate's term+vote become durable: now it counts itself */
	th_persist(&cl, 1);
	assert_int_equal(th_status(&cl, 1).role, RAFT_LEADER);
}

static void test_single_node_counts_self_after_persist(void **state)
{
	(void)state;
	th_init(&cl, 1, 0, NULL, 6);
	th_tick(&cl, 1, 5000);
	th_ready_all(&cl);
	assert_int_equal(th_status(&cl, 1).role, RAFT_CANDIDATE);
	th_persist(&cl, 1);
	assert_int_equal(th_status(&cl, 1).role, RAFT_LEADER);
	th_ready_all(&cl);
	/* the no-op is appended, but not committed before it is durable */
	assert_int_equal(th_status(&cl, 1).last_index, 2);
	assert_int_equal(th_status(&cl, 1).commit_index, 0);
	th_persist(&cl, 1);
	assert_int_equal(th_status(&cl, 1).commit_index, 2);
	uint64_t index;
	assert_int_equal(th_propose(&cl, 1, "x", &index), KEEL_OK);
	assert_int_equal(index, 3);
	th_ready_all(&cl);
	assert_int_equal(th_status(&cl, 1).commit_index, 2);
	th_persist(&cl, 1);
	th_ready_all(&cl);
	assert_int_equal(th_status(&cl, 1).commit_index, 3);
	assert_int_equal(th_node(&cl, 1)->applied, 3);
}

/* ---- replication ---- */

static void test_replication_commits_everywhere(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 7);
	th_elect(&cl, 2);
	for (int i = 0; i < 20; i++) {
		char buf[16];
		snprintf(buf, sizeof(buf), "v%d", i);
		assert_int_equal(th_propose(&cl, 2, buf, NULL), KEEL_OK);
	}
	th_stabilize(&cl, true);
	for (uint64_t id = 1; id <= 3; id++) {
		assert_int_equal(th_node(&cl, id)->applied, 22);
		assert_true(th_node(&cl, id)->sm_hash == th_node(&cl, 2)->sm_hash);
	}
	assert_int_equal(th_propose(&cl, 1, "no", NULL), KEEL_NOTLEADER);
}

/* Followers ack only after the entries are durable; the leader commits
 * with the followers' durable acks even before its own fsync, but applies
 * only what it has durably itself. */
static void test_ack_after_persist(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 8);
	th_elect(&cl, 1);
	th_propose(&cl, 1, "a", NULL);
	th_ready(&cl, th_node(&cl, 1)); /* leader: append out, own write pending */
	while (th_deliver_one(&cl)) {
	}
	/* followers received the entry; their ready holds no ack */
	for (uint64_t id = 2; id <= 3; id++) {
		struct raft_ready rd;
		struct th_node *n = th_node(&cl, id);
		assert_true(raft_ready(n->r, &rd));
		assert_int_equal(count_msgs(&rd, RAFT_MSG_APPEND_RESP), 0);
		assert_int_equal(rd.n_entries, 1);
		assert_true(rd.persist_id != 0);
		raft_advance(n->r, &rd);
		/* the harness batch is lost: persist by hand */
		assert_int_equal(raft_persisted(n->r, rd.persist_id), KEEL_OK);
		assert_true(raft_ready(n->r, &rd));
		assert_int_equal(count_msgs(&rd, RAFT_MSG_APPEND_RESP), 1);
		for (size_t i = 0; i < rd.n_msgs; i++) {
			th_enqueue(&cl, n, &rd.msgs[i]);
		}
		raft_advance(n->r, &rd);
	}
	while (th_deliver_one(&cl)) {
	}
	/* quorum of followers: committed, though the leader has not synced */
	assert_int_equal(th_status(&cl, 1).commit_index, 3);
	assert_int_equal(th_status(&cl, 1).persisted_index, 2);
	th_ready_all(&cl);
	assert_int_equal(th_node(&cl, 1)->applied, 2); /* not durable locally */
	th_persist(&cl, 1);
	th_ready_all(&cl);
	assert_int_equal(th_node(&cl, 1)->applied, 3);
}

/* Log matching and conflict resolution: a follower's divergent suffix is
 * replaced by the leader's; committed entries are never touched. */
static void test_log_matching_conflict(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 9);
	th_elect(&cl, 1);
	th_propose(&cl, 1, "base", NULL);
	th_stabilize(&cl, true);
	/* leader 1 appends entries no one else gets */
	th_isolate(&cl, 1, true);
	for (int i = 0; i < 5; i++) {
		th_propose(&cl, 1, "lost", NULL);
	}
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 1).last_index, 8);
	/* 2 becomes leader of term 3 and writes different entries */
	th_tick_all(&cl, 3000);
	th_stabilize(&cl, true);
	th_elect(&cl, 2);
	assert_int_equal(th_leader(&cl) == 2 || th_status(&cl, 2).role == RAFT_LEADER, 1);
	th_propose(&cl, 2, "kept", NULL);
	th_propose(&cl, 2, "kept2", NULL);
	th_stabilize(&cl, true);
	/* heal: 1 steps down and takes 2's log */
	th_heal(&cl);
	th_tick_all(&cl, 100);
	th_stabilize(&cl, true);
	th_tick_all(&cl, 100);
	th_stabilize(&cl, true);
	struct raft_status s1 = th_status(&cl, 1), s2 = th_status(&cl, 2);
	assert_int_equal(s1.role, RAFT_FOLLOWER);
	assert_int_equal(s1.last_index, s2.last_index);
	assert_int_equal(s1.last_term, s2.last_term);
	assert_int_equal(th_node(&cl, 1)->applied, th_node(&cl, 2)->applied);
	assert_true(th_node(&cl, 1)->sm_hash == th_node(&cl, 2)->sm_hash);
}

/* Delivers queued messages while `keep` says so; others are dropped. */
static void deliver_where(bool (*keep)(const struct raft_msg *m))
{
	while (cl.n_queue > 0) {
		if (keep(&cl.queue[0].m)) {
			th_deliver_one(&cl);
		} else {
			struct th_msg q = cl.queue[0];
			memmove(&cl.queue[0], &cl.queue[1], (cl.n_queue - 1) * sizeof(*cl.queue));
			cl.n_queue--;
			th_msg_free(&q);
		}
		th_ready_all(&cl);
		for (uint64_t id = 1; id <= cl.n; id++) {
			th_persist(&cl, id);
		}
		th_ready_all(&cl);
	}
}

static bool only_1_and_3(const struct raft_msg *m)
{
	return (m->from == 1 && m->to == 3) || (m->from == 3 && m->to == 1);
}

static bool not_append_entries_to_3(const struct raft_msg *m)
{
	/* Once 3 holds 1's old-term entry, appends carrying the term-4 no-op
	 * are lost (before that, 3 rejects them anyway: its log is short). */
	if (m->type == RAFT_MSG_APPEND && m->to == 3 && th_status(&cl, 3).last_index >= 3) {
		for (uint32_t i = 0; i < m->append.n_entries; i++) {
			if (m->append.entries[i].term == 4) {
				return false;
			}
		}
	}
	return only_1_and_3(m);
}

/* Figure 8 (§5.4.2): a leader must not commit an entry of an earlier term
 * by counting replicas, or a later leader may overwrite it. */
static void test_figure8_commit_rule(void **state)
{
	(void)state;
	struct raft_options o;
	raft_options_default(&o);
	o.max_append_entries = 1; /* the old entry and the no-op travel apart */
	o.max_inflight_msgs = 1;
	o.snapshot_trailing_entries = 0;
	o.pre_vote = false; /* elections on demand, without leases */
	o.check_quorum = false;
	th_init(&cl, 3, 0, &o, 10);
	th_elect(&cl, 1);                       /* term 2: log 1,2 everywhere */
	assert_int_equal(th_status(&cl, 3).commit_index, 2);
	th_isolate(&cl, 1, true);
	th_propose(&cl, 1, "old", NULL);        /* 3/2 only on node 1 */
	th_stabilize(&cl, true);
	/* node 2 wins term 3 with 3's vote, but its no-op (3/3) reaches no one */
	th_tick(&cl, 2, th_node(&cl, 2)->now_ms + 3000);
	th_ready_all(&cl);
	while (th_status(&cl, 2).role != RAFT_LEADER && th_deliver_one(&cl)) {
		th_ready_all(&cl);
		th_persist(&cl, 2);
		th_persist(&cl, 3);
		th_ready_all(&cl);
	}
	assert_int_equal(th_status(&cl, 2).role, RAFT_LEADER);
	th_isolate(&cl, 2, true); /* its appends never arrive */
	deliver_where(only_1_and_3);
	assert_int_equal(th_status(&cl, 2).term, 3);
	assert_int_equal(th_status(&cl, 3).last_index, 2);
	/* node 1 wins term 4 with 3's vote (3's log is behind 1's) */
	th_isolate(&cl, 1, false);
	th_isolate(&cl, 2, true);
	/* term 3 (3 already voted for 2 in it), then term 4 */
	for (int i = 0; i < 2; i++) {
		th_tick(&cl, 1, th_node(&cl, 1)->now_ms + 3000);
		th_ready_all(&cl);
		deliver_where(not_append_entries_to_3);
	}
	for (int i = 0; i < 5; i++) {
		th_tick(&cl, 1, th_node(&cl, 1)->now_ms + 50);
		th_ready_all(&cl);
		deliver_where(not_append_entries_to_3);
	}
	assert_int_equal(th_status(&cl, 1).term, 4);
	assert_int_equal(th_status(&cl, 3).last_index, 3); /* got the old entry */
	/* 3/2 is on a majority (1 and 3), but it is of term 2: not committed */
	assert_int_equal(th_status(&cl, 1).commit_index, 2);
	assert_int_equal(th_node(&cl, 1)->applied, 2);
	/* node 1 goes; node 2 (last term 3) wins term 5 with 3's vote and
	 * overwrites 3/2 — which was never committed, so nothing is lost */
	th_isolate(&cl, 1, true);
	th_isolate(&cl, 2, false);
	/* 2, still leader of term 3, heartbeats and learns of term 4 */
	th_tick(&cl, 2, th_node(&cl, 2)->now_ms + 100);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 2).role, RAFT_FOLLOWER);
	th_elect(&cl, 2);
	assert_int_equal(th_status(&cl, 2).role, RAFT_LEADER);
	th_stabilize(&cl, true);
	struct raft_entry e;
	assert_true(raft_entry_at(th_node(&cl, 3)->r, 3, &e));
	assert_int_equal(e.term, 3);
	assert_true(th_node(&cl, 3)->applied >= 3);
	assert_int_equal(th_node(&cl, 3)->applied_term[3], 3);
}

/* A candidate with a quorum of other servers' votes becomes leader only
 * once its own term+vote are durable (else a crash could make it lead the
 * same term twice, with different entries). */
static void test_candidate_leads_only_after_durable_term(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 11);
	th_tick(&cl, 1, 5000);
	th_stabilize(&cl, false); /* pre-vote, then the real request */
	th_persist(&cl, 2);
	th_persist(&cl, 3);
	th_stabilize(&cl, false); /* both grants arrive */
	assert_int_equal(th_status(&cl, 1).role, RAFT_CANDIDATE);
	assert_int_equal(th_status(&cl, 1).term, 2);
	/* no append of term 2 went out */
	for (size_t i = 0; i < cl.n_queue; i++) {
		assert_int_not_equal(cl.queue[i].m.type, RAFT_MSG_APPEND);
	}
	th_persist(&cl, 1);
	assert_int_equal(th_status(&cl, 1).role, RAFT_LEADER);
}

/* Leader append-only: a leader never rewrites its log, even when a
 * follower reports a conflicting suffix; the follower's log is fixed. */
static void test_leader_append_only(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 12);
	th_elect(&cl, 1);
	th_isolate(&cl, 1, true);
	th_propose(&cl, 1, "x1", NULL);
	th_propose(&cl, 1, "x2", NULL);
	th_stabilize(&cl, true);
	th_tick_all(&cl, 3000);
	th_stabilize(&cl, true);
	th_elect(&cl, 2);                 /* term 3, writes y at 3.. */
	th_propose(&cl, 2, "y1", NULL);
	th_stabilize(&cl, true);
	struct raft_entry before;
	assert_true(raft_entry_at(th_node(&cl, 2)->r, 4, &before));
	uint64_t last_before = th_status(&cl, 2).last_index;
	th_heal(&cl);                     /* 1's stale appends reach 2 and 3 */
	th_tick_all(&cl, 100);
	th_stabilize(&cl, true);
	th_tick_all(&cl, 100);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 2).role, RAFT_LEADER);
	assert_true(th_status(&cl, 2).last_index >= last_before);
	struct raft_entry after;
	assert_true(raft_entry_at(th_node(&cl, 2)->r, 4, &after));
	assert_int_equal(after.term, before.term);
	assert_memory_equal(after.data, before.data, before.size);
	/* and node 1 took the leader's entries */
	assert_true(raft_entry_at(th_node(&cl, 1)->r, 4, &after));
	assert_int_equal(after.term, before.term);
}

/* Leader completeness: a server missing a committed entry cannot win. */
static void test_leader_completeness(void **state)
{
	(void)state;
	th_init(&cl, 5, 0, NULL, 13);
	th_elect(&cl, 1);
	th_isolate(&cl, 4, true);
	th_isolate(&cl, 5, true);
	th_propose(&cl, 1, "c", NULL);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 1).commit_index, 3); /* on 1, 2, 3 */
	/* 1 goes; 4 and 5 (without entry 3) come back and campaign */
	th_isolate(&cl, 1, true);
	th_isolate(&cl, 4, false);
	th_isolate(&cl, 5, false);
	th_isolate(&cl, 1, true);
	th_tick_all(&cl, 3000);
	th_stabilize(&cl, true);
	th_elect(&cl, 4);
	th_elect(&cl, 5);
	assert_int_not_equal(th_status(&cl, 4).role, RAFT_LEADER);
	assert_int_not_equal(th_status(&cl, 5).role, RAFT_LEADER);
	th_elect(&cl, 2);
	assert_int_equal(th_status(&cl, 2).role, RAFT_LEADER);
	struct raft_entry e;
	assert_true(raft_entry_at(th_node(&cl, 2)->r, 3, &e));
	assert_int_equal(e.term, 2);
}

/* State machine safety: after churn every server applied the same
 * entries (same hash after every index both applied). */
static void test_state_machine_safety(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 14);
	th_elect(&cl, 1);
	char buf[16];
	uint64_t leader = 1;
	for (int round = 0; round < 6; round++) {
		for (int i = 0; i < 3; i++) {
			snprintf(buf, sizeof(buf), "r%d.%d", round, i);
			assert_int_equal(th_propose(&cl, leader, buf, NULL), KEEL_OK);
		}
		/* a follower crashes in the middle of it */
		uint64_t victim = 1 + (leader % 3);
		th_ready_all(&cl);
		th_deliver_one(&cl);
		th_crash(&cl, victim);
		th_stabilize(&cl, true);
		th_restart(&cl, victim);
		th_tick_all(&cl, 100);
		th_stabilize(&cl, true);
		/* and leadership moves on */
		uint64_t next = 1 + (victim % 3);
		assert_int_equal(raft_transfer_leader(th_node(&cl, leader)->r, next), KEEL_OK);
		th_stabilize(&cl, true);
		assert_int_equal(th_status(&cl, next).role, RAFT_LEADER);
		leader = next;
	}
	th_tick_all(&cl, 100);
	th_stabilize(&cl, true);
	uint64_t applied = th_node(&cl, 1)->applied;
	assert_true(applied > 18);
	for (uint64_t id = 2; id <= 3; id++) {
		struct th_node *n = th_node(&cl, id);
		assert_int_equal(n->applied, applied);
		for (uint64_t i = 1; i <= applied; i++) {
			assert_true(n->applied_hash[i] == th_node(&cl, 1)->applied_hash[i]);
			assert_int_equal(n->applied_term[i], th_node(&cl, 1)->applied_term[i]);
		}
	}
}

/* Pre-vote: an isolated server keeps its term; back in the cluster it
 * does not disturb the leader. */
static void test_pre_vote_no_disruption(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 15);
	th_elect(&cl, 1);
	th_isolate(&cl, 3, true);
	for (int i = 0; i < 10; i++) {
		th_tick(&cl, 3, th_node(&cl, 3)->now_ms + 2000);
		th_stabilize(&cl, true);
	}
	assert_int_equal(th_status(&cl, 3).term, 2);
	assert_int_equal(th_status(&cl, 3).role, RAFT_PRE_CANDIDATE);
	th_isolate(&cl, 3, false);
	th_tick(&cl, 3, th_node(&cl, 3)->now_ms + 2000); /* pre-vote again */
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 1).role, RAFT_LEADER);
	assert_int_equal(th_status(&cl, 1).term, 2);
	/* a heartbeat brings 3 back as a follower */
	th_tick(&cl, 1, th_node(&cl, 1)->now_ms + 100);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 3).role, RAFT_FOLLOWER);
	assert_int_equal(th_status(&cl, 3).leader, 1);
}

/* Without pre-vote the same isolated server does raise its term. */
static void test_without_pre_vote_term_grows(void **state)
{
	(void)state;
	struct raft_options o;
	raft_options_default(&o);
	o.pre_vote = false;
	th_init(&cl, 3, 0, &o, 16);
	th_elect(&cl, 1);
	th_isolate(&cl, 3, true);
	th_tick(&cl, 3, th_node(&cl, 3)->now_ms + 3000);
	th_stabilize(&cl, true);
	assert_true(th_status(&cl, 3).term > 2);
}

/* Check-quorum: a leader cut off from the quorum steps down within an
 * election timeout; followers that hear from a live leader ignore votes
 * (stickiness). */
static void test_check_quorum_and_stickiness(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 17);
	th_elect(&cl, 1);
	/* stickiness: 2 and 3 just heard from 1; 3 asks for votes at once */
	th_tick(&cl, 3, th_node(&cl, 3)->now_ms + 10);
	struct raft_msg m = {.type = RAFT_MSG_VOTE, .from = 3, .to = 2, .term = 3};
	m.vote.last_index = 100;
	m.vote.last_term = 100;
	assert_int_equal(raft_step(th_node(&cl, 2)->r, &m), KEEL_OK);
	assert_int_equal(th_status(&cl, 2).term, 2); /* ignored */
	assert_int_equal(th_status(&cl, 2).vote, 1);
	/* check-quorum */
	th_isolate(&cl, 1, true);
	for (int i = 0; i < 25; i++) {
		th_tick(&cl, 1, th_node(&cl, 1)->now_ms + 100);
		th_stabilize(&cl, true);
	}
	assert_int_equal(th_status(&cl, 1).role, RAFT_FOLLOWER);
	assert_int_equal(th_status(&cl, 1).leader, 0);
}

/* Fast back-off: a follower with a long divergent suffix costs the leader
 * a few rejects (one per term), not one per entry. */
static void test_conflict_backoff_hint(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 18);
	th_elect(&cl, 1);
	th_isolate(&cl, 1, true);
	for (int i = 0; i < 30; i++) {
		th_propose(&cl, 1, "stale", NULL);
	}
	th_stabilize(&cl, true);
	th_tick_all(&cl, 3000);
	th_stabilize(&cl, true);
	th_elect(&cl, 2);
	for (int i = 0; i < 5; i++) {
		th_propose(&cl, 2, "fresh", NULL);
	}
	th_stabilize(&cl, true);
	/* 2 restarts and leads again: it knows nothing of 1's log and probes
	 * from its own end, deep inside 1's divergent suffix */
	th_restart(&cl, 2);
	th_tick_all(&cl, 3000);
	th_stabilize(&cl, true);
	th_elect(&cl, 2);
	assert_int_equal(th_status(&cl, 2).role, RAFT_LEADER);
	assert_true(th_status(&cl, 1).last_index > th_status(&cl, 2).last_index);
	th_heal(&cl);
	/* count rejects from 1 while it converges */
	uint32_t rejects = 0;
	th_tick_all(&cl, 100);
	th_ready_all(&cl);
	for (int rounds = 0; rounds < 1000 && cl.n_queue > 0; rounds++) {
		const struct raft_msg *q = &cl.queue[0].m;
		rejects += q->type == RAFT_MSG_APPEND_RESP && q->from == 1 && q->append_resp.reject;
		th_deliver_one(&cl);
		th_ready_all(&cl);
		for (uint64_t id = 1; id <= 3; id++) {
			th_persist(&cl, id);
		}
		th_ready_all(&cl);
	}
	th_tick_all(&cl, 100);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 1).last_index, th_status(&cl, 2).last_index);
	assert_int_equal(th_status(&cl, 1).last_term, th_status(&cl, 2).last_term);
	assert_true(rejects >= 1);
	assert_true(rejects <= 3);
}

/* Messages with a stale term are answered so the sender catches up; bad
 * structs are refused. */
static void test_step_validation(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 19);
	th_elect(&cl, 1);
	struct raft *r = th_node(&cl, 2)->r;
	struct raft_msg m = {.type = RAFT_MSG_HEARTBEAT, .from = 1, .to = 3, .term = 2};
	assert_int_equal(raft_step(r, &m), KEEL_INVAL); /* not for us */
	m.to = 2;
	m.from = 0;
	assert_int_equal(raft_step(r, &m), KEEL_INVAL);
	m.from = 1;
	m.type = 99;
	assert_int_equal(raft_step(r, &m), KEEL_INVAL);
	m.type = RAFT_MSG_APPEND;
	m.term = 1; /* stale */
	assert_int_equal(raft_step(r, &m), KEEL_OK);
	struct raft_ready rd;
	assert_true(raft_ready(r, &rd));
	assert_int_equal(rd.n_msgs, 1);
	assert_int_equal(rd.msgs[0].type, RAFT_MSG_APPEND_RESP);
	assert_int_equal(rd.msgs[0].term, 2);
	raft_advance(r, &rd);
}

/* A batch handed to storage before a truncation never makes the entries
 * it wrote count once they were replaced. */
static void test_persisted_index_survives_truncation(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 20);
	struct raft *r = th_node(&cl, 3)->r;
	uint8_t d = 'x';
	struct raft_entry old[2] = {
		{.term = 2, .index = 2, .type = RAFT_ENTRY_NORMAL, .size = 1, .data = &d},
		{.term = 2, .index = 3, .type = RAFT_ENTRY_NORMAL, .size = 1, .data = &d},
	};
	struct raft_msg m = {.type = RAFT_MSG_APPEND, .from = 1, .to = 3, .term = 2};
	m.append.prev_index = 1;
	m.append.prev_term = 1;
	m.append.n_entries = 2;
	m.append.entries = old;
	assert_int_equal(raft_step(r, &m), KEEL_OK);
	struct raft_ready rd;
	assert_true(raft_ready(r, &rd));
	uint64_t first = rd.persist_id;
	assert_int_equal(rd.n_entries, 2);
	raft_advance(r, &rd);
	/* a leader of term 3 replaces index 3 before batch 1 is durable */
	struct raft_entry repl = {.term = 3, .index = 3, .type = RAFT_ENTRY_NORMAL, .size = 1, .data = &d};
	struct raft_msg m2 = {.type = RAFT_MSG_APPEND, .from = 2, .to = 3, .term = 3};
	m2.append.prev_index = 2;
	m2.append.prev_term = 2;
	m2.append.n_entries = 1;
	m2.append.entries = &repl;
	assert_int_equal(raft_step(r, &m2), KEEL_OK);
	assert_true(raft_ready(r, &rd));
	uint64_t second = rd.persist_id;
	assert_true(second > first);
	assert_int_equal(rd.n_entries, 1);
	assert_int_equal(rd.entries[0].index, 3); /* the node deletes 3.. and appends */
	raft_advance(r, &rd);
	assert_int_equal(raft_persisted(r, first), KEEL_OK);
	assert_int_equal(th_status(&cl, 3).persisted_index, 2); /* not the old 3 */
	assert_int_equal(raft_persisted(r, second), KEEL_OK);
	assert_int_equal(th_status(&cl, 3).persisted_index, 3);
	assert_int_equal(raft_persisted(r, second), KEEL_INVAL); /* twice */
	assert_int_equal(raft_persisted(r, second + 5), KEEL_INVAL); /* never handed */
}

/* At most max_persist_batches outstanding: past that, ready() holds new
 * persistent work back until raft_persisted() catches up. */
static void test_persist_backpressure(void **state)
{
	(void)state;
	struct raft_options o;
	raft_options_default(&o);
	o.max_persist_batches = 2;
	th_init(&cl, 1, 0, &o, 21);
	th_elect(&cl, 1);
	struct raft *r = th_node(&cl, 1)->r;
	struct raft_ready rd;
	uint64_t ids[3] = {0};
	for (int i = 0; i < 3; i++) {
		uint64_t index, term;
		assert_int_equal(raft_propose(r, "p", 1, &index, &term), KEEL_OK);
		bool any = raft_ready(r, &rd);
		ids[i] = any ? rd.persist_id : 0;
		if (any) {
			raft_advance(r, &rd);
		}
	}
	assert_true(ids[0] != 0);
	assert_true(ids[1] != 0);
	assert_int_equal(ids[2], 0); /* held back */
	assert_int_equal(th_status(&cl, 1).persist_batches, 2);
	assert_int_equal(raft_persisted(r, ids[0]), KEEL_OK);
	assert_true(raft_ready(r, &rd));
	assert_true(rd.persist_id != 0);
	assert_int_equal(rd.n_entries, 1);
	raft_advance(r, &rd);
}

/* Options are validated; bootstrap refuses a config without voters. */
static void test_init_validation(void **state)
{
	(void)state;
	struct raft_options o;
	raft_options_default(&o);
	struct raft *r = NULL;
	assert_int_equal(raft_init(&r, &o), KEEL_INVAL); /* id 0 */
	o.id = 1;
	o.heartbeat_interval_ms = o.election_timeout_ms;
	assert_int_equal(raft_init(&r, &o), KEEL_INVAL);
	assert_null(r);
	struct raft_config c = {.count = 1};
	c.members[0].id = 1;
	c.members[0].role = RAFT_LEARNER;
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 1024);
	struct raft_entry e;
	assert_int_equal(raft_bootstrap_entry(&c, &w, &e), KEEL_CONFIG);
	keel_wbuf_free(&w);
	/* restore refuses a gap */
	raft_options_default(&o);
	o.id = 1;
	assert_int_equal(raft_init(&r, &o), KEEL_OK);
	struct raft_hard_state hs = {.term = 1};
	struct raft_entry entries[2] = {
		{.term = 1, .index = 1, .type = RAFT_ENTRY_NOOP},
		{.term = 1, .index = 3, .type = RAFT_ENTRY_NOOP},
	};
	assert_int_equal(raft_restore(r, &hs, NULL, entries, 2), KEEL_CORRUPT);
	raft_close(r);
}


/* A follower that comes back without entries it had acknowledged (its disk
 * lost the tail: Raft's fault model says it cannot, real disks sometimes
 * do) is re-replicated from what it has instead of being probed forever
 * above its log. */
static void test_follower_lost_acked_entries_is_repaired(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 1);
	th_elect(&cl, 1);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(th_propose(&cl, 1, "entry", NULL), KEEL_OK);
	}
	th_stabilize(&cl, true);
	struct raft_status st = th_status(&cl, 1);
	uint64_t last = st.last_index;
	assert_int_equal(th_status(&cl, 3).last_index, last);
	assert_int_equal(st.members[2].match_index, last);
	/* Node 3 crashes and its disk drops the last five entries it acked. */
	th_crash(&cl, 3);
	th_disk_truncate(th_node(&cl, 3), last - 4);
	th_restart(&cl, 3);
	assert_int_equal(th_status(&cl, 3).last_index, last - 5);
	assert_int_equal(th_propose(&cl, 1, "after", NULL), KEEL_OK);
	for (int round = 0; round < 20 && th_status(&cl, 3).last_index < last + 1; round++) {
		th_tick_all(&cl, cl.opts.heartbeat_interval_ms);
		th_stabilize(&cl, true);
	}
	assert_int_equal(th_status(&cl, 3).last_index, last + 1);
	assert_int_equal(th_status(&cl, 3).commit_index, last + 1);
	assert_int_equal(th_node(&cl, 3)->sm_hash, th_node(&cl, 1)->sm_hash);
	st = th_status(&cl, 1);
	assert_int_equal(st.follower_lost_entries, 1);
	assert_int_equal(st.members[2].match_index, last + 1);
}

/* A follower told that its link to the leader broke campaigns after a few
 * heartbeat intervals, not a whole election timeout, and does not vouch for
 * the dead leader in pre-votes any more. */
static void test_leader_link_loss_speeds_up_election(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 1);
	th_elect(&cl, 1);
	assert_int_equal(th_leader(&cl), 1);
	uint64_t term = th_status(&cl, 2).term;
	th_crash(&cl, 1);
	raft_report_unreachable(th_node(&cl, 2)->r, 1);
	raft_report_unreachable(th_node(&cl, 3)->r, 1);
	/* Well under the election timeout (T = election_timeout_ms). */
	uint64_t waited = 0;
	while (waited < 5 * cl.opts.heartbeat_interval_ms &&
	       (th_status(&cl, 2).role != RAFT_LEADER && th_status(&cl, 3).role != RAFT_LEADER)) {
		th_tick(&cl, 2, th_node(&cl, 2)->now_ms + cl.opts.heartbeat_interval_ms / 2);
		th_tick(&cl, 3, th_node(&cl, 3)->now_ms + cl.opts.heartbeat_interval_ms / 2);
		th_stabilize(&cl, true);
		waited += cl.opts.heartbeat_interval_ms / 2;
	}
	assert_true(waited < cl.opts.election_timeout_ms);
	uint64_t leader = th_leader(&cl);
	assert_true(leader == 2 || leader == 3);
	assert_true(th_status(&cl, leader).term > term);
}

/* A follower that lost its link to a leader the other follower still hears
 * from cannot depose it: the pre-vote fails and the leader stays. */
static void test_leader_link_loss_alone_does_not_disrupt(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 1);
	th_elect(&cl, 1);
	uint64_t term = th_status(&cl, 1).term;
	cl.cut[1][3] = true;
	cl.cut[3][1] = true;
	raft_report_unreachable(th_node(&cl, 3)->r, 1);
	for (int i = 0; i < 10; i++) {
		th_tick_all(&cl, cl.opts.heartbeat_interval_ms);
		th_stabilize(&cl, true);
	}
	assert_int_equal(th_leader(&cl), 1);
	assert_int_equal(th_status(&cl, 1).term, term);
	assert_int_equal(th_status(&cl, 2).term, term);
}

/* A server with no configuration naming it a voter (it starts empty to
 * join, maybe under the id of a member whose disk was wiped) votes for no
 * one: it may have forgotten votes cast in those terms. */
static void test_non_member_never_votes(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 1);
	th_elect(&cl, 1);
	uint64_t id = th_add_empty_node(&cl);
	struct raft_status st2 = th_status(&cl, 2);
	struct raft_msg m;
	memset(&m, 0, sizeof(m));
	m.type = RAFT_MSG_VOTE;
	m.from = 2;
	m.to = id;
	m.term = st2.term + 1;
	m.vote.last_index = st2.last_index;
	m.vote.last_term = st2.last_term;
	assert_int_equal(raft_step(th_node(&cl, id)->r, &m), KEEL_OK);
	th_stabilize(&cl, true);
	struct raft_status st = th_status(&cl, id);
	assert_int_equal(st.vote, 0);
	assert_int_equal(st.term, st2.term + 1); /* it did learn the term */
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_teardown(test_election_basic, teardown),
	cmocka_unit_test_teardown(test_election_safety_split_vote, teardown),
	cmocka_unit_test_teardown(test_candidate_needs_quorum, teardown),
	cmocka_unit_test_teardown(test_vote_requires_up_to_date_log, teardown),
	cmocka_unit_test_teardown(test_vote_after_persist, teardown),
	cmocka_unit_test_teardown(test_single_node_counts_self_after_persist, teardown),
	cmocka_unit_test_teardown(test_replication_commits_everywhere, teardown),
	cmocka_unit_test_teardown(test_ack_after_persist, teardown),
	cmocka_unit_test_teardown(test_log_matching_conflict, teardown),
	cmocka_unit_test_teardown(test_figure8_commit_rule, teardown),
	cmocka_unit_test_teardown(test_candidate_leads_only_after_durable_term, teardown),
	cmocka_unit_test_teardown(test_leader_append_only, teardown),
	cmocka_unit_test_teardown(test_leader_completeness, teardown),
	cmocka_unit_test_teardown(test_state_machine_safety, teardown),
	cmocka_unit_test_teardown(test_pre_vote_no_disruption, teardown),
	cmocka_unit_test_teardown(test_without_pre_vote_term_grows, teardown),
	cmocka_unit_test_teardown(test_check_quorum_and_stickiness, teardown),
	cmocka_unit_test_teardown(test_conflict_backoff_hint, teardown),
	cmocka_unit_test_teardown(test_step_validation, teardown),
	cmocka_unit_test_teardown(test_persisted_index_survives_truncation, teardown),
	cmocka_unit_test_teardown(test_persist_backpressure, teardown),
	cmocka_unit_test_teardown(test_follower_lost_acked_entries_is_repaired, teardown),
	cmocka_unit_test_teardown(test_leader_link_loss_speeds_up_election, teardown),
	cmocka_unit_test_teardown(test_leader_link_loss_alone_does_not_disrupt, teardown),
	cmocka_unit_test_teardown(test_non_member_never_votes, teardown),
	cmocka_unit_test(test_init_validation),
};

int main(void)
{
	return cmocka_run_group_tests(tests, NULL, NULL);
}
