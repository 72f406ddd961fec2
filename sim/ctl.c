/*
 * ctl.c — controller mode, server side: every server applies metadata
 * batches to its image; the Raft leader runs a meta_controller with the
 * same rules as the real server (src/node/controller.c):
 *
 *   start    when this server leads, knows itself as leader, has applied an
 *            entry of its own term (so every entry of earlier terms too: the
 *            image is complete) and — after a failure — its own last
 *            proposal; the controller epoch is the Raft term;
 *   tick     every SIM_CTL_TICK_MS of the server's (drifting) clock, or
 *            sooner when the controller asks (meta_controller_next_tick_ms);
 *   propose  each batch as ONE Raft entry (tag byte + meta_batch_encode),
 *            stamped with the server's clock; a refused proposal stops the
 *            controller, which is rebuilt once the applied index reaches its
 *            last proposal;
 *   replies  held until every batch the controller proposed so far is
 *            applied on this server — then checked against this server's
 *            image (ctl_check.c) and sent; failed with NOT_CONTROLLER when
 *            the controller stops, lost when the server dies;
 *   stop     when leadership is lost, when a snapshot replaces the image,
 *            when the log ignored records of its own batch (broken).
 *
 * Requests come from simulated brokers and the admin client (broker.c) as
 * struct sim_ctl_msg in event packets; a server that is not the active
 * controller answers NOT_CONTROLLER with the leader it knows (the real
 * server forwards instead; the broker's retry is the same thing here).
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/buf.h"
#include "meta/format.h"
#include "meta/proto.h"
#include "sim/ctl_int.h"

static int64_t server_now(const struct sim *s, const struct sim_node *n)
{
	return (int64_t)sim_local_time(s, n);
}

/* ---- the replicated part ---- */

static bool first_apply(const struct sim *s, uint64_t index)
{
	return index >= s->cap_committed || !s->committed[index].known;
}

static void log_append(struct sim_ctl_world *w, uint64_t index, const uint8_t *data, size_t size)
{
	KEEL_ASSERT(w->n_log == 0 || w->log[w->n_log - 1].index < index);
	if (w->n_log == w->cap_log) {
		w->cap_log = w->cap_log == 0 ? 64 : w->cap_log * 2;
		w->log = realloc(w->log, w->cap_log * sizeof(*w->log));
		KEEL_ASSERT(w->log != NULL);
	}
	uint8_t *copy = malloc(size > 0 ? size : 1);
	KEEL_ASSERT(copy != NULL);
	memcpy(copy, data, size);
	w->log[w->n_log++] = (struct sim_meta_entry){index, copy, size};
}

static void trace_line(void *ctx, const char *line)
{
	sim_tracef(ctx, "  meta: %.140s", line);
}

/* --verbose: the batch as `keel log dump` prints it. */
static void trace_batch(struct sim *s, const struct meta_image *img, uint64_t index,
			const struct meta_batch *batch)
{
	struct meta_image copy;
	meta_image_init(&copy, NULL);
	if (meta_image_clone(&copy, img) == KEEL_OK) {
		meta_log_dump_batch(&copy, (int64_t)index, batch, trace_line, s);
	}
	meta_image_close(&copy);
}

void sim_ctl_apply(struct sim *s, struct sim_node *n, const struct raft_entry *e)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	KEEL_ASSERT(w != NULL);
	keel_arena_reset(&w->arena);
	struct meta_batch batch;
	struct meta_errbuf eb;
	memset(&eb, 0, sizeof(eb));
	enum keel_err err = meta_batch_decode(e->data + 1, e->size - 1, &w->arena, &batch, &eb);
	if (err != KEEL_OK) {
		sim_fail(s, "node %llu: metadata entry %llu does not decode: %s (%s)",
			 (unsigned long long)n->id, (unsigned long long)e->index, keel_errname(err),
			 eb.msg);
		return;
	}
	struct meta_apply_result res;
	memset(&res, 0, sizeof(res));
	err = meta_image_apply(n->sm.image, (int64_t)e->index, &batch, NULL, &res);
	if (err != KEEL_OK) {
		sim_fail(s, "node %llu: metadata entry %llu does not apply: %s",
			 (unsigned long long)n->id, (unsigned long long)e->index, keel_errname(err));
		return;
	}
	n->sm.image_hash = meta_image_hash(n->sm.image);
	struct sim_node_ctl *c = &n->ctl;
	if ((res.ignored > 0 || res.batch_ignored) && c->active &&
	    batch.hdr.controller_id == c->ctl.controller_id &&
	    batch.hdr.controller_epoch == c->ctl.controller_epoch) {
		c->broken = true;
	}
	sim_ctl_note_applied(s, n, e->index, e->data + 1, e->size - 1, &res);
}

void sim_ctl_note_applied(struct sim *s, struct sim_node *n, uint64_t index, const uint8_t *data,
			  size_t size, const struct meta_apply_result *res)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	if (!first_apply(s, index)) {
		return;
	}
	keel_arena_reset(&w->arena);
	struct meta_batch batch;
	struct meta_errbuf eb;
	memset(&eb, 0, sizeof(eb));
	enum keel_err err = meta_batch_decode(data, size, &w->arena, &batch, &eb);
	KEEL_ASSERT(err == KEEL_OK); /* the server applied it */
	if (s->cfg.verbose) {
		trace_batch(s, n->sm.image, index, &batch);
	}
	log_append(w, index, data, size);
	sim_ctl_check_first_apply(s, n, index, res);
	w->stat_batches++;
	w->stat_records += batch.count;
	for (uint32_t i = 0; i < batch.count; i++) {
		const struct meta_record *r = &batch.records[i];
		w->stat_registrations += r->type == META_REC_REGISTER_BROKER;
		w->stat_fences += r->type == META_REC_FENCE_BROKER;
		if (r->type == META_REC_PARTITION_CHANGE) {
			w->stat_leader_changes += (r->partition_change.fields & META_PC_LEADER) != 0;
			w->stat_isr_changes += (r->partition_change.fields & META_PC_ISR) != 0;
		}
		w->stat_topics += r->type == META_REC_TOPIC;
	}
}

bool sim_node_controller(const struct sim_node *n, const struct meta_controller **ctl,
			 uint64_t *last_proposed_index)
{
	if (n->host != NULL) {
		*ctl = sim_host_controller(n, last_proposed_index);
		return *ctl != NULL;
	}
	*ctl = n->ctl.active ? &n->ctl.ctl : NULL;
	*last_proposed_index = n->ctl.last_proposed_index;
	return n->ctl.active;
}

/* ---- replies ---- */

/* Sends a reply from server `from` to its broker (or the admin client). */
static void send_reply(struct sim *s, uint64_t from, struct sim_ctl_msg *m)
{
	m->server = from;
	if (keel_rng_chance(&s->rng, s->net.drop_per_mille, 1000)) {
		free(m); /* lost: the broker times out and asks again */
		return;
	}
	struct sim_packet pkt = {from, 0, (uint8_t *)m, sizeof(*m)};
	uint64_t delay = keel_rng_between(&s->rng, s->net.min_delay_ms, s->net.max_delay_ms);
	sim_schedule(s, s->now + delay, SIM_EV_CTL_REPLY, (uint64_t)m->broker, 0, &pkt);
}

static struct sim_ctl_msg *msg_copy(const struct sim_ctl_msg *m)
{
	struct sim_ctl_msg *copy = malloc(sizeof(*copy));
	KEEL_ASSERT(copy != NULL);
	*copy = *m;
	return copy;
}

static void not_controller(struct sim *s, struct sim_node *n, struct sim_ctl_msg *m)
{
	m->error = META_ERR_NOT_CONTROLLER;
	m->leader_hint = n->up ? raft_leader(n->r) : 0;
	sim_ctlw(s)->stat_not_controller++;
	send_reply(s, n->id, msg_copy(m));
}

void sim_ctl_release(struct sim *s, struct sim_node *n, struct sim_ctl_msg *reply)
{
	if (reply->error == META_ERR_NOT_CONTROLLER) {
		reply->leader_hint = n->up ? raft_leader(n->r) : 0;
		sim_ctlw(s)->stat_not_controller++;
	} else {
		sim_ctl_check_reply(s, n, reply);
	}
	send_reply(s, n->id, reply);
}

static void release_held(struct sim *s, struct sim_node *n)
{
	struct sim_node_ctl *c = &n->ctl;
	size_t k = 0;
	for (size_t i = 0; i < c->n_held; i++) {
		struct sim_held_reply *h = &c->held[i];
		if (h->wait_index > n->sm.applied) {
			c->held[k++] = *h;
			continue;
		}
		sim_ctl_check_reply(s, n, h->msg);
		send_reply(s, n->id, h->msg);
	}
	c->n_held = k;
}

static void drop_held(struct sim *s, struct sim_node *n, bool answer)
{
	struct sim_node_ctl *c = &n->ctl;
	for (size_t i = 0; i < c->n_held; i++) {
		if (answer) {
			c->held[i].msg->error = META_ERR_NOT_CONTROLLER;
			c->held[i].msg->leader_hint = 0;
			send_reply(s, n->id, c->held[i].msg);
		} else {
			free(c->held[i].msg);
		}
	}
	c->n_held = 0;
}

/* ---- the active controller ---- */

static void controller_stop(struct sim *s, struct sim_node *n, bool rebuild, const char *why)
{
	struct sim_node_ctl *c = &n->ctl;
	if (!c->active) {
		return;
	}
	sim_tracef(s, "node %llu: controller of epoch %d stops: %s", (unsigned long long)n->id,
		   c->ctl.controller_epoch, why);
	meta_controller_close(&c->ctl);
	c->active = false;
	c->broken = false;
	c->rebuild_index = rebuild ? c->last_proposed_index : 0;
	drop_held(s, n, n->up);
}

static bool propose(struct sim *s, struct sim_node *n, struct meta_batch *batch)
{
	struct sim_node_ctl *c = &n->ctl;
	batch->hdr.timestamp_ms = server_now(s, n);
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 512, 16u << 20);
	keel_wbuf_u8(&w, SIM_META_TAG);
	enum keel_err err = meta_batch_encode(batch, &w);
	if (err == KEEL_OK && !keel_wbuf_ok(&w)) {
		err = KEEL_TOOBIG;
	}
	if (err != KEEL_OK) {
		sim_fail(s, "node %llu: a controller batch of %u records does not encode: %s",
			 (unsigned long long)n->id, batch->count, keel_errname(err));
		keel_wbuf_free(&w);
		return false;
	}
	uint64_t index = 0, term = 0;
	err = raft_propose(n->r, w.data, (uint32_t)w.size, &index, &term);
	keel_wbuf_free(&w);
	if (err != KEEL_OK) {
		sim_tracef(s, "node %llu: controller proposal refused: %s", (unsigned long long)n->id,
			   keel_errname(err));
		controller_stop(s, n, true, "a proposal failed");
		return false;
	}
	c->last_proposed_index = index;
	return true;
}

static void controller_tick(struct sim *s, struct sim_node *n)
{
	struct sim_node_ctl *c = &n->ctl;
	int64_t now = server_now(s, n);
	struct meta_batch *batch = NULL;
	enum keel_err err = meta_controller_tick(&c->ctl, now, &batch);
	if (err != KEEL_OK) {
		controller_stop(s, n, true, "out of memory");
		return;
	}
	if (batch != NULL && !propose(s, n, batch)) {
		return;
	}
	int64_t next = meta_controller_next_tick_ms(&c->ctl, now);
	c->next_tick_local = (uint64_t)KEEL_MIN(now + SIM_CTL_TICK_MS, KEEL_MAX(next, now));
	sim_ctl_check_working(s, n);
}

static bool leads(const struct sim_node *n)
{
	return n->up && raft_role(n->r) == RAFT_LEADER && raft_leader(n->r) == n->id;
}

/* KEEL_PLANT_BUG_CTL_EARLY_START breaks the start rule: the controller
 * starts as soon as this server leads, from an image that may miss
 * committed decisions of earlier terms. */
static void maybe_start(struct sim *s, struct sim_node *n)
{
	struct sim_node_ctl *c = &n->ctl;
#ifdef KEEL_PLANT_BUG_CTL_EARLY_START
	if (c->active || !leads(n)) {
		return;
	}
#else
	if (c->active || !leads(n) || n->sm.applied_term != raft_term(n->r) ||
	    n->sm.applied < c->rebuild_index) {
		return;
	}
#endif
	KEEL_ASSERT(raft_term(n->r) <= INT32_MAX);
	enum keel_err err = meta_controller_init(&c->ctl, &sim_ctlw(s)->cfg, (int32_t)n->id,
						 (int32_t)raft_term(n->r), n->sm.image, &c->rng,
						 server_now(s, n));
	KEEL_ASSERT(err == KEEL_OK);
	c->active = true;
	c->broken = false;
	c->rebuild_index = 0;
	c->last_proposed_index = 0;
	sim_ctlw(s)->stat_controllers++;
	sim_tracef(s, "node %llu: active controller of epoch %llu (metadata offset %lld)",
		   (unsigned long long)n->id, (unsigned long long)raft_term(n->r),
		   (long long)n->sm.image->offset);
	controller_tick(s, n);
}

void sim_ctl_after_apply(struct sim *s, struct sim_node *n)
{
	if (!s->cfg.controller || !n->up) {
		return;
	}
	struct sim_node_ctl *c = &n->ctl;
	if (c->active && c->broken) {
		controller_stop(s, n, true, "the log ignored records of its own batch");
	}
	if (c->active && !leads(n)) {
		controller_stop(s, n, false, "leadership lost");
	}
	release_held(s, n);
	maybe_start(s, n);
}

void sim_ctl_tick(struct sim *s, struct sim_node *n)
{
	if (!s->cfg.controller || !n->up) {
		return;
	}
	sim_ctl_after_apply(s, n);
	struct sim_node_ctl *c = &n->ctl;
	if (c->active && sim_local_time(s, n) >= c->next_tick_local) {
		controller_tick(s, n);
	}
}

void sim_ctl_on_node_down(struct sim *s, struct sim_node *n)
{
	struct sim_node_ctl *c = &n->ctl;
	if (c->active) {
		meta_controller_close(&c->ctl);
		c->active = false;
	}
	drop_held(s, n, false); /* the process died: its replies with it */
	free(c->held);
	c->held = NULL;
	c->cap_held = 0;
	c->broken = false;
	c->rebuild_index = 0;
	c->last_proposed_index = 0;
}

void sim_ctl_image_replaced(struct sim *s, struct sim_node *n)
{
	if (s->cfg.controller) {
		controller_stop(s, n, true, "a snapshot replaced the image");
	}
}

/* ---- requests ---- */

static enum keel_err run_register(struct sim_node *n, int64_t now, struct sim_ctl_msg *m,
				  struct meta_batch **batch)
{
	static const struct meta_endpoint ep = {"PLAINTEXT", "127.0.0.1", 9092, META_SEC_PLAINTEXT};
	struct meta_broker_registration_request req = {
		.broker_id = m->broker,
		.endpoints = &ep,
		.endpoint_count = 1,
		.rack = m->rack[0] != '\0' ? m->rack : NULL,
		.previous_broker_epoch = m->broker_epoch,
	};
	sim_ctl_incarnation_id(m->broker, m->incarnation, req.incarnation_id);
	struct meta_broker_registration_response resp;
	enum keel_err err = meta_controller_register_broker(&n->ctl.ctl, now, &req, &resp, batch);
	m->error = resp.error;
	m->assigned_epoch = resp.broker_epoch;
	return err;
}

static enum keel_err run_heartbeat(struct sim_node *n, int64_t now, struct sim_ctl_msg *m,
				   struct meta_batch **batch)
{
	struct meta_broker_heartbeat_request req = {m->broker, m->broker_epoch, m->metadata_offset,
						    false, m->want_shutdown};
	struct meta_broker_heartbeat_response resp;
	enum keel_err err = meta_controller_heartbeat(&n->ctl.ctl, now, &req, &resp, batch);
	m->error = resp.error;
	m->is_caught_up = resp.is_caught_up;
	m->is_fenced = resp.is_fenced;
	m->should_shut_down = resp.should_shut_down;
	return err;
}

static enum keel_err run_alter_partition(struct sim_node *n, int64_t now, struct sim_ctl_msg *m,
					 struct meta_batch **batch)
{
	struct meta_alter_partition_item item = {m->partition, m->leader_epoch, m->partition_epoch,
						 m->isr, m->isr_count, m->recovery};
	struct meta_alter_partition_topic topic;
	memcpy(topic.topic_id, m->topic_id, META_UUID_SIZE);
	topic.partitions = &item;
	topic.partition_count = 1;
	struct meta_alter_partition_request req = {m->broker, m->broker_epoch, &topic, 1};
	struct meta_alter_partition_response resp;
	enum keel_err err = meta_controller_alter_partition(&n->ctl.ctl, now, &req, &resp, batch);
	m->error = resp.error;
	if (err == KEEL_OK && resp.error == META_ERR_NONE && resp.topic_count == 1 &&
	    resp.topics[0].partition_count == 1) {
		const struct meta_alter_partition_result *r = &resp.topics[0].partitions[0];
		m->error = r->error;
		m->result_leader = r->leader;
		m->result_leader_epoch = r->leader_epoch;
		m->result_partition_epoch = r->partition_epoch;
	}
	return err;
}

static enum keel_err run_admin(struct sim_node *n, int64_t now, struct sim_ctl_msg *m,
			       struct meta_batch **batch)
{
	static const struct meta_config_kv unclean_on[] = {{META_CONFIG_UNCLEAN_ELECTION, "true"}};
	static const struct meta_config_kv unclean_off[] = {{META_CONFIG_UNCLEAN_ELECTION, "false"}};
	enum keel_err err = KEEL_OK;
	if (m->api == SIM_API_CREATE_TOPIC) {
		struct meta_create_topic t = {m->topic, m->partitions, m->replication_factor,
					      m->unclean ? unclean_on : NULL, m->unclean ? 1 : 0,
					      NULL, 0};
		struct meta_create_topics_request req = {&t, 1, false};
		struct meta_create_topics_response resp;
		err = meta_controller_create_topics(&n->ctl.ctl, now, &req, &resp, batch);
		m->error = err == KEEL_OK && resp.topic_count == 1 ? resp.topics[0].error
								   : META_ERR_UNKNOWN_SERVER_ERROR;
	} else if (m->api == SIM_API_DELETE_TOPIC) {
		const char *name = m->topic;
		struct meta_delete_topics_request req = {&name, 1};
		struct meta_delete_topics_response resp;
		err = meta_controller_delete_topics(&n->ctl.ctl, now, &req, &resp, batch);
		m->error = err == KEEL_OK && resp.result_count == 1 ? resp.results[0].error
								    : META_ERR_UNKNOWN_SERVER_ERROR;
	} else {
		struct meta_alter_config_resource res = {META_RESOURCE_BROKER, "",
							 m->unclean ? unclean_on : unclean_off, 1};
		struct meta_alter_configs_request req = {&res, 1, false};
		struct meta_alter_configs_response resp;
		err = meta_controller_alter_configs(&n->ctl.ctl, now, &req, &resp, batch);
		m->error = err == KEEL_OK && resp.result_count == 1 ? resp.results[0].error
								    : META_ERR_UNKNOWN_SERVER_ERROR;
	}
	return err;
}

static enum keel_err run_api(struct sim_node *n, int64_t now, struct sim_ctl_msg *m,
			     struct meta_batch **batch)
{
	*batch = NULL;
	switch (m->api) {
	case SIM_API_REGISTER:
		return run_register(n, now, m, batch);
	case SIM_API_HEARTBEAT:
		return run_heartbeat(n, now, m, batch);
	case SIM_API_ALTER_PARTITION:
		return run_alter_partition(n, now, m, batch);
	default:
		return run_admin(n, now, m, batch);
	}
}

void sim_ctl_request(struct sim *s, struct sim_event *ev)
{
	struct sim_node *n = &s->nodes[ev->node];
	struct sim_ctl_msg *m = (struct sim_ctl_msg *)ev->pkt.bytes;
	KEEL_ASSERT(ev->pkt.size == sizeof(*m));
	if (!n->up) {
		return; /* nobody listens: the broker times out */
	}
	sim_ctlw(s)->stat_requests++;
	if (n->host != NULL) {
		sim_host_ctl_request(s, n, m);
		return;
	}
	sim_ctl_after_apply(s, n);
	struct sim_node_ctl *c = &n->ctl;
	struct meta_batch *batch = NULL;
	if (!c->active) {
		not_controller(s, n, m);
		goto out;
	}
	if (run_api(n, server_now(s, n), m, &batch) != KEEL_OK) {
		controller_stop(s, n, true, "out of memory");
		not_controller(s, n, m);
		goto out;
	}
	if (batch != NULL && !propose(s, n, batch)) {
		not_controller(s, n, m);
		goto out;
	}
	struct sim_ctl_msg *reply = msg_copy(m);
#ifdef KEEL_PLANT_BUG_CTL_REPLY_EARLY
	/* planted bug: answer before the decision is applied (committed) */
	bool now = true;
#else
	bool now = c->last_proposed_index <= n->sm.applied;
#endif
	if (now) {
		sim_ctl_check_reply(s, n, reply);
		send_reply(s, n->id, reply);
	} else if (c->n_held < SIM_MAX_HELD) {
		if (c->n_held == c->cap_held) {
			c->cap_held = c->cap_held == 0 ? 16 : c->cap_held * 2;
			c->held = realloc(c->held, c->cap_held * sizeof(*c->held));
			KEEL_ASSERT(c->held != NULL);
		}
		c->held[c->n_held++] = (struct sim_held_reply){c->last_proposed_index, reply};
	} else {
		free(reply);
		not_controller(s, n, m);
	}
out:
	sim_node_process(s, n);
}
