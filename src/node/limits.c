/* limits.c — admission and counters of the abuse limits (see limits.h). */
#include "node/limits.h"

#include <string.h>

#include "node/metrics.h"
#include "node/node.h"
#include "os/log.h"

enum keel_err node_limits_init(struct node_limits *l, const struct node_config *cfg,
			       uint64_t seed)
{
	memset(l, 0, sizeof(*l));
	uint64_t limit = net_fd_budget_init(&l->fds, cfg->fd_reserve);
	if (limit <= (uint64_t)cfg->fd_reserve + 16u) {
		KEEL_WARN("file descriptor limit %llu leaves no room for clients beside a "
			  "reserve of %u (--fd-reserve)",
			  (unsigned long long)limit, cfg->fd_reserve);
	}
	l->read_budget.max_bytes = (size_t)cfg->client_read_budget_bytes;
	l->output_budget.max_bytes = (size_t)cfg->client_output_budget_bytes;
	return net_addr_counts_init(&l->per_ip, seed);
}

void node_limits_close(struct node_limits *l)
{
	net_addr_counts_close(&l->per_ip);
}

static const char *const refusal_what[NODE_REFUSAL_COUNT] = {
	[NODE_REFUSED_FDS] = "file descriptors are down to the reserve (--fd-reserve)",
	[NODE_REFUSED_MAX] = "max-client-connections reached",
	[NODE_REFUSED_PER_IP] = "maxClientCnxns reached for its address",
};

static bool refuse(struct node_limits *l, enum node_refusal why, const char *peer)
{
	/* The first refusal of a kind and every 1000th after it: a flood must
	 * not turn into a flood of log lines. */
	if (l->refused[why]++ % 1000 == 0) {
		KEEL_WARN("client %s refused: %s (%llu refused so far)", peer, refusal_what[why],
			  (unsigned long long)l->refused[why]);
	}
	return false;
}

bool node_limits_admit(struct node_limits *l, const struct node_config *cfg, const uv_tcp_t *tcp,
		       const struct net_ip *ip, uint64_t open, const char *peer)
{
	if (!net_fd_budget_allows(&l->fds, tcp)) {
		return refuse(l, NODE_REFUSED_FDS, peer);
	}
	if (open > cfg->max_client_connections) {
		return refuse(l, NODE_REFUSED_MAX, peer);
	}
	if (!net_addr_counts_acquire(&l->per_ip, ip, cfg->max_client_cnxns)) {
		return refuse(l, NODE_REFUSED_PER_IP, peer);
	}
	return true;
}

void node_limits_release(struct node_limits *l, const struct net_ip *ip)
{
	net_addr_counts_release(&l->per_ip, ip);
}

uint64_t node_limits_refused_total(const struct node_limits *l)
{
	uint64_t total = 0;
	for (int i = 0; i < NODE_REFUSAL_COUNT; i++) {
		total += l->refused[i];
	}
	return total;
}

void node_limits_metrics(struct node *n, struct keel_wbuf *w)
{
	const struct node_limits *l = &n->limits;
	metrics_counter(w, "keel_client_refused_fd_reserve_total",
			"Client connections refused to keep the descriptor reserve",
			l->refused[NODE_REFUSED_FDS]);
	metrics_counter(w, "keel_client_refused_max_connections_total",
			"Client connections refused at max-client-connections",
			l->refused[NODE_REFUSED_MAX]);
	metrics_counter(w, "keel_client_refused_per_ip_total",
			"Client connections refused at maxClientCnxns for their address",
			l->refused[NODE_REFUSED_PER_IP]);
	metrics_counter(w, "keel_client_connect_timeouts_total",
			"Client connections closed without a complete first frame in time",
			l->connect_timeouts);
	metrics_counter(w, "keel_client_frame_timeouts_total",
			"Client connections closed with a frame unfinished too long",
			l->frame_timeouts);
	metrics_counter(w, "keel_client_read_budget_refusals_total",
			"Client connections closed because partial frames filled the budget",
			l->read_budget.refusals);
	metrics_gauge(w, "keel_client_read_buffer_bytes",
		      "Bytes held by client reassembly buffers", (double)l->read_budget.used_bytes);
	metrics_counter(w, "keel_client_output_budget_refusals_total",
			"Client connections closed holding much unsent output while the budget was full",
			l->output_budget.refusals);
	metrics_gauge(w, "keel_client_output_bytes", "Unsent reply bytes of client connections",
		      (double)l->output_budget.used_bytes);
	metrics_gauge(w, "keel_fd_limit", "Soft RLIMIT_NOFILE after raising it",
		      (double)l->fds.limit);
	metrics_counter(w, "keel_metrics_refused_total",
			"Metrics connections refused (max-metrics-connections or fd reserve)",
			n->http_running ? n->http.refused : 0);
	metrics_counter(w, "keel_metrics_timeouts_total",
			"Metrics connections closed by the request or idle deadline",
			n->http_running ? n->http.timed_out : 0);
}
