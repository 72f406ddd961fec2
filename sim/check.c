/*
 * check.c — the invariants of the Raft paper, checked while the run goes.
 *
 *   election safety      at most one leader per term (term_leader[]);
 *   log matching         every (index, term) ever handed to a disk has one
 *                        data hash and one predecessor term, cluster-wide
 *                        (checked per persist batch; by induction equal
 *                        (index, term) means equal prefixes);
 *   leader append-only   a leader's entry at the last index seen at the
 *                        previous step is still there, same term and data;
 *   leader completeness  a server that becomes leader of term T holds every
 *                        entry known committed before T (applied by a server
 *                        whose term was below T), same term and data, from
 *                        its first in-memory index on;
 *   state machine safety every server that applies index i applies the same
 *                        entry and reaches the same state hash; a loaded
 *                        snapshot has the state hash others had at its index;
 *   commit monotonic     node.c: a server's commit index never goes back
 *                        while it runs.
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"
#include "sim/sim.h"

uint64_t sim_entry_hash(const struct raft_entry *e)
{
	return keel_hash_bytes(e->data, e->size, 0x1000ull * e->type + 7);
}

void sim_check_init(struct sim *s)
{
	s->cap_terms = 1024;
	s->term_leader = calloc(s->cap_terms, sizeof(*s->term_leader));
	s->cap_committed = 4096;
	s->committed = calloc(s->cap_committed, sizeof(*s->committed));
	s->cap_logents = 1u << 14;
	s->logents = calloc(s->cap_logents, sizeof(*s->logents));
	KEEL_ASSERT(s->term_leader != NULL && s->committed != NULL && s->logents != NULL);
}

void sim_check_free(struct sim *s)
{
	free(s->term_leader);
	free(s->committed);
	free(s->logents);
}

static void *grow_zeroed(void *p, size_t *cap, size_t need, size_t elem)
{
	size_t old = *cap;
	size_t cap2 = old;
	while (cap2 <= need) {
		cap2 *= 2;
	}
	if (cap2 == old) {
		return p;
	}
	p = realloc(p, cap2 * elem);
	KEEL_ASSERT(p != NULL);
	memset((char *)p + old * elem, 0, (cap2 - old) * elem);
	*cap = cap2;
	return p;
}

/* ---- (index, term) -> facts, open addressing ---- */

static struct sim_logent *logent_slot(struct sim_logent *tab, size_t cap, uint64_t index,
				      uint64_t term)
{
	size_t mask = cap - 1;
	size_t i = (size_t)keel_hash_u64(index * 1000003u ^ term) & mask;
	while (tab[i].index != 0 && (tab[i].index != index || tab[i].term != term)) {
		i = (i + 1) & mask;
	}
	return &tab[i];
}

static void logents_grow(struct sim *s)
{
	size_t cap = s->cap_logents * 2;
	struct sim_logent *tab = calloc(cap, sizeof(*tab));
	KEEL_ASSERT(tab != NULL);
	for (size_t i = 0; i < s->cap_logents; i++) {
		if (s->logents[i].index != 0) {
			*logent_slot(tab, cap, s->logents[i].index, s->logents[i].term) = s->logents[i];
		}
	}
	free(s->logents);
	s->logents = tab;
	s->cap_logents = cap;
}

void sim_check_entries(struct sim *s, struct sim_node *n, const struct raft_entry *entries,
		       size_t count)
{
	for (size_t i = 0; i < count; i++) {
		const struct raft_entry *e = &entries[i];
		uint64_t prev_term = 0;
		bool prev_known = true;
		if (i > 0) {
			prev_term = entries[i - 1].term;
		} else if (e->index > 1) {
			struct raft_entry prev;
			prev_known = raft_entry_at(n->r, e->index - 1, &prev);
			prev_term = prev.term;
		}
		if (e->term > raft_term(n->r)) {
			sim_fail(s, "node %llu persists entry %llu of term %llu beyond its term %llu",
				 (unsigned long long)n->id, (unsigned long long)e->index,
				 (unsigned long long)e->term, (unsigned long long)raft_term(n->r));
			return;
		}
		if ((s->n_logents + 1) * 2 > s->cap_logents) {
			logents_grow(s);
		}
		struct sim_logent *le = logent_slot(s->logents, s->cap_logents, e->index, e->term);
		uint64_t h = sim_entry_hash(e);
		if (le->index == 0) {
			le->index = e->index;
			le->term = e->term;
			le->data_hash = h;
			le->prev_term = prev_known ? prev_term : UINT64_MAX;
			s->n_logents++;
			continue;
		}
		if (le->data_hash != h) {
			sim_fail(s, "log matching: entry %llu/%llu has different data on node %llu",
				 (unsigned long long)e->index, (unsigned long long)e->term,
				 (unsigned long long)n->id);
			return;
		}
		if (prev_known && le->prev_term != UINT64_MAX && le->prev_term != prev_term) {
			sim_fail(s,
				 "log matching: entry %llu/%llu follows term %llu on node %llu but "
				 "term %llu elsewhere",
				 (unsigned long long)e->index, (unsigned long long)e->term,
				 (unsigned long long)prev_term, (unsigned long long)n->id,
				 (unsigned long long)le->prev_term);
			return;
		}
		if (prev_known && le->prev_term == UINT64_MAX) {
			le->prev_term = prev_term;
		}
	}
}

static struct sim_committed *committed_at(struct sim *s, uint64_t index)
{
	s->committed = grow_zeroed(s->committed, &s->cap_committed, index, sizeof(*s->committed));
	return &s->committed[index];
}

void sim_check_applied(struct sim *s, struct sim_node *n, const struct raft_entry *e)
{
	struct sim_committed *c = committed_at(s, e->index);
	uint64_t dh = sim_entry_hash(e);
	uint64_t sh = sim_node_state_hash(n);
	if (!c->known) {
		c->known = true;
		c->term = e->term;
		c->seen_term = raft_term(n->r);
		c->data_hash = dh;
		c->sm_hash = sh;
		if (e->index > s->max_committed) {
			s->max_committed = e->index;
		}
		return;
	}
	if (c->term != e->term || (c->data_hash != 0 && c->data_hash != dh)) {
		sim_fail(s,
			 "state machine safety: node %llu applied %llu/%llu, another server "
			 "applied %llu/%llu",
			 (unsigned long long)n->id, (unsigned long long)e->index,
			 (unsigned long long)e->term, (unsigned long long)e->index,
			 (unsigned long long)c->term);
		return;
	}
	if (c->data_hash == 0) {
		c->data_hash = dh;
	}
	if (c->sm_hash != sh) {
		sim_fail(s, "state machine safety: node %llu has another state hash after %llu",
			 (unsigned long long)n->id, (unsigned long long)e->index);
	}
}

void sim_check_snapshot_loaded(struct sim *s, struct sim_node *n)
{
	uint64_t index = n->sm.applied;
	if (index == 0) {
		return;
	}
	struct sim_committed *c = committed_at(s, index);
	uint64_t sh = sim_node_state_hash(n);
	if (!c->known) {
		c->known = true;
		c->term = n->sm.applied_term;
		c->seen_term = n->r != NULL ? raft_term(n->r) : c->term;
		c->data_hash = 0; /* not seen: the entry itself is not in a snapshot */
		c->sm_hash = sh;
		if (index > s->max_committed) {
			s->max_committed = index;
		}
		return;
	}
	if (c->term != n->sm.applied_term || c->sm_hash != sh) {
		sim_fail(s, "state machine safety: node %llu loaded a snapshot at %llu that differs",
			 (unsigned long long)n->id, (unsigned long long)index);
	}
}

static bool entry_matches(struct sim *s, struct sim_node *n, uint64_t index, struct raft_entry *e)
{
	(void)s;
	return raft_entry_at(n->r, index, e);
}

static void check_leader_completeness(struct sim *s, struct sim_node *n)
{
	uint64_t first = raft_first_index(n->r);
	uint64_t last = raft_last_index(n->r);
	uint64_t term = raft_term(n->r);
	for (uint64_t i = first; i <= s->max_committed; i++) {
		const struct sim_committed *c = &s->committed[i];
		/* Only entries surely committed in an earlier term bind this
		 * leader: a stale leader may miss what a later term commits. */
		if (!c->known || c->seen_term >= term) {
			continue;
		}
		struct raft_entry e;
		if (i > last || !entry_matches(s, n, i, &e)) {
			sim_fail(s, "leader completeness: leader %llu of term %llu lacks committed "
				    "entry %llu",
				 (unsigned long long)n->id, (unsigned long long)raft_term(n->r),
				 (unsigned long long)i);
			return;
		}
		if (e.term != c->term || (c->data_hash != 0 && sim_entry_hash(&e) != c->data_hash)) {
			sim_fail(s,
				 "leader completeness: leader %llu of term %llu has %llu/%llu, "
				 "committed was %llu/%llu",
				 (unsigned long long)n->id, (unsigned long long)raft_term(n->r),
				 (unsigned long long)i, (unsigned long long)e.term,
				 (unsigned long long)i, (unsigned long long)c->term);
			return;
		}
	}
}

static void check_leader(struct sim *s, struct sim_node *n)
{
	uint64_t term = raft_term(n->r);
	s->term_leader = grow_zeroed(s->term_leader, &s->cap_terms, term, sizeof(*s->term_leader));
	if (s->term_leader[term] == 0) {
		s->term_leader[term] = n->id;
	} else if (s->term_leader[term] != n->id) {
		sim_fail(s, "election safety: nodes %llu and %llu both lead term %llu",
			 (unsigned long long)s->term_leader[term], (unsigned long long)n->id,
			 (unsigned long long)term);
		return;
	}
	if (n->lead_term != term) {
		n->lead_term = term;
		check_leader_completeness(s, n);
	} else if (n->lead_check_index >= raft_first_index(n->r)) {
		struct raft_entry e;
		if (!raft_entry_at(n->r, n->lead_check_index, &e) || e.term != n->lead_check_term ||
		    sim_entry_hash(&e) != n->lead_check_hash) {
			sim_fail(s, "leader append-only: leader %llu changed its entry %llu",
				 (unsigned long long)n->id, (unsigned long long)n->lead_check_index);
			return;
		}
	}
	struct raft_entry e;
	n->lead_check_index = raft_last_index(n->r);
	if (raft_entry_at(n->r, n->lead_check_index, &e)) {
		n->lead_check_term = e.term;
		n->lead_check_hash = sim_entry_hash(&e);
	} else {
		n->lead_check_index = 0;
	}
}

void sim_check_step(struct sim *s)
{
	for (uint32_t id = 1; id <= s->n_slots && !s->failed; id++) {
		struct sim_node *n = &s->nodes[id];
		if (!n->up) {
			continue;
		}
		if (raft_role(n->r) == RAFT_LEADER) {
			check_leader(s, n);
		} else {
			n->lead_term = 0;
		}
	}
}
