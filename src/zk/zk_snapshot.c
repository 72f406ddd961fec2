/* zk_snapshot.c — state snapshots (see zk_snapshot.h). */
#include "zk/zk_snapshot.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/crc32c.h"
#include "zk/zk_mutate.h"
#include "zk/zk_tree.h"

#define MAGIC "KEELZKS1"
#define END_MAGIC "KEELZKSE"
#define VERSION 1u

/* ---- writing ---- */

struct writer {
	uint8_t *buf;
	size_t used;
	uint32_t crc;
	uint64_t total;
	zk_snapshot_write_fn fn;
	void *ctx;
	enum keel_err err;
};

static void w_flush(struct writer *w)
{
	if (w->err != KEEL_OK || w->used == 0) {
		return;
	}
	w->err = w->fn(w->ctx, w->buf, w->used);
	w->total += w->used;
	w->used = 0;
}

static void w_bytes(struct writer *w, const void *data, size_t n)
{
	const uint8_t *p = data;
	while (n > 0 && w->err == KEEL_OK) {
		size_t room = ZK_SNAPSHOT_CHUNK - w->used;
		size_t k = n < room ? n : room;
		memcpy(w->buf + w->used, p, k);
		w->crc = keel_crc32c(w->crc, p, k);
		w->used += k;
		p += k;
		n -= k;
		if (w->used == ZK_SNAPSHOT_CHUNK) {
			w_flush(w);
		}
	}
}

static void w_u32(struct writer *w, uint32_t v)
{
	uint8_t b[4];
	keel_store_be32(b, v);
	w_bytes(w, b, 4);
}

static void w_u64(struct writer *w, uint64_t v)
{
	uint8_t b[8];
	keel_store_be64(b, v);
	w_bytes(w, b, 8);
}

struct node_walk {
	struct writer *w;
	const struct zk_state *st;
	const uint32_t *acl_index;
};

static bool write_node(void *ctx, uint32_t id, const uint8_t *path, size_t size, uint32_t depth)
{
	(void)path;
	(void)size;
	(void)depth;
	struct node_walk *nw = ctx;
	struct writer *w = nw->w;
	const struct zk_node *n = zk_tree_node(&nw->st->tree, id);
	bool eph = zk_owner_kind(n->ephemeral_owner) == ZK_KIND_EPHEMERAL;
	w_u32(w, n->name_size);
	w_bytes(w, n->bytes, n->name_size);
	w_u32(w, eph ? 0 : n->u.dir.child_count);
	w_u32(w, n->flags);
	w_u32(w, (uint32_t)n->version);
	w_u32(w, (uint32_t)n->cversion);
	w_u32(w, (uint32_t)n->aversion);
	w_u64(w, (uint64_t)n->czxid);
	w_u64(w, (uint64_t)n->mzxid);
	w_u64(w, (uint64_t)n->pzxid);
	w_u64(w, (uint64_t)n->ctime);
	w_u64(w, (uint64_t)n->mtime);
	w_u64(w, (uint64_t)n->ephemeral_owner);
	w_u32(w, nw->acl_index[n->acl]);
	w_u32(w, n->data_size);
	w_bytes(w, zk_node_data(n), n->data_size);
	return w->err == KEEL_OK;
}

static int session_cmp(const void *a, const void *b)
{
	int64_t x = (*(const struct zk_session *const *)a)->id;
	int64_t y = (*(const struct zk_session *const *)b)->id;
	return (x > y) - (x < y);
}

/* ACL table ids -> dense snapshot indexes (referenced lists only). */
static uint32_t *acl_indexes(const struct zk_state *st, uint32_t *count)
{
	const struct zk_acl_table *t = &st->acls;
	uint32_t *map = malloc((t->capacity == 0 ? 1 : t->capacity) * sizeof(*map));
	if (map == NULL) {
		return NULL;
	}
	*count = 0;
	for (uint32_t id = 0; id < t->capacity; id++) {
		map[id] = UINT32_MAX;
		if (t->lists[id] != NULL && zk_acl_table_refs(t, id) > 0) {
			map[id] = (*count)++;
		}
	}
	return map;
}

enum keel_err zk_snapshot_write(const struct zk_state *st, zk_snapshot_write_fn fn, void *ctx,
				uint64_t *written)
{
	struct writer w = {NULL, 0, 0, 0, fn, ctx, KEEL_OK};
	uint32_t acl_count = 0;
	size_t nsessions = zk_state_session_count(st);
	const struct zk_session **sessions = malloc((nsessions + 1) * sizeof(*sessions));
	uint32_t *map = acl_indexes(st, &acl_count);
	struct keel_wbuf path;
	keel_wbuf_init_dynamic(&path, 256, SIZE_MAX / 2);
	w.buf = malloc(ZK_SNAPSHOT_CHUNK);
	if (sessions == NULL || map == NULL || w.buf == NULL) {
		w.err = KEEL_NOMEM;
		goto out;
	}
	w_bytes(&w, MAGIC, 8);
	w_u32(&w, VERSION);
	w_u32(&w, 0);
	w_u64(&w, st->last_zxid);
	w_u64(&w, zk_state_hash(st));
	w_u32(&w, acl_count);
	w_u32(&w, (uint32_t)nsessions);
	w_u32(&w, zk_state_node_count(st));
	for (uint32_t id = 0; id < st->acls.capacity; id++) {
		if (map[id] == UINT32_MAX) {
			continue;
		}
		struct zk_acl_vec v = zk_acl_table_get(&st->acls, id);
		w_u32(&w, (uint32_t)v.count);
		w_u32(&w, v.size);
		w_bytes(&w, v.data, v.size);
	}
	size_t cursor = 0;
	for (size_t i = 0; i < nsessions; i++) {
		sessions[i] = zk_state_session_next(st, &cursor);
	}
	qsort(sessions, nsessions, sizeof(*sessions), session_cmp);
	for (size_t i = 0; i < nsessions; i++) {
		w_u64(&w, (uint64_t)sessions[i]->id);
		w_u32(&w, (uint32_t)sessions[i]->timeout_ms);
		w_bytes(&w, sessions[i]->passwd, ZK_PASSWD_SIZE);
	}
	struct node_walk nw = {&w, st, map};
	if (!zk_tree_walk(&st->tree, ZK_ROOT_ID, &path, write_node, &nw) && w.err == KEEL_OK) {
		w.err = KEEL_NOMEM;
	}
	uint32_t crc = w.crc;
	w_u32(&w, crc);
	w_bytes(&w, END_MAGIC, 8);
	w_flush(&w);
out:
	if (written != NULL) {
		*written = w.total;
	}
	keel_wbuf_free(&path);
	free(w.buf);
	free(map);
	free(sessions);
	return w.err;
}

/* ---- reading ---- */

struct reader {
	uint8_t *buf;
	size_t pos;
	size_t len;
	uint32_t crc;
	zk_snapshot_read_fn fn;
	void *ctx;
	enum keel_err err;
};

static void r_bytes(struct reader *r, void *dst, size_t n)
{
	uint8_t *p = dst;
	while (n > 0 && r->err == KEEL_OK) {
		if (r->pos == r->len) {
			size_t got = 0;
			r->err = r->fn(r->ctx, r->buf, ZK_SNAPSHOT_CHUNK, &got);
			if (r->err == KEEL_OK && got == 0) {
				r->err = KEEL_SHORT;
			}
			if (r->err != KEEL_OK) {
				break;
			}
			KEEL_ASSERT(got <= ZK_SNAPSHOT_CHUNK);
			r->pos = 0;
			r->len = got;
		}
		size_t k = KEEL_MIN(n, r->len - r->pos);
		memcpy(p, r->buf + r->pos, k);
		r->crc = keel_crc32c(r->crc, r->buf + r->pos, k);
		r->pos += k;
		p += k;
		n -= k;
	}
	if (r->err != KEEL_OK && n > 0) {
		memset(p, 0, n);
	}
}

static uint32_t r_u32(struct reader *r)
{
	uint8_t b[4];
	r_bytes(r, b, 4);
	return keel_load_be32(b);
}

static uint64_t r_u64(struct reader *r)
{
	uint8_t b[8];
	r_bytes(r, b, 8);
	return keel_load_be64(b);
}

/* Nothing left: neither buffered nor from the callback. */
static bool at_end(struct reader *r)
{
	if (r->pos < r->len) {
		return false;
	}
	size_t got = 0;
	r->err = r->fn(r->ctx, r->buf, ZK_SNAPSHOT_CHUNK, &got);
	r->pos = 0;
	r->len = got;
	return r->err == KEEL_OK && got == 0;
}

static void corrupt(struct reader *r)
{
	if (r->err == KEEL_OK) {
		r->err = KEEL_CORRUPT;
	}
}

struct load {
	struct reader *r;
	struct zk_state *st;
	uint32_t *acl_ids;      /* snapshot index -> table id */
	uint32_t acl_count;
	uint32_t limit;         /* largest name or data */
	uint8_t *name;          /* scratch for a name */
	uint8_t *data;          /* scratch for data */
};

/* Reads one node record into a new allocation; *children gets its count. */
static struct zk_node *read_node(struct load *l, uint32_t *children)
{
	struct reader *r = l->r;
	uint32_t name_size = r_u32(r);
	if (name_size > l->limit) {
		corrupt(r);
		return NULL;
	}
	r_bytes(r, l->name, name_size);
	*children = r_u32(r);
	uint32_t flags = r_u32(r);
	int32_t version = (int32_t)r_u32(r);
	int32_t cversion = (int32_t)r_u32(r);
	int32_t aversion = (int32_t)r_u32(r);
	int64_t czxid = (int64_t)r_u64(r);
	int64_t mzxid = (int64_t)r_u64(r);
	int64_t pzxid = (int64_t)r_u64(r);
	int64_t ctime = (int64_t)r_u64(r);
	int64_t mtime = (int64_t)r_u64(r);
	int64_t owner = (int64_t)r_u64(r);
	uint32_t acl = r_u32(r);
	uint32_t data_size = r_u32(r);
	if (r->err != KEEL_OK) {
		return NULL;
	}
	if (data_size > l->limit || acl >= l->acl_count || (flags & ~(uint32_t)ZK_NODE_DATA_NULL) != 0 ||
	    ((flags & ZK_NODE_DATA_NULL) != 0 && data_size != 0)) {
		corrupt(r);
		return NULL;
	}
	if (zk_owner_kind(owner) == ZK_KIND_EPHEMERAL && *children != 0) {
		corrupt(r);
		return NULL;
	}
	r_bytes(r, l->data, data_size);
	if (r->err != KEEL_OK) {
		return NULL;
	}
	struct zk_node *n = zk_tree_alloc(&l->st->tree, (const char *)l->name, name_size, l->data,
					  data_size, (flags & ZK_NODE_DATA_NULL) != 0);
	if (n == NULL) {
		r->err = KEEL_NOMEM;
		return NULL;
	}
	n->flags = flags;
	n->version = version;
	n->cversion = cversion;
	n->aversion = aversion;
	n->czxid = czxid;
	n->mzxid = mzxid;
	n->pzxid = pzxid;
	n->ctime = ctime;
	n->mtime = mtime;
	n->ephemeral_owner = owner;
	n->acl = l->acl_ids[acl];
	zk_acl_table_ref(&l->st->acls, n->acl);
	return n;
}

/* Links a loaded node into its session ring or the special set. */
static void link_kind(struct load *l, uint32_t id)
{
	struct zk_state *st = l->st;
	int64_t owner = zk_tree_node(&st->tree, id)->ephemeral_owner;
	switch (zk_owner_kind(owner)) {
	case ZK_KIND_EPHEMERAL: {
		struct zk_session *s = zk_mut_session_find(st, owner);
#ifdef KEEL_PLANT_BUG_EXPIRE_NO_EPHEMERAL_DELETE
		if (s == NULL) {
			break; /* left behind by an expiry (zk_apply.c) */
		}
#endif
		if (s == NULL) {
			corrupt(l->r);
			return;
		}
		zk_mut_eph_link(st, s, id);
		break;
	}
	case ZK_KIND_CONTAINER:
	case ZK_KIND_TTL:
		if (zk_mut_special_add(st, id) != KEEL_OK) {
			l->r->err = KEEL_NOMEM;
		}
		break;
	case ZK_KIND_PERSISTENT:
		break;
	}
}

struct frame {
	uint32_t id;
	uint32_t left;
};

static void load_nodes(struct load *l, uint32_t expected)
{
	struct reader *r = l->r;
	struct zk_tree *t = &l->st->tree;
	uint32_t children;
	struct zk_node *root = read_node(l, &children);
	if (root == NULL) {
		return;
	}
	if (root->name_size != 0 || root->ephemeral_owner != 0) {
		zk_acl_table_unref(&l->st->acls, root->acl);
		zk_tree_free(t, root);
		corrupt(r);
		return;
	}
	struct zk_node *old = zk_tree_replace(t, ZK_ROOT_ID, root);
	zk_tree_free(t, old);
	uint32_t count = 1;
	size_t cap = 64;
	size_t depth = 0;
	struct frame *stack = malloc(cap * sizeof(*stack));
	if (stack == NULL) {
		r->err = KEEL_NOMEM;
		return;
	}
	stack[depth++] = (struct frame){ZK_ROOT_ID, children};
	while (depth > 0 && r->err == KEEL_OK) {
		struct frame *top = &stack[depth - 1];
		if (top->left == 0) {
			depth--;
			continue;
		}
		top->left--;
		uint32_t parent = top->id;
		if (count++ >= expected) {
			corrupt(r);
			break;
		}
		struct zk_node *n = read_node(l, &children);
		if (n == NULL) {
			break;
		}
		if (n->name_size == 0 ||
		    zk_tree_child(t, parent, n->bytes, n->name_size) != ZK_NODE_NONE) {
			zk_acl_table_unref(&l->st->acls, n->acl);
			zk_tree_free(t, n);
			corrupt(r);
			break;
		}
		uint32_t id = zk_tree_add(t, parent, n);
		if (id == ZK_NODE_NONE) {
			zk_acl_table_unref(&l->st->acls, n->acl);
			zk_tree_free(t, n);
			r->err = t->count >= t->max_nodes ? KEEL_CORRUPT : KEEL_NOMEM;
			break;
		}
		link_kind(l, id);
		if (children > 0) {
			if (depth == cap) {
				cap *= 2;
				struct frame *s = realloc(stack, cap * sizeof(*s));
				if (s == NULL) {
					r->err = KEEL_NOMEM;
					break;
				}
				stack = s;
			}
			stack[depth++] = (struct frame){id, children};
		}
	}
	free(stack);
	if (r->err == KEEL_OK && count != expected) {
		corrupt(r);
	}
}

static void load_acls(struct load *l)
{
	struct reader *r = l->r;
	for (uint32_t i = 0; i < l->acl_count && r->err == KEEL_OK; i++) {
		uint32_t entries = r_u32(r);
		uint32_t size = r_u32(r);
		if (r->err != KEEL_OK) {
			return;
		}
		if (entries == 0 || entries > ZK_ACL_MAX_ENTRIES || size > l->limit) {
			corrupt(r);
			return;
		}
		uint8_t *bytes = malloc(size + 4u);
		if (bytes == NULL) {
			r->err = KEEL_NOMEM;
			return;
		}
		keel_store_be32(bytes, entries);
		r_bytes(r, bytes + 4, size);
		struct keel_rbuf rb;
		keel_rbuf_init(&rb, bytes, size + 4u);
		struct zk_acl_vec v = zk_read_acl_vec(&rb);
		if (r->err == KEEL_OK && (!keel_rbuf_done(&rb) || v.count != (int32_t)entries)) {
			corrupt(r);
		}
		if (r->err == KEEL_OK) {
			l->acl_ids[i] = zk_acl_table_intern(&l->st->acls, v);
			if (l->acl_ids[i] == ZK_ACL_NONE) {
				r->err = KEEL_NOMEM;
			} else if (zk_acl_table_refs(&l->st->acls, l->acl_ids[i]) != 1) {
				corrupt(r); /* listed twice */
			}
		}
		free(bytes);
	}
}

static void load_sessions(struct load *l, uint32_t count)
{
	struct reader *r = l->r;
	int64_t prev = 0;
	for (uint32_t i = 0; i < count && r->err == KEEL_OK; i++) {
		int64_t id = (int64_t)r_u64(r);
		int32_t timeout = (int32_t)r_u32(r);
		uint8_t passwd[ZK_PASSWD_SIZE];
		r_bytes(r, passwd, ZK_PASSWD_SIZE);
		if (r->err != KEEL_OK) {
			return;
		}
		if (id == 0 || (i > 0 && id <= prev) ||
		    zk_owner_kind(id) != ZK_KIND_EPHEMERAL) {
			corrupt(r);
			return;
		}
		prev = id;
		enum keel_err err = zk_mut_session_add(l->st, id, timeout, passwd);
		if (err != KEEL_OK) {
			r->err = err == KEEL_NOMEM ? KEEL_NOMEM : KEEL_CORRUPT;
		}
		l->st->undo_count = 0; /* no group: nothing to undo */
	}
}

enum keel_err zk_snapshot_load(struct zk_state *st, const struct zk_config *cfg,
			       zk_snapshot_read_fn fn, void *ctx)
{
	enum keel_err err = zk_state_init_bare(st, cfg);
	if (err != KEEL_OK) {
		return err;
	}
	struct reader r = {malloc(ZK_SNAPSHOT_CHUNK), 0, 0, 0, fn, ctx, KEEL_OK};
	struct load l = {&r, st, NULL, 0, cfg->max_packet_size, malloc(cfg->max_packet_size + 1u),
			 malloc(cfg->max_packet_size + 1u)};
	if (r.buf == NULL || l.name == NULL || l.data == NULL) {
		r.err = KEEL_NOMEM;
		goto out;
	}
	uint8_t magic[8];
	r_bytes(&r, magic, 8);
	uint32_t version = r_u32(&r);
	uint32_t flags = r_u32(&r);
	uint64_t last_zxid = r_u64(&r);
	uint64_t hash = r_u64(&r);
	l.acl_count = r_u32(&r);
	uint32_t sessions = r_u32(&r);
	uint32_t nodes = r_u32(&r);
	if (r.err != KEEL_OK) {
		goto out;
	}
	if (memcmp(magic, MAGIC, 8) != 0 || version != VERSION || flags != 0 || nodes == 0 ||
	    (cfg->max_sessions != 0 && sessions > cfg->max_sessions) ||
	    (cfg->max_nodes != 0 && nodes > cfg->max_nodes)) {
		corrupt(&r);
		goto out;
	}
	/* Counts are checked against the bytes as they are read; the ACL map
	 * is at most 64 MiB for the largest count accepted. */
	if (l.acl_count > (1u << 24)) {
		corrupt(&r);
		goto out;
	}
	l.acl_ids = malloc(((size_t)l.acl_count + 1) * sizeof(*l.acl_ids));
	if (l.acl_ids == NULL) {
		r.err = KEEL_NOMEM;
		goto out;
	}
	load_acls(&l);
	load_sessions(&l, sessions);
	if (r.err == KEEL_OK) {
		load_nodes(&l, nodes);
	}
	uint32_t crc = r.crc;
	uint32_t stored = r_u32(&r);
	r_bytes(&r, magic, 8);
	if (r.err == KEEL_OK && (stored != crc || memcmp(magic, END_MAGIC, 8) != 0)) {
		corrupt(&r);
	}
	if (r.err == KEEL_OK && !at_end(&r)) {
		corrupt(&r); /* bytes after the end marker */
	}
	for (uint32_t i = 0; i < l.acl_count && r.err == KEEL_OK; i++) {
		/* A list no node uses is never written: not a snapshot of ours. */
		if (zk_acl_table_refs(&st->acls, l.acl_ids[i]) < 2) {
			corrupt(&r);
		}
	}
	if (r.err == KEEL_OK) {
		/* Drop the loader's own reference on each list. */
		for (uint32_t i = 0; i < l.acl_count; i++) {
			zk_acl_table_unref(&st->acls, l.acl_ids[i]);
		}
		zk_acl_table_collect(&st->acls);
		bool ok;
		st->digest_nodes = zk_state_digest_nodes_full(st, &ok);
		st->digest_sessions = zk_state_digest_sessions_full(st);
		st->last_zxid = last_zxid;
		if (!ok) {
			r.err = KEEL_NOMEM;
		} else if (zk_state_hash(st) != hash) {
			corrupt(&r);
		}
	}
out:
	free(r.buf);
	free(l.name);
	free(l.data);
	free(l.acl_ids);
	if (r.err != KEEL_OK) {
		zk_state_close(st);
	}
	return r.err;
}
