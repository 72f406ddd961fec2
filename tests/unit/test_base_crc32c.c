/* Unit tests: CRC-32C against published vectors (RFC 3720 B.4 and the
 * "123456789" check value), hardware vs table, incremental use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/crc32c.h"
#include "base/rng.h"

static void test_check_value(void **state)
{
	(void)state;
	assert_int_equal(keel_crc32c(0, "123456789", 9), 0xE3069283u);
	assert_int_equal(keel_crc32c_sw(0, "123456789", 9), 0xE3069283u);
	assert_int_equal(keel_crc32c(0, "", 0), 0);
}

static void test_rfc3720_vectors(void **state)
{
	(void)state;
	uint8_t buf[32];
	memset(buf, 0, sizeof(buf));
	assert_int_equal(keel_crc32c(0, buf, 32), 0x8A9136AAu);
	memset(buf, 0xff, sizeof(buf));
	assert_int_equal(keel_crc32c(0, buf, 32), 0x62A8AB43u);
	for (int i = 0; i < 32; i++) {
		buf[i] = (uint8_t)i;
	}
	assert_int_equal(keel_crc32c(0, buf, 32), 0x46DD794Eu);
	for (int i = 0; i < 32; i++) {
		buf[i] = (uint8_t)(31 - i);
	}
	assert_int_equal(keel_crc32c(0, buf, 32), 0x113FDB5Cu);
	static const uint8_t iscsi_read[48] = {
		0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
		0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};
	assert_int_equal(keel_crc32c(0, iscsi_read, sizeof(iscsi_read)), 0xD9963A56u);
	assert_int_equal(keel_crc32c_sw(0, iscsi_read, sizeof(iscsi_read)), 0xD9963A56u);
}

static void test_hw_matches_sw_and_incremental(void **state)
{
	(void)state;
	struct keel_rng rng;
	keel_rng_seed(&rng, 42);
	uint8_t buf[4099];
	for (size_t i = 0; i < sizeof(buf); i++) {
		buf[i] = (uint8_t)keel_rng_next(&rng);
	}
	for (size_t len = 0; len < 300; len++) {
		size_t off = (size_t)keel_rng_below(&rng, 8);
		uint32_t a = keel_crc32c(0, buf + off, len);
		uint32_t b = keel_crc32c_sw(0, buf + off, len);
		assert_int_equal(a, b);
		size_t cut = len == 0 ? 0 : (size_t)keel_rng_below(&rng, len + 1);
		uint32_t c = keel_crc32c(keel_crc32c(0, buf + off, cut), buf + off + cut, len - cut);
		assert_int_equal(a, c);
	}
	assert_int_equal(keel_crc32c(0, buf, sizeof(buf)), keel_crc32c_sw(0, buf, sizeof(buf)));
	/* A single flipped bit changes the checksum. */
	uint32_t before = keel_crc32c(0, buf, sizeof(buf));
	buf[1000] ^= 0x10;
	assert_int_not_equal(before, keel_crc32c(0, buf, sizeof(buf)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_check_value),
		cmocka_unit_test(test_rfc3720_vectors),
		cmocka_unit_test(test_hw_matches_sw_and_incremental),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
