/*
 * hash.h — fast non-cryptographic hashing and an open-addressing hash table.
 *
 * keel_hash_bytes() is a 64-bit multiply-mix hash over 8-byte words with a
 * final avalanche; keel_hash_u64() mixes one integer. Neither is meant to
 * resist adversarial collisions: tables seed them per instance (a seed from
 * the caller) so crafted paths cannot be precomputed offline.
 *
 * struct keel_hmap is an intrusive-by-pointer table: it stores (hash, item)
 * pairs and never looks inside items except through the caller's equality
 * function. Linear probing over a power-of-two array, at most 7/8 full,
 * deletion by backward shift (no tombstones, so lookups stay short after
 * churn). The caller owns the items; the table owns only its slot array.
 *
 * Invariants: count < capacity; every item sits in the probe run that starts
 * at (hash & mask) with no empty slot between; items are never NULL.
 */
#ifndef KEEL_BASE_HASH_H
#define KEEL_BASE_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

uint64_t keel_hash_bytes(const void *data, size_t size, uint64_t seed);

static inline uint64_t keel_hash_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

struct keel_hmap_slot {
	uint64_t hash;
	void *item; /* NULL: empty */
};

struct keel_hmap {
	struct keel_hmap_slot *slots;
	size_t mask;  /* capacity - 1; capacity is a power of two (0 slots: mask 0, slots NULL) */
	size_t count;
};

/* Does `item` have key `key`? */
typedef bool (*keel_hmap_eq_fn)(const void *item, const void *key);

/* Empty table; allocates room for `expected` items up front (0 is fine). */
enum keel_err keel_hmap_init(struct keel_hmap *map, size_t expected);
void keel_hmap_close(struct keel_hmap *map);

static inline size_t keel_hmap_count(const struct keel_hmap *map)
{
	return map->count;
}

void *keel_hmap_find(const struct keel_hmap *map, uint64_t hash, keel_hmap_eq_fn eq,
		     const void *key);

/* Adds an item. The caller checks for duplicates first if it must (find);
 * the table does not. KEEL_NOMEM leaves the table unchanged. */
enum keel_err keel_hmap_insert(struct keel_hmap *map, uint64_t hash, void *item);

/* Removes and returns the item with `key`, or NULL. */
void *keel_hmap_remove(struct keel_hmap *map, uint64_t hash, keel_hmap_eq_fn eq,
		       const void *key);

/* Removes this exact item (pointer identity); returns whether it was there. */
bool keel_hmap_remove_item(struct keel_hmap *map, uint64_t hash, const void *item);

/* Iteration: start with *cursor = 0; returns NULL at the end. The table must
 * not be modified during iteration (except through keel_hmap_clear()). */
void *keel_hmap_next(const struct keel_hmap *map, size_t *cursor);

/* Bytes of memory the slot array uses (for memory accounting). */
size_t keel_hmap_memory(const struct keel_hmap *map);

#endif
