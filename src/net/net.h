/*
 * net.h — framed TCP connections on a libuv loop.
 *
 * Every connection keel keeps (ZooKeeper clients, Raft peers, admin tools)
 * carries frames: a 4-byte big-endian length, optionally a 4-byte CRC-32C of
 * the payload (peer links), then the payload. This module owns the sockets,
 * the read buffer that reassembles frames and the output buffers; callers
 * see whole frames and append whole frames.
 *
 * Writes are batched: frames appended during one loop iteration go out in
 * one write() at the end of it (a uv_check handle flushes every dirty
 * connection). While a write is in flight, new frames collect in a second
 * buffer. Output beyond `max_output_bytes` means the peer is not reading:
 * the connection is closed rather than buffering without bound.
 *
 * Lifetime: the caller allocates `struct net_conn` (usually inside its own
 * struct) and keeps it alive until ops->on_close has run; on_close is the
 * last callback and runs exactly once for a started connection, after which
 * the memory may be freed. net_conn_close() may be called from any callback.
 *
 *   INIT --connect/accept--> OPEN --close/error/EOF--> CLOSING --uv--> CLOSED
 *                                                        (on_close runs)
 *
 * TLS (cfg.tls, net/tls.h): the same frames travel inside a TLS session.
 * Frames appended before the handshake completes wait for it; a handshake
 * that fails (not TLS, a refused certificate) closes only that connection,
 * with a log line naming the remote address and the reason.
 */
#ifndef KEEL_NET_NET_H
#define KEEL_NET_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/buf.h"
#include "base/err.h"

struct net_conn;

/* Per-loop state: the flush hook and traffic counters. */
struct net_loop {
	uv_loop_t *loop;
	uv_check_t flush_check;
	uv_idle_t flush_idle;
	struct net_conn *dirty; /* connections with output to flush */
	uint64_t bytes_in;
	uint64_t bytes_out;
	uint64_t frames_in;
	uint64_t frames_out;
	uint64_t writes; /* write calls: frames_out / writes is the batching factor */
	struct net_conn *deferred; /* connections with frames left for the next turn */
	uint64_t deferrals;        /* times a connection used up its turn */
	uint8_t *tls_rbuf;         /* ciphertext read buffer shared by TLS connections */
	uint64_t tls_failures;     /* TLS sessions closed by a failed handshake or record */
	uint64_t tls_log_window_ms;
	uint32_t tls_logged;       /* failure lines logged in the current second */
};

enum keel_err net_loop_init(struct net_loop *nl, uv_loop_t *loop);
/* Stops the flush hook; call before closing the loop. */
void net_loop_close(struct net_loop *nl);

struct net_conn_ops {
	/* A complete frame (payload only; the length/CRC are stripped). The
	 * bytes are valid only during the call. Return false to stop reading
	 * further frames already buffered (the callback closed or paused). */
	bool (*on_frame)(struct net_conn *conn, const uint8_t *payload, size_t size);
	/* Optional. Called once with the first 4 bytes of the stream when they
	 * are not a valid length (e.g. a ZooKeeper four-letter word). Return true
	 * if handled (the callback then owns the rest of the connection's life,
	 * typically writes a reply and closes). */
	bool (*on_bad_prefix)(struct net_conn *conn, const uint8_t prefix[4]);
	/* Last callback; `reason` is KEEL_OK for a local close or EOF. */
	void (*on_close)(struct net_conn *conn, enum keel_err reason);
};

struct net_byte_budget;
struct net_tls_ctx;
struct net_tls;

struct net_conn_config {
	size_t max_frame_bytes;  /* larger frames close the connection */
	size_t max_output_bytes; /* unsent output beyond this closes it */
	bool checksummed;        /* frames carry a CRC-32C after the length */
	/* Shared caps on reassembly-buffer bytes and on unsent output bytes
	 * (net/limits.h); NULL: none. */
	struct net_byte_budget *read_budget;
	struct net_byte_budget *output_budget;
	/* Fairness: one dispatch (a turn) hands on at most this many frames,
	 * or stops once the replies it produced reach this many bytes; the
	 * rest waits, with reading stopped, for the next loop iteration so
	 * that every other connection is served in between. 0: no cap. */
	uint32_t max_frames_per_turn;
	size_t max_output_per_turn;
	/* TLS context (net/tls.h), shared by the connections of a listener or a
	 * dialer and outliving them; NULL: plaintext. */
	struct net_tls_ctx *tls;
};

struct net_conn {
	uv_tcp_t tcp;
	uv_connect_t connect_req;
	uv_write_t write_req;
	struct net_loop *nl;
	const struct net_conn_ops *ops;
	void *user;
	struct net_conn_config cfg;
	/* Reassembly buffer: [0, rlen) holds received, unparsed bytes. It
	 * grows only as bytes arrive (never to a length a header announces). */
	uint8_t *rbuf;
	size_t rlen;
	size_t rcap;
	uint64_t partial_since_ms; /* loop time an unfinished frame began; 0: none */
	bool over_budget;          /* the read budget refused to grow rbuf */
	size_t output_counted;     /* unsent output counted in cfg.output_budget */
	bool deferred;             /* in nl->deferred: its turn is used up */
	struct net_conn *next_deferred;
	/* out[active] collects new frames; out[!active] is being written. */
	struct keel_wbuf out[2];
	int active;
	bool writing;
	bool dirty;
	bool reading;
	bool paused;
	bool first_bytes_checked;
	bool closing;
	bool started;
	bool connected;
	bool in_dispatch;
	enum keel_err close_reason;
	struct net_conn *next_dirty;
	void (*on_connect)(struct net_conn *conn, enum keel_err err);
	char peer_addr[64]; /* "host:port" of the remote end, for logs */
	struct net_tls *tls; /* NULL on a plaintext connection */
	bool tls_shutdown_sent;
};

/* Accepts a pending connection from `server` into `conn` and starts reading. */
enum keel_err net_conn_accept(struct net_conn *conn, struct net_loop *nl, uv_stream_t *server,
			      const struct net_conn_config *cfg, const struct net_conn_ops *ops,
			      void *user);

/* Connects to addr; on_connect runs with KEEL_OK (reading has started) or an
 * error (then on_close follows). */
enum keel_err net_conn_connect(struct net_conn *conn, struct net_loop *nl,
			       const struct sockaddr *addr, const struct net_conn_config *cfg,
			       const struct net_conn_ops *ops, void *user,
			       void (*on_connect)(struct net_conn *conn, enum keel_err err));

/* Starts writing one frame: returns the writer positioned after the frame
 * header; append the payload, then call net_conn_frame_end(). Returns NULL
 * when the connection is closing. Frames may not nest. */
struct keel_wbuf *net_conn_frame_begin(struct net_conn *conn, size_t *mark);
void net_conn_frame_end(struct net_conn *conn, size_t mark);

/* Appends one whole frame. */
void net_conn_send(struct net_conn *conn, const void *payload, size_t size);

/* Appends raw bytes without framing (four-letter-word replies, HTTP). */
void net_conn_send_raw(struct net_conn *conn, const void *data, size_t size);

/* Closes after flushing what is buffered when `flush` is true. */
void net_conn_close(struct net_conn *conn, enum keel_err reason, bool flush);

/* Stops/resumes delivering frames (back-pressure). net_conn_resume may
 * deliver buffered frames before it returns; net_conn_resume_soon leaves
 * them to the check phase of the loop, for a caller that must not see
 * on_frame re-entered. */
void net_conn_pause(struct net_conn *conn);
void net_conn_resume(struct net_conn *conn);
void net_conn_resume_soon(struct net_conn *conn);

/* Bytes queued and not yet written. */
size_t net_conn_pending_output(const struct net_conn *conn);

/* Has an unfinished frame been waiting for its remaining bytes for
 * `timeout_ms` or more at loop time `now_ms`? (A paused connection's
 * buffered bytes are the server's delay, not the client's: never.) */
bool net_conn_frame_overdue(const struct net_conn *conn, uint64_t now_ms, uint64_t timeout_ms);

/* On a TLS connection whose far end presented a certificate verified
 * against the CA: its subject DN (RFC 2253) into buf, true. */
bool net_conn_tls_subject(const struct net_conn *conn, char *buf, size_t size);

/* "host:port" parsing (IPv4 dotted quad or a name resolved once, or [v6]:port). */
enum keel_err net_parse_addr(const char *text, struct sockaddr_storage *out);

/* Formats a sockaddr as "host:port". */
void net_format_addr(const struct sockaddr *sa, char *buf, size_t size);

/* Listens on "host:port" with on_connection(server, status) from libuv. */
enum keel_err net_listen(uv_tcp_t *server, uv_loop_t *loop, const char *addr,
			 uv_connection_cb on_connection, void *data, char *errbuf, size_t errsize);

#endif
