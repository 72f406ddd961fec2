/* metrics.c — histograms and Prometheus text output (see metrics.h). */
#include "node/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void wprintf(struct keel_wbuf *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void wprintf(struct keel_wbuf *w, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0) {
		keel_wbuf_bytes(w, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
	}
}

void metrics_counter(struct keel_wbuf *w, const char *name, const char *help, uint64_t value)
{
	wprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
		(unsigned long long)value);
}

void metrics_family(struct keel_wbuf *w, const char *name, const char *help, const char *type)
{
	wprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void metrics_labeled(struct keel_wbuf *w, const char *name, const char *label,
		     const char *label_value, double value)
{
	wprintf(w, "%s{%s=\"%s\"} %.17g\n", name, label, label_value, value);
}

void metrics_gauge(struct keel_wbuf *w, const char *name, const char *help, double value)
{
	wprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", name, help, name, name, value);
}

void metrics_histogram(struct keel_wbuf *w, const char *name, const char *help,
		       const struct metrics_hist *h)
{
	wprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	uint64_t cum = 0;
	for (size_t i = 0; i < METRICS_BUCKETS; i++) {
		cum += h->counts[i];
		wprintf(w, "%s_bucket{le=\"%g\"} %llu\n", name, (double)metrics_hist_bound_us(i) / 1e6,
			(unsigned long long)cum);
	}
	cum += h->counts[METRICS_BUCKETS];
	wprintf(w, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
		(unsigned long long)cum, name, (double)h->sum_us / 1e6, name,
		(unsigned long long)h->total);
}
