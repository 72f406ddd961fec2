/* zk_path.c — znode path validation (see zk_path.h). */
#include "zk/zk_path.h"

#include <string.h>

#include "base/assert.h"
#include "base/sort.h"

/* The path as ZooKeeper would see it, plus an optional virtual trailing
 * byte (the "1" of a sequential create). */
struct path_view {
	const unsigned char *p;
	size_t size;  /* real bytes */
	size_t total; /* real bytes + virtual one */
	unsigned char extra;
};

static unsigned char at(const struct path_view *v, size_t i)
{
	return i < v->size ? v->p[i] : v->extra;
}

/* Decodes one UTF-8 code point at i; returns its byte length, with *cp set,
 * or 0 for malformed input (Java would produce U+FFFD). */
static size_t decode_utf8(const struct path_view *v, size_t i, uint32_t *cp)
{
	unsigned char b0 = at(v, i);
	if (b0 < 0x80) {
		*cp = b0;
		return 1;
	}
	size_t n;
	uint32_t min;
	uint32_t c;
	if (b0 >= 0xc2 && b0 <= 0xdf) {
		n = 2;
		min = 0x80;
		c = b0 & 0x1fu;
	} else if (b0 >= 0xe0 && b0 <= 0xef) {
		n = 3;
		min = 0x800;
		c = b0 & 0x0fu;
	} else if (b0 >= 0xf0 && b0 <= 0xf4) {
		n = 4;
		min = 0x10000;
		c = b0 & 0x07u;
	} else {
		return 0;
	}
	if (v->total - i < n) {
		return 0;
	}
	for (size_t k = 1; k < n; k++) {
		unsigned char b = at(v, i + k);
		if ((b & 0xc0) != 0x80) {
			return 0;
		}
		c = c << 6 | (b & 0x3fu);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
		return 0;
	}
	*cp = c;
	return n;
}

static bool forbidden(uint32_t c)
{
	return (c >= 0x01 && c <= 0x1f) || (c >= 0x7f && c <= 0x9f) ||
	       (c >= 0xd800 && c <= 0xf8ff) || (c >= 0xfff0 && c <= 0xffff) || c > 0xffff;
}

static bool fail(struct zk_path_error *err, enum zk_path_reason reason, size_t offset)
{
	if (err != NULL) {
		err->reason = reason;
		err->offset = offset;
	}
	return false;
}

static bool validate(const struct path_view *v, struct zk_path_error *err)
{
	size_t len = v->total;
	if (len == 0) {
		return fail(err, ZK_PATH_EMPTY, 0);
	}
	if (at(v, 0) != '/') {
		return fail(err, ZK_PATH_NO_LEADING_SLASH, 0);
	}
	if (len == 1) {
		return true;
	}
	if (at(v, len - 1) == '/') {
		return fail(err, ZK_PATH_TRAILING_SLASH, len - 1);
	}
	uint32_t lastc = '/';
	for (size_t i = 1; i < len;) {
		uint32_t c;
		size_t n = decode_utf8(v, i, &c);
		if (n == 0) {
			return fail(err, ZK_PATH_INVALID_CHAR, i);
		}
		bool at_end = i + 1 == len;
		if (c == 0) {
			return fail(err, ZK_PATH_NUL_CHAR, i);
		} else if (c == '/' && lastc == '/') {
			return fail(err, ZK_PATH_EMPTY_NAME, i);
		} else if (c == '.' && lastc == '.') {
			/* i >= 2 here: lastc is a real '.' at i - 1 >= 1. */
			if (at(v, i - 2) == '/' && (at_end || at(v, i + 1) == '/')) {
				return fail(err, ZK_PATH_RELATIVE, i);
			}
		} else if (c == '.') {
			if (at(v, i - 1) == '/' && (at_end || at(v, i + 1) == '/')) {
				return fail(err, ZK_PATH_RELATIVE, i);
			}
		} else if (forbidden(c)) {
			return fail(err, ZK_PATH_INVALID_CHAR, i);
		}
		lastc = c;
		i += n;
	}
	return true;
}

bool zk_path_validate(const char *path, size_t size, struct zk_path_error *err)
{
	if (path == NULL && size == 0) {
		return fail(err, ZK_PATH_NULL, 0);
	}
	struct path_view v = {(const unsigned char *)path, size, size, 0};
	return validate(&v, err);
}

bool zk_path_validate_seq(const char *path, size_t size, struct zk_path_error *err)
{
	if (path == NULL && size == 0) {
		return fail(err, ZK_PATH_NULL, 0);
	}
	struct path_view v = {(const unsigned char *)path, size, size + 1, '1'};
	return validate(&v, err);
}

const char *zk_path_reason_message(enum zk_path_reason reason)
{
	switch (reason) {
	case ZK_PATH_OK: return "valid";
	case ZK_PATH_NULL: return "Path cannot be null";
	case ZK_PATH_EMPTY: return "Path length must be > 0";
	case ZK_PATH_NO_LEADING_SLASH: return "Path must start with / character";
	case ZK_PATH_TRAILING_SLASH: return "Path must not end with / character";
	case ZK_PATH_NUL_CHAR: return "null character not allowed";
	case ZK_PATH_EMPTY_NAME: return "empty node name specified";
	case ZK_PATH_RELATIVE: return "relative paths not allowed";
	case ZK_PATH_INVALID_CHAR: return "invalid character";
	}
	return "unknown";
}

size_t zk_path_format_seq(char out[11], int32_t value)
{
	/* Java: String.format("%010d", v) — zero padded to width 10, the sign
	 * counting toward the width. */
	uint32_t mag = value < 0 ? (uint32_t)0 - (uint32_t)value : (uint32_t)value;
	char digits[10];
	size_t n = 0;
	do {
		digits[n++] = (char)('0' + mag % 10);
		mag /= 10;
	} while (mag != 0);
	size_t pos = 0;
	size_t width = value < 0 ? 9 : 10;
	if (value < 0) {
		out[pos++] = '-';
	}
	for (size_t i = n; i < width; i++) {
		out[pos++] = '0';
	}
	while (n > 0) {
		out[pos++] = digits[--n];
	}
	KEEL_ASSERT(pos <= 11);
	return pos;
}

static int path_span_cmp(const void *a, const void *b, void *ctx)
{
	const uint8_t *base = ctx;
	const struct zk_path_span *x = a;
	const struct zk_path_span *y = b;
	size_t n = x->size < y->size ? x->size : y->size;
	int r = n == 0 ? 0 : memcmp(base + x->offset, base + y->offset, n);
	return r != 0 ? r : (x->size > y->size) - (x->size < y->size);
}

uint64_t zk_path_spans_sort(void *items, size_t count, size_t item_size, const uint8_t *base)
{
	return keel_sort(items, count, item_size, path_span_cmp, (void *)(uintptr_t)base);
}
