/*
 * zk_state.h — the replicated state of the ZooKeeper service, and apply.
 *
 * The state is the znode tree (with full Stat), the ACL table, the sessions
 * table (id, negotiated timeout, password, ephemerals) and the set of
 * container and TTL nodes. Every server holds an identical copy because it
 * applies the same committed txns (zk_txn.h) in the same order with
 * zk_apply(), a pure and deterministic function: no clock (time comes in
 * the txn), no randomness (passwords come in the txn), no I/O.
 *
 *	           zk_state_init()
 *	                 |
 *	   +------> zk_apply(state, zxid, txn) ---> zk_result: reply + triggers
 *	   |             |                              |
 *	   +-------------+                 server: zk_watches_fire(), send reply
 *
 * Initial tree, as a fresh Apache ZooKeeper has it: "/" and "/zookeeper"
 * and "/zookeeper/quota" (world:anyone:ALL) and "/zookeeper/config"
 * (world:anyone:READ, aversion -1), all with zxids and times 0.
 *
 * Determinism contract: everything here that affects the state or a reply
 * depends only on the txn bytes, the zxid and the replicated config fields
 * (max_nodes, max_sessions, container_max_never_used_ms): those must be
 * equal on all servers. zk_state_hash() is equal on servers that applied
 * the same entries (it does not depend on node ids or memory layout).
 *
 * Ownership: the state owns all its memory. A zk_result is owned by the
 * caller (init once, reuse for every apply); its contents are valid until
 * the next zk_apply()/zk_system_begin() with it, and the ACL ids in its
 * triggers are valid until the next zk_apply()/zk_system_begin() on the state.
 */
#ifndef KEEL_ZK_STATE_H
#define KEEL_ZK_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/hash.h"
#include "zk/zk_acl.h"
#include "zk/zk_codes.h"
#include "zk/zk_jute.h"
#include "zk/zk_proto.h"
#include "zk/zk_tree.h"
#include "zk/zk_txn.h"

/* ---- configuration ---- */

struct zk_config {
	uint32_t max_packet_size;         /* jute.maxbuffer: 0xfffff */
	int32_t tick_time_ms;             /* 2000 */
	int32_t min_session_timeout_ms;   /* 0: 2 * tick_time_ms */
	int32_t max_session_timeout_ms;   /* 0: 20 * tick_time_ms */
	uint32_t max_nodes;               /* replicated limit; 0: 2^32 - 2 */
	uint32_t max_sessions;            /* replicated limit; 0: unlimited */
	uint32_t max_watches_per_conn;    /* server-local; 0: unlimited */
	size_t max_reply_size;            /* largest reply body: 64 MiB */
	int64_t container_max_never_used_ms; /* replicated; 0: never (ZooKeeper's default) */
	uint64_t hash_seed;               /* index hashing; may differ per server */
};

void zk_config_default(struct zk_config *cfg);

/* ---- sessions ---- */

struct zk_session {
	int64_t id;
	int32_t timeout_ms;
	uint8_t passwd[ZK_PASSWD_SIZE];
	uint32_t eph_head;  /* a node of the ring of its ephemerals, or NONE */
	uint32_t eph_count;
};

/* ---- watch triggers (apply output) ---- */

/* One watch trigger, in apply order. Event types and which watches they
 * reach are ZooKeeper's: NodeCreated and NodeDataChanged reach data/exist
 * watches, NodeDeleted data and child watches (one event per connection),
 * NodeChildrenChanged child watches of the parent; persistent-recursive
 * watches on an ancestor see all but NodeChildrenChanged. */
struct zk_trigger {
	int32_t type;         /* enum zk_event_type */
	uint32_t acl;         /* ACL id of the node (parent for ChildrenChanged) */
	uint32_t path_offset; /* into zk_result.paths */
	uint32_t path_size;
};

struct zk_result {
	/* What was applied (copied from the txn, for routing the reply). */
	enum zk_txn_kind kind;
	int32_t opcode;
	int64_t session_id;
	uint64_t origin;
	int32_t xid;
	int64_t zxid;
	/* The reply: ReplyHeader.err and the body that follows it. */
	int32_t err;
	struct keel_wbuf body;
	/* CREATE_SESSION: the new session (err == 0). */
	int64_t new_session_id;
	int32_t new_session_timeout_ms;
	uint8_t new_session_passwd[ZK_PASSWD_SIZE];
	/* A session closed by this entry (closeSession or expiry), else 0. */
	int64_t closed_session_id;
	/* Watch triggers, in apply order. */
	struct zk_trigger *triggers;
	uint32_t trigger_count;
	uint32_t trigger_capacity;
	struct keel_wbuf paths;
};

void zk_result_init(struct zk_result *res, size_t max_reply_size);
void zk_result_close(struct zk_result *res);
void zk_result_reset(struct zk_result *res);

static inline struct zk_bytes zk_trigger_path(const struct zk_result *res,
					      const struct zk_trigger *t)
{
	return zk_bytes_of(res->paths.data + t->path_offset, t->path_size);
}

/* ---- the state ---- */

struct zk_undo;

struct zk_state {
	struct zk_config config;
	struct zk_tree tree;
	struct zk_acl_table acls;
	struct keel_hmap sessions;  /* id -> struct zk_session (owned) */
	struct keel_hmap special;   /* container and TTL node ids (item: id + 1) */
	uint64_t last_zxid;         /* highest zxid applied */
	uint64_t digest_nodes;      /* sum of node digests */
	uint64_t digest_sessions;   /* sum of session digests */
	/* apply scratch (not state) */
	struct zk_undo *undo;
	uint32_t undo_count;
	uint32_t undo_capacity;
	struct keel_wbuf scratch;   /* built paths */
	struct keel_wbuf acl_scratch; /* fixed-up ACLs */
	struct keel_wbuf multi;     /* multi results before commit */
	uint64_t sys_zxid;          /* zk_system_begin() */
	int64_t sys_time_ms;
	uint64_t digest_mark;       /* digest at the start of a mutation group */
	uint64_t digest_sessions_mark;
	uint32_t trigger_mark;
	/* work counter (not state): comparisons made by apply's sorts, so that
	 * tests can bound the work of a hostile order without a clock */
	uint64_t sort_compares;
};

enum keel_err zk_state_init(struct zk_state *st, const struct zk_config *cfg);
void zk_state_close(struct zk_state *st);

/*
 * Applies one committed txn at log index `zxid` (> every earlier zxid).
 *   KEEL_OK       applied; res->err is the ZooKeeper error for the reply
 *                 (NodeExists, BadVersion, NoAuth, ...; 0 on success), the
 *                 body, session info and triggers are in `res`.
 *   KEEL_CORRUPT  / KEEL_PROTO: the txn envelope does not decode; nothing
 *                 changed (every server sees the same, so it is safe to
 *                 skip it; a server should log it loudly).
 *   KEEL_NOMEM    out of memory mid-apply: the state is rolled back to
 *                 before the txn, but this server can no longer follow the
 *                 log — it must stop (other servers applied the entry).
 * A malformed request body inside a good envelope is a normal outcome:
 * res->err = MarshallingError.
 */
enum keel_err zk_apply(struct zk_state *st, uint64_t zxid, const void *txn, size_t size,
		       struct zk_result *res);

/* ---- reading the state ---- */

/* Node id at `path` (ZooKeeper's map semantics: "" and "/" are the root). */
uint32_t zk_state_lookup(const struct zk_state *st, struct zk_bytes path);
/* The client-visible Stat of a node. */
void zk_state_stat(const struct zk_state *st, uint32_t id, struct zk_stat *stat);
struct zk_acl_vec zk_state_node_acl(const struct zk_state *st, uint32_t id);
const struct zk_session *zk_state_session(const struct zk_state *st, int64_t session_id);
size_t zk_state_session_count(const struct zk_state *st);
/* Iterate sessions: *cursor = 0 first; NULL at the end (unordered). */
const struct zk_session *zk_state_session_next(const struct zk_state *st, size_t *cursor);
uint32_t zk_state_node_count(const struct zk_state *st);

/* Deterministic state hash, maintained incrementally: O(1). */
uint64_t zk_state_hash(const struct zk_state *st);
/* The same hash recomputed from scratch: O(nodes); for tests and checks. */
uint64_t zk_state_hash_full(const struct zk_state *st);

/* Memory accounting (estimates of heap bytes). */
struct zk_memory {
	size_t node_count;
	size_t node_bytes;      /* node allocations (header + name + data) */
	size_t tree_bytes;      /* slot table + name index */
	size_t acl_bytes;
	size_t session_bytes;
	size_t total_bytes;
};

void zk_state_memory(const struct zk_state *st, struct zk_memory *mem);

/* ---- system writes (for other pure layers, e.g. the controller) ----
 *
 * Another layer applying its own log entry can render state into the tree
 * with the same semantics as client writes (Stat, cversion, pzxid, digest,
 * watch triggers) but without sessions or ACL checks:
 *
 *	zk_system_begin(st, res, zxid);           // once per log entry
 *	zk_system_put(st, res, "/brokers/ids/1", ...);
 *	zk_system_delete(st, res, "/brokers/topics/t", true);
 *	// then fire res's triggers like after zk_apply()
 *
 * Each call is atomic (all or nothing). Errors: KEEL_INVAL (bad path, or a
 * parent that is a session ephemeral), KEEL_NOENT (missing parent without
 * ZK_SYSTEM_PARENTS; delete of a missing node), KEEL_EXIST (delete of a node
 * with children, not recursive), KEEL_TOOBIG (data over max_packet_size),
 * KEEL_LIMIT, KEEL_NOMEM.
 */
enum zk_system_flags {
	ZK_SYSTEM_PARENTS = 1u << 0, /* create missing parents (same ACL, no data) */
};

void zk_system_begin(struct zk_state *st, struct zk_result *res, uint64_t zxid, int64_t time_ms);
/* Creates the node (persistent) or, if it exists, replaces its data
 * (version + 1, NodeDataChanged). `acl` is an encoded list (see
 * zk_acl_vec_build); it is applied on create and left alone on update. */
enum keel_err zk_system_put(struct zk_state *st, struct zk_result *res, const char *path,
			    size_t path_size, const void *data, size_t data_size,
			    struct zk_acl_vec acl, unsigned flags);
enum keel_err zk_system_delete(struct zk_state *st, struct zk_result *res, const char *path,
			       size_t path_size, bool recursive);

/* Canned ACL lists for system writes (encoded elements, static). */
struct zk_acl_vec zk_acl_open_unsafe(void);     /* world:anyone:ALL */
struct zk_acl_vec zk_acl_read_unsafe(void);     /* world:anyone:READ */

#endif
