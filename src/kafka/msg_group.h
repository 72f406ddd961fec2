/*
 * msg_group.h — the consumer-group, producer-id and SASL messages, as typed
 * C structs (the conventions of msg.h, which includes this file): field
 * comments give the versions that carry a field and its default.
 */
#ifndef KEEL_KAFKA_MSG_GROUP_H
#define KEEL_KAFKA_MSG_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "kafka/io.h"
#include "kafka/wire.h"

/* ---- FindCoordinator (10) ---- */

#define KAFKA_COORDINATOR_GROUP       0
#define KAFKA_COORDINATOR_TRANSACTION 1

struct kafka_find_coordinator_request {
	struct kafka_str key;                    /* v0-3 */
	int8_t key_type;                         /* v1+, default 0 (group) */
	struct kafka_str_array coordinator_keys; /* v4+ */
};

struct kafka_coordinator {
	struct kafka_str key;
	int32_t node_id;
	struct kafka_str host;
	int32_t port;
	int16_t error_code;
	struct kafka_str error_message; /* nullable */
};

struct kafka_find_coordinator_response {
	int32_t throttle_time_ms;               /* v1+ */
	int16_t error_code;                     /* v0-3 */
	struct kafka_str error_message;         /* v1-3, nullable */
	int32_t node_id;                        /* v0-3 */
	struct kafka_str host;                  /* v0-3 */
	int32_t port;                           /* v0-3 */
	struct kafka_coordinator *coordinators; /* v4+ */
	int32_t coordinator_count;
};

/* ---- JoinGroup (11) ---- */

struct kafka_join_group_protocol {
	struct kafka_str name;
	struct kafka_bytes metadata;
};

struct kafka_join_group_request {
	struct kafka_str group_id;
	int32_t session_timeout_ms;
	int32_t rebalance_timeout_ms; /* v1+, default -1 */
	struct kafka_str member_id;
	struct kafka_str group_instance_id; /* v5+, nullable */
	struct kafka_str protocol_type;
	struct kafka_join_group_protocol *protocols;
	int32_t protocol_count;
	struct kafka_str reason; /* v8+, nullable */
};

struct kafka_join_group_member {
	struct kafka_str member_id;
	struct kafka_str group_instance_id; /* v5+, nullable */
	struct kafka_bytes metadata;
};

struct kafka_join_group_response {
	int32_t throttle_time_ms; /* v2+ */
	int16_t error_code;
	int32_t generation_id;
	struct kafka_str protocol_type; /* v7+, nullable */
	struct kafka_str protocol_name; /* null allowed v7+ */
	struct kafka_str leader;
	bool skip_assignment; /* v9+ */
	struct kafka_str member_id;
	struct kafka_join_group_member *members;
	int32_t member_count;
};

/* ---- Heartbeat (12) ---- */

struct kafka_heartbeat_request {
	struct kafka_str group_id;
	int32_t generation_id;
	struct kafka_str member_id;
	struct kafka_str group_instance_id; /* v3+, nullable */
};

struct kafka_heartbeat_response {
	int32_t throttle_time_ms; /* v1+ */
	int16_t error_code;
};

/* ---- LeaveGroup (13) ---- */

struct kafka_member_identity {
	struct kafka_str member_id;
	struct kafka_str group_instance_id; /* nullable */
	struct kafka_str reason;            /* v5+, nullable */
};

struct kafka_leave_group_request {
	struct kafka_str group_id;
	struct kafka_str member_id;            /* v0-2 */
	struct kafka_member_identity *members; /* v3+ */
	int32_t member_count;
};

struct kafka_leave_group_member_response {
	struct kafka_str member_id;
	struct kafka_str group_instance_id; /* nullable */
	int16_t error_code;
};

struct kafka_leave_group_response {
	int32_t throttle_time_ms; /* v1+ */
	int16_t error_code;
	struct kafka_leave_group_member_response *members; /* v3+ */
	int32_t member_count;
};

/* ---- SyncGroup (14) ---- */

struct kafka_sync_group_assignment {
	struct kafka_str member_id;
	struct kafka_bytes assignment;
};

struct kafka_sync_group_request {
	struct kafka_str group_id;
	int32_t generation_id;
	struct kafka_str member_id;
	struct kafka_str group_instance_id; /* v3+, nullable */
	struct kafka_str protocol_type;     /* v5+, nullable */
	struct kafka_str protocol_name;     /* v5+, nullable */
	struct kafka_sync_group_assignment *assignments;
	int32_t assignment_count;
};

struct kafka_sync_group_response {
	int32_t throttle_time_ms; /* v1+ */
	int16_t error_code;
	struct kafka_str protocol_type; /* v5+, nullable */
	struct kafka_str protocol_name; /* v5+, nullable */
	struct kafka_bytes assignment;
};

/* ---- OffsetCommit (8) ---- */

struct kafka_offset_commit_partition {
	int32_t partition_index;
	int64_t committed_offset;
	int32_t committed_leader_epoch;      /* v6+, default -1 */
	int64_t commit_timestamp;            /* v1 only, default -1 */
	struct kafka_str committed_metadata; /* nullable */
};

struct kafka_offset_commit_topic {
	struct kafka_str name;
	struct kafka_offset_commit_partition *partitions;
	int32_t partition_count;
};

struct kafka_offset_commit_request {
	struct kafka_str group_id;
	int32_t generation_id;              /* v1+, default -1 */
	struct kafka_str member_id;         /* v1+ */
	struct kafka_str group_instance_id; /* v7+, nullable */
	int64_t retention_time_ms;          /* v2-4, default -1 */
	struct kafka_offset_commit_topic *topics;
	int32_t topic_count;
};

/* A partition and its error: the result shape of OffsetCommit. */
struct kafka_partition_error {
	int32_t partition_index;
	int16_t error_code;
};

struct kafka_offset_commit_topic_response {
	struct kafka_str name;
	struct kafka_partition_error *partitions;
	int32_t partition_count;
};

struct kafka_offset_commit_response {
	int32_t throttle_time_ms; /* v3+ */
	struct kafka_offset_commit_topic_response *topics;
	int32_t topic_count;
};

/* ---- OffsetDelete (47) ---- */

struct kafka_offset_delete_partition {
	int32_t partition_index;
};

struct kafka_offset_delete_topic {
	struct kafka_str name;
	struct kafka_offset_delete_partition *partitions;
	int32_t partition_count;
};

struct kafka_offset_delete_request {
	struct kafka_str group_id;
	struct kafka_offset_delete_topic *topics;
	int32_t topic_count;
};

struct kafka_offset_delete_response {
	int16_t error_code;
	int32_t throttle_time_ms;
	struct kafka_offset_commit_topic_response *topics; /* same shape as OffsetCommit's */
	int32_t topic_count;
};

/* ---- OffsetFetch (9) ---- */

struct kafka_offset_fetch_topic {
	struct kafka_str name;
	struct kafka_i32_array partition_indexes;
};

struct kafka_offset_fetch_group {
	struct kafka_str group_id;
	struct kafka_offset_fetch_topic *topics; /* nullable: all */
	int32_t topic_count;
};

struct kafka_offset_fetch_request {
	struct kafka_str group_id;               /* v0-7 */
	struct kafka_offset_fetch_topic *topics; /* v0-7, null allowed v2+: all */
	int32_t topic_count;
	struct kafka_offset_fetch_group *groups; /* v8+ */
	int32_t group_count;
	bool require_stable; /* v7+ */
};

struct kafka_offset_fetch_partition {
	int32_t partition_index;
	int64_t committed_offset;
	int32_t committed_leader_epoch; /* v5+, default -1 */
	struct kafka_str metadata;      /* nullable */
	int16_t error_code;
};

struct kafka_offset_fetch_topic_response {
	struct kafka_str name;
	struct kafka_offset_fetch_partition *partitions;
	int32_t partition_count;
};

struct kafka_offset_fetch_group_response {
	struct kafka_str group_id;
	struct kafka_offset_fetch_topic_response *topics;
	int32_t topic_count;
	int16_t error_code;
};

struct kafka_offset_fetch_response {
	int32_t throttle_time_ms;                         /* v3+ */
	struct kafka_offset_fetch_topic_response *topics; /* v0-7 */
	int32_t topic_count;
	int16_t error_code;                               /* v2-7 */
	struct kafka_offset_fetch_group_response *groups; /* v8+ */
	int32_t group_count;
};

/* ---- DescribeGroups (15) ---- */

struct kafka_describe_groups_request {
	struct kafka_str_array groups;
	bool include_authorized_operations; /* v3+ */
};

struct kafka_described_group_member {
	struct kafka_str member_id;
	struct kafka_str group_instance_id; /* v4+, nullable */
	struct kafka_str client_id;
	struct kafka_str client_host;
	struct kafka_bytes member_metadata;
	struct kafka_bytes member_assignment;
};

struct kafka_described_group {
	int16_t error_code;
	struct kafka_str group_id;
	struct kafka_str group_state;
	struct kafka_str protocol_type;
	struct kafka_str protocol_data;
	struct kafka_described_group_member *members;
	int32_t member_count;
	int32_t authorized_operations; /* v3+, default INT32_MIN */
};

struct kafka_describe_groups_response {
	int32_t throttle_time_ms; /* v1+ */
	struct kafka_described_group *groups;
	int32_t group_count;
};

/* ---- ListGroups (16) ---- */

struct kafka_list_groups_request {
	struct kafka_str_array states_filter; /* v4+ */
};

struct kafka_listed_group {
	struct kafka_str group_id;
	struct kafka_str protocol_type;
	struct kafka_str group_state; /* v4+ */
};

struct kafka_list_groups_response {
	int32_t throttle_time_ms; /* v1+ */
	int16_t error_code;
	struct kafka_listed_group *groups;
	int32_t group_count;
};

/* ---- DeleteGroups (42) ---- */

struct kafka_delete_groups_request {
	struct kafka_str_array groups_names;
};

struct kafka_delete_groups_result {
	struct kafka_str group_id;
	int16_t error_code;
};

struct kafka_delete_groups_response {
	int32_t throttle_time_ms;
	struct kafka_delete_groups_result *results;
	int32_t result_count;
};

/* ---- InitProducerId (22) ---- */

struct kafka_init_producer_id_request {
	struct kafka_str transactional_id; /* nullable */
	int32_t transaction_timeout_ms;
	int64_t producer_id;    /* v3+, default -1 */
	int16_t producer_epoch; /* v3+, default -1 */
};

struct kafka_init_producer_id_response {
	int32_t throttle_time_ms;
	int16_t error_code;
	int64_t producer_id;
	int16_t producer_epoch;
};

/* ---- SaslHandshake (17), SaslAuthenticate (36) ---- */

struct kafka_sasl_handshake_request {
	struct kafka_str mechanism;
};

struct kafka_sasl_handshake_response {
	int16_t error_code;
	struct kafka_str_array mechanisms;
};

struct kafka_sasl_authenticate_request {
	struct kafka_bytes auth_bytes;
};

struct kafka_sasl_authenticate_response {
	int16_t error_code;
	struct kafka_str error_message; /* nullable */
	struct kafka_bytes auth_bytes;
	int64_t session_lifetime_ms; /* v1+ */
};

#endif
