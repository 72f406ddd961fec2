/*
 * metrics.h — Prometheus text exposition helpers (the histograms they
 * render are core/hist.h). The node keeps its counters in plain fields and
 * renders everything per scrape.
 */
#ifndef KEEL_NODE_METRICS_H
#define KEEL_NODE_METRICS_H

#include <stdint.h>

#include "base/buf.h"
#include "core/hist.h"

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

/* The controller's figures for /metrics and for mntr (controller_metrics.c). */
struct node;
void node_ctl_metrics(const struct node *n, struct keel_wbuf *w);
void node_ctl_mntr(const struct node *n, struct keel_wbuf *w);

#endif
