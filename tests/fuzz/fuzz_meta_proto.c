/*
 * fuzz_meta_proto.c — every broker-facing request/response decoder.
 *
 * Input: the first byte picks the message (mod 28), the rest is its body.
 * Whatever decodes must re-encode to exactly the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "meta/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TRY(name)                                                                            \
	do {                                                                                 \
		struct meta_##name m;                                                        \
		if (meta_decode_##name(body, body_size, &arena, &m, NULL) == KEEL_OK) {      \
			struct keel_wbuf w;                                                  \
			keel_wbuf_init_dynamic(&w, 64, body_size + 64);                      \
			KEEL_ASSERT(meta_encode_##name(&w, &m) == KEEL_OK);                  \
			KEEL_ASSERT(w.size == body_size);                                    \
			KEEL_ASSERT(memcmp(w.data, body, body_size) == 0);                   \
			keel_wbuf_free(&w);                                                  \
		}                                                                            \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1) {
		return 0;
	}
	const uint8_t *body = data + 1;
	size_t body_size = size - 1;
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	switch (data[0] % 28) {
	case 0: TRY(broker_registration_request); break;
	case 1: TRY(broker_registration_response); break;
	case 2: TRY(broker_heartbeat_request); break;
	case 3: TRY(broker_heartbeat_response); break;
	case 4: TRY(unregister_broker_request); break;
	case 5: TRY(unregister_broker_response); break;
	case 6: TRY(create_topics_request); break;
	case 7: TRY(create_topics_response); break;
	case 8: TRY(delete_topics_request); break;
	case 9: TRY(delete_topics_response); break;
	case 10: TRY(alter_configs_request); break;
	case 11: TRY(alter_configs_response); break;
	case 12: TRY(alter_partition_request); break;
	case 13: TRY(alter_partition_response); break;
	case 14: TRY(describe_cluster_request); break;
	case 15: TRY(describe_cluster_response); break;
	case 16: TRY(fetch_metadata_request); break;
	case 17: TRY(create_partitions_request); break;
	case 18: TRY(create_partitions_response); break;
	case 19: TRY(elect_leaders_request); break;
	case 20: TRY(elect_leaders_response); break;
	case 21: TRY(alter_reassignments_request); break;
	case 22: TRY(alter_reassignments_response); break;
	case 23: TRY(list_reassignments_request); break;
	case 24: TRY(list_reassignments_response); break;
	case 25: TRY(allocate_producer_ids_request); break;
	case 26: TRY(allocate_producer_ids_response); break;
	default: TRY(fetch_metadata_response); break;
	}
	keel_arena_close(&arena);
	return 0;
}
