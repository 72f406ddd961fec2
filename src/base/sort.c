/*
 * sort.c — heapsort (see sort.h).
 *
 * Invariant of the sift-down: items [0, end) other than the subtree rooted
 * at `root` form a max-heap by cmp; each sift costs at most two comparisons
 * per level of a heap of depth floor(log2 n).
 */
#include "base/sort.h"

#include <string.h>

struct heap {
	unsigned char *items;
	size_t item_size;
	keel_sort_cmp_fn cmp;
	void *ctx;
	uint64_t compares;
};

static void *at(const struct heap *h, size_t i)
{
	return h->items + i * h->item_size;
}

static int compare(struct heap *h, size_t a, size_t b)
{
	h->compares++;
	return h->cmp(at(h, a), at(h, b), h->ctx);
}

static void swap(const struct heap *h, size_t a, size_t b)
{
	unsigned char *x = at(h, a);
	unsigned char *y = at(h, b);
	for (size_t i = 0; i < h->item_size; i++) {
		unsigned char t = x[i];
		x[i] = y[i];
		y[i] = t;
	}
}

static void sift_down(struct heap *h, size_t root, size_t end)
{
	for (;;) {
		size_t child = 2 * root + 1;
		if (child >= end) {
			return;
		}
		if (child + 1 < end && compare(h, child, child + 1) < 0) {
			child++;
		}
		if (compare(h, root, child) >= 0) {
			return;
		}
		swap(h, root, child);
		root = child;
	}
}

uint64_t keel_sort(void *items, size_t count, size_t item_size, keel_sort_cmp_fn cmp,
		   void *ctx)
{
	struct heap h = {items, item_size, cmp, ctx, 0};
	if (count < 2) {
		return 0;
	}
	for (size_t i = count / 2; i-- > 0;) {
		sift_down(&h, i, count);
	}
	for (size_t end = count - 1; end > 0; end--) {
		swap(&h, 0, end);
		sift_down(&h, 0, end);
	}
	return h.compares;
}

uint64_t keel_sort_bound(size_t count)
{
	uint64_t log2n = 0;
	for (size_t n = count; n > 1; n >>= 1) {
		log2n++;
	}
	return 2u * (uint64_t)count * log2n + 2u * (uint64_t)count;
}
