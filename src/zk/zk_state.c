/* zk_state.c — state lifecycle, queries, hashing, memory (see zk_state.h). */
#include "zk/zk_state.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "zk/zk_mutate.h"

#define DEFAULT_MAX_REPLY (64u << 20)

void zk_config_default(struct zk_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->max_packet_size = ZK_DEFAULT_MAX_PACKET;
	cfg->tick_time_ms = 2000;
	cfg->min_session_timeout_ms = 0;
	cfg->max_session_timeout_ms = 0;
	cfg->max_nodes = 0;
	cfg->max_sessions = 0;
	cfg->max_watches_per_conn = 1u << 20;
	cfg->max_reply_size = DEFAULT_MAX_REPLY;
	cfg->container_max_never_used_ms = 0;
	cfg->hash_seed = UINT64_C(0x2545f4914f6cdd1d);
}

/* ---- canned ACLs ---- */

/* perms, "world", "anyone" in jute */
static const uint8_t acl_open_bytes[] = {
	0, 0, 0, 0x1f, 0, 0, 0, 5, 'w', 'o', 'r', 'l', 'd', 0, 0, 0, 6,
	'a', 'n', 'y', 'o', 'n', 'e',
};
static const uint8_t acl_read_bytes[] = {
	0, 0, 0, 0x01, 0, 0, 0, 5, 'w', 'o', 'r', 'l', 'd', 0, 0, 0, 6,
	'a', 'n', 'y', 'o', 'n', 'e',
};

struct zk_acl_vec zk_acl_open_unsafe(void)
{
	struct zk_acl_vec v = {1, acl_open_bytes, sizeof(acl_open_bytes)};
	return v;
}

struct zk_acl_vec zk_acl_read_unsafe(void)
{
	struct zk_acl_vec v = {1, acl_read_bytes, sizeof(acl_read_bytes)};
	return v;
}

/* ---- results ---- */

void zk_result_init(struct zk_result *res, size_t max_reply_size)
{
	memset(res, 0, sizeof(*res));
	keel_wbuf_init_dynamic(&res->body, 256, max_reply_size);
	keel_wbuf_init_dynamic(&res->paths, 256, SIZE_MAX / 2);
}

void zk_result_close(struct zk_result *res)
{
	keel_wbuf_free(&res->body);
	keel_wbuf_free(&res->paths);
	free(res->triggers);
	memset(res, 0, sizeof(*res));
}

void zk_result_reset(struct zk_result *res)
{
	res->kind = 0;
	res->opcode = 0;
	res->session_id = 0;
	res->origin = 0;
	res->xid = 0;
	res->zxid = 0;
	res->err = ZK_OK;
	keel_wbuf_reset(&res->body);
	res->new_session_id = 0;
	res->new_session_timeout_ms = 0;
	memset(res->new_session_passwd, 0, sizeof(res->new_session_passwd));
	res->closed_session_id = 0;
	res->trigger_count = 0;
	keel_wbuf_reset(&res->paths);
}

/* ---- lifecycle ---- */

/* Adds one of the initial nodes: no parent cversion bump, zxid/time 0. */
static enum keel_err add_initial(struct zk_state *st, uint32_t parent, const char *name,
				 struct zk_acl_vec acl, int32_t aversion, uint32_t *id)
{
	uint32_t acl_id = zk_acl_table_intern(&st->acls, acl);
	if (acl_id == ZK_ACL_NONE) {
		return KEEL_NOMEM;
	}
	struct zk_node *n = zk_tree_alloc(&st->tree, name, strlen(name), NULL, 0, false);
	if (n == NULL) {
		zk_acl_table_unref(&st->acls, acl_id);
		return KEEL_NOMEM;
	}
	n->acl = acl_id;
	n->aversion = aversion;
	uint32_t nid = zk_tree_add(&st->tree, parent, n);
	if (nid == ZK_NODE_NONE) {
		zk_tree_free(&st->tree, n);
		zk_acl_table_unref(&st->acls, acl_id);
		return KEEL_NOMEM;
	}
	*id = nid;
	return KEEL_OK;
}

struct digest_walk {
	const struct zk_state *st;
	uint64_t sum;
};

static bool digest_visit(void *ctx, uint32_t id, const uint8_t *path, size_t size, uint32_t depth)
{
	(void)depth;
	struct digest_walk *w = ctx;
	w->sum += zk_mut_node_digest(w->st, zk_bytes_of(path, size), zk_tree_node(&w->st->tree, id));
	return true;
}

static uint64_t nodes_digest(const struct zk_state *st, bool *ok)
{
	struct digest_walk w = {st, 0};
	struct keel_wbuf path;
	keel_wbuf_init_dynamic(&path, 256, SIZE_MAX / 2);
	*ok = zk_tree_walk(&st->tree, ZK_ROOT_ID, &path, digest_visit, &w);
	keel_wbuf_free(&path);
	return w.sum;
}

enum keel_err zk_state_init_bare(struct zk_state *st, const struct zk_config *cfg)
{
	memset(st, 0, sizeof(*st));
	st->config = *cfg;
	enum keel_err err = zk_tree_init(&st->tree, cfg->hash_seed, cfg->max_nodes);
	if (err != KEEL_OK) {
		return err;
	}
	keel_wbuf_init_dynamic(&st->scratch, 256, SIZE_MAX / 2);
	keel_wbuf_init_dynamic(&st->acl_scratch, 256, SIZE_MAX / 2);
	keel_wbuf_init_dynamic(&st->multi, 256, cfg->max_reply_size);
	err = zk_acl_table_init(&st->acls, cfg->hash_seed);
	if (err == KEEL_OK) {
		err = keel_hmap_init(&st->sessions, 64);
	}
	if (err == KEEL_OK) {
		err = keel_hmap_init(&st->special, 16);
	}
	if (err != KEEL_OK) {
		zk_state_close(st);
	}
	return err;
}

uint64_t zk_state_digest_nodes_full(const struct zk_state *st, bool *ok)
{
	return nodes_digest(st, ok);
}

uint64_t zk_state_digest_sessions_full(const struct zk_state *st)
{
	uint64_t sum = 0;
	size_t cursor = 0;
	const struct zk_session *s;
	while ((s = keel_hmap_next(&st->sessions, &cursor)) != NULL) {
		sum += zk_mut_session_digest(s);
	}
	return sum;
}

enum keel_err zk_state_init(struct zk_state *st, const struct zk_config *cfg)
{
	enum keel_err err = zk_state_init_bare(st, cfg);
	if (err != KEEL_OK) {
		return err;
	}
	/* The root shares world:anyone:ALL (ZooKeeper's "-1" ACL). */
	uint32_t root_acl = zk_acl_table_intern(&st->acls, zk_acl_open_unsafe());
	if (root_acl == ZK_ACL_NONE) {
		zk_state_close(st);
		return KEEL_NOMEM;
	}
	zk_tree_node(&st->tree, ZK_ROOT_ID)->acl = root_acl;
	uint32_t zookeeper, quota, config;
	err = add_initial(st, ZK_ROOT_ID, "zookeeper", zk_acl_open_unsafe(), 0, &zookeeper);
	if (err == KEEL_OK) {
		err = add_initial(st, zookeeper, "quota", zk_acl_open_unsafe(), 0, &quota);
	}
	if (err == KEEL_OK) {
		/* ZooKeeper sets the config node's ACL with version -1. */
		err = add_initial(st, zookeeper, "config", zk_acl_read_unsafe(), -1, &config);
	}
	if (err != KEEL_OK) {
		zk_state_close(st);
		return err;
	}
	bool ok;
	st->digest_nodes = nodes_digest(st, &ok);
	if (!ok) {
		zk_state_close(st);
		return KEEL_NOMEM;
	}
	return KEEL_OK;
}

void zk_state_close(struct zk_state *st)
{
	size_t cursor = 0;
	struct zk_session *s;
	while ((s = keel_hmap_next(&st->sessions, &cursor)) != NULL) {
		free(s);
	}
	keel_hmap_close(&st->sessions);
	keel_hmap_close(&st->special);
	zk_tree_close(&st->tree);
	zk_acl_table_close(&st->acls);
	keel_wbuf_free(&st->scratch);
	keel_wbuf_free(&st->acl_scratch);
	keel_wbuf_free(&st->multi);
	free(st->undo);
	memset(st, 0, sizeof(*st));
}

/* ---- queries ---- */

uint32_t zk_state_lookup(const struct zk_state *st, struct zk_bytes path)
{
	if (zk_bytes_is_null(path)) {
		return ZK_NODE_NONE;
	}
	return zk_tree_lookup(&st->tree, (const char *)path.data, (size_t)path.size);
}

void zk_state_stat(const struct zk_state *st, uint32_t id, struct zk_stat *stat)
{
	const struct zk_node *n = zk_tree_node(&st->tree, id);
	bool eph = zk_owner_kind(n->ephemeral_owner) == ZK_KIND_EPHEMERAL;
	uint32_t children = eph ? 0 : n->u.dir.child_count;
	stat->czxid = n->czxid;
	stat->mzxid = n->mzxid;
	stat->ctime = n->ctime;
	stat->mtime = n->mtime;
	stat->version = n->version;
	/* DataNode.copyStat: creates counted twice, minus the children left. */
	stat->cversion = (int32_t)((uint32_t)n->cversion * 2u - children);
	stat->aversion = n->aversion;
	stat->ephemeral_owner = zk_owner_visible(n->ephemeral_owner);
	stat->data_length = (int32_t)n->data_size;
	stat->num_children = (int32_t)children;
	stat->pzxid = n->pzxid;
}

struct zk_acl_vec zk_state_node_acl(const struct zk_state *st, uint32_t id)
{
	return zk_acl_table_get(&st->acls, zk_tree_node(&st->tree, id)->acl);
}

const struct zk_session *zk_state_session(const struct zk_state *st, int64_t session_id)
{
	return zk_mut_session_find(st, session_id);
}

size_t zk_state_session_count(const struct zk_state *st)
{
	return keel_hmap_count(&st->sessions);
}

const struct zk_session *zk_state_session_next(const struct zk_state *st, size_t *cursor)
{
	return keel_hmap_next(&st->sessions, cursor);
}

uint32_t zk_state_node_count(const struct zk_state *st)
{
	return st->tree.count;
}

static uint64_t combine(uint64_t nodes, uint64_t sessions)
{
	return keel_hash_u64(nodes ^ keel_hash_u64(sessions ^ UINT64_C(0x5a4b)));
}

uint64_t zk_state_hash(const struct zk_state *st)
{
	return combine(st->digest_nodes, st->digest_sessions);
}

uint64_t zk_state_hash_full(const struct zk_state *st)
{
	bool ok;
	uint64_t nodes = nodes_digest(st, &ok);
	KEEL_ASSERT(ok);
	return combine(nodes, zk_state_digest_sessions_full(st));
}

void zk_state_memory(const struct zk_state *st, struct zk_memory *mem)
{
	mem->node_count = st->tree.count;
	mem->node_bytes = st->tree.node_bytes;
	mem->tree_bytes = zk_tree_overhead_bytes(&st->tree) + keel_hmap_memory(&st->special);
	mem->acl_bytes = st->acls.bytes + keel_hmap_memory(&st->acls.index) +
			 (size_t)st->acls.capacity * (sizeof(void *) + sizeof(uint32_t));
	mem->session_bytes = keel_hmap_count(&st->sessions) *
				     zk_tree_alloc_size(sizeof(struct zk_session)) +
			     keel_hmap_memory(&st->sessions);
	mem->total_bytes = mem->node_bytes + mem->tree_bytes + mem->acl_bytes + mem->session_bytes;
}
