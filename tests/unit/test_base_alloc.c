/* Unit tests: the arena (alignment, big allocations, reset) and the error table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"

static void test_arena(void **state)
{
	(void)state;
	struct keel_arena arena;
	keel_arena_init(&arena, 256);
	char *a = keel_arena_dup(&arena, "hello", 6);
	assert_string_equal(a, "hello");
	for (int i = 0; i < 100; i++) {
		void *p = keel_arena_alloc(&arena, 40);
		assert_non_null(p);
		assert_int_equal((uintptr_t)p % 16, 0);
	}
	void *big = keel_arena_alloc(&arena, 10000); /* larger than a block */
	assert_non_null(big);
	memset(big, 1, 10000);
	assert_true(arena.total >= 10000);
	keel_arena_reset(&arena);
	assert_int_equal(arena.total, 256);
	assert_non_null(keel_arena_alloc(&arena, 16));
	keel_arena_close(&arena);
	assert_int_equal(arena.total, 0);
}

static void test_errors_have_messages(void **state)
{
	(void)state;
	for (int e = 0; e < KEEL_ERR_COUNT; e++) {
		assert_non_null(keel_strerror((enum keel_err)e));
		assert_true(strncmp(keel_errname((enum keel_err)e), "KEEL_", 5) == 0);
	}
	assert_string_equal(keel_strerror(KEEL_OK), "success");
	assert_string_equal(keel_errname(KEEL_CORRUPT), "KEEL_CORRUPT");
	assert_string_equal(keel_strerror((enum keel_err)999), "unknown error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arena),
		cmocka_unit_test(test_errors_have_messages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
