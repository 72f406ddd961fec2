/*
 * group.h — the group coordinator: Kafka's classic consumer-group protocol
 * (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and the committed offsets
 * of each group, as a pure state machine. No clock (time comes in as
 * now_ms arguments and group_coord_tick), no I/O, no randomness (member
 * ids are derived from a caller-given incarnation and a counter).
 *
 * A group's states (Kafka's names):
 *
 *   Empty --join--> PreparingRebalance --all joined / rebalance timeout-->
 *   CompletingRebalance --leader's SyncGroup--> Stable
 *   Stable --join with new metadata, leave, session expiry--> PreparingRebalance
 *   PreparingRebalance --every member gone--> Empty
 *   any --DeleteGroups (Empty only)--> Dead (removed)
 *
 * A generation is one completed join phase: it increments each time the
 * PreparingRebalance phase completes. The assignment is computed by the
 * client the coordinator picks as leader (the protocols it offers flow
 * through as bytes), and handed to each member in SyncGroup.
 *
 * Delayed answers. A JoinGroup waits until the join phase completes, a
 * SyncGroup until the leader's assignment arrives: group_join and
 * group_sync return false then and the answer comes later, as a
 * `struct group_reply` queued for the caller (group_coord_take_reply)
 * carrying the request's `waiter` token. Every parked request gets exactly
 * one reply (an error one if the member goes away or the group unloads).
 *
 * Durability is the caller's: committed offsets are applied here by
 * group_offset_commit when the caller has appended their records; groups
 * whose metadata changed in a way worth recording (a new Stable generation,
 * becoming Empty) are marked `meta_dirty` for the caller to write
 * (group_coord_take_dirty).
 *
 * Memory: everything here is owned by the coordinator (malloc'd copies of
 * the caller's strings and bytes); replies are owned by the caller once
 * taken and freed with group_reply_free.
 */
#ifndef KEEL_GROUP_GROUP_H
#define KEEL_GROUP_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/hash.h"

enum group_state {
	GROUP_EMPTY,
	GROUP_PREPARING_REBALANCE,
	GROUP_COMPLETING_REBALANCE,
	GROUP_STABLE,
	GROUP_DEAD,
};

/* Kafka's state names ("Empty", "PreparingRebalance", ...). */
const char *group_state_name(enum group_state s);

struct group_bytes {
	uint8_t *ptr; /* owned; NULL when len <= 0 */
	int32_t len;  /* -1: null */
};

struct group_protocol {
	char *name;
	struct group_bytes metadata;
};

struct group_member {
	char *member_id;
	char *instance_id; /* NULL: dynamic member */
	char *client_id;
	char *client_host;
	int32_t session_timeout_ms;
	int32_t rebalance_timeout_ms;
	struct group_protocol *protocols;
	uint32_t protocol_count;
	struct group_bytes assignment;
	int64_t session_deadline_ms;
	bool joined;      /* has rejoined in the current join phase */
	bool join_parked; /* a JoinGroup waits (join_waiter) */
	bool sync_parked; /* a SyncGroup waits (sync_waiter) */
	uint64_t join_waiter;
	uint64_t sync_waiter;
};

/* A member id handed out with MEMBER_ID_REQUIRED, not yet joined. */
struct group_pending_member {
	char *member_id;
	int64_t deadline_ms;
};

struct group_offset {
	char *topic;
	int32_t partition;
	int64_t offset;
	int32_t leader_epoch;
	char *metadata; /* NULL: null */
	int64_t commit_timestamp_ms;
};

struct group {
	char *group_id;
	int32_t offsets_partition; /* of __consumer_offsets: where it lives */
	enum group_state state;
	int32_t generation;
	char *protocol_type; /* NULL: none yet */
	char *protocol_name; /* chosen at the end of a join phase */
	char *leader_id;
	int64_t state_timestamp_ms;
	/* The wall clock of the last state change (Kafka's
	 * currentStateTimestamp, kept in the group's record): an Empty group's
	 * offsets expire offsets retention after it. Below GROUP_WALL_MS_MIN:
	 * not known. */
	int64_t state_wall_ms;
	int64_t rebalance_deadline_ms; /* PreparingRebalance: when it ends anyway */
	struct group_member **members;
	uint32_t member_count;
	struct group_pending_member *pending;
	uint32_t pending_count;
	struct group_offset *offsets;
	uint32_t offset_count;
	bool meta_dirty;
	uint32_t slot; /* its index in coord->groups */
};

struct group_coord_config {
	int32_t min_session_timeout_ms; /* group.min.session.timeout.ms, Kafka: 6000 */
	int32_t max_session_timeout_ms; /* group.max.session.timeout.ms, Kafka: 1800000 */
	uint32_t max_groups;
	uint32_t max_members; /* per group (group.max.size) */
	uint32_t max_offsets; /* per group */
	uint64_t incarnation; /* differs between runs: makes member ids unique */
};

void group_coord_config_default(struct group_coord_config *config);

struct group_coord {
	struct group_coord_config config;
	struct group **groups; /* in no order; for iteration */
	uint32_t group_count;
	uint32_t group_capacity;
	struct keel_hmap by_id; /* group id -> struct group */
	uint64_t next_member;
	int64_t wall_ms; /* the caller's wall-clock time: group_coord_set_wall_clock */
	struct group_reply *replies_head, *replies_tail;
};

void group_coord_init(struct group_coord *c, const struct group_coord_config *config);
/* Frees everything; parked requests get no reply (the caller is going away). */
void group_coord_close(struct group_coord *c);

struct group *group_coord_find(const struct group_coord *c, const char *group_id);

/* ---- JoinGroup / SyncGroup results (immediate or delayed) ---- */

struct group_join_member {
	char *member_id;
	char *instance_id;
	struct group_bytes metadata;
};

struct group_join_result {
	int16_t error; /* a Kafka error code */
	int32_t generation;
	char *protocol_type;
	char *protocol_name;
	char *leader_id;
	char *member_id;
	struct group_join_member *members; /* the leader's only */
	uint32_t member_count;
};

struct group_sync_result {
	int16_t error;
	char *protocol_type;
	char *protocol_name;
	struct group_bytes assignment;
};

enum group_reply_kind { GROUP_REPLY_JOIN, GROUP_REPLY_SYNC };

struct group_reply {
	struct group_reply *next;
	enum group_reply_kind kind;
	uint64_t waiter;
	struct group_join_result join;
	struct group_sync_result sync;
};

/* The oldest queued reply (the caller owns it), or NULL. */
struct group_reply *group_coord_take_reply(struct group_coord *c);
void group_reply_free(struct group_reply *r);
void group_join_result_clear(struct group_join_result *r);
void group_sync_result_clear(struct group_sync_result *r);

/* ---- requests ---- */

struct group_protocol_in {
	const char *name;
	const uint8_t *metadata;
	int32_t metadata_len;
};

struct group_join_request {
	const char *group_id;
	int32_t offsets_partition;
	const char *member_id;   /* "" for a new member */
	const char *instance_id; /* NULL: dynamic */
	const char *client_id;
	const char *client_host;
	int32_t session_timeout_ms;
	int32_t rebalance_timeout_ms;
	const char *protocol_type;
	const struct group_protocol_in *protocols;
	uint32_t protocol_count;
	int16_t version; /* JoinGroup version: v4+ gets MEMBER_ID_REQUIRED */
	uint64_t waiter;
};

/* true: *out holds the answer now; false: parked (a GROUP_REPLY_JOIN for
 * rq->waiter comes later). */
bool group_join(struct group_coord *c, int64_t now_ms, const struct group_join_request *rq,
                struct group_join_result *out);

struct group_assignment_in {
	const char *member_id;
	const uint8_t *assignment;
	int32_t assignment_len;
};

struct group_sync_request {
	const char *group_id;
	int32_t generation;
	const char *member_id;
	const char *instance_id;
	const struct group_assignment_in *assignments;
	uint32_t assignment_count;
	uint64_t waiter;
};

bool group_sync(struct group_coord *c, int64_t now_ms, const struct group_sync_request *rq,
                struct group_sync_result *out);

/* A Kafka error code. */
int16_t group_heartbeat(struct group_coord *c, int64_t now_ms, const char *group_id,
                        int32_t generation, const char *member_id, const char *instance_id);

/* One member leaves: by member id, or by instance id when member_id is ""
 * (LeaveGroup v3+ batches). A Kafka error code. */
int16_t group_leave(struct group_coord *c, int64_t now_ms, const char *group_id,
                    const char *member_id, const char *instance_id);

/* Expires sessions, ends join phases whose time is up, drops stale pending
 * member ids. */
void group_coord_tick(struct group_coord *c, int64_t now_ms);

/* ---- offsets ---- */

/* Whether a commit by (generation, member) may go ahead: KAFKA_NONE, or
 * the error every partition gets. generation < 0 with an empty member id is
 * a commit from outside the group protocol (allowed while the group is
 * Empty, and for unknown groups, which it creates). */
int16_t group_offset_commit_check(struct group_coord *c, int64_t now_ms, const char *group_id,
                                  int32_t offsets_partition, int32_t generation,
                                  const char *member_id, const char *instance_id);

/* Applies one committed offset (after group_offset_commit_check said yes
 * and the caller appended its record). */
enum keel_err group_offset_commit(struct group_coord *c, const char *group_id,
                                  int32_t offsets_partition, const char *topic, int32_t partition,
                                  int64_t offset, int32_t leader_epoch, const char *metadata,
                                  int64_t commit_timestamp_ms);

/* The committed offset, or NULL. */
const struct group_offset *group_offset_find(const struct group *g, const char *topic,
                                             int32_t partition);
/* Removes one committed offset (OffsetDelete, a tombstone on load). */
bool group_offset_remove(struct group *g, const char *topic, int32_t partition);

/* DeleteGroups: KAFKA_NONE and the group is gone, GROUP_ID_NOT_FOUND,
 * NON_EMPTY_GROUP. */
int16_t group_delete(struct group_coord *c, const char *group_id);

/* ---- persistence and ownership ---- */

/* A group whose metadata record should be written (its mark is cleared),
 * or NULL. */
struct group *group_coord_take_dirty(struct group_coord *c);

/* Load: a group metadata record (members are not restored: they rejoin).
 * state_wall_ms: when the group became Empty if the record says it is
 * (it lists no members), else -1 (its members are about to rejoin or
 * expire: its retention, if it ends up Empty, counts from the load). */
enum keel_err group_coord_load_group(struct group_coord *c, const char *group_id,
                                     int32_t offsets_partition, const char *protocol_type,
                                     int32_t generation, const char *protocol_name, int64_t now_ms,
                                     int64_t state_wall_ms);
/* Load: a tombstone for the group's metadata (it stays if it has offsets). */
void group_coord_load_group_delete(struct group_coord *c, const char *group_id);

/* Drops every group of one offsets partition (this broker stopped leading
 * it): parked requests get NOT_COORDINATOR. */
void group_coord_unload(struct group_coord *c, int32_t offsets_partition);

/* ---- offset expiry (Kafka's offsets.retention.minutes, KIP-211) ----
 *
 * Wall-clock times: they are compared across brokers (a new coordinator
 * reads them from the records), which a monotonic clock cannot be. The
 * caller gives its wall clock before each call that may change a group's
 * state (group_coord_set_wall_clock), so that state changes are stamped.
 *
 * An offset expires, retention_ms after its base, only in a group with no
 * members (Empty):
 *  - a group that has had members (it has a protocol type): the base is
 *    when it became Empty, for all its offsets at once;
 *  - a group only ever committed to from outside the group protocol (no
 *    protocol type): the base is each offset's own commit time.
 * A group that is Empty with no offsets left, and has been for the
 * retention, is removed too. Offsets of groups with members never expire
 * (Kafka 2.5's expiry of offsets of topics no longer subscribed, KIP-496,
 * is not done).
 */

/* Times before 2001 are taken as "not known" (records written before
 * keel stamped wall-clock state times hold a monotonic one). */
#define GROUP_WALL_MS_MIN 978307200000LL

void group_coord_set_wall_clock(struct group_coord *c, int64_t wall_ms);

/* Called before each expired offset is removed (o != NULL) and before an
 * expired group is removed (o == NULL): the caller writes its tombstone. */
typedef void (*group_expire_fn)(void *arg, const struct group *g, const struct group_offset *o);

/* Removes what has expired at wall_ms; the number of offsets removed. */
uint32_t group_coord_expire_offsets(struct group_coord *c, int64_t wall_ms, int64_t retention_ms,
                                    group_expire_fn fn, void *arg);

/* Kafka's partition for a group id: abs(Java String.hashCode) % count. */
int32_t group_partition_for(const char *group_id, size_t len, int32_t partition_count);

#endif
