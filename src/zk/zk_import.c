/*
 * zk_import.c — ZooKeeper snapshot and txn-log decoding and replay onto a
 * keel tree (see zk_import.h for the formats and the replay rules).
 *
 * The tree is built directly (zk_tree + the ACL table), not through apply:
 * ZooKeeper's txns carry the results (versions, parentCVersion), so replay
 * sets fields instead of computing them. During replay session ephemerals
 * sit in the tree unlinked from any session (there are no sessions); they
 * are all removed by zk_import_finish() before the state is written.
 */
#include "zk/zk_import.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "zk/zk_mutate.h"

#define SNAP_MAGIC 0x5a4b534eu /* "ZKSN" */
#define LOG_MAGIC 0x5a4b4c47u  /* "ZKLG" */
#define FILE_VERSION 2
#define FILE_HEADER_SIZE 16u
#define TXN_DIGEST_SIZE 12u /* TxnDigest {int version, long treeDigest} */
#define RECORD_OVERHEAD 13u /* long checksum, int length, byte 'B' */
_Static_assert(FILE_HEADER_SIZE == 4 + 4 + 8, "file header: int magic, int version, long dbid");
_Static_assert(TXN_DIGEST_SIZE == 4 + 8, "TxnDigest: int version, long treeDigest");
_Static_assert(RECORD_OVERHEAD == 8 + 4 + 1, "record: long checksum, int length, byte 'B'");
#define OPEN_ACL_KEY (-1)   /* ZooKeeper's key for world:anyone:ALL */
#define ADLER_MOD 65521u

struct zk_import_acl {
	int64_t key;
	uint32_t id;
};

/* Where the txn being applied sits, for error reports. */
struct txn_ctx {
	struct zk_import *imp;
	struct zk_import_error *err;
	uint64_t offset;
	int64_t session;
	int64_t zxid;
	int64_t time_ms;
};

uint32_t zk_import_adler32(uint32_t adler, const uint8_t *data, size_t size)
{
	uint32_t a = adler & 0xffffu;
	uint32_t b = adler >> 16;
	while (size > 0) {
		/* 5552 bytes is the most that cannot overflow 32 bits. */
		size_t n = KEEL_MIN(size, (size_t)5552);
		size -= n;
		for (size_t i = 0; i < n; i++) {
			a += data[i];
			b += a;
		}
		data += n;
		a %= ADLER_MOD;
		b %= ADLER_MOD;
	}
	return b << 16 | a;
}

static enum keel_err refuse(struct zk_import_error *err, uint64_t offset, const char *reason,
			    int64_t value)
{
	err->offset = offset;
	err->reason = reason;
	err->value = value;
	return KEEL_CORRUPT;
}

enum keel_err zk_import_init(struct zk_import *imp, const struct zk_config *cfg)
{
	memset(imp, 0, sizeof(*imp));
	keel_wbuf_init_dynamic(&imp->path, 256, SIZE_MAX / 2);
	enum keel_err rc = zk_state_init_bare(&imp->st, cfg);
	if (rc != KEEL_OK) {
		keel_wbuf_free(&imp->path);
	}
	return rc;
}

void zk_import_close(struct zk_import *imp)
{
	zk_state_close(&imp->st);
	free(imp->acls);
	keel_wbuf_free(&imp->path);
	memset(imp, 0, sizeof(*imp));
}

bool zk_import_snapshot_complete(const uint8_t *bytes, size_t size)
{
	static const uint8_t seal_tail[5] = {0, 0, 0, 1, '/'};
	return size >= FILE_HEADER_SIZE + 13u && memcmp(bytes + size - 5, seal_tail, 5) == 0;
}

/* ---- tree helpers ---- */

static struct zk_node *node_at(struct zk_import *imp, uint32_t id)
{
	return zk_tree_node(&imp->st.tree, id);
}

static bool is_session_ephemeral(const struct zk_node *n)
{
	return zk_owner_kind(n->ephemeral_owner) == ZK_KIND_EPHEMERAL;
}

/* Splits "/a/b" into the parent's id and the last name. Returns false for
 * a path ZooKeeper could not have stored (no leading '/', empty name). */
static bool split_path(struct zk_import *imp, struct zk_bytes path, uint32_t *parent,
		       struct zk_bytes *name)
{
	if (path.size < 2 || path.data[0] != '/') {
		return false;
	}
	size_t len = (size_t)path.size;
	size_t slash = len - 1;
	while (path.data[slash] != '/') {
		slash--;
	}
	if (slash == len - 1) {
		return false;
	}
	*parent = zk_tree_lookup(&imp->st.tree, (const char *)path.data, slash);
	*name = zk_bytes_of(path.data + slash + 1, len - slash - 1);
	return true;
}

static uint32_t lookup(struct zk_import *imp, struct zk_bytes path)
{
	return zk_tree_lookup(&imp->st.tree, (const char *)path.data, zk_bytes_len(path));
}

static bool fits_limits(const struct zk_import *imp, struct zk_bytes name, struct zk_bytes data)
{
	uint32_t limit = imp->st.config.max_packet_size;
	return zk_bytes_len(name) <= limit && zk_bytes_len(data) <= limit;
}

/* A new free-standing node with ZooKeeper's persisted stat. */
static struct zk_node *new_node(struct zk_import *imp, struct zk_bytes name, struct zk_bytes data,
				const struct zk_stat *s, uint32_t acl)
{
	struct zk_node *n = zk_tree_alloc(&imp->st.tree, (const char *)name.data,
					  zk_bytes_len(name), data.data, zk_bytes_len(data),
					  zk_bytes_is_null(data));
	if (n == NULL) {
		return NULL;
	}
	n->czxid = s->czxid;
	n->mzxid = s->mzxid;
	n->ctime = s->ctime;
	n->mtime = s->mtime;
	n->version = s->version;
	n->cversion = s->cversion;
	n->aversion = s->aversion;
	n->ephemeral_owner = s->ephemeral_owner;
	n->pzxid = s->pzxid;
	n->acl = acl;
	return n;
}

/* Gives node `id` new data (a new allocation in its slot); everything else
 * carries over. */
static enum keel_err replace_data(struct zk_import *imp, uint32_t id, struct zk_bytes data)
{
	struct zk_tree *t = &imp->st.tree;
	struct zk_node *n = zk_tree_copy_with_data(t, zk_tree_node(t, id), data.data,
						   zk_bytes_len(data), zk_bytes_is_null(data));
	if (n == NULL) {
		return KEEL_NOMEM;
	}
	zk_tree_free(t, zk_tree_replace(t, id, n));
	return KEEL_OK;
}

static void set_acl_id(struct zk_import *imp, uint32_t id, uint32_t acl)
{
	struct zk_node *n = node_at(imp, id);
	zk_acl_table_unref(&imp->st.acls, n->acl);
	n->acl = acl;
}

/* Removes a leaf node and its ACL reference. */
static void remove_leaf(struct zk_import *imp, uint32_t id)
{
	struct zk_tree *t = &imp->st.tree;
	zk_acl_table_unref(&imp->st.acls, node_at(imp, id)->acl);
	(void)zk_tree_detach(t, id);
	zk_tree_release(t, id);
}

/* Removes a node and anything below it (ZooKeeper never deletes a node
 * with children, but a fuzzy snapshot replayed out of order is not worth
 * trusting on that). */
static void remove_subtree(struct zk_import *imp, uint32_t id)
{
	struct zk_tree *t = &imp->st.tree;
	for (;;) {
		uint32_t cur = id;
		for (uint32_t c = zk_tree_first_child(t, cur); c != ZK_NODE_NONE;
		     c = zk_tree_first_child(t, cur)) {
			cur = c;
		}
		remove_leaf(imp, cur);
		if (cur == id) {
			return;
		}
	}
}

/* DataTree.setCversionPzxid. */
static void raise_cversion(struct zk_node *parent, int32_t cversion, int64_t zxid)
{
	if (cversion == -1) {
		cversion = parent->cversion + 1;
	}
	if (cversion > parent->cversion) {
		parent->cversion = cversion;
		parent->pzxid = zxid;
	}
}

/* ---- the snapshot ---- */

static int acl_key_cmp(const void *a, const void *b)
{
	int64_t x = ((const struct zk_import_acl *)a)->key;
	int64_t y = ((const struct zk_import_acl *)b)->key;
	return (x > y) - (x < y);
}

static const struct zk_import_acl *acl_find(const struct zk_import *imp, int64_t key)
{
	struct zk_import_acl probe = {key, 0};
	return bsearch(&probe, imp->acls, imp->acl_count, sizeof(probe), acl_key_cmp);
}

/* The ACL cache: int count, then {long key, vector<ACL>} each. Every list
 * is interned once here; the reference is dropped at finish. The key -1
 * (world:anyone:ALL) is added for nodes that use it. */
static enum keel_err read_acl_cache(struct zk_import *imp, struct keel_rbuf *r,
				    struct zk_import_error *err)
{
	uint64_t at = r->pos;
	int32_t count = zk_read_count(r, 12);
	if (!keel_rbuf_ok(r) || count < 0) {
		return refuse(err, at, "ACL cache count does not fit the file", count);
	}
	imp->acls = malloc(((size_t)count + 1) * sizeof(*imp->acls));
	if (imp->acls == NULL) {
		return KEEL_NOMEM;
	}
	for (int32_t i = 0; i < count; i++) {
		at = r->pos;
		int64_t key = keel_rbuf_i64(r);
		struct zk_acl_vec v = zk_read_acl_vec(r);
		if (!keel_rbuf_ok(r)) {
			return refuse(err, at, "malformed ACL list in the ACL cache", key);
		}
		if (v.count <= 0 || v.count > ZK_ACL_MAX_ENTRIES) {
			return refuse(err, at, "ACL list in the ACL cache is empty or too long",
				      v.count);
		}
		uint32_t id = zk_acl_table_intern(&imp->st.acls, v);
		if (id == ZK_ACL_NONE) {
			return KEEL_NOMEM;
		}
		imp->acls[imp->acl_count++] = (struct zk_import_acl){key, id};
	}
	qsort(imp->acls, imp->acl_count, sizeof(*imp->acls), acl_key_cmp);
	for (uint32_t i = 1; i < imp->acl_count; i++) {
		if (imp->acls[i].key == imp->acls[i - 1].key) {
			return refuse(err, at, "ACL key listed twice in the ACL cache",
				      imp->acls[i].key);
		}
	}
	if (acl_find(imp, OPEN_ACL_KEY) == NULL) {
		uint32_t id = zk_acl_table_intern(&imp->st.acls, zk_acl_open_unsafe());
		if (id == ZK_ACL_NONE) {
			return KEEL_NOMEM;
		}
		imp->acls[imp->acl_count++] = (struct zk_import_acl){OPEN_ACL_KEY, id};
		qsort(imp->acls, imp->acl_count, sizeof(*imp->acls), acl_key_cmp);
	}
	return KEEL_OK;
}

/* Puts one snapshot node in the tree (its parent came before it). */
static enum keel_err load_node(struct zk_import *imp, struct zk_bytes path, struct zk_bytes data,
			       const struct zk_stat *s, uint32_t acl, uint64_t at,
			       struct zk_import_error *err)
{
	struct zk_tree *t = &imp->st.tree;
	if (path.size == 0) {
		if (imp->stats.snapshot_nodes != 0) {
			return refuse(err, at, "the root is listed twice", 0);
		}
		if (s->ephemeral_owner != 0) {
			return refuse(err, at, "the root has an ephemeral owner", s->ephemeral_owner);
		}
		if (!fits_limits(imp, path, data)) {
			return refuse(err, at, "node data is larger than keel's packet size limit",
				      data.size);
		}
		/* The bare root holds no ACL reference yet. */
		enum keel_err rc = replace_data(imp, ZK_ROOT_ID, data);
		if (rc != KEEL_OK) {
			return rc;
		}
		struct zk_node *root = node_at(imp, ZK_ROOT_ID);
		root->czxid = s->czxid;
		root->mzxid = s->mzxid;
		root->ctime = s->ctime;
		root->mtime = s->mtime;
		root->version = s->version;
		root->cversion = s->cversion;
		root->aversion = s->aversion;
		root->pzxid = s->pzxid;
		root->acl = acl;
		zk_acl_table_ref(&imp->st.acls, acl);
		return KEEL_OK;
	}
	if (imp->stats.snapshot_nodes == 0) {
		return refuse(err, at, "the first node is not the root", 0);
	}
	uint32_t parent;
	struct zk_bytes name;
	if (!split_path(imp, path, &parent, &name)) {
		return refuse(err, at, "malformed node path", 0);
	}
	if (parent == ZK_NODE_NONE) {
		return refuse(err, at, "node whose parent is not in the snapshot", 0);
	}
	if (is_session_ephemeral(node_at(imp, parent))) {
		return refuse(err, at, "node under an ephemeral node", 0);
	}
	if (zk_tree_child(t, parent, (const char *)name.data, (size_t)name.size) != ZK_NODE_NONE) {
		return refuse(err, at, "node listed twice", 0);
	}
	if (!fits_limits(imp, name, data)) {
		return refuse(err, at, "node name or data is larger than keel's packet size limit",
			      data.size);
	}
	struct zk_node *n = new_node(imp, name, data, s, acl);
	if (n == NULL) {
		return KEEL_NOMEM;
	}
	if (zk_tree_add(t, parent, n) == ZK_NODE_NONE) {
		zk_tree_free(t, n);
		return t->count >= t->max_nodes ? KEEL_LIMIT : KEEL_NOMEM;
	}
	zk_acl_table_ref(&imp->st.acls, acl);
	return KEEL_OK;
}

static enum keel_err read_nodes(struct zk_import *imp, struct keel_rbuf *r,
				struct zk_import_error *err)
{
	for (;;) {
		uint64_t at = r->pos;
		struct zk_bytes path = zk_read_bytes(r);
		if (!keel_rbuf_ok(r) || zk_bytes_is_null(path)) {
			return refuse(err, at, "malformed node path (or the file ends early)", 0);
		}
		if (zk_bytes_eq_str(path, "/")) {
			break; /* end of the nodes */
		}
		struct zk_bytes data = zk_read_bytes(r);
		int64_t acl_key = keel_rbuf_i64(r);
		struct zk_stat s;
		zk_read_stat_persisted(r, &s);
		if (!keel_rbuf_ok(r)) {
			return refuse(err, at, "node record runs past the end of the file", 0);
		}
		const struct zk_import_acl *acl = acl_find(imp, acl_key);
		if (acl == NULL) {
			return refuse(err, at, "node refers to an ACL that is not in the ACL cache",
				      acl_key);
		}
		enum keel_err rc = load_node(imp, path, data, &s, acl->id, at, err);
		if (rc != KEEL_OK) {
			return rc;
		}
		imp->stats.snapshot_nodes++;
	}
	if (imp->stats.snapshot_nodes == 0) {
		return refuse(err, r->pos, "the snapshot has no root", 0);
	}
	return KEEL_OK;
}

/* A seal: {long Adler-32 of every byte before it, ustring "/"}. */
static enum keel_err read_seal(struct keel_rbuf *r, struct zk_import_error *err)
{
	uint64_t at = r->pos;
	uint32_t sum = zk_import_adler32(1, r->data, r->pos);
	uint64_t stored = keel_rbuf_u64(r);
	struct zk_bytes slash = zk_read_bytes(r);
	if (!keel_rbuf_ok(r) || !zk_bytes_eq_str(slash, "/")) {
		return refuse(err, at, "missing or malformed checksum seal", 0);
	}
	if (stored != sum) {
		return refuse(err, at,
			      "Adler-32 checksum mismatch: the bytes before this seal are damaged",
			      (int64_t)stored);
	}
	return KEEL_OK;
}

/* After the first seal: the tree digest {long zxid, int version, digest}
 * (a long from version 2, a hex string before) and its seal, then maybe
 * {long lastZxid} and a seal. Anything else is refused. */
static enum keel_err read_trailers(struct keel_rbuf *r, struct zk_import_error *err)
{
	for (int i = 0; i < 2 && keel_rbuf_remaining(r) > 0; i++) {
		uint64_t at = r->pos;
		if (i == 0) {
			(void)keel_rbuf_i64(r);
			int32_t version = keel_rbuf_i32(r);
			if (version < 2) {
				(void)zk_read_bytes(r);
			} else {
				(void)keel_rbuf_i64(r);
			}
		} else {
			(void)keel_rbuf_i64(r);
		}
		if (!keel_rbuf_ok(r)) {
			return refuse(err, at, "malformed trailer after the nodes", 0);
		}
		enum keel_err rc = read_seal(r, err);
		if (rc != KEEL_OK) {
			return rc;
		}
	}
	if (keel_rbuf_remaining(r) > 0) {
		return refuse(err, r->pos, "unexpected bytes after the snapshot's last seal", 0);
	}
	return KEEL_OK;
}

static enum keel_err read_file_header(struct keel_rbuf *r, uint32_t magic, const char *what,
				      struct zk_import_error *err)
{
	uint32_t got = keel_rbuf_u32(r);
	int32_t version = keel_rbuf_i32(r);
	(void)keel_rbuf_i64(r); /* dbid */
	if (!keel_rbuf_ok(r)) {
		return refuse(err, 0, "file is shorter than its header", 0);
	}
	if (got != magic) {
		return refuse(err, 0, what, (int64_t)got);
	}
	if (version != FILE_VERSION) {
		return refuse(err, 4, "unsupported file format version", version);
	}
	return KEEL_OK;
}

enum keel_err zk_import_snapshot(struct zk_import *imp, const uint8_t *bytes, size_t size,
				 int64_t name_zxid, struct zk_import_error *err)
{
	KEEL_ASSERT(!imp->started);
	struct keel_rbuf r;
	keel_rbuf_init(&r, bytes, size);
	enum keel_err rc =
		read_file_header(&r, SNAP_MAGIC, "not a ZooKeeper snapshot (bad magic)", err);
	if (rc != KEEL_OK) {
		return rc;
	}
	uint64_t at = r.pos;
	int32_t sessions = zk_read_count(&r, 12);
	if (!keel_rbuf_ok(&r) || sessions < 0 ||
	    keel_rbuf_bytes(&r, (size_t)sessions * 12u) == NULL) {
		return refuse(err, at, "session list does not fit the file", sessions);
	}
	imp->stats.snapshot_sessions = (uint32_t)sessions;
	rc = read_acl_cache(imp, &r, err);
	if (rc == KEEL_OK) {
		rc = read_nodes(imp, &r, err);
	}
	if (rc == KEEL_OK) {
		rc = read_seal(&r, err);
	}
	if (rc == KEEL_OK) {
		rc = read_trailers(&r, err);
	}
	if (rc != KEEL_OK) {
		return rc;
	}
	imp->started = true;
	imp->snapshot_zxid = name_zxid;
	imp->last_zxid = name_zxid;
	return KEEL_OK;
}

enum keel_err zk_import_empty(struct zk_import *imp)
{
	KEEL_ASSERT(!imp->started);
	/* keel's initial tree is ZooKeeper's: "/", /zookeeper, /zookeeper/quota,
	 * /zookeeper/config, all at zxid 0. */
	struct zk_config cfg = imp->st.config;
	zk_state_close(&imp->st);
	enum keel_err rc = zk_state_init(&imp->st, &cfg);
	if (rc != KEEL_OK) {
		return rc;
	}
	imp->started = true;
	return KEEL_OK;
}

/* ---- txn replay (DataTree.processTxn) ---- */

static enum keel_err op_create(struct txn_ctx *tx, int32_t type, struct zk_bytes path,
			       struct zk_bytes data, struct zk_acl_vec acl, int64_t owner,
			       int32_t parent_cversion)
{
	struct zk_import *imp = tx->imp;
	uint32_t parent;
	struct zk_bytes name;
	if (!split_path(imp, path, &parent, &name)) {
		return refuse(tx->err, tx->offset, "create txn with a malformed path", tx->zxid);
	}
	if (acl.count <= 0 || acl.count > ZK_ACL_MAX_ENTRIES) {
		return refuse(tx->err, tx->offset, "create txn with an empty or too long ACL",
			      tx->zxid);
	}
	if (parent == ZK_NODE_NONE) {
		imp->stats.txn_errors++; /* NoNode */
		return KEEL_OK;
	}
	if (!fits_limits(imp, name, data)) {
		return refuse(tx->err, tx->offset,
			      "node name or data is larger than keel's packet size limit", tx->zxid);
	}
	uint32_t acl_id = zk_acl_table_intern(&imp->st.acls, acl);
	if (acl_id == ZK_ACL_NONE) {
		return KEEL_NOMEM;
	}
	struct zk_tree *t = &imp->st.tree;
	uint32_t existing = zk_tree_child(t, parent, (const char *)name.data, (size_t)name.size);
	struct zk_node *p = node_at(imp, parent);
	if (existing != ZK_NODE_NONE) {
		/* NodeExists: the ACL is replaced anyway, and a plain create
		 * still raises the parent's cversion (fuzzy snapshot). */
		set_acl_id(imp, existing, acl_id);
		if (type == ZK_OP_CREATE) {
			raise_cversion(p, parent_cversion, tx->zxid);
		}
		imp->stats.txn_errors++;
		return KEEL_OK;
	}
	if (is_session_ephemeral(p)) {
		zk_acl_table_unref(&imp->st.acls, acl_id);
		return refuse(tx->err, tx->offset, "create txn under an ephemeral node", tx->zxid);
	}
	raise_cversion(p, parent_cversion, tx->zxid);
	struct zk_stat s;
	memset(&s, 0, sizeof(s));
	s.czxid = s.mzxid = s.pzxid = tx->zxid;
	s.ctime = s.mtime = tx->time_ms;
	s.ephemeral_owner = owner;
	struct zk_node *n = new_node(imp, name, data, &s, acl_id);
	if (n == NULL) {
		zk_acl_table_unref(&imp->st.acls, acl_id);
		return KEEL_NOMEM;
	}
	if (zk_tree_add(t, parent, n) == ZK_NODE_NONE) {
		zk_tree_free(t, n);
		zk_acl_table_unref(&imp->st.acls, acl_id);
		return t->count >= t->max_nodes ? KEEL_LIMIT : KEEL_NOMEM;
	}
	return KEEL_OK;
}

static enum keel_err op_delete(struct txn_ctx *tx, struct zk_bytes path)
{
	struct zk_import *imp = tx->imp;
	uint32_t parent;
	struct zk_bytes name;
	if (!split_path(imp, path, &parent, &name)) {
		return refuse(tx->err, tx->offset, "delete txn with a malformed path", tx->zxid);
	}
	if (parent == ZK_NODE_NONE) {
		imp->stats.txn_errors++;
		return KEEL_OK;
	}
	/* The parent's pzxid moves even when the child is already gone. */
	struct zk_node *p = node_at(imp, parent);
	if (tx->zxid > p->pzxid) {
		p->pzxid = tx->zxid;
	}
	uint32_t id = zk_tree_child(&imp->st.tree, parent, (const char *)name.data,
				    (size_t)name.size);
	if (id == ZK_NODE_NONE) {
		imp->stats.txn_errors++;
		return KEEL_OK;
	}
	remove_subtree(imp, id);
	return KEEL_OK;
}

static enum keel_err op_set_data(struct txn_ctx *tx, struct zk_bytes path, struct zk_bytes data,
				 int32_t version)
{
	struct zk_import *imp = tx->imp;
	uint32_t id = lookup(imp, path);
	if (id == ZK_NODE_NONE) {
		imp->stats.txn_errors++;
		return KEEL_OK;
	}
	if (!fits_limits(imp, ZK_BYTES_NULL, data)) {
		return refuse(tx->err, tx->offset, "node data is larger than keel's packet size limit",
			      tx->zxid);
	}
	enum keel_err rc = replace_data(imp, id, data);
	if (rc != KEEL_OK) {
		return rc;
	}
	struct zk_node *n = node_at(imp, id);
	n->version = version;
	n->mzxid = tx->zxid;
	n->mtime = tx->time_ms;
	return KEEL_OK;
}

static enum keel_err op_set_acl(struct txn_ctx *tx, struct zk_bytes path, struct zk_acl_vec acl,
				int32_t version)
{
	struct zk_import *imp = tx->imp;
	if (acl.count <= 0 || acl.count > ZK_ACL_MAX_ENTRIES) {
		return refuse(tx->err, tx->offset, "setACL txn with an empty or too long ACL",
			      tx->zxid);
	}
	uint32_t id = lookup(imp, path);
	if (id == ZK_NODE_NONE) {
		imp->stats.txn_errors++;
		return KEEL_OK;
	}
	uint32_t acl_id = zk_acl_table_intern(&imp->st.acls, acl);
	if (acl_id == ZK_ACL_NONE) {
		return KEEL_NOMEM;
	}
	set_acl_id(imp, id, acl_id);
	node_at(imp, id)->aversion = version;
	return KEEL_OK;
}

/* closeSession: the txn lists the session's ephemerals (3.6+); ephemerals
 * it does not list are dropped at finish like every other. */
static enum keel_err op_close_session(struct txn_ctx *tx, struct zk_str_vec paths)
{
	struct zk_str_iter it;
	struct zk_bytes path;
	zk_str_iter_init(&it, paths);
	while (zk_str_iter_next(&it, &path)) {
		if (zk_bytes_is_null(path)) {
			continue;
		}
		enum keel_err rc = op_delete(tx, path);
		if (rc != KEEL_OK) {
			return rc;
		}
	}
	return KEEL_OK;
}

static enum keel_err apply_op(struct txn_ctx *tx, int32_t type, struct keel_rbuf *r,
			      bool in_multi);

/* MultiTxn: vector<Txn {int type, buffer data}>. If any sub-txn is an
 * error, the multi failed and nothing of it applies. */
static enum keel_err op_multi(struct txn_ctx *tx, struct keel_rbuf *r)
{
	int32_t count = zk_read_count(r, 8);
	if (!keel_rbuf_ok(r) || count < 0) {
		return refuse(tx->err, tx->offset, "malformed multi txn", tx->zxid);
	}
	size_t start = r->pos;
	bool failed = false;
	for (int32_t i = 0; i < count; i++) {
		int32_t type = keel_rbuf_i32(r);
		(void)zk_read_bytes(r);
		failed = failed || type == ZK_OP_ERROR;
	}
	if (!keel_rbuf_ok(r)) {
		return refuse(tx->err, tx->offset, "malformed multi txn", tx->zxid);
	}
	if (failed) {
		return KEEL_OK;
	}
	size_t end = r->pos;
	r->pos = start;
	for (int32_t i = 0; i < count; i++) {
		int32_t type = keel_rbuf_i32(r);
		struct zk_bytes data = zk_read_bytes(r);
		struct keel_rbuf sub;
		keel_rbuf_init(&sub, data.data, zk_bytes_len(data));
		enum keel_err rc = apply_op(tx, type, &sub, true);
		if (rc != KEEL_OK) {
			return rc;
		}
		if (!keel_rbuf_done(&sub)) {
			return refuse(tx->err, tx->offset, "malformed sub-txn in a multi txn", type);
		}
	}
	KEEL_ASSERT(r->pos == end);
	return KEEL_OK;
}

/* CreateTxn (create, create2), CreateTTLTxn, CreateContainerTxn. */
static enum keel_err apply_create(struct txn_ctx *tx, int32_t type, struct keel_rbuf *r)
{
	struct zk_bytes path = zk_read_bytes(r);
	struct zk_bytes data = zk_read_bytes(r);
	struct zk_acl_vec acl = zk_read_acl_vec(r);
	int64_t owner = 0;
	if (type == ZK_OP_CREATE || type == ZK_OP_CREATE2) {
		owner = keel_rbuf_bool(r) ? tx->session : 0;
	}
	int32_t parent_cversion = keel_rbuf_i32(r);
	if (type == ZK_OP_CREATE_TTL) {
		int64_t ttl = keel_rbuf_i64(r);
		if (keel_rbuf_ok(r) && (ttl <= 0 || ttl > ZK_TTL_MAX_MS)) {
			return refuse(tx->err, tx->offset, "TTL out of range", ttl);
		}
		owner = zk_owner_for_ttl(ttl);
	} else if (type == ZK_OP_CREATE_CONTAINER) {
		owner = ZK_OWNER_CONTAINER;
	}
	if (!keel_rbuf_ok(r)) {
		return refuse(tx->err, tx->offset, "malformed create txn", tx->zxid);
	}
	return op_create(tx, type, path, data, acl, owner, parent_cversion);
}

/* The sub-txn types a multi may hold (DataTree.processTxn). */
static bool multi_allows(int32_t type)
{
	switch (type) {
	case ZK_OP_CREATE:
	case ZK_OP_CREATE2:
	case ZK_OP_CREATE_TTL:
	case ZK_OP_CREATE_CONTAINER:
	case ZK_OP_DELETE:
	case ZK_OP_DELETE_CONTAINER:
	case ZK_OP_SET_DATA:
	case ZK_OP_CHECK:
	case ZK_OP_ERROR:
		return true;
	default:
		return false;
	}
}

static enum keel_err apply_op(struct txn_ctx *tx, int32_t type, struct keel_rbuf *r, bool in_multi)
{
	if (in_multi && !multi_allows(type)) {
		return refuse(tx->err, tx->offset, "sub-txn type not allowed in a multi txn", type);
	}
	switch (type) {
	case ZK_OP_CREATE:
	case ZK_OP_CREATE2:
	case ZK_OP_CREATE_TTL:
	case ZK_OP_CREATE_CONTAINER:
		return apply_create(tx, type, r);
	case ZK_OP_DELETE:
	case ZK_OP_DELETE_CONTAINER: {
		struct zk_bytes path = zk_read_bytes(r);
		if (!keel_rbuf_ok(r)) {
			return refuse(tx->err, tx->offset, "malformed delete txn", tx->zxid);
		}
		return op_delete(tx, path);
	}
	case ZK_OP_SET_DATA:
	case ZK_OP_RECONFIG: {
		struct zk_bytes path = zk_read_bytes(r);
		struct zk_bytes data = zk_read_bytes(r);
		int32_t version = keel_rbuf_i32(r);
		if (!keel_rbuf_ok(r)) {
			return refuse(tx->err, tx->offset, "malformed setData txn", tx->zxid);
		}
		return op_set_data(tx, path, data, version);
	}
	case ZK_OP_SET_ACL: {
		struct zk_bytes path = zk_read_bytes(r);
		struct zk_acl_vec acl = zk_read_acl_vec(r);
		int32_t version = keel_rbuf_i32(r);
		if (!keel_rbuf_ok(r)) {
			return refuse(tx->err, tx->offset, "malformed setACL txn", tx->zxid);
		}
		return op_set_acl(tx, path, acl, version);
	}
	case ZK_OP_CHECK:
		(void)zk_read_bytes(r);
		(void)keel_rbuf_i32(r);
		break;
	case ZK_OP_ERROR:
	case ZK_OP_CREATE_SESSION:
		(void)keel_rbuf_i32(r); /* the error code; the session timeout */
		break;
	case ZK_OP_CLOSE_SESSION: {
		/* CloseSessionTxn {vector<ustring>}; absent before 3.6. */
		size_t start = r->pos;
		struct zk_str_vec paths = zk_read_str_vec(r);
		size_t left = keel_rbuf_remaining(r);
		if (keel_rbuf_ok(r) && paths.count >= 0 && (left == 0 || left == TXN_DIGEST_SIZE)) {
			return op_close_session(tx, paths);
		}
		r->failed = false;
		r->pos = start;
		return KEEL_OK;
	}
	case ZK_OP_MULTI:
		return op_multi(tx, r);
	default:
		return refuse(tx->err, tx->offset, "unsupported txn type", type);
	}
	if (!keel_rbuf_ok(r)) {
		return refuse(tx->err, tx->offset, "malformed txn record", type);
	}
	return KEEL_OK;
}

/* One txn: TxnHeader, record, optional TxnDigest. */
static enum keel_err apply_txn(struct zk_import *imp, const uint8_t *bytes, size_t size,
			       uint64_t offset, struct zk_import_error *err)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, bytes, size);
	struct txn_ctx tx = {imp, err, offset, 0, 0, 0};
	tx.session = keel_rbuf_i64(&r);
	(void)keel_rbuf_i32(&r); /* cxid */
	tx.zxid = keel_rbuf_i64(&r);
	tx.time_ms = keel_rbuf_i64(&r);
	int32_t type = keel_rbuf_i32(&r);
	if (!keel_rbuf_ok(&r)) {
		return refuse(err, offset, "txn is shorter than its header", 0);
	}
	imp->stats.txns_read++;
	if (tx.zxid <= imp->last_zxid) {
		imp->stats.txns_ignored++;
		return KEEL_OK;
	}
	uint64_t last = (uint64_t)imp->last_zxid;
	uint64_t zxid = (uint64_t)tx.zxid;
	if (zxid != last + 1 && (zxid >> 32) <= (last >> 32)) {
		return refuse(err, offset,
			      "txn zxid leaves a gap after the last one applied "
			      "(a log file is missing)",
			      tx.zxid);
	}
	enum keel_err rc = apply_op(&tx, type, &r, false);
	if (rc != KEEL_OK) {
		return rc;
	}
	size_t left = keel_rbuf_remaining(&r);
	if (!keel_rbuf_ok(&r) || (left != 0 && left != TXN_DIGEST_SIZE)) {
		return refuse(err, offset, "unexpected bytes after the txn record", tx.zxid);
	}
	imp->last_zxid = tx.zxid;
	imp->stats.txns_applied++;
	return KEEL_OK;
}

/* Offset of the first nonzero byte in [from, size), or size. */
static size_t first_nonzero(const uint8_t *bytes, size_t from, size_t size)
{
	while (from < size && bytes[from] == 0) {
		from++;
	}
	return from;
}

enum keel_err zk_import_log(struct zk_import *imp, const uint8_t *bytes, size_t size,
			    struct zk_import_error *err)
{
	KEEL_ASSERT(imp->started);
	struct keel_rbuf r;
	keel_rbuf_init(&r, bytes, size);
	enum keel_err rc =
		read_file_header(&r, LOG_MAGIC, "not a ZooKeeper transaction log (bad magic)", err);
	if (rc != KEEL_OK) {
		return rc;
	}
	size_t pos = r.pos;
	for (;;) {
		size_t left = size - pos;
		if (left < RECORD_OVERHEAD ||
		    keel_load_be32(bytes + pos + 8) == 0) {
			/* The end: what follows must be preallocation padding. */
			size_t nz = first_nonzero(bytes, pos, size);
			if (nz < size && left >= RECORD_OVERHEAD) {
				return refuse(err, nz,
					      "nonzero byte in the preallocated padding after the "
					      "last txn",
					      bytes[nz]);
			}
			if (nz < size) {
				return refuse(err, pos, "partial txn record at the end of the log",
					      0);
			}
			return KEEL_OK;
		}
		uint64_t stored = keel_load_be64(bytes + pos);
		int32_t len = (int32_t)keel_load_be32(bytes + pos + 8);
		if (len < 0 || (size_t)len > left - RECORD_OVERHEAD) {
			return refuse(err, pos,
				      "txn record length runs past the end of the file "
				      "(torn or damaged)",
				      len);
		}
		const uint8_t *txn = bytes + pos + 12;
		if (stored != zk_import_adler32(1, txn, (size_t)len)) {
			return refuse(err, pos, "txn checksum (Adler-32) mismatch", (int64_t)stored);
		}
		if (txn[len] != 'B') {
			return refuse(err, pos + 12 + (size_t)len,
				      "txn record is not terminated by 'B'", txn[len]);
		}
		rc = apply_txn(imp, txn, (size_t)len, pos, err);
		if (rc != KEEL_OK) {
			return rc;
		}
		pos += 12 + (size_t)len + 1;
	}
}

/* ---- finish ---- */

struct eph_walk {
	struct keel_wbuf ids;
	zk_import_dropped_fn dropped;
	void *ctx;
	const struct zk_tree *tree;
};

static bool collect_ephemeral(void *ctx, uint32_t id, const uint8_t *path, size_t path_size,
			      uint32_t depth)
{
	(void)depth;
	struct eph_walk *w = ctx;
	const struct zk_node *n = zk_tree_node(w->tree, id);
	if (id == ZK_ROOT_ID || !is_session_ephemeral(n)) {
		return true;
	}
	keel_wbuf_u32(&w->ids, id);
	if (w->dropped != NULL) {
		w->dropped(w->ctx, path, path_size, n->ephemeral_owner);
	}
	return keel_wbuf_ok(&w->ids);
}

/* /zookeeper/config becomes keel's own: empty, world:anyone:READ, aversion
 * -1, zero stat (ZooKeeper's holds its ensemble's configuration). */
static enum keel_err reset_config_node(struct zk_import *imp)
{
	uint32_t zookeeper = lookup(imp, zk_bytes_str("/zookeeper"));
	if (zookeeper == ZK_NODE_NONE) {
		return KEEL_OK; /* not ZooKeeper's tree; nothing of ours to restore */
	}
	uint32_t old = lookup(imp, zk_bytes_str("/zookeeper/config"));
	if (old != ZK_NODE_NONE) {
		remove_subtree(imp, old);
	}
	uint32_t acl = zk_acl_table_intern(&imp->st.acls, zk_acl_read_unsafe());
	if (acl == ZK_ACL_NONE) {
		return KEEL_NOMEM;
	}
	struct zk_stat s;
	memset(&s, 0, sizeof(s));
	s.aversion = -1;
	struct zk_node *n = new_node(imp, zk_bytes_str("config"), zk_bytes_of("", 0), &s, acl);
	if (n == NULL || zk_tree_add(&imp->st.tree, zookeeper, n) == ZK_NODE_NONE) {
		if (n != NULL) {
			zk_tree_free(&imp->st.tree, n);
		}
		zk_acl_table_unref(&imp->st.acls, acl);
		return KEEL_NOMEM;
	}
	return KEEL_OK;
}

enum keel_err zk_import_finish(struct zk_import *imp, zk_import_dropped_fn dropped, void *ctx)
{
	KEEL_ASSERT(imp->started);
	struct eph_walk w;
	w.dropped = dropped;
	w.ctx = ctx;
	w.tree = &imp->st.tree;
	keel_wbuf_init_dynamic(&w.ids, 256, SIZE_MAX / 2);
	if (!zk_tree_walk(&imp->st.tree, ZK_ROOT_ID, &imp->path, collect_ephemeral, &w)) {
		keel_wbuf_free(&w.ids);
		return KEEL_NOMEM;
	}
	for (size_t i = 0; i + 4 <= w.ids.size; i += 4) {
		remove_leaf(imp, keel_load_be32(w.ids.data + i));
		imp->stats.ephemerals_dropped++;
	}
	keel_wbuf_free(&w.ids);
	enum keel_err rc = reset_config_node(imp);
	if (rc != KEEL_OK) {
		return rc;
	}
	/* The loader's references on the snapshot's ACL lists. */
	for (uint32_t i = 0; i < imp->acl_count; i++) {
		zk_acl_table_unref(&imp->st.acls, imp->acls[i].id);
	}
	imp->acl_count = 0;
	zk_acl_table_collect(&imp->st.acls);
	struct zk_state *st = &imp->st;
	st->last_zxid = imp->last_zxid > 0 ? (uint64_t)imp->last_zxid : 0;
	bool ok;
	st->digest_nodes = zk_state_digest_nodes_full(st, &ok);
	st->digest_sessions = zk_state_digest_sessions_full(st);
	return ok ? KEEL_OK : KEEL_NOMEM;
}
