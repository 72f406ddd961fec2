/* hash.c — hashing and the open-addressing table (see hash.h). */
#include "base/hash.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"

#define HMAP_MIN_CAPACITY 16u

static inline uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v * 0x9e3779b97f4a7c15ull;
	h = (h << 31) | (h >> 33);
	return h * 0xbf58476d1ce4e5b9ull;
}

uint64_t keel_hash_bytes(const void *data, size_t size, uint64_t seed)
{
	const uint8_t *p = data;
	uint64_t h = seed ^ ((uint64_t)size * 0x94d049bb133111ebull);
	while (size >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		h = mix(h, v);
		p += 8;
		size -= 8;
	}
	uint64_t tail = 0;
	for (size_t i = 0; i < size; i++) {
		tail |= (uint64_t)p[i] << (8 * i);
	}
	h = mix(h, tail ^ 0x5bd1e995u);
	return keel_hash_u64(h);
}

static size_t capacity_for(size_t expected)
{
	size_t cap = HMAP_MIN_CAPACITY;
	/* Keep the table at most 7/8 full. */
	while (cap - cap / 8 <= expected) {
		cap *= 2;
	}
	return cap;
}

enum keel_err keel_hmap_init(struct keel_hmap *map, size_t expected)
{
	map->slots = NULL;
	map->mask = 0;
	map->count = 0;
	if (expected == 0) {
		return KEEL_OK;
	}
	size_t cap = capacity_for(expected);
	map->slots = calloc(cap, sizeof(*map->slots));
	if (map->slots == NULL) {
		return KEEL_NOMEM;
	}
	map->mask = cap - 1;
	return KEEL_OK;
}

void keel_hmap_close(struct keel_hmap *map)
{
	free(map->slots);
	map->slots = NULL;
	map->mask = 0;
	map->count = 0;
}

static inline size_t hmap_capacity(const struct keel_hmap *map)
{
	return map->slots == NULL ? 0 : map->mask + 1;
}

void *keel_hmap_find(const struct keel_hmap *map, uint64_t hash, keel_hmap_eq_fn eq,
		     const void *key)
{
	if (map->slots == NULL) {
		return NULL;
	}
	for (size_t i = hash & map->mask;; i = (i + 1) & map->mask) {
		const struct keel_hmap_slot *s = &map->slots[i];
		if (s->item == NULL) {
			return NULL;
		}
		if (s->hash == hash && eq(s->item, key)) {
			return s->item;
		}
	}
}

static void place(struct keel_hmap_slot *slots, size_t mask, uint64_t hash, void *item)
{
	size_t i = hash & mask;
	while (slots[i].item != NULL) {
		i = (i + 1) & mask;
	}
	slots[i].hash = hash;
	slots[i].item = item;
}

static enum keel_err hmap_resize(struct keel_hmap *map, size_t cap)
{
	struct keel_hmap_slot *slots = calloc(cap, sizeof(*slots));
	if (slots == NULL) {
		return KEEL_NOMEM;
	}
	size_t old_cap = hmap_capacity(map);
	for (size_t i = 0; i < old_cap; i++) {
		if (map->slots[i].item != NULL) {
			place(slots, cap - 1, map->slots[i].hash, map->slots[i].item);
		}
	}
	free(map->slots);
	map->slots = slots;
	map->mask = cap - 1;
	return KEEL_OK;
}

enum keel_err keel_hmap_insert(struct keel_hmap *map, uint64_t hash, void *item)
{
	KEEL_ASSERT(item != NULL);
	size_t cap = hmap_capacity(map);
	if (map->count + 1 > cap - cap / 8) {
		enum keel_err err = hmap_resize(map, capacity_for(map->count + 1));
		if (err != KEEL_OK) {
			return err;
		}
	}
	place(map->slots, map->mask, hash, item);
	map->count++;
	KEEL_ASSERT(map->count <= map->mask);
	return KEEL_OK;
}

/* Empties slot i and shifts later members of the probe run back so that no
 * lookup stops early at the hole. */
static void remove_at(struct keel_hmap *map, size_t i)
{
	size_t mask = map->mask;
	size_t hole = i;
	for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
		struct keel_hmap_slot *s = &map->slots[j];
		if (s->item == NULL) {
			break;
		}
		size_t home = s->hash & mask;
		/* Move s into the hole unless its home lies cyclically in (hole, j]. */
		bool home_after_hole = hole <= j ? (home > hole && home <= j)
						 : (home > hole || home <= j);
		if (!home_after_hole) {
			map->slots[hole] = *s;
			hole = j;
		}
	}
	map->slots[hole].item = NULL;
	map->slots[hole].hash = 0;
	map->count--;
}

void *keel_hmap_remove(struct keel_hmap *map, uint64_t hash, keel_hmap_eq_fn eq,
		       const void *key)
{
	if (map->slots == NULL) {
		return NULL;
	}
	for (size_t i = hash & map->mask;; i = (i + 1) & map->mask) {
		struct keel_hmap_slot *s = &map->slots[i];
		if (s->item == NULL) {
			return NULL;
		}
		if (s->hash == hash && eq(s->item, key)) {
			void *item = s->item;
			remove_at(map, i);
			return item;
		}
	}
}

bool keel_hmap_remove_item(struct keel_hmap *map, uint64_t hash, const void *item)
{
	if (map->slots == NULL) {
		return false;
	}
	for (size_t i = hash & map->mask;; i = (i + 1) & map->mask) {
		struct keel_hmap_slot *s = &map->slots[i];
		if (s->item == NULL) {
			return false;
		}
		if (s->item == item) {
			remove_at(map, i);
			return true;
		}
	}
}

void *keel_hmap_next(const struct keel_hmap *map, size_t *cursor)
{
	size_t cap = hmap_capacity(map);
	while (*cursor < cap) {
		void *item = map->slots[*cursor].item;
		(*cursor)++;
		if (item != NULL) {
			return item;
		}
	}
	return NULL;
}

size_t keel_hmap_memory(const struct keel_hmap *map)
{
	return hmap_capacity(map) * sizeof(struct keel_hmap_slot);
}
