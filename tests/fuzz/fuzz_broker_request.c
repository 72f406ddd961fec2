/*
 * fuzz_broker_request.c — whole Kafka request frames through the broker
 * core (src/broker), as the shell hands them over: decode, answer from a
 * core with a topic "t" (partitions 0 and 1 led by this broker, 2 by
 * another) on the fault vfs, sync what a produce appended, encode the
 * response. The response must always encode, and the partition logs must
 * always pass plog_check (no input leaves a log corrupt). The core is
 * rebuilt every FUZZ_BROKER_REBUILD_EVERY inputs so that the logs stay small.
 * InitProducerId gets blocks from a stand-in controller; the ids it
 * answers must keep rising. Group requests go to the group coordinator,
 * whose offsets partition (__consumer_offsets-0) is led here too; a parked
 * JoinGroup/SyncGroup is encoded when its delayed answer comes.
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "broker/groups.h"
#include "fuzz_broker.h"
#include "../unit/test_meta_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fuzz_broker fx;

static void build(void)
{
	fuzz_broker_open(&fx, 1);
	static const int32_t r1[] = {1}, r2[] = {2};
	struct meta_record recs[] = {
	        tm_register(1, 1, NULL),
	        tm_broker_ref(META_REC_UNFENCE_BROKER, 1, 1),
	        tm_register(2, 2, "r2"),
	        tm_topic("t", 5),
	        tm_partition(5, 0, r1, 1, r1, 1, 1),
	        tm_partition(5, 1, r1, 1, r1, 1, 1),
	        tm_partition(5, 2, r2, 1, r2, 1, 2),
	        tm_config(META_RESOURCE_TOPIC, "t", "retention.ms", "1000"),
	        tm_topic("__consumer_offsets", 6),
	        tm_partition(6, 0, r1, 1, r1, 1, 1),
	};
	struct meta_image img;
	meta_image_init(&img, NULL);
	struct meta_apply_result res;
	struct meta_changes ch;
	meta_changes_init(&ch, 100);
	KEEL_ASSERT(tm_apply(&img, 1, 1, recs, 10, &res, &ch) == KEEL_OK);
	meta_changes_close(&ch);
	struct broker_image_report rep;
	broker_core_set_image(&fx.core, &img, &rep);
	meta_image_close(&img);
	KEEL_ASSERT(rep.opened == 3);
	fx.ready = true;
}

/* InitProducerId, with a stand-in controller handing out blocks in order:
 * the ids answered must keep rising (none given twice). */
static void init_producer_id(struct kafka_request *rq, struct keel_arena *a,
                             union kafka_response_body *out)
{
	static int64_t next_block, last_id = -1;
	struct broker_core *core = &fx.core;
	if (!broker_init_producer_id(core, &rq->body.init_producer_id, &out->init_producer_id)) {
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 64, 1024);
		KEEL_ASSERT(broker_producer_ids_request(core, &w) == KEEL_OK);
		keel_wbuf_reset(&w);
		struct meta_allocate_producer_ids_response rs = {META_ERR_NONE, NULL, next_block,
		                                                 META_PRODUCER_ID_BLOCK};
		next_block += META_PRODUCER_ID_BLOCK;
		KEEL_ASSERT(meta_encode_allocate_producer_ids_response(&w, &rs) == KEEL_OK);
		broker_producer_ids_reply(core, w.data, w.size, a, &out->init_producer_id);
		keel_wbuf_free(&w);
	}
	if (out->init_producer_id.error_code == KAFKA_NONE) {
		KEEL_ASSERT(out->init_producer_id.producer_id > last_id);
		last_id = out->init_producer_id.producer_id;
	}
}

/* The group APIs; false when the request stays parked (no answer yet). */
static bool answer_group(struct kafka_request *rq, struct keel_arena *a,
                         union kafka_response_body *out)
{
	struct broker_core *core = &fx.core;
	struct broker_produce_wait wait;
	int64_t now = (int64_t)fx.inputs * 1000;
	struct broker_group_ctx ctx = {now, now, fx.inputs + 1, "127.0.0.1"};
	enum broker_group_outcome o = broker_group_request(core, &ctx, rq, a, out, &wait);
	broker_groups_tick(core, now, now);
	if (broker_core_dirty(core)) {
		broker_core_sync(core);
		broker_core_sync_done(core);
	}
	if (o == BROKER_GROUP_SYNC) {
		broker_group_finish(core, rq, &wait, out);
	}
	bool answered = o != BROKER_GROUP_PARKED;
	struct group_reply *r;
	while ((r = group_coord_take_reply(&core->groups->coord)) != NULL) {
		if (r->waiter == ctx.waiter && !answered) {
			broker_group_reply(r, rq, a, out);
			answered = true;
		}
		group_reply_free(r);
	}
	return answered;
}

/* false: no answer to encode (a parked group request). */
static bool answer(struct kafka_request *rq, struct keel_arena *a, union kafka_response_body *out)
{
	struct broker_core *core = &fx.core;
	size_t bytes = 0;
	struct broker_produce_wait wait;
	if (broker_groups_handles(rq->header.api_key)) {
		return answer_group(rq, a, out);
	}
	switch (rq->header.api_key) {
	case KAFKA_API_API_VERSIONS:
		broker_api_versions(core, a, &out->api_versions);
		return true;
	case KAFKA_API_METADATA:
		broker_metadata(core, &rq->body.metadata, rq->header.api_version, a,
		                &out->metadata);
		return true;
	case KAFKA_API_PRODUCE:
		broker_produce(core, &rq->body.produce, a, &out->produce, &wait);
		if (wait.needs_sync) {
			KEEL_ASSERT(broker_core_dirty(core));
			broker_core_sync(core);
			broker_core_sync_done(core);
			broker_produce_finish(&wait, &out->produce);
		}
		if (wait.needs_isr) {
			/* A one-replica ISR: the sync alone covers acks=all. */
			KEEL_ASSERT(broker_produce_acked(core, &rq->body.produce, &wait,
			                                 &out->produce, false));
		}
		KEEL_ASSERT(!broker_core_dirty(core));
		return true;
	case KAFKA_API_FETCH:
		broker_fetch(core, &rq->body.fetch, a, &out->fetch, &bytes);
		return true;
	case KAFKA_API_LIST_OFFSETS:
		broker_list_offsets(core, &rq->body.list_offsets, a, &out->list_offsets);
		return true;
	case KAFKA_API_OFFSET_FOR_LEADER_EPOCH:
		broker_offset_for_leader_epoch(core, &rq->body.offset_for_leader_epoch, a,
		                               &out->offset_for_leader_epoch);
		return true;
	case KAFKA_API_DESCRIBE_CONFIGS:
		broker_describe_configs(core, &rq->body.describe_configs, a,
		                        &out->describe_configs);
		return true;
	case KAFKA_API_DESCRIBE_CLUSTER:
		broker_describe_cluster(core, a, &out->describe_cluster);
		return true;
	case KAFKA_API_INIT_PRODUCER_ID:
		init_producer_id(rq, a, out);
		return true;
	default: {
		KEEL_ASSERT(broker_api_is_forwarded(rq->header.api_key));
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 256, 1 << 24);
		enum meta_api api;
		enum keel_err err = broker_admin_request(core, rq, a, &w, &api);
		KEEL_ASSERT(err == KEEL_OK || err == KEEL_UNSUPPORTED || err == KEEL_INVAL ||
		            err == KEEL_TOOBIG);
		keel_wbuf_free(&w);
		broker_admin_response(rq, NULL, 0, KAFKA_REQUEST_TIMED_OUT, a, out);
		return true;
	}
	}
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
	/* The core rewrites produced records in place: give it a copy. */
	uint8_t *frame = malloc(size > 0 ? size : 1);
	memcpy(frame, data, size);
	struct kafka_request *rq = malloc(sizeof(*rq));
	union kafka_response_body *out = malloc(sizeof(*out));
	if (kafka_decode_request(frame, size, &arena, &limits, rq, NULL) == KEEL_OK &&
	    kafka_api_in_sets(rq->header.api_key, BROKER_API_SETS) && answer(rq, &arena, out)) {
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 256, 1 << 26);
		KEEL_ASSERT(kafka_encode_response(&w, rq->header.correlation_id, rq->header.api_key,
		                                  rq->header.api_version, out, NULL, 0,
		                                  NULL) == KEEL_OK);
		keel_wbuf_free(&w);
		for (uint32_t i = 0; i < fx.core.part_count; i++) {
			KEEL_ASSERT(plog_check(&fx.core.parts[i]->log) == KEEL_OK);
		}
	}
	free(out);
	free(rq);
	free(frame);
	keel_arena_close(&arena);
	fuzz_broker_input_done(&fx);
	return 0;
}
