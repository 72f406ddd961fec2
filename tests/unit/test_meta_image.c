/* Unit tests: the metadata image — apply, re-validation of stale records,
 * change sets, snapshot save/load, hash and clone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "meta/image.h"
#include "test_meta_util.h"

static const int32_t r12[] = {1, 2};
static const int32_t r23[] = {2, 3};
static const int32_t r1[] = {1};
static const int32_t r2[] = {2};

/* 3 brokers (epochs 1..3, unfenced), topic "sensor-data" (seed 5) with 2
 * partitions, a topic config. Offsets 1 and 2. */
static void build_basic(struct meta_image *img)
{
	struct meta_record recs[16];
	uint32_t n = 0;
	recs[n++] = tm_register(1, 1, "a");
	recs[n++] = tm_register(2, 2, "b");
	recs[n++] = tm_register(3, 3, NULL);
	recs[n++] = tm_broker_ref(META_REC_UNFENCE_BROKER, 1, 1);
	recs[n++] = tm_broker_ref(META_REC_UNFENCE_BROKER, 2, 2);
	recs[n++] = tm_broker_ref(META_REC_UNFENCE_BROKER, 3, 3);
	struct meta_apply_result res;
	assert_int_equal(tm_apply(img, 1, 1, recs, n, &res, NULL), KEEL_OK);
	assert_int_equal(res.applied, n);
	assert_int_equal(res.ignored, 0);

	n = 0;
	recs[n++] = tm_topic("sensor-data", 5);
	recs[n++] = tm_partition(5, 0, r12, 2, r12, 2, 1);
	recs[n++] = tm_partition(5, 1, r23, 2, r23, 2, 2);
	recs[n++] = tm_config(META_RESOURCE_TOPIC, "sensor-data", "retention.ms", "1000");
	assert_int_equal(tm_apply(img, 2, 1, recs, n, &res, NULL), KEEL_OK);
	assert_int_equal(res.applied, n);
}

static void test_apply_builds_image(void **state)
{
	(void)state;
	struct meta_image img;
	meta_image_init(&img, NULL);
	build_basic(&img);
	assert_int_equal(img.offset, 2);
	assert_int_equal(img.broker_count, 3);
	assert_int_equal(img.last_broker_epoch, 3);
	assert_int_equal(img.controller_id, 1);
	assert_int_equal(img.controller_epoch, 1);
	const struct meta_broker *b = meta_image_broker(&img, 2);
	assert_non_null(b);
	assert_string_equal(b->rack, "b");
	assert_false(b->fenced);
	assert_int_equal(b->registered_offset, 1);
	assert_true(meta_image_broker_active(&img, 3));
	assert_null(meta_image_broker(&img, 4));

	const struct meta_topic *t = meta_image_topic(&img, "sensor-data");
	assert_non_null(t);
	assert_int_equal(t->partition_count, 2);
	assert_ptr_equal(meta_image_topic_by_id(&img, t->id), t);
	const struct meta_partition *p = meta_image_partition(&img, t->id, 1);
	assert_non_null(p);
	assert_int_equal(p->leader, 2);
	assert_int_equal(p->isr_count, 2);
	assert_null(meta_image_partition(&img, t->id, 2));
	assert_string_equal(meta_image_config(&img, META_RESOURCE_TOPIC, "sensor-data",
					      "retention.ms"),
			    "1000");
	assert_false(meta_image_unclean_election(&img, "sensor-data"));
	struct meta_errbuf eb;
	assert_true(meta_image_check(&img, &eb));
	meta_image_close(&img);
}

static void test_partition_change_revalidation(void **state)
{
	(void)state;
	struct meta_image img;
	meta_image_init(&img, NULL);
	build_basic(&img);
	uint8_t id[16];
	tm_topic_id(id, 5);
	struct meta_apply_result res;

	/* Good: ISR shrink to {1}, partition epoch 0 -> 1. */
	struct meta_record c = tm_change(5, 0, 1);
	c.partition_change.fields = META_PC_ISR;
	c.partition_change.isr = r1;
	c.partition_change.isr_count = 1;
	assert_int_equal(tm_apply(&img, 3, 1, &c, 1, &res, NULL), KEEL_OK);
	assert_int_equal(res.applied, 1);
	const struct meta_partition *p = meta_image_partition(&img, id, 0);
	assert_int_equal(p->isr_count, 1);
	assert_int_equal(p->partition_epoch, 1);
	assert_int_equal(p->leader_epoch, 0);

	/* The same change again is stale (epoch 1 is taken): ignored. */
	uint64_t before = meta_image_hash(&img);
	assert_int_equal(tm_apply(&img, 4, 1, &c, 1, &res, NULL), KEEL_OK);
	assert_int_equal(res.ignored, 1);
	assert_int_equal(p->partition_epoch, 1);

	/* Leader change with a leader epoch that skips one: ignored. */
	struct meta_record l = tm_change(5, 0, 2);
	l.partition_change.fields = META_PC_LEADER | META_PC_ISR;
	l.partition_change.leader = 2;
	l.partition_change.leader_epoch = 2;
	l.partition_change.isr = r2;
	l.partition_change.isr_count = 1;
	assert_int_equal(tm_apply(&img, 5, 1, &l, 1, &res, NULL), KEEL_OK);
	assert_int_equal(res.ignored, 1);

	/* A leader outside the ISR: ignored. */
	l.partition_change.leader_epoch = 1;
	l.partition_change.fields = META_PC_LEADER;
	assert_int_equal(tm_apply(&img, 6, 1, &l, 1, &res, NULL), KEEL_OK);
	assert_int_equal(res.ignored, 1);

	/* An ISR member that is not a replica: ignored. */
	static const int32_t bad_isr[] = {1, 3};
	struct meta_record i = tm_change(5, 0, 2);
	i.partition_change.fields = META_PC_ISR;
	i.partition_change.isr = bad_isr;
	i.partition_change.isr_count = 2;
	assert_int_equal(tm_apply(&img, 7, 1, &i, 1, &res, NULL), KEEL_OK);
	assert_int_equal(res.ignored, 1);
	/* Ignored records changed nothing but the offset. */
	img.offset = 3;
	assert_true(meta_image_hash(&img) == before);
	img.offset = 7;

	/* Valid leader change: 1 -> 2 with ISR {2}, epochs chain. */
	l.partition_change.fields = META_PC_LEADER | META_PC_ISR;
	assert_int_equal(tm_apply(&img, 8, 1, &l, 1, &res, NULL), KEEL_OK);
	assert_int_equal(res.applied, 1);
	assert_int_equal(p->leader, 2);
	assert_int_equal(p->leader_epoch, 1);
	assert_int_equal(p->partition_epoch, 2);

	/* Unknown topic and partition. */
	struct meta_record u = tm_change(9, 0, 1);
	u.partition_change.fields = META_PC_ISR;
	u.partition_change.isr = r1;
	u.partition_change.isr_count = 1;
	struct meta_record u2 = tm_change(5, 7, 1);
	u2.partition_change.fields = META_PC_ISR;
	u2.partition_change.isr = r1;
	u2.partition_change.isr_count = 1;
	struct meta_record both[2] = {u, u2};
	assert_int_equal(tm_apply(&img, 9, 1, both, 2, &res, NULL), KEEL_OK);
	assert_int_equal(res.ignored, 2);
	assert_true(meta_image_check(&img, NULL));
	meta_image_close(&img);
}

static void test_broker_epochs_and_fencing(void **state)
{
	(void)state;
	struct meta_image img;
	meta_image_init(&img, NULL);
	build_basic(&img);
	struct meta_apply_result res;

	/* Re-registration of broker 2 with a new epoch replaces the old one. */
	struct meta_record r = tm_register(2, 4, "b2");
	assert_int_equal(tm_apply(&img, 3, 1, &r, 1, &res, NULL), KEEL_OK);
	assert_int_equal(res.applied, 1);
	const struct meta_broker *b = meta_image_broker(&img, 2);
	assert_int_equal(b->epoch, 4);
	assert_true(b->fenced);
	assert_int_equal(b->registered_offset, 3);

	/* A fence of the old registration (epoch 2) is stale. */
	struct meta_record f = tm_broker_ref(META_REC_FENCE_BROKER, 3, 1);
	struct meta_record f2 = tm_broker_ref(META_REC_UNFENCE_BROKER, 2, 2);
	struct meta_record pair[2] = {f, f2};
	assert_int_equal(tm_apply(&img, 4, 1, pair, 2, &res, NULL), KEEL_OK);
	assert_int_equal(res.ignored, 2);

	/* A registration whose epoch is not newer than the last is stale. */
	struct meta_record old = tm_register(9, 3, NULL);
	assert_int_equal(tm_apply(&img, 5, 1, &old, 1, &res, NULL), KEEL_OK);
	assert_int_equal(res.ignored, 1);
	assert_null(meta_image_broker(&img, 9));

	/* Fencing twice: the second is ignored. Controlled shutdown blocks unfence. */
	struct meta_record fence = tm_broker_ref(META_REC_FENCE_BROKER, 1, 1);
	struct meta_record fence_again = fence;
	struct meta_record cs;
	memset(&cs, 0, sizeof(cs));
	cs.type = META_REC_BROKER_REGISTRATION_CHANGE;
	cs.broker_change = (struct meta_broker_change_record){1, 1, META_CHANGE_NONE, 1};
	struct meta_record unfence = tm_broker_ref(META_REC_UNFENCE_BROKER, 1, 1);
	struct meta_record seq[4] = {fence, fence_again, cs, unfence};
	assert_int_equal(tm_apply(&img, 6, 1, seq, 4, &res, NULL), KEEL_OK);
	assert_int_equal(res.applied, 2);
	assert_int_equal(res.ignored, 2);
	b = meta_image_broker(&img, 1);
	assert_true(b->fenced);
	assert_true(b->in_controlled_shutdown);

	/* Unregister with the right epoch removes it. */
	struct meta_record un = tm_broker_ref(META_REC_UNREGISTER_BROKER, 3, 3);
	assert_int_equal(tm_apply(&img, 7, 1, &un, 1, &res, NULL), KEEL_OK);
	assert_int_equal(res.applied, 1);
	assert_null(meta_image_broker(&img, 3));
	assert_int_equal(img.broker_count, 2);
	assert_true(meta_image_check(&img, NULL));
	meta_image_close(&img);
}

static void test_stale_controller_batch_and_offsets(void **state)
{
	(void)state;
	struct meta_image img;
	meta_image_init(&img, NULL);
	build_basic(&img);
	struct meta_changes ch;
	meta_changes_init(&ch, 1000);
	struct meta_apply_result res;

	/* Controller epoch 3 takes over. */
	struct meta_record noop = {.type = META_REC_NOOP};
	assert_int_equal(tm_apply(&img, 3, 3, &noop, 1, &res, &ch), KEEL_OK);
	assert_int_equal(img.controller_epoch, 3);
	assert_int_equal(ch.count, 1);
	assert_int_equal(ch.items[0].kind, META_CHANGE_CONTROLLER);

	/* A batch from epoch 2 (a deposed controller) is ignored whole. */
	meta_changes_reset(&ch);
	struct meta_record t = tm_topic("late", 9);
	assert_int_equal(tm_apply(&img, 4, 2, &t, 1, &res, &ch), KEEL_OK);
	assert_true(res.batch_ignored);
	assert_int_equal(res.ignored, 1);
	assert_null(meta_image_topic(&img, "late"));
	assert_int_equal(ch.count, 0);
	assert_int_equal(img.offset, 4);

	/* Offsets must increase. */
	assert_int_equal(tm_apply(&img, 4, 3, &t, 1, &res, &ch), KEEL_INVAL);
	assert_null(meta_image_topic(&img, "late"));
	meta_changes_close(&ch);
	meta_image_close(&img);
}

static void test_topics_configs_and_changes(void **state)
{
	(void)state;
	struct meta_image img;
	meta_image_init(&img, NULL);
	build_basic(&img);
	struct meta_changes ch;
	meta_changes_init(&ch, 1000);
	struct meta_apply_result res;

	struct meta_record recs[8];
	uint32_t n = 0;
	recs[n++] = tm_topic("sensor-data", 6); /* name taken */
	recs[n++] = tm_topic("other", 5);       /* id taken */
	recs[n++] = tm_topic("logs", 7);
	recs[n++] = tm_partition(7, 1, r12, 2, r12, 2, 1); /* out of order */
	recs[n++] = tm_partition(7, 0, r12, 2, r12, 2, 1);
	recs[n++] = tm_config(META_RESOURCE_TOPIC, "nope", "a", "b"); /* no such topic */
	recs[n++] = tm_config(META_RESOURCE_BROKER, "", META_CONFIG_UNCLEAN_ELECTION, "true");
	recs[n++] = tm_config(META_RESOURCE_TOPIC, "logs", META_CONFIG_UNCLEAN_ELECTION, "false");
	assert_int_equal(tm_apply(&img, 3, 1, recs, n, &res, &ch), KEEL_OK);
	assert_int_equal(res.applied, 4);
	assert_int_equal(res.ignored, 4);
	assert_true(meta_image_unclean_election(&img, "sensor-data")); /* cluster default */
	assert_false(meta_image_unclean_election(&img, "logs"));       /* topic override */
	assert_int_equal(ch.count, 4);
	assert_int_equal(ch.items[0].kind, META_CHANGE_TOPIC_CREATED);
	assert_int_equal(ch.items[1].kind, META_CHANGE_PARTITION);
	assert_true(ch.items[1].created);
	assert_int_equal(ch.items[2].kind, META_CHANGE_CONFIG);
	assert_string_equal(ch.items[3].name, "logs");

	/* Removing the topic removes its configs and reports name + size. */
	meta_changes_reset(&ch);
	struct meta_record rm;
	memset(&rm, 0, sizeof(rm));
	rm.type = META_REC_REMOVE_TOPIC;
	tm_topic_id(rm.remove_topic.topic_id, 5);
	assert_int_equal(tm_apply(&img, 4, 1, &rm, 1, &res, &ch), KEEL_OK);
	assert_int_equal(res.applied, 1);
	assert_null(meta_image_topic(&img, "sensor-data"));
	assert_null(meta_image_config(&img, META_RESOURCE_TOPIC, "sensor-data", "retention.ms"));
	assert_int_equal(img.partition_total, 1);
	assert_int_equal(ch.count, 1);
	assert_int_equal(ch.items[0].kind, META_CHANGE_TOPIC_REMOVED);
	assert_string_equal(ch.items[0].name, "sensor-data");
	assert_int_equal(ch.items[0].partition_count, 2);

	/* Config delete, and delete of an unset key (ignored). */
	struct meta_record del = tm_config(META_RESOURCE_BROKER, "", META_CONFIG_UNCLEAN_ELECTION,
					   NULL);
	struct meta_record two[2] = {del, del};
	assert_int_equal(tm_apply(&img, 5, 1, two, 2, &res, NULL), KEEL_OK);
	assert_int_equal(res.applied, 1);
	assert_int_equal(res.ignored, 1);
	assert_true(meta_image_check(&img, NULL));
	meta_changes_close(&ch);
	meta_image_close(&img);
}

static void test_changes_bounded(void **state)
{
	(void)state;
	struct meta_image img;
	meta_image_init(&img, NULL);
	struct meta_changes ch;
	meta_changes_init(&ch, 2);
	struct meta_record recs[3] = {tm_register(1, 1, NULL), tm_register(2, 2, NULL),
				      tm_register(3, 3, NULL)};
	struct meta_apply_result res;
	assert_int_equal(tm_apply(&img, 1, 1, recs, 3, &res, &ch), KEEL_OK);
	assert_int_equal(res.applied, 3);
	assert_true(ch.overflow);
	assert_true(ch.count <= 2);
	meta_changes_close(&ch);
	meta_image_close(&img);
}

static void test_snapshot_roundtrip_and_hash(void **state)
{
	(void)state;
	struct meta_image img;
	meta_image_init(&img, NULL);
	build_basic(&img);
	struct meta_record unclean = tm_config(META_RESOURCE_BROKER, "", "x.y", "z");
	assert_int_equal(tm_apply(&img, 3, 2, &unclean, 1, NULL, NULL), KEEL_OK);

	size_t size;
	enum keel_err err;
	uint8_t *data = meta_image_save_to_memory(&img, 1 << 20, &size, &err);
	assert_non_null(data);
	assert_int_equal(err, KEEL_OK);
	assert_memory_equal(data, "KMI1", 4);

	struct meta_image back;
	meta_image_init(&back, NULL);
	struct meta_errbuf eb;
	assert_int_equal(meta_image_load_from_memory(&back, data, size, &eb), KEEL_OK);
	assert_true(meta_image_hash(&back) == meta_image_hash(&img));
	assert_true(meta_image_check(&back, &eb));
	assert_int_equal(back.offset, 3);
	assert_int_equal(back.controller_epoch, 2);
	assert_int_equal(back.last_broker_epoch, 3);
	assert_non_null(meta_image_topic(&back, "sensor-data"));
	uint8_t id[16];
	tm_topic_id(id, 5);
	assert_non_null(meta_image_topic_by_id(&back, id));
	assert_string_equal(meta_image_broker(&back, 1)->endpoints[0].host, "localhost");

	/* Clone equals too; a further change makes hashes differ. */
	struct meta_image copy;
	meta_image_init(&copy, NULL);
	assert_int_equal(meta_image_clone(&copy, &img), KEEL_OK);
	assert_true(meta_image_hash(&copy) == meta_image_hash(&img));
	struct meta_record f = tm_broker_ref(META_REC_FENCE_BROKER, 1, 1);
	assert_int_equal(tm_apply(&copy, 4, 2, &f, 1, NULL, NULL), KEEL_OK);
	assert_true(meta_image_hash(&copy) != meta_image_hash(&img));

	/* Every single-bit flip is caught (checksum or structure). */
	for (size_t i = 0; i < size; i++) {
		data[i] ^= 0x10;
		enum keel_err e = meta_image_load_from_memory(&back, data, size, &eb);
		assert_int_not_equal(e, KEEL_OK);
		assert_int_equal(back.broker_count, 0); /* left empty */
		data[i] ^= 0x10;
	}
	/* Every truncation is refused. */
	for (size_t cut = 0; cut < size; cut++) {
		assert_int_not_equal(meta_image_load_from_memory(&back, data, cut, &eb), KEEL_OK);
	}
	/* A newer format is UNSUPPORTED (this image has no reassignment and no
	 * producer ids, so it saved as 0). */
	assert_int_equal(data[5], 0);
	data[5] = 3;
	assert_int_equal(meta_image_load_from_memory(&back, data, size, &eb), KEEL_UNSUPPORTED);
	data[5] = 0;
	assert_int_equal(meta_image_load_from_memory(&back, data, size, &eb), KEEL_OK);

	/* Producer ids handed out: format 2 carries the next one (and each
	 * partition's empty reassignment lists); without any, format 0
	 * (readable by servers that predate both). */
	assert_int_equal(back.next_producer_id, 0);
	back.next_producer_id = 3000;
	size_t size1;
	uint8_t *data1 = meta_image_save_to_memory(&back, 1 << 20, &size1, &err);
	assert_non_null(data1);
	assert_true(size1 > size + 8);
	assert_int_equal(data1[5], 2);
	assert_int_equal(meta_image_load_from_memory(&copy, data1, size1, &eb), KEEL_OK);
	assert_int_equal(copy.next_producer_id, 3000);
	data1[5] = 0; /* read as format 0: the checksum no longer matches */
	assert_int_not_equal(meta_image_load_from_memory(&copy, data1, size1, &eb), KEEL_OK);
	free(data1);

	/* Limits apply on load. */
	struct meta_image_limits small;
	meta_image_limits_default(&small);
	small.max_brokers = 2;
	struct meta_image tiny;
	meta_image_init(&tiny, &small);
	assert_int_equal(meta_image_load_from_memory(&tiny, data, size, &eb), KEEL_TOOBIG);
	meta_image_close(&tiny);

	free(data);
	meta_image_close(&copy);
	meta_image_close(&back);
	meta_image_close(&img);
}

static void test_same_log_same_hash(void **state)
{
	(void)state;
	struct meta_image a, b;
	meta_image_init(&a, NULL);
	meta_image_init(&b, NULL);
	build_basic(&a);
	build_basic(&b);
	assert_true(meta_image_hash(&a) == meta_image_hash(&b));
	/* The empty image has a fixed, non-zero hash. */
	struct meta_image e;
	meta_image_init(&e, NULL);
	assert_true(meta_image_hash(&e) != 0);
	assert_true(meta_image_hash(&e) != meta_image_hash(&a));
	meta_image_close(&e);
	meta_image_close(&a);
	meta_image_close(&b);
}

static void test_limits_on_apply(void **state)
{
	(void)state;
	struct meta_image_limits lim;
	meta_image_limits_default(&lim);
	lim.max_topics = 1;
	lim.max_partitions = 1;
	struct meta_image img;
	meta_image_init(&img, &lim);
	struct meta_record recs[4] = {tm_topic("a", 1), tm_topic("b", 2),
				      tm_partition(1, 0, r1, 1, r1, 1, 1),
				      tm_partition(1, 1, r1, 1, r1, 1, 1)};
	struct meta_apply_result res;
	assert_int_equal(tm_apply(&img, 1, 1, recs, 4, &res, NULL), KEEL_OK);
	assert_int_equal(res.applied, 2);
	assert_int_equal(res.ignored, 2);
	assert_int_equal(img.topic_count, 1);
	assert_int_equal(img.partition_total, 1);
	meta_image_close(&img);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_apply_builds_image),
		cmocka_unit_test(test_partition_change_revalidation),
		cmocka_unit_test(test_broker_epochs_and_fencing),
		cmocka_unit_test(test_stale_controller_batch_and_offsets),
		cmocka_unit_test(test_topics_configs_and_changes),
		cmocka_unit_test(test_changes_bounded),
		cmocka_unit_test(test_snapshot_roundtrip_and_hash),
		cmocka_unit_test(test_same_log_same_hash),
		cmocka_unit_test(test_limits_on_apply),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
