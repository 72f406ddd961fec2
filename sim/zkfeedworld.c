/*
 * zkfeedworld.c — the change-feed consumers of zk_feed.c on the servers'
 * real cores (keel-sim --workload zk).
 *
 * A consumer's subscription is a connection of the server's core, as a
 * kc_feed's is, and the core's own feed code serves it (core/feed.c:
 * node_feed_serve, the pump and its flow control, the COMPACTED answers
 * and events, the history the core appends as it applies and trims after
 * its snapshots, node_feed_on_close):
 *
 *   consumer --FeedRequest--> node_feed_serve(core, conn, ...)
 *   consumer <--frames------- client_begin/client_end (host.c routes the
 *                             connection ids from SIM_FEED_CONN_BASE here)
 *
 * What is not the server's: the request reaches node_feed_serve
 * directly, without a ZooKeeper session. A session would be a Raft entry
 * (createSession, then pings and expiry), and the feed must leave the
 * workload's run as it is without it; the session's part of a feed
 * request (its turn in the connection's FIFO, client_zk.c) is the
 * ZooKeeper clients' code, which the workload runs anyway.
 *
 * Frames go to the consumer at once, in order; the bytes it has not read
 * beyond its socket buffers are the connection's unsent output
 * (client_output_bytes), so a consumer that stops reading makes the core
 * wait (feed_wait: the host then calls node_feed_pump after each turn of
 * the server and whenever the consumer reads). The core closes a
 * connection (client_close) after a COMPACTED event: the consumer hears
 * of it after the frames before it, and the core forgets it
 * (node_feed_on_close) after its turn. A crash or a cut of the server
 * ends its feed connections as it ends the clients', and so does an
 * installed snapshot (the server closes every ZooKeeper connection then).
 *
 * The reference history: at the first apply of each index on any server
 * (first applies come in index order; the state machine safety check
 * holds every server to the same states), the change of that entry, read
 * from that server's state right after it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"
#include "core/core.h"
#include "core/feed.h"
#include "core/fsm.h"
#include "sim/sim.h"
#include "sim/zk_sim.h"

struct zkf_conn {
	uint64_t id;   /* the core's connection id */
	uint64_t node;
	bool core_closed; /* client_close: the core forgets it after its turn */
};

struct sim_zk_feedw {
	struct sim *s;
	struct simzk_feed feed;
	struct zkf_conn *conns;
	size_t n_conns, cap_conns;
	bool waiting[SIM_MAX_NODES + 1]; /* feed_wait(true) from that core */
	bool installed[SIM_MAX_NODES + 1]; /* loaded a snapshot from the leader */
	struct keel_wbuf out;		  /* the frame a core is writing */
	struct zk_ids ids;		  /* the consumers' identities */
	uint64_t ref_index;		  /* the reference's last index */
};

static struct sim_zk_feedw *zkf(struct sim *s)
{
	KEEL_ASSERT(s->zkf != NULL);
	return s->zkf;
}

static struct zkf_conn *conn_find(struct sim_zk_feedw *w, uint64_t id)
{
	for (size_t i = 0; i < w->n_conns; i++) {
		if (w->conns[i].id == id) {
			return &w->conns[i];
		}
	}
	return NULL;
}

static void conn_remove(struct sim_zk_feedw *w, struct zkf_conn *c)
{
	*c = w->conns[--w->n_conns];
}

/* A server that can take a subscription now. */
static struct sim_node *reachable(struct sim *s, uint64_t node)
{
	if (node < 1 || node > s->n_slots) {
		return NULL;
	}
	struct sim_node *n = &s->nodes[node];
	if (!n->up || n->paused || n->stop_pending || n->host == NULL || s->failed) {
		return NULL;
	}
	return n;
}

/* The core forgets the connections it closed (as the shell does once the
 * socket is gone), after its turn. */
static void forget_closed(struct sim_zk_feedw *w, uint64_t node)
{
	for (size_t i = 0; i < w->n_conns;) {
		struct zkf_conn *c = &w->conns[i];
		if (c->node != node || !c->core_closed) {
			i++;
			continue;
		}
		struct sim_node *n = &w->s->nodes[node];
		if (n->up && n->host != NULL) {
			node_feed_on_close(sim_host_core(n), c->id);
		}
		conn_remove(w, c);
	}
}

/* ---- the consumers' transport ---- */

static bool tr_subscribe(void *ctx, uint32_t server, uint64_t conn, int32_t xid,
			 const uint8_t *body, size_t size)
{
	struct sim_zk_feedw *w = ctx;
	uint64_t node = (uint64_t)server + 1;
	struct sim_node *n = reachable(w->s, node);
	if (n == NULL) {
		return false;
	}
	if (w->n_conns == w->cap_conns) {
		w->cap_conns = w->cap_conns == 0 ? 8 : 2 * w->cap_conns;
		w->conns = realloc(w->conns, w->cap_conns * sizeof(*w->conns));
		KEEL_ASSERT(w->conns != NULL);
	}
	uint64_t id = conn + SIM_FEED_CONN_BASE;
	w->conns[w->n_conns++] = (struct zkf_conn){id, node, false};
	char addr[32];
	snprintf(addr, sizeof(addr), "10.0.1.%u:%u", (unsigned)(conn % 200 + 1),
		 (unsigned)(30000 + conn % 20000));
	node_feed_serve(sim_host_core(n), id, addr, &w->ids, xid, body, size);
	forget_closed(w, node);
	return true;
}

static void tr_hang_up(void *ctx, uint64_t conn)
{
	struct sim_zk_feedw *w = ctx;
	struct zkf_conn *c = conn_find(w, conn + SIM_FEED_CONN_BASE);
	if (c == NULL) {
		return; /* the server is gone, or forgot it */
	}
	struct sim_node *n = &w->s->nodes[c->node];
	uint64_t id = c->id;
	conn_remove(w, c);
	if (n->up && n->host != NULL) {
		node_feed_on_close(sim_host_core(n), id); /* heard after the server's turn */
	}
}

static void tr_drained(void *ctx, uint64_t conn)
{
	struct sim_zk_feedw *w = ctx;
	struct zkf_conn *c = conn_find(w, conn + SIM_FEED_CONN_BASE);
	if (c == NULL) {
		return;
	}
	uint64_t node = c->node;
	if (w->waiting[node] && reachable(w->s, node) != NULL) {
		node_feed_pump(sim_host_core(&w->s->nodes[node]));
		forget_closed(w, node);
	}
}

/* A server that holds every committed change: a running member of the
 * leader's configuration that applied as far as any running server. */
static bool tr_settled(void *ctx, uint32_t server)
{
	struct sim_zk_feedw *w = ctx;
	struct sim *s = w->s;
	uint64_t node = (uint64_t)server + 1;
	const struct raft_config *cfg = sim_final_config(s);
	if (reachable(s, node) == NULL || cfg == NULL || raft_config_role(cfg, node) == 0) {
		return false;
	}
	uint64_t top = 0;
	for (uint64_t id = 1; id <= s->n_slots; id++) {
		if (s->nodes[id].up && s->nodes[id].host != NULL) {
			top = KEEL_MAX(top, sim_host_core(&s->nodes[id])->applied_index);
		}
	}
	return sim_host_core(&s->nodes[node])->applied_index == top;
}

/* ---- the core's client effects on a feed connection (host.c) ---- */

static struct zkf_conn *core_conn(struct sim *s, uint64_t node, uint64_t id)
{
	struct zkf_conn *c = conn_find(zkf(s), id);
	if (c == NULL || c->node != node) {
		sim_fail(s, "node %llu: the core wrote to feed connection %llu, which it does not "
			    "have",
			 (unsigned long long)node, (unsigned long long)id);
		return NULL;
	}
	return c;
}

struct keel_wbuf *sim_zkf_client_begin(struct sim *s, uint64_t node, uint64_t id)
{
	struct zkf_conn *c = core_conn(s, node, id);
	if (c == NULL || c->core_closed) {
		return NULL;
	}
	keel_wbuf_reset(&zkf(s)->out);
	return &zkf(s)->out;
}

void sim_zkf_client_end(struct sim *s, uint64_t node, uint64_t id)
{
	struct sim_zk_feedw *w = zkf(s);
	struct zkf_conn *c = core_conn(s, node, id);
	KEEL_ASSERT(keel_wbuf_ok(&w->out));
	if (c != NULL && !c->core_closed) {
		simzk_feed_on_frame(&w->feed, id - SIM_FEED_CONN_BASE, w->out.data, w->out.size);
	}
}

void sim_zkf_client_close(struct sim *s, uint64_t node, uint64_t id)
{
	struct zkf_conn *c = core_conn(s, node, id);
	if (c != NULL && !c->core_closed) {
		c->core_closed = true;
		simzk_feed_on_frame(&zkf(s)->feed, id - SIM_FEED_CONN_BASE, NULL, 0);
	}
}

size_t sim_zkf_client_output_bytes(struct sim *s, uint64_t node, uint64_t id)
{
	struct zkf_conn *c = core_conn(s, node, id);
	if (c == NULL || c->core_closed) {
		return 0;
	}
	return simzk_feed_unsent_bytes(&zkf(s)->feed, id - SIM_FEED_CONN_BASE);
}

void sim_zkf_feed_wait(struct sim *s, uint64_t node, bool waiting)
{
	zkf(s)->waiting[node] = waiting;
}

void sim_zkf_pump(struct sim *s, struct sim_node *n)
{
	struct sim_zk_feedw *w = s->zkf;
	if (w == NULL || n->paused || !n->up || n->host == NULL) {
		return;
	}
	if (w->waiting[n->id]) {
		node_feed_pump(sim_host_core(n));
	}
	forget_closed(w, n->id);
	if (w->installed[n->id]) {
		/* After the install (core/feed.c ended the subscribers it
		 * passed), the server closes every ZooKeeper connection
		 * (client_zk.c), feed subscribers among them. */
		w->installed[n->id] = false;
		sim_zkf_server_down(s, n->id, true);
	}
}

void sim_zkf_snapshot_installed(struct sim *s, uint64_t node)
{
	if (s->zkf != NULL) {
		s->zkf->installed[node] = true;
	}
}

/* ---- the server's side ---- */

void sim_zkf_server_down(struct sim *s, uint64_t node, bool tell_core)
{
	struct sim_zk_feedw *w = s->zkf;
	if (w == NULL) {
		return;
	}
	struct sim_node *n = &s->nodes[node];
	for (size_t i = 0; i < w->n_conns;) {
		struct zkf_conn *c = &w->conns[i];
		if (c->node != node) {
			i++;
			continue;
		}
		uint64_t id = c->id;
		bool told = c->core_closed;
		conn_remove(w, c);
		if (tell_core && n->up && n->host != NULL) {
			node_feed_on_close(sim_host_core(n), id);
		}
		if (!told) {
			simzk_feed_on_frame(&w->feed, id - SIM_FEED_CONN_BASE, NULL, 0);
		}
	}
	w->waiting[node] = tell_core && w->waiting[node];
}

void sim_zkf_note_applied(struct sim *s, struct sim_node *n, uint64_t index,
			  const struct zk_result *res)
{
	struct sim_zk_feedw *w = s->zkf;
	if (w == NULL || index <= w->ref_index) {
		return;
	}
	if (index != w->ref_index + 1) {
		sim_fail(s, "feed reference: node %llu applied %llu first, before anyone applied "
			    "%llu",
			 (unsigned long long)n->id, (unsigned long long)index,
			 (unsigned long long)(w->ref_index + 1));
		return;
	}
	w->ref_index = index;
	if (res != NULL) {
		simzk_feed_on_commit(&w->feed, fsm_zk(sim_host_core(n)->fsm), res);
	}
}

void sim_zkf_options(struct sim *s, uint64_t *retain_bytes, uint32_t *high_water_bytes)
{
	struct sim_zk_feedw *w = zkf(s);
	*retain_bytes = simzk_feed_history_bytes(&w->feed);
	*high_water_bytes = simzk_feed_high_water_bytes(&w->feed);
}

/* ---- the run ---- */

void sim_zkf_new(struct sim *s)
{
	struct sim_zk_feedw *w = calloc(1, sizeof(*w));
	KEEL_ASSERT(w != NULL);
	s->zkf = w;
	w->s = s;
	keel_wbuf_init_dynamic(&w->out, 256, 2u << 20);
	zk_ids_init(&w->ids);
	KEEL_ASSERT(zk_ids_add(&w->ids, zk_bytes_str("ip"), zk_bytes_str("10.0.1.1")) == KEEL_OK);
	struct simzk_feed_transport tr = {w, SIM_MAX_NODES, tr_subscribe, tr_hang_up, tr_drained,
					  tr_settled};
	/* Its own PRNG, seeded from the run's seed (not drawn from the run's
	 * generator): the run is the same with or without the feed. */
	simzk_feed_init(&w->feed, keel_hash_bytes(&s->cfg.seed, sizeof(s->cfg.seed), 0xfeed),
			SIMZK_BUG_NONE, &tr);
}

void sim_zkf_free(struct sim *s)
{
	struct sim_zk_feedw *w = s->zkf;
	if (w == NULL) {
		return;
	}
	simzk_feed_free(&w->feed);
	free(w->conns);
	keel_wbuf_free(&w->out);
	free(w);
	s->zkf = NULL;
}

void sim_zkf_step(struct sim *s)
{
	if (s->zkf != NULL && !s->failed) {
		simzk_feed_step(&s->zkf->feed);
	}
}

bool sim_zkf_check(struct sim *s, char *why, size_t why_size)
{
	struct sim_zk_feedw *w = zkf(s);
	simzk_feed_drain(&w->feed);
	return simzk_check_feed(&w->feed, why, why_size);
}

void sim_zkf_counts(struct sim *s, struct simzk_result *r)
{
	simzk_feed_counts(&zkf(s)->feed, r, &r->trace);
}
