/*
 * zk_mutate.h — state mutations with undo, digest upkeep and watch triggers
 * (internal to src/zk: used by apply, system writes and snapshot load).
 *
 * Every change to the replicated state goes through these primitives inside
 * a group:
 *
 *	zk_mut_begin(st, res);
 *	... zk_mut_create / zk_mut_delete / zk_mut_set_data / zk_mut_set_acl ...
 *	zk_mut_commit(st)            or      zk_mut_rollback(st, res)
 *
 * A primitive does no permission or version checks (the caller did them):
 * it changes the tree, the parent's cversion/pzxid, the session's ephemeral
 * ring or the container/TTL set, keeps the incremental digest exact, appends
 * ZooKeeper's watch triggers to `res`, and records an undo entry. Rollback
 * restores the state bit for bit (including children order) and drops the
 * group's triggers; it never allocates. Nodes deleted or replaced in a group
 * are freed at commit, and ACL references dropped at commit go to the ACL
 * table's pending list (freed at the next zk_acl_table_collect()).
 *
 * Failures (KEEL_NOMEM, KEEL_LIMIT) leave the group open; the caller rolls
 * it back.
 */
#ifndef KEEL_ZK_MUTATE_H
#define KEEL_ZK_MUTATE_H

#include "zk/zk_state.h"

enum zk_undo_kind {
	ZK_UNDO_CREATED,
	ZK_UNDO_DELETED,
	ZK_UNDO_PARENT,
	ZK_UNDO_REPLACED,
	ZK_UNDO_ACL,
	ZK_UNDO_SESSION_ADDED,
	ZK_UNDO_SESSION_REMOVED,
};

struct zk_undo {
	enum zk_undo_kind kind;
	uint32_t id;          /* node id */
	uint32_t aux;         /* DELETED: sibling it followed; ACL: old acl id */
	int32_t old_version;  /* PARENT: cversion; ACL: aversion */
	int64_t old_zxid;     /* PARENT: pzxid */
	void *ptr;            /* REPLACED: old node; SESSION_*: the session */
};

void zk_mut_begin(struct zk_state *st, struct zk_result *res);
void zk_mut_commit(struct zk_state *st);
void zk_mut_rollback(struct zk_state *st, struct zk_result *res);

/* Creates a node named `name` under `parent_id`. `path` is its full path
 * (for the digest and the NodeCreated trigger); `acl` is an ACL table id
 * whose reference passes to the node. Stat: czxid = mzxid = pzxid = zxid,
 * ctime = mtime = time_ms, versions 0. The parent gets cversion + 1 and
 * pzxid = zxid. Triggers NodeCreated(path), NodeChildrenChanged(parent).
 * On failure the acl reference is released. */
enum keel_err zk_mut_create(struct zk_state *st, struct zk_result *res, uint32_t parent_id,
			    struct zk_bytes path, struct zk_bytes data, uint32_t acl,
			    int64_t owner, int64_t zxid, int64_t time_ms, uint32_t *id);

/* Deletes a childless node. Parent gets pzxid = zxid (cversion unchanged:
 * ZooKeeper counts creates). Triggers NodeDeleted(path),
 * NodeChildrenChanged(parent). */
enum keel_err zk_mut_delete(struct zk_state *st, struct zk_result *res, uint32_t id,
			    struct zk_bytes path, int64_t zxid);

/* Replaces the data: version = new_version, mzxid = zxid, mtime = time_ms.
 * Triggers NodeDataChanged(path). */
enum keel_err zk_mut_set_data(struct zk_state *st, struct zk_result *res, uint32_t id,
			      struct zk_bytes path, struct zk_bytes data, int32_t new_version,
			      int64_t zxid, int64_t time_ms);

/* Replaces the ACL (reference of `acl` passes to the node); aversion =
 * new_aversion. No trigger: apply adds the feed's ZK_EVENT_KEEL_ACL_CHANGED. */
enum keel_err zk_mut_set_acl(struct zk_state *st, uint32_t id, struct zk_bytes path,
			     uint32_t acl, int32_t new_aversion);

/* Adds a session (KEEL_EXIST if present). */
enum keel_err zk_mut_session_add(struct zk_state *st, int64_t id, int32_t timeout_ms,
				 const uint8_t passwd[ZK_PASSWD_SIZE]);
/* Removes a session that has no ephemerals left. */
enum keel_err zk_mut_session_remove(struct zk_state *st, struct zk_session *s);

/* Helpers shared with apply, reads and snapshots. */
struct zk_session *zk_mut_session_find(const struct zk_state *st, int64_t id);
enum keel_err zk_mut_trigger(struct zk_result *res, int32_t type, uint32_t acl,
			     struct zk_bytes path);

/* Digest of one node at `path` (sum of its parts). */
uint64_t zk_mut_node_digest(const struct zk_state *st, struct zk_bytes path,
			    const struct zk_node *n);
uint64_t zk_mut_session_digest(const struct zk_session *s);

/* Linking helpers for snapshot load (no undo, no triggers). */
void zk_mut_eph_link(struct zk_state *st, struct zk_session *s, uint32_t id);
enum keel_err zk_mut_special_add(struct zk_state *st, uint32_t id);

/* A state with only an empty root (snapshot load fills it). */
enum keel_err zk_state_init_bare(struct zk_state *st, const struct zk_config *cfg);
/* The digests recomputed from scratch (O(n)). */
uint64_t zk_state_digest_nodes_full(const struct zk_state *st, bool *ok);
uint64_t zk_state_digest_sessions_full(const struct zk_state *st);

/* "/a/b" -> "/a"; "/a" -> "/" (ZooKeeper's parent name for triggers). */
struct zk_bytes zk_mut_parent_path(struct zk_bytes path);

#endif
