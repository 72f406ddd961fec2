/* log.c — stderr log lines (see log.h). */
#include "os/log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOG_MIN(a, b) ((a) < (b) ? (a) : (b))

static enum keel_log_level log_level = KEEL_LOG_INFO;
static char log_prefix[64];

void keel_log_set_level(enum keel_log_level level)
{
	log_level = level;
}

void keel_log_set_prefix(const char *prefix)
{
	snprintf(log_prefix, sizeof(log_prefix), "%s", prefix != NULL ? prefix : "");
}

int keel_log_parse_level(const char *name)
{
	static const char *const names[] = {"debug", "info", "warn", "error", "off"};
	for (int i = 0; i < 5; i++) {
		if (strcmp(name, names[i]) == 0) {
			return i;
		}
	}
	return -1;
}

void keel_logv(enum keel_log_level level, const char *fmt, va_list ap)
{
	static const char *const tags[] = {"DEBUG", "INFO ", "WARN ", "ERROR"};
	if (level < log_level || level >= KEEL_LOG_OFF) {
		return;
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char line[2048];
	int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s%s%s ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			 tm.tm_sec, ts.tv_nsec / 1000000, tags[level],
			 log_prefix[0] != '\0' ? " " : "", log_prefix);
	if (n < 0) {
		return;
	}
	size_t used = (size_t)n;
	int m = vsnprintf(line + used, sizeof(line) - used - 1, fmt, ap);
	if (m > 0) {
		used += LOG_MIN((size_t)m, sizeof(line) - used - 2);
	}
	line[used++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, used);
	(void)w;
}

void keel_log(enum keel_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	keel_logv(level, fmt, ap);
	va_end(ap);
}
