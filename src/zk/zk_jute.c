/* zk_jute.c — jute primitives (see zk_jute.h). */
#include "zk/zk_jute.h"

#include "base/assert.h"

struct zk_bytes zk_read_bytes(struct keel_rbuf *r)
{
	int32_t len = keel_rbuf_i32(r);
	if (!keel_rbuf_ok(r)) {
		return ZK_BYTES_NULL;
	}
	if (len == -1) {
		return ZK_BYTES_NULL;
	}
	if (len < 0) {
		keel_rbuf_fail(r);
		return ZK_BYTES_NULL;
	}
	const uint8_t *p = keel_rbuf_bytes(r, (size_t)len);
	if (p == NULL) {
		return ZK_BYTES_NULL;
	}
	return zk_bytes_of(p, (size_t)len);
}

void zk_write_bytes(struct keel_wbuf *w, struct zk_bytes b)
{
	if (b.size < 0) {
		keel_wbuf_i32(w, -1);
		return;
	}
	keel_wbuf_i32(w, b.size);
	keel_wbuf_bytes(w, b.data, (size_t)b.size);
}

int32_t zk_read_count(struct keel_rbuf *r, size_t min_element_size)
{
	KEEL_ASSERT(min_element_size > 0);
	int32_t count = keel_rbuf_i32(r);
	if (!keel_rbuf_ok(r)) {
		return -1;
	}
	if (count < -1) {
		keel_rbuf_fail(r);
		return -1;
	}
	if (count > 0 && (size_t)count > keel_rbuf_remaining(r) / min_element_size) {
		keel_rbuf_fail(r);
		return -1;
	}
	return count;
}

/* The fields Stat and StatPersisted share, up to ephemeralOwner. */
static void read_stat_head(struct keel_rbuf *r, struct zk_stat *s)
{
	s->czxid = keel_rbuf_i64(r);
	s->mzxid = keel_rbuf_i64(r);
	s->ctime = keel_rbuf_i64(r);
	s->mtime = keel_rbuf_i64(r);
	s->version = keel_rbuf_i32(r);
	s->cversion = keel_rbuf_i32(r);
	s->aversion = keel_rbuf_i32(r);
	s->ephemeral_owner = keel_rbuf_i64(r);
}

void zk_read_stat(struct keel_rbuf *r, struct zk_stat *s)
{
	read_stat_head(r, s);
	s->data_length = keel_rbuf_i32(r);
	s->num_children = keel_rbuf_i32(r);
	s->pzxid = keel_rbuf_i64(r);
}

void zk_read_stat_persisted(struct keel_rbuf *r, struct zk_stat *s)
{
	read_stat_head(r, s);
	s->data_length = 0;
	s->num_children = 0;
	s->pzxid = keel_rbuf_i64(r);
}

void zk_write_stat(struct keel_wbuf *w, const struct zk_stat *s)
{
	uint8_t *p = keel_wbuf_reserve(w, ZK_STAT_SIZE);
	if (p == NULL) {
		return;
	}
	keel_store_be64(p, (uint64_t)s->czxid);
	keel_store_be64(p + 8, (uint64_t)s->mzxid);
	keel_store_be64(p + 16, (uint64_t)s->ctime);
	keel_store_be64(p + 24, (uint64_t)s->mtime);
	keel_store_be32(p + 32, (uint32_t)s->version);
	keel_store_be32(p + 36, (uint32_t)s->cversion);
	keel_store_be32(p + 40, (uint32_t)s->aversion);
	keel_store_be64(p + 44, (uint64_t)s->ephemeral_owner);
	keel_store_be32(p + 52, (uint32_t)s->data_length);
	keel_store_be32(p + 56, (uint32_t)s->num_children);
	keel_store_be64(p + 60, (uint64_t)s->pzxid);
}

bool zk_stat_eq(const struct zk_stat *a, const struct zk_stat *b)
{
	return a->czxid == b->czxid && a->mzxid == b->mzxid && a->ctime == b->ctime &&
	       a->mtime == b->mtime && a->version == b->version && a->cversion == b->cversion &&
	       a->aversion == b->aversion && a->ephemeral_owner == b->ephemeral_owner &&
	       a->data_length == b->data_length && a->num_children == b->num_children &&
	       a->pzxid == b->pzxid;
}

/* ---- ACLs ---- */

/* perms (4) + two null strings (4 + 4) */
#define ACL_MIN_SIZE 12u

static void read_acl(struct keel_rbuf *r, struct zk_acl *acl)
{
	acl->perms = keel_rbuf_i32(r);
	acl->id.scheme = zk_read_bytes(r);
	acl->id.id = zk_read_bytes(r);
}

struct zk_acl_vec zk_read_acl_vec(struct keel_rbuf *r)
{
	struct zk_acl_vec v = {-1, NULL, 0};
	int32_t count = zk_read_count(r, ACL_MIN_SIZE);
	if (!keel_rbuf_ok(r) || count < 0) {
		return v;
	}
	size_t start = r->pos;
	for (int32_t i = 0; i < count; i++) {
		struct zk_acl acl;
		read_acl(r, &acl);
	}
	if (!keel_rbuf_ok(r)) {
		return v;
	}
	v.count = count;
	v.data = r->data + start;
	v.size = (uint32_t)(r->pos - start);
	return v;
}

void zk_write_acl(struct keel_wbuf *w, const struct zk_acl *acl)
{
	keel_wbuf_i32(w, acl->perms);
	zk_write_bytes(w, acl->id.scheme);
	zk_write_bytes(w, acl->id.id);
}

void zk_write_acl_vec(struct keel_wbuf *w, struct zk_acl_vec v)
{
	if (v.count < 0) {
		keel_wbuf_i32(w, -1);
		return;
	}
	keel_wbuf_i32(w, v.count);
	keel_wbuf_bytes(w, v.data, v.size);
}

struct zk_acl_vec zk_acl_vec_build(struct keel_wbuf *w, const struct zk_acl *acls, size_t count)
{
	size_t start = w->size;
	for (size_t i = 0; i < count; i++) {
		zk_write_acl(w, &acls[i]);
	}
	struct zk_acl_vec v = {(int32_t)count, NULL, 0};
	if (!keel_wbuf_ok(w)) {
		v.count = -1;
		return v;
	}
	v.data = w->data == NULL ? NULL : w->data + start;
	v.size = (uint32_t)(w->size - start);
	return v;
}

void zk_acl_iter_init(struct zk_acl_iter *it, struct zk_acl_vec v)
{
	keel_rbuf_init(&it->r, v.data, v.count < 0 ? 0 : v.size);
	it->left = v.count < 0 ? 0 : v.count;
}

bool zk_acl_iter_next(struct zk_acl_iter *it, struct zk_acl *acl)
{
	if (it->left == 0) {
		return false;
	}
	it->left--;
	read_acl(&it->r, acl);
	KEEL_ASSERT(keel_rbuf_ok(&it->r));
	return true;
}

/* ---- string vectors ---- */

struct zk_str_vec zk_read_str_vec(struct keel_rbuf *r)
{
	struct zk_str_vec v = {-1, NULL, 0};
	int32_t count = zk_read_count(r, 4);
	if (!keel_rbuf_ok(r) || count < 0) {
		return v;
	}
	size_t start = r->pos;
	for (int32_t i = 0; i < count; i++) {
		(void)zk_read_bytes(r);
	}
	if (!keel_rbuf_ok(r)) {
		return v;
	}
	v.count = count;
	v.data = r->data + start;
	v.size = (uint32_t)(r->pos - start);
	return v;
}

void zk_write_str_vec(struct keel_wbuf *w, struct zk_str_vec v)
{
	if (v.count < 0) {
		keel_wbuf_i32(w, -1);
		return;
	}
	keel_wbuf_i32(w, v.count);
	keel_wbuf_bytes(w, v.data, v.size);
}

struct zk_str_vec zk_str_vec_build(struct keel_wbuf *w, const char *const *strs, size_t count)
{
	size_t start = w->size;
	for (size_t i = 0; i < count; i++) {
		zk_write_str(w, strs[i]);
	}
	struct zk_str_vec v = {(int32_t)count, NULL, 0};
	if (!keel_wbuf_ok(w)) {
		v.count = -1;
		return v;
	}
	v.data = w->data == NULL ? NULL : w->data + start;
	v.size = (uint32_t)(w->size - start);
	return v;
}

void zk_str_iter_init(struct zk_str_iter *it, struct zk_str_vec v)
{
	keel_rbuf_init(&it->r, v.data, v.count < 0 ? 0 : v.size);
	it->left = v.count < 0 ? 0 : v.count;
}

bool zk_str_iter_next(struct zk_str_iter *it, struct zk_bytes *s)
{
	if (it->left == 0) {
		return false;
	}
	it->left--;
	*s = zk_read_bytes(&it->r);
	KEEL_ASSERT(keel_rbuf_ok(&it->r));
	return true;
}
