/*
 * zk_jute.h — the jute encoding ZooKeeper uses on the wire, as primitives.
 *
 * jute is big-endian: int = 4 bytes, long = 8, boolean = 1 byte (0/1),
 * buffer and ustring = int32 length (-1 = null) + bytes, vector = int32 count
 * (-1 = null) + elements. These helpers read and write those on top of the
 * base buffer reader/writer (sticky failure: read everything, check once).
 *
 * Decoded byte strings never own memory: a `struct zk_bytes` points into the
 * buffer it was read from and is valid exactly as long as that buffer. Vectors
 * of ACLs and strings are kept in their encoded form (`struct zk_acl_vec`,
 * `struct zk_str_vec`): the decoder validates every element once, and
 * iterators walk them later without allocating and without failing.
 *
 * A count or length is never trusted: a vector whose count could not fit in
 * the remaining input fails the reader before anything is walked, so no
 * decoder allocates more than its input justifies (they allocate nothing).
 */
#ifndef KEEL_ZK_JUTE_H
#define KEEL_ZK_JUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/buf.h"

/* A jute buffer or ustring. size < 0 means null (encoded as length -1). */
struct zk_bytes {
	const uint8_t *data;
	int32_t size;
};

#define ZK_BYTES_NULL ((struct zk_bytes){NULL, -1})

static inline struct zk_bytes zk_bytes_of(const void *data, size_t size)
{
	struct zk_bytes b = {(const uint8_t *)data, (int32_t)size};
	return b;
}

static inline struct zk_bytes zk_bytes_str(const char *s)
{
	return zk_bytes_of(s, strlen(s));
}

static inline bool zk_bytes_is_null(struct zk_bytes b)
{
	return b.size < 0;
}

/* Length in bytes, 0 for null. */
static inline size_t zk_bytes_len(struct zk_bytes b)
{
	return b.size < 0 ? 0 : (size_t)b.size;
}

static inline bool zk_bytes_eq(struct zk_bytes a, struct zk_bytes b)
{
	if (a.size < 0 || b.size < 0) {
		return a.size < 0 && b.size < 0;
	}
	return a.size == b.size && (a.size == 0 || memcmp(a.data, b.data, (size_t)a.size) == 0);
}

static inline bool zk_bytes_eq_str(struct zk_bytes a, const char *s)
{
	return zk_bytes_eq(a, zk_bytes_str(s));
}

/* ---- primitives ---- */

/* A buffer/ustring; -1 gives null, any other negative length fails. */
struct zk_bytes zk_read_bytes(struct keel_rbuf *r);
void zk_write_bytes(struct keel_wbuf *w, struct zk_bytes b);

static inline void zk_write_str(struct keel_wbuf *w, const char *s)
{
	zk_write_bytes(w, zk_bytes_str(s));
}

/* A vector count (-1 = null) that is checked against the bytes left: every
 * element takes at least `min_element_size` bytes. Fails the reader if the
 * count is below -1 or cannot fit. */
int32_t zk_read_count(struct keel_rbuf *r, size_t min_element_size);

/* ---- Stat ---- */

struct zk_stat {
	int64_t czxid;
	int64_t mzxid;
	int64_t ctime;
	int64_t mtime;
	int32_t version;
	int32_t cversion;
	int32_t aversion;
	int64_t ephemeral_owner;
	int32_t data_length;
	int32_t num_children;
	int64_t pzxid;
};

#define ZK_STAT_SIZE 68
_Static_assert(ZK_STAT_SIZE == 6 * 8 + 5 * 4, "jute Stat is 68 bytes");

void zk_read_stat(struct keel_rbuf *r, struct zk_stat *stat);
void zk_write_stat(struct keel_wbuf *w, const struct zk_stat *stat);
/* StatPersisted (snapshots): the Stat without dataLength and numChildren,
 * which are left 0. */
void zk_read_stat_persisted(struct keel_rbuf *r, struct zk_stat *stat);
bool zk_stat_eq(const struct zk_stat *a, const struct zk_stat *b);

/* ---- ACL and Id ---- */

struct zk_id {
	struct zk_bytes scheme;
	struct zk_bytes id;
};

struct zk_acl {
	int32_t perms;
	struct zk_id id;
};

/* vector<ACL> kept encoded: `data` points at the first element (after the
 * count), `size` bytes cover all elements. count < 0: null vector. */
struct zk_acl_vec {
	int32_t count;
	const uint8_t *data;
	uint32_t size;
};

/* Reads and validates a vector<ACL> (every element decodes). */
struct zk_acl_vec zk_read_acl_vec(struct keel_rbuf *r);
/* Writes count + elements (or -1 for a null vector). */
void zk_write_acl_vec(struct keel_wbuf *w, struct zk_acl_vec v);
void zk_write_acl(struct keel_wbuf *w, const struct zk_acl *acl);

/* Builds an encoded ACL vector from an array (for tests and system writes):
 * writes the elements (without the count) into `w` and returns a vector that
 * points into w->data — valid until the next write to `w`. */
struct zk_acl_vec zk_acl_vec_build(struct keel_wbuf *w, const struct zk_acl *acls, size_t count);

struct zk_acl_iter {
	struct keel_rbuf r;
	int32_t left;
};

void zk_acl_iter_init(struct zk_acl_iter *it, struct zk_acl_vec v);
/* Next element, false at the end. Never fails on a validated vector. */
bool zk_acl_iter_next(struct zk_acl_iter *it, struct zk_acl *acl);

/* ---- vector<ustring> ---- */

struct zk_str_vec {
	int32_t count;
	const uint8_t *data;
	uint32_t size;
};

struct zk_str_vec zk_read_str_vec(struct keel_rbuf *r);
void zk_write_str_vec(struct keel_wbuf *w, struct zk_str_vec v);
/* Builds an encoded string vector from C strings (tests, client side); the
 * result points into w->data and dies at the next write to `w`. */
struct zk_str_vec zk_str_vec_build(struct keel_wbuf *w, const char *const *strs, size_t count);

struct zk_str_iter {
	struct keel_rbuf r;
	int32_t left;
};

void zk_str_iter_init(struct zk_str_iter *it, struct zk_str_vec v);
bool zk_str_iter_next(struct zk_str_iter *it, struct zk_bytes *s);

#endif
