/*
 * groups.c — the group APIs on a broker (groups.h has the rules): finding
 * the coordinator, routing each request to the group coordinator of
 * src/group, and keeping group state in __consumer_offsets.
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "broker/groups.h"
#include "group/records.h"
#include "meta/proto.h"
#include "meta/record.h"

#define ALLOC_ARRAY(arena, ptr, n) ((ptr) = keel_arena_alloc((arena), (size_t)(n) * sizeof(*(ptr))))
#define LOAD_CHUNK_BYTES           (1u << 20)
#define CREATE_RETRY_MS            1000

void broker_groups_init(struct broker_core *core)
{
	struct broker_groups *bg = calloc(1, sizeof(*bg));
	KEEL_ASSERT(bg != NULL);
	struct group_coord_config cfg;
	group_coord_config_default(&cfg);
	group_coord_init(&bg->coord, &cfg);
	bg->create_asked_ms = INT64_MIN / 2;
	bg->expire_checked_ms = INT64_MIN / 2;
	core->groups = bg;
}

void broker_groups_close(struct broker_core *core)
{
	if (core->groups == NULL) {
		return;
	}
	group_coord_close(&core->groups->coord);
	free(core->groups->parts);
	free(core->groups);
	core->groups = NULL;
}

void broker_groups_set_incarnation(struct broker_core *core, uint64_t incarnation)
{
	core->groups->coord.config.incarnation = incarnation;
}

bool broker_partition_committed(const struct broker_partition *p, int64_t offset)
{
#ifdef KEEL_PLANT_BUG_GROUP_COMMIT_BEFORE_HW
	/* PLANTED BUG (tests only): a group write is answered once the
	 * coordinator alone has it durable, not when the high watermark covers
	 * it; the coordinator's successor may not have it. */
	return p->open && p->sync_err == KEEL_OK && plog_durable_offset(&p->log) >= offset &&
	       p->leader;
#else
	return p->open && p->sync_err == KEEL_OK && plog_durable_offset(&p->log) >= offset &&
	       p->leader && p->high_watermark >= offset;
#endif
}

bool broker_groups_handles(int16_t api_key)
{
	switch (api_key) {
	case KAFKA_API_FIND_COORDINATOR:
	case KAFKA_API_JOIN_GROUP:
	case KAFKA_API_SYNC_GROUP:
	case KAFKA_API_HEARTBEAT:
	case KAFKA_API_LEAVE_GROUP:
	case KAFKA_API_OFFSET_COMMIT:
	case KAFKA_API_OFFSET_FETCH:
	case KAFKA_API_LIST_GROUPS:
	case KAFKA_API_DESCRIBE_GROUPS:
	case KAFKA_API_DELETE_GROUPS:
	case KAFKA_API_OFFSET_DELETE:
		return true;
	default:
		return false;
	}
}

/* ---- small helpers ---- */

static const char *cstr(struct keel_arena *arena, struct kafka_str s)
{
	if (s.len < 0) {
		return NULL;
	}
	char *c = keel_arena_alloc(arena, (size_t)s.len + 1);
	if (c == NULL) {
		return NULL;
	}
	if (s.len > 0) {
		memcpy(c, s.ptr, (size_t)s.len);
	}
	c[s.len] = '\0';
	return c;
}

static const char *cstr_nonnull(struct keel_arena *arena, struct kafka_str s)
{
	const char *c = cstr(arena, s);
	return c != NULL ? c : "";
}

/* An arena copy as a view ("" when s is NULL and !nullable). */
static struct kafka_str arena_str(struct keel_arena *arena, const char *s, bool nullable)
{
	if (s == NULL) {
		return nullable ? KAFKA_STR_NULL : kafka_str("");
	}
	size_t n = strlen(s);
	char *c = keel_arena_dup(arena, s, n + 1);
	return c != NULL ? (struct kafka_str){c, (int32_t)n} : kafka_str("");
}

static struct kafka_bytes arena_bytes(struct keel_arena *arena, const struct group_bytes *b)
{
	if (b->len <= 0) {
		return (struct kafka_bytes){(const uint8_t *)"", 0};
	}
	uint8_t *c = keel_arena_dup(arena, b->ptr, (size_t)b->len);
	return c != NULL ? (struct kafka_bytes){c, b->len}
	                 : (struct kafka_bytes){(const uint8_t *)"", 0};
}

static const struct meta_topic *offsets_topic(const struct broker_core *core)
{
	return core->has_image ? meta_image_topic(&core->image, GROUP_OFFSETS_TOPIC) : NULL;
}

static void mark_dirty(struct broker_core *core, struct broker_partition *p)
{
	if (!p->dirty) {
		p->dirty = true;
		p->sync_err = KEEL_OK;
		core->dirty_count++;
	}
}

/* Which offsets partition holds the group, and whether this broker serves
 * it: KAFKA_NONE (*partition set), or the error a group request gets. */
static int16_t owner(struct broker_core *core, const char *group_id, int32_t *partition)
{
	struct broker_groups *bg = core->groups;
	*partition = -1;
	if (group_id == NULL || group_id[0] == '\0') {
		return KAFKA_INVALID_GROUP_ID;
	}
	const struct meta_topic *t = offsets_topic(core);
	if (t == NULL || t->partition_count == 0) {
		bg->want_create = true;
		return KAFKA_COORDINATOR_NOT_AVAILABLE;
	}
	int32_t p = group_partition_for(group_id, strlen(group_id), (int32_t)t->partition_count);
	struct broker_partition *bp =
	        broker_core_partition(core, kafka_str(GROUP_OFFSETS_TOPIC), p);
	if (bp == NULL || !bp->leader || !bp->open || bp->log.state != PLOG_OPEN) {
		return KAFKA_NOT_COORDINATOR;
	}
	if (bg->parts == NULL || p >= bg->partition_count || !bg->parts[p].loaded) {
		return KAFKA_COORDINATOR_LOAD_IN_PROGRESS;
	}
	*partition = p;
	return KAFKA_NONE;
}

static struct broker_partition *offsets_partition(struct broker_core *core, int32_t p)
{
	return broker_core_partition(core, kafka_str(GROUP_OFFSETS_TOPIC), p);
}

/* Appends one batch to an offsets partition; KEEL_OK and *last set. */
static enum keel_err append_batch(struct broker_core *core, int32_t partition,
                                  struct group_batch *b, int64_t *last)
{
	struct broker_partition *p = offsets_partition(core, partition);
	if (p == NULL || !p->open || p->log.state != PLOG_OPEN) {
		return KEEL_NOTLEADER;
	}
	enum keel_err err = group_batch_finish(b);
	if (err != KEEL_OK) {
		return err;
	}
	struct plog_append_info info;
	err = plog_append(&p->log, b->w.data, b->w.size, p->leader_epoch, &info);
	if (err != KEEL_OK) {
		return err;
	}
	mark_dirty(core, p);
	*last = info.last_offset;
	return KEEL_OK;
}

/* Appends the batch and sets up the wait for its sync: KAFKA_NONE, or the
 * error the request gets. */
static int16_t append_and_wait(struct broker_core *core, int32_t partition, struct group_batch *b,
                               struct keel_arena *arena, struct broker_produce_wait *wait)
{
	int64_t last = 0;
	if (append_batch(core, partition, b, &last) != KEEL_OK) {
		return KAFKA_COORDINATOR_NOT_AVAILABLE;
	}
	memset(wait, 0, sizeof(*wait));
	if (ALLOC_ARRAY(arena, wait->parts, 1) == NULL) {
		return KAFKA_UNKNOWN_SERVER_ERROR;
	}
	wait->parts[0] = offsets_partition(core, partition);
	wait->count = 1;
	wait->needs_sync = true;
	wait->last_offset = last;
	return KAFKA_NONE;
}

static void add_group_record(struct group_batch *b, const struct group *g, bool tombstone)
{
	struct keel_wbuf k, v;
	keel_wbuf_init_dynamic(&k, 256, 1u << 20);
	keel_wbuf_init_dynamic(&v, 1024, 16u << 20);
	group_encode_group_key(&k, g->group_id);
	if (!tombstone) {
		group_encode_group_value(&v, g);
	}
	group_batch_add(b, k.data, k.size, v.data, tombstone ? -1 : (int32_t)v.size);
	keel_wbuf_free(&k);
	keel_wbuf_free(&v);
}

static void add_offset_record(struct group_batch *b, const char *group_id, const char *topic,
                              int32_t partition, const struct group_offset *o)
{
	struct keel_wbuf k, v;
	keel_wbuf_init_dynamic(&k, 256, 1u << 20);
	keel_wbuf_init_dynamic(&v, 256, 1u << 20);
	group_encode_offset_key(&k, group_id, topic, partition);
	if (o != NULL) {
		group_encode_offset_value(&v, o->offset, o->leader_epoch, o->metadata,
		                          o->commit_timestamp_ms);
	}
	group_batch_add(b, k.data, k.size, v.data, o != NULL ? (int32_t)v.size : -1);
	keel_wbuf_free(&k);
	keel_wbuf_free(&v);
}

/* Writes the metadata record of every group whose state is worth recording. */
static void write_dirty_groups(struct broker_core *core, int64_t wall_ms)
{
	struct group *g;
	while ((g = group_coord_take_dirty(&core->groups->coord)) != NULL) {
		struct group_batch b;
		group_batch_init(&b, wall_ms);
		add_group_record(&b, g, false);
		int64_t last = 0;
		(void)append_batch(core, g->offsets_partition, &b, &last);
		group_batch_free(&b);
	}
}

/* ---- loading ---- */

struct load_ctx {
	struct broker_core *core;
	int32_t partition;
	struct keel_arena arena;
};

static void load_record(void *arg, const uint8_t *key, int32_t key_len, const uint8_t *value,
                        int32_t value_len)
{
	struct load_ctx *lc = arg;
	struct group_coord *c = &lc->core->groups->coord;
	struct group_record r;
	keel_arena_reset(&lc->arena);
	if (group_record_decode(key, key_len, value, value_len, &lc->arena, &r) != KEEL_OK) {
		return; /* not ours, or malformed: skipped */
	}
	lc->core->groups->loaded_records++;
	if (r.kind == GROUP_RECORD_GROUP) {
		if (r.tombstone) {
			struct group *g = group_coord_find(c, r.group_id);
			while (g != NULL && g->offset_count > 0) {
				group_offset_remove(g, g->offsets[0].topic,
				                    g->offsets[0].partition);
			}
			group_coord_load_group_delete(c, r.group_id);
		} else {
			/* A record listing no members was written as the group
			 * turned Empty: its timestamp is when. */
			(void)group_coord_load_group(c, r.group_id, lc->partition, r.protocol_type,
			                             r.generation, r.protocol_name, 0,
			                             r.member_count == 0 ? r.state_timestamp_ms
			                                                 : -1);
		}
		return;
	}
	if (r.tombstone) {
		struct group *g = group_coord_find(c, r.group_id);
		if (g != NULL) {
			group_offset_remove(g, r.topic, r.partition);
		}
		return;
	}
	(void)group_offset_commit(c, r.group_id, lc->partition, r.topic, r.partition, r.offset,
	                          r.leader_epoch, r.metadata, r.commit_timestamp_ms);
}

/* Reads the committed part of an offsets partition into the coordinator. */
static void load_partition(struct broker_core *core, struct broker_partition *p)
{
	struct load_ctx lc = {core, p->index, {0}};
	keel_arena_init(&lc.arena, 4096);
	int64_t at = plog_log_start_offset(&p->log);
	int64_t end = plog_durable_offset(&p->log);
	uint8_t *buf = NULL;
	size_t cap = 0;
	while (at < end) {
		struct plog_read_result r;
		if (plog_read(&p->log, at, end, LOAD_CHUNK_BYTES, &r) != KEEL_OK || r.size == 0) {
			break;
		}
		if (r.size > cap) {
			uint8_t *n = realloc(buf, (size_t)r.size);
			if (n == NULL) {
				break;
			}
			buf = n;
			cap = (size_t)r.size;
		}
		if (plog_read_copy(&p->log, &r, buf) != KEEL_OK) {
			break;
		}
		size_t pos = 0;
		struct plog_batch bt;
		while (pos < r.size && plog_batch_next(buf, (size_t)r.size, &pos, UINT32_MAX >> 1,
		                                       &bt) == PLOG_BATCH_OK) {
			(void)group_batch_records(bt.data, bt.size, load_record, &lc);
		}
		if (r.next_offset <= at) {
			break;
		}
		at = r.next_offset;
	}
	free(buf);
	keel_arena_close(&lc.arena);
}

uint64_t broker_offsets_segment_bytes(const struct broker_core *core)
{
	const char *v = meta_image_config(&core->image, META_RESOURCE_BROKER, "",
	                                  "offsets.topic.segment.bytes");
	long long n = v != NULL ? strtoll(v, NULL, 10) : 0;
	return n >= 4096 ? (uint64_t)n : BROKER_OFFSETS_SEGMENT_DEFAULT;
}

void broker_groups_image_changed(struct broker_core *core)
{
	struct broker_groups *bg = core->groups;
	const struct meta_topic *t = offsets_topic(core);
	int32_t n = t != NULL ? (int32_t)t->partition_count : 0;
	if (n != bg->partition_count) {
		/* the topic appeared, grew, or went away: start over */
		for (int32_t i = 0; i < bg->partition_count; i++) {
			if (bg->parts[i].loaded) {
				group_coord_unload(&bg->coord, i);
			}
		}
		free(bg->parts);
		bg->parts = n > 0 ? calloc((size_t)n, sizeof(*bg->parts)) : NULL;
		bg->partition_count = bg->parts != NULL ? n : 0;
	}
	if (n > 0) {
		bg->want_create = false;
	}
	for (int32_t i = 0; i < bg->partition_count; i++) {
		struct broker_partition *p = offsets_partition(core, i);
		bool leads = p != NULL && p->leader && p->open && p->log.state == PLOG_OPEN;
		if (leads && !bg->parts[i].loaded) {
			p->log.config.segment_bytes = broker_offsets_segment_bytes(core);
			load_partition(core, p);
			bg->parts[i] = (struct broker_offsets_part){.loaded = true};
		} else if (!leads && bg->parts[i].loaded) {
			group_coord_unload(&bg->coord, i);
			bg->parts[i] = (struct broker_offsets_part){.loaded = false};
		}
	}
}

bool broker_groups_take_create(struct broker_core *core, int64_t now_ms, struct keel_wbuf *body,
                               enum meta_api *api)
{
	struct broker_groups *bg = core->groups;
	if (!bg->want_create || offsets_topic(core) != NULL ||
	    now_ms - bg->create_asked_ms < CREATE_RETRY_MS || !core->has_image) {
		return false;
	}
	bg->create_asked_ms = now_ms;
	const char *v = meta_image_config(&core->image, META_RESOURCE_BROKER, "",
	                                  "offsets.topic.num.partitions");
	long parts = v != NULL ? strtol(v, NULL, 10) : BROKER_OFFSETS_PARTITIONS_DEFAULT;
	v = meta_image_config(&core->image, META_RESOURCE_BROKER, "",
	                      "offsets.topic.replication.factor");
	long rf = v != NULL ? strtol(v, NULL, 10) : BROKER_OFFSETS_RF_DEFAULT;
	long live = 0;
	for (uint32_t i = 0; i < core->image.broker_count; i++) {
		live += meta_broker_active(core->image.brokers[i]) ? 1 : 0;
	}
	parts = parts < 1 || parts > 1000 ? BROKER_OFFSETS_PARTITIONS_DEFAULT : parts;
	rf = KEEL_MAX(1, KEEL_MIN(KEEL_MIN(rf, live), INT16_MAX));
	static const struct meta_config_kv configs[] = {{"cleanup.policy", "compact"}};
	struct meta_create_topic t = {GROUP_OFFSETS_TOPIC, (int32_t)parts, (int16_t)rf, configs, 1, NULL, 0};
	struct meta_create_topics_request m = {&t, 1, false};
	*api = META_API_CREATE_TOPICS;
	return meta_encode_create_topics_request(body, &m) == KEEL_OK;
}

/* ---- FindCoordinator ---- */

static void find_one(struct broker_core *core, struct kafka_str key, int8_t key_type,
                     struct keel_arena *arena, struct kafka_coordinator *out)
{
	memset(out, 0, sizeof(*out));
	out->key = key;
	out->node_id = -1;
	out->host = kafka_str("");
	out->port = -1;
	out->error_message = KAFKA_STR_NULL;
	if (key_type != KAFKA_COORDINATOR_GROUP) {
		out->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
		out->error_message = kafka_str("keel has no transaction coordinator");
		return;
	}
	const char *group_id = cstr_nonnull(arena, key);
	const struct meta_topic *t = offsets_topic(core);
	if (group_id[0] == '\0') {
		out->error_code = KAFKA_INVALID_GROUP_ID;
		return;
	}
	if (t == NULL || t->partition_count == 0) {
		core->groups->want_create = true;
		out->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
		return;
	}
	int32_t p = group_partition_for(group_id, strlen(group_id), (int32_t)t->partition_count);
	int32_t leader = t->partitions[p].leader;
	const struct meta_broker *b =
	        leader != META_NO_LEADER ? meta_image_broker(&core->image, leader) : NULL;
	const struct meta_endpoint *ep = b != NULL && !b->fenced ? broker_endpoint(b) : NULL;
	if (ep == NULL) {
		out->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
		return;
	}
	out->node_id = leader;
	out->host = kafka_str(ep->host);
	out->port = ep->port;
	out->error_code = KAFKA_NONE;
}

static void find_coordinator(struct broker_core *core, const struct kafka_request *rq,
                             struct keel_arena *arena, struct kafka_find_coordinator_response *out)
{
	const struct kafka_find_coordinator_request *fr = &rq->body.find_coordinator;
	memset(out, 0, sizeof(*out));
	if (rq->header.api_version >= 4) {
		int32_t n = fr->coordinator_keys.count;
		if (n > 0 && ALLOC_ARRAY(arena, out->coordinators, n) == NULL) {
			return;
		}
		for (int32_t i = 0; i < n; i++) {
			find_one(core, fr->coordinator_keys.items[i], fr->key_type, arena,
			         &out->coordinators[i]);
		}
		out->coordinator_count = KEEL_MAX(n, 0);
		return;
	}
	struct kafka_coordinator one;
	find_one(core, fr->key, fr->key_type, arena, &one);
	out->error_code = one.error_code;
	out->error_message = one.error_message;
	out->node_id = one.node_id;
	out->host = one.host;
	out->port = one.port;
}

/* ---- JoinGroup, SyncGroup ---- */

static void join_response(const struct group_join_result *r, int16_t version,
                          struct keel_arena *arena, struct kafka_join_group_response *out)
{
	memset(out, 0, sizeof(*out));
	out->error_code = r->error;
	out->generation_id = r->generation;
	out->protocol_type = arena_str(arena, r->protocol_type, true);
	out->protocol_name = arena_str(arena, r->protocol_name, version >= 7);
	out->leader = arena_str(arena, r->leader_id, false);
	out->member_id = arena_str(arena, r->member_id, false);
	if (r->member_count > 0 && ALLOC_ARRAY(arena, out->members, r->member_count) != NULL) {
		for (uint32_t i = 0; i < r->member_count; i++) {
			out->members[i].member_id =
			        arena_str(arena, r->members[i].member_id, false);
			out->members[i].group_instance_id =
			        arena_str(arena, r->members[i].instance_id, true);
			out->members[i].metadata = arena_bytes(arena, &r->members[i].metadata);
		}
		out->member_count = (int32_t)r->member_count;
	}
}

static void sync_response(const struct group_sync_result *r, struct keel_arena *arena,
                          struct kafka_sync_group_response *out)
{
	memset(out, 0, sizeof(*out));
	out->error_code = r->error;
	out->protocol_type = arena_str(arena, r->protocol_type, true);
	out->protocol_name = arena_str(arena, r->protocol_name, true);
	out->assignment = arena_bytes(arena, &r->assignment);
}

static enum broker_group_outcome join_group(struct broker_core *core,
                                            const struct broker_group_ctx *ctx,
                                            const struct kafka_request *rq,
                                            struct keel_arena *arena,
                                            struct kafka_join_group_response *out)
{
	const struct kafka_join_group_request *jr = &rq->body.join_group;
	struct group_join_result res = {0};
	const char *group_id = cstr_nonnull(arena, jr->group_id);
	int32_t partition = -1;
	int16_t err = owner(core, group_id, &partition);
	if (err != KAFKA_NONE) {
		res.error = err;
		res.generation = -1;
		join_response(&res, rq->header.api_version, arena, out);
		out->member_id = jr->member_id.len >= 0 ? jr->member_id : kafka_str("");
		return BROKER_GROUP_DONE;
	}
	struct group_protocol_in *protocols = NULL;
	int32_t n = KEEL_MAX(jr->protocol_count, 0);
	if (n > 0 && ALLOC_ARRAY(arena, protocols, n) == NULL) {
		n = 0;
	}
	for (int32_t i = 0; i < n; i++) {
		protocols[i] = (struct group_protocol_in){
		        cstr_nonnull(arena, jr->protocols[i].name), jr->protocols[i].metadata.ptr,
		        jr->protocols[i].metadata.len};
	}
	struct group_join_request g = {
	        .group_id = group_id,
	        .offsets_partition = partition,
	        .member_id = cstr_nonnull(arena, jr->member_id),
	        .instance_id = cstr(arena, jr->group_instance_id),
	        .client_id = cstr_nonnull(arena, rq->header.client_id),
	        .client_host = ctx->client_host,
	        .session_timeout_ms = jr->session_timeout_ms,
	        .rebalance_timeout_ms = jr->rebalance_timeout_ms,
	        .protocol_type = cstr_nonnull(arena, jr->protocol_type),
	        .protocols = protocols,
	        .protocol_count = (uint32_t)n,
	        .version = rq->header.api_version,
	        .waiter = ctx->waiter,
	};
	bool done = group_join(&core->groups->coord, ctx->now_ms, &g, &res);
	write_dirty_groups(core, ctx->wall_ms);
	if (!done) {
		return BROKER_GROUP_PARKED;
	}
	join_response(&res, rq->header.api_version, arena, out);
	group_join_result_clear(&res);
	return BROKER_GROUP_DONE;
}

static enum broker_group_outcome sync_group(struct broker_core *core,
                                            const struct broker_group_ctx *ctx,
                                            const struct kafka_request *rq,
                                            struct keel_arena *arena,
                                            struct kafka_sync_group_response *out)
{
	const struct kafka_sync_group_request *sr = &rq->body.sync_group;
	struct group_sync_result res = {0};
	const char *group_id = cstr_nonnull(arena, sr->group_id);
	int32_t partition = -1;
	res.error = owner(core, group_id, &partition);
	if (res.error != KAFKA_NONE) {
		sync_response(&res, arena, out);
		return BROKER_GROUP_DONE;
	}
	struct group_assignment_in *as = NULL;
	int32_t n = KEEL_MAX(sr->assignment_count, 0);
	if (n > 0 && ALLOC_ARRAY(arena, as, n) == NULL) {
		n = 0;
	}
	for (int32_t i = 0; i < n; i++) {
		as[i] = (struct group_assignment_in){
		        cstr_nonnull(arena, sr->assignments[i].member_id),
		        sr->assignments[i].assignment.ptr, sr->assignments[i].assignment.len};
	}
	struct group_sync_request g = {group_id,
	                               sr->generation_id,
	                               cstr_nonnull(arena, sr->member_id),
	                               cstr(arena, sr->group_instance_id),
	                               as,
	                               (uint32_t)n,
	                               ctx->waiter};
	bool done = group_sync(&core->groups->coord, ctx->now_ms, &g, &res);
	write_dirty_groups(core, ctx->wall_ms);
	if (!done) {
		return BROKER_GROUP_PARKED;
	}
	sync_response(&res, arena, out);
	group_sync_result_clear(&res);
	return BROKER_GROUP_DONE;
}

void broker_group_reply(const struct group_reply *reply, const struct kafka_request *rq,
                        struct keel_arena *arena, union kafka_response_body *out)
{
	if (reply->kind == GROUP_REPLY_JOIN) {
		KEEL_ASSERT(rq->header.api_key == KAFKA_API_JOIN_GROUP);
		join_response(&reply->join, rq->header.api_version, arena, &out->join_group);
	} else {
		KEEL_ASSERT(rq->header.api_key == KAFKA_API_SYNC_GROUP);
		sync_response(&reply->sync, arena, &out->sync_group);
	}
}

/* ---- Heartbeat, LeaveGroup ---- */

static void heartbeat(struct broker_core *core, const struct broker_group_ctx *ctx,
                      const struct kafka_request *rq, struct keel_arena *arena,
                      struct kafka_heartbeat_response *out)
{
	const struct kafka_heartbeat_request *hr = &rq->body.heartbeat;
	memset(out, 0, sizeof(*out));
	const char *group_id = cstr_nonnull(arena, hr->group_id);
	int32_t partition = -1;
	out->error_code = owner(core, group_id, &partition);
	if (out->error_code == KAFKA_NONE) {
		out->error_code = group_heartbeat(
		        &core->groups->coord, ctx->now_ms, group_id, hr->generation_id,
		        cstr_nonnull(arena, hr->member_id), cstr(arena, hr->group_instance_id));
	}
}

static void leave_group(struct broker_core *core, const struct broker_group_ctx *ctx,
                        const struct kafka_request *rq, struct keel_arena *arena,
                        struct kafka_leave_group_response *out)
{
	const struct kafka_leave_group_request *lr = &rq->body.leave_group;
	memset(out, 0, sizeof(*out));
	const char *group_id = cstr_nonnull(arena, lr->group_id);
	int32_t partition = -1;
	out->error_code = owner(core, group_id, &partition);
	if (out->error_code != KAFKA_NONE) {
		return;
	}
	struct group_coord *c = &core->groups->coord;
	if (rq->header.api_version < 3) {
		out->error_code = group_leave(c, ctx->now_ms, group_id,
		                              cstr_nonnull(arena, lr->member_id), NULL);
	} else if (lr->member_count > 0 &&
	           ALLOC_ARRAY(arena, out->members, lr->member_count) != NULL) {
		for (int32_t i = 0; i < lr->member_count; i++) {
			const struct kafka_member_identity *mi = &lr->members[i];
			out->members[i].member_id = mi->member_id;
			out->members[i].group_instance_id = mi->group_instance_id;
			out->members[i].error_code = group_leave(
			        c, ctx->now_ms, group_id, cstr_nonnull(arena, mi->member_id),
			        cstr(arena, mi->group_instance_id));
		}
		out->member_count = lr->member_count;
	}
	write_dirty_groups(core, ctx->wall_ms);
}

/* ---- OffsetCommit ---- */

static void commit_errors(struct kafka_offset_commit_response *out, int16_t code)
{
	for (int32_t t = 0; t < out->topic_count; t++) {
		for (int32_t i = 0; i < out->topics[t].partition_count; i++) {
			if (out->topics[t].partitions[i].error_code == KAFKA_NONE) {
				out->topics[t].partitions[i].error_code = code;
			}
		}
	}
}

static int16_t commit_partition_check(struct broker_core *core, struct kafka_str topic,
                                      const struct kafka_offset_commit_partition *cp)
{
	const struct meta_topic *t = NULL;
	if (topic.len > 0 && topic.len <= BROKER_TOPIC_MAX) {
		char name[BROKER_TOPIC_MAX + 1];
		memcpy(name, topic.ptr, (size_t)topic.len);
		name[topic.len] = '\0';
		t = meta_image_topic(&core->image, name);
	}
	if (t == NULL || cp->partition_index < 0 ||
	    (uint32_t)cp->partition_index >= t->partition_count) {
		return KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
	}
	if (cp->committed_metadata.len > BROKER_OFFSET_METADATA_MAX) {
		return KAFKA_OFFSET_METADATA_TOO_LARGE;
	}
	return KAFKA_NONE;
}

static enum broker_group_outcome
offset_commit(struct broker_core *core, const struct broker_group_ctx *ctx,
              const struct kafka_request *rq, struct keel_arena *arena,
              struct kafka_offset_commit_response *out, struct broker_produce_wait *wait)
{
	const struct kafka_offset_commit_request *cr = &rq->body.offset_commit;
	memset(out, 0, sizeof(*out));
	if (cr->topic_count > 0 && ALLOC_ARRAY(arena, out->topics, cr->topic_count) == NULL) {
		return BROKER_GROUP_DONE;
	}
	out->topic_count = KEEL_MAX(cr->topic_count, 0);
	for (int32_t t = 0; t < out->topic_count; t++) {
		const struct kafka_offset_commit_topic *ct = &cr->topics[t];
		struct kafka_offset_commit_topic_response *ot = &out->topics[t];
		ot->name = ct->name;
		ot->partition_count = 0;
		if (ct->partition_count > 0 &&
		    ALLOC_ARRAY(arena, ot->partitions, ct->partition_count) != NULL) {
			for (int32_t i = 0; i < ct->partition_count; i++) {
				ot->partitions[i].partition_index =
				        ct->partitions[i].partition_index;
				ot->partitions[i].error_code =
				        commit_partition_check(core, ct->name, &ct->partitions[i]);
			}
			ot->partition_count = ct->partition_count;
		}
	}
	const char *group_id = cstr_nonnull(arena, cr->group_id);
	int32_t partition = -1;
	int16_t err = owner(core, group_id, &partition);
	if (err == KAFKA_NONE) {
		err = group_offset_commit_check(
		        &core->groups->coord, ctx->now_ms, group_id, partition, cr->generation_id,
		        cstr_nonnull(arena, cr->member_id), cstr(arena, cr->group_instance_id));
	}
	if (err != KAFKA_NONE) {
		commit_errors(out, err);
		return BROKER_GROUP_DONE;
	}
	struct group_batch b;
	group_batch_init(&b, ctx->wall_ms);
	for (int32_t t = 0; t < out->topic_count; t++) {
		const struct kafka_offset_commit_topic *ct = &cr->topics[t];
		const char *topic = cstr_nonnull(arena, ct->name);
		for (int32_t i = 0; i < out->topics[t].partition_count; i++) {
			const struct kafka_offset_commit_partition *cp = &ct->partitions[i];
			if (out->topics[t].partitions[i].error_code != KAFKA_NONE) {
				continue;
			}
			struct group_offset o = {
			        NULL,
			        cp->partition_index,
			        cp->committed_offset,
			        cp->committed_leader_epoch,
			        (char *)cstr_nonnull(arena, cp->committed_metadata),
			        ctx->wall_ms};
			add_offset_record(&b, group_id, topic, cp->partition_index, &o);
		}
	}
	if (b.count == 0) {
		group_batch_free(&b);
		return BROKER_GROUP_DONE;
	}
	int16_t append_err = append_and_wait(core, partition, &b, arena, wait);
	group_batch_free(&b);
	if (append_err != KAFKA_NONE) {
		commit_errors(out, append_err);
		return BROKER_GROUP_DONE;
	}
	return BROKER_GROUP_SYNC;
}

/* The commit time kept in memory is the wall clock at the sync (the
 * record's is the request's, a moment earlier): what offset expiry counts
 * from for groups without members. */
static void commit_finish(struct broker_core *core, const struct kafka_request *rq, bool committed,
                          struct kafka_offset_commit_response *out)
{
	const struct kafka_offset_commit_request *cr = &rq->body.offset_commit;
	if (!committed) {
		commit_errors(out, KAFKA_COORDINATOR_NOT_AVAILABLE);
		return;
	}
	struct keel_arena a;
	keel_arena_init(&a, 4096);
	const char *group_id = cstr_nonnull(&a, cr->group_id);
	int32_t partition = -1;
	int16_t err = owner(core, group_id, &partition);
	for (int32_t t = 0; t < out->topic_count && err == KAFKA_NONE; t++) {
		const struct kafka_offset_commit_topic *ct = &cr->topics[t];
		const char *topic = cstr_nonnull(&a, ct->name);
		for (int32_t i = 0; i < out->topics[t].partition_count; i++) {
			const struct kafka_offset_commit_partition *cp = &ct->partitions[i];
			if (out->topics[t].partitions[i].error_code != KAFKA_NONE) {
				continue;
			}
			if (group_offset_commit(&core->groups->coord, group_id, partition, topic,
			                        cp->partition_index, cp->committed_offset,
			                        cp->committed_leader_epoch,
			                        cstr_nonnull(&a, cp->committed_metadata),
			                        core->groups->coord.wall_ms) != KEEL_OK) {
				out->topics[t].partitions[i].error_code =
				        KAFKA_UNKNOWN_SERVER_ERROR;
			}
		}
	}
	keel_arena_close(&a);
	if (err != KAFKA_NONE) {
		/* durable, but this broker no longer coordinates the group: the
		 * new coordinator reads it from the log */
		commit_errors(out, KAFKA_NONE);
	}
}

/* ---- OffsetFetch ---- */

static void fill_offset(const struct group_offset *o, struct kafka_offset_fetch_partition *out)
{
	memset(out, 0, sizeof(*out));
	out->partition_index = o->partition;
	out->committed_offset = o->offset;
	out->committed_leader_epoch = o->leader_epoch;
	out->metadata = kafka_str(o->metadata != NULL ? o->metadata : "");
}

static void fetch_partition(const struct group *g, const char *topic, int32_t partition,
                            struct kafka_offset_fetch_partition *out)
{
	memset(out, 0, sizeof(*out));
	out->partition_index = partition;
	out->committed_offset = -1;
	out->committed_leader_epoch = -1;
	out->metadata = kafka_str("");
	const struct group_offset *o = g != NULL ? group_offset_find(g, topic, partition) : NULL;
	if (o != NULL) {
		fill_offset(o, out);
	}
}

/* All of a group's offsets, grouped by topic (each offset visited once per
 * pass; topics found by a scan of the distinct ones). */
static void fetch_all(const struct group *g, struct keel_arena *arena,
                      struct kafka_offset_fetch_topic_response **topics, int32_t *count)
{
	*topics = NULL;
	*count = 0;
	uint32_t n = g != NULL ? g->offset_count : 0;
	uint32_t *topic_of = NULL;
	struct kafka_offset_fetch_topic_response *t = NULL;
	if (n == 0 || ALLOC_ARRAY(arena, t, n) == NULL || ALLOC_ARRAY(arena, topic_of, n) == NULL) {
		return;
	}
	uint32_t topic_count = 0;
	for (uint32_t i = 0; i < n; i++) {
		const char *name = g->offsets[i].topic;
		uint32_t k = 0;
		while (k < topic_count && !kafka_str_eq(t[k].name, name)) {
			k++;
		}
		if (k == topic_count) {
			t[topic_count++] = (struct kafka_offset_fetch_topic_response){
			        kafka_str(name), NULL, 0};
		}
		topic_of[i] = k;
		t[k].partition_count++;
	}
	for (uint32_t k = 0; k < topic_count; k++) {
		if (ALLOC_ARRAY(arena, t[k].partitions, t[k].partition_count) == NULL) {
			return;
		}
		t[k].partition_count = 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct kafka_offset_fetch_topic_response *tk = &t[topic_of[i]];
		fill_offset(&g->offsets[i], &tk->partitions[tk->partition_count++]);
	}
	*topics = t;
	*count = (int32_t)topic_count;
}

static int16_t fetch_group(struct broker_core *core, struct kafka_str group,
                           const struct kafka_offset_fetch_topic *topics, int32_t topic_count,
                           struct keel_arena *arena, struct kafka_offset_fetch_topic_response **out,
                           int32_t *out_count)
{
	*out = NULL;
	*out_count = 0;
	const char *group_id = cstr_nonnull(arena, group);
	int32_t partition = -1;
	int16_t err = owner(core, group_id, &partition);
	const struct group *g =
	        err == KAFKA_NONE ? group_coord_find(&core->groups->coord, group_id) : NULL;
	if (topic_count < 0) {
		if (err == KAFKA_NONE) {
			fetch_all(g, arena, out, out_count);
		}
		return err;
	}
	if (topic_count > 0 && ALLOC_ARRAY(arena, *out, topic_count) == NULL) {
		return KAFKA_UNKNOWN_SERVER_ERROR;
	}
	for (int32_t t = 0; t < topic_count; t++) {
		struct kafka_offset_fetch_topic_response *ot = &(*out)[t];
		const struct kafka_offset_fetch_topic *ft = &topics[t];
		const char *topic = cstr_nonnull(arena, ft->name);
		ot->name = ft->name;
		ot->partition_count = 0;
		int32_t n = ft->partition_indexes.count;
		if (n > 0 && ALLOC_ARRAY(arena, ot->partitions, n) == NULL) {
			continue;
		}
		for (int32_t i = 0; i < n; i++) {
			fetch_partition(g, topic, ft->partition_indexes.items[i],
			                &ot->partitions[i]);
			ot->partitions[i].error_code = err;
		}
		ot->partition_count = KEEL_MAX(n, 0);
	}
	*out_count = topic_count;
	return err;
}

static void offset_fetch(struct broker_core *core, const struct kafka_request *rq,
                         struct keel_arena *arena, struct kafka_offset_fetch_response *out)
{
	const struct kafka_offset_fetch_request *fr = &rq->body.offset_fetch;
	memset(out, 0, sizeof(*out));
	if (rq->header.api_version < 8) {
		out->error_code = fetch_group(core, fr->group_id, fr->topics, fr->topic_count,
		                              arena, &out->topics, &out->topic_count);
		return;
	}
	int32_t n = KEEL_MAX(fr->group_count, 0);
	if (n > 0 && ALLOC_ARRAY(arena, out->groups, n) == NULL) {
		return;
	}
	for (int32_t i = 0; i < n; i++) {
		struct kafka_offset_fetch_group_response *og = &out->groups[i];
		memset(og, 0, sizeof(*og));
		og->group_id = fr->groups[i].group_id;
		og->error_code = fetch_group(core, fr->groups[i].group_id, fr->groups[i].topics,
		                             fr->groups[i].topic_count, arena, &og->topics,
		                             &og->topic_count);
	}
	out->group_count = n;
}

/* ---- ListGroups, DescribeGroups, DeleteGroups ---- */

static void list_groups(struct broker_core *core, const struct kafka_request *rq,
                        struct keel_arena *arena, struct kafka_list_groups_response *out)
{
	const struct kafka_list_groups_request *lr = &rq->body.list_groups;
	struct group_coord *c = &core->groups->coord;
	memset(out, 0, sizeof(*out));
	if (c->group_count == 0 || ALLOC_ARRAY(arena, out->groups, c->group_count) == NULL) {
		return;
	}
	for (uint32_t i = 0; i < c->group_count; i++) {
		const struct group *g = c->groups[i];
		const char *state = group_state_name(g->state);
		bool wanted = lr->states_filter.count <= 0;
		for (int32_t k = 0; k < lr->states_filter.count && !wanted; k++) {
			wanted = kafka_str_eq(lr->states_filter.items[k], state);
		}
		if (!wanted) {
			continue;
		}
		struct kafka_listed_group *lg = &out->groups[out->group_count++];
		lg->group_id = arena_str(arena, g->group_id, false);
		lg->protocol_type = arena_str(arena, g->protocol_type, false);
		lg->group_state = kafka_str(state);
	}
}

static void describe_one(struct broker_core *core, struct kafka_str name, struct keel_arena *arena,
                         struct kafka_described_group *out)
{
	memset(out, 0, sizeof(*out));
	out->group_id = name;
	out->authorized_operations = INT32_MIN;
	out->group_state = kafka_str("Dead");
	out->protocol_type = kafka_str("");
	out->protocol_data = kafka_str("");
	const char *group_id = cstr_nonnull(arena, name);
	int32_t partition = -1;
	out->error_code = owner(core, group_id, &partition);
	const struct group *g = out->error_code == KAFKA_NONE
	                                ? group_coord_find(&core->groups->coord, group_id)
	                                : NULL;
	if (g == NULL) {
		return;
	}
	out->group_state = kafka_str(group_state_name(g->state));
	out->protocol_type = arena_str(arena, g->protocol_type, false);
	bool stable = g->state == GROUP_STABLE;
	out->protocol_data = stable ? arena_str(arena, g->protocol_name, false) : kafka_str("");
	if (g->member_count == 0 || ALLOC_ARRAY(arena, out->members, g->member_count) == NULL) {
		return;
	}
	for (uint32_t i = 0; i < g->member_count; i++) {
		const struct group_member *m = g->members[i];
		struct kafka_described_group_member *dm = &out->members[i];
		dm->member_id = arena_str(arena, m->member_id, false);
		dm->group_instance_id = arena_str(arena, m->instance_id, true);
		dm->client_id = arena_str(arena, m->client_id, false);
		dm->client_host = arena_str(arena, m->client_host, false);
		struct group_bytes none = {NULL, 0};
		const struct group_bytes *meta = &none;
		for (uint32_t p = 0; stable && p < m->protocol_count; p++) {
			if (g->protocol_name != NULL &&
			    strcmp(m->protocols[p].name, g->protocol_name) == 0) {
				meta = &m->protocols[p].metadata;
			}
		}
		dm->member_metadata = arena_bytes(arena, meta);
		dm->member_assignment = arena_bytes(arena, stable ? &m->assignment : &none);
	}
	out->member_count = (int32_t)g->member_count;
}

static void describe_groups(struct broker_core *core, const struct kafka_request *rq,
                            struct keel_arena *arena, struct kafka_describe_groups_response *out)
{
	const struct kafka_describe_groups_request *dr = &rq->body.describe_groups;
	memset(out, 0, sizeof(*out));
	int32_t n = KEEL_MAX(dr->groups.count, 0);
	if (n > 0 && ALLOC_ARRAY(arena, out->groups, n) == NULL) {
		return;
	}
	for (int32_t i = 0; i < n; i++) {
		describe_one(core, dr->groups.items[i], arena, &out->groups[i]);
	}
	out->group_count = n;
}

static enum broker_group_outcome
delete_groups(struct broker_core *core, const struct broker_group_ctx *ctx,
              const struct kafka_request *rq, struct keel_arena *arena,
              struct kafka_delete_groups_response *out, struct broker_produce_wait *wait)
{
	const struct kafka_delete_groups_request *dr = &rq->body.delete_groups;
	memset(out, 0, sizeof(*out));
	memset(wait, 0, sizeof(*wait));
	int32_t n = KEEL_MAX(dr->groups_names.count, 0);
	if (n > 0 && (ALLOC_ARRAY(arena, out->results, n) == NULL ||
	              ALLOC_ARRAY(arena, wait->parts, n) == NULL)) {
		return BROKER_GROUP_DONE;
	}
	out->result_count = n;
	for (int32_t i = 0; i < n; i++) {
		struct kafka_delete_groups_result *r = &out->results[i];
		r->group_id = dr->groups_names.items[i];
		const char *group_id = cstr_nonnull(arena, r->group_id);
		int32_t partition = -1;
		r->error_code = owner(core, group_id, &partition);
		struct group *g = r->error_code == KAFKA_NONE
		                          ? group_coord_find(&core->groups->coord, group_id)
		                          : NULL;
		if (r->error_code != KAFKA_NONE) {
			continue;
		}
		if (g == NULL || g->state != GROUP_EMPTY) {
			r->error_code =
			        g == NULL ? KAFKA_GROUP_ID_NOT_FOUND : KAFKA_NON_EMPTY_GROUP;
			continue;
		}
		/* tombstones for its offsets and its metadata, then it is gone */
		struct group_batch b;
		group_batch_init(&b, ctx->wall_ms);
		for (uint32_t k = 0; k < g->offset_count; k++) {
			add_offset_record(&b, group_id, g->offsets[k].topic,
			                  g->offsets[k].partition, NULL);
		}
		add_group_record(&b, g, true);
		int64_t last = 0;
		if (append_batch(core, partition, &b, &last) != KEEL_OK) {
			r->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
		} else {
			r->error_code = group_delete(&core->groups->coord, group_id);
			wait->parts[wait->count++] = offsets_partition(core, partition);
			wait->needs_sync = true;
		}
		group_batch_free(&b);
	}
	return wait->needs_sync ? BROKER_GROUP_SYNC : BROKER_GROUP_DONE;
}

/* ---- OffsetDelete ---- */

/* Whether a member's consumer-protocol subscription (version i16, topics
 * array of i16-length strings, ...) names the topic. */
static bool subscribed(const struct group *g, struct kafka_str topic)
{
	for (uint32_t i = 0; i < g->member_count; i++) {
		const struct group_member *m = g->members[i];
		for (uint32_t p = 0; p < m->protocol_count; p++) {
			const struct group_bytes *b = &m->protocols[p].metadata;
			struct keel_rbuf r;
			keel_rbuf_init(&r, b->ptr, b->len > 0 ? (size_t)b->len : 0);
			(void)keel_rbuf_u16(&r);
			int32_t n = keel_rbuf_i32(&r);
			for (int32_t t = 0; t < n && keel_rbuf_ok(&r); t++) {
				int16_t len = (int16_t)keel_rbuf_u16(&r);
				const uint8_t *name =
				        len >= 0 ? keel_rbuf_bytes(&r, (size_t)len) : NULL;
				if (name != NULL && len == topic.len &&
				    memcmp(name, topic.ptr, (size_t)len) == 0) {
					return true;
				}
			}
		}
	}
	return false;
}

static enum broker_group_outcome
offset_delete(struct broker_core *core, const struct broker_group_ctx *ctx,
              const struct kafka_request *rq, struct keel_arena *arena,
              struct kafka_offset_delete_response *out, struct broker_produce_wait *wait)
{
	const struct kafka_offset_delete_request *dr = &rq->body.offset_delete;
	memset(out, 0, sizeof(*out));
	const char *group_id = cstr_nonnull(arena, dr->group_id);
	int32_t partition = -1;
	out->error_code = owner(core, group_id, &partition);
	struct group *g = out->error_code == KAFKA_NONE
	                          ? group_coord_find(&core->groups->coord, group_id)
	                          : NULL;
	if (out->error_code == KAFKA_NONE && g == NULL) {
		out->error_code = KAFKA_GROUP_ID_NOT_FOUND;
	}
	if (out->error_code != KAFKA_NONE || dr->topic_count <= 0 ||
	    ALLOC_ARRAY(arena, out->topics, dr->topic_count) == NULL) {
		return BROKER_GROUP_DONE;
	}
	out->topic_count = dr->topic_count;
	struct group_batch b;
	group_batch_init(&b, ctx->wall_ms);
	for (int32_t t = 0; t < dr->topic_count; t++) {
		const struct kafka_offset_delete_topic *dt = &dr->topics[t];
		struct kafka_offset_commit_topic_response *ot = &out->topics[t];
		ot->name = dt->name;
		ot->partition_count = 0;
		if (dt->partition_count <= 0 ||
		    ALLOC_ARRAY(arena, ot->partitions, dt->partition_count) == NULL) {
			continue;
		}
		int16_t err = g->state != GROUP_EMPTY && subscribed(g, dt->name)
		                      ? KAFKA_GROUP_SUBSCRIBED_TO_TOPIC
		                      : KAFKA_NONE;
		const char *topic = cstr_nonnull(arena, dt->name);
		for (int32_t i = 0; i < dt->partition_count; i++) {
			int32_t index = dt->partitions[i].partition_index;
			ot->partitions[i] = (struct kafka_partition_error){index, err};
			if (err == KAFKA_NONE && group_offset_find(g, topic, index) != NULL) {
				add_offset_record(&b, group_id, topic, index, NULL);
			}
		}
		ot->partition_count = dt->partition_count;
	}
	enum broker_group_outcome o = BROKER_GROUP_DONE;
	if (b.count > 0) {
		out->error_code = append_and_wait(core, partition, &b, arena, wait);
		o = out->error_code == KAFKA_NONE ? BROKER_GROUP_SYNC : BROKER_GROUP_DONE;
	}
	group_batch_free(&b);
	return o;
}

static void offset_delete_finish(struct broker_core *core, const struct kafka_request *rq,
                                 bool committed, struct kafka_offset_delete_response *out)
{
	if (!committed) {
		out->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
		return;
	}
	struct keel_arena a;
	keel_arena_init(&a, 1024);
	struct group *g = group_coord_find(&core->groups->coord,
	                                   cstr_nonnull(&a, rq->body.offset_delete.group_id));
	for (int32_t t = 0; g != NULL && t < out->topic_count; t++) {
		const struct kafka_offset_commit_topic_response *ot = &out->topics[t];
		const char *topic = cstr_nonnull(&a, ot->name);
		for (int32_t i = 0; i < ot->partition_count; i++) {
			if (ot->partitions[i].error_code == KAFKA_NONE) {
				group_offset_remove(g, topic, ot->partitions[i].partition_index);
			}
		}
	}
	keel_arena_close(&a);
}

/* ---- dispatch ---- */

enum broker_group_outcome
broker_group_request(struct broker_core *core, const struct broker_group_ctx *ctx,
                     const struct kafka_request *rq, struct keel_arena *arena,
                     union kafka_response_body *out, struct broker_produce_wait *wait)
{
	memset(wait, 0, sizeof(*wait));
	group_coord_set_wall_clock(&core->groups->coord, ctx->wall_ms);
	switch (rq->header.api_key) {
	case KAFKA_API_FIND_COORDINATOR:
		find_coordinator(core, rq, arena, &out->find_coordinator);
		return BROKER_GROUP_DONE;
	case KAFKA_API_JOIN_GROUP:
		return join_group(core, ctx, rq, arena, &out->join_group);
	case KAFKA_API_SYNC_GROUP:
		return sync_group(core, ctx, rq, arena, &out->sync_group);
	case KAFKA_API_HEARTBEAT:
		heartbeat(core, ctx, rq, arena, &out->heartbeat);
		return BROKER_GROUP_DONE;
	case KAFKA_API_LEAVE_GROUP:
		leave_group(core, ctx, rq, arena, &out->leave_group);
		return BROKER_GROUP_DONE;
	case KAFKA_API_OFFSET_COMMIT:
		return offset_commit(core, ctx, rq, arena, &out->offset_commit, wait);
	case KAFKA_API_OFFSET_FETCH:
		offset_fetch(core, rq, arena, &out->offset_fetch);
		return BROKER_GROUP_DONE;
	case KAFKA_API_LIST_GROUPS:
		list_groups(core, rq, arena, &out->list_groups);
		return BROKER_GROUP_DONE;
	case KAFKA_API_DESCRIBE_GROUPS:
		describe_groups(core, rq, arena, &out->describe_groups);
		return BROKER_GROUP_DONE;
	case KAFKA_API_DELETE_GROUPS:
		return delete_groups(core, ctx, rq, arena, &out->delete_groups, wait);
	case KAFKA_API_OFFSET_DELETE:
		return offset_delete(core, ctx, rq, arena, &out->offset_delete, wait);
	default:
		KEEL_UNREACHABLE();
	}
	return BROKER_GROUP_DONE;
}

void broker_group_finish(struct broker_core *core, const struct kafka_request *rq,
                         const struct broker_produce_wait *wait, union kafka_response_body *out)
{
	bool committed = true;
	for (uint32_t i = 0; i < wait->count; i++) {
		committed &= wait->parts[i] != NULL &&
		             broker_partition_committed(wait->parts[i], wait->last_offset + 1);
	}
	if (rq->header.api_key == KAFKA_API_OFFSET_COMMIT) {
		commit_finish(core, rq, committed, &out->offset_commit);
		return;
	}
	if (rq->header.api_key == KAFKA_API_OFFSET_DELETE) {
		offset_delete_finish(core, rq, committed, &out->offset_delete);
		return;
	}
	KEEL_ASSERT(rq->header.api_key == KAFKA_API_DELETE_GROUPS);
	for (int32_t i = 0; !committed && i < out->delete_groups.result_count; i++) {
		if (out->delete_groups.results[i].error_code == KAFKA_NONE) {
			out->delete_groups.results[i].error_code = KAFKA_KAFKA_STORAGE_ERROR;
		}
	}
}

/* ---- compaction ---- */

/* Appends the state of every group of offsets partition `i` as one batch. */
static void write_snapshot(struct broker_core *core, int32_t i, struct broker_partition *p,
                           int64_t wall_ms)
{
	struct broker_groups *bg = core->groups;
	struct broker_offsets_part *st = &bg->parts[i];
	struct group_batch b;
	group_batch_init(&b, wall_ms);
	for (uint32_t k = 0; k < bg->coord.group_count; k++) {
		const struct group *g = bg->coord.groups[k];
		if (g->offsets_partition != i) {
			continue;
		}
		if (g->protocol_type != NULL || g->generation > 0) {
			add_group_record(&b, g, false);
		}
		for (uint32_t o = 0; o < g->offset_count; o++) {
			add_offset_record(&b, g->group_id, g->offsets[o].topic,
			                  g->offsets[o].partition, &g->offsets[o]);
		}
	}
	int64_t start = plog_log_end_offset(&p->log);
	int64_t last = start - 1;
	if (b.count > 0 && append_batch(core, i, &b, &last) != KEEL_OK) {
		group_batch_free(&b);
		return;
	}
	*st = (struct broker_offsets_part){true, true, start, last + 1, b.count};
	group_batch_free(&b);
}

/* Deletes the segments wholly before the (durable) snapshot. */
static void cut_prefix(struct broker_core *core, struct broker_offsets_part *st,
                       struct broker_partition *p, int64_t wall_ms)
{
	uint64_t keep = 0;
	for (uint32_t s = 0; s < p->log.segment_count; s++) {
		struct plog_segment_info info;
		plog_segment_info(&p->log, s, &info);
		if (info.end_offset > st->snapshot_start || s + 1 == p->log.segment_count) {
			keep += info.size_bytes;
		}
	}
	/* plog_retain by size, with the size of what must stay */
	struct plog_config saved = p->log.config;
	p->log.config.retention_ms = -1;
	p->log.config.retention_bytes = (int64_t)keep;
	uint32_t deleted = 0;
	(void)plog_retain(&p->log, wall_ms, &deleted);
	p->log.config = saved;
	st->snapshot_pending = false;
	core->groups->compactions++;
	core->groups->compacted_segments += deleted;
}

static void compact(struct broker_core *core, int64_t wall_ms)
{
	struct broker_groups *bg = core->groups;
	for (int32_t i = 0; i < bg->partition_count; i++) {
		struct broker_offsets_part *st = &bg->parts[i];
		struct broker_partition *p = offsets_partition(core, i);
		if (!st->loaded || p == NULL || !p->open || p->log.state != PLOG_OPEN) {
			continue;
		}
		if (st->snapshot_pending) {
			if (broker_partition_committed(p, st->snapshot_end)) {
				cut_prefix(core, st, p, wall_ms);
			}
			continue;
		}
		if (p->log.segment_count >= 3 &&
		    plog_log_end_offset(&p->log) - st->snapshot_start >= 2 * st->snapshot_records) {
			write_snapshot(core, i, p, wall_ms);
		}
	}
}

/* ---- offset expiry (group.h has the rules) ---- */

int64_t broker_offsets_retention_ms(const struct broker_core *core)
{
	int64_t ms = broker_config_i64(core, NULL, "offsets.retention.ms", 0);
	if (ms != 0) {
		return ms;
	}
	int64_t minutes = broker_config_i64(core, NULL, "offsets.retention.minutes",
	                                    BROKER_OFFSETS_RETENTION_MINUTES_DEFAULT);
	return minutes > 0 && minutes < INT64_MAX / 60000 ? minutes * 60000 : -1;
}

struct expire_ctx {
	struct broker_core *core;
	struct group_batch *batches; /* [partition_count], by offsets partition */
	bool *used;
};

static void expired(void *arg, const struct group *g, const struct group_offset *o)
{
	struct expire_ctx *ec = arg;
	int32_t i = g->offsets_partition;
	if (i < 0 || i >= ec->core->groups->partition_count) {
		return;
	}
	if (!ec->used[i]) {
		group_batch_init(&ec->batches[i], ec->core->groups->coord.wall_ms);
		ec->used[i] = true;
	}
	if (o != NULL) {
		add_offset_record(&ec->batches[i], g->group_id, o->topic, o->partition, NULL);
		ec->core->groups->expired_offsets++;
	} else {
		add_group_record(&ec->batches[i], g, true);
		ec->core->groups->expired_groups++;
	}
}

/* Every offsets.retention.check.interval.ms: removes the expired offsets
 * and groups, and appends their tombstones (durable with the next sync, like
 * group metadata records: a coordinator that dies first leaves them to its
 * successor, which expires them by the same rule). */
static void expire_offsets(struct broker_core *core, int64_t now_ms, int64_t wall_ms)
{
	struct broker_groups *bg = core->groups;
	int64_t every = broker_config_i64(core, NULL, "offsets.retention.check.interval.ms",
	                                  BROKER_OFFSETS_RETENTION_CHECK_MS_DEFAULT);
	int64_t retention = broker_offsets_retention_ms(core);
	if (bg->partition_count == 0 || retention <= 0 ||
	    now_ms - bg->expire_checked_ms < KEEL_MAX(every, 1)) {
		return;
	}
	bg->expire_checked_ms = now_ms;
	struct expire_ctx ec = {core, calloc((size_t)bg->partition_count, sizeof(*ec.batches)),
	                        calloc((size_t)bg->partition_count, sizeof(*ec.used))};
	if (ec.batches != NULL && ec.used != NULL) {
		(void)group_coord_expire_offsets(&bg->coord, wall_ms, retention, expired, &ec);
		for (int32_t i = 0; i < bg->partition_count; i++) {
			if (ec.used[i]) {
				int64_t last = 0;
				(void)append_batch(core, i, &ec.batches[i], &last);
				group_batch_free(&ec.batches[i]);
			}
		}
	}
	free(ec.batches);
	free(ec.used);
}

void broker_groups_tick(struct broker_core *core, int64_t now_ms, int64_t wall_ms)
{
	group_coord_set_wall_clock(&core->groups->coord, wall_ms);
	group_coord_tick(&core->groups->coord, now_ms);
	write_dirty_groups(core, wall_ms);
	expire_offsets(core, now_ms, wall_ms);
	compact(core, wall_ms);
}
