/*
 * Unit test: record batch validation (src/plog/batch.c) and the plog file
 * formats (src/plog/format.c) — hand-built batches, every way to break one,
 * and real batches for every compression codec from two independent
 * encoders: kafka-python (make-batches.py) and kcat/librdkafka captured from
 * its Produce requests (capture-kcat.py), both in tests/unit/data/plog/.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "plog/format.h"
#include "test_plog_util.h"

#define MAX_LENGTH 100000u

static void test_varint_round_trip(void **state)
{
	(void)state;
	const int64_t values[] = {0,	  1,	   -1,	     63,	-64,	 64,	 -65,
				  300,	  -300,	   1 << 20,  INT32_MAX, INT32_MIN, INT64_MAX,
				  INT64_MIN};
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		uint8_t buf[16];
		size_t n = plog_varint_write(buf, values[i]);
		assert_true(n >= 1 && n <= 10);
		int64_t back = 0;
		assert_int_equal(plog_varint_read(buf, n, &back), n);
		assert_true(back == values[i]);
		/* One byte short never decodes. */
		assert_int_equal(plog_varint_read(buf, n - 1, &back), 0);
	}
	/* Eleven continuation bytes: overlong. */
	uint8_t bad[11];
	memset(bad, 0x80, sizeof(bad));
	int64_t v;
	assert_int_equal(plog_varint_read(bad, sizeof(bad), &v), 0);
}

static void test_hand_built_batch(void **state)
{
	(void)state;
	uint8_t buf[8192];
	size_t size = build_batch(buf, sizeof(buf), 7, 1000, 5, 20, 'a');
	struct plog_batch b;
	assert_int_equal(plog_batch_validate(buf, size, MAX_LENGTH, &b), PLOG_BATCH_OK);
	assert_int_equal(b.size, size);
	assert_int_equal(b.record_count, 7);
	assert_int_equal(b.last_offset_delta, 6);
	assert_int_equal(b.base_timestamp, 1000);
	assert_int_equal(b.max_timestamp, 1030);
	assert_int_equal(b.magic, 2);
	assert_int_equal(plog_batch_compression(&b), PLOG_COMPRESSION_NONE);
	/* Offsets and epochs are rewritten in place without breaking the CRC. */
	plog_batch_set_base_offset(buf, 123456789);
	plog_batch_set_leader_epoch(buf, 42);
	assert_int_equal(plog_batch_validate(buf, size, MAX_LENGTH, &b), PLOG_BATCH_OK);
	assert_int_equal(b.base_offset, 123456789);
	assert_int_equal(b.leader_epoch, 42);
	assert_int_equal(plog_batch_last_offset(&b), 123456795);
}

static void expect_batch_check(uint8_t *buf, size_t size, enum plog_batch_check want)
{
	struct plog_batch b;
	assert_string_equal(plog_batch_check_name(plog_batch_validate(buf, size, MAX_LENGTH, &b)),
			    plog_batch_check_name(want));
}

static void test_broken_batches(void **state)
{
	(void)state;
	uint8_t good[8192];
	uint8_t buf[8192];
	size_t size = build_batch(good, sizeof(good), 4, 0, 1, 10, 'b');

	/* Every byte covered by the CRC, flipped, is caught. */
	for (size_t i = PLOG_BATCH_CRC_START; i < size; i++) {
		memcpy(buf, good, size);
		buf[i] ^= 0x10;
		expect_batch_check(buf, size, PLOG_BATCH_BAD_CRC);
	}
	/* The CRC field itself. */
	memcpy(buf, good, size);
	buf[PLOG_BATCH_OFF_CRC] ^= 1;
	expect_batch_check(buf, size, PLOG_BATCH_BAD_CRC);

	/* Every shorter buffer is SHORT, never OK. */
	for (size_t n = 0; n < size; n++) {
		expect_batch_check(good, n, PLOG_BATCH_SHORT);
	}

	/* Old magic: unsupported, not corrupt. */
	memcpy(buf, good, size);
	buf[PLOG_BATCH_OFF_MAGIC] = 1;
	expect_batch_check(buf, size, PLOG_BATCH_BAD_MAGIC);
	assert_int_equal(plog_batch_check_err(PLOG_BATCH_BAD_MAGIC), KEEL_UNSUPPORTED);
	assert_int_equal(plog_batch_check_err(PLOG_BATCH_BAD_CRC), KEEL_CORRUPT);
	assert_int_equal(plog_batch_check_err(PLOG_BATCH_TOO_LARGE), KEEL_TOOBIG);

	/* Lengths: below the header, over the maximum, past the buffer. */
	memcpy(buf, good, size);
	keel_store_be32(buf + PLOG_BATCH_OFF_LENGTH, 10);
	expect_batch_check(buf, size, PLOG_BATCH_BAD_LENGTH);
	keel_store_be32(buf + PLOG_BATCH_OFF_LENGTH, MAX_LENGTH + 1);
	expect_batch_check(buf, size, PLOG_BATCH_TOO_LARGE);
	keel_store_be32(buf + PLOG_BATCH_OFF_LENGTH, (uint32_t)(size - 12 + 1));
	expect_batch_check(buf, size, PLOG_BATCH_SHORT);
	keel_store_be32(buf + PLOG_BATCH_OFF_LENGTH, 0xffffffffu);
	expect_batch_check(buf, size, PLOG_BATCH_BAD_LENGTH);

	/* Count disagreeing with lastOffsetDelta, resealed so the CRC is right. */
	memcpy(buf, good, size);
	keel_store_be32(buf + 57, 5);
	plog_batch_seal(buf, size);
	expect_batch_check(buf, size, PLOG_BATCH_BAD_COUNT);
	memcpy(buf, good, size);
	keel_store_be32(buf + 57, 0);
	keel_store_be32(buf + 23, (uint32_t)-1);
	plog_batch_seal(buf, size);
	expect_batch_check(buf, size, PLOG_BATCH_BAD_COUNT);
	/* Count and delta agree but the records say otherwise. */
	memcpy(buf, good, size);
	keel_store_be32(buf + 57, 5);
	keel_store_be32(buf + 23, 4);
	plog_batch_seal(buf, size);
	expect_batch_check(buf, size, PLOG_BATCH_BAD_RECORDS);
	memcpy(buf, good, size);
	keel_store_be32(buf + 57, 3);
	keel_store_be32(buf + 23, 2);
	plog_batch_seal(buf, size);
	expect_batch_check(buf, size, PLOG_BATCH_BAD_RECORDS);
	/* A record length that overruns the batch. */
	memcpy(buf, good, size);
	buf[PLOG_BATCH_HEADER_SIZE] = 0x7e;
	plog_batch_seal(buf, size);
	expect_batch_check(buf, size, PLOG_BATCH_BAD_RECORDS);
	/* An offset delta out of sequence (record 0's delta is at +3). */
	memcpy(buf, good, size);
	assert_int_equal(buf[PLOG_BATCH_HEADER_SIZE + 3], 0);
	buf[PLOG_BATCH_HEADER_SIZE + 3] = 2;
	plog_batch_seal(buf, size);
	expect_batch_check(buf, size, PLOG_BATCH_BAD_RECORDS);
	/* An unknown codec. */
	memcpy(buf, good, size);
	keel_store_be16(buf + 21, 6);
	plog_batch_seal(buf, size);
	expect_batch_check(buf, size, PLOG_BATCH_BAD_ATTRIBUTES);
	/* Trailing bytes inside the batch after the last record. */
	memcpy(buf, good, size);
	buf[size] = 0;
	plog_batch_seal(buf, size + 1);
	expect_batch_check(buf, size + 1, PLOG_BATCH_BAD_RECORDS);
}

static void test_split_payload(void **state)
{
	(void)state;
	uint8_t buf[16384];
	size_t sizes[3];
	size_t total = 0;
	for (int i = 0; i < 3; i++) {
		sizes[i] = build_batch(buf + total, sizeof(buf) - total, i + 1, 100 * i, 1,
				       (size_t)(30 * i), (uint8_t)('x' + i));
		total += sizes[i];
	}
	size_t pos = 0;
	for (int i = 0; i < 3; i++) {
		struct plog_batch b;
		assert_int_equal(plog_batch_next(buf, total, &pos, MAX_LENGTH, &b), PLOG_BATCH_OK);
		assert_int_equal(b.size, sizes[i]);
		assert_int_equal(b.record_count, i + 1);
	}
	assert_int_equal(pos, total);
	/* A cut last batch is SHORT and the position stays before it. */
	pos = 0;
	struct plog_batch b;
	assert_int_equal(plog_batch_next(buf, total - 1, &pos, MAX_LENGTH, &b), PLOG_BATCH_OK);
	assert_int_equal(plog_batch_next(buf, total - 1, &pos, MAX_LENGTH, &b), PLOG_BATCH_OK);
	assert_int_equal(plog_batch_next(buf, total - 1, &pos, MAX_LENGTH, &b), PLOG_BATCH_SHORT);
	assert_int_equal(pos, sizes[0] + sizes[1]);
}

/* ---- real batches ---- */

static int64_t field(const char *text, const char *name)
{
	const char *p = strstr(text, name);
	assert_non_null(p);
	return strtoll(p + strlen(name) + 1, NULL, 10);
}

struct walked {
	int32_t count;
	int64_t timestamps[16];
};

static void on_record(void *arg, int32_t offset_delta, int64_t timestamp)
{
	struct walked *w = arg;
	assert_int_equal(offset_delta, w->count);
	w->timestamps[w->count++] = timestamp;
}

static void test_real_batches_every_codec(void **state)
{
	(void)state;
	const char *codecs[] = {"none", "gzip", "snappy", "lz4", "zstd"};
	for (int c = 0; c < 5; c++) {
		char name[32];
		size_t size;
		snprintf(name, sizeof(name), "%s.bin", codecs[c]);
		uint8_t *batch = plog_test_data(name, &size);
		snprintf(name, sizeof(name), "%s.txt", codecs[c]);
		size_t text_size;
		char *text = (char *)plog_test_data(name, &text_size);
		text[text_size] = '\0';
		assert_int_equal((int64_t)size, field(text, "size"));

		struct plog_batch b;
		assert_int_equal(plog_batch_validate(batch, size, MAX_LENGTH, &b), PLOG_BATCH_OK);
		assert_int_equal(b.record_count, field(text, "records"));
		assert_int_equal(b.base_timestamp, field(text, "base_timestamp"));
		assert_int_equal(b.max_timestamp, field(text, "max_timestamp"));
		assert_int_equal(plog_batch_compression(&b), field(text, "compression"));
		assert_int_equal(plog_batch_compression(&b), c);
		if (c == 0) {
			struct walked w = {0};
			assert_int_equal(plog_batch_walk_records(&b, on_record, &w), PLOG_BATCH_OK);
			assert_int_equal(w.count, b.record_count);
			assert_int_equal(w.timestamps[0], b.base_timestamp);
			assert_int_equal(w.timestamps[w.count - 1], b.max_timestamp);
		}
		/* A compressed payload that does not start with its codec's frame
		 * magic is refused even with a right CRC (snappy: not checkable). */
		if (c == 1 || c == 3 || c == 4) {
			batch[PLOG_BATCH_HEADER_SIZE] ^= 0x01;
			plog_batch_seal(batch, size);
			assert_int_equal(plog_batch_validate(batch, size, MAX_LENGTH, &b),
					 PLOG_BATCH_BAD_RECORDS);
			batch[PLOG_BATCH_HEADER_SIZE] ^= 0x01;
			plog_batch_seal(batch, size);
		}
		/* A flipped payload bit is a CRC error for every codec. */
		batch[size - 1] ^= 0x01;
		assert_int_equal(plog_batch_validate(batch, size, MAX_LENGTH, &b), PLOG_BATCH_BAD_CRC);
		free(batch);
		free(text);
	}
}

/* Batches kcat (librdkafka, a second encoder) produced: 8 records each,
 * captured from its Produce requests by capture-kcat.py. */
static void test_kcat_batches_every_codec(void **state)
{
	(void)state;
	const char *codecs[] = {"none", "gzip", "snappy", "lz4", "zstd"};
	for (int c = 0; c < 5; c++) {
		char name[32];
		size_t size;
		snprintf(name, sizeof(name), "kcat-%s.bin", codecs[c]);
		uint8_t *payload = plog_test_data(name, &size);
		size_t pos = 0;
		struct plog_batch b;
		assert_int_equal(plog_batch_next(payload, size, &pos, MAX_LENGTH, &b), PLOG_BATCH_OK);
		assert_int_equal(pos, size); /* one batch per request here */
		assert_int_equal(b.record_count, 8);
		assert_int_equal(b.last_offset_delta, 7);
		assert_int_equal(plog_batch_compression(&b), c);
		assert_true(b.max_timestamp >= b.base_timestamp);
		if (c == 0) {
			struct walked w = {0};
			assert_int_equal(plog_batch_walk_records(&b, on_record, &w), PLOG_BATCH_OK);
			assert_int_equal(w.count, 8);
		}
		payload[PLOG_BATCH_HEADER_SIZE + 3] ^= 0x80;
		pos = 0;
		assert_int_equal(plog_batch_next(payload, size, &pos, MAX_LENGTH, &b),
				 PLOG_BATCH_BAD_CRC);
		free(payload);
	}
}

/* ---- file formats ---- */

static void test_file_names(void **state)
{
	(void)state;
	char name[PLOG_NAME_MAX];
	plog_file_name(name, 1234, PLOG_FILE_LOG);
	assert_string_equal(name, "00000000000000001234.log");
	int64_t base = 0;
	assert_int_equal(plog_parse_file_name(name, &base), PLOG_FILE_LOG);
	assert_int_equal(base, 1234);
	plog_file_name(name, INT64_MAX, PLOG_FILE_TIMEINDEX);
	assert_string_equal(name, "09223372036854775807.timeindex");
	assert_int_equal(plog_parse_file_name(name, &base), PLOG_FILE_TIMEINDEX);
	assert_true(base == INT64_MAX);
	assert_int_equal(plog_parse_file_name("00000000000000000001.index", &base), PLOG_FILE_INDEX);
	assert_int_equal(plog_parse_file_name("99999999999999999999.log", &base), PLOG_FILE_OTHER);
	assert_int_equal(plog_parse_file_name("0000000000000000000x.log", &base), PLOG_FILE_OTHER);
	assert_int_equal(plog_parse_file_name("00000000000000000001.logx", &base), PLOG_FILE_OTHER);
	assert_int_equal(plog_parse_file_name("leader-epoch-checkpoint.tmp", &base), PLOG_FILE_TEMP);
	assert_int_equal(plog_parse_file_name("x", &base), PLOG_FILE_OTHER);
}

static void test_index_round_trip(void **state)
{
	(void)state;
	struct plog_index_entry e[3] = {{3, 100}, {9, 700}, {20, 1500}};
	struct plog_time_entry t[2] = {{1000, 3}, {2000, 20}};
	struct plog_index_header h = {.entry_count = 3, .log_size = 2000, .end_offset = 77,
				      .max_timestamp = 2500};
	uint8_t buf[256];
	size_t size = plog_index_file_size(3, PLOG_INDEX_ENTRY_SIZE);
	plog_index_encode(buf, &h, e);
	struct plog_index_header back;
	struct plog_index_entry eb[3];
	uint32_t count = 0;
	assert_int_equal(plog_index_peek_count(buf, size, false, &count), KEEL_OK);
	assert_int_equal(count, 3);
	assert_int_equal(plog_index_decode(buf, size, &back, eb), KEEL_OK);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(eb[i].relative_offset, e[i].relative_offset);
		assert_int_equal(eb[i].position, e[i].position);
	}
	assert_int_equal(back.log_size, 2000);
	assert_int_equal(back.end_offset, 77);
	assert_int_equal(back.max_timestamp, 2500);
	/* Any flipped bit, any shorter size: refused. */
	for (size_t i = 0; i < size; i++) {
		buf[i] ^= 4;
		assert_int_not_equal(plog_index_decode(buf, size, &back, eb), KEEL_OK);
		buf[i] ^= 4;
		assert_int_not_equal(plog_index_decode(buf, i, &back, eb), KEEL_OK);
	}
	/* The time index is not an offset index. */
	assert_int_not_equal(plog_index_peek_count(buf, size, true, &count), KEEL_OK);
	h.entry_count = 2;
	size = plog_index_file_size(2, PLOG_TIMEINDEX_ENTRY_SIZE);
	plog_timeindex_encode(buf, &h, t);
	struct plog_time_entry tb[2];
	assert_int_equal(plog_timeindex_decode(buf, size, &back, tb), KEEL_OK);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tb[i].timestamp, t[i].timestamp);
		assert_int_equal(tb[i].relative_offset, t[i].relative_offset);
	}
}

static void test_epoch_and_metadata_files(void **state)
{
	(void)state;
	struct plog_epoch_entry e[3] = {{0, 0}, {3, 10}, {7, 10}};
	uint8_t buf[128];
	size_t size = plog_epoch_file_size(3);
	plog_epoch_file_encode(buf, e, 3);
	struct plog_epoch_entry back[3];
	uint32_t count = 0;
	assert_int_equal(plog_epoch_file_decode(buf, size, back, 3, &count), KEEL_OK);
	assert_int_equal(count, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(back[i].epoch, e[i].epoch);
		assert_int_equal(back[i].start_offset, e[i].start_offset);
	}
	assert_int_equal(plog_epoch_file_decode(buf, size, back, 2, &count), KEEL_TOOBIG);
	for (size_t i = 0; i < size; i++) {
		buf[i] ^= 0x40;
		assert_int_not_equal(plog_epoch_file_decode(buf, size, back, 3, &count), KEEL_OK);
		buf[i] ^= 0x40;
	}
	/* Epochs that do not rise are refused even with a good checksum. */
	struct plog_epoch_entry bad[2] = {{5, 0}, {5, 10}};
	plog_epoch_file_encode(buf, bad, 2);
	assert_int_equal(plog_epoch_file_decode(buf, plog_epoch_file_size(2), back, 3, &count),
			 KEEL_CORRUPT);

	uint8_t id[PLOG_TOPIC_ID_SIZE];
	for (int i = 0; i < PLOG_TOPIC_ID_SIZE; i++) {
		id[i] = (uint8_t)(i * 17);
	}
	uint8_t meta[PLOG_METADATA_FILE_SIZE];
	plog_metadata_encode(meta, id);
	uint8_t id_back[PLOG_TOPIC_ID_SIZE];
	assert_int_equal(plog_metadata_decode(meta, sizeof(meta), id_back), KEEL_OK);
	assert_memory_equal(id, id_back, sizeof(id));
	meta[20] ^= 1;
	assert_int_equal(plog_metadata_decode(meta, sizeof(meta), id_back), KEEL_CORRUPT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_varint_round_trip),
		cmocka_unit_test(test_hand_built_batch),
		cmocka_unit_test(test_broken_batches),
		cmocka_unit_test(test_split_payload),
		cmocka_unit_test(test_real_batches_every_codec),
		cmocka_unit_test(test_kcat_batches_every_codec),
		cmocka_unit_test(test_file_names),
		cmocka_unit_test(test_index_round_trip),
		cmocka_unit_test(test_epoch_and_metadata_files),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
