/*
 * test_meta_util.h — record builders shared by the meta unit tests.
 *
 * Every builder returns a record by value; pointers inside (lists, names)
 * must outlive its use, so tests pass static or stack arrays.
 */
#ifndef KEEL_TEST_META_UTIL_H
#define KEEL_TEST_META_UTIL_H

#include <string.h>

#include "meta/image.h"
#include "meta/record.h"

static inline void tm_topic_id(uint8_t id[16], uint8_t seed)
{
	for (int i = 0; i < 16; i++) {
		id[i] = (uint8_t)(seed + i * 7 + 1);
	}
}

static inline struct meta_record tm_register(int32_t id, int64_t epoch, const char *rack)
{
	static const struct meta_endpoint ep[] = {{"PLAINTEXT", "localhost", 9092, 0}};
	struct meta_record r;
	memset(&r, 0, sizeof(r));
	r.type = META_REC_REGISTER_BROKER;
	r.register_broker.broker_id = id;
	memset(r.register_broker.incarnation_id, (int)(id * 3 + epoch), 16);
	r.register_broker.broker_epoch = epoch;
	r.register_broker.endpoints = ep;
	r.register_broker.endpoint_count = 1;
	r.register_broker.rack = rack;
	r.register_broker.fenced = true;
	return r;
}

static inline struct meta_record tm_broker_ref(uint16_t type, int32_t id, int64_t epoch)
{
	struct meta_record r;
	memset(&r, 0, sizeof(r));
	r.type = type;
	r.fence_broker.broker_id = id;
	r.fence_broker.broker_epoch = epoch;
	return r;
}

static inline struct meta_record tm_topic(const char *name, uint8_t seed)
{
	struct meta_record r;
	memset(&r, 0, sizeof(r));
	r.type = META_REC_TOPIC;
	r.topic.name = name;
	tm_topic_id(r.topic.topic_id, seed);
	return r;
}

static inline struct meta_record tm_partition(uint8_t seed, int32_t pid, const int32_t *replicas,
					      uint32_t nr, const int32_t *isr, uint32_t ni,
					      int32_t leader)
{
	struct meta_record r;
	memset(&r, 0, sizeof(r));
	r.type = META_REC_PARTITION;
	tm_topic_id(r.partition.topic_id, seed);
	r.partition.partition_id = pid;
	r.partition.replicas = replicas;
	r.partition.replica_count = nr;
	r.partition.isr = isr;
	r.partition.isr_count = ni;
	r.partition.leader = leader;
	return r;
}

static inline struct meta_record tm_change(uint8_t seed, int32_t pid, int32_t partition_epoch)
{
	struct meta_record r;
	memset(&r, 0, sizeof(r));
	r.type = META_REC_PARTITION_CHANGE;
	tm_topic_id(r.partition_change.topic_id, seed);
	r.partition_change.partition_id = pid;
	r.partition_change.partition_epoch = partition_epoch;
	r.partition_change.leader = META_NO_LEADER;
	return r;
}

static inline struct meta_record tm_config(uint8_t type, const char *name, const char *key,
					   const char *value)
{
	struct meta_record r;
	memset(&r, 0, sizeof(r));
	r.type = META_REC_CONFIG;
	r.config.resource_type = type;
	r.config.resource_name = name;
	r.config.key = key;
	r.config.value = value;
	return r;
}

/* Applies records as one batch of controller (1, epoch) at `offset`. */
static inline enum keel_err tm_apply(struct meta_image *img, int64_t offset, int32_t epoch,
				     struct meta_record *recs, uint32_t n,
				     struct meta_apply_result *res, struct meta_changes *ch)
{
	struct meta_batch b = {{1, epoch, 1000 + offset}, recs, n};
	return meta_image_apply(img, offset, &b, ch, res);
}

#endif
