/*
 * broker_server.c — the libuv shell around the broker core: listener,
 * per-connection framing, responses in request order, fdatasync on a
 * worker, long-polling fetches, and the metadata image handed over from the
 * controller thread.
 *
 * One request per connection at a time, as Kafka does: a connection's next
 * frame is not looked at until the current one is answered, so responses
 * leave in request order. The current frame stays at the head of the read
 * buffer (the decoded request points into it) until it is answered.
 *
 *   IDLE --frame--> answered at once, or
 *        --Produce (acks 1/-1) appended--> WAIT_SYNC --sync done--> answered
 *        --Fetch below min_bytes--> WAIT_FETCH --data durable or max_wait--> answered
 *        --touches logs while a sync is in flight--> GATED --sync done--> IDLE
 *           (the frame is handled again from the start)
 *
 * Durability: appends happen on the loop thread; a uv_prepare hook starts
 * one sync (uv_queue_work: plog_sync of every dirty partition) when there
 * are dirty partitions and none is in flight, so all the produces handled
 * in one loop turn share it. While it runs no request touches a log (the
 * core is single-threaded), and no new image is applied.
 *
 * Bad input closes only the offending connection: a frame over the size
 * limit or with a negative size, a request that does not decode, an API or
 * version the broker does not serve (ApiVersions gets its UNSUPPORTED_VERSION
 * answer first), or no whole request within the handshake deadline.
 *
 * Fetch records go out with sendfile(2) from the segment files, between
 * the encoded pieces of the response (conn_respond_fetch; docs/brokers.md).
 *
 * TLS (--listener-tls-*): a connection's ciphertext goes into its TLS
 * session (net/tls.h) and the plaintext it yields fills the read buffer, so
 * framing is unchanged; responses are encrypted as they are queued, and
 * fetched records are read into memory (no sendfile: the kernel cannot
 * encrypt them).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "base/assert.h"
#include "broker/broker.h"
#include "broker/groups.h"
#include "cli/broker_fetcher.h"
#include "cli/broker_hwcheck.h"
#include "cli/broker_metrics.h"
#include "cli/broker_server.h"
#include "net/http.h"
#include "net/tls.h"
#include "os/clock.h"
#include "node/peer_auth.h"
#include "os/log.h"
#include "sasl/sasl_scram.h"

#define READ_CHUNK            (64u * 1024u)
#define MAX_WRITE_QUEUE_BYTES (64u << 20)
#define ARENA_BLOCK           (64u * 1024u)

/* SASL on a listener with --sasl-users-file (docs/security.md), as
 * Kafka's SaslServerAuthenticator:
 *
 *   HANDSHAKE --SaslHandshake v1 (a mechanism we offer)--> AUTHENTICATE
 *   AUTHENTICATE --SaslAuthenticate (each step)--> ... --success--> DONE
 *   before DONE only ApiVersions (in HANDSHAKE) and these two are served;
 *   anything else, or a failed step, closes the connection (a failed step
 *   after its SASL_AUTHENTICATION_FAILED answer is sent).
 * OFFERED: the listener has only the brokers' own user (a cluster secret,
 * no users file): clients go straight to their requests, a broker's
 * replica fetcher authenticates first (OFFERED --SaslHandshake--> as
 * above), and a replica Fetch (replica_id >= 0) on a connection that did
 * not authenticate as BROKER_REPLICA_SASL_USER closes it: a forged follower
 * fetch would move the ISR and the high watermark.
 * OFF: the listener has no SASL (no cluster secret). */
enum conn_sasl {
	CONN_SASL_OFF = 0,
	CONN_SASL_OFFERED,
	CONN_SASL_HANDSHAKE,
	CONN_SASL_AUTHENTICATE,
	CONN_SASL_DONE,
};

enum conn_wait {
	CONN_IDLE,
	CONN_WAIT_SYNC,
	CONN_WAIT_ACKS, /* acks=all: durable here, waiting for the ISR (high watermark) */
	CONN_WAIT_FETCH,
	CONN_WAIT_ADMIN,
	CONN_WAIT_GROUP, /* a JoinGroup/SyncGroup parked in the coordinator */
	CONN_GATED,
};

#define GROUP_TICK_MS 100

/* An admin request on its way to the controller and back. */
struct broker_admin_job {
	struct broker_admin_job *next;
	struct conn *conn; /* NULL: the loop thread's own AlterPartition */
	enum meta_api api;
	struct keel_wbuf body;
	uint8_t *reply; /* NULL: no answer */
	size_t reply_size;
};

struct conn {
	uv_tcp_t tcp;
	uv_timer_t timer; /* handshake deadline, then fetch waits */
	struct broker_server *srv;
	uint64_t id; /* the coordinator's waiter token */
	struct conn *prev, *next;
	char peer[64];
	uint8_t *buf;
	size_t len, cap;
	size_t frame_bytes; /* the current frame, prefix included (0: none) */
	bool got_request;
	bool reading;
	bool closing;
	int handles_open;
	enum conn_wait wait;
	uint64_t wait_sync_seq; /* WAIT_SYNC: the sync that covers it */
	bool fetch_expired;
	uint64_t started_ns;          /* when the current request was decoded (0: none) */
	struct keel_arena req_arena;  /* the decoded request */
	struct keel_arena resp_arena; /* the response body */
	struct kafka_request req;
	union kafka_response_body resp;
	struct broker_produce_wait produce_wait;
	struct broker_fetch_range *fetch_ranges; /* the current Fetch's records */
	struct broker_admin_job *admin_job;      /* WAIT_ADMIN: out with the controller thread */
	/* SASL on the listener (sasl_intercept): */
	enum conn_sasl sasl;
	bool replica_peer;                     /* authenticated as BROKER_REPLICA_SASL_USER */
	enum sasl_mech sasl_mech;              /* chosen by SaslHandshake */
	struct sasl_scram_server *scram;       /* SCRAM's exchange, from its first message */
	bool close_after_write;                /* an authentication failure is on its way out */
	struct net_tls *tls;                     /* NULL: plaintext */
};

struct broker_server {
	struct broker_server_options opt;
	uv_loop_t loop;
	uv_tcp_t listener;
	uv_async_t wakeup; /* an image was offered, or stop */
	uv_prepare_t prepare;
	uv_timer_t group_timer; /* the group coordinator's tick */
	uv_work_t work;
	pthread_t thread;
	struct wal_vfs vfs;
	struct broker_core core;
	struct kafka_limits limits;
	struct conn *conns;
	bool sync_in_flight;
	uv_timer_t retention; /* every opt.retention_check_ms */
	struct broker_hw_writer *hw; /* the high-watermark checkpoint */
	uint64_t sync_seq;       /* syncs started */
	uint64_t acked_produces; /* produce requests answered after a sync */
	uint64_t sendfile_bytes; /* fetched record bytes sent with sendfile */
	uint64_t copied_bytes;   /* ... and read into memory first */
	uint64_t conn_count;
	uint64_t next_conn_id;
	uint64_t group_commits; /* offset commits acknowledged */
	struct broker_fetchers *fetchers;  /* follower side: one connection per leader */
	uv_timer_t isr_timer;              /* leader side: ISR changes to ask for */
	bool isr_job_out;                  /* an AlterPartition is with the controller thread */
	struct broker_request_stats stats; /* for /metrics */
	struct http_server http;           /* --metrics-port */
	bool http_running;
	pthread_mutex_t mu;   /* guards the fields below */
	int64_t broker_epoch; /* -1: not registered or fenced (no AlterPartition) */
	struct meta_image *offered;
	bool stop;
	struct broker_admin_job *admin_out;  /* to the controller thread (LIFO is fine: */
	struct broker_admin_job *admin_back; /* one job per connection at a time) */
	uint8_t scram_key[SASL_SCRAM_KEY_BYTES]; /* SCRAM salts (sasl_scram.h), random per process */
	uint8_t tls_rbuf[READ_CHUNK];        /* ciphertext, consumed by each read callback */
	uint64_t tls_failures;
};

static void conn_process(struct conn *c);
static unsigned api_sets(const struct broker_server *s);
static void conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *out);
static void conn_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *b);

/* ---- connections ---- */

static void conn_free(struct conn *c)
{
	keel_arena_close(&c->req_arena);
	keel_arena_close(&c->resp_arena);
	free(c->scram);
	net_tls_free(c->tls);
	free(c->buf);
	free(c);
}

static void conn_handle_closed(uv_handle_t *h)
{
	struct conn *c = h->data;
	if (--c->handles_open > 0) {
		return;
	}
	if (c->prev != NULL) {
		c->prev->next = c->next;
	} else {
		c->srv->conns = c->next;
	}
	if (c->next != NULL) {
		c->next->prev = c->prev;
	}
	if (c->admin_job == NULL) {
		conn_free(c);
	} /* else freed when the job comes back */
}

static void conn_close(struct conn *c, const char *why)
{
	if (c->closing) {
		return;
	}
	if (why != NULL) {
		KEEL_INFO("kafka client %s: %s: closing the connection", c->peer, why);
	}
	c->closing = true;
	uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
	uv_close((uv_handle_t *)&c->tcp, conn_handle_closed);
}

static void write_done(uv_write_t *wr, int status)
{
	struct conn *c = wr->handle->data;
	free(wr->data);
	free(wr);
	if (status < 0) {
		conn_close(c, uv_strerror(status));
		return;
	}
	if (c->close_after_write && c->tcp.write_queue_size == 0) {
		conn_close(c, NULL);
		return;
	}
	if (!c->closing && c->wait == CONN_IDLE) {
		conn_process(c);
	}
}

static bool socket_write_owned(struct conn *c, uint8_t *data, size_t n);

/* Queues the ciphertext the TLS session has for the network. */
static bool tls_flush(struct conn *c)
{
	size_t n = net_tls_pending_out(c->tls);
	if (n == 0) {
		return true;
	}
	uint8_t *data = malloc(n);
	if (data == NULL) {
		conn_close(c, "out of memory");
		return false;
	}
	return socket_write_owned(c, data, net_tls_take_out(c->tls, data, n));
}

/* Queues `data` (malloc'd; owned from here on, freed when written); false
 * when the connection was closed instead. */
static bool conn_write_owned(struct conn *c, uint8_t *data, size_t n)
{
	if (c->tls == NULL) {
		return socket_write_owned(c, data, n);
	}
	enum keel_err err = net_tls_write(c->tls, data, n);
	free(data);
	if (err != KEEL_OK) {
		conn_close(c, "TLS write failed");
		return false;
	}
	return tls_flush(c);
}

static bool socket_write_owned(struct conn *c, uint8_t *data, size_t n)
{
	uv_write_t *wr = malloc(sizeof(*wr));
	if (wr == NULL) {
		free(data);
		conn_close(c, "out of memory");
		return false;
	}
	wr->data = data;
	uv_buf_t b = uv_buf_init((char *)data, (unsigned)n);
	int rc = uv_write(wr, (uv_stream_t *)&c->tcp, &b, 1, write_done);
	if (rc < 0) {
		free(data);
		free(wr);
		conn_close(c, uv_strerror(rc));
		return false;
	}
	return true;
}

/* Encodes and queues the response to the current request. */
static void conn_respond(struct conn *c, const void *body)
{
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 4096, (size_t)c->srv->opt.max_frame_bytes + 4096);
	const struct kafka_request_header *h = &c->req.header;
	enum keel_err err = kafka_encode_response(&w, h->correlation_id, h->api_key, h->api_version,
	                                          body, NULL, 0, NULL);
	if (err != KEEL_OK) {
		keel_wbuf_free(&w);
		KEEL_WARN("kafka client %s: cannot encode the %s v%d response: %s", c->peer,
		          kafka_api_find(h->api_key)->name, h->api_version, keel_errname(err));
		conn_close(c, NULL);
		return;
	}
	size_t size = 0;
	uint8_t *data = keel_wbuf_release(&w, &size);
	if (data == NULL) {
		conn_close(c, "out of memory");
		return;
	}
	conn_write_owned(c, data, size);
}

/* Request counts and latencies, for /metrics. */
static void count_request(struct conn *c)
{
	struct broker_request_stats *st = &c->srv->stats;
	uint64_t us = (uv_hrtime() - c->started_ns) / 1000u;
	if (c->req.header.api_key == KAFKA_API_PRODUCE) {
		st->produce_requests++;
		metrics_hist_observe(&st->produce_latency, us);
	} else if (c->req.header.api_key == KAFKA_API_FETCH && c->req.body.fetch.replica_id >= 0) {
		st->follower_fetches++;
	} else if (c->req.header.api_key == KAFKA_API_FETCH) {
		st->consumer_fetches++;
		metrics_hist_observe(&st->fetch_latency, us);
	}
	c->started_ns = 0;
}

/* The current frame is answered: drop it from the buffer. */
static void conn_finish(struct conn *c)
{
	if (c->started_ns != 0) {
		count_request(c);
	}
	KEEL_ASSERT(c->frame_bytes > 0);
	KEEL_ASSERT(c->frame_bytes <= c->len);
	memmove(c->buf, c->buf + c->frame_bytes, c->len - c->frame_bytes);
	c->len -= c->frame_bytes;
	c->frame_bytes = 0;
	c->wait = CONN_IDLE;
}

/* Queues a copy of n bytes; false when the connection was closed. */
static bool conn_write_copy(struct conn *c, const uint8_t *data, size_t n)
{
	if (n == 0) {
		return true;
	}
	uint8_t *copy = malloc(n);
	if (copy == NULL) {
		conn_close(c, "out of memory");
		return false;
	}
	memcpy(copy, data, n);
	return conn_write_owned(c, copy, n);
}

/* Sends a range of a segment file: with sendfile while everything queued
 * before it has reached the kernel and the socket takes it, the rest read
 * into memory and queued (ordering is kept either way). */
static bool conn_send_file(struct conn *c, const struct broker_fetch_range *range)
{
	int fd = open(range->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		KEEL_WARN("kafka client %s: cannot open %s: %s", c->peer, range->path,
		          strerror(errno));
		conn_close(c, NULL);
		return false;
	}
	uint64_t position = range->position, left = range->size;
	uv_os_fd_t sock;
	if (c->tls == NULL && c->tcp.write_queue_size == 0 &&
	    uv_fileno((uv_handle_t *)&c->tcp, &sock) == 0) {
		while (left > 0) {
			off_t at = (off_t)position;
			ssize_t n = sendfile(sock, fd, &at, (size_t)left);
			if (n > 0) {
				position += (uint64_t)n;
				left -= (uint64_t)n;
				c->srv->sendfile_bytes += (uint64_t)n;
			} else if (n < 0 && errno == EINTR) {
				continue;
			} else {
				break; /* EAGAIN (the socket is full) or an error: copy the rest */
			}
		}
	}
	bool ok = true;
	if (left > 0) {
		uint8_t *buf = malloc((size_t)left);
		size_t got = 0;
		while (buf != NULL && got < left) {
			ssize_t n =
			        pread(fd, buf + got, (size_t)left - got, (off_t)(position + got));
			if (n < 0 && errno == EINTR) {
				continue;
			}
			if (n <= 0) {
				break;
			}
			got += (size_t)n;
		}
		if (buf == NULL || got < left) {
			KEEL_WARN("kafka client %s: cannot read %s", c->peer, range->path);
			conn_close(c, NULL);
			ok = false;
		} else {
			ok = conn_write_copy(c, buf, (size_t)left);
			c->srv->copied_bytes += left;
		}
		free(buf);
	}
	close(fd);
	return ok;
}

/* Writes the current Fetch response: its encoded bytes with the records
 * spliced in from the segment files. */
static void conn_respond_fetch(struct conn *c)
{
	const struct kafka_request_header *h = &c->req.header;
	const struct kafka_fetch_response *r = &c->resp.fetch;
	size_t total = 0;
	size_t *first =
	        r->topic_count > 0
	                ? keel_arena_alloc(&c->resp_arena, (size_t)r->topic_count * sizeof(*first))
	                : NULL;
	for (int32_t t = 0; t < r->topic_count && first != NULL; t++) {
		first[t] = total;
		total += (size_t)r->topics[t].partition_count;
	}
	struct kafka_splice *splices =
	        total > 0 ? keel_arena_alloc(&c->resp_arena, total * sizeof(*splices)) : NULL;
	if (total > 0 && (splices == NULL || first == NULL)) {
		conn_close(c, "out of memory");
		return;
	}
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 4096, (size_t)c->srv->opt.max_frame_bytes + 4096);
	size_t count = 0;
	enum keel_err err = kafka_encode_response(&w, h->correlation_id, h->api_key, h->api_version,
	                                          r, splices, total, &count);
	if (err != KEEL_OK) {
		keel_wbuf_free(&w);
		KEEL_WARN("kafka client %s: cannot encode the Fetch v%d response: %s", c->peer,
		          h->api_version, keel_errname(err));
		conn_close(c, NULL);
		return;
	}
	size_t pos = 0;
	bool ok = true;
	for (size_t i = 0; ok && i < count; i++) {
		const struct kafka_splice *sp = &splices[i];
		const struct broker_fetch_range *range =
		        &c->fetch_ranges[first[sp->topic_index] + sp->partition_index];
		KEEL_ASSERT(range->size == sp->size);
		ok = conn_write_copy(c, w.data + pos, sp->offset - pos) && conn_send_file(c, range);
		pos = sp->offset;
	}
	if (ok) {
		conn_write_copy(c, w.data + pos, w.size - pos);
	}
	keel_wbuf_free(&w);
}

static bool fetch_has_error(const struct kafka_fetch_response *r)
{
	for (int32_t t = 0; t < r->topic_count; t++) {
		for (int32_t i = 0; i < r->topics[t].partition_count; i++) {
			if (r->topics[t].partitions[i].error_code != KAFKA_NONE) {
				return true;
			}
		}
	}
	return false;
}

static void fetch_try(struct conn *c, bool first);

static void fetch_timer_fired(uv_timer_t *t)
{
	struct conn *c = t->data;
	if (c->closing || c->wait != CONN_WAIT_FETCH) {
		return;
	}
	c->fetch_expired = true;
	if (c->srv->sync_in_flight) {
		return; /* answered when the sync is done */
	}
	fetch_try(c, false);
	conn_process(c);
}

/* A (re)try of the current Fetch; answers it when it has enough. */
static void fetch_try(struct conn *c, bool first)
{
	const struct kafka_fetch_request *rq = &c->req.body.fetch;
	keel_arena_reset(&c->resp_arena);
	broker_core_set_time(&c->srv->core, (int64_t)uv_now(&c->srv->loop)); /* throttles */
	size_t bytes = 0;
	broker_fetch_ranges(&c->srv->core, rq, &c->resp_arena, &c->resp.fetch, &bytes,
	                    &c->fetch_ranges);
	bool enough =
	        bytes >= (size_t)KEEL_MAX(rq->min_bytes, 1) || fetch_has_error(&c->resp.fetch);
	if (enough || rq->max_wait_ms <= 0 || c->fetch_expired) {
		uv_timer_stop(&c->timer);
		conn_respond_fetch(c);
		conn_finish(c);
		return;
	}
	if (first) {
		c->wait = CONN_WAIT_FETCH;
		c->fetch_expired = false;
		uv_timer_start(&c->timer, fetch_timer_fired, (uint64_t)rq->max_wait_ms, 0);
	}
}

/* Answers the current forwarded request from the controller's reply (NULL:
 * none came; every result gets `fail`). InitProducerId's reply is a block
 * of producer ids for the core. */
static void admin_reply(struct conn *c, const uint8_t *reply, size_t size, int16_t fail)
{
	if (c->req.header.api_key == KAFKA_API_INIT_PRODUCER_ID) {
		broker_producer_ids_reply(&c->srv->core, reply, size, &c->resp_arena,
		                          &c->resp.init_producer_id);
	} else {
		broker_admin_response(&c->req, reply, size, fail, &c->resp_arena, &c->resp);
	}
	conn_respond(c, &c->resp);
}

/* Sends the current admin request to the controller thread; false when it
 * was answered at once (it cannot be forwarded). */
static bool forward_admin(struct conn *c)
{
	struct broker_server *s = c->srv;
	struct broker_admin_job *job = calloc(1, sizeof(*job));
	if (job == NULL) {
		conn_close(c, "out of memory");
		return true;
	}
	keel_wbuf_init_dynamic(&job->body, 1024, s->opt.max_frame_bytes);
	enum keel_err err;
	if (c->req.header.api_key == KAFKA_API_INIT_PRODUCER_ID) {
		job->api = META_API_ALLOCATE_PRODUCER_IDS;
		err = broker_producer_ids_request(&s->core, &job->body);
	} else {
		err = broker_admin_request(&s->core, &c->req, &c->resp_arena, &job->body, &job->api);
	}
	if (err != KEEL_OK) {
		keel_wbuf_free(&job->body);
		free(job);
		admin_reply(c, NULL, 0,
		            err == KEEL_UNSUPPORTED ? KAFKA_INVALID_REQUEST
		                                    : KAFKA_UNKNOWN_SERVER_ERROR);
		return false;
	}
	job->conn = c;
	c->admin_job = job;
	c->wait = CONN_WAIT_ADMIN;
	pthread_mutex_lock(&s->mu);
	job->next = s->admin_out;
	s->admin_out = job;
	pthread_mutex_unlock(&s->mu);
	return true;
}

/* The controller's answer to the loop thread's AlterPartition: the new ISR
 * comes with the next image; errors are logged and asked again later. */
static void isr_answer(struct broker_server *s, struct broker_admin_job *job)
{
	s->isr_job_out = false;
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct meta_alter_partition_response rs;
	if (job->reply == NULL ||
	    meta_decode_alter_partition_response(job->reply, job->reply_size, &arena, &rs, NULL) !=
	            KEEL_OK) {
		KEEL_INFO("AlterPartition: no answer from the controller; asking again later");
		keel_arena_close(&arena);
		return;
	}
	if (rs.error != META_ERR_NONE) {
		KEEL_INFO("AlterPartition: %s", meta_error_name(rs.error));
	}
	for (uint32_t i = 0; i < rs.topic_count; i++) {
		const struct meta_alter_partition_topic_result *t = &rs.topics[i];
		for (uint32_t j = 0; j < t->partition_count; j++) {
			const struct meta_alter_partition_result *p = &t->partitions[j];
			if (p->error != META_ERR_NONE) {
				const struct meta_topic *mt =
				        meta_image_topic_by_id(&s->core.image, t->topic_id);
				KEEL_INFO("AlterPartition for %s-%d: %s",
				          mt != NULL ? mt->name : "?", p->partition_id,
				          meta_error_name(p->error));
			}
		}
	}
	keel_arena_close(&arena);
}

/* Loop thread: the controller thread's answers. */
static void admin_answers(struct broker_server *s)
{
	pthread_mutex_lock(&s->mu);
	struct broker_admin_job *job = s->admin_back;
	s->admin_back = NULL;
	pthread_mutex_unlock(&s->mu);
	while (job != NULL) {
		struct broker_admin_job *next = job->next;
		struct conn *c = job->conn;
		if (c != NULL) {
			c->admin_job = NULL;
		}
		if (c == NULL && job->api == META_API_ALTER_PARTITION) {
			isr_answer(s, job);
		} else if (c == NULL) {
			/* the broker's own request (creating __consumer_offsets) */
			KEEL_INFO("asked the controller to create __consumer_offsets: %s",
			          job->reply != NULL ? "answered" : "no answer (retried on need)");
		} else if (c->closing) {
			if (c->handles_open == 0) {
				conn_free(c);
			}
		} else {
			KEEL_ASSERT(c->wait == CONN_WAIT_ADMIN);
			keel_arena_reset(&c->resp_arena);
			admin_reply(c, job->reply, job->reply_size, KAFKA_REQUEST_TIMED_OUT);
			conn_finish(c);
			conn_process(c);
		}
		keel_wbuf_free(&job->body);
		free(job->reply);
		free(job);
		job = next;
	}
}

bool broker_server_take_admin(struct broker_server *s, struct broker_admin_job **job,
                              enum meta_api *api, const struct keel_wbuf **body)
{
	pthread_mutex_lock(&s->mu);
	struct broker_admin_job *j = s->admin_out;
	if (j != NULL) {
		s->admin_out = j->next;
	}
	pthread_mutex_unlock(&s->mu);
	if (j == NULL) {
		return false;
	}
	*job = j;
	*api = j->api;
	*body = &j->body;
	return true;
}

void broker_server_admin_done(struct broker_server *s, struct broker_admin_job *job,
                              const void *reply, size_t size)
{
	job->reply = NULL;
	job->reply_size = 0;
	if (reply != NULL && (job->reply = malloc(size > 0 ? size : 1)) != NULL) {
		memcpy(job->reply, reply, size);
		job->reply_size = size;
	}
	pthread_mutex_lock(&s->mu);
	job->next = s->admin_back;
	s->admin_back = job;
	pthread_mutex_unlock(&s->mu);
	uv_async_send(&s->wakeup);
}

/* ---- consumer groups ---- */

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Hands the coordinator's delayed answers to their connections. */
static void group_deliver(struct broker_server *s)
{
	struct group_reply *r;
	while ((r = group_coord_take_reply(&s->core.groups->coord)) != NULL) {
		struct conn *c = s->conns;
		while (c != NULL && c->id != r->waiter) {
			c = c->next;
		}
		if (c != NULL && !c->closing && c->wait == CONN_WAIT_GROUP) {
			keel_arena_reset(&c->resp_arena);
			broker_group_reply(r, &c->req, &c->resp_arena, &c->resp);
			conn_respond(c, &c->resp);
			conn_finish(c);
			conn_process(c);
		}
		group_reply_free(r);
	}
}

/* Asks the controller for __consumer_offsets when a client needs it. */
static void group_create_topic(struct broker_server *s)
{
	struct broker_admin_job *job = calloc(1, sizeof(*job));
	if (job == NULL) {
		return;
	}
	keel_wbuf_init_dynamic(&job->body, 1024, s->opt.max_frame_bytes);
	if (!broker_groups_take_create(&s->core, (int64_t)uv_now(&s->loop), &job->body,
	                               &job->api)) {
		keel_wbuf_free(&job->body);
		free(job);
		return;
	}
	pthread_mutex_lock(&s->mu);
	job->next = s->admin_out;
	s->admin_out = job;
	pthread_mutex_unlock(&s->mu);
}

static void group_tick(uv_timer_t *t)
{
	struct broker_server *s = t->data;
	if (s->sync_in_flight) {
		return; /* the core is the worker's; next tick */
	}
	broker_groups_tick(&s->core, (int64_t)uv_now(&s->loop), wall_ms());
	group_deliver(s);
	group_create_topic(s);
}

/* A group API; true when the connection waits (the answer comes later). */
static bool group_dispatch(struct conn *c)
{
	struct broker_server *s = c->srv;
	KEEL_ASSERT(broker_groups_handles(c->req.header.api_key));
	struct broker_group_ctx ctx = {(int64_t)uv_now(&s->loop), wall_ms(), c->id, c->peer};
	char host[sizeof(c->peer)];
	memcpy(host, c->peer, sizeof(host));
	char *colon = strrchr(host, ':');
	if (colon != NULL) {
		*colon = '\0';
	}
	ctx.client_host = host;
	enum broker_group_outcome o = broker_group_request(&s->core, &ctx, &c->req, &c->resp_arena,
	                                                   &c->resp, &c->produce_wait);
	group_create_topic(s);
	switch (o) {
	case BROKER_GROUP_DONE:
		conn_respond(c, &c->resp);
		group_deliver(s);
		return false;
	case BROKER_GROUP_SYNC:
		c->wait = CONN_WAIT_SYNC;
		c->wait_sync_seq = s->sync_seq + 1;
		group_deliver(s);
		return true;
	case BROKER_GROUP_PARKED:
		c->wait = CONN_WAIT_GROUP;
		group_deliver(s);
		return true;
	}
	return false;
}

static void dispatch(struct conn *c)
{
	struct broker_core *core = &c->srv->core;
	struct kafka_request *rq = &c->req;
	struct keel_arena *a = &c->resp_arena;
	keel_arena_reset(a);
	broker_core_set_time(core, (int64_t)uv_now(&c->srv->loop));
	switch (rq->header.api_key) {
	case KAFKA_API_API_VERSIONS:
		if (c->sasl == CONN_SASL_OFF) {
			broker_api_versions(core, a, &c->resp.api_versions);
		} else if (kafka_api_versions_table(a, api_sets(c->srv), &c->resp.api_versions) !=
		           KEEL_OK) {
			memset(&c->resp.api_versions, 0, sizeof(c->resp.api_versions));
			c->resp.api_versions.error_code = KAFKA_UNKNOWN_SERVER_ERROR;
		}
		conn_respond(c, &c->resp.api_versions);
		break;
	case KAFKA_API_METADATA:
		broker_metadata(core, &rq->body.metadata, rq->header.api_version, a,
		                &c->resp.metadata);
		conn_respond(c, &c->resp.metadata);
		break;
	case KAFKA_API_PRODUCE:
		broker_produce(core, &rq->body.produce, a, &c->resp.produce, &c->produce_wait);
		if (rq->body.produce.acks == 0) {
			break; /* acks=0: no response at all */
		}
		if (c->produce_wait.needs_sync) {
			c->wait = CONN_WAIT_SYNC;
			c->wait_sync_seq = c->srv->sync_seq + 1;
			return;
		}
		conn_respond(c, &c->resp.produce);
		break;
	case KAFKA_API_FETCH:
		fetch_try(c, true);
		return;
	case KAFKA_API_LIST_OFFSETS:
		broker_list_offsets(core, &rq->body.list_offsets, a, &c->resp.list_offsets);
		conn_respond(c, &c->resp.list_offsets);
		break;
	case KAFKA_API_DESCRIBE_CONFIGS:
		broker_describe_configs(core, &rq->body.describe_configs, a,
		                        &c->resp.describe_configs);
		conn_respond(c, &c->resp.describe_configs);
		break;
	case KAFKA_API_DESCRIBE_CLUSTER:
		broker_describe_cluster(core, a, &c->resp.describe_cluster);
		conn_respond(c, &c->resp.describe_cluster);
		break;
	case KAFKA_API_INIT_PRODUCER_ID:
		if (broker_init_producer_id(core, &rq->body.init_producer_id,
		                            &c->resp.init_producer_id)) {
			conn_respond(c, &c->resp.init_producer_id);
			break;
		}
		if (forward_admin(c)) {
			return;
		}
		break;
	case KAFKA_API_CREATE_TOPICS:
	case KAFKA_API_DELETE_TOPICS:
	case KAFKA_API_CREATE_PARTITIONS:
	case KAFKA_API_INCREMENTAL_ALTER_CONFIGS:
	case KAFKA_API_ALTER_CONFIGS:
	case KAFKA_API_ALTER_PARTITION_REASSIGNMENTS:
	case KAFKA_API_LIST_PARTITION_REASSIGNMENTS:
		if (forward_admin(c)) {
			return;
		}
		break;
	case KAFKA_API_OFFSET_FOR_LEADER_EPOCH:
		broker_offset_for_leader_epoch(core, &rq->body.offset_for_leader_epoch, a,
		                               &c->resp.offset_for_leader_epoch);
		conn_respond(c, &c->resp.offset_for_leader_epoch);
		break;
	default:
		if (group_dispatch(c)) {
			return;
		}
		break;
	}
	conn_finish(c);
}

/* ---- SASL (enum conn_sasl) ---- */

/* The APIs this listener serves: the SASL pair too when it has users. */
static unsigned api_sets(const struct broker_server *s)
{
	return BROKER_API_SETS | (s->opt.sasl_users != NULL ? (unsigned)KAFKA_SET_SASL : 0u);
}

/* Answers the current request, then closes once the answer is out. */
static void sasl_respond_and_close(struct conn *c, const void *body, const char *why)
{
	KEEL_WARN("kafka client %s: %s: closing the connection", c->peer, why);
	conn_respond(c, body);
	conn_finish(c);
	c->close_after_write = true;
	if (!c->closing && c->tcp.write_queue_size == 0) {
		conn_close(c, NULL);
	}
}

static void sasl_handshake(struct conn *c)
{
	/* A listener that offers SASL only to the brokers (OFFERED) does not
	 * take PLAIN: the brokers' password never crosses the wire. */
	static const char *const offered[] = {"SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"};
	size_t n_offered = c->sasl == CONN_SASL_OFFERED ? 2 : 3;
	struct kafka_sasl_handshake_response *r = &c->resp.sasl_handshake;
	struct kafka_str *names = keel_arena_alloc(&c->resp_arena, n_offered * sizeof(*names));
	if (names == NULL) {
		conn_close(c, "out of memory");
		return;
	}
	for (size_t i = 0; i < n_offered; i++) {
		names[i] = kafka_str(offered[i]);
	}
	r->mechanisms = (struct kafka_str_array){names, (int32_t)n_offered};
	r->error_code = KAFKA_NONE;
	if (c->req.header.api_version < 1) {
		conn_close(c, "SaslHandshake v0 (SASL tokens outside Kafka requests) is not supported");
		return;
	}
	if (c->sasl != CONN_SASL_HANDSHAKE && c->sasl != CONN_SASL_OFFERED) {
		r->error_code = KAFKA_ILLEGAL_SASL_STATE;
		sasl_respond_and_close(c, r, "SaslHandshake out of turn");
		return;
	}
	const struct kafka_str *m = &c->req.body.sasl_handshake.mechanism;
	c->sasl_mech = m->len > 0 ? sasl_mech_of(m->ptr, (size_t)m->len) : SASL_MECH_NONE;
	if (c->sasl_mech == SASL_MECH_NONE ||
	    (c->sasl == CONN_SASL_OFFERED && c->sasl_mech == SASL_MECH_PLAIN)) {
		r->error_code = KAFKA_UNSUPPORTED_SASL_MECHANISM;
		sasl_respond_and_close(c, r, "SaslHandshake asks for a mechanism not offered");
		return;
	}
	c->sasl = CONN_SASL_AUTHENTICATE;
	conn_respond(c, r);
	conn_finish(c);
}

/* One SCRAM message (the connection's exchange starts on the first):
 * KEEL_OK with the answer in w (and the user in `user` once *done),
 * KEEL_AUTH with *why, or KEEL_NOMEM. */
static enum keel_err sasl_scram_round(struct conn *c, const uint8_t *msg, size_t size,
                                      struct keel_wbuf *w, char user[SASL_NAME_MAX + 1],
                                      bool *done, const char **why)
{
	struct broker_server *s = c->srv;
	if (c->scram == NULL) {
		c->scram = malloc(sizeof(*c->scram));
		if (c->scram == NULL) {
			return KEEL_NOMEM;
		}
		sasl_scram_server_init(c->scram, c->sasl_mech, s->scram_key);
	}
	uint8_t random[SASL_SCRAM_NONCE_BYTES];
	enum keel_err rc = peer_auth_random(random, sizeof(random));
	if (rc == KEEL_OK) {
		rc = sasl_scram_step(c->scram, s->opt.sasl_users, msg, size, random, w);
	}
	*why = c->scram->why;
	*done = rc == KEEL_OK && c->scram->state == SASL_SCRAM_DONE;
	if (*done) {
		memcpy(user, c->scram->user, c->scram->user_size + 1);
	}
	return rc == KEEL_OK || rc == KEEL_AUTH ? rc : KEEL_AUTH;
}

/* One SaslAuthenticate step of the chosen mechanism. */
static void sasl_authenticate(struct conn *c)
{
	struct broker_server *s = c->srv;
	struct kafka_sasl_authenticate_response *r = &c->resp.sasl_authenticate;
	memset(r, 0, sizeof(*r));
	r->error_message = (struct kafka_str){NULL, -1};
	r->auth_bytes = (struct kafka_bytes){(const uint8_t *)"", 0};
	if (c->sasl != CONN_SASL_AUTHENTICATE) {
		r->error_code = KAFKA_ILLEGAL_SASL_STATE;
		sasl_respond_and_close(c, r, "SaslAuthenticate out of turn");
		return;
	}
	const struct kafka_bytes *in = &c->req.body.sasl_authenticate.auth_bytes;
	const uint8_t *msg = in->len > 0 ? in->ptr : (const uint8_t *)"";
	size_t size = in->len > 0 ? (size_t)in->len : 0;
	uint8_t *out = keel_arena_alloc(&c->resp_arena, SASL_SCRAM_MSG_MAX);
	if (out == NULL) {
		conn_close(c, "out of memory");
		return;
	}
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, out, SASL_SCRAM_MSG_MAX);
	const char *why = NULL;
	char user[SASL_NAME_MAX + 1] = "";
	bool done = false;
	enum keel_err rc;
	if (c->sasl_mech == SASL_MECH_PLAIN) {
		rc = sasl_plain_check(s->opt.sasl_users, msg, size, user, &why);
		done = rc == KEEL_OK;
	} else {
		rc = sasl_scram_round(c, msg, size, &w, user, &done, &why);
		if (rc == KEEL_NOMEM) {
			conn_close(c, "out of memory");
			return;
		}
	}
	if (rc != KEEL_OK) {
		char line[256];
		snprintf(line, sizeof(line), "SASL %s authentication failed: %s",
		         sasl_mech_name(c->sasl_mech), why != NULL ? why : keel_strerror(rc));
		r->error_code = KAFKA_SASL_AUTHENTICATION_FAILED;
		r->error_message = kafka_str("Authentication failed: invalid credentials");
		sasl_respond_and_close(c, r, line);
		return;
	}
	r->auth_bytes = (struct kafka_bytes){out, (int32_t)w.size};
	if (done) {
		c->sasl = CONN_SASL_DONE;
		c->replica_peer = strcmp(user, BROKER_REPLICA_SASL_USER) == 0;
		KEEL_INFO("kafka client %s: authenticated as %s (SASL %s)", c->peer, user,
		          sasl_mech_name(c->sasl_mech));
	}
	conn_respond(c, r);
	conn_finish(c);
}

/* Before authentication only ApiVersions and the SASL pair are served:
 * true when the request was handled here (answered, or the connection
 * closed). */
static bool sasl_intercept(struct conn *c)
{
	int16_t api = c->req.header.api_key;
	if (api == KAFKA_API_SASL_HANDSHAKE) {
		sasl_handshake(c);
		return true;
	}
	if (api == KAFKA_API_SASL_AUTHENTICATE) {
		sasl_authenticate(c);
		return true;
	}
	if (c->sasl == CONN_SASL_DONE || c->sasl == CONN_SASL_OFFERED ||
	    (c->sasl == CONN_SASL_HANDSHAKE && api == KAFKA_API_API_VERSIONS)) {
		return false;
	}
	char line[128];
	snprintf(line, sizeof(line), "%s before SASL authentication", kafka_api_find(api)->name);
	conn_close(c, line);
	return true;
}

/* Handles the frame at the head of the buffer (c->frame_bytes long). */
static void handle_frame(struct conn *c)
{
	struct broker_server *s = c->srv;
	const uint8_t *frame = c->buf + 4;
	size_t size = c->frame_bytes - 4;
	keel_arena_reset(&c->req_arena);
	const char *why = NULL;
	enum keel_err err =
	        kafka_decode_request(frame, size, &c->req_arena, &s->limits, &c->req, &why);
	if (err == KEEL_OK && !kafka_api_in_sets(c->req.header.api_key, api_sets(s))) {
		err = KEEL_UNSUPPORTED;
	}
	if (err == KEEL_UNSUPPORTED) {
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 1024, 1u << 20);
		if (kafka_encode_unsupported(&w, &c->req.header, api_sets(s)) != KEEL_OK) {
			keel_wbuf_free(&w);
			char line[96];
			snprintf(line, sizeof(line), "unsupported API key %d version %d",
			         c->req.header.api_key, c->req.header.api_version);
			conn_close(c, line);
			return;
		}
		size_t n = 0;
		uint8_t *data = keel_wbuf_release(&w, &n);
		if (data == NULL) {
			conn_close(c, "out of memory");
		} else if (conn_write_owned(c, data, n)) {
			conn_finish(c);
		}
		return;
	}
	if (err != KEEL_OK) {
		char line[160];
		snprintf(line, sizeof(line), "bad request (%s%s%s)", keel_errname(err),
		         why != NULL ? ": " : "", why != NULL ? why : "");
		conn_close(c, line);
		return;
	}
	KEEL_DEBUG("kafka client %s: %s v%d (correlation id %d)", c->peer,
	           kafka_api_find(c->req.header.api_key)->name, c->req.header.api_version,
	           c->req.header.correlation_id);
	if (c->sasl != CONN_SASL_OFF && sasl_intercept(c)) {
		return;
	}
	if (c->req.header.api_key == KAFKA_API_FETCH && c->req.body.fetch.replica_id >= 0 &&
	    c->sasl != CONN_SASL_OFF && !c->replica_peer) {
		conn_close(c, "replica Fetch from a connection that did not authenticate as a broker");
		return;
	}
	if ((broker_api_touches_logs(c->req.header.api_key) ||
	     broker_groups_handles(c->req.header.api_key)) &&
	    s->sync_in_flight) {
		c->wait = CONN_GATED;
		return;
	}
	if (c->started_ns == 0) {
		c->started_ns = uv_hrtime(); /* kept across a gated retry */
	}
	dispatch(c);
}

/* TLS: advances the handshake and decrypts into the free end of the read
 * buffer; false when the session failed (the connection is closed). */
static bool tls_pump(struct conn *c)
{
	for (;;) {
		size_t got = 0;
		size_t room = c->cap - c->len;
		enum keel_err err = net_tls_read(c->tls, c->buf + c->len, room, &got);
		if (err == KEEL_SHUTDOWN) {
			conn_close(c, NULL); /* close_notify: as EOF */
			return false;
		}
		if (err != KEEL_OK) {
			c->srv->tls_failures++;
			char why[256];
			snprintf(why, sizeof(why), "%s", net_tls_error(c->tls));
			tls_flush(c); /* the alert, if any */
			KEEL_WARN("kafka client %s: %s", c->peer, why);
			conn_close(c, NULL);
			return false;
		}
		c->len += got;
		if (!tls_flush(c)) {
			return false;
		}
		if (got == 0 || c->len == c->cap) {
			return true;
		}
	}
}

static void conn_process(struct conn *c)
{
	struct broker_server *s = c->srv;
	while (!c->closing && c->wait == CONN_IDLE && !c->close_after_write) {
		if (c->tcp.write_queue_size > MAX_WRITE_QUEUE_BYTES) {
			break; /* resumed by write_done */
		}
		if (c->tls != NULL && !tls_pump(c)) {
			return;
		}
		if (c->len < 4) {
			break;
		}
		uint32_t size = 0;
		enum keel_err err = kafka_frame_size(c->buf, c->len, &s->limits, &size);
		if (err != KEEL_OK) {
			conn_close(c, err == KEEL_TOOBIG ? "request frame over the size limit"
			                                 : "bad frame size");
			return;
		}
		size_t need = (size_t)size + 4;
		if (c->len < need) {
			if (c->cap < need) {
				uint8_t *n = realloc(c->buf, need);
				if (n == NULL) {
					conn_close(c, "out of memory");
					return;
				}
				c->buf = n;
				c->cap = need;
				if (c->tls != NULL) {
					continue; /* the session may hold the rest */
				}
			}
			break;
		}
		if (!c->got_request) {
			c->got_request = true;
			uv_timer_stop(&c->timer);
		}
		c->frame_bytes = need;
		handle_frame(c);
	}
	if (!c->closing && !c->reading && c->len < c->cap) {
		c->reading = true;
		uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_read);
	}
}

static void conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *out)
{
	(void)suggested;
	struct conn *c = h->data;
	if (c->tls != NULL) {
		/* Ciphertext: conn_read hands it to the session at once. */
		*out = uv_buf_init((char *)c->srv->tls_rbuf, sizeof(c->srv->tls_rbuf));
		return;
	}
	/* Never move the buffer under a request that waits: its decoded
	 * fields point into the frame at the head of it. */
	if (c->wait == CONN_IDLE && c->cap - c->len < READ_CHUNK / 4 && c->cap < READ_CHUNK * 4) {
		size_t cap = c->cap * 2;
		uint8_t *n = realloc(c->buf, cap);
		if (n != NULL) {
			c->buf = n;
			c->cap = cap;
		}
	}
	*out = uv_buf_init((char *)c->buf + c->len, (unsigned)(c->cap - c->len));
}

static void conn_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *b)
{
	(void)b;
	struct conn *c = stream->data;
	if (nread == UV_ENOBUFS) {
		/* No room while a request waits: read again once it is answered. */
		uv_read_stop(stream);
		c->reading = false;
		return;
	}
	if (nread < 0) {
		conn_close(c, nread == UV_EOF ? NULL : uv_strerror((int)nread));
		return;
	}
	if (c->tls != NULL) {
		if (net_tls_feed(c->tls, c->srv->tls_rbuf, (size_t)nread) != KEEL_OK) {
			conn_close(c, "out of memory");
			return;
		}
		conn_process(c); /* decrypts what fits */
		if (!c->closing && c->reading && c->len == c->cap) {
			uv_read_stop(stream); /* full: the rest waits in the session */
			c->reading = false;
		}
		return;
	}
	c->len += (size_t)nread;
	if (c->len == c->cap) {
		/* Full while a request waits: stop until it is answered. */
		uv_read_stop(stream);
		c->reading = false;
	}
	conn_process(c);
}

static void handshake_expired(uv_timer_t *t)
{
	struct conn *c = t->data;
	if (!c->got_request) {
		conn_close(c, "no request within the handshake deadline");
	}
}

static void on_connection(uv_stream_t *server, int status)
{
	struct broker_server *s = server->data;
	if (status < 0) {
		KEEL_WARN("kafka listener: %s", uv_strerror(status));
		return;
	}
	struct conn *c = calloc(1, sizeof(*c));
	if (c == NULL || (c->buf = malloc(READ_CHUNK)) == NULL) {
		free(c);
		return;
	}
	c->cap = READ_CHUNK;
	c->srv = s;
	c->id = ++s->next_conn_id;
	c->sasl = s->opt.sasl_users == NULL ? CONN_SASL_OFF
	          : s->opt.sasl_required    ? CONN_SASL_HANDSHAKE
	                                    : CONN_SASL_OFFERED;
	keel_arena_init(&c->req_arena, ARENA_BLOCK);
	keel_arena_init(&c->resp_arena, ARENA_BLOCK);
	uv_tcp_init(&s->loop, &c->tcp);
	uv_timer_init(&s->loop, &c->timer);
	c->tcp.data = c;
	c->timer.data = c;
	c->handles_open = 2;
	c->next = s->conns;
	if (s->conns != NULL) {
		s->conns->prev = c;
	}
	s->conns = c;
	if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
		conn_close(c, NULL);
		return;
	}
	uv_tcp_nodelay(&c->tcp, 1);
	struct sockaddr_storage addr;
	int len = sizeof(addr);
	snprintf(c->peer, sizeof(c->peer), "?");
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&addr, &len) == 0) {
		char ip[48] = "?";
		int port = 0;
		if (addr.ss_family == AF_INET) {
			struct sockaddr_in *in = (struct sockaddr_in *)&addr;
			uv_ip4_name(in, ip, sizeof(ip));
			port = ntohs(in->sin_port);
		} else if (addr.ss_family == AF_INET6) {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&addr;
			uv_ip6_name(in6, ip, sizeof(ip));
			port = ntohs(in6->sin6_port);
		}
		snprintf(c->peer, sizeof(c->peer), "%s:%d", ip, port);
	}
	if (s->opt.listener_tls != NULL && (c->tls = net_tls_new(s->opt.listener_tls)) == NULL) {
		conn_close(c, "out of memory");
		return;
	}
	s->conn_count++;
	KEEL_DEBUG("kafka client %s connected", c->peer);
	uv_timer_start(&c->timer, handshake_expired, (uint64_t)s->opt.handshake_timeout_ms, 0);
	c->reading = true;
	uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_read);
}

/* ---- syncs and images ---- */

static void sync_work(uv_work_t *w)
{
	struct broker_server *s = w->data;
	broker_core_sync(&s->core);
}

static void apply_offered_image(struct broker_server *s);

/* How long a group write (OffsetCommit, DeleteGroups, OffsetDelete) waits
 * for the offsets partition's ISR: Kafka's offsets.commit.timeout.ms. */
#define GROUP_COMMIT_TIMEOUT_MS 5000

/* A group write after its sync: answered once the offsets partition's high
 * watermark covers it (a coordinator failover then keeps it), at once when
 * it cannot (the sync failed, leadership moved), or at the timeout. */
static bool group_write_try(struct conn *c, bool expired)
{
	struct broker_server *s = c->srv;
	const struct broker_produce_wait *w = &c->produce_wait;
	bool ready = true;
	for (uint32_t i = 0; i < w->count; i++) {
		struct broker_partition *p = w->parts[i];
		bool failed = p == NULL || !p->open || p->sync_err != KEEL_OK || !p->leader;
		ready &= failed || broker_partition_committed(p, w->last_offset + 1);
	}
	if (!ready && !expired) {
		return false;
	}
	uv_timer_stop(&c->timer);
	broker_group_finish(&s->core, &c->req, &c->produce_wait, &c->resp);
	s->group_commits++;
	conn_respond(c, &c->resp);
	conn_finish(c);
	return true;
}

/* acks=all: answers the produce if the ISR has it (or it failed). */
static bool acks_try(struct conn *c)
{
	struct broker_server *s = c->srv;
	if (c->req.header.api_key != KAFKA_API_PRODUCE) {
		return group_write_try(c, c->fetch_expired);
	}
	if (!broker_produce_acked(&s->core, &c->req.body.produce, &c->produce_wait,
	                          &c->resp.produce, c->fetch_expired)) {
		return false;
	}
	uv_timer_stop(&c->timer);
	s->acked_produces++;
	conn_respond(c, &c->resp.produce);
	conn_finish(c);
	return true;
}

static void acks_timer_fired(uv_timer_t *t)
{
	struct conn *c = t->data;
	if (c->closing || c->wait != CONN_WAIT_ACKS) {
		return;
	}
	c->fetch_expired = true; /* the produce's timeout_ms passed */
	if (!c->srv->sync_in_flight && acks_try(c)) {
		conn_process(c);
	}
}

/* After its sync: an acks=all produce waits for the ISR, at most its
 * timeout_ms (then REQUEST_TIMED_OUT). */
static void wait_for_isr(struct conn *c)
{
	c->wait = CONN_WAIT_ACKS;
	c->fetch_expired = false;
	c->srv->stats.acks_all_waits++;
	if (acks_try(c)) {
		return;
	}
	int32_t timeout = c->req.body.produce.timeout_ms;
	uv_timer_start(&c->timer, acks_timer_fired, (uint64_t)KEEL_MAX(timeout, 0), 0);
}

/* Some high watermark rose, or the image changed: answer what is due. */
static void recheck_acks(struct broker_server *s)
{
	s->core.hw_moved = false;
	for (struct conn *c = s->conns; c != NULL; c = c->next) {
		if (!c->closing && c->wait == CONN_WAIT_ACKS && acks_try(c)) {
			conn_process(c);
		}
	}
}

static void sync_done(uv_work_t *w, int status)
{
	(void)status;
	struct broker_server *s = w->data;
	KEEL_ASSERT(s->sync_in_flight);
	s->sync_in_flight = false;
	broker_core_sync_done(&s->core);
	/* First answer what this sync made durable, then let everyone else on. */
	broker_core_set_time(&s->core, (int64_t)uv_now(&s->loop));
	for (struct conn *c = s->conns; c != NULL; c = c->next) {
		if (c->closing) {
			continue;
		}
		if (c->wait == CONN_WAIT_SYNC && c->wait_sync_seq <= s->sync_seq &&
		    c->req.header.api_key != KAFKA_API_PRODUCE) {
			c->fetch_expired = false;
			if (!group_write_try(c, false)) {
				c->wait = CONN_WAIT_ACKS; /* the ISR's, like acks=all */
				uv_timer_start(&c->timer, acks_timer_fired, GROUP_COMMIT_TIMEOUT_MS, 0);
			}
		} else if (c->wait == CONN_WAIT_SYNC && c->wait_sync_seq <= s->sync_seq) {
			broker_produce_finish(&c->produce_wait, &c->resp.produce);
			if (c->produce_wait.needs_isr) {
				wait_for_isr(c);
			} else {
				s->acked_produces++;
				conn_respond(c, &c->resp.produce);
				conn_finish(c);
			}
		} else if (c->wait == CONN_WAIT_ACKS) {
			acks_try(c);
		} else if (c->wait == CONN_WAIT_FETCH) {
			fetch_try(c, false);
		} else if (c->wait == CONN_GATED) {
			c->wait = CONN_IDLE; /* the frame is handled again */
		}
	}
	/* Nothing is dirty or waiting on a partition now: the moment for a new
	 * image, before the next appends (under steady produce traffic there
	 * may be no other), and for a checkpoint that came due meanwhile. */
	apply_offered_image(s);
	broker_hw_writer_poke(s->hw);
	for (struct conn *c = s->conns; c != NULL; c = c->next) {
		if (!c->closing && c->wait == CONN_IDLE) {
			conn_process(c);
		}
	}
}

static void apply_offered_image(struct broker_server *s)
{
	pthread_mutex_lock(&s->mu);
	struct meta_image *img = s->offered;
	s->offered = NULL;
	pthread_mutex_unlock(&s->mu);
	if (img == NULL) {
		return;
	}
	struct broker_image_report rep;
	broker_core_set_time(&s->core, (int64_t)uv_now(&s->loop));
	broker_core_set_image(&s->core, img, &rep);
	meta_image_close(img);
	free(img);
	broker_fetchers_update(s->fetchers);
	recheck_acks(s); /* leadership may have moved under waiting produces */
	if (rep.opened > 0 || rep.closed > 0 || rep.failed > 0) {
		KEEL_INFO("partition logs: %u opened, %u closed, %u failed (%u held)%s%s",
		          rep.opened, rep.closed, rep.failed, s->core.part_count,
		          rep.failed > 0 ? "; last failure: " : "",
		          rep.failed > 0 ? s->core.why : "");
	}
	if (rep.recovered_bytes_cut > 0) {
		KEEL_WARN("recovery cut %" PRIu64 " bytes of torn tails from partition logs",
		          rep.recovered_bytes_cut);
	}
}

/* Before each wait for I/O: start a sync, or apply a new image; move
 * replication on. */
static void on_prepare(uv_prepare_t *p)
{
	struct broker_server *s = p->data;
	if (s->sync_in_flight) {
		return;
	}
	broker_fetchers_kick(s->fetchers); /* answers held during the sync */
	if (s->core.hw_moved) {
		recheck_acks(s);
	}
	if (broker_core_dirty(&s->core)) {
		/* Followers waiting on a fetch get the new batches now, from the
		 * page cache, so that their fdatasync runs alongside ours (the
		 * high watermark still waits for our own durable end). */
		for (struct conn *c = s->conns; c != NULL; c = c->next) {
			if (!c->closing && c->wait == CONN_WAIT_FETCH &&
			    c->req.body.fetch.replica_id >= 0) {
				fetch_try(c, false);
			}
		}
		s->sync_in_flight = true;
		s->sync_seq++;
		s->stats.syncs++;
		s->work.data = s;
		int rc = uv_queue_work(&s->loop, &s->work, sync_work, sync_done);
		KEEL_ASSERT(rc == 0);
		return;
	}
	apply_offered_image(s);
	broker_fetchers_kick(s->fetchers); /* nothing dirty: fetch on */
}

/* Leader side, every ISR_CHECK_MS: ISR changes to ask the controller for
 * (through the controller thread, like forwarded admin requests). */
#define ISR_CHECK_MS  250u
#define ISR_RESEND_MS 2000

static void isr_check(uv_timer_t *t)
{
	struct broker_server *s = t->data;
	pthread_mutex_lock(&s->mu);
	int64_t epoch = s->broker_epoch;
	pthread_mutex_unlock(&s->mu);
	if (s->sync_in_flight || s->isr_job_out || epoch < 0) {
		return;
	}
	struct broker_admin_job *job = calloc(1, sizeof(*job));
	if (job == NULL) {
		return;
	}
	keel_wbuf_init_dynamic(&job->body, 1024, 16u << 20);
	struct keel_arena arena;
	keel_arena_init(&arena, 16 * 1024);
	broker_core_set_time(&s->core, (int64_t)uv_now(&s->loop));
	struct broker_replication_stats before = s->core.stats;
	bool ask = broker_replica_isr_request(&s->core, epoch, ISR_RESEND_MS, &arena, &job->body);
	keel_arena_close(&arena);
	if (!ask) {
		keel_wbuf_free(&job->body);
		free(job);
		return;
	}
	KEEL_INFO("asking the controller for an ISR change (AlterPartition): %" PRIu64
	          " replica(s) out for lag, %" PRIu64 " back in",
	          s->core.stats.isr_shrinks - before.isr_shrinks,
	          s->core.stats.isr_expands - before.isr_expands);
	job->api = META_API_ALTER_PARTITION;
	s->isr_job_out = true;
	pthread_mutex_lock(&s->mu);
	job->next = s->admin_out;
	s->admin_out = job;
	pthread_mutex_unlock(&s->mu);
}

static int metrics_handler(void *ctx, const char *path, struct keel_wbuf *body,
                           const char **content_type)
{
	struct broker_server *s = ctx;
	*content_type = "text/plain; version=0.0.4";
	if (strcmp(path, "/metrics") != 0) {
		keel_wbuf_bytes(body, "not found\n", 10);
		return 404;
	}
	/* The fields read here are the loop thread's: a sync in flight on the
	 * worker changes only the logs' durable offsets, which are not read. */
	s->stats.hw_checkpoints = broker_hw_writer_count(s->hw, &s->stats.hw_checkpoint_failures);
	broker_metrics_render(&s->core, &s->stats, body);
	return 200;
}

void broker_server_set_broker_epoch(struct broker_server *s, int64_t epoch)
{
	pthread_mutex_lock(&s->mu);
	s->broker_epoch = epoch;
	pthread_mutex_unlock(&s->mu);
}

/* Retention runs between syncs; one due during a sync waits a tick. */
static void retention_due(uv_timer_t *t)
{
	struct broker_server *s = t->data;
	if (s->sync_in_flight) {
		uv_timer_start(&s->retention, retention_due, 100, 0);
		return;
	}
	struct broker_retention_report rep;
	broker_core_retain(&s->core, keel_clock_wall_ms(), &rep);
	if (rep.segments > 0 || rep.failed > 0) {
		KEEL_INFO("retention: deleted %u segments of %u partitions%s", rep.segments,
		          rep.partitions, rep.failed > 0 ? "; some logs failed (see below)" : "");
	}
	if (rep.failed > 0) {
		KEEL_WARN("retention failed on %u partition logs", rep.failed);
	}
	uv_timer_start(&s->retention, retention_due, (uint64_t)s->opt.retention_check_ms, 0);
}

static void close_all(struct broker_server *s)
{
	for (struct conn *c = s->conns; c != NULL; c = c->next) {
		conn_close(c, NULL);
	}
	uv_close((uv_handle_t *)&s->listener, NULL);
	uv_close((uv_handle_t *)&s->wakeup, NULL);
	uv_close((uv_handle_t *)&s->prepare, NULL);
	uv_close((uv_handle_t *)&s->retention, NULL);
	broker_hw_writer_close(s->hw);
	uv_close((uv_handle_t *)&s->group_timer, NULL);
	uv_close((uv_handle_t *)&s->isr_timer, NULL);
	broker_fetchers_close(s->fetchers);
	if (s->http_running) {
		http_server_close(&s->http);
		s->http_running = false;
	}
}

static void on_wakeup(uv_async_t *a)
{
	struct broker_server *s = a->data;
	pthread_mutex_lock(&s->mu);
	bool stop = s->stop;
	pthread_mutex_unlock(&s->mu);
	admin_answers(s);
	if (stop) {
		close_all(s);
	}
	/* An offered image is applied by on_prepare, which runs next. */
}

static void *server_thread(void *arg)
{
	struct broker_server *s = arg;
	uv_run(&s->loop, UV_RUN_DEFAULT);
	return NULL;
}

struct broker_server *broker_server_start(const struct broker_server_options *options)
{
	struct broker_server *s = calloc(1, sizeof(*s));
	if (s == NULL) {
		return NULL;
	}
	if (peer_auth_random(s->scram_key, sizeof(s->scram_key)) != KEEL_OK) {
		fprintf(stderr, "keel broker: no random bytes for SCRAM salts\n");
		free(s);
		return NULL;
	}
	s->opt = *options;
	kafka_limits_default(&s->limits);
	s->limits.max_frame_size = options->max_frame_bytes;
	wal_vfs_posix_init(&s->vfs);
	struct broker_config bc = {&s->vfs, options->data_dir, options->node_id, 0};
	broker_core_init(&s->core, &bc);
	broker_groups_set_incarnation(&s->core, (uint64_t)wall_ms() ^ ((uint64_t)getpid() << 44));
	pthread_mutex_init(&s->mu, NULL);
	uv_loop_init(&s->loop);
	uv_tcp_init(&s->loop, &s->listener);
	s->listener.data = s;
	struct sockaddr_storage addr;
	int rc = uv_ip4_addr(options->host, options->port, (struct sockaddr_in *)&addr);
	if (rc != 0) {
		rc = uv_ip6_addr(options->host, options->port, (struct sockaddr_in6 *)&addr);
	}
	if (rc == 0) {
		rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0);
	}
	if (rc == 0) {
		rc = uv_listen((uv_stream_t *)&s->listener, 128, on_connection);
	}
	if (rc != 0) {
		fprintf(stderr, "keel broker: cannot listen on %s:%u: %s\n", options->host,
		        options->port, uv_strerror(rc));
		uv_close((uv_handle_t *)&s->listener, NULL);
		uv_run(&s->loop, UV_RUN_DEFAULT);
		uv_loop_close(&s->loop);
		broker_core_close(&s->core);
		pthread_mutex_destroy(&s->mu);
		free(s);
		return NULL;
	}
	uv_async_init(&s->loop, &s->wakeup, on_wakeup);
	s->wakeup.data = s;
	uv_prepare_init(&s->loop, &s->prepare);
	s->prepare.data = s;
	uv_prepare_start(&s->prepare, on_prepare);
	uv_timer_init(&s->loop, &s->retention);
	s->retention.data = s;
	uv_timer_start(&s->retention, retention_due, (uint64_t)s->opt.retention_check_ms, 0);
	s->hw = broker_hw_writer_start(&s->loop, &s->core, &s->sync_in_flight,
	                               s->opt.hw_checkpoint_ms);
	KEEL_ASSERT(s->hw != NULL);
	uv_timer_init(&s->loop, &s->group_timer);
	s->group_timer.data = s;
	uv_timer_start(&s->group_timer, group_tick, GROUP_TICK_MS, GROUP_TICK_MS);
	s->broker_epoch = -1;
	s->fetchers = broker_fetchers_new(&s->loop, &s->core, &s->sync_in_flight, options->fetch_tls);
	if (s->fetchers != NULL && options->replica_sasl_password != NULL) {
		broker_fetchers_set_sasl(s->fetchers, BROKER_REPLICA_SASL_USER,
		                         options->replica_sasl_password);
	}
	KEEL_ASSERT(s->fetchers != NULL);
	uv_timer_init(&s->loop, &s->isr_timer);
	s->isr_timer.data = s;
	uv_timer_start(&s->isr_timer, isr_check, ISR_CHECK_MS, ISR_CHECK_MS);
	if (options->metrics_port != 0) {
		char listen[300], err[256];
		snprintf(listen, sizeof(listen), "%s:%u", options->host, options->metrics_port);
		if (http_server_start(&s->http, &s->loop, listen, metrics_handler, s, err,
		                      sizeof(err)) != KEEL_OK) {
			KEEL_WARN("no metrics endpoint on %s: %s", listen, err);
		} else {
			s->http_running = true;
			struct http_limits hl = {16, 10000, 10000, NULL};
			http_server_set_limits(&s->http, &hl);
			KEEL_INFO("metrics on http://%s/metrics", listen);
		}
	}
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	rc = pthread_create(&s->thread, NULL, server_thread, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	KEEL_ASSERT(rc == 0);
	KEEL_INFO("serving Kafka clients on %s:%u", options->host, options->port);
	return s;
}

void broker_server_offer_image(struct broker_server *s, const struct meta_image *img)
{
	struct meta_image *copy = malloc(sizeof(*copy));
	if (copy == NULL) {
		return;
	}
	meta_image_init(copy, &img->limits);
	if (meta_image_clone(copy, img) != KEEL_OK) {
		meta_image_close(copy);
		free(copy);
		return;
	}
	pthread_mutex_lock(&s->mu);
	struct meta_image *old = s->offered;
	s->offered = copy;
	pthread_mutex_unlock(&s->mu);
	if (old != NULL) {
		meta_image_close(old);
		free(old);
	}
	uv_async_send(&s->wakeup);
}

void broker_server_stop(struct broker_server *s)
{
	if (s == NULL) {
		return;
	}
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_mutex_unlock(&s->mu);
	uv_async_send(&s->wakeup);
	pthread_join(s->thread, NULL);
	KEEL_INFO("served %" PRIu64 " connections; %" PRIu64 " produce requests acknowledged "
	          "after %" PRIu64 " group syncs; fetched %" PRIu64
	          " record bytes with sendfile, %" PRIu64 " copied; %" PRIu64
	          " group offset commits acknowledged; %" PRIu64
	          " offsets-partition compactions cut %" PRIu64 " segments",
	          s->conn_count, s->acked_produces, s->sync_seq, s->sendfile_bytes,
	          s->copied_bytes, s->group_commits, s->core.groups->compactions,
	          s->core.groups->compacted_segments);
	if (s->core.duplicates > 0) {
		KEEL_INFO("answered %" PRIu64
		          " retried idempotent batches with their first offsets",
		          s->core.duplicates);
	}
	if (s->core.refused_after > 0) {
		KEEL_INFO("refused %" PRIu64 " idempotent batches for too few in-sync replicas"
		          " behind a batch refused so",
		          s->core.refused_after);
	}
	struct broker_fetcher_totals ft;
	broker_fetchers_totals(s->fetchers, &ft);
	const struct broker_replication_stats *rs = &s->core.stats;
	KEEL_INFO("replication: %" PRIu64 " fetches and %" PRIu64
	          " epoch requests to leaders, %" PRIu64
	          " record bytes appended as follower, %" PRIu64 " truncations; %" PRIu64
	          " follower fetches served; %" PRIu64 " acks=all waits; ISR shrinks asked %" PRIu64
	          ", expands %" PRIu64,
	          ft.fetches, ft.epoch_requests, rs->follower_bytes, rs->truncations,
	          rs->follower_fetches, s->stats.acks_all_waits, rs->isr_shrinks, rs->isr_expands);
	if (s->core.leader_throttled_bytes > 0) {
		KEEL_INFO("sent %" PRIu64 " record bytes to followers under the leader throttle",
		          s->core.leader_throttled_bytes);
	}
	uv_loop_close(&s->loop);
	broker_fetchers_free(s->fetchers);
	if (s->offered != NULL) {
		meta_image_close(s->offered);
		free(s->offered);
	}
	/* Jobs the controller thread never took (it has stopped). */
	for (struct broker_admin_job *j = s->admin_out, *next; j != NULL; j = next) {
		next = j->next;
		keel_wbuf_free(&j->body);
		free(j);
	}
	broker_hw_writer_finish(s->hw); /* a clean stop: the newest high watermarks */
	broker_core_close(&s->core);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
