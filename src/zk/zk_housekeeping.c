/* zk_housekeeping.c — container and TTL expiry scan (see zk_housekeeping.h). */
#include "zk/zk_housekeeping.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "zk/zk_path.h"
#include "zk/zk_tree.h"

bool zk_housekeeping_due(const struct zk_state *st, uint32_t id, int64_t now_ms,
			 enum zk_txn_kind *kind)
{
	const struct zk_node *n = zk_tree_node(&st->tree, id);
	if (zk_tree_first_child(&st->tree, id) != ZK_NODE_NONE) {
		return false;
	}
	switch (zk_owner_kind(n->ephemeral_owner)) {
	case ZK_KIND_CONTAINER: {
		*kind = ZK_TXN_DELETE_CONTAINER;
		if (n->cversion > 0) {
			return true;
		}
		int64_t never_used = st->config.container_max_never_used_ms;
		return never_used != 0 && now_ms - n->mtime > never_used;
	}
	case ZK_KIND_TTL: {
		*kind = ZK_TXN_DELETE_TTL;
		int64_t ttl = zk_owner_ttl_ms(n->ephemeral_owner);
		return ttl != 0 && now_ms - n->mtime > ttl;
	}
	default:
		return false;
	}
}

struct candidate {
	struct zk_path_span path; /* first, for zk_path_spans_sort */
	enum zk_txn_kind kind;
};

size_t zk_housekeeping_scan(const struct zk_state *st, int64_t now_ms, size_t max,
			    zk_reap_fn emit, void *ctx)
{
	size_t count = keel_hmap_count(&st->special);
	if (count == 0) {
		return 0;
	}
	struct candidate *c = malloc(count * sizeof(*c));
	struct keel_wbuf paths;
	keel_wbuf_init_dynamic(&paths, 256, SIZE_MAX / 2);
	if (c == NULL) {
		keel_wbuf_free(&paths);
		return 0;
	}
	size_t due = 0;
	size_t cursor = 0;
	void *item;
	while ((item = keel_hmap_next(&st->special, &cursor)) != NULL) {
		uint32_t id = (uint32_t)((uintptr_t)item - 1);
		enum zk_txn_kind kind;
		if (!zk_housekeeping_due(st, id, now_ms, &kind)) {
			continue;
		}
		size_t start = paths.size;
		zk_tree_path(&st->tree, id, &paths);
		c[due++] = (struct candidate){{(uint32_t)start, (uint32_t)(paths.size - start)}, kind};
	}
	if (!keel_wbuf_ok(&paths)) {
		free(c);
		keel_wbuf_free(&paths);
		return 0;
	}
	/* Sorted by path: the same order on every server. */
	zk_path_spans_sort(c, due, sizeof(*c), paths.data);
	for (size_t i = 0; i < due && i < max; i++) {
		emit(ctx, c[i].kind, zk_bytes_of(paths.data + c[i].path.offset, c[i].path.size));
	}
	free(c);
	keel_wbuf_free(&paths);
	return due;
}
