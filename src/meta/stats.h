/*
 * stats.h — the cluster's health in numbers, from a metadata image: what an
 * operator watches on a Kafka controller (OfflinePartitionsCount,
 * PreferredReplicaImbalanceCount, GlobalTopicCount, ...). Pure: computed on
 * demand from the image every server applies, so every server reports the
 * same figures for the same offset.
 */
#ifndef KEEL_META_STATS_H
#define KEEL_META_STATS_H

#include <stdint.h>

#include "meta/image.h"

struct meta_cluster_stats {
	uint32_t topics;
	uint32_t partitions;
	/* No leader, or a leader that is fenced or not registered. */
	uint32_t offline_partitions;
	/* Online, but led by a broker other than the first replica (the
	 * preferred leader); an offline partition counts as offline only. */
	uint32_t preferred_replica_imbalance;
	/* ISR smaller than the replica set. */
	uint32_t under_replicated_partitions;
	/* ISR smaller than min.insync.replicas (topic, else cluster default, else 1). */
	uint32_t under_min_isr_partitions;
	/* ISR exactly min.insync.replicas: one more loss blocks acks=all. */
	uint32_t at_min_isr_partitions;
	uint32_t brokers_active;        /* unfenced, not shutting down */
	uint32_t brokers_fenced;
	uint32_t brokers_in_controlled_shutdown; /* unfenced and shutting down */
};

void meta_cluster_stats(const struct meta_image *img, struct meta_cluster_stats *out);

/* min.insync.replicas in force for `topic`: the topic's config, else the
 * cluster default (resource BROKER, ""), else 1. */
uint32_t meta_min_isr(const struct meta_image *img, const char *topic);

#endif
