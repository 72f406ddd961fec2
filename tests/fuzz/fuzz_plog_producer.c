/*
 * fuzz_plog_producer.c — the producer-state snapshot decoder.
 *
 * Whatever decodes must re-encode to exactly the same bytes (the encoding
 * is canonical), and the state must keep its invariants: producers sorted
 * by id, 1..5 batches each, offsets inside the snapshot's range.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "plog/producer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct plog_producers ps;
	plog_producers_init(&ps);
	int64_t offset;
	int32_t epoch;
	uint8_t topic_id[PLOG_TOPIC_ID_SIZE];
	if (plog_producers_decode(&ps, data, size, &offset, &epoch, topic_id) == KEEL_OK) {
		for (uint32_t i = 0; i < ps.count; i++) {
			const struct plog_producer *p = &ps.items[i];
			KEEL_ASSERT(i == 0 || ps.items[i - 1].producer_id < p->producer_id);
			KEEL_ASSERT(p->count >= 1 && p->count <= PLOG_PRODUCER_BATCHES);
			KEEL_ASSERT(p->batches[p->count - 1].last_offset < offset);
		}
		size_t n = 0;
		uint8_t *again = plog_producers_encode(&ps, offset, epoch, topic_id, &n);
		KEEL_ASSERT(again != NULL);
		KEEL_ASSERT(n == size && memcmp(again, data, size) == 0);
		free(again);
	}
	plog_producers_close(&ps);
	return 0;
}
