/*
 * membership.c — single-server configuration changes (Ongaro's thesis §4).
 *
 * A change adds, promotes or removes one server; the new configuration is
 * a CONFIG entry that takes effect on every server as soon as it is in its
 * log (committed or not; a truncated one is undone). Any two configurations
 * one change apart have overlapping majorities, so no joint phase is
 * needed — provided changes do not overlap:
 *   - one change at a time: the leader refuses a new one while its last
 *     config entry is uncommitted;
 *   - only after the leader committed an entry of its own term (the fix for
 *     the bug in the original single-server algorithm: an uncommitted change
 *     from an earlier term could otherwise combine with ours into two
 *     configurations without a common majority).
 * A leader that removes itself keeps replicating (not counting itself in
 * quorums) until the change commits, then steps down and hands off to the
 * most up-to-date voter with TimeoutNow.
 *
 * A change that leaves the voters needing a server that holds nothing yet
 * is refused (BUSY) until it has caught up: in {1,2,5} with 5 just added
 * and empty, removing 1 would leave {2,5}, where 2 can win no election
 * (5 holds no configuration and votes for nobody) and 5 can learn nothing
 * without a leader. So the new configuration's voters must include a
 * majority that already hold the current configuration entry.
 */
#include <string.h>

#include "raft/raft_int.h"

/* Whether a majority of the voters of `next` hold our configuration entry
 * (the leader holds its whole log). */
static bool quorum_holds_config(struct raft *r, const struct raft_config *next)
{
	uint32_t voters = 0, holding = 0;
	for (uint32_t i = 0; i < next->count; i++) {
		if (next->members[i].role != RAFT_VOTER) {
			continue;
		}
		voters++;
		uint64_t id = next->members[i].id;
		const struct raft_progress *pr = raft_progress_find(r, id);
		if (id == r->id || (pr != NULL && pr->match >= r->config_index)) {
			holding++;
		}
	}
	return holding >= voters / 2 + 1;
}

enum keel_err raft_change_member(struct raft *r, enum raft_change change, uint64_t id,
				 uint64_t *index, uint64_t *term)
{
	KEEL_ASSERT(!r->handed.active);
	if (r->role != RAFT_LEADER || r->stepping_down) {
		return KEEL_NOTLEADER;
	}
	if (id == 0) {
		return KEEL_INVAL;
	}
	if (r->transfer_target != 0 || r->config_index > r->commit || !raft_committed_in_term(r)) {
		return KEEL_BUSY;
	}
	struct raft_config next = r->config;
	uint8_t role = raft_config_role(&next, id);
	enum keel_err err = KEEL_OK;
	switch (change) {
	case RAFT_ADD_VOTER:
		if (role != 0) {
			return KEEL_EXIST;
		}
		err = raft_config_set(&next, id, RAFT_VOTER);
		break;
	case RAFT_ADD_LEARNER:
		if (role != 0) {
			return KEEL_EXIST;
		}
		err = raft_config_set(&next, id, RAFT_LEARNER);
		break;
	case RAFT_PROMOTE:
		if (role == 0) {
			return KEEL_NOENT;
		}
		if (role == RAFT_VOTER) {
			return KEEL_INVAL;
		}
		err = raft_config_set(&next, id, RAFT_VOTER);
		break;
	case RAFT_REMOVE:
		if (role == 0) {
			return KEEL_NOENT;
		}
		if (role == RAFT_VOTER && raft_config_voters(&next) == 1) {
			return KEEL_INVAL;
		}
		raft_config_remove(&next, id);
		break;
	default:
		return KEEL_INVAL;
	}
	if (err != KEEL_OK) {
		return err;
	}
	if (change != RAFT_ADD_LEARNER && !quorum_holds_config(r, &next)) {
		return KEEL_BUSY;
	}
	uint8_t buf[8 + RAFT_MAX_MEMBERS * 9];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, buf, sizeof(buf));
	raft_config_encode(&next, &w);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	err = raft_leader_append(r, RAFT_ENTRY_CONFIG, buf, (uint32_t)w.size, index);
	if (err == KEEL_OK) {
		*term = r->term;
	}
	return err;
}

void raft_membership_on_commit(struct raft *r)
{
	if (r->role != RAFT_LEADER || !r->stepping_down || r->commit < r->config_index) {
		return;
	}
	/* Our removal is committed: leave, and let the most up-to-date voter
	 * campaign at once instead of waiting for its election timeout. */
	uint64_t best = 0;
	uint64_t best_match = 0;
	for (uint32_t i = 0; i < r->n_progress; i++) {
		const struct raft_progress *pr = &r->progress[i];
		if (pr->id != r->id && pr->role == RAFT_VOTER && pr->match >= best_match) {
			best = pr->id;
			best_match = pr->match;
		}
	}
	raft_become_follower(r, r->term, 0);
	if (best != 0 && best_match == raft_log_last(&r->log)) {
		raft_out_push(r, RAFT_MSG_TIMEOUT_NOW, best, false);
	}
}
