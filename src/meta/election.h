/*
 * election.h — the controller's two placement decisions, as pure functions
 * of the image: where a new topic's replicas go, and what a partition's
 * leader and ISR must become after brokers change state.
 *
 * Both are deterministic: the same image and arguments give the same
 * answer, which is what lets a new controller, built from the image alone,
 * continue where the old one stopped without deciding anything twice.
 *
 * The election rule (KRaft's, see docs/controller.md):
 *  - eligible = registered, not fenced, not in controlled shutdown;
 *  - the ISR loses every ineligible member, EXCEPT that it never becomes
 *    empty: when all members are ineligible it keeps one (the current leader
 *    if it is a member, else the first member), which remembers who holds
 *    the latest data;
 *  - a leader that is eligible and in the new ISR stays leader — unless
 *    `preferred` is set and replicas[0] is eligible and in the ISR, in which
 *    case replicas[0] takes over (preferred-leader rebalance);
 *  - otherwise the new leader is the first replica (in replica order) that
 *    is eligible and in the new ISR;
 *  - if there is none: with unclean election allowed, the first eligible
 *    replica becomes leader with ISR = {it} and leader recovery state
 *    RECOVERING; without, the partition goes offline (leader -1);
 *  - any change bumps the partition epoch; a leader change (including to
 *    or from -1) bumps the leader epoch.
 */
#ifndef KEEL_META_ELECTION_H
#define KEEL_META_ELECTION_H

#include <stdbool.h>
#include <stdint.h>

#include "base/alloc.h"
#include "meta/image.h"
#include "meta/record.h"

/* Storage for the lists a computed change points to. */
struct meta_partition_target {
	int32_t isr[META_MAX_REPLICAS];
	uint32_t isr_count;
};

/*
 * Computes the PartitionChange the election rule demands for partition
 * `partition_id` of `topic`. Returns false when the partition is already
 * as it must be; else true with `out` filled (its isr points into
 * `target`, which must outlive `out`'s use).
 */
bool meta_partition_elect(const struct meta_image *img, const struct meta_topic *topic,
			  uint32_t partition_id, bool preferred, bool unclean,
			  struct meta_partition_target *target,
			  struct meta_partition_change_record *out);

/*
 * Rack-aware striped placement of `partition_count` x `replication_factor`
 * replicas over the ACTIVE brokers of `img` (eligible as above). Writes
 * row-major into `out` (partition p's replicas at out[p * rf ...]; the first
 * is the preferred leader). `start` rotates where the stripe begins (the
 * controller derives it from the topic name). Returns false, writing
 * nothing, when fewer active brokers than replication_factor exist (or
 * memory for the broker list ran out: then *nomem is set).
 *
 * The brokers are ordered by alternating racks (racks sorted by name, a
 * broker without a rack forming its own group; inside a rack, by id); the
 * first replica of partition p is the (start + p)-th in that order, so
 * leaders spread evenly; followers are taken after it, preferring brokers
 * of racks the partition does not use yet, with a shift that grows every
 * full round so that replica pairs vary.
 */
bool meta_place_replicas(const struct meta_image *img, uint32_t partition_count,
			 uint32_t replication_factor, uint64_t start, int32_t *out, bool *nomem);

/* Number of active brokers (registered, unfenced, not shutting down). */
uint32_t meta_active_broker_count(const struct meta_image *img);

#endif
