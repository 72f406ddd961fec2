/* Unit tests: WAL on-disk encodings (round trips, every rejection path),
 * file names, and the segment scanner's verdicts (clean end, torn last
 * batch, damage before a later batch, stale generations, disorder). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/buf.h"
#include "base/crc32c.h"
#include "wal/format.h"

static void test_segment_header_roundtrip(void **state)
{
	(void)state;
	struct wal_segment_header h = {.generation = 7, .first_index = 42,
				       .segment_size_bytes = 1 << 20, .prev_term = 3};
	uint8_t buf[WAL_SEGMENT_HEADER_SIZE];
	wal_segment_header_encode(buf, &h);
	assert_memory_equal(buf, "KEELWSEG", 8);
	struct wal_segment_header out;
	char why[128];
	assert_int_equal(wal_segment_header_decode(buf, sizeof(buf), &out, why, sizeof(why)), KEEL_OK);
	assert_int_equal(out.version, WAL_FORMAT_VERSION);
	assert_int_equal(out.generation, 7);
	assert_int_equal(out.first_index, 42);
	assert_int_equal(out.prev_term, 3);
	assert_int_equal(out.segment_size_bytes, 1 << 20);

	assert_int_equal(wal_segment_header_decode(buf, 63, &out, why, sizeof(why)), KEEL_SHORT);
	for (size_t i = 0; i < sizeof(buf); i++) { /* every flipped byte is caught */
		buf[i] ^= 0x10;
		assert_int_not_equal(wal_segment_header_decode(buf, sizeof(buf), &out, why, sizeof(why)),
				     KEEL_OK);
		buf[i] ^= 0x10;
	}
	/* A newer version with a valid checksum is refused as unsupported. */
	keel_store_be32(buf + 8, WAL_FORMAT_VERSION + 1);
	keel_store_be32(buf + 60, 0);
	keel_store_be32(buf + 60, keel_crc32c(0, buf, 60));
	assert_int_equal(wal_segment_header_decode(buf, sizeof(buf), &out, why, sizeof(why)),
			 KEEL_UNSUPPORTED);
	assert_non_null(strstr(why, "newer"));
}

static void test_record_roundtrip(void **state)
{
	(void)state;
	const char *payload = "hello, raft";
	struct wal_record rec = {.generation = 9, .term = 4, .index = 100, .batch_offset = 3,
				 .type = 2, .size = (uint32_t)strlen(payload),
				 .data = (const uint8_t *)payload};
	uint64_t size = wal_record_encoded_size(rec.size);
	assert_int_equal(size, 40 + 16);
	uint8_t buf[64];
	wal_record_encode(buf, &rec);
	struct wal_record out;
	assert_int_equal(wal_record_decode(buf, sizeof(buf), 9, 1024, &out), WAL_RECORD_OK);
	assert_int_equal(out.term, 4);
	assert_int_equal(out.index, 100);
	assert_int_equal(out.batch_offset, 3);
	assert_int_equal(out.type, 2);
	assert_int_equal(out.size, rec.size);
	assert_memory_equal(out.data, payload, rec.size);

	assert_int_equal(wal_record_decode(buf, sizeof(buf), 8, 1024, &out),
			 WAL_RECORD_OTHER_GENERATION);
	assert_int_equal(wal_record_decode(buf, sizeof(buf), 9, 4, &out), WAL_RECORD_BAD_SIZE);
	assert_int_equal(wal_record_decode(buf, 50, 9, 1024, &out), WAL_RECORD_SHORT);
	assert_int_equal(wal_record_decode(buf, 20, 9, 1024, &out), WAL_RECORD_SHORT);
	uint8_t zeros[64] = {0};
	assert_int_equal(wal_record_decode(zeros, sizeof(zeros), 9, 1024, &out), WAL_RECORD_EMPTY);
	assert_int_equal(wal_record_decode(zeros, 10, 9, 1024, &out), WAL_RECORD_EMPTY);
	/* Any flipped bit in the covered bytes breaks the checksum. */
	for (size_t i = 0; i < 40 + rec.size; i++) {
		if (i >= 8 && i < 16) {
			continue; /* the generation: reported as another generation */
		}
		buf[i] ^= 0x01;
		enum wal_record_check c = wal_record_decode(buf, sizeof(buf), 9, 1024, &out);
		assert_true(c == WAL_RECORD_BAD_CHECKSUM || c == WAL_RECORD_SHORT ||
			    c == WAL_RECORD_BAD_SIZE);
		buf[i] ^= 0x01;
	}
	/* The header-only encoder matches the full one. */
	uint8_t header[WAL_RECORD_HEADER_SIZE];
	wal_record_encode_header(header, &rec);
	assert_memory_equal(header, buf, sizeof(header));
}

static void test_hard_state_roundtrip(void **state)
{
	(void)state;
	uint8_t extra[5] = {1, 2, 3, 4, 5};
	struct wal_hard_state hs = {.term = 12, .voted_for = 3, .commit_index = 99,
				    .extra_size = 5, .extra = extra};
	size_t size = wal_hard_state_encoded_size(&hs);
	uint8_t *buf = malloc(size);
	wal_hard_state_encode(buf, &hs);
	struct wal_hard_state out;
	char why[128];
	assert_int_equal(wal_hard_state_decode(buf, size, &out, why, sizeof(why)), KEEL_OK);
	assert_int_equal(out.term, 12);
	assert_int_equal(out.voted_for, 3);
	assert_int_equal(out.commit_index, 99);
	assert_int_equal(out.extra_size, 5);
	assert_memory_equal(out.extra, extra, 5);
	for (size_t i = 0; i < size; i++) {
		buf[i] ^= 0x80;
		assert_int_not_equal(wal_hard_state_decode(buf, size, &out, why, sizeof(why)), KEEL_OK);
		buf[i] ^= 0x80;
	}
	assert_int_not_equal(wal_hard_state_decode(buf, size - 1, &out, why, sizeof(why)), KEEL_OK);
	assert_int_equal(wal_hard_state_decode(buf, 10, &out, why, sizeof(why)), KEEL_SHORT);
	free(buf);
}

static void test_snapshot_header_roundtrip(void **state)
{
	(void)state;
	const char *membership = "1,2,3";
	struct wal_snapshot_header h = {.index = 500, .term = 7, .payload_size = 1234,
					.payload_crc = 0xabcd, .membership_size = 5,
					.membership = (const uint8_t *)membership};
	uint8_t buf[WAL_SNAPSHOT_FIXED_SIZE + 5];
	wal_snapshot_header_encode(buf, &h);
	struct wal_snapshot_header out;
	size_t header_size;
	char why[128];
	assert_int_equal(wal_snapshot_header_decode(buf, sizeof(buf), 1024, &out, &header_size, why,
						    sizeof(why)),
			 KEEL_OK);
	assert_int_equal(header_size, sizeof(buf));
	assert_int_equal(out.index, 500);
	assert_int_equal(out.term, 7);
	assert_int_equal(out.payload_size, 1234);
	assert_int_equal(out.payload_crc, 0xabcd);
	assert_memory_equal(out.membership, membership, 5);
	assert_int_equal(wal_snapshot_header_decode(buf, sizeof(buf), 4, &out, &header_size, why,
						    sizeof(why)),
			 KEEL_TOOBIG);
	assert_int_equal(wal_snapshot_header_decode(buf, 50, 1024, &out, &header_size, why,
						    sizeof(why)),
			 KEEL_SHORT);
	assert_int_equal(header_size, sizeof(buf)); /* tells how much it needs */
	for (size_t i = 0; i < sizeof(buf); i++) {
		buf[i] ^= 0x04;
		assert_int_not_equal(wal_snapshot_header_decode(buf, sizeof(buf), 1024, &out,
								&header_size, why, sizeof(why)),
				     KEEL_OK);
		buf[i] ^= 0x04;
	}
}

static void test_file_names(void **state)
{
	(void)state;
	char name[WAL_NAME_MAX];
	uint64_t a;
	uint64_t b;
	wal_segment_name(name, 0x1f);
	assert_string_equal(name, "seg-000000000000001f.wal");
	assert_int_equal(wal_parse_file_name(name, &a, &b), WAL_FILE_SEGMENT);
	assert_int_equal(a, 0x1f);
	wal_spare_name(name, 5);
	assert_int_equal(wal_parse_file_name(name, &a, &b), WAL_FILE_SPARE);
	assert_int_equal(a, 5);
	wal_snapshot_name(name, 300, 4, false);
	assert_int_equal(wal_parse_file_name(name, &a, &b), WAL_FILE_SNAPSHOT);
	assert_int_equal(a, 300);
	assert_int_equal(b, 4);
	wal_snapshot_name(name, 300, 4, true);
	assert_int_equal(wal_parse_file_name(name, &a, &b), WAL_FILE_SNAPSHOT_TMP);
	assert_int_equal(wal_parse_file_name("hardstate", &a, &b), WAL_FILE_HARD_STATE);
	assert_int_equal(wal_parse_file_name("hardstate.tmp", &a, &b), WAL_FILE_HARD_STATE_TMP);
	assert_int_equal(wal_parse_file_name("seg-000000000000001F.wal", &a, &b), WAL_FILE_OTHER);
	assert_int_equal(wal_parse_file_name("seg-1.wal", &a, &b), WAL_FILE_OTHER);
	assert_int_equal(wal_parse_file_name("snap-0000000000000001-0000000000000001.snap.corrupt",
					     &a, &b),
			 WAL_FILE_OTHER);
	assert_int_equal(wal_parse_file_name("myid", &a, &b), WAL_FILE_OTHER);
}

/* ---- scanner ---- */

#define SEG_SIZE 4096

struct seg_builder {
	uint8_t data[SEG_SIZE];
	size_t offset;
	struct wal_segment_header header;
	uint64_t batch_first;
};

static void seg_init(struct seg_builder *b, uint64_t generation, uint64_t first_index)
{
	memset(b->data, 0, sizeof(b->data));
	b->header = (struct wal_segment_header){.generation = generation,
						.first_index = first_index,
						.segment_size_bytes = SEG_SIZE};
	wal_segment_header_encode(b->data, &b->header);
	b->offset = WAL_SEGMENT_HEADER_SIZE;
	b->batch_first = 0;
}

/* Appends a record; new_batch starts a new sync batch at this index. */
static size_t seg_add(struct seg_builder *b, uint64_t generation, uint64_t index, uint64_t term,
		      bool new_batch)
{
	if (new_batch || b->batch_first == 0) {
		b->batch_first = index;
	}
	uint8_t payload[20];
	memset(payload, (int)index, sizeof(payload));
	struct wal_record rec = {.generation = generation, .term = term, .index = index,
				 .batch_offset = (uint32_t)(index - b->batch_first),
				 .size = sizeof(payload), .data = payload};
	size_t at = b->offset;
	wal_record_encode(b->data + at, &rec);
	b->offset += (size_t)wal_record_encoded_size(rec.size);
	return at;
}

static void scan(struct seg_builder *b, uint64_t limit, struct wal_scan_result *r)
{
	assert_int_equal(wal_scan_segment(b->data, SEG_SIZE, &b->header, 0, limit, 1024, NULL, NULL,
					  r),
			 KEEL_OK);
}

static void test_scan_clean_and_limit(void **state)
{
	(void)state;
	struct seg_builder b;
	seg_init(&b, 3, 10);
	for (uint64_t i = 10; i < 15; i++) {
		seg_add(&b, 3, i, 1, i == 12);
	}
	struct wal_scan_result r;
	scan(&b, UINT64_MAX, &r);
	assert_int_equal(r.end, WAL_SCAN_CLEAN);
	assert_int_equal(r.record_count, 5);
	assert_int_equal(r.last_index, 14);
	assert_int_equal(r.end_offset, b.offset);
	scan(&b, 12, &r);
	assert_int_equal(r.end, WAL_SCAN_LIMIT);
	assert_int_equal(r.last_index, 12);
	scan(&b, 9, &r);
	assert_int_equal(r.end, WAL_SCAN_LIMIT);
	assert_int_equal(r.record_count, 0);
}

static void test_scan_stale_generation_is_clean(void **state)
{
	(void)state;
	/* A reused file: an old life (generation 2) left records 1..8; the new
	 * life (generation 5) wrote 1..3 of the same sizes over them. */
	struct seg_builder b;
	seg_init(&b, 2, 1);
	for (uint64_t i = 1; i <= 8; i++) {
		seg_add(&b, 2, i, 1, false);
	}
	b.header.generation = 5;
	wal_segment_header_encode(b.data, &b.header);
	b.offset = WAL_SEGMENT_HEADER_SIZE;
	for (uint64_t i = 1; i <= 3; i++) {
		seg_add(&b, 5, i, 2, false);
	}
	struct wal_scan_result r;
	scan(&b, UINT64_MAX, &r);
	assert_int_equal(r.end, WAL_SCAN_CLEAN); /* old record 4 does not count */
	assert_int_equal(r.last_index, 3);
}

static void test_scan_torn_last_batch(void **state)
{
	(void)state;
	struct seg_builder b;
	seg_init(&b, 4, 1);
	seg_add(&b, 4, 1, 1, true);
	seg_add(&b, 4, 2, 1, false);
	size_t third = seg_add(&b, 4, 3, 1, true); /* the last batch: 3..5 */
	seg_add(&b, 4, 4, 1, false);
	seg_add(&b, 4, 5, 1, false);
	/* Record 3 torn (payload damaged), 4 and 5 made it: still torn. */
	b.data[third + 45] ^= 0xff;
	struct wal_scan_result r;
	scan(&b, UINT64_MAX, &r);
	assert_int_equal(r.end, WAL_SCAN_TORN);
	assert_int_equal(r.last_index, 2);
	assert_int_equal(r.bad_offset, third);
	/* Record 3 entirely missing (zeros), 4 present: torn too. */
	memset(b.data + third, 0, 60);
	scan(&b, UINT64_MAX, &r);
	assert_int_equal(r.end, WAL_SCAN_TORN);
	assert_int_equal(r.last_index, 2);
	/* A partial last record and nothing after it. */
	seg_init(&b, 4, 1);
	seg_add(&b, 4, 1, 1, true);
	size_t second = seg_add(&b, 4, 2, 1, false);
	memset(b.data + second + 30, 0, 30);
	scan(&b, UINT64_MAX, &r);
	assert_int_equal(r.end, WAL_SCAN_TORN);
	assert_int_equal(r.last_index, 1);
}

static void test_scan_damage_before_later_batch_is_corrupt(void **state)
{
	(void)state;
	struct seg_builder b;
	seg_init(&b, 4, 1);
	seg_add(&b, 4, 1, 1, true);
	size_t second = seg_add(&b, 4, 2, 1, false);
	seg_add(&b, 4, 3, 1, true); /* a later batch proves 2 was synced */
	b.data[second + 50] ^= 0x01;
	struct wal_scan_result r;
	scan(&b, UINT64_MAX, &r);
	assert_int_equal(r.end, WAL_SCAN_CORRUPT);
	assert_int_equal(r.bad_offset, second);
	assert_int_equal(r.last_index, 1);
	assert_non_null(strstr(r.reason, "later sync batch"));
	/* Also when the damage hits the generation field (looks stale). */
	b.data[second + 50] ^= 0x01;
	b.data[second + 9] ^= 0x01;
	scan(&b, UINT64_MAX, &r);
	assert_int_equal(r.end, WAL_SCAN_CORRUPT);
}

static void test_scan_disorder_is_corrupt(void **state)
{
	(void)state;
	struct seg_builder b;
	seg_init(&b, 4, 1);
	seg_add(&b, 4, 1, 2, true);
	seg_add(&b, 4, 3, 2, false); /* skips 2 */
	struct wal_scan_result r;
	scan(&b, UINT64_MAX, &r);
	assert_int_equal(r.end, WAL_SCAN_CORRUPT);
	assert_int_equal(r.last_index, 1);
	seg_init(&b, 4, 1);
	seg_add(&b, 4, 1, 2, true);
	seg_add(&b, 4, 2, 1, false); /* term goes back */
	scan(&b, UINT64_MAX, &r);
	assert_int_equal(r.end, WAL_SCAN_CORRUPT);
	assert_non_null(strstr(r.reason, "term"));
}

static enum keel_err count_cb(void *arg, const struct wal_record *rec, uint64_t offset)
{
	(void)offset;
	uint64_t *sum = arg;
	*sum += rec->index;
	return rec->index == 3 ? KEEL_CANCELED : KEEL_OK;
}

static void test_scan_callback_error_stops(void **state)
{
	(void)state;
	struct seg_builder b;
	seg_init(&b, 4, 1);
	for (uint64_t i = 1; i <= 5; i++) {
		seg_add(&b, 4, i, 1, false);
	}
	uint64_t sum = 0;
	struct wal_scan_result r;
	assert_int_equal(wal_scan_segment(b.data, SEG_SIZE, &b.header, 0, UINT64_MAX, 1024, count_cb,
					  &sum, &r),
			 KEEL_CANCELED);
	assert_int_equal(sum, 1 + 2 + 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_segment_header_roundtrip),
		cmocka_unit_test(test_record_roundtrip),
		cmocka_unit_test(test_hard_state_roundtrip),
		cmocka_unit_test(test_snapshot_header_roundtrip),
		cmocka_unit_test(test_file_names),
		cmocka_unit_test(test_scan_clean_and_limit),
		cmocka_unit_test(test_scan_stale_generation_is_clean),
		cmocka_unit_test(test_scan_torn_last_batch),
		cmocka_unit_test(test_scan_damage_before_later_batch_is_corrupt),
		cmocka_unit_test(test_scan_disorder_is_corrupt),
		cmocka_unit_test(test_scan_callback_error_stops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
