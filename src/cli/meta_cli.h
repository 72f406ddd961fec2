/*
 * meta_cli.h — what `keel broker`, `keel brokers` and `keel topics` share:
 * a ZooKeeper session (src/client, kc_*) to the servers, and the keel
 * extension requests of docs/controller.md sent over it.
 *
 * A request is opcode META_CLI_OPCODE_BASE + enum meta_api, body = the
 * encoded meta request (meta/proto.h). ReplyHeader.err is a ZooKeeper
 * error only when the server could not read the body (ZMARSHALLINGERROR,
 * ZUNIMPLEMENTED for a newer body version) or the client failed (connection
 * loss, timeout); otherwise it is 0 and the response body carries Kafka's
 * error codes.
 *
 * Memory: a reply body points into the client's receive buffer and lives
 * until the next kc_* call on that client (kc.h's rule); decode it first.
 */
#ifndef KEEL_CLI_META_CLI_H
#define KEEL_CLI_META_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "client/kc.h"
#include "meta/proto.h"
#include "node/peer_auth.h"

#define META_CLI_OPCODE_BASE 1000

/* Sets up a session to `servers` ("host:port,...") and connects. Returns
 * ZK_OK, or a ZooKeeper error with a message written to stderr prefixed
 * with `who`; the client must be closed with kc_close() either way when
 * *initialized is set. */
int32_t meta_cli_open(struct kc_client *c, bool *initialized, const char *who,
		      const char *servers, int32_t session_timeout_ms, int32_t call_timeout_ms);

/* An operator's credential on the command line: --cluster-secret-file FILE
 * (the servers' secret) or --auth super:PASSWORD. */
struct meta_cli_credential {
	struct peer_auth_keys keys; /* count 0: none */
	const char *digest;         /* NULL: none */
};

/* If argv[*i] is one of the credential options (with its value), takes it
 * (advancing *i) and returns 1; 0 when it is not; -1 after printing why the
 * secret file cannot be used. */
int meta_cli_credential_arg(int argc, char **argv, int *i, struct meta_cli_credential *cred,
			    const char *who);

/* meta_cli_prove with the credential; prints why with `who` and returns
 * false when the servers refuse it or cannot be asked. */
bool meta_cli_prove_credential(struct kc_client *c, const struct meta_cli_credential *cred,
			       const char *who);

/* Proves the cluster credential on the connected session (addauth "keel"
 * with node/peer_auth.h's session MAC), which the servers ask before
 * registrations, heartbeats, AlterPartition, unregistering a broker and
 * ElectLeaders (core/controller.h); kc re-sends it after a reconnect of the
 * same session. `digest` ("super:PASSWORD") instead authenticates as
 * ZooKeeper's super. Either may be NULL. Returns ZK_OK or the error
 * (ZK_AUTH_FAILED: the servers refused it, and the session ended). */
int32_t meta_cli_prove(struct kc_client *c, const struct peer_auth_keys *keys,
		       const char *digest);

/* Sends one request whose body is in `req` and waits for its reply. */
int32_t meta_cli_call(struct kc_client *c, enum meta_api api, const struct keel_wbuf *req,
		      struct kc_raw_reply *reply);

/* Decodes a controller response into `out` and reports its error (the
 * first item's, for list APIs); false when the body does not decode. */
typedef bool (*meta_cli_decode_fn)(const uint8_t *body, size_t size, struct keel_arena *arena,
				   void *out, int16_t *error);

/* Sends a controller request until a controller answers it (retrying on
 * NOT_CONTROLLER, connection loss and timeouts) or `timeout_ms` passes.
 * Returns 0 with the decoded response in `out` and its error in *error,
 * 1 on failure (message on stderr prefixed with `who`). */
int meta_cli_controller_call(struct kc_client *c, const char *who, enum meta_api api,
			     const struct keel_wbuf *req, int32_t timeout_ms,
			     meta_cli_decode_fn decode, struct keel_arena *arena, void *out,
			     int16_t *error);

/* DescribeCluster (one topic, or every topic when `topic` is NULL) after a
 * sync, so the answer is at least as new as anything this session did.
 * Returns 0, or 1 with a message prefixed with `who` on stderr. The
 * response points into `arena` and the client's buffer (valid until the
 * next call on c). */
int meta_cli_describe(struct kc_client *c, const char *who, const char *topic, bool brokers,
		      bool topics, struct keel_arena *arena,
		      struct meta_describe_cluster_response *out);

/* Waits `ms` while keeping the session alive (kc_poll). */
void meta_cli_sleep(struct kc_client *c, int ms);

/* Monotonic milliseconds. */
uint64_t meta_cli_now_ms(void);

#endif
