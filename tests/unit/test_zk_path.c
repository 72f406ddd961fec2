/*
 * Unit tests: znode path validation (zk_path.h).
 *
 * The verdicts in tests/unit/data/zk/path_validity.txt come from Apache
 * ZooKeeper 3.8 itself (setData answers BadArguments before looking the
 * node up), so these tests pin keel to the real server's PathUtils,
 * including its UTF-16 ranges seen through UTF-8.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "zk/zk_path.h"
#include "base/sort.h"

static bool valid(const char *p)
{
	return zk_path_validate(p, strlen(p), NULL);
}

static void test_basic_rules(void **state)
{
	(void)state;
	struct zk_path_error err;
	assert_true(valid("/"));
	assert_true(valid("/a"));
	assert_true(valid("/a/b/c"));
	assert_false(zk_path_validate(NULL, 0, &err));
	assert_int_equal(err.reason, ZK_PATH_NULL);
	assert_false(zk_path_validate("", 0, &err));
	assert_int_equal(err.reason, ZK_PATH_EMPTY);
	assert_false(zk_path_validate("a/b", 3, &err));
	assert_int_equal(err.reason, ZK_PATH_NO_LEADING_SLASH);
	assert_false(zk_path_validate("/a/", 3, &err));
	assert_int_equal(err.reason, ZK_PATH_TRAILING_SLASH);
	assert_false(zk_path_validate("/a//b", 5, &err));
	assert_int_equal(err.reason, ZK_PATH_EMPTY_NAME);
	assert_int_equal(err.offset, 3);
	assert_false(zk_path_validate("/a/./b", 6, &err));
	assert_int_equal(err.reason, ZK_PATH_RELATIVE);
	assert_false(zk_path_validate("/a/..", 5, &err));
	assert_int_equal(err.reason, ZK_PATH_RELATIVE);
	assert_false(zk_path_validate("/a\0b", 4, &err));
	assert_int_equal(err.reason, ZK_PATH_NUL_CHAR);
	assert_int_equal(err.offset, 2);
	assert_false(zk_path_validate("/a\x01", 3, &err));
	assert_int_equal(err.reason, ZK_PATH_INVALID_CHAR);
	assert_string_equal(zk_path_reason_message(ZK_PATH_TRAILING_SLASH),
			    "Path must not end with / character");
	assert_true(valid("/..."));
	assert_true(valid("/.a"));
	assert_true(valid("/a.."));
}

static void test_sequential_rule(void **state)
{
	(void)state;
	/* A sequential create may end in '/': the suffix is validated too. */
	assert_true(zk_path_validate_seq("/a/", 3, NULL));
	assert_true(zk_path_validate_seq("/", 1, NULL));
	assert_true(zk_path_validate_seq("/a/b-", 5, NULL));
	assert_false(zk_path_validate("/a/", 3, NULL));
	assert_false(zk_path_validate_seq("/a//", 4, NULL));
	assert_false(zk_path_validate_seq("a", 1, NULL));
	/* "/a/." + "1" is the valid name ".1". */
	assert_true(zk_path_validate_seq("/a/.", 4, NULL));
	assert_false(zk_path_validate("/a/.", 4, NULL));
}

static void test_format_seq(void **state)
{
	(void)state;
	char out[11];
	size_t n = zk_path_format_seq(out, 0);
	assert_int_equal(n, 10);
	assert_memory_equal(out, "0000000000", 10);
	n = zk_path_format_seq(out, 42);
	assert_memory_equal(out, "0000000042", n);
	n = zk_path_format_seq(out, 2147483647);
	assert_int_equal(n, 10);
	assert_memory_equal(out, "2147483647", 10);
	/* Java's %010d counts the sign in the width. */
	n = zk_path_format_seq(out, -1);
	assert_int_equal(n, 10);
	assert_memory_equal(out, "-000000001", 10);
	n = zk_path_format_seq(out, INT32_MIN);
	assert_int_equal(n, 11);
	assert_memory_equal(out, "-2147483648", 11);
}

static int hexval(char c)
{
	return c <= '9' ? c - '0' : c - 'a' + 10;
}

static void test_against_zookeeper(void **state)
{
	(void)state;
	const char *dir = getenv("KEEL_TEST_DATA");
	assert_non_null(dir);
	char file[1024];
	snprintf(file, sizeof(file), "%s/zk/path_validity.txt", dir);
	FILE *f = fopen(file, "r");
	assert_non_null(f);
	char line[512];
	int cases = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (line[0] == '#') {
			continue;
		}
		char hex[256];
		char verdict[16];
		assert_int_equal(sscanf(line, "%255s %15s", hex, verdict), 2);
		char path[128];
		size_t n = 0;
		if (strcmp(hex, "-") != 0) {
			for (size_t i = 0; hex[i] != '\0'; i += 2) {
				path[n++] = (char)(hexval(hex[i]) << 4 | hexval(hex[i + 1]));
			}
		}
		bool want = strcmp(verdict, "valid") == 0;
		bool got = zk_path_validate(path, n, NULL);
		if (got != want) {
			print_error("path %s: keel says %d, ZooKeeper %d\n", hex, got, want);
		}
		assert_int_equal(got, want);
		cases++;
	}
	fclose(f);
	assert_true(cases >= 50);
}

static void test_helpers(void **state)
{
	(void)state;
	assert_int_equal(zk_path_last_slash("/a/b", 4), 2);
	assert_int_equal(zk_path_last_slash("/a", 2), 0);
	assert_int_equal(zk_path_last_slash("ab", 2), -1);
	assert_true(zk_path_has_nul("a\0", 2));
	assert_false(zk_path_has_nul("ab", 2));
}

/* zk_path_spans_sort (getEphemerals, closeSession, housekeeping): byte
 * order with a prefix first, O(n log n) comparisons on a descending order. */
static void test_spans_sort(void **state)
{
	(void)state;
	const char *text = "/b/a/a/z/a/ab";
	struct zk_path_span small[5] = {{0, 2}, {2, 2}, {4, 2}, {6, 2}, {10, 3}};
	zk_path_spans_sort(small, 5, sizeof(small[0]), (const uint8_t *)text);
	const char *want[5] = {"/a", "/a", "/ab", "/b", "/z"};
	for (int i = 0; i < 5; i++) {
		assert_int_equal(small[i].size, strlen(want[i]));
		assert_memory_equal(text + small[i].offset, want[i], small[i].size);
	}
	enum { N = 100000, W = 9 };
	char *paths = malloc((size_t)N * W);
	struct zk_path_span *spans = malloc(N * sizeof(*spans));
	assert_non_null(paths);
	assert_non_null(spans);
	for (uint32_t i = 0; i < N; i++) {
		char name[16];
		snprintf(name, sizeof(name), "/%08u", N - 1 - i);
		memcpy(paths + (size_t)i * W, name, W);
		spans[i] = (struct zk_path_span){i * W, W};
	}
	uint64_t compares = zk_path_spans_sort(spans, N, sizeof(*spans), (const uint8_t *)paths);
	assert_true(compares <= keel_sort_bound(N));
	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(spans[i].offset, (N - 1 - i) * W);
	}
	free(spans);
	free(paths);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic_rules),
		cmocka_unit_test(test_sequential_rule),
		cmocka_unit_test(test_format_seq),
		cmocka_unit_test(test_against_zookeeper),
		cmocka_unit_test(test_helpers),
		cmocka_unit_test(test_spans_sort),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
