/*
 * zk_client.c — simulated ZooKeeper clients (zk_sim.h).
 *
 * A client's life:
 *
 *	IDLE --open + ConnectRequest--> CONNECTING --ConnectResponse--> ACTIVE
 *	  ^                                 |  timeOut 0: session expired  |
 *	  +---------------------------------+  (learned; a new session next)|
 *	  +--- connection closed / request timed out (a move: reconnect ---+
 *	  |    with the session id and password, often to another server)
 *	  +--- ABANDONED: hung up without closeSession and kept quiet past
 *	       the session timeout; reconnects with the old session, which
 *	       must be expired by then
 *
 * Requests are pipelined (at most SIMZK_MAX_OUT per connection); a reply
 * must answer the oldest request in flight, as ZooKeeper's client expects —
 * anything else is recorded as a stray. A request unanswered for
 * op_timeout_ms makes the client hang up (its requests become UNKNOWN),
 * the way a ZooKeeper client reports ConnectionLoss. An idle ACTIVE client
 * pings every third of its session timeout.
 *
 * Every random choice comes from the clients' own PRNG, in a fixed order,
 * so a seed replays exactly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "sim/zk_sim.h"
#include "zk/zk_codes.h"

static const char *const dirs[] = {"/w", "/e", "/s"};

static struct simzk_client *by_conn(struct simzk_clients *cs, uint64_t conn)
{
	for (uint32_t i = 0; i < cs->count; i++) {
		if (cs->c[i].conn == conn && conn != 0) {
			return &cs->c[i];
		}
	}
	return NULL;
}

void simzk_clients_init(struct simzk_clients *cs, uint32_t count, uint32_t servers, uint64_t seed,
			const struct simzk_transport *tr, struct simzk_history *h)
{
	memset(cs, 0, sizeof(*cs));
	cs->tr = *tr;
	cs->hist = h;
	keel_rng_seed(&cs->rng, seed);
	cs->servers = servers;
	cs->count = count;
	cs->c = calloc(count, sizeof(*cs->c));
	KEEL_ASSERT(cs->c != NULL);
	for (uint32_t i = 0; i < count; i++) {
		cs->c[i].id = i;
		cs->c[i].connect_op = SIMZK_NONE;
		cs->c[i].expire_op = SIMZK_NONE;
		cs->c[i].next_xid = 1;
	}
	cs->next_conn = 1;
	cs->next_value = 1;
	cs->session_timeout_ms = 4000;
	cs->op_timeout_ms = 2000;
	keel_wbuf_init_dynamic(&cs->w, 256, 1u << 20);
}

void simzk_clients_free(struct simzk_clients *cs)
{
	free(cs->c);
	keel_wbuf_free(&cs->w);
	memset(cs, 0, sizeof(*cs));
}

/* ---- sending ---- */

static void send_w(struct simzk_clients *cs, struct simzk_client *c)
{
	KEEL_ASSERT(keel_wbuf_ok(&cs->w));
	cs->tr.send(cs->tr.ctx, c->conn, cs->w.data, cs->w.size);
	c->last_send_ms = cs->now_ms;
}

static void op_base(const struct simzk_client *c, struct simzk_op *op, uint8_t kind)
{
	memset(op, 0, sizeof(*op));
	op->kind = kind;
	op->client = c->id;
	op->server = c->server;
	op->conn = c->conn;
	op->session = c->session;
	op->after_sync = SIMZK_NONE;
	op->zxid = -1;
}

/* Completes history op `index` now. */
static struct simzk_op *done(struct simzk_clients *cs, size_t index)
{
	struct simzk_op *op = simzk_history_complete(cs->hist, index);
	op->complete_ms = cs->now_ms;
	return op;
}

static void open_session(struct simzk_clients *cs, struct simzk_client *c, uint32_t server)
{
	c->conn = cs->next_conn++;
	c->server = server;
	c->state = SIMZK_C_CONNECTING;
	c->out_count = 0;
	cs->tr.open(cs->tr.ctx, server, c->conn);
	struct zk_connect_request req = {
		.protocol_version = 0,
		.last_zxid_seen = c->last_zxid,
		.timeout_ms = cs->session_timeout_ms,
		.session_id = c->session,
		.passwd = zk_bytes_of(c->passwd, c->session != 0 ? ZK_PASSWD_SIZE : 0),
		.read_only = false,
		.has_read_only = true,
	};
	if (c->session == 0) {
		memset(c->passwd, 0, sizeof(c->passwd));
		req.passwd = zk_bytes_of(c->passwd, ZK_PASSWD_SIZE);
	}
	keel_wbuf_reset(&cs->w);
	size_t start = zk_frame_begin(&cs->w);
	zk_connect_request_encode(&cs->w, &req);
	zk_frame_end(&cs->w, start);
	struct simzk_op op;
	op_base(c, &op, SIMZK_CONNECT);
	op.invoke_ms = cs->now_ms;
	op.opcode = ZK_OP_CREATE_SESSION;
	c->connect_op = simzk_history_invoke(cs->hist, &op);
	c->oldest_sent_ms = cs->now_ms;
	send_w(cs, c);
}

/* Sends req (xid assigned here) and records `op` (its arguments). */
static void send_request(struct simzk_clients *cs, struct simzk_client *c, struct zk_request *req,
			 struct simzk_op *op)
{
	KEEL_ASSERT(c->state == SIMZK_C_ACTIVE);
	KEEL_ASSERT(c->out_count < SIMZK_MAX_OUT);
	bool sw = req->opcode == ZK_OP_SET_WATCHES || req->opcode == ZK_OP_SET_WATCHES2;
	req->xid = req->opcode == ZK_OP_PING ? ZK_XID_PING : sw ? ZK_XID_SET_WATCHES : c->next_xid++;
	keel_wbuf_reset(&cs->w);
	size_t start = zk_frame_begin(&cs->w);
	if (req->opcode == ZK_OP_MULTI) {
		struct zk_multi_op mops[SIMZK_MULTI_MAX];
		struct zk_acl_vec acl = zk_acl_open_unsafe();
		for (uint32_t i = 0; i < op->sub_count; i++) {
			const struct simzk_sub *s = &op->sub[i];
			struct zk_multi_op *m = &mops[i];
			memset(m, 0, sizeof(*m));
			m->opcode = s->opcode;
			struct zk_bytes path = zk_bytes_str(s->path);
			switch (s->opcode) {
			case ZK_OP_CREATE:
				m->u.create = (struct zk_create_request){
					path, zk_bytes_of(&op->sub[i].value, 0), acl, s->flags, -1};
				break;
			case ZK_OP_SET_DATA:
				m->u.set_data.path = path;
				m->u.set_data.version = s->version;
				break;
			case ZK_OP_DELETE:
				m->u.delete_ = (struct zk_delete_request){path, s->version};
				break;
			default:
				m->u.check = (struct zk_check_request){path, s->version};
				break;
			}
		}
		/* Data: the 8-byte big-endian value of each write. */
		uint8_t data[SIMZK_MULTI_MAX][8];
		for (uint32_t i = 0; i < op->sub_count; i++) {
			keel_store_be64(data[i], op->sub[i].value);
			if (mops[i].opcode == ZK_OP_CREATE) {
				mops[i].u.create.data = zk_bytes_of(data[i], 8);
			} else if (mops[i].opcode == ZK_OP_SET_DATA) {
				mops[i].u.set_data.data = zk_bytes_of(data[i], 8);
			}
		}
		keel_wbuf_i32(&cs->w, req->xid);
		keel_wbuf_i32(&cs->w, req->opcode);
		zk_multi_encode(&cs->w, mops, op->sub_count);
	} else {
		zk_request_encode(&cs->w, req);
	}
	zk_frame_end(&cs->w, start);
	op->xid = req->xid;
	op->opcode = req->opcode;
	op->invoke_ms = cs->now_ms;
	size_t idx = simzk_history_invoke(cs->hist, op);
	if (c->out_count == 0) {
		c->oldest_sent_ms = cs->now_ms;
	}
	c->out[c->out_count++] = (struct simzk_out){req->xid, req->opcode, idx};
	cs->ops++;
	send_w(cs, c);
}

static void register_path(struct simzk_clients *cs, char *out, const char *dir)
{
	snprintf(out, SIMZK_PATH_MAX, "%s/k%u", dir, (unsigned)keel_rng_below(&cs->rng, SIMZK_KEYS));
}

static const char *reg_dir(struct simzk_clients *cs)
{
	return keel_rng_chance(&cs->rng, 1, 2) ? "/w" : "/e";
}

static int32_t pick_version(struct simzk_clients *cs)
{
	return keel_rng_chance(&cs->rng, 1, 2) ? -1 : (int32_t)keel_rng_below(&cs->rng, 3);
}

static void do_create(struct simzk_clients *cs, struct simzk_client *c, const char *path,
		      int32_t flags, uint64_t value)
{
	struct simzk_op op;
	op_base(c, &op, SIMZK_REQUEST);
	snprintf(op.path, sizeof(op.path), "%s", path);
	op.flags = flags;
	op.value = value;
	uint8_t data[8];
	keel_store_be64(data, value);
	struct zk_request req = {.opcode = flags == ZK_CREATE_CONTAINER ? ZK_OP_CREATE_CONTAINER
									 : ZK_OP_CREATE2};
	req.u.create = (struct zk_create_request){zk_bytes_str(op.path),
						  value != 0 ? zk_bytes_of(data, 8)
							     : zk_bytes_of(data, 0),
						  zk_acl_open_unsafe(), flags, -1};
	send_request(cs, c, &req, &op);
}

static void do_read(struct simzk_clients *cs, struct simzk_client *c, int32_t opcode,
		    const char *path, bool watch, size_t after_sync)
{
	struct simzk_op op;
	op_base(c, &op, SIMZK_REQUEST);
	snprintf(op.path, sizeof(op.path), "%s", path);
	op.watch = watch;
	op.after_sync = after_sync;
	struct zk_request req = {.opcode = opcode};
	req.u.read = (struct zk_path_watch_request){zk_bytes_str(op.path), watch};
	cs->watches += watch;
	send_request(cs, c, &req, &op);
}

static void do_path_op(struct simzk_clients *cs, struct simzk_client *c, int32_t opcode,
		       const char *path)
{
	struct simzk_op op;
	op_base(c, &op, SIMZK_REQUEST);
	snprintf(op.path, sizeof(op.path), "%s", path);
	struct zk_request req = {.opcode = opcode};
	req.u.path.path = zk_bytes_str(op.path);
	send_request(cs, c, &req, &op);
}

static void do_multi(struct simzk_clients *cs, struct simzk_client *c)
{
	struct simzk_op op;
	op_base(c, &op, SIMZK_REQUEST);
	op.sub_count = (uint32_t)keel_rng_between(&cs->rng, 2, SIMZK_MULTI_MAX);
	uint64_t start = keel_rng_below(&cs->rng, SIMZK_KEYS);
	for (uint32_t i = 0; i < op.sub_count; i++) {
		struct simzk_sub *s = &op.sub[i];
		/* Distinct paths under /w (the per-path checks assume it). */
		snprintf(s->path, sizeof(s->path), "/w/k%u", (unsigned)((start + i) % SIMZK_KEYS));
		static const int32_t kinds[] = {ZK_OP_CREATE, ZK_OP_SET_DATA, ZK_OP_DELETE,
						ZK_OP_CHECK};
		s->opcode = kinds[keel_rng_below(&cs->rng, 4)];
		s->version = s->opcode == ZK_OP_CREATE ? 0 : pick_version(cs);
		if (s->opcode == ZK_OP_CHECK && s->version < 0) {
			s->version = 0;
		}
		s->value = s->opcode == ZK_OP_CREATE || s->opcode == ZK_OP_SET_DATA
				   ? cs->next_value++
				   : 0;
	}
	struct zk_request req = {.opcode = ZK_OP_MULTI};
	send_request(cs, c, &req, &op);
}

/* One random request from an ACTIVE client with room in its pipeline. */
static void do_work(struct simzk_clients *cs, struct simzk_client *c)
{
	char path[SIMZK_PATH_MAX];
	uint64_t r = keel_rng_below(&cs->rng, 100);
	if (r < 12) {
		register_path(cs, path, "/w");
		int32_t flags = keel_rng_chance(&cs->rng, 1, 4) ? ZK_CREATE_CONTAINER
								 : ZK_CREATE_PERSISTENT;
		do_create(cs, c, path, flags, cs->next_value++);
	} else if (r < 22) {
		register_path(cs, path, "/e");
		do_create(cs, c, path, ZK_CREATE_EPHEMERAL, cs->next_value++);
	} else if (r < 26) {
		do_create(cs, c, "/s/n-",
			  keel_rng_chance(&cs->rng, 1, 2) ? ZK_CREATE_PERSISTENT_SEQUENTIAL
							  : ZK_CREATE_EPHEMERAL_SEQUENTIAL,
			  cs->next_value++);
	} else if (r < 41) {
		struct simzk_op op;
		op_base(c, &op, SIMZK_REQUEST);
		register_path(cs, op.path, reg_dir(cs));
		op.value = cs->next_value++;
		op.version = pick_version(cs);
		uint8_t data[8];
		keel_store_be64(data, op.value);
		struct zk_request req = {.opcode = ZK_OP_SET_DATA};
		req.u.set_data = (struct zk_set_data_request){zk_bytes_str(op.path),
							      zk_bytes_of(data, 8), op.version};
		send_request(cs, c, &req, &op);
	} else if (r < 49) {
		struct simzk_op op;
		op_base(c, &op, SIMZK_REQUEST);
		register_path(cs, op.path, reg_dir(cs));
		op.version = pick_version(cs);
		struct zk_request req = {.opcode = ZK_OP_DELETE};
		req.u.delete_ = (struct zk_delete_request){zk_bytes_str(op.path), op.version};
		send_request(cs, c, &req, &op);
	} else if (r < 64) {
		register_path(cs, path, reg_dir(cs));
		do_read(cs, c, ZK_OP_GET_DATA, path, keel_rng_chance(&cs->rng, 1, 2), SIMZK_NONE);
	} else if (r < 72) {
		register_path(cs, path, reg_dir(cs));
		do_read(cs, c, ZK_OP_EXISTS, path, keel_rng_chance(&cs->rng, 1, 2), SIMZK_NONE);
	} else if (r < 77) {
		const char *dir = reg_dir(cs); /* draws in a fixed order */
		do_read(cs, c, ZK_OP_GET_CHILDREN, dir, keel_rng_chance(&cs->rng, 1, 2), SIMZK_NONE);
	} else if (r < 80) {
		struct simzk_op op;
		op_base(c, &op, SIMZK_REQUEST);
		/* recursive on a directory; persistent on a directory or a register */
		op.mode = keel_rng_chance(&cs->rng, 1, 2) ? ZK_ADD_WATCH_PERSISTENT_RECURSIVE
							  : ZK_ADD_WATCH_PERSISTENT;
		if (op.mode == ZK_ADD_WATCH_PERSISTENT && keel_rng_chance(&cs->rng, 1, 2)) {
			register_path(cs, op.path, reg_dir(cs));
		} else {
			snprintf(op.path, sizeof(op.path), "%s", dirs[keel_rng_below(&cs->rng, 3)]);
		}
		struct zk_request req = {.opcode = ZK_OP_ADD_WATCH};
		req.u.add_watch = (struct zk_add_watch_request){zk_bytes_str(op.path), op.mode};
		cs->watches++;
		send_request(cs, c, &req, &op);
	} else if (r < 86) {
		do_multi(cs, c);
	} else if (r < 93 && c->out_count + 2 <= SIMZK_MAX_OUT) {
		/* sync, then read behind it on the same connection */
		register_path(cs, path, reg_dir(cs));
		do_path_op(cs, c, ZK_OP_SYNC, path);
		size_t sync_op = c->out[c->out_count - 1].op;
		do_read(cs, c, keel_rng_chance(&cs->rng, 1, 2) ? ZK_OP_GET_DATA : ZK_OP_EXISTS,
			path, false, sync_op);
	} else {
		register_path(cs, path, reg_dir(cs));
		do_read(cs, c, ZK_OP_GET_DATA, path, false, SIMZK_NONE);
	}
}

/* ---- losing a connection ---- */

static void fail_outstanding(struct simzk_clients *cs, struct simzk_client *c)
{
	for (uint32_t i = 0; i < c->out_count; i++) {
		simzk_history_unknown(cs->hist, c->out[i].op);
	}
	c->out_count = 0;
	if (c->state == SIMZK_C_CONNECTING && c->connect_op != SIMZK_NONE) {
		simzk_history_unknown(cs->hist, c->connect_op);
	}
	c->connect_op = SIMZK_NONE;
}

/* The connection is gone (closed by the server, or hung up by us). */
static void lost(struct simzk_clients *cs, struct simzk_client *c, bool hang_up)
{
	if (hang_up) {
		cs->tr.close(cs->tr.ctx, c->conn);
	}
	fail_outstanding(cs, c);
	c->conn = 0;
	if (c->state != SIMZK_C_ABANDONED) {
		c->state = SIMZK_C_IDLE;
		c->quiet_until_ms = cs->now_ms + keel_rng_below(&cs->rng, 50);
	}
}

/* ---- receiving ---- */

static uint16_t path_bit(const char *path)
{
	int i = simzk_path_index(path);
	return i < 0 ? 0 : (uint16_t)(1u << i);
}

/* A watch the server registered (or the event that consumed one). */
static void track_watch(struct simzk_client *c, const struct simzk_op *op)
{
	uint16_t bit = path_bit(op->path);
	if (op->watch && op->opcode == ZK_OP_GET_DATA && op->err == 0) {
		c->w_data |= bit;
	} else if (op->watch && op->opcode == ZK_OP_EXISTS && op->err == 0) {
		c->w_data |= bit;
	} else if (op->watch && op->opcode == ZK_OP_EXISTS && op->err == ZK_NO_NODE) {
		c->w_exist |= bit;
	} else if (op->watch && op->opcode == ZK_OP_GET_CHILDREN && op->err == 0) {
		c->w_child |= bit;
	} else if (op->opcode == ZK_OP_ADD_WATCH && op->err == 0 &&
		   op->mode == ZK_ADD_WATCH_PERSISTENT) {
		c->w_persistent |= bit;
	} else if (op->opcode == ZK_OP_ADD_WATCH && op->err == 0) {
		c->w_recursive |= bit;
	}
}

static void track_event(struct simzk_client *c, int32_t type, const char *path)
{
	uint16_t bit = path_bit(path);
	if (type == ZK_EVENT_NODE_CREATED || type == ZK_EVENT_NODE_DELETED ||
	    type == ZK_EVENT_NODE_DATA_CHANGED) {
		c->w_data &= (uint16_t)~bit;
		c->w_exist &= (uint16_t)~bit;
	}
	if (type == ZK_EVENT_NODE_CHILDREN_CHANGED || type == ZK_EVENT_NODE_DELETED) {
		c->w_child &= (uint16_t)~bit;
	}
}

/* After a move: set the session's watches again on the new connection,
 * relative to the last zxid seen (the server fires what changed since). */
static void set_watches(struct simzk_clients *cs, struct simzk_client *c)
{
	struct simzk_op op;
	op_base(c, &op, SIMZK_REQUEST);
	op.sw_data = c->w_data;
	op.sw_exist = c->w_exist;
	op.sw_child = c->w_child;
	op.sw_persistent = c->w_persistent;
	op.sw_recursive = c->w_recursive;
	op.relative_zxid = c->last_zxid;
	const uint16_t masks[ZK_SW_LIST_COUNT] = {c->w_data, c->w_exist, c->w_child,
						  c->w_persistent, c->w_recursive};
	bool v2 = (c->w_persistent | c->w_recursive) != 0;
	struct zk_request req = {.opcode = v2 ? ZK_OP_SET_WATCHES2 : ZK_OP_SET_WATCHES};
	req.u.set_watches.relative_zxid = c->last_zxid;
	uint8_t mem[ZK_SW_LIST_COUNT][256];
	struct keel_wbuf lw[ZK_SW_LIST_COUNT];
	for (int l = 0; l < ZK_SW_LIST_COUNT; l++) {
		const char *paths[SIMZK_WATCHABLE];
		size_t n = 0;
		for (int i = 0; i < SIMZK_WATCHABLE; i++) {
			if ((masks[l] >> i) & 1u) {
				paths[n++] = simzk_path_name(i);
			}
		}
		keel_wbuf_init_fixed(&lw[l], mem[l], sizeof(mem[l]));
		req.u.set_watches.lists[l] = zk_str_vec_build(&lw[l], paths, n);
		KEEL_ASSERT(keel_wbuf_ok(&lw[l]));
	}
	send_request(cs, c, &req, &op);
}

static void on_connect_response(struct simzk_clients *cs, struct simzk_client *c,
				const uint8_t *payload, size_t size)
{
	struct zk_connect_response rsp;
	if (zk_connect_response_decode(&rsp, payload, size) != KEEL_OK) {
		simzk_history_stray(cs->hist, c->id, c->conn, 0, "ConnectResponse does not decode");
		lost(cs, c, true);
		return;
	}
	struct simzk_op *op = done(cs, c->connect_op);
	c->connect_op = SIMZK_NONE;
	if (rsp.timeout_ms <= 0) {
		/* The session is gone; the server closes the connection. */
		op->expired = true;
		op->new_session = 0;
		if (c->expire_op != SIMZK_NONE) {
			struct simzk_op *e = done(cs, c->expire_op);
			e->expired = true;
			c->expire_op = SIMZK_NONE;
		}
		c->session = 0;
		c->state = SIMZK_C_ACTIVE; /* until the close arrives; sends nothing */
		c->quiet_until_ms = SIMZK_TIME_INF;
		return;
	}
	if (c->session != 0 && rsp.session_id != c->session) {
		simzk_history_stray(cs->hist, c->id, c->conn, 0, "resumed another session");
	}
	bool resumed = c->session != 0;
	if (!resumed) {
		cs->sessions++;
		c->w_data = c->w_exist = c->w_child = c->w_persistent = c->w_recursive = 0;
	}
	op->new_session = rsp.session_id;
	c->session = rsp.session_id;
	if (rsp.passwd.size == ZK_PASSWD_SIZE) {
		memcpy(c->passwd, rsp.passwd.data, ZK_PASSWD_SIZE);
	}
	c->timeout_ms = rsp.timeout_ms;
	c->state = SIMZK_C_ACTIVE;
	c->quiet_until_ms = 0;
	if (c->expire_op != SIMZK_NONE) {
		/* It lived on (the server had not expired it yet). */
		simzk_history_unknown(cs->hist, c->expire_op);
		c->expire_op = SIMZK_NONE;
	}
	if (resumed &&
	    (c->w_data | c->w_exist | c->w_child | c->w_persistent | c->w_recursive) != 0) {
		set_watches(cs, c);
	}
}

static void on_event(struct simzk_clients *cs, struct simzk_client *c, const struct zk_reply_header *hdr,
		     struct keel_rbuf *r)
{
	struct zk_watcher_event we;
	if (zk_watcher_event_decode(&we, r) != KEEL_OK) {
		simzk_history_stray(cs->hist, c->id, c->conn, hdr->xid, "event does not decode");
		return;
	}
	struct simzk_event ev = {.client = c->id,
				 .server = c->server,
				 .conn = c->conn,
				 .session = c->session,
				 .type = we.type,
				 .zxid = hdr->zxid};
	size_t n = zk_bytes_len(we.path) < SIMZK_PATH_MAX - 1 ? zk_bytes_len(we.path)
							       : SIMZK_PATH_MAX - 1;
	memcpy(ev.path, we.path.data, n);
	simzk_history_event(cs->hist, &ev);
	track_event(c, ev.type, ev.path);
	cs->events++;
}

static uint64_t data_value(struct zk_bytes data)
{
	return data.size == 8 ? keel_load_be64(data.data) : 0;
}

static void copy_path(char *out, struct zk_bytes p)
{
	size_t n = zk_bytes_len(p) < SIMZK_PATH_MAX - 1 ? zk_bytes_len(p) : SIMZK_PATH_MAX - 1;
	memcpy(out, p.data, n);
	out[n] = '\0';
}

/* Fills op's result from a reply body; false if it does not decode. */
static bool decode_result(struct simzk_op *op, const uint8_t *body, size_t size)
{
	if (op->err != 0 && op->opcode != ZK_OP_MULTI) {
		return true;
	}
	struct zk_response rsp;
	if (zk_response_decode(&rsp, op->opcode, body, size) != KEEL_OK) {
		return false;
	}
	switch (op->opcode) {
	case ZK_OP_CREATE2:
	case ZK_OP_CREATE_CONTAINER:
		copy_path(op->created, rsp.path);
		op->stat = rsp.stat;
		break;
	case ZK_OP_GET_DATA:
		op->read_value = data_value(rsp.data);
		op->stat = rsp.stat;
		break;
	case ZK_OP_EXISTS:
	case ZK_OP_SET_DATA:
		op->stat = rsp.stat;
		break;
	case ZK_OP_MULTI: {
		struct zk_multi_result_iter it;
		zk_multi_result_iter_init(&it, rsp.multi, rsp.multi_size);
		struct zk_multi_result res;
		uint32_t i = 0;
		while (zk_multi_result_next(&it, &res)) {
			if (i >= op->sub_count) {
				return false;
			}
			op->sub[i].err = res.type == ZK_OP_ERROR ? (res.err == 0 ? ZK_RUNTIME_INCONSISTENCY
										   : res.err)
								 : 0;
			if (res.type == ZK_OP_ERROR && res.err != 0 && op->err == 0) {
				op->err = res.err; /* the multi failed: first real error */
			}
			i++;
		}
		if (it.failed || i != op->sub_count) {
			return false;
		}
		break;
	}
	default:
		break;
	}
	return true;
}

static void on_reply(struct simzk_clients *cs, struct simzk_client *c, const struct zk_reply_header *hdr,
		     struct keel_rbuf *r)
{
	if (c->out_count == 0 || c->out[0].xid != hdr->xid) {
		char what[64];
		snprintf(what, sizeof(what), "reply to xid %d, expected %d", hdr->xid,
			 c->out_count > 0 ? c->out[0].xid : 0);
		simzk_history_stray(cs->hist, c->id, c->conn, hdr->xid, what);
		return;
	}
	struct simzk_out o = c->out[0];
	memmove(&c->out[0], &c->out[1], (c->out_count - 1) * sizeof(c->out[0]));
	c->out_count--;
	c->oldest_sent_ms = cs->now_ms;
	struct simzk_op *op = done(cs, o.op);
	op->err = hdr->err;
	op->zxid = hdr->zxid;
	if (hdr->zxid > c->last_zxid) {
		c->last_zxid = hdr->zxid;
	}
	size_t left = keel_rbuf_remaining(r);
	if (!decode_result(op, keel_rbuf_bytes(r, left), left)) {
		simzk_history_stray(cs->hist, c->id, c->conn, hdr->xid, "reply does not decode");
	}
	track_watch(c, op);
	if (!cs->setup_done && c->id == 0 && strcmp(op->path, dirs[c->setup_step]) == 0 &&
	    (op->err == 0 || op->err == ZK_NODE_EXISTS) && ++c->setup_step == 3) {
		cs->setup_done = true;
	}
	if (o.opcode == ZK_OP_CLOSE_SESSION && hdr->err == 0) {
		c->session = 0; /* the server closes the connection next */
		c->quiet_until_ms = SIMZK_TIME_INF;
	}
}

void simzk_clients_on_frame(struct simzk_clients *cs, uint64_t conn, const uint8_t *frame,
			    size_t size)
{
	struct simzk_client *c = by_conn(cs, conn);
	if (c == NULL) {
		return; /* a frame for a connection we already hung up */
	}
	uint32_t payload_size = 0;
	if (zk_frame_check(frame, size, ZK_DEFAULT_MAX_PACKET, &payload_size) != ZK_FRAME_READY ||
	    (size_t)payload_size + 4 != size) {
		simzk_history_stray(cs->hist, c->id, conn, 0, "bad frame");
		lost(cs, c, true);
		return;
	}
	const uint8_t *payload = frame + 4;
	if (c->state == SIMZK_C_CONNECTING) {
		on_connect_response(cs, c, payload, payload_size);
		return;
	}
	struct keel_rbuf r;
	keel_rbuf_init(&r, payload, payload_size);
	struct zk_reply_header hdr;
	if (zk_reply_header_decode(&hdr, &r) != KEEL_OK) {
		simzk_history_stray(cs->hist, c->id, conn, 0, "reply header does not decode");
		lost(cs, c, true);
		return;
	}
	if (hdr.xid == ZK_XID_NOTIFICATION) {
		on_event(cs, c, &hdr, &r);
		return;
	}
	on_reply(cs, c, &hdr, &r);
}

void simzk_clients_on_closed(struct simzk_clients *cs, uint64_t conn)
{
	struct simzk_client *c = by_conn(cs, conn);
	if (c != NULL) {
		lost(cs, c, false);
	}
}

/* ---- acting ---- */

static uint32_t pick_server(struct simzk_clients *cs, const struct simzk_client *c)
{
	if (cs->servers > 1 && keel_rng_chance(&cs->rng, 2, 3)) {
		return (c->server + 1 + (uint32_t)keel_rng_below(&cs->rng, cs->servers - 1)) %
		       cs->servers;
	}
	return (uint32_t)keel_rng_below(&cs->rng, cs->servers);
}

static void act(struct simzk_clients *cs, struct simzk_client *c)
{
	uint64_t now = cs->now_ms;
	switch (c->state) {
	case SIMZK_C_IDLE:
		if (now >= c->quiet_until_ms && !(cs->finishing && c->session == 0)) {
			open_session(cs, c, pick_server(cs, c));
		}
		return;
	case SIMZK_C_CONNECTING:
		if (now - c->oldest_sent_ms > cs->op_timeout_ms) {
			lost(cs, c, true);
		}
		return;
	case SIMZK_C_ABANDONED:
		if (now >= c->quiet_until_ms) {
			if (c->conn != 0) {
				lost(cs, c, true); /* kept open and never closed by the server */
			}
			c->state = SIMZK_C_IDLE;
			open_session(cs, c, pick_server(cs, c));
		}
		return;
	default:
		break;
	}
	/* ACTIVE */
	if (c->out_count > 0 && now - c->oldest_sent_ms > cs->op_timeout_ms) {
		lost(cs, c, true);
		return;
	}
	if (c->session == 0 || c->quiet_until_ms == SIMZK_TIME_INF) {
		return; /* expired or closed: waiting for the server's close */
	}
	if (c->out_count == 0 && now - c->last_send_ms >= (uint64_t)c->timeout_ms / 3) {
		struct simzk_op op;
		op_base(c, &op, SIMZK_REQUEST);
		struct zk_request req = {.opcode = ZK_OP_PING};
		send_request(cs, c, &req, &op);
		return;
	}
	if (cs->finishing) {
		return;
	}
	if (!cs->setup_done) {
		if (c->id == 0 && c->out_count == 0) {
			do_create(cs, c, dirs[c->setup_step], ZK_CREATE_PERSISTENT, 0);
		}
		return;
	}
	if (c->out_count >= SIMZK_MAX_OUT || !keel_rng_chance(&cs->rng, 1, 40)) {
		return;
	}
	uint64_t r = keel_rng_below(&cs->rng, 1000);
	if (r < 15) { /* move to another server, keeping the session */
		cs->moves++;
		lost(cs, c, true);
		c->quiet_until_ms = now;
		return;
	}
	if (r < 22) { /* abandon the session: it must expire */
		struct simzk_op op;
		op_base(c, &op, SIMZK_EXPIRE);
		op.invoke_ms = now;
		c->expire_op = simzk_history_invoke(cs->hist, &op);
		cs->expiries++;
		/* Half hang up; half stay connected and silent, so that the
		 * server's expiry closes a live connection. */
		if (keel_rng_chance(&cs->rng, 1, 2)) {
			lost(cs, c, true);
		}
		c->state = SIMZK_C_ABANDONED;
		c->quiet_until_ms = now + 2 * (uint64_t)c->timeout_ms + keel_rng_below(&cs->rng, 1000);
		return;
	}
	if (r < 30) { /* closeSession */
		cs->closes++;
		struct simzk_op op;
		op_base(c, &op, SIMZK_REQUEST);
		struct zk_request req = {.opcode = ZK_OP_CLOSE_SESSION};
		send_request(cs, c, &req, &op);
		c->quiet_until_ms = SIMZK_TIME_INF;
		return;
	}
	do_work(cs, c);
}

/* Sends the final sync + read of a client whose pipeline drained; marks
 * it done (quiet for good). */
static void final_read(struct simzk_clients *cs, struct simzk_client *c)
{
	if (c->state != SIMZK_C_ACTIVE || c->session == 0 || c->out_count > 0 ||
	    c->quiet_until_ms == SIMZK_TIME_INF) {
		return;
	}
	char path[SIMZK_PATH_MAX];
	register_path(cs, path, reg_dir(cs));
	do_path_op(cs, c, ZK_OP_SYNC, path);
	size_t sync_op = c->out[c->out_count - 1].op;
	do_read(cs, c, ZK_OP_GET_DATA, path, false, sync_op);
	c->quiet_until_ms = SIMZK_TIME_INF;
}

void simzk_clients_step(struct simzk_clients *cs, uint64_t now_ms)
{
	cs->now_ms = now_ms;
	for (uint32_t i = 0; i < cs->count; i++) {
		act(cs, &cs->c[i]);
		if (cs->finishing) {
			final_read(cs, &cs->c[i]);
		}
	}
}

void simzk_clients_finish(struct simzk_clients *cs)
{
	cs->finishing = true;
	for (uint32_t i = 0; i < cs->count; i++) {
		struct simzk_client *c = &cs->c[i];
		if (c->state == SIMZK_C_ABANDONED) {
			c->quiet_until_ms = 0; /* learn the expiry now */
		}
	}
}

bool simzk_clients_idle(const struct simzk_clients *cs)
{
	for (uint32_t i = 0; i < cs->count; i++) {
		const struct simzk_client *c = &cs->c[i];
		bool idle = (c->state == SIMZK_C_IDLE && c->session == 0) ||
			    (c->state == SIMZK_C_ACTIVE && c->session != 0 && c->out_count == 0 &&
			     c->quiet_until_ms == SIMZK_TIME_INF);
		if (!idle) {
			return false;
		}
	}
	return true;
}
