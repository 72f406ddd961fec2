/*
 * logconfig.c — a partition log's settings from the metadata image, and
 * retention.
 *
 * A topic's log settings come from, in order: the topic's own config, this
 * broker's (BROKER, "<id>"), the cluster default (BROKER, ""), Kafka's
 * default (plog_config_init). keel spells the broker-wide defaults with the
 * topic names (`retention.ms`, not `log.retention.ms`; docs/controller.md).
 * They are applied to every open log on each new image, so an altered
 * config takes effect without a restart: segment size and age from the
 * next append, retention at the next pass. The offsets topic's segments
 * default to offsets.topic.segment.bytes, and retention never cuts it: the
 * group coordinator compacts it (groups.c).
 */
#include <stdlib.h>
#include <string.h>

#include "broker/broker.h"
#include "broker/groups.h"
#include "group/records.h"
#include "meta/fmt.h"

/* Smallest segment.bytes honoured (Kafka's minimum is 14 bytes, which
 * would roll on every batch); smaller values are raised to it. */
#define MIN_SEGMENT_BYTES 1024

const char *broker_config_value(const struct broker_core *core, const char *topic,
                                const char *key)
{
	const struct meta_image *img = &core->image;
	const char *v =
	        topic != NULL ? meta_image_config(img, META_RESOURCE_TOPIC, topic, key) : NULL;
	if (v == NULL) {
		char id[16];
		struct meta_fmt f;
		meta_fmt_init(&f, id, sizeof(id));
		meta_fmt_i64(&f, core->config.node_id);
		v = meta_image_config(img, META_RESOURCE_BROKER, id, key);
	}
	if (v == NULL) {
		v = meta_image_config(img, META_RESOURCE_BROKER, "", key);
	}
	return v;
}

int64_t broker_config_i64(const struct broker_core *core, const char *topic, const char *key,
                          int64_t def)
{
	const char *v = broker_config_value(core, topic, key);
	if (v == NULL || v[0] == '\0') {
		return def;
	}
	char *end = NULL;
	long long x = strtoll(v, &end, 10);
	return end != NULL && *end == '\0' ? (int64_t)x : def;
}

bool broker_topic_deletes(const struct broker_core *core, const char *topic)
{
	if (strcmp(topic, GROUP_OFFSETS_TOPIC) == 0) {
		return false; /* compacted by the group coordinator (groups.c) */
	}
	const char *policy = broker_config_value(core, topic, "cleanup.policy");
	return policy == NULL || strstr(policy, "delete") != NULL;
}

void broker_apply_log_config(const struct broker_core *core, struct broker_partition *p)
{
	if (!p->open || !core->has_image) {
		return;
	}
	struct plog_config def;
	plog_config_init(&def, core->config.vfs, "");
	struct plog_config *c = &p->log.config;
	bool offsets = strcmp(p->topic, GROUP_OFFSETS_TOPIC) == 0;
	int64_t seg = broker_config_i64(core, p->topic, "segment.bytes",
	                         offsets ? (int64_t)broker_offsets_segment_bytes(core)
	                                 : (int64_t)def.segment_bytes);
	c->segment_bytes = (uint64_t)(seg < MIN_SEGMENT_BYTES ? MIN_SEGMENT_BYTES : seg);
	c->segment_ms = broker_config_i64(core, p->topic, "segment.ms", def.segment_ms);
	c->retention_ms = broker_config_i64(core, p->topic, "retention.ms", def.retention_ms);
	c->retention_bytes = broker_config_i64(core, p->topic, "retention.bytes", def.retention_bytes);
	int64_t every = broker_config_i64(core, p->topic, "index.interval.bytes",
	                           (int64_t)def.index_interval_bytes);
	c->index_interval_bytes = every > 0 && every <= UINT32_MAX ? (uint32_t)every
	                                                           : def.index_interval_bytes;
}

void broker_core_retain(struct broker_core *core, int64_t now_ms,
                        struct broker_retention_report *report)
{
	memset(report, 0, sizeof(*report));
	for (uint32_t i = 0; i < core->part_count; i++) {
		struct broker_partition *p = core->parts[i];
		if (!p->open || p->dirty || !broker_topic_deletes(core, p->topic)) {
			continue;
		}
		uint32_t deleted = 0;
		if (plog_retain(&p->log, now_ms, &deleted) != KEEL_OK) {
			report->failed++;
			continue;
		}
		if (deleted > 0) {
			report->segments += deleted;
			report->partitions++;
		}
	}
}
