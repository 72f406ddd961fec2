/*
 * Unit tests: multi (atomic, all or nothing) and multiRead.
 *
 * Result lists are the ones Apache ZooKeeper 3.8 put on the wire (probe
 * p2): ReplyHeader.err 0; for a failed multi every result is an error
 * result (type -1) with 0 for the ops before the failing one, its error,
 * and RuntimeInconsistency (-2) after it. Where 3.8.0 had bugs fixed later
 * in 3.8 (create2/createContainer inside multi made plain nodes), keel
 * follows the fixed behaviour: create2-typed results with a Stat.
 */
#include "test_zk_helpers.h"

#include "zk/zk_read.h"
#include "zk/zk_tree.h"

struct ops {
	struct zk_multi_op op[16];
	size_t n;
	struct keel_wbuf acl;
	struct zk_acl_vec open;
};

static void ops_init(struct ops *o)
{
	memset(o, 0, sizeof(*o));
	keel_wbuf_init_dynamic(&o->acl, 0, 1024);
	struct zk_acl a = {31, {zt_b("world"), zt_b("anyone")}};
	o->open = zk_acl_vec_build(&o->acl, &a, 1);
}

static void ops_close(struct ops *o)
{
	keel_wbuf_free(&o->acl);
}

static void op_create(struct ops *o, int32_t opcode, const char *path, const char *data,
		      int32_t flags, int64_t ttl)
{
	struct zk_multi_op *op = &o->op[o->n++];
	op->opcode = opcode;
	op->u.create = (struct zk_create_request){zt_b(path), zt_b(data), o->open, flags, ttl};
}

static void op_delete(struct ops *o, const char *path, int32_t version)
{
	struct zk_multi_op *op = &o->op[o->n++];
	op->opcode = ZK_OP_DELETE;
	op->u.delete_ = (struct zk_delete_request){zt_b(path), version};
}

static void op_set(struct ops *o, const char *path, const char *data, int32_t version)
{
	struct zk_multi_op *op = &o->op[o->n++];
	op->opcode = ZK_OP_SET_DATA;
	op->u.set_data = (struct zk_set_data_request){zt_b(path), zt_b(data), version};
}

static void op_check(struct ops *o, const char *path, int32_t version)
{
	struct zk_multi_op *op = &o->op[o->n++];
	op->opcode = ZK_OP_CHECK;
	op->u.check = (struct zk_check_request){zt_b(path), version};
}

static int32_t run_multi(struct zt *z, int64_t sid, struct ops *o)
{
	keel_wbuf_reset(&z->body);
	zk_multi_encode(&z->body, o->op, o->n);
	int32_t err = zt_request(z, sid, ZK_OP_MULTI);
	o->n = 0;
	return err;
}

/* Reads the result list of the last apply into arrays. */
static size_t results(struct zt *z, struct zk_multi_result *out, size_t max)
{
	struct zk_multi_result_iter it;
	zk_multi_result_iter_init(&it, z->res.body.data, z->res.body.size);
	size_t n = 0;
	while (n < max && zk_multi_result_next(&it, &out[n])) {
		n++;
	}
	assert_false(it.failed);
	return n;
}

static void test_multi_success(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	struct ops o;
	ops_init(&o);
	int64_t sid = zt_session(&z, 10000);
	assert_int_equal(zt_create(&z, sid, "/m", "", 0), ZK_OK);
	op_create(&o, ZK_OP_CREATE, "/m/a", "", 0, -1);
	op_create(&o, ZK_OP_CREATE2, "/m/b", "", 0, -1);
	op_set(&o, "/m/a", "x", -1);
	op_check(&o, "/m/a", 1);
	op_delete(&o, "/m/b", -1);
	op_create(&o, ZK_OP_CREATE, "/m/s-", "", 2, -1);
	op_create(&o, ZK_OP_CREATE, "/m/s-", "", 2, -1);
	assert_int_equal(run_multi(&z, sid, &o), ZK_OK);
	int64_t zx = (int64_t)z.zxid;
	struct zk_multi_result r[16];
	assert_int_equal(results(&z, r, 16), 7);
	assert_int_equal(r[0].type, ZK_OP_CREATE);
	assert_true(zk_bytes_eq_str(r[0].path, "/m/a"));
	assert_int_equal(r[1].type, ZK_OP_CREATE2);
	assert_int_equal(r[1].stat.czxid, zx);
	assert_int_equal(r[2].type, ZK_OP_SET_DATA);
	/* Every op of a multi has the multi's zxid. */
	assert_int_equal(r[2].stat.czxid, zx);
	assert_int_equal(r[2].stat.mzxid, zx);
	assert_int_equal(r[2].stat.version, 1);
	assert_int_equal(r[2].stat.data_length, 1);
	assert_int_equal(r[3].type, ZK_OP_CHECK);
	assert_int_equal(r[4].type, ZK_OP_DELETE);
	/* Sequential numbers follow the creates made earlier in the multi. */
	assert_true(zk_bytes_eq_str(r[5].path, "/m/s-0000000002"));
	assert_true(zk_bytes_eq_str(r[6].path, "/m/s-0000000003"));
	for (int i = 0; i < 7; i++) {
		assert_int_equal(r[i].err, 0);
	}
	struct zk_stat s;
	assert_true(zt_stat(&z, "/m", &s));
	assert_int_equal(s.cversion, 5);
	assert_int_equal(s.num_children, 3);
	assert_int_equal(s.pzxid, zx);
	assert_false(zt_exists(&z, "/m/b"));
	/* Triggers in op order. */
	zt_assert_trigger(&z, 0, ZK_EVENT_NODE_CREATED, "/m/a");
	zt_assert_trigger(&z, 1, ZK_EVENT_NODE_CHILDREN_CHANGED, "/m");
	zt_assert_trigger(&z, 2, ZK_EVENT_NODE_CREATED, "/m/b");
	zt_assert_trigger(&z, 4, ZK_EVENT_NODE_DATA_CHANGED, "/m/a");
	zt_assert_trigger(&z, 5, ZK_EVENT_NODE_DELETED, "/m/b");
	assert_int_equal(z.res.trigger_count, 11);

	/* Empty multi: an empty result list. */
	assert_int_equal(run_multi(&z, sid, &o), ZK_OK);
	assert_int_equal(results(&z, r, 16), 0);
	assert_int_equal(z.res.body.size, 9);
	ops_close(&o);
	zt_close(&z);
}

static void expect_errors(struct zt *z, const int32_t *want, size_t n)
{
	struct zk_multi_result r[16];
	assert_int_equal(results(z, r, 16), n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(r[i].type, ZK_OP_ERROR);
		assert_int_equal(r[i].err, want[i]);
	}
	assert_int_equal(z->res.trigger_count, 0);
}

static void test_multi_failures(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	struct ops o;
	ops_init(&o);
	int64_t sid = zt_session(&z, 10000);
	assert_int_equal(zt_create(&z, sid, "/m", "", 0), ZK_OK);
	assert_int_equal(zt_create(&z, sid, "/m/a", "orig", 0), ZK_OK);
	uint64_t h = zk_state_hash(&z.st);

	op_create(&o, ZK_OP_CREATE, "/m/c", "", 0, -1);
	op_set(&o, "/m/a", "y", -1);
	op_check(&o, "/m/a", 7);
	op_create(&o, ZK_OP_CREATE, "/m/d", "", 0, -1);
	op_delete(&o, "/m/a", -1);
	assert_int_equal(run_multi(&z, sid, &o), ZK_OK); /* header err 0 */
	expect_errors(&z, (int32_t[]){0, 0, ZK_BAD_VERSION, ZK_RUNTIME_INCONSISTENCY,
				      ZK_RUNTIME_INCONSISTENCY},
		      5);
	assert_true(zk_state_hash(&z.st) == h);
	assert_false(zt_exists(&z, "/m/c"));
	struct zk_stat s;
	assert_true(zt_stat(&z, "/m/a", &s));
	assert_int_equal(s.version, 0);
	assert_int_equal(s.data_length, 4);

	op_create(&o, ZK_OP_CREATE, "/m/a", "", 0, -1);
	op_create(&o, ZK_OP_CREATE, "/m/e", "", 0, -1);
	assert_int_equal(run_multi(&z, sid, &o), ZK_OK);
	expect_errors(&z, (int32_t[]){ZK_NODE_EXISTS, ZK_RUNTIME_INCONSISTENCY}, 2);

	op_create(&o, ZK_OP_CREATE, "/m/f", "", 0, -1);
	op_create(&o, ZK_OP_CREATE, "/m/a", "", 0, -1);
	assert_int_equal(run_multi(&z, sid, &o), ZK_OK);
	expect_errors(&z, (int32_t[]){0, ZK_NODE_EXISTS}, 2);

	/* A bad create mode inside a multi is that op's BadArguments. */
	op_create(&o, ZK_OP_CREATE, "/m/g", "", 9, -1);
	assert_int_equal(run_multi(&z, sid, &o), ZK_OK);
	expect_errors(&z, (int32_t[]){ZK_BAD_ARGUMENTS}, 1);

	/* NoNode for a missing parent, then RuntimeInconsistency. */
	op_create(&o, ZK_OP_CREATE, "/m/x/y", "", 0, -1);
	op_create(&o, ZK_OP_CREATE, "/m/z", "", 0, -1);
	assert_int_equal(run_multi(&z, sid, &o), ZK_OK);
	expect_errors(&z, (int32_t[]){ZK_NO_NODE, ZK_RUNTIME_INCONSISTENCY}, 2);
	assert_true(zk_state_hash(&z.st) == h);

	/* A closed session fails its first op. */
	op_create(&o, ZK_OP_CREATE, "/m/s", "", 0, -1);
	op_create(&o, ZK_OP_CREATE, "/m/t", "", 0, -1);
	assert_int_equal(run_multi(&z, 999, &o), ZK_OK);
	expect_errors(&z, (int32_t[]){ZK_SESSION_EXPIRED, ZK_RUNTIME_INCONSISTENCY}, 2);

	/* A null path is a MarshallingError for the whole request. */
	op_create(&o, ZK_OP_CREATE, "/m/ok", "", 0, -1);
	op_create(&o, ZK_OP_CREATE, "/m/x", "", 0, -1);
	o.op[1].u.create.path = ZK_BYTES_NULL;
	assert_int_equal(run_multi(&z, sid, &o), ZK_MARSHALLING_ERROR);
	assert_int_equal(z.res.body.size, 0);
	assert_false(zt_exists(&z, "/m/ok"));

	/* A read op inside a multi does not decode: MarshallingError. */
	struct zk_multi_op rd = {.opcode = ZK_OP_GET_DATA};
	rd.u.read.path = zt_b("/m");
	keel_wbuf_reset(&z.body);
	zk_multi_encode(&z.body, &rd, 1);
	assert_int_equal(zt_request(&z, sid, ZK_OP_MULTI), ZK_MARSHALLING_ERROR);
	assert_true(zk_state_hash(&z.st) == h);
	ops_close(&o);
	zt_close(&z);
}

static void test_multi_create_kinds_and_reuse(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	struct ops o;
	ops_init(&o);
	int64_t sid = zt_session(&z, 10000);
	assert_int_equal(zt_create(&z, sid, "/m", "", 0), ZK_OK);
	assert_int_equal(zt_create(&z, sid, "/m/a", "old", 0), ZK_OK);
	op_create(&o, ZK_OP_CREATE_CONTAINER, "/m/cont", "", 4, -1);
	op_create(&o, ZK_OP_CREATE_TTL, "/m/ttl", "", 5, 10000);
	op_create(&o, ZK_OP_CREATE, "/m/eph", "", 1, -1);
	op_delete(&o, "/m/a", -1);
	op_create(&o, ZK_OP_CREATE, "/m/a", "new", 0, -1);
	assert_int_equal(run_multi(&z, sid, &o), ZK_OK);
	struct zk_multi_result r[16];
	assert_int_equal(results(&z, r, 16), 5);
	assert_int_equal(r[0].type, ZK_OP_CREATE2);
	assert_int_equal(r[1].type, ZK_OP_CREATE2);
	assert_int_equal(r[0].stat.ephemeral_owner, 0);
	const struct zk_node *n = zk_tree_node(&z.st.tree, zk_state_lookup(&z.st, zt_b("/m/cont")));
	assert_int_equal(zk_owner_kind(n->ephemeral_owner), ZK_KIND_CONTAINER);
	n = zk_tree_node(&z.st.tree, zk_state_lookup(&z.st, zt_b("/m/ttl")));
	assert_int_equal(zk_owner_kind(n->ephemeral_owner), ZK_KIND_TTL);
	assert_int_equal(zk_state_session(&z.st, sid)->eph_count, 1);
	n = zk_tree_node(&z.st.tree, zk_state_lookup(&z.st, zt_b("/m/a")));
	assert_int_equal(n->data_size, 3);
	assert_memory_equal(zk_node_data(n), "new", 3);
	assert_int_equal(n->czxid, (int64_t)z.zxid);
	ops_close(&o);
	zt_close(&z);
}

/* Snapshot of everything observable about the tree below /r. */
static void describe(struct zt *z, struct keel_wbuf *out)
{
	keel_wbuf_reset(out);
	uint32_t r = zk_state_lookup(&z->st, zt_b("/r"));
	for (uint32_t c = zk_tree_first_child(&z->st.tree, r); c != ZK_NODE_NONE;
	     c = zk_tree_next_child(&z->st.tree, r, c)) {
		const struct zk_node *n = zk_tree_node(&z->st.tree, c);
		keel_wbuf_bytes(out, n->bytes, n->name_size + n->data_size);
		keel_wbuf_bytes(out, &n->version, sizeof(n->version));
		keel_wbuf_bytes(out, &n->mzxid, sizeof(n->mzxid));
		keel_wbuf_u8(out, '|');
	}
	struct zk_stat s;
	zk_state_stat(&z->st, r, &s);
	zk_write_stat(out, &s);
}

static void test_rollback_restores_everything(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	struct ops o;
	ops_init(&o);
	int64_t sid = zt_session(&z, 10000);
	assert_int_equal(zt_create(&z, sid, "/r", "", 0), ZK_OK);
	const char *names[] = {"/r/a", "/r/b", "/r/c", "/r/d", "/r/e"};
	for (int i = 0; i < 5; i++) {
		assert_int_equal(zt_create(&z, sid, names[i], names[i], i == 2 ? 1 : 0), ZK_OK);
	}
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE_CONTAINER, "/r/k", zt_b(""), 4,
					zt_open_acl(&z), -1, NULL, NULL),
			 ZK_OK);
	struct keel_wbuf before, after;
	keel_wbuf_init_dynamic(&before, 0, 1 << 16);
	keel_wbuf_init_dynamic(&after, 0, 1 << 16);
	describe(&z, &before);
	uint64_t h = zk_state_hash(&z.st);
	size_t specials = keel_hmap_count(&z.st.special);
	uint32_t nodes = zk_state_node_count(&z.st);

	/* Deletes in the middle and at the ends, data changes (twice on one
	 * node), creates of every kind, an ephemeral deleted — then a failure. */
	op_delete(&o, "/r/c", -1);       /* the ephemeral */
	op_set(&o, "/r/b", "b1", -1);
	op_delete(&o, "/r/a", -1);       /* first child */
	op_set(&o, "/r/b", "b2", -1);
	op_create(&o, ZK_OP_CREATE, "/r/new", "", 1, -1);
	op_create(&o, ZK_OP_CREATE_TTL, "/r/t", "", 5, 100);
	op_delete(&o, "/r/k", -1);       /* a container */
	op_set(&o, "/r", "parent", -1);  /* the parent itself */
	op_delete(&o, "/r/e", -1);       /* last child */
	op_create(&o, ZK_OP_CREATE, "/r/a", "again", 0, -1);
	op_check(&o, "/r/d", 5);         /* fails */
	assert_int_equal(run_multi(&z, sid, &o), ZK_OK);
	struct zk_multi_result r[16];
	assert_int_equal(results(&z, r, 16), 11);
	assert_int_equal(r[10].err, ZK_BAD_VERSION);
	describe(&z, &after);
	assert_int_equal(after.size, before.size);
	assert_memory_equal(after.data, before.data, before.size);
	assert_true(zk_state_hash(&z.st) == h);
	assert_true(zk_state_hash_full(&z.st) == h);
	assert_int_equal(keel_hmap_count(&z.st.special), specials);
	assert_int_equal(zk_state_node_count(&z.st), nodes);
	assert_int_equal(zk_state_session(&z.st, sid)->eph_count, 1);
	/* The index still finds everything (and nothing extra). */
	for (int i = 0; i < 5; i++) {
		assert_true(zt_exists(&z, names[i]));
	}
	assert_false(zt_exists(&z, "/r/new"));
	assert_false(zt_exists(&z, "/r/t"));
	/* And the tree keeps working after the rollback. */
	op_delete(&o, "/r/c", -1);
	op_delete(&o, "/r/a", -1);
	assert_int_equal(run_multi(&z, sid, &o), ZK_OK);
	assert_false(zt_exists(&z, "/r/a"));
	assert_int_equal(zk_state_session(&z.st, sid)->eph_count, 0);
	keel_wbuf_free(&before);
	keel_wbuf_free(&after);
	ops_close(&o);
	zt_close(&z);
}

static void test_multi_read(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000);
	assert_int_equal(zt_create(&z, sid, "/m", "", 0), ZK_OK);
	assert_int_equal(zt_create(&z, sid, "/m/a", "x", 0), ZK_OK);
	struct zk_acl deny = {31, {zt_b("ip"), zt_b("10.0.0.0/8")}};
	keel_wbuf_reset(&z.acl);
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE, "/m/secret", zt_b(""), 0,
					zk_acl_vec_build(&z.acl, &deny, 1), -1, NULL, NULL),
			 ZK_OK);
	struct zk_multi_op ops[5];
	memset(ops, 0, sizeof(ops));
	const char *paths[] = {"/m/a", "/m", "/nonode", "/zz", "/m/secret"};
	int32_t codes[] = {ZK_OP_GET_DATA, ZK_OP_GET_CHILDREN, ZK_OP_GET_DATA, ZK_OP_GET_CHILDREN,
			   ZK_OP_GET_DATA};
	for (int i = 0; i < 5; i++) {
		ops[i].opcode = codes[i];
		ops[i].u.read.path = zt_b(paths[i]);
	}
	struct keel_wbuf frame, out;
	keel_wbuf_init_dynamic(&frame, 0, 4096);
	keel_wbuf_init_dynamic(&out, 0, 4096);
	keel_wbuf_i32(&frame, 9);
	keel_wbuf_i32(&frame, ZK_OP_MULTI_READ);
	zk_multi_encode(&frame, ops, 5);
	struct zk_request req;
	assert_int_equal(zk_request_decode(&req, frame.data, frame.size), KEEL_OK);
	struct zk_read_ctx ctx = {&z.st, NULL, NULL, &z.ids, sid};
	uint64_t h = zk_state_hash(&z.st);
	assert_int_equal(zk_read(&ctx, &req, &out), ZK_OK);
	assert_true(zk_state_hash(&z.st) == h);
	struct zk_multi_result_iter it;
	struct zk_multi_result r;
	zk_multi_result_iter_init(&it, out.data, out.size);
	assert_true(zk_multi_result_next(&it, &r));
	assert_int_equal(r.type, ZK_OP_GET_DATA);
	assert_true(zk_bytes_eq_str(r.data, "x"));
	assert_int_equal(r.stat.data_length, 1);
	assert_true(zk_multi_result_next(&it, &r));
	assert_int_equal(r.type, ZK_OP_GET_CHILDREN);
	assert_int_equal(r.children.count, 2);
	/* Errors per op, no rollback of the others. */
	assert_true(zk_multi_result_next(&it, &r));
	assert_int_equal(r.type, ZK_OP_ERROR);
	assert_int_equal(r.err, ZK_NO_NODE);
	assert_true(zk_multi_result_next(&it, &r));
	assert_int_equal(r.err, ZK_NO_NODE);
	assert_true(zk_multi_result_next(&it, &r));
	assert_int_equal(r.err, ZK_NO_AUTH);
	assert_false(zk_multi_result_next(&it, &r));
	assert_false(it.failed);
	keel_wbuf_free(&frame);
	keel_wbuf_free(&out);
	zt_close(&z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_multi_success),
		cmocka_unit_test(test_multi_failures),
		cmocka_unit_test(test_multi_create_kinds_and_reuse),
		cmocka_unit_test(test_rollback_restores_everything),
		cmocka_unit_test(test_multi_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
