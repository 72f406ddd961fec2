/* http.c — the minimal GET responder (see http.h). */
#include "net/http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/limits.h"
#include "net/net.h"

#define HTTP_MAX_HEAD 8192
#define HTTP_MAX_BODY (64u << 20)

struct http_conn {
	uv_tcp_t tcp;
	uv_write_t wreq;
	struct http_server *srv;
	struct http_conn *prev;
	struct http_conn *next;
	uint64_t accepted_ms;
	uint64_t progress_ms; /* last byte in, or accept */
	char head[HTTP_MAX_HEAD];
	size_t head_len;
	uint8_t *reply;
	bool answered;
};

static void on_conn_closed(uv_handle_t *h)
{
	struct http_conn *c = h->data;
	struct http_server *srv = c->srv;
	srv->open_connections--;
	if (c->prev != NULL) {
		c->prev->next = c->next;
	} else {
		srv->conns = c->next;
	}
	if (c->next != NULL) {
		c->next->prev = c->prev;
	}
	free(c->reply);
	free(c);
}

static void conn_close(struct http_conn *c)
{
	if (!uv_is_closing((uv_handle_t *)&c->tcp)) {
		uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
	}
}

static void on_written(uv_write_t *req, int status)
{
	(void)status;
	conn_close(req->data);
}

static void reply(struct http_conn *c, int status, const char *ctype, const uint8_t *body,
		  size_t body_size)
{
	const char *reason = status == 200 ? "OK" : status == 404 ? "Not Found" : "Bad Request";
	char hdr[256];
	int n = snprintf(hdr, sizeof(hdr),
			 "HTTP/1.0 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n",
			 status, reason, ctype, body_size);
	c->reply = malloc((size_t)n + body_size);
	if (c->reply == NULL) {
		conn_close(c);
		return;
	}
	memcpy(c->reply, hdr, (size_t)n);
	if (body_size > 0) {
		memcpy(c->reply + n, body, body_size);
	}
	uv_buf_t b = uv_buf_init((char *)c->reply, (unsigned)((size_t)n + body_size));
	c->wreq.data = c;
	c->answered = true;
	uv_read_stop((uv_stream_t *)&c->tcp);
	if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) {
		conn_close(c);
	}
}

static void handle_request(struct http_conn *c)
{
	char method[8], path[1024];
	if (sscanf(c->head, "%7s %1023s", method, path) != 2 || strcmp(method, "GET") != 0) {
		const char *msg = "only GET is supported\n";
		reply(c, 400, "text/plain", (const uint8_t *)msg, strlen(msg));
		return;
	}
	struct keel_wbuf body;
	keel_wbuf_init_dynamic(&body, 4096, HTTP_MAX_BODY);
	const char *ctype = "text/plain; charset=utf-8";
	int status = c->srv->handler(c->srv->ctx, path, &body, &ctype);
	if (!keel_wbuf_ok(&body)) {
		status = 500;
		keel_wbuf_reset(&body);
	}
	reply(c, status, ctype, body.data, body.size);
	keel_wbuf_free(&body);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)suggested;
	struct http_conn *c = h->data;
	buf->base = c->head + c->head_len;
	buf->len = HTTP_MAX_HEAD - 1 - c->head_len;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	(void)buf;
	struct http_conn *c = s->data;
	if (nread < 0) {
		conn_close(c);
		return;
	}
	if (c->answered) {
		return;
	}
	/* Only the new bytes (and the 3 before them) can complete the head:
	 * a head sent a byte at a time is not rescanned from the start. */
	size_t from = c->head_len > 3 ? c->head_len - 3 : 0;
	c->head_len += (size_t)nread;
	c->head[c->head_len] = '\0';
	c->progress_ms = uv_now(s->loop);
	if (strstr(c->head + from, "\r\n\r\n") != NULL || strstr(c->head + from, "\n\n") != NULL) {
		handle_request(c);
	} else if (c->head_len >= HTTP_MAX_HEAD - 1) {
		const char *msg = "request head too large\n";
		reply(c, 400, "text/plain", (const uint8_t *)msg, strlen(msg));
	}
}

static void on_connection(uv_stream_t *server, int status)
{
	struct http_server *srv = server->data;
	if (status != 0 || srv->closing) {
		return;
	}
	struct http_conn *c = calloc(1, sizeof(*c));
	if (c == NULL) {
		return;
	}
	c->srv = srv;
	uv_tcp_init(server->loop, &c->tcp);
	c->tcp.data = c;
	c->accepted_ms = c->progress_ms = uv_now(server->loop);
	c->next = srv->conns;
	if (srv->conns != NULL) {
		srv->conns->prev = c;
	}
	srv->conns = c;
	srv->open_connections++;
	if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
		conn_close(c);
		return;
	}
	/* Accept-and-close past the limits: a refusal must still drain the
	 * listen backlog, or the loop would be woken for it again and again. */
	const struct http_limits *l = &srv->limits;
	if ((l->max_connections != 0 && srv->open_connections > l->max_connections) ||
	    (l->fds != NULL && !net_fd_budget_allows(l->fds, &c->tcp))) {
		srv->refused++;
		conn_close(c);
		return;
	}
	if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
		conn_close(c);
	}
}

static bool overdue(const struct http_conn *c, uint64_t now)
{
	const struct http_limits *l = &c->srv->limits;
	if (!c->answered && l->request_timeout_ms != 0 && now >= c->accepted_ms + l->request_timeout_ms) {
		return true;
	}
	return l->idle_timeout_ms != 0 && now >= c->progress_ms + l->idle_timeout_ms;
}

static void on_sweep(uv_timer_t *t)
{
	struct http_server *srv = t->data;
	uint64_t now = uv_now(t->loop);
	for (struct http_conn *c = srv->conns; c != NULL; c = c->next) {
		if (!uv_is_closing((uv_handle_t *)&c->tcp) && overdue(c, now)) {
			srv->timed_out++;
			conn_close(c);
		}
	}
}

void http_server_set_limits(struct http_server *srv, const struct http_limits *limits)
{
	srv->limits = *limits;
	uint64_t shortest = UINT64_MAX;
	if (limits->request_timeout_ms != 0) {
		shortest = limits->request_timeout_ms;
	}
	if (limits->idle_timeout_ms != 0 && limits->idle_timeout_ms < shortest) {
		shortest = limits->idle_timeout_ms;
	}
	if (shortest == UINT64_MAX || srv->closing) {
		if (srv->sweeping) {
			uv_timer_stop(&srv->sweep);
		}
		return;
	}
	uint64_t every = shortest / 4 < 50 ? 50 : shortest / 4;
	srv->sweeping = true;
	uv_timer_start(&srv->sweep, on_sweep, every, every);
}

enum keel_err http_server_start(struct http_server *srv, uv_loop_t *loop, const char *addr,
				http_handler_fn handler, void *ctx, char *err, size_t err_size)
{
	memset(srv, 0, sizeof(*srv));
	srv->handler = handler;
	srv->ctx = ctx;
	uv_timer_init(loop, &srv->sweep);
	srv->sweep.data = srv;
	enum keel_err rc = net_listen(&srv->tcp, loop, addr, on_connection, srv, err, err_size);
	if (rc != KEEL_OK) {
		uv_close((uv_handle_t *)&srv->sweep, NULL);
		srv->closing = true;
	}
	return rc;
}

void http_server_close(struct http_server *srv)
{
	if (!uv_is_closing((uv_handle_t *)&srv->sweep)) {
		uv_timer_stop(&srv->sweep);
		uv_close((uv_handle_t *)&srv->sweep, NULL);
	}
	srv->closing = true;
	if (!uv_is_closing((uv_handle_t *)&srv->tcp)) {
		uv_close((uv_handle_t *)&srv->tcp, NULL);
	}
}
