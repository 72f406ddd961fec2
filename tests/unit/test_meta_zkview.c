/* Unit tests: the ZooKeeper-mode view — exact znode JSON, fenced brokers
 * unlisted, and a tree kept by applying per-batch deltas always equals the
 * full view of the image (through faults, deletions and failovers). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "meta/json.h"
#include "meta/zkview.h"
#include "test_meta_harness.h"

/* A toy znode tree: sorted by nothing, small enough for linear search. */
#define TREE_MAX 1024

struct tree {
	char *path[TREE_MAX];
	char *data[TREE_MAX];
	uint32_t count;
};

static int tree_find(const struct tree *t, const char *path)
{
	for (uint32_t i = 0; i < t->count; i++) {
		if (strcmp(t->path[i], path) == 0) {
			return (int)i;
		}
	}
	return -1;
}

static bool has_children(const struct tree *t, const char *path)
{
	size_t n = strlen(path);
	for (uint32_t i = 0; i < t->count; i++) {
		if (strncmp(t->path[i], path, n) == 0 && t->path[i][n] == '/') {
			return true;
		}
	}
	return false;
}

static void tree_remove_at(struct tree *t, uint32_t i)
{
	free(t->path[i]);
	free(t->data[i]);
	t->path[i] = t->path[t->count - 1];
	t->data[i] = t->data[t->count - 1];
	t->count--;
}

static char *dup_data(const struct meta_zk_op *op)
{
	char *d = malloc(op->size + 1);
	memcpy(d, op->data, op->size);
	d[op->size] = '\0';
	return d;
}

/* Applies ops with the semantics zkview.h gives the server. */
static void tree_apply(struct tree *t, const struct meta_zk_ops *ops)
{
	for (uint32_t k = 0; k < ops->count; k++) {
		const struct meta_zk_op *op = &ops->items[k];
		int i = tree_find(t, op->path);
		if (op->type == META_ZK_PUT) {
			if (i >= 0) {
				free(t->data[i]);
				t->data[i] = dup_data(op);
				continue;
			}
			/* The parent must exist already (or be the root). */
			const char *slash = strrchr(op->path, '/');
			if (slash != op->path) {
				char parent[512];
				memcpy(parent, op->path, (size_t)(slash - op->path));
				parent[slash - op->path] = '\0';
				assert_true(tree_find(t, parent) >= 0);
			}
			assert_true(t->count < TREE_MAX);
			t->path[t->count] = strdup(op->path);
			t->data[t->count] = dup_data(op);
			t->count++;
		} else if (op->type == META_ZK_DELETE) {
			if (i >= 0) {
				assert_false(has_children(t, op->path));
				tree_remove_at(t, (uint32_t)i);
			}
		} else {
			assert_int_equal(op->type, META_ZK_DELETE_TREE);
			size_t n = strlen(op->path);
			for (uint32_t j = 0; j < t->count;) {
				bool under = strncmp(t->path[j], op->path, n) == 0 &&
					     (t->path[j][n] == '\0' || t->path[j][n] == '/');
				if (under) {
					tree_remove_at(t, j);
				} else {
					j++;
				}
			}
		}
	}
}

static void tree_free(struct tree *t)
{
	while (t->count > 0) {
		tree_remove_at(t, t->count - 1);
	}
}

static bool trees_equal(const struct tree *a, const struct tree *b)
{
	if (a->count != b->count) {
		return false;
	}
	for (uint32_t i = 0; i < a->count; i++) {
		int j = tree_find(b, a->path[i]);
		if (j < 0 || strcmp(a->data[i], b->data[j]) != 0) {
			print_message("differs at %s\n", a->path[i]);
			return false;
		}
	}
	return true;
}

static const char *node(const struct tree *t, const char *path)
{
	int i = tree_find(t, path);
	return i >= 0 ? t->data[i] : NULL;
}

/* The delta-maintained tree, fed from the harness's commit hook. */
struct follower_tree {
	struct tree tree;
	struct meta_zk_ops ops;
	uint32_t batches;
};

static void on_commit(struct h_cluster *c, const struct meta_batch *b, void *ctx)
{
	(void)b;
	struct follower_tree *ft = ctx;
	meta_zk_ops_reset(&ft->ops);
	assert_int_equal(meta_zk_view_changes(&c->committed, &c->changes, &ft->ops), KEEL_OK);
	tree_apply(&ft->tree, &ft->ops);
	ft->batches++;
}

static void full_tree(const struct meta_image *img, struct tree *out)
{
	struct meta_zk_ops ops;
	meta_zk_ops_init(&ops);
	assert_int_equal(meta_zk_view_full(img, &ops), KEEL_OK);
	memset(out, 0, sizeof(*out));
	tree_apply(out, &ops);
	meta_zk_ops_close(&ops);
}

static void check_delta_equals_full(struct h_cluster *c, struct follower_tree *ft)
{
	struct tree full;
	full_tree(&c->committed, &full);
	assert_true(trees_equal(&ft->tree, &full));
	tree_free(&full);
}

static void test_znode_json(void **state)
{
	(void)state;
	struct follower_tree *ft = calloc(1, sizeof(*ft));
	meta_zk_ops_init(&ft->ops);
	struct h_cluster c;
	h_init(&c, 5, NULL);
	c.on_commit = on_commit;
	c.ctx = ft;
	h_add_broker(&c, 1, "r1");
	h_add_broker(&c, 2, NULL);
	h_run(&c, 1000, 500);
	static const struct meta_config_kv cfg[] = {{"retention.ms", "1000"}};
	assert_int_equal(h_create_topic(&c, "sensor-data", 2, 2, cfg, 1), META_ERR_NONE);
	const struct tree *t = &ft->tree;

	char expect[512];
	snprintf(expect, sizeof(expect),
		 "{\"version\":2,\"brokerid\":-1,\"timestamp\":\"%lld\","
		 "\"kraftControllerEpoch\":1,\"keel_controller_id\":1}",
		 (long long)c.committed.controller_timestamp_ms);
	assert_string_equal(node(t, "/controller"), expect);
	/* The first controller named the cluster; /admin is there, read-only. */
	const char *cluster_id = meta_image_config(&c.committed, META_RESOURCE_BROKER, "",
						   META_CONFIG_CLUSTER_ID);
	assert_non_null(cluster_id);
	assert_int_equal(strlen(cluster_id), META_UUID_TEXT_LEN);
	snprintf(expect, sizeof(expect), "{\"version\":\"1\",\"id\":\"%s\"}", cluster_id);
	assert_string_equal(node(t, "/cluster/id"), expect);
	assert_string_equal(node(t, "/admin"), "");
	assert_string_equal(node(t, "/controller_epoch"), "1");

	const struct meta_broker *b1 = meta_image_broker(&c.committed, 1);
	snprintf(expect, sizeof(expect),
		 "{\"version\":5,\"host\":\"127.0.0.1\",\"port\":9092,\"jmx_port\":-1,"
		 "\"timestamp\":\"%lld\",\"endpoints\":[\"PLAINTEXT://127.0.0.1:9092\"],"
		 "\"listener_security_protocol_map\":{\"PLAINTEXT\":\"PLAINTEXT\"},"
		 "\"rack\":\"r1\",\"features\":{},\"epoch\":%lld}",
		 (long long)b1->registered_timestamp_ms, (long long)b1->epoch);
	assert_string_equal(node(t, "/brokers/ids/1"), expect);
	assert_null(strstr(node(t, "/brokers/ids/2"), "rack")); /* no rack: no field */

	const struct meta_topic *topic = meta_image_topic(&c.committed, "sensor-data");
	char id[32];
	struct meta_fmt f;
	meta_fmt_init(&f, id, sizeof(id));
	meta_fmt_uuid(&f, topic->id);
	snprintf(expect, sizeof(expect),
		 "{\"version\":3,\"partitions\":{\"0\":[%d,%d],\"1\":[%d,%d]},"
		 "\"adding_replicas\":{},\"removing_replicas\":{},\"topic_id\":\"%s\"}",
		 topic->partitions[0].replicas[0], topic->partitions[0].replicas[1],
		 topic->partitions[1].replicas[0], topic->partitions[1].replicas[1], id);
	assert_string_equal(node(t, "/brokers/topics/sensor-data"), expect);
	snprintf(expect, sizeof(expect),
		 "{\"controller_epoch\":1,\"leader\":%d,\"version\":1,\"leader_epoch\":0,"
		 "\"isr\":[%d,%d]}",
		 topic->partitions[1].leader, topic->partitions[1].isr[0],
		 topic->partitions[1].isr[1]);
	assert_string_equal(node(t, "/brokers/topics/sensor-data/partitions/1/state"), expect);
	assert_string_equal(node(t, "/brokers/topics/sensor-data/partitions/1"), "");
	assert_string_equal(node(t, "/config/topics/sensor-data"),
			    "{\"version\":1,\"config\":{\"retention.ms\":\"1000\"}}");

	/* A fenced broker is not listed; its partitions show the new state. */
	h_kill(&c, 2);
	h_run(&c, 10000, 500);
	assert_null(node(t, "/brokers/ids/2"));
	assert_non_null(node(t, "/brokers/ids/1"));
	assert_non_null(strstr(node(t, "/brokers/topics/sensor-data/partitions/0/state"),
			       "\"leader\":1,"));
	assert_non_null(strstr(node(t, "/brokers/topics/sensor-data/partitions/0/state"),
			       "\"isr\":[1]"));
	check_delta_equals_full(&c, ft);

	/* Deleting the topic removes its subtree and config. */
	static const char *const names[] = {"sensor-data"};
	struct meta_delete_topics_request del = {names, 1};
	struct meta_delete_topics_response dr;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_delete_topics(&c.ctl, c.now, &del, &dr, &batch), KEEL_OK);
	h_propose(&c, batch, -1, 0, -1);
	assert_null(node(t, "/brokers/topics/sensor-data"));
	assert_null(node(t, "/brokers/topics/sensor-data/partitions/0/state"));
	assert_null(node(t, "/config/topics/sensor-data"));
	assert_non_null(node(t, "/brokers/topics"));
	check_delta_equals_full(&c, ft);

	tree_free(&ft->tree);
	meta_zk_ops_close(&ft->ops);
	free(ft);
	h_close(&c);
}

static void test_deltas_match_full_view_through_faults(void **state)
{
	(void)state;
	struct follower_tree *ft = calloc(1, sizeof(*ft));
	meta_zk_ops_init(&ft->ops);
	struct meta_controller_config cfg;
	meta_controller_config_default(&cfg);
	cfg.session_timeout_ms = 3000;
	cfg.rebalance_interval_ms = 4000;
	struct h_cluster c;
	h_init(&c, 11, &cfg);
	c.on_commit = on_commit;
	c.ctx = ft;
	for (int32_t id = 1; id <= 4; id++) {
		h_add_broker(&c, id, id % 2 ? "x" : "y");
	}
	h_run(&c, 1000, 250);
	static const struct meta_config_kv dirty[] = {{META_CONFIG_UNCLEAN_ELECTION, "true"}};
	for (int round = 0; round < 40; round++) {
		char name[16];
		snprintf(name, sizeof(name), "t%d", round % 5);
		int16_t err = h_create_topic(&c, name, 1 + round % 4, (int16_t)(1 + round % 3),
					     round % 3 == 0 ? dirty : NULL, round % 3 == 0);
		assert_true(err == META_ERR_NONE || err == META_ERR_TOPIC_ALREADY_EXISTS ||
			    err == META_ERR_INVALID_REPLICATION_FACTOR);
		int32_t victim = 1 + round % 4;
		if (round % 2 == 0) {
			h_kill(&c, victim);
		} else if (!h_broker(&c, victim)->alive) {
			h_restart(&c, victim);
		} else {
			h_broker(&c, victim)->shutting_down = true;
		}
		if (round % 7 == 3) {
			static const char *names[1];
			names[0] = name;
			struct meta_delete_topics_request del = {names, 1};
			struct meta_delete_topics_response dr;
			struct meta_batch *batch;
			assert_int_equal(meta_controller_delete_topics(&c.ctl, c.now, &del, &dr, &batch),
					 KEEL_OK);
			h_propose(&c, batch, -1, 0, -1);
		}
		if (round % 9 == 5) {
			h_failover(&c, 0);
		}
		h_run(&c, 2500, 250);
		for (uint32_t i = 0; i < c.broker_count; i++) {
			if (!c.brokers[i].alive && round % 3 == 1) {
				h_restart(&c, c.brokers[i].id);
			}
		}
		check_delta_equals_full(&c, ft);
	}
	assert_true(ft->batches > 100);
	/* The view lists exactly the unfenced brokers. */
	for (uint32_t i = 0; i < c.committed.broker_count; i++) {
		const struct meta_broker *b = c.committed.brokers[i];
		char path[32];
		snprintf(path, sizeof(path), "/brokers/ids/%d", b->id);
		assert_true((node(&ft->tree, path) != NULL) == !b->fenced);
	}
	tree_free(&ft->tree);
	meta_zk_ops_close(&ft->ops);
	free(ft);
	h_close(&c);
}

static void test_overflowed_changes_rebuild(void **state)
{
	(void)state;
	struct h_cluster c;
	h_init(&c, 12, NULL);
	h_add_broker(&c, 1, NULL);
	h_run(&c, 1000, 500);
	assert_int_equal(h_create_topic(&c, "a", 3, 1, NULL, 0), META_ERR_NONE);
	struct tree t;
	full_tree(&c.committed, &t);
	/* A stale node that a rebuild must sweep away. */
	t.path[t.count] = strdup("/brokers/topics/gone");
	t.data[t.count] = strdup("{}");
	t.count++;
	struct meta_changes ch;
	meta_changes_init(&ch, 1);
	ch.overflow = true;
	struct meta_zk_ops ops;
	meta_zk_ops_init(&ops);
	assert_int_equal(meta_zk_view_changes(&c.committed, &ch, &ops), KEEL_OK);
	assert_int_equal(ops.items[0].type, META_ZK_DELETE_TREE);
	tree_apply(&t, &ops);
	struct tree full;
	full_tree(&c.committed, &full);
	assert_true(trees_equal(&t, &full));
	tree_free(&full);
	tree_free(&t);
	meta_zk_ops_close(&ops);
	meta_changes_close(&ch);
	h_close(&c);
}

static void test_json_escaping(void **state)
{
	(void)state;
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 4096);
	struct meta_json j;
	meta_json_init(&j, &w);
	meta_json_begin_object(&j);
	meta_json_key(&j, "k\"ey");
	meta_json_str(&j, "a\\b\n\x01");
	meta_json_key(&j, "list");
	meta_json_begin_array(&j);
	meta_json_i64(&j, -5);
	meta_json_null(&j);
	meta_json_begin_object(&j);
	meta_json_end_object(&j);
	meta_json_end_array(&j);
	meta_json_end_object(&j);
	keel_wbuf_u8(&w, 0);
	assert_true(keel_wbuf_ok(&w));
	assert_string_equal((const char *)w.data,
			    "{\"k\\\"ey\":\"a\\\\b\\u000a\\u0001\",\"list\":[-5,null,{}]}");
	/* Too deep or unbalanced fails the writer. */
	keel_wbuf_reset(&w);
	meta_json_init(&j, &w);
	for (int i = 0; i < META_JSON_MAX_DEPTH + 1; i++) {
		meta_json_begin_array(&j);
	}
	assert_false(keel_wbuf_ok(&w));
	keel_wbuf_reset(&w);
	meta_json_init(&j, &w);
	meta_json_end_object(&j);
	assert_false(keel_wbuf_ok(&w));
	keel_wbuf_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_znode_json),
		cmocka_unit_test(test_deltas_match_full_view_through_faults),
		cmocka_unit_test(test_overflowed_changes_rebuild),
		cmocka_unit_test(test_json_escaping),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
