/*
 * zkview.h — the metadata image as the znodes Kafka kept in ZooKeeper mode,
 * so any ZooKeeper client can read (and watch) the cluster state.
 *
 *   /controller                           {"version":2,"brokerid":-1,"timestamp":"ms",
 *                                          "kraftControllerEpoch":E,"keel_controller_id":N}
 *                                         (N is a server, not a broker: see zkview.c)
 *   /controller_epoch                     "N"
 *   /brokers/ids/N                        registration JSON (version 5), unfenced brokers only
 *   /brokers/topics/T                     {"version":3,"partitions":{"0":[1,2],...},
 *                                          "adding_replicas":{},"removing_replicas":{},
 *                                          "topic_id":"<base64url>"}
 *   /brokers/topics/T/partitions/P/state  {"controller_epoch":N,"leader":L,"version":1,
 *                                          "leader_epoch":E,"isr":[...]} (version 2 with
 *                                          "leader_recovery_state":1 while RECOVERING)
 *   /config/topics/T                      {"version":1,"config":{"k":"v",...}}
 *   /config/brokers/<default> or /N       the same, for cluster/broker configs
 *   /cluster/id                           {"version":"1","id":"<base64url>"} (keel.cluster.id)
 *   /admin/reassign_partitions            {"version":1,"partitions":[{"topic":T,
 *                                          "partition":P,"replicas":[target]}]} while
 *                                         reassignments are ongoing (deleted after)
 * plus the empty parents /admin (read-only: Kafka 2.x admin writes under it
 * are refused with NoAuth), /brokers, /brokers/ids, /brokers/topics,
 * /brokers/topics/T/partitions, .../partitions/P, /config, /config/topics,
 * /config/brokers.
 *
 * The server applies the ops to its ZooKeeper tree in the SAME apply as the
 * metadata batch (so zxid = the batch's index, and watches fire in log
 * order), as persistent nodes that ordinary clients may not write:
 *   PUT          create the node (its parent exists by then) or, if it
 *                exists, set its data (skip the set when the data is equal,
 *                so watches fire only on real changes);
 *   DELETE       delete the node if it exists (its children were deleted by
 *                earlier ops of the list);
 *   DELETE_TREE  delete the node and everything under it, if it exists.
 * Everything is deterministic from the image, so every server builds the
 * same tree. The fixed parents (/brokers, /brokers/ids, /brokers/topics,
 * /config, /config/topics, /config/brokers) are PUT with every controller
 * change, which is part of the first batch any controller writes, so a
 * tree built from deltas alone has them before anything goes under them.
 *
 * Memory: the op list owns its paths and data (an arena); they live until
 * meta_zk_ops_reset/close.
 */
#ifndef KEEL_META_ZKVIEW_H
#define KEEL_META_ZKVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/err.h"
#include "meta/image.h"

enum meta_zk_op_type {
	META_ZK_PUT = 1,
	META_ZK_DELETE = 2,
	META_ZK_DELETE_TREE = 3,
};

struct meta_zk_op {
	uint8_t type; /* enum meta_zk_op_type */
	const char *path;
	const uint8_t *data; /* PUT only; may be empty (size 0) */
	size_t size;
};

struct meta_zk_ops {
	struct meta_zk_op *items;
	uint32_t count;
	uint32_t capacity;
	struct keel_arena arena;
};

void meta_zk_ops_init(struct meta_zk_ops *ops);
void meta_zk_ops_reset(struct meta_zk_ops *ops);
void meta_zk_ops_close(struct meta_zk_ops *ops);

/* Every znode of the image, parents first (PUTs only): for a fresh tree,
 * e.g. at first start. */
enum keel_err meta_zk_view_full(const struct meta_image *img, struct meta_zk_ops *ops);

/*
 * The ops that bring the tree from the state before a batch to the state
 * after it, given the image after the batch and the batch's change set
 * (image.h). If the change set overflowed, the ops drop and rebuild the
 * whole view (DELETE_TREE of /brokers/ids, /brokers/topics, /config/topics,
 * /config/brokers, then the full view).
 */
enum keel_err meta_zk_view_changes(const struct meta_image *img, const struct meta_changes *changes,
				   struct meta_zk_ops *ops);

#endif
