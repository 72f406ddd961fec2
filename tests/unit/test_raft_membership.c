/*
 * Unit tests of membership: learners (replicate, never vote, never count),
 * single-server changes and their restrictions, promotion, removal of a
 * follower and of the leader itself, leadership transfer with TimeoutNow.
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

static enum keel_err change(uint64_t leader, enum raft_change ch, uint64_t id)
{
	uint64_t index, term;
	return raft_change_member(th_node(&cl, leader)->r, ch, id, &index, &term);
}

/* A learner receives and applies every entry but never campaigns, and
 * commit does not wait for it. */
static void test_learner_replicates_but_does_not_vote(void **state)
{
	(void)state;
	th_init(&cl, 3, 1, NULL, 1); /* 1..3 voters, 4 learner */
	th_elect(&cl, 1);
	th_propose(&cl, 1, "a", NULL);
	th_stabilize(&cl, true);
	assert_int_equal(th_node(&cl, 4)->applied, 3);
	assert_true(th_node(&cl, 4)->sm_hash == th_node(&cl, 1)->sm_hash);
	/* the learner's timer fires: it does not campaign */
	th_tick(&cl, 4, th_node(&cl, 4)->now_ms + 10000);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 4).role, RAFT_FOLLOWER);
	assert_int_equal(th_status(&cl, 1).term, 2);
	/* with the learner cut off, commit proceeds with the voters */
	th_isolate(&cl, 4, true);
	th_propose(&cl, 1, "b", NULL);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 1).commit_index, 4);
	/* with two voters cut off, the learner's ack does not make a quorum */
	th_isolate(&cl, 4, false);
	th_isolate(&cl, 2, true);
	th_isolate(&cl, 3, true);
	th_propose(&cl, 1, "c", NULL);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 4).last_index, 5);
	assert_int_equal(th_status(&cl, 1).commit_index, 4);
	/* and the leader's vote requests never go to the learner */
	th_heal(&cl);
	th_isolate(&cl, 1, true);
	th_tick_all(&cl, 3000);
	th_ready_all(&cl);
	for (size_t i = 0; i < cl.n_queue; i++) {
		if (cl.queue[i].m.type == RAFT_MSG_VOTE) {
			assert_int_not_equal(cl.queue[i].m.to, 4);
		}
	}
}

static void test_add_learner_then_promote(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 2);
	th_elect(&cl, 1);
	th_propose(&cl, 1, "a", NULL);
	th_stabilize(&cl, true);
	uint64_t id = th_add_empty_node(&cl);
	assert_int_equal(id, 4);
	assert_int_equal(change(1, RAFT_ADD_LEARNER, 4), KEEL_OK);
	/* one change at a time */
	assert_int_equal(change(1, RAFT_PROMOTE, 4), KEEL_BUSY);
	th_stabilize(&cl, true);
	assert_int_equal(raft_config_role(raft_config(th_node(&cl, 1)->r), 4), RAFT_LEARNER);
	assert_int_equal(th_node(&cl, 4)->applied, th_node(&cl, 1)->applied);
	assert_int_equal(change(1, RAFT_ADD_LEARNER, 4), KEEL_EXIST);
	assert_int_equal(change(1, RAFT_PROMOTE, 4), KEEL_OK);
	th_stabilize(&cl, true);
	assert_int_equal(raft_config_voters(raft_config(th_node(&cl, 1)->r)), 4);
	assert_int_equal(change(1, RAFT_PROMOTE, 4), KEEL_INVAL); /* already a voter */
	/* the config in force at each index, as a snapshot there must carry */
	struct raft_config at;
	struct raft *r1 = th_node(&cl, 1)->r;
	assert_int_equal(raft_config_at_index(r1, 3, &at), KEEL_OK);
	assert_int_equal(at.count, 3);
	assert_int_equal(raft_config_at_index(r1, 4, &at), KEEL_OK);
	assert_int_equal(raft_config_role(&at, 4), RAFT_LEARNER);
	assert_int_equal(raft_config_at_index(r1, raft_last_index(r1), &at), KEEL_OK);
	assert_int_equal(raft_config_role(&at, 4), RAFT_VOTER);
	assert_int_equal(raft_config_at_index(r1, raft_last_index(r1) + 1, &at), KEEL_NOENT);
	/* now a quorum is 3 of 4: two voters cut off stop commits */
	th_isolate(&cl, 2, true);
	th_isolate(&cl, 3, true);
	th_propose(&cl, 1, "b", NULL);
	th_stabilize(&cl, true);
	uint64_t commit = th_status(&cl, 1).commit_index;
	assert_true(commit < th_status(&cl, 1).last_index);
	th_isolate(&cl, 3, false);
	th_tick(&cl, 1, th_node(&cl, 1)->now_ms + 100);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 1).commit_index, th_status(&cl, 1).last_index);
}

/* Config changes are refused before the leader committed an entry of its
 * own term, and for bad arguments. */
static void test_change_restrictions(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 3);
	th_tick(&cl, 1, 5000);
	th_stabilize(&cl, false);
	th_persist(&cl, 2);
	th_stabilize(&cl, false); /* 2's grant arrives */
	th_persist(&cl, 1);
	th_ready_all(&cl); /* leader, but its no-op is not committed yet */
	assert_int_equal(th_status(&cl, 1).role, RAFT_LEADER);
	assert_int_equal(change(1, RAFT_ADD_LEARNER, 9), KEEL_BUSY);
	th_stabilize(&cl, true);
	assert_int_equal(change(1, RAFT_ADD_LEARNER, 0), KEEL_INVAL);
	assert_int_equal(change(1, RAFT_REMOVE, 9), KEEL_NOENT);
	assert_int_equal(change(1, RAFT_PROMOTE, 9), KEEL_NOENT);
	assert_int_equal(change(1, RAFT_ADD_VOTER, 2), KEEL_EXIST);
	assert_int_equal(change(2, RAFT_ADD_VOTER, 9), KEEL_NOTLEADER);
}

/* A removed follower no longer counts; the change is in force as soon as
 * it is appended, before it commits. */
static void test_remove_follower(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 4);
	th_elect(&cl, 1);
	assert_int_equal(change(1, RAFT_REMOVE, 3), KEEL_OK);
	/* in force at once on the leader */
	assert_int_equal(raft_config_voters(raft_config(th_node(&cl, 1)->r)), 2);
	th_stabilize(&cl, true);
	assert_int_equal(raft_config_voters(raft_config(th_node(&cl, 2)->r)), 2);
	/* quorum of {1, 2} is 2: with 2 cut off nothing commits, whatever 3 does */
	th_isolate(&cl, 2, true);
	th_propose(&cl, 1, "x", NULL);
	th_stabilize(&cl, true);
	assert_true(th_status(&cl, 1).commit_index < th_status(&cl, 1).last_index);
}

/* The leader removes itself: it keeps leading until the change commits,
 * then steps down and another voter takes over. */
static void test_remove_leader_itself(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 5);
	th_elect(&cl, 1);
	assert_int_equal(change(1, RAFT_REMOVE, 1), KEEL_OK);
	assert_int_equal(th_status(&cl, 1).role, RAFT_LEADER);
	assert_int_equal(th_propose(&cl, 1, "x", NULL), KEEL_NOTLEADER);
	th_stabilize(&cl, true);
	assert_int_not_equal(th_status(&cl, 1).role, RAFT_LEADER);
	th_tick_all(&cl, 100);
	th_stabilize(&cl, true);
	uint64_t leader = th_leader(&cl);
	assert_true(leader == 2 || leader == 3);
	/* the new leader's config lacks 1, and 1 never campaigns again */
	assert_int_equal(raft_config_role(raft_config(th_node(&cl, leader)->r), 1), 0);
	th_tick(&cl, 1, th_node(&cl, 1)->now_ms + 10000);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 1).role, RAFT_FOLLOWER);
	assert_int_equal(th_propose(&cl, leader, "y", NULL), KEEL_OK);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, leader).commit_index, th_status(&cl, leader).last_index);
}

/* A change that would leave the voters needing a server that holds nothing
 * yet waits (BUSY) until that server has caught up. Found by the simulator
 * (seed 241739097306/3): {1,2} added an empty 5 as a voter, 1 removed
 * itself, and {2,5} could elect nobody, since 5 held no configuration. */
static void test_change_waits_for_a_quorum_that_holds_the_log(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 8);
	th_elect(&cl, 1);
	assert_int_equal(change(1, RAFT_REMOVE, 3), KEEL_OK);
	th_stabilize(&cl, true);
	uint64_t id = th_add_empty_node(&cl);
	th_isolate(&cl, id, true);
	/* {1,2,4}: 1 and 2 hold the log, a majority of three */
	assert_int_equal(change(1, RAFT_ADD_VOTER, id), KEEL_OK);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 1).commit_index, th_status(&cl, 1).last_index);
	/* {2,4} or {1,4} would need the empty 4 */
	assert_int_equal(change(1, RAFT_REMOVE, 1), KEEL_BUSY);
	assert_int_equal(change(1, RAFT_REMOVE, 2), KEEL_BUSY);
	assert_int_equal(raft_config_voters(raft_config(th_node(&cl, 1)->r)), 3);
	/* once 4 has caught up, the same change goes through */
	th_isolate(&cl, id, false);
	th_tick(&cl, 1, th_node(&cl, 1)->now_ms + 100);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, id).last_index, th_status(&cl, 1).last_index);
	assert_int_equal(change(1, RAFT_REMOVE, 1), KEEL_OK);
	th_stabilize(&cl, true);
	th_tick_all(&cl, 100);
	th_stabilize(&cl, true);
	uint64_t leader = th_leader(&cl);
	assert_true(leader == 2 || leader == id);
	assert_int_equal(th_propose(&cl, leader, "y", NULL), KEEL_OK);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, leader).commit_index, th_status(&cl, leader).last_index);
}

/* A server whose log ends in its own removal — proposed while it led,
 * never replicated, so no majority has it — still votes: the configuration
 * that counts may need it. Found by the simulator (seed 327847891820/3),
 * where refusing left no electable candidate for good. */
static void test_server_holding_its_own_uncommitted_removal_votes(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 7);
	th_elect(&cl, 2);
	th_isolate(&cl, 2, true);
	assert_int_equal(change(2, RAFT_REMOVE, 2), KEEL_OK); /* only 2 has it */
	th_stabilize(&cl, true);
	/* 1 and 3 elect 1 in a later term, which appends more */
	th_tick_all(&cl, 5000); /* 3's lease from 2 expires */
	th_stabilize(&cl, true);
	th_elect(&cl, 1);
	assert_int_equal(th_status(&cl, 1).role, RAFT_LEADER);
	assert_int_equal(th_propose(&cl, 1, "x", NULL), KEEL_OK);
	th_stabilize(&cl, true);
	/* 3 goes down and 1 restarts: 1 can lead again only with 2's vote */
	th_crash(&cl, 3);
	th_restart(&cl, 1);
	th_heal(&cl);
	th_isolate(&cl, 3, true);
	th_tick_all(&cl, 5000);
	th_stabilize(&cl, true);
	th_elect(&cl, 1);
	uint64_t leader = 1;
	assert_int_equal(th_status(&cl, leader).role, RAFT_LEADER);
	assert_int_equal(th_propose(&cl, leader, "y", NULL), KEEL_OK);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 2).commit_index, th_status(&cl, leader).last_index);
	/* and 2, now holding the leader's log, is a voter again */
	assert_int_equal(raft_config_role(raft_config(th_node(&cl, 2)->r), 2), RAFT_VOTER);
}

/* A server whose log ends in its own removal, which no other server has,
 * campaigns (under the new configuration, without its own vote) when the
 * old configuration's other voters cannot win without it: its longer log
 * refuses them its vote, and an empty voter holds no configuration and
 * votes for nobody. Raft's single-server changes allow this: a server out
 * of its latest configuration may be needed until that one is committed.
 * Found by the simulator (seeds 630769167500/3, 850734855932/3
 * --controller), where no leader came back for good after heal. */
static void test_server_holding_its_own_uncommitted_removal_campaigns(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 9);
	th_elect(&cl, 1);
	uint64_t id = th_add_empty_node(&cl);
	th_isolate(&cl, id, true);
	/* {1,2,3,4}: 1, 2 and 3 hold the log, a majority of four */
	assert_int_equal(change(1, RAFT_ADD_VOTER, id), KEEL_OK);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 1).commit_index, th_status(&cl, 1).last_index);
	/* 1 removes itself, nobody hears it, and 1 restarts */
	th_isolate(&cl, 1, true);
	assert_int_equal(change(1, RAFT_REMOVE, 1), KEEL_OK);
	th_stabilize(&cl, true);
	uint64_t removal = th_status(&cl, 1).last_index;
	assert_true(th_status(&cl, 2).last_index < removal);
	th_restart(&cl, 1);
	th_heal(&cl);
	th_isolate(&cl, id, true); /* 4 stays empty */
	uint64_t leader = 0;
	for (int i = 0; i < 100 && (leader == 0 || leader == 1); i++) {
		th_tick_all(&cl, 100);
		th_stabilize(&cl, true);
		leader = th_leader(&cl);
	}
	/* 1 led just long enough to commit its removal, then left */
	assert_true(leader == 2 || leader == 3);
	assert_true(th_status(&cl, leader).commit_index >= removal);
	assert_int_equal(raft_config_role(raft_config(th_node(&cl, leader)->r), 1), 0);
	assert_int_equal(th_propose(&cl, leader, "y", NULL), KEEL_OK);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, leader).commit_index, th_status(&cl, leader).last_index);
	/* 1, out of the committed configuration, never campaigns again */
	th_tick(&cl, 1, th_node(&cl, 1)->now_ms + 10000);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 1).role, RAFT_FOLLOWER);
}

/* Transfer: the target is caught up, gets TimeoutNow, campaigns at once
 * (ignoring stickiness) and wins; proposals meanwhile get KEEL_BUSY. */
static void test_leadership_transfer(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 6);
	th_elect(&cl, 1);
	th_isolate(&cl, 3, true);
	th_propose(&cl, 1, "a", NULL);
	th_propose(&cl, 1, "b", NULL);
	th_stabilize(&cl, true);
	th_isolate(&cl, 3, false);
	struct raft *r1 = th_node(&cl, 1)->r;
	assert_int_equal(raft_transfer_leader(r1, 9), KEEL_NOENT);
	assert_int_equal(raft_transfer_leader(r1, 1), KEEL_OK);
	assert_int_equal(raft_transfer_leader(r1, 3), KEEL_OK);
	assert_int_equal(th_status(&cl, 1).transfer_target, 3);
	assert_int_equal(th_propose(&cl, 1, "c", NULL), KEEL_BUSY);
	th_tick(&cl, 1, th_node(&cl, 1)->now_ms + 100);
	th_stabilize(&cl, true);
	assert_int_equal(th_status(&cl, 3).role, RAFT_LEADER);
	assert_int_equal(th_status(&cl, 3).term, 3);
	assert_int_equal(th_status(&cl, 1).role, RAFT_FOLLOWER);
	assert_int_equal(th_status(&cl, 1).leader, 3);
	assert_int_equal(raft_transfer_leader(r1, 2), KEEL_NOTLEADER);
}

/* A transfer whose target never catches up is abandoned after an
 * election timeout, and proposals are taken again. */
static void test_transfer_times_out(void **state)
{
	(void)state;
	th_init(&cl, 3, 0, NULL, 7);
	th_elect(&cl, 1);
	th_isolate(&cl, 3, true);
	th_propose(&cl, 1, "a", NULL);
	th_stabilize(&cl, true);
	assert_int_equal(raft_transfer_leader(th_node(&cl, 1)->r, 3), KEEL_OK);
	for (int i = 0; i < 12; i++) {
		th_tick(&cl, 1, th_node(&cl, 1)->now_ms + 100);
		th_stabilize(&cl, true);
	}
	assert_int_equal(th_status(&cl, 1).role, RAFT_LEADER);
	assert_int_equal(th_status(&cl, 1).transfer_target, 0);
	assert_int_equal(th_propose(&cl, 1, "b", NULL), KEEL_OK);
}

/* Config encoding round trip and validation. */
static void test_config_codec(void **state)
{
	(void)state;
	struct raft_config c = {.count = 3};
	c.members[0] = (struct raft_member){.id = 1, .role = RAFT_VOTER};
	c.members[1] = (struct raft_member){.id = 5, .role = RAFT_LEARNER};
	c.members[2] = (struct raft_member){.id = 9, .role = RAFT_VOTER};
	uint8_t buf[512];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, buf, sizeof(buf));
	raft_config_encode(&c, &w);
	assert_true(keel_wbuf_ok(&w));
	struct raft_config d;
	assert_int_equal(raft_config_decode(buf, w.size, &d), KEEL_OK);
	assert_int_equal(d.count, 3);
	assert_int_equal(d.members[1].id, 5);
	assert_int_equal(d.members[1].role, RAFT_LEARNER);
	assert_int_equal(raft_config_voters(&d), 2);
	assert_int_equal(raft_config_role(&d, 9), RAFT_VOTER);
	assert_int_equal(raft_config_role(&d, 4), 0);
	/* truncated, trailing byte, unsorted, bad role, zero id */
	assert_int_equal(raft_config_decode(buf, w.size - 1, &d), KEEL_CORRUPT);
	buf[w.size] = 0;
	assert_int_equal(raft_config_decode(buf, w.size + 1, &d), KEEL_CORRUPT);
	uint8_t bad[sizeof(buf)];
	memcpy(bad, buf, w.size);
	bad[5 + 8] = 7; /* role of the first member */
	assert_int_equal(raft_config_decode(bad, w.size, &d), KEEL_CORRUPT);
	memcpy(bad, buf, w.size);
	memset(bad + 5, 0, 8); /* id 0 */
	assert_int_equal(raft_config_decode(bad, w.size, &d), KEEL_CORRUPT);
	memcpy(bad, buf, w.size);
	bad[5 + 7] = 20; /* first id 20 > second id 5 */
	assert_int_equal(raft_config_decode(bad, w.size, &d), KEEL_CORRUPT);
	memcpy(bad, buf, w.size);
	bad[4] = 200; /* count over the maximum */
	assert_int_equal(raft_config_decode(bad, w.size, &d), KEEL_CORRUPT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_learner_replicates_but_does_not_vote, teardown),
		cmocka_unit_test_teardown(test_add_learner_then_promote, teardown),
		cmocka_unit_test_teardown(test_change_restrictions, teardown),
		cmocka_unit_test_teardown(test_remove_follower, teardown),
		cmocka_unit_test_teardown(test_remove_leader_itself, teardown),
		cmocka_unit_test_teardown(test_server_holding_its_own_uncommitted_removal_votes, teardown),
		cmocka_unit_test_teardown(test_server_holding_its_own_uncommitted_removal_campaigns,
					  teardown),
		cmocka_unit_test_teardown(test_change_waits_for_a_quorum_that_holds_the_log, teardown),
		cmocka_unit_test_teardown(test_leadership_transfer, teardown),
		cmocka_unit_test_teardown(test_transfer_times_out, teardown),
		cmocka_unit_test(test_config_codec),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
