/*
 * raft.c — lifecycle, the clock, message dispatch, proposals and status.
 *
 * raft_step() does the term bookkeeping every message shares (Raft §5.1:
 * a higher term makes us a follower of that term; a lower term is stale)
 * with the exceptions pre-vote and leader stickiness need, then hands the
 * message to the file that owns its type.
 */
#include <stdlib.h>
#include <string.h>

#include "raft/raft_int.h"

void raft_options_default(struct raft_options *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->election_timeout_ms = 1000;
	opts->heartbeat_interval_ms = 100;
	opts->pre_vote = true;
	opts->check_quorum = true;
	opts->max_append_entries = 256;
	opts->max_append_bytes = 1u << 20;
	opts->max_inflight_msgs = 64;
	opts->max_inflight_bytes = 8u << 20;
	opts->max_entry_bytes = 1u << 20;
	opts->max_uncommitted_bytes = 64u << 20;
	opts->max_apply_bytes = 8u << 20;
	opts->max_persist_batches = 64;
	opts->max_outbox_msgs = 4096;
	opts->snapshot_chunk_bytes = 1u << 20;
	opts->max_inflight_chunks = 4;
	opts->snapshot_trailing_entries = 1000;
	opts->max_pending_reads = 4096;
	opts->read_timeout_ms = 2000;
}

void raft_options_msg_limits(const struct raft_options *opts, struct raft_msg_limits *limits)
{
	limits->max_entries = opts->max_append_entries;
	limits->max_entry_bytes = opts->max_entry_bytes;
	limits->max_chunk_bytes = opts->snapshot_chunk_bytes;
}

static bool options_valid(const struct raft_options *o)
{
	return o->id != 0 && o->election_timeout_ms > 0 && o->heartbeat_interval_ms > 0 &&
	       o->heartbeat_interval_ms < o->election_timeout_ms && o->max_append_entries > 0 &&
	       o->max_append_bytes > 0 && o->max_inflight_msgs > 0 && o->max_inflight_bytes > 0 &&
	       o->max_entry_bytes > 0 && o->max_uncommitted_bytes > 0 && o->max_apply_bytes > 0 &&
	       o->max_persist_batches > 0 && o->max_outbox_msgs > 0 &&
	       o->snapshot_chunk_bytes > 0 && o->max_inflight_chunks > 0 &&
	       o->max_pending_reads > 0 && o->read_timeout_ms > 0;
}

enum keel_err raft_init(struct raft **out, const struct raft_options *opts)
{
	if (!options_valid(opts)) {
		return KEEL_INVAL;
	}
	struct raft *r = calloc(1, sizeof(*r));
	if (r == NULL) {
		return KEEL_NOMEM;
	}
	r->opts = *opts;
	r->id = opts->id;
	r->rng = opts->rng;
	r->role = RAFT_FOLLOWER;
	r->last_role = RAFT_FOLLOWER;
	raft_log_init(&r->log);
	size_t ring = (size_t)opts->max_inflight_msgs * RAFT_MAX_MEMBERS;
	uint64_t *infl = calloc(ring * 2, sizeof(uint64_t));
	r->batches = calloc(opts->max_persist_batches, sizeof(*r->batches));
	r->chunks = calloc(opts->max_inflight_chunks, sizeof(*r->chunks));
	r->chunk_view = calloc(opts->max_inflight_chunks, sizeof(*r->chunk_view));
	r->reads = calloc(opts->max_pending_reads, sizeof(*r->reads));
	r->results = calloc(opts->max_pending_reads, sizeof(*r->results));
	if (infl == NULL || r->batches == NULL || r->chunks == NULL || r->chunk_view == NULL ||
	    r->reads == NULL || r->results == NULL) {
		free(infl);
		free(r->batches);
		free(r->chunks);
		free(r->chunk_view);
		free(r->reads);
		free(r->results);
		free(r);
		return KEEL_NOMEM;
	}
	for (uint32_t i = 0; i < RAFT_MAX_MEMBERS; i++) {
		r->progress[i].infl_last = infl + (size_t)i * opts->max_inflight_msgs;
		r->progress[i].infl_bytes = infl + ring + (size_t)i * opts->max_inflight_msgs;
	}
	r->infl_block = infl;
	*out = r;
	return KEEL_OK;
}

void raft_close(struct raft *r)
{
	if (r == NULL) {
		return;
	}
	raft_log_close(&r->log);
	raft_chunks_free(r, r->n_chunks);
	free(r->infl_block);
	free(r->batches);
	free(r->chunks);
	free(r->chunk_view);
	free(r->reads);
	free(r->results);
	free(r->out);
	free(r->ready_msgs);
	free(r);
}

static enum keel_err restore_entries(struct raft *r, const struct raft_entry *entries, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct raft_entry *e = &entries[i];
		if (e->index != raft_log_last(&r->log) + 1 || e->term == 0 ||
		    e->term < raft_log_last_term(&r->log) || (e->size > 0 && e->data == NULL)) {
			return KEEL_CORRUPT;
		}
		if (e->type != RAFT_ENTRY_NORMAL && e->type != RAFT_ENTRY_NOOP &&
		    e->type != RAFT_ENTRY_CONFIG) {
			return KEEL_CORRUPT;
		}
		if (e->type == RAFT_ENTRY_CONFIG) {
			struct raft_config c;
			if (raft_config_decode(e->data, e->size, &c) != KEEL_OK) {
				return KEEL_CORRUPT;
			}
		}
		enum keel_err err = raft_log_append(&r->log, e);
		if (err != KEEL_OK) {
			return err;
		}
	}
	return KEEL_OK;
}

enum keel_err raft_restore(struct raft *r, const struct raft_hard_state *hs,
			   const struct raft_snapshot_meta *snap, const struct raft_entry *entries,
			   size_t n_entries)
{
	KEEL_ASSERT(!r->restored);
	if (snap != NULL) {
		if (!raft_config_valid(&snap->config) || (snap->index == 0) != (snap->term == 0)) {
			return KEEL_CORRUPT;
		}
		r->snapshot = *snap;
		raft_log_reset(&r->log, snap->index, snap->term);
		r->base_config = snap->config;
	}
	enum keel_err err = restore_entries(r, entries, n_entries);
	if (err != KEEL_OK) {
		raft_log_reset(&r->log, 0, 0);
		return err;
	}
	/* A crash between writing entries and the hard state of one batch can
	 * leave the log a term ahead: we never voted in that term (a vote
	 * leaves only once durable), so adopt it with no vote. */
	r->term = hs->term;
	r->vote = hs->vote;
	if (raft_log_last_term(&r->log) > r->term) {
		r->term = raft_log_last_term(&r->log);
		r->vote = 0;
		r->hard_state_dirty = true;
	}
	r->durable_hs = *hs;
	raft_config_reload(r);
	r->persisted_index = raft_log_last(&r->log);
	r->unstable_index = r->persisted_index + 1;
	r->commit = r->log.base_index;
	r->applied = r->log.base_index;
	r->applied_handed = r->log.base_index;
	r->role = RAFT_FOLLOWER;
	r->restored = true;
	return KEEL_OK;
}

uint64_t raft_random_timeout(struct raft *r)
{
	uint64_t t = r->opts.election_timeout_ms;
	return t + keel_rng_below(&r->rng, t);
}

void raft_reset_election_timer(struct raft *r)
{
	r->election_deadline_ms = r->now_ms + raft_random_timeout(r);
}

bool raft_is_voter(const struct raft *r, uint64_t id)
{
	return raft_config_role(&r->config, id) == RAFT_VOTER;
}

bool raft_may_campaign(const struct raft *r)
{
	if (raft_is_voter(r, r->id)) {
		return true;
	}
	/* A newer configuration leaves us out, but no majority may have it
	 * yet: until it is committed we may be needed to commit it (say we
	 * hold it and the other voters of the old configuration cannot win
	 * without our vote, which our longer log refuses them). Campaigning
	 * is safe: the votes counted are those of the latest configuration,
	 * ours not among them. Won, we lead only until the change commits. */
	if (r->config_index <= r->log.base_index || r->config_index <= r->commit) {
		return false;
	}
	struct raft_config before;
	raft_config_at(r, r->config_index - 1, &before);
	return raft_config_role(&before, r->id) == RAFT_VOTER;
}

void raft_config_at(const struct raft *r, uint64_t index, struct raft_config *out)
{
	KEEL_ASSERT(index >= r->log.base_index);
	KEEL_ASSERT(index <= raft_log_last(&r->log));
	for (uint64_t i = index; i > r->log.base_index; i--) {
		const struct raft_entry *e = raft_log_get(&r->log, i);
		if (e->type == RAFT_ENTRY_CONFIG) {
			enum keel_err err = raft_config_decode(e->data, e->size, out);
			KEEL_ASSERT(err == KEEL_OK);
			return;
		}
	}
	*out = r->base_config;
}

void raft_config_reload(struct raft *r)
{
	for (uint64_t i = raft_log_last(&r->log); i > r->log.base_index; i--) {
		const struct raft_entry *e = raft_log_get(&r->log, i);
		if (e->type == RAFT_ENTRY_CONFIG) {
			enum keel_err err = raft_config_decode(e->data, e->size, &r->config);
			KEEL_ASSERT(err == KEEL_OK);
			r->config_index = i;
			return;
		}
	}
	r->config = r->base_config;
	r->config_index = r->log.base_index;
}

void raft_on_config_entry(struct raft *r, const struct raft_entry *e)
{
	KEEL_ASSERT(e->type == RAFT_ENTRY_CONFIG);
	enum keel_err err = raft_config_decode(e->data, e->size, &r->config);
	KEEL_ASSERT(err == KEEL_OK);
	r->config_index = e->index;
	if (r->role == RAFT_LEADER) {
		raft_progress_sync(r);
		r->stepping_down = raft_config_role(&r->config, r->id) != RAFT_VOTER;
		if (r->transfer_target != 0 && !raft_is_voter(r, r->transfer_target)) {
			r->transfer_target = 0;
		}
	}
}

void raft_truncate_log(struct raft *r, uint64_t index)
{
	KEEL_ASSERT(r->role != RAFT_LEADER);
	KEEL_ASSERT(index > r->commit); /* committed entries never go */
	raft_log_truncate(&r->log, index);
	raft_on_truncate_persist(r, index);
	if (r->config_index >= index) {
		raft_config_reload(r);
	}
}

enum keel_err raft_leader_append(struct raft *r, uint8_t type, const void *data, uint32_t size,
				 uint64_t *index)
{
	KEEL_ASSERT(r->role == RAFT_LEADER);
	struct raft_entry e = {
		.term = r->term,
		.index = raft_log_last(&r->log) + 1,
		.type = type,
		.size = size,
		.data = data,
	};
	enum keel_err err = raft_log_append(&r->log, &e);
	if (err != KEEL_OK) {
		return err;
	}
	r->uncommitted_bytes += size;
	if (type == RAFT_ENTRY_CONFIG) {
		raft_on_config_entry(r, raft_log_get(&r->log, e.index));
	}
	for (uint32_t i = 0; i < r->n_progress; i++) {
		r->progress[i].want_send = r->progress[i].id != r->id;
	}
	*index = e.index;
	return KEEL_OK;
}

void raft_tick(struct raft *r, uint64_t now_ms)
{
	KEEL_ASSERT(!r->handed.active);
	KEEL_ASSERT(r->restored);
	if (!r->clock_started) {
		r->clock_started = true;
		r->now_ms = now_ms;
		raft_reset_election_timer(r);
		return;
	}
	KEEL_ASSERT(now_ms >= r->now_ms);
	r->now_ms = now_ms;
	raft_reads_tick(r);
	if (r->role == RAFT_LEADER) {
		raft_leader_tick(r);
		return;
	}
	if (now_ms < r->election_deadline_ms) {
		return;
	}
	if (raft_may_campaign(r)) {
		raft_campaign(r, r->opts.pre_vote, false);
	} else {
		raft_reset_election_timer(r);
	}
}

static bool from_leader(uint8_t type)
{
	return type == RAFT_MSG_APPEND || type == RAFT_MSG_HEARTBEAT || type == RAFT_MSG_SNAPSHOT ||
	       type == RAFT_MSG_TIMEOUT_NOW;
}

/* A message from an older term. Tell a stale leader (or pre-candidate)
 * about the newer term, so that a node isolated for a while and then back
 * steps down instead of disrupting. Everything else is dropped. */
static void step_stale(struct raft *r, const struct raft_msg *m)
{
	if (from_leader(m->type) && m->type != RAFT_MSG_TIMEOUT_NOW) {
		struct raft_msg *resp = raft_out_push(r, RAFT_MSG_APPEND_RESP, m->from, false);
		resp->append_resp.reject = true;
	} else if (m->type == RAFT_MSG_VOTE && m->vote.pre_vote) {
		struct raft_msg *resp = raft_out_push(r, RAFT_MSG_VOTE_RESP, m->from, false);
		resp->vote_resp.granted = false;
		resp->vote_resp.pre_vote = true;
	} else if (m->type == RAFT_MSG_READ_INDEX) {
		struct raft_msg *resp = raft_out_push(r, RAFT_MSG_READ_INDEX_RESP, m->from, false);
		resp->read_index_resp.ctx = m->read_index.ctx;
		resp->read_index_resp.err = KEEL_NOTLEADER;
	}
}

/* Term bookkeeping for a message with a higher term. Returns false when
 * the message is to be ignored. */
static bool step_higher_term(struct raft *r, const struct raft_msg *m)
{
	if (m->type == RAFT_MSG_VOTE) {
		if (!m->vote.transfer && raft_in_lease(r)) {
			return false; /* stickiness: a live leader is known */
		}
		if (m->vote.pre_vote) {
			return true; /* a pre-vote changes no term */
		}
	}
	if (m->type == RAFT_MSG_VOTE_RESP && m->vote_resp.pre_vote && m->vote_resp.granted) {
		return true; /* a granted pre-vote echoes the future term */
	}
	raft_become_follower(r, m->term, from_leader(m->type) ? m->from : 0);
	return true;
}

enum keel_err raft_step(struct raft *r, const struct raft_msg *m)
{
	KEEL_ASSERT(!r->handed.active);
	KEEL_ASSERT(r->restored);
	if (m->to != r->id || m->from == 0 || m->from == r->id || m->type == 0 ||
	    m->type > RAFT_MSG_TYPE_MAX) {
		return KEEL_INVAL;
	}
	if (m->term > RAFT_TERM_MAX) {
		return KEEL_PROTO; /* see RAFT_TERM_MAX: no room left to campaign */
	}
	if (m->term > r->term) {
		if (!step_higher_term(r, m)) {
			return KEEL_OK;
		}
	} else if (m->term < r->term) {
		step_stale(r, m);
		return KEEL_OK;
	} else if (r->role == RAFT_LEADER && from_leader(m->type)) {
		/* Another leader in our term: impossible unless the peer is
		 * broken. Refuse it rather than act on it. */
		return KEEL_PROTO;
	}
	switch (m->type) {
	case RAFT_MSG_APPEND:
		raft_step_append(r, m);
		break;
	case RAFT_MSG_APPEND_RESP:
		raft_step_append_resp(r, m);
		break;
	case RAFT_MSG_HEARTBEAT:
		raft_step_heartbeat(r, m);
		break;
	case RAFT_MSG_HEARTBEAT_RESP:
		raft_step_heartbeat_resp(r, m);
		break;
	case RAFT_MSG_VOTE:
		raft_step_vote(r, m);
		break;
	case RAFT_MSG_VOTE_RESP:
		raft_step_vote_resp(r, m);
		break;
	case RAFT_MSG_SNAPSHOT:
		raft_step_snapshot(r, m);
		break;
	case RAFT_MSG_SNAPSHOT_RESP:
		raft_step_snapshot_resp(r, m);
		break;
	case RAFT_MSG_TIMEOUT_NOW:
		raft_step_timeout_now(r, m);
		break;
	case RAFT_MSG_READ_INDEX:
		raft_step_read_index(r, m);
		break;
	case RAFT_MSG_READ_INDEX_RESP:
		raft_step_read_index_resp(r, m);
		break;
	default:
		KEEL_UNREACHABLE();
	}
	return KEEL_OK;
}

enum keel_err raft_propose(struct raft *r, const void *data, uint32_t size, uint64_t *index,
			   uint64_t *term)
{
	KEEL_ASSERT(!r->handed.active);
	if (r->role != RAFT_LEADER || r->stepping_down) {
		return KEEL_NOTLEADER;
	}
	if (r->transfer_target != 0) {
		return KEEL_BUSY;
	}
	if (size > r->opts.max_entry_bytes) {
		return KEEL_TOOBIG;
	}
	if (r->uncommitted_bytes > 0 && r->uncommitted_bytes + size > r->opts.max_uncommitted_bytes) {
		return KEEL_BUSY;
	}
	enum keel_err err = raft_leader_append(r, RAFT_ENTRY_NORMAL, size > 0 ? data : NULL, size,
					       index);
	if (err == KEEL_OK) {
		*term = r->term;
	}
	return err;
}

void raft_applied(struct raft *r, uint64_t index)
{
	KEEL_ASSERT(!r->handed.active);
	KEEL_ASSERT(index <= r->applied_handed);
	if (index > r->applied) {
		r->applied = index;
	}
}

void raft_report_unreachable(struct raft *r, uint64_t peer)
{
	KEEL_ASSERT(!r->handed.active);
	if (r->role != RAFT_LEADER) {
		if (peer != 0 && peer == r->leader && r->clock_started) {
			/* The link to our leader broke (its process died, most
			 * likely). Stop vouching for it in pre-votes and campaign
			 * soon, instead of waiting out a whole election timeout.
			 * A heartbeat arriving meanwhile (the link came back)
			 * resets the timer as usual; pre-vote keeps a live leader
			 * that others still hear from in place. */
			r->leader_contact = false;
			uint64_t hb = r->opts.heartbeat_interval_ms;
			uint64_t soon = r->now_ms + 2 * hb + keel_rng_below(&r->rng, 2 * hb + 1);
			if (soon < r->election_deadline_ms) {
				r->election_deadline_ms = soon;
			}
		}
		return;
	}
	struct raft_progress *pr = raft_progress_find(r, peer);
	if (pr != NULL && pr->id != r->id && pr->state == RAFT_PROGRESS_REPLICATE) {
		raft_progress_become_probe(pr);
	}
}

void raft_status(const struct raft *r, struct raft_status *st)
{
	memset(st, 0, sizeof(*st));
	st->id = r->id;
	st->role = r->role;
	st->term = r->term;
	st->vote = r->vote;
	st->leader = r->leader;
	st->commit_index = r->commit;
	st->applied_index = r->applied;
	st->persisted_index = r->persisted_index;
	st->first_index = raft_log_first(&r->log);
	st->last_index = raft_log_last(&r->log);
	st->last_term = raft_log_last_term(&r->log);
	st->snapshot_index = r->snapshot.index;
	st->snapshot_term = r->snapshot.term;
	st->config_index = r->config_index;
	st->transfer_target = r->transfer_target;
	st->pending_reads = r->n_reads;
	st->persist_batches = r->n_batches;
	st->follower_lost_entries = r->follower_lost_entries;
	st->n_members = r->config.count;
	for (uint32_t i = 0; i < r->config.count; i++) {
		struct raft_member_status *ms = &st->members[i];
		ms->id = r->config.members[i].id;
		ms->role = r->config.members[i].role;
		if (r->role != RAFT_LEADER) {
			continue;
		}
		const struct raft_progress *pr = NULL;
		for (uint32_t j = 0; j < r->n_progress; j++) {
			if (r->progress[j].id == ms->id) {
				pr = &r->progress[j];
			}
		}
		if (pr == NULL) {
			continue;
		}
		ms->match_index = pr->id == r->id ? r->persisted_index : pr->match;
		ms->next_index = pr->id == r->id ? raft_log_last(&r->log) + 1 : pr->next;
		ms->state = pr->state;
		ms->inflight = pr->infl_count;
		ms->recent_active = pr->recent_active;
		if (pr->state == RAFT_PROGRESS_SNAPSHOT) {
			ms->snapshot_index = pr->snap.index;
			ms->snapshot_offset = pr->snap_acked_offset;
			uint64_t chunk = r->opts.snapshot_chunk_bytes;
			ms->inflight = (uint32_t)((pr->snap_next_offset - pr->snap_acked_offset +
						   chunk - 1) / chunk);
		}
	}
}

uint8_t raft_role(const struct raft *r)
{
	return r->role;
}

uint64_t raft_term(const struct raft *r)
{
	return r->term;
}

uint64_t raft_leader(const struct raft *r)
{
	return r->leader;
}

uint64_t raft_commit_index(const struct raft *r)
{
	return r->commit;
}

uint64_t raft_last_index(const struct raft *r)
{
	return raft_log_last(&r->log);
}

uint64_t raft_first_index(const struct raft *r)
{
	return raft_log_first(&r->log);
}

bool raft_entry_at(const struct raft *r, uint64_t index, struct raft_entry *out)
{
	if (index <= r->log.base_index || index > raft_log_last(&r->log)) {
		return false;
	}
	*out = *raft_log_get(&r->log, index);
	return true;
}

const struct raft_config *raft_config(const struct raft *r)
{
	return &r->config;
}

enum keel_err raft_config_at_index(const struct raft *r, uint64_t index, struct raft_config *out)
{
	if (index < r->log.base_index || index > raft_log_last(&r->log)) {
		return KEEL_NOENT;
	}
	raft_config_at(r, index, out);
	return KEEL_OK;
}

const char *raft_role_name(uint8_t role)
{
	switch (role) {
	case RAFT_FOLLOWER:
		return "follower";
	case RAFT_PRE_CANDIDATE:
		return "pre-candidate";
	case RAFT_CANDIDATE:
		return "candidate";
	case RAFT_LEADER:
		return "leader";
	default:
		return "?";
	}
}

const char *raft_progress_state_name(uint8_t state)
{
	switch (state) {
	case RAFT_PROGRESS_PROBE:
		return "probe";
	case RAFT_PROGRESS_REPLICATE:
		return "replicate";
	case RAFT_PROGRESS_SNAPSHOT:
		return "snapshot";
	default:
		return "?";
	}
}
