/*
 * conn.c — framed, batched TCP connections (see net.h for the contract).
 *
 * Read side: libuv reads into the connection's reassembly buffer; complete
 * frames are handed to on_frame in order; the unparsed remainder moves to the
 * front. The buffer grows by doubling as bytes arrive, never to the length a
 * header merely announces (a client sending 1 MiB - 1 holds what it sent,
 * not the 1 MiB it promised), is bounded by max_frame_bytes and by the
 * shared read budget, and shrinks back when idle.
 *
 * Fairness: a dispatch hands on at most max_frames_per_turn frames and
 * stops early once its replies reach max_output_per_turn bytes. A
 * connection with frames left is "deferred": reading stops, it joins
 * nl->deferred, and the check handle dispatches its next turn in the next
 * loop iteration, after every other connection's input of this one — so a
 * client pipelining expensive requests delays the others by about one
 * request, not by its whole pipeline.
 *
 *   reading --turn used up--> deferred (not reading) --check: next turn-->
 *      ^                                                     |
 *      +------------- buffer holds no complete frame --------+
 *
 * Write side: frames are appended to out[active]; a uv_check handle runs once
 * per loop iteration and starts one uv_write per dirty connection with all
 * that was appended, then switches `active` so new frames never touch memory
 * libuv is writing.
 *
 * TLS (cfg.tls): libuv reads ciphertext into a buffer shared by the loop
 * (a read callback consumes it at once), which goes into the session; the
 * plaintext it yields fills the reassembly buffer exactly as a plaintext
 * read would, so framing, budgets and fairness are the same code. Decrypting
 * stops while a connection is paused or deferred, leaving the rest inside
 * the session until its next turn. On the write side, out[active] holds
 * plaintext; each frame is encrypted into the session as it is completed
 * (one TLS record per frame; frames appended before the handshake ends go
 * at once when it does), and a flush writes the ciphertext from
 * out[!active]:
 *
 *   frame -> out[active] --frame_end / flush: encrypt (once OPEN)--> session
 *         --take ciphertext--> out[!active] --uv_write--> socket
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/crc32c.h"
#include "net/limits.h"
#include "net/net.h"
#include "net/tls.h"
#include "os/log.h"

#define READ_CHUNK 16384u
#define IDLE_BUFFER_KEEP 65536u
#define TLS_READ_CHUNK 65536u
#define TLS_LOG_PER_SEC 20u

static void conn_try_flush(struct net_conn *conn);
static void conn_finish_close(struct net_conn *conn);
static void conn_dispatch(struct net_conn *conn);
static enum keel_err start_reading(struct net_conn *conn);
static void conn_deliver(struct net_conn *conn);
static bool tls_encrypt_plain(struct net_conn *conn);

static size_t header_size(const struct net_conn *conn)
{
	return conn->cfg.checksummed ? 8u : 4u;
}

static void on_idle(uv_idle_t *idle)
{
	(void)idle;
}

/* Output appended outside the poll phase (a timer, a completion) must not
 * wait for the next network event: an active idle handle makes the coming
 * poll non-blocking, so the check handle runs at once. */
static void mark_dirty(struct net_conn *conn)
{
	if (conn->nl->dirty == NULL) {
		uv_idle_start(&conn->nl->flush_idle, on_idle);
	}
	if (!conn->dirty) {
		conn->dirty = true;
		conn->next_dirty = conn->nl->dirty;
		conn->nl->dirty = conn;
	}
}

static void unlink_dirty(struct net_conn *conn)
{
	if (!conn->dirty) {
		return;
	}
	struct net_conn **pp = &conn->nl->dirty;
	while (*pp != NULL && *pp != conn) {
		pp = &(*pp)->next_dirty;
	}
	if (*pp == conn) {
		*pp = conn->next_dirty;
	}
	conn->dirty = false;
	conn->next_dirty = NULL;
}

static void unlink_deferred(struct net_conn *conn)
{
	if (!conn->deferred) {
		return;
	}
	struct net_conn **pp = &conn->nl->deferred;
	while (*pp != NULL && *pp != conn) {
		pp = &(*pp)->next_deferred;
	}
	if (*pp == conn) {
		*pp = conn->next_deferred;
	}
	conn->deferred = false;
	conn->next_deferred = NULL;
}

/* Its turn is used up: stop reading until the buffered frames are served
 * (in the check phase of this loop iteration or the next). */
static void enqueue_deferred(struct net_conn *conn)
{
	KEEL_ASSERT(!conn->deferred);
	if (conn->reading) {
		uv_read_stop((uv_stream_t *)&conn->tcp);
		conn->reading = false;
	}
	if (conn->nl->dirty == NULL && conn->nl->deferred == NULL) {
		uv_idle_start(&conn->nl->flush_idle, on_idle); /* the next poll must not block */
	}
	conn->deferred = true;
	conn->next_deferred = conn->nl->deferred;
	conn->nl->deferred = conn;
}

static void defer(struct net_conn *conn)
{
	conn->nl->deferrals++;
	enqueue_deferred(conn);
}

/* The next turn of every deferred connection (those deferred again go
 * to the list for the iteration after). */
static void run_deferred(struct net_loop *nl)
{
	struct net_conn *conn = nl->deferred;
	nl->deferred = NULL;
	while (conn != NULL) {
		struct net_conn *next = conn->next_deferred;
		conn->next_deferred = NULL;
		conn->deferred = false;
		if (!conn->closing && !conn->paused && !conn->in_dispatch) {
			conn_deliver(conn);
			if (!conn->closing && start_reading(conn) != KEEL_OK) {
				net_conn_close(conn, KEEL_IO, false);
			}
		}
		conn = next;
	}
}

static void flush_dirty(struct net_loop *nl)
{
	while (nl->dirty != NULL) {
		struct net_conn *conn = nl->dirty;
		nl->dirty = conn->next_dirty;
		conn->dirty = false;
		conn->next_dirty = NULL;
		conn_try_flush(conn);
	}
}

/* Replies of this iteration leave first; then the deferred connections
 * take their next turn, and their replies leave too. */
static void on_flush_check(uv_check_t *check)
{
	struct net_loop *nl = check->data;
	flush_dirty(nl);
	if (nl->deferred != NULL) {
		run_deferred(nl);
		flush_dirty(nl);
	}
	if (nl->deferred == NULL) {
		uv_idle_stop(&nl->flush_idle);
	}
}

enum keel_err net_loop_init(struct net_loop *nl, uv_loop_t *loop)
{
	memset(nl, 0, sizeof(*nl));
	nl->loop = loop;
	if (uv_check_init(loop, &nl->flush_check) != 0) {
		return KEEL_IO;
	}
	nl->flush_check.data = nl;
	if (uv_idle_init(loop, &nl->flush_idle) != 0) {
		return KEEL_IO;
	}
	if (uv_check_start(&nl->flush_check, on_flush_check) != 0) {
		return KEEL_IO;
	}
	return KEEL_OK;
}

void net_loop_close(struct net_loop *nl)
{
	uv_check_stop(&nl->flush_check);
	uv_close((uv_handle_t *)&nl->flush_check, NULL);
	uv_idle_stop(&nl->flush_idle);
	uv_close((uv_handle_t *)&nl->flush_idle, NULL);
	free(nl->tls_rbuf);
	nl->tls_rbuf = NULL;
}

static void conn_setup(struct net_conn *conn, struct net_loop *nl,
		       const struct net_conn_config *cfg, const struct net_conn_ops *ops,
		       void *user)
{
	KEEL_ASSERT(cfg->max_frame_bytes > 0);
	KEEL_ASSERT(cfg->max_output_bytes > 0);
	memset(conn, 0, sizeof(*conn));
	conn->nl = nl;
	conn->ops = ops;
	conn->user = user;
	conn->cfg = *cfg;
	size_t out_max = cfg->max_output_bytes + cfg->max_frame_bytes + 16;
	keel_wbuf_init_dynamic(&conn->out[0], 0, out_max);
	keel_wbuf_init_dynamic(&conn->out[1], 0, out_max);
	conn->tcp.data = conn;
	conn->close_reason = KEEL_OK;
	conn->peer_addr[0] = '\0';
}

/* Grows the reassembly buffer when little room is left, within the frame
 * limit and the read budget (a refusal sets over_budget). */
static void grow_rbuf(struct net_conn *conn)
{
	size_t limit = conn->cfg.max_frame_bytes + header_size(conn);
	if (conn->rcap - conn->rlen < READ_CHUNK / 4 && conn->rcap < limit) {
		size_t cap = conn->rcap == 0 ? READ_CHUNK : conn->rcap * 2;
		if (cap > limit) {
			cap = limit;
		}
		struct net_byte_budget *budget = conn->cfg.read_budget;
		if (budget != NULL && !net_byte_budget_take(budget, cap - conn->rcap)) {
			/* No room: with a full buffer, libuv reports UV_ENOBUFS. */
			conn->over_budget = true;
		} else {
			uint8_t *p = realloc(conn->rbuf, cap);
			if (p != NULL) {
				conn->rbuf = p;
				conn->rcap = cap;
			} else if (budget != NULL) {
				net_byte_budget_give(budget, cap - conn->rcap);
			}
		}
	}
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
	(void)suggested;
	struct net_conn *conn = handle->data;
	if (conn->tls != NULL) {
		/* Ciphertext: on_read hands it to the session before any other
		 * connection reads, so one buffer serves them all. */
		if (conn->nl->tls_rbuf == NULL) {
			conn->nl->tls_rbuf = malloc(TLS_READ_CHUNK);
		}
		*buf = uv_buf_init((char *)conn->nl->tls_rbuf,
				   conn->nl->tls_rbuf != NULL ? TLS_READ_CHUNK : 0);
		return;
	}
	grow_rbuf(conn);
	if (conn->rbuf == NULL) {
		*buf = uv_buf_init(NULL, 0); /* nothing allocated: libuv reports UV_ENOBUFS */
		return;
	}
	buf->base = (char *)conn->rbuf + conn->rlen;
	buf->len = conn->rcap - conn->rlen;
}

static void release_rbuf(struct net_conn *conn)
{
	if (conn->cfg.read_budget != NULL) {
		net_byte_budget_give(conn->cfg.read_budget, conn->rcap);
	}
	free(conn->rbuf);
	conn->rbuf = NULL;
	conn->rcap = 0;
}

static bool turn_used_up(const struct net_conn *conn, uint32_t frames, size_t out_start)
{
	if (conn->cfg.max_frames_per_turn != 0 && frames >= conn->cfg.max_frames_per_turn) {
		return true;
	}
	size_t out = net_conn_pending_output(conn);
	return conn->cfg.max_output_per_turn != 0 && out > out_start &&
	       out - out_start >= conn->cfg.max_output_per_turn;
}

/* Parses and delivers the complete frames in the buffer. */
static void conn_dispatch(struct net_conn *conn)
{
	size_t hdr = header_size(conn);
	size_t pos = 0;
	uint32_t frames = 0;
	size_t out_start = net_conn_pending_output(conn);
	conn->in_dispatch = true;
	while (!conn->closing && !conn->paused && !conn->deferred && conn->rlen - pos >= 4) {
		if (turn_used_up(conn, frames, out_start)) {
			defer(conn);
			break;
		}
		const uint8_t *p = conn->rbuf + pos;
		uint32_t len = keel_load_be32(p);
		if (!conn->first_bytes_checked) {
			conn->first_bytes_checked = true;
			if ((len == 0 || len > conn->cfg.max_frame_bytes) &&
			    conn->ops->on_bad_prefix != NULL && conn->ops->on_bad_prefix(conn, p)) {
				pos = conn->rlen;
				break;
			}
		}
		if (len > conn->cfg.max_frame_bytes) {
			net_conn_close(conn, KEEL_TOOBIG, false);
			break;
		}
		if (conn->rlen - pos < hdr + len) {
			break; /* on_alloc grows the buffer as the rest arrives */
		}
		const uint8_t *payload = p + hdr;
		if (conn->cfg.checksummed && keel_crc32c(0, payload, len) != keel_load_be32(p + 4)) {
			net_conn_close(conn, KEEL_CORRUPT, false);
			break;
		}
		pos += hdr + len;
		conn->nl->frames_in++;
		frames++;
		if (!conn->ops->on_frame(conn, payload, len)) {
			break;
		}
	}
	conn->in_dispatch = false;
	if (conn->closing) {
		conn->rlen = 0;
		return;
	}
	if (pos > 0) {
		memmove(conn->rbuf, conn->rbuf + pos, conn->rlen - pos);
		conn->rlen -= pos;
		conn->partial_since_ms = 0; /* a frame completed: the clock restarts */
	}
	if (conn->rlen > 0 && conn->partial_since_ms == 0) {
		conn->partial_since_ms = KEEL_MAX(uv_now(conn->nl->loop), 1u);
	} else if (conn->rlen == 0) {
		conn->partial_since_ms = 0;
	}
	if (conn->rlen == 0 && conn->rcap > IDLE_BUFFER_KEEP) {
		release_rbuf(conn);
	}
}

bool net_conn_frame_overdue(const struct net_conn *conn, uint64_t now_ms, uint64_t timeout_ms)
{
	return conn->partial_since_ms != 0 && !conn->paused && !conn->deferred && !conn->closing &&
	       now_ms >= conn->partial_since_ms + timeout_ms;
}

/* A TLS session failed: one log line (at most TLS_LOG_PER_SEC a second,
 * so a flood of bad connections cannot flood the log), then close, sending
 * whatever alert the session queued for the far end. */
static void tls_failed(struct net_conn *conn, enum keel_err reason)
{
	struct net_loop *nl = conn->nl;
	nl->tls_failures++;
	uint64_t now = uv_now(nl->loop);
	if (now >= nl->tls_log_window_ms + 1000u) {
		nl->tls_log_window_ms = now;
		nl->tls_logged = 0;
	}
	if (nl->tls_logged < TLS_LOG_PER_SEC) {
		nl->tls_logged++;
		const char *why = net_tls_error(conn->tls);
		KEEL_WARN("TLS connection %s %s closed: %s%s", conn->on_connect != NULL ? "to" : "from",
			  conn->peer_addr, why,
			  strstr(why, "wrong version number") != NULL ||
					  strstr(why, "packet length too long") != NULL ||
					  strstr(why, "http request") != NULL
				  ? " (not TLS: a plaintext client on the TLS port?)"
				  : "");
	}
	net_conn_close(conn, reason, true);
}

/* Advances the handshake and decrypts what fits into the reassembly
 * buffer; *got is the plaintext added. False when the connection closed. */
static bool tls_decrypt(struct net_conn *conn, size_t *got)
{
	*got = 0;
	bool was_open = net_tls_state(conn->tls) == NET_TLS_OPEN;
	size_t room = 0;
	if (was_open) {
		grow_rbuf(conn);
		room = conn->rcap - conn->rlen;
		if (room == 0) {
			/* A full buffer holds a complete frame unless the budget
			 * refused to grow it: as UV_ENOBUFS on a plaintext read. */
			if (conn->over_budget) {
				conn->cfg.read_budget->refusals++;
				net_conn_close(conn, KEEL_LIMIT, false);
				return false;
			}
			return true;
		}
	}
	uint8_t *dst = room > 0 ? conn->rbuf + conn->rlen : NULL;
	enum keel_err rc = net_tls_read(conn->tls, dst, room, got);
	if (rc == KEEL_SHUTDOWN) {
		net_conn_close(conn, KEEL_OK, false); /* close_notify: as EOF */
		return false;
	}
	if (rc != KEEL_OK) {
		tls_failed(conn, rc);
		return false;
	}
	conn->rlen += *got;
	bool now_open = net_tls_state(conn->tls) == NET_TLS_OPEN;
	if (net_tls_pending_out(conn->tls) > 0 || (now_open && !was_open)) {
		mark_dirty(conn); /* handshake replies, or frames that waited for it */
	}
	if (now_open && !was_open) {
		*got = room == 0 ? 1 : *got; /* decrypt again: records may follow */
	}
	return true;
}

/* Hands on the complete frames buffered, then (TLS) decrypts more and
 * hands those on, until the session has nothing more or the connection
 * paused, used up its turn or closed. */
static void conn_deliver(struct net_conn *conn)
{
	conn_dispatch(conn);
	if (conn->tls == NULL) {
		return;
	}
	while (!conn->closing && !conn->paused && !conn->deferred) {
		size_t got = 0;
		if (!tls_decrypt(conn, &got) || got == 0) {
			break;
		}
		conn_dispatch(conn);
	}
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
	(void)buf;
	struct net_conn *conn = stream->data;
	if (nread < 0) {
		enum keel_err why = nread == UV_EOF ? KEEL_OK : KEEL_IO;
		if (nread == UV_ENOBUFS && conn->over_budget) {
			why = KEEL_LIMIT;
			conn->cfg.read_budget->refusals++;
		}
		net_conn_close(conn, why, false);
		return;
	}
	if (conn->closing) {
		return;
	}
	conn->over_budget = false;
	conn->nl->bytes_in += (uint64_t)nread;
	if (conn->tls != NULL) {
		if (net_tls_feed(conn->tls, conn->nl->tls_rbuf, (size_t)nread) != KEEL_OK) {
			net_conn_close(conn, KEEL_NOMEM, false);
			return;
		}
	} else {
		conn->rlen += (size_t)nread;
	}
	conn_deliver(conn);
}

static enum keel_err start_reading(struct net_conn *conn)
{
	if (conn->reading || conn->paused || conn->deferred || conn->closing) {
		return KEEL_OK;
	}
	if (uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read) != 0) {
		return KEEL_IO;
	}
	conn->reading = true;
	return KEEL_OK;
}

static void fill_peer_addr(struct net_conn *conn)
{
	struct sockaddr_storage ss;
	int len = (int)sizeof(ss);
	if (uv_tcp_getpeername(&conn->tcp, (struct sockaddr *)&ss, &len) == 0) {
		net_format_addr((struct sockaddr *)&ss, conn->peer_addr, sizeof(conn->peer_addr));
	}
}

enum keel_err net_conn_accept(struct net_conn *conn, struct net_loop *nl, uv_stream_t *server,
			      const struct net_conn_config *cfg, const struct net_conn_ops *ops,
			      void *user)
{
	conn_setup(conn, nl, cfg, ops, user);
	if (uv_tcp_init(nl->loop, &conn->tcp) != 0) {
		return KEEL_IO;
	}
	conn->started = true;
	if (uv_accept(server, (uv_stream_t *)&conn->tcp) != 0) {
		net_conn_close(conn, KEEL_IO, false);
		return KEEL_OK; /* on_close reports it */
	}
	conn->connected = true;
	uv_tcp_nodelay(&conn->tcp, 1);
	fill_peer_addr(conn);
	if (cfg->tls != NULL && (conn->tls = net_tls_new(cfg->tls)) == NULL) {
		net_conn_close(conn, KEEL_NOMEM, false);
		return KEEL_OK;
	}
	if (start_reading(conn) != KEEL_OK) {
		net_conn_close(conn, KEEL_IO, false);
	}
	return KEEL_OK;
}

static void on_connected(uv_connect_t *req, int status)
{
	struct net_conn *conn = req->data;
	if (conn->closing) {
		return;
	}
	if (status != 0) {
		if (conn->on_connect != NULL) {
			conn->on_connect(conn, KEEL_IO);
		}
		net_conn_close(conn, KEEL_IO, false);
		return;
	}
	conn->connected = true;
	uv_tcp_nodelay(&conn->tcp, 1);
	fill_peer_addr(conn);
	if (start_reading(conn) != KEEL_OK) {
		net_conn_close(conn, KEEL_IO, false);
		return;
	}
	if (conn->on_connect != NULL) {
		conn->on_connect(conn, KEEL_OK);
	}
	/* Frames queued before the connection was up go out now. */
	if (!conn->closing && net_conn_pending_output(conn) > 0) {
		mark_dirty(conn);
	}
}

enum keel_err net_conn_connect(struct net_conn *conn, struct net_loop *nl,
			       const struct sockaddr *addr, const struct net_conn_config *cfg,
			       const struct net_conn_ops *ops, void *user,
			       void (*on_connect)(struct net_conn *conn, enum keel_err err))
{
	conn_setup(conn, nl, cfg, ops, user);
	conn->on_connect = on_connect;
	if (uv_tcp_init(nl->loop, &conn->tcp) != 0) {
		return KEEL_IO;
	}
	conn->started = true;
	if (cfg->tls != NULL && (conn->tls = net_tls_new(cfg->tls)) == NULL) {
		net_conn_close(conn, KEEL_NOMEM, false);
		return KEEL_OK;
	}
	conn->connect_req.data = conn;
	if (uv_tcp_connect(&conn->connect_req, &conn->tcp, addr, on_connected) != 0) {
		net_conn_close(conn, KEEL_IO, false);
	}
	return KEEL_OK;
}

size_t net_conn_pending_output(const struct net_conn *conn)
{
	size_t n = conn->out[0].size + conn->out[1].size;
	return conn->tls != NULL ? n + net_tls_pending_out(conn->tls) : n;
}

bool net_conn_tls_subject(const struct net_conn *conn, char *buf, size_t size)
{
	return conn->tls != NULL && net_tls_peer_subject(conn->tls, buf, size);
}

/* Keeps cfg.output_budget equal to the sum of the connections' unsent
 * output. */
static void count_output(struct net_conn *conn)
{
	struct net_byte_budget *b = conn->cfg.output_budget;
	if (b == NULL) {
		return;
	}
	size_t now = net_conn_pending_output(conn);
	if (now >= conn->output_counted) {
		b->used_bytes += now - conn->output_counted;
	} else {
		net_byte_budget_give(b, conn->output_counted - now);
	}
	conn->output_counted = now;
}

static void check_output_limit(struct net_conn *conn)
{
	struct keel_wbuf *w = &conn->out[conn->active];
	if (!keel_wbuf_ok(w) || net_conn_pending_output(conn) > conn->cfg.max_output_bytes) {
		keel_wbuf_reset(w);
		net_conn_close(conn, KEEL_LIMIT, false);
	}
	count_output(conn);
	struct net_byte_budget *b = conn->cfg.output_budget;
	if (!conn->closing && b != NULL && b->max_bytes != 0 && b->used_bytes > b->max_bytes &&
	    conn->output_counted > b->max_bytes / 64) {
		b->refusals++;
		net_conn_close(conn, KEEL_LIMIT, false);
	}
}

struct keel_wbuf *net_conn_frame_begin(struct net_conn *conn, size_t *mark)
{
	if (conn->closing) {
		return NULL;
	}
	struct keel_wbuf *w = &conn->out[conn->active];
	*mark = w->size;
	keel_wbuf_zero(w, header_size(conn));
	return w;
}

void net_conn_frame_end(struct net_conn *conn, size_t mark)
{
	if (conn->closing) {
		return;
	}
	struct keel_wbuf *w = &conn->out[conn->active];
	if (keel_wbuf_ok(w)) {
		size_t hdr = header_size(conn);
		KEEL_ASSERT(w->size >= mark + hdr);
		size_t len = w->size - mark - hdr;
		keel_store_be32(w->data + mark, (uint32_t)len);
		if (conn->cfg.checksummed) {
			keel_store_be32(w->data + mark + 4,
					keel_crc32c(0, w->data + mark + hdr, len));
		}
		conn->nl->frames_out++;
	}
	check_output_limit(conn);
	if (conn->tls != NULL && !conn->closing && !tls_encrypt_plain(conn)) {
		return;
	}
	if (!conn->closing) {
		mark_dirty(conn);
	}
}

void net_conn_send(struct net_conn *conn, const void *payload, size_t size)
{
	size_t mark;
	struct keel_wbuf *w = net_conn_frame_begin(conn, &mark);
	if (w == NULL) {
		return;
	}
	keel_wbuf_bytes(w, payload, size);
	net_conn_frame_end(conn, mark);
}

void net_conn_send_raw(struct net_conn *conn, const void *data, size_t size)
{
	if (conn->closing) {
		return;
	}
	keel_wbuf_bytes(&conn->out[conn->active], data, size);
	check_output_limit(conn);
	if (!conn->closing) {
		mark_dirty(conn);
	}
}

static void on_written(uv_write_t *req, int status)
{
	struct net_conn *conn = req->data;
	struct keel_wbuf *done = &conn->out[!conn->active];
	conn->nl->bytes_out += done->size;
	keel_wbuf_reset(done);
	if (done->capacity > IDLE_BUFFER_KEEP) {
		keel_wbuf_free(done);
	}
	count_output(conn);
	conn->writing = false;
	if (status != 0) {
		if (!conn->closing) {
			net_conn_close(conn, KEEL_IO, false);
		} else {
			conn_finish_close(conn);
		}
		return;
	}
	conn_try_flush(conn);
}

static void start_write(struct net_conn *conn, struct keel_wbuf *w)
{
	uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)w->size);
	conn->write_req.data = conn;
	conn->writing = true;
	conn->nl->writes++;
	if (uv_write(&conn->write_req, (uv_stream_t *)&conn->tcp, &b, 1, on_written) != 0) {
		conn->writing = false;
		keel_wbuf_reset(w);
		count_output(conn);
		if (!conn->closing) {
			net_conn_close(conn, KEEL_IO, false);
		} else {
			conn_finish_close(conn);
		}
	}
}

/* TLS flush: encrypt the plaintext frames (once the handshake is done; a
 * closing connection adds close_notify after them), then write what the
 * session has for the network from out[!active]; `active` never moves. */
/* Encrypts the plaintext in out[active] once the session is OPEN. Called
 * after every frame, so that each frame is its own TLS record (or a few,
 * past 16 KiB): a client that reads a frame at a time and then waits on the
 * socket (kazoo does) never leaves a decrypted frame behind in its TLS
 * buffer, as with ZooKeeper's Netty server. False when that closed the
 * connection. */
static bool tls_encrypt_plain(struct net_conn *conn)
{
	struct keel_wbuf *plain = &conn->out[conn->active];
	if (net_tls_state(conn->tls) != NET_TLS_OPEN || plain->size == 0) {
		return true;
	}
	enum keel_err rc = net_tls_write(conn->tls, plain->data, plain->size);
	keel_wbuf_reset(plain);
	count_output(conn);
	if (rc == KEEL_OK) {
		return true;
	}
	if (!conn->closing) {
		net_conn_close(conn, KEEL_NOMEM, false);
	} else {
		conn_finish_close(conn);
	}
	return false;
}

static void tls_try_flush(struct net_conn *conn)
{
	struct keel_wbuf *cipher = &conn->out[!conn->active];
	bool open = net_tls_state(conn->tls) == NET_TLS_OPEN;
	if (!tls_encrypt_plain(conn)) {
		return;
	}
	if (open && conn->closing && !conn->tls_shutdown_sent) {
		conn->tls_shutdown_sent = true;
		net_tls_shutdown(conn->tls);
	}
	KEEL_ASSERT(cipher->size == 0);
	size_t pending = net_tls_pending_out(conn->tls);
	size_t room = cipher->max_size;
	uint8_t *p = pending > 0 ? keel_wbuf_reserve(cipher, KEEL_MIN(pending, room)) : NULL;
	if (p == NULL) {
		count_output(conn);
		if (conn->closing && (pending == 0 || !keel_wbuf_ok(cipher))) {
			keel_wbuf_reset(cipher);
			conn_finish_close(conn); /* all sent, or nothing more can be */
		}
		return;
	}
	size_t n = net_tls_take_out(conn->tls, p, KEEL_MIN(pending, room));
	cipher->size -= KEEL_MIN(pending, room) - n;
	count_output(conn);
	if (cipher->size == 0) {
		return;
	}
	start_write(conn, cipher);
}

static void conn_try_flush(struct net_conn *conn)
{
	if (conn->writing) {
		return; /* on_written will come back here */
	}
	if (conn->tls != NULL && conn->started && conn->connected &&
	    !uv_is_closing((uv_handle_t *)&conn->tcp)) {
		tls_try_flush(conn);
		return;
	}
	struct keel_wbuf *w = &conn->out[conn->active];
	if (w->size == 0) {
		if (conn->closing) {
			conn_finish_close(conn);
		}
		return;
	}
	if (!conn->started || uv_is_closing((uv_handle_t *)&conn->tcp)) {
		return;
	}
	if (!conn->connected) {
		if (conn->closing) {
			conn_finish_close(conn);
		}
		return; /* still connecting: on_connected re-marks */
	}
	conn->active = !conn->active;
	start_write(conn, w);
}

static void on_closed(uv_handle_t *handle)
{
	struct net_conn *conn = handle->data;
	unlink_dirty(conn);
	unlink_deferred(conn);
	release_rbuf(conn);
	conn->rlen = 0;
	keel_wbuf_free(&conn->out[0]);
	keel_wbuf_free(&conn->out[1]);
	net_tls_free(conn->tls);
	conn->tls = NULL;
	count_output(conn);
	KEEL_ASSERT(conn->output_counted == 0);
	conn->ops->on_close(conn, conn->close_reason);
}

static void conn_finish_close(struct net_conn *conn)
{
	uv_handle_t *h = (uv_handle_t *)&conn->tcp;
	if (!uv_is_closing(h)) {
		if (conn->reading) {
			uv_read_stop((uv_stream_t *)&conn->tcp);
			conn->reading = false;
		}
		uv_close(h, on_closed);
	}
}

void net_conn_close(struct net_conn *conn, enum keel_err reason, bool flush)
{
	if (conn->closing) {
		return;
	}
	conn->closing = true;
	conn->close_reason = reason;
	if (conn->reading) {
		uv_read_stop((uv_stream_t *)&conn->tcp);
		conn->reading = false;
	}
	bool tls_goodbye = conn->tls != NULL && net_tls_state(conn->tls) == NET_TLS_OPEN;
	if (flush && conn->connected && (net_conn_pending_output(conn) > 0 || tls_goodbye)) {
		/* Flush first; conn_try_flush closes once the output is gone. */
		if (!conn->writing) {
			mark_dirty(conn);
		}
		return;
	}
	conn_finish_close(conn);
}

void net_conn_resume_soon(struct net_conn *conn)
{
	if (!conn->paused || conn->closing) {
		return;
	}
	conn->paused = false;
	if (!conn->deferred) {
		enqueue_deferred(conn);
	}
}

void net_conn_pause(struct net_conn *conn)
{
	if (conn->paused || conn->closing) {
		return;
	}
	conn->paused = true;
	if (conn->reading) {
		uv_read_stop((uv_stream_t *)&conn->tcp);
		conn->reading = false;
	}
}

void net_conn_resume(struct net_conn *conn)
{
	if (!conn->paused || conn->closing) {
		return;
	}
	conn->paused = false;
	if (!conn->in_dispatch) {
		conn_deliver(conn);
	}
	if (!conn->closing && !conn->paused && start_reading(conn) != KEEL_OK) {
		net_conn_close(conn, KEEL_IO, false);
	}
}
