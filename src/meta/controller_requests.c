/*
 * controller_requests.c — the controller's request handlers: broker
 * registration, heartbeats (unfence, fence, controlled shutdown),
 * unregistration, topic creation and deletion, configs and AlterPartition.
 * The rules are written up in docs/controller.md.
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/sort.h"
#include "meta/controller.h"
#include "meta/controller_internal.h"
#include "meta/election.h"

/* A formatter over a fresh 256-byte arena buffer for an error message; its
 * text is f->buf (NULL formatter when the arena is exhausted). */
static struct meta_fmt *message(struct meta_controller *ctl, struct meta_fmt *f)
{
	char *buf = ctl_alloc(ctl, 256);
	if (buf == NULL) {
		return NULL;
	}
	meta_fmt_init(f, buf, 256);
	return f;
}

static const char *text(struct meta_fmt *f)
{
	return f != NULL ? f->buf : NULL;
}

/* ---- broker registration ---- */

static bool registration_valid(const struct meta_broker_registration_request *req)
{
	if (req->broker_id < 0 || req->endpoint_count > META_MAX_ENDPOINTS) {
		return false;
	}
	if (req->rack != NULL && strlen(req->rack) > META_MAX_SHORT_STRING) {
		return false;
	}
	for (uint32_t i = 0; i < req->endpoint_count; i++) {
		const struct meta_endpoint *e = &req->endpoints[i];
		if (e->name == NULL || e->name[0] == '\0' || strlen(e->name) > META_MAX_SHORT_STRING ||
		    e->host == NULL || strlen(e->host) > META_MAX_SHORT_STRING ||
		    e->security_protocol < META_SEC_PLAINTEXT ||
		    e->security_protocol > META_SEC_SASL_SSL) {
			return false;
		}
	}
	return true;
}

/* Does the broker hold a live session (unfenced, heartbeat not expired)? */
static bool session_alive(struct meta_controller *ctl, const struct meta_broker *b,
			  int64_t now_ms)
{
	if (b->fenced) {
		return false;
	}
	struct meta_session *s = ctl_session(ctl, b->id);
	return s != NULL && s->broker_epoch == b->epoch && now_ms < s->deadline_ms;
}

static enum keel_err do_register(struct meta_controller *ctl, int64_t now_ms,
				 const struct meta_broker_registration_request *req,
				 struct meta_broker_registration_response *resp)
{
	struct meta_fmt f;
	if (!registration_valid(req)) {
		resp->error = META_ERR_INVALID_REQUEST;
		resp->error_message = "invalid broker id, endpoint or rack";
		return KEEL_OK;
	}
	const struct meta_broker *old = meta_image_broker(&ctl->image, req->broker_id);
	if (old != NULL && memcmp(old->incarnation_id, req->incarnation_id, META_UUID_SIZE) == 0) {
		/* The same process asking again (its reply was lost): same epoch. */
		resp->broker_epoch = old->epoch;
		return ctl_session_set(ctl, old->id, old->epoch, now_ms + ctl->cfg.session_timeout_ms);
	}
	if (old != NULL && session_alive(ctl, old, now_ms) &&
	    req->previous_broker_epoch != old->epoch) {
		struct meta_fmt *m = message(ctl, &f);
		meta_fmt_str(m, "broker ");
		meta_fmt_i64(m, req->broker_id);
		meta_fmt_str(m, " is registered with another incarnation whose session is alive "
				"(epoch ");
		meta_fmt_i64(m, old->epoch);
		meta_fmt_str(m, "); retry after the session timeout");
		resp->error = META_ERR_DUPLICATE_BROKER_REGISTRATION;
		resp->error_message = text(m);
		return KEEL_OK;
	}
	if (ctl_room(ctl) < 1) {
		resp->error = META_ERR_NOT_CONTROLLER;
		resp->error_message = "controller busy; retry";
		return KEEL_OK;
	}
	bool had_duties = old != NULL && !old->fenced;
	struct meta_record r;
	memset(&r, 0, sizeof(r));
	r.type = META_REC_REGISTER_BROKER;
	struct meta_register_broker_record *rb = &r.register_broker;
	rb->broker_id = req->broker_id;
	memcpy(rb->incarnation_id, req->incarnation_id, META_UUID_SIZE);
	rb->broker_epoch = ctl->image.last_broker_epoch + 1;
	rb->fenced = true;
	rb->rack = ctl_strdup(ctl, req->rack);
	struct meta_endpoint *eps = ctl_alloc(ctl, (req->endpoint_count + 1) * sizeof(*eps));
	if (eps == NULL || (req->rack != NULL && rb->rack == NULL)) {
		return KEEL_NOMEM;
	}
	for (uint32_t i = 0; i < req->endpoint_count; i++) {
		eps[i] = req->endpoints[i];
		eps[i].name = ctl_strdup(ctl, req->endpoints[i].name);
		eps[i].host = ctl_strdup(ctl, req->endpoints[i].host);
		if (eps[i].name == NULL || eps[i].host == NULL) {
			return KEEL_NOMEM;
		}
	}
	rb->endpoints = eps;
	rb->endpoint_count = req->endpoint_count;
	enum keel_err err = ctl_emit(ctl, &r);
	if (err != KEEL_OK) {
		return err;
	}
	resp->broker_epoch = rb->broker_epoch;
	err = ctl_session_set(ctl, req->broker_id, rb->broker_epoch,
			      now_ms + ctl->cfg.session_timeout_ms);
	if (err == KEEL_OK && had_duties) {
		/* The old incarnation may lead or sit in ISRs; the new one is fenced. */
		ctl->reconcile_pending = true;
		err = ctl_run_pending_elections(ctl);
	}
	return err;
}

enum keel_err meta_controller_register_broker(struct meta_controller *ctl, int64_t now_ms,
					      const struct meta_broker_registration_request *req,
					      struct meta_broker_registration_response *resp,
					      struct meta_batch **batch)
{
	ctl_begin_call(ctl);
	memset(resp, 0, sizeof(*resp));
	enum keel_err err = do_register(ctl, now_ms, req, resp);
	ctl_finish_call(ctl, batch);
	return err;
}

/* ---- heartbeat ---- */

static bool leads_any(const struct meta_image *img, int32_t id)
{
	for (uint32_t t = 0; t < img->topic_count; t++) {
		const struct meta_topic *topic = img->topics[t];
		for (uint32_t p = 0; p < topic->partition_count; p++) {
			if (topic->partitions[p].leader == id) {
				return true;
			}
		}
	}
	return false;
}

/* Caught up = the broker has applied the batch that registered it. The
 * committed image is the judge: the working one's offsets are synthetic. */
static bool caught_up(const struct meta_controller *ctl,
		      const struct meta_broker_heartbeat_request *req)
{
	const struct meta_broker *cb = meta_image_broker(ctl->committed, req->broker_id);
	return cb != NULL && cb->epoch == req->broker_epoch &&
	       req->current_metadata_offset >= cb->registered_offset;
}

static enum keel_err controlled_shutdown(struct meta_controller *ctl, const struct meta_broker *b,
					 struct meta_broker_heartbeat_response *resp)
{
	int32_t id = b->id;
	int64_t epoch = b->epoch;
	enum keel_err err = KEEL_OK;
	/* A fenced broker is marked too: a heartbeat it sent before asking to
	 * stop may still reach the controller after the answer (retried through
	 * another server), and a fenced broker that is not in controlled
	 * shutdown would be unfenced by it after it was told to stop. */
	if (!b->in_controlled_shutdown) {
		if (ctl_room(ctl) < 1) {
			return KEEL_OK; /* the broker asks again with its next heartbeat */
		}
		struct meta_record r;
		memset(&r, 0, sizeof(r));
		r.type = META_REC_BROKER_REGISTRATION_CHANGE;
		r.broker_change = (struct meta_broker_change_record){id, epoch, META_CHANGE_NONE, 1};
		err = ctl_emit(ctl, &r);
		ctl->reconcile_pending = true;
	}
	if (err == KEEL_OK) {
		/* Move its leaderships away and take it out of the ISRs. */
		err = ctl_run_pending_elections(ctl);
	}
	b = meta_image_broker(&ctl->image, id);
	if (err != KEEL_OK || ctl->reconcile_pending || leads_any(&ctl->image, id)) {
		return err;
	}
	/* Nothing left to move: it may stop, and it is fenced now rather than
	 * after its session runs out. */
	if (!b->fenced) {
		if (ctl_room(ctl) < 1) {
			return KEEL_OK;
		}
		err = ctl_fence(ctl, b);
	}
	resp->should_shut_down = err == KEEL_OK;
	return err;
}

static enum keel_err do_heartbeat(struct meta_controller *ctl, int64_t now_ms,
				  const struct meta_broker_heartbeat_request *req,
				  struct meta_broker_heartbeat_response *resp)
{
	const struct meta_broker *b = meta_image_broker(&ctl->image, req->broker_id);
	if (b == NULL) {
		resp->error = META_ERR_BROKER_ID_NOT_REGISTERED;
		resp->error_message = "broker not registered";
		resp->is_fenced = true;
		return KEEL_OK;
	}
	if (b->epoch != req->broker_epoch) {
		resp->error = META_ERR_STALE_BROKER_EPOCH;
		resp->error_message = "broker epoch does not match the registration";
		resp->is_fenced = true;
		return KEEL_OK;
	}
	enum keel_err err =
		ctl_session_set(ctl, b->id, b->epoch, now_ms + ctl->cfg.session_timeout_ms);
	if (err != KEEL_OK) {
		return err;
	}
	ctl_session_note_offset(ctl, b->id, req->current_metadata_offset);
	resp->is_caught_up = caught_up(ctl, req);
	if (req->want_shutdown) {
		err = controlled_shutdown(ctl, b, resp);
	} else if (b->fenced) {
		if (!req->want_fence && resp->is_caught_up && !b->in_controlled_shutdown &&
		    ctl_room(ctl) > 0) {
			err = ctl_emit_broker_ref(ctl, META_REC_UNFENCE_BROKER, b->id, b->epoch);
			/* Offline partitions with it in the ISR can elect it now. */
			ctl->reconcile_pending = true;
			if (err == KEEL_OK) {
				err = ctl_run_pending_elections(ctl);
			}
		}
	} else if (req->want_fence && ctl_room(ctl) > 0) {
		err = ctl_fence(ctl, b);
		if (err == KEEL_OK) {
			err = ctl_run_pending_elections(ctl);
		}
	}
	b = meta_image_broker(&ctl->image, req->broker_id);
	resp->is_fenced = b->fenced;
	return err;
}

enum keel_err meta_controller_heartbeat(struct meta_controller *ctl, int64_t now_ms,
					const struct meta_broker_heartbeat_request *req,
					struct meta_broker_heartbeat_response *resp,
					struct meta_batch **batch)
{
	ctl_begin_call(ctl);
	memset(resp, 0, sizeof(*resp));
	enum keel_err err = do_heartbeat(ctl, now_ms, req, resp);
	ctl_finish_call(ctl, batch);
	return err;
}

/* ---- unregister ---- */

enum keel_err meta_controller_unregister_broker(struct meta_controller *ctl, int64_t now_ms,
						const struct meta_unregister_broker_request *req,
						struct meta_unregister_broker_response *resp,
						struct meta_batch **batch)
{
	(void)now_ms;
	ctl_begin_call(ctl);
	memset(resp, 0, sizeof(*resp));
	enum keel_err err = KEEL_OK;
	const struct meta_broker *b = meta_image_broker(&ctl->image, req->broker_id);
	if (b == NULL) {
		resp->error = META_ERR_BROKER_ID_NOT_REGISTERED;
		resp->error_message = "broker not registered";
	} else if (ctl_room(ctl) < 1) {
		resp->error = META_ERR_NOT_CONTROLLER;
		resp->error_message = "controller busy; retry";
	} else {
		err = ctl_emit_broker_ref(ctl, META_REC_UNREGISTER_BROKER, b->id, b->epoch);
		ctl_session_remove(ctl, req->broker_id);
		ctl->reconcile_pending = true;
		if (err == KEEL_OK) {
			err = ctl_run_pending_elections(ctl);
		}
	}
	ctl_finish_call(ctl, batch);
	return err;
}

/* ---- producer ids ---- */

enum keel_err meta_controller_allocate_producer_ids(
	struct meta_controller *ctl, int64_t now_ms, const struct meta_allocate_producer_ids_request *req,
	struct meta_allocate_producer_ids_response *resp, struct meta_batch **batch)
{
	(void)now_ms;
	ctl_begin_call(ctl);
	memset(resp, 0, sizeof(*resp));
	enum keel_err err = KEEL_OK;
	const struct meta_broker *b = meta_image_broker(&ctl->image, req->broker_id);
	int64_t start = ctl->image.next_producer_id;
	if (b == NULL) {
		resp->error = META_ERR_BROKER_ID_NOT_REGISTERED;
		resp->error_message = "broker not registered";
	} else if (b->epoch != req->broker_epoch) {
		resp->error = META_ERR_STALE_BROKER_EPOCH;
		resp->error_message = "broker epoch does not match the registration";
	} else if (start > INT64_MAX - META_PRODUCER_ID_BLOCK) {
		resp->error = META_ERR_UNKNOWN_SERVER_ERROR;
		resp->error_message = "producer ids exhausted";
	} else if (ctl_room(ctl) < 1) {
		resp->error = META_ERR_NOT_CONTROLLER;
		resp->error_message = "controller busy; retry";
	} else {
		struct meta_record rec = {.type = META_REC_PRODUCER_IDS};
		rec.producer_ids.broker_id = b->id;
		rec.producer_ids.broker_epoch = b->epoch;
		rec.producer_ids.next_producer_id = start + META_PRODUCER_ID_BLOCK;
		err = ctl_emit(ctl, &rec);
		if (err == KEEL_OK) {
			resp->producer_id_start = start;
			resp->producer_id_len = META_PRODUCER_ID_BLOCK;
		}
	}
	ctl_finish_call(ctl, batch);
	return err;
}

/* ---- configs ---- */

static bool config_key_valid(const char *key)
{
	size_t n = key != NULL ? strlen(key) : 0;
	if (n == 0 || n > META_MAX_SHORT_STRING) {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		char c = key[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-' || (c >= 'A' && c <= 'Z'))) {
			return false;
		}
	}
	return true;
}

static bool integer_at_least(const char *v, int64_t min)
{
	const char *p = v;
	bool neg = *p == '-';
	p += neg ? 1 : 0;
	if (*p == '\0' || strlen(p) > 18) {
		return false;
	}
	int64_t x = 0;
	for (; *p != '\0'; p++) {
		if (*p < '0' || *p > '9') {
			return false;
		}
		x = x * 10 + (*p - '0');
	}
	return (neg ? -x : x) >= min;
}

/* Kafka's throttled-replicas list: "" , "*", or "P:B,P:B,..." (partition
 * and broker ids). */
static bool throttled_replicas_valid(const char *v)
{
	if (v[0] == '\0' || strcmp(v, "*") == 0) {
		return true;
	}
	for (const char *p = v;;) {
		const char *start = p;
		while (*p >= '0' && *p <= '9') {
			p++;
		}
		if (p == start || *p++ != ':') {
			return false;
		}
		start = p;
		while (*p >= '0' && *p <= '9') {
			p++;
		}
		if (p == start) {
			return false;
		}
		if (*p == '\0') {
			return true;
		}
		if (*p++ != ',') {
			return false;
		}
	}
}

/* NULL when the (key, value) is acceptable, else why not. A NULL value
 * (delete) is always acceptable. */
/* The config names keel accepts: Kafka's topic configs (also settable as
 * cluster or broker defaults, keel's way of spelling the log.* defaults),
 * a few broker-level ones, and keel's own. Anything else is refused as
 * Kafka refuses it (INVALID_CONFIG), so a typo never sits silently in the
 * log. Sorted, for bsearch. */
static const char *const known_config_keys[] = {
	"auto.create.topics.enable",
	"cleanup.policy",
	"compression.type",
	"default.replication.factor",
	"delete.retention.ms",
	"file.delete.delay.ms",
	"flush.messages",
	"flush.ms",
	"flush.policy",
	"follower.replication.throttled.rate",
	"follower.replication.throttled.replicas",
	"index.interval.bytes",
	"leader.replication.throttled.rate",
	"leader.replication.throttled.replicas",
	"local.retention.bytes",
	"local.retention.ms",
	"max.compaction.lag.ms",
	"max.message.bytes",
	"message.downconversion.enable",
	"message.format.version",
	"message.max.bytes",
	"message.timestamp.after.max.ms",
	"message.timestamp.before.max.ms",
	"message.timestamp.difference.max.ms",
	"message.timestamp.type",
	"min.cleanable.dirty.ratio",
	"min.compaction.lag.ms",
	"min.insync.replicas",
	"num.partitions",
	"offsets.retention.check.interval.ms", /* broker/cluster: offset expiry (docs/groups.md) */
	"offsets.retention.minutes",           /* broker/cluster: offset expiry */
	"offsets.retention.ms",                /* broker/cluster: keel's finer form of the above */
	"offsets.topic.num.partitions",     /* broker/cluster: groups (docs/groups.md) */
	"offsets.topic.replication.factor", /* broker/cluster: groups */
	"offsets.topic.segment.bytes",      /* broker/cluster: groups */
	"preallocate",
	"remote.storage.enable",
	"replica.lag.time.max.ms",
	"retention.bytes",
	"retention.ms",
	"segment.bytes",
	"segment.index.bytes",
	"segment.jitter.ms",
	"segment.ms",
	"unclean.leader.election.enable",
};

static int compare_key(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

bool meta_config_key_known(const char *key)
{
	size_t n = sizeof(known_config_keys) / sizeof(known_config_keys[0]);
	return bsearch(&key, known_config_keys, n, sizeof(known_config_keys[0]), compare_key) !=
	       NULL;
}

static const char *config_problem(const char *key, const char *value)
{
	if (!config_key_valid(key)) {
		return "invalid config key";
	}
	if (strcmp(key, META_CONFIG_CLUSTER_ID) == 0) {
		return "the cluster id is set by the controller and cannot be changed";
	}
	if (!meta_config_key_known(key)) {
		return "unknown config name";
	}
	if (value == NULL) {
		return NULL;
	}
	if (strlen(value) > META_MAX_CONFIG_VALUE) {
		return "config value too long";
	}
	if (strcmp(key, META_CONFIG_UNCLEAN_ELECTION) == 0 && strcmp(value, "true") != 0 &&
	    strcmp(value, "false") != 0) {
		return "unclean.leader.election.enable must be true or false";
	}
	if (strcmp(key, "min.insync.replicas") == 0 && !integer_at_least(value, 1)) {
		return "min.insync.replicas must be an integer >= 1";
	}
	if ((strcmp(key, "retention.ms") == 0 || strcmp(key, "retention.bytes") == 0) &&
	    !integer_at_least(value, -1)) {
		return "retention must be an integer >= -1";
	}
	if ((strcmp(key, "leader.replication.throttled.rate") == 0 ||
	     strcmp(key, "follower.replication.throttled.rate") == 0) &&
	    !integer_at_least(value, 0)) {
		return "a replication throttle rate is an integer >= 0 (bytes per second)";
	}
	if ((strcmp(key, "leader.replication.throttled.replicas") == 0 ||
	     strcmp(key, "follower.replication.throttled.replicas") == 0) &&
	    !throttled_replicas_valid(value)) {
		return "throttled replicas are '*' or a list PARTITION:BROKER,...";
	}
	return NULL;
}

/* "KEY: why", in the controller's message buffer. */
static const char *keyed_message(struct meta_controller *ctl, const char *key, const char *why)
{
	struct meta_fmt f;
	struct meta_fmt *m = message(ctl, &f);
	meta_fmt_str(m, "config '");
	meta_fmt_str(m, key != NULL ? key : "");
	meta_fmt_str(m, "': ");
	meta_fmt_str(m, why);
	return text(m);
}

static enum keel_err emit_config(struct meta_controller *ctl, uint8_t type, const char *name,
				 const char *key, const char *value)
{
	struct meta_record r;
	memset(&r, 0, sizeof(r));
	r.type = META_REC_CONFIG;
	r.config.resource_type = type;
	r.config.resource_name = ctl_strdup(ctl, name);
	r.config.key = ctl_strdup(ctl, key);
	r.config.value = ctl_strdup(ctl, value);
	if (r.config.resource_name == NULL || r.config.key == NULL ||
	    (value != NULL && r.config.value == NULL)) {
		return KEEL_NOMEM;
	}
	return ctl_emit(ctl, &r);
}

/* ---- create topics ---- */

/* Topic ids print as 22 characters of base64url; one that starts with '-'
 * reads as an option on a command line, so (as Kafka does) none is handed
 * out: the first character is the top six bits of the first byte. */
static bool topic_id_starts_with_dash(const uint8_t id[META_UUID_SIZE])
{
	return (id[0] >> 2) == 62;
}

static void new_topic_id(struct meta_controller *ctl, uint8_t id[META_UUID_SIZE])
{
	do {
		uint64_t a = keel_rng_next(ctl->rng);
		uint64_t b = keel_rng_next(ctl->rng);
		keel_store_be64(id, a);
		keel_store_be64(id + 8, b);
	} while (meta_uuid_is_zero(id) || topic_id_starts_with_dash(id) ||
		 meta_image_topic_by_id(&ctl->image, id) != NULL);
}

/* ---- names given twice in one request ---- */

static int name_ref_cmp(const void *a, const void *b, void *ctx)
{
	(void)ctx;
	const struct ctl_name_ref *x = a;
	const struct ctl_name_ref *y = b;
	int r = strcmp(x->name, y->name);
	return r != 0 ? r : (x->index > y->index) - (x->index < y->index);
}

/* repeated[i] is true when refs[i]'s name occurs at a smaller index too:
 * sorted by (name, index), O(n log n) however the names are ordered (a
 * pairwise check is quadratic in a request's size). `refs` is reordered;
 * entries with a NULL name are left out. NULL on out of memory. */
bool *ctl_mark_repeats(struct meta_controller *ctl, struct ctl_name_ref *refs, uint32_t count)
{
	bool *repeated = ctl_alloc(ctl, (size_t)count + 1);
	if (repeated == NULL) {
		return NULL;
	}
	uint32_t named = 0;
	for (uint32_t i = 0; i < count; i++) {
		if (refs[i].name != NULL) {
			refs[named++] = refs[i];
		}
	}
	ctl->sort_compares += keel_sort(refs, named, sizeof(*refs), name_ref_cmp, NULL);
	for (uint32_t i = 1; i < named; i++) {
		if (strcmp(refs[i - 1].name, refs[i].name) == 0) {
			repeated[refs[i].index] = true;
		}
	}
	return repeated;
}

static bool *topic_repeats(struct meta_controller *ctl, const struct meta_create_topics_request *req)
{
	struct ctl_name_ref *refs = ctl_alloc(ctl, ((size_t)req->topic_count + 1) * sizeof(*refs));
	if (refs == NULL) {
		return NULL;
	}
	for (uint32_t i = 0; i < req->topic_count; i++) {
		refs[i] = (struct ctl_name_ref){req->topics[i].name, i};
	}
	return ctl_mark_repeats(ctl, refs, req->topic_count);
}

static bool *config_repeats(struct meta_controller *ctl, const struct meta_create_topic *t)
{
	struct ctl_name_ref *refs = ctl_alloc(ctl, ((size_t)t->config_count + 1) * sizeof(*refs));
	if (refs == NULL) {
		return NULL;
	}
	for (uint32_t i = 0; i < t->config_count; i++) {
		refs[i] = (struct ctl_name_ref){t->configs[i].key, i};
	}
	return ctl_mark_repeats(ctl, refs, t->config_count);
}

/* Two names that are equal once '.' reads as '_' collide: Kafka's metric
 * names map one to the other, so Kafka refuses the second (and so do we).
 * This is their order with '.' and '_' read as one character. */
static int canonical_cmp(const char *a, const char *b)
{
	for (;; a++, b++) {
		unsigned char x = (unsigned char)(*a == '.' ? '_' : *a);
		unsigned char y = (unsigned char)(*b == '.' ? '_' : *b);
		if (x != y || x == '\0') {
			return (x > y) - (x < y);
		}
	}
}

struct collision_ref {
	const char *name;
	uint32_t index; /* request index; UINT32_MAX for an existing topic */
};

static int collision_ref_cmp(const void *a, const void *b, void *ctx)
{
	(void)ctx;
	const struct collision_ref *x = a;
	const struct collision_ref *y = b;
	int r = canonical_cmp(x->name, y->name);
	if (r != 0) {
		return r;
	}
	/* Existing topics first (UINT32_MAX + 1 wraps to 0), then request order. */
	uint32_t xi = x->index + 1u, yi = y->index + 1u;
	return (xi > yi) - (xi < yi);
}

/* For each topic of the request, the name of an existing topic or of an
 * earlier topic of the request that it collides with (equal once '.' reads
 * as '_', but not equal), or NULL. One sort of the existing topics' and the
 * request's names: O((T + n) log(T + n)), whatever the names. NULL on out
 * of memory. */
static const char **topic_collisions(struct meta_controller *ctl,
				     const struct meta_create_topics_request *req)
{
	size_t total = (size_t)ctl->image.topic_count + req->topic_count;
	struct collision_ref *refs = ctl_alloc(ctl, (total + 1) * sizeof(*refs));
	const char **out = ctl_alloc(ctl, ((size_t)req->topic_count + 1) * sizeof(*out));
	if (refs == NULL || out == NULL) {
		return NULL;
	}
	size_t n = 0;
	for (uint32_t i = 0; i < ctl->image.topic_count; i++) {
		refs[n++] = (struct collision_ref){ctl->image.topics[i]->name, UINT32_MAX};
	}
	for (uint32_t i = 0; i < req->topic_count; i++) {
		if (req->topics[i].name != NULL) {
			refs[n++] = (struct collision_ref){req->topics[i].name, i};
		}
	}
	ctl->sort_compares += keel_sort(refs, n, sizeof(*refs), collision_ref_cmp, NULL);
	for (size_t g = 0; g < n;) {
		size_t end = g + 1;
		while (end < n && canonical_cmp(refs[g].name, refs[end].name) == 0) {
			end++;
		}
		/* refs[g] came first (an existing topic, or the earliest in the
		 * request); every other different name of the group collides. */
		for (size_t k = g + 1; k < end; k++) {
			if (refs[k].index != UINT32_MAX && strcmp(refs[k].name, refs[g].name) != 0) {
				out[refs[k].index] = refs[g].name;
			}
		}
		g = end;
	}
	return out;
}

/* A manual assignment's rows in partition order: rows[p] is partition p's
 * replica list (sizes[p] its length), NULL where the request gives none.
 * *dup: a partition index given twice or outside [0, count). NULL on out
 * of memory. */
static const struct meta_replica_assignment **manual_rows(struct meta_controller *ctl,
							   const struct meta_create_topic *t,
							   int32_t *bad_index)
{
	const struct meta_replica_assignment **rows =
		ctl_alloc(ctl, ((size_t)t->assignment_count + 1) * sizeof(*rows));
	*bad_index = -1;
	for (uint32_t i = 0; rows != NULL && i < t->assignment_count; i++) {
		int32_t pid = t->assignments[i].partition_index;
		if (pid < 0 || (uint32_t)pid >= t->assignment_count || rows[pid] != NULL) {
			*bad_index = *bad_index < 0 ? pid : *bad_index;
			continue;
		}
		rows[pid] = &t->assignments[i];
	}
	return rows;
}

/* Kafka's checks of a CreateTopics manual assignment: num_partitions and
 * replication_factor are -1, the partition indexes are 0..n-1 once each,
 * every row passes ctl_replicas_problem with the first row's length. False
 * with result->error set when it fails; false with no error: out of memory. */
static bool manual_assignment_checked(struct meta_controller *ctl, const struct meta_create_topic *t,
				      struct meta_create_topic_result *result)
{
	if (t->num_partitions != -1 || t->replication_factor != -1) {
		result->error = META_ERR_INVALID_REQUEST;
		result->error_message = "a manual replica assignment goes with num_partitions and "
					"replication_factor -1";
		return false;
	}
	int32_t bad = -1;
	const struct meta_replica_assignment **rows = manual_rows(ctl, t, &bad);
	if (rows == NULL) {
		return false;
	}
	struct meta_fmt f;
	if (bad != -1 || rows[0] == NULL) {
		struct meta_fmt *m = message(ctl, &f);
		meta_fmt_str(m, "partition indexes of a manual assignment are 0.."
				"(partitions - 1), each once; ");
		meta_fmt_i64(m, bad);
		meta_fmt_str(m, " is out of place");
		result->error = META_ERR_INVALID_REPLICA_ASSIGNMENT;
		result->error_message = text(m);
		return false;
	}
	uint32_t rf = rows[0]->broker_count;
	for (uint32_t p = 0; p < t->assignment_count; p++) {
		const char *why = ctl_replicas_problem(ctl, (int32_t)p, rows[p]->broker_ids,
						       rows[p]->broker_count, rf);
		if (why != NULL) {
			result->error = META_ERR_INVALID_REPLICA_ASSIGNMENT;
			result->error_message = why;
			return false;
		}
	}
	return true;
}

/* Validates one topic of a CreateTopics request; fills result->error.
 * repeated: topic_repeats() of the request. KEEL_NOMEM, else KEEL_OK. */
static enum keel_err check_new_topic(struct meta_controller *ctl,
				     const struct meta_create_topics_request *req, const bool *repeated,
				     const char *const *collisions, uint32_t index, int32_t partitions,
				     int32_t rf, struct meta_create_topic_result *result)
{
	const struct meta_create_topic *t = &req->topics[index];
	struct meta_fmt f;
	if (!meta_topic_name_valid(t->name)) {
		result->error = META_ERR_INVALID_TOPIC_EXCEPTION;
		result->error_message = "topic names are 1-249 of [a-zA-Z0-9._-], not . or ..";
		return KEEL_OK;
	}
	if (repeated[index]) {
		result->error = META_ERR_INVALID_REQUEST;
		result->error_message = "topic named twice in one request";
		return KEEL_OK;
	}
	if (meta_image_topic(&ctl->image, t->name) != NULL) {
		result->error = META_ERR_TOPIC_ALREADY_EXISTS;
		result->error_message = "topic already exists";
		return KEEL_OK;
	}
	const char *other = collisions[index];
	if (other != NULL) {
		struct meta_fmt *m = message(ctl, &f);
		meta_fmt_str(m, "topic name collides with '");
		meta_fmt_str(m, other);
		meta_fmt_str(m, "' ('.' and '_' are the same in metric names)");
		result->error = META_ERR_INVALID_TOPIC_EXCEPTION;
		result->error_message = text(m);
		return KEEL_OK;
	}
	if (partitions < 1 || (uint32_t)partitions > ctl->cfg.max_partitions_per_topic) {
		struct meta_fmt *m = message(ctl, &f);
		meta_fmt_str(m, "number of partitions must be between 1 and ");
		meta_fmt_u64(m, ctl->cfg.max_partitions_per_topic);
		result->error = META_ERR_INVALID_PARTITIONS;
		result->error_message = text(m);
		return KEEL_OK;
	}
	if (t->assignment_count > 0) {
		if (!manual_assignment_checked(ctl, t, result)) {
			return result->error == META_ERR_NONE ? KEEL_NOMEM : KEEL_OK;
		}
	} else if (rf == 0) {
		result->error = META_ERR_INVALID_REPLICATION_FACTOR;
		result->error_message = "replication factor must be at least 1 (0 was given)";
		return KEEL_OK;
	}
	uint32_t active = meta_active_broker_count(&ctl->image);
	if (t->assignment_count == 0 &&
	    (rf < 1 || rf > META_MAX_REPLICAS || (uint32_t)rf > active)) {
		struct meta_fmt *m = message(ctl, &f);
		meta_fmt_str(m, "replication factor ");
		meta_fmt_i64(m, rf);
		meta_fmt_str(m, " cannot be reached: ");
		meta_fmt_u64(m, active);
		meta_fmt_str(m, " active broker(s)");
		result->error = META_ERR_INVALID_REPLICATION_FACTOR;
		result->error_message = text(m);
		return KEEL_OK;
	}
	bool *config_repeated = t->config_count > 0 ? config_repeats(ctl, t) : NULL;
	if (t->config_count > 0 && config_repeated == NULL) {
		return KEEL_NOMEM;
	}
	for (uint32_t c = 0; c < t->config_count; c++) {
		const char *why = config_problem(t->configs[c].key, t->configs[c].value);
		if (why == NULL && t->configs[c].value == NULL) {
			why = "a new topic's config needs a value";
		}
		if (why == NULL && config_repeated[c]) {
			why = "config key given twice";
		}
		if (why != NULL) {
			result->error = META_ERR_INVALID_CONFIG;
			result->error_message = keyed_message(ctl, t->configs[c].key, why);
			return KEEL_OK;
		}
	}
	if ((size_t)ctl_room(ctl) < (size_t)1 + (size_t)partitions + t->config_count) {
		result->error = META_ERR_POLICY_VIOLATION;
		result->error_message = "too many partitions in one request; create fewer at once";
	}
	return KEEL_OK;
}

uint64_t ctl_stripe_start(const char *topic)
{
	/* A portable hash of the name (FNV-1a), so the same name places the
	 * same way on every machine. */
	uint64_t start = 0xcbf29ce484222325ull;
	for (const char *c = topic; *c != '\0'; c++) {
		start = (start ^ (uint8_t)*c) * 0x100000001b3ull;
	}
	return start;
}

static enum keel_err create_topic(struct meta_controller *ctl, const struct meta_create_topic *t,
				  int32_t partitions, int32_t rf,
				  struct meta_create_topic_result *result)
{
	int32_t bad = -1;
	const struct meta_replica_assignment **rows = NULL;
	int32_t *replicas = NULL;
	if (t->assignment_count > 0) {
		rows = manual_rows(ctl, t, &bad);
		if (rows == NULL) {
			return KEEL_NOMEM;
		}
		KEEL_ASSERT(bad == -1); /* manual_assignment_checked */
	} else {
		replicas = ctl_alloc(ctl, (size_t)partitions * (size_t)rf * sizeof(int32_t));
		if (replicas == NULL) {
			return KEEL_NOMEM;
		}
		bool nomem;
		bool placed = meta_place_replicas(&ctl->image, (uint32_t)partitions, (uint32_t)rf,
						  ctl_stripe_start(t->name), replicas, &nomem);
		if (nomem) {
			return KEEL_NOMEM;
		}
		KEEL_ASSERT(placed); /* check_new_topic counted the active brokers */
	}

	struct meta_record r;
	memset(&r, 0, sizeof(r));
	r.type = META_REC_TOPIC;
	r.topic.name = ctl_strdup(ctl, t->name);
	if (r.topic.name == NULL) {
		return KEEL_NOMEM;
	}
	new_topic_id(ctl, r.topic.topic_id);
	memcpy(result->topic_id, r.topic.topic_id, META_UUID_SIZE);
	enum keel_err err = ctl_emit(ctl, &r);
	for (int32_t p = 0; err == KEEL_OK && p < partitions; p++) {
		const int32_t *row = rows != NULL ? rows[p]->broker_ids
						  : &replicas[(size_t)p * (size_t)rf];
		err = ctl_emit_new_partition(ctl, result->topic_id, p, row, (uint32_t)rf);
	}
	for (uint32_t c = 0; err == KEEL_OK && c < t->config_count; c++) {
		err = emit_config(ctl, META_RESOURCE_TOPIC, t->name, t->configs[c].key,
				  t->configs[c].value);
	}
	return err;
}

enum keel_err meta_controller_create_topics(struct meta_controller *ctl, int64_t now_ms,
					    const struct meta_create_topics_request *req,
					    struct meta_create_topics_response *resp,
					    struct meta_batch **batch)
{
	(void)now_ms;
	ctl_begin_call(ctl);
	memset(resp, 0, sizeof(*resp));
	enum keel_err err = KEEL_OK;
	struct meta_create_topic_result *results =
		ctl_alloc(ctl, ((size_t)req->topic_count + 1) * sizeof(*results));
	if (results == NULL) {
		err = KEEL_NOMEM;
	}
	bool *repeated = results != NULL ? topic_repeats(ctl, req) : NULL;
	const char **collisions = repeated != NULL ? topic_collisions(ctl, req) : NULL;
	if (results != NULL && (repeated == NULL || collisions == NULL)) {
		err = KEEL_NOMEM;
	}
	for (uint32_t i = 0; err == KEEL_OK && i < req->topic_count; i++) {
		const struct meta_create_topic *t = &req->topics[i];
		int32_t partitions =
			t->num_partitions == -1 ? ctl->cfg.default_partitions : t->num_partitions;
		int32_t rf = t->replication_factor == -1 ? ctl->cfg.default_replication_factor
							 : t->replication_factor;
		if (t->assignment_count > 0) {
			/* A manual assignment gives both (checked in check_new_topic). */
			partitions = (int32_t)KEEL_MIN(t->assignment_count, (uint32_t)INT32_MAX);
			rf = (int32_t)t->assignments[0].broker_count;
		}
		results[i].name = t->name;
		results[i].num_partitions = partitions;
		results[i].replication_factor = (int16_t)rf;
		err = check_new_topic(ctl, req, repeated, collisions, i, partitions, rf,
				      &results[i]);
		if (err == KEEL_OK && results[i].error == META_ERR_NONE && !req->validate_only) {
			err = create_topic(ctl, t, partitions, rf, &results[i]);
		}
	}
	resp->topics = results;
	resp->topic_count = err == KEEL_OK ? req->topic_count : 0;
	ctl_finish_call(ctl, batch);
	return err;
}

/* ---- delete topics ---- */

enum keel_err meta_controller_delete_topics(struct meta_controller *ctl, int64_t now_ms,
					    const struct meta_delete_topics_request *req,
					    struct meta_delete_topics_response *resp,
					    struct meta_batch **batch)
{
	(void)now_ms;
	ctl_begin_call(ctl);
	memset(resp, 0, sizeof(*resp));
	enum keel_err err = KEEL_OK;
	struct meta_delete_topic_result *results =
		ctl_alloc(ctl, ((size_t)req->name_count + 1) * sizeof(*results));
	if (results == NULL) {
		err = KEEL_NOMEM;
	}
	for (uint32_t i = 0; err == KEEL_OK && i < req->name_count; i++) {
		results[i].name = req->names[i];
		const struct meta_topic *t = meta_image_topic(&ctl->image, req->names[i]);
		if (t == NULL) {
			results[i].error = META_ERR_UNKNOWN_TOPIC_OR_PARTITION;
			results[i].error_message = "no such topic";
			continue;
		}
		if (ctl_room(ctl) < 1) {
			results[i].error = META_ERR_POLICY_VIOLATION;
			results[i].error_message = "too many topics in one request; retry";
			continue;
		}
		memcpy(results[i].topic_id, t->id, META_UUID_SIZE);
		struct meta_record r;
		memset(&r, 0, sizeof(r));
		r.type = META_REC_REMOVE_TOPIC;
		memcpy(r.remove_topic.topic_id, t->id, META_UUID_SIZE);
		err = ctl_emit(ctl, &r);
	}
	resp->results = results;
	resp->result_count = err == KEEL_OK ? req->name_count : 0;
	ctl_finish_call(ctl, batch);
	return err;
}

/* ---- alter configs ---- */

static void check_config_resource(struct meta_controller *ctl,
				  const struct meta_alter_config_resource *res,
				  struct meta_alter_config_result *result)
{
	if (res->resource_type == META_RESOURCE_TOPIC) {
		if (meta_image_topic(&ctl->image, res->resource_name) == NULL) {
			result->error = META_ERR_UNKNOWN_TOPIC_OR_PARTITION;
			result->error_message = "no such topic";
			return;
		}
	} else if (res->resource_type != META_RESOURCE_BROKER || res->resource_name == NULL ||
		   strlen(res->resource_name) > META_MAX_SHORT_STRING) {
		result->error = META_ERR_INVALID_REQUEST;
		result->error_message = "unknown resource type or bad resource name";
		return;
	}
	for (uint32_t e = 0; e < res->entry_count; e++) {
		const char *why = config_problem(res->entries[e].key, res->entries[e].value);
		if (why != NULL) {
			result->error = META_ERR_INVALID_CONFIG;
			result->error_message = keyed_message(ctl, res->entries[e].key, why);
			return;
		}
	}
	if (ctl_room(ctl) < res->entry_count) {
		result->error = META_ERR_POLICY_VIOLATION;
		result->error_message = "too many config changes in one request";
	}
}

static enum keel_err apply_config_resource(struct meta_controller *ctl,
					   const struct meta_alter_config_resource *res)
{
	for (uint32_t e = 0; e < res->entry_count; e++) {
		const char *key = res->entries[e].key;
		const char *value = res->entries[e].value;
		const char *cur =
			meta_image_config(&ctl->image, res->resource_type, res->resource_name, key);
		if ((value == NULL && cur == NULL) ||
		    (value != NULL && cur != NULL && strcmp(value, cur) == 0)) {
			continue; /* nothing to change */
		}
		enum keel_err err =
			emit_config(ctl, res->resource_type, res->resource_name, key, value);
		if (err != KEEL_OK) {
			return err;
		}
	}
	return KEEL_OK;
}

enum keel_err meta_controller_alter_configs(struct meta_controller *ctl, int64_t now_ms,
					    const struct meta_alter_configs_request *req,
					    struct meta_alter_configs_response *resp,
					    struct meta_batch **batch)
{
	(void)now_ms;
	ctl_begin_call(ctl);
	memset(resp, 0, sizeof(*resp));
	enum keel_err err = KEEL_OK;
	struct meta_alter_config_result *results =
		ctl_alloc(ctl, ((size_t)req->resource_count + 1) * sizeof(*results));
	if (results == NULL) {
		err = KEEL_NOMEM;
	}
	for (uint32_t i = 0; err == KEEL_OK && i < req->resource_count; i++) {
		const struct meta_alter_config_resource *res = &req->resources[i];
		results[i].resource_type = res->resource_type;
		results[i].resource_name = res->resource_name;
		check_config_resource(ctl, res, &results[i]);
		if (results[i].error == META_ERR_NONE && !req->validate_only) {
			err = apply_config_resource(ctl, res);
		}
	}
	if (err == KEEL_OK && ctl->out.count > 0) {
		/* unclean.leader.election.enable may have turned on. */
		ctl->reconcile_pending = true;
		err = ctl_run_pending_elections(ctl);
	}
	resp->results = results;
	resp->result_count = err == KEEL_OK ? req->resource_count : 0;
	ctl_finish_call(ctl, batch);
	return err;
}

/* ---- AlterPartition ---- */

static int16_t check_alter(const struct meta_image *img, int32_t broker_id,
			   const struct meta_partition *p, const struct meta_alter_partition_item *it)
{
	if (it->leader_epoch != p->leader_epoch) {
		return META_ERR_FENCED_LEADER_EPOCH;
	}
	if (broker_id != p->leader) {
		return META_ERR_INVALID_REQUEST;
	}
	if (it->partition_epoch != p->partition_epoch) {
		return META_ERR_INVALID_UPDATE_VERSION;
	}
	if (it->leader_recovery_state > META_RECOVERING ||
	    (it->leader_recovery_state == META_RECOVERING &&
	     p->leader_recovery_state == META_RECOVERED) ||
	    (it->leader_recovery_state == META_RECOVERING && it->new_isr_count > 1)) {
		return META_ERR_INVALID_REQUEST;
	}
	if (it->new_isr_count == 0 || !meta_broker_list_valid(it->new_isr, it->new_isr_count) ||
	    !meta_list_contains(it->new_isr, it->new_isr_count, p->leader)) {
		return META_ERR_INVALID_REQUEST;
	}
	for (uint32_t i = 0; i < it->new_isr_count; i++) {
		if (!meta_list_contains(p->replicas, p->replica_count, it->new_isr[i])) {
			return META_ERR_INVALID_REQUEST;
		}
	}
	for (uint32_t i = 0; i < it->new_isr_count; i++) {
		if (!meta_image_broker_active(img, it->new_isr[i])) {
			return META_ERR_INELIGIBLE_REPLICA;
		}
	}
	return META_ERR_NONE;
}

static bool isr_equal(const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb)
{
	return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof(int32_t)) == 0);
}

/* Fills a result with the partition's current state (lists copied). */
static enum keel_err fill_state(struct meta_controller *ctl, const struct meta_partition *p,
				struct meta_alter_partition_result *r)
{
	r->leader = p->leader;
	r->leader_epoch = p->leader_epoch;
	r->partition_epoch = p->partition_epoch;
	r->leader_recovery_state = p->leader_recovery_state;
	int32_t *isr = ctl_alloc(ctl, ((size_t)p->isr_count + 1) * sizeof(int32_t));
	if (isr == NULL) {
		return KEEL_NOMEM;
	}
	if (p->isr_count > 0) {
		memcpy(isr, p->isr, (size_t)p->isr_count * sizeof(int32_t));
	}
	r->isr = isr;
	r->isr_count = p->isr_count;
	return KEEL_OK;
}

static enum keel_err alter_one(struct meta_controller *ctl, int32_t broker_id,
			       const struct meta_topic *t, const struct meta_alter_partition_item *it,
			       struct meta_alter_partition_result *r)
{
	r->partition_id = it->partition_id;
	r->leader = META_NO_LEADER;
	if (t == NULL) {
		r->error = META_ERR_UNKNOWN_TOPIC_ID;
		return KEEL_OK;
	}
	if (it->partition_id < 0 || (uint32_t)it->partition_id >= t->partition_count) {
		r->error = META_ERR_UNKNOWN_TOPIC_OR_PARTITION;
		return KEEL_OK;
	}
	const struct meta_partition *p = &t->partitions[it->partition_id];
	r->error = check_alter(&ctl->image, broker_id, p, it);
	bool change = r->error == META_ERR_NONE &&
		      (!isr_equal(it->new_isr, it->new_isr_count, p->isr, p->isr_count) ||
		       it->leader_recovery_state != p->leader_recovery_state);
	if (change && ctl_room(ctl) < 1) {
		r->error = META_ERR_INVALID_UPDATE_VERSION; /* retry with fresh state */
		change = false;
	}
	if (change) {
		struct meta_partition_change_record pc;
		memset(&pc, 0, sizeof(pc));
		memcpy(pc.topic_id, t->id, META_UUID_SIZE);
		pc.partition_id = it->partition_id;
		pc.partition_epoch = p->partition_epoch + 1;
		pc.leader = p->leader;
		if (!isr_equal(it->new_isr, it->new_isr_count, p->isr, p->isr_count)) {
			pc.fields |= META_PC_ISR;
			pc.isr = it->new_isr;
			pc.isr_count = it->new_isr_count;
		}
		if (it->leader_recovery_state != p->leader_recovery_state) {
			pc.fields |= META_PC_RECOVERY;
			pc.leader_recovery_state = it->leader_recovery_state;
		}
		enum keel_err err = ctl_emit_partition_change(ctl, &pc);
		if (err == KEEL_OK) {
			/* An adding replica may have joined the ISR. */
			err = ctl_complete_reassignment(ctl, t, (uint32_t)it->partition_id);
		}
		if (err != KEEL_OK) {
			return err;
		}
		p = &t->partitions[it->partition_id];
	}
	return fill_state(ctl, p, r);
}

enum keel_err meta_controller_alter_partition(struct meta_controller *ctl, int64_t now_ms,
					      const struct meta_alter_partition_request *req,
					      struct meta_alter_partition_response *resp,
					      struct meta_batch **batch)
{
	(void)now_ms;
	ctl_begin_call(ctl);
	memset(resp, 0, sizeof(*resp));
	enum keel_err err = KEEL_OK;
	const struct meta_broker *b = meta_image_broker(&ctl->image, req->broker_id);
	if (b == NULL || b->epoch != req->broker_epoch) {
		resp->error = b == NULL ? META_ERR_BROKER_ID_NOT_REGISTERED
					: META_ERR_STALE_BROKER_EPOCH;
		resp->error_message = "the requesting broker's epoch is not current";
		ctl_finish_call(ctl, batch);
		return KEEL_OK;
	}
	struct meta_alter_partition_topic_result *topics =
		ctl_alloc(ctl, ((size_t)req->topic_count + 1) * sizeof(*topics));
	if (topics == NULL) {
		err = KEEL_NOMEM;
	}
	for (uint32_t i = 0; err == KEEL_OK && i < req->topic_count; i++) {
		const struct meta_alter_partition_topic *rt = &req->topics[i];
		memcpy(topics[i].topic_id, rt->topic_id, META_UUID_SIZE);
		struct meta_alter_partition_result *parts =
			ctl_alloc(ctl, ((size_t)rt->partition_count + 1) * sizeof(*parts));
		if (parts == NULL) {
			err = KEEL_NOMEM;
			break;
		}
		topics[i].partitions = parts;
		topics[i].partition_count = rt->partition_count;
		for (uint32_t j = 0; err == KEEL_OK && j < rt->partition_count; j++) {
			/* Look the topic up per item: an emit may not move it, but be
			 * explicit that no pointer is held across a change. */
			const struct meta_topic *t = meta_image_topic_by_id(&ctl->image, rt->topic_id);
			err = alter_one(ctl, req->broker_id, t, &rt->partitions[j], &parts[j]);
		}
	}
	resp->topics = topics;
	resp->topic_count = err == KEEL_OK ? req->topic_count : 0;
	ctl_finish_call(ctl, batch);
	return err;
}
