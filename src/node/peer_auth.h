/*
 * peer_auth.h — proving membership of a cluster: the cluster secret, the
 * peer handshake (mutual HMAC-SHA256 challenge-response) and the operator
 * proof for admin requests.
 *
 * The secret. `keel secret generate` prints 32 random bytes as 64 hex
 * digits. A secret file holds one secret per line (blank lines and lines
 * starting with '#' are skipped): the first is the CURRENT secret, with
 * which this server proves itself; an optional second is a PREVIOUS secret
 * that is still accepted from others (rolling rotation, docs/security.md).
 * A server without a secret (`--insecure-peers`) uses the empty key: it
 * talks only to other insecure servers, and anyone can pass its handshake.
 *
 * The peer handshake. Every frame below is the payload of one net/ frame
 * (u32 length | u32 CRC-32C | payload); integers are big-endian.
 *
 *   dialer D -> acceptor A   HELLO
 *	u8 type=1 | u32 magic "KEEL" | u16 version=2 | u64 D | u64 A
 *	| u16 alen | alen bytes: D's peer address | 32 bytes nonce_D
 *   A -> D                   CHALLENGE
 *	u8 type=10 | u64 A | u64 D | 32 bytes nonce_A | 32 bytes mac_A
 *   D -> A                   PROOF
 *	u8 type=11 | 32 bytes mac_D
 *
 *   mac_X = HMAC-SHA256(secret, "keel-peer-auth-v2" | u8 role_X
 *			  | u64 D | u64 A | nonce_D | nonce_A)
 *   role_A = 2 (acceptor's proof), role_D = 1 (dialer's proof)
 *
 * Both nonces are fresh random bytes from each side, so a recorded MAC is
 * useless in a later handshake (replay); the role byte makes the acceptor's
 * MAC worthless as a dialer's proof (reflection); both ids are bound, so a
 * proof made for one pair of servers says nothing about another. MACs are
 * compared in constant time. The acceptor refuses a HELLO from a server id
 * that is not a member before it answers, and a link is acted on only once
 * the handshake is complete: the dialer after checking mac_A, the acceptor
 * after checking mac_D. Any other frame before that closes the link.
 *
 * The operator proof (admin requests on the client port, admin.h):
 *   mac = HMAC-SHA256(secret, "keel-admin-auth-v2" | u64 server id
 *		       | server nonce (32) | client nonce (32))
 *
 * The session credential (ZooKeeper addauth, scheme "keel"; brokers and the
 * CLI present it on their sessions, core/controller.h says which requests
 * need it):
 *   mac = HMAC-SHA256(secret, "keel-session-auth-v1" | u64 session id
 *		       | session password (16))
 * It is bound to one session: it proves nothing on any other, and the
 * password it covers is known only to that session's client and the
 * servers.
 *
 * Everything here is a function of its arguments: nonces come from the
 * caller (peer_auth_random fills them from OpenSSL's RAND_bytes).
 */
#ifndef KEEL_NODE_PEER_AUTH_H
#define KEEL_NODE_PEER_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "core/client_zk.h" /* CORE_ZK_CLUSTER_SCHEME */

#define PEER_AUTH_NONCE_SIZE 32
#define PEER_AUTH_MAC_SIZE 32
#define PEER_AUTH_SECRET_SIZE 32     /* what `keel secret generate` makes */
#define PEER_AUTH_SECRET_MIN_SIZE 16 /* shorter secrets are refused */
#define PEER_AUTH_SECRET_MAX_SIZE 64
#define PEER_AUTH_KEYS_MAX 2 /* current + previous */
#define PEER_AUTH_ADDR_MAX 128
#define PEER_AUTH_MAGIC 0x4b45454cu /* "KEEL" */
#define PEER_AUTH_VERSION 2

enum peer_auth_frame {
	PEER_AUTH_HELLO = 1,
	PEER_AUTH_CHALLENGE = 10,
	PEER_AUTH_PROOF = 11,
};

enum peer_auth_role {
	PEER_AUTH_ROLE_DIALER = 1,
	PEER_AUTH_ROLE_ACCEPTOR = 2,
};

struct peer_auth_key {
	uint8_t bytes[PEER_AUTH_SECRET_MAX_SIZE];
	size_t size;
};

/* count == 0: insecure (the empty key). key[0] proves, every key verifies. */
struct peer_auth_keys {
	struct peer_auth_key key[PEER_AUTH_KEYS_MAX];
	size_t count;
};

/* Parses the text of a secret file (see above) into keys. */
enum keel_err peer_auth_parse_secret(const char *text, size_t size, struct peer_auth_keys *keys,
				     char *err, size_t err_size);
/* Reads and parses a secret file; warns in the log when others may read it. */
enum keel_err peer_auth_load_file(const char *path, struct peer_auth_keys *keys, char *err,
				  size_t err_size);
/* Fills `out` with cryptographically strong random bytes. */
enum keel_err peer_auth_random(void *out, size_t size);
/* Writes `size` bytes as lowercase hex plus a NUL: out has 2 * size + 1. */
void peer_auth_hex(const uint8_t *bytes, size_t size, char *out);

/* One side of a handshake in progress. */
struct peer_handshake {
	enum peer_auth_role role;
	uint64_t self_id;
	uint64_t remote_id; /* dialer: whom it dialed; acceptor: the claimed id */
	uint8_t nonce_dialer[PEER_AUTH_NONCE_SIZE];
	uint8_t nonce_acceptor[PEER_AUTH_NONCE_SIZE];
	bool hello_seen; /* acceptor: CHALLENGE sent, waiting for PROOF */
	bool done;
};

/* The claims of a HELLO, for the acceptor's checks and logs. */
struct peer_hello_info {
	uint64_t from;
	uint64_t to;
	char addr[PEER_AUTH_ADDR_MAX]; /* NUL-terminated */
};

typedef bool (*peer_auth_member_fn)(void *ctx, uint64_t id);

/* Dialer: starts a handshake to `remote_id` and writes HELLO to w. */
void peer_hs_dial(struct peer_handshake *hs, uint64_t self_id, uint64_t remote_id,
		  const char *self_addr, const uint8_t nonce[PEER_AUTH_NONCE_SIZE],
		  struct keel_wbuf *w);

/* Acceptor: checks HELLO (its layout, version, that it is addressed to
 * self_id and comes from a member per is_member) and writes CHALLENGE to
 * w. Returns KEEL_PROTO (malformed, wrong version or target), KEEL_AUTH
 * (not a member); `info` holds what the frame claimed as far as it parsed. */
enum keel_err peer_hs_accept_hello(struct peer_handshake *hs, const struct peer_auth_keys *keys,
				   uint64_t self_id, const uint8_t nonce[PEER_AUTH_NONCE_SIZE],
				   const uint8_t *frame, size_t size, peer_auth_member_fn is_member,
				   void *member_ctx, struct peer_hello_info *info,
				   struct keel_wbuf *w);

/* Dialer: checks CHALLENGE and writes PROOF to w; then the link is
 * authenticated. KEEL_PROTO (malformed, wrong ids) or KEEL_AUTH (bad MAC). */
enum keel_err peer_hs_dialer_on_challenge(struct peer_handshake *hs,
					  const struct peer_auth_keys *keys, const uint8_t *frame,
					  size_t size, struct keel_wbuf *w);

/* Acceptor: checks PROOF; KEEL_OK means the link is authenticated. */
enum keel_err peer_hs_acceptor_on_proof(struct peer_handshake *hs,
					const struct peer_auth_keys *keys, const uint8_t *frame,
					size_t size);

/* The MAC of one role in one handshake, under one key. */
void peer_auth_mac(const struct peer_auth_key *key, enum peer_auth_role role, uint64_t dialer,
		   uint64_t acceptor, const uint8_t nonce_dialer[PEER_AUTH_NONCE_SIZE],
		   const uint8_t nonce_acceptor[PEER_AUTH_NONCE_SIZE],
		   uint8_t out[PEER_AUTH_MAC_SIZE]);

/* Operator proof for admin requests (current key). */
void peer_auth_admin_mac(const struct peer_auth_keys *keys, uint64_t server_id,
			 const uint8_t server_nonce[PEER_AUTH_NONCE_SIZE],
			 const uint8_t client_nonce[PEER_AUTH_NONCE_SIZE],
			 uint8_t out[PEER_AUTH_MAC_SIZE]);
/* True when `mac` is the operator proof under any accepted key. */
bool peer_auth_admin_verify(const struct peer_auth_keys *keys, uint64_t server_id,
			    const uint8_t server_nonce[PEER_AUTH_NONCE_SIZE],
			    const uint8_t client_nonce[PEER_AUTH_NONCE_SIZE],
			    const uint8_t mac[PEER_AUTH_MAC_SIZE]);

#define PEER_AUTH_SESSION_PASSWD_SIZE 16 /* a ZooKeeper session password */
#define PEER_AUTH_SESSION_SCHEME CORE_ZK_CLUSTER_SCHEME /* its addauth scheme */

/* The session credential (current key), and its check under any accepted
 * key (false for a mac of another size). */
void peer_auth_session_mac(const struct peer_auth_keys *keys, uint64_t session_id,
			   const uint8_t passwd[PEER_AUTH_SESSION_PASSWD_SIZE],
			   uint8_t out[PEER_AUTH_MAC_SIZE]);
bool peer_auth_session_verify(const struct peer_auth_keys *keys, uint64_t session_id,
			      const uint8_t passwd[PEER_AUTH_SESSION_PASSWD_SIZE],
			      const uint8_t *mac, size_t mac_size);

#endif
