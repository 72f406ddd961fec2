/* format.c — human-readable records, partitions and brokers (see format.h). */
#include "meta/format.h"

#include <string.h>

#include "base/assert.h"

static void broker_name(struct meta_fmt *f, int32_t id)
{
	if (id == META_NO_LEADER) {
		meta_fmt_str(f, "none");
		return;
	}
	meta_fmt_str(f, "Broker-");
	meta_fmt_i64(f, id);
}

static void broker_set(struct meta_fmt *f, const int32_t *v, uint32_t n)
{
	meta_fmt_char(f, '{');
	for (uint32_t i = 0; i < n; i++) {
		if (i > 0) {
			meta_fmt_str(f, ", ");
		}
		broker_name(f, v[i]);
	}
	meta_fmt_char(f, '}');
}

static void id_list(struct meta_fmt *f, const int32_t *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if (i > 0) {
			meta_fmt_char(f, ',');
		}
		meta_fmt_i64(f, v[i]);
	}
}

void meta_format_partition_state(struct meta_fmt *f, const char *topic, int32_t partition_id,
				 int32_t leader, const int32_t *isr, uint32_t isr_count,
				 int32_t leader_epoch, int32_t partition_epoch)
{
	meta_fmt_str(f, "[Topic: ");
	meta_fmt_str(f, topic);
	meta_fmt_str(f, ", Partition: ");
	meta_fmt_i64(f, partition_id);
	meta_fmt_str(f, ", Leader: ");
	broker_name(f, leader);
	meta_fmt_str(f, ", ISR: ");
	broker_set(f, isr, isr_count);
	meta_fmt_str(f, "] LeaderEpoch: ");
	meta_fmt_i64(f, leader_epoch);
	meta_fmt_str(f, ", PartitionEpoch: ");
	meta_fmt_i64(f, partition_epoch);
}

/* The topic's name from the image, else its id in base64url. */
static const char *topic_ref(const struct meta_image *img, const uint8_t *id, char *scratch,
			     size_t scratch_size)
{
	const struct meta_topic *t = img != NULL ? meta_image_topic_by_id(img, id) : NULL;
	if (t != NULL) {
		return t->name;
	}
	struct meta_fmt s;
	meta_fmt_init(&s, scratch, scratch_size);
	meta_fmt_uuid(&s, id);
	return scratch;
}

static void recovery_suffix(struct meta_fmt *f, uint8_t state)
{
	meta_fmt_str(f, ", LeaderRecoveryState: ");
	meta_fmt_str(f, state == META_RECOVERING ? "RECOVERING" : "RECOVERED");
}

/* ", Adding: {...}, Removing: {...}" of a reassignment. */
static void reassignment_suffix(struct meta_fmt *f, const int32_t *adding, uint32_t na,
				const int32_t *removing, uint32_t nr)
{
	meta_fmt_str(f, ", Adding: ");
	broker_set(f, adding, na);
	meta_fmt_str(f, ", Removing: ");
	broker_set(f, removing, nr);
}

static void format_partition(struct meta_fmt *f, const struct meta_partition_record *r,
			     const struct meta_image *img)
{
	char idtext[32];
	const char *topic = topic_ref(img, r->topic_id, idtext, sizeof(idtext));
	meta_format_partition_state(f, topic, r->partition_id, r->leader, r->isr, r->isr_count,
				    r->leader_epoch, r->partition_epoch);
	meta_fmt_str(f, ", Replicas: ");
	broker_set(f, r->replicas, r->replica_count);
	if (r->leader_recovery_state != META_RECOVERED) {
		recovery_suffix(f, r->leader_recovery_state);
	}
	if (r->adding_count > 0 || r->removing_count > 0) {
		reassignment_suffix(f, r->adding, r->adding_count, r->removing, r->removing_count);
	}
}

static void format_partition_change(struct meta_fmt *f,
				    const struct meta_partition_change_record *r,
				    const struct meta_image *img)
{
	char idtext[32];
	const char *topic = topic_ref(img, r->topic_id, idtext, sizeof(idtext));
	const struct meta_partition *cur =
		img != NULL ? meta_image_partition(img, r->topic_id, r->partition_id) : NULL;
	if (cur == NULL && (r->fields & (META_PC_LEADER | META_PC_ISR)) !=
				   (META_PC_LEADER | META_PC_ISR)) {
		/* Unknown partition and the record does not carry it all. */
		meta_fmt_str(f, "[Topic: ");
		meta_fmt_str(f, topic);
		meta_fmt_str(f, ", Partition: ");
		meta_fmt_i64(f, r->partition_id);
		meta_fmt_str(f, "] (unknown partition) PartitionEpoch: ");
		meta_fmt_i64(f, r->partition_epoch);
	} else {
		bool l = (r->fields & META_PC_LEADER) != 0;
		bool i = (r->fields & META_PC_ISR) != 0;
		meta_format_partition_state(f, topic, r->partition_id, l ? r->leader : cur->leader,
					    i ? r->isr : cur->isr, i ? r->isr_count : cur->isr_count,
					    l ? r->leader_epoch : cur->leader_epoch,
					    r->partition_epoch);
	}
	meta_fmt_str(f, ", Changed: {");
	static const struct {
		uint8_t bit;
		const char *name;
	} names[] = {{META_PC_LEADER, "Leader"},
		     {META_PC_ISR, "ISR"},
		     {META_PC_REPLICAS, "Replicas"},
		     {META_PC_RECOVERY, "LeaderRecoveryState"},
		     {META_PC_REASSIGNMENT, "Reassignment"}};
	bool first = true;
	for (size_t k = 0; k < KEEL_ARRAY_SIZE(names); k++) {
		if (r->fields & names[k].bit) {
			meta_fmt_str(f, first ? "" : ", ");
			meta_fmt_str(f, names[k].name);
			first = false;
		}
	}
	meta_fmt_char(f, '}');
	if (r->fields & META_PC_REPLICAS) {
		meta_fmt_str(f, ", Replicas: ");
		broker_set(f, r->replicas, r->replica_count);
	}
	if (r->fields & META_PC_RECOVERY) {
		recovery_suffix(f, r->leader_recovery_state);
	}
	if (r->fields & META_PC_REASSIGNMENT) {
		reassignment_suffix(f, r->adding, r->adding_count, r->removing, r->removing_count);
	}
}

static void format_register(struct meta_fmt *f, const struct meta_register_broker_record *r)
{
	static const char *const protocols[] = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"};
	meta_fmt_str(f, "RegisterBroker: ");
	broker_name(f, r->broker_id);
	meta_fmt_str(f, ", Epoch: ");
	meta_fmt_i64(f, r->broker_epoch);
	meta_fmt_str(f, ", Incarnation: ");
	meta_fmt_uuid(f, r->incarnation_id);
	meta_fmt_str(f, ", Rack: ");
	meta_fmt_str(f, r->rack != NULL ? r->rack : "none");
	meta_fmt_str(f, ", Fenced: ");
	meta_fmt_str(f, r->fenced ? "true" : "false");
	if (r->in_controlled_shutdown) {
		meta_fmt_str(f, ", InControlledShutdown: true");
	}
	meta_fmt_str(f, ", Endpoints: {");
	for (uint32_t i = 0; i < r->endpoint_count; i++) {
		const struct meta_endpoint *e = &r->endpoints[i];
		meta_fmt_str(f, i > 0 ? ", " : "");
		meta_fmt_str(f, e->name);
		meta_fmt_str(f, "://");
		bool v6 = strchr(e->host, ':') != NULL;
		meta_fmt_str(f, v6 ? "[" : "");
		meta_fmt_str(f, e->host);
		meta_fmt_str(f, v6 ? "]:" : ":");
		meta_fmt_u64(f, e->port);
		if (e->security_protocol >= 0 && e->security_protocol <= META_SEC_SASL_SSL &&
		    strcmp(e->name, protocols[e->security_protocol]) != 0) {
			meta_fmt_str(f, " (");
			meta_fmt_str(f, protocols[e->security_protocol]);
			meta_fmt_char(f, ')');
		}
	}
	meta_fmt_char(f, '}');
}

static void format_broker_ref(struct meta_fmt *f, const char *what,
			      const struct meta_broker_ref_record *r)
{
	meta_fmt_str(f, what);
	meta_fmt_str(f, ": ");
	broker_name(f, r->broker_id);
	meta_fmt_str(f, ", Epoch: ");
	meta_fmt_i64(f, r->broker_epoch);
}

static void format_broker_change(struct meta_fmt *f, const struct meta_broker_change_record *r)
{
	struct meta_broker_ref_record ref = {r->broker_id, r->broker_epoch};
	format_broker_ref(f, "BrokerRegistrationChange", &ref);
	if (r->fenced != META_CHANGE_NONE) {
		meta_fmt_str(f, ", Fenced: ");
		meta_fmt_str(f, r->fenced ? "true" : "false");
	}
	if (r->in_controlled_shutdown != META_CHANGE_NONE) {
		meta_fmt_str(f, ", InControlledShutdown: ");
		meta_fmt_str(f, r->in_controlled_shutdown ? "true" : "false");
	}
}

static void format_config(struct meta_fmt *f, const struct meta_config_record *r)
{
	meta_fmt_str(f, "Config: ");
	meta_fmt_str(f, r->resource_type == META_RESOURCE_TOPIC ? "Topic " : "Broker ");
	meta_fmt_char(f, '"');
	meta_fmt_str(f, r->resource_name);
	meta_fmt_str(f, "\", ");
	meta_fmt_str(f, r->key);
	if (r->value != NULL) {
		meta_fmt_str(f, " = ");
		meta_fmt_str(f, r->value);
	} else {
		meta_fmt_str(f, " deleted");
	}
}

void meta_format_record(struct meta_fmt *f, const struct meta_record *rec,
			const struct meta_image *before)
{
	char idtext[32];
	switch (rec->type) {
	case META_REC_REGISTER_BROKER:
		format_register(f, &rec->register_broker);
		break;
	case META_REC_UNREGISTER_BROKER:
		format_broker_ref(f, "UnregisterBroker", &rec->unregister_broker);
		break;
	case META_REC_FENCE_BROKER:
		format_broker_ref(f, "FenceBroker", &rec->fence_broker);
		break;
	case META_REC_UNFENCE_BROKER:
		format_broker_ref(f, "UnfenceBroker", &rec->unfence_broker);
		break;
	case META_REC_BROKER_REGISTRATION_CHANGE:
		format_broker_change(f, &rec->broker_change);
		break;
	case META_REC_TOPIC:
		meta_fmt_str(f, "Topic: ");
		meta_fmt_str(f, rec->topic.name);
		meta_fmt_str(f, ", TopicId: ");
		meta_fmt_uuid(f, rec->topic.topic_id);
		break;
	case META_REC_PARTITION:
		format_partition(f, &rec->partition, before);
		break;
	case META_REC_PARTITION_CHANGE:
		format_partition_change(f, &rec->partition_change, before);
		break;
	case META_REC_REMOVE_TOPIC:
		meta_fmt_str(f, "RemoveTopic: ");
		meta_fmt_str(f, topic_ref(before, rec->remove_topic.topic_id, idtext,
					  sizeof(idtext)));
		meta_fmt_str(f, ", TopicId: ");
		meta_fmt_uuid(f, rec->remove_topic.topic_id);
		break;
	case META_REC_CONFIG:
		format_config(f, &rec->config);
		break;
	case META_REC_PRODUCER_IDS: {
		struct meta_broker_ref_record ref = {rec->producer_ids.broker_id,
						     rec->producer_ids.broker_epoch};
		format_broker_ref(f, "ProducerIds", &ref);
		meta_fmt_str(f, ", NextProducerId: ");
		meta_fmt_i64(f, rec->producer_ids.next_producer_id);
		break;
	}
	case META_REC_NOOP:
		meta_fmt_str(f, "NoOp");
		break;
	default:
		meta_fmt_str(f, "Unknown record type ");
		meta_fmt_u64(f, rec->type);
		break;
	}
}

void meta_format_batch_header(struct meta_fmt *f, int64_t offset, const struct meta_batch *batch)
{
	meta_fmt_str(f, "Batch at offset ");
	meta_fmt_i64(f, offset);
	meta_fmt_str(f, ": controller ");
	meta_fmt_i64(f, batch->hdr.controller_id);
	meta_fmt_str(f, ", epoch ");
	meta_fmt_i64(f, batch->hdr.controller_epoch);
	meta_fmt_str(f, ", time ");
	meta_fmt_iso8601(f, batch->hdr.timestamp_ms);
	meta_fmt_str(f, ", ");
	meta_fmt_u64(f, batch->count);
	meta_fmt_str(f, batch->count == 1 ? " record" : " records");
}

void meta_format_describe_partition(struct meta_fmt *f, const char *topic, int32_t partition_id,
				    int32_t leader, const int32_t *replicas, uint32_t replica_count,
				    const int32_t *isr, uint32_t isr_count, int32_t leader_epoch)
{
	meta_fmt_str(f, "Topic: ");
	meta_fmt_str(f, topic);
	meta_fmt_str(f, "\tPartition: ");
	meta_fmt_i64(f, partition_id);
	meta_fmt_str(f, "\tLeader: ");
	if (leader == META_NO_LEADER) {
		meta_fmt_str(f, "none");
	} else {
		meta_fmt_i64(f, leader);
	}
	meta_fmt_str(f, "\tReplicas: ");
	id_list(f, replicas, replica_count);
	meta_fmt_str(f, "\tIsr: ");
	id_list(f, isr, isr_count);
	meta_fmt_str(f, "\tLeaderEpoch: ");
	meta_fmt_i64(f, leader_epoch);
}

void meta_format_broker_line(struct meta_fmt *f, int32_t id, int64_t epoch, const char *rack,
			     bool fenced, bool in_controlled_shutdown)
{
	meta_fmt_str(f, "Broker: ");
	meta_fmt_i64(f, id);
	meta_fmt_str(f, "\tEpoch: ");
	meta_fmt_i64(f, epoch);
	meta_fmt_str(f, "\tRack: ");
	meta_fmt_str(f, rack != NULL ? rack : "none");
	meta_fmt_str(f, "\tState: ");
	meta_fmt_str(f, fenced ? "fenced" : "active");
	if (in_controlled_shutdown) {
		meta_fmt_str(f, "\tControlledShutdown: true");
	}
}

enum keel_err meta_log_dump_batch(struct meta_image *img, int64_t offset,
				  const struct meta_batch *batch, meta_line_fn line, void *ctx)
{
	char text[1024];
	struct meta_fmt f;
	meta_fmt_init(&f, text, sizeof(text));
	meta_format_batch_header(&f, offset, batch);
	enum keel_err err = meta_image_begin_batch(img, offset, &batch->hdr, NULL);
	if (err == KEEL_INVAL) {
		return err;
	}
	bool stale = err == KEEL_STALE;
	if (stale) {
		meta_fmt_str(&f, " (ignored: from an older controller epoch)");
	}
	line(ctx, text);
	for (uint32_t i = 0; i < batch->count; i++) {
		const struct meta_record *rec = &batch->records[i];
		meta_fmt_init(&f, text, sizeof(text));
		meta_format_record(&f, rec, img);
		if (!stale) {
			struct meta_errbuf why;
			err = meta_image_apply_record(img, rec, NULL, &why);
			if (err == KEEL_NOMEM) {
				return err;
			}
			if (err != KEEL_OK) {
				meta_fmt_str(&f, " (ignored: ");
				meta_fmt_str(&f, why.msg);
				meta_fmt_char(&f, ')');
			}
		}
		line(ctx, text);
	}
	return KEEL_OK;
}
