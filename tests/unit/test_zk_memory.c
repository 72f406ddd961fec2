/*
 * Memory per znode: loads 1,000,000 znodes of 100 bytes (100,000 under the
 * sanitizers, whose allocator inflates every block) through zk_apply() and
 * prints the accounted bytes per znode and the resident-set growth per
 * znode. Override the count with KEEL_ZK_MEM_NODES.
 *
 * It asserts the accounting (the state's estimate matches the node sizes
 * it is made of) and a design ceiling of 300 accounted bytes per znode for
 * this load, never a time. Reproduce the numbers in the report with:
 *	make && build/tests/test_zk_memory
 */
#include "test_zk_helpers.h"

#include "zk/zk_tree.h"

static size_t rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	if (f == NULL) {
		return 0;
	}
	unsigned long size = 0, resident = 0;
	int n = fscanf(f, "%lu %lu", &size, &resident);
	fclose(f);
	return n == 2 ? (size_t)resident * 4096u : 0;
}

static size_t node_count(void)
{
	const char *env = getenv("KEEL_ZK_MEM_NODES");
	if (env != NULL && atol(env) > 0) {
		return (size_t)atol(env);
	}
#if defined(KEEL_SANITIZE)
	return 100000;
#else
	return 1000000;
#endif
}

static void test_bytes_per_znode(void **state)
{
	(void)state;
	size_t count = node_count();
	size_t rss0 = rss_bytes();
	struct zt z;
	zt_init(&z);
	int64_t sid = zt_session(&z, 30000);
	uint8_t value[100];
	memset(value, 'v', sizeof(value));
	char path[64];
	size_t parents = (count + 999) / 1000;
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_CREATE;
	struct zk_acl_vec open = zt_open_acl(&z);
	assert_int_equal(zt_create(&z, sid, "/bench", "", 0), ZK_OK);
	for (size_t p = 0; p < parents; p++) {
		snprintf(path, sizeof(path), "/bench/p%04zu", p);
		assert_int_equal(zt_create(&z, sid, path, "", 0), ZK_OK);
	}
	size_t made = 0;
	for (size_t p = 0; p < parents && made < count; p++) {
		for (size_t c = 0; c < 1000 && made < count; c++, made++) {
			int n = snprintf(path, sizeof(path), "/bench/p%04zu/n%06zu", p, c);
			req.u.create = (struct zk_create_request){zk_bytes_of(path, (size_t)n),
								  zk_bytes_of(value, sizeof(value)),
								  open, 0, -1};
			keel_wbuf_reset(&z.body);
			zk_request_body_encode(&z.body, &req);
			struct zk_txn_meta meta = {z.now_ms, 0, 0, sid};
			keel_wbuf_reset(&z.txn);
			zk_txn_encode_request(&z.txn, &meta, &z.ids, ZK_OP_CREATE, z.body.data,
					      z.body.size);
			/* Not zt_apply_txn: no full-hash check per apply here. */
			assert_int_equal(zk_apply(&z.st, ++z.zxid, z.txn.data, z.txn.size, &z.res),
					 KEEL_OK);
			assert_int_equal(z.res.err, ZK_OK);
		}
	}
	size_t rss1 = rss_bytes();
	struct zk_memory mem;
	zk_state_memory(&z.st, &mem);
	assert_int_equal(mem.node_count, count + parents + 5);
	/* Every node is one block: header + name + data, malloc-rounded. */
	size_t expect = 0;
	for (uint32_t id = 0; id < z.st.tree.capacity; id++) {
		const struct zk_node *n = z.st.tree.slots[id];
		if (((uintptr_t)n & 1u) == 0) {
			expect += zk_tree_alloc_size(sizeof(*n) + n->name_size + n->data_size);
		}
	}
	assert_int_equal(mem.node_bytes, expect);
	double per_node = (double)mem.total_bytes / (double)mem.node_count;
	double rss_per_node = rss1 > rss0 ? (double)(rss1 - rss0) / (double)count : 0.0;
	print_message("%zu znodes of 100 B: accounted %.1f B/znode (nodes %.1f, index+slots %.1f, "
		      "acl %zu B, sessions %zu B); RSS growth %.1f B/znode (%zu MiB)\n",
		      count, per_node, (double)mem.node_bytes / (double)mem.node_count,
		      (double)mem.tree_bytes / (double)mem.node_count, mem.acl_bytes,
		      mem.session_bytes, rss_per_node, (rss1 - rss0) >> 20);
	assert_true(per_node < 300.0);
	assert_true(zk_state_hash(&z.st) == zk_state_hash_full(&z.st));
	zt_close(&z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bytes_per_znode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
