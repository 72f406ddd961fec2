/* Unit tests: big-endian reader/writer bounds checks and sticky failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/buf.h"

static void test_roundtrip(void **state)
{
	(void)state;
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 1024);
	keel_wbuf_u8(&w, 0xab);
	keel_wbuf_u16(&w, 0x1234);
	keel_wbuf_u32(&w, 0xdeadbeef);
	keel_wbuf_u64(&w, 0x0102030405060708ull);
	keel_wbuf_i32(&w, -5);
	keel_wbuf_i64(&w, -1234567890123ll);
	keel_wbuf_bool(&w, true);
	keel_wbuf_bytes(&w, "hello", 5);
	assert_true(keel_wbuf_ok(&w));
	assert_int_equal(w.size, 1 + 2 + 4 + 8 + 4 + 8 + 1 + 5);
	/* Big-endian on the wire, whatever the host. */
	assert_int_equal(w.data[1], 0x12);
	assert_int_equal(w.data[2], 0x34);
	assert_int_equal(w.data[3], 0xde);

	struct keel_rbuf r;
	keel_rbuf_init(&r, w.data, w.size);
	assert_int_equal(keel_rbuf_u8(&r), 0xab);
	assert_int_equal(keel_rbuf_u16(&r), 0x1234);
	assert_int_equal(keel_rbuf_u32(&r), 0xdeadbeef);
	assert_true(keel_rbuf_u64(&r) == 0x0102030405060708ull);
	assert_int_equal(keel_rbuf_i32(&r), -5);
	assert_true(keel_rbuf_i64(&r) == -1234567890123ll);
	assert_true(keel_rbuf_bool(&r));
	const uint8_t *p = keel_rbuf_bytes(&r, 5);
	assert_non_null(p);
	assert_memory_equal(p, "hello", 5);
	assert_true(keel_rbuf_done(&r));
	keel_wbuf_free(&w);
}

static void test_reader_short_input_is_sticky(void **state)
{
	(void)state;
	uint8_t data[6] = {0, 0, 0, 7, 1, 2};
	struct keel_rbuf r;
	keel_rbuf_init(&r, data, sizeof(data));
	assert_int_equal(keel_rbuf_u32(&r), 7);
	assert_int_equal(keel_rbuf_u32(&r), 0); /* only 2 bytes left */
	assert_false(keel_rbuf_ok(&r));
	/* Later reads fail too, even ones that would fit. */
	assert_int_equal(keel_rbuf_u8(&r), 0);
	assert_null(keel_rbuf_bytes(&r, 1));
	assert_int_equal(keel_rbuf_remaining(&r), 0);
	assert_false(keel_rbuf_done(&r));
}

static void test_reader_huge_length(void **state)
{
	(void)state;
	uint8_t data[4] = {1, 2, 3, 4};
	struct keel_rbuf r;
	keel_rbuf_init(&r, data, sizeof(data));
	keel_rbuf_u8(&r);
	/* A length close to SIZE_MAX must not wrap the bounds check. */
	assert_null(keel_rbuf_bytes(&r, SIZE_MAX));
	assert_false(keel_rbuf_ok(&r));
}

static void test_reader_bool_rejects_other_values(void **state)
{
	(void)state;
	uint8_t data[2] = {1, 2};
	struct keel_rbuf r;
	keel_rbuf_init(&r, data, sizeof(data));
	assert_true(keel_rbuf_bool(&r));
	assert_true(keel_rbuf_ok(&r));
	assert_false(keel_rbuf_bool(&r));
	assert_false(keel_rbuf_ok(&r));
}

static void test_fixed_writer_overflow(void **state)
{
	(void)state;
	uint8_t mem[6];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, mem, sizeof(mem));
	keel_wbuf_u32(&w, 1);
	assert_true(keel_wbuf_ok(&w));
	keel_wbuf_u32(&w, 2); /* does not fit */
	assert_false(keel_wbuf_ok(&w));
	assert_int_equal(w.size, 4);
	keel_wbuf_u8(&w, 3); /* sticky */
	assert_int_equal(w.size, 4);
	keel_wbuf_reset(&w);
	assert_true(keel_wbuf_ok(&w));
	keel_wbuf_u16(&w, 9);
	assert_int_equal(w.size, 2);
}

static void test_dynamic_writer_limit(void **state)
{
	(void)state;
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 4, 100);
	for (int i = 0; i < 25; i++) {
		keel_wbuf_u32(&w, (uint32_t)i);
	}
	assert_true(keel_wbuf_ok(&w));
	assert_int_equal(w.size, 100);
	keel_wbuf_u8(&w, 1);
	assert_false(keel_wbuf_ok(&w));
	assert_int_equal(w.size, 100);
	size_t size;
	assert_null(keel_wbuf_release(&w, &size));
	keel_wbuf_free(&w);

	keel_wbuf_init_dynamic(&w, 0, 1 << 20);
	keel_wbuf_zero(&w, 3000);
	keel_wbuf_patch_u32(&w, 10, 0x01020304);
	uint8_t *data = keel_wbuf_release(&w, &size);
	assert_non_null(data);
	assert_int_equal(size, 3000);
	assert_int_equal(data[10], 1);
	assert_int_equal(data[13], 4);
	free(data);
	keel_wbuf_free(&w);
}

static void test_patch_out_of_range(void **state)
{
	(void)state;
	uint8_t mem[16];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, mem, sizeof(mem));
	keel_wbuf_u16(&w, 1);
	keel_wbuf_patch_u32(&w, 0, 5); /* only 2 bytes written */
	assert_false(keel_wbuf_ok(&w));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_reader_short_input_is_sticky),
		cmocka_unit_test(test_reader_huge_length),
		cmocka_unit_test(test_reader_bool_rejects_other_values),
		cmocka_unit_test(test_fixed_writer_overflow),
		cmocka_unit_test(test_dynamic_writer_limit),
		cmocka_unit_test(test_patch_out_of_range),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
