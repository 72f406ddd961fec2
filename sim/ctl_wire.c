/*
 * ctl_wire.c — controller mode over the real server core: a simulated
 * broker's or admin client's request (struct sim_ctl_msg) as the body of a
 * keel extension request (meta/proto.h, opcode NODE_CTL_OPCODE_BASE + api),
 * which the core's controller glue (core/controller.c) decodes, and its
 * response body back into the message's reply fields. The same encoders
 * and decoders as keel's broker and CLI.
 */
#include <string.h>

#include "base/alloc.h"
#include "base/assert.h"
#include "core/controller.h"
#include "meta/proto.h"
#include "sim/ctl_int.h"

void sim_ctl_incarnation_id(int32_t broker, uint32_t incarnation, uint8_t out[META_UUID_SIZE])
{
	memset(out, 0, META_UUID_SIZE);
	out[0] = 0xbe;
	keel_store_be32(out + 4, (uint32_t)broker);
	keel_store_be32(out + 8, incarnation);
}

static const struct meta_config_kv unclean_on[] = {{META_CONFIG_UNCLEAN_ELECTION, "true"}};
static const struct meta_config_kv unclean_off[] = {{META_CONFIG_UNCLEAN_ELECTION, "false"}};

static enum meta_api encode_admin(const struct sim_ctl_msg *m, struct keel_wbuf *w)
{
	enum keel_err err;
	enum meta_api api;
	if (m->api == SIM_API_CREATE_TOPIC) {
		struct meta_create_topic t = {m->topic, m->partitions, m->replication_factor,
					      m->unclean ? unclean_on : NULL, m->unclean ? 1 : 0,
					      NULL, 0};
		struct meta_create_topics_request req = {&t, 1, false};
		err = meta_encode_create_topics_request(w, &req);
		api = META_API_CREATE_TOPICS;
	} else if (m->api == SIM_API_DELETE_TOPIC) {
		const char *name = m->topic;
		struct meta_delete_topics_request req = {&name, 1};
		err = meta_encode_delete_topics_request(w, &req);
		api = META_API_DELETE_TOPICS;
	} else {
		struct meta_alter_config_resource res = {META_RESOURCE_BROKER, "",
							 m->unclean ? unclean_on : unclean_off, 1};
		struct meta_alter_configs_request req = {&res, 1, false};
		err = meta_encode_alter_configs_request(w, &req);
		api = META_API_ALTER_CONFIGS;
	}
	KEEL_ASSERT(err == KEEL_OK);
	return api;
}

void sim_ctl_encode_request(const struct sim_ctl_msg *m, struct keel_wbuf *w, int32_t *opcode)
{
	static const struct meta_endpoint ep = {"PLAINTEXT", "127.0.0.1", 9092, META_SEC_PLAINTEXT};
	enum keel_err err = KEEL_OK;
	enum meta_api api;
	switch (m->api) {
	case SIM_API_REGISTER: {
		struct meta_broker_registration_request req = {
			.broker_id = m->broker,
			.endpoints = &ep,
			.endpoint_count = 1,
			.rack = m->rack[0] != '\0' ? m->rack : NULL,
			.previous_broker_epoch = m->broker_epoch,
		};
		sim_ctl_incarnation_id(m->broker, m->incarnation, req.incarnation_id);
		err = meta_encode_broker_registration_request(w, &req);
		api = META_API_BROKER_REGISTRATION;
		break;
	}
	case SIM_API_HEARTBEAT: {
		struct meta_broker_heartbeat_request req = {m->broker, m->broker_epoch,
							    m->metadata_offset, false,
							    m->want_shutdown};
		err = meta_encode_broker_heartbeat_request(w, &req);
		api = META_API_BROKER_HEARTBEAT;
		break;
	}
	case SIM_API_ALTER_PARTITION: {
		struct meta_alter_partition_item item = {m->partition, m->leader_epoch,
							 m->partition_epoch, m->isr, m->isr_count,
							 m->recovery};
		struct meta_alter_partition_topic topic;
		memcpy(topic.topic_id, m->topic_id, META_UUID_SIZE);
		topic.partitions = &item;
		topic.partition_count = 1;
		struct meta_alter_partition_request req = {m->broker, m->broker_epoch, &topic, 1};
		err = meta_encode_alter_partition_request(w, &req);
		api = META_API_ALTER_PARTITION;
		break;
	}
	default:
		api = encode_admin(m, w);
		break;
	}
	KEEL_ASSERT(err == KEEL_OK);
	KEEL_ASSERT(keel_wbuf_ok(w));
	*opcode = NODE_CTL_OPCODE_BASE + (int32_t)api;
}

/* The reply fields from a decoded response body; false when it does not
 * decode (a server bug). */
static bool decode_body(struct sim_ctl_msg *m, const uint8_t *body, size_t size,
			struct keel_arena *arena)
{
	struct meta_errbuf eb;
	memset(&eb, 0, sizeof(eb));
	switch (m->api) {
	case SIM_API_REGISTER: {
		struct meta_broker_registration_response r;
		if (meta_decode_broker_registration_response(body, size, arena, &r, &eb) != KEEL_OK) {
			return false;
		}
		m->error = r.error;
		m->assigned_epoch = r.broker_epoch;
		return true;
	}
	case SIM_API_HEARTBEAT: {
		struct meta_broker_heartbeat_response r;
		if (meta_decode_broker_heartbeat_response(body, size, arena, &r, &eb) != KEEL_OK) {
			return false;
		}
		m->error = r.error;
		m->is_caught_up = r.is_caught_up;
		m->is_fenced = r.is_fenced;
		m->should_shut_down = r.should_shut_down;
		return true;
	}
	case SIM_API_ALTER_PARTITION: {
		struct meta_alter_partition_response r;
		if (meta_decode_alter_partition_response(body, size, arena, &r, &eb) != KEEL_OK) {
			return false;
		}
		m->error = r.error;
		if (r.error == META_ERR_NONE && r.topic_count == 1 &&
		    r.topics[0].partition_count == 1) {
			const struct meta_alter_partition_result *p = &r.topics[0].partitions[0];
			m->error = p->error;
			m->result_leader = p->leader;
			m->result_leader_epoch = p->leader_epoch;
			m->result_partition_epoch = p->partition_epoch;
		}
		return true;
	}
	case SIM_API_CREATE_TOPIC: {
		struct meta_create_topics_response r;
		if (meta_decode_create_topics_response(body, size, arena, &r, &eb) != KEEL_OK) {
			return false;
		}
		m->error = r.topic_count == 1 ? r.topics[0].error : META_ERR_UNKNOWN_SERVER_ERROR;
		return true;
	}
	case SIM_API_DELETE_TOPIC: {
		struct meta_delete_topics_response r;
		if (meta_decode_delete_topics_response(body, size, arena, &r, &eb) != KEEL_OK) {
			return false;
		}
		m->error = r.result_count == 1 ? r.results[0].error : META_ERR_UNKNOWN_SERVER_ERROR;
		return true;
	}
	default: {
		struct meta_alter_configs_response r;
		if (meta_decode_alter_configs_response(body, size, arena, &r, &eb) != KEEL_OK) {
			return false;
		}
		m->error = r.result_count == 1 ? r.results[0].error : META_ERR_UNKNOWN_SERVER_ERROR;
		return true;
	}
	}
}

void sim_ctl_decode_reply(struct sim *s, struct sim_ctl_msg *m, int32_t zk_err,
			  const uint8_t *body, size_t size)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	if (zk_err != 0) {
		sim_fail(s, "controller request (api %u) of broker %d: ZooKeeper error %d",
			 m->api, m->broker, zk_err);
		return;
	}
	keel_arena_reset(&w->arena);
	if (!decode_body(m, body, size, &w->arena)) {
		sim_fail(s, "controller request (api %u) of broker %d: the reply (%zu bytes) does "
			    "not decode",
			 m->api, m->broker, size);
	}
}
