/* Unit tests: the ZooKeeper workload end to end against the stand-in
 * cluster (sim/zk_standin.c, a test double): correct runs pass, each
 * planted bug is caught by the checker meant for it, and a seed replays
 * to the same trace. (tests/sim runs many more seeds through keel-sim.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "sim/zk_sim.h"

#define STEPS 8000

static void run(uint64_t seed, uint32_t servers, enum simzk_bug bug, struct simzk_result *r)
{
	struct simzk_config cfg = {seed, servers, 8, STEPS, bug, false};
	simzk_run(&cfg, r);
}

static void test_correct_runs_pass(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 6; seed++) {
		uint32_t servers = seed % 2 == 0 ? 5 : 3;
		struct simzk_result r;
		run(seed, servers, SIMZK_BUG_NONE, &r);
		if (!r.ok) {
			print_error("seed %llu: %s\n", (unsigned long long)seed, r.why);
		}
		assert_true(r.ok);
		/* the run did the things the checkers look at */
		assert_true(r.sessions > 8);
		assert_true(r.watches > 0);
		assert_true(r.events > 0);
		assert_true(r.ops > 100);
		/* ... and the change feed: consumers moved between servers and
		 * got changes (zk_feed.c) */
		assert_true(r.feed_changes > 100);
		assert_true(r.feed_moves > 0);
	}
}

/* The first of seeds 1..20 that fails must fail with `expect`. */
static void expect_caught(enum simzk_bug bug, const char *expect)
{
	for (uint64_t seed = 1; seed <= 20; seed++) {
		struct simzk_result r;
		run(seed, 3, bug, &r);
		if (!r.ok) {
			if (strncmp(r.why, expect, strlen(expect)) != 0) {
				print_error("%s, seed %llu: %s\n", simzk_bug_name(bug),
					    (unsigned long long)seed, r.why);
			}
			assert_true(strncmp(r.why, expect, strlen(expect)) == 0);
			return;
		}
	}
	fail_msg("%s was not caught in 20 seeds", simzk_bug_name(bug));
}

static void test_reply_before_apply_is_caught(void **state)
{
	(void)state;
	expect_caught(SIMZK_BUG_REPLY_BEFORE_APPLY, "fifo: session");
}

static void test_watch_after_data_is_caught(void **state)
{
	(void)state;
	expect_caught(SIMZK_BUG_WATCH_AFTER_DATA, "watch order");
}

static void test_keep_pending_on_leader_change_is_caught(void **state)
{
	(void)state;
	expect_caught(SIMZK_BUG_KEEP_PENDING_ON_LEADER_CHANGE, "fifo:");
}

static void test_expire_no_ephemeral_delete_is_caught(void **state)
{
	(void)state;
	expect_caught(SIMZK_BUG_EXPIRE_NO_EPHEMERAL_DELETE, "ephemerals:");
}

static void test_feed_resume_by_zxid_is_caught(void **state)
{
	(void)state;
	expect_caught(SIMZK_BUG_FEED_RESUME_BY_ZXID, "feed: consumer");
}

static void test_a_seed_replays(void **state)
{
	(void)state;
	struct simzk_result a, b, c;
	run(42, 5, SIMZK_BUG_NONE, &a);
	run(42, 5, SIMZK_BUG_NONE, &b);
	run(43, 5, SIMZK_BUG_NONE, &c);
	assert_true(a.ok && b.ok && c.ok);
	assert_true(a.trace == b.trace);
	assert_true(a.ops == b.ops && a.events == b.events && a.zxid == b.zxid);
	assert_true(a.feed_changes == b.feed_changes && a.feed_moves == b.feed_moves);
	assert_true(a.trace != c.trace);
}

static void test_bug_names_round_trip(void **state)
{
	(void)state;
	for (int b = SIMZK_BUG_REPLY_BEFORE_APPLY; b <= SIMZK_BUG_FEED_RESUME_BY_ZXID; b++) {
		assert_int_equal(simzk_bug_parse(simzk_bug_name((enum simzk_bug)b)), b);
	}
	assert_int_equal(simzk_bug_parse("no-such-bug"), SIMZK_BUG_NONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_correct_runs_pass),
		cmocka_unit_test(test_reply_before_apply_is_caught),
		cmocka_unit_test(test_watch_after_data_is_caught),
		cmocka_unit_test(test_keep_pending_on_leader_change_is_caught),
		cmocka_unit_test(test_expire_no_ephemeral_delete_is_caught),
		cmocka_unit_test(test_feed_resume_by_zxid_is_caught),
		cmocka_unit_test(test_a_seed_replays),
		cmocka_unit_test(test_bug_names_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
