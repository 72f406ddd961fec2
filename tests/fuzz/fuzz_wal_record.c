/*
 * fuzz_wal_record.c — the segment header decoder, the record decoder and the
 * segment scanner on arbitrary bytes.
 *
 * Input: bytes 0..24 give a generation, a first index and a prev term (made
 * valid); the rest is the segment body that follows a header built from
 * them. The raw input is also fed to the header and record decoders as is.
 * Properties checked: no crash or out-of-bounds read; every record the
 * scanner reports lies inside the buffer, carries the generation and the
 * next index, and its term never goes down; the scanner's summary agrees
 * with what it reported.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/buf.h"
#include "wal/format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct check {
	const uint8_t *buf;
	size_t size;
	uint64_t generation;
	uint64_t expected;
	uint64_t term;
	uint64_t count;
};

static enum keel_err on_record(void *arg, const struct wal_record *rec, uint64_t offset)
{
	struct check *c = arg;
	KEEL_ASSERT(offset + wal_record_encoded_size(rec->size) <= c->size);
	KEEL_ASSERT(rec->data == c->buf + offset + WAL_RECORD_HEADER_SIZE);
	KEEL_ASSERT(rec->generation == c->generation);
	KEEL_ASSERT(rec->index == c->expected);
	KEEL_ASSERT(rec->term >= c->term);
	c->expected++;
	c->term = rec->term;
	c->count++;
	return KEEL_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wal_segment_header h;
	char why[128];
	(void)wal_segment_header_decode(data, size, &h, why, sizeof(why));
	struct wal_record rec;
	if (wal_record_decode(data, size, 1, 1 << 20, &rec) == WAL_RECORD_OK) {
		KEEL_ASSERT(wal_record_encoded_size(rec.size) <= size);
	}
	if (size < 24) {
		return 0;
	}
	h = (struct wal_segment_header){
		.version = WAL_FORMAT_VERSION,
		.generation = keel_load_be64(data) | 1,
		.first_index = (keel_load_be64(data + 8) & 0xffffffffull) | 1,
		.prev_term = keel_load_be64(data + 16) & 0xff,
	};
	size_t body = size - 24;
	size_t total = WAL_SEGMENT_HEADER_SIZE + body;
	uint8_t *buf = malloc(total);
	KEEL_ASSERT(buf != NULL);
	wal_segment_header_encode(buf, &h);
	memcpy(buf + WAL_SEGMENT_HEADER_SIZE, data + 24, body);
	uint64_t limits[2] = {UINT64_MAX, h.first_index + (data[23] & 7)};
	for (int i = 0; i < 2; i++) {
		struct check c = {.buf = buf, .size = total, .generation = h.generation,
				  .expected = h.first_index, .term = h.prev_term};
		struct wal_scan_result r;
		enum keel_err err = wal_scan_segment(buf, total, &h, h.prev_term, limits[i], 1 << 16,
						     on_record, &c, &r);
		KEEL_ASSERT(err == KEEL_OK);
		KEEL_ASSERT(r.record_count == c.count);
		KEEL_ASSERT(r.last_index == h.first_index + c.count - 1);
		KEEL_ASSERT(r.end_offset <= total);
		KEEL_ASSERT(r.end != WAL_SCAN_LIMIT || r.last_index == limits[i]);
	}
	free(buf);
	return 0;
}
