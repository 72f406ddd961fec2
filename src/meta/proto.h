/*
 * proto.h — bodies of the keel extension requests that brokers and tools
 * send on the ZooKeeper client port, and of their responses.
 *
 * Transport is the server's: it frames each body after the ZooKeeper
 * request header (xid, opcode) and maps `enum meta_api` to opcode numbers
 * in the 1000+ range. Every body begins with an int16 version (0; 1 for a
 * CreateTopics request that carries a manual assignment); a
 * decoder refuses a newer one with KEEL_UNSUPPORTED, and the server answers
 * it with META_ERR_UNSUPPORTED_VERSION. Encoding is jute-like (codec.h):
 * big-endian integers, int32-length strings (-1 = null), int32-count arrays.
 *
 * Which server answers: the controller APIs (registration, heartbeat,
 * unregister, create/delete topics, alter configs, alter partition) are
 * served by the active controller only — any other server forwards them or
 * answers META_ERR_NOT_CONTROLLER. DescribeCluster and FetchMetadata are
 * answered by any server from its own committed image / log.
 *
 * Error codes are Kafka's numbers and names (protocol-level values carried
 * in responses, not `enum keel_err`).
 *
 * Memory: decoders put every array and string in the caller's arena
 * (strings NUL-terminated); FetchMetadata's batch and snapshot bytes are
 * the exception and point into the input buffer. Encoders read the structs
 * and keep nothing.
 */
#ifndef KEEL_META_PROTO_H
#define KEEL_META_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "meta/fmt.h"
#include "meta/image.h"
#include "meta/record.h"

enum meta_api {
	META_API_BROKER_REGISTRATION = 0,
	META_API_BROKER_HEARTBEAT = 1,
	META_API_UNREGISTER_BROKER = 2,
	META_API_CREATE_TOPICS = 3,
	META_API_DELETE_TOPICS = 4,
	META_API_ALTER_CONFIGS = 5,
	META_API_ALTER_PARTITION = 6,
	META_API_DESCRIBE_CLUSTER = 7,
	META_API_FETCH_METADATA = 8,
	META_API_CREATE_PARTITIONS = 9,
	META_API_ELECT_LEADERS = 10,
	META_API_ALTER_PARTITION_REASSIGNMENTS = 11,
	META_API_LIST_PARTITION_REASSIGNMENTS = 12,
	META_API_ALLOCATE_PRODUCER_IDS = 13,
};
#define META_API_COUNT 14

/* Whether this server implements the API (numbers below META_API_COUNT
 * may be reserved for APIs not here yet). */
bool meta_api_known(enum meta_api api);
/* Whether only the active controller may answer this API. */
bool meta_api_needs_controller(enum meta_api api);
const char *meta_api_name(enum meta_api api);

/* Kafka's error codes (org.apache.kafka.common.protocol.Errors). */
enum meta_error {
	META_ERR_UNKNOWN_SERVER_ERROR = -1,
	META_ERR_NONE = 0,
	META_ERR_OFFSET_OUT_OF_RANGE = 1,
	META_ERR_UNKNOWN_TOPIC_OR_PARTITION = 3,
	META_ERR_NOT_LEADER_OR_FOLLOWER = 6,
	META_ERR_INVALID_TOPIC_EXCEPTION = 17,
	META_ERR_UNSUPPORTED_VERSION = 35,
	META_ERR_TOPIC_ALREADY_EXISTS = 36,
	META_ERR_INVALID_PARTITIONS = 37,
	META_ERR_INVALID_REPLICATION_FACTOR = 38,
	META_ERR_INVALID_CONFIG = 40,
	META_ERR_NOT_CONTROLLER = 41,
	META_ERR_INVALID_REQUEST = 42,
	META_ERR_POLICY_VIOLATION = 44,
	META_ERR_FENCED_LEADER_EPOCH = 74,
	META_ERR_STALE_BROKER_EPOCH = 77,
	META_ERR_INVALID_UPDATE_VERSION = 95,
	META_ERR_UNKNOWN_TOPIC_ID = 100,
	META_ERR_DUPLICATE_BROKER_REGISTRATION = 101,
	META_ERR_BROKER_ID_NOT_REGISTERED = 102,
	META_ERR_INVALID_REPLICA_ASSIGNMENT = 39,
	META_ERR_PREFERRED_LEADER_NOT_AVAILABLE = 80,
	META_ERR_ELIGIBLE_LEADERS_NOT_AVAILABLE = 83,
	META_ERR_ELECTION_NOT_NEEDED = 84,
	META_ERR_INELIGIBLE_REPLICA = 107,
	META_ERR_NO_REASSIGNMENT_IN_PROGRESS = 85,
};

/* "STALE_BROKER_EPOCH", ...; "UNKNOWN" for codes not in the table. */
const char *meta_error_name(int16_t code);

/* Largest item count a decoder accepts in one list (bounded further by
 * the bytes actually present). */
#define META_PROTO_MAX_ITEMS 1000000

/* ---- BrokerRegistration ---- */

struct meta_broker_registration_request {
	int32_t broker_id;
	uint8_t incarnation_id[META_UUID_SIZE]; /* new for every broker process start */
	const struct meta_endpoint *endpoints;
	uint32_t endpoint_count;
	const char *rack;              /* NULL: none */
	int64_t previous_broker_epoch; /* -1: none (see docs/controller.md) */
};

struct meta_broker_registration_response {
	int16_t error;
	const char *error_message; /* NULL when error is NONE */
	int64_t broker_epoch;
};

/* ---- BrokerHeartbeat (also carries controlled shutdown) ---- */

struct meta_broker_heartbeat_request {
	int32_t broker_id;
	int64_t broker_epoch;
	int64_t current_metadata_offset; /* last metadata offset the broker applied */
	bool want_fence;
	bool want_shutdown;
};

struct meta_broker_heartbeat_response {
	int16_t error;
	const char *error_message;
	bool is_caught_up;
	bool is_fenced;
	bool should_shut_down;
};

/* ---- UnregisterBroker ---- */

struct meta_unregister_broker_request {
	int32_t broker_id;
};

struct meta_unregister_broker_response {
	int16_t error;
	const char *error_message;
};

/* ---- CreateTopics ---- */

struct meta_config_kv {
	const char *key;
	const char *value; /* NULL: delete (AlterConfigs only) */
};

/* One partition of a manual assignment: its replicas, the first being the
 * preferred leader (Kafka's CreatableReplicaAssignment). */
struct meta_replica_assignment {
	int32_t partition_index;
	const int32_t *broker_ids;
	uint32_t broker_count;
};

struct meta_create_topic {
	const char *name;
	int32_t num_partitions;     /* -1: the controller's default (or the assignment's) */
	int16_t replication_factor; /* -1: the controller's default (or the assignment's) */
	const struct meta_config_kv *configs;
	uint32_t config_count;
	/* A manual assignment (num_partitions and replication_factor are then
	 * -1), or none (0): the controller places the replicas. Carried from
	 * body version 1 on; a request without one is encoded as version 0, so
	 * a server that predates it still reads it. */
	const struct meta_replica_assignment *assignments;
	uint32_t assignment_count;
};

struct meta_create_topics_request {
	const struct meta_create_topic *topics;
	uint32_t topic_count;
	bool validate_only;
};

struct meta_create_topic_result {
	const char *name;
	uint8_t topic_id[META_UUID_SIZE]; /* zero on error */
	int16_t error;
	const char *error_message;
	int32_t num_partitions;
	int16_t replication_factor;
};

struct meta_create_topics_response {
	const struct meta_create_topic_result *topics;
	uint32_t topic_count;
};

/* ---- DeleteTopics ---- */

struct meta_delete_topics_request {
	const char *const *names;
	uint32_t name_count;
};

struct meta_delete_topic_result {
	const char *name;
	uint8_t topic_id[META_UUID_SIZE];
	int16_t error;
	const char *error_message;
};

struct meta_delete_topics_response {
	const struct meta_delete_topic_result *results;
	uint32_t result_count;
};

/* ---- CreatePartitions (Kafka's: grow a topic to `count` partitions) ---- */

struct meta_create_partitions_topic {
	const char *name;
	int32_t count; /* the new total */
	/* Replicas of each new partition (count - current rows of replication
	 * factor broker ids), or none (0): the controller places them. */
	const int32_t *const *assignments;
	const uint32_t *assignment_sizes;
	uint32_t assignment_count;
};

struct meta_create_partitions_request {
	const struct meta_create_partitions_topic *topics;
	uint32_t topic_count;
	bool validate_only;
};

struct meta_create_partitions_result {
	const char *name;
	int16_t error;
	const char *error_message;
};

struct meta_create_partitions_response {
	const struct meta_create_partitions_result *results;
	uint32_t result_count;
};

/* ---- ElectLeaders (Kafka's: preferred, or unclean for named partitions) ---- */

enum meta_election_type {
	META_ELECTION_PREFERRED = 0,
	META_ELECTION_UNCLEAN = 1,
};

struct meta_elect_topic {
	const char *name;
	const int32_t *partitions;
	uint32_t partition_count;
};

struct meta_elect_leaders_request {
	int8_t election_type;             /* enum meta_election_type */
	bool all;                         /* every partition (preferred only) */
	const struct meta_elect_topic *topics; /* when !all */
	uint32_t topic_count;
};

struct meta_elect_partition_result {
	const char *topic;
	int32_t partition_id;
	int16_t error; /* NONE, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
			* ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION */
	const char *error_message;
};

struct meta_elect_leaders_response {
	int16_t error; /* request-wide (INVALID_REQUEST, NOT_CONTROLLER) */
	const char *error_message;
	const struct meta_elect_partition_result *results;
	uint32_t result_count;
};

/* ---- AlterPartitionReassignments (Kafka's, KIP-455) ---- */

struct meta_reassign_partition {
	int32_t partition_id;
	bool cancel;             /* Kafka's null replicas: revert an ongoing one */
	const int32_t *replicas; /* the target (when !cancel) */
	uint32_t replica_count;
};

struct meta_reassign_topic {
	const char *name;
	const struct meta_reassign_partition *partitions;
	uint32_t partition_count;
};

struct meta_alter_reassignments_request {
	const struct meta_reassign_topic *topics;
	uint32_t topic_count;
};

/* One result per partition of the request, in request order (ElectLeaders'
 * per-partition result: error NONE, UNKNOWN_TOPIC_OR_PARTITION,
 * INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS, POLICY_VIOLATION). */
struct meta_alter_reassignments_response {
	int16_t error; /* request-wide (NOT_CONTROLLER) */
	const char *error_message;
	const struct meta_elect_partition_result *results;
	uint32_t result_count;
};

/* ---- ListPartitionReassignments ---- */

/* Topics with their partitions (as ElectLeaders names them; a topic with
 * no partitions means all of its partitions). */
struct meta_list_reassignments_request {
	const struct meta_elect_topic *topics; /* none: every partition */
	uint32_t topic_count;
};

struct meta_ongoing_reassignment {
	const char *topic;
	int32_t partition_id;
	const int32_t *replicas; /* current: target first, then the removing ones */
	uint32_t replica_count;
	const int32_t *adding;
	uint32_t adding_count;
	const int32_t *removing;
	uint32_t removing_count;
};

struct meta_list_reassignments_response {
	int16_t error;
	const char *error_message;
	const struct meta_ongoing_reassignment *reassignments;
	uint32_t reassignment_count;
};

/* ---- AllocateProducerIds (Kafka's: a block of producer ids for a broker) ---- */

/* The size of every block the controller hands out (Kafka's). */
#define META_PRODUCER_ID_BLOCK 1000

struct meta_allocate_producer_ids_request {
	int32_t broker_id;
	int64_t broker_epoch;
};

/* The ids [producer_id_start, producer_id_start + producer_id_len) belong to
 * the broker; the block was committed to the metadata log before this
 * answer left, so no other broker (and no later controller) hands them out. */
struct meta_allocate_producer_ids_response {
	int16_t error; /* STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED, NOT_CONTROLLER */
	const char *error_message;
	int64_t producer_id_start;
	int32_t producer_id_len;
};

/* ---- AlterConfigs (incremental: set or delete keys) ---- */

struct meta_alter_config_resource {
	uint8_t resource_type; /* enum meta_resource_type */
	const char *resource_name;
	const struct meta_config_kv *entries;
	uint32_t entry_count;
};

struct meta_alter_configs_request {
	const struct meta_alter_config_resource *resources;
	uint32_t resource_count;
	bool validate_only;
};

struct meta_alter_config_result {
	uint8_t resource_type;
	const char *resource_name;
	int16_t error;
	const char *error_message;
};

struct meta_alter_configs_response {
	const struct meta_alter_config_result *results;
	uint32_t result_count;
};

/* ---- AlterPartition (ISR changes from partition leaders) ---- */

struct meta_alter_partition_item {
	int32_t partition_id;
	int32_t leader_epoch;    /* the leader's current leader epoch */
	int32_t partition_epoch; /* the partition epoch the leader last saw */
	const int32_t *new_isr;
	uint32_t new_isr_count;
	uint8_t leader_recovery_state;
};

struct meta_alter_partition_topic {
	uint8_t topic_id[META_UUID_SIZE];
	const struct meta_alter_partition_item *partitions;
	uint32_t partition_count;
};

struct meta_alter_partition_request {
	int32_t broker_id;
	int64_t broker_epoch;
	const struct meta_alter_partition_topic *topics;
	uint32_t topic_count;
};

/* The partition's state after the request (the current state on error). */
struct meta_alter_partition_result {
	int32_t partition_id;
	int16_t error;
	int32_t leader;
	int32_t leader_epoch;
	int32_t partition_epoch;
	const int32_t *isr;
	uint32_t isr_count;
	uint8_t leader_recovery_state;
};

struct meta_alter_partition_topic_result {
	uint8_t topic_id[META_UUID_SIZE];
	const struct meta_alter_partition_result *partitions;
	uint32_t partition_count;
};

struct meta_alter_partition_response {
	int16_t error; /* request-level: STALE_BROKER_EPOCH, ... */
	const char *error_message;
	const struct meta_alter_partition_topic_result *topics;
	uint32_t topic_count;
};

/* ---- DescribeCluster (read of one server's committed image) ---- */

struct meta_describe_cluster_request {
	const char *const *topic_names; /* none: every topic */
	uint32_t topic_name_count;
	bool include_brokers;
	bool include_topics;
};

struct meta_describe_broker {
	int32_t id;
	int64_t epoch;
	uint8_t incarnation_id[META_UUID_SIZE];
	const struct meta_endpoint *endpoints;
	uint32_t endpoint_count;
	const char *rack;
	bool fenced;
	bool in_controlled_shutdown;
};

struct meta_describe_partition {
	int32_t partition_id;
	int32_t leader;
	int32_t leader_epoch;
	int32_t partition_epoch;
	const int32_t *replicas;
	uint32_t replica_count;
	const int32_t *isr;
	uint32_t isr_count;
	uint8_t leader_recovery_state;
	const int32_t *adding; /* an ongoing reassignment (empty: none) */
	uint32_t adding_count;
	const int32_t *removing;
	uint32_t removing_count;
};

struct meta_describe_topic {
	const char *name;
	uint8_t topic_id[META_UUID_SIZE];
	int16_t error; /* UNKNOWN_TOPIC_OR_PARTITION for a requested name not found */
	const struct meta_describe_partition *partitions;
	uint32_t partition_count;
	const struct meta_config_kv *configs;
	uint32_t config_count;
};

struct meta_describe_cluster_response {
	int16_t error;
	int32_t controller_id;
	int32_t controller_epoch;
	int64_t metadata_offset; /* the image's offset */
	const struct meta_describe_broker *brokers;
	uint32_t broker_count;
	const struct meta_describe_topic *topics;
	uint32_t topic_count;
};

/*
 * Fills a DescribeCluster response from an image. Arrays go in `arena`;
 * strings and lists point INTO the image, so encode the response before the
 * image next changes. KEEL_NOMEM if the arena fails.
 */
enum keel_err meta_describe_cluster(const struct meta_image *img,
				    const struct meta_describe_cluster_request *req,
				    struct keel_arena *arena,
				    struct meta_describe_cluster_response *resp);

/* ---- FetchMetadata (follow the metadata log from an offset) ---- */

struct meta_fetch_metadata_request {
	int64_t from_offset; /* the first offset wanted (last applied + 1) */
	int32_t max_bytes;   /* soft cap on the batch bytes in one response */
};

struct meta_fetch_batch {
	int64_t offset;      /* Raft index of the entry */
	const uint8_t *data; /* an encoded meta batch (record.h), tag byte removed */
	size_t size;
};

/*
 * Either a run of batches with offsets >= from_offset, in order, or — when
 * the log no longer holds from_offset (compacted) — a whole image snapshot
 * (image.h format) taken at snapshot_offset, after which the broker fetches
 * from snapshot_offset + 1. high_watermark is the highest offset the server
 * has applied; a broker whose from_offset is above it has all there is.
 */
struct meta_fetch_metadata_response {
	int16_t error;
	int64_t high_watermark;
	int64_t snapshot_offset; /* -1: no snapshot in this response */
	const uint8_t *snapshot;
	size_t snapshot_size;
	const struct meta_fetch_batch *batches;
	uint32_t batch_count;
};

/* Largest snapshot / batch a FetchMetadata decoder accepts. */
#define META_FETCH_MAX_BYTES (64u * 1024 * 1024)

/* ---- encoders (append to w; KEEL_TOOBIG if it is full) and decoders ---- */

#define META_PROTO_DECLARE(name)                                                              \
	enum keel_err meta_encode_##name(struct keel_wbuf *w, const struct meta_##name *m);    \
	enum keel_err meta_decode_##name(const void *data, size_t size, struct keel_arena *arena, \
					 struct meta_##name *out, struct meta_errbuf *eb)

META_PROTO_DECLARE(broker_registration_request);
META_PROTO_DECLARE(broker_registration_response);
META_PROTO_DECLARE(broker_heartbeat_request);
META_PROTO_DECLARE(broker_heartbeat_response);
META_PROTO_DECLARE(unregister_broker_request);
META_PROTO_DECLARE(unregister_broker_response);
META_PROTO_DECLARE(create_topics_request);
META_PROTO_DECLARE(create_topics_response);
META_PROTO_DECLARE(delete_topics_request);
META_PROTO_DECLARE(delete_topics_response);
META_PROTO_DECLARE(alter_configs_request);
META_PROTO_DECLARE(alter_configs_response);
META_PROTO_DECLARE(alter_partition_request);
META_PROTO_DECLARE(alter_partition_response);
META_PROTO_DECLARE(describe_cluster_request);
META_PROTO_DECLARE(describe_cluster_response);
META_PROTO_DECLARE(fetch_metadata_request);
META_PROTO_DECLARE(fetch_metadata_response);
META_PROTO_DECLARE(create_partitions_request);
META_PROTO_DECLARE(create_partitions_response);
META_PROTO_DECLARE(elect_leaders_request);
META_PROTO_DECLARE(elect_leaders_response);
META_PROTO_DECLARE(alter_reassignments_request);
META_PROTO_DECLARE(alter_reassignments_response);
META_PROTO_DECLARE(list_reassignments_request);
META_PROTO_DECLARE(list_reassignments_response);
META_PROTO_DECLARE(allocate_producer_ids_request);
META_PROTO_DECLARE(allocate_producer_ids_response);

#undef META_PROTO_DECLARE

#endif
