/*
 * test_meta_harness.h — a stand-in for the server and the brokers around a
 * meta_controller, for the controller unit tests.
 *
 * The "server" proposes every batch the controller returns: it stamps and
 * encodes it, and either commits it at once (auto_commit) or keeps it
 * pending. Committing decodes the bytes and applies them to the committed
 * image at the next Raft index (sometimes skipping indexes, as ZooKeeper
 * entries would), exactly as the real server must. A reply takes effect
 * only once every batch proposed before it (and its own) has committed —
 * the rule the server must keep, since a reply describes the controller's
 * working image; a reply with nothing in flight takes effect at once. A
 * failover drops or commits the pending batches (and the replies waiting
 * on them) and builds a new controller from the committed image.
 *
 * The "brokers" register, heartbeat, follow the committed log instantly,
 * and — as partition leaders — add every live, active replica back into
 * the ISR with AlterPartition (as if followers caught up at once), and mark
 * a RECOVERING partition RECOVERED.
 */
#ifndef KEEL_TEST_META_HARNESS_H
#define KEEL_TEST_META_HARNESS_H

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "meta/controller.h"
#include "meta/image.h"
#include "meta/proto.h"

#define H_MAX_BROKERS 16
#define H_MAX_PENDING 256

struct h_broker {
	int32_t id;
	const char *rack;
	bool alive;          /* process running */
	bool paused;         /* running but not heartbeating */
	bool registered;     /* knows its epoch */
	bool register_sent;  /* a registration is in flight */
	bool shutting_down;  /* wants a controlled shutdown */
	bool was_told_stop;  /* got should_shut_down (committed) */
	int64_t epoch;
	uint32_t incarnation; /* bumps on every restart */
};

struct h_pending {
	uint8_t *data; /* NULL: only a reply waiting for the batches before it */
	size_t size;
	int32_t registered_broker; /* -1 or the broker whose registration reply this carries */
	int64_t registered_epoch;
	int32_t stop_broker; /* -1 or the broker told to stop when this commits */
	uint32_t incarnation; /* of that broker when the reply was made */
};

struct h_cluster {
	struct meta_image committed;
	struct meta_controller ctl;
	bool has_ctl;
	struct meta_controller_config cfg;
	struct keel_rng rng;     /* the controller's (topic ids) */
	struct keel_rng sim_rng; /* the harness's own choices */
	int64_t now;
	int64_t offset;
	int32_t term;
	int32_t server_id;
	struct h_broker brokers[H_MAX_BROKERS];
	uint32_t broker_count;
	struct h_pending pending[H_MAX_PENDING];
	uint32_t pending_count;
	bool auto_commit;
	bool expand_isr; /* leaders re-add caught-up replicas */
	struct meta_changes changes;
	uint32_t applied_batches;
	uint32_t ignored_records;
	void (*on_commit)(struct h_cluster *c, const struct meta_batch *b, void *ctx);
	void *ctx;
};

static inline void h_incarnation(const struct h_broker *b, uint8_t out[16])
{
	memset(out, 0, 16);
	out[0] = 0xbe;
	out[1] = (uint8_t)b->id;
	keel_store_be32(out + 4, b->incarnation);
}

static inline void h_new_controller(struct h_cluster *c)
{
	KEEL_ASSERT(!c->has_ctl);
	KEEL_ASSERT(meta_controller_init(&c->ctl, &c->cfg, c->server_id, c->term, &c->committed,
					 &c->rng, c->now) == KEEL_OK);
	c->has_ctl = true;
}

static inline void h_init(struct h_cluster *c, uint64_t seed,
			  const struct meta_controller_config *cfg)
{
	memset(c, 0, sizeof(*c));
	meta_image_init(&c->committed, NULL);
	if (cfg != NULL) {
		c->cfg = *cfg;
	} else {
		meta_controller_config_default(&c->cfg);
	}
	keel_rng_seed(&c->rng, seed);
	keel_rng_seed(&c->sim_rng, seed ^ 0x5eed);
	c->now = 1000;
	c->term = 1;
	c->server_id = 1;
	c->auto_commit = true;
	c->expand_isr = true;
	meta_changes_init(&c->changes, 1u << 20);
	h_new_controller(c);
}

static inline void h_close(struct h_cluster *c)
{
	for (uint32_t i = 0; i < c->pending_count; i++) {
		free(c->pending[i].data);
	}
	if (c->has_ctl) {
		meta_controller_close(&c->ctl);
	}
	meta_changes_close(&c->changes);
	meta_image_close(&c->committed);
}

static inline struct h_broker *h_broker(struct h_cluster *c, int32_t id)
{
	for (uint32_t i = 0; i < c->broker_count; i++) {
		if (c->brokers[i].id == id) {
			return &c->brokers[i];
		}
	}
	return NULL;
}

static inline struct h_broker *h_add_broker(struct h_cluster *c, int32_t id, const char *rack)
{
	KEEL_ASSERT(c->broker_count < H_MAX_BROKERS);
	struct h_broker *b = &c->brokers[c->broker_count++];
	memset(b, 0, sizeof(*b));
	b->id = id;
	b->rack = rack;
	b->alive = true;
	b->incarnation = 1;
	return b;
}

/* Commits the oldest pending batch. */
static inline void h_commit_one(struct h_cluster *c)
{
	KEEL_ASSERT(c->pending_count > 0);
	struct h_pending p = c->pending[0];
	memmove(&c->pending[0], &c->pending[1], (c->pending_count - 1) * sizeof(c->pending[0]));
	c->pending_count--;

	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct meta_batch batch;
	if (p.data != NULL) {
		struct meta_errbuf eb;
		KEEL_ASSERT(meta_batch_decode(p.data, p.size, &arena, &batch, &eb) == KEEL_OK);
		/* Raft indexes: ZooKeeper entries may sit between metadata batches. */
		c->offset += 1 + (int64_t)keel_rng_below(&c->sim_rng, 3);
		meta_changes_reset(&c->changes);
		struct meta_apply_result res;
		KEEL_ASSERT(meta_image_apply(&c->committed, c->offset, &batch, &c->changes,
					     &res) == KEEL_OK);
		c->applied_batches++;
		c->ignored_records += res.ignored;
	}
	/* A reply reaches the process that asked, not a later incarnation. */
	if (p.registered_broker >= 0) {
		struct h_broker *b = h_broker(c, p.registered_broker);
		if (b->incarnation == p.incarnation && b->alive) {
			b->register_sent = false;
			b->registered = true;
			b->epoch = p.registered_epoch;
		}
	}
	if (p.stop_broker >= 0) {
		struct h_broker *b = h_broker(c, p.stop_broker);
		if (b->incarnation == p.incarnation && b->alive) {
			b->was_told_stop = true;
			b->alive = false;
		}
	}
	if (c->on_commit != NULL && p.data != NULL) {
		c->on_commit(c, &batch, c->ctx);
	}
	keel_arena_close(&arena);
	free(p.data);
}

static inline void h_commit_all(struct h_cluster *c)
{
	while (c->pending_count > 0) {
		h_commit_one(c);
	}
}

/*
 * The server's part after a controller call: propose the batch (if any),
 * and send the reply (its effects: a registration epoch, a stop) once the
 * batch and every one before it has committed.
 */
static inline void h_propose(struct h_cluster *c, struct meta_batch *batch, int32_t reg_broker,
			     int64_t reg_epoch, int32_t stop_broker)
{
	bool has_effect = reg_broker >= 0 || stop_broker >= 0;
	if (batch == NULL && !has_effect) {
		return;
	}
	if (batch == NULL && c->pending_count == 0) {
		/* Nothing in flight: the reply goes out now. */
		struct h_pending now = {NULL, 0, reg_broker, reg_epoch, stop_broker, 0};
		int32_t who = reg_broker >= 0 ? reg_broker : stop_broker;
		now.incarnation = who >= 0 ? h_broker(c, who)->incarnation : 0;
		KEEL_ASSERT(c->pending_count < H_MAX_PENDING);
		c->pending[c->pending_count++] = now;
		h_commit_one(c);
		return;
	}
	KEEL_ASSERT(c->pending_count < H_MAX_PENDING);
	struct h_pending *p = &c->pending[c->pending_count++];
	memset(p, 0, sizeof(*p));
	if (batch != NULL) {
		batch->hdr.timestamp_ms = 1700000000000ll + c->now;
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 256, 64u << 20);
		KEEL_ASSERT(meta_batch_encode(batch, &w) == KEEL_OK);
		p->data = keel_wbuf_release(&w, &p->size);
	}
	p->registered_broker = reg_broker;
	p->registered_epoch = reg_epoch;
	p->stop_broker = stop_broker;
	int32_t who = reg_broker >= 0 ? reg_broker : stop_broker;
	p->incarnation = who >= 0 ? h_broker(c, who)->incarnation : 0;
	if (c->auto_commit) {
		h_commit_all(c);
	}
}

/* Leadership moves: keep (commit) or lose (drop) the pending batches, then
 * a new controller (next term) from the committed image. */
static inline void h_failover(struct h_cluster *c, uint32_t keep)
{
	KEEL_ASSERT(c->has_ctl);
	meta_controller_close(&c->ctl);
	c->has_ctl = false;
	while (keep > 0 && c->pending_count > 0) {
		h_commit_one(c);
		keep--;
	}
	for (uint32_t i = 0; i < c->pending_count; i++) {
		struct h_pending *p = &c->pending[i];
		if (p->registered_broker >= 0) {
			h_broker(c, p->registered_broker)->register_sent = false;
		}
		free(p->data);
	}
	c->pending_count = 0;
	c->term++;
	c->server_id = c->server_id % 3 + 1;
	h_new_controller(c);
}

static inline void h_tick(struct h_cluster *c)
{
	struct meta_batch *batch;
	KEEL_ASSERT(meta_controller_tick(&c->ctl, c->now, &batch) == KEEL_OK);
	h_propose(c, batch, -1, 0, -1);
}

static inline struct meta_broker_registration_response h_register(struct h_cluster *c,
								    struct h_broker *b)
{
	static const struct meta_endpoint ep = {"PLAINTEXT", "127.0.0.1", 9092, META_SEC_PLAINTEXT};
	struct meta_broker_registration_request req = {.broker_id = b->id,
						       .endpoints = &ep,
						       .endpoint_count = 1,
						       .rack = b->rack,
						       .previous_broker_epoch = -1};
	h_incarnation(b, req.incarnation_id);
	struct meta_broker_registration_response resp;
	struct meta_batch *batch;
	KEEL_ASSERT(meta_controller_register_broker(&c->ctl, c->now, &req, &resp, &batch) ==
		    KEEL_OK);
	if (resp.error != META_ERR_NONE) {
		return resp;
	}
	b->register_sent = true;
	h_propose(c, batch, b->id, resp.broker_epoch, -1);
	return resp;
}

static inline struct meta_broker_heartbeat_response h_heartbeat(struct h_cluster *c,
								  struct h_broker *b)
{
	struct meta_broker_heartbeat_request req = {b->id, b->epoch, c->committed.offset, false,
						    b->shutting_down};
	struct meta_broker_heartbeat_response resp;
	struct meta_batch *batch;
	KEEL_ASSERT(meta_controller_heartbeat(&c->ctl, c->now, &req, &resp, &batch) == KEEL_OK);
	if (resp.error == META_ERR_STALE_BROKER_EPOCH ||
	    resp.error == META_ERR_BROKER_ID_NOT_REGISTERED) {
		b->registered = false;
	}
	bool stop = resp.error == META_ERR_NONE && resp.should_shut_down;
	h_propose(c, batch, -1, 0, stop ? b->id : -1);
	return resp;
}

/* A partition leader's ISR maintenance, from its own (committed) view. */
static inline void h_leader_duties(struct h_cluster *c, struct h_broker *b)
{
	const struct meta_image *img = &c->committed;
	for (uint32_t t = 0; t < img->topic_count; t++) {
		const struct meta_topic *topic = img->topics[t];
		for (uint32_t pid = 0; pid < topic->partition_count; pid++) {
			const struct meta_partition *p = &topic->partitions[pid];
			if (p->leader != b->id) {
				continue;
			}
			int32_t isr[META_MAX_REPLICAS];
			uint32_t n = 0;
			for (uint32_t r = 0; r < p->replica_count; r++) {
				int32_t id = p->replicas[r];
				struct h_broker *hb = h_broker(c, id);
				bool in = meta_list_contains(p->isr, p->isr_count, id);
				bool catch_up = hb != NULL && hb->alive &&
						meta_image_broker_active(img, id);
				if (in || catch_up) {
					isr[n++] = id;
				}
			}
			bool recovering = p->leader_recovery_state == META_RECOVERING;
			if (!recovering && n == p->isr_count) {
				continue;
			}
			if (recovering) {
				/* First recover (ISR stays {leader}), expand later. */
				isr[0] = b->id;
				n = 1;
			}
			struct meta_alter_partition_item item = {(int32_t)pid, p->leader_epoch,
								 p->partition_epoch, isr, n,
								 META_RECOVERED};
			struct meta_alter_partition_topic at;
			memcpy(at.topic_id, topic->id, 16);
			at.partitions = &item;
			at.partition_count = 1;
			struct meta_alter_partition_request req = {b->id, b->epoch, &at, 1};
			struct meta_alter_partition_response resp;
			struct meta_batch *batch;
			KEEL_ASSERT(meta_controller_alter_partition(&c->ctl, c->now, &req, &resp,
								    &batch) == KEEL_OK);
			h_propose(c, batch, -1, 0, -1);
			/* The committed image may have changed: rescan next step. */
			return;
		}
	}
}

/* One step of every live broker, then a controller tick. */
static inline void h_step(struct h_cluster *c)
{
	for (uint32_t i = 0; i < c->broker_count; i++) {
		struct h_broker *b = &c->brokers[i];
		if (!b->alive || b->paused) {
			continue;
		}
		if (!b->registered) {
			if (!b->register_sent) {
				h_register(c, b);
			}
			continue;
		}
		h_heartbeat(c, b);
		if (b->alive && c->expand_isr) {
			h_leader_duties(c, b);
		}
	}
	h_tick(c);
}

static inline void h_run(struct h_cluster *c, int64_t ms, int64_t step_ms)
{
	int64_t end = c->now + ms;
	while (c->now < end) {
		c->now += step_ms;
		h_step(c);
	}
}

/* Kill -9: the process is gone; a restart is a new incarnation. */
static inline void h_kill(struct h_cluster *c, int32_t id)
{
	struct h_broker *b = h_broker(c, id);
	b->alive = false;
	b->registered = false;
	b->register_sent = false;
	b->shutting_down = false;
}

static inline void h_restart(struct h_cluster *c, int32_t id)
{
	struct h_broker *b = h_broker(c, id);
	b->alive = true;
	b->paused = false;
	b->registered = false;
	b->register_sent = false;
	b->shutting_down = false;
	b->was_told_stop = false;
	b->incarnation++;
}

/* Creates a topic through the controller; returns the result's error. */
static inline int16_t h_create_topic(struct h_cluster *c, const char *name, int32_t partitions,
				     int16_t rf, const struct meta_config_kv *configs,
				     uint32_t config_count)
{
	struct meta_create_topic t = {name, partitions, rf, configs, config_count, NULL, 0};
	struct meta_create_topics_request req = {&t, 1, false};
	struct meta_create_topics_response resp;
	struct meta_batch *batch;
	KEEL_ASSERT(meta_controller_create_topics(&c->ctl, c->now, &req, &resp, &batch) ==
		    KEEL_OK);
	KEEL_ASSERT(resp.topic_count == 1);
	int16_t err = resp.topics[0].error;
	h_propose(c, batch, -1, 0, -1);
	return err;
}

static inline const struct meta_partition *h_partition(const struct h_cluster *c,
							const char *topic, uint32_t pid)
{
	const struct meta_topic *t = meta_image_topic(&c->committed, topic);
	KEEL_ASSERT(t != NULL && pid < t->partition_count);
	return &t->partitions[pid];
}

/* Decision-relevant state of two images is equal (offsets and timestamps,
 * which differ between a working and a committed image, are ignored). */
static inline bool h_same_decisions(const struct meta_image *a, const struct meta_image *b)
{
	if (a->broker_count != b->broker_count || a->topic_count != b->topic_count ||
	    a->config_count != b->config_count || a->last_broker_epoch != b->last_broker_epoch) {
		return false;
	}
	for (uint32_t i = 0; i < a->broker_count; i++) {
		const struct meta_broker *x = a->brokers[i], *y = b->brokers[i];
		if (x->id != y->id || x->epoch != y->epoch || x->fenced != y->fenced ||
		    x->in_controlled_shutdown != y->in_controlled_shutdown) {
			return false;
		}
	}
	for (uint32_t i = 0; i < a->topic_count; i++) {
		const struct meta_topic *x = a->topics[i], *y = b->topics[i];
		if (strcmp(x->name, y->name) != 0 || memcmp(x->id, y->id, 16) != 0 ||
		    x->partition_count != y->partition_count) {
			return false;
		}
		for (uint32_t p = 0; p < x->partition_count; p++) {
			const struct meta_partition *u = &x->partitions[p], *v = &y->partitions[p];
			if (u->leader != v->leader || u->leader_epoch != v->leader_epoch ||
			    u->partition_epoch != v->partition_epoch ||
			    u->isr_count != v->isr_count || u->replica_count != v->replica_count ||
			    memcmp(u->isr, v->isr, u->isr_count * sizeof(int32_t)) != 0 ||
			    memcmp(u->replicas, v->replicas, u->replica_count * sizeof(int32_t)) != 0 ||
			    u->leader_recovery_state != v->leader_recovery_state) {
				return false;
			}
		}
	}
	return true;
}

#endif
