/* codec.c — jute-like primitives for meta encodings (see codec.h). */
#include "meta/codec.h"

#include <string.h>

#include "base/assert.h"

void meta_dec_init(struct meta_dec *d, const void *data, size_t size, struct keel_arena *arena,
		   struct meta_errbuf *eb)
{
	keel_rbuf_init(&d->r, data, size);
	d->arena = arena;
	d->eb = eb;
	d->err = KEEL_OK;
	if (eb != NULL) {
		eb->msg[0] = '\0';
	}
}

void meta_dec_fail(struct meta_dec *d, enum keel_err err, const char *what, const char *why)
{
	KEEL_ASSERT(err != KEEL_OK);
	if (d->err == KEEL_OK && keel_rbuf_ok(&d->r)) {
		d->err = err;
		struct meta_fmt f;
		struct meta_fmt *fp = meta_errbuf_begin(d->eb, &f);
		meta_fmt_str(fp, what);
		meta_fmt_str(fp, ": ");
		meta_fmt_str(fp, why);
	}
	keel_rbuf_fail(&d->r);
}

/* Notes a short read with the name of the field that ran out. */
static void note_short(struct meta_dec *d, const char *what)
{
	if (d->err == KEEL_OK && d->eb != NULL && d->eb->msg[0] == '\0') {
		struct meta_fmt f;
		struct meta_fmt *fp = meta_errbuf_begin(d->eb, &f);
		meta_fmt_str(fp, what);
		meta_fmt_str(fp, ": input ends early");
	}
}

int8_t meta_dec_i8(struct meta_dec *d)
{
	return (int8_t)keel_rbuf_u8(&d->r);
}

int16_t meta_dec_i16(struct meta_dec *d)
{
	return (int16_t)keel_rbuf_u16(&d->r);
}

int32_t meta_dec_i32(struct meta_dec *d)
{
	return keel_rbuf_i32(&d->r);
}

int64_t meta_dec_i64(struct meta_dec *d)
{
	return keel_rbuf_i64(&d->r);
}

bool meta_dec_bool(struct meta_dec *d, const char *what)
{
	uint8_t v = keel_rbuf_u8(&d->r);
	if (v > 1) {
		meta_dec_fail(d, KEEL_CORRUPT, what, "a bool must be 0 or 1");
		return false;
	}
	return v == 1;
}

void meta_dec_uuid(struct meta_dec *d, uint8_t out[16])
{
	const uint8_t *p = keel_rbuf_bytes(&d->r, 16);
	if (p != NULL) {
		memcpy(out, p, 16);
	} else {
		memset(out, 0, 16);
	}
}

void *meta_dec_alloc(struct meta_dec *d, size_t count, size_t size)
{
	if (!meta_dec_ok(d)) {
		return NULL;
	}
	KEEL_ASSERT(d->arena != NULL);
	KEEL_ASSERT(size == 0 || count <= SIZE_MAX / size);
	size_t bytes = count * size;
	void *p = keel_arena_alloc(d->arena, bytes);
	if (p == NULL) {
		meta_dec_fail(d, KEEL_NOMEM, "decoder", "arena allocation failed");
		return NULL;
	}
	memset(p, 0, bytes == 0 ? 1 : bytes);
	return p;
}

/* Reads an int32 length: -1 is null, otherwise 0..max with the bytes present. */
static int64_t dec_length(struct meta_dec *d, bool nullable, size_t max_size, const char *what)
{
	int32_t len = meta_dec_i32(d);
	if (!meta_dec_ok(d)) {
		note_short(d, what);
		return -2;
	}
	if (len == -1) {
		if (!nullable) {
			meta_dec_fail(d, KEEL_CORRUPT, what, "must not be null");
			return -2;
		}
		return -1;
	}
	if (len < 0) {
		meta_dec_fail(d, KEEL_CORRUPT, what, "negative length");
		return -2;
	}
	if ((size_t)len > max_size) {
		meta_dec_fail(d, KEEL_TOOBIG, what, "length over the limit");
		return -2;
	}
	if ((size_t)len > keel_rbuf_remaining(&d->r)) {
		note_short(d, what);
		keel_rbuf_fail(&d->r);
		return -2;
	}
	return len;
}

const char *meta_dec_str(struct meta_dec *d, bool nullable, size_t max_size, const char *what)
{
	int64_t len = dec_length(d, nullable, max_size, what);
	if (len < 0) {
		return NULL;
	}
	const uint8_t *p = keel_rbuf_bytes(&d->r, (size_t)len);
	if (p == NULL) {
		return NULL;
	}
	if (len > 0 && memchr(p, 0, (size_t)len) != NULL) {
		meta_dec_fail(d, KEEL_CORRUPT, what, "NUL byte inside a string");
		return NULL;
	}
	char *s = meta_dec_alloc(d, (size_t)len + 1, 1);
	if (s == NULL) {
		return NULL;
	}
	memcpy(s, p, (size_t)len);
	s[len] = '\0';
	return s;
}

uint32_t meta_dec_count(struct meta_dec *d, uint32_t max, size_t min_elem_size, const char *what)
{
	int32_t n = meta_dec_i32(d);
	if (!meta_dec_ok(d)) {
		note_short(d, what);
		return 0;
	}
	if (n < 0) {
		meta_dec_fail(d, KEEL_CORRUPT, what, "negative count");
		return 0;
	}
	if ((uint32_t)n > max) {
		meta_dec_fail(d, KEEL_TOOBIG, what, "count over the limit");
		return 0;
	}
	if (min_elem_size > 0 && (size_t)n > keel_rbuf_remaining(&d->r) / min_elem_size) {
		note_short(d, what);
		keel_rbuf_fail(&d->r);
		return 0;
	}
	return (uint32_t)n;
}

const int32_t *meta_dec_i32_array(struct meta_dec *d, uint32_t max, uint32_t *count,
				  const char *what)
{
	*count = 0;
	uint32_t n = meta_dec_count(d, max, 4, what);
	int32_t *v = meta_dec_alloc(d, n, sizeof(int32_t));
	if (v == NULL) {
		return NULL;
	}
	for (uint32_t i = 0; i < n; i++) {
		v[i] = meta_dec_i32(d);
	}
	if (!meta_dec_ok(d)) {
		return NULL;
	}
	*count = n;
	return v;
}

const uint8_t *meta_dec_bytes(struct meta_dec *d, bool nullable, size_t max_size, size_t *size,
			      const char *what)
{
	*size = 0;
	int64_t len = dec_length(d, nullable, max_size, what);
	if (len < 0) {
		return NULL;
	}
	const uint8_t *p = keel_rbuf_bytes(&d->r, (size_t)len);
	if (p != NULL) {
		*size = (size_t)len;
	}
	return p;
}

enum keel_err meta_dec_finish(struct meta_dec *d, bool whole, const char *what)
{
	if (d->err != KEEL_OK) {
		return d->err;
	}
	if (!keel_rbuf_ok(&d->r)) {
		note_short(d, what);
		return KEEL_SHORT;
	}
	if (whole && !keel_rbuf_done(&d->r)) {
		meta_dec_fail(d, KEEL_CORRUPT, what, "trailing bytes after the last field");
		return KEEL_CORRUPT;
	}
	return KEEL_OK;
}

void meta_enc_str(struct keel_wbuf *w, const char *s)
{
	if (s == NULL) {
		keel_wbuf_i32(w, -1);
		return;
	}
	size_t n = strlen(s);
	if (n > INT32_MAX) {
		w->failed = true;
		return;
	}
	keel_wbuf_i32(w, (int32_t)n);
	keel_wbuf_bytes(w, s, n);
}

void meta_enc_i32_array(struct keel_wbuf *w, const int32_t *v, uint32_t count)
{
	if (count > INT32_MAX) {
		w->failed = true;
		return;
	}
	keel_wbuf_i32(w, (int32_t)count);
	for (uint32_t i = 0; i < count; i++) {
		keel_wbuf_i32(w, v[i]);
	}
}

void meta_enc_bytes(struct keel_wbuf *w, const void *data, size_t size, bool null)
{
	if (null) {
		keel_wbuf_i32(w, -1);
		return;
	}
	if (size > INT32_MAX) {
		w->failed = true;
		return;
	}
	keel_wbuf_i32(w, (int32_t)size);
	keel_wbuf_bytes(w, data, size);
}
