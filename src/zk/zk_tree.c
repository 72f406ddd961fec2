/* zk_tree.c — the znode store (see zk_tree.h). */
#include "zk/zk_tree.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"
#include "zk/zk_codes.h"

static bool is_session_ephemeral(const struct zk_node *n)
{
	return zk_owner_kind(n->ephemeral_owner) == ZK_KIND_EPHEMERAL;
}

static bool slot_free(const struct zk_node *slot)
{
	return ((uintptr_t)slot & 1u) != 0;
}

static struct zk_node *free_link(uint32_t next)
{
	return (struct zk_node *)(((uintptr_t)next << 1) | 1u);
}

static uint32_t free_next(const struct zk_node *slot)
{
	return (uint32_t)((uintptr_t)slot >> 1);
}

size_t zk_tree_alloc_size(size_t request)
{
	/* glibc: 8 bytes of chunk header, 16-byte granularity, 32 minimum. */
	size_t chunk = (request + 8 + 15) & ~(size_t)15;
	return chunk < 32 ? 32 : chunk;
}

static uint32_t name_hash(const struct zk_tree *t, uint32_t parent, const char *name,
			  size_t size)
{
	return (uint32_t)keel_hash_bytes(name, size, t->seed ^ keel_hash_u64(parent));
}

static bool grow_slots(struct zk_tree *t)
{
	if (t->capacity >= t->max_nodes) {
		return false;
	}
	uint64_t want = t->capacity == 0 ? 64 : (uint64_t)t->capacity * 2;
	uint32_t cap = want > t->max_nodes ? t->max_nodes : (uint32_t)want;
	struct zk_node **slots = realloc(t->slots, cap * sizeof(*slots));
	if (slots == NULL) {
		return false;
	}
	t->slots = slots;
	/* Thread the new slots onto the free list, lowest id first. */
	for (uint32_t i = cap; i-- > t->capacity;) {
		t->slots[i] = free_link(t->free_head);
		t->free_head = i;
	}
	t->capacity = cap;
	return true;
}

static bool grow_index(struct zk_tree *t)
{
	uint32_t old = t->bucket_mask + 1;
	uint32_t size = old * 2;
	if (size == 0) {
		return false;
	}
	uint32_t *buckets = malloc(size * sizeof(*buckets));
	if (buckets == NULL) {
		return false;
	}
	for (uint32_t i = 0; i < size; i++) {
		buckets[i] = ZK_NODE_NONE;
	}
	uint32_t mask = size - 1;
	for (uint32_t b = 0; b < old; b++) {
		uint32_t id = t->buckets[b];
		while (id != ZK_NODE_NONE) {
			struct zk_node *n = t->slots[id];
			uint32_t next = n->hash_next;
			n->hash_next = buckets[n->hash & mask];
			buckets[n->hash & mask] = id;
			id = next;
		}
	}
	free(t->buckets);
	t->buckets = buckets;
	t->bucket_mask = mask;
	return true;
}

static void index_insert(struct zk_tree *t, uint32_t id)
{
	struct zk_node *n = t->slots[id];
	uint32_t b = n->hash & t->bucket_mask;
	n->hash_next = t->buckets[b];
	t->buckets[b] = id;
	t->indexed++;
}

static void index_remove(struct zk_tree *t, uint32_t id)
{
	struct zk_node *n = t->slots[id];
	uint32_t *link = &t->buckets[n->hash & t->bucket_mask];
	while (*link != id) {
		KEEL_ASSERT(*link != ZK_NODE_NONE);
		link = &t->slots[*link]->hash_next;
	}
	*link = n->hash_next;
	n->hash_next = ZK_NODE_NONE;
	t->indexed--;
}

enum keel_err zk_tree_init(struct zk_tree *t, uint64_t seed, uint32_t max_nodes)
{
	memset(t, 0, sizeof(*t));
	t->free_head = ZK_NODE_NONE;
	t->seed = seed;
	t->max_nodes = max_nodes == 0 || max_nodes > ZK_NODE_NONE - 1 ? ZK_NODE_NONE - 1 : max_nodes;
	t->buckets = malloc(64 * sizeof(*t->buckets));
	if (t->buckets == NULL) {
		return KEEL_NOMEM;
	}
	for (uint32_t i = 0; i < 64; i++) {
		t->buckets[i] = ZK_NODE_NONE;
	}
	t->bucket_mask = 63;
	if (!grow_slots(t)) {
		zk_tree_close(t);
		return KEEL_NOMEM;
	}
	struct zk_node *root = zk_tree_alloc(t, "", 0, NULL, 0, false);
	if (root == NULL) {
		zk_tree_close(t);
		return KEEL_NOMEM;
	}
	uint32_t id = t->free_head;
	KEEL_ASSERT(id == ZK_ROOT_ID);
	t->free_head = free_next(t->slots[id]);
	t->slots[id] = root;
	t->count = 1;
	return KEEL_OK;
}

void zk_tree_close(struct zk_tree *t)
{
	for (uint32_t i = 0; i < t->capacity; i++) {
		if (!slot_free(t->slots[i])) {
			free(t->slots[i]);
		}
	}
	free(t->slots);
	free(t->buckets);
	memset(t, 0, sizeof(*t));
}

struct zk_node *zk_tree_alloc(struct zk_tree *t, const char *name, size_t name_size,
			      const void *data, size_t data_size, bool data_null)
{
	if (name_size > UINT32_MAX / 2 || data_size > UINT32_MAX / 2) {
		return NULL;
	}
	size_t request = sizeof(struct zk_node) + name_size + data_size;
	struct zk_node *n = malloc(request);
	if (n == NULL) {
		return NULL;
	}
	memset(n, 0, sizeof(*n));
	n->parent = ZK_NODE_NONE;
	n->next = ZK_NODE_NONE;
	n->prev = ZK_NODE_NONE;
	n->hash_next = ZK_NODE_NONE;
	n->u.dir.first_child = ZK_NODE_NONE;
	n->u.dir.child_count = 0;
	n->name_size = (uint32_t)name_size;
	n->data_size = (uint32_t)data_size;
	n->flags = data_null ? ZK_NODE_DATA_NULL : 0;
	if (name_size > 0) {
		memcpy(n->bytes, name, name_size);
	}
	if (data_size > 0) {
		memcpy(n->bytes + name_size, data, data_size);
	}
	t->node_bytes += zk_tree_alloc_size(request);
	return n;
}

void zk_tree_free(struct zk_tree *t, struct zk_node *n)
{
	if (n == NULL) {
		return;
	}
	size_t request = sizeof(*n) + n->name_size + n->data_size;
	KEEL_ASSERT(t->node_bytes >= zk_tree_alloc_size(request));
	t->node_bytes -= zk_tree_alloc_size(request);
	free(n);
}

struct zk_node *zk_tree_copy_with_data(struct zk_tree *t, const struct zk_node *old,
				       const void *data, size_t data_size, bool data_null)
{
	struct zk_node *n = zk_tree_alloc(t, old->bytes, old->name_size, data, data_size,
					  data_null);
	if (n == NULL) {
		return NULL;
	}
	/* Everything but the sizes, flags and bytes carries over. */
	uint32_t size = n->data_size;
	uint32_t flags = n->flags;
	memcpy(n, old, sizeof(*n));
	n->data_size = size;
	n->flags = flags;
	return n;
}

uint32_t zk_tree_child(const struct zk_tree *t, uint32_t parent, const char *name, size_t size)
{
	uint32_t h = name_hash(t, parent, name, size);
	uint32_t id = t->buckets[h & t->bucket_mask];
	while (id != ZK_NODE_NONE) {
		const struct zk_node *n = t->slots[id];
		if (n->hash == h && n->parent == parent && n->name_size == size &&
		    memcmp(n->bytes, name, size) == 0) {
			return id;
		}
		id = n->hash_next;
	}
	return ZK_NODE_NONE;
}

uint32_t zk_tree_lookup(const struct zk_tree *t, const char *path, size_t size)
{
	if (size == 0 || (size == 1 && path[0] == '/')) {
		return ZK_ROOT_ID;
	}
	if (path[0] != '/') {
		return ZK_NODE_NONE;
	}
	uint32_t id = ZK_ROOT_ID;
	size_t i = 1;
	for (;;) {
		size_t start = i;
		while (i < size && path[i] != '/') {
			i++;
		}
		if (i == start) {
			return ZK_NODE_NONE; /* empty component: "//", trailing '/' */
		}
		id = zk_tree_child(t, id, path + start, i - start);
		if (id == ZK_NODE_NONE || i == size) {
			return id;
		}
		i++; /* skip '/' */
	}
}

uint32_t zk_tree_add(struct zk_tree *t, uint32_t parent, struct zk_node *n)
{
	struct zk_node *p = t->slots[parent];
	KEEL_ASSERT(!is_session_ephemeral(p));
	if (t->free_head == ZK_NODE_NONE && !grow_slots(t)) {
		return ZK_NODE_NONE;
	}
	if (t->indexed + 1 > t->bucket_mask + 1 && !grow_index(t)) {
		/* A full index only slows lookups down; keep going. */
	}
	uint32_t id = t->free_head;
	t->free_head = free_next(t->slots[id]);
	t->slots[id] = n;
	t->count++;
	n->parent = parent;
	n->hash = name_hash(t, parent, n->bytes, n->name_size);
	if (!is_session_ephemeral(n)) {
		n->u.dir.first_child = ZK_NODE_NONE;
		n->u.dir.child_count = 0;
	}
	uint32_t first = p->u.dir.first_child;
	zk_tree_reattach(t, id, first == ZK_NODE_NONE ? ZK_NODE_NONE : t->slots[first]->prev);
	return id;
}

uint32_t zk_tree_detach(struct zk_tree *t, uint32_t id)
{
	KEEL_ASSERT(id != ZK_ROOT_ID);
	struct zk_node *n = t->slots[id];
	KEEL_ASSERT(is_session_ephemeral(n) || n->u.dir.child_count == 0);
	struct zk_node *p = t->slots[n->parent];
	KEEL_ASSERT(p->u.dir.child_count > 0);
	uint32_t after;
	if (p->u.dir.first_child == id) {
		after = ZK_NODE_NONE;
		p->u.dir.first_child = n->next == id ? ZK_NODE_NONE : n->next;
	} else {
		after = n->prev;
	}
	if (n->next != id) {
		t->slots[n->prev]->next = n->next;
		t->slots[n->next]->prev = n->prev;
	}
	n->next = ZK_NODE_NONE;
	n->prev = ZK_NODE_NONE;
	p->u.dir.child_count--;
	index_remove(t, id);
	return after;
}

void zk_tree_reattach(struct zk_tree *t, uint32_t id, uint32_t after)
{
	struct zk_node *n = t->slots[id];
	struct zk_node *p = t->slots[n->parent];
	uint32_t first = p->u.dir.first_child;
	if (first == ZK_NODE_NONE) {
		KEEL_ASSERT(after == ZK_NODE_NONE);
		n->next = id;
		n->prev = id;
		p->u.dir.first_child = id;
	} else {
		/* Insert after `after`, or before `first` (= after its prev) and
		 * become first. */
		uint32_t left = after == ZK_NODE_NONE ? t->slots[first]->prev : after;
		struct zk_node *l = t->slots[left];
		uint32_t right = l->next;
		n->prev = left;
		n->next = right;
		l->next = id;
		t->slots[right]->prev = id;
		if (after == ZK_NODE_NONE) {
			p->u.dir.first_child = id;
		}
	}
	p->u.dir.child_count++;
	index_insert(t, id);
}

void zk_tree_release(struct zk_tree *t, uint32_t id)
{
	KEEL_ASSERT(id != ZK_ROOT_ID);
	struct zk_node *n = t->slots[id];
	KEEL_ASSERT(!slot_free(n));
	KEEL_ASSERT(n->next == ZK_NODE_NONE);
	zk_tree_free(t, n);
	t->slots[id] = free_link(t->free_head);
	t->free_head = id;
	t->count--;
}

struct zk_node *zk_tree_replace(struct zk_tree *t, uint32_t id, struct zk_node *n)
{
	struct zk_node *old = t->slots[id];
	t->slots[id] = n;
	return old;
}

void zk_tree_path(const struct zk_tree *t, uint32_t id, struct keel_wbuf *w)
{
	if (id == ZK_ROOT_ID) {
		keel_wbuf_u8(w, '/');
		return;
	}
	/* Measure, reserve, then fill from the end. */
	size_t len = 0;
	for (uint32_t c = id; c != ZK_ROOT_ID; c = t->slots[c]->parent) {
		len += 1 + t->slots[c]->name_size;
	}
	uint8_t *p = keel_wbuf_reserve(w, len);
	if (p == NULL) {
		return;
	}
	size_t end = len;
	for (uint32_t c = id; c != ZK_ROOT_ID; c = t->slots[c]->parent) {
		const struct zk_node *n = t->slots[c];
		end -= n->name_size;
		memcpy(p + end, n->bytes, n->name_size);
		p[--end] = '/';
	}
	KEEL_ASSERT(end == 0);
}

uint32_t zk_tree_first_child(const struct zk_tree *t, uint32_t id)
{
	const struct zk_node *n = t->slots[id];
	return is_session_ephemeral(n) ? ZK_NODE_NONE : n->u.dir.first_child;
}

uint32_t zk_tree_next_child(const struct zk_tree *t, uint32_t parent, uint32_t child)
{
	uint32_t next = t->slots[child]->next;
	return next == t->slots[parent]->u.dir.first_child ? ZK_NODE_NONE : next;
}

size_t zk_tree_overhead_bytes(const struct zk_tree *t)
{
	return (size_t)t->capacity * sizeof(*t->slots) +
	       ((size_t)t->bucket_mask + 1) * sizeof(*t->buckets);
}

static bool visit_current(const struct zk_tree *t, uint32_t id, struct keel_wbuf *path,
			  zk_tree_visit_fn visit, void *ctx, uint32_t depth)
{
	(void)t;
	if (!keel_wbuf_ok(path)) {
		return false;
	}
	if (path->size == 0) {
		return visit(ctx, id, (const uint8_t *)"/", 1, depth);
	}
	return visit(ctx, id, path->data, path->size, depth);
}

static void push_name(const struct zk_tree *t, uint32_t id, struct keel_wbuf *path)
{
	const struct zk_node *n = t->slots[id];
	keel_wbuf_u8(path, '/');
	keel_wbuf_bytes(path, n->bytes, n->name_size);
}

bool zk_tree_walk(const struct zk_tree *t, uint32_t start, struct keel_wbuf *path,
		  zk_tree_visit_fn visit, void *ctx)
{
	keel_wbuf_reset(path);
	if (start != ZK_ROOT_ID) {
		zk_tree_path(t, start, path);
	}
	uint32_t id = start;
	uint32_t depth = 0;
	if (!visit_current(t, id, path, visit, ctx, depth)) {
		return false;
	}
	for (;;) {
		uint32_t child = zk_tree_first_child(t, id);
		if (child != ZK_NODE_NONE) {
			id = child;
			depth++;
			push_name(t, id, path);
			if (!visit_current(t, id, path, visit, ctx, depth)) {
				return false;
			}
			continue;
		}
		/* Climb until a node has a next sibling. */
		for (;;) {
			if (id == start) {
				return true;
			}
			uint32_t parent = t->slots[id]->parent;
			path->size -= 1 + t->slots[id]->name_size;
			uint32_t next = zk_tree_next_child(t, parent, id);
			if (next != ZK_NODE_NONE) {
				id = next;
				push_name(t, id, path);
				if (!visit_current(t, id, path, visit, ctx, depth)) {
					return false;
				}
				break;
			}
			id = parent;
			depth--;
		}
	}
}
