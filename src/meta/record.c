/*
 * record.c — encoding, decoding and structural checks of metadata records
 * and batches (see record.h).
 *
 * Bodies at version 0 (all integers big-endian; str/array as in codec.h):
 *
 *   RegisterBroker      broker_id:i32 incarnation_id:16 broker_epoch:i64
 *                       endpoints:[name:str host:str port:u16 protocol:i16]
 *                       rack:str|null fenced:bool in_controlled_shutdown:bool
 *   UnregisterBroker,
 *   FenceBroker,
 *   UnfenceBroker       broker_id:i32 broker_epoch:i64
 *   BrokerRegistration- broker_id:i32 broker_epoch:i64 fenced:i8
 *   Change              in_controlled_shutdown:i8     (-1 = unchanged)
 *   Topic               name:str topic_id:16
 *   Partition           topic_id:16 partition_id:i32 replicas:[i32] isr:[i32]
 *                       leader:i32 leader_epoch:i32 partition_epoch:i32
 *                       leader_recovery_state:u8
 *   PartitionChange     topic_id:16 partition_id:i32 partition_epoch:i32
 *                       fields:u8 [leader:i32 leader_epoch:i32]  (LEADER)
 *                       [isr:[i32]] (ISR) [replicas:[i32]] (REPLICAS)
 *                       [leader_recovery_state:u8] (RECOVERY)
 *   RemoveTopic         topic_id:16
 *   Config              resource_type:u8 resource_name:str key:str
 *                       value:str|null                  (null = delete)
 *   ProducerIds         broker_id:i32 broker_epoch:i64 next_producer_id:i64
 *   NoOp                (empty)
 *
 * Version 1 of Partition appends adding:[i32] removing:[i32] (an ongoing
 * reassignment, KIP-455); version 1 of PartitionChange may set the
 * REASSIGNMENT bit, which appends adding:[i32] removing:[i32] after the
 * other optional fields (both empty = the reassignment is over). Version 0
 * bodies are unchanged and still decode (no reassignment).
 *
 * Structural checks (the same on encode and decode, so whatever encodes
 * decodes): ids and epochs are non-negative, lists hold distinct broker ids,
 * names obey their rules, enums hold known values. Whether a record makes
 * sense against the current state is the image's business (image.c).
 */
#include "meta/record.h"

#include <string.h>

#include "base/assert.h"
#include "meta/codec.h"

struct type_info {
	uint16_t type;
	int max_version;
	const char *name;
};

static const struct type_info type_table[] = {
	{META_REC_REGISTER_BROKER, 0, "RegisterBroker"},
	{META_REC_UNREGISTER_BROKER, 0, "UnregisterBroker"},
	{META_REC_TOPIC, 0, "Topic"},
	{META_REC_PARTITION, 1, "Partition"},
	{META_REC_CONFIG, 0, "Config"},
	{META_REC_PARTITION_CHANGE, 1, "PartitionChange"},
	{META_REC_FENCE_BROKER, 0, "FenceBroker"},
	{META_REC_UNFENCE_BROKER, 0, "UnfenceBroker"},
	{META_REC_REMOVE_TOPIC, 0, "RemoveTopic"},
	{META_REC_PRODUCER_IDS, 0, "ProducerIds"},
	{META_REC_BROKER_REGISTRATION_CHANGE, 0, "BrokerRegistrationChange"},
	{META_REC_NOOP, 0, "NoOp"},
};

static const struct type_info *type_lookup(uint16_t type)
{
	for (size_t i = 0; i < KEEL_ARRAY_SIZE(type_table); i++) {
		if (type_table[i].type == type) {
			return &type_table[i];
		}
	}
	return NULL;
}

int meta_record_max_version(uint16_t type)
{
	const struct type_info *t = type_lookup(type);
	return t != NULL ? t->max_version : -1;
}

const char *meta_record_type_name(uint16_t type)
{
	const struct type_info *t = type_lookup(type);
	return t != NULL ? t->name : "Unknown";
}

/* ---- shared validation ---- */

bool meta_topic_name_valid(const char *name)
{
	if (name == NULL) {
		return false;
	}
	size_t n = strlen(name);
	if (n == 0 || n > META_MAX_TOPIC_NAME) {
		return false;
	}
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
		if (!ok) {
			return false;
		}
	}
	return true;
}

bool meta_uuid_is_zero(const uint8_t id[META_UUID_SIZE])
{
	for (size_t i = 0; i < META_UUID_SIZE; i++) {
		if (id[i] != 0) {
			return false;
		}
	}
	return true;
}

bool meta_list_contains(const int32_t *v, uint32_t count, int32_t id)
{
	for (uint32_t i = 0; i < count; i++) {
		if (v[i] == id) {
			return true;
		}
	}
	return false;
}

bool meta_broker_list_valid(const int32_t *v, uint32_t count)
{
	for (uint32_t i = 0; i < count; i++) {
		if (v[i] < 0 || meta_list_contains(v, i, v[i])) {
			return false;
		}
	}
	return true;
}

static bool short_string_valid(const char *s, bool nullable)
{
	if (s == NULL) {
		return nullable;
	}
	return strlen(s) <= META_MAX_SHORT_STRING;
}

/* Sets the detail and returns false, for the check functions below. */
static bool reject(struct meta_errbuf *eb, uint16_t type, const char *why)
{
	struct meta_fmt f;
	struct meta_fmt *fp = meta_errbuf_begin(eb, &f);
	meta_fmt_str(fp, meta_record_type_name(type));
	meta_fmt_str(fp, ": ");
	meta_fmt_str(fp, why);
	return false;
}

static bool check_register(const struct meta_register_broker_record *r, struct meta_errbuf *eb)
{
	uint16_t t = META_REC_REGISTER_BROKER;
	if (r->broker_id < 0) {
		return reject(eb, t, "negative broker id");
	}
	if (r->broker_epoch < 0) {
		return reject(eb, t, "negative broker epoch");
	}
	if (r->endpoint_count > META_MAX_ENDPOINTS) {
		return reject(eb, t, "too many endpoints");
	}
	for (uint32_t i = 0; i < r->endpoint_count; i++) {
		const struct meta_endpoint *e = &r->endpoints[i];
		if (!short_string_valid(e->name, false) || e->name[0] == '\0') {
			return reject(eb, t, "bad endpoint name");
		}
		if (!short_string_valid(e->host, false)) {
			return reject(eb, t, "bad endpoint host");
		}
		if (e->security_protocol < META_SEC_PLAINTEXT ||
		    e->security_protocol > META_SEC_SASL_SSL) {
			return reject(eb, t, "unknown security protocol");
		}
	}
	if (!short_string_valid(r->rack, true)) {
		return reject(eb, t, "rack too long");
	}
	return true;
}

static bool check_broker_ref(uint16_t t, const struct meta_broker_ref_record *r,
			     struct meta_errbuf *eb)
{
	if (r->broker_id < 0) {
		return reject(eb, t, "negative broker id");
	}
	if (r->broker_epoch < 0) {
		return reject(eb, t, "negative broker epoch");
	}
	return true;
}

static bool tri_state_valid(int8_t v)
{
	return v == META_CHANGE_NONE || v == 0 || v == 1;
}

static bool check_broker_change(const struct meta_broker_change_record *r, struct meta_errbuf *eb)
{
	uint16_t t = META_REC_BROKER_REGISTRATION_CHANGE;
	struct meta_broker_ref_record ref = {r->broker_id, r->broker_epoch};
	if (!check_broker_ref(t, &ref, eb)) {
		return false;
	}
	if (!tri_state_valid(r->fenced) || !tri_state_valid(r->in_controlled_shutdown)) {
		return reject(eb, t, "tri-state field not -1, 0 or 1");
	}
	return true;
}

static bool check_replicas(uint16_t t, const int32_t *v, uint32_t n, struct meta_errbuf *eb)
{
	if (n == 0 || n > META_MAX_REPLICAS) {
		return reject(eb, t, "replica count out of range");
	}
	if (!meta_broker_list_valid(v, n)) {
		return reject(eb, t, "replicas must be distinct non-negative broker ids");
	}
	return true;
}

static bool check_isr(uint16_t t, const int32_t *v, uint32_t n, struct meta_errbuf *eb)
{
	if (n > META_MAX_REPLICAS) {
		return reject(eb, t, "ISR too long");
	}
	if (!meta_broker_list_valid(v, n)) {
		return reject(eb, t, "ISR must hold distinct non-negative broker ids");
	}
	return true;
}

/* adding/removing of a reassignment: distinct broker ids, disjoint, and
 * (when `replicas` is given) both among the replicas. */
static bool check_reassignment(uint16_t t, const int32_t *adding, uint32_t na,
			       const int32_t *removing, uint32_t nr, const int32_t *replicas,
			       uint32_t nrep, struct meta_errbuf *eb)
{
	if (!check_isr(t, adding, na, eb) || !check_isr(t, removing, nr, eb)) {
		return false;
	}
	for (uint32_t i = 0; i < na; i++) {
		if (meta_list_contains(removing, nr, adding[i])) {
			return reject(eb, t, "a replica both adding and removing");
		}
	}
	if (replicas == NULL) {
		return true;
	}
	for (uint32_t i = 0; i < na; i++) {
		if (!meta_list_contains(replicas, nrep, adding[i])) {
			return reject(eb, t, "adding replica not among the replicas");
		}
	}
	for (uint32_t i = 0; i < nr; i++) {
		if (!meta_list_contains(replicas, nrep, removing[i])) {
			return reject(eb, t, "removing replica not among the replicas");
		}
	}
	return true;
}

static bool check_partition(uint16_t version, const struct meta_partition_record *r,
			    struct meta_errbuf *eb)
{
	uint16_t t = META_REC_PARTITION;
	if (r->partition_id < 0 || r->partition_id >= META_MAX_PARTITION_ID) {
		return reject(eb, t, "partition id out of range");
	}
	if (!check_replicas(t, r->replicas, r->replica_count, eb) ||
	    !check_isr(t, r->isr, r->isr_count, eb)) {
		return false;
	}
	if (r->leader < META_NO_LEADER || r->leader_epoch < 0 || r->partition_epoch < 0) {
		return reject(eb, t, "negative leader, leader epoch or partition epoch");
	}
	if (r->leader_recovery_state > META_RECOVERING) {
		return reject(eb, t, "unknown leader recovery state");
	}
	if (version == 0 && (r->adding_count > 0 || r->removing_count > 0)) {
		return reject(eb, t, "a reassignment needs version 1");
	}
	return check_reassignment(t, r->adding, r->adding_count, r->removing, r->removing_count,
				  r->replicas, r->replica_count, eb);
}

static bool check_partition_change(uint16_t version,
				   const struct meta_partition_change_record *r,
				   struct meta_errbuf *eb)
{
	uint16_t t = META_REC_PARTITION_CHANGE;
	if (r->partition_id < 0 || r->partition_id >= META_MAX_PARTITION_ID) {
		return reject(eb, t, "partition id out of range");
	}
	if (r->partition_epoch < 0) {
		return reject(eb, t, "negative partition epoch");
	}
	if (r->fields == 0 || (r->fields & ~META_PC_ALL) != 0) {
		return reject(eb, t, "changed-fields mask empty or unknown");
	}
	if ((r->fields & META_PC_LEADER) &&
	    (r->leader < META_NO_LEADER || r->leader_epoch < 0)) {
		return reject(eb, t, "bad leader or leader epoch");
	}
	if ((r->fields & META_PC_ISR) && !check_isr(t, r->isr, r->isr_count, eb)) {
		return false;
	}
	if ((r->fields & META_PC_REPLICAS) &&
	    !check_replicas(t, r->replicas, r->replica_count, eb)) {
		return false;
	}
	if ((r->fields & META_PC_RECOVERY) && r->leader_recovery_state > META_RECOVERING) {
		return reject(eb, t, "unknown leader recovery state");
	}
	if (r->fields & META_PC_REASSIGNMENT) {
		if (version == 0) {
			return reject(eb, t, "a reassignment needs version 1");
		}
		bool with = (r->fields & META_PC_REPLICAS) != 0;
		return check_reassignment(t, r->adding, r->adding_count, r->removing,
					  r->removing_count, with ? r->replicas : NULL,
					  r->replica_count, eb);
	}
	return true;
}

static bool check_config(const struct meta_config_record *r, struct meta_errbuf *eb)
{
	uint16_t t = META_REC_CONFIG;
	if (r->resource_type != META_RESOURCE_TOPIC && r->resource_type != META_RESOURCE_BROKER) {
		return reject(eb, t, "unknown resource type");
	}
	if (!short_string_valid(r->resource_name, false)) {
		return reject(eb, t, "bad resource name");
	}
	if (r->resource_type == META_RESOURCE_TOPIC && !meta_topic_name_valid(r->resource_name)) {
		return reject(eb, t, "topic resource with an invalid topic name");
	}
	if (!short_string_valid(r->key, false) || r->key[0] == '\0') {
		return reject(eb, t, "bad config key");
	}
	if (r->value != NULL && strlen(r->value) > META_MAX_CONFIG_VALUE) {
		return reject(eb, t, "config value too long");
	}
	return true;
}

/* Structural check of a whole record; false (with a detail) if it breaks a
 * rule that the decoder enforces too. */
static bool record_check(const struct meta_record *rec, struct meta_errbuf *eb)
{
	switch (rec->type) {
	case META_REC_REGISTER_BROKER:
		return check_register(&rec->register_broker, eb);
	case META_REC_UNREGISTER_BROKER:
	case META_REC_FENCE_BROKER:
	case META_REC_UNFENCE_BROKER:
		/* The three share one layout (a union of identical structs). */
		return check_broker_ref(rec->type, &rec->fence_broker, eb);
	case META_REC_BROKER_REGISTRATION_CHANGE:
		return check_broker_change(&rec->broker_change, eb);
	case META_REC_TOPIC:
		if (!meta_topic_name_valid(rec->topic.name)) {
			return reject(eb, rec->type, "invalid topic name");
		}
		if (meta_uuid_is_zero(rec->topic.topic_id)) {
			return reject(eb, rec->type, "zero topic id");
		}
		return true;
	case META_REC_PARTITION:
		return check_partition(rec->version, &rec->partition, eb);
	case META_REC_PARTITION_CHANGE:
		return check_partition_change(rec->version, &rec->partition_change, eb);
	case META_REC_REMOVE_TOPIC:
	case META_REC_NOOP:
		return true;
	case META_REC_CONFIG:
		return check_config(&rec->config, eb);
	case META_REC_PRODUCER_IDS: {
		struct meta_broker_ref_record ref = {rec->producer_ids.broker_id,
						     rec->producer_ids.broker_epoch};
		if (!check_broker_ref(rec->type, &ref, eb)) {
			return false;
		}
		if (rec->producer_ids.next_producer_id <= 0) {
			return reject(eb, rec->type, "next producer id not positive");
		}
		return true;
	}
	default:
		return reject(eb, rec->type, "unknown record type");
	}
}

/* ---- encoding ---- */

static void enc_register(struct keel_wbuf *w, const struct meta_register_broker_record *r)
{
	keel_wbuf_i32(w, r->broker_id);
	meta_enc_uuid(w, r->incarnation_id);
	keel_wbuf_i64(w, r->broker_epoch);
	keel_wbuf_i32(w, (int32_t)r->endpoint_count);
	for (uint32_t i = 0; i < r->endpoint_count; i++) {
		meta_enc_str(w, r->endpoints[i].name);
		meta_enc_str(w, r->endpoints[i].host);
		keel_wbuf_u16(w, r->endpoints[i].port);
		keel_wbuf_u16(w, (uint16_t)r->endpoints[i].security_protocol);
	}
	meta_enc_str(w, r->rack);
	keel_wbuf_bool(w, r->fenced);
	keel_wbuf_bool(w, r->in_controlled_shutdown);
}

static void enc_partition(struct keel_wbuf *w, uint16_t version,
			  const struct meta_partition_record *r)
{
	meta_enc_uuid(w, r->topic_id);
	keel_wbuf_i32(w, r->partition_id);
	meta_enc_i32_array(w, r->replicas, r->replica_count);
	meta_enc_i32_array(w, r->isr, r->isr_count);
	keel_wbuf_i32(w, r->leader);
	keel_wbuf_i32(w, r->leader_epoch);
	keel_wbuf_i32(w, r->partition_epoch);
	keel_wbuf_u8(w, r->leader_recovery_state);
	if (version >= 1) {
		meta_enc_i32_array(w, r->adding, r->adding_count);
		meta_enc_i32_array(w, r->removing, r->removing_count);
	}
}

static void enc_partition_change(struct keel_wbuf *w, const struct meta_partition_change_record *r)
{
	meta_enc_uuid(w, r->topic_id);
	keel_wbuf_i32(w, r->partition_id);
	keel_wbuf_i32(w, r->partition_epoch);
	keel_wbuf_u8(w, r->fields);
	if (r->fields & META_PC_LEADER) {
		keel_wbuf_i32(w, r->leader);
		keel_wbuf_i32(w, r->leader_epoch);
	}
	if (r->fields & META_PC_ISR) {
		meta_enc_i32_array(w, r->isr, r->isr_count);
	}
	if (r->fields & META_PC_REPLICAS) {
		meta_enc_i32_array(w, r->replicas, r->replica_count);
	}
	if (r->fields & META_PC_RECOVERY) {
		keel_wbuf_u8(w, r->leader_recovery_state);
	}
	if (r->fields & META_PC_REASSIGNMENT) {
		meta_enc_i32_array(w, r->adding, r->adding_count);
		meta_enc_i32_array(w, r->removing, r->removing_count);
	}
}

static void enc_body(struct keel_wbuf *w, const struct meta_record *rec)
{
	switch (rec->type) {
	case META_REC_REGISTER_BROKER:
		enc_register(w, &rec->register_broker);
		break;
	case META_REC_UNREGISTER_BROKER:
	case META_REC_FENCE_BROKER:
	case META_REC_UNFENCE_BROKER:
		keel_wbuf_i32(w, rec->fence_broker.broker_id);
		keel_wbuf_i64(w, rec->fence_broker.broker_epoch);
		break;
	case META_REC_BROKER_REGISTRATION_CHANGE:
		keel_wbuf_i32(w, rec->broker_change.broker_id);
		keel_wbuf_i64(w, rec->broker_change.broker_epoch);
		keel_wbuf_u8(w, (uint8_t)rec->broker_change.fenced);
		keel_wbuf_u8(w, (uint8_t)rec->broker_change.in_controlled_shutdown);
		break;
	case META_REC_TOPIC:
		meta_enc_str(w, rec->topic.name);
		meta_enc_uuid(w, rec->topic.topic_id);
		break;
	case META_REC_PARTITION:
		enc_partition(w, rec->version, &rec->partition);
		break;
	case META_REC_PARTITION_CHANGE:
		enc_partition_change(w, &rec->partition_change);
		break;
	case META_REC_REMOVE_TOPIC:
		meta_enc_uuid(w, rec->remove_topic.topic_id);
		break;
	case META_REC_CONFIG:
		keel_wbuf_u8(w, rec->config.resource_type);
		meta_enc_str(w, rec->config.resource_name);
		meta_enc_str(w, rec->config.key);
		meta_enc_str(w, rec->config.value);
		break;
	case META_REC_PRODUCER_IDS:
		keel_wbuf_i32(w, rec->producer_ids.broker_id);
		keel_wbuf_i64(w, rec->producer_ids.broker_epoch);
		keel_wbuf_i64(w, rec->producer_ids.next_producer_id);
		break;
	case META_REC_NOOP:
		break;
	default:
		KEEL_UNREACHABLE();
	}
}

enum keel_err meta_record_encode(const struct meta_record *rec, struct keel_wbuf *w)
{
	int max = meta_record_max_version(rec->type);
	if (max < 0 || rec->version > (uint16_t)max) {
		return KEEL_INVAL;
	}
	if (!record_check(rec, NULL)) {
		return KEEL_INVAL;
	}
	keel_wbuf_u16(w, rec->type);
	keel_wbuf_u16(w, rec->version);
	size_t size_at = w->size;
	keel_wbuf_u32(w, 0);
	enc_body(w, rec);
	if (keel_wbuf_ok(w)) {
		size_t body = w->size - size_at - 4;
		keel_wbuf_patch_u32(w, size_at, (uint32_t)body);
	}
	return meta_enc_result(w);
}

enum keel_err meta_batch_encode(const struct meta_batch *batch, struct keel_wbuf *w)
{
	if (batch->count > META_MAX_BATCH_RECORDS) {
		return KEEL_INVAL;
	}
	keel_wbuf_u16(w, 0); /* batch format */
	keel_wbuf_i32(w, batch->hdr.controller_id);
	keel_wbuf_i32(w, batch->hdr.controller_epoch);
	keel_wbuf_i64(w, batch->hdr.timestamp_ms);
	keel_wbuf_i32(w, (int32_t)batch->count);
	for (uint32_t i = 0; i < batch->count; i++) {
		enum keel_err err = meta_record_encode(&batch->records[i], w);
		if (err != KEEL_OK) {
			return err;
		}
	}
	return meta_enc_result(w);
}

/* ---- decoding ---- */

static void dec_register(struct meta_dec *d, struct meta_register_broker_record *r)
{
	r->broker_id = meta_dec_i32(d);
	meta_dec_uuid(d, r->incarnation_id);
	r->broker_epoch = meta_dec_i64(d);
	/* An endpoint is at least two empty strings, a port and a protocol. */
	uint32_t n = meta_dec_count(d, META_MAX_ENDPOINTS, 12, "endpoints");
	struct meta_endpoint *eps = meta_dec_alloc(d, n, sizeof(*eps));
	for (uint32_t i = 0; eps != NULL && i < n; i++) {
		eps[i].name = meta_dec_str(d, false, META_MAX_SHORT_STRING, "endpoint name");
		eps[i].host = meta_dec_str(d, false, META_MAX_SHORT_STRING, "endpoint host");
		eps[i].port = (uint16_t)meta_dec_i16(d);
		eps[i].security_protocol = meta_dec_i16(d);
	}
	r->endpoints = eps;
	r->endpoint_count = n;
	r->rack = meta_dec_str(d, true, META_MAX_SHORT_STRING, "rack");
	r->fenced = meta_dec_bool(d, "fenced");
	r->in_controlled_shutdown = meta_dec_bool(d, "in_controlled_shutdown");
}

static void dec_partition(struct meta_dec *d, uint16_t version, struct meta_partition_record *r)
{
	meta_dec_uuid(d, r->topic_id);
	r->partition_id = meta_dec_i32(d);
	r->replicas = meta_dec_i32_array(d, META_MAX_REPLICAS, &r->replica_count, "replicas");
	r->isr = meta_dec_i32_array(d, META_MAX_REPLICAS, &r->isr_count, "isr");
	r->leader = meta_dec_i32(d);
	r->leader_epoch = meta_dec_i32(d);
	r->partition_epoch = meta_dec_i32(d);
	r->leader_recovery_state = (uint8_t)meta_dec_i8(d);
	if (version >= 1) {
		r->adding = meta_dec_i32_array(d, META_MAX_REPLICAS, &r->adding_count, "adding");
		r->removing =
			meta_dec_i32_array(d, META_MAX_REPLICAS, &r->removing_count, "removing");
	}
}

static void dec_partition_change(struct meta_dec *d, struct meta_partition_change_record *r)
{
	meta_dec_uuid(d, r->topic_id);
	r->partition_id = meta_dec_i32(d);
	r->partition_epoch = meta_dec_i32(d);
	r->fields = (uint8_t)meta_dec_i8(d);
	r->leader = META_NO_LEADER;
	if (r->fields & META_PC_LEADER) {
		r->leader = meta_dec_i32(d);
		r->leader_epoch = meta_dec_i32(d);
	}
	if (r->fields & META_PC_ISR) {
		r->isr = meta_dec_i32_array(d, META_MAX_REPLICAS, &r->isr_count, "isr");
	}
	if (r->fields & META_PC_REPLICAS) {
		r->replicas =
			meta_dec_i32_array(d, META_MAX_REPLICAS, &r->replica_count, "replicas");
	}
	if (r->fields & META_PC_RECOVERY) {
		r->leader_recovery_state = (uint8_t)meta_dec_i8(d);
	}
	if (r->fields & META_PC_REASSIGNMENT) {
		r->adding = meta_dec_i32_array(d, META_MAX_REPLICAS, &r->adding_count, "adding");
		r->removing =
			meta_dec_i32_array(d, META_MAX_REPLICAS, &r->removing_count, "removing");
	}
}

static void dec_body(struct meta_dec *d, struct meta_record *rec)
{
	switch (rec->type) {
	case META_REC_REGISTER_BROKER:
		dec_register(d, &rec->register_broker);
		break;
	case META_REC_UNREGISTER_BROKER:
	case META_REC_FENCE_BROKER:
	case META_REC_UNFENCE_BROKER:
		rec->fence_broker.broker_id = meta_dec_i32(d);
		rec->fence_broker.broker_epoch = meta_dec_i64(d);
		break;
	case META_REC_BROKER_REGISTRATION_CHANGE:
		rec->broker_change.broker_id = meta_dec_i32(d);
		rec->broker_change.broker_epoch = meta_dec_i64(d);
		rec->broker_change.fenced = meta_dec_i8(d);
		rec->broker_change.in_controlled_shutdown = meta_dec_i8(d);
		break;
	case META_REC_TOPIC:
		rec->topic.name = meta_dec_str(d, false, META_MAX_TOPIC_NAME, "topic name");
		meta_dec_uuid(d, rec->topic.topic_id);
		break;
	case META_REC_PARTITION:
		dec_partition(d, rec->version, &rec->partition);
		break;
	case META_REC_PARTITION_CHANGE:
		dec_partition_change(d, &rec->partition_change);
		break;
	case META_REC_REMOVE_TOPIC:
		meta_dec_uuid(d, rec->remove_topic.topic_id);
		break;
	case META_REC_CONFIG:
		rec->config.resource_type = (uint8_t)meta_dec_i8(d);
		rec->config.resource_name =
			meta_dec_str(d, false, META_MAX_SHORT_STRING, "resource name");
		rec->config.key = meta_dec_str(d, false, META_MAX_SHORT_STRING, "config key");
		rec->config.value = meta_dec_str(d, true, META_MAX_CONFIG_VALUE, "config value");
		break;
	case META_REC_PRODUCER_IDS:
		rec->producer_ids.broker_id = meta_dec_i32(d);
		rec->producer_ids.broker_epoch = meta_dec_i64(d);
		rec->producer_ids.next_producer_id = meta_dec_i64(d);
		break;
	case META_REC_NOOP:
		break;
	default:
		KEEL_UNREACHABLE();
	}
}

/* Writes "record type T version V is newer than this server supports (max M)". */
static void unsupported(struct meta_dec *d, uint16_t type, uint16_t version, int max)
{
	struct meta_fmt f;
	struct meta_fmt *fp = meta_errbuf_begin(d->eb, &f);
	if (max < 0) {
		meta_fmt_str(fp, "unknown record type ");
		meta_fmt_u64(fp, type);
		meta_fmt_str(fp, " (newer than this server?)");
	} else {
		meta_fmt_str(fp, "record type ");
		meta_fmt_u64(fp, type);
		meta_fmt_str(fp, " (");
		meta_fmt_str(fp, meta_record_type_name(type));
		meta_fmt_str(fp, ") version ");
		meta_fmt_u64(fp, version);
		meta_fmt_str(fp, " is newer than this server supports (max ");
		meta_fmt_i64(fp, max);
		meta_fmt_str(fp, ")");
	}
	d->err = KEEL_UNSUPPORTED;
	keel_rbuf_fail(&d->r);
}

enum keel_err meta_record_decode(struct meta_dec *d, struct meta_record *rec)
{
	memset(rec, 0, sizeof(*rec));
	rec->type = keel_rbuf_u16(&d->r);
	rec->version = keel_rbuf_u16(&d->r);
	size_t body_size = (size_t)keel_rbuf_u32(&d->r);
	if (!meta_dec_ok(d)) {
		return meta_dec_finish(d, false, "record header");
	}
	int max = meta_record_max_version(rec->type);
	if (max < 0 || rec->version > (uint16_t)max) {
		unsupported(d, rec->type, rec->version, max);
		return d->err;
	}
	const uint8_t *body = keel_rbuf_bytes(&d->r, body_size);
	if (body == NULL) {
		return meta_dec_finish(d, false, meta_record_type_name(rec->type));
	}
	struct meta_dec inner;
	meta_dec_init(&inner, body, body_size, d->arena, d->eb);
	dec_body(&inner, rec);
	enum keel_err err = meta_dec_finish(&inner, true, meta_record_type_name(rec->type));
	if (err == KEEL_SHORT) {
		/* The batch held the bytes; the body's own size was inconsistent. */
		err = KEEL_CORRUPT;
	}
	if (err == KEEL_OK && !record_check(rec, d->eb)) {
		err = KEEL_CORRUPT;
	}
	if (err != KEEL_OK) {
		d->err = err;
		keel_rbuf_fail(&d->r);
	}
	return err;
}

static void dec_header(struct meta_dec *d, struct meta_batch_header *hdr, uint32_t *count)
{
	uint16_t format = keel_rbuf_u16(&d->r);
	if (keel_rbuf_ok(&d->r) && format != 0) {
		struct meta_fmt f;
		struct meta_fmt *fp = meta_errbuf_begin(d->eb, &f);
		meta_fmt_str(fp, "batch format ");
		meta_fmt_u64(fp, format);
		meta_fmt_str(fp, " is newer than this server supports (max 0)");
		d->err = KEEL_UNSUPPORTED;
		keel_rbuf_fail(&d->r);
		return;
	}
	hdr->controller_id = meta_dec_i32(d);
	hdr->controller_epoch = meta_dec_i32(d);
	hdr->timestamp_ms = meta_dec_i64(d);
	/* A record is at least its 8-byte header. */
	*count = meta_dec_count(d, META_MAX_BATCH_RECORDS, 8, "batch record count");
}

enum keel_err meta_batch_decode(const void *data, size_t size, struct keel_arena *arena,
				struct meta_batch *out, struct meta_errbuf *eb)
{
	struct meta_dec d;
	meta_dec_init(&d, data, size, arena, eb);
	memset(out, 0, sizeof(*out));
	uint32_t count = 0;
	dec_header(&d, &out->hdr, &count);
	struct meta_record *recs = meta_dec_alloc(&d, count, sizeof(*recs));
	for (uint32_t i = 0; recs != NULL && i < count; i++) {
		if (meta_record_decode(&d, &recs[i]) != KEEL_OK) {
			break;
		}
	}
	enum keel_err err = meta_dec_finish(&d, true, "batch");
	if (err != KEEL_OK) {
		return err;
	}
	out->records = recs;
	out->count = count;
	return KEEL_OK;
}
