/*
 * limits.h — what one client may make the server hold: connections per
 * source address, file descriptors, bytes of partial frames.
 *
 *  - struct net_addr_counts: open connections per source IP (ZooKeeper's
 *    maxClientCnxns). acquire() on accept, release() on close; an entry
 *    lives while its count is positive.
 *  - struct net_fd_budget: the process's RLIMIT_NOFILE (soft raised to the
 *    hard limit at start) and a reserve kept for storage and peers. Unix
 *    hands out the lowest free descriptor, so a socket accepted at number
 *    >= limit - reserve proves fewer than `reserve` descriptors are free:
 *    such a client is closed at once. Client sockets therefore never hold
 *    a descriptor in the top `reserve` numbers, and the storage thread's
 *    segment files and the peer links always find one.
 *  - struct net_byte_budget: bytes held over all the connections that
 *    share it. As a read budget (reassembly buffers, i.e. partial frames):
 *    a connection whose buffer would grow past it is closed (KEEL_LIMIT)
 *    instead of the process running out of memory; buffers grow only as
 *    bytes arrive (conn.c). As an output budget (unsent replies): once the
 *    total is over it, a connection adding output while it holds more than
 *    1/64 of the budget unsent is closed — the clients that do not read
 *    their replies go, the others keep being served.
 *
 * All of these are owned by the caller, single-threaded (the loop thread).
 */
#ifndef KEEL_NET_LIMITS_H
#define KEEL_NET_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/err.h"
#include "base/hash.h"

/* ---- connections per source address ---- */

struct net_ip {
	uint8_t bytes[16];
	uint8_t size; /* 4 or 16; 0: unknown (not counted) */
};

struct net_addr_counts {
	struct keel_hmap map; /* net_ip -> count (owned entries) */
	uint64_t seed;
};

enum keel_err net_addr_counts_init(struct net_addr_counts *t, uint64_t seed);
void net_addr_counts_close(struct net_addr_counts *t);
/* Counts one more connection from `ip` unless `max` are already open
 * (max 0: unlimited). Returns false when refused (or out of memory). */
bool net_addr_counts_acquire(struct net_addr_counts *t, const struct net_ip *ip, uint32_t max);
void net_addr_counts_release(struct net_addr_counts *t, const struct net_ip *ip);
uint32_t net_addr_counts_get(const struct net_addr_counts *t, const struct net_ip *ip);

/* The remote address of a connected TCP handle (size 0 if unknown). */
void net_tcp_peer_ip(const uv_tcp_t *tcp, struct net_ip *out);

/* ---- file descriptors ---- */

struct net_fd_budget {
	uint64_t limit;   /* soft RLIMIT_NOFILE after raising */
	uint32_t reserve; /* descriptors clients never take */
};

/* Raises the soft RLIMIT_NOFILE to the hard limit and records it. On
 * failure to raise, keeps the current limit. Returns the limit. */
uint64_t net_fd_budget_init(struct net_fd_budget *b, uint32_t reserve);
/* May a client keep this just-accepted handle? (false: inside the reserve) */
bool net_fd_budget_allows(const struct net_fd_budget *b, const uv_tcp_t *tcp);

/* ---- bytes of partial frames / of unsent output ---- */

struct net_byte_budget {
	size_t max_bytes;  /* 0: unlimited */
	size_t used_bytes; /* held now */
	uint64_t refusals; /* connections closed because it was full */
};

/* Takes `bytes` more from the budget; false (nothing taken) if over. */
bool net_byte_budget_take(struct net_byte_budget *b, size_t bytes);
void net_byte_budget_give(struct net_byte_budget *b, size_t bytes);

#endif
