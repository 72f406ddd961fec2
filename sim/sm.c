/*
 * sm.c — the simulator's state machine: SIM_KEYS registers of u64 and, in
 * controller mode, the cluster metadata image (src/meta).
 *
 * A NORMAL entry carries either one register write (u8 tag 0x57 | u64 op
 * id | u32 key | u64 value) or one metadata record batch (u8 tag 0x4d |
 * meta_batch_encode bytes), applied by ctl.c; NOOP entries change nothing;
 * CONFIG entries change the config the state machine records (snapshots
 * carry it). The state hash covers the registers and the image (the
 * image's own canonical hash), so two servers at the same applied index
 * must agree on it.
 *
 * Snapshot layout: u32 magic | u64 index | u64 term | u32 config length |
 * config | SIM_KEYS * u64 | u32 image length | image (meta_image_save, 0
 * bytes outside controller mode) | u32 crc32c of everything before |
 * padding (0x5a) up to the run's snapshot size, so that snapshots span
 * several chunks.
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/buf.h"
#include "base/crc32c.h"
#include "base/hash.h"
#include "meta/image.h"
#include "sim/sim.h"

#define OP_TAG 0x57
#define SNAP_MAGIC 0x6b73696e
#define MAX_IMAGE_BYTES (8u << 20)

void sim_sm_reset(struct sim *s, struct sim_sm *sm)
{
	struct meta_image *image = sm->image;
	memset(sm, 0, sizeof(*sm));
	if (s->cfg.controller) {
		if (image == NULL) {
			image = malloc(sizeof(*image));
			KEEL_ASSERT(image != NULL);
			meta_image_init(image, NULL);
		} else {
			meta_image_clear(image);
		}
		sm->image = image;
		sm->image_hash = meta_image_hash(image);
	} else {
		KEEL_ASSERT(image == NULL);
	}
}

void sim_sm_free(struct sim_sm *sm)
{
	if (sm->image != NULL) {
		meta_image_close(sm->image);
		free(sm->image);
		sm->image = NULL;
	}
}

void sim_op_encode(const struct sim_op_data *op, uint8_t out[SIM_OP_BYTES])
{
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, out, SIM_OP_BYTES);
	keel_wbuf_u8(&w, OP_TAG);
	keel_wbuf_u64(&w, op->op_id);
	keel_wbuf_u32(&w, op->key);
	keel_wbuf_u64(&w, op->value);
	KEEL_ASSERT(keel_wbuf_ok(&w) && w.size == SIM_OP_BYTES);
}

bool sim_op_decode(const uint8_t *data, size_t size, struct sim_op_data *op)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, data, size);
	uint8_t tag = keel_rbuf_u8(&r);
	op->op_id = keel_rbuf_u64(&r);
	op->key = keel_rbuf_u32(&r);
	op->value = keel_rbuf_u64(&r);
	return keel_rbuf_done(&r) && tag == OP_TAG && op->key < SIM_KEYS;
}

void sim_sm_apply(struct sim *s, struct sim_node *n, const struct raft_entry *e)
{
	struct sim_sm *sm = &n->sm;
	KEEL_ASSERT(e->index == sm->applied + 1);
	if (e->type == RAFT_ENTRY_NORMAL && e->size > 0 && e->data[0] == SIM_META_TAG) {
		KEEL_ASSERT(sm->image != NULL);
		sim_ctl_apply(s, n, e);
	} else if (e->type == RAFT_ENTRY_NORMAL) {
		struct sim_op_data op;
		bool ok = sim_op_decode(e->data, e->size, &op);
		KEEL_ASSERT(ok);
		sm->values[op.key] = op.value;
	} else if (e->type == RAFT_ENTRY_CONFIG) {
		enum keel_err err = raft_config_decode(e->data, e->size, &sm->config);
		KEEL_ASSERT(err == KEEL_OK);
	}
	sm->applied = e->index;
	sm->applied_term = e->term;
}

uint64_t sim_sm_hash(const struct sim_sm *sm)
{
	uint8_t buf[SIM_KEYS * 8 + 8];
	for (size_t i = 0; i < SIM_KEYS; i++) {
		keel_store_be64(buf + i * 8, sm->values[i]);
	}
	keel_store_be64(buf + SIM_KEYS * 8, sm->image_hash);
	return keel_hash_bytes(buf, sizeof(buf), 0x6b65656c);
}

uint8_t *sim_sm_snapshot(struct sim *s, const struct sim_sm *sm, size_t *size)
{
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, MAX_IMAGE_BYTES + (1u << 20));
	keel_wbuf_u32(&w, SNAP_MAGIC);
	keel_wbuf_u64(&w, sm->applied);
	keel_wbuf_u64(&w, sm->applied_term);
	size_t len_pos = w.size;
	keel_wbuf_u32(&w, 0);
	size_t start = w.size;
	raft_config_encode(&sm->config, &w);
	keel_wbuf_patch_u32(&w, len_pos, (uint32_t)(w.size - start));
	for (size_t i = 0; i < SIM_KEYS; i++) {
		keel_wbuf_u64(&w, sm->values[i]);
	}
	size_t image_size = 0;
	uint8_t *image = NULL;
	if (sm->image != NULL) {
		enum keel_err err = KEEL_OK;
		image = meta_image_save_to_memory(sm->image, MAX_IMAGE_BYTES, &image_size, &err);
		KEEL_ASSERT(image != NULL && err == KEEL_OK);
	}
	keel_wbuf_u32(&w, (uint32_t)image_size);
	keel_wbuf_bytes(&w, image, image_size);
	free(image);
	keel_wbuf_u32(&w, keel_crc32c(0, w.data, w.size));
	while (w.size < s->snapshot_pad) {
		keel_wbuf_u8(&w, 0x5a);
	}
	KEEL_ASSERT(keel_wbuf_ok(&w));
	return keel_wbuf_release(&w, size);
}

bool sim_sm_load(struct sim *s, struct sim_sm *sm, const uint8_t *bytes, size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, bytes, size);
	uint32_t magic = keel_rbuf_u32(&r);
	uint64_t applied = keel_rbuf_u64(&r);
	uint64_t applied_term = keel_rbuf_u64(&r);
	uint32_t config_len = keel_rbuf_u32(&r);
	const uint8_t *config = keel_rbuf_bytes(&r, config_len);
	uint64_t values[SIM_KEYS];
	for (size_t i = 0; i < SIM_KEYS; i++) {
		values[i] = keel_rbuf_u64(&r);
	}
	uint32_t image_size = keel_rbuf_u32(&r);
	const uint8_t *image = keel_rbuf_bytes(&r, image_size);
	size_t body = r.pos;
	uint32_t crc = keel_rbuf_u32(&r);
	if (!keel_rbuf_ok(&r) || magic != SNAP_MAGIC || crc != keel_crc32c(0, bytes, body)) {
		return false;
	}
	struct raft_config decoded;
	if (raft_config_decode(config, config_len, &decoded) != KEEL_OK) {
		return false;
	}
	if ((image_size > 0) != s->cfg.controller) {
		return false;
	}
	sim_sm_reset(s, sm);
	if (sm->image != NULL) {
		struct meta_errbuf eb;
		if (meta_image_load_from_memory(sm->image, image, image_size, &eb) != KEEL_OK) {
			return false;
		}
		sm->image_hash = meta_image_hash(sm->image);
	}
	sm->applied = applied;
	sm->applied_term = applied_term;
	sm->config = decoded;
	memcpy(sm->values, values, sizeof(values));
	return true;
}
