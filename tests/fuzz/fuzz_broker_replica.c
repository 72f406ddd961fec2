/*
 * fuzz_broker_replica.c — a leader's answers, as bytes off the network,
 * through a follower's core (src/broker/replica.c): the follower builds its
 * next request (OffsetForLeaderEpoch while it must truncate, else Fetch),
 * the input is decoded as the answer body to it and applied, what was
 * appended is synced. Whatever the leader says, the follower's logs must
 * pass plog_check, and its high watermark stays within its log. The
 * follower starts with batches of its own at epoch 0 (it led then), so
 * truncation has something to cut; the core is rebuilt every
 * FUZZ_BROKER_REBUILD_EVERY inputs.
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "fuzz_broker.h"
#include "../unit/test_meta_util.h"
#include "fuzz_batch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fuzz_broker fx;

/* Topic "t": partitions 0 and 1, replicas 1,2, led by `leader` at `epoch`. */
static void set_image(int32_t leader, int32_t epoch)
{
	static const int32_t r12[] = {1, 2};
	struct meta_record recs[] = {
	        tm_register(1, 1, NULL),
	        tm_broker_ref(META_REC_UNFENCE_BROKER, 1, 1),
	        tm_register(2, 2, NULL),
	        tm_broker_ref(META_REC_UNFENCE_BROKER, 2, 2),
	        tm_topic("t", 5),
	        tm_partition(5, 0, r12, 2, r12, 2, leader),
	        tm_partition(5, 1, r12, 2, r12, 2, leader),
	};
	struct meta_image img;
	meta_image_init(&img, NULL);
	struct meta_apply_result res;
	struct meta_changes ch;
	meta_changes_init(&ch, 100);
	KEEL_ASSERT(tm_apply(&img, 1, 1, recs, 7, &res, &ch) == KEEL_OK);
	meta_changes_close(&ch);
	img.topics[0]->partitions[0].leader_epoch = epoch;
	img.topics[0]->partitions[1].leader_epoch = epoch;
	struct broker_image_report rep;
	broker_core_set_image(&fx.core, &img, &rep);
	meta_image_close(&img);
	KEEL_ASSERT(rep.failed == 0);
}

static void sync_core(void)
{
	if (broker_core_dirty(&fx.core)) {
		broker_core_sync(&fx.core);
		broker_core_sync_done(&fx.core);
	}
}

static void build(void)
{
	fuzz_broker_open(&fx, 2);
	/* Epoch 0: this broker leads and appends to partition 0. */
	set_image(2, 0);
	uint8_t batch[80];
	for (int i = 0; i < 3; i++) {
		size_t n = fuzz_tiny_batch(batch);
		struct kafka_produce_partition pp = {0, {batch, (int32_t)n}};
		struct kafka_produce_topic pt = {kafka_str("t"), &pp, 1};
		struct kafka_produce_request rq = {KAFKA_STR_NULL, 1, 1000, &pt, 1};
		struct kafka_produce_response out;
		struct broker_produce_wait wait;
		struct keel_arena a;
		keel_arena_init(&a, 4096);
		broker_produce(&fx.core, &rq, &a, &out, &wait);
		sync_core();
		keel_arena_close(&a);
	}
	/* Epoch 3: broker 1 leads; this one follows and must truncate first. */
	set_image(1, 3);
	fx.ready = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!fx.ready) {
		build();
	}
	struct kafka_limits limits;
	kafka_limits_default(&limits);
	limits.max_array_count = 4096;
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct kafka_request *rq = malloc(sizeof(*rq));
	union kafka_response_body *out = malloc(sizeof(*out));
	KEEL_ASSERT(!broker_core_dirty(&fx.core));
	if (broker_replica_request(&fx.core, 1, 500, &arena, rq) &&
	    kafka_decode_body(data, size, rq->header.api_key, rq->header.api_version, true, &arena,
	                      &limits, out, NULL) == KEEL_OK) {
		struct broker_replica_report rep;
		if (rq->header.api_key == KAFKA_API_FETCH) {
			broker_replica_fetch_answer(&fx.core, 1, &rq->body.fetch, &out->fetch,
			                            &rep);
		} else {
			broker_replica_epoch_answer(&fx.core, 1, &rq->body.offset_for_leader_epoch,
			                            &out->offset_for_leader_epoch, &rep);
		}
		sync_core();
		for (uint32_t i = 0; i < fx.core.part_count; i++) {
			struct broker_partition *p = fx.core.parts[i];
			KEEL_ASSERT(plog_check(&p->log) == KEEL_OK);
			KEEL_ASSERT(p->high_watermark <= plog_log_end_offset(&p->log));
		}
	}
	free(out);
	free(rq);
	keel_arena_close(&arena);
	fuzz_broker_input_done(&fx);
	return 0;
}
