/* test_broker_replica.c — replication in the broker core, on the fault vfs:
 * the high watermark over the ISR, acks=all answers (ISR, min.insync,
 * leadership moves, timeouts), the ISR a leader wants as followers lag and
 * catch up, the AlterPartition it encodes, and a follower that truncates
 * its unreplicated suffix by leader epoch and then fetches the leader's
 * log — two cores talking through the real request/answer functions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "broker/broker.h"
#include "meta/proto.h"
#include "test_meta_util.h"
#include "test_plog_util.h"

struct fx {
	struct keel_rng rng;
	struct wal_vfs vfs;
	struct broker_core a; /* broker 1 */
	struct broker_core b; /* broker 2 */
	struct keel_arena arena;
	struct keel_arena arena2;
	uint8_t batch[4096];
	size_t batch_size;
};

/* The topic's flush.policy in the next images (NULL: unset). */
static const char *image_flush_policy;

/* Brokers 1-3 (active); topic "t" (seed 5), one partition with replicas
 * 1,2,3, the given leader, leader epoch and ISR; min.insync.replicas. */
static void build_image(struct meta_image *img, int32_t leader, int32_t leader_epoch,
                        const int32_t *isr, uint32_t isr_count, const char *min_isr)
{
	static const int32_t r123[] = {1, 2, 3};
	meta_image_init(img, NULL);
	struct meta_record recs[] = {
	        tm_register(1, 1, NULL),
	        tm_register(2, 2, NULL),
	        tm_register(3, 3, NULL),
	        tm_broker_ref(META_REC_UNFENCE_BROKER, 1, 1),
	        tm_broker_ref(META_REC_UNFENCE_BROKER, 2, 2),
	        tm_broker_ref(META_REC_UNFENCE_BROKER, 3, 3),
	        tm_topic("t", 5),
	        tm_partition(5, 0, r123, 3, isr, isr_count, leader),
	        tm_config(META_RESOURCE_TOPIC, "t", "min.insync.replicas", min_isr),
	        tm_config(META_RESOURCE_BROKER, "", "replica.lag.time.max.ms", "1000"),
	        tm_config(META_RESOURCE_TOPIC, "t", "flush.policy", image_flush_policy),
	};
	struct meta_apply_result res;
	struct meta_changes ch;
	meta_changes_init(&ch, 100);
	assert_int_equal(tm_apply(img, 1, 1, recs, image_flush_policy != NULL ? 11 : 10, &res, &ch),
	                 KEEL_OK);
	meta_changes_close(&ch);
	/* Later elections and ISR changes, without replaying them: each image
	 * a new partition epoch, as the controller's changes are. */
	static int32_t partition_epoch;
	img->topics[0]->partitions[0].leader_epoch = leader_epoch;
	img->topics[0]->partitions[0].partition_epoch = ++partition_epoch;
}

static void set_image(struct broker_core *core, int32_t leader, int32_t leader_epoch,
                      const int32_t *isr, uint32_t isr_count, const char *min_isr)
{
	struct meta_image img;
	build_image(&img, leader, leader_epoch, isr, isr_count, min_isr);
	struct broker_image_report rep;
	broker_core_set_image(core, &img, &rep);
	assert_int_equal(rep.failed, 0);
	meta_image_close(&img);
}

static const int32_t isr123[] = {1, 2, 3};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	keel_rng_seed(&f->rng, 11);
	struct wal_vfs_fault_config vc = {.rng = &f->rng};
	assert_int_equal(wal_vfs_fault_init(&f->vfs, &vc), KEEL_OK);
	assert_int_equal(wal_vfs_mkdir(&f->vfs, "/a"), KEEL_OK);
	assert_int_equal(wal_vfs_mkdir(&f->vfs, "/b"), KEEL_OK);
	assert_int_equal(wal_vfs_sync_dir(&f->vfs, "/"), KEEL_OK);
	keel_arena_init(&f->arena, 64 * 1024);
	keel_arena_init(&f->arena2, 64 * 1024);
	f->batch_size = build_batch(f->batch, sizeof(f->batch), 3, 1000, 10, 20, 'a');
	struct broker_config ca = {&f->vfs, "/a", 1, 8192};
	struct broker_config cb = {&f->vfs, "/b", 2, 8192};
	broker_core_init(&f->a, &ca);
	broker_core_init(&f->b, &cb);
	broker_core_set_time(&f->a, 1000);
	broker_core_set_time(&f->b, 1000);
	set_image(&f->a, 1, 0, isr123, 3, "2");
	set_image(&f->b, 1, 0, isr123, 3, "2");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	image_flush_policy = NULL;
	broker_core_close(&f->a);
	broker_core_close(&f->b);
	keel_arena_close(&f->arena);
	keel_arena_close(&f->arena2);
	wal_vfs_fault_close(&f->vfs);
	free(f);
	return 0;
}

/* A produce of one 3-record batch to t-0 on `core`, synced. */
struct produce {
	uint8_t data[4096];
	struct kafka_produce_partition pp;
	struct kafka_produce_topic pt;
	struct kafka_produce_request rq;
	struct kafka_produce_response out;
	struct broker_produce_wait wait;
};

static int16_t produce(struct fx *f, struct broker_core *core, struct produce *p, int16_t acks)
{
	memcpy(p->data, f->batch, f->batch_size);
	p->pp = (struct kafka_produce_partition){0, {p->data, (int32_t)f->batch_size}};
	p->pt = (struct kafka_produce_topic){kafka_str("t"), &p->pp, 1};
	p->rq = (struct kafka_produce_request){KAFKA_STR_NULL, acks, 1000, &p->pt, 1};
	broker_produce(core, &p->rq, &f->arena2, &p->out, &p->wait);
	if (p->wait.needs_sync) {
		broker_core_sync(core);
		broker_core_sync_done(core);
		broker_produce_finish(&p->wait, &p->out);
	}
	return p->out.topics[0].partitions[0].error_code;
}

/* A fetch of t-0 from `offset` at `epoch` on the leader core, as
 * replica_id: the partition's error code; *hw its high watermark. */
static int16_t fetch_as(struct fx *f, struct broker_core *leader, int32_t replica_id,
                        int64_t offset, int32_t epoch, int64_t *hw)
{
	struct kafka_fetch_partition fp = {0, epoch, offset, -1, -1, 1 << 20};
	struct kafka_fetch_topic ft = {kafka_str("t"), &fp, 1};
	struct kafka_fetch_request rq;
	memset(&rq, 0, sizeof(rq));
	rq.replica_id = replica_id;
	rq.max_bytes = 1 << 20;
	rq.topics = &ft;
	rq.topic_count = 1;
	struct kafka_fetch_response out;
	size_t bytes = 0;
	keel_arena_reset(&f->arena);
	broker_fetch(leader, &rq, &f->arena, &out, &bytes);
	*hw = out.topics[0].partitions[0].high_watermark;
	return out.topics[0].partitions[0].error_code;
}

/* A follower's fetch, which must succeed: the high watermark it learns. */
static int64_t follower_fetch(struct fx *f, struct broker_core *leader, int32_t replica_id,
                              int64_t offset, int32_t epoch)
{
	int64_t hw = -1;
	assert_int_equal(fetch_as(f, leader, replica_id, offset, epoch, &hw), KAFKA_NONE);
	return hw;
}

static void test_hw_is_the_isr_minimum_and_acks_all_waits(void **state)
{
	struct fx *f = *state;
	struct broker_partition *p = broker_core_partition(&f->a, kafka_str("t"), 0);
	assert_non_null(p);
	assert_true(p->leader);
	struct produce pr;
	assert_int_equal(produce(f, &f->a, &pr, -1), KAFKA_NONE);
	assert_true(pr.wait.needs_isr);
	/* Durable on the leader only: not acknowledged, not visible. */
	assert_int_equal(p->high_watermark, 0);
	assert_false(broker_produce_acked(&f->a, &pr.rq, &pr.wait, &pr.out, false));
	/* Broker 2 has it: still waiting for 3 (in the ISR, not heard from). */
	assert_int_equal(follower_fetch(f, &f->a, 2, 3, 0), 0);
	assert_false(broker_produce_acked(&f->a, &pr.rq, &pr.wait, &pr.out, false));
	f->a.hw_moved = false;
	assert_int_equal(follower_fetch(f, &f->a, 3, 3, 0), 3);
	assert_true(f->a.hw_moved);
	assert_true(broker_produce_acked(&f->a, &pr.rq, &pr.wait, &pr.out, false));
	assert_int_equal(pr.out.topics[0].partitions[0].error_code, KAFKA_NONE);
	assert_int_equal(pr.out.topics[0].partitions[0].base_offset, 0);
	/* acks=1 is answered after the leader's sync alone. */
	struct produce one;
	assert_int_equal(produce(f, &f->a, &one, 1), KAFKA_NONE);
	assert_false(one.wait.needs_isr);
	assert_int_equal(p->high_watermark, 3); /* the followers are at 3 */
	/* A fetch from a broker that is not a replica is refused. */
	int64_t hw = -1;
	assert_int_equal(fetch_as(f, &f->a, 9, 0, 0, &hw), KAFKA_NOT_LEADER_OR_FOLLOWER);
}

static void test_acks_all_errors(void **state)
{
	struct fx *f = *state;
	static const int32_t isr1[] = {1}, isr12[] = {1, 2};
	/* ISR below min.insync.replicas: refused before the append. */
	set_image(&f->a, 1, 0, isr1, 1, "2");
	struct produce pr;
	assert_int_equal(produce(f, &f->a, &pr, -1), KAFKA_NOT_ENOUGH_REPLICAS);
	assert_false(pr.wait.needs_sync);
	assert_int_equal(produce(f, &f->a, &pr, 1), KAFKA_NONE); /* acks=1 goes on */
	/* The ISR shrinks below it while a produce waits. */
	set_image(&f->a, 1, 0, isr12, 2, "2");
	assert_int_equal(produce(f, &f->a, &pr, -1), KAFKA_NONE);
	assert_false(broker_produce_acked(&f->a, &pr.rq, &pr.wait, &pr.out, false));
	set_image(&f->a, 1, 0, isr1, 1, "2");
	assert_true(broker_produce_acked(&f->a, &pr.rq, &pr.wait, &pr.out, false));
	assert_int_equal(pr.out.topics[0].partitions[0].error_code,
	                 KAFKA_NOT_ENOUGH_REPLICAS_AFTER_APPEND);
	/* Leadership moves while it waits: never success. */
	set_image(&f->a, 1, 0, isr12, 2, "1");
	assert_int_equal(produce(f, &f->a, &pr, -1), KAFKA_NONE);
	set_image(&f->a, 2, 1, isr12, 2, "1");
	assert_true(broker_produce_acked(&f->a, &pr.rq, &pr.wait, &pr.out, false));
	assert_int_equal(pr.out.topics[0].partitions[0].error_code, KAFKA_NOT_LEADER_OR_FOLLOWER);
	assert_int_equal(pr.out.topics[0].partitions[0].base_offset, -1);
	/* Its own leader again at a later epoch: a produce from the earlier
	 * epoch fails too; one that times out gets REQUEST_TIMED_OUT. */
	set_image(&f->a, 1, 2, isr12, 2, "1");
	assert_int_equal(produce(f, &f->a, &pr, -1), KAFKA_NONE);
	assert_false(broker_produce_acked(&f->a, &pr.rq, &pr.wait, &pr.out, false));
	assert_true(broker_produce_acked(&f->a, &pr.rq, &pr.wait, &pr.out, true));
	assert_int_equal(pr.out.topics[0].partitions[0].error_code, KAFKA_REQUEST_TIMED_OUT);
	assert_int_equal(produce(f, &f->a, &pr, -1), KAFKA_NONE);
	set_image(&f->a, 1, 3, isr12, 2, "1");
	assert_true(broker_produce_acked(&f->a, &pr.rq, &pr.wait, &pr.out, false));
	assert_int_equal(pr.out.topics[0].partitions[0].error_code, KAFKA_NOT_LEADER_OR_FOLLOWER);
}

/* The same produce with f->batch made an idempotent producer's batch
 * (3 records: sequences seq..seq+2). */
static int16_t produce_seq(struct fx *f, struct broker_core *core, struct produce *p, int64_t pid,
                           int32_t seq)
{
	uint8_t saved[4096];
	memcpy(saved, f->batch, f->batch_size);
	keel_store_be64(f->batch + 43, (uint64_t)pid);
	keel_store_be16(f->batch + 51, 0);
	keel_store_be32(f->batch + 53, (uint32_t)seq);
	plog_batch_seal(f->batch, f->batch_size);
	int16_t err = produce(f, core, p, -1);
	memcpy(f->batch, saved, f->batch_size);
	return err;
}

/* The fault run that killed librdkafka 2.0.2 (issue 15): the producer had
 * batches 0, 3 and 6 in flight to a new leader whose ISR was short. The
 * first got NOT_ENOUGH_REPLICAS; the second was read only after the ISR
 * had grown back (it waited behind another partition's acks=all produce on
 * the same connection). Answered OUT_OF_ORDER_SEQUENCE_NUMBER, it is fatal
 * to a client whose next expected sequence had moved past it (librdkafka
 * before 2.3.0 advances it on a "possibly persisted" error such as a lost
 * connection); answered like the batch it follows, the client retries
 * both in order and nothing is lost or written twice. */
static void test_idempotent_batch_after_one_refused_for_the_isr(void **state)
{
	struct fx *f = *state;
	static const int32_t isr1[] = {1}, isr12[] = {1, 2};
	struct broker_partition *p = broker_core_partition(&f->a, kafka_str("t"), 0);
	struct produce pr;
	assert_int_equal(produce_seq(f, &f->a, &pr, 42, 0), KAFKA_NONE);
	set_image(&f->a, 1, 0, isr1, 1, "2");
	assert_int_equal(produce_seq(f, &f->a, &pr, 42, 3), KAFKA_NOT_ENOUGH_REPLICAS);
	set_image(&f->a, 1, 0, isr12, 2, "2");
	/* Batch 6 after the refused 3: refused the same way, not out of order. */
	assert_int_equal(produce_seq(f, &f->a, &pr, 42, 6), KAFKA_NOT_ENOUGH_REPLICAS);
	assert_false(pr.wait.needs_sync);
	assert_int_equal(plog_log_end_offset(&p->log), 3);
	/* The retries in order: both written, once. */
	assert_int_equal(produce_seq(f, &f->a, &pr, 42, 3), KAFKA_NONE);
	assert_int_equal(pr.out.topics[0].partitions[0].base_offset, 3);
	assert_int_equal(produce_seq(f, &f->a, &pr, 42, 6), KAFKA_NONE);
	assert_int_equal(pr.out.topics[0].partitions[0].base_offset, 6);
	assert_int_equal(produce_seq(f, &f->a, &pr, 42, 3), KAFKA_NONE); /* a retry */
	assert_int_equal(pr.out.topics[0].partitions[0].base_offset, 3);
	assert_int_equal(plog_log_end_offset(&p->log), 9);
	/* Once the refused batch is written, a real gap is out of order again. */
	assert_int_equal(produce_seq(f, &f->a, &pr, 42, 12), KAFKA_OUT_OF_ORDER_SEQUENCE_NUMBER);
	/* Refused again at 9: a later batch is answered the same way; another
	 * producer is not concerned. */
	set_image(&f->a, 1, 0, isr1, 1, "2");
	assert_int_equal(produce_seq(f, &f->a, &pr, 42, 9), KAFKA_NOT_ENOUGH_REPLICAS);
	set_image(&f->a, 1, 0, isr12, 2, "2");
	assert_int_equal(produce_seq(f, &f->a, &pr, 42, 15), KAFKA_NOT_ENOUGH_REPLICAS);
	assert_int_equal(produce_seq(f, &f->a, &pr, 43, 5), KAFKA_NONE); /* another producer */
	/* A new leader epoch forgets it (the state is rebuilt from the log). */
	set_image(&f->a, 1, 1, isr12, 2, "2");
	assert_int_equal(produce_seq(f, &f->a, &pr, 42, 15), KAFKA_OUT_OF_ORDER_SEQUENCE_NUMBER);
	assert_int_equal(produce_seq(f, &f->a, &pr, 42, 9), KAFKA_NONE);
}

/* Decodes an encoded AlterPartition request's one item. */
static void decode_alter(struct fx *f, struct keel_wbuf *w, struct meta_alter_partition_request *rq)
{
	keel_arena_reset(&f->arena);
	assert_int_equal(meta_decode_alter_partition_request(w->data, w->size, &f->arena, rq, NULL),
	                 KEEL_OK);
	assert_int_equal(rq->broker_id, 1);
	assert_int_equal(rq->broker_epoch, 7);
	assert_int_equal(rq->topic_count, 1);
	assert_int_equal(rq->topics[0].partition_count, 1);
}

static void test_isr_follows_lag(void **state)
{
	struct fx *f = *state;
	struct broker_partition *p = broker_core_partition(&f->a, kafka_str("t"), 0);
	int32_t want[META_MAX_REPLICAS];
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, 1 << 20);
	struct produce pr;
	assert_int_equal(produce(f, &f->a, &pr, 1), KAFKA_NONE);
	/* Within replica.lag.time.max.ms (1000) of becoming leader: all in. */
	broker_core_set_time(&f->a, 1900);
	assert_int_equal(broker_replica_wanted_isr(&f->a, p, want), 3);
	assert_false(broker_replica_isr_request(&f->a, 7, 2000, &f->arena2, &w));
	/* 2 keeps up, 3 never fetches: 3 goes after the lag time. */
	follower_fetch(f, &f->a, 2, 3, 0);
	broker_core_set_time(&f->a, 2100);
	assert_int_equal(broker_replica_wanted_isr(&f->a, p, want), 2);
	assert_int_equal(want[0], 1);
	assert_int_equal(want[1], 2);
	assert_true(broker_replica_isr_request(&f->a, 7, 2000, &f->arena2, &w));
	assert_int_equal(f->a.stats.isr_shrinks, 1);
	struct meta_alter_partition_request rq;
	decode_alter(f, &w, &rq);
	const struct meta_alter_partition_item *it = &rq.topics[0].partitions[0];
	assert_int_equal(it->partition_id, 0);
	assert_int_equal(it->leader_epoch, 0);
	assert_int_equal(it->partition_epoch, p->partition_epoch);
	assert_int_equal(it->new_isr_count, 2);
	assert_int_equal(it->leader_recovery_state, META_RECOVERED);
	/* The leader's ISR stays the image's until the next image. */
	assert_int_equal(p->isr_count, 3);
	/* Asked once: not again before the resend time. */
	keel_wbuf_reset(&w);
	assert_false(broker_replica_isr_request(&f->a, 7, 2000, &f->arena2, &w));
	/* The controller agrees (the next image); 3 comes back once it
	 * reaches the high watermark. */
	static const int32_t isr12[] = {1, 2};
	set_image(&f->a, 1, 0, isr12, 2, "2");
	assert_int_equal(p->isr_count, 2);
	assert_int_equal(broker_replica_wanted_isr(&f->a, p, want), 2);
	follower_fetch(f, &f->a, 3, 0, 0); /* behind the high watermark (3) */
	assert_int_equal(broker_replica_wanted_isr(&f->a, p, want), 2);
	follower_fetch(f, &f->a, 3, 3, 0);
	assert_int_equal(broker_replica_wanted_isr(&f->a, p, want), 3);
	keel_wbuf_reset(&w);
	assert_true(broker_replica_isr_request(&f->a, 7, 2000, &f->arena2, &w));
	decode_alter(f, &w, &rq);
	assert_int_equal(rq.topics[0].partitions[0].new_isr_count, 3);
	assert_int_equal(f->a.stats.isr_expands, 1);
	keel_wbuf_free(&w);
}

/* Sends b's next request to a (leader 1) and applies a's answer on b. */
static bool replicate_once(struct fx *f, struct broker_replica_report *rep)
{
	struct kafka_request req;
	keel_arena_reset(&f->arena2);
	if (!broker_replica_request(&f->b, 1, 0, &f->arena2, &req)) {
		return false;
	}
	keel_arena_reset(&f->arena);
	if (req.header.api_key == KAFKA_API_OFFSET_FOR_LEADER_EPOCH) {
		struct kafka_offset_for_leader_epoch_response out;
		broker_offset_for_leader_epoch(&f->a, &req.body.offset_for_leader_epoch, &f->arena,
		                               &out);
		broker_replica_epoch_answer(&f->b, 1, &req.body.offset_for_leader_epoch, &out, rep);
		return true;
	}
	assert_int_equal(req.header.api_key, KAFKA_API_FETCH);
	assert_int_equal(req.body.fetch.replica_id, 2);
	struct kafka_fetch_response out;
	size_t bytes = 0;
	broker_fetch(&f->a, &req.body.fetch, &f->arena, &out, &bytes);
	broker_replica_fetch_answer(&f->b, 1, &req.body.fetch, &out, rep);
	if (broker_core_dirty(&f->b)) {
		broker_core_sync(&f->b);
		broker_core_sync_done(&f->b);
	}
	return true;
}

static void test_follower_truncates_by_epoch_then_fetches(void **state)
{
	struct fx *f = *state;
	struct broker_replica_report rep;
	/* Epoch 0: broker 1 leads; 2 and 3 replicate 3 records. */
	struct produce pr;
	assert_int_equal(produce(f, &f->a, &pr, 1), KAFKA_NONE);
	assert_true(replicate_once(f, &rep)); /* OffsetForLeaderEpoch: empty log, nothing to cut */
	assert_true(replicate_once(f, &rep)); /* Fetch: offsets 0-2 */
	assert_int_equal(rep.appended_partitions, 1);
	struct broker_partition *pb = broker_core_partition(&f->b, kafka_str("t"), 0);
	assert_int_equal(plog_log_end_offset(&pb->log), 3);
	/* Epoch 1: broker 2 leads and appends 6 records nobody copies. */
	set_image(&f->b, 2, 1, isr123, 3, "1");
	assert_true(pb->leader);
	assert_int_equal(produce(f, &f->b, &pr, 1), KAFKA_NONE);
	assert_int_equal(produce(f, &f->b, &pr, 1), KAFKA_NONE);
	assert_int_equal(plog_log_end_offset(&pb->log), 9);
	/* Epoch 2: broker 1 leads again (it never saw epoch 1) and appends. */
	set_image(&f->a, 1, 2, isr123, 3, "1");
	assert_int_equal(produce(f, &f->a, &pr, 1), KAFKA_NONE);
	struct broker_partition *pa = broker_core_partition(&f->a, kafka_str("t"), 0);
	assert_int_equal(plog_log_end_offset(&pa->log), 6);
	/* Broker 2 follows: asks for its last epoch (1); broker 1 answers with
	 * epoch 0 ending at 3, so 2 cuts offsets 3-8 — not at its high
	 * watermark, and not keeping epoch 1's records at 3-5. */
	set_image(&f->b, 1, 2, isr123, 3, "1");
	assert_false(pb->leader);
	assert_int_equal(pb->follow, BROKER_FOLLOW_TRUNCATE);
	assert_true(replicate_once(f, &rep));
	assert_int_equal(rep.truncated_partitions, 1);
	assert_int_equal(plog_log_end_offset(&pb->log), 3);
	assert_int_equal(f->b.stats.truncated_offsets, 6);
	assert_int_equal(pb->follow, BROKER_FOLLOW_FETCH);
	/* Then it fetches the leader's epoch 2 records at 3-5. */
	assert_true(replicate_once(f, &rep));
	assert_int_equal(plog_log_end_offset(&pb->log), 6);
	assert_int_equal(plog_epochs_latest(&pb->log.epochs), 2);
	assert_int_equal(plog_check(&pb->log), KEEL_OK);
	/* Byte for byte the leader's log. */
	uint8_t la[8192], lb[8192];
	struct plog_read_result ra, rb;
	assert_int_equal(plog_read(&pa->log, 0, 6, sizeof(la), &ra), KEEL_OK);
	assert_int_equal(plog_read(&pb->log, 0, 6, sizeof(lb), &rb), KEEL_OK);
	assert_int_equal(ra.size, rb.size);
	assert_int_equal(plog_read_copy(&pa->log, &ra, la), KEEL_OK);
	assert_int_equal(plog_read_copy(&pb->log, &rb, lb), KEEL_OK);
	assert_memory_equal(la, lb, ra.size);
	/* Its fetch offset (6, durable) is what the leader counts. */
	assert_true(replicate_once(f, &rep));
	assert_int_equal(pa->progress[1].log_end_offset, 6);
	/* An older leader epoch is fenced, a newer one unknown; neither
	 * counts as progress. */
	int64_t hw = -1;
	assert_int_equal(fetch_as(f, &f->a, 2, 4, 1, &hw), KAFKA_FENCED_LEADER_EPOCH);
	assert_int_equal(fetch_as(f, &f->a, 2, 4, 3, &hw), KAFKA_UNKNOWN_LEADER_EPOCH);
	assert_int_equal(pa->progress[1].log_end_offset, 6);
}

/* KIP-704: the leader of an unclean election asks for RECOVERED. */
static void test_recovering_leader_asks_for_recovered(void **state)
{
	struct fx *f = *state;
	static const int32_t isr1[] = {1};
	struct meta_image img;
	build_image(&img, 1, 4, isr1, 1, "1");
	img.topics[0]->partitions[0].leader_recovery_state = META_RECOVERING;
	struct broker_image_report rep;
	broker_core_set_image(&f->a, &img, &rep);
	meta_image_close(&img);
	struct broker_partition *p = broker_core_partition(&f->a, kafka_str("t"), 0);
	assert_int_equal(p->recovery_state, META_RECOVERING);
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, 1 << 20);
	assert_true(broker_replica_isr_request(&f->a, 7, 2000, &f->arena2, &w));
	struct meta_alter_partition_request rq;
	decode_alter(f, &w, &rq);
	const struct meta_alter_partition_item *it = &rq.topics[0].partitions[0];
	assert_int_equal(it->leader_recovery_state, META_RECOVERED);
	assert_int_equal(it->leader_epoch, 4);
	assert_int_equal(it->new_isr_count, 1);
	assert_int_equal(it->new_isr[0], 1);
	keel_wbuf_free(&w);
}

static void test_flush_policy_replication_reports_unsynced_data(void **state)
{
	struct fx *f = *state;
	struct broker_replica_report rep;
	image_flush_policy = "replication";
	set_image(&f->a, 1, 0, isr123, 3, "2");
	set_image(&f->b, 1, 0, isr123, 3, "2");
	struct broker_partition *pb = broker_core_partition(&f->b, kafka_str("t"), 0);
	assert_true(pb->replication_flush);
	struct produce pr;
	assert_int_equal(produce(f, &f->a, &pr, -1), KAFKA_NONE);
	assert_true(replicate_once(f, &rep)); /* OffsetForLeaderEpoch */
	assert_true(replicate_once(f, &rep)); /* Fetch: appended, not synced */
	assert_int_equal(rep.appended_partitions, 1);
	assert_false(broker_core_dirty(&f->b));
	assert_int_equal(plog_log_end_offset(&pb->log), 3);
	assert_int_equal(plog_durable_offset(&pb->log), 0);
	/* Its next fetch reports the log end, which the leader counts. */
	assert_true(replicate_once(f, &rep));
	struct broker_partition *pa = broker_core_partition(&f->a, kafka_str("t"), 0);
	assert_int_equal(pa->progress[1].log_end_offset, 3);
	/* Made leader, it syncs before its own end counts. */
	set_image(&f->b, 2, 1, isr123, 3, "2");
	assert_true(broker_core_dirty(&f->b));
	assert_int_equal(pb->high_watermark, 0);
}

/* The test image with the given ISR plus a throttle: `side` is "follower"
 * or "leader", the rate is set on broker `broker`, the replicas list on t. */
static void set_image_throttle(struct broker_core *core, const int32_t *isr, uint32_t isr_count,
                               const char *side, const char *broker, const char *rate,
                               const char *replicas)
{
	char rate_key[64], replicas_key[64];
	snprintf(rate_key, sizeof(rate_key), "%s.replication.throttled.rate", side);
	snprintf(replicas_key, sizeof(replicas_key), "%s.replication.throttled.replicas", side);
	struct meta_image img;
	build_image(&img, 1, 0, isr, isr_count, "2");
	struct meta_record recs[] = {
	        tm_config(META_RESOURCE_BROKER, broker, rate_key, rate),
	        tm_config(META_RESOURCE_TOPIC, "t", replicas_key, replicas),
	};
	struct meta_apply_result res;
	struct meta_changes ch;
	meta_changes_init(&ch, 100);
	assert_int_equal(tm_apply(&img, 2, 1, recs, 2, &res, &ch), KEEL_OK);
	meta_changes_close(&ch);
	struct broker_image_report rep;
	broker_core_set_image(core, &img, &rep);
	meta_image_close(&img);
}

/* The test image plus a follower throttle on broker 2. */
static void set_image_throttled(struct broker_core *core, const char *rate, const char *replicas)
{
	set_image_throttle(core, isr123, 3, "follower", "2", rate, replicas);
}

/* follower.replication.throttled.rate / .replicas: a throttled follower
 * fetches at most a quarter second of the rate at a time, and after the
 * bytes it fetched waits size / rate before it fetches again; a replica
 * not in the list is not held back. */
static void test_follower_throttle(void **state)
{
	struct fx *f = *state;
	struct broker_replica_report rep;
	set_image_throttled(&f->b, "1000", "0:3,0:2");
	struct broker_partition *pb = broker_core_partition(&f->b, kafka_str("t"), 0);
	assert_true(pb->throttled);
	assert_int_equal(f->b.throttle_rate, 1000);
	struct produce pr;
	for (int i = 0; i < 12; i++) { /* more than 1024 bytes */
		assert_int_equal(produce(f, &f->a, &pr, 1), KAFKA_NONE);
	}
	assert_true(replicate_once(f, &rep)); /* OffsetForLeaderEpoch */
	struct kafka_request req;
	keel_arena_reset(&f->arena2);
	assert_true(broker_replica_request(&f->b, 1, 0, &f->arena2, &req));
	assert_int_equal(req.body.fetch.topics[0].partitions[0].partition_max_bytes, 1024);
	assert_true(replicate_once(f, &rep)); /* a fetch: one batch at least */
	assert_true(rep.appended_bytes > 0 && rep.appended_bytes <= 1024);
	uint64_t first = rep.appended_bytes;
	int64_t wait = (int64_t)first * 1000 / 1000;
	/* Held back now: nothing to ask, and the wait says for how long. */
	keel_arena_reset(&f->arena2);
	assert_false(broker_replica_request(&f->b, 1, 0, &f->arena2, &req));
	assert_int_equal(broker_replica_throttle_wait_ms(&f->b, 1), wait);
	broker_core_set_time(&f->b, 1000 + wait);
	assert_int_equal(broker_replica_throttle_wait_ms(&f->b, 1), 0);
	assert_true(replicate_once(f, &rep));
	assert_true(rep.appended_bytes > 0);
	assert_int_equal(f->b.throttled_bytes, first + rep.appended_bytes);
	/* Another broker's replica in the list, not this one: no throttle. */
	set_image_throttled(&f->b, "1000", "0:3");
	assert_false(pb->throttled);
	keel_arena_reset(&f->arena2);
	assert_true(broker_replica_request(&f->b, 1, 0, &f->arena2, &req));
	assert_int_equal(req.body.fetch.topics[0].partitions[0].partition_max_bytes, 1 << 20);
}

/* The test image (ISR 1,2: broker 3 catching up) plus a leader throttle on
 * broker 1 for the partition-broker pairs `replicas`. */
static void set_image_leader_throttled(struct broker_core *core, const char *rate,
                                       const char *replicas)
{
	static const int32_t isr12[] = {1, 2};
	set_image_throttle(core, isr12, 2, "leader", "1", rate, replicas);
}

/* A fetch of t-0 from `offset` as replica_id waiting up to 500 ms: the
 * record bytes the leader answers with (no error). */
static size_t fetched_bytes(struct fx *f, int32_t replica_id, int64_t offset)
{
	struct kafka_fetch_partition fp = {0, 0, offset, -1, -1, 1 << 20};
	struct kafka_fetch_topic ft = {kafka_str("t"), &fp, 1};
	struct kafka_fetch_request rq;
	memset(&rq, 0, sizeof(rq));
	rq.replica_id = replica_id;
	rq.max_wait_ms = 500;
	rq.max_bytes = 1 << 20;
	rq.topics = &ft;
	rq.topic_count = 1;
	struct kafka_fetch_response out;
	size_t bytes = 0;
	keel_arena_reset(&f->arena);
	broker_fetch(&f->a, &rq, &f->arena, &out, &bytes);
	assert_int_equal(out.topics[0].partitions[0].error_code, KAFKA_NONE);
	return bytes;
}

/* leader.replication.throttled.rate / .replicas: the leader answers a
 * throttled follower outside the ISR with at most the rate's worth over
 * its wait, then nothing until bytes / rate has passed; a follower in the
 * ISR, or a pair naming another broker, is not held back. */
static void test_leader_throttle(void **state)
{
	struct fx *f = *state;
	set_image_leader_throttled(&f->a, "4000", "0:1");
	struct broker_partition *pa = broker_core_partition(&f->a, kafka_str("t"), 0);
	assert_true(pa->leader_throttled);
	assert_int_equal(f->a.leader_throttle_rate, 4000);
	struct produce pr;
	for (int i = 0; i < 40; i++) { /* more than 2000 bytes */
		assert_int_equal(produce(f, &f->a, &pr, 1), KAFKA_NONE);
	}
	size_t all = fetched_bytes(f, 2, 0); /* in the ISR: everything */
	size_t first = fetched_bytes(f, 3, 0);
	assert_true(first > 0 && first <= 2000); /* 4000 B/s over 500 ms */
	assert_true(first < all);
	assert_int_equal(fetched_bytes(f, 3, 0), 0); /* spent: nothing */
	assert_int_equal(fetched_bytes(f, 2, 0), all);
	int64_t wait = (int64_t)first * 1000 / 4000;
	broker_core_set_time(&f->a, 1000 + wait - 1);
	assert_int_equal(fetched_bytes(f, 3, 0), 0);
	broker_core_set_time(&f->a, 1000 + wait);
	size_t second = fetched_bytes(f, 3, 0);
	assert_true(second > 0);
	assert_int_equal(f->a.leader_throttled_bytes, first + second);
	/* The pair names another broker as leader: not throttled here. */
	set_image_leader_throttled(&f->a, "4000", "0:2");
	assert_false(pa->leader_throttled);
	assert_int_equal(fetched_bytes(f, 3, 0), all);
	/* No rate: not throttled either. */
	set_image_leader_throttled(&f->a, "0", "*");
	assert_true(pa->leader_throttled);
	assert_int_equal(fetched_bytes(f, 3, 0), all);
}

/* Closes broker 1's core and starts it again on the same files. */
static void restart_a(struct fx *f)
{
	broker_core_close(&f->a);
	struct broker_config ca = {&f->vfs, "/a", 1, 8192};
	broker_core_init(&f->a, &ca);
	broker_core_set_time(&f->a, 2000);
}

/* Restarts broker 1 as t-0's leader at a new epoch, with the checkpoint as
 * it is on disk; `load` is what reading it gave. The high watermark a
 * consumer sees then, before any follower has fetched. */
static int64_t hw_after_restart(struct fx *f, enum keel_err load)
{
	restart_a(f);
	uint32_t n = 0;
	char why[256];
	assert_int_equal(broker_hw_checkpoint_load(&f->a, &n, why, sizeof(why)), load);
	assert_int_equal(n, load == KEEL_OK ? 1 : 0);
	set_image(&f->a, 1, 1, isr123, 3, "2");
	assert_null(f->a.hw_restored); /* used by the first image only */
	int64_t hw = -1;
	assert_int_equal(fetch_as(f, &f->a, -1, 0, 1, &hw), KAFKA_NONE);
	struct broker_partition *p = broker_core_partition(&f->a, kafka_str("t"), 0);
	assert_int_equal(p->high_watermark, hw);
	return hw;
}

static void store_checkpoint(struct fx *f, struct keel_wbuf *w)
{
	char errmsg[WAL_VFS_ERRMSG_SIZE];
	assert_int_equal(broker_hw_checkpoint_encode(&f->a, w), KEEL_OK);
	assert_int_equal(broker_hw_checkpoint_store(&f->vfs, "/a", w->data, w->size, errmsg),
	                 KEEL_OK);
}

/* The high-watermark checkpoint: it round-trips and every damage to it is
 * refused; a restarted leader starts from the checkpointed high watermark
 * (capped at its log end) instead of 0, and without a checkpoint, or with
 * a corrupt one, from 0 as before. */
static void test_hw_checkpoint_restores_the_high_watermark(void **state)
{
	struct fx *f = *state;
	struct broker_partition *p = broker_core_partition(&f->a, kafka_str("t"), 0);
	struct produce pr;
	assert_int_equal(produce(f, &f->a, &pr, 1), KAFKA_NONE);
	assert_int_equal(produce(f, &f->a, &pr, 1), KAFKA_NONE);
	follower_fetch(f, &f->a, 2, 6, 0);
	assert_int_equal(follower_fetch(f, &f->a, 3, 6, 0), 6);
	assert_int_equal(p->high_watermark, 6);
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 1 << 20);
	store_checkpoint(f, &w);
	struct broker_hw_entry *e = NULL;
	uint32_t n = 0;
	char why[256];
	assert_int_equal(broker_hw_checkpoint_decode(w.data, w.size, &e, &n, why, sizeof(why)),
	                 KEEL_OK);
	assert_int_equal(n, 1);
	assert_int_equal(e[0].partition, 0);
	assert_int_equal(e[0].high_watermark, 6);
	assert_memory_equal(e[0].topic_id, p->topic_id, 16);
	free(e);
	for (size_t cut = 0; cut < w.size; cut++) {
		assert_int_equal(broker_hw_checkpoint_decode(w.data, cut, &e, &n, why, sizeof(why)),
		                 KEEL_CORRUPT);
		assert_null(e);
	}
	for (size_t at = 0; at < w.size; at++) {
		w.data[at] ^= 0x10;
		assert_int_equal(broker_hw_checkpoint_decode(w.data, w.size, &e, &n, why, sizeof(why)),
		                 KEEL_CORRUPT);
		w.data[at] ^= 0x10;
	}
	assert_int_equal(hw_after_restart(f, KEEL_OK), 6);
	/* A checkpoint above the log (the log lost its tail) is capped. */
	p = broker_core_partition(&f->a, kafka_str("t"), 0);
	p->high_watermark = 100;
	store_checkpoint(f, &w);
	assert_int_equal(hw_after_restart(f, KEEL_OK), 6);
	/* Without one, or with a corrupt one: from 0, as before. */
	assert_int_equal(wal_vfs_unlink(&f->vfs, "/a/" BROKER_HW_CHECKPOINT_FILE), KEEL_OK);
	assert_int_equal(hw_after_restart(f, KEEL_NOENT), 0);
	char errmsg[WAL_VFS_ERRMSG_SIZE];
	assert_int_equal(broker_hw_checkpoint_store(&f->vfs, "/a", "nonsense!!!!!!!!", 16, errmsg),
	                 KEEL_OK);
	assert_int_equal(hw_after_restart(f, KEEL_CORRUPT), 0);
	keel_wbuf_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_hw_is_the_isr_minimum_and_acks_all_waits,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_acks_all_errors, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_idempotent_batch_after_one_refused_for_the_isr,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_isr_follows_lag, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_follower_truncates_by_epoch_then_fetches,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_flush_policy_replication_reports_unsynced_data,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_follower_throttle, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_leader_throttle, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_hw_checkpoint_restores_the_high_watermark, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_recovering_leader_asks_for_recovered, setup,
	                                        teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
