/*
 * groups.h — the broker's side of consumer groups: which broker
 * coordinates a group, the group APIs answered from the coordinator
 * (src/group), and the group state kept in the internal topic
 * __consumer_offsets (docs/groups.md).
 *
 * Where a group lives. Its coordinator is the leader of partition
 * abs(javaHashCode(group_id)) % N of __consumer_offsets, N its partition
 * count (cluster config `offsets.topic.num.partitions`, default 10). The
 * topic is created through the controller the first time a client looks
 * for a coordinator (broker_groups_take_create). When this broker becomes
 * leader of an offsets partition it rebuilds that partition's groups by
 * reading its log (broker_groups_image_changed); when it stops leading one
 * it drops them, and requests for them get NOT_COORDINATOR.
 *
 * Durability. OffsetCommit and DeleteGroups append their records to the
 * group's offsets partition and are answered only after the partition has
 * committed them (broker_partition_committed: today the leader's
 * fdatasync; with replication, the high watermark): the shell holds them
 * like a produce and calls broker_group_finish after the sync. Committed
 * offsets are applied to the coordinator only then, so OffsetFetch never
 * shows an offset that is not durable. Group metadata records (a new
 * Stable generation, a group turning Empty) are appended as they happen
 * and made durable by the next sync; nothing waits for them.
 *
 * Threading and memory as the rest of the core (broker.h).
 */
#ifndef KEEL_BROKER_GROUPS_H
#define KEEL_BROKER_GROUPS_H

#include <stdbool.h>
#include <stdint.h>

#include "broker/broker.h"
#include "group/group.h"

#define BROKER_OFFSETS_PARTITIONS_DEFAULT 10
#define BROKER_OFFSETS_RF_DEFAULT         3
#define BROKER_OFFSET_METADATA_MAX        4096
#define BROKER_OFFSETS_SEGMENT_DEFAULT    (100u << 20) /* Kafka's offsets.topic.segment.bytes */
/* Kafka's offsets.retention.minutes (7 days) and
 * offsets.retention.check.interval.ms (10 minutes). */
#define BROKER_OFFSETS_RETENTION_MINUTES_DEFAULT  (7 * 24 * 60)
#define BROKER_OFFSETS_RETENTION_CHECK_MS_DEFAULT 600000

/*
 * Compaction of an offsets partition this broker leads (a snapshot and a
 * prefix cut, docs/groups.md): when it has at least three segments and
 * more records were appended since the last snapshot than that snapshot
 * held, the state of all its groups is appended again as one snapshot
 * batch; once that batch is durable, every segment wholly before it is
 * deleted. What is left still rebuilds the same state when read from the
 * start.
 */
struct broker_offsets_part {
	bool loaded;           /* its groups are loaded here */
	bool snapshot_pending; /* written, waiting to be durable before the cut */
	int64_t snapshot_start;
	int64_t snapshot_end; /* exclusive */
	int64_t snapshot_records;
};

struct broker_groups {
	struct group_coord coord;
	int32_t partition_count;           /* of __consumer_offsets in the image; 0: none */
	struct broker_offsets_part *parts; /* [partition_count] */
	uint64_t compactions;              /* prefix cuts done */
	uint64_t compacted_segments;       /* segments they deleted */
	bool want_create;                  /* a client asked; the topic does not exist */
	int64_t create_asked_ms;           /* last time creation was asked of the controller */
	uint64_t loaded_records;           /* records read while loading, for the log */
	int64_t expire_checked_ms;         /* last offset expiry pass (monotonic) */
	uint64_t expired_offsets;          /* offsets removed by retention */
	uint64_t expired_groups;           /* groups removed by retention */
};

/* Called by broker_core_init / broker_core_close. */
void broker_groups_init(struct broker_core *core);
void broker_groups_close(struct broker_core *core);

/* Something that differs between runs of this broker (the shell's start
 * time): member ids embed it, so that ids stay unique across restarts. */
void broker_groups_set_incarnation(struct broker_core *core, uint64_t incarnation);

/* After every new image: load the offsets partitions this broker now
 * leads, drop those it no longer leads. */
void broker_groups_image_changed(struct broker_core *core);
/* The segment size of the offsets partitions: the cluster's
 * offsets.topic.segment.bytes (at least 4096), else the default. */
uint64_t broker_offsets_segment_bytes(const struct broker_core *core);

/* Whether the API is one of the group APIs answered here. */
bool broker_groups_handles(int16_t api_key);

struct broker_group_ctx {
	int64_t now_ms;  /* monotonic: sessions and timeouts */
	int64_t wall_ms; /* wall clock: commit timestamps */
	uint64_t waiter; /* token for a delayed answer (a connection id) */
	const char *client_host;
};

enum broker_group_outcome {
	BROKER_GROUP_DONE,   /* *out is the answer */
	BROKER_GROUP_PARKED, /* the answer comes as a group_reply for ctx->waiter */
	BROKER_GROUP_SYNC,   /* appended: answer after the sync, via broker_group_finish */
};

/* `wait` (for BROKER_GROUP_SYNC) uses one part: the offsets partition. */
enum broker_group_outcome
broker_group_request(struct broker_core *core, const struct broker_group_ctx *ctx,
                     const struct kafka_request *rq, struct keel_arena *arena,
                     union kafka_response_body *out, struct broker_produce_wait *wait);

/* After the sync a BROKER_GROUP_SYNC request waited for: applies what is
 * now committed to the coordinator, or turns the answer into errors. */
void broker_group_finish(struct broker_core *core, const struct kafka_request *rq,
                         const struct broker_produce_wait *wait, union kafka_response_body *out);

/* The answer to a parked request, from its reply. */
void broker_group_reply(const struct group_reply *reply, const struct kafka_request *rq,
                        struct keel_arena *arena, union kafka_response_body *out);

/* Offsets retention (group.h has the rules), from the config a broker
 * sees (this broker's, else the cluster default): keel's
 * `offsets.retention.ms` if set, else Kafka's `offsets.retention.minutes`
 * (default 7 days); <= 0: offsets never expire. */
int64_t broker_offsets_retention_ms(const struct broker_core *core);

/* Timers: session expiry and join-phase deadlines; writes the group
 * metadata records that became due; every
 * `offsets.retention.check.interval.ms` (default 10 minutes) expires
 * offsets and appends their tombstones. Not while a sync is in flight. */
void broker_groups_tick(struct broker_core *core, int64_t now_ms, int64_t wall_ms);

/* A CreateTopics request for __consumer_offsets for the controller, when
 * one is due (asked for, and not asked in the last second). */
bool broker_groups_take_create(struct broker_core *core, int64_t now_ms, struct keel_wbuf *body,
                               enum meta_api *api);

/* Whether the partition's records below `offset` are committed (durable
 * on the leader today; the high watermark once replication lands). */
bool broker_partition_committed(const struct broker_partition *p, int64_t offset);

#endif
