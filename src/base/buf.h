/*
 * buf.h — bounds-checked big-endian readers and writers.
 *
 * Every wire and disk format in keel is read and written through these; no
 * code casts bytes to structs. Both sides use a sticky failure flag: a read
 * past the end (or a write past the capacity/limit) sets `failed`, returns
 * zero/NULL and turns every later call into a no-op, so a decoder reads all
 * its fields and checks once at the end:
 *
 *	struct keel_rbuf r;
 *	keel_rbuf_init(&r, data, size);
 *	uint32_t len = keel_rbuf_u32(&r);
 *	const uint8_t *p = keel_rbuf_bytes(&r, len);   // checked before use
 *	if (!keel_rbuf_ok(&r)) return KEEL_SHORT;
 *
 * A reader never allocates; keel_rbuf_bytes() returns a pointer into the
 * caller's buffer, valid as long as that buffer is.
 *
 * A writer either fills caller memory (fixed) or owns a heap buffer that grows
 * up to a maximum size (dynamic); growing past the maximum fails the writer,
 * so an encoder can never allocate without bound.
 */
#ifndef KEEL_BASE_BUF_H
#define KEEL_BASE_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/err.h"

/* ---- raw big-endian loads and stores (no bounds checks) ---- */

static inline uint16_t keel_load_be16(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | (uint16_t)p[1]);
}

static inline uint32_t keel_load_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
	       (uint32_t)p[3];
}

static inline uint64_t keel_load_be64(const uint8_t *p)
{
	return (uint64_t)keel_load_be32(p) << 32 | (uint64_t)keel_load_be32(p + 4);
}

static inline void keel_store_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void keel_store_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void keel_store_be64(uint8_t *p, uint64_t v)
{
	keel_store_be32(p, (uint32_t)(v >> 32));
	keel_store_be32(p + 4, (uint32_t)v);
}

/* ---- reader ---- */

struct keel_rbuf {
	const uint8_t *data;
	size_t size;
	size_t pos;
	bool failed;
};

static inline void keel_rbuf_init(struct keel_rbuf *r, const void *data, size_t size)
{
	r->data = (const uint8_t *)data;
	r->size = size;
	r->pos = 0;
	r->failed = false;
}

static inline bool keel_rbuf_ok(const struct keel_rbuf *r)
{
	return !r->failed;
}

static inline size_t keel_rbuf_remaining(const struct keel_rbuf *r)
{
	return r->failed ? 0 : r->size - r->pos;
}

/* True when every byte was consumed and nothing failed. */
static inline bool keel_rbuf_done(const struct keel_rbuf *r)
{
	return !r->failed && r->pos == r->size;
}

/* Marks the reader failed (a decoder found a bad value, not a short input). */
static inline void keel_rbuf_fail(struct keel_rbuf *r)
{
	r->failed = true;
}

/* Returns a pointer to the next n bytes and consumes them, or NULL (and
 * fails the reader) when fewer than n remain. n == 0 returns a valid pointer
 * to the current position. */
static inline const uint8_t *keel_rbuf_bytes(struct keel_rbuf *r, size_t n)
{
	if (r->failed || n > r->size - r->pos) {
		r->failed = true;
		return NULL;
	}
	const uint8_t *p = r->data + r->pos;
	r->pos += n;
	return p;
}

static inline uint8_t keel_rbuf_u8(struct keel_rbuf *r)
{
	const uint8_t *p = keel_rbuf_bytes(r, 1);
	return p ? p[0] : 0;
}

static inline uint16_t keel_rbuf_u16(struct keel_rbuf *r)
{
	const uint8_t *p = keel_rbuf_bytes(r, 2);
	return p ? keel_load_be16(p) : 0;
}

static inline uint32_t keel_rbuf_u32(struct keel_rbuf *r)
{
	const uint8_t *p = keel_rbuf_bytes(r, 4);
	return p ? keel_load_be32(p) : 0;
}

static inline uint64_t keel_rbuf_u64(struct keel_rbuf *r)
{
	const uint8_t *p = keel_rbuf_bytes(r, 8);
	return p ? keel_load_be64(p) : 0;
}

static inline int32_t keel_rbuf_i32(struct keel_rbuf *r)
{
	return (int32_t)keel_rbuf_u32(r);
}

static inline int64_t keel_rbuf_i64(struct keel_rbuf *r)
{
	return (int64_t)keel_rbuf_u64(r);
}

/* A boolean byte: 0 is false, 1 is true, anything else fails the reader. */
static inline bool keel_rbuf_bool(struct keel_rbuf *r)
{
	uint8_t v = keel_rbuf_u8(r);
	if (v > 1) {
		r->failed = true;
		return false;
	}
	return v == 1;
}

/* Copies n bytes out; fails (and leaves dst untouched) on short input. */
static inline void keel_rbuf_copy(struct keel_rbuf *r, void *dst, size_t n)
{
	const uint8_t *p = keel_rbuf_bytes(r, n);
	if (p != NULL && n > 0) {
		memcpy(dst, p, n);
	}
}

/* ---- writer ---- */

struct keel_wbuf {
	uint8_t *data;
	size_t size;     /* bytes written */
	size_t capacity; /* bytes allocated (or provided) */
	size_t max_size; /* dynamic writers never grow past this */
	bool dynamic;    /* owns data (malloc/realloc) */
	bool failed;
};

/* Writes into caller memory of `capacity` bytes; never allocates. */
void keel_wbuf_init_fixed(struct keel_wbuf *w, void *mem, size_t capacity);

/* Owns a heap buffer starting at `initial` bytes, growing up to max_size.
 * Allocation failure or growth past max_size fails the writer. */
void keel_wbuf_init_dynamic(struct keel_wbuf *w, size_t initial, size_t max_size);

/* Frees a dynamic writer's memory (no-op for fixed); safe to call twice. */
void keel_wbuf_free(struct keel_wbuf *w);

/* Hands the heap buffer of a dynamic writer to the caller (who frees it with
 * free()) and resets the writer to empty. Returns NULL if it failed. */
uint8_t *keel_wbuf_release(struct keel_wbuf *w, size_t *size);

/* Empties the writer, keeping its memory, and clears `failed`. */
static inline void keel_wbuf_reset(struct keel_wbuf *w)
{
	w->size = 0;
	w->failed = false;
}

static inline bool keel_wbuf_ok(const struct keel_wbuf *w)
{
	return !w->failed;
}

/* Slow path of keel_wbuf_reserve: grows a dynamic writer. */
bool keel_wbuf_grow(struct keel_wbuf *w, size_t need);

/* Reserves n bytes at the end and returns a pointer to them (to be filled
 * now; the pointer dies at the next write). NULL when the writer failed. */
static inline uint8_t *keel_wbuf_reserve(struct keel_wbuf *w, size_t n)
{
	if (w->failed) {
		return NULL;
	}
	if (n > w->capacity - w->size && !keel_wbuf_grow(w, n)) {
		w->failed = true;
		return NULL;
	}
	uint8_t *p = w->data + w->size;
	w->size += n;
	return p;
}

static inline void keel_wbuf_bytes(struct keel_wbuf *w, const void *src, size_t n)
{
	uint8_t *p = keel_wbuf_reserve(w, n);
	if (p != NULL && n > 0) {
		memcpy(p, src, n);
	}
}

static inline void keel_wbuf_zero(struct keel_wbuf *w, size_t n)
{
	uint8_t *p = keel_wbuf_reserve(w, n);
	if (p != NULL && n > 0) {
		memset(p, 0, n);
	}
}

static inline void keel_wbuf_u8(struct keel_wbuf *w, uint8_t v)
{
	uint8_t *p = keel_wbuf_reserve(w, 1);
	if (p != NULL) {
		p[0] = v;
	}
}

static inline void keel_wbuf_u16(struct keel_wbuf *w, uint16_t v)
{
	uint8_t *p = keel_wbuf_reserve(w, 2);
	if (p != NULL) {
		keel_store_be16(p, v);
	}
}

static inline void keel_wbuf_u32(struct keel_wbuf *w, uint32_t v)
{
	uint8_t *p = keel_wbuf_reserve(w, 4);
	if (p != NULL) {
		keel_store_be32(p, v);
	}
}

static inline void keel_wbuf_u64(struct keel_wbuf *w, uint64_t v)
{
	uint8_t *p = keel_wbuf_reserve(w, 8);
	if (p != NULL) {
		keel_store_be64(p, v);
	}
}

static inline void keel_wbuf_i32(struct keel_wbuf *w, int32_t v)
{
	keel_wbuf_u32(w, (uint32_t)v);
}

static inline void keel_wbuf_i64(struct keel_wbuf *w, int64_t v)
{
	keel_wbuf_u64(w, (uint64_t)v);
}

static inline void keel_wbuf_bool(struct keel_wbuf *w, bool v)
{
	keel_wbuf_u8(w, v ? 1 : 0);
}

/* Overwrites 4 bytes already written at `pos` (to patch a length prefix).
 * Fails the writer if [pos, pos+4) was not written. */
static inline void keel_wbuf_patch_u32(struct keel_wbuf *w, size_t pos, uint32_t v)
{
	if (w->failed || pos > w->size || w->size - pos < 4) {
		w->failed = true;
		return;
	}
	keel_store_be32(w->data + pos, v);
}

#endif
