/*
 * zkworld.c — the ZooKeeper workload on the real server core
 * (keel-sim --workload zk).
 *
 * The simulated clients of zk_client.c talk to the simulated servers'
 * real cores (host.c) over simulated TCP connections:
 *
 *   client --frames--> [to_server queue] --> inbox --zk_conn_on_frame--> core
 *   client <--frames-- [to_client queue] <--client_send/client_end------- core
 *
 * A connection is in order, without duplicates, with a delay drawn per
 * frame (never overtaking the frame before it). Either side ends it:
 *   - the client hangs up (transport close): the server hears of it after
 *     the frames the client sent before (zk_conn_on_close);
 *   - the core closes it (client_close effect): the server forgets it
 *     after its ready loop turn (zk_conn_on_close, as the real shell does
 *     when the socket is gone), and the client hears of it after the frames
 *     the core wrote before;
 *   - the server crashes, or is cut off by a partition: its core forgets
 *     the connection at once (a crash loses the core entirely) and the
 *     client hears of it after a delay.
 * While the core pauses a connection (client_pause), the frames that
 * arrived wait in its inbox, as unread bytes in a socket do.
 *
 * The connection ids the core sees are the clients' connection numbers
 * plus SIM_ZK_CONN_BASE (host.c tells them from the brokers' connection).
 *
 * At the end the checkers of zk_check.c run over the history and over a
 * view of the servers: each running member's applied ZooKeeper state (its
 * fsm) and applied index.
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"
#include "core/client_zk.h"
#include "core/core.h"
#include "core/fsm.h"
#include "sim/sim.h"
#include "sim/zk_sim.h"
#include "zk/zk_codes.h"
#include "zk/zk_state.h"

#define ZKW_CLIENTS 8
#define ZKW_TICK_MS 5

struct zkw_item {
	uint64_t at;
	uint8_t *data; /* NULL: the end of the connection */
	size_t size;
};

/* A FIFO of items. */
struct zkw_queue {
	struct zkw_item *q;
	size_t head, count, cap;
	uint64_t last_at; /* nothing overtakes the item before it */
};

struct zkw_conn {
	uint64_t conn;   /* the client's connection number */
	uint64_t node;   /* the server's id */
	bool opened;     /* the server has it (zk_conn_open) */
	bool client_gone; /* the client hung up or heard of the end */
	bool server_gone; /* the core forgot it */
	bool core_closed; /* client_close: forget it after the drive */
	bool paused;
	struct zkw_queue to_server, to_client;
	struct zkw_queue inbox; /* arrived, not yet read by the core */
};

struct zkw_txn {
	int64_t session;
	int32_t xid;
};

struct sim_zk_world {
	struct simzk_history hist;
	struct simzk_clients cs;
	struct zkw_conn **conns; /* live connections */
	size_t n_conns, cap_conns;
	struct keel_wbuf out; /* the frame the core is writing */
	uint64_t out_conn;
	uint8_t *frame; /* a frame to the client being framed */
	size_t frame_cap;
	uint64_t max_delay_ms;
	/* (session, xid) of every client txn some server applied */
	struct zkw_txn *applied;
	size_t n_applied, cap_applied;
};

static struct sim_zk_world *zkw(struct sim *s)
{
	KEEL_ASSERT(s->zkw != NULL);
	return s->zkw;
}

/* ---- queues ---- */

static void q_push(struct zkw_queue *q, uint64_t at, const uint8_t *data, size_t size)
{
	if (q->count == q->cap) {
		size_t cap = q->cap == 0 ? 8 : 2 * q->cap;
		struct zkw_item *n = malloc(cap * sizeof(*n));
		KEEL_ASSERT(n != NULL);
		for (size_t i = 0; i < q->count; i++) {
			n[i] = q->q[(q->head + i) % q->cap];
		}
		free(q->q);
		q->q = n;
		q->head = 0;
		q->cap = cap;
	}
	struct zkw_item it = {at, NULL, size};
	if (data != NULL) {
		it.data = malloc(size > 0 ? size : 1);
		KEEL_ASSERT(it.data != NULL);
		memcpy(it.data, data, size);
	}
	q->q[(q->head + q->count) % q->cap] = it;
	q->count++;
}

static struct zkw_item q_pop(struct zkw_queue *q)
{
	KEEL_ASSERT(q->count > 0);
	struct zkw_item it = q->q[q->head];
	q->head = (q->head + 1) % q->cap;
	q->count--;
	return it;
}

static void q_clear(struct zkw_queue *q)
{
	while (q->count > 0) {
		free(q_pop(q).data);
	}
}

static void q_free(struct zkw_queue *q)
{
	q_clear(q);
	free(q->q);
	memset(q, 0, sizeof(*q));
}

/* ---- connections ---- */

static struct zkw_conn *conn_find(struct sim_zk_world *w, uint64_t conn)
{
	for (size_t i = 0; i < w->n_conns; i++) {
		if (w->conns[i]->conn == conn) {
			return w->conns[i];
		}
	}
	return NULL;
}

/* Frees a connection that both sides are done with. */
static void conn_maybe_retire(struct sim_zk_world *w, struct zkw_conn *c)
{
	if (!c->client_gone || !c->server_gone || c->to_server.count > 0 ||
	    c->to_client.count > 0) {
		return;
	}
	for (size_t i = 0; i < w->n_conns; i++) {
		if (w->conns[i] == c) {
			w->conns[i] = w->conns[--w->n_conns];
			break;
		}
	}
	q_free(&c->to_server);
	q_free(&c->to_client);
	q_free(&c->inbox);
	free(c);
}

/* Sends an item one way: dir 0 to the server, 1 to the client. */
static void conn_send(struct sim *s, struct zkw_conn *c, int dir, const uint8_t *data, size_t size)
{
	struct sim_zk_world *w = zkw(s);
	struct zkw_queue *q = dir == 0 ? &c->to_server : &c->to_client;
	uint64_t at = s->now + keel_rng_between(&s->rng, 1, w->max_delay_ms);
	at = KEEL_MAX(at, q->last_at);
	q->last_at = at;
	q_push(q, at, data, size);
	sim_schedule(s, at, SIM_EV_ZK_NET, 0, c->conn * 2 + (uint64_t)dir, NULL);
}

/* The server side forgets the connection; the client hears of it. */
static void conn_server_end(struct sim *s, struct zkw_conn *c, bool tell_core)
{
	if (c->server_gone) {
		return;
	}
	c->server_gone = true;
	q_clear(&c->inbox);
	struct sim_node *n = &s->nodes[c->node];
	if (tell_core && c->opened && n->up && n->host != NULL) {
		zk_conn_on_close(sim_host_core(n), c->conn + SIM_ZK_CONN_BASE);
	}
	if (!c->client_gone) {
		conn_send(s, c, 1, NULL, 0);
	}
}

/* ---- the clients' transport ---- */

static void tr_open(void *ctx, uint32_t server, uint64_t conn)
{
	struct sim *s = ctx;
	struct sim_zk_world *w = zkw(s);
	struct zkw_conn *c = calloc(1, sizeof(*c));
	KEEL_ASSERT(c != NULL);
	c->conn = conn;
	c->node = (uint64_t)server + 1;
	if (w->n_conns == w->cap_conns) {
		w->cap_conns = w->cap_conns == 0 ? 16 : 2 * w->cap_conns;
		w->conns = realloc(w->conns, w->cap_conns * sizeof(*w->conns));
		KEEL_ASSERT(w->conns != NULL);
	}
	w->conns[w->n_conns++] = c;
}

static void tr_send(void *ctx, uint64_t conn, const uint8_t *frame, size_t size)
{
	struct sim *s = ctx;
	struct zkw_conn *c = conn_find(zkw(s), conn);
	KEEL_ASSERT(c != NULL && !c->client_gone);
	conn_send(s, c, 0, frame, size);
}

static void tr_close(void *ctx, uint64_t conn)
{
	struct sim *s = ctx;
	struct zkw_conn *c = conn_find(zkw(s), conn);
	KEEL_ASSERT(c != NULL && !c->client_gone);
	c->client_gone = true; /* what is on its way to it is dropped */
	conn_send(s, c, 0, NULL, 0);
}

/* ---- the server side ---- */

/* Hands node n's cores the frames that wait while it reads them, and
 * forgets the connections it closed. */
void sim_zkw_pump(struct sim *s, struct sim_node *n)
{
	if (s->zkw == NULL || n->paused) {
		return;
	}
	struct sim_zk_world *w = zkw(s);
	struct node_core *core = sim_host_core(n);
	bool again = true;
	while (again && n->up && !n->stop_pending && !s->failed) {
		again = false;
		for (size_t i = 0; i < w->n_conns; i++) {
			struct zkw_conn *c = w->conns[i];
			if (c->node != n->id || !c->opened || c->server_gone) {
				continue;
			}
			if (c->core_closed) {
				conn_server_end(s, c, true);
				again = true;
				continue;
			}
			if (c->paused || c->inbox.count == 0) {
				continue;
			}
			struct zkw_item it = q_pop(&c->inbox);
			(void)zk_conn_on_frame(core, c->conn + SIM_ZK_CONN_BASE, it.data, it.size);
			free(it.data);
			core_drive(core);
			again = true;
		}
	}
}

static void arrive_at_server(struct sim *s, struct zkw_conn *c, struct zkw_item it)
{
	struct sim_node *n = &s->nodes[c->node];
	if (c->server_gone) {
		free(it.data);
		return;
	}
	if (it.data == NULL) { /* the client hung up */
		free(it.data);
		conn_server_end(s, c, true);
		if (n->up) {
			sim_host_process(s, n);
		}
		return;
	}
	if (!c->opened) {
		if (!n->up || n->host == NULL) {
			free(it.data);
			conn_server_end(s, c, false); /* refused */
			return;
		}
		c->opened = true;
		char addr[32];
		snprintf(addr, sizeof(addr), "10.0.0.%u:%u", (unsigned)(c->conn % 200 + 1),
			 (unsigned)(40000 + c->conn % 20000));
		zk_conn_open(sim_host_core(n), c->conn + SIM_ZK_CONN_BASE, addr, NULL);
	}
	/* The shell's framing: a 4-byte length, then the payload the core reads. */
	KEEL_ASSERT(it.size >= 4 && keel_load_be32(it.data) == it.size - 4);
	q_push(&c->inbox, s->now, it.data + 4, it.size - 4);
	free(it.data);
	sim_host_process(s, n);
}

static void arrive_at_client(struct sim *s, struct zkw_conn *c, struct zkw_item it)
{
	struct sim_zk_world *w = zkw(s);
	if (c->client_gone) {
		free(it.data);
		return;
	}
	if (it.data == NULL) {
		c->client_gone = true;
		simzk_clients_on_closed(&w->cs, c->conn);
		return;
	}
	simzk_clients_on_frame(&w->cs, c->conn, it.data, it.size);
	free(it.data);
}

/* ---- the core's client effects for the workload's connections ---- */

static struct zkw_conn *core_conn(struct sim *s, uint64_t node, uint64_t id)
{
	struct zkw_conn *c = conn_find(zkw(s), id - SIM_ZK_CONN_BASE);
	if (c == NULL || c->node != node || !c->opened || c->server_gone) {
		sim_fail(s, "node %llu: the core wrote to connection %llu, which it does not have",
			 (unsigned long long)node, (unsigned long long)id);
		return NULL;
	}
	return c;
}

struct keel_wbuf *sim_zkw_client_begin(struct sim *s, uint64_t node, uint64_t id)
{
	struct sim_zk_world *w = zkw(s);
	struct zkw_conn *c = core_conn(s, node, id);
	if (c == NULL || c->core_closed) {
		return NULL;
	}
	keel_wbuf_reset(&w->out);
	w->out_conn = id;
	return &w->out;
}

void sim_zkw_client_end(struct sim *s, uint64_t node, uint64_t id)
{
	struct sim_zk_world *w = zkw(s);
	KEEL_ASSERT(w->out_conn == id && keel_wbuf_ok(&w->out));
	sim_zkw_client_send(s, node, id, w->out.data, w->out.size);
}

void sim_zkw_client_send(struct sim *s, uint64_t node, uint64_t id, const void *payload,
			 size_t size)
{
	struct zkw_conn *c = core_conn(s, node, id);
	if (c == NULL || c->core_closed || c->client_gone) {
		return; /* written into a socket nobody reads */
	}
	struct sim_zk_world *w = zkw(s);
	/* Framed as the shell frames it: a 4-byte length first. */
	if (w->frame_cap < size + 4) {
		w->frame_cap = size + 4;
		w->frame = realloc(w->frame, w->frame_cap);
		KEEL_ASSERT(w->frame != NULL);
	}
	keel_store_be32(w->frame, (uint32_t)size);
	memcpy(w->frame + 4, payload, size);
	conn_send(s, c, 1, w->frame, size + 4);
}

void sim_zkw_client_pause(struct sim *s, uint64_t node, uint64_t id, bool paused)
{
	struct zkw_conn *c = core_conn(s, node, id);
	if (c != NULL) {
		c->paused = paused;
	}
}

bool sim_zkw_client_paused(struct sim *s, uint64_t node, uint64_t id)
{
	struct zkw_conn *c = core_conn(s, node, id);
	return c != NULL && c->paused;
}

void sim_zkw_client_close(struct sim *s, uint64_t node, uint64_t id)
{
	struct zkw_conn *c = core_conn(s, node, id);
	if (c != NULL) {
		c->core_closed = true;
	}
}

/* ---- faults ---- */

/* Server `node` crashed (its core is about to go) or was cut off. */
void sim_zkw_server_down(struct sim *s, uint64_t node, bool tell_core)
{
	if (s->zkw == NULL) {
		return;
	}
	struct sim_zk_world *w = zkw(s);
	for (size_t i = 0; i < w->n_conns; i++) {
		struct zkw_conn *c = w->conns[i];
		if (c->node == node && c->opened) {
			conn_server_end(s, c, tell_core);
		}
	}
	sim_zkf_server_down(s, node, tell_core);
}

void sim_zkw_cut(struct sim *s, uint64_t node)
{
	if (s->zkw == NULL) {
		return;
	}
	sim_tracef(s, "fault: the clients' connections to node %llu break",
		   (unsigned long long)node);
	sim_zkw_server_down(s, node, true);
	struct sim_node *n = &s->nodes[node];
	if (n->up) {
		sim_host_process(s, n);
	}
}

/* ---- events ---- */

void sim_zkw_event(struct sim *s, const struct sim_event *ev)
{
	struct sim_zk_world *w = zkw(s);
	if (ev->kind == SIM_EV_ZK_TICK) {
		simzk_clients_step(&w->cs, s->now);
		sim_zkf_step(s);
		sim_schedule(s, s->now + ZKW_TICK_MS, SIM_EV_ZK_TICK, 0, 0, NULL);
		return;
	}
	struct zkw_conn *c = conn_find(w, ev->arg / 2);
	KEEL_ASSERT(c != NULL);
	struct zkw_queue *q = ev->arg % 2 == 0 ? &c->to_server : &c->to_client;
	struct zkw_item it = q_pop(q);
	KEEL_ASSERT(it.at == s->now);
	if (it.data != NULL) {
		sim_trace_hash(s, keel_hash_bytes(it.data, it.size, ev->arg));
	}
	if (ev->arg % 2 == 0) {
		arrive_at_server(s, c, it);
	} else {
		arrive_at_client(s, c, it);
	}
	conn_maybe_retire(w, c);
}

/* ---- the run ---- */

void sim_zkw_new(struct sim *s)
{
	struct sim_zk_world *w = calloc(1, sizeof(*w));
	KEEL_ASSERT(w != NULL);
	s->zkw = w;
	w->max_delay_ms = keel_rng_between(&s->rng, 1, 20);
	keel_wbuf_init_dynamic(&w->out, 256, 1u << 20);
	simzk_history_init(&w->hist);
	struct simzk_transport tr = {s, tr_open, tr_send, tr_close};
	/* Every server slot, spares included: membership changes may leave
	 * the initial servers outside the configuration. */
	simzk_clients_init(&w->cs, ZKW_CLIENTS, s->n_slots, keel_rng_next(&s->rng), &tr,
			   &w->hist);
	sim_schedule(s, s->now + ZKW_TICK_MS, SIM_EV_ZK_TICK, 0, 0, NULL);
}

void sim_zkw_free(struct sim *s)
{
	struct sim_zk_world *w = s->zkw;
	if (w == NULL) {
		return;
	}
	for (size_t i = 0; i < w->n_conns; i++) {
		q_free(&w->conns[i]->to_server);
		q_free(&w->conns[i]->to_client);
		q_free(&w->conns[i]->inbox);
		free(w->conns[i]);
	}
	free(w->conns);
	free(w->applied);
	free(w->frame);
	keel_wbuf_free(&w->out);
	simzk_clients_free(&w->cs);
	simzk_history_free(&w->hist);
	free(w);
	s->zkw = NULL;
}

void sim_zkw_finish(struct sim *s)
{
	simzk_clients_finish(&zkw(s)->cs);
}

bool sim_zkw_idle(struct sim *s)
{
	return simzk_clients_idle(&zkw(s)->cs);
}

/* ---- resolving unknown writes ---- */

void sim_zkw_note_applied(struct sim *s, int64_t session, int32_t xid)
{
	struct sim_zk_world *w = s->zkw;
	if (w == NULL || session == 0 || xid <= 0) {
		return;
	}
	if (w->n_applied == w->cap_applied) {
		w->cap_applied = w->cap_applied == 0 ? 256 : 2 * w->cap_applied;
		w->applied = realloc(w->applied, w->cap_applied * sizeof(*w->applied));
		KEEL_ASSERT(w->applied != NULL);
	}
	w->applied[w->n_applied++] = (struct zkw_txn){session, xid};
}

static int txn_cmp(const void *a, const void *b)
{
	const struct zkw_txn *x = a, *y = b;
	if (x->session != y->session) {
		return x->session < y->session ? -1 : 1;
	}
	return (x->xid > y->xid) - (x->xid < y->xid);
}

static bool is_write(int32_t opcode)
{
	switch (opcode) {
	case ZK_OP_CREATE:
	case ZK_OP_CREATE2:
	case ZK_OP_CREATE_CONTAINER:
	case ZK_OP_CREATE_TTL:
	case ZK_OP_DELETE:
	case ZK_OP_SET_DATA:
	case ZK_OP_MULTI:
		return true;
	default:
		return false;
	}
}

/* An UNKNOWN write whose (session, xid) no server applied never took
 * effect (the cluster is settled: every member applied the whole log). */
static void resolve_unknown(struct sim_zk_world *w)
{
	if (w->n_applied > 0) {
		qsort(w->applied, w->n_applied, sizeof(*w->applied), txn_cmp);
	}
	for (size_t i = 0; i < w->hist.op_count; i++) {
		struct simzk_op *o = &w->hist.ops[i];
		if (o->kind != SIMZK_REQUEST || o->status != SIMZK_UNKNOWN || !is_write(o->opcode) ||
		    o->session == 0) {
			continue;
		}
		struct zkw_txn key = {o->session, o->xid};
		o->never_applied = w->n_applied == 0 ||
				   bsearch(&key, w->applied, w->n_applied, sizeof(*w->applied),
					   txn_cmp) == NULL;
	}
}

/* A server the view shows: up, and a member of the leader's configuration. */
static bool view_member(struct sim *s, uint64_t id)
{
	struct sim_node *n = &s->nodes[id];
	if (!n->up || n->host == NULL) {
		return false;
	}
	const struct raft_config *c = sim_final_config(s);
	return c != NULL && raft_config_role(c, id) != 0;
}

static const struct zk_state *view_state(void *ctx, uint32_t server)
{
	struct sim *s = ctx;
	uint64_t id = (uint64_t)server + 1;
	return view_member(s, id) ? fsm_zk(sim_host_core(&s->nodes[id])->fsm) : NULL;
}

static uint64_t view_applied(void *ctx, uint32_t server)
{
	struct sim *s = ctx;
	uint64_t id = (uint64_t)server + 1;
	return view_member(s, id) ? sim_host_core(&s->nodes[id])->applied_index : 0;
}

/* The history's own hash (what the clients saw). */
static uint64_t history_trace(const struct simzk_history *h)
{
	uint64_t t = 0;
	for (size_t i = 0; i < h->op_count; i++) {
		const struct simzk_op *o = &h->ops[i];
		uint64_t f[] = {o->kind,	   o->status,	      o->client,
				o->conn,	   (uint64_t)o->opcode, (uint64_t)o->err,
				(uint64_t)o->zxid, o->invoke,	      o->complete,
				o->read_value,	   (uint64_t)o->stat.version, (uint64_t)o->new_session};
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

bool sim_zkw_check(struct sim *s, struct simzk_result *r)
{
	struct sim_zk_world *w = zkw(s);
	struct simzk_view view = {s, s->n_slots, view_state, view_applied};
	resolve_unknown(w);
	r->ok = simzk_check_all(&w->hist, &view, r->why, sizeof(r->why)) &&
		sim_zkf_check(s, r->why, sizeof(r->why));
	return r->ok;
}

/* The counts and the history's hash (also after a failure). */
void sim_zkw_counts(struct sim *s, struct simzk_result *r)
{
	struct sim_zk_world *w = zkw(s);
	if (s->cfg.verbose) {
		simzk_history_print(&w->hist, stdout);
	}
	r->trace = history_trace(&w->hist);
	sim_zkf_counts(s, r);
	r->ops = w->cs.ops;
	r->events = w->cs.events;
	r->sessions = w->cs.sessions;
	r->watches = w->cs.watches;
	r->moves = w->cs.moves;
	r->expiries = w->cs.expiries;
	r->closes = w->cs.closes;
	for (size_t i = 0; i < w->hist.op_count; i++) {
		const struct simzk_op *o = &w->hist.ops[i];
		r->unknown += o->status == SIMZK_UNKNOWN;
		r->expired_by_server += o->kind == SIMZK_EXPIRE && o->expired;
	}
	for (uint32_t i = 0; i < s->n_slots; i++) {
		const struct zk_state *st = view_state(s, i);
		if (st != NULL) {
			r->zxid = KEEL_MAX(r->zxid, st->last_zxid);
		}
	}
}

void sim_zkw_print_stuck(struct sim *s)
{
	struct sim_zk_world *w = zkw(s);
	for (uint32_t i = 0; i < w->cs.count; i++) {
		const struct simzk_client *c = &w->cs.c[i];
		printf("  client %u state %u conn %llu server %u session %llx out %u quiet %llu\n", i,
		       c->state, (unsigned long long)c->conn, c->server,
		       (unsigned long long)c->session, c->out_count,
		       (unsigned long long)c->quiet_until_ms);
	}
}
