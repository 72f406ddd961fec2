/* Unit tests: the broker-side follower — its image tracks the committed
 * one exactly, it reports role changes (leader/follower/none with epochs),
 * snapshots, and no two brokers ever claim one (partition, leader epoch). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "meta/follower.h"
#include "test_meta_harness.h"

#define MAX_LINES 4096

struct claims {
	/* (topic id, partition, leader epoch) -> broker, from "leader of" reports */
	uint8_t topic_id[MAX_LINES][16];
	int32_t partition[MAX_LINES];
	int32_t epoch[MAX_LINES];
	int32_t broker[MAX_LINES];
	uint32_t count;
};

struct fleet {
	struct meta_follower followers[4]; /* brokers 1..3; [0] unused */
	char lines[4][64][96];             /* the last role-change lines per broker */
	uint32_t line_count[4];
	struct claims claims;
	bool split_brain;
};

static void record(struct fleet *fl, int32_t broker, const struct meta_role_change *ch,
		   uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		char line[96];
		struct meta_fmt f;
		meta_fmt_init(&f, line, sizeof(line));
		meta_format_role_change(&f, &ch[i]);
		if (fl->line_count[broker] < 64) {
			strcpy(fl->lines[broker][fl->line_count[broker]++], line);
		}
		if (ch[i].new_role != META_ROLE_LEADER) {
			continue;
		}
		struct claims *c = &fl->claims;
		for (uint32_t k = 0; k < c->count; k++) {
			if (memcmp(c->topic_id[k], ch[i].topic_id, 16) == 0 &&
			    c->partition[k] == ch[i].partition_id &&
			    c->epoch[k] == ch[i].leader_epoch && c->broker[k] != broker) {
				fl->split_brain = true;
			}
		}
		assert_true(c->count < MAX_LINES);
		memcpy(c->topic_id[c->count], ch[i].topic_id, 16);
		c->partition[c->count] = ch[i].partition_id;
		c->epoch[c->count] = ch[i].leader_epoch;
		c->broker[c->count] = broker;
		c->count++;
	}
}

/* The harness hook: every committed batch goes to every follower, encoded
 * as the server would stream it (FetchMetadata). */
static void feed(struct h_cluster *c, const struct meta_batch *b, void *ctx)
{
	struct fleet *fl = ctx;
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, 1 << 24);
	assert_int_equal(meta_batch_encode(b, &w), KEEL_OK);
	for (int32_t id = 1; id <= 3; id++) {
		const struct meta_role_change *ch;
		uint32_t n;
		assert_int_equal(meta_follower_apply(&fl->followers[id], c->offset, w.data, w.size,
						     &ch, &n, NULL),
				 KEEL_OK);
		record(fl, id, ch, n);
		assert_true(meta_image_hash(&fl->followers[id].image) ==
			    meta_image_hash(&c->committed));
	}
	keel_wbuf_free(&w);
}

static bool has_line(const struct fleet *fl, int32_t broker, const char *text)
{
	for (uint32_t i = 0; i < fl->line_count[broker]; i++) {
		if (strcmp(fl->lines[broker][i], text) == 0) {
			return true;
		}
	}
	return false;
}

static void clear_lines(struct fleet *fl)
{
	memset(fl->line_count, 0, sizeof(fl->line_count));
}

static void test_followers_track_roles(void **state)
{
	(void)state;
	struct fleet *fl = calloc(1, sizeof(*fl));
	struct h_cluster c;
	h_init(&c, 7, NULL);
	for (int32_t id = 1; id <= 3; id++) {
		meta_follower_init(&fl->followers[id], id, NULL);
	}
	c.on_commit = feed;
	c.ctx = fl;
	h_add_broker(&c, 1, NULL);
	h_add_broker(&c, 2, NULL);
	h_add_broker(&c, 3, NULL);
	h_run(&c, 1000, 500);
	assert_int_equal(h_create_topic(&c, "sensor-data", 6, 2, NULL, 0), META_ERR_NONE);

	/* Every broker learns its partitions at epoch 0. */
	const struct meta_topic *t = meta_image_topic(&c.committed, "sensor-data");
	for (uint32_t p = 0; p < 6; p++) {
		const struct meta_partition *part = &t->partitions[p];
		char expect[96];
		snprintf(expect, sizeof(expect), "leader of sensor-data-%u at epoch 0", p);
		assert_true(has_line(fl, part->leader, expect));
		snprintf(expect, sizeof(expect), "follower of sensor-data-%u at epoch 0 (leader: Broker-%d)",
			 p, part->leader);
		assert_true(has_line(fl, part->replicas[1], expect));
		assert_int_equal(meta_follower_role(&fl->followers[part->leader], t->id, (int32_t)p),
				 META_ROLE_LEADER);
	}

	/* Broker 2 dies; the others take its partitions at epoch 1. */
	clear_lines(fl);
	h_kill(&c, 2);
	h_run(&c, 10000, 500);
	t = meta_image_topic(&c.committed, "sensor-data");
	uint32_t moved = 0;
	for (uint32_t p = 0; p < 6; p++) {
		const struct meta_partition *part = &t->partitions[p];
		if (part->leader_epoch == 1) {
			char expect[96];
			snprintf(expect, sizeof(expect), "leader of sensor-data-%u at epoch 1", p);
			assert_true(has_line(fl, part->leader, expect));
			moved++;
		}
	}
	assert_int_equal(moved, 2);

	/* Deleting the topic: everyone lets go of every partition. */
	clear_lines(fl);
	static const char *const names[] = {"sensor-data"};
	struct meta_delete_topics_request del = {names, 1};
	struct meta_delete_topics_response dr;
	struct meta_batch *batch;
	assert_int_equal(meta_controller_delete_topics(&c.ctl, c.now, &del, &dr, &batch), KEEL_OK);
	h_propose(&c, batch, -1, 0, -1);
	assert_true(has_line(fl, 1, "no longer a replica of sensor-data-0") ||
		    has_line(fl, 3, "no longer a replica of sensor-data-0"));
	assert_int_equal(fl->followers[1].role_count, 0);
	assert_int_equal(fl->followers[3].role_count, 0);
	assert_false(fl->split_brain);

	for (int32_t id = 1; id <= 3; id++) {
		meta_follower_close(&fl->followers[id]);
	}
	h_close(&c);
	free(fl);
}

static void test_snapshot_then_batches(void **state)
{
	(void)state;
	struct h_cluster c;
	h_init(&c, 8, NULL);
	h_add_broker(&c, 1, NULL);
	h_add_broker(&c, 2, NULL);
	h_run(&c, 1000, 500);
	assert_int_equal(h_create_topic(&c, "a", 4, 2, NULL, 0), META_ERR_NONE);
	size_t size;
	enum keel_err err;
	uint8_t *snap = meta_image_save_to_memory(&c.committed, 1 << 20, &size, &err);
	assert_non_null(snap);

	struct meta_follower f;
	meta_follower_init(&f, 1, NULL);
	const struct meta_role_change *ch;
	uint32_t n;
	assert_int_equal(meta_follower_load_snapshot(&f, snap, size, &ch, &n, NULL), KEEL_OK);
	assert_int_equal(n, 4); /* a replica of all 4 partitions (RF 2 of 2) */
	uint32_t leads = 0;
	for (uint32_t i = 0; i < n; i++) {
		assert_string_equal(ch[i].topic, "a");
		assert_int_equal(ch[i].old_role, META_ROLE_NONE);
		leads += ch[i].new_role == META_ROLE_LEADER;
	}
	assert_int_equal(leads, 2);
	assert_true(meta_follower_offset(&f) == c.committed.offset);
	/* A corrupt snapshot is refused and the image kept. */
	snap[10] ^= 1;
	assert_int_not_equal(meta_follower_load_snapshot(&f, snap, size, &ch, &n, NULL), KEEL_OK);
	assert_true(meta_follower_offset(&f) == c.committed.offset);
	free(snap);
	/* A batch that does not decode is refused and the image kept. */
	uint64_t hash = meta_image_hash(&f.image);
	static const uint8_t undecodable[] = {0xff, 0xff, 0xff, 0xff, 1, 2, 3};
	enum keel_err bad = meta_follower_apply(&f, c.committed.offset + 1, undecodable,
						sizeof(undecodable), &ch, &n, NULL);
	assert_int_not_equal(bad, KEEL_OK);
	assert_int_equal(n, 0);
	assert_true(meta_follower_offset(&f) == c.committed.offset);
	assert_true(meta_image_hash(&f.image) == hash);

	/* Then the log goes on: the follower applies the next batches. */
	c.auto_commit = false;
	h_kill(&c, 2);
	h_run(&c, 10000, 500);
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	uint32_t taken_over = 0;
	while (c.pending_count > 0) {
		struct h_pending *p = &c.pending[0];
		int64_t before = c.offset;
		bool has_data = p->data != NULL;
		uint8_t *copy = has_data ? malloc(p->size) : NULL;
		size_t copy_size = p->size;
		if (has_data) {
			memcpy(copy, p->data, p->size);
		}
		h_commit_one(&c);
		if (!has_data) {
			continue;
		}
		assert_true(c.offset > before);
		assert_int_equal(meta_follower_apply(&f, c.offset, copy, copy_size, &ch, &n, NULL),
				 KEEL_OK);
		for (uint32_t i = 0; i < n; i++) {
			if (ch[i].new_role == META_ROLE_LEADER && ch[i].old_role == META_ROLE_FOLLOWER) {
				assert_int_equal(ch[i].leader_epoch, 1);
				taken_over++;
			}
		}
		/* Applying the same offset again is a no-op. */
		assert_int_equal(meta_follower_apply(&f, c.offset, copy, copy_size, &ch, &n, NULL),
				 KEEL_OK);
		assert_int_equal(n, 0);
		free(copy);
	}
	assert_int_equal(taken_over, 2);
	assert_true(meta_image_hash(&f.image) == meta_image_hash(&c.committed));
	/* Garbage is refused with a reason. */
	struct meta_errbuf eb;
	uint8_t junk[5] = {0, 9, 0, 0, 0};
	assert_int_equal(meta_follower_apply(&f, c.offset + 1, junk, sizeof(junk), &ch, &n, &eb),
			 KEEL_UNSUPPORTED);
	assert_non_null(strstr(eb.msg, "batch format"));
	keel_arena_close(&arena);
	meta_follower_close(&f);
	h_close(&c);
}

static void test_role_change_text(void **state)
{
	(void)state;
	char buf[128];
	struct meta_fmt f;
	struct meta_role_change c = {.topic = "sensor-data", .partition_id = 0,
				     .new_role = META_ROLE_LEADER, .leader = 1, .leader_epoch = 3};
	meta_fmt_init(&f, buf, sizeof(buf));
	meta_format_role_change(&f, &c);
	assert_string_equal(buf, "leader of sensor-data-0 at epoch 3");
	c.new_role = META_ROLE_FOLLOWER;
	c.leader = META_NO_LEADER;
	meta_fmt_init(&f, buf, sizeof(buf));
	meta_format_role_change(&f, &c);
	assert_string_equal(buf, "follower of sensor-data-0 at epoch 3 (leader: none)");
	c.new_role = META_ROLE_NONE;
	meta_fmt_init(&f, buf, sizeof(buf));
	meta_format_role_change(&f, &c);
	assert_string_equal(buf, "no longer a replica of sensor-data-0");
}

static bool never(void *ctx, const uint8_t topic_id[16], int32_t partition_id, int32_t replica)
{
	(void)topic_id;
	(void)partition_id;
	(void)replica;
	(*(int *)ctx)++;
	return false;
}

static void test_leader_isr_requests(void **state)
{
	(void)state;
	struct fleet *fl = calloc(1, sizeof(*fl));
	struct h_cluster c;
	h_init(&c, 9, NULL);
	for (int32_t id = 1; id <= 3; id++) {
		meta_follower_init(&fl->followers[id], id, NULL);
	}
	c.on_commit = feed;
	c.ctx = fl;
	c.expand_isr = false; /* the followers' requests do it here */
	for (int32_t id = 1; id <= 3; id++) {
		h_add_broker(&c, id, NULL);
	}
	h_run(&c, 1000, 500);
	assert_int_equal(h_create_topic(&c, "sensor-data", 6, 2, NULL, 0), META_ERR_NONE);
	struct meta_alter_partition_request req;
	/* Full ISRs: nothing to ask. */
	for (int32_t id = 1; id <= 3; id++) {
		assert_false(meta_follower_isr_request(&fl->followers[id], h_broker(&c, id)->epoch,
						       NULL, NULL, &req));
	}
	h_kill(&c, 2);
	h_run(&c, 10000, 500);
	h_restart(&c, 2);
	h_run(&c, 1500, 500);
	assert_false(meta_image_broker(&c.committed, 2)->fenced);
	const struct meta_topic *t = meta_image_topic(&c.committed, "sensor-data");
	uint32_t short_isr = 0;
	for (uint32_t p = 0; p < 6; p++) {
		short_isr += t->partitions[p].isr_count == 1;
	}
	assert_int_equal(short_isr, 4); /* the 4 partitions with broker 2 */
	/* A data plane that says "not caught up" asks nothing. */
	int asked = 0;
	assert_false(meta_follower_isr_request(&fl->followers[1], h_broker(&c, 1)->epoch, never,
					       &asked, &req));
	assert_true(asked > 0);
	/* Without one, each leader asks for broker 2 back; the controller agrees. */
	for (int32_t id = 1; id <= 3; id++) {
		if (!meta_follower_isr_request(&fl->followers[id], h_broker(&c, id)->epoch, NULL,
					       NULL, &req)) {
			continue;
		}
		assert_int_equal(req.broker_id, id);
		struct meta_alter_partition_response resp;
		struct meta_batch *batch;
		assert_int_equal(meta_controller_alter_partition(&c.ctl, c.now, &req, &resp, &batch),
				 KEEL_OK);
		assert_int_equal(resp.error, META_ERR_NONE);
		for (uint32_t k = 0; k < resp.topics[0].partition_count; k++) {
			assert_int_equal(resp.topics[0].partitions[k].error, META_ERR_NONE);
		}
		h_propose(&c, batch, -1, 0, -1);
	}
	for (uint32_t p = 0; p < 6; p++) {
		assert_int_equal(t->partitions[p].isr_count, 2);
	}
	assert_false(fl->split_brain);
	for (int32_t id = 1; id <= 3; id++) {
		meta_follower_close(&fl->followers[id]);
	}
	h_close(&c);
	free(fl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_followers_track_roles),
		cmocka_unit_test(test_snapshot_then_batches),
		cmocka_unit_test(test_role_change_text),
		cmocka_unit_test(test_leader_isr_requests),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
