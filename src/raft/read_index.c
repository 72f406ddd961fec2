/*
 * read_index.c — linearizable reads without writing to the log (§6.4).
 *
 * Leader: a read gets index = commit once the leader has committed an entry
 * of its own term (before that, commit may lag what an earlier leader
 * committed, so the read waits). It is confirmed by a heartbeat round that
 * starts after the read arrived: r->read_seq numbers rounds, a read waits
 * for round read_seq + 1, and it is confirmed once a quorum of voters (the
 * leader counting for itself) echoed a round >= its own. Reads forwarded by
 * followers are answered with a READ_INDEX_RESP.
 *
 * Follower: the read goes to the leader; the answer comes back as a result.
 *
 * Exactly one result per accepted request: success, or an error when the
 * leader changes (KEEL_NOTLEADER), the request times out (KEEL_TIMEOUT after
 * read_timeout_ms; answers arriving later are ignored), or the leader
 * refuses it. n_reads + n_results <= max_pending_reads.
 */
#include <string.h>

#include "raft/raft_int.h"

bool raft_committed_in_term(const struct raft *r)
{
	return r->role == RAFT_LEADER && r->commit >= r->term_start_index;
}

void raft_read_result_push(struct raft *r, uint64_t ctx, uint64_t index, enum keel_err err)
{
	KEEL_ASSERT(r->n_results < r->opts.max_pending_reads);
	struct raft_read_result *res = &r->results[r->n_results++];
	res->ctx = ctx;
	res->index = index;
	res->err = err;
}

static void finish(struct raft *r, const struct raft_read *rd, uint64_t index, enum keel_err err)
{
	if (rd->from == r->id) {
		raft_read_result_push(r, rd->ctx, index, err);
		return;
	}
	struct raft_msg *m = raft_out_push(r, RAFT_MSG_READ_INDEX_RESP, rd->from, false);
	m->read_index_resp.ctx = rd->ctx;
	m->read_index_resp.index = index;
	m->read_index_resp.err = (uint32_t)err;
}

static void remove_at(struct raft *r, uint32_t i)
{
	memmove(&r->reads[i], &r->reads[i + 1], (r->n_reads - i - 1) * sizeof(*r->reads));
	r->n_reads--;
}

void raft_reads_fail_all(struct raft *r, enum keel_err err)
{
	for (uint32_t i = 0; i < r->n_reads; i++) {
		finish(r, &r->reads[i], 0, err);
	}
	r->n_reads = 0;
	r->read_round_wanted = false;
}

static bool has_room(const struct raft *r)
{
	return r->n_reads + r->n_results < r->opts.max_pending_reads;
}

static enum keel_err leader_read(struct raft *r, uint64_t from, uint64_t ctx)
{
	if (!has_room(r)) {
		return KEEL_LIMIT;
	}
	struct raft_read *rd = &r->reads[r->n_reads++];
	rd->ctx = ctx;
	rd->from = from;
	rd->deadline_ms = r->now_ms + r->opts.read_timeout_ms;
	rd->index = 0;
	rd->seq = 0;
	if (raft_committed_in_term(r)) {
		rd->index = r->commit;
		rd->seq = r->read_seq + 1;
		r->read_round_wanted = true;
	}
	return KEEL_OK;
}

enum keel_err raft_read_index(struct raft *r, uint64_t ctx)
{
	KEEL_ASSERT(!r->handed.active);
	if (r->role == RAFT_LEADER) {
		return leader_read(r, r->id, ctx);
	}
	if (r->role != RAFT_FOLLOWER || r->leader == 0) {
		return KEEL_NOLEADER;
	}
	if (!has_room(r)) {
		return KEEL_LIMIT;
	}
	struct raft_read *rd = &r->reads[r->n_reads++];
	rd->ctx = ctx;
	rd->from = r->id;
	rd->index = 0;
	rd->seq = 0;
	rd->deadline_ms = r->now_ms + r->opts.read_timeout_ms;
	struct raft_msg *m = raft_out_push(r, RAFT_MSG_READ_INDEX, r->leader, false);
	m->read_index.ctx = ctx;
	return KEEL_OK;
}

void raft_step_read_index(struct raft *r, const struct raft_msg *m)
{
	enum keel_err err = KEEL_NOTLEADER;
	if (r->role == RAFT_LEADER) {
		err = leader_read(r, m->from, m->read_index.ctx);
		if (err == KEEL_OK) {
			return;
		}
	}
	struct raft_msg *resp = raft_out_push(r, RAFT_MSG_READ_INDEX_RESP, m->from, false);
	resp->read_index_resp.ctx = m->read_index.ctx;
	resp->read_index_resp.err = (uint32_t)err;
}

void raft_step_read_index_resp(struct raft *r, const struct raft_msg *m)
{
	if (r->role == RAFT_LEADER) {
		return;
	}
	const struct raft_msg_read_index_resp *resp = &m->read_index_resp;
	for (uint32_t i = 0; i < r->n_reads; i++) {
		struct raft_read *rd = &r->reads[i];
		if (rd->from != r->id || rd->ctx != resp->ctx) {
			continue;
		}
		enum keel_err err = resp->err < KEEL_ERR_COUNT ? (enum keel_err)resp->err : KEEL_PROTO;
		raft_read_result_push(r, rd->ctx, err == KEEL_OK ? resp->index : 0, err);
		remove_at(r, i);
		return;
	}
	/* Unknown ctx: timed out or failed already. */
}

void raft_reads_on_term_commit(struct raft *r)
{
	for (uint32_t i = 0; i < r->n_reads; i++) {
		struct raft_read *rd = &r->reads[i];
		if (rd->seq == 0) {
			rd->index = r->commit;
			rd->seq = r->read_seq + 1;
			r->read_round_wanted = true;
		}
	}
}

void raft_reads_confirm(struct raft *r)
{
	if (r->role != RAFT_LEADER || r->n_reads == 0) {
		return;
	}
	uint64_t acked[RAFT_MAX_MEMBERS];
	uint32_t n = 0;
	for (uint32_t i = 0; i < r->n_progress; i++) {
		const struct raft_progress *pr = &r->progress[i];
		if (pr->role == RAFT_VOTER) {
			acked[n++] = pr->id == r->id ? r->read_seq : pr->read_seq_acked;
		}
	}
	if (n == 0) {
		return;
	}
	for (uint32_t i = 1; i < n; i++) {
		uint64_t v = acked[i];
		uint32_t j = i;
		while (j > 0 && acked[j - 1] < v) {
			acked[j] = acked[j - 1];
			j--;
		}
		acked[j] = v;
	}
	uint64_t confirmed = acked[raft_quorum(n) - 1];
	uint32_t kept = 0;
	for (uint32_t i = 0; i < r->n_reads; i++) {
		struct raft_read *rd = &r->reads[i];
		if (rd->seq != 0 && rd->seq <= confirmed) {
			finish(r, rd, rd->index, KEEL_OK);
		} else {
			r->reads[kept++] = *rd;
		}
	}
	r->n_reads = kept;
}

void raft_reads_tick(struct raft *r)
{
	uint32_t kept = 0;
	for (uint32_t i = 0; i < r->n_reads; i++) {
		struct raft_read *rd = &r->reads[i];
		if (rd->deadline_ms <= r->now_ms) {
			finish(r, rd, 0, KEEL_TIMEOUT);
		} else {
			r->reads[kept++] = *rd;
		}
	}
	r->n_reads = kept;
}
