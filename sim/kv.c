/*
 * kv.c — the simulator's state machine: SIM_KEYS registers of u64.
 *
 * A NORMAL entry carries one write (u8 tag | u64 op id | u32 key | u64
 * value); NOOP entries change nothing; CONFIG entries change the config the
 * state machine records (snapshots carry it). The state hash covers the
 * values only, so two servers at the same applied index must agree on it.
 *
 * Snapshot layout: u32 magic | u64 index | u64 term | u32 config length |
 * config | SIM_KEYS * u64 | u32 crc32c of everything before | padding
 * (0x5a) up to the requested size, so that snapshots span several chunks.
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/buf.h"
#include "base/crc32c.h"
#include "base/hash.h"
#include "sim/sim.h"

#define OP_TAG 0x57
#define SNAP_MAGIC 0x6b73696d

void sim_kv_reset(struct sim_kv *kv)
{
	memset(kv, 0, sizeof(*kv));
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

void sim_kv_apply(struct sim_kv *kv, const struct raft_entry *e)
{
	KEEL_ASSERT(e->index == kv->applied + 1);
	if (e->type == RAFT_ENTRY_NORMAL) {
		struct sim_op_data op;
		bool ok = sim_op_decode(e->data, e->size, &op);
		KEEL_ASSERT(ok);
		kv->values[op.key] = op.value;
	} else if (e->type == RAFT_ENTRY_CONFIG) {
		enum keel_err err = raft_config_decode(e->data, e->size, &kv->config);
		KEEL_ASSERT(err == KEEL_OK);
	}
	kv->applied = e->index;
	kv->applied_term = e->term;
}

uint64_t sim_kv_hash(const struct sim_kv *kv)
{
	uint8_t buf[SIM_KEYS * 8];
	for (size_t i = 0; i < SIM_KEYS; i++) {
		keel_store_be64(buf + i * 8, kv->values[i]);
	}
	return keel_hash_bytes(buf, sizeof(buf), 0x6b65656c);
}

uint8_t *sim_kv_snapshot(const struct sim_kv *kv, size_t pad_to, size_t *size)
{
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, 1u << 20);
	keel_wbuf_u32(&w, SNAP_MAGIC);
	keel_wbuf_u64(&w, kv->applied);
	keel_wbuf_u64(&w, kv->applied_term);
	size_t len_pos = w.size;
	keel_wbuf_u32(&w, 0);
	size_t start = w.size;
	raft_config_encode(&kv->config, &w);
	keel_wbuf_patch_u32(&w, len_pos, (uint32_t)(w.size - start));
	for (size_t i = 0; i < SIM_KEYS; i++) {
		keel_wbuf_u64(&w, kv->values[i]);
	}
	keel_wbuf_u32(&w, keel_crc32c(0, w.data, w.size));
	while (w.size < pad_to) {
		keel_wbuf_u8(&w, 0x5a);
	}
	KEEL_ASSERT(keel_wbuf_ok(&w));
	return keel_wbuf_release(&w, size);
}

bool sim_kv_load(struct sim_kv *kv, const uint8_t *bytes, size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, bytes, size);
	struct sim_kv k;
	sim_kv_reset(&k);
	uint32_t magic = keel_rbuf_u32(&r);
	k.applied = keel_rbuf_u64(&r);
	k.applied_term = keel_rbuf_u64(&r);
	uint32_t config_len = keel_rbuf_u32(&r);
	const uint8_t *config = keel_rbuf_bytes(&r, config_len);
	for (size_t i = 0; i < SIM_KEYS; i++) {
		k.values[i] = keel_rbuf_u64(&r);
	}
	size_t body = r.pos;
	uint32_t crc = keel_rbuf_u32(&r);
	if (!keel_rbuf_ok(&r) || magic != SNAP_MAGIC || crc != keel_crc32c(0, bytes, body)) {
		return false;
	}
	if (raft_config_decode(config, config_len, &k.config) != KEEL_OK) {
		return false;
	}
	*kv = k;
	return true;
}
