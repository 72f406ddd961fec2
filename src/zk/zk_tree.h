/*
 * zk_tree.h — the znode store: compact nodes, a name index, child rings.
 *
 * Layout. A znode is ONE heap allocation: a 104-byte header (stat, links,
 * sizes) followed by its name (its last path component, stored once) and
 * its data. Nodes are addressed by 32-bit ids through a slot table, so
 * links are 4 bytes and a node can be reallocated (setData) by updating one
 * slot. There is no per-node hash table and no stored full path:
 *
 *   - children of a node form a circular doubly linked ring through
 *     next/prev, entered at dir.first_child (insertion order);
 *   - one global chained hash index maps (parent id, name) to a node;
 *     a path is resolved one component at a time;
 *   - ephemeral nodes cannot have children, so their dir fields are reused
 *     as the links of their session's ephemeral ring (eph.next/eph.prev).
 *
 * Stat. `cversion` here is ZooKeeper's persisted cversion: the number of
 * child creates. Clients see 2 * cversion - numChildren (ZooKeeper's
 * DataNode.copyStat), and sequential suffixes use the persisted value.
 *
 * Ids are not replicated facts: two servers may number the same node
 * differently (after a snapshot). Nothing client-visible depends on them.
 *
 * Memory: the tree owns every node. zk_tree_node() pointers stay valid
 * until the node is released or replaced (zk_tree_replace); ids stay valid
 * until released. Detached nodes keep their id and memory (multi rollback).
 */
#ifndef KEEL_ZK_TREE_H
#define KEEL_ZK_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

#define ZK_NODE_NONE UINT32_MAX
#define ZK_ROOT_ID 0u

enum zk_node_flags {
	ZK_NODE_DATA_NULL = 1u << 0, /* data is null (jute length -1), not empty */
};

struct zk_node {
	uint32_t parent;    /* ZK_NODE_NONE for the root */
	uint32_t next;      /* sibling ring */
	uint32_t prev;
	uint32_t hash_next; /* name index chain */
	union {
		struct {
			uint32_t first_child; /* ZK_NODE_NONE: no children */
			uint32_t child_count;
		} dir; /* every node that is not a session ephemeral */
		struct {
			uint32_t next;
			uint32_t prev;
		} eph; /* session ephemerals: ring of the session's nodes */
	} u;
	uint32_t acl;       /* ACL table id */
	uint32_t data_size;
	uint32_t name_size;
	uint32_t flags;
	int32_t version;
	int32_t cversion;   /* persisted: child creates */
	int32_t aversion;
	uint32_t hash;      /* name index hash */
	int64_t czxid;
	int64_t mzxid;
	int64_t pzxid;
	int64_t ctime;
	int64_t mtime;
	int64_t ephemeral_owner;
	char bytes[];       /* name, then data */
};

_Static_assert(sizeof(struct zk_node) == 104, "znode header is 104 bytes");

static inline const char *zk_node_name(const struct zk_node *n)
{
	return n->bytes;
}

static inline const uint8_t *zk_node_data(const struct zk_node *n)
{
	return (const uint8_t *)n->bytes + n->name_size;
}

struct zk_tree {
	struct zk_node **slots; /* by id; a free slot holds (next_free << 1 | 1) */
	uint32_t capacity;
	uint32_t free_head;     /* ZK_NODE_NONE: no free slot */
	uint32_t count;         /* live + detached nodes */
	uint32_t max_nodes;
	uint32_t *buckets;      /* name index heads */
	uint32_t bucket_mask;
	uint32_t indexed;       /* nodes in the index */
	uint64_t seed;
	size_t node_bytes;      /* estimated heap bytes of all nodes */
};

/* Creates the tree with its root (id 0, empty name, no data). */
enum keel_err zk_tree_init(struct zk_tree *t, uint64_t seed, uint32_t max_nodes);
void zk_tree_close(struct zk_tree *t);

static inline struct zk_node *zk_tree_node(const struct zk_tree *t, uint32_t id)
{
	struct zk_node *n = t->slots[id];
	return n;
}

/* Child of `parent` named `name`, or ZK_NODE_NONE. */
uint32_t zk_tree_child(const struct zk_tree *t, uint32_t parent, const char *name, size_t size);

/* Node at `path`: "" and "/" are the root; otherwise "/a/b" exactly
 * (ZooKeeper's map lookup: no normalisation). ZK_NODE_NONE if absent. */
uint32_t zk_tree_lookup(const struct zk_tree *t, const char *path, size_t size);

/* A free-standing node (not in the tree) with the given name and data.
 * Stat fields are zero, links NONE. NULL when out of memory. */
struct zk_node *zk_tree_alloc(struct zk_tree *t, const char *name, size_t name_size,
			      const void *data, size_t data_size, bool data_null);

/* A free-standing copy of `old` (links, stat, ACL, name) with new data,
 * for zk_tree_replace(). NULL when out of memory. */
struct zk_node *zk_tree_copy_with_data(struct zk_tree *t, const struct zk_node *old,
				       const void *data, size_t data_size, bool data_null);

/* Frees a node that was never added (or was released from its slot). */
void zk_tree_free(struct zk_tree *t, struct zk_node *n);

/* Gives `n` an id, links it as the last child of `parent` and indexes it.
 * Returns the id, or ZK_NODE_NONE (KEEL_NOMEM / KEEL_LIMIT) leaving
 * everything unchanged (n is not freed). The caller must know that no
 * sibling has the same name. */
uint32_t zk_tree_add(struct zk_tree *t, uint32_t parent, struct zk_node *n);

/* Unlinks a node (no children allowed) from its parent and the index; it
 * keeps its id and memory. Returns the sibling it followed (ZK_NODE_NONE if
 * it was the first child) for zk_tree_reattach(). */
uint32_t zk_tree_detach(struct zk_tree *t, uint32_t id);

/* Puts a detached node back where it was: after `after`, or first. Never
 * allocates. */
void zk_tree_reattach(struct zk_tree *t, uint32_t id, uint32_t after);

/* Frees a detached node and its id. */
void zk_tree_release(struct zk_tree *t, uint32_t id);

/* Puts `n` in the slot of `id` (a copy of the old node with new data) and
 * returns the old node, which the caller frees or puts back. */
struct zk_node *zk_tree_replace(struct zk_tree *t, uint32_t id, struct zk_node *n);

/* Appends the full path of `id` to `w` ("/" for the root). */
void zk_tree_path(const struct zk_tree *t, uint32_t id, struct keel_wbuf *w);

/* Children iteration in ring order:
 *	for (uint32_t c = zk_tree_first_child(t, id); c != ZK_NODE_NONE;
 *	     c = zk_tree_next_child(t, id, c)) */
uint32_t zk_tree_first_child(const struct zk_tree *t, uint32_t id);
uint32_t zk_tree_next_child(const struct zk_tree *t, uint32_t parent, uint32_t child);

/* Pre-order walk of the subtree at `start` (start included), children in
 * ring order. `visit` gets each node with its full path ("/" for the root)
 * and its depth below `start`; returning false stops the walk. `path` is
 * scratch owned by the caller (grown as needed). Returns false if `path`
 * failed (out of memory or over its limit) or a visit stopped the walk.
 * The tree must not change during the walk. */
typedef bool (*zk_tree_visit_fn)(void *ctx, uint32_t id, const uint8_t *path, size_t path_size,
				 uint32_t depth);
bool zk_tree_walk(const struct zk_tree *t, uint32_t start, struct keel_wbuf *path,
		  zk_tree_visit_fn visit, void *ctx);

/* Estimated heap bytes of one node allocation (glibc chunk rounding). */
size_t zk_tree_alloc_size(size_t request);

/* Bytes of the slot table and the index. */
size_t zk_tree_overhead_bytes(const struct zk_tree *t);

#endif
