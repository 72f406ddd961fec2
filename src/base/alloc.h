/*
 * alloc.h — the arena allocator.
 *
 * keel_arena: bump allocation for data that dies together (one batch of
 * requests, one ready() round). Reset frees everything at once and keeps the
 * first block for reuse, so a steady state allocates nothing.
 *
 * It takes its memory from malloc and is single-threaded.
 */
#ifndef KEEL_BASE_ALLOC_H
#define KEEL_BASE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

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
