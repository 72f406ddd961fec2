/*
 * batch.c — decoding and validating magic-2 record batches (batch.h).
 */
#include "plog/batch.h"

#include "base/assert.h"
#include "base/buf.h"
#include "base/crc32c.h"

#include <string.h>

/* A varint of a 64-bit zigzag value takes at most 10 bytes. */
#define VARINT_MAX_BYTES 10

const char *plog_batch_check_name(enum plog_batch_check check)
{
	switch (check) {
	case PLOG_BATCH_OK:
		return "ok";
	case PLOG_BATCH_SHORT:
		return "short";
	case PLOG_BATCH_BAD_LENGTH:
		return "bad length";
	case PLOG_BATCH_BAD_MAGIC:
		return "unsupported magic";
	case PLOG_BATCH_TOO_LARGE:
		return "too large";
	case PLOG_BATCH_BAD_CRC:
		return "bad crc";
	case PLOG_BATCH_BAD_ATTRIBUTES:
		return "bad attributes";
	case PLOG_BATCH_BAD_COUNT:
		return "bad record count";
	case PLOG_BATCH_BAD_RECORDS:
		return "bad record framing";
	}
	return "unknown";
}

enum keel_err plog_batch_check_err(enum plog_batch_check check)
{
	switch (check) {
	case PLOG_BATCH_OK:
		return KEEL_OK;
	case PLOG_BATCH_BAD_MAGIC:
		return KEEL_UNSUPPORTED;
	case PLOG_BATCH_TOO_LARGE:
		return KEEL_TOOBIG;
	default:
		return KEEL_CORRUPT;
	}
}

size_t plog_varint_read(const uint8_t *buf, size_t avail, int64_t *value)
{
	uint64_t raw = 0;
	for (size_t i = 0; i < VARINT_MAX_BYTES && i < avail; i++) {
		raw |= (uint64_t)(buf[i] & 0x7f) << (7 * i);
		if ((buf[i] & 0x80) == 0) {
			if (i == VARINT_MAX_BYTES - 1 && buf[i] > 1) {
				return 0; /* more than 64 bits */
			}
			*value = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
			return i + 1;
		}
	}
	return 0;
}

size_t plog_varint_write(uint8_t *out, int64_t value)
{
	uint64_t raw = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
	size_t n = 0;
	while (raw >= 0x80) {
		out[n++] = (uint8_t)(raw | 0x80);
		raw >>= 7;
	}
	out[n++] = (uint8_t)raw;
	return n;
}

enum plog_batch_check plog_batch_parse_header(const uint8_t *buf, size_t avail,
					      uint32_t max_length, struct plog_batch *out)
{
	if (avail < PLOG_BATCH_LOG_OVERHEAD + 5) {
		return PLOG_BATCH_SHORT;
	}
	int32_t length = (int32_t)keel_load_be32(buf + PLOG_BATCH_OFF_LENGTH);
	int8_t magic = (int8_t)buf[PLOG_BATCH_OFF_MAGIC];
	/* An old-format message set has a shorter header: report its magic
	 * before complaining about the length. */
	if (magic != PLOG_BATCH_MAGIC) {
		return PLOG_BATCH_BAD_MAGIC;
	}
	if (length < PLOG_BATCH_MIN_LENGTH) {
		return PLOG_BATCH_BAD_LENGTH;
	}
	if ((uint32_t)length > max_length) {
		return PLOG_BATCH_TOO_LARGE;
	}
	if (avail < PLOG_BATCH_HEADER_SIZE) {
		return PLOG_BATCH_SHORT;
	}
	struct keel_rbuf r;
	keel_rbuf_init(&r, buf, PLOG_BATCH_HEADER_SIZE);
	out->base_offset = keel_rbuf_i64(&r);
	out->batch_length = keel_rbuf_i32(&r);
	out->leader_epoch = keel_rbuf_i32(&r);
	out->magic = (int8_t)keel_rbuf_u8(&r);
	out->crc = keel_rbuf_u32(&r);
	out->attributes = (int16_t)keel_rbuf_u16(&r);
	out->last_offset_delta = keel_rbuf_i32(&r);
	out->base_timestamp = keel_rbuf_i64(&r);
	out->max_timestamp = keel_rbuf_i64(&r);
	out->producer_id = keel_rbuf_i64(&r);
	out->producer_epoch = (int16_t)keel_rbuf_u16(&r);
	out->base_sequence = keel_rbuf_i32(&r);
	out->record_count = keel_rbuf_i32(&r);
	KEEL_ASSERT(keel_rbuf_done(&r));
	out->data = buf;
	out->size = PLOG_BATCH_LOG_OVERHEAD + (size_t)length;
	return PLOG_BATCH_OK;
}

/* Reads a varint length (-1 = null) and skips that many bytes. */
static bool skip_bytes_field(struct keel_rbuf *r, bool nullable)
{
	int64_t len;
	size_t n = plog_varint_read(r->data + r->pos, keel_rbuf_remaining(r), &len);
	if (n == 0) {
		return false;
	}
	r->pos += n;
	if (len == -1 && nullable) {
		return true;
	}
	if (len < 0 || (uint64_t)len > keel_rbuf_remaining(r)) {
		return false;
	}
	r->pos += (size_t)len;
	return true;
}

static bool read_varint(struct keel_rbuf *r, int64_t *value)
{
	size_t n = plog_varint_read(r->data + r->pos, keel_rbuf_remaining(r), value);
	r->pos += n;
	return n > 0;
}

/* One record body (after its length): attributes, timestampDelta,
 * offsetDelta, key, value, headers; it must fill the body exactly. */
static bool walk_record_body(const uint8_t *body, size_t size, int64_t *timestamp_delta,
			     int64_t *offset_delta)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, body, size);
	(void)keel_rbuf_u8(&r); /* attributes: unused in magic 2 */
	int64_t header_count;
	if (!keel_rbuf_ok(&r) || !read_varint(&r, timestamp_delta) ||
	    !read_varint(&r, offset_delta) || !skip_bytes_field(&r, true) ||
	    !skip_bytes_field(&r, true) || !read_varint(&r, &header_count)) {
		return false;
	}
	if (header_count < 0 || (uint64_t)header_count > keel_rbuf_remaining(&r)) {
		return false;
	}
	for (int64_t i = 0; i < header_count; i++) {
		if (!skip_bytes_field(&r, false) || !skip_bytes_field(&r, true)) {
			return false;
		}
	}
	return keel_rbuf_done(&r);
}

enum plog_batch_check plog_batch_walk_records(const struct plog_batch *batch, plog_record_fn fn,
					      void *arg)
{
	KEEL_ASSERT(plog_batch_compression(batch) == PLOG_COMPRESSION_NONE);
	KEEL_ASSERT(batch->size >= PLOG_BATCH_HEADER_SIZE);
	const uint8_t *p = batch->data + PLOG_BATCH_HEADER_SIZE;
	size_t left = batch->size - PLOG_BATCH_HEADER_SIZE;
	for (int32_t i = 0; i < batch->record_count; i++) {
		int64_t length;
		size_t n = plog_varint_read(p, left, &length);
		if (n == 0 || length < 1 || (uint64_t)length > left - n) {
			return PLOG_BATCH_BAD_RECORDS;
		}
		int64_t timestamp_delta;
		int64_t offset_delta;
		if (!walk_record_body(p + n, (size_t)length, &timestamp_delta, &offset_delta)) {
			return PLOG_BATCH_BAD_RECORDS;
		}
		if (offset_delta != i) {
			return PLOG_BATCH_BAD_RECORDS;
		}
		if (fn != NULL) {
			fn(arg, (int32_t)offset_delta, batch->base_timestamp + timestamp_delta);
		}
		p += n + (size_t)length;
		left -= n + (size_t)length;
	}
	return left == 0 ? PLOG_BATCH_OK : PLOG_BATCH_BAD_RECORDS;
}

/* Compressed records are not decompressed; what can be checked is that the
 * payload starts like the codec's frame: gzip's member header, the LZ4 frame
 * magic (Kafka's framing), the zstd frame magic. Snappy comes both raw
 * (librdkafka) and in xerial framing (the Java client), so only its
 * presence is checked. */
static bool compressed_frame_ok(const struct plog_batch *b)
{
	static const uint8_t gzip[] = {0x1f, 0x8b};
	static const uint8_t lz4[] = {0x04, 0x22, 0x4d, 0x18};
	static const uint8_t zstd[] = {0x28, 0xb5, 0x2f, 0xfd};
	const uint8_t *p = b->data + PLOG_BATCH_HEADER_SIZE;
	size_t n = b->size - PLOG_BATCH_HEADER_SIZE;
	switch (plog_batch_compression(b)) {
	case PLOG_COMPRESSION_GZIP:
		return n >= sizeof(gzip) && memcmp(p, gzip, sizeof(gzip)) == 0;
	case PLOG_COMPRESSION_LZ4:
		return n >= sizeof(lz4) && memcmp(p, lz4, sizeof(lz4)) == 0;
	case PLOG_COMPRESSION_ZSTD:
		return n >= sizeof(zstd) && memcmp(p, zstd, sizeof(zstd)) == 0;
	default:
		return n > 0;
	}
}

enum plog_batch_check plog_batch_validate(const uint8_t *buf, size_t avail, uint32_t max_length,
					  struct plog_batch *out)
{
	enum plog_batch_check check = plog_batch_parse_header(buf, avail, max_length, out);
	if (check != PLOG_BATCH_OK) {
		return check;
	}
	if (out->size > avail) {
		return PLOG_BATCH_SHORT;
	}
	uint32_t crc = keel_crc32c(0, buf + PLOG_BATCH_CRC_START, out->size - PLOG_BATCH_CRC_START);
	if (crc != out->crc) {
		return PLOG_BATCH_BAD_CRC;
	}
	if ((out->attributes & PLOG_ATTR_COMPRESSION_MASK) > PLOG_COMPRESSION_ZSTD ||
	    (out->attributes & ~PLOG_ATTR_KNOWN) != 0) {
		return PLOG_BATCH_BAD_ATTRIBUTES;
	}
	if (out->record_count < 1 || out->last_offset_delta < 0 ||
	    (int64_t)out->record_count != (int64_t)out->last_offset_delta + 1) {
		return PLOG_BATCH_BAD_COUNT;
	}
	if (plog_batch_compression(out) == PLOG_COMPRESSION_NONE) {
		return plog_batch_walk_records(out, NULL, NULL);
	}
	return compressed_frame_ok(out) ? PLOG_BATCH_OK : PLOG_BATCH_BAD_RECORDS;
}

enum plog_batch_check plog_batch_next(const uint8_t *buf, size_t size, size_t *pos,
				      uint32_t max_length, struct plog_batch *out)
{
	KEEL_ASSERT(*pos <= size);
	enum plog_batch_check check = plog_batch_validate(buf + *pos, size - *pos, max_length, out);
	if (check == PLOG_BATCH_OK) {
		*pos += out->size;
	}
	return check;
}

void plog_batch_set_base_offset(uint8_t *batch, int64_t base_offset)
{
	keel_store_be64(batch, (uint64_t)base_offset);
}

void plog_batch_set_leader_epoch(uint8_t *batch, int32_t leader_epoch)
{
	keel_store_be32(batch + PLOG_BATCH_OFF_EPOCH, (uint32_t)leader_epoch);
}

void plog_batch_seal(uint8_t *batch, size_t size)
{
	KEEL_ASSERT(size >= PLOG_BATCH_HEADER_SIZE);
	keel_store_be32(batch + PLOG_BATCH_OFF_LENGTH, (uint32_t)(size - PLOG_BATCH_LOG_OVERHEAD));
	uint32_t crc = keel_crc32c(0, batch + PLOG_BATCH_CRC_START, size - PLOG_BATCH_CRC_START);
	keel_store_be32(batch + PLOG_BATCH_OFF_CRC, crc);
}
