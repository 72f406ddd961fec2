/*
 * Unit test: the controller under random broker faults, with invariants
 * checked after every committed batch.
 *
 * Each seed runs a 5-broker cluster (3 racks) through random kills,
 * restarts, pauses (missed heartbeats), controlled shutdowns, topic
 * creation/deletion, unclean-election toggles, proposals left pending,
 * and controller failovers that keep or lose the pending batches. After
 * every batch applied to the committed image:
 *
 *  - the image invariants hold (meta_image_check: leader in ISR or -1, ISR
 *    within the replicas, replicas distinct, ...);
 *  - no fenced or shutting-down broker leads, and none sits in an ISR of
 *    more than one member (KRaft's last-ISR-member rule is the exception);
 *  - an ISR is never empty;
 *  - every replica is a registered broker;
 *  - per partition, leader epoch and partition epoch never go down; one
 *    (partition, leader epoch) never names two leaders; an unchanged
 *    partition epoch means an unchanged partition;
 *  - no record the controller proposed is ever ignored at apply (its
 *    working image never disagrees with the log).
 *
 * At the end the faults stop and the cluster must heal: every broker
 * unfenced, every partition led, every ISR full, the controller's working
 * image equal to the committed one.
 *
 * KEEL_META_SEED=N runs one seed; KEEL_META_SEEDS=N runs seeds 1..N
 * (default 100 seeds of 2000 steps; 25 under the sanitizers, which are
 * ~20x slower). A failure prints its seed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/hash.h"
#include "test_meta_harness.h"

struct seen_partition {
	uint8_t topic_id[16];
	int32_t partition_id;
	int32_t leader;
	int32_t leader_epoch;
	int32_t partition_epoch;
};

struct checker {
	struct keel_hmap seen; /* (topic id, partition) -> struct seen_partition */
	uint64_t seed;
	uint64_t checks;
	const char *failure;
};

struct seen_key {
	const uint8_t *topic_id;
	int32_t partition_id;
};

static uint64_t seen_hash(const uint8_t *id, int32_t pid)
{
	return keel_hash_bytes(id, 16, (uint64_t)(uint32_t)pid);
}

static bool seen_eq(const void *item, const void *key)
{
	const struct seen_partition *s = item;
	const struct seen_key *k = key;
	return s->partition_id == k->partition_id && memcmp(s->topic_id, k->topic_id, 16) == 0;
}

static void violation(struct checker *ck, const char *what)
{
	if (ck->failure == NULL) {
		ck->failure = what;
	}
}

static void check_partition(struct checker *ck, const struct meta_image *img,
			    const struct meta_topic *t, uint32_t pid, bool history)
{
	const struct meta_partition *p = &t->partitions[pid];
	if (p->isr_count == 0) {
		violation(ck, "empty ISR");
	}
	for (uint32_t r = 0; r < p->replica_count; r++) {
		if (meta_image_broker(img, p->replicas[r]) == NULL) {
			violation(ck, "replica is not a registered broker");
		}
	}
	if (p->leader != META_NO_LEADER && !meta_image_broker_active(img, p->leader)) {
		violation(ck, "a fenced or shutting-down broker leads");
	}
	if (p->isr_count > 1) {
		for (uint32_t i = 0; i < p->isr_count; i++) {
			if (!meta_image_broker_active(img, p->isr[i])) {
				violation(ck, "an ineligible broker in an ISR of more than one");
			}
		}
	}
	if (!history) {
		return;
	}
	struct seen_key key = {t->id, (int32_t)pid};
	uint64_t h = seen_hash(t->id, (int32_t)pid);
	struct seen_partition *s = keel_hmap_find(&ck->seen, h, seen_eq, &key);
	if (s == NULL) {
		s = calloc(1, sizeof(*s));
		memcpy(s->topic_id, t->id, 16);
		s->partition_id = (int32_t)pid;
		s->leader = p->leader;
		s->leader_epoch = p->leader_epoch;
		s->partition_epoch = p->partition_epoch;
		assert_int_equal(keel_hmap_insert(&ck->seen, h, s), KEEL_OK);
		return;
	}
	if (p->leader_epoch < s->leader_epoch) {
		violation(ck, "leader epoch went down");
	}
	if (p->partition_epoch < s->partition_epoch) {
		violation(ck, "partition epoch went down");
	}
	if (p->leader_epoch == s->leader_epoch && p->leader != s->leader) {
		violation(ck, "two leaders in one leader epoch");
	}
	if (p->partition_epoch == s->partition_epoch &&
	    (p->leader != s->leader || p->leader_epoch != s->leader_epoch)) {
		violation(ck, "partition changed without a partition epoch bump");
	}
	s->leader = p->leader;
	s->leader_epoch = p->leader_epoch;
	s->partition_epoch = p->partition_epoch;
}

/* history: img is the committed image (the log's state), whose epochs are
 * tracked; otherwise (the working image) only the state invariants apply. */
static void check_image(struct checker *ck, const struct meta_image *img, bool history)
{
	struct meta_errbuf eb;
	if (!meta_image_check(img, &eb)) {
		violation(ck, "meta_image_check failed");
	}
	for (uint32_t t = 0; t < img->topic_count; t++) {
		for (uint32_t p = 0; p < img->topics[t]->partition_count; p++) {
			check_partition(ck, img, img->topics[t], p, history);
		}
	}
	ck->checks++;
}

static void on_commit(struct h_cluster *c, const struct meta_batch *b, void *ctx)
{
	(void)b;
	struct checker *ck = ctx;
	check_image(ck, &c->committed, true);
	if (c->ignored_records != 0) {
		violation(ck, "a proposed record was ignored at apply");
	}
}

static const char *const topic_names[] = {"t0", "t1", "t2", "t3", "t4", "sensor-data"};

static struct h_broker *pick(struct h_cluster *c, bool alive)
{
	uint32_t start = (uint32_t)keel_rng_below(&c->sim_rng, c->broker_count);
	for (uint32_t i = 0; i < c->broker_count; i++) {
		struct h_broker *b = &c->brokers[(start + i) % c->broker_count];
		if (b->alive == alive) {
			return b;
		}
	}
	return NULL;
}

static void random_topic_action(struct h_cluster *c, uint64_t r)
{
	const char *name = topic_names[keel_rng_below(&c->sim_rng, KEEL_ARRAY_SIZE(topic_names))];
	if (r == 0) {
		struct meta_delete_topics_request req = {&name, 1};
		struct meta_delete_topics_response resp;
		struct meta_batch *batch;
		assert_int_equal(meta_controller_delete_topics(&c->ctl, c->now, &req, &resp, &batch),
				 KEEL_OK);
		h_propose(c, batch, -1, 0, -1);
		return;
	}
	static const struct meta_config_kv unclean[] = {{META_CONFIG_UNCLEAN_ELECTION, "true"}};
	bool dirty = keel_rng_chance(&c->sim_rng, 1, 3);
	int32_t partitions = (int32_t)keel_rng_between(&c->sim_rng, 1, 6);
	int16_t rf = (int16_t)keel_rng_between(&c->sim_rng, 1, 3);
	int16_t err = h_create_topic(c, name, partitions, rf, dirty ? unclean : NULL, dirty ? 1 : 0);
	assert_true(err == META_ERR_NONE || err == META_ERR_TOPIC_ALREADY_EXISTS ||
		    err == META_ERR_INVALID_REPLICATION_FACTOR);
}

static void toggle_cluster_unclean(struct h_cluster *c)
{
	bool on = meta_image_unclean_election(meta_controller_image(&c->ctl), "");
	struct meta_config_kv kv = {META_CONFIG_UNCLEAN_ELECTION, on ? NULL : "true"};
	struct meta_alter_config_resource res = {META_RESOURCE_BROKER, "", &kv, 1};
	struct meta_alter_configs_request req = {&res, 1, false};
	struct meta_alter_configs_response resp;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_alter_configs(&c->ctl, c->now, &req, &resp, &batch), KEEL_OK);
	assert_int_equal(resp.results[0].error, META_ERR_NONE);
	h_propose(c, batch, -1, 0, -1);
}

static void random_action(struct h_cluster *c)
{
	uint64_t r = keel_rng_below(&c->sim_rng, 100);
	struct h_broker *b;
	if (r < 3 && (b = pick(c, true)) != NULL) {
		h_kill(c, b->id);
	} else if (r < 8 && (b = pick(c, false)) != NULL) {
		h_restart(c, b->id);
	} else if (r < 10 && (b = pick(c, true)) != NULL) {
		b->paused = true;
	} else if (r < 14 && (b = pick(c, true)) != NULL) {
		b->paused = false;
	} else if (r < 15 && (b = pick(c, true)) != NULL && b->registered) {
		b->shutting_down = true;
	} else if (r < 18) {
		random_topic_action(c, r - 15);
	} else if (r < 19) {
		toggle_cluster_unclean(c);
	} else if (r < 20) {
		h_failover(c, (uint32_t)keel_rng_below(&c->sim_rng, c->pending_count + 1));
	} else if (r < 22) {
		c->auto_commit = !c->auto_commit;
		if (c->auto_commit) {
			h_commit_all(c);
		}
	} else if (r < 30 && c->pending_count > 0) {
		uint64_t n = keel_rng_between(&c->sim_rng, 1, c->pending_count);
		while (n-- > 0) {
			h_commit_one(c);
		}
	}
	if (c->pending_count > H_MAX_PENDING / 2) {
		h_commit_all(c); /* keep the queue bounded */
	}
}

static void check_healed(struct checker *ck, struct h_cluster *c)
{
	const struct meta_image *img = &c->committed;
	for (uint32_t i = 0; i < c->broker_count; i++) {
		const struct meta_broker *b = meta_image_broker(img, c->brokers[i].id);
		if (b == NULL || b->fenced || b->in_controlled_shutdown) {
			violation(ck, "a broker did not come back");
		}
	}
	for (uint32_t t = 0; t < img->topic_count; t++) {
		const struct meta_topic *topic = img->topics[t];
		for (uint32_t p = 0; p < topic->partition_count; p++) {
			const struct meta_partition *part = &topic->partitions[p];
			if (part->leader == META_NO_LEADER) {
				violation(ck, "a partition has no leader after healing");
			}
			if (part->isr_count != part->replica_count) {
				violation(ck, "an ISR is not full after healing");
			}
			if (part->leader_recovery_state != META_RECOVERED) {
				violation(ck, "a partition is still recovering after healing");
			}
		}
	}
	if (!h_same_decisions(img, meta_controller_image(&c->ctl))) {
		violation(ck, "working image differs from the committed one");
	}
}

static void free_seen(struct keel_hmap *map)
{
	size_t cursor = 0;
	void *item;
	while ((item = keel_hmap_next(map, &cursor)) != NULL) {
		free(item);
	}
	keel_hmap_close(map);
}

static uint64_t run_seed(uint64_t seed, uint32_t steps)
{
	struct meta_controller_config cfg;
	meta_controller_config_default(&cfg);
	cfg.session_timeout_ms = 3000;
	cfg.rebalance_interval_ms = 5000;
	struct h_cluster c;
	h_init(&c, seed, &cfg);
	struct checker ck = {.seed = seed};
	assert_int_equal(keel_hmap_init(&ck.seen, 64), KEEL_OK);
	c.on_commit = on_commit;
	c.ctx = &ck;
	const char *racks[5] = {"r1", "r2", "r1", "r2", "r3"};
	for (int32_t id = 1; id <= 5; id++) {
		h_add_broker(&c, id, racks[id - 1]);
	}
	h_run(&c, 1000, 250);
	for (uint32_t s = 0; s < steps && ck.failure == NULL; s++) {
		random_action(&c);
		c.now += 250;
		h_step(&c);
		check_image(&ck, meta_controller_image(&c.ctl), false);
	}
	/* Heal: no more faults, everything commits, brokers in a controlled
	 * shutdown finish it, then everyone comes back. */
	c.auto_commit = true;
	h_commit_all(&c);
	for (uint32_t i = 0; i < c.broker_count; i++) {
		c.brokers[i].paused = false;
	}
	h_run(&c, 2000, 250);
	for (uint32_t i = 0; i < c.broker_count; i++) {
		if (!c.brokers[i].alive) {
			h_restart(&c, c.brokers[i].id);
		}
	}
	h_run(&c, 15000, 250);
	if (ck.failure == NULL) {
		check_healed(&ck, &c);
	}
	if (ck.failure != NULL) {
		for (uint32_t i = 0; i < c.broker_count; i++) {
			const struct h_broker *hb = &c.brokers[i];
			const struct meta_broker *mb = meta_image_broker(&c.committed, hb->id);
			print_message("  broker %d: alive=%d paused=%d registered=%d sent=%d "
				      "shutdown=%d epoch=%lld | image: %s epoch=%lld fenced=%d cs=%d\n",
				      hb->id, hb->alive, hb->paused, hb->registered, hb->register_sent,
				      hb->shutting_down, (long long)hb->epoch, mb ? "yes" : "no",
				      mb ? (long long)mb->epoch : -1LL, mb ? mb->fenced : -1,
				      mb ? mb->in_controlled_shutdown : -1);
		}
		print_message("seed %llu: %s (KEEL_META_SEED=%llu replays it)\n",
			      (unsigned long long)seed, ck.failure, (unsigned long long)seed);
	}
	uint64_t checks = ck.checks;
	bool failed = ck.failure != NULL;
	free_seen(&ck.seen);
	h_close(&c);
	assert_false(failed);
	return checks;
}

static void test_random_faults_keep_invariants(void **state)
{
	(void)state;
	const char *one = getenv("KEEL_META_SEED");
	const char *many = getenv("KEEL_META_SEEDS");
	uint64_t checks = 0;
	if (one != NULL) {
		checks += run_seed(strtoull(one, NULL, 10), 2000);
	} else {
#ifdef KEEL_SANITIZE
		uint64_t n = many != NULL ? strtoull(many, NULL, 10) : 25;
#else
		uint64_t n = many != NULL ? strtoull(many, NULL, 10) : 100;
#endif
		for (uint64_t seed = 1; seed <= n; seed++) {
			checks += run_seed(seed, 2000);
		}
	}
	/* The checks really ran (thousands of committed batches). */
	assert_true(checks > 1000);
	print_message("random controller test: %llu invariant checks\n",
		      (unsigned long long)checks);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_faults_keep_invariants),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
