/*
 * fuzz_meta_controller.c — the controller fed whatever requests decode.
 *
 * Input: a sequence of frames `api:u8 advance_ms:u8 size:u16 body[size]`.
 * Each body goes through the request decoder of `api % 10` (the controller
 * APIs plus a tick); what decodes is handed to the controller at a clock
 * that moves by advance_ms * 50. Every batch the controller returns is
 * encoded, decoded and applied to a committed image, like the server does.
 *
 * Checks: no assertion fires (the controller never emits a record its own
 * working image rejects), every batch encodes, no proposed record is ever
 * ignored at apply, the committed image keeps its invariants, and the
 * working image matches it once everything is applied.
 *
 * Three brokers are registered and unfenced first, so that requests about
 * topics and partitions have something to work on.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "meta/controller.h"
#include "meta/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct world {
	struct meta_image committed;
	struct meta_controller ctl;
	struct keel_rng rng;
	int64_t now;
	int64_t offset;
};

static void commit(struct world *w, struct meta_batch *batch)
{
	if (batch == NULL) {
		return;
	}
	batch->hdr.timestamp_ms = w->now;
	struct keel_wbuf buf;
	keel_wbuf_init_dynamic(&buf, 256, 256u << 20);
	KEEL_ASSERT(meta_batch_encode(batch, &buf) == KEEL_OK);
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct meta_batch decoded;
	KEEL_ASSERT(meta_batch_decode(buf.data, buf.size, &arena, &decoded, NULL) == KEEL_OK);
	struct meta_apply_result res;
	w->offset++;
	KEEL_ASSERT(meta_image_apply(&w->committed, w->offset, &decoded, NULL, &res) == KEEL_OK);
	KEEL_ASSERT(res.ignored == 0);
	keel_arena_close(&arena);
	keel_wbuf_free(&buf);
}

static void setup(struct world *w)
{
	memset(w, 0, sizeof(*w));
	meta_image_init(&w->committed, NULL);
	keel_rng_seed(&w->rng, 1);
	w->now = 1000;
	struct meta_controller_config cfg;
	meta_controller_config_default(&cfg);
	cfg.max_partitions_per_topic = 64;
	cfg.rebalance_interval_ms = 5000;
	KEEL_ASSERT(meta_controller_init(&w->ctl, &cfg, 1, 1, &w->committed, &w->rng, w->now) ==
		    KEEL_OK);
	static const struct meta_endpoint ep = {"PLAINTEXT", "h", 9092, META_SEC_PLAINTEXT};
	for (int32_t id = 0; id < 3; id++) {
		struct meta_broker_registration_request req = {.broker_id = id, .endpoints = &ep,
							       .endpoint_count = 1,
							       .previous_broker_epoch = -1};
		req.incarnation_id[0] = (uint8_t)(id + 1);
		struct meta_broker_registration_response resp;
		struct meta_batch *batch;
		KEEL_ASSERT(meta_controller_register_broker(&w->ctl, w->now, &req, &resp, &batch) ==
			    KEEL_OK);
		commit(w, batch);
		struct meta_broker_heartbeat_request hb = {id, resp.broker_epoch, w->offset, false,
							   false};
		struct meta_broker_heartbeat_response hr;
		KEEL_ASSERT(meta_controller_heartbeat(&w->ctl, w->now, &hb, &hr, &batch) == KEEL_OK);
		commit(w, batch);
	}
}

static void one(struct world *w, unsigned api, const uint8_t *body, size_t size,
		struct keel_arena *arena)
{
	struct meta_batch *batch = NULL;
	enum keel_err err = KEEL_OK;
	switch (api % 10) {
	case 0: {
		struct meta_broker_registration_request req;
		struct meta_broker_registration_response resp;
		if (meta_decode_broker_registration_request(body, size, arena, &req, NULL) == KEEL_OK) {
			err = meta_controller_register_broker(&w->ctl, w->now, &req, &resp, &batch);
		}
		break;
	}
	case 1: {
		struct meta_broker_heartbeat_request req;
		struct meta_broker_heartbeat_response resp;
		if (meta_decode_broker_heartbeat_request(body, size, arena, &req, NULL) == KEEL_OK) {
			err = meta_controller_heartbeat(&w->ctl, w->now, &req, &resp, &batch);
		}
		break;
	}
	case 2: {
		struct meta_unregister_broker_request req;
		struct meta_unregister_broker_response resp;
		if (meta_decode_unregister_broker_request(body, size, arena, &req, NULL) == KEEL_OK) {
			err = meta_controller_unregister_broker(&w->ctl, w->now, &req, &resp, &batch);
		}
		break;
	}
	case 3: {
		struct meta_create_topics_request req;
		struct meta_create_topics_response resp;
		if (meta_decode_create_topics_request(body, size, arena, &req, NULL) == KEEL_OK) {
			err = meta_controller_create_topics(&w->ctl, w->now, &req, &resp, &batch);
		}
		break;
	}
	case 4: {
		struct meta_delete_topics_request req;
		struct meta_delete_topics_response resp;
		if (meta_decode_delete_topics_request(body, size, arena, &req, NULL) == KEEL_OK) {
			err = meta_controller_delete_topics(&w->ctl, w->now, &req, &resp, &batch);
		}
		break;
	}
	case 5: {
		struct meta_alter_configs_request req;
		struct meta_alter_configs_response resp;
		if (meta_decode_alter_configs_request(body, size, arena, &req, NULL) == KEEL_OK) {
			err = meta_controller_alter_configs(&w->ctl, w->now, &req, &resp, &batch);
		}
		break;
	}
	case 6: {
		struct meta_alter_partition_request req;
		struct meta_alter_partition_response resp;
		if (meta_decode_alter_partition_request(body, size, arena, &req, NULL) == KEEL_OK) {
			err = meta_controller_alter_partition(&w->ctl, w->now, &req, &resp, &batch);
		}
		break;
	}
	case 7: {
		struct meta_alter_reassignments_request req;
		struct meta_alter_reassignments_response resp;
		if (meta_decode_alter_reassignments_request(body, size, arena, &req, NULL) ==
		    KEEL_OK) {
			err = meta_controller_alter_reassignments(&w->ctl, w->now, &req, &resp,
								  &batch);
		}
		break;
	}
	case 8: {
		struct meta_list_reassignments_request req;
		struct meta_list_reassignments_response resp;
		if (meta_decode_list_reassignments_request(body, size, arena, &req, NULL) ==
		    KEEL_OK) {
			err = meta_controller_list_reassignments(&w->ctl, w->now, &req, &resp,
								 &batch);
		}
		break;
	}
	default:
		err = meta_controller_tick(&w->ctl, w->now, &batch);
		break;
	}
	KEEL_ASSERT(err == KEEL_OK);
	commit(w, batch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct world w;
	setup(&w);
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	size_t pos = 0;
	while (size - pos >= 4) {
		unsigned api = data[pos];
		w.now += (int64_t)data[pos + 1] * 50;
		size_t len = (size_t)data[pos + 2] << 8 | data[pos + 3];
		pos += 4;
		len = len > size - pos ? size - pos : len;
		one(&w, api, data + pos, len, &arena);
		keel_arena_reset(&arena);
		pos += len;
	}
	struct meta_errbuf eb;
	KEEL_ASSERT(meta_image_check(&w.committed, &eb));
	KEEL_ASSERT(meta_image_check(meta_controller_image(&w.ctl), &eb));
	KEEL_ASSERT(w.committed.broker_count == meta_controller_image(&w.ctl)->broker_count);
	KEEL_ASSERT(w.committed.topic_count == meta_controller_image(&w.ctl)->topic_count);
	KEEL_ASSERT(w.committed.partition_total == meta_controller_image(&w.ctl)->partition_total);
	keel_arena_close(&arena);
	meta_controller_close(&w.ctl);
	meta_image_close(&w.committed);
	return 0;
}
