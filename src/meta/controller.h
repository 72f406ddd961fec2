/*
 * controller.h — the cluster controller: turns broker requests and the
 * passage of time into metadata record batches to propose.
 *
 * Runs on the Raft leader only. The server creates it when this server
 * becomes leader AND has applied every entry of earlier terms (KRaft's rule:
 * the new controller starts from a complete image), and closes it when
 * leadership is lost. All decisions are deterministic functions of the
 * image, the requests and the `now_ms` values passed in; the controller
 * reads no clock and keeps no globals.
 *
 *   state:   INIT --(first call)--> ACTIVE --(close)--> gone
 *
 * Working image. The controller keeps its own copy of the committed image
 * and applies every record it emits to it at once, so the next decision
 * already sees the ones in flight (a broker fenced a moment ago is not
 * fenced again; a topic being created is a duplicate name). Since the
 * controller is the only writer of metadata records, the committed image
 * becomes equal to the working image once every proposed batch is applied.
 * If a proposal fails (propose error, or meta_image_apply reports ignored
 * records for one of this controller's batches), the server closes the
 * controller and builds a new one once its applied index has caught up.
 *
 * Soft state is only the heartbeat deadlines. A new controller gives every
 * registered broker a fresh full session timeout; everything else comes
 * from the image, so a decision committed by the old controller is never
 * made again and one that was lost is made anew.
 *
 * Outputs. Every entry point returns (via *batch) either NULL — nothing to
 * propose — or a batch to propose as ONE Raft entry (the server stamps
 * batch->hdr.timestamp_ms with its wall clock, encodes it with
 * meta_batch_encode and prefixes its tag byte). The batch, its records and
 * the arrays/strings of the response live until the next call on the
 * controller: encode both before calling again.
 *
 * When to send a response: only once EVERY batch this controller has
 * proposed so far — this call's, if any, and all earlier ones — is
 * applied on this server (KRaft completes every controller event that
 * way). A response describes the working image, which may include
 * decisions still in flight; e.g. a heartbeat may answer should_shut_down
 * with no batch of its own because the batch moving the broker's
 * leaderships away was proposed by the previous heartbeat and is not
 * committed yet. So: remember the Raft index of the last proposal; hold
 * each response until applied index >= that index. If leadership is lost
 * first, answer NOT_CONTROLLER instead.
 *
 * Return values: KEEL_OK; KEEL_NOMEM (the controller is then unusable:
 * close it and build a new one). Protocol-level errors travel in the
 * responses (enum meta_error).
 */
#ifndef KEEL_META_CONTROLLER_H
#define KEEL_META_CONTROLLER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/rng.h"
#include "meta/image.h"
#include "meta/proto.h"
#include "meta/record.h"

struct meta_controller_config {
	int64_t session_timeout_ms;         /* fence after this long without a heartbeat */
	int64_t rebalance_interval_ms;      /* preferred-leader pass; 0 = never */
	int64_t noop_interval_ms;           /* NoOp when idle this long; 0 = never */
	int32_t default_partitions;         /* CreateTopics with -1 */
	int16_t default_replication_factor; /* CreateTopics with -1 */
	uint32_t max_partitions_per_topic;
	uint32_t max_records_per_batch;     /* work past this waits for the next tick */
};

/* Kafka's defaults: 9000 ms session, 300 s rebalance, no NoOps, 1 partition,
 * replication factor 1; and 10,000 partitions per topic, 20,000 records per
 * batch (about 1 MB encoded: one Raft entry). */
void meta_controller_config_default(struct meta_controller_config *cfg);

struct meta_session {
	int32_t broker_id;
	int64_t broker_epoch;
	int64_t deadline_ms;
	int64_t metadata_offset; /* last offset the broker reported applying; -1: none yet */
};

struct meta_controller {
	struct meta_controller_config cfg;
	int32_t controller_id;
	int32_t controller_epoch;
	const struct meta_image *committed; /* the server's; read for caught-up checks */
	struct keel_rng *rng;               /* topic ids */

	struct meta_image image; /* working image: committed + in flight */
	int64_t working_offset;  /* synthetic offsets for the working image */

	struct keel_arena arena; /* this call's batch and response memory */
	struct meta_batch out;
	uint32_t out_capacity;
	bool batch_open;

	struct meta_session *sessions; /* sorted by broker id */
	uint32_t session_count;
	uint32_t session_capacity;

	bool announced;         /* the first batch of this controller went out */
	bool reconcile_pending; /* broker states changed: re-run elections */
	bool rebalance_pending; /* a preferred-leader pass is due */
	int64_t next_rebalance_ms;
	int64_t next_noop_ms;
	/* work counter (not state): comparisons made by request validation's
	 * sorts, so that tests can bound the work of a hostile request */
	uint64_t sort_compares;
};

/*
 * Builds a controller from the committed image (copied). `committed` must
 * stay valid, and be the image the server applies to, for the controller's
 * lifetime. controller_id is this server's id, controller_epoch its Raft
 * term; `rng` (seeded by the caller) supplies topic ids. KEEL_NOMEM on
 * failure (nothing to close then).
 */
enum keel_err meta_controller_init(struct meta_controller *ctl,
				   const struct meta_controller_config *cfg, int32_t controller_id,
				   int32_t controller_epoch, const struct meta_image *committed,
				   struct keel_rng *rng, int64_t now_ms);
void meta_controller_close(struct meta_controller *ctl);

/*
 * Timers: the first call after init emits a NoOp announcing the new
 * controller (so /controller and every follower learn of it); then brokers
 * whose session expired are fenced (and leave ISRs and leaderships),
 * pending elections run, the periodic preferred-leader pass and NoOps.
 * Call it at least every few hundred ms, or at meta_controller_next_tick_ms.
 */
enum keel_err meta_controller_tick(struct meta_controller *ctl, int64_t now_ms,
				   struct meta_batch **batch);

/* The latest time by which tick should run again (now_ms when work is
 * pending). */
int64_t meta_controller_next_tick_ms(const struct meta_controller *ctl, int64_t now_ms);

enum keel_err meta_controller_register_broker(struct meta_controller *ctl, int64_t now_ms,
					      const struct meta_broker_registration_request *req,
					      struct meta_broker_registration_response *resp,
					      struct meta_batch **batch);

enum keel_err meta_controller_heartbeat(struct meta_controller *ctl, int64_t now_ms,
					const struct meta_broker_heartbeat_request *req,
					struct meta_broker_heartbeat_response *resp,
					struct meta_batch **batch);

enum keel_err meta_controller_unregister_broker(struct meta_controller *ctl, int64_t now_ms,
						const struct meta_unregister_broker_request *req,
						struct meta_unregister_broker_response *resp,
						struct meta_batch **batch);

enum keel_err meta_controller_create_topics(struct meta_controller *ctl, int64_t now_ms,
					    const struct meta_create_topics_request *req,
					    struct meta_create_topics_response *resp,
					    struct meta_batch **batch);

enum keel_err meta_controller_delete_topics(struct meta_controller *ctl, int64_t now_ms,
					    const struct meta_delete_topics_request *req,
					    struct meta_delete_topics_response *resp,
					    struct meta_batch **batch);

/* CreatePartitions: grows topics to `count` partitions, new partitions
 * placed to continue each topic's stripe (or as assigned). */
enum keel_err meta_controller_create_partitions(struct meta_controller *ctl, int64_t now_ms,
						const struct meta_create_partitions_request *req,
						struct meta_create_partitions_response *resp,
						struct meta_batch **batch);

/* ElectLeaders: preferred (replicas[0] takes over when eligible and in the
 * ISR) or unclean (an offline partition takes its first eligible replica,
 * RECOVERING). Per-partition results as Kafka gives them. */
enum keel_err meta_controller_elect_leaders(struct meta_controller *ctl, int64_t now_ms,
					    const struct meta_elect_leaders_request *req,
					    struct meta_elect_leaders_response *resp,
					    struct meta_batch **batch);

/* AlterPartitionReassignments (KIP-455): start (the replicas become target
 * + removing, with adding/removing set), replace, or cancel (revert to the
 * replicas before the start) a reassignment per partition; it completes
 * when every adding replica is in the ISR (controller_reassign.c). */
enum keel_err meta_controller_alter_reassignments(struct meta_controller *ctl, int64_t now_ms,
						  const struct meta_alter_reassignments_request *req,
						  struct meta_alter_reassignments_response *resp,
						  struct meta_batch **batch);

/* ListPartitionReassignments: the ongoing ones (of the named partitions, or
 * of all); read-only. */
enum keel_err meta_controller_list_reassignments(struct meta_controller *ctl, int64_t now_ms,
						 const struct meta_list_reassignments_request *req,
						 struct meta_list_reassignments_response *resp,
						 struct meta_batch **batch);

/* The metadata offset broker `id` last reported in a heartbeat to this
 * controller, or -1 (no session, or no heartbeat yet). */
int64_t meta_controller_broker_offset(const struct meta_controller *ctl, int32_t id);

/* Whether `key` is a config name the controller accepts (Kafka's topic
 * configs, a few broker defaults, keel's own); others get INVALID_CONFIG. */
bool meta_config_key_known(const char *key);

enum keel_err meta_controller_alter_configs(struct meta_controller *ctl, int64_t now_ms,
					    const struct meta_alter_configs_request *req,
					    struct meta_alter_configs_response *resp,
					    struct meta_batch **batch);

enum keel_err meta_controller_alter_partition(struct meta_controller *ctl, int64_t now_ms,
					      const struct meta_alter_partition_request *req,
					      struct meta_alter_partition_response *resp,
					      struct meta_batch **batch);

/* AllocateProducerIds: the next META_PRODUCER_ID_BLOCK producer ids for a
 * registered broker (by id and epoch), as one ProducerIds record. The
 * server answers only once the record is committed. */
enum keel_err meta_controller_allocate_producer_ids(
	struct meta_controller *ctl, int64_t now_ms, const struct meta_allocate_producer_ids_request *req,
	struct meta_allocate_producer_ids_response *resp, struct meta_batch **batch);

/* The working image (committed + in-flight decisions), read-only. */
static inline const struct meta_image *meta_controller_image(const struct meta_controller *ctl)
{
	return &ctl->image;
}

#endif
