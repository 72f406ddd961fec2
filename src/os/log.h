/*
 * log.h — operator log lines on stderr.
 *
 * One line per event that matters to an operator: ISO-8601 UTC time with
 * milliseconds, level, an optional component tag, the message. Lines are
 * written with a single write(2) so concurrent threads never interleave
 * inside a line. The level threshold is process-wide (set once at start).
 */
#ifndef KEEL_OS_LOG_H
#define KEEL_OS_LOG_H

#include <stdarg.h>

enum keel_log_level {
	KEEL_LOG_DEBUG = 0,
	KEEL_LOG_INFO = 1,
	KEEL_LOG_WARN = 2,
	KEEL_LOG_ERROR = 3,
	KEEL_LOG_OFF = 4,
};

void keel_log_set_level(enum keel_log_level level);

/* Parses "debug", "info", "warn", "error", "off"; returns -1 when unknown. */
int keel_log_parse_level(const char *name);

/* Adds " id=N" after the level on every line (a server's own id). */
void keel_log_set_prefix(const char *prefix);

__attribute__((format(printf, 2, 3))) void keel_log(enum keel_log_level level,
						    const char *fmt, ...);
void keel_logv(enum keel_log_level level, const char *fmt, va_list ap);

#define KEEL_DEBUG(...) keel_log(KEEL_LOG_DEBUG, __VA_ARGS__)
#define KEEL_INFO(...) keel_log(KEEL_LOG_INFO, __VA_ARGS__)
#define KEEL_WARN(...) keel_log(KEEL_LOG_WARN, __VA_ARGS__)
#define KEEL_ERROR(...) keel_log(KEEL_LOG_ERROR, __VA_ARGS__)

#endif
