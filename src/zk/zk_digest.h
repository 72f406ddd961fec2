/*
 * zk_digest.h — the "digest" authentication scheme's identity computation.
 *
 * ZooKeeper's DigestAuthenticationProvider turns the auth data "user:password"
 * into the identity "user:" + base64(SHA-1("user:password")) (the user is the
 * text before the first ':'; data without ':' is its own user). ACLs name
 * these identities (scheme "digest"), and an authenticated connection carries
 * them. keel computes the same string; SHA-1 and base64 are implemented here
 * (pure functions of their input, no state).
 *
 * zk_digest_id() writes into caller memory; nothing is allocated.
 */
#ifndef KEEL_ZK_DIGEST_H
#define KEEL_ZK_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define ZK_SHA1_SIZE 20
/* base64 of 20 bytes: 28 characters (one '=' of padding). */
#define ZK_DIGEST_B64_SIZE 28

void zk_sha1(const void *data, size_t size, uint8_t out[ZK_SHA1_SIZE]);

/* Standard base64 with '=' padding; writes 4 * ceil(size / 3) bytes and
 * returns that count. */
size_t zk_base64_encode(const void *data, size_t size, char *out);

/* The digest identity for auth data `user_password` (size bytes):
 * user + ":" + base64(sha1(user_password)). `out` must have room for
 * zk_digest_id_size(size) bytes; returns the length written. */
size_t zk_digest_id(const char *user_password, size_t size, char *out);

static inline size_t zk_digest_id_size(size_t user_password_size)
{
	return user_password_size + 1 + ZK_DIGEST_B64_SIZE;
}

#endif
