/*
 * msg.h — the Kafka messages keel speaks, as typed C structs.
 *
 * One struct per request and per response body (the part after the
 * header), covering every field of every version in the supported range
 * (api.h); a field's comment gives the versions that carry it, "v4+" style,
 * and its default where it is absent. Field names follow Kafka's JSON specs
 * (clients/src/main/resources/common/message/ in apache/kafka).
 *
 * Ownership after decoding (api.h): strings, bytes and records point into
 * the decoded buffer; arrays (`items`) live in the caller's arena. A count
 * of -1 is a null array (only where the spec allows null).
 *
 * Record sets are opaque: the partition log validates batches.
 */
#ifndef KEEL_KAFKA_MSG_H
#define KEEL_KAFKA_MSG_H

#include <stdbool.h>
#include <stdint.h>

#include "kafka/io.h"
#include "kafka/wire.h"

/* ---- ApiVersions (18) ---- */

struct kafka_api_versions_request {
	struct kafka_str client_software_name;    /* v3+ */
	struct kafka_str client_software_version; /* v3+ */
};

struct kafka_api_version {
	int16_t api_key;
	int16_t min_version;
	int16_t max_version;
};

struct kafka_api_versions_response {
	int16_t error_code;
	struct kafka_api_version *api_keys;
	int32_t api_key_count;
	int32_t throttle_time_ms; /* v1+ */
	/* v3+ tagged fields (features) are skipped on decode, never sent. */
};

/* ---- Metadata (3) ---- */

struct kafka_metadata_request_topic {
	struct kafka_uuid topic_id; /* v10+ */
	struct kafka_str name;      /* null allowed v10+ */
};

struct kafka_metadata_request {
	/* v0: an empty array means all topics; v1+: null means all topics. */
	struct kafka_metadata_request_topic *topics;
	int32_t topic_count;
	bool allow_auto_topic_creation;             /* v4+, default true */
	bool include_cluster_authorized_operations; /* v8-10 */
	bool include_topic_authorized_operations;   /* v8+ */
};

struct kafka_metadata_broker {
	int32_t node_id;
	struct kafka_str host;
	int32_t port;
	struct kafka_str rack; /* v1+, nullable */
};

struct kafka_metadata_partition {
	int16_t error_code;
	int32_t partition_index;
	int32_t leader_id;
	int32_t leader_epoch; /* v7+, default -1 */
	struct kafka_i32_array replica_nodes;
	struct kafka_i32_array isr_nodes;
	struct kafka_i32_array offline_replicas; /* v5+ */
};

struct kafka_metadata_topic {
	int16_t error_code;
	struct kafka_str name;      /* null allowed v12+ */
	struct kafka_uuid topic_id; /* v10+ */
	bool is_internal;           /* v1+ */
	struct kafka_metadata_partition *partitions;
	int32_t partition_count;
	int32_t topic_authorized_operations; /* v8+, default INT32_MIN */
};

struct kafka_metadata_response {
	int32_t throttle_time_ms; /* v3+ */
	struct kafka_metadata_broker *brokers;
	int32_t broker_count;
	struct kafka_str cluster_id; /* v2+, nullable */
	int32_t controller_id;       /* v1+, default -1 */
	struct kafka_metadata_topic *topics;
	int32_t topic_count;
	int32_t cluster_authorized_operations; /* v8-10, default INT32_MIN */
};

/* ---- Produce (0) ---- */

struct kafka_produce_partition {
	int32_t index;
	struct kafka_records records;
};

struct kafka_produce_topic {
	struct kafka_str name;
	struct kafka_produce_partition *partitions;
	int32_t partition_count;
};

struct kafka_produce_request {
	struct kafka_str transactional_id; /* v3+, nullable */
	int16_t acks;
	int32_t timeout_ms;
	struct kafka_produce_topic *topics;
	int32_t topic_count;
};

struct kafka_produce_record_error {
	int32_t batch_index;
	struct kafka_str batch_index_error_message; /* nullable */
};

struct kafka_produce_partition_response {
	int32_t index;
	int16_t error_code;
	int64_t base_offset;
	int64_t log_append_time_ms;                       /* v2+, default -1 */
	int64_t log_start_offset;                         /* v5+, default -1 */
	struct kafka_produce_record_error *record_errors; /* v8+ */
	int32_t record_error_count;
	struct kafka_str error_message; /* v8+, nullable */
};

struct kafka_produce_topic_response {
	struct kafka_str name;
	struct kafka_produce_partition_response *partitions;
	int32_t partition_count;
};

struct kafka_produce_response {
	struct kafka_produce_topic_response *topics;
	int32_t topic_count;
	int32_t throttle_time_ms; /* v1+ */
};

/* ---- Fetch (1) ---- */

struct kafka_fetch_partition {
	int32_t partition;
	int32_t current_leader_epoch; /* v9+, default -1 */
	int64_t fetch_offset;
	int32_t last_fetched_epoch; /* v12+, default -1 */
	int64_t log_start_offset;   /* v5+, default -1 */
	int32_t partition_max_bytes;
};

struct kafka_fetch_topic {
	struct kafka_str topic;
	struct kafka_fetch_partition *partitions;
	int32_t partition_count;
};

struct kafka_fetch_forgotten_topic {
	struct kafka_str topic;
	struct kafka_i32_array partitions;
};

struct kafka_fetch_request {
	bool has_cluster_id;         /* v12+, tagged field 0 */
	struct kafka_str cluster_id; /* nullable */
	int32_t replica_id;          /* -1 for consumers, the broker id for followers */
	int32_t max_wait_ms;
	int32_t min_bytes;
	int32_t max_bytes;      /* v3+, default INT32_MAX */
	int8_t isolation_level; /* v4+: 0 read uncommitted, 1 read committed */
	int32_t session_id;     /* v7+, default 0 */
	int32_t session_epoch;  /* v7+, default -1 */
	struct kafka_fetch_topic *topics;
	int32_t topic_count;
	struct kafka_fetch_forgotten_topic *forgotten_topics; /* v7+ */
	int32_t forgotten_topic_count;
	struct kafka_str rack_id; /* v11+, default "" */
};

struct kafka_fetch_aborted_transaction {
	int64_t producer_id;
	int64_t first_offset;
};

struct kafka_fetch_epoch_end_offset {
	int32_t epoch;
	int64_t end_offset;
};

struct kafka_fetch_leader_id_and_epoch {
	int32_t leader_id;
	int32_t leader_epoch;
};

struct kafka_fetch_snapshot_id {
	int64_t end_offset;
	int32_t epoch;
};

struct kafka_fetch_partition_data {
	int32_t partition_index;
	int16_t error_code;
	int64_t high_watermark;
	int64_t last_stable_offset; /* v4+, default -1 */
	int64_t log_start_offset;   /* v5+, default -1 */
	/* v12+ tagged fields 0, 1, 2 (sent only when has_*). */
	bool has_diverging_epoch;
	struct kafka_fetch_epoch_end_offset diverging_epoch;
	bool has_current_leader;
	struct kafka_fetch_leader_id_and_epoch current_leader;
	bool has_snapshot_id;
	struct kafka_fetch_snapshot_id snapshot_id;
	struct kafka_fetch_aborted_transaction *aborted_transactions; /* v4+, nullable */
	int32_t aborted_transaction_count;
	int32_t preferred_read_replica; /* v11+, default -1 */
	struct kafka_records records;   /* nullable */
};

struct kafka_fetch_topic_response {
	struct kafka_str topic;
	struct kafka_fetch_partition_data *partitions;
	int32_t partition_count;
};

struct kafka_fetch_response {
	int32_t throttle_time_ms; /* v1+ */
	int16_t error_code;       /* v7+ */
	int32_t session_id;       /* v7+ */
	struct kafka_fetch_topic_response *topics;
	int32_t topic_count;
};

/* ---- ListOffsets (2) ---- */

/* Timestamps with a meaning in ListOffsets requests. */
#define KAFKA_LIST_OFFSETS_LATEST        ((int64_t)-1)
#define KAFKA_LIST_OFFSETS_EARLIEST      ((int64_t)-2)
#define KAFKA_LIST_OFFSETS_MAX_TIMESTAMP ((int64_t)-3)

struct kafka_list_offsets_partition {
	int32_t partition_index;
	int32_t current_leader_epoch; /* v4+, default -1 */
	int64_t timestamp;
};

struct kafka_list_offsets_topic {
	struct kafka_str name;
	struct kafka_list_offsets_partition *partitions;
	int32_t partition_count;
};

struct kafka_list_offsets_request {
	int32_t replica_id;
	int8_t isolation_level; /* v2+ */
	struct kafka_list_offsets_topic *topics;
	int32_t topic_count;
};

struct kafka_list_offsets_partition_response {
	int32_t partition_index;
	int16_t error_code;
	int64_t timestamp;    /* default -1 */
	int64_t offset;       /* default -1 */
	int32_t leader_epoch; /* v4+, default -1 */
};

struct kafka_list_offsets_topic_response {
	struct kafka_str name;
	struct kafka_list_offsets_partition_response *partitions;
	int32_t partition_count;
};

struct kafka_list_offsets_response {
	int32_t throttle_time_ms; /* v2+ */
	struct kafka_list_offsets_topic_response *topics;
	int32_t topic_count;
};

/* ---- OffsetForLeaderEpoch (23) ---- */

struct kafka_offset_for_leader_partition {
	int32_t partition;
	int32_t current_leader_epoch; /* v2+, default -1 */
	int32_t leader_epoch;
};

struct kafka_offset_for_leader_topic {
	struct kafka_str topic;
	struct kafka_offset_for_leader_partition *partitions;
	int32_t partition_count;
};

struct kafka_offset_for_leader_epoch_request {
	int32_t replica_id; /* v3+, default -2 (a debugging consumer) */
	struct kafka_offset_for_leader_topic *topics;
	int32_t topic_count;
};

struct kafka_epoch_end_offset {
	int16_t error_code;
	int32_t partition;
	int32_t leader_epoch; /* v1+, default -1 */
	int64_t end_offset;
};

struct kafka_offset_for_leader_topic_result {
	struct kafka_str topic;
	struct kafka_epoch_end_offset *partitions;
	int32_t partition_count;
};

struct kafka_offset_for_leader_epoch_response {
	int32_t throttle_time_ms; /* v2+ */
	struct kafka_offset_for_leader_topic_result *topics;
	int32_t topic_count;
};

/* ---- CreateTopics (19) ---- */

struct kafka_create_topics_assignment {
	int32_t partition_index;
	struct kafka_i32_array broker_ids;
};

struct kafka_config_entry {
	struct kafka_str name;
	struct kafka_str value; /* nullable */
};

struct kafka_create_topics_topic {
	struct kafka_str name;
	int32_t num_partitions;     /* -1: the broker default */
	int16_t replication_factor; /* -1: the broker default */
	struct kafka_create_topics_assignment *assignments;
	int32_t assignment_count;
	struct kafka_config_entry *configs;
	int32_t config_count;
};

struct kafka_create_topics_request {
	struct kafka_create_topics_topic *topics;
	int32_t topic_count;
	int32_t timeout_ms;
	bool validate_only; /* v1+ */
};

struct kafka_create_topics_config {
	struct kafka_str name;
	struct kafka_str value; /* nullable */
	bool read_only;
	int8_t config_source; /* default -1 */
	bool is_sensitive;
};

struct kafka_create_topics_result {
	struct kafka_str name;
	struct kafka_uuid topic_id; /* v7+ */
	int16_t error_code;
	struct kafka_str error_message;   /* v1+, nullable */
	bool has_topic_config_error_code; /* v5+, tagged field 0 */
	int16_t topic_config_error_code;
	int32_t num_partitions;                     /* v5+, default -1 */
	int16_t replication_factor;                 /* v5+, default -1 */
	struct kafka_create_topics_config *configs; /* v5+, nullable */
	int32_t config_count;
};

struct kafka_create_topics_response {
	int32_t throttle_time_ms; /* v2+ */
	struct kafka_create_topics_result *topics;
	int32_t topic_count;
};

/* ---- DeleteTopics (20) ---- */

struct kafka_delete_topics_topic {
	struct kafka_str name; /* nullable */
	struct kafka_uuid topic_id;
};

struct kafka_delete_topics_request {
	struct kafka_delete_topics_topic *topics; /* v6+ */
	int32_t topic_count;
	struct kafka_str_array topic_names; /* v0-5 */
	int32_t timeout_ms;
};

struct kafka_delete_topics_result {
	struct kafka_str name;      /* null allowed v6+ */
	struct kafka_uuid topic_id; /* v6+ */
	int16_t error_code;
	struct kafka_str error_message; /* v5+, nullable */
};

struct kafka_delete_topics_response {
	int32_t throttle_time_ms; /* v1+ */
	struct kafka_delete_topics_result *responses;
	int32_t response_count;
};

/* ---- CreatePartitions (37) ---- */

struct kafka_create_partitions_assignment {
	struct kafka_i32_array broker_ids;
};

struct kafka_create_partitions_topic {
	struct kafka_str name;
	int32_t count; /* the new total number of partitions */
	struct kafka_create_partitions_assignment *assignments; /* nullable */
	int32_t assignment_count;
};

struct kafka_create_partitions_request {
	struct kafka_create_partitions_topic *topics;
	int32_t topic_count;
	int32_t timeout_ms;
	bool validate_only;
};

/* Also the result shape of IncrementalAlterConfigs minus the resource. */
struct kafka_create_partitions_result {
	struct kafka_str name;
	int16_t error_code;
	struct kafka_str error_message; /* nullable */
};

struct kafka_create_partitions_response {
	int32_t throttle_time_ms;
	struct kafka_create_partitions_result *results;
	int32_t result_count;
};

/* ---- AlterPartitionReassignments (45), v0 (flexible) ---- */

struct kafka_reassign_partition {
	int32_t partition_index;
	struct kafka_i32_array replicas; /* null: cancel the ongoing reassignment */
};

struct kafka_reassign_topic {
	struct kafka_str name;
	struct kafka_reassign_partition *partitions;
	int32_t partition_count;
};

struct kafka_alter_partition_reassignments_request {
	int32_t timeout_ms;
	struct kafka_reassign_topic *topics;
	int32_t topic_count;
};

struct kafka_reassign_partition_result {
	int32_t partition_index;
	int16_t error_code;
	struct kafka_str error_message; /* nullable */
};

struct kafka_reassign_topic_result {
	struct kafka_str name;
	struct kafka_reassign_partition_result *partitions;
	int32_t partition_count;
};

struct kafka_alter_partition_reassignments_response {
	int32_t throttle_time_ms;
	int16_t error_code;
	struct kafka_str error_message; /* nullable */
	struct kafka_reassign_topic_result *responses;
	int32_t response_count;
};

/* ---- ListPartitionReassignments (46), v0 (flexible) ---- */

struct kafka_list_reassignments_topic {
	struct kafka_str name;
	struct kafka_i32_array partition_indexes;
};

struct kafka_list_partition_reassignments_request {
	int32_t timeout_ms;
	struct kafka_list_reassignments_topic *topics; /* null (count -1): all */
	int32_t topic_count;
};

struct kafka_ongoing_partition {
	int32_t partition_index;
	struct kafka_i32_array replicas;
	struct kafka_i32_array adding_replicas;
	struct kafka_i32_array removing_replicas;
};

struct kafka_ongoing_topic {
	struct kafka_str name;
	struct kafka_ongoing_partition *partitions;
	int32_t partition_count;
};

struct kafka_list_partition_reassignments_response {
	int32_t throttle_time_ms;
	int16_t error_code;
	struct kafka_str error_message; /* nullable */
	struct kafka_ongoing_topic *topics;
	int32_t topic_count;
};

/* ---- DescribeConfigs (32) ---- */

/* Resource types of DescribeConfigs / IncrementalAlterConfigs. */
#define KAFKA_RESOURCE_TOPIC         2
#define KAFKA_RESOURCE_BROKER        4
#define KAFKA_RESOURCE_BROKER_LOGGER 8

struct kafka_describe_configs_resource {
	int8_t resource_type;
	struct kafka_str resource_name;
	struct kafka_str_array configuration_keys; /* nullable: all keys */
};

struct kafka_describe_configs_request {
	struct kafka_describe_configs_resource *resources;
	int32_t resource_count;
	bool include_synonyms;      /* v1+ */
	bool include_documentation; /* v3+ */
};

struct kafka_describe_configs_synonym {
	struct kafka_str name;
	struct kafka_str value; /* nullable */
	int8_t source;
};

struct kafka_describe_configs_entry {
	struct kafka_str name;
	struct kafka_str value; /* nullable */
	bool read_only;
	bool is_default;      /* v0 only */
	int8_t config_source; /* v1+, default -1 */
	bool is_sensitive;
	struct kafka_describe_configs_synonym *synonyms; /* v1+ */
	int32_t synonym_count;
	int8_t config_type;             /* v3+, default 0 */
	struct kafka_str documentation; /* v3+, nullable */
};

struct kafka_describe_configs_result {
	int16_t error_code;
	struct kafka_str error_message; /* nullable */
	int8_t resource_type;
	struct kafka_str resource_name;
	struct kafka_describe_configs_entry *configs;
	int32_t config_count;
};

struct kafka_describe_configs_response {
	int32_t throttle_time_ms;
	struct kafka_describe_configs_result *results;
	int32_t result_count;
};

/* ---- IncrementalAlterConfigs (44) ---- */

/* Config operations. */
#define KAFKA_CONFIG_SET      0
#define KAFKA_CONFIG_DELETE   1
#define KAFKA_CONFIG_APPEND   2
#define KAFKA_CONFIG_SUBTRACT 3

struct kafka_alterable_config {
	struct kafka_str name;
	int8_t config_operation;
	struct kafka_str value; /* nullable */
};

struct kafka_alter_configs_resource {
	int8_t resource_type;
	struct kafka_str resource_name;
	struct kafka_alterable_config *configs;
	int32_t config_count;
};

struct kafka_incremental_alter_configs_request {
	struct kafka_alter_configs_resource *resources;
	int32_t resource_count;
	bool validate_only;
};

struct kafka_alter_configs_resource_response {
	int16_t error_code;
	struct kafka_str error_message; /* nullable */
	int8_t resource_type;
	struct kafka_str resource_name;
};

struct kafka_incremental_alter_configs_response {
	int32_t throttle_time_ms;
	struct kafka_alter_configs_resource_response *responses;
	int32_t response_count;
};

/* ---- AlterConfigs (33), the legacy whole-resource form ---- */

/* Each resource's configs replace all of its dynamic configs: a key set
 * before and not named here is removed. The response has
 * IncrementalAlterConfigs's shape. */
struct kafka_legacy_config {
	struct kafka_str name;
	struct kafka_str value; /* nullable */
};

struct kafka_legacy_alter_resource {
	int8_t resource_type;
	struct kafka_str resource_name;
	struct kafka_legacy_config *configs;
	int32_t config_count;
};

struct kafka_alter_configs_request {
	struct kafka_legacy_alter_resource *resources;
	int32_t resource_count;
	bool validate_only;
};

struct kafka_alter_configs_response {
	int32_t throttle_time_ms;
	struct kafka_alter_configs_resource_response *responses;
	int32_t response_count;
};

/* ---- DescribeCluster (60) ---- */

struct kafka_describe_cluster_request {
	bool include_cluster_authorized_operations;
	int8_t endpoint_type; /* v1+, default 1 (brokers) */
};

struct kafka_describe_cluster_broker {
	int32_t broker_id;
	struct kafka_str host;
	int32_t port;
	struct kafka_str rack; /* nullable */
};

struct kafka_describe_cluster_response {
	int32_t throttle_time_ms;
	int16_t error_code;
	struct kafka_str error_message; /* nullable */
	int8_t endpoint_type;           /* v1+, default 1 */
	struct kafka_str cluster_id;
	int32_t controller_id;
	struct kafka_describe_cluster_broker *brokers;
	int32_t broker_count;
	int32_t cluster_authorized_operations;
};

#include "kafka/msg_group.h"

/* ---- the walks (msg_*.c); api.h is the entry point ---- */

typedef void (*kafka_walk_fn)(struct kafka_io *io, void *msg);

#define KAFKA_MESSAGES(X)                \
	X(api_versions)                  \
	X(metadata)                      \
	X(produce)                       \
	X(fetch)                         \
	X(list_offsets)                  \
	X(offset_for_leader_epoch)       \
	X(create_topics)                 \
	X(delete_topics)                 \
	X(create_partitions)             \
	X(describe_configs)              \
	X(incremental_alter_configs)     \
	X(alter_configs)                 \
	X(alter_partition_reassignments) \
	X(list_partition_reassignments)  \
	X(describe_cluster)              \
	X(find_coordinator)              \
	X(join_group)                    \
	X(heartbeat)                     \
	X(leave_group)                   \
	X(sync_group)                    \
	X(offset_commit)                 \
	X(offset_fetch)                  \
	X(describe_groups)               \
	X(list_groups)                   \
	X(delete_groups)                 \
	X(offset_delete)                 \
	X(init_producer_id)              \
	X(sasl_handshake)                \
	X(sasl_authenticate)

#define KAFKA_WALK_DECL(name)                                             \
	void kafka_walk_##name##_request(struct kafka_io *io, void *msg); \
	void kafka_walk_##name##_response(struct kafka_io *io, void *msg);
KAFKA_MESSAGES(KAFKA_WALK_DECL)
#undef KAFKA_WALK_DECL

#endif
