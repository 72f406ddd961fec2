/*
 * msg_core.c — walks of the data-plane messages: ApiVersions, Metadata,
 * Produce, Fetch, ListOffsets, OffsetForLeaderEpoch.
 *
 * Each walk follows the field order of Kafka's JSON spec for the message;
 * a version test guards each field that not every version carries.
 */
#include <stdint.h>

#include "kafka/walk.h"

/* ---- ApiVersions ---- */

void kafka_walk_api_versions_request(struct kafka_io *io, void *msg)
{
	struct kafka_api_versions_request *m = msg;
	int16_t v = io->version;
	kio_str_if(io, v >= 3, &m->client_software_name, false);
	kio_str_if(io, v >= 3, &m->client_software_version, false);
	kio_no_tags(io);
}

void kafka_walk_api_versions_response(struct kafka_io *io, void *msg)
{
	struct kafka_api_versions_response *m = msg;
	int16_t v = io->version;
	kio_i16(io, &m->error_code);
	int32_t n = KW_ARRAY(io, m->api_keys, m->api_key_count, 6 + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		kio_i16(io, &m->api_keys[i].api_key);
		kio_i16(io, &m->api_keys[i].min_version);
		kio_i16(io, &m->api_keys[i].max_version);
		kio_no_tags(io);
	}
	kio_i32_if(io, v >= 1, &m->throttle_time_ms, 0);
	kio_no_tags(io);
}

/* ---- Metadata ---- */

void kafka_walk_metadata_request(struct kafka_io *io, void *msg)
{
	struct kafka_metadata_request *m = msg;
	int16_t v = io->version;
	size_t min = (v >= 10 ? 16u : 0u) + kw_str(io) + kw_tags(io);
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count, min, v >= 1);
	for (int32_t i = 0; i < n; i++) {
		kio_uuid_if(io, v >= 10, &m->topics[i].topic_id);
		kio_str(io, &m->topics[i].name, v >= 10);
		kio_no_tags(io);
	}
	kio_bool_if(io, v >= 4, &m->allow_auto_topic_creation, true);
	kio_bool_if(io, v >= 8 && v <= 10, &m->include_cluster_authorized_operations, false);
	kio_bool_if(io, v >= 8, &m->include_topic_authorized_operations, false);
	kio_no_tags(io);
}

static void walk_metadata_partition(struct kafka_io *io, struct kafka_metadata_partition *p)
{
	int16_t v = io->version;
	kio_i16(io, &p->error_code);
	kio_i32(io, &p->partition_index);
	kio_i32(io, &p->leader_id);
	kio_i32_if(io, v >= 7, &p->leader_epoch, -1);
	kio_i32_array(io, &p->replica_nodes, false);
	kio_i32_array(io, &p->isr_nodes, false);
	if (v >= 5) {
		kio_i32_array(io, &p->offline_replicas, false);
	}
	kio_no_tags(io);
}

static void walk_metadata_topic(struct kafka_io *io, struct kafka_metadata_topic *t)
{
	int16_t v = io->version;
	kio_i16(io, &t->error_code);
	kio_str(io, &t->name, v >= 12);
	kio_uuid_if(io, v >= 10, &t->topic_id);
	kio_bool_if(io, v >= 1, &t->is_internal, false);
	size_t min =
	        10 + 2 * kw_arr(io) + (v >= 7 ? 4u : 0u) + (v >= 5 ? kw_arr(io) : 0u) + kw_tags(io);
	int32_t n = KW_ARRAY(io, t->partitions, t->partition_count, min, false);
	for (int32_t i = 0; i < n; i++) {
		walk_metadata_partition(io, &t->partitions[i]);
	}
	kio_i32_if(io, v >= 8, &t->topic_authorized_operations, INT32_MIN);
	kio_no_tags(io);
}

void kafka_walk_metadata_response(struct kafka_io *io, void *msg)
{
	struct kafka_metadata_response *m = msg;
	int16_t v = io->version;
	kio_i32_if(io, v >= 3, &m->throttle_time_ms, 0);
	size_t min = 8 + kw_str(io) + (v >= 1 ? kw_str(io) : 0u) + kw_tags(io);
	int32_t n = KW_ARRAY(io, m->brokers, m->broker_count, min, false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_metadata_broker *b = &m->brokers[i];
		kio_i32(io, &b->node_id);
		kio_str(io, &b->host, false);
		kio_i32(io, &b->port);
		kio_str_if(io, v >= 1, &b->rack, true);
		kio_no_tags(io);
	}
	kio_str_if(io, v >= 2, &m->cluster_id, true);
	kio_i32_if(io, v >= 1, &m->controller_id, -1);
	min = 2 + kw_str(io) + kw_arr(io) + kw_tags(io);
	n = KW_ARRAY(io, m->topics, m->topic_count, min, false);
	for (int32_t i = 0; i < n; i++) {
		walk_metadata_topic(io, &m->topics[i]);
	}
	kio_i32_if(io, v >= 8 && v <= 10, &m->cluster_authorized_operations, INT32_MIN);
	kio_no_tags(io);
}

/* ---- Produce ---- */

void kafka_walk_produce_request(struct kafka_io *io, void *msg)
{
	struct kafka_produce_request *m = msg;
	int16_t v = io->version;
	kio_str_if(io, v >= 3, &m->transactional_id, true);
	kio_i16(io, &m->acks);
	kio_i32(io, &m->timeout_ms);
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count, kw_str(io) + kw_arr(io) + kw_tags(io),
	                     false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_produce_topic *t = &m->topics[i];
		kio_str(io, &t->name, false);
		int32_t pn = KW_ARRAY(io, t->partitions, t->partition_count,
		                      4 + kw_arr(io) + kw_tags(io), false);
		for (int32_t j = 0; j < pn; j++) {
			kio_i32(io, &t->partitions[j].index);
			kio_records(io, &t->partitions[j].records);
			kio_no_tags(io);
		}
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

static void walk_produce_partition_response(struct kafka_io *io,
                                            struct kafka_produce_partition_response *p)
{
	int16_t v = io->version;
	kio_i32(io, &p->index);
	kio_i16(io, &p->error_code);
	kio_i64(io, &p->base_offset);
	kio_i64_if(io, v >= 2, &p->log_append_time_ms, -1);
	kio_i64_if(io, v >= 5, &p->log_start_offset, -1);
	if (v >= 8) {
		int32_t n = KW_ARRAY(io, p->record_errors, p->record_error_count,
		                     4 + kw_str(io) + kw_tags(io), false);
		for (int32_t i = 0; i < n; i++) {
			kio_i32(io, &p->record_errors[i].batch_index);
			kio_str(io, &p->record_errors[i].batch_index_error_message, true);
			kio_no_tags(io);
		}
	}
	kio_str_if(io, v >= 8, &p->error_message, true);
	kio_no_tags(io);
}

void kafka_walk_produce_response(struct kafka_io *io, void *msg)
{
	struct kafka_produce_response *m = msg;
	int16_t v = io->version;
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count, kw_str(io) + kw_arr(io) + kw_tags(io),
	                     false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_produce_topic_response *t = &m->topics[i];
		kio_str(io, &t->name, false);
		int32_t pn =
		        KW_ARRAY(io, t->partitions, t->partition_count, 14 + kw_tags(io), false);
		for (int32_t j = 0; j < pn; j++) {
			walk_produce_partition_response(io, &t->partitions[j]);
		}
		kio_no_tags(io);
	}
	kio_i32_if(io, v >= 1, &m->throttle_time_ms, 0);
	kio_no_tags(io);
}

/* ---- Fetch ---- */

static void walk_cluster_id(struct kafka_io *io, void *obj)
{
	kio_str(io, obj, true);
}

static void walk_fetch_partition(struct kafka_io *io, struct kafka_fetch_partition *p)
{
	int16_t v = io->version;
	kio_i32(io, &p->partition);
	kio_i32_if(io, v >= 9, &p->current_leader_epoch, -1);
	kio_i64(io, &p->fetch_offset);
	kio_i32_if(io, v >= 12, &p->last_fetched_epoch, -1);
	kio_i64_if(io, v >= 5, &p->log_start_offset, -1);
	kio_i32(io, &p->partition_max_bytes);
	kio_no_tags(io);
}

void kafka_walk_fetch_request(struct kafka_io *io, void *msg)
{
	struct kafka_fetch_request *m = msg;
	int16_t v = io->version;
	kio_i32(io, &m->replica_id);
	kio_i32(io, &m->max_wait_ms);
	kio_i32(io, &m->min_bytes);
	kio_i32_if(io, v >= 3, &m->max_bytes, INT32_MAX);
	kio_i8_if(io, v >= 4, &m->isolation_level, 0);
	kio_i32_if(io, v >= 7, &m->session_id, 0);
	kio_i32_if(io, v >= 7, &m->session_epoch, -1);
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count, kw_str(io) + kw_arr(io) + kw_tags(io),
	                     false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_fetch_topic *t = &m->topics[i];
		kio_str(io, &t->topic, false);
		int32_t pn =
		        KW_ARRAY(io, t->partitions, t->partition_count, 16 + kw_tags(io), false);
		for (int32_t j = 0; j < pn; j++) {
			walk_fetch_partition(io, &t->partitions[j]);
		}
		kio_no_tags(io);
	}
	if (v >= 7) {
		n = KW_ARRAY(io, m->forgotten_topics, m->forgotten_topic_count,
		             kw_str(io) + kw_arr(io) + kw_tags(io), false);
		for (int32_t i = 0; i < n; i++) {
			kio_str(io, &m->forgotten_topics[i].topic, false);
			kio_i32_array(io, &m->forgotten_topics[i].partitions, false);
			kio_no_tags(io);
		}
	}
	kio_str_if(io, v >= 11, &m->rack_id, false);
	const struct kio_tag tags[] = {{0, &m->has_cluster_id, walk_cluster_id, &m->cluster_id}};
	kio_tags(io, tags, 1);
}

static void walk_epoch_end_offset(struct kafka_io *io, void *obj)
{
	struct kafka_fetch_epoch_end_offset *e = obj;
	kio_i32(io, &e->epoch);
	kio_i64(io, &e->end_offset);
	kio_no_tags(io);
}

static void walk_leader_id_and_epoch(struct kafka_io *io, void *obj)
{
	struct kafka_fetch_leader_id_and_epoch *l = obj;
	kio_i32(io, &l->leader_id);
	kio_i32(io, &l->leader_epoch);
	kio_no_tags(io);
}

static void walk_snapshot_id(struct kafka_io *io, void *obj)
{
	struct kafka_fetch_snapshot_id *s = obj;
	kio_i64(io, &s->end_offset);
	kio_i32(io, &s->epoch);
	kio_no_tags(io);
}

static void walk_fetch_partition_data(struct kafka_io *io, struct kafka_fetch_partition_data *p)
{
	int16_t v = io->version;
	kio_i32(io, &p->partition_index);
	kio_i16(io, &p->error_code);
	kio_i64(io, &p->high_watermark);
	kio_i64_if(io, v >= 4, &p->last_stable_offset, -1);
	kio_i64_if(io, v >= 5, &p->log_start_offset, -1);
	if (v >= 4) {
		int32_t n = KW_ARRAY(io, p->aborted_transactions, p->aborted_transaction_count,
		                     16 + kw_tags(io), true);
		for (int32_t i = 0; i < n; i++) {
			kio_i64(io, &p->aborted_transactions[i].producer_id);
			kio_i64(io, &p->aborted_transactions[i].first_offset);
			kio_no_tags(io);
		}
	}
	kio_i32_if(io, v >= 11, &p->preferred_read_replica, -1);
	kio_records(io, &p->records);
	const struct kio_tag tags[] = {
	        {0, &p->has_diverging_epoch, walk_epoch_end_offset, &p->diverging_epoch},
	        {1, &p->has_current_leader, walk_leader_id_and_epoch, &p->current_leader},
	        {2, &p->has_snapshot_id, walk_snapshot_id, &p->snapshot_id},
	};
	kio_tags(io, tags, 3);
}

void kafka_walk_fetch_response(struct kafka_io *io, void *msg)
{
	struct kafka_fetch_response *m = msg;
	int16_t v = io->version;
	kio_i32_if(io, v >= 1, &m->throttle_time_ms, 0);
	kio_i16_if(io, v >= 7, &m->error_code, 0);
	kio_i32_if(io, v >= 7, &m->session_id, 0);
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count, kw_str(io) + kw_arr(io) + kw_tags(io),
	                     false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_fetch_topic_response *t = &m->topics[i];
		kio_str(io, &t->topic, false);
		int32_t pn = KW_ARRAY(io, t->partitions, t->partition_count,
		                      14 + kw_arr(io) + kw_tags(io), false);
		for (int32_t j = 0; j < pn; j++) {
			io->topic_at = (uint32_t)i;
			io->partition_at = (uint32_t)j;
			walk_fetch_partition_data(io, &t->partitions[j]);
		}
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

/* ---- ListOffsets ---- */

void kafka_walk_list_offsets_request(struct kafka_io *io, void *msg)
{
	struct kafka_list_offsets_request *m = msg;
	int16_t v = io->version;
	kio_i32(io, &m->replica_id);
	kio_i8_if(io, v >= 2, &m->isolation_level, 0);
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count, kw_str(io) + kw_arr(io) + kw_tags(io),
	                     false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_list_offsets_topic *t = &m->topics[i];
		kio_str(io, &t->name, false);
		int32_t pn =
		        KW_ARRAY(io, t->partitions, t->partition_count, 12 + kw_tags(io), false);
		for (int32_t j = 0; j < pn; j++) {
			struct kafka_list_offsets_partition *p = &t->partitions[j];
			kio_i32(io, &p->partition_index);
			kio_i32_if(io, v >= 4, &p->current_leader_epoch, -1);
			kio_i64(io, &p->timestamp);
			kio_no_tags(io);
		}
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

void kafka_walk_list_offsets_response(struct kafka_io *io, void *msg)
{
	struct kafka_list_offsets_response *m = msg;
	int16_t v = io->version;
	kio_i32_if(io, v >= 2, &m->throttle_time_ms, 0);
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count, kw_str(io) + kw_arr(io) + kw_tags(io),
	                     false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_list_offsets_topic_response *t = &m->topics[i];
		kio_str(io, &t->name, false);
		int32_t pn =
		        KW_ARRAY(io, t->partitions, t->partition_count, 22 + kw_tags(io), false);
		for (int32_t j = 0; j < pn; j++) {
			struct kafka_list_offsets_partition_response *p = &t->partitions[j];
			kio_i32(io, &p->partition_index);
			kio_i16(io, &p->error_code);
			kio_i64(io, &p->timestamp);
			kio_i64(io, &p->offset);
			kio_i32_if(io, v >= 4, &p->leader_epoch, -1);
			kio_no_tags(io);
		}
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

/* ---- OffsetForLeaderEpoch ---- */

void kafka_walk_offset_for_leader_epoch_request(struct kafka_io *io, void *msg)
{
	struct kafka_offset_for_leader_epoch_request *m = msg;
	int16_t v = io->version;
	kio_i32_if(io, v >= 3, &m->replica_id, -2);
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count, kw_str(io) + kw_arr(io) + kw_tags(io),
	                     false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_offset_for_leader_topic *t = &m->topics[i];
		kio_str(io, &t->topic, false);
		int32_t pn =
		        KW_ARRAY(io, t->partitions, t->partition_count, 8 + kw_tags(io), false);
		for (int32_t j = 0; j < pn; j++) {
			struct kafka_offset_for_leader_partition *p = &t->partitions[j];
			kio_i32(io, &p->partition);
			kio_i32_if(io, v >= 2, &p->current_leader_epoch, -1);
			kio_i32(io, &p->leader_epoch);
			kio_no_tags(io);
		}
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

void kafka_walk_offset_for_leader_epoch_response(struct kafka_io *io, void *msg)
{
	struct kafka_offset_for_leader_epoch_response *m = msg;
	int16_t v = io->version;
	kio_i32_if(io, v >= 2, &m->throttle_time_ms, 0);
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count, kw_str(io) + kw_arr(io) + kw_tags(io),
	                     false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_offset_for_leader_topic_result *t = &m->topics[i];
		kio_str(io, &t->topic, false);
		int32_t pn =
		        KW_ARRAY(io, t->partitions, t->partition_count, 14 + kw_tags(io), false);
		for (int32_t j = 0; j < pn; j++) {
			struct kafka_epoch_end_offset *p = &t->partitions[j];
			kio_i16(io, &p->error_code);
			kio_i32(io, &p->partition);
			kio_i32_if(io, v >= 1, &p->leader_epoch, -1);
			kio_i64(io, &p->end_offset);
			kio_no_tags(io);
		}
		kio_no_tags(io);
	}
	kio_no_tags(io);
}
