/* Unit tests: partition reassignment on the pure controller (KIP-455) —
 * validation, start, completion when the adding replicas join the ISR (the
 * leader moved off a removed replica), reorder, cancel, list, a failover
 * in the middle, and the image snapshot / ZooKeeper view of an ongoing one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "meta/zkview.h"
#include "test_meta_harness.h"

/* 4 brokers, registered and unfenced; topic "r": 1 partition, RF 2. */
static void start4(struct h_cluster *c)
{
	struct meta_controller_config cfg;
	meta_controller_config_default(&cfg);
	cfg.rebalance_interval_ms = 0; /* leaders move only by the rules tested */
	h_init(c, 7, &cfg);
	for (int32_t id = 1; id <= 4; id++) {
		h_add_broker(c, id, NULL);
	}
	h_run(c, 1000, 500);
	assert_int_equal(h_create_topic(c, "r", 1, 2, NULL, 0), META_ERR_NONE);
}

/* One AlterPartitionReassignments item; returns its error. */
static int16_t h_reassign(struct h_cluster *c, const char *topic, int32_t pid,
			  const int32_t *target, uint32_t n, bool cancel)
{
	struct meta_reassign_partition p = {pid, cancel, target, n};
	struct meta_reassign_topic t = {topic, &p, 1};
	struct meta_alter_reassignments_request req = {&t, 1};
	struct meta_alter_reassignments_response resp;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_alter_reassignments(&c->ctl, c->now, &req, &resp, &batch),
			 KEEL_OK);
	assert_int_equal(resp.result_count, 1);
	int16_t err = resp.results[0].error;
	if (err != META_ERR_NONE) {
		assert_non_null(resp.results[0].error_message);
	}
	h_propose(c, batch, -1, 0, -1);
	return err;
}

static uint32_t h_list_count(struct h_cluster *c)
{
	struct meta_list_reassignments_request req = {NULL, 0};
	struct meta_list_reassignments_response resp;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_list_reassignments(&c->ctl, c->now, &req, &resp, &batch),
			 KEEL_OK);
	assert_null(batch);
	return resp.reassignment_count;
}

/* ListPartitionReassignments of one topic (`n` partitions, 0 = all). */
static uint32_t h_list_filtered(struct h_cluster *c, const char *topic, const int32_t *parts,
				uint32_t n)
{
	struct meta_elect_topic t = {topic, parts, n};
	struct meta_list_reassignments_request req = {&t, 1};
	struct meta_list_reassignments_response resp;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_list_reassignments(&c->ctl, c->now, &req, &resp, &batch),
			 KEEL_OK);
	for (uint32_t i = 0; i < resp.reassignment_count; i++) {
		assert_string_equal(resp.reassignments[i].topic, topic);
	}
	return resp.reassignment_count;
}

static bool list_is(const int32_t *v, uint32_t n, const int32_t *want, uint32_t nw)
{
	return n == nw && (n == 0 || memcmp(v, want, n * sizeof(int32_t)) == 0);
}

/* The broker of 1..4 that is not in `a`/`b` and not `skip`. */
static int32_t other(int32_t a, int32_t b, int32_t skip)
{
	for (int32_t id = 1; id <= 4; id++) {
		if (id != a && id != b && id != skip) {
			return id;
		}
	}
	return -1;
}

static void test_validation(void **state)
{
	(void)state;
	struct h_cluster c;
	start4(&c);
	static const int32_t ok[] = {1, 2};
	static const int32_t dup[] = {1, 1};
	static const int32_t unknown[] = {1, 9};
	static const int32_t negative[] = {-1, 2};
	assert_int_equal(h_reassign(&c, "nope", 0, ok, 2, false),
			 META_ERR_UNKNOWN_TOPIC_OR_PARTITION);
	assert_int_equal(h_reassign(&c, "r", 1, ok, 2, false), META_ERR_UNKNOWN_TOPIC_OR_PARTITION);
	assert_int_equal(h_reassign(&c, "r", 0, ok, 0, false), META_ERR_INVALID_REPLICA_ASSIGNMENT);
	assert_int_equal(h_reassign(&c, "r", 0, dup, 2, false), META_ERR_INVALID_REPLICA_ASSIGNMENT);
	assert_int_equal(h_reassign(&c, "r", 0, unknown, 2, false),
			 META_ERR_INVALID_REPLICA_ASSIGNMENT);
	assert_int_equal(h_reassign(&c, "r", 0, negative, 2, false),
			 META_ERR_INVALID_REPLICA_ASSIGNMENT);
	assert_int_equal(h_reassign(&c, "r", 0, NULL, 0, true), META_ERR_NO_REASSIGNMENT_IN_PROGRESS);
	assert_int_equal(h_list_count(&c), 0);
	assert_false(meta_partition_reassigning(h_partition(&c, "r", 0)));
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

/* {a,b} led by a -> {b,x}: in progress while x is out of the ISR; then x
 * joins, the controller completes it and b leads (a is removed). */
static void test_reassign_moves_leader_and_completes(void **state)
{
	(void)state;
	struct h_cluster c;
	start4(&c);
	const struct meta_partition *p = h_partition(&c, "r", 0);
	int32_t a = p->replicas[0], b = p->replicas[1];
	assert_int_equal(p->leader, a);
	int32_t x = other(a, b, -1);
	int32_t epoch = p->partition_epoch, leader_epoch = p->leader_epoch;

	c.expand_isr = false; /* x has not caught up yet */
	int32_t target[] = {b, x};
	assert_int_equal(h_reassign(&c, "r", 0, target, 2, false), META_ERR_NONE);
	p = h_partition(&c, "r", 0);
	int32_t replicas[] = {b, x, a}, adding[] = {x}, removing[] = {a}, isr[] = {a, b};
	assert_true(list_is(p->replicas, p->replica_count, replicas, 3));
	assert_true(list_is(p->adding, p->adding_count, adding, 1));
	assert_true(list_is(p->removing, p->removing_count, removing, 1));
	assert_int_equal(p->isr_count, 2);
	assert_true(meta_list_contains(p->isr, p->isr_count, a));
	assert_true(meta_list_contains(p->isr, p->isr_count, b));
	assert_int_equal(p->leader, a); /* the leader stays until completion */
	assert_int_equal(p->partition_epoch, epoch + 1);
	assert_int_equal(h_list_count(&c), 1);
	(void)isr;

	/* Ticks and heartbeats alone do not complete it. */
	h_run(&c, 2000, 500);
	assert_true(meta_partition_reassigning(h_partition(&c, "r", 0)));

	/* x catches up: the leader adds it to the ISR; that completes it. */
	c.expand_isr = true;
	h_run(&c, 2000, 500);
	p = h_partition(&c, "r", 0);
	assert_false(meta_partition_reassigning(p));
	assert_true(list_is(p->replicas, p->replica_count, target, 2));
	assert_int_equal(p->isr_count, 2);
	assert_true(meta_list_contains(p->isr, p->isr_count, b));
	assert_true(meta_list_contains(p->isr, p->isr_count, x));
	assert_int_equal(p->leader, b); /* the first target replica in the ISR */
	assert_int_equal(p->leader_epoch, leader_epoch + 1);
	assert_int_equal(h_list_count(&c), 0);
	assert_int_equal(c.ignored_records, 0);
	struct meta_errbuf eb;
	assert_true(meta_image_check(&c.committed, &eb));
	h_close(&c);
}

/* Same brokers in another order: done at once, nothing left ongoing. A
 * target that only drops a replica completes at once too. */
static void test_reorder_and_shrink_complete_at_once(void **state)
{
	(void)state;
	struct h_cluster c;
	start4(&c);
	const struct meta_partition *p = h_partition(&c, "r", 0);
	int32_t a = p->replicas[0], b = p->replicas[1];
	c.expand_isr = false;
	int32_t swapped[] = {b, a};
	assert_int_equal(h_reassign(&c, "r", 0, swapped, 2, false), META_ERR_NONE);
	p = h_partition(&c, "r", 0);
	assert_false(meta_partition_reassigning(p));
	assert_true(list_is(p->replicas, p->replica_count, swapped, 2));
	int32_t only_a[] = {a};
	assert_int_equal(h_reassign(&c, "r", 0, only_a, 1, false), META_ERR_NONE);
	p = h_partition(&c, "r", 0);
	assert_false(meta_partition_reassigning(p));
	assert_true(list_is(p->replicas, p->replica_count, only_a, 1));
	assert_true(list_is(p->isr, p->isr_count, only_a, 1));
	assert_int_equal(p->leader, a);
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

/* Cancel reverts to the replicas before the start; the ISR loses the
 * adding replicas that had joined it. */
static void test_cancel_reverts(void **state)
{
	(void)state;
	struct h_cluster c;
	start4(&c);
	const struct meta_partition *p = h_partition(&c, "r", 0);
	int32_t a = p->replicas[0], b = p->replicas[1];
	int32_t x = other(a, b, -1), y = other(a, b, x);
	c.expand_isr = false;
	int32_t target[] = {x, y};
	assert_int_equal(h_reassign(&c, "r", 0, target, 2, false), META_ERR_NONE);
	p = h_partition(&c, "r", 0);
	assert_int_equal(p->replica_count, 4);
	assert_int_equal(p->adding_count, 2);
	assert_int_equal(p->removing_count, 2);
	static const int32_t p0[] = {0}, p5[] = {5};
	assert_int_equal(h_list_filtered(&c, "r", p0, 1), 1);
	assert_int_equal(h_list_filtered(&c, "r", p5, 1), 0); /* unknown: left out */
	assert_int_equal(h_list_filtered(&c, "r", NULL, 0), 1); /* all of the topic's */
	assert_int_equal(h_list_filtered(&c, "nope", NULL, 0), 0);
	assert_int_equal(h_reassign(&c, "r", 0, NULL, 0, true), META_ERR_NONE);
	p = h_partition(&c, "r", 0);
	int32_t original[] = {a, b};
	assert_false(meta_partition_reassigning(p));
	assert_true(list_is(p->replicas, p->replica_count, original, 2));
	assert_int_equal(p->isr_count, 2);
	assert_int_equal(p->leader, a);
	assert_int_equal(h_reassign(&c, "r", 0, NULL, 0, true), META_ERR_NO_REASSIGNMENT_IN_PROGRESS);
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

/* A new controller finds the ongoing reassignment in the image, lists it,
 * and completes it when the ISR grows. */
static void test_failover_mid_reassignment(void **state)
{
	(void)state;
	struct h_cluster c;
	start4(&c);
	const struct meta_partition *p = h_partition(&c, "r", 0);
	int32_t a = p->replicas[0], b = p->replicas[1];
	int32_t x = other(a, b, -1);
	c.expand_isr = false;
	int32_t target[] = {a, x};
	assert_int_equal(h_reassign(&c, "r", 0, target, 2, false), META_ERR_NONE);
	h_failover(&c, 0);
	assert_int_equal(h_list_count(&c), 1);
	h_run(&c, 1000, 500);
	assert_true(meta_partition_reassigning(h_partition(&c, "r", 0)));
	c.expand_isr = true;
	h_run(&c, 2000, 500);
	p = h_partition(&c, "r", 0);
	assert_false(meta_partition_reassigning(p));
	assert_true(list_is(p->replicas, p->replica_count, target, 2));
	assert_int_equal(p->leader, a); /* a stays: it is in the target */
	assert_true(h_same_decisions(&c.committed, meta_controller_image(&c.ctl)));
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

struct view_watch {
	struct meta_zk_ops *ops;
	bool deleted;
};

/* After each committed batch: its ZooKeeper delta; notes a DELETE of
 * /admin/reassign_partitions. */
static void watch_view(struct h_cluster *c, const struct meta_batch *b, void *ctx)
{
	(void)b;
	struct view_watch *w = ctx;
	meta_zk_ops_reset(w->ops);
	assert_int_equal(meta_zk_view_changes(&c->committed, &c->changes, w->ops), KEEL_OK);
	for (uint32_t i = 0; i < w->ops->count; i++) {
		w->deleted |= w->ops->items[i].type == META_ZK_DELETE &&
			      strcmp(w->ops->items[i].path, "/admin/reassign_partitions") == 0;
	}
}

/* An ongoing reassignment survives the image snapshot (format 1) and shows
 * in the ZooKeeper view as Kafka 2.x had it. */
static void test_snapshot_and_zk_view(void **state)
{
	(void)state;
	struct h_cluster c;
	start4(&c);
	const struct meta_partition *p = h_partition(&c, "r", 0);
	int32_t a = p->replicas[0], b = p->replicas[1];
	int32_t x = other(a, b, -1);
	c.expand_isr = false;
	int32_t target[] = {b, x};
	assert_int_equal(h_reassign(&c, "r", 0, target, 2, false), META_ERR_NONE);

	size_t size;
	enum keel_err err;
	uint8_t *data = meta_image_save_to_memory(&c.committed, 1u << 20, &size, &err);
	assert_non_null(data);
	assert_int_equal(data[5], 1); /* format 1: it has a reassignment */
	struct meta_image back;
	meta_image_init(&back, NULL);
	struct meta_errbuf eb;
	assert_int_equal(meta_image_load_from_memory(&back, data, size, &eb), KEEL_OK);
	assert_true(meta_image_hash(&back) == meta_image_hash(&c.committed));
	const struct meta_topic *t = meta_image_topic(&back, "r");
	assert_int_equal(t->partitions[0].adding_count, 1);
	assert_int_equal(t->partitions[0].adding[0], x);
	assert_int_equal(t->partitions[0].removing[0], a);
	meta_image_close(&back);
	free(data);

	struct meta_zk_ops ops;
	meta_zk_ops_init(&ops);
	assert_int_equal(meta_zk_view_full(&c.committed, &ops), KEEL_OK);
	char want_topic[128], want_admin[128];
	snprintf(want_topic, sizeof(want_topic),
		 "\"adding_replicas\":{\"0\":[%d]},\"removing_replicas\":{\"0\":[%d]}", x, a);
	snprintf(want_admin, sizeof(want_admin),
		 "{\"version\":1,\"partitions\":[{\"topic\":\"r\",\"partition\":0,\"replicas\":[%d,%d]}]}",
		 b, x);
	bool topic_seen = false, admin_seen = false;
	for (uint32_t i = 0; i < ops.count; i++) {
		const struct meta_zk_op *op = &ops.items[i];
		char text[1024];
		size_t n = op->size < sizeof(text) - 1 ? op->size : sizeof(text) - 1;
		memcpy(text, op->data, n);
		text[n] = '\0';
		if (strcmp(op->path, "/brokers/topics/r") == 0) {
			topic_seen = strstr(text, want_topic) != NULL;
		}
		if (strcmp(op->path, "/admin/reassign_partitions") == 0) {
			admin_seen = strcmp(text, want_admin) == 0;
		}
	}
	assert_true(topic_seen);
	assert_true(admin_seen);

	/* Completion: the delta of that batch deletes /admin/reassign_partitions. */
	struct view_watch w = {&ops, false};
	c.on_commit = watch_view;
	c.ctx = &w;
	c.expand_isr = true;
	h_run(&c, 500, 500);
	assert_false(meta_partition_reassigning(h_partition(&c, "r", 0)));
	assert_true(w.deleted);
	meta_zk_ops_close(&ops);
	h_close(&c);
}

/* The throttle configs --throttle sets are known names with checked values. */
static void test_throttle_configs(void **state)
{
	(void)state;
	struct h_cluster c;
	start4(&c);
	static const struct meta_config_kv ok[] = {
		{"leader.replication.throttled.replicas", "0:1,0:2"},
		{"follower.replication.throttled.replicas", "*"},
		{"leader.replication.throttled.rate", "1000000"},
		{"follower.replication.throttled.rate", "0"}};
	assert_int_equal(h_create_topic(&c, "t", 1, 1, ok, 4), META_ERR_NONE);
	assert_string_equal(meta_image_config(&c.committed, META_RESOURCE_TOPIC, "t",
					      "leader.replication.throttled.replicas"),
			    "0:1,0:2");
	static const struct meta_config_kv bad_list[] = {
		{"leader.replication.throttled.replicas", "0:1,"}};
	static const struct meta_config_kv bad_pair[] = {
		{"follower.replication.throttled.replicas", "1-2"}};
	static const struct meta_config_kv bad_rate[] = {
		{"leader.replication.throttled.rate", "-5"}};
	assert_int_equal(h_create_topic(&c, "u", 1, 1, bad_list, 1), META_ERR_INVALID_CONFIG);
	assert_int_equal(h_create_topic(&c, "u", 1, 1, bad_pair, 1), META_ERR_INVALID_CONFIG);
	assert_int_equal(h_create_topic(&c, "u", 1, 1, bad_rate, 1), META_ERR_INVALID_CONFIG);
	assert_null(meta_image_topic(&c.committed, "u"));
	h_close(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_validation),
		cmocka_unit_test(test_reassign_moves_leader_and_completes),
		cmocka_unit_test(test_reorder_and_shrink_complete_at_once),
		cmocka_unit_test(test_cancel_reverts),
		cmocka_unit_test(test_failover_mid_reassignment),
		cmocka_unit_test(test_snapshot_and_zk_view),
		cmocka_unit_test(test_throttle_configs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
