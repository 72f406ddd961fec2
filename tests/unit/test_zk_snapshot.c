/*
 * Unit tests: snapshots — round trip with an equal state hash and equal
 * reads, determinism of later applies on the loaded copy, chunked I/O in
 * both directions, and rejection of every truncation and of corruption.
 */
#include "test_zk_helpers.h"

#include "base/assert.h"
#include "zk/zk_read.h"
#include "zk/zk_snapshot.h"
#include "zk/zk_tree.h"

struct mem {
	uint8_t *data;
	size_t size;
	size_t cap;
	size_t pos;
	size_t max_chunk; /* largest write seen / read size to hand out */
	int writes;
};

static enum keel_err mem_write(void *ctx, const void *data, size_t size)
{
	struct mem *m = ctx;
	assert_true(size > 0 && size <= ZK_SNAPSHOT_CHUNK);
	if (m->size + size > m->cap) {
		m->cap = (m->size + size) * 2;
		m->data = realloc(m->data, m->cap);
		assert_non_null(m->data);
	}
	memcpy(m->data + m->size, data, size);
	m->size += size;
	m->max_chunk = KEEL_MAX(m->max_chunk, size);
	m->writes++;
	return KEEL_OK;
}

static enum keel_err mem_read(void *ctx, void *buf, size_t max, size_t *got)
{
	struct mem *m = ctx;
	size_t n = KEEL_MIN(max, m->size - m->pos);
	if (m->max_chunk != 0) {
		n = KEEL_MIN(n, m->max_chunk);
	}
	memcpy(buf, m->data + m->pos, n);
	m->pos += n;
	*got = n;
	return KEEL_OK;
}

static enum keel_err failing_write(void *ctx, const void *data, size_t size)
{
	(void)data;
	(void)size;
	int *calls = ctx;
	return ++*calls == 2 ? KEEL_IO : KEEL_OK;
}

/* Builds a state with every kind of thing in it. */
static void populate(struct zt *z, int64_t *sids)
{
	sids[0] = zt_session(z, 4000);
	sids[1] = zt_session(z, 30000);
	assert_int_equal(zk_ids_add(&z->ids, zt_b("digest"), zt_b("u:hash")), KEEL_OK);
	assert_int_equal(zt_create(z, sids[0], "/app", "config", 0), ZK_OK);
	char p[64];
	for (int i = 0; i < 300; i++) {
		snprintf(p, sizeof(p), "/app/n%03d", (i * 37) % 300);
		assert_int_equal(zt_create(z, sids[0], p, p, 0), ZK_OK);
	}
	for (int i = 0; i < 300; i += 7) {
		snprintf(p, sizeof(p), "/app/n%03d", i);
		assert_int_equal(zt_delete(z, sids[0], p, -1), ZK_OK);
	}
	assert_int_equal(zt_create_full(z, sids[0], ZK_OP_CREATE, "/null", ZK_BYTES_NULL, 0,
					zt_open_acl(z), -1, NULL, NULL),
			 ZK_OK);
	assert_int_equal(zt_create(z, sids[0], "/e1", "", 1), ZK_OK);
	assert_int_equal(zt_create(z, sids[1], "/e2", "", 1), ZK_OK);
	assert_int_equal(zt_create(z, sids[1], "/app/e3", "", 3), ZK_OK);
	assert_int_equal(zt_create_full(z, sids[0], ZK_OP_CREATE_CONTAINER, "/c", zt_b(""), 0,
					zt_open_acl(z), -1, NULL, NULL),
			 ZK_OK);
	assert_int_equal(zt_create(z, sids[0], "/c/child", "", 0), ZK_OK);
	assert_int_equal(zt_create_full(z, sids[0], ZK_OP_CREATE_TTL, "/t", zt_b("ttl"), 5,
					zt_open_acl(z), 5000, NULL, NULL),
			 ZK_OK);
	struct zk_acl acls[2] = {{1, {zt_b("world"), zt_b("anyone")}}, {31, {zt_b("auth"), zt_b("")}}};
	keel_wbuf_reset(&z->acl);
	assert_int_equal(zt_create_full(z, sids[0], ZK_OP_CREATE, "/secret", zt_b("s"), 0,
					zk_acl_vec_build(&z->acl, acls, 2), -1, NULL, NULL),
			 ZK_OK);
	assert_int_equal(zt_set(z, sids[0], "/app", zt_b("v2"), -1, NULL), ZK_OK);
	static uint8_t big[200000];
	memset(big, 0x5a, sizeof(big));
	assert_int_equal(zt_create_full(z, sids[0], ZK_OP_CREATE, "/big", zk_bytes_of(big, sizeof(big)), 0,
					zt_open_acl(z), -1, NULL, NULL),
			 ZK_OK);
	for (int d = 0, n = 0; d < 40; d++) {
		n += snprintf(p + n, sizeof(p) - (size_t)n, d == 0 ? "/deep" : "/d");
		if (n > 60) {
			break;
		}
		assert_int_equal(zt_create(z, sids[0], p, "", 0), ZK_OK);
	}
}

/* Every node, in walk order, with everything a client can read. */
static bool describe_visit(void *ctx, uint32_t id, const uint8_t *path, size_t size, uint32_t depth)
{
	(void)depth;
	void **args = ctx;
	const struct zk_state *st = args[0];
	struct keel_wbuf *out = args[1];
	const struct zk_node *n = zk_tree_node(&st->tree, id);
	keel_wbuf_bytes(out, path, size);
	struct zk_stat s;
	zk_state_stat(st, id, &s);
	zk_write_stat(out, &s);
	keel_wbuf_u32(out, n->flags);
	keel_wbuf_u32(out, (uint32_t)n->cversion);
	keel_wbuf_bytes(out, zk_node_data(n), n->data_size);
	zk_write_acl_vec(out, zk_state_node_acl(st, id));
	keel_wbuf_i64(out, n->ephemeral_owner);
	return true;
}

static void describe(const struct zk_state *st, struct keel_wbuf *out)
{
	keel_wbuf_reset(out);
	struct keel_wbuf path;
	keel_wbuf_init_dynamic(&path, 0, 1 << 20);
	void *args[2] = {(void *)st, out};
	assert_true(zk_tree_walk(&st->tree, ZK_ROOT_ID, &path, describe_visit, args));
	keel_wbuf_free(&path);
	size_t cursor = 0;
	const struct zk_session *s;
	uint64_t sum = 0;
	while ((s = zk_state_session_next(st, &cursor)) != NULL) {
		sum += (uint64_t)s->id * 31 + (uint64_t)s->timeout_ms + s->eph_count + s->passwd[3];
	}
	keel_wbuf_u64(out, sum);
}

static void test_roundtrip(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sids[2];
	populate(&z, sids);
	struct mem m = {0};
	uint64_t written = 0;
	assert_int_equal(zk_snapshot_write(&z.st, mem_write, &m, &written), KEEL_OK);
	assert_int_equal(written, m.size);
	assert_true(m.writes > 1);
	assert_int_equal(m.max_chunk, ZK_SNAPSHOT_CHUNK);
	print_message("snapshot of %u nodes: %zu bytes\n", zk_state_node_count(&z.st), m.size);

	struct zk_state copy;
	m.pos = 0;
	m.max_chunk = 7; /* hand the bytes out in odd small pieces */
	assert_int_equal(zk_snapshot_load(&copy, &z.st.config, mem_read, &m), KEEL_OK);
	assert_true(zk_state_hash(&copy) == zk_state_hash(&z.st));
	assert_true(zk_state_hash_full(&copy) == zk_state_hash(&z.st));
	assert_int_equal(copy.last_zxid, z.st.last_zxid);
	assert_int_equal(zk_state_node_count(&copy), zk_state_node_count(&z.st));
	assert_int_equal(zk_state_session_count(&copy), 2);
	assert_int_equal(zk_state_session(&copy, sids[1])->eph_count, 2);
	assert_int_equal(keel_hmap_count(&copy.special), 2);
	struct keel_wbuf a, b;
	keel_wbuf_init_dynamic(&a, 0, 1 << 24);
	keel_wbuf_init_dynamic(&b, 0, 1 << 24);
	describe(&z.st, &a);
	describe(&copy, &b);
	assert_int_equal(a.size, b.size);
	assert_memory_equal(a.data, b.data, a.size);
	/* ACL lists stay shared. */
	assert_int_equal(copy.acls.count, z.st.acls.count);

	/* The copy evolves exactly like the original: the same txns give the
	 * same hashes and replies, sessions with ephemerals included. */
	struct zk_state orig = z.st;
	z.st = copy;
	uint64_t zxid = z.zxid;
	int64_t now = z.now_ms;
	int32_t errs[4];
	errs[0] = zt_create(&z, sids[0], "/app/after", "x", 2);
	errs[1] = zt_close_session(&z, sids[1]);
	errs[2] = zt_delete(&z, sids[0], "/c/child", -1);
	errs[3] = zt_set(&z, sids[0], "/t", zt_b("renew"), -1, NULL);
	uint64_t h_copy = zk_state_hash(&z.st);
	describe(&z.st, &b);
	copy = z.st;
	z.st = orig;
	z.zxid = zxid;
	z.now_ms = now;
	assert_int_equal(zt_create(&z, sids[0], "/app/after", "x", 2), errs[0]);
	assert_int_equal(zt_close_session(&z, sids[1]), errs[1]);
	assert_int_equal(zt_delete(&z, sids[0], "/c/child", -1), errs[2]);
	assert_int_equal(zt_set(&z, sids[0], "/t", zt_b("renew"), -1, NULL), errs[3]);
	assert_true(zk_state_hash(&z.st) == h_copy);
	describe(&z.st, &a);
	assert_int_equal(a.size, b.size);
	assert_memory_equal(a.data, b.data, a.size);
	zk_state_close(&copy);
	keel_wbuf_free(&a);
	keel_wbuf_free(&b);
	free(m.data);
	zt_close(&z);
}

static void test_initial_state_and_write_error(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	struct mem m = {0};
	assert_int_equal(zk_snapshot_write(&z.st, mem_write, &m, NULL), KEEL_OK);
	struct zk_state copy;
	assert_int_equal(zk_snapshot_load(&copy, &z.st.config, mem_read, &m), KEEL_OK);
	struct zk_stat s;
	zk_state_stat(&copy, zk_state_lookup(&copy, zt_b("/zookeeper")), &s);
	assert_int_equal(s.cversion, -2);
	zk_state_stat(&copy, zk_state_lookup(&copy, zt_b("/zookeeper/config")), &s);
	assert_int_equal(s.aversion, -1);
	assert_true(zk_state_hash(&copy) == zk_state_hash(&z.st));
	zk_state_close(&copy);
	free(m.data);

	/* A failing write callback stops the snapshot with its error. */
	int64_t sids[2];
	populate(&z, sids);
	int calls = 0;
	assert_int_equal(zk_snapshot_write(&z.st, failing_write, &calls, NULL), KEEL_IO);
	assert_int_equal(calls, 2);
	zt_close(&z);
}

static void test_truncation_and_corruption(void **state)
{
	(void)state;
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 4000);
	assert_int_equal(zt_create(&z, sid, "/a", "data", 0), ZK_OK);
	assert_int_equal(zt_create(&z, sid, "/a/e", "", 1), ZK_OK);
	assert_int_equal(zt_create_full(&z, sid, ZK_OP_CREATE_CONTAINER, "/c", zt_b(""), 0,
					zt_open_acl(&z), -1, NULL, NULL),
			 ZK_OK);
	struct mem m = {0};
	assert_int_equal(zk_snapshot_write(&z.st, mem_write, &m, NULL), KEEL_OK);
	struct zk_state copy;
	/* Every strict prefix fails. */
	size_t full = m.size;
	for (size_t n = 0; n < full; n++) {
		m.size = n;
		m.pos = 0;
		enum keel_err err = zk_snapshot_load(&copy, &z.st.config, mem_read, &m);
		assert_true(err == KEEL_SHORT || err == KEEL_CORRUPT);
	}
	m.size = full;
	/* Every single-bit flip fails (structure checks or the CRC). */
	for (size_t i = 0; i < full; i++) {
		for (int bit = 0; bit < 8; bit += 3) {
			m.data[i] ^= (uint8_t)(1u << bit);
			m.pos = 0;
			enum keel_err err = zk_snapshot_load(&copy, &z.st.config, mem_read, &m);
			if (err == KEEL_OK) {
				print_error("flip at %zu bit %d accepted\n", i, bit);
				zk_state_close(&copy);
			}
			assert_true(err == KEEL_SHORT || err == KEEL_CORRUPT);
			m.data[i] ^= (uint8_t)(1u << bit);
		}
	}
	/* The intact snapshot still loads; one byte more does not. */
	m.pos = 0;
	assert_int_equal(zk_snapshot_load(&copy, &z.st.config, mem_read, &m), KEEL_OK);
	zk_state_close(&copy);
	m.data = realloc(m.data, full + 1);
	m.data[full] = 0;
	m.size = full + 1;
	m.pos = 0;
	assert_int_equal(zk_snapshot_load(&copy, &z.st.config, mem_read, &m), KEEL_CORRUPT);
	m.size = full;
	/* A smaller configured limit rejects the node data it cannot hold. */
	struct zk_config small = z.st.config;
	small.max_packet_size = 2;
	m.pos = 0;
	assert_int_equal(zk_snapshot_load(&copy, &small, mem_read, &m), KEEL_CORRUPT);
	free(m.data);
	zt_close(&z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_initial_state_and_write_error),
		cmocka_unit_test(test_truncation_and_corruption),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
