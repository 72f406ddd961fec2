/*
 * codec.h — the jute-like primitives every meta encoding is built from.
 *
 * Shared by the record codec (record.c), the image snapshot (snapshot.c) and
 * the broker-facing requests (proto.c). All integers are big-endian; a
 * string is an int32 byte length then the bytes (-1 = null), never holding a
 * NUL byte; an array is an int32 element count then the elements; a
 * 16-byte id is 16 raw bytes; a bool is one byte, 0 or 1.
 *
 * The decoder wraps a keel_rbuf with a sticky error code and an optional
 * error-detail buffer: read every field, then call meta_dec_finish() once.
 * Counts and lengths are checked against a maximum AND against the bytes
 * that remain before anything is allocated, so a hostile length can never
 * cause a large allocation. Strings and arrays are copied into the caller's
 * arena (strings NUL-terminated); meta_dec_bytes() is the one exception and
 * returns a pointer into the input buffer.
 *
 * Error codes: KEEL_SHORT (input ends early), KEEL_TOOBIG (a length or count
 * over its limit), KEEL_CORRUPT (a value that cannot be: negative length,
 * bool not 0/1, NUL inside a string, trailing bytes), KEEL_UNSUPPORTED (a
 * newer version than this code knows), KEEL_NOMEM (the arena failed).
 */
#ifndef KEEL_META_CODEC_H
#define KEEL_META_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "meta/fmt.h"

struct meta_dec {
	struct keel_rbuf r;
	struct keel_arena *arena; /* where strings and arrays are copied */
	struct meta_errbuf *eb;   /* may be NULL */
	enum keel_err err;        /* first error other than short input */
};

void meta_dec_init(struct meta_dec *d, const void *data, size_t size, struct keel_arena *arena,
		   struct meta_errbuf *eb);

/* True while no error (short or otherwise) has happened. */
static inline bool meta_dec_ok(const struct meta_dec *d)
{
	return d->err == KEEL_OK && keel_rbuf_ok(&d->r);
}

/* Records the first error with a detail "<what>: <why>" and fails the
 * reader so later reads are no-ops. */
void meta_dec_fail(struct meta_dec *d, enum keel_err err, const char *what, const char *why);

int8_t meta_dec_i8(struct meta_dec *d);
int16_t meta_dec_i16(struct meta_dec *d);
int32_t meta_dec_i32(struct meta_dec *d);
int64_t meta_dec_i64(struct meta_dec *d);
bool meta_dec_bool(struct meta_dec *d, const char *what);
void meta_dec_uuid(struct meta_dec *d, uint8_t out[16]);

/* A string of at most max_size bytes, copied into the arena. Returns NULL
 * for a null string (an error unless `nullable`) or on failure. */
const char *meta_dec_str(struct meta_dec *d, bool nullable, size_t max_size, const char *what);

/* An element count in [0, max] with at least count * min_elem_size bytes
 * left in the input. Returns 0 on failure. */
uint32_t meta_dec_count(struct meta_dec *d, uint32_t max, size_t min_elem_size, const char *what);

/* An int32 array of at most max elements, copied into the arena. An empty
 * array returns a non-NULL pointer with *count 0. */
const int32_t *meta_dec_i32_array(struct meta_dec *d, uint32_t max, uint32_t *count,
				  const char *what);

/* Length-prefixed bytes (-1 = null when nullable), NOT copied: the pointer
 * is into the input and lives as long as it. */
const uint8_t *meta_dec_bytes(struct meta_dec *d, bool nullable, size_t max_size, size_t *size,
			      const char *what);

/* Zeroed arena memory for `count` elements of `size` bytes (count may be 0). */
void *meta_dec_alloc(struct meta_dec *d, size_t count, size_t size);

/* The result of decoding: the first error, KEEL_SHORT if the input ended
 * early, KEEL_CORRUPT if `whole` and bytes were left over, else KEEL_OK. */
enum keel_err meta_dec_finish(struct meta_dec *d, bool whole, const char *what);

/* ---- encoding (straight onto a keel_wbuf; check keel_wbuf_ok at the end) ---- */

void meta_enc_str(struct keel_wbuf *w, const char *s); /* NULL -> length -1 */
void meta_enc_i32_array(struct keel_wbuf *w, const int32_t *v, uint32_t count);
void meta_enc_bytes(struct keel_wbuf *w, const void *data, size_t size, bool null);
static inline void meta_enc_uuid(struct keel_wbuf *w, const uint8_t id[16])
{
	keel_wbuf_bytes(w, id, 16);
}

/* The writer's result: KEEL_OK, or KEEL_TOOBIG when it hit its size limit
 * or could not grow. */
static inline enum keel_err meta_enc_result(const struct keel_wbuf *w)
{
	return keel_wbuf_ok(w) ? KEEL_OK : KEEL_TOOBIG;
}

#endif
