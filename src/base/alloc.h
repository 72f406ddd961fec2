/*
 * alloc.h — the two allocators later layers use on hot paths.
 *
 * keel_pool: fixed-size objects (znodes, sessions, watches, requests) carved
 * from large chunks, recycled through a free list. alloc/free are O(1) and
 * touch no lock; memory goes back to the system only at close. A pool may
 * have a maximum object count: past it, alloc returns NULL (the caller turns
 * that into a clear "limit reached" error).
 *
 * keel_arena: bump allocation for data that dies together (one batch of
 * requests, one ready() round). Reset frees everything at once and keeps the
 * first block for reuse, so a steady state allocates nothing.
 *
 * Both take their memory from malloc; both are single-threaded.
 */
#ifndef KEEL_BASE_ALLOC_H
#define KEEL_BASE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

struct keel_pool_chunk;

struct keel_pool {
	size_t object_size;  /* rounded up to 16-byte alignment */
	size_t per_chunk;    /* objects per chunk */
	size_t max_objects;  /* 0: no limit */
	size_t live;         /* objects handed out and not freed */
	size_t allocated;    /* objects in all chunks */
	void *free_list;
	struct keel_pool_chunk *chunks;
};

void keel_pool_init(struct keel_pool *pool, size_t object_size, size_t per_chunk,
		    size_t max_objects);
void keel_pool_close(struct keel_pool *pool);

/* Uninitialized memory for one object, or NULL (no memory, or the limit). */
void *keel_pool_alloc(struct keel_pool *pool);
void keel_pool_free(struct keel_pool *pool, void *obj);

/* Bytes the pool holds from the system (chunks included). */
size_t keel_pool_memory(const struct keel_pool *pool);

struct keel_arena_block;

struct keel_arena {
	struct keel_arena_block *head;   /* current block */
	size_t block_size;
	size_t used;                     /* bytes used in head */
	size_t total;                    /* bytes held in all blocks */
};

void keel_arena_init(struct keel_arena *arena, size_t block_size);
void keel_arena_close(struct keel_arena *arena);

/* 16-byte aligned memory valid until the next reset/close, or NULL. */
void *keel_arena_alloc(struct keel_arena *arena, size_t size);

/* Copies `size` bytes into the arena. */
void *keel_arena_dup(struct keel_arena *arena, const void *src, size_t size);

/* Frees all allocations; keeps one block for reuse. */
void keel_arena_reset(struct keel_arena *arena);

#endif
