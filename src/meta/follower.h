/*
 * follower.h — the broker side of the metadata log: a broker's own image,
 * built from the batches it fetches (FetchMetadata), and the role changes
 * that follow for one broker id.
 *
 * `keel broker` feeds every fetched batch (or a snapshot, when the server
 * has compacted past the broker's offset) to meta_follower_apply /
 * meta_follower_load_snapshot, and acts on the role changes it gets back:
 * it leads a partition exactly when its image says so, at the leader epoch
 * the image says. Since every broker applies the same committed log, two
 * brokers can never both see themselves as leader of one partition in the
 * same leader epoch.
 *
 * A role change is reported for a partition when this broker's role in it
 * (leader, follower, none) changes, or — while leader or follower — when
 * the leader epoch changes (a new epoch means a new leadership term even if
 * the same broker leads again). Deleting a topic reports "none" for each of
 * its partitions this broker held.
 *
 * Memory: the follower owns its image and role table. The change arrays
 * and the strings they point to live until the next call on the follower.
 */
#ifndef KEEL_META_FOLLOWER_H
#define KEEL_META_FOLLOWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/err.h"
#include "meta/fmt.h"
#include "meta/image.h"
#include "meta/proto.h"

enum meta_role {
	META_ROLE_NONE = 0,
	META_ROLE_FOLLOWER = 1,
	META_ROLE_LEADER = 2,
};

struct meta_role_change {
	const char *topic;
	uint8_t topic_id[META_UUID_SIZE];
	int32_t partition_id;
	uint8_t old_role; /* enum meta_role */
	uint8_t new_role;
	int32_t leader;          /* the partition's leader now (-1: none) */
	int32_t leader_epoch;    /* now (for NONE: the last one this broker saw) */
	int32_t partition_epoch; /* now (for NONE: the last one seen) */
};

struct meta_role_entry; /* (topic id, partition) -> role, leader, epochs */

struct meta_follower {
	int32_t broker_id;
	struct meta_image image;
	struct meta_changes changes;
	struct keel_arena arena; /* this call's decoded batch and outputs */
	struct meta_role_entry *roles; /* sorted by (topic id, partition) */
	uint32_t role_count;
	uint32_t role_capacity;
	struct meta_role_change *out;
	uint32_t out_count;
	uint32_t out_capacity;
};

void meta_follower_init(struct meta_follower *f, int32_t broker_id,
			const struct meta_image_limits *limits);
void meta_follower_close(struct meta_follower *f);

/*
 * Applies one fetched batch (offset + encoded bytes). Returns KEEL_OK with
 * the role changes in *changes / *count (possibly none); a batch at or
 * below the current offset is skipped (already applied: KEEL_OK, no
 * changes); decode errors return the decoder's code with `eb` (may be
 * NULL) saying why, and leave the image unchanged. KEEL_NOMEM after the
 * decode is different: the batch may be applied in part (the records before
 * the one in flight, meta_image_apply) or in whole, and the role changes
 * reported are incomplete; the follower is then out of step with the log.
 */
enum keel_err meta_follower_apply(struct meta_follower *f, int64_t offset, const void *data,
				  size_t size, const struct meta_role_change **changes,
				  uint32_t *count, struct meta_errbuf *eb);

/* Replaces the image with a snapshot (image.h format) and reports every
 * role that differs from before. A snapshot that does not load leaves the
 * previous image in place; a failure while listing the role changes
 * (KEEL_NOMEM) comes after the swap: the new image stays and the changes
 * reported are incomplete. */
enum keel_err meta_follower_load_snapshot(struct meta_follower *f, const void *data, size_t size,
					  const struct meta_role_change **changes, uint32_t *count,
					  struct meta_errbuf *eb);

/* The last applied offset: the broker's "current metadata offset" for
 * heartbeats; fetch from here + 1. */
static inline int64_t meta_follower_offset(const struct meta_follower *f)
{
	return f->image.offset;
}

/* The role this broker holds in a partition right now. */
enum meta_role meta_follower_role(const struct meta_follower *f, const uint8_t topic_id[16],
				  int32_t partition_id);

/* Is `replica` caught up with this leader's log of the partition? */
typedef bool (*meta_caught_up_fn)(void *ctx, const uint8_t topic_id[16], int32_t partition_id,
				  int32_t replica);

/*
 * The AlterPartition request this broker should send as partition leader:
 * for every partition it leads (in its image) whose ISR lacks an ACTIVE
 * replica that `caught_up` accepts, or that is RECOVERING, the new ISR (the
 * current one plus those replicas, in replica order) with state RECOVERED,
 * at the leader and partition epochs of the image. `caught_up` NULL counts
 * every active replica as caught up — what a broker without a data plane
 * does. Returns false (req untouched) when there is nothing to ask. The
 * request's arrays live until the next call on the follower.
 */
bool meta_follower_isr_request(struct meta_follower *f, int64_t broker_epoch,
			       meta_caught_up_fn caught_up, void *ctx,
			       struct meta_alter_partition_request *req);

/* "leader of sensor-data-0 at epoch 3",
 * "follower of sensor-data-0 at epoch 3 (leader: Broker-2)" (or "(leader: none)"),
 * "no longer a replica of sensor-data-0". */
void meta_format_role_change(struct meta_fmt *f, const struct meta_role_change *c);

#endif
