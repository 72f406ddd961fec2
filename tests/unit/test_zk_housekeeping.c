/*
 * Unit tests: container and TTL housekeeping — the leader's scan and the
 * re-checked DELETE_CONTAINER / DELETE_TTL txns.
 *
 * Probe p10 on Apache ZooKeeper 3.8: a container that never had a child
 * stays, one whose last child went is deleted, one with a child stays; a
 * TTL node past its TTL is deleted unless it has children.
 */
#include "test_zk_helpers.h"

#include "zk/zk_housekeeping.h"

struct reaped {
	int count;
	enum zk_txn_kind kind[16];
	char path[16][64];
};

static void on_reap(void *ctx, enum zk_txn_kind kind, struct zk_bytes path)
{
	struct reaped *r = ctx;
	assert_true(r->count < 16);
	r->kind[r->count] = kind;
	memcpy(r->path[r->count], path.data, (size_t)path.size);
	r->path[r->count][path.size] = '\0';
	r->count++;
}

static size_t scan(struct zt *z, int64_t now, struct reaped *r, size_t max)
{
	memset(r, 0, sizeof(*r));
	return zk_housekeeping_scan(&z->st, now, max, on_reap, r);
}

static int32_t propose(struct zt *z, enum zk_txn_kind kind, const char *path, int64_t time_ms)
{
	keel_wbuf_reset(&z->txn);
	zk_txn_encode_delete(&z->txn, kind, time_ms, path, strlen(path));
	assert_int_equal(zt_apply_txn(z), KEEL_OK);
	return z->res.err;
}

static int32_t create(struct zt *z, int64_t sid, int32_t op, const char *path, int32_t flags,
		      int64_t ttl)
{
	return zt_create_full(z, sid, op, path, zt_b(""), flags, zt_open_acl(z), ttl, NULL, NULL);
}

static void test_containers(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000);
	assert_int_equal(create(&z, sid, ZK_OP_CREATE_CONTAINER, "/cA", 0, -1), ZK_OK);
	assert_int_equal(create(&z, sid, ZK_OP_CREATE_CONTAINER, "/cB", 0, -1), ZK_OK);
	assert_int_equal(zt_create(&z, sid, "/cB/x", "", 0), ZK_OK);
	assert_int_equal(zt_delete(&z, sid, "/cB/x", -1), ZK_OK);
	assert_int_equal(create(&z, sid, ZK_OP_CREATE_CONTAINER, "/cC", 0, -1), ZK_OK);
	assert_int_equal(zt_create(&z, sid, "/cC/x", "", 0), ZK_OK);
	assert_int_equal(zt_create(&z, sid, "/plain", "", 0), ZK_OK);
	struct reaped r;
	assert_int_equal(scan(&z, z.now_ms + 1000000, &r, 16), 1);
	assert_int_equal(r.count, 1);
	assert_string_equal(r.path[0], "/cB");
	assert_int_equal(r.kind[0], ZK_TXN_DELETE_CONTAINER);

	/* The proposal applies: deleted with its triggers. */
	assert_int_equal(propose(&z, ZK_TXN_DELETE_CONTAINER, "/cB", z.now_ms), ZK_OK);
	assert_false(zt_exists(&z, "/cB"));
	zt_assert_trigger(&z, 0, ZK_EVENT_NODE_DELETED, "/cB");
	zt_assert_trigger(&z, 1, ZK_EVENT_NODE_CHILDREN_CHANGED, "/");
	assert_int_equal(z.res.kind, ZK_TXN_DELETE_CONTAINER);
	/* A stale proposal changes nothing: it has a child, it never had one,
	 * it is not a container, it is gone. */
	uint64_t h = zk_state_hash(&z.st);
	assert_int_equal(propose(&z, ZK_TXN_DELETE_CONTAINER, "/cC", z.now_ms), ZK_NOT_EMPTY);
	assert_int_equal(propose(&z, ZK_TXN_DELETE_CONTAINER, "/cA", z.now_ms), ZK_BAD_VERSION);
	assert_int_equal(propose(&z, ZK_TXN_DELETE_CONTAINER, "/plain", z.now_ms), ZK_BAD_VERSION);
	assert_int_equal(propose(&z, ZK_TXN_DELETE_CONTAINER, "/cB", z.now_ms), ZK_NO_NODE);
	assert_int_equal(propose(&z, ZK_TXN_DELETE_TTL, "/cC/x", z.now_ms), ZK_BAD_VERSION);
	assert_true(zk_state_hash(&z.st) == h);
	assert_int_equal(z.res.trigger_count, 0);
	/* Once /cC's child goes, it is due too. */
	assert_int_equal(zt_delete(&z, sid, "/cC/x", -1), ZK_OK);
	assert_int_equal(scan(&z, z.now_ms, &r, 16), 1);
	assert_string_equal(r.path[0], "/cC");
	zt_close(&z);
}

static void test_container_never_used_limit(void **state)
{
	(void)state;
	struct zk_config cfg;
	zk_config_default(&cfg);
	cfg.container_max_never_used_ms = 60000;
	struct zt z;
	zt_init_cfg(&z, &cfg);
	int64_t sid = zt_session(&z, 10000);
	assert_int_equal(create(&z, sid, ZK_OP_CREATE_CONTAINER, "/c", 0, -1), ZK_OK);
	int64_t t0 = z.now_ms;
	struct reaped r;
	assert_int_equal(scan(&z, t0 + 60000, &r, 16), 0);
	assert_int_equal(scan(&z, t0 + 60001, &r, 16), 1);
	assert_int_equal(propose(&z, ZK_TXN_DELETE_CONTAINER, "/c", t0 + 60000), ZK_BAD_VERSION);
	assert_int_equal(propose(&z, ZK_TXN_DELETE_CONTAINER, "/c", t0 + 60001), ZK_OK);
	assert_false(zt_exists(&z, "/c"));
	zt_close(&z);
}

static void test_ttl_nodes(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000);
	assert_int_equal(create(&z, sid, ZK_OP_CREATE_TTL, "/tA", 5, 1000), ZK_OK);
	int64_t ta = z.now_ms;
	assert_int_equal(create(&z, sid, ZK_OP_CREATE_TTL, "/tB", 5, 1000), ZK_OK);
	assert_int_equal(zt_create(&z, sid, "/tB/x", "", 0), ZK_OK);
	assert_int_equal(create(&z, sid, ZK_OP_CREATE_TTL, "/tC", 5, 60000), ZK_OK);
	char seq[64];
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE_TTL, "/tD-", zt_b(""), 6,
					zt_open_acl(&z), 1000, seq, NULL),
			 ZK_OK);
	int64_t td = z.now_ms;
	struct reaped r;
	/* Expired strictly after mtime + ttl. */
	assert_int_equal(scan(&z, ta + 1000, &r, 16), 0);
	assert_int_equal(scan(&z, td + 1001, &r, 16), 2);
	assert_string_equal(r.path[0], "/tA");
	assert_string_equal(r.path[1], seq);
	assert_int_equal(r.kind[0], ZK_TXN_DELETE_TTL);
	/* max bounds the emitted candidates, not the count. */
	assert_int_equal(scan(&z, td + 1001, &r, 1), 2);
	assert_int_equal(r.count, 1);
	/* setData renews a TTL node: the proposal made before is stale. */
	assert_int_equal(zt_set(&z, sid, seq, zt_b("touch"), -1, NULL), ZK_OK);
	assert_int_equal(propose(&z, ZK_TXN_DELETE_TTL, seq, td + 1001), ZK_BAD_VERSION);
	assert_true(zt_exists(&z, seq));
	assert_int_equal(propose(&z, ZK_TXN_DELETE_TTL, "/tA", ta + 1000), ZK_BAD_VERSION);
	assert_int_equal(propose(&z, ZK_TXN_DELETE_TTL, "/tA", ta + 1001), ZK_OK);
	assert_false(zt_exists(&z, "/tA"));
	zt_assert_trigger(&z, 0, ZK_EVENT_NODE_DELETED, "/tA");
	/* Children keep a TTL node alive; the kind must match. */
	assert_int_equal(propose(&z, ZK_TXN_DELETE_TTL, "/tB", ta + 999999), ZK_NOT_EMPTY);
	assert_int_equal(propose(&z, ZK_TXN_DELETE_CONTAINER, "/tC", ta + 999999), ZK_BAD_VERSION);
	assert_int_equal(keel_hmap_count(&z.st.special), 3);
	zt_close(&z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_containers),
		cmocka_unit_test(test_container_never_used_limit),
		cmocka_unit_test(test_ttl_nodes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
