/*
 * peers.h — the links between servers: one persistent connection per pair.
 *
 * Every server listens on its peer port and dials each peer it knows. A new
 * link starts with the authenticated handshake of node/peer_auth.h (HELLO,
 * CHALLENGE, PROOF: a mutual HMAC-SHA256 challenge-response over the cluster
 * secret, bound to both server ids and fresh nonces). The acceptor refuses a
 * HELLO from a server that is not a member (is_member) before it answers,
 * and nothing but the handshake is read from a link until it is complete;
 * every refusal is logged with the remote address and the id it claimed.
 * Until then a link may carry only small frames, must finish within
 * handshake_timeout_ms, and at most max_handshakes accepted links may be
 * unauthenticated at once (more are closed on arrival).
 *
 * When two links to the same peer end up established (both dialed at once),
 * both ends keep the one dialed by the lower id and close the other, so they
 * agree without a further round trip. A broken link is re-dialed with
 * exponential back-off (50 ms doubling to 2 s). Frames are checksummed
 * (CRC-32C) by net/.
 *
 * Payload of every frame after the handshake: one byte of type (enum
 * peer_frame_type) then the body. Sends to a peer without a link are dropped
 * (Raft retries on its own; forwarded client requests are failed by the
 * caller, which knows).
 */
#ifndef KEEL_NODE_PEERS_H
#define KEEL_NODE_PEERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "base/buf.h"
#include "core/core.h"
#include "net/net.h"
#include "node/config.h"
#include "node/peer_auth.h"

#define PEERS_MAX 32
#define PEER_PROTOCOL_VERSION PEER_AUTH_VERSION /* 2: authenticated handshake, and the
							 * three forward protocols of version 1
							 * (frame types 3, 4, 6, 7, 8, 9) became
							 * one request/reply pair (tracker.h) */
#define PEER_HANDSHAKE_MAX_FRAME 512u /* frame limit until a link is authenticated */
#define PEER_HANDSHAKE_TIMEOUT_MS 5000u
#define PEER_MAX_HANDSHAKES 32u


struct peers;

struct peer_link {
	struct net_conn conn;
	struct peers *owner;
	uint64_t remote_id; /* dialed: the target; accepted: 0 until HELLO */
	bool dialed;        /* we dialed it (else accepted) */
	bool established;   /* handshake complete: frames are acted on */
	struct peer_handshake hs;
	uint64_t handshake_deadline_ms;
	char learned_addr[NODE_ADDR_SIZE]; /* an unknown acceptee's address */
	struct peer_link *next; /* all links */
};

struct peer {
	uint64_t id;
	char addr[NODE_ADDR_SIZE];
	struct sockaddr_storage sa;
	bool addr_valid;
	struct peer_link *link;    /* the established link, if any */
	struct peer_link *dialing; /* an outgoing attempt in progress */
	uint64_t next_dial_ms;
	uint32_t backoff_ms;
	uint64_t frames_sent;
	uint64_t frames_dropped;
};

typedef void (*peers_message_fn)(void *ctx, uint64_t from, uint8_t type, const uint8_t *body,
				 size_t size);
typedef void (*peers_link_fn)(void *ctx, uint64_t id, bool up);

struct peers {
	struct net_loop *nl;
	uv_tcp_t listener;
	bool listening;
	uint64_t self_id;
	char self_addr[NODE_ADDR_SIZE];
	struct peer table[PEERS_MAX];
	size_t count;
	struct peer_link *links;
	struct net_conn_config conn_cfg;
	peers_message_fn on_message;
	peers_link_fn on_link;
	void *ctx;
	uint64_t now_ms;
	bool closing;
	/* Authentication (peers_set_auth); by default the empty key, and
	 * every id a member. */
	struct peer_auth_keys keys;
	peer_auth_member_fn is_member;
	uint32_t handshake_timeout_ms;
	uint32_t max_handshakes;
	uint32_t handshakes; /* accepted links not yet authenticated */
	uint64_t refused;    /* links refused: bad handshake, non-member, limits */
	uint64_t refusal_window_ms; /* log rate limit: this second's start, */
	uint32_t refusals_logged;   /* lines in it, */
	uint64_t refusals_unlogged; /* refusals since the last line not logged */
	/* Mutual TLS (peers_set_tls): conn_cfg.tls verifies dialers, this
	 * verifies the servers we dial; NULL: plaintext. */
	struct net_tls_ctx *dial_tls;
};

enum keel_err peers_init(struct peers *ps, struct net_loop *nl, uint64_t self_id,
			 const char *listen_addr, size_t max_frame_bytes, peers_message_fn on_message,
			 peers_link_fn on_link, void *ctx, char *err, size_t err_size);

/* Puts every link inside TLS: `accept_tls` for links dialed to us,
 * `dial_tls` for those we dial (net/tls.h; both outlive the peers). The
 * HMAC handshake still runs inside. Call before any link exists. */
void peers_set_tls(struct peers *ps, struct net_tls_ctx *accept_tls, struct net_tls_ctx *dial_tls);

/* Sets the secret and the membership test (ctx is peers_init's). Call
 * right after peers_init, before any link exists. */
void peers_set_auth(struct peers *ps, const struct peer_auth_keys *keys,
		    peer_auth_member_fn is_member, uint32_t handshake_timeout_ms,
		    uint32_t max_handshakes);

/* Adds or updates a peer's address (re-dials if it changed). */
enum keel_err peers_set(struct peers *ps, uint64_t id, const char *addr);
/* Forgets a peer and closes its link. */
void peers_remove(struct peers *ps, uint64_t id);
struct peer *peers_find(struct peers *ps, uint64_t id);
bool peers_connected(struct peers *ps, uint64_t id);

/* Dials peers that need it; call from the tick timer. */
void peers_tick(struct peers *ps, uint64_t now_ms);

/* Starts a frame of `type` to peer `id`: returns the writer (append the
 * body, then peers_send_end) or NULL when there is no link (dropped). */
struct keel_wbuf *peers_send_begin(struct peers *ps, uint64_t id, uint8_t type, size_t *mark);
void peers_send_end(struct peers *ps, uint64_t id, size_t mark);

/* Closes the listener and every link; on_close callbacks follow in the loop. */
void peers_close(struct peers *ps);

#endif
