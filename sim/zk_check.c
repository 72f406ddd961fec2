/*
 * zk_check.c — the checkers of the ZooKeeper workload (zk_sim.h).
 *
 * Each is a pure function of the history (and, for the last two, the final
 * states read through struct simzk_view). They assume what ZooKeeper
 * promises and keel implements, and nothing about how:
 *
 *   fifo        a connection's replies come in request order; a reply
 *               answers a request in flight; the zxids a session sees never
 *               go down (across moves between servers too);
 *   paths       writes are linearizable per path, and so is a read sent
 *               right behind a sync (ZooKeeper's recipe for a fresh read);
 *               every read shows its path as of the read's reply zxid
 *               (plain reads may lag, but never mix states); sequential
 *               names rise with the zxids of their creates;
 *   watch order a watch event reaches its connection before any reply that
 *               shows the change (a reply with zxid >= the change's);
 *   watch lost  ... and it does reach it, if the connection lived to see
 *               such a reply;
 *   ephemerals  a session that was closed, or that a client learned had
 *               expired, is in no server's session table and owns no node;
 *   tree hash   every server applied the same index and has the same tree.
 *
 * A change's zxid is known only for acknowledged writes; writes whose
 * outcome is unknown, and the deletion of ephemerals when a session ends,
 * may happen at any zxid, so the checkers never demand anything of them
 * (they may only excuse).
 *
 * The znode model of the linearizability search (a 64-bit state):
 *	bit 63 exists | bits 48..62 version | bits 32..47 owner | bits 0..31 value
 * where owner indexes the sessions that created ephemerals at the path (0:
 * none) and value is the unique 32-bit value the last write wrote.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "sim/linearize.h"
#include "sim/zk_sim.h"
#include "zk/zk_codes.h"
#include "zk/zk_tree.h"

/* ---- helpers over the history ---- */

static bool is_create(int32_t opcode)
{
	return opcode == ZK_OP_CREATE || opcode == ZK_OP_CREATE2 ||
	       opcode == ZK_OP_CREATE_CONTAINER;
}

static bool answered(const struct simzk_op *o)
{
	return o->status == SIMZK_OK;
}

static bool succeeded(const struct simzk_op *o)
{
	return o->status == SIMZK_OK && o->err == 0;
}

static const char *parent_of(const char *path, char *buf)
{
	snprintf(buf, SIMZK_PATH_MAX, "%s", path);
	char *slash = strrchr(buf, '/');
	if (slash == buf) {
		slash[1] = '\0';
	} else if (slash != NULL) {
		*slash = '\0';
	}
	return buf;
}

/* ---- fifo ---- */

/* REQUEST ops sorted by (a, b): (connection, invoke) or (session, complete). */
struct okey {
	uint64_t a;
	uint64_t b;
	size_t i;
};

static int cmp_okey(const void *x, const void *y)
{
	const struct okey *p = x, *q = y;
	if (p->a != q->a) {
		return p->a < q->a ? -1 : 1;
	}
	return p->b < q->b ? -1 : p->b > q->b;
}

static struct okey *sorted_requests(const struct simzk_history *h, bool by_session, size_t *count)
{
	struct okey *k = calloc(h->op_count + 1, sizeof(*k));
	KEEL_ASSERT(k != NULL);
	size_t n = 0;
	for (size_t i = 0; i < h->op_count; i++) {
		const struct simzk_op *o = &h->ops[i];
		if (o->kind == SIMZK_REQUEST) {
			k[n++] = by_session ? (struct okey){(uint64_t)o->session, o->complete, i}
					    : (struct okey){o->conn, o->invoke, i};
		}
	}
	qsort(k, n, sizeof(*k), cmp_okey);
	*count = n;
	return k;
}

bool simzk_check_fifo(const struct simzk_history *h, char *why, size_t why_size)
{
	if (h->stray_count > 0) {
		const struct simzk_stray *s = &h->strays[0];
		snprintf(why, why_size, "fifo: client %u connection %llu: %s", s->client,
			 (unsigned long long)s->conn, s->what);
		return false;
	}
	size_t n;
	struct okey *idx = sorted_requests(h, false, &n);
	bool ok = true;
	for (size_t i = 1; i < n && ok; i++) {
		const struct simzk_op *prev = &h->ops[idx[i - 1].i];
		const struct simzk_op *o = &h->ops[idx[i].i];
		if (prev->conn != o->conn || !answered(o)) {
			continue;
		}
		if (!answered(prev) || prev->complete > o->complete) {
			snprintf(why, why_size,
				 "fifo: connection %llu answered xid %d (%s) before xid %d (%s), sent "
				 "earlier",
				 (unsigned long long)o->conn, o->xid, zk_op_name(o->opcode), prev->xid,
				 zk_op_name(prev->opcode));
			ok = false;
		}
	}
	free(idx);
	if (!ok) {
		return false;
	}
	idx = sorted_requests(h, true, &n);
	const struct simzk_op *last = NULL;
	for (size_t i = 0; i < n && ok; i++) {
		const struct simzk_op *o = &h->ops[idx[i].i];
		if (!answered(o) || o->session == 0 || o->zxid < 0) {
			continue;
		}
		if (last != NULL && last->session == o->session && o->zxid < last->zxid) {
			snprintf(why, why_size,
				 "fifo: session 0x%llx saw zxid %lld (xid %d %s on server %u) after "
				 "zxid %lld (xid %d %s on server %u)",
				 (unsigned long long)o->session, (long long)o->zxid, o->xid,
				 zk_op_name(o->opcode), o->server, (long long)last->zxid, last->xid,
				 zk_op_name(last->opcode), last->server);
			ok = false;
		}
		last = o;
	}
	free(idx);
	return ok;
}

/* ---- paths: the znode model ---- */

#define ST_EXISTS (1ull << 63)
#define ST_VERSION_SHIFT 48
#define ST_VERSION_MAX 0x7fff
#define ST_OWNER_SHIFT 32

static uint64_t st_make(bool exists, uint32_t version, uint32_t owner, uint32_t value)
{
	if (!exists) {
		return 0;
	}
	return ST_EXISTS | ((uint64_t)(version & ST_VERSION_MAX) << ST_VERSION_SHIFT) |
	       ((uint64_t)(owner & 0xffff) << ST_OWNER_SHIFT) | value;
}

static bool st_exists(uint64_t s)
{
	return (s & ST_EXISTS) != 0;
}

static int32_t st_version(uint64_t s)
{
	return (int32_t)((s >> ST_VERSION_SHIFT) & ST_VERSION_MAX);
}

static uint32_t st_owner(uint64_t s)
{
	return (uint32_t)((s >> ST_OWNER_SHIFT) & 0xffff);
}

static uint32_t st_value(uint64_t s)
{
	return (uint32_t)s;
}

enum zop_kind {
	Z_CREATE = 1,     /* needs absent */
	Z_SET,            /* needs present, version match */
	Z_DELETE,         /* needs present, version match */
	Z_ABSENT,         /* NoNode */
	Z_PRESENT,        /* NodeExists on create */
	Z_BAD_VERSION,    /* present with another version */
	Z_CHECK,          /* present with this version */
	Z_READ,           /* present with version (and value), or absent */
	Z_END_SESSION,    /* deletes the node if this owner holds it */
};

struct zop {
	uint8_t kind;
	bool present;    /* Z_READ */
	bool has_value;  /* Z_READ: getData */
	uint32_t value;
	int32_t version; /* expected, -1 any; Z_READ: seen */
	int32_t result_version; /* Z_SET: the Stat's version, -1 unknown */
	uint32_t owner;
	size_t hist; /* history index, for messages */
};

static bool z_step(void *ctx, const void *op, uint64_t s, uint64_t *next)
{
	(void)ctx;
	const struct zop *z = op;
	bool ex = st_exists(s);
	bool vmatch = z->version < 0 || st_version(s) == z->version;
	switch (z->kind) {
	case Z_CREATE:
		*next = st_make(true, 0, z->owner, z->value);
		return !ex;
	case Z_SET:
		if (!ex || !vmatch || st_version(s) + 1 > ST_VERSION_MAX ||
		    (z->result_version >= 0 && z->result_version != st_version(s) + 1)) {
			return false;
		}
		*next = st_make(true, (uint32_t)st_version(s) + 1, st_owner(s), z->value);
		return true;
	case Z_DELETE:
		*next = 0;
		return ex && vmatch;
	case Z_ABSENT:
		return !ex;
	case Z_PRESENT:
		return ex;
	case Z_BAD_VERSION:
		return ex && st_version(s) != z->version;
	case Z_CHECK:
		return ex && st_version(s) == z->version;
	case Z_READ:
		if (!z->present) {
			return !ex;
		}
		return ex && st_version(s) == z->version &&
		       (!z->has_value || st_value(s) == z->value);
	case Z_END_SESSION:
		if (ex && st_owner(s) == z->owner) {
			*next = 0;
		}
		return true;
	default:
		return false;
	}
}

/* Building the per-path op list. */
struct zlist {
	struct sim_lin_op *lin;
	struct zop *z;
	size_t count;
	size_t cap;
	int64_t owners[64]; /* owner index i+1 -> session */
	uint32_t owner_count;
};

static uint32_t owner_of(struct zlist *l, int64_t session)
{
	for (uint32_t i = 0; i < l->owner_count; i++) {
		if (l->owners[i] == session) {
			return i + 1;
		}
	}
	if (l->owner_count == 64) {
		return 0xffff; /* shared overflow owner: only weakens END_SESSION */
	}
	l->owners[l->owner_count++] = session;
	return l->owner_count;
}

static void zl_add(struct zlist *l, uint64_t invoke, uint64_t response, const struct zop *z)
{
	if (l->count == l->cap) {
		l->cap = l->cap == 0 ? 64 : l->cap * 2;
		l->lin = realloc(l->lin, l->cap * sizeof(*l->lin));
		l->z = realloc(l->z, l->cap * sizeof(*l->z));
		KEEL_ASSERT(l->lin != NULL && l->z != NULL);
	}
	l->z[l->count] = *z;
	l->lin[l->count] = (struct sim_lin_op){invoke, response, NULL};
	l->count++;
}

/* The effect of an acknowledged (err, known) or unknown write on `path`:
 * one model op; false if it says nothing about the path. */
static bool write_zop(int32_t opcode, int32_t err, bool unknown, const char *path, uint64_t value,
		      int32_t version, int32_t flags, const struct zk_stat *stat, uint32_t owner,
		      struct zop *z)
{
	memset(z, 0, sizeof(*z));
	z->version = version;
	z->value = (uint32_t)value;
	z->result_version = -1;
	(void)path;
	if (is_create(opcode)) {
		if (zk_create_mode_sequential(flags)) {
			return false;
		}
		z->version = -1;
		z->owner = zk_create_mode_ephemeral(flags) ? owner : 0;
		z->kind = unknown || err == 0 ? Z_CREATE : err == ZK_NODE_EXISTS ? Z_PRESENT : 0;
	} else if (opcode == ZK_OP_SET_DATA) {
		z->kind = unknown || err == 0	   ? Z_SET
			  : err == ZK_NO_NODE	   ? Z_ABSENT
			  : err == ZK_BAD_VERSION ? Z_BAD_VERSION
						   : 0;
		if (!unknown && err == 0 && stat != NULL) {
			z->result_version = stat->version;
		}
	} else if (opcode == ZK_OP_DELETE) {
		z->kind = unknown || err == 0	   ? Z_DELETE
			  : err == ZK_NO_NODE	   ? Z_ABSENT
			  : err == ZK_BAD_VERSION ? Z_BAD_VERSION
						   : 0;
	} else if (opcode == ZK_OP_CHECK) {
		z->kind = unknown ? 0 : err == 0 ? Z_CHECK : 0;
	}
	return z->kind != 0;
}

/* When did session `s` end at the latest-known start? The ephemerals of a
 * session may go any time after its last successful write was invoked;
 * the end is known (response) when a closeSession was answered or a client
 * was told the session expired. */
static void session_end(const struct simzk_history *h, int64_t s, uint64_t *invoke,
			uint64_t *response)
{
	*invoke = 0;
	*response = SIMZK_TIME_INF;
	for (size_t i = 0; i < h->op_count; i++) {
		const struct simzk_op *o = &h->ops[i];
		/* Only writes: a plain read may be served by a server that has
		 * not applied the session's end yet. */
		bool write = is_create(o->opcode) || o->opcode == ZK_OP_SET_DATA ||
			     o->opcode == ZK_OP_DELETE || o->opcode == ZK_OP_MULTI;
		if (o->kind == SIMZK_REQUEST && o->session == s && succeeded(o) && write &&
		    o->invoke > *invoke) {
			*invoke = o->invoke;
		}
		bool ended = (o->kind == SIMZK_REQUEST && o->opcode == ZK_OP_CLOSE_SESSION &&
			      succeeded(o) && o->session == s) ||
			     (o->kind == SIMZK_CONNECT && answered(o) && o->expired && o->session == s);
		if (ended && o->complete < *response) {
			*response = o->complete;
		}
	}
}

static bool collect_path(const struct simzk_history *h, const char *path, struct zlist *l)
{
	for (size_t i = 0; i < h->op_count; i++) {
		const struct simzk_op *o = &h->ops[i];
		if (o->kind != SIMZK_REQUEST || o->status == SIMZK_PENDING || o->never_applied) {
			continue;
		}
		bool unknown = o->status == SIMZK_UNKNOWN;
		uint64_t resp = unknown ? SIMZK_TIME_INF : o->complete;
		struct zop z;
		if (o->opcode == ZK_OP_MULTI) {
			/* A failed multi changed nothing; an unknown one may have
			 * applied every op or none (each path on its own here). */
			if (!unknown && o->err != 0) {
				continue;
			}
			for (uint32_t k = 0; k < o->sub_count; k++) {
				const struct simzk_sub *s = &o->sub[k];
				if (strcmp(s->path, path) == 0 &&
				    write_zop(s->opcode, 0, unknown, path, s->value, s->version,
					      s->flags, NULL, 0, &z)) {
					z.hist = i;
					zl_add(l, o->invoke, resp, &z);
				}
			}
			continue;
		}
		if (strcmp(o->path, path) != 0) {
			continue;
		}
		uint32_t owner = is_create(o->opcode) && zk_create_mode_ephemeral(o->flags)
					 ? owner_of(l, o->session)
					 : 0;
		if (write_zop(o->opcode, o->err, unknown, path, o->value, o->version, o->flags,
			      &o->stat, owner, &z)) {
			z.hist = i;
			zl_add(l, o->invoke, resp, &z);
			continue;
		}
		/* a read right behind a sync that was answered */
		bool read = o->opcode == ZK_OP_GET_DATA || o->opcode == ZK_OP_EXISTS;
		if (!read || unknown || o->after_sync == SIMZK_NONE ||
		    !succeeded(&h->ops[o->after_sync]) || (o->err != 0 && o->err != ZK_NO_NODE)) {
			continue;
		}
		memset(&z, 0, sizeof(z));
		z.kind = Z_READ;
		z.present = o->err == 0;
		z.has_value = o->opcode == ZK_OP_GET_DATA;
		z.value = (uint32_t)o->read_value;
		z.version = o->stat.version;
		z.hist = i;
		zl_add(l, h->ops[o->after_sync].invoke, o->complete, &z);
	}
	for (uint32_t k = 0; k < l->owner_count; k++) {
		struct zop z;
		memset(&z, 0, sizeof(z));
		z.kind = Z_END_SESSION;
		z.owner = k + 1;
		z.hist = SIMZK_NONE;
		uint64_t inv, resp;
		session_end(h, l->owners[k], &inv, &resp);
		zl_add(l, inv, resp, &z);
	}
	for (size_t i = 0; i < l->count; i++) {
		l->lin[i].op = &l->z[i];
	}
	return true;
}

/* The writer of `value` at `path`: its history index and sub-op, or NONE. */
struct writer {
	size_t hist;
	const struct simzk_sub *sub;
};

static bool find_writer(const struct simzk_history *h, const char *path, uint64_t value,
			struct writer *w)
{
	for (size_t i = 0; i < h->op_count; i++) {
		const struct simzk_op *o = &h->ops[i];
		bool writes = is_create(o->opcode) || o->opcode == ZK_OP_SET_DATA ||
			      o->opcode == ZK_OP_MULTI;
		if (o->kind != SIMZK_REQUEST || !writes) {
			continue;
		}
		if (o->value == value && strcmp(o->path, path) == 0) {
			*w = (struct writer){i, NULL};
			return true;
		}
		for (uint32_t k = 0; k < o->sub_count; k++) {
			if (o->sub[k].value == value && strcmp(o->sub[k].path, path) == 0) {
				*w = (struct writer){i, &o->sub[k]};
				return true;
			}
		}
	}
	return false;
}

/* A known change of `path`'s data or existence at a zxid in (lo, hi]. */
static const struct simzk_op *known_change_between(const struct simzk_history *h,
						   const char *path, int64_t lo, int64_t hi)
{
	for (size_t i = 0; i < h->op_count; i++) {
		const struct simzk_op *o = &h->ops[i];
		if (o->kind != SIMZK_REQUEST || !succeeded(o) || o->zxid <= lo || o->zxid > hi) {
			continue;
		}
		bool hit = strcmp(o->path, path) == 0 &&
			   (is_create(o->opcode) || o->opcode == ZK_OP_SET_DATA ||
			    o->opcode == ZK_OP_DELETE);
		for (uint32_t k = 0; k < o->sub_count && o->opcode == ZK_OP_MULTI; k++) {
			hit = hit || (strcmp(o->sub[k].path, path) == 0 &&
				      o->sub[k].opcode != ZK_OP_CHECK);
		}
		if (hit) {
			return o;
		}
	}
	return NULL;
}

/* Every getData that returned data shows the path as of its reply zxid. */
static bool reads_at_zxid(const struct simzk_history *h, const char *path, char *why,
			  size_t why_size)
{
	for (size_t i = 0; i < h->op_count; i++) {
		const struct simzk_op *r = &h->ops[i];
		if (r->kind != SIMZK_REQUEST || r->opcode != ZK_OP_GET_DATA || !succeeded(r) ||
		    strcmp(r->path, path) != 0) {
			continue;
		}
		struct writer w;
		if (!find_writer(h, path, r->read_value, &w)) {
			snprintf(why, why_size, "paths: %s: xid %d read value %llu, which no write wrote",
				 path, r->xid, (unsigned long long)r->read_value);
			return false;
		}
		const struct simzk_op *wo = &h->ops[w.hist];
		if (wo->status != SIMZK_OK) {
			continue; /* written by a write of unknown outcome */
		}
		bool ok = wo->err == 0 && (w.sub == NULL || w.sub->err == 0);
		if (!ok) {
			snprintf(why, why_size,
				 "paths: %s: xid %d read value %llu, written by a %s that failed (%s)",
				 path, r->xid, (unsigned long long)r->read_value,
				 zk_op_name(wo->opcode), zk_err_name(wo->err));
			return false;
		}
		if (wo->zxid > r->zxid) {
			snprintf(why, why_size,
				 "paths: %s: a read at zxid %lld (client %u server %u) saw the write "
				 "of zxid %lld",
				 path, (long long)r->zxid, r->client, r->server, (long long)wo->zxid);
			return false;
		}
		const struct simzk_op *later = known_change_between(h, path, wo->zxid, r->zxid);
		if (later != NULL) {
			snprintf(why, why_size,
				 "paths: %s: a read at zxid %lld (client %u server %u) saw the write "
				 "of zxid %lld but not the %s of zxid %lld",
				 path, (long long)r->zxid, r->client, r->server, (long long)wo->zxid,
				 zk_op_name(later->opcode), (long long)later->zxid);
			return false;
		}
	}
	return true;
}

/* Sequential names under /s rise with the zxids of their creates. */
static bool sequence_rises(const struct simzk_history *h, char *why, size_t why_size)
{
	/* Every pair of acknowledged sequential creates: the later zxid has
	 * the higher number. */
	for (size_t i = 0; i < h->op_count; i++) {
		const struct simzk_op *a = &h->ops[i];
		if (a->kind != SIMZK_REQUEST || !is_create(a->opcode) || !succeeded(a) ||
		    !zk_create_mode_sequential(a->flags)) {
			continue;
		}
		const char *dash = strrchr(a->created, '-');
		long seq = dash != NULL ? strtol(dash + 1, NULL, 10) : -1;
		for (size_t j = 0; j < i; j++) {
			const struct simzk_op *b = &h->ops[j];
			if (b->kind != SIMZK_REQUEST || !is_create(b->opcode) || !succeeded(b) ||
			    !zk_create_mode_sequential(b->flags)) {
				continue;
			}
			const char *bd = strrchr(b->created, '-');
			long bseq = bd != NULL ? strtol(bd + 1, NULL, 10) : -1;
			if ((b->zxid < a->zxid) != (bseq < seq) || bseq == seq) {
				snprintf(why, why_size,
					 "paths: sequential %s at zxid %lld and %s at zxid %lld",
					 b->created, (long long)b->zxid, a->created,
					 (long long)a->zxid);
				return false;
			}
		}
	}
	return true;
}

bool simzk_check_paths(const struct simzk_history *h, char *why, size_t why_size)
{
	static const char *const dirs[] = {"/w", "/e"};
	for (int d = 0; d < 2; d++) {
		for (unsigned k = 0; k < 10; k++) {
			char path[SIMZK_PATH_MAX];
			snprintf(path, sizeof(path), "%s/k%u", dirs[d], k);
			struct zlist l;
			memset(&l, 0, sizeof(l));
			collect_path(h, path, &l);
			enum sim_lin_verdict v =
				l.count == 0 ? SIM_LIN_OK : sim_lin_search(l.lin, l.count, 0, z_step, NULL);
			free(l.lin);
			free(l.z);
			if (v != SIM_LIN_OK) {
				snprintf(why, why_size, "paths: %s: %zu ops %s", path, l.count,
					 v == SIM_LIN_GAVE_UP ? "too expensive to check (gave up)"
							      : "are not linearizable");
				return false;
			}
			if (!reads_at_zxid(h, path, why, why_size)) {
				return false;
			}
		}
	}
	return sequence_rises(h, why, why_size);
}

/* ---- watches ---- */

struct change {
	char path[SIMZK_PATH_MAX];
	int32_t type;
	int64_t zxid;
};

struct changes {
	struct change *c;
	size_t count;
	size_t cap;
};

static void ch_add(struct changes *cs, const char *path, int32_t type, int64_t zxid)
{
	if (cs->count == cs->cap) {
		cs->cap = cs->cap == 0 ? 256 : cs->cap * 2;
		cs->c = realloc(cs->c, cs->cap * sizeof(*cs->c));
		KEEL_ASSERT(cs->c != NULL);
	}
	struct change *c = &cs->c[cs->count++];
	snprintf(c->path, sizeof(c->path), "%s", path);
	c->type = type;
	c->zxid = zxid;
}

static void ch_write(struct changes *cs, int32_t opcode, const char *path, int64_t zxid)
{
	char parent[SIMZK_PATH_MAX];
	if (is_create(opcode)) {
		ch_add(cs, path, ZK_EVENT_NODE_CREATED, zxid);
		ch_add(cs, parent_of(path, parent), ZK_EVENT_NODE_CHILDREN_CHANGED, zxid);
	} else if (opcode == ZK_OP_SET_DATA) {
		ch_add(cs, path, ZK_EVENT_NODE_DATA_CHANGED, zxid);
	} else if (opcode == ZK_OP_DELETE) {
		ch_add(cs, path, ZK_EVENT_NODE_DELETED, zxid);
		ch_add(cs, parent_of(path, parent), ZK_EVENT_NODE_CHILDREN_CHANGED, zxid);
	}
}

static int cmp_change(const void *a, const void *b)
{
	const struct change *x = a, *y = b;
	return x->zxid < y->zxid ? -1 : x->zxid > y->zxid;
}

/* Known changes (acknowledged writes), in zxid order. */
static void known_changes(const struct simzk_history *h, struct changes *cs)
{
	memset(cs, 0, sizeof(*cs));
	for (size_t i = 0; i < h->op_count; i++) {
		const struct simzk_op *o = &h->ops[i];
		if (o->kind != SIMZK_REQUEST || !succeeded(o)) {
			continue;
		}
		if (o->opcode == ZK_OP_MULTI) {
			for (uint32_t k = 0; k < o->sub_count; k++) {
				ch_write(cs, o->sub[k].opcode, o->sub[k].path, o->zxid);
			}
		} else {
			ch_write(cs, o->opcode, o->created[0] != '\0' ? o->created : o->path,
				 o->zxid);
		}
	}
	if (cs->count > 0) {
		qsort(cs->c, cs->count, sizeof(*cs->c), cmp_change);
	}
}

/* The first reply on `conn` completed after `after` with zxid >= zxid. */
static const struct simzk_op *first_reply_seeing(const struct simzk_history *h, uint64_t conn,
						 uint64_t after, int64_t zxid)
{
	const struct simzk_op *best = NULL;
	for (size_t i = 0; i < h->op_count; i++) {
		const struct simzk_op *o = &h->ops[i];
		if (o->conn == conn && o->kind == SIMZK_REQUEST && answered(o) &&
		    o->complete > after && o->zxid >= zxid &&
		    (best == NULL || o->complete < best->complete)) {
			best = o;
		}
	}
	return best;
}

static bool type_in(int32_t type, const int32_t *types, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (types[i] == type) {
			return true;
		}
	}
	return false;
}

/* Events on conn for path with a type in types, at in (lo, hi). */
static size_t events_between(const struct simzk_history *h, uint64_t conn, const char *path,
			     const int32_t *types, size_t ntypes, uint64_t lo, uint64_t hi)
{
	size_t n = 0;
	for (size_t i = 0; i < h->event_count; i++) {
		const struct simzk_event *e = &h->events[i];
		if (e->conn == conn && e->at > lo && e->at < hi && strcmp(e->path, path) == 0 &&
		    type_in(e->type, types, ntypes)) {
			n++;
		}
	}
	return n;
}

enum watch_fault { WF_NONE, WF_LATE, WF_LOST };

/* A watch registration: what a read with a watch, an addWatch or a
 * setWatches asked for. Changes after `zxid` must be notified; its events
 * come after tick `after`. */
enum reg_kind { REG_DATA, REG_CHILD, REG_PERSISTENT, REG_RECURSIVE };

struct reg {
	enum reg_kind kind;
	uint64_t conn;
	uint32_t server;
	const char *path;
	int64_t zxid;
	uint64_t after;
	int32_t xid;
	int32_t opcode;
};

static enum watch_fault one_shot(const struct simzk_history *h, const struct changes *cs,
				 const struct reg *r, char *why, size_t why_size)
{
	static const int32_t data_types[] = {ZK_EVENT_NODE_CREATED, ZK_EVENT_NODE_DELETED,
					     ZK_EVENT_NODE_DATA_CHANGED};
	static const int32_t child_types[] = {ZK_EVENT_NODE_CHILDREN_CHANGED,
					      ZK_EVENT_NODE_DELETED};
	bool child = r->kind == REG_CHILD;
	const int32_t *types = child ? child_types : data_types;
	size_t ntypes = child ? 2 : 3;
	const struct change *first = NULL;
	for (size_t i = 0; i < cs->count && first == NULL; i++) {
		const struct change *c = &cs->c[i];
		if (c->zxid > r->zxid && strcmp(c->path, r->path) == 0 &&
		    type_in(c->type, types, ntypes)) {
			first = c;
		}
	}
	if (first == NULL) {
		return WF_NONE;
	}
	const struct simzk_op *d = first_reply_seeing(h, r->conn, r->after, first->zxid);
	if (d == NULL) {
		return WF_NONE; /* the connection ended before it could show the change */
	}
	if (events_between(h, r->conn, r->path, types, ntypes, r->after, d->complete) > 0) {
		return WF_NONE;
	}
	bool late =
		events_between(h, r->conn, r->path, types, ntypes, r->after, SIMZK_TIME_INF) > 0;
	snprintf(why, why_size,
		 "%s: connection %llu (server %u) watched %s (%s xid %d, after zxid %lld); the "
		 "change at zxid %lld %s its reply to xid %d %s (zxid %lld)",
		 late ? "watch order" : "watch lost", (unsigned long long)r->conn, r->server, r->path,
		 zk_op_name(r->opcode), r->xid, (long long)r->zxid, (long long)first->zxid,
		 late ? "was notified only after" : "was never notified, not even by", d->xid,
		 zk_op_name(d->opcode), (long long)d->zxid);
	return late ? WF_LATE : WF_LOST;
}

static bool under(const char *path, const char *root)
{
	size_t n = strlen(root);
	return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static enum watch_fault recursive(const struct simzk_history *h, const struct changes *cs,
				  const struct reg *r, char *why, size_t why_size)
{
	/* Only changes up to the last zxid a reply on the connection showed
	 * can be demanded. */
	int64_t last_seen = -1;
	for (size_t i = 0; i < h->op_count; i++) {
		const struct simzk_op *o = &h->ops[i];
		if (o->conn == r->conn && o->kind == SIMZK_REQUEST && answered(o) &&
		    o->complete > r->after && o->zxid > last_seen) {
			last_seen = o->zxid;
		}
	}
	for (size_t i = 0; i < cs->count && cs->c[i].zxid <= last_seen; i++) {
		const struct change *c = &cs->c[i];
		bool watched = r->kind == REG_PERSISTENT
				       ? strcmp(c->path, r->path) == 0
				       : c->type != ZK_EVENT_NODE_CHILDREN_CHANGED && under(c->path, r->path);
		if (c->zxid <= r->zxid || !watched) {
			continue;
		}
		const struct simzk_op *d = first_reply_seeing(h, r->conn, r->after, c->zxid);
		KEEL_ASSERT(d != NULL);
		/* Every change of (path, type) up to this one needs its event. */
		size_t need = 0;
		for (size_t j = 0; j <= i; j++) {
			need += cs->c[j].zxid > r->zxid && cs->c[j].type == c->type &&
				strcmp(cs->c[j].path, c->path) == 0;
		}
		size_t got =
			events_between(h, r->conn, c->path, &c->type, 1, r->after, d->complete);
		if (got >= need) {
			continue;
		}
		size_t total =
			events_between(h, r->conn, c->path, &c->type, 1, r->after, SIMZK_TIME_INF);
		bool late = total >= need;
		snprintf(why, why_size,
			 "%s: connection %llu (server %u) watches %s %s (%s xid %d, after "
			 "zxid %lld): %zu of %zu events (type %d) for %s up to zxid %lld came before "
			 "its reply to xid %d (zxid %lld)",
			 late ? "watch order" : "watch lost", (unsigned long long)r->conn, r->server,
			 r->path, r->kind == REG_PERSISTENT ? "persistently" : "recursively",
			 zk_op_name(r->opcode), r->xid, (long long)r->zxid, got, need,
			 c->type, c->path, (long long)c->zxid, d->xid, (long long)d->zxid);
		return late ? WF_LATE : WF_LOST;
	}
	return WF_NONE;
}

static enum watch_fault check_reg(const struct simzk_history *h, const struct changes *cs,
				  const struct reg *r, char *why, size_t why_size)
{
	return r->kind == REG_RECURSIVE || r->kind == REG_PERSISTENT
		       ? recursive(h, cs, r, why, why_size)
		       : one_shot(h, cs, r, why, why_size);
}

/* The registrations a setWatches(2) made: data and child watches are owed
 * the changes after the client's last zxid (the server fires those at
 * once, as catch-up events before its reply); exist and persistent watches
 * only those after the reply. */
static enum watch_fault check_set_watches(const struct simzk_history *h,
					  const struct changes *cs, const struct simzk_op *o,
					  char *why, size_t why_size)
{
	for (int i = 0; i < SIMZK_WATCHABLE; i++) {
		struct reg r = {REG_DATA,	  o->conn, o->server, simzk_path_name(i),
				o->relative_zxid, o->invoke, o->xid,	  o->opcode};
		uint16_t bit = (uint16_t)(1u << i);
		enum watch_fault f = WF_NONE;
		if ((o->sw_data & bit) != 0) {
			f = check_reg(h, cs, &r, why, why_size);
		}
		if (f == WF_NONE && (o->sw_exist & bit) != 0) {
			/* An exist watch fires NodeCreated only if the node is
			 * there when the server reads the request: one created and
			 * deleted since the last zxid goes unnoticed (ZooKeeper
			 * too), so only changes after the reply are owed. */
			r.zxid = o->zxid;
			f = check_reg(h, cs, &r, why, why_size);
			r.zxid = o->relative_zxid;
		}
		if (f == WF_NONE && (o->sw_child & bit) != 0) {
			r.kind = REG_CHILD;
			f = check_reg(h, cs, &r, why, why_size);
		}
		r.zxid = o->zxid;
		r.after = o->complete;
		if (f == WF_NONE && (o->sw_persistent & bit) != 0) {
			r.kind = REG_PERSISTENT;
			f = check_reg(h, cs, &r, why, why_size);
		}
		if (f == WF_NONE && (o->sw_recursive & bit) != 0) {
			r.kind = REG_RECURSIVE;
			f = check_reg(h, cs, &r, why, why_size);
		}
		if (f != WF_NONE) {
			return f;
		}
	}
	return WF_NONE;
}

static bool check_watches(const struct simzk_history *h, enum watch_fault wanted, char *why,
			  size_t why_size)
{
	struct changes cs;
	known_changes(h, &cs);
	bool ok = true;
	for (size_t i = 0; i < h->op_count && ok; i++) {
		const struct simzk_op *o = &h->ops[i];
		if (o->kind != SIMZK_REQUEST || !answered(o)) {
			continue;
		}
		struct reg r = {REG_DATA, o->conn,     o->server, o->path,
				o->zxid,  o->complete, o->xid,	  o->opcode};
		enum watch_fault f = WF_NONE;
		char msg[512];
		if ((o->opcode == ZK_OP_GET_DATA && o->watch && o->err == 0) ||
		    (o->opcode == ZK_OP_EXISTS && o->watch &&
		     (o->err == 0 || o->err == ZK_NO_NODE))) {
			f = check_reg(h, &cs, &r, msg, sizeof(msg));
		} else if (o->opcode == ZK_OP_GET_CHILDREN && o->watch && o->err == 0) {
			r.kind = REG_CHILD;
			f = check_reg(h, &cs, &r, msg, sizeof(msg));
		} else if (o->opcode == ZK_OP_ADD_WATCH && o->err == 0) {
			r.kind = o->mode == ZK_ADD_WATCH_PERSISTENT ? REG_PERSISTENT : REG_RECURSIVE;
			f = check_reg(h, &cs, &r, msg, sizeof(msg));
		} else if ((o->opcode == ZK_OP_SET_WATCHES || o->opcode == ZK_OP_SET_WATCHES2) &&
			   o->err == 0) {
			f = check_set_watches(h, &cs, o, msg, sizeof(msg));
		}
		if (f == wanted) {
			snprintf(why, why_size, "%s", msg);
			ok = false;
		}
	}
	free(cs.c);
	return ok;
}

bool simzk_check_watch_order(const struct simzk_history *h, char *why, size_t why_size)
{
	return check_watches(h, WF_LATE, why, why_size);
}

bool simzk_check_watch_lost(const struct simzk_history *h, char *why, size_t why_size)
{
	return check_watches(h, WF_LOST, why, why_size);
}

/* ---- ephemerals ---- */

struct eph_walk {
	const struct zk_state *st;
	const int64_t *ended;
	size_t count;
	char *found;
	size_t found_size;
	bool hit;
};

static bool ended_has(const int64_t *ended, size_t n, int64_t s)
{
	for (size_t i = 0; i < n; i++) {
		if (ended[i] == s) {
			return true;
		}
	}
	return false;
}

static bool eph_visit(void *ctx, uint32_t id, const uint8_t *path, size_t path_size,
		      uint32_t depth)
{
	(void)depth;
	struct eph_walk *w = ctx;
	const struct zk_node *n = zk_tree_node(&w->st->tree, id);
	if (zk_owner_kind(n->ephemeral_owner) == ZK_KIND_EPHEMERAL &&
	    ended_has(w->ended, w->count, n->ephemeral_owner)) {
		snprintf(w->found, w->found_size, "%.*s of session 0x%llx", (int)path_size,
			 (const char *)path, (unsigned long long)n->ephemeral_owner);
		w->hit = true;
		return false;
	}
	return true;
}

bool simzk_check_ephemerals(const struct simzk_history *h, const struct simzk_view *v, char *why,
			    size_t why_size)
{
	int64_t *ended = calloc(h->op_count + 1, sizeof(*ended));
	KEEL_ASSERT(ended != NULL);
	size_t n = 0;
	for (size_t i = 0; i < h->op_count; i++) {
		const struct simzk_op *o = &h->ops[i];
		bool closed = o->kind == SIMZK_REQUEST && o->opcode == ZK_OP_CLOSE_SESSION &&
			      succeeded(o);
		bool expired = (o->kind == SIMZK_CONNECT || o->kind == SIMZK_EXPIRE) &&
			       answered(o) && o->expired;
		if ((closed || expired) && o->session != 0 && !ended_has(ended, n, o->session)) {
			ended[n++] = o->session;
		}
	}
	bool ok = true;
	for (uint32_t s = 0; s < v->servers && ok; s++) {
		const struct zk_state *st = v->state(v->ctx, s);
		if (st == NULL) {
			continue;
		}
		for (size_t i = 0; i < n && ok; i++) {
			if (zk_state_session(st, ended[i]) != NULL) {
				snprintf(why, why_size,
					 "ephemerals: session 0x%llx ended but server %u still has it",
					 (unsigned long long)ended[i], s);
				ok = false;
			}
		}
		char found[128] = "";
		struct eph_walk w = {st, ended, n, found, sizeof(found), false};
		struct keel_wbuf path;
		keel_wbuf_init_dynamic(&path, 64, 1u << 20);
		zk_tree_walk(&st->tree, 0, &path, eph_visit, &w);
		keel_wbuf_free(&path);
		if (ok && w.hit) {
			snprintf(why, why_size, "ephemerals: server %u still holds %s, which ended", s,
				 found);
			ok = false;
		}
	}
	free(ended);
	return ok;
}

/* ---- tree hash ---- */

bool simzk_check_tree_hash(const struct simzk_view *v, char *why, size_t why_size)
{
	bool have = false;
	uint64_t index = 0, hash = 0;
	uint32_t first = 0;
	for (uint32_t s = 0; s < v->servers; s++) {
		const struct zk_state *st = v->state(v->ctx, s);
		if (st == NULL) {
			continue;
		}
		uint64_t full = zk_state_hash_full(st);
		if (full != zk_state_hash(st)) {
			snprintf(why, why_size,
				 "tree hash: server %u's incremental hash %016llx differs from its "
				 "tree's %016llx",
				 s, (unsigned long long)zk_state_hash(st), (unsigned long long)full);
			return false;
		}
		uint64_t applied = v->applied_index(v->ctx, s);
		if (!have) {
			have = true;
			index = applied;
			hash = full;
			first = s;
			continue;
		}
		if (applied != index || full != hash) {
			snprintf(why, why_size,
				 "tree hash: server %u at index %llu has %016llx, server %u at index "
				 "%llu has %016llx",
				 first, (unsigned long long)index, (unsigned long long)hash, s,
				 (unsigned long long)applied, (unsigned long long)full);
			return false;
		}
	}
	return true;
}

bool simzk_check_all(const struct simzk_history *h, const struct simzk_view *v, char *why,
		     size_t why_size)
{
	return simzk_check_fifo(h, why, why_size) && simzk_check_paths(h, why, why_size) &&
	       simzk_check_watch_order(h, why, why_size) &&
	       simzk_check_watch_lost(h, why, why_size) &&
	       simzk_check_ephemerals(h, v, why, why_size) && simzk_check_tree_hash(v, why, why_size);
}
