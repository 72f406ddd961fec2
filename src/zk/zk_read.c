/* zk_read.c — local reads, the opcode classifier, auth (see zk_read.h). */
#include "zk/zk_read.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "zk/zk_digest.h"
#include "zk/zk_mutate.h"
#include "zk/zk_path.h"
#include "zk/zk_tree.h"

enum zk_op_class zk_op_classify(int32_t opcode)
{
	switch (opcode) {
	case ZK_OP_EXISTS:
	case ZK_OP_GET_DATA:
	case ZK_OP_GET_ACL:
	case ZK_OP_GET_CHILDREN:
	case ZK_OP_GET_CHILDREN2:
	case ZK_OP_GET_ALL_CHILDREN_NUMBER:
	case ZK_OP_GET_EPHEMERALS:
	case ZK_OP_MULTI_READ:
	case ZK_OP_CHECK_WATCHES:
	case ZK_OP_REMOVE_WATCHES:
	case ZK_OP_SET_WATCHES:
	case ZK_OP_SET_WATCHES2:
	case ZK_OP_ADD_WATCH:
	case ZK_OP_WHO_AM_I:
		return ZK_CLASS_READ;
	case ZK_OP_CREATE:
	case ZK_OP_CREATE2:
	case ZK_OP_CREATE_CONTAINER:
	case ZK_OP_CREATE_TTL:
	case ZK_OP_DELETE:
	case ZK_OP_SET_DATA:
	case ZK_OP_SET_ACL:
	case ZK_OP_CHECK:
	case ZK_OP_MULTI:
		return ZK_CLASS_WRITE;
	case ZK_OP_SYNC:
		return ZK_CLASS_SYNC;
	case ZK_OP_PING:
		return ZK_CLASS_PING;
	case ZK_OP_AUTH:
		return ZK_CLASS_AUTH;
	case ZK_OP_CLOSE_SESSION:
		return ZK_CLASS_CLOSE;
	case ZK_OP_RECONFIG:
	case ZK_OP_SASL:
	case ZK_OP_DELETE_CONTAINER:
		return ZK_CLASS_REFUSE;
	default:
		return ZK_CLASS_UNKNOWN;
	}
}

int32_t zk_op_refusal(int32_t opcode)
{
	switch (opcode) {
	case ZK_OP_RECONFIG:
		return ZK_RECONFIG_DISABLED; /* reconfigEnabled=false, the default */
	case ZK_OP_SASL:
		return ZK_AUTH_FAILED;       /* no SASL server configured */
	case ZK_OP_DELETE_CONTAINER:
		return ZK_BAD_ARGUMENTS;     /* leader housekeeping only */
	default:
		return ZK_UNIMPLEMENTED;
	}
}

/* ---- single reads ---- */

static bool readable(const struct zk_read_ctx *c, uint32_t id)
{
	return zk_acl_check(zk_state_node_acl(c->state, id), ZK_PERM_READ, c->ids);
}

static void write_stat(const struct zk_read_ctx *c, uint32_t id, struct keel_wbuf *out)
{
	struct zk_stat stat;
	zk_state_stat(c->state, id, &stat);
	zk_write_stat(out, &stat);
}

static int32_t watch(const struct zk_read_ctx *c, struct zk_bytes path, enum zk_watch_mode mode)
{
	if (c->watches == NULL) {
		return ZK_OK;
	}
	enum keel_err err = zk_watches_add(c->watches, c->conn, path, mode);
	if (err == KEEL_OK) {
		return ZK_OK;
	}
	/* keel's per-connection watch limit (ZooKeeper has none). */
	return err == KEEL_LIMIT ? ZK_QUOTA_EXCEEDED : ZK_SYSTEM_ERROR;
}

static int32_t read_exists(const struct zk_read_ctx *c, const struct zk_path_watch_request *r,
			   struct keel_wbuf *out)
{
	if (zk_bytes_is_null(r->path)) {
		return ZK_MARSHALLING_ERROR;
	}
	if (zk_path_has_nul((const char *)r->path.data, (size_t)r->path.size)) {
		return ZK_BAD_ARGUMENTS;
	}
	/* No ACL check: ZooKeeper 3.8 answers exists() (and sets its watch)
	 * whatever the node's ACL says. */
	uint32_t id = zk_state_lookup(c->state, r->path);
	if (r->watch) {
		/* An exist watch is set whether or not the node exists. */
		int32_t rc = watch(c, r->path, ZK_WATCH_DATA);
		if (rc != ZK_OK) {
			return rc;
		}
	}
	if (id == ZK_NODE_NONE) {
		return ZK_NO_NODE;
	}
	write_stat(c, id, out);
	return ZK_OK;
}

static int32_t read_data(const struct zk_read_ctx *c, struct zk_bytes path, bool want_watch,
			 struct keel_wbuf *out)
{
	if (zk_bytes_is_null(path)) {
		return ZK_MARSHALLING_ERROR;
	}
	uint32_t id = zk_state_lookup(c->state, path);
	if (id == ZK_NODE_NONE) {
		return ZK_NO_NODE;
	}
	if (!readable(c, id)) {
		return ZK_NO_AUTH;
	}
	if (want_watch) {
		int32_t rc = watch(c, path, ZK_WATCH_DATA);
		if (rc != ZK_OK) {
			return rc;
		}
	}
	const struct zk_node *n = zk_tree_node(&c->state->tree, id);
	if ((n->flags & ZK_NODE_DATA_NULL) != 0) {
		zk_write_bytes(out, ZK_BYTES_NULL);
	} else {
		zk_write_bytes(out, zk_bytes_of(zk_node_data(n), n->data_size));
	}
	write_stat(c, id, out);
	return ZK_OK;
}

static int32_t read_children(const struct zk_read_ctx *c, struct zk_bytes path, bool want_watch,
			     bool with_stat, struct keel_wbuf *out)
{
	if (zk_bytes_is_null(path)) {
		return ZK_MARSHALLING_ERROR;
	}
	const struct zk_tree *t = &c->state->tree;
	uint32_t id = zk_state_lookup(c->state, path);
	if (id == ZK_NODE_NONE) {
		return ZK_NO_NODE;
	}
	if (!readable(c, id)) {
		return ZK_NO_AUTH;
	}
	if (want_watch) {
		int32_t rc = watch(c, path, ZK_WATCH_CHILD);
		if (rc != ZK_OK) {
			return rc;
		}
	}
	struct zk_stat stat;
	zk_state_stat(c->state, id, &stat);
	keel_wbuf_i32(out, stat.num_children);
	for (uint32_t ch = zk_tree_first_child(t, id); ch != ZK_NODE_NONE;
	     ch = zk_tree_next_child(t, id, ch)) {
		const struct zk_node *n = zk_tree_node(t, ch);
		zk_write_bytes(out, zk_bytes_of(n->bytes, n->name_size));
	}
	if (with_stat) {
		zk_write_stat(out, &stat);
	}
	return ZK_OK;
}

static int32_t read_acl(const struct zk_read_ctx *c, struct zk_bytes path, struct keel_wbuf *out)
{
	if (zk_bytes_is_null(path)) {
		return ZK_MARSHALLING_ERROR;
	}
	uint32_t id = zk_state_lookup(c->state, path);
	if (id == ZK_NODE_NONE) {
		return ZK_NO_NODE;
	}
	struct zk_acl_vec acl = zk_state_node_acl(c->state, id);
	if (!zk_acl_check(acl, ZK_PERM_READ | ZK_PERM_ADMIN, c->ids)) {
		return ZK_NO_AUTH;
	}
	if (zk_acl_check(acl, ZK_PERM_ADMIN, c->ids)) {
		zk_write_acl_vec(out, acl);
	} else {
		zk_acl_write_masked(out, acl);
	}
	write_stat(c, id, out);
	return ZK_OK;
}

static bool count_visit(void *ctx, uint32_t id, const uint8_t *path, size_t size, uint32_t depth)
{
	(void)id;
	(void)path;
	(void)size;
	(void)depth;
	(*(uint64_t *)ctx)++;
	return true;
}

static int32_t read_all_children_number(const struct zk_read_ctx *c, struct zk_bytes path,
					struct keel_wbuf *out)
{
	if (zk_bytes_is_null(path)) {
		return ZK_MARSHALLING_ERROR;
	}
	uint32_t id = zk_state_lookup(c->state, path);
	if (id == ZK_NODE_NONE) {
		return ZK_NO_NODE;
	}
	if (!readable(c, id)) {
		return ZK_NO_AUTH;
	}
	uint64_t count = 0;
	if (id == ZK_ROOT_ID) {
		/* ZooKeeper counts map keys; "" and "/" both name the root. */
		count = zk_state_node_count(c->state) - (path.size == 0 ? 0u : 1u);
	} else {
		struct keel_wbuf scratch;
		keel_wbuf_init_dynamic(&scratch, 256, SIZE_MAX / 2);
		bool ok = zk_tree_walk(&c->state->tree, id, &scratch, count_visit, &count);
		keel_wbuf_free(&scratch);
		if (!ok) {
			return ZK_SYSTEM_ERROR;
		}
		count--; /* the node itself */
	}
	keel_wbuf_i32(out, (int32_t)count);
	return ZK_OK;
}

/* Java String.trim(): strips chars <= ' ' at both ends. */
static struct zk_bytes java_trim(struct zk_bytes s)
{
	size_t start = 0;
	size_t end = zk_bytes_len(s);
	while (start < end && s.data[start] <= ' ') {
		start++;
	}
	while (end > start && s.data[end - 1] <= ' ') {
		end--;
	}
	return zk_bytes_of(s.data + start, end - start);
}

/* getEphemerals: the session's ephemeral paths starting with the prefix,
 * sorted by path (ZooKeeper's order is a hash set's; sorted is the same
 * on every server). */
static int32_t read_ephemerals(const struct zk_read_ctx *c, struct zk_bytes prefix,
			       struct keel_wbuf *out)
{
	const struct zk_session *s = zk_state_session(c->state, c->session_id);
	struct zk_bytes p = zk_bytes_is_null(prefix) ? zk_bytes_of("", 0) : java_trim(prefix);
	bool all = p.size == 0 || zk_bytes_eq_str(p, "/");
	p = zk_bytes_is_null(prefix) ? p : prefix; /* matching uses the untrimmed prefix */
	uint32_t count = s == NULL ? 0 : s->eph_count;
	struct keel_wbuf paths;
	keel_wbuf_init_dynamic(&paths, 256, SIZE_MAX / 2);
	struct zk_path_span *refs = count == 0 ? NULL : malloc(count * sizeof(*refs));
	if (count > 0 && refs == NULL) {
		keel_wbuf_free(&paths);
		return ZK_SYSTEM_ERROR;
	}
	uint32_t kept = 0;
	uint32_t id = count == 0 ? ZK_NODE_NONE : s->eph_head;
	for (uint32_t i = 0; i < count; i++) {
		size_t start = paths.size;
		zk_tree_path(&c->state->tree, id, &paths);
		size_t len = paths.size - start;
		if (keel_wbuf_ok(&paths) &&
		    (all || (len >= (size_t)p.size && memcmp(paths.data + start, p.data, (size_t)p.size) == 0))) {
			refs[kept++] = (struct zk_path_span){(uint32_t)start, (uint32_t)len};
		} else {
			paths.size = start;
		}
		id = zk_tree_node(&c->state->tree, id)->u.eph.next;
	}
	int32_t rc = ZK_OK;
	if (!keel_wbuf_ok(&paths)) {
		rc = ZK_SYSTEM_ERROR;
	} else {
		zk_path_spans_sort(refs, kept, sizeof(*refs), paths.data);
		keel_wbuf_i32(out, (int32_t)kept);
		for (uint32_t i = 0; i < kept; i++) {
			zk_write_bytes(out, zk_bytes_of(paths.data + refs[i].offset, refs[i].size));
		}
	}
	free(refs);
	keel_wbuf_free(&paths);
	return rc;
}

/* ---- multiRead ---- */

static int32_t read_multi(const struct zk_read_ctx *c, const struct zk_multi_request *m,
			  struct keel_wbuf *out)
{
	struct zk_multi_iter it;
	struct zk_multi_op op;
	zk_multi_iter_init(&it, m);
	while (zk_multi_iter_next(&it, &op)) {
		size_t mark = out->size;
		zk_multi_result_header(out, op.opcode, 0);
		int32_t rc = op.opcode == ZK_OP_GET_DATA
				     ? read_data(c, op.u.read.path, false, out)
				     : read_children(c, op.u.read.path, false, false, out);
		if (rc == ZK_MARSHALLING_ERROR) {
			return rc;
		}
		if (rc != ZK_OK) {
			out->size = mark;
			zk_multi_result_error(out, rc);
		}
	}
	zk_multi_result_end(out);
	return ZK_OK;
}

/* ---- watches ---- */

static int32_t watch_request(const struct zk_read_ctx *c, const struct zk_request *req,
			     struct keel_wbuf *out)
{
	const struct zk_watches_request *w = &req->u.watches;
	if (w->type < ZK_WATCHER_CHILDREN || w->type > ZK_WATCHER_PERSISTENT_RECURSIVE) {
		return ZK_MARSHALLING_ERROR; /* WatcherType.fromInt throws */
	}
	/* ZooKeeper 3.8 walks checkWatches' path towards the root
	 * (PathParentIterator), which throws on a null path or a non-empty one
	 * with no '/' at all: MarshallingError (observed: "bad" fails, "a/b"
	 * and "" find no watcher). removeWatches only looks the path up. */
	if (req->opcode == ZK_OP_CHECK_WATCHES &&
	    (zk_bytes_is_null(w->path) ||
	     (w->path.size > 0 && memchr(w->path.data, '/', (size_t)w->path.size) == NULL))) {
		return ZK_MARSHALLING_ERROR;
	}
	if (zk_bytes_is_null(w->path)) {
		return ZK_NO_WATCHER;
	}
	bool found = false;
	if (c->watches != NULL) {
		if (req->opcode == ZK_OP_CHECK_WATCHES) {
			found = zk_watches_contains(c->watches, c->conn, w->path, w->type);
		} else {
			found = zk_watches_remove(c->watches, c->conn, w->path, w->type);
		}
	}
	(void)out;
	return found ? ZK_OK : ZK_NO_WATCHER;
}

static int32_t add_watch(const struct zk_read_ctx *c, const struct zk_add_watch_request *a,
			 struct keel_wbuf *out)
{
	if (a->mode != ZK_ADD_WATCH_PERSISTENT && a->mode != ZK_ADD_WATCH_PERSISTENT_RECURSIVE) {
		return ZK_MARSHALLING_ERROR; /* WatcherMode.fromZooDef throws */
	}
	if (zk_bytes_is_null(a->path)) {
		return ZK_MARSHALLING_ERROR;
	}
	int32_t rc = watch(c, a->path, a->mode == ZK_ADD_WATCH_PERSISTENT ? ZK_WATCH_PERSISTENT
									 : ZK_WATCH_RECURSIVE);
	if (rc != ZK_OK) {
		return rc;
	}
	keel_wbuf_i32(out, 0); /* ErrorResponse{0} */
	return ZK_OK;
}

/* setWatches after a reconnect: fire what changed since relativeZxid
 * (compared with mzxid for data watches, pzxid for child watches; an exist
 * watch fires NodeCreated if the node is there), re-register the rest. */
static int32_t set_watches(const struct zk_read_ctx *c, const struct zk_set_watches_request *sw)
{
	if (c->watches == NULL) {
		return ZK_OK;
	}
	const struct zk_state *st = c->state;
	for (int list = 0; list < ZK_SW_LIST_COUNT; list++) {
		struct zk_str_iter it;
		struct zk_bytes path;
		zk_str_iter_init(&it, sw->lists[list]);
		while (zk_str_iter_next(&it, &path)) {
			if (zk_bytes_is_null(path)) {
				return ZK_MARSHALLING_ERROR;
			}
			uint32_t id = zk_state_lookup(st, path);
			const struct zk_node *n = id == ZK_NODE_NONE ? NULL : zk_tree_node(&st->tree, id);
			int32_t event = ZK_EVENT_NONE;
			enum zk_watch_mode mode = ZK_WATCH_DATA;
			switch (list) {
			case ZK_SW_DATA:
				event = n == NULL                      ? ZK_EVENT_NODE_DELETED
					: n->mzxid > sw->relative_zxid ? ZK_EVENT_NODE_DATA_CHANGED
								       : ZK_EVENT_NONE;
				break;
			case ZK_SW_EXIST:
				event = n != NULL ? ZK_EVENT_NODE_CREATED : ZK_EVENT_NONE;
				break;
			case ZK_SW_CHILD:
				event = n == NULL                      ? ZK_EVENT_NODE_DELETED
					: n->pzxid > sw->relative_zxid ? ZK_EVENT_NODE_CHILDREN_CHANGED
								       : ZK_EVENT_NONE;
				mode = ZK_WATCH_CHILD;
				break;
			case ZK_SW_PERSISTENT:
				mode = ZK_WATCH_PERSISTENT;
				break;
			default:
				mode = ZK_WATCH_RECURSIVE;
				break;
			}
			if (event == ZK_EVENT_NONE) {
				int32_t rc = watch(c, path, mode);
				if (rc != ZK_OK) {
					return rc;
				}
			} else if (n == NULL || readable(c, id)) {
				zk_watches_notify(c->watches, c->conn, event, path);
			}
		}
	}
	return ZK_OK;
}

int32_t zk_read(const struct zk_read_ctx *c, const struct zk_request *req, struct keel_wbuf *body)
{
	size_t mark = body->size;
	int32_t rc;
	switch (req->opcode) {
	case ZK_OP_EXISTS:
		rc = read_exists(c, &req->u.read, body);
		break;
	case ZK_OP_GET_DATA:
		rc = read_data(c, req->u.read.path, req->u.read.watch, body);
		break;
	case ZK_OP_GET_CHILDREN:
		rc = read_children(c, req->u.read.path, req->u.read.watch, false, body);
		break;
	case ZK_OP_GET_CHILDREN2:
		rc = read_children(c, req->u.read.path, req->u.read.watch, true, body);
		break;
	case ZK_OP_GET_ACL:
		rc = read_acl(c, req->u.path.path, body);
		break;
	case ZK_OP_GET_ALL_CHILDREN_NUMBER:
		rc = read_all_children_number(c, req->u.path.path, body);
		break;
	case ZK_OP_GET_EPHEMERALS:
		rc = read_ephemerals(c, req->u.path.path, body);
		break;
	case ZK_OP_MULTI_READ:
		rc = read_multi(c, &req->u.multi, body);
		break;
	case ZK_OP_CHECK_WATCHES:
	case ZK_OP_REMOVE_WATCHES:
		rc = watch_request(c, req, body);
		break;
	case ZK_OP_ADD_WATCH:
		rc = add_watch(c, &req->u.add_watch, body);
		break;
	case ZK_OP_SET_WATCHES:
	case ZK_OP_SET_WATCHES2:
		rc = set_watches(c, &req->u.set_watches);
		break;
	case ZK_OP_WHO_AM_I:
		zk_ids_who_am_i(body, c->ids);
		rc = ZK_OK;
		break;
	case ZK_OP_SYNC:
		zk_write_bytes(body, req->u.path.path);
		rc = ZK_OK;
		break;
	case ZK_OP_PING:
		rc = ZK_OK;
		break;
	default:
		rc = ZK_UNIMPLEMENTED;
		break;
	}
	if (rc != ZK_OK) {
		body->size = mark;
	} else if (!keel_wbuf_ok(body)) {
		body->size = mark;
		body->failed = false;
		rc = ZK_MARSHALLING_ERROR; /* the reply outgrew its limit */
	}
	return rc;
}

/* ---- auth ---- */

int32_t zk_auth_handle(struct zk_auth_info *info, const struct zk_auth_request *auth,
		       const char *super_digest)
{
	if (zk_bytes_eq_str(auth->scheme, "ip")) {
		return ZK_OK;
	}
	if (!zk_bytes_eq_str(auth->scheme, "digest")) {
		return ZK_AUTH_FAILED;
	}
	size_t n = zk_bytes_len(auth->auth);
	char *id = malloc(zk_digest_id_size(n));
	if (id == NULL) {
		return ZK_AUTH_FAILED;
	}
	size_t len = zk_digest_id((const char *)auth->auth.data, n, id);
	enum keel_err err = KEEL_OK;
	if (super_digest != NULL && strlen(super_digest) == len && memcmp(super_digest, id, len) == 0) {
		err = zk_auth_info_add(info, zk_bytes_str("super"), zk_bytes_of("", 0));
	}
	if (err == KEEL_OK) {
		err = zk_auth_info_add(info, zk_bytes_str("digest"), zk_bytes_of(id, len));
	}
	free(id);
	return err == KEEL_OK ? ZK_OK : ZK_AUTH_FAILED;
}
