/*
 * fuzz_batch.h — a minimal valid magic-2 batch for fuzz targets that need
 * a log with data in it (header-only; the unit tests' builders use cmocka).
 */
#ifndef KEEL_FUZZ_BATCH_H
#define KEEL_FUZZ_BATCH_H

#include <stdint.h>
#include <string.h>

#include "base/buf.h"
#include "plog/batch.h"

/* A one-record batch (null key, value "v"), 80 bytes at most. */
static inline size_t fuzz_tiny_batch(uint8_t out[80])
{
	/* attributes, timestamp delta 0, offset delta 0, key length -1, value
	 * length 1, "v", no headers — lengths as zigzag varints */
	static const uint8_t record[] = {14, 0, 0, 0, 1, 2, 'v', 0};
	memset(out, 0, 80);
	out[PLOG_BATCH_OFF_MAGIC] = PLOG_BATCH_MAGIC;
	keel_store_be32(out + 57, 1); /* record count; lastOffsetDelta 0 */
	memcpy(out + PLOG_BATCH_HEADER_SIZE, record, sizeof(record));
	size_t size = PLOG_BATCH_HEADER_SIZE + sizeof(record);
	plog_batch_seal(out, size);
	return size;
}

#endif
