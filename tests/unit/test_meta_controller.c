/* Unit tests: controller scenarios — registration and unfencing, topic
 * creation and placement, fencing on missed heartbeats, the last-ISR-member
 * rule, unclean election, AlterPartition validation, controlled shutdown,
 * preferred-leader rebalance, controller failover. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/sort.h"
#include "meta/controller_internal.h"
#include "meta/election.h"
#include "meta/fmt.h"
#include "meta/format.h"
#include "meta/stats.h"
#include "test_meta_harness.h"

/* 3 brokers in racks a, b, c, registered and unfenced; then a topic. */
static void start3(struct h_cluster *c, const struct meta_controller_config *cfg)
{
	h_init(c, 42, cfg);
	h_add_broker(c, 1, "a");
	h_add_broker(c, 2, "b");
	h_add_broker(c, 3, "c");
	h_run(c, 1000, 500);
	for (int32_t id = 1; id <= 3; id++) {
		const struct meta_broker *b = meta_image_broker(&c->committed, id);
		assert_non_null(b);
		assert_false(b->fenced);
	}
}

static bool leads(const struct h_cluster *c, int32_t id)
{
	const struct meta_image *img = &c->committed;
	for (uint32_t t = 0; t < img->topic_count; t++) {
		for (uint32_t p = 0; p < img->topics[t]->partition_count; p++) {
			if (img->topics[t]->partitions[p].leader == id) {
				return true;
			}
		}
	}
	return false;
}

static bool in_any_isr(const struct h_cluster *c, int32_t id)
{
	const struct meta_image *img = &c->committed;
	for (uint32_t t = 0; t < img->topic_count; t++) {
		for (uint32_t p = 0; p < img->topics[t]->partition_count; p++) {
			const struct meta_partition *part = &img->topics[t]->partitions[p];
			if (meta_list_contains(part->isr, part->isr_count, id)) {
				return true;
			}
		}
	}
	return false;
}

static void test_three_brokers_and_a_topic(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	assert_int_equal(h_create_topic(&c, "sensor-data", 6, 2, NULL, 0), META_ERR_NONE);
	const struct meta_topic *t = meta_image_topic(&c.committed, "sensor-data");
	assert_non_null(t);
	assert_int_equal(t->partition_count, 6);
	int led[4] = {0};
	for (uint32_t p = 0; p < 6; p++) {
		const struct meta_partition *part = &t->partitions[p];
		assert_int_equal(part->replica_count, 2);
		assert_int_not_equal(part->replicas[0], part->replicas[1]);
		assert_int_equal(part->leader, part->replicas[0]);
		assert_int_equal(part->isr_count, 2); /* full ISR */
		assert_memory_equal(part->isr, part->replicas, 2 * sizeof(int32_t));
		assert_int_equal(part->leader_epoch, 0);
		led[part->leader]++;
	}
	/* Leaders spread evenly. */
	assert_int_equal(led[1], 2);
	assert_int_equal(led[2], 2);
	assert_int_equal(led[3], 2);
	/* The working image and the committed one agree once all is applied. */
	assert_true(h_same_decisions(&c.committed, meta_controller_image(&c.ctl)));
	assert_true(meta_image_check(&c.committed, NULL));
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

static void test_unfence_waits_for_catch_up(void **state)
{
	(void)state;
	struct h_cluster c;
	h_init(&c, 1, NULL);
	struct h_broker *b = h_add_broker(&c, 7, NULL);
	struct meta_broker_registration_response rr = h_register(&c, b);
	assert_int_equal(rr.error, META_ERR_NONE);
	assert_true(b->registered);
	const struct meta_broker *mb = meta_image_broker(&c.committed, 7);
	assert_true(mb->fenced);
	/* A heartbeat from an offset before the registration: not caught up. */
	struct meta_broker_heartbeat_request hb = {7, b->epoch, mb->registered_offset - 1, false,
						   false};
	struct meta_broker_heartbeat_response resp;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_heartbeat(&c.ctl, c.now, &hb, &resp, &batch), KEEL_OK);
	assert_null(batch);
	assert_false(resp.is_caught_up);
	assert_true(resp.is_fenced);
	/* want_fence keeps it fenced even when caught up. */
	hb.current_metadata_offset = c.committed.offset;
	hb.want_fence = true;
	assert_int_equal(meta_controller_heartbeat(&c.ctl, c.now, &hb, &resp, &batch), KEEL_OK);
	assert_null(batch);
	assert_true(resp.is_caught_up);
	assert_true(resp.is_fenced);
	/* Caught up: unfenced (the reply would go out after the batch applies). */
	hb.want_fence = false;
	assert_int_equal(meta_controller_heartbeat(&c.ctl, c.now, &hb, &resp, &batch), KEEL_OK);
	assert_non_null(batch);
	assert_false(resp.is_fenced);
	assert_int_equal(batch->records[0].type, META_REC_UNFENCE_BROKER);
	h_propose(&c, batch, -1, 0, -1);
	assert_false(meta_image_broker(&c.committed, 7)->fenced);
	h_close(&c);
}

static void test_missed_heartbeats_fence_and_offline(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	assert_int_equal(h_create_topic(&c, "sensor-data", 6, 2, NULL, 0), META_ERR_NONE);
	const struct meta_topic *t = meta_image_topic(&c.committed, "sensor-data");
	int32_t leader_epoch[6], partition_epoch[6], leader[6];
	for (uint32_t p = 0; p < 6; p++) {
		leader_epoch[p] = t->partitions[p].leader_epoch;
		partition_epoch[p] = t->partitions[p].partition_epoch;
		leader[p] = t->partitions[p].leader;
	}
	/* Broker 2 stops heartbeating. Not fenced before the 9 s timeout... */
	h_broker(&c, 2)->paused = true;
	h_run(&c, 8500, 500);
	assert_false(meta_image_broker(&c.committed, 2)->fenced);
	assert_true(leads(&c, 2));
	/* ...fenced right after it. */
	h_run(&c, 1000, 500);
	assert_true(meta_image_broker(&c.committed, 2)->fenced);
	assert_false(leads(&c, 2));
	assert_false(in_any_isr(&c, 2));
	t = meta_image_topic(&c.committed, "sensor-data");
	for (uint32_t p = 0; p < 6; p++) {
		const struct meta_partition *part = &t->partitions[p];
		if (leader[p] == 2) {
			assert_int_equal(part->leader_epoch, leader_epoch[p] + 1);
			assert_int_not_equal(part->leader, META_NO_LEADER);
		} else {
			assert_int_equal(part->leader_epoch, leader_epoch[p]);
		}
		if (meta_list_contains(part->replicas, 2, 2)) {
			assert_true(part->partition_epoch > partition_epoch[p]);
		}
	}

	/* Broker 3 dies too: partitions on {2,3} lose their last eligible ISR
	 * member. KRaft keeps it in the ISR (never empty) and the partition goes
	 * offline. */
	h_kill(&c, 3);
	h_run(&c, 9500, 500);
	assert_true(meta_image_broker(&c.committed, 3)->fenced);
	uint32_t offline = 0;
	for (uint32_t p = 0; p < 6; p++) {
		const struct meta_partition *part = &t->partitions[p];
		bool has1 = meta_list_contains(part->replicas, 2, 1);
		if (!has1) {
			offline++;
			assert_int_equal(part->leader, META_NO_LEADER);
			assert_int_equal(part->isr_count, 1);
			assert_int_equal(part->isr[0], 3);
		} else {
			assert_int_equal(part->leader, 1);
			assert_int_equal(part->isr_count, 1);
			assert_int_equal(part->isr[0], 1);
		}
	}
	assert_true(offline > 0);

	/* Broker 3 comes back (new incarnation, new epoch): it holds the data, so
	 * the offline partitions elect it. */
	int64_t old_epoch = meta_image_broker(&c.committed, 3)->epoch;
	h_restart(&c, 3);
	h_run(&c, 1500, 500);
	assert_true(meta_image_broker(&c.committed, 3)->epoch > old_epoch);
	assert_false(meta_image_broker(&c.committed, 3)->fenced);
	for (uint32_t p = 0; p < 6; p++) {
		assert_int_not_equal(t->partitions[p].leader, META_NO_LEADER);
	}
	/* Broker 2 resumes: same registration, unfenced, back in the ISRs. */
	h_broker(&c, 2)->paused = false;
	h_run(&c, 1500, 500);
	assert_false(meta_image_broker(&c.committed, 2)->fenced);
	for (uint32_t p = 0; p < 6; p++) {
		assert_int_equal(t->partitions[p].isr_count, 2);
	}
	assert_true(meta_image_check(&c.committed, NULL));
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

/* The partition of `topic` that broker `id` leads (exactly one here). */
static uint32_t led_by(const struct h_cluster *c, const char *topic, int32_t id)
{
	const struct meta_topic *t = meta_image_topic(&c->committed, topic);
	uint32_t found = UINT32_MAX;
	for (uint32_t p = 0; p < t->partition_count; p++) {
		if (t->partitions[p].leader == id) {
			assert_int_equal(found, UINT32_MAX);
			found = p;
		}
	}
	assert_int_not_equal(found, UINT32_MAX);
	return found;
}

/* Shrinks a partition's ISR to {leader} through AlterPartition. */
static void shrink_to_leader(struct h_cluster *c, const char *topic, uint32_t pid)
{
	const struct meta_topic *t = meta_image_topic(&c->committed, topic);
	const struct meta_partition *p = &t->partitions[pid];
	int32_t isr[1] = {p->leader};
	struct meta_alter_partition_item item = {(int32_t)pid, p->leader_epoch, p->partition_epoch,
						 isr, 1, META_RECOVERED};
	struct meta_alter_partition_topic at = {.partitions = &item, .partition_count = 1};
	memcpy(at.topic_id, t->id, 16);
	struct meta_alter_partition_request req = {p->leader, h_broker(c, p->leader)->epoch, &at, 1};
	struct meta_alter_partition_response resp;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_alter_partition(&c->ctl, c->now, &req, &resp, &batch),
			 KEEL_OK);
	assert_int_equal(resp.topics[0].partitions[0].error, META_ERR_NONE);
	h_propose(c, batch, -1, 0, -1);
	assert_int_equal(p->isr_count, 1);
}

static void test_unclean_election(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	c.expand_isr = false;
	static const struct meta_config_kv unclean[] = {{META_CONFIG_UNCLEAN_ELECTION, "true"}};
	/* 3 partitions over 3 brokers: broker 1 leads exactly one of each. */
	assert_int_equal(h_create_topic(&c, "clean", 3, 2, NULL, 0), META_ERR_NONE);
	assert_int_equal(h_create_topic(&c, "dirty", 3, 2, unclean, 1), META_ERR_NONE);
	uint32_t cp = led_by(&c, "clean", 1);
	uint32_t dp = led_by(&c, "dirty", 1);
	shrink_to_leader(&c, "clean", cp);
	shrink_to_leader(&c, "dirty", dp);
	const struct meta_partition *pc = h_partition(&c, "clean", cp);
	const struct meta_partition *pd = h_partition(&c, "dirty", dp);
	int32_t clean_other = pc->replicas[pc->replicas[0] == 1 ? 1 : 0];
	int32_t dirty_other = pd->replicas[pd->replicas[0] == 1 ? 1 : 0];
	int32_t dirty_epoch = pd->leader_epoch;
	int32_t clean_epoch = pc->leader_epoch;

	h_kill(&c, 1);
	h_run(&c, 9500, 500);
	assert_true(meta_image_broker(&c.committed, 1)->fenced);
	/* Clean: offline, the dead leader stays the last ISR member. */
	assert_int_equal(pc->leader, META_NO_LEADER);
	assert_int_equal(pc->leader_epoch, clean_epoch + 1);
	assert_int_equal(pc->isr_count, 1);
	assert_int_equal(pc->isr[0], 1);
	assert_int_equal(pc->leader_recovery_state, META_RECOVERED);
	/* Unclean allowed: the live out-of-sync replica leads, RECOVERING. */
	assert_int_equal(pd->leader, dirty_other);
	assert_int_equal(pd->isr_count, 1);
	assert_int_equal(pd->isr[0], dirty_other);
	assert_int_equal(pd->leader_recovery_state, META_RECOVERING);
	assert_int_equal(pd->leader_epoch, dirty_epoch + 1);
	/* The new leader recovers and says so. */
	c.expand_isr = true;
	h_run(&c, 1000, 500);
	assert_int_equal(pd->leader_recovery_state, META_RECOVERED);

	/* Turning unclean election on for "clean" elects its live replica. */
	struct meta_config_kv on = {META_CONFIG_UNCLEAN_ELECTION, "true"};
	struct meta_alter_config_resource res = {META_RESOURCE_TOPIC, "clean", &on, 1};
	struct meta_alter_configs_request req = {&res, 1, false};
	struct meta_alter_configs_response resp;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_alter_configs(&c.ctl, c.now, &req, &resp, &batch), KEEL_OK);
	assert_int_equal(resp.results[0].error, META_ERR_NONE);
	h_propose(&c, batch, -1, 0, -1);
	assert_int_equal(pc->leader, clean_other);
	assert_int_equal(pc->leader_recovery_state, META_RECOVERING);
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

static int16_t alter(struct h_cluster *c, int32_t broker, int64_t broker_epoch,
		     const uint8_t *topic_id, int32_t leader_epoch, int32_t partition_epoch,
		     const int32_t *isr, uint32_t n, uint8_t recovery, int16_t *top_error)
{
	struct meta_alter_partition_item item = {0, leader_epoch, partition_epoch, isr, n, recovery};
	struct meta_alter_partition_topic at = {.partitions = &item, .partition_count = 1};
	memcpy(at.topic_id, topic_id, 16);
	struct meta_alter_partition_request req = {broker, broker_epoch, &at, 1};
	struct meta_alter_partition_response resp;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_alter_partition(&c->ctl, c->now, &req, &resp, &batch),
			 KEEL_OK);
	*top_error = resp.error;
	if (resp.error != META_ERR_NONE) {
		assert_null(batch);
		return resp.error;
	}
	int16_t err = resp.topics[0].partitions[0].error;
	if (err != META_ERR_NONE) {
		assert_null(batch);
	}
	h_propose(c, batch, -1, 0, -1);
	return err;
}

static void test_alter_partition_rules(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	c.expand_isr = false;
	assert_int_equal(h_create_topic(&c, "t", 1, 3, NULL, 0), META_ERR_NONE);
	const struct meta_topic *t = meta_image_topic(&c.committed, "t");
	const struct meta_partition *p = &t->partitions[0];
	int32_t L = p->leader;
	int64_t LE = h_broker(&c, L)->epoch;
	int32_t a = p->replicas[1], b = p->replicas[2];
	int16_t top;
	int32_t shrink[2] = {L, a};
	int32_t le = p->leader_epoch, pe = p->partition_epoch;

	/* Stale broker epoch. */
	assert_int_equal(alter(&c, L, LE - 1, t->id, le, pe, shrink, 2, 0, &top),
			 META_ERR_STALE_BROKER_EPOCH);
	/* Old leader epoch; not the leader; old partition epoch. */
	assert_int_equal(alter(&c, L, LE, t->id, le - 1, pe, shrink, 2, 0, &top),
			 META_ERR_FENCED_LEADER_EPOCH);
	assert_int_equal(alter(&c, a, h_broker(&c, a)->epoch, t->id, le, pe, shrink, 2, 0, &top),
			 META_ERR_INVALID_REQUEST);
	assert_int_equal(alter(&c, L, LE, t->id, le, pe + 1, shrink, 2, 0, &top),
			 META_ERR_INVALID_UPDATE_VERSION);
	/* New ISR without the leader; with a non-replica; unknown topic. */
	int32_t no_leader[1] = {a};
	assert_int_equal(alter(&c, L, LE, t->id, le, pe, no_leader, 1, 0, &top),
			 META_ERR_INVALID_REQUEST);
	int32_t stranger[2] = {L, 9};
	assert_int_equal(alter(&c, L, LE, t->id, le, pe, stranger, 2, 0, &top),
			 META_ERR_INVALID_REQUEST);
	uint8_t nope[16] = {1};
	assert_int_equal(alter(&c, L, LE, nope, le, pe, shrink, 2, 0, &top),
			 META_ERR_UNKNOWN_TOPIC_ID);
	/* RECOVERING while RECOVERED is refused. */
	assert_int_equal(alter(&c, L, LE, t->id, le, pe, shrink, 1, META_RECOVERING, &top),
			 META_ERR_INVALID_REQUEST);
	assert_int_equal(p->partition_epoch, pe); /* nothing applied */

	/* A good shrink, then the same request again is stale. */
	assert_int_equal(alter(&c, L, LE, t->id, le, pe, shrink, 2, 0, &top), META_ERR_NONE);
	assert_int_equal(p->isr_count, 2);
	assert_int_equal(p->partition_epoch, pe + 1);
	assert_int_equal(p->leader_epoch, le); /* ISR changes keep the leader epoch */
	assert_int_equal(alter(&c, L, LE, t->id, le, pe, shrink, 2, 0, &top),
			 META_ERR_INVALID_UPDATE_VERSION);

	/* Expanding with a fenced broker is INELIGIBLE_REPLICA. */
	h_broker(&c, b)->paused = true;
	h_run(&c, 9500, 500);
	assert_true(meta_image_broker(&c.committed, b)->fenced);
	int32_t expand[3] = {L, a, b};
	int32_t pe2 = p->partition_epoch;
	assert_int_equal(alter(&c, L, LE, t->id, p->leader_epoch, pe2, expand, 3, 0, &top),
			 META_ERR_INELIGIBLE_REPLICA);
	/* Back and caught up: the expand goes through. */
	h_broker(&c, b)->paused = false;
	h_run(&c, 1000, 500);
	assert_false(meta_image_broker(&c.committed, b)->fenced);
	assert_int_equal(alter(&c, L, LE, t->id, p->leader_epoch, p->partition_epoch, expand, 3, 0,
			       &top),
			 META_ERR_NONE);
	assert_int_equal(p->isr_count, 3);
	/* An unchanged ISR is accepted without a record. */
	int32_t same_pe = p->partition_epoch;
	assert_int_equal(alter(&c, L, LE, t->id, p->leader_epoch, p->partition_epoch, expand, 3, 0,
			       &top),
			 META_ERR_NONE);
	assert_int_equal(p->partition_epoch, same_pe);
	h_close(&c);
}

static void test_controlled_shutdown_moves_leaders_first(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	assert_int_equal(h_create_topic(&c, "sensor-data", 6, 2, NULL, 0), META_ERR_NONE);
	assert_int_equal(h_create_topic(&c, "solo", 1, 1, NULL, 0), META_ERR_NONE);
	int32_t solo = h_partition(&c, "solo", 0)->leader;
	assert_true(leads(&c, 1));

	c.auto_commit = false;
	struct h_broker *b = h_broker(&c, solo);
	b->shutting_down = true;
	struct meta_broker_heartbeat_response resp = h_heartbeat(&c, b);
	assert_int_equal(resp.error, META_ERR_NONE);
	assert_true(resp.should_shut_down);
	/* The reply goes out only with its batch: the broker has not stopped. */
	assert_true(b->alive);
	assert_int_equal(c.pending_count, 1);
	assert_true(leads(&c, solo)); /* committed state unchanged so far */
	h_commit_all(&c);
	assert_false(b->alive);
	assert_true(b->was_told_stop);
	/* By the time it stops, it leads nothing and sits in no ISR of >1. */
	assert_false(leads(&c, solo));
	const struct meta_broker *mb = meta_image_broker(&c.committed, solo);
	assert_true(mb->in_controlled_shutdown);
	assert_true(mb->fenced);
	const struct meta_topic *t = meta_image_topic(&c.committed, "sensor-data");
	for (uint32_t p = 0; p < 6; p++) {
		assert_false(meta_list_contains(t->partitions[p].isr, t->partitions[p].isr_count,
						solo));
		assert_int_not_equal(t->partitions[p].leader, META_NO_LEADER);
	}
	/* Its single-replica partition went offline, keeping it in the ISR. */
	const struct meta_partition *sp = h_partition(&c, "solo", 0);
	assert_int_equal(sp->leader, META_NO_LEADER);
	assert_int_equal(sp->isr_count, 1);

	/* It restarts: new epoch, unfenced, leads again after recovery. */
	c.auto_commit = true;
	h_restart(&c, solo);
	h_run(&c, 2000, 500);
	assert_false(meta_image_broker(&c.committed, solo)->in_controlled_shutdown);
	assert_false(meta_image_broker(&c.committed, solo)->fenced);
	assert_int_equal(sp->leader, solo);
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

/* A broker fenced for missed heartbeats asks to stop. It is marked in
 * controlled shutdown before it is told it may stop, so that a heartbeat it
 * sent earlier, reaching the controller after the answer (retried through
 * another server), cannot unfence it again. */
static void test_fenced_broker_told_to_stop_stays_fenced(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	assert_int_equal(h_create_topic(&c, "sensor-data", 3, 2, NULL, 0), META_ERR_NONE);
	struct h_broker *b = h_broker(&c, 2);
	b->paused = true;
	h_run(&c, 9500, 500);
	const struct meta_broker *mb = meta_image_broker(&c.committed, 2);
	assert_true(mb->fenced);
	assert_false(mb->in_controlled_shutdown);
	assert_false(leads(&c, 2));

	struct meta_broker_heartbeat_request stop = {2, b->epoch, c.committed.offset, false, true};
	struct meta_broker_heartbeat_request stale = {2, b->epoch, c.committed.offset, false,
						      false};
	struct meta_broker_heartbeat_response resp;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_heartbeat(&c.ctl, c.now, &stop, &resp, &batch), KEEL_OK);
	assert_int_equal(resp.error, META_ERR_NONE);
	assert_true(resp.should_shut_down);
	/* The answer waits for a batch that marks it. */
	assert_non_null(batch);
	h_propose(&c, batch, -1, 0, -1);
	mb = meta_image_broker(&c.committed, 2);
	assert_true(mb->fenced);
	assert_true(mb->in_controlled_shutdown);

	/* The earlier heartbeat arrives: caught up, but it stays fenced. */
	assert_int_equal(meta_controller_heartbeat(&c.ctl, c.now, &stale, &resp, &batch),
			 KEEL_OK);
	assert_null(batch);
	assert_true(resp.is_caught_up);
	assert_true(resp.is_fenced);
	assert_true(meta_image_broker(&c.committed, 2)->fenced);
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

static void test_preferred_leader_restored(void **state)
{
	(void)state;
	struct meta_controller_config cfg;
	meta_controller_config_default(&cfg);
	cfg.rebalance_interval_ms = 30000;
	struct h_cluster c;
	start3(&c, &cfg);
	assert_int_equal(h_create_topic(&c, "sensor-data", 6, 2, NULL, 0), META_ERR_NONE);
	const struct meta_topic *t = meta_image_topic(&c.committed, "sensor-data");
	h_kill(&c, 1);
	h_run(&c, 10000, 500);
	assert_false(leads(&c, 1));
	h_restart(&c, 1);
	h_run(&c, 2000, 500);
	/* Back in every ISR, but not leading yet. */
	bool preferred_elsewhere = false;
	for (uint32_t p = 0; p < 6; p++) {
		const struct meta_partition *part = &t->partitions[p];
		assert_int_equal(part->isr_count, 2);
		if (part->replicas[0] == 1 && part->leader != 1) {
			preferred_elsewhere = true;
		}
	}
	assert_true(preferred_elsewhere);
	/* The periodic pass (30 s after start) gives leadership back. */
	h_run(&c, 20000, 500);
	for (uint32_t p = 0; p < 6; p++) {
		assert_int_equal(t->partitions[p].leader, t->partitions[p].replicas[0]);
	}
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

/* Encodes a batch for byte comparison (timestamp fixed). */
static size_t encode(struct meta_batch *b, uint8_t *buf, size_t cap)
{
	if (b == NULL) {
		return 0;
	}
	b->hdr.timestamp_ms = 0;
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, buf, cap);
	assert_int_equal(meta_batch_encode(b, &w), KEEL_OK);
	return w.size;
}

static void test_failover_same_image_same_decisions(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	assert_int_equal(h_create_topic(&c, "sensor-data", 6, 2, NULL, 0), META_ERR_NONE);

	/* Two controllers built from the same committed image and seed, fed the
	 * same events, decide byte for byte the same. */
	struct meta_controller x, y;
	struct keel_rng rx, ry;
	keel_rng_seed(&rx, 99);
	keel_rng_seed(&ry, 99);
	assert_int_equal(meta_controller_init(&x, &c.cfg, 2, 5, &c.committed, &rx, c.now), KEEL_OK);
	assert_int_equal(meta_controller_init(&y, &c.cfg, 2, 5, &c.committed, &ry, c.now), KEEL_OK);
	static uint8_t bx[1 << 16], by[1 << 16];
	struct meta_batch *batch_x, *batch_y;
	int64_t t0 = c.now;
	for (int step = 0; step < 30; step++) {
		int64_t now = t0 + step * 500;
		/* Brokers 1 and 3 heartbeat; 2 is silent and gets fenced. */
		for (int32_t id = 1; id <= 3; id += 2) {
			struct meta_broker_heartbeat_request hb = {id, h_broker(&c, id)->epoch,
								   c.committed.offset, false, false};
			struct meta_broker_heartbeat_response rx1, ry1;
			assert_int_equal(meta_controller_heartbeat(&x, now, &hb, &rx1, &batch_x), KEEL_OK);
			assert_int_equal(meta_controller_heartbeat(&y, now, &hb, &ry1, &batch_y), KEEL_OK);
			assert_memory_equal(&rx1, &ry1, sizeof(rx1));
		}
		if (step == 3) {
			struct meta_create_topic nt = {"second", 4, 2, NULL, 0, NULL, 0};
			struct meta_create_topics_request req = {&nt, 1, false};
			struct meta_create_topics_response r1, r2;
			assert_int_equal(meta_controller_create_topics(&x, now, &req, &r1, &batch_x),
					 KEEL_OK);
			size_t nx = encode(batch_x, bx, sizeof(bx));
			assert_int_equal(meta_controller_create_topics(&y, now, &req, &r2, &batch_y),
					 KEEL_OK);
			size_t ny = encode(batch_y, by, sizeof(by));
			assert_int_equal(nx, ny);
			assert_memory_equal(bx, by, nx);
		}
		assert_int_equal(meta_controller_tick(&x, now, &batch_x), KEEL_OK);
		size_t nx = encode(batch_x, bx, sizeof(bx));
		assert_int_equal(meta_controller_tick(&y, now, &batch_y), KEEL_OK);
		size_t ny = encode(batch_y, by, sizeof(by));
		assert_int_equal(nx, ny);
		assert_memory_equal(bx, by, nx);
	}
	assert_true(meta_image_broker(meta_controller_image(&x), 2)->fenced);
	assert_true(h_same_decisions(meta_controller_image(&x), meta_controller_image(&y)));
	meta_controller_close(&x);
	meta_controller_close(&y);
	h_close(&c);
}

static void test_failover_fresh_timeouts_and_nothing_twice(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	assert_int_equal(h_create_topic(&c, "sensor-data", 6, 2, NULL, 0), META_ERR_NONE);

	/* Broker 2 goes quiet; 8 s later the controller moves. */
	h_broker(&c, 2)->paused = true;
	h_run(&c, 8000, 500);
	h_failover(&c, 0);
	/* Its old deadline passes: the new controller gave it a fresh 9 s. */
	h_run(&c, 3000, 500);
	assert_false(meta_image_broker(&c.committed, 2)->fenced);
	h_run(&c, 6500, 500);
	assert_true(meta_image_broker(&c.committed, 2)->fenced);
	assert_false(leads(&c, 2));

	/* A controller that takes over now finds nothing to redo: its first
	 * batch is the NoOp announcing it, and only that. */
	uint64_t before = meta_image_hash(&c.committed);
	h_failover(&c, 0);
	c.auto_commit = false;
	h_tick(&c);
	assert_int_equal(c.pending_count, 1);
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct meta_batch first;
	assert_int_equal(meta_batch_decode(c.pending[0].data, c.pending[0].size, &arena, &first, NULL),
			 KEEL_OK);
	assert_int_equal(first.count, 1);
	assert_int_equal(first.records[0].type, META_REC_NOOP);
	assert_int_equal(first.hdr.controller_epoch, c.term);
	h_commit_all(&c);
	assert_int_equal(c.committed.controller_epoch, c.term);
	assert_true(meta_image_hash(&c.committed) != before); /* controller changed */
	/* Later ticks propose nothing at all. */
	h_tick(&c);
	assert_int_equal(c.pending_count, 0);
	keel_arena_close(&arena);
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

static void test_failover_lost_decision_is_made_anew(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	assert_int_equal(h_create_topic(&c, "sensor-data", 6, 2, NULL, 0), META_ERR_NONE);
	h_broker(&c, 2)->paused = true;
	h_run(&c, 8500, 500);
	assert_false(meta_image_broker(&c.committed, 2)->fenced);
	/* The fence is decided but never committed. */
	c.auto_commit = false;
	h_run(&c, 1000, 500);
	assert_true(c.pending_count >= 1);
	assert_false(meta_image_broker(&c.committed, 2)->fenced);
	/* Keep the deposed controller's batch aside, then lose it. */
	size_t stale_size = c.pending[0].size;
	uint8_t *stale = malloc(stale_size);
	memcpy(stale, c.pending[0].data, stale_size);
	h_failover(&c, 0);
	c.auto_commit = true;
	h_run(&c, 8500, 500);
	assert_false(meta_image_broker(&c.committed, 2)->fenced);
	h_run(&c, 1000, 500);
	assert_true(meta_image_broker(&c.committed, 2)->fenced);

	/* The deposed controller's batch shows up after all: it is ignored whole
	 * (older controller epoch), the image is untouched. */
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct meta_batch b;
	assert_int_equal(meta_batch_decode(stale, stale_size, &arena, &b, NULL), KEEL_OK);
	assert_true(b.hdr.controller_epoch < c.committed.controller_epoch);
	struct meta_image copy;
	meta_image_init(&copy, NULL);
	assert_int_equal(meta_image_clone(&copy, &c.committed), KEEL_OK);
	struct meta_apply_result res;
	assert_int_equal(meta_image_apply(&c.committed, c.offset + 1, &b, NULL, &res), KEEL_OK);
	assert_true(res.batch_ignored);
	assert_true(h_same_decisions(&copy, &c.committed));
	meta_image_close(&copy);
	keel_arena_close(&arena);
	free(stale);
	h_close(&c);
}

static struct meta_allocate_producer_ids_response h_alloc_ids(struct h_cluster *c, int32_t id,
							       int64_t epoch)
{
	struct meta_allocate_producer_ids_request rq = {id, epoch};
	struct meta_allocate_producer_ids_response rs;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_allocate_producer_ids(&c->ctl, c->now, &rq, &rs, &batch),
			 KEEL_OK);
	assert_true((rs.error == META_ERR_NONE) == (batch != NULL));
	h_propose(c, batch, -1, 0, -1);
	return rs;
}

/* Producer id blocks: each answer is a fresh range, committed before it is
 * given; a controller that takes over continues after every committed one,
 * and one lost with its deposed controller was never given to anyone. */
static void test_producer_id_blocks_never_repeat(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	int64_t given[16][2];
	uint32_t n = 0;

	struct meta_allocate_producer_ids_response rs = h_alloc_ids(&c, 1, h_broker(&c, 1)->epoch);
	assert_int_equal(rs.error, META_ERR_NONE);
	assert_int_equal(rs.producer_id_len, META_PRODUCER_ID_BLOCK);
	given[n][0] = rs.producer_id_start;
	given[n++][1] = rs.producer_id_start + rs.producer_id_len;
	rs = h_alloc_ids(&c, 2, h_broker(&c, 2)->epoch);
	given[n][0] = rs.producer_id_start;
	given[n++][1] = rs.producer_id_start + rs.producer_id_len;
	assert_true(c.committed.next_producer_id == given[1][1]);

	/* Wrong epoch, unknown broker: refused, nothing written. */
	uint32_t before = c.applied_batches;
	assert_int_equal(h_alloc_ids(&c, 1, h_broker(&c, 1)->epoch + 100).error,
			 META_ERR_STALE_BROKER_EPOCH);
	assert_int_equal(h_alloc_ids(&c, 9, 1).error, META_ERR_BROKER_ID_NOT_REGISTERED);
	assert_int_equal(c.applied_batches, before);

	/* An allocation whose record is lost with its controller: its answer was
	 * never sent (the server answers after the commit). */
	c.auto_commit = false;
	rs = h_alloc_ids(&c, 3, h_broker(&c, 3)->epoch);
	assert_int_equal(rs.error, META_ERR_NONE);
	assert_int_equal(c.pending_count, 1);
	h_failover(&c, 0);
	c.auto_commit = true;
	h_tick(&c);
	rs = h_alloc_ids(&c, 3, h_broker(&c, 3)->epoch);
	given[n][0] = rs.producer_id_start;
	given[n++][1] = rs.producer_id_start + rs.producer_id_len;

	/* One committed during the failover: given, and the next controller
	 * continues after it. */
	c.auto_commit = false;
	rs = h_alloc_ids(&c, 1, h_broker(&c, 1)->epoch);
	given[n][0] = rs.producer_id_start;
	given[n++][1] = rs.producer_id_start + rs.producer_id_len;
	h_failover(&c, 1);
	c.auto_commit = true;
	h_tick(&c);
	for (int i = 0; i < 3; i++) {
		rs = h_alloc_ids(&c, 2, h_broker(&c, 2)->epoch);
		assert_int_equal(rs.error, META_ERR_NONE);
		given[n][0] = rs.producer_id_start;
		given[n++][1] = rs.producer_id_start + rs.producer_id_len;
	}
	for (uint32_t i = 0; i < n; i++) {
		assert_true(given[i][0] >= 0 && given[i][1] - given[i][0] == META_PRODUCER_ID_BLOCK);
		assert_true(given[i][1] <= c.committed.next_producer_id);
		for (uint32_t j = 0; j < i; j++) {
			assert_true(given[i][1] <= given[j][0] || given[j][1] <= given[i][0]);
		}
	}

	/* The mark survives the image snapshot; a record that would move it
	 * back is ignored. */
	struct meta_image back;
	meta_image_init(&back, NULL);
	assert_int_equal(meta_image_clone(&back, &c.committed), KEEL_OK);
	assert_true(back.next_producer_id == c.committed.next_producer_id);
	struct meta_record old = {.type = META_REC_PRODUCER_IDS};
	old.producer_ids = (struct meta_producer_ids_record){1, h_broker(&c, 1)->epoch, given[0][1]};
	struct meta_errbuf why;
	assert_int_equal(meta_image_apply_record(&back, &old, NULL, &why), KEEL_STALE);
	assert_true(back.next_producer_id == c.committed.next_producer_id);
	meta_image_close(&back);
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

static void test_registration_rules(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	struct h_broker *b = h_broker(&c, 2);
	int64_t epoch = b->epoch;
	/* Same incarnation again: same epoch, nothing proposed. */
	uint32_t batches = c.applied_batches;
	struct meta_broker_registration_response r = h_register(&c, b);
	assert_int_equal(r.error, META_ERR_NONE);
	assert_true(r.broker_epoch == epoch);
	assert_int_equal(c.applied_batches, batches);
	/* A new incarnation while the old one's session lives: refused. */
	b->incarnation++;
	r = h_register(&c, b);
	assert_int_equal(r.error, META_ERR_DUPLICATE_BROKER_REGISTRATION);
	assert_non_null(strstr(r.error_message, "session is alive"));
	/* ...unless it proves it is the old one's successor. */
	struct meta_endpoint ep = {"PLAINTEXT", "h", 1, META_SEC_PLAINTEXT};
	struct meta_broker_registration_request req = {.broker_id = 2, .endpoints = &ep,
						       .endpoint_count = 1,
						       .previous_broker_epoch = epoch};
	h_incarnation(b, req.incarnation_id);
	struct meta_batch *batch;
	assert_int_equal(meta_controller_register_broker(&c.ctl, c.now, &req, &r, &batch), KEEL_OK);
	assert_int_equal(r.error, META_ERR_NONE);
	assert_true(r.broker_epoch > epoch);
	assert_true(r.broker_epoch == c.ctl.image.last_broker_epoch);
	h_propose(&c, batch, 2, r.broker_epoch, -1);
	b->registered = true;
	b->epoch = r.broker_epoch;
	assert_true(meta_image_broker(&c.committed, 2)->fenced); /* starts fenced */
	/* Bad requests. */
	req.broker_id = -1;
	assert_int_equal(meta_controller_register_broker(&c.ctl, c.now, &req, &r, &batch), KEEL_OK);
	assert_int_equal(r.error, META_ERR_INVALID_REQUEST);
	assert_null(batch);
	req.broker_id = 5;
	ep.security_protocol = 9;
	assert_int_equal(meta_controller_register_broker(&c.ctl, c.now, &req, &r, &batch), KEEL_OK);
	assert_int_equal(r.error, META_ERR_INVALID_REQUEST);
	/* Heartbeats: unknown broker, stale epoch. */
	struct meta_broker_heartbeat_request hb = {42, 1, 0, false, false};
	struct meta_broker_heartbeat_response hr;
	assert_int_equal(meta_controller_heartbeat(&c.ctl, c.now, &hb, &hr, &batch), KEEL_OK);
	assert_int_equal(hr.error, META_ERR_BROKER_ID_NOT_REGISTERED);
	hb.broker_id = 2;
	hb.broker_epoch = epoch;
	assert_int_equal(meta_controller_heartbeat(&c.ctl, c.now, &hb, &hr, &batch), KEEL_OK);
	assert_int_equal(hr.error, META_ERR_STALE_BROKER_EPOCH);
	/* Unregister. */
	struct meta_unregister_broker_request ur = {3};
	struct meta_unregister_broker_response urr;
	assert_int_equal(meta_controller_unregister_broker(&c.ctl, c.now, &ur, &urr, &batch), KEEL_OK);
	assert_int_equal(urr.error, META_ERR_NONE);
	h_propose(&c, batch, -1, 0, -1);
	assert_null(meta_image_broker(&c.committed, 3));
	assert_int_equal(meta_controller_unregister_broker(&c.ctl, c.now, &ur, &urr, &batch), KEEL_OK);
	assert_int_equal(urr.error, META_ERR_BROKER_ID_NOT_REGISTERED);
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

static void test_topic_requests(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	assert_int_equal(h_create_topic(&c, "a", 1, 4, NULL, 0), META_ERR_INVALID_REPLICATION_FACTOR);
	assert_int_equal(h_create_topic(&c, "a", 0, 1, NULL, 0), META_ERR_INVALID_PARTITIONS);
	assert_int_equal(h_create_topic(&c, "bad/name", 1, 1, NULL, 0),
			 META_ERR_INVALID_TOPIC_EXCEPTION);
	assert_int_equal(h_create_topic(&c, "..", 1, 1, NULL, 0), META_ERR_INVALID_TOPIC_EXCEPTION);
	assert_int_equal(h_create_topic(&c, "a", 1, 0, NULL, 0), META_ERR_INVALID_REPLICATION_FACTOR);
	static const struct meta_config_kv bad[] = {{META_CONFIG_UNCLEAN_ELECTION, "maybe"}};
	assert_int_equal(h_create_topic(&c, "a", 1, 1, bad, 1), META_ERR_INVALID_CONFIG);
	assert_null(meta_image_topic(&c.committed, "a"));
	/* Defaults (-1) and configs. */
	static const struct meta_config_kv good[] = {{"retention.ms", "1000"}};
	assert_int_equal(h_create_topic(&c, "a", -1, -1, good, 1), META_ERR_NONE);
	assert_int_equal(meta_image_topic(&c.committed, "a")->partition_count, 1);
	assert_string_equal(meta_image_config(&c.committed, META_RESOURCE_TOPIC, "a", "retention.ms"),
			    "1000");
	assert_int_equal(h_create_topic(&c, "a", 1, 1, NULL, 0), META_ERR_TOPIC_ALREADY_EXISTS);

	/* One request: a duplicate name inside it, and validate_only. */
	struct meta_create_topic two[2] = {{"b", 2, 2, NULL, 0, NULL, 0}, {"b", 2, 2, NULL, 0, NULL, 0}};
	struct meta_create_topics_request req = {two, 2, true};
	struct meta_create_topics_response resp;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_create_topics(&c.ctl, c.now, &req, &resp, &batch), KEEL_OK);
	assert_null(batch); /* validate only */
	assert_int_equal(resp.topics[0].error, META_ERR_NONE);
	assert_int_equal(resp.topics[1].error, META_ERR_INVALID_REQUEST);
	assert_null(meta_image_topic(&c.committed, "b"));

	/* Delete: known and unknown. */
	static const char *const names[] = {"a", "zzz"};
	struct meta_delete_topics_request del = {names, 2};
	struct meta_delete_topics_response dresp;
	assert_int_equal(meta_controller_delete_topics(&c.ctl, c.now, &del, &dresp, &batch), KEEL_OK);
	assert_int_equal(dresp.results[0].error, META_ERR_NONE);
	assert_int_equal(dresp.results[1].error, META_ERR_UNKNOWN_TOPIC_OR_PARTITION);
	h_propose(&c, batch, -1, 0, -1);
	assert_null(meta_image_topic(&c.committed, "a"));
	assert_null(meta_image_config(&c.committed, META_RESOURCE_TOPIC, "a", "retention.ms"));
	/* The name is free again; the new topic gets a new id. */
	assert_int_equal(h_create_topic(&c, "a", 1, 1, NULL, 0), META_ERR_NONE);

	/* Configs on a missing topic; a cluster default; a delete. */
	struct meta_config_kv kv = {META_CONFIG_UNCLEAN_ELECTION, "true"};
	struct meta_alter_config_resource res[2] = {{META_RESOURCE_TOPIC, "nope", &kv, 1},
						    {META_RESOURCE_BROKER, "", &kv, 1}};
	struct meta_alter_configs_request ac = {res, 2, false};
	struct meta_alter_configs_response acr;
	assert_int_equal(meta_controller_alter_configs(&c.ctl, c.now, &ac, &acr, &batch), KEEL_OK);
	assert_int_equal(acr.results[0].error, META_ERR_UNKNOWN_TOPIC_OR_PARTITION);
	assert_int_equal(acr.results[1].error, META_ERR_NONE);
	h_propose(&c, batch, -1, 0, -1);
	assert_true(meta_image_unclean_election(&c.committed, "a"));
	kv.value = NULL;
	ac.resources = &res[1];
	ac.resource_count = 1;
	assert_int_equal(meta_controller_alter_configs(&c.ctl, c.now, &ac, &acr, &batch), KEEL_OK);
	h_propose(&c, batch, -1, 0, -1);
	assert_false(meta_image_unclean_election(&c.committed, "a"));
	/* Deleting an unset key changes nothing. */
	assert_int_equal(meta_controller_alter_configs(&c.ctl, c.now, &ac, &acr, &batch), KEEL_OK);
	assert_int_equal(acr.results[0].error, META_ERR_NONE);
	assert_null(batch);
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

/* Names equal once '.' reads as '_' collide (within a request too); a name
 * may start with '-'; no topic id prints with a leading '-' (1 in 64 random
 * ids would, so 400 topics meet the rule a few times). */
static void test_topic_names_and_ids(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	assert_int_equal(h_create_topic(&c, "metrics.cpu", 1, 1, NULL, 0), META_ERR_NONE);
	assert_int_equal(h_create_topic(&c, "metrics_cpu", 1, 1, NULL, 0),
			 META_ERR_INVALID_TOPIC_EXCEPTION);
	assert_int_equal(h_create_topic(&c, "metrics_cpu.x", 1, 1, NULL, 0), META_ERR_NONE);
	struct meta_create_topic two[2] = {{"p.q", 1, 1, NULL, 0, NULL, 0}, {"p_q", 1, 1, NULL, 0, NULL, 0}};
	struct meta_create_topics_request req = {two, 2, true};
	struct meta_create_topics_response resp;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_create_topics(&c.ctl, c.now, &req, &resp, &batch), KEEL_OK);
	assert_int_equal(resp.topics[0].error, META_ERR_NONE);
	assert_int_equal(resp.topics[1].error, META_ERR_INVALID_TOPIC_EXCEPTION);
	assert_non_null(strstr(resp.topics[1].error_message, "p.q"));
	assert_int_equal(h_create_topic(&c, "-dash", 1, 1, NULL, 0), META_ERR_NONE);
	for (int i = 0; i < 400; i++) {
		char name[32];
		snprintf(name, sizeof(name), "t%d", i);
		assert_int_equal(h_create_topic(&c, name, 1, 1, NULL, 0), META_ERR_NONE);
		char id[META_UUID_TEXT_LEN + 1];
		struct meta_fmt f;
		meta_fmt_init(&f, id, sizeof(id));
		meta_fmt_uuid(&f, meta_image_topic(&c.committed, name)->id);
		assert_true(id[0] != '-');
	}
	h_close(&c);
}

/* The controller's health figures (stats.h) follow a broker's death and
 * return: offline, under-replicated, under/at min ISR, imbalance, brokers by
 * state; the last reported metadata offset per broker is kept. */
static void test_cluster_stats(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	static const struct meta_config_kv strict[] = {{"min.insync.replicas", "2"}};
	assert_int_equal(h_create_topic(&c, "pairs", 6, 2, strict, 1), META_ERR_NONE);
	assert_int_equal(h_create_topic(&c, "solo", 3, 1, NULL, 0), META_ERR_NONE);
	struct meta_cluster_stats s;
	meta_cluster_stats(&c.committed, &s);
	assert_int_equal(s.topics, 2);
	assert_int_equal(s.partitions, 9);
	assert_int_equal(s.offline_partitions, 0);
	assert_int_equal(s.under_replicated_partitions, 0);
	assert_int_equal(s.under_min_isr_partitions, 0);
	assert_int_equal(s.at_min_isr_partitions, 6 + 3);
	assert_int_equal(s.preferred_replica_imbalance, 0);
	assert_int_equal(s.brokers_active, 3);
	assert_int_equal(meta_min_isr(&c.committed, "pairs"), 2);
	assert_int_equal(meta_min_isr(&c.committed, "solo"), 1);
	assert_true(meta_controller_broker_offset(&c.ctl, 1) > 0);
	assert_int_equal(meta_controller_broker_offset(&c.ctl, 9), -1);

	uint32_t on2 = 0, solo_on2 = 0, led_by_2 = 0;
	const struct meta_topic *t = meta_image_topic(&c.committed, "pairs");
	for (uint32_t p = 0; p < 6; p++) {
		on2 += meta_list_contains(t->partitions[p].replicas, 2, 2) ? 1u : 0u;
		led_by_2 += t->partitions[p].leader == 2 ? 1u : 0u;
	}
	t = meta_image_topic(&c.committed, "solo");
	for (uint32_t p = 0; p < 3; p++) {
		solo_on2 += t->partitions[p].replicas[0] == 2 ? 1u : 0u;
	}
	h_kill(&c, 2);
	h_run(&c, 9500, 500);
	meta_cluster_stats(&c.committed, &s);
	assert_int_equal(s.brokers_fenced, 1);
	assert_int_equal(s.brokers_active, 2);
	assert_int_equal(s.offline_partitions, solo_on2);
	assert_int_equal(s.under_replicated_partitions, on2);
	assert_int_equal(s.under_min_isr_partitions, on2);
	assert_int_equal(s.preferred_replica_imbalance, led_by_2);
	h_close(&c);
}

static int16_t h_add_partitions(struct h_cluster *c, const char *name, int32_t count,
				const int32_t *const *rows, const uint32_t *sizes, uint32_t row_count)
{
	struct meta_create_partitions_topic t = {name, count, rows, sizes, row_count};
	struct meta_create_partitions_request req = {&t, 1, false};
	struct meta_create_partitions_response resp;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_create_partitions(&c->ctl, c->now, &req, &resp, &batch),
			 KEEL_OK);
	assert_int_equal(resp.result_count, 1);
	int16_t err = resp.results[0].error;
	h_propose(c, batch, -1, 0, -1);
	return err;
}

/* CreatePartitions: only growth; new partitions continue the stripe a topic
 * created with the new count would have; explicit assignments are checked. */
static void test_create_partitions(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	assert_int_equal(h_create_topic(&c, "grow", 2, 2, NULL, 0), META_ERR_NONE);
	assert_int_equal(h_create_topic(&c, "ref", 5, 2, NULL, 0), META_ERR_NONE);
	assert_int_equal(h_add_partitions(&c, "grow", 2, NULL, NULL, 0), META_ERR_INVALID_PARTITIONS);
	assert_int_equal(h_add_partitions(&c, "grow", 1, NULL, NULL, 0), META_ERR_INVALID_PARTITIONS);
	assert_int_equal(h_add_partitions(&c, "nope", 3, NULL, NULL, 0),
			 META_ERR_UNKNOWN_TOPIC_OR_PARTITION);
	assert_int_equal(h_add_partitions(&c, "grow", 5, NULL, NULL, 0), META_ERR_NONE);
	const struct meta_topic *g = meta_image_topic(&c.committed, "grow");
	assert_int_equal(g->partition_count, 5);
	/* The same layout as placing 5 partitions from the start. */
	int32_t expect[10];
	bool nomem = false;
	assert_true(meta_place_replicas(&c.committed, 5, 2, ctl_stripe_start("grow"), expect,
					&nomem));
	for (uint32_t p = 0; p < 5; p++) {
		assert_int_equal(g->partitions[p].replica_count, 2);
		assert_int_equal(g->partitions[p].replicas[0], expect[p * 2]);
		assert_int_equal(g->partitions[p].replicas[1], expect[p * 2 + 1]);
		assert_int_equal(g->partitions[p].leader, expect[p * 2]);
	}
	/* Explicit rows: wrong count, wrong width, duplicate, unknown broker. */
	static const int32_t ok_row[] = {3, 1};
	static const int32_t dup_row[] = {2, 2};
	static const int32_t bad_row[] = {1, 9};
	static const int32_t short_row[] = {1};
	const int32_t *ok_rows[] = {ok_row};
	const int32_t *dup_rows[] = {dup_row};
	const int32_t *bad_rows[] = {bad_row};
	const int32_t *short_rows[] = {short_row};
	const uint32_t two[] = {2}, one[] = {1};
	assert_int_equal(h_add_partitions(&c, "grow", 7, ok_rows, two, 1),
			 META_ERR_INVALID_REPLICA_ASSIGNMENT);
	assert_int_equal(h_add_partitions(&c, "grow", 6, dup_rows, two, 1),
			 META_ERR_INVALID_REPLICA_ASSIGNMENT);
	assert_int_equal(h_add_partitions(&c, "grow", 6, bad_rows, two, 1),
			 META_ERR_INVALID_REPLICA_ASSIGNMENT);
	assert_int_equal(h_add_partitions(&c, "grow", 6, short_rows, one, 1),
			 META_ERR_INVALID_REPLICA_ASSIGNMENT);
	assert_int_equal(meta_image_topic(&c.committed, "grow")->partition_count, 5);
	assert_int_equal(h_add_partitions(&c, "grow", 6, ok_rows, two, 1), META_ERR_NONE);
	g = meta_image_topic(&c.committed, "grow");
	assert_int_equal(g->partitions[5].leader, 3);
	assert_int_equal(g->partitions[5].isr_count, 2);
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

/* CreateTopics with a manual assignment (Kafka's `assignments`, num_partitions
 * and replication_factor -1): written exactly, the first replica leading;
 * refused with INVALID_REPLICA_ASSIGNMENT when the indexes are not 0..n-1,
 * a broker repeats or is not registered, or the rows differ in length. */
static int16_t h_create_assigned(struct h_cluster *c, const char *name, int32_t partitions,
				 const struct meta_replica_assignment *rows, uint32_t n,
				 const char **message)
{
	struct meta_create_topic t = {name, partitions, -1, NULL, 0, rows, n};
	struct meta_create_topics_request req = {&t, 1, false};
	struct meta_create_topics_response resp;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_create_topics(&c->ctl, c->now, &req, &resp, &batch),
			 KEEL_OK);
	assert_int_equal(resp.topic_count, 1);
	int16_t err = resp.topics[0].error;
	if (message != NULL) {
		*message = resp.topics[0].error_message;
	}
	if (err == META_ERR_NONE) {
		assert_int_equal(resp.topics[0].num_partitions, (int32_t)n);
		assert_int_equal(resp.topics[0].replication_factor, (int16_t)rows[0].broker_count);
	}
	h_propose(c, batch, -1, 0, -1);
	return err;
}

static void test_create_topics_manual_assignment(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	static const int32_t r23[] = {2, 3}, r31[] = {3, 1}, r12[] = {1, 2}, r11[] = {1, 1},
			     r19[] = {1, 9}, r3[] = {3}, r21[] = {2, 1}, r2[] = {2};
	/* Given out of order: partition 2 first. */
	struct meta_replica_assignment ok[] = {{2, r12, 2}, {0, r23, 2}, {1, r31, 2}};
	assert_int_equal(h_create_assigned(&c, "manual", -1, ok, 3, NULL), META_ERR_NONE);
	const struct meta_topic *t = meta_image_topic(&c.committed, "manual");
	assert_non_null(t);
	assert_int_equal(t->partition_count, 3);
	const int32_t *want[] = {r23, r31, r12};
	for (uint32_t p = 0; p < 3; p++) {
		const struct meta_partition *mp = &t->partitions[p];
		assert_int_equal(mp->replica_count, 2);
		assert_int_equal(mp->replicas[0], want[p][0]);
		assert_int_equal(mp->replicas[1], want[p][1]);
		assert_int_equal(mp->leader, want[p][0]);
		assert_int_equal(mp->isr_count, 2);
	}
	const char *why = NULL;
	struct meta_replica_assignment gap[] = {{0, r23, 2}, {2, r31, 2}};
	assert_int_equal(h_create_assigned(&c, "gap", -1, gap, 2, &why),
			 META_ERR_INVALID_REPLICA_ASSIGNMENT);
	assert_non_null(strstr(why, "0..(partitions - 1)"));
	struct meta_replica_assignment twice[] = {{0, r23, 2}, {0, r31, 2}};
	assert_int_equal(h_create_assigned(&c, "twice", -1, twice, 2, NULL),
			 META_ERR_INVALID_REPLICA_ASSIGNMENT);
	struct meta_replica_assignment dup[] = {{0, r11, 2}};
	assert_int_equal(h_create_assigned(&c, "dup", -1, dup, 1, &why),
			 META_ERR_INVALID_REPLICA_ASSIGNMENT);
	assert_non_null(strstr(why, "twice: 1"));
	struct meta_replica_assignment unknown[] = {{0, r19, 2}};
	assert_int_equal(h_create_assigned(&c, "unknown", -1, unknown, 1, &why),
			 META_ERR_INVALID_REPLICA_ASSIGNMENT);
	assert_non_null(strstr(why, "no registered broker has id 9"));
	struct meta_replica_assignment uneven[] = {{0, r12, 2}, {1, r3, 1}};
	assert_int_equal(h_create_assigned(&c, "uneven", -1, uneven, 2, &why),
			 META_ERR_INVALID_REPLICA_ASSIGNMENT);
	assert_non_null(strstr(why, "partition 1"));
	struct meta_replica_assignment one[] = {{0, r12, 2}};
	assert_int_equal(h_create_assigned(&c, "counted", 1, one, 1, NULL),
			 META_ERR_INVALID_REQUEST);
	assert_null(meta_image_topic(&c.committed, "gap"));
	assert_null(meta_image_topic(&c.committed, "dup"));
	assert_null(meta_image_topic(&c.committed, "counted"));
	/* A fenced broker may be named (it is registered) but does not lead
	 * and is not in the ISR; a partition of fenced brokers only is refused. */
	h_kill(&c, 2);
	h_run(&c, 9500, 500);
	assert_true(meta_image_broker(&c.committed, 2)->fenced);
	struct meta_replica_assignment fenced[] = {{0, r21, 2}};
	assert_int_equal(h_create_assigned(&c, "fenced", -1, fenced, 1, NULL), META_ERR_NONE);
	const struct meta_partition *fp = h_partition(&c, "fenced", 0);
	assert_int_equal(fp->replicas[0], 2);
	assert_int_equal(fp->leader, 1);
	assert_int_equal(fp->isr_count, 1);
	assert_int_equal(fp->isr[0], 1);
	struct meta_replica_assignment dead[] = {{0, r2, 1}};
	assert_int_equal(h_create_assigned(&c, "dead", -1, dead, 1, &why),
			 META_ERR_INVALID_REPLICA_ASSIGNMENT);
	assert_non_null(strstr(why, "fenced"));
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

static struct meta_elect_leaders_response h_elect(struct h_cluster *c, int8_t type,
						  const char *topic, const int32_t *parts,
						  uint32_t count)
{
	struct meta_elect_topic t = {topic, parts, count};
	struct meta_elect_leaders_request req = {type, topic == NULL, &t, topic != NULL ? 1u : 0u};
	struct meta_elect_leaders_response resp;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_elect_leaders(&c->ctl, c->now, &req, &resp, &batch),
			 KEEL_OK);
	h_propose(c, batch, -1, 0, -1);
	return resp;
}

/* ElectLeaders: preferred when replicas[0] is back and in the ISR;
 * ELECTION_NOT_NEEDED / PREFERRED_LEADER_NOT_AVAILABLE otherwise; unclean
 * only for an offline partition, RECOVERING, with its first live replica. */
static void test_elect_leaders(void **state)
{
	(void)state;
	struct h_cluster c;
	struct meta_controller_config cfg;
	meta_controller_config_default(&cfg);
	cfg.rebalance_interval_ms = 0; /* no automatic preferred elections */
	start3(&c, &cfg);
	assert_int_equal(h_create_topic(&c, "e", 1, 2, NULL, 0), META_ERR_NONE);
	const struct meta_partition *p = h_partition(&c, "e", 0);
	int32_t first = p->replicas[0], second = p->replicas[1];
	static const int32_t p0[] = {0};
	static const int32_t p9[] = {9};
	struct meta_elect_leaders_response r = h_elect(&c, META_ELECTION_PREFERRED, "e", p0, 1);
	assert_int_equal(r.results[0].error, META_ERR_ELECTION_NOT_NEEDED);
	r = h_elect(&c, META_ELECTION_PREFERRED, "e", p9, 1);
	assert_int_equal(r.results[0].error, META_ERR_UNKNOWN_TOPIC_OR_PARTITION);

	/* The preferred leader dies: leadership moves; it cannot be elected. */
	h_kill(&c, first);
	h_run(&c, 9500, 500);
	p = h_partition(&c, "e", 0);
	assert_int_equal(p->leader, second);
	r = h_elect(&c, META_ELECTION_PREFERRED, NULL, NULL, 0);
	assert_int_equal(r.result_count, 1);
	assert_int_equal(r.results[0].error, META_ERR_PREFERRED_LEADER_NOT_AVAILABLE);
	/* Back and caught up (in the ISR again): the preferred election works. */
	h_restart(&c, first);
	h_run(&c, 3000, 500);
	p = h_partition(&c, "e", 0);
	if (!meta_list_contains(p->isr, p->isr_count, first)) {
		h_run(&c, 3000, 500);
		p = h_partition(&c, "e", 0);
	}
	assert_true(meta_list_contains(p->isr, p->isr_count, first));
	int32_t epoch = p->leader_epoch;
	assert_int_equal(p->leader, second); /* no automatic rebalance in this test */
	r = h_elect(&c, META_ELECTION_PREFERRED, "e", p0, 1);
	assert_int_equal(r.results[0].error, META_ERR_NONE);
	p = h_partition(&c, "e", 0);
	assert_int_equal(p->leader, first);
	assert_int_equal(p->leader_epoch, epoch + 1);

	/* Unclean: refused while there is a leader; both replicas die, the
	 * last ISR member stays dead, the other comes back: unclean elects it. */
	r = h_elect(&c, META_ELECTION_UNCLEAN, "e", p0, 1);
	assert_int_equal(r.results[0].error, META_ERR_ELECTION_NOT_NEEDED);
	h_kill(&c, second);
	h_run(&c, 9500, 500);
	h_kill(&c, first);
	h_run(&c, 9500, 500);
	p = h_partition(&c, "e", 0);
	assert_int_equal(p->leader, META_NO_LEADER);
	r = h_elect(&c, META_ELECTION_UNCLEAN, "e", p0, 1);
	assert_int_equal(r.results[0].error, META_ERR_ELIGIBLE_LEADERS_NOT_AVAILABLE);
	h_restart(&c, second);
	h_run(&c, 3000, 500);
	p = h_partition(&c, "e", 0);
	assert_int_equal(p->leader, META_NO_LEADER); /* clean election cannot use it */
	r = h_elect(&c, META_ELECTION_UNCLEAN, "e", p0, 1);
	assert_int_equal(r.results[0].error, META_ERR_NONE);
	p = h_partition(&c, "e", 0);
	assert_int_equal(p->leader, second);
	assert_int_equal(p->isr_count, 1);
	/* All-partitions unclean is refused as a whole. */
	r = h_elect(&c, META_ELECTION_UNCLEAN, NULL, NULL, 0);
	assert_int_equal(r.error, META_ERR_INVALID_REQUEST);
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

/* Issue 18: names given twice in one request are found with O(n log n)
 * comparisons, counted: 10^5 topics named in descending order (validate
 * only), the last 10 repeating earlier ones, and 10^5 config keys with one
 * repeat. A pairwise check made n^2/2 = 5e9. */
static void test_duplicate_checks_are_n_log_n(void **state)
{
	(void)state;
	struct h_cluster c;
	start3(&c, NULL);
	enum { N = 100000 };
	struct meta_create_topic *topics = calloc(N, sizeof(*topics));
	char (*names)[16] = calloc(N, sizeof(*names));
	assert_non_null(topics);
	assert_non_null(names);
	for (uint32_t i = 0; i < N; i++) {
		uint32_t k = i < N - 10 ? N - 1 - i : N - 1 - (i - (N - 10)); /* last 10 repeat */
		snprintf(names[i], sizeof(names[i]), "t%08u", k);
		topics[i] = (struct meta_create_topic){names[i], 1, 1, NULL, 0, NULL, 0};
	}
	struct meta_create_topics_request req = {topics, N, true};
	struct meta_create_topics_response resp;
	struct meta_batch *batch;
	uint64_t before = c.ctl.sort_compares;
	assert_int_equal(meta_controller_create_topics(&c.ctl, c.now, &req, &resp, &batch), KEEL_OK);
	uint64_t compares = c.ctl.sort_compares - before;
	assert_true(compares > 0);
	/* Two sorts: names given twice, and names that collide ('.' = '_')
	 * with each other or with the topics that exist. */
	assert_true(compares <=
		    keel_sort_bound(N) + keel_sort_bound(N + c.committed.topic_count));
	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(resp.topics[i].error,
				 i < N - 10 ? META_ERR_NONE : META_ERR_INVALID_REQUEST);
	}
	/* Config keys of one topic. */
	struct meta_config_kv *kvs = calloc(N, sizeof(*kvs));
	assert_non_null(kvs);
	for (uint32_t i = 0; i < N; i++) {
		kvs[i] = (struct meta_config_kv){names[i < N - 10 ? i : 0], "1"};
	}
	struct meta_create_topic one = {"cfg", 1, 1, kvs, N, NULL, 0};
	req = (struct meta_create_topics_request){&one, 1, true};
	before = c.ctl.sort_compares;
	assert_int_equal(meta_controller_create_topics(&c.ctl, c.now, &req, &resp, &batch), KEEL_OK);
	assert_true(c.ctl.sort_compares - before <= keel_sort_bound(N) + keel_sort_bound(1));
	assert_int_equal(resp.topics[0].error, META_ERR_INVALID_CONFIG); /* unknown keys */
	/* A repeated valid key: found by the same marking. */
	static const struct meta_config_kv twice[] = {
		{"retention.ms", "1"}, {META_CONFIG_UNCLEAN_ELECTION, "true"}, {"retention.ms", "2"}};
	one = (struct meta_create_topic){"cfg", 1, 1, twice, 3, NULL, 0};
	assert_int_equal(meta_controller_create_topics(&c.ctl, c.now, &req, &resp, &batch), KEEL_OK);
	assert_int_equal(resp.topics[0].error, META_ERR_INVALID_CONFIG);
	assert_string_equal(resp.topics[0].error_message,
			    "config 'retention.ms': config key given twice");
	free(kvs);
	free(names);
	free(topics);
	h_close(&c);
}

static void test_rack_aware_placement(void **state)
{
	(void)state;
	struct h_cluster c;
	h_init(&c, 3, NULL);
	const char *racks[3] = {"r1", "r2", "r3"};
	for (int32_t id = 1; id <= 6; id++) {
		h_add_broker(&c, id, racks[(id - 1) % 3]);
	}
	h_run(&c, 1000, 500);
	assert_int_equal(meta_active_broker_count(&c.committed), 6);
	assert_int_equal(h_create_topic(&c, "racked", 12, 3, NULL, 0), META_ERR_NONE);
	const struct meta_topic *t = meta_image_topic(&c.committed, "racked");
	int led[7] = {0};
	for (uint32_t p = 0; p < 12; p++) {
		const struct meta_partition *part = &t->partitions[p];
		const char *seen[3];
		for (uint32_t r = 0; r < 3; r++) {
			seen[r] = meta_image_broker(&c.committed, part->replicas[r])->rack;
		}
		/* Three replicas, three different racks. */
		assert_string_not_equal(seen[0], seen[1]);
		assert_string_not_equal(seen[0], seen[2]);
		assert_string_not_equal(seen[1], seen[2]);
		led[part->leader]++;
	}
	for (int id = 1; id <= 6; id++) {
		assert_int_equal(led[id], 2);
	}
	/* More replicas than racks: racks repeat only when they must. */
	assert_int_equal(h_create_topic(&c, "wide", 3, 5, NULL, 0), META_ERR_NONE);
	const struct meta_topic *w = meta_image_topic(&c.committed, "wide");
	for (uint32_t p = 0; p < 3; p++) {
		const struct meta_partition *part = &w->partitions[p];
		int per_rack[3] = {0};
		for (uint32_t r = 0; r < 5; r++) {
			const char *rack = meta_image_broker(&c.committed, part->replicas[r])->rack;
			per_rack[rack[1] - '1']++;
		}
		for (int r = 0; r < 3; r++) {
			assert_true(per_rack[r] >= 1 && per_rack[r] <= 2);
		}
	}
	h_close(&c);
}

static void test_batch_limit_defers_work(void **state)
{
	(void)state;
	struct meta_controller_config cfg;
	meta_controller_config_default(&cfg);
	cfg.max_records_per_batch = 4;
	cfg.max_partitions_per_topic = 3;
	struct h_cluster c;
	start3(&c, &cfg);
	assert_int_equal(h_create_topic(&c, "a", 3, 2, NULL, 0), META_ERR_NONE);
	assert_int_equal(h_create_topic(&c, "b", 3, 2, NULL, 0), META_ERR_NONE);
	assert_int_equal(h_create_topic(&c, "c", 4, 2, NULL, 0), META_ERR_INVALID_PARTITIONS);
	/* Broker 1 dies: more partition changes than one batch holds; they
	 * spread over several ticks, and in the end all are made. */
	h_kill(&c, 1);
	h_run(&c, 12000, 500);
	assert_false(leads(&c, 1));
	assert_false(in_any_isr(&c, 1));
	assert_true(meta_image_check(&c.committed, NULL));
	assert_int_equal(c.ignored_records, 0);
	h_close(&c);
}

static void test_timers_and_noops(void **state)
{
	(void)state;
	struct meta_controller_config cfg;
	meta_controller_config_default(&cfg);
	cfg.noop_interval_ms = 500;
	cfg.rebalance_interval_ms = 0;
	struct h_cluster c;
	start3(&c, &cfg);
	/* Idle: the next thing due is a NoOp or the earliest session deadline. */
	int64_t next = meta_controller_next_tick_ms(&c.ctl, c.now);
	assert_true(next > c.now);
	assert_true(next <= c.now + cfg.session_timeout_ms);
	/* Idle ticks write a NoOp every 500 ms and nothing else. */
	c.auto_commit = false;
	c.now += 500;
	h_tick(&c);
	assert_int_equal(c.pending_count, 1);
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct meta_batch b;
	assert_int_equal(meta_batch_decode(c.pending[0].data, c.pending[0].size, &arena, &b, NULL),
			 KEEL_OK);
	assert_int_equal(b.count, 1);
	assert_int_equal(b.records[0].type, META_REC_NOOP);
	c.now += 100;
	h_tick(&c);
	assert_int_equal(c.pending_count, 1); /* not due yet */
	h_commit_all(&c);
	/* A broker going quiet makes its deadline the next tick time. */
	c.auto_commit = true;
	cfg.noop_interval_ms = 0;
	keel_arena_close(&arena);
	h_close(&c);

	start3(&c, NULL);
	int64_t quiet_since = c.now;
	h_broker(&c, 1)->paused = true;
	h_run(&c, 1000, 500);
	next = meta_controller_next_tick_ms(&c.ctl, c.now);
	assert_true(next == quiet_since + c.cfg.session_timeout_ms);
	h_close(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_three_brokers_and_a_topic),
		cmocka_unit_test(test_unfence_waits_for_catch_up),
		cmocka_unit_test(test_missed_heartbeats_fence_and_offline),
		cmocka_unit_test(test_unclean_election),
		cmocka_unit_test(test_alter_partition_rules),
		cmocka_unit_test(test_controlled_shutdown_moves_leaders_first),
		cmocka_unit_test(test_fenced_broker_told_to_stop_stays_fenced),
		cmocka_unit_test(test_preferred_leader_restored),
		cmocka_unit_test(test_failover_same_image_same_decisions),
		cmocka_unit_test(test_failover_fresh_timeouts_and_nothing_twice),
		cmocka_unit_test(test_failover_lost_decision_is_made_anew),
		cmocka_unit_test(test_producer_id_blocks_never_repeat),
		cmocka_unit_test(test_registration_rules),
		cmocka_unit_test(test_topic_requests),
		cmocka_unit_test(test_topic_names_and_ids),
		cmocka_unit_test(test_cluster_stats),
		cmocka_unit_test(test_create_partitions),
		cmocka_unit_test(test_create_topics_manual_assignment),
		cmocka_unit_test(test_elect_leaders),
		cmocka_unit_test(test_duplicate_checks_are_n_log_n),
		cmocka_unit_test(test_rack_aware_placement),
		cmocka_unit_test(test_batch_limit_defers_work),
		cmocka_unit_test(test_timers_and_noops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
