/*
 * fuzz_group_records.c — the __consumer_offsets record decoders
 * (src/group/records.c) on arbitrary bytes: the input's first byte says
 * where the key ends and the value starts (the rest is the value; a first
 * byte of 255 makes the value a tombstone); the whole input is also walked
 * as a record batch. Whatever decodes must have its strings inside the
 * arena and a group record must re-encode.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "group/records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_record(void *arg, const uint8_t *key, int32_t key_len, const uint8_t *value,
                      int32_t value_len)
{
	struct keel_arena *arena = arg;
	struct group_record r;
	KEEL_ASSERT(key_len >= -1 && value_len >= -1);
	(void)group_record_decode(key, key_len, value, value_len, arena, &r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0) {
		return 0;
	}
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	size_t split = data[0] == 255 ? size - 1 : KEEL_MIN((size_t)data[0], size - 1);
	const uint8_t *key = data + 1;
	const uint8_t *value = data + 1 + split;
	int32_t value_len = data[0] == 255 ? -1 : (int32_t)(size - 1 - split);
	struct group_record r;
	if (group_record_decode(key, (int32_t)split, value, value_len, &arena, &r) == KEEL_OK) {
		KEEL_ASSERT(r.group_id != NULL);
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 256, 1 << 20);
		if (r.kind == GROUP_RECORD_OFFSET) {
			KEEL_ASSERT(r.topic != NULL);
			group_encode_offset_key(&w, r.group_id, r.topic, r.partition);
			if (!r.tombstone) {
				group_encode_offset_value(&w, r.offset, r.leader_epoch, r.metadata,
				                          r.commit_timestamp_ms);
			}
		} else {
			group_encode_group_key(&w, r.group_id);
		}
		KEEL_ASSERT(keel_wbuf_ok(&w));
		keel_wbuf_free(&w);
	}
	keel_arena_reset(&arena);
	(void)group_batch_records(data, size, on_record, &arena);
	keel_arena_close(&arena);
	return 0;
}
