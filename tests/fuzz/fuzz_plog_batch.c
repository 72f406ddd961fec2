/*
 * fuzz_plog_batch.c — record batch validation and the plog file decoders
 * on arbitrary bytes.
 *
 * The input is split into batches as a produce payload would be; every
 * batch reported valid must lie inside the input, keep validating after its
 * offset and epoch are rewritten, and (uncompressed) walk exactly
 * record_count records. The input is also resealed as one batch (length,
 * magic and CRC made right) so that the record walker sees arbitrary
 * records, and fed to the index, epoch and metadata decoders.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/buf.h"
#include "plog/batch.h"
#include "plog/format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_LENGTH (1u << 20)

static void count_record(void *arg, int32_t offset_delta, int64_t timestamp)
{
	int32_t *count = arg;
	KEEL_ASSERT(offset_delta == *count);
	(void)timestamp;
	(*count)++;
}

static void check_batch(const struct plog_batch *b, size_t avail)
{
	KEEL_ASSERT(b->size <= avail);
	KEEL_ASSERT(b->size >= PLOG_BATCH_HEADER_SIZE);
	KEEL_ASSERT(b->record_count == b->last_offset_delta + 1);
	uint8_t *copy = malloc(b->size);
	KEEL_ASSERT(copy != NULL);
	memcpy(copy, b->data, b->size);
	plog_batch_set_base_offset(copy, 1234567);
	plog_batch_set_leader_epoch(copy, 89);
	struct plog_batch again;
	KEEL_ASSERT(plog_batch_validate(copy, b->size, MAX_LENGTH, &again) == PLOG_BATCH_OK);
	KEEL_ASSERT(again.base_offset == 1234567 && again.leader_epoch == 89);
	if (plog_batch_compression(&again) == PLOG_COMPRESSION_NONE) {
		int32_t count = 0;
		KEEL_ASSERT(plog_batch_walk_records(&again, count_record, &count) == PLOG_BATCH_OK);
		KEEL_ASSERT(count == again.record_count);
	}
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t pos = 0;
	while (pos < size) {
		struct plog_batch b;
		size_t before = pos;
		if (plog_batch_next(data, size, &pos, MAX_LENGTH, &b) != PLOG_BATCH_OK) {
			KEEL_ASSERT(pos == before);
			break;
		}
		KEEL_ASSERT(pos == before + b.size);
		check_batch(&b, size - before);
	}
	/* Resealed: past the CRC, into the records. */
	if (size >= PLOG_BATCH_HEADER_SIZE && size - PLOG_BATCH_LOG_OVERHEAD <= MAX_LENGTH) {
		uint8_t *copy = malloc(size);
		KEEL_ASSERT(copy != NULL);
		memcpy(copy, data, size);
		copy[PLOG_BATCH_OFF_MAGIC] = PLOG_BATCH_MAGIC;
		plog_batch_seal(copy, size);
		struct plog_batch b;
		if (plog_batch_validate(copy, size, MAX_LENGTH, &b) == PLOG_BATCH_OK) {
			check_batch(&b, size);
		}
		free(copy);
	}
	/* The other decoders. */
	uint32_t count = 0;
	for (int t = 0; t < 2; t++) {
		if (plog_index_peek_count(data, size, t == 1, &count) == KEEL_OK && count <= 4096) {
			struct plog_index_header h;
			void *entries = malloc((count + 1) * 16u);
			KEEL_ASSERT(entries != NULL);
			enum keel_err err = t == 1 ? plog_timeindex_decode(data, size, &h, entries)
						   : plog_index_decode(data, size, &h, entries);
			KEEL_ASSERT(err == KEEL_OK && h.entry_count == count);
			free(entries);
		}
	}
	struct plog_epoch_entry epochs[64];
	if (plog_epoch_file_decode(data, size, epochs, 64, &count) == KEEL_OK) {
		KEEL_ASSERT(plog_epoch_file_size(count) == size);
		for (uint32_t i = 1; i < count; i++) {
			KEEL_ASSERT(epochs[i].epoch > epochs[i - 1].epoch);
		}
	}
	uint8_t id[PLOG_TOPIC_ID_SIZE];
	(void)plog_metadata_decode(data, size, id);
	return 0;
}
