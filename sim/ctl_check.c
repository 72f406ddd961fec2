/*
 * ctl_check.c — the controller's invariants, checked while the run goes.
 *
 * On the first apply of each metadata batch anywhere. Every server applies
 * entries in index order and a server can first-apply index i only after
 * index i-1 was applied somewhere, so first applies come in log order: the
 * image of the first applier is the log's state. (The other servers are
 * held to the same image by the state machine hash of check.c: equal
 * images at equal applied indexes.) Then:
 *   - no record is ignored at apply: the controller's working image never
 *     disagrees with the log, so a new controller (built from the image
 *     after a Raft leader change) never re-makes a committed decision or
 *     acts on a stale one — a decision made twice would be an ignored
 *     record (a second registration at an old epoch, a PartitionChange
 *     whose epochs do not chain);
 *   - meta_image_check (sorted, leader in ISR or -1, ISR within the
 *     replicas, epochs, ...);
 *   - per partition: the ISR is never empty; no fenced or shutting-down
 *     broker leads; such a broker sits in an ISR only as its last member
 *     (KRaft's rule); every replica is a registered broker;
 *   - per partition, over the whole log: leader epochs and partition
 *     epochs never go down; one (partition, leader epoch) never names two
 *     leaders; an unchanged partition epoch means an unchanged leader;
 *   - every broker epoch is handed out once, to one broker.
 * On every role change a broker's follower reports: no two brokers ever
 * lead one partition in one leader epoch (split brain).
 * On every reply the controller sends (after the batches before it are
 * applied on its server): a registration's epoch is in that server's log
 * for that broker; should_shut_down comes only when the broker leads
 * nothing and is fenced or shutting down in that server's image; an
 * accepted ISR change is in the image.
 * On every controller tick with nothing in flight: the working image makes
 * the same decisions as the committed image.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "meta/proto.h"
#include "sim/ctl_int.h"

/* ---- keyed history ---- */

struct part_key {
	const uint8_t *topic_id;
	int32_t partition;
	int32_t leader_epoch;
};

static uint64_t part_hash(const uint8_t *id, int32_t partition, int32_t leader_epoch)
{
	return keel_hash_bytes(id, META_UUID_SIZE,
			       ((uint64_t)(uint32_t)partition << 32) ^ (uint32_t)leader_epoch);
}

static bool hist_eq(const void *item, const void *key)
{
	const struct sim_part_hist *h = item;
	const struct part_key *k = key;
	return h->partition == k->partition && memcmp(h->topic_id, k->topic_id, META_UUID_SIZE) == 0;
}

static bool claim_eq(const void *item, const void *key)
{
	const struct sim_claim *c = item;
	const struct part_key *k = key;
	return c->partition == k->partition && c->leader_epoch == k->leader_epoch &&
	       memcmp(c->topic_id, k->topic_id, META_UUID_SIZE) == 0;
}

void sim_ctl_check_init(struct sim_ctl_world *w)
{
	KEEL_ASSERT(keel_hmap_init(&w->hist, 64) == KEEL_OK);
	KEEL_ASSERT(keel_hmap_init(&w->claims, 256) == KEEL_OK);
	w->cap_epoch_owner = 256;
	w->epoch_owner = calloc(w->cap_epoch_owner, sizeof(*w->epoch_owner));
	KEEL_ASSERT(w->epoch_owner != NULL);
}

static void free_items(struct keel_hmap *map)
{
	size_t cursor = 0;
	void *item;
	while ((item = keel_hmap_next(map, &cursor)) != NULL) {
		free(item);
	}
	keel_hmap_close(map);
}

void sim_ctl_check_free(struct sim_ctl_world *w)
{
	free_items(&w->hist);
	free_items(&w->claims);
	free(w->epoch_owner);
}

static void topic_label(char *out, size_t size, const char *topic, int32_t partition)
{
	snprintf(out, size, "%s-%d", topic != NULL ? topic : "?", partition);
}

/* ---- first apply ---- */

static void check_partition_state(struct sim *s, const struct meta_image *img,
				  const struct meta_topic *t, uint32_t pid)
{
	const struct meta_partition *p = &t->partitions[pid];
	char label[64];
	topic_label(label, sizeof(label), t->name, (int32_t)pid);
	if (p->isr_count == 0) {
		sim_fail(s, "controller: %s has an empty ISR", label);
		return;
	}
	if (p->leader != META_NO_LEADER && !meta_image_broker_active(img, p->leader)) {
		sim_fail(s, "controller: fenced or shutting-down broker %d leads %s", p->leader, label);
		return;
	}
	for (uint32_t i = 0; p->isr_count > 1 && i < p->isr_count; i++) {
		if (!meta_image_broker_active(img, p->isr[i])) {
			sim_fail(s, "controller: ineligible broker %d in the ISR of %s (%u members)",
				 p->isr[i], label, p->isr_count);
			return;
		}
	}
	for (uint32_t i = 0; i < p->replica_count; i++) {
		if (meta_image_broker(img, p->replicas[i]) == NULL) {
			sim_fail(s, "controller: replica %d of %s is not a registered broker",
				 p->replicas[i], label);
			return;
		}
	}
}

static void check_partition_history(struct sim *s, const struct meta_topic *t, uint32_t pid)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	const struct meta_partition *p = &t->partitions[pid];
	char label[64];
	topic_label(label, sizeof(label), t->name, (int32_t)pid);
	struct part_key key = {t->id, (int32_t)pid, 0};
	uint64_t h = part_hash(t->id, (int32_t)pid, 0);
	struct sim_part_hist *old = keel_hmap_find(&w->hist, h, hist_eq, &key);
	if (old == NULL) {
		old = calloc(1, sizeof(*old));
		KEEL_ASSERT(old != NULL);
		memcpy(old->topic_id, t->id, META_UUID_SIZE);
		old->partition = (int32_t)pid;
		KEEL_ASSERT(keel_hmap_insert(&w->hist, h, old) == KEEL_OK);
	} else if (p->leader_epoch < old->leader_epoch) {
		sim_fail(s, "controller: the leader epoch of %s went down (%d -> %d)", label,
			 old->leader_epoch, p->leader_epoch);
		return;
	} else if (p->partition_epoch < old->partition_epoch) {
		sim_fail(s, "controller: the partition epoch of %s went down (%d -> %d)", label,
			 old->partition_epoch, p->partition_epoch);
		return;
	} else if (p->leader_epoch == old->leader_epoch && p->leader != old->leader) {
		sim_fail(s, "controller: %s has leaders %d and %d in leader epoch %d", label,
			 old->leader, p->leader, p->leader_epoch);
		return;
	} else if (p->partition_epoch == old->partition_epoch && p->leader_epoch != old->leader_epoch) {
		sim_fail(s, "controller: %s changed leadership without a partition epoch bump",
			 label);
		return;
	}
	old->leader = p->leader;
	old->leader_epoch = p->leader_epoch;
	old->partition_epoch = p->partition_epoch;
}

static void check_epochs(struct sim *s, const struct meta_image *img)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	for (uint32_t i = 0; i < img->broker_count; i++) {
		const struct meta_broker *b = img->brokers[i];
		KEEL_ASSERT(b->epoch >= 0);
		while ((size_t)b->epoch >= w->cap_epoch_owner) {
			size_t cap = w->cap_epoch_owner * 2;
			w->epoch_owner = realloc(w->epoch_owner, cap * sizeof(*w->epoch_owner));
			KEEL_ASSERT(w->epoch_owner != NULL);
			memset(w->epoch_owner + w->cap_epoch_owner, 0,
			       (cap - w->cap_epoch_owner) * sizeof(*w->epoch_owner));
			w->cap_epoch_owner = cap;
		}
		int32_t *owner = &w->epoch_owner[b->epoch];
		if (*owner != 0 && *owner != b->id + 1) {
			sim_fail(s, "controller: broker epoch %lld was handed to brokers %d and %d",
				 (long long)b->epoch, *owner - 1, b->id);
			return;
		}
		*owner = b->id + 1; /* stored +1: broker ids start at 0 in Kafka */
	}
}

void sim_ctl_check_first_apply(struct sim *s, struct sim_node *n, uint64_t index,
			       const struct meta_apply_result *res)
{
	const struct meta_image *img = n->sm.image;
	if (res->batch_ignored || res->ignored > 0) {
		sim_fail(s, "controller: the log ignored %s%u records of batch %llu (controller "
			    "epoch %d): a controller decided on an image the log does not have",
			 res->batch_ignored ? "the whole batch: " : "", res->ignored,
			 (unsigned long long)index, img->controller_epoch);
		return;
	}
	struct meta_errbuf eb;
	if (!meta_image_check(img, &eb)) {
		sim_fail(s, "controller: image invariant broken after batch %llu: %s",
			 (unsigned long long)index, eb.msg);
		return;
	}
	for (uint32_t t = 0; t < img->topic_count && !s->failed; t++) {
		for (uint32_t p = 0; p < img->topics[t]->partition_count && !s->failed; p++) {
			check_partition_state(s, img, img->topics[t], p);
			check_partition_history(s, img->topics[t], p);
		}
	}
	if (!s->failed) {
		check_epochs(s, img);
	}
}

/* ---- brokers' roles ---- */

void sim_ctl_check_role(struct sim *s, int32_t broker, const struct meta_role_change *c)
{
	if (c->new_role != META_ROLE_LEADER) {
		return;
	}
	struct sim_ctl_world *w = sim_ctlw(s);
	struct part_key key = {c->topic_id, c->partition_id, c->leader_epoch};
	uint64_t h = part_hash(c->topic_id, c->partition_id, c->leader_epoch);
	struct sim_claim *old = keel_hmap_find(&w->claims, h, claim_eq, &key);
	if (old == NULL) {
		old = calloc(1, sizeof(*old));
		KEEL_ASSERT(old != NULL);
		memcpy(old->topic_id, c->topic_id, META_UUID_SIZE);
		old->partition = c->partition_id;
		old->leader_epoch = c->leader_epoch;
		old->broker = broker;
		KEEL_ASSERT(keel_hmap_insert(&w->claims, h, old) == KEEL_OK);
		return;
	}
	if (old->broker != broker) {
		char label[64];
		topic_label(label, sizeof(label), c->topic, c->partition_id);
		sim_fail(s, "split brain: brokers %d and %d both lead %s in leader epoch %d",
			 old->broker, broker, label, c->leader_epoch);
	}
}

/* ---- replies ---- */

static const struct meta_partition *find_partition(const struct meta_image *img,
						   const uint8_t topic_id[META_UUID_SIZE],
						   int32_t partition)
{
	return meta_image_partition(img, topic_id, partition);
}

static bool leads_anything(const struct meta_image *img, int32_t broker)
{
	for (uint32_t t = 0; t < img->topic_count; t++) {
		const struct meta_topic *topic = img->topics[t];
		for (uint32_t p = 0; p < topic->partition_count; p++) {
			if (topic->partitions[p].leader == broker) {
				return true;
			}
		}
	}
	return false;
}

void sim_ctl_check_reply(struct sim *s, struct sim_node *n, const struct sim_ctl_msg *m)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	const struct meta_image *img = n->sm.image;
	if (m->error != META_ERR_NONE) {
		return;
	}
	if (m->api == SIM_API_REGISTER) {
		int64_t e = m->assigned_epoch;
		if (e < 0 || (size_t)e >= w->cap_epoch_owner || w->epoch_owner[e] != m->broker + 1) {
			sim_fail(s, "controller: broker %d was told epoch %lld, which the log on node "
				    "%llu does not give it",
				 m->broker, (long long)e, (unsigned long long)n->id);
		}
		const struct meta_broker *b = meta_image_broker(img, m->broker);
		if (!s->failed && (b == NULL || b->epoch < e)) {
			sim_fail(s, "controller: broker %d was told epoch %lld before node %llu "
				    "applied it",
				 m->broker, (long long)e, (unsigned long long)n->id);
		}
	} else if (m->api == SIM_API_HEARTBEAT && m->should_shut_down) {
		const struct meta_broker *b = meta_image_broker(img, m->broker);
		if (b != NULL && b->epoch == m->broker_epoch &&
		    (leads_anything(img, m->broker) || meta_broker_active(b))) {
			sim_fail(s, "controller: broker %d may shut down, but on node %llu it still "
				    "%s",
				 m->broker, (unsigned long long)n->id,
				 meta_broker_active(b) ? "is active" : "leads a partition");
		}
	} else if (m->api == SIM_API_ALTER_PARTITION) {
		const struct meta_partition *p = find_partition(img, m->topic_id, m->partition);
		if (p != NULL && p->partition_epoch < m->result_partition_epoch) {
			sim_fail(s, "controller: an ISR change of partition %d (epoch %d) was "
				    "acknowledged before node %llu applied it (epoch %d)",
				 m->partition, m->result_partition_epoch, (unsigned long long)n->id,
				 p->partition_epoch);
		}
	}
}

/* ---- the working image ---- */

static bool same_partition(const struct meta_partition *u, const struct meta_partition *v)
{
	return u->leader == v->leader && u->leader_epoch == v->leader_epoch &&
	       u->partition_epoch == v->partition_epoch && u->isr_count == v->isr_count &&
	       u->replica_count == v->replica_count &&
	       memcmp(u->isr, v->isr, u->isr_count * sizeof(int32_t)) == 0 &&
	       memcmp(u->replicas, v->replicas, u->replica_count * sizeof(int32_t)) == 0 &&
	       u->leader_recovery_state == v->leader_recovery_state;
}

/* Decision-relevant state (offsets and timestamps differ between a working
 * and a committed image). */
static const char *decisions_differ(const struct meta_image *a, const struct meta_image *b)
{
	if (a->broker_count != b->broker_count || a->last_broker_epoch != b->last_broker_epoch) {
		return "brokers";
	}
	if (a->topic_count != b->topic_count || a->config_count != b->config_count) {
		return "topics or configs";
	}
	for (uint32_t i = 0; i < a->broker_count; i++) {
		const struct meta_broker *x = a->brokers[i], *y = b->brokers[i];
		if (x->id != y->id || x->epoch != y->epoch || x->fenced != y->fenced ||
		    x->in_controlled_shutdown != y->in_controlled_shutdown) {
			return "a broker's state";
		}
	}
	for (uint32_t i = 0; i < a->topic_count; i++) {
		const struct meta_topic *x = a->topics[i], *y = b->topics[i];
		if (strcmp(x->name, y->name) != 0 || memcmp(x->id, y->id, META_UUID_SIZE) != 0 ||
		    x->partition_count != y->partition_count) {
			return "a topic";
		}
		for (uint32_t p = 0; p < x->partition_count; p++) {
			if (!same_partition(&x->partitions[p], &y->partitions[p])) {
				return "a partition";
			}
		}
	}
	return NULL;
}

void sim_ctl_check_working(struct sim *s, struct sim_node *n)
{
	const struct meta_controller *ctl;
	uint64_t last_proposed = 0;
	if (!sim_node_controller(n, &ctl, &last_proposed) || last_proposed > n->sm.applied) {
		return;
	}
	const char *what = decisions_differ(meta_controller_image(ctl), n->sm.image);
	if (what != NULL) {
		sim_fail(s, "controller on node %llu: with nothing in flight its working image "
			    "differs from the committed one in %s",
			 (unsigned long long)n->id, what);
	}
}

/* ---- settling after heal ---- */

bool sim_ctl_image_settled(const struct sim_ctl_world *w, const struct meta_image *img, char *why,
			   size_t why_size)
{
	for (uint32_t i = 0; i < w->n_brokers; i++) {
		const struct sim_broker *sb = &w->brokers[i];
		const struct meta_broker *b = meta_image_broker(img, sb->id);
		if (b == NULL || b->epoch != sb->epoch || !meta_broker_active(b)) {
			snprintf(why, why_size, "broker %d is not active at epoch %lld", sb->id,
				 (long long)sb->epoch);
			return false;
		}
	}
	for (uint32_t t = 0; t < img->topic_count; t++) {
		const struct meta_topic *topic = img->topics[t];
		for (uint32_t p = 0; p < topic->partition_count; p++) {
			const struct meta_partition *part = &topic->partitions[p];
			if (part->leader == META_NO_LEADER || part->isr_count != part->replica_count ||
			    part->leader_recovery_state != META_RECOVERED) {
				snprintf(why, why_size,
					 "%s-%u: leader %d, ISR of %u of %u replicas%s", topic->name,
					 p, part->leader, part->isr_count, part->replica_count,
					 part->leader_recovery_state != META_RECOVERED ? ", recovering"
										    : "");
				return false;
			}
		}
	}
	return true;
}
