/* peers.c — peer links, the authenticated handshake, duplicate resolution,
 * re-dial (see peers.h). */
#include "node/peers.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "os/log.h"

_Static_assert(NODE_ADDR_SIZE == PEER_AUTH_ADDR_MAX, "a HELLO address fits the peer table");

#define BACKOFF_MIN_MS 50u
#define REFUSAL_LOG_PER_SEC 20u
#define BACKOFF_MAX_MS 2000u

struct peer *peers_find(struct peers *ps, uint64_t id)
{
	for (size_t i = 0; i < ps->count; i++) {
		if (ps->table[i].id == id) {
			return &ps->table[i];
		}
	}
	return NULL;
}

bool peers_connected(struct peers *ps, uint64_t id)
{
	struct peer *p = peers_find(ps, id);
	return p != NULL && p->link != NULL;
}

static void link_unlink(struct peers *ps, struct peer_link *l)
{
	struct peer_link **pp = &ps->links;
	while (*pp != NULL && *pp != l) {
		pp = &(*pp)->next;
	}
	if (*pp == l) {
		*pp = l->next;
	}
}

/* Closes a link that failed or broke the handshake, naming the peer. At
 * most REFUSAL_LOG_PER_SEC lines a second, so that a flood of connections
 * cannot flood the log; the next line counts what was left out. */
static void refuse(struct peers *ps, struct peer_link *l, uint64_t claimed, enum keel_err reason,
		   const char *why)
{
	ps->refused++;
	uint64_t now = uv_now(ps->nl->loop);
	if (now >= ps->refusal_window_ms + 1000) {
		ps->refusal_window_ms = now;
		ps->refusals_logged = 0;
	}
	if (ps->refusals_logged < REFUSAL_LOG_PER_SEC) {
		ps->refusals_logged++;
		if (ps->refusals_unlogged > 0) {
			KEEL_WARN("%llu more peer connections were refused (not logged: over %u "
				  "lines a second)",
				  (unsigned long long)ps->refusals_unlogged, REFUSAL_LOG_PER_SEC);
			ps->refusals_unlogged = 0;
		}
		KEEL_WARN("peer link %s %s (claims server %llu): %s; refused",
			  l->dialed ? "to" : "from", l->conn.peer_addr, (unsigned long long)claimed,
			  why);
	} else {
		ps->refusals_unlogged++;
	}
	net_conn_close(&l->conn, reason, false);
}

static void send_hello(struct peers *ps, struct peer_link *l, uint64_t to_id)
{
	uint8_t nonce[PEER_AUTH_NONCE_SIZE];
	if (peer_auth_random(nonce, sizeof(nonce)) != KEEL_OK) {
		refuse(ps, l, to_id, KEEL_IO, "no random bytes for a nonce");
		return;
	}
	size_t mark;
	struct keel_wbuf *w = net_conn_frame_begin(&l->conn, &mark);
	if (w == NULL) {
		return;
	}
	peer_hs_dial(&l->hs, ps->self_id, to_id, ps->self_addr, nonce, w);
	net_conn_frame_end(&l->conn, mark);
}

/* Makes `l` the established link of `p`, resolving a duplicate. */
static void link_established(struct peers *ps, struct peer *p, struct peer_link *l)
{
	l->established = true;
	l->conn.cfg.max_frame_bytes = ps->conn_cfg.max_frame_bytes;
	if (!l->dialed) {
		KEEL_ASSERT(ps->handshakes > 0);
		ps->handshakes--;
	}
	if (p->link != NULL && p->link != l) {
		/* Keep the link dialed by the lower id; both ends decide the same. */
		struct peer_link *old = p->link;
		bool l_by_lower = l->dialed ? ps->self_id < p->id : p->id < ps->self_id;
		struct peer_link *loser = l_by_lower ? old : l;
		struct peer_link *winner = l_by_lower ? l : old;
		p->link = winner;
		loser->remote_id = 0; /* no longer speaks for p */
		net_conn_close(&loser->conn, KEEL_EXIST, false);
		return;
	}
	p->link = l;
	p->backoff_ms = 0;
	KEEL_INFO("peer %llu connected (%s)", (unsigned long long)p->id, l->conn.peer_addr);
	if (ps->on_link != NULL) {
		ps->on_link(ps->ctx, p->id, true);
	}
}

static bool link_is_member(void *ctx, uint64_t id)
{
	struct peers *ps = ctx;
	return ps->is_member == NULL || ps->is_member(ps->ctx, id);
}

/* Acceptor: HELLO in, CHALLENGE out. */
static bool on_hello(struct peers *ps, struct peer_link *l, const uint8_t *frame, size_t size)
{
	uint8_t nonce[PEER_AUTH_NONCE_SIZE];
	if (peer_auth_random(nonce, sizeof(nonce)) != KEEL_OK) {
		refuse(ps, l, 0, KEEL_IO, "no random bytes for a nonce");
		return false;
	}
	uint8_t out[PEER_HANDSHAKE_MAX_FRAME];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, out, sizeof(out));
	struct peer_hello_info info;
	enum keel_err rc = peer_hs_accept_hello(&l->hs, &ps->keys, ps->self_id, nonce, frame, size,
						link_is_member, ps, &info, &w);
	if (rc == KEEL_AUTH) {
		refuse(ps, l, info.from, rc, "not a member of this cluster");
		return false;
	}
	if (rc != KEEL_OK) {
		char why[96];
		if (info.to != 0 && info.to != ps->self_id) {
			snprintf(why, sizeof(why), "HELLO addressed to server %llu, this is %llu",
				 (unsigned long long)info.to, (unsigned long long)ps->self_id);
		} else {
			snprintf(why, sizeof(why), "malformed HELLO or protocol version (want %u)",
				 PEER_PROTOCOL_VERSION);
		}
		refuse(ps, l, info.from, rc, why);
		return false;
	}
	KEEL_ASSERT(keel_wbuf_ok(&w));
	net_conn_send(&l->conn, out, w.size);
	l->remote_id = info.from;
	if (peers_find(ps, info.from) == NULL) {
		/* A server we do not know yet (we are joining): learn its
		 * address, but only once it has proven itself. */
		memcpy(l->learned_addr, info.addr, sizeof(l->learned_addr));
	}
	return true;
}

/* Acceptor: PROOF in; the link is then authenticated. */
static bool on_proof(struct peers *ps, struct peer_link *l, const uint8_t *frame, size_t size)
{
	enum keel_err rc = peer_hs_acceptor_on_proof(&l->hs, &ps->keys, frame, size);
	if (rc != KEEL_OK) {
		refuse(ps, l, l->remote_id, rc,
		       rc == KEEL_AUTH ? "wrong proof (not the cluster secret)" : "malformed PROOF");
		return false;
	}
	struct peer *p = peers_find(ps, l->remote_id);
	if (p == NULL) {
		if (peers_set(ps, l->remote_id, l->learned_addr) != KEEL_OK) {
			refuse(ps, l, l->remote_id, KEEL_LIMIT, "peer table full");
			return false;
		}
		p = peers_find(ps, l->remote_id);
	}
	link_established(ps, p, l);
	return true;
}

/* Dialer: CHALLENGE in, PROOF out; the link is then authenticated. */
static bool on_challenge(struct peers *ps, struct peer_link *l, const uint8_t *frame, size_t size)
{
	uint8_t out[PEER_HANDSHAKE_MAX_FRAME];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, out, sizeof(out));
	enum keel_err rc = peer_hs_dialer_on_challenge(&l->hs, &ps->keys, frame, size, &w);
	if (rc != KEEL_OK) {
		refuse(ps, l, l->remote_id, rc,
		       rc == KEEL_AUTH ? "wrong challenge answer (not the cluster secret)"
				       : "malformed CHALLENGE or not the server dialed");
		return false;
	}
	net_conn_send(&l->conn, out, w.size);
	struct peer *p = peers_find(ps, l->remote_id);
	if (p == NULL) {
		net_conn_close(&l->conn, KEEL_OK, false); /* forgotten meanwhile */
		return false;
	}
	if (p->dialing == l) {
		p->dialing = NULL;
	}
	link_established(ps, p, l);
	return true;
}

static bool on_handshake_frame(struct peers *ps, struct peer_link *l, const uint8_t *frame,
			       size_t size)
{
	uint8_t type = frame[0];
	if (l->dialed) {
		if (type == PEER_AUTH_CHALLENGE) {
			return on_challenge(ps, l, frame, size);
		}
	} else if (!l->hs.hello_seen) {
		if (type == PEER_AUTH_HELLO) {
			return on_hello(ps, l, frame, size);
		}
	} else if (type == PEER_AUTH_PROOF) {
		return on_proof(ps, l, frame, size);
	}
	char why[64];
	snprintf(why, sizeof(why), "frame type %u before the handshake completed", type);
	refuse(ps, l, l->remote_id, KEEL_PROTO, why);
	return false;
}

static bool on_frame(struct net_conn *conn, const uint8_t *payload, size_t size)
{
	struct peer_link *l = conn->user;
	struct peers *ps = l->owner;
	if (size < 1) {
		refuse(ps, l, l->remote_id, KEEL_PROTO, "empty frame");
		return false;
	}
	if (!l->established) {
		return on_handshake_frame(ps, l, payload, size) && !conn->closing;
	}
	uint8_t type = payload[0];
	struct peer *p = peers_find(ps, l->remote_id);
	if (p == NULL || p->link != l) {
		return true; /* a link on its way out */
	}
	ps->on_message(ps->ctx, l->remote_id, type, payload + 1, size - 1);
	return !conn->closing;
}

static void on_close(struct net_conn *conn, enum keel_err reason)
{
	struct peer_link *l = conn->user;
	struct peers *ps = l->owner;
	link_unlink(ps, l);
	if (!l->dialed && !l->established) {
		KEEL_ASSERT(ps->handshakes > 0);
		ps->handshakes--;
	}
	struct peer *p = l->remote_id != 0 ? peers_find(ps, l->remote_id) : NULL;
	if (p == NULL) {
		/* Look it up by the dialing slot too. */
		for (size_t i = 0; i < ps->count; i++) {
			if (ps->table[i].dialing == l || ps->table[i].link == l) {
				p = &ps->table[i];
			}
		}
	}
	if (p != NULL) {
		if (p->dialing == l) {
			p->dialing = NULL;
		}
		if (p->link == l) {
			p->link = NULL;
			if (!ps->closing) {
				KEEL_INFO("peer %llu disconnected (%s)", (unsigned long long)p->id,
					  keel_strerror(reason));
				if (ps->on_link != NULL) {
					ps->on_link(ps->ctx, p->id, false);
				}
			}
		}
	}
	free(l);
}

static const struct net_conn_ops link_ops = {on_frame, NULL, on_close};

static void on_dial_done(struct net_conn *conn, enum keel_err err)
{
	struct peer_link *l = conn->user;
	if (err != KEEL_OK) {
		return; /* on_close follows and clears `dialing` */
	}
	send_hello(l->owner, l, l->remote_id);
}

static void dial(struct peers *ps, struct peer *p)
{
	struct peer_link *l = calloc(1, sizeof(*l));
	if (l == NULL) {
		return;
	}
	l->owner = ps;
	l->dialed = true;
	l->remote_id = p->id;
	l->handshake_deadline_ms = uv_now(ps->nl->loop) + ps->handshake_timeout_ms;
	l->next = ps->links;
	ps->links = l;
	p->dialing = l;
	struct net_conn_config cfg = ps->conn_cfg;
	cfg.tls = ps->dial_tls;
	if (net_conn_connect(&l->conn, ps->nl, (struct sockaddr *)&p->sa, &cfg, &link_ops, l,
			     on_dial_done) != KEEL_OK) {
		/* The connection never started: no on_close will come. */
		p->dialing = NULL;
		link_unlink(ps, l);
		free(l);
		return;
	}
	l->conn.cfg.max_frame_bytes = PEER_HANDSHAKE_MAX_FRAME;
}

/* Closes links whose handshake is overdue. */
static void expire_handshakes(struct peers *ps, uint64_t now_ms)
{
	for (struct peer_link *l = ps->links; l != NULL; l = l->next) {
		if (!l->established && !l->conn.closing && now_ms >= l->handshake_deadline_ms) {
			refuse(ps, l, l->remote_id, KEEL_TIMEOUT, "handshake not completed in time");
		}
	}
}

void peers_tick(struct peers *ps, uint64_t now_ms)
{
	ps->now_ms = now_ms;
	if (ps->closing) {
		return;
	}
	expire_handshakes(ps, now_ms);
	for (size_t i = 0; i < ps->count; i++) {
		struct peer *p = &ps->table[i];
		if (p->link != NULL || p->dialing != NULL || !p->addr_valid ||
		    now_ms < p->next_dial_ms) {
			continue;
		}
		p->backoff_ms = p->backoff_ms == 0 ? BACKOFF_MIN_MS
						   : KEEL_MIN(p->backoff_ms * 2, BACKOFF_MAX_MS);
		p->next_dial_ms = now_ms + p->backoff_ms;
		dial(ps, p);
	}
}

static void on_connection(uv_stream_t *server, int status)
{
	struct peers *ps = server->data;
	if (status != 0 || ps->closing) {
		return;
	}
	struct peer_link *l = calloc(1, sizeof(*l));
	if (l == NULL) {
		return;
	}
	l->owner = ps;
	l->handshake_deadline_ms = uv_now(ps->nl->loop) + ps->handshake_timeout_ms;
	l->next = ps->links;
	ps->links = l;
	if (net_conn_accept(&l->conn, ps->nl, server, &ps->conn_cfg, &link_ops, l) != KEEL_OK) {
		link_unlink(ps, l);
		free(l);
		return;
	}
	l->conn.cfg.max_frame_bytes = PEER_HANDSHAKE_MAX_FRAME;
	ps->handshakes++;
	if (ps->handshakes > ps->max_handshakes) {
		refuse(ps, l, 0, KEEL_LIMIT, "too many unauthenticated peer connections");
	}
}

enum keel_err peers_init(struct peers *ps, struct net_loop *nl, uint64_t self_id,
			 const char *listen_addr, size_t max_frame_bytes, peers_message_fn on_message,
			 peers_link_fn on_link, void *ctx, char *err, size_t err_size)
{
	memset(ps, 0, sizeof(*ps));
	ps->nl = nl;
	ps->self_id = self_id;
	snprintf(ps->self_addr, sizeof(ps->self_addr), "%s", listen_addr);
	ps->on_message = on_message;
	ps->on_link = on_link;
	ps->ctx = ctx;
	ps->conn_cfg.max_frame_bytes = max_frame_bytes;
	ps->conn_cfg.max_output_bytes = 256u << 20;
	ps->conn_cfg.checksummed = true;
	ps->handshake_timeout_ms = PEER_HANDSHAKE_TIMEOUT_MS;
	ps->max_handshakes = PEER_MAX_HANDSHAKES;
	enum keel_err rc = net_listen(&ps->listener, nl->loop, listen_addr, on_connection, ps, err,
				      err_size);
	if (rc == KEEL_OK) {
		ps->listening = true;
	}
	return rc;
}

void peers_set_tls(struct peers *ps, struct net_tls_ctx *accept_tls, struct net_tls_ctx *dial_tls)
{
	KEEL_ASSERT(ps->links == NULL);
	KEEL_ASSERT((accept_tls == NULL) == (dial_tls == NULL));
	ps->conn_cfg.tls = accept_tls;
	ps->dial_tls = dial_tls;
}

void peers_set_auth(struct peers *ps, const struct peer_auth_keys *keys,
		    peer_auth_member_fn is_member, uint32_t handshake_timeout_ms,
		    uint32_t max_handshakes)
{
	KEEL_ASSERT(ps->links == NULL);
	KEEL_ASSERT(handshake_timeout_ms > 0);
	KEEL_ASSERT(max_handshakes > 0);
	ps->keys = *keys;
	ps->is_member = is_member;
	ps->handshake_timeout_ms = handshake_timeout_ms;
	ps->max_handshakes = max_handshakes;
}

enum keel_err peers_set(struct peers *ps, uint64_t id, const char *addr)
{
	KEEL_ASSERT(id != 0);
	if (id == ps->self_id) {
		return KEEL_OK;
	}
	struct peer *p = peers_find(ps, id);
	if (p == NULL) {
		if (ps->count >= PEERS_MAX) {
			return KEEL_LIMIT;
		}
		p = &ps->table[ps->count++];
		memset(p, 0, sizeof(*p));
		p->id = id;
	} else if (strcmp(p->addr, addr) == 0) {
		return KEEL_OK;
	}
	snprintf(p->addr, sizeof(p->addr), "%s", addr);
	p->addr_valid = net_parse_addr(addr, &p->sa) == KEEL_OK;
	p->next_dial_ms = 0;
	p->backoff_ms = 0;
	if (!p->addr_valid) {
		KEEL_WARN("peer %llu: cannot resolve address '%s'", (unsigned long long)id, addr);
	}
	return KEEL_OK;
}

void peers_remove(struct peers *ps, uint64_t id)
{
	struct peer *p = peers_find(ps, id);
	if (p == NULL) {
		return;
	}
	if (p->link != NULL) {
		p->link->remote_id = 0;
		net_conn_close(&p->link->conn, KEEL_OK, true);
	}
	if (p->dialing != NULL) {
		p->dialing->remote_id = 0;
		net_conn_close(&p->dialing->conn, KEEL_OK, false);
	}
	/* Detach links still pointing at this slot, then compact the table. */
	for (struct peer_link *l = ps->links; l != NULL; l = l->next) {
		if (l->remote_id == id) {
			l->remote_id = 0;
		}
	}
	size_t idx = (size_t)(p - ps->table);
	ps->table[idx] = ps->table[ps->count - 1];
	ps->count--;
}

struct keel_wbuf *peers_send_begin(struct peers *ps, uint64_t id, uint8_t type, size_t *mark)
{
	struct peer *p = peers_find(ps, id);
	if (p == NULL || p->link == NULL) {
		if (p != NULL) {
			p->frames_dropped++;
		}
		return NULL;
	}
	struct keel_wbuf *w = net_conn_frame_begin(&p->link->conn, mark);
	if (w != NULL) {
		keel_wbuf_u8(w, type);
	}
	return w;
}

void peers_send_end(struct peers *ps, uint64_t id, size_t mark)
{
	struct peer *p = peers_find(ps, id);
	KEEL_ASSERT(p != NULL);
	KEEL_ASSERT(p->link != NULL);
	p->frames_sent++;
	net_conn_frame_end(&p->link->conn, mark);
}

void peers_close(struct peers *ps)
{
	ps->closing = true;
	if (ps->listening) {
		uv_close((uv_handle_t *)&ps->listener, NULL);
		ps->listening = false;
	}
	for (struct peer_link *l = ps->links; l != NULL; l = l->next) {
		net_conn_close(&l->conn, KEEL_SHUTDOWN, true);
	}
}
