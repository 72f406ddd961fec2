/* stats.c — cluster health figures from an image (see stats.h). */
#include "meta/stats.h"

#include <string.h>

/* A whole decimal number >= 1, else 0. */
static uint32_t positive(const char *v)
{
	if (v == NULL || *v == '\0') {
		return 0;
	}
	uint64_t n = 0;
	for (const char *p = v; *p != '\0'; p++) {
		if (*p < '0' || *p > '9' || n > UINT32_MAX / 10) {
			return 0;
		}
		n = n * 10 + (uint64_t)(*p - '0');
	}
	return n <= UINT32_MAX ? (uint32_t)n : 0;
}

uint32_t meta_min_isr(const struct meta_image *img, const char *topic)
{
	uint32_t n = positive(meta_image_config(img, META_RESOURCE_TOPIC, topic,
						"min.insync.replicas"));
	if (n == 0) {
		n = positive(meta_image_config(img, META_RESOURCE_BROKER, "",
					       "min.insync.replicas"));
	}
	return n > 0 ? n : 1;
}

void meta_cluster_stats(const struct meta_image *img, struct meta_cluster_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < img->broker_count; i++) {
		const struct meta_broker *b = img->brokers[i];
		if (b->fenced) {
			out->brokers_fenced++;
		} else if (b->in_controlled_shutdown) {
			out->brokers_in_controlled_shutdown++;
		} else {
			out->brokers_active++;
		}
	}
	out->topics = img->topic_count;
	for (uint32_t t = 0; t < img->topic_count; t++) {
		const struct meta_topic *topic = img->topics[t];
		uint32_t min_isr = meta_min_isr(img, topic->name);
		out->partitions += topic->partition_count;
		for (uint32_t p = 0; p < topic->partition_count; p++) {
			const struct meta_partition *part = &topic->partitions[p];
			const struct meta_broker *leader =
				part->leader == META_NO_LEADER ? NULL
							       : meta_image_broker(img, part->leader);
			if (leader == NULL || leader->fenced) {
				out->offline_partitions++;
			} else if (part->replica_count > 0 && part->leader != part->replicas[0]) {
				out->preferred_replica_imbalance++;
			}
			if (part->isr_count < part->replica_count) {
				out->under_replicated_partitions++;
			}
			if (part->isr_count < min_isr) {
				out->under_min_isr_partitions++;
			} else if (part->isr_count == min_isr) {
				out->at_min_isr_partitions++;
			}
		}
	}
}
