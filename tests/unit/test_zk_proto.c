/*
 * Unit tests: the ZooKeeper jute codec (zk_jute.h, zk_proto.h, zk_txn.h).
 *
 * Round trips for every request body, the handshake in its 3.8 and 3.9
 * forms, headers, Stat, ACL and string vectors, multi requests and results,
 * responses and notifications; bounds checks on short, negative and
 * oversized input; and every frame that kazoo and zkCli.sh sent to (and
 * received from) Apache ZooKeeper 3.8, captured through a proxy into
 * tests/unit/data/zk/captured_frames.bin.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "zk/zk_proto.h"
#include "zk/zk_txn.h"

static struct zk_bytes B(const char *s)
{
	return zk_bytes_str(s);
}

static void assert_bytes(struct zk_bytes got, struct zk_bytes want)
{
	assert_true(zk_bytes_eq(got, want));
}

/* ---- framing ---- */

static void test_frame_check(void **state)
{
	(void)state;
	uint8_t buf[16] = {0, 0, 0, 5, 1, 2, 3, 4, 5, 9};
	uint32_t n;
	assert_int_equal(zk_frame_check(buf, 3, 100, &n), ZK_FRAME_NEED_MORE);
	assert_int_equal(n, 0);
	assert_int_equal(zk_frame_check(buf, 8, 100, &n), ZK_FRAME_NEED_MORE);
	assert_int_equal(n, 5);
	assert_int_equal(zk_frame_check(buf, 9, 100, &n), ZK_FRAME_READY);
	assert_int_equal(n, 5);
	assert_int_equal(zk_frame_check(buf, 10, 4, &n), ZK_FRAME_TOO_BIG);
	uint8_t neg[4] = {0xff, 0xff, 0xff, 0xfe};
	assert_int_equal(zk_frame_check(neg, 4, 100, &n), ZK_FRAME_NEGATIVE);
	/* The default limit is jute.maxbuffer. */
	uint8_t big[4] = {0x00, 0x10, 0x00, 0x00};
	assert_int_equal(zk_frame_check(big, 4, ZK_DEFAULT_MAX_PACKET, &n), ZK_FRAME_TOO_BIG);
	big[1] = 0x0f;
	big[2] = 0xff;
	big[3] = 0xff;
	assert_int_equal(zk_frame_check(big, 4, ZK_DEFAULT_MAX_PACKET, &n), ZK_FRAME_NEED_MORE);

	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 1024);
	size_t start = zk_frame_begin(&w);
	keel_wbuf_bytes(&w, "abc", 3);
	zk_frame_end(&w, start);
	assert_int_equal(w.size, 7);
	assert_int_equal(keel_load_be32(w.data), 3);
	keel_wbuf_free(&w);
}

/* ---- handshake ---- */

static void test_connect_request_forms(void **state)
{
	(void)state;
	uint8_t pw[16];
	memset(pw, 0xab, sizeof(pw));
	struct zk_connect_request req = {0, 0x1234, 30000, 0x55, zk_bytes_of(pw, 16), true, true};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 1024);
	zk_connect_request_encode(&w, &req);
	assert_int_equal(w.size, 45); /* 3.8 client with readOnly, 3.9 client */
	struct zk_connect_request got;
	assert_int_equal(zk_connect_request_decode(&got, w.data, w.size), KEEL_OK);
	assert_int_equal(got.last_zxid_seen, 0x1234);
	assert_int_equal(got.timeout_ms, 30000);
	assert_int_equal(got.session_id, 0x55);
	assert_bytes(got.passwd, zk_bytes_of(pw, 16));
	assert_true(got.has_read_only);
	assert_true(got.read_only);

	/* Old form: no trailing byte. */
	assert_int_equal(zk_connect_request_decode(&got, w.data, 44), KEEL_OK);
	assert_false(got.has_read_only);
	assert_false(got.read_only);
	/* Short fixed part. */
	assert_int_equal(zk_connect_request_decode(&got, w.data, 43), KEEL_PROTO);
	assert_int_equal(zk_connect_request_decode(&got, w.data, 10), KEEL_PROTO);
	/* A negative password length other than -1 is malformed. */
	w.data[27] = 0xfe;
	w.data[24] = w.data[25] = w.data[26] = 0xff;
	assert_int_equal(zk_connect_request_decode(&got, w.data, w.size), KEEL_PROTO);
	keel_wbuf_free(&w);
}

static void test_connect_response(void **state)
{
	(void)state;
	uint8_t pw[16] = {1, 2, 3};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 1024);
	for (int ro = 0; ro < 2; ro++) {
		keel_wbuf_reset(&w);
		struct zk_connect_response rsp = {0, 4000, 77, zk_bytes_of(pw, 16), false, ro == 1};
		zk_connect_response_encode(&w, &rsp);
		assert_int_equal(w.size, ro ? 37 : 36);
		struct zk_connect_response got;
		assert_int_equal(zk_connect_response_decode(&got, w.data, w.size), KEEL_OK);
		assert_int_equal(got.timeout_ms, 4000);
		assert_int_equal(got.session_id, 77);
		assert_int_equal(got.has_read_only, ro == 1);
		assert_bytes(got.passwd, zk_bytes_of(pw, 16));
	}
	keel_wbuf_free(&w);
}

/* ---- primitives ---- */

static void test_bytes_and_counts(void **state)
{
	(void)state;
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 1024);
	zk_write_bytes(&w, ZK_BYTES_NULL);
	zk_write_bytes(&w, B(""));
	zk_write_bytes(&w, B("xyz"));
	struct keel_rbuf r;
	keel_rbuf_init(&r, w.data, w.size);
	assert_true(zk_bytes_is_null(zk_read_bytes(&r)));
	struct zk_bytes e = zk_read_bytes(&r);
	assert_false(zk_bytes_is_null(e));
	assert_int_equal(e.size, 0);
	assert_bytes(zk_read_bytes(&r), B("xyz"));
	assert_true(keel_rbuf_done(&r));

	/* A length past the end fails; so does -2. */
	uint8_t bad[8] = {0, 0, 0, 9, 'a', 'b', 'c', 'd'};
	keel_rbuf_init(&r, bad, sizeof(bad));
	(void)zk_read_bytes(&r);
	assert_false(keel_rbuf_ok(&r));
	uint8_t m2[4] = {0xff, 0xff, 0xff, 0xfe};
	keel_rbuf_init(&r, m2, sizeof(m2));
	(void)zk_read_bytes(&r);
	assert_false(keel_rbuf_ok(&r));

	/* A vector count that cannot fit fails before anything is walked. */
	uint8_t huge[8] = {0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0};
	keel_rbuf_init(&r, huge, sizeof(huge));
	assert_int_equal(zk_read_count(&r, 4), -1);
	assert_false(keel_rbuf_ok(&r));
	uint8_t two[12] = {0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0};
	keel_rbuf_init(&r, two, sizeof(two));
	assert_int_equal(zk_read_count(&r, 4), 2);
	keel_wbuf_free(&w);
}

static void test_stat_roundtrip(void **state)
{
	(void)state;
	struct zk_stat s = {1, 2, 3, 4, -5, 6, -7, (int64_t)0x8000000000000000ull, 9, 10, 11};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 1024);
	zk_write_stat(&w, &s);
	assert_int_equal(w.size, ZK_STAT_SIZE);
	struct keel_rbuf r;
	keel_rbuf_init(&r, w.data, w.size);
	struct zk_stat got;
	zk_read_stat(&r, &got);
	assert_true(keel_rbuf_done(&r));
	assert_true(zk_stat_eq(&s, &got));
	got.pzxid++;
	assert_false(zk_stat_eq(&s, &got));
	keel_wbuf_free(&w);
}

static void test_acl_and_string_vectors(void **state)
{
	(void)state;
	struct zk_acl acls[3] = {
		{31, {B("world"), B("anyone")}},
		{1, {B("digest"), B("u:abc=")}},
		{4, {B("ip"), ZK_BYTES_NULL}},
	};
	struct keel_wbuf w, elems;
	keel_wbuf_init_dynamic(&w, 0, 1024);
	keel_wbuf_init_dynamic(&elems, 0, 1024);
	struct zk_acl_vec v = zk_acl_vec_build(&elems, acls, 3);
	zk_write_acl_vec(&w, v);
	struct zk_acl_vec nul = {-1, NULL, 0};
	zk_write_acl_vec(&w, nul);
	struct keel_rbuf r;
	keel_rbuf_init(&r, w.data, w.size);
	struct zk_acl_vec got = zk_read_acl_vec(&r);
	struct zk_acl_vec got_null = zk_read_acl_vec(&r);
	assert_true(keel_rbuf_done(&r));
	assert_int_equal(got.count, 3);
	assert_int_equal(got_null.count, -1);
	struct zk_acl_iter it;
	struct zk_acl a;
	zk_acl_iter_init(&it, got);
	for (int i = 0; i < 3; i++) {
		assert_true(zk_acl_iter_next(&it, &a));
		assert_int_equal(a.perms, acls[i].perms);
		assert_bytes(a.id.scheme, acls[i].id.scheme);
		assert_bytes(a.id.id, acls[i].id.id);
	}
	assert_false(zk_acl_iter_next(&it, &a));

	const char *strs[] = {"a", "", "ccc"};
	keel_wbuf_reset(&w);
	keel_wbuf_reset(&elems);
	zk_write_str_vec(&w, zk_str_vec_build(&elems, strs, 3));
	keel_rbuf_init(&r, w.data, w.size);
	struct zk_str_vec sv = zk_read_str_vec(&r);
	assert_int_equal(sv.count, 3);
	struct zk_str_iter si;
	struct zk_bytes s;
	zk_str_iter_init(&si, sv);
	for (int i = 0; i < 3; i++) {
		assert_true(zk_str_iter_next(&si, &s));
		assert_bytes(s, B(strs[i]));
	}
	assert_false(zk_str_iter_next(&si, &s));
	/* Truncated element: the vector fails as a whole. */
	keel_rbuf_init(&r, w.data, w.size - 1);
	sv = zk_read_str_vec(&r);
	assert_false(keel_rbuf_ok(&r));
	assert_int_equal(sv.count, -1);
	keel_wbuf_free(&w);
	keel_wbuf_free(&elems);
}

/* ---- requests ---- */

/* Encodes req, decodes it, re-encodes the decoded form: same bytes. */
static void roundtrip(const struct zk_request *req, struct zk_request *got)
{
	struct keel_wbuf w, w2;
	keel_wbuf_init_dynamic(&w, 0, 1 << 16);
	keel_wbuf_init_dynamic(&w2, 0, 1 << 16);
	zk_request_encode(&w, req);
	assert_true(keel_wbuf_ok(&w));
	static uint8_t copy[1 << 16];
	memcpy(copy, w.data, w.size);
	assert_int_equal(zk_request_decode(got, copy, w.size), KEEL_OK);
	assert_int_equal(got->xid, req->xid);
	assert_int_equal(got->opcode, req->opcode);
	assert_int_equal(got->body_size, w.size - 8);
	zk_request_encode(&w2, got);
	assert_int_equal(w2.size, w.size);
	assert_memory_equal(w2.data, w.data, w.size);
	/* Every strict prefix of a body with fields fails to decode. */
	if (w.size > 8 && req->opcode != ZK_OP_DELETE_CONTAINER) {
		struct zk_request tmp;
		assert_int_equal(zk_request_decode(&tmp, copy, w.size - 1), KEEL_PROTO);
	}
	keel_wbuf_free(&w);
	keel_wbuf_free(&w2);
}

static void test_request_roundtrip_all_ops(void **state)
{
	(void)state;
	static struct keel_wbuf elems;
	keel_wbuf_init_dynamic(&elems, 0, 4096);
	struct zk_acl acl = {31, {B("world"), B("anyone")}};
	struct zk_acl_vec acls = zk_acl_vec_build(&elems, &acl, 1);
	struct zk_request req, got;

	int32_t creates[] = {ZK_OP_CREATE, ZK_OP_CREATE2, ZK_OP_CREATE_CONTAINER, ZK_OP_CREATE_TTL};
	for (size_t i = 0; i < 4; i++) {
		memset(&req, 0, sizeof(req));
		req.xid = 7;
		req.opcode = creates[i];
		req.u.create = (struct zk_create_request){B("/a/b"), B("data"), acls, 3,
							  creates[i] == ZK_OP_CREATE_TTL ? 5000 : -1};
		roundtrip(&req, &got);
		assert_bytes(got.u.create.path, B("/a/b"));
		assert_bytes(got.u.create.data, B("data"));
		assert_int_equal(got.u.create.acl.count, 1);
		assert_int_equal(got.u.create.flags, 3);
		assert_int_equal(got.u.create.ttl_ms, creates[i] == ZK_OP_CREATE_TTL ? 5000 : -1);
	}
	/* Null data and a null ACL vector decode as null. */
	req.opcode = ZK_OP_CREATE;
	req.u.create.data = ZK_BYTES_NULL;
	req.u.create.acl.count = -1;
	roundtrip(&req, &got);
	assert_true(zk_bytes_is_null(got.u.create.data));
	assert_int_equal(got.u.create.acl.count, -1);

	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_DELETE;
	req.u.delete_ = (struct zk_delete_request){B("/x"), 4};
	roundtrip(&req, &got);
	assert_int_equal(got.u.delete_.version, 4);

	int32_t reads[] = {ZK_OP_EXISTS, ZK_OP_GET_DATA, ZK_OP_GET_CHILDREN, ZK_OP_GET_CHILDREN2};
	for (size_t i = 0; i < 4; i++) {
		memset(&req, 0, sizeof(req));
		req.opcode = reads[i];
		req.u.read = (struct zk_path_watch_request){B("/r"), true};
		roundtrip(&req, &got);
		assert_true(got.u.read.watch);
		assert_bytes(got.u.read.path, B("/r"));
	}

	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_SET_DATA;
	req.u.set_data = (struct zk_set_data_request){B("/s"), B("v"), -1};
	roundtrip(&req, &got);
	assert_int_equal(got.u.set_data.version, -1);

	int32_t paths[] = {ZK_OP_GET_ACL, ZK_OP_SYNC, ZK_OP_GET_ALL_CHILDREN_NUMBER,
			   ZK_OP_GET_EPHEMERALS, ZK_OP_DELETE_CONTAINER};
	for (size_t i = 0; i < 5; i++) {
		memset(&req, 0, sizeof(req));
		req.opcode = paths[i];
		req.u.path.path = B("/p");
		roundtrip(&req, &got);
		assert_bytes(got.u.path.path, B("/p"));
	}

	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_SET_ACL;
	req.u.set_acl = (struct zk_set_acl_request){B("/s"), acls, 2};
	roundtrip(&req, &got);
	assert_int_equal(got.u.set_acl.version, 2);
	assert_int_equal(got.u.set_acl.acl.count, 1);

	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_CHECK;
	req.u.check = (struct zk_check_request){B("/c"), 9};
	roundtrip(&req, &got);
	assert_int_equal(got.u.check.version, 9);

	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_RECONFIG;
	req.u.reconfig = (struct zk_reconfig_request){ZK_BYTES_NULL, B("2"), B("server.1=x"), -1};
	roundtrip(&req, &got);
	assert_true(zk_bytes_is_null(got.u.reconfig.joining_servers));
	assert_int_equal(got.u.reconfig.cur_config_id, -1);

	int32_t watches[] = {ZK_OP_CHECK_WATCHES, ZK_OP_REMOVE_WATCHES};
	for (size_t i = 0; i < 2; i++) {
		memset(&req, 0, sizeof(req));
		req.opcode = watches[i];
		req.u.watches = (struct zk_watches_request){B("/w"), ZK_WATCHER_ANY};
		roundtrip(&req, &got);
		assert_int_equal(got.u.watches.type, ZK_WATCHER_ANY);
	}

	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_AUTH;
	req.xid = ZK_XID_AUTH;
	req.u.auth = (struct zk_auth_request){0, B("digest"), B("u:p")};
	roundtrip(&req, &got);
	assert_bytes(got.u.auth.auth, B("u:p"));

	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_ADD_WATCH;
	req.u.add_watch = (struct zk_add_watch_request){B("/aw"), 1};
	roundtrip(&req, &got);
	assert_int_equal(got.u.add_watch.mode, 1);

	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_SASL;
	req.u.sasl.token = B("tok");
	roundtrip(&req, &got);

	int32_t empty[] = {ZK_OP_PING, ZK_OP_WHO_AM_I, ZK_OP_CLOSE_SESSION};
	for (size_t i = 0; i < 3; i++) {
		memset(&req, 0, sizeof(req));
		req.opcode = empty[i];
		roundtrip(&req, &got);
		assert_int_equal(got.body_size, 0);
	}
	keel_wbuf_free(&elems);
}

static void test_set_watches_both_forms(void **state)
{
	(void)state;
	struct keel_wbuf e[5];
	const char *lists[5][2] = {{"/d1", "/d2"}, {"/e"}, {"/c"}, {"/p"}, {"/r1", "/r2"}};
	size_t sizes[5] = {2, 1, 1, 1, 2};
	struct zk_request req, got;
	memset(&req, 0, sizeof(req));
	req.xid = ZK_XID_SET_WATCHES;
	req.u.set_watches.relative_zxid = 0x77;
	for (int i = 0; i < 5; i++) {
		keel_wbuf_init_dynamic(&e[i], 0, 1024);
		req.u.set_watches.lists[i] = zk_str_vec_build(&e[i], lists[i], sizes[i]);
	}
	req.opcode = ZK_OP_SET_WATCHES2;
	roundtrip(&req, &got);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(got.u.set_watches.lists[i].count, (int)sizes[i]);
	}
	assert_int_equal(got.u.set_watches.relative_zxid, 0x77);
	/* setWatches has only the first three lists; the others read empty. */
	req.opcode = ZK_OP_SET_WATCHES;
	roundtrip(&req, &got);
	assert_int_equal(got.u.set_watches.lists[ZK_SW_DATA].count, 2);
	assert_int_equal(got.u.set_watches.lists[ZK_SW_PERSISTENT].count, 0);
	assert_int_equal(got.u.set_watches.lists[ZK_SW_PERSISTENT_RECURSIVE].count, 0);
	for (int i = 0; i < 5; i++) {
		keel_wbuf_free(&e[i]);
	}
}

static void test_request_errors(void **state)
{
	(void)state;
	struct zk_request req;
	uint8_t short_hdr[7] = {0};
	assert_int_equal(zk_request_decode(&req, short_hdr, sizeof(short_hdr)), KEEL_SHORT);
	/* Unknown opcodes: distinct result, xid and opcode still reported. */
	uint8_t unknown[8] = {0, 0, 0, 5, 0, 0, 0, 77};
	assert_int_equal(zk_request_decode(&req, unknown, 8), KEEL_UNSUPPORTED);
	assert_int_equal(req.xid, 5);
	assert_int_equal(req.opcode, 77);
	uint8_t ten[8] = {0, 0, 0, 5, 0, 0, 0, 10};
	assert_int_equal(zk_request_decode(&req, ten, 8), KEEL_UNSUPPORTED);
	uint8_t del_container_internal[8] = {0, 0, 0, 5, 0xff, 0xff, 0xff, 0xf6};
	assert_int_equal(zk_request_decode(&req, del_container_internal, 8), KEEL_UNSUPPORTED);
	/* getData with a huge path length. */
	uint8_t huge[13] = {0, 0, 0, 1, 0, 0, 0, 4, 0x7f, 0xff, 0xff, 0xff, 0};
	assert_int_equal(zk_request_decode(&req, huge, sizeof(huge)), KEEL_PROTO);
	/* Trailing bytes are ignored, as ZooKeeper's reader does. */
	uint8_t trailing[] = {0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 1, '/', 0, 'x', 'y'};
	assert_int_equal(zk_request_decode(&req, trailing, sizeof(trailing)), KEEL_OK);
	assert_bytes(req.u.read.path, B("/"));
	/* A watch byte other than 0/1 is read as true, like Java. */
	trailing[13] = 7;
	assert_int_equal(zk_request_decode(&req, trailing, sizeof(trailing)), KEEL_OK);
	assert_true(req.u.read.watch);
}

/* ---- multi ---- */

static void test_multi_roundtrip(void **state)
{
	(void)state;
	struct keel_wbuf elems, w;
	keel_wbuf_init_dynamic(&elems, 0, 1024);
	keel_wbuf_init_dynamic(&w, 0, 4096);
	struct zk_acl acl = {31, {B("world"), B("anyone")}};
	struct zk_acl_vec acls = zk_acl_vec_build(&elems, &acl, 1);
	struct zk_multi_op ops[6];
	memset(ops, 0, sizeof(ops));
	ops[0].opcode = ZK_OP_CREATE;
	ops[0].u.create = (struct zk_create_request){B("/m/a"), B("1"), acls, 0, -1};
	ops[1].opcode = ZK_OP_CREATE_TTL;
	ops[1].u.create = (struct zk_create_request){B("/m/t"), B(""), acls, 5, 100};
	ops[2].opcode = ZK_OP_SET_DATA;
	ops[2].u.set_data = (struct zk_set_data_request){B("/m/a"), B("2"), 0};
	ops[3].opcode = ZK_OP_CHECK;
	ops[3].u.check = (struct zk_check_request){B("/m/a"), 1};
	ops[4].opcode = ZK_OP_DELETE;
	ops[4].u.delete_ = (struct zk_delete_request){B("/m/a"), -1};
	ops[5].opcode = ZK_OP_CREATE2;
	ops[5].u.create = (struct zk_create_request){B("/m/c"), ZK_BYTES_NULL, acls, 4, -1};
	keel_wbuf_i32(&w, 3);
	keel_wbuf_i32(&w, ZK_OP_MULTI);
	zk_multi_encode(&w, ops, 6);
	struct zk_request req;
	assert_int_equal(zk_request_decode(&req, w.data, w.size), KEEL_OK);
	assert_int_equal(req.u.multi.count, 6);
	struct zk_multi_iter it;
	struct zk_multi_op op;
	zk_multi_iter_init(&it, &req.u.multi);
	for (int i = 0; i < 6; i++) {
		assert_true(zk_multi_iter_next(&it, &op));
		assert_int_equal(op.opcode, ops[i].opcode);
	}
	assert_false(zk_multi_iter_next(&it, &op));
	/* Re-encoding the decoded request gives the same bytes. */
	struct keel_wbuf w2;
	keel_wbuf_init_dynamic(&w2, 0, 4096);
	zk_request_encode(&w2, &req);
	assert_int_equal(w2.size, w.size);
	assert_memory_equal(w2.data, w.data, w.size);
	/* Truncated before the terminator: malformed. */
	assert_int_equal(zk_request_decode(&req, w.data, w.size - 1), KEEL_PROTO);
	/* The same write ops in a multiRead are malformed (MarshallingError). */
	keel_store_be32(w.data + 4, ZK_OP_MULTI_READ);
	assert_int_equal(zk_request_decode(&req, w.data, w.size), KEEL_PROTO);

	/* A read op in a multi is malformed; in a multiRead fine. */
	struct zk_multi_op rd[2];
	memset(rd, 0, sizeof(rd));
	rd[0].opcode = ZK_OP_GET_DATA;
	rd[0].u.read = (struct zk_path_watch_request){B("/m"), true};
	rd[1].opcode = ZK_OP_GET_CHILDREN;
	rd[1].u.read = (struct zk_path_watch_request){B("/m"), false};
	keel_wbuf_reset(&w);
	keel_wbuf_i32(&w, 4);
	keel_wbuf_i32(&w, ZK_OP_MULTI_READ);
	zk_multi_encode(&w, rd, 2);
	assert_int_equal(zk_request_decode(&req, w.data, w.size), KEEL_OK);
	zk_multi_iter_init(&it, &req.u.multi);
	assert_true(zk_multi_iter_next(&it, &op));
	assert_false(op.u.read.watch); /* multiRead never watches */
	keel_store_be32(w.data + 4, ZK_OP_MULTI);
	assert_int_equal(zk_request_decode(&req, w.data, w.size), KEEL_PROTO);

	/* An unknown op type inside: malformed. Empty multi: fine. */
	struct zk_multi_op bad = {.opcode = 77};
	keel_wbuf_reset(&w);
	keel_wbuf_i32(&w, 4);
	keel_wbuf_i32(&w, ZK_OP_MULTI);
	zk_multi_encode(&w, &bad, 1);
	assert_int_equal(zk_request_decode(&req, w.data, w.size), KEEL_PROTO);
	keel_wbuf_reset(&w);
	keel_wbuf_i32(&w, 4);
	keel_wbuf_i32(&w, ZK_OP_MULTI);
	zk_multi_encode(&w, NULL, 0);
	assert_int_equal(zk_request_decode(&req, w.data, w.size), KEEL_OK);
	assert_int_equal(req.u.multi.count, 0);
	keel_wbuf_free(&w);
	keel_wbuf_free(&w2);
	keel_wbuf_free(&elems);
}

static void test_multi_results(void **state)
{
	(void)state;
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 4096);
	struct zk_stat st = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
	zk_multi_result_header(&w, ZK_OP_CREATE, 0);
	zk_write_bytes(&w, B("/a"));
	zk_multi_result_header(&w, ZK_OP_CREATE2, 0);
	zk_write_bytes(&w, B("/b"));
	zk_write_stat(&w, &st);
	zk_multi_result_header(&w, ZK_OP_DELETE, 0);
	zk_multi_result_header(&w, ZK_OP_SET_DATA, 0);
	zk_write_stat(&w, &st);
	zk_multi_result_header(&w, ZK_OP_CHECK, 0);
	zk_multi_result_error(&w, ZK_NO_NODE);
	zk_multi_result_end(&w);
	struct zk_response rsp;
	assert_int_equal(zk_response_decode(&rsp, ZK_OP_MULTI, w.data, w.size), KEEL_OK);
	struct zk_multi_result_iter it;
	struct zk_multi_result r;
	zk_multi_result_iter_init(&it, rsp.multi, rsp.multi_size);
	int32_t types[] = {ZK_OP_CREATE, ZK_OP_CREATE2, ZK_OP_DELETE, ZK_OP_SET_DATA, ZK_OP_CHECK,
			   ZK_OP_ERROR};
	for (int i = 0; i < 6; i++) {
		assert_true(zk_multi_result_next(&it, &r));
		assert_int_equal(r.type, types[i]);
	}
	assert_int_equal(r.err, ZK_NO_NODE);
	assert_false(zk_multi_result_next(&it, &r));
	assert_false(it.failed);
	zk_multi_result_iter_init(&it, w.data, w.size - 3);
	while (zk_multi_result_next(&it, &r)) {
	}
	assert_true(it.failed);
	keel_wbuf_free(&w);
}

/* ---- responses, events ---- */

static void test_responses(void **state)
{
	(void)state;
	struct keel_wbuf w, e;
	keel_wbuf_init_dynamic(&w, 0, 4096);
	keel_wbuf_init_dynamic(&e, 0, 4096);
	struct zk_stat st = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
	struct zk_response rsp;

	zk_write_bytes(&w, B("/x"));
	zk_write_stat(&w, &st);
	assert_int_equal(zk_response_decode(&rsp, ZK_OP_CREATE2, w.data, w.size), KEEL_OK);
	assert_bytes(rsp.path, B("/x"));
	assert_true(zk_stat_eq(&rsp.stat, &st));
	assert_int_equal(zk_response_decode(&rsp, ZK_OP_CREATE2, w.data, w.size - 1), KEEL_PROTO);

	keel_wbuf_reset(&w);
	zk_write_bytes(&w, ZK_BYTES_NULL);
	zk_write_stat(&w, &st);
	assert_int_equal(zk_response_decode(&rsp, ZK_OP_GET_DATA, w.data, w.size), KEEL_OK);
	assert_true(zk_bytes_is_null(rsp.data));

	const char *kids[] = {"a", "b"};
	keel_wbuf_reset(&w);
	zk_write_str_vec(&w, zk_str_vec_build(&e, kids, 2));
	zk_write_stat(&w, &st);
	assert_int_equal(zk_response_decode(&rsp, ZK_OP_GET_CHILDREN2, w.data, w.size), KEEL_OK);
	assert_int_equal(rsp.strings.count, 2);

	struct zk_client_info infos[2] = {{B("ip"), B("127.0.0.1")}, {B("digest"), B("bob")}};
	keel_wbuf_reset(&w);
	zk_who_am_i_encode(&w, infos, 2);
	assert_int_equal(zk_response_decode(&rsp, ZK_OP_WHO_AM_I, w.data, w.size), KEEL_OK);
	assert_int_equal(rsp.strings.count, 4);
	struct zk_str_iter it;
	struct zk_bytes s;
	zk_str_iter_init(&it, rsp.strings);
	assert_true(zk_str_iter_next(&it, &s));
	assert_bytes(s, B("ip"));

	keel_wbuf_reset(&w);
	keel_wbuf_i32(&w, 13);
	assert_int_equal(zk_response_decode(&rsp, ZK_OP_GET_ALL_CHILDREN_NUMBER, w.data, w.size),
			 KEEL_OK);
	assert_int_equal(rsp.number, 13);

	/* Notification frame: ReplyHeader{-1, zxid, 0} + WatcherEvent. */
	keel_wbuf_reset(&w);
	zk_notification_encode(&w, -1, ZK_EVENT_NODE_CREATED, ZK_STATE_SYNC_CONNECTED, B("/n"));
	assert_int_equal(keel_load_be32(w.data), w.size - 4);
	struct keel_rbuf r;
	keel_rbuf_init(&r, w.data + 4, w.size - 4);
	struct zk_reply_header h;
	assert_int_equal(zk_reply_header_decode(&h, &r), KEEL_OK);
	assert_int_equal(h.xid, -1);
	assert_int_equal(h.zxid, -1);
	struct zk_watcher_event ev;
	assert_int_equal(zk_watcher_event_decode(&ev, &r), KEEL_OK);
	assert_int_equal(ev.type, ZK_EVENT_NODE_CREATED);
	assert_int_equal(ev.state, ZK_STATE_SYNC_CONNECTED);
	assert_bytes(ev.path, B("/n"));
	assert_true(keel_rbuf_done(&r));
	keel_wbuf_free(&w);
	keel_wbuf_free(&e);
}

/* ---- txns ---- */

static void test_txn_roundtrip(void **state)
{
	(void)state;
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 4096);
	struct zk_ids ids;
	zk_ids_init(&ids);
	assert_int_equal(zk_ids_add(&ids, B("ip"), B("10.0.0.1")), KEEL_OK);
	assert_int_equal(zk_ids_add(&ids, B("digest"), B("u:h")), KEEL_OK);
	struct zk_txn_meta meta = {1700000000000, 0xfeed, 42, 0x1234};
	uint8_t body[3] = {1, 2, 3};
	zk_txn_encode_request(&w, &meta, &ids, ZK_OP_SET_DATA, body, 3);
	struct zk_txn t;
	assert_int_equal(zk_txn_decode(&t, w.data, w.size), KEEL_OK);
	assert_int_equal(t.kind, ZK_TXN_REQUEST);
	assert_int_equal(t.meta.time_ms, 1700000000000);
	assert_int_equal(t.meta.origin, 0xfeed);
	assert_int_equal(t.meta.xid, 42);
	assert_int_equal(t.meta.session_id, 0x1234);
	assert_int_equal(t.ids.count, 2);
	assert_bytes(t.ids.ids[1].id, B("u:h"));
	assert_int_equal(t.opcode, ZK_OP_SET_DATA);
	assert_int_equal(t.body_size, 3);
	assert_memory_equal(t.body, body, 3);
	for (size_t n = 0; n < w.size - 3; n++) {
		assert_int_not_equal(zk_txn_decode(&t, w.data, n), KEEL_OK);
	}
	/* The leader re-stamps the time of a forwarded txn in place. */
	assert_int_equal(zk_txn_set_time(w.data, w.size, 1800000000123), KEEL_OK);
	assert_int_equal(zk_txn_decode(&t, w.data, w.size), KEEL_OK);
	assert_int_equal(t.meta.time_ms, 1800000000123);
	assert_int_equal(t.meta.xid, 42);
	assert_int_equal(zk_txn_set_time(w.data, 10, 1), KEEL_PROTO);
	uint8_t not_txn[16] = {0};
	assert_int_equal(zk_txn_set_time(not_txn, sizeof(not_txn), 1), KEEL_PROTO);

	uint8_t pw[16];
	memset(pw, 7, 16);
	keel_wbuf_reset(&w);
	zk_txn_encode_create_session(&w, &meta, 6000, pw);
	assert_int_equal(zk_txn_decode(&t, w.data, w.size), KEEL_OK);
	assert_int_equal(t.kind, ZK_TXN_CREATE_SESSION);
	assert_int_equal(t.timeout_ms, 6000);
	assert_memory_equal(t.passwd, pw, 16);
	assert_int_equal(zk_txn_decode(&t, w.data, w.size - 1), KEEL_PROTO);

	keel_wbuf_reset(&w);
	zk_txn_encode_close_session(&w, &meta, ZK_CLOSE_EXPIRED);
	assert_int_equal(zk_txn_decode(&t, w.data, w.size), KEEL_OK);
	assert_int_equal(t.reason, ZK_CLOSE_EXPIRED);
	w.data[w.size - 1] = 9;
	assert_int_equal(zk_txn_decode(&t, w.data, w.size), KEEL_PROTO);

	keel_wbuf_reset(&w);
	zk_txn_encode_delete(&w, ZK_TXN_DELETE_TTL, 99, "/t", 2);
	assert_int_equal(zk_txn_decode(&t, w.data, w.size), KEEL_OK);
	assert_int_equal(t.kind, ZK_TXN_DELETE_TTL);
	assert_int_equal(t.meta.time_ms, 99);
	assert_bytes(t.path, B("/t"));
	w.data[0] = 'X';
	assert_int_equal(zk_txn_decode(&t, w.data, w.size), KEEL_CORRUPT);
	keel_wbuf_free(&w);
}

/* ---- captured traffic ---- */

struct xid_op {
	uint32_t conn;
	int32_t xid;
	int32_t op;
};

static void test_captured_frames(void **state)
{
	(void)state;
	const char *dir = getenv("KEEL_TEST_DATA");
	assert_non_null(dir);
	char path[1024];
	snprintf(path, sizeof(path), "%s/zk/captured_frames.bin", dir);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	static uint8_t data[1 << 16];
	size_t size = fread(data, 1, sizeof(data), f);
	fclose(f);
	assert_true(size > 0 && size < sizeof(data));
	static struct xid_op pending[512];
	size_t npending = 0;
	size_t requests = 0, replies = 0, events = 0, connects = 0;
	size_t pos = 0;
	while (pos < size) {
		assert_true(size - pos >= 10);
		char kind0 = (char)data[pos];
		char kind1 = (char)data[pos + 1];
		uint32_t conn = keel_load_be32(data + pos + 2);
		uint32_t len = keel_load_be32(data + pos + 6);
		const uint8_t *fr = data + pos + 10;
		pos += 10 + len;
		assert_true(pos <= size);
		if (kind0 == 'C' && kind1 == 'H') {
			struct zk_connect_request cr;
			assert_int_equal(zk_connect_request_decode(&cr, fr, len), KEEL_OK);
			assert_true(cr.has_read_only);
			connects++;
		} else if (kind0 == 'S' && kind1 == 'H') {
			struct zk_connect_response cr;
			assert_int_equal(zk_connect_response_decode(&cr, fr, len), KEEL_OK);
			assert_true(cr.timeout_ms > 0);
			assert_int_equal(cr.passwd.size, 16);
		} else if (kind0 == 'C') {
			struct zk_request req;
			assert_int_equal(zk_request_decode(&req, fr, len), KEEL_OK);
			/* Our encoder reproduces the client's bytes exactly. */
			struct keel_wbuf w;
			keel_wbuf_init_dynamic(&w, 0, 1 << 16);
			zk_request_encode(&w, &req);
			assert_int_equal(w.size, len);
			assert_memory_equal(w.data, fr, len);
			keel_wbuf_free(&w);
			assert_true(npending < 512);
			pending[npending++] = (struct xid_op){conn, req.xid, req.opcode};
			requests++;
		} else {
			struct keel_rbuf r;
			keel_rbuf_init(&r, fr, len);
			struct zk_reply_header h;
			assert_int_equal(zk_reply_header_decode(&h, &r), KEEL_OK);
			if (h.xid == ZK_XID_NOTIFICATION) {
				struct zk_watcher_event ev;
				assert_int_equal(zk_watcher_event_decode(&ev, &r), KEEL_OK);
				assert_true(keel_rbuf_done(&r));
				events++;
				continue;
			}
			int32_t op = 0;
			for (size_t i = 0; i < npending; i++) {
				if (pending[i].conn == conn && pending[i].xid == h.xid) {
					op = pending[i].op;
				}
			}
			assert_int_not_equal(op, 0);
			if (h.err != 0) {
				continue;
			}
			struct zk_response rsp;
			assert_int_equal(zk_response_decode(&rsp, op, fr + 16, len - 16), KEEL_OK);
			if (op == ZK_OP_MULTI) {
				struct zk_multi_result_iter it;
				struct zk_multi_result mr;
				zk_multi_result_iter_init(&it, rsp.multi, rsp.multi_size);
				size_t n = 0;
				while (zk_multi_result_next(&it, &mr)) {
					n++;
				}
				assert_false(it.failed);
				assert_true(n > 0);
			}
			replies++;
		}
	}
	assert_true(connects >= 2);
	assert_true(requests >= 40);
	assert_true(replies >= 30);
	print_message("captured: %zu connects, %zu requests, %zu replies, %zu events\n", connects,
		      requests, replies, events);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frame_check),
		cmocka_unit_test(test_connect_request_forms),
		cmocka_unit_test(test_connect_response),
		cmocka_unit_test(test_bytes_and_counts),
		cmocka_unit_test(test_stat_roundtrip),
		cmocka_unit_test(test_acl_and_string_vectors),
		cmocka_unit_test(test_request_roundtrip_all_ops),
		cmocka_unit_test(test_set_watches_both_forms),
		cmocka_unit_test(test_request_errors),
		cmocka_unit_test(test_multi_roundtrip),
		cmocka_unit_test(test_multi_results),
		cmocka_unit_test(test_responses),
		cmocka_unit_test(test_txn_roundtrip),
		cmocka_unit_test(test_captured_frames),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
