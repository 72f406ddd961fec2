/*
 * record.h — the typed, versioned cluster-metadata records and the batch
 * that carries them in one Raft log entry.
 *
 * The record types and their numbers follow Kafka's KRaft metadata records
 * (RegisterBrokerRecord = 0, TopicRecord = 2, PartitionRecord = 3, ...);
 * the fields follow the same ideas; the bytes are keel's own (jute-like,
 * big-endian, see codec.h), not Kafka's.
 *
 * One Raft entry payload is one encoded BATCH: the records one controller
 * decision produced (a topic and all its partitions; a fence and every
 * partition change it causes). A batch is applied as a unit on every server
 * (image.h), so a decision is never half in the log.
 *
 *   batch   := format:u16 (=0) controller_id:i32 controller_epoch:i32
 *              timestamp_ms:i64 count:i32 record*count
 *   record  := type:u16 version:u16 size:i32 body[size]
 *
 * The body of each type at each version is described beside its encoder in
 * record.c and in docs/controller.md. A decoder accepts versions up to the
 * newest it knows (meta_record_max_version) and rejects newer ones with
 * KEEL_UNSUPPORTED and a message naming the type and version: a server
 * must never silently skip a record it cannot understand, because its image
 * would then diverge from the others'.
 *
 * Memory: decoded records point into the caller's arena (strings are
 * NUL-terminated copies, arrays are copies); they live until the arena is
 * reset. Records built by hand (the controller) may point anywhere that
 * outlives their use. The codec never keeps a pointer.
 */
#ifndef KEEL_META_RECORD_H
#define KEEL_META_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "meta/fmt.h"

#define META_UUID_SIZE 16
#define META_NO_LEADER (-1)

/* Codec limits: a decoder rejects anything larger with KEEL_TOOBIG. */
#define META_MAX_TOPIC_NAME 249       /* Kafka's limit */
#define META_MAX_SHORT_STRING 255     /* hosts, racks, listener names, keys */
#define META_MAX_CONFIG_VALUE 4096
#define META_MAX_ENDPOINTS 16
#define META_MAX_REPLICAS 64          /* replication factor */
#define META_MAX_PARTITION_ID 1000000 /* partitions per topic, exclusive */
#define META_MAX_BATCH_RECORDS 200000

enum meta_record_type {
	META_REC_REGISTER_BROKER = 0,
	META_REC_UNREGISTER_BROKER = 1,
	META_REC_TOPIC = 2,
	META_REC_PARTITION = 3,
	META_REC_CONFIG = 4,
	META_REC_PARTITION_CHANGE = 5,
	META_REC_FENCE_BROKER = 7,
	META_REC_UNFENCE_BROKER = 8,
	META_REC_REMOVE_TOPIC = 9,
	META_REC_PRODUCER_IDS = 15,
	META_REC_BROKER_REGISTRATION_CHANGE = 17,
	META_REC_NOOP = 20,
};

/* Kafka's security protocol ids. */
enum meta_security_protocol {
	META_SEC_PLAINTEXT = 0,
	META_SEC_SSL = 1,
	META_SEC_SASL_PLAINTEXT = 2,
	META_SEC_SASL_SSL = 3,
};

/* KIP-704: a leader chosen by unclean election is RECOVERING until it says
 * (AlterPartition) that its log is consistent again. */
enum meta_leader_recovery {
	META_RECOVERED = 0,
	META_RECOVERING = 1,
};

/* Kafka's ConfigResource types. */
enum meta_resource_type {
	META_RESOURCE_TOPIC = 2,
	META_RESOURCE_BROKER = 4, /* name "" = the cluster-wide default */
};

struct meta_endpoint {
	const char *name; /* listener name, e.g. "PLAINTEXT" */
	const char *host;
	uint16_t port;
	int16_t security_protocol; /* enum meta_security_protocol */
};

struct meta_register_broker_record {
	int32_t broker_id;
	uint8_t incarnation_id[META_UUID_SIZE];
	int64_t broker_epoch;
	const struct meta_endpoint *endpoints;
	uint32_t endpoint_count;
	const char *rack; /* NULL: no rack */
	bool fenced;
	bool in_controlled_shutdown;
};

/* UnregisterBroker, FenceBroker, UnfenceBroker: the registration they act
 * on, named by id AND epoch (a stale record for an older registration of
 * the same id is ignored at apply). */
struct meta_broker_ref_record {
	int32_t broker_id;
	int64_t broker_epoch;
};

/* Tri-state fields of BrokerRegistrationChange. */
#define META_CHANGE_NONE (-1)

struct meta_broker_change_record {
	int32_t broker_id;
	int64_t broker_epoch;
	int8_t fenced;                 /* META_CHANGE_NONE, 0 or 1 */
	int8_t in_controlled_shutdown; /* META_CHANGE_NONE, 0 or 1 */
};

struct meta_topic_record {
	const char *name;
	uint8_t topic_id[META_UUID_SIZE];
};

struct meta_partition_record {
	uint8_t topic_id[META_UUID_SIZE];
	int32_t partition_id;
	const int32_t *replicas; /* preferred order: replicas[0] is the preferred leader */
	uint32_t replica_count;
	const int32_t *isr;
	uint32_t isr_count;
	int32_t leader; /* META_NO_LEADER (-1) = none */
	int32_t leader_epoch;
	int32_t partition_epoch;
	uint8_t leader_recovery_state; /* enum meta_leader_recovery */
	/* Version 1 (KIP-455): an ongoing reassignment. Both are subsets of
	 * `replicas`, disjoint; empty (count 0) when none. Version 0 carries
	 * neither (they decode empty). */
	const int32_t *adding;
	uint32_t adding_count;
	const int32_t *removing;
	uint32_t removing_count;
};

/* Which fields a PartitionChange carries (the others are unchanged). */
enum meta_partition_change_field {
	META_PC_LEADER = 1 << 0,   /* leader and the new leader_epoch */
	META_PC_ISR = 1 << 1,
	META_PC_REPLICAS = 1 << 2,
	META_PC_RECOVERY = 1 << 3, /* leader_recovery_state */
	/* adding and removing replicas, both (empty = no reassignment);
	 * version 1 and later only */
	META_PC_REASSIGNMENT = 1 << 4,
};
#define META_PC_ALL                                                                          \
	(META_PC_LEADER | META_PC_ISR | META_PC_REPLICAS | META_PC_RECOVERY |                  \
	 META_PC_REASSIGNMENT)

/*
 * Only what changed. partition_epoch is the NEW epoch and must be exactly
 * the current one + 1 at apply; when the leader changes, leader_epoch is
 * the new leader epoch and must be exactly the current one + 1. A change
 * whose epochs do not chain is stale and ignored (deterministically, on
 * every server).
 */
struct meta_partition_change_record {
	uint8_t topic_id[META_UUID_SIZE];
	int32_t partition_id;
	int32_t partition_epoch;
	uint8_t fields; /* enum meta_partition_change_field bits */
	int32_t leader;
	int32_t leader_epoch;
	const int32_t *isr;
	uint32_t isr_count;
	const int32_t *replicas;
	uint32_t replica_count;
	uint8_t leader_recovery_state;
	const int32_t *adding; /* META_PC_REASSIGNMENT */
	uint32_t adding_count;
	const int32_t *removing;
	uint32_t removing_count;
};

struct meta_remove_topic_record {
	uint8_t topic_id[META_UUID_SIZE];
};

struct meta_config_record {
	uint8_t resource_type; /* enum meta_resource_type */
	const char *resource_name;
	const char *key;
	const char *value; /* NULL: delete the key */
};

/* ProducerIds (Kafka's ProducerIdsRecord): the controller gave broker
 * `broker_id` (at `broker_epoch`) the producer ids below next_producer_id
 * that the previous such record had not covered; the next block starts at
 * next_producer_id. Applied only when it moves the image's mark forward. */
struct meta_producer_ids_record {
	int32_t broker_id;
	int64_t broker_epoch;
	int64_t next_producer_id;
};

struct meta_record {
	uint16_t type;    /* enum meta_record_type */
	uint16_t version; /* the version it was (or will be) encoded at */
	union {
		struct meta_register_broker_record register_broker;
		struct meta_broker_ref_record unregister_broker;
		struct meta_broker_ref_record fence_broker;
		struct meta_broker_ref_record unfence_broker;
		struct meta_broker_change_record broker_change;
		struct meta_topic_record topic;
		struct meta_partition_record partition;
		struct meta_partition_change_record partition_change;
		struct meta_remove_topic_record remove_topic;
		struct meta_config_record config;
		struct meta_producer_ids_record producer_ids;
	};
};

/* Who wrote a batch and when; applied with every record in it. */
struct meta_batch_header {
	int32_t controller_id;    /* the server id of the active controller */
	int32_t controller_epoch; /* its Raft term */
	int64_t timestamp_ms;     /* wall-clock time stamped by the proposer */
};

struct meta_batch {
	struct meta_batch_header hdr;
	struct meta_record *records;
	uint32_t count;
};

/* The newest version of `type` this code reads and writes, or -1 for a
 * type it does not know. */
int meta_record_max_version(uint16_t type);

/* "RegisterBroker", "PartitionChange", ...; "Unknown" for others. */
const char *meta_record_type_name(uint16_t type);

/*
 * Appends the record (type, version, size, body) to `w`. The record's own
 * `version` is used; it must be one this code knows. Returns KEEL_INVAL if
 * the record breaks a codec limit or invariant (so that everything encoded
 * decodes), KEEL_TOOBIG if the writer is full, KEEL_OK otherwise.
 */
enum keel_err meta_record_encode(const struct meta_record *rec, struct keel_wbuf *w);

/* Decodes one record from the reader position in `d` (see codec.h). */
struct meta_dec;
enum keel_err meta_record_decode(struct meta_dec *d, struct meta_record *rec);

enum keel_err meta_batch_encode(const struct meta_batch *batch, struct keel_wbuf *w);

/*
 * Decodes a whole batch (the entire buffer). Records and everything they
 * point to live in `arena`. On error `eb` (may be NULL) says what was wrong
 * and `out` must not be used.
 */
enum keel_err meta_batch_decode(const void *data, size_t size, struct keel_arena *arena,
				struct meta_batch *out, struct meta_errbuf *eb);


/* ---- validation shared by the codec, the image and the controller ---- */

/* Kafka's topic-name rule: 1..249 of [a-zA-Z0-9._-], not "." or "..". */
bool meta_topic_name_valid(const char *name);

/* True when the 16 bytes are all zero (the "no id" value). */
bool meta_uuid_is_zero(const uint8_t id[META_UUID_SIZE]);

/* True when `v` has `count` distinct values, each >= 0. */
bool meta_broker_list_valid(const int32_t *v, uint32_t count);

/* Whether `id` is in the list. */
bool meta_list_contains(const int32_t *v, uint32_t count, int32_t id);

#endif
