/* peers.c — peer links, HELLO handshake, duplicate resolution, re-dial. */
#include "node/peers.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "os/log.h"

#define BACKOFF_MIN_MS 50u
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

static void send_hello(struct peers *ps, struct peer_link *l, uint64_t to_id)
{
	size_t mark;
	struct keel_wbuf *w = net_conn_frame_begin(&l->conn, &mark);
	if (w == NULL) {
		return;
	}
	keel_wbuf_u8(w, PEER_FRAME_HELLO);
	keel_wbuf_u32(w, PEER_HELLO_MAGIC);
	keel_wbuf_u16(w, PEER_PROTOCOL_VERSION);
	keel_wbuf_u64(w, ps->self_id);
	keel_wbuf_u64(w, to_id);
	size_t alen = strlen(ps->self_addr);
	keel_wbuf_u16(w, (uint16_t)alen);
	keel_wbuf_bytes(w, ps->self_addr, alen);
	net_conn_frame_end(&l->conn, mark);
}

/* Makes `l` the established link of `p`, resolving a duplicate. */
static void link_established(struct peers *ps, struct peer *p, struct peer_link *l)
{
	l->established = true;
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

static bool handle_hello(struct peers *ps, struct peer_link *l, const uint8_t *body, size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, body, size);
	uint32_t magic = keel_rbuf_u32(&r);
	uint16_t version = keel_rbuf_u16(&r);
	uint64_t from = keel_rbuf_u64(&r);
	uint64_t to = keel_rbuf_u64(&r);
	uint16_t alen = keel_rbuf_u16(&r);
	const uint8_t *addr = keel_rbuf_bytes(&r, alen);
	if (!keel_rbuf_ok(&r) || magic != PEER_HELLO_MAGIC || version != PEER_PROTOCOL_VERSION ||
	    from == 0 || from == ps->self_id || alen >= NODE_ADDR_SIZE) {
		KEEL_WARN("peer link from %s: bad HELLO, closing", l->conn.peer_addr);
		net_conn_close(&l->conn, KEEL_PROTO, false);
		return false;
	}
	if (to != ps->self_id) {
		KEEL_WARN("peer link from %s: addressed to server %llu, I am %llu; closing",
			  l->conn.peer_addr, (unsigned long long)to,
			  (unsigned long long)ps->self_id);
		net_conn_close(&l->conn, KEEL_PROTO, false);
		return false;
	}
	if (l->dialed && from != l->remote_id) {
		KEEL_WARN("peer link to %s: answered by server %llu, expected %llu",
			  l->conn.peer_addr, (unsigned long long)from,
			  (unsigned long long)l->remote_id);
		net_conn_close(&l->conn, KEEL_PROTO, false);
		return false;
	}
	struct peer *p = peers_find(ps, from);
	if (p == NULL) {
		/* A server we do not know yet (e.g. being added): learn its address. */
		char a[NODE_ADDR_SIZE];
		memcpy(a, addr, alen);
		a[alen] = '\0';
		if (peers_set(ps, from, a) != KEEL_OK) {
			net_conn_close(&l->conn, KEEL_LIMIT, false);
			return false;
		}
		p = peers_find(ps, from);
	}
	l->remote_id = from;
	if (!l->dialed) {
		send_hello(ps, l, from); /* answer, so the dialer knows who we are */
	} else if (p->dialing == l) {
		p->dialing = NULL;
	}
	link_established(ps, p, l);
	return true;
}

static bool on_frame(struct net_conn *conn, const uint8_t *payload, size_t size)
{
	struct peer_link *l = conn->user;
	struct peers *ps = l->owner;
	if (size < 1) {
		net_conn_close(conn, KEEL_PROTO, false);
		return false;
	}
	uint8_t type = payload[0];
	if (!l->established) {
		if (type != PEER_FRAME_HELLO) {
			net_conn_close(conn, KEEL_PROTO, false);
			return false;
		}
		return handle_hello(ps, l, payload + 1, size - 1);
	}
	if (type == PEER_FRAME_HELLO) {
		return true; /* the answer to our HELLO on a link we accepted: ignore */
	}
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
	l->next = ps->links;
	ps->links = l;
	p->dialing = l;
	if (net_conn_connect(&l->conn, ps->nl, (struct sockaddr *)&p->sa, &ps->conn_cfg, &link_ops,
			     l, on_dial_done) != KEEL_OK) {
		/* The connection never started: no on_close will come. */
		p->dialing = NULL;
		link_unlink(ps, l);
		free(l);
	}
}

void peers_tick(struct peers *ps, uint64_t now_ms)
{
	ps->now_ms = now_ms;
	if (ps->closing) {
		return;
	}
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
	l->next = ps->links;
	ps->links = l;
	if (net_conn_accept(&l->conn, ps->nl, server, &ps->conn_cfg, &link_ops, l) != KEEL_OK) {
		link_unlink(ps, l);
		free(l);
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
	enum keel_err rc = net_listen(&ps->listener, nl->loop, listen_addr, on_connection, ps, err,
				      err_size);
	if (rc == KEEL_OK) {
		ps->listening = true;
	}
	return rc;
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
