/*
 * controller_metrics.c — the controller's figures on /metrics and in mntr,
 * named after Kafka's controller metrics where one exists
 * (kafka.controller:type=KafkaController,name=...), so dashboards and alerts
 * written for Kafka map one to one.
 *
 * Every server reports the cluster figures of its own applied image (the
 * same for the same offset); ActiveControllerCount is 1 only on the server
 * whose controller is active, and only that server knows how far each
 * broker's metadata lags (from the brokers' heartbeats), so only it reports
 * keel_controller_broker_metadata_lag.
 *
 * Kafka's EventQueueTimeMs has no counterpart to wait in: keel's controller
 * decides a request in the loop turn it arrives in. keel_controller_request_
 * seconds measures what a request costs there instead: from the controller
 * taking it to its answer being released (decision, Raft commit, apply).
 */
#include <inttypes.h>
#include <stdio.h>

#include "meta/stats.h"
#include "core/controller.h"
#include "node/metrics.h"
#include "node/node.h"

#define NAME(kafka) "keel_controller_" kafka

void node_ctl_metrics(const struct node *n, struct keel_wbuf *w)
{
	const struct meta_image *img = node_ctl_image(&n->core);
	struct meta_cluster_stats s;
	meta_cluster_stats(img, &s);
	metrics_gauge(w, NAME("ActiveControllerCount"),
		      "1 on the server whose controller is active", node_ctl_active(&n->core) ? 1 : 0);
	metrics_gauge(w, NAME("GlobalTopicCount"), "Topics", s.topics);
	metrics_gauge(w, NAME("GlobalPartitionCount"), "Partitions", s.partitions);
	metrics_gauge(w, NAME("OfflinePartitionsCount"),
		      "Partitions without a live leader", s.offline_partitions);
	metrics_gauge(w, NAME("PreferredReplicaImbalanceCount"),
		      "Partitions not led by their first replica", s.preferred_replica_imbalance);
	metrics_gauge(w, NAME("UnderReplicatedPartitions"),
		      "Partitions whose ISR is smaller than their replicas",
		      s.under_replicated_partitions);
	metrics_gauge(w, NAME("UnderMinIsrPartitionCount"),
		      "Partitions whose ISR is below min.insync.replicas",
		      s.under_min_isr_partitions);
	metrics_gauge(w, NAME("AtMinIsrPartitionCount"),
		      "Partitions whose ISR is exactly min.insync.replicas", s.at_min_isr_partitions);
	metrics_gauge(w, NAME("ActiveBrokerCount"), "Brokers unfenced and not shutting down",
		      s.brokers_active);
	metrics_gauge(w, NAME("FencedBrokerCount"), "Brokers fenced", s.brokers_fenced);
	metrics_gauge(w, NAME("ControlledShutdownBrokerCount"),
		      "Brokers in controlled shutdown", s.brokers_in_controlled_shutdown);
	metrics_gauge(w, NAME("MetadataOffset"), "Offset of the last applied metadata batch",
		      (double)img->offset);
	metrics_histogram(w, "keel_controller_request_seconds",
			  "Controller requests on the active controller: taken to answered "
			  "(decided, committed, applied; keel's controller has no event queue)",
			  node_ctl_request_latency(&n->core));
	if (!node_ctl_active(&n->core)) {
		return;
	}
	metrics_family(w, "keel_controller_broker_metadata_lag",
		       "Metadata offsets the broker is behind, from its last heartbeat to the "
		       "active controller",
		       "gauge");
	for (uint32_t i = 0; i < img->broker_count; i++) {
		int32_t id = img->brokers[i]->id;
		int64_t at = node_ctl_broker_offset(&n->core, id);
		if (at < 0) {
			continue;
		}
		char label[16];
		snprintf(label, sizeof(label), "%" PRId32, id);
		metrics_labeled(w, "keel_controller_broker_metadata_lag", "broker", label,
				(double)(img->offset > at ? img->offset - at : 0));
	}
}

void node_ctl_mntr(const struct node *n, struct keel_wbuf *w)
{
	const struct meta_image *img = node_ctl_image(&n->core);
	struct meta_cluster_stats s;
	meta_cluster_stats(img, &s);
	char text[768];
	int len = snprintf(text, sizeof(text),
			   "keel_controller_active\t%d\n"
			   "keel_global_topic_count\t%u\n"
			   "keel_global_partition_count\t%u\n"
			   "keel_offline_partitions_count\t%u\n"
			   "keel_preferred_replica_imbalance_count\t%u\n"
			   "keel_under_replicated_partitions\t%u\n"
			   "keel_under_min_isr_partition_count\t%u\n"
			   "keel_active_broker_count\t%u\n"
			   "keel_fenced_broker_count\t%u\n"
			   "keel_controlled_shutdown_broker_count\t%u\n",
			   node_ctl_active(&n->core) ? 1 : 0, s.topics, s.partitions, s.offline_partitions,
			   s.preferred_replica_imbalance, s.under_replicated_partitions,
			   s.under_min_isr_partitions, s.brokers_active, s.brokers_fenced,
			   s.brokers_in_controlled_shutdown);
	if (len > 0) {
		keel_wbuf_bytes(w, text, (size_t)len < sizeof(text) ? (size_t)len : sizeof(text) - 1);
	}
}
