/*
 * Unit tests: sessions — negotiation, connect decisions, create/close
 * txns with their ephemerals, getEphemerals, and the leader's expiry
 * tracker.
 *
 * Probe p7/p8 against Apache ZooKeeper 3.8 (tickTime 2000): a requested
 * timeout of 1 ms gives 4000, of 10^9 gives 40000; a reconnect with a bad
 * password or to a closed session gets timeOut 0, session id 0 and a zero
 * password; a client whose last zxid is ahead is disconnected without a
 * reply; closing a session deletes its ephemerals in the same txn, with
 * NodeDeleted and NodeChildrenChanged triggers and the parent's pzxid set
 * to the close's zxid.
 */
#include "test_zk_helpers.h"

#include "zk/zk_read.h"
#include "zk/zk_session.h"
#include "base/rng.h"
#include "base/sort.h"

static void test_negotiation(void **state)
{
	(void)state;
	struct zk_config cfg;
	zk_config_default(&cfg);
	assert_int_equal(zk_session_negotiate_timeout(&cfg, 1), 4000);
	assert_int_equal(zk_session_negotiate_timeout(&cfg, 1000000000), 40000);
	assert_int_equal(zk_session_negotiate_timeout(&cfg, 6000), 6000);
	assert_int_equal(zk_session_negotiate_timeout(&cfg, -5), 4000);
	cfg.tick_time_ms = 500;
	assert_int_equal(zk_session_negotiate_timeout(&cfg, 1), 1000);
	assert_int_equal(zk_session_negotiate_timeout(&cfg, 20000), 10000);
	cfg.min_session_timeout_ms = 3000;
	cfg.max_session_timeout_ms = 90000;
	assert_int_equal(zk_session_negotiate_timeout(&cfg, 1), 3000);
	assert_int_equal(zk_session_negotiate_timeout(&cfg, 60000), 60000);
	assert_int_equal(zk_session_negotiate_timeout(&cfg, 100000), 90000);
}

static void test_connect_decisions(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 6000);
	const struct zk_session *s = zk_state_session(&z.st, sid);
	assert_non_null(s);
	uint8_t pw[16];
	memcpy(pw, s->passwd, 16);
	struct zk_config cfg = z.st.config;
	struct zk_connect_response rsp;
	int32_t timeout;

	/* New session: negotiated timeout for the txn. */
	struct zk_connect_request req = {0, 0, 1, 0, zk_bytes_of(pw, 16), false, true};
	assert_int_equal(zk_session_connect(&z.st, &cfg, &req, (int64_t)z.zxid, &rsp, &timeout),
			 ZK_CONNECT_NEW);
	assert_int_equal(timeout, 4000);
	/* Resume: the right password, a reconnect timeout negotiated anew. */
	req.session_id = sid;
	req.timeout_ms = 8000;
	assert_int_equal(zk_session_connect(&z.st, &cfg, &req, (int64_t)z.zxid, &rsp, &timeout),
			 ZK_CONNECT_RESUME);
	assert_int_equal(rsp.session_id, sid);
	assert_int_equal(rsp.timeout_ms, 8000);
	assert_memory_equal(rsp.passwd.data, pw, 16);
	assert_true(rsp.has_read_only);
	/* Wrong password, short password, unknown session: expired. */
	uint8_t bad[16];
	memset(bad, 'x', 16);
	req.passwd = zk_bytes_of(bad, 16);
	assert_int_equal(zk_session_connect(&z.st, &cfg, &req, (int64_t)z.zxid, &rsp, &timeout),
			 ZK_CONNECT_EXPIRED);
	assert_int_equal(rsp.timeout_ms, 0);
	assert_int_equal(rsp.session_id, 0);
	assert_int_equal(rsp.passwd.size, 16);
	assert_int_equal(rsp.passwd.data[0], 0);
	req.passwd = zk_bytes_of(pw, 15);
	assert_int_equal(zk_session_connect(&z.st, &cfg, &req, (int64_t)z.zxid, &rsp, &timeout),
			 ZK_CONNECT_EXPIRED);
	req.passwd = zk_bytes_of(pw, 16);
	req.session_id = sid + 1000;
	assert_int_equal(zk_session_connect(&z.st, &cfg, &req, (int64_t)z.zxid, &rsp, &timeout),
			 ZK_CONNECT_EXPIRED);
	/* A client that has seen a newer zxid than this server: refuse. */
	req.session_id = sid;
	req.last_zxid_seen = (int64_t)z.zxid + 1;
	assert_int_equal(zk_session_connect(&z.st, &cfg, &req, (int64_t)z.zxid, &rsp, &timeout),
			 ZK_CONNECT_REFUSE);
	req.last_zxid_seen = (int64_t)z.zxid;
	/* readOnly is echoed only to clients that sent it. */
	req.has_read_only = false;
	assert_int_equal(zk_session_connect(&z.st, &cfg, &req, (int64_t)z.zxid, &rsp, &timeout),
			 ZK_CONNECT_RESUME);
	assert_false(rsp.has_read_only);
	/* After close, the same credentials are expired. */
	assert_int_equal(zt_close_session(&z, sid), ZK_OK);
	assert_int_equal(zk_session_connect(&z.st, &cfg, &req, (int64_t)z.zxid, &rsp, &timeout),
			 ZK_CONNECT_EXPIRED);
	zt_close(&z);
}

static void test_create_session_txn(void **state)
{
	(void)state;
	struct zk_config cfg;
	zk_config_default(&cfg);
	cfg.max_sessions = 3;
	struct zt z;
	zt_init_cfg(&z, &cfg);
	uint64_t h0 = zk_state_hash(&z.st);
	int64_t a = zt_session(&z, 5000);
	/* Ids come from the zxid when the txn does not name one. */
	assert_int_equal(a, (int64_t)z.zxid);
	assert_true(zk_state_hash(&z.st) != h0);
	struct zk_connect_response rsp;
	zk_session_created(&z.res, true, &rsp);
	assert_int_equal(rsp.session_id, a);
	assert_int_equal(rsp.timeout_ms, 5000);
	assert_true(rsp.has_read_only);
	assert_memory_equal(rsp.passwd.data, z.res.new_session_passwd, 16);
	/* A named id is used as is; a duplicate is refused like an expired one. */
	uint8_t pw[16] = {1};
	struct zk_txn_meta meta = {z.now_ms, 0, 0, 0x7777};
	keel_wbuf_reset(&z.txn);
	zk_txn_encode_create_session(&z.txn, &meta, 4000, pw);
	assert_int_equal(zt_apply_txn(&z), KEEL_OK);
	assert_int_equal(z.res.new_session_id, 0x7777);
	assert_int_equal(zt_apply_txn(&z), KEEL_OK);
	assert_int_equal(z.res.err, ZK_SESSION_EXPIRED);
	zk_session_created(&z.res, false, &rsp);
	assert_int_equal(rsp.timeout_ms, 0);
	/* The replicated session limit. */
	(void)zt_session(&z, 4000);
	keel_wbuf_reset(&z.txn);
	zk_txn_encode_create_session(&z.txn, &(struct zk_txn_meta){z.now_ms, 0, 0, 0}, 4000, pw);
	assert_int_equal(zt_apply_txn(&z), KEEL_OK);
	assert_int_equal(z.res.err, ZK_SESSION_EXPIRED);
	assert_int_equal(zk_state_session_count(&z.st), 3);
	zt_close(&z);
}

static void test_close_deletes_ephemerals(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t owner = zt_session(&z, 4000);
	int64_t other = zt_session(&z, 4000);
	assert_int_equal(zt_create(&z, other, "/p", "", 0), ZK_OK);
	assert_int_equal(zt_create(&z, owner, "/p/z", "", 1), ZK_OK);
	assert_int_equal(zt_create(&z, owner, "/eph2", "", 1), ZK_OK);
	assert_int_equal(zt_create(&z, owner, "/eph1", "", 1), ZK_OK);
	assert_int_equal(zt_create(&z, other, "/mine", "", 1), ZK_OK);
	assert_int_equal(zk_state_session(&z.st, owner)->eph_count, 3);
	uint32_t nodes = zk_state_node_count(&z.st);

	assert_int_equal(zt_close_session(&z, owner), ZK_OK);
	int64_t zx = (int64_t)z.zxid;
	assert_int_equal(z.res.closed_session_id, owner);
	assert_null(zk_state_session(&z.st, owner));
	assert_int_equal(zk_state_node_count(&z.st), nodes - 3);
	assert_false(zt_exists(&z, "/eph1"));
	assert_false(zt_exists(&z, "/p/z"));
	assert_true(zt_exists(&z, "/mine"));
	/* Deleted in path order, each with its two triggers. */
	assert_int_equal(z.res.trigger_count, 6);
	zt_assert_trigger(&z, 0, ZK_EVENT_NODE_DELETED, "/eph1");
	zt_assert_trigger(&z, 1, ZK_EVENT_NODE_CHILDREN_CHANGED, "/");
	zt_assert_trigger(&z, 2, ZK_EVENT_NODE_DELETED, "/eph2");
	zt_assert_trigger(&z, 4, ZK_EVENT_NODE_DELETED, "/p/z");
	zt_assert_trigger(&z, 5, ZK_EVENT_NODE_CHILDREN_CHANGED, "/p");
	struct zk_stat s;
	assert_true(zt_stat(&z, "/", &s));
	assert_int_equal(s.pzxid, zx);
	assert_true(zt_stat(&z, "/p", &s));
	assert_int_equal(s.pzxid, zx);

	/* The session is gone: its writes fail, a second close is a no-op. */
	assert_int_equal(zt_create(&z, owner, "/late", "", 0), ZK_SESSION_EXPIRED);
	uint64_t h = zk_state_hash(&z.st);
	assert_int_equal(zt_close_session(&z, owner), ZK_OK);
	assert_int_equal(z.res.closed_session_id, 0);
	assert_true(zk_state_hash(&z.st) == h);

	/* Expiry (leader-proposed CLOSE_SESSION) does the same. */
	struct zk_txn_meta meta = {z.now_ms, 0, 0, other};
	keel_wbuf_reset(&z.txn);
	zk_txn_encode_close_session(&z.txn, &meta, ZK_CLOSE_EXPIRED);
	assert_int_equal(zt_apply_txn(&z), KEEL_OK);
	assert_int_equal(z.res.kind, ZK_TXN_CLOSE_SESSION);
	assert_int_equal(z.res.closed_session_id, other);
	assert_false(zt_exists(&z, "/mine"));
	assert_true(zt_exists(&z, "/p")); /* persistent nodes stay */
	assert_int_equal(zk_state_session_count(&z.st), 0);
	zt_close(&z);
}

/* Applies the txn in z->txn without the O(nodes) full-hash check of
 * zt_apply_txn(), for tests with 10^5 nodes. */
static void apply_fast(struct zt *z)
{
	z->zxid++;
	assert_int_equal(zk_apply(&z->st, z->zxid, z->txn.data, z->txn.size, &z->res), KEEL_OK);
}

static void create_ephemeral_fast(struct zt *z, int64_t sid, const char *path)
{
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_CREATE;
	req.u.create = (struct zk_create_request){zt_b(path), zt_b(""), zt_open_acl(z), 1, -1};
	keel_wbuf_reset(&z->body);
	zk_request_body_encode(&z->body, &req);
	struct zk_txn_meta meta = {z->now_ms, 0xabc, 1, sid};
	keel_wbuf_reset(&z->txn);
	zk_txn_encode_request(&z->txn, &meta, &z->ids, ZK_OP_CREATE, z->body.data, z->body.size);
	apply_fast(z);
	assert_int_equal(z->res.err, ZK_OK);
}

/* Issue 18: a session owning 10^5 ephemerals named in descending order (the
 * order that made the old insertion sort quadratic), or in random order, is
 * closed with O(n log n) comparisons, counted by the state's work counter,
 * and its nodes are deleted in path order. */
static void close_many(uint32_t n, bool descending)
{
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 4000);
	uint32_t *order = malloc(n * sizeof(*order));
	assert_non_null(order);
	for (uint32_t i = 0; i < n; i++) {
		order[i] = descending ? n - 1 - i : i;
	}
	if (!descending) {
		struct keel_rng rng;
		keel_rng_seed(&rng, 1806);
		for (uint32_t i = n; i > 1; i--) {
			uint32_t j = (uint32_t)keel_rng_below(&rng, i);
			uint32_t t = order[i - 1];
			order[i - 1] = order[j];
			order[j] = t;
		}
	}
	char path[32];
	for (uint32_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "/e%08u", order[i]);
		create_ephemeral_fast(&z, sid, path);
	}
	free(order);
	assert_int_equal(zk_state_session(&z.st, sid)->eph_count, n);
	uint64_t before = z.st.sort_compares;
	keel_wbuf_reset(&z.body);
	struct zk_txn_meta meta = {z.now_ms, 0xabc, 2, sid};
	keel_wbuf_reset(&z.txn);
	zk_txn_encode_request(&z.txn, &meta, &z.ids, ZK_OP_CLOSE_SESSION, z.body.data, 0);
	apply_fast(&z);
	assert_int_equal(z.res.err, ZK_OK);
	uint64_t compares = z.st.sort_compares - before;
	assert_true(compares > 0);
	assert_true(compares <= keel_sort_bound(n));
	/* Quadratic would be n^2/2 (5e9 at 10^5); the bound is ~3.6e6. */
	assert_true(compares < (uint64_t)n * n / 1000);
	assert_null(zk_state_session(&z.st, sid));
	assert_int_equal(z.res.trigger_count, 2 * n);
	for (uint32_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "/e%08u", i);
		zt_assert_trigger(&z, 2 * i, ZK_EVENT_NODE_DELETED, path);
	}
	assert_true(zk_state_hash(&z.st) == zk_state_hash_full(&z.st));
	zt_close(&z);
}

static void test_close_many_descending(void **state)
{
	(void)state;
	close_many(100000, true);
}

static void test_close_many_random(void **state)
{
	(void)state;
	close_many(100000, false);
}

static int32_t ephemerals(struct zt *z, int64_t sid, const char *prefix, struct keel_wbuf *out)
{
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_GET_EPHEMERALS;
	req.u.path.path = prefix == NULL ? ZK_BYTES_NULL : zt_b(prefix);
	struct zk_read_ctx ctx = {&z->st, NULL, NULL, &z->ids, sid};
	keel_wbuf_reset(out);
	return zk_read(&ctx, &req, out);
}

static void assert_list(struct keel_wbuf *out, const char *const *want, int n)
{
	struct zk_response rsp;
	assert_int_equal(zk_response_decode(&rsp, ZK_OP_GET_EPHEMERALS, out->data, out->size), KEEL_OK);
	assert_int_equal(rsp.strings.count, n);
	struct zk_str_iter it;
	struct zk_bytes s;
	zk_str_iter_init(&it, rsp.strings);
	for (int i = 0; i < n; i++) {
		assert_true(zk_str_iter_next(&it, &s));
		assert_true(zk_bytes_eq_str(s, want[i]));
	}
}

static void test_get_ephemerals(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 4000);
	int64_t other = zt_session(&z, 4000);
	assert_int_equal(zt_create(&z, sid, "/e1", "", 1), ZK_OK);
	char path[64];
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE, "/e2-", zt_b(""), 3, zt_open_acl(&z),
					-1, path, NULL),
			 ZK_OK);
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE_CONTAINER, "/c1", zt_b(""), 0,
					zt_open_acl(&z), -1, NULL, NULL),
			 ZK_OK);
	assert_int_equal(zt_create(&z, sid, "/c1/x", "", 1), ZK_OK);
	assert_int_equal(zt_create(&z, other, "/e9", "", 1), ZK_OK);
	struct keel_wbuf out;
	keel_wbuf_init_dynamic(&out, 0, 4096);
	/* Probe p3: "/" , "" and "  / " list all, a prefix filters by
	 * startsWith. keel sorts by path. */
	const char *all[] = {"/c1/x", "/e1", path};
	assert_int_equal(ephemerals(&z, sid, "/", &out), ZK_OK);
	assert_list(&out, all, 3);
	assert_int_equal(ephemerals(&z, sid, "", &out), ZK_OK);
	assert_list(&out, all, 3);
	assert_int_equal(ephemerals(&z, sid, "  / ", &out), ZK_OK);
	assert_list(&out, all, 3);
	assert_int_equal(ephemerals(&z, sid, NULL, &out), ZK_OK);
	assert_list(&out, all, 3);
	const char *e[] = {"/e1", path};
	assert_int_equal(ephemerals(&z, sid, "/e", &out), ZK_OK);
	assert_list(&out, e, 2);
	const char *c[] = {"/c1/x"};
	assert_int_equal(ephemerals(&z, sid, "/c1", &out), ZK_OK);
	assert_list(&out, c, 1);
	assert_int_equal(ephemerals(&z, sid, "/zz", &out), ZK_OK);
	assert_list(&out, NULL, 0);
	assert_int_equal(ephemerals(&z, 4242, "/", &out), ZK_OK);
	assert_list(&out, NULL, 0);
	keel_wbuf_free(&out);
	zt_close(&z);
}

static void test_expiry_tracker(void **state)
{
	(void)state;
	struct zk_expiry t;
	assert_int_equal(zk_expiry_init(&t, 0), KEEL_OK);
	assert_int_equal(zk_expiry_add(&t, 1, 4000, 0), KEEL_OK);
	assert_int_equal(zk_expiry_add(&t, 2, 6000, 0), KEEL_OK);
	assert_int_equal(zk_expiry_add(&t, 3, 4000, 1000), KEEL_OK);
	int64_t ids[8];
	assert_int_equal(zk_expiry_expired(&t, 4000, ids, 8), 0); /* deadline < now */
	assert_int_equal(zk_expiry_expired(&t, 4001, ids, 8), 1);
	assert_int_equal(ids[0], 1);
	/* Touch pushes a deadline out; never pulls it in. */
	assert_true(zk_expiry_touch(&t, 3, 3000));  /* -> 7000 */
	assert_true(zk_expiry_touch(&t, 3, 2000));  /* still 7000 */
	assert_false(zk_expiry_touch(&t, 99, 3000));
	assert_int_equal(zk_expiry_expired(&t, 6500, ids, 8), 1);
	assert_int_equal(ids[0], 2);
	assert_int_equal(zk_expiry_expired(&t, 7001, ids, 8), 1);
	assert_int_equal(ids[0], 3);
	/* Session 1 was re-armed at 4001 + 4000: it comes back until removed. */
	assert_int_equal(zk_expiry_expired(&t, 8002, ids, 8), 1);
	assert_int_equal(ids[0], 1);
	zk_expiry_remove(&t, 1);
	zk_expiry_remove(&t, 1);
	assert_int_equal(zk_expiry_count(&t), 2);
	/* `max` bounds one call; earliest first, ties by id. */
	for (int64_t i = 10; i < 20; i++) {
		assert_int_equal(zk_expiry_add(&t, i, 1000, 0), KEEL_OK);
	}
	assert_int_equal(zk_expiry_expired(&t, 5000, ids, 4), 4);
	assert_int_equal(ids[0], 10);
	assert_int_equal(ids[3], 13);
	assert_int_equal(zk_expiry_expired(&t, 5000, ids, 8), 6);
	assert_int_equal(ids[0], 14);

	/* A new leader starts everyone fresh from the replicated state. */
	struct zt z;
	zt_init(&z);
	int64_t a = zt_session(&z, 4000);
	int64_t b = zt_session(&z, 10000);
	assert_int_equal(zk_expiry_rebuild(&t, &z.st, 100000), KEEL_OK);
	assert_int_equal(zk_expiry_count(&t), 2);
	assert_int_equal(zk_expiry_expired(&t, 104000, ids, 8), 0);
	assert_int_equal(zk_expiry_expired(&t, 104001, ids, 8), 1);
	assert_int_equal(ids[0], a);
	zk_expiry_remove(&t, a); /* its close applied */
	assert_int_equal(zk_expiry_expired(&t, 110001, ids, 8), 1);
	assert_int_equal(ids[0], b);
	zt_close(&z);
	zk_expiry_close(&t);

	/* The tracker is bounded. */
	assert_int_equal(zk_expiry_init(&t, 2), KEEL_OK);
	assert_int_equal(zk_expiry_add(&t, 1, 10, 0), KEEL_OK);
	assert_int_equal(zk_expiry_add(&t, 2, 10, 0), KEEL_OK);
	assert_int_equal(zk_expiry_add(&t, 3, 10, 0), KEEL_LIMIT);
	assert_int_equal(zk_expiry_add(&t, 2, 20, 0), KEEL_OK); /* re-track is fine */
	zk_expiry_close(&t);
}

static void test_expiry_heap_randomized(void **state)
{
	(void)state;
	/* Against a brute-force model: the earliest deadline always wins. */
	struct zk_expiry t;
	assert_int_equal(zk_expiry_init(&t, 0), KEEL_OK);
	int64_t deadline[200];
	int32_t timeout[200];
	bool live[200];
	memset(live, 0, sizeof(live));
	uint64_t x = 88172645463325252ull;
	int64_t now = 0;
	for (int step = 0; step < 20000; step++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		int id = (int)(x % 200);
		now += (int64_t)(x >> 40) % 50;
		switch ((x >> 8) % 4) {
		case 0:
			timeout[id] = 100 + (int32_t)((x >> 16) % 1000);
			assert_int_equal(zk_expiry_add(&t, id, timeout[id], now), KEEL_OK);
			deadline[id] = now + timeout[id];
			live[id] = true;
			break;
		case 1:
			assert_int_equal(zk_expiry_touch(&t, id, now), live[id]);
			if (live[id] && now + timeout[id] > deadline[id]) {
				deadline[id] = now + timeout[id];
			}
			break;
		case 2:
			zk_expiry_remove(&t, id);
			live[id] = false;
			break;
		default: {
			int64_t got[1];
			size_t n = zk_expiry_expired(&t, now, got, 1);
			int best = -1;
			for (int i = 0; i < 200; i++) {
				if (live[i] && deadline[i] < now &&
				    (best < 0 || deadline[i] < deadline[best])) {
					best = i;
				}
			}
			assert_int_equal(n, best < 0 ? 0 : 1);
			if (n == 1) {
				assert_int_equal(deadline[got[0]], deadline[best]);
				deadline[got[0]] = now + timeout[got[0]];
			}
			break;
		}
		}
	}
	zk_expiry_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_negotiation),
		cmocka_unit_test(test_connect_decisions),
		cmocka_unit_test(test_create_session_txn),
		cmocka_unit_test(test_close_deletes_ephemerals),
		cmocka_unit_test(test_close_many_descending),
		cmocka_unit_test(test_close_many_random),
		cmocka_unit_test(test_get_ephemerals),
		cmocka_unit_test(test_expiry_tracker),
		cmocka_unit_test(test_expiry_heap_randomized),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
