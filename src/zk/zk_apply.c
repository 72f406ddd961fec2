/*
 * zk_apply.c — ZooKeeper write semantics: one committed txn in, the state
 * change, the reply and the watch triggers out (see zk_state.h).
 *
 * The checks of each op run in ZooKeeper's order (PrepRequestProcessor),
 * because the first failing check decides the error a client sees:
 *
 *   create   mode/TTL -> session -> path has '/' and no NUL -> ACL list
 *            -> parent exists -> CREATE on parent -> final path valid
 *            -> node absent -> parent not ephemeral
 *   delete   session -> '/' and no NUL and not a system node -> parent
 *            exists -> DELETE on parent -> node exists -> version -> empty
 *   setData  session -> path valid -> node exists -> WRITE -> version
 *   setACL   session -> path valid -> ACL list -> node exists -> ADMIN
 *            -> aversion
 *   check    session -> path valid -> node exists -> READ -> version
 *
 * A multi runs its ops in order against the state as the earlier ops left
 * it; the first failure rolls everything back and the reply lists 0 for
 * the ops before it, its error, and RuntimeInconsistency after it, with
 * ReplyHeader.err 0 (what ZooKeeper puts on the wire).
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "zk/zk_housekeeping.h"
#include "zk/zk_mutate.h"
#include "zk/zk_path.h"
#include "zk/zk_state.h"

struct apply_ctx {
	struct zk_state *st;
	struct zk_result *res;
	int64_t zxid;
	int64_t time_ms;
	int64_t session_id;
	const struct zk_ids *ids;
	enum keel_err fatal; /* out of memory: the whole txn is rolled back */
};

/* Maps a failed mutation: a replicated limit is a client error, memory is
 * fatal for this server. */
static int32_t mutation_failed(struct apply_ctx *c, enum keel_err err)
{
	if (err == KEEL_LIMIT) {
		return ZK_QUOTA_EXCEEDED;
	}
	c->fatal = err;
	return ZK_SYSTEM_ERROR;
}

static bool session_alive(const struct apply_ctx *c)
{
	return zk_mut_session_find(c->st, c->session_id) != NULL;
}

static bool path_valid(struct zk_bytes path)
{
	return !zk_bytes_is_null(path) &&
	       zk_path_validate((const char *)path.data, (size_t)path.size, NULL);
}

static bool system_path(struct zk_bytes path)
{
	return zk_bytes_eq_str(path, "/") || zk_bytes_eq_str(path, "/zookeeper") ||
	       zk_bytes_eq_str(path, "/zookeeper/quota") ||
	       zk_bytes_eq_str(path, "/zookeeper/config");
}

static bool version_ok(int32_t current, int32_t expected)
{
	return expected == -1 || expected == current;
}

static int32_t next_version(int32_t v)
{
	return (int32_t)((uint32_t)v + 1);
}

/* Checks the ACL list and interns it. Returns ZK_OK with *acl set. */
static int32_t fixup_and_intern(struct apply_ctx *c, struct zk_acl_vec in, uint32_t *acl)
{
	struct keel_wbuf *w = &c->st->acl_scratch;
	keel_wbuf_reset(w);
	int32_t count;
	int32_t rc = zk_acl_fixup(in, c->ids, w, &count);
	if (rc != ZK_OK) {
		return rc;
	}
	struct zk_acl_vec v = {count, w->data, (uint32_t)w->size};
	*acl = zk_acl_table_intern(&c->st->acls, v);
	if (*acl == ZK_ACL_NONE) {
		return mutation_failed(c, KEEL_NOMEM);
	}
	return ZK_OK;
}

static void write_stat_of(struct zk_state *st, struct keel_wbuf *out, uint32_t id)
{
	struct zk_stat stat;
	zk_state_stat(st, id, &stat);
	zk_write_stat(out, &stat);
}

/* ---- create ---- */

static int32_t create_validate_mode(int32_t opcode, const struct zk_create_request *req)
{
	if (!zk_create_mode_valid(req->flags)) {
		return ZK_BAD_ARGUMENTS;
	}
	if (zk_create_mode_ttl(req->flags)) {
		/* Only createTTL carries a TTL; others give -1, which fails. */
		if (req->ttl_ms <= 0 || req->ttl_ms > ZK_TTL_MAX_MS) {
			return ZK_BAD_ARGUMENTS;
		}
	} else if (opcode == ZK_OP_CREATE_TTL) {
		/* ZooKeeper: "ttl not valid for mode" (and a crash for ttl < 0). */
		return ZK_BAD_ARGUMENTS;
	}
	return ZK_OK;
}

static int64_t create_owner(const struct apply_ctx *c, int32_t opcode,
			    const struct zk_create_request *req)
{
	if (opcode == ZK_OP_CREATE_CONTAINER) {
		return ZK_OWNER_CONTAINER;
	}
	if (opcode == ZK_OP_CREATE_TTL) {
		return zk_owner_for_ttl(req->ttl_ms);
	}
	/* create/create2 with the CONTAINER flag make a plain node, as in
	 * ZooKeeper (its CreateTxn has no container bit). */
	return zk_create_mode_ephemeral(req->flags) ? c->session_id : 0;
}

/* Builds the final path (with the sequential suffix) in st->scratch. */
static struct zk_bytes create_final_path(struct apply_ctx *c, const struct zk_create_request *req,
					 const struct zk_node *parent)
{
	struct keel_wbuf *w = &c->st->scratch;
	keel_wbuf_reset(w);
	keel_wbuf_bytes(w, req->path.data, (size_t)req->path.size);
	if (zk_create_mode_sequential(req->flags)) {
		char seq[11];
		size_t n = zk_path_format_seq(seq, parent->cversion);
		keel_wbuf_bytes(w, seq, n);
	}
	if (!keel_wbuf_ok(w)) {
		c->fatal = KEEL_NOMEM;
		return ZK_BYTES_NULL;
	}
	return zk_bytes_of(w->data, w->size);
}

static int32_t op_create(struct apply_ctx *c, int32_t opcode, const struct zk_create_request *req,
			 struct keel_wbuf *out)
{
	struct zk_state *st = c->st;
	int32_t rc = create_validate_mode(opcode, req);
	if (rc != ZK_OK) {
		return rc;
	}
	if (!session_alive(c)) {
		return ZK_SESSION_EXPIRED;
	}
	if (zk_bytes_is_null(req->path)) {
		return ZK_MARSHALLING_ERROR;
	}
	const char *path = (const char *)req->path.data;
	size_t size = (size_t)req->path.size;
	ptrdiff_t slash = zk_path_last_slash(path, size);
	if (slash < 0 || zk_path_has_nul(path, size)) {
		return ZK_BAD_ARGUMENTS;
	}
	uint32_t acl;
	rc = fixup_and_intern(c, req->acl, &acl);
	if (rc != ZK_OK) {
		return rc;
	}
	uint32_t parent_id = zk_tree_lookup(&st->tree, path, (size_t)slash);
	if (parent_id == ZK_NODE_NONE) {
		rc = ZK_NO_NODE;
		goto release_acl;
	}
	const struct zk_node *parent = zk_tree_node(&st->tree, parent_id);
	if (!zk_acl_check(zk_acl_table_get(&st->acls, parent->acl), ZK_PERM_CREATE, c->ids)) {
		rc = ZK_NO_AUTH;
		goto release_acl;
	}
	struct zk_bytes final = create_final_path(c, req, parent);
	if (zk_bytes_is_null(final)) {
		rc = ZK_SYSTEM_ERROR;
		goto release_acl;
	}
	if (!zk_path_validate((const char *)final.data, (size_t)final.size, NULL)) {
		rc = ZK_BAD_ARGUMENTS;
		goto release_acl;
	}
	/* A full-path lookup, as ZooKeeper's: "/" finds the root. */
	if (zk_tree_lookup(&st->tree, (const char *)final.data, (size_t)final.size) !=
	    ZK_NODE_NONE) {
		rc = ZK_NODE_EXISTS;
		goto release_acl;
	}
	if (zk_owner_kind(parent->ephemeral_owner) == ZK_KIND_EPHEMERAL) {
		rc = ZK_NO_CHILDREN_FOR_EPHEMERALS;
		goto release_acl;
	}
	uint32_t id;
	enum keel_err err = zk_mut_create(st, c->res, parent_id, final, req->data, acl,
					  create_owner(c, opcode, req), c->zxid, c->time_ms, &id);
	if (err != KEEL_OK) {
		return mutation_failed(c, err); /* the acl reference is gone */
	}
	zk_write_bytes(out, final);
	if (opcode != ZK_OP_CREATE) {
		write_stat_of(st, out, id);
	}
	return ZK_OK;

release_acl:
	zk_acl_table_unref(&st->acls, acl);
	return rc;
}

/* ---- delete, setData, setACL, check ---- */

static int32_t op_delete(struct apply_ctx *c, const struct zk_delete_request *req)
{
	struct zk_state *st = c->st;
	if (!session_alive(c)) {
		return ZK_SESSION_EXPIRED;
	}
	if (zk_bytes_is_null(req->path)) {
		return ZK_MARSHALLING_ERROR;
	}
	const char *path = (const char *)req->path.data;
	size_t size = (size_t)req->path.size;
	ptrdiff_t slash = zk_path_last_slash(path, size);
	if (slash < 0 || zk_path_has_nul(path, size) || system_path(req->path)) {
		return ZK_BAD_ARGUMENTS;
	}
	uint32_t parent_id = zk_tree_lookup(&st->tree, path, (size_t)slash);
	if (parent_id == ZK_NODE_NONE) {
		return ZK_NO_NODE;
	}
	if (!zk_acl_check(zk_state_node_acl(st, parent_id), ZK_PERM_DELETE, c->ids)) {
		return ZK_NO_AUTH;
	}
	uint32_t id = zk_tree_lookup(&st->tree, path, size);
	if (id == ZK_NODE_NONE) {
		return ZK_NO_NODE;
	}
	const struct zk_node *n = zk_tree_node(&st->tree, id);
	if (!version_ok(n->version, req->version)) {
		return ZK_BAD_VERSION;
	}
	if (zk_tree_first_child(&st->tree, id) != ZK_NODE_NONE) {
		return ZK_NOT_EMPTY;
	}
	enum keel_err err = zk_mut_delete(st, c->res, id, req->path, c->zxid);
	return err == KEEL_OK ? ZK_OK : mutation_failed(c, err);
}

static int32_t op_set_data(struct apply_ctx *c, const struct zk_set_data_request *req,
			   struct keel_wbuf *out)
{
	struct zk_state *st = c->st;
	if (!session_alive(c)) {
		return ZK_SESSION_EXPIRED;
	}
	if (zk_bytes_is_null(req->path)) {
		return ZK_MARSHALLING_ERROR;
	}
	if (!path_valid(req->path)) {
		return ZK_BAD_ARGUMENTS;
	}
	uint32_t id = zk_state_lookup(st, req->path);
	if (id == ZK_NODE_NONE) {
		return ZK_NO_NODE;
	}
	if (!zk_acl_check(zk_state_node_acl(st, id), ZK_PERM_WRITE, c->ids)) {
		return ZK_NO_AUTH;
	}
	const struct zk_node *n = zk_tree_node(&st->tree, id);
	if (!version_ok(n->version, req->version)) {
		return ZK_BAD_VERSION;
	}
	enum keel_err err = zk_mut_set_data(st, c->res, id, req->path, req->data,
					    next_version(n->version), c->zxid, c->time_ms);
	if (err != KEEL_OK) {
		return mutation_failed(c, err);
	}
	write_stat_of(st, out, id);
	return ZK_OK;
}

static int32_t op_set_acl(struct apply_ctx *c, const struct zk_set_acl_request *req,
			  struct keel_wbuf *out)
{
	struct zk_state *st = c->st;
	if (!session_alive(c)) {
		return ZK_SESSION_EXPIRED;
	}
	if (zk_bytes_is_null(req->path)) {
		return ZK_MARSHALLING_ERROR;
	}
	if (!path_valid(req->path)) {
		return ZK_BAD_ARGUMENTS;
	}
	uint32_t acl;
	int32_t rc = fixup_and_intern(c, req->acl, &acl);
	if (rc != ZK_OK) {
		return rc;
	}
	uint32_t id = zk_state_lookup(st, req->path);
	if (id == ZK_NODE_NONE) {
		rc = ZK_NO_NODE;
	} else if (!zk_acl_check(zk_state_node_acl(st, id), ZK_PERM_ADMIN, c->ids)) {
		rc = ZK_NO_AUTH;
	} else if (!version_ok(zk_tree_node(&st->tree, id)->aversion, req->version)) {
		rc = ZK_BAD_VERSION;
	}
	if (rc != ZK_OK) {
		zk_acl_table_unref(&st->acls, acl);
		return rc;
	}
	int32_t aversion = next_version(zk_tree_node(&st->tree, id)->aversion);
	enum keel_err err = zk_mut_set_acl(st, id, req->path, acl, aversion);
	if (err == KEEL_OK) {
		/* For the change feed only: zk_watches_fire skips it. */
		err = zk_mut_trigger(c->res, ZK_EVENT_KEEL_ACL_CHANGED, acl, req->path);
	}
	if (err != KEEL_OK) {
		return mutation_failed(c, err);
	}
	write_stat_of(st, out, id);
	return ZK_OK;
}

static int32_t op_check(struct apply_ctx *c, const struct zk_check_request *req)
{
	struct zk_state *st = c->st;
	if (!session_alive(c)) {
		return ZK_SESSION_EXPIRED;
	}
	if (zk_bytes_is_null(req->path)) {
		return ZK_MARSHALLING_ERROR;
	}
	if (!path_valid(req->path)) {
		return ZK_BAD_ARGUMENTS;
	}
	uint32_t id = zk_state_lookup(st, req->path);
	if (id == ZK_NODE_NONE) {
		return ZK_NO_NODE;
	}
	if (!zk_acl_check(zk_state_node_acl(st, id), ZK_PERM_READ, c->ids)) {
		return ZK_NO_AUTH;
	}
	if (!version_ok(zk_tree_node(&st->tree, id)->version, req->version)) {
		return ZK_BAD_VERSION;
	}
	return ZK_OK;
}

/* ---- multi ---- */

static int32_t multi_result_type(int32_t opcode)
{
	switch (opcode) {
	case ZK_OP_CREATE2:
	case ZK_OP_CREATE_CONTAINER:
	case ZK_OP_CREATE_TTL:
		return ZK_OP_CREATE2;
	default:
		return opcode;
	}
}

/* Runs one op of a multi, writing its result (header included) to `out`. */
static int32_t multi_op(struct apply_ctx *c, const struct zk_multi_op *op, struct keel_wbuf *out)
{
	size_t mark = out->size;
	zk_multi_result_header(out, multi_result_type(op->opcode), 0);
	int32_t rc;
	switch (op->opcode) {
	case ZK_OP_CREATE:
	case ZK_OP_CREATE2:
	case ZK_OP_CREATE_CONTAINER:
	case ZK_OP_CREATE_TTL:
		rc = op_create(c, op->opcode, &op->u.create, out);
		break;
	case ZK_OP_DELETE:
		rc = op_delete(c, &op->u.delete_);
		break;
	case ZK_OP_SET_DATA:
		rc = op_set_data(c, &op->u.set_data, out);
		break;
	case ZK_OP_CHECK:
		rc = op_check(c, &op->u.check);
		break;
	default:
		KEEL_UNREACHABLE(); /* the decoder admits only the ops above */
	}
	if (rc != ZK_OK) {
		out->size = mark;
	}
	return rc;
}

static void multi_error_list(struct keel_wbuf *out, uint32_t count, uint32_t failed, int32_t err)
{
	for (uint32_t i = 0; i < count; i++) {
		int32_t e = i < failed ? ZK_ROLLED_BACK : i == failed ? err : ZK_RUNTIME_INCONSISTENCY;
		zk_multi_result_error(out, e);
	}
	zk_multi_result_end(out);
}

static void apply_multi(struct apply_ctx *c, const struct zk_multi_request *m)
{
	struct zk_state *st = c->st;
	struct zk_result *res = c->res;
	struct keel_wbuf *out = &st->multi;
	keel_wbuf_reset(out);
	struct zk_multi_iter it;
	struct zk_multi_op op;
	zk_multi_iter_init(&it, m);
	uint32_t index = 0;
	int32_t rc = ZK_OK;
	while (zk_multi_iter_next(&it, &op)) {
		rc = multi_op(c, &op, out);
		if (rc != ZK_OK || c->fatal != KEEL_OK) {
			break;
		}
		index++;
	}
	if (c->fatal != KEEL_OK) {
		return;
	}
	if (rc == ZK_MARSHALLING_ERROR) {
		/* ZooKeeper fails the whole request (no result list). */
		zk_mut_rollback(st, res);
		res->err = rc;
		return;
	}
	if (rc != ZK_OK) {
		zk_mut_rollback(st, res);
		multi_error_list(&res->body, m->count, index, rc);
		return;
	}
	zk_multi_result_end(out);
	if (keel_wbuf_ok(out)) {
		keel_wbuf_bytes(&res->body, out->data, out->size);
	} else {
		res->body.failed = true; /* reported as MarshallingError */
	}
	zk_mut_commit(st);
}

/* ---- sessions ---- */

struct eph_entry {
	struct zk_path_span path; /* in st->scratch; first, for zk_path_spans_sort */
	uint32_t id;
};

/* Deletes the session's ephemerals (sorted by path) and the session. */
static enum keel_err close_session(struct apply_ctx *c, struct zk_session *s)
{
	struct zk_state *st = c->st;
	struct keel_wbuf *paths = &st->scratch;
	keel_wbuf_reset(paths);
	struct eph_entry *entries = NULL;
	enum keel_err err = KEEL_OK;
	uint32_t count = s->eph_count;
	if (count > 0) {
		entries = malloc(count * sizeof(*entries));
		if (entries == NULL) {
			return KEEL_NOMEM;
		}
		uint32_t id = s->eph_head;
		for (uint32_t i = 0; i < count; i++) {
			entries[i].id = id;
			entries[i].path.offset = (uint32_t)paths->size;
			zk_tree_path(&st->tree, id, paths);
			entries[i].path.size = (uint32_t)(paths->size - entries[i].path.offset);
			id = zk_tree_node(&st->tree, id)->u.eph.next;
		}
		if (!keel_wbuf_ok(paths)) {
			free(entries);
			return KEEL_NOMEM;
		}
		/* Sorted by path: the order makes the trigger sequence identical on
		 * every server whatever its ring order. */
		st->sort_compares +=
			zk_path_spans_sort(entries, count, sizeof(*entries), paths->data);
	}
	for (uint32_t i = 0; i < count && err == KEEL_OK; i++) {
		struct zk_bytes path =
			zk_bytes_of(paths->data + entries[i].path.offset, entries[i].path.size);
		err = zk_mut_delete(st, c->res, entries[i].id, path, c->zxid);
	}
	free(entries);
	if (err == KEEL_OK) {
		err = zk_mut_session_remove(st, s);
	}
	if (err == KEEL_OK) {
		c->res->closed_session_id = s->id;
	}
	return err;
}

static void apply_close_session(struct apply_ctx *c)
{
	struct zk_session *s = zk_mut_session_find(c->st, c->session_id);
	if (s == NULL) {
		/* Already gone: ZooKeeper answers a late closeSession with OK. */
		return;
	}
	enum keel_err err = close_session(c, s);
	if (err != KEEL_OK) {
		c->fatal = err;
		return;
	}
	zk_mut_commit(c->st);
}

#ifdef KEEL_PLANT_BUG_EXPIRE_NO_EPHEMERAL_DELETE
/* PLANTED BUG (simulator only: build/keel-sim-bug-expire-no-ephemeral-delete;
 * tests/sim catches it): an expired session leaves the session table but
 * its ephemeral nodes stay, owned by a session that no longer exists (the
 * code that meets such a node below tolerates the missing owner). */
static void apply_expire_session(struct apply_ctx *c)
{
	struct zk_session *s = zk_mut_session_find(c->st, c->session_id);
	if (s == NULL) {
		return;
	}
	s->eph_head = ZK_NODE_NONE;
	s->eph_count = 0;
	enum keel_err err = zk_mut_session_remove(c->st, s);
	if (err != KEEL_OK) {
		c->fatal = err;
		return;
	}
	c->res->closed_session_id = c->session_id;
	zk_mut_commit(c->st);
}
#endif

static void apply_create_session(struct apply_ctx *c, const struct zk_txn *txn)
{
	int64_t id = txn->meta.session_id != 0 ? txn->meta.session_id : c->zxid;
	enum keel_err err = zk_mut_session_add(c->st, id, txn->timeout_ms, txn->passwd);
	if (err == KEEL_EXIST || err == KEEL_LIMIT) {
		/* The connect is refused like an expired session (timeOut 0). */
		c->res->err = ZK_SESSION_EXPIRED;
		return;
	}
	if (err != KEEL_OK) {
		c->fatal = err;
		return;
	}
	zk_mut_commit(c->st);
	c->res->session_id = id;
	c->res->new_session_id = id;
	c->res->new_session_timeout_ms = txn->timeout_ms;
	memcpy(c->res->new_session_passwd, txn->passwd, ZK_PASSWD_SIZE);
}

/* ---- housekeeping ---- */

static void apply_housekeeping(struct apply_ctx *c, const struct zk_txn *txn)
{
	struct zk_state *st = c->st;
	uint32_t id = zk_state_lookup(st, txn->path);
	if (id == ZK_NODE_NONE) {
		c->res->err = ZK_NO_NODE;
		return;
	}
	if (zk_tree_first_child(&st->tree, id) != ZK_NODE_NONE) {
		c->res->err = ZK_NOT_EMPTY;
		return;
	}
	/* The leader's rule again, at the stamped time: a stale proposal
	 * (touched, re-used, replaced by another kind) changes nothing. */
	enum zk_txn_kind kind;
	if (!zk_housekeeping_due(st, id, c->time_ms, &kind) || kind != txn->kind) {
		c->res->err = ZK_BAD_VERSION;
		return;
	}
	enum keel_err err = zk_mut_delete(st, c->res, id, txn->path, c->zxid);
	if (err != KEEL_OK) {
		c->fatal = err;
		return;
	}
	zk_mut_commit(st);
}

/* ---- requests ---- */

static void apply_single(struct apply_ctx *c, const struct zk_request *req)
{
	struct keel_wbuf *out = &c->res->body;
	int32_t rc;
	switch (req->opcode) {
	case ZK_OP_CREATE:
	case ZK_OP_CREATE2:
	case ZK_OP_CREATE_CONTAINER:
	case ZK_OP_CREATE_TTL:
		rc = op_create(c, req->opcode, &req->u.create, out);
		break;
	case ZK_OP_DELETE:
		rc = op_delete(c, &req->u.delete_);
		break;
	case ZK_OP_SET_DATA:
		rc = op_set_data(c, &req->u.set_data, out);
		break;
	case ZK_OP_SET_ACL:
		rc = op_set_acl(c, &req->u.set_acl, out);
		break;
	case ZK_OP_CHECK:
		rc = op_check(c, &req->u.check);
		break;
	default:
		KEEL_UNREACHABLE();
	}
	if (c->fatal != KEEL_OK) {
		return;
	}
	if (rc != ZK_OK) {
		zk_mut_rollback(c->st, c->res);
		keel_wbuf_reset(out);
		c->res->err = rc;
		return;
	}
	zk_mut_commit(c->st);
}

static void apply_request(struct apply_ctx *c, const struct zk_txn *txn)
{
	struct zk_request req;
	req.xid = txn->meta.xid;
	enum keel_err err = zk_request_decode_body(&req, txn->opcode, txn->body, txn->body_size);
	if (err != KEEL_OK) {
		c->res->err = err == KEEL_UNSUPPORTED ? ZK_UNIMPLEMENTED : ZK_MARSHALLING_ERROR;
		return;
	}
	switch (txn->opcode) {
	case ZK_OP_CREATE:
	case ZK_OP_CREATE2:
	case ZK_OP_CREATE_CONTAINER:
	case ZK_OP_CREATE_TTL:
	case ZK_OP_DELETE:
	case ZK_OP_SET_DATA:
	case ZK_OP_SET_ACL:
	case ZK_OP_CHECK:
		apply_single(c, &req);
		break;
	case ZK_OP_MULTI:
		apply_multi(c, &req.u.multi);
		break;
	case ZK_OP_CLOSE_SESSION:
		apply_close_session(c);
		break;
	default:
		/* Not a write: the server should not have proposed it. */
		c->res->err = ZK_UNIMPLEMENTED;
		break;
	}
}

enum keel_err zk_apply(struct zk_state *st, uint64_t zxid, const void *data, size_t size,
		       struct zk_result *res)
{
	KEEL_ASSERT(zxid > st->last_zxid);
	KEEL_ASSERT(zxid <= INT64_MAX);
	zk_result_reset(res);
	zk_acl_table_collect(&st->acls);
	struct zk_txn txn;
	enum keel_err err = zk_txn_decode(&txn, data, size);
	if (err != KEEL_OK) {
		return err;
	}
	res->kind = txn.kind;
	res->opcode = txn.kind == ZK_TXN_REQUEST ? txn.opcode : 0;
	res->session_id = txn.meta.session_id;
	res->origin = txn.meta.origin;
	res->xid = txn.meta.xid;
	res->zxid = (int64_t)zxid;
	struct apply_ctx c = {st, res, (int64_t)zxid, txn.meta.time_ms, txn.meta.session_id,
			      &txn.ids, KEEL_OK};
	zk_mut_begin(st, res);
	switch (txn.kind) {
	case ZK_TXN_REQUEST:
		apply_request(&c, &txn);
		break;
	case ZK_TXN_CREATE_SESSION:
		apply_create_session(&c, &txn);
		break;
	case ZK_TXN_CLOSE_SESSION:
#ifdef KEEL_PLANT_BUG_EXPIRE_NO_EPHEMERAL_DELETE
		if (txn.reason == ZK_CLOSE_EXPIRED) {
			apply_expire_session(&c);
			break;
		}
#endif
		apply_close_session(&c);
		break;
	case ZK_TXN_DELETE_CONTAINER:
	case ZK_TXN_DELETE_TTL:
		apply_housekeeping(&c, &txn);
		break;
	}
	if (c.fatal != KEEL_OK) {
		zk_mut_rollback(st, res);
		keel_wbuf_reset(&res->body);
		return c.fatal;
	}
	KEEL_ASSERT(st->undo_count == 0);
	if (!keel_wbuf_ok(&res->body)) {
		/* The reply outgrew max_reply_size; the change stands. */
		keel_wbuf_reset(&res->body);
		res->err = ZK_MARSHALLING_ERROR;
	}
	st->last_zxid = zxid;
	return KEEL_OK;
}

/* ---- system writes ---- */

void zk_system_begin(struct zk_state *st, struct zk_result *res, uint64_t zxid, int64_t time_ms)
{
	KEEL_ASSERT(zxid >= st->last_zxid);
	zk_result_reset(res);
	zk_acl_table_collect(&st->acls);
	res->zxid = (int64_t)zxid;
	st->sys_zxid = zxid;
	st->sys_time_ms = time_ms;
	st->last_zxid = zxid;
}

static enum keel_err system_path_ok(const char *path, size_t size)
{
	if (size < 2 || !zk_path_validate(path, size, NULL)) {
		return KEEL_INVAL;
	}
	return KEEL_OK;
}

/* Creates `path` (parent must exist), interning `acl` for it. */
static enum keel_err system_create(struct zk_state *st, struct zk_result *res,
				   struct zk_bytes path, struct zk_bytes data,
				   struct zk_acl_vec acl, uint32_t *id)
{
	ptrdiff_t slash = zk_path_last_slash((const char *)path.data, (size_t)path.size);
	uint32_t parent = zk_tree_lookup(&st->tree, (const char *)path.data, (size_t)slash);
	if (parent == ZK_NODE_NONE) {
		return KEEL_NOENT;
	}
	if (zk_owner_kind(zk_tree_node(&st->tree, parent)->ephemeral_owner) == ZK_KIND_EPHEMERAL) {
		return KEEL_INVAL;
	}
	uint32_t acl_id = zk_acl_table_intern(&st->acls, acl);
	if (acl_id == ZK_ACL_NONE) {
		return KEEL_NOMEM;
	}
	return zk_mut_create(st, res, parent, path, data, acl_id, 0, (int64_t)st->sys_zxid,
			     st->sys_time_ms, id);
}

static enum keel_err system_put(struct zk_state *st, struct zk_result *res, struct zk_bytes path,
				struct zk_bytes data, struct zk_acl_vec acl, unsigned flags)
{
	uint32_t id = zk_state_lookup(st, path);
	if (id != ZK_NODE_NONE) {
		const struct zk_node *n = zk_tree_node(&st->tree, id);
		return zk_mut_set_data(st, res, id, path, data, next_version(n->version),
				       (int64_t)st->sys_zxid, st->sys_time_ms);
	}
	if ((flags & ZK_SYSTEM_PARENTS) != 0) {
		/* Create each missing ancestor, top down. */
		for (size_t i = 1; i < (size_t)path.size; i++) {
			if (path.data[i] != '/') {
				continue;
			}
			struct zk_bytes prefix = zk_bytes_of(path.data, i);
			if (zk_state_lookup(st, prefix) != ZK_NODE_NONE) {
				continue;
			}
			uint32_t pid;
			enum keel_err err = system_create(st, res, prefix, zk_bytes_of("", 0), acl, &pid);
			if (err != KEEL_OK) {
				return err;
			}
		}
	}
	return system_create(st, res, path, data, acl, &id);
}

enum keel_err zk_system_put(struct zk_state *st, struct zk_result *res, const char *path,
			    size_t path_size, const void *data, size_t data_size,
			    struct zk_acl_vec acl, unsigned flags)
{
	enum keel_err err = system_path_ok(path, path_size);
	if (err != KEEL_OK) {
		return err;
	}
	if (acl.count <= 0) {
		return KEEL_INVAL;
	}
	if (data_size > st->config.max_packet_size) {
		return KEEL_TOOBIG; /* what a client could not write either */
	}
	zk_mut_begin(st, res);
	err = system_put(st, res, zk_bytes_of(path, path_size), zk_bytes_of(data, data_size), acl,
			 flags);
	if (err != KEEL_OK) {
		zk_mut_rollback(st, res);
		return err;
	}
	zk_mut_commit(st);
	return KEEL_OK;
}

struct subtree {
	uint32_t *ids;
	uint32_t count;
	uint32_t capacity;
	bool failed;
};

static bool collect_visit(void *ctx, uint32_t id, const uint8_t *path, size_t size, uint32_t depth)
{
	(void)path;
	(void)size;
	(void)depth;
	struct subtree *s = ctx;
	if (s->count == s->capacity) {
		uint32_t cap = s->capacity == 0 ? 64 : s->capacity * 2;
		uint32_t *ids = realloc(s->ids, cap * sizeof(*ids));
		if (ids == NULL) {
			s->failed = true;
			return false;
		}
		s->ids = ids;
		s->capacity = cap;
	}
	s->ids[s->count++] = id;
	return true;
}

/* Deletes the subtree at `id`, deepest nodes first (reverse pre-order). */
static enum keel_err system_delete_tree(struct zk_state *st, struct zk_result *res, uint32_t id)
{
	struct subtree s = {NULL, 0, 0, false};
	struct keel_wbuf *path = &st->scratch;
	if (!zk_tree_walk(&st->tree, id, path, collect_visit, &s) || s.failed) {
		free(s.ids);
		return KEEL_NOMEM;
	}
	enum keel_err err = KEEL_OK;
	for (uint32_t i = s.count; i-- > 0 && err == KEEL_OK;) {
		keel_wbuf_reset(path);
		zk_tree_path(&st->tree, s.ids[i], path);
		if (!keel_wbuf_ok(path)) {
			err = KEEL_NOMEM;
			break;
		}
		err = zk_mut_delete(st, res, s.ids[i], zk_bytes_of(path->data, path->size),
				    (int64_t)st->sys_zxid);
	}
	free(s.ids);
	return err;
}

enum keel_err zk_system_delete(struct zk_state *st, struct zk_result *res, const char *path,
			       size_t path_size, bool recursive)
{
	enum keel_err err = system_path_ok(path, path_size);
	if (err != KEEL_OK) {
		return err;
	}
	struct zk_bytes p = zk_bytes_of(path, path_size);
	if (system_path(p)) {
		return KEEL_INVAL;
	}
	uint32_t id = zk_state_lookup(st, p);
	if (id == ZK_NODE_NONE) {
		return KEEL_NOENT;
	}
	if (!recursive && zk_tree_first_child(&st->tree, id) != ZK_NODE_NONE) {
		return KEEL_EXIST;
	}
	zk_mut_begin(st, res);
	err = system_delete_tree(st, res, id);
	if (err != KEEL_OK) {
		zk_mut_rollback(st, res);
		return err;
	}
	zk_mut_commit(st);
	return KEEL_OK;
}
