/*
 * http.h — a minimal HTTP/1.0 responder for the metrics and health endpoints.
 *
 * GET only, one request per connection, request head at most 8 KiB, answer
 * built by the caller's handler into a writer; the connection closes after
 * the reply. Enough for Prometheus scrapes and curl; nothing more.
 *
 * Limits (struct http_limits, all 0 = none): at most max_connections open
 * (more are accepted and closed at once, counted in `refused`); a
 * connection whose request head has not arrived request_timeout_ms after
 * accept, or that made no progress (bytes in or reply written) for
 * idle_timeout_ms, is closed and counted in `timed_out`. A sweep timer
 * checks the deadlines every SWEEP interval (a quarter of the shortest
 * timeout, at least 50 ms). Descriptors: an optional net_fd_budget keeps
 * clients of this port out of the reserve (net/limits.h).
 */
#ifndef KEEL_NET_HTTP_H
#define KEEL_NET_HTTP_H

#include <uv.h>

#include "base/buf.h"
#include "base/err.h"

/* Fills `body` for `path`; returns the HTTP status (200, 404, ...) and sets
 * *content_type (a static string). */
typedef int (*http_handler_fn)(void *ctx, const char *path, struct keel_wbuf *body,
			       const char **content_type);

struct net_fd_budget;
struct http_conn;

struct http_limits {
	unsigned max_connections;
	uint64_t request_timeout_ms;
	uint64_t idle_timeout_ms;
	const struct net_fd_budget *fds; /* NULL: no reserve check */
};

struct http_server {
	uv_tcp_t tcp;
	uv_timer_t sweep;
	http_handler_fn handler;
	void *ctx;
	struct http_limits limits;
	struct http_conn *conns; /* open connections (list) */
	unsigned open_connections;
	uint64_t refused;   /* over max_connections or the fd reserve */
	uint64_t timed_out; /* closed by a deadline */
	bool sweeping;
	bool closing;
};

enum keel_err http_server_start(struct http_server *srv, uv_loop_t *loop, const char *addr,
				http_handler_fn handler, void *ctx, char *err, size_t err_size);
/* Sets the limits (any time after start; the defaults are none). */
void http_server_set_limits(struct http_server *srv, const struct http_limits *limits);
void http_server_close(struct http_server *srv);

#endif
