/*
 * http.h — a minimal HTTP/1.0 responder for the metrics and health endpoints.
 *
 * GET only, one request per connection, request head at most 8 KiB, answer
 * built by the caller's handler into a writer; the connection closes after
 * the reply. Enough for Prometheus scrapes and curl; nothing more.
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

struct http_server {
	uv_tcp_t tcp;
	http_handler_fn handler;
	void *ctx;
	unsigned open_connections;
	bool closing;
};

enum keel_err http_server_start(struct http_server *srv, uv_loop_t *loop, const char *addr,
				http_handler_fn handler, void *ctx, char *err, size_t err_size);
void http_server_close(struct http_server *srv);

#endif
