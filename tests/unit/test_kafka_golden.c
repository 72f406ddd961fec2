/* Unit tests: request frames captured from real Kafka clients (kcat and
 * confluent-kafka on librdkafka 2.0.2, kafka-python 2.0.2) decode to what
 * the client sent, re-encode to the same bytes, and refuse every
 * truncation; kafkajs 2.2.4 frames too. The frames are in $KEEL_TEST_DATA/kafka/, recorded with
 * tests/kafka/kafka_meta_server (see docs/kafka-protocol.md). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kafka/api.h"

#include "test_kafka_util.h"

struct golden {
	uint8_t *data;
	size_t size;
	struct kafka_request req;
};

/* Loads and decodes one captured frame; checks the re-encode and every
 * truncation on the way. */
static void load(const char *name, int16_t api_key, int16_t version, struct golden *g)
{
	const char *root = getenv("KEEL_TEST_DATA");
	assert_non_null(root);
	char path[1024];
	snprintf(path, sizeof(path), "%s/kafka/%s", root, name);
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		print_error("cannot open %s\n", path);
		fail();
	}
	g->data = malloc(1 << 16);
	g->size = fread(g->data, 1, 1 << 16, f);
	fclose(f);
	const char *why = NULL;
	enum keel_err err = kafka_decode_request(g->data, g->size, &arena, &limits, &g->req, &why);
	if (err != KEEL_OK) {
		print_error("%s: %s (%s)\n", name, keel_errname(err), why ? why : "");
		fail();
	}
	assert_int_equal(g->req.header.api_key, api_key);
	assert_int_equal(g->req.header.api_version, version);
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, 1 << 20);
	assert_int_equal(kafka_encode_request(&w, &g->req.header, &g->req.body), KEEL_OK);
	assert_int_equal(w.size, g->size + 4);
	assert_memory_equal(w.data + 4, g->data, g->size);
	keel_wbuf_free(&w);
	for (size_t cut = 0; cut < g->size; cut++) {
		struct kafka_request req;
		uint8_t *copy = malloc(cut + 1);
		memcpy(copy, g->data, cut);
		assert_int_not_equal(kafka_decode_request(copy, cut, &arena, &limits, &req, NULL),
		                     KEEL_OK);
		free(copy);
	}
}

static void unload(struct golden *g)
{
	free(g->data);
	keel_arena_reset(&arena);
}

static void test_api_versions(void **state)
{
	(void)state;
	struct golden g;
	load("kcat-api_versions-v3.bin", KAFKA_API_API_VERSIONS, 3, &g);
	assert_true(kafka_str_eq(g.req.header.client_id, "rdkafka"));
	assert_true(kafka_str_eq(g.req.body.api_versions.client_software_name, "librdkafka"));
	assert_true(kafka_str_eq(g.req.body.api_versions.client_software_version, "2.0.2"));
	unload(&g);
	load("confluent-api_versions-v3.bin", KAFKA_API_API_VERSIONS, 3, &g);
	assert_true(kafka_str_eq(g.req.body.api_versions.client_software_name,
	                         "confluent-kafka-python"));
	assert_true(kafka_str_eq(g.req.body.api_versions.client_software_version,
	                         "1.7.0-rdkafka-2.0.2"));
	unload(&g);
	load("kafkajs-api_versions-v2.bin", KAFKA_API_API_VERSIONS, 2, &g);
	assert_true(kafka_str_eq(g.req.header.client_id, "keel-js"));
	unload(&g);
	load("kafka-python-api_versions-v0.bin", KAFKA_API_API_VERSIONS, 0, &g);
	assert_true(kafka_str_eq(g.req.header.client_id, "kafka-python-2.0.2"));
	assert_int_equal(g.req.header.correlation_id, 1);
	unload(&g);
}

static void test_metadata(void **state)
{
	(void)state;
	struct golden g;
	load("kcat-metadata-v4.bin", KAFKA_API_METADATA, 4, &g);
	assert_int_equal(g.req.body.metadata.topic_count, -1); /* all topics */
	assert_true(g.req.body.metadata.allow_auto_topic_creation);
	unload(&g);
	load("kafka-python-metadata-v0.bin", KAFKA_API_METADATA, 0, &g);
	assert_int_equal(g.req.body.metadata.topic_count, 0); /* v0: all topics */
	unload(&g);
	load("kafka-python-metadata-v1.bin", KAFKA_API_METADATA, 1, &g);
	assert_int_equal(g.req.body.metadata.topic_count, -1);
	unload(&g);
	load("kafkajs-metadata-v6.bin", KAFKA_API_METADATA, 6, &g);
	assert_int_equal(g.req.body.metadata.topic_count, 1);
	assert_true(kafka_str_eq(g.req.body.metadata.topics[0].name, "keel-test"));
	assert_false(g.req.body.metadata.allow_auto_topic_creation);
	unload(&g);
	load("kafka-python-metadata-v5.bin", KAFKA_API_METADATA, 5, &g);
	assert_int_equal(g.req.body.metadata.topic_count, -1);
	assert_false(g.req.body.metadata.allow_auto_topic_creation);
	unload(&g);
}

/* A produced record batch arrives intact: magic 2 at byte 16, the value. */
static void check_batch(const struct kafka_records *r, int32_t size, const char *value)
{
	assert_int_equal(r->size, size);
	assert_int_equal(r->data[16], 2);
	assert_int_equal((int32_t)keel_load_be32(r->data + 8) + 12, size); /* batchLength */
	assert_non_null(memmem(r->data, (size_t)r->size, value, strlen(value)));
}

static void test_produce(void **state)
{
	(void)state;
	struct golden g;
	load("kcat-produce-v7.bin", KAFKA_API_PRODUCE, 7, &g);
	const struct kafka_produce_request *p = &g.req.body.produce;
	assert_int_equal(p->transactional_id.len, -1);
	assert_int_equal(p->acks, -1);
	assert_int_equal(p->timeout_ms, 30000);
	assert_int_equal(p->topic_count, 1);
	assert_true(kafka_str_eq(p->topics[0].name, "keel-test"));
	assert_int_equal(p->topics[0].partition_count, 1);
	assert_int_equal(p->topics[0].partitions[0].index, 0);
	check_batch(&p->topics[0].partitions[0].records, 81, "hello");
	unload(&g);
	load("kafka-python-produce-v7.bin", KAFKA_API_PRODUCE, 7, &g);
	p = &g.req.body.produce;
	assert_true(kafka_str_eq(g.req.header.client_id, "kafka-python-producer-1"));
	assert_int_equal(p->acks, 1);
	assert_int_equal(p->timeout_ms, 3000);
	check_batch(&p->topics[0].partitions[0].records, 70, "v");
	unload(&g);
	load("kafkajs-produce-v7.bin", KAFKA_API_PRODUCE, 7, &g);
	p = &g.req.body.produce;
	assert_int_equal(p->acks, -1);
	check_batch(&p->topics[0].partitions[0].records, 81, "hello");
	unload(&g);
}

static void test_fetch_and_list_offsets(void **state)
{
	(void)state;
	struct golden g;
	load("kcat-fetch-v11.bin", KAFKA_API_FETCH, 11, &g);
	const struct kafka_fetch_request *f = &g.req.body.fetch;
	assert_int_equal(f->replica_id, -1);
	assert_int_equal(f->max_wait_ms, 500);
	assert_int_equal(f->min_bytes, 1);
	assert_int_equal(f->max_bytes, 52428800);
	assert_int_equal(f->isolation_level, 1);
	assert_int_equal(f->session_epoch, -1);
	assert_true(kafka_str_eq(f->topics[0].topic, "keel-test"));
	assert_int_equal(f->topics[0].partitions[0].current_leader_epoch, -1);
	assert_true(f->topics[0].partitions[0].fetch_offset == 5);
	assert_int_equal(f->topics[0].partitions[0].partition_max_bytes, 1048576);
	assert_int_equal(f->forgotten_topic_count, 0);
	assert_true(kafka_str_eq(f->rack_id, ""));
	unload(&g);
	load("kcat-list_offsets-v2.bin", KAFKA_API_LIST_OFFSETS, 2, &g);
	const struct kafka_list_offsets_request *l = &g.req.body.list_offsets;
	assert_int_equal(l->replica_id, -1);
	assert_true(kafka_str_eq(l->topics[0].name, "keel-test"));
	assert_true(l->topics[0].partitions[0].timestamp == KAFKA_LIST_OFFSETS_EARLIEST);
	unload(&g);
}

static void test_admin(void **state)
{
	(void)state;
	struct golden g;
	load("confluent-create_topics-v4.bin", KAFKA_API_CREATE_TOPICS, 4, &g);
	const struct kafka_create_topics_request *c = &g.req.body.create_topics;
	assert_true(kafka_str_eq(c->topics[0].name, "t1"));
	assert_int_equal(c->topics[0].num_partitions, 3);
	assert_int_equal(c->topics[0].replication_factor, 1);
	assert_true(kafka_str_eq(c->topics[0].configs[0].name, "retention.ms"));
	assert_true(kafka_str_eq(c->topics[0].configs[0].value, "1000"));
	assert_int_equal(c->timeout_ms, 60000);
	assert_false(c->validate_only);
	unload(&g);
	load("kafka-python-create_topics-v3.bin", KAFKA_API_CREATE_TOPICS, 3, &g);
	c = &g.req.body.create_topics;
	assert_int_equal(c->topics[0].num_partitions, 3);
	assert_true(kafka_str_eq(c->topics[0].configs[0].value, "1000"));
	assert_int_equal(c->timeout_ms, 3000);
	unload(&g);
	load("confluent-create_partitions-v0.bin", KAFKA_API_CREATE_PARTITIONS, 0, &g);
	const struct kafka_create_partitions_request *cp = &g.req.body.create_partitions;
	assert_true(kafka_str_eq(cp->topics[0].name, "keel-test"));
	assert_int_equal(cp->topics[0].count, 5);
	assert_int_equal(cp->topics[0].assignment_count, -1);
	unload(&g);
	load("confluent-describe_configs-v1.bin", KAFKA_API_DESCRIBE_CONFIGS, 1, &g);
	const struct kafka_describe_configs_request *d = &g.req.body.describe_configs;
	assert_int_equal(d->resources[0].resource_type, KAFKA_RESOURCE_TOPIC);
	assert_true(kafka_str_eq(d->resources[0].resource_name, "keel-test"));
	assert_int_equal(d->resources[0].configuration_keys.count, -1);
	assert_true(d->include_synonyms);
	unload(&g);
	load("confluent-delete_topics-v1.bin", KAFKA_API_DELETE_TOPICS, 1, &g);
	assert_int_equal(g.req.body.delete_topics.topic_names.count, 1);
	assert_true(kafka_str_eq(g.req.body.delete_topics.topic_names.items[0], "keel-test"));
	assert_int_equal(g.req.body.delete_topics.timeout_ms, 60000);
	unload(&g);
}

/* Consumers in a group: kcat -G and a kafkajs consumer. */
static void test_groups(void **state)
{
	(void)state;
	static const char *const finds[] = {"kcat-find_coordinator-v2.bin",
					    "kafkajs-find_coordinator-v2.bin"};
	for (size_t i = 0; i < 2; i++) {
		struct golden g;
		load(finds[i], KAFKA_API_FIND_COORDINATOR, 2, &g);
		assert_true(kafka_str_eq(g.req.body.find_coordinator.key, "keel-group"));
		assert_int_equal(g.req.body.find_coordinator.key_type, KAFKA_COORDINATOR_GROUP);
		unload(&g);
	}
	struct golden g;
	load("kcat-join_group-v5.bin", KAFKA_API_JOIN_GROUP, 5, &g);
	const struct kafka_join_group_request *j = &g.req.body.join_group;
	assert_true(kafka_str_eq(j->group_id, "keel-group"));
	assert_int_equal(j->session_timeout_ms, 45000);
	assert_int_equal(j->rebalance_timeout_ms, 300000);
	assert_true(kafka_str_eq(j->member_id, "")); /* first join (KIP-394) */
	assert_int_equal(j->group_instance_id.len, -1);
	assert_true(kafka_str_eq(j->protocol_type, "consumer"));
	assert_int_equal(j->protocol_count, 2);
	assert_true(kafka_str_eq(j->protocols[0].name, "range"));
	assert_true(kafka_str_eq(j->protocols[1].name, "roundrobin"));
	assert_non_null(memmem(j->protocols[0].metadata.ptr, (size_t)j->protocols[0].metadata.len,
			       "keel-test", 9));
	unload(&g);
	load("kafkajs-join_group-v5.bin", KAFKA_API_JOIN_GROUP, 5, &g);
	j = &g.req.body.join_group;
	assert_int_equal(j->session_timeout_ms, 30000);
	assert_int_equal(j->protocol_count, 1);
	assert_true(kafka_str_eq(j->protocols[0].name, "RoundRobinAssigner"));
	unload(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_api_versions), cmocka_unit_test(test_metadata),
	        cmocka_unit_test(test_produce),      cmocka_unit_test(test_fetch_and_list_offsets),
	        cmocka_unit_test(test_admin),        cmocka_unit_test(test_groups),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
