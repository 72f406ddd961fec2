/*
 * fuzz_raft_msg.c — the peer message decoder on arbitrary bytes.
 *
 * Properties: decoding never crashes or reads out of bounds (ASan), and
 * whatever decodes re-encodes to exactly the same bytes (the format is
 * canonical: no slack in lengths, flags or booleans), and decodes again.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "raft/raft.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct raft_msg_limits limits = {
		.max_entries = 64,
		.max_entry_bytes = 4096,
		.max_chunk_bytes = 8192,
	};
	struct raft_entry entries[64];
	struct raft_msg m;
	if (raft_msg_decode(data, size, &limits, &m, entries, 64) != KEEL_OK) {
		return 0;
	}
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 1u << 20);
	KEEL_ASSERT(raft_msg_encode(&m, &w) == KEEL_OK);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	KEEL_ASSERT(w.size == size);
	KEEL_ASSERT(memcmp(w.data, data, size) == 0);
	struct raft_msg again;
	struct raft_entry entries2[64];
	KEEL_ASSERT(raft_msg_decode(w.data, w.size, &limits, &again, entries2, 64) == KEEL_OK);
	KEEL_ASSERT(again.type == m.type && again.term == m.term);
	keel_wbuf_free(&w);
	return 0;
}
