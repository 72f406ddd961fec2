/*
 * tls.h — TLS over memory buffers (OpenSSL), for net_conn.
 *
 * A `net_tls` session never touches a socket: ciphertext from the network
 * goes in with net_tls_feed(), plaintext comes out of net_tls_read();
 * plaintext goes in with net_tls_write(), ciphertext for the network comes
 * out of net_tls_take_out(). conn.c moves the bytes between these calls and
 * libuv, so every user of net_conn gets TLS by setting cfg.tls; the unit
 * test drives two sessions against each other with no sockets at all.
 *
 *   HANDSHAKE --handshake done, certificate accepted--> OPEN
 *       |                                                 |
 *       +--bad record, not TLS, refused certificate--> FAILED (error says why)
 *
 * Only TLS 1.2 and newer. A context (`net_tls_ctx`) holds the certificate,
 * key and trusted CA of one listener or of one dialing side and is shared by
 * all of its sessions; it must outlive them.
 *
 * Certificates: with a CA, the far end's certificate is verified against it
 * (a certificate that does not verify fails the handshake). A server side
 * with `require_peer_cert` also refuses a far end that presents none; without
 * it, a client certificate is optional (ZooKeeper's ssl.clientAuth=want) and
 * net_tls_peer_subject() says whether one was verified.
 */
#ifndef KEEL_NET_TLS_H
#define KEEL_NET_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct net_tls_ctx;
struct net_tls;

struct net_tls_options {
	const char *cert_file;  /* PEM certificate (chain) presented to the far end */
	const char *key_file;   /* PEM private key of cert_file */
	const char *ca_file;    /* PEM CA(s) that far-end certificates must chain to; NULL: none */
	bool server;            /* accepting side */
	bool require_peer_cert; /* server side: refuse a far end without a certificate */
};

enum net_tls_state {
	NET_TLS_HANDSHAKE,
	NET_TLS_OPEN,
	NET_TLS_FAILED,
	NET_TLS_CLOSED, /* the far end sent close_notify: a clean end, like EOF */
};

/* Loads the files and makes a context. A client side needs ca_file (it
 * always verifies the server). On error writes why to err (which file, what
 * OpenSSL said) and returns KEEL_CONFIG. */
enum keel_err net_tls_ctx_new(struct net_tls_ctx **out, const struct net_tls_options *opt,
                              char *err, size_t err_size);
void net_tls_ctx_free(struct net_tls_ctx *ctx);

/* A new session in HANDSHAKE. A client session has its first handshake
 * message ready in net_tls_take_out() at once. NULL when out of memory. */
struct net_tls *net_tls_new(struct net_tls_ctx *ctx);
void net_tls_free(struct net_tls *t);

enum net_tls_state net_tls_state(const struct net_tls *t);

/* Why the session FAILED (static for the session's life; "" otherwise). */
const char *net_tls_error(const struct net_tls *t);

/* Ciphertext received from the network. KEEL_NOMEM if it cannot be kept. */
enum keel_err net_tls_feed(struct net_tls *t, const uint8_t *data, size_t size);

/* Advances the handshake and decrypts into dst (at most cap bytes); *got is
 * 0 when more ciphertext is needed. Returns KEEL_AUTH for a refused
 * certificate, KEEL_PROTO for anything else that failed the session (the
 * state is then FAILED: close the connection), KEEL_SHUTDOWN when the far
 * end closed the session cleanly (CLOSED: close as on EOF), KEEL_OK
 * otherwise. Call
 * again while *got == cap: more plaintext may be waiting. */
enum keel_err net_tls_read(struct net_tls *t, uint8_t *dst, size_t cap, size_t *got);

/* Encrypts plaintext; only in OPEN (KEEL_INVAL otherwise). The ciphertext
 * waits in net_tls_take_out(). */
enum keel_err net_tls_write(struct net_tls *t, const uint8_t *data, size_t size);

/* Queues a close_notify alert (best effort, OPEN only). */
void net_tls_shutdown(struct net_tls *t);

/* Ciphertext waiting to be sent, and taking up to cap bytes of it. */
size_t net_tls_pending_out(const struct net_tls *t);
size_t net_tls_take_out(struct net_tls *t, uint8_t *dst, size_t cap);

/* In OPEN, when the far end presented a certificate that verified against
 * the CA: writes its subject distinguished name as RFC 2253 text (most
 * specific first, e.g. "CN=client,OU=ops,O=Example") and returns true. */
bool net_tls_peer_subject(const struct net_tls *t, char *buf, size_t size);

/* The negotiated protocol, e.g. "TLSv1.3" ("" before OPEN). */
const char *net_tls_version(const struct net_tls *t);

#endif
