/*
 * image.h — the cluster metadata image: brokers, topics, partitions and
 * configs, built by applying committed record batches in log order.
 *
 * Every server holds one (the committed image) and applies each metadata
 * batch of the Raft log to it; brokers hold one too (follower.h). Apply is
 * a pure, deterministic function of (image, offset, batch): the same log
 * gives the same image, byte for byte (meta_image_hash), on every machine.
 *
 * Apply RE-VALIDATES every record against the image as it is at that point
 * in the log. A record that does not fit — a PartitionChange whose epochs
 * do not chain from the current ones, a fence of a broker epoch that was
 * replaced, a topic whose name is taken — is IGNORED (the image does not
 * change) and counted in the result, the same way on every server. So a
 * stale proposal from a deposed controller cannot corrupt the image. A batch
 * from an older controller epoch than one already applied is ignored whole.
 *
 * Invariants kept by apply (checked by meta_image_check):
 *  - brokers sorted by id, topics sorted by name (and by id in topics_by_id),
 *    configs sorted by (resource type, resource name, key), no duplicates;
 *  - a topic's partitions are numbered 0..partition_count-1;
 *  - every partition: replicas distinct and non-empty; isr a subset of the
 *    replicas; leader is -1 or a member of the isr; epochs never decrease;
 *    adding and removing replicas (a reassignment) disjoint subsets of the
 *    replicas;
 *  - broker epochs are unique and increase: last_broker_epoch is the highest.
 *  - next_producer_id only grows (a ProducerIds record that does not move it
 *    forward is ignored), so no producer id block is handed out twice.
 *
 * Ownership: the image owns everything it points to (plain malloc). Pointers
 * returned by the lookups are valid until the next apply/load/close on the
 * image. The image is single-threaded.
 *
 * Snapshot: meta_image_save/load stream a self-describing, checksummed
 * encoding (magic "KMI1", format, header, entities, crc32c) through caller
 * callbacks, to sit in the server's snapshot beside the ZooKeeper tree.
 */
#ifndef KEEL_META_IMAGE_H
#define KEEL_META_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/err.h"
#include "meta/fmt.h"
#include "meta/record.h"

struct meta_broker {
	int32_t id;
	uint8_t incarnation_id[META_UUID_SIZE];
	int64_t epoch;
	struct meta_endpoint *endpoints; /* strings owned by the image */
	uint32_t endpoint_count;
	char *rack; /* NULL: none */
	bool fenced;
	bool in_controlled_shutdown;
	int64_t registered_offset;       /* offset of the batch that registered it */
	int64_t registered_timestamp_ms; /* that batch's timestamp */
};

struct meta_partition {
	int32_t *replicas;
	uint32_t replica_count;
	int32_t *isr;
	uint32_t isr_count;
	int32_t leader; /* META_NO_LEADER: offline */
	int32_t leader_epoch;
	int32_t partition_epoch;
	uint8_t leader_recovery_state;
	int32_t controller_epoch; /* epoch of the controller that last changed it */
	int64_t changed_offset;   /* offset of the batch that last changed it */
	/* An ongoing reassignment (KIP-455): replicas being added / removed,
	 * subsets of `replicas`, disjoint. NULL with count 0 when none. */
	int32_t *adding;
	uint32_t adding_count;
	int32_t *removing;
	uint32_t removing_count;
};

/* Whether a partition is being reassigned. */
static inline bool meta_partition_reassigning(const struct meta_partition *p)
{
	return p->adding_count > 0 || p->removing_count > 0;
}

struct meta_topic {
	char *name;
	uint8_t id[META_UUID_SIZE];
	struct meta_partition *partitions; /* index = partition id */
	uint32_t partition_count;
	uint32_t partition_capacity;
	int64_t created_offset;
};

struct meta_config_entry {
	uint8_t resource_type; /* enum meta_resource_type */
	char *resource_name;
	char *key;
	char *value;
};

/* Sizes past which apply ignores a record (KEEL_LIMIT) and load fails. */
struct meta_image_limits {
	uint32_t max_brokers;
	uint32_t max_topics;
	uint32_t max_partitions; /* over all topics */
	uint32_t max_configs;
};

struct meta_image {
	int64_t offset;                   /* last applied batch offset; 0 = none */
	int32_t controller_id;            /* -1: no batch applied yet */
	int32_t controller_epoch;         /* -1: no batch applied yet */
	int64_t controller_timestamp_ms;  /* first batch of this controller */
	int64_t last_broker_epoch;        /* highest broker epoch handed out */
	int64_t batch_timestamp_ms;       /* timestamp of the batch being applied */
	int64_t next_producer_id;         /* first producer id no broker was given (0: none yet) */

	struct meta_broker **brokers;     /* sorted by id */
	uint32_t broker_count;
	uint32_t broker_capacity;
	struct meta_topic **topics;       /* sorted by name */
	struct meta_topic **topics_by_id; /* the same topics, sorted by id */
	uint32_t topic_count;
	uint32_t topic_capacity;
	struct meta_config_entry *configs; /* sorted by (type, name, key) */
	uint32_t config_count;
	uint32_t config_capacity;
	uint32_t partition_total;

	struct meta_image_limits limits;
};

/* Generous defaults: 10,000 brokers, 100,000 topics, 1,000,000 partitions,
 * 100,000 config entries. */
void meta_image_limits_default(struct meta_image_limits *limits);

/* An empty image (offset 0) with the given limits (NULL: defaults). */
void meta_image_init(struct meta_image *img, const struct meta_image_limits *limits);
void meta_image_close(struct meta_image *img);

/* Empties the image (back to the state after init, same limits). */
void meta_image_clear(struct meta_image *img);

/* ---- lookups (NULL when absent) ---- */

const struct meta_broker *meta_image_broker(const struct meta_image *img, int32_t id);
const struct meta_topic *meta_image_topic(const struct meta_image *img, const char *name);
const struct meta_topic *meta_image_topic_by_id(const struct meta_image *img,
						const uint8_t id[META_UUID_SIZE]);
const struct meta_partition *meta_image_partition(const struct meta_image *img,
						  const uint8_t topic_id[META_UUID_SIZE],
						  int32_t partition_id);

/* A registered broker that is neither fenced nor in controlled shutdown:
 * the only kind that may lead or join an ISR. */
bool meta_broker_active(const struct meta_broker *b);
bool meta_image_broker_active(const struct meta_image *img, int32_t id);

/* The value of a config key, or NULL when unset. */
const char *meta_image_config(const struct meta_image *img, uint8_t resource_type,
			      const char *resource_name, const char *key);

/* The configs of one resource: *first is an index into img->configs. */
uint32_t meta_image_config_range(const struct meta_image *img, uint8_t resource_type,
				 const char *resource_name, uint32_t *first);

#define META_CONFIG_UNCLEAN_ELECTION "unclean.leader.election.enable"

/* The cluster's id (22 characters of base64url, like a topic id): a config
 * of the cluster default resource (BROKER, ""), written once by the first
 * controller and never changed; /cluster/id shows it to ZooKeeper clients. */
#define META_CONFIG_CLUSTER_ID "keel.cluster.id"

/* `unclean.leader.election.enable` for a topic: the topic's own config, else
 * the cluster default (resource BROKER, name ""), else false. */
bool meta_image_unclean_election(const struct meta_image *img, const char *topic);

/* ---- what a batch changed (for the ZooKeeper view and followers) ---- */

enum meta_change_kind {
	META_CHANGE_CONTROLLER = 1,    /* controller id/epoch changed */
	META_CHANGE_BROKER = 2,        /* broker_id registered/changed/removed */
	META_CHANGE_TOPIC_CREATED = 3, /* topic_id */
	META_CHANGE_TOPIC_REMOVED = 4, /* name, topic_id, partition_count */
	META_CHANGE_PARTITION = 5,     /* topic_id, partition_id */
	META_CHANGE_CONFIG = 6,        /* resource_type, name */
};

struct meta_change {
	uint8_t kind;
	bool created;          /* PARTITION: it is new */
	bool replicas_changed; /* PARTITION: its replica list changed (or is new) */
	bool reassignment_changed; /* PARTITION: adding/removing changed */
	uint8_t resource_type;
	int32_t broker_id;
	int32_t partition_id;
	uint32_t partition_count;
	uint8_t topic_id[META_UUID_SIZE];
	const char *name; /* owned by the change set */
};

/*
 * A change set, reused across batches: init once, reset before (or after)
 * each batch, close at the end. Entries appear in apply order; an entity may
 * appear more than once. If recording ran out of memory, `overflow` is set:
 * treat it as "anything may have changed" (recompute the full view).
 */
struct meta_changes {
	struct meta_change *items;
	uint32_t count;
	uint32_t capacity;
	uint32_t max_count; /* past this, overflow (bounded memory) */
	bool overflow;
	struct keel_arena names;
};

void meta_changes_init(struct meta_changes *ch, uint32_t max_count);
void meta_changes_reset(struct meta_changes *ch);
void meta_changes_close(struct meta_changes *ch);

/* ---- apply ---- */

struct meta_apply_result {
	uint32_t applied;   /* records that changed (or confirmed) the image */
	uint32_t ignored;   /* records rejected by re-validation */
	bool batch_ignored; /* the whole batch came from an older controller */
};

/*
 * Applies one batch, committed at Raft index `offset`. Returns KEEL_INVAL
 * (image untouched) if offset <= img->offset; KEEL_NOMEM if memory ran out
 * (the record in flight is not applied; the server must stop: its image
 * would diverge); otherwise KEEL_OK, with per-record outcomes in `result`.
 * `changes` (may be NULL) gets what changed, appended; `result` may be NULL.
 */
enum keel_err meta_image_apply(struct meta_image *img, int64_t offset,
			       const struct meta_batch *batch, struct meta_changes *changes,
			       struct meta_apply_result *result);

/*
 * The two halves of meta_image_apply, for a caller that builds a batch one
 * record at a time against its own copy (the controller's working image):
 * begin_batch moves the offset and the controller fields (KEEL_STALE if the
 * header is from an older controller: then apply no records of it);
 * apply_record applies one record at the current offset, returning KEEL_OK
 * or the reason it was ignored (KEEL_STALE, KEEL_NOENT, KEEL_EXIST,
 * KEEL_INVAL, KEEL_LIMIT) with a sentence in `why` (may be NULL).
 */
enum keel_err meta_image_begin_batch(struct meta_image *img, int64_t offset,
				     const struct meta_batch_header *hdr,
				     struct meta_changes *changes);
enum keel_err meta_image_apply_record(struct meta_image *img, const struct meta_record *rec,
				      struct meta_changes *changes, struct meta_errbuf *why);

/* ---- snapshot, hash, clone, check ---- */

/* Write `size` bytes; return KEEL_OK or an error that aborts the save. */
typedef enum keel_err (*meta_write_fn)(void *ctx, const void *data, size_t size);
/* Read exactly `size` bytes; KEEL_SHORT at end of input, or another error. */
typedef enum keel_err (*meta_read_fn)(void *ctx, void *buf, size_t size);

enum keel_err meta_image_save(const struct meta_image *img, meta_write_fn write, void *ctx);

/*
 * Replaces the contents of `img` (initialized; its limits apply) with a
 * saved image. On any error the image is left empty and `eb` (may be NULL)
 * says why: KEEL_CORRUPT (bad magic, checksum or structure), KEEL_UNSUPPORTED
 * (newer format), KEEL_TOOBIG (over the limits), KEEL_SHORT, KEEL_NOMEM, or
 * the read callback's error.
 */
enum keel_err meta_image_load(struct meta_image *img, meta_read_fn read, void *ctx,
			      struct meta_errbuf *eb);

/* Convenience: save into / load from one memory buffer. save_to_memory
 * returns a malloc'd buffer the caller frees (NULL with KEEL_TOOBIG or
 * KEEL_NOMEM via *err when over max_size or out of memory). */
uint8_t *meta_image_save_to_memory(const struct meta_image *img, size_t max_size, size_t *size,
				   enum keel_err *err);
enum keel_err meta_image_load_from_memory(struct meta_image *img, const void *data, size_t size,
					  struct meta_errbuf *eb);

/* A 64-bit FNV-1a hash of the saved form: equal images hash equal on every
 * machine (the encoding is big-endian and canonical). */
uint64_t meta_image_hash(const struct meta_image *img);

/* Deep copy into `dst` (initialized, emptied first; takes src's limits). */
enum keel_err meta_image_clone(struct meta_image *dst, const struct meta_image *src);

/* Checks every invariant listed above; false (with the first broken one in
 * `eb`) if one fails. O(size of the image): for tests and debug builds. */
bool meta_image_check(const struct meta_image *img, struct meta_errbuf *eb);

#endif
