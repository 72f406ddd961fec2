/*
 * kc_watch.c — the watches a session holds, and event delivery.
 *
 * The servers keep a connection's watches; when the client reconnects to
 * another server they would be gone, so the client remembers them (path ->
 * flags) and re-sets them with setWatches (setWatches2 when persistent
 * watches are held) relative to lastZxidSeen; the new server fires at once
 * what changed since (ZooKeeper's ClientCnxn does the same).
 *
 * A one-shot flag is noted when the server confirmed the watch (the reply
 * of getData/exists/getChildren), and cleared by the event that consumes
 * it, following the server's rules (zk/zk_watch.h):
 *	NodeCreated, NodeDataChanged   data and exist watches at the path
 *	NodeDeleted                    data, exist and child watches
 *	NodeChildrenChanged            the child watch
 * Persistent and recursive flags stay until removeWatches.
 *
 * At most max_watches paths are tracked; a call that would add one more
 * fails before it is sent. Entries are malloc'd (header + path + NUL).
 *
 * Events go to the callback (the path copied into a NUL-terminated buffer
 * for the duration of the call) or to a FIFO of malloc'd copies of at most
 * max_queued_events entries; kc_next_event() hands one out and frees it at
 * the next call.
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "client/kc_internal.h"

struct kc_watch {
	uint64_t hash;
	uint32_t flags;
	uint32_t path_size;
	char path[]; /* NUL-terminated */
};

struct watch_key {
	const char *path;
	size_t size;
};

struct kc_queued_event {
	struct kc_queued_event *next;
	int32_t type;
	int32_t state;
	int64_t zxid;
	size_t path_size;
	char path[]; /* NUL-terminated */
};

static bool watch_eq(const void *item, const void *key)
{
	const struct kc_watch *w = item;
	const struct watch_key *k = key;
	return w->path_size == k->size && memcmp(w->path, k->path, k->size) == 0;
}

static uint64_t watch_hash(const struct kc_client *c, const char *path, size_t size)
{
	return keel_hash_bytes(path, size, c->watch_seed);
}

static struct kc_watch *watch_find(const struct kc_client *c, const char *path, size_t size,
				   uint64_t hash)
{
	struct watch_key key = {path, size};
	return keel_hmap_find(&c->watches, hash, watch_eq, &key);
}

enum keel_err kc_watch_init(struct kc_client *c)
{
	return keel_hmap_init(&c->watches, 0);
}

void kc_watch_close(struct kc_client *c)
{
	size_t cursor = 0;
	struct kc_watch *w;
	while ((w = keel_hmap_next(&c->watches, &cursor)) != NULL) {
		free(w);
	}
	keel_hmap_close(&c->watches);
}

uint32_t kc_watch_count(const struct kc_client *c)
{
	return (uint32_t)keel_hmap_count(&c->watches);
}

bool kc_watch_room(const struct kc_client *c, const char *path, size_t size)
{
	return kc_watch_count(c) < c->opt.max_watches ||
	       watch_find(c, path, size, watch_hash(c, path, size)) != NULL;
}

enum keel_err kc_watch_add(struct kc_client *c, const char *path, size_t size, uint32_t flags)
{
	uint64_t hash = watch_hash(c, path, size);
	struct kc_watch *w = watch_find(c, path, size, hash);
	if (w != NULL) {
		w->flags |= flags;
		return KEEL_OK;
	}
	if (kc_watch_count(c) >= c->opt.max_watches) {
		return KEEL_LIMIT;
	}
	w = malloc(sizeof(*w) + size + 1);
	if (w == NULL) {
		return KEEL_NOMEM;
	}
	w->hash = hash;
	w->flags = flags;
	w->path_size = (uint32_t)size;
	memcpy(w->path, path, size);
	w->path[size] = '\0';
	if (keel_hmap_insert(&c->watches, hash, w) != KEEL_OK) {
		free(w);
		return KEEL_NOMEM;
	}
	return KEEL_OK;
}

void kc_watch_drop(struct kc_client *c, const char *path, size_t size, uint32_t flags)
{
	uint64_t hash = watch_hash(c, path, size);
	struct kc_watch *w = watch_find(c, path, size, hash);
	if (w == NULL) {
		return;
	}
	w->flags &= ~flags;
	if (w->flags == 0) {
		bool removed = keel_hmap_remove_item(&c->watches, hash, w);
		KEEL_ASSERT(removed);
		free(w);
	}
}

void kc_watch_on_event(struct kc_client *c, int32_t type, const char *path, size_t size)
{
	switch (type) {
	case ZK_EVENT_NODE_CREATED:
	case ZK_EVENT_NODE_DATA_CHANGED:
		kc_watch_drop(c, path, size, KC_WATCH_DATA | KC_WATCH_EXIST);
		break;
	case ZK_EVENT_NODE_DELETED:
		kc_watch_drop(c, path, size, KC_WATCH_DATA | KC_WATCH_EXIST | KC_WATCH_CHILD);
		break;
	case ZK_EVENT_NODE_CHILDREN_CHANGED:
		kc_watch_drop(c, path, size, KC_WATCH_CHILD);
		break;
	default:
		break;
	}
}

/* ---- setWatches after a reconnect ---- */

/* The setWatches lists in wire order and the flag each carries. */
static const uint32_t list_flags[ZK_SW_LIST_COUNT] = {
	[ZK_SW_DATA] = KC_WATCH_DATA,
	[ZK_SW_EXIST] = KC_WATCH_EXIST,
	[ZK_SW_CHILD] = KC_WATCH_CHILD,
	[ZK_SW_PERSISTENT] = KC_WATCH_PERSISTENT,
	[ZK_SW_PERSISTENT_RECURSIVE] = KC_WATCH_RECURSIVE,
};

/* Bytes entry `w` adds to a setWatches packet. */
static size_t entry_cost(const struct kc_watch *w)
{
	size_t cost = 0;
	for (int i = 0; i < ZK_SW_LIST_COUNT; i++) {
		if (w->flags & list_flags[i]) {
			cost += 4 + w->path_size;
		}
	}
	return cost;
}

/* Sends one setWatches packet for entries [from, to). */
static int32_t send_set_watches(struct kc_client *c, struct kc_watch **entries, size_t from,
				size_t to, uint64_t deadline)
{
	bool v2 = false;
	for (size_t i = from; i < to; i++) {
		v2 = v2 || (entries[i]->flags & (KC_WATCH_PERSISTENT | KC_WATCH_RECURSIVE)) != 0;
	}
	int lists = v2 ? ZK_SW_LIST_COUNT : ZK_SW_PERSISTENT;
	struct keel_wbuf *w = &c->scratch;
	keel_wbuf_reset(w);
	keel_wbuf_i32(w, ZK_XID_SET_WATCHES);
	keel_wbuf_i32(w, v2 ? ZK_OP_SET_WATCHES2 : ZK_OP_SET_WATCHES);
	keel_wbuf_i64(w, c->last_zxid);
	for (int list = 0; list < lists; list++) {
		size_t count_at = w->size;
		int32_t count = 0;
		keel_wbuf_i32(w, 0);
		for (size_t i = from; i < to; i++) {
			if (entries[i]->flags & list_flags[list]) {
				zk_write_bytes(w, zk_bytes_of(entries[i]->path, entries[i]->path_size));
				count++;
			}
		}
		keel_wbuf_patch_u32(w, count_at, (uint32_t)count);
	}
	if (!keel_wbuf_ok(w)) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "setWatches packet over the max packet size");
	}
	return kc_conn_send_payload(c, w->data, w->size, deadline);
}

int32_t kc_watch_restore(struct kc_client *c, uint64_t deadline_ms)
{
	size_t count = keel_hmap_count(&c->watches);
	if (count == 0) {
		return ZK_OK;
	}
	struct kc_watch **entries = malloc(count * sizeof(*entries));
	if (entries == NULL) {
		return kc_fail(c, ZK_SYSTEM_ERROR, "out of memory re-setting watches");
	}
	size_t n = 0;
	size_t cursor = 0;
	struct kc_watch *w;
	while ((w = keel_hmap_next(&c->watches, &cursor)) != NULL) {
		entries[n++] = w;
	}
	KEEL_ASSERT(n == count);
	size_t chunk = KEEL_MIN((size_t)KC_SET_WATCHES_CHUNK, (size_t)c->opt.max_packet / 2);
	int32_t rc = ZK_OK;
	size_t from = 0;
	while (from < n && rc == ZK_OK) {
		size_t to = from;
		size_t bytes = 0;
		do {
			bytes += entry_cost(entries[to]);
			to++;
		} while (to < n && bytes + entry_cost(entries[to]) <= chunk);
		rc = send_set_watches(c, entries, from, to, deadline_ms);
		from = to;
	}
	free(entries);
	return rc;
}

/* ---- event delivery ---- */

void kc_event_dispatch(struct kc_client *c, int32_t type, int32_t state, const uint8_t *path,
		       size_t path_size, int64_t zxid)
{
	if (c->opt.on_event != NULL) {
		struct keel_wbuf *w = &c->event_path;
		keel_wbuf_reset(w);
		keel_wbuf_bytes(w, path, path_size);
		keel_wbuf_u8(w, 0);
		if (!keel_wbuf_ok(w)) {
			c->ev_dropped++;
			return;
		}
		struct kc_event ev = {type, state, (const char *)w->data, path_size, zxid};
		c->in_callback = true;
		c->opt.on_event(c->opt.event_ctx, &ev);
		c->in_callback = false;
		return;
	}
	if (c->ev_count >= c->opt.max_queued_events) {
		c->ev_dropped++;
		return;
	}
	struct kc_queued_event *q = malloc(sizeof(*q) + path_size + 1);
	if (q == NULL) {
		c->ev_dropped++;
		return;
	}
	q->next = NULL;
	q->type = type;
	q->state = state;
	q->zxid = zxid;
	q->path_size = path_size;
	if (path_size > 0) {
		memcpy(q->path, path, path_size);
	}
	q->path[path_size] = '\0';
	if (c->ev_tail != NULL) {
		c->ev_tail->next = q;
	} else {
		c->ev_head = q;
	}
	c->ev_tail = q;
	c->ev_count++;
}

void kc_event_release(struct kc_client *c)
{
	free(c->ev_taken);
	c->ev_taken = NULL;
}

void kc_event_close(struct kc_client *c)
{
	kc_event_release(c);
	while (c->ev_head != NULL) {
		struct kc_queued_event *q = c->ev_head;
		c->ev_head = q->next;
		free(q);
	}
	c->ev_tail = NULL;
	c->ev_count = 0;
}

bool kc_next_event(struct kc_client *c, struct kc_event *ev)
{
	KEEL_ASSERT(!c->in_callback);
	kc_event_release(c);
	struct kc_queued_event *q = c->ev_head;
	if (q == NULL) {
		return false;
	}
	c->ev_head = q->next;
	if (c->ev_head == NULL) {
		c->ev_tail = NULL;
	}
	c->ev_count--;
	c->ev_taken = q;
	ev->type = q->type;
	ev->state = q->state;
	ev->path = q->path;
	ev->path_size = q->path_size;
	ev->zxid = q->zxid;
	return true;
}

uint64_t kc_events_dropped(const struct kc_client *c)
{
	return c->ev_dropped;
}
