/* test_broker_core.c — the broker core on the fault vfs: partitions follow
 * the image, produce is acknowledged only after its sync, fetch serves
 * durable data only, errors per partition, recovery after a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "broker/broker.h"
#include "test_meta_util.h"
#include "test_plog_util.h"

#define NODE 1

struct fx {
	struct keel_rng rng;
	struct wal_vfs vfs;
	struct broker_core core;
	struct keel_arena arena;
	uint8_t batch[4096];
	size_t batch_size;
};

/* Brokers 1 and 2; topic "t" (seed 5): partition 0 led by 1 (replicas 1),
 * partition 1 led by 2 (replicas 2,1), partition 2 led by 2 (replicas 2). */
static void build_image(struct meta_image *img)
{
	static const int32_t r1[] = {1}, r21[] = {2, 1}, r2[] = {2};
	meta_image_init(img, NULL);
	struct meta_record recs[] = {
	        tm_register(1, 1, NULL),
	        tm_register(2, 2, NULL),
	        tm_topic("t", 5),
	        tm_partition(5, 0, r1, 1, r1, 1, 1),
	        tm_partition(5, 1, r21, 2, r21, 2, 2),
	        tm_partition(5, 2, r2, 1, r2, 1, 2),
	        tm_config(META_RESOURCE_BROKER, "", META_CONFIG_CLUSTER_ID, "cluster-x"),
	};
	struct meta_apply_result res;
	struct meta_changes ch;
	meta_changes_init(&ch, 100);
	assert_int_equal(tm_apply(img, 1, 1, recs, 7, &res, &ch), KEEL_OK);
	meta_changes_close(&ch);
}

static void core_open(struct fx *f, struct broker_image_report *rep)
{
	struct broker_config bc = {&f->vfs, "/data", NODE, 8192};
	broker_core_init(&f->core, &bc);
	struct meta_image img;
	build_image(&img);
	broker_core_set_image(&f->core, &img, rep);
	meta_image_close(&img);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	keel_rng_seed(&f->rng, 7);
	struct wal_vfs_fault_config vc = {.rng = &f->rng};
	assert_int_equal(wal_vfs_fault_init(&f->vfs, &vc), KEEL_OK);
	assert_int_equal(wal_vfs_mkdir(&f->vfs, "/data"), KEEL_OK);
	assert_int_equal(wal_vfs_sync_dir(&f->vfs, "/"), KEEL_OK);
	keel_arena_init(&f->arena, 64 * 1024);
	f->batch_size = build_batch(f->batch, sizeof(f->batch), 3, 1000, 10, 20, 'a');
	struct broker_image_report rep;
	core_open(f, &rep);
	/* Partitions 0 (leader) and 1 (follower) are this broker's; 2 is not. */
	assert_int_equal(rep.opened, 2);
	assert_int_equal(rep.failed, 0);
	assert_int_equal(f->core.part_count, 2);
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

/* One produce of `data` to t-<partition>; returns the partition's error
 * after the sync (or before it, when nothing was appended). */
static void produce_start(struct fx *f, int32_t partition, uint8_t *data, size_t size,
                          struct kafka_produce_response *out, struct broker_produce_wait *wait)
{
	struct kafka_produce_partition pp = {partition, {data, (int32_t)size}};
	struct kafka_produce_topic pt = {kafka_str("t"), &pp, 1};
	struct kafka_produce_request rq = {KAFKA_STR_NULL, -1, 1000, &pt, 1};
	keel_arena_reset(&f->arena);
	broker_produce(&f->core, &rq, &f->arena, out, wait);
}

static int16_t produce(struct fx *f, int32_t partition, uint8_t *data, size_t size,
                       int64_t *base_offset, bool sync)
{
	struct kafka_produce_response out;
	struct broker_produce_wait wait;
	produce_start(f, partition, data, size, &out, &wait);
	assert_int_equal(out.topic_count, 1);
	assert_int_equal(out.topics[0].partition_count, 1);
	assert_int_equal(wait.needs_sync, out.topics[0].partitions[0].error_code == KAFKA_NONE);
	assert_int_equal(broker_core_dirty(&f->core), wait.needs_sync);
	if (wait.needs_sync && sync) {
		broker_core_sync(&f->core);
		broker_core_sync_done(&f->core);
		broker_produce_finish(&wait, &out);
	}
	*base_offset = out.topics[0].partitions[0].base_offset;
	return out.topics[0].partitions[0].error_code;
}

static int16_t fetch(struct fx *f, int32_t partition, int64_t offset, int32_t epoch,
                     struct kafka_fetch_partition_data *pd, size_t *bytes)
{
	struct kafka_fetch_partition fp = {partition, epoch, offset, -1, -1, 1 << 20};
	struct kafka_fetch_topic ft = {kafka_str("t"), &fp, 1};
	struct kafka_fetch_request rq;
	memset(&rq, 0, sizeof(rq));
	rq.replica_id = -1;
	rq.max_bytes = 1 << 20;
	rq.topics = &ft;
	rq.topic_count = 1;
	struct kafka_fetch_response out;
	keel_arena_reset(&f->arena);
	broker_fetch(&f->core, &rq, &f->arena, &out, bytes);
	assert_int_equal(out.topic_count, 1);
	*pd = out.topics[0].partitions[0];
	return pd->error_code;
}

static void test_produce_is_served_only_once_durable(void **state)
{
	struct fx *f = *state;
	uint8_t copy[4096];
	memcpy(copy, f->batch, f->batch_size);
	int64_t base = -1;
	assert_int_equal(produce(f, 0, copy, f->batch_size, &base, false), KAFKA_NONE);
	assert_int_equal(base, 0);
	struct kafka_fetch_partition_data pd;
	size_t bytes = 0;
	/* Appended, not synced: invisible to consumers. */
	assert_int_equal(fetch(f, 0, 0, -1, &pd, &bytes), KAFKA_NONE);
	assert_int_equal(bytes, 0);
	assert_int_equal(pd.high_watermark, 0);
	broker_core_sync(&f->core);
	broker_core_sync_done(&f->core);
	assert_false(broker_core_dirty(&f->core));
	assert_int_equal(fetch(f, 0, 0, -1, &pd, &bytes), KAFKA_NONE);
	assert_int_equal(pd.high_watermark, 3);
	assert_int_equal(bytes, f->batch_size);
	assert_int_equal(pd.records.size, (int32_t)f->batch_size);
	/* The same batch, offsets and epoch stamped in place. */
	assert_memory_equal(pd.records.data + 16, f->batch + 16, f->batch_size - 16);
	memcpy(copy, f->batch, f->batch_size);
	assert_int_equal(produce(f, 0, copy, f->batch_size, &base, true), KAFKA_NONE);
	assert_int_equal(base, 3);
	assert_int_equal(fetch(f, 0, 3, -1, &pd, &bytes), KAFKA_NONE);
	assert_int_equal(pd.high_watermark, 6);
	assert_int_equal(fetch(f, 0, 7, -1, &pd, &bytes), KAFKA_OFFSET_OUT_OF_RANGE);
	/* By reference: the second batch's byte range in the first segment. */
	struct kafka_fetch_partition fp[] = {{0, -1, 3, -1, -1, 1 << 20},
	                                     {1, -1, 0, -1, -1, 1 << 20}};
	struct kafka_fetch_topic ft = {kafka_str("t"), fp, 2};
	struct kafka_fetch_request rq;
	memset(&rq, 0, sizeof(rq));
	rq.replica_id = -1; /* a consumer */
	rq.max_bytes = 1 << 20;
	rq.topics = &ft;
	rq.topic_count = 1;
	struct kafka_fetch_response out;
	struct broker_fetch_range *ranges = NULL;
	keel_arena_reset(&f->arena);
	broker_fetch_ranges(&f->core, &rq, &f->arena, &out, &bytes, &ranges);
	assert_non_null(ranges);
	assert_int_equal(bytes, f->batch_size);
	assert_null(out.topics[0].partitions[0].records.data);
	assert_int_equal(out.topics[0].partitions[0].records.size, (int32_t)f->batch_size);
	assert_string_equal(ranges[0].path, "/data/t-0/00000000000000000000.log");
	assert_int_equal(ranges[0].position, f->batch_size);
	assert_int_equal(ranges[0].size, f->batch_size);
	assert_int_equal(out.topics[0].partitions[1].error_code, KAFKA_NOT_LEADER_OR_FOLLOWER);
	assert_int_equal(ranges[1].size, 0);
}

static void test_partition_errors(void **state)
{
	struct fx *f = *state;
	uint8_t copy[4096];
	int64_t base = 0;
	memcpy(copy, f->batch, f->batch_size);
	assert_int_equal(produce(f, 1, copy, f->batch_size, &base, true),
	                 KAFKA_NOT_LEADER_OR_FOLLOWER);
	assert_int_equal(produce(f, 2, copy, f->batch_size, &base, true),
	                 KAFKA_NOT_LEADER_OR_FOLLOWER);
	assert_int_equal(produce(f, 3, copy, f->batch_size, &base, true),
	                 KAFKA_UNKNOWN_TOPIC_OR_PARTITION);
	/* A flipped record byte: the CRC fails, nothing is appended. */
	copy[f->batch_size - 1] ^= 0x5a;
	assert_int_equal(produce(f, 0, copy, f->batch_size, &base, true), KAFKA_CORRUPT_MESSAGE);
	memcpy(copy, f->batch, f->batch_size);
	copy[16] = 1; /* magic 1 */
	assert_int_equal(produce(f, 0, copy, f->batch_size, &base, true),
	                 KAFKA_UNSUPPORTED_FOR_MESSAGE_FORMAT);
	struct broker_partition *p = broker_core_partition(&f->core, kafka_str("t"), 0);
	assert_non_null(p);
	assert_int_equal(plog_log_end_offset(&p->log), 0);
	/* Leader epochs: the image says 0. */
	struct kafka_fetch_partition_data pd;
	size_t bytes;
	assert_int_equal(fetch(f, 0, 0, 0, &pd, &bytes), KAFKA_NONE);
	assert_int_equal(fetch(f, 0, 0, 1, &pd, &bytes), KAFKA_UNKNOWN_LEADER_EPOCH);
	p->leader_epoch = 2;
	assert_int_equal(fetch(f, 0, 0, 1, &pd, &bytes), KAFKA_FENCED_LEADER_EPOCH);
	assert_int_equal(fetch(f, 1, 0, -1, &pd, &bytes), KAFKA_NOT_LEADER_OR_FOLLOWER);
	/* An error partition carries empty records, as Kafka's (size 0): a
	 * null (-1) fails librdkafka 2.0.2's whole Fetch response ("invalid
	 * MessageSetSize -1"), so its consumer never sees the error. */
	assert_null(pd.records.data);
	assert_int_equal(pd.records.size, 0);
}

static void test_failed_sync_is_not_acknowledged(void **state)
{
	struct fx *f = *state;
	uint8_t copy[4096];
	memcpy(copy, f->batch, f->batch_size);
	wal_vfs_fault_fail_nth(&f->vfs, WAL_VFS_OP_SYNC, 1, KEEL_IO);
	int64_t base = 0;
	assert_int_equal(produce(f, 0, copy, f->batch_size, &base, true),
	                 KAFKA_KAFKA_STORAGE_ERROR);
	assert_int_equal(base, -1);
	/* The log is failed (sticky): later produces fail too, reads see nothing. */
	memcpy(copy, f->batch, f->batch_size);
	assert_int_equal(produce(f, 0, copy, f->batch_size, &base, true),
	                 KAFKA_KAFKA_STORAGE_ERROR);
}

static void test_metadata_and_offsets(void **state)
{
	struct fx *f = *state;
	struct kafka_metadata_request mrq = {NULL, -1, false, false, false};
	struct kafka_metadata_response mr;
	keel_arena_reset(&f->arena);
	broker_metadata(&f->core, &mrq, 12, &f->arena, &mr);
	assert_true(kafka_str_eq(mr.cluster_id, "cluster-x"));
	assert_int_equal(mr.topic_count, 1);
	assert_int_equal(mr.topics[0].partition_count, 3);
	assert_int_equal(mr.topics[0].partitions[1].leader_id, 2);
	assert_int_equal(mr.topics[0].partitions[1].replica_nodes.count, 2);
	/* Both brokers are fenced in this image: Kafka lists only live ones,
	 * and their replicas are offline. */
	assert_int_equal(mr.broker_count, 0);
	assert_int_equal(mr.controller_id, -1); /* not a listed broker: none */
	assert_int_equal(mr.topics[0].partitions[0].offline_replicas.count, 1);
	/* Once this broker is unfenced it is listed, and names itself controller. */
	struct meta_image img;
	build_image(&img);
	struct meta_record unfence = tm_broker_ref(META_REC_UNFENCE_BROKER, NODE, 1);
	struct meta_apply_result res;
	struct meta_changes ch;
	meta_changes_init(&ch, 100);
	assert_int_equal(tm_apply(&img, 2, 1, &unfence, 1, &res, &ch), KEEL_OK);
	meta_changes_close(&ch);
	struct broker_image_report rep;
	broker_core_set_image(&f->core, &img, &rep);
	meta_image_close(&img);
	keel_arena_reset(&f->arena);
	broker_metadata(&f->core, &mrq, 12, &f->arena, &mr);
	assert_int_equal(mr.broker_count, 1);
	assert_int_equal(mr.brokers[0].node_id, NODE);
	assert_int_equal(mr.brokers[0].port, 9092);
	assert_int_equal(mr.controller_id, NODE);
	assert_int_equal(mr.topics[0].partitions[0].offline_replicas.count, 0);
	struct kafka_metadata_request_topic want = {{{0}}, kafka_str("nope")};
	mrq.topics = &want;
	mrq.topic_count = 1;
	keel_arena_reset(&f->arena);
	broker_metadata(&f->core, &mrq, 12, &f->arena, &mr);
	assert_int_equal(mr.topics[0].error_code, KAFKA_UNKNOWN_TOPIC_OR_PARTITION);

	uint8_t copy[4096];
	memcpy(copy, f->batch, f->batch_size);
	int64_t base;
	assert_int_equal(produce(f, 0, copy, f->batch_size, &base, true), KAFKA_NONE);
	struct kafka_list_offsets_partition lp[] = {{0, -1, KAFKA_LIST_OFFSETS_EARLIEST},
	                                            {0, -1, KAFKA_LIST_OFFSETS_LATEST},
	                                            {0, -1, 1010},
	                                            {0, -1, 99999},
	                                            {1, -1, KAFKA_LIST_OFFSETS_LATEST}};
	struct kafka_list_offsets_topic lt = {kafka_str("t"), lp, 5};
	struct kafka_list_offsets_request lrq = {-1, 0, &lt, 1};
	struct kafka_list_offsets_response lr;
	keel_arena_reset(&f->arena);
	broker_list_offsets(&f->core, &lrq, &f->arena, &lr);
	const struct kafka_list_offsets_partition_response *r = lr.topics[0].partitions;
	assert_int_equal(r[0].offset, 0);
	assert_int_equal(r[1].offset, 3);
	assert_int_equal(r[2].error_code, KAFKA_NONE);
	assert_int_equal(r[2].offset, 1); /* uncompressed: the record's own offset */
	assert_int_equal(r[2].timestamp, 1010);
	assert_int_equal(r[3].offset, -1);
	assert_int_equal(r[4].error_code, KAFKA_NOT_LEADER_OR_FOLLOWER);
}

static void test_crash_keeps_only_acknowledged(void **state)
{
	struct fx *f = *state;
	uint8_t copy[4096];
	int64_t base;
	memcpy(copy, f->batch, f->batch_size);
	assert_int_equal(produce(f, 0, copy, f->batch_size, &base, true), KAFKA_NONE);
	memcpy(copy, f->batch, f->batch_size);
	assert_int_equal(produce(f, 0, copy, f->batch_size, &base, false), KAFKA_NONE);
	assert_int_equal(base, 3);       /* appended, never acknowledged */
	broker_core_sync_done(&f->core); /* as if the process died mid-sync */
	broker_core_close(&f->core);
	struct wal_vfs_crash crash = {WAL_VFS_CRASH_DROP_UNSYNCED, false};
	wal_vfs_fault_crash(&f->vfs, &crash);
	struct broker_image_report rep;
	core_open(f, &rep);
	assert_int_equal(rep.opened, 2);
	struct kafka_fetch_partition_data pd;
	size_t bytes;
	assert_int_equal(fetch(f, 0, 0, -1, &pd, &bytes), KAFKA_NONE);
	struct broker_partition *p = broker_core_partition(&f->core, kafka_str("t"), 0);
	assert_int_equal(plog_log_end_offset(&p->log), 3);
	assert_int_equal(bytes, f->batch_size);
}

/* An idempotent producer's batch (f->batch with pid, epoch, sequence set). */
static size_t idem(struct fx *f, uint8_t *out, int64_t pid, int16_t epoch, int32_t seq,
                   int16_t attributes)
{
	memcpy(out, f->batch, f->batch_size);
	keel_store_be16(out + 21, (uint16_t)attributes);
	keel_store_be64(out + 43, (uint64_t)pid);
	keel_store_be16(out + 51, (uint16_t)epoch);
	keel_store_be32(out + 53, (uint32_t)seq);
	plog_batch_seal(out, f->batch_size);
	return f->batch_size;
}

/* Produce to t-0; *waits says whether the answer waits for a sync (which
 * runs then). */
static int16_t produce_idem(struct fx *f, uint8_t *data, size_t size, int64_t *base, bool *waits)
{
	struct kafka_produce_response out;
	struct broker_produce_wait wait;
	produce_start(f, 0, data, size, &out, &wait);
	*waits = wait.needs_sync;
	if (wait.needs_sync) {
		broker_core_sync(&f->core);
		broker_core_sync_done(&f->core);
		broker_produce_finish(&wait, &out);
	}
	*base = out.topics[0].partitions[0].base_offset;
	return out.topics[0].partitions[0].error_code;
}

static void note_snapshot(void *arg, const char *name)
{
	*(bool *)arg |= strcmp(name, "00000000000000000009.snapshot") == 0;
}

/* Produces one idempotent batch to t-0 and checks the answer (the base
 * offset and whether it waited for a sync, when it succeeded). */
static void expect_produce(struct fx *f, int64_t pid, int16_t epoch, int32_t seq, int16_t err,
                           int64_t want_base, bool want_wait)
{
	uint8_t b[4096];
	size_t n = idem(f, b, pid, epoch, seq, 0);
	int64_t base;
	bool waits;
	assert_int_equal(produce_idem(f, b, n, &base, &waits), err);
	if (err == KAFKA_NONE) {
		assert_int_equal(base, want_base);
		assert_int_equal(waits, want_wait);
	}
}

static void test_idempotent_produce(void **state)
{
	struct fx *f = *state;
	uint8_t b[4096];
	int64_t base;
	bool waits;
	expect_produce(f, 5000, 0, 0, KAFKA_NONE, 0, true);
	/* A retry: the first offset, nothing appended, no sync needed. */
	expect_produce(f, 5000, 0, 0, KAFKA_NONE, 0, false);
	struct broker_partition *p = broker_core_partition(&f->core, kafka_str("t"), 0);
	assert_int_equal(plog_log_end_offset(&p->log), 3);
	assert_int_equal(f->core.duplicates, 1);

	/* A retry of a batch appended but not yet synced waits for the sync. */
	size_t nb = idem(f, b, 5000, 0, 3, 0);
	struct kafka_produce_response out;
	struct broker_produce_wait wait;
	produce_start(f, 0, b, nb, &out, &wait);
	assert_true(wait.needs_sync);
	expect_produce(f, 5000, 0, 3, KAFKA_NONE, 3, true);
	assert_int_equal(plog_log_end_offset(&p->log), 6);
	assert_int_equal(plog_durable_offset(&p->log), 6);

	/* A gap, a newer epoch not at 0, an old epoch. */
	expect_produce(f, 5000, 0, 9, KAFKA_OUT_OF_ORDER_SEQUENCE_NUMBER, -1, false);
	expect_produce(f, 5000, 1, 6, KAFKA_OUT_OF_ORDER_SEQUENCE_NUMBER, -1, false);
	expect_produce(f, 5000, 1, 0, KAFKA_NONE, 6, true);
	expect_produce(f, 5000, 0, 6, KAFKA_INVALID_PRODUCER_EPOCH, -1, false);
	/* Transactional batches and two batches in one partition are refused. */
	nb = idem(f, b, 6000, 0, 0, PLOG_ATTR_TRANSACTIONAL);
	assert_int_equal(produce_idem(f, b, nb, &base, &waits), KAFKA_INVALID_TXN_STATE);
	nb = idem(f, b, 6000, 0, 0, 0);
	memcpy(b + nb, b, nb);
	assert_int_equal(produce_idem(f, b, 2 * nb, &base, &waits), KAFKA_INVALID_RECORD);
	memcpy(b, f->batch, f->batch_size); /* a plain batch, then an idempotent one */
	assert_int_equal(produce_idem(f, b, 2 * nb, &base, &waits), KAFKA_INVALID_RECORD);
	assert_int_equal(plog_log_end_offset(&p->log), 9);

	/* A clean close leaves a snapshot; after a crash the state is rebuilt
	 * from it and the log. */
	broker_core_close(&f->core);
	bool found = false;
	assert_int_equal(wal_vfs_list(&f->vfs, "/data/t-0", note_snapshot, &found), KEEL_OK);
	assert_true(found);
	struct wal_vfs_crash crash = {WAL_VFS_CRASH_DROP_UNSYNCED, false};
	wal_vfs_fault_crash(&f->vfs, &crash);
	struct broker_image_report rep;
	core_open(f, &rep);
	expect_produce(f, 5000, 0, 3, KAFKA_INVALID_PRODUCER_EPOCH, -1, false);
	expect_produce(f, 5000, 1, 0, KAFKA_NONE, 6, false);
	expect_produce(f, 5000, 1, 3, KAFKA_NONE, 9, true);
}

/* Batches a follower copies (as replication will) are seen when it becomes
 * the leader: the state is rebuilt from the log then. */
static void test_new_leader_rebuilds_from_the_log(void **state)
{
	struct fx *f = *state;
	struct broker_partition *p = broker_core_partition(&f->core, kafka_str("t"), 1);
	assert_non_null(p);
	assert_false(p->leader);
	uint8_t b[4096];
	size_t n = idem(f, b, 7000, 0, 0, 0);
	struct plog_append_info info;
	assert_int_equal(plog_append_follower(&p->log, b, n, &info), KEEL_OK);
	assert_int_equal(plog_sync(&p->log, NULL), KEEL_OK);

	struct meta_image img;
	build_image(&img);
	static const int32_t isr[] = {2, 1};
	struct meta_record pc;
	memset(&pc, 0, sizeof(pc));
	pc.type = META_REC_PARTITION_CHANGE;
	tm_topic_id(pc.partition_change.topic_id, 5);
	pc.partition_change.partition_id = 1;
	pc.partition_change.partition_epoch = 1;
	pc.partition_change.fields = META_PC_LEADER | META_PC_ISR;
	pc.partition_change.leader = NODE;
	pc.partition_change.leader_epoch = 1;
	pc.partition_change.isr = isr;
	pc.partition_change.isr_count = 2;
	struct meta_apply_result res;
	assert_int_equal(tm_apply(&img, 2, 1, &pc, 1, &res, NULL), KEEL_OK);
	assert_int_equal(res.applied, 1);
	struct broker_image_report rep;
	broker_core_set_image(&f->core, &img, &rep);
	meta_image_close(&img);
	assert_true(p->leader);

	struct kafka_produce_response out;
	struct broker_produce_wait wait;
	n = idem(f, b, 7000, 0, 0, 0);
	produce_start(f, 1, b, n, &out, &wait);
	assert_int_equal(out.topics[0].partitions[0].error_code, KAFKA_NONE);
	assert_int_equal(out.topics[0].partitions[0].base_offset, 0);
	/* A retry with acks=all is answered as its original would be: once the
	 * high watermark covers it, which the new leader has not seen yet. */
	assert_true(wait.needs_sync);
	n = idem(f, b, 7000, 0, 5, 0);
	produce_start(f, 1, b, n, &out, &wait);
	assert_int_equal(out.topics[0].partitions[0].error_code,
	                 KAFKA_OUT_OF_ORDER_SEQUENCE_NUMBER);
	n = idem(f, b, 7000, 0, 3, 0);
	produce_start(f, 1, b, n, &out, &wait);
	assert_int_equal(out.topics[0].partitions[0].error_code, KAFKA_NONE);
	assert_int_equal(out.topics[0].partitions[0].base_offset, 3);
	assert_true(wait.needs_sync);
	broker_core_sync(&f->core);
	broker_core_sync_done(&f->core);
}

static void test_init_producer_id_blocks(void **state)
{
	struct fx *f = *state;
	struct kafka_init_producer_id_request rq = {KAFKA_STR_NULL, 60000, -1, -1};
	struct kafka_init_producer_id_response out;
	/* No block yet: the controller must be asked, as broker 1 at epoch 1. */
	assert_false(broker_init_producer_id(&f->core, &rq, &out));
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 1024);
	assert_int_equal(broker_producer_ids_request(&f->core, &w), KEEL_OK);
	struct meta_allocate_producer_ids_request arq;
	assert_int_equal(
	        meta_decode_allocate_producer_ids_request(w.data, w.size, &f->arena, &arq, NULL),
	        KEEL_OK);
	assert_int_equal(arq.broker_id, NODE);
	assert_int_equal(arq.broker_epoch, 1);
	/* The answer installs the block; the ids follow on. */
	struct meta_allocate_producer_ids_response ars = {META_ERR_NONE, NULL, 7000, 3};
	keel_wbuf_reset(&w);
	assert_int_equal(meta_encode_allocate_producer_ids_response(&w, &ars), KEEL_OK);
	broker_producer_ids_reply(&f->core, w.data, w.size, &f->arena, &out);
	assert_int_equal(out.error_code, KAFKA_NONE);
	assert_int_equal(out.producer_id, 7000);
	assert_int_equal(out.producer_epoch, 0);
	assert_true(broker_init_producer_id(&f->core, &rq, &out));
	assert_int_equal(out.producer_id, 7001);
	assert_true(broker_init_producer_id(&f->core, &rq, &out));
	assert_int_equal(out.producer_id, 7002);
	assert_false(broker_init_producer_id(&f->core, &rq, &out));
	/* No answer, or an error: retriable for the client. */
	broker_producer_ids_reply(&f->core, NULL, 0, &f->arena, &out);
	assert_int_equal(out.error_code, KAFKA_COORDINATOR_NOT_AVAILABLE);
	assert_int_equal(out.producer_id, -1);
	ars.error = META_ERR_STALE_BROKER_EPOCH;
	keel_wbuf_reset(&w);
	assert_int_equal(meta_encode_allocate_producer_ids_response(&w, &ars), KEEL_OK);
	broker_producer_ids_reply(&f->core, w.data, w.size, &f->arena, &out);
	assert_int_equal(out.error_code, KAFKA_COORDINATOR_NOT_AVAILABLE);
	keel_wbuf_free(&w);
	/* Transactional ids are refused. */
	rq.transactional_id = kafka_str("tx");
	assert_true(broker_init_producer_id(&f->core, &rq, &out));
	assert_int_equal(out.error_code, KAFKA_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
}

/* OffsetForLeaderEpoch answers from the epoch cache, never past what is
 * durable; a fetch's max_bytes stops after the first batch that exceeds it. */
static void test_epochs_and_fetch_budget(void **state)
{
	struct fx *f = *state;
	uint8_t copy[4096];
	int64_t base;
	for (int i = 0; i < 3; i++) {
		memcpy(copy, f->batch, f->batch_size);
		assert_int_equal(produce(f, 0, copy, f->batch_size, &base, true), KAFKA_NONE);
	}
	memcpy(copy, f->batch, f->batch_size);
	assert_int_equal(produce(f, 0, copy, f->batch_size, &base, false), KAFKA_NONE);
	struct kafka_offset_for_leader_partition lp[] = {{0, -1, 0}, {0, -1, 7}, {1, -1, 0}};
	struct kafka_offset_for_leader_topic lt = {kafka_str("t"), lp, 3};
	struct kafka_offset_for_leader_epoch_request rq = {-1, &lt, 1};
	struct kafka_offset_for_leader_epoch_response out;
	keel_arena_reset(&f->arena);
	broker_offset_for_leader_epoch(&f->core, &rq, &f->arena, &out);
	const struct kafka_epoch_end_offset *r = out.topics[0].partitions;
	assert_int_equal(r[0].error_code, KAFKA_NONE);
	assert_int_equal(r[0].leader_epoch, 0);
	assert_int_equal(r[0].end_offset, 9); /* 12 appended, 9 durable */
	assert_int_equal(r[1].error_code, KAFKA_NONE);
	assert_int_equal(r[2].error_code, KAFKA_NOT_LEADER_OR_FOLLOWER);
	broker_core_sync(&f->core);
	broker_core_sync_done(&f->core);
	/* max_bytes of one byte: still one whole batch, as Kafka does. */
	struct kafka_fetch_partition fp = {0, -1, 0, -1, -1, 1 << 20};
	struct kafka_fetch_topic ft = {kafka_str("t"), &fp, 1};
	struct kafka_fetch_request frq;
	memset(&frq, 0, sizeof(frq));
	frq.replica_id = -1; /* a consumer */
	frq.max_bytes = 1;
	frq.topics = &ft;
	frq.topic_count = 1;
	struct kafka_fetch_response fr;
	size_t bytes = 0;
	keel_arena_reset(&f->arena);
	broker_fetch(&f->core, &frq, &f->arena, &fr, &bytes);
	assert_int_equal(bytes, f->batch_size);
	frq.max_bytes = (int32_t)(2 * f->batch_size);
	keel_arena_reset(&f->arena);
	broker_fetch(&f->core, &frq, &f->arena, &fr, &bytes);
	assert_int_equal(bytes, 2 * f->batch_size);
	assert_int_equal(fr.topics[0].partitions[0].high_watermark, 12);
}

static void test_image_drops_partitions(void **state)
{
	struct fx *f = *state;
	struct meta_image img;
	meta_image_init(&img, NULL);
	struct broker_image_report rep;
	broker_core_set_image(&f->core, &img, &rep);
	meta_image_close(&img);
	assert_int_equal(rep.closed, 2);
	assert_int_equal(f->core.part_count, 0);
	struct kafka_fetch_partition_data pd;
	size_t bytes;
	assert_int_equal(fetch(f, 0, 0, -1, &pd, &bytes), KAFKA_UNKNOWN_TOPIC_OR_PARTITION);
}

/* The test image plus config records (type, name, key, value each). */
static void set_image_with(struct fx *f, struct meta_record *extra, uint32_t n)
{
	struct meta_image img;
	build_image(&img);
	struct meta_apply_result res;
	struct meta_changes ch;
	meta_changes_init(&ch, 100);
	assert_int_equal(tm_apply(&img, 2, 1, extra, n, &res, &ch), KEEL_OK);
	meta_changes_close(&ch);
	struct broker_image_report rep;
	broker_core_set_image(&f->core, &img, &rep);
	meta_image_close(&img);
}

/* 20 batches (timestamps from 1000 ms, i.e. 1970) into t-0. */
static void fill_old_segments(struct fx *f)
{
	uint8_t copy[4096];
	int64_t base;
	for (int i = 0; i < 20; i++) {
		memcpy(copy, f->batch, f->batch_size);
		assert_int_equal(produce(f, 0, copy, f->batch_size, &base, true), KAFKA_NONE);
	}
}

/* Topic configs reach the log (segment.bytes rolls, retention deletes old
 * segments); the topic's own value beats the cluster default, and a
 * compact-only topic is never cut by retention. */
static void test_retention_follows_the_topic_configs(void **state)
{
	struct fx *f = *state;
	const int64_t now = 1700000000000;
	struct meta_record cfg[] = {
	        tm_config(META_RESOURCE_TOPIC, "t", "segment.bytes", "1024"),
	        tm_config(META_RESOURCE_BROKER, "", "retention.ms", "60000"),
	        tm_config(META_RESOURCE_TOPIC, "t", "retention.ms", "-1"),
	};
	set_image_with(f, cfg, 3);
	struct broker_partition *p = broker_core_partition(&f->core, kafka_str("t"), 0);
	assert_int_equal(p->log.config.segment_bytes, 1024);
	assert_int_equal(p->log.config.retention_ms, -1);
	fill_old_segments(f);
	assert_true(p->log.segment_count >= 3);
	uint32_t segments = p->log.segment_count;
	struct broker_retention_report rep;
	broker_core_retain(&f->core, now, &rep);
	assert_int_equal(rep.segments, 0); /* the topic keeps forever */
	assert_int_equal(plog_log_start_offset(&p->log), 0);

	/* Without the topic's own value the cluster default (60 s) applies. */
	struct meta_record compact[] = {
	        tm_config(META_RESOURCE_TOPIC, "t", "retention.ms", NULL),
	        tm_config(META_RESOURCE_TOPIC, "t", "cleanup.policy", "compact"),
	};
	set_image_with(f, cfg, 2);
	assert_int_equal(p->log.config.retention_ms, 60000);
	set_image_with(f, compact, 2);
	broker_core_retain(&f->core, now, &rep);
	assert_int_equal(rep.segments, 0); /* compact only: retention does not cut */

	struct meta_record del[] = {
	        tm_config(META_RESOURCE_TOPIC, "t", "segment.bytes", "1024"),
	        tm_config(META_RESOURCE_BROKER, "", "retention.ms", "60000"),
	        tm_config(META_RESOURCE_TOPIC, "t", "cleanup.policy", "compact,delete"),
	};
	set_image_with(f, del, 3);
	broker_core_retain(&f->core, now, &rep);
	assert_int_equal(rep.segments, segments - 1); /* all but the active one */
	assert_int_equal(rep.partitions, 1);
	assert_int_equal(p->log.segment_count, 1);
	int64_t start = plog_log_start_offset(&p->log);
	assert_true(start > 0);
	struct kafka_fetch_partition_data pd;
	size_t bytes;
	assert_int_equal(fetch(f, 0, 0, -1, &pd, &bytes), KAFKA_OFFSET_OUT_OF_RANGE);
	assert_int_equal(fetch(f, 0, start, -1, &pd, &bytes), KAFKA_NONE);
	assert_true(bytes > 0);
}

/* retention.bytes keeps the newest segments within the size. */
static void test_retention_by_bytes(void **state)
{
	struct fx *f = *state;
	struct meta_record cfg[] = {
	        tm_config(META_RESOURCE_TOPIC, "t", "segment.bytes", "1024"),
	        tm_config(META_RESOURCE_TOPIC, "t", "retention.bytes", "1100"),
	};
	set_image_with(f, cfg, 2);
	fill_old_segments(f);
	struct broker_partition *p = broker_core_partition(&f->core, kafka_str("t"), 0);
	assert_true(plog_size_bytes(&p->log) > 2 * 1100);
	struct broker_retention_report rep;
	broker_core_retain(&f->core, 0, &rep);
	assert_true(rep.segments > 0);
	assert_true(plog_size_bytes(&p->log) < 1100 + 1024);
	assert_true(plog_log_start_offset(&p->log) > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_produce_is_served_only_once_durable, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_partition_errors, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_failed_sync_is_not_acknowledged, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_metadata_and_offsets, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_crash_keeps_only_acknowledged, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_epochs_and_fetch_budget, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_image_drops_partitions, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_retention_follows_the_topic_configs, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_retention_by_bytes, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_idempotent_produce, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_init_producer_id_blocks, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_new_leader_rebuilds_from_the_log, setup,
	                                        teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
