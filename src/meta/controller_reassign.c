/*
 * controller_reassign.c — partition reassignment (Kafka's
 * AlterPartitionReassignments / ListPartitionReassignments, KIP-455, as
 * KRaft's controller runs it; docs/controller.md "Reassignment").
 *
 * A reassignment of a partition from replicas C to target T is two
 * PartitionChanges:
 *
 *   start     replicas = T then (C - T), adding = T - C, removing = C - T
 *             (one record; the leader and ISR are untouched)
 *   complete  once every adding replica is in the ISR: replicas = T,
 *             ISR = ISR ∩ T, adding = removing = {}; if the leader is being
 *             removed, the first replica of T that is in the new ISR and
 *             eligible leads (leader epoch + 1)
 *
 * Completion is tried right after the start (a target that only drops
 * replicas, or reorders them, completes at once), after every AlterPartition
 * that changes the ISR, and whenever brokers change state (the same pass as
 * the elections, ctl_reconcile, which a new controller also runs first: the
 * reassignment state lives only in the image, so a failover continues it).
 * It waits while it would leave the ISR empty or, with the leader removed,
 * no target replica in the ISR is eligible to lead.
 *
 *   none --start--> ongoing --complete--> none
 *                     |  ^--start again (the new target replaces it:
 *                     |     C is then the current replicas, adding ones included)
 *                     +--cancel--> none: replicas = C - adding, ISR - adding
 *
 * Cancel reverts to the replicas before the start (the current ones minus
 * those being added); it is refused when the ISR would be left empty (Kafka
 * allows that only with unclean election; keel refuses it always).
 */
#include <string.h>

#include "base/assert.h"
#include "meta/controller.h"
#include "meta/controller_internal.h"

/* Lists of a computed change (the change points into them). */
struct reassign_lists {
	int32_t replicas[2 * META_MAX_REPLICAS];
	int32_t isr[META_MAX_REPLICAS];
	int32_t adding[META_MAX_REPLICAS];
	int32_t removing[META_MAX_REPLICAS];
};

static bool same_list(const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb)
{
	return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof(int32_t)) == 0);
}

/* out = a - b, in a's order; returns the count. */
static uint32_t list_minus(const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb,
			   int32_t *out)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < na; i++) {
		if (!meta_list_contains(b, nb, a[i])) {
			out[n++] = a[i];
		}
	}
	return n;
}

/* out = a ∩ b, in a's order. */
static uint32_t list_and(const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb,
			 int32_t *out)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < na; i++) {
		if (meta_list_contains(b, nb, a[i])) {
			out[n++] = a[i];
		}
	}
	return n;
}

/* The first of `order` that is in `isr` and eligible to lead, or -1. */
static int32_t first_leader(const struct meta_image *img, const int32_t *order, uint32_t n,
			    const int32_t *isr, uint32_t ni)
{
	for (uint32_t i = 0; i < n; i++) {
		if (meta_list_contains(isr, ni, order[i]) &&
		    meta_image_broker_active(img, order[i])) {
			return order[i];
		}
	}
	return META_NO_LEADER;
}

static void change_init(struct meta_partition_change_record *pc, const struct meta_topic *t,
			uint32_t pid)
{
	memset(pc, 0, sizeof(*pc));
	memcpy(pc->topic_id, t->id, META_UUID_SIZE);
	pc->partition_id = (int32_t)pid;
	pc->partition_epoch = t->partitions[pid].partition_epoch + 1;
	pc->leader = t->partitions[pid].leader;
}

/* Sets the fields that differ from `p`: replicas, ISR, leader (leader epoch
 * + 1), and always the (cleared or new) reassignment lists. */
static void change_fill(struct meta_partition_change_record *pc, const struct meta_partition *p,
			const int32_t *replicas, uint32_t nr, const int32_t *isr, uint32_t ni,
			int32_t leader)
{
	if (!same_list(replicas, nr, p->replicas, p->replica_count)) {
		pc->fields |= META_PC_REPLICAS;
		pc->replicas = replicas;
		pc->replica_count = nr;
	}
	if (!same_list(isr, ni, p->isr, p->isr_count)) {
		pc->fields |= META_PC_ISR;
		pc->isr = isr;
		pc->isr_count = ni;
	}
	if (leader != p->leader) {
		pc->fields |= META_PC_LEADER;
		pc->leader = leader;
		pc->leader_epoch = p->leader_epoch + 1;
	}
	pc->fields |= META_PC_REASSIGNMENT;
}

/* The change completing partition `pid`'s reassignment, or false when it
 * is not ongoing or not ready (see the top of the file). */
static bool completion(const struct meta_image *img, const struct meta_topic *t, uint32_t pid,
		       struct reassign_lists *l, struct meta_partition_change_record *pc)
{
	const struct meta_partition *p = &t->partitions[pid];
	if (!meta_partition_reassigning(p)) {
		return false;
	}
	for (uint32_t i = 0; i < p->adding_count; i++) {
		if (!meta_list_contains(p->isr, p->isr_count, p->adding[i])) {
			return false;
		}
	}
	uint32_t nr = list_minus(p->replicas, p->replica_count, p->removing, p->removing_count,
				 l->replicas);
	uint32_t ni = list_and(p->isr, p->isr_count, l->replicas, nr, l->isr);
	if (nr == 0 || ni == 0) {
		return false;
	}
	int32_t leader = p->leader;
	if (leader != META_NO_LEADER && !meta_list_contains(l->replicas, nr, leader)) {
		leader = first_leader(img, l->replicas, nr, l->isr, ni);
		if (leader == META_NO_LEADER) {
			return false; /* wait for a target replica that can lead */
		}
	}
	change_init(pc, t, pid);
	change_fill(pc, p, l->replicas, nr, l->isr, ni, leader);
	return true;
}

enum keel_err ctl_complete_reassignment(struct meta_controller *ctl, const struct meta_topic *t,
					uint32_t pid)
{
	struct reassign_lists l;
	struct meta_partition_change_record pc;
	if (!completion(&ctl->image, t, pid, &l, &pc)) {
		return KEEL_OK;
	}
	if (ctl_room(ctl) == 0) {
		ctl->reconcile_pending = true; /* the next tick's pass completes it */
		return KEEL_OK;
	}
	return ctl_emit_partition_change(ctl, &pc);
}

/* ---- AlterPartitionReassignments ---- */

/* Why `target` cannot be a replica list (NULL when it can). */
static const char *target_problem(const struct meta_image *img,
				  const struct meta_reassign_partition *rp)
{
	if (rp->replica_count == 0) {
		return "the target replica list is empty";
	}
	if (rp->replica_count > META_MAX_REPLICAS) {
		return "the target replica list is longer than the most replicas a partition has";
	}
	for (uint32_t i = 0; i < rp->replica_count; i++) {
		if (rp->replicas[i] < 0) {
			return "the target replica list holds a negative broker id";
		}
		if (meta_list_contains(rp->replicas, i, rp->replicas[i])) {
			return "the target replica list names a broker more than once";
		}
		if (meta_image_broker(img, rp->replicas[i]) == NULL) {
			return "the target replica list names a broker that is not registered";
		}
	}
	return NULL;
}

static enum keel_err start(struct meta_controller *ctl, const struct meta_topic *t, uint32_t pid,
			   const struct meta_reassign_partition *rp)
{
	const struct meta_partition *p = &t->partitions[pid];
	struct reassign_lists l;
	uint32_t na = list_minus(rp->replicas, rp->replica_count, p->replicas, p->replica_count,
				 l.adding);
	uint32_t nrm = list_minus(p->replicas, p->replica_count, rp->replicas, rp->replica_count,
				  l.removing);
	memcpy(l.replicas, rp->replicas, (size_t)rp->replica_count * sizeof(int32_t));
	memcpy(l.replicas + rp->replica_count, l.removing, (size_t)nrm * sizeof(int32_t));
	uint32_t nr = rp->replica_count + nrm;
	KEEL_ASSERT(nr <= META_MAX_REPLICAS); /* checked by the caller */
	bool same = same_list(l.replicas, nr, p->replicas, p->replica_count) &&
		    same_list(l.adding, na, p->adding, p->adding_count) &&
		    same_list(l.removing, nrm, p->removing, p->removing_count);
	if (!same) {
		struct meta_partition_change_record pc;
		change_init(&pc, t, pid);
		change_fill(&pc, p, l.replicas, nr, p->isr, p->isr_count, p->leader);
		pc.adding = l.adding;
		pc.adding_count = na;
		pc.removing = l.removing;
		pc.removing_count = nrm;
		enum keel_err err = ctl_emit_partition_change(ctl, &pc);
		if (err != KEEL_OK) {
			return err;
		}
	}
	return ctl_complete_reassignment(ctl, t, pid);
}

static enum keel_err cancel(struct meta_controller *ctl, const struct meta_topic *t, uint32_t pid)
{
	const struct meta_partition *p = &t->partitions[pid];
	struct reassign_lists l;
	uint32_t nr = list_minus(p->replicas, p->replica_count, p->adding, p->adding_count,
				 l.replicas);
	uint32_t ni = list_minus(p->isr, p->isr_count, p->adding, p->adding_count, l.isr);
	KEEL_ASSERT(nr > 0 && ni > 0); /* checked by the caller */
	int32_t leader = p->leader;
	if (leader != META_NO_LEADER && !meta_list_contains(l.isr, ni, leader)) {
		leader = first_leader(&ctl->image, l.replicas, nr, l.isr, ni);
	}
	struct meta_partition_change_record pc;
	change_init(&pc, t, pid);
	change_fill(&pc, p, l.replicas, nr, l.isr, ni, leader);
	return ctl_emit_partition_change(ctl, &pc);
}

/* Validates and runs one item; the error (if any) goes in `res`. */
static enum keel_err reassign_one(struct meta_controller *ctl, const struct meta_topic *t,
				  const struct meta_reassign_partition *rp,
				  struct meta_elect_partition_result *res)
{
	if (t == NULL || rp->partition_id < 0 || (uint32_t)rp->partition_id >= t->partition_count) {
		res->error = META_ERR_UNKNOWN_TOPIC_OR_PARTITION;
		res->error_message = t == NULL ? "no such topic" : "no such partition";
		return KEEL_OK;
	}
	uint32_t pid = (uint32_t)rp->partition_id;
	const struct meta_partition *p = &t->partitions[pid];
	if (ctl_room(ctl) < 2) {
		res->error = META_ERR_POLICY_VIOLATION;
		res->error_message = "too many reassignments in one request; retry the rest";
		return KEEL_OK;
	}
	if (rp->cancel) {
		if (!meta_partition_reassigning(p)) {
			res->error = META_ERR_NO_REASSIGNMENT_IN_PROGRESS;
			res->error_message = "the partition is not being reassigned";
			return KEEL_OK;
		}
		bool isr_left = false;
		for (uint32_t i = 0; i < p->isr_count; i++) {
			isr_left |= !meta_list_contains(p->adding, p->adding_count, p->isr[i]);
		}
		if (!isr_left) {
			res->error = META_ERR_INVALID_REPLICA_ASSIGNMENT;
			res->error_message = "cancelling would leave no in-sync replica: only "
					     "replicas being added are in sync";
			return KEEL_OK;
		}
		return cancel(ctl, t, pid);
	}
	res->error_message = target_problem(&ctl->image, rp);
	if (res->error_message == NULL) {
		uint32_t extra = 0;
		for (uint32_t i = 0; i < p->replica_count; i++) {
			extra += meta_list_contains(rp->replicas, rp->replica_count, p->replicas[i])
					 ? 0
					 : 1;
		}
		if (rp->replica_count + extra > META_MAX_REPLICAS) {
			res->error_message = "the target and the current replicas together are "
					     "more than a partition can have";
		}
	}
	if (res->error_message != NULL) {
		res->error = META_ERR_INVALID_REPLICA_ASSIGNMENT;
		return KEEL_OK;
	}
	return start(ctl, t, pid, rp);
}

static uint32_t count_items(const struct meta_alter_reassignments_request *req)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < req->topic_count; i++) {
		n += req->topics[i].partition_count;
	}
	return n;
}

enum keel_err meta_controller_alter_reassignments(struct meta_controller *ctl, int64_t now_ms,
						  const struct meta_alter_reassignments_request *req,
						  struct meta_alter_reassignments_response *resp,
						  struct meta_batch **batch)
{
	(void)now_ms;
	ctl_begin_call(ctl);
	memset(resp, 0, sizeof(*resp));
	uint32_t n = count_items(req);
	struct meta_elect_partition_result *results = ctl_alloc(ctl, ((size_t)n + 1) * sizeof(*results));
	if (results == NULL) {
		ctl_finish_call(ctl, batch);
		return KEEL_NOMEM;
	}
	enum keel_err err = KEEL_OK;
	uint32_t k = 0;
	for (uint32_t i = 0; err == KEEL_OK && i < req->topic_count; i++) {
		const struct meta_reassign_topic *rt = &req->topics[i];
		for (uint32_t j = 0; err == KEEL_OK && j < rt->partition_count; j++) {
			struct meta_elect_partition_result *res = &results[k++];
			res->topic = rt->name;
			res->partition_id = rt->partitions[j].partition_id;
			/* Looked up per item: nothing is held across an emit. */
			const struct meta_topic *t = meta_image_topic(&ctl->image, rt->name);
			err = reassign_one(ctl, t, &rt->partitions[j], res);
		}
	}
	resp->results = results;
	resp->result_count = err == KEEL_OK ? k : 0;
	ctl_finish_call(ctl, batch);
	return err;
}

/* ---- ListPartitionReassignments ---- */

/* Appends partition `pid` of `t` to the list when it is being reassigned. */
static void list_one(const struct meta_topic *t, uint32_t pid, struct meta_ongoing_reassignment *out,
		     uint32_t *count)
{
	const struct meta_partition *p = &t->partitions[pid];
	if (!meta_partition_reassigning(p)) {
		return;
	}
	out[(*count)++] = (struct meta_ongoing_reassignment){
		.topic = t->name,
		.partition_id = (int32_t)pid,
		.replicas = p->replicas,
		.replica_count = p->replica_count,
		.adding = p->adding,
		.adding_count = p->adding_count,
		.removing = p->removing,
		.removing_count = p->removing_count,
	};
}

enum keel_err meta_controller_list_reassignments(struct meta_controller *ctl, int64_t now_ms,
						 const struct meta_list_reassignments_request *req,
						 struct meta_list_reassignments_response *resp,
						 struct meta_batch **batch)
{
	(void)now_ms;
	ctl_begin_call(ctl);
	memset(resp, 0, sizeof(*resp));
	const struct meta_image *img = &ctl->image;
	/* At most one entry per partition asked about (or per partition). */
	uint64_t cap = 0;
	if (req->topic_count == 0) {
		cap = img->partition_total;
	}
	for (uint32_t i = 0; i < req->topic_count; i++) {
		const struct meta_topic *t = meta_image_topic(img, req->topics[i].name);
		cap += req->topics[i].partition_count > 0 ? req->topics[i].partition_count
			: t != NULL				    ? t->partition_count
								    : 0;
	}
	struct meta_ongoing_reassignment *out = ctl_alloc(ctl, ((size_t)cap + 1) * sizeof(*out));
	if (out == NULL) {
		ctl_finish_call(ctl, batch);
		return KEEL_NOMEM;
	}
	uint32_t n = 0;
	if (req->topic_count == 0) {
		for (uint32_t t = 0; t < img->topic_count; t++) {
			for (uint32_t p = 0; p < img->topics[t]->partition_count; p++) {
				list_one(img->topics[t], p, out, &n);
			}
		}
	}
	for (uint32_t i = 0; i < req->topic_count; i++) {
		/* Unknown topics and partitions are left out, as Kafka does. */
		const struct meta_elect_topic *tp = &req->topics[i];
		const struct meta_topic *t = meta_image_topic(img, tp->name);
		for (uint32_t j = 0; t != NULL && j < tp->partition_count; j++) {
			if (tp->partitions[j] >= 0 && (uint32_t)tp->partitions[j] < t->partition_count) {
				list_one(t, (uint32_t)tp->partitions[j], out, &n);
			}
		}
		for (uint32_t p = 0; t != NULL && tp->partition_count == 0 && p < t->partition_count;
		     p++) {
			list_one(t, p, out, &n);
		}
	}
	resp->reassignments = out;
	resp->reassignment_count = n;
	ctl_finish_call(ctl, batch);
	return KEEL_OK;
}
