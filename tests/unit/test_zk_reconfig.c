/*
 * Unit tests: ZooKeeper reconfig in keel's terms (zk/zk_reconfig.h) —
 * server strings, plans of membership steps, /zookeeper/config text, and
 * the round trip: a rendered config parses back to the same servers, and a
 * non-incremental reconfig to the rendered members plans nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "zk/zk_reconfig.h"

static enum keel_err parse(const char *s, struct zk_server_spec *out)
{
	return zk_server_spec_parse(s, strlen(s), out);
}

static void test_server_strings(void **state)
{
	(void)state;
	struct zk_server_spec s;
	assert_int_equal(parse("server.4=127.0.0.1:2888:3888:participant;127.0.0.1:2181", &s),
			 KEEL_OK);
	assert_int_equal(s.id, 4);
	assert_int_equal(s.role, ZK_ROLE_PARTICIPANT);
	assert_string_equal(s.peer_addr, "127.0.0.1:2888");
	assert_string_equal(s.tail, ":3888;127.0.0.1:2181");

	assert_int_equal(parse(" server.100=0.0.0.0:1:2:observer;3456 ", &s), KEEL_OK);
	assert_int_equal(s.id, 100);
	assert_int_equal(s.role, ZK_ROLE_OBSERVER);
	assert_string_equal(s.peer_addr, "0.0.0.0:1");
	assert_string_equal(s.tail, ":2;3456");

	/* Role and client are optional; IPv6 in brackets. */
	assert_int_equal(parse("server.7=[::1]:2888:3888", &s), KEEL_OK);
	assert_int_equal(s.role, ZK_ROLE_PARTICIPANT);
	assert_string_equal(s.peer_addr, "[::1]:2888");
	assert_string_equal(s.tail, ":3888");

	static const char *const bad[] = {
		"",
		"some thing",
		"server.=1.2.3.4:1:2",
		"server.0=1.2.3.4:1:2",        /* id 0 */
		"server.255=1.2.3.4:1:2",      /* past keel's ids */
		"server.1=1.2.3.4:1",          /* no election port */
		"server.1=1.2.3.4:1:2:referee",
		"server.1=1.2.3.4:x:2",
		"server.1=1.2.3.4:1:70000",
		"server.1=1.2.3.4:1:2;",
		"server.1=1.2.3.4:1:2;host:",
		"server.1=:1:2",
		"server.1=a b:1:2",
		"server.1=[::1:1:2",
		"server.1=1.2.3.4:1:2:observer:participant",
		"server.-1=1.2.3.4:1:2",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i], &s) != KEEL_INVAL) {
			fail_msg("accepted: \"%s\"", bad[i]);
		}
	}
}

static struct zk_bytes str(const char *s)
{
	return s != NULL ? zk_bytes_str(s) : zk_bytes_of(NULL, 0);
}

static enum keel_err plan(const char *joining, const char *leaving, const char *whole,
			  struct zk_reconfig_step *steps, size_t *count)
{
	static const struct zk_member_role members[] = {
		{1, ZK_ROLE_PARTICIPANT},
		{2, ZK_ROLE_PARTICIPANT},
		{3, ZK_ROLE_PARTICIPANT},
		{9, ZK_ROLE_OBSERVER},
	};
	return zk_reconfig_plan(members, 4, str(joining), str(leaving), str(whole), steps, 16,
				count);
}

static void test_plans(void **state)
{
	(void)state;
	struct zk_reconfig_step st[16];
	size_t n;
	/* Incremental: removals come after additions, whatever the order given. */
	assert_int_equal(plan("server.4=h:1:2:observer,server.9=h:1:2:participant", "2", NULL, st,
			      &n),
			 KEEL_OK);
	assert_int_equal(n, 3);
	assert_int_equal(st[0].kind, ZK_STEP_ADD_OBSERVER);
	assert_int_equal(st[0].server.id, 4);
	assert_string_equal(st[0].server.peer_addr, "h:1");
	assert_int_equal(st[1].kind, ZK_STEP_PROMOTE);
	assert_int_equal(st[1].server.id, 9);
	assert_int_equal(st[2].kind, ZK_STEP_REMOVE);
	assert_int_equal(st[2].server.id, 2);

	/* Non-incremental: the new list is the whole membership. */
	assert_int_equal(plan(NULL, NULL, "server.1=a:1:2,server.3=a:1:2,server.5=b:1:2", st, &n),
			 KEEL_OK);
	assert_int_equal(n, 3);
	assert_int_equal(st[0].kind, ZK_STEP_ADD_PARTICIPANT);
	assert_int_equal(st[0].server.id, 5);
	assert_int_equal(st[1].kind, ZK_STEP_REMOVE);
	assert_int_equal(st[1].server.id, 2);
	assert_int_equal(st[2].kind, ZK_STEP_REMOVE);
	assert_int_equal(st[2].server.id, 9);

	/* Refused. */
	assert_int_equal(plan(NULL, NULL, NULL, st, &n), KEEL_INVAL);             /* nothing */
	assert_int_equal(plan("", "", "", st, &n), KEEL_INVAL);
	assert_int_equal(plan("server.4=h:1:2", NULL, "server.4=h:1:2", st, &n), KEEL_INVAL);
	assert_int_equal(plan(NULL, "4", NULL, st, &n), KEEL_INVAL);              /* not a member */
	assert_int_equal(plan(NULL, "2,2", NULL, st, &n), KEEL_INVAL);
	assert_int_equal(plan("server.2=h:1:2", "2", NULL, st, &n), KEEL_INVAL);  /* both lists */
	assert_int_equal(plan("server.1=h:1:2:observer", NULL, NULL, st, &n), KEEL_INVAL); /* demote */
	assert_int_equal(plan("server.1=h:1:2", NULL, NULL, st, &n), KEEL_INVAL); /* no change */
	assert_int_equal(plan("server.4=h:1:2,junk", NULL, NULL, st, &n), KEEL_INVAL);
	assert_int_equal(n, 0);
}

static void test_render_and_round_trip(void **state)
{
	(void)state;
	const struct zk_config_member members[] = {
		{1, ZK_ROLE_PARTICIPANT, "127.0.0.1:2888", ""},
		{4, ZK_ROLE_OBSERVER, "0.0.0.0:1", ":2;0.0.0.0:3"},
	};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 16, 4096);
	zk_config_render(members, 2, 0x1a, &w);
	assert_true(keel_wbuf_ok(&w));
	const char *want = "server.1=127.0.0.1:2888:2888:participant\n"
			   "server.4=0.0.0.0:1:2:observer;0.0.0.0:3\n"
			   "version=1a";
	assert_int_equal(w.size, strlen(want));
	assert_memory_equal(w.data, want, w.size);

	/* Each line parses back to the member it came from. */
	struct zk_server_spec s;
	assert_int_equal(parse("server.4=0.0.0.0:1:2:observer;0.0.0.0:3", &s), KEEL_OK);
	assert_int_equal(s.role, ZK_ROLE_OBSERVER);
	assert_string_equal(s.peer_addr, members[1].peer_addr);
	assert_string_equal(s.tail, members[1].tail);

	/* The rendered members as newMembers: nothing to do. */
	const struct zk_member_role roles[] = {{1, ZK_ROLE_PARTICIPANT}, {4, ZK_ROLE_OBSERVER}};
	const char *lines = "server.1=127.0.0.1:2888:2888:participant,"
			    "server.4=0.0.0.0:1:2:observer;0.0.0.0:3";
	struct zk_reconfig_step st[8];
	size_t n = 99;
	assert_int_equal(zk_reconfig_plan(roles, 2, str(NULL), str(NULL), str(lines), st, 8, &n),
			 KEEL_INVAL);
	assert_int_equal(n, 0);
	keel_wbuf_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_server_strings),
		cmocka_unit_test(test_plans),
		cmocka_unit_test(test_render_and_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
