/*
 * Unit tests: identities, digests, the ACL gate on every opcode, ACL
 * validation and the ACL table.
 *
 * Expectations come from Apache ZooKeeper 3.8 (probe p5: the same ACLs,
 * identities and requests through a raw jute client), except where noted:
 * exists() needs READ on an existing node (ZooKeeper 3.8.6/3.9,
 * ZOOKEEPER-2590; the Debian 3.8.0 build still answered it).
 */
#include "test_zk_helpers.h"

#include "zk/zk_digest.h"
#include "zk/zk_read.h"

static void hex(const uint8_t *p, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[p[i] >> 4];
		out[2 * i + 1] = d[p[i] & 15];
	}
	out[2 * n] = '\0';
}

static void test_sha1_vectors(void **state)
{
	(void)state;
	uint8_t h[20];
	char s[41];
	zk_sha1("abc", 3, h);
	hex(h, 20, s);
	assert_string_equal(s, "a9993e364706816aba3e25717850c26c9cd0d89d");
	zk_sha1("", 0, h);
	hex(h, 20, s);
	assert_string_equal(s, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
	const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	zk_sha1(m, strlen(m), h);
	hex(h, 20, s);
	assert_string_equal(s, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
	static char million[1000000];
	memset(million, 'a', sizeof(million));
	zk_sha1(million, sizeof(million), h);
	hex(h, 20, s);
	assert_string_equal(s, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
	/* Lengths around the padding boundary (55, 56, 63, 64 bytes). */
	char buf[65];
	memset(buf, 'x', sizeof(buf));
	uint8_t a[20], b[20];
	zk_sha1(buf, 55, a);
	zk_sha1(buf, 56, b);
	assert_memory_not_equal(a, b, 20);
	zk_sha1(buf, 64, a);
	hex(a, 20, s);
	assert_int_equal(strlen(s), 40);
}

static void test_base64_and_digest_ids(void **state)
{
	(void)state;
	char out[64];
	size_t n = zk_base64_encode("M", 1, out);
	assert_int_equal(n, 4);
	assert_memory_equal(out, "TQ==", 4);
	n = zk_base64_encode("Ma", 2, out);
	assert_memory_equal(out, "TWE=", 4);
	n = zk_base64_encode("Man", 3, out);
	assert_memory_equal(out, "TWFu", 4);
	/* Identities ZooKeeper itself computed (getACL after an "auth" ACL). */
	struct {
		const char *auth;
		const char *id;
	} cases[] = {
		{"alice:secret", "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E="},
		{"bob", "bob:SBgazSKz7a68ikR4aKfffOYpkgo="},
		{"super:test", "super:D/InIHSb7yEEbrWz8b9l71RjZJU="},
	};
	for (size_t i = 0; i < 3; i++) {
		char id[128];
		size_t len = zk_digest_id(cases[i].auth, strlen(cases[i].auth), id);
		assert_int_equal(len, strlen(cases[i].id));
		assert_memory_equal(id, cases[i].id, len);
		assert_true(len <= zk_digest_id_size(strlen(cases[i].auth)));
	}
}

static void test_ip_and_digest_syntax(void **state)
{
	(void)state;
	struct zk_bytes ip = zt_b("127.0.0.1");
	assert_true(zk_acl_ip_matches(ip, zt_b("127.0.0.1")));
	assert_true(zk_acl_ip_matches(ip, zt_b("127.0.0.0/8")));
	assert_true(zk_acl_ip_matches(ip, zt_b("127.255.0.0/8")));
	assert_true(zk_acl_ip_matches(ip, zt_b("0.0.0.0/0")));
	assert_true(zk_acl_ip_matches(ip, zt_b("127.0.0.0/31")));
	assert_false(zk_acl_ip_matches(ip, zt_b("127.0.0.2/31")));
	assert_false(zk_acl_ip_matches(ip, zt_b("10.0.0.0/8")));
	assert_false(zk_acl_ip_matches(zt_b("0:0:0:0:0:0:0:1"), zt_b("127.0.0.1")));
	assert_true(zk_acl_ip_matches(zt_b("10.1.2.3"), zt_b("10.1.2.0/23")));
	assert_false(zk_acl_ip_matches(zt_b("10.1.4.3"), zt_b("10.1.2.0/23")));
	/* Syntax, as the probe showed: "+1.2.3.4" parses (Java parseInt). */
	assert_true(zk_acl_ip_valid(zt_b("+1.2.3.4")));
	assert_true(zk_acl_ip_valid(zt_b("10.0.0.0/8")));
	assert_false(zk_acl_ip_valid(zt_b("10.0.0.0/33")));
	assert_false(zk_acl_ip_valid(zt_b("host")));
	assert_false(zk_acl_ip_valid(zt_b("::1")));
	assert_false(zk_acl_ip_valid(zt_b("1.2.3")));
	assert_false(zk_acl_ip_valid(zt_b("1.2.3.4.")));
	assert_false(zk_acl_ip_valid(zt_b("1.2.3.256")));
	assert_false(zk_acl_ip_valid(zt_b("1.2.3.4/")));
	assert_false(zk_acl_ip_valid(zt_b("")));
	assert_true(zk_acl_digest_valid(zt_b("a:b")));
	assert_true(zk_acl_digest_valid(zt_b("a:b:")));
	assert_true(zk_acl_digest_valid(zt_b(":b")));
	assert_false(zk_acl_digest_valid(zt_b("a:b:c")));
	assert_false(zk_acl_digest_valid(zt_b("nocolon")));
	assert_false(zk_acl_digest_valid(zt_b("")));
	assert_false(zk_acl_digest_valid(zt_b("::")));
	assert_false(zk_acl_digest_valid(zt_b("a:")));
}

static void test_auth_handle_and_who_am_i(void **state)
{
	(void)state;
	struct zk_auth_info info;
	zk_auth_info_init(&info);
	assert_int_equal(zk_auth_info_add(&info, zt_b("ip"), zt_b("127.0.0.1")), KEEL_OK);
	struct zk_auth_request a = {0, zt_b("digest"), zt_b("alice:secret")};
	const char *super = "super:D/InIHSb7yEEbrWz8b9l71RjZJU=";
	assert_int_equal(zk_auth_handle(&info, &a, super), ZK_OK);
	assert_int_equal(zk_auth_handle(&info, &a, super), ZK_OK); /* again: no duplicate */
	assert_int_equal(info.ids.count, 2);
	assert_true(zk_ids_contains(&info.ids, zt_b("digest"),
				    zt_b("alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E=")));
	assert_false(zk_ids_is_super(&info.ids));
	struct zk_auth_request ipauth = {0, zt_b("ip"), zt_b("anything")};
	assert_int_equal(zk_auth_handle(&info, &ipauth, super), ZK_OK);
	assert_int_equal(info.ids.count, 2);
	struct zk_auth_request bogus = {0, zt_b("bogus"), zt_b("x")};
	assert_int_equal(zk_auth_handle(&info, &bogus, super), ZK_AUTH_FAILED);
	struct zk_auth_request su = {0, zt_b("digest"), zt_b("super:test")};
	assert_int_equal(zk_auth_handle(&info, &su, super), ZK_OK);
	assert_true(zk_ids_is_super(&info.ids));
	assert_int_equal(info.ids.count, 4);

	/* whoAmI: (scheme, user); digest users are the part before ':'. */
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 4096);
	zk_ids_who_am_i(&w, &info.ids);
	struct zk_response rsp;
	assert_int_equal(zk_response_decode(&rsp, ZK_OP_WHO_AM_I, w.data, w.size), KEEL_OK);
	assert_int_equal(rsp.strings.count, 8);
	const char *want[] = {"ip", "127.0.0.1", "digest", "alice", "super", "", "digest", "super"};
	struct zk_str_iter it;
	struct zk_bytes s;
	zk_str_iter_init(&it, rsp.strings);
	for (int i = 0; i < 8; i++) {
		assert_true(zk_str_iter_next(&it, &s));
		assert_true(zk_bytes_eq_str(s, want[i]));
	}
	keel_wbuf_free(&w);
	/* The identity list is bounded. */
	for (int i = 0; i < ZK_IDS_MAX; i++) {
		char u[32];
		snprintf(u, sizeof(u), "user%d:pw", i);
		struct zk_auth_request more = {0, zt_b("digest"), zt_b(u)};
		(void)zk_auth_handle(&info, &more, NULL);
	}
	assert_int_equal(info.ids.count, ZK_IDS_MAX);
	struct zk_auth_request last = {0, zt_b("digest"), zt_b("last:pw")};
	assert_int_equal(zk_auth_handle(&info, &last, NULL), ZK_AUTH_FAILED);
	zk_auth_info_close(&info);
}

/* Builds an ACL vector in z->acl from (perms, scheme, id) triples. */
static struct zk_acl_vec acl_list(struct zt *z, size_t n, const struct zk_acl *acls)
{
	keel_wbuf_reset(&z->acl);
	return zk_acl_vec_build(&z->acl, acls, n);
}

#define ALICE_ID "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E="

static void set_ids(struct zt *z, bool alice, bool super)
{
	zk_ids_init(&z->ids);
	assert_int_equal(zk_ids_add(&z->ids, zt_b("ip"), zt_b("127.0.0.1")), KEEL_OK);
	if (alice) {
		assert_int_equal(zk_ids_add(&z->ids, zt_b("digest"), zt_b(ALICE_ID)), KEEL_OK);
	}
	if (super) {
		assert_int_equal(zk_ids_add(&z->ids, zt_b("super"), zt_b("")), KEEL_OK);
	}
}

static int32_t create_with(struct zt *z, int64_t sid, const char *path, size_t n,
			   const struct zk_acl *acls)
{
	return zt_create_full(z, sid, ZK_OP_CREATE, path, zt_b("d"), 0, acl_list(z, n, acls), -1,
			      NULL, NULL);
}

static void test_acl_validation(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000);
	struct zk_acl auth = {31, {zt_b("auth"), zt_b("")}};
	/* "auth" needs an authenticated (digest) identity; ip is not one. */
	assert_int_equal(create_with(&z, sid, "/a", 1, &auth), ZK_INVALID_ACL);
	set_ids(&z, true, false);
	assert_int_equal(create_with(&z, sid, "/a", 1, &auth), ZK_OK);
	struct zk_acl_vec got = zk_state_node_acl(&z.st, zk_state_lookup(&z.st, zt_b("/a")));
	struct zk_acl_iter it;
	struct zk_acl a;
	zk_acl_iter_init(&it, got);
	assert_true(zk_acl_iter_next(&it, &a));
	assert_true(zk_bytes_eq_str(a.id.scheme, "digest"));
	assert_true(zk_bytes_eq_str(a.id.id, ALICE_ID));
	assert_false(zk_acl_iter_next(&it, &a));

	struct {
		struct zk_acl acl;
		int32_t err;
	} cases[] = {
		{{31, {zt_b("world"), zt_b("foo")}}, ZK_INVALID_ACL},
		{{31, {zt_b("bogus"), zt_b("foo")}}, ZK_INVALID_ACL},
		{{31, {zt_b("digest"), zt_b("nocolon")}}, ZK_INVALID_ACL},
		{{31, {zt_b("digest"), zt_b("a:b:")}}, ZK_OK},
		{{31, {zt_b("digest"), zt_b(":b")}}, ZK_OK},
		{{31, {zt_b("digest"), zt_b("a:b:c")}}, ZK_INVALID_ACL},
		{{31, {zt_b("ip"), zt_b("127.0.0.1")}}, ZK_OK},
		{{31, {zt_b("ip"), zt_b("10.0.0.0/8")}}, ZK_OK},
		{{31, {zt_b("ip"), zt_b("10.0.0.0/33")}}, ZK_INVALID_ACL},
		{{31, {zt_b("ip"), zt_b("host")}}, ZK_INVALID_ACL},
		{{31, {zt_b("ip"), zt_b("::1")}}, ZK_INVALID_ACL},
		{{31, {zt_b("ip"), zt_b("+1.2.3.4")}}, ZK_OK},
		{{0, {zt_b("world"), zt_b("anyone")}}, ZK_OK},
		{{999, {zt_b("world"), zt_b("anyone")}}, ZK_OK},
		{{31, {zt_b("super"), zt_b("")}}, ZK_INVALID_ACL},
		{{31, {ZK_BYTES_NULL, zt_b("x")}}, ZK_INVALID_ACL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char p[32];
		snprintf(p, sizeof(p), "/i%zu", i);
		assert_int_equal(create_with(&z, sid, p, 1, &cases[i].acl), cases[i].err);
	}
	/* perms are kept as given (999). */
	got = zk_state_node_acl(&z.st, zk_state_lookup(&z.st, zt_b("/i13")));
	zk_acl_iter_init(&it, got);
	assert_true(zk_acl_iter_next(&it, &a));
	assert_int_equal(a.perms, 999);
	/* Null and empty lists are InvalidACL. */
	struct zk_acl_vec none = {-1, NULL, 0};
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE, "/n1", zt_b(""), 0, none, -1, NULL, NULL),
			 ZK_INVALID_ACL);
	none.count = 0;
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE, "/n1", zt_b(""), 0, none, -1, NULL, NULL),
			 ZK_INVALID_ACL);
	/* InvalidACL comes before NoNode (fixupACL runs before the parent). */
	struct zk_acl bad = {31, {zt_b("bogus"), zt_b("x")}};
	assert_int_equal(create_with(&z, sid, "/nonexist/x", 1, &bad), ZK_INVALID_ACL);
	/* Duplicates go; "auth" expands in place. */
	struct zk_acl dup[3] = {
		{31, {zt_b("world"), zt_b("anyone")}},
		{31, {zt_b("world"), zt_b("anyone")}},
		{1, {zt_b("auth"), zt_b("ignored")}},
	};
	assert_int_equal(create_with(&z, sid, "/dup", 3, dup), ZK_OK);
	got = zk_state_node_acl(&z.st, zk_state_lookup(&z.st, zt_b("/dup")));
	assert_int_equal(got.count, 2);
	zk_acl_iter_init(&it, got);
	assert_true(zk_acl_iter_next(&it, &a));
	assert_true(zk_bytes_eq_str(a.id.scheme, "world"));
	assert_true(zk_acl_iter_next(&it, &a));
	assert_int_equal(a.perms, 1);
	assert_true(zk_bytes_eq_str(a.id.id, ALICE_ID));
	/* setACL validates the same way. */
	assert_int_equal(zt_set_acl(&z, sid, "/dup", acl_list(&z, 1, &bad), -1, NULL), ZK_INVALID_ACL);
	zt_close(&z);
}

static int32_t read_op(struct zt *z, int32_t opcode, const char *path, struct keel_wbuf *out)
{
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	req.opcode = opcode;
	if (opcode == ZK_OP_GET_ACL || opcode == ZK_OP_GET_ALL_CHILDREN_NUMBER) {
		req.u.path.path = zt_b(path);
	} else {
		req.u.read.path = zt_b(path);
	}
	struct zk_read_ctx ctx = {&z->st, NULL, NULL, &z->ids, 0};
	keel_wbuf_reset(out);
	return zk_read(&ctx, &req, out);
}

static int32_t check_op(struct zt *z, int64_t sid, const char *path, int32_t version)
{
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_CHECK;
	req.u.check = (struct zk_check_request){zt_b(path), version};
	keel_wbuf_reset(&z->body);
	zk_request_body_encode(&z->body, &req);
	return zt_request(z, sid, ZK_OP_CHECK);
}

/* Probe p5: a node only alice may touch, seen by an unauthenticated
 * client, by alice and by the super user. */
static void test_gate_every_opcode(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000);
	struct keel_wbuf out;
	keel_wbuf_init_dynamic(&out, 0, 1 << 20);
	set_ids(&z, true, false);
	struct zk_acl auth = {31, {zt_b("auth"), zt_b("")}};
	assert_int_equal(create_with(&z, sid, "/acl1", 1, &auth), ZK_OK);
	assert_int_equal(create_with(&z, sid, "/acl1/x", 1, &auth), ZK_OK);

	for (int who = 0; who < 3; who++) {
		set_ids(&z, who == 1, who == 2);
		int32_t want = who == 0 ? ZK_NO_AUTH : ZK_OK;
		assert_int_equal(read_op(&z, ZK_OP_GET_DATA, "/acl1", &out), want);
		/* exists() checks no ACL in ZooKeeper 3.8 (the reference). */
		assert_int_equal(read_op(&z, ZK_OP_EXISTS, "/acl1", &out), ZK_OK);
		assert_int_equal(read_op(&z, ZK_OP_GET_ACL, "/acl1", &out), want);
		assert_int_equal(read_op(&z, ZK_OP_GET_CHILDREN, "/acl1", &out), want);
		assert_int_equal(read_op(&z, ZK_OP_GET_CHILDREN2, "/acl1", &out), want);
		assert_int_equal(read_op(&z, ZK_OP_GET_ALL_CHILDREN_NUMBER, "/acl1", &out), want);
		assert_int_equal(check_op(&z, sid, "/acl1", -1), want);
		assert_int_equal(zt_set(&z, sid, "/acl1", zt_b("x"), -1, NULL), want);
		assert_int_equal(create_with(&z, sid, "/acl1/y", 1, &(struct zk_acl){31, {zt_b("world"), zt_b("anyone")}}),
				 want);
		assert_int_equal(zt_delete(&z, sid, "/acl1/y", -1), who == 0 ? ZK_NO_AUTH : ZK_OK);
		assert_int_equal(zt_set_acl(&z, sid, "/acl1", acl_list(&z, 1, &(struct zk_acl){31, {zt_b("digest"), zt_b(ALICE_ID)}}),
					    -1, NULL),
				 want);
		/* exists on a missing node needs no permission. */
		assert_int_equal(read_op(&z, ZK_OP_EXISTS, "/acl1/none", &out), ZK_NO_NODE);
	}
	/* NoAuth on the parent comes before NoNode for the child (delete). */
	set_ids(&z, false, false);
	assert_int_equal(zt_delete(&z, sid, "/acl1/none", -1), ZK_NO_AUTH);
	/* Each op of a multi passes the gate: an open create, then a denied
	 * setData, rolls back with the denied op's NoAuth. */
	struct zk_multi_op ops[2];
	memset(ops, 0, sizeof(ops));
	ops[0].opcode = ZK_OP_CREATE;
	ops[0].u.create = (struct zk_create_request){zt_b("/open"), zt_b(""), zt_open_acl(&z), 0, -1};
	ops[1].opcode = ZK_OP_SET_DATA;
	ops[1].u.set_data = (struct zk_set_data_request){zt_b("/acl1"), zt_b("x"), -1};
	keel_wbuf_reset(&z.body);
	zk_multi_encode(&z.body, ops, 2);
	assert_int_equal(zt_request(&z, sid, ZK_OP_MULTI), ZK_OK);
	struct zk_multi_result_iter mit;
	struct zk_multi_result mr;
	zk_multi_result_iter_init(&mit, z.res.body.data, z.res.body.size);
	assert_true(zk_multi_result_next(&mit, &mr));
	assert_int_equal(mr.err, 0);
	assert_true(zk_multi_result_next(&mit, &mr));
	assert_int_equal(mr.err, ZK_NO_AUTH);
	assert_false(zt_exists(&z, "/open"));
	set_ids(&z, true, false);
	keel_wbuf_reset(&z.body);
	zk_multi_encode(&z.body, ops, 2);
	assert_int_equal(zt_request(&z, sid, ZK_OP_MULTI), ZK_OK);
	assert_true(zt_exists(&z, "/open"));
	keel_wbuf_free(&out);
	zt_close(&z);
}

static void test_get_acl_masking(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000);
	struct keel_wbuf out;
	keel_wbuf_init_dynamic(&out, 0, 1 << 20);
	struct zk_acl ro[2] = {{1, {zt_b("world"), zt_b("anyone")}}, {31, {zt_b("digest"), zt_b(ALICE_ID)}}};
	struct zk_acl adm[2] = {{16, {zt_b("world"), zt_b("anyone")}}, {1, {zt_b("digest"), zt_b(ALICE_ID)}}};
	struct zk_acl none = {0, {zt_b("world"), zt_b("anyone")}};
	struct zk_acl wonly = {2, {zt_b("world"), zt_b("anyone")}};
	assert_int_equal(create_with(&z, sid, "/ro", 2, ro), ZK_OK);
	assert_int_equal(create_with(&z, sid, "/adm", 2, adm), ZK_OK);
	assert_int_equal(create_with(&z, sid, "/none", 1, &none), ZK_OK);
	assert_int_equal(create_with(&z, sid, "/wonly", 1, &wonly), ZK_OK);
	struct zk_response rsp;
	struct zk_acl_iter it;
	struct zk_acl a;
	/* READ without ADMIN: digest ids masked to "user:x". */
	assert_int_equal(read_op(&z, ZK_OP_GET_ACL, "/ro", &out), ZK_OK);
	assert_int_equal(zk_response_decode(&rsp, ZK_OP_GET_ACL, out.data, out.size), KEEL_OK);
	zk_acl_iter_init(&it, rsp.acl);
	assert_true(zk_acl_iter_next(&it, &a));
	assert_true(zk_bytes_eq_str(a.id.id, "anyone"));
	assert_true(zk_acl_iter_next(&it, &a));
	assert_true(zk_bytes_eq_str(a.id.id, "alice:x"));
	assert_int_equal(a.perms, 31);
	/* ADMIN without READ: the full list. */
	assert_int_equal(read_op(&z, ZK_OP_GET_ACL, "/adm", &out), ZK_OK);
	assert_int_equal(zk_response_decode(&rsp, ZK_OP_GET_ACL, out.data, out.size), KEEL_OK);
	zk_acl_iter_init(&it, rsp.acl);
	assert_true(zk_acl_iter_next(&it, &a));
	assert_true(zk_acl_iter_next(&it, &a));
	assert_true(zk_bytes_eq_str(a.id.id, ALICE_ID));
	assert_int_equal(read_op(&z, ZK_OP_GET_DATA, "/adm", &out), ZK_NO_AUTH);
	/* No READ and no ADMIN. */
	assert_int_equal(read_op(&z, ZK_OP_GET_ACL, "/none", &out), ZK_NO_AUTH);
	assert_int_equal(read_op(&z, ZK_OP_GET_DATA, "/none", &out), ZK_NO_AUTH);
	assert_int_equal(read_op(&z, ZK_OP_GET_ACL, "/wonly", &out), ZK_NO_AUTH);
	assert_int_equal(zt_set(&z, sid, "/wonly", zt_b("w"), -1, NULL), ZK_OK);
	/* The owner sees the full list. */
	set_ids(&z, true, false);
	assert_int_equal(read_op(&z, ZK_OP_GET_ACL, "/ro", &out), ZK_OK);
	assert_int_equal(zk_response_decode(&rsp, ZK_OP_GET_ACL, out.data, out.size), KEEL_OK);
	zk_acl_iter_init(&it, rsp.acl);
	assert_true(zk_acl_iter_next(&it, &a));
	assert_true(zk_acl_iter_next(&it, &a));
	assert_true(zk_bytes_eq_str(a.id.id, ALICE_ID));
	keel_wbuf_free(&out);
	zt_close(&z);
}

/* x509 (ZooKeeper's X509AuthenticationProvider): the identity is the
 * certificate's subject DN; an ACL entry matches an equal DN only; "auth"
 * expands to it; an id that is not a DN is InvalidACL. */
#define CLIENT_DN "CN=client,O=keel-test"

static void set_x509(struct zt *z, const char *dn)
{
	zk_ids_init(&z->ids);
	assert_int_equal(zk_ids_add(&z->ids, zt_b("ip"), zt_b("127.0.0.1")), KEEL_OK);
	if (dn != NULL) {
		assert_int_equal(zk_ids_add(&z->ids, zt_b(ZK_X509_SCHEME), zt_b(dn)), KEEL_OK);
	}
}

static void test_x509_acl(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000);
	struct keel_wbuf out;
	keel_wbuf_init_dynamic(&out, 0, 1 << 20);
	set_x509(&z, CLIENT_DN);
	struct zk_acl mine = {31, {zt_b("x509"), zt_b(CLIENT_DN)}};
	assert_int_equal(create_with(&z, sid, "/x", 1, &mine), ZK_OK);
	struct zk_acl bad = {31, {zt_b("x509"), zt_b("nonsense")}};
	assert_int_equal(create_with(&z, sid, "/bad", 1, &bad), ZK_INVALID_ACL);
	struct zk_acl empty = {31, {zt_b("x509"), zt_b("")}};
	assert_int_equal(create_with(&z, sid, "/bad", 1, &empty), ZK_INVALID_ACL);
	/* "auth" becomes the x509 identity. */
	struct zk_acl auth = {31, {zt_b("auth"), zt_b("")}};
	assert_int_equal(create_with(&z, sid, "/y", 1, &auth), ZK_OK);
	struct zk_acl_iter it;
	struct zk_acl a;
	zk_acl_iter_init(&it, zk_state_node_acl(&z.st, zk_state_lookup(&z.st, zt_b("/y"))));
	assert_true(zk_acl_iter_next(&it, &a));
	assert_true(zk_bytes_eq_str(a.id.scheme, "x509"));
	assert_true(zk_bytes_eq_str(a.id.id, CLIENT_DN));
	assert_false(zk_acl_iter_next(&it, &a));
	assert_int_equal(read_op(&z, ZK_OP_GET_DATA, "/x", &out), ZK_OK);
	assert_int_equal(read_op(&z, ZK_OP_GET_DATA, "/y", &out), ZK_OK);
	/* Another certificate, a prefix of the DN, or none: refused. */
	const char *others[] = {"CN=other,O=keel-test", "CN=client", NULL};
	for (size_t i = 0; i < 3; i++) {
		set_x509(&z, others[i]);
		assert_int_equal(read_op(&z, ZK_OP_GET_DATA, "/x", &out), ZK_NO_AUTH);
		assert_int_equal(zt_set(&z, sid, "/y", zt_b("v"), -1, NULL), ZK_NO_AUTH);
	}
	/* A digest identity with the same text is not the x509 one. */
	zk_ids_init(&z.ids);
	assert_int_equal(zk_ids_add(&z.ids, zt_b("digest"), zt_b(CLIENT_DN)), KEEL_OK);
	assert_int_equal(read_op(&z, ZK_OP_GET_DATA, "/x", &out), ZK_NO_AUTH);
	keel_wbuf_free(&out);
	zt_close(&z);
}

static void test_ip_acl_and_config_node(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000);
	struct keel_wbuf out;
	keel_wbuf_init_dynamic(&out, 0, 1 << 20);
	struct zk_acl ok = {31, {zt_b("ip"), zt_b("127.0.0.1")}};
	struct zk_acl deny = {31, {zt_b("ip"), zt_b("10.0.0.0/8")}};
	assert_int_equal(create_with(&z, sid, "/ipok", 1, &ok), ZK_OK);
	assert_int_equal(create_with(&z, sid, "/ipdeny", 1, &deny), ZK_OK);
	assert_int_equal(read_op(&z, ZK_OP_GET_DATA, "/ipok", &out), ZK_OK);
	assert_int_equal(read_op(&z, ZK_OP_GET_DATA, "/ipdeny", &out), ZK_NO_AUTH);
	/* /zookeeper/config is world:anyone:READ; the rest of /zookeeper is open. */
	assert_int_equal(zt_set(&z, sid, "/zookeeper/config", zt_b("x"), -1, NULL), ZK_NO_AUTH);
	assert_int_equal(zt_set_acl(&z, sid, "/zookeeper/config", zt_open_acl(&z), -1, NULL), ZK_NO_AUTH);
	assert_int_equal(zt_create(&z, sid, "/zookeeper/config/x", "", 0), ZK_NO_AUTH);
	assert_int_equal(zt_create(&z, sid, "/zookeeper/foo", "", 0), ZK_OK);
	assert_int_equal(zt_create(&z, sid, "/zookeeper/quota/foo", "", 0), ZK_OK);
	assert_int_equal(zt_set(&z, sid, "/zookeeper", zt_b("x"), -1, NULL), ZK_OK);
	assert_int_equal(zt_delete(&z, sid, "/zookeeper/foo", -1), ZK_OK);
	assert_int_equal(zt_set(&z, sid, "/", zt_b("rootdata"), -1, NULL), ZK_OK);
	assert_int_equal(zt_set_acl(&z, sid, "/", zt_open_acl(&z), -1, NULL), ZK_OK);
	/* The super user passes any ACL. */
	set_ids(&z, false, true);
	assert_int_equal(zt_set(&z, sid, "/zookeeper/config", zt_b("x"), -1, NULL), ZK_OK);
	assert_int_equal(read_op(&z, ZK_OP_GET_DATA, "/ipdeny", &out), ZK_OK);
	keel_wbuf_free(&out);
	zt_close(&z);
}

static void test_acl_table_sharing(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000);
	uint32_t lists = z.st.acls.count;
	char p[32];
	for (int i = 0; i < 100; i++) {
		snprintf(p, sizeof(p), "/n%d", i);
		assert_int_equal(zt_create(&z, sid, p, "", 0), ZK_OK);
	}
	/* 100 nodes with world:anyone:ALL share the root's list. */
	assert_int_equal(z.st.acls.count, lists);
	uint32_t open_id = zk_tree_node(&z.st.tree, ZK_ROOT_ID)->acl;
	assert_int_equal(zk_acl_table_refs(&z.st.acls, open_id), 100 + 3);
	/* (READ alone would share /zookeeper/config's list.) */
	struct zk_acl ro = {3, {zt_b("world"), zt_b("anyone")}};
	assert_int_equal(zt_set_acl(&z, sid, "/n0", acl_list(&z, 1, &ro), -1, NULL), ZK_OK);
	assert_int_equal(z.st.acls.count, lists + 1);
	assert_int_equal(zk_acl_table_refs(&z.st.acls, open_id), 102);
	/* Deleting the only user leaves the list pending until the next apply
	 * (watch triggers of this apply may still name it), then it goes. */
	assert_int_equal(zt_delete(&z, sid, "/n0", -1), ZK_OK);
	assert_int_equal(z.st.acls.count, lists + 1);
	assert_int_equal(zt_delete(&z, sid, "/n1", -1), ZK_OK);
	assert_int_equal(z.st.acls.count, lists);
	for (int i = 2; i < 100; i++) {
		snprintf(p, sizeof(p), "/n%d", i);
		assert_int_equal(zt_delete(&z, sid, p, -1), ZK_OK);
	}
	assert_int_equal(zk_acl_table_refs(&z.st.acls, open_id), 3);
	zt_close(&z);
}

/* The sasl scheme (SASLAuthenticationProvider): the identity sasl:USER
 * that a DIGEST-MD5 exchange gives (node/client_zk.c) matches the entry for
 * USER, "super" matches every sasl entry, "auth" expands to it, ids are
 * checked as KerberosName does, and addauth cannot claim it. */
static void test_sasl_scheme(void **state)
{
	(void)state;
	assert_true(zk_acl_sasl_matches(zt_b("alice"), zt_b("alice")));
	assert_false(zk_acl_sasl_matches(zt_b("alice"), zt_b("alicia")));
	assert_false(zk_acl_sasl_matches(zt_b("bob"), zt_b("alice")));
	assert_true(zk_acl_sasl_matches(zt_b("super"), zt_b("alice")));
	assert_true(zk_acl_sasl_valid(zt_b("alice")));
	assert_true(zk_acl_sasl_valid(zt_b("")));
	assert_true(zk_acl_sasl_valid(zt_b("a/b/c")));
	assert_true(zk_acl_sasl_valid(zt_b("zk/host@EXAMPLE.COM")));
	assert_true(zk_acl_sasl_valid(zt_b("alice@EXAMPLE.COM")));
	assert_false(zk_acl_sasl_valid(zt_b("a/b/c@EXAMPLE.COM")));
	assert_false(zk_acl_sasl_valid(zt_b("a@b@c")));
	assert_false(zk_acl_sasl_valid(zt_b("a@B/C")));
	assert_false(zk_acl_sasl_valid(ZK_BYTES_NULL));

	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 10000);
	struct zk_acl only_alice = {ZK_PERM_ALL, {zt_b("sasl"), zt_b("alice")}};
	struct zk_acl_vec v = acl_list(&z, 1, &only_alice);
	struct zk_ids ids;
	zk_ids_init(&ids);
	assert_false(zk_acl_check(v, ZK_PERM_READ, &ids));
	assert_int_equal(zk_ids_add(&ids, zt_b("digest"), zt_b("alice:x")), KEEL_OK);
	assert_false(zk_acl_check(v, ZK_PERM_READ, &ids)); /* another scheme */
	assert_int_equal(zk_ids_add(&ids, zt_b("sasl"), zt_b("bob")), KEEL_OK);
	assert_false(zk_acl_check(v, ZK_PERM_READ, &ids));
	assert_int_equal(zk_ids_add(&ids, zt_b("sasl"), zt_b("alice")), KEEL_OK);
	assert_true(zk_acl_check(v, ZK_PERM_READ, &ids));

	/* create with sasl:alice, and with auth expanded to the sasl identity. */
	zk_ids_init(&z.ids);
	assert_int_equal(zk_ids_add(&z.ids, zt_b("sasl"), zt_b("alice")), KEEL_OK);
	assert_int_equal(create_with(&z, sid, "/s", 1, &only_alice), ZK_OK);
	struct zk_acl auth = {ZK_PERM_ALL, {zt_b("auth"), zt_b("")}};
	assert_int_equal(create_with(&z, sid, "/t", 1, &auth), ZK_OK);
	struct zk_acl_vec got = zk_state_node_acl(&z.st, zk_state_lookup(&z.st, zt_b("/t")));
	struct zk_acl_iter it;
	struct zk_acl a;
	zk_acl_iter_init(&it, got);
	assert_true(zk_acl_iter_next(&it, &a));
	assert_true(zk_bytes_eq_str(a.id.scheme, "sasl"));
	assert_true(zk_bytes_eq_str(a.id.id, "alice"));
	assert_false(zk_acl_iter_next(&it, &a));
	struct zk_acl bad = {ZK_PERM_ALL, {zt_b("sasl"), zt_b("a@b@c")}};
	assert_int_equal(create_with(&z, sid, "/u", 1, &bad), ZK_INVALID_ACL);

	/* addauth sasl is refused, as ZooKeeper's provider refuses it. */
	struct zk_auth_info info;
	zk_auth_info_init(&info);
	struct zk_auth_request forged = {0, zt_b("sasl"), zt_b("alice")};
	assert_int_equal(zk_auth_handle(&info, &forged, NULL), ZK_AUTH_FAILED);
	assert_int_equal(info.ids.count, 0);
	/* whoAmI names the sasl user. */
	assert_int_equal(zk_auth_info_add(&info, zt_b("sasl"), zt_b("alice")), KEEL_OK);
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 4096);
	zk_ids_who_am_i(&w, &info.ids);
	struct zk_response rsp;
	assert_int_equal(zk_response_decode(&rsp, ZK_OP_WHO_AM_I, w.data, w.size), KEEL_OK);
	struct zk_str_iter si;
	struct zk_bytes str;
	zk_str_iter_init(&si, rsp.strings);
	assert_true(zk_str_iter_next(&si, &str));
	assert_true(zk_bytes_eq_str(str, "sasl"));
	assert_true(zk_str_iter_next(&si, &str));
	assert_true(zk_bytes_eq_str(str, "alice"));
	keel_wbuf_free(&w);
	zk_auth_info_close(&info);
	zt_close(&z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha1_vectors),
		cmocka_unit_test(test_base64_and_digest_ids),
		cmocka_unit_test(test_ip_and_digest_syntax),
		cmocka_unit_test(test_auth_handle_and_who_am_i),
		cmocka_unit_test(test_acl_validation),
		cmocka_unit_test(test_gate_every_opcode),
		cmocka_unit_test(test_get_acl_masking),
		cmocka_unit_test(test_x509_acl),
		cmocka_unit_test(test_ip_acl_and_config_node),
		cmocka_unit_test(test_acl_table_sharing),
		cmocka_unit_test(test_sasl_scheme),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
