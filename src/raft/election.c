/*
 * election.c — pre-vote, vote, role changes, check-quorum, transfer.
 *
 * Pre-vote (Ongaro §9.6): a server whose election timer fires first asks
 * the voters whether they WOULD vote for it in term+1, without changing any
 * term; only with a quorum of yeses does it campaign for real. A server cut
 * off for a while therefore cannot force a term change on its return.
 *
 * Leader stickiness (with check_quorum): a server that heard from a live
 * leader less than an election timeout ago ignores (pre-)vote requests of a
 * higher term, unless the request comes from a TimeoutNow transfer. The
 * leader itself steps down when it has not heard from a quorum of voters
 * within an election timeout (check-quorum), so a stale leader does not
 * hold reads and writes hostage.
 *
 * A candidate counts its own vote only once the batch holding its term and
 * vote is durable (raft_tally_self_vote after raft_persisted), and grants
 * to others leave only after the same (ready.c), so a crash can never make
 * a server vote twice in one term. A candidate that has a quorum of other
 * servers' votes still becomes leader only once its term is durable: a
 * leader that could forget its term after a crash could lead it twice.
 */
#include <string.h>

#include "raft/raft_int.h"

bool raft_in_lease(const struct raft *r)
{
	if (!r->opts.check_quorum) {
		return false;
	}
	if (r->role == RAFT_LEADER) {
		return true; /* check-quorum demotes us if we are not live */
	}
	return r->leader != 0 && r->leader_contact &&
	       r->now_ms - r->leader_contact_ms < r->opts.election_timeout_ms;
}

static void votes_reset(struct raft *r)
{
	r->n_granted = 0;
	r->n_rejected = 0;
	r->self_vote_counted = false;
}

static void set_leader(struct raft *r, uint64_t leader)
{
	if (leader != r->leader) {
		/* Forwarded reads went to the old leader: fail them now rather
		 * than at their timeout. */
		if (r->role != RAFT_LEADER) {
			raft_reads_fail_all(r, KEEL_NOTLEADER);
		}
		r->leader = leader;
	}
	if (leader != 0 && leader != r->id) {
		r->leader_contact = true;
		r->leader_contact_ms = r->now_ms;
	} else {
		r->leader_contact = false;
	}
}

void raft_become_follower(struct raft *r, uint64_t term, uint64_t leader)
{
	KEEL_ASSERT(term >= r->term);
	bool was_leader = r->role == RAFT_LEADER;
	if (term > r->term) {
		r->term = term;
		r->vote = 0;
		raft_mark_hard_state(r);
	}
	if (was_leader) {
		raft_out_drop_leader_msgs(r);
		raft_reads_fail_all(r, KEEL_NOTLEADER);
		r->transfer_target = 0;
		r->stepping_down = false;
		r->n_progress = 0;
	}
	r->role = RAFT_FOLLOWER;
	set_leader(r, leader);
	votes_reset(r);
	raft_reset_election_timer(r);
}

static void send_vote_requests(struct raft *r, bool pre_vote, bool transfer)
{
	for (uint32_t i = 0; i < r->config.count; i++) {
		const struct raft_member *mb = &r->config.members[i];
		if (mb->id == r->id || mb->role != RAFT_VOTER) {
			continue;
		}
		struct raft_msg *m = raft_out_push(r, RAFT_MSG_VOTE, mb->id, false);
		m->term = pre_vote ? r->term + 1 : r->term;
		m->vote.last_index = raft_log_last(&r->log);
		m->vote.last_term = raft_log_last_term(&r->log);
		m->vote.pre_vote = pre_vote;
		m->vote.transfer = transfer;
	}
}

static void become_leader(struct raft *r)
{
	KEEL_ASSERT(r->role == RAFT_CANDIDATE);
	r->role = RAFT_LEADER;
	set_leader(r, r->id);
	votes_reset(r);
	r->n_progress = 0;
	raft_progress_sync(r);
	for (uint32_t i = 0; i < r->n_progress; i++) {
		struct raft_progress *pr = &r->progress[i];
		if (pr->id == r->id) {
			pr->match = r->persisted_index;
			pr->state = RAFT_PROGRESS_REPLICATE; /* for status: it is us */
			pr->recent_active = true;
		}
	}
	r->term_start_index = raft_log_last(&r->log) + 1;
	r->uncommitted_bytes = 0;
	r->transfer_target = 0;
	r->stepping_down = !raft_is_voter(r, r->id);
	r->heartbeat_due_ms = r->now_ms + r->opts.heartbeat_interval_ms;
	r->check_quorum_due_ms = r->now_ms + r->opts.election_timeout_ms;
	r->n_reads = 0;
	r->read_round_wanted = false;
	uint64_t index;
	enum keel_err err = raft_leader_append(r, RAFT_ENTRY_NOOP, NULL, 0, &index);
	KEEL_ASSERT(err == KEEL_OK || err == KEEL_NOMEM);
	if (err == KEEL_NOMEM) {
		/* Without our no-op we cannot commit: give the term up. */
		raft_become_follower(r, r->term, 0);
	}
}

static bool vote_recorded(const uint64_t *ids, uint32_t n, uint64_t id)
{
	for (uint32_t i = 0; i < n; i++) {
		if (ids[i] == id) {
			return true;
		}
	}
	return false;
}

static uint32_t count_voters(const struct raft *r, const uint64_t *ids, uint32_t n)
{
	uint32_t count = 0;
	for (uint32_t i = 0; i < n; i++) {
		count += raft_is_voter(r, ids[i]);
	}
	return count;
}

/* Records one answer and acts once the outcome is decided. */
static void record_vote(struct raft *r, uint64_t id, bool granted)
{
	if (!raft_is_voter(r, id) || vote_recorded(r->votes_granted, r->n_granted, id) ||
	    vote_recorded(r->votes_rejected, r->n_rejected, id)) {
		return;
	}
	if (granted) {
		KEEL_ASSERT(r->n_granted < RAFT_MAX_MEMBERS);
		r->votes_granted[r->n_granted++] = id;
	} else {
		KEEL_ASSERT(r->n_rejected < RAFT_MAX_MEMBERS);
		r->votes_rejected[r->n_rejected++] = id;
	}
	uint32_t voters = raft_config_voters(&r->config);
	uint32_t quorum = raft_quorum(voters);
	uint32_t yes = count_voters(r, r->votes_granted, r->n_granted);
	uint32_t no = count_voters(r, r->votes_rejected, r->n_rejected);
	if (yes >= quorum) {
		if (r->role == RAFT_PRE_CANDIDATE) {
			raft_campaign(r, false, false);
		} else if (r->durable_hs.term == r->term && r->durable_hs.vote == r->id) {
			become_leader(r);
		}
		/* else: won, but our term is not durable yet. Leading now could
		 * send entries of a term a crash would make us forget — and then
		 * lead that term again with other entries. raft_persisted()
		 * counts our own vote and finishes the transition. */
	} else if (no > voters - quorum) {
		raft_become_follower(r, r->term, 0);
	}
}

void raft_campaign(struct raft *r, bool pre_vote, bool transfer)
{
	KEEL_ASSERT(r->role != RAFT_LEADER);
	if (!raft_may_campaign(r)) {
		return;
	}
	votes_reset(r);
	set_leader(r, 0);
	raft_reset_election_timer(r);
	if (pre_vote) {
		r->role = RAFT_PRE_CANDIDATE;
		send_vote_requests(r, true, false);
		record_vote(r, r->id, true); /* may go straight on (one voter) */
		return;
	}
	r->role = RAFT_CANDIDATE;
	r->term++;
	r->vote = r->id;
	raft_mark_hard_state(r);
	r->campaign_transfer = transfer;
	send_vote_requests(r, false, transfer);
	raft_tally_self_vote(r);
}

void raft_tally_self_vote(struct raft *r)
{
	if (r->role != RAFT_CANDIDATE || r->self_vote_counted) {
		return;
	}
	if (r->durable_hs.term != r->term || r->durable_hs.vote != r->id) {
		return;
	}
	r->self_vote_counted = true;
	record_vote(r, r->id, true);
}

void raft_step_vote(struct raft *r, const struct raft_msg *m)
{
	const struct raft_msg_vote *v = &m->vote;
	KEEL_ASSERT(m->term >= r->term);
	bool can_vote = r->vote == m->from || (r->vote == 0 && r->leader == 0) ||
			(v->pre_vote && m->term > r->term);
	uint64_t last_term = raft_log_last_term(&r->log);
	bool log_ok = v->last_term > last_term ||
		      (v->last_term == last_term && v->last_index >= raft_log_last(&r->log));
#ifdef KEEL_PLANT_BUG_VOTE_WITHOUT_LOG_CHECK
	log_ok = true; /* planted bug: grants to a candidate missing entries */
#endif
	/* A server holding no configuration at all votes for nobody: it
	 * started empty to join, or came back with a wiped disk under its old
	 * id, and has forgotten every vote it cast, so its vote could elect a
	 * second leader in a term (seen in the simulator). Once a leader has
	 * given it a configuration it votes like any server, whatever its own
	 * role there: a server may be a voter of the configuration that
	 * counts before it learns so, or hold a removal of itself that no
	 * majority has (refusing then can leave no electable candidate). */
	bool grant = can_vote && log_ok && r->config.count > 0;
	if (grant && !v->pre_vote) {
		r->vote = m->from;
		raft_mark_hard_state(r);
		raft_reset_election_timer(r);
	}
	/* A real grant waits until the vote is durable. */
	struct raft_msg *resp = raft_out_push(r, RAFT_MSG_VOTE_RESP, m->from, grant && !v->pre_vote);
	resp->vote_resp.granted = grant;
	resp->vote_resp.pre_vote = v->pre_vote;
	/* A granted pre-vote answers in the term asked about; a refusal
	 * carries ours so that a stale candidate catches up. */
	resp->term = grant && v->pre_vote ? m->term : r->term;
}

void raft_step_vote_resp(struct raft *r, const struct raft_msg *m)
{
	const struct raft_msg_vote_resp *v = &m->vote_resp;
	if (v->pre_vote) {
		if (r->role != RAFT_PRE_CANDIDATE) {
			return;
		}
		if (v->granted && m->term != r->term + 1) {
			return;
		}
		record_vote(r, m->from, v->granted);
		return;
	}
	if (r->role != RAFT_CANDIDATE || m->term != r->term) {
		return;
	}
	record_vote(r, m->from, v->granted);
}

void raft_step_timeout_now(struct raft *r, const struct raft_msg *m)
{
	if (r->role == RAFT_LEADER || !raft_is_voter(r, r->id)) {
		return;
	}
	if (r->leader != m->from) {
		return; /* only the leader of our term may hand over */
	}
	raft_campaign(r, false, true);
}

static void send_timeout_now(struct raft *r, uint64_t to)
{
	raft_out_push(r, RAFT_MSG_TIMEOUT_NOW, to, false);
}

void raft_transfer_check(struct raft *r, struct raft_progress *pr)
{
	if (r->transfer_target != pr->id || pr->match != raft_log_last(&r->log)) {
		return;
	}
	if (!r->transfer_sent) {
		send_timeout_now(r, pr->id);
		r->transfer_sent = true;
	}
}

enum keel_err raft_transfer_leader(struct raft *r, uint64_t id)
{
	KEEL_ASSERT(!r->handed.active);
	if (r->role != RAFT_LEADER) {
		return KEEL_NOTLEADER;
	}
	if (id == r->id) {
		return KEEL_OK;
	}
	if (!raft_is_voter(r, id)) {
		return KEEL_NOENT;
	}
	if (r->transfer_target == id) {
		return KEEL_OK;
	}
	r->transfer_target = id;
	r->transfer_sent = false;
	r->transfer_deadline_ms = r->now_ms + r->opts.election_timeout_ms;
	struct raft_progress *pr = raft_progress_find(r, id);
	KEEL_ASSERT(pr != NULL);
	pr->want_send = true;
	pr->want_empty = true;
	raft_transfer_check(r, pr);
	return KEEL_OK;
}

void raft_leader_tick(struct raft *r)
{
	KEEL_ASSERT(r->role == RAFT_LEADER);
	if (r->now_ms >= r->heartbeat_due_ms) {
		raft_bcast_heartbeat(r);
		r->heartbeat_due_ms = r->now_ms + r->opts.heartbeat_interval_ms;
	}
	if (r->transfer_target != 0 && r->now_ms >= r->transfer_deadline_ms) {
		r->transfer_target = 0;
	}
	if (!r->opts.check_quorum || r->now_ms < r->check_quorum_due_ms) {
		return;
	}
	r->check_quorum_due_ms = r->now_ms + r->opts.election_timeout_ms;
	uint32_t active = 0;
	for (uint32_t i = 0; i < r->n_progress; i++) {
		struct raft_progress *pr = &r->progress[i];
		if (pr->role == RAFT_VOTER && (pr->recent_active || pr->id == r->id)) {
			active++;
		}
		pr->recent_active = pr->id == r->id;
	}
	if (active < raft_quorum(raft_config_voters(&r->config))) {
		raft_become_follower(r, r->term, 0);
	}
}
