/*
 * repair.c — the operator's procedure for a server whose storage refuses
 * to start (the WAL found damage it cannot explain by a crash and says so,
 * docs/storage-format.md).
 *
 * A refusal is retried once (a bit flipped on the way from the disk is gone
 * on the next read); a second refusal marks the server broken, and the
 * operator then, one step per SIM_EV_REPAIR event:
 *
 *   1. asks the leader to REMOVE the server from the configuration (if it
 *      is a member), remembering the role it had;
 *   2. waits until the leader's configuration without it is COMMITTED
 *      (config index <= commit index), then retires it for good and starts
 *      a REPLACEMENT with an empty data directory under a NEW server id;
 *   3. adds the replacement as a learner, and promotes it once it has
 *      applied the configuration that added it (if the old one was a
 *      voter).
 *
 * Why a new id. An emptied server that keeps its id has forgotten its vote
 * and the entries it acknowledged, and some servers may still run with an
 * old configuration that counts it: a lagging server whose log ends before
 * the removal — even before earlier changes — can win an election with the
 * emptied server's vote and a log that misses committed entries. The
 * simulator found exactly that with "remove, wait for the commit, wipe,
 * re-add under the same id" (pinned seed 926140756018/3: leader
 * completeness). Raft's membership argument relies on every server of
 * every configuration keeping its durable state; a retired id never votes
 * again, so configurations that still count it merely see a dead server,
 * and the replacement joins as the ordinary addition of an empty server
 * (etcd and KRaft give replaced servers new member or directory ids for
 * the same reason).
 */
#include "base/assert.h"
#include "sim/sim.h"

static uint64_t repair_interval_ms(const struct sim *s)
{
	return s->opts.election_timeout_ms / 2;
}

static void schedule_repair(struct sim *s)
{
	if (!s->repair_scheduled) {
		s->repair_scheduled = true;
		sim_schedule(s, s->now + repair_interval_ms(s), SIM_EV_REPAIR, 0, 0, NULL);
	}
}

static struct sim_node *leader(struct sim *s)
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

void sim_repair_needed(struct sim *s, struct sim_node *n)
{
	sim_tracef(s, "repair: node %llu is broken (its storage refuses to start)",
		   (unsigned long long)n->id);
	schedule_repair(s);
}

bool sim_repair_busy(const struct sim *s)
{
	for (uint32_t id = 1; id <= s->n_slots; id++) {
		if (s->nodes[id].broken || s->readd_role[id] != 0) {
			return true;
		}
	}
	return false;
}

static bool config_committed(const struct sim_node *l)
{
	struct raft_status st;
	raft_status(l->r, &st);
	return st.config_index <= st.commit_index;
}

static void change(struct sim *s, struct sim_node *l, enum raft_change what, uint64_t id)
{
	static const char *const names[] = {"?", "add voter", "add learner", "promote", "remove"};
	uint64_t index = 0, term = 0;
	enum keel_err err = raft_change_member(l->r, what, id, &index, &term);
	sim_tracef(s, "repair: leader %llu: %s %llu: %s", (unsigned long long)l->id, names[what],
		   (unsigned long long)id, keel_errname(err));
	if (err == KEEL_OK) {
		sim_node_process(s, l);
	}
}

/* Steps 1 and 2; true once the server is retired (and replaced). */
static bool repair_broken(struct sim *s, struct sim_node *n)
{
	struct sim_node *l = leader(s);
	if (l == NULL) {
		return false;
	}
	uint8_t role = raft_config_role(raft_config(l->r), n->id);
	if (role != 0) {
		if (s->readd_role[n->id] == 0) {
			s->readd_role[n->id] = role;
		}
		change(s, l, RAFT_REMOVE, n->id);
		return false;
	}
	if (!config_committed(l)) {
		return false; /* the removal (or a later change) is not committed yet */
	}
	n->broken = false;
	n->retired = true;
	s->stat_repairs++;
	if (s->rot_node == n->id) {
		s->rot_node = 0;
	}
	uint8_t want = s->readd_role[n->id];
	s->readd_role[n->id] = 0;
	if (want == 0 || s->n_slots == SIM_MAX_NODES) {
		sim_tracef(s, "repair: node %llu retired", (unsigned long long)n->id);
		return true;
	}
	uint64_t id = ++s->n_slots;
	sim_tracef(s, "repair: node %llu retired, node %llu replaces it (empty)",
		   (unsigned long long)n->id, (unsigned long long)id);
	s->readd_role[id] = want;
	sim_add_server(s, id, false);
	if (s->nodes[id].up) {
		sim_node_process(s, &s->nodes[id]);
	}
	return true;
}

/* Step 3; true when the server has its old role back. */
static bool readd(struct sim *s, struct sim_node *n)
{
	struct sim_node *l = leader(s);
	if (l == NULL || !n->up) {
		return false;
	}
	const struct raft_config *c = raft_config(l->r);
	uint8_t role = raft_config_role(c, n->id);
	uint8_t want = s->readd_role[n->id];
	if (role == want) {
		sim_tracef(s, "repair: node %llu is back as a %s", (unsigned long long)n->id,
			   want == RAFT_VOTER ? "voter" : "learner");
		s->readd_role[n->id] = 0;
		return true;
	}
	if (role == 0) {
		change(s, l, RAFT_ADD_LEARNER, n->id);
	} else if (role == RAFT_LEARNER && want == RAFT_VOTER) {
		struct raft_status st;
		raft_status(l->r, &st);
		if (config_committed(l) && n->sm.applied >= st.config_index) {
			change(s, l, RAFT_PROMOTE, n->id);
		}
	} else {
		/* The membership nemesis made it a voter already: keep that. */
		s->readd_role[n->id] = 0;
		return true;
	}
	return false;
}

void sim_repair_tick(struct sim *s)
{
	s->repair_scheduled = false;
	bool more = false;
	for (uint32_t id = 1; id <= s->n_slots && !s->failed; id++) {
		struct sim_node *n = &s->nodes[id];
		if (n->broken) {
			more = true;
			if (!n->up) {
				repair_broken(s, n);
			}
		} else if (s->readd_role[id] != 0) {
			more |= !readd(s, n);
		}
	}
	if (more && !s->failed) {
		schedule_repair(s);
	}
}
