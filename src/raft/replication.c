/*
 * replication.c — AppendEntries both ways, heartbeats, the commit rule.
 *
 * Leader: appends are not sent when an entry is proposed but flushed at
 * raft_ready() (raft_flush_appends), so every proposal made between two
 * readies travels in one batch per follower. A follower in REPLICATE gets
 * as many appends as its window allows (max_inflight_msgs / bytes, each up
 * to max_append_entries / bytes); in PROBE one at a time. A reject carries
 * a hint (the follower's last index whose term is <= the leader's prev
 * term, and that term) so that the leader skips a whole conflicting term
 * per round trip instead of one entry.
 *
 * Commit (§5.4.2, Figure 8): the leader commits the highest index a quorum
 * of voters has durably — its own persisted index counting only after
 * raft_persisted() — and only if that entry is of the current term.
 *
 * Loss: appends and acks may vanish. PROBE resends on every heartbeat
 * answer; REPLICATE falls back to PROBE when a heartbeat answer shows no
 * progress since the previous one while appends are in flight.
 */
#include <string.h>

#include "raft/raft_int.h"

/* Sends what the window allows. Returns true if anything went out. */
static bool send_appends(struct raft *r, struct raft_progress *pr)
{
	bool sent = false;
	while (!raft_progress_paused(r, pr)) {
		uint64_t prev = pr->next - 1;
		uint64_t prev_term;
		if (!raft_log_term(&r->log, prev, &prev_term)) {
			if (prev < r->log.base_index) {
				raft_snapshot_start(r, pr);
				return true;
			}
			/* next past our log: a stale view, probe from the end */
			pr->next = raft_log_last(&r->log) + 1;
			continue;
		}
		uint64_t last = raft_log_last(&r->log);
		uint32_t n = 0;
		uint64_t bytes = 0;
		for (uint64_t i = pr->next; i <= last && n < r->opts.max_append_entries; i++) {
			uint64_t size = raft_log_get(&r->log, i)->size;
			if (n > 0 && bytes + size > r->opts.max_append_bytes) {
				break;
			}
			n++;
			bytes += size;
		}
		/* An empty append probes (asked for by a probe or a heartbeat
		 * answer showing the follower behind) or carries a new commit
		 * index; an ack alone does not call for one. */
		bool empty_ok = !sent && (pr->want_empty || pr->commit_sent < r->commit);
		if (n == 0 && !empty_ok) {
			break;
		}
		struct raft_msg *m = raft_out_push(r, RAFT_MSG_APPEND, pr->id, false);
		m->append.prev_index = prev;
		m->append.prev_term = prev_term;
		m->append.commit = r->commit;
		m->append.n_entries = n;
		pr->commit_sent = r->commit;
		sent = true;
		if (pr->state == RAFT_PROGRESS_PROBE) {
			pr->probe_sent = true;
			break;
		}
		if (n == 0) {
			break;
		}
		raft_progress_infl_add(r, pr, prev + n, bytes);
		pr->next = prev + n + 1;
	}
	return sent;
}

static void send_heartbeat(struct raft *r, struct raft_progress *pr)
{
	struct raft_msg *m = raft_out_push(r, RAFT_MSG_HEARTBEAT, pr->id, false);
	m->heartbeat.commit = KEEL_MIN(pr->match, r->commit);
	m->heartbeat.read_seq = r->read_seq;
}

void raft_bcast_heartbeat(struct raft *r)
{
	for (uint32_t i = 0; i < r->n_progress; i++) {
		struct raft_progress *pr = &r->progress[i];
		if (pr->id != r->id) {
			send_heartbeat(r, pr);
		}
	}
}

void raft_flush_appends(struct raft *r)
{
	KEEL_ASSERT(r->role == RAFT_LEADER);
	for (uint32_t i = 0; i < r->n_progress; i++) {
		struct raft_progress *pr = &r->progress[i];
		if (pr->id == r->id) {
			pr->want_send = false;
			continue;
		}
		if (pr->state == RAFT_PROGRESS_SNAPSHOT) {
			raft_snapshot_send(r, pr);
		} else {
			send_appends(r, pr);
		}
		pr->want_send = false;
		pr->want_empty = false;
	}
	if (r->read_round_wanted) {
		/* One heartbeat round confirms every read queued before it. */
		r->read_round_wanted = false;
		r->read_seq++;
		raft_bcast_heartbeat(r);
		raft_reads_confirm(r);
	}
}

void raft_maybe_commit(struct raft *r)
{
	if (r->role != RAFT_LEADER) {
		return;
	}
	uint64_t matches[RAFT_MAX_MEMBERS];
	uint32_t n = 0;
	for (uint32_t i = 0; i < r->n_progress; i++) {
		const struct raft_progress *pr = &r->progress[i];
		if (pr->role != RAFT_VOTER) {
			continue;
		}
		matches[n++] = pr->id == r->id ? r->persisted_index : pr->match;
	}
	if (n == 0) {
		return;
	}
	/* Insertion sort, descending: n <= RAFT_MAX_MEMBERS. */
	for (uint32_t i = 1; i < n; i++) {
		uint64_t v = matches[i];
		uint32_t j = i;
		while (j > 0 && matches[j - 1] < v) {
			matches[j] = matches[j - 1];
			j--;
		}
		matches[j] = v;
	}
	uint64_t candidate = matches[raft_quorum(n) - 1];
	if (candidate <= r->commit) {
		return;
	}
	uint64_t term;
	bool known = raft_log_term(&r->log, candidate, &term);
	KEEL_ASSERT(known);
#ifndef KEEL_PLANT_BUG_COMMIT_OLD_TERM
	if (term != r->term) {
		return; /* Figure 8: only entries of our term commit by counting */
	}
#endif
	uint64_t old = r->commit;
	r->commit = candidate;
	raft_leader_commit_advanced(r, old);
}

void raft_leader_commit_advanced(struct raft *r, uint64_t old_commit)
{
	uint64_t bytes = 0;
	for (uint64_t i = old_commit + 1; i <= r->commit; i++) {
		if (i > r->log.base_index) {
			bytes += raft_log_get(&r->log, i)->size;
		}
	}
	r->uncommitted_bytes = bytes >= r->uncommitted_bytes ? 0 : r->uncommitted_bytes - bytes;
	for (uint32_t i = 0; i < r->n_progress; i++) {
		r->progress[i].want_send = r->progress[i].id != r->id;
	}
	if (old_commit < r->term_start_index && r->commit >= r->term_start_index) {
		raft_reads_on_term_commit(r);
	}
	raft_membership_on_commit(r);
}

void raft_follower_commit_to(struct raft *r, uint64_t commit)
{
	KEEL_ASSERT(r->role != RAFT_LEADER);
	if (commit > r->commit) {
		KEEL_ASSERT(commit <= raft_log_last(&r->log));
		r->commit = commit;
	}
}

/* Leader-originated message in our term: we follow its sender. */
static void heard_from_leader(struct raft *r, const struct raft_msg *m)
{
	KEEL_ASSERT(m->term == r->term);
	/* Election safety: one leader per term; a message from another
	 * leader of our own term would mean two. */
	KEEL_ASSERT(r->role != RAFT_LEADER);
	if (r->role != RAFT_FOLLOWER || r->leader != m->from) {
		raft_become_follower(r, m->term, m->from);
	} else {
		r->leader_contact = true;
		r->leader_contact_ms = r->now_ms;
		raft_reset_election_timer(r);
	}
}

static void reject_append(struct raft *r, const struct raft_msg *m)
{
	const struct raft_msg_append *a = &m->append;
	uint64_t hint = KEEL_MIN(a->prev_index, raft_log_last(&r->log));
	hint = raft_log_find_conflict_by_term(&r->log, hint, a->prev_term);
	uint64_t hint_term = 0;
	bool known = raft_log_term(&r->log, hint, &hint_term);
	KEEL_ASSERT(known);
	struct raft_msg *resp = raft_out_push(r, RAFT_MSG_APPEND_RESP, m->from, false);
	resp->append_resp.reject = true;
	resp->append_resp.index = a->prev_index;
	resp->append_resp.hint_index = hint;
	resp->append_resp.hint_term = hint_term;
}

static void accept_append(struct raft *r, const struct raft_msg *m, uint64_t match)
{
	/* The ack says "durable up to match": it waits for the disk. */
	struct raft_msg *resp = raft_out_push(r, RAFT_MSG_APPEND_RESP, m->from, true);
	resp->append_resp.reject = false;
	resp->append_resp.index = match;
}

/* Entries must be well formed before any is taken: contiguous indexes,
 * non-decreasing terms within (prev_term, msg term], decodable configs. */
static bool entries_valid(const struct raft_msg *m)
{
	const struct raft_msg_append *a = &m->append;
	uint64_t term = a->prev_term;
	for (uint32_t i = 0; i < a->n_entries; i++) {
		const struct raft_entry *e = &a->entries[i];
		if (e->index != a->prev_index + 1 + i || e->term < term || e->term > m->term ||
		    e->term == 0 || (e->size > 0 && e->data == NULL)) {
			return false;
		}
		if (e->type != RAFT_ENTRY_NORMAL && e->type != RAFT_ENTRY_NOOP &&
		    e->type != RAFT_ENTRY_CONFIG) {
			return false;
		}
		if (e->type == RAFT_ENTRY_CONFIG) {
			struct raft_config c;
			if (raft_config_decode(e->data, e->size, &c) != KEEL_OK) {
				return false;
			}
		}
		term = e->term;
	}
	return true;
}

void raft_step_append(struct raft *r, const struct raft_msg *m)
{
	const struct raft_msg_append *a = &m->append;
	heard_from_leader(r, m);
	if (a->n_entries > 0 && a->entries == NULL) {
		return;
	}
	if (a->prev_index < r->commit) {
		/* Everything up to our commit matches any leader's log. */
		accept_append(r, m, r->commit);
		return;
	}
	uint64_t term;
	if (!raft_log_term(&r->log, a->prev_index, &term) || term != a->prev_term) {
		reject_append(r, m);
		return;
	}
	if (!entries_valid(m)) {
		return; /* a broken peer; drop the message */
	}
	for (uint32_t i = 0; i < a->n_entries; i++) {
		const struct raft_entry *e = &a->entries[i];
		uint64_t have;
		if (raft_log_term(&r->log, e->index, &have)) {
			if (have == e->term) {
				continue; /* log matching: same index and term */
			}
			raft_truncate_log(r, e->index);
		}
		if (raft_log_append(&r->log, e) != KEEL_OK) {
			return; /* no memory: the leader will retry */
		}
		if (e->type == RAFT_ENTRY_CONFIG) {
			raft_on_config_entry(r, raft_log_get(&r->log, e->index));
		}
	}
	uint64_t last_new = a->prev_index + a->n_entries;
	raft_follower_commit_to(r, KEEL_MIN(a->commit, last_new));
	accept_append(r, m, last_new);
}

void raft_step_append_resp(struct raft *r, const struct raft_msg *m)
{
	const struct raft_msg_append_resp *a = &m->append_resp;
	if (r->role != RAFT_LEADER) {
		return;
	}
	struct raft_progress *pr = raft_progress_find(r, m->from);
	if (pr == NULL || pr->id == r->id) {
		return;
	}
	pr->recent_active = true;
	if (pr->state == RAFT_PROGRESS_SNAPSHOT) {
		return; /* answers to appends sent before the snapshot began */
	}
	if (a->reject) {
		bool stale = pr->state == RAFT_PROGRESS_REPLICATE ? a->index <= pr->match
								  : a->index != pr->next - 1;
		if (stale || a->index == 0) {
			return;
		}
		uint64_t next = a->hint_index;
		if (a->hint_term > 0) {
			next = raft_log_find_conflict_by_term(&r->log, a->hint_index, a->hint_term);
		}
		next = KEEL_MIN(a->index, next + 1);
		if (next <= pr->match) {
			/* The follower no longer holds entries it acknowledged:
			 * its disk lost them (a damaged tail cut at recovery).
			 * Raft assumes this never happens; rather than probe
			 * forever above its log, re-replicate from what it has.
			 * Committed entries stay committed (commit never moves
			 * back); the follower is counted again once it acks. */
			pr->match = next - 1;
			r->follower_lost_entries++;
		}
		raft_progress_become_probe(pr);
		pr->next = next;
		return;
	}
	if (a->index > raft_log_last(&r->log)) {
		return; /* acks something we never sent */
	}
	if (a->index > pr->match || pr->state == RAFT_PROGRESS_PROBE) {
		if (a->index > pr->match) {
			pr->match = a->index;
		}
		if (pr->state == RAFT_PROGRESS_PROBE) {
			raft_progress_become_replicate(pr);
		} else {
			raft_progress_infl_free_to(r, pr, pr->match);
			if (pr->next <= pr->match) {
				pr->next = pr->match + 1;
			}
		}
		pr->want_send = true;
		raft_maybe_commit(r);
		if (r->role == RAFT_LEADER) {
			raft_transfer_check(r, pr);
		}
	}
}

void raft_step_heartbeat(struct raft *r, const struct raft_msg *m)
{
	heard_from_leader(r, m);
	uint64_t commit = KEEL_MIN(m->heartbeat.commit, raft_log_last(&r->log));
	raft_follower_commit_to(r, commit);
	struct raft_msg *resp = raft_out_push(r, RAFT_MSG_HEARTBEAT_RESP, m->from, false);
	resp->heartbeat_resp.read_seq = m->heartbeat.read_seq;
}

void raft_step_heartbeat_resp(struct raft *r, const struct raft_msg *m)
{
	if (r->role != RAFT_LEADER) {
		return;
	}
	struct raft_progress *pr = raft_progress_find(r, m->from);
	if (pr == NULL || pr->id == r->id) {
		return;
	}
	pr->recent_active = true;
	if (m->heartbeat_resp.read_seq > pr->read_seq_acked &&
	    m->heartbeat_resp.read_seq <= r->read_seq) {
		pr->read_seq_acked = m->heartbeat_resp.read_seq;
		raft_reads_confirm(r);
	}
	uint64_t last = raft_log_last(&r->log);
	switch (pr->state) {
	case RAFT_PROGRESS_PROBE:
		pr->probe_sent = false; /* the probe may be lost: resend */
		pr->want_send = pr->match < last || pr->commit_sent < r->commit;
		pr->want_empty = pr->want_send;
		break;
	case RAFT_PROGRESS_REPLICATE:
		if (pr->match < last && pr->match == pr->match_mark && pr->infl_count > 0) {
			/* No progress over a whole heartbeat round with
			 * appends out: some were lost. Start over from match. */
			raft_progress_become_probe(pr);
		} else if (pr->match < last || pr->commit_sent < r->commit) {
			/* an empty append, if nothing else, finds a gap */
			pr->want_send = true;
			pr->want_empty = true;
		}
		break;
	case RAFT_PROGRESS_SNAPSHOT:
		raft_snapshot_heartbeat_check(r, pr);
		break;
	default:
		KEEL_UNREACHABLE();
	}
	pr->match_mark = pr->match;
}
