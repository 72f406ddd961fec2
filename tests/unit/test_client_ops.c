/*
 * Unit tests: the client's typed calls (src/client/kc_ops.c) and watch
 * bookkeeping (kc_watch.c) against the scripted fake server: what each
 * call puts on the wire, how each reply is read, argument checks that fail
 * before anything is sent, multi results, extension opcodes, the event
 * queue's bound, and setWatches(2) packets after a reconnect, chunked.
 */
#include "test_client_fake.h"

static uint8_t buf[1u << 20];

struct rig {
	struct fake f;
	struct kc_client c;
	int fd;
};

static void rig_open(struct rig *r, bool queue)
{
	fake_init(&r->f);
	r->f.on_dial = fake_hook_accept;
	struct kc_options o = fake_options(&r->f, "a:1,b:2", queue);
	assert_int_equal(kc_init(&r->c, &o), KEEL_OK);
	assert_int_equal(kc_connect(&r->c), ZK_OK);
	r->fd = r->f.fds[r->f.conn_count - 1];
	fake_read_frame(r->fd, buf, sizeof(buf)); /* ConnectRequest */
}

static void rig_close(struct rig *r)
{
	fake_close(&r->f);
	kc_close(&r->c);
}

static void path_stat_reply(int fd, int32_t xid, const char *path, int32_t version)
{
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 4096);
	zk_write_bytes(&w, zk_bytes_str(path));
	struct zk_stat st = fake_stat(version);
	zk_write_stat(&w, &st);
	fake_reply(fd, xid, 100 + xid, 0, w.data, w.size);
	keel_wbuf_free(&w);
}

static void stat_reply(int fd, int32_t xid, int32_t version)
{
	uint8_t body[ZK_STAT_SIZE];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, body, sizeof(body));
	struct zk_stat st = fake_stat(version);
	zk_write_stat(&w, &st);
	fake_reply(fd, xid, 100 + xid, 0, body, sizeof(body));
}

static void test_create_modes(void **state)
{
	(void)state;
	struct rig r;
	rig_open(&r, true);
	struct {
		int32_t mode;
		int64_t ttl;
		int32_t opcode;
	} cases[] = {
		{ZK_CREATE_PERSISTENT, 0, ZK_OP_CREATE2},
		{ZK_CREATE_EPHEMERAL, 0, ZK_OP_CREATE2},
		{ZK_CREATE_PERSISTENT_SEQUENTIAL, 0, ZK_OP_CREATE2},
		{ZK_CREATE_EPHEMERAL_SEQUENTIAL, 0, ZK_OP_CREATE2},
		{ZK_CREATE_CONTAINER, 0, ZK_OP_CREATE_CONTAINER},
		{ZK_CREATE_PERSISTENT_WITH_TTL, 5000, ZK_OP_CREATE_TTL},
		{ZK_CREATE_PERSISTENT_SEQUENTIAL_WITH_TTL, 1, ZK_OP_CREATE_TTL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int32_t xid = (int32_t)i + 1;
		path_stat_reply(r.fd, xid, "/made0000000007", 0);
		struct kc_create_args args = {cases[i].mode, cases[i].ttl, NULL, 0};
		struct zk_bytes created;
		struct zk_stat st;
		assert_int_equal(kc_create(&r.c, "/made", zk_bytes_str("v"), &args, &created, &st),
				 ZK_OK);
		assert_true(zk_bytes_eq_str(created, "/made0000000007"));
		assert_int_equal(st.czxid, 3);
		struct zk_request req;
		fake_read_request(r.fd, buf, sizeof(buf), &req);
		assert_int_equal(req.xid, xid);
		assert_int_equal(req.opcode, cases[i].opcode);
		assert_true(zk_bytes_eq_str(req.u.create.path, "/made"));
		assert_true(zk_bytes_eq_str(req.u.create.data, "v"));
		assert_int_equal(req.u.create.flags, cases[i].mode);
		if (cases[i].opcode == ZK_OP_CREATE_TTL) {
			assert_int_equal(req.u.create.ttl_ms, cases[i].ttl);
		}
		/* The default ACL is world:anyone with every permission. */
		assert_int_equal(req.u.create.acl.count, 1);
		struct zk_acl_iter it;
		struct zk_acl acl;
		zk_acl_iter_init(&it, req.u.create.acl);
		assert_true(zk_acl_iter_next(&it, &acl));
		assert_int_equal(acl.perms, ZK_PERM_ALL);
		assert_true(zk_bytes_eq_str(acl.id.scheme, "world"));
		assert_true(zk_bytes_eq_str(acl.id.id, "anyone"));
	}
	/* A null value goes out as length -1; an explicit ACL as given. */
	path_stat_reply(r.fd, 8, "/n", 0);
	struct zk_acl mine = {ZK_PERM_READ, {zk_bytes_str("digest"), zk_bytes_str("u:h")}};
	struct kc_create_args args = {ZK_CREATE_PERSISTENT, 0, &mine, 1};
	assert_int_equal(kc_create(&r.c, "/n", ZK_BYTES_NULL, &args, NULL, NULL), ZK_OK);
	struct zk_request req;
	fake_read_request(r.fd, buf, sizeof(buf), &req);
	assert_true(zk_bytes_is_null(req.u.create.data));
	struct zk_acl_iter it;
	struct zk_acl acl;
	zk_acl_iter_init(&it, req.u.create.acl);
	assert_true(zk_acl_iter_next(&it, &acl));
	assert_int_equal(acl.perms, ZK_PERM_READ);
	assert_true(zk_bytes_eq_str(acl.id.id, "u:h"));
	/* Server errors come back as they are. */
	fake_reply(r.fd, 9, 5, ZK_NODE_EXISTS, NULL, 0);
	assert_int_equal(kc_create(&r.c, "/n", ZK_BYTES_NULL, NULL, NULL, NULL), ZK_NODE_EXISTS);
	fake_read_request(r.fd, buf, sizeof(buf), &req);
	assert_int_equal(req.opcode, ZK_OP_CREATE2);
	assert_int_equal(req.u.create.flags, ZK_CREATE_PERSISTENT);
	rig_close(&r);
}

/* Bad arguments fail before anything is dialed or sent. */
static void test_bad_arguments(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	struct kc_options o = fake_options(&f, "a:1", true);
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	struct kc_create_args ttl0 = {ZK_CREATE_PERSISTENT_WITH_TTL, 0, NULL, 0};
	struct kc_create_args ttl_plain = {ZK_CREATE_PERSISTENT, 10, NULL, 0};
	struct kc_create_args bad_mode = {9, 0, NULL, 0};
	struct kc_create_args seq = {ZK_CREATE_PERSISTENT_SEQUENTIAL, 0, NULL, 0};
	assert_int_equal(kc_create(&c, "/t", ZK_BYTES_NULL, &ttl0, NULL, NULL), ZK_BAD_ARGUMENTS);
	assert_int_equal(kc_create(&c, "/t", ZK_BYTES_NULL, &ttl_plain, NULL, NULL),
			 ZK_BAD_ARGUMENTS);
	assert_int_equal(kc_create(&c, "/t", ZK_BYTES_NULL, &bad_mode, NULL, NULL),
			 ZK_BAD_ARGUMENTS);
	assert_int_equal(kc_create(&c, "/t/", ZK_BYTES_NULL, NULL, NULL, NULL), ZK_BAD_ARGUMENTS);
	assert_non_null(strstr(kc_message(&c), "Invalid path string"));
	assert_int_equal(kc_get(&c, "relative", false, NULL, NULL), ZK_BAD_ARGUMENTS);
	assert_int_equal(kc_get(&c, "/a//b", false, NULL, NULL), ZK_BAD_ARGUMENTS);
	assert_int_equal(kc_delete(&c, "/a/../b", -1), ZK_BAD_ARGUMENTS);
	assert_int_equal(kc_set(&c, NULL, ZK_BYTES_NULL, -1, NULL), ZK_BAD_ARGUMENTS);
	assert_int_equal(kc_add_watch(&c, "/a", 7), ZK_BAD_ARGUMENTS);
	assert_int_equal(kc_remove_watches(&c, "/a", 9), ZK_BAD_ARGUMENTS);
	assert_int_equal(kc_add_auth(&c, "", zk_bytes_str("x")), ZK_BAD_ARGUMENTS);
	uint8_t big[KC_MAX_AUTH_SIZE + 1] = {0};
	assert_int_equal(kc_add_auth(&c, "digest", zk_bytes_of(big, sizeof(big))),
			 ZK_BAD_ARGUMENTS);
	assert_int_equal(f.dial_count, 0);
	assert_int_equal(kc_state(&c), KC_IDLE);
	/* A sequential create may end in '/' (the suffix follows). */
	f.on_dial = fake_hook_accept;
	f.script[0] = FAKE_ACCEPT;
	assert_int_equal(kc_connect(&c), ZK_OK);
	path_stat_reply(f.fds[0], 1, "/q/0000000001", 0);
	assert_int_equal(kc_create(&c, "/q/", ZK_BYTES_NULL, &seq, NULL, NULL), ZK_OK);
	/* A request over the max packet never leaves. */
	uint8_t *huge = calloc(1, KC_DEFAULT_MAX_PACKET + 1);
	assert_non_null(huge);
	assert_int_equal(kc_set(&c, "/q", zk_bytes_of(huge, KC_DEFAULT_MAX_PACKET + 1), -1, NULL),
			 ZK_BAD_ARGUMENTS);
	free(huge);
	assert_int_equal(kc_state(&c), KC_CONNECTED);
	fake_close(&f);
	kc_close(&c);
}

static void test_simple_ops(void **state)
{
	(void)state;
	struct rig r;
	rig_open(&r, true);
	struct zk_request req;

	/* delete */
	fake_reply(r.fd, 1, 7, 0, NULL, 0);
	assert_int_equal(kc_delete(&r.c, "/d", 4), ZK_OK);
	fake_read_request(r.fd, buf, sizeof(buf), &req);
	assert_int_equal(req.opcode, ZK_OP_DELETE);
	assert_int_equal(req.u.delete_.version, 4);
	fake_reply(r.fd, 2, 7, ZK_BAD_VERSION, NULL, 0);
	assert_int_equal(kc_delete(&r.c, "/d", 4), ZK_BAD_VERSION);
	fake_read_request(r.fd, buf, sizeof(buf), &req);

	/* setData */
	stat_reply(r.fd, 3, 6);
	struct zk_stat st;
	assert_int_equal(kc_set(&r.c, "/d", zk_bytes_str("new"), 5, &st), ZK_OK);
	assert_int_equal(st.version, 6);
	fake_read_request(r.fd, buf, sizeof(buf), &req);
	assert_int_equal(req.opcode, ZK_OP_SET_DATA);
	assert_true(zk_bytes_eq_str(req.u.set_data.data, "new"));
	assert_int_equal(req.u.set_data.version, 5);

	/* exists */
	stat_reply(r.fd, 4, 2);
	assert_int_equal(kc_exists(&r.c, "/d", false, &st), ZK_OK);
	assert_int_equal(st.version, 2);
	fake_read_request(r.fd, buf, sizeof(buf), &req);
	assert_int_equal(req.opcode, ZK_OP_EXISTS);
	assert_false(req.u.read.watch);
	assert_int_equal(kc_watch_count(&r.c), 0);

	/* getChildren2 and getChildren (a null vector reads as empty) */
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 4096);
	const char *kids[] = {"b", "a"};
	keel_wbuf_i32(&w, 2);
	struct keel_wbuf tmp;
	keel_wbuf_init_dynamic(&tmp, 64, 4096);
	struct zk_str_vec v = zk_str_vec_build(&tmp, kids, 2);
	keel_wbuf_bytes(&w, v.data, v.size);
	struct zk_stat kst = fake_stat(0);
	kst.num_children = 2;
	zk_write_stat(&w, &kst);
	fake_reply(r.fd, 5, 9, 0, w.data, w.size);
	struct zk_str_vec children;
	assert_int_equal(kc_get_children(&r.c, "/", true, &children, &st), ZK_OK);
	assert_int_equal(children.count, 2);
	assert_int_equal(st.num_children, 2);
	struct zk_str_iter it;
	struct zk_bytes name;
	zk_str_iter_init(&it, children);
	assert_true(zk_str_iter_next(&it, &name));
	assert_true(zk_bytes_eq_str(name, "b"));
	fake_read_request(r.fd, buf, sizeof(buf), &req);
	assert_int_equal(req.opcode, ZK_OP_GET_CHILDREN2);
	assert_true(req.u.read.watch);
	assert_int_equal(kc_watch_count(&r.c), 1);
	uint8_t null_vec[4] = {0xff, 0xff, 0xff, 0xff};
	fake_reply(r.fd, 6, 9, 0, null_vec, 4);
	assert_int_equal(kc_get_children(&r.c, "/e", false, &children, NULL), ZK_OK);
	assert_int_equal(children.count, 0);
	fake_read_request(r.fd, buf, sizeof(buf), &req);
	assert_int_equal(req.opcode, ZK_OP_GET_CHILDREN);

	/* getACL and setACL */
	keel_wbuf_reset(&w);
	keel_wbuf_reset(&tmp);
	struct zk_acl acls[2] = {
		{ZK_PERM_READ, {zk_bytes_str("world"), zk_bytes_str("anyone")}},
		{ZK_PERM_ALL, {zk_bytes_str("digest"), zk_bytes_str("bob:xyz")}},
	};
	struct zk_acl_vec av = zk_acl_vec_build(&tmp, acls, 2);
	zk_write_acl_vec(&w, av);
	zk_write_stat(&w, &kst);
	fake_reply(r.fd, 7, 9, 0, w.data, w.size);
	struct zk_acl_vec got;
	assert_int_equal(kc_get_acl(&r.c, "/d", &got, &st), ZK_OK);
	assert_int_equal(got.count, 2);
	fake_read_request(r.fd, buf, sizeof(buf), &req);
	assert_int_equal(req.opcode, ZK_OP_GET_ACL);
	stat_reply(r.fd, 8, 0);
	assert_int_equal(kc_set_acl(&r.c, "/d", acls, 2, 3, &st), ZK_OK);
	fake_read_request(r.fd, buf, sizeof(buf), &req);
	assert_int_equal(req.opcode, ZK_OP_SET_ACL);
	assert_int_equal(req.u.set_acl.acl.count, 2);
	assert_int_equal(req.u.set_acl.version, 3);

	/* sync */
	keel_wbuf_reset(&w);
	zk_write_bytes(&w, zk_bytes_str("/d"));
	fake_reply(r.fd, 9, 200, 0, w.data, w.size);
	assert_int_equal(kc_sync(&r.c, "/d"), ZK_OK);
	fake_read_request(r.fd, buf, sizeof(buf), &req);
	assert_int_equal(req.opcode, ZK_OP_SYNC);
	assert_true(zk_bytes_eq_str(req.u.path.path, "/d"));
	assert_int_equal(kc_last_zxid(&r.c), 200);
	keel_wbuf_free(&w);
	keel_wbuf_free(&tmp);
	rig_close(&r);
}

static void multi_header(struct keel_wbuf *w, int32_t type, bool done, int32_t err)
{
	keel_wbuf_i32(w, type);
	keel_wbuf_bool(w, done);
	keel_wbuf_i32(w, err);
}

static void test_multi(void **state)
{
	(void)state;
	struct rig r;
	rig_open(&r, true);
	struct zk_multi_op ops[3];
	memset(ops, 0, sizeof(ops));
	ops[0].opcode = ZK_OP_CREATE;
	ops[0].u.create.path = zk_bytes_str("/m");
	ops[0].u.create.data = zk_bytes_str("1");
	ops[0].u.create.acl.count = 0;
	ops[1].opcode = ZK_OP_CHECK;
	ops[1].u.check.path = zk_bytes_str("/m");
	ops[1].u.check.version = 0;
	ops[2].opcode = ZK_OP_DELETE;
	ops[2].u.delete_.path = zk_bytes_str("/gone");
	ops[2].u.delete_.version = -1;

	/* All ok. */
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 4096);
	multi_header(&w, ZK_OP_CREATE, false, 0);
	zk_write_bytes(&w, zk_bytes_str("/m"));
	multi_header(&w, ZK_OP_CHECK, false, 0);
	multi_header(&w, ZK_OP_DELETE, false, 0);
	multi_header(&w, -1, true, -1);
	fake_reply(r.fd, 1, 20, 0, w.data, w.size);
	struct zk_multi_result_iter results;
	struct zk_multi_result res;
	assert_int_equal(kc_multi(&r.c, ops, 3, &results), ZK_OK);
	assert_true(zk_multi_result_next(&results, &res));
	assert_int_equal(res.type, ZK_OP_CREATE);
	assert_true(zk_bytes_eq_str(res.path, "/m"));
	struct zk_request req;
	fake_read_request(r.fd, buf, sizeof(buf), &req);
	assert_int_equal(req.opcode, ZK_OP_MULTI);
	assert_int_equal(req.u.multi.count, 3);

	/* The delete fails: ops before it are rolled back, the call returns
	 * the failing op's error. */
	keel_wbuf_reset(&w);
	multi_header(&w, -1, false, 0);
	keel_wbuf_i32(&w, 0);
	multi_header(&w, -1, false, 0);
	keel_wbuf_i32(&w, 0);
	multi_header(&w, -1, false, ZK_NO_NODE);
	keel_wbuf_i32(&w, ZK_NO_NODE);
	multi_header(&w, -1, true, -1);
	fake_reply(r.fd, 2, 20, 0, w.data, w.size);
	assert_int_equal(kc_multi(&r.c, ops, 3, &results), ZK_NO_NODE);
	int n = 0;
	int32_t errs[3];
	while (zk_multi_result_next(&results, &res)) {
		errs[n++] = res.err;
	}
	assert_int_equal(n, 3);
	assert_int_equal(errs[0], ZK_OK);
	assert_int_equal(errs[2], ZK_NO_NODE);
	fake_read_request(r.fd, buf, sizeof(buf), &req);

	/* Fewer results than ops: a malformed reply. */
	keel_wbuf_reset(&w);
	multi_header(&w, ZK_OP_DELETE, false, 0);
	multi_header(&w, -1, true, -1);
	fake_reply(r.fd, 3, 20, 0, w.data, w.size);
	assert_int_equal(kc_multi(&r.c, ops, 3, &results), ZK_MARSHALLING_ERROR);
	assert_false(zk_multi_result_next(&results, &res));
	keel_wbuf_free(&w);
	rig_close(&r);
}

static void test_call_raw(void **state)
{
	(void)state;
	struct rig r;
	rig_open(&r, true);
	fake_reply(r.fd, 1, 33, 0, "abc", 3);
	struct kc_raw_reply reply;
	assert_int_equal(kc_call_raw(&r.c, 1001, "xyz", 3, &reply), ZK_OK);
	assert_int_equal(reply.zxid, 33);
	assert_int_equal(reply.body_size, 3);
	assert_memory_equal(reply.body, "abc", 3);
	long n = fake_read_frame(r.fd, buf, sizeof(buf));
	assert_int_equal(n, 11);
	assert_int_equal((int32_t)keel_load_be32(buf), 1);
	assert_int_equal((int32_t)keel_load_be32(buf + 4), 1001);
	assert_memory_equal(buf + 8, "xyz", 3);
	/* An error reply (an older server: Unimplemented) comes back as err. */
	fake_reply(r.fd, 2, -1, ZK_UNIMPLEMENTED, NULL, 0);
	assert_int_equal(kc_call_raw(&r.c, 1002, NULL, 0, &reply), ZK_UNIMPLEMENTED);
	assert_int_equal(reply.err, ZK_UNIMPLEMENTED);
	assert_int_equal(reply.body_size, 0);
	rig_close(&r);
}

static void test_event_queue_bound(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = fake_hook_accept;
	struct kc_options o = fake_options(&f, "a:1", true);
	o.max_queued_events = 3;
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(kc_connect(&c), ZK_OK); /* SyncConnected: 1 queued */
	for (int i = 0; i < 4; i++) {
		char path[8];
		snprintf(path, sizeof(path), "/e%d", i);
		fake_event(f.fds[0], ZK_EVENT_NODE_DELETED, path);
	}
	fake_reply(f.fds[0], 1, 1, 0, NULL, 0);
	assert_int_equal(kc_delete(&c, "/x", -1), ZK_OK);
	assert_int_equal(kc_events_dropped(&c), 2);
	struct kc_event ev;
	assert_true(kc_next_event(&c, &ev));
	assert_int_equal(ev.state, ZK_STATE_SYNC_CONNECTED);
	assert_true(kc_next_event(&c, &ev));
	assert_string_equal(ev.path, "/e0");
	assert_int_equal(ev.type, ZK_EVENT_NODE_DELETED);
	assert_true(kc_next_event(&c, &ev));
	assert_string_equal(ev.path, "/e1");
	assert_false(kc_next_event(&c, &ev));
	fake_close(&f);
	kc_close(&c);
}

static void test_persistent_watches(void **state)
{
	(void)state;
	struct rig r;
	rig_open(&r, false);
	uint8_t ok[4] = {0};
	fake_reply(r.fd, 1, 5, 0, ok, 4);
	assert_int_equal(kc_add_watch(&r.c, "/p", ZK_ADD_WATCH_PERSISTENT_RECURSIVE), ZK_OK);
	struct zk_request req;
	fake_read_request(r.fd, buf, sizeof(buf), &req);
	assert_int_equal(req.opcode, ZK_OP_ADD_WATCH);
	assert_int_equal(req.u.add_watch.mode, ZK_ADD_WATCH_PERSISTENT_RECURSIVE);
	assert_int_equal(kc_watch_count(&r.c), 1);
	/* Events do not consume persistent watches. */
	fake_event(r.fd, ZK_EVENT_NODE_DELETED, "/p");
	fake_event(r.fd, ZK_EVENT_NODE_CREATED, "/p/q");
	assert_int_equal(kc_poll(&r.c, 1000), ZK_OK);
	assert_int_equal(r.f.event_count, 3);
	assert_string_equal(r.f.event_paths[2], "/p/q");
	assert_int_equal(kc_watch_count(&r.c), 1);
	/* removeWatches drops it. */
	fake_reply(r.fd, 2, 5, 0, NULL, 0);
	assert_int_equal(kc_remove_watches(&r.c, "/p", ZK_WATCHER_ANY), ZK_OK);
	fake_read_request(r.fd, buf, sizeof(buf), &req);
	assert_int_equal(req.opcode, ZK_OP_REMOVE_WATCHES);
	assert_int_equal(req.u.watches.type, ZK_WATCHER_ANY);
	assert_int_equal(kc_watch_count(&r.c), 0);
	fake_reply(r.fd, 3, 5, ZK_NO_WATCHER, NULL, 0);
	assert_int_equal(kc_remove_watches(&r.c, "/p", ZK_WATCHER_DATA), ZK_NO_WATCHER);
	rig_close(&r);
}

/* The watch table is bounded: a watch past max_watches is refused before
 * it is sent; paths already held can still be watched. */
static void test_watch_table_bound(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = fake_hook_accept;
	struct kc_options o = fake_options(&f, "a:1", true);
	o.max_watches = 2;
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(kc_connect(&c), ZK_OK);
	fake_get_reply(f.fds[0], 1, 1, "x", 0);
	assert_int_equal(kc_get(&c, "/1", true, NULL, NULL), ZK_OK);
	fake_get_reply(f.fds[0], 2, 1, "x", 0);
	assert_int_equal(kc_get(&c, "/2", true, NULL, NULL), ZK_OK);
	assert_int_equal(kc_get(&c, "/3", true, NULL, NULL), ZK_BAD_ARGUMENTS);
	assert_non_null(strstr(kc_message(&c), "watched paths"));
	fake_reply(f.fds[0], 3, 1, ZK_NO_NODE, NULL, 0);
	assert_int_equal(kc_exists(&c, "/1", true, NULL), ZK_NO_NODE);
	assert_int_equal(kc_watch_count(&c), 2);
	fake_close(&f);
	kc_close(&c);
}

/* After a reconnect the held watches go out in setWatches2 packets (a
 * persistent watch is held), each under the chunk size. */
static void hook_restore(struct fake *f, int conn)
{
	fake_connect_response(f->fds[conn], 9000, FAKE_SESSION_ID);
}

static void test_watch_restore_chunked(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = hook_restore;
	struct kc_options o = fake_options(&f, "a:1,b:2", true);
	o.max_packet = 4096; /* chunks of 2 KiB */
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(kc_connect(&c), ZK_OK);
	int fd = f.fds[0];
	const int count = 300;
	char path[64];
	for (int i = 0; i < count; i++) {
		snprintf(path, sizeof(path), "/watched/node-%04d", i);
		if (i % 3 == 0) {
			fake_reply(fd, i + 1, 1000 + i, ZK_NO_NODE, NULL, 0);
			assert_int_equal(kc_exists(&c, path, true, NULL), ZK_NO_NODE);
		} else if (i % 3 == 1) {
			fake_get_reply(fd, i + 1, 1000 + i, "x", 0);
			assert_int_equal(kc_get(&c, path, true, NULL, NULL), ZK_OK);
		} else {
			uint8_t none[4] = {0};
			fake_reply(fd, i + 1, 1000 + i, 0, none, 4);
			assert_int_equal(kc_get_children(&c, path, true, NULL, NULL), ZK_OK);
		}
		fake_drain(fd);
	}
	uint8_t ok[4] = {0};
	fake_reply(fd, count + 1, 2000, 0, ok, 4);
	assert_int_equal(kc_add_watch(&c, "/watched", ZK_ADD_WATCH_PERSISTENT), ZK_OK);
	fake_drain(fd);
	assert_int_equal(kc_watch_count(&c), count + 1);

	/* The server goes away; kc_poll reconnects and re-sets everything. */
	shutdown(fd, SHUT_WR);
	assert_int_equal(kc_poll(&c, 100), ZK_CONNECTION_LOSS); /* noticed */
	assert_int_equal(kc_poll(&c, 100), ZK_OK);              /* reconnected */
	assert_int_equal(f.conn_count, 2);
	int fd2 = f.fds[1];
	struct zk_connect_request creq;
	fake_read_connect(fd2, buf, sizeof(buf), &creq);
	assert_int_equal(creq.last_zxid_seen, 2000);
	int lists[ZK_SW_LIST_COUNT] = {0};
	int packets = 0;
	while (!fake_quiet(fd2)) {
		long n = fake_read_frame(fd2, buf, sizeof(buf));
		assert_true(n > 0 && n <= 2048 + 64);
		struct zk_request req;
		assert_int_equal(zk_request_decode(&req, buf, (size_t)n), KEEL_OK);
		assert_int_equal(req.xid, ZK_XID_SET_WATCHES);
		assert_int_equal(req.u.set_watches.relative_zxid, 2000);
		for (int l = 0; l < ZK_SW_LIST_COUNT; l++) {
			lists[l] += req.u.set_watches.lists[l].count;
		}
		packets++;
	}
	assert_true(packets >= 3);
	assert_int_equal(lists[ZK_SW_EXIST], 100);
	assert_int_equal(lists[ZK_SW_DATA], 100);
	assert_int_equal(lists[ZK_SW_CHILD], 100);
	assert_int_equal(lists[ZK_SW_PERSISTENT], 1);
	assert_int_equal(lists[ZK_SW_PERSISTENT_RECURSIVE], 0);
	fake_close(&f);
	kc_close(&c);
}

/* Frames pushed with an unused negative xid reach on_push in stream
 * order with events; without a handler they drop the connection. */
struct pushes {
	int count;
	int32_t xids[4];
	char bodies[4][16];
	int events_before[4];
	struct fake *f;
};

static void on_push(void *ctx, int32_t xid, int64_t zxid, int32_t err, const uint8_t *body,
		    size_t size)
{
	struct pushes *p = ctx;
	assert_int_equal(zxid, 77);
	assert_int_equal(err, 0);
	assert_true(p->count < 4 && size < 16);
	p->xids[p->count] = xid;
	memcpy(p->bodies[p->count], body, size);
	p->bodies[p->count][size] = '\0';
	p->events_before[p->count] = p->f->event_count;
	p->count++;
}

static void test_pushed_frames(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = fake_hook_accept;
	struct pushes pushes = {.f = &f};
	struct kc_options o = fake_options(&f, "a:1", false);
	o.on_push = on_push;
	o.push_ctx = &pushes;
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(kc_connect(&c), ZK_OK);
	fake_reply(f.fds[0], -1000, 77, 0, "rec-1", 5);
	fake_event(f.fds[0], ZK_EVENT_NODE_CREATED, "/x");
	fake_reply(f.fds[0], -1000, 77, 0, "rec-2", 5);
	fake_reply(f.fds[0], 1, 77, 0, NULL, 0);
	assert_int_equal(kc_delete(&c, "/d", -1), ZK_OK);
	assert_int_equal(pushes.count, 2);
	assert_int_equal(pushes.xids[0], -1000);
	assert_string_equal(pushes.bodies[0], "rec-1");
	assert_string_equal(pushes.bodies[1], "rec-2");
	assert_int_equal(pushes.events_before[0], 1); /* after SyncConnected */
	assert_int_equal(pushes.events_before[1], 2); /* after the event */
	fake_close(&f);
	kc_close(&c);

	/* No handler: a protocol error. */
	fake_init(&f);
	f.on_dial = fake_hook_accept;
	for (int i = 1; i < FAKE_MAX_CONNS; i++) {
		f.script[i] = FAKE_REFUSE;
	}
	o = fake_options(&f, "a:1", true);
	o.call_timeout_ms = 500;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(kc_connect(&c), ZK_OK);
	fake_reply(f.fds[0], -1000, 77, 0, "rec-1", 5);
	assert_int_equal(kc_poll(&c, 1000), ZK_CONNECTION_LOSS);
	assert_non_null(strstr(kc_message(&c), "unknown xid -1000"));
	fake_close(&f);
	kc_close(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_modes),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_simple_ops),
		cmocka_unit_test(test_multi),
		cmocka_unit_test(test_call_raw),
		cmocka_unit_test(test_event_queue_bound),
		cmocka_unit_test(test_persistent_watches),
		cmocka_unit_test(test_watch_table_bound),
		cmocka_unit_test(test_watch_restore_chunked),
		cmocka_unit_test(test_pushed_frames),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
