/* alloc.c — the arena (see alloc.h). */
#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"

#define ALIGN 16u

static size_t align_up(size_t n)
{
	return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
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
