/*
 * broker.h — the broker core: a Kafka broker's answers to decoded requests,
 * given its metadata image and its partition logs. Pure: no libuv, no
 * clock, no randomness; files only through the injected wal_vfs (plog).
 * The libuv shell (src/cli/broker_server.c) frames requests, decodes them
 * (src/kafka), calls in here and writes the responses.
 *
 * Partitions. The core holds one `struct broker_partition` for every
 * partition the current image lists this broker as a replica of, with its
 * plog open under <data_dir>/<topic>-<partition>/. broker_core_set_image()
 * opens the new ones (recovering what is on disk), closes the ones this
 * broker no longer holds, and records for each whether this broker leads it
 * and at which leader epoch. A partition is served (Produce, Fetch,
 * ListOffsets, OffsetForLeaderEpoch) exactly when the image says this broker
 * leads it: NOT_LEADER_OR_FOLLOWER otherwise, UNKNOWN_TOPIC_OR_PARTITION
 * when the image has no such partition. A directory whose partition.metadata
 * names another topic id (a deleted topic re-created under the same name)
 * is emptied before use.
 *
 * Durability (the rule that matters). Produce appends (plog_append) but
 * does not sync: it marks the partition dirty and the shell must hold the
 * response until broker_core_sync() (on a worker thread) and then
 * broker_core_sync_done() (on the loop thread) ran; broker_produce_finish()
 * then turns the partitions whose sync failed into KAFKA_STORAGE_ERROR.
 * Every produce that reached the log between two syncs shares one
 * fdatasync per partition (group commit). The high watermark served to
 * consumers is the durable offset, so nothing unsynced is ever read.
 *
 * Threading. One thread at a time: while broker_core_sync() runs on the
 * worker, the loop thread must not call anything else here (the shell gates
 * every request that touches a partition until the sync is done).
 *
 * Memory. Responses are built in the caller's arena and point into the
 * request (topic names) and the arena (records copied out of the log); both
 * must live until the response is encoded.
 */
#ifndef KEEL_BROKER_BROKER_H
#define KEEL_BROKER_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/err.h"
#include "kafka/api.h"
#include "meta/image.h"
#include "meta/proto.h"
#include "meta/record.h"
#include "plog/plog.h"
#include "plog/producer.h"
#include "wal/vfs.h"

/* The API sets a broker advertises in ApiVersions (kafka/api.h). */
#define BROKER_API_SETS (KAFKA_SET_CORE | KAFKA_SET_ADMIN | KAFKA_SET_PRODUCER | KAFKA_SET_GROUP)

/* Longest topic name Kafka allows. */
#define BROKER_TOPIC_MAX 249

struct broker_config {
	struct wal_vfs *vfs;  /* not owned */
	const char *data_dir; /* copied */
	int32_t node_id;
	uint32_t max_batch_bytes; /* largest batch a produce may carry */
};

/* A follower's progress as its leader sees it, from its fetches
 * (replica.c). Reset whenever this broker becomes leader (a new epoch). */
struct broker_replica {
	int64_t log_end_offset;      /* its last fetch offset: durable on it; -1 unknown */
	int64_t caught_up_ms;        /* the last time it was at this leader's log end */
	int64_t fetch_ms;            /* its last fetch; -1 none yet */
	int64_t leader_end_at_fetch; /* this leader's log end at that fetch */
};

/* A follower partition: ask the leader where our log diverges
 * (OffsetForLeaderEpoch) and cut it there, then fetch. */
enum broker_follow_state {
	BROKER_FOLLOW_TRUNCATE,
	BROKER_FOLLOW_FETCH,
};

struct broker_partition {
	char topic[BROKER_TOPIC_MAX + 1];
	int32_t index;
	uint8_t topic_id[16];
	bool leader;          /* the image says this broker leads it */
	int32_t leader_epoch; /* from the image */
	bool open;            /* log is open */
	struct plog log;
	bool dirty;             /* appended since the last sync */
	enum keel_err sync_err; /* outcome of the last sync */
	bool seen;              /* scratch for broker_core_set_image */
	/* idempotent producers (producers.c) */
	struct plog_producers producers;
	bool producers_ready;     /* rebuilt since the log opened / leadership began */
	int64_t snapshot_segment; /* base of the active segment at the last snapshot */
	/* Replication (replica.c), from the image: */
	int32_t leader_id;
	int32_t partition_epoch;
	uint8_t recovery_state; /* META_RECOVERED / META_RECOVERING */
	uint32_t min_isr;       /* min.insync.replicas in force */
	bool replication_flush; /* flush.policy=replication: followers report unsynced data */
	int32_t replicas[META_MAX_REPLICAS];
	uint32_t replica_count;
	int32_t isr[META_MAX_REPLICAS]; /* as the image says: never changed here */
	uint32_t isr_count;
	/* ... and kept here: */
	int64_t high_watermark; /* leader: min log end over the ISR; follower: the leader's, capped
	                         */
	struct broker_replica progress[META_MAX_REPLICAS]; /* leader: [i] for replicas[i] */
	enum broker_follow_state follow;                   /* follower */
	int64_t alter_sent_ms; /* leader: an AlterPartition is out since then; -1 none */
	bool throttled;        /* follower: in follower.replication.throttled.replicas */
	bool leader_throttled; /* leader: in leader.replication.throttled.replicas */
};

/* Counters for the broker's log and metrics. */
struct broker_replication_stats {
	uint64_t isr_shrinks;       /* AlterPartition requests that drop a replica */
	uint64_t isr_expands;       /* ... that add one */
	uint64_t truncations;       /* follower logs cut after OffsetForLeaderEpoch */
	uint64_t truncated_offsets; /* offsets cut by them */
	uint64_t follower_bytes;    /* record bytes appended as a follower */
	uint64_t follower_fetches;  /* fetches from followers served as leader */
};

struct broker_groups;

/* One partition's checkpointed high watermark (hwcheck.c). */
struct broker_hw_entry {
	uint8_t topic_id[16];
	int32_t partition;
	int64_t high_watermark;
};

struct broker_core {
	struct broker_config config;
	char data_dir[WAL_VFS_PATH_MAX];
	struct meta_image image; /* the latest image handed in */
	bool has_image;
	struct broker_partition **parts; /* sorted by (topic, index) */
	uint32_t part_count;
	uint32_t part_capacity;
	uint32_t dirty_count;
	char why[256]; /* detail of the last failure to open a partition */
	/* producer ids [next, end) of the block the controller gave this broker */
	int64_t producer_id_next;
	int64_t producer_id_end;
	uint64_t duplicates; /* retried batches answered with their first offsets */
	uint64_t refused_after; /* batches refused like the refused one before them */
	struct broker_groups *groups; /* consumer groups (groups.h) */
	/* Replication (replica.c). Time comes in through broker_core_set_time. */
	int64_t now_ms;
	int64_t replica_lag_time_max_ms; /* replica.lag.time.max.ms from the image */
	bool hw_moved;                   /* some high watermark rose: recheck acks=all waits */
	struct broker_replication_stats stats;
	/* Follower throttle (follower.replication.throttled.rate, bytes/s; < 0
	 * none): throttled partitions are fetched again from throttle_next_ms,
	 * which every throttled byte fetched moves 1/rate s further. */
	int64_t throttle_rate;
	int64_t throttle_next_ms;
	uint64_t throttled_bytes;
	/* Leader throttle (leader.replication.throttled.rate, bytes/s; < 0
	 * none): the same budget for the throttled followers' fetches this
	 * leader answers (broker_leader_throttle_budget). */
	int64_t leader_throttle_rate;
	int64_t leader_throttle_next_ms;
	uint64_t leader_throttled_bytes;
	/* The high-watermark checkpoint read at start (broker_hw_checkpoint_load),
	 * sorted; used by the partitions the first image opens, then dropped. */
	struct broker_hw_entry *hw_restored;
	uint32_t hw_restored_count;
	uint32_t hw_restored_used; /* partitions that started from it */
};

void broker_core_init(struct broker_core *core, const struct broker_config *config);
void broker_core_close(struct broker_core *core);

/* What changed in the set of open partitions, for the shell's log. */
struct broker_image_report {
	uint32_t opened;
	uint32_t closed;
	uint32_t failed;              /* partitions whose log did not open (core->why: the last) */
	uint64_t recovered_bytes_cut; /* torn tails cut during recovery */
};

/*
 * Takes the contents of *img (which is left empty) as the current image and
 * brings the partitions in line with it. Must not be called while a sync is
 * in flight or any partition is dirty (broker_core_dirty()).
 */
void broker_core_set_image(struct broker_core *core, struct meta_image *img,
                           struct broker_image_report *report);

/* The partition this broker holds, or NULL. */
struct broker_partition *broker_core_partition(struct broker_core *core, struct kafka_str topic,
                                               int32_t index);

bool broker_core_dirty(const struct broker_core *core);

/* Worker thread: plog_sync of every dirty partition (sets sync_err). */
void broker_core_sync(struct broker_core *core);
/* Loop thread, after broker_core_sync: clears the dirty marks. */
void broker_core_sync_done(struct broker_core *core);

/* ---- leader-side replication throttle (replica.c) ---- */

/* The bytes this leader may send replica_id of p in answer to a fetch
 * that waits up to max_wait_ms: max_bytes when the fetch is not throttled
 * (p not in leader.replication.throttled.replicas for this broker, no
 * leader.replication.throttled.rate, or the follower in the ISR); 0 while
 * the throttle's budget is spent; else up to the rate's worth over the
 * wait. _charge: the bytes sent, which move the budget bytes/rate on. */
uint64_t broker_leader_throttle_budget(const struct broker_core *core,
                                       const struct broker_partition *p, int32_t replica_id,
                                       int32_t max_wait_ms, uint64_t max_bytes);
void broker_leader_throttle_charge(struct broker_core *core, const struct broker_partition *p,
                                   int32_t replica_id, uint64_t bytes);

/* ---- the high-watermark checkpoint (hwcheck.c) ---- */

#define BROKER_HW_CHECKPOINT_FILE "replication-offset-checkpoint"

/* The checkpoint's bytes for every open partition, into w (reset first).
 * Loop thread, no sync in flight. */
enum keel_err broker_hw_checkpoint_encode(const struct broker_core *core, struct keel_wbuf *w);
/* Replaces <data_dir>/replication-offset-checkpoint with `data` durably
 * (temp file, fdatasync, rename, directory sync). Touches no core state:
 * any thread. errmsg: WAL_VFS_ERRMSG_SIZE bytes. */
enum keel_err broker_hw_checkpoint_store(struct wal_vfs *vfs, const char *data_dir,
                                         const void *data, size_t size, char *errmsg);
/* Checks and decodes a checkpoint: *entries (malloc'd, caller frees) in
 * file order. KEEL_CORRUPT with why for a bad magic, version, length,
 * CRC or a negative value. */
enum keel_err broker_hw_checkpoint_decode(const void *data, size_t size,
                                          struct broker_hw_entry **entries, uint32_t *count,
                                          char *why, size_t why_size);
/* Reads the checkpoint for the partitions the next image opens (call before
 * the first image). KEEL_NOENT when there is none; another error (why set)
 * when it cannot be read or does not check: nothing is restored. */
enum keel_err broker_hw_checkpoint_load(struct broker_core *core, uint32_t *count, char *why,
                                        size_t why_size);
/* The restored high watermark of (topic id, partition), or -1. */
int64_t broker_hw_restored(const struct broker_core *core, const uint8_t topic_id[16],
                           int32_t partition);
void broker_hw_restored_drop(struct broker_core *core);

/* ---- log settings and retention (logconfig.c) ---- */

/* Sets p's segment size and age, retention and index interval from the
 * image: the topic's config, else this broker's, else the cluster
 * default, else Kafka's default. broker_core_set_image calls it for every
 * open partition. */
void broker_apply_log_config(const struct broker_core *core, struct broker_partition *p);

/* A config as this broker sees it: the topic's own (topic NULL: skip that
 * level), else this broker's (BROKER, "<id>"), else the cluster default
 * (BROKER, ""); NULL when unset. _i64: its integer value, or def when unset
 * or not an integer. */
const char *broker_config_value(const struct broker_core *core, const char *topic,
                                const char *key);
int64_t broker_config_i64(const struct broker_core *core, const char *topic, const char *key,
                          int64_t def);

/* Whether the topic's cleanup.policy includes "delete" (the default). */
bool broker_topic_deletes(const struct broker_core *core, const char *topic);

struct broker_retention_report {
	uint32_t segments;   /* segments deleted */
	uint32_t partitions; /* partitions that lost at least one */
	uint32_t failed;     /* partitions whose log failed (plog_why) */
};

/* Retention of every open partition whose topic deletes (not compact-only):
 * whole oldest segments past retention.ms (by their newest timestamp, from
 * now_ms, wall clock) or beyond retention.bytes — never the active one.
 * Loop thread, with no sync in flight (a dirty partition is skipped). */
void broker_core_retain(struct broker_core *core, int64_t now_ms,
                        struct broker_retention_report *report);

/* ---- the APIs ---- */

/* Which partitions a produce appended to, to finish it after the sync
 * and, for acks=all, once the ISR has it (broker_produce_acked). */
struct broker_produce_wait {
	struct broker_partition **parts; /* [i] for response partition i (flattened), or NULL;
	                                    valid until the next image */
	int64_t *required;               /* [i]: the high watermark that acknowledges it; -1 done */
	int32_t *leader_epochs;          /* [i]: the leader epoch it was appended at */
	uint32_t count;
	bool needs_sync; /* at least one append */
	int64_t last_offset; /* group records: the last offset appended */
	bool needs_isr;  /* acks=all with at least one append */
};

void broker_api_versions(struct broker_core *core, struct keel_arena *arena,
                         struct kafka_api_versions_response *out);
void broker_metadata(struct broker_core *core, const struct kafka_metadata_request *rq,
                     int16_t version, struct keel_arena *arena,
                     struct kafka_metadata_response *out);
/* `rq` is not const: plog_append stamps offsets into the records in place. */
void broker_produce(struct broker_core *core, struct kafka_produce_request *rq,
                    struct keel_arena *arena, struct kafka_produce_response *out,
                    struct broker_produce_wait *wait);
void broker_produce_finish(const struct broker_produce_wait *wait,
                           struct kafka_produce_response *out);
/* acks=all, after broker_produce_finish: true when every partition is
 * answered — its high watermark covers the append (and the ISR is at least
 * min.insync.replicas, else NOT_ENOUGH_REPLICAS_AFTER_APPEND), or this
 * broker no longer leads it at the epoch it appended at
 * (NOT_LEADER_OR_FOLLOWER). With `expired`, the ones still waiting get
 * REQUEST_TIMED_OUT. Looks partitions up by the request's names, so it is
 * safe across images. */
bool broker_produce_acked(struct broker_core *core, const struct kafka_produce_request *rq,
                          struct broker_produce_wait *wait, struct kafka_produce_response *out,
                          bool expired);
/* A fetched partition's records, by reference: `size` bytes at `position`
 * of the segment file `path` (in the arena); size 0: none. Segment bytes
 * below the log end never change (appends go after them), so the range
 * stays valid while the file exists. */
struct broker_fetch_range {
	const char *path;
	uint64_t position;
	uint64_t size;
};

/* Like broker_fetch, without copying: records are {NULL, size} and
 * (*ranges)[i] says where partition i's bytes are (i counts the response's
 * partitions in order over all topics). Encode with splices (api.h). */
void broker_fetch_ranges(struct broker_core *core, const struct kafka_fetch_request *rq,
                         struct keel_arena *arena, struct kafka_fetch_response *out, size_t *bytes,
                         struct broker_fetch_range **ranges);

/* Fills *out; *bytes is the record bytes it carries. */
void broker_fetch(struct broker_core *core, const struct kafka_fetch_request *rq,
                  struct keel_arena *arena, struct kafka_fetch_response *out, size_t *bytes);
void broker_list_offsets(struct broker_core *core, const struct kafka_list_offsets_request *rq,
                         struct keel_arena *arena, struct kafka_list_offsets_response *out);
void broker_offset_for_leader_epoch(struct broker_core *core,
                                    const struct kafka_offset_for_leader_epoch_request *rq,
                                    struct keel_arena *arena,
                                    struct kafka_offset_for_leader_epoch_response *out);

/* The PLAINTEXT endpoint of a broker (its first one otherwise), or NULL. */
const struct meta_endpoint *broker_endpoint(const struct meta_broker *b);

/* ---- admin (admin.c) ---- */

/* CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs and
 * AlterConfigs go to the controller: broker_admin_request encodes the
 * extension request (body in w, its opcode in *api; KEEL_UNSUPPORTED for an
 * operation keel cannot forward, e.g. APPEND, or the legacy AlterConfigs
 * before the broker has an image to compute removals from), and broker_admin_response builds the Kafka
 * response from the controller's reply body — or, when reply is NULL or does
 * not decode, with `fail` as every result's error. */
bool broker_api_is_forwarded(int16_t api_key);
enum keel_err broker_admin_request(const struct broker_core *core, const struct kafka_request *rq,
                                   struct keel_arena *arena, struct keel_wbuf *w,
                                   enum meta_api *api);
void broker_admin_response(const struct kafka_request *rq, const uint8_t *reply, size_t size,
                           int16_t fail, struct keel_arena *arena, union kafka_response_body *out);

/* Reads of the image: topic configs (the ones set; Kafka's defaults are
 * not listed), broker and cluster-default configs, and the cluster. */
void broker_describe_configs(struct broker_core *core,
                             const struct kafka_describe_configs_request *rq,
                             struct keel_arena *arena, struct kafka_describe_configs_response *out);
void broker_describe_cluster(struct broker_core *core, struct keel_arena *arena,
                             struct kafka_describe_cluster_response *out);

/* ---- idempotent producers (producers.c) ---- */

/* InitProducerId: true when answered (*out filled) from the current block
 * of producer ids (or refused: transactional ids are not supported); false
 * when the block is used up: then send broker_producer_ids_request's body
 * (AllocateProducerIds) to the controller and answer with
 * broker_producer_ids_reply (reply NULL: no answer came). */
bool broker_init_producer_id(struct broker_core *core,
                             const struct kafka_init_producer_id_request *rq,
                             struct kafka_init_producer_id_response *out);
/* KEEL_NOENT when this broker's image does not list it yet. */
enum keel_err broker_producer_ids_request(struct broker_core *core, struct keel_wbuf *w);
void broker_producer_ids_reply(struct broker_core *core, const uint8_t *reply, size_t size,
                               struct keel_arena *arena,
                               struct kafka_init_producer_id_response *out);

/* A produced batch, as the sequence check saw it. */
struct broker_idem {
	bool active; /* an idempotent producer's batch: record it after the append */
	bool is_duplicate;
	int64_t producer_id;
	int16_t epoch;
	int32_t first_seq;
	int32_t last_seq;
	struct plog_producer_batch duplicate; /* is_duplicate: the batch in the log */
};

/* Before plog_append: the producer checks of `data` (one partition's
 * records) on leader p; KAFKA_NONE to go on (or, with idem->is_duplicate,
 * to answer broker_idem_duplicate's offset without appending). */
int16_t broker_idem_check(struct broker_core *core, struct broker_partition *p, const uint8_t *data,
                          size_t size, struct broker_idem *idem);
/* A produce to leader p refused before the append for too few in-sync
 * replicas: an idempotent producer's batch that was next in sequence is
 * marked, so that the batches in flight behind it get the same answer
 * (plog/producer.h; broker_idem_check then answers NOT_ENOUGH_REPLICAS). */
void broker_idem_refused(struct broker_partition *p, const uint8_t *data, size_t size);
/* For a duplicate (answered with idem->duplicate.first_offset): true when
 * the answer must wait for the next sync (the original is not durable yet,
 * or, for_isr (acks=all), the high watermark does not cover it yet; p is
 * marked dirty, and the produce then waits for the ISR as any does). */
bool broker_idem_duplicate_waits(struct broker_core *core, struct broker_partition *p,
                                 const struct broker_idem *idem, bool for_isr);
/* After a successful plog_append. */
void broker_idem_appended(struct broker_partition *p, const struct broker_idem *idem,
                          const struct plog_append_info *info);
/* After p's sync (worker thread): a snapshot when a segment rolled since
 * the last one. */
void broker_idem_after_sync(struct broker_partition *p);
/* Before p's log closes: a snapshot when everything is durable. */
void broker_idem_before_close(struct broker_partition *p);
/* Before the image's leadership is recorded on p. */
void broker_idem_leadership(struct broker_partition *p, bool leader, int32_t leader_epoch);
/* ---- replication (replica.c) ---- */

/* The clock, for lag: the shell sets it before each call (monotonic ms). */
void broker_core_set_time(struct broker_core *core, int64_t now_ms);

/* Leader: a follower fetched `fetch_offset` (its durable log end) at the
 * current leader epoch; updates its progress and the high watermark. */
void broker_replica_fetched_from(struct broker_core *core, struct broker_partition *p,
                                 int32_t replica_id, int64_t fetch_offset);

/* Leader: recomputes the high watermark (monotonic): the minimum over the
 * ISR of the followers' log ends and this broker's durable end. */
void broker_replica_update_hw(struct broker_core *core, struct broker_partition *p);

/* partitions.c, on every image: takes the partition's replication state
 * from mp; new_term (opened, or the role or leader epoch changed) resets
 * the followers' progress (leader: assigning the epoch in its log) or
 * sends the follower to truncate first. */
void broker_replica_adopt(struct broker_core *core, struct broker_partition *p, const char *topic,
                          const struct meta_partition *mp, bool new_term);
/* replica.lag.time.max.ms for this broker: its own config, else the
 * cluster default, else Kafka's 10000. */
int64_t broker_replica_lag_time_max_ms(const struct meta_image *img, int32_t node_id);

/* Follower side. The leaders this broker fetches from (distinct ids, at
 * most cap), and a broker's PLAINTEXT endpoint from the image. */
uint32_t broker_replica_leaders(const struct broker_core *core, int32_t *out, uint32_t cap);
bool broker_replica_endpoint(const struct broker_core *core, int32_t broker_id, const char **host,
                             uint16_t *port);

/* The next request to send to `leader_id` for the partitions this broker
 * follows there: OffsetForLeaderEpoch (v3) for those that must truncate
 * first, else one Fetch (v11) for all of them from their log ends — which
 * must be durable: call only when nothing is dirty. Fills req->header
 * (api key, version; the caller sets the correlation id) and req->body in
 * the arena. False: nothing to ask. */
bool broker_replica_request(struct broker_core *core, int32_t leader_id, int32_t max_wait_ms,
                            struct keel_arena *arena, struct kafka_request *req);
/* When broker_replica_request had nothing to ask because every partition
 * followed at leader_id is throttled (follower.replication.throttled.*):
 * the milliseconds until they may be fetched again; 0 otherwise. */
int64_t broker_replica_throttle_wait_ms(const struct broker_core *core, int32_t leader_id);

/* What a leader's answer did. */
struct broker_replica_report {
	uint32_t appended_partitions;
	uint64_t appended_bytes;
	uint32_t truncated_partitions;
	uint32_t errors; /* partitions answered with an error: back off */
	char why[160];   /* the last error, for the log */
};

/* Applies the leader's answer to a request broker_replica_request built.
 * Answers for partitions whose leader or epoch changed since are ignored.
 * Appends mark partitions dirty (the shell syncs before the next fetch). */
void broker_replica_fetch_answer(struct broker_core *core, int32_t leader_id,
                                 const struct kafka_fetch_request *rq,
                                 const struct kafka_fetch_response *rs,
                                 struct broker_replica_report *report);
void broker_replica_epoch_answer(struct broker_core *core, int32_t leader_id,
                                 const struct kafka_offset_for_leader_epoch_request *rq,
                                 const struct kafka_offset_for_leader_epoch_response *rs,
                                 struct broker_replica_report *report);

/* The ISR a leader wants for p now: itself, the ISR members that were at
 * its log end within replica.lag.time.max.ms, and the replicas outside it
 * that reached the high watermark and this epoch's start. Returns the count. */
uint32_t broker_replica_wanted_isr(const struct broker_core *core, const struct broker_partition *p,
                                   int32_t *isr);

/* The AlterPartition request to send now (encoded into w, with the image's
 * leader and partition epochs), for the partitions led here whose wanted
 * ISR differs from the image's, or that are RECOVERING (to RECOVERED); a
 * partition asked for is not asked again for resend_ms or until the image
 * changes it. False: nothing to ask. */
bool broker_replica_isr_request(struct broker_core *core, int64_t broker_epoch, int64_t resend_ms,
                                struct keel_arena *arena, struct keel_wbuf *w);

/* Whether a request of this API touches partition logs (the shell gates
 * those while a sync is in flight). */
bool broker_api_touches_logs(int16_t api_key);

#endif
