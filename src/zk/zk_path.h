/*
 * zk_path.h — znode path syntax, exactly as ZooKeeper's PathUtils checks it.
 *
 * ZooKeeper validates a Java String decoded from the UTF-8 on the wire, so
 * the rules are stated in UTF-16 code units. keel applies them to the UTF-8
 * bytes with the same outcome:
 *
 *   - not empty, starts with '/'; "/" alone is the root;
 *   - does not end with '/';
 *   - no empty component ("//"), no "." or ".." component;
 *   - no U+0000, no U+0001..U+001F, no U+007F..U+009F, no U+D800..U+F8FF
 *     (surrogates, so nothing outside the BMP, and the private use area),
 *     no U+FFF0..U+FFFF;
 *   - malformed UTF-8 (bad lead byte, truncated or overlong sequence,
 *     encoded surrogate) is invalid: Java decodes it to U+FFFD, which the
 *     last rule rejects.
 *
 * A sequential create validates the path with its suffix appended, so a
 * path ending in '/' is valid for sequential creates: zk_path_validate_seq().
 *
 * Only the error code reaches clients (BadArguments, -8); the reason and the
 * position are for logs.
 */
#ifndef KEEL_ZK_PATH_H
#define KEEL_ZK_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum zk_path_reason {
	ZK_PATH_OK,
	ZK_PATH_NULL,          /* null path */
	ZK_PATH_EMPTY,         /* "Path length must be > 0" */
	ZK_PATH_NO_LEADING_SLASH,
	ZK_PATH_TRAILING_SLASH,
	ZK_PATH_NUL_CHAR,
	ZK_PATH_EMPTY_NAME,    /* "//" */
	ZK_PATH_RELATIVE,      /* "." or ".." component */
	ZK_PATH_INVALID_CHAR,  /* a forbidden or malformed character */
};

struct zk_path_error {
	enum zk_path_reason reason;
	size_t offset; /* byte offset of the offending character */
};

/* Validates `path` (size bytes, not NUL-terminated; NULL = null path).
 * Returns true if valid; otherwise fills *err (may be NULL). */
bool zk_path_validate(const char *path, size_t size, struct zk_path_error *err);

/* Validation of a sequential create's path before its suffix: as if one
 * digit were appended (ZooKeeper: validatePath(path + "1")). */
bool zk_path_validate_seq(const char *path, size_t size, struct zk_path_error *err);

/* Static message for a reason, like ZooKeeper's. */
const char *zk_path_reason_message(enum zk_path_reason reason);

/* Offset of the last '/' or -1; the parent is path[0..slash) ("" for the
 * root's children, which ZooKeeper maps to the root). */
static inline ptrdiff_t zk_path_last_slash(const char *path, size_t size)
{
	for (size_t i = size; i-- > 0;) {
		if (path[i] == '/') {
			return (ptrdiff_t)i;
		}
	}
	return -1;
}

static inline bool zk_path_has_nul(const char *path, size_t size)
{
	for (size_t i = 0; i < size; i++) {
		if (path[i] == '\0') {
			return true;
		}
	}
	return false;
}

/* Formats a sequence number like Java's "%010d" (sign included in the
 * width). Writes at most 11 bytes; returns the count. */
size_t zk_path_format_seq(char out[11], int32_t value);

/* A path stored at `offset` in a caller's buffer of built paths. */
struct zk_path_span {
	uint32_t offset;
	uint32_t size;
};

/* Sorts `count` items of `item_size` bytes whose FIRST member is a struct
 * zk_path_span, by the path bytes at base + offset (byte order, a prefix
 * first): O(n log n) comparisons whatever the order (base/sort.h).
 * Returns the number of comparisons made. */
uint64_t zk_path_spans_sort(void *items, size_t count, size_t item_size, const uint8_t *base);

#endif
