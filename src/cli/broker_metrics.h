/*
 * broker_metrics.h — what `keel broker --metrics-port` serves on /metrics.
 */
#ifndef KEEL_CLI_BROKER_METRICS_H
#define KEEL_CLI_BROKER_METRICS_H

#include <stdint.h>

#include "base/buf.h"
#include "broker/broker.h"
#include "node/metrics.h"

/* The shell's request counters (loop thread only). */
struct broker_request_stats {
	uint64_t produce_requests;
	uint64_t consumer_fetches;
	uint64_t follower_fetches;
	uint64_t syncs;
	uint64_t acks_all_waits;
	uint64_t hw_checkpoints;         /* high-watermark checkpoints written */
	uint64_t hw_checkpoint_failures; /* ... and failed */
	struct metrics_hist produce_latency; /* microseconds */
	struct metrics_hist fetch_latency;
};

/* Appends the exposition text to w. Loop thread, no sync in flight. */
void broker_metrics_render(const struct broker_core *core, const struct broker_request_stats *rs,
                           struct keel_wbuf *w);

#endif
