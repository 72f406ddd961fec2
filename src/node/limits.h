/*
 * limits.h — the server's abuse limits on the client and metrics ports
 * (issue 18; docs/operations.md, "Limits").
 *
 * One struct per server, owned by the node, used by client.c on every
 * accept and close, and by the client sweep on every tick:
 *
 *   accept ──> fd reserve? ──> max-client-connections? ──> maxClientCnxns (per IP)?
 *                 │ no               │ no                      │ no
 *                 └──────────── accept-and-close, counted ─────┘
 *
 *   sweep: a connection still without its first frame connect_timeout_ms
 *          after accept, or with a frame unfinished for frame_timeout_ms,
 *          is closed and counted.
 *
 * The partial-frame and unsent-output byte budgets (client_read_budget_bytes,
 * client_output_budget_bytes) are enforced by net/conn.c through the
 * net_byte_budgets here; the watch byte budget by
 * zk/zk_watch.c; the metrics port's limits by net/http.c.
 */
#ifndef KEEL_NODE_LIMITS_H
#define KEEL_NODE_LIMITS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "net/limits.h"
#include "node/config.h"

enum node_refusal {
	NODE_REFUSED_FDS,      /* the descriptor reserve */
	NODE_REFUSED_MAX,      /* max-client-connections */
	NODE_REFUSED_PER_IP,   /* maxClientCnxns */
	NODE_REFUSAL_COUNT,
};

struct node_limits {
	struct net_addr_counts per_ip;
	struct net_fd_budget fds;
	struct net_byte_budget read_budget;
	struct net_byte_budget output_budget;
	uint64_t refused[NODE_REFUSAL_COUNT];
	uint64_t connect_timeouts; /* closed without a first frame in time */
	uint64_t frame_timeouts;   /* closed with a frame unfinished too long */
	uint64_t last_sweep_ms;
};

/* Raises RLIMIT_NOFILE (see net_fd_budget_init) and sets the budgets. */
enum keel_err node_limits_init(struct node_limits *l, const struct node_config *cfg,
			       uint64_t seed);
void node_limits_close(struct node_limits *l);

/* Decides on a just-accepted client connection from `ip` (`open` client
 * connections including this one). On false the caller closes it; the
 * refusal is counted and logged (rate-limited by the caller's log level). */
bool node_limits_admit(struct node_limits *l, const struct node_config *cfg, const uv_tcp_t *tcp,
		       const struct net_ip *ip, uint64_t open, const char *peer);
/* A connection admitted by node_limits_admit() has closed. */
void node_limits_release(struct node_limits *l, const struct net_ip *ip);

/* Every refusal of every kind (mntr's zk_connection_rejected). */
uint64_t node_limits_refused_total(const struct node_limits *l);

struct node;

/* Appends the limits' counters (client and metrics ports, partial-frame
 * budget) to a Prometheus text body. */
void node_limits_metrics(struct node *n, struct keel_wbuf *w);

#endif
