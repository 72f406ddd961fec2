/*
 * assert.h — KEEL_ASSERT, on in every build, release included.
 *
 * Assert arguments, invariants and the results of state transitions. Split
 * compound conditions so that a failure names the one that broke, and assert
 * the negative space too. O(n) checks go behind KEEL_DEBUG_ASSERT, which is
 * compiled only when KEEL_EXPENSIVE_CHECKS is defined (debug builds, sim).
 *
 * The failure handler is not in this pure layer: keel_assert_fail() is
 * provided by src/os/panic.c (prints, then aborts). A program that links only
 * pure layers (a fuzz target, a unit test) gets it from there too.
 */
#ifndef KEEL_BASE_ASSERT_H
#define KEEL_BASE_ASSERT_H

_Noreturn void keel_assert_fail(const char *expr, const char *file, int line,
				const char *func);

#define KEEL_LIKELY(x) __builtin_expect(!!(x), 1)
#define KEEL_UNLIKELY(x) __builtin_expect(!!(x), 0)

#define KEEL_ASSERT(cond)                                                     \
	do {                                                                  \
		if (KEEL_UNLIKELY(!(cond))) {                                 \
			keel_assert_fail(#cond, __FILE__, __LINE__, __func__); \
		}                                                             \
	} while (0)

#define KEEL_UNREACHABLE() keel_assert_fail("unreachable", __FILE__, __LINE__, __func__)

#if defined(KEEL_EXPENSIVE_CHECKS) || !defined(NDEBUG) && defined(KEEL_SANITIZE)
#define KEEL_DEBUG_ASSERT(cond) KEEL_ASSERT(cond)
#define KEEL_DEBUG_CHECKS 1
#else
#define KEEL_DEBUG_ASSERT(cond) ((void)0)
#define KEEL_DEBUG_CHECKS 0
#endif

#define KEEL_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define KEEL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define KEEL_MAX(a, b) ((a) > (b) ? (a) : (b))
#define KEEL_CONTAINER_OF(ptr, type, member)                                  \
	((type *)(void *)((char *)(ptr) - __builtin_offsetof(type, member)))

#endif
