/*
 * metrics.h — Prometheus text exposition helpers and latency histograms.
 *
 * Histograms have fixed bucket bounds in microseconds (50 us .. 10 s, about
 * x2 apart); observe() is O(buckets) with no allocation. The node keeps its
 * counters in plain fields and renders everything per scrape.
 */
#ifndef KEEL_NODE_METRICS_H
#define KEEL_NODE_METRICS_H

#include <stdint.h>

#include "base/buf.h"

#define METRICS_BUCKETS 19

struct metrics_hist {
	uint64_t counts[METRICS_BUCKETS + 1]; /* last: +Inf */
	uint64_t total;
	uint64_t sum_us;
};

void metrics_hist_observe(struct metrics_hist *h, uint64_t value_us);

/* The value at quantile q (0..1) as a bucket upper bound in microseconds. */
uint64_t metrics_hist_quantile(const struct metrics_hist *h, double q);

void metrics_counter(struct keel_wbuf *w, const char *name, const char *help, uint64_t value);
void metrics_gauge(struct keel_wbuf *w, const char *name, const char *help, double value);
/* A gauge family with one sample per label value: metrics_family() once,
 * then metrics_labeled() per sample. */
void metrics_family(struct keel_wbuf *w, const char *name, const char *help, const char *type);
void metrics_labeled(struct keel_wbuf *w, const char *name, const char *label,
		     const char *label_value, double value);
/* A histogram in seconds (Prometheus convention) from microsecond samples. */
void metrics_histogram(struct keel_wbuf *w, const char *name, const char *help,
		       const struct metrics_hist *h);

#endif
