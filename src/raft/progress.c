/*
 * progress.c — the leader's view of each member, and flow control.
 *
 *            reject / unreachable / lost             snapshot done
 *   PROBE <---------------------------- REPLICATE  <----------- SNAPSHOT
 *     |  first accepted append ---------->  ^                      ^
 *     +-- next entry compacted away --------|----------------------+
 *
 * PROBE sends one append at a time (probe_sent) until the follower's match
 * is known; REPLICATE pipelines appends, at most max_inflight_msgs messages
 * and max_inflight_bytes data bytes outstanding (a ring of the last index
 * and byte count of each in-flight append, freed by acks); SNAPSHOT sends
 * InstallSnapshot chunks (snapshot.c) and no appends.
 *
 * Every member, the leader included, has a slot (the leader's own match is
 * its persisted index). Each slot owns one in-flight ring for its whole
 * life; rebuilding the set moves rings with their slots, never shares one.
 */
#include <string.h>

#include "raft/raft_int.h"

void raft_progress_reset(struct raft *r, struct raft_progress *pr, uint64_t next)
{
	(void)r;
	pr->state = RAFT_PROGRESS_PROBE;
	pr->match = 0;
	pr->next = next;
	pr->probe_sent = false;
	pr->want_send = true;
	pr->want_empty = true;
	pr->recent_active = false;
	pr->commit_sent = 0;
	pr->match_mark = 0;
	pr->read_seq_acked = 0;
	pr->infl_head = 0;
	pr->infl_count = 0;
	pr->infl_total_bytes = 0;
	memset(&pr->snap, 0, sizeof(pr->snap));
	pr->snap_next_offset = 0;
	pr->snap_acked_offset = 0;
	pr->snap_mark = 0;
}

void raft_progress_become_probe(struct raft_progress *pr)
{
	pr->state = RAFT_PROGRESS_PROBE;
	pr->next = pr->match + 1;
	pr->probe_sent = false;
	pr->want_send = true;
	pr->want_empty = true;
	pr->infl_head = 0;
	pr->infl_count = 0;
	pr->infl_total_bytes = 0;
	pr->snap_next_offset = 0;
	pr->snap_acked_offset = 0;
}

void raft_progress_become_replicate(struct raft_progress *pr)
{
	pr->state = RAFT_PROGRESS_REPLICATE;
	pr->next = pr->match + 1;
	pr->probe_sent = false;
	pr->infl_head = 0;
	pr->infl_count = 0;
	pr->infl_total_bytes = 0;
}

bool raft_progress_paused(const struct raft *r, const struct raft_progress *pr)
{
	switch (pr->state) {
	case RAFT_PROGRESS_PROBE:
		return pr->probe_sent;
	case RAFT_PROGRESS_REPLICATE:
		return pr->infl_count >= r->opts.max_inflight_msgs ||
		       pr->infl_total_bytes >= r->opts.max_inflight_bytes;
	case RAFT_PROGRESS_SNAPSHOT:
		return true;
	default:
		KEEL_UNREACHABLE();
	}
}

void raft_progress_infl_add(struct raft *r, struct raft_progress *pr, uint64_t last,
			    uint64_t bytes)
{
	uint32_t cap = r->opts.max_inflight_msgs;
	KEEL_ASSERT(pr->infl_count < cap);
	uint32_t slot = (pr->infl_head + pr->infl_count) % cap;
	if (pr->infl_count > 0) {
		uint32_t prev = (pr->infl_head + pr->infl_count - 1) % cap;
		KEEL_ASSERT(pr->infl_last[prev] < last);
	}
	pr->infl_last[slot] = last;
	pr->infl_bytes[slot] = bytes;
	pr->infl_count++;
	pr->infl_total_bytes += bytes;
}

/* The follower acked up to index: every append ending at or before it is
 * no longer in flight. */
void raft_progress_infl_free_to(struct raft *r, struct raft_progress *pr, uint64_t index)
{
	uint32_t cap = r->opts.max_inflight_msgs;
	while (pr->infl_count > 0 && pr->infl_last[pr->infl_head] <= index) {
		pr->infl_total_bytes -= pr->infl_bytes[pr->infl_head];
		pr->infl_count--;
		pr->infl_head = (pr->infl_head + 1) % cap;
	}
	if (pr->infl_count == 0) {
		pr->infl_head = 0;
		pr->infl_total_bytes = 0;
	}
}

struct raft_progress *raft_progress_find(struct raft *r, uint64_t id)
{
	for (uint32_t i = 0; i < r->n_progress; i++) {
		if (r->progress[i].id == id) {
			return &r->progress[i];
		}
	}
	return NULL;
}

void raft_progress_sync(struct raft *r)
{
	struct raft_progress old[RAFT_MAX_MEMBERS];
	bool taken[RAFT_MAX_MEMBERS];
	memcpy(old, r->progress, sizeof(old));
	memset(taken, 0, sizeof(taken));
	uint32_t n_old = r->n_progress;
	bool fresh[RAFT_MAX_MEMBERS];
	memset(fresh, 0, sizeof(fresh));

	for (uint32_t i = 0; i < r->config.count; i++) {
		const struct raft_member *m = &r->config.members[i];
		fresh[i] = true;
		for (uint32_t j = 0; j < n_old; j++) {
			if (!taken[j] && old[j].id == m->id) {
				r->progress[i] = old[j];
				taken[j] = true;
				fresh[i] = false;
				break;
			}
		}
		r->progress[i].role = m->role;
	}
	/* Rings of the slots not kept go to the new members and the unused
	 * tail, so that every slot still owns exactly one ring. */
	uint64_t *spare_last[RAFT_MAX_MEMBERS];
	uint64_t *spare_bytes[RAFT_MAX_MEMBERS];
	uint32_t n_spare = 0;
	for (uint32_t j = 0; j < RAFT_MAX_MEMBERS; j++) {
		if (!taken[j]) {
			spare_last[n_spare] = old[j].infl_last;
			spare_bytes[n_spare] = old[j].infl_bytes;
			n_spare++;
		}
	}
	for (uint32_t i = 0; i < RAFT_MAX_MEMBERS; i++) {
		if (i < r->config.count && !fresh[i]) {
			continue;
		}
		KEEL_ASSERT(n_spare > 0);
		n_spare--;
		struct raft_progress *pr = &r->progress[i];
		memset(pr, 0, sizeof(*pr));
		pr->infl_last = spare_last[n_spare];
		pr->infl_bytes = spare_bytes[n_spare];
		if (i < r->config.count) {
			pr->id = r->config.members[i].id;
			pr->role = r->config.members[i].role;
			raft_progress_reset(r, pr, raft_log_last(&r->log) + 1);
			pr->recent_active = true; /* give it one check-quorum period */
		}
	}
	KEEL_ASSERT(n_spare == 0);
	r->n_progress = r->config.count;
}
