/* Unit tests: broker-facing request/response bodies — a byte-exact round
 * trip, every truncation refused, newer versions refused, for each message;
 * DescribeCluster built from an image. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "meta/proto.h"
#include "test_meta_util.h"

static struct keel_arena arena;

/*
 * Encodes `msg`, decodes it into `out`, re-encodes `out` and compares the
 * bytes; then checks that every strict prefix fails to decode and that a
 * version of 1 is refused. Leaves `out` decoded from the full encoding.
 */
#define ROUNDTRIP(name, MSG, OUT) ROUNDTRIP_MAX(name, MSG, OUT, 0)
#define ROUNDTRIP_MAX(name, MSG, OUT, MAXV)                                                  \
	do {                                                                                 \
		struct keel_wbuf w1, w2;                                                     \
		keel_wbuf_init_dynamic(&w1, 64, 1 << 20);                                    \
		keel_wbuf_init_dynamic(&w2, 64, 1 << 20);                                    \
		assert_int_equal(meta_encode_##name(&w1, (MSG)), KEEL_OK);                   \
		for (size_t cut = 0; cut < w1.size; cut++) {                                 \
			uint8_t *copy = malloc(cut + 1);                                     \
			memcpy(copy, w1.data, cut);                                          \
			enum keel_err e = meta_decode_##name(copy, cut, &arena, (OUT), NULL); \
			assert_true(e == KEEL_SHORT || e == KEEL_CORRUPT);                   \
			free(copy);                                                          \
		}                                                                            \
		struct meta_errbuf eb;                                                       \
		uint8_t version = w1.data[1];                                                \
		char refused[40];                                                            \
		snprintf(refused, sizeof(refused), "version %d is not supported", (MAXV) + 1); \
		w1.data[1] = (uint8_t)((MAXV) + 1);                                          \
		assert_int_equal(meta_decode_##name(w1.data, w1.size, &arena, (OUT), &eb),   \
				 KEEL_UNSUPPORTED);                                          \
		assert_non_null(strstr(eb.msg, refused));                                    \
		w1.data[1] = version;                                                        \
		assert_int_equal(meta_decode_##name(w1.data, w1.size, &arena, (OUT), &eb),   \
				 KEEL_OK);                                                   \
		assert_int_equal(meta_encode_##name(&w2, (OUT)), KEEL_OK);                   \
		assert_int_equal(w1.size, w2.size);                                          \
		assert_memory_equal(w1.data, w2.data, w1.size);                              \
		keel_wbuf_free(&w1);                                                         \
		keel_wbuf_free(&w2);                                                         \
	} while (0)

static const struct meta_endpoint eps[] = {{"PLAINTEXT", "10.0.0.1", 9092, META_SEC_PLAINTEXT},
					   {"SSL", "::1", 9093, META_SEC_SSL}};
static const int32_t isr[] = {1, 2, 3};

static void test_broker_lifecycle_messages(void **state)
{
	(void)state;
	struct meta_broker_registration_request reg = {
		.broker_id = 4, .endpoints = eps, .endpoint_count = 2, .rack = "r1",
		.previous_broker_epoch = -1};
	memset(reg.incarnation_id, 0x5a, 16);
	struct meta_broker_registration_request reg_out;
	ROUNDTRIP(broker_registration_request, &reg, &reg_out);
	assert_int_equal(reg_out.broker_id, 4);
	assert_int_equal(reg_out.endpoint_count, 2);
	assert_string_equal(reg_out.endpoints[1].host, "::1");
	assert_string_equal(reg_out.rack, "r1");
	assert_true(reg_out.previous_broker_epoch == -1);

	struct meta_broker_registration_response rr = {META_ERR_DUPLICATE_BROKER_REGISTRATION,
						       "broker 4 is registered and alive", 0};
	struct meta_broker_registration_response rr_out;
	ROUNDTRIP(broker_registration_response, &rr, &rr_out);
	assert_int_equal(rr_out.error, META_ERR_DUPLICATE_BROKER_REGISTRATION);
	assert_string_equal(rr_out.error_message, "broker 4 is registered and alive");

	struct meta_broker_heartbeat_request hb = {4, 17, 12345, false, true};
	struct meta_broker_heartbeat_request hb_out;
	ROUNDTRIP(broker_heartbeat_request, &hb, &hb_out);
	assert_true(hb_out.broker_epoch == 17);
	assert_true(hb_out.current_metadata_offset == 12345);
	assert_true(hb_out.want_shutdown);
	assert_false(hb_out.want_fence);

	struct meta_broker_heartbeat_response hr = {META_ERR_NONE, NULL, true, false, true};
	struct meta_broker_heartbeat_response hr_out;
	ROUNDTRIP(broker_heartbeat_response, &hr, &hr_out);
	assert_null(hr_out.error_message);
	assert_true(hr_out.is_caught_up);
	assert_true(hr_out.should_shut_down);

	struct meta_unregister_broker_request ur = {9};
	struct meta_unregister_broker_request ur_out;
	ROUNDTRIP(unregister_broker_request, &ur, &ur_out);
	assert_int_equal(ur_out.broker_id, 9);
	struct meta_unregister_broker_response urr = {META_ERR_BROKER_ID_NOT_REGISTERED, "no"};
	struct meta_unregister_broker_response urr_out;
	ROUNDTRIP(unregister_broker_response, &urr, &urr_out);
	assert_int_equal(urr_out.error, META_ERR_BROKER_ID_NOT_REGISTERED);
	keel_arena_reset(&arena);
}

static void test_topic_messages(void **state)
{
	(void)state;
	static const struct meta_config_kv kvs[] = {{"retention.ms", "1000"},
						    {"cleanup.policy", NULL}};
	struct meta_create_topic topics[2] = {{"sensor-data", 6, 2, kvs, 1, NULL, 0},
					      {"logs", -1, -1, NULL, 0, NULL, 0}};
	struct meta_create_topics_request ct = {topics, 2, true};
	struct meta_create_topics_request ct_out;
	ROUNDTRIP_MAX(create_topics_request, &ct, &ct_out, 1);
	assert_int_equal(ct_out.topic_count, 2);
	assert_string_equal(ct_out.topics[0].name, "sensor-data");
	assert_int_equal(ct_out.topics[0].replication_factor, 2);
	assert_string_equal(ct_out.topics[0].configs[0].value, "1000");
	assert_int_equal(ct_out.topics[1].num_partitions, -1);
	assert_int_equal(ct_out.topics[1].assignment_count, 0);
	assert_true(ct_out.validate_only);
	struct keel_wbuf v0;
	keel_wbuf_init_dynamic(&v0, 64, 1 << 20);
	assert_int_equal(meta_encode_create_topics_request(&v0, &ct), KEEL_OK);
	assert_int_equal(v0.data[0] << 8 | v0.data[1], 0); /* no assignment: version 0 */
	keel_wbuf_free(&v0);

	/* A manual assignment: body version 1, rows as given. */
	static const int32_t r12[] = {1, 2}, r21[] = {2, 1};
	struct meta_replica_assignment rows[] = {{1, r21, 2}, {0, r12, 2}};
	struct meta_create_topic assigned[2] = {{"manual", -1, -1, NULL, 0, rows, 2},
						{"plain", 3, 1, NULL, 0, NULL, 0}};
	struct meta_create_topics_request ca = {assigned, 2, false};
	struct meta_create_topics_request ca_out;
	ROUNDTRIP_MAX(create_topics_request, &ca, &ca_out, 1);
	keel_wbuf_init_dynamic(&v0, 64, 1 << 20);
	assert_int_equal(meta_encode_create_topics_request(&v0, &ca), KEEL_OK);
	assert_int_equal(v0.data[0] << 8 | v0.data[1], 1);
	keel_wbuf_free(&v0);
	assert_int_equal(ca_out.topics[0].assignment_count, 2);
	assert_int_equal(ca_out.topics[0].assignments[0].partition_index, 1);
	assert_int_equal(ca_out.topics[0].assignments[0].broker_count, 2);
	assert_int_equal(ca_out.topics[0].assignments[0].broker_ids[0], 2);
	assert_int_equal(ca_out.topics[0].assignments[1].broker_ids[1], 2);
	assert_int_equal(ca_out.topics[1].assignment_count, 0);
	assert_int_equal(ca_out.topics[1].num_partitions, 3);

	struct meta_create_topic_result res[1] = {
		{"sensor-data", {1, 2, 3}, META_ERR_INVALID_REPLICATION_FACTOR, "only 1 broker", 6, 2}};
	struct meta_create_topics_response ctr = {res, 1};
	struct meta_create_topics_response ctr_out;
	ROUNDTRIP(create_topics_response, &ctr, &ctr_out);
	assert_int_equal(ctr_out.topics[0].error, META_ERR_INVALID_REPLICATION_FACTOR);
	assert_int_equal(ctr_out.topics[0].topic_id[2], 3);

	static const char *const names[] = {"a", "b.c"};
	struct meta_delete_topics_request dt = {names, 2};
	struct meta_delete_topics_request dt_out;
	ROUNDTRIP(delete_topics_request, &dt, &dt_out);
	assert_string_equal(dt_out.names[1], "b.c");
	struct meta_delete_topic_result dres[1] = {{"a", {0}, META_ERR_UNKNOWN_TOPIC_OR_PARTITION, NULL}};
	struct meta_delete_topics_response dtr = {dres, 1};
	struct meta_delete_topics_response dtr_out;
	ROUNDTRIP(delete_topics_response, &dtr, &dtr_out);
	assert_int_equal(dtr_out.results[0].error, META_ERR_UNKNOWN_TOPIC_OR_PARTITION);

	struct meta_alter_config_resource rs[1] = {{META_RESOURCE_TOPIC, "a", kvs, 2}};
	struct meta_alter_configs_request ac = {rs, 1, false};
	struct meta_alter_configs_request ac_out;
	ROUNDTRIP(alter_configs_request, &ac, &ac_out);
	assert_int_equal(ac_out.resources[0].entry_count, 2);
	assert_null(ac_out.resources[0].entries[1].value);
	struct meta_alter_config_result ares[1] = {{META_RESOURCE_TOPIC, "a", META_ERR_INVALID_CONFIG,
						    "bad value"}};
	struct meta_alter_configs_response acr = {ares, 1};
	struct meta_alter_configs_response acr_out;
	ROUNDTRIP(alter_configs_response, &acr, &acr_out);
	assert_string_equal(acr_out.results[0].error_message, "bad value");
	keel_arena_reset(&arena);
}

static void test_alter_partition_messages(void **state)
{
	(void)state;
	struct meta_alter_partition_item items[2] = {{0, 3, 5, isr, 2, META_RECOVERED},
						     {1, 0, 0, isr, 3, META_RECOVERING}};
	struct meta_alter_partition_topic t = {{9, 9, 9}, items, 2};
	struct meta_alter_partition_request ap = {1, 42, &t, 1};
	struct meta_alter_partition_request ap_out;
	ROUNDTRIP(alter_partition_request, &ap, &ap_out);
	assert_int_equal(ap_out.topics[0].partition_count, 2);
	assert_int_equal(ap_out.topics[0].partitions[0].leader_epoch, 3);
	assert_int_equal(ap_out.topics[0].partitions[0].partition_epoch, 5);
	assert_int_equal(ap_out.topics[0].partitions[1].new_isr_count, 3);
	assert_int_equal(ap_out.topics[0].partitions[1].leader_recovery_state, META_RECOVERING);

	struct meta_alter_partition_result pr[1] = {
		{0, META_ERR_FENCED_LEADER_EPOCH, 2, 4, 7, isr, 1, META_RECOVERED}};
	struct meta_alter_partition_topic_result tr = {{9, 9, 9}, pr, 1};
	struct meta_alter_partition_response apr = {META_ERR_NONE, NULL, &tr, 1};
	struct meta_alter_partition_response apr_out;
	ROUNDTRIP(alter_partition_response, &apr, &apr_out);
	assert_int_equal(apr_out.topics[0].partitions[0].error, META_ERR_FENCED_LEADER_EPOCH);
	assert_int_equal(apr_out.topics[0].partitions[0].leader, 2);
	keel_arena_reset(&arena);
}

static void test_fetch_metadata_messages(void **state)
{
	(void)state;
	struct meta_fetch_metadata_request fr = {101, 1 << 20};
	struct meta_fetch_metadata_request fr_out;
	ROUNDTRIP(fetch_metadata_request, &fr, &fr_out);
	assert_true(fr_out.from_offset == 101);

	static const uint8_t b1[] = {1, 2, 3};
	static const uint8_t snap[] = {'K', 'M', 'I', '1'};
	struct meta_fetch_batch batches[2] = {{101, b1, 3}, {105, b1, 0}};
	struct meta_fetch_metadata_response r = {META_ERR_NONE, 200, 100, snap, 4, batches, 2};
	struct meta_fetch_metadata_response r_out;
	ROUNDTRIP(fetch_metadata_response, &r, &r_out);
	assert_true(r_out.high_watermark == 200);
	assert_int_equal(r_out.snapshot_size, 4);
	assert_int_equal(r_out.batch_count, 2);
	assert_true(r_out.batches[1].offset == 105);
	assert_int_equal(r_out.batches[0].size, 3);

	struct meta_fetch_metadata_response none = {META_ERR_OFFSET_OUT_OF_RANGE, 5, -1, NULL, 0,
						    NULL, 0};
	ROUNDTRIP(fetch_metadata_response, &none, &r_out);
	assert_null(r_out.snapshot);
	assert_int_equal(r_out.error, META_ERR_OFFSET_OUT_OF_RANGE);
	keel_arena_reset(&arena);
}

static void test_describe_from_image(void **state)
{
	(void)state;
	static const int32_t r12[] = {1, 2};
	struct meta_image img;
	meta_image_init(&img, NULL);
	struct meta_record recs[6] = {
		tm_register(1, 1, "a"), tm_register(2, 2, NULL), tm_topic("sensor-data", 5),
		tm_partition(5, 0, r12, 2, r12, 2, 1), tm_partition(5, 1, r12, 2, r12 + 1, 1, 2),
		tm_config(META_RESOURCE_TOPIC, "sensor-data", "retention.ms", "5")};
	assert_int_equal(tm_apply(&img, 3, 4, recs, 6, NULL, NULL), KEEL_OK);

	static const char *const names[] = {"sensor-data", "missing"};
	struct meta_describe_cluster_request req = {names, 2, true, true};
	struct meta_describe_cluster_request req_out;
	ROUNDTRIP(describe_cluster_request, &req, &req_out);
	assert_int_equal(req_out.topic_name_count, 2);

	struct meta_describe_cluster_response resp;
	assert_int_equal(meta_describe_cluster(&img, &req, &arena, &resp), KEEL_OK);
	assert_int_equal(resp.controller_epoch, 4);
	assert_true(resp.metadata_offset == 3);
	assert_int_equal(resp.broker_count, 2);
	assert_true(resp.brokers[0].fenced);
	assert_int_equal(resp.topic_count, 2);
	assert_int_equal(resp.topics[0].partition_count, 2);
	assert_int_equal(resp.topics[0].partitions[1].leader, 2);
	assert_int_equal(resp.topics[0].config_count, 1);
	assert_int_equal(resp.topics[1].error, META_ERR_UNKNOWN_TOPIC_OR_PARTITION);

	struct meta_describe_cluster_response out;
	ROUNDTRIP(describe_cluster_response, &resp, &out);
	assert_string_equal(out.topics[0].name, "sensor-data");
	assert_int_equal(out.topics[0].partitions[1].isr_count, 1);
	assert_string_equal(out.topics[0].configs[0].value, "5");
	assert_string_equal(out.brokers[0].rack, "a");

	/* All topics, no brokers. */
	struct meta_describe_cluster_request all = {NULL, 0, false, true};
	assert_int_equal(meta_describe_cluster(&img, &all, &arena, &resp), KEEL_OK);
	assert_int_equal(resp.broker_count, 0);
	assert_int_equal(resp.topic_count, 1);
	meta_image_close(&img);
	keel_arena_reset(&arena);
}

static void test_admin_messages(void **state)
{
	(void)state;
	static const int32_t row0[] = {1, 2};
	static const int32_t row1[] = {2, 3};
	const int32_t *rows[] = {row0, row1};
	const uint32_t sizes[] = {2, 2};
	struct meta_create_partitions_topic cpt[2] = {{"sensor-data", 8, rows, sizes, 2},
						      {"logs", 3, NULL, NULL, 0}};
	struct meta_create_partitions_request cp = {cpt, 2, true};
	struct meta_create_partitions_request cp_out;
	ROUNDTRIP(create_partitions_request, &cp, &cp_out);
	assert_int_equal(cp_out.topic_count, 2);
	assert_int_equal(cp_out.topics[0].count, 8);
	assert_int_equal(cp_out.topics[0].assignment_count, 2);
	assert_int_equal(cp_out.topics[0].assignment_sizes[1], 2);
	assert_int_equal(cp_out.topics[0].assignments[1][1], 3);
	assert_int_equal(cp_out.topics[1].assignment_count, 0);
	assert_true(cp_out.validate_only);
	struct meta_create_partitions_result cpr[1] = {{"logs", META_ERR_INVALID_PARTITIONS, "x"}};
	struct meta_create_partitions_response cprs = {cpr, 1};
	struct meta_create_partitions_response cprs_out;
	ROUNDTRIP(create_partitions_response, &cprs, &cprs_out);
	assert_int_equal(cprs_out.results[0].error, META_ERR_INVALID_PARTITIONS);
	assert_string_equal(cprs_out.results[0].error_message, "x");

	static const int32_t parts[] = {0, 5};
	struct meta_elect_topic et[1] = {{"sensor-data", parts, 2}};
	struct meta_elect_leaders_request el = {META_ELECTION_UNCLEAN, false, et, 1};
	struct meta_elect_leaders_request el_out;
	ROUNDTRIP(elect_leaders_request, &el, &el_out);
	assert_int_equal(el_out.election_type, META_ELECTION_UNCLEAN);
	assert_false(el_out.all);
	assert_int_equal(el_out.topics[0].partitions[1], 5);
	struct meta_elect_partition_result er[2] = {
		{"sensor-data", 0, META_ERR_NONE, NULL},
		{"sensor-data", 5, META_ERR_ELECTION_NOT_NEEDED, "has a leader"}};
	struct meta_elect_leaders_response elr = {META_ERR_NONE, NULL, er, 2};
	struct meta_elect_leaders_response elr_out;
	ROUNDTRIP(elect_leaders_response, &elr, &elr_out);
	assert_int_equal(elr_out.result_count, 2);
	assert_int_equal(elr_out.results[1].partition_id, 5);
	assert_int_equal(elr_out.results[1].error, META_ERR_ELECTION_NOT_NEEDED);
	assert_string_equal(meta_api_name(META_API_ELECT_LEADERS), "ElectLeaders");
	assert_string_equal(meta_error_name(META_ERR_ELECTION_NOT_NEEDED), "ELECTION_NOT_NEEDED");

	struct meta_allocate_producer_ids_request ap = {3, 77}, ap_out;
	ROUNDTRIP(allocate_producer_ids_request, &ap, &ap_out);
	assert_int_equal(ap_out.broker_id, 3);
	assert_true(ap_out.broker_epoch == 77);
	struct meta_allocate_producer_ids_response apr = {META_ERR_NONE, NULL, 5000, 1000}, apr_out;
	ROUNDTRIP(allocate_producer_ids_response, &apr, &apr_out);
	assert_true(apr_out.producer_id_start == 5000);
	assert_int_equal(apr_out.producer_id_len, 1000);
	assert_null(apr_out.error_message);
	assert_string_equal(meta_api_name(META_API_ALLOCATE_PRODUCER_IDS), "AllocateProducerIds");
	assert_string_equal(meta_api_name((enum meta_api)11), "AlterPartitionReassignments");
	assert_true(meta_api_known((enum meta_api)11));
	assert_false(meta_api_known((enum meta_api)META_API_COUNT));
	assert_true(meta_api_known(META_API_ALLOCATE_PRODUCER_IDS));
	assert_true(meta_api_known(META_API_BROKER_REGISTRATION));
}

static void test_reassignment_messages(void **state)
{
	(void)state;
	static const int32_t target[] = {2, 3};
	struct meta_reassign_partition rp[2] = {{0, false, target, 2}, {4, true, NULL, 0}};
	struct meta_reassign_topic rt[1] = {{"sensor-data", rp, 2}};
	struct meta_alter_reassignments_request ar = {rt, 1};
	struct meta_alter_reassignments_request ar_out;
	ROUNDTRIP(alter_reassignments_request, &ar, &ar_out);
	assert_int_equal(ar_out.topic_count, 1);
	assert_string_equal(ar_out.topics[0].name, "sensor-data");
	assert_int_equal(ar_out.topics[0].partition_count, 2);
	assert_false(ar_out.topics[0].partitions[0].cancel);
	assert_int_equal(ar_out.topics[0].partitions[0].replica_count, 2);
	assert_int_equal(ar_out.topics[0].partitions[0].replicas[1], 3);
	assert_true(ar_out.topics[0].partitions[1].cancel);
	assert_int_equal(ar_out.topics[0].partitions[1].partition_id, 4);
	assert_int_equal(ar_out.topics[0].partitions[1].replica_count, 0);
	/* A cancel that carries replicas has no single encoding: refused. */
	struct keel_wbuf cw;
	keel_wbuf_init_dynamic(&cw, 64, 4096);
	struct meta_reassign_topic one = {"t", rp, 1};
	struct meta_alter_reassignments_request single = {&one, 1};
	assert_int_equal(meta_encode_alter_reassignments_request(&cw, &single), KEEL_OK);
	size_t cancel_at = 2 + 4 + 4 + 1 + 4 + 4; /* version, topics, "t", partitions, id */
	assert_int_equal(cw.data[cancel_at], 0);
	cw.data[cancel_at] = 1;
	assert_int_equal(meta_decode_alter_reassignments_request(cw.data, cw.size, &arena, &ar_out,
								 NULL),
			 KEEL_CORRUPT);
	keel_wbuf_free(&cw);
	struct meta_elect_partition_result res[2] = {
		{"sensor-data", 0, META_ERR_NONE, NULL},
		{"sensor-data", 4, META_ERR_NO_REASSIGNMENT_IN_PROGRESS, "not being reassigned"}};
	struct meta_alter_reassignments_response arr = {META_ERR_NONE, NULL, res, 2};
	struct meta_alter_reassignments_response arr_out;
	ROUNDTRIP(alter_reassignments_response, &arr, &arr_out);
	assert_int_equal(arr_out.result_count, 2);
	assert_int_equal(arr_out.results[1].error, META_ERR_NO_REASSIGNMENT_IN_PROGRESS);
	assert_string_equal(arr_out.results[1].error_message, "not being reassigned");

	static const int32_t parts[] = {0, 7};
	struct meta_elect_topic tp[1] = {{"sensor-data", parts, 2}};
	struct meta_list_reassignments_request lr = {tp, 1};
	struct meta_list_reassignments_request lr_out;
	ROUNDTRIP(list_reassignments_request, &lr, &lr_out);
	assert_int_equal(lr_out.topics[0].partition_count, 2);
	assert_int_equal(lr_out.topics[0].partitions[1], 7);
	static const int32_t replicas[] = {2, 3, 1}, adding[] = {3}, removing[] = {1};
	struct meta_ongoing_reassignment on[1] = {
		{"sensor-data", 0, replicas, 3, adding, 1, removing, 1}};
	struct meta_list_reassignments_response lrr = {META_ERR_NONE, NULL, on, 1};
	struct meta_list_reassignments_response lrr_out;
	ROUNDTRIP(list_reassignments_response, &lrr, &lrr_out);
	assert_int_equal(lrr_out.reassignment_count, 1);
	assert_int_equal(lrr_out.reassignments[0].replica_count, 3);
	assert_int_equal(lrr_out.reassignments[0].adding[0], 3);
	assert_int_equal(lrr_out.reassignments[0].removing[0], 1);
	assert_string_equal(meta_api_name(META_API_ALTER_PARTITION_REASSIGNMENTS),
			    "AlterPartitionReassignments");
	assert_string_equal(meta_api_name(META_API_LIST_PARTITION_REASSIGNMENTS),
			    "ListPartitionReassignments");
	assert_string_equal(meta_api_name((enum meta_api)13), "AllocateProducerIds");
	assert_true(meta_api_needs_controller(META_API_LIST_PARTITION_REASSIGNMENTS));
}

static void test_hostile_counts(void **state)
{
	(void)state;
	/* CreateTopics claiming 2^31-1 topics in a few bytes: refused, no big
	 * allocation. */
	uint8_t body[] = {0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0};
	struct meta_create_topics_request out;
	assert_int_equal(meta_decode_create_topics_request(body, sizeof(body), &arena, &out, NULL),
			 KEEL_TOOBIG);
	body[2] = 0;
	body[3] = 0;
	body[4] = 0x10; /* 4096 topics, too few bytes */
	assert_int_equal(meta_decode_create_topics_request(body, sizeof(body), &arena, &out, NULL),
			 KEEL_SHORT);
	assert_true(arena.total < 64 * 1024);
	assert_true(meta_api_needs_controller(META_API_ALTER_PARTITION));
	assert_false(meta_api_needs_controller(META_API_FETCH_METADATA));
	assert_string_equal(meta_error_name(META_ERR_INELIGIBLE_REPLICA), "INELIGIBLE_REPLICA");
	assert_string_equal(meta_api_name(META_API_DESCRIBE_CLUSTER), "DescribeCluster");
	keel_arena_reset(&arena);
}

int main(void)
{
	keel_arena_init(&arena, 4096);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_broker_lifecycle_messages),
		cmocka_unit_test(test_topic_messages),
		cmocka_unit_test(test_alter_partition_messages),
		cmocka_unit_test(test_fetch_metadata_messages),
		cmocka_unit_test(test_describe_from_image),
		cmocka_unit_test(test_admin_messages),
		cmocka_unit_test(test_hostile_counts),
		cmocka_unit_test(test_reassignment_messages),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	keel_arena_close(&arena);
	return rc;
}
