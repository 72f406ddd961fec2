/* zkview.c — the image as Kafka's ZooKeeper-mode znodes (see zkview.h). */
#include "meta/zkview.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"
#include "meta/fmt.h"
#include "meta/json.h"

#define PATH_MAX_LEN 512

void meta_zk_ops_init(struct meta_zk_ops *ops)
{
	memset(ops, 0, sizeof(*ops));
	keel_arena_init(&ops->arena, 16 * 1024);
}

void meta_zk_ops_reset(struct meta_zk_ops *ops)
{
	ops->count = 0;
	keel_arena_reset(&ops->arena);
}

void meta_zk_ops_close(struct meta_zk_ops *ops)
{
	free(ops->items);
	keel_arena_close(&ops->arena);
	memset(ops, 0, sizeof(*ops));
}

/* One view computation: the op list plus a set of ops already emitted, so
 * that an entity touched several times in a batch yields one op. */
struct view {
	struct meta_zk_ops *ops;
	struct keel_hmap seen; /* items: indexes+1 into ops->items */
	struct keel_wbuf data; /* scratch for JSON */
	enum keel_err err;
	bool reassignments_changed; /* /admin/reassign_partitions to redo */
};

static uint64_t op_hash(uint8_t type, const char *path)
{
	return keel_hash_bytes(path, strlen(path), type);
}

struct op_key {
	struct meta_zk_ops *ops;
	uint8_t type;
	const char *path;
};

static bool op_eq(const void *item, const void *key)
{
	const struct op_key *k = key;
	const struct meta_zk_op *op = &k->ops->items[(uintptr_t)item - 1];
	return op->type == k->type && strcmp(op->path, k->path) == 0;
}

static void emit(struct view *v, uint8_t type, const char *path, const void *data, size_t size)
{
	if (v->err != KEEL_OK) {
		return;
	}
	struct meta_zk_ops *ops = v->ops;
	uint64_t h = op_hash(type, path);
	struct op_key key = {ops, type, path};
	if (keel_hmap_find(&v->seen, h, op_eq, &key) != NULL) {
		return;
	}
	if (ops->count == ops->capacity) {
		uint32_t cap = ops->capacity == 0 ? 64 : ops->capacity * 2;
		struct meta_zk_op *items = realloc(ops->items, (size_t)cap * sizeof(*items));
		if (items == NULL) {
			v->err = KEEL_NOMEM;
			return;
		}
		ops->items = items;
		ops->capacity = cap;
	}
	struct meta_zk_op *op = &ops->items[ops->count];
	op->type = type;
	op->path = keel_arena_dup(&ops->arena, path, strlen(path) + 1);
	op->data = size > 0 ? keel_arena_dup(&ops->arena, data, size) : (const uint8_t *)"";
	op->size = size;
	if (op->path == NULL || op->data == NULL) {
		v->err = KEEL_NOMEM;
		return;
	}
	ops->count++;
	if (keel_hmap_insert(&v->seen, h, (void *)(uintptr_t)ops->count) != KEEL_OK) {
		v->err = KEEL_NOMEM;
	}
}

static void put_empty(struct view *v, const char *path)
{
	emit(v, META_ZK_PUT, path, NULL, 0);
}

/* Emits a PUT of the JSON now in v->data. */
static void put_json(struct view *v, const char *path)
{
	if (!keel_wbuf_ok(&v->data)) {
		v->err = KEEL_NOMEM;
		return;
	}
	emit(v, META_ZK_PUT, path, v->data.data, v->data.size);
}

static struct meta_json *json_begin(struct view *v, struct meta_json *j)
{
	keel_wbuf_reset(&v->data);
	meta_json_init(j, &v->data);
	return j;
}

/* Builds a path into `buf` from up to four parts ("/a", name, ...). */
static const char *path_of(char *buf, const char *a, const char *b, const char *c,
			   const char *d)
{
	struct meta_fmt f;
	meta_fmt_init(&f, buf, PATH_MAX_LEN);
	meta_fmt_str(&f, a);
	if (b != NULL) {
		meta_fmt_str(&f, b);
	}
	if (c != NULL) {
		meta_fmt_str(&f, c);
	}
	if (d != NULL) {
		meta_fmt_str(&f, d);
	}
	KEEL_ASSERT(!f.truncated);
	return buf;
}

static void int_text(char *buf, size_t size, int64_t v)
{
	struct meta_fmt f;
	meta_fmt_init(&f, buf, size);
	meta_fmt_i64(&f, v);
}

/* ---- /controller ---- */

/* keel's controller is a server (the Raft leader), not a broker, and server
 * ids share their numbers with broker ids: "brokerid" holding the server id
 * would send Kafka tools to an unrelated broker 1. So /controller has the
 * shape a KRaft controller writes there (version 2, kraftControllerEpoch)
 * with "brokerid": -1 (no broker is the controller), and names the server
 * in "keel_controller_id". */
static void put_controller(struct view *v, const struct meta_image *img)
{
	if (img->controller_id < 0) {
		return;
	}
	char ts[24];
	int_text(ts, sizeof(ts), img->controller_timestamp_ms);
	struct meta_json j;
	json_begin(v, &j);
	meta_json_begin_object(&j);
	meta_json_key(&j, "version");
	meta_json_i64(&j, 2);
	meta_json_key(&j, "brokerid");
	meta_json_i64(&j, -1);
	meta_json_key(&j, "timestamp");
	meta_json_str(&j, ts);
	meta_json_key(&j, "kraftControllerEpoch");
	meta_json_i64(&j, img->controller_epoch);
	meta_json_key(&j, "keel_controller_id");
	meta_json_i64(&j, img->controller_id);
	meta_json_end_object(&j);
	put_json(v, "/controller");
	char epoch[24];
	int_text(epoch, sizeof(epoch), img->controller_epoch);
	emit(v, META_ZK_PUT, "/controller_epoch", epoch, strlen(epoch));
}

/* ---- /brokers/ids/N ---- */

static const char *protocol_name(int16_t p)
{
	static const char *const names[] = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"};
	return p >= 0 && p <= META_SEC_SASL_SSL ? names[p] : "PLAINTEXT";
}

static void endpoint_uri(char *buf, size_t size, const struct meta_endpoint *e)
{
	struct meta_fmt f;
	meta_fmt_init(&f, buf, size);
	meta_fmt_str(&f, e->name);
	meta_fmt_str(&f, "://");
	bool v6 = strchr(e->host, ':') != NULL;
	meta_fmt_str(&f, v6 ? "[" : "");
	meta_fmt_str(&f, e->host);
	meta_fmt_str(&f, v6 ? "]:" : ":");
	meta_fmt_u64(&f, e->port);
}

static void broker_json(struct view *v, const struct meta_broker *b)
{
	/* Kafka fills host/port from a PLAINTEXT endpoint, if there is one. */
	const struct meta_endpoint *plain = NULL;
	for (uint32_t i = 0; i < b->endpoint_count && plain == NULL; i++) {
		if (b->endpoints[i].security_protocol == META_SEC_PLAINTEXT) {
			plain = &b->endpoints[i];
		}
	}
	char ts[24];
	int_text(ts, sizeof(ts), b->registered_timestamp_ms);
	struct meta_json j;
	json_begin(v, &j);
	meta_json_begin_object(&j);
	meta_json_key(&j, "version");
	meta_json_i64(&j, 5);
	meta_json_key(&j, "host");
	if (plain != NULL) {
		meta_json_str(&j, plain->host);
	} else {
		meta_json_null(&j);
	}
	meta_json_key(&j, "port");
	meta_json_i64(&j, plain != NULL ? plain->port : -1);
	meta_json_key(&j, "jmx_port");
	meta_json_i64(&j, -1);
	meta_json_key(&j, "timestamp");
	meta_json_str(&j, ts);
	meta_json_key(&j, "endpoints");
	meta_json_begin_array(&j);
	for (uint32_t i = 0; i < b->endpoint_count; i++) {
		char uri[600];
		endpoint_uri(uri, sizeof(uri), &b->endpoints[i]);
		meta_json_str(&j, uri);
	}
	meta_json_end_array(&j);
	meta_json_key(&j, "listener_security_protocol_map");
	meta_json_begin_object(&j);
	for (uint32_t i = 0; i < b->endpoint_count; i++) {
		meta_json_key(&j, b->endpoints[i].name);
		meta_json_str(&j, protocol_name(b->endpoints[i].security_protocol));
	}
	meta_json_end_object(&j);
	if (b->rack != NULL) {
		meta_json_key(&j, "rack");
		meta_json_str(&j, b->rack);
	}
	meta_json_key(&j, "features");
	meta_json_begin_object(&j);
	meta_json_end_object(&j);
	meta_json_key(&j, "epoch");
	meta_json_i64(&j, b->epoch);
	meta_json_end_object(&j);
}

static void broker_znode(struct view *v, const struct meta_image *img, int32_t id)
{
	char idtext[16];
	int_text(idtext, sizeof(idtext), id);
	char path[PATH_MAX_LEN];
	path_of(path, "/brokers/ids/", idtext, NULL, NULL);
	const struct meta_broker *b = meta_image_broker(img, id);
	if (b == NULL || b->fenced) {
		emit(v, META_ZK_DELETE, path, NULL, 0);
		return;
	}
	broker_json(v, b);
	put_json(v, path);
}

/* ---- /brokers/topics/T and its partitions ---- */

static void id_array(struct meta_json *j, const int32_t *v, uint32_t n)
{
	meta_json_begin_array(j);
	for (uint32_t i = 0; i < n; i++) {
		meta_json_i64(j, v[i]);
	}
	meta_json_end_array(j);
}

/* Kafka 2.x's "adding_replicas" / "removing_replicas": partition -> list,
 * for the partitions being reassigned only. */
static void replica_map(struct meta_json *j, const struct meta_topic *t, const char *key,
			bool adding)
{
	meta_json_key(j, key);
	meta_json_begin_object(j);
	for (uint32_t p = 0; p < t->partition_count; p++) {
		const struct meta_partition *part = &t->partitions[p];
		uint32_t n = adding ? part->adding_count : part->removing_count;
		if (n == 0) {
			continue;
		}
		char pid[16];
		int_text(pid, sizeof(pid), p);
		meta_json_key(j, pid);
		id_array(j, adding ? part->adding : part->removing, n);
	}
	meta_json_end_object(j);
}

static void topic_json(struct view *v, const struct meta_topic *t)
{
	struct meta_json j;
	json_begin(v, &j);
	meta_json_begin_object(&j);
	meta_json_key(&j, "version");
	meta_json_i64(&j, 3);
	meta_json_key(&j, "partitions");
	meta_json_begin_object(&j);
	for (uint32_t p = 0; p < t->partition_count; p++) {
		char pid[16];
		int_text(pid, sizeof(pid), p);
		meta_json_key(&j, pid);
		meta_json_begin_array(&j);
		for (uint32_t r = 0; r < t->partitions[p].replica_count; r++) {
			meta_json_i64(&j, t->partitions[p].replicas[r]);
		}
		meta_json_end_array(&j);
	}
	meta_json_end_object(&j);
	replica_map(&j, t, "adding_replicas", true);
	replica_map(&j, t, "removing_replicas", false);
	char id[32];
	struct meta_fmt f;
	meta_fmt_init(&f, id, sizeof(id));
	meta_fmt_uuid(&f, t->id);
	meta_json_key(&j, "topic_id");
	meta_json_str(&j, id);
	meta_json_end_object(&j);
}

static void put_topic(struct view *v, const struct meta_topic *t)
{
	char path[PATH_MAX_LEN];
	topic_json(v, t);
	put_json(v, path_of(path, "/brokers/topics/", t->name, NULL, NULL));
	put_empty(v, path_of(path, "/brokers/topics/", t->name, "/partitions", NULL));
}

/* The partition's state node (and, when `created`, its empty parent). */
static void put_partition(struct view *v, const struct meta_topic *t, uint32_t pid, bool created)
{
	const struct meta_partition *p = &t->partitions[pid];
	char path[PATH_MAX_LEN];
	char idtext[16];
	int_text(idtext, sizeof(idtext), pid);
	path_of(path, "/brokers/topics/", t->name, "/partitions/", idtext);
	if (created) {
		put_empty(v, path);
	}
	bool recovering = p->leader_recovery_state == META_RECOVERING;
	struct meta_json j;
	json_begin(v, &j);
	meta_json_begin_object(&j);
	meta_json_key(&j, "controller_epoch");
	meta_json_i64(&j, p->controller_epoch);
	meta_json_key(&j, "leader");
	meta_json_i64(&j, p->leader);
	meta_json_key(&j, "version");
	meta_json_i64(&j, recovering ? 2 : 1);
	meta_json_key(&j, "leader_epoch");
	meta_json_i64(&j, p->leader_epoch);
	meta_json_key(&j, "isr");
	meta_json_begin_array(&j);
	for (uint32_t i = 0; i < p->isr_count; i++) {
		meta_json_i64(&j, p->isr[i]);
	}
	meta_json_end_array(&j);
	if (recovering) {
		meta_json_key(&j, "leader_recovery_state");
		meta_json_i64(&j, META_RECOVERING);
	}
	meta_json_end_object(&j);
	size_t n = strlen(path);
	memcpy(path + n, "/state", 7);
	put_json(v, path);
}

/* ---- /config/... ---- */

static void put_config(struct view *v, const struct meta_image *img, uint8_t type,
		       const char *name)
{
	char path[PATH_MAX_LEN];
	if (type == META_RESOURCE_TOPIC) {
		if (meta_image_topic(img, name) == NULL) {
			return;
		}
		path_of(path, "/config/topics/", name, NULL, NULL);
	} else {
		path_of(path, "/config/brokers/", name[0] == '\0' ? "<default>" : name, NULL, NULL);
	}
	uint32_t first;
	uint32_t n = meta_image_config_range(img, type, name, &first);
	struct meta_json j;
	json_begin(v, &j);
	meta_json_begin_object(&j);
	meta_json_key(&j, "version");
	meta_json_i64(&j, 1);
	meta_json_key(&j, "config");
	meta_json_begin_object(&j);
	for (uint32_t i = 0; i < n; i++) {
		meta_json_key(&j, img->configs[first + i].key);
		meta_json_str(&j, img->configs[first + i].value);
	}
	meta_json_end_object(&j);
	meta_json_end_object(&j);
	put_json(v, path);
}

/* ---- /cluster/id ---- */

/* Kafka's {"version":"1","id":"<cluster id>"} once the first controller has
 * named the cluster (image.h, META_CONFIG_CLUSTER_ID). */
static void put_cluster_id(struct view *v, const struct meta_image *img)
{
	const char *id = meta_image_config(img, META_RESOURCE_BROKER, "", META_CONFIG_CLUSTER_ID);
	if (id == NULL) {
		return;
	}
	put_empty(v, "/cluster");
	struct meta_json j;
	json_begin(v, &j);
	meta_json_begin_object(&j);
	meta_json_key(&j, "version");
	meta_json_str(&j, "1");
	meta_json_key(&j, "id");
	meta_json_str(&j, id);
	meta_json_end_object(&j);
	put_json(v, "/cluster/id");
}

/* ---- /admin/reassign_partitions ---- */

/* Kafka 2.x's controller kept the ongoing reassignments in this node
 * ({"version":1,"partitions":[{"topic":T,"partition":P,"replicas":[target]}]})
 * and deleted it when the last one completed; keel shows the same from the
 * image. It is a system node: a client cannot write it (docs/controller.md). */
static void put_reassignments(struct view *v, const struct meta_image *img, bool delete_if_none)
{
	struct meta_json j;
	json_begin(v, &j);
	meta_json_begin_object(&j);
	meta_json_key(&j, "version");
	meta_json_i64(&j, 1);
	meta_json_key(&j, "partitions");
	meta_json_begin_array(&j);
	bool any = false;
	for (uint32_t t = 0; t < img->topic_count; t++) {
		const struct meta_topic *topic = img->topics[t];
		for (uint32_t p = 0; p < topic->partition_count; p++) {
			const struct meta_partition *part = &topic->partitions[p];
			if (!meta_partition_reassigning(part)) {
				continue;
			}
			any = true;
			meta_json_begin_object(&j);
			meta_json_key(&j, "topic");
			meta_json_str(&j, topic->name);
			meta_json_key(&j, "partition");
			meta_json_i64(&j, p);
			meta_json_key(&j, "replicas");
			meta_json_begin_array(&j);
			for (uint32_t r = 0; r < part->replica_count; r++) {
				if (!meta_list_contains(part->removing, part->removing_count,
							part->replicas[r])) {
					meta_json_i64(&j, part->replicas[r]);
				}
			}
			meta_json_end_array(&j);
			meta_json_end_object(&j);
		}
	}
	meta_json_end_array(&j);
	meta_json_end_object(&j);
	if (any) {
		put_json(v, "/admin/reassign_partitions");
	} else if (delete_if_none) {
		emit(v, META_ZK_DELETE, "/admin/reassign_partitions", NULL, 0);
	}
}

/* ---- the two views ---- */

static void parents(struct view *v)
{
	put_empty(v, "/brokers");
	put_empty(v, "/brokers/ids");
	put_empty(v, "/brokers/topics");
	put_empty(v, "/config");
	put_empty(v, "/config/topics");
	put_empty(v, "/config/brokers");
	/* Kafka 2.x tools ask for reassignments, deletions and elections by
	 * creating nodes under /admin; keel's controller does not watch them,
	 * so /admin is a read-only system node: such a write gets NoAuth
	 * instead of being accepted and ignored. */
	put_empty(v, "/admin");
}

static void full(struct view *v, const struct meta_image *img)
{
	parents(v);
	put_controller(v, img);
	for (uint32_t i = 0; i < img->broker_count; i++) {
		if (!img->brokers[i]->fenced) {
			broker_znode(v, img, img->brokers[i]->id);
		}
	}
	for (uint32_t t = 0; t < img->topic_count; t++) {
		const struct meta_topic *topic = img->topics[t];
		put_topic(v, topic);
		for (uint32_t p = 0; p < topic->partition_count; p++) {
			put_partition(v, topic, p, true);
		}
		put_config(v, img, META_RESOURCE_TOPIC, topic->name);
	}
	for (uint32_t i = 0; i < img->config_count; i++) {
		const struct meta_config_entry *c = &img->configs[i];
		if (c->resource_type == META_RESOURCE_BROKER) {
			put_config(v, img, c->resource_type, c->resource_name);
		}
	}
	put_cluster_id(v, img);
	put_reassignments(v, img, false);
}

static void one_change(struct view *v, const struct meta_image *img, const struct meta_change *c)
{
	char path[PATH_MAX_LEN];
	const struct meta_topic *t = NULL;
	switch (c->kind) {
	case META_CHANGE_CONTROLLER:
		/* Every controller's first batch comes before any other of its
		 * batches: the fixed parents are (re)asserted there, so they exist
		 * before anything is put under them. */
		parents(v);
		put_controller(v, img);
		break;
	case META_CHANGE_BROKER:
		broker_znode(v, img, c->broker_id);
		break;
	case META_CHANGE_TOPIC_CREATED:
		t = meta_image_topic_by_id(img, c->topic_id);
		if (t != NULL) {
			put_topic(v, t);
			put_config(v, img, META_RESOURCE_TOPIC, t->name);
		}
		break;
	case META_CHANGE_PARTITION:
		t = meta_image_topic_by_id(img, c->topic_id);
		if (t == NULL || (uint32_t)c->partition_id >= t->partition_count) {
			break;
		}
		if (c->created || c->replicas_changed || c->reassignment_changed) {
			put_topic(v, t); /* the partition -> replicas map changed */
		}
		v->reassignments_changed |= c->reassignment_changed;
		put_partition(v, t, (uint32_t)c->partition_id, c->created);
		break;
	case META_CHANGE_TOPIC_REMOVED:
		v->reassignments_changed = true; /* it may have had some */
		emit(v, META_ZK_DELETE_TREE, path_of(path, "/brokers/topics/", c->name, NULL, NULL),
		     NULL, 0);
		emit(v, META_ZK_DELETE, path_of(path, "/config/topics/", c->name, NULL, NULL), NULL,
		     0);
		break;
	case META_CHANGE_CONFIG:
		put_config(v, img, c->resource_type, c->name);
		if (c->resource_type == META_RESOURCE_BROKER && c->name[0] == '\0') {
			put_cluster_id(v, img);
		}
		break;
	default:
		break;
	}
}

static enum keel_err run(struct meta_zk_ops *ops, const struct meta_image *img,
			 const struct meta_changes *changes)
{
	struct view v = {.ops = ops, .err = KEEL_OK};
	if (keel_hmap_init(&v.seen, 64) != KEEL_OK) {
		return KEEL_NOMEM;
	}
	keel_wbuf_init_dynamic(&v.data, 1024, 64u << 20);
	if (changes == NULL) {
		full(&v, img);
	} else if (changes->overflow) {
		emit(&v, META_ZK_DELETE_TREE, "/brokers/ids", NULL, 0);
		emit(&v, META_ZK_DELETE_TREE, "/brokers/topics", NULL, 0);
		emit(&v, META_ZK_DELETE_TREE, "/config/topics", NULL, 0);
		emit(&v, META_ZK_DELETE_TREE, "/config/brokers", NULL, 0);
		full(&v, img);
		v.reassignments_changed = true;
	} else {
		for (uint32_t i = 0; i < changes->count; i++) {
			one_change(&v, img, &changes->items[i]);
		}
	}
	if (v.reassignments_changed) {
		put_reassignments(&v, img, true);
	}
	keel_wbuf_free(&v.data);
	keel_hmap_close(&v.seen);
	return v.err;
}

enum keel_err meta_zk_view_full(const struct meta_image *img, struct meta_zk_ops *ops)
{
	return run(ops, img, NULL);
}

enum keel_err meta_zk_view_changes(const struct meta_image *img, const struct meta_changes *changes,
				   struct meta_zk_ops *ops)
{
	return run(ops, img, changes);
}
