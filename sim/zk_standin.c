/*
 * zk_standin.c — a STAND-IN cluster for the ZooKeeper workload, and one
 * run of the workload against it (simzk_run).
 *
 * THIS IS A TEST DOUBLE. It is not keel's server and will not replace it:
 * once the pure server core (issue 12) is wired into the simulator, the
 * workload runs against the real core over the simulated network and this
 * file only remains as the harness that proves the checkers bite. It
 * exists so that the clients, the history and the checkers (zk_sim.h)
 * are built and tested now.
 *
 * What it is: N servers, each with its own ZooKeeper state (zk_state.h,
 * applying with the real zk_apply), its own watch manager (zk_watch.h,
 * fired with the real zk_watches_fire) and its connections, which decode
 * frames with the real decoders and answer reads with the real zk_read.
 * Instead of Raft there is one shared log: a write is appended at once
 * (its zxid is its index), a "commit" step makes a prefix final, each
 * server applies the committed prefix at its own pace, and a "leader
 * change" throws away a random part of the uncommitted tail. Session
 * expiry runs one zk_expiry tracker, as a leader does, on the committed
 * state. Per connection it keeps the server's rules in miniature: replies
 * in request order, reads served at their turn from the local state, sync
 * served once the server applied the commit index the sync saw, a write
 * answered when its own server applies it, events written before any later
 * reply, connections with writes of unknown fate closed on a leader change.
 *
 * Frames travel per connection in order (TCP); what happens next — which
 * frame is delivered, which server applies, when the log commits — is
 * drawn from the run's PRNG.
 *
 * Planted bugs (enum simzk_bug), each a departure from those rules:
 *   reply-before-apply    a write is answered when it commits (with the
 *                         result of applying it to the committed state),
 *                         before its own server has applied it;
 *   watch-after-data      events are held and written after the next reply;
 *   keep-pending-on-leader-change   writes of unknown fate are kept and
 *                         proposed again, and every apply of their entry
 *                         answers them (double answers, double applies);
 *   expire-no-ephemeral-delete      an expired session is forgotten by the
 *                         servers without a closeSession entry, so its
 *                         ephemerals stay.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"
#include "sim/zk_sim.h"
#include "zk/zk_codes.h"
#include "zk/zk_read.h"
#include "zk/zk_session.h"
#include "zk/zk_txn.h"
#include "zk/zk_watch.h"

#define SZ_MAX_SERVERS 7

/* ---- byte queues (one direction of one connection) ---- */

struct sz_frame {
	uint8_t *data; /* NULL: the server closed the connection */
	size_t size;
};

struct sz_queue {
	struct sz_frame *f;
	size_t head;
	size_t count;
	size_t cap;
};

static void q_push(struct sz_queue *q, const uint8_t *data, size_t size, bool close_marker)
{
	if (q->head + q->count == q->cap) {
		if (q->head > 0) {
			memmove(q->f, q->f + q->head, q->count * sizeof(*q->f));
			q->head = 0;
		}
		if (q->count == q->cap) {
			q->cap = q->cap == 0 ? 8 : q->cap * 2;
			q->f = realloc(q->f, q->cap * sizeof(*q->f));
			KEEL_ASSERT(q->f != NULL);
		}
	}
	struct sz_frame *fr = &q->f[q->head + q->count++];
	fr->data = NULL;
	fr->size = 0;
	if (!close_marker) {
		fr->data = malloc(size > 0 ? size : 1);
		KEEL_ASSERT(fr->data != NULL);
		memcpy(fr->data, data, size);
		fr->size = size;
	}
}

static struct sz_frame q_pop(struct sz_queue *q)
{
	KEEL_ASSERT(q->count > 0);
	struct sz_frame fr = q->f[q->head++];
	q->count--;
	return fr;
}

static void q_free(struct sz_queue *q)
{
	for (size_t i = 0; i < q->count; i++) {
		free(q->f[q->head + i].data);
	}
	free(q->f);
	memset(q, 0, sizeof(*q));
}

/* ---- the cluster ---- */

enum sz_pending_kind { SZ_WRITE = 1, SZ_READ = 2, SZ_SYNC = 3 };

struct sz_pending {
	uint8_t kind;
	int32_t xid;
	uint64_t rid;     /* writes */
	uint64_t barrier; /* syncs: served once applied >= this */
	uint8_t *frame;   /* reads and syncs: the request payload */
	size_t frame_size;
	uint8_t *reply; /* a reply frame made before its turn */
	size_t reply_size;
};

enum sz_conn_state { SZ_HANDSHAKE = 1, SZ_ACTIVE = 2, SZ_CLOSED = 3 };

struct sz_conn {
	uint64_t id;
	uint32_t server;
	uint8_t state;
	bool client_gone;
	int64_t session;
	struct zk_connect_request connect;
	uint8_t passwd[ZK_PASSWD_SIZE];
	bool waiting_barrier;
	uint64_t connect_barrier;
	struct zk_auth_info auth;
	struct zk_watch_conn wconn;
	bool attached;
	struct sz_pending *fifo;
	size_t fifo_count;
	size_t fifo_cap;
	struct sz_queue in;   /* client -> server */
	struct sz_queue out;  /* server -> client */
	struct sz_queue held; /* watch-after-data: events held back */
};

/* A request this cluster proposed and will answer when its entry applies. */
struct sz_book {
	uint64_t rid;
	uint64_t conn;
	uint64_t index; /* its entry */
	bool is_connect;
	bool answered;
	uint8_t *txn; /* a copy, to propose again (keep-pending bug) */
	size_t txn_size;
};

struct sz_entry {
	uint8_t *txn;
	size_t size;
	uint32_t origin; /* server + 1; 0: the cluster itself (expiry) */
	uint64_t rid;
};

struct sz_server {
	struct zk_state st;
	struct zk_watches wm;
	struct zk_result res;
	uint64_t applied;
	struct zk_feed_log feed; /* its change feed history (zk_feed.c) */
};

struct standin {
	enum simzk_bug bug;
	struct keel_rng rng;
	uint32_t n;
	struct zk_config cfg;
	struct sz_server srv[SZ_MAX_SERVERS];
	struct zk_state lead; /* the committed state (expiry, reply-before-apply) */
	struct zk_result lead_res;
	struct sz_entry *log; /* [0] is index 1 */
	size_t log_count;
	size_t log_cap;
	uint64_t commit;
	struct sz_conn **conns; /* by id (1..) */
	size_t conn_cap;
	uint64_t *live; /* connections with something left to do */
	size_t live_count;
	size_t live_cap;
	struct sz_book *book;
	size_t book_count;
	size_t book_cap;
	uint64_t next_rid;
	struct zk_expiry expiry;
	int64_t *forgotten; /* expire-no-ephemeral-delete: sessions dropped */
	size_t forgotten_count;
	size_t forgotten_cap;
	uint64_t now_ms;
	struct keel_wbuf w;
	struct keel_wbuf body;
	struct simzk_clients *clients;
	struct simzk_feed *feed;
	uint64_t leader_changes;
	uint64_t expired;
};

static void *grow_array(void *p, size_t *cap, size_t need, size_t item)
{
	if (need <= *cap) {
		return p;
	}
	size_t c = *cap == 0 ? 16 : *cap;
	while (c < need) {
		c *= 2;
	}
	void *q = realloc(p, c * item);
	KEEL_ASSERT(q != NULL);
	memset((uint8_t *)q + *cap * item, 0, (c - *cap) * item);
	*cap = c;
	return q;
}

static struct sz_conn *conn_get(struct standin *sd, uint64_t id)
{
	return id < sd->conn_cap ? sd->conns[id] : NULL;
}

/* ---- sending to the client ---- */

static void flush_held(struct sz_conn *c)
{
	while (c->held.count > 0) {
		struct sz_frame fr = q_pop(&c->held);
		q_push(&c->out, fr.data, fr.size, false);
		free(fr.data);
	}
}

static void send_frame(struct sz_conn *c, const uint8_t *frame, size_t size, bool is_reply)
{
	if (c->state == SZ_CLOSED) {
		return;
	}
	q_push(&c->out, frame, size, false);
	if (is_reply) {
		flush_held(c);
	}
}

static void send_reply(struct standin *sd, struct sz_conn *c, int32_t xid, int64_t zxid,
		       int32_t err, const uint8_t *body, size_t body_size)
{
	keel_wbuf_reset(&sd->w);
	size_t start = zk_frame_begin(&sd->w);
	zk_reply_header_encode(&sd->w, xid, zxid, err);
	if (err == 0 || body_size > 0) {
		keel_wbuf_bytes(&sd->w, body, body_size);
	}
	zk_frame_end(&sd->w, start);
	KEEL_ASSERT(keel_wbuf_ok(&sd->w));
	send_frame(c, sd->w.data, sd->w.size, true);
}

static void on_fire(void *ctx, struct zk_watch_conn *wconn, const struct zk_watch_event *ev)
{
	struct standin *sd = ctx;
	struct sz_conn *c = KEEL_CONTAINER_OF(wconn, struct sz_conn, wconn);
	if (c->state == SZ_CLOSED) {
		return;
	}
	keel_wbuf_reset(&sd->w);
	zk_notification_encode(&sd->w, -1, ev->type, ZK_STATE_SYNC_CONNECTED, ev->path);
	KEEL_ASSERT(keel_wbuf_ok(&sd->w));
	if (sd->bug == SIMZK_BUG_WATCH_AFTER_DATA) {
		q_push(&c->held, sd->w.data, sd->w.size, false);
		return;
	}
	send_frame(c, sd->w.data, sd->w.size, false);
}

/* ---- connections ---- */

static void pending_free(struct sz_pending *p)
{
	free(p->frame);
	free(p->reply);
	memset(p, 0, sizeof(*p));
}

static void fifo_pop(struct sz_conn *c)
{
	KEEL_ASSERT(c->fifo_count > 0);
	pending_free(&c->fifo[0]);
	memmove(&c->fifo[0], &c->fifo[1], (c->fifo_count - 1) * sizeof(c->fifo[0]));
	c->fifo_count--;
}

static struct sz_pending *fifo_push(struct sz_conn *c, uint8_t kind, int32_t xid)
{
	c->fifo = grow_array(c->fifo, &c->fifo_cap, c->fifo_count + 1, sizeof(*c->fifo));
	struct sz_pending *p = &c->fifo[c->fifo_count++];
	memset(p, 0, sizeof(*p));
	p->kind = kind;
	p->xid = xid;
	return p;
}

static void book_remove_conn(struct standin *sd, uint64_t conn)
{
	for (size_t i = 0; i < sd->book_count;) {
		if (sd->book[i].conn == conn) {
			free(sd->book[i].txn);
			sd->book[i] = sd->book[--sd->book_count];
		} else {
			i++;
		}
	}
}

/* The server side of a connection ends: watches, requests, (its book
 * entries: answered by no one). `tell` queues the close for the client. */
static void conn_end(struct standin *sd, struct sz_conn *c, bool tell)
{
	if (c->state == SZ_CLOSED) {
		return;
	}
	if (c->attached) {
		zk_watches_detach(&sd->srv[c->server].wm, &c->wconn);
		c->attached = false;
	}
	while (c->fifo_count > 0) {
		fifo_pop(c);
	}
	book_remove_conn(sd, c->id);
	flush_held(c); /* what was written goes out before the close */
	c->state = SZ_CLOSED;
	if (tell && !c->client_gone) {
		q_push(&c->out, NULL, 0, true);
	}
}

static void activate(struct standin *sd, struct sz_conn *c, int64_t session)
{
	struct sz_server *s = &sd->srv[c->server];
	c->state = SZ_ACTIVE;
	c->session = session;
	/* A session lives on one connection per server: an older one goes. */
	for (size_t i = 0; i < sd->live_count; i++) {
		struct sz_conn *o = conn_get(sd, sd->live[i]);
		if (o != c && o->server == c->server && o->session == session &&
		    o->state == SZ_ACTIVE) {
			conn_end(sd, o, true);
		}
	}
	enum keel_err rc = zk_watches_attach(&s->wm, &c->wconn, c->id, &c->auth.ids);
	KEEL_ASSERT(rc == KEEL_OK);
	c->attached = true;
	zk_expiry_touch(&sd->expiry, session, (int64_t)sd->now_ms);
}

static bool forgotten(const struct standin *sd, int64_t session)
{
	for (size_t i = 0; i < sd->forgotten_count; i++) {
		if (sd->forgotten[i] == session) {
			return true;
		}
	}
	return false;
}

static void send_connect_response(struct standin *sd, struct sz_conn *c,
				  const struct zk_connect_response *rsp)
{
	keel_wbuf_reset(&sd->w);
	size_t start = zk_frame_begin(&sd->w);
	zk_connect_response_encode(&sd->w, rsp);
	zk_frame_end(&sd->w, start);
	send_frame(c, sd->w.data, sd->w.size, false);
}

static uint64_t append(struct standin *sd, const uint8_t *txn, size_t size, uint32_t origin,
		       uint64_t rid)
{
	sd->log = grow_array(sd->log, &sd->log_cap, sd->log_count + 1, sizeof(*sd->log));
	struct sz_entry *e = &sd->log[sd->log_count++];
	e->txn = malloc(size);
	KEEL_ASSERT(e->txn != NULL);
	memcpy(e->txn, txn, size);
	e->size = size;
	e->origin = origin;
	e->rid = rid;
	return sd->log_count;
}

/* Proposes the txn in sd->w for connection c; returns the request id. */
static uint64_t propose(struct standin *sd, struct sz_conn *c, bool is_connect)
{
	KEEL_ASSERT(keel_wbuf_ok(&sd->w));
	uint64_t rid = ++sd->next_rid;
	uint64_t index = append(sd, sd->w.data, sd->w.size, c->server + 1, rid);
	sd->book = grow_array(sd->book, &sd->book_cap, sd->book_count + 1, sizeof(*sd->book));
	struct sz_book *b = &sd->book[sd->book_count++];
	memset(b, 0, sizeof(*b));
	b->rid = rid;
	b->conn = c->id;
	b->index = index;
	b->is_connect = is_connect;
	b->txn = malloc(sd->w.size);
	KEEL_ASSERT(b->txn != NULL);
	memcpy(b->txn, sd->w.data, sd->w.size);
	b->txn_size = sd->w.size;
	return rid;
}

static void decide_connect(struct standin *sd, struct sz_conn *c, bool final)
{
	struct sz_server *s = &sd->srv[c->server];
	struct zk_connect_response rsp;
	int32_t timeout = 0;
	enum zk_connect_action action = zk_session_connect(&s->st, &sd->cfg, &c->connect,
							   (int64_t)s->applied, &rsp, &timeout);
	static const uint8_t zero[ZK_PASSWD_SIZE];
	if (c->connect.session_id != 0 && forgotten(sd, c->connect.session_id)) {
		action = ZK_CONNECT_EXPIRED;
		rsp = (struct zk_connect_response){0, 0, 0, zk_bytes_of(zero, ZK_PASSWD_SIZE), false,
						   c->connect.has_read_only};
	}
	if (!final && (action == ZK_CONNECT_REFUSE || action == ZK_CONNECT_EXPIRED) &&
	    s->applied < sd->commit) {
		c->waiting_barrier = true; /* this server may be behind */
		c->connect_barrier = sd->commit;
		return;
	}
	switch (action) {
	case ZK_CONNECT_REFUSE:
		conn_end(sd, c, true);
		break;
	case ZK_CONNECT_EXPIRED:
		send_connect_response(sd, c, &rsp);
		conn_end(sd, c, true);
		break;
	case ZK_CONNECT_RESUME:
		send_connect_response(sd, c, &rsp);
		activate(sd, c, rsp.session_id);
		break;
	case ZK_CONNECT_NEW: {
		uint8_t passwd[ZK_PASSWD_SIZE];
		for (size_t i = 0; i < sizeof(passwd); i++) {
			passwd[i] = (uint8_t)keel_rng_next(&sd->rng);
		}
		keel_wbuf_reset(&sd->w);
		struct zk_txn_meta meta = {(int64_t)sd->now_ms, c->server + 1, 0, 0};
		zk_txn_encode_create_session(&sd->w, &meta, timeout, passwd);
		propose(sd, c, true);
		break;
	}
	}
}

static void serve_read(struct standin *sd, struct sz_conn *c, const uint8_t *frame, size_t size)
{
	struct sz_server *s = &sd->srv[c->server];
	struct zk_request req;
	enum keel_err rc = zk_request_decode(&req, frame, size);
	KEEL_ASSERT(rc == KEEL_OK);
	struct zk_read_ctx ctx = {&s->st, &s->wm, &c->wconn, &c->auth.ids, c->session};
	keel_wbuf_reset(&sd->body);
	int32_t err = zk_read(&ctx, &req, &sd->body);
	KEEL_ASSERT(keel_wbuf_ok(&sd->body));
	send_reply(sd, c, req.xid, (int64_t)s->applied, err, sd->body.data, sd->body.size);
}

/* Sends what is ready at the head of the FIFO. */
static void fifo_advance(struct standin *sd, struct sz_conn *c)
{
	const struct sz_server *s = &sd->srv[c->server];
	while (c->fifo_count > 0 && c->state == SZ_ACTIVE) {
		struct sz_pending *p = &c->fifo[0];
		if (p->reply != NULL) {
			send_frame(c, p->reply, p->reply_size, true);
		} else if (p->kind == SZ_READ || (p->kind == SZ_SYNC && s->applied >= p->barrier)) {
			serve_read(sd, c, p->frame, p->frame_size);
		} else {
			break;
		}
		fifo_pop(c);
	}
}

/* A write's reply: sent if it is the FIFO head, else kept for its turn. */
static void complete(struct standin *sd, struct sz_conn *c, uint64_t rid, int32_t err,
		     int64_t zxid, const uint8_t *body, size_t body_size)
{
	for (size_t i = 0; i < c->fifo_count; i++) {
		struct sz_pending *p = &c->fifo[i];
		if (p->kind != SZ_WRITE || p->rid != rid || p->reply != NULL) {
			continue;
		}
		keel_wbuf_reset(&sd->w);
		size_t start = zk_frame_begin(&sd->w);
		zk_reply_header_encode(&sd->w, p->xid, zxid, err);
		if (err == 0 || body_size > 0) {
			keel_wbuf_bytes(&sd->w, body, body_size);
		}
		zk_frame_end(&sd->w, start);
		KEEL_ASSERT(keel_wbuf_ok(&sd->w));
		p->reply = malloc(sd->w.size);
		KEEL_ASSERT(p->reply != NULL);
		memcpy(p->reply, sd->w.data, sd->w.size);
		p->reply_size = sd->w.size;
		fifo_advance(sd, c);
		return;
	}
}

/* One frame from the client reaches the server. */
static void serve_in(struct standin *sd, struct sz_conn *c)
{
	struct sz_frame fr = q_pop(&c->in);
	uint32_t psize = 0;
	if (c->state == SZ_CLOSED || c->waiting_barrier ||
	    zk_frame_check(fr.data, fr.size, sd->cfg.max_packet_size, &psize) != ZK_FRAME_READY) {
		if (c->state != SZ_CLOSED && !c->waiting_barrier) {
			conn_end(sd, c, true);
		}
		free(fr.data);
		return;
	}
	const uint8_t *payload = fr.data + 4;
	if (c->state == SZ_HANDSHAKE) {
		if (zk_connect_request_decode(&c->connect, payload, psize) != KEEL_OK ||
		    c->connect.passwd.size > ZK_PASSWD_SIZE) {
			conn_end(sd, c, true);
		} else {
			size_t plen = zk_bytes_len(c->connect.passwd);
			memcpy(c->passwd, c->connect.passwd.data, plen);
			c->connect.passwd = zk_bytes_of(c->passwd, plen);
			decide_connect(sd, c, false);
		}
		free(fr.data);
		return;
	}
	struct zk_request req;
	enum keel_err rc = zk_request_decode(&req, payload, psize);
	if (rc != KEEL_OK) {
		conn_end(sd, c, true); /* the clients never send these */
		free(fr.data);
		return;
	}
	zk_expiry_touch(&sd->expiry, c->session, (int64_t)sd->now_ms);
	switch (zk_op_classify(req.opcode)) {
	case ZK_CLASS_READ:
	case ZK_CLASS_PING:
	case ZK_CLASS_SYNC: {
		bool sync = zk_op_classify(req.opcode) == ZK_CLASS_SYNC;
		struct sz_pending *p = fifo_push(c, sync ? SZ_SYNC : SZ_READ, req.xid);
		p->barrier = sd->commit;
		p->frame = malloc(psize);
		KEEL_ASSERT(p->frame != NULL);
		memcpy(p->frame, payload, psize);
		p->frame_size = psize;
		fifo_advance(sd, c);
		break;
	}
	case ZK_CLASS_WRITE:
	case ZK_CLASS_CLOSE: {
		keel_wbuf_reset(&sd->w);
		struct zk_txn_meta meta = {(int64_t)sd->now_ms, c->server + 1, req.xid, c->session};
		zk_txn_encode_request(&sd->w, &meta, &c->auth.ids, req.opcode, req.body,
				      req.body_size);
		uint64_t rid = propose(sd, c, false);
		fifo_push(c, SZ_WRITE, req.xid)->rid = rid;
		break;
	}
	default:
		send_reply(sd, c, req.xid, (int64_t)sd->srv[c->server].applied,
			   zk_op_refusal(req.opcode), NULL, 0);
		break;
	}
	free(fr.data);
}

/* ---- apply ---- */

static struct sz_book *book_find(struct standin *sd, uint64_t rid)
{
	for (size_t i = 0; i < sd->book_count; i++) {
		if (sd->book[i].rid == rid) {
			return &sd->book[i];
		}
	}
	return NULL;
}

static void book_drop(struct standin *sd, struct sz_book *b)
{
	free(b->txn);
	*b = sd->book[--sd->book_count];
}

/* Routes the result of an entry this server proposed to its connection. */
static void route_own(struct standin *sd, uint32_t server, const struct sz_entry *e,
		      const struct zk_result *res)
{
	struct sz_book *b = book_find(sd, e->rid);
	if (b == NULL) {
		return; /* its connection is gone */
	}
	struct sz_conn *c = conn_get(sd, b->conn);
	KEEL_ASSERT(c != NULL && c->server == server);
	if (b->is_connect) {
		book_drop(sd, b);
		if (c->state == SZ_HANDSHAKE) {
			struct zk_connect_response rsp;
			zk_session_created(res, c->connect.has_read_only, &rsp);
			send_connect_response(sd, c, &rsp);
			if (rsp.timeout_ms <= 0) {
				conn_end(sd, c, true);
			} else {
				activate(sd, c, res->new_session_id);
			}
		}
		return;
	}
	if (b->answered) {
		/* keep-pending: the entry applied again; answer again */
		send_reply(sd, c, res->xid, res->zxid, res->err, res->body.data, res->body.size);
		return;
	}
	if (sd->bug == SIMZK_BUG_KEEP_PENDING_ON_LEADER_CHANGE) {
		b->answered = true;
	} else {
		book_drop(sd, b);
	}
	complete(sd, c, e->rid, res->err, res->zxid, res->body.data, res->body.size);
	if (res->opcode == ZK_OP_CLOSE_SESSION && res->err == 0) {
		c->session = 0;
		conn_end(sd, c, true);
	}
}

static void apply_one(struct standin *sd, uint32_t server)
{
	struct sz_server *s = &sd->srv[server];
	KEEL_ASSERT(s->applied < sd->commit);
	const struct sz_entry *e = &sd->log[s->applied];
	uint64_t zxid = ++s->applied;
	enum keel_err rc = zk_apply(&s->st, zxid, e->txn, e->size, &s->res);
	KEEL_ASSERT(rc == KEEL_OK);
	KEEL_ASSERT(zk_feed_log_append(&s->feed, &s->st, &s->res) == KEEL_OK);
	/* Events first: they precede any reply made after this entry. */
	zk_watches_fire(&s->wm, &s->st, &s->res);
	if (s->res.closed_session_id != 0) {
		/* Its connections here close, but the one whose closeSession
		 * this is: route_own answers it first. */
		int64_t sid = s->res.closed_session_id;
		const struct sz_book *own = e->origin == server + 1 ? book_find(sd, e->rid) : NULL;
		uint64_t own_conn = own != NULL ? own->conn : 0; /* conn_end moves the book */
		for (size_t i = 0; i < sd->live_count; i++) {
			struct sz_conn *c = conn_get(sd, sd->live[i]);
			if (c->server == server && c->session == sid && c->state == SZ_ACTIVE &&
			    c->id != own_conn) {
				c->session = 0;
				conn_end(sd, c, true);
			}
		}
	}
	if (e->origin == server + 1) {
		route_own(sd, server, e, &s->res);
	}
	/* Syncs and handshakes waiting for this server to catch up. */
	for (size_t i = 0; i < sd->live_count; i++) {
		struct sz_conn *c = conn_get(sd, sd->live[i]);
		if (c->server != server || c->state == SZ_CLOSED) {
			continue;
		}
		if (c->waiting_barrier && s->applied >= c->connect_barrier) {
			c->waiting_barrier = false;
			decide_connect(sd, c, true);
		} else if (c->state == SZ_ACTIVE) {
			fifo_advance(sd, c);
		}
	}
}

/* The log's prefix up to `to` becomes committed; the committed state
 * follows (expiry bookkeeping; reply-before-apply answers from it). */
static void commit_to(struct standin *sd, uint64_t to)
{
	while (sd->commit < to) {
		const struct sz_entry *e = &sd->log[sd->commit];
		uint64_t zxid = ++sd->commit;
		enum keel_err rc = zk_apply(&sd->lead, zxid, e->txn, e->size, &sd->lead_res);
		KEEL_ASSERT(rc == KEEL_OK);
		const struct zk_result *res = &sd->lead_res;
		simzk_feed_on_commit(sd->feed, &sd->lead, res);
		if (res->kind == ZK_TXN_CREATE_SESSION && res->err == 0) {
			zk_expiry_add(&sd->expiry, res->new_session_id, res->new_session_timeout_ms,
				      (int64_t)sd->now_ms);
		}
		if (res->closed_session_id != 0) {
			zk_expiry_remove(&sd->expiry, res->closed_session_id);
		}
		if (sd->bug == SIMZK_BUG_REPLY_BEFORE_APPLY && e->origin != 0 &&
		    res->kind == ZK_TXN_REQUEST && res->opcode != ZK_OP_CLOSE_SESSION) {
			struct sz_book *b = book_find(sd, e->rid);
			if (b != NULL) {
				struct sz_conn *c = conn_get(sd, b->conn);
				book_drop(sd, b);
				complete(sd, c, e->rid, res->err, res->zxid, res->body.data,
					 res->body.size);
			}
		}
	}
}

/* A new leader: a random part of the uncommitted tail is lost. */
static void leader_change(struct standin *sd)
{
	uint64_t uncommitted = sd->log_count - sd->commit;
	uint64_t keep = keel_rng_below(&sd->rng, uncommitted + 1);
	for (size_t i = sd->commit + keep; i < sd->log_count; i++) {
		free(sd->log[i].txn);
	}
	sd->log_count = sd->commit + keep;
	sd->leader_changes++;
	/* Requests whose entries were uncommitted have an unknown fate. */
	for (size_t i = 0; i < sd->book_count;) {
		struct sz_book *b = &sd->book[i];
		if (b->index <= sd->commit) {
			i++;
			continue;
		}
		if (sd->bug == SIMZK_BUG_KEEP_PENDING_ON_LEADER_CHANGE) {
			b->index = append(sd, b->txn, b->txn_size, conn_get(sd, b->conn)->server + 1,
					  b->rid);
			i++;
			continue;
		}
		uint64_t conn = b->conn;
		conn_end(sd, conn_get(sd, conn), true);
		book_remove_conn(sd, conn);
		i = 0;
	}
}

static void expire_sessions(struct standin *sd)
{
	int64_t ids[8];
	size_t n = zk_expiry_expired(&sd->expiry, (int64_t)sd->now_ms, ids, 8);
	for (size_t i = 0; i < n; i++) {
		sd->expired++;
		if (sd->bug == SIMZK_BUG_EXPIRE_NO_EPHEMERAL_DELETE) {
			zk_expiry_remove(&sd->expiry, ids[i]);
			sd->forgotten = grow_array(sd->forgotten, &sd->forgotten_cap,
						   sd->forgotten_count + 1, sizeof(*sd->forgotten));
			sd->forgotten[sd->forgotten_count++] = ids[i];
			for (size_t j = 0; j < sd->live_count; j++) {
				struct sz_conn *c = conn_get(sd, sd->live[j]);
				if (c->session == ids[i] && c->state == SZ_ACTIVE) {
					conn_end(sd, c, true);
				}
			}
			continue;
		}
		keel_wbuf_reset(&sd->w);
		struct zk_txn_meta meta = {(int64_t)sd->now_ms, 0, 0, ids[i]};
		zk_txn_encode_close_session(&sd->w, &meta, ZK_CLOSE_EXPIRED);
		append(sd, sd->w.data, sd->w.size, 0, 0);
	}
}

/* ---- the transport the clients use ---- */

static void tr_open(void *ctx, uint32_t server, uint64_t conn)
{
	struct standin *sd = ctx;
	sd->conns = grow_array(sd->conns, &sd->conn_cap, conn + 1, sizeof(*sd->conns));
	KEEL_ASSERT(sd->conns[conn] == NULL);
	struct sz_conn *c = calloc(1, sizeof(*c));
	KEEL_ASSERT(c != NULL);
	c->id = conn;
	c->server = server;
	c->state = SZ_HANDSHAKE;
	zk_auth_info_init(&c->auth);
	sd->conns[conn] = c;
	sd->live = grow_array(sd->live, &sd->live_cap, sd->live_count + 1, sizeof(*sd->live));
	sd->live[sd->live_count++] = conn;
}

static void tr_send(void *ctx, uint64_t conn, const uint8_t *frame, size_t size)
{
	struct standin *sd = ctx;
	struct sz_conn *c = conn_get(sd, conn);
	KEEL_ASSERT(c != NULL && !c->client_gone);
	if (c->state != SZ_CLOSED) {
		q_push(&c->in, frame, size, false);
	}
}

static void tr_close(void *ctx, uint64_t conn)
{
	struct standin *sd = ctx;
	struct sz_conn *c = conn_get(sd, conn);
	KEEL_ASSERT(c != NULL);
	c->client_gone = true;
	conn_end(sd, c, false);
}

/* A connection is done once the client is gone or saw the close. */
static void conn_retire(struct standin *sd, size_t live_index)
{
	struct sz_conn *c = conn_get(sd, sd->live[live_index]);
	q_free(&c->in);
	q_free(&c->out);
	q_free(&c->held);
	free(c->fifo);
	c->fifo = NULL;
	zk_auth_info_close(&c->auth);
	sd->live[live_index] = sd->live[--sd->live_count];
}

static void deliver_out(struct standin *sd, struct sz_conn *c)
{
	struct sz_frame fr = q_pop(&c->out);
	if (fr.data == NULL) {
		c->client_gone = true;
		simzk_clients_on_closed(sd->clients, c->id);
		return;
	}
	simzk_clients_on_frame(sd->clients, c->id, fr.data, fr.size);
	free(fr.data);
}

/* ---- the view for the checkers ---- */

static const struct zk_state *view_state(void *ctx, uint32_t server)
{
	struct standin *sd = ctx;
	return &sd->srv[server].st;
}

static uint64_t view_applied(void *ctx, uint32_t server)
{
	struct standin *sd = ctx;
	return sd->srv[server].applied;
}

/* ---- setup ---- */

static void standin_init(struct standin *sd, uint32_t servers, uint64_t seed, enum simzk_bug bug)
{
	memset(sd, 0, sizeof(*sd));
	KEEL_ASSERT(servers >= 1 && servers <= SZ_MAX_SERVERS);
	sd->bug = bug;
	sd->n = servers;
	keel_rng_seed(&sd->rng, seed);
	zk_config_default(&sd->cfg);
	for (uint32_t i = 0; i < servers; i++) {
		struct sz_server *s = &sd->srv[i];
		KEEL_ASSERT(zk_state_init(&s->st, &sd->cfg) == KEEL_OK);
		KEEL_ASSERT(zk_watches_init(&s->wm, 0, seed + i, on_fire, sd) == KEEL_OK);
		zk_result_init(&s->res, sd->cfg.max_reply_size);
	}
	KEEL_ASSERT(zk_state_init(&sd->lead, &sd->cfg) == KEEL_OK);
	zk_result_init(&sd->lead_res, sd->cfg.max_reply_size);
	KEEL_ASSERT(zk_expiry_init(&sd->expiry, 0) == KEEL_OK);
	keel_wbuf_init_dynamic(&sd->w, 256, 1u << 24);
	keel_wbuf_init_dynamic(&sd->body, 256, 1u << 24);
}

static void standin_free(struct standin *sd)
{
	while (sd->live_count > 0) {
		struct sz_conn *c = conn_get(sd, sd->live[0]);
		c->client_gone = true;
		conn_end(sd, c, false);
		conn_retire(sd, 0);
	}
	for (size_t i = 0; i < sd->conn_cap; i++) {
		free(sd->conns[i]);
	}
	free(sd->conns);
	free(sd->live);
	for (size_t i = 0; i < sd->log_count; i++) {
		free(sd->log[i].txn);
	}
	free(sd->log);
	while (sd->book_count > 0) {
		book_drop(sd, &sd->book[0]);
	}
	free(sd->book);
	free(sd->forgotten);
	for (uint32_t i = 0; i < sd->n; i++) {
		zk_watches_close(&sd->srv[i].wm);
		zk_feed_log_close(&sd->srv[i].feed);
		zk_result_close(&sd->srv[i].res);
		zk_state_close(&sd->srv[i].st);
	}
	zk_result_close(&sd->lead_res);
	zk_state_close(&sd->lead);
	zk_expiry_close(&sd->expiry);
	keel_wbuf_free(&sd->w);
	keel_wbuf_free(&sd->body);
}

/* ---- one step of the cluster ---- */

/* Picks a live connection with frames waiting in one direction. */
static struct sz_conn *pick_conn(struct standin *sd, bool inbound)
{
	size_t n = sd->live_count;
	if (n == 0) {
		return NULL;
	}
	size_t start = (size_t)keel_rng_below(&sd->rng, n);
	for (size_t k = 0; k < n; k++) {
		struct sz_conn *c = conn_get(sd, sd->live[(start + k) % n]);
		if (inbound ? (c->in.count > 0 && !c->client_gone) : c->out.count > 0) {
			return c;
		}
	}
	return NULL;
}

static void retire_done(struct standin *sd)
{
	for (size_t i = 0; i < sd->live_count;) {
		struct sz_conn *c = conn_get(sd, sd->live[i]);
		if (c->client_gone && c->state == SZ_CLOSED) {
			conn_retire(sd, i);
		} else {
			i++;
		}
	}
}

static void standin_step(struct standin *sd, bool faults)
{
	uint64_t r = keel_rng_below(&sd->rng, 10000);
	if (r < 4000) {
		struct sz_conn *c = pick_conn(sd, true);
		if (c != NULL) {
			serve_in(sd, c);
		}
	} else if (r < 7500) {
		struct sz_conn *c = pick_conn(sd, false);
		if (c != NULL) {
			deliver_out(sd, c);
		}
	} else if (r < 8500) {
		uint64_t to = sd->commit + keel_rng_between(&sd->rng, 1, 4);
		commit_to(sd, to < sd->log_count ? to : sd->log_count);
	} else if (r < 9998 || !faults) {
		uint32_t server = (uint32_t)keel_rng_below(&sd->rng, sd->n);
		uint64_t batch = keel_rng_between(&sd->rng, 1, 8);
		while (batch-- > 0 && sd->srv[server].applied < sd->commit) {
			apply_one(sd, server);
		}
	} else {
		leader_change(sd);
	}
	retire_done(sd);
}

static bool standin_quiet(const struct standin *sd)
{
	if (sd->commit != sd->log_count) {
		return false;
	}
	for (uint32_t i = 0; i < sd->n; i++) {
		if (sd->srv[i].applied != sd->commit) {
			return false;
		}
	}
	for (size_t i = 0; i < sd->live_count; i++) {
		const struct sz_conn *c = sd->conns[sd->live[i]];
		if ((c->in.count > 0 && !c->client_gone) || c->out.count > 0) {
			return false;
		}
	}
	return true;
}

/* ---- the run ---- */

enum simzk_bug simzk_bug_parse(const char *name)
{
	for (int b = SIMZK_BUG_REPLY_BEFORE_APPLY; b <= SIMZK_BUG_FEED_RESUME_BY_ZXID; b++) {
		if (strcmp(name, simzk_bug_name((enum simzk_bug)b)) == 0) {
			return (enum simzk_bug)b;
		}
	}
	return SIMZK_BUG_NONE;
}

const char *simzk_bug_name(enum simzk_bug bug)
{
	switch (bug) {
	case SIMZK_BUG_REPLY_BEFORE_APPLY:
		return "reply-before-apply";
	case SIMZK_BUG_WATCH_AFTER_DATA:
		return "watch-after-data";
	case SIMZK_BUG_KEEP_PENDING_ON_LEADER_CHANGE:
		return "keep-pending-on-leader-change";
	case SIMZK_BUG_EXPIRE_NO_EPHEMERAL_DELETE:
		return "expire-no-ephemeral-delete";
	case SIMZK_BUG_FEED_RESUME_BY_ZXID:
		return "feed-resume-by-zxid";
	default:
		return "none";
	}
}

static uint64_t history_trace(const struct simzk_history *h)
{
	uint64_t t = 0;
	for (size_t i = 0; i < h->op_count; i++) {
		const struct simzk_op *o = &h->ops[i];
		uint64_t f[] = {o->kind,	  o->status,	       o->client,
				o->conn,	  (uint64_t)o->opcode, (uint64_t)o->err,
				(uint64_t)o->zxid, o->invoke,	       o->complete,
				o->read_value,	  (uint64_t)o->stat.version, (uint64_t)o->new_session};
		t = keel_hash_bytes(f, sizeof(f), t);
	}
	for (size_t i = 0; i < h->event_count; i++) {
		const struct simzk_event *e = &h->events[i];
		uint64_t f[] = {e->conn, (uint64_t)e->type, e->at};
		t = keel_hash_bytes(f, sizeof(f), t);
		t = keel_hash_bytes(e->path, strlen(e->path), t);
	}
	return t;
}

void simzk_run(const struct simzk_config *cfg, struct simzk_result *out)
{
	memset(out, 0, sizeof(*out));
	struct standin *sd = calloc(1, sizeof(*sd));
	KEEL_ASSERT(sd != NULL);
	struct keel_rng rng;
	keel_rng_seed(&rng, cfg->seed);
	uint64_t cluster_seed = keel_rng_next(&rng);
	standin_init(sd, cfg->servers, cluster_seed, cfg->bug);
	/* The change feed: its own PRNG, so the rest of the run is as without it. */
	struct simzk_feed feed;
	simzk_feed_init(&feed, keel_hash_bytes(&cfg->seed, sizeof(cfg->seed), 0xfeed), cfg->bug);
	struct zk_feed_log *logs[SZ_MAX_SERVERS];
	for (uint32_t i = 0; i < sd->n; i++) {
		zk_feed_log_init(&sd->srv[i].feed, simzk_feed_history_bytes(&feed), 0);
		logs[i] = &sd->srv[i].feed;
	}
	sd->feed = &feed;
	struct simzk_history h;
	simzk_history_init(&h);
	struct simzk_clients cs;
	struct simzk_transport tr = {sd, tr_open, tr_send, tr_close};
	simzk_clients_init(&cs, cfg->clients, cfg->servers, keel_rng_next(&rng), &tr, &h);
	sd->clients = &cs;

	uint64_t now = 0;
	bool settled = false;
	uint64_t limit = cfg->steps + 200000;
	for (uint64_t step = 0; step < limit; step++) {
		bool faults = step < cfg->steps;
		if (step == cfg->steps) {
			simzk_clients_finish(&cs);
		}
		now += 1;
		sd->now_ms = now;
		simzk_clients_step(&cs, now);
		expire_sessions(sd);
		for (uint64_t k = keel_rng_between(&rng, 2, 8); k > 0; k--) {
			standin_step(sd, faults);
		}
		simzk_feed_step(&feed, logs, sd->n);
		if (!faults && simzk_clients_idle(&cs) && standin_quiet(sd)) {
			settled = true;
			break;
		}
	}
	out->sim_ms = now;
	if (!settled) {
		snprintf(out->why, sizeof(out->why), "liveness: the workload did not finish");
		if (cfg->verbose) {
			for (uint32_t i = 0; i < cs.count; i++) {
				const struct simzk_client *c = &cs.c[i];
				printf("client %u state %u conn %llu server %u session %llx out %u quiet %llu\n",
				       i, c->state, (unsigned long long)c->conn, c->server,
				       (unsigned long long)c->session, c->out_count,
				       (unsigned long long)c->quiet_until_ms);
			}
			printf("commit %llu log %zu\n", (unsigned long long)sd->commit, sd->log_count);
		}
	} else {
		struct simzk_view view = {sd, sd->n, view_state, view_applied};
		simzk_feed_drain(&feed, logs, sd->n);
		out->ok = simzk_check_all(&h, &view, out->why, sizeof(out->why)) &&
			  simzk_check_feed(&feed, out->why, sizeof(out->why));
	}
	if (cfg->verbose) {
		simzk_history_print(&h, stdout);
	}
	out->trace = history_trace(&h);
	out->ops = cs.ops;
	out->events = cs.events;
	out->sessions = cs.sessions;
	out->watches = cs.watches;
	out->moves = cs.moves;
	out->expiries = cs.expiries;
	out->closes = cs.closes;
	for (size_t i = 0; i < h.op_count; i++) {
		out->unknown += h.ops[i].status == SIMZK_UNKNOWN;
	}
	out->leader_changes = sd->leader_changes;
	out->expired_by_server = sd->expired;
	out->zxid = sd->commit;
	for (uint32_t i = 0; i < SIMZK_FEED_CONSUMERS; i++) {
		for (size_t k = 0; k < feed.c[i].got_count; k++) {
			const struct simzk_feed_got *g = &feed.c[i].got[k];
			uint64_t fw[] = {i, (uint64_t)g->zxid, (uint64_t)g->seq};
			out->trace = keel_hash_bytes(fw, sizeof(fw), out->trace);
		}
		out->feed_changes += feed.c[i].got_count;
		out->feed_moves += feed.c[i].moves;
		out->feed_compacted += feed.c[i].compacted;
		out->feed_gaps += feed.c[i].gap_count;
	}
	simzk_feed_free(&feed);
	simzk_clients_free(&cs);
	simzk_history_free(&h);
	standin_free(sd);
	free(sd);
}
