/*
 * sim.c — the world: event queue, phases, faults, the run's verdict.
 *
 * A run has three phases:
 *   1. faults (cfg.steps events): clients write and read while the network
 *      drops, duplicates, delays and partitions, nodes crash (losing what
 *      they had not synced, sometimes tearing a write), restart, pause, and
 *      the leader is asked to change membership or hand over leadership;
 *   2. heal: every fault stops; crashed nodes restart, paused ones resume;
 *   3. liveness: within LIVENESS_TIMEOUTS election timeouts a leader must
 *      commit a fresh write and every member must apply it, and every
 *      server whose storage refused to start must be repaired (repair.c);
 *      while the servers keep applying entries (a far-behind follower
 *      catching up one entry per round trip under the smallest windows)
 *      the time extends, up to four times that; in controller mode the
 *      metadata must then settle too.
 * Invariants are checked after every event (check.c); at the end, the
 * history is checked for linearizability and every acknowledged write
 * against the members' logs.
 *
 * Events are ordered by (time, sequence); every random choice comes from
 * one generator seeded by cfg.seed; the trace hash mixes every event, every
 * message's bytes and every client outcome.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"
#include "core/core.h"
#include "sim/sim.h"
#include "sim/zk_sim.h"

#define LIVENESS_TIMEOUTS 40
#define PROBE_EVERY_MS 100
#define ZK_FINISH_MS 60000 /* after liveness: the clients' final sync + read */

void sim_trace_hash(struct sim *s, uint64_t v)
{
	s->trace_hash = keel_hash_u64(s->trace_hash ^ v) + 0x9e3779b97f4a7c15ull;
}

void sim_tracef(struct sim *s, const char *fmt, ...)
{
	struct sim_trace_line *line = &s->ring[s->ring_next % KEEL_ARRAY_SIZE(s->ring)];
	s->ring_next++;
	int n = snprintf(line->text, sizeof(line->text), "[%8llu] ", (unsigned long long)s->now);
	va_list ap;
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof(line->text)) {
		vsnprintf(line->text + n, sizeof(line->text) - (size_t)n, fmt, ap);
	}
	va_end(ap);
	if (s->cfg.verbose) {
		printf("%s\n", line->text);
	}
}

void sim_fail(struct sim *s, const char *fmt, ...)
{
	if (s->failed) {
		return;
	}
	s->failed = true;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->failure, sizeof(s->failure), fmt, ap);
	va_end(ap);
}

/* ---- event heap ---- */

static bool ev_before(const struct sim_event *a, const struct sim_event *b)
{
	return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void push_event(struct sim *s, struct sim_event ev)
{
	if (s->n_heap == s->cap_heap) {
		s->cap_heap = s->cap_heap == 0 ? 1024 : s->cap_heap * 2;
		s->heap = realloc(s->heap, s->cap_heap * sizeof(*s->heap));
		KEEL_ASSERT(s->heap != NULL);
	}
	ev.seq = ++s->seq;
	size_t i = s->n_heap++;
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (!ev_before(&ev, &s->heap[parent])) {
			break;
		}
		s->heap[i] = s->heap[parent];
		i = parent;
	}
	s->heap[i] = ev;
}

void sim_schedule(struct sim *s, uint64_t at, uint8_t kind, uint64_t node, uint64_t arg,
		  struct sim_packet *pkt)
{
	struct sim_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.at = at;
	ev.kind = kind;
	ev.node = node;
	ev.arg = arg;
	bool node_event = kind == SIM_EV_DELIVER || kind == SIM_EV_TICK || kind == SIM_EV_DISK ||
			  kind == SIM_EV_RESTART || kind == SIM_EV_RESUME ||
			  kind == SIM_EV_ISOLATE || kind == SIM_EV_UNISOLATE ||
			  kind == SIM_EV_CTL_REQUEST;
	if (node_event && node >= 1 && node <= SIM_MAX_NODES) {
		ev.incarnation = s->nodes[node].incarnation;
	}
	if (pkt != NULL) {
		ev.pkt = *pkt;
	}
	push_event(s, ev);
}

static struct sim_event pop_event(struct sim *s)
{
	KEEL_ASSERT(s->n_heap > 0);
	struct sim_event top = s->heap[0];
	struct sim_event last = s->heap[--s->n_heap];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1;
		if (l >= s->n_heap) {
			break;
		}
		size_t c = l;
		if (l + 1 < s->n_heap && ev_before(&s->heap[l + 1], &s->heap[l])) {
			c = l + 1;
		}
		if (!ev_before(&s->heap[c], &last)) {
			break;
		}
		s->heap[i] = s->heap[c];
		i = c;
	}
	if (s->n_heap > 0) {
		s->heap[i] = last;
	}
	return top;
}

/* ---- faults ---- */

static struct sim_node *current_leader(struct sim *s)
{
	struct sim_node *best = NULL;
	for (uint32_t id = 1; id <= s->n_slots; id++) {
		struct sim_node *n = &s->nodes[id];
		if (n->up && !n->paused && raft_role(n->r) == RAFT_LEADER &&
		    (best == NULL || raft_term(n->r) > raft_term(best->r))) {
			best = n;
		}
	}
	return best;
}

const struct raft_config *sim_final_config(struct sim *s)
{
	struct sim_node *l = current_leader(s);
	return l != NULL ? raft_config(l->r) : NULL;
}

static void fault_membership(struct sim *s)
{
	struct sim_node *l = current_leader(s);
	/* While a server's disk is rotten or under repair, the operator
	 * changes nothing else: the cluster may have to do without it. */
	if (l == NULL || s->rot_node != 0 || sim_repair_busy(s)) {
		return;
	}
	const struct raft_config *c = raft_config(l->r);
	uint64_t id = 1 + keel_rng_below(&s->rng, s->n_slots);
	if (s->nodes[id].retired) {
		return; /* replaced by a repair: its identity never comes back */
	}
	uint8_t role = raft_config_role(c, id);
	enum raft_change change;
	if (role == 0) {
		change = keel_rng_chance(&s->rng, 2, 3) ? RAFT_ADD_LEARNER : RAFT_ADD_VOTER;
	} else if (role == RAFT_LEARNER) {
		change = keel_rng_chance(&s->rng, 2, 3) ? RAFT_PROMOTE : RAFT_REMOVE;
	} else if (raft_config_voters(c) > 2) {
		change = RAFT_REMOVE;
	} else {
		return;
	}
	uint64_t index, term;
	enum keel_err err = raft_change_member(l->r, change, id, &index, &term);
	static const char *const names[] = {"?", "add voter", "add learner", "promote", "remove"};
	sim_tracef(s, "fault: leader %llu: %s %llu: %s", (unsigned long long)l->id, names[change],
		   (unsigned long long)id, keel_errname(err));
	if (err == KEEL_OK) {
		s->stat_member_changes++;
		sim_node_process(s, l);
	}
}

static void fault_transfer(struct sim *s)
{
	struct sim_node *l = current_leader(s);
	if (l == NULL) {
		return;
	}
	uint64_t id = 1 + keel_rng_below(&s->rng, s->n_slots);
	enum keel_err err = raft_transfer_leader(l->r, id);
	sim_tracef(s, "fault: leader %llu: transfer to %llu: %s", (unsigned long long)l->id,
		   (unsigned long long)id, keel_errname(err));
	if (err == KEEL_OK) {
		s->stat_transfers++;
		sim_node_process(s, l);
	}
}

static uint64_t timeout_ms(const struct sim *s)
{
	return s->opts.election_timeout_ms;
}

static void crash_and_restart_later(struct sim *s, struct sim_node *n, uint64_t within_ms)
{
	sim_node_crash(s, n);
	sim_schedule(s, s->now + keel_rng_below(&s->rng, within_ms), SIM_EV_RESTART, n->id, 0,
		     NULL);
}

/* Power failure: several servers die at the same moment, each losing what
 * it had not synced. */
static void power_failure(struct sim *s)
{
	uint32_t victims = 0;
	for (uint32_t v = 1; v <= s->n_slots; v++) {
		struct sim_node *m = &s->nodes[v];
		if (m->up && keel_rng_chance(&s->rng, 2, 3)) {
			crash_and_restart_later(s, m, 2 * timeout_ms(s));
			victims++;
		}
	}
	sim_tracef(s, "fault: power failure took %u servers", victims);
}

static void rotation_start(struct sim *s);

/* Bit rot only on one server at a time, and only while the leader's
 * config has at least three voters: the rotten server may have to be
 * removed (repair.c), and the cluster must stay live without it. */
static void fault_bit_rot(struct sim *s)
{
	struct sim_node *l = current_leader(s);
	if (l == NULL || s->rot_node != 0 || sim_repair_busy(s) ||
	    raft_config_voters(raft_config(l->r)) < 3) {
		return;
	}
	uint64_t start = keel_rng_below(&s->rng, s->n_slots);
	for (uint64_t i = 0; i < s->n_slots; i++) {
		struct sim_node *n = &s->nodes[1 + (start + i) % s->n_slots];
		if (n->up || n->broken) {
			continue;
		}
		if (n->disk->ops->inject(n->disk, SIM_DISK_BIT_ROT, &s->rng)) {
			s->rot_node = n->id;
			n->rotted = true;
			s->stat_disk_faults++;
			sim_tracef(s, "fault: bit rot on the disk of node %llu", (unsigned long long)n->id);
		}
		return;
	}
}

/* Storage faults of the WAL disk: EIO (the node stops), a power cut in
 * the middle of a WAL operation, a bit flipped on a read, bit rot. */
static void fault_disk(struct sim *s, struct sim_node *n)
{
	static const char *const names[] = {"EIO soon", "power cut soon", "a read flips a bit"};
	static const enum sim_disk_fault faults[] = {SIM_DISK_EIO_SOON, SIM_DISK_POWER_CUT_SOON,
						     SIM_DISK_READ_FLIP};
	uint64_t k = keel_rng_below(&s->rng, 4);
	if (k == 3) {
		fault_bit_rot(s);
		return;
	}
	if (!n->up || !n->disk->ops->inject(n->disk, faults[k], &s->rng)) {
		return;
	}
	s->stat_disk_faults++;
	sim_tracef(s, "fault: node %llu disk: %s", (unsigned long long)n->id, names[k]);
}

static void fault_event(struct sim *s)
{
	uint64_t t = timeout_ms(s);
	if (s->rot_state != 0 && s->now < s->rot_deadline) {
		/* Let a rotation play out undisturbed. */
		sim_schedule(s, s->now + t, SIM_EV_FAULT, 0, 0, NULL);
		return;
	}
	uint64_t kind = keel_rng_below(&s->rng, 100);
	uint64_t id = 1 + keel_rng_below(&s->rng, s->n_slots);
	/* Half of the node faults hunt the leader: that is where terms
	 * change with unreplicated tails behind them. */
	struct sim_node *l = current_leader(s);
	if (l != NULL && keel_rng_chance(&s->rng, 1, 2)) {
		id = l->id;
	}
	struct sim_node *n = &s->nodes[id];
	if (keel_rng_chance(&s->rng, 1, 6)) {
		fault_disk(s, n);
	} else if (kind < 22) {
		sim_net_partition(s, id);
		sim_zkw_cut(s, id);
		sim_schedule(s, s->now + keel_rng_between(&s->rng, t / 2, 5 * t), SIM_EV_HEAL, 0, 0,
			     NULL);
	} else if (kind < 30) {
		power_failure(s);
	} else if (kind < 42) {
		if (n->up) {
			sim_node_crash(s, n);
			sim_schedule(s, s->now + keel_rng_below(&s->rng, 3 * t), SIM_EV_RESTART, id, 0,
				     NULL);
		}
	} else if (kind < 50) {
		if (n->up && !n->paused) {
			n->paused = true;
			s->stat_pauses++;
			sim_tracef(s, "fault: pause node %llu", (unsigned long long)id);
			sim_schedule(s, s->now + keel_rng_between(&s->rng, t / 2, 3 * t), SIM_EV_RESUME,
				     id, 0, NULL);
		}
	} else if (kind < 62) {
		fault_membership(s);
	} else if (kind < 68) {
		fault_transfer(s);
	} else if (kind < 82) {
		rotation_start(s);
	} else if (kind < 87) {
		/* A slow disk: a crash now loses more. */
		bool slow = n->fsync_max_ms <= 20;
		n->fsync_min_ms = slow ? 20 : 1;
		n->fsync_max_ms = slow ? keel_rng_between(&s->rng, 50, 2 * t) : 12;
		sim_tracef(s, "fault: node %llu disk %s (fsync up to %llu ms)", (unsigned long long)id,
			   slow ? "slow" : "normal", (unsigned long long)n->fsync_max_ms);
	} else if (kind < 94) {
		/* Now and then a very lossy network: partial replication
		 * everywhere, leaders come and go. */
		s->net.drop_per_mille = (uint32_t)keel_rng_below(
			&s->rng, keel_rng_chance(&s->rng, 1, 4) ? 500 : 150);
		s->net.dup_per_mille = (uint32_t)keel_rng_below(&s->rng, 60);
		s->net.slow_per_mille = (uint32_t)keel_rng_below(&s->rng, 100);
		sim_tracef(s, "fault: drop %u/1000 dup %u/1000 slow %u/1000", s->net.drop_per_mille,
			   s->net.dup_per_mille, s->net.slow_per_mille);
	} else {
		s->net.max_delay_ms = keel_rng_between(&s->rng, 2, t / 4);
		sim_tracef(s, "fault: delays up to %llu ms", (unsigned long long)s->net.max_delay_ms);
	}
	if (s->faults_on) {
		sim_schedule(s, s->now + keel_rng_between(&s->rng, t / 4, 4 * t), SIM_EV_FAULT, 0, 0,
			     NULL);
	}
}

/*
 * The rotation nemesis: the pattern of the paper's Figure 8 as a fault.
 *   1. cut off the leader A (it keeps taking writes: a tail of its term);
 *   2. the next leader B is cut off at once (its no-op goes nowhere: a
 *      tail of a higher term at the same indexes); A comes back;
 *   3. if A leads again, it is cut off while it brings the others up to
 *      date with its old tail, and B comes back.
 * A correct core commits none of A's old entries by counting replicas in
 * step 3, so B may overwrite them; a core that does, loses them.
 */
static void rotation_reset(struct sim *s)
{
	if (s->rot_a != 0) {
		sim_net_unisolate(s, s->rot_a);
	}
	if (s->rot_b != 0) {
		sim_net_unisolate(s, s->rot_b);
	}
	s->rot_state = 0;
	s->rot_a = 0;
	s->rot_b = 0;
}

static void rotation_start(struct sim *s)
{
	struct sim_node *l = current_leader(s);
	if (s->rot_state != 0 || l == NULL) {
		return;
	}
	s->rot_state = 1;
	s->rot_a = l->id;
	s->rot_deadline = s->now + 20 * timeout_ms(s);
	sim_net_isolate(s, l->id);
	sim_tracef(s, "fault: rotation starts with leader %llu", (unsigned long long)l->id);
}

/* Returns true when the rotation took this election. */
static bool rotation_on_leader(struct sim *s, struct sim_node *n)
{
	if (s->rot_state == 0) {
		return false;
	}
	if (s->now > s->rot_deadline) {
		rotation_reset(s);
		return false;
	}
	if (s->rot_state == 1 && n->id != s->rot_a) {
		s->rot_b = n->id;
		sim_net_unisolate(s, s->rot_a); /* first: it clears A's links */
		sim_net_isolate(s, n->id);
		s->rot_state = 2;
		return true;
	}
	if (s->rot_state == 2) {
		if (n->id == s->rot_a) {
			s->rot_drop_new = keel_rng_chance(&s->rng, 1, 2);
			sim_tracef(s, "fault: rotation: %llu leads again%s", (unsigned long long)n->id,
				   s->rot_drop_new ? ", its new-term appends get lost" : "");
			uint64_t rtt = 2 * s->net.max_delay_ms + 1;
			sim_schedule(s, s->now + keel_rng_between(&s->rng, rtt, 6 * rtt), SIM_EV_ISOLATE,
				     n->id, 3, NULL);
		} else {
			rotation_reset(s);
		}
		s->rot_state = 3;
		return true;
	}
	return false;
}

/* Step 3 may lose A's appends that carry entries of its new term, so that
 * followers get only its old tail before A is cut off. */
bool sim_rotation_drops(struct sim *s, const struct raft_msg *m)
{
	if (s->rot_state != 3 || !s->rot_drop_new || m->from != s->rot_a ||
	    m->type != RAFT_MSG_APPEND) {
		return false;
	}
	bool carries_new = false;
	for (uint32_t i = 0; i < m->append.n_entries; i++) {
		carries_new |= m->append.entries[i].term == m->term;
	}
	if (!carries_new) {
		return false;
	}
	/* Only what the receiver would accept: a probe it rejects is how A
	 * finds where to send its old tail from. */
	const struct sim_node *to = &s->nodes[m->to];
	struct raft_entry prev;
	if (!to->up) {
		return false;
	}
	if (m->append.prev_index == 0) {
		return true;
	}
	return raft_entry_at(to->r, m->append.prev_index, &prev) && prev.term == m->append.prev_term;
}

/* A network heal does not end a rotation's isolation. */
static void rotation_reapply(struct sim *s)
{
	if (s->rot_state == 1 && s->rot_a != 0) {
		sim_net_isolate(s, s->rot_a);
	} else if (s->rot_state >= 2 && s->rot_b != 0) {
		sim_net_isolate(s, s->rot_b);
	}
}

void sim_on_new_leader(struct sim *s, struct sim_node *n)
{
	if (!s->faults_on || rotation_on_leader(s, n) || s->rot_state != 0) {
		return;
	}
	if (!keel_rng_chance(&s->rng, s->hunt_per_mille, 1000)) {
		return;
	}
	/* Strike soon: before its first append lands, or halfway through
	 * catching followers up — cut it off, crash it, or cut the power. */
	uint64_t delay = keel_rng_below(&s->rng, (keel_rng_chance(&s->rng, 1, 2) ? 2 : 10) *
							  s->net.max_delay_ms + 1);
	sim_schedule(s, s->now + delay, SIM_EV_ISOLATE, n->id, keel_rng_below(&s->rng, 3), NULL);
}

/* ---- setup ---- */

void sim_add_server(struct sim *s, uint64_t id, bool member_of_initial)
{
	KEEL_ASSERT(id >= 1 && id <= SIM_MAX_NODES && id <= s->n_slots);
	struct sim_node *n = &s->nodes[id];
	KEEL_ASSERT(!n->exists);
	n->id = id;
	n->exists = true;
	n->clock_rate = 0.97 + 0.06 * (double)keel_rng_below(&s->rng, 1001) / 1000.0;
	n->clock_base = keel_rng_below(&s->rng, 1u << 30);
	n->snapshot_every = keel_rng_between(&s->rng, 15, 80);
	n->fsync_min_ms = 1;
	n->fsync_max_ms = 12;
	sim_node_boot(s, n, member_of_initial);
}

static void setup(struct sim *s, const struct sim_config *cfg)
{
	memset(s, 0, sizeof(*s));
	s->cfg = *cfg;
	keel_rng_seed(&s->rng, cfg->seed);
	s->trace_hash = keel_hash_u64(cfg->seed);
	s->n_slots = cfg->nodes + 2; /* two spares that may join */
	KEEL_ASSERT(s->n_slots <= SIM_MAX_NODES);

	struct raft_options *o = &s->opts;
	raft_options_default(o);
	o->election_timeout_ms = (uint32_t)keel_rng_between(&s->rng, 150, 500);
	o->heartbeat_interval_ms = (uint32_t)KEEL_MAX(40, o->election_timeout_ms / 5);
	/* Small appends often: one entry per message is where commit-rule
	 * mistakes (Figure 8) show. */
	uint64_t shape = keel_rng_below(&s->rng, 3);
	o->max_append_entries = shape == 0   ? 1
				: shape == 1 ? (uint32_t)keel_rng_between(&s->rng, 2, 8)
					     : (uint32_t)keel_rng_between(&s->rng, 8, 64);
	o->max_append_bytes = (uint32_t)keel_rng_between(&s->rng, 32, 4096);
	o->max_inflight_msgs = keel_rng_chance(&s->rng, 1, 3)
				       ? 1
				       : (uint32_t)keel_rng_between(&s->rng, 2, 16);
	o->max_inflight_bytes = keel_rng_between(&s->rng, 64, 1u << 16);
	o->max_persist_batches = (uint32_t)keel_rng_between(&s->rng, 1, 8);
	o->snapshot_chunk_bytes = (uint32_t)keel_rng_between(&s->rng, 64, 512);
	o->max_inflight_chunks = (uint32_t)keel_rng_between(&s->rng, 1, 4);
	o->snapshot_trailing_entries = keel_rng_below(&s->rng, 30);
	o->read_timeout_ms = 2 * o->election_timeout_ms;
	o->max_pending_reads = 64;
	o->max_uncommitted_bytes = keel_rng_between(&s->rng, 256, 1u << 16);
	o->max_outbox_msgs = 1024;
	s->snapshot_pad = keel_rng_between(&s->rng, 100, 1500);
	sim_waldisk_params(&s->rng, &s->wal_params);
	if (cfg->controller) {
		/* The controller glue builds each batch in a buffer of at least
		 * 4 KiB bounded by the largest entry. */
		sim_waldisk_params_at_least(&s->wal_params, 8u << 10);
		/* Its snapshots hold the metadata image and its ZooKeeper view
		 * (kilobytes): chunks of 64 bytes made a lagging server's catch-up
		 * outlast the liveness deadline. */
		o->snapshot_chunk_bytes *= 8;
	} else if (cfg->zk) {
		/* Likewise the ZooKeeper workload's trees and sessions: with
		 * the smallest chunks a lagging server's transfer outlasted
		 * the leader's next snapshots, again and again. */
		o->snapshot_chunk_bytes *= 8;
	}
	o->max_entry_bytes = s->wal_params.max_entry_bytes;
	if (cfg->controller) {
		/* A metadata batch must fit the uncommitted window. */
		o->max_uncommitted_bytes = KEEL_MAX(o->max_uncommitted_bytes, 32u << 10);
	}

	s->net.min_delay_ms = 1;
	s->net.max_delay_ms = keel_rng_between(&s->rng, 2, 30);
	s->net.drop_per_mille = (uint32_t)keel_rng_below(&s->rng, 50);
	s->net.dup_per_mille = (uint32_t)keel_rng_below(&s->rng, 30);
	s->net.slow_per_mille = (uint32_t)keel_rng_below(&s->rng, 30);
	s->net.slow_max_ms = 3 * o->election_timeout_ms;
	/* One run in three is a churn run: every new leader is struck soon. */
	s->hunt_per_mille = keel_rng_chance(&s->rng, 1, 3) ? 1000
							 : (uint32_t)keel_rng_below(&s->rng, 300);

	sim_check_init(s);
	if (cfg->controller) {
		sim_ctl_world_new(s);
	}
	if (cfg->zk) {
		sim_zkf_new(s); /* the servers' cores take their feed options from it */
	}
	for (uint32_t id = 1; id <= s->n_slots; id++) {
		sim_add_server(s, id, id <= cfg->nodes);
	}
	s->workload_on = true;
	s->faults_on = true;
	/* Impatient clients keep feeding a leader that lost its quorum: long
	 * unreplicated tails. */
	s->client_timeout_ms = keel_rng_between(&s->rng, o->election_timeout_ms / 2, 4000);
	uint32_t kv_clients = (uint32_t)keel_rng_between(&s->rng, 3, 6);
	sim_clients_init(s, cfg->zk ? 0 : kv_clients);
	if (cfg->zk) {
		sim_zkw_new(s);
	}
	sim_schedule(s, s->now + keel_rng_between(&s->rng, 2 * timeout_ms(s), 6 * timeout_ms(s)),
		     SIM_EV_FAULT, 0, 0, NULL);
	if (cfg->controller) {
		sim_ctl_world_init(s);
	}
}

static void teardown(struct sim *s)
{
	for (uint32_t id = 1; id <= s->n_slots; id++) {
		sim_node_free(&s->nodes[id]);
	}
	sim_ctl_world_free(s);
	sim_zkw_free(s);
	sim_zkf_free(s);
	for (size_t i = 0; i < s->n_heap; i++) {
		free(s->heap[i].pkt.bytes);
	}
	free(s->heap);
	free(s->hist);
	sim_check_free(s);
}

/* A scheduled strike on a node: 0 isolate it, 1 crash it, 2 power failure,
 * 3 the rotation's step 3 (cut A off, bring B back). */
static void strike(struct sim *s, struct sim_node *n, uint64_t how)
{
	uint64_t t = timeout_ms(s);
	if (how == 0) {
		sim_net_isolate(s, n->id);
		sim_zkw_cut(s, n->id);
		sim_schedule(s, s->now + keel_rng_between(&s->rng, t, 4 * t), SIM_EV_UNISOLATE, n->id,
			     0, NULL);
	} else if (how == 1 && n->up) {
		crash_and_restart_later(s, n, 3 * t);
	} else if (how == 2) {
		power_failure(s);
	} else if (how == 3 && s->rot_state == 3) {
		/* rotation, step 3: A goes, B comes back */
		if (s->rot_b != 0) {
			sim_net_unisolate(s, s->rot_b);
		}
		sim_net_isolate(s, n->id);
		s->rot_state = 0;
		s->rot_a = 0;
		s->rot_b = 0;
		sim_schedule(s, s->now + keel_rng_between(&s->rng, t, 4 * t), SIM_EV_UNISOLATE, n->id,
			     0, NULL);
	}
}

/* ---- the loop ---- */

static bool node_event_void(struct sim *s, const struct sim_event *ev)
{
	struct sim_node *n = &s->nodes[ev->node];
	if (ev->kind == SIM_EV_TICK || ev->kind == SIM_EV_DISK) {
		return !n->up || ev->incarnation != n->incarnation;
	}
	return false;
}

static void dispatch(struct sim *s, struct sim_event *ev)
{
	struct sim_node *n = ev->node >= 1 && ev->node <= SIM_MAX_NODES ? &s->nodes[ev->node] : NULL;
	switch (ev->kind) {
	case SIM_EV_DELIVER:
		sim_net_deliver(s, ev);
		break;
	case SIM_EV_TICK:
		sim_node_tick(s, n);
		break;
	case SIM_EV_DISK:
		sim_node_disk_done(s, n);
		break;
	case SIM_EV_CLIENT:
		if (ev->arg == s->clients[ev->node].gen) {
			sim_client_event(s, (uint32_t)ev->node);
		}
		break;
	case SIM_EV_FAULT:
		if (s->faults_on) {
			fault_event(s);
		}
		break;
	case SIM_EV_RESTART:
		if (!n->up) {
			sim_node_start(s, n);
			sim_node_process(s, n);
		}
		break;
	case SIM_EV_RESUME:
		if (n->up && n->paused) {
			n->paused = false;
			sim_tracef(s, "node %llu: resume", (unsigned long long)n->id);
		}
		break;
	case SIM_EV_ISOLATE:
		if (s->faults_on) {
			strike(s, n, ev->arg);
		}
		break;
	case SIM_EV_UNISOLATE:
		sim_net_unisolate(s, ev->node);
		break;
	case SIM_EV_HEAL:
		sim_net_heal(s);
		sim_tracef(s, "fault: heal network");
		if (s->faults_on) {
			rotation_reapply(s);
		}
		break;
	case SIM_EV_REPAIR:
		sim_repair_tick(s);
		break;
	case SIM_EV_CTL_REQUEST:
		sim_ctl_request(s, ev);
		break;
	case SIM_EV_CTL_REPLY:
		sim_ctl_reply(s, ev);
		break;
	case SIM_EV_BROKER:
	case SIM_EV_BROKER_RESTART:
	case SIM_EV_BROKER_RESUME:
		sim_broker_event(s, ev);
		break;
	case SIM_EV_BROKER_FAULT:
		if (s->faults_on) {
			sim_broker_fault(s);
		}
		break;
	case SIM_EV_ADMIN:
		sim_admin_event(s, ev->arg);
		break;
	case SIM_EV_ZK_TICK:
	case SIM_EV_ZK_NET:
		sim_zkw_event(s, ev);
		break;
	default:
		KEEL_UNREACHABLE();
	}
}

/* Runs one event. Events for a paused node wait until it resumes. */
static void step(struct sim *s)
{
	struct sim_event ev = pop_event(s);
	KEEL_ASSERT(ev.at >= s->now);
	s->now = ev.at;
	bool node_bound = ev.kind == SIM_EV_DELIVER || ev.kind == SIM_EV_TICK ||
			  ev.kind == SIM_EV_DISK || ev.kind == SIM_EV_CTL_REQUEST;
	if (node_bound && s->nodes[ev.node].up && s->nodes[ev.node].paused) {
		/* Deferred: re-queued behind the pause, as it was. */
		ev.at = s->now + 10;
		push_event(s, ev);
		return;
	}
	if (ev.kind == SIM_EV_DELIVER && ev.arg != 0) {
		/* An in-order frame: one sent before it on its link is still
		 * on the way (held up behind a pause): it waits. */
		uint64_t *taken = &s->net.link_taken[ev.pkt.from][ev.pkt.to];
		if (ev.arg != *taken + 1) {
			ev.at = s->now + 1;
			push_event(s, ev);
			return;
		}
		*taken = ev.arg;
	}
	sim_trace_hash(s, ev.at * 31 + ev.kind * 7 + ev.node * 131 + ev.arg);
	if (!node_event_void(s, &ev)) {
		dispatch(s, &ev);
	}
	free(ev.pkt.bytes);
	if (!s->failed) {
		sim_check_step(s);
	}
	if (s->n_heap > 500000) {
		/* Runaway traffic (e.g. a resend storm) is a bug too. */
		sim_fail(s, "event queue exploded: %zu events pending", s->n_heap);
	}
}

static void heal_all(struct sim *s)
{
	s->faults_on = false;
	s->rot_state = 0;
	sim_net_heal(s);
	s->net.drop_per_mille = 0;
	s->net.dup_per_mille = 0;
	s->net.slow_per_mille = 0;
	s->net.max_delay_ms = KEEL_MIN(s->net.max_delay_ms, 10);
	for (uint32_t id = 1; id <= s->n_slots; id++) {
		struct sim_node *n = &s->nodes[id];
		n->disk->ops->heal(n->disk);
		if (!n->up && !n->retired) {
			sim_node_start(s, n); /* a broken one waits for its repair */
			sim_node_process(s, n);
		}
		n->paused = false;
		n->fsync_min_ms = 1;
		n->fsync_max_ms = 12;
	}
	if (s->cfg.controller) {
		sim_ctl_heal(s);
	}
	sim_tracef(s, "heal: all faults stop");
}

/* What the running servers have applied, summed: it grows while any of
 * them makes progress. */
static uint64_t applied_total(const struct sim *s)
{
	uint64_t sum = 0;
	for (uint32_t id = 1; id <= s->n_slots; id++) {
		sum += s->nodes[id].up ? s->nodes[id].sm.applied : 0;
	}
	return sum;
}

/* After heal: a leader commits a fresh write that every member applies. */
static void liveness(struct sim *s)
{
	uint64_t budget = LIVENESS_TIMEOUTS * timeout_ms(s);
	uint64_t start = s->now;
	uint64_t deadline = start + budget;
	uint64_t applied = applied_total(s);
	uint64_t next_probe = s->now;
	size_t probe = SIZE_MAX;
	uint32_t probe_client = s->n_clients; /* a client slot no workload uses */
	uint64_t probe_deadline = 0;
	while (!s->failed && s->now < deadline) {
		const struct sim_hist_op *h = probe == SIZE_MAX ? NULL : &s->hist[probe];
		if (h != NULL && h->status == SIM_OP_PENDING && s->now >= probe_deadline) {
			/* Given up, as a client would: a leader that was removed
			 * from the configuration never hears the outcome. */
			sim_hist_complete(s, probe, SIM_OP_UNKNOWN, 0);
		}
		if (s->now >= next_probe && (h == NULL || h->status == SIM_OP_FAILED ||
					     h->status == SIM_OP_UNKNOWN)) {
			next_probe = s->now + PROBE_EVERY_MS;
			struct sim_node *l = current_leader(s);
			if (l != NULL) {
				size_t op = sim_hist_add(s, probe_client, SIM_WRITE, 0,
							 (uint64_t)s->n_hist + 1);
				if (sim_node_propose(s, l, op)) {
					probe = op;
					probe_deadline = s->now + s->client_timeout_ms;
				} else {
					sim_hist_complete(s, op, SIM_OP_FAILED, 0);
				}
			}
		}
		h = probe == SIZE_MAX ? NULL : &s->hist[probe];
		if (h != NULL && h->status == SIM_OP_OK) {
			struct sim_node *l = &s->nodes[h->node];
			const struct raft_config *c = l->up ? raft_config(l->r) : NULL;
			bool all = c != NULL;
			for (uint32_t i = 0; c != NULL && i < c->count && all; i++) {
				struct sim_node *m = &s->nodes[c->members[i].id];
				all = m->up && m->sm.applied >= h->index;
			}
			if (all && !sim_repair_busy(s)) {
				sim_tracef(s, "liveness: write %llu/%llu applied by every member",
					   (unsigned long long)h->index, (unsigned long long)h->term);
				return;
			}
		}
		if (s->n_heap == 0) {
			break;
		}
		step(s);
		uint64_t now_applied = applied_total(s);
		if (now_applied > applied) {
			/* Still catching up: progress, not a stall. */
			applied = now_applied;
			deadline = KEEL_MIN(start + 4 * budget, KEEL_MAX(deadline, s->now + budget / 4));
		}
		if (s->now >= start + budget) {
			/* Past the usual time, the clients stop adding work (and
			 * history for the linearizability check); the probe goes on. */
			s->workload_on = false;
		}
	}
	if (!s->failed) {
		sim_fail(s, "liveness: no write committed and applied by all members%s within %llu ms "
			    "after heal",
			 sim_repair_busy(s) ? " (and a broken server repaired)" : "",
			 (unsigned long long)(s->now - start));
	}
}

/* Controller mode, after heal: the metadata settles (every broker active,
 * every partition led with a full ISR) within a bounded time. */
static void controller_liveness(struct sim *s)
{
	uint64_t budget = LIVENESS_TIMEOUTS * timeout_ms(s) + 8 * SIM_CTL_SESSION_MAX_MS;
	uint64_t deadline = s->now + budget;
	char why[256] = "";
	while (!s->failed && s->now < deadline && s->n_heap > 0) {
		if (sim_ctl_settled(s, why, sizeof(why))) {
			sim_tracef(s, "liveness: metadata settled");
			return;
		}
		step(s);
	}
	if (!s->failed) {
		sim_fail(s, "controller liveness: metadata not settled %llu ms after heal: %s",
			 (unsigned long long)budget, why);
	}
}

/* Lets outstanding client operations finish or time out. */
static void drain_clients(struct sim *s)
{
	s->workload_on = false;
	uint64_t deadline = s->now + 10000;
	for (;;) {
		bool busy = false;
		for (uint32_t i = 0; i < s->n_clients; i++) {
			busy |= s->clients[i].busy;
		}
		if (!busy || s->failed || s->now >= deadline || s->n_heap == 0) {
			return;
		}
		step(s);
	}
}

static void final_checks(struct sim *s)
{
	for (size_t i = 0; i < s->n_hist && !s->failed; i++) {
		const struct sim_hist_op *h = &s->hist[i];
		if (h->kind != SIM_WRITE || h->status != SIM_OP_OK) {
			continue;
		}
		if (h->index >= s->cap_committed || !s->committed[h->index].known ||
		    s->committed[h->index].term != h->term) {
			sim_fail(s, "acknowledged write lost: %llu/%llu", (unsigned long long)h->index,
				 (unsigned long long)h->term);
		}
	}
	if (s->failed) {
		return;
	}
	char why[256];
	if (!sim_linearizable(s->hist, s->n_hist, why, sizeof(why))) {
		sim_fail(s, "linearizability: %s", why);
	}
}

static void print_last_events(const struct sim *s)
{
	printf("last events (replay with --verbose for all):\n");
	size_t n = KEEL_MIN(s->ring_next, KEEL_ARRAY_SIZE(s->ring));
	for (size_t i = s->ring_next - n; i < s->ring_next; i++) {
		printf("  %s\n", s->ring[i % KEEL_ARRAY_SIZE(s->ring)].text);
	}
}

/* Every member of the leader's configuration runs and applied all the
 * leader has. */
static bool zk_quiet(struct sim *s)
{
	struct sim_node *l = current_leader(s);
	if (l == NULL || sim_repair_busy(s)) {
		return false;
	}
	const struct raft_config *c = raft_config(l->r);
	uint64_t last = raft_last_index(l->r);
	if (sim_host_core(l)->applied_index != last) {
		return false;
	}
	for (uint32_t i = 0; i < c->count; i++) {
		struct sim_node *m = &s->nodes[c->members[i].id];
		if (!m->up || m->host == NULL || sim_host_core(m)->applied_index != last) {
			return false;
		}
	}
	return true;
}

/* The ZooKeeper workload after liveness: the clients finish (a final sync
 * + read each), the cluster settles, then the ZooKeeper checkers run. */
static void zk_finish(struct sim *s, struct simzk_result *r)
{
	sim_zkw_finish(s);
	uint64_t deadline = s->now + ZK_FINISH_MS;
	bool settled = false;
	while (!s->failed && s->now < deadline && s->n_heap > 0) {
		if (sim_zkw_idle(s) && zk_quiet(s)) {
			settled = true;
			break;
		}
		step(s);
	}
	if (s->failed) {
		return;
	}
	if (!settled) {
		sim_fail(s, "zk liveness: the clients did not finish, or the members did not settle, "
			    "within %u ms",
			 ZK_FINISH_MS);
		sim_zkw_print_stuck(s);
		return;
	}
	if (!sim_zkw_check(s, r)) {
		sim_fail(s, "zk: %s", r->why);
	}
}

static void report_zk(const struct sim *s, const struct simzk_result *r)
{
	uint64_t trace = keel_hash_u64(s->trace_hash ^ r->trace);
	printf("%s seed=%llu nodes=%u steps=%llu workload=zk trace=%016llx sim_ms=%llu ops=%llu "
	       "unknown=%llu sessions=%llu watches=%llu events=%llu moves=%llu expiries=%llu "
	       "expired=%llu closes=%llu leader_changes=%llu zxid=%llu crashes=%llu "
	       "partitions=%llu members=%llu snapshots=%llu installs=%llu dfaults=%llu "
	       "feed_changes=%llu feed_subs=%llu feed_moves=%llu feed_compacted=%llu "
	       "feed_gaps=%llu%s%s\n",
	       s->failed ? "FAIL" : "ok", (unsigned long long)s->cfg.seed, s->cfg.nodes,
	       (unsigned long long)s->cfg.steps, (unsigned long long)trace,
	       (unsigned long long)s->now, (unsigned long long)r->ops,
	       (unsigned long long)r->unknown, (unsigned long long)r->sessions,
	       (unsigned long long)r->watches, (unsigned long long)r->events,
	       (unsigned long long)r->moves, (unsigned long long)r->expiries,
	       (unsigned long long)r->expired_by_server, (unsigned long long)r->closes,
	       (unsigned long long)s->stat_elections, (unsigned long long)r->zxid,
	       (unsigned long long)s->stat_crashes, (unsigned long long)s->stat_partitions,
	       (unsigned long long)s->stat_member_changes, (unsigned long long)s->stat_snapshots,
	       (unsigned long long)s->stat_snap_installs, (unsigned long long)s->stat_disk_faults,
	       (unsigned long long)r->feed_changes, (unsigned long long)r->feed_subscriptions,
	       (unsigned long long)r->feed_moves, (unsigned long long)r->feed_compacted,
	       (unsigned long long)r->feed_gaps, s->failed ? ": " : "", s->failed ? s->failure : "");
	if (s->failed) {
		print_last_events(s);
		printf("replay: keel-sim --seed %llu --nodes %u --workload zk --steps %llu --verbose\n",
		       (unsigned long long)s->cfg.seed, s->cfg.nodes, (unsigned long long)s->cfg.steps);
	}
}

static void report(const struct sim *s)
{
	if (s->failed) {
		printf("FAIL seed=%llu nodes=%u steps=%llu: %s\n", (unsigned long long)s->cfg.seed,
		       s->cfg.nodes, (unsigned long long)s->cfg.steps, s->failure);
		print_last_events(s);
		printf("FAIL seed=%llu nodes=%u steps=%llu\n", (unsigned long long)s->cfg.seed,
		       s->cfg.nodes, (unsigned long long)s->cfg.steps);
		printf("replay: keel-sim --seed %llu --nodes %u --steps %llu%s --verbose\n",
		       (unsigned long long)s->cfg.seed, s->cfg.nodes, (unsigned long long)s->cfg.steps,
		       s->cfg.controller ? " --controller" : "");
		return;
	}
	struct sim_disk_stats d;
	memset(&d, 0, sizeof(d));
	for (uint32_t id = 1; id <= s->n_slots; id++) {
		struct sim_disk_stats one;
		s->nodes[id].disk->ops->stats(s->nodes[id].disk, &one);
		sim_disk_stats_add(&d, &one);
	}
	char ctl[256] = "";
	if (s->cfg.controller) {
		sim_ctl_report(s, ctl, sizeof(ctl));
	}
	printf("ok seed=%llu nodes=%u steps=%llu trace=%016llx sim_ms=%llu writes=%llu reads=%llu "
	       "elections=%llu crashes=%llu torn=%llu partitions=%llu pauses=%llu members=%llu "
	       "transfers=%llu snapshots=%llu installs=%llu msgs=%llu disk=%s rolls=%llu "
	       "reused=%llu compactions=%llu recoveries_with_repairs=%llu dfaults=%llu stops=%llu "
	       "refusals=%llu repairs=%llu%s\n",
	       (unsigned long long)s->cfg.seed, s->cfg.nodes, (unsigned long long)s->cfg.steps,
	       (unsigned long long)s->trace_hash, (unsigned long long)s->now,
	       (unsigned long long)s->stat_writes_ok, (unsigned long long)s->stat_reads_ok,
	       (unsigned long long)s->stat_elections, (unsigned long long)s->stat_crashes,
	       (unsigned long long)s->stat_torn, (unsigned long long)s->stat_partitions,
	       (unsigned long long)s->stat_pauses, (unsigned long long)s->stat_member_changes,
	       (unsigned long long)s->stat_transfers, (unsigned long long)s->stat_snapshots,
	       (unsigned long long)s->stat_snap_installs, (unsigned long long)s->net.sent,
	       "wal", (unsigned long long)d.segment_rolls,
	       (unsigned long long)d.segments_reused, (unsigned long long)d.compactions,
	       (unsigned long long)d.repairs_at_start, (unsigned long long)s->stat_disk_faults, (unsigned long long)s->stat_storage_stops,
	       (unsigned long long)s->stat_refusals, (unsigned long long)s->stat_repairs, ctl);
}

int sim_run(const struct sim_config *cfg)
{
	struct sim *s = malloc(sizeof(*s));
	KEEL_ASSERT(s != NULL);
	setup(s, cfg);
	while (!s->failed && s->steps < cfg->steps && s->n_heap > 0) {
		step(s);
		s->steps++;
	}
	if (!s->failed) {
		heal_all(s);
		liveness(s);
	}
	if (!s->failed && s->cfg.controller) {
		controller_liveness(s);
	}
	struct simzk_result zr;
	memset(&zr, 0, sizeof(zr));
	if (!s->failed && s->cfg.zk) {
		zk_finish(s, &zr);
	}
	if (!s->failed) {
		drain_clients(s);
	}
	if (!s->failed) {
		final_checks(s);
	}
	if (s->cfg.zk) {
		sim_zkw_counts(s, &zr);
		report_zk(s, &zr);
	} else {
		report(s);
	}
	int rc = s->failed ? 1 : 0;
	teardown(s);
	free(s);
	return rc;
}
