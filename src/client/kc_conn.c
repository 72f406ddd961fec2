/*
 * kc_conn.c — the client's connection: life cycle, dialing, handshake,
 * framing, the wait loop, reconnects and kc_poll() (see kc.h).
 *
 * The wait loop (next_frame) is the only place that blocks. While it waits
 * on a connected socket it also keeps the session alive: a ping leaves when
 * nothing was sent for timeout/3, and a server silent for 2/3 of the
 * session timeout counts as lost (ZooKeeper's client does the same), so a
 * reconnect to another server still happens within the session timeout.
 *
 * Receive buffer: bytes [rx_start, rx_end) of rx are unprocessed. A frame
 * is taken out whole (its length checked against max_packet first), so a
 * reply handed to a caller stays in place until the next call, which may
 * then compact the buffer. rx grows only to hold the frame in progress,
 * never past max_packet + 4 bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/assert.h"
#include "client/kc_internal.h"
#include "os/clock.h"

#define RX_INITIAL_SIZE (64u * 1024u)
#define MIN_CONNECT_TIMEOUT_MS 1000
#define FIRST_BACKOFF_MS 50
#define MAX_BACKOFF_MS 1000
#define CLOSE_TIMEOUT_MS 2000

/* What handle_frame() found. */
enum frame_kind {
	FRAME_BAD = -1,  /* the connection was dropped (or the session ended) */
	FRAME_QUIET = 0, /* ping / setWatches reply: nothing for anyone */
	FRAME_EVENT = 1, /* a notification was dispatched */
	FRAME_REPLY = 2, /* a reply for a caller (in *out) */
};

static uint64_t now_ms(void)
{
	return keel_clock_mono_ms();
}

static void sleep_ms(uint64_t ms)
{
	if (ms > 0) {
		(void)poll(NULL, 0, (int)KEEL_MIN(ms, (uint64_t)INT32_MAX));
	}
}

int32_t kc_fail(struct kc_client *c, int32_t err, const char *fmt, ...)
{
	char text[sizeof(c->message)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	memcpy(c->message, text, sizeof(text));
	return err;
}

/* ---- server list ---- */

/* Splits "host:port" / "[v6]:port" into host and port; false if malformed. */
static bool split_host_port(const char *addr, char *host, size_t host_size, char *port,
			    size_t port_size)
{
	const char *colon;
	const char *host_start = addr;
	size_t host_len;
	if (addr[0] == '[') {
		const char *end = strchr(addr, ']');
		if (end == NULL || end[1] != ':') {
			return false;
		}
		host_start = addr + 1;
		host_len = (size_t)(end - host_start);
		colon = end + 1;
	} else {
		colon = strrchr(addr, ':');
		if (colon == NULL) {
			return false;
		}
		host_len = (size_t)(colon - addr);
	}
	const char *p = colon + 1;
	size_t port_len = strlen(p);
	if (host_len == 0 || host_len >= host_size || port_len == 0 || port_len >= port_size) {
		return false;
	}
	long value = 0;
	for (size_t i = 0; i < port_len; i++) {
		if (p[i] < '0' || p[i] > '9') {
			return false;
		}
		value = value * 10 + (p[i] - '0');
		if (value > 65535) {
			return false;
		}
	}
	if (value == 0) {
		return false;
	}
	memcpy(host, host_start, host_len);
	host[host_len] = '\0';
	memcpy(port, p, port_len + 1);
	return true;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t') {
		s++;
	}
	size_t n = strlen(s);
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) {
		s[--n] = '\0';
	}
	return s;
}

static enum keel_err parse_servers(struct kc_client *c, const char *text)
{
	c->servers_text = strdup(text);
	if (c->servers_text == NULL) {
		return KEEL_NOMEM;
	}
	char *save = NULL;
	for (char *tok = strtok_r(c->servers_text, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		char *addr = trim(tok);
		char host[256];
		char port[8];
		if (*addr == '\0') {
			continue;
		}
		if (strchr(addr, '/') != NULL) {
			kc_fail(c, 0, "server '%s': a chroot suffix is not supported", addr);
			return KEEL_INVAL;
		}
		if (!split_host_port(addr, host, sizeof(host), port, sizeof(port))) {
			kc_fail(c, 0, "server '%s' is not HOST:PORT", addr);
			return KEEL_INVAL;
		}
		if (c->server_count == KC_MAX_SERVERS) {
			kc_fail(c, 0, "more than %d servers", KC_MAX_SERVERS);
			return KEEL_INVAL;
		}
		c->servers[c->server_count++].addr = addr;
	}
	if (c->server_count == 0) {
		kc_fail(c, 0, "no server given");
		return KEEL_INVAL;
	}
	return KEEL_OK;
}

/* ---- dialing ---- */

static int connect_with_timeout(const struct addrinfo *ai, int timeout_ms, int *error)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			ai->ai_protocol);
	if (fd < 0) {
		*error = errno;
		return -1;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		if (errno != EINPROGRESS) {
			*error = errno;
			close(fd);
			return -1;
		}
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
		int rc;
		do {
			uint64_t now = now_ms();
			int left = now >= deadline ? 0 : (int)(deadline - now);
			rc = poll(&pfd, 1, left);
		} while (rc < 0 && errno == EINTR);
		if (rc <= 0) {
			*error = rc == 0 ? ETIMEDOUT : errno;
			close(fd);
			return -1;
		}
		int soerr = 0;
		socklen_t len = sizeof(soerr);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0 || soerr != 0) {
			*error = soerr != 0 ? soerr : errno;
			close(fd);
			return -1;
		}
	}
	int one = 1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int tcp_dial(const char *addr, int timeout_ms, char *err, size_t err_size)
{
	char host[256];
	char port[8];
	if (!split_host_port(addr, host, sizeof(host), port, sizeof(port))) {
		snprintf(err, err_size, "not HOST:PORT");
		return -1;
	}
	struct addrinfo hints;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	struct addrinfo *list = NULL;
	int grc = getaddrinfo(host, port, &hints, &list);
	if (grc != 0) {
		snprintf(err, err_size, "%s", gai_strerror(grc));
		return -1;
	}
	int error = 0;
	int fd = -1;
	for (struct addrinfo *ai = list; ai != NULL && fd < 0; ai = ai->ai_next) {
		fd = connect_with_timeout(ai, timeout_ms, &error);
	}
	freeaddrinfo(list);
	if (fd < 0) {
		snprintf(err, err_size, "%s", strerror(error));
	}
	return fd;
}

/* ---- timing ---- */

static uint64_t read_timeout_ms(const struct kc_client *c)
{
	return (uint64_t)c->timeout_ms * 2 / 3;
}

static uint64_t ping_interval_ms(const struct kc_client *c)
{
	return (uint64_t)c->timeout_ms / 3;
}

static uint64_t connect_timeout_ms(const struct kc_client *c)
{
	if (c->opt.connect_timeout_ms > 0) {
		return (uint64_t)c->opt.connect_timeout_ms;
	}
	uint64_t t = (uint64_t)c->timeout_ms / c->server_count;
	return KEEL_MAX(t, (uint64_t)MIN_CONNECT_TIMEOUT_MS);
}

/* ---- life cycle ---- */

/* Copies the options, filling in defaults; KEEL_INVAL for bad values. */
static enum keel_err take_options(struct kc_client *c, const struct kc_options *opt)
{
	c->opt = *opt;
	c->opt.servers = NULL; /* parsed into servers_text */
	if (c->opt.session_timeout_ms == 0) {
		c->opt.session_timeout_ms = KC_DEFAULT_SESSION_TIMEOUT_MS;
	}
	if (c->opt.call_timeout_ms == 0) {
		c->opt.call_timeout_ms = c->opt.session_timeout_ms;
	}
	if (c->opt.max_packet == 0) {
		c->opt.max_packet = KC_DEFAULT_MAX_PACKET;
	}
	if (c->opt.max_watches == 0) {
		c->opt.max_watches = KC_DEFAULT_MAX_WATCHES;
	}
	if (c->opt.max_queued_events == 0) {
		c->opt.max_queued_events = KC_DEFAULT_MAX_QUEUED_EVENTS;
	}
	if (opt->servers == NULL) {
		kc_fail(c, 0, "no server given");
		return KEEL_INVAL;
	}
	if (c->opt.session_timeout_ms < 0 || c->opt.call_timeout_ms < 0 ||
	    c->opt.connect_timeout_ms < 0 || c->opt.max_packet < 64 ||
	    c->opt.max_packet > INT32_MAX - 8) {
		kc_fail(c, 0, "invalid timeout or packet size option");
		return KEEL_INVAL;
	}
	return KEEL_OK;
}

enum keel_err kc_init(struct kc_client *c, const struct kc_options *opt)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	if (take_options(c, opt) != KEEL_OK) {
		return KEEL_INVAL;
	}
	enum keel_err rc = parse_servers(c, opt->servers);
	if (rc != KEEL_OK) {
		goto fail_servers;
	}
	uint64_t seed = opt->seed;
	if (seed == 0 && keel_os_random(&seed, sizeof(seed)) != KEEL_OK) {
		seed = keel_clock_mono_ns();
	}
	keel_rng_seed(&c->rng, seed);
	for (uint32_t i = c->server_count; i > 1; i--) {
		uint32_t j = (uint32_t)keel_rng_below(&c->rng, i);
		struct kc_server tmp = c->servers[i - 1];
		c->servers[i - 1] = c->servers[j];
		c->servers[j] = tmp;
	}
	c->rx_capacity = KEEL_MIN((size_t)RX_INITIAL_SIZE, (size_t)c->opt.max_packet + 4);
	c->rx = malloc(c->rx_capacity);
	if (c->rx == NULL) {
		rc = KEEL_NOMEM;
		goto fail_servers;
	}
	keel_wbuf_init_dynamic(&c->tx, 256, (size_t)c->opt.max_packet + 4);
	keel_wbuf_init_dynamic(&c->scratch, 256, c->opt.max_packet);
	keel_wbuf_init_dynamic(&c->event_path, 256, (size_t)c->opt.max_packet + 1);
	c->watch_seed = keel_rng_next(&c->rng);
	rc = kc_watch_init(c);
	if (rc != KEEL_OK) {
		goto fail_buffers;
	}
	c->state = KC_IDLE;
	c->session_id = opt->session_id;
	if (opt->session_id != 0) {
		memcpy(c->passwd, opt->passwd, ZK_PASSWD_SIZE);
	}
	c->timeout_ms = c->opt.session_timeout_ms;
	c->next_xid = 1;
	return KEEL_OK;

fail_buffers:
	keel_wbuf_free(&c->tx);
	keel_wbuf_free(&c->scratch);
	keel_wbuf_free(&c->event_path);
	free(c->rx);
	c->rx = NULL;
fail_servers:
	free(c->servers_text);
	c->servers_text = NULL;
	return rc;
}

static void close_fd(struct kc_client *c)
{
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	c->rx_start = 0;
	c->rx_end = 0;
	c->rx_eof = false;
}

void kc_close(struct kc_client *c)
{
	if (c->state == KC_CONNECTED) {
		c->closing = true;
		c->opt.call_timeout_ms = KEEL_MIN(c->opt.call_timeout_ms, CLOSE_TIMEOUT_MS);
		(void)kc_close_session(c);
	}
	close_fd(c);
	kc_watch_close(c);
	kc_event_close(c);
	keel_wbuf_free(&c->tx);
	keel_wbuf_free(&c->scratch);
	keel_wbuf_free(&c->event_path);
	free(c->rx);
	c->rx = NULL;
	free(c->servers_text);
	c->servers_text = NULL;
}

void kc_conn_begin(struct kc_client *c)
{
	KEEL_ASSERT(!c->in_callback);
	KEEL_ASSERT(c->rx != NULL);
	c->message[0] = '\0';
	kc_event_release(c);
	if (c->rx_start == c->rx_end) {
		c->rx_start = 0;
		c->rx_end = 0;
	}
}

/* Moves the client to a final state: no socket, an event for the caller. */
static void finish(struct kc_client *c, enum kc_state state, int32_t event_state)
{
	KEEL_ASSERT(state == KC_EXPIRED || state == KC_AUTH_FAILED || state == KC_CLOSED);
	close_fd(c);
	c->state = state;
	kc_event_dispatch(c, ZK_EVENT_NONE, event_state, NULL, 0, -1);
}

void kc_conn_lose(struct kc_client *c, const char *why)
{
	bool was_connected = c->state == KC_CONNECTED;
	close_fd(c);
	if (why != NULL) {
		kc_fail(c, 0, "%s", why);
	}
	if (was_connected) {
		c->state = KC_DISCONNECTED;
		c->disconnected_at_ms = now_ms();
		kc_event_dispatch(c, ZK_EVENT_NONE, ZK_STATE_DISCONNECTED, NULL, 0, -1);
	}
}

/* A failure on the socket: during the handshake just close it; on a live
 * session it is a connection loss. The message is kept. */
static int32_t conn_failed(struct kc_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int32_t conn_failed(struct kc_client *c, const char *fmt, ...)
{
	char text[sizeof(c->message)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	kc_conn_lose(c, text);
	return ZK_CONNECTION_LOSS;
}

int32_t kc_conn_bad_reply(struct kc_client *c, const char *what)
{
	conn_failed(c, "%s: malformed %s reply", kc_server(c) ? kc_server(c) : "server", what);
	return ZK_MARSHALLING_ERROR;
}

/* ---- sending ---- */

/* Sends all bytes before `deadline`; *sent (may be NULL) counts what the
 * kernel took, so a caller knows whether a failed request left at all. */
static int32_t send_all(struct kc_client *c, const uint8_t *p, size_t size, uint64_t deadline,
			size_t *sent)
{
	while (size > 0) {
		ssize_t n = send(c->fd, p, size, MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			size -= (size_t)n;
			if (sent != NULL) {
				*sent += (size_t)n;
			}
			continue;
		}
		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			uint64_t now = now_ms();
			if (now >= deadline) {
				return conn_failed(c, "%s: send timed out",
						   c->servers[c->server_index].addr);
			}
			struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};
			(void)poll(&pfd, 1, (int)KEEL_MIN(deadline - now, (uint64_t)INT32_MAX));
			continue;
		}
		return conn_failed(c, "%s: send: %s", c->servers[c->server_index].addr,
				   strerror(n < 0 ? errno : EPIPE));
	}
	c->last_send_ms = now_ms();
	return ZK_OK;
}

int32_t kc_conn_send_payload(struct kc_client *c, const void *payload, size_t size,
			     uint64_t deadline_ms)
{
	KEEL_ASSERT(c->fd >= 0);
	uint8_t prefix[4];
	keel_store_be32(prefix, (uint32_t)size);
	int32_t rc = send_all(c, prefix, sizeof(prefix), deadline_ms, NULL);
	return rc != ZK_OK ? rc : send_all(c, payload, size, deadline_ms, NULL);
}

static int32_t send_ping(struct kc_client *c)
{
	uint8_t frame[12];
	keel_store_be32(frame, 8);
	keel_store_be32(frame + 4, (uint32_t)ZK_XID_PING);
	keel_store_be32(frame + 8, (uint32_t)ZK_OP_PING);
	return send_all(c, frame, sizeof(frame), now_ms() + read_timeout_ms(c), NULL);
}

/* ---- receiving ---- */

/* Takes the next whole frame out of the buffer: 1 found, 0 need more,
 * -1 a length over max_packet or negative (message set). */
static int rx_take(struct kc_client *c, const uint8_t **payload, size_t *size)
{
	uint32_t len = 0;
	size_t avail = c->rx_end - c->rx_start;
	switch (zk_frame_check(c->rx + c->rx_start, avail, c->opt.max_packet, &len)) {
	case ZK_FRAME_NEED_MORE:
		return 0;
	case ZK_FRAME_READY:
		*payload = c->rx + c->rx_start + 4;
		*size = len;
		c->rx_start += 4 + (size_t)len;
		return 1;
	case ZK_FRAME_TOO_BIG:
		kc_fail(c, 0, "server sent a frame of %u bytes (max packet %u)",
			keel_load_be32(c->rx + c->rx_start), c->opt.max_packet);
		return -1;
	case ZK_FRAME_NEGATIVE:
	default:
		kc_fail(c, 0, "server sent a negative frame length");
		return -1;
	}
}

/* Reads what the socket has: 1 progress, 0 end of stream, -1 error. Room
 * is made for the frame in progress, never past max_packet + 4 bytes. Call
 * only when no whole frame is buffered. */
static int rx_fill(struct kc_client *c)
{
	size_t avail = c->rx_end - c->rx_start;
	size_t need = 4;
	if (avail >= 4) {
		/* A bad length is rx_take's to report; room for 4 bytes is
		 * all it needs then. */
		uint32_t len = keel_load_be32(c->rx + c->rx_start);
		need = len <= c->opt.max_packet ? 4 + (size_t)len : 4;
	}
	if (c->rx_capacity - c->rx_start < need || c->rx_end == c->rx_capacity) {
		memmove(c->rx, c->rx + c->rx_start, avail);
		c->rx_start = 0;
		c->rx_end = avail;
	}
	if (c->rx_capacity < need) {
		size_t grown = KEEL_MAX(need, KEEL_MIN(2 * c->rx_capacity,
						       (size_t)c->opt.max_packet + 4));
		uint8_t *rx = realloc(c->rx, grown);
		if (rx == NULL) {
			errno = ENOMEM;
			return -1;
		}
		c->rx = rx;
		c->rx_capacity = grown;
	}
	KEEL_ASSERT(c->rx_end < c->rx_capacity);
	for (;;) {
		ssize_t n = recv(c->fd, c->rx + c->rx_end, c->rx_capacity - c->rx_end, 0);
		if (n > 0) {
			c->rx_end += (size_t)n;
			c->last_recv_ms = now_ms();
			return 1;
		}
		if (n == 0) {
			return 0;
		}
		if (errno == EINTR) {
			continue;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			return 1;
		}
		return -1;
	}
}

/*
 * Waits for the next frame until `deadline` (nowait: only what is
 * buffered). While connected it sends pings when due and drops a silent
 * connection. Returns ZK_OK with the frame, ZK_OPERATION_TIMEOUT (deadline,
 * nothing buffered, or a signal during kc_poll), or ZK_CONNECTION_LOSS (the
 * socket is closed, message set).
 */
static int32_t next_frame(struct kc_client *c, uint64_t deadline, bool nowait,
			  const uint8_t **payload, size_t *size)
{
	const char *addr = c->servers[c->server_index].addr;
	for (;;) {
		int taken = rx_take(c, payload, size);
		if (taken > 0) {
			return ZK_OK;
		}
		if (taken < 0) {
			char why[sizeof(c->message)];
			memcpy(why, c->message, sizeof(why));
			return conn_failed(c, "%s: %s", addr, why);
		}
		if (c->rx_eof) {
			return conn_failed(c, "%s: the server closed the connection", addr);
		}
		if (nowait) {
			return ZK_OPERATION_TIMEOUT;
		}
		uint64_t now = now_ms();
		uint64_t wake = deadline;
		if (c->state == KC_CONNECTED) {
			uint64_t read_due = c->last_recv_ms + read_timeout_ms(c);
			uint64_t ping_due = c->last_send_ms + ping_interval_ms(c);
			if (now >= read_due) {
				return conn_failed(c, "%s: no word from the server in %llu ms", addr,
						   (unsigned long long)(now - c->last_recv_ms));
			}
			if (now >= ping_due) {
				if (send_ping(c) != ZK_OK) {
					return ZK_CONNECTION_LOSS;
				}
				continue;
			}
			wake = KEEL_MIN(wake, KEEL_MIN(read_due, ping_due));
		}
		/* Past the deadline the socket is still looked at once, so
		 * that kc_poll(c, 0) takes in what has arrived. */
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		int wait_ms = wake <= now ? 0 : (int)KEEL_MIN(wake - now, (uint64_t)INT32_MAX);
		int rc = poll(&pfd, 1, wait_ms);
		if (rc < 0) {
			if (errno == EINTR) {
				if (c->in_poll) {
					return ZK_OPERATION_TIMEOUT;
				}
				continue;
			}
			return conn_failed(c, "%s: poll: %s", addr, strerror(errno));
		}
		if (rc == 0) {
			if (now_ms() >= deadline) {
				return ZK_OPERATION_TIMEOUT;
			}
			continue;
		}
		int filled = rx_fill(c);
		if (filled == 0) {
			c->rx_eof = true; /* deliver what came before the end first */
		}
		if (filled < 0) {
			return conn_failed(c, "%s: recv: %s", addr, strerror(errno));
		}
	}
}

/* Handles one frame of a live session. */
static enum frame_kind handle_frame(struct kc_client *c, const uint8_t *p, size_t size,
				    struct kc_reply *out)
{
	struct keel_rbuf r;
	struct zk_reply_header h;
	keel_rbuf_init(&r, p, size);
	if (zk_reply_header_decode(&h, &r) != KEEL_OK) {
		conn_failed(c, "%s: short reply header", c->servers[c->server_index].addr);
		return FRAME_BAD;
	}
	switch (h.xid) {
	case ZK_XID_NOTIFICATION: {
		struct zk_watcher_event ev;
		if (zk_watcher_event_decode(&ev, &r) != KEEL_OK) {
			kc_conn_bad_reply(c, "notification");
			return FRAME_BAD;
		}
		kc_watch_on_event(c, ev.type, (const char *)ev.path.data, zk_bytes_len(ev.path));
		kc_event_dispatch(c, ev.type, ev.state, ev.path.data, zk_bytes_len(ev.path), h.zxid);
		return FRAME_EVENT;
	}
	case ZK_XID_PING:
		return FRAME_QUIET;
	case ZK_XID_SET_WATCHES:
		if (h.err != ZK_OK) {
			kc_fail(c, 0, "setWatches failed: %s", kc_err_message(h.err));
		}
		return FRAME_QUIET;
	default:
		break;
	}
	if (h.xid < 0 && h.xid != ZK_XID_AUTH && c->opt.on_push != NULL) {
		c->in_callback = true;
		c->opt.on_push(c->opt.push_ctx, h.xid, h.zxid, h.err, p + ZK_REPLY_HEADER_SIZE,
			       size - ZK_REPLY_HEADER_SIZE);
		c->in_callback = false;
		return FRAME_EVENT;
	}
	if (h.xid <= 0 && h.xid != ZK_XID_AUTH) {
		conn_failed(c, "%s: reply with unknown xid %d", c->servers[c->server_index].addr,
			    h.xid);
		return FRAME_BAD;
	}
	if (h.xid > 0 && h.zxid > c->last_zxid) {
		c->last_zxid = h.zxid;
	}
	out->xid = h.xid;
	out->zxid = h.zxid;
	out->err = h.err;
	out->body = p + ZK_REPLY_HEADER_SIZE;
	out->body_size = size - ZK_REPLY_HEADER_SIZE;
	return FRAME_REPLY;
}

/* Waits for the reply to `xid`, dispatching events on the way. */
static int32_t wait_reply(struct kc_client *c, int32_t xid, uint64_t deadline,
			  struct kc_reply *out)
{
	for (;;) {
		const uint8_t *p;
		size_t size;
		int32_t rc = next_frame(c, deadline, false, &p, &size);
		if (rc != ZK_OK) {
			return rc;
		}
		enum frame_kind kind = handle_frame(c, p, size, out);
		if (kind == FRAME_BAD) {
			return c->state == KC_AUTH_FAILED ? ZK_AUTH_FAILED : ZK_CONNECTION_LOSS;
		}
		if (kind != FRAME_REPLY) {
			continue;
		}
		if (out->xid == xid) {
			return ZK_OK;
		}
		if (out->xid == ZK_XID_AUTH) {
			/* An auth reply nobody waits for (cannot happen with
			 * synchronous calls, but a rejection ends the session). */
			if (out->err != ZK_OK) {
				finish(c, KC_AUTH_FAILED, ZK_STATE_AUTH_FAILED);
				return kc_fail(c, ZK_AUTH_FAILED, "authentication failed");
			}
			continue;
		}
		return conn_failed(c, "%s: reply for xid %d while waiting for xid %d",
				   c->servers[c->server_index].addr, out->xid, xid);
	}
}

/* ---- handshake and reconnect ---- */

static int32_t state_error(struct kc_client *c)
{
	switch (c->state) {
	case KC_EXPIRED:
		return kc_fail(c, ZK_SESSION_EXPIRED, "session 0x%llx expired",
			       (unsigned long long)c->session_id);
	case KC_AUTH_FAILED:
		return kc_fail(c, ZK_AUTH_FAILED, "authentication failed; the session is over");
	case KC_CLOSED:
		return kc_fail(c, ZK_CONNECTION_LOSS, "the session was closed");
	case KC_IDLE:
	case KC_CONNECTED:
	case KC_DISCONNECTED:
	default:
		return ZK_OK;
	}
}

static int32_t encode_and_send(struct kc_client *c, int32_t xid, int32_t opcode,
			       const struct zk_request *req, const void *body, size_t body_size,
			       uint64_t deadline, size_t *sent)
{
	keel_wbuf_reset(&c->tx);
	size_t start = zk_frame_begin(&c->tx);
	keel_wbuf_i32(&c->tx, xid);
	keel_wbuf_i32(&c->tx, opcode);
	if (req != NULL) {
		zk_request_body_encode(&c->tx, req);
	} else {
		keel_wbuf_bytes(&c->tx, body, body_size);
	}
	zk_frame_end(&c->tx, start);
	if (!keel_wbuf_ok(&c->tx) || c->tx.size - 4 > c->opt.max_packet) {
		return kc_fail(c, ZK_BAD_ARGUMENTS, "request over the max packet size (%u bytes)",
			       c->opt.max_packet);
	}
	return send_all(c, c->tx.data, c->tx.size, deadline, sent);
}

static int32_t resend_auths(struct kc_client *c, uint64_t deadline)
{
	for (uint32_t i = 0; i < c->auth_count; i++) {
		struct zk_request req;
		memset(&req, 0, sizeof(req));
		req.opcode = ZK_OP_AUTH;
		req.u.auth.type = 0;
		req.u.auth.scheme = zk_bytes_str(c->auths[i].scheme);
		req.u.auth.auth = zk_bytes_of(c->auths[i].cred, c->auths[i].cred_size);
		int32_t rc =
			encode_and_send(c, ZK_XID_AUTH, ZK_OP_AUTH, &req, NULL, 0, deadline, NULL);
		struct kc_reply reply;
		if (rc == ZK_OK) {
			rc = wait_reply(c, ZK_XID_AUTH, deadline, &reply);
		}
		if (rc == ZK_OPERATION_TIMEOUT) {
			return conn_failed(c, "%s: no auth reply in time",
					   c->servers[c->server_index].addr);
		}
		if (rc != ZK_OK) {
			return rc;
		}
		if (reply.err != ZK_OK) {
			finish(c, KC_AUTH_FAILED, ZK_STATE_AUTH_FAILED);
			return kc_fail(c, ZK_AUTH_FAILED, "%s authentication rejected on reconnect",
				       c->auths[i].scheme);
		}
	}
	return ZK_OK;
}

/* ConnectRequest out, ConnectResponse in (c->fd is connected). An expired
 * session ends here (KC_EXPIRED). */
static int32_t handshake(struct kc_client *c, uint64_t deadline, int timeout_ms,
			 struct zk_connect_response *rsp)
{
	const char *addr = c->servers[c->server_index].addr;
	struct zk_connect_request req = {
		.protocol_version = 0,
		.last_zxid_seen = c->last_zxid,
		.timeout_ms = c->opt.session_timeout_ms,
		.session_id = c->session_id,
		.passwd = zk_bytes_of(c->passwd, ZK_PASSWD_SIZE),
		.read_only = false,
		.has_read_only = true,
	};
	keel_wbuf_reset(&c->tx);
	size_t start = zk_frame_begin(&c->tx);
	zk_connect_request_encode(&c->tx, &req);
	zk_frame_end(&c->tx, start);
	KEEL_ASSERT(keel_wbuf_ok(&c->tx));
	int32_t rc = send_all(c, c->tx.data, c->tx.size, deadline, NULL);
	if (rc != ZK_OK) {
		return rc;
	}
	const uint8_t *p;
	size_t size;
	rc = next_frame(c, deadline, false, &p, &size);
	if (rc == ZK_OPERATION_TIMEOUT) {
		return conn_failed(c, "%s: no handshake reply in %d ms", addr, timeout_ms);
	}
	if (rc != ZK_OK) {
		return rc;
	}
	if (zk_connect_response_decode(rsp, p, size) != KEEL_OK) {
		return conn_failed(c, "%s: malformed ConnectResponse", addr);
	}
	if (rsp->timeout_ms <= 0) {
		finish(c, KC_EXPIRED, ZK_STATE_EXPIRED);
		return kc_fail(c, ZK_SESSION_EXPIRED, "session 0x%llx expired",
			       (unsigned long long)c->session_id);
	}
	if (zk_bytes_len(rsp->passwd) != ZK_PASSWD_SIZE || rsp->session_id == 0) {
		return conn_failed(c, "%s: malformed ConnectResponse", addr);
	}
	return ZK_OK;
}

/* One attempt at one server: TCP, the handshake, then credentials and
 * watches of a resumed session. */
static int32_t connect_one(struct kc_client *c, uint32_t index, uint64_t deadline)
{
	const char *addr = c->servers[index].addr;
	c->server_index = index;
	uint64_t now = now_ms();
	if (now >= deadline) {
		return kc_fail(c, ZK_CONNECTION_LOSS, "%s: no time left to connect", addr);
	}
	char err[160] = "";
	int timeout = (int)KEEL_MIN(deadline - now, (uint64_t)INT32_MAX);
	int fd = c->opt.dial != NULL ? c->opt.dial(c->opt.dial_ctx, addr, timeout, err, sizeof(err))
				     : tcp_dial(addr, timeout, err, sizeof(err));
	if (fd < 0) {
		return kc_fail(c, ZK_CONNECTION_LOSS, "%s: %s", addr,
			       err[0] != '\0' ? err : "cannot connect");
	}
	int flags = fcntl(fd, F_GETFL);
	(void)fcntl(fd, F_SETFL, (flags < 0 ? 0 : flags) | O_NONBLOCK);
	KEEL_ASSERT(c->fd < 0);
	c->fd = fd;
	c->rx_start = 0;
	c->rx_end = 0;
	c->last_send_ms = now;
	c->last_recv_ms = now;

	struct zk_connect_response rsp;
	int32_t rc = handshake(c, deadline, timeout, &rsp);
	if (rc != ZK_OK) {
		return rc;
	}
	c->session_id = rsp.session_id;
	memcpy(c->passwd, rsp.passwd.data, ZK_PASSWD_SIZE);
	c->timeout_ms = rsp.timeout_ms;
	c->state = KC_CONNECTED;
	c->connects++;
	c->disconnected_at_ms = 0;
	c->last_recv_ms = now_ms();
	kc_event_dispatch(c, ZK_EVENT_NONE, ZK_STATE_SYNC_CONNECTED, NULL, 0, -1);
	rc = resend_auths(c, deadline);
	if (rc != ZK_OK) {
		return rc;
	}
	return kc_watch_restore(c, deadline);
}

/*
 * Connects when not connected: servers in order from server_next, each
 * given connect_timeout_ms (but not past `deadline`), with a growing pause
 * after every full round. poll_mode: at most one round, and the first
 * attempt gets its full connect timeout even past the deadline.
 */
static int32_t ensure_connected(struct kc_client *c, uint64_t deadline, bool poll_mode)
{
	int32_t rc = state_error(c);
	if (rc != ZK_OK || c->state == KC_CONNECTED) {
		return rc;
	}
	if (c->closing) {
		return kc_fail(c, ZK_CONNECTION_LOSS, "closing: not reconnecting");
	}
	uint32_t tried = 0;
	uint64_t backoff = FIRST_BACKOFF_MS;
	for (;;) {
		uint64_t now = now_ms();
		uint64_t attempt_deadline = now + connect_timeout_ms(c);
		if (!poll_mode || tried > 0) {
			attempt_deadline = KEEL_MIN(attempt_deadline, deadline);
		}
		if (attempt_deadline <= now) {
			break;
		}
		uint32_t index = c->server_next;
		c->server_next = (index + 1) % c->server_count;
		rc = connect_one(c, index, attempt_deadline);
		if (rc == ZK_OK || c->state == KC_EXPIRED || c->state == KC_AUTH_FAILED) {
			return rc;
		}
		tried++;
		if (tried % c->server_count == 0) {
			now = now_ms();
			sleep_ms(now >= deadline ? 0 : KEEL_MIN(backoff, deadline - now));
			backoff = KEEL_MIN(backoff * 2, (uint64_t)MAX_BACKOFF_MS);
			if (poll_mode) {
				break;
			}
		}
	}
	char last[sizeof(c->message)];
	memcpy(last, c->message, sizeof(last));
	if (tried == 0) {
		return kc_fail(c, ZK_CONNECTION_LOSS, "not connected and no time left");
	}
	return kc_fail(c, ZK_CONNECTION_LOSS, "no server reachable (last: %s)", last);
}

int32_t kc_connect(struct kc_client *c)
{
	kc_conn_begin(c);
	return ensure_connected(c, now_ms() + (uint64_t)c->opt.call_timeout_ms, false);
}

static int32_t take_xid(struct kc_client *c)
{
	int32_t xid = c->next_xid;
	c->next_xid = xid == INT32_MAX ? 1 : xid + 1;
	return xid;
}

/*
 * Before a request goes out: takes in what the server already sent, so
 * that a connection the server closed (a killed server) is noticed now and
 * the request goes to another server instead of failing with
 * ConnectionLoss. Events buffered before the end are delivered first.
 */
static void probe(struct kc_client *c)
{
	const char *addr = c->servers[c->server_index].addr;
	while (c->state == KC_CONNECTED) {
		size_t avail = c->rx_end - c->rx_start;
		if (avail >= 8) {
			/* Only notifications and ping/setWatches replies are
			 * taken here; anything else is left to wait_reply(),
			 * which reports it. */
			int32_t xid = (int32_t)keel_load_be32(c->rx + c->rx_start + 4);
			const uint8_t *p;
			size_t size;
			struct kc_reply reply;
			bool pushed = xid < 0 && xid != ZK_XID_AUTH && c->opt.on_push != NULL;
			if (xid != ZK_XID_NOTIFICATION && xid != ZK_XID_PING &&
			    xid != ZK_XID_SET_WATCHES && !pushed) {
				return;
			}
			int taken = rx_take(c, &p, &size);
			if (taken <= 0) {
				c->message[0] = '\0';
				return; /* incomplete or bad: wait_reply() sees it */
			}
			(void)handle_frame(c, p, size, &reply);
			continue;
		}
		if (avail == 0 && c->rx_eof) {
			conn_failed(c, "%s: the server closed the connection", addr);
			return;
		}
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		if (poll(&pfd, 1, 0) != 1) {
			return;
		}
		int filled = rx_fill(c);
		if (filled == 0) {
			c->rx_eof = true;
			if (avail > 0) {
				return;
			}
		} else if (filled < 0) {
			conn_failed(c, "%s: recv: %s", addr, strerror(errno));
			return;
		}
	}
}

static int32_t call(struct kc_client *c, int32_t xid, int32_t opcode,
		    const struct zk_request *req, const void *body, size_t body_size,
		    struct kc_reply *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t deadline = now_ms() + (uint64_t)c->opt.call_timeout_ms;
	int32_t rc = ZK_OK;
	for (int attempt = 0; attempt < 2; attempt++) {
		rc = ensure_connected(c, deadline, false);
		if (rc == ZK_OK) {
			probe(c);
			rc = ensure_connected(c, deadline, false);
		}
		if (rc != ZK_OK) {
			return rc;
		}
		if (xid == 0) {
			xid = take_xid(c);
		}
		/* A request the kernel never took cannot have happened: one
		 * retry on a new connection is safe, even for a write. */
		size_t sent = 0;
		rc = encode_and_send(c, xid, opcode, req, body, body_size, deadline, &sent);
		if (rc == ZK_OK || sent > 0 || c->state != KC_DISCONNECTED) {
			break;
		}
	}
	if (rc != ZK_OK) {
		return rc;
	}
	rc = wait_reply(c, xid, deadline, out);
	if (rc == ZK_OPERATION_TIMEOUT) {
		/* A late reply must not answer a later call: start afresh. */
		conn_failed(c, "%s: no reply within %d ms", c->servers[c->server_index].addr,
			    c->opt.call_timeout_ms);
		return ZK_OPERATION_TIMEOUT;
	}
	if (rc != ZK_OK) {
		memset(out, 0, sizeof(*out));
	}
	return rc;
}

int32_t kc_conn_call(struct kc_client *c, int32_t xid, int32_t opcode, const void *body,
		     size_t body_size, struct kc_reply *out)
{
	return call(c, xid, opcode, NULL, body, body_size, out);
}

int32_t kc_conn_request(struct kc_client *c, int32_t xid, const struct zk_request *req,
			struct kc_reply *out)
{
	return call(c, xid, req->opcode, req, NULL, 0, out);
}

int32_t kc_conn_auth_failed(struct kc_client *c, const char *scheme)
{
	finish(c, KC_AUTH_FAILED, ZK_STATE_AUTH_FAILED);
	return kc_fail(c, ZK_AUTH_FAILED, "%s authentication failed; the session is over", scheme);
}

int32_t kc_close_session(struct kc_client *c)
{
	kc_conn_begin(c);
	if (c->state == KC_CLOSED) {
		return ZK_OK;
	}
	if (c->state == KC_IDLE && c->session_id == 0) {
		c->state = KC_CLOSED;
		return ZK_OK;
	}
	int32_t rc = state_error(c);
	if (rc != ZK_OK) {
		return rc;
	}
	struct kc_reply reply;
	rc = call(c, 0, ZK_OP_CLOSE_SESSION, NULL, NULL, 0, &reply);
	if (c->state != KC_EXPIRED && c->state != KC_AUTH_FAILED) {
		finish(c, KC_CLOSED, ZK_STATE_CLOSED);
	}
	return rc != ZK_OK ? rc : reply.err;
}

/* ---- idling ---- */

int32_t kc_poll(struct kc_client *c, int timeout_ms)
{
	kc_conn_begin(c);
	uint64_t deadline = now_ms() + (uint64_t)KEEL_MAX(timeout_ms, 0);
	int32_t rc = ensure_connected(c, deadline, true);
	if (rc != ZK_OK) {
		return rc;
	}
	bool dispatched = false;
	c->in_poll = true;
	for (;;) {
		const uint8_t *p;
		size_t size;
		rc = next_frame(c, deadline, dispatched, &p, &size);
		if (rc != ZK_OK) {
			break;
		}
		struct kc_reply reply;
		enum frame_kind kind = handle_frame(c, p, size, &reply);
		if (kind == FRAME_BAD) {
			rc = c->state == KC_AUTH_FAILED ? ZK_AUTH_FAILED : ZK_CONNECTION_LOSS;
			break;
		}
		if (kind == FRAME_REPLY) {
			rc = conn_failed(c, "%s: reply for xid %d with no request out",
					 c->servers[c->server_index].addr, reply.xid);
			break;
		}
		dispatched = dispatched || kind == FRAME_EVENT;
	}
	c->in_poll = false;
	return rc == ZK_OPERATION_TIMEOUT ? ZK_OK : rc;
}

int kc_fd(const struct kc_client *c)
{
	return c->state == KC_CONNECTED ? c->fd : -1;
}

int kc_poll_timeout_ms(const struct kc_client *c)
{
	switch (c->state) {
	case KC_CONNECTED: {
		uint64_t now = now_ms();
		uint64_t due = KEEL_MIN(c->last_recv_ms + read_timeout_ms(c),
					c->last_send_ms + ping_interval_ms(c));
		if (c->rx_end > c->rx_start) {
			return 0; /* frames already buffered */
		}
		return due <= now ? 0 : (int)KEEL_MIN(due - now, (uint64_t)INT32_MAX);
	}
	case KC_DISCONNECTED:
		return 0;
	case KC_IDLE:
	case KC_EXPIRED:
	case KC_AUTH_FAILED:
	case KC_CLOSED:
	default:
		return -1;
	}
}

/* ---- facts ---- */

enum kc_state kc_state(const struct kc_client *c)
{
	return c->state;
}

int64_t kc_session_id(const struct kc_client *c)
{
	return c->session_id;
}

const uint8_t *kc_session_passwd(const struct kc_client *c)
{
	return c->passwd;
}

int32_t kc_session_timeout_ms(const struct kc_client *c)
{
	return c->timeout_ms;
}

int64_t kc_last_zxid(const struct kc_client *c)
{
	return c->last_zxid;
}

const char *kc_server(const struct kc_client *c)
{
	return c->state == KC_CONNECTED ? c->servers[c->server_index].addr : NULL;
}

uint64_t kc_disconnected_ms(const struct kc_client *c)
{
	if (c->state != KC_DISCONNECTED) {
		return 0;
	}
	return now_ms() - c->disconnected_at_ms;
}

const char *kc_message(const struct kc_client *c)
{
	return c->message;
}
