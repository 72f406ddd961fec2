/* zk_session.c — timeouts, connects, passwords, expiry (see zk_session.h). */
#include "zk/zk_session.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"

int32_t zk_session_min_timeout(const struct zk_config *cfg)
{
	return cfg->min_session_timeout_ms > 0 ? cfg->min_session_timeout_ms
					       : 2 * cfg->tick_time_ms;
}

int32_t zk_session_max_timeout(const struct zk_config *cfg)
{
	return cfg->max_session_timeout_ms > 0 ? cfg->max_session_timeout_ms
					       : 20 * cfg->tick_time_ms;
}

int32_t zk_session_negotiate_timeout(const struct zk_config *cfg, int32_t requested_ms)
{
	int32_t lo = zk_session_min_timeout(cfg);
	int32_t hi = zk_session_max_timeout(cfg);
	if (requested_ms < lo) {
		return lo;
	}
	return requested_ms > hi ? hi : requested_ms;
}

bool zk_session_password_ok(const struct zk_session *s, struct zk_bytes passwd)
{
	if (passwd.size != ZK_PASSWD_SIZE) {
		return false;
	}
	uint8_t diff = 0;
	for (int i = 0; i < ZK_PASSWD_SIZE; i++) {
		diff |= (uint8_t)(s->passwd[i] ^ passwd.data[i]);
	}
	return diff == 0;
}

static const uint8_t zero_passwd[ZK_PASSWD_SIZE];

enum zk_connect_action zk_session_connect(const struct zk_state *st,
					  const struct zk_config *cfg,
					  const struct zk_connect_request *req,
					  int64_t last_zxid, struct zk_connect_response *rsp,
					  int32_t *timeout_ms)
{
	memset(rsp, 0, sizeof(*rsp));
	rsp->has_read_only = req->has_read_only;
	rsp->passwd = zk_bytes_of(zero_passwd, ZK_PASSWD_SIZE);
	*timeout_ms = zk_session_negotiate_timeout(cfg, req->timeout_ms);
	if (req->last_zxid_seen > last_zxid) {
		return ZK_CONNECT_REFUSE;
	}
	if (req->session_id == 0) {
		return ZK_CONNECT_NEW;
	}
	const struct zk_session *s = zk_state_session(st, req->session_id);
	if (s == NULL || !zk_session_password_ok(s, req->passwd)) {
		return ZK_CONNECT_EXPIRED;
	}
	rsp->timeout_ms = *timeout_ms;
	rsp->session_id = s->id;
	rsp->passwd = zk_bytes_of(s->passwd, ZK_PASSWD_SIZE);
	return ZK_CONNECT_RESUME;
}

void zk_session_created(const struct zk_result *res, bool has_read_only,
			struct zk_connect_response *rsp)
{
	memset(rsp, 0, sizeof(*rsp));
	rsp->has_read_only = has_read_only;
	if (res->err != ZK_OK || res->new_session_id == 0) {
		rsp->passwd = zk_bytes_of(zero_passwd, ZK_PASSWD_SIZE);
		return;
	}
	rsp->timeout_ms = res->new_session_timeout_ms;
	rsp->session_id = res->new_session_id;
	rsp->passwd = zk_bytes_of(res->new_session_passwd, ZK_PASSWD_SIZE);
}

/* ---- expiry tracker ---- */

struct zk_expiry_entry {
	int64_t id;
	int64_t deadline_ms;
	int32_t timeout_ms;
	uint32_t heap_index;
};

static bool entry_eq(const void *item, const void *key)
{
	return ((const struct zk_expiry_entry *)item)->id == *(const int64_t *)key;
}

static uint64_t id_hash(int64_t id)
{
	return keel_hash_u64((uint64_t)id);
}

static struct zk_expiry_entry *find(const struct zk_expiry *t, int64_t id)
{
	return keel_hmap_find(&t->by_id, id_hash(id), entry_eq, &id);
}

/* Earlier deadline first; equal deadlines by id (deterministic order). */
static bool before(const struct zk_expiry_entry *a, const struct zk_expiry_entry *b)
{
	return a->deadline_ms < b->deadline_ms ||
	       (a->deadline_ms == b->deadline_ms && a->id < b->id);
}

static void heap_set(struct zk_expiry *t, uint32_t i, struct zk_expiry_entry *e)
{
	t->heap[i] = e;
	e->heap_index = i;
}

static void sift_up(struct zk_expiry *t, uint32_t i)
{
	struct zk_expiry_entry *e = t->heap[i];
	while (i > 0) {
		uint32_t parent = (i - 1) / 2;
		if (!before(e, t->heap[parent])) {
			break;
		}
		heap_set(t, i, t->heap[parent]);
		i = parent;
	}
	heap_set(t, i, e);
}

static void sift_down(struct zk_expiry *t, uint32_t i)
{
	struct zk_expiry_entry *e = t->heap[i];
	for (;;) {
		uint32_t child = 2 * i + 1;
		if (child >= t->count) {
			break;
		}
		if (child + 1 < t->count && before(t->heap[child + 1], t->heap[child])) {
			child++;
		}
		if (!before(t->heap[child], e)) {
			break;
		}
		heap_set(t, i, t->heap[child]);
		i = child;
	}
	heap_set(t, i, e);
}

static void reposition(struct zk_expiry *t, struct zk_expiry_entry *e)
{
	sift_up(t, e->heap_index);
	sift_down(t, e->heap_index);
}

enum keel_err zk_expiry_init(struct zk_expiry *t, uint32_t max_sessions)
{
	memset(t, 0, sizeof(*t));
	t->max_sessions = max_sessions;
	return keel_hmap_init(&t->by_id, 64);
}

static void clear(struct zk_expiry *t)
{
	for (uint32_t i = 0; i < t->count; i++) {
		free(t->heap[i]);
	}
	t->count = 0;
	keel_hmap_close(&t->by_id);
}

void zk_expiry_close(struct zk_expiry *t)
{
	clear(t);
	free(t->heap);
	memset(t, 0, sizeof(*t));
}

enum keel_err zk_expiry_add(struct zk_expiry *t, int64_t session_id, int32_t timeout_ms,
			    int64_t now_ms)
{
	struct zk_expiry_entry *e = find(t, session_id);
	if (e != NULL) {
		e->timeout_ms = timeout_ms;
		e->deadline_ms = now_ms + timeout_ms;
		reposition(t, e);
		return KEEL_OK;
	}
	if (t->max_sessions != 0 && t->count >= t->max_sessions) {
		return KEEL_LIMIT;
	}
	if (t->count == t->capacity) {
		uint32_t cap = t->capacity == 0 ? 64 : t->capacity * 2;
		struct zk_expiry_entry **heap = realloc(t->heap, cap * sizeof(*heap));
		if (heap == NULL) {
			return KEEL_NOMEM;
		}
		t->heap = heap;
		t->capacity = cap;
	}
	e = malloc(sizeof(*e));
	if (e == NULL) {
		return KEEL_NOMEM;
	}
	e->id = session_id;
	e->timeout_ms = timeout_ms;
	e->deadline_ms = now_ms + timeout_ms;
	if (keel_hmap_insert(&t->by_id, id_hash(session_id), e) != KEEL_OK) {
		free(e);
		return KEEL_NOMEM;
	}
	heap_set(t, t->count++, e);
	sift_up(t, e->heap_index);
	return KEEL_OK;
}

bool zk_expiry_touch(struct zk_expiry *t, int64_t session_id, int64_t now_ms)
{
	struct zk_expiry_entry *e = find(t, session_id);
	if (e == NULL) {
		return false;
	}
	int64_t deadline = now_ms + e->timeout_ms;
	if (deadline > e->deadline_ms) {
		e->deadline_ms = deadline;
		sift_down(t, e->heap_index);
	}
	return true;
}

void zk_expiry_remove(struct zk_expiry *t, int64_t session_id)
{
	struct zk_expiry_entry *e = keel_hmap_remove(&t->by_id, id_hash(session_id), entry_eq,
						     &session_id);
	if (e == NULL) {
		return;
	}
	uint32_t i = e->heap_index;
	t->count--;
	if (i != t->count) {
		heap_set(t, i, t->heap[t->count]);
		reposition(t, t->heap[i]);
	}
	free(e);
}

size_t zk_expiry_count(const struct zk_expiry *t)
{
	return t->count;
}

size_t zk_expiry_expired(struct zk_expiry *t, int64_t now_ms, int64_t *ids, size_t max)
{
	size_t n = 0;
	while (n < max && t->count > 0 && t->heap[0]->deadline_ms < now_ms) {
		struct zk_expiry_entry *e = t->heap[0];
		ids[n++] = e->id;
		/* Re-arm: comes back if the close never applies. */
		e->deadline_ms = now_ms + e->timeout_ms;
		sift_down(t, 0);
	}
	return n;
}

enum keel_err zk_expiry_rebuild(struct zk_expiry *t, const struct zk_state *st, int64_t now_ms)
{
	clear(t);
	enum keel_err err = keel_hmap_init(&t->by_id, zk_state_session_count(st));
	size_t cursor = 0;
	const struct zk_session *s;
	while (err == KEEL_OK && (s = zk_state_session_next(st, &cursor)) != NULL) {
		err = zk_expiry_add(t, s->id, s->timeout_ms, now_ms);
	}
	return err;
}
