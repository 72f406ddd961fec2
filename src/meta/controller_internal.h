/*
 * controller_internal.h — helpers shared by controller.c (machinery, tick)
 * and controller_requests.c (request handlers). Not for use outside
 * src/meta. See controller.c for the emit discipline.
 */
#ifndef KEEL_META_CONTROLLER_INTERNAL_H
#define KEEL_META_CONTROLLER_INTERNAL_H

#include "meta/controller.h"

/* Starts an entry point: empties the arena and the output batch. */
void ctl_begin_call(struct meta_controller *ctl);
/* Ends one: *batch = the output batch, or NULL when it is empty. */
void ctl_finish_call(struct meta_controller *ctl, struct meta_batch **batch);

/* Records the output batch can still take. */
uint32_t ctl_room(const struct meta_controller *ctl);

/* Zeroed memory / a string copy in this call's arena (NULL: out of memory;
 * ctl_strdup(NULL) is NULL). */
void *ctl_alloc(struct meta_controller *ctl, size_t size);
const char *ctl_strdup(struct meta_controller *ctl, const char *s);

/* Emit = append to the output batch and apply to the working image. The
 * record's pointers must live until the end of the call (arena or static). */
enum keel_err ctl_emit(struct meta_controller *ctl, const struct meta_record *rec);
enum keel_err ctl_emit_broker_ref(struct meta_controller *ctl, uint16_t type, int32_t id,
				  int64_t epoch);
/* Copies the change's lists into the arena first. */
enum keel_err ctl_emit_partition_change(struct meta_controller *ctl,
					const struct meta_partition_change_record *pc);

/* Completes partition `pid`'s reassignment if it is ready (every adding
 * replica in the ISR; controller_reassign.c); with no room in the batch it
 * marks the reconcile pass pending instead. */
enum keel_err ctl_complete_reassignment(struct meta_controller *ctl, const struct meta_topic *t,
					uint32_t pid);

/* Fences a broker (FenceBroker) and marks elections pending. */
enum keel_err ctl_fence(struct meta_controller *ctl, const struct meta_broker *b);

/* The election rule over every partition (see election.h); *complete is
 * false when the batch ran out of room. */
enum keel_err ctl_reconcile(struct meta_controller *ctl, bool preferred, bool *complete);
/* Runs ctl_reconcile(false) if broker states changed since the last run. */
enum keel_err ctl_run_pending_elections(struct meta_controller *ctl);

/* Heartbeat sessions, sorted by broker id. */
struct meta_session *ctl_session(struct meta_controller *ctl, int32_t id);
enum keel_err ctl_session_set(struct meta_controller *ctl, int32_t id, int64_t epoch,
			      int64_t deadline_ms);
void ctl_session_remove(struct meta_controller *ctl, int32_t id);
/* A name in a request and its index there. */
struct ctl_name_ref {
	const char *name;
	uint32_t index;
};

/* repeated[i] is true when the name of refs[i] (by original index) occurs
 * at a smaller index too: one O(n log n) sort (refs is reordered; NULL
 * names are left out). NULL on out of memory. */
bool *ctl_mark_repeats(struct meta_controller *ctl, struct ctl_name_ref *refs, uint32_t count);

/* Where a topic's replica stripe starts (meta_place_replicas' `start`):
 * a hash of its name, so new partitions continue the topic's layout. */
uint64_t ctl_stripe_start(const char *topic);

/* One new partition's manual replicas, by Kafka's rules (KRaft's
 * validateManualPartitionAssignment): not empty, each a registered broker,
 * none twice, exactly `rf` of them, and one at least active (unfenced, not
 * shutting down) to lead. NULL when valid, else why (in the call's arena,
 * naming partition `pid`). */
const char *ctl_replicas_problem(struct meta_controller *ctl, int32_t pid, const int32_t *ids,
				 uint32_t count, uint32_t rf);

/* Emits the PartitionRecord of a new partition: the ISR is the active
 * replicas in replica order, the leader the first of them (the preferred
 * replica when it is active). At least one must be active. */
enum keel_err ctl_emit_new_partition(struct meta_controller *ctl,
				     const uint8_t topic_id[META_UUID_SIZE], int32_t pid,
				     const int32_t *replicas, uint32_t count);

/* Records the metadata offset a heartbeat of broker `id` reported. */
void ctl_session_note_offset(struct meta_controller *ctl, int32_t id, int64_t offset);

#endif
