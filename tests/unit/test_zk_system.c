/*
 * Unit tests: system writes — another pure layer (the controller) renders
 * its state into the tree inside its own apply: creates with parents and a
 * chosen ACL, updates, recursive deletes, triggers, atomicity.
 */
#include "test_zk_helpers.h"

#include "zk/zk_read.h"
#include "zk/zk_tree.h"

static void test_put_update_delete(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000);
	uint64_t zxid = ++z.zxid;
	zk_system_begin(&z.st, &z.res, zxid, 5000);
	struct zk_acl_vec ro = zk_acl_read_unsafe();
	assert_int_equal(zk_system_put(&z.st, &z.res, "/brokers/ids/1", 14, "{\"host\":\"a\"}", 12, ro,
				       ZK_SYSTEM_PARENTS),
			 KEEL_OK);
	assert_int_equal(zk_system_put(&z.st, &z.res, "/brokers/ids/2", 14, "{}", 2, ro,
				       ZK_SYSTEM_PARENTS),
			 KEEL_OK);
	/* Parents were created top down, with the same ACL, in one zxid. */
	struct zk_stat s;
	assert_true(zt_stat(&z, "/brokers", &s));
	assert_int_equal(s.czxid, (int64_t)zxid);
	assert_int_equal(s.ctime, 5000);
	assert_true(zt_stat(&z, "/brokers/ids", &s));
	assert_int_equal(s.num_children, 2);
	assert_int_equal(s.cversion, 2);
	assert_true(zt_stat(&z, "/brokers/ids/1", &s));
	assert_int_equal(s.data_length, 12);
	zt_assert_trigger(&z, 0, ZK_EVENT_NODE_CREATED, "/brokers");
	zt_assert_trigger(&z, 1, ZK_EVENT_NODE_CHILDREN_CHANGED, "/");
	zt_assert_trigger(&z, 4, ZK_EVENT_NODE_CREATED, "/brokers/ids/1");
	assert_int_equal(z.res.trigger_count, 8);
	assert_true(zk_state_hash(&z.st) == zk_state_hash_full(&z.st));

	/* Clients may read but not write under a world:anyone:READ ACL. */
	assert_int_equal(zt_set(&z, sid, "/brokers/ids/1", zt_b("x"), -1, NULL), ZK_NO_AUTH);
	assert_int_equal(zt_create(&z, sid, "/brokers/ids/3", "", 0), ZK_NO_AUTH);
	assert_int_equal(zt_delete(&z, sid, "/brokers/ids/1", -1), ZK_NO_AUTH);
	struct keel_wbuf out;
	keel_wbuf_init_dynamic(&out, 0, 4096);
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_GET_DATA;
	req.u.read.path = zt_b("/brokers/ids/1");
	struct zk_read_ctx ctx = {&z.st, NULL, NULL, &z.ids, sid};
	assert_int_equal(zk_read(&ctx, &req, &out), ZK_OK);

	/* An update replaces the data: version + 1, NodeDataChanged. */
	zxid = ++z.zxid;
	zk_system_begin(&z.st, &z.res, zxid, 6000);
	assert_int_equal(zk_system_put(&z.st, &z.res, "/brokers/ids/1", 14, "{\"host\":\"b\"}", 12, ro, 0),
			 KEEL_OK);
	assert_int_equal(z.res.trigger_count, 1);
	zt_assert_trigger(&z, 0, ZK_EVENT_NODE_DATA_CHANGED, "/brokers/ids/1");
	assert_true(zt_stat(&z, "/brokers/ids/1", &s));
	assert_int_equal(s.version, 1);
	assert_int_equal(s.mzxid, (int64_t)zxid);
	assert_int_equal(s.mtime, 6000);

	/* Recursive delete, deepest first, each with its triggers. */
	zxid = ++z.zxid;
	zk_system_begin(&z.st, &z.res, zxid, 7000);
	assert_int_equal(zk_system_delete(&z.st, &z.res, "/brokers/ids", 12, false), KEEL_EXIST);
	assert_int_equal(zk_system_delete(&z.st, &z.res, "/brokers", 8, true), KEEL_OK);
	assert_false(zt_exists(&z, "/brokers"));
	assert_int_equal(z.res.trigger_count, 8);
	zt_assert_trigger(&z, 0, ZK_EVENT_NODE_DELETED, "/brokers/ids/2");
	zt_assert_trigger(&z, 6, ZK_EVENT_NODE_DELETED, "/brokers");
	assert_true(zk_state_hash(&z.st) == zk_state_hash_full(&z.st));
	keel_wbuf_free(&out);
	zt_close(&z);
}

static void test_errors_are_atomic(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000);
	assert_int_equal(zt_create(&z, sid, "/eph", "", 1), ZK_OK);
	uint64_t h = zk_state_hash(&z.st);
	zk_system_begin(&z.st, &z.res, ++z.zxid, 1);
	struct zk_acl_vec open = zk_acl_open_unsafe();
	assert_int_equal(zk_system_put(&z.st, &z.res, "/a/b", 4, "", 0, open, 0), KEEL_NOENT);
	assert_int_equal(zk_system_put(&z.st, &z.res, "/eph/x", 6, "", 0, open, ZK_SYSTEM_PARENTS),
			 KEEL_INVAL);
	assert_int_equal(zk_system_put(&z.st, &z.res, "/bad/", 5, "", 0, open, 0), KEEL_INVAL);
	assert_int_equal(zk_system_put(&z.st, &z.res, "/", 1, "", 0, open, 0), KEEL_INVAL);
	struct zk_acl_vec none = {0, NULL, 0};
	assert_int_equal(zk_system_put(&z.st, &z.res, "/x", 2, "", 0, none, 0), KEEL_INVAL);
	static uint8_t big[ZK_DEFAULT_MAX_PACKET + 1];
	assert_int_equal(zk_system_put(&z.st, &z.res, "/x", 2, big, sizeof(big), open, 0), KEEL_TOOBIG);
	assert_int_equal(zk_system_delete(&z.st, &z.res, "/nope", 5, true), KEEL_NOENT);
	assert_int_equal(zk_system_delete(&z.st, &z.res, "/zookeeper", 10, true), KEEL_INVAL);
	/* A parent chain that fails half way (under an ephemeral) leaves no
	 * half-made parents and no triggers. */
	assert_int_equal(zk_system_put(&z.st, &z.res, "/eph/x/y", 8, "", 0, open, ZK_SYSTEM_PARENTS),
			 KEEL_INVAL);
	assert_int_equal(z.res.trigger_count, 0);
	assert_true(zk_state_hash(&z.st) == h);
	/* A system delete takes session ephemerals with it. */
	assert_int_equal(zk_system_delete(&z.st, &z.res, "/eph", 4, false), KEEL_OK);
	assert_int_equal(zk_state_session(&z.st, sid)->eph_count, 0);
	assert_true(zk_state_hash(&z.st) == zk_state_hash_full(&z.st));
	zt_close(&z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_update_delete),
		cmocka_unit_test(test_errors_are_atomic),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
