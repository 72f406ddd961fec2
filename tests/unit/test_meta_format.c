/* Unit tests: the human-readable forms of records, partitions and brokers
 * (`keel log dump`, `keel topics describe`, `keel brokers`). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "meta/format.h"
#include "test_meta_util.h"

static const int32_t r12[] = {1, 2};
static const int32_t r2[] = {2};

static const char *fmt_record(char *buf, size_t size, const struct meta_record *rec,
			      const struct meta_image *img)
{
	struct meta_fmt f;
	meta_fmt_init(&f, buf, size);
	meta_format_record(&f, rec, img);
	assert_false(f.truncated);
	return buf;
}

static void setup_image(struct meta_image *img)
{
	meta_image_init(img, NULL);
	struct meta_record recs[3] = {tm_register(1, 1, NULL), tm_register(2, 2, NULL),
				      tm_topic("sensor-data", 5)};
	assert_int_equal(tm_apply(img, 1, 1, recs, 3, NULL, NULL), KEEL_OK);
}

static void test_partition_record_exact_form(void **state)
{
	(void)state;
	struct meta_image img;
	setup_image(&img);
	char buf[512];
	struct meta_record p = tm_partition(5, 0, r12, 2, r12, 2, 1);
	p.partition.leader_epoch = 3;
	p.partition.partition_epoch = 5;
	assert_string_equal(fmt_record(buf, sizeof(buf), &p, &img),
			    "[Topic: sensor-data, Partition: 0, Leader: Broker-1, ISR: {Broker-1, "
			    "Broker-2}] LeaderEpoch: 3, PartitionEpoch: 5, Replicas: {Broker-1, "
			    "Broker-2}");

	/* Unknown topic id: the id in base64url stands in for the name. */
	struct meta_record q = tm_partition(9, 2, r12, 2, r2, 1, 2);
	q.partition.leader_recovery_state = META_RECOVERING;
	fmt_record(buf, sizeof(buf), &q, NULL);
	assert_non_null(strstr(buf, ", Partition: 2, Leader: Broker-2, ISR: {Broker-2}] "
				    "LeaderEpoch: 0, PartitionEpoch: 0"));
	assert_non_null(strstr(buf, "LeaderRecoveryState: RECOVERING"));
	assert_null(strstr(buf, "sensor-data"));
	meta_image_close(&img);
}

static void test_partition_change_shows_full_state(void **state)
{
	(void)state;
	struct meta_image img;
	setup_image(&img);
	struct meta_record p = tm_partition(5, 0, r12, 2, r12, 2, 1);
	p.partition.leader_epoch = 3;
	p.partition.partition_epoch = 5;
	assert_int_equal(tm_apply(&img, 2, 1, &p, 1, NULL, NULL), KEEL_OK);

	char buf[512];
	/* Only the ISR changes: leader and leader epoch come from the image. */
	struct meta_record c = tm_change(5, 0, 6);
	c.partition_change.fields = META_PC_ISR;
	c.partition_change.isr = r12;
	c.partition_change.isr_count = 1;
	assert_string_equal(fmt_record(buf, sizeof(buf), &c, &img),
			    "[Topic: sensor-data, Partition: 0, Leader: Broker-1, ISR: {Broker-1}] "
			    "LeaderEpoch: 3, PartitionEpoch: 6, Changed: {ISR}");

	/* Leader goes offline. */
	struct meta_record o = tm_change(5, 0, 6);
	o.partition_change.fields = META_PC_LEADER;
	o.partition_change.leader = META_NO_LEADER;
	o.partition_change.leader_epoch = 4;
	assert_string_equal(fmt_record(buf, sizeof(buf), &o, &img),
			    "[Topic: sensor-data, Partition: 0, Leader: none, ISR: {Broker-1, "
			    "Broker-2}] LeaderEpoch: 4, PartitionEpoch: 6, Changed: {Leader}");

	/* A reassignment starts (version 1): the lists are shown. */
	static const int32_t r213[] = {2, 1, 3}, r3[] = {3}, r1[] = {1};
	struct meta_record m = tm_change(5, 0, 6);
	m.version = 1;
	m.partition_change.fields = META_PC_REPLICAS | META_PC_REASSIGNMENT;
	m.partition_change.replicas = r213;
	m.partition_change.replica_count = 3;
	m.partition_change.adding = r3;
	m.partition_change.adding_count = 1;
	m.partition_change.removing = r1;
	m.partition_change.removing_count = 1;
	assert_string_equal(fmt_record(buf, sizeof(buf), &m, &img),
			    "[Topic: sensor-data, Partition: 0, Leader: Broker-1, ISR: {Broker-1, "
			    "Broker-2}] LeaderEpoch: 3, PartitionEpoch: 6, Changed: {Replicas, "
			    "Reassignment}, Replicas: {Broker-2, Broker-1, Broker-3}, Adding: "
			    "{Broker-3}, Removing: {Broker-1}");
	meta_image_close(&img);
}

static void test_other_records_readable(void **state)
{
	(void)state;
	struct meta_image img;
	setup_image(&img);
	char buf[512];
	struct meta_record r = tm_register(3, 7, "rack-a");
	memset(r.register_broker.incarnation_id, 0, 16);
	assert_string_equal(fmt_record(buf, sizeof(buf), &r, NULL),
			    "RegisterBroker: Broker-3, Epoch: 7, Incarnation: AAAAAAAAAAAAAAAAAAAAAA, "
			    "Rack: rack-a, Fenced: true, Endpoints: {PLAINTEXT://localhost:9092}");
	struct meta_record fb = tm_broker_ref(META_REC_FENCE_BROKER, 2, 9);
	assert_string_equal(fmt_record(buf, sizeof(buf), &fb, NULL), "FenceBroker: Broker-2, Epoch: 9");
	struct meta_record ub = tm_broker_ref(META_REC_UNFENCE_BROKER, 2, 9);
	assert_string_equal(fmt_record(buf, sizeof(buf), &ub, NULL),
			    "UnfenceBroker: Broker-2, Epoch: 9");
	struct meta_record cs;
	memset(&cs, 0, sizeof(cs));
	cs.type = META_REC_BROKER_REGISTRATION_CHANGE;
	cs.broker_change = (struct meta_broker_change_record){2, 9, META_CHANGE_NONE, 1};
	assert_string_equal(fmt_record(buf, sizeof(buf), &cs, NULL),
			    "BrokerRegistrationChange: Broker-2, Epoch: 9, InControlledShutdown: true");
	struct meta_record cfg = tm_config(META_RESOURCE_TOPIC, "sensor-data",
					   META_CONFIG_UNCLEAN_ELECTION, "true");
	assert_string_equal(fmt_record(buf, sizeof(buf), &cfg, NULL),
			    "Config: Topic \"sensor-data\", unclean.leader.election.enable = true");
	cfg.config.value = NULL;
	assert_string_equal(fmt_record(buf, sizeof(buf), &cfg, NULL),
			    "Config: Topic \"sensor-data\", unclean.leader.election.enable deleted");
	struct meta_record rm;
	memset(&rm, 0, sizeof(rm));
	rm.type = META_REC_REMOVE_TOPIC;
	tm_topic_id(rm.remove_topic.topic_id, 5);
	fmt_record(buf, sizeof(buf), &rm, &img);
	assert_true(strncmp(buf, "RemoveTopic: sensor-data, TopicId: ", 35) == 0);
	struct meta_record noop = {.type = META_REC_NOOP};
	assert_string_equal(fmt_record(buf, sizeof(buf), &noop, NULL), "NoOp");
	struct meta_record ids = {.type = META_REC_PRODUCER_IDS};
	ids.producer_ids = (struct meta_producer_ids_record){2, 14, 3000};
	assert_string_equal(fmt_record(buf, sizeof(buf), &ids, NULL),
			    "ProducerIds: Broker-2, Epoch: 14, NextProducerId: 3000");
	meta_image_close(&img);
}

static void test_describe_and_broker_lines(void **state)
{
	(void)state;
	char buf[256];
	struct meta_fmt f;
	meta_fmt_init(&f, buf, sizeof(buf));
	meta_format_describe_partition(&f, "sensor-data", 0, 1, r12, 2, r12, 2, 0);
	assert_string_equal(buf, "Topic: sensor-data\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: "
				 "1,2\tLeaderEpoch: 0");
	meta_fmt_init(&f, buf, sizeof(buf));
	meta_format_describe_partition(&f, "t", 3, -1, r12, 2, r2, 1, 7);
	assert_string_equal(buf, "Topic: t\tPartition: 3\tLeader: none\tReplicas: 1,2\tIsr: "
				 "2\tLeaderEpoch: 7");
	meta_fmt_init(&f, buf, sizeof(buf));
	meta_format_broker_line(&f, 1, 5, "r1", false, false);
	assert_string_equal(buf, "Broker: 1\tEpoch: 5\tRack: r1\tState: active");
	meta_fmt_init(&f, buf, sizeof(buf));
	meta_format_broker_line(&f, 2, 6, NULL, true, true);
	assert_string_equal(buf, "Broker: 2\tEpoch: 6\tRack: none\tState: fenced\tControlledShutdown: true");
}

struct lines {
	char text[16][512];
	int count;
};

static void collect(void *ctx, const char *line)
{
	struct lines *l = ctx;
	assert_true(l->count < 16);
	strcpy(l->text[l->count++], line);
}

static void test_log_dump_batch(void **state)
{
	(void)state;
	struct meta_image img;
	meta_image_init(&img, NULL);
	struct meta_record recs[4] = {tm_topic("sensor-data", 5),
				      tm_partition(5, 0, r12, 2, r12, 2, 1),
				      tm_partition(5, 0, r12, 2, r12, 2, 1), /* duplicate */
				      {.type = META_REC_NOOP}};
	struct meta_batch b = {{1, 2, 1700000000000ll}, recs, 4};
	struct lines l = {.count = 0};
	assert_int_equal(meta_log_dump_batch(&img, 10, &b, collect, &l), KEEL_OK);
	assert_int_equal(l.count, 5);
	assert_string_equal(l.text[0],
			    "Batch at offset 10: controller 1, epoch 2, time 2023-11-14T22:13:20.000Z, 4 records");
	assert_true(strncmp(l.text[1], "Topic: sensor-data, TopicId: ", 29) == 0);
	/* The partition resolves the topic created earlier in the same batch. */
	assert_true(strncmp(l.text[2],
			    "[Topic: sensor-data, Partition: 0, Leader: Broker-1, ISR: {Broker-1, "
			    "Broker-2}] LeaderEpoch: 0, PartitionEpoch: 0",
			    112) == 0);
	assert_null(strstr(l.text[2], "ignored"));
	assert_non_null(strstr(l.text[3], "(ignored: partitions must be added in order"));
	assert_string_equal(l.text[4], "NoOp");
	assert_int_equal(img.offset, 10);
	assert_int_equal(img.partition_total, 1);
	/* An offset that does not increase is refused. */
	assert_int_equal(meta_log_dump_batch(&img, 10, &b, collect, &l), KEEL_INVAL);
	meta_image_close(&img);
}

static void test_iso8601(void **state)
{
	(void)state;
	static const struct {
		long long ms;
		const char *text;
	} cases[] = {
		{0ll, "1970-01-01T00:00:00.000Z"},
		{951782400000ll, "2000-02-29T00:00:00.000Z"},
		{1709164800123ll, "2024-02-29T00:00:00.123Z"},
		{1700000000000ll, "2023-11-14T22:13:20.000Z"},
		{4102444799999ll, "2099-12-31T23:59:59.999Z"},
		{86399999ll, "1970-01-01T23:59:59.999Z"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[40];
		struct meta_fmt f;
		meta_fmt_init(&f, buf, sizeof(buf));
		meta_fmt_iso8601(&f, (int64_t)cases[i].ms);
		assert_string_equal(buf, cases[i].text);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_iso8601),
		cmocka_unit_test(test_partition_record_exact_form),
		cmocka_unit_test(test_partition_change_shows_full_state),
		cmocka_unit_test(test_other_records_readable),
		cmocka_unit_test(test_describe_and_broker_lines),
		cmocka_unit_test(test_log_dump_batch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
