/*
 * admin.c — the admin protocol's connections, four-letter words and
 * metrics (admin.h). Membership changes and transfers are the core's
 * (core/membership.c): this file checks the operator credential and hands
 * them over with the connection's id.
 */
#include "node/admin.h"
#include "core/controller.h"
#include "core/feed.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/assert.h"
#include "node/client.h"
#include "core/client_zk.h"
#include "core/fsm.h"
#include "node/snapshot.h"
#include "core/core.h"
#include "os/log.h"

static void wprintf(struct keel_wbuf *w, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static void wprintf(struct keel_wbuf *w, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (len > 0) {
		keel_wbuf_bytes(w, buf, KEEL_MIN((size_t)len, sizeof(buf) - 1));
	}
}

/* An answer on admin connection `c` (header only). */
static void reply_client(struct node *n, struct node_client *c, uint8_t op, uint64_t req_id,
			 enum keel_err err, const char *msg)
{
	size_t mark;
	struct keel_wbuf *w = core_client_begin(&n->core, c->id, &mark);
	if (w == NULL) {
		return;
	}
	admin_encode_reply_header(w, op, req_id, err, msg);
	core_client_end(&n->core, c->id, mark);
}

void admin_on_frame(struct node *n, struct node_client *c, const uint8_t *payload, size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, payload, size);
	uint32_t magic = keel_rbuf_u32(&r);
	uint8_t version = keel_rbuf_u8(&r);
	uint8_t op = keel_rbuf_u8(&r);
	uint64_t req_id = keel_rbuf_u64(&r);
	if (!keel_rbuf_ok(&r) || magic != ADMIN_MAGIC || version != ADMIN_VERSION) {
		core_client_close(&n->core, c->id, KEEL_PROTO, false);
		return;
	}
	size_t body_size = keel_rbuf_remaining(&r);
	const uint8_t *body = keel_rbuf_bytes(&r, body_size);
	if (op == ADMIN_OP_STATUS) {
		size_t mark;
		struct keel_wbuf *w = core_client_begin(&n->core, c->id, &mark);
		if (w != NULL) {
			admin_encode_reply_header(w, op, req_id, KEEL_OK, "");
			admin_status_json(n, w);
			core_client_end(&n->core, c->id, mark);
		}
		return;
	}
	if (op == ADMIN_OP_AUTH_NONCE || op == ADMIN_OP_AUTH) {
		admin_auth_on_frame(n, c, op, req_id, body, body_size);
		return;
	}
	if (!admin_auth_allowed(n, c)) {
		KEEL_WARN("admin op %u from %s refused: not authenticated", op, c->conn.peer_addr);
		reply_client(
		        n, c, op, req_id, KEEL_AUTH,
		        "not authorized: membership changes, leadership transfer and snapshots "
		        "need an operator (--cluster-secret-file, or the super digest)");
		return;
	}
	if (op == ADMIN_OP_SNAPSHOT) {
		enum keel_err rc = snapshot_request(n);
		reply_client(n, c, op, req_id, rc,
			     rc == KEEL_OK ? "snapshot started" : "a snapshot is already running");
		return;
	}
	admin_request(&n->core, c->id, op, req_id, body, body_size);
}

/* ---- status ---- */

static const char *member_role_name(uint8_t role)
{
	return role == RAFT_VOTER ? "voter" : role == RAFT_LEARNER ? "learner" : "none";
}

void admin_status_json(struct node *n, struct keel_wbuf *w)
{
	struct raft_status st;
	raft_status(n->core.raft, &st);
	wprintf(w,
		"{\"id\":%llu,\"role\":\"%s\",\"term\":%llu,\"leader\":%llu,"
		"\"commit_index\":%llu,\"applied_index\":%llu,\"last_index\":%llu,"
		"\"persisted_index\":%llu,\"snapshot_index\":%llu,\"znodes\":%llu,"
		"\"sessions\":%llu,\"connections\":%zu,\"uptime_ms\":%llu,\"members\":[",
		(unsigned long long)st.id, raft_role_name(st.role), (unsigned long long)st.term,
		(unsigned long long)st.leader, (unsigned long long)st.commit_index,
		(unsigned long long)n->core.applied_index, (unsigned long long)st.last_index,
		(unsigned long long)st.persisted_index, (unsigned long long)st.snapshot_index,
		(unsigned long long)fsm_znode_count(n->core.fsm),
		(unsigned long long)fsm_session_count(n->core.fsm), node_clients_count(n),
		(unsigned long long)(core_now_ms(&n->core) - n->start_ms));
	for (uint32_t i = 0; i < st.n_members; i++) {
		const struct raft_member_status *m = &st.members[i];
		const struct node_addr *a = core_addr_find(&n->core, m->id);
		wprintf(w, "%s{\"id\":%llu,\"role\":\"%s\",\"peer_addr\":\"%s\"", i ? "," : "",
			(unsigned long long)m->id, member_role_name(m->role),
			a != NULL ? a->peer_addr : "");
		if (st.role == RAFT_LEADER) {
			uint64_t lag =
			        st.last_index > m->match_index ? st.last_index - m->match_index : 0;
			wprintf(w,
			        ",\"match_index\":%llu,\"next_index\":%llu,\"state\":\"%s\","
			        "\"lag\":%llu,\"active\":%s",
			        (unsigned long long)m->match_index,
			        (unsigned long long)m->next_index,
			        m->id == st.id ? "self" : raft_progress_state_name(m->state),
			        (unsigned long long)lag, m->recent_active ? "true" : "false");
		}
		if (m->id != st.id) {
			wprintf(w, ",\"connected\":%s",
				core_peer_connected(&n->core, m->id) ? "true" : "false");
		}
		wprintf(w, "}");
	}
	wprintf(w, "]}\n");
}

/* ---- four-letter words ---- */

static const char *zk_mode(struct node *n)
{
	struct raft_status st;
	raft_status(n->core.raft, &st);
	for (uint32_t i = 0; i < st.n_members; i++) {
		if (st.members[i].id == n->cfg.id && st.members[i].role == RAFT_LEARNER) {
			return "observer";
		}
	}
	if (n->core.role == RAFT_LEADER) {
		return "leader";
	}
	return n->core.leader != 0 ? "follower" : "candidate";
}

static void four_srvr(struct node *n, struct keel_wbuf *out, bool with_clients)
{
	struct node_client_stats cs;
	node_clients_stats(n, &cs);
	wprintf(out, "Zookeeper version: 3.8.0-keel-0.1.0, built on keel\n");
	if (with_clients) {
		wprintf(out, "Clients:\n");
		node_clients_describe(n, out, false);
		wprintf(out, "\n");
	}
	wprintf(out,
	        "Latency min/avg/max: %llu/%.4f/%llu\nReceived: %llu\nSent: %llu\n"
	        "Connections: %zu\nOutstanding: %llu\nZxid: 0x%llx\nMode: %s\nNode count: %llu\n",
	        (unsigned long long)cs.latency_min_ms, cs.latency_avg_ms,
	        (unsigned long long)cs.latency_max_ms, (unsigned long long)cs.packets_received,
	        (unsigned long long)cs.packets_sent, node_clients_count(n),
	        (unsigned long long)cs.outstanding, (unsigned long long)n->core.applied_index,
	        zk_mode(n), (unsigned long long)fsm_znode_count(n->core.fsm));
	if (!with_clients) {
		wprintf(out, "Proposal sizes last/min/max: -1/-1/-1\n");
	}
}

static long open_fds(void)
{
	long count = 0;
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL) {
		return -1;
	}
	while (readdir(d) != NULL) {
		count++;
	}
	closedir(d);
	return count - 3; /* ".", ".." and the directory's own descriptor */
}

static void four_mntr(struct node *n, struct keel_wbuf *out)
{
	struct node_client_stats cs;
	node_clients_stats(n, &cs);
	struct raft_status st;
	raft_status(n->core.raft, &st);
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	wprintf(out, "zk_version\t3.8.0-keel-0.1.0, built on keel\n");
	wprintf(out, "zk_server_state\t%s\n", zk_mode(n));
	wprintf(out, "zk_avg_latency\t%.4f\nzk_max_latency\t%llu\nzk_min_latency\t%llu\n",
		cs.latency_avg_ms, (unsigned long long)cs.latency_max_ms,
		(unsigned long long)cs.latency_min_ms);
	wprintf(out, "zk_packets_received\t%llu\nzk_packets_sent\t%llu\n",
		(unsigned long long)cs.packets_received, (unsigned long long)cs.packets_sent);
	wprintf(out, "zk_num_alive_connections\t%zu\nzk_outstanding_requests\t%llu\n",
		node_clients_count(n), (unsigned long long)cs.outstanding);
	wprintf(out, "zk_znode_count\t%llu\nzk_watch_count\t%llu\nzk_ephemerals_count\t%llu\n",
		(unsigned long long)fsm_znode_count(n->core.fsm), (unsigned long long)cs.watches,
		(unsigned long long)fsm_ephemeral_count(n->core.fsm));
	wprintf(out, "zk_approximate_data_size\t%llu\n",
		(unsigned long long)fsm_data_bytes(n->core.fsm));
	wprintf(out, "zk_open_file_descriptor_count\t%ld\nzk_max_file_descriptor_count\t%llu\n",
		open_fds(), (unsigned long long)rl.rlim_cur);
	node_ctl_mntr(n, out);
	wprintf(out, "zk_connection_rejected\t%llu\n",
		(unsigned long long)node_limits_refused_total(&n->limits));
	if (n->core.role == RAFT_LEADER) {
		uint32_t followers = 0, synced = 0;
		for (uint32_t i = 0; i < st.n_members; i++) {
			if (st.members[i].id == st.id) {
				continue;
			}
			followers++;
			if (st.members[i].recent_active && st.members[i].role == RAFT_VOTER) {
				synced++;
			}
		}
		wprintf(out, "zk_followers\t%u\nzk_synced_followers\t%u\nzk_pending_syncs\t0\n",
			followers, synced);
	}
	wprintf(out, "keel_server_id\t%llu\nkeel_raft_term\t%llu\nkeel_raft_leader\t%llu\n",
		(unsigned long long)st.id, (unsigned long long)st.term,
		(unsigned long long)st.leader);
	wprintf(out, "keel_commit_index\t%llu\nkeel_applied_index\t%llu\nkeel_last_index\t%llu\n",
		(unsigned long long)st.commit_index, (unsigned long long)n->core.applied_index,
		(unsigned long long)st.last_index);
	wprintf(out, "keel_snapshot_index\t%llu\nkeel_sessions\t%llu\nkeel_proposals\t%llu\n",
		(unsigned long long)st.snapshot_index,
		(unsigned long long)fsm_session_count(n->core.fsm),
		(unsigned long long)n->core.stats.proposals);
	wprintf(out, "keel_fsync_p99_us\t%llu\nkeel_append_p99_us\t%llu\n",
		(unsigned long long)metrics_hist_quantile(&n->core.stats.fsync_latency, 0.99),
		(unsigned long long)metrics_hist_quantile(&n->core.stats.append_latency, 0.99));
}

static void four_conf(struct node *n, struct keel_wbuf *out)
{
	const struct node_config *c = &n->cfg;
	const char *colon = strrchr(c->listen, ':');
	wprintf(out, "clientPort=%s\n", colon != NULL ? colon + 1 : c->listen);
	wprintf(out, "secureClientPort=-1\ndataDir=%s\ndataLogDir=%s\n", c->data_dir, c->data_dir);
	wprintf(out, "tickTime=%u\nmaxClientCnxns=%u\nminSessionTimeout=%u\nmaxSessionTimeout=%u\n",
		c->tick_ms, c->max_client_connections, c->min_session_timeout_ms,
		c->max_session_timeout_ms);
	wprintf(out, "clientPortListenBacklog=-1\nserverId=%llu\n", (unsigned long long)c->id);
	for (size_t i = 0; i < n->core.book.count; i++) {
		wprintf(out, "server.%llu=%s\n", (unsigned long long)n->core.book.addrs[i].id,
			n->core.book.addrs[i].peer_addr);
	}
	wprintf(out, "jute.maxbuffer=%u\nelectionTimeoutMs=%u\nheartbeatMs=%u\n",
	        c->max_packet_bytes, c->election_timeout_ms, c->heartbeat_ms);
}

/* The words keel answers (when the whitelist allows). */
static bool four_letter_known(const char word[4])
{
	static const char known[] = "ruok srvr stat mntr conf cons isro envi wchs srst crst dirs";
	for (size_t i = 0; i + 4 <= sizeof(known) - 1; i += 5) {
		if (memcmp(known + i, word, 4) == 0) {
			return true;
		}
	}
	return false;
}

bool admin_four_letter(struct node *n, const char word[4], struct keel_wbuf *out)
{
	if (!four_letter_known(word)) {
		return false;
	}
	if (!node_config_4lw_allowed(&n->cfg, word)) {
		wprintf(out, "%.4s is not executed because it is not in the whitelist.\n", word);
		return true;
	}
	if (memcmp(word, "ruok", 4) == 0) {
		wprintf(out, "imok");
	} else if (memcmp(word, "srvr", 4) == 0) {
		four_srvr(n, out, false);
	} else if (memcmp(word, "stat", 4) == 0) {
		four_srvr(n, out, true);
	} else if (memcmp(word, "mntr", 4) == 0) {
		four_mntr(n, out);
	} else if (memcmp(word, "conf", 4) == 0) {
		four_conf(n, out);
	} else if (memcmp(word, "cons", 4) == 0) {
		node_clients_describe(n, out, true);
		wprintf(out, "\n");
	} else if (memcmp(word, "isro", 4) == 0) {
		wprintf(out, zk_clients_read_only(&n->core) ? "ro" : "rw");
	} else if (memcmp(word, "envi", 4) == 0) {
		char host[256] = "";
		gethostname(host, sizeof(host) - 1);
		wprintf(out, "Environment:\nzookeeper.version=3.8.0-keel-0.1.0\nhost.name=%s\n"
			     "os.name=Linux\nuser.dir=%s\n",
			host, n->cfg.data_dir);
	} else if (memcmp(word, "wchs", 4) == 0) {
		struct node_client_stats cs;
		node_clients_stats(n, &cs);
		wprintf(out, "%zu connections watching %llu paths\nTotal watches:%llu\n",
			node_clients_count(n), (unsigned long long)cs.watched_paths,
			(unsigned long long)cs.watches);
	} else if (memcmp(word, "srst", 4) == 0) {
		node_clients_reset_stats(n);
		wprintf(out, "Server stats reset.\n");
	} else if (memcmp(word, "crst", 4) == 0) {
		node_clients_reset_stats(n);
		wprintf(out, "Connection stats reset.\n");
	} else if (memcmp(word, "dirs", 4) == 0) {
		wprintf(out, "datadir_size: 0\nlogdir_size: 0\n");
	} else {
		return false;
	}
	return true;
}

/* ---- metrics ---- */

static void feed_metrics(struct node *n, struct keel_wbuf *w)
{
	struct node_feed_stats fs;
	node_feed_stats(&n->core, &fs);
	metrics_gauge(w, "keel_feed_subscriptions", "Change feed subscriptions on this server",
		      (double)fs.subscriptions);
	metrics_gauge(w, "keel_feed_history_changes",
	              "Transactions held in the change feed history", (double)fs.history_changes);
	metrics_gauge(w, "keel_feed_history_bytes", "Bytes of the change feed history",
		      (double)fs.history_bytes);
	metrics_gauge(w, "keel_feed_oldest_zxid", "Oldest start the change feed accepts",
		      (double)fs.oldest_zxid);
}

static void metrics_text(struct node *n, struct keel_wbuf *w)
{
	struct raft_status st;
	raft_status(n->core.raft, &st);
	struct node_client_stats cs;
	node_clients_stats(n, &cs);
	metrics_gauge(w, "keel_raft_term", "Current Raft term", (double)st.term);
	metrics_gauge(w, "keel_raft_role",
		      "Raft role: 1 follower, 2 pre-candidate, 3 candidate, 4 leader",
		      (double)st.role);
	metrics_gauge(w, "keel_raft_is_leader", "1 when this server leads", st.role == RAFT_LEADER);
	metrics_gauge(w, "keel_raft_leader_id", "Id of the known leader (0: none)",
		      (double)st.leader);
	metrics_gauge(w, "keel_raft_commit_index", "Raft commit index", (double)st.commit_index);
	metrics_gauge(w, "keel_raft_applied_index", "Last entry applied to the state machine",
		      (double)n->core.applied_index);
	metrics_gauge(w, "keel_raft_last_index", "Last log index", (double)st.last_index);
	metrics_gauge(w, "keel_raft_snapshot_index", "Index of the newest snapshot",
		      (double)st.snapshot_index);
	metrics_counter(w, "keel_raft_proposals_total", "Proposals accepted by this leader",
			n->core.stats.proposals);
	metrics_counter(w, "keel_raft_proposals_failed_total", "Proposals refused",
			n->core.stats.proposals_failed);
	metrics_counter(w, "keel_raft_leader_changes_total", "Leader changes seen",
			n->core.stats.leader_changes);
	metrics_counter(w, "keel_raft_entries_applied_total", "Entries applied",
			n->core.stats.entries_applied);
	metrics_counter(w, "keel_raft_follower_lost_entries_total",
			"Followers found missing entries they had acknowledged (disk lost data)",
			st.follower_lost_entries);
	metrics_counter(w, "keel_snapshots_taken_total", "Snapshots written",
			n->core.stats.snapshots_taken);
	metrics_counter(w, "keel_snapshots_installed_total", "Snapshots installed from the leader",
			n->core.stats.snapshots_installed);
	metrics_histogram(w, "keel_wal_append_seconds",
			  "Time from handing a batch to storage to it being durable",
			  &n->core.stats.append_latency);
	metrics_histogram(w, "keel_wal_fsync_seconds", "fdatasync duration",
			  &n->core.stats.fsync_latency);
	metrics_histogram(w, "keel_request_seconds", "Client request latency",
			  &n->core.stats.request_latency);
	metrics_counter(w, "keel_network_bytes_in_total", "Bytes received (clients and peers)",
			n->nl.bytes_in);
	metrics_counter(w, "keel_network_bytes_out_total", "Bytes sent (clients and peers)",
			n->nl.bytes_out);
	metrics_gauge(w, "keel_client_connections", "Open client connections",
		      (double)node_clients_count(n));
	metrics_counter(w, "keel_client_requests_total", "Client requests received",
			cs.packets_received);
	metrics_gauge(w, "keel_sessions", "Live sessions", (double)fsm_session_count(n->core.fsm));
	metrics_gauge(w, "keel_znodes", "Znodes in the tree", (double)fsm_znode_count(n->core.fsm));
	metrics_gauge(w, "keel_watches", "Watches held by this server's connections",
		      (double)cs.watches);
	node_ctl_metrics(n, w);
	metrics_counter(w, "keel_peer_connections_refused_total",
			"Peer connections refused: failed handshake, non-member, limits",
			n->peers.refused);
	metrics_gauge(w, "keel_peer_handshakes", "Peer connections not yet authenticated",
		      (double)n->peers.handshakes);
	metrics_counter(w, "keel_tls_failures_total",
			"TLS connections (secure client port, peers) closed by a failed handshake "
			"or record",
			n->nl.tls_failures);
	node_limits_metrics(n, w);
	feed_metrics(n, w);
}

int admin_http_handler(void *ctx, const char *path, struct keel_wbuf *body,
		       const char **content_type)
{
	struct node *n = ctx;
	if (strcmp(path, "/metrics") == 0) {
		*content_type = "text/plain; version=0.0.4; charset=utf-8";
		metrics_text(n, body);
		return 200;
	}
	if (strcmp(path, "/status") == 0) {
		*content_type = "application/json";
		admin_status_json(n, body);
		return 200;
	}
	if (strcmp(path, "/health") == 0 || strcmp(path, "/") == 0) {
		wprintf(body, "%s\n", n->core.failed ? "failed" : "ok");
		return n->core.failed ? 500 : 200;
	}
	wprintf(body, "not found; try /metrics, /status or /health\n");
	return 404;
}
