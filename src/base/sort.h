/*
 * sort.h — an in-place sort whose worst case is O(n log n), with a count
 * of the comparisons it made.
 *
 * Request and apply paths sort things a client chooses (a session's
 * ephemeral paths, due container/TTL nodes). An insertion sort is quadratic
 * on a hostile order (descending names), and qsort() promises no bound, so
 * these paths use keel_sort(): a heapsort, at most 2 n log2(n) + 2 n
 * comparisons whatever the input order, no allocation, not stable (callers
 * sort distinct keys or do not care about the order of equal ones).
 *
 * The returned count is the work done; tests assert it against the bound,
 * and callers may add it to a work counter.
 */
#ifndef KEEL_BASE_SORT_H
#define KEEL_BASE_SORT_H

#include <stddef.h>
#include <stdint.h>

/* <0, 0, >0 as a is before, equal to, after b. */
typedef int (*keel_sort_cmp_fn)(const void *a, const void *b, void *ctx);

/* Sorts `count` items of `item_size` bytes in place (ascending by cmp).
 * Returns the number of cmp calls made. */
uint64_t keel_sort(void *items, size_t count, size_t item_size, keel_sort_cmp_fn cmp,
		   void *ctx);

/* The worst-case number of comparisons keel_sort() makes for `count`
 * items: 2 n floor(log2 n) + 2 n. */
uint64_t keel_sort_bound(size_t count);

#endif
