/* limits.c — per-address connection counts, descriptor reserve, partial
 * frame byte budget (see limits.h). */
#include "net/limits.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/assert.h"

struct addr_entry {
	struct net_ip ip;
	uint32_t count;
};

static bool addr_eq(const void *item, const void *key)
{
	const struct net_ip *a = &((const struct addr_entry *)item)->ip;
	const struct net_ip *b = key;
	return a->size == b->size && memcmp(a->bytes, b->bytes, a->size) == 0;
}

static uint64_t addr_hash(const struct net_addr_counts *t, const struct net_ip *ip)
{
	return keel_hash_bytes(ip->bytes, ip->size, t->seed);
}

enum keel_err net_addr_counts_init(struct net_addr_counts *t, uint64_t seed)
{
	t->seed = seed;
	return keel_hmap_init(&t->map, 64);
}

void net_addr_counts_close(struct net_addr_counts *t)
{
	size_t cursor = 0;
	void *item;
	while ((item = keel_hmap_next(&t->map, &cursor)) != NULL) {
		free(item);
	}
	keel_hmap_close(&t->map);
}

uint32_t net_addr_counts_get(const struct net_addr_counts *t, const struct net_ip *ip)
{
	const struct addr_entry *e = keel_hmap_find(&t->map, addr_hash(t, ip), addr_eq, ip);
	return e != NULL ? e->count : 0;
}

bool net_addr_counts_acquire(struct net_addr_counts *t, const struct net_ip *ip, uint32_t max)
{
	if (ip->size == 0) {
		return true; /* unknown address (a closed socket): nothing to count */
	}
	uint64_t h = addr_hash(t, ip);
	struct addr_entry *e = keel_hmap_find(&t->map, h, addr_eq, ip);
	if (e == NULL) {
		e = calloc(1, sizeof(*e));
		if (e == NULL) {
			return false;
		}
		e->ip = *ip;
		if (keel_hmap_insert(&t->map, h, e) != KEEL_OK) {
			free(e);
			return false;
		}
	}
	if (max != 0 && e->count >= max) {
		return false;
	}
	e->count++;
	return true;
}

void net_addr_counts_release(struct net_addr_counts *t, const struct net_ip *ip)
{
	if (ip->size == 0) {
		return;
	}
	uint64_t h = addr_hash(t, ip);
	struct addr_entry *e = keel_hmap_find(&t->map, h, addr_eq, ip);
	KEEL_ASSERT(e != NULL);
	KEEL_ASSERT(e->count > 0);
	if (--e->count == 0) {
		keel_hmap_remove_item(&t->map, h, e);
		free(e);
	}
}

void net_tcp_peer_ip(const uv_tcp_t *tcp, struct net_ip *out)
{
	memset(out, 0, sizeof(*out));
	struct sockaddr_storage ss;
	int len = (int)sizeof(ss);
	if (uv_tcp_getpeername(tcp, (struct sockaddr *)&ss, &len) != 0) {
		return;
	}
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)&ss;
		memcpy(out->bytes, &sin->sin_addr, 4);
		out->size = 4;
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&ss;
		memcpy(out->bytes, &sin6->sin6_addr, 16);
		out->size = 16;
	}
}

uint64_t net_fd_budget_init(struct net_fd_budget *b, uint32_t reserve)
{
	b->reserve = reserve;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
		b->limit = 1024;
		return b->limit;
	}
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit raised = {rl.rlim_max, rl.rlim_max};
		if (setrlimit(RLIMIT_NOFILE, &raised) == 0) {
			rl.rlim_cur = rl.rlim_max;
		}
	}
	b->limit = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
	return b->limit;
}

bool net_fd_budget_allows(const struct net_fd_budget *b, const uv_tcp_t *tcp)
{
	uv_os_fd_t fd;
	if (uv_fileno((const uv_handle_t *)tcp, &fd) != 0 || fd < 0) {
		return true; /* not open: nothing held */
	}
	return (uint64_t)fd + b->reserve < b->limit;
}

bool net_byte_budget_take(struct net_byte_budget *b, size_t bytes)
{
	if (b->max_bytes != 0 && bytes > b->max_bytes - KEEL_MIN(b->used_bytes, b->max_bytes)) {
		return false;
	}
	b->used_bytes += bytes;
	return true;
}

void net_byte_budget_give(struct net_byte_budget *b, size_t bytes)
{
	KEEL_ASSERT(b->used_bytes >= bytes);
	b->used_bytes -= bytes;
}
