/*
 * controller_admin.c — the operator's controller requests: CreatePartitions
 * and ElectLeaders (Kafka's semantics; docs/controller.md).
 *
 * Both only read the working image and emit records through the common
 * output batch (controller_internal.h); like every controller request they
 * are all-or-nothing per item: an item whose records do not fit the batch
 * gets POLICY_VIOLATION and nothing of it is written.
 */
#include <string.h>

#include "base/assert.h"
#include "meta/controller.h"
#include "meta/controller_internal.h"
#include "meta/election.h"
#include "meta/fmt.h"

/* A message in the call's arena: "<prefix><number><suffix>". */
static const char *number_message(struct meta_controller *ctl, const char *prefix, int64_t n,
				  const char *suffix)
{
	char *buf = ctl_alloc(ctl, 200);
	if (buf == NULL) {
		return prefix;
	}
	struct meta_fmt f;
	meta_fmt_init(&f, buf, 200);
	meta_fmt_str(&f, prefix);
	meta_fmt_i64(&f, n);
	meta_fmt_str(&f, suffix);
	return buf;
}

/* ---- CreatePartitions ---- */

/* The topic's replication factor: its first partition's replica count, not
 * counting replicas a reassignment is removing (1 without partitions). */
static uint32_t topic_replication_factor(const struct meta_topic *topic)
{
	if (topic->partition_count == 0) {
		return 1;
	}
	const struct meta_partition *p = &topic->partitions[0];
	return p->replica_count - p->removing_count;
}

static const char *partition_message(struct meta_controller *ctl, int32_t pid, const char *why,
				     int32_t broker)
{
	char *buf = ctl_alloc(ctl, 256);
	if (buf == NULL) {
		return why;
	}
	struct meta_fmt f;
	meta_fmt_init(&f, buf, 256);
	meta_fmt_str(&f, "partition ");
	meta_fmt_i64(&f, pid);
	meta_fmt_str(&f, ": ");
	meta_fmt_str(&f, why);
	if (broker >= 0) {
		meta_fmt_i64(&f, broker);
	}
	return buf;
}

const char *ctl_replicas_problem(struct meta_controller *ctl, int32_t pid, const int32_t *ids,
				 uint32_t count, uint32_t rf)
{
	if (count == 0) {
		return partition_message(ctl, pid, "the replica list is empty", -1);
	}
	bool any_active = false;
	for (uint32_t i = 0; i < count; i++) {
		if (meta_image_broker(&ctl->image, ids[i]) == NULL) {
			return partition_message(ctl, pid, "no registered broker has id ", ids[i]);
		}
		for (uint32_t j = 0; j < i; j++) {
			if (ids[j] == ids[i]) {
				return partition_message(
					ctl, pid, "a replica list names the same broker twice: ",
					ids[i]);
			}
		}
		any_active = any_active || meta_image_broker_active(&ctl->image, ids[i]);
	}
	if (count != rf) {
		return partition_message(ctl, pid,
					 "every partition needs the same number of replicas: ",
					 (int32_t)rf);
	}
	if (!any_active) {
		return partition_message(
			ctl, pid,
			"every broker of its replica list is fenced or shutting down; none can lead",
			-1);
	}
	return NULL;
}

enum keel_err ctl_emit_new_partition(struct meta_controller *ctl,
				     const uint8_t topic_id[META_UUID_SIZE], int32_t pid,
				     const int32_t *replicas, uint32_t count)
{
	int32_t *isr = ctl_alloc(ctl, ((size_t)count + 1) * sizeof(int32_t));
	if (isr == NULL) {
		return KEEL_NOMEM;
	}
	uint32_t isr_count = 0;
	for (uint32_t i = 0; i < count; i++) {
		if (meta_image_broker_active(&ctl->image, replicas[i])) {
			isr[isr_count++] = replicas[i];
		}
	}
	KEEL_ASSERT(isr_count > 0); /* checked: one replica at least is active */
	struct meta_record r;
	memset(&r, 0, sizeof(r));
	r.type = META_REC_PARTITION;
	memcpy(r.partition.topic_id, topic_id, META_UUID_SIZE);
	r.partition.partition_id = pid;
	r.partition.replicas = replicas;
	r.partition.replica_count = count;
	r.partition.isr = isr;
	r.partition.isr_count = isr_count;
	r.partition.leader = isr[0];
	return ctl_emit(ctl, &r);
}

/* Checks an explicit assignment: `rows` rows of the topic's replication
 * factor (ctl_replicas_problem). NULL when valid. */
static const char *assignment_problem(struct meta_controller *ctl,
				      const struct meta_create_partitions_topic *t, uint32_t have,
				      uint32_t rows, uint32_t rf)
{
	if (t->assignment_count != rows) {
		return "the assignment must give one replica list per new partition";
	}
	for (uint32_t r = 0; r < rows; r++) {
		const char *why = ctl_replicas_problem(ctl, (int32_t)(have + r), t->assignments[r],
						       t->assignment_sizes[r], rf);
		if (why != NULL) {
			return why;
		}
	}
	return NULL;
}

static void check_new_partitions(struct meta_controller *ctl,
				 const struct meta_create_partitions_topic *t,
				 struct meta_create_partitions_result *res)
{
	const struct meta_topic *topic = meta_image_topic(&ctl->image, t->name);
	if (topic == NULL) {
		res->error = META_ERR_UNKNOWN_TOPIC_OR_PARTITION;
		res->error_message = "no such topic";
		return;
	}
	uint32_t have = topic->partition_count;
	if (t->count <= 0 || (uint32_t)t->count <= have) {
		res->error = META_ERR_INVALID_PARTITIONS;
		res->error_message = number_message(
			ctl, "the topic has ", have,
			(uint32_t)t->count == have
				? " partitions already; the new count must be larger"
				: " partitions, more than the requested count; partitions can "
				  "only be added");
		return;
	}
	if ((uint32_t)t->count > ctl->cfg.max_partitions_per_topic) {
		res->error = META_ERR_INVALID_PARTITIONS;
		res->error_message = number_message(ctl, "at most ",
						    ctl->cfg.max_partitions_per_topic,
						    " partitions per topic");
		return;
	}
	uint32_t rows = (uint32_t)t->count - have;
	uint32_t rf = topic_replication_factor(topic);
	if (t->assignment_count > 0) {
		const char *why = assignment_problem(ctl, t, have, rows, rf);
		if (why != NULL) {
			res->error = META_ERR_INVALID_REPLICA_ASSIGNMENT;
			res->error_message = why;
			return;
		}
	} else if (meta_active_broker_count(&ctl->image) < rf) {
		res->error = META_ERR_INVALID_REPLICATION_FACTOR;
		res->error_message = number_message(ctl, "replication factor ", rf,
						    " cannot be reached by the active brokers");
		return;
	}
	if (ctl_room(ctl) < rows) {
		res->error = META_ERR_POLICY_VIOLATION;
		res->error_message = "too many new partitions in one request; add fewer at once";
	}
}

static enum keel_err add_partitions(struct meta_controller *ctl,
				    const struct meta_create_partitions_topic *t)
{
	const struct meta_topic *topic = meta_image_topic(&ctl->image, t->name);
	KEEL_ASSERT(topic != NULL);
	uint32_t have = topic->partition_count;
	uint32_t total = (uint32_t)t->count;
	uint32_t rf = topic_replication_factor(topic);
	int32_t *placed = NULL;
	if (t->assignment_count == 0) {
		/* The stripe of a topic created with `total` partitions: the new
		 * rows continue the existing ones (same broker set, same start). */
		placed = ctl_alloc(ctl, (size_t)total * rf * sizeof(int32_t));
		bool nomem = false;
		if (placed == NULL) {
			return KEEL_NOMEM;
		}
		bool ok = meta_place_replicas(&ctl->image, total, rf, ctl_stripe_start(t->name),
					      placed, &nomem);
		if (nomem) {
			return KEEL_NOMEM;
		}
		KEEL_ASSERT(ok); /* check_new_partitions counted the active brokers */
	}
	uint8_t id[META_UUID_SIZE];
	memcpy(id, topic->id, META_UUID_SIZE);
	enum keel_err err = KEEL_OK;
	for (uint32_t p = have; err == KEEL_OK && p < total; p++) {
		const int32_t *row = placed != NULL ? &placed[(size_t)p * rf]
						    : t->assignments[p - have];
		err = ctl_emit_new_partition(ctl, id, (int32_t)p, row, rf);
	}
	return err;
}

enum keel_err meta_controller_create_partitions(struct meta_controller *ctl, int64_t now_ms,
						const struct meta_create_partitions_request *req,
						struct meta_create_partitions_response *resp,
						struct meta_batch **batch)
{
	(void)now_ms;
	ctl_begin_call(ctl);
	memset(resp, 0, sizeof(*resp));
	enum keel_err err = KEEL_OK;
	struct meta_create_partitions_result *results =
		ctl_alloc(ctl, ((size_t)req->topic_count + 1) * sizeof(*results));
	if (results == NULL) {
		err = KEEL_NOMEM;
	}
	struct ctl_name_ref *refs =
		ctl_alloc(ctl, ((size_t)req->topic_count + 1) * sizeof(*refs));
	for (uint32_t i = 0; refs != NULL && i < req->topic_count; i++) {
		refs[i] = (struct ctl_name_ref){req->topics[i].name, i};
	}
	bool *repeated = refs != NULL ? ctl_mark_repeats(ctl, refs, req->topic_count) : NULL;
	if (repeated == NULL) {
		err = KEEL_NOMEM;
	}
	for (uint32_t i = 0; err == KEEL_OK && i < req->topic_count; i++) {
		const struct meta_create_partitions_topic *t = &req->topics[i];
		results[i].name = t->name;
		if (repeated[i]) {
			results[i].error = META_ERR_INVALID_REQUEST;
			results[i].error_message = "topic named twice in one request";
		}
		if (results[i].error == META_ERR_NONE && t->name != NULL) {
			check_new_partitions(ctl, t, &results[i]);
		} else if (t->name == NULL) {
			results[i].error = META_ERR_INVALID_REQUEST;
			results[i].error_message = "a topic name is required";
		}
		if (results[i].error == META_ERR_NONE && !req->validate_only) {
			err = add_partitions(ctl, t);
		}
	}
	resp->results = results;
	resp->result_count = err == KEEL_OK ? req->topic_count : 0;
	ctl_finish_call(ctl, batch);
	return err;
}

/* ---- ElectLeaders ---- */

static void elect_one(struct meta_controller *ctl, int8_t type, const struct meta_topic *topic,
		      uint32_t pid, struct meta_elect_partition_result *res, enum keel_err *err)
{
	const struct meta_partition *p = &topic->partitions[pid];
	struct meta_partition_target target;
	struct meta_partition_change_record pc;
	if (type == META_ELECTION_PREFERRED) {
		if (p->replica_count > 0 && p->leader == p->replicas[0]) {
			res->error = META_ERR_ELECTION_NOT_NEEDED;
			res->error_message = "the preferred replica leads already";
			return;
		}
		bool change = meta_partition_elect(&ctl->image, topic, pid, true, false, &target, &pc);
		if (!change || p->replica_count == 0 || pc.leader != p->replicas[0]) {
			res->error = META_ERR_PREFERRED_LEADER_NOT_AVAILABLE;
			res->error_message = "the preferred replica is not eligible or not in the ISR";
			return;
		}
	} else {
		if (p->leader != META_NO_LEADER) {
			res->error = META_ERR_ELECTION_NOT_NEEDED;
			res->error_message = "the partition has a leader";
			return;
		}
		bool change = meta_partition_elect(&ctl->image, topic, pid, false, true, &target, &pc);
		if (!change || pc.leader == META_NO_LEADER) {
			res->error = META_ERR_ELIGIBLE_LEADERS_NOT_AVAILABLE;
			res->error_message = "no replica is eligible to lead";
			return;
		}
	}
	if (ctl_room(ctl) == 0) {
		res->error = META_ERR_POLICY_VIOLATION;
		res->error_message = "too many elections in one request; retry the rest";
		return;
	}
	*err = ctl_emit_partition_change(ctl, &pc);
}

/* Results for every partition named (or every partition, with `all`). */
static uint32_t count_targets(const struct meta_controller *ctl,
			      const struct meta_elect_leaders_request *req)
{
	uint32_t n = 0;
	if (req->all) {
		for (uint32_t t = 0; t < ctl->image.topic_count; t++) {
			n += ctl->image.topics[t]->partition_count;
		}
		return n;
	}
	for (uint32_t t = 0; t < req->topic_count; t++) {
		n += req->topics[t].partition_count;
	}
	return n;
}

enum keel_err meta_controller_elect_leaders(struct meta_controller *ctl, int64_t now_ms,
					    const struct meta_elect_leaders_request *req,
					    struct meta_elect_leaders_response *resp,
					    struct meta_batch **batch)
{
	(void)now_ms;
	ctl_begin_call(ctl);
	memset(resp, 0, sizeof(*resp));
	if (req->election_type != META_ELECTION_PREFERRED &&
	    req->election_type != META_ELECTION_UNCLEAN) {
		resp->error = META_ERR_INVALID_REQUEST;
		resp->error_message = "the election type is 0 (preferred) or 1 (unclean)";
		ctl_finish_call(ctl, batch);
		return KEEL_OK;
	}
	if (req->all && req->election_type == META_ELECTION_UNCLEAN) {
		resp->error = META_ERR_INVALID_REQUEST;
		resp->error_message = "an unclean election names its partitions";
		ctl_finish_call(ctl, batch);
		return KEEL_OK;
	}
	uint32_t n = count_targets(ctl, req);
	struct meta_elect_partition_result *results =
		ctl_alloc(ctl, ((size_t)n + 1) * sizeof(*results));
	if (results == NULL) {
		ctl_finish_call(ctl, batch);
		return KEEL_NOMEM;
	}
	enum keel_err err = KEEL_OK;
	uint32_t k = 0;
	uint32_t topics = req->all ? ctl->image.topic_count : req->topic_count;
	for (uint32_t t = 0; err == KEEL_OK && t < topics; t++) {
		const struct meta_topic *topic =
			req->all ? ctl->image.topics[t] : meta_image_topic(&ctl->image, req->topics[t].name);
		const char *name = req->all ? topic->name : req->topics[t].name;
		uint32_t count = req->all ? topic->partition_count : req->topics[t].partition_count;
		for (uint32_t i = 0; err == KEEL_OK && i < count; i++) {
			int32_t pid = req->all ? (int32_t)i : req->topics[t].partitions[i];
			struct meta_elect_partition_result *res = &results[k++];
			res->topic = name;
			res->partition_id = pid;
			if (topic == NULL || pid < 0 || (uint32_t)pid >= topic->partition_count) {
				res->error = META_ERR_UNKNOWN_TOPIC_OR_PARTITION;
				res->error_message = "no such partition";
				continue;
			}
			elect_one(ctl, req->election_type, topic, (uint32_t)pid, res, &err);
		}
	}
	resp->results = results;
	resp->result_count = err == KEEL_OK ? k : 0;
	ctl_finish_call(ctl, batch);
	return err;
}
