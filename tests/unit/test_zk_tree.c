/*
 * Unit tests: the znode tree and zk_apply() for single writes.
 *
 * Expected Stat values and error codes are those Apache ZooKeeper 3.8.0
 * returned for the same sequence of requests (probed with a raw jute
 * client; zxids there are offset by the sessions created, here each test
 * states its own). Notably: the visible cversion is 2 * creates -
 * numChildren (so a delete raises it by one), sequential suffixes use the
 * number of creates, and failed writes consume a zxid too.
 */
#include "test_zk_helpers.h"

#include "zk/zk_tree.h"

static void assert_stat(const struct zk_stat *s, int64_t czxid, int64_t mzxid, int32_t version,
			int32_t cversion, int32_t aversion, int32_t data_length,
			int32_t num_children, int64_t pzxid)
{
	assert_int_equal(s->czxid, czxid);
	assert_int_equal(s->mzxid, mzxid);
	assert_int_equal(s->version, version);
	assert_int_equal(s->cversion, cversion);
	assert_int_equal(s->aversion, aversion);
	assert_int_equal(s->data_length, data_length);
	assert_int_equal(s->num_children, num_children);
	assert_int_equal(s->pzxid, pzxid);
}

static void test_initial_tree(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	struct zk_stat s;
	/* Fresh ZooKeeper: / cversion -1, /zookeeper -2, config aversion -1. */
	assert_true(zt_stat(&z, "/", &s));
	assert_stat(&s, 0, 0, 0, -1, 0, 0, 1, 0);
	assert_int_equal(s.ctime, 0);
	assert_true(zt_stat(&z, "", &s)); /* ZooKeeper aliases "" to the root */
	assert_true(zt_stat(&z, "/zookeeper", &s));
	assert_stat(&s, 0, 0, 0, -2, 0, 0, 2, 0);
	assert_true(zt_stat(&z, "/zookeeper/quota", &s));
	assert_stat(&s, 0, 0, 0, 0, 0, 0, 0, 0);
	assert_true(zt_stat(&z, "/zookeeper/config", &s));
	assert_stat(&s, 0, 0, 0, 0, -1, 0, 0, 0);
	struct zk_acl_vec acl = zk_state_node_acl(&z.st, zk_state_lookup(&z.st, zt_b("/zookeeper/config")));
	assert_int_equal(acl.count, 1);
	struct zk_acl_iter it;
	struct zk_acl a;
	zk_acl_iter_init(&it, acl);
	assert_true(zk_acl_iter_next(&it, &a));
	assert_int_equal(a.perms, ZK_PERM_READ);
	assert_true(zk_bytes_eq_str(a.id.scheme, "world"));
	acl = zk_state_node_acl(&z.st, ZK_ROOT_ID);
	zk_acl_iter_init(&it, acl);
	assert_true(zk_acl_iter_next(&it, &a));
	assert_int_equal(a.perms, ZK_PERM_ALL);
	assert_false(zt_exists(&z, "/zookeeper/"));
	assert_false(zt_exists(&z, "//zookeeper"));
	assert_false(zt_exists(&z, "zookeeper"));
	assert_int_equal(zk_state_node_count(&z.st), 4);
	zt_close(&z);
}

/* The sequence of probe p1 against Apache ZooKeeper 3.8.0. */
static void test_create_delete_stats(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000); /* zxid 1 */
	struct zk_stat s;
	char path[64];
	assert_int_equal(zt_create(&z, sid, "/p1", "", 0), ZK_OK); /* 2 */
	assert_true(zt_stat(&z, "/", &s));
	assert_stat(&s, 0, 0, 0, 0, 0, 0, 2, 2);
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE, "/s-", zt_b(""), 2, zt_open_acl(&z),
					-1, path, NULL),
			 ZK_OK); /* 3 */
	assert_string_equal(path, "/s-0000000001");
	assert_true(zt_stat(&z, "/", &s));
	assert_stat(&s, 0, 0, 0, 1, 0, 0, 3, 3);

	int64_t t4 = z.now_ms + 7;
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE2, "/p1/a", zt_b(""), 0,
					zt_open_acl(&z), -1, path, &s),
			 ZK_OK); /* 4 */
	assert_stat(&s, 4, 4, 0, 0, 0, 0, 0, 4);
	assert_int_equal(s.ctime, t4);
	assert_int_equal(s.mtime, t4);
	assert_int_equal(s.ephemeral_owner, 0);
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE2, "/p1/b", zt_b(""), 0,
					zt_open_acl(&z), -1, path, &s),
			 ZK_OK); /* 5 */
	assert_true(zt_stat(&z, "/p1", &s));
	assert_stat(&s, 2, 2, 0, 2, 0, 0, 2, 5);
	assert_int_equal(zt_delete(&z, sid, "/p1/a", -1), ZK_OK); /* 6 */
	assert_true(zt_stat(&z, "/p1", &s));
	assert_stat(&s, 2, 2, 0, 3, 0, 0, 1, 6);
	/* Sequential suffix = creates so far (2), not the visible cversion. */
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE2, "/p1/q-", zt_b(""), 2,
					zt_open_acl(&z), -1, path, &s),
			 ZK_OK); /* 7 */
	assert_string_equal(path, "/p1/q-0000000002");
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE2, "/p1/", zt_b(""), 2,
					zt_open_acl(&z), -1, path, &s),
			 ZK_OK); /* 8 */
	assert_string_equal(path, "/p1/0000000003");

	/* The error codes ZooKeeper answered, in its check order. */
	struct {
		const char *path;
		int32_t flags;
		int32_t err;
	} bad[] = {
		{"/p1/", 0, ZK_BAD_ARGUMENTS},     {"/", 0, ZK_NODE_EXISTS},
		{"/nonexist/x", 0, ZK_NO_NODE},    {"/./x", 0, ZK_NO_NODE},
		{"/p1/./x", 0, ZK_NO_NODE},        {"/p1/b/.", 0, ZK_BAD_ARGUMENTS},
		{"/p1//x", 0, ZK_NO_NODE},         {"p1", 0, ZK_BAD_ARGUMENTS},
		{"", 0, ZK_BAD_ARGUMENTS},         {"/p1/b\x01", 0, ZK_BAD_ARGUMENTS},
		{"/p1/x", 7, ZK_BAD_ARGUMENTS},    {"/p1/x", -1, ZK_BAD_ARGUMENTS},
		{"/p1/b", 0, ZK_NODE_EXISTS},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t before = zk_state_hash(&z.st);
		int32_t err = zt_create_full(&z, sid, ZK_OP_CREATE2, bad[i].path, zt_b(""),
					     bad[i].flags, zt_open_acl(&z), -1, NULL, NULL);
		assert_int_equal(err, bad[i].err);
		assert_true(zk_state_hash(&z.st) == before);
		assert_int_equal(z.res.trigger_count, 0);
	}

	/* setData: version, mzxid, mtime, dataLength; parent fields kept. */
	uint64_t zset = z.zxid + 1;
	assert_int_equal(zt_set(&z, sid, "/p1", zt_b("hello"), -1, &s), ZK_OK);
	assert_stat(&s, 2, (int64_t)zset, 1, 5, 0, 5, 3, 8);
	assert_int_equal(s.mtime, z.now_ms);
	assert_true(s.mtime > s.ctime);
	assert_int_equal(zt_set(&z, sid, "/p1", zt_b("hello2"), 5, NULL), ZK_BAD_VERSION);
	assert_int_equal(zt_set(&z, sid, "/p1", zt_b("hello2"), 1, &s), ZK_OK);
	assert_int_equal(s.version, 2);
	assert_int_equal(s.data_length, 6);
	assert_int_equal(zt_set(&z, sid, "/nonode", zt_b("x"), 1, NULL), ZK_NO_NODE);
	assert_int_equal(zt_set(&z, sid, "bad", zt_b("x"), 1, NULL), ZK_BAD_ARGUMENTS);

	/* setACL bumps aversion only. */
	assert_int_equal(zt_set_acl(&z, sid, "/p1", zt_open_acl(&z), 0, &s), ZK_OK);
	assert_int_equal(s.aversion, 1);
	assert_int_equal(s.version, 2);
	assert_int_equal(zt_set_acl(&z, sid, "/p1", zt_open_acl(&z), 0, NULL), ZK_BAD_VERSION);

	/* delete: BadVersion before NotEmpty; system nodes are BadArguments. */
	struct {
		const char *path;
		int32_t version;
		int32_t err;
	} del[] = {
		{"/p1", 5, ZK_BAD_VERSION},
		{"/p1", -1, ZK_NOT_EMPTY},
		{"/", -1, ZK_BAD_ARGUMENTS},
		{"/zookeeper", -1, ZK_BAD_ARGUMENTS},
		{"/zookeeper/config", -1, ZK_BAD_ARGUMENTS},
		{"/zookeeper/quota", -1, ZK_BAD_ARGUMENTS},
		{"/nonode", -1, ZK_NO_NODE},
		{"/nonode/x", -1, ZK_NO_NODE},
		{"", -1, ZK_BAD_ARGUMENTS},
		{"/p1/./x", -1, ZK_NO_NODE},
		{"x", -1, ZK_BAD_ARGUMENTS},
	};
	for (size_t i = 0; i < sizeof(del) / sizeof(del[0]); i++) {
		assert_int_equal(zt_delete(&z, sid, del[i].path, del[i].version), del[i].err);
	}
	assert_true(zt_exists(&z, "/p1"));
	zt_close(&z);
}

static void test_null_and_large_data(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000);
	struct zk_stat s;
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE2, "/n", ZK_BYTES_NULL, 0,
					zt_open_acl(&z), -1, NULL, &s),
			 ZK_OK);
	assert_int_equal(s.data_length, 0);
	const struct zk_node *n = zk_tree_node(&z.st.tree, zk_state_lookup(&z.st, zt_b("/n")));
	assert_true((n->flags & ZK_NODE_DATA_NULL) != 0);
	assert_int_equal(zt_set(&z, sid, "/n", zt_b(""), -1, &s), ZK_OK);
	n = zk_tree_node(&z.st.tree, zk_state_lookup(&z.st, zt_b("/n")));
	assert_false((n->flags & ZK_NODE_DATA_NULL) != 0);
	assert_int_equal(zt_set(&z, sid, "/n", ZK_BYTES_NULL, -1, &s), ZK_OK);
	n = zk_tree_node(&z.st.tree, zk_state_lookup(&z.st, zt_b("/n")));
	assert_true((n->flags & ZK_NODE_DATA_NULL) != 0);
	/* Null and empty data hash differently (the client can tell them apart). */
	uint64_t h_null = zk_state_hash(&z.st);
	assert_int_equal(zt_set(&z, sid, "/n", zt_b(""), 2, &s), ZK_OK);
	assert_int_equal(s.version, 3);
	assert_true(zk_state_hash(&z.st) != h_null);

	static uint8_t big[1 << 20];
	memset(big, 'x', sizeof(big));
	assert_int_equal(zt_set(&z, sid, "/n", zk_bytes_of(big, sizeof(big) - 100), -1, &s), ZK_OK);
	assert_int_equal(s.data_length, (int32_t)sizeof(big) - 100);
	n = zk_tree_node(&z.st.tree, zk_state_lookup(&z.st, zt_b("/n")));
	assert_memory_equal(zk_node_data(n), big, 1000);
	zt_close(&z);
}

static void test_ephemeral_container_ttl_create(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000);
	struct zk_stat s;
	char path[64];
	struct zk_acl_vec open = zt_open_acl(&z);
	/* Ephemeral: owner visible; no children under it (probe p3). */
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE2, "/e1", zt_b(""), 1, open, -1, path, &s),
			 ZK_OK);
	assert_int_equal(s.ephemeral_owner, sid);
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE2, "/e1/x", zt_b(""), 0, open, -1, NULL, NULL),
			 ZK_NO_CHILDREN_FOR_EPHEMERALS);
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE2, "/e1/x", zt_b(""), 2, open, -1, NULL, NULL),
			 ZK_NO_CHILDREN_FOR_EPHEMERALS);
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE2, "/e1/x/y", zt_b(""), 0, open, -1, NULL, NULL),
			 ZK_NO_NODE);
	assert_true(zt_stat(&z, "/e1", &s));
	assert_int_equal(s.num_children, 0);
	assert_int_equal(s.cversion, 0);
	assert_int_equal(zk_state_session(&z.st, sid)->eph_count, 1);

	/* Containers and TTL nodes show ephemeralOwner 0 to clients. */
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE_CONTAINER, "/c1", zt_b(""), 4, open, -1,
					path, &s),
			 ZK_OK);
	assert_int_equal(s.ephemeral_owner, 0);
	const struct zk_node *n = zk_tree_node(&z.st.tree, zk_state_lookup(&z.st, zt_b("/c1")));
	assert_int_equal(n->ephemeral_owner, ZK_OWNER_CONTAINER);
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE_CONTAINER, "/c2-", zt_b(""), 2, open, -1,
					path, &s),
			 ZK_OK);
	assert_string_equal(path, "/c2-0000000002");
	/* createContainer with the ephemeral flag still makes a container. */
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE_CONTAINER, "/c3", zt_b(""), 1, open, -1,
					path, &s),
			 ZK_OK);
	n = zk_tree_node(&z.st.tree, zk_state_lookup(&z.st, zt_b("/c3")));
	assert_int_equal(n->ephemeral_owner, ZK_OWNER_CONTAINER);
	/* create with the CONTAINER flag makes a plain node (ZooKeeper 3.8). */
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE2, "/c4", zt_b(""), 4, open, -1, path, &s),
			 ZK_OK);
	n = zk_tree_node(&z.st.tree, zk_state_lookup(&z.st, zt_b("/c4")));
	assert_int_equal(n->ephemeral_owner, 0);
	/* Children of containers may be ephemeral. */
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE2, "/c1/x", zt_b(""), 1, open, -1, NULL, &s),
			 ZK_OK);
	assert_int_equal(s.ephemeral_owner, sid);

	/* TTL: 1 .. 2^40 - 1 ms, TTL modes only, only through createTTL. */
	struct {
		int32_t op;
		int32_t flags;
		int64_t ttl;
		int32_t err;
	} ttl[] = {
		{ZK_OP_CREATE_TTL, 5, 100000, ZK_OK},
		{ZK_OP_CREATE_TTL, 6, 100000, ZK_OK},
		{ZK_OP_CREATE_TTL, 5, 0, ZK_BAD_ARGUMENTS},
		{ZK_OP_CREATE_TTL, 5, -5, ZK_BAD_ARGUMENTS},
		{ZK_OP_CREATE_TTL, 5, ZK_TTL_MAX_MS, ZK_OK},
		{ZK_OP_CREATE_TTL, 5, ZK_TTL_MAX_MS + 1, ZK_BAD_ARGUMENTS},
		{ZK_OP_CREATE_TTL, 0, 1000, ZK_BAD_ARGUMENTS},
		{ZK_OP_CREATE_TTL, 0, -1, ZK_BAD_ARGUMENTS},
		{ZK_OP_CREATE_TTL, 1, 1000, ZK_BAD_ARGUMENTS},
		{ZK_OP_CREATE, 5, -1, ZK_BAD_ARGUMENTS},
		{ZK_OP_CREATE2, 6, -1, ZK_BAD_ARGUMENTS},
		{ZK_OP_CREATE_CONTAINER, 5, -1, ZK_BAD_ARGUMENTS},
	};
	for (size_t i = 0; i < sizeof(ttl) / sizeof(ttl[0]); i++) {
		char p[32];
		snprintf(p, sizeof(p), "/t%zu-", i);
		int32_t err = zt_create_full(&z, sid, ttl[i].op, p, zt_b(""), ttl[i].flags, open,
					     ttl[i].ttl, path, &s);
		assert_int_equal(err, ttl[i].err);
		if (err == ZK_OK) {
			assert_int_equal(s.ephemeral_owner, 0);
			n = zk_tree_node(&z.st.tree, zk_state_lookup(&z.st, zt_b(path)));
			assert_int_equal(zk_owner_kind(n->ephemeral_owner), ZK_KIND_TTL);
			assert_int_equal(zk_owner_ttl_ms(n->ephemeral_owner), ttl[i].ttl);
		}
	}
	assert_int_equal(keel_hmap_count(&z.st.special), 6); /* c1, c2-, c3, three TTLs */
	zt_close(&z);
}

static void test_triggers_of_writes(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000);
	assert_int_equal(z.res.trigger_count, 0);
	assert_int_equal(zt_create(&z, sid, "/a", "", 0), ZK_OK);
	assert_int_equal(z.res.trigger_count, 2);
	zt_assert_trigger(&z, 0, ZK_EVENT_NODE_CREATED, "/a");
	zt_assert_trigger(&z, 1, ZK_EVENT_NODE_CHILDREN_CHANGED, "/");
	assert_int_equal(zt_create(&z, sid, "/a/b", "", 0), ZK_OK);
	zt_assert_trigger(&z, 0, ZK_EVENT_NODE_CREATED, "/a/b");
	zt_assert_trigger(&z, 1, ZK_EVENT_NODE_CHILDREN_CHANGED, "/a");
	assert_int_equal(zt_set(&z, sid, "/a/b", zt_b("x"), -1, NULL), ZK_OK);
	assert_int_equal(z.res.trigger_count, 1);
	zt_assert_trigger(&z, 0, ZK_EVENT_NODE_DATA_CHANGED, "/a/b");
	assert_int_equal(zt_set_acl(&z, sid, "/a/b", zt_open_acl(&z), -1, NULL), ZK_OK);
	/* setACL fires no watch; it leaves the change feed's trigger only. */
	assert_int_equal(z.res.trigger_count, 1);
	zt_assert_trigger(&z, 0, ZK_EVENT_KEEL_ACL_CHANGED, "/a/b");
	assert_int_equal(zt_delete(&z, sid, "/a/b", -1), ZK_OK);
	assert_int_equal(z.res.trigger_count, 2);
	zt_assert_trigger(&z, 0, ZK_EVENT_NODE_DELETED, "/a/b");
	zt_assert_trigger(&z, 1, ZK_EVENT_NODE_CHILDREN_CHANGED, "/a");
	/* The trigger carries the node's ACL id (the parent's for children). */
	assert_int_equal(z.res.triggers[1].acl,
			 zk_tree_node(&z.st.tree, zk_state_lookup(&z.st, zt_b("/a")))->acl);
	zt_close(&z);
}

static void test_session_expired_writes(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	/* A session that never existed (or closed before the entry applied). */
	assert_int_equal(zt_create(&z, 12345, "/a", "", 0), ZK_SESSION_EXPIRED);
	assert_int_equal(zt_delete(&z, 12345, "/a", -1), ZK_SESSION_EXPIRED);
	assert_int_equal(zt_set(&z, 12345, "/", zt_b(""), -1, NULL), ZK_SESSION_EXPIRED);
	assert_int_equal(zt_set_acl(&z, 12345, "/", zt_open_acl(&z), -1, NULL), ZK_SESSION_EXPIRED);
	/* The TTL check comes first, as in ZooKeeper's validateCreateRequest. */
	assert_int_equal(zt_create_full(&z, 12345, ZK_OP_CREATE_TTL, "/t", zt_b(""), 5,
					zt_open_acl(&z), 0, NULL, NULL),
			 ZK_BAD_ARGUMENTS);
	zt_close(&z);
}

static void test_children_order_and_lookup(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000);
	assert_int_equal(zt_create(&z, sid, "/d", "", 0), ZK_OK);
	char p[32];
	for (int i = 0; i < 200; i++) {
		snprintf(p, sizeof(p), "/d/n%03d", i);
		assert_int_equal(zt_create(&z, sid, p, "", 0), ZK_OK);
	}
	for (int i = 0; i < 200; i += 3) {
		snprintf(p, sizeof(p), "/d/n%03d", i);
		assert_int_equal(zt_delete(&z, sid, p, -1), ZK_OK);
	}
	/* Insertion order, deletions removed. */
	uint32_t d = zk_state_lookup(&z.st, zt_b("/d"));
	int expect = 1;
	uint32_t count = 0;
	for (uint32_t c = zk_tree_first_child(&z.st.tree, d); c != ZK_NODE_NONE;
	     c = zk_tree_next_child(&z.st.tree, d, c)) {
		const struct zk_node *n = zk_tree_node(&z.st.tree, c);
		snprintf(p, sizeof(p), "n%03d", expect);
		assert_int_equal(n->name_size, 4);
		assert_memory_equal(n->bytes, p, 4);
		expect += expect % 3 == 2 ? 2 : 1;
		count++;
	}
	assert_int_equal(count, 133);
	struct zk_stat s;
	assert_true(zt_stat(&z, "/d", &s));
	assert_int_equal(s.num_children, 133);
	assert_int_equal(s.cversion, 200 * 2 - 133);
	assert_true(zt_exists(&z, "/d/n001"));
	assert_false(zt_exists(&z, "/d/n000"));
	assert_false(zt_exists(&z, "/d/n001/"));
	zt_close(&z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_initial_tree),
		cmocka_unit_test(test_create_delete_stats),
		cmocka_unit_test(test_null_and_large_data),
		cmocka_unit_test(test_ephemeral_container_ttl_create),
		cmocka_unit_test(test_triggers_of_writes),
		cmocka_unit_test(test_session_expired_writes),
		cmocka_unit_test(test_children_order_and_lookup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
