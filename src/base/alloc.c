/* alloc.c — object pool and arena (see alloc.h). */
#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"

#define ALIGN 16u

static size_t align_up(size_t n)
{
	return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

struct keel_pool_chunk {
	struct keel_pool_chunk *next;
	size_t pad; /* keeps objects 16-byte aligned */
	unsigned char objects[];
};

void keel_pool_init(struct keel_pool *pool, size_t object_size, size_t per_chunk,
		    size_t max_objects)
{
	KEEL_ASSERT(object_size > 0);
	KEEL_ASSERT(per_chunk > 0);
	pool->object_size = align_up(KEEL_MAX(object_size, sizeof(void *)));
	pool->per_chunk = per_chunk;
	pool->max_objects = max_objects;
	pool->live = 0;
	pool->allocated = 0;
	pool->free_list = NULL;
	pool->chunks = NULL;
}

void keel_pool_close(struct keel_pool *pool)
{
	struct keel_pool_chunk *c = pool->chunks;
	while (c != NULL) {
		struct keel_pool_chunk *next = c->next;
		free(c);
		c = next;
	}
	pool->chunks = NULL;
	pool->free_list = NULL;
	pool->live = 0;
	pool->allocated = 0;
}

static int pool_add_chunk(struct keel_pool *pool)
{
	size_t n = pool->per_chunk;
	if (pool->max_objects != 0 && pool->allocated + n > pool->max_objects) {
		n = pool->max_objects - pool->allocated;
	}
	if (n == 0) {
		return -1;
	}
	struct keel_pool_chunk *c = malloc(sizeof(*c) + n * pool->object_size);
	if (c == NULL) {
		return -1;
	}
	c->next = pool->chunks;
	pool->chunks = c;
	/* Thread the new objects onto the free list, first object first. */
	for (size_t i = n; i-- > 0;) {
		void *obj = c->objects + i * pool->object_size;
		*(void **)obj = pool->free_list;
		pool->free_list = obj;
	}
	pool->allocated += n;
	return 0;
}

void *keel_pool_alloc(struct keel_pool *pool)
{
	if (pool->free_list == NULL && pool_add_chunk(pool) != 0) {
		return NULL;
	}
	void *obj = pool->free_list;
	pool->free_list = *(void **)obj;
	pool->live++;
	KEEL_ASSERT(pool->live <= pool->allocated);
	return obj;
}

void keel_pool_free(struct keel_pool *pool, void *obj)
{
	if (obj == NULL) {
		return;
	}
	KEEL_ASSERT(pool->live > 0);
	*(void **)obj = pool->free_list;
	pool->free_list = obj;
	pool->live--;
}

size_t keel_pool_memory(const struct keel_pool *pool)
{
	size_t chunks = 0;
	for (const struct keel_pool_chunk *c = pool->chunks; c != NULL; c = c->next) {
		chunks++;
	}
	return pool->allocated * pool->object_size + chunks * sizeof(struct keel_pool_chunk);
}

struct keel_arena_block {
	struct keel_arena_block *next;
	size_t size;
	unsigned char data[];
};

void keel_arena_init(struct keel_arena *arena, size_t block_size)
{
	KEEL_ASSERT(block_size >= 64);
	arena->head = NULL;
	arena->block_size = block_size;
	arena->used = 0;
	arena->total = 0;
}

void keel_arena_close(struct keel_arena *arena)
{
	struct keel_arena_block *b = arena->head;
	while (b != NULL) {
		struct keel_arena_block *next = b->next;
		free(b);
		b = next;
	}
	arena->head = NULL;
	arena->used = 0;
	arena->total = 0;
}

void *keel_arena_alloc(struct keel_arena *arena, size_t size)
{
	size = align_up(size == 0 ? 1 : size);
	if (arena->head == NULL || arena->head->size - arena->used < size) {
		size_t bsize = KEEL_MAX(arena->block_size, size);
		struct keel_arena_block *b = malloc(sizeof(*b) + bsize);
		if (b == NULL) {
			return NULL;
		}
		b->next = arena->head;
		b->size = bsize;
		arena->head = b;
		arena->used = 0;
		arena->total += bsize;
	}
	void *p = arena->head->data + arena->used;
	arena->used += size;
	return p;
}

void *keel_arena_dup(struct keel_arena *arena, const void *src, size_t size)
{
	void *p = keel_arena_alloc(arena, size);
	if (p != NULL && size > 0) {
		memcpy(p, src, size);
	}
	return p;
}

void keel_arena_reset(struct keel_arena *arena)
{
	/* Keep the largest block only if it is the standard size; free the rest. */
	struct keel_arena_block *keep = NULL;
	struct keel_arena_block *b = arena->head;
	while (b != NULL) {
		struct keel_arena_block *next = b->next;
		if (keep == NULL && b->size == arena->block_size) {
			keep = b;
			keep->next = NULL;
		} else {
			free(b);
		}
		b = next;
	}
	arena->head = keep;
	arena->used = 0;
	arena->total = keep != NULL ? keep->size : 0;
}
