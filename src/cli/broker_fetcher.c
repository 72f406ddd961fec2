/*
 * broker_fetcher.c — the follower side's connections to leader brokers
 * (broker_fetcher.h has the state diagram). One request per connection at
 * a time; the answer frame stays in the buffer until the core has applied
 * it (the decoded response points into it).
 *
 * TLS (a leader's listener with --listener-tls-*): after the TCP connect
 * the fetcher waits in F_TLS until the handshake is done, then runs as
 * over plaintext; answers are decrypted into the same buffer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "cli/broker_fetcher.h"
#include "node/peer_auth.h"
#include "net/tls.h"
#include "os/log.h"
#include "sasl/sasl_scram.h"

#define FETCH_MAX_WAIT_MS  500
#define REQUEST_TIMEOUT_MS 30000u
#define RECONNECT_MS       500u
#define ERROR_BACKOFF_MS   200u
#define READ_CHUNK         (64u * 1024u)
#define MAX_ANSWER_BYTES   (64u << 20)
#define ARENA_BLOCK        (64u * 1024u)

enum fetcher_state { F_IDLE, F_CONNECTING, F_TLS, F_READY, F_WAITING, F_HELD, F_CLOSING };

struct fetcher {
	struct broker_fetchers *owner;
	struct fetcher *next;
	int32_t leader_id;
	char host[256];
	uint16_t port;
	enum fetcher_state state;
	bool tcp_open;    /* tcp initialised and not yet closed */
	bool dropped;     /* no longer wanted: free once closed */
	bool backing_off; /* the timer holds the next step */
	int handles;      /* open handles (timer, tcp) */
	uv_tcp_t tcp;
	uv_connect_t connect;
	uv_getaddrinfo_t resolve; /* a host name is resolved off the loop */
	uv_timer_t timer;
	uint8_t *buf;
	size_t len, cap;
	size_t frame_bytes; /* the held answer's frame, prefix included */
	int32_t correlation_id;
	struct keel_arena req_arena, resp_arena;
	struct kafka_request req;
	union kafka_response_body resp;
	bool logged_error;
	int sasl_round;                /* SaslAuthenticate answers seen on this connection */
	struct sasl_scram_client scram; /* with SASL: this connection's exchange */
	struct net_tls *tls; /* NULL: plaintext */
};

struct broker_fetchers {
	uv_loop_t *loop;
	struct broker_core *core;
	const bool *sync_in_flight;
	struct fetcher *list;
	struct kafka_limits limits;
	struct broker_fetcher_totals totals;
	bool closing;
	/* SASL PLAIN toward leaders whose listener requires it (set_sasl). */
	char sasl_user[64];
	char sasl_password[128];
	bool sasl;
	struct net_tls_ctx *tls;      /* NULL: leaders listen in plaintext */
	uint8_t tls_rbuf[READ_CHUNK]; /* ciphertext, consumed by each read callback */
};

static void fetcher_step(struct fetcher *f);
static void fetcher_connect(struct fetcher *f);

static void reconnect_due(uv_timer_t *t)
{
	fetcher_connect(t->data);
}

struct broker_fetchers *broker_fetchers_new(uv_loop_t *loop, struct broker_core *core,
                                            const bool *sync_in_flight, struct net_tls_ctx *tls)
{
	struct broker_fetchers *fs = calloc(1, sizeof(*fs));
	if (fs == NULL) {
		return NULL;
	}
	fs->loop = loop;
	fs->core = core;
	fs->sync_in_flight = sync_in_flight;
	fs->tls = tls;
	kafka_limits_default(&fs->limits);
	fs->limits.max_frame_size = MAX_ANSWER_BYTES;
	return fs;
}

static void fetcher_free(struct fetcher *f)
{
	keel_arena_close(&f->req_arena);
	keel_arena_close(&f->resp_arena);
	net_tls_free(f->tls);
	free(f->buf);
	free(f);
}

static void unlink_fetcher(struct fetcher *f)
{
	struct fetcher **pp = &f->owner->list;
	while (*pp != NULL && *pp != f) {
		pp = &(*pp)->next;
	}
	if (*pp == f) {
		*pp = f->next;
	}
}

static void handle_closed(uv_handle_t *h)
{
	struct fetcher *f = h->data;
	if (h == (uv_handle_t *)&f->tcp) {
		f->tcp_open = false;
		f->state = F_IDLE;
		net_tls_free(f->tls);
		f->tls = NULL;
	}
	if (--f->handles > 0) {
		if (!f->dropped && !f->tcp_open && !f->owner->closing) {
			/* A broken connection: try again after a pause. */
			f->backing_off = true;
			uv_timer_start(&f->timer, reconnect_due, RECONNECT_MS, 0);
		}
		return;
	}
	fetcher_free(f);
}

/* Ends the connection (if any); reconnects later unless dropped. */
static void fetcher_disconnect(struct fetcher *f, const char *why)
{
	if (why != NULL && !f->logged_error) {
		KEEL_INFO("replica fetcher for broker %d (%s:%u): %s; reconnecting", f->leader_id,
		          f->host, f->port, why);
		f->logged_error = true;
	}
	uv_timer_stop(&f->timer);
	f->backing_off = false;
	f->len = 0;
	f->frame_bytes = 0;
	if (f->tcp_open && f->state != F_CLOSING) {
		f->state = F_CLOSING;
		uv_close((uv_handle_t *)&f->tcp, handle_closed);
	} else if (!f->tcp_open && !f->dropped && !f->owner->closing) {
		f->state = F_IDLE;
		f->backing_off = true;
		uv_timer_start(&f->timer, reconnect_due, RECONNECT_MS, 0);
	}
}

static void fetcher_drop(struct fetcher *f)
{
	f->dropped = true;
	unlink_fetcher(f);
	uv_timer_stop(&f->timer);
	if (f->tcp_open && f->state != F_CLOSING) {
		f->state = F_CLOSING;
		uv_close((uv_handle_t *)&f->tcp, handle_closed);
	}
	uv_close((uv_handle_t *)&f->timer, handle_closed);
}

static void backoff_done(uv_timer_t *t)
{
	struct fetcher *f = t->data;
	f->backing_off = false;
	fetcher_step(f);
}

static void request_timed_out(uv_timer_t *t)
{
	struct fetcher *f = t->data;
	if (f->state == F_WAITING) {
		fetcher_disconnect(f, "no answer in time");
	}
}

/* ---- answers ---- */

static void apply_answer(struct fetcher *f)
{
	struct broker_fetchers *fs = f->owner;
	struct broker_replica_report rep;
	KEEL_ASSERT(f->state == F_HELD);
	KEEL_ASSERT(!*fs->sync_in_flight);
	broker_core_set_time(fs->core, (int64_t)uv_now(fs->loop));
	if (f->req.header.api_key == KAFKA_API_FETCH) {
		broker_replica_fetch_answer(fs->core, f->leader_id, &f->req.body.fetch,
		                            &f->resp.fetch, &rep);
	} else {
		broker_replica_epoch_answer(fs->core, f->leader_id,
		                            &f->req.body.offset_for_leader_epoch,
		                            &f->resp.offset_for_leader_epoch, &rep);
		if (rep.truncated_partitions > 0) {
			KEEL_INFO("truncated %u partition log(s) to the leader's (broker %d) by "
			          "leader epoch",
			          rep.truncated_partitions, f->leader_id);
		}
	}
	/* Drop the frame: the decoded answer is not used again. */
	memmove(f->buf, f->buf + f->frame_bytes, f->len - f->frame_bytes);
	f->len -= f->frame_bytes;
	f->frame_bytes = 0;
	f->state = F_READY;
	if (rep.errors > 0) {
		KEEL_DEBUG("replica fetcher for broker %d: %u partition error(s), last: %s",
		           f->leader_id, rep.errors, rep.why);
		f->backing_off = true;
		uv_timer_start(&f->timer, backoff_done, ERROR_BACKOFF_MS, 0);
	} else {
		f->logged_error = false;
	}
}

/* ---- SASL (broker_fetchers_set_sasl) ----
 *
 *   connected --SaslHandshake(SCRAM-SHA-256)--> WAITING --ok-->
 *   SaslAuthenticate(client-first) --> WAITING --server-first-->
 *   SaslAuthenticate(client-final) --> WAITING --server-final verified-->
 *   READY; any error closes the connection (back off, connect again). */

static void send_request_body(struct fetcher *f);

#define FETCHER_SASL_MECH SASL_MECH_SCRAM_SHA_256

/* Sends SaslHandshake (msg NULL) or SaslAuthenticate with msg. */
static void send_sasl(struct fetcher *f, const uint8_t *msg, size_t size)
{
	f->req.header.api_key = msg == NULL ? KAFKA_API_SASL_HANDSHAKE : KAFKA_API_SASL_AUTHENTICATE;
	f->req.header.api_version = 1;
	if (msg == NULL) {
		f->req.body.sasl_handshake.mechanism = kafka_str(sasl_mech_name(FETCHER_SASL_MECH));
	} else {
		f->req.body.sasl_authenticate.auth_bytes = (struct kafka_bytes){msg, (int32_t)size};
	}
	send_request_body(f);
}

static void sasl_start(struct fetcher *f)
{
	keel_arena_reset(&f->req_arena);
	memset(&f->req, 0, sizeof(f->req));
	f->sasl_round = 0;
	send_sasl(f, NULL, 0);
}

/* The next SCRAM message for the answer in f->resp, into the request
 * arena (the answer's bytes still sit in f->buf). NULL when done (the
 * server's signature checked) or failed (*why set). */
static uint8_t *sasl_next(struct fetcher *f, size_t *size, const char **why)
{
	struct broker_fetchers *fs = f->owner;
	const struct kafka_bytes *in = &f->resp.sasl_authenticate.auth_bytes;
	const uint8_t *in_data = in->len > 0 ? in->ptr : (const uint8_t *)"";
	size_t in_size = in->len > 0 ? (size_t)in->len : 0;
	keel_arena_reset(&f->req_arena);
	memset(&f->req, 0, sizeof(f->req));
	uint8_t *out = keel_arena_alloc(&f->req_arena, SASL_SCRAM_MSG_MAX);
	if (out == NULL) {
		*why = "out of memory";
		return NULL;
	}
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, out, SASL_SCRAM_MSG_MAX);
	enum keel_err rc = KEEL_OK;
	uint8_t random[SASL_SCRAM_NONCE_BYTES];
	switch (f->sasl_round++) {
	case 0: /* the handshake was accepted */
		rc = peer_auth_random(random, sizeof(random));
		if (rc == KEEL_OK) {
			rc = sasl_scram_client_first(&f->scram, FETCHER_SASL_MECH, fs->sasl_user, random,
			                             &w);
		}
		break;
	case 1: /* server-first */
		rc = sasl_scram_client_final(&f->scram, fs->sasl_password, strlen(fs->sasl_password),
		                             in_data, in_size, &w);
		break;
	default: /* server-final */
		*why = sasl_scram_client_verify(&f->scram, in_data, in_size) == KEEL_OK
		               ? NULL
		               : f->scram.why;
		return NULL;
	}
	if (rc != KEEL_OK || !keel_wbuf_ok(&w)) {
		*why = f->scram.why != NULL ? f->scram.why : "cannot make a SCRAM message";
		return NULL;
	}
	*size = w.size;
	return out;
}

/* A SASL answer: the next step, or READY. False when it is not READY (a
 * request is out, or the connection is closing). */
static bool sasl_answer(struct fetcher *f)
{
	int16_t err = f->req.header.api_key == KAFKA_API_SASL_HANDSHAKE
	                      ? f->resp.sasl_handshake.error_code
	                      : f->resp.sasl_authenticate.error_code;
	const char *why = NULL;
	size_t size = 0;
	uint8_t *next = err == 0 ? sasl_next(f, &size, &why) : NULL;
	memmove(f->buf, f->buf + f->frame_bytes, f->len - f->frame_bytes);
	f->len -= f->frame_bytes;
	f->frame_bytes = 0;
	if (err != 0 || why != NULL) {
		char line[192];
		snprintf(line, sizeof(line), "SASL %s with the leader failed: %s (error %d)",
		         sasl_mech_name(FETCHER_SASL_MECH), why != NULL ? why : "refused", err);
		fetcher_disconnect(f, line);
		return false;
	}
	if (next != NULL) {
		send_sasl(f, next, size);
		return false;
	}
	f->state = F_READY;
	return true;
}

/* A whole answer is at the head of the buffer: decode it. */
static void got_frame(struct fetcher *f)
{
	struct broker_fetchers *fs = f->owner;
	keel_arena_reset(&f->resp_arena);
	int32_t corr = -1;
	const char *why = NULL;
	enum keel_err err = kafka_decode_response(
	        f->buf + 4, f->frame_bytes - 4, f->req.header.api_key, f->req.header.api_version,
	        &f->resp_arena, &fs->limits, &corr, &f->resp, &why);
	if (err != KEEL_OK || corr != f->correlation_id) {
		char line[160];
		snprintf(line, sizeof(line), "an answer that does not decode (%s%s%s)",
		         keel_errname(err), why != NULL ? ": " : "", why != NULL ? why : "");
		fetcher_disconnect(f, err != KEEL_OK ? line : "an answer to another request");
		return;
	}
	uv_timer_stop(&f->timer);
	if (f->req.header.api_key == KAFKA_API_SASL_HANDSHAKE ||
	    f->req.header.api_key == KAFKA_API_SASL_AUTHENTICATE) {
		if (sasl_answer(f)) {
			fetcher_step(f);
		}
		return;
	}
	f->state = F_HELD;
	if (!*fs->sync_in_flight) {
		apply_answer(f);
		fetcher_step(f);
	}
}

/* Grows the buffer when little room is left. */
static void grow_buf(struct fetcher *f)
{
	if (f->cap - f->len < READ_CHUNK / 4) {
		size_t cap = f->cap * 2;
		uint8_t *n = realloc(f->buf, cap);
		if (n != NULL) {
			f->buf = n;
			f->cap = cap;
		}
	}
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *out)
{
	(void)suggested;
	struct fetcher *f = h->data;
	if (f->tls != NULL) {
		*out = uv_buf_init((char *)f->owner->tls_rbuf, sizeof(f->owner->tls_rbuf));
		return;
	}
	grow_buf(f);
	*out = uv_buf_init((char *)f->buf + f->len, (unsigned)(f->cap - f->len));
}

static void got_bytes(struct fetcher *f, size_t nread);
static bool write_owned(struct fetcher *f, uint8_t *data, size_t n);

/* Queues the ciphertext the TLS session has for the leader. */
static bool tls_flush(struct fetcher *f)
{
	size_t n = net_tls_pending_out(f->tls);
	if (n == 0) {
		return true;
	}
	uint8_t *data = malloc(n);
	if (data == NULL) {
		fetcher_disconnect(f, "out of memory");
		return false;
	}
	return write_owned(f, data, net_tls_take_out(f->tls, data, n));
}

/* Ciphertext from the leader: finish the handshake, then hand on what
 * decrypts, as a plaintext read would. */
static void tls_read(struct fetcher *f, size_t nread)
{
	if (net_tls_feed(f->tls, f->owner->tls_rbuf, nread) != KEEL_OK) {
		fetcher_disconnect(f, "out of memory");
		return;
	}
	for (;;) {
		grow_buf(f);
		size_t got = 0;
		enum keel_err err = net_tls_read(f->tls, f->buf + f->len, f->cap - f->len, &got);
		if (err == KEEL_SHUTDOWN) {
			fetcher_disconnect(f, "the leader closed the connection");
			return;
		}
		if (err != KEEL_OK) {
			char why[256];
			snprintf(why, sizeof(why), "%s", net_tls_error(f->tls));
			tls_flush(f);
			fetcher_disconnect(f, why);
			return;
		}
		if (!tls_flush(f)) {
			return;
		}
		if (f->state == F_TLS && net_tls_state(f->tls) == NET_TLS_OPEN) {
			f->state = F_READY;
			if (f->owner->sasl) {
				sasl_start(f);
			} else {
				fetcher_step(f);
			}
			if (f->tls == NULL || f->state == F_CLOSING) {
				return;
			}
		}
		if (got == 0) {
			return;
		}
		got_bytes(f, got);
		if (f->tls == NULL || f->state != F_WAITING) {
			return; /* answered, or closed: the rest waits for the next read */
		}
	}
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *b)
{
	(void)b;
	struct fetcher *f = stream->data;
	if (nread < 0) {
		fetcher_disconnect(f, nread == UV_EOF ? "the leader closed the connection"
		                                      : uv_strerror((int)nread));
		return;
	}
	if (f->tls != NULL) {
		tls_read(f, (size_t)nread);
		return;
	}
	got_bytes(f, (size_t)nread);
}

/* `nread` plaintext bytes were added to the buffer. */
static void got_bytes(struct fetcher *f, size_t nread)
{
	f->len += nread;
	if (f->state != F_WAITING || f->len < 4) {
		if (f->state != F_WAITING && nread > 0) {
			fetcher_disconnect(f, "bytes nobody asked for");
		}
		return;
	}
	uint32_t size = 0;
	if (kafka_frame_size(f->buf, f->len, &f->owner->limits, &size) != KEEL_OK) {
		fetcher_disconnect(f, "a bad answer frame");
		return;
	}
	size_t need = (size_t)size + 4;
	if (f->len < need) {
		if (f->cap < need) {
			uint8_t *n = realloc(f->buf, need);
			if (n == NULL) {
				fetcher_disconnect(f, "out of memory");
				return;
			}
			f->buf = n;
			f->cap = need;
		}
		return;
	}
	f->frame_bytes = need;
	got_frame(f);
}

/* ---- requests ---- */

static void write_done(uv_write_t *wr, int status)
{
	struct fetcher *f = wr->handle->data;
	free(wr->data);
	free(wr);
	if (status < 0 && status != UV_ECANCELED) {
		fetcher_disconnect(f, uv_strerror(status));
	}
}

/* Queues `data` (malloc'd; owned from here on); false when the
 * connection was ended instead. */
static bool write_owned(struct fetcher *f, uint8_t *data, size_t n)
{
	uv_write_t *wr = malloc(sizeof(*wr));
	if (wr == NULL) {
		free(data);
		fetcher_disconnect(f, "out of memory");
		return false;
	}
	wr->data = data;
	uv_buf_t b = uv_buf_init((char *)data, (unsigned)n);
	if (uv_write(wr, (uv_stream_t *)&f->tcp, &b, 1, write_done) != 0) {
		free(data);
		free(wr);
		fetcher_disconnect(f, "cannot write");
		return false;
	}
	return true;
}

static void send_request(struct fetcher *f)
{
	struct broker_fetchers *fs = f->owner;
	keel_arena_reset(&f->req_arena);
	broker_core_set_time(fs->core, (int64_t)uv_now(fs->loop));
	if (!broker_replica_request(fs->core, f->leader_id, FETCH_MAX_WAIT_MS, &f->req_arena,
	                            &f->req)) {
		/* Nothing to ask: the next image or kick may change that, or the
		 * throttle's wait ends. */
		int64_t wait = broker_replica_throttle_wait_ms(fs->core, f->leader_id);
		if (wait > 0) {
			f->backing_off = true;
			uv_timer_start(&f->timer, backoff_done, (uint64_t)wait, 0);
		}
		return;
	}
	send_request_body(f);
}

/* Encodes and sends f->req; WAITING for its answer. */
static void send_request_body(struct fetcher *f)
{
	struct broker_fetchers *fs = f->owner;
	char client_id[32];
	snprintf(client_id, sizeof(client_id), "keel-replica-%d", fs->core->config.node_id);
	f->req.header.correlation_id = ++f->correlation_id;
	f->req.header.client_id = kafka_str(client_id);
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 4096, 16u << 20);
	enum keel_err err = kafka_encode_request(&w, &f->req.header, &f->req.body);
	size_t n = 0;
	uint8_t *data = err == KEEL_OK ? keel_wbuf_release(&w, &n) : NULL;
	if (data == NULL) {
		keel_wbuf_free(&w);
		fetcher_disconnect(f, "cannot encode a request");
		return;
	}
	if (f->tls != NULL) {
		enum keel_err werr = net_tls_write(f->tls, data, n);
		free(data);
		if (werr != KEEL_OK) {
			fetcher_disconnect(f, "TLS write failed");
			return;
		}
		if (!tls_flush(f)) {
			return;
		}
	} else if (!write_owned(f, data, n)) {
		return;
	}
	if (f->req.header.api_key == KAFKA_API_FETCH) {
		fs->totals.fetches++;
	} else if (f->req.header.api_key == KAFKA_API_OFFSET_FOR_LEADER_EPOCH) {
		fs->totals.epoch_requests++;
	}
	f->state = F_WAITING;
	uv_timer_start(&f->timer, request_timed_out, REQUEST_TIMEOUT_MS, 0);
}

/* Whatever is due now for this fetcher. */
static void fetcher_step(struct fetcher *f)
{
	struct broker_fetchers *fs = f->owner;
	if (f->dropped || fs->closing || *fs->sync_in_flight) {
		return;
	}
	if (f->state == F_HELD) {
		apply_answer(f);
	}
	if (f->state == F_READY && !f->backing_off && !broker_core_dirty(fs->core)) {
		send_request(f);
	}
}

static void on_connect(uv_connect_t *req, int status)
{
	struct fetcher *f = req->data;
	if (f->state != F_CONNECTING) {
		return; /* closed meanwhile */
	}
	if (status < 0) {
		fetcher_disconnect(f, uv_strerror(status));
		return;
	}
	f->owner->totals.connects++;
	uv_tcp_nodelay(&f->tcp, 1);
	f->state = F_READY;
	if (f->owner->tls != NULL) {
		f->state = F_TLS; /* requests wait for the handshake */
		if ((f->tls = net_tls_new(f->owner->tls)) == NULL) {
			fetcher_disconnect(f, "out of memory");
			return;
		}
	}
	if (uv_read_start((uv_stream_t *)&f->tcp, on_alloc, on_read) != 0) {
		fetcher_disconnect(f, "cannot read");
		return;
	}
	if (f->tls != NULL) {
		tls_flush(f); /* the ClientHello; SASL, if any, follows the handshake */
		return;
	}
	if (f->owner->sasl) {
		sasl_start(f);
		return;
	}
	fetcher_step(f);
}

static void connect_to(struct fetcher *f, const struct sockaddr *addr);

/* The resolver's answer: connect, or free a fetcher dropped meanwhile. */
static void resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
	struct fetcher *f = req->data;
	f->handles--;
	if (f->dropped || f->owner->closing) {
		uv_freeaddrinfo(res);
		if (f->handles == 0) {
			fetcher_free(f);
		}
		return;
	}
	if (status != 0 || res == NULL) {
		uv_freeaddrinfo(res);
		fetcher_disconnect(f, status != 0 ? uv_strerror(status) : "no address");
		return;
	}
	connect_to(f, res->ai_addr);
	uv_freeaddrinfo(res);
}

static void fetcher_connect(struct fetcher *f)
{
	f->backing_off = false;
	if (f->dropped || f->owner->closing || f->tcp_open) {
		return;
	}
	struct sockaddr_storage addr;
	if (uv_ip4_addr(f->host, f->port, (struct sockaddr_in *)&addr) == 0 ||
	    uv_ip6_addr(f->host, f->port, (struct sockaddr_in6 *)&addr) == 0) {
		connect_to(f, (const struct sockaddr *)&addr);
		return;
	}
	char port[8];
	snprintf(port, sizeof(port), "%u", f->port);
	struct addrinfo hints;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	f->resolve.data = f;
	if (uv_getaddrinfo(f->owner->loop, &f->resolve, resolved, f->host, port, &hints) != 0) {
		fetcher_disconnect(f, "cannot resolve the leader's host");
		return;
	}
	f->handles++; /* the resolver holds the fetcher until it calls back */
}

static void connect_to(struct fetcher *f, const struct sockaddr *addr)
{
	uv_tcp_init(f->owner->loop, &f->tcp);
	f->tcp.data = f;
	f->tcp_open = true;
	f->handles++;
	f->state = F_CONNECTING;
	f->connect.data = f;
	f->len = 0;
	f->frame_bytes = 0;
	if (uv_tcp_connect(&f->connect, &f->tcp, addr, on_connect) != 0) {
		fetcher_disconnect(f, "cannot connect");
	}
}

/* ---- the set of leaders ---- */

static struct fetcher *find(struct broker_fetchers *fs, int32_t leader_id)
{
	for (struct fetcher *f = fs->list; f != NULL; f = f->next) {
		if (f->leader_id == leader_id) {
			return f;
		}
	}
	return NULL;
}

static void add_fetcher(struct broker_fetchers *fs, int32_t leader_id, const char *host,
                        uint16_t port)
{
	struct fetcher *f = calloc(1, sizeof(*f));
	if (f == NULL || (f->buf = malloc(READ_CHUNK)) == NULL) {
		free(f);
		return;
	}
	f->cap = READ_CHUNK;
	f->owner = fs;
	f->leader_id = leader_id;
	snprintf(f->host, sizeof(f->host), "%s", host);
	f->port = port;
	keel_arena_init(&f->req_arena, ARENA_BLOCK);
	keel_arena_init(&f->resp_arena, ARENA_BLOCK);
	uv_timer_init(fs->loop, &f->timer);
	f->timer.data = f;
	f->handles = 1;
	f->next = fs->list;
	fs->list = f;
	KEEL_INFO("replica fetcher: following broker %d at %s:%u", leader_id, host, port);
	fetcher_connect(f);
}

void broker_fetchers_update(struct broker_fetchers *fs)
{
	if (fs->closing) {
		return;
	}
	int32_t leaders[256];
	uint32_t n = broker_replica_leaders(fs->core, leaders, 256);
	for (struct fetcher *f = fs->list, *next; f != NULL; f = next) {
		next = f->next;
		const char *host = NULL;
		uint16_t port = 0;
		bool wanted = meta_list_contains(leaders, n, f->leader_id) &&
		              broker_replica_endpoint(fs->core, f->leader_id, &host, &port) &&
		              strcmp(host, f->host) == 0 && port == f->port;
		if (!wanted) {
			KEEL_INFO("replica fetcher: no longer following broker %d", f->leader_id);
			fetcher_drop(f);
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		const char *host = NULL;
		uint16_t port = 0;
		if (find(fs, leaders[i]) == NULL &&
		    broker_replica_endpoint(fs->core, leaders[i], &host, &port)) {
			add_fetcher(fs, leaders[i], host, port);
		}
	}
}

void broker_fetchers_kick(struct broker_fetchers *fs)
{
	for (struct fetcher *f = fs->list, *next; f != NULL; f = next) {
		next = f->next;
		fetcher_step(f);
	}
}

void broker_fetchers_close(struct broker_fetchers *fs)
{
	fs->closing = true;
	while (fs->list != NULL) {
		fetcher_drop(fs->list);
	}
}

void broker_fetchers_free(struct broker_fetchers *fs)
{
	KEEL_ASSERT(fs->list == NULL);
	free(fs);
}

void broker_fetchers_set_sasl(struct broker_fetchers *fs, const char *user, const char *password)
{
	KEEL_ASSERT(strlen(user) < sizeof(fs->sasl_user));
	KEEL_ASSERT(strlen(password) < sizeof(fs->sasl_password));
	snprintf(fs->sasl_user, sizeof(fs->sasl_user), "%s", user);
	snprintf(fs->sasl_password, sizeof(fs->sasl_password), "%s", password);
	fs->sasl = true;
}

void broker_fetchers_totals(const struct broker_fetchers *fs, struct broker_fetcher_totals *out)
{
	*out = fs->totals;
}
