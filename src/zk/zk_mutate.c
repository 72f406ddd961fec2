/* zk_mutate.c — state mutations with undo, digest and triggers. */
#include "zk/zk_mutate.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"

/* ---- digest ----
 *
 * A node's digest is the sum of four parts, so that each kind of change
 * rehashes only what it touched (a child create must not rehash the
 * parent's data):
 *   data     path, data (null or not), mzxid, mtime, version
 *   children path, persisted cversion, pzxid
 *   acl      path, ACL content hash, aversion
 *   identity path, czxid, ctime, ephemeralOwner
 * The state digest is the sum over nodes (order-independent), plus the sum
 * of session digests. Seeds are fixed: digests are compared across servers.
 */

#define DIGEST_PATH_SEED UINT64_C(0x9e3779b97f4a7c15)

static uint64_t mix2(uint64_t a, uint64_t b)
{
	return keel_hash_u64(a ^ keel_hash_u64(b + UINT64_C(0x632be59bd9b4e019)));
}

static uint64_t path_seed(struct zk_bytes path)
{
	return keel_hash_bytes(path.data, zk_bytes_len(path), DIGEST_PATH_SEED);
}

static uint64_t part_data(uint64_t ps, const struct zk_node *n)
{
	uint64_t h = keel_hash_bytes(zk_node_data(n), n->data_size, ps ^ 1u);
	h = mix2(h, (uint64_t)n->mzxid);
	h = mix2(h, (uint64_t)n->mtime);
	h = mix2(h, (uint64_t)(uint32_t)n->version);
	return mix2(h, n->flags & ZK_NODE_DATA_NULL);
}

static uint64_t part_children(uint64_t ps, const struct zk_node *n)
{
	uint64_t h = mix2(ps ^ 2u, (uint64_t)(uint32_t)n->cversion);
	return mix2(h, (uint64_t)n->pzxid);
}

static uint64_t part_acl(const struct zk_state *st, uint64_t ps, const struct zk_node *n)
{
	uint64_t h = mix2(ps ^ 3u, zk_acl_table_hash(&st->acls, n->acl));
	return mix2(h, (uint64_t)(uint32_t)n->aversion);
}

static uint64_t part_identity(uint64_t ps, const struct zk_node *n)
{
	uint64_t h = mix2(ps ^ 4u, (uint64_t)n->czxid);
	h = mix2(h, (uint64_t)n->ctime);
	return mix2(h, (uint64_t)n->ephemeral_owner);
}

uint64_t zk_mut_node_digest(const struct zk_state *st, struct zk_bytes path,
			    const struct zk_node *n)
{
	uint64_t ps = path_seed(path);
	return part_data(ps, n) + part_children(ps, n) + part_acl(st, ps, n) +
	       part_identity(ps, n);
}

uint64_t zk_mut_session_digest(const struct zk_session *s)
{
	uint64_t h = keel_hash_bytes(s->passwd, sizeof(s->passwd), DIGEST_PATH_SEED ^ 5u);
	h = mix2(h, (uint64_t)s->id);
	return mix2(h, (uint64_t)(uint32_t)s->timeout_ms);
}

/* ---- helpers ---- */

struct zk_bytes zk_mut_parent_path(struct zk_bytes path)
{
	size_t n = zk_bytes_len(path);
	size_t slash = 0;
	for (size_t i = n; i-- > 0;) {
		if (path.data[i] == '/') {
			slash = i;
			break;
		}
	}
	if (slash == 0) {
		return zk_bytes_of("/", 1);
	}
	return zk_bytes_of(path.data, slash);
}

static bool session_eq(const void *item, const void *key)
{
	return ((const struct zk_session *)item)->id == *(const int64_t *)key;
}

struct zk_session *zk_mut_session_find(const struct zk_state *st, int64_t id)
{
	return keel_hmap_find(&st->sessions, keel_hash_u64((uint64_t)id), session_eq, &id);
}

static void *special_item(uint32_t id)
{
	return (void *)(uintptr_t)((uintptr_t)id + 1);
}

enum keel_err zk_mut_special_add(struct zk_state *st, uint32_t id)
{
	return keel_hmap_insert(&st->special, keel_hash_u64(id), special_item(id));
}

static void special_remove(struct zk_state *st, uint32_t id)
{
	bool removed = keel_hmap_remove_item(&st->special, keel_hash_u64(id), special_item(id));
	KEEL_ASSERT(removed);
}

enum keel_err zk_mut_trigger(struct zk_result *res, int32_t type, uint32_t acl,
			     struct zk_bytes path)
{
	if (res->trigger_count == res->trigger_capacity) {
		uint32_t cap = res->trigger_capacity == 0 ? 16 : res->trigger_capacity * 2;
		struct zk_trigger *t = realloc(res->triggers, cap * sizeof(*t));
		if (t == NULL) {
			return KEEL_NOMEM;
		}
		res->triggers = t;
		res->trigger_capacity = cap;
	}
	size_t offset = res->paths.size;
	size_t len = zk_bytes_len(path);
	keel_wbuf_bytes(&res->paths, path.data, len);
	if (!keel_wbuf_ok(&res->paths) || offset > UINT32_MAX) {
		res->paths.failed = false;
		res->paths.size = offset;
		return KEEL_NOMEM;
	}
	struct zk_trigger *t = &res->triggers[res->trigger_count++];
	t->type = type;
	t->acl = acl;
	t->path_offset = (uint32_t)offset;
	t->path_size = (uint32_t)len;
	return KEEL_OK;
}

/* ---- ephemeral rings ---- */

void zk_mut_eph_link(struct zk_state *st, struct zk_session *s, uint32_t id)
{
	struct zk_node *n = zk_tree_node(&st->tree, id);
	if (s->eph_head == ZK_NODE_NONE) {
		n->u.eph.next = id;
		n->u.eph.prev = id;
		s->eph_head = id;
	} else {
		struct zk_node *head = zk_tree_node(&st->tree, s->eph_head);
		uint32_t last = head->u.eph.prev;
		n->u.eph.prev = last;
		n->u.eph.next = s->eph_head;
		zk_tree_node(&st->tree, last)->u.eph.next = id;
		head->u.eph.prev = id;
	}
	s->eph_count++;
}

static void eph_unlink(struct zk_state *st, struct zk_session *s, uint32_t id)
{
	struct zk_node *n = zk_tree_node(&st->tree, id);
	KEEL_ASSERT(s->eph_count > 0);
	if (n->u.eph.next == id) {
		KEEL_ASSERT(s->eph_head == id);
		s->eph_head = ZK_NODE_NONE;
	} else {
		zk_tree_node(&st->tree, n->u.eph.prev)->u.eph.next = n->u.eph.next;
		zk_tree_node(&st->tree, n->u.eph.next)->u.eph.prev = n->u.eph.prev;
		if (s->eph_head == id) {
			s->eph_head = n->u.eph.next;
		}
	}
	n->u.eph.next = ZK_NODE_NONE;
	n->u.eph.prev = ZK_NODE_NONE;
	s->eph_count--;
}

/* Links a node into its session ring or the special set, per its owner. */
static enum keel_err kind_link(struct zk_state *st, uint32_t id)
{
	struct zk_node *n = zk_tree_node(&st->tree, id);
	switch (zk_owner_kind(n->ephemeral_owner)) {
	case ZK_KIND_EPHEMERAL: {
		struct zk_session *s = zk_mut_session_find(st, n->ephemeral_owner);
#ifdef KEEL_PLANT_BUG_EXPIRE_NO_EPHEMERAL_DELETE
		if (s == NULL) {
			return KEEL_OK; /* left behind by an expiry (zk_apply.c) */
		}
#endif
		KEEL_ASSERT(s != NULL);
		zk_mut_eph_link(st, s, id);
		return KEEL_OK;
	}
	case ZK_KIND_CONTAINER:
	case ZK_KIND_TTL:
		return zk_mut_special_add(st, id);
	case ZK_KIND_PERSISTENT:
		return KEEL_OK;
	}
	KEEL_UNREACHABLE();
}

static void kind_unlink(struct zk_state *st, uint32_t id)
{
	struct zk_node *n = zk_tree_node(&st->tree, id);
	switch (zk_owner_kind(n->ephemeral_owner)) {
	case ZK_KIND_EPHEMERAL: {
		struct zk_session *s = zk_mut_session_find(st, n->ephemeral_owner);
#ifdef KEEL_PLANT_BUG_EXPIRE_NO_EPHEMERAL_DELETE
		if (s == NULL) {
			break; /* left behind by an expiry (zk_apply.c) */
		}
#endif
		KEEL_ASSERT(s != NULL);
		eph_unlink(st, s, id);
		break;
	}
	case ZK_KIND_CONTAINER:
	case ZK_KIND_TTL:
		special_remove(st, id);
		break;
	case ZK_KIND_PERSISTENT:
		break;
	}
}

/* ---- undo log ---- */

static enum keel_err undo_reserve(struct zk_state *st, uint32_t n)
{
	if (st->undo_capacity - st->undo_count >= n) {
		return KEEL_OK;
	}
	uint32_t cap = st->undo_capacity == 0 ? 16 : st->undo_capacity;
	while (cap - st->undo_count < n) {
		cap *= 2;
	}
	struct zk_undo *u = realloc(st->undo, cap * sizeof(*u));
	if (u == NULL) {
		return KEEL_NOMEM;
	}
	st->undo = u;
	st->undo_capacity = cap;
	return KEEL_OK;
}

static struct zk_undo *undo_push(struct zk_state *st, enum zk_undo_kind kind, uint32_t id)
{
	KEEL_ASSERT(st->undo_count < st->undo_capacity);
	struct zk_undo *u = &st->undo[st->undo_count++];
	memset(u, 0, sizeof(*u));
	u->kind = kind;
	u->id = id;
	return u;
}

void zk_mut_begin(struct zk_state *st, struct zk_result *res)
{
	st->undo_count = 0;
	st->digest_mark = st->digest_nodes;
	st->digest_sessions_mark = st->digest_sessions;
	st->trigger_mark = res->trigger_count;
}

void zk_mut_commit(struct zk_state *st)
{
	for (uint32_t i = 0; i < st->undo_count; i++) {
		struct zk_undo *u = &st->undo[i];
		switch (u->kind) {
		case ZK_UNDO_DELETED: {
			struct zk_node *n = zk_tree_node(&st->tree, u->id);
			zk_acl_table_unref(&st->acls, n->acl);
			zk_tree_release(&st->tree, u->id);
			break;
		}
		case ZK_UNDO_REPLACED:
			zk_tree_free(&st->tree, u->ptr);
			break;
		case ZK_UNDO_ACL:
			zk_acl_table_unref(&st->acls, u->aux);
			break;
		case ZK_UNDO_SESSION_REMOVED:
			free(u->ptr);
			break;
		case ZK_UNDO_CREATED:
		case ZK_UNDO_PARENT:
		case ZK_UNDO_SESSION_ADDED:
			break;
		}
	}
	st->undo_count = 0;
}

static void rollback_one(struct zk_state *st, struct zk_undo *u)
{
	struct zk_tree *t = &st->tree;
	switch (u->kind) {
	case ZK_UNDO_CREATED: {
		struct zk_node *n = zk_tree_node(t, u->id);
		uint32_t acl = n->acl;
		kind_unlink(st, u->id);
		(void)zk_tree_detach(t, u->id);
		zk_tree_release(t, u->id);
		zk_acl_table_unref(&st->acls, acl);
		break;
	}
	case ZK_UNDO_DELETED:
		zk_tree_reattach(t, u->id, u->aux);
		/* Cannot fail: the set/ring had this member before. */
		(void)kind_link(st, u->id);
		break;
	case ZK_UNDO_PARENT: {
		struct zk_node *p = zk_tree_node(t, u->id);
		p->cversion = u->old_version;
		p->pzxid = u->old_zxid;
		break;
	}
	case ZK_UNDO_REPLACED: {
		struct zk_node *cur = zk_tree_node(t, u->id);
		struct zk_node *old = u->ptr;
		/* Keep today's links: earlier rollback steps restored the
		 * structure, but the name index chain order may differ. */
		old->parent = cur->parent;
		old->next = cur->next;
		old->prev = cur->prev;
		old->hash_next = cur->hash_next;
		old->u = cur->u;
		old->hash = cur->hash;
		(void)zk_tree_replace(t, u->id, old);
		zk_tree_free(t, cur);
		break;
	}
	case ZK_UNDO_ACL: {
		struct zk_node *n = zk_tree_node(t, u->id);
		zk_acl_table_unref(&st->acls, n->acl);
		n->acl = u->aux;
		n->aversion = u->old_version;
		break;
	}
	case ZK_UNDO_SESSION_ADDED: {
		struct zk_session *s = u->ptr;
		bool removed = keel_hmap_remove_item(&st->sessions, keel_hash_u64((uint64_t)s->id), s);
		KEEL_ASSERT(removed);
		free(s);
		break;
	}
	case ZK_UNDO_SESSION_REMOVED: {
		struct zk_session *s = u->ptr;
		/* Room is there: the map only shrank since. */
		enum keel_err err = keel_hmap_insert(&st->sessions, keel_hash_u64((uint64_t)s->id), s);
		KEEL_ASSERT(err == KEEL_OK);
		break;
	}
	}
}

void zk_mut_rollback(struct zk_state *st, struct zk_result *res)
{
	while (st->undo_count > 0) {
		rollback_one(st, &st->undo[--st->undo_count]);
	}
	st->digest_nodes = st->digest_mark;
	st->digest_sessions = st->digest_sessions_mark;
	KEEL_ASSERT(res->trigger_count >= st->trigger_mark);
	if (res->trigger_count > st->trigger_mark) {
		res->paths.size = res->triggers[st->trigger_mark].path_offset;
		res->trigger_count = st->trigger_mark;
	}
}

/* ---- primitives ---- */

/* Parent bookkeeping of a create or delete; `create` bumps cversion. */
static void touch_parent(struct zk_state *st, uint32_t parent_id, struct zk_bytes parent_path,
			 bool create, int64_t zxid)
{
	struct zk_node *p = zk_tree_node(&st->tree, parent_id);
	struct zk_undo *u = undo_push(st, ZK_UNDO_PARENT, parent_id);
	u->old_version = p->cversion;
	u->old_zxid = p->pzxid;
	uint64_t ps = path_seed(parent_path);
	st->digest_nodes -= part_children(ps, p);
	if (create) {
		p->cversion = (int32_t)((uint32_t)p->cversion + 1);
		p->pzxid = zxid;
	} else if (zxid > p->pzxid) {
		p->pzxid = zxid;
	}
	st->digest_nodes += part_children(ps, p);
}

enum keel_err zk_mut_create(struct zk_state *st, struct zk_result *res, uint32_t parent_id,
			    struct zk_bytes path, struct zk_bytes data, uint32_t acl,
			    int64_t owner, int64_t zxid, int64_t time_ms, uint32_t *id)
{
	struct zk_tree *t = &st->tree;
	size_t len = zk_bytes_len(path);
	size_t slash = len;
	while (slash > 0 && path.data[slash - 1] != '/') {
		slash--;
	}
	KEEL_ASSERT(slash > 0);
	const char *name = (const char *)path.data + slash;
	size_t name_size = len - slash;
	enum keel_err err = undo_reserve(st, 2);
	if (err != KEEL_OK) {
		goto release_acl;
	}
	if (t->count >= t->max_nodes) {
		err = KEEL_LIMIT;
		goto release_acl;
	}
	struct zk_node *n = zk_tree_alloc(t, name, name_size, data.data, zk_bytes_len(data),
					  zk_bytes_is_null(data));
	if (n == NULL) {
		err = KEEL_NOMEM;
		goto release_acl;
	}
	n->czxid = n->mzxid = n->pzxid = zxid;
	n->ctime = n->mtime = time_ms;
	n->ephemeral_owner = owner;
	n->acl = acl;
	uint32_t nid = zk_tree_add(t, parent_id, n);
	if (nid == ZK_NODE_NONE) {
		zk_tree_free(t, n);
		err = KEEL_NOMEM;
		goto release_acl;
	}
	err = kind_link(st, nid);
	if (err != KEEL_OK) {
		(void)zk_tree_detach(t, nid);
		zk_tree_release(t, nid);
		goto release_acl;
	}
	undo_push(st, ZK_UNDO_CREATED, nid);
	st->digest_nodes += zk_mut_node_digest(st, path, n);
	struct zk_bytes parent_path = zk_mut_parent_path(path);
	touch_parent(st, parent_id, parent_path, true, zxid);
	*id = nid;
	err = zk_mut_trigger(res, ZK_EVENT_NODE_CREATED, acl, path);
	if (err == KEEL_OK) {
		err = zk_mut_trigger(res, ZK_EVENT_NODE_CHILDREN_CHANGED,
				     zk_tree_node(t, parent_id)->acl, parent_path);
	}
	return err; /* the node owns the acl reference now */

release_acl:
	zk_acl_table_unref(&st->acls, acl);
	return err;
}

enum keel_err zk_mut_delete(struct zk_state *st, struct zk_result *res, uint32_t id,
			    struct zk_bytes path, int64_t zxid)
{
	struct zk_tree *t = &st->tree;
	enum keel_err err = undo_reserve(st, 2);
	if (err != KEEL_OK) {
		return err;
	}
	struct zk_node *n = zk_tree_node(t, id);
	uint32_t parent_id = n->parent;
	st->digest_nodes -= zk_mut_node_digest(st, path, n);
	kind_unlink(st, id);
	uint32_t after = zk_tree_detach(t, id);
	struct zk_undo *u = undo_push(st, ZK_UNDO_DELETED, id);
	u->aux = after;
	struct zk_bytes parent_path = zk_mut_parent_path(path);
	touch_parent(st, parent_id, parent_path, false, zxid);
	err = zk_mut_trigger(res, ZK_EVENT_NODE_DELETED, n->acl, path);
	if (err == KEEL_OK) {
		err = zk_mut_trigger(res, ZK_EVENT_NODE_CHILDREN_CHANGED,
				     zk_tree_node(t, parent_id)->acl, parent_path);
	}
	return err;
}

enum keel_err zk_mut_set_data(struct zk_state *st, struct zk_result *res, uint32_t id,
			      struct zk_bytes path, struct zk_bytes data, int32_t new_version,
			      int64_t zxid, int64_t time_ms)
{
	struct zk_tree *t = &st->tree;
	enum keel_err err = undo_reserve(st, 1);
	if (err != KEEL_OK) {
		return err;
	}
	struct zk_node *old = zk_tree_node(t, id);
	struct zk_node *n = zk_tree_copy_with_data(t, old, data.data, zk_bytes_len(data),
						   zk_bytes_is_null(data));
	if (n == NULL) {
		return KEEL_NOMEM;
	}
	n->version = new_version;
	n->mzxid = zxid;
	n->mtime = time_ms;
	uint64_t ps = path_seed(path);
	st->digest_nodes -= part_data(ps, old);
	st->digest_nodes += part_data(ps, n);
	(void)zk_tree_replace(t, id, n);
	struct zk_undo *u = undo_push(st, ZK_UNDO_REPLACED, id);
	u->ptr = old;
	return zk_mut_trigger(res, ZK_EVENT_NODE_DATA_CHANGED, n->acl, path);
}

enum keel_err zk_mut_set_acl(struct zk_state *st, uint32_t id, struct zk_bytes path,
			     uint32_t acl, int32_t new_aversion)
{
	enum keel_err err = undo_reserve(st, 1);
	if (err != KEEL_OK) {
		zk_acl_table_unref(&st->acls, acl);
		return err;
	}
	struct zk_node *n = zk_tree_node(&st->tree, id);
	uint64_t ps = path_seed(path);
	st->digest_nodes -= part_acl(st, ps, n);
	struct zk_undo *u = undo_push(st, ZK_UNDO_ACL, id);
	u->aux = n->acl;
	u->old_version = n->aversion;
	n->acl = acl;
	n->aversion = new_aversion;
	st->digest_nodes += part_acl(st, ps, n);
	return KEEL_OK;
}

enum keel_err zk_mut_session_add(struct zk_state *st, int64_t id, int32_t timeout_ms,
				 const uint8_t passwd[ZK_PASSWD_SIZE])
{
	if (zk_mut_session_find(st, id) != NULL) {
		return KEEL_EXIST;
	}
	if (st->config.max_sessions != 0 &&
	    keel_hmap_count(&st->sessions) >= st->config.max_sessions) {
		return KEEL_LIMIT;
	}
	enum keel_err err = undo_reserve(st, 1);
	if (err != KEEL_OK) {
		return err;
	}
	struct zk_session *s = malloc(sizeof(*s));
	if (s == NULL) {
		return KEEL_NOMEM;
	}
	s->id = id;
	s->timeout_ms = timeout_ms;
	memcpy(s->passwd, passwd, ZK_PASSWD_SIZE);
	s->eph_head = ZK_NODE_NONE;
	s->eph_count = 0;
	err = keel_hmap_insert(&st->sessions, keel_hash_u64((uint64_t)id), s);
	if (err != KEEL_OK) {
		free(s);
		return err;
	}
	struct zk_undo *u = undo_push(st, ZK_UNDO_SESSION_ADDED, ZK_NODE_NONE);
	u->ptr = s;
	st->digest_sessions += zk_mut_session_digest(s);
	return KEEL_OK;
}

enum keel_err zk_mut_session_remove(struct zk_state *st, struct zk_session *s)
{
	KEEL_ASSERT(s->eph_count == 0);
	KEEL_ASSERT(s->eph_head == ZK_NODE_NONE);
	enum keel_err err = undo_reserve(st, 1);
	if (err != KEEL_OK) {
		return err;
	}
	bool removed = keel_hmap_remove_item(&st->sessions, keel_hash_u64((uint64_t)s->id), s);
	KEEL_ASSERT(removed);
	st->digest_sessions -= zk_mut_session_digest(s);
	struct zk_undo *u = undo_push(st, ZK_UNDO_SESSION_REMOVED, ZK_NODE_NONE);
	u->ptr = s;
	return KEEL_OK;
}
