/* Unit tests: the group coordinator (src/group/group.c) — joins with
 * MEMBER_ID_REQUIRED, a join phase waiting for every member, the leader's
 * assignment handed out in SyncGroup, leaves and session expiry starting a
 * new generation, static members rejoining without a rebalance and fencing
 * their old id, stale generations refused, committed offsets and their
 * checks, deletion, unloading, Kafka's partition hash, offset expiry — and the
 * __consumer_offsets record formats (src/group/records.c) round-tripped
 * through a batch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "group/group.h"
#include "group/records.h"
#include "kafka/errors.h"

#define SESSION   10000
#define REBALANCE 30000

static struct group_coord coord;

static int setup(void **state)
{
	(void)state;
	struct group_coord_config cfg;
	group_coord_config_default(&cfg);
	cfg.incarnation = 0xabcdu;
	group_coord_init(&coord, &cfg);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	group_coord_close(&coord);
	return 0;
}

static const uint8_t META_A[] = {1, 2, 3};
static const struct group_protocol_in RANGE[] = {{"range", META_A, 3}};

static struct group_join_request join_rq(const char *member, const char *instance, uint64_t waiter)
{
	struct group_join_request rq = {
	        .group_id = "g",
	        .offsets_partition = 3,
	        .member_id = member,
	        .instance_id = instance,
	        .client_id = "client",
	        .client_host = "127.0.0.1",
	        .session_timeout_ms = SESSION,
	        .rebalance_timeout_ms = REBALANCE,
	        .protocol_type = "consumer",
	        .protocols = RANGE,
	        .protocol_count = 1,
	        .version = 5,
	        .waiter = waiter,
	};
	return rq;
}

/* A new dynamic member: MEMBER_ID_REQUIRED first, then the id it got. */
static char *new_member_id(int64_t now)
{
	struct group_join_request rq = join_rq("", NULL, 0);
	struct group_join_result res;
	assert_true(group_join(&coord, now, &rq, &res));
	assert_int_equal(res.error, KAFKA_MEMBER_ID_REQUIRED);
	assert_non_null(res.member_id);
	assert_true(strncmp(res.member_id, "client-", 7) == 0);
	char *id = strdup(res.member_id);
	group_join_result_clear(&res);
	return id;
}

static struct group_reply *take(enum group_reply_kind kind, uint64_t waiter)
{
	struct group_reply *r = group_coord_take_reply(&coord);
	assert_non_null(r);
	assert_int_equal(r->kind, kind);
	assert_int_equal(r->waiter, waiter);
	return r;
}

/* Joins member `id` with waiter w: parked. */
static void join_parked(const char *id, uint64_t w, int64_t now)
{
	struct group_join_request rq = join_rq(id, NULL, w);
	struct group_join_result res;
	assert_false(group_join(&coord, now, &rq, &res));
}

static void sync_leader(const char *leader, int32_t gen, const char **members, uint32_t n,
                        int64_t now)
{
	struct group_assignment_in as[8];
	for (uint32_t i = 0; i < n; i++) {
		as[i] = (struct group_assignment_in){members[i], (const uint8_t *)members[i],
		                                     (int32_t)strlen(members[i])};
	}
	struct group_sync_request rq = {"g", gen, leader, NULL, as, n, 99};
	struct group_sync_result res;
	assert_true(group_sync(&coord, now, &rq, &res));
	assert_int_equal(res.error, KAFKA_NONE);
	assert_int_equal(res.assignment.len, (int32_t)strlen(leader));
	assert_memory_equal(res.assignment.ptr, leader, strlen(leader));
	assert_string_equal(res.protocol_name, "range");
	group_sync_result_clear(&res);
}

/* a forms generation 1 alone; b then joins (waiter 2), starting a new
 * join phase that waits for a. */
static void second_member_joins(char **a, char **b)
{
	*a = new_member_id(0);
	*b = new_member_id(0);
	join_parked(*a, 1, 0);
	group_reply_free(take(GROUP_REPLY_JOIN, 1));
	join_parked(*b, 2, 0);
}

static void test_join_sync_two_members(void **state)
{
	(void)state;
	char *a = new_member_id(0);
	join_parked(a, 1, 0);
	/* a alone: the phase completes at once, generation 1, a leads */
	struct group_reply *r = take(GROUP_REPLY_JOIN, 1);
	assert_int_equal(r->join.error, KAFKA_NONE);
	assert_int_equal(r->join.generation, 1);
	assert_string_equal(r->join.leader_id, a);
	assert_int_equal(r->join.member_count, 1);
	group_reply_free(r);
	struct group *g = group_coord_find(&coord, "g");
	assert_int_equal(g->state, GROUP_COMPLETING_REBALANCE);
	/* b arrives before a's SyncGroup: a new phase; a's stale sync is refused */
	char *b = new_member_id(10);
	join_parked(b, 2, 10);
	assert_int_equal(g->state, GROUP_PREPARING_REBALANCE);
	assert_null(group_coord_take_reply(&coord));
	struct group_sync_request srq = {"g", 1, a, NULL, NULL, 0, 5};
	struct group_sync_result sres;
	assert_true(group_sync(&coord, 20, &srq, &sres));
	assert_int_equal(sres.error, KAFKA_REBALANCE_IN_PROGRESS);
	group_sync_result_clear(&sres);
	/* heartbeat tells a to rejoin */
	assert_int_equal(group_heartbeat(&coord, 20, "g", 1, a, NULL), KAFKA_REBALANCE_IN_PROGRESS);
	join_parked(a, 3, 30);
	r = take(GROUP_REPLY_JOIN, 3); /* replies go out in member order */
	assert_int_equal(r->join.member_count, 2);
	group_reply_free(r);
	r = take(GROUP_REPLY_JOIN, 2);
	assert_int_equal(r->join.generation, 2);
	assert_string_equal(r->join.leader_id, a);
	assert_int_equal(r->join.member_count, 0); /* b is not the leader */
	group_reply_free(r);
	/* b's SyncGroup waits for the leader's */
	struct group_sync_request brq = {"g", 2, b, NULL, NULL, 0, 7};
	assert_false(group_sync(&coord, 40, &brq, &sres));
	const char *both[] = {a, b};
	sync_leader(a, 2, both, 2, 50);
	r = take(GROUP_REPLY_SYNC, 7);
	assert_int_equal(r->sync.error, KAFKA_NONE);
	assert_memory_equal(r->sync.assignment.ptr, b, strlen(b));
	group_reply_free(r);
	assert_int_equal(g->state, GROUP_STABLE);
	assert_true(group_coord_take_dirty(&coord) == g);
	assert_null(group_coord_take_dirty(&coord));
	/* stale generation */
	assert_int_equal(group_heartbeat(&coord, 60, "g", 1, b, NULL), KAFKA_ILLEGAL_GENERATION);
	assert_int_equal(group_heartbeat(&coord, 60, "g", 2, b, NULL), KAFKA_NONE);
	assert_int_equal(group_heartbeat(&coord, 60, "g", 2, "nobody", NULL),
	                 KAFKA_UNKNOWN_MEMBER_ID);
	/* a non-leader rejoining with the same metadata keeps the generation */
	struct group_join_request same = join_rq(b, NULL, 8);
	struct group_join_result jres;
	assert_true(group_join(&coord, 70, &same, &jres));
	assert_int_equal(jres.error, KAFKA_NONE);
	assert_int_equal(jres.generation, 2);
	group_join_result_clear(&jres);
	free(a);
	free(b);
}

static void test_unknown_and_bad_joins(void **state)
{
	(void)state;
	struct group_join_request rq = join_rq("ghost", NULL, 1);
	struct group_join_result res;
	assert_true(group_join(&coord, 0, &rq, &res));
	assert_int_equal(res.error, KAFKA_UNKNOWN_MEMBER_ID);
	group_join_result_clear(&res);
	rq = join_rq("", NULL, 1);
	rq.session_timeout_ms = 10;
	assert_true(group_join(&coord, 0, &rq, &res));
	assert_int_equal(res.error, KAFKA_INVALID_SESSION_TIMEOUT);
	group_join_result_clear(&res);
	rq = join_rq("", NULL, 1);
	rq.group_id = "";
	assert_true(group_join(&coord, 0, &rq, &res));
	assert_int_equal(res.error, KAFKA_INVALID_GROUP_ID);
	group_join_result_clear(&res);
	/* v3 and older: no MEMBER_ID_REQUIRED round */
	rq = join_rq("", NULL, 4);
	rq.version = 3;
	assert_false(group_join(&coord, 0, &rq, &res));
	struct group_reply *r = take(GROUP_REPLY_JOIN, 4);
	assert_int_equal(r->join.error, KAFKA_NONE);
	char *a = strdup(r->join.member_id);
	group_reply_free(r);
	/* another protocol type does not fit */
	rq = join_rq("", NULL, 5);
	rq.protocol_type = "connect";
	assert_true(group_join(&coord, 0, &rq, &res));
	assert_int_equal(res.error, KAFKA_INCONSISTENT_GROUP_PROTOCOL);
	group_join_result_clear(&res);
	free(a);
}

static void test_leave_and_session_expiry(void **state)
{
	(void)state;
	char *a, *b;
	second_member_joins(&a, &b);
	join_parked(a, 3, 0);
	group_reply_free(take(GROUP_REPLY_JOIN, 3));
	group_reply_free(take(GROUP_REPLY_JOIN, 2));
	const char *both[] = {a, b};
	sync_leader(a, 2, both, 2, 0);
	struct group *g = group_coord_find(&coord, "g");
	assert_int_equal(g->state, GROUP_STABLE);
	/* b keeps heartbeating, a goes silent: a's session expires */
	group_coord_tick(&coord, SESSION - 1);
	assert_int_equal(g->member_count, 2);
	assert_int_equal(group_heartbeat(&coord, SESSION - 1, "g", 2, b, NULL), KAFKA_NONE);
	group_coord_tick(&coord, SESSION + 1);
	assert_int_equal(g->member_count, 1);
	assert_int_equal(g->state, GROUP_PREPARING_REBALANCE);
	assert_int_equal(group_heartbeat(&coord, SESSION + 2, "g", 2, b, NULL),
	                 KAFKA_REBALANCE_IN_PROGRESS);
	join_parked(b, 4, SESSION + 3);
	struct group_reply *r = take(GROUP_REPLY_JOIN, 4);
	assert_int_equal(r->join.generation, 3);
	assert_string_equal(r->join.leader_id, b); /* the leader died: b leads */
	group_reply_free(r);
	/* b leaves: the group is Empty, a new generation */
	assert_int_equal(group_leave(&coord, SESSION + 4, "g", b, NULL), KAFKA_NONE);
	assert_int_equal(g->state, GROUP_EMPTY);
	assert_int_equal(g->generation, 4);
	assert_int_equal(group_leave(&coord, SESSION + 4, "g", b, NULL), KAFKA_UNKNOWN_MEMBER_ID);
	free(a);
	free(b);
}

static void test_rebalance_timeout_drops_laggards(void **state)
{
	(void)state;
	char *a, *b;
	second_member_joins(&a, &b);
	/* a never rejoins, but keeps its session alive with heartbeats */
	for (int64_t t = 1000; t < REBALANCE; t += 1000) {
		assert_int_equal(group_heartbeat(&coord, t, "g", 1, a, NULL),
		                 KAFKA_REBALANCE_IN_PROGRESS);
		group_coord_tick(&coord, t);
		assert_null(group_coord_take_reply(&coord));
	}
	group_coord_tick(&coord, REBALANCE + 1);
	struct group_reply *r = take(GROUP_REPLY_JOIN, 2);
	assert_int_equal(r->join.error, KAFKA_NONE);
	assert_int_equal(r->join.member_count, 1);
	assert_string_equal(r->join.leader_id, b);
	group_reply_free(r);
	assert_int_equal(group_heartbeat(&coord, REBALANCE + 2, "g", 2, a, NULL),
	                 KAFKA_UNKNOWN_MEMBER_ID);
	free(a);
	free(b);
}

static void test_static_member_rejoins_and_fences(void **state)
{
	(void)state;
	struct group_join_request rq = join_rq("", "inst-1", 1);
	struct group_join_result res;
	assert_false(group_join(&coord, 0, &rq, &res)); /* static: no MEMBER_ID_REQUIRED */
	struct group_reply *r = take(GROUP_REPLY_JOIN, 1);
	char *old = strdup(r->join.member_id);
	group_reply_free(r);
	const char *one[] = {old};
	sync_leader(old, 1, one, 1, 0);
	/* the same instance restarts: a new id, same generation, no rebalance */
	rq = join_rq("", "inst-1", 2);
	assert_true(group_join(&coord, 100, &rq, &res));
	assert_int_equal(res.error, KAFKA_NONE);
	assert_int_equal(res.generation, 1);
	assert_string_not_equal(res.member_id, old);
	char *fresh = strdup(res.member_id);
	group_join_result_clear(&res);
	struct group *g = group_coord_find(&coord, "g");
	assert_int_equal(g->state, GROUP_STABLE);
	/* the old incarnation is fenced */
	assert_int_equal(group_heartbeat(&coord, 100, "g", 1, old, "inst-1"),
	                 KAFKA_FENCED_INSTANCE_ID);
	assert_int_equal(group_heartbeat(&coord, 100, "g", 1, fresh, "inst-1"), KAFKA_NONE);
	/* and keeps its assignment */
	struct group_sync_request srq = {"g", 1, fresh, "inst-1", NULL, 0, 3};
	struct group_sync_result sres;
	assert_true(group_sync(&coord, 100, &srq, &sres));
	assert_int_equal(sres.error, KAFKA_NONE);
	assert_memory_equal(sres.assignment.ptr, old, strlen(old));
	group_sync_result_clear(&sres);
	free(old);
	free(fresh);
}

static void test_offsets(void **state)
{
	(void)state;
	/* outside the group protocol: creates the group, Empty */
	assert_int_equal(group_offset_commit_check(&coord, 0, "g", 3, -1, "", NULL), KAFKA_NONE);
	assert_int_equal(group_offset_commit(&coord, "g", 3, "t", 0, 42, 1, "m", 5), KEEL_OK);
	struct group *g = group_coord_find(&coord, "g");
	const struct group_offset *o = group_offset_find(g, "t", 0);
	assert_non_null(o);
	assert_int_equal(o->offset, 42);
	assert_string_equal(o->metadata, "m");
	assert_int_equal(group_offset_commit(&coord, "g", 3, "t", 0, 50, 1, NULL, 6), KEEL_OK);
	assert_int_equal(group_offset_find(g, "t", 0)->offset, 50);
	assert_null(group_offset_find(g, "t", 1));
	assert_int_equal(group_offset_commit_check(&coord, 0, "other", 3, 4, "x", NULL),
	                 KAFKA_ILLEGAL_GENERATION);
	/* a member must commit in its generation */
	char *a = new_member_id(0);
	join_parked(a, 1, 0);
	group_reply_free(take(GROUP_REPLY_JOIN, 1));
	assert_int_equal(group_offset_commit_check(&coord, 0, "g", 3, 1, a, NULL),
	                 KAFKA_REBALANCE_IN_PROGRESS); /* CompletingRebalance */
	const char *one[] = {a};
	sync_leader(a, 1, one, 1, 0);
	assert_int_equal(group_offset_commit_check(&coord, 0, "g", 3, 1, a, NULL), KAFKA_NONE);
	assert_int_equal(group_offset_commit_check(&coord, 0, "g", 3, 0, a, NULL),
	                 KAFKA_ILLEGAL_GENERATION);
	assert_int_equal(group_offset_commit_check(&coord, 0, "g", 3, 1, "zz", NULL),
	                 KAFKA_UNKNOWN_MEMBER_ID);
	assert_int_equal(group_offset_commit_check(&coord, 0, "g", 3, -1, "", NULL),
	                 KAFKA_UNKNOWN_MEMBER_ID);
	/* not deletable while it has members */
	assert_int_equal(group_delete(&coord, "g"), KAFKA_NON_EMPTY_GROUP);
	assert_int_equal(group_leave(&coord, 0, "g", a, NULL), KAFKA_NONE);
	assert_int_equal(group_delete(&coord, "g"), KAFKA_NONE);
	assert_null(group_coord_find(&coord, "g"));
	assert_int_equal(group_delete(&coord, "g"), KAFKA_GROUP_ID_NOT_FOUND);
	assert_int_equal(group_offset_commit(&coord, "other", 3, "t", 0, 1, -1, NULL, 0), KEEL_OK);
	struct group *other = group_coord_find(&coord, "other");
	assert_true(group_offset_remove(other, "t", 0));
	assert_false(group_offset_remove(other, "t", 0));
	free(a);
}

static void test_member_bounds(void **state)
{
	(void)state;
	coord.config.max_members = 2;
	char *a = new_member_id(0);
	char *b = new_member_id(0);
	/* a third id is not handed out: pending ids count against the bound */
	struct group_join_request rq = join_rq("", NULL, 0);
	struct group_join_result res;
	assert_true(group_join(&coord, 0, &rq, &res));
	assert_int_equal(res.error, KAFKA_GROUP_MAX_SIZE_REACHED);
	group_join_result_clear(&res);
	/* unused ids expire with the session timeout, and make room again */
	group_coord_tick(&coord, SESSION + 1);
	char *c = new_member_id(SESSION + 2);
	rq = join_rq(a, NULL, 1); /* a's id has expired: unknown now */
	assert_true(group_join(&coord, SESSION + 3, &rq, &res));
	assert_int_equal(res.error, KAFKA_UNKNOWN_MEMBER_ID);
	group_join_result_clear(&res);
	free(a);
	free(b);
	free(c);
}

static void test_many_groups(void **state)
{
	(void)state;
	char name[32];
	for (int i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "group-%d", i);
		assert_int_equal(group_offset_commit_check(&coord, 0, name, i % 7, -1, "", NULL),
		                 KAFKA_NONE);
	}
	for (int i = 0; i < 2000; i += 2) {
		snprintf(name, sizeof(name), "group-%d", i);
		assert_int_equal(group_delete(&coord, name), KAFKA_NONE);
	}
	group_coord_unload(&coord, 3);
	uint32_t left = 0;
	for (int i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "group-%d", i);
		struct group *g = group_coord_find(&coord, name);
		bool kept = i % 2 == 1 && i % 7 != 3;
		assert_int_equal(g != NULL, kept);
		if (g != NULL) {
			assert_string_equal(g->group_id, name);
			assert_true(coord.groups[g->slot] == g);
			left++;
		}
	}
	assert_int_equal(coord.group_count, left);
}

static void test_unload_answers_parked(void **state)
{
	(void)state;
	char *a, *b;
	second_member_joins(&a, &b);
	group_coord_unload(&coord, 3);
	struct group_reply *r = take(GROUP_REPLY_JOIN, 2);
	assert_int_equal(r->join.error, KAFKA_NOT_COORDINATOR);
	group_reply_free(r);
	assert_null(group_coord_find(&coord, "g"));
	free(a);
	free(b);
}

static void test_partition_hash_is_javas(void **state)
{
	(void)state;
	/* Java: "g".hashCode() == 103, "test-group".hashCode() == 627841412,
	 * "g-coord".hashCode() == -1693243889 (abs before the modulo) */
	assert_int_equal(group_partition_for("g", 1, 50), 103 % 50);
	assert_int_equal(group_partition_for("test-group", 10, 50), 627841412 % 50);
	assert_int_equal(group_partition_for("g-coord", 7, 50), 1693243889 % 50);
	/* a character outside ASCII counts as its UTF-16 unit: "é" = 0xe9 */
	assert_int_equal(group_partition_for("\xc3\xa9", 2, 1000), 0xe9);
	/* past the BMP: a surrogate pair, U+1F600 = d83d de00 */
	assert_int_equal(group_partition_for("\xf0\x9f\x98\x80", 4, 1 << 30),
	                 (int32_t)((0xd83du * 31u + 0xde00u)) % (1 << 30));
}

struct collected {
	int count;
	struct group_record recs[8];
	struct keel_arena arena;
};

static void collect(void *arg, const uint8_t *key, int32_t key_len, const uint8_t *value,
                    int32_t value_len)
{
	struct collected *c = arg;
	assert_true(c->count < 8);
	assert_int_equal(
	        group_record_decode(key, key_len, value, value_len, &c->arena, &c->recs[c->count]),
	        KEEL_OK);
	c->count++;
}

static void test_records_round_trip(void **state)
{
	(void)state;
	/* a Stable group with one member, to encode */
	char *a = new_member_id(0);
	join_parked(a, 1, 0);
	group_reply_free(take(GROUP_REPLY_JOIN, 1));
	const char *one[] = {a};
	sync_leader(a, 1, one, 1, 0);
	struct group *g = group_coord_find(&coord, "g");
	struct group_batch b;
	group_batch_init(&b, 1234);
	struct keel_wbuf k, v;
	keel_wbuf_init_dynamic(&k, 64, 1 << 20);
	keel_wbuf_init_dynamic(&v, 64, 1 << 20);
	group_encode_offset_key(&k, "g", "topic", 7);
	group_encode_offset_value(&v, 99, 4, "meta", 555);
	group_batch_add(&b, k.data, k.size, v.data, (int32_t)v.size);
	keel_wbuf_reset(&k);
	keel_wbuf_reset(&v);
	group_encode_group_key(&k, "g");
	group_encode_group_value(&v, g);
	group_batch_add(&b, k.data, k.size, v.data, (int32_t)v.size);
	keel_wbuf_reset(&k);
	group_encode_offset_key(&k, "g", "topic", 8);
	group_batch_add(&b, k.data, k.size, NULL, -1);
	assert_int_equal(group_batch_finish(&b), KEEL_OK);
	struct collected c = {0};
	keel_arena_init(&c.arena, 4096);
	assert_int_equal(group_batch_records(b.w.data, b.w.size, collect, &c), KEEL_OK);
	assert_int_equal(c.count, 3);
	assert_int_equal(c.recs[0].kind, GROUP_RECORD_OFFSET);
	assert_string_equal(c.recs[0].group_id, "g");
	assert_string_equal(c.recs[0].topic, "topic");
	assert_int_equal(c.recs[0].partition, 7);
	assert_int_equal(c.recs[0].offset, 99);
	assert_int_equal(c.recs[0].leader_epoch, 4);
	assert_string_equal(c.recs[0].metadata, "meta");
	assert_int_equal(c.recs[0].commit_timestamp_ms, 555);
	assert_false(c.recs[0].tombstone);
	assert_int_equal(c.recs[1].kind, GROUP_RECORD_GROUP);
	assert_string_equal(c.recs[1].protocol_type, "consumer");
	assert_int_equal(c.recs[1].generation, 1);
	assert_string_equal(c.recs[1].protocol_name, "range");
	assert_string_equal(c.recs[1].leader_id, a);
	assert_int_equal(c.recs[1].member_count, 1);
	assert_true(c.recs[2].tombstone);
	assert_int_equal(c.recs[2].partition, 8);
	/* every truncation of a value is refused, never read past */
	keel_wbuf_reset(&k);
	group_encode_group_key(&k, "g");
	for (size_t n = 0; n < v.size; n++) {
		struct group_record r;
		keel_arena_reset(&c.arena);
		assert_int_not_equal(group_record_decode(k.data, (int32_t)k.size, v.data,
		                                         (int32_t)n, &c.arena, &r),
		                     KEEL_OK);
	}
	/* a corrupted batch is refused */
	b.w.data[b.w.size - 1] ^= 0xff;
	assert_int_equal(group_batch_records(b.w.data, b.w.size, collect, &c), KEEL_CORRUPT);
	keel_arena_close(&c.arena);
	keel_wbuf_free(&k);
	keel_wbuf_free(&v);
	group_batch_free(&b);
	free(a);
}

/* ---- offset expiry ---- */

#define WALL      1700000000000LL /* some wall-clock time after 2001 */
#define RETENTION 60000

struct expired_log {
	char what[16][64]; /* "g/t/0" per offset, "g" per group, in call order */
	int count;
};

static void note_expired(void *arg, const struct group *g, const struct group_offset *o)
{
	struct expired_log *log = arg;
	assert_true(log->count < 16);
	if (o != NULL) {
		snprintf(log->what[log->count++], 64, "%s/%s/%d", g->group_id, o->topic,
		         (int)o->partition);
	} else {
		snprintf(log->what[log->count++], 64, "%s", g->group_id);
	}
}

static bool noted(const struct expired_log *log, const char *what)
{
	for (int i = 0; i < log->count; i++) {
		if (strcmp(log->what[i], what) == 0) {
			return true;
		}
	}
	return false;
}

static void test_offsets_expire_by_commit_time_without_members(void **state)
{
	(void)state;
	group_coord_set_wall_clock(&coord, WALL);
	assert_int_equal(group_offset_commit_check(&coord, 0, "s", 1, -1, "", NULL), KAFKA_NONE);
	assert_int_equal(group_offset_commit(&coord, "s", 1, "t", 0, 10, -1, NULL, WALL), KEEL_OK);
	assert_int_equal(group_offset_commit(&coord, "s", 1, "t", 1, 20, -1, NULL, WALL + 30000),
	                 KEEL_OK);
	struct expired_log log = {0};
	/* one millisecond short of the first offset's retention: nothing */
	assert_int_equal(group_coord_expire_offsets(&coord, WALL + RETENTION - 1, RETENTION,
	                                            note_expired, &log),
	                 0);
	assert_int_equal(log.count, 0);
	/* the first offset expires; the second (committed later) stays, and so
	 * does its group */
	assert_int_equal(
	        group_coord_expire_offsets(&coord, WALL + RETENTION, RETENTION, note_expired, &log),
	        1);
	assert_int_equal(log.count, 1);
	assert_string_equal(log.what[0], "s/t/0");
	struct group *g = group_coord_find(&coord, "s");
	assert_non_null(g);
	assert_null(group_offset_find(g, "t", 0));
	assert_int_equal(group_offset_find(g, "t", 1)->offset, 20);
	/* the last one goes, then the group, with a tombstone for each */
	assert_int_equal(group_coord_expire_offsets(&coord, WALL + 30000 + RETENTION, RETENTION,
	                                            note_expired, &log),
	                 1);
	assert_int_equal(log.count, 3);
	assert_string_equal(log.what[1], "s/t/1");
	assert_string_equal(log.what[2], "s");
	assert_null(group_coord_find(&coord, "s"));
}

static void test_offsets_expire_after_the_group_empties(void **state)
{
	(void)state;
	group_coord_set_wall_clock(&coord, WALL);
	char *a = new_member_id(0);
	join_parked(a, 1, 0);
	group_reply_free(take(GROUP_REPLY_JOIN, 1));
	const char *one[] = {a};
	sync_leader(a, 1, one, 1, 0);
	assert_int_equal(group_offset_commit_check(&coord, 0, "g", 3, 1, a, NULL), KAFKA_NONE);
	assert_int_equal(group_offset_commit(&coord, "g", 3, "t", 0, 7, 1, NULL, WALL), KEEL_OK);
	struct expired_log log = {0};
	/* a group with members keeps its offsets however old */
	assert_int_equal(group_coord_expire_offsets(&coord, WALL + 100 * RETENTION, RETENTION,
	                                            note_expired, &log),
	                 0);
	assert_non_null(group_offset_find(group_coord_find(&coord, "g"), "t", 0));
	/* it empties long after the commit: the retention counts from then */
	int64_t empty = WALL + 5 * RETENTION;
	group_coord_set_wall_clock(&coord, empty);
	assert_int_equal(group_leave(&coord, 1, "g", a, NULL), KAFKA_NONE);
	struct group *g = group_coord_find(&coord, "g");
	assert_int_equal(g->state, GROUP_EMPTY);
	assert_int_equal(g->state_wall_ms, empty);
	assert_int_equal(group_coord_expire_offsets(&coord, empty + RETENTION - 1, RETENTION,
	                                            note_expired, &log),
	                 0);
	assert_non_null(group_offset_find(g, "t", 0));
	assert_int_equal(group_coord_expire_offsets(&coord, empty + RETENTION, RETENTION,
	                                            note_expired, &log),
	                 1);
	assert_int_equal(log.count, 2);
	assert_true(noted(&log, "g/t/0"));
	assert_true(noted(&log, "g"));
	assert_null(group_coord_find(&coord, "g"));
	free(a);
}

static void test_loaded_groups_expire_from_their_record(void **state)
{
	(void)state;
	group_coord_set_wall_clock(&coord, WALL);
	/* "e" turned Empty at WALL (its record lists no members); "m" had
	 * members when its record was written; "old" has no usable time (a
	 * monotonic one from an older keel) */
	assert_int_equal(group_coord_load_group(&coord, "e", 0, "consumer", 4, NULL, 0, WALL),
	                 KEEL_OK);
	assert_int_equal(group_coord_load_group(&coord, "m", 0, "consumer", 2, "range", 0, -1),
	                 KEEL_OK);
	assert_int_equal(group_coord_load_group(&coord, "old", 0, "consumer", 1, NULL, 0, 123456),
	                 KEEL_OK);
	assert_int_equal(group_offset_commit(&coord, "e", 0, "t", 0, 1, -1, NULL, WALL - 1000),
	                 KEEL_OK);
	assert_int_equal(group_offset_commit(&coord, "m", 0, "t", 0, 2, -1, NULL, WALL - 1000),
	                 KEEL_OK);
	assert_int_equal(group_offset_commit(&coord, "old", 0, "t", 0, 3, -1, NULL, WALL - 1000),
	                 KEEL_OK);
	struct expired_log log = {0};
	/* the first pass, at WALL + RETENTION: "e"'s time is up; the others'
	 * retention starts at this pass, not at a time they never had */
	int64_t first = WALL + RETENTION;
	assert_int_equal(group_coord_expire_offsets(&coord, first, RETENTION, note_expired, &log),
	                 1);
	assert_true(noted(&log, "e/t/0"));
	assert_null(group_coord_find(&coord, "e"));
	assert_non_null(group_offset_find(group_coord_find(&coord, "m"), "t", 0));
	assert_non_null(group_offset_find(group_coord_find(&coord, "old"), "t", 0));
	assert_int_equal(group_coord_expire_offsets(&coord, first + RETENTION - 1, RETENTION,
	                                            note_expired, &log),
	                 0);
	assert_int_equal(group_coord_expire_offsets(&coord, first + RETENTION, RETENTION,
	                                            note_expired, &log),
	                 2);
	assert_null(group_coord_find(&coord, "m"));
	assert_null(group_coord_find(&coord, "old"));
	assert_int_equal(log.count, 6);
}

static void test_group_record_carries_the_wall_clock_state_time(void **state)
{
	(void)state;
	group_coord_set_wall_clock(&coord, WALL + 5);
	char *a = new_member_id(0);
	join_parked(a, 1, 0);
	group_reply_free(take(GROUP_REPLY_JOIN, 1));
	assert_int_equal(group_leave(&coord, 999, "g", a, NULL), KAFKA_NONE);
	struct group *g = group_coord_find(&coord, "g");
	struct keel_wbuf k, v;
	keel_wbuf_init_dynamic(&k, 64, 1024);
	keel_wbuf_init_dynamic(&v, 64, 1024);
	group_encode_group_key(&k, "g");
	group_encode_group_value(&v, g);
	struct keel_arena arena;
	keel_arena_init(&arena, 1024);
	struct group_record r;
	assert_int_equal(
	        group_record_decode(k.data, (int32_t)k.size, v.data, (int32_t)v.size, &arena, &r),
	        KEEL_OK);
	assert_int_equal(r.state_timestamp_ms, WALL + 5); /* not the monotonic 999 */
	assert_int_equal(r.member_count, 0);
	keel_arena_close(&arena);
	keel_wbuf_free(&k);
	keel_wbuf_free(&v);
	free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_join_sync_two_members, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_unknown_and_bad_joins, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_leave_and_session_expiry, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_rebalance_timeout_drops_laggards, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_static_member_rejoins_and_fences, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_offsets, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_member_bounds, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_many_groups, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_unload_answers_parked, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_partition_hash_is_javas, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_records_round_trip, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_offsets_expire_by_commit_time_without_members,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_offsets_expire_after_the_group_empties, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_loaded_groups_expire_from_their_record, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_group_record_carries_the_wall_clock_state_time,
	                                        setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
