/*
 * test_client_fake.h — a scripted fake ZooKeeper server for the client's
 * unit tests (header-only, static functions).
 *
 * The client dials through options.dial; the fake answers each dial with a
 * socketpair (or a refusal, by script) and keeps the server end. Tests are
 * single-threaded: they write the server's frames into the socket *before*
 * the client call that reads them (the client's xids are predictable: 1, 2,
 * ...), then read back and decode what the client sent. A per-dial hook
 * pre-writes the handshake of a new connection, so reconnects can be
 * scripted too. Every read on the server end has a 2 s timeout, so a test
 * that expects a frame the client never sent fails instead of hanging.
 */
#ifndef KEEL_TEST_CLIENT_FAKE_H
#define KEEL_TEST_CLIENT_FAKE_H

#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "client/kc.h"
#include "client/kc_internal.h"
#include "zk/zk_proto.h"

#define FAKE_MAX_CONNS 16
#define FAKE_SESSION_ID 0x1234567800000001ll

enum fake_dial_action {
	FAKE_ACCEPT = 0, /* socketpair, then the on_dial hook */
	FAKE_REFUSE = 1, /* dial fails */
};

struct fake;
typedef void (*fake_dial_hook)(struct fake *f, int conn);

struct fake {
	int fds[FAKE_MAX_CONNS];          /* server ends, -1 when closed */
	char dialed[FAKE_MAX_CONNS][64];  /* server address of each dial */
	int dial_count;
	int conn_count;
	enum fake_dial_action script[FAKE_MAX_CONNS]; /* by dial number */
	fake_dial_hook on_dial;
	int32_t session_timeout_ms;       /* what the default hook negotiates */
	/* events seen by the callback */
	int event_count;
	int32_t event_types[64];
	int32_t event_states[64];
	char event_paths[64][64];
};

static inline int fake_dial(void *ctx, const char *server, int timeout_ms, char *err,
			    size_t err_size)
{
	struct fake *f = ctx;
	(void)timeout_ms;
	assert_true(f->dial_count < FAKE_MAX_CONNS);
	int n = f->dial_count++;
	snprintf(f->dialed[n], sizeof(f->dialed[n]), "%s", server);
	if (f->script[n] == FAKE_REFUSE) {
		snprintf(err, err_size, "refused by script");
		return -1;
	}
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	int conn = f->conn_count++;
	f->fds[conn] = sv[0];
	if (f->on_dial != NULL) {
		f->on_dial(f, conn);
	}
	return sv[1];
}

static inline void fake_event_cb(void *ctx, const struct kc_event *ev)
{
	struct fake *f = ctx;
	assert_int_equal(strlen(ev->path), ev->path_size);
	if (f->event_count < 64) {
		f->event_types[f->event_count] = ev->type;
		f->event_states[f->event_count] = ev->state;
		snprintf(f->event_paths[f->event_count], 64, "%s", ev->path);
	}
	f->event_count++;
}

static inline void fake_init(struct fake *f)
{
	memset(f, 0, sizeof(*f));
	for (int i = 0; i < FAKE_MAX_CONNS; i++) {
		f->fds[i] = -1;
	}
	f->session_timeout_ms = 9000;
}

static inline void fake_close(struct fake *f)
{
	for (int i = 0; i < f->conn_count; i++) {
		if (f->fds[i] >= 0) {
			close(f->fds[i]);
			f->fds[i] = -1;
		}
	}
}

/* Client options wired to the fake: callback mode unless queue is set. */
static inline struct kc_options fake_options(struct fake *f, const char *servers, bool queue)
{
	struct kc_options o;
	memset(&o, 0, sizeof(o));
	o.servers = servers;
	o.session_timeout_ms = 10000;
	o.call_timeout_ms = 3000;
	o.seed = 7;
	o.dial = fake_dial;
	o.dial_ctx = f;
	if (!queue) {
		o.on_event = fake_event_cb;
		o.event_ctx = f;
	}
	return o;
}

/* ---- writing what the server says ---- */

static inline void fake_write(int fd, const void *data, size_t size)
{
	const uint8_t *p = data;
	while (size > 0) {
		ssize_t n = write(fd, p, size);
		assert_true(n > 0);
		p += n;
		size -= (size_t)n;
	}
}

static inline void fake_frame(int fd, const void *payload, size_t size)
{
	uint8_t prefix[4];
	keel_store_be32(prefix, (uint32_t)size);
	fake_write(fd, prefix, 4);
	fake_write(fd, payload, size);
}

static inline void fake_connect_response(int fd, int32_t timeout_ms, int64_t session_id)
{
	uint8_t pw[ZK_PASSWD_SIZE];
	memset(pw, 0x5a, sizeof(pw));
	struct zk_connect_response rsp = {0, timeout_ms, session_id, zk_bytes_of(pw, sizeof(pw)),
					  false, true};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 1024);
	zk_connect_response_encode(&w, &rsp);
	fake_frame(fd, w.data, w.size);
	keel_wbuf_free(&w);
}

/* Default hook: every accepted connection gets a ConnectResponse. */
static inline void fake_hook_accept(struct fake *f, int conn)
{
	fake_connect_response(f->fds[conn], f->session_timeout_ms, FAKE_SESSION_ID);
}

/* ReplyHeader + body. */
static inline void fake_reply(int fd, int32_t xid, int64_t zxid, int32_t err, const void *body,
			      size_t size)
{
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 1u << 22);
	zk_reply_header_encode(&w, xid, zxid, err);
	keel_wbuf_bytes(&w, body, size);
	fake_frame(fd, w.data, w.size);
	keel_wbuf_free(&w);
}

static inline void fake_event(int fd, int32_t type, const char *path)
{
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 4096);
	zk_notification_encode(&w, -1, type, ZK_STATE_SYNC_CONNECTED, zk_bytes_str(path));
	fake_write(fd, w.data, w.size); /* already framed */
	keel_wbuf_free(&w);
}

static inline struct zk_stat fake_stat(int32_t version)
{
	struct zk_stat st;
	memset(&st, 0, sizeof(st));
	st.czxid = 3;
	st.mzxid = 4;
	st.version = version;
	st.data_length = 5;
	return st;
}

/* getData reply body: data + Stat. */
static inline void fake_get_reply(int fd, int32_t xid, int64_t zxid, const char *data,
				  int32_t version)
{
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 1u << 20);
	zk_write_bytes(&w, zk_bytes_str(data));
	struct zk_stat st = fake_stat(version);
	zk_write_stat(&w, &st);
	fake_reply(fd, xid, zxid, 0, w.data, w.size);
	keel_wbuf_free(&w);
}

/* ---- reading what the client sent ---- */

/* Reads one frame (2 s timeout); returns its payload size, or -1 on EOF or
 * timeout. */
static inline long fake_read_frame(int fd, uint8_t *buf, size_t capacity)
{
	size_t have = 0;
	size_t need = 4;
	bool got_prefix = false;
	while (have < need) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (poll(&pfd, 1, 2000) != 1) {
			return -1;
		}
		ssize_t n = read(fd, buf + have, need - have);
		if (n <= 0) {
			return -1;
		}
		have += (size_t)n;
		if (!got_prefix && have == 4) {
			got_prefix = true;
			uint32_t len = keel_load_be32(buf);
			assert_true(len <= capacity);
			have = 0;
			need = len;
			if (len == 0) {
				break;
			}
		}
	}
	return (long)need;
}

/* Reads a frame and decodes it as a request (its bytes stay in buf). */
static inline void fake_read_request(int fd, uint8_t *buf, size_t capacity,
				     struct zk_request *req)
{
	long n = fake_read_frame(fd, buf, capacity);
	assert_true(n >= 8);
	assert_int_equal(zk_request_decode(req, buf, (size_t)n), KEEL_OK);
}

static inline void fake_read_connect(int fd, uint8_t *buf, size_t capacity,
				     struct zk_connect_request *req)
{
	long n = fake_read_frame(fd, buf, capacity);
	assert_true(n > 0);
	assert_int_equal(zk_connect_request_decode(req, buf, (size_t)n), KEEL_OK);
}

/* Does the server end have nothing more to read right now? */
static inline bool fake_quiet(int fd)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	return poll(&pfd, 1, 0) == 0;
}

/* Reads and discards everything buffered on the server end. */
static inline void fake_drain(int fd)
{
	uint8_t buf[4096];
	while (!fake_quiet(fd)) {
		if (read(fd, buf, sizeof(buf)) <= 0) {
			return;
		}
	}
}

#endif
