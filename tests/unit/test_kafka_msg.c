/* Unit tests: every Kafka message at every supported version — a byte-exact
 * round trip of requests and responses, every truncation refused, whole
 * frames with headers, fields that versions add or drop, hostile counts,
 * unsupported versions, and Fetch responses with spliced record sets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kafka/api.h"
#include "test_kafka_samples.h"

#include "test_kafka_util.h"

static void *sample(int16_t api_key, bool response)
{
	void *body = NULL;
	bool ok = response ? kafka_sample_response(api_key, &body)
	                   : kafka_sample_request(api_key, &body);
	assert_true(ok);
	return body;
}

/* Encode, refuse every prefix, decode, re-encode to the same bytes. */
static void roundtrip_body(const struct kafka_api_info *api, int16_t v, bool response)
{
	struct keel_wbuf w1, w2;
	keel_wbuf_init_dynamic(&w1, 64, 1 << 20);
	keel_wbuf_init_dynamic(&w2, 64, 1 << 20);
	assert_int_equal(
	        kafka_encode_body(&w1, api->api_key, v, response, sample(api->api_key, response)),
	        KEEL_OK);
	size_t body_size = response ? api->response_size : api->request_size;
	void *out = malloc(body_size);
	for (size_t cut = 0; cut < w1.size; cut++) {
		uint8_t *copy = malloc(cut + 1);
		memcpy(copy, w1.data, cut);
		enum keel_err e = kafka_decode_body(copy, cut, api->api_key, v, response, &arena,
		                                    &limits, out, NULL);
		if (e != KEEL_SHORT && e != KEEL_CORRUPT) {
			print_error("%s %s v%d: prefix %zu of %zu gave %s\n", api->name,
			            response ? "response" : "request", v, cut, w1.size,
			            keel_errname(e));
			fail();
		}
		free(copy);
		keel_arena_reset(&arena);
	}
	const char *why = NULL;
	enum keel_err e = kafka_decode_body(w1.data, w1.size, api->api_key, v, response, &arena,
	                                    &limits, out, &why);
	if (e != KEEL_OK) {
		print_error("%s v%d: %s (%s)\n", api->name, v, keel_errname(e), why ? why : "");
		fail();
	}
	assert_int_equal(kafka_encode_body(&w2, api->api_key, v, response, out), KEEL_OK);
	assert_int_equal(w1.size, w2.size);
	assert_memory_equal(w1.data, w2.data, w1.size);
	free(out);
	keel_wbuf_free(&w1);
	keel_wbuf_free(&w2);
	keel_arena_reset(&arena);
}

static void test_roundtrip_every_version(void **state)
{
	(void)state;
	size_t count;
	const struct kafka_api_info *apis = kafka_apis(&count);
	assert_int_equal(count, 29);
	for (size_t i = 0; i < count; i++) {
		for (int16_t v = apis[i].min_version; v <= apis[i].max_version; v++) {
			roundtrip_body(&apis[i], v, false);
			roundtrip_body(&apis[i], v, true);
		}
	}
}

/* Whole request and response frames, with their headers. */
static void test_frames_every_version(void **state)
{
	(void)state;
	size_t count;
	const struct kafka_api_info *apis = kafka_apis(&count);
	for (size_t i = 0; i < count; i++) {
		for (int16_t v = apis[i].min_version; v <= apis[i].max_version; v++) {
			struct kafka_request_header h = {apis[i].api_key, v, 1000 + v,
			                                 kafka_str("keel-cli")};
			struct keel_wbuf w;
			keel_wbuf_init_dynamic(&w, 64, 1 << 20);
			assert_int_equal(kafka_encode_request(&w, &h, sample(h.api_key, false)),
			                 KEEL_OK);
			uint32_t frame_size = 0;
			assert_int_equal(kafka_frame_size(w.data, w.size, &limits, &frame_size),
			                 KEEL_OK);
			assert_int_equal(frame_size + 4, w.size);
			/* Header v2 adds one byte (no tagged fields) after client_id. */
			bool flexible = kafka_api_flexible(h.api_key, v);
			assert_int_equal(kafka_request_header_version(h.api_key, v),
			                 flexible ? 2 : 1);
			if (flexible) {
				assert_int_equal(w.data[4 + 10 + 8], 0);
			}
			struct kafka_request req;
			assert_int_equal(kafka_decode_request(w.data + 4, frame_size, &arena,
			                                      &limits, &req, NULL),
			                 KEEL_OK);
			assert_int_equal(req.header.api_key, h.api_key);
			assert_int_equal(req.header.api_version, v);
			assert_int_equal(req.header.correlation_id, 1000 + v);
			assert_true(kafka_str_eq(req.header.client_id, "keel-cli"));
			struct keel_wbuf again;
			keel_wbuf_init_dynamic(&again, 64, 1 << 20);
			assert_int_equal(kafka_encode_request(&again, &req.header, &req.body),
			                 KEEL_OK);
			assert_int_equal(again.size, w.size);
			assert_memory_equal(again.data, w.data, w.size);
			keel_wbuf_free(&again);

			keel_wbuf_reset(&w);
			assert_int_equal(kafka_encode_response(&w, 77, h.api_key, v,
			                                       sample(h.api_key, true), NULL, 0,
			                                       NULL),
			                 KEEL_OK);
			assert_int_equal(kafka_frame_size(w.data, w.size, &limits, &frame_size),
			                 KEEL_OK);
			assert_int_equal(frame_size + 4, w.size);
			union kafka_response_body body;
			int32_t corr = 0;
			assert_int_equal(kafka_decode_response(w.data + 4, frame_size, h.api_key, v,
			                                       &arena, &limits, &corr, &body, NULL),
			                 KEEL_OK);
			assert_int_equal(corr, 77);
			keel_wbuf_free(&w);
			keel_arena_reset(&arena);
		}
	}
}

/* Headers alone at each version: known bytes, round trip, every cut. */
static void test_header_codecs(void **state)
{
	(void)state;
	static const uint8_t v0[] = {0, 7, 0, 0, 0, 0, 0, 9};
	static const uint8_t v1[] = {0, 3, 0, 5, 0, 0, 0, 9, 0, 2, 'i', 'd'};
	static const uint8_t v2[] = {0, 3, 0, 9, 0, 0, 0, 9, 0, 2, 'i', 'd', 0};
	static const uint8_t *const wants[] = {v0, v1, v2};
	static const size_t sizes[] = {sizeof(v0), sizeof(v1), sizeof(v2)};
	static const int16_t keys[] = {7, 3, 3}, versions[] = {0, 5, 9};
	for (int hv = 0; hv <= 2; hv++) {
		struct kafka_request_header h = {keys[hv], versions[hv], 9, kafka_str("id")};
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 16, 1024);
		assert_int_equal(kafka_encode_request_header(&w, &h, hv), KEEL_OK);
		assert_int_equal(w.size, sizes[hv]);
		assert_memory_equal(w.data, wants[hv], sizes[hv]);
		struct kafka_request_header got;
		size_t used = 0;
		assert_int_equal(kafka_decode_request_header(w.data, w.size, hv, &arena, &limits,
		                                             &got, &used),
		                 KEEL_OK);
		assert_int_equal(used, sizes[hv]);
		assert_int_equal(got.api_key, keys[hv]);
		assert_int_equal(got.api_version, versions[hv]);
		assert_int_equal(got.correlation_id, 9);
		if (hv == 0) {
			assert_int_equal(got.client_id.len, -1);
		} else {
			assert_true(kafka_str_eq(got.client_id, "id"));
		}
		for (size_t cut = 0; cut < w.size; cut++) {
			assert_int_equal(kafka_decode_request_header(w.data, cut, hv, &arena, &limits,
			                                             &got, &used),
			                 KEEL_SHORT);
		}
		keel_wbuf_free(&w);
	}
	/* A v2 header with an unknown tagged field: skipped, consumed. */
	static const uint8_t tagged[] = {0, 3, 0, 9, 0, 0, 0, 9, 0xff, 0xff, 1, 5, 2, 0xaa, 0xbb};
	struct kafka_request_header got;
	size_t used = 0;
	assert_int_equal(kafka_decode_request_header(tagged, sizeof(tagged), 2, &arena, &limits,
	                                             &got, &used),
	                 KEEL_OK);
	assert_int_equal(used, sizeof(tagged));
	assert_int_equal(got.client_id.len, -1);
	for (int hv = 0; hv <= 1; hv++) {
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 16, 1024);
		assert_int_equal(kafka_encode_response_header(&w, -7, hv), KEEL_OK);
		assert_int_equal(w.size, 4u + (unsigned)hv);
		int32_t corr = 0;
		assert_int_equal(kafka_decode_response_header(w.data, w.size, hv, &arena, &limits,
		                                              &corr, &used),
		                 KEEL_OK);
		assert_int_equal(corr, -7);
		assert_int_equal(used, w.size);
		assert_int_equal(kafka_decode_response_header(w.data, w.size - 1, hv, &arena,
		                                              &limits, &corr, &used),
		                 KEEL_SHORT);
		keel_wbuf_free(&w);
	}
}

static void test_header_versions(void **state)
{
	(void)state;
	/* ApiVersions answers with header v0 even when its request is flexible. */
	assert_int_equal(kafka_request_header_version(KAFKA_API_API_VERSIONS, 3), 2);
	assert_int_equal(kafka_response_header_version(KAFKA_API_API_VERSIONS, 3), 0);
	assert_int_equal(kafka_request_header_version(KAFKA_API_METADATA, 8), 1);
	assert_int_equal(kafka_request_header_version(KAFKA_API_METADATA, 9), 2);
	assert_int_equal(kafka_response_header_version(KAFKA_API_METADATA, 9), 1);
	assert_int_equal(kafka_response_header_version(KAFKA_API_PRODUCE, 8), 0);
	assert_int_equal(kafka_response_header_version(KAFKA_API_FETCH, 12), 1);
	assert_int_equal(kafka_response_header_version(KAFKA_API_DESCRIBE_CLUSTER, 0), 1);
	assert_false(kafka_api_supported(KAFKA_API_PRODUCE, 2)); /* magic < 2 */
	assert_false(kafka_api_supported(KAFKA_API_FETCH, 13));  /* topic ids */
	assert_false(kafka_api_supported(99, 0));
}

/* Decodes the sample of api_key at version v into out (a response when
 * `response`), through an encoding at v. */
static void decode_sample_at(int16_t api_key, int16_t v, bool response, void *out)
{
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 1 << 20);
	assert_int_equal(kafka_encode_body(&w, api_key, v, response, sample(api_key, response)),
	                 KEEL_OK);
	/* The views point into w: copy to arena memory that outlives it. */
	void *copy = keel_arena_dup(&arena, w.data, w.size);
	assert_int_equal(
	        kafka_decode_body(copy, w.size, api_key, v, response, &arena, &limits, out, NULL),
	        KEEL_OK);
	keel_wbuf_free(&w);
}

static void test_metadata_fields_by_version(void **state)
{
	(void)state;
	struct kafka_metadata_response m;
	decode_sample_at(KAFKA_API_METADATA, 0, true, &m);
	assert_int_equal(m.controller_id, -1);  /* v1+ */
	assert_int_equal(m.cluster_id.len, -1); /* v2+ */
	assert_int_equal(m.brokers[0].rack.len, -1);
	assert_int_equal(m.topics[0].partitions[0].leader_epoch, -1); /* v7+ */
	assert_int_equal(m.topics[0].partitions[0].offline_replicas.count, 0);
	assert_int_equal(m.topics[0].topic_authorized_operations, INT32_MIN);
	assert_int_equal(m.broker_count, 2);
	assert_true(kafka_str_eq(m.brokers[1].host, "broker-2.local"));
	assert_int_equal(m.brokers[1].port, 19092);
	decode_sample_at(KAFKA_API_METADATA, 12, true, &m);
	assert_int_equal(m.controller_id, 2);
	assert_true(kafka_str_eq(m.cluster_id, "keel-cluster"));
	assert_true(kafka_str_eq(m.brokers[0].rack, "r1"));
	assert_int_equal(m.topics[0].partitions[0].leader_epoch, 7);
	assert_int_equal(m.topics[0].partitions[0].isr_nodes.count, 2);
	assert_int_equal(m.topics[0].partitions[0].isr_nodes.items[1], 3);
	assert_int_equal(m.topics[0].partitions[0].offline_replicas.items[0], 2);
	assert_memory_equal(m.topics[0].topic_id.b, sample_uuid.b, 16);
	assert_int_equal(m.topics[1].error_code, KAFKA_UNKNOWN_TOPIC_OR_PARTITION);
	assert_true(m.topics[1].is_internal);
	assert_int_equal(m.cluster_authorized_operations, INT32_MIN); /* v8-10 only */
	decode_sample_at(KAFKA_API_METADATA, 10, true, &m);
	assert_int_equal(m.cluster_authorized_operations, 0x1f);

	struct kafka_metadata_request r;
	decode_sample_at(KAFKA_API_METADATA, 3, false, &r);
	assert_true(r.allow_auto_topic_creation); /* v4+, default true */
	decode_sample_at(KAFKA_API_METADATA, 4, false, &r);
	assert_false(r.allow_auto_topic_creation);
	assert_true(kafka_str_eq(r.topics[1].name, "payments"));
}

static void test_fetch_fields_by_version(void **state)
{
	(void)state;
	struct kafka_fetch_response m;
	decode_sample_at(KAFKA_API_FETCH, 11, true, &m);
	struct kafka_fetch_partition_data *p = &m.topics[0].partitions[0];
	assert_false(p->has_diverging_epoch); /* tagged, v12+ */
	assert_int_equal(p->preferred_read_replica, 3);
	assert_int_equal(p->records.size, sizeof(sample_records));
	assert_memory_equal(p->records.data, sample_records, sizeof(sample_records));
	assert_int_equal(m.topics[0].partitions[1].records.size, -1);
	assert_int_equal(m.topics[0].partitions[1].aborted_transaction_count, -1);
	decode_sample_at(KAFKA_API_FETCH, 12, true, &m);
	p = &m.topics[0].partitions[0];
	assert_true(p->has_diverging_epoch);
	assert_int_equal(p->diverging_epoch.epoch, 4);
	assert_true(p->diverging_epoch.end_offset == 99);
	assert_true(p->has_current_leader);
	assert_int_equal(p->current_leader.leader_epoch, 5);
	assert_false(p->has_snapshot_id);
	assert_true(m.topics[0].partitions[1].has_snapshot_id);
	assert_true(m.topics[0].partitions[1].snapshot_id.end_offset == 55);
	assert_int_equal(m.session_id, 1234);

	struct kafka_fetch_request r;
	decode_sample_at(KAFKA_API_FETCH, 4, false, &r);
	assert_int_equal(r.session_epoch, -1);                                /* v7+ */
	assert_int_equal(r.topics[0].partitions[0].current_leader_epoch, -1); /* v9+ */
	assert_int_equal(r.forgotten_topic_count, 0);
	assert_int_equal(r.rack_id.len, 0);
	assert_false(r.has_cluster_id);
	decode_sample_at(KAFKA_API_FETCH, 12, false, &r);
	assert_true(r.has_cluster_id);
	assert_true(kafka_str_eq(r.cluster_id, "cluster-a"));
	assert_int_equal(r.topics[0].partitions[1].last_fetched_epoch, 8);
	assert_int_equal(r.forgotten_topics[0].partitions.items[1], 3);
	assert_true(kafka_str_eq(r.rack_id, "rack-1"));
	assert_int_equal(r.isolation_level, 1);
}

static void test_admin_fields_by_version(void **state)
{
	(void)state;
	struct kafka_delete_topics_request d;
	decode_sample_at(KAFKA_API_DELETE_TOPICS, 5, false, &d);
	assert_int_equal(d.topic_count, 0);
	assert_int_equal(d.topic_names.count, 2);
	assert_true(kafka_str_eq(d.topic_names.items[1], "payments"));
	decode_sample_at(KAFKA_API_DELETE_TOPICS, 6, false, &d);
	assert_int_equal(d.topic_count, 2);
	assert_int_equal(d.topics[1].name.len, -1);
	assert_memory_equal(d.topics[1].topic_id.b, sample_uuid.b, 16);

	struct kafka_create_topics_response c;
	decode_sample_at(KAFKA_API_CREATE_TOPICS, 4, true, &c);
	assert_int_equal(c.topics[0].num_partitions, -1);
	assert_false(c.topics[0].has_topic_config_error_code);
	decode_sample_at(KAFKA_API_CREATE_TOPICS, 5, true, &c);
	assert_int_equal(c.topics[0].num_partitions, 3);
	assert_true(c.topics[0].has_topic_config_error_code);
	assert_int_equal(c.topics[1].config_count, -1);
	assert_true(kafka_str_eq(c.topics[0].configs[0].value, "60000"));

	struct kafka_describe_configs_response dc;
	decode_sample_at(KAFKA_API_DESCRIBE_CONFIGS, 0, true, &dc);
	assert_true(dc.results[0].configs[1].is_default); /* v0 only */
	assert_int_equal(dc.results[0].configs[0].config_source, -1);
	decode_sample_at(KAFKA_API_DESCRIBE_CONFIGS, 4, true, &dc);
	assert_false(dc.results[0].configs[1].is_default);
	assert_int_equal(dc.results[0].configs[0].synonym_count, 1);
	assert_true(kafka_str_eq(dc.results[0].configs[0].documentation, "how long"));

	struct kafka_create_topics_request ct;
	decode_sample_at(KAFKA_API_CREATE_TOPICS, 0, false, &ct);
	assert_false(ct.validate_only); /* v1+ */
	assert_int_equal(ct.topics[0].configs[1].value.len, -1);
	assert_int_equal(ct.topics[0].assignments[0].broker_ids.items[2], 3);
}

static void test_group_fields_by_version(void **state)
{
	(void)state;
	struct kafka_find_coordinator_request fr;
	decode_sample_at(KAFKA_API_FIND_COORDINATOR, 3, false, &fr);
	assert_true(kafka_str_eq(fr.key, "group-a"));
	assert_int_equal(fr.coordinator_keys.count, 0);
	decode_sample_at(KAFKA_API_FIND_COORDINATOR, 4, false, &fr);
	assert_int_equal(fr.key.len, 0); /* v0-3 only */
	assert_int_equal(fr.coordinator_keys.count, 2);
	assert_int_equal(fr.key_type, KAFKA_COORDINATOR_TRANSACTION);
	struct kafka_find_coordinator_response fc;
	decode_sample_at(KAFKA_API_FIND_COORDINATOR, 4, true, &fc);
	assert_int_equal(fc.coordinator_count, 2);
	assert_true(kafka_str_eq(fc.coordinators[1].error_message, "loading"));
	assert_int_equal(fc.node_id, 0);

	struct kafka_offset_fetch_request ofr;
	decode_sample_at(KAFKA_API_OFFSET_FETCH, 7, false, &ofr);
	assert_int_equal(ofr.group_count, 0);
	assert_int_equal(ofr.topics[0].partition_indexes.items[1], 2);
	assert_true(ofr.require_stable);
	decode_sample_at(KAFKA_API_OFFSET_FETCH, 8, false, &ofr);
	assert_int_equal(ofr.topic_count, 0);
	assert_int_equal(ofr.group_count, 2);
	assert_int_equal(ofr.groups[1].topic_count, -1); /* all topics */
	struct kafka_offset_fetch_response ofs;
	decode_sample_at(KAFKA_API_OFFSET_FETCH, 1, true, &ofs);
	assert_int_equal(ofs.error_code, 0);                                      /* v2-7 */
	assert_int_equal(ofs.topics[0].partitions[0].committed_leader_epoch, -1); /* v5+ */
	decode_sample_at(KAFKA_API_OFFSET_FETCH, 7, true, &ofs);
	assert_int_equal(ofs.error_code, KAFKA_NOT_COORDINATOR);
	assert_int_equal(ofs.topics[0].partitions[0].committed_leader_epoch, 3);

	struct kafka_leave_group_request lr;
	decode_sample_at(KAFKA_API_LEAVE_GROUP, 2, false, &lr);
	assert_true(kafka_str_eq(lr.member_id, "member-1"));
	assert_int_equal(lr.member_count, 0);
	decode_sample_at(KAFKA_API_LEAVE_GROUP, 5, false, &lr);
	assert_int_equal(lr.member_count, 2);
	assert_true(kafka_str_eq(lr.members[0].reason, "bye"));
	assert_int_equal(lr.members[0].group_instance_id.len, -1);

	struct kafka_join_group_response jr;
	decode_sample_at(KAFKA_API_JOIN_GROUP, 6, true, &jr);
	assert_int_equal(jr.protocol_type.len, -1); /* v7+ */
	assert_false(jr.skip_assignment);           /* v9+ */
	decode_sample_at(KAFKA_API_JOIN_GROUP, 9, true, &jr);
	assert_true(kafka_str_eq(jr.protocol_type, "consumer"));
	assert_true(jr.skip_assignment);
	assert_int_equal(jr.members[0].metadata.len, 14);

	struct kafka_offset_commit_request oc;
	decode_sample_at(KAFKA_API_OFFSET_COMMIT, 1, false, &oc);
	assert_true(oc.topics[0].partitions[0].commit_timestamp == 1700000000000);
	assert_true(oc.retention_time_ms == -1);
	decode_sample_at(KAFKA_API_OFFSET_COMMIT, 4, false, &oc);
	assert_true(oc.topics[0].partitions[0].commit_timestamp == -1);
	assert_true(oc.retention_time_ms == 86400000);
}

/* A v0 ApiVersions request at an unknown version gets the v0 table with
 * UNSUPPORTED_VERSION; other APIs get nothing (the caller closes). */
static void test_unsupported_versions(void **state)
{
	(void)state;
	static const uint8_t av9[] = {0, 18, 0, 9, 0, 0, 0, 42, 0, 1, 'x', 0x33, 0x44};
	struct kafka_request req;
	const char *why = NULL;
	assert_int_equal(kafka_decode_request(av9, sizeof(av9), &arena, &limits, &req, &why),
	                 KEEL_UNSUPPORTED);
	assert_non_null(why);
	assert_int_equal(req.header.correlation_id, 42);
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 1 << 16);
	assert_int_equal(
	        kafka_encode_unsupported(&w, &req.header, KAFKA_SET_CORE | KAFKA_SET_ADMIN),
	        KEEL_OK);
	uint32_t frame_size;
	assert_int_equal(kafka_frame_size(w.data, w.size, &limits, &frame_size), KEEL_OK);
	struct kafka_api_versions_response r;
	int32_t corr;
	assert_int_equal(kafka_decode_response(w.data + 4, frame_size, KAFKA_API_API_VERSIONS, 0,
	                                       &arena, &limits, &corr, &r, NULL),
	                 KEEL_OK);
	assert_int_equal(corr, 42);
	assert_int_equal(r.error_code, KAFKA_UNSUPPORTED_VERSION);
	/* Exactly the core and admin APIs, in table order. */
	size_t count;
	const struct kafka_api_info *apis = kafka_apis(&count);
	int32_t k = 0;
	for (size_t i = 0; i < count; i++) {
		if ((apis[i].set & (KAFKA_SET_CORE | KAFKA_SET_ADMIN)) == 0) {
			continue;
		}
		assert_true(k < r.api_key_count);
		assert_int_equal(r.api_keys[k].api_key, apis[i].api_key);
		assert_int_equal(r.api_keys[k].max_version, apis[i].max_version);
		k++;
	}
	assert_int_equal(k, r.api_key_count);
	assert_int_equal(k, 15);
	/* Produce v2 (magic 1) and an unknown key: no answer, close. */
	static const uint8_t produce2[] = {0, 0, 0, 2, 0, 0, 0, 5, 0xff, 0xff};
	assert_int_equal(
	        kafka_decode_request(produce2, sizeof(produce2), &arena, &limits, &req, NULL),
	        KEEL_UNSUPPORTED);
	assert_int_equal(req.header.api_key, KAFKA_API_PRODUCE);
	keel_wbuf_reset(&w);
	assert_int_equal(kafka_encode_unsupported(&w, &req.header, KAFKA_SET_ALL),
	                 KEEL_UNSUPPORTED);
	assert_int_equal(w.size, 0);
	static const uint8_t unknown[] = {0x7f, 0, 0, 0, 0, 0, 0, 5, 0xff, 0xff};
	assert_int_equal(
	        kafka_decode_request(unknown, sizeof(unknown), &arena, &limits, &req, NULL),
	        KEEL_UNSUPPORTED);
	/* A header cut short. */
	assert_int_equal(kafka_decode_request(unknown, 7, &arena, &limits, &req, NULL), KEEL_SHORT);
	keel_wbuf_free(&w);
	keel_arena_reset(&arena);
}

/* A broker advertises only the sets it serves. */
static void test_api_versions_table_sets(void **state)
{
	(void)state;
	struct kafka_api_versions_response r;
	assert_int_equal(kafka_api_versions_table(&arena, KAFKA_SET_CORE, &r), KEEL_OK);
	assert_int_equal(r.api_key_count, 6);
	bool has_fetch = false;
	for (int32_t i = 0; i < r.api_key_count; i++) {
		assert_int_not_equal(r.api_keys[i].api_key, KAFKA_API_JOIN_GROUP);
		assert_int_not_equal(r.api_keys[i].api_key, KAFKA_API_CREATE_TOPICS);
		has_fetch |= r.api_keys[i].api_key == KAFKA_API_FETCH &&
		             r.api_keys[i].min_version == 4 && r.api_keys[i].max_version == 12;
	}
	assert_true(has_fetch);
	size_t count;
	kafka_apis(&count);
	assert_int_equal(kafka_api_versions_table(&arena, KAFKA_SET_ALL, &r), KEEL_OK);
	assert_int_equal(r.api_key_count, count);
	assert_int_equal(count, 29);
	assert_true(kafka_api_in_sets(KAFKA_API_JOIN_GROUP, KAFKA_SET_GROUP));
	assert_false(kafka_api_in_sets(KAFKA_API_JOIN_GROUP, KAFKA_SET_CORE | KAFKA_SET_ADMIN));
	assert_true(kafka_api_in_sets(KAFKA_API_DESCRIBE_CLUSTER, KAFKA_SET_ADMIN));
	assert_false(kafka_api_in_sets(99, KAFKA_SET_ALL));
	assert_int_equal(kafka_api_versions_table(&arena, KAFKA_SET_GROUP | KAFKA_SET_SASL, &r),
	                 KEEL_OK);
	assert_int_equal(r.api_key_count, 13); /* 11 group APIs (OffsetDelete too), 2 SASL */
	keel_arena_reset(&arena);
}

static void test_frame_size_limits(void **state)
{
	(void)state;
	uint32_t n;
	static const uint8_t neg[] = {0x80, 0, 0, 0};
	static const uint8_t big[] = {0x10, 0, 0, 0};
	static const uint8_t ok[] = {0, 0, 1, 0};
	struct kafka_limits small = limits;
	small.max_frame_size = 1024;
	assert_int_equal(kafka_frame_size(ok, 3, &small, &n), KEEL_SHORT);
	assert_int_equal(kafka_frame_size(neg, 4, &small, &n), KEEL_CORRUPT);
	assert_int_equal(kafka_frame_size(big, 4, &small, &n), KEEL_TOOBIG);
	assert_int_equal(kafka_frame_size(ok, 4, &small, &n), KEEL_OK);
	assert_int_equal(n, 256);
}

/* A Metadata request that claims 2^31-1 topics in a few bytes is refused
 * with nothing allocated; over the configured count it is TOOBIG. */
static void test_hostile_counts(void **state)
{
	(void)state;
	static const uint8_t body[] = {0x7f, 0xff, 0xff, 0xff, 0, 1, 'a', 1};
	struct kafka_metadata_request r;
	struct kafka_limits big = limits;
	big.max_array_count = UINT32_MAX;
	size_t before = arena.total;
	assert_int_equal(kafka_decode_body(body, sizeof(body), KAFKA_API_METADATA, 4, false, &arena,
	                                   &big, &r, NULL),
	                 KEEL_SHORT);
	assert_int_equal(arena.total, before);
	assert_int_equal(kafka_decode_body(body, sizeof(body), KAFKA_API_METADATA, 4, false, &arena,
	                                   &limits, &r, NULL),
	                 KEEL_TOOBIG);
	struct kafka_limits one = limits;
	one.max_array_count = 1;
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 1 << 16);
	assert_int_equal(kafka_encode_body(&w, KAFKA_API_METADATA, 4, false,
	                                   sample(KAFKA_API_METADATA, false)),
	                 KEEL_OK);
	assert_int_equal(kafka_decode_body(w.data, w.size, KAFKA_API_METADATA, 4, false, &arena,
	                                   &one, &r, NULL),
	                 KEEL_TOOBIG);
	/* A null topic list cannot be sent at v0 (empty means all there). */
	struct kafka_metadata_request all = {.topics = NULL, .topic_count = -1};
	keel_wbuf_reset(&w);
	assert_int_equal(kafka_encode_body(&w, KAFKA_API_METADATA, 0, false, &all), KEEL_INVAL);
	keel_wbuf_reset(&w);
	assert_int_equal(kafka_encode_body(&w, KAFKA_API_METADATA, 1, false, &all), KEEL_OK);
	keel_wbuf_free(&w);
	keel_arena_reset(&arena);
}

/* A spliced Fetch response, with the caller's record bytes put back in the
 * holes, is byte-for-byte the plain encoding. */
static void test_fetch_splices(void **state)
{
	(void)state;
	for (int16_t v = 4; v <= 12; v++) {
		const void *body = sample(KAFKA_API_FETCH, true);
		struct keel_wbuf plain, spliced;
		keel_wbuf_init_dynamic(&plain, 64, 1 << 16);
		keel_wbuf_init_dynamic(&spliced, 64, 1 << 16);
		assert_int_equal(
		        kafka_encode_response(&plain, 5, KAFKA_API_FETCH, v, body, NULL, 0, NULL),
		        KEEL_OK);
		struct kafka_splice holes[4];
		size_t hole_count = 0;
		assert_int_equal(kafka_encode_response(&spliced, 5, KAFKA_API_FETCH, v, body, holes,
		                                       4, &hole_count),
		                 KEEL_OK);
		assert_int_equal(hole_count, 1); /* partition 1's records are null */
		assert_int_equal(holes[0].topic_index, 0);
		assert_int_equal(holes[0].partition_index, 0);
		assert_int_equal(holes[0].size, sizeof(sample_records));
		assert_int_equal(spliced.size + sizeof(sample_records), plain.size);
		uint8_t joined[1024];
		size_t off = holes[0].offset;
		memcpy(joined, spliced.data, off);
		memcpy(joined + off, sample_records, sizeof(sample_records));
		memcpy(joined + off + sizeof(sample_records), spliced.data + off,
		       spliced.size - off);
		assert_memory_equal(joined, plain.data, plain.size);
		/* Without splices, records with a size but no bytes are refused. */
		struct kafka_fetch_response *f = (struct kafka_fetch_response *)body;
		const uint8_t *saved = f->topics[0].partitions[0].records.data;
		f->topics[0].partitions[0].records.data = NULL;
		keel_wbuf_reset(&plain);
		assert_int_equal(kafka_encode_response(&plain, 5, KAFKA_API_FETCH, v, body, NULL, 0,
						       NULL),
				 KEEL_INVAL);
		/* ... but a spliced encoding needs only the size (file-backed). */
		keel_wbuf_reset(&spliced);
		assert_int_equal(kafka_encode_response(&spliced, 5, KAFKA_API_FETCH, v, body, holes,
						       4, &hole_count),
				 KEEL_OK);
		f->topics[0].partitions[0].records.data = saved;
		/* Too few slots: refused. */
		keel_wbuf_reset(&spliced);
		assert_int_equal(kafka_encode_response(&spliced, 5, KAFKA_API_FETCH, v, body, holes,
		                                       0, &hole_count),
		                 KEEL_LIMIT);
		keel_wbuf_free(&plain);
		keel_wbuf_free(&spliced);
	}
}

static void test_error_names(void **state)
{
	(void)state;
	assert_string_equal(kafka_error_name(KAFKA_NOT_LEADER_OR_FOLLOWER),
	                    "NOT_LEADER_OR_FOLLOWER");
	assert_int_equal(KAFKA_NOT_LEADER_OR_FOLLOWER, 6);
	assert_int_equal(KAFKA_UNSUPPORTED_VERSION, 35);
	assert_int_equal(KAFKA_FENCED_LEADER_EPOCH, 74);
	assert_string_equal(kafka_error_name(-1), "UNKNOWN_SERVER_ERROR");
	assert_string_equal(kafka_error_name(12345), "UNKNOWN");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_roundtrip_every_version),
	        cmocka_unit_test(test_frames_every_version),
	        cmocka_unit_test(test_header_codecs),
	        cmocka_unit_test(test_header_versions),
	        cmocka_unit_test(test_metadata_fields_by_version),
	        cmocka_unit_test(test_fetch_fields_by_version),
	        cmocka_unit_test(test_admin_fields_by_version),
	        cmocka_unit_test(test_group_fields_by_version),
	        cmocka_unit_test(test_unsupported_versions),
	        cmocka_unit_test(test_api_versions_table_sets),
	        cmocka_unit_test(test_frame_size_limits),
	        cmocka_unit_test(test_hostile_counts),
	        cmocka_unit_test(test_fetch_splices),
	        cmocka_unit_test(test_error_names),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
