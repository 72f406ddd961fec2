/*
 * admin_client.h — the CLI's side of the admin protocol (node/admin.h):
 * blocking socket calls with a deadline, one request at a time.
 */
#ifndef KEEL_CLI_ADMIN_CLIENT_H
#define KEEL_CLI_ADMIN_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Connects to HOST:PORT within timeout_ms; returns an fd or -1 (errno). */
int cli_connect(const char *addr, int timeout_ms);

/* Sends one length-prefixed frame / receives one (malloc'd, caller frees).
 * Receive fails on timeout or a frame over max_size. */
int cli_send_frame(int fd, const void *payload, size_t size);
int cli_recv_frame(int fd, uint8_t **payload, size_t *size, size_t max_size, int timeout_ms);

struct admin_reply {
	enum keel_err err;
	char message[512];
	uint8_t *body; /* malloc'd; free() it */
	size_t body_size;
};

struct peer_auth_keys;

/* How an operator proves itself (node/admin.h): the cluster secret, or a
 * "super:PASSWORD" digest auth; both NULL: no credential. */
struct admin_credential {
	const struct peer_auth_keys *keys;
	const char *digest_auth;
};

/* One admin request to one server, on a connection that first proves
 * `cred` (may be NULL). Returns 0 when a reply arrived (see reply->err;
 * KEEL_AUTH when the credential was refused), -1 on a connection problem
 * (message in reply->message). */
int admin_call(const char *addr, const struct admin_credential *cred, uint8_t op,
	       const void *body, size_t body_size, int timeout_ms, struct admin_reply *reply);

/* Splits "a,b,c" into at most max entries (in place). */
size_t cli_split_servers(char *list, char **out, size_t max);

int cli_status(int argc, char **argv);
int cli_members(int argc, char **argv);
int cli_leader(int argc, char **argv);
int cli_snapshot(int argc, char **argv);

#endif
