/*
 * group.c — the group coordinator's state machine (group.h has the states
 * and the rules about delayed answers; docs/groups.md the big picture).
 *
 * Invariants:
 *  - a member has at most one parked JoinGroup and one parked SyncGroup;
 *    every parked request gets exactly one reply;
 *  - Empty <=> no members; a Stable or CompletingRebalance group has a
 *    leader that is one of its members and a chosen protocol;
 *  - generation only grows.
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "group/group.h"
#include "kafka/errors.h"

const char *group_state_name(enum group_state s)
{
	switch (s) {
	case GROUP_EMPTY:
		return "Empty";
	case GROUP_PREPARING_REBALANCE:
		return "PreparingRebalance";
	case GROUP_COMPLETING_REBALANCE:
		return "CompletingRebalance";
	case GROUP_STABLE:
		return "Stable";
	case GROUP_DEAD:
		return "Dead";
	}
	return "Unknown";
}

void group_coord_config_default(struct group_coord_config *config)
{
	memset(config, 0, sizeof(*config));
	config->min_session_timeout_ms = 6000;
	config->max_session_timeout_ms = 1800000;
	config->max_groups = 100000;
	config->max_members = 1000;
	config->max_offsets = 100000;
}

void group_coord_init(struct group_coord *c, const struct group_coord_config *config)
{
	memset(c, 0, sizeof(*c));
	c->config = *config;
	enum keel_err err = keel_hmap_init(&c->by_id, 16);
	KEEL_ASSERT(err == KEEL_OK);
}

/* ---- small owned copies ---- */

static char *dup_str(const char *s)
{
	if (s == NULL) {
		return NULL;
	}
	size_t n = strlen(s);
	char *d = malloc(n + 1);
	if (d != NULL) {
		memcpy(d, s, n + 1);
	}
	return d;
}

static bool str_eq(const char *a, const char *b)
{
	if (a == NULL || b == NULL) {
		return a == b;
	}
	return strcmp(a, b) == 0;
}

static struct group_bytes dup_bytes(const uint8_t *p, int32_t len)
{
	struct group_bytes b = {NULL, len < 0 ? -1 : len};
	if (len > 0 && (b.ptr = malloc((size_t)len)) != NULL) {
		memcpy(b.ptr, p, (size_t)len);
	} else if (len > 0) {
		b.len = 0;
	}
	return b;
}

static bool bytes_eq(const struct group_bytes *a, const uint8_t *p, int32_t len)
{
	if (a->len != len) {
		return false;
	}
	return len <= 0 || memcmp(a->ptr, p, (size_t)len) == 0;
}

static void free_protocols(struct group_member *m)
{
	for (uint32_t i = 0; i < m->protocol_count; i++) {
		free(m->protocols[i].name);
		free(m->protocols[i].metadata.ptr);
	}
	free(m->protocols);
	m->protocols = NULL;
	m->protocol_count = 0;
}

static void free_member(struct group_member *m)
{
	free(m->member_id);
	free(m->instance_id);
	free(m->client_id);
	free(m->client_host);
	free_protocols(m);
	free(m->assignment.ptr);
	free(m);
}

static void free_group(struct group *g)
{
	for (uint32_t i = 0; i < g->member_count; i++) {
		free_member(g->members[i]);
	}
	free(g->members);
	for (uint32_t i = 0; i < g->pending_count; i++) {
		free(g->pending[i].member_id);
	}
	free(g->pending);
	for (uint32_t i = 0; i < g->offset_count; i++) {
		free(g->offsets[i].topic);
		free(g->offsets[i].metadata);
	}
	free(g->offsets);
	free(g->group_id);
	free(g->protocol_type);
	free(g->protocol_name);
	free(g->leader_id);
	free(g);
}

void group_join_result_clear(struct group_join_result *r)
{
	free(r->protocol_type);
	free(r->protocol_name);
	free(r->leader_id);
	free(r->member_id);
	for (uint32_t i = 0; i < r->member_count; i++) {
		free(r->members[i].member_id);
		free(r->members[i].instance_id);
		free(r->members[i].metadata.ptr);
	}
	free(r->members);
	memset(r, 0, sizeof(*r));
}

void group_sync_result_clear(struct group_sync_result *r)
{
	free(r->protocol_type);
	free(r->protocol_name);
	free(r->assignment.ptr);
	memset(r, 0, sizeof(*r));
}

void group_reply_free(struct group_reply *r)
{
	if (r == NULL) {
		return;
	}
	group_join_result_clear(&r->join);
	group_sync_result_clear(&r->sync);
	free(r);
}

void group_coord_close(struct group_coord *c)
{
	for (uint32_t i = 0; i < c->group_count; i++) {
		free_group(c->groups[i]);
	}
	free(c->groups);
	keel_hmap_close(&c->by_id);
	while (c->replies_head != NULL) {
		struct group_reply *r = c->replies_head;
		c->replies_head = r->next;
		group_reply_free(r);
	}
	memset(c, 0, sizeof(*c));
}

/* ---- lookups ---- */

static uint64_t id_hash(const char *group_id)
{
	return keel_hash_bytes(group_id, strlen(group_id), 0x67726f7570ull);
}

static bool id_eq(const void *item, const void *key)
{
	return strcmp(((const struct group *)item)->group_id, key) == 0;
}

struct group *group_coord_find(const struct group_coord *c, const char *group_id)
{
	return keel_hmap_find(&c->by_id, id_hash(group_id), id_eq, group_id);
}

static struct group *create_group(struct group_coord *c, const char *group_id,
                                  int32_t offsets_partition, int64_t now_ms)
{
	if (c->group_count >= c->config.max_groups) {
		return NULL;
	}
	if (c->group_count == c->group_capacity) {
		uint32_t cap = c->group_capacity == 0 ? 16 : c->group_capacity * 2;
		struct group **n = realloc(c->groups, cap * sizeof(*n));
		if (n == NULL) {
			return NULL;
		}
		c->groups = n;
		c->group_capacity = cap;
	}
	struct group *g = calloc(1, sizeof(*g));
	if (g == NULL || (g->group_id = dup_str(group_id)) == NULL) {
		free(g);
		return NULL;
	}
	g->offsets_partition = offsets_partition;
	g->state = GROUP_EMPTY;
	g->state_timestamp_ms = now_ms;
	g->state_wall_ms = c->wall_ms;
	if (keel_hmap_insert(&c->by_id, id_hash(group_id), g) != KEEL_OK) {
		free_group(g);
		return NULL;
	}
	g->slot = c->group_count;
	c->groups[c->group_count++] = g;
	return g;
}

static void remove_group(struct group_coord *c, struct group *g)
{
	KEEL_ASSERT(g->slot < c->group_count);
	KEEL_ASSERT(c->groups[g->slot] == g);
	struct group *last = c->groups[--c->group_count];
	c->groups[g->slot] = last;
	last->slot = g->slot;
	bool found = keel_hmap_remove_item(&c->by_id, id_hash(g->group_id), g);
	KEEL_ASSERT(found);
	free_group(g);
}

static struct group_member *find_member(const struct group *g, const char *member_id)
{
	for (uint32_t i = 0; i < g->member_count; i++) {
		if (strcmp(g->members[i]->member_id, member_id) == 0) {
			return g->members[i];
		}
	}
	return NULL;
}

static struct group_member *find_instance(const struct group *g, const char *instance_id)
{
	for (uint32_t i = 0; i < g->member_count; i++) {
		if (str_eq(g->members[i]->instance_id, instance_id)) {
			return g->members[i];
		}
	}
	return NULL;
}

static void set_state(const struct group_coord *c, struct group *g, enum group_state s,
                      int64_t now_ms)
{
	g->state = s;
	g->state_timestamp_ms = now_ms;
	g->state_wall_ms = c->wall_ms;
}

/* ---- replies ---- */

static void queue_reply(struct group_coord *c, struct group_reply *r)
{
	r->next = NULL;
	if (c->replies_tail != NULL) {
		c->replies_tail->next = r;
	} else {
		c->replies_head = r;
	}
	c->replies_tail = r;
}

struct group_reply *group_coord_take_reply(struct group_coord *c)
{
	struct group_reply *r = c->replies_head;
	if (r != NULL) {
		c->replies_head = r->next;
		if (c->replies_head == NULL) {
			c->replies_tail = NULL;
		}
		r->next = NULL;
	}
	return r;
}

/* Fills a JoinGroup answer from the group's current generation. */
static void fill_join(const struct group *g, const struct group_member *m,
                      struct group_join_result *out)
{
	memset(out, 0, sizeof(*out));
	out->error = KAFKA_NONE;
	out->generation = g->generation;
	out->protocol_type = dup_str(g->protocol_type);
	out->protocol_name = dup_str(g->protocol_name);
	out->leader_id = dup_str(g->leader_id);
	out->member_id = dup_str(m->member_id);
	if (!str_eq(g->leader_id, m->member_id) || g->member_count == 0) {
		return;
	}
	out->members = calloc(g->member_count, sizeof(*out->members));
	if (out->members == NULL) {
		out->error = KAFKA_UNKNOWN_SERVER_ERROR;
		return;
	}
	out->member_count = g->member_count;
	for (uint32_t i = 0; i < g->member_count; i++) {
		const struct group_member *x = g->members[i];
		struct group_join_member *jm = &out->members[i];
		jm->member_id = dup_str(x->member_id);
		jm->instance_id = dup_str(x->instance_id);
		for (uint32_t p = 0; p < x->protocol_count; p++) {
			if (str_eq(x->protocols[p].name, g->protocol_name)) {
				jm->metadata = dup_bytes(x->protocols[p].metadata.ptr,
				                         x->protocols[p].metadata.len);
			}
		}
	}
}

static void reply_join_error(struct group_coord *c, struct group_member *m, int16_t error)
{
	if (!m->join_parked) {
		return;
	}
	m->join_parked = false;
	struct group_reply *r = calloc(1, sizeof(*r));
	KEEL_ASSERT(r != NULL);
	r->kind = GROUP_REPLY_JOIN;
	r->waiter = m->join_waiter;
	r->join.error = error;
	r->join.generation = -1;
	r->join.member_id = dup_str(m->member_id);
	queue_reply(c, r);
}

static void reply_sync(struct group_coord *c, const struct group *g, struct group_member *m,
                       int16_t error)
{
	if (!m->sync_parked) {
		return;
	}
	m->sync_parked = false;
	struct group_reply *r = calloc(1, sizeof(*r));
	KEEL_ASSERT(r != NULL);
	r->kind = GROUP_REPLY_SYNC;
	r->waiter = m->sync_waiter;
	r->sync.error = error;
	if (error == KAFKA_NONE) {
		r->sync.protocol_type = dup_str(g->protocol_type);
		r->sync.protocol_name = dup_str(g->protocol_name);
		r->sync.assignment = dup_bytes(m->assignment.ptr, m->assignment.len);
	}
	queue_reply(c, r);
}

/* ---- join phases ---- */

static int32_t max_rebalance_timeout(const struct group *g)
{
	int32_t t = 0;
	for (uint32_t i = 0; i < g->member_count; i++) {
		t = KEEL_MAX(t, g->members[i]->rebalance_timeout_ms);
	}
	return t;
}

static void prepare_rebalance(struct group_coord *c, struct group *g, int64_t now_ms)
{
	if (g->state == GROUP_COMPLETING_REBALANCE) {
		for (uint32_t i = 0; i < g->member_count; i++) {
			reply_sync(c, g, g->members[i], KAFKA_REBALANCE_IN_PROGRESS);
		}
	}
	if (g->state != GROUP_PREPARING_REBALANCE) {
		for (uint32_t i = 0; i < g->member_count; i++) {
			g->members[i]->joined = false;
		}
		set_state(c, g, GROUP_PREPARING_REBALANCE, now_ms);
	}
	g->rebalance_deadline_ms = now_ms + max_rebalance_timeout(g);
}

/* Removes a member, answering what it has parked with `error`. */
static void drop_member(struct group_coord *c, struct group *g, struct group_member *m,
                        int16_t error)
{
	reply_join_error(c, m, error);
	reply_sync(c, g, m, error);
	for (uint32_t i = 0; i < g->member_count; i++) {
		if (g->members[i] == m) {
			memmove(&g->members[i], &g->members[i + 1],
			        (g->member_count - i - 1) * sizeof(*g->members));
			g->member_count--;
			break;
		}
	}
	if (str_eq(g->leader_id, m->member_id)) {
		free(g->leader_id);
		g->leader_id = NULL;
	}
	free_member(m);
}

/* The protocol every member supports that most members prefer. */
static const char *choose_protocol(const struct group *g)
{
	const char *best = NULL;
	uint32_t best_votes = 0;
	const struct group_member *first = g->members[0];
	for (uint32_t p = 0; p < first->protocol_count; p++) {
		const char *name = first->protocols[p].name;
		bool everyone = true;
		for (uint32_t i = 1; i < g->member_count && everyone; i++) {
			bool has = false;
			for (uint32_t q = 0; q < g->members[i]->protocol_count; q++) {
				has |= str_eq(g->members[i]->protocols[q].name, name);
			}
			everyone = has;
		}
		if (!everyone) {
			continue;
		}
		uint32_t votes = 0;
		for (uint32_t i = 0; i < g->member_count; i++) {
			/* a member votes for its first protocol everyone has */
			for (uint32_t q = 0; q < g->members[i]->protocol_count; q++) {
				const char *mine = g->members[i]->protocols[q].name;
				bool all = true;
				for (uint32_t j = 0; j < g->member_count && all; j++) {
					bool has = false;
					for (uint32_t r = 0; r < g->members[j]->protocol_count;
					     r++) {
						has |= str_eq(g->members[j]->protocols[r].name,
						              mine);
					}
					all = has;
				}
				if (all) {
					votes += str_eq(mine, name) ? 1u : 0u;
					break;
				}
			}
		}
		if (best == NULL || votes > best_votes) {
			best = name;
			best_votes = votes;
		}
	}
	return best;
}

/* Ends the join phase when every member has rejoined, or (force) when its
 * time is up, dropping those that did not. */
static void try_complete_join(struct group_coord *c, struct group *g, int64_t now_ms, bool force)
{
	if (g->state != GROUP_PREPARING_REBALANCE) {
		return;
	}
	bool all = true;
	for (uint32_t i = 0; i < g->member_count; i++) {
		all &= g->members[i]->joined;
	}
	if (!all && !force) {
		return;
	}
	for (uint32_t i = g->member_count; i-- > 0;) {
		if (!g->members[i]->joined) {
			drop_member(c, g, g->members[i], KAFKA_UNKNOWN_MEMBER_ID);
		}
	}
	g->generation++;
	g->meta_dirty = true;
	free(g->protocol_name);
	g->protocol_name = NULL;
	if (g->member_count == 0) {
		free(g->leader_id);
		g->leader_id = NULL;
		set_state(c, g, GROUP_EMPTY, now_ms);
		return;
	}
	g->protocol_name = dup_str(choose_protocol(g));
	if (g->leader_id == NULL) {
		g->leader_id = dup_str(g->members[0]->member_id);
	}
	set_state(c, g, GROUP_COMPLETING_REBALANCE, now_ms);
	for (uint32_t i = 0; i < g->member_count; i++) {
		struct group_member *m = g->members[i];
		free(m->assignment.ptr);
		m->assignment = (struct group_bytes){NULL, 0};
		m->session_deadline_ms = now_ms + m->session_timeout_ms;
		if (!m->join_parked) {
			continue;
		}
		m->join_parked = false;
		struct group_reply *r = calloc(1, sizeof(*r));
		KEEL_ASSERT(r != NULL);
		r->kind = GROUP_REPLY_JOIN;
		r->waiter = m->join_waiter;
		fill_join(g, m, &r->join);
		queue_reply(c, r);
	}
}

/* ---- JoinGroup ---- */

static bool protocols_equal(const struct group_member *m, const struct group_join_request *rq)
{
	if (m->protocol_count != rq->protocol_count) {
		return false;
	}
	for (uint32_t i = 0; i < m->protocol_count; i++) {
		if (!str_eq(m->protocols[i].name, rq->protocols[i].name) ||
		    !bytes_eq(&m->protocols[i].metadata, rq->protocols[i].metadata,
		              rq->protocols[i].metadata_len)) {
			return false;
		}
	}
	return true;
}

static enum keel_err set_protocols(struct group_member *m, const struct group_join_request *rq)
{
	free_protocols(m);
	if (rq->protocol_count == 0) {
		return KEEL_OK;
	}
	m->protocols = calloc(rq->protocol_count, sizeof(*m->protocols));
	if (m->protocols == NULL) {
		return KEEL_NOMEM;
	}
	m->protocol_count = rq->protocol_count;
	for (uint32_t i = 0; i < rq->protocol_count; i++) {
		m->protocols[i].name = dup_str(rq->protocols[i].name);
		m->protocols[i].metadata =
		        dup_bytes(rq->protocols[i].metadata, rq->protocols[i].metadata_len);
	}
	return KEEL_OK;
}

/* Whether the request's protocols fit the group's type and members. */
static bool protocols_fit(const struct group *g, const struct group_join_request *rq,
                          const struct group_member *self)
{
	if (rq->protocol_type == NULL || rq->protocol_type[0] == '\0' || rq->protocol_count == 0) {
		return false;
	}
	if (g->member_count == 0 || (g->member_count == 1 && g->members[0] == self)) {
		return true;
	}
	if (!str_eq(g->protocol_type, rq->protocol_type)) {
		return false;
	}
	/* some protocol of the request is supported by every other member */
	for (uint32_t p = 0; p < rq->protocol_count; p++) {
		bool all = true;
		for (uint32_t i = 0; i < g->member_count && all; i++) {
			const struct group_member *m = g->members[i];
			if (m == self) {
				continue;
			}
			bool has = false;
			for (uint32_t q = 0; q < m->protocol_count; q++) {
				has |= str_eq(m->protocols[q].name, rq->protocols[p].name);
			}
			all = has;
		}
		if (all) {
			return true;
		}
	}
	return false;
}

static char *new_member_id(struct group_coord *c, const char *client_id)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = client_id != NULL ? strnlen(client_id, 200) : 0;
	char *id = malloc(n + 1 + 16 + 1 + 16 + 1);
	if (id == NULL) {
		return NULL;
	}
	memcpy(id, client_id, n);
	size_t pos = n;
	id[pos++] = '-';
	uint64_t parts[2] = {c->config.incarnation, ++c->next_member};
	for (int k = 0; k < 2; k++) {
		for (int s = 60; s >= 0; s -= 4) {
			id[pos++] = hex[(parts[k] >> s) & 0xf];
		}
		id[pos++] = k == 0 ? '-' : '\0';
	}
	return id;
}

static struct group_member *add_member(struct group_coord *c, struct group *g, char *member_id,
                                       const struct group_join_request *rq, int64_t now_ms)
{
	if (g->member_count >= c->config.max_members) {
		free(member_id);
		return NULL;
	}
	struct group_member **n = realloc(g->members, (g->member_count + 1) * sizeof(*g->members));
	struct group_member *m = calloc(1, sizeof(*m));
	if (n == NULL || m == NULL) {
		if (n != NULL) {
			g->members = n;
		}
		free(m);
		free(member_id);
		return NULL;
	}
	g->members = n;
	m->member_id = member_id;
	m->instance_id = dup_str(rq->instance_id);
	m->client_id = dup_str(rq->client_id != NULL ? rq->client_id : "");
	m->client_host = dup_str(rq->client_host != NULL ? rq->client_host : "");
	m->session_deadline_ms = now_ms + rq->session_timeout_ms;
	g->members[g->member_count++] = m;
	return m;
}

static void update_member(struct group_member *m, const struct group_join_request *rq,
                          int64_t now_ms)
{
	m->session_timeout_ms = rq->session_timeout_ms;
	m->rebalance_timeout_ms =
	        rq->rebalance_timeout_ms > 0 ? rq->rebalance_timeout_ms : rq->session_timeout_ms;
	m->session_deadline_ms = now_ms + rq->session_timeout_ms;
	(void)set_protocols(m, rq);
}

/* Parks m's JoinGroup in a (new or running) join phase. */
static bool park_join(struct group_coord *c, struct group *g, struct group_member *m,
                      const struct group_join_request *rq, int64_t now_ms)
{
	if (m->join_parked) {
		/* a second JoinGroup replaces the first, which is told to retry */
		reply_join_error(c, m, KAFKA_REBALANCE_IN_PROGRESS);
	}
	update_member(m, rq, now_ms);
	if (g->protocol_type == NULL) {
		g->protocol_type = dup_str(rq->protocol_type);
	}
	prepare_rebalance(c, g, now_ms);
	m->joined = true;
	m->join_parked = true;
	m->join_waiter = rq->waiter;
	try_complete_join(c, g, now_ms, false);
	return false;
}

static bool join_error(struct group_join_result *out, int16_t error, const char *member_id)
{
	memset(out, 0, sizeof(*out));
	out->error = error;
	out->generation = -1;
	out->member_id = dup_str(member_id != NULL ? member_id : "");
	return true;
}

static bool remove_pending(struct group *g, const char *member_id)
{
	for (uint32_t i = 0; i < g->pending_count; i++) {
		if (strcmp(g->pending[i].member_id, member_id) == 0) {
			free(g->pending[i].member_id);
			g->pending[i] = g->pending[--g->pending_count];
			return true;
		}
	}
	return false;
}

/* KIP-394: a new dynamic member first gets its id and must come back. */
static bool require_member_id(struct group_coord *c, struct group *g, char *id,
                              const struct group_join_request *rq, int64_t now_ms,
                              struct group_join_result *out)
{
	if (g->pending_count >= c->config.max_members) {
		free(id); /* ids handed out but never used are bounded too */
		return join_error(out, KAFKA_GROUP_MAX_SIZE_REACHED, "");
	}
	struct group_pending_member *n =
	        realloc(g->pending, (g->pending_count + 1) * sizeof(*g->pending));
	if (n == NULL) {
		free(id);
		return join_error(out, KAFKA_UNKNOWN_SERVER_ERROR, "");
	}
	g->pending = n;
	g->pending[g->pending_count++] =
	        (struct group_pending_member){id, now_ms + rq->session_timeout_ms};
	return join_error(out, KAFKA_MEMBER_ID_REQUIRED, id);
}

/* A static member comes back with no member id: it takes a new id (the old
 * one is fenced) and keeps its place and assignment. */
static bool static_rejoin(struct group_coord *c, struct group *g, struct group_member *m,
                          const struct group_join_request *rq, int64_t now_ms,
                          struct group_join_result *out)
{
	char *id = new_member_id(c, rq->client_id);
	if (id == NULL) {
		return join_error(out, KAFKA_UNKNOWN_SERVER_ERROR, "");
	}
	reply_join_error(c, m, KAFKA_FENCED_INSTANCE_ID);
	reply_sync(c, g, m, KAFKA_FENCED_INSTANCE_ID);
	bool was_leader = str_eq(g->leader_id, m->member_id);
	free(m->member_id);
	m->member_id = id;
	if (was_leader) {
		free(g->leader_id);
		g->leader_id = dup_str(id);
	}
	if (g->state == GROUP_STABLE && protocols_equal(m, rq)) {
		update_member(m, rq, now_ms);
		fill_join(g, m, out);
		return true;
	}
	return park_join(c, g, m, rq, now_ms);
}

bool group_join(struct group_coord *c, int64_t now_ms, const struct group_join_request *rq,
                struct group_join_result *out)
{
	if (rq->group_id == NULL || rq->group_id[0] == '\0') {
		return join_error(out, KAFKA_INVALID_GROUP_ID, rq->member_id);
	}
	if (rq->session_timeout_ms < c->config.min_session_timeout_ms ||
	    rq->session_timeout_ms > c->config.max_session_timeout_ms) {
		return join_error(out, KAFKA_INVALID_SESSION_TIMEOUT, rq->member_id);
	}
	bool known_id = rq->member_id != NULL && rq->member_id[0] != '\0';
	struct group *g = group_coord_find(c, rq->group_id);
	if (g == NULL) {
		if (known_id) {
			return join_error(out, KAFKA_UNKNOWN_MEMBER_ID, rq->member_id);
		}
		g = create_group(c, rq->group_id, rq->offsets_partition, now_ms);
		if (g == NULL) {
			return join_error(out, KAFKA_UNKNOWN_SERVER_ERROR, rq->member_id);
		}
	}
	struct group_member *m = known_id ? find_member(g, rq->member_id) : NULL;
	if (!protocols_fit(g, rq, m)) {
		return join_error(out, KAFKA_INCONSISTENT_GROUP_PROTOCOL, rq->member_id);
	}
	if (g->member_count == 0) {
		free(g->protocol_type);
		g->protocol_type = dup_str(rq->protocol_type);
	}
	if (!known_id) {
		struct group_member *old =
		        rq->instance_id != NULL ? find_instance(g, rq->instance_id) : NULL;
		if (old != NULL) {
			return static_rejoin(c, g, old, rq, now_ms, out);
		}
		char *id = new_member_id(c, rq->client_id);
		if (id == NULL) {
			return join_error(out, KAFKA_UNKNOWN_SERVER_ERROR, "");
		}
		if (rq->instance_id == NULL && rq->version >= 4) {
			return require_member_id(c, g, id, rq, now_ms, out);
		}
		m = add_member(c, g, id, rq, now_ms);
		if (m == NULL) {
			return join_error(out, KAFKA_GROUP_MAX_SIZE_REACHED, "");
		}
		return park_join(c, g, m, rq, now_ms);
	}
	if (m == NULL) {
		if (!remove_pending(g, rq->member_id)) {
			return join_error(out, KAFKA_UNKNOWN_MEMBER_ID, rq->member_id);
		}
		m = add_member(c, g, dup_str(rq->member_id), rq, now_ms);
		if (m == NULL) {
			return join_error(out, KAFKA_GROUP_MAX_SIZE_REACHED, rq->member_id);
		}
		return park_join(c, g, m, rq, now_ms);
	}
	if (!str_eq(m->instance_id, rq->instance_id)) {
		return join_error(out, KAFKA_FENCED_INSTANCE_ID, rq->member_id);
	}
	bool leader = str_eq(g->leader_id, m->member_id);
	if ((g->state == GROUP_COMPLETING_REBALANCE && protocols_equal(m, rq)) ||
	    (g->state == GROUP_STABLE && !leader && protocols_equal(m, rq))) {
		/* nothing changed: the current generation stands */
		m->session_deadline_ms = now_ms + m->session_timeout_ms;
		fill_join(g, m, out);
		return true;
	}
	return park_join(c, g, m, rq, now_ms);
}

/* ---- SyncGroup ---- */

static int16_t check_member(const struct group *g, const char *member_id, const char *instance_id,
                            struct group_member **out)
{
	*out = NULL;
	struct group_member *m = g != NULL ? find_member(g, member_id) : NULL;
	if (m == NULL) {
		if (g != NULL && instance_id != NULL && find_instance(g, instance_id) != NULL) {
			return KAFKA_FENCED_INSTANCE_ID;
		}
		return KAFKA_UNKNOWN_MEMBER_ID;
	}
	if (instance_id != NULL && !str_eq(m->instance_id, instance_id)) {
		return KAFKA_FENCED_INSTANCE_ID;
	}
	*out = m;
	return KAFKA_NONE;
}

static bool sync_error(struct group_sync_result *out, int16_t error)
{
	memset(out, 0, sizeof(*out));
	out->error = error;
	return true;
}

bool group_sync(struct group_coord *c, int64_t now_ms, const struct group_sync_request *rq,
                struct group_sync_result *out)
{
	struct group *g = group_coord_find(c, rq->group_id);
	struct group_member *m = NULL;
	int16_t err = check_member(g, rq->member_id, rq->instance_id, &m);
	if (err != KAFKA_NONE) {
		return sync_error(out, err);
	}
	if (rq->generation != g->generation) {
		return sync_error(out, KAFKA_ILLEGAL_GENERATION);
	}
	if (g->state == GROUP_PREPARING_REBALANCE) {
		return sync_error(out, KAFKA_REBALANCE_IN_PROGRESS);
	}
	KEEL_ASSERT(g->state == GROUP_COMPLETING_REBALANCE || g->state == GROUP_STABLE);
	m->session_deadline_ms = now_ms + m->session_timeout_ms;
	if (g->state == GROUP_STABLE) {
		memset(out, 0, sizeof(*out));
		out->protocol_type = dup_str(g->protocol_type);
		out->protocol_name = dup_str(g->protocol_name);
		out->assignment = dup_bytes(m->assignment.ptr, m->assignment.len);
		return true;
	}
	if (!str_eq(g->leader_id, m->member_id)) {
		if (m->sync_parked) {
			reply_sync(c, g, m, KAFKA_REBALANCE_IN_PROGRESS);
		}
		m->sync_parked = true;
		m->sync_waiter = rq->waiter;
		return false;
	}
	/* The leader's assignment: every member gets its part. */
	for (uint32_t i = 0; i < rq->assignment_count; i++) {
		struct group_member *x = find_member(g, rq->assignments[i].member_id);
		if (x != NULL) {
			free(x->assignment.ptr);
			x->assignment = dup_bytes(rq->assignments[i].assignment,
			                          rq->assignments[i].assignment_len);
		}
	}
	set_state(c, g, GROUP_STABLE, now_ms);
	g->meta_dirty = true;
	for (uint32_t i = 0; i < g->member_count; i++) {
		reply_sync(c, g, g->members[i], KAFKA_NONE);
	}
	memset(out, 0, sizeof(*out));
	out->protocol_type = dup_str(g->protocol_type);
	out->protocol_name = dup_str(g->protocol_name);
	out->assignment = dup_bytes(m->assignment.ptr, m->assignment.len);
	return true;
}

/* ---- Heartbeat, LeaveGroup, sessions ---- */

int16_t group_heartbeat(struct group_coord *c, int64_t now_ms, const char *group_id,
                        int32_t generation, const char *member_id, const char *instance_id)
{
	struct group *g = group_coord_find(c, group_id);
	struct group_member *m = NULL;
	int16_t err = check_member(g, member_id, instance_id, &m);
	if (err != KAFKA_NONE) {
		return err;
	}
	if (generation != g->generation) {
		return KAFKA_ILLEGAL_GENERATION;
	}
	m->session_deadline_ms = now_ms + m->session_timeout_ms;
	return g->state == GROUP_PREPARING_REBALANCE ? KAFKA_REBALANCE_IN_PROGRESS : KAFKA_NONE;
}

/* After a member went away: a new join phase, or Empty. */
static void after_departure(struct group_coord *c, struct group *g, int64_t now_ms)
{
	if (g->member_count == 0 && g->state != GROUP_PREPARING_REBALANCE) {
		free(g->leader_id);
		g->leader_id = NULL;
		if (g->state != GROUP_EMPTY) {
			g->generation++;
			set_state(c, g, GROUP_EMPTY, now_ms);
			g->meta_dirty = true;
		}
		return;
	}
	if (g->state == GROUP_STABLE || g->state == GROUP_COMPLETING_REBALANCE) {
		prepare_rebalance(c, g, now_ms);
	}
	try_complete_join(c, g, now_ms, false);
}

int16_t group_leave(struct group_coord *c, int64_t now_ms, const char *group_id,
                    const char *member_id, const char *instance_id)
{
	struct group *g = group_coord_find(c, group_id);
	if (g == NULL) {
		return KAFKA_UNKNOWN_MEMBER_ID;
	}
	struct group_member *m = NULL;
	if (member_id != NULL && member_id[0] != '\0') {
		int16_t err = check_member(g, member_id, instance_id, &m);
		if (err != KAFKA_NONE) {
			return err;
		}
	} else if (instance_id != NULL) {
		m = find_instance(g, instance_id);
	}
	if (m == NULL) {
		return KAFKA_UNKNOWN_MEMBER_ID;
	}
	drop_member(c, g, m, KAFKA_UNKNOWN_MEMBER_ID);
	after_departure(c, g, now_ms);
	return KAFKA_NONE;
}

void group_coord_tick(struct group_coord *c, int64_t now_ms)
{
	for (uint32_t gi = 0; gi < c->group_count; gi++) {
		struct group *g = c->groups[gi];
		for (uint32_t i = g->pending_count; i-- > 0;) {
			if (now_ms >= g->pending[i].deadline_ms) {
				free(g->pending[i].member_id);
				g->pending[i] = g->pending[--g->pending_count];
			}
		}
		bool gone = false;
		for (uint32_t i = g->member_count; i-- > 0;) {
			struct group_member *m = g->members[i];
			/* a member waiting in a join phase is not expired: the
			 * phase's own deadline decides */
			if (m->join_parked || now_ms < m->session_deadline_ms) {
				continue;
			}
			drop_member(c, g, m, KAFKA_UNKNOWN_MEMBER_ID);
			gone = true;
		}
		if (gone) {
			after_departure(c, g, now_ms);
		}
		if (g->state == GROUP_PREPARING_REBALANCE && now_ms >= g->rebalance_deadline_ms) {
			try_complete_join(c, g, now_ms, true);
		}
	}
}

/* ---- offsets ---- */

int16_t group_offset_commit_check(struct group_coord *c, int64_t now_ms, const char *group_id,
                                  int32_t offsets_partition, int32_t generation,
                                  const char *member_id, const char *instance_id)
{
	if (group_id == NULL || group_id[0] == '\0') {
		return KAFKA_INVALID_GROUP_ID;
	}
	struct group *g = group_coord_find(c, group_id);
	if (g == NULL) {
		if (generation >= 0) {
			return KAFKA_ILLEGAL_GENERATION;
		}
		g = create_group(c, group_id, offsets_partition, now_ms);
		return g != NULL ? KAFKA_NONE : KAFKA_UNKNOWN_SERVER_ERROR;
	}
	if (generation < 0 && g->state == GROUP_EMPTY) {
		return KAFKA_NONE;
	}
	if (g->state == GROUP_COMPLETING_REBALANCE) {
		return KAFKA_REBALANCE_IN_PROGRESS;
	}
	struct group_member *m = NULL;
	int16_t err = check_member(g, member_id != NULL ? member_id : "", instance_id, &m);
	if (err != KAFKA_NONE) {
		return err;
	}
	if (generation != g->generation) {
		return KAFKA_ILLEGAL_GENERATION;
	}
	m->session_deadline_ms = now_ms + m->session_timeout_ms;
	return KAFKA_NONE;
}

static struct group_offset *find_offset(const struct group *g, const char *topic, int32_t partition)
{
	for (uint32_t i = 0; i < g->offset_count; i++) {
		if (g->offsets[i].partition == partition &&
		    strcmp(g->offsets[i].topic, topic) == 0) {
			return &g->offsets[i];
		}
	}
	return NULL;
}

const struct group_offset *group_offset_find(const struct group *g, const char *topic,
                                             int32_t partition)
{
	return find_offset(g, topic, partition);
}

enum keel_err group_offset_commit(struct group_coord *c, const char *group_id,
                                  int32_t offsets_partition, const char *topic, int32_t partition,
                                  int64_t offset, int32_t leader_epoch, const char *metadata,
                                  int64_t commit_timestamp_ms)
{
	struct group *g = group_coord_find(c, group_id);
	if (g == NULL &&
	    (g = create_group(c, group_id, offsets_partition, commit_timestamp_ms)) == NULL) {
		return KEEL_NOMEM;
	}
	struct group_offset *o = find_offset(g, topic, partition);
	if (o == NULL) {
		if (g->offset_count >= c->config.max_offsets) {
			return KEEL_LIMIT;
		}
		struct group_offset *n =
		        realloc(g->offsets, (g->offset_count + 1) * sizeof(*g->offsets));
		if (n == NULL) {
			return KEEL_NOMEM;
		}
		g->offsets = n;
		o = &g->offsets[g->offset_count];
		memset(o, 0, sizeof(*o));
		if ((o->topic = dup_str(topic)) == NULL) {
			return KEEL_NOMEM;
		}
		o->partition = partition;
		g->offset_count++;
	}
	free(o->metadata);
	o->metadata = dup_str(metadata);
	o->offset = offset;
	o->leader_epoch = leader_epoch;
	o->commit_timestamp_ms = commit_timestamp_ms;
	return KEEL_OK;
}

bool group_offset_remove(struct group *g, const char *topic, int32_t partition)
{
	struct group_offset *o = find_offset(g, topic, partition);
	if (o == NULL) {
		return false;
	}
	free(o->topic);
	free(o->metadata);
	*o = g->offsets[--g->offset_count];
	return true;
}

int16_t group_delete(struct group_coord *c, const char *group_id)
{
	struct group *g = group_coord_find(c, group_id);
	if (g == NULL) {
		return KAFKA_GROUP_ID_NOT_FOUND;
	}
	if (g->state != GROUP_EMPTY) {
		return KAFKA_NON_EMPTY_GROUP;
	}
	remove_group(c, g);
	return KAFKA_NONE;
}

/* ---- persistence and ownership ---- */

struct group *group_coord_take_dirty(struct group_coord *c)
{
	for (uint32_t i = 0; i < c->group_count; i++) {
		if (c->groups[i]->meta_dirty) {
			c->groups[i]->meta_dirty = false;
			return c->groups[i];
		}
	}
	return NULL;
}

enum keel_err group_coord_load_group(struct group_coord *c, const char *group_id,
                                     int32_t offsets_partition, const char *protocol_type,
                                     int32_t generation, const char *protocol_name, int64_t now_ms,
                                     int64_t state_wall_ms)
{
	struct group *g = group_coord_find(c, group_id);
	if (g == NULL && (g = create_group(c, group_id, offsets_partition, now_ms)) == NULL) {
		return KEEL_NOMEM;
	}
	if (g->member_count > 0) {
		return KEEL_OK; /* live members know better than the log */
	}
	free(g->protocol_type);
	free(g->protocol_name);
	g->protocol_type = dup_str(protocol_type);
	g->protocol_name = dup_str(protocol_name);
	g->generation = KEEL_MAX(g->generation, generation);
	g->state_wall_ms = state_wall_ms;
	return KEEL_OK;
}

void group_coord_load_group_delete(struct group_coord *c, const char *group_id)
{
	struct group *g = group_coord_find(c, group_id);
	if (g != NULL && g->member_count == 0 && g->offset_count == 0) {
		remove_group(c, g);
	}
}

void group_coord_unload(struct group_coord *c, int32_t offsets_partition)
{
	for (uint32_t i = c->group_count; i-- > 0;) {
		struct group *g = c->groups[i];
		if (g->offsets_partition != offsets_partition) {
			continue;
		}
		for (uint32_t m = 0; m < g->member_count; m++) {
			reply_join_error(c, g->members[m], KAFKA_NOT_COORDINATOR);
			reply_sync(c, g, g->members[m], KAFKA_NOT_COORDINATOR);
		}
		remove_group(c, g);
	}
}

int32_t group_partition_for(const char *group_id, size_t len, int32_t partition_count)
{
	KEEL_ASSERT(partition_count > 0);
	/* Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units,
	 * in 32-bit wrapping arithmetic. UTF-8 is decoded to code points and
	 * those past the BMP become surrogate pairs; a malformed byte counts
	 * as itself. */
	uint32_t h = 0;
	const uint8_t *s = (const uint8_t *)group_id;
	size_t i = 0;
	while (i < len) {
		uint32_t cp = s[i];
		size_t extra = cp >= 0xf0 ? 3 : cp >= 0xe0 ? 2 : cp >= 0xc0 ? 1 : 0;
		if (extra > 0) {
			uint32_t v = cp & (0x3fu >> extra);
			bool ok = i + extra < len;
			for (size_t k = 1; ok && k <= extra; k++) {
				ok = (s[i + k] & 0xc0) == 0x80;
				v = (v << 6) | (s[i + k] & 0x3fu);
			}
			if (ok) {
				cp = v;
				i += extra;
			}
		}
		i++;
		if (cp >= 0x10000) {
			uint32_t u = cp - 0x10000;
			h = h * 31u + (0xd800u + (u >> 10));
			h = h * 31u + (0xdc00u + (u & 0x3ffu));
		} else {
			h = h * 31u + cp;
		}
	}
	int32_t hash = (int32_t)h;
	/* Kafka's Utils.abs: MIN_VALUE maps to 0 */
	int32_t abs = hash == INT32_MIN ? 0 : (hash < 0 ? -hash : hash);
	return abs % partition_count;
}

/* ---- offset expiry ---- */

void group_coord_set_wall_clock(struct group_coord *c, int64_t wall_ms)
{
	c->wall_ms = wall_ms;
}

static bool had_members(const struct group *g)
{
	return g->protocol_type != NULL && g->protocol_type[0] != '\0';
}

/* Expires what is due in one Empty group; true if the group is left with
 * nothing (no offsets, no members: it goes too). */
static bool expire_group(struct group *g, int64_t wall_ms, int64_t retention_ms, group_expire_fn fn,
                         void *arg, uint32_t *removed)
{
	if (g->state != GROUP_EMPTY || g->member_count > 0) {
		return false; /* a live group keeps its offsets */
	}
	if (g->state_wall_ms < GROUP_WALL_MS_MIN) {
		/* Not known (loaded from a record without it, or the clock was
		 * never given): the retention counts from now. */
		g->state_wall_ms = wall_ms;
	}
	for (uint32_t i = g->offset_count; i-- > 0;) {
		const struct group_offset *o = &g->offsets[i];
		int64_t base = had_members(g) ? g->state_wall_ms : o->commit_timestamp_ms;
		if (base > wall_ms - retention_ms) {
			continue;
		}
		fn(arg, g, o);
		bool gone = group_offset_remove(g, o->topic, o->partition);
		KEEL_ASSERT(gone);
		(*removed)++;
	}
	return g->offset_count == 0 && g->pending_count == 0 &&
	       g->state_wall_ms <= wall_ms - retention_ms;
}

uint32_t group_coord_expire_offsets(struct group_coord *c, int64_t wall_ms, int64_t retention_ms,
                                    group_expire_fn fn, void *arg)
{
	KEEL_ASSERT(retention_ms > 0);
	uint32_t removed = 0;
	for (uint32_t i = c->group_count; i-- > 0;) {
		struct group *g = c->groups[i];
		if (expire_group(g, wall_ms, retention_ms, fn, arg, &removed)) {
			fn(arg, g, NULL);
			remove_group(c, g);
		}
	}
	return removed;
}
