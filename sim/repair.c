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
 *      (config index <= commit index), then wipes its data directory and
 *      starts it empty — a spare with term 0, no vote and no log;
 *   3. adds it back as a learner, and promotes it once it has applied the
 *      configuration that added it (if it was a voter).
 *
 * Why not simply wipe and restart it as the same member: a wiped voter has
 * forgotten its vote (it may vote twice in one term: two leaders) and the
 * entries it acknowledged (an entry committed with its ack may then exist
 * on a minority only). After a committed removal neither matters: every
 * later leader's log holds the removal, so no candidate that still counts
 * the server can win, and every entry committed before the removal is on a
 * majority of the configuration without it. Re-adding it is then the
 * ordinary addition of an empty server. The checkers verify this in every
 * run that rots a disk (election safety, leader completeness, no lost
 * acknowledged write).
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

/* Steps 1 and 2; true once the server runs again, empty. */
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
		if (s->cfg.verbose) {
			struct raft_status st;
			raft_status(l->r, &st);
			sim_tracef(s, "repair: node %llu: leader %llu config %llu commit %llu",
				   (unsigned long long)n->id, (unsigned long long)l->id,
				   (unsigned long long)st.config_index,
				   (unsigned long long)st.commit_index);
		}
		return false; /* the removal (or a later change) is not committed yet */
	}
	sim_node_wipe(s, n);
	s->stat_repairs++;
	if (s->rot_node == n->id) {
		s->rot_node = 0;
	}
	sim_node_start(s, n);
	if (n->up) {
		sim_node_process(s, n);
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
