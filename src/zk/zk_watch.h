/*
 * zk_watch.h — the server-local watch manager (not replicated).
 *
 * Watches live on the server a client is connected to. The read paths
 * (zk_read.h) register them; after every zk_apply() (or system write) the
 * server hands the apply's triggers to zk_watches_fire(), which calls the
 * server's callback once per (connection, event) — before the server sends
 * any later reply on that connection.
 *
 * Semantics (ZooKeeper 3.9's WatchManager, which is 3.8's without its
 * mode-overwrite bug): a connection holds, per path, a set of modes in two
 * managers:
 *
 *	data manager   STANDARD (getData/exists), PERSISTENT, RECURSIVE
 *	child manager  STANDARD (getChildren), PERSISTENT
 *
 *	NodeCreated, NodeDataChanged   data manager at the path
 *	NodeDeleted                    data and child managers at the path
 *	NodeChildrenChanged            child manager at the parent
 *	(all but ChildrenChanged)      RECURSIVE modes on every ancestor
 *
 * A firing watch with STANDARD mode loses that mode (one-shot); persistent
 * modes stay. One trigger reaches a connection at most once, however many
 * of its watches match (so a delete seen by a data and a child watch is one
 * NodeDeleted). Delivery is filtered by the connection's READ permission on
 * the node (on the parent for NodeChildrenChanged), as ZooKeeper 3.8.4+
 * does; a filtered one-shot watch is still consumed. The event path is the
 * changed node's path, even for a recursive watch on an ancestor.
 *
 * Memory: a watch is one 28-byte entry in a chunked array plus, per
 * distinct watched path, one interned copy of the path and a 4-byte index
 * slot — against roughly 130 bytes per watch in ZooKeeper.
 *
 * Ownership: `struct zk_watch_conn` is allocated by the server (embed it in
 * the connection object) and must stay put between zk_watches_attach() and
 * zk_watches_detach(). The identities it points to must outlive the
 * attachment (they may change in place, e.g. after auth). Event paths passed
 * to the callback are valid only during the call.
 */
#ifndef KEEL_ZK_WATCH_H
#define KEEL_ZK_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "zk/zk_acl.h"
#include "zk/zk_jute.h"
#include "zk/zk_state.h"

struct zk_watch_conn {
	uint64_t conn_id;          /* the server's id, returned in callbacks */
	const struct zk_ids *ids;  /* for READ checks on delivery */
	/* private to zk_watch.c */
	uint32_t slot;
	uint32_t head;
	uint32_t count;
	uint32_t stamp;
	uint64_t path_bytes; /* sum of the path sizes of its watched paths */
};

struct zk_watch_event {
	int32_t type;         /* enum zk_event_type */
	struct zk_bytes path;
	int64_t zxid;         /* the triggering zxid (-1 for setWatches) */
};

typedef void (*zk_watch_fire_fn)(void *ctx, struct zk_watch_conn *conn,
				 const struct zk_watch_event *ev);

/* What a registration asks for. */
enum zk_watch_mode {
	ZK_WATCH_DATA,       /* getData/exists: one-shot, data manager */
	ZK_WATCH_CHILD,      /* getChildren: one-shot, child manager */
	ZK_WATCH_PERSISTENT, /* addWatch PERSISTENT: both managers */
	ZK_WATCH_RECURSIVE,  /* addWatch PERSISTENT_RECURSIVE: data manager */
};

struct zk_wpath;
struct zk_went;

struct zk_watches {
	/* distinct watched paths */
	struct zk_wpath **paths;
	uint32_t path_capacity;
	uint32_t path_count;
	uint32_t *free_paths;
	uint32_t free_path_count;
	uint32_t *index;          /* open addressing: path id + 1, 0 = empty */
	uint32_t index_mask;
	/* watch entries, in chunks */
	struct zk_went **chunks;
	uint32_t chunk_count;
	uint32_t free_entry;      /* free list through entries */
	uint32_t entry_count;
	/* attached connections */
	struct zk_watch_conn **conns;
	uint32_t conn_capacity;
	uint32_t *free_conns;
	uint32_t free_conn_count;
	/* state */
	uint32_t recursive_count; /* entries with a RECURSIVE mode */
	uint32_t stamp;
	uint32_t max_per_conn;    /* 0: unlimited */
	uint64_t max_bytes_per_conn; /* watched path bytes per connection; 0: unlimited */
	uint64_t seed;
	size_t path_bytes;
	zk_watch_fire_fn fire;
	void *ctx;
	struct keel_wbuf scratch;
};

/* max_per_conn from config.max_watches_per_conn; seed for path hashing. */
enum keel_err zk_watches_init(struct zk_watches *wm, uint32_t max_per_conn, uint64_t seed,
			      zk_watch_fire_fn fire, void *ctx);
void zk_watches_close(struct zk_watches *wm);
/* Caps the path bytes one connection's watches may name (each watched path
 * counts its size once per connection, however many modes it holds), so
 * that memory is bounded by bytes, not only by a count. 0: unlimited. */
void zk_watches_set_max_bytes(struct zk_watches *wm, uint64_t max_bytes_per_conn);

/* A connection joins / leaves (leaving drops all its watches). */
enum keel_err zk_watches_attach(struct zk_watches *wm, struct zk_watch_conn *conn,
				uint64_t conn_id, const struct zk_ids *ids);
void zk_watches_detach(struct zk_watches *wm, struct zk_watch_conn *conn);

/* Adds a mode at `path` for `conn`. KEEL_LIMIT when the connection holds
 * max_per_conn watched paths or the path would take it past
 * max_bytes_per_conn, KEEL_NOMEM. Adding a held mode is KEEL_OK. */
enum keel_err zk_watches_add(struct zk_watches *wm, struct zk_watch_conn *conn,
			     struct zk_bytes path, enum zk_watch_mode mode);

/* checkWatches / removeWatches by WatcherType (1 children, 2 data, 3 any,
 * 4 persistent, 5 persistent recursive) — exact path, this connection.
 * remove returns whether anything was removed (else NoWatcher). */
bool zk_watches_contains(const struct zk_watches *wm, const struct zk_watch_conn *conn,
			 struct zk_bytes path, int32_t watcher_type);
bool zk_watches_remove(struct zk_watches *wm, struct zk_watch_conn *conn, struct zk_bytes path,
		       int32_t watcher_type);

/* Fires every trigger of an apply result, in order. The state gives the
 * ACLs named by the triggers (valid until the next apply). */
void zk_watches_fire(struct zk_watches *wm, const struct zk_state *st,
		     const struct zk_result *res);
/* Fires one trigger (type, path, ACL id of the node) at `zxid`. */
void zk_watches_trigger(struct zk_watches *wm, const struct zk_state *st, int32_t type,
			struct zk_bytes path, uint32_t acl, int64_t zxid);

/* Sends one event straight to a connection (setWatches catch-up). */
void zk_watches_notify(struct zk_watches *wm, struct zk_watch_conn *conn, int32_t type,
		       struct zk_bytes path);

/* Watches (path, connection) pairs in total, and held by one connection. */
size_t zk_watches_count(const struct zk_watches *wm);
static inline uint32_t zk_watches_conn_count(const struct zk_watch_conn *conn)
{
	return conn->count;
}
size_t zk_watches_memory(const struct zk_watches *wm);

#endif
