/*
 * msg_group.c — walks of the consumer-group messages (FindCoordinator,
 * JoinGroup, Heartbeat, LeaveGroup, SyncGroup, OffsetCommit, OffsetFetch,
 * DescribeGroups, ListGroups, DeleteGroups), InitProducerId and the SASL
 * pair (SaslHandshake, SaslAuthenticate).
 *
 * Each walk follows the field order of Kafka's JSON spec for the message;
 * a version test guards each field that not every version carries.
 */
#include <stdint.h>

#include "kafka/walk.h"

/* ---- FindCoordinator ---- */

void kafka_walk_find_coordinator_request(struct kafka_io *io, void *msg)
{
	struct kafka_find_coordinator_request *m = msg;
	int16_t v = io->version;
	kio_str_if(io, v <= 3, &m->key, false);
	kio_i8_if(io, v >= 1, &m->key_type, 0);
	if (v >= 4) {
		kio_str_array(io, &m->coordinator_keys, false);
	}
	kio_no_tags(io);
}

void kafka_walk_find_coordinator_response(struct kafka_io *io, void *msg)
{
	struct kafka_find_coordinator_response *m = msg;
	int16_t v = io->version;
	kio_i32_if(io, v >= 1, &m->throttle_time_ms, 0);
	kio_i16_if(io, v <= 3, &m->error_code, 0);
	kio_str_if(io, v >= 1 && v <= 3, &m->error_message, true);
	kio_i32_if(io, v <= 3, &m->node_id, 0);
	kio_str_if(io, v <= 3, &m->host, false);
	kio_i32_if(io, v <= 3, &m->port, 0);
	if (v >= 4) {
		int32_t n = KW_ARRAY(io, m->coordinators, m->coordinator_count,
		                     3 * kw_str(io) + 10 + kw_tags(io), false);
		for (int32_t i = 0; i < n; i++) {
			struct kafka_coordinator *c = &m->coordinators[i];
			kio_str(io, &c->key, false);
			kio_i32(io, &c->node_id);
			kio_str(io, &c->host, false);
			kio_i32(io, &c->port);
			kio_i16(io, &c->error_code);
			kio_str(io, &c->error_message, true);
			kio_no_tags(io);
		}
	}
	kio_no_tags(io);
}

/* ---- JoinGroup ---- */

void kafka_walk_join_group_request(struct kafka_io *io, void *msg)
{
	struct kafka_join_group_request *m = msg;
	int16_t v = io->version;
	kio_str(io, &m->group_id, false);
	kio_i32(io, &m->session_timeout_ms);
	kio_i32_if(io, v >= 1, &m->rebalance_timeout_ms, -1);
	kio_str(io, &m->member_id, false);
	kio_str_if(io, v >= 5, &m->group_instance_id, true);
	kio_str(io, &m->protocol_type, false);
	int32_t n = KW_ARRAY(io, m->protocols, m->protocol_count,
	                     kw_str(io) + kw_arr(io) + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		kio_str(io, &m->protocols[i].name, false);
		kio_bytes(io, &m->protocols[i].metadata, false);
		kio_no_tags(io);
	}
	kio_str_if(io, v >= 8, &m->reason, true);
	kio_no_tags(io);
}

void kafka_walk_join_group_response(struct kafka_io *io, void *msg)
{
	struct kafka_join_group_response *m = msg;
	int16_t v = io->version;
	kio_i32_if(io, v >= 2, &m->throttle_time_ms, 0);
	kio_i16(io, &m->error_code);
	kio_i32(io, &m->generation_id);
	kio_str_if(io, v >= 7, &m->protocol_type, true);
	kio_str(io, &m->protocol_name, v >= 7);
	kio_str(io, &m->leader, false);
	kio_bool_if(io, v >= 9, &m->skip_assignment, false);
	kio_str(io, &m->member_id, false);
	size_t min = kw_str(io) + (v >= 5 ? kw_str(io) : 0u) + kw_arr(io) + kw_tags(io);
	int32_t n = KW_ARRAY(io, m->members, m->member_count, min, false);
	for (int32_t i = 0; i < n; i++) {
		kio_str(io, &m->members[i].member_id, false);
		kio_str_if(io, v >= 5, &m->members[i].group_instance_id, true);
		kio_bytes(io, &m->members[i].metadata, false);
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

/* ---- Heartbeat ---- */

void kafka_walk_heartbeat_request(struct kafka_io *io, void *msg)
{
	struct kafka_heartbeat_request *m = msg;
	kio_str(io, &m->group_id, false);
	kio_i32(io, &m->generation_id);
	kio_str(io, &m->member_id, false);
	kio_str_if(io, io->version >= 3, &m->group_instance_id, true);
	kio_no_tags(io);
}

void kafka_walk_heartbeat_response(struct kafka_io *io, void *msg)
{
	struct kafka_heartbeat_response *m = msg;
	kio_i32_if(io, io->version >= 1, &m->throttle_time_ms, 0);
	kio_i16(io, &m->error_code);
	kio_no_tags(io);
}

/* ---- LeaveGroup ---- */

void kafka_walk_leave_group_request(struct kafka_io *io, void *msg)
{
	struct kafka_leave_group_request *m = msg;
	int16_t v = io->version;
	kio_str(io, &m->group_id, false);
	kio_str_if(io, v <= 2, &m->member_id, false);
	if (v >= 3) {
		int32_t n = KW_ARRAY(io, m->members, m->member_count, 2 * kw_str(io) + kw_tags(io),
		                     false);
		for (int32_t i = 0; i < n; i++) {
			kio_str(io, &m->members[i].member_id, false);
			kio_str(io, &m->members[i].group_instance_id, true);
			kio_str_if(io, v >= 5, &m->members[i].reason, true);
			kio_no_tags(io);
		}
	}
	kio_no_tags(io);
}

void kafka_walk_leave_group_response(struct kafka_io *io, void *msg)
{
	struct kafka_leave_group_response *m = msg;
	int16_t v = io->version;
	kio_i32_if(io, v >= 1, &m->throttle_time_ms, 0);
	kio_i16(io, &m->error_code);
	if (v >= 3) {
		int32_t n = KW_ARRAY(io, m->members, m->member_count,
		                     2 * kw_str(io) + 2 + kw_tags(io), false);
		for (int32_t i = 0; i < n; i++) {
			kio_str(io, &m->members[i].member_id, false);
			kio_str(io, &m->members[i].group_instance_id, true);
			kio_i16(io, &m->members[i].error_code);
			kio_no_tags(io);
		}
	}
	kio_no_tags(io);
}

/* ---- SyncGroup ---- */

void kafka_walk_sync_group_request(struct kafka_io *io, void *msg)
{
	struct kafka_sync_group_request *m = msg;
	int16_t v = io->version;
	kio_str(io, &m->group_id, false);
	kio_i32(io, &m->generation_id);
	kio_str(io, &m->member_id, false);
	kio_str_if(io, v >= 3, &m->group_instance_id, true);
	kio_str_if(io, v >= 5, &m->protocol_type, true);
	kio_str_if(io, v >= 5, &m->protocol_name, true);
	int32_t n = KW_ARRAY(io, m->assignments, m->assignment_count,
	                     kw_str(io) + kw_arr(io) + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		kio_str(io, &m->assignments[i].member_id, false);
		kio_bytes(io, &m->assignments[i].assignment, false);
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

void kafka_walk_sync_group_response(struct kafka_io *io, void *msg)
{
	struct kafka_sync_group_response *m = msg;
	int16_t v = io->version;
	kio_i32_if(io, v >= 1, &m->throttle_time_ms, 0);
	kio_i16(io, &m->error_code);
	kio_str_if(io, v >= 5, &m->protocol_type, true);
	kio_str_if(io, v >= 5, &m->protocol_name, true);
	kio_bytes(io, &m->assignment, false);
	kio_no_tags(io);
}

/* ---- OffsetCommit ---- */

static void walk_offset_commit_topic(struct kafka_io *io, struct kafka_offset_commit_topic *t)
{
	int16_t v = io->version;
	kio_str(io, &t->name, false);
	int32_t n = KW_ARRAY(io, t->partitions, t->partition_count, 12 + kw_str(io) + kw_tags(io),
	                     false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_offset_commit_partition *p = &t->partitions[i];
		kio_i32(io, &p->partition_index);
		kio_i64(io, &p->committed_offset);
		kio_i32_if(io, v >= 6, &p->committed_leader_epoch, -1);
		kio_i64_if(io, v == 1, &p->commit_timestamp, -1);
		kio_str(io, &p->committed_metadata, true);
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

void kafka_walk_offset_commit_request(struct kafka_io *io, void *msg)
{
	struct kafka_offset_commit_request *m = msg;
	int16_t v = io->version;
	kio_str(io, &m->group_id, false);
	kio_i32_if(io, v >= 1, &m->generation_id, -1);
	kio_str_if(io, v >= 1, &m->member_id, false);
	kio_str_if(io, v >= 7, &m->group_instance_id, true);
	kio_i64_if(io, v >= 2 && v <= 4, &m->retention_time_ms, -1);
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count, kw_str(io) + kw_arr(io) + kw_tags(io),
	                     false);
	for (int32_t i = 0; i < n; i++) {
		walk_offset_commit_topic(io, &m->topics[i]);
	}
	kio_no_tags(io);
}

/* Topics of (partition, error) pairs: the results of OffsetCommit and
 * OffsetDelete. */
static void walk_partition_error_topics(struct kafka_io *io,
                                        struct kafka_offset_commit_topic_response **topics,
                                        int32_t *count)
{
	int32_t n = KW_ARRAY(io, *topics, *count, kw_str(io) + kw_arr(io) + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_offset_commit_topic_response *t = &(*topics)[i];
		kio_str(io, &t->name, false);
		int32_t pn =
		        KW_ARRAY(io, t->partitions, t->partition_count, 6 + kw_tags(io), false);
		for (int32_t j = 0; j < pn; j++) {
			kio_i32(io, &t->partitions[j].partition_index);
			kio_i16(io, &t->partitions[j].error_code);
			kio_no_tags(io);
		}
		kio_no_tags(io);
	}
}

void kafka_walk_offset_commit_response(struct kafka_io *io, void *msg)
{
	struct kafka_offset_commit_response *m = msg;
	kio_i32_if(io, io->version >= 3, &m->throttle_time_ms, 0);
	walk_partition_error_topics(io, &m->topics, &m->topic_count);
	kio_no_tags(io);
}

/* ---- OffsetDelete (v0 only, never flexible) ---- */

void kafka_walk_offset_delete_request(struct kafka_io *io, void *msg)
{
	struct kafka_offset_delete_request *m = msg;
	kio_str(io, &m->group_id, false);
	int32_t n = KW_ARRAY(io, m->topics, m->topic_count, kw_str(io) + kw_arr(io), false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_offset_delete_topic *t = &m->topics[i];
		kio_str(io, &t->name, false);
		int32_t pn = KW_ARRAY(io, t->partitions, t->partition_count, 4, false);
		for (int32_t j = 0; j < pn; j++) {
			kio_i32(io, &t->partitions[j].partition_index);
		}
	}
}

void kafka_walk_offset_delete_response(struct kafka_io *io, void *msg)
{
	struct kafka_offset_delete_response *m = msg;
	kio_i16(io, &m->error_code);
	kio_i32(io, &m->throttle_time_ms);
	walk_partition_error_topics(io, &m->topics, &m->topic_count);
}

/* ---- OffsetFetch ---- */

/* The topic list of a request; null ("all topics") where `nullable`. */
static void walk_offset_fetch_topics(struct kafka_io *io, struct kafka_offset_fetch_topic **topics,
                                     int32_t *count, bool nullable)
{
	int32_t n = kio_array(io, count, (void **)topics, sizeof(**topics),
	                      kw_str(io) + kw_arr(io) + kw_tags(io), nullable);
	for (int32_t i = 0; i < n; i++) {
		kio_str(io, &(*topics)[i].name, false);
		kio_i32_array(io, &(*topics)[i].partition_indexes, false);
		kio_no_tags(io);
	}
}

void kafka_walk_offset_fetch_request(struct kafka_io *io, void *msg)
{
	struct kafka_offset_fetch_request *m = msg;
	int16_t v = io->version;
	if (v <= 7) {
		kio_str(io, &m->group_id, false);
		walk_offset_fetch_topics(io, &m->topics, &m->topic_count, v >= 2);
	} else {
		int32_t n = KW_ARRAY(io, m->groups, m->group_count,
		                     kw_str(io) + kw_arr(io) + kw_tags(io), false);
		for (int32_t i = 0; i < n; i++) {
			kio_str(io, &m->groups[i].group_id, false);
			walk_offset_fetch_topics(io, &m->groups[i].topics,
			                         &m->groups[i].topic_count, true);
			kio_no_tags(io);
		}
	}
	kio_bool_if(io, v >= 7, &m->require_stable, false);
	kio_no_tags(io);
}

static void walk_offset_fetch_topic_responses(struct kafka_io *io,
                                              struct kafka_offset_fetch_topic_response **topics,
                                              int32_t *count)
{
	int16_t v = io->version;
	int32_t n = kio_array(io, count, (void **)topics, sizeof(**topics),
	                      kw_str(io) + kw_arr(io) + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_offset_fetch_topic_response *t = &(*topics)[i];
		kio_str(io, &t->name, false);
		int32_t pn = KW_ARRAY(io, t->partitions, t->partition_count,
		                      14 + kw_str(io) + kw_tags(io), false);
		for (int32_t j = 0; j < pn; j++) {
			struct kafka_offset_fetch_partition *p = &t->partitions[j];
			kio_i32(io, &p->partition_index);
			kio_i64(io, &p->committed_offset);
			kio_i32_if(io, v >= 5, &p->committed_leader_epoch, -1);
			kio_str(io, &p->metadata, true);
			kio_i16(io, &p->error_code);
			kio_no_tags(io);
		}
		kio_no_tags(io);
	}
}

void kafka_walk_offset_fetch_response(struct kafka_io *io, void *msg)
{
	struct kafka_offset_fetch_response *m = msg;
	int16_t v = io->version;
	kio_i32_if(io, v >= 3, &m->throttle_time_ms, 0);
	if (v <= 7) {
		walk_offset_fetch_topic_responses(io, &m->topics, &m->topic_count);
		kio_i16_if(io, v >= 2, &m->error_code, 0);
	} else {
		int32_t n = KW_ARRAY(io, m->groups, m->group_count,
		                     kw_str(io) + kw_arr(io) + 2 + kw_tags(io), false);
		for (int32_t i = 0; i < n; i++) {
			struct kafka_offset_fetch_group_response *g = &m->groups[i];
			kio_str(io, &g->group_id, false);
			walk_offset_fetch_topic_responses(io, &g->topics, &g->topic_count);
			kio_i16(io, &g->error_code);
			kio_no_tags(io);
		}
	}
	kio_no_tags(io);
}

/* ---- DescribeGroups ---- */

void kafka_walk_describe_groups_request(struct kafka_io *io, void *msg)
{
	struct kafka_describe_groups_request *m = msg;
	kio_str_array(io, &m->groups, false);
	kio_bool_if(io, io->version >= 3, &m->include_authorized_operations, false);
	kio_no_tags(io);
}

static void walk_described_group(struct kafka_io *io, struct kafka_described_group *g)
{
	int16_t v = io->version;
	kio_i16(io, &g->error_code);
	kio_str(io, &g->group_id, false);
	kio_str(io, &g->group_state, false);
	kio_str(io, &g->protocol_type, false);
	kio_str(io, &g->protocol_data, false);
	int32_t n = KW_ARRAY(io, g->members, g->member_count,
	                     3 * kw_str(io) + 2 * kw_arr(io) + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		struct kafka_described_group_member *mb = &g->members[i];
		kio_str(io, &mb->member_id, false);
		kio_str_if(io, v >= 4, &mb->group_instance_id, true);
		kio_str(io, &mb->client_id, false);
		kio_str(io, &mb->client_host, false);
		kio_bytes(io, &mb->member_metadata, false);
		kio_bytes(io, &mb->member_assignment, false);
		kio_no_tags(io);
	}
	kio_i32_if(io, v >= 3, &g->authorized_operations, INT32_MIN);
	kio_no_tags(io);
}

void kafka_walk_describe_groups_response(struct kafka_io *io, void *msg)
{
	struct kafka_describe_groups_response *m = msg;
	kio_i32_if(io, io->version >= 1, &m->throttle_time_ms, 0);
	int32_t n = KW_ARRAY(io, m->groups, m->group_count,
	                     2 + 4 * kw_str(io) + kw_arr(io) + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		walk_described_group(io, &m->groups[i]);
	}
	kio_no_tags(io);
}

/* ---- ListGroups ---- */

void kafka_walk_list_groups_request(struct kafka_io *io, void *msg)
{
	struct kafka_list_groups_request *m = msg;
	if (io->version >= 4) {
		kio_str_array(io, &m->states_filter, false);
	}
	kio_no_tags(io);
}

void kafka_walk_list_groups_response(struct kafka_io *io, void *msg)
{
	struct kafka_list_groups_response *m = msg;
	int16_t v = io->version;
	kio_i32_if(io, v >= 1, &m->throttle_time_ms, 0);
	kio_i16(io, &m->error_code);
	int32_t n = KW_ARRAY(io, m->groups, m->group_count, 2 * kw_str(io) + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		kio_str(io, &m->groups[i].group_id, false);
		kio_str(io, &m->groups[i].protocol_type, false);
		kio_str_if(io, v >= 4, &m->groups[i].group_state, false);
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

/* ---- DeleteGroups ---- */

void kafka_walk_delete_groups_request(struct kafka_io *io, void *msg)
{
	struct kafka_delete_groups_request *m = msg;
	kio_str_array(io, &m->groups_names, false);
	kio_no_tags(io);
}

void kafka_walk_delete_groups_response(struct kafka_io *io, void *msg)
{
	struct kafka_delete_groups_response *m = msg;
	kio_i32(io, &m->throttle_time_ms);
	int32_t n = KW_ARRAY(io, m->results, m->result_count, kw_str(io) + 2 + kw_tags(io), false);
	for (int32_t i = 0; i < n; i++) {
		kio_str(io, &m->results[i].group_id, false);
		kio_i16(io, &m->results[i].error_code);
		kio_no_tags(io);
	}
	kio_no_tags(io);
}

/* ---- InitProducerId ---- */

void kafka_walk_init_producer_id_request(struct kafka_io *io, void *msg)
{
	struct kafka_init_producer_id_request *m = msg;
	int16_t v = io->version;
	kio_str(io, &m->transactional_id, true);
	kio_i32(io, &m->transaction_timeout_ms);
	kio_i64_if(io, v >= 3, &m->producer_id, -1);
	kio_i16_if(io, v >= 3, &m->producer_epoch, -1);
	kio_no_tags(io);
}

void kafka_walk_init_producer_id_response(struct kafka_io *io, void *msg)
{
	struct kafka_init_producer_id_response *m = msg;
	kio_i32(io, &m->throttle_time_ms);
	kio_i16(io, &m->error_code);
	kio_i64(io, &m->producer_id);
	kio_i16(io, &m->producer_epoch);
	kio_no_tags(io);
}

/* ---- SASL ---- */

void kafka_walk_sasl_handshake_request(struct kafka_io *io, void *msg)
{
	struct kafka_sasl_handshake_request *m = msg;
	kio_str(io, &m->mechanism, false);
}

void kafka_walk_sasl_handshake_response(struct kafka_io *io, void *msg)
{
	struct kafka_sasl_handshake_response *m = msg;
	kio_i16(io, &m->error_code);
	kio_str_array(io, &m->mechanisms, false);
}

void kafka_walk_sasl_authenticate_request(struct kafka_io *io, void *msg)
{
	struct kafka_sasl_authenticate_request *m = msg;
	kio_bytes(io, &m->auth_bytes, false);
	kio_no_tags(io);
}

void kafka_walk_sasl_authenticate_response(struct kafka_io *io, void *msg)
{
	struct kafka_sasl_authenticate_response *m = msg;
	kio_i16(io, &m->error_code);
	kio_str(io, &m->error_message, true);
	kio_bytes(io, &m->auth_bytes, false);
	kio_i64_if(io, io->version >= 1, &m->session_lifetime_ms, 0);
	kio_no_tags(io);
}
