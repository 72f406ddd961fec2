/* Unit tests: the group APIs in the broker core (src/broker/groups.c) on
 * the fault vfs — FindCoordinator, a member joining and syncing through a
 * delayed answer, offset commits answered only after the sync and read
 * back, OffsetDelete refused while the group subscribes to the topic and
 * done (a tombstone) once it is empty, and a restart that rebuilds the
 * groups and offsets by reading __consumer_offsets; offsets expiring after
 * the retention, with tombstones that outlive a restart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/rng.h"
#include "broker/groups.h"
#include "test_meta_util.h"

#define NODE 1

struct fx {
	struct keel_rng rng;
	struct wal_vfs vfs;
	struct broker_core core;
	struct keel_arena arena;
	int64_t now;
};

static void core_open(struct fx *f)
{
	static const int32_t r1[] = {1};
	struct meta_image img;
	meta_image_init(&img, NULL);
	struct meta_record recs[] = {
	        tm_register(1, 1, NULL),
	        tm_broker_ref(META_REC_UNFENCE_BROKER, 1, 1),
	        tm_topic("t", 5),
	        tm_partition(5, 0, r1, 1, r1, 1, 1),
	        tm_partition(5, 1, r1, 1, r1, 1, 1),
	        tm_topic("__consumer_offsets", 6),
	        tm_partition(6, 0, r1, 1, r1, 1, 1),
	};
	struct meta_apply_result res;
	struct meta_changes ch;
	meta_changes_init(&ch, 100);
	assert_int_equal(tm_apply(&img, 1, 1, recs, 7, &res, &ch), KEEL_OK);
	meta_changes_close(&ch);
	struct broker_config bc = {&f->vfs, "/data", NODE, 65536};
	broker_core_init(&f->core, &bc);
	struct broker_image_report rep;
	broker_core_set_image(&f->core, &img, &rep);
	meta_image_close(&img);
	assert_int_equal(rep.opened, 3);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	keel_rng_seed(&f->rng, 11);
	struct wal_vfs_fault_config vc = {.rng = &f->rng};
	assert_int_equal(wal_vfs_fault_init(&f->vfs, &vc), KEEL_OK);
	assert_int_equal(wal_vfs_mkdir(&f->vfs, "/data"), KEEL_OK);
	assert_int_equal(wal_vfs_sync_dir(&f->vfs, "/"), KEEL_OK);
	keel_arena_init(&f->arena, 64 * 1024);
	core_open(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	broker_core_close(&f->core);
	keel_arena_close(&f->arena);
	wal_vfs_fault_close(&f->vfs);
	free(f);
	return 0;
}

static struct kafka_request rq_of(int16_t api_key, int16_t version)
{
	struct kafka_request rq;
	memset(&rq, 0, sizeof(rq));
	rq.header = (struct kafka_request_header){api_key, version, 1, kafka_str("cli")};
	return rq;
}

/* One request; the syncs it waits for run as the shell would run them. */
static enum broker_group_outcome call(struct fx *f, struct kafka_request *rq,
                                      union kafka_response_body *out, uint64_t waiter)
{
	struct broker_group_ctx ctx = {f->now, 1700000000000 + f->now, waiter, "10.0.0.9"};
	struct broker_produce_wait wait;
	enum broker_group_outcome o =
	        broker_group_request(&f->core, &ctx, rq, &f->arena, out, &wait);
	if (o == BROKER_GROUP_SYNC) {
		/* not acknowledged before the sync: the offsets are not visible yet */
		assert_true(broker_core_dirty(&f->core));
		broker_core_sync(&f->core);
		broker_core_sync_done(&f->core);
		broker_group_finish(&f->core, rq, &wait, out);
	}
	return o;
}

/* A consumer-protocol subscription to topic "t". */
static const uint8_t SUBSCRIPTION[] = {0, 1, 0, 0, 0, 1, 0, 1, 't', 0xff, 0xff, 0xff, 0xff};

static char *join_and_sync(struct fx *f)
{
	struct kafka_join_group_protocol proto = {kafka_str("range"),
	                                          {SUBSCRIPTION, (int32_t)sizeof(SUBSCRIPTION)}};
	struct kafka_request rq = rq_of(KAFKA_API_JOIN_GROUP, 5);
	rq.body.join_group = (struct kafka_join_group_request){
	        kafka_str("g"),        10000,  30000, kafka_str(""), KAFKA_STR_NULL,
	        kafka_str("consumer"), &proto, 1,     KAFKA_STR_NULL};
	union kafka_response_body out;
	assert_int_equal(call(f, &rq, &out, 1), BROKER_GROUP_DONE);
	assert_int_equal(out.join_group.error_code, KAFKA_MEMBER_ID_REQUIRED);
	char *id = strndup(out.join_group.member_id.ptr, (size_t)out.join_group.member_id.len);
	rq.body.join_group.member_id = kafka_str(id);
	assert_int_equal(call(f, &rq, &out, 2), BROKER_GROUP_PARKED);
	struct group_reply *r = group_coord_take_reply(&f->core.groups->coord);
	assert_non_null(r);
	assert_int_equal(r->waiter, 2);
	broker_group_reply(r, &rq, &f->arena, &out);
	group_reply_free(r);
	assert_int_equal(out.join_group.error_code, KAFKA_NONE);
	assert_int_equal(out.join_group.generation_id, 1);
	assert_true(kafka_str_eq(out.join_group.leader, id));
	assert_int_equal(out.join_group.member_count, 1);
	static const uint8_t assignment[] = {0, 1, 2, 3};
	struct kafka_sync_group_assignment as = {kafka_str(id), {assignment, 4}};
	rq = rq_of(KAFKA_API_SYNC_GROUP, 3);
	rq.body.sync_group = (struct kafka_sync_group_request){kafka_str("g"),
	                                                       1,
	                                                       kafka_str(id),
	                                                       KAFKA_STR_NULL,
	                                                       KAFKA_STR_NULL,
	                                                       KAFKA_STR_NULL,
	                                                       &as,
	                                                       1};
	assert_int_equal(call(f, &rq, &out, 3), BROKER_GROUP_DONE);
	assert_int_equal(out.sync_group.error_code, KAFKA_NONE);
	assert_int_equal(out.sync_group.assignment.len, 4);
	return id;
}

static void commit(struct fx *f, const char *member, int32_t generation, int32_t partition,
                   int64_t offset, int16_t want)
{
	struct kafka_offset_commit_partition p = {partition, offset, 3, -1, kafka_str("meta")};
	struct kafka_offset_commit_topic t = {kafka_str("t"), &p, 1};
	struct kafka_request rq = rq_of(KAFKA_API_OFFSET_COMMIT, 7);
	rq.body.offset_commit = (struct kafka_offset_commit_request){
	        kafka_str("g"), generation, kafka_str(member), KAFKA_STR_NULL, -1, &t, 1};
	union kafka_response_body out;
	enum broker_group_outcome o = call(f, &rq, &out, 4);
	assert_int_equal(o, want == KAFKA_NONE ? BROKER_GROUP_SYNC : BROKER_GROUP_DONE);
	assert_int_equal(out.offset_commit.topics[0].partitions[0].error_code, want);
}

/* The committed offsets of "t" 0 and 1 (-1: none). */
static void fetched(struct fx *f, int64_t *p0, int64_t *p1)
{
	int32_t parts[] = {0, 1};
	struct kafka_offset_fetch_topic t = {kafka_str("t"), {parts, 2}};
	struct kafka_request rq = rq_of(KAFKA_API_OFFSET_FETCH, 5);
	rq.body.offset_fetch.group_id = kafka_str("g");
	rq.body.offset_fetch.topics = &t;
	rq.body.offset_fetch.topic_count = 1;
	union kafka_response_body out;
	assert_int_equal(call(f, &rq, &out, 5), BROKER_GROUP_DONE);
	assert_int_equal(out.offset_fetch.error_code, KAFKA_NONE);
	assert_int_equal(out.offset_fetch.topics[0].partition_count, 2);
	*p0 = out.offset_fetch.topics[0].partitions[0].committed_offset;
	*p1 = out.offset_fetch.topics[0].partitions[1].committed_offset;
}

static int16_t offset_delete(struct fx *f, int32_t partition)
{
	struct kafka_offset_delete_partition p = {partition};
	struct kafka_offset_delete_topic t = {kafka_str("t"), &p, 1};
	struct kafka_request rq = rq_of(KAFKA_API_OFFSET_DELETE, 0);
	rq.body.offset_delete = (struct kafka_offset_delete_request){kafka_str("g"), &t, 1};
	union kafka_response_body out;
	call(f, &rq, &out, 6);
	assert_int_equal(out.offset_delete.error_code, KAFKA_NONE);
	return out.offset_delete.topics[0].partitions[0].error_code;
}

static void test_find_coordinator(void **state)
{
	struct fx *f = *state;
	struct kafka_str keys[] = {kafka_str("g"), kafka_str("other")};
	struct kafka_request rq = rq_of(KAFKA_API_FIND_COORDINATOR, 4);
	rq.body.find_coordinator.key_type = KAFKA_COORDINATOR_GROUP;
	rq.body.find_coordinator.coordinator_keys = (struct kafka_str_array){keys, 2};
	union kafka_response_body out;
	assert_int_equal(call(f, &rq, &out, 1), BROKER_GROUP_DONE);
	assert_int_equal(out.find_coordinator.coordinator_count, 2);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(out.find_coordinator.coordinators[i].error_code, KAFKA_NONE);
		assert_int_equal(out.find_coordinator.coordinators[i].node_id, NODE);
		assert_int_equal(out.find_coordinator.coordinators[i].port, 9092);
	}
	rq.body.find_coordinator.key_type = KAFKA_COORDINATOR_TRANSACTION;
	assert_int_equal(call(f, &rq, &out, 1), BROKER_GROUP_DONE);
	assert_int_equal(out.find_coordinator.coordinators[0].error_code,
	                 KAFKA_COORDINATOR_NOT_AVAILABLE);
}

static void test_commit_fetch_delete_reload(void **state)
{
	struct fx *f = *state;
	char *id = join_and_sync(f);
	int64_t p0, p1;
	fetched(f, &p0, &p1);
	assert_true(p0 == -1 && p1 == -1);
	commit(f, id, 1, 0, 42, KAFKA_NONE);
	commit(f, id, 1, 1, 7, KAFKA_NONE);
	commit(f, id, 0, 1, 8, KAFKA_ILLEGAL_GENERATION);
	commit(f, "stranger", 1, 1, 8, KAFKA_UNKNOWN_MEMBER_ID);
	fetched(f, &p0, &p1);
	assert_true(p0 == 42 && p1 == 7);
	/* null topics (v2+): every committed offset, grouped by topic */
	struct kafka_request all = rq_of(KAFKA_API_OFFSET_FETCH, 3);
	all.body.offset_fetch.group_id = kafka_str("g");
	all.body.offset_fetch.topic_count = -1;
	union kafka_response_body fo;
	assert_int_equal(call(f, &all, &fo, 9), BROKER_GROUP_DONE);
	assert_int_equal(fo.offset_fetch.topic_count, 1);
	assert_true(kafka_str_eq(fo.offset_fetch.topics[0].name, "t"));
	assert_int_equal(fo.offset_fetch.topics[0].partition_count, 2);
	int64_t sum = fo.offset_fetch.topics[0].partitions[0].committed_offset +
	              fo.offset_fetch.topics[0].partitions[1].committed_offset;
	assert_int_equal(sum, 49);
	/* the group subscribes to "t": its offsets stay */
	assert_int_equal(offset_delete(f, 1), KAFKA_GROUP_SUBSCRIBED_TO_TOPIC);
	struct kafka_member_identity me = {kafka_str(id), KAFKA_STR_NULL, KAFKA_STR_NULL};
	struct kafka_request rq = rq_of(KAFKA_API_LEAVE_GROUP, 3);
	rq.body.leave_group =
	        (struct kafka_leave_group_request){kafka_str("g"), KAFKA_STR_NULL, &me, 1};
	union kafka_response_body out;
	assert_int_equal(call(f, &rq, &out, 7), BROKER_GROUP_DONE);
	assert_int_equal(out.leave_group.members[0].error_code, KAFKA_NONE);
	assert_int_equal(offset_delete(f, 1), KAFKA_NONE);
	fetched(f, &p0, &p1);
	assert_true(p0 == 42 && p1 == -1);
	/* a restart: everything comes back from __consumer_offsets */
	if (broker_core_dirty(&f->core)) {
		broker_core_sync(&f->core);
		broker_core_sync_done(&f->core);
	}
	broker_core_close(&f->core);
	core_open(f);
	assert_true(f->core.groups->coord.group_count == 1);
	fetched(f, &p0, &p1);
	assert_true(p0 == 42 && p1 == -1);
	struct kafka_str name = kafka_str("g");
	rq = rq_of(KAFKA_API_DESCRIBE_GROUPS, 1);
	rq.body.describe_groups = (struct kafka_describe_groups_request){{&name, 1}, false};
	assert_int_equal(call(f, &rq, &out, 8), BROKER_GROUP_DONE);
	assert_true(kafka_str_eq(out.describe_groups.groups[0].group_state, "Empty"));
	assert_true(kafka_str_eq(out.describe_groups.groups[0].protocol_type, "consumer"));
	/* the generation carries on: the next join makes generation 3 (1, then
	 * 2 when the member left) */
	assert_int_equal(group_coord_find(&f->core.groups->coord, "g")->generation, 2);
	free(id);
}

/* Offset expiry through the broker core: nothing before the retention
 * (Kafka's default, 7 days, from the moment the group emptied), then the
 * offsets and the group go, and their tombstones keep them gone across a
 * restart. */
static void test_offsets_expire_and_stay_expired(void **state)
{
	struct fx *f = *state;
	char *id = join_and_sync(f);
	commit(f, id, 1, 0, 42, KAFKA_NONE);
	commit(f, id, 1, 1, 7, KAFKA_NONE);
	struct kafka_member_identity me = {kafka_str(id), KAFKA_STR_NULL, KAFKA_STR_NULL};
	struct kafka_request rq = rq_of(KAFKA_API_LEAVE_GROUP, 3);
	rq.body.leave_group =
	        (struct kafka_leave_group_request){kafka_str("g"), KAFKA_STR_NULL, &me, 1};
	union kafka_response_body out;
	assert_int_equal(call(f, &rq, &out, 7), BROKER_GROUP_DONE);
	int64_t emptied = 1700000000000 + f->now; /* the wall clock `call` gives */
	int64_t retention = broker_offsets_retention_ms(&f->core);
	assert_int_equal(retention, 7LL * 24 * 3600 * 1000);
	broker_groups_tick(&f->core, f->now, emptied + retention - 1);
	assert_int_equal(f->core.groups->expired_offsets, 0);
	int64_t p0, p1;
	fetched(f, &p0, &p1);
	assert_true(p0 == 42 && p1 == 7);
	/* within the check interval: no new pass even though the time is up */
	f->now += BROKER_OFFSETS_RETENTION_CHECK_MS_DEFAULT - 1;
	broker_groups_tick(&f->core, f->now, emptied + retention);
	fetched(f, &p0, &p1);
	assert_true(p0 == 42 && p1 == 7);
	f->now += 1;
	broker_groups_tick(&f->core, f->now, emptied + retention);
	assert_int_equal(f->core.groups->expired_offsets, 2);
	assert_int_equal(f->core.groups->expired_groups, 1);
	assert_null(group_coord_find(&f->core.groups->coord, "g"));
	fetched(f, &p0, &p1);
	assert_true(p0 == -1 && p1 == -1);
	assert_true(broker_core_dirty(&f->core)); /* the tombstones */
	broker_core_sync(&f->core);
	broker_core_sync_done(&f->core);
	broker_core_close(&f->core);
	core_open(f);
	assert_int_equal(f->core.groups->coord.group_count, 0);
	fetched(f, &p0, &p1);
	assert_true(p0 == -1 && p1 == -1);
	free(id);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_find_coordinator, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_commit_fetch_delete_reload, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_offsets_expire_and_stay_expired, setup,
	                                        teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
