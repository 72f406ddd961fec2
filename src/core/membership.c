/*
 * membership.c — membership changes and leadership transfers (membership.h).
 *
 * A request that changes the cluster lives in a struct admin_req until it
 * is answered. On the leader it walks these states:
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
#include "core/membership.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/fmt.h"
#include "core/client_zk.h"
#include "core/core.h"
#include "core/entry.h"

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
	uint64_t client_id; /* the host's admin connection waiting, 0: none */
	uint64_t from_peer; /* peer waiting (forwarded to us), 0: none */
	uint64_t peer_req_id; /* the client's request id, or the origin's tracked id */
	uint8_t op;
	uint8_t change;
	uint64_t target;
	char addr[CORE_ADDR_SIZE];
	char zk_tail[CORE_ADDR_SIZE]; /* the address book's client_addr (zk_reconfig.h) */
	uint64_t zk_request_id; /* a ZooKeeper reconfig waiting (client_zk.c), 0: none */
	enum admin_state state;
	bool retry; /* the current step got KEEL_BUSY: try again on tick */
	uint64_t deadline_ms;
	struct node_waiter waiter;
	struct keel_list link; /* in core->admin_reqs */
};

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

static void reply_client(struct node_core *core, uint64_t client_id, uint8_t op, uint64_t req_id,
			 enum keel_err err, const char *msg)
{
	size_t mark;
	struct keel_wbuf *w = core_client_begin(core, client_id, &mark);
	if (w == NULL) {
		return; /* gone */
	}
	admin_encode_reply_header(w, op, req_id, err, msg);
	core_client_end(core, client_id, mark);
}

/* Answers whoever waits for `req` and frees it. */
static void req_finish(struct node_core *core, struct admin_req *req, enum keel_err err,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void req_finish(struct node_core *core, struct admin_req *req, enum keel_err err,
                       const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	keel_vfmt(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (req->client_id != 0) {
		reply_client(core, req->client_id, req->op, req->peer_req_id, err, msg);
	}
	if (req->from_peer != 0) {
		struct tracker_reply hdr = {TRACK_ADMIN, req->from_peer, req->peer_req_id, err, 0};
		size_t mark;
		struct keel_wbuf *w = core_reply_begin(core, &hdr, &mark);
		if (w != NULL) {
			size_t len = strlen(msg);
			keel_wbuf_u16(w, (uint16_t)len);
			keel_wbuf_bytes(w, msg, len);
			core_peer_end(core, req->from_peer, mark);
		}
	}
	if (err == KEEL_OK) {
		CORE_INFO(core, "admin: %s", msg);
	}
	uint64_t zk_request_id = req->zk_request_id;
	keel_list_remove(&req->link);
	keel_list_remove(&req->waiter.link);
	tracker_finish(&core->tracker, &req->track);
	free(req);
	if (zk_request_id != 0) {
		/* Last: the reconfig may start its next step from here. */
		zk_clients_reconfig_step_done(core, zk_request_id, err, msg);
	}
}

/* ---- the leader's state machine for membership ---- */

static void step(struct node_core *core, struct admin_req *req);

static void on_committed(struct node_core *core, struct node_waiter *w, enum keel_err err)
{
	struct admin_req *req = w->ctx;
	if (err != KEEL_OK) {
		req_finish(core, req, err == KEEL_CANCELED ? KEEL_NOTLEADER : err,
			   "leadership changed before the change committed; retry");
		return;
	}
	switch (req->state) {
	case ADMIN_ADDR:
		req->state = ADMIN_LEARNER;
		step(core, req);
		return;
	case ADMIN_LEARNER:
		if (req->change == ADMIN_MEMBER_ADD_LEARNER) {
			req_finish(core, req, KEEL_OK, "server %llu added as a learner",
				   (unsigned long long)req->target);
			return;
		}
		req->state = ADMIN_CATCHUP;
		step(core, req);
		return;
	case ADMIN_PROMOTE:
		req_finish(core, req, KEEL_OK, "server %llu is a voter",
			   (unsigned long long)req->target);
		return;
	case ADMIN_CHANGE:
		if (req->change == ADMIN_MEMBER_REMOVE) {
			/* Best effort: forget its address so nobody dials it. */
			struct keel_wbuf e;
			keel_wbuf_init_dynamic(&e, 64, 1024);
			node_entry_encode_header(&e, NODE_ENTRY_CLUSTER, 0, 0, core_wall_ms(core));
			keel_wbuf_u8(&e, NODE_CLUSTER_DEL_ADDR);
			keel_wbuf_u64(&e, req->target);
			uint64_t idx, term;
			if (core->role == RAFT_LEADER) {
				(void)core_propose(core, e.data, (uint32_t)e.size, &idx, &term);
			}
			keel_wbuf_free(&e);
			req_finish(core, req, KEEL_OK, "server %llu removed",
				   (unsigned long long)req->target);
		} else {
			req_finish(core, req, KEEL_OK, "server %llu promoted to voter",
				   (unsigned long long)req->target);
		}
		return;
	default:
		req_finish(core, req, KEEL_INVAL, "internal: unexpected state");
	}
}

static void wait_for(struct node_core *core, struct admin_req *req, uint64_t index, uint64_t term)
{
	KEEL_ASSERT(!keel_list_linked(&req->waiter.link));
	memset(&req->waiter, 0, sizeof(req->waiter));
	req->waiter.index = index;
	req->waiter.term = term;
	req->waiter.done = on_committed;
	req->waiter.ctx = req;
	core_wait_commit(core, &req->waiter);
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

static bool learner_caught_up(struct node_core *core, uint64_t id)
{
	struct raft_status st;
	raft_status(core->raft, &st);
	for (uint32_t i = 0; i < st.n_members; i++) {
		if (st.members[i].id == id) {
			return st.members[i].match_index + CATCHUP_MARGIN >= st.commit_index &&
			       st.members[i].state == RAFT_PROGRESS_REPLICATE;
		}
	}
	return false;
}

static void step(struct node_core *core, struct admin_req *req)
{
	uint64_t index = 0, term = 0;
	enum keel_err rc = KEEL_OK;
	req->retry = false;
	if (core->role != RAFT_LEADER) {
		req_finish(core, req, KEEL_NOTLEADER, "this server is not the leader");
		return;
	}
	switch (req->state) {
	case ADMIN_ADDR: {
		struct keel_wbuf e;
		keel_wbuf_init_dynamic(&e, 128, 4096);
		node_entry_encode_header(&e, NODE_ENTRY_CLUSTER, 0, 0, core_wall_ms(core));
		keel_wbuf_u8(&e, NODE_CLUSTER_SET_ADDR);
		keel_wbuf_u64(&e, req->target);
		size_t len = strlen(req->addr);
		keel_wbuf_u16(&e, (uint16_t)len);
		keel_wbuf_bytes(&e, req->addr, len);
		len = strlen(req->zk_tail); /* ZooKeeper's view (reconfig), or none */
		keel_wbuf_u16(&e, (uint16_t)len);
		keel_wbuf_bytes(&e, req->zk_tail, len);
		rc = core_propose(core, e.data, (uint32_t)e.size, &index, &term);
		keel_wbuf_free(&e);
		break;
	}
	case ADMIN_LEARNER:
		rc = raft_change_member(core->raft, RAFT_ADD_LEARNER, req->target, &index, &term);
		if (rc == KEEL_EXIST) {
			/* Already a learner (a retried add): go on. */
			req->state = ADMIN_LEARNER;
			struct node_waiter w = {.ctx = req};
			keel_list_init(&w.link);
			on_committed(core, &w, KEEL_OK);
			return;
		}
		break;
	case ADMIN_CATCHUP:
		if (!learner_caught_up(core, req->target)) {
			req->retry = true; /* checked again on tick */
			return;
		}
		req->state = ADMIN_PROMOTE;
		rc = raft_change_member(core->raft, RAFT_PROMOTE, req->target, &index, &term);
		break;
	case ADMIN_PROMOTE:
		rc = raft_change_member(core->raft, RAFT_PROMOTE, req->target, &index, &term);
		break;
	case ADMIN_CHANGE:
		rc = raft_change_member(
		        core->raft, req->change == ADMIN_MEMBER_REMOVE ? RAFT_REMOVE : RAFT_PROMOTE,
		        req->target, &index, &term);
		break;
	case ADMIN_TRANSFER:
		if (core->leader == req->target) {
			req_finish(core, req, KEEL_OK, "server %llu is the leader",
				   (unsigned long long)req->target);
			return;
		}
		rc = raft_transfer_leader(core->raft, req->target);
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
		req_finish(core, req, rc, "%s", change_error(rc));
		return;
	}
	wait_for(core, req, index, term);
	core_drive(core);
}

/* ---- requests arriving ---- */

static struct admin_req *req_new(struct node_core *core, uint8_t op)
{
	struct admin_req *req = calloc(1, sizeof(*req));
	if (req == NULL) {
		return NULL;
	}
	req->op = op;
	req->deadline_ms = core_now_ms(core) + ADMIN_DEADLINE_MS;
	keel_list_init(&req->waiter.link);
	keel_list_init(&req->link);
	keel_list_init(&req->track.link);
	keel_list_push_front(&core->admin_reqs, &req->link);
	return req;
}

/* Parses an op body into req; false on a malformed body. */
static bool parse_body(struct node_core *core, struct admin_req *req, const uint8_t *body,
		       size_t size)
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
		case ADMIN_MEMBER_ADD_LEARNER:
			if (!core->host.ops->addr_ok(core->host.ctx, req->addr)) {
				return false;
			}
			req->state = ADMIN_ADDR;
			break;
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

static void forward_to_leader(struct node_core *core, struct admin_req *req, const uint8_t *body,
			      size_t size)
{
	req->track.request_id = tracker_next_id(&core->tracker);
	uint64_t to;
	size_t mark;
	struct keel_wbuf *w =
	        core_request_begin(core, TRACK_ADMIN, req->track.request_id, &to, &mark);
	if (w == NULL) {
		req_finish(core, req, KEEL_NOLEADER, "no link to the leader (%llu)",
			   (unsigned long long)core->leader);
		return;
	}
	keel_wbuf_u8(w, req->op);
	keel_wbuf_bytes(w, body, size);
	core_peer_end(core, to, mark);
	req->state = ADMIN_FORWARDED;
	uint64_t now = core_now_ms(core);
	uint64_t timeout = req->deadline_ms > now ? req->deadline_ms - now : 1;
	if (tracker_add(&core->tracker, &req->track, TRACK_ADMIN, timeout, to, core->term, now) !=
	    KEEL_OK) {
		req_finish(core, req, KEEL_NOMEM, "out of memory");
	}
}

/* The leader's answer to a request we forwarded: u16 length + message. */
static void track_reply(void *ctx, struct tracker_req *treq, const struct tracker_reply *hdr,
			const uint8_t *body, size_t size)
{
	struct node_core *core = ctx;
	struct admin_req *req = KEEL_CONTAINER_OF(treq, struct admin_req, track);
	struct keel_rbuf r;
	keel_rbuf_init(&r, body, size);
	uint16_t len = keel_rbuf_u16(&r);
	const uint8_t *msg = keel_rbuf_bytes(&r, len);
	if (!keel_rbuf_ok(&r)) {
		req_finish(core, req, KEEL_PROTO, "the leader's reply was malformed");
		return;
	}
	char text[512];
	size_t l = KEEL_MIN((size_t)len, sizeof(text) - 1);
	memcpy(text, msg, l);
	text[l] = '\0';
	req_finish(core, req, hdr->err, "%s", text);
}

static void track_fail(void *ctx, struct tracker_req *treq, enum keel_err err)
{
	struct node_core *core = ctx;
	struct admin_req *req = KEEL_CONTAINER_OF(treq, struct admin_req, track);
	if (err == KEEL_TIMEOUT) {
		req_finish(core, req, err, "timed out");
	} else {
		req_finish(core, req, err,
		           "no answer from the leader (link lost or leader changed); "
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
static void start_request(struct node_core *core, struct admin_req *req, const uint8_t *body,
			  size_t size)
{
	if (!parse_body(core, req, body, size)) {
		req_finish(core, req, KEEL_INVAL, "malformed admin request");
		return;
	}
	if (core->role == RAFT_LEADER) {
		step(core, req);
	} else if (core->leader != 0) {
		forward_to_leader(core, req, body, size);
	} else {
		req_finish(core, req, KEEL_NOLEADER, "no leader is known right now; retry");
	}
}

void admin_member_change_for_zk(struct node_core *core, uint64_t zk_request_id, uint8_t change,
				uint64_t id, const char *peer_addr, const char *zk_tail)
{
	uint8_t body[1 + 8 + 2 + CORE_ADDR_SIZE + 2 + CORE_ADDR_SIZE];
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
		zk_clients_reconfig_step_done(core, zk_request_id, KEEL_INVAL, "address too long");
		return;
	}
	struct admin_req *req = req_new(core, ADMIN_OP_MEMBER_CHANGE);
	if (req == NULL) {
		zk_clients_reconfig_step_done(core, zk_request_id, KEEL_NOMEM, "out of memory");
		return;
	}
	req->zk_request_id = zk_request_id;
	req->deadline_ms = core_now_ms(core) + ZK_STEP_DEADLINE_MS;
	start_request(core, req, w.data, w.size);
}

void admin_request(struct node_core *core, uint64_t conn, uint8_t op, uint64_t req_id,
		   const uint8_t *body, size_t size)
{
	struct admin_req *req = req_new(core, op);
	if (req == NULL) {
		reply_client(core, conn, op, req_id, KEEL_NOMEM, "out of memory");
		return;
	}
	req->client_id = conn;
	req->peer_req_id = req_id;
	start_request(core, req, body, size);
}

void admin_on_conn_closed(struct node_core *core, uint64_t conn)
{
	struct keel_list *it;
	KEEL_LIST_FOR_EACH (it, &core->admin_reqs) {
		struct admin_req *req = KEEL_LIST_ITEM(it, struct admin_req, link);
		if (req->client_id == conn) {
			req->client_id = 0; /* finish the work, answer nobody */
		}
	}
}

void admin_on_forward(struct node_core *core, uint64_t from, uint64_t request_id,
                      const uint8_t *body, size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, body, size);
	uint8_t op = keel_rbuf_u8(&r);
	if (!keel_rbuf_ok(&r)) {
		return;
	}
	size_t rest = keel_rbuf_remaining(&r);
	const uint8_t *b = keel_rbuf_bytes(&r, rest);
	struct admin_req *req = req_new(core, op);
	if (req == NULL) {
		return; /* the origin's deadline answers */
	}
	req->from_peer = from;
	req->peer_req_id = request_id;
	if (!parse_body(core, req, b, rest)) {
		req_finish(core, req, KEEL_INVAL, "malformed admin request");
	} else if (core->role != RAFT_LEADER) {
		req_finish(core, req, KEEL_NOTLEADER, "this server is not the leader; retry");
	} else {
		step(core, req);
	}
}

void admin_on_leader_change(struct node_core *core)
{
	struct keel_list *it, *next;
	KEEL_LIST_FOR_EACH_SAFE (it, next, &core->admin_reqs) {
		struct admin_req *req = KEEL_LIST_ITEM(it, struct admin_req, link);
		bool transferred = req->op == ADMIN_OP_TRANSFER && core->leader == req->target;
		if ((req->state == ADMIN_TRANSFER || req->state == ADMIN_FORWARDED) &&
		    transferred) {
			req_finish(core, req, KEEL_OK, "leadership transferred to server %llu",
				   (unsigned long long)req->target);
		} else if (req->state == ADMIN_FORWARDED) {
			/* The old leader may still answer (its reply crosses the
			 * change): the tracker keeps it in doubt for a while. */
		} else if (req->state != ADMIN_TRANSFER && core->role != RAFT_LEADER &&
		           req->waiter.index == 0) {
			req_finish(core, req, KEEL_NOTLEADER,
			           "this server is no longer the leader");
		}
	}
}

void admin_tick(struct node_core *core, uint64_t now_ms)
{
	struct keel_list *it, *next;
	KEEL_LIST_FOR_EACH_SAFE (it, next, &core->admin_reqs) {
		struct admin_req *req = KEEL_LIST_ITEM(it, struct admin_req, link);
		if (req->state == ADMIN_FORWARDED) {
			continue; /* the tracker times it */
		}
		if (now_ms >= req->deadline_ms) {
			if (keel_list_linked(&req->waiter.link)) {
				/* Still waiting for a commit: let it decide. */
				req->deadline_ms = now_ms + 1000;
			} else {
				req_finish(core, req, KEEL_TIMEOUT, "timed out");
			}
		} else if (req->retry) {
			step(core, req);
		}
	}
}

void admin_close(struct node_core *core)
{
	struct keel_list *it;
	while ((it = keel_list_pop_front(&core->admin_reqs)) != NULL) {
		struct admin_req *req = KEEL_LIST_ITEM(it, struct admin_req, link);
		keel_list_remove(&req->waiter.link);
		tracker_finish(&core->tracker, &req->track);
		free(req);
	}
}
