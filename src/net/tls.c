/*
 * tls.c — TLS sessions over OpenSSL memory BIOs (see tls.h).
 *
 * Each session owns two memory BIOs: `in` holds ciphertext from the network
 * that OpenSSL has not consumed yet, `out` holds ciphertext OpenSSL produced
 * (handshake messages, records, alerts) that conn.c has not sent yet. The
 * handshake runs inside SSL_read: the first reads drive it, and the session
 * turns OPEN once OpenSSL reports it finished.
 *
 * OpenSSL's error queue is per thread; every call here clears it first and
 * turns what it finds into the session's error text, so a failure is
 * reported on the connection that caused it and nowhere else.
 */
#include "net/tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "base/assert.h"

struct net_tls_ctx {
	SSL_CTX *ssl_ctx;
	bool has_ca;
	bool server;
};

struct net_tls {
	struct net_tls_ctx *ctx;
	SSL *ssl;
	BIO *in;  /* network -> OpenSSL (owned by ssl) */
	BIO *out; /* OpenSSL -> network (owned by ssl) */
	enum net_tls_state state;
	char error[192];
};

/* The last OpenSSL error as text, or `fallback`. */
static void openssl_reason(char *buf, size_t size, const char *fallback)
{
	unsigned long e = ERR_peek_last_error();
	if (e == 0) {
		snprintf(buf, size, "%s", fallback);
		return;
	}
	const char *reason = ERR_reason_error_string(e);
	if (reason != NULL) {
		snprintf(buf, size, "%s", reason);
	} else {
		ERR_error_string_n(e, buf, size);
	}
}

static enum keel_err ctx_fail(SSL_CTX *c, const char *what, const char *file, char *err,
                              size_t err_size)
{
	char reason[128];
	openssl_reason(reason, sizeof(reason), "unknown OpenSSL error");
	snprintf(err, err_size, "TLS: %s %s: %s", what, file != NULL ? file : "", reason);
	ERR_clear_error();
	SSL_CTX_free(c);
	return KEEL_CONFIG;
}

enum keel_err net_tls_ctx_new(struct net_tls_ctx **out, const struct net_tls_options *opt,
                              char *err, size_t err_size)
{
	*out = NULL;
	ERR_clear_error();
	bool has_ca = opt->ca_file != NULL && opt->ca_file[0] != '\0';
	if (!opt->server && !has_ca) {
		snprintf(err, err_size, "TLS: a dialing side needs a CA file to verify the server");
		return KEEL_CONFIG;
	}
	if (opt->require_peer_cert && !has_ca) {
		snprintf(err, err_size, "TLS: requiring peer certificates needs a CA file");
		return KEEL_CONFIG;
	}
	SSL_CTX *c = SSL_CTX_new(opt->server ? TLS_server_method() : TLS_client_method());
	if (c == NULL) {
		return ctx_fail(NULL, "cannot make a context", NULL, err, err_size);
	}
	if (SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION) != 1) {
		return ctx_fail(c, "cannot require TLS 1.2", NULL, err, err_size);
	}
	SSL_CTX_set_mode(c, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (opt->cert_file != NULL && opt->cert_file[0] != '\0') {
		if (SSL_CTX_use_certificate_chain_file(c, opt->cert_file) != 1) {
			return ctx_fail(c, "cannot load certificate", opt->cert_file, err,
			                err_size);
		}
		if (opt->key_file == NULL ||
		    SSL_CTX_use_PrivateKey_file(c, opt->key_file, SSL_FILETYPE_PEM) != 1) {
			return ctx_fail(c, "cannot load private key", opt->key_file, err, err_size);
		}
		if (SSL_CTX_check_private_key(c) != 1) {
			return ctx_fail(c, "the key does not match the certificate", opt->key_file,
			                err, err_size);
		}
	} else if (opt->server) {
		snprintf(err, err_size, "TLS: a listening side needs a certificate and a key");
		SSL_CTX_free(c);
		return KEEL_CONFIG;
	}
	int verify = SSL_VERIFY_NONE;
	if (has_ca) {
		if (SSL_CTX_load_verify_locations(c, opt->ca_file, NULL) != 1) {
			return ctx_fail(c, "cannot load CA file", opt->ca_file, err, err_size);
		}
		if (opt->server) {
			/* Ask for a client certificate; a bad one fails the handshake. */
			STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(opt->ca_file);
			if (names != NULL) {
				SSL_CTX_set_client_CA_list(c, names);
			}
		}
		verify = SSL_VERIFY_PEER;
		if (opt->require_peer_cert) {
			verify |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
		}
	}
	SSL_CTX_set_verify(c, verify, NULL);
	struct net_tls_ctx *ctx = calloc(1, sizeof(*ctx));
	if (ctx == NULL) {
		SSL_CTX_free(c);
		return KEEL_NOMEM;
	}
	ctx->ssl_ctx = c;
	ctx->has_ca = has_ca;
	ctx->server = opt->server;
	*out = ctx;
	return KEEL_OK;
}

void net_tls_ctx_free(struct net_tls_ctx *ctx)
{
	if (ctx == NULL) {
		return;
	}
	SSL_CTX_free(ctx->ssl_ctx);
	free(ctx);
}

/* Marks the session FAILED with a reason built from OpenSSL's errors and
 * the certificate verification result. */
static enum keel_err fail(struct net_tls *t, const char *what)
{
	long verify = SSL_get_verify_result(t->ssl);
	enum keel_err rc = KEEL_PROTO;
	char reason[128];
	openssl_reason(reason, sizeof(reason), "connection not TLS or closed mid-handshake");
	if (verify != X509_V_OK) {
		snprintf(t->error, sizeof(t->error), "%s: certificate refused: %s", what,
		         X509_verify_cert_error_string(verify));
		rc = KEEL_AUTH;
	} else if (ERR_GET_REASON(ERR_peek_last_error()) ==
	           SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
		snprintf(t->error, sizeof(t->error), "%s: no certificate presented", what);
		rc = KEEL_AUTH;
	} else {
		snprintf(t->error, sizeof(t->error), "%s: %s", what, reason);
	}
	ERR_clear_error();
	t->state = NET_TLS_FAILED;
	return rc;
}

struct net_tls *net_tls_new(struct net_tls_ctx *ctx)
{
	struct net_tls *t = calloc(1, sizeof(*t));
	if (t == NULL) {
		return NULL;
	}
	ERR_clear_error();
	t->ctx = ctx;
	t->ssl = SSL_new(ctx->ssl_ctx);
	t->in = BIO_new(BIO_s_mem());
	t->out = BIO_new(BIO_s_mem());
	if (t->ssl == NULL || t->in == NULL || t->out == NULL) {
		BIO_free(t->in);
		BIO_free(t->out);
		SSL_free(t->ssl);
		free(t);
		ERR_clear_error();
		return NULL;
	}
	/* An empty `in` means "no data yet", not end of file. */
	BIO_set_mem_eof_return(t->in, -1);
	SSL_set_bio(t->ssl, t->in, t->out);
	t->state = NET_TLS_HANDSHAKE;
	if (ctx->server) {
		SSL_set_accept_state(t->ssl);
	} else {
		SSL_set_connect_state(t->ssl);
		int r = SSL_do_handshake(t->ssl); /* the ClientHello, into `out` */
		if (r != 1 && SSL_get_error(t->ssl, r) != SSL_ERROR_WANT_READ) {
			fail(t, "TLS handshake failed");
		}
	}
	return t;
}

void net_tls_free(struct net_tls *t)
{
	if (t == NULL) {
		return;
	}
	SSL_free(t->ssl); /* frees both BIOs */
	free(t);
}

enum net_tls_state net_tls_state(const struct net_tls *t)
{
	return t->state;
}

const char *net_tls_error(const struct net_tls *t)
{
	return t->error;
}

enum keel_err net_tls_feed(struct net_tls *t, const uint8_t *data, size_t size)
{
	KEEL_ASSERT(size <= (size_t)INT32_MAX);
	if (size == 0) {
		return KEEL_OK;
	}
	if (BIO_write(t->in, data, (int)size) != (int)size) {
		ERR_clear_error();
		return KEEL_NOMEM;
	}
	return KEEL_OK;
}

enum keel_err net_tls_read(struct net_tls *t, uint8_t *dst, size_t cap, size_t *got)
{
	*got = 0;
	if (t->state == NET_TLS_FAILED) {
		return KEEL_PROTO;
	}
	if (t->state == NET_TLS_CLOSED) {
		return KEEL_SHUTDOWN;
	}
	ERR_clear_error();
	if (t->state == NET_TLS_HANDSHAKE) {
		int r = SSL_do_handshake(t->ssl);
		if (r != 1) {
			int e = SSL_get_error(t->ssl, r);
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
				return KEEL_OK;
			}
			return fail(t, "TLS handshake failed");
		}
		t->state = NET_TLS_OPEN;
	}
	if (cap == 0) {
		return KEEL_OK;
	}
	size_t n = 0;
	int r = SSL_read_ex(t->ssl, dst, cap, &n);
	if (r == 1) {
		*got = n;
		return KEEL_OK;
	}
	int e = SSL_get_error(t->ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		return KEEL_OK;
	}
	if (e == SSL_ERROR_ZERO_RETURN) {
		t->state = NET_TLS_CLOSED;
		ERR_clear_error();
		return KEEL_SHUTDOWN;
	}
	return fail(t, "TLS record refused");
}

enum keel_err net_tls_write(struct net_tls *t, const uint8_t *data, size_t size)
{
	if (t->state != NET_TLS_OPEN) {
		return KEEL_INVAL;
	}
	ERR_clear_error();
	while (size > 0) {
		size_t n = 0;
		if (SSL_write_ex(t->ssl, data, size, &n) != 1) {
			fail(t, "TLS write failed");
			return KEEL_NOMEM;
		}
		data += n;
		size -= n;
	}
	return KEEL_OK;
}

void net_tls_shutdown(struct net_tls *t)
{
	if (t->state == NET_TLS_OPEN) {
		ERR_clear_error();
		(void)SSL_shutdown(t->ssl);
		ERR_clear_error();
	}
}

size_t net_tls_pending_out(const struct net_tls *t)
{
	return BIO_ctrl_pending(t->out);
}

size_t net_tls_take_out(struct net_tls *t, uint8_t *dst, size_t cap)
{
	size_t n = 0;
	if (cap == 0 || BIO_ctrl_pending(t->out) == 0) {
		return 0;
	}
	if (BIO_read_ex(t->out, dst, cap, &n) != 1) {
		ERR_clear_error();
		return 0;
	}
	return n;
}

bool net_tls_peer_subject(const struct net_tls *t, char *buf, size_t size)
{
	if (t->state != NET_TLS_OPEN || !t->ctx->has_ca || size == 0) {
		return false;
	}
	X509 *cert = SSL_get0_peer_certificate(t->ssl);
	if (cert == NULL || SSL_get_verify_result(t->ssl) != X509_V_OK) {
		return false;
	}
	BIO *b = BIO_new(BIO_s_mem());
	if (b == NULL) {
		ERR_clear_error();
		return false;
	}
	/* RFC 2253, as Java's X500Principal.getName(); UTF-8 kept as is. */
	unsigned long flags = XN_FLAG_RFC2253 & ~(unsigned long)ASN1_STRFLGS_ESC_MSB;
	bool ok = X509_NAME_print_ex(b, X509_get_subject_name(cert), 0, flags) >= 0;
	size_t n = 0;
	if (ok && BIO_read_ex(b, buf, size - 1, &n) == 1 && BIO_ctrl_pending(b) == 0) {
		buf[n] = '\0';
	} else {
		ok = false; /* empty or longer than buf: not an identity we can use */
	}
	BIO_free(b);
	ERR_clear_error();
	return ok && n > 0;
}

const char *net_tls_version(const struct net_tls *t)
{
	return t->state == NET_TLS_OPEN ? SSL_get_version(t->ssl) : "";
}
