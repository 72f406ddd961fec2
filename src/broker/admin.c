/*
 * admin.c — the admin APIs. CreateTopics, DeleteTopics, CreatePartitions,
 * IncrementalAlterConfigs and AlterConfigs change the metadata log, so they go to keel's
 * controller as the extension requests the CLI sends (meta/proto.h):
 * broker_admin_request() encodes that request, the shell has the
 * controller thread send it, and broker_admin_response() turns the reply
 * (or the failure to get one) into the Kafka response; so do
 * AlterPartitionReassignments and ListPartitionReassignments (KIP-455,
 * answered by the controller from its image). DescribeConfigs and
 * DescribeCluster are reads of this broker's image, answered here.
 */
#include <string.h>

#include "base/assert.h"
#include "broker/broker.h"
#include "meta/proto.h"
#include "meta/record.h"

#define ALLOC_ARRAY(arena, ptr, n) ((ptr) = keel_arena_alloc((arena), (size_t)(n) * sizeof(*(ptr))))

/* A NUL-terminated copy in the arena ("" for null or on failure). */
static const char *cstr(struct keel_arena *arena, struct kafka_str s)
{
	if (s.len <= 0) {
		return "";
	}
	char *c = keel_arena_alloc(arena, (size_t)s.len + 1);
	if (c == NULL) {
		return "";
	}
	memcpy(c, s.ptr, (size_t)s.len);
	c[s.len] = '\0';
	return c;
}

static const char *cstr_or_null(struct keel_arena *arena, struct kafka_str s)
{
	return s.len < 0 ? NULL : cstr(arena, s);
}

bool broker_api_is_forwarded(int16_t api_key)
{
	return api_key == KAFKA_API_CREATE_TOPICS || api_key == KAFKA_API_DELETE_TOPICS ||
	       api_key == KAFKA_API_CREATE_PARTITIONS ||
	       api_key == KAFKA_API_INCREMENTAL_ALTER_CONFIGS || api_key == KAFKA_API_ALTER_CONFIGS ||
	       api_key == KAFKA_API_ALTER_PARTITION_REASSIGNMENTS ||
	       api_key == KAFKA_API_LIST_PARTITION_REASSIGNMENTS;
}

/* A topic's manual replica assignment, as the controller takes it. */
static bool forward_assignments(const struct kafka_create_topics_topic *k, struct keel_arena *a,
                                struct meta_create_topic *t)
{
	struct meta_replica_assignment *rows = NULL;
	if (ALLOC_ARRAY(a, rows, k->assignment_count) == NULL) {
		return false;
	}
	for (int32_t j = 0; j < k->assignment_count; j++) {
		const struct kafka_create_topics_assignment *ka = &k->assignments[j];
		rows[j] = (struct meta_replica_assignment){
		        ka->partition_index, ka->broker_ids.items,
		        (uint32_t)KEEL_MAX(ka->broker_ids.count, 0)};
	}
	t->assignments = rows;
	t->assignment_count = (uint32_t)k->assignment_count;
	return true;
}

static enum keel_err encode_create_topics(const struct kafka_create_topics_request *rq,
                                          struct keel_arena *a, struct keel_wbuf *w)
{
	struct meta_create_topic *t = NULL;
	if (rq->topic_count > 0 && ALLOC_ARRAY(a, t, rq->topic_count) == NULL) {
		return KEEL_NOMEM;
	}
	for (int32_t i = 0; i < rq->topic_count; i++) {
		const struct kafka_create_topics_topic *k = &rq->topics[i];
		struct meta_config_kv *kv = NULL;
		if (k->config_count > 0 && ALLOC_ARRAY(a, kv, k->config_count) == NULL) {
			return KEEL_NOMEM;
		}
		for (int32_t j = 0; j < k->config_count; j++) {
			kv[j].key = cstr(a, k->configs[j].name);
			kv[j].value = cstr_or_null(a, k->configs[j].value);
		}
		t[i] = (struct meta_create_topic){cstr(a, k->name), k->num_partitions,
		                                  k->replication_factor, kv,
		                                  (uint32_t)KEEL_MAX(k->config_count, 0), NULL, 0};
		if (k->assignment_count > 0 && !forward_assignments(k, a, &t[i])) {
			return KEEL_NOMEM;
		}
	}
	struct meta_create_topics_request m = {t, (uint32_t)KEEL_MAX(rq->topic_count, 0),
	                                       rq->validate_only};
	return meta_encode_create_topics_request(w, &m);
}

static enum keel_err encode_delete_topics(const struct kafka_delete_topics_request *rq,
                                          int16_t version, struct keel_arena *a,
                                          struct keel_wbuf *w)
{
	int32_t n = version >= 6 ? rq->topic_count : rq->topic_names.count;
	const char **names = NULL;
	if (n > 0 && ALLOC_ARRAY(a, names, n) == NULL) {
		return KEEL_NOMEM;
	}
	for (int32_t i = 0; i < n; i++) {
		names[i] = cstr(a, version >= 6 ? rq->topics[i].name : rq->topic_names.items[i]);
	}
	struct meta_delete_topics_request m = {names, (uint32_t)KEEL_MAX(n, 0)};
	return meta_encode_delete_topics_request(w, &m);
}

static enum keel_err encode_create_partitions(const struct kafka_create_partitions_request *rq,
                                              struct keel_arena *a, struct keel_wbuf *w)
{
	struct meta_create_partitions_topic *t = NULL;
	if (rq->topic_count > 0 && ALLOC_ARRAY(a, t, rq->topic_count) == NULL) {
		return KEEL_NOMEM;
	}
	for (int32_t i = 0; i < rq->topic_count; i++) {
		const struct kafka_create_partitions_topic *k = &rq->topics[i];
		int32_t n = KEEL_MAX(k->assignment_count, 0);
		const int32_t **rows = NULL;
		uint32_t *sizes = NULL;
		if (n > 0 &&
		    (ALLOC_ARRAY(a, rows, n) == NULL || ALLOC_ARRAY(a, sizes, n) == NULL)) {
			return KEEL_NOMEM;
		}
		for (int32_t j = 0; j < n; j++) {
			rows[j] = k->assignments[j].broker_ids.items;
			sizes[j] = (uint32_t)KEEL_MAX(k->assignments[j].broker_ids.count, 0);
		}
		t[i] = (struct meta_create_partitions_topic){cstr(a, k->name), k->count,
		                                             (const int32_t *const *)rows, sizes,
		                                             (uint32_t)n};
	}
	struct meta_create_partitions_request m = {t, (uint32_t)KEEL_MAX(rq->topic_count, 0),
	                                           rq->validate_only};
	return meta_encode_create_partitions_request(w, &m);
}

/* KEEL_UNSUPPORTED for APPEND/SUBTRACT (list configs keel does not have). */
static enum keel_err encode_alter_configs(const struct kafka_incremental_alter_configs_request *rq,
                                          struct keel_arena *a, struct keel_wbuf *w)
{
	struct meta_alter_config_resource *r = NULL;
	if (rq->resource_count > 0 && ALLOC_ARRAY(a, r, rq->resource_count) == NULL) {
		return KEEL_NOMEM;
	}
	for (int32_t i = 0; i < rq->resource_count; i++) {
		const struct kafka_alter_configs_resource *k = &rq->resources[i];
		struct meta_config_kv *kv = NULL;
		if (k->config_count > 0 && ALLOC_ARRAY(a, kv, k->config_count) == NULL) {
			return KEEL_NOMEM;
		}
		for (int32_t j = 0; j < k->config_count; j++) {
			const struct kafka_alterable_config *c = &k->configs[j];
			if (c->config_operation != KAFKA_CONFIG_SET &&
			    c->config_operation != KAFKA_CONFIG_DELETE) {
				return KEEL_UNSUPPORTED;
			}
			kv[j].key = cstr(a, c->name);
			kv[j].value =
			        c->config_operation == KAFKA_CONFIG_SET ? cstr(a, c->value) : NULL;
		}
		r[i] = (struct meta_alter_config_resource){(uint8_t)k->resource_type,
		                                           cstr(a, k->resource_name), kv,
		                                           (uint32_t)KEEL_MAX(k->config_count, 0)};
	}
	struct meta_alter_configs_request m = {r, (uint32_t)KEEL_MAX(rq->resource_count, 0),
	                                       rq->validate_only};
	return meta_encode_alter_configs_request(w, &m);
}

/*
 * The legacy AlterConfigs replaces a resource's whole dynamic config: the
 * named keys are set (a null value removes the key) and every other key
 * this broker's image holds for the resource is removed — as an
 * incremental request computed from the image, so a key set concurrently
 * elsewhere may survive (Kafka's legacy form races the same way). keel's
 * own `keel.*` keys (the cluster id) are never removed this way. Without
 * an image nothing is known to remove: KEEL_UNSUPPORTED.
 */
static enum keel_err encode_legacy_alter_configs(const struct broker_core *core,
                                                 const struct kafka_alter_configs_request *rq,
                                                 struct keel_arena *a, struct keel_wbuf *w)
{
	if (!core->has_image) {
		return KEEL_UNSUPPORTED;
	}
	struct meta_alter_config_resource *r = NULL;
	if (rq->resource_count > 0 && ALLOC_ARRAY(a, r, rq->resource_count) == NULL) {
		return KEEL_NOMEM;
	}
	for (int32_t i = 0; i < rq->resource_count; i++) {
		const struct kafka_legacy_alter_resource *k = &rq->resources[i];
		const char *name = cstr(a, k->resource_name);
		uint32_t first = 0;
		uint32_t held = meta_image_config_range(&core->image, (uint8_t)k->resource_type, name,
		                                        &first);
		uint32_t given = (uint32_t)KEEL_MAX(k->config_count, 0);
		struct meta_config_kv *kv = NULL;
		if (given + held > 0 && ALLOC_ARRAY(a, kv, given + held) == NULL) {
			return KEEL_NOMEM;
		}
		uint32_t n = 0;
		for (uint32_t j = 0; j < given; j++) {
			kv[n++] = (struct meta_config_kv){cstr(a, k->configs[j].name),
			                                  cstr_or_null(a, k->configs[j].value)};
		}
		for (uint32_t j = 0; j < held; j++) {
			const char *key = core->image.configs[first + j].key;
			bool named = false;
			for (uint32_t g = 0; g < given && !named; g++) {
				named = kafka_str_eq(k->configs[g].name, key);
			}
			if (!named && strncmp(key, "keel.", 5) != 0) {
				kv[n++] = (struct meta_config_kv){key, NULL};
			}
		}
		r[i] = (struct meta_alter_config_resource){(uint8_t)k->resource_type, name, kv, n};
	}
	struct meta_alter_configs_request m = {r, (uint32_t)KEEL_MAX(rq->resource_count, 0),
	                                       rq->validate_only};
	return meta_encode_alter_configs_request(w, &m);
}

/* Kafka's per-topic partition lists, flattened: one meta topic entry per
 * partition (the controller answers per partition, in request order). */
static enum keel_err encode_alter_reassignments(
        const struct kafka_alter_partition_reassignments_request *rq, struct keel_arena *a,
        struct keel_wbuf *w)
{
	int32_t n = 0;
	for (int32_t i = 0; i < rq->topic_count; i++) {
		n += KEEL_MAX(rq->topics[i].partition_count, 0);
	}
	struct meta_reassign_topic *t = NULL;
	struct meta_reassign_partition *p = NULL;
	if (n > 0 && (ALLOC_ARRAY(a, t, n) == NULL || ALLOC_ARRAY(a, p, n) == NULL)) {
		return KEEL_NOMEM;
	}
	int32_t k = 0;
	for (int32_t i = 0; i < rq->topic_count; i++) {
		const struct kafka_reassign_topic *kt = &rq->topics[i];
		const char *name = cstr(a, kt->name);
		for (int32_t j = 0; j < kt->partition_count; j++, k++) {
			const struct kafka_i32_array *r = &kt->partitions[j].replicas;
			p[k] = (struct meta_reassign_partition){kt->partitions[j].partition_index,
			                                        r->count < 0, r->items,
			                                        (uint32_t)KEEL_MAX(r->count, 0)};
			t[k] = (struct meta_reassign_topic){name, &p[k], 1};
		}
	}
	struct meta_alter_reassignments_request m = {t, (uint32_t)n};
	return meta_encode_alter_reassignments_request(w, &m);
}

static enum keel_err encode_list_reassignments(
        const struct kafka_list_partition_reassignments_request *rq, struct keel_arena *a,
        struct keel_wbuf *w)
{
	int32_t n = KEEL_MAX(rq->topic_count, 0);
	struct meta_elect_topic *t = NULL;
	if (n > 0 && ALLOC_ARRAY(a, t, n) == NULL) {
		return KEEL_NOMEM;
	}
	for (int32_t i = 0; i < n; i++) {
		const struct kafka_i32_array *pi = &rq->topics[i].partition_indexes;
		t[i] = (struct meta_elect_topic){cstr(a, rq->topics[i].name), pi->items,
		                                 (uint32_t)KEEL_MAX(pi->count, 0)};
	}
	struct meta_list_reassignments_request m = {t, (uint32_t)n};
	return meta_encode_list_reassignments_request(w, &m);
}

enum keel_err broker_admin_request(const struct broker_core *core, const struct kafka_request *rq,
                                   struct keel_arena *arena, struct keel_wbuf *w,
                                   enum meta_api *api)
{
	switch (rq->header.api_key) {
	case KAFKA_API_CREATE_TOPICS:
		*api = META_API_CREATE_TOPICS;
		return encode_create_topics(&rq->body.create_topics, arena, w);
	case KAFKA_API_DELETE_TOPICS:
		*api = META_API_DELETE_TOPICS;
		return encode_delete_topics(&rq->body.delete_topics, rq->header.api_version, arena,
		                            w);
	case KAFKA_API_CREATE_PARTITIONS:
		*api = META_API_CREATE_PARTITIONS;
		return encode_create_partitions(&rq->body.create_partitions, arena, w);
	case KAFKA_API_INCREMENTAL_ALTER_CONFIGS:
		*api = META_API_ALTER_CONFIGS;
		return encode_alter_configs(&rq->body.incremental_alter_configs, arena, w);
	case KAFKA_API_ALTER_CONFIGS:
		*api = META_API_ALTER_CONFIGS;
		return encode_legacy_alter_configs(core, &rq->body.alter_configs, arena, w);
	case KAFKA_API_ALTER_PARTITION_REASSIGNMENTS:
		*api = META_API_ALTER_PARTITION_REASSIGNMENTS;
		return encode_alter_reassignments(&rq->body.alter_partition_reassignments, arena, w);
	case KAFKA_API_LIST_PARTITION_REASSIGNMENTS:
		*api = META_API_LIST_PARTITION_REASSIGNMENTS;
		return encode_list_reassignments(&rq->body.list_partition_reassignments, arena, w);
	default:
		return KEEL_INVAL;
	}
}

/* ---- responses ---- */

static struct kafka_str kstr(const char *s)
{
	return s != NULL ? kafka_str(s) : KAFKA_STR_NULL;
}

static void create_topics_response(const struct kafka_create_topics_request *rq,
                                   const struct meta_create_topics_response *m, int16_t fail,
                                   struct keel_arena *a, struct kafka_create_topics_response *out)
{
	if (rq->topic_count <= 0 || ALLOC_ARRAY(a, out->topics, rq->topic_count) == NULL) {
		return;
	}
	out->topic_count = rq->topic_count;
	for (int32_t i = 0; i < rq->topic_count; i++) {
		struct kafka_create_topics_result *r = &out->topics[i];
		memset(r, 0, sizeof(*r));
		r->name = rq->topics[i].name;
		r->error_code = fail;
		r->error_message = KAFKA_STR_NULL;
		r->num_partitions = -1;
		r->replication_factor = -1;
		r->config_count = -1;
		if (m == NULL || (uint32_t)i >= m->topic_count) {
			continue;
		}
		const struct meta_create_topic_result *t = &m->topics[i];
		memcpy(r->topic_id.b, t->topic_id, 16);
		r->error_code = t->error;
		r->error_message = kstr(t->error_message);
		r->num_partitions = t->error == META_ERR_NONE ? t->num_partitions : -1;
		r->replication_factor = t->error == META_ERR_NONE ? t->replication_factor : -1;
	}
}

static void delete_topics_response(const struct kafka_delete_topics_request *rq, int16_t version,
                                   const struct meta_delete_topics_response *m, int16_t fail,
                                   struct keel_arena *a, struct kafka_delete_topics_response *out)
{
	int32_t n = version >= 6 ? rq->topic_count : rq->topic_names.count;
	if (n <= 0 || ALLOC_ARRAY(a, out->responses, n) == NULL) {
		return;
	}
	out->response_count = n;
	for (int32_t i = 0; i < n; i++) {
		struct kafka_delete_topics_result *r = &out->responses[i];
		memset(r, 0, sizeof(*r));
		r->name = version >= 6 ? rq->topics[i].name : rq->topic_names.items[i];
		r->error_code = fail;
		r->error_message = KAFKA_STR_NULL;
		if (m != NULL && (uint32_t)i < m->result_count) {
			memcpy(r->topic_id.b, m->results[i].topic_id, 16);
			r->error_code = m->results[i].error;
			r->error_message = kstr(m->results[i].error_message);
		}
	}
}

static void create_partitions_response(const struct kafka_create_partitions_request *rq,
                                       const struct meta_create_partitions_response *m,
                                       int16_t fail, struct keel_arena *a,
                                       struct kafka_create_partitions_response *out)
{
	if (rq->topic_count <= 0 || ALLOC_ARRAY(a, out->results, rq->topic_count) == NULL) {
		return;
	}
	out->result_count = rq->topic_count;
	for (int32_t i = 0; i < rq->topic_count; i++) {
		struct kafka_create_partitions_result *r = &out->results[i];
		r->name = rq->topics[i].name;
		r->error_code = fail;
		r->error_message = KAFKA_STR_NULL;
		if (m != NULL && (uint32_t)i < m->result_count) {
			r->error_code = m->results[i].error;
			r->error_message = kstr(m->results[i].error_message);
		}
	}
}

/* Both AlterConfigs forms answer one result per resource, in order: the
 * controller's, or `fail` when there is none. Fills results but the name
 * and type, which the caller copies from its request. */
static struct kafka_alter_configs_resource_response *
alter_results(int32_t count, const struct meta_alter_configs_response *m, int16_t fail,
              struct keel_arena *a)
{
	struct kafka_alter_configs_resource_response *r = NULL;
	if (count <= 0 || ALLOC_ARRAY(a, r, count) == NULL) {
		return NULL;
	}
	for (int32_t i = 0; i < count; i++) {
		bool have = m != NULL && (uint32_t)i < m->result_count;
		r[i].error_code = have ? m->results[i].error : fail;
		r[i].error_message = have ? kstr(m->results[i].error_message) : KAFKA_STR_NULL;
	}
	return r;
}

static void alter_configs_response(const struct kafka_incremental_alter_configs_request *rq,
                                   const struct meta_alter_configs_response *m, int16_t fail,
                                   struct keel_arena *a,
                                   struct kafka_incremental_alter_configs_response *out)
{
	out->responses = alter_results(rq->resource_count, m, fail, a);
	out->response_count = out->responses != NULL ? rq->resource_count : 0;
	for (int32_t i = 0; i < out->response_count; i++) {
		out->responses[i].resource_type = rq->resources[i].resource_type;
		out->responses[i].resource_name = rq->resources[i].resource_name;
	}
}

static void legacy_alter_configs_response(const struct kafka_alter_configs_request *rq,
                                          const struct meta_alter_configs_response *m,
                                          int16_t fail, struct keel_arena *a,
                                          struct kafka_alter_configs_response *out)
{
	out->responses = alter_results(rq->resource_count, m, fail, a);
	out->response_count = out->responses != NULL ? rq->resource_count : 0;
	for (int32_t i = 0; i < out->response_count; i++) {
		out->responses[i].resource_type = rq->resources[i].resource_type;
		out->responses[i].resource_name = rq->resources[i].resource_name;
	}
}

/* The controller's flat per-partition results, back into the request's
 * topics (in order); `fail` for all when there is no reply. */
static void alter_reassignments_response(
        const struct kafka_alter_partition_reassignments_request *rq,
        const struct meta_alter_reassignments_response *m, int16_t fail, struct keel_arena *a,
        struct kafka_alter_partition_reassignments_response *out)
{
	out->error_code = m != NULL ? m->error : fail;
	out->error_message = m != NULL ? kstr(m->error_message) : KAFKA_STR_NULL;
	if (rq->topic_count <= 0 || ALLOC_ARRAY(a, out->responses, rq->topic_count) == NULL) {
		return;
	}
	out->response_count = rq->topic_count;
	uint32_t k = 0;
	for (int32_t i = 0; i < rq->topic_count; i++) {
		const struct kafka_reassign_topic *t = &rq->topics[i];
		struct kafka_reassign_topic_result *r = &out->responses[i];
		r->name = t->name;
		r->partition_count = 0;
		if (t->partition_count <= 0 ||
		    ALLOC_ARRAY(a, r->partitions, t->partition_count) == NULL) {
			continue;
		}
		r->partition_count = t->partition_count;
		for (int32_t j = 0; j < t->partition_count; j++, k++) {
			struct kafka_reassign_partition_result *p = &r->partitions[j];
			p->partition_index = t->partitions[j].partition_index;
			p->error_code = fail;
			p->error_message = KAFKA_STR_NULL;
			if (m != NULL && m->error != META_ERR_NONE) {
				p->error_code = m->error;
			} else if (m != NULL && k < m->result_count) {
				p->error_code = m->results[k].error;
				p->error_message = kstr(m->results[k].error_message);
			}
		}
	}
}

/* The controller's flat list, grouped by topic (it lists a topic's
 * partitions together). */
static void list_reassignments_response(const struct meta_list_reassignments_response *m,
                                        int16_t fail, struct keel_arena *a,
                                        struct kafka_list_partition_reassignments_response *out)
{
	out->error_code = m != NULL ? m->error : fail;
	out->error_message = m != NULL ? kstr(m->error_message) : KAFKA_STR_NULL;
	uint32_t n = m != NULL ? m->reassignment_count : 0;
	if (n == 0 || ALLOC_ARRAY(a, out->topics, n) == NULL ||
	    ALLOC_ARRAY(a, out->topics[0].partitions, n) == NULL) {
		return;
	}
	struct kafka_ongoing_partition *parts = out->topics[0].partitions;
	int32_t topics = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct meta_ongoing_reassignment *r = &m->reassignments[i];
		if (i == 0 || strcmp(r->topic, m->reassignments[i - 1].topic) != 0) {
			struct kafka_ongoing_topic *t = &out->topics[topics++];
			t->name = kafka_str(r->topic);
			t->partitions = &parts[i];
			t->partition_count = 0;
		}
		parts[i] = (struct kafka_ongoing_partition){
		        r->partition_id,
		        {(int32_t *)r->replicas, (int32_t)r->replica_count},
		        {(int32_t *)r->adding, (int32_t)r->adding_count},
		        {(int32_t *)r->removing, (int32_t)r->removing_count}};
		out->topics[topics - 1].partition_count++;
	}
	out->topic_count = topics;
}

void broker_admin_response(const struct kafka_request *rq, const uint8_t *reply, size_t size,
                           int16_t fail, struct keel_arena *arena, union kafka_response_body *out)
{
	memset(out, 0, sizeof(*out));
	int16_t v = rq->header.api_version;
	bool ok = reply != NULL;
	switch (rq->header.api_key) {
	case KAFKA_API_CREATE_TOPICS: {
		struct meta_create_topics_response m;
		ok = ok &&
		     meta_decode_create_topics_response(reply, size, arena, &m, NULL) == KEEL_OK;
		create_topics_response(&rq->body.create_topics, ok ? &m : NULL, fail, arena,
		                       &out->create_topics);
		return;
	}
	case KAFKA_API_DELETE_TOPICS: {
		struct meta_delete_topics_response m;
		ok = ok &&
		     meta_decode_delete_topics_response(reply, size, arena, &m, NULL) == KEEL_OK;
		delete_topics_response(&rq->body.delete_topics, v, ok ? &m : NULL, fail, arena,
		                       &out->delete_topics);
		return;
	}
	case KAFKA_API_CREATE_PARTITIONS: {
		struct meta_create_partitions_response m;
		ok = ok && meta_decode_create_partitions_response(reply, size, arena, &m, NULL) ==
		                   KEEL_OK;
		create_partitions_response(&rq->body.create_partitions, ok ? &m : NULL, fail, arena,
		                           &out->create_partitions);
		return;
	}
	case KAFKA_API_INCREMENTAL_ALTER_CONFIGS: {
		struct meta_alter_configs_response m;
		ok = ok &&
		     meta_decode_alter_configs_response(reply, size, arena, &m, NULL) == KEEL_OK;
		alter_configs_response(&rq->body.incremental_alter_configs, ok ? &m : NULL, fail,
		                       arena, &out->incremental_alter_configs);
		return;
	}
	case KAFKA_API_ALTER_CONFIGS: {
		struct meta_alter_configs_response m;
		ok = ok &&
		     meta_decode_alter_configs_response(reply, size, arena, &m, NULL) == KEEL_OK;
		legacy_alter_configs_response(&rq->body.alter_configs, ok ? &m : NULL, fail, arena,
		                              &out->alter_configs);
		return;
	}
	case KAFKA_API_ALTER_PARTITION_REASSIGNMENTS: {
		struct meta_alter_reassignments_response m;
		ok = ok && meta_decode_alter_reassignments_response(reply, size, arena, &m, NULL) ==
		                   KEEL_OK;
		alter_reassignments_response(&rq->body.alter_partition_reassignments,
		                             ok ? &m : NULL, fail, arena,
		                             &out->alter_partition_reassignments);
		return;
	}
	case KAFKA_API_LIST_PARTITION_REASSIGNMENTS: {
		struct meta_list_reassignments_response m;
		ok = ok && meta_decode_list_reassignments_response(reply, size, arena, &m, NULL) ==
		                   KEEL_OK;
		list_reassignments_response(ok ? &m : NULL, fail, arena,
		                            &out->list_partition_reassignments);
		return;
	}
	default:
		KEEL_UNREACHABLE(); /* only forwarded APIs come here */
	}
}

/* ---- answered from the image ---- */

/* Kafka's config sources. */
#define CONFIG_SOURCE_TOPIC                  1
#define CONFIG_SOURCE_DYNAMIC_BROKER         2
#define CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER 4

static bool wanted(const struct kafka_str_array *keys, const char *key)
{
	if (keys->count < 0) {
		return true;
	}
	for (int32_t i = 0; i < keys->count; i++) {
		if (kafka_str_eq(keys->items[i], key)) {
			return true;
		}
	}
	return false;
}

static void describe_resource(struct broker_core *core,
                              const struct kafka_describe_configs_resource *res,
                              struct keel_arena *a, struct kafka_describe_configs_result *out)
{
	memset(out, 0, sizeof(*out));
	out->resource_type = res->resource_type;
	out->resource_name = res->resource_name;
	out->error_message = KAFKA_STR_NULL;
	const char *name = cstr(a, res->resource_name);
	int8_t source = CONFIG_SOURCE_TOPIC;
	if (res->resource_type == KAFKA_RESOURCE_TOPIC) {
		if (!core->has_image || meta_image_topic(&core->image, name) == NULL) {
			out->error_code = KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
			return;
		}
	} else if (res->resource_type == KAFKA_RESOURCE_BROKER) {
		source = name[0] == '\0' ? CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER
		                         : CONFIG_SOURCE_DYNAMIC_BROKER;
	} else {
		out->error_code = KAFKA_INVALID_REQUEST;
		return;
	}
	if (!core->has_image) {
		return;
	}
	uint32_t first = 0;
	uint32_t n =
	        meta_image_config_range(&core->image, (uint8_t)res->resource_type, name, &first);
	if (n == 0 || ALLOC_ARRAY(a, out->configs, n) == NULL) {
		return;
	}
	int32_t count = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct meta_config_entry *e = &core->image.configs[first + i];
		if (!wanted(&res->configuration_keys, e->key)) {
			continue;
		}
		struct kafka_describe_configs_entry *c = &out->configs[count++];
		memset(c, 0, sizeof(*c));
		c->name = kafka_str(e->key);
		c->value = kafka_str(e->value);
		c->config_source = source;
		c->documentation = KAFKA_STR_NULL;
	}
	out->config_count = count;
}

void broker_describe_configs(struct broker_core *core,
                             const struct kafka_describe_configs_request *rq,
                             struct keel_arena *arena, struct kafka_describe_configs_response *out)
{
	memset(out, 0, sizeof(*out));
	if (rq->resource_count <= 0 ||
	    ALLOC_ARRAY(arena, out->results, rq->resource_count) == NULL) {
		return;
	}
	out->result_count = rq->resource_count;
	for (int32_t i = 0; i < rq->resource_count; i++) {
		describe_resource(core, &rq->resources[i], arena, &out->results[i]);
	}
}

void broker_describe_cluster(struct broker_core *core, struct keel_arena *arena,
                             struct kafka_describe_cluster_response *out)
{
	/* Metadata's broker list and cluster id, in DescribeCluster's shape. */
	struct kafka_metadata_request all = {NULL, -1, false, false, false};
	struct kafka_metadata_response md;
	broker_metadata(core, &all, 0, arena, &md);
	memset(out, 0, sizeof(*out));
	out->error_message = KAFKA_STR_NULL;
	out->endpoint_type = 1;
	out->cluster_id = md.cluster_id.len >= 0 ? md.cluster_id : kafka_str("");
	out->controller_id = md.controller_id;
	out->cluster_authorized_operations = INT32_MIN;
	if (md.broker_count <= 0 || ALLOC_ARRAY(arena, out->brokers, md.broker_count) == NULL) {
		return;
	}
	out->broker_count = md.broker_count;
	for (int32_t i = 0; i < md.broker_count; i++) {
		out->brokers[i] = (struct kafka_describe_cluster_broker){
		        md.brokers[i].node_id, md.brokers[i].host, md.brokers[i].port,
		        md.brokers[i].rack};
	}
}
