/*
 * net.c — the simulated network.
 *
 * Every message is encoded with the real codec (raft_msg_encode) when sent
 * and decoded (raft_msg_decode, with the receiver's limits) when delivered,
 * so every run also exercises the wire format. A message is dropped with
 * probability drop_per_mille, duplicated with dup_per_mille, and delayed
 * uniformly in [min_delay_ms, max_delay_ms] — independent delays reorder.
 * blocked[from][to] models partitions; it is checked at send and again at
 * delivery (a partition also eats what was in flight).
 *
 * Partition shapes: symmetric split, one-way cut, isolate-one, and bridge
 * (two sides that only one node can talk to).
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"
#include "core/core.h"
#include "sim/sim.h"

/* One line describing a message, for verbose traces. */
static void describe(const struct raft_msg *m, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%llu->%llu %s t%llu", (unsigned long long)m->from,
			 (unsigned long long)m->to, raft_msg_type_name(m->type),
			 (unsigned long long)m->term);
	if (n < 0 || (size_t)n >= size) {
		return;
	}
	char *p = buf + n;
	size_t left = size - (size_t)n;
	switch (m->type) {
	case RAFT_MSG_APPEND:
		snprintf(p, left, " prev=%llu/%llu commit=%llu n=%u", (unsigned long long)m->append.prev_index,
			 (unsigned long long)m->append.prev_term, (unsigned long long)m->append.commit,
			 m->append.n_entries);
		break;
	case RAFT_MSG_APPEND_RESP:
		snprintf(p, left, " %s index=%llu hint=%llu/%llu", m->append_resp.reject ? "REJECT" : "ok",
			 (unsigned long long)m->append_resp.index,
			 (unsigned long long)m->append_resp.hint_index,
			 (unsigned long long)m->append_resp.hint_term);
		break;
	case RAFT_MSG_HEARTBEAT:
		snprintf(p, left, " commit=%llu seq=%llu", (unsigned long long)m->heartbeat.commit,
			 (unsigned long long)m->heartbeat.read_seq);
		break;
	case RAFT_MSG_VOTE:
		snprintf(p, left, "%s%s last=%llu/%llu", m->vote.pre_vote ? " pre" : "",
			 m->vote.transfer ? " transfer" : "", (unsigned long long)m->vote.last_index,
			 (unsigned long long)m->vote.last_term);
		break;
	case RAFT_MSG_VOTE_RESP:
		snprintf(p, left, "%s %s", m->vote_resp.pre_vote ? " pre" : "",
			 m->vote_resp.granted ? "granted" : "rejected");
		break;
	case RAFT_MSG_SNAPSHOT:
		snprintf(p, left, " snap=%llu/%llu off=%llu size=%u%s",
			 (unsigned long long)m->snapshot.meta.index,
			 (unsigned long long)m->snapshot.meta.term, (unsigned long long)m->snapshot.offset,
			 m->snapshot.size, m->snapshot.last ? " last" : "");
		break;
	case RAFT_MSG_SNAPSHOT_RESP:
		snprintf(p, left, " snap=%llu next=%llu%s%s", (unsigned long long)m->snapshot_resp.index,
			 (unsigned long long)m->snapshot_resp.next_offset,
			 m->snapshot_resp.reject ? " reject" : "", m->snapshot_resp.done ? " done" : "");
		break;
	case RAFT_MSG_READ_INDEX_RESP:
		snprintf(p, left, " ctx=%llu index=%llu err=%u",
			 (unsigned long long)m->read_index_resp.ctx,
			 (unsigned long long)m->read_index_resp.index, m->read_index_resp.err);
		break;
	default:
		break;
	}
}

/* A copy of the bytes, delivered to m->to at `at`. */
static void schedule_at(struct sim *s, const struct raft_msg *m, const uint8_t *bytes, size_t size,
			uint64_t at, uint64_t link_seq)
{
	struct sim_packet pkt;
	pkt.from = m->from;
	pkt.to = m->to;
	pkt.size = size;
	pkt.bytes = malloc(size);
	KEEL_ASSERT(pkt.bytes != NULL);
	memcpy(pkt.bytes, bytes, size);
	sim_schedule(s, at, SIM_EV_DELIVER, m->to, link_seq, &pkt);
}

static void schedule_copy(struct sim *s, const struct raft_msg *m, const uint8_t *bytes,
			  size_t size)
{
	uint64_t delay = keel_rng_between(&s->rng, s->net.min_delay_ms, s->net.max_delay_ms);
	if (keel_rng_chance(&s->rng, s->net.slow_per_mille, 1000)) {
		delay = keel_rng_between(&s->rng, s->net.max_delay_ms, s->net.slow_max_ms);
	}
	schedule_at(s, m, bytes, size, s->now + delay, 0);
}

/* A copy that arrives after everything sent before it on the link. */
static void schedule_in_order(struct sim *s, const struct raft_msg *m, const uint8_t *bytes,
			      size_t size)
{
	uint64_t at = s->now + keel_rng_between(&s->rng, s->net.min_delay_ms, s->net.max_delay_ms);
	at = KEEL_MAX(at, s->net.link_last_at[m->from][m->to]);
	s->net.link_last_at[m->from][m->to] = at;
	schedule_at(s, m, bytes, size, at, ++s->net.link_sent[m->from][m->to]);
}

void sim_net_send(struct sim *s, const struct raft_msg *m)
{
	KEEL_ASSERT(m->from >= 1 && m->from <= s->n_slots);
	if (m->to < 1 || m->to > s->n_slots) {
		return; /* to a server that never existed in this run */
	}
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, raft_msg_encoded_size(m), 64u << 20);
	enum keel_err err = raft_msg_encode(m, &w);
	KEEL_ASSERT(err == KEEL_OK);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	s->net.sent++;
	sim_trace_hash(s, keel_hash_bytes(w.data, w.size, s->now));
	if (s->cfg.verbose) {
		char line[128];
		describe(m, line, sizeof(line));
		sim_tracef(s, "send %s", line);
	}
	if (s->net.blocked[m->from][m->to] || sim_rotation_drops(s, m) ||
	    keel_rng_chance(&s->rng, s->net.drop_per_mille, 1000)) {
		s->net.dropped++;
		keel_wbuf_free(&w);
		return;
	}
	schedule_copy(s, m, w.data, w.size);
	if (keel_rng_chance(&s->rng, s->net.dup_per_mille, 1000)) {
		s->net.duplicated++;
		schedule_copy(s, m, w.data, w.size);
	}
	keel_wbuf_free(&w);
}

void sim_net_send_frame(struct sim *s, uint64_t from, uint64_t to, const uint8_t *bytes,
			size_t size, const struct raft_msg *m)
{
	KEEL_ASSERT(from >= 1 && from <= s->n_slots);
	KEEL_ASSERT(to >= 1 && to <= s->n_slots);
	s->net.sent++;
	sim_trace_hash(s, keel_hash_bytes(bytes, size, s->now));
	if (s->cfg.verbose && m != NULL) {
		char line[128];
		describe(m, line, sizeof(line));
		sim_tracef(s, "send %s", line);
	}
	if (s->net.blocked[from][to] || (m != NULL && sim_rotation_drops(s, m)) ||
	    keel_rng_chance(&s->rng, s->net.drop_per_mille, 1000)) {
		s->net.dropped++;
		return;
	}
	struct raft_msg head = {.from = from, .to = to};
	if (size >= 1 && bytes[0] != PEER_FRAME_RAFT) {
		/* The server's other peer frames (forwarded requests, replies,
		 * session touches) ride its TCP links: in order, never twice;
		 * lost when a link breaks. Only Raft's own messages, which
		 * tolerate it, see reordering and duplicates. */
		schedule_in_order(s, &head, bytes, size);
		return;
	}
	schedule_copy(s, &head, bytes, size);
	if (keel_rng_chance(&s->rng, s->net.dup_per_mille, 1000)) {
		s->net.duplicated++;
		schedule_copy(s, &head, bytes, size);
	}
}

void sim_net_deliver(struct sim *s, struct sim_event *ev)
{
	struct sim_packet *p = &ev->pkt;
	struct sim_node *n = &s->nodes[p->to];
	if (!n->up || s->net.blocked[p->from][p->to]) {
		s->net.dropped++;
		return;
	}
	if (n->host != NULL) {
		sim_host_deliver(s, n, p->from, p->bytes, p->size);
		return;
	}
	struct raft_msg_limits limits;
	raft_options_msg_limits(&s->opts, &limits);
	struct raft_entry *entries = malloc(sizeof(*entries) * limits.max_entries);
	KEEL_ASSERT(entries != NULL);
	struct raft_msg m;
	enum keel_err err = raft_msg_decode(p->bytes, p->size, &limits, &m, entries,
					    limits.max_entries);
	if (err != KEEL_OK) {
		sim_fail(s, "codec: a message we encoded does not decode: %s", keel_errname(err));
		free(entries);
		return;
	}
	if (s->cfg.verbose) {
		char line[128];
		describe(&m, line, sizeof(line));
		sim_tracef(s, "recv %s", line);
	}
	err = raft_step(n->r, &m);
	KEEL_ASSERT(err == KEEL_OK);
	free(entries);
	sim_node_process(s, n);
}

static void block(struct sim *s, uint64_t a, uint64_t b, bool both)
{
	s->net.blocked[a][b] = true;
	if (both) {
		s->net.blocked[b][a] = true;
	}
}

void sim_net_isolate(struct sim *s, uint64_t x)
{
	for (uint64_t b = 1; b <= s->n_slots; b++) {
		if (b != x) {
			block(s, x, b, true);
		}
	}
	sim_tracef(s, "fault: isolate node %llu", (unsigned long long)x);
	s->stat_partitions++;
}

void sim_net_unisolate(struct sim *s, uint64_t x)
{
	for (uint64_t b = 1; b <= s->n_slots; b++) {
		s->net.blocked[x][b] = false;
		s->net.blocked[b][x] = false;
	}
	sim_tracef(s, "fault: node %llu reconnected", (unsigned long long)x);
}

void sim_net_heal(struct sim *s)
{
	memset(s->net.blocked, 0, sizeof(s->net.blocked));
}

void sim_net_partition(struct sim *s, uint64_t x)
{
	uint32_t n = s->n_slots;
	uint64_t kind = keel_rng_below(&s->rng, 4);
	bool side[SIM_MAX_NODES + 1] = {false};
	for (uint64_t i = 1; i <= n; i++) {
		side[i] = keel_rng_chance(&s->rng, 1, 2);
	}
	switch (kind) {
	case 0: /* symmetric split into two random sides */
		for (uint64_t a = 1; a <= n; a++) {
			for (uint64_t b = 1; b <= n; b++) {
				if (side[a] != side[b]) {
					block(s, a, b, true);
				}
			}
		}
		sim_tracef(s, "fault: partition split");
		break;
	case 1: { /* one-way: x cannot send to anyone (it still hears) */
		bool hears = keel_rng_chance(&s->rng, 1, 2);
		for (uint64_t b = 1; b <= n; b++) {
			if (b != x) {
				if (hears) {
					block(s, x, b, false);
				} else {
					block(s, b, x, false);
				}
			}
		}
		sim_tracef(s, "fault: one-way %s node %llu", hears ? "mute" : "deaf",
			   (unsigned long long)x);
		break;
	}
	case 2: /* isolate x */
		sim_net_isolate(s, x);
		return;
	default: /* bridge: two sides that only x connects */
		for (uint64_t a = 1; a <= n; a++) {
			for (uint64_t b = 1; b <= n; b++) {
				if (a != x && b != x && side[a] != side[b]) {
					block(s, a, b, true);
				}
			}
		}
		sim_tracef(s, "fault: bridge through node %llu", (unsigned long long)x);
		break;
	}
	s->stat_partitions++;
}
