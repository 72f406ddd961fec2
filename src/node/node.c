/*
 * node.c — the server's shell: start-up (storage recovery, Raft restore,
 * listeners), the libuv handles that feed the core (core/core.h: its ready
 * loop is core_drive in core/drive.c), the tick, signals, shutdown.
 *
 *   start --recover--> serving (core_drive on every input) --SIGTERM--> STOPPING
 *                                              --core reports failure--> FAILED
 */
#include "node/node.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "core/entry.h"
#include "core/fsm.h"
#include "node/admin.h"
#include "node/client.h"
#include "core/client_zk.h"
#include "core/controller.h"
#include "node/host.h"
#include "node/sasl_load.h"
#include "node/snapshot.h"
#include "os/clock.h"
#include "os/log.h"

/* The largest peer frame: an AppendEntries at its byte limit (or one entry
 * at the entry limit) with per-entry overhead, or a snapshot chunk. */
static size_t peer_max_frame_bytes(const struct raft_options *o)
{
	size_t append = (size_t)KEEL_MAX(o->max_append_bytes, o->max_entry_bytes) +
			(size_t)o->max_append_entries * 64u;
	size_t chunk = (size_t)o->snapshot_chunk_bytes + 64u * RAFT_MAX_MEMBERS + 1024u;
	return KEEL_MAX(append, chunk) + 4096u;
}

uint64_t node_now_ms(const struct node *n)
{
	return uv_now(n->loop);
}

static void on_drive_idle(uv_idle_t *idle)
{
	(void)idle;
}

static void on_drive_check(uv_check_t *check)
{
	struct node *n = check->data;
	if (n->drive_scheduled) {
		n->drive_scheduled = false;
		uv_idle_stop(&n->drive_idle);
		core_drive(&n->core);
	}
}

void node_schedule_drive(struct node *n)
{
	if (!n->drive_scheduled && !n->stopping) {
		n->drive_scheduled = true;
		uv_idle_start(&n->drive_idle, on_drive_idle);
	}
}

/* A peer may link to us when it is in the address book; a server that is
 * not in its own book yet (started with --join, waiting to be added) takes
 * any peer that proves the cluster secret, or it could never be added. */
static bool peer_is_member(void *ctx, uint64_t id)
{
	struct node *n = ctx;
	return core_addr_find(&n->core, id) != NULL || core_addr_find(&n->core, n->cfg.id) == NULL;
}

/* ---- inputs to the core from storage and peers ---- */

static void on_durable(void *ctx, uint64_t persist_id, enum keel_err err)
{
	struct node *n = ctx;
	core_on_durable(&n->core, persist_id, err);
}

static void on_peer_message(void *ctx, uint64_t from, uint8_t type, const uint8_t *body,
			    size_t size)
{
	struct node *n = ctx;
	core_on_peer_frame(&n->core, from, type, body, size);
}

static void on_peer_link(void *ctx, uint64_t id, bool up)
{
	struct node *n = ctx;
	core_on_peer_link(&n->core, id, up);
}

/* ---- timers and signals ---- */

static void on_tick(uv_timer_t *t)
{
	struct node *n = t->data;
	uint64_t now = node_now_ms(n);
	core_tick(&n->core, now);
	node_clients_sweep(n, now);
	peers_tick(&n->peers, now);
	snapshot_tick(n);
	core_drive(&n->core);
}

static void on_signal(uv_signal_t *s, int signum)
{
	struct node *n = s->data;
	if (n->stopping) {
		return;
	}
	KEEL_INFO("received %s: shutting down", signum == SIGTERM ? "SIGTERM" : "SIGINT");
	n->stopping = true;
	core_stop(&n->core);
	uv_stop(n->loop);
}

/* ---- start-up ---- */

/* The address book at start: --cluster, plus CLUSTER entries in the log
 * that are not applied yet (so that peers can be dialed before replay). */
static void book_seed(struct node *n)
{
	for (size_t i = 0; i < n->cfg.cluster_count; i++) {
		if (core_addr_find(&n->core, n->cfg.cluster[i].id) == NULL &&
		    n->core.book.count < KEEL_ARRAY_SIZE(n->core.book.addrs)) {
			struct node_addr *a = &n->core.book.addrs[n->core.book.count++];
			memset(a, 0, sizeof(*a));
			a->id = n->cfg.cluster[i].id;
			snprintf(a->peer_addr, sizeof(a->peer_addr), "%s", n->cfg.cluster[i].peer_addr);
		}
	}
}

void node_book_changed(struct node *n)
{
	for (size_t i = 0; i < n->core.book.count; i++) {
		const struct node_addr *a = &n->core.book.addrs[i];
		if (a->id != n->cfg.id && a->peer_addr[0] != '\0') {
			peers_set(&n->peers, a->id, a->peer_addr);
		}
	}
	/* Forget peers no longer in the book. */
	for (size_t i = 0; i < n->peers.count;) {
		uint64_t id = n->peers.table[i].id;
		if (core_addr_find(&n->core, id) == NULL) {
			peers_remove(&n->peers, id);
		} else {
			i++;
		}
	}
}

static enum keel_err recover_and_restore(struct node *n, char *err, size_t err_size)
{
	struct node_storage_options so = {
		.data_dir = n->cfg.data_dir,
		.segment_bytes = n->cfg.segment_bytes,
		.max_entry_bytes = n->core.raft_opts.max_entry_bytes,
		.loop = n->loop,
		.on_durable = on_durable,
		.ctx = n,
		.fsync_hist = &n->core.stats.fsync_latency,
	};
	struct node_recovered rec;
	memset(&rec, 0, sizeof(rec));
	enum keel_err rc = node_storage_open(&n->storage, &so, &rec, err, err_size);
	if (rc != KEEL_OK) {
		return rc;
	}
	struct keel_wbuf boot;
	keel_wbuf_init_dynamic(&boot, 0, 1 << 16);
	struct raft_entry boot_entry;
	if (rec.empty && !n->cfg.join) {
		if (n->cfg.cluster_count == 0) {
			snprintf(err, err_size, "a new server needs --cluster (or --join to be added)");
			keel_wbuf_free(&boot);
			return KEEL_CONFIG;
		}
		struct raft_config config;
		memset(&config, 0, sizeof(config));
		for (size_t i = 0; i < n->cfg.cluster_count; i++) {
			config.members[i].id = n->cfg.cluster[i].id;
			config.members[i].role = RAFT_VOTER;
		}
		config.count = (uint32_t)n->cfg.cluster_count;
		/* Sorted by id, as raft_config requires. */
		for (uint32_t i = 1; i < config.count; i++) {
			for (uint32_t j = i; j > 0 && config.members[j - 1].id > config.members[j].id;
			     j--) {
				struct raft_member t = config.members[j];
				config.members[j] = config.members[j - 1];
				config.members[j - 1] = t;
			}
		}
		if (raft_config_role(&config, n->cfg.id) == 0) {
			snprintf(err, err_size, "--cluster does not list this server's id %llu",
				 (unsigned long long)n->cfg.id);
			keel_wbuf_free(&boot);
			return KEEL_CONFIG;
		}
		rc = raft_bootstrap_entry(&config, &boot, &boot_entry);
		KEEL_ASSERT(rc == KEEL_OK);
		struct raft_hard_state hs = {.term = 1, .vote = 0};
		rc = node_storage_bootstrap(n->storage, &boot_entry, &hs, err, err_size);
		if (rc != KEEL_OK) {
			keel_wbuf_free(&boot);
			return rc;
		}
		KEEL_INFO("bootstrapped a new cluster of %u voters", config.count);
		rec.hard_state = hs;
		rec.entries = &boot_entry;
		rec.n_entries = 1;
	}
	if (rec.has_snapshot) {
		char msg[256];
		rc = fsm_snapshot_load(n, rec.snapshot_path, rec.snapshot.index, msg, sizeof(msg));
		if (rc != KEEL_OK) {
			snprintf(err, err_size, "cannot load snapshot %s: %s", rec.snapshot_path, msg);
			keel_wbuf_free(&boot);
			return rc;
		}
		n->core.applied_index = rec.snapshot.index;
		n->core.commit_index = rec.snapshot.index;
		n->core.snapshot_index = rec.snapshot.index;
		KEEL_INFO("loaded snapshot %llu (term %llu)", (unsigned long long)rec.snapshot.index,
			  (unsigned long long)rec.snapshot.term);
	}
	book_seed(n);
	/* Addresses from log entries not yet applied. */
	for (size_t i = 0; i < rec.n_entries; i++) {
		const struct raft_entry *e = &rec.entries[i];
		if (e->type == RAFT_ENTRY_NORMAL) {
			struct node_entry ne;
			if (node_entry_decode(e->data, e->size, &ne) == KEEL_OK &&
			    ne.kind == NODE_ENTRY_CLUSTER) {
				fsm_apply_cluster_payload(&n->core, ne.payload, ne.payload_size, false);
			}
		}
	}
	rc = raft_restore(n->core.raft, &rec.hard_state, rec.has_snapshot ? &rec.snapshot : NULL,
			  rec.entries, rec.n_entries);
	if (rc != KEEL_OK) {
		snprintf(err, err_size, "the log on disk does not fit together (%s)",
			 keel_strerror(rc));
	} else {
		KEEL_INFO("recovered term %llu, %zu log entries%s", (unsigned long long)rec.hard_state.term,
			  rec.n_entries, rec.has_snapshot ? " after the snapshot" : "");
	}
	if (rec.entries != &boot_entry) {
		node_storage_release_recovered(n->storage, &rec);
	}
	keel_wbuf_free(&boot);
	return rc;
}

/* The state machine's configuration from the server's. */
static void zk_config_from(const struct node_config *c, struct zk_config *zc)
{
	zk_config_default(zc);
	zc->max_packet_size = c->max_packet_bytes;
	zc->tick_time_ms = (int32_t)c->tick_ms;
	zc->min_session_timeout_ms = (int32_t)c->min_session_timeout_ms;
	zc->max_session_timeout_ms = (int32_t)c->max_session_timeout_ms;
	zc->max_watches_per_conn = c->max_watches_per_connection;
}

/* The metadata image's snapshot section is the controller glue's. */
static enum keel_err ctl_image_save(void *ctx, fsm_write_fn write, void *write_ctx)
{
	struct node *n = ctx;
	return node_ctl_save_image(&n->core, write, write_ctx);
}

static enum keel_err ctl_image_load(void *ctx, const uint8_t *data, size_t size, char *err,
				    size_t err_size)
{
	struct node *n = ctx;
	return node_ctl_load_image(&n->core, data, size, err, err_size);
}

enum keel_err node_init(struct node *n, uv_loop_t *loop, const struct node_config *cfg, char *err,
			size_t err_size)
{
	memset(n, 0, sizeof(*n));
	uint64_t seed = 0;
	if (keel_os_random(&seed, sizeof(seed)) != KEEL_OK) {
		seed = (uint64_t)keel_clock_wall_ms() << 20;
	}
	struct core_host host = node_host(n);
	core_init(&n->core, cfg->id, &host, seed);
	n->cfg = *cfg;
	n->loop = loop;
	char prefix[32];
	snprintf(prefix, sizeof(prefix), "id=%llu", (unsigned long long)cfg->id);
	keel_log_set_prefix(prefix);
	keel_log_set_level((enum keel_log_level)keel_log_parse_level(cfg->log_level));
	uv_update_time(loop);
	n->start_ms = node_now_ms(n);
	/* First, before storage opens files: the descriptor limit and reserve. */
	uint64_t limits_seed;
	keel_os_random(&limits_seed, sizeof(limits_seed));
	if (node_limits_init(&n->limits, cfg, limits_seed) != KEEL_OK) {
		snprintf(err, err_size, "out of memory");
		return KEEL_NOMEM;
	}

	enum keel_err rc = net_loop_init(&n->nl, loop);
	/* libuv runs check handles newest first: started after net's flush
	 * hook, the drive runs before it, so its messages leave this turn. */
	uv_check_init(loop, &n->drive_check);
	uv_check_init(loop, &n->feed_check);
	uv_idle_init(loop, &n->drive_idle);
	n->drive_check.data = n;
	uv_check_start(&n->drive_check, on_drive_check);
	if (rc != KEEL_OK) {
		snprintf(err, err_size, "cannot set up the event loop");
		return rc;
	}
	struct zk_config zk_config;
	zk_config_from(cfg, &zk_config);
	struct fsm_image_ops image = {ctl_image_save, ctl_image_load, n};
	struct core_options co = {
		.election_timeout_ms = cfg->election_timeout_ms,
		.heartbeat_ms = cfg->heartbeat_ms,
		.snapshot_chunk_bytes = cfg->snapshot_chunk_bytes,
		.snapshot_trailing = cfg->snapshot_trailing,
		.max_entry_bytes = cfg->max_packet_bytes + 4096,
		.zk_config = &zk_config,
		.image = &image,
	};
	rc = core_open(&n->core, &co, err, err_size);
	if (rc != KEEL_OK) {
		return rc;
	}
	struct node_ctl_options ctl_opts = {
		.broker_session_timeout_ms = cfg->broker_session_timeout_ms,
		.leader_rebalance_interval_ms = cfg->leader_rebalance_interval_ms,
		.max_packet_bytes = cfg->max_packet_bytes,
	};
	rc = node_ctl_create(&n->core, &ctl_opts, err, err_size);
	if (rc != KEEL_OK) {
		return rc;
	}
	struct peer_auth_keys keys;
	memset(&keys, 0, sizeof(keys));
	if (!cfg->insecure_peers) {
		rc = peer_auth_load_file(cfg->cluster_secret_file, &keys, err, err_size);
		if (rc != KEEL_OK) {
			return rc;
		}
	} else {
		KEEL_WARN("--insecure-peers: anyone who reaches %s can act as a peer, and admin "
			  "requests need no credential",
			  cfg->peer_listen);
	}
	rc = node_tls_open(n, err, err_size);
	if (rc != KEEL_OK) {
		return rc;
	}
	rc = peers_init(&n->peers, &n->nl, cfg->id, cfg->peer_listen,
			peer_max_frame_bytes(&n->core.raft_opts), on_peer_message, on_peer_link, n,
			err, err_size);
	if (rc != KEEL_OK) {
		return rc;
	}
	peers_set_tls(&n->peers, n->peer_tls_accept, n->peer_tls_dial);
	peers_set_auth(&n->peers, &keys, peer_is_member, cfg->peer_handshake_timeout_ms,
		       cfg->max_peer_handshakes);
	rc = node_sasl_load(cfg->sasl_users_file, cfg->jaas_file, &n->sasl_users, err, err_size);
	if (rc != KEEL_OK) {
		return rc;
	}
	rc = recover_and_restore(n, err, err_size);
	if (rc != KEEL_OK) {
		return rc;
	}
	node_book_changed(n);
	rc = node_clients_init(n, err, err_size);
	if (rc != KEEL_OK) {
		return rc;
	}
	if (cfg->metrics_listen[0] != '\0') {
		rc = http_server_start(&n->http, loop, cfg->metrics_listen, admin_http_handler, n, err,
				       err_size);
		if (rc != KEEL_OK) {
			return rc;
		}
		n->http_running = true;
		struct http_limits hl = {cfg->max_metrics_connections, cfg->metrics_request_timeout_ms,
					 cfg->metrics_idle_timeout_ms, &n->limits.fds};
		http_server_set_limits(&n->http, &hl);
	}
	uv_timer_init(loop, &n->tick_timer);
	n->tick_timer.data = n;
	uint64_t tick = KEEL_MAX(cfg->heartbeat_ms / 2, 5u);
	uv_timer_start(&n->tick_timer, on_tick, tick, tick);
	uv_signal_init(loop, &n->sigterm);
	uv_signal_init(loop, &n->sigint);
	n->sigterm.data = n;
	n->sigint.data = n;
	uv_signal_start(&n->sigterm, on_signal, SIGTERM);
	uv_signal_start(&n->sigint, on_signal, SIGINT);
	KEEL_INFO("keel server %llu: clients on %s, peers on %s%s%s, data in %s",
		  (unsigned long long)cfg->id, cfg->listen, cfg->peer_listen,
		  cfg->metrics_listen[0] ? ", metrics on " : "", cfg->metrics_listen,
		  cfg->data_dir);
	raft_tick(n->core.raft, node_now_ms(n));
	core_drive(&n->core);
	return KEEL_OK;
}

int node_run(struct node *n)
{
	uv_run(n->loop, UV_RUN_DEFAULT);
	return n->exit_code;
}

static void close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h)) {
		uv_close(h, NULL);
	}
}

void node_close(struct node *n)
{
	/* Nothing is driven from here on: completions that still arrive are
	 * not acknowledged to anyone (their clients are gone). */
	n->stopping = true;
	core_stop(&n->core);
	uv_timer_stop(&n->tick_timer);
	node_clients_close(n);
	admin_close(&n->core);
	peers_close(&n->peers);
	if (n->http_running) {
		http_server_close(&n->http);
	}
	snapshot_close(n);
	/* Let sockets flush and close. */
	for (int i = 0; i < 50 && uv_run(n->loop, UV_RUN_NOWAIT) != 0; i++) {
		uv_sleep(2);
	}
	/* Finish the syncs in flight, stop the storage thread. */
	if (n->storage != NULL) {
		node_storage_close(n->storage);
		n->storage = NULL;
	}
	net_loop_close(&n->nl);
	uv_walk(n->loop, close_walk, NULL);
	uv_run(n->loop, UV_RUN_DEFAULT);
	/* Every handle is closed: free what callbacks could have touched. */
	node_clients_free(n);
	node_tls_close(n);
	node_limits_close(&n->limits);
	node_ctl_destroy(&n->core);
	node_sasl_free(n->sasl_users);
	n->sasl_users = NULL;
	core_close(&n->core);
	KEEL_INFO("stopped");
}
