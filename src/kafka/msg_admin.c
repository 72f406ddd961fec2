/*
 * msg_admin.c — walks of the admin messages a broker forwards to keel's
 * controller: CreateTopics, DeleteTopics, CreatePartitions,
 * DescribeConfigs, IncrementalAlterConfigs, AlterConfigs, DescribeCluster.
 *
 * Each walk follows the field order of Kafka's JSON spec for the message;
 * a version test guards each field that not every version carries.
 */
#include <stddef.h>
#include <stdint.h>

#include "kafka/walk.h"

/* ---- CreateTopics ---- */

static void walk_create_topics_topic(struct kafka_io *io, struct kafka_create_topics_topic *t)
{
	kio_str(io, &t->name, false);
	kio_i32(io, &t->num_partitions);
	kio_i16(io, &t->replication_factor);
	int32_t n = KW_ARRAY(io, t->assignments, t->assignment_count, 4 + kw_arr(io) + kw_tags(io),
	                     false);
	for (int32_t i = 0; i < n; i++) {
		kio_i32(io, &t->assignments[i].partition_index);
		kio_i32_array(io, &t->assignments[i].broker_ids, false);
		kio_no_tags(io);
	}
	n = KW_ARRAY(io, t->configs, t->config_count, 2 * kw_str(io) + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		kio_str(io, &t->configs[i].name, false);
		kio_str(io, &t->configs[i].value, true);
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

void kafka_walk_create_topics_request(struct kafka_io *io, void *msg)
{
	struct kafka_create_topics_request *m = msg;
	int16_t v = io->version;
	size_t min = kw_str(io) + 6 + 2 * kw_arr(io) + kw_tags(io);
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count, min, false);
	for (int32_t i = 0; i < n; i++) {
		walk_create_topics_topic(io, &m->topics[i]);
	}
	kio_i32(io, &m->timeout_ms);
	kio_bool_if(io, v >= 1, &m->validate_only, false);
	kio_no_tags(io);
}

static void walk_topic_config_error_code(struct kafka_io *io, void *obj)
{
	kio_i16(io, obj);
}

static void walk_create_topics_result(struct kafka_io *io, struct kafka_create_topics_result *t)
{
	int16_t v = io->version;
	kio_str(io, &t->name, false);
	kio_uuid_if(io, v >= 7, &t->topic_id);
	kio_i16(io, &t->error_code);
	kio_str_if(io, v >= 1, &t->error_message, true);
	kio_i32_if(io, v >= 5, &t->num_partitions, -1);
	kio_i16_if(io, v >= 5, &t->replication_factor, -1);
	if (v >= 5) {
		int32_t n = KW_ARRAY(io, t->configs, t->config_count,
		                     2 * kw_str(io) + 3 + kw_tags(io), true);
		for (int32_t i = 0; i < n; i++) {
			struct kafka_create_topics_config *c = &t->configs[i];
			kio_str(io, &c->name, false);
			kio_str(io, &c->value, true);
			kio_bool(io, &c->read_only);
			kio_i8(io, &c->config_source);
			kio_bool(io, &c->is_sensitive);
			kio_no_tags(io);
		}
	}
	const struct kio_tag tags[] = {{0, &t->has_topic_config_error_code,
	                                walk_topic_config_error_code, &t->topic_config_error_code}};
	kio_tags(io, tags, 1);
}

void kafka_walk_create_topics_response(struct kafka_io *io, void *msg)
{
	struct kafka_create_topics_response *m = msg;
	int16_t v = io->version;
	kio_i32_if(io, v >= 2, &m->throttle_time_ms, 0);
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count, kw_str(io) + 2 + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		walk_create_topics_result(io, &m->topics[i]);
	}
	kio_no_tags(io);
}

/* ---- DeleteTopics ---- */

void kafka_walk_delete_topics_request(struct kafka_io *io, void *msg)
{
	struct kafka_delete_topics_request *m = msg;
	int16_t v = io->version;
	if (v >= 6) {
		int32_t n = KW_ARRAY(io, m->topics, m->topic_count, kw_str(io) + 16 + kw_tags(io),
		                     false);
		for (int32_t i = 0; i < n; i++) {
			kio_str(io, &m->topics[i].name, true);
			kio_uuid(io, &m->topics[i].topic_id);
			kio_no_tags(io);
		}
	} else {
		kio_str_array(io, &m->topic_names, false);
	}
	kio_i32(io, &m->timeout_ms);
	kio_no_tags(io);
}

void kafka_walk_delete_topics_response(struct kafka_io *io, void *msg)
{
	struct kafka_delete_topics_response *m = msg;
	int16_t v = io->version;
	kio_i32_if(io, v >= 1, &m->throttle_time_ms, 0);
	int32_t n =
	        KW_ARRAY(io, m->responses, m->response_count, kw_str(io) + 2 + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_delete_topics_result *r = &m->responses[i];
		kio_str(io, &r->name, v >= 6);
		kio_uuid_if(io, v >= 6, &r->topic_id);
		kio_i16(io, &r->error_code);
		kio_str_if(io, v >= 5, &r->error_message, true);
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

/* ---- CreatePartitions ---- */

void kafka_walk_create_partitions_request(struct kafka_io *io, void *msg)
{
	struct kafka_create_partitions_request *m = msg;
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count,
	                     kw_str(io) + 4 + kw_arr(io) + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_create_partitions_topic *t = &m->topics[i];
		kio_str(io, &t->name, false);
		kio_i32(io, &t->count);
		int32_t an = KW_ARRAY(io, t->assignments, t->assignment_count,
		                      kw_arr(io) + kw_tags(io), true);
		for (int32_t j = 0; j < an; j++) {
			kio_i32_array(io, &t->assignments[j].broker_ids, false);
			kio_no_tags(io);
		}
		kio_no_tags(io);
	}
	kio_i32(io, &m->timeout_ms);
	kio_bool(io, &m->validate_only);
	kio_no_tags(io);
}

void kafka_walk_create_partitions_response(struct kafka_io *io, void *msg)
{
	struct kafka_create_partitions_response *m = msg;
	kio_i32(io, &m->throttle_time_ms);
	int32_t n =
	        KW_ARRAY(io, m->results, m->result_count, 2 * kw_str(io) + 2 + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		kio_str(io, &m->results[i].name, false);
		kio_i16(io, &m->results[i].error_code);
		kio_str(io, &m->results[i].error_message, true);
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

/* ---- DescribeConfigs ---- */

void kafka_walk_describe_configs_request(struct kafka_io *io, void *msg)
{
	struct kafka_describe_configs_request *m = msg;
	int16_t v = io->version;
	int32_t n = KW_ARRAY(io, m->resources, m->resource_count,
	                     1 + kw_str(io) + kw_arr(io) + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_describe_configs_resource *r = &m->resources[i];
		kio_i8(io, &r->resource_type);
		kio_str(io, &r->resource_name, false);
		kio_str_array(io, &r->configuration_keys, true);
		kio_no_tags(io);
	}
	kio_bool_if(io, v >= 1, &m->include_synonyms, false);
	kio_bool_if(io, v >= 3, &m->include_documentation, false);
	kio_no_tags(io);
}

static void walk_describe_configs_entry(struct kafka_io *io, struct kafka_describe_configs_entry *c)
{
	int16_t v = io->version;
	kio_str(io, &c->name, false);
	kio_str(io, &c->value, true);
	kio_bool(io, &c->read_only);
	kio_bool_if(io, v == 0, &c->is_default, false);
	kio_i8_if(io, v >= 1, &c->config_source, -1);
	kio_bool(io, &c->is_sensitive);
	if (v >= 1) {
		int32_t n = KW_ARRAY(io, c->synonyms, c->synonym_count,
		                     2 * kw_str(io) + 1 + kw_tags(io), false);
		for (int32_t i = 0; i < n; i++) {
			kio_str(io, &c->synonyms[i].name, false);
			kio_str(io, &c->synonyms[i].value, true);
			kio_i8(io, &c->synonyms[i].source);
			kio_no_tags(io);
		}
	}
	kio_i8_if(io, v >= 3, &c->config_type, 0);
	kio_str_if(io, v >= 3, &c->documentation, true);
	kio_no_tags(io);
}

void kafka_walk_describe_configs_response(struct kafka_io *io, void *msg)
{
	struct kafka_describe_configs_response *m = msg;
	kio_i32(io, &m->throttle_time_ms);
	size_t min = 2 + kw_str(io) + 1 + kw_str(io) + kw_arr(io) + kw_tags(io);
	int32_t n = KW_ARRAY(io, m->results, m->result_count, min, false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_describe_configs_result *r = &m->results[i];
		kio_i16(io, &r->error_code);
		kio_str(io, &r->error_message, true);
		kio_i8(io, &r->resource_type);
		kio_str(io, &r->resource_name, false);
		int32_t cn = KW_ARRAY(io, r->configs, r->config_count,
		                      2 * kw_str(io) + 3 + kw_tags(io), false);
		for (int32_t j = 0; j < cn; j++) {
			walk_describe_configs_entry(io, &r->configs[j]);
		}
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

/* ---- IncrementalAlterConfigs ---- */

void kafka_walk_incremental_alter_configs_request(struct kafka_io *io, void *msg)
{
	struct kafka_incremental_alter_configs_request *m = msg;
	int32_t n = KW_ARRAY(io, m->resources, m->resource_count,
	                     1 + kw_str(io) + kw_arr(io) + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_alter_configs_resource *r = &m->resources[i];
		kio_i8(io, &r->resource_type);
		kio_str(io, &r->resource_name, false);
		int32_t cn = KW_ARRAY(io, r->configs, r->config_count,
		                      2 * kw_str(io) + 1 + kw_tags(io), false);
		for (int32_t j = 0; j < cn; j++) {
			kio_str(io, &r->configs[j].name, false);
			kio_i8(io, &r->configs[j].config_operation);
			kio_str(io, &r->configs[j].value, true);
			kio_no_tags(io);
		}
		kio_no_tags(io);
	}
	kio_bool(io, &m->validate_only);
	kio_no_tags(io);
}

void kafka_walk_incremental_alter_configs_response(struct kafka_io *io, void *msg)
{
	struct kafka_incremental_alter_configs_response *m = msg;
	kio_i32(io, &m->throttle_time_ms);
	int32_t n = KW_ARRAY(io, m->responses, m->response_count, 3 + 2 * kw_str(io) + kw_tags(io),
	                     false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_alter_configs_resource_response *r = &m->responses[i];
		kio_i16(io, &r->error_code);
		kio_str(io, &r->error_message, true);
		kio_i8(io, &r->resource_type);
		kio_str(io, &r->resource_name, false);
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

/* ---- AlterConfigs (legacy) ---- */

void kafka_walk_alter_configs_request(struct kafka_io *io, void *msg)
{
	struct kafka_alter_configs_request *m = msg;
	int32_t n = KW_ARRAY(io, m->resources, m->resource_count,
	                     1 + kw_str(io) + kw_arr(io) + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_legacy_alter_resource *r = &m->resources[i];
		kio_i8(io, &r->resource_type);
		kio_str(io, &r->resource_name, false);
		int32_t cn = KW_ARRAY(io, r->configs, r->config_count, 2 * kw_str(io) + kw_tags(io),
		                      false);
		for (int32_t j = 0; j < cn; j++) {
			kio_str(io, &r->configs[j].name, false);
			kio_str(io, &r->configs[j].value, true);
			kio_no_tags(io);
		}
		kio_no_tags(io);
	}
	kio_bool(io, &m->validate_only);
	kio_no_tags(io);
}

_Static_assert(sizeof(struct kafka_alter_configs_response) ==
                       sizeof(struct kafka_incremental_alter_configs_response) &&
               offsetof(struct kafka_alter_configs_response, responses) ==
                       offsetof(struct kafka_incremental_alter_configs_response, responses) &&
               offsetof(struct kafka_alter_configs_response, response_count) ==
                       offsetof(struct kafka_incremental_alter_configs_response, response_count),
               "AlterConfigs and IncrementalAlterConfigs responses share a walk");

void kafka_walk_alter_configs_response(struct kafka_io *io, void *msg)
{
	/* The same wire layout and struct as IncrementalAlterConfigs's response. */
	kafka_walk_incremental_alter_configs_response(io, msg);
}

/* ---- DescribeCluster ---- */

void kafka_walk_describe_cluster_request(struct kafka_io *io, void *msg)
{
	struct kafka_describe_cluster_request *m = msg;
	kio_bool(io, &m->include_cluster_authorized_operations);
	kio_i8_if(io, io->version >= 1, &m->endpoint_type, 1);
	kio_no_tags(io);
}

void kafka_walk_describe_cluster_response(struct kafka_io *io, void *msg)
{
	struct kafka_describe_cluster_response *m = msg;
	kio_i32(io, &m->throttle_time_ms);
	kio_i16(io, &m->error_code);
	kio_str(io, &m->error_message, true);
	kio_i8_if(io, io->version >= 1, &m->endpoint_type, 1);
	kio_str(io, &m->cluster_id, false);
	kio_i32(io, &m->controller_id);
	int32_t n =
	        KW_ARRAY(io, m->brokers, m->broker_count, 8 + 2 * kw_str(io) + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_describe_cluster_broker *b = &m->brokers[i];
		kio_i32(io, &b->broker_id);
		kio_str(io, &b->host, false);
		kio_i32(io, &b->port);
		kio_str(io, &b->rack, true);
		kio_no_tags(io);
	}
	kio_i32(io, &m->cluster_authorized_operations);
	kio_no_tags(io);
}

/* ---- AlterPartitionReassignments ---- */

void kafka_walk_alter_partition_reassignments_request(struct kafka_io *io, void *msg)
{
	struct kafka_alter_partition_reassignments_request *m = msg;
	kio_i32(io, &m->timeout_ms);
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count, kw_str(io) + kw_arr(io) + kw_tags(io),
	                     false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_reassign_topic *t = &m->topics[i];
		kio_str(io, &t->name, false);
		int32_t pn = KW_ARRAY(io, t->partitions, t->partition_count,
		                      4 + kw_arr(io) + kw_tags(io), false);
		for (int32_t j = 0; j < pn; j++) {
			kio_i32(io, &t->partitions[j].partition_index);
			kio_i32_array(io, &t->partitions[j].replicas, true);
			kio_no_tags(io);
		}
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

void kafka_walk_alter_partition_reassignments_response(struct kafka_io *io, void *msg)
{
	struct kafka_alter_partition_reassignments_response *m = msg;
	kio_i32(io, &m->throttle_time_ms);
	kio_i16(io, &m->error_code);
	kio_str(io, &m->error_message, true);
	int32_t n = KW_ARRAY(io, m->responses, m->response_count,
	                     kw_str(io) + kw_arr(io) + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_reassign_topic_result *t = &m->responses[i];
		kio_str(io, &t->name, false);
		int32_t pn = KW_ARRAY(io, t->partitions, t->partition_count,
		                      4 + 2 + kw_str(io) + kw_tags(io), false);
		for (int32_t j = 0; j < pn; j++) {
			kio_i32(io, &t->partitions[j].partition_index);
			kio_i16(io, &t->partitions[j].error_code);
			kio_str(io, &t->partitions[j].error_message, true);
			kio_no_tags(io);
		}
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

/* ---- ListPartitionReassignments ---- */

void kafka_walk_list_partition_reassignments_request(struct kafka_io *io, void *msg)
{
	struct kafka_list_partition_reassignments_request *m = msg;
	kio_i32(io, &m->timeout_ms);
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count, kw_str(io) + kw_arr(io) + kw_tags(io),
	                     true);
	for (int32_t i = 0; i < n; i++) {
		kio_str(io, &m->topics[i].name, false);
		kio_i32_array(io, &m->topics[i].partition_indexes, false);
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

void kafka_walk_list_partition_reassignments_response(struct kafka_io *io, void *msg)
{
	struct kafka_list_partition_reassignments_response *m = msg;
	kio_i32(io, &m->throttle_time_ms);
	kio_i16(io, &m->error_code);
	kio_str(io, &m->error_message, true);
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count, kw_str(io) + kw_arr(io) + kw_tags(io),
	                     false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_ongoing_topic *t = &m->topics[i];
		kio_str(io, &t->name, false);
		int32_t pn = KW_ARRAY(io, t->partitions, t->partition_count,
		                      4 + 3 * kw_arr(io) + kw_tags(io), false);
		for (int32_t j = 0; j < pn; j++) {
			struct kafka_ongoing_partition *p = &t->partitions[j];
			kio_i32(io, &p->partition_index);
			kio_i32_array(io, &p->replicas, false);
			kio_i32_array(io, &p->adding_replicas, false);
			kio_i32_array(io, &p->removing_replicas, false);
			kio_no_tags(io);
		}
		kio_no_tags(io);
	}
	kio_no_tags(io);
}
