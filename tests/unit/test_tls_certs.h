/*
 * test_tls_certs.h — throwaway certificates for the TLS tests (unit and
 * fuzz): a P-256 key and a certificate for a CN (O=keel-test), self-signed
 * (a CA) or signed by a CA, written as PEM files into a directory. Every
 * function returns false on a failure, which the caller asserts.
 */
#ifndef KEEL_TEST_TLS_CERTS_H
#define KEEL_TEST_TLS_CERTS_H

#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

struct test_cert {
	EVP_PKEY *key;
	X509 *x509;
	char cert_path[160];
	char key_path[160];
};

static inline bool test_cert_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	bool ok = ext != NULL && X509_add_ext(x, ext, -1) == 1;
	X509_EXTENSION_free(ext);
	return ok;
}

static inline bool test_cert_write(const struct test_cert *c)
{
	FILE *f = fopen(c->cert_path, "w");
	bool ok = f != NULL && PEM_write_X509(f, c->x509) == 1;
	if (f != NULL) {
		fclose(f);
	}
	f = fopen(c->key_path, "w");
	ok = ok && f != NULL && PEM_write_PrivateKey(f, c->key, NULL, NULL, 0, NULL, NULL) == 1;
	if (f != NULL) {
		fclose(f);
	}
	return ok;
}

/* Makes `c` for `cn`, signed by `ca` (self-signed when NULL), as
 * DIR/NAME.crt and DIR/NAME.key. */
static inline bool test_cert_make(struct test_cert *c, const char *dir, const char *name,
                                  const char *cn, const struct test_cert *ca)
{
	static long serial = 1;
	c->key = EVP_EC_gen("P-256");
	c->x509 = X509_new();
	if (c->key == NULL || c->x509 == NULL) {
		return false;
	}
	X509 *x = c->x509;
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600L * 24);
	X509_NAME *subject = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_ASC, (const unsigned char *)"keel-test",
	                           -1, -1, 0);
	X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1,
	                           0);
	X509 *issuer = ca != NULL ? ca->x509 : x;
	X509_set_issuer_name(x, X509_get_subject_name(issuer));
	X509_set_pubkey(x, c->key);
	if (!test_cert_ext(x, issuer, NID_basic_constraints,
	                   ca == NULL ? "critical,CA:TRUE" : "CA:FALSE")) {
		return false;
	}
	if (ca != NULL &&
	    !test_cert_ext(x, issuer, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost")) {
		return false;
	}
	if (X509_sign(x, ca != NULL ? ca->key : c->key, EVP_sha256()) <= 0) {
		return false;
	}
	snprintf(c->cert_path, sizeof(c->cert_path), "%s/%s.crt", dir, name);
	snprintf(c->key_path, sizeof(c->key_path), "%s/%s.key", dir, name);
	return test_cert_write(c);
}

/* Removes the files and frees the key and certificate. */
static inline void test_cert_free(struct test_cert *c)
{
	unlink(c->cert_path);
	unlink(c->key_path);
	X509_free(c->x509);
	EVP_PKEY_free(c->key);
}

#endif
