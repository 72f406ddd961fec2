/*
 * proto.c — encoders and decoders of the broker-facing request and response
 * bodies (see proto.h; the field order of every body is the order of the
 * struct fields in proto.h, after a leading int16 version).
 */
#include "meta/proto.h"

#include <string.h>

#include "base/assert.h"
#include "meta/codec.h"

#define PROTO_VERSION 0

bool meta_api_needs_controller(enum meta_api api)
{
	return api != META_API_DESCRIBE_CLUSTER && api != META_API_FETCH_METADATA;
}

static const char *const api_names[META_API_COUNT] = {
	"BrokerRegistration", "BrokerHeartbeat", "UnregisterBroker",
	"CreateTopics",       "DeleteTopics",    "AlterConfigs",
	"AlterPartition",     "DescribeCluster", "FetchMetadata",
	"CreatePartitions",   "ElectLeaders",    "AlterPartitionReassignments",
	"ListPartitionReassignments",
	[META_API_ALLOCATE_PRODUCER_IDS] = "AllocateProducerIds",
};

bool meta_api_known(enum meta_api api)
{
	return (unsigned)api < META_API_COUNT && api_names[api] != NULL;
}

const char *meta_api_name(enum meta_api api)
{
	return meta_api_known(api) ? api_names[api] : "Unknown";
}

const char *meta_error_name(int16_t code)
{
	static const struct {
		int16_t code;
		const char *name;
	} table[] = {
		{META_ERR_UNKNOWN_SERVER_ERROR, "UNKNOWN_SERVER_ERROR"},
		{META_ERR_NONE, "NONE"},
		{META_ERR_OFFSET_OUT_OF_RANGE, "OFFSET_OUT_OF_RANGE"},
		{META_ERR_UNKNOWN_TOPIC_OR_PARTITION, "UNKNOWN_TOPIC_OR_PARTITION"},
		{META_ERR_NOT_LEADER_OR_FOLLOWER, "NOT_LEADER_OR_FOLLOWER"},
		{META_ERR_INVALID_TOPIC_EXCEPTION, "INVALID_TOPIC_EXCEPTION"},
		{META_ERR_UNSUPPORTED_VERSION, "UNSUPPORTED_VERSION"},
		{META_ERR_TOPIC_ALREADY_EXISTS, "TOPIC_ALREADY_EXISTS"},
		{META_ERR_INVALID_PARTITIONS, "INVALID_PARTITIONS"},
		{META_ERR_INVALID_REPLICATION_FACTOR, "INVALID_REPLICATION_FACTOR"},
		{META_ERR_INVALID_CONFIG, "INVALID_CONFIG"},
		{META_ERR_NOT_CONTROLLER, "NOT_CONTROLLER"},
		{META_ERR_INVALID_REQUEST, "INVALID_REQUEST"},
		{META_ERR_POLICY_VIOLATION, "POLICY_VIOLATION"},
		{META_ERR_FENCED_LEADER_EPOCH, "FENCED_LEADER_EPOCH"},
		{META_ERR_STALE_BROKER_EPOCH, "STALE_BROKER_EPOCH"},
		{META_ERR_INVALID_UPDATE_VERSION, "INVALID_UPDATE_VERSION"},
		{META_ERR_UNKNOWN_TOPIC_ID, "UNKNOWN_TOPIC_ID"},
		{META_ERR_DUPLICATE_BROKER_REGISTRATION, "DUPLICATE_BROKER_REGISTRATION"},
		{META_ERR_BROKER_ID_NOT_REGISTERED, "BROKER_ID_NOT_REGISTERED"},
		{META_ERR_INVALID_REPLICA_ASSIGNMENT, "INVALID_REPLICA_ASSIGNMENT"},
		{META_ERR_PREFERRED_LEADER_NOT_AVAILABLE, "PREFERRED_LEADER_NOT_AVAILABLE"},
		{META_ERR_ELIGIBLE_LEADERS_NOT_AVAILABLE, "ELIGIBLE_LEADERS_NOT_AVAILABLE"},
		{META_ERR_ELECTION_NOT_NEEDED, "ELECTION_NOT_NEEDED"},
		{META_ERR_INELIGIBLE_REPLICA, "INELIGIBLE_REPLICA"},
		{META_ERR_NO_REASSIGNMENT_IN_PROGRESS, "NO_REASSIGNMENT_IN_PROGRESS"},
	};
	for (size_t i = 0; i < KEEL_ARRAY_SIZE(table); i++) {
		if (table[i].code == code) {
			return table[i].name;
		}
	}
	return "UNKNOWN";
}

/* ---- shared pieces ---- */

/* Reads a body's version; refuses one above `max`. Returns it (0 on error). */
static int16_t dec_version_upto(struct meta_dec *d, const char *what, int16_t max)
{
	int16_t v = meta_dec_i16(d);
	if (meta_dec_ok(d) && (v < 0 || v > max)) {
		struct meta_fmt f;
		struct meta_fmt *fp = meta_errbuf_begin(d->eb, &f);
		meta_fmt_str(fp, what);
		meta_fmt_str(fp, " version ");
		meta_fmt_i64(fp, v);
		meta_fmt_str(fp, " is not supported (max ");
		meta_fmt_i64(fp, max);
		meta_fmt_char(fp, ')');
		d->err = KEEL_UNSUPPORTED;
		keel_rbuf_fail(&d->r);
		return 0;
	}
	return v;
}

static void dec_version(struct meta_dec *d, const char *what)
{
	(void)dec_version_upto(d, what, PROTO_VERSION);
}

static void enc_endpoints(struct keel_wbuf *w, const struct meta_endpoint *e, uint32_t n)
{
	keel_wbuf_i32(w, (int32_t)n);
	for (uint32_t i = 0; i < n; i++) {
		meta_enc_str(w, e[i].name);
		meta_enc_str(w, e[i].host);
		keel_wbuf_u16(w, e[i].port);
		keel_wbuf_u16(w, (uint16_t)e[i].security_protocol);
	}
}

static const struct meta_endpoint *dec_endpoints(struct meta_dec *d, uint32_t *count)
{
	uint32_t n = meta_dec_count(d, META_MAX_ENDPOINTS, 12, "endpoints");
	struct meta_endpoint *e = meta_dec_alloc(d, n, sizeof(*e));
	for (uint32_t i = 0; e != NULL && i < n; i++) {
		e[i].name = meta_dec_str(d, false, META_MAX_SHORT_STRING, "endpoint name");
		e[i].host = meta_dec_str(d, false, META_MAX_SHORT_STRING, "endpoint host");
		e[i].port = (uint16_t)meta_dec_i16(d);
		e[i].security_protocol = meta_dec_i16(d);
	}
	*count = meta_dec_ok(d) ? n : 0;
	return e;
}

static void enc_kvs(struct keel_wbuf *w, const struct meta_config_kv *kv, uint32_t n)
{
	keel_wbuf_i32(w, (int32_t)n);
	for (uint32_t i = 0; i < n; i++) {
		meta_enc_str(w, kv[i].key);
		meta_enc_str(w, kv[i].value);
	}
}

static const struct meta_config_kv *dec_kvs(struct meta_dec *d, uint32_t *count)
{
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 8, "configs");
	struct meta_config_kv *kv = meta_dec_alloc(d, n, sizeof(*kv));
	for (uint32_t i = 0; kv != NULL && i < n; i++) {
		kv[i].key = meta_dec_str(d, false, META_MAX_SHORT_STRING, "config key");
		kv[i].value = meta_dec_str(d, true, META_MAX_CONFIG_VALUE, "config value");
	}
	*count = meta_dec_ok(d) ? n : 0;
	return kv;
}

static void enc_strs(struct keel_wbuf *w, const char *const *s, uint32_t n)
{
	keel_wbuf_i32(w, (int32_t)n);
	for (uint32_t i = 0; i < n; i++) {
		meta_enc_str(w, s[i]);
	}
}

static const char *const *dec_strs(struct meta_dec *d, uint32_t *count, const char *what)
{
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 4, what);
	const char **s = meta_dec_alloc(d, n, sizeof(*s));
	for (uint32_t i = 0; s != NULL && i < n; i++) {
		s[i] = meta_dec_str(d, false, META_MAX_SHORT_STRING, what);
	}
	*count = meta_dec_ok(d) ? n : 0;
	return s;
}

static void enc_error(struct keel_wbuf *w, int16_t error, const char *msg)
{
	keel_wbuf_u16(w, (uint16_t)error);
	meta_enc_str(w, msg);
}

static void dec_error(struct meta_dec *d, int16_t *error, const char **msg)
{
	*error = meta_dec_i16(d);
	*msg = meta_dec_str(d, true, META_MAX_CONFIG_VALUE, "error message");
}

/* Topics with partition lists (ElectLeaders, ListPartitionReassignments). */
static void enc_topic_partitions(struct keel_wbuf *w, const struct meta_elect_topic *t,
				 uint32_t n)
{
	keel_wbuf_i32(w, (int32_t)n);
	for (uint32_t i = 0; i < n; i++) {
		meta_enc_str(w, t[i].name);
		meta_enc_i32_array(w, t[i].partitions, t[i].partition_count);
	}
}

static const struct meta_elect_topic *dec_topic_partitions(struct meta_dec *d, uint32_t *count)
{
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 8, "topics");
	struct meta_elect_topic *t = meta_dec_alloc(d, n, sizeof(*t));
	for (uint32_t i = 0; t != NULL && i < n; i++) {
		t[i].name = meta_dec_str(d, false, META_MAX_SHORT_STRING, "topic name");
		t[i].partitions = meta_dec_i32_array(d, META_PROTO_MAX_ITEMS,
						     &t[i].partition_count, "partitions");
	}
	*count = n;
	return t;
}

/* Per-partition results (ElectLeaders, AlterPartitionReassignments). */
static void enc_partition_results(struct keel_wbuf *w, const struct meta_elect_partition_result *r,
				  uint32_t n)
{
	keel_wbuf_i32(w, (int32_t)n);
	for (uint32_t i = 0; i < n; i++) {
		meta_enc_str(w, r[i].topic);
		keel_wbuf_i32(w, r[i].partition_id);
		enc_error(w, r[i].error, r[i].error_message);
	}
}

static const struct meta_elect_partition_result *dec_partition_results(struct meta_dec *d,
								       uint32_t *count)
{
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 14, "results");
	struct meta_elect_partition_result *r = meta_dec_alloc(d, n, sizeof(*r));
	for (uint32_t i = 0; r != NULL && i < n; i++) {
		r[i].topic = meta_dec_str(d, false, META_MAX_SHORT_STRING, "topic name");
		r[i].partition_id = meta_dec_i32(d);
		dec_error(d, &r[i].error, &r[i].error_message);
	}
	*count = n;
	return r;
}

/* Declares a decoder's prologue and epilogue around its body. */
#define DEC_OPEN()                                                                            \
	struct meta_dec dd;                                                                   \
	struct meta_dec *d = &dd;                                                             \
	meta_dec_init(d, data, size, arena, eb);                                              \
	memset(out, 0, sizeof(*out))
#define DEC_BEGIN(what)                                                                       \
	DEC_OPEN();                                                                           \
	dec_version(d, what)
#define DEC_END(what) return meta_dec_finish(d, true, what)

/* ---- BrokerRegistration ---- */

enum keel_err meta_encode_broker_registration_request(
	struct keel_wbuf *w, const struct meta_broker_registration_request *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	keel_wbuf_i32(w, m->broker_id);
	meta_enc_uuid(w, m->incarnation_id);
	enc_endpoints(w, m->endpoints, m->endpoint_count);
	meta_enc_str(w, m->rack);
	keel_wbuf_i64(w, m->previous_broker_epoch);
	return meta_enc_result(w);
}

enum keel_err meta_decode_broker_registration_request(const void *data, size_t size,
						      struct keel_arena *arena,
						      struct meta_broker_registration_request *out,
						      struct meta_errbuf *eb)
{
	DEC_BEGIN("BrokerRegistration");
	out->broker_id = meta_dec_i32(d);
	meta_dec_uuid(d, out->incarnation_id);
	out->endpoints = dec_endpoints(d, &out->endpoint_count);
	out->rack = meta_dec_str(d, true, META_MAX_SHORT_STRING, "rack");
	out->previous_broker_epoch = meta_dec_i64(d);
	DEC_END("BrokerRegistration");
}

enum keel_err meta_encode_broker_registration_response(
	struct keel_wbuf *w, const struct meta_broker_registration_response *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	enc_error(w, m->error, m->error_message);
	keel_wbuf_i64(w, m->broker_epoch);
	return meta_enc_result(w);
}

enum keel_err meta_decode_broker_registration_response(
	const void *data, size_t size, struct keel_arena *arena,
	struct meta_broker_registration_response *out, struct meta_errbuf *eb)
{
	DEC_BEGIN("BrokerRegistration response");
	dec_error(d, &out->error, &out->error_message);
	out->broker_epoch = meta_dec_i64(d);
	DEC_END("BrokerRegistration response");
}

/* ---- BrokerHeartbeat ---- */

enum keel_err meta_encode_broker_heartbeat_request(struct keel_wbuf *w,
						   const struct meta_broker_heartbeat_request *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	keel_wbuf_i32(w, m->broker_id);
	keel_wbuf_i64(w, m->broker_epoch);
	keel_wbuf_i64(w, m->current_metadata_offset);
	keel_wbuf_bool(w, m->want_fence);
	keel_wbuf_bool(w, m->want_shutdown);
	return meta_enc_result(w);
}

enum keel_err meta_decode_broker_heartbeat_request(const void *data, size_t size,
						   struct keel_arena *arena,
						   struct meta_broker_heartbeat_request *out,
						   struct meta_errbuf *eb)
{
	DEC_BEGIN("BrokerHeartbeat");
	out->broker_id = meta_dec_i32(d);
	out->broker_epoch = meta_dec_i64(d);
	out->current_metadata_offset = meta_dec_i64(d);
	out->want_fence = meta_dec_bool(d, "want_fence");
	out->want_shutdown = meta_dec_bool(d, "want_shutdown");
	DEC_END("BrokerHeartbeat");
}

enum keel_err meta_encode_broker_heartbeat_response(struct keel_wbuf *w,
						    const struct meta_broker_heartbeat_response *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	enc_error(w, m->error, m->error_message);
	keel_wbuf_bool(w, m->is_caught_up);
	keel_wbuf_bool(w, m->is_fenced);
	keel_wbuf_bool(w, m->should_shut_down);
	return meta_enc_result(w);
}

enum keel_err meta_decode_broker_heartbeat_response(const void *data, size_t size,
						    struct keel_arena *arena,
						    struct meta_broker_heartbeat_response *out,
						    struct meta_errbuf *eb)
{
	DEC_BEGIN("BrokerHeartbeat response");
	dec_error(d, &out->error, &out->error_message);
	out->is_caught_up = meta_dec_bool(d, "is_caught_up");
	out->is_fenced = meta_dec_bool(d, "is_fenced");
	out->should_shut_down = meta_dec_bool(d, "should_shut_down");
	DEC_END("BrokerHeartbeat response");
}

/* ---- UnregisterBroker ---- */

enum keel_err meta_encode_unregister_broker_request(struct keel_wbuf *w,
						    const struct meta_unregister_broker_request *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	keel_wbuf_i32(w, m->broker_id);
	return meta_enc_result(w);
}

enum keel_err meta_decode_unregister_broker_request(const void *data, size_t size,
						    struct keel_arena *arena,
						    struct meta_unregister_broker_request *out,
						    struct meta_errbuf *eb)
{
	DEC_BEGIN("UnregisterBroker");
	out->broker_id = meta_dec_i32(d);
	DEC_END("UnregisterBroker");
}

enum keel_err meta_encode_unregister_broker_response(
	struct keel_wbuf *w, const struct meta_unregister_broker_response *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	enc_error(w, m->error, m->error_message);
	return meta_enc_result(w);
}

enum keel_err meta_decode_unregister_broker_response(const void *data, size_t size,
						     struct keel_arena *arena,
						     struct meta_unregister_broker_response *out,
						     struct meta_errbuf *eb)
{
	DEC_BEGIN("UnregisterBroker response");
	dec_error(d, &out->error, &out->error_message);
	DEC_END("UnregisterBroker response");
}

/* ---- AllocateProducerIds ---- */

enum keel_err meta_encode_allocate_producer_ids_request(
	struct keel_wbuf *w, const struct meta_allocate_producer_ids_request *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	keel_wbuf_i32(w, m->broker_id);
	keel_wbuf_i64(w, m->broker_epoch);
	return meta_enc_result(w);
}

enum keel_err meta_decode_allocate_producer_ids_request(
	const void *data, size_t size, struct keel_arena *arena,
	struct meta_allocate_producer_ids_request *out, struct meta_errbuf *eb)
{
	DEC_BEGIN("AllocateProducerIds");
	out->broker_id = meta_dec_i32(d);
	out->broker_epoch = meta_dec_i64(d);
	DEC_END("AllocateProducerIds");
}

enum keel_err meta_encode_allocate_producer_ids_response(
	struct keel_wbuf *w, const struct meta_allocate_producer_ids_response *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	enc_error(w, m->error, m->error_message);
	keel_wbuf_i64(w, m->producer_id_start);
	keel_wbuf_i32(w, m->producer_id_len);
	return meta_enc_result(w);
}

enum keel_err meta_decode_allocate_producer_ids_response(
	const void *data, size_t size, struct keel_arena *arena,
	struct meta_allocate_producer_ids_response *out, struct meta_errbuf *eb)
{
	DEC_BEGIN("AllocateProducerIds response");
	dec_error(d, &out->error, &out->error_message);
	out->producer_id_start = meta_dec_i64(d);
	out->producer_id_len = meta_dec_i32(d);
	DEC_END("AllocateProducerIds response");
}

/* ---- CreateTopics ---- */

/* CreateTopics body version 1 adds each topic's manual assignment. */
#define CREATE_TOPICS_VERSION_ASSIGN 1

static void enc_assignments(struct keel_wbuf *w, const struct meta_replica_assignment *a,
			    uint32_t n)
{
	keel_wbuf_i32(w, (int32_t)n);
	for (uint32_t i = 0; i < n; i++) {
		keel_wbuf_i32(w, a[i].partition_index);
		meta_enc_i32_array(w, a[i].broker_ids, a[i].broker_count);
	}
}

static const struct meta_replica_assignment *dec_assignments(struct meta_dec *d, uint32_t *count)
{
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 8, "assignments");
	struct meta_replica_assignment *a = meta_dec_alloc(d, n, sizeof(*a));
	for (uint32_t i = 0; a != NULL && i < n; i++) {
		a[i].partition_index = meta_dec_i32(d);
		a[i].broker_ids =
			meta_dec_i32_array(d, META_MAX_REPLICAS, &a[i].broker_count, "replicas");
	}
	*count = meta_dec_ok(d) ? n : 0;
	return a;
}

enum keel_err meta_encode_create_topics_request(struct keel_wbuf *w,
						const struct meta_create_topics_request *m)
{
	bool assigned = false;
	for (uint32_t i = 0; i < m->topic_count; i++) {
		assigned = assigned || m->topics[i].assignment_count > 0;
	}
	keel_wbuf_u16(w, assigned ? CREATE_TOPICS_VERSION_ASSIGN : PROTO_VERSION);
	keel_wbuf_i32(w, (int32_t)m->topic_count);
	for (uint32_t i = 0; i < m->topic_count; i++) {
		const struct meta_create_topic *t = &m->topics[i];
		meta_enc_str(w, t->name);
		keel_wbuf_i32(w, t->num_partitions);
		keel_wbuf_u16(w, (uint16_t)t->replication_factor);
		enc_kvs(w, t->configs, t->config_count);
		if (assigned) {
			enc_assignments(w, t->assignments, t->assignment_count);
		}
	}
	keel_wbuf_bool(w, m->validate_only);
	return meta_enc_result(w);
}

enum keel_err meta_decode_create_topics_request(const void *data, size_t size,
						struct keel_arena *arena,
						struct meta_create_topics_request *out,
						struct meta_errbuf *eb)
{
	DEC_OPEN();
	int16_t version = dec_version_upto(d, "CreateTopics", CREATE_TOPICS_VERSION_ASSIGN);
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 14, "topics");
	struct meta_create_topic *t = meta_dec_alloc(d, n, sizeof(*t));
	for (uint32_t i = 0; t != NULL && i < n; i++) {
		t[i].name = meta_dec_str(d, false, META_MAX_SHORT_STRING, "topic name");
		t[i].num_partitions = meta_dec_i32(d);
		t[i].replication_factor = meta_dec_i16(d);
		t[i].configs = dec_kvs(d, &t[i].config_count);
		if (version >= CREATE_TOPICS_VERSION_ASSIGN) {
			t[i].assignments = dec_assignments(d, &t[i].assignment_count);
		}
	}
	out->topics = t;
	out->topic_count = n;
	out->validate_only = meta_dec_bool(d, "validate_only");
	bool assigned = false;
	for (uint32_t i = 0; t != NULL && i < n && meta_dec_ok(d); i++) {
		assigned = assigned || t[i].assignment_count > 0;
	}
	if (meta_dec_ok(d) && version >= CREATE_TOPICS_VERSION_ASSIGN && !assigned) {
		/* Version 1 is written only with an assignment: one encoding. */
		meta_dec_fail(d, KEEL_CORRUPT, "CreateTopics",
			      "version 1 is for a manual assignment, and none is given");
	}
	DEC_END("CreateTopics");
}

enum keel_err meta_encode_create_topics_response(struct keel_wbuf *w,
						 const struct meta_create_topics_response *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	keel_wbuf_i32(w, (int32_t)m->topic_count);
	for (uint32_t i = 0; i < m->topic_count; i++) {
		const struct meta_create_topic_result *t = &m->topics[i];
		meta_enc_str(w, t->name);
		meta_enc_uuid(w, t->topic_id);
		enc_error(w, t->error, t->error_message);
		keel_wbuf_i32(w, t->num_partitions);
		keel_wbuf_u16(w, (uint16_t)t->replication_factor);
	}
	return meta_enc_result(w);
}

enum keel_err meta_decode_create_topics_response(const void *data, size_t size,
						 struct keel_arena *arena,
						 struct meta_create_topics_response *out,
						 struct meta_errbuf *eb)
{
	DEC_BEGIN("CreateTopics response");
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 32, "topics");
	struct meta_create_topic_result *t = meta_dec_alloc(d, n, sizeof(*t));
	for (uint32_t i = 0; t != NULL && i < n; i++) {
		t[i].name = meta_dec_str(d, false, META_MAX_SHORT_STRING, "topic name");
		meta_dec_uuid(d, t[i].topic_id);
		dec_error(d, &t[i].error, &t[i].error_message);
		t[i].num_partitions = meta_dec_i32(d);
		t[i].replication_factor = meta_dec_i16(d);
	}
	out->topics = t;
	out->topic_count = n;
	DEC_END("CreateTopics response");
}

/* ---- DeleteTopics ---- */

enum keel_err meta_encode_delete_topics_request(struct keel_wbuf *w,
						const struct meta_delete_topics_request *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	enc_strs(w, m->names, m->name_count);
	return meta_enc_result(w);
}

enum keel_err meta_decode_delete_topics_request(const void *data, size_t size,
						struct keel_arena *arena,
						struct meta_delete_topics_request *out,
						struct meta_errbuf *eb)
{
	DEC_BEGIN("DeleteTopics");
	out->names = dec_strs(d, &out->name_count, "topic name");
	DEC_END("DeleteTopics");
}

enum keel_err meta_encode_delete_topics_response(struct keel_wbuf *w,
						 const struct meta_delete_topics_response *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	keel_wbuf_i32(w, (int32_t)m->result_count);
	for (uint32_t i = 0; i < m->result_count; i++) {
		meta_enc_str(w, m->results[i].name);
		meta_enc_uuid(w, m->results[i].topic_id);
		enc_error(w, m->results[i].error, m->results[i].error_message);
	}
	return meta_enc_result(w);
}

enum keel_err meta_decode_delete_topics_response(const void *data, size_t size,
						 struct keel_arena *arena,
						 struct meta_delete_topics_response *out,
						 struct meta_errbuf *eb)
{
	DEC_BEGIN("DeleteTopics response");
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 26, "results");
	struct meta_delete_topic_result *r = meta_dec_alloc(d, n, sizeof(*r));
	for (uint32_t i = 0; r != NULL && i < n; i++) {
		r[i].name = meta_dec_str(d, false, META_MAX_SHORT_STRING, "topic name");
		meta_dec_uuid(d, r[i].topic_id);
		dec_error(d, &r[i].error, &r[i].error_message);
	}
	out->results = r;
	out->result_count = n;
	DEC_END("DeleteTopics response");
}

/* ---- AlterConfigs ---- */

enum keel_err meta_encode_alter_configs_request(struct keel_wbuf *w,
						const struct meta_alter_configs_request *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	keel_wbuf_i32(w, (int32_t)m->resource_count);
	for (uint32_t i = 0; i < m->resource_count; i++) {
		const struct meta_alter_config_resource *r = &m->resources[i];
		keel_wbuf_u8(w, r->resource_type);
		meta_enc_str(w, r->resource_name);
		enc_kvs(w, r->entries, r->entry_count);
	}
	keel_wbuf_bool(w, m->validate_only);
	return meta_enc_result(w);
}

enum keel_err meta_decode_alter_configs_request(const void *data, size_t size,
						struct keel_arena *arena,
						struct meta_alter_configs_request *out,
						struct meta_errbuf *eb)
{
	DEC_BEGIN("AlterConfigs");
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 9, "resources");
	struct meta_alter_config_resource *r = meta_dec_alloc(d, n, sizeof(*r));
	for (uint32_t i = 0; r != NULL && i < n; i++) {
		r[i].resource_type = (uint8_t)meta_dec_i8(d);
		r[i].resource_name = meta_dec_str(d, false, META_MAX_SHORT_STRING, "resource name");
		r[i].entries = dec_kvs(d, &r[i].entry_count);
	}
	out->resources = r;
	out->resource_count = n;
	out->validate_only = meta_dec_bool(d, "validate_only");
	DEC_END("AlterConfigs");
}

enum keel_err meta_encode_alter_configs_response(struct keel_wbuf *w,
						 const struct meta_alter_configs_response *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	keel_wbuf_i32(w, (int32_t)m->result_count);
	for (uint32_t i = 0; i < m->result_count; i++) {
		keel_wbuf_u8(w, m->results[i].resource_type);
		meta_enc_str(w, m->results[i].resource_name);
		enc_error(w, m->results[i].error, m->results[i].error_message);
	}
	return meta_enc_result(w);
}

enum keel_err meta_decode_alter_configs_response(const void *data, size_t size,
						 struct keel_arena *arena,
						 struct meta_alter_configs_response *out,
						 struct meta_errbuf *eb)
{
	DEC_BEGIN("AlterConfigs response");
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 11, "results");
	struct meta_alter_config_result *r = meta_dec_alloc(d, n, sizeof(*r));
	for (uint32_t i = 0; r != NULL && i < n; i++) {
		r[i].resource_type = (uint8_t)meta_dec_i8(d);
		r[i].resource_name = meta_dec_str(d, false, META_MAX_SHORT_STRING, "resource name");
		dec_error(d, &r[i].error, &r[i].error_message);
	}
	out->results = r;
	out->result_count = n;
	DEC_END("AlterConfigs response");
}

/* ---- AlterPartition ---- */

enum keel_err meta_encode_alter_partition_request(struct keel_wbuf *w,
						  const struct meta_alter_partition_request *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	keel_wbuf_i32(w, m->broker_id);
	keel_wbuf_i64(w, m->broker_epoch);
	keel_wbuf_i32(w, (int32_t)m->topic_count);
	for (uint32_t i = 0; i < m->topic_count; i++) {
		const struct meta_alter_partition_topic *t = &m->topics[i];
		meta_enc_uuid(w, t->topic_id);
		keel_wbuf_i32(w, (int32_t)t->partition_count);
		for (uint32_t j = 0; j < t->partition_count; j++) {
			const struct meta_alter_partition_item *p = &t->partitions[j];
			keel_wbuf_i32(w, p->partition_id);
			keel_wbuf_i32(w, p->leader_epoch);
			keel_wbuf_i32(w, p->partition_epoch);
			meta_enc_i32_array(w, p->new_isr, p->new_isr_count);
			keel_wbuf_u8(w, p->leader_recovery_state);
		}
	}
	return meta_enc_result(w);
}

enum keel_err meta_decode_alter_partition_request(const void *data, size_t size,
						  struct keel_arena *arena,
						  struct meta_alter_partition_request *out,
						  struct meta_errbuf *eb)
{
	DEC_BEGIN("AlterPartition");
	out->broker_id = meta_dec_i32(d);
	out->broker_epoch = meta_dec_i64(d);
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 20, "topics");
	struct meta_alter_partition_topic *t = meta_dec_alloc(d, n, sizeof(*t));
	for (uint32_t i = 0; t != NULL && i < n; i++) {
		meta_dec_uuid(d, t[i].topic_id);
		uint32_t np = meta_dec_count(d, META_PROTO_MAX_ITEMS, 17, "partitions");
		struct meta_alter_partition_item *p = meta_dec_alloc(d, np, sizeof(*p));
		for (uint32_t j = 0; p != NULL && j < np; j++) {
			p[j].partition_id = meta_dec_i32(d);
			p[j].leader_epoch = meta_dec_i32(d);
			p[j].partition_epoch = meta_dec_i32(d);
			p[j].new_isr = meta_dec_i32_array(d, META_MAX_REPLICAS, &p[j].new_isr_count,
							  "new_isr");
			p[j].leader_recovery_state = (uint8_t)meta_dec_i8(d);
		}
		t[i].partitions = p;
		t[i].partition_count = meta_dec_ok(d) ? np : 0;
	}
	out->topics = t;
	out->topic_count = n;
	DEC_END("AlterPartition");
}

enum keel_err meta_encode_alter_partition_response(struct keel_wbuf *w,
						   const struct meta_alter_partition_response *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	enc_error(w, m->error, m->error_message);
	keel_wbuf_i32(w, (int32_t)m->topic_count);
	for (uint32_t i = 0; i < m->topic_count; i++) {
		const struct meta_alter_partition_topic_result *t = &m->topics[i];
		meta_enc_uuid(w, t->topic_id);
		keel_wbuf_i32(w, (int32_t)t->partition_count);
		for (uint32_t j = 0; j < t->partition_count; j++) {
			const struct meta_alter_partition_result *p = &t->partitions[j];
			keel_wbuf_i32(w, p->partition_id);
			keel_wbuf_u16(w, (uint16_t)p->error);
			keel_wbuf_i32(w, p->leader);
			keel_wbuf_i32(w, p->leader_epoch);
			keel_wbuf_i32(w, p->partition_epoch);
			meta_enc_i32_array(w, p->isr, p->isr_count);
			keel_wbuf_u8(w, p->leader_recovery_state);
		}
	}
	return meta_enc_result(w);
}

enum keel_err meta_decode_alter_partition_response(const void *data, size_t size,
						   struct keel_arena *arena,
						   struct meta_alter_partition_response *out,
						   struct meta_errbuf *eb)
{
	DEC_BEGIN("AlterPartition response");
	dec_error(d, &out->error, &out->error_message);
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 20, "topics");
	struct meta_alter_partition_topic_result *t = meta_dec_alloc(d, n, sizeof(*t));
	for (uint32_t i = 0; t != NULL && i < n; i++) {
		meta_dec_uuid(d, t[i].topic_id);
		uint32_t np = meta_dec_count(d, META_PROTO_MAX_ITEMS, 23, "partitions");
		struct meta_alter_partition_result *p = meta_dec_alloc(d, np, sizeof(*p));
		for (uint32_t j = 0; p != NULL && j < np; j++) {
			p[j].partition_id = meta_dec_i32(d);
			p[j].error = meta_dec_i16(d);
			p[j].leader = meta_dec_i32(d);
			p[j].leader_epoch = meta_dec_i32(d);
			p[j].partition_epoch = meta_dec_i32(d);
			p[j].isr = meta_dec_i32_array(d, META_MAX_REPLICAS, &p[j].isr_count, "isr");
			p[j].leader_recovery_state = (uint8_t)meta_dec_i8(d);
		}
		t[i].partitions = p;
		t[i].partition_count = meta_dec_ok(d) ? np : 0;
	}
	out->topics = t;
	out->topic_count = n;
	DEC_END("AlterPartition response");
}

/* ---- DescribeCluster ---- */

enum keel_err meta_encode_describe_cluster_request(struct keel_wbuf *w,
						   const struct meta_describe_cluster_request *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	enc_strs(w, m->topic_names, m->topic_name_count);
	keel_wbuf_bool(w, m->include_brokers);
	keel_wbuf_bool(w, m->include_topics);
	return meta_enc_result(w);
}

enum keel_err meta_decode_describe_cluster_request(const void *data, size_t size,
						   struct keel_arena *arena,
						   struct meta_describe_cluster_request *out,
						   struct meta_errbuf *eb)
{
	DEC_BEGIN("DescribeCluster");
	out->topic_names = dec_strs(d, &out->topic_name_count, "topic name");
	out->include_brokers = meta_dec_bool(d, "include_brokers");
	out->include_topics = meta_dec_bool(d, "include_topics");
	DEC_END("DescribeCluster");
}

static void enc_describe_topic(struct keel_wbuf *w, const struct meta_describe_topic *t)
{
	meta_enc_str(w, t->name);
	meta_enc_uuid(w, t->topic_id);
	keel_wbuf_u16(w, (uint16_t)t->error);
	keel_wbuf_i32(w, (int32_t)t->partition_count);
	for (uint32_t j = 0; j < t->partition_count; j++) {
		const struct meta_describe_partition *p = &t->partitions[j];
		keel_wbuf_i32(w, p->partition_id);
		keel_wbuf_i32(w, p->leader);
		keel_wbuf_i32(w, p->leader_epoch);
		keel_wbuf_i32(w, p->partition_epoch);
		meta_enc_i32_array(w, p->replicas, p->replica_count);
		meta_enc_i32_array(w, p->isr, p->isr_count);
		keel_wbuf_u8(w, p->leader_recovery_state);
		meta_enc_i32_array(w, p->adding, p->adding_count);
		meta_enc_i32_array(w, p->removing, p->removing_count);
	}
	enc_kvs(w, t->configs, t->config_count);
}

enum keel_err meta_encode_describe_cluster_response(struct keel_wbuf *w,
						    const struct meta_describe_cluster_response *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	keel_wbuf_u16(w, (uint16_t)m->error);
	keel_wbuf_i32(w, m->controller_id);
	keel_wbuf_i32(w, m->controller_epoch);
	keel_wbuf_i64(w, m->metadata_offset);
	keel_wbuf_i32(w, (int32_t)m->broker_count);
	for (uint32_t i = 0; i < m->broker_count; i++) {
		const struct meta_describe_broker *b = &m->brokers[i];
		keel_wbuf_i32(w, b->id);
		keel_wbuf_i64(w, b->epoch);
		meta_enc_uuid(w, b->incarnation_id);
		enc_endpoints(w, b->endpoints, b->endpoint_count);
		meta_enc_str(w, b->rack);
		keel_wbuf_bool(w, b->fenced);
		keel_wbuf_bool(w, b->in_controlled_shutdown);
	}
	keel_wbuf_i32(w, (int32_t)m->topic_count);
	for (uint32_t i = 0; i < m->topic_count; i++) {
		enc_describe_topic(w, &m->topics[i]);
	}
	return meta_enc_result(w);
}

static void dec_describe_topic(struct meta_dec *d, struct meta_describe_topic *t)
{
	t->name = meta_dec_str(d, false, META_MAX_SHORT_STRING, "topic name");
	meta_dec_uuid(d, t->topic_id);
	t->error = meta_dec_i16(d);
	uint32_t np = meta_dec_count(d, META_PROTO_MAX_ITEMS, 33, "partitions");
	struct meta_describe_partition *p = meta_dec_alloc(d, np, sizeof(*p));
	for (uint32_t j = 0; p != NULL && j < np; j++) {
		p[j].partition_id = meta_dec_i32(d);
		p[j].leader = meta_dec_i32(d);
		p[j].leader_epoch = meta_dec_i32(d);
		p[j].partition_epoch = meta_dec_i32(d);
		p[j].replicas =
			meta_dec_i32_array(d, META_MAX_REPLICAS, &p[j].replica_count, "replicas");
		p[j].isr = meta_dec_i32_array(d, META_MAX_REPLICAS, &p[j].isr_count, "isr");
		p[j].leader_recovery_state = (uint8_t)meta_dec_i8(d);
		p[j].adding = meta_dec_i32_array(d, META_MAX_REPLICAS, &p[j].adding_count, "adding");
		p[j].removing =
			meta_dec_i32_array(d, META_MAX_REPLICAS, &p[j].removing_count, "removing");
	}
	t->partitions = p;
	t->partition_count = meta_dec_ok(d) ? np : 0;
	t->configs = dec_kvs(d, &t->config_count);
}

enum keel_err meta_decode_describe_cluster_response(const void *data, size_t size,
						    struct keel_arena *arena,
						    struct meta_describe_cluster_response *out,
						    struct meta_errbuf *eb)
{
	DEC_BEGIN("DescribeCluster response");
	out->error = meta_dec_i16(d);
	out->controller_id = meta_dec_i32(d);
	out->controller_epoch = meta_dec_i32(d);
	out->metadata_offset = meta_dec_i64(d);
	uint32_t nb = meta_dec_count(d, META_PROTO_MAX_ITEMS, 38, "brokers");
	struct meta_describe_broker *b = meta_dec_alloc(d, nb, sizeof(*b));
	for (uint32_t i = 0; b != NULL && i < nb; i++) {
		b[i].id = meta_dec_i32(d);
		b[i].epoch = meta_dec_i64(d);
		meta_dec_uuid(d, b[i].incarnation_id);
		b[i].endpoints = dec_endpoints(d, &b[i].endpoint_count);
		b[i].rack = meta_dec_str(d, true, META_MAX_SHORT_STRING, "rack");
		b[i].fenced = meta_dec_bool(d, "fenced");
		b[i].in_controlled_shutdown = meta_dec_bool(d, "in_controlled_shutdown");
	}
	out->brokers = b;
	out->broker_count = meta_dec_ok(d) ? nb : 0;
	uint32_t nt = meta_dec_count(d, META_PROTO_MAX_ITEMS, 30, "topics");
	struct meta_describe_topic *t = meta_dec_alloc(d, nt, sizeof(*t));
	for (uint32_t i = 0; t != NULL && i < nt; i++) {
		dec_describe_topic(d, &t[i]);
	}
	out->topics = t;
	out->topic_count = meta_dec_ok(d) ? nt : 0;
	DEC_END("DescribeCluster response");
}

static void describe_topic_from_image(const struct meta_image *img, const struct meta_topic *t,
				      struct meta_describe_topic *out,
				      struct meta_describe_partition *parts,
				      struct meta_config_kv *kvs)
{
	out->name = t->name;
	memcpy(out->topic_id, t->id, META_UUID_SIZE);
	out->error = META_ERR_NONE;
	for (uint32_t p = 0; p < t->partition_count; p++) {
		const struct meta_partition *src = &t->partitions[p];
		parts[p] = (struct meta_describe_partition){
			.partition_id = (int32_t)p,
			.leader = src->leader,
			.leader_epoch = src->leader_epoch,
			.partition_epoch = src->partition_epoch,
			.replicas = src->replicas,
			.replica_count = src->replica_count,
			.isr = src->isr,
			.isr_count = src->isr_count,
			.leader_recovery_state = src->leader_recovery_state,
			.adding = src->adding,
			.adding_count = src->adding_count,
			.removing = src->removing,
			.removing_count = src->removing_count,
		};
	}
	out->partitions = parts;
	out->partition_count = t->partition_count;
	uint32_t first;
	uint32_t n = meta_image_config_range(img, META_RESOURCE_TOPIC, t->name, &first);
	for (uint32_t i = 0; i < n; i++) {
		kvs[i].key = img->configs[first + i].key;
		kvs[i].value = img->configs[first + i].value;
	}
	out->configs = kvs;
	out->config_count = n;
}

static enum keel_err describe_one(const struct meta_image *img, const struct meta_topic *t,
				  struct keel_arena *arena, struct meta_describe_topic *out)
{
	uint32_t first;
	uint32_t nc = meta_image_config_range(img, META_RESOURCE_TOPIC, t->name, &first);
	struct meta_describe_partition *parts =
		keel_arena_alloc(arena, (size_t)t->partition_count * sizeof(*parts));
	struct meta_config_kv *kvs = keel_arena_alloc(arena, (size_t)nc * sizeof(*kvs));
	if (parts == NULL || kvs == NULL) {
		return KEEL_NOMEM;
	}
	describe_topic_from_image(img, t, out, parts, kvs);
	return KEEL_OK;
}

enum keel_err meta_describe_cluster(const struct meta_image *img,
				    const struct meta_describe_cluster_request *req,
				    struct keel_arena *arena,
				    struct meta_describe_cluster_response *resp)
{
	memset(resp, 0, sizeof(*resp));
	resp->error = META_ERR_NONE;
	resp->controller_id = img->controller_id;
	resp->controller_epoch = img->controller_epoch;
	resp->metadata_offset = img->offset;
	if (req->include_brokers) {
		struct meta_describe_broker *b =
			keel_arena_alloc(arena, (size_t)img->broker_count * sizeof(*b));
		if (b == NULL) {
			return KEEL_NOMEM;
		}
		for (uint32_t i = 0; i < img->broker_count; i++) {
			const struct meta_broker *src = img->brokers[i];
			b[i] = (struct meta_describe_broker){
				.id = src->id,
				.epoch = src->epoch,
				.endpoints = src->endpoints,
				.endpoint_count = src->endpoint_count,
				.rack = src->rack,
				.fenced = src->fenced,
				.in_controlled_shutdown = src->in_controlled_shutdown,
			};
			memcpy(b[i].incarnation_id, src->incarnation_id, META_UUID_SIZE);
		}
		resp->brokers = b;
		resp->broker_count = img->broker_count;
	}
	if (!req->include_topics) {
		return KEEL_OK;
	}
	bool all = req->topic_name_count == 0;
	uint32_t n = all ? img->topic_count : req->topic_name_count;
	struct meta_describe_topic *topics = keel_arena_alloc(arena, (size_t)n * sizeof(*topics));
	if (topics == NULL) {
		return KEEL_NOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct meta_topic *t =
			all ? img->topics[i] : meta_image_topic(img, req->topic_names[i]);
		if (t == NULL) {
			memset(&topics[i], 0, sizeof(topics[i]));
			topics[i].name = req->topic_names[i];
			topics[i].error = META_ERR_UNKNOWN_TOPIC_OR_PARTITION;
			continue;
		}
		enum keel_err err = describe_one(img, t, arena, &topics[i]);
		if (err != KEEL_OK) {
			return err;
		}
	}
	resp->topics = topics;
	resp->topic_count = n;
	return KEEL_OK;
}

/* ---- FetchMetadata ---- */

enum keel_err meta_encode_fetch_metadata_request(struct keel_wbuf *w,
						 const struct meta_fetch_metadata_request *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	keel_wbuf_i64(w, m->from_offset);
	keel_wbuf_i32(w, m->max_bytes);
	return meta_enc_result(w);
}

enum keel_err meta_decode_fetch_metadata_request(const void *data, size_t size,
						 struct keel_arena *arena,
						 struct meta_fetch_metadata_request *out,
						 struct meta_errbuf *eb)
{
	DEC_BEGIN("FetchMetadata");
	out->from_offset = meta_dec_i64(d);
	out->max_bytes = meta_dec_i32(d);
	DEC_END("FetchMetadata");
}

enum keel_err meta_encode_fetch_metadata_response(struct keel_wbuf *w,
						  const struct meta_fetch_metadata_response *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	keel_wbuf_u16(w, (uint16_t)m->error);
	keel_wbuf_i64(w, m->high_watermark);
	keel_wbuf_i64(w, m->snapshot_offset);
	meta_enc_bytes(w, m->snapshot, m->snapshot_size, m->snapshot == NULL);
	keel_wbuf_i32(w, (int32_t)m->batch_count);
	for (uint32_t i = 0; i < m->batch_count; i++) {
		keel_wbuf_i64(w, m->batches[i].offset);
		meta_enc_bytes(w, m->batches[i].data, m->batches[i].size, false);
	}
	return meta_enc_result(w);
}

enum keel_err meta_decode_fetch_metadata_response(const void *data, size_t size,
						  struct keel_arena *arena,
						  struct meta_fetch_metadata_response *out,
						  struct meta_errbuf *eb)
{
	DEC_BEGIN("FetchMetadata response");
	out->error = meta_dec_i16(d);
	out->high_watermark = meta_dec_i64(d);
	out->snapshot_offset = meta_dec_i64(d);
	out->snapshot =
		meta_dec_bytes(d, true, META_FETCH_MAX_BYTES, &out->snapshot_size, "snapshot");
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 12, "batches");
	struct meta_fetch_batch *b = meta_dec_alloc(d, n, sizeof(*b));
	for (uint32_t i = 0; b != NULL && i < n; i++) {
		b[i].offset = meta_dec_i64(d);
		b[i].data = meta_dec_bytes(d, false, META_FETCH_MAX_BYTES, &b[i].size, "batch");
	}
	out->batches = b;
	out->batch_count = meta_dec_ok(d) ? n : 0;
	DEC_END("FetchMetadata response");
}

/* ---- CreatePartitions ---- */

enum keel_err meta_encode_create_partitions_request(struct keel_wbuf *w,
						    const struct meta_create_partitions_request *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	keel_wbuf_i32(w, (int32_t)m->topic_count);
	for (uint32_t i = 0; i < m->topic_count; i++) {
		const struct meta_create_partitions_topic *t = &m->topics[i];
		meta_enc_str(w, t->name);
		keel_wbuf_i32(w, t->count);
		keel_wbuf_i32(w, (int32_t)t->assignment_count);
		for (uint32_t a = 0; a < t->assignment_count; a++) {
			meta_enc_i32_array(w, t->assignments[a], t->assignment_sizes[a]);
		}
	}
	keel_wbuf_bool(w, m->validate_only);
	return meta_enc_result(w);
}

enum keel_err meta_decode_create_partitions_request(const void *data, size_t size,
						    struct keel_arena *arena,
						    struct meta_create_partitions_request *out,
						    struct meta_errbuf *eb)
{
	DEC_BEGIN("CreatePartitions");
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 12, "topics");
	struct meta_create_partitions_topic *t = meta_dec_alloc(d, n, sizeof(*t));
	for (uint32_t i = 0; t != NULL && i < n; i++) {
		t[i].name = meta_dec_str(d, false, META_MAX_SHORT_STRING, "topic name");
		t[i].count = meta_dec_i32(d);
		uint32_t rows = meta_dec_count(d, META_PROTO_MAX_ITEMS, 4, "assignments");
		const int32_t **a = meta_dec_alloc(d, rows, sizeof(*a));
		uint32_t *sizes = meta_dec_alloc(d, rows, sizeof(*sizes));
		for (uint32_t r = 0; a != NULL && sizes != NULL && r < rows; r++) {
			a[r] = meta_dec_i32_array(d, META_MAX_REPLICAS, &sizes[r], "replicas");
		}
		t[i].assignments = a;
		t[i].assignment_sizes = sizes;
		t[i].assignment_count = meta_dec_ok(d) ? rows : 0;
	}
	out->topics = t;
	out->topic_count = n;
	out->validate_only = meta_dec_bool(d, "validate_only");
	DEC_END("CreatePartitions");
}

enum keel_err meta_encode_create_partitions_response(struct keel_wbuf *w,
						     const struct meta_create_partitions_response *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	keel_wbuf_i32(w, (int32_t)m->result_count);
	for (uint32_t i = 0; i < m->result_count; i++) {
		meta_enc_str(w, m->results[i].name);
		enc_error(w, m->results[i].error, m->results[i].error_message);
	}
	return meta_enc_result(w);
}

enum keel_err meta_decode_create_partitions_response(const void *data, size_t size,
						     struct keel_arena *arena,
						     struct meta_create_partitions_response *out,
						     struct meta_errbuf *eb)
{
	DEC_BEGIN("CreatePartitions response");
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 10, "results");
	struct meta_create_partitions_result *r = meta_dec_alloc(d, n, sizeof(*r));
	for (uint32_t i = 0; r != NULL && i < n; i++) {
		r[i].name = meta_dec_str(d, false, META_MAX_SHORT_STRING, "topic name");
		dec_error(d, &r[i].error, &r[i].error_message);
	}
	out->results = r;
	out->result_count = n;
	DEC_END("CreatePartitions response");
}

/* ---- ElectLeaders ---- */

enum keel_err meta_encode_elect_leaders_request(struct keel_wbuf *w,
						const struct meta_elect_leaders_request *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	keel_wbuf_u8(w, (uint8_t)m->election_type);
	keel_wbuf_bool(w, m->all);
	enc_topic_partitions(w, m->topics, m->topic_count);
	return meta_enc_result(w);
}

enum keel_err meta_decode_elect_leaders_request(const void *data, size_t size,
						struct keel_arena *arena,
						struct meta_elect_leaders_request *out,
						struct meta_errbuf *eb)
{
	DEC_BEGIN("ElectLeaders");
	out->election_type = meta_dec_i8(d);
	out->all = meta_dec_bool(d, "all");
	out->topics = dec_topic_partitions(d, &out->topic_count);
	DEC_END("ElectLeaders");
}

enum keel_err meta_encode_elect_leaders_response(struct keel_wbuf *w,
						 const struct meta_elect_leaders_response *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	enc_error(w, m->error, m->error_message);
	enc_partition_results(w, m->results, m->result_count);
	return meta_enc_result(w);
}

enum keel_err meta_decode_elect_leaders_response(const void *data, size_t size,
						 struct keel_arena *arena,
						 struct meta_elect_leaders_response *out,
						 struct meta_errbuf *eb)
{
	DEC_BEGIN("ElectLeaders response");
	dec_error(d, &out->error, &out->error_message);
	out->results = dec_partition_results(d, &out->result_count);
	DEC_END("ElectLeaders response");
}

/* ---- AlterPartitionReassignments ---- */

enum keel_err meta_encode_alter_reassignments_request(
	struct keel_wbuf *w, const struct meta_alter_reassignments_request *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	keel_wbuf_i32(w, (int32_t)m->topic_count);
	for (uint32_t i = 0; i < m->topic_count; i++) {
		const struct meta_reassign_topic *t = &m->topics[i];
		meta_enc_str(w, t->name);
		keel_wbuf_i32(w, (int32_t)t->partition_count);
		for (uint32_t j = 0; j < t->partition_count; j++) {
			const struct meta_reassign_partition *p = &t->partitions[j];
			keel_wbuf_i32(w, p->partition_id);
			keel_wbuf_bool(w, p->cancel);
			meta_enc_i32_array(w, p->replicas, p->cancel ? 0 : p->replica_count);
			/* (the decoder refuses a cancel with replicas: one encoding) */
		}
	}
	return meta_enc_result(w);
}

enum keel_err meta_decode_alter_reassignments_request(const void *data, size_t size,
						      struct keel_arena *arena,
						      struct meta_alter_reassignments_request *out,
						      struct meta_errbuf *eb)
{
	DEC_BEGIN("AlterPartitionReassignments");
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 8, "topics");
	struct meta_reassign_topic *t = meta_dec_alloc(d, n, sizeof(*t));
	for (uint32_t i = 0; t != NULL && i < n; i++) {
		t[i].name = meta_dec_str(d, false, META_MAX_SHORT_STRING, "topic name");
		uint32_t np = meta_dec_count(d, META_PROTO_MAX_ITEMS, 9, "partitions");
		struct meta_reassign_partition *p = meta_dec_alloc(d, np, sizeof(*p));
		for (uint32_t j = 0; p != NULL && j < np; j++) {
			p[j].partition_id = meta_dec_i32(d);
			p[j].cancel = meta_dec_bool(d, "cancel");
			p[j].replicas = meta_dec_i32_array(d, META_MAX_REPLICAS, &p[j].replica_count,
							   "replicas");
			if (p[j].cancel && p[j].replica_count > 0) {
				meta_dec_fail(d, KEEL_CORRUPT, "replicas", "a cancel carries none");
			}
		}
		t[i].partitions = p;
		t[i].partition_count = meta_dec_ok(d) ? np : 0;
	}
	out->topics = t;
	out->topic_count = n;
	DEC_END("AlterPartitionReassignments");
}

enum keel_err meta_encode_alter_reassignments_response(
	struct keel_wbuf *w, const struct meta_alter_reassignments_response *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	enc_error(w, m->error, m->error_message);
	enc_partition_results(w, m->results, m->result_count);
	return meta_enc_result(w);
}

enum keel_err meta_decode_alter_reassignments_response(
	const void *data, size_t size, struct keel_arena *arena,
	struct meta_alter_reassignments_response *out, struct meta_errbuf *eb)
{
	DEC_BEGIN("AlterPartitionReassignments response");
	dec_error(d, &out->error, &out->error_message);
	out->results = dec_partition_results(d, &out->result_count);
	DEC_END("AlterPartitionReassignments response");
}

/* ---- ListPartitionReassignments ---- */

enum keel_err meta_encode_list_reassignments_request(
	struct keel_wbuf *w, const struct meta_list_reassignments_request *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	enc_topic_partitions(w, m->topics, m->topic_count);
	return meta_enc_result(w);
}

enum keel_err meta_decode_list_reassignments_request(const void *data, size_t size,
						     struct keel_arena *arena,
						     struct meta_list_reassignments_request *out,
						     struct meta_errbuf *eb)
{
	DEC_BEGIN("ListPartitionReassignments");
	out->topics = dec_topic_partitions(d, &out->topic_count);
	DEC_END("ListPartitionReassignments");
}

enum keel_err meta_encode_list_reassignments_response(
	struct keel_wbuf *w, const struct meta_list_reassignments_response *m)
{
	keel_wbuf_u16(w, PROTO_VERSION);
	enc_error(w, m->error, m->error_message);
	keel_wbuf_i32(w, (int32_t)m->reassignment_count);
	for (uint32_t i = 0; i < m->reassignment_count; i++) {
		const struct meta_ongoing_reassignment *r = &m->reassignments[i];
		meta_enc_str(w, r->topic);
		keel_wbuf_i32(w, r->partition_id);
		meta_enc_i32_array(w, r->replicas, r->replica_count);
		meta_enc_i32_array(w, r->adding, r->adding_count);
		meta_enc_i32_array(w, r->removing, r->removing_count);
	}
	return meta_enc_result(w);
}

enum keel_err meta_decode_list_reassignments_response(const void *data, size_t size,
						      struct keel_arena *arena,
						      struct meta_list_reassignments_response *out,
						      struct meta_errbuf *eb)
{
	DEC_BEGIN("ListPartitionReassignments response");
	dec_error(d, &out->error, &out->error_message);
	uint32_t n = meta_dec_count(d, META_PROTO_MAX_ITEMS, 20, "reassignments");
	struct meta_ongoing_reassignment *r = meta_dec_alloc(d, n, sizeof(*r));
	for (uint32_t i = 0; r != NULL && i < n; i++) {
		r[i].topic = meta_dec_str(d, false, META_MAX_SHORT_STRING, "topic name");
		r[i].partition_id = meta_dec_i32(d);
		r[i].replicas =
			meta_dec_i32_array(d, META_MAX_REPLICAS, &r[i].replica_count, "replicas");
		r[i].adding = meta_dec_i32_array(d, META_MAX_REPLICAS, &r[i].adding_count, "adding");
		r[i].removing =
			meta_dec_i32_array(d, META_MAX_REPLICAS, &r[i].removing_count, "removing");
	}
	out->reassignments = r;
	out->reassignment_count = meta_dec_ok(d) ? n : 0;
	DEC_END("ListPartitionReassignments response");
}
