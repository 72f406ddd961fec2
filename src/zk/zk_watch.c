/* zk_watch.c — the server-local watch manager (see zk_watch.h). */
#include "zk/zk_watch.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"

#define NONE UINT32_MAX
#define CHUNK_SHIFT 14u
#define CHUNK_SIZE (1u << CHUNK_SHIFT)

/* Mode bits of one (connection, path) entry. */
enum {
	DATA_STD = 1u << 0,
	DATA_PERSISTENT = 1u << 1,
	DATA_RECURSIVE = 1u << 2,
	CHILD_STD = 1u << 3,
	CHILD_PERSISTENT = 1u << 4,
	DATA_ANY = DATA_STD | DATA_PERSISTENT | DATA_RECURSIVE,
	CHILD_ANY = CHILD_STD | CHILD_PERSISTENT,
};

struct zk_wpath {
	uint32_t hash;
	uint32_t head;  /* first entry */
	uint32_t count; /* entries */
	uint32_t size;
	char bytes[];
};

struct zk_went {
	uint32_t path;
	uint32_t conn;
	uint32_t path_next;
	uint32_t path_prev;
	uint32_t conn_next;
	uint32_t conn_prev;
	uint8_t flags;
};

_Static_assert(sizeof(struct zk_went) == 28, "a watch entry is 28 bytes");

static struct zk_went *entry(const struct zk_watches *wm, uint32_t i)
{
	return &wm->chunks[i >> CHUNK_SHIFT][i & (CHUNK_SIZE - 1)];
}

static uint32_t path_hash(const struct zk_watches *wm, const uint8_t *p, size_t n)
{
	return (uint32_t)keel_hash_bytes(p, n, wm->seed);
}

/* ---- lifecycle ---- */

enum keel_err zk_watches_init(struct zk_watches *wm, uint32_t max_per_conn, uint64_t seed,
			      zk_watch_fire_fn fire, void *ctx)
{
	memset(wm, 0, sizeof(*wm));
	wm->free_entry = NONE;
	wm->max_per_conn = max_per_conn;
	wm->seed = seed;
	wm->fire = fire;
	wm->ctx = ctx;
	wm->index = calloc(64, sizeof(*wm->index));
	if (wm->index == NULL) {
		return KEEL_NOMEM;
	}
	wm->index_mask = 63;
	keel_wbuf_init_dynamic(&wm->scratch, 256, SIZE_MAX / 2);
	return KEEL_OK;
}

void zk_watches_set_max_bytes(struct zk_watches *wm, uint64_t max_bytes_per_conn)
{
	wm->max_bytes_per_conn = max_bytes_per_conn;
}

void zk_watches_close(struct zk_watches *wm)
{
	for (uint32_t i = 0; i < wm->path_capacity; i++) {
		free(wm->paths[i]);
	}
	free(wm->paths);
	free(wm->free_paths);
	free(wm->index);
	for (uint32_t i = 0; i < wm->chunk_count; i++) {
		free(wm->chunks[i]);
	}
	free(wm->chunks);
	for (uint32_t i = 0; i < wm->conn_capacity; i++) {
		if (wm->conns[i] != NULL) {
			wm->conns[i]->slot = NONE;
		}
	}
	free(wm->conns);
	free(wm->free_conns);
	keel_wbuf_free(&wm->scratch);
	memset(wm, 0, sizeof(*wm));
}

/* ---- connections ---- */

enum keel_err zk_watches_attach(struct zk_watches *wm, struct zk_watch_conn *conn,
				uint64_t conn_id, const struct zk_ids *ids)
{
	if (wm->free_conn_count == 0) {
		uint32_t cap = wm->conn_capacity == 0 ? 16 : wm->conn_capacity * 2;
		struct zk_watch_conn **conns = realloc(wm->conns, cap * sizeof(*conns));
		if (conns == NULL) {
			return KEEL_NOMEM;
		}
		wm->conns = conns;
		uint32_t *free_conns = realloc(wm->free_conns, cap * sizeof(*free_conns));
		if (free_conns == NULL) {
			return KEEL_NOMEM;
		}
		wm->free_conns = free_conns;
		for (uint32_t i = cap; i-- > wm->conn_capacity;) {
			wm->conns[i] = NULL;
			wm->free_conns[wm->free_conn_count++] = i;
		}
		wm->conn_capacity = cap;
	}
	conn->conn_id = conn_id;
	conn->ids = ids;
	conn->slot = wm->free_conns[--wm->free_conn_count];
	conn->head = NONE;
	conn->count = 0;
	conn->stamp = 0;
	conn->path_bytes = 0;
	wm->conns[conn->slot] = conn;
	return KEEL_OK;
}

/* ---- paths ---- */

static uint32_t find_path(const struct zk_watches *wm, const uint8_t *p, size_t n, uint32_t h)
{
	for (uint32_t i = h & wm->index_mask;; i = (i + 1) & wm->index_mask) {
		uint32_t v = wm->index[i];
		if (v == 0) {
			return NONE;
		}
		const struct zk_wpath *wp = wm->paths[v - 1];
		if (wp->hash == h && wp->size == n && memcmp(wp->bytes, p, n) == 0) {
			return v - 1;
		}
	}
}

static void index_place(uint32_t *index, uint32_t mask, uint32_t h, uint32_t value)
{
	uint32_t i = h & mask;
	while (index[i] != 0) {
		i = (i + 1) & mask;
	}
	index[i] = value;
}

static bool grow_index(struct zk_watches *wm)
{
	uint32_t size = (wm->index_mask + 1) * 2;
	uint32_t *index = calloc(size, sizeof(*index));
	if (index == NULL) {
		return false;
	}
	for (uint32_t i = 0; i <= wm->index_mask; i++) {
		uint32_t v = wm->index[i];
		if (v != 0) {
			index_place(index, size - 1, wm->paths[v - 1]->hash, v);
		}
	}
	free(wm->index);
	wm->index = index;
	wm->index_mask = size - 1;
	return true;
}

static bool grow_paths(struct zk_watches *wm)
{
	uint32_t cap = wm->path_capacity == 0 ? 64 : wm->path_capacity * 2;
	struct zk_wpath **paths = realloc(wm->paths, cap * sizeof(*paths));
	if (paths == NULL) {
		return false;
	}
	wm->paths = paths;
	uint32_t *free_paths = realloc(wm->free_paths, cap * sizeof(*free_paths));
	if (free_paths == NULL) {
		return false;
	}
	wm->free_paths = free_paths;
	for (uint32_t i = cap; i-- > wm->path_capacity;) {
		wm->paths[i] = NULL;
		wm->free_paths[wm->free_path_count++] = i;
	}
	wm->path_capacity = cap;
	return true;
}

static uint32_t intern_path(struct zk_watches *wm, const uint8_t *p, size_t n)
{
	uint32_t h = path_hash(wm, p, n);
	uint32_t id = find_path(wm, p, n, h);
	if (id != NONE) {
		return id;
	}
	/* Keep the index at most half full. */
	if ((wm->path_count + 1) * 2 > wm->index_mask + 1 && !grow_index(wm)) {
		return NONE;
	}
	if (wm->free_path_count == 0 && !grow_paths(wm)) {
		return NONE;
	}
	struct zk_wpath *wp = malloc(sizeof(*wp) + n);
	if (wp == NULL) {
		return NONE;
	}
	wp->hash = h;
	wp->head = NONE;
	wp->count = 0;
	wp->size = (uint32_t)n;
	if (n > 0) {
		memcpy(wp->bytes, p, n);
	}
	id = wm->free_paths[--wm->free_path_count];
	wm->paths[id] = wp;
	wm->path_count++;
	wm->path_bytes += sizeof(*wp) + n;
	index_place(wm->index, wm->index_mask, h, id + 1);
	return id;
}

/* Removes an unwatched path from the index (backward-shift deletion). */
static void drop_path(struct zk_watches *wm, uint32_t id)
{
	struct zk_wpath *wp = wm->paths[id];
	KEEL_ASSERT(wp->count == 0);
	uint32_t mask = wm->index_mask;
	uint32_t i = wp->hash & mask;
	while (wm->index[i] != id + 1) {
		KEEL_ASSERT(wm->index[i] != 0);
		i = (i + 1) & mask;
	}
	uint32_t hole = i;
	for (uint32_t j = (i + 1) & mask; wm->index[j] != 0; j = (j + 1) & mask) {
		uint32_t home = wm->paths[wm->index[j] - 1]->hash & mask;
		/* Move j into the hole unless its home lies in (hole, j]. */
		bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
		if (!stays) {
			wm->index[hole] = wm->index[j];
			hole = j;
		}
	}
	wm->index[hole] = 0;
	wm->path_bytes -= sizeof(*wp) + wp->size;
	free(wp);
	wm->paths[id] = NULL;
	wm->free_paths[wm->free_path_count++] = id;
	wm->path_count--;
}

/* ---- entries ---- */

static uint32_t alloc_entry(struct zk_watches *wm)
{
	if (wm->free_entry == NONE) {
		struct zk_went **chunks =
			realloc(wm->chunks, (wm->chunk_count + 1) * sizeof(*chunks));
		if (chunks == NULL) {
			return NONE;
		}
		wm->chunks = chunks;
		struct zk_went *c = malloc(CHUNK_SIZE * sizeof(*c));
		if (c == NULL) {
			return NONE;
		}
		uint32_t base = wm->chunk_count << CHUNK_SHIFT;
		wm->chunks[wm->chunk_count++] = c;
		for (uint32_t i = CHUNK_SIZE; i-- > 0;) {
			c[i].path_next = wm->free_entry;
			wm->free_entry = base + i;
		}
	}
	uint32_t e = wm->free_entry;
	wm->free_entry = entry(wm, e)->path_next;
	wm->entry_count++;
	return e;
}

static void link_entry(struct zk_watches *wm, uint32_t e, uint32_t path, struct zk_watch_conn *c)
{
	struct zk_went *w = entry(wm, e);
	struct zk_wpath *wp = wm->paths[path];
	w->path = path;
	w->conn = c->slot;
	w->flags = 0;
	w->path_prev = NONE;
	w->path_next = wp->head;
	if (wp->head != NONE) {
		entry(wm, wp->head)->path_prev = e;
	}
	wp->head = e;
	wp->count++;
	w->conn_prev = NONE;
	w->conn_next = c->head;
	if (c->head != NONE) {
		entry(wm, c->head)->conn_prev = e;
	}
	c->head = e;
	c->count++;
	c->path_bytes += wp->size;
}

/* Unlinks and frees an entry; drops its path when nothing watches it. */
static void free_entry(struct zk_watches *wm, uint32_t e)
{
	struct zk_went *w = entry(wm, e);
	struct zk_wpath *wp = wm->paths[w->path];
	struct zk_watch_conn *c = wm->conns[w->conn];
	if ((w->flags & DATA_RECURSIVE) != 0) {
		wm->recursive_count--;
	}
	if (w->path_prev != NONE) {
		entry(wm, w->path_prev)->path_next = w->path_next;
	} else {
		wp->head = w->path_next;
	}
	if (w->path_next != NONE) {
		entry(wm, w->path_next)->path_prev = w->path_prev;
	}
	wp->count--;
	if (w->conn_prev != NONE) {
		entry(wm, w->conn_prev)->conn_next = w->conn_next;
	} else {
		c->head = w->conn_next;
	}
	if (w->conn_next != NONE) {
		entry(wm, w->conn_next)->conn_prev = w->conn_prev;
	}
	c->count--;
	KEEL_ASSERT(c->path_bytes >= wp->size);
	c->path_bytes -= wp->size;
	uint32_t path = w->path;
	w->path_next = wm->free_entry;
	wm->free_entry = e;
	wm->entry_count--;
	if (wp->count == 0) {
		drop_path(wm, path);
	}
}

static void set_flags(struct zk_watches *wm, uint32_t e, uint8_t flags)
{
	struct zk_went *w = entry(wm, e);
	bool was = (w->flags & DATA_RECURSIVE) != 0;
	bool is = (flags & DATA_RECURSIVE) != 0;
	if (was && !is) {
		wm->recursive_count--;
	} else if (!was && is) {
		wm->recursive_count++;
	}
	w->flags = flags;
	if (flags == 0) {
		free_entry(wm, e);
	}
}

/* The entry of (conn, path), scanning the shorter of the two lists. */
static uint32_t find_entry(const struct zk_watches *wm, const struct zk_watch_conn *c,
			   uint32_t path)
{
	const struct zk_wpath *wp = wm->paths[path];
	if (wp->count <= c->count) {
		for (uint32_t e = wp->head; e != NONE; e = entry(wm, e)->path_next) {
			if (entry(wm, e)->conn == c->slot) {
				return e;
			}
		}
	} else {
		for (uint32_t e = c->head; e != NONE; e = entry(wm, e)->conn_next) {
			if (entry(wm, e)->path == path) {
				return e;
			}
		}
	}
	return NONE;
}

void zk_watches_detach(struct zk_watches *wm, struct zk_watch_conn *conn)
{
	if (conn->slot == NONE) {
		return;
	}
	while (conn->head != NONE) {
		uint32_t e = conn->head;
		set_flags(wm, e, 0);
	}
	KEEL_ASSERT(conn->count == 0);
	wm->conns[conn->slot] = NULL;
	wm->free_conns[wm->free_conn_count++] = conn->slot;
	conn->slot = NONE;
}

static uint8_t mode_flags(enum zk_watch_mode mode)
{
	switch (mode) {
	case ZK_WATCH_DATA:
		return DATA_STD;
	case ZK_WATCH_CHILD:
		return CHILD_STD;
	case ZK_WATCH_PERSISTENT:
		return DATA_PERSISTENT | CHILD_PERSISTENT;
	case ZK_WATCH_RECURSIVE:
		return DATA_RECURSIVE;
	}
	KEEL_UNREACHABLE();
}

enum keel_err zk_watches_add(struct zk_watches *wm, struct zk_watch_conn *conn,
			     struct zk_bytes path, enum zk_watch_mode mode)
{
	KEEL_ASSERT(conn->slot != NONE);
	size_t n = zk_bytes_len(path);
	uint32_t h = path_hash(wm, path.data, n);
	uint32_t pid = find_path(wm, path.data, n, h);
	uint32_t e = pid == NONE ? NONE : find_entry(wm, conn, pid);
	if (e == NONE) {
		if (wm->max_per_conn != 0 && conn->count >= wm->max_per_conn) {
			return KEEL_LIMIT;
		}
		if (wm->max_bytes_per_conn != 0 &&
		    (uint64_t)n > wm->max_bytes_per_conn - KEEL_MIN(conn->path_bytes,
								     wm->max_bytes_per_conn)) {
			return KEEL_LIMIT;
		}
		e = alloc_entry(wm);
		if (e == NONE) {
			return KEEL_NOMEM;
		}
		pid = intern_path(wm, path.data, n);
		if (pid == NONE) {
			struct zk_went *w = entry(wm, e);
			w->path_next = wm->free_entry;
			wm->free_entry = e;
			wm->entry_count--;
			return KEEL_NOMEM;
		}
		link_entry(wm, e, pid, conn);
	}
	set_flags(wm, e, (uint8_t)(entry(wm, e)->flags | mode_flags(mode)));
	return KEEL_OK;
}

/* Mode bits a WatcherType names (3.9 semantics). */
static uint8_t type_flags(int32_t watcher_type)
{
	switch (watcher_type) {
	case ZK_WATCHER_CHILDREN:
		return CHILD_STD;
	case ZK_WATCHER_DATA:
		return DATA_STD;
	case ZK_WATCHER_ANY:
		return DATA_ANY | CHILD_ANY;
	case ZK_WATCHER_PERSISTENT:
		return DATA_PERSISTENT | CHILD_PERSISTENT;
	case ZK_WATCHER_PERSISTENT_RECURSIVE:
		return DATA_RECURSIVE;
	default:
		return 0;
	}
}

static uint32_t lookup_entry(const struct zk_watches *wm, const struct zk_watch_conn *conn,
			     struct zk_bytes path)
{
	if (conn->slot == NONE) {
		return NONE;
	}
	size_t n = zk_bytes_len(path);
	uint32_t pid = find_path(wm, path.data, n, path_hash(wm, path.data, n));
	return pid == NONE ? NONE : find_entry(wm, conn, pid);
}

bool zk_watches_contains(const struct zk_watches *wm, const struct zk_watch_conn *conn,
			 struct zk_bytes path, int32_t watcher_type)
{
	uint32_t e = lookup_entry(wm, conn, path);
	return e != NONE && (entry(wm, e)->flags & type_flags(watcher_type)) != 0;
}

bool zk_watches_remove(struct zk_watches *wm, struct zk_watch_conn *conn, struct zk_bytes path,
		       int32_t watcher_type)
{
	uint32_t e = lookup_entry(wm, conn, path);
	if (e == NONE) {
		return false;
	}
	uint8_t flags = entry(wm, e)->flags;
	uint8_t gone = flags & type_flags(watcher_type);
	if (gone == 0) {
		return false;
	}
	set_flags(wm, e, (uint8_t)(flags & ~gone));
	return true;
}

/* ---- firing ---- */

struct delivery {
	struct zk_watches *wm;
	struct zk_acl_vec acl;
	struct zk_watch_event ev;
};

static void deliver(struct delivery *d, struct zk_watch_conn *c)
{
	if (c->stamp == d->wm->stamp) {
		return; /* this trigger already reached the connection */
	}
	c->stamp = d->wm->stamp;
	if (!zk_acl_check(d->acl, ZK_PERM_READ, c->ids)) {
		return;
	}
	d->wm->fire(d->wm->ctx, c, &d->ev);
}

/* Relevant and one-shot bits of an event at the exact path. */
static void exact_bits(int32_t type, uint8_t *match, uint8_t *one_shot)
{
	switch (type) {
	case ZK_EVENT_NODE_CREATED:
	case ZK_EVENT_NODE_DATA_CHANGED:
		*match = DATA_ANY;
		*one_shot = DATA_STD;
		break;
	case ZK_EVENT_NODE_DELETED:
		*match = DATA_ANY | CHILD_ANY;
		*one_shot = DATA_STD | CHILD_STD;
		break;
	case ZK_EVENT_NODE_CHILDREN_CHANGED:
		*match = CHILD_ANY;
		*one_shot = CHILD_STD;
		break;
	default:
		*match = 0;
		*one_shot = 0;
		break;
	}
}

static void fire_exact(struct delivery *d, struct zk_bytes path)
{
	struct zk_watches *wm = d->wm;
	size_t n = zk_bytes_len(path);
	uint32_t pid = find_path(wm, path.data, n, path_hash(wm, path.data, n));
	if (pid == NONE) {
		return;
	}
	uint8_t match, one_shot;
	exact_bits(d->ev.type, &match, &one_shot);
	uint32_t e = wm->paths[pid]->head;
	while (e != NONE) {
		struct zk_went *w = entry(wm, e);
		uint32_t next = w->path_next; /* e may be freed below */
		if ((w->flags & match) != 0) {
			struct zk_watch_conn *c = wm->conns[w->conn];
			set_flags(wm, e, (uint8_t)(w->flags & ~one_shot));
			deliver(d, c);
		}
		e = next;
	}
}

static void fire_ancestors(struct delivery *d, struct zk_bytes path)
{
	struct zk_watches *wm = d->wm;
	size_t n = zk_bytes_len(path);
	/* Every proper prefix ending before a '/', then "/" itself. */
	for (size_t i = n; i-- > 0;) {
		if (path.data[i] != '/') {
			continue;
		}
		size_t len = i == 0 ? 1 : i;
		if (len == n) {
			continue; /* the path is "/" itself: no ancestor */
		}
		uint32_t pid = find_path(wm, path.data, len, path_hash(wm, path.data, len));
		if (pid == NONE) {
			continue;
		}
		for (uint32_t e = wm->paths[pid]->head; e != NONE; e = entry(wm, e)->path_next) {
			struct zk_went *w = entry(wm, e);
			if ((w->flags & DATA_RECURSIVE) != 0) {
				deliver(d, wm->conns[w->conn]);
			}
		}
	}
}

void zk_watches_trigger(struct zk_watches *wm, const struct zk_state *st, int32_t type,
			struct zk_bytes path, uint32_t acl, int64_t zxid)
{
	if (wm->entry_count == 0) {
		return;
	}
	wm->stamp++;
	if (wm->stamp == 0) {
		/* Wrapped: clear every stamp so that none matches by accident. */
		for (uint32_t i = 0; i < wm->conn_capacity; i++) {
			if (wm->conns[i] != NULL) {
				wm->conns[i]->stamp = 0;
			}
		}
		wm->stamp = 1;
	}
	struct delivery d = {wm, zk_acl_table_get(&st->acls, acl), {type, path, zxid}};
	fire_exact(&d, path);
	if (wm->recursive_count > 0 && type != ZK_EVENT_NODE_CHILDREN_CHANGED) {
		fire_ancestors(&d, path);
	}
}

void zk_watches_fire(struct zk_watches *wm, const struct zk_state *st,
		     const struct zk_result *res)
{
	for (uint32_t i = 0; i < res->trigger_count; i++) {
		const struct zk_trigger *t = &res->triggers[i];
		if (t->type == ZK_EVENT_KEEL_ACL_CHANGED) {
			continue; /* the change feed's, not a watch event */
		}
		zk_watches_trigger(wm, st, t->type, zk_trigger_path(res, t), t->acl, res->zxid);
	}
}

void zk_watches_notify(struct zk_watches *wm, struct zk_watch_conn *conn, int32_t type,
		       struct zk_bytes path)
{
	struct zk_watch_event ev = {type, path, -1};
	wm->fire(wm->ctx, conn, &ev);
}

size_t zk_watches_count(const struct zk_watches *wm)
{
	return wm->entry_count;
}

size_t zk_watches_memory(const struct zk_watches *wm)
{
	return (size_t)wm->chunk_count * CHUNK_SIZE * sizeof(struct zk_went) + wm->path_bytes +
	       ((size_t)wm->index_mask + 1) * sizeof(uint32_t) +
	       (size_t)wm->path_capacity * (sizeof(void *) + sizeof(uint32_t)) +
	       (size_t)wm->conn_capacity * (sizeof(void *) + sizeof(uint32_t));
}
