/*
 * kc_ops.c — the typed calls of kc.h: arguments checked, the request
 * encoded by zk_proto, the reply decoded by zk_proto, watches noted.
 *
 * A reply body that does not decode drops the connection and returns
 * ZK_MARSHALLING_ERROR: after a frame we cannot read, nothing later on that
 * stream can be trusted.
 */
#include <string.h>

#include "base/assert.h"
#include "client/kc_internal.h"
#include "zk/zk_path.h"

static int32_t check_path(struct kc_client *c, const char *path, bool sequential)
{
	if (path == NULL) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "no path given");
	}
	struct zk_path_error perr;
	size_t size = strlen(path);
	bool ok = sequential ? zk_path_validate_seq(path, size, &perr)
			     : zk_path_validate(path, size, &perr);
	if (!ok) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "Invalid path string \"%s\" caused by %s", path,
			       zk_path_reason_message(perr.reason));
	}
	if (size > c->opt.max_packet) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "path over the max packet size");
	}
	return ZK_OK;
}

static int32_t check_watch_room(struct kc_client *c, const char *path, bool watch)
{
	if (watch && !kc_watch_room(c, path, strlen(path))) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "the client already tracks %u watched paths",
			       c->opt.max_watches);
	}
	return ZK_OK;
}

static void note_watch(struct kc_client *c, const char *path, uint32_t flags)
{
	/* Room was checked before sending; only memory can fail here, and
	 * then the watch still works until a reconnect. */
	if (kc_watch_add(c, path, strlen(path), flags) != KEEL_OK) {
		kc_fail(c, 0, "could not remember the watch on %s", path);
	}
}

/* Decodes the body of a successful reply, or drops the connection. */
static int32_t decode(struct kc_client *c, const struct kc_reply *reply, int32_t opcode,
		      struct zk_response *rsp)
{
	if (zk_response_decode(rsp, opcode, reply->body, reply->body_size) != KEEL_OK) {
		return kc_conn_bad_reply(c, zk_op_name(opcode));
	}
	return ZK_OK;
}

static struct zk_request request_of(int32_t opcode)
{
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	req.opcode = opcode;
	return req;
}

/* Builds the ACL vector in c->scratch (world:anyone:cdrwa when acl is NULL). */
static int32_t build_acl(struct kc_client *c, const struct zk_acl *acl, size_t count,
			 struct zk_acl_vec *out)
{
	static const char world[] = "world";
	static const char anyone[] = "anyone";
	struct zk_acl open = {ZK_PERM_ALL, {{(const uint8_t *)world, 5}, {(const uint8_t *)anyone, 6}}};
	if (acl == NULL) {
		acl = &open;
		count = 1;
	}
	keel_wbuf_reset(&c->scratch);
	*out = zk_acl_vec_build(&c->scratch, acl, count);
	if (!keel_wbuf_ok(&c->scratch) || out->count < 0) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "ACL list over the max packet size");
	}
	return ZK_OK;
}

int32_t kc_create(struct kc_client *c, const char *path, struct zk_bytes data,
		  const struct kc_create_args *args, struct zk_bytes *created,
		  struct zk_stat *stat)
{
	kc_conn_begin(c);
	struct kc_create_args defaults = {ZK_CREATE_PERSISTENT, 0, NULL, 0};
	if (args == NULL) {
		args = &defaults;
	}
	if (!zk_create_mode_valid(args->mode)) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "invalid create mode %d", args->mode);
	}
	bool ttl = zk_create_mode_ttl(args->mode);
	if (ttl && (args->ttl_ms <= 0 || args->ttl_ms > ZK_TTL_MAX_MS)) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "TTL must be 1..%lld ms",
			       (long long)ZK_TTL_MAX_MS);
	}
	if (!ttl && args->ttl_ms != 0) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "a TTL needs a TTL create mode");
	}
	int32_t rc = check_path(c, path, zk_create_mode_sequential(args->mode));
	if (rc != ZK_OK) {
		return rc;
	}
	int32_t opcode = args->mode == ZK_CREATE_CONTAINER ? ZK_OP_CREATE_CONTAINER
			 : ttl                             ? ZK_OP_CREATE_TTL
							   : ZK_OP_CREATE2;
	struct zk_request req = request_of(opcode);
	req.u.create.path = zk_bytes_str(path);
	req.u.create.data = data;
	req.u.create.flags = args->mode;
	req.u.create.ttl_ms = ttl ? args->ttl_ms : -1;
	rc = build_acl(c, args->acl, args->acl_count, &req.u.create.acl);
	if (rc != ZK_OK) {
		return rc;
	}
	struct kc_reply reply;
	rc = kc_conn_request(c, 0, &req, &reply);
	if (rc != ZK_OK || reply.err != ZK_OK) {
		return rc != ZK_OK ? rc : reply.err;
	}
	struct zk_response rsp;
	rc = decode(c, &reply, opcode, &rsp);
	if (rc != ZK_OK) {
		return rc;
	}
	if (created != NULL) {
		*created = rsp.path;
	}
	if (stat != NULL) {
		*stat = rsp.stat;
	}
	return ZK_OK;
}

int32_t kc_delete(struct kc_client *c, const char *path, int32_t version)
{
	kc_conn_begin(c);
	int32_t rc = check_path(c, path, false);
	if (rc != ZK_OK) {
		return rc;
	}
	struct zk_request req = request_of(ZK_OP_DELETE);
	req.u.delete_.path = zk_bytes_str(path);
	req.u.delete_.version = version;
	struct kc_reply reply;
	rc = kc_conn_request(c, 0, &req, &reply);
	return rc != ZK_OK ? rc : reply.err;
}

/* exists / getData / getChildren(2): a path and a watch flag. */
static int32_t read_call(struct kc_client *c, int32_t opcode, const char *path, bool watch,
			 struct zk_response *rsp)
{
	int32_t rc = check_path(c, path, false);
	if (rc == ZK_OK) {
		rc = check_watch_room(c, path, watch);
	}
	if (rc != ZK_OK) {
		return rc;
	}
	struct zk_request req = request_of(opcode);
	req.u.read.path = zk_bytes_str(path);
	req.u.read.watch = watch;
	struct kc_reply reply;
	rc = kc_conn_request(c, 0, &req, &reply);
	if (rc != ZK_OK) {
		return rc;
	}
	if (watch && opcode == ZK_OP_EXISTS && reply.err == ZK_NO_NODE) {
		note_watch(c, path, KC_WATCH_EXIST);
	}
	if (reply.err != ZK_OK) {
		return reply.err;
	}
	rc = decode(c, &reply, opcode, rsp);
	if (rc == ZK_OK && watch) {
		note_watch(c, path,
			   opcode == ZK_OP_GET_CHILDREN || opcode == ZK_OP_GET_CHILDREN2
				   ? KC_WATCH_CHILD
				   : KC_WATCH_DATA);
	}
	return rc;
}

int32_t kc_exists(struct kc_client *c, const char *path, bool watch, struct zk_stat *stat)
{
	kc_conn_begin(c);
	struct zk_response rsp;
	int32_t rc = read_call(c, ZK_OP_EXISTS, path, watch, &rsp);
	if (rc == ZK_OK && stat != NULL) {
		*stat = rsp.stat;
	}
	return rc;
}

int32_t kc_get(struct kc_client *c, const char *path, bool watch, struct zk_bytes *data,
	       struct zk_stat *stat)
{
	kc_conn_begin(c);
	struct zk_response rsp;
	int32_t rc = read_call(c, ZK_OP_GET_DATA, path, watch, &rsp);
	if (rc == ZK_OK) {
		if (data != NULL) {
			*data = rsp.data;
		}
		if (stat != NULL) {
			*stat = rsp.stat;
		}
	}
	return rc;
}

int32_t kc_get_children(struct kc_client *c, const char *path, bool watch,
			struct zk_str_vec *children, struct zk_stat *stat)
{
	kc_conn_begin(c);
	struct zk_response rsp;
	int32_t opcode = stat != NULL ? ZK_OP_GET_CHILDREN2 : ZK_OP_GET_CHILDREN;
	int32_t rc = read_call(c, opcode, path, watch, &rsp);
	if (rc == ZK_OK) {
		if (rsp.strings.count < 0) {
			rsp.strings.count = 0; /* a null vector reads as empty */
			rsp.strings.size = 0;
		}
		if (children != NULL) {
			*children = rsp.strings;
		}
		if (stat != NULL) {
			*stat = rsp.stat;
		}
	}
	return rc;
}

int32_t kc_set(struct kc_client *c, const char *path, struct zk_bytes data, int32_t version,
	       struct zk_stat *stat)
{
	kc_conn_begin(c);
	int32_t rc = check_path(c, path, false);
	if (rc != ZK_OK) {
		return rc;
	}
	struct zk_request req = request_of(ZK_OP_SET_DATA);
	req.u.set_data.path = zk_bytes_str(path);
	req.u.set_data.data = data;
	req.u.set_data.version = version;
	struct kc_reply reply;
	rc = kc_conn_request(c, 0, &req, &reply);
	if (rc != ZK_OK || reply.err != ZK_OK) {
		return rc != ZK_OK ? rc : reply.err;
	}
	struct zk_response rsp;
	rc = decode(c, &reply, ZK_OP_SET_DATA, &rsp);
	if (rc == ZK_OK && stat != NULL) {
		*stat = rsp.stat;
	}
	return rc;
}

int32_t kc_get_acl(struct kc_client *c, const char *path, struct zk_acl_vec *acl,
		   struct zk_stat *stat)
{
	kc_conn_begin(c);
	int32_t rc = check_path(c, path, false);
	if (rc != ZK_OK) {
		return rc;
	}
	struct zk_request req = request_of(ZK_OP_GET_ACL);
	req.u.path.path = zk_bytes_str(path);
	struct kc_reply reply;
	rc = kc_conn_request(c, 0, &req, &reply);
	if (rc != ZK_OK || reply.err != ZK_OK) {
		return rc != ZK_OK ? rc : reply.err;
	}
	struct zk_response rsp;
	rc = decode(c, &reply, ZK_OP_GET_ACL, &rsp);
	if (rc == ZK_OK) {
		if (acl != NULL) {
			*acl = rsp.acl;
		}
		if (stat != NULL) {
			*stat = rsp.stat;
		}
	}
	return rc;
}

int32_t kc_set_acl(struct kc_client *c, const char *path, const struct zk_acl *acl,
		   size_t count, int32_t version, struct zk_stat *stat)
{
	kc_conn_begin(c);
	int32_t rc = check_path(c, path, false);
	if (rc != ZK_OK) {
		return rc;
	}
	if (acl == NULL && count > 0) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "no ACL given");
	}
	struct zk_request req = request_of(ZK_OP_SET_ACL);
	req.u.set_acl.path = zk_bytes_str(path);
	req.u.set_acl.version = version;
	static const struct zk_acl none;
	rc = build_acl(c, acl != NULL ? acl : &none, count, &req.u.set_acl.acl);
	if (rc != ZK_OK) {
		return rc;
	}
	struct kc_reply reply;
	rc = kc_conn_request(c, 0, &req, &reply);
	if (rc != ZK_OK || reply.err != ZK_OK) {
		return rc != ZK_OK ? rc : reply.err;
	}
	struct zk_response rsp;
	rc = decode(c, &reply, ZK_OP_SET_ACL, &rsp);
	if (rc == ZK_OK && stat != NULL) {
		*stat = rsp.stat;
	}
	return rc;
}

int32_t kc_sync(struct kc_client *c, const char *path)
{
	kc_conn_begin(c);
	int32_t rc = check_path(c, path, false);
	if (rc != ZK_OK) {
		return rc;
	}
	struct zk_request req = request_of(ZK_OP_SYNC);
	req.u.path.path = zk_bytes_str(path);
	struct kc_reply reply;
	rc = kc_conn_request(c, 0, &req, &reply);
	if (rc != ZK_OK || reply.err != ZK_OK) {
		return rc != ZK_OK ? rc : reply.err;
	}
	struct zk_response rsp;
	return decode(c, &reply, ZK_OP_SYNC, &rsp);
}

int32_t kc_multi(struct kc_client *c, const struct zk_multi_op *ops, size_t count,
		 struct zk_multi_result_iter *results)
{
	kc_conn_begin(c);
	zk_multi_result_iter_init(results, NULL, 0);
	if (ops == NULL && count > 0) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "no ops given");
	}
	keel_wbuf_reset(&c->scratch);
	zk_multi_encode(&c->scratch, ops, count);
	if (!keel_wbuf_ok(&c->scratch)) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "multi over the max packet size");
	}
	struct kc_reply reply;
	int32_t rc = kc_conn_call(c, 0, ZK_OP_MULTI, c->scratch.data, c->scratch.size, &reply);
	if (rc != ZK_OK || reply.err != ZK_OK) {
		return rc != ZK_OK ? rc : reply.err;
	}
	/* Walk once to validate and find the first failure. */
	struct zk_multi_result_iter it;
	struct zk_multi_result res;
	int32_t first_err = ZK_OK;
	size_t seen = 0;
	zk_multi_result_iter_init(&it, reply.body, reply.body_size);
	while (zk_multi_result_next(&it, &res)) {
		seen++;
		if (first_err == ZK_OK && res.err != ZK_OK) {
			first_err = res.err;
		}
	}
	if (it.failed || seen != count) {
		return kc_conn_bad_reply(c, "multi");
	}
	zk_multi_result_iter_init(results, reply.body, reply.body_size);
	return first_err;
}

int32_t kc_add_auth(struct kc_client *c, const char *scheme, struct zk_bytes cred)
{
	kc_conn_begin(c);
	size_t scheme_size = scheme != NULL ? strlen(scheme) : 0;
	if (scheme_size == 0 || scheme_size >= sizeof(c->auths[0].scheme)) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "bad auth scheme");
	}
	if (zk_bytes_len(cred) > KC_MAX_AUTH_SIZE) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "credential over %d bytes", KC_MAX_AUTH_SIZE);
	}
	if (c->auth_count == KC_MAX_AUTHS) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "more than %d credentials", KC_MAX_AUTHS);
	}
	/* Kept before sending, so that a reconnect in the middle re-sends it. */
	struct kc_auth *a = &c->auths[c->auth_count++];
	memcpy(a->scheme, scheme, scheme_size + 1);
	a->cred_size = (uint32_t)zk_bytes_len(cred);
	if (a->cred_size > 0) {
		memcpy(a->cred, cred.data, a->cred_size);
	}
	if (c->state != KC_CONNECTED) {
		/* Connecting sends every kept credential, this one too. */
		return kc_connect(c);
	}
	struct zk_request req = request_of(ZK_OP_AUTH);
	req.u.auth.type = 0;
	req.u.auth.scheme = zk_bytes_str(a->scheme);
	req.u.auth.auth = zk_bytes_of(a->cred, a->cred_size);
	struct kc_reply reply;
	int32_t rc = kc_conn_request(c, ZK_XID_AUTH, &req, &reply);
	if (rc != ZK_OK) {
		return rc;
	}
	return reply.err == ZK_OK ? ZK_OK : kc_conn_auth_failed(c, a->scheme);
}

int32_t kc_add_watch(struct kc_client *c, const char *path, int32_t mode)
{
	kc_conn_begin(c);
	if (mode != ZK_ADD_WATCH_PERSISTENT && mode != ZK_ADD_WATCH_PERSISTENT_RECURSIVE) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "invalid addWatch mode %d", mode);
	}
	int32_t rc = check_path(c, path, false);
	if (rc == ZK_OK) {
		rc = check_watch_room(c, path, true);
	}
	if (rc != ZK_OK) {
		return rc;
	}
	struct zk_request req = request_of(ZK_OP_ADD_WATCH);
	req.u.add_watch.path = zk_bytes_str(path);
	req.u.add_watch.mode = mode;
	struct kc_reply reply;
	rc = kc_conn_request(c, 0, &req, &reply);
	if (rc != ZK_OK || reply.err != ZK_OK) {
		return rc != ZK_OK ? rc : reply.err;
	}
	note_watch(c, path,
		   mode == ZK_ADD_WATCH_PERSISTENT ? KC_WATCH_PERSISTENT : KC_WATCH_RECURSIVE);
	return ZK_OK;
}

int32_t kc_remove_watches(struct kc_client *c, const char *path, int32_t type)
{
	kc_conn_begin(c);
	uint32_t flags;
	switch (type) {
	case ZK_WATCHER_CHILDREN:
		flags = KC_WATCH_CHILD;
		break;
	case ZK_WATCHER_DATA:
		flags = KC_WATCH_DATA | KC_WATCH_EXIST;
		break;
	case ZK_WATCHER_ANY:
		flags = KC_WATCH_DATA | KC_WATCH_EXIST | KC_WATCH_CHILD | KC_WATCH_PERSISTENT |
			KC_WATCH_RECURSIVE;
		break;
	case ZK_WATCHER_PERSISTENT:
		flags = KC_WATCH_PERSISTENT;
		break;
	case ZK_WATCHER_PERSISTENT_RECURSIVE:
		flags = KC_WATCH_RECURSIVE;
		break;
	default:
		return kc_fail(c, ZK_BAD_ARGUMENTS, "invalid watcher type %d", type);
	}
	int32_t rc = check_path(c, path, false);
	if (rc != ZK_OK) {
		return rc;
	}
	struct zk_request req = request_of(ZK_OP_REMOVE_WATCHES);
	req.u.watches.path = zk_bytes_str(path);
	req.u.watches.type = type;
	struct kc_reply reply;
	rc = kc_conn_request(c, 0, &req, &reply);
	if (rc != ZK_OK || reply.err != ZK_OK) {
		return rc != ZK_OK ? rc : reply.err;
	}
	kc_watch_drop(c, path, strlen(path), flags);
	return ZK_OK;
}

int32_t kc_call_raw(struct kc_client *c, int32_t opcode, const void *body, size_t size,
		    struct kc_raw_reply *out)
{
	kc_conn_begin(c);
	memset(out, 0, sizeof(*out));
	if (body == NULL && size > 0) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "no body given");
	}
	struct kc_reply reply;
	int32_t rc = kc_conn_call(c, 0, opcode, body, size, &reply);
	if (rc != ZK_OK) {
		return rc;
	}
	out->err = reply.err;
	out->zxid = reply.zxid;
	out->body = reply.body;
	out->body_size = reply.body_size;
	return reply.err;
}

const char *kc_err_message(int32_t err)
{
	switch (err) {
	case ZK_OK: return "ok";
	case ZK_SYSTEM_ERROR: return "SystemError";
	case ZK_RUNTIME_INCONSISTENCY: return "RuntimeInconsistency";
	case ZK_DATA_INCONSISTENCY: return "DataInconsistency";
	case ZK_CONNECTION_LOSS: return "ConnectionLoss";
	case ZK_MARSHALLING_ERROR: return "MarshallingError";
	case ZK_UNIMPLEMENTED: return "Unimplemented";
	case ZK_OPERATION_TIMEOUT: return "OperationTimeout";
	case ZK_BAD_ARGUMENTS: return "BadArguments";
	case ZK_UNKNOWN_SESSION: return "UnknownSession";
	case ZK_NEW_CONFIG_NO_QUORUM: return "NewConfigNoQuorum";
	case ZK_RECONFIG_IN_PROGRESS: return "ReconfigInProgress";
	case ZK_API_ERROR: return "APIError";
	case ZK_NO_NODE: return "NoNode";
	case ZK_NO_AUTH: return "NoAuth";
	case ZK_BAD_VERSION: return "BadVersion";
	case ZK_NO_CHILDREN_FOR_EPHEMERALS: return "NoChildrenForEphemerals";
	case ZK_NODE_EXISTS: return "NodeExists";
	case ZK_NOT_EMPTY: return "Directory not empty";
	case ZK_SESSION_EXPIRED: return "Session expired";
	case ZK_INVALID_CALLBACK: return "Invalid callback";
	case ZK_INVALID_ACL: return "InvalidACL";
	case ZK_AUTH_FAILED: return "AuthFailed";
	case ZK_SESSION_MOVED: return "Session moved";
	case ZK_NOT_READ_ONLY: return "Not a read-only call";
	case ZK_EPHEMERAL_ON_LOCAL_SESSION: return "Ephemeral node on local session";
	case ZK_NO_WATCHER: return "No such watcher";
	case ZK_REQUEST_TIMEOUT: return "Request timeout";
	case ZK_RECONFIG_DISABLED: return "Reconfig is disabled";
	case ZK_SESSION_CLOSED_REQUIRE_SASL_AUTH: return "Session closed because client failed to authenticate";
	case ZK_QUOTA_EXCEEDED: return "Quota has exceeded";
	case ZK_THROTTLED_OP: return "Op throttled due to high load";
	default: return "Unknown error";
	}
}
