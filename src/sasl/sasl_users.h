/*
 * sasl_users.h — the user table behind SASL (DIGEST-MD5 for ZooKeeper
 * clients, PLAIN and SCRAM for Kafka listeners).
 *
 * Two text formats, parsed from a caller's buffer (the shell reads the
 * file; this layer does no I/O):
 *
 *   users file   one `NAME:PASSWORD` a line; blank lines and lines that
 *                start with '#' are skipped. The password is everything
 *                after the first ':' to the end of the line (a trailing
 *                '\r' is dropped), so it may hold ':' itself.
 *
 *   JAAS file    ZooKeeper's: the section named `section` (ZooKeeper's
 *                default is "Server") with
 *                `org.apache.zookeeper.server.auth.DigestLoginModule required
 *                user_NAME="PASSWORD" ...;`. Other sections are skipped;
 *                `//` and C comments are allowed, as in Java's parser.
 *
 * Limits: SASL_USERS_MAX users, names up to SASL_NAME_MAX bytes, passwords
 * up to SASL_PASSWORD_MAX; a name is non-empty and has no ':', control
 * character or space. Anything over a limit, malformed, or a name given
 * twice is an error naming the line.
 *
 * The table owns its copies; sasl_users_close frees them (and wipes the
 * passwords).
 */
#ifndef KEEL_SASL_USERS_H
#define KEEL_SASL_USERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define SASL_USERS_MAX 10000u
#define SASL_NAME_MAX 255u
#define SASL_PASSWORD_MAX 1024u

struct sasl_user {
	char *name; /* NUL-terminated; the same block holds the password */
	size_t name_size;
	char *password; /* NUL-terminated */
	size_t password_size;
};

struct sasl_users {
	struct sasl_user *users;
	uint32_t count;
	uint32_t capacity;
};

void sasl_users_init(struct sasl_users *users);
void sasl_users_close(struct sasl_users *users);

/* Adds one user (copies both). KEEL_EXIST if the name is taken, KEEL_INVAL
 * if the name or password breaks the rules above, KEEL_LIMIT past
 * SASL_USERS_MAX. */
enum keel_err sasl_users_add(struct sasl_users *users, const char *name, size_t name_size,
			     const char *password, size_t password_size);

/* The users file format. On error writes a message to err. */
enum keel_err sasl_users_parse(struct sasl_users *users, const char *text, size_t size,
			       char *err, size_t err_size);

/* The JAAS format; `section` is the login context ("Server"). A file
 * without that section, or whose section uses another login module, is an
 * error. */
enum keel_err sasl_users_parse_jaas(struct sasl_users *users, const char *text, size_t size,
				    const char *section, char *err, size_t err_size);

/* The user of that name, or NULL. Valid until the table is closed. */
const struct sasl_user *sasl_users_find(const struct sasl_users *users, const void *name,
					size_t name_size);

/* Constant-time comparison of equal-length byte strings (false when the
 * lengths differ). */
bool sasl_bytes_equal(const void *a, size_t a_size, const void *b, size_t b_size);

#endif
