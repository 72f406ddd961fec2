/*
 * controller.c — the cluster controller inside a server (controller.h).
 *
 * Three parts:
 *   1. the replicated part, on every server: apply META entries to the
 *      committed image, write its ZooKeeper view, keep the ring of recent
 *      entries, save/load the image with the snapshot;
 *   2. requests: reads served locally, controller requests run on the
 *      active controller or forwarded to the leader, replies held until
 *      applied;
 *   3. the active controller's life on the leader.
 *
 * Waiters. Every controller request that is not answered at once is a
 * `struct ctl_waiter` in one of two lists:
 *   forwarded  (follower) sent to the leader, waiting for its reply: a
 *              tracked request (tracker.h, kind TRACK_META), failed with
 *              NOT_CONTROLLER on a leader change, a lost link or after the
 *              tracker's deadline;
 *   held       waiting for the applied index to reach wait_index, then
 *              delivered — to a client of this server (peer 0) or to the
 *              server that forwarded it. Held replies made by this server's
 *              controller are failed with NOT_CONTROLLER when it stops;
 *              replies that came from the leader (from_leader) are not:
 *              their decisions are committed (but if this server does not
 *              reach the index in time — cut off from the leader — they
 *              are answered NOT_CONTROLLER too, so the client retries
 *              elsewhere).
 * Both lists are bounded by MAX_WAITERS; past it, requests are answered
 * NOT_CONTROLLER (the client retries).
 */
#include "core/controller.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "core/client_zk.h"
#include "meta/controller.h"
#include "meta/proto.h"
#include "meta/record.h"
#include "meta/zkview.h"
#include "core/fsm.h"
#include "core/core.h"
#include "base/fmt.h"
#include "zk/zk_codes.h"
#include "zk/zk_state.h"

#define RING_MAX_ENTRIES 4096u
#define RING_MAX_BYTES   (32u << 20)
#define MAX_WAITERS      10000u
#define CTL_TICK_MS      100
#define MAX_CHANGES      (1u << 18)
/* Room kept in a reply for the ZooKeeper header and the response fields. */
#define REPLY_SLACK 4096u

struct ctl_ring_entry {
	int64_t index;
	uint8_t *data; /* an encoded batch (the envelope removed) */
	size_t size;
};

struct ctl_waiter {
	struct keel_list link;    /* in the forwarded or the held list */
	struct tracker_req track; /* forwarded: the leader decides */
	bool from_leader;         /* held: a reply from the leader (not ours to fail) */
	uint8_t api;
	uint64_t peer;        /* held: 0 = a client here, else the server to answer */
	uint64_t request_id;  /* the id on the server the client is connected to */
	uint64_t wait_index;  /* held: deliver once applied >= this */
	uint64_t deadline_ms; /* held from_leader: give up then */
	uint64_t started_ns;  /* held on the leader: when the controller took it */
	int32_t zk_err;
	uint8_t *request; /* body, for a NOT_CONTROLLER answer */
	size_t request_size;
	uint8_t *reply;
	size_t reply_size;
};

struct node_ctl {
	/* The replicated part. */
	struct meta_image image; /* committed */
	struct meta_changes changes;
	struct meta_zk_ops ops;
	struct zk_result zk_res;
	struct keel_arena apply_arena;
	struct ctl_ring_entry *ring;
	uint32_t ring_head; /* oldest */
	uint32_t ring_count;
	size_t ring_bytes;
	int64_t ring_floor; /* every META entry above this index is in the ring */

	/* Requests. */
	struct keel_arena req_arena;
	struct keel_wbuf reply_buf;
	struct keel_wbuf entry_buf;
	size_t max_reply_bytes;
	struct keel_list held; /* of ctl_waiter */
	/* Controller requests on the leader: taken -> answer released (decided,
	 * committed and applied here). keel's controller has no event queue (a
	 * request is decided in the loop turn it arrives in), so this is what
	 * Kafka's EventQueueTimeMs + EventQueueProcessingTimeMs add up to. */
	struct metrics_hist request_latency;
	struct keel_list forwarded; /* of ctl_waiter */
	uint32_t waiter_count;

	/* The active controller (leader only). */
	struct meta_controller_config cfg;
	struct meta_controller ctl;
	struct keel_rng rng;
	bool active;
	bool broken; /* apply ignored records of our own batch */
	struct meta_apply_result last_apply; /* of the last META entry */
	uint64_t last_proposed_index;
	uint64_t rebuild_index; /* start again only once applied >= this */
	int64_t next_tick_ms;
};

static struct node_ctl *ctl_of(const struct node_core *core)
{
	return core->ctl;
}

/* The most a reply body may hold (the client's packet limit, less room for
 * headers). */
static size_t reply_budget(const struct node_ctl *c)
{
	return c->max_reply_bytes > 2u * REPLY_SLACK ? c->max_reply_bytes - REPLY_SLACK
	                                             : c->max_reply_bytes / 2u;
}

static int64_t now_ms(const struct node_core *core)
{
	return (int64_t)core_now_ms(core);
}

/* ---- the ring of recent META entries ---- */

static struct ctl_ring_entry *ring_at(struct node_ctl *c, uint32_t i)
{
	return &c->ring[(c->ring_head + i) % RING_MAX_ENTRIES];
}

static void ring_evict_oldest(struct node_ctl *c)
{
	KEEL_ASSERT(c->ring_count > 0);
	struct ctl_ring_entry *e = ring_at(c, 0);
	c->ring_floor = e->index;
	c->ring_bytes -= e->size;
	free(e->data);
	e->data = NULL;
	c->ring_head = (c->ring_head + 1) % RING_MAX_ENTRIES;
	c->ring_count--;
}

static void ring_clear(struct node_ctl *c, int64_t floor)
{
	while (c->ring_count > 0) {
		ring_evict_oldest(c);
	}
	c->ring_floor = floor;
}

static void ring_append(struct node_ctl *c, int64_t index, const uint8_t *data, size_t size)
{
	while (c->ring_count > 0 &&
	       (c->ring_count == RING_MAX_ENTRIES || c->ring_bytes + size > RING_MAX_BYTES)) {
		ring_evict_oldest(c);
	}
	uint8_t *copy = malloc(size > 0 ? size : 1);
	if (copy == NULL || size > RING_MAX_BYTES) {
		/* Not kept: fetches from here on are served from the image. */
		free(copy);
		ring_clear(c, index);
		return;
	}
	memcpy(copy, data, size);
	struct ctl_ring_entry *e = ring_at(c, c->ring_count);
	e->index = index;
	e->data = copy;
	e->size = size;
	c->ring_count++;
	c->ring_bytes += size;
}

/* The position of the first entry with index >= `from` (ring_count if none). */
static uint32_t ring_find(struct node_ctl *c, int64_t from)
{
	uint32_t lo = 0, hi = c->ring_count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (ring_at(c, mid)->index < from) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

/* ---- create / destroy ---- */

static void controller_config(const struct node_ctl_options *o, struct meta_controller_config *cfg)
{
	meta_controller_config_default(cfg);
	cfg->session_timeout_ms = o->broker_session_timeout_ms;
	cfg->rebalance_interval_ms = o->leader_rebalance_interval_ms;
	/* One batch must fit one Raft entry and one client reply: records are
	 * well under 256 bytes unless they carry long config values. */
	uint32_t records = KEEL_MAX(o->max_packet_bytes / 256u, 64u);
	cfg->max_records_per_batch = KEEL_MIN(records, cfg->max_records_per_batch);
	cfg->max_partitions_per_topic =
	        KEEL_MIN(cfg->max_partitions_per_topic, cfg->max_records_per_batch - 32u);
}

enum keel_err node_ctl_create(struct node_core *core, const struct node_ctl_options *o, char *err,
                              size_t err_size)
{
	struct node_ctl *c = calloc(1, sizeof(*c));
	if (c == NULL) {
		keel_fmt(err, err_size, "out of memory");
		return KEEL_NOMEM;
	}
	c->ring = calloc(RING_MAX_ENTRIES, sizeof(*c->ring));
	if (c->ring == NULL) {
		free(c);
		keel_fmt(err, err_size, "out of memory");
		return KEEL_NOMEM;
	}
	meta_image_init(&c->image, NULL);
	meta_changes_init(&c->changes, MAX_CHANGES);
	meta_zk_ops_init(&c->ops);
	zk_result_init(&c->zk_res, 1u << 20);
	keel_arena_init(&c->apply_arena, 64 * 1024);
	keel_arena_init(&c->req_arena, 16 * 1024);
	c->max_reply_bytes = o->max_packet_bytes;
	keel_wbuf_init_dynamic(&c->reply_buf, 4096, c->max_reply_bytes);
	keel_wbuf_init_dynamic(&c->entry_buf, 4096, core->raft_opts.max_entry_bytes);
	keel_list_init(&c->held);
	keel_list_init(&c->forwarded);
	controller_config(o, &c->cfg);
	if (o->config != NULL) {
		c->cfg = *o->config;
	}
	uint64_t seed = core_seed_next(core);
	keel_rng_seed(&c->rng, seed);
	core->ctl = c;
	struct tracker_kind_ops track_ops = node_ctl_track_ops;
	track_ops.ctx = core;
	tracker_set_kind(&core->tracker, TRACK_META, &track_ops);
	return KEEL_OK;
}

static void list_free(struct node_core *core, struct keel_list *l)
{
	struct keel_list *it;
	while ((it = keel_list_pop_front(l)) != NULL) {
		struct ctl_waiter *w = KEEL_LIST_ITEM(it, struct ctl_waiter, link);
		tracker_finish(&core->tracker, &w->track);
		free(w->request);
		free(w->reply);
		free(w);
	}
}

void node_ctl_destroy(struct node_core *core)
{
	struct node_ctl *c = ctl_of(core);
	if (c == NULL) {
		return;
	}
	if (c->active) {
		meta_controller_close(&c->ctl);
	}
	list_free(core, &c->held);
	list_free(core, &c->forwarded);
	ring_clear(c, 0);
	free(c->ring);
	meta_image_close(&c->image);
	meta_changes_close(&c->changes);
	meta_zk_ops_close(&c->ops);
	zk_result_close(&c->zk_res);
	keel_arena_close(&c->apply_arena);
	keel_arena_close(&c->req_arena);
	keel_wbuf_free(&c->reply_buf);
	keel_wbuf_free(&c->entry_buf);
	free(c);
	core->ctl = NULL;
}

const struct meta_image *node_ctl_image(const struct node_core *core)
{
	return &ctl_of(core)->image;
}

const struct metrics_hist *node_ctl_request_latency(const struct node_core *core)
{
	return &ctl_of(core)->request_latency;
}

void node_ctl_last_apply(const struct node_core *core, struct meta_apply_result *out)
{
	*out = ctl_of(core)->last_apply;
}

const struct meta_controller *node_ctl_controller(const struct node_core *core,
                                                  uint64_t *last_proposed_index)
{
	const struct node_ctl *c = ctl_of(core);
	*last_proposed_index = c->last_proposed_index;
	return c->active ? &c->ctl : NULL;
}

bool node_ctl_active(const struct node_core *core)
{
	return ctl_of(core)->active;
}

int64_t node_ctl_broker_offset(const struct node_core *core, int32_t id)
{
	const struct node_ctl *c = ctl_of(core);
	return c->active ? meta_controller_broker_offset(&c->ctl, id) : -1;
}

/* ---- apply: the image and its ZooKeeper view ---- */

/* Applies one op of the view to the tree. Failures (a client-made node in
 * the way) are the same on every server: logged, not fatal. */
static enum keel_err apply_zk_op(struct zk_state *st, struct zk_result *res,
                                 const struct meta_zk_op *op)
{
	size_t len = strlen(op->path);
	uint32_t id = zk_state_lookup(st, zk_bytes_of(op->path, len));
	switch (op->type) {
	case META_ZK_PUT:
		if (id != ZK_NODE_NONE) {
			const struct zk_node *node = zk_tree_node(&st->tree, id);
			if (node->data_size == op->size &&
			    (op->size == 0 ||
			     memcmp(zk_node_data(node), op->data, op->size) == 0)) {
				return KEEL_OK; /* unchanged: no watch fires */
			}
		}
		return zk_system_put(st, res, op->path, len, op->data, op->size,
		                     zk_acl_read_unsafe(), ZK_SYSTEM_PARENTS);
	case META_ZK_DELETE:
	case META_ZK_DELETE_TREE:
		if (id == ZK_NODE_NONE) {
			return KEEL_OK;
		}
		return zk_system_delete(st, res, op->path, len, op->type == META_ZK_DELETE_TREE);
	default:
		return KEEL_INVAL;
	}
}

static void apply_zk_view(struct node_core *core, uint64_t index, int64_t time_ms)
{
	struct node_ctl *c = ctl_of(core);
	meta_zk_ops_reset(&c->ops);
	enum keel_err rc = meta_zk_view_changes(&c->image, &c->changes, &c->ops);
	if (rc != KEEL_OK) {
		CORE_ERROR(core,
		           "entry %llu: cannot build the ZooKeeper view of the metadata (%s): "
		           "this server cannot follow the log",
		           (unsigned long long)index, keel_strerror(rc));
		core->failed = true;
		return;
	}
	if (c->ops.count == 0) {
		return;
	}
	struct zk_state *st = fsm_zk(core->fsm);
	zk_system_begin(st, &c->zk_res, index, time_ms);
	for (uint32_t i = 0; i < c->ops.count; i++) {
		const struct meta_zk_op *op = &c->ops.items[i];
		rc = apply_zk_op(st, &c->zk_res, op);
		if (rc == KEEL_NOMEM) {
			CORE_ERROR(
			        core,
			        "entry %llu: out of memory writing %s: this server cannot follow "
			        "the log",
			        (unsigned long long)index, op->path);
			core->failed = true;
			return;
		}
		if (rc != KEEL_OK) {
			CORE_WARN(core, "entry %llu: metadata znode %s not written (%s)",
			          (unsigned long long)index, op->path, keel_strerror(rc));
		}
	}
	zk_clients_fire_system(core, &c->zk_res);
}

void node_ctl_apply(struct node_core *core, const struct raft_entry *entry,
                    const struct node_entry *ne)
{
	struct node_ctl *c = ctl_of(core);
	if (core->failed) {
		return;
	}
	keel_arena_reset(&c->apply_arena);
	struct meta_batch batch;
	struct meta_errbuf eb;
	memset(&eb, 0, sizeof(eb));
	enum keel_err rc =
	        meta_batch_decode(ne->payload, ne->payload_size, &c->apply_arena, &batch, &eb);
	if (rc != KEEL_OK) {
		CORE_ERROR(core,
		           "entry %llu: metadata batch does not decode (%s: %s): this server "
		           "cannot follow the log; upgrade it or restore it from a snapshot",
		           (unsigned long long)entry->index, keel_strerror(rc), eb.msg);
		core->failed = true;
		return;
	}
	meta_changes_reset(&c->changes);
	struct meta_apply_result res;
	memset(&res, 0, sizeof(res));
	rc = meta_image_apply(&c->image, (int64_t)entry->index, &batch, &c->changes, &res);
	if (rc != KEEL_OK) {
		CORE_ERROR(core,
		           "entry %llu: cannot apply the metadata batch (%s): this server cannot "
		           "follow the log",
		           (unsigned long long)entry->index, keel_strerror(rc));
		core->failed = true;
		return;
	}
	c->last_apply = res;
	if (res.ignored > 0 || res.batch_ignored) {
		bool ours = c->active && batch.hdr.controller_id == c->ctl.controller_id &&
		            batch.hdr.controller_epoch == c->ctl.controller_epoch;
		CORE_INFO(
		        core,
		        "entry %llu: %s%u of %u metadata records ignored (controller %d, epoch %d)",
		        (unsigned long long)entry->index, res.batch_ignored ? "stale batch: " : "",
		        res.batch_ignored ? batch.count : res.ignored, batch.count,
		        batch.hdr.controller_id, batch.hdr.controller_epoch);
		if (ours) {
			c->broken = true;
		}
	}
	ring_append(c, (int64_t)entry->index, ne->payload, ne->payload_size);
	apply_zk_view(core, entry->index, batch.hdr.timestamp_ms);
}

enum keel_err node_ctl_save_image(struct node_core *core, node_ctl_write_fn write, void *ctx)
{
	return meta_image_save(&ctl_of(core)->image, write, ctx);
}

static void controller_stop(struct node_core *core, bool rebuild, const char *why);

enum keel_err node_ctl_load_image(struct node_core *core, const uint8_t *data, size_t size,
                                  char *err, size_t err_size)
{
	struct node_ctl *c = ctl_of(core);
	struct meta_image fresh;
	meta_image_init(&fresh, &c->image.limits);
	if (data != NULL) {
		struct meta_errbuf eb;
		memset(&eb, 0, sizeof(eb));
		enum keel_err rc = meta_image_load_from_memory(&fresh, data, size, &eb);
		if (rc != KEEL_OK) {
			keel_fmt(err, err_size, "metadata image in the snapshot: %s (%s)", eb.msg,
			         keel_strerror(rc));
			meta_image_close(&fresh);
			return rc;
		}
	}
	meta_image_close(&c->image);
	c->image = fresh;
	ring_clear(c, c->image.offset);
	if (c->active) {
		controller_stop(core, true, "a snapshot replaced the image");
	}
	return KEEL_OK;
}

/* ---- error replies ---- */

static int32_t decode_failure(enum keel_err rc)
{
	return rc == KEEL_UNSUPPORTED ? ZK_UNIMPLEMENTED : ZK_MARSHALLING_ERROR;
}

/* The list APIs have no request-wide error: every item of the request
 * gets `error`. Returns the ZooKeeper error for the reply header. */
static int32_t encode_error_items(struct keel_arena *a, uint8_t api, const uint8_t *body,
                                  size_t size, int16_t error, struct keel_wbuf *out)
{
	enum keel_err rc;
	if (api == META_API_CREATE_TOPICS) {
		struct meta_create_topics_request rq;
		rc = meta_decode_create_topics_request(body, size, a, &rq, NULL);
		if (rc != KEEL_OK) {
			return decode_failure(rc);
		}
		struct meta_create_topic_result *r =
		        keel_arena_alloc(a, (rq.topic_count + 1u) * sizeof(*r));
		for (uint32_t i = 0; r != NULL && i < rq.topic_count; i++) {
			r[i] = (struct meta_create_topic_result){
			        .name = rq.topics[i].name,
			        .error = error,
			        .num_partitions = rq.topics[i].num_partitions,
			        .replication_factor = rq.topics[i].replication_factor,
			};
		}
		struct meta_create_topics_response rs = {r, rq.topic_count};
		rc = r != NULL ? meta_encode_create_topics_response(out, &rs) : KEEL_NOMEM;
	} else if (api == META_API_DELETE_TOPICS) {
		struct meta_delete_topics_request rq;
		rc = meta_decode_delete_topics_request(body, size, a, &rq, NULL);
		if (rc != KEEL_OK) {
			return decode_failure(rc);
		}
		struct meta_delete_topic_result *r =
		        keel_arena_alloc(a, (rq.name_count + 1u) * sizeof(*r));
		for (uint32_t i = 0; r != NULL && i < rq.name_count; i++) {
			r[i] = (struct meta_delete_topic_result){.name = rq.names[i],
			                                         .error = error};
		}
		struct meta_delete_topics_response rs = {r, rq.name_count};
		rc = r != NULL ? meta_encode_delete_topics_response(out, &rs) : KEEL_NOMEM;
	} else if (api == META_API_CREATE_PARTITIONS) {
		struct meta_create_partitions_request rq;
		rc = meta_decode_create_partitions_request(body, size, a, &rq, NULL);
		if (rc != KEEL_OK) {
			return decode_failure(rc);
		}
		struct meta_create_partitions_result *r =
		        keel_arena_alloc(a, (rq.topic_count + 1u) * sizeof(*r));
		for (uint32_t i = 0; r != NULL && i < rq.topic_count; i++) {
			r[i] = (struct meta_create_partitions_result){.name = rq.topics[i].name,
			                                              .error = error};
		}
		struct meta_create_partitions_response rs = {r, rq.topic_count};
		rc = r != NULL ? meta_encode_create_partitions_response(out, &rs) : KEEL_NOMEM;
	} else {
		KEEL_ASSERT(api == META_API_ALTER_CONFIGS);
		struct meta_alter_configs_request rq;
		rc = meta_decode_alter_configs_request(body, size, a, &rq, NULL);
		if (rc != KEEL_OK) {
			return decode_failure(rc);
		}
		struct meta_alter_config_result *r =
		        keel_arena_alloc(a, (rq.resource_count + 1u) * sizeof(*r));
		for (uint32_t i = 0; r != NULL && i < rq.resource_count; i++) {
			r[i] = (struct meta_alter_config_result){
			        .resource_type = rq.resources[i].resource_type,
			        .resource_name = rq.resources[i].resource_name,
			        .error = error,
			};
		}
		struct meta_alter_configs_response rs = {r, rq.resource_count};
		rc = r != NULL ? meta_encode_alter_configs_response(out, &rs) : KEEL_NOMEM;
	}
	return rc == KEEL_OK ? 0 : ZK_SYSTEM_ERROR;
}

/* A response to `api` saying `error` for everything the request asked.
 * Returns the ZooKeeper error for the reply header. */
static int32_t encode_error_reply(struct node_ctl *c, uint8_t api, const uint8_t *body, size_t size,
                                  int16_t error, struct keel_wbuf *out)
{
	keel_arena_reset(&c->req_arena);
	enum keel_err rc;
	switch ((enum meta_api)api) {
	case META_API_BROKER_REGISTRATION: {
		struct meta_broker_registration_response rs = {error, NULL, -1};
		rc = meta_encode_broker_registration_response(out, &rs);
		break;
	}
	case META_API_BROKER_HEARTBEAT: {
		struct meta_broker_heartbeat_response rs = {error, NULL, false, false, false};
		rc = meta_encode_broker_heartbeat_response(out, &rs);
		break;
	}
	case META_API_UNREGISTER_BROKER: {
		struct meta_unregister_broker_response rs = {error, NULL};
		rc = meta_encode_unregister_broker_response(out, &rs);
		break;
	}
	case META_API_ALTER_PARTITION: {
		struct meta_alter_partition_response rs = {error, NULL, NULL, 0};
		rc = meta_encode_alter_partition_response(out, &rs);
		break;
	}
	case META_API_ELECT_LEADERS: {
		struct meta_elect_leaders_response rs = {error, NULL, NULL, 0};
		rc = meta_encode_elect_leaders_response(out, &rs);
		break;
	}
	case META_API_ALTER_PARTITION_REASSIGNMENTS: {
		struct meta_alter_reassignments_response rs = {error, NULL, NULL, 0};
		rc = meta_encode_alter_reassignments_response(out, &rs);
		break;
	}
	case META_API_LIST_PARTITION_REASSIGNMENTS: {
		struct meta_list_reassignments_response rs = {error, NULL, NULL, 0};
		rc = meta_encode_list_reassignments_response(out, &rs);
		break;
	}
	case META_API_ALLOCATE_PRODUCER_IDS: {
		struct meta_allocate_producer_ids_response rs = {error, NULL, -1, 0};
		rc = meta_encode_allocate_producer_ids_response(out, &rs);
		break;
	}
	case META_API_CREATE_PARTITIONS:
	case META_API_CREATE_TOPICS:
	case META_API_DELETE_TOPICS:
	case META_API_ALTER_CONFIGS:
		return encode_error_items(&c->req_arena, api, body, size, error, out);
	default:
		return ZK_UNIMPLEMENTED;
	}
	return rc == KEEL_OK ? 0 : ZK_SYSTEM_ERROR;
}

/* ---- delivering replies ---- */

static void send_peer_reply(struct node_core *core, uint64_t peer, uint64_t request_id,
                            uint64_t wait_index, int32_t zk_err, const uint8_t *body, size_t size)
{
	struct tracker_reply hdr = {TRACK_META, peer, request_id, KEEL_OK, wait_index};
	size_t mark;
	struct keel_wbuf *w = core_reply_begin(core, &hdr, &mark);
	if (w == NULL) {
		return; /* the server forwarding it times the request out */
	}
	keel_wbuf_i32(w, zk_err);
	keel_wbuf_bytes(w, body, size);
	core_peer_end(core, peer, mark);
}

static void deliver(struct node_core *core, uint64_t peer, uint64_t request_id, uint64_t wait_index,
                    int32_t zk_err, const uint8_t *body, size_t size)
{
	if (peer == 0) {
		zk_clients_ext_complete(core, request_id, zk_err, body, size);
	} else {
		send_peer_reply(core, peer, request_id, wait_index, zk_err, body, size);
	}
}

/* Answers NOT_CONTROLLER (built from the request) right away. */
static void deliver_not_controller(struct node_core *core, uint64_t peer, uint64_t request_id,
                                   uint8_t api, const uint8_t *body, size_t size)
{
	struct node_ctl *c = ctl_of(core);
	struct keel_wbuf *out = &c->reply_buf;
	keel_wbuf_reset(out);
	int32_t zk_err = encode_error_reply(c, api, body, size, META_ERR_NOT_CONTROLLER, out);
	deliver(core, peer, request_id, 0, zk_err, out->data, zk_err == 0 ? out->size : 0);
}

static void waiter_free(struct node_ctl *c, struct ctl_waiter *w)
{
	KEEL_ASSERT(c->waiter_count > 0);
	c->waiter_count--;
	free(w->request);
	free(w->reply);
	free(w);
}

static uint8_t *dup_bytes(const uint8_t *data, size_t size)
{
	uint8_t *p = malloc(size > 0 ? size : 1);
	if (p != NULL && size > 0) {
		memcpy(p, data, size);
	}
	return p;
}

/* A new waiter with copies of the request (and reply). NULL when the
 * waiter limit is reached or memory runs out. */
static struct ctl_waiter *waiter_new(struct node_ctl *c, uint8_t api, const uint8_t *request,
                                     size_t request_size, const uint8_t *reply, size_t reply_size)
{
	if (c->waiter_count >= MAX_WAITERS) {
		return NULL;
	}
	struct ctl_waiter *w = calloc(1, sizeof(*w));
	if (w == NULL) {
		return NULL;
	}
	keel_list_init(&w->link);
	keel_list_init(&w->track.link);
	w->api = api;
	w->request = dup_bytes(request, request_size);
	w->request_size = request_size;
	if (reply != NULL) {
		w->reply = dup_bytes(reply, reply_size);
		w->reply_size = reply_size;
	}
	if (w->request == NULL || (reply != NULL && w->reply == NULL)) {
		free(w->request);
		free(w->reply);
		free(w);
		return NULL;
	}
	c->waiter_count++;
	return w;
}

/* Delivers every held reply whose index is applied. */
static void release_held(struct node_core *core)
{
	struct node_ctl *c = ctl_of(core);
	struct keel_list *it, *next;
	KEEL_LIST_FOR_EACH_SAFE(it, next, &c->held)
	{
		struct ctl_waiter *w = KEEL_LIST_ITEM(it, struct ctl_waiter, link);
		if (w->wait_index <= core->applied_index) {
			keel_list_remove(&w->link);
			if (!w->from_leader && w->started_ns != 0) {
				metrics_hist_observe(&c->request_latency,
				                     (core_mono_ns(core) - w->started_ns) / 1000u);
			}
			deliver(core, w->peer, w->request_id, w->wait_index, w->zk_err, w->reply,
			        w->reply_size);
			waiter_free(c, w);
		}
	}
}

/* Answers NOT_CONTROLLER for held replies: every one this server's
 * controller made, or (only_overdue) the leader's replies this server has
 * not caught up with in time. */
static void fail_held(struct node_core *core, bool only_overdue)
{
	struct node_ctl *c = ctl_of(core);
	uint64_t now = core_now_ms(core);
	struct keel_list *it, *next;
	KEEL_LIST_FOR_EACH_SAFE(it, next, &c->held)
	{
		struct ctl_waiter *w = KEEL_LIST_ITEM(it, struct ctl_waiter, link);
		if (only_overdue ? w->from_leader && now >= w->deadline_ms : !w->from_leader) {
			keel_list_remove(&w->link);
			deliver_not_controller(core, w->peer, w->request_id, w->api, w->request,
			                       w->request_size);
			waiter_free(c, w);
		}
	}
}

/* ---- the active controller ---- */

static void controller_stop(struct node_core *core, bool rebuild, const char *why)
{
	struct node_ctl *c = ctl_of(core);
	if (!c->active) {
		return;
	}
	CORE_INFO(core, "controller for epoch %d stopped: %s", c->ctl.controller_epoch, why);
	meta_controller_close(&c->ctl);
	c->active = false;
	c->broken = false;
	c->rebuild_index = rebuild ? c->last_proposed_index : 0;
	fail_held(core, false);
}

/* Proposes a decision as one Raft entry. On failure the controller's
 * working image no longer matches the log: it stops (and is rebuilt). */
static bool propose_batch(struct node_core *core, struct meta_batch *batch)
{
	struct node_ctl *c = ctl_of(core);
	int64_t ts = core_wall_ms(core);
	batch->hdr.timestamp_ms = ts;
	struct keel_wbuf *w = &c->entry_buf;
	keel_wbuf_reset(w);
	node_entry_encode_header(w, NODE_ENTRY_META, 0, 0, ts);
	enum keel_err rc = meta_batch_encode(batch, w);
	if (rc == KEEL_OK && !keel_wbuf_ok(w)) {
		rc = KEEL_TOOBIG;
	}
	uint64_t index = 0, term = 0;
	if (rc == KEEL_OK) {
		rc = core_propose(core, w->data, (uint32_t)w->size, &index, &term);
	}
	if (rc != KEEL_OK) {
		CORE_WARN(core, "cannot propose a metadata batch of %u records (%s)", batch->count,
		          keel_strerror(rc));
		controller_stop(core, true, "a proposal failed");
		return false;
	}
	c->last_proposed_index = index;
	return true;
}

static void controller_tick(struct node_core *core)
{
	struct node_ctl *c = ctl_of(core);
	int64_t now = now_ms(core);
	struct meta_batch *batch = NULL;
	enum keel_err rc = meta_controller_tick(&c->ctl, now, &batch);
	if (rc != KEEL_OK) {
		controller_stop(core, true, "out of memory");
		return;
	}
	if (batch != NULL && !propose_batch(core, batch)) {
		return;
	}
	c->next_tick_ms = KEEL_MIN(now + CTL_TICK_MS, meta_controller_next_tick_ms(&c->ctl, now));
}

/* Starts the controller once this server leads and has applied every
 * entry of earlier terms (and, after a failure, its own in-flight ones). */
static void maybe_start(struct node_core *core)
{
	struct node_ctl *c = ctl_of(core);
#ifdef KEEL_PLANT_BUG_CTL_EARLY_START
	/* PLANTED BUG (keel-sim-bug-ctl-early-start): built as soon as this
	 * server leads, before its image holds the decisions of earlier terms. */
	if (c->active || core->stopped || core->failed || core->role != RAFT_LEADER ||
	    core->leader != core->id) {
		return;
	}
#else
	if (c->active || core->stopped || core->failed || core->role != RAFT_LEADER ||
	    core->leader != core->id || core->applied_term != core->term ||
	    core->applied_index < c->rebuild_index) {
		return;
	}
#endif
	KEEL_ASSERT(core->term <= INT32_MAX);
	enum keel_err rc =
	        meta_controller_init(&c->ctl, &c->cfg, (int32_t)core->id, (int32_t)core->term,
	                             &c->image, &c->rng, now_ms(core));
	if (rc != KEEL_OK) {
		CORE_WARN(core, "cannot start the controller (%s); retrying", keel_strerror(rc));
		return;
	}
	c->active = true;
	c->broken = false;
	c->rebuild_index = 0;
	CORE_INFO(core,
	          "active controller for epoch %llu (metadata offset %lld, %u brokers, %u topics)",
	          (unsigned long long)core->term, (long long)c->image.offset, c->image.broker_count,
	          c->image.topic_count);
	controller_tick(core);
}

void node_ctl_after_apply(struct node_core *core)
{
	struct node_ctl *c = ctl_of(core);
	if (c == NULL) {
		return;
	}
	if (c->active && c->broken) {
		controller_stop(core, true, "the log ignored records of its own batch");
	}
	release_held(core);
	maybe_start(core);
}

void node_ctl_tick(struct node_core *core, uint64_t now)
{
	struct node_ctl *c = ctl_of(core);
	fail_held(core, true);
	maybe_start(core);
	if (c->active && (int64_t)now >= c->next_tick_ms) {
		controller_tick(core);
	}
}

void node_ctl_on_leader_change(struct node_core *core)
{
	struct node_ctl *c = ctl_of(core);
	if (c == NULL) {
		return;
	}
	if (core->leader != core->id) {
		controller_stop(core, false, "leadership lost");
		c->rebuild_index = 0;
	}
	/* Requests forwarded to the old leader: the tracker fails them (every
	 * controller request is safe to retry). */
}

/* ---- controller requests ---- */

/* Decodes, runs and encodes one controller API on the active controller.
 * Returns KEEL_OK with the response in `out` (and *batch to propose),
 * KEEL_PROTO / KEEL_UNSUPPORTED for a body that does not decode, KEEL_NOMEM
 * when the controller must stop, KEEL_TOOBIG when the response is too big. */
#define RUN_API(NAME, CALL)                                                                        \
	{                                                                                          \
		struct meta_##NAME##_request rq;                                                   \
		struct meta_##NAME##_response rs;                                                  \
		memset(&rs, 0, sizeof(rs));                                                        \
		rc = meta_decode_##NAME##_request(body, size, &c->req_arena, &rq, NULL);           \
		if (rc != KEEL_OK) {                                                               \
			return rc == KEEL_UNSUPPORTED ? KEEL_UNSUPPORTED : KEEL_PROTO;             \
		}                                                                                  \
		rc = CALL(&c->ctl, now, &rq, &rs, batch);                                          \
		if (rc != KEEL_OK) {                                                               \
			return KEEL_NOMEM;                                                         \
		}                                                                                  \
		return meta_encode_##NAME##_response(out, &rs) == KEEL_OK ? KEEL_OK : KEEL_TOOBIG; \
	}

static enum keel_err run_api(struct node_core *core, uint8_t api, const uint8_t *body, size_t size,
                             struct keel_wbuf *out, struct meta_batch **batch)
{
	struct node_ctl *c = ctl_of(core);
	keel_arena_reset(&c->req_arena);
	*batch = NULL;
	int64_t now = now_ms(core);
	enum keel_err rc;
	switch ((enum meta_api)api) {
	case META_API_BROKER_REGISTRATION:
		RUN_API(broker_registration, meta_controller_register_broker)
	case META_API_BROKER_HEARTBEAT:
		RUN_API(broker_heartbeat, meta_controller_heartbeat)
	case META_API_UNREGISTER_BROKER:
		RUN_API(unregister_broker, meta_controller_unregister_broker)
	case META_API_CREATE_TOPICS:
		RUN_API(create_topics, meta_controller_create_topics)
	case META_API_DELETE_TOPICS:
		RUN_API(delete_topics, meta_controller_delete_topics)
	case META_API_ALTER_CONFIGS:
		RUN_API(alter_configs, meta_controller_alter_configs)
	case META_API_ALTER_PARTITION:
		RUN_API(alter_partition, meta_controller_alter_partition)
	case META_API_CREATE_PARTITIONS:
		RUN_API(create_partitions, meta_controller_create_partitions)
	case META_API_ELECT_LEADERS:
		RUN_API(elect_leaders, meta_controller_elect_leaders)
	case META_API_ALTER_PARTITION_REASSIGNMENTS:
		RUN_API(alter_reassignments, meta_controller_alter_reassignments)
	case META_API_LIST_PARTITION_REASSIGNMENTS:
		RUN_API(list_reassignments, meta_controller_list_reassignments)
	case META_API_ALLOCATE_PRODUCER_IDS:
		RUN_API(allocate_producer_ids, meta_controller_allocate_producer_ids)
	default:
		return KEEL_PROTO;
	}
}

#undef RUN_API

/* Handles a controller request on the leader: from a client here (peer 0)
 * or forwarded by server `peer`. */
static void handle_on_leader(struct node_core *core, uint64_t peer, uint64_t request_id,
                             uint8_t api, const uint8_t *body, size_t size)
{
	struct node_ctl *c = ctl_of(core);
	if (!c->active) {
		deliver_not_controller(core, peer, request_id, api, body, size);
		return;
	}
	uint64_t started = core_mono_ns(core);
	struct keel_wbuf *out = &c->reply_buf;
	keel_wbuf_reset(out);
	struct meta_batch *batch = NULL;
	enum keel_err rc = run_api(core, api, body, size, out, &batch);
	switch (rc) {
	case KEEL_OK:
		break;
	case KEEL_PROTO:
	case KEEL_UNSUPPORTED:
		deliver(core, peer, request_id, 0, decode_failure(rc), NULL, 0);
		return;
	case KEEL_TOOBIG:
		deliver(core, peer, request_id, 0, ZK_SYSTEM_ERROR, NULL, 0);
		return;
	default:
		controller_stop(core, true, "out of memory");
		deliver_not_controller(core, peer, request_id, api, body, size);
		return;
	}
	if (batch != NULL && !propose_batch(core, batch)) {
		deliver_not_controller(core, peer, request_id, api, body, size);
		return;
	}
#ifdef KEEL_PLANT_BUG_CTL_REPLY_EARLY
	/* PLANTED BUG (keel-sim-bug-ctl-reply-early): the answer goes out
	 * before the decision is committed and applied. */
	bool now = true;
#else
	bool now = c->last_proposed_index <= core->applied_index;
#endif
	if (now) {
		metrics_hist_observe(&c->request_latency, (core_mono_ns(core) - started) / 1000u);
		deliver(core, peer, request_id, c->last_proposed_index, 0, out->data, out->size);
		return;
	}
	struct ctl_waiter *w = waiter_new(c, api, body, size, out->data, out->size);
	if (w == NULL) {
		deliver_not_controller(core, peer, request_id, api, body, size);
		return;
	}
	w->started_ns = started;
	w->peer = peer;
	w->request_id = request_id;
	w->wait_index = c->last_proposed_index;
	keel_list_push_back(&c->held, &w->link);
}

static bool api_of(int32_t opcode, uint8_t *api)
{
	if (opcode < NODE_CTL_OPCODE_BASE || opcode >= NODE_CTL_OPCODE_BASE + META_API_COUNT ||
	    !meta_api_known((enum meta_api)(opcode - NODE_CTL_OPCODE_BASE))) {
		return false;
	}
	*api = (uint8_t)(opcode - NODE_CTL_OPCODE_BASE);
	return true;
}

bool node_ctl_opcode_known(int32_t opcode)
{
	uint8_t api;
	return api_of(opcode, &api);
}

bool node_ctl_opcode_is_read(int32_t opcode)
{
	uint8_t api;
	return api_of(opcode, &api) && !meta_api_needs_controller((enum meta_api)api);
}

bool node_ctl_opcode_needs_cluster(int32_t opcode)
{
	uint8_t api;
	if (!api_of(opcode, &api)) {
		return false;
	}
	switch ((enum meta_api)api) {
	case META_API_BROKER_REGISTRATION:
	case META_API_BROKER_HEARTBEAT:
	case META_API_UNREGISTER_BROKER:
	case META_API_ALTER_PARTITION:
	case META_API_ELECT_LEADERS:
	case META_API_ALLOCATE_PRODUCER_IDS:
		return true;
	default:
		return false;
	}
}

const char *node_ctl_opcode_name(int32_t opcode)
{
	uint8_t api;
	return api_of(opcode, &api) ? meta_api_name((enum meta_api)api) : "?";
}

/* Decodes a controller request only to check it (the server that received
 * it answers a malformed body itself, whoever is the controller). Returns
 * the ZooKeeper error for the reply header, 0 when it decodes. */
#define CHECK_API(NAME)                                                                  \
	{                                                                                \
		struct meta_##NAME##_request rq;                                         \
		rc = meta_decode_##NAME##_request(body, size, &c->req_arena, &rq, NULL); \
		break;                                                                   \
	}

static int32_t check_request(struct node_ctl *c, uint8_t api, const uint8_t *body, size_t size)
{
	keel_arena_reset(&c->req_arena);
	enum keel_err rc;
	switch ((enum meta_api)api) {
	case META_API_BROKER_REGISTRATION:
		CHECK_API(broker_registration)
	case META_API_BROKER_HEARTBEAT:
		CHECK_API(broker_heartbeat)
	case META_API_UNREGISTER_BROKER:
		CHECK_API(unregister_broker)
	case META_API_CREATE_TOPICS:
		CHECK_API(create_topics)
	case META_API_DELETE_TOPICS:
		CHECK_API(delete_topics)
	case META_API_ALTER_CONFIGS:
		CHECK_API(alter_configs)
	case META_API_ALTER_PARTITION:
		CHECK_API(alter_partition)
	case META_API_CREATE_PARTITIONS:
		CHECK_API(create_partitions)
	case META_API_ELECT_LEADERS:
		CHECK_API(elect_leaders)
	case META_API_ALTER_PARTITION_REASSIGNMENTS:
		CHECK_API(alter_reassignments)
	case META_API_LIST_PARTITION_REASSIGNMENTS:
		CHECK_API(list_reassignments)
	case META_API_ALLOCATE_PRODUCER_IDS:
		CHECK_API(allocate_producer_ids)
	default:
		return ZK_UNIMPLEMENTED;
	}
	return rc == KEEL_OK ? 0 : decode_failure(rc);
}

#undef CHECK_API

void node_ctl_submit(struct node_core *core, uint64_t request_id, int32_t opcode,
                     const uint8_t *body, size_t size)
{
	struct node_ctl *c = ctl_of(core);
	uint8_t api = 0;
	bool known = api_of(opcode, &api);
	KEEL_ASSERT(known);
	KEEL_ASSERT(meta_api_needs_controller((enum meta_api)api));
	int32_t zk_err = check_request(c, api, body, size);
	if (zk_err != 0) {
		deliver(core, 0, request_id, 0, zk_err, NULL, 0);
		return;
	}
	if (core->role == RAFT_LEADER) {
		handle_on_leader(core, 0, request_id, api, body, size);
		core_drive(core);
		return;
	}
	struct ctl_waiter *w = NULL;
	size_t mark = 0;
	uint64_t to = 0;
	struct keel_wbuf *fw = NULL;
	if (core->leader != 0) {
		w = waiter_new(c, api, body, size, NULL, 0);
	}
	if (w != NULL) {
		fw = core_request_begin(core, TRACK_META, request_id, &to, &mark);
	}
	if (fw == NULL) {
		if (w != NULL) {
			waiter_free(c, w);
		}
		deliver_not_controller(core, 0, request_id, api, body, size);
		return;
	}
	keel_wbuf_u8(fw, api);
	keel_wbuf_bytes(fw, body, size);
	core_peer_end(core, to, mark);
	w->request_id = request_id;
	w->track.request_id = request_id; /* the client's pending: a tracker id */
	if (tracker_add(&core->tracker, &w->track, TRACK_META, core->tracker.policy.leader_wait_ms,
	                to, core->term, core_now_ms(core)) != KEEL_OK) {
		deliver_not_controller(core, 0, request_id, api, body, size);
		waiter_free(c, w);
		return;
	}
	keel_list_push_back(&c->forwarded, &w->link);
}

/* The leader's reply to a request this server forwarded: i32 ZooKeeper
 * error, then the response body. */
static void track_reply(void *ctx, struct tracker_req *req, const struct tracker_reply *hdr,
                        const uint8_t *body, size_t size)
{
	struct node_core *core = ctx;
	struct node_ctl *c = ctl_of(core);
	struct ctl_waiter *w = KEEL_CONTAINER_OF(req, struct ctl_waiter, track);
	keel_list_remove(&w->link);
	struct keel_rbuf r;
	keel_rbuf_init(&r, body, size);
	int32_t zk_err = keel_rbuf_i32(&r);
	if (hdr->err != KEEL_OK || !keel_rbuf_ok(&r)) {
		deliver_not_controller(core, 0, w->request_id, w->api, w->request, w->request_size);
		waiter_free(c, w);
		return;
	}
	const uint8_t *reply = body + 4;
	size_t reply_size = size - 4;
	if (hdr->wait_index <= core->applied_index) {
		deliver(core, 0, w->request_id, hdr->wait_index, zk_err, reply, reply_size);
		waiter_free(c, w);
		return;
	}
	/* Read-your-writes: complete once this server has applied it too. */
	w->reply = dup_bytes(reply, reply_size);
	if (w->reply == NULL) {
		deliver_not_controller(core, 0, w->request_id, w->api, w->request, w->request_size);
		waiter_free(c, w);
		return;
	}
	w->reply_size = reply_size;
	w->from_leader = true;
	w->deadline_ms = core_now_ms(core) + core->tracker.policy.leader_wait_ms;
	w->zk_err = zk_err;
	w->wait_index = hdr->wait_index;
	keel_list_push_back(&c->held, &w->link);
}

/* No reply from the leader (leader change, lost link, deadline): every
 * controller request is safe to retry, so the client hears NOT_CONTROLLER
 * and asks again. */
static void track_fail(void *ctx, struct tracker_req *req, enum keel_err err)
{
	(void)err;
	struct node_core *core = ctx;
	struct ctl_waiter *w = KEEL_CONTAINER_OF(req, struct ctl_waiter, track);
	keel_list_remove(&w->link);
	deliver_not_controller(core, 0, w->request_id, w->api, w->request, w->request_size);
	waiter_free(ctl_of(core), w);
}

const struct tracker_kind_ops node_ctl_track_ops = {
        .fail = track_fail,
        .reply = track_reply,
        .resend = NULL, /* not held: answered NOT_CONTROLLER at once without a leader */
        .fail_on_leader_change = true,
};

void node_ctl_on_forward(struct node_core *core, uint64_t from, uint64_t request_id,
                         const uint8_t *body, size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, body, size);
	uint8_t api = keel_rbuf_u8(&r);
	if (!keel_rbuf_ok(&r) || !meta_api_known((enum meta_api)api) ||
	    !meta_api_needs_controller((enum meta_api)api)) {
		return;
	}
	handle_on_leader(core, from, request_id, api, body + 1, size - 1);
	core_drive(core);
}

/* ---- reads: DescribeCluster, FetchMetadata ---- */

static int32_t serve_describe(struct node_ctl *c, const uint8_t *body, size_t size,
                              struct keel_wbuf *out)
{
	struct meta_describe_cluster_request rq;
	enum keel_err rc =
	        meta_decode_describe_cluster_request(body, size, &c->req_arena, &rq, NULL);
	if (rc != KEEL_OK) {
		return decode_failure(rc);
	}
	struct meta_describe_cluster_response rs;
	memset(&rs, 0, sizeof(rs));
	rc = meta_describe_cluster(&c->image, &rq, &c->req_arena, &rs);
	size_t start = out->size;
	if (rc == KEEL_OK) {
		rc = meta_encode_describe_cluster_response(out, &rs);
	}
	if (rc == KEEL_OK && keel_wbuf_ok(out) && out->size - start <= reply_budget(c)) {
		return 0;
	}
	/* Too big for one reply: say so; ask for fewer topics. */
	keel_wbuf_reset(out);
	struct meta_describe_cluster_response err;
	memset(&err, 0, sizeof(err));
	err.error = META_ERR_UNKNOWN_SERVER_ERROR;
	err.controller_id = c->image.controller_id;
	err.controller_epoch = c->image.controller_epoch;
	err.metadata_offset = c->image.offset;
	return meta_encode_describe_cluster_response(out, &err) == KEEL_OK ? 0 : ZK_SYSTEM_ERROR;
}

/* The ring's batches from offset `from` on, within `budget` bytes (at
 * least one when it fits `limit`), into the request arena. */
static enum keel_err collect_batches(struct node_core *core, int64_t from, size_t budget,
                                     size_t limit, struct meta_fetch_metadata_response *rs)
{
	struct node_ctl *c = ctl_of(core);
	uint32_t first = ring_find(c, from);
	uint32_t count = 0;
	size_t used = 0;
	while (first + count < c->ring_count) {
		size_t s = ring_at(c, first + count)->size + 32u;
		if (used + s > (count == 0 ? limit : budget)) {
			break;
		}
		used += s;
		count++;
	}
	if (count == 0 && first < c->ring_count) {
		CORE_WARN(core, "FetchMetadata: the batch at %lld is larger than a reply",
		          (long long)ring_at(c, first)->index);
	}
	struct meta_fetch_batch *batches =
	        keel_arena_alloc(&c->req_arena, (count + 1u) * sizeof(*batches));
	if (batches == NULL) {
		return KEEL_NOMEM;
	}
	for (uint32_t i = 0; i < count; i++) {
		const struct ctl_ring_entry *e = ring_at(c, first + i);
		batches[i] = (struct meta_fetch_batch){e->index, e->data, e->size};
	}
	rs->batches = batches;
	rs->batch_count = count;
	return KEEL_OK;
}

static int32_t serve_fetch(struct node_core *core, const uint8_t *body, size_t size,
                           struct keel_wbuf *out)
{
	struct node_ctl *c = ctl_of(core);
	struct meta_fetch_metadata_request rq;
	enum keel_err rc = meta_decode_fetch_metadata_request(body, size, &c->req_arena, &rq, NULL);
	if (rc != KEEL_OK) {
		return decode_failure(rc);
	}
	struct meta_fetch_metadata_response rs;
	memset(&rs, 0, sizeof(rs));
	rs.high_watermark = (int64_t)core->applied_index;
	rs.snapshot_offset = -1;
	size_t limit = reply_budget(c);
	size_t budget = rq.max_bytes > 0 ? KEEL_MIN(limit, (size_t)rq.max_bytes) : limit;
	int64_t from = KEEL_MAX(rq.from_offset, (int64_t)1);
	uint8_t *snapshot = NULL;
	if (from > c->ring_floor) {
		if (collect_batches(core, from, budget, limit, &rs) != KEEL_OK) {
			return ZK_SYSTEM_ERROR;
		}
	} else {
		/* The ring no longer holds it: the whole image instead. */
		size_t snap_size = 0;
		snapshot = meta_image_save_to_memory(&c->image, limit, &snap_size, &rc);
		if (snapshot == NULL) {
			CORE_WARN(core, "FetchMetadata from %lld: cannot send the image (%s)",
			          (long long)from, keel_strerror(rc));
			rs.error = META_ERR_UNKNOWN_SERVER_ERROR;
		} else {
			rs.snapshot_offset = c->image.offset;
			rs.snapshot = snapshot;
			rs.snapshot_size = snap_size;
		}
	}
	rc = meta_encode_fetch_metadata_response(out, &rs);
	free(snapshot);
	return rc == KEEL_OK && keel_wbuf_ok(out) ? 0 : ZK_SYSTEM_ERROR;
}

int32_t node_ctl_serve_read(struct node_core *core, int32_t opcode, const uint8_t *body,
                            size_t size, struct keel_wbuf *out)
{
	struct node_ctl *c = ctl_of(core);
	uint8_t api;
	if (!api_of(opcode, &api)) {
		return ZK_UNIMPLEMENTED;
	}
	keel_arena_reset(&c->req_arena);
	switch ((enum meta_api)api) {
	case META_API_DESCRIBE_CLUSTER:
		return serve_describe(c, body, size, out);
	case META_API_FETCH_METADATA:
		return serve_fetch(core, body, size, out);
	default:
		return ZK_UNIMPLEMENTED;
	}
}
