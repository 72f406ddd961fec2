/* Unit tests: keel_fmt (base/fmt.h) gives the bytes snprintf gives for
 * every conversion it supports, truncates and terminates like it, and
 * reports the untruncated length. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/fmt.h"

/* Truncation is what the second test is about. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

/* Formats with both and compares output and returned length. */
#define SAME(size, ...)                                          \
	do {                                                     \
		char a[size], b[size];                           \
		memset(a, 'x', sizeof(a));                       \
		memset(b, 'x', sizeof(b));                       \
		size_t la = keel_fmt(a, sizeof(a), __VA_ARGS__); \
		int lb = snprintf(b, sizeof(b), __VA_ARGS__);    \
		assert_int_equal(la, (size_t)lb);                \
		assert_string_equal(a, b);                       \
	} while (0)

static void test_conversions(void **state)
{
	(void)state;
	SAME(64, "plain text");
	SAME(64, "%d %i %d", 0, -17, 2147483647);
	SAME(64, "%d", (int)-2147483647 - 1);
	SAME(64, "%u %x %X", 4000000000u, 0xbeefu, 0xbeefu);
	SAME(64, "%llu %lld", 18446744073709551615ull, (long long)INT64_MIN);
	SAME(64, "%lu %ld %zu %jd", 7ul, -7l, (size_t)12345, (intmax_t)-9);
	SAME(64, "%hhu %hd", (unsigned char)200, (short)-300);
	SAME(64, "[%5d] [%-5d] [%05d] [%05d]", 42, 42, 42, -42);
	SAME(64, "[%08llx]", 0xabcull);
	SAME(64, "[%s] [%10s] [%-10s] [%.3s] [%.*s]", "abc", "abc", "abc", "abcdef", 2, "xyz");
	SAME(64, "%c%c 100%%", 'o', 'k');
	SAME(64, "%s", "");
}

static void test_truncation(void **state)
{
	(void)state;
	SAME(8, "0123456789 %d", 12345);
	SAME(1, "abc");
	SAME(5, "%s", "abcd");
	SAME(5, "%s", "abcde");
	char one[4] = "zzz";
	assert_int_equal(keel_fmt(one, 0, "%d", 123), 3u);
	assert_string_equal(one, "zzz"); /* size 0: nothing written */
}

static void test_pointer(void **state)
{
	(void)state;
	char a[32], b[32];
	int x;
	keel_fmt(a, sizeof(a), "%p", (void *)&x);
	snprintf(b, sizeof(b), "%p", (void *)&x);
	assert_string_equal(a, b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_conversions),
	        cmocka_unit_test(test_truncation),
	        cmocka_unit_test(test_pointer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
