/*
 * broker_metrics.c — the broker's /metrics (Prometheus text), served on
 * --metrics-port by the loop thread: replication health from the core
 * (under-replicated and offline partitions, ISR shrinks/expands asked for,
 * each follower's lag behind this leader) and request rates and latencies
 * from the shell. Names follow Kafka's JMX ones, flattened the way the
 * Prometheus JMX exporter does (kafka_server_replicamanager_...).
 */
#include <stdio.h>

#include "cli/broker_metrics.h"

static void partitions(const struct broker_core *core, struct keel_wbuf *w)
{
	uint32_t under = 0, offline = 0, leading = 0, under_min = 0;
	for (uint32_t i = 0; i < core->part_count; i++) {
		const struct broker_partition *p = core->parts[i];
		offline += p->leader_id < 0;
		if (!p->leader) {
			continue;
		}
		leading++;
		under += p->isr_count < p->replica_count;
		under_min += p->isr_count < p->min_isr;
	}
	metrics_gauge(w, "kafka_server_replicamanager_partitioncount",
	              "Partitions this broker holds a replica of.", core->part_count);
	metrics_gauge(w, "kafka_server_replicamanager_leadercount", "Partitions this broker leads.",
	              leading);
	metrics_gauge(w, "kafka_server_replicamanager_underreplicatedpartitions",
	              "Partitions led here whose ISR is smaller than the replica set.", under);
	metrics_gauge(w, "kafka_server_replicamanager_underminisrpartitioncount",
	              "Partitions led here whose ISR is below min.insync.replicas.", under_min);
	metrics_gauge(w, "kafka_controller_kafkacontroller_offlinepartitionscount",
	              "Partitions held here that have no leader in this broker's image.", offline);
	const struct broker_replication_stats *st = &core->stats;
	metrics_counter(w, "kafka_server_replicamanager_isrshrinks_total",
	                "Replicas this leader asked the controller to drop from an ISR (lag).",
	                st->isr_shrinks);
	metrics_counter(w, "kafka_server_replicamanager_isrexpands_total",
	                "Replicas this leader asked the controller to add back to an ISR.",
	                st->isr_expands);
	metrics_counter(w, "keel_broker_follower_truncations_total",
	                "Follower logs cut after OffsetForLeaderEpoch.", st->truncations);
	metrics_counter(w, "keel_broker_follower_bytes_total",
	                "Record bytes appended here as a follower.", st->follower_bytes);
	/* Leader side: how far each follower is behind this leader's log end. */
	metrics_family(w, "kafka_server_fetcherlagmetrics_consumerlag",
	               "Offsets a follower is behind this leader's log end (-1: not heard from "
	               "at this leader epoch).",
	               "gauge");
	for (uint32_t i = 0; i < core->part_count; i++) {
		const struct broker_partition *p = core->parts[i];
		if (!p->leader || !p->open) {
			continue;
		}
		for (uint32_t r = 0; r < p->replica_count; r++) {
			if (p->replicas[r] == core->config.node_id) {
				continue;
			}
			int64_t end = p->progress[r].log_end_offset;
			int64_t lag = end < 0 ? -1 : plog_log_end_offset(&p->log) - end;
			char sample[BROKER_TOPIC_MAX + 128];
			int n = snprintf(sample, sizeof(sample),
			                 "kafka_server_fetcherlagmetrics_consumerlag{topic=\"%s\","
			                 "partition=\"%d\",replica=\"%d\"} %lld\n",
			                 p->topic, p->index, p->replicas[r], (long long)lag);
			if (n > 0 && (size_t)n < sizeof(sample)) {
				keel_wbuf_bytes(w, sample, (size_t)n);
			}
		}
	}
}

/* Every held partition's high watermark as this broker knows it (a
 * follower's is the leader's, capped at its log end). */
static void high_watermarks(const struct broker_core *core, struct keel_wbuf *w)
{
	metrics_family(w, "keel_broker_partition_high_watermark",
	               "The high watermark of each partition held here, as this broker knows it.",
	               "gauge");
	for (uint32_t i = 0; i < core->part_count; i++) {
		const struct broker_partition *p = core->parts[i];
		if (!p->open) {
			continue;
		}
		char sample[BROKER_TOPIC_MAX + 128];
		int n = snprintf(sample, sizeof(sample),
		                 "keel_broker_partition_high_watermark{topic=\"%s\",partition=\"%d\"} "
		                 "%lld\n",
		                 p->topic, p->index, (long long)p->high_watermark);
		if (n > 0 && (size_t)n < sizeof(sample)) {
			keel_wbuf_bytes(w, sample, (size_t)n);
		}
	}
}

void broker_metrics_render(const struct broker_core *core, const struct broker_request_stats *rs,
                           struct keel_wbuf *w)
{
	partitions(core, w);
	high_watermarks(core, w);
	metrics_counter(w, "kafka_network_requestmetrics_requests_produce_total",
	                "Produce requests answered.", rs->produce_requests);
	metrics_counter(w, "kafka_network_requestmetrics_requests_fetchconsumer_total",
	                "Fetch requests from consumers answered.", rs->consumer_fetches);
	metrics_counter(w, "kafka_network_requestmetrics_requests_fetchfollower_total",
	                "Fetch requests from followers answered.", rs->follower_fetches);
	metrics_counter(w, "keel_broker_group_syncs_total",
	                "fdatasync rounds (group commits) of the partition logs.", rs->syncs);
	metrics_counter(w, "keel_broker_acks_all_waits_total",
	                "acks=all produces that waited for the ISR after their sync.",
	                rs->acks_all_waits);
	metrics_counter(w, "keel_broker_hw_checkpoints_total",
	                "High-watermark checkpoints written (replication-offset-checkpoint).",
	                rs->hw_checkpoints);
	metrics_counter(w, "keel_broker_hw_checkpoint_failures_total",
	                "High-watermark checkpoint writes that failed.", rs->hw_checkpoint_failures);
	metrics_histogram(w, "kafka_network_requestmetrics_totaltimems_produce_seconds",
	                  "Produce request latency, frame read to answer queued.",
	                  &rs->produce_latency);
	metrics_histogram(w, "kafka_network_requestmetrics_totaltimems_fetchconsumer_seconds",
	                  "Consumer fetch latency (long polls included).", &rs->fetch_latency);
}
