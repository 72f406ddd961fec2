/*
 * batch.h — Kafka record batches (magic 2): the unit a partition log stores
 * and serves, exactly as a producer sent it (after offset assignment).
 *
 *    0 i64 baseOffset            8 i32 batchLength (bytes after this field)
 *   12 i32 partitionLeaderEpoch 16 i8  magic (2)
 *   17 u32 crc (CRC-32C of bytes 21..end)
 *   21 i16 attributes           23 i32 lastOffsetDelta
 *   27 i64 baseTimestamp        35 i64 maxTimestamp
 *   43 i64 producerId           51 i16 producerEpoch
 *   53 i32 baseSequence         57 i32 recordCount
 *   61 records (varint-framed; compressed as one block when attributes say so)
 *
 * The CRC covers neither baseOffset, batchLength nor partitionLeaderEpoch, so
 * a leader assigns offsets and stamps its epoch in place without touching the
 * checksum (plog_batch_set_base_offset, plog_batch_set_leader_epoch).
 *
 * Validation (plog_batch_validate) checks, in this order: enough bytes for
 * the header and for batchLength; magic == 2 (otherwise BAD_MAGIC, which
 * callers map to UNSUPPORTED, not to corruption); batchLength within
 * [49, max]; the CRC; the attributes (codec 0..4, no unknown bit);
 * recordCount >= 1 and == lastOffsetDelta + 1; and, for uncompressed
 * batches, the varint framing of every record (lengths, key, value,
 * headers, offset deltas 0..n-1) and that the records fill the batch
 * exactly. Compressed records are not decompressed (the CRC covers them and
 * the consumer decodes them); their payload must start with the codec's
 * frame magic (gzip, lz4, zstd) or at least be present (snappy, which comes
 * raw or xerial-framed).
 *
 * Pure: no allocation, no I/O. Parsed batches point into the caller's
 * buffer and live as long as it does.
 */
#ifndef KEEL_PLOG_BATCH_H
#define KEEL_PLOG_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define PLOG_BATCH_MAGIC 2
#define PLOG_BATCH_HEADER_SIZE 61
/* baseOffset and batchLength: the bytes batchLength does not count. */
#define PLOG_BATCH_LOG_OVERHEAD 12
/* Smallest batchLength: the header after the length field. */
#define PLOG_BATCH_MIN_LENGTH (PLOG_BATCH_HEADER_SIZE - PLOG_BATCH_LOG_OVERHEAD)
#define PLOG_BATCH_CRC_START 21

/* Field positions, for the in-place rewrites and the scanners. */
#define PLOG_BATCH_OFF_LENGTH 8
#define PLOG_BATCH_OFF_EPOCH 12
#define PLOG_BATCH_OFF_MAGIC 16
#define PLOG_BATCH_OFF_CRC 17

enum plog_compression {
	PLOG_COMPRESSION_NONE = 0,
	PLOG_COMPRESSION_GZIP = 1,
	PLOG_COMPRESSION_SNAPPY = 2,
	PLOG_COMPRESSION_LZ4 = 3,
	PLOG_COMPRESSION_ZSTD = 4,
};

#define PLOG_ATTR_COMPRESSION_MASK 0x07
#define PLOG_ATTR_LOG_APPEND_TIME 0x08
#define PLOG_ATTR_TRANSACTIONAL 0x10
#define PLOG_ATTR_CONTROL 0x20
#define PLOG_ATTR_DELETE_HORIZON 0x40 /* set by a log cleaner (KIP-534) */
/* Bits a batch may carry; any other is refused as BAD_ATTRIBUTES. */
#define PLOG_ATTR_KNOWN 0x7f

struct plog_batch {
	int64_t base_offset;
	int32_t batch_length;
	int32_t leader_epoch; /* partitionLeaderEpoch */
	int8_t magic;
	uint32_t crc;
	int16_t attributes;
	int32_t last_offset_delta;
	int64_t base_timestamp;
	int64_t max_timestamp;
	int64_t producer_id;
	int16_t producer_epoch;
	int32_t base_sequence;
	int32_t record_count;
	const uint8_t *data; /* the whole batch */
	size_t size;         /* PLOG_BATCH_LOG_OVERHEAD + batch_length */
};

static inline int64_t plog_batch_last_offset(const struct plog_batch *b)
{
	return b->base_offset + b->last_offset_delta;
}

static inline enum plog_compression plog_batch_compression(const struct plog_batch *b)
{
	return (enum plog_compression)(b->attributes & PLOG_ATTR_COMPRESSION_MASK);
}

enum plog_batch_check {
	PLOG_BATCH_OK,
	PLOG_BATCH_SHORT,          /* the buffer ends inside the header or the batch */
	PLOG_BATCH_BAD_LENGTH,     /* batchLength below the header */
	PLOG_BATCH_TOO_LARGE,      /* batchLength over the configured maximum */
	PLOG_BATCH_BAD_MAGIC,      /* magic != 2 (an older message format) */
	PLOG_BATCH_BAD_CRC,        /* checksum mismatch */
	PLOG_BATCH_BAD_ATTRIBUTES, /* unknown compression codec */
	PLOG_BATCH_BAD_COUNT,      /* recordCount < 1 or != lastOffsetDelta + 1 */
	PLOG_BATCH_BAD_RECORDS,    /* record framing disagrees with the header */
};

const char *plog_batch_check_name(enum plog_batch_check check);

/* KEEL_OK, KEEL_UNSUPPORTED (bad magic), KEEL_TOOBIG (too large) or
 * KEEL_CORRUPT (everything else). */
enum keel_err plog_batch_check_err(enum plog_batch_check check);

/* Decodes the fixed header at buf (avail bytes from there) without checking
 * the CRC or the records: SHORT, BAD_MAGIC, BAD_LENGTH or TOO_LARGE (over
 * max_length),
 * else OK with `out` filled (out->size may exceed avail: the caller reads the
 * rest). */
enum plog_batch_check plog_batch_parse_header(const uint8_t *buf, size_t avail,
					      uint32_t max_length, struct plog_batch *out);

/* Decodes and fully validates the batch at buf (see the list above).
 * max_length bounds batchLength. On OK, `out` describes the batch. */
enum plog_batch_check plog_batch_validate(const uint8_t *buf, size_t avail, uint32_t max_length,
					  struct plog_batch *out);

/* Walks the records of an uncompressed batch: calls fn(arg, offset_delta,
 * timestamp) once per record in order (fn may be NULL). BAD_RECORDS when the
 * framing is wrong. */
typedef void (*plog_record_fn)(void *arg, int32_t offset_delta, int64_t timestamp);
enum plog_batch_check plog_batch_walk_records(const struct plog_batch *batch, plog_record_fn fn,
					      void *arg);

/* Iterates over concatenated batches (a produce payload, a fetched range):
 *   size_t pos = 0; while (pos < size) { check = plog_batch_next(...); }
 * Each call validates the batch at *pos and advances *pos past it. */
enum plog_batch_check plog_batch_next(const uint8_t *buf, size_t size, size_t *pos,
				      uint32_t max_length, struct plog_batch *out);

/* In-place rewrites of the fields outside the CRC. */
void plog_batch_set_base_offset(uint8_t *batch, int64_t base_offset);
void plog_batch_set_leader_epoch(uint8_t *batch, int32_t leader_epoch);

/* Recomputes and stores the CRC of a whole batch (size bytes at batch);
 * for building batches in tests and tools. */
void plog_batch_seal(uint8_t *batch, size_t size);

/* Zigzag varint helpers (Kafka's record encoding), bounds-checked: return
 * the number of bytes consumed, 0 on short or overlong input. */
size_t plog_varint_read(const uint8_t *buf, size_t avail, int64_t *value);
/* Writes the zigzag varint of `value` to out (at least 10 bytes); returns its
 * length. */
size_t plog_varint_write(uint8_t *out, int64_t value);

#endif
