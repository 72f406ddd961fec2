/*
 * client.c — the workload: sequential clients doing writes and ReadIndex
 * reads on SIM_KEYS registers, and the history the linearizability
 * checker reads.
 *
 * A client has at most one operation outstanding. Writes go to the server
 * it believes leads (a refusal teaches it the leader); reads go to any
 * server (followers forward ReadIndex). Every written value is unique.
 * Outcomes: OK (answered), FAILED (certainly had no effect: refused, or
 * its log slot went to another entry), UNKNOWN (a write whose server
 * crashed or whose client gave up: it may or may not take effect).
 * Times in the history are event sequence numbers, a strict total order
 * consistent with simulated time.
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "sim/sim.h"

#define CLIENT_THINK_MAX_MS 30

static void schedule_client(struct sim *s, struct sim_client *c, uint64_t at)
{
	c->next_at = at;
	c->gen++; /* older events for this client are void */
	sim_schedule(s, at, SIM_EV_CLIENT, c->id, c->gen, NULL);
}

void sim_clients_init(struct sim *s, uint32_t n)
{
	KEEL_ASSERT(n <= SIM_MAX_CLIENTS);
	s->n_clients = n;
	for (uint32_t i = 0; i < n; i++) {
		struct sim_client *c = &s->clients[i];
		memset(c, 0, sizeof(*c));
		c->id = i;
		c->guess_leader = 1 + keel_rng_below(&s->rng, s->cfg.nodes);
		schedule_client(s, c, s->now + keel_rng_below(&s->rng, 100));
	}
}

size_t sim_hist_add(struct sim *s, uint32_t client, uint8_t kind, uint32_t key, uint64_t value)
{
	if (s->n_hist == s->cap_hist) {
		s->cap_hist = s->cap_hist == 0 ? 256 : s->cap_hist * 2;
		s->hist = realloc(s->hist, s->cap_hist * sizeof(*s->hist));
		KEEL_ASSERT(s->hist != NULL);
	}
	struct sim_hist_op *h = &s->hist[s->n_hist];
	memset(h, 0, sizeof(*h));
	h->client = client;
	h->kind = kind;
	h->key = key;
	h->value = value;
	h->invoke = ++s->seq;
	h->response = SIM_TIME_INF;
	h->status = SIM_OP_PENDING;
	return s->n_hist++;
}

void sim_hist_complete(struct sim *s, size_t op, uint8_t status, uint64_t value)
{
	struct sim_hist_op *h = &s->hist[op];
	if (h->status != SIM_OP_PENDING) {
		return; /* the client gave up already */
	}
	h->status = status;
	if (status == SIM_OP_OK || status == SIM_OP_FAILED) {
		h->response = ++s->seq;
	}
	if (h->kind == SIM_READ && status == SIM_OP_OK) {
		h->value = value;
		s->stat_reads_ok++;
	}
	if (h->kind == SIM_WRITE && status == SIM_OP_OK) {
		s->stat_writes_ok++;
	}
	sim_trace_hash(s, ((uint64_t)op << 8) ^ status ^ (value << 16));
	struct sim_client *c = &s->clients[h->client];
	if (c->busy && c->op == op) {
		c->busy = false;
		schedule_client(s, c, s->now + keel_rng_below(&s->rng, CLIENT_THINK_MAX_MS));
	}
}

void sim_clients_on_node_crash(struct sim *s, struct sim_node *n)
{
	for (size_t i = 0; i < n->n_writes; i++) {
		sim_hist_complete(s, n->writes[i].op, SIM_OP_UNKNOWN, 0);
	}
	for (size_t i = 0; i < n->n_reads; i++) {
		sim_hist_complete(s, n->reads[i].op, SIM_OP_FAILED, 0);
	}
}

static struct sim_node *pick_up_node(struct sim *s, uint64_t preferred)
{
	if (preferred >= 1 && preferred <= s->n_slots && s->nodes[preferred].up &&
	    !s->nodes[preferred].paused) {
		return &s->nodes[preferred];
	}
	uint64_t start = keel_rng_below(&s->rng, s->n_slots);
	for (uint64_t i = 0; i < s->n_slots; i++) {
		struct sim_node *n = &s->nodes[1 + (start + i) % s->n_slots];
		if (n->up && !n->paused) {
			return n;
		}
	}
	return NULL;
}

static void issue(struct sim *s, struct sim_client *c)
{
	bool write = keel_rng_chance(&s->rng, 1, 2);
	uint32_t key = (uint32_t)keel_rng_below(&s->rng, SIM_KEYS);
	struct sim_node *n = write ? pick_up_node(s, c->guess_leader)
				   : pick_up_node(s, 1 + keel_rng_below(&s->rng, s->n_slots));
	if (n == NULL) {
		schedule_client(s, c, s->now + 50);
		return;
	}
	uint64_t value = write ? (uint64_t)s->n_hist + 1 : 0;
	size_t op = sim_hist_add(s, c->id, write ? SIM_WRITE : SIM_READ, key, value);
	c->op = op;
	c->busy = true;
	bool ok = write ? sim_node_propose(s, n, op) : sim_node_read(s, n, op);
	if (!ok) {
		c->guess_leader = raft_leader(n->r);
		if (c->guess_leader == 0) {
			c->guess_leader = 1 + keel_rng_below(&s->rng, s->n_slots);
		}
		sim_hist_complete(s, op, SIM_OP_FAILED, 0);
		return;
	}
	if (c->busy) {
		c->deadline = s->now + s->client_timeout_ms;
		schedule_client(s, c, c->deadline);
	}
}

void sim_client_event(struct sim *s, uint32_t client)
{
	struct sim_client *c = &s->clients[client];
	if (c->busy) {
		if (s->now < c->deadline) {
			return;
		}
		/* Give up: a write may still happen, a read does not matter. */
		struct sim_hist_op *h = &s->hist[c->op];
		sim_hist_complete(s, c->op, h->kind == SIM_WRITE ? SIM_OP_UNKNOWN : SIM_OP_FAILED, 0);
		return;
	}
	if (!s->workload_on) {
		return;
	}
	issue(s, c);
}
