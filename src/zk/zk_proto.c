/* zk_proto.c — ZooKeeper protocol messages (see zk_proto.h). */
#include "zk/zk_proto.h"

#include "base/assert.h"

/* ---- names ---- */

const char *zk_err_name(int32_t err)
{
	switch (err) {
#define ZK_ERR_CASE(name, value)                                              \
	case value:                                                           \
		return "Z" #name;
		ZK_ERRORS(ZK_ERR_CASE)
#undef ZK_ERR_CASE
	default:
		return "ZUNKNOWN";
	}
}

const char *zk_op_name(int32_t op)
{
	switch (op) {
	case ZK_OP_NOTIFICATION: return "notification";
	case ZK_OP_CREATE: return "create";
	case ZK_OP_DELETE: return "delete";
	case ZK_OP_EXISTS: return "exists";
	case ZK_OP_GET_DATA: return "getData";
	case ZK_OP_SET_DATA: return "setData";
	case ZK_OP_GET_ACL: return "getACL";
	case ZK_OP_SET_ACL: return "setACL";
	case ZK_OP_GET_CHILDREN: return "getChildren";
	case ZK_OP_SYNC: return "sync";
	case ZK_OP_PING: return "ping";
	case ZK_OP_GET_CHILDREN2: return "getChildren2";
	case ZK_OP_CHECK: return "check";
	case ZK_OP_MULTI: return "multi";
	case ZK_OP_CREATE2: return "create2";
	case ZK_OP_RECONFIG: return "reconfig";
	case ZK_OP_CHECK_WATCHES: return "checkWatches";
	case ZK_OP_REMOVE_WATCHES: return "removeWatches";
	case ZK_OP_CREATE_CONTAINER: return "createContainer";
	case ZK_OP_DELETE_CONTAINER: return "deleteContainer";
	case ZK_OP_CREATE_TTL: return "createTTL";
	case ZK_OP_MULTI_READ: return "multiRead";
	case ZK_OP_AUTH: return "auth";
	case ZK_OP_SET_WATCHES: return "setWatches";
	case ZK_OP_SASL: return "sasl";
	case ZK_OP_GET_EPHEMERALS: return "getEphemerals";
	case ZK_OP_GET_ALL_CHILDREN_NUMBER: return "getAllChildrenNumber";
	case ZK_OP_SET_WATCHES2: return "setWatches2";
	case ZK_OP_ADD_WATCH: return "addWatch";
	case ZK_OP_WHO_AM_I: return "whoAmI";
	case ZK_OP_KEEL_FEED: return "keelFeed";
	case ZK_OP_CREATE_SESSION: return "createSession";
	case ZK_OP_CLOSE_SESSION: return "closeSession";
	case ZK_OP_ERROR: return "error";
	default: return "unknown";
	}
}

/* ---- framing ---- */

enum zk_frame_status zk_frame_check(const void *data, size_t size, uint32_t max_packet,
				    uint32_t *payload_size)
{
	*payload_size = 0;
	if (size < 4) {
		return ZK_FRAME_NEED_MORE;
	}
	int32_t len = (int32_t)keel_load_be32(data);
	if (len < 0) {
		return ZK_FRAME_NEGATIVE;
	}
	if ((uint32_t)len > max_packet) {
		return ZK_FRAME_TOO_BIG;
	}
	*payload_size = (uint32_t)len;
	return size - 4 >= (size_t)len ? ZK_FRAME_READY : ZK_FRAME_NEED_MORE;
}

size_t zk_frame_begin(struct keel_wbuf *w)
{
	size_t start = w->size;
	keel_wbuf_u32(w, 0);
	return start;
}

void zk_frame_end(struct keel_wbuf *w, size_t start)
{
	if (!keel_wbuf_ok(w)) {
		return;
	}
	KEEL_ASSERT(w->size >= start + 4);
	size_t len = w->size - start - 4;
	if (len > INT32_MAX) {
		w->failed = true;
		return;
	}
	keel_wbuf_patch_u32(w, start, (uint32_t)len);
}

/* ---- handshake ---- */

enum keel_err zk_connect_request_decode(struct zk_connect_request *req, const void *data,
					size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, data, size);
	req->protocol_version = keel_rbuf_i32(&r);
	req->last_zxid_seen = keel_rbuf_i64(&r);
	req->timeout_ms = keel_rbuf_i32(&r);
	req->session_id = keel_rbuf_i64(&r);
	req->passwd = zk_read_bytes(&r);
	req->read_only = false;
	req->has_read_only = false;
	if (!keel_rbuf_ok(&r)) {
		return KEEL_PROTO;
	}
	if (keel_rbuf_remaining(&r) >= 1) {
		/* ZooKeeper reads any non-zero byte as true. */
		req->read_only = keel_rbuf_u8(&r) != 0;
		req->has_read_only = true;
	}
	return KEEL_OK;
}

void zk_connect_request_encode(struct keel_wbuf *w, const struct zk_connect_request *req)
{
	keel_wbuf_i32(w, req->protocol_version);
	keel_wbuf_i64(w, req->last_zxid_seen);
	keel_wbuf_i32(w, req->timeout_ms);
	keel_wbuf_i64(w, req->session_id);
	zk_write_bytes(w, req->passwd);
	if (req->has_read_only) {
		keel_wbuf_bool(w, req->read_only);
	}
}

enum keel_err zk_connect_response_decode(struct zk_connect_response *rsp, const void *data,
					 size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, data, size);
	rsp->protocol_version = keel_rbuf_i32(&r);
	rsp->timeout_ms = keel_rbuf_i32(&r);
	rsp->session_id = keel_rbuf_i64(&r);
	rsp->passwd = zk_read_bytes(&r);
	rsp->read_only = false;
	rsp->has_read_only = false;
	if (!keel_rbuf_ok(&r)) {
		return KEEL_PROTO;
	}
	if (keel_rbuf_remaining(&r) >= 1) {
		rsp->read_only = keel_rbuf_u8(&r) != 0;
		rsp->has_read_only = true;
	}
	return KEEL_OK;
}

void zk_connect_response_encode(struct keel_wbuf *w, const struct zk_connect_response *rsp)
{
	keel_wbuf_i32(w, rsp->protocol_version);
	keel_wbuf_i32(w, rsp->timeout_ms);
	keel_wbuf_i64(w, rsp->session_id);
	zk_write_bytes(w, rsp->passwd);
	if (rsp->has_read_only) {
		keel_wbuf_bool(w, rsp->read_only);
	}
}

/* ---- headers ---- */

void zk_reply_header_encode(struct keel_wbuf *w, int32_t xid, int64_t zxid, int32_t err)
{
	keel_wbuf_i32(w, xid);
	keel_wbuf_i64(w, zxid);
	keel_wbuf_i32(w, err);
}

enum keel_err zk_reply_header_decode(struct zk_reply_header *h, struct keel_rbuf *r)
{
	h->xid = keel_rbuf_i32(r);
	h->zxid = keel_rbuf_i64(r);
	h->err = keel_rbuf_i32(r);
	return keel_rbuf_ok(r) ? KEEL_OK : KEEL_PROTO;
}

/* ---- request bodies ---- */

bool zk_op_known(int32_t opcode)
{
	switch (opcode) {
	case ZK_OP_CREATE:
	case ZK_OP_DELETE:
	case ZK_OP_EXISTS:
	case ZK_OP_GET_DATA:
	case ZK_OP_SET_DATA:
	case ZK_OP_GET_ACL:
	case ZK_OP_SET_ACL:
	case ZK_OP_GET_CHILDREN:
	case ZK_OP_SYNC:
	case ZK_OP_PING:
	case ZK_OP_GET_CHILDREN2:
	case ZK_OP_CHECK:
	case ZK_OP_MULTI:
	case ZK_OP_CREATE2:
	case ZK_OP_RECONFIG:
	case ZK_OP_CHECK_WATCHES:
	case ZK_OP_REMOVE_WATCHES:
	case ZK_OP_CREATE_CONTAINER:
	case ZK_OP_DELETE_CONTAINER:
	case ZK_OP_CREATE_TTL:
	case ZK_OP_MULTI_READ:
	case ZK_OP_AUTH:
	case ZK_OP_SET_WATCHES:
	case ZK_OP_SASL:
	case ZK_OP_GET_EPHEMERALS:
	case ZK_OP_GET_ALL_CHILDREN_NUMBER:
	case ZK_OP_SET_WATCHES2:
	case ZK_OP_ADD_WATCH:
	case ZK_OP_WHO_AM_I:
	case ZK_OP_CLOSE_SESSION:
		return true;
	default:
		return false;
	}
}

static void read_create(struct keel_rbuf *r, struct zk_create_request *c, bool ttl)
{
	c->path = zk_read_bytes(r);
	c->data = zk_read_bytes(r);
	c->acl = zk_read_acl_vec(r);
	c->flags = keel_rbuf_i32(r);
	c->ttl_ms = ttl ? keel_rbuf_i64(r) : -1;
}

static void write_create(struct keel_wbuf *w, const struct zk_create_request *c, bool ttl)
{
	zk_write_bytes(w, c->path);
	zk_write_bytes(w, c->data);
	zk_write_acl_vec(w, c->acl);
	keel_wbuf_i32(w, c->flags);
	if (ttl) {
		keel_wbuf_i64(w, c->ttl_ms);
	}
}

static void read_path_version(struct keel_rbuf *r, struct zk_bytes *path, int32_t *version)
{
	*path = zk_read_bytes(r);
	*version = keel_rbuf_i32(r);
}

static void read_path_watch(struct keel_rbuf *r, struct zk_path_watch_request *p)
{
	p->path = zk_read_bytes(r);
	p->watch = keel_rbuf_u8(r) != 0;
}

static void read_set_data(struct keel_rbuf *r, struct zk_set_data_request *s)
{
	s->path = zk_read_bytes(r);
	s->data = zk_read_bytes(r);
	s->version = keel_rbuf_i32(r);
}

static bool multi_op_allowed(int32_t type, bool read)
{
	switch (type) {
	case ZK_OP_CREATE:
	case ZK_OP_CREATE2:
	case ZK_OP_CREATE_CONTAINER:
	case ZK_OP_CREATE_TTL:
	case ZK_OP_DELETE:
	case ZK_OP_SET_DATA:
	case ZK_OP_CHECK:
		return !read;
	case ZK_OP_GET_CHILDREN:
	case ZK_OP_GET_DATA:
		return read;
	default:
		return false;
	}
}

/* Reads one op body of an allowed type. */
static void read_multi_op(struct keel_rbuf *r, struct zk_multi_op *op)
{
	switch (op->opcode) {
	case ZK_OP_CREATE:
	case ZK_OP_CREATE2:
	case ZK_OP_CREATE_CONTAINER:
		read_create(r, &op->u.create, false);
		break;
	case ZK_OP_CREATE_TTL:
		read_create(r, &op->u.create, true);
		break;
	case ZK_OP_DELETE:
		read_path_version(r, &op->u.delete_.path, &op->u.delete_.version);
		break;
	case ZK_OP_SET_DATA:
		read_set_data(r, &op->u.set_data);
		break;
	case ZK_OP_CHECK:
		read_path_version(r, &op->u.check.path, &op->u.check.version);
		break;
	case ZK_OP_GET_CHILDREN:
	case ZK_OP_GET_DATA:
		read_path_watch(r, &op->u.read);
		op->u.read.watch = false; /* multiRead never sets watches */
		break;
	default:
		KEEL_UNREACHABLE();
	}
}

static void read_multi(struct keel_rbuf *r, struct zk_multi_request *m, bool read)
{
	m->ops = r->data + r->pos;
	m->count = 0;
	m->size = 0;
	for (;;) {
		size_t op_start = r->pos;
		int32_t type = keel_rbuf_i32(r);
		bool done = keel_rbuf_u8(r) != 0;
		(void)keel_rbuf_i32(r);
		if (!keel_rbuf_ok(r)) {
			return;
		}
		if (done) {
			m->size = (uint32_t)(op_start - (size_t)(m->ops - r->data));
			return;
		}
		if (!multi_op_allowed(type, read)) {
			keel_rbuf_fail(r);
			return;
		}
		struct zk_multi_op op;
		op.opcode = type;
		read_multi_op(r, &op);
		m->count++;
	}
}

static void read_set_watches(struct keel_rbuf *r, struct zk_set_watches_request *s, bool v2)
{
	s->relative_zxid = keel_rbuf_i64(r);
	for (int i = 0; i < ZK_SW_LIST_COUNT; i++) {
		s->lists[i].count = 0;
		s->lists[i].data = NULL;
		s->lists[i].size = 0;
	}
	int lists = v2 ? ZK_SW_LIST_COUNT : ZK_SW_PERSISTENT;
	for (int i = 0; i < lists; i++) {
		s->lists[i] = zk_read_str_vec(r);
	}
}

enum keel_err zk_request_decode_body(struct zk_request *req, int32_t opcode, const void *body,
				     size_t size)
{
	req->opcode = opcode;
	req->body = body;
	req->body_size = size;
	if (!zk_op_known(opcode)) {
		return KEEL_UNSUPPORTED;
	}
	struct keel_rbuf r;
	keel_rbuf_init(&r, body, size);
	switch (opcode) {
	case ZK_OP_CREATE:
	case ZK_OP_CREATE2:
	case ZK_OP_CREATE_CONTAINER:
		read_create(&r, &req->u.create, false);
		break;
	case ZK_OP_CREATE_TTL:
		read_create(&r, &req->u.create, true);
		break;
	case ZK_OP_DELETE:
		read_path_version(&r, &req->u.delete_.path, &req->u.delete_.version);
		break;
	case ZK_OP_EXISTS:
	case ZK_OP_GET_DATA:
	case ZK_OP_GET_CHILDREN:
	case ZK_OP_GET_CHILDREN2:
		read_path_watch(&r, &req->u.read);
		break;
	case ZK_OP_SET_DATA:
		read_set_data(&r, &req->u.set_data);
		break;
	case ZK_OP_GET_ACL:
	case ZK_OP_SYNC:
	case ZK_OP_GET_ALL_CHILDREN_NUMBER:
	case ZK_OP_GET_EPHEMERALS:
		req->u.path.path = zk_read_bytes(&r);
		break;
	case ZK_OP_DELETE_CONTAINER:
		req->u.path.path = zk_bytes_of(body, size);
		break;
	case ZK_OP_SET_ACL:
		req->u.set_acl.path = zk_read_bytes(&r);
		req->u.set_acl.acl = zk_read_acl_vec(&r);
		req->u.set_acl.version = keel_rbuf_i32(&r);
		break;
	case ZK_OP_CHECK:
		read_path_version(&r, &req->u.check.path, &req->u.check.version);
		break;
	case ZK_OP_MULTI:
	case ZK_OP_MULTI_READ:
		read_multi(&r, &req->u.multi, opcode == ZK_OP_MULTI_READ);
		break;
	case ZK_OP_RECONFIG:
		req->u.reconfig.joining_servers = zk_read_bytes(&r);
		req->u.reconfig.leaving_servers = zk_read_bytes(&r);
		req->u.reconfig.new_members = zk_read_bytes(&r);
		req->u.reconfig.cur_config_id = keel_rbuf_i64(&r);
		break;
	case ZK_OP_CHECK_WATCHES:
	case ZK_OP_REMOVE_WATCHES:
		req->u.watches.path = zk_read_bytes(&r);
		req->u.watches.type = keel_rbuf_i32(&r);
		break;
	case ZK_OP_SET_WATCHES:
	case ZK_OP_SET_WATCHES2:
		read_set_watches(&r, &req->u.set_watches, opcode == ZK_OP_SET_WATCHES2);
		break;
	case ZK_OP_AUTH:
		req->u.auth.type = keel_rbuf_i32(&r);
		req->u.auth.scheme = zk_read_bytes(&r);
		req->u.auth.auth = zk_read_bytes(&r);
		break;
	case ZK_OP_ADD_WATCH:
		req->u.add_watch.path = zk_read_bytes(&r);
		req->u.add_watch.mode = keel_rbuf_i32(&r);
		break;
	case ZK_OP_SASL:
		req->u.sasl.token = zk_read_bytes(&r);
		break;
	case ZK_OP_PING:
	case ZK_OP_WHO_AM_I:
	case ZK_OP_CLOSE_SESSION:
		break;
	default:
		KEEL_UNREACHABLE();
	}
	return keel_rbuf_ok(&r) ? KEEL_OK : KEEL_PROTO;
}

enum keel_err zk_request_decode(struct zk_request *req, const void *frame, size_t size)
{
	if (size < ZK_REQUEST_HEADER_SIZE) {
		return KEEL_SHORT;
	}
	const uint8_t *p = frame;
	req->xid = (int32_t)keel_load_be32(p);
	int32_t opcode = (int32_t)keel_load_be32(p + 4);
	return zk_request_decode_body(req, opcode, p + ZK_REQUEST_HEADER_SIZE,
				      size - ZK_REQUEST_HEADER_SIZE);
}

static void write_multi_op(struct keel_wbuf *w, const struct zk_multi_op *op)
{
	switch (op->opcode) {
	case ZK_OP_CREATE:
	case ZK_OP_CREATE2:
	case ZK_OP_CREATE_CONTAINER:
		write_create(w, &op->u.create, false);
		break;
	case ZK_OP_CREATE_TTL:
		write_create(w, &op->u.create, true);
		break;
	case ZK_OP_DELETE:
		zk_write_bytes(w, op->u.delete_.path);
		keel_wbuf_i32(w, op->u.delete_.version);
		break;
	case ZK_OP_SET_DATA:
		zk_write_bytes(w, op->u.set_data.path);
		zk_write_bytes(w, op->u.set_data.data);
		keel_wbuf_i32(w, op->u.set_data.version);
		break;
	case ZK_OP_CHECK:
		zk_write_bytes(w, op->u.check.path);
		keel_wbuf_i32(w, op->u.check.version);
		break;
	case ZK_OP_GET_CHILDREN:
	case ZK_OP_GET_DATA:
		zk_write_bytes(w, op->u.read.path);
		keel_wbuf_bool(w, op->u.read.watch);
		break;
	default:
		/* Unknown op types can be encoded (for tests of the decoder)
		 * only as a bare header. */
		break;
	}
}

static void write_multi_header(struct keel_wbuf *w, int32_t type, bool done, int32_t err)
{
	keel_wbuf_i32(w, type);
	keel_wbuf_bool(w, done);
	keel_wbuf_i32(w, err);
}

void zk_multi_encode(struct keel_wbuf *w, const struct zk_multi_op *ops, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		write_multi_header(w, ops[i].opcode, false, -1);
		write_multi_op(w, &ops[i]);
	}
	write_multi_header(w, -1, true, -1);
}

void zk_request_body_encode(struct keel_wbuf *w, const struct zk_request *req)
{
	const struct zk_set_watches_request *sw = &req->u.set_watches;
	switch (req->opcode) {
	case ZK_OP_CREATE:
	case ZK_OP_CREATE2:
	case ZK_OP_CREATE_CONTAINER:
		write_create(w, &req->u.create, false);
		break;
	case ZK_OP_CREATE_TTL:
		write_create(w, &req->u.create, true);
		break;
	case ZK_OP_DELETE:
		zk_write_bytes(w, req->u.delete_.path);
		keel_wbuf_i32(w, req->u.delete_.version);
		break;
	case ZK_OP_EXISTS:
	case ZK_OP_GET_DATA:
	case ZK_OP_GET_CHILDREN:
	case ZK_OP_GET_CHILDREN2:
		zk_write_bytes(w, req->u.read.path);
		keel_wbuf_bool(w, req->u.read.watch);
		break;
	case ZK_OP_SET_DATA:
		zk_write_bytes(w, req->u.set_data.path);
		zk_write_bytes(w, req->u.set_data.data);
		keel_wbuf_i32(w, req->u.set_data.version);
		break;
	case ZK_OP_GET_ACL:
	case ZK_OP_SYNC:
	case ZK_OP_GET_ALL_CHILDREN_NUMBER:
	case ZK_OP_GET_EPHEMERALS:
		zk_write_bytes(w, req->u.path.path);
		break;
	case ZK_OP_DELETE_CONTAINER:
		keel_wbuf_bytes(w, req->u.path.path.data, zk_bytes_len(req->u.path.path));
		break;
	case ZK_OP_SET_ACL:
		zk_write_bytes(w, req->u.set_acl.path);
		zk_write_acl_vec(w, req->u.set_acl.acl);
		keel_wbuf_i32(w, req->u.set_acl.version);
		break;
	case ZK_OP_CHECK:
		zk_write_bytes(w, req->u.check.path);
		keel_wbuf_i32(w, req->u.check.version);
		break;
	case ZK_OP_MULTI:
	case ZK_OP_MULTI_READ:
		keel_wbuf_bytes(w, req->u.multi.ops, req->u.multi.size);
		write_multi_header(w, -1, true, -1);
		break;
	case ZK_OP_RECONFIG:
		zk_write_bytes(w, req->u.reconfig.joining_servers);
		zk_write_bytes(w, req->u.reconfig.leaving_servers);
		zk_write_bytes(w, req->u.reconfig.new_members);
		keel_wbuf_i64(w, req->u.reconfig.cur_config_id);
		break;
	case ZK_OP_CHECK_WATCHES:
	case ZK_OP_REMOVE_WATCHES:
		zk_write_bytes(w, req->u.watches.path);
		keel_wbuf_i32(w, req->u.watches.type);
		break;
	case ZK_OP_SET_WATCHES:
	case ZK_OP_SET_WATCHES2: {
		keel_wbuf_i64(w, sw->relative_zxid);
		int lists = req->opcode == ZK_OP_SET_WATCHES2 ? ZK_SW_LIST_COUNT : ZK_SW_PERSISTENT;
		for (int i = 0; i < lists; i++) {
			zk_write_str_vec(w, sw->lists[i]);
		}
		break;
	}
	case ZK_OP_AUTH:
		keel_wbuf_i32(w, req->u.auth.type);
		zk_write_bytes(w, req->u.auth.scheme);
		zk_write_bytes(w, req->u.auth.auth);
		break;
	case ZK_OP_ADD_WATCH:
		zk_write_bytes(w, req->u.add_watch.path);
		keel_wbuf_i32(w, req->u.add_watch.mode);
		break;
	case ZK_OP_SASL:
		zk_write_bytes(w, req->u.sasl.token);
		break;
	default:
		break;
	}
}

void zk_request_encode(struct keel_wbuf *w, const struct zk_request *req)
{
	keel_wbuf_i32(w, req->xid);
	keel_wbuf_i32(w, req->opcode);
	zk_request_body_encode(w, req);
}

/* ---- multi ---- */

void zk_multi_iter_init(struct zk_multi_iter *it, const struct zk_multi_request *m)
{
	keel_rbuf_init(&it->r, m->ops, m->size);
	it->left = m->count;
}

bool zk_multi_iter_next(struct zk_multi_iter *it, struct zk_multi_op *op)
{
	if (it->left == 0) {
		return false;
	}
	it->left--;
	op->opcode = keel_rbuf_i32(&it->r);
	(void)keel_rbuf_u8(&it->r);
	(void)keel_rbuf_i32(&it->r);
	read_multi_op(&it->r, op);
	KEEL_ASSERT(keel_rbuf_ok(&it->r));
	return true;
}

void zk_multi_result_header(struct keel_wbuf *w, int32_t type, int32_t err)
{
	write_multi_header(w, type, false, err);
}

void zk_multi_result_error(struct keel_wbuf *w, int32_t err)
{
	write_multi_header(w, ZK_OP_ERROR, false, err);
	keel_wbuf_i32(w, err);
}

void zk_multi_result_end(struct keel_wbuf *w)
{
	write_multi_header(w, -1, true, -1);
}

void zk_multi_result_iter_init(struct zk_multi_result_iter *it, const void *body, size_t size)
{
	keel_rbuf_init(&it->r, body, size);
	it->failed = false;
}

bool zk_multi_result_next(struct zk_multi_result_iter *it, struct zk_multi_result *res)
{
	struct keel_rbuf *r = &it->r;
	if (it->failed) {
		return false;
	}
	memset(res, 0, sizeof(*res));
	res->type = keel_rbuf_i32(r);
	bool done = keel_rbuf_u8(r) != 0;
	res->err = keel_rbuf_i32(r);
	if (!keel_rbuf_ok(r) || done) {
		it->failed = !keel_rbuf_ok(r);
		return false;
	}
	switch (res->type) {
	case ZK_OP_CREATE:
		res->path = zk_read_bytes(r);
		break;
	case ZK_OP_CREATE2:
		res->path = zk_read_bytes(r);
		zk_read_stat(r, &res->stat);
		break;
	case ZK_OP_DELETE:
	case ZK_OP_CHECK:
		break;
	case ZK_OP_SET_DATA:
		zk_read_stat(r, &res->stat);
		break;
	case ZK_OP_GET_CHILDREN:
		res->children = zk_read_str_vec(r);
		break;
	case ZK_OP_GET_DATA:
		res->data = zk_read_bytes(r);
		zk_read_stat(r, &res->stat);
		break;
	case ZK_OP_ERROR:
		res->err = keel_rbuf_i32(r);
		break;
	default:
		keel_rbuf_fail(r);
		break;
	}
	if (!keel_rbuf_ok(r)) {
		it->failed = true;
		return false;
	}
	return true;
}

/* ---- responses ---- */

enum keel_err zk_response_decode(struct zk_response *rsp, int32_t opcode, const void *body,
				 size_t size)
{
	memset(rsp, 0, sizeof(*rsp));
	rsp->opcode = opcode;
	rsp->path = ZK_BYTES_NULL;
	rsp->data = ZK_BYTES_NULL;
	rsp->acl.count = -1;
	rsp->strings.count = -1;
	struct keel_rbuf r;
	keel_rbuf_init(&r, body, size);
	switch (opcode) {
	case ZK_OP_CREATE:
	case ZK_OP_SYNC:
		rsp->path = zk_read_bytes(&r);
		break;
	case ZK_OP_CREATE2:
	case ZK_OP_CREATE_CONTAINER:
	case ZK_OP_CREATE_TTL:
		rsp->path = zk_read_bytes(&r);
		zk_read_stat(&r, &rsp->stat);
		break;
	case ZK_OP_EXISTS:
	case ZK_OP_SET_DATA:
	case ZK_OP_SET_ACL:
		zk_read_stat(&r, &rsp->stat);
		break;
	case ZK_OP_GET_DATA:
		rsp->data = zk_read_bytes(&r);
		zk_read_stat(&r, &rsp->stat);
		break;
	case ZK_OP_GET_ACL:
		rsp->acl = zk_read_acl_vec(&r);
		zk_read_stat(&r, &rsp->stat);
		break;
	case ZK_OP_GET_CHILDREN:
	case ZK_OP_GET_EPHEMERALS:
		rsp->strings = zk_read_str_vec(&r);
		break;
	case ZK_OP_GET_CHILDREN2:
		rsp->strings = zk_read_str_vec(&r);
		zk_read_stat(&r, &rsp->stat);
		break;
	case ZK_OP_WHO_AM_I: {
		/* vector<ClientInfo{ustring, ustring}>: kept as a string vector
		 * of 2 * count strings. */
		int32_t count = zk_read_count(&r, 8);
		size_t start = r.pos;
		for (int32_t i = 0; i < count; i++) {
			(void)zk_read_bytes(&r);
			(void)zk_read_bytes(&r);
		}
		if (keel_rbuf_ok(&r) && count >= 0) {
			rsp->strings.count = 2 * count;
			rsp->strings.data = r.data + start;
			rsp->strings.size = (uint32_t)(r.pos - start);
		}
		break;
	}
	case ZK_OP_GET_ALL_CHILDREN_NUMBER:
	case ZK_OP_ADD_WATCH:
		rsp->number = keel_rbuf_i32(&r);
		break;
	case ZK_OP_MULTI:
	case ZK_OP_MULTI_READ:
		rsp->multi = body;
		rsp->multi_size = size;
		break;
	default:
		break;
	}
	return keel_rbuf_ok(&r) ? KEEL_OK : KEEL_PROTO;
}

void zk_who_am_i_encode(struct keel_wbuf *w, const struct zk_client_info *infos, size_t count)
{
	keel_wbuf_i32(w, (int32_t)count);
	for (size_t i = 0; i < count; i++) {
		zk_write_bytes(w, infos[i].auth_scheme);
		zk_write_bytes(w, infos[i].user);
	}
}

/* ---- notifications ---- */

void zk_watcher_event_encode(struct keel_wbuf *w, const struct zk_watcher_event *ev)
{
	keel_wbuf_i32(w, ev->type);
	keel_wbuf_i32(w, ev->state);
	zk_write_bytes(w, ev->path);
}

enum keel_err zk_watcher_event_decode(struct zk_watcher_event *ev, struct keel_rbuf *r)
{
	ev->type = keel_rbuf_i32(r);
	ev->state = keel_rbuf_i32(r);
	ev->path = zk_read_bytes(r);
	return keel_rbuf_ok(r) ? KEEL_OK : KEEL_PROTO;
}

void zk_notification_encode(struct keel_wbuf *w, int64_t zxid, int32_t type, int32_t state,
			    struct zk_bytes path)
{
	size_t start = zk_frame_begin(w);
	zk_reply_header_encode(w, ZK_XID_NOTIFICATION, zxid, 0);
	struct zk_watcher_event ev = {type, state, path};
	zk_watcher_event_encode(w, &ev);
	zk_frame_end(w, start);
}
