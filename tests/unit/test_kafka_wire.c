/* Unit tests: Kafka primitives — varints against the spec's encodings,
 * classic and compact strings/bytes/arrays, null rules, tagged fields
 * (unknown skipped, known decoded, limits), sticky failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kafka/io.h"
#include "kafka/wire.h"

#include "test_kafka_util.h"

static void test_uvarint_encodings(void **state)
{
	(void)state;
	static const struct {
		uint32_t v;
		uint8_t bytes[5];
		size_t size;
	} cases[] = {
	        {0, {0x00}, 1},         {1, {0x01}, 1},
	        {127, {0x7f}, 1},       {128, {0x80, 0x01}, 2},
	        {300, {0xac, 0x02}, 2}, {UINT32_MAX, {0xff, 0xff, 0xff, 0xff, 0x0f}, 5},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 8, 64);
		kafka_write_uvarint(&w, cases[i].v);
		assert_int_equal(w.size, cases[i].size);
		assert_int_equal(kafka_uvarint_size(cases[i].v), cases[i].size);
		assert_memory_equal(w.data, cases[i].bytes, cases[i].size);
		struct keel_rbuf r;
		keel_rbuf_init(&r, w.data, w.size);
		assert_int_equal(kafka_read_uvarint(&r), cases[i].v);
		assert_true(keel_rbuf_done(&r));
		keel_wbuf_free(&w);
	}
}

static void test_zigzag_varints(void **state)
{
	(void)state;
	/* Zigzag: 0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3. */
	static const int32_t small[] = {0, -1, 1, -2};
	for (size_t i = 0; i < 4; i++) {
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 8, 64);
		kafka_write_varint(&w, small[i]);
		assert_int_equal(w.size, 1);
		assert_int_equal(w.data[0], i);
		keel_wbuf_free(&w);
	}
	static const int32_t v32[] = {0, 63, -64, 64, INT32_MAX, INT32_MIN, -123456};
	for (size_t i = 0; i < sizeof(v32) / sizeof(v32[0]); i++) {
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 8, 64);
		kafka_write_varint(&w, v32[i]);
		assert_true(w.size <= 5);
		struct keel_rbuf r;
		keel_rbuf_init(&r, w.data, w.size);
		assert_int_equal(kafka_read_varint(&r), v32[i]);
		assert_true(keel_rbuf_done(&r));
		keel_wbuf_free(&w);
	}
	static const int64_t v64[] = {0, -1, INT64_MAX, INT64_MIN, 1700000000000, -9};
	for (size_t i = 0; i < sizeof(v64) / sizeof(v64[0]); i++) {
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 8, 64);
		kafka_write_varlong(&w, v64[i]);
		assert_true(w.size <= 10);
		struct keel_rbuf r;
		keel_rbuf_init(&r, w.data, w.size);
		assert_true(kafka_read_varlong(&r) == v64[i]);
		assert_true(keel_rbuf_done(&r));
		keel_wbuf_free(&w);
	}
}

static void test_overlong_varints_fail(void **state)
{
	(void)state;
	static const uint8_t six[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
	struct keel_rbuf r;
	keel_rbuf_init(&r, six, sizeof(six));
	assert_int_equal(kafka_read_uvarint(&r), 0);
	assert_false(keel_rbuf_ok(&r));
	/* Five bytes whose value does not fit 32 bits. */
	static const uint8_t big[] = {0xff, 0xff, 0xff, 0xff, 0x1f};
	keel_rbuf_init(&r, big, sizeof(big));
	kafka_read_uvarint(&r);
	assert_false(keel_rbuf_ok(&r));
	static const uint8_t eleven[] = {0xff, 0xff, 0xff, 0xff, 0xff,
	                                 0xff, 0xff, 0xff, 0xff, 0x02};
	keel_rbuf_init(&r, eleven, sizeof(eleven));
	kafka_read_varlong(&r);
	assert_false(keel_rbuf_ok(&r));
	static const uint8_t cut[] = {0x80};
	keel_rbuf_init(&r, cut, sizeof(cut));
	kafka_read_uvarint(&r);
	assert_false(keel_rbuf_ok(&r));
}

/* Encodes a string in classic and compact forms and reads it back. */
static void test_strings_both_forms(void **state)
{
	(void)state;
	for (int flexible = 0; flexible < 2; flexible++) {
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 16, 1024);
		struct kafka_io io;
		kafka_io_writer(&io, &w, 0, flexible);
		struct kafka_str a = kafka_str("hello"), n = KAFKA_STR_NULL, e = kafka_str("");
		kio_str(&io, &a, false);
		kio_str(&io, &n, true);
		kio_str(&io, &e, false);
		assert_int_equal(kafka_io_finish(&io), KEEL_OK);
		if (flexible) {
			static const uint8_t want[] = {6, 'h', 'e', 'l', 'l', 'o', 0, 1};
			assert_int_equal(w.size, sizeof(want));
			assert_memory_equal(w.data, want, sizeof(want));
		} else {
			static const uint8_t want[] = {0,   5,    'h',  'e', 'l', 'l',
			                               'o', 0xff, 0xff, 0,   0};
			assert_int_equal(w.size, sizeof(want));
			assert_memory_equal(w.data, want, sizeof(want));
		}
		kafka_io_reader(&io, w.data, w.size, 0, flexible, &arena, &limits);
		struct kafka_str ra, rn, re;
		kio_str(&io, &ra, false);
		kio_str(&io, &rn, true);
		kio_str(&io, &re, false);
		assert_int_equal(kafka_io_finish(&io), KEEL_OK);
		assert_true(kafka_str_eq(ra, "hello"));
		assert_int_equal(rn.len, -1);
		assert_true(kafka_str_eq(re, ""));
		/* A null where the field is not nullable is refused both ways. */
		kafka_io_reader(&io, w.data, w.size, 0, flexible, &arena, &limits);
		kio_str(&io, &ra, false);
		kio_str(&io, &rn, false);
		assert_int_equal(kafka_io_finish(&io), KEEL_CORRUPT);
		keel_wbuf_reset(&w);
		kafka_io_writer(&io, &w, 0, flexible);
		kio_str(&io, &n, false);
		assert_int_equal(kafka_io_finish(&io), KEEL_INVAL);
		keel_wbuf_free(&w);
	}
}

static void test_bad_lengths_and_bools(void **state)
{
	(void)state;
	struct kafka_io io;
	struct kafka_str s;
	static const uint8_t neg[] = {0xff, 0xfe};
	kafka_io_reader(&io, neg, sizeof(neg), 0, false, &arena, &limits);
	kio_str(&io, &s, true);
	assert_int_equal(kafka_io_finish(&io), KEEL_CORRUPT);
	static const uint8_t longer[] = {0, 9, 'a'};
	kafka_io_reader(&io, longer, sizeof(longer), 0, false, &arena, &limits);
	kio_str(&io, &s, false);
	assert_int_equal(kafka_io_finish(&io), KEEL_SHORT);
	static const uint8_t two[] = {2};
	bool b;
	kafka_io_reader(&io, two, sizeof(two), 0, false, &arena, &limits);
	kio_bool(&io, &b);
	assert_int_equal(kafka_io_finish(&io), KEEL_CORRUPT);
	static const uint8_t extra[] = {1, 0};
	kafka_io_reader(&io, extra, sizeof(extra), 0, false, &arena, &limits);
	kio_bool(&io, &b);
	assert_true(b);
	assert_int_equal(kafka_io_finish(&io), KEEL_CORRUPT); /* left over */
	/* Sticky: after a failure later fields read nothing. */
	static const uint8_t data[] = {0x02, 0, 0, 0, 7};
	int32_t v = 99;
	kafka_io_reader(&io, data, sizeof(data), 0, false, &arena, &limits);
	kio_bool(&io, &b);
	kio_i32(&io, &v);
	assert_int_equal(v, 0);
	assert_int_equal(kafka_io_finish(&io), KEEL_CORRUPT);
}

static void test_arrays_checked_before_allocation(void **state)
{
	(void)state;
	struct kafka_io io;
	struct kafka_i32_array a;
	/* A count of 2^31-1 with 8 bytes behind it: refused, nothing allocated. */
	static const uint8_t huge[] = {0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 2};
	size_t before = arena.total;
	struct kafka_limits big = limits;
	big.max_array_count = UINT32_MAX;
	kafka_io_reader(&io, huge, sizeof(huge), 0, false, &arena, &big);
	kio_i32_array(&io, &a, false);
	assert_int_equal(kafka_io_finish(&io), KEEL_SHORT);
	assert_int_equal(arena.total, before);
	/* Over the configured maximum: TOOBIG, even when the bytes are there. */
	static const uint8_t three[] = {0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3};
	struct kafka_limits two = limits;
	two.max_array_count = 2;
	kafka_io_reader(&io, three, sizeof(three), 0, false, &arena, &two);
	kio_i32_array(&io, &a, false);
	assert_int_equal(kafka_io_finish(&io), KEEL_TOOBIG);
	kafka_io_reader(&io, three, sizeof(three), 0, false, &arena, &limits);
	kio_i32_array(&io, &a, false);
	assert_int_equal(kafka_io_finish(&io), KEEL_OK);
	assert_int_equal(a.count, 3);
	assert_int_equal(a.items[2], 3);
	/* Compact: a uvarint count of 2^32-1 (count 2^32-2) with nothing behind. */
	static const uint8_t compact[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
	before = arena.total;
	kafka_io_reader(&io, compact, sizeof(compact), 0, true, &arena, &big);
	kio_i32_array(&io, &a, false);
	assert_int_not_equal(kafka_io_finish(&io), KEEL_OK);
	assert_int_equal(arena.total, before);
	/* Null arrays: compact 0, classic -1; refused where not nullable. */
	static const uint8_t cnull[] = {0};
	kafka_io_reader(&io, cnull, sizeof(cnull), 0, true, &arena, &limits);
	kio_i32_array(&io, &a, true);
	assert_int_equal(kafka_io_finish(&io), KEEL_OK);
	assert_int_equal(a.count, -1);
	kafka_io_reader(&io, cnull, sizeof(cnull), 0, true, &arena, &limits);
	kio_i32_array(&io, &a, false);
	assert_int_equal(kafka_io_finish(&io), KEEL_CORRUPT);
}

struct two_ints {
	int32_t a, b;
};

static void walk_two_ints(struct kafka_io *io, void *obj)
{
	struct two_ints *t = obj;
	kio_i32(io, &t->a);
	kio_i32(io, &t->b);
}

static void test_tagged_fields(void **state)
{
	(void)state;
	bool has = true;
	struct two_ints t = {7, -8};
	const struct kio_tag tags[] = {{3, &has, walk_two_ints, &t}};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 16, 1024);
	struct kafka_io io;
	kafka_io_writer(&io, &w, 0, true);
	kio_tags(&io, tags, 1);
	assert_int_equal(kafka_io_finish(&io), KEEL_OK);
	static const uint8_t want[] = {1, 3, 8, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xf8};
	assert_int_equal(w.size, sizeof(want));
	assert_memory_equal(w.data, want, sizeof(want));
	/* Known tag read back; an unknown tag before and after is skipped. */
	static const uint8_t with_unknown[] = {3, 1, 2, 0xaa, 0xbb, 3,  8,  0, 0,
	                                       0, 9, 0, 0,    0,    10, 40, 1, 0xcc};
	struct two_ints got = {0, 0};
	has = false;
	const struct kio_tag rtags[] = {{3, &has, walk_two_ints, &got}};
	kafka_io_reader(&io, with_unknown, sizeof(with_unknown), 0, true, &arena, &limits);
	kio_tags(&io, rtags, 1);
	assert_int_equal(kafka_io_finish(&io), KEEL_OK);
	assert_true(has);
	assert_int_equal(got.a, 9);
	assert_int_equal(got.b, 10);
	/* Out of order, a known field too short or too long, too many fields. */
	static const uint8_t unordered[] = {2, 5, 0, 4, 0};
	kafka_io_reader(&io, unordered, sizeof(unordered), 0, true, &arena, &limits);
	kio_tags(&io, rtags, 1);
	assert_int_equal(kafka_io_finish(&io), KEEL_CORRUPT);
	static const uint8_t short_known[] = {1, 3, 4, 0, 0, 0, 9};
	kafka_io_reader(&io, short_known, sizeof(short_known), 0, true, &arena, &limits);
	kio_tags(&io, rtags, 1);
	assert_int_equal(kafka_io_finish(&io), KEEL_CORRUPT);
	static const uint8_t long_known[] = {1, 3, 9, 0, 0, 0, 9, 0, 0, 0, 10, 0};
	kafka_io_reader(&io, long_known, sizeof(long_known), 0, true, &arena, &limits);
	kio_tags(&io, rtags, 1);
	assert_int_equal(kafka_io_finish(&io), KEEL_CORRUPT);
	static const uint8_t many[] = {100};
	kafka_io_reader(&io, many, sizeof(many), 0, true, &arena, &limits);
	kio_tags(&io, rtags, 1);
	assert_int_equal(kafka_io_finish(&io), KEEL_TOOBIG);
	/* Not flexible: no tag section at all. */
	keel_wbuf_reset(&w);
	kafka_io_writer(&io, &w, 0, false);
	has = true;
	kio_tags(&io, tags, 1);
	assert_int_equal(kafka_io_finish(&io), KEEL_OK);
	assert_int_equal(w.size, 0);
	keel_wbuf_free(&w);
}

/* Strings stop at 32767 bytes in both forms, reading and writing. */
static void test_string_size_cap(void **state)
{
	(void)state;
	char *big = malloc(40000);
	memset(big, 'x', 40000);
	for (int flexible = 0; flexible < 2; flexible++) {
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 16, 1 << 20);
		struct kafka_io io;
		kafka_io_writer(&io, &w, 0, flexible);
		struct kafka_str s = {big, 32767};
		kio_str(&io, &s, false);
		assert_int_equal(kafka_io_finish(&io), KEEL_OK);
		kafka_io_reader(&io, w.data, w.size, 0, flexible, &arena, &limits);
		struct kafka_str r;
		kio_str(&io, &r, false);
		assert_int_equal(kafka_io_finish(&io), KEEL_OK);
		assert_int_equal(r.len, 32767);
		keel_wbuf_reset(&w);
		kafka_io_writer(&io, &w, 0, flexible);
		s.len = 32768;
		kio_str(&io, &s, false);
		assert_int_equal(kafka_io_finish(&io), KEEL_INVAL);
		keel_wbuf_free(&w);
	}
	/* A compact string of 32768 bytes (uvarint 32769) is refused. */
	uint8_t *wire = malloc(32768 + 3);
	wire[0] = 0x81;
	wire[1] = 0x80;
	wire[2] = 0x02;
	memset(wire + 3, 'y', 32768);
	struct kafka_io io;
	struct kafka_str r;
	kafka_io_reader(&io, wire, 32768 + 3, 0, true, &arena, &limits);
	kio_str(&io, &r, false);
	assert_int_equal(kafka_io_finish(&io), KEEL_CORRUPT);
	free(wire);
	free(big);
}

static void test_str_helpers(void **state)
{
	(void)state;
	assert_true(kafka_str_eq(kafka_str("abc"), "abc"));
	assert_false(kafka_str_eq(kafka_str("abc"), "abcd"));
	assert_false(kafka_str_eq(KAFKA_STR_NULL, ""));
	assert_true(kafka_str_same(KAFKA_STR_NULL, KAFKA_STR_NULL));
	assert_false(kafka_str_same(KAFKA_STR_NULL, kafka_str("")));
	assert_true(kafka_str_same(kafka_str("x"), (struct kafka_str){"xy", 1}));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_uvarint_encodings),
	        cmocka_unit_test(test_zigzag_varints),
	        cmocka_unit_test(test_overlong_varints_fail),
	        cmocka_unit_test(test_strings_both_forms),
	        cmocka_unit_test(test_bad_lengths_and_bools),
	        cmocka_unit_test(test_arrays_checked_before_allocation),
	        cmocka_unit_test(test_tagged_fields),
	        cmocka_unit_test(test_string_size_cap),
	        cmocka_unit_test(test_str_helpers),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
