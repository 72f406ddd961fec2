/*
 * test_kafka_samples.h — one filled-in example of every Kafka message keel encodes,
 * for the round-trip tests, the kafka-python cross-check and the fuzz
 * seed corpus. Values are distinct and mostly not the defaults, so that a
 * field dropped or swapped by a codec shows up.
 *
 * kafka_sample() points *body at static storage holding the request or
 * response body for api_key; it returns false for an API it has no sample
 * for. The storage is shared: one sample at a time.
 */
#ifndef KEEL_TESTS_KAFKA_SAMPLES_H
#define KEEL_TESTS_KAFKA_SAMPLES_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kafka/api.h"

#define S(lit) ((struct kafka_str){(lit), (int32_t)(sizeof(lit) - 1)})

static int32_t sample_replicas[] = {1, 2, 3};
static int32_t sample_isr[] = {1, 3};
static int32_t sample_offline[] = {2};
static const uint8_t sample_records[] = {0, 0,    0,    0,    0,    0, 0,    5,    0,    0,   0,
                                         9, 0xff, 0xff, 0xff, 0xff, 2, 0xde, 0xad, 0xbe, 0xef};

static const struct kafka_uuid sample_uuid = {
        {0x6b, 0x65, 0x65, 0x6c, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}};

/* Samples of the group, producer-id and SASL requests. */
static bool kafka_sample_group_request(int16_t api_key, void **body)
{
	static struct kafka_request u;
	static struct kafka_join_group_protocol jg_protocols[2];
	static struct kafka_member_identity lg_members[2];
	static struct kafka_sync_group_assignment sg_assign[2];
	static struct kafka_offset_commit_partition oc_parts[2];
	static struct kafka_offset_commit_topic oc_topics[1];
	static struct kafka_offset_fetch_topic of_topics[1];
	static struct kafka_offset_delete_partition od_parts[2];
	static struct kafka_offset_delete_topic od_topics[1];
	static struct kafka_offset_fetch_group of_groups[2];
	static struct kafka_str group_names[2];
	static struct kafka_str states[1];
	static const uint8_t meta[] = {0, 1, 0, 0, 0, 1, 0, 6, 'o', 'r', 'd', 'e', 'r', 's'};
	static const uint8_t sasl[] = {0, 'u', 's', 'e', 'r', 0, 'p', 'w'};
	memset(&u, 0, sizeof(u));
	group_names[0] = S("group-a");
	group_names[1] = S("group-b");
	switch (api_key) {
	case KAFKA_API_FIND_COORDINATOR:
		u.body.find_coordinator = (struct kafka_find_coordinator_request){
		        S("group-a"), KAFKA_COORDINATOR_TRANSACTION, {group_names, 2}};
		break;
	case KAFKA_API_JOIN_GROUP:
		jg_protocols[0] = (struct kafka_join_group_protocol){S("range"),
		                                                     {meta, (int32_t)sizeof(meta)}};
		jg_protocols[1] = (struct kafka_join_group_protocol){S("roundrobin"), {meta, 2}};
		u.body.join_group = (struct kafka_join_group_request){
		        S("group-a"),  10000,        300000, S("member-1"), S("instance-1"),
		        S("consumer"), jg_protocols, 2,      S("rejoin")};
		break;
	case KAFKA_API_HEARTBEAT:
		u.body.heartbeat = (struct kafka_heartbeat_request){S("group-a"), 7, S("member-1"),
		                                                    S("instance-1")};
		break;
	case KAFKA_API_LEAVE_GROUP:
		lg_members[0] =
		        (struct kafka_member_identity){S("member-1"), KAFKA_STR_NULL, S("bye")};
		lg_members[1] = (struct kafka_member_identity){S("member-2"), S("instance-2"),
		                                               KAFKA_STR_NULL};
		u.body.leave_group = (struct kafka_leave_group_request){S("group-a"), S("member-1"),
		                                                        lg_members, 2};
		break;
	case KAFKA_API_SYNC_GROUP:
		sg_assign[0] = (struct kafka_sync_group_assignment){S("member-1"),
		                                                    {meta, (int32_t)sizeof(meta)}};
		sg_assign[1] = (struct kafka_sync_group_assignment){S("member-2"), {meta, 0}};
		u.body.sync_group = (struct kafka_sync_group_request){
		        S("group-a"),  7,          S("member-1"), S("instance-1"),
		        S("consumer"), S("range"), sg_assign,     2};
		break;
	case KAFKA_API_OFFSET_COMMIT:
		oc_parts[0] =
		        (struct kafka_offset_commit_partition){0, 42, 3, 1700000000000, S("meta")};
		oc_parts[1] = (struct kafka_offset_commit_partition){1, 43, 4, -1, KAFKA_STR_NULL};
		oc_topics[0] = (struct kafka_offset_commit_topic){S("orders"), oc_parts, 2};
		u.body.offset_commit = (struct kafka_offset_commit_request){
		        S("group-a"), 7, S("member-1"), S("instance-1"), 86400000, oc_topics, 1};
		break;
	case KAFKA_API_OFFSET_FETCH:
		of_topics[0] = (struct kafka_offset_fetch_topic){S("orders"), {sample_replicas, 2}};
		of_groups[0] = (struct kafka_offset_fetch_group){S("group-a"), of_topics, 1};
		of_groups[1] = (struct kafka_offset_fetch_group){S("group-b"), NULL, -1};
		u.body.offset_fetch = (struct kafka_offset_fetch_request){
		        S("group-a"), of_topics, 1, of_groups, 2, true};
		break;
	case KAFKA_API_DESCRIBE_GROUPS:
		u.body.describe_groups =
		        (struct kafka_describe_groups_request){{group_names, 2}, true};
		break;
	case KAFKA_API_LIST_GROUPS:
		states[0] = S("Stable");
		u.body.list_groups = (struct kafka_list_groups_request){{states, 1}};
		break;
	case KAFKA_API_DELETE_GROUPS:
		u.body.delete_groups = (struct kafka_delete_groups_request){{group_names, 2}};
		break;
	case KAFKA_API_OFFSET_DELETE:
		od_parts[0] = (struct kafka_offset_delete_partition){3};
		od_parts[1] = (struct kafka_offset_delete_partition){5};
		od_topics[0] = (struct kafka_offset_delete_topic){S("orders"), od_parts, 2};
		u.body.offset_delete = (struct kafka_offset_delete_request){S("group-a"), od_topics, 1};
		break;
	case KAFKA_API_INIT_PRODUCER_ID:
		u.body.init_producer_id =
		        (struct kafka_init_producer_id_request){S("txn-1"), 60000, 5000, 3};
		break;
	case KAFKA_API_SASL_HANDSHAKE:
		u.body.sasl_handshake = (struct kafka_sasl_handshake_request){S("PLAIN")};
		break;
	case KAFKA_API_SASL_AUTHENTICATE:
		u.body.sasl_authenticate =
		        (struct kafka_sasl_authenticate_request){{sasl, (int32_t)sizeof(sasl)}};
		break;
	default:
		return false;
	}
	*body = &u.body;
	return true;
}

/* Samples of the group, producer-id and SASL responses. */
static bool kafka_sample_group_response(int16_t api_key, void **body)
{
	static union kafka_response_body u;
	static struct kafka_coordinator fc_coords[2];
	static struct kafka_join_group_member jg_members[2];
	static struct kafka_leave_group_member_response lg_members[1];
	static struct kafka_partition_error oc_parts[2];
	static struct kafka_offset_commit_topic_response oc_topics[1];
	static struct kafka_offset_fetch_partition of_parts[2];
	static struct kafka_offset_fetch_topic_response of_topics[1];
	static struct kafka_offset_fetch_group_response of_groups[1];
	static struct kafka_described_group_member dg_members[1];
	static struct kafka_described_group dg_groups[2];
	static struct kafka_listed_group lg_groups[2];
	static struct kafka_delete_groups_result dl_results[2];
	static struct kafka_partition_error od_parts[2];
	static struct kafka_offset_commit_topic_response od_topics[1];
	static struct kafka_str mechanisms[2];
	static const uint8_t meta[] = {0, 1, 0, 0, 0, 1, 0, 6, 'o', 'r', 'd', 'e', 'r', 's'};
	memset(&u, 0, sizeof(u));
	switch (api_key) {
	case KAFKA_API_FIND_COORDINATOR:
		fc_coords[0] = (struct kafka_coordinator){S("group-a"), 2, S("10.0.0.2"),
		                                          9092,         0, KAFKA_STR_NULL};
		fc_coords[1] = (struct kafka_coordinator){
		        S("group-b"), -1, S(""), -1, KAFKA_COORDINATOR_NOT_AVAILABLE, S("loading")};
		u.find_coordinator = (struct kafka_find_coordinator_response){
		        11, 0, S("ok"), 2, S("10.0.0.2"), 9092, fc_coords, 2};
		break;
	case KAFKA_API_JOIN_GROUP:
		jg_members[0] = (struct kafka_join_group_member){
		        S("member-1"), S("instance-1"), {meta, (int32_t)sizeof(meta)}};
		jg_members[1] =
		        (struct kafka_join_group_member){S("member-2"), KAFKA_STR_NULL, {meta, 1}};
		u.join_group = (struct kafka_join_group_response){12,         0,
		                                                  7,          S("consumer"),
		                                                  S("range"), S("member-1"),
		                                                  true,       S("member-1"),
		                                                  jg_members, 2};
		break;
	case KAFKA_API_HEARTBEAT:
		u.heartbeat = (struct kafka_heartbeat_response){13, KAFKA_REBALANCE_IN_PROGRESS};
		break;
	case KAFKA_API_LEAVE_GROUP:
		lg_members[0] = (struct kafka_leave_group_member_response){
		        S("member-1"), S("instance-1"), KAFKA_UNKNOWN_MEMBER_ID};
		u.leave_group = (struct kafka_leave_group_response){14, 0, lg_members, 1};
		break;
	case KAFKA_API_SYNC_GROUP:
		u.sync_group = (struct kafka_sync_group_response){
		        15, 0, S("consumer"), S("range"), {meta, (int32_t)sizeof(meta)}};
		break;
	case KAFKA_API_OFFSET_COMMIT:
		oc_parts[0] = (struct kafka_partition_error){0, 0};
		oc_parts[1] = (struct kafka_partition_error){1, KAFKA_ILLEGAL_GENERATION};
		oc_topics[0] =
		        (struct kafka_offset_commit_topic_response){S("orders"), oc_parts, 2};
		u.offset_commit = (struct kafka_offset_commit_response){16, oc_topics, 1};
		break;
	case KAFKA_API_OFFSET_FETCH:
		of_parts[0] = (struct kafka_offset_fetch_partition){0, 42, 3, S("meta"), 0};
		of_parts[1] = (struct kafka_offset_fetch_partition){
		        1, -1, -1, KAFKA_STR_NULL, KAFKA_UNKNOWN_TOPIC_OR_PARTITION};
		of_topics[0] = (struct kafka_offset_fetch_topic_response){S("orders"), of_parts, 2};
		of_groups[0] =
		        (struct kafka_offset_fetch_group_response){S("group-a"), of_topics, 1, 0};
		u.offset_fetch = (struct kafka_offset_fetch_response){
		        17, of_topics, 1, KAFKA_NOT_COORDINATOR, of_groups, 1};
		break;
	case KAFKA_API_DESCRIBE_GROUPS:
		dg_members[0] = (struct kafka_described_group_member){S("member-1"),
		                                                      S("instance-1"),
		                                                      S("client-1"),
		                                                      S("/10.0.0.9"),
		                                                      {meta, (int32_t)sizeof(meta)},
		                                                      {meta, 2}};
		dg_groups[0] = (struct kafka_described_group){
		        0,          S("group-a"), S("Stable"), S("consumer"),
		        S("range"), dg_members,   1,           0xff};
		dg_groups[1] = (struct kafka_described_group){KAFKA_GROUP_ID_NOT_FOUND,
		                                              S("group-b"),
		                                              S("Dead"),
		                                              S(""),
		                                              S(""),
		                                              NULL,
		                                              0,
		                                              INT32_MIN};
		u.describe_groups = (struct kafka_describe_groups_response){18, dg_groups, 2};
		break;
	case KAFKA_API_LIST_GROUPS:
		lg_groups[0] =
		        (struct kafka_listed_group){S("group-a"), S("consumer"), S("Stable")};
		lg_groups[1] = (struct kafka_listed_group){S("group-b"), S(""), S("Empty")};
		u.list_groups = (struct kafka_list_groups_response){19, 0, lg_groups, 2};
		break;
	case KAFKA_API_DELETE_GROUPS:
		dl_results[0] = (struct kafka_delete_groups_result){S("group-a"), 0};
		dl_results[1] =
		        (struct kafka_delete_groups_result){S("group-b"), KAFKA_NON_EMPTY_GROUP};
		u.delete_groups = (struct kafka_delete_groups_response){20, dl_results, 2};
		break;
	case KAFKA_API_OFFSET_DELETE:
		od_parts[0] = (struct kafka_partition_error){3, KAFKA_NONE};
		od_parts[1] = (struct kafka_partition_error){5, KAFKA_GROUP_SUBSCRIBED_TO_TOPIC};
		od_topics[0] = (struct kafka_offset_commit_topic_response){S("orders"), od_parts, 2};
		u.offset_delete = (struct kafka_offset_delete_response){0, 22, od_topics, 1};
		break;
	case KAFKA_API_INIT_PRODUCER_ID:
		u.init_producer_id = (struct kafka_init_producer_id_response){21, 0, 5001, 4};
		break;
	case KAFKA_API_SASL_HANDSHAKE:
		mechanisms[0] = S("PLAIN");
		mechanisms[1] = S("SCRAM-SHA-256");
		u.sasl_handshake = (struct kafka_sasl_handshake_response){
		        KAFKA_UNSUPPORTED_SASL_MECHANISM, {mechanisms, 2}};
		break;
	case KAFKA_API_SASL_AUTHENTICATE:
		u.sasl_authenticate = (struct kafka_sasl_authenticate_response){
		        KAFKA_SASL_AUTHENTICATION_FAILED, S("bad password"), {meta, 3}, 3600000};
		break;
	default:
		return false;
	}
	*body = &u;
	return true;
}

static bool kafka_sample_request(int16_t api_key, void **body)
{
	static union {
		struct kafka_request r;
	} u;
	static struct kafka_metadata_request_topic md_topics[2];
	static struct kafka_produce_partition pr_parts[2];
	static struct kafka_produce_topic pr_topics[1];
	static struct kafka_fetch_partition fe_parts[2];
	static struct kafka_fetch_topic fe_topics[1];
	static struct kafka_fetch_forgotten_topic fe_forgotten[1];
	static struct kafka_list_offsets_partition lo_parts[2];
	static struct kafka_list_offsets_topic lo_topics[1];
	static struct kafka_offset_for_leader_partition ol_parts[1];
	static struct kafka_offset_for_leader_topic ol_topics[1];
	static struct kafka_create_topics_assignment ct_assign[1];
	static struct kafka_config_entry ct_configs[2];
	static struct kafka_create_topics_topic ct_topics[1];
	static struct kafka_delete_topics_topic dt_topics[2];
	static struct kafka_str dt_names[2];
	static struct kafka_create_partitions_assignment cp_assign[2];
	static struct kafka_create_partitions_topic cp_topics[1];
	static struct kafka_str dc_keys[2];
	static struct kafka_describe_configs_resource dc_res[2];
	static struct kafka_alterable_config ia_configs[2];
	static struct kafka_alter_configs_resource ia_res[1];
	static struct kafka_legacy_config la_configs[2];
	static struct kafka_legacy_alter_resource la_res[1];
	memset(&u, 0, sizeof(u));
	switch (api_key) {
	case KAFKA_API_API_VERSIONS:
		u.r.body.api_versions =
		        (struct kafka_api_versions_request){S("keel-test"), S("0.1.0")};
		break;
	case KAFKA_API_METADATA:
		md_topics[0] = (struct kafka_metadata_request_topic){sample_uuid, S("orders")};
		md_topics[1] = (struct kafka_metadata_request_topic){{{0}}, S("payments")};
		u.r.body.metadata =
		        (struct kafka_metadata_request){md_topics, 2, false, true, true};
		break;
	case KAFKA_API_PRODUCE:
		pr_parts[0] = (struct kafka_produce_partition){
		        0, {sample_records, (int32_t)sizeof(sample_records)}};
		pr_parts[1] = (struct kafka_produce_partition){7, {NULL, -1}};
		pr_topics[0] = (struct kafka_produce_topic){S("orders"), pr_parts, 2};
		u.r.body.produce =
		        (struct kafka_produce_request){S("txn-1"), -1, 30000, pr_topics, 1};
		break;
	case KAFKA_API_FETCH:
		fe_parts[0] = (struct kafka_fetch_partition){0, 4, 100, 3, 10, 1048576};
		fe_parts[1] = (struct kafka_fetch_partition){5, 6, 7, 8, 9, 65536};
		fe_topics[0] = (struct kafka_fetch_topic){S("orders"), fe_parts, 2};
		fe_forgotten[0] = (struct kafka_fetch_forgotten_topic){S("old"), {sample_isr, 2}};
		u.r.body.fetch = (struct kafka_fetch_request){.has_cluster_id = true,
		                                              .cluster_id = S("cluster-a"),
		                                              .replica_id = 2,
		                                              .max_wait_ms = 500,
		                                              .min_bytes = 1,
		                                              .max_bytes = 52428800,
		                                              .isolation_level = 1,
		                                              .session_id = 11,
		                                              .session_epoch = 12,
		                                              .topics = fe_topics,
		                                              .topic_count = 1,
		                                              .forgotten_topics = fe_forgotten,
		                                              .forgotten_topic_count = 1,
		                                              .rack_id = S("rack-1")};
		break;
	case KAFKA_API_LIST_OFFSETS:
		lo_parts[0] =
		        (struct kafka_list_offsets_partition){0, 3, KAFKA_LIST_OFFSETS_EARLIEST};
		lo_parts[1] = (struct kafka_list_offsets_partition){1, 4, 1700000000000};
		lo_topics[0] = (struct kafka_list_offsets_topic){S("orders"), lo_parts, 2};
		u.r.body.list_offsets = (struct kafka_list_offsets_request){-1, 1, lo_topics, 1};
		break;
	case KAFKA_API_OFFSET_FOR_LEADER_EPOCH:
		ol_parts[0] = (struct kafka_offset_for_leader_partition){2, 9, 8};
		ol_topics[0] = (struct kafka_offset_for_leader_topic){S("orders"), ol_parts, 1};
		u.r.body.offset_for_leader_epoch =
		        (struct kafka_offset_for_leader_epoch_request){3, ol_topics, 1};
		break;
	case KAFKA_API_CREATE_TOPICS:
		ct_assign[0] = (struct kafka_create_topics_assignment){0, {sample_replicas, 3}};
		ct_configs[0] = (struct kafka_config_entry){S("retention.ms"), S("60000")};
		ct_configs[1] = (struct kafka_config_entry){S("cleanup.policy"), KAFKA_STR_NULL};
		ct_topics[0] = (struct kafka_create_topics_topic){S("orders"), 1, 3, ct_assign, 1,
		                                                  ct_configs,  2};
		u.r.body.create_topics =
		        (struct kafka_create_topics_request){ct_topics, 1, 15000, true};
		break;
	case KAFKA_API_DELETE_TOPICS:
		dt_topics[0] = (struct kafka_delete_topics_topic){S("orders"), {{0}}};
		dt_topics[1] = (struct kafka_delete_topics_topic){KAFKA_STR_NULL, sample_uuid};
		dt_names[0] = S("orders");
		dt_names[1] = S("payments");
		u.r.body.delete_topics =
		        (struct kafka_delete_topics_request){dt_topics, 2, {dt_names, 2}, 20000};
		break;
	case KAFKA_API_CREATE_PARTITIONS:
		cp_assign[0] = (struct kafka_create_partitions_assignment){{sample_replicas, 2}};
		cp_assign[1] = (struct kafka_create_partitions_assignment){{sample_isr, 2}};
		cp_topics[0] = (struct kafka_create_partitions_topic){S("orders"), 3, cp_assign, 2};
		u.r.body.create_partitions =
		        (struct kafka_create_partitions_request){cp_topics, 1, 25000, true};
		break;
	case KAFKA_API_DESCRIBE_CONFIGS:
		dc_keys[0] = S("retention.ms");
		dc_keys[1] = S("segment.bytes");
		dc_res[0] = (struct kafka_describe_configs_resource){
		        KAFKA_RESOURCE_TOPIC, S("orders"), {dc_keys, 2}};
		dc_res[1] = (struct kafka_describe_configs_resource){
		        KAFKA_RESOURCE_BROKER, S("1"), {NULL, -1}};
		u.r.body.describe_configs =
		        (struct kafka_describe_configs_request){dc_res, 2, true, true};
		break;
	case KAFKA_API_ALTER_CONFIGS:
		la_configs[0] = (struct kafka_legacy_config){S("retention.ms"), S("2000")};
		la_configs[1] = (struct kafka_legacy_config){S("cleanup.policy"), KAFKA_STR_NULL};
		la_res[0] = (struct kafka_legacy_alter_resource){KAFKA_RESOURCE_TOPIC, S("orders"),
		                                                 la_configs, 2};
		u.r.body.alter_configs = (struct kafka_alter_configs_request){la_res, 1, true};
		break;
	case KAFKA_API_INCREMENTAL_ALTER_CONFIGS:
		ia_configs[0] = (struct kafka_alterable_config){S("retention.ms"), KAFKA_CONFIG_SET,
		                                                S("1000")};
		ia_configs[1] = (struct kafka_alterable_config){
		        S("segment.bytes"), KAFKA_CONFIG_DELETE, KAFKA_STR_NULL};
		ia_res[0] = (struct kafka_alter_configs_resource){KAFKA_RESOURCE_TOPIC, S("orders"),
		                                                  ia_configs, 2};
		u.r.body.incremental_alter_configs =
		        (struct kafka_incremental_alter_configs_request){ia_res, 1, true};
		break;
	case KAFKA_API_DESCRIBE_CLUSTER:
		u.r.body.describe_cluster = (struct kafka_describe_cluster_request){true, 2};
		break;
	case KAFKA_API_ALTER_PARTITION_REASSIGNMENTS: {
		static struct kafka_reassign_partition ar_parts[2];
		static struct kafka_reassign_topic ar_topics[1];
		ar_parts[0] = (struct kafka_reassign_partition){0, {sample_replicas, 3}};
		ar_parts[1] = (struct kafka_reassign_partition){4, {NULL, -1}}; /* cancel */
		ar_topics[0] = (struct kafka_reassign_topic){S("orders"), ar_parts, 2};
		u.r.body.alter_partition_reassignments =
		        (struct kafka_alter_partition_reassignments_request){30000, ar_topics, 1};
		break;
	}
	case KAFKA_API_LIST_PARTITION_REASSIGNMENTS: {
		static struct kafka_list_reassignments_topic lr_topics[1];
		lr_topics[0] = (struct kafka_list_reassignments_topic){S("orders"), {sample_isr, 2}};
		u.r.body.list_partition_reassignments =
		        (struct kafka_list_partition_reassignments_request){30000, lr_topics, 1};
		break;
	}
	default:
		return kafka_sample_group_request(api_key, body);
	}
	*body = &u.r.body;
	return true;
}

static bool kafka_sample_response(int16_t api_key, void **body)
{
	static union kafka_response_body u;
	static struct kafka_api_version av_keys[3];
	static struct kafka_metadata_broker md_brokers[2];
	static struct kafka_metadata_partition md_parts[2];
	static struct kafka_metadata_topic md_topics[2];
	static struct kafka_produce_record_error pr_errors[1];
	static struct kafka_produce_partition_response pr_parts[2];
	static struct kafka_produce_topic_response pr_topics[1];
	static struct kafka_fetch_aborted_transaction fe_aborted[1];
	static struct kafka_fetch_partition_data fe_parts[2];
	static struct kafka_fetch_topic_response fe_topics[1];
	static struct kafka_list_offsets_partition_response lo_parts[1];
	static struct kafka_list_offsets_topic_response lo_topics[1];
	static struct kafka_epoch_end_offset ol_parts[2];
	static struct kafka_offset_for_leader_topic_result ol_topics[1];
	static struct kafka_create_topics_config ct_configs[1];
	static struct kafka_create_topics_result ct_topics[2];
	static struct kafka_delete_topics_result dt_results[2];
	static struct kafka_create_partitions_result cp_results[2];
	static struct kafka_describe_configs_synonym dc_syn[1];
	static struct kafka_describe_configs_entry dc_entries[2];
	static struct kafka_describe_configs_result dc_results[1];
	static struct kafka_alter_configs_resource_response ia_results[2];
	static struct kafka_describe_cluster_broker cl_brokers[2];
	memset(&u, 0, sizeof(u));
	switch (api_key) {
	case KAFKA_API_API_VERSIONS:
		av_keys[0] = (struct kafka_api_version){0, 3, 9};
		av_keys[1] = (struct kafka_api_version){1, 4, 12};
		av_keys[2] = (struct kafka_api_version){18, 0, 3};
		u.api_versions = (struct kafka_api_versions_response){0, av_keys, 3, 100};
		break;
	case KAFKA_API_METADATA:
		md_brokers[0] = (struct kafka_metadata_broker){1, S("10.0.0.1"), 9092, S("r1")};
		md_brokers[1] = (struct kafka_metadata_broker){2, S("broker-2.local"), 19092,
		                                               KAFKA_STR_NULL};
		md_parts[0] = (struct kafka_metadata_partition){
		        0, 0, 1, 7, {sample_replicas, 3}, {sample_isr, 2}, {sample_offline, 1}};
		md_parts[1] = (struct kafka_metadata_partition){KAFKA_LEADER_NOT_AVAILABLE,
		                                                1,
		                                                -1,
		                                                8,
		                                                {sample_isr, 2},
		                                                {NULL, 0},
		                                                {NULL, 0}};
		md_topics[0] = (struct kafka_metadata_topic){
		        0, S("orders"), sample_uuid, false, md_parts, 2, 0x0f};
		md_topics[1] = (struct kafka_metadata_topic){
		        KAFKA_UNKNOWN_TOPIC_OR_PARTITION, S("nope"), {{0}}, true, NULL, 0, 0};
		u.metadata = (struct kafka_metadata_response){5, md_brokers, 2, S("keel-cluster"),
		                                              2, md_topics,  2, 0x1f};
		break;
	case KAFKA_API_PRODUCE:
		pr_errors[0] = (struct kafka_produce_record_error){3, S("bad record")};
		pr_parts[0] = (struct kafka_produce_partition_response){
		        0, 0, 42, 1700000000123, 5, pr_errors, 1, KAFKA_STR_NULL};
		pr_parts[1] = (struct kafka_produce_partition_response){
		        1, KAFKA_NOT_LEADER_OR_FOLLOWER, -1, -1, -1, NULL, 0, S("not leader")};
		pr_topics[0] = (struct kafka_produce_topic_response){S("orders"), pr_parts, 2};
		u.produce = (struct kafka_produce_response){pr_topics, 1, 7};
		break;
	case KAFKA_API_FETCH:
		fe_aborted[0] = (struct kafka_fetch_aborted_transaction){77, 40};
		fe_parts[0] = (struct kafka_fetch_partition_data){
		        .partition_index = 0,
		        .error_code = 0,
		        .high_watermark = 120,
		        .last_stable_offset = 110,
		        .log_start_offset = 3,
		        .has_diverging_epoch = true,
		        .diverging_epoch = {4, 99},
		        .has_current_leader = true,
		        .current_leader = {2, 5},
		        .aborted_transactions = fe_aborted,
		        .aborted_transaction_count = 1,
		        .preferred_read_replica = 3,
		        .records = {sample_records, (int32_t)sizeof(sample_records)}};
		fe_parts[1] =
		        (struct kafka_fetch_partition_data){.partition_index = 1,
		                                            .error_code = KAFKA_OFFSET_OUT_OF_RANGE,
		                                            .high_watermark = -1,
		                                            .last_stable_offset = -1,
		                                            .log_start_offset = -1,
		                                            .has_snapshot_id = true,
		                                            .snapshot_id = {55, 6},
		                                            .aborted_transaction_count = -1,
		                                            .preferred_read_replica = -1,
		                                            .records = {NULL, -1}};
		fe_topics[0] = (struct kafka_fetch_topic_response){S("orders"), fe_parts, 2};
		u.fetch = (struct kafka_fetch_response){9, 0, 1234, fe_topics, 1};
		break;
	case KAFKA_API_LIST_OFFSETS:
		lo_parts[0] =
		        (struct kafka_list_offsets_partition_response){0, 0, 1700000000000, 17, 4};
		lo_topics[0] = (struct kafka_list_offsets_topic_response){S("orders"), lo_parts, 1};
		u.list_offsets = (struct kafka_list_offsets_response){3, lo_topics, 1};
		break;
	case KAFKA_API_OFFSET_FOR_LEADER_EPOCH:
		ol_parts[0] = (struct kafka_epoch_end_offset){0, 0, 5, 300};
		ol_parts[1] = (struct kafka_epoch_end_offset){KAFKA_FENCED_LEADER_EPOCH, 1, -1, -1};
		ol_topics[0] =
		        (struct kafka_offset_for_leader_topic_result){S("orders"), ol_parts, 2};
		u.offset_for_leader_epoch =
		        (struct kafka_offset_for_leader_epoch_response){4, ol_topics, 1};
		break;
	case KAFKA_API_CREATE_TOPICS:
		ct_configs[0] = (struct kafka_create_topics_config){S("retention.ms"), S("60000"),
		                                                    false, 5, false};
		ct_topics[0] = (struct kafka_create_topics_result){
		        S("orders"), sample_uuid, 0, KAFKA_STR_NULL, true, 0, 3, 2, ct_configs, 1};
		ct_topics[1] = (struct kafka_create_topics_result){
		        S("dup"), {{0}}, KAFKA_TOPIC_ALREADY_EXISTS, S("exists"), false, 0, -1, -1,
		        NULL,     -1};
		u.create_topics = (struct kafka_create_topics_response){6, ct_topics, 2};
		break;
	case KAFKA_API_DELETE_TOPICS:
		dt_results[0] = (struct kafka_delete_topics_result){S("orders"), sample_uuid, 0,
		                                                    KAFKA_STR_NULL};
		dt_results[1] = (struct kafka_delete_topics_result){
		        S("gone"), {{0}}, KAFKA_UNKNOWN_TOPIC_OR_PARTITION, S("no such topic")};
		u.delete_topics = (struct kafka_delete_topics_response){8, dt_results, 2};
		break;
	case KAFKA_API_CREATE_PARTITIONS:
		cp_results[0] =
		        (struct kafka_create_partitions_result){S("orders"), 0, KAFKA_STR_NULL};
		cp_results[1] = (struct kafka_create_partitions_result){
		        S("small"), KAFKA_INVALID_PARTITIONS, S("cannot shrink")};
		u.create_partitions = (struct kafka_create_partitions_response){2, cp_results, 2};
		break;
	case KAFKA_API_DESCRIBE_CONFIGS:
		dc_syn[0] = (struct kafka_describe_configs_synonym){S("log.retention.ms"),
		                                                    S("604800000"), 5};
		dc_entries[0] = (struct kafka_describe_configs_entry){
		        S("retention.ms"), S("60000"), false, false, 1, false, dc_syn, 1, 5,
		        S("how long")};
		dc_entries[1] = (struct kafka_describe_configs_entry){
		        S("secret"), KAFKA_STR_NULL, true, true, 4,
		        true,        NULL,           0,    2,    KAFKA_STR_NULL};
		dc_results[0] = (struct kafka_describe_configs_result){
		        0, KAFKA_STR_NULL, KAFKA_RESOURCE_TOPIC, S("orders"), dc_entries, 2};
		u.describe_configs = (struct kafka_describe_configs_response){1, dc_results, 1};
		break;
	case KAFKA_API_ALTER_CONFIGS:
		ia_results[0] = (struct kafka_alter_configs_resource_response){
		        KAFKA_INVALID_CONFIG, S("unknown"), KAFKA_RESOURCE_BROKER, S("2")};
		u.alter_configs = (struct kafka_alter_configs_response){6, ia_results, 1};
		break;
	case KAFKA_API_INCREMENTAL_ALTER_CONFIGS:
		ia_results[0] = (struct kafka_alter_configs_resource_response){
		        0, KAFKA_STR_NULL, KAFKA_RESOURCE_TOPIC, S("orders")};
		ia_results[1] = (struct kafka_alter_configs_resource_response){
		        KAFKA_INVALID_CONFIG, S("bad value"), KAFKA_RESOURCE_BROKER, S("1")};
		u.incremental_alter_configs =
		        (struct kafka_incremental_alter_configs_response){3, ia_results, 2};
		break;
	case KAFKA_API_DESCRIBE_CLUSTER:
		cl_brokers[0] =
		        (struct kafka_describe_cluster_broker){1, S("10.0.0.1"), 9092, S("r1")};
		cl_brokers[1] = (struct kafka_describe_cluster_broker){2, S("10.0.0.2"), 9093,
		                                                       KAFKA_STR_NULL};
		u.describe_cluster = (struct kafka_describe_cluster_response){
		        0, 0, KAFKA_STR_NULL, 2, S("keel-cluster"), 1, cl_brokers, 2, 0x2f};
		break;
	case KAFKA_API_ALTER_PARTITION_REASSIGNMENTS: {
		static struct kafka_reassign_partition_result arr_parts[2];
		static struct kafka_reassign_topic_result arr_topics[1];
		arr_parts[0] = (struct kafka_reassign_partition_result){0, 0, KAFKA_STR_NULL};
		arr_parts[1] = (struct kafka_reassign_partition_result){
		        4, KAFKA_NO_REASSIGNMENT_IN_PROGRESS, S("not being reassigned")};
		arr_topics[0] = (struct kafka_reassign_topic_result){S("orders"), arr_parts, 2};
		u.alter_partition_reassignments = (struct kafka_alter_partition_reassignments_response){
		        5, 0, KAFKA_STR_NULL, arr_topics, 1};
		break;
	}
	case KAFKA_API_LIST_PARTITION_REASSIGNMENTS: {
		static struct kafka_ongoing_partition lrr_parts[1];
		static struct kafka_ongoing_topic lrr_topics[1];
		lrr_parts[0] = (struct kafka_ongoing_partition){
		        2, {sample_replicas, 3}, {sample_replicas + 2, 1}, {sample_replicas, 1}};
		lrr_topics[0] = (struct kafka_ongoing_topic){S("orders"), lrr_parts, 1};
		u.list_partition_reassignments = (struct kafka_list_partition_reassignments_response){
		        6, 0, KAFKA_STR_NULL, lrr_topics, 1};
		break;
	}
	default:
		return kafka_sample_group_response(api_key, body);
	}
	*body = &u;
	return true;
}

#endif
