/*
 * controller.c — the controller's machinery and its timer-driven work:
 * init, the output batch, heartbeat sessions, elections, tick. The
 * request handlers are in controller_requests.c.
 *
 * Every record goes through emit_*(), which copies it into the call's
 * arena, appends it to the output batch and applies it to the working
 * image on the spot — asserting that it applies: a controller that emits a
 * record its own image rejects has a bug, and must stop rather than feed
 * the log something it did not mean.
 */
#include "meta/controller.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/buf.h"
#include "base/rng.h"
#include "meta/controller_internal.h"
#include "meta/election.h"
#include "meta/fmt.h"

void meta_controller_config_default(struct meta_controller_config *cfg)
{
	cfg->session_timeout_ms = 9000;
	cfg->rebalance_interval_ms = 300000;
	cfg->noop_interval_ms = 0;
	cfg->default_partitions = 1;
	cfg->default_replication_factor = 1;
	cfg->max_partitions_per_topic = 10000;
	cfg->max_records_per_batch = 20000;
}

/* ---- sessions ---- */

static uint32_t session_lower_bound(const struct meta_controller *ctl, int32_t id)
{
	uint32_t lo = 0, hi = ctl->session_count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (ctl->sessions[mid].broker_id < id) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

struct meta_session *ctl_session(struct meta_controller *ctl, int32_t id)
{
	uint32_t i = session_lower_bound(ctl, id);
	return (i < ctl->session_count && ctl->sessions[i].broker_id == id) ? &ctl->sessions[i]
									    : NULL;
}

enum keel_err ctl_session_set(struct meta_controller *ctl, int32_t id, int64_t epoch,
			      int64_t deadline_ms)
{
	uint32_t i = session_lower_bound(ctl, id);
	if (i < ctl->session_count && ctl->sessions[i].broker_id == id) {
		ctl->sessions[i].broker_epoch = epoch;
		ctl->sessions[i].deadline_ms = deadline_ms;
		return KEEL_OK;
	}
	if (ctl->session_count == ctl->session_capacity) {
		uint32_t cap = ctl->session_capacity == 0 ? 16 : ctl->session_capacity * 2;
		struct meta_session *s = realloc(ctl->sessions, (size_t)cap * sizeof(*s));
		if (s == NULL) {
			return KEEL_NOMEM;
		}
		ctl->sessions = s;
		ctl->session_capacity = cap;
	}
	memmove(&ctl->sessions[i + 1], &ctl->sessions[i],
		(size_t)(ctl->session_count - i) * sizeof(*ctl->sessions));
	ctl->sessions[i] = (struct meta_session){id, epoch, deadline_ms, -1};
	ctl->session_count++;
	return KEEL_OK;
}

int64_t meta_controller_broker_offset(const struct meta_controller *ctl, int32_t id)
{
	uint32_t i = session_lower_bound(ctl, id);
	if (i < ctl->session_count && ctl->sessions[i].broker_id == id) {
		return ctl->sessions[i].metadata_offset;
	}
	return -1;
}

void ctl_session_note_offset(struct meta_controller *ctl, int32_t id, int64_t offset)
{
	uint32_t i = session_lower_bound(ctl, id);
	if (i < ctl->session_count && ctl->sessions[i].broker_id == id) {
		ctl->sessions[i].metadata_offset = offset;
	}
}

void ctl_session_remove(struct meta_controller *ctl, int32_t id)
{
	uint32_t i = session_lower_bound(ctl, id);
	if (i < ctl->session_count && ctl->sessions[i].broker_id == id) {
		memmove(&ctl->sessions[i], &ctl->sessions[i + 1],
			(size_t)(ctl->session_count - i - 1) * sizeof(*ctl->sessions));
		ctl->session_count--;
	}
}

/* ---- init / close ---- */

enum keel_err meta_controller_init(struct meta_controller *ctl,
				   const struct meta_controller_config *cfg, int32_t controller_id,
				   int32_t controller_epoch, const struct meta_image *committed,
				   struct keel_rng *rng, int64_t now_ms)
{
	KEEL_ASSERT(cfg->session_timeout_ms > 0);
	KEEL_ASSERT(cfg->max_records_per_batch >= 2);
	KEEL_ASSERT(controller_epoch >= committed->controller_epoch);
	memset(ctl, 0, sizeof(*ctl));
	ctl->cfg = *cfg;
	ctl->controller_id = controller_id;
	ctl->controller_epoch = controller_epoch;
	ctl->committed = committed;
	ctl->rng = rng;
	meta_image_init(&ctl->image, &committed->limits);
	enum keel_err err = meta_image_clone(&ctl->image, committed);
	if (err != KEEL_OK) {
		meta_image_close(&ctl->image);
		return err;
	}
	ctl->working_offset = ctl->image.offset;
	keel_arena_init(&ctl->arena, 64 * 1024);
	/* Soft state from the image alone: a fresh full timeout for everyone. */
	for (uint32_t i = 0; i < ctl->image.broker_count; i++) {
		const struct meta_broker *b = ctl->image.brokers[i];
		err = ctl_session_set(ctl, b->id, b->epoch, now_ms + cfg->session_timeout_ms);
		if (err != KEEL_OK) {
			meta_controller_close(ctl);
			return err;
		}
	}
	ctl->reconcile_pending = true;
	ctl->next_rebalance_ms = now_ms + cfg->rebalance_interval_ms;
	ctl->next_noop_ms = now_ms + cfg->noop_interval_ms;
	return KEEL_OK;
}

void meta_controller_close(struct meta_controller *ctl)
{
	meta_image_close(&ctl->image);
	keel_arena_close(&ctl->arena);
	free(ctl->sessions);
	memset(ctl, 0, sizeof(*ctl));
}

/* ---- the output batch ---- */

void ctl_begin_call(struct meta_controller *ctl)
{
	keel_arena_reset(&ctl->arena);
	memset(&ctl->out, 0, sizeof(ctl->out));
	ctl->out_capacity = 0;
	ctl->batch_open = false;
}

void ctl_finish_call(struct meta_controller *ctl, struct meta_batch **batch)
{
	*batch = ctl->out.count > 0 ? &ctl->out : NULL;
	if (ctl->out.count > 0) {
		ctl->announced = true;
	}
}

uint32_t ctl_room(const struct meta_controller *ctl)
{
	return ctl->cfg.max_records_per_batch - ctl->out.count;
}

void *ctl_alloc(struct meta_controller *ctl, size_t size)
{
	void *p = keel_arena_alloc(&ctl->arena, size);
	if (p == NULL) {
		return NULL;
	}
	memset(p, 0, size);
	return p;
}

const char *ctl_strdup(struct meta_controller *ctl, const char *s)
{
	if (s == NULL) {
		return NULL;
	}
	return keel_arena_dup(&ctl->arena, s, strlen(s) + 1);
}

static const int32_t *dup_list(struct meta_controller *ctl, const int32_t *v, uint32_t n)
{
	static const int32_t none[1] = {0};
	if (n == 0) {
		return none; /* v may be NULL */
	}
	return keel_arena_dup(&ctl->arena, v, (size_t)n * sizeof(int32_t) + (n == 0 ? 1 : 0));
}

/*
 * Appends a record (its pointers already stable for this call) and applies
 * it to the working image.
 */
static enum keel_err emit(struct meta_controller *ctl, const struct meta_record *rec)
{
	KEEL_ASSERT(ctl->out.count < ctl->cfg.max_records_per_batch);
	if (!ctl->batch_open) {
		ctl->out.hdr.controller_id = ctl->controller_id;
		ctl->out.hdr.controller_epoch = ctl->controller_epoch;
		ctl->out.hdr.timestamp_ms = 0; /* stamped by the server */
		ctl->working_offset++;
		enum keel_err err = meta_image_begin_batch(&ctl->image, ctl->working_offset,
							   &ctl->out.hdr, NULL);
		KEEL_ASSERT(err == KEEL_OK);
		ctl->batch_open = true;
	}
	if (ctl->out.count == ctl->out_capacity) {
		uint32_t cap = ctl->out_capacity == 0 ? 16 : ctl->out_capacity * 2;
		struct meta_record *recs = keel_arena_alloc(&ctl->arena, (size_t)cap * sizeof(*recs));
		if (recs == NULL) {
			return KEEL_NOMEM;
		}
		if (ctl->out.count > 0) {
			memcpy(recs, ctl->out.records, (size_t)ctl->out.count * sizeof(*recs));
		}
		ctl->out.records = recs;
		ctl->out_capacity = cap;
	}
	struct meta_errbuf why;
	enum keel_err err = meta_image_apply_record(&ctl->image, rec, NULL, &why);
	if (err == KEEL_NOMEM) {
		return err;
	}
	/* The controller's own decision must fit its own image. */
	KEEL_ASSERT(err == KEEL_OK);
	ctl->out.records[ctl->out.count++] = *rec;
	return KEEL_OK;
}

enum keel_err ctl_emit_broker_ref(struct meta_controller *ctl, uint16_t type, int32_t id,
				  int64_t epoch)
{
	struct meta_record r;
	memset(&r, 0, sizeof(r));
	r.type = type;
	r.fence_broker.broker_id = id;
	r.fence_broker.broker_epoch = epoch;
	return emit(ctl, &r);
}

enum keel_err ctl_emit(struct meta_controller *ctl, const struct meta_record *rec)
{
	return emit(ctl, rec);
}

enum keel_err ctl_emit_partition_change(struct meta_controller *ctl,
					const struct meta_partition_change_record *pc)
{
	struct meta_record r;
	memset(&r, 0, sizeof(r));
	r.type = META_REC_PARTITION_CHANGE;
	r.partition_change = *pc;
	if (pc->fields & META_PC_ISR) {
		r.partition_change.isr = dup_list(ctl, pc->isr, pc->isr_count);
		if (r.partition_change.isr == NULL) {
			return KEEL_NOMEM;
		}
	}
	if (pc->fields & META_PC_REPLICAS) {
		r.partition_change.replicas = dup_list(ctl, pc->replicas, pc->replica_count);
		if (r.partition_change.replicas == NULL) {
			return KEEL_NOMEM;
		}
	}
	if (pc->fields & META_PC_REASSIGNMENT) {
		r.version = 1; /* the first version that carries a reassignment */
		r.partition_change.adding = dup_list(ctl, pc->adding, pc->adding_count);
		r.partition_change.removing = dup_list(ctl, pc->removing, pc->removing_count);
		if (r.partition_change.adding == NULL || r.partition_change.removing == NULL) {
			return KEEL_NOMEM;
		}
	}
	return emit(ctl, &r);
}

/* ---- elections ---- */

/* Completes every reassignment that is ready (brokers changed state: a
 * target replica may be able to lead now; and a new controller finishes
 * what the old one left). */
static enum keel_err complete_reassignments(struct meta_controller *ctl, bool *complete)
{
	for (uint32_t t = 0; *complete && t < ctl->image.topic_count; t++) {
		const struct meta_topic *topic = ctl->image.topics[t];
		for (uint32_t p = 0; p < topic->partition_count; p++) {
			if (!meta_partition_reassigning(&topic->partitions[p])) {
				continue;
			}
			if (ctl_room(ctl) == 0) {
				*complete = false;
				return KEEL_OK;
			}
			enum keel_err err = ctl_complete_reassignment(ctl, topic, p);
			if (err != KEEL_OK) {
				return err;
			}
		}
	}
	return KEEL_OK;
}

/*
 * Runs the election rule over every partition, emitting the changes it
 * demands while the batch has room. Returns KEEL_OK with *complete false
 * when it stopped for room (the caller keeps the work pending).
 */
enum keel_err ctl_reconcile(struct meta_controller *ctl, bool preferred, bool *complete)
{
	*complete = true;
	/* The topic array does not change under us: partition changes only. */
	for (uint32_t t = 0; t < ctl->image.topic_count; t++) {
		const struct meta_topic *topic = ctl->image.topics[t];
		bool unclean = meta_image_unclean_election(&ctl->image, topic->name);
		for (uint32_t p = 0; p < topic->partition_count; p++) {
			struct meta_partition_target target;
			struct meta_partition_change_record pc;
			if (!meta_partition_elect(&ctl->image, topic, p, preferred, unclean, &target,
						  &pc)) {
				continue;
			}
			if (ctl_room(ctl) == 0) {
				*complete = false;
				return KEEL_OK;
			}
			enum keel_err err = ctl_emit_partition_change(ctl, &pc);
			if (err != KEEL_OK) {
				return err;
			}
		}
	}
	return complete_reassignments(ctl, complete);
}

enum keel_err ctl_run_pending_elections(struct meta_controller *ctl)
{
	if (!ctl->reconcile_pending) {
		return KEEL_OK;
	}
	bool complete;
	enum keel_err err = ctl_reconcile(ctl, false, &complete);
	if (err == KEEL_OK && complete) {
		ctl->reconcile_pending = false;
	}
	return err;
}

enum keel_err ctl_fence(struct meta_controller *ctl, const struct meta_broker *b)
{
	KEEL_ASSERT(!b->fenced);
	enum keel_err err = ctl_emit_broker_ref(ctl, META_REC_FENCE_BROKER, b->id, b->epoch);
	ctl->reconcile_pending = true;
	return err;
}

/* ---- tick ---- */

static enum keel_err fence_expired(struct meta_controller *ctl, int64_t now_ms)
{
	for (uint32_t i = 0; i < ctl->image.broker_count; i++) {
		const struct meta_broker *b = ctl->image.brokers[i];
		if (b->fenced) {
			continue;
		}
		struct meta_session *s = ctl_session(ctl, b->id);
		if (s == NULL || s->broker_epoch != b->epoch) {
			/* Cannot happen (every registration gets a session); be safe:
			 * give it a full timeout from now. */
			enum keel_err err = ctl_session_set(ctl, b->id, b->epoch,
							    now_ms + ctl->cfg.session_timeout_ms);
			if (err != KEEL_OK) {
				return err;
			}
			continue;
		}
		if (now_ms < s->deadline_ms) {
			continue;
		}
		if (ctl_room(ctl) == 0) {
			return KEEL_OK; /* the next tick fences the rest */
		}
		enum keel_err err = ctl_fence(ctl, b);
		if (err != KEEL_OK) {
			return err;
		}
	}
	return KEEL_OK;
}

/* The first controller of a cluster names it, at its first tick: a random
 * id (from the controller's rng, so a seeded run repeats it) in the
 * cluster-default config META_CONFIG_CLUSTER_ID. The working image has it
 * at once, so later ticks and controllers find it and write nothing. */
static enum keel_err ensure_cluster_id(struct meta_controller *ctl)
{
	if (meta_image_config(&ctl->image, META_RESOURCE_BROKER, "", META_CONFIG_CLUSTER_ID) !=
	    NULL) {
		return KEEL_OK;
	}
	uint8_t id[META_UUID_SIZE];
	do { /* as for topic ids: the text never starts with '-' */
		keel_store_be64(id, keel_rng_next(ctl->rng));
		keel_store_be64(id + 8, keel_rng_next(ctl->rng));
	} while ((id[0] >> 2) == 62);
	char text[META_UUID_TEXT_LEN + 1];
	struct meta_fmt f;
	meta_fmt_init(&f, text, sizeof(text));
	meta_fmt_uuid(&f, id);
	struct meta_record r;
	memset(&r, 0, sizeof(r));
	r.type = META_REC_CONFIG;
	r.config.resource_type = META_RESOURCE_BROKER;
	r.config.resource_name = ctl_strdup(ctl, "");
	r.config.key = ctl_strdup(ctl, META_CONFIG_CLUSTER_ID);
	r.config.value = ctl_strdup(ctl, text);
	if (r.config.resource_name == NULL || r.config.key == NULL || r.config.value == NULL) {
		return KEEL_NOMEM;
	}
	return emit(ctl, &r);
}

enum keel_err meta_controller_tick(struct meta_controller *ctl, int64_t now_ms,
				   struct meta_batch **batch)
{
	ctl_begin_call(ctl);
	enum keel_err err = KEEL_OK;
	if (!ctl->announced) {
		struct meta_record noop = {.type = META_REC_NOOP};
		err = emit(ctl, &noop);
	}
	if (err == KEEL_OK && ctl_room(ctl) > 0) {
		err = ensure_cluster_id(ctl);
	}
	if (err == KEEL_OK) {
		err = fence_expired(ctl, now_ms);
	}
	if (err == KEEL_OK) {
		err = ctl_run_pending_elections(ctl);
	}
	if (err == KEEL_OK && ctl->cfg.rebalance_interval_ms > 0 &&
	    now_ms >= ctl->next_rebalance_ms) {
		ctl->rebalance_pending = true;
		ctl->next_rebalance_ms = now_ms + ctl->cfg.rebalance_interval_ms;
	}
	if (err == KEEL_OK && ctl->rebalance_pending) {
		bool complete;
		err = ctl_reconcile(ctl, true, &complete);
		if (err == KEEL_OK && complete) {
			ctl->rebalance_pending = false;
		}
	}
	if (err == KEEL_OK && ctl->cfg.noop_interval_ms > 0 && now_ms >= ctl->next_noop_ms) {
		if (ctl->out.count == 0) {
			struct meta_record noop = {.type = META_REC_NOOP};
			err = emit(ctl, &noop);
		}
		ctl->next_noop_ms = now_ms + ctl->cfg.noop_interval_ms;
	}
	ctl_finish_call(ctl, batch);
	return err;
}

int64_t meta_controller_next_tick_ms(const struct meta_controller *ctl, int64_t now_ms)
{
	if (!ctl->announced || ctl->reconcile_pending || ctl->rebalance_pending) {
		return now_ms;
	}
	int64_t next = INT64_MAX;
	for (uint32_t i = 0; i < ctl->image.broker_count; i++) {
		const struct meta_broker *b = ctl->image.brokers[i];
		uint32_t s = session_lower_bound(ctl, b->id);
		if (!b->fenced && s < ctl->session_count && ctl->sessions[s].broker_id == b->id) {
			next = KEEL_MIN(next, ctl->sessions[s].deadline_ms);
		}
	}
	if (ctl->cfg.rebalance_interval_ms > 0) {
		next = KEEL_MIN(next, ctl->next_rebalance_ms);
	}
	if (ctl->cfg.noop_interval_ms > 0) {
		next = KEEL_MIN(next, ctl->next_noop_ms);
	}
	return KEEL_MAX(next, now_ms);
}
