/*
 * admin.c — the admin protocol, four-letter words and metrics (admin.h).
 *
 * An admin request that changes the cluster lives in a struct admin_req
 * until it is answered. On the leader it walks these states:
 *
 *   ADDR --SET_ADDR committed--> LEARNER --config committed--> CATCHUP
 *     --learner caught up--> PROMOTE --config committed--> DONE
 *   (add-learner stops after LEARNER; promote/remove start at CHANGE;
 *    transfer waits in TRANSFER until the target leads)
 *
 * On a follower a request is FORWARDED to the leader and the reply relayed:
 * a tracked request (tracker.h, kind TRACK_ADMIN), whose deadline, leader
 * change and link loss the tracker handles. On the leader every request has
 * a deadline; the leader losing leadership answers KEEL_NOTLEADER. A
 * request whose client went away is answered to no one.
 */
#include "node/admin.h"
#include "core/controller.h"
#include "node/feed.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/assert.h"
#include "node/client.h"
#include "core/client_zk.h"
#include "core/entry.h"
#include "core/fsm.h"
#include "node/snapshot.h"
#include "core/core.h"
#include "os/log.h"

#define ADMIN_DEADLINE_MS 300000u
#define TRANSFER_DEADLINE_MS 10000u
#define CATCHUP_MARGIN 1000u
/* A reconfig's step: a ZooKeeper client waits for it (NewConfigNoQuorum
 * past this, as ZooKeeper answers when the new servers are not there). */
#define ZK_STEP_DEADLINE_MS 30000u

enum admin_state {
	ADMIN_FORWARDED = 1,
	ADMIN_ADDR,
	ADMIN_LEARNER,
	ADMIN_CATCHUP,
	ADMIN_PROMOTE,
	ADMIN_CHANGE,
	ADMIN_TRANSFER,
};

struct admin_req {
	struct tracker_req track; /* FORWARDED: the leader decides */
	uint64_t client_id; /* local connection waiting, 0: none */
	uint64_t from_peer; /* peer waiting (forwarded to us), 0: none */
	uint64_t peer_req_id; /* the client's request id, or the origin's tracked id */
	uint8_t op;
	uint8_t change;
	uint64_t target;
	char addr[NODE_ADDR_SIZE];
	char zk_tail[CORE_ADDR_SIZE]; /* the address book's client_addr (zk_reconfig.h) */
	uint64_t zk_request_id; /* a ZooKeeper reconfig waiting (client_zk.c), 0: none */
	enum admin_state state;
	bool retry; /* the current step got KEEL_BUSY: try again on tick */
	uint64_t deadline_ms;
	struct node_waiter waiter;
	struct keel_list link; /* in node_admin.reqs */
};

struct node_admin {
	struct keel_list reqs; /* of admin_req */
};

static struct node_admin *admin_of(struct node *n)
{
	if (n->admin == NULL) {
		n->admin = calloc(1, sizeof(*n->admin));
		KEEL_ASSERT(n->admin != NULL);
		keel_list_init(&n->admin->reqs);
	}
	return n->admin;
}

static void wprintf(struct keel_wbuf *w, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static void wprintf(struct keel_wbuf *w, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (len > 0) {
		keel_wbuf_bytes(w, buf, KEEL_MIN((size_t)len, sizeof(buf) - 1));
	}
}

/* ---- replies ---- */

void admin_encode_reply_header(struct keel_wbuf *w, uint8_t op, uint64_t req_id, enum keel_err err,
			       const char *msg)
{
	keel_wbuf_u32(w, ADMIN_MAGIC);
	keel_wbuf_u8(w, ADMIN_VERSION);
	keel_wbuf_u8(w, op);
	keel_wbuf_u64(w, req_id);
	keel_wbuf_u32(w, (uint32_t)err);
	size_t len = strlen(msg);
	keel_wbuf_u16(w, (uint16_t)KEEL_MIN(len, 65535u));
	keel_wbuf_bytes(w, msg, KEEL_MIN(len, 65535u));
}

static void reply_client(struct node *n, uint64_t client_id, uint8_t op, uint64_t req_id,
			 enum keel_err err, const char *msg)
{
	struct node_client *c = node_client_find(n, client_id);
	if (c == NULL) {
		return;
	}
	size_t mark;
	struct keel_wbuf *w = core_client_begin(&n->core, c->id, &mark);
	if (w == NULL) {
		return;
	}
	admin_encode_reply_header(w, op, req_id, err, msg);
	core_client_end(&n->core, c->id, mark);
}

/* Answers whoever waits for `req` and frees it. */
static void req_finish(struct node *n, struct admin_req *req, enum keel_err err, const char *fmt,
		       ...) __attribute__((format(printf, 4, 5)));

static void req_finish(struct node *n, struct admin_req *req, enum keel_err err, const char *fmt,
		       ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (req->client_id != 0) {
		reply_client(n, req->client_id, req->op, req->peer_req_id, err, msg);
	}
	if (req->from_peer != 0) {
		struct tracker_reply hdr = {TRACK_ADMIN, req->from_peer, req->peer_req_id, err, 0};
		size_t mark;
		struct keel_wbuf *w = core_reply_begin(&n->core, &hdr, &mark);
		if (w != NULL) {
			size_t len = strlen(msg);
			keel_wbuf_u16(w, (uint16_t)len);
			keel_wbuf_bytes(w, msg, len);
			core_peer_end(&n->core, req->from_peer, mark);
		}
	}
	if (err == KEEL_OK) {
		KEEL_INFO("admin: %s", msg);
	}
	uint64_t zk_request_id = req->zk_request_id;
	keel_list_remove(&req->link);
	keel_list_remove(&req->waiter.link);
	tracker_finish(&n->core.tracker, &req->track);
	free(req);
	if (zk_request_id != 0) {
		/* Last: the reconfig may start its next step from here. */
		zk_clients_reconfig_step_done(&n->core, zk_request_id, err, msg);
	}
}

/* ---- the leader's state machine for membership ---- */

static void step(struct node *n, struct admin_req *req);

static void on_committed(struct node_core *c, struct node_waiter *w, enum keel_err err)
{
	struct node *n = node_of(c);
	struct admin_req *req = w->ctx;
	if (err != KEEL_OK) {
		req_finish(n, req, err == KEEL_CANCELED ? KEEL_NOTLEADER : err,
			   "leadership changed before the change committed; retry");
		return;
	}
	switch (req->state) {
	case ADMIN_ADDR:
		req->state = ADMIN_LEARNER;
		step(n, req);
		return;
	case ADMIN_LEARNER:
		if (req->change == ADMIN_MEMBER_ADD_LEARNER) {
			req_finish(n, req, KEEL_OK, "server %llu added as a learner",
				   (unsigned long long)req->target);
			return;
		}
		req->state = ADMIN_CATCHUP;
		step(n, req);
		return;
	case ADMIN_PROMOTE:
		req_finish(n, req, KEEL_OK, "server %llu is a voter",
			   (unsigned long long)req->target);
		return;
	case ADMIN_CHANGE:
		if (req->change == ADMIN_MEMBER_REMOVE) {
			/* Best effort: forget its address so nobody dials it. */
			struct keel_wbuf e;
			keel_wbuf_init_dynamic(&e, 64, 1024);
			node_entry_encode_header(&e, NODE_ENTRY_CLUSTER, 0, 0,
			                         core_wall_ms(&n->core));
			keel_wbuf_u8(&e, NODE_CLUSTER_DEL_ADDR);
			keel_wbuf_u64(&e, req->target);
			uint64_t idx, term;
			if (n->core.role == RAFT_LEADER) {
				(void)core_propose(&n->core, e.data, (uint32_t)e.size, &idx, &term);
			}
			keel_wbuf_free(&e);
			req_finish(n, req, KEEL_OK, "server %llu removed",
				   (unsigned long long)req->target);
		} else {
			req_finish(n, req, KEEL_OK, "server %llu promoted to voter",
				   (unsigned long long)req->target);
		}
		return;
	default:
		req_finish(n, req, KEEL_INVAL, "internal: unexpected state");
	}
}

static void wait_for(struct node *n, struct admin_req *req, uint64_t index, uint64_t term)
{
	KEEL_ASSERT(!keel_list_linked(&req->waiter.link));
	memset(&req->waiter, 0, sizeof(req->waiter));
	req->waiter.index = index;
	req->waiter.term = term;
	req->waiter.done = on_committed;
	req->waiter.ctx = req;
	core_wait_commit(&n->core, &req->waiter);
}

static const char *change_error(enum keel_err rc)
{
	switch (rc) {
	case KEEL_EXIST:
		return "the server already has that role";
	case KEEL_NOENT:
		return "no such member";
	case KEEL_INVAL:
		return "not allowed (e.g. removing the last voter, promoting a voter)";
	case KEEL_LIMIT:
		return "too many members";
	case KEEL_NOTLEADER:
		return "this server is no longer the leader";
	default:
		return keel_strerror(rc);
	}
}

static bool learner_caught_up(struct node *n, uint64_t id)
{
	struct raft_status st;
	raft_status(n->core.raft, &st);
	for (uint32_t i = 0; i < st.n_members; i++) {
		if (st.members[i].id == id) {
			return st.members[i].match_index + CATCHUP_MARGIN >= st.commit_index &&
			       st.members[i].state == RAFT_PROGRESS_REPLICATE;
		}
	}
	return false;
}

static void step(struct node *n, struct admin_req *req)
{
	uint64_t index = 0, term = 0;
	enum keel_err rc = KEEL_OK;
	req->retry = false;
	if (n->core.role != RAFT_LEADER) {
		req_finish(n, req, KEEL_NOTLEADER, "this server is not the leader");
		return;
	}
	switch (req->state) {
	case ADMIN_ADDR: {
		struct keel_wbuf e;
		keel_wbuf_init_dynamic(&e, 128, 4096);
		node_entry_encode_header(&e, NODE_ENTRY_CLUSTER, 0, 0, core_wall_ms(&n->core));
		keel_wbuf_u8(&e, NODE_CLUSTER_SET_ADDR);
		keel_wbuf_u64(&e, req->target);
		size_t len = strlen(req->addr);
		keel_wbuf_u16(&e, (uint16_t)len);
		keel_wbuf_bytes(&e, req->addr, len);
		len = strlen(req->zk_tail); /* ZooKeeper's view (reconfig), or none */
		keel_wbuf_u16(&e, (uint16_t)len);
		keel_wbuf_bytes(&e, req->zk_tail, len);
		rc = core_propose(&n->core, e.data, (uint32_t)e.size, &index, &term);
		keel_wbuf_free(&e);
		break;
	}
	case ADMIN_LEARNER:
		rc = raft_change_member(n->core.raft, RAFT_ADD_LEARNER, req->target, &index, &term);
		if (rc == KEEL_EXIST) {
			/* Already a learner (a retried add): go on. */
			req->state = ADMIN_LEARNER;
			struct node_waiter w = {.ctx = req};
			keel_list_init(&w.link);
			on_committed(&n->core, &w, KEEL_OK);
			return;
		}
		break;
	case ADMIN_CATCHUP:
		if (!learner_caught_up(n, req->target)) {
			req->retry = true; /* checked again on tick */
			return;
		}
		req->state = ADMIN_PROMOTE;
		rc = raft_change_member(n->core.raft, RAFT_PROMOTE, req->target, &index, &term);
		break;
	case ADMIN_PROMOTE:
		rc = raft_change_member(n->core.raft, RAFT_PROMOTE, req->target, &index, &term);
		break;
	case ADMIN_CHANGE:
		rc = raft_change_member(n->core.raft,
		                        req->change == ADMIN_MEMBER_REMOVE ? RAFT_REMOVE
		                                                           : RAFT_PROMOTE,
		                        req->target, &index, &term);
		break;
	case ADMIN_TRANSFER:
		if (n->core.leader == req->target) {
			req_finish(n, req, KEEL_OK, "server %llu is the leader",
				   (unsigned long long)req->target);
			return;
		}
		rc = raft_transfer_leader(n->core.raft, req->target);
		if (rc == KEEL_OK) {
			return; /* admin_on_leader_change / tick finish it */
		}
		break;
	default:
		KEEL_UNREACHABLE();
	}
	if (rc == KEEL_BUSY) {
		req->retry = true;
		return;
	}
	if (rc != KEEL_OK) {
		req_finish(n, req, rc, "%s", change_error(rc));
		return;
	}
	wait_for(n, req, index, term);
	core_drive(&n->core);
}

/* ---- requests arriving ---- */

static struct admin_req *req_new(struct node *n, uint8_t op)
{
	struct admin_req *req = calloc(1, sizeof(*req));
	if (req == NULL) {
		return NULL;
	}
	struct node_admin *a = admin_of(n);
	req->op = op;
	req->deadline_ms = core_now_ms(&n->core) + ADMIN_DEADLINE_MS;
	keel_list_init(&req->waiter.link);
	keel_list_init(&req->link);
	keel_list_init(&req->track.link);
	keel_list_push_front(&a->reqs, &req->link);
	return req;
}

/* Parses an op body into req; false on a malformed body. */
static bool parse_body(struct admin_req *req, const uint8_t *body, size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, body, size);
	if (req->op == ADMIN_OP_MEMBER_CHANGE) {
		req->change = keel_rbuf_u8(&r);
		req->target = keel_rbuf_u64(&r);
		uint16_t len = keel_rbuf_u16(&r);
		const uint8_t *a = keel_rbuf_bytes(&r, len);
		if (keel_rbuf_ok(&r) && keel_rbuf_remaining(&r) > 0) {
			/* Optional: the ZooKeeper tail of a reconfig. */
			uint16_t tail_len = keel_rbuf_u16(&r);
			const uint8_t *t = keel_rbuf_bytes(&r, tail_len);
			if (t == NULL || tail_len >= sizeof(req->zk_tail)) {
				return false;
			}
			memcpy(req->zk_tail, t, tail_len);
			req->zk_tail[tail_len] = '\0';
		}
		if (!keel_rbuf_done(&r) || len >= sizeof(req->addr) || req->target == 0 ||
		    req->target > 254 || req->change < ADMIN_MEMBER_ADD ||
		    req->change > ADMIN_MEMBER_REMOVE) {
			return false;
		}
		memcpy(req->addr, a, len);
		req->addr[len] = '\0';
		switch (req->change) {
		case ADMIN_MEMBER_ADD:
		case ADMIN_MEMBER_ADD_LEARNER: {
			struct sockaddr_storage ss;
			if (net_parse_addr(req->addr, &ss) != KEEL_OK) {
				return false;
			}
			req->state = ADMIN_ADDR;
			break;
		}
		case ADMIN_MEMBER_PROMOTE:
		case ADMIN_MEMBER_REMOVE:
			req->state = ADMIN_CHANGE;
			break;
		default:
			return false;
		}
		return true;
	}
	if (req->op == ADMIN_OP_TRANSFER) {
		req->target = keel_rbuf_u64(&r);
		req->state = ADMIN_TRANSFER;
		req->deadline_ms = req->deadline_ms - ADMIN_DEADLINE_MS + TRANSFER_DEADLINE_MS;
		return keel_rbuf_done(&r) && req->target != 0;
	}
	return false;
}

static void forward_to_leader(struct node *n, struct admin_req *req, const uint8_t *body,
			      size_t size)
{
	req->track.request_id = tracker_next_id(&n->core.tracker);
	uint64_t to;
	size_t mark;
	struct keel_wbuf *w =
	        core_request_begin(&n->core, TRACK_ADMIN, req->track.request_id, &to, &mark);
	if (w == NULL) {
		req_finish(n, req, KEEL_NOLEADER, "no link to the leader (%llu)",
			   (unsigned long long)n->core.leader);
		return;
	}
	keel_wbuf_u8(w, req->op);
	keel_wbuf_bytes(w, body, size);
	core_peer_end(&n->core, to, mark);
	req->state = ADMIN_FORWARDED;
	uint64_t now = core_now_ms(&n->core);
	uint64_t timeout = req->deadline_ms > now ? req->deadline_ms - now : 1;
	if (tracker_add(&n->core.tracker, &req->track, TRACK_ADMIN, timeout, to, n->core.term,
	                now) != KEEL_OK) {
		req_finish(n, req, KEEL_NOMEM, "out of memory");
	}
}

/* The leader's answer to a request we forwarded: u16 length + message. */
static void track_reply(void *ctx, struct tracker_req *treq, const struct tracker_reply *hdr,
			const uint8_t *body, size_t size)
{
	struct node *n = ctx;
	struct admin_req *req = KEEL_CONTAINER_OF(treq, struct admin_req, track);
	struct keel_rbuf r;
	keel_rbuf_init(&r, body, size);
	uint16_t len = keel_rbuf_u16(&r);
	const uint8_t *msg = keel_rbuf_bytes(&r, len);
	if (!keel_rbuf_ok(&r)) {
		req_finish(n, req, KEEL_PROTO, "the leader's reply was malformed");
		return;
	}
	char text[512];
	size_t l = KEEL_MIN((size_t)len, sizeof(text) - 1);
	memcpy(text, msg, l);
	text[l] = '\0';
	req_finish(n, req, hdr->err, "%s", text);
}

static void track_fail(void *ctx, struct tracker_req *treq, enum keel_err err)
{
	struct node *n = ctx;
	struct admin_req *req = KEEL_CONTAINER_OF(treq, struct admin_req, track);
	if (err == KEEL_TIMEOUT) {
		req_finish(n, req, err, "timed out");
	} else {
		req_finish(n, req, err, "no answer from the leader (link lost or leader changed); "
					"retry");
	}
}

const struct tracker_kind_ops admin_track_ops = {
	.fail = track_fail,
	.reply = track_reply,
	.resend = NULL, /* not held: fails at once without a leader */
};

/* Parses a new request's body and runs it here (leader), forwards it, or
 * refuses it (no leader). */
static void start_request(struct node *n, struct admin_req *req, const uint8_t *body,
			  size_t size)
{
	if (!parse_body(req, body, size)) {
		req_finish(n, req, KEEL_INVAL, "malformed admin request");
		return;
	}
	if (n->core.role == RAFT_LEADER) {
		step(n, req);
	} else if (n->core.leader != 0) {
		forward_to_leader(n, req, body, size);
	} else {
		req_finish(n, req, KEEL_NOLEADER, "no leader is known right now; retry");
	}
}

void admin_on_frame(struct node *n, struct node_client *c, const uint8_t *payload, size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, payload, size);
	uint32_t magic = keel_rbuf_u32(&r);
	uint8_t version = keel_rbuf_u8(&r);
	uint8_t op = keel_rbuf_u8(&r);
	uint64_t req_id = keel_rbuf_u64(&r);
	if (!keel_rbuf_ok(&r) || magic != ADMIN_MAGIC || version != ADMIN_VERSION) {
		core_client_close(&n->core, c->id, KEEL_PROTO, false);
		return;
	}
	size_t body_size = keel_rbuf_remaining(&r);
	const uint8_t *body = keel_rbuf_bytes(&r, body_size);
	if (op == ADMIN_OP_STATUS) {
		size_t mark;
		struct keel_wbuf *w = core_client_begin(&n->core, c->id, &mark);
		if (w != NULL) {
			admin_encode_reply_header(w, op, req_id, KEEL_OK, "");
			admin_status_json(n, w);
			core_client_end(&n->core, c->id, mark);
		}
		return;
	}
	if (op == ADMIN_OP_AUTH_NONCE || op == ADMIN_OP_AUTH) {
		admin_auth_on_frame(n, c, op, req_id, body, body_size);
		return;
	}
	if (!admin_auth_allowed(n, c)) {
		KEEL_WARN("admin op %u from %s refused: not authenticated", op,
			  c->conn.peer_addr);
		reply_client(
		        n, c->id, op, req_id, KEEL_AUTH,
		        "not authorized: membership changes, leadership transfer and snapshots "
		        "need an operator (--cluster-secret-file, or the super digest)");
		return;
	}
	if (op == ADMIN_OP_SNAPSHOT) {
		enum keel_err rc = snapshot_request(n);
		reply_client(n, c->id, op, req_id, rc,
			     rc == KEEL_OK ? "snapshot started" : "a snapshot is already running");
		return;
	}
	struct admin_req *req = req_new(n, op);
	if (req == NULL) {
		reply_client(n, c->id, op, req_id, KEEL_NOMEM, "out of memory");
		return;
	}
	req->client_id = c->id;
	req->peer_req_id = req_id;
	start_request(n, req, body, body_size);
}

void admin_member_change_for_zk(struct node *n, uint64_t zk_request_id, uint8_t change,
				uint64_t id, const char *peer_addr, const char *zk_tail)
{
	uint8_t body[1 + 8 + 2 + NODE_ADDR_SIZE + 2 + CORE_ADDR_SIZE];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, body, sizeof(body));
	size_t plen = strlen(peer_addr), tlen = strlen(zk_tail);
	keel_wbuf_u8(&w, change);
	keel_wbuf_u64(&w, id);
	keel_wbuf_u16(&w, (uint16_t)plen);
	keel_wbuf_bytes(&w, peer_addr, plen);
	keel_wbuf_u16(&w, (uint16_t)tlen);
	keel_wbuf_bytes(&w, zk_tail, tlen);
	if (!keel_wbuf_ok(&w)) {
		zk_clients_reconfig_step_done(&n->core, zk_request_id, KEEL_INVAL,
		                              "address too long");
		return;
	}
	struct admin_req *req = req_new(n, ADMIN_OP_MEMBER_CHANGE);
	if (req == NULL) {
		zk_clients_reconfig_step_done(&n->core, zk_request_id, KEEL_NOMEM, "out of memory");
		return;
	}
	req->zk_request_id = zk_request_id;
	req->deadline_ms = core_now_ms(&n->core) + ZK_STEP_DEADLINE_MS;
	start_request(n, req, w.data, w.size);
}

void admin_on_client_closed(struct node *n, struct node_client *c)
{
	struct keel_list *it;
	KEEL_LIST_FOR_EACH (it, &admin_of(n)->reqs) {
		struct admin_req *req = KEEL_LIST_ITEM(it, struct admin_req, link);
		if (req->client_id == c->id) {
			req->client_id = 0; /* finish the work, answer nobody */
		}
	}
}

void admin_on_forward(struct node *n, uint64_t from, uint64_t request_id, const uint8_t *body,
		      size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, body, size);
	uint8_t op = keel_rbuf_u8(&r);
	if (!keel_rbuf_ok(&r)) {
		return;
	}
	size_t rest = keel_rbuf_remaining(&r);
	const uint8_t *b = keel_rbuf_bytes(&r, rest);
	struct admin_req *req = req_new(n, op);
	if (req == NULL) {
		return; /* the origin's deadline answers */
	}
	req->from_peer = from;
	req->peer_req_id = request_id;
	if (!parse_body(req, b, rest)) {
		req_finish(n, req, KEEL_INVAL, "malformed admin request");
	} else if (n->core.role != RAFT_LEADER) {
		req_finish(n, req, KEEL_NOTLEADER, "this server is not the leader; retry");
	} else {
		step(n, req);
	}
}

void admin_on_reads(struct node *n, const struct raft_read_result *reads, size_t count)
{
	(void)n;
	(void)reads;
	(void)count;
}

void admin_on_leader_change(struct node *n)
{
	struct keel_list *it, *next;
	KEEL_LIST_FOR_EACH_SAFE (it, next, &admin_of(n)->reqs) {
		struct admin_req *req = KEEL_LIST_ITEM(it, struct admin_req, link);
		bool transferred = req->op == ADMIN_OP_TRANSFER && n->core.leader == req->target;
		if ((req->state == ADMIN_TRANSFER || req->state == ADMIN_FORWARDED) &&
		    transferred) {
			req_finish(n, req, KEEL_OK, "leadership transferred to server %llu",
				   (unsigned long long)req->target);
		} else if (req->state == ADMIN_FORWARDED) {
			/* The old leader may still answer (its reply crosses the
			 * change): the tracker keeps it in doubt for a while. */
		} else if (req->state != ADMIN_TRANSFER && n->core.role != RAFT_LEADER &&
		           req->waiter.index == 0) {
			req_finish(n, req, KEEL_NOTLEADER, "this server is no longer the leader");
		}
	}
}

void admin_tick(struct node *n, uint64_t now_ms)
{
	struct keel_list *it, *next;
	KEEL_LIST_FOR_EACH_SAFE (it, next, &admin_of(n)->reqs) {
		struct admin_req *req = KEEL_LIST_ITEM(it, struct admin_req, link);
		if (req->state == ADMIN_FORWARDED) {
			continue; /* the tracker times it */
		}
		if (now_ms >= req->deadline_ms) {
			if (keel_list_linked(&req->waiter.link)) {
				/* Still waiting for a commit: let it decide. */
				req->deadline_ms = now_ms + 1000;
			} else {
				req_finish(n, req, KEEL_TIMEOUT, "timed out");
			}
		} else if (req->retry) {
			step(n, req);
		}
	}
}

void admin_close(struct node *n)
{
	if (n->admin == NULL) {
		return;
	}
	struct keel_list *it;
	while ((it = keel_list_pop_front(&n->admin->reqs)) != NULL) {
		struct admin_req *req = KEEL_LIST_ITEM(it, struct admin_req, link);
		keel_list_remove(&req->waiter.link);
		tracker_finish(&n->core.tracker, &req->track);
		free(req);
	}
	free(n->admin);
	n->admin = NULL;
}

/* ---- status ---- */

static const char *member_role_name(uint8_t role)
{
	return role == RAFT_VOTER ? "voter" : role == RAFT_LEARNER ? "learner" : "none";
}

void admin_status_json(struct node *n, struct keel_wbuf *w)
{
	struct raft_status st;
	raft_status(n->core.raft, &st);
	wprintf(w,
		"{\"id\":%llu,\"role\":\"%s\",\"term\":%llu,\"leader\":%llu,"
		"\"commit_index\":%llu,\"applied_index\":%llu,\"last_index\":%llu,"
		"\"persisted_index\":%llu,\"snapshot_index\":%llu,\"znodes\":%llu,"
		"\"sessions\":%llu,\"connections\":%zu,\"uptime_ms\":%llu,\"members\":[",
		(unsigned long long)st.id, raft_role_name(st.role), (unsigned long long)st.term,
		(unsigned long long)st.leader, (unsigned long long)st.commit_index,
		(unsigned long long)n->core.applied_index, (unsigned long long)st.last_index,
		(unsigned long long)st.persisted_index, (unsigned long long)st.snapshot_index,
		(unsigned long long)fsm_znode_count(n->core.fsm),
		(unsigned long long)fsm_session_count(n->core.fsm), node_clients_count(n),
		(unsigned long long)(core_now_ms(&n->core) - n->start_ms));
	for (uint32_t i = 0; i < st.n_members; i++) {
		const struct raft_member_status *m = &st.members[i];
		const struct node_addr *a = core_addr_find(&n->core, m->id);
		wprintf(w, "%s{\"id\":%llu,\"role\":\"%s\",\"peer_addr\":\"%s\"", i ? "," : "",
			(unsigned long long)m->id, member_role_name(m->role),
			a != NULL ? a->peer_addr : "");
		if (st.role == RAFT_LEADER) {
			uint64_t lag =
			        st.last_index > m->match_index ? st.last_index - m->match_index : 0;
			wprintf(w,
			        ",\"match_index\":%llu,\"next_index\":%llu,\"state\":\"%s\","
			        "\"lag\":%llu,\"active\":%s",
			        (unsigned long long)m->match_index,
			        (unsigned long long)m->next_index,
			        m->id == st.id ? "self" : raft_progress_state_name(m->state),
			        (unsigned long long)lag, m->recent_active ? "true" : "false");
		}
		if (m->id != st.id) {
			wprintf(w, ",\"connected\":%s",
				core_peer_connected(&n->core, m->id) ? "true" : "false");
		}
		wprintf(w, "}");
	}
	wprintf(w, "]}\n");
}

/* ---- four-letter words ---- */

static const char *zk_mode(struct node *n)
{
	struct raft_status st;
	raft_status(n->core.raft, &st);
	for (uint32_t i = 0; i < st.n_members; i++) {
		if (st.members[i].id == n->cfg.id && st.members[i].role == RAFT_LEARNER) {
			return "observer";
		}
	}
	if (n->core.role == RAFT_LEADER) {
		return "leader";
	}
	return n->core.leader != 0 ? "follower" : "candidate";
}

static void four_srvr(struct node *n, struct keel_wbuf *out, bool with_clients)
{
	struct node_client_stats cs;
	node_clients_stats(n, &cs);
	wprintf(out, "Zookeeper version: 3.8.0-keel-0.1.0, built on keel\n");
	if (with_clients) {
		wprintf(out, "Clients:\n");
		node_clients_describe(n, out, false);
		wprintf(out, "\n");
	}
	wprintf(out,
	        "Latency min/avg/max: %llu/%.4f/%llu\nReceived: %llu\nSent: %llu\n"
	        "Connections: %zu\nOutstanding: %llu\nZxid: 0x%llx\nMode: %s\nNode count: %llu\n",
	        (unsigned long long)cs.latency_min_ms, cs.latency_avg_ms,
	        (unsigned long long)cs.latency_max_ms, (unsigned long long)cs.packets_received,
	        (unsigned long long)cs.packets_sent, node_clients_count(n),
	        (unsigned long long)cs.outstanding, (unsigned long long)n->core.applied_index,
	        zk_mode(n), (unsigned long long)fsm_znode_count(n->core.fsm));
	if (!with_clients) {
		wprintf(out, "Proposal sizes last/min/max: -1/-1/-1\n");
	}
}

static long open_fds(void)
{
	long count = 0;
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL) {
		return -1;
	}
	while (readdir(d) != NULL) {
		count++;
	}
	closedir(d);
	return count - 3; /* ".", ".." and the directory's own descriptor */
}

static void four_mntr(struct node *n, struct keel_wbuf *out)
{
	struct node_client_stats cs;
	node_clients_stats(n, &cs);
	struct raft_status st;
	raft_status(n->core.raft, &st);
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	wprintf(out, "zk_version\t3.8.0-keel-0.1.0, built on keel\n");
	wprintf(out, "zk_server_state\t%s\n", zk_mode(n));
	wprintf(out, "zk_avg_latency\t%.4f\nzk_max_latency\t%llu\nzk_min_latency\t%llu\n",
		cs.latency_avg_ms, (unsigned long long)cs.latency_max_ms,
		(unsigned long long)cs.latency_min_ms);
	wprintf(out, "zk_packets_received\t%llu\nzk_packets_sent\t%llu\n",
		(unsigned long long)cs.packets_received, (unsigned long long)cs.packets_sent);
	wprintf(out, "zk_num_alive_connections\t%zu\nzk_outstanding_requests\t%llu\n",
		node_clients_count(n), (unsigned long long)cs.outstanding);
	wprintf(out, "zk_znode_count\t%llu\nzk_watch_count\t%llu\nzk_ephemerals_count\t%llu\n",
		(unsigned long long)fsm_znode_count(n->core.fsm), (unsigned long long)cs.watches,
		(unsigned long long)fsm_ephemeral_count(n->core.fsm));
	wprintf(out, "zk_approximate_data_size\t%llu\n",
		(unsigned long long)fsm_data_bytes(n->core.fsm));
	wprintf(out, "zk_open_file_descriptor_count\t%ld\nzk_max_file_descriptor_count\t%llu\n",
		open_fds(), (unsigned long long)rl.rlim_cur);
	node_ctl_mntr(n, out);
	wprintf(out, "zk_connection_rejected\t%llu\n",
		(unsigned long long)node_limits_refused_total(&n->limits));
	if (n->core.role == RAFT_LEADER) {
		uint32_t followers = 0, synced = 0;
		for (uint32_t i = 0; i < st.n_members; i++) {
			if (st.members[i].id == st.id) {
				continue;
			}
			followers++;
			if (st.members[i].recent_active && st.members[i].role == RAFT_VOTER) {
				synced++;
			}
		}
		wprintf(out, "zk_followers\t%u\nzk_synced_followers\t%u\nzk_pending_syncs\t0\n",
			followers, synced);
	}
	wprintf(out, "keel_server_id\t%llu\nkeel_raft_term\t%llu\nkeel_raft_leader\t%llu\n",
		(unsigned long long)st.id, (unsigned long long)st.term,
		(unsigned long long)st.leader);
	wprintf(out, "keel_commit_index\t%llu\nkeel_applied_index\t%llu\nkeel_last_index\t%llu\n",
		(unsigned long long)st.commit_index, (unsigned long long)n->core.applied_index,
		(unsigned long long)st.last_index);
	wprintf(out, "keel_snapshot_index\t%llu\nkeel_sessions\t%llu\nkeel_proposals\t%llu\n",
		(unsigned long long)st.snapshot_index,
		(unsigned long long)fsm_session_count(n->core.fsm),
		(unsigned long long)n->core.stats.proposals);
	wprintf(out, "keel_fsync_p99_us\t%llu\nkeel_append_p99_us\t%llu\n",
		(unsigned long long)metrics_hist_quantile(&n->core.stats.fsync_latency, 0.99),
		(unsigned long long)metrics_hist_quantile(&n->core.stats.append_latency, 0.99));
}

static void four_conf(struct node *n, struct keel_wbuf *out)
{
	const struct node_config *c = &n->cfg;
	const char *colon = strrchr(c->listen, ':');
	wprintf(out, "clientPort=%s\n", colon != NULL ? colon + 1 : c->listen);
	wprintf(out, "secureClientPort=-1\ndataDir=%s\ndataLogDir=%s\n", c->data_dir, c->data_dir);
	wprintf(out, "tickTime=%u\nmaxClientCnxns=%u\nminSessionTimeout=%u\nmaxSessionTimeout=%u\n",
		c->tick_ms, c->max_client_connections, c->min_session_timeout_ms,
		c->max_session_timeout_ms);
	wprintf(out, "clientPortListenBacklog=-1\nserverId=%llu\n", (unsigned long long)c->id);
	for (size_t i = 0; i < n->core.book.count; i++) {
		wprintf(out, "server.%llu=%s\n", (unsigned long long)n->core.book.addrs[i].id,
			n->core.book.addrs[i].peer_addr);
	}
	wprintf(out, "jute.maxbuffer=%u\nelectionTimeoutMs=%u\nheartbeatMs=%u\n",
	        c->max_packet_bytes, c->election_timeout_ms, c->heartbeat_ms);
}

/* The words keel answers (when the whitelist allows). */
static bool four_letter_known(const char word[4])
{
	static const char known[] = "ruok srvr stat mntr conf cons isro envi wchs srst crst dirs";
	for (size_t i = 0; i + 4 <= sizeof(known) - 1; i += 5) {
		if (memcmp(known + i, word, 4) == 0) {
			return true;
		}
	}
	return false;
}

bool admin_four_letter(struct node *n, const char word[4], struct keel_wbuf *out)
{
	if (!four_letter_known(word)) {
		return false;
	}
	if (!node_config_4lw_allowed(&n->cfg, word)) {
		wprintf(out, "%.4s is not executed because it is not in the whitelist.\n", word);
		return true;
	}
	if (memcmp(word, "ruok", 4) == 0) {
		wprintf(out, "imok");
	} else if (memcmp(word, "srvr", 4) == 0) {
		four_srvr(n, out, false);
	} else if (memcmp(word, "stat", 4) == 0) {
		four_srvr(n, out, true);
	} else if (memcmp(word, "mntr", 4) == 0) {
		four_mntr(n, out);
	} else if (memcmp(word, "conf", 4) == 0) {
		four_conf(n, out);
	} else if (memcmp(word, "cons", 4) == 0) {
		node_clients_describe(n, out, true);
		wprintf(out, "\n");
	} else if (memcmp(word, "isro", 4) == 0) {
		wprintf(out, zk_clients_read_only(&n->core) ? "ro" : "rw");
	} else if (memcmp(word, "envi", 4) == 0) {
		char host[256] = "";
		gethostname(host, sizeof(host) - 1);
		wprintf(out, "Environment:\nzookeeper.version=3.8.0-keel-0.1.0\nhost.name=%s\n"
			     "os.name=Linux\nuser.dir=%s\n",
			host, n->cfg.data_dir);
	} else if (memcmp(word, "wchs", 4) == 0) {
		struct node_client_stats cs;
		node_clients_stats(n, &cs);
		wprintf(out, "%zu connections watching %llu paths\nTotal watches:%llu\n",
			node_clients_count(n), (unsigned long long)cs.watched_paths,
			(unsigned long long)cs.watches);
	} else if (memcmp(word, "srst", 4) == 0) {
		node_clients_reset_stats(n);
		wprintf(out, "Server stats reset.\n");
	} else if (memcmp(word, "crst", 4) == 0) {
		node_clients_reset_stats(n);
		wprintf(out, "Connection stats reset.\n");
	} else if (memcmp(word, "dirs", 4) == 0) {
		wprintf(out, "datadir_size: 0\nlogdir_size: 0\n");
	} else {
		return false;
	}
	return true;
}

/* ---- metrics ---- */

static void metrics_text(struct node *n, struct keel_wbuf *w)
{
	struct raft_status st;
	raft_status(n->core.raft, &st);
	struct node_client_stats cs;
	node_clients_stats(n, &cs);
	metrics_gauge(w, "keel_raft_term", "Current Raft term", (double)st.term);
	metrics_gauge(w, "keel_raft_role",
		      "Raft role: 1 follower, 2 pre-candidate, 3 candidate, 4 leader",
		      (double)st.role);
	metrics_gauge(w, "keel_raft_is_leader", "1 when this server leads", st.role == RAFT_LEADER);
	metrics_gauge(w, "keel_raft_leader_id", "Id of the known leader (0: none)",
		      (double)st.leader);
	metrics_gauge(w, "keel_raft_commit_index", "Raft commit index", (double)st.commit_index);
	metrics_gauge(w, "keel_raft_applied_index", "Last entry applied to the state machine",
		      (double)n->core.applied_index);
	metrics_gauge(w, "keel_raft_last_index", "Last log index", (double)st.last_index);
	metrics_gauge(w, "keel_raft_snapshot_index", "Index of the newest snapshot",
		      (double)st.snapshot_index);
	metrics_counter(w, "keel_raft_proposals_total", "Proposals accepted by this leader",
			n->core.stats.proposals);
	metrics_counter(w, "keel_raft_proposals_failed_total", "Proposals refused",
			n->core.stats.proposals_failed);
	metrics_counter(w, "keel_raft_leader_changes_total", "Leader changes seen",
			n->core.stats.leader_changes);
	metrics_counter(w, "keel_raft_entries_applied_total", "Entries applied",
			n->core.stats.entries_applied);
	metrics_counter(w, "keel_raft_follower_lost_entries_total",
			"Followers found missing entries they had acknowledged (disk lost data)",
			st.follower_lost_entries);
	metrics_counter(w, "keel_snapshots_taken_total", "Snapshots written",
			n->core.stats.snapshots_taken);
	metrics_counter(w, "keel_snapshots_installed_total", "Snapshots installed from the leader",
			n->core.stats.snapshots_installed);
	metrics_histogram(w, "keel_wal_append_seconds",
			  "Time from handing a batch to storage to it being durable",
			  &n->core.stats.append_latency);
	metrics_histogram(w, "keel_wal_fsync_seconds", "fdatasync duration",
			  &n->core.stats.fsync_latency);
	metrics_histogram(w, "keel_request_seconds", "Client request latency",
			  &n->core.stats.request_latency);
	metrics_counter(w, "keel_network_bytes_in_total", "Bytes received (clients and peers)",
			n->nl.bytes_in);
	metrics_counter(w, "keel_network_bytes_out_total", "Bytes sent (clients and peers)",
			n->nl.bytes_out);
	metrics_gauge(w, "keel_client_connections", "Open client connections",
		      (double)node_clients_count(n));
	metrics_counter(w, "keel_client_requests_total", "Client requests received",
			cs.packets_received);
	metrics_gauge(w, "keel_sessions", "Live sessions", (double)fsm_session_count(n->core.fsm));
	metrics_gauge(w, "keel_znodes", "Znodes in the tree", (double)fsm_znode_count(n->core.fsm));
	metrics_gauge(w, "keel_watches", "Watches held by this server's connections",
		      (double)cs.watches);
	node_ctl_metrics(n, w);
	metrics_counter(w, "keel_peer_connections_refused_total",
			"Peer connections refused: failed handshake, non-member, limits",
			n->peers.refused);
	metrics_gauge(w, "keel_peer_handshakes", "Peer connections not yet authenticated",
		      (double)n->peers.handshakes);
	metrics_counter(w, "keel_tls_failures_total",
			"TLS connections (secure client port, peers) closed by a failed handshake "
			"or record",
			n->nl.tls_failures);
	node_limits_metrics(n, w);
	node_feed_metrics(n, w);
}

int admin_http_handler(void *ctx, const char *path, struct keel_wbuf *body,
		       const char **content_type)
{
	struct node *n = ctx;
	if (strcmp(path, "/metrics") == 0) {
		*content_type = "text/plain; version=0.0.4; charset=utf-8";
		metrics_text(n, body);
		return 200;
	}
	if (strcmp(path, "/status") == 0) {
		*content_type = "application/json";
		admin_status_json(n, body);
		return 200;
	}
	if (strcmp(path, "/health") == 0 || strcmp(path, "/") == 0) {
		wprintf(body, "%s\n", n->core.failed ? "failed" : "ok");
		return n->core.failed ? 500 : 200;
	}
	wprintf(body, "not found; try /metrics, /status or /health\n");
	return 404;
}
