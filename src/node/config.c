/* config.c — flags and config file for `keel server` (see config.h). */
#include "node/config.h"
#include "os/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum opt_kind { OPT_STR, OPT_U32, OPT_U64, OPT_BOOL, OPT_CLUSTER };

struct option_def {
	const char *name;
	enum opt_kind kind;
	size_t offset;
	size_t size; /* for strings */
	const char *arg;
	const char *help;
};


static const struct option_def options[] = {
	{"id", OPT_U64, offsetof(struct node_config, id), 8, "ID",
	 "this server's id (1..254), unique in the cluster (required)"},
	{"data-dir", OPT_STR, offsetof(struct node_config, data_dir), NODE_PATH_SIZE, "DIR",
	 "where the log, hard state and snapshots live (required)"},
	{"listen", OPT_STR, offsetof(struct node_config, listen), NODE_ADDR_SIZE, "HOST:PORT",
	 "client port: ZooKeeper protocol, four-letter words, admin (required)"},
	{"peer-listen", OPT_STR, offsetof(struct node_config, peer_listen), NODE_ADDR_SIZE,
	 "HOST:PORT", "Raft peer port (required)"},
	{"cluster", OPT_CLUSTER, 0, 0, "ID=HOST:PORT,...",
	 "initial voters with their peer ports; ignored once a membership is persisted"},
	{"join", OPT_BOOL, offsetof(struct node_config, join), 1, "",
	 "start with no membership and wait to be added (`keel members add`)"},
	{"metrics-listen", OPT_STR, offsetof(struct node_config, metrics_listen), NODE_ADDR_SIZE,
	 "HOST:PORT", "serve Prometheus metrics at http://HOST:PORT/metrics"},
	{"config", OPT_STR, offsetof(struct node_config, config_file), NODE_PATH_SIZE, "FILE",
	 "read `name = value` lines (same names as the flags) from FILE"},
	{"log-level", OPT_STR, offsetof(struct node_config, log_level), 16, "LEVEL",
	 "debug, info (default), warn, error"},
	{"heartbeat-ms", OPT_U32, offsetof(struct node_config, heartbeat_ms), 4, "MS",
	 "leader heartbeat interval (default 100)"},
	{"election-timeout-ms", OPT_U32, offsetof(struct node_config, election_timeout_ms), 4,
	 "MS", "base election timeout, randomized up to 2x (default 1000)"},
	{"snapshot-entries", OPT_U64, offsetof(struct node_config, snapshot_entries), 8, "N",
	 "take a snapshot every N applied entries (default 100000)"},
	{"snapshot-bytes", OPT_U64, offsetof(struct node_config, snapshot_bytes), 8, "BYTES",
	 "... or once the entries applied since the last one reach BYTES (default 67108864)"},
	{"snapshot-trailing", OPT_U64, offsetof(struct node_config, snapshot_trailing), 8, "N",
	 "log entries kept behind a snapshot for slow followers (default 5000)"},
	{"feed-retain-bytes", OPT_U64, offsetof(struct node_config, feed_retain_bytes), 8, "BYTES",
	 "change feed: history of changes kept in memory (default 67108864)"},
	{"snapshot-chunk-bytes", OPT_U32, offsetof(struct node_config, snapshot_chunk_bytes), 4,
	 "BYTES", "InstallSnapshot chunk size (default 1048576)"},
	{"segment-bytes", OPT_U64, offsetof(struct node_config, segment_bytes), 8, "BYTES",
	 "WAL segment size (default 67108864)"},
	{"max-packet-bytes", OPT_U32, offsetof(struct node_config, max_packet_bytes), 4, "BYTES",
	 "largest client request or reply, like jute.maxbuffer (default 1048575)"},
	{"tick-ms", OPT_U32, offsetof(struct node_config, tick_ms), 4, "MS",
	 "ZooKeeper tickTime for session timeout bounds (default 2000)"},
	{"min-session-timeout-ms", OPT_U32, offsetof(struct node_config, min_session_timeout_ms),
	 4, "MS", "smallest negotiated session timeout (default 2 x tick)"},
	{"max-session-timeout-ms", OPT_U32, offsetof(struct node_config, max_session_timeout_ms),
	 4, "MS", "largest negotiated session timeout (default 20 x tick)"},
	{"max-client-connections", OPT_U32,
	 offsetof(struct node_config, max_client_connections), 4, "N",
	 "client connections accepted at once (default 10000)"},
	{"max-watches-per-connection", OPT_U32,
	 offsetof(struct node_config, max_watches_per_connection), 4, "N",
	 "watches one connection may hold (default 1000000)"},
	{"max-pending-per-connection", OPT_U32,
	 offsetof(struct node_config, max_pending_per_connection), 4, "N",
	 "requests in flight per connection before reading pauses (default 1000)"},
	{"maxClientCnxns", OPT_U32, offsetof(struct node_config, max_client_cnxns), 4, "N",
	 "client connections from one IP address; 0 = unlimited (default 60, as ZooKeeper)"},
	{"max-client-cnxns", OPT_U32, offsetof(struct node_config, max_client_cnxns), 4, "N",
	 "the same as --maxClientCnxns"},
	{"connect_timeout_ms", OPT_U32, offsetof(struct node_config, connect_timeout_ms), 4, "MS",
	 "close client connections whose first frame (ConnectRequest) is not complete "
	 "this long after accept (default 10000)"},
	{"connect-timeout-ms", OPT_U32, offsetof(struct node_config, connect_timeout_ms), 4, "MS",
	 "the same as --connect_timeout_ms"},
	{"frame-timeout-ms", OPT_U32, offsetof(struct node_config, frame_timeout_ms), 4, "MS",
	 "close client connections that leave a frame unfinished this long (default 30000)"},
	{"client-read-budget-bytes", OPT_U64,
	 offsetof(struct node_config, client_read_budget_bytes), 8, "BYTES",
	 "all client connections' partial-frame buffers together; 0 = unlimited "
	 "(default 268435456)"},
	{"client-output-budget-bytes", OPT_U64,
	 offsetof(struct node_config, client_output_budget_bytes), 8, "BYTES",
	 "all client connections' unsent replies together; past it, connections holding over "
	 "1/64 of it are closed; 0 = unlimited (default 536870912)"},
	{"max-watch-bytes-per-connection", OPT_U64,
	 offsetof(struct node_config, max_watch_bytes_per_connection), 8, "BYTES",
	 "path bytes of the watches one connection may hold; 0 = unlimited (default 16777216)"},
	{"fd-reserve", OPT_U32, offsetof(struct node_config, fd_reserve), 4, "N",
	 "file descriptors kept for storage and peers: clients are refused before "
	 "taking them (default 64)"},
	{"max-metrics-connections", OPT_U32,
	 offsetof(struct node_config, max_metrics_connections), 4, "N",
	 "open connections on the metrics port (default 64)"},
	{"metrics-request-timeout-ms", OPT_U32,
	 offsetof(struct node_config, metrics_request_timeout_ms), 4, "MS",
	 "a metrics connection's whole request head must arrive within this (default 5000)"},
	{"metrics-idle-timeout-ms", OPT_U32,
	 offsetof(struct node_config, metrics_idle_timeout_ms), 4, "MS",
	 "close metrics connections with no progress this long (default 2000)"},
	{"client-frames-per-turn", OPT_U32, offsetof(struct node_config, client_frames_per_turn),
	 4, "N",
	 "requests one client connection gets served before the others get a turn; "
	 "0 = no cap (default 64)"},
	{"client-output-per-turn-bytes", OPT_U32,
	 offsetof(struct node_config, client_output_per_turn_bytes), 4, "BYTES",
	 "... or reply bytes; 0 = no cap (default 262144)"},
	{"housekeeping-ms", OPT_U32, offsetof(struct node_config, housekeeping_ms), 4, "MS",
	 "how often the leader deletes empty containers and expired TTL nodes (default 60000)"},
	{"super-digest", OPT_STR, offsetof(struct node_config, super_digest), 256, "super:HASH",
	 "digest identity with all rights, as zookeeper.DigestAuthenticationProvider.superDigest"},
	{"no-read-only", OPT_BOOL, offsetof(struct node_config, no_read_only), 1, "",
	 "cut off from the quorum, refuse every client instead of serving reads to those "
	 "that allow a read-only server (ZooKeeper's readonlymode.enabled=false)"},
	{"broker-session-timeout-ms", OPT_U32,
	 offsetof(struct node_config, broker_session_timeout_ms), 4, "MS",
	 "brokers without a heartbeat this long are fenced (default 9000)"},
	{"leader-rebalance-interval-ms", OPT_U32,
	 offsetof(struct node_config, leader_rebalance_interval_ms), 4, "MS",
	 "how often preferred partition leaders are restored; 0 = never (default 300000)"},
	{"cluster-secret-file", OPT_STR, offsetof(struct node_config, cluster_secret_file),
	 NODE_PATH_SIZE, "FILE",
	 "the cluster secret (`keel secret generate`); peers and operators prove they hold it"},
	{"insecure-peers", OPT_BOOL, offsetof(struct node_config, insecure_peers), 1, "",
	 "run without a cluster secret: anyone who reaches the peer port is a peer"},
	{"peer-handshake-timeout-ms", OPT_U32,
	 offsetof(struct node_config, peer_handshake_timeout_ms), 4, "MS",
	 "a peer connection not authenticated by then is closed (default 5000)"},
	{"max-peer-handshakes", OPT_U32, offsetof(struct node_config, max_peer_handshakes), 4, "N",
	 "unauthenticated peer connections accepted at once (default 32)"},
	{"4lw-whitelist", OPT_STR, offsetof(struct node_config, four_letter_whitelist), 256,
	 "WORDS", "four-letter words answered, like 4lw.commands.whitelist; * = all "
		  "(default srvr, ruok, mntr, isro)"},
	{"sasl-users-file", OPT_STR, offsetof(struct node_config, sasl_users_file),
	 NODE_PATH_SIZE, "FILE",
	 "SASL DIGEST-MD5 users for ZooKeeper clients, one NAME:PASSWORD a line"},
	{"jaas-file", OPT_STR, offsetof(struct node_config, jaas_file), NODE_PATH_SIZE, "FILE",
	 "SASL DIGEST-MD5 users from ZooKeeper's JAAS file (its Server section's "
	 "DigestLoginModule user_NAME=\"PASSWORD\" options)"},
	{"sasl-super-user", OPT_STR, offsetof(struct node_config, sasl_super_user), 256, "NAME",
	 "the SASL user with all rights, as zookeeper.superUser"},
	{"secure-listen", OPT_STR, offsetof(struct node_config, secure_listen), NODE_ADDR_SIZE,
	 "HOST:PORT", "secure client port: the client port's protocols inside TLS "
		      "(needs --tls-cert and --tls-key)"},
	{"secureClientPort", OPT_U32, offsetof(struct node_config, secure_client_port), 4, "PORT",
	 "ZooKeeper's name: --secure-listen on the host of --listen"},
	{"tls-cert", OPT_STR, offsetof(struct node_config, tls_cert), NODE_PATH_SIZE, "FILE",
	 "PEM certificate (chain) of the secure client port"},
	{"tls-key", OPT_STR, offsetof(struct node_config, tls_key), NODE_PATH_SIZE, "FILE",
	 "PEM private key of --tls-cert"},
	{"tls-ca", OPT_STR, offsetof(struct node_config, tls_ca), NODE_PATH_SIZE, "FILE",
	 "PEM CA for client certificates: a client presenting one it signed gets the x509 "
	 "identity (its subject DN); certificates stay optional"},
	{"x509-super-user", OPT_STR, offsetof(struct node_config, x509_super_user), 512, "DN",
	 "a client certificate with this subject DN is ZooKeeper's super and an operator, "
	 "like zookeeper.X509AuthenticationProvider.superUser"},
	{"peer-tls-cert", OPT_STR, offsetof(struct node_config, peer_tls_cert), NODE_PATH_SIZE,
	 "FILE", "PEM certificate this server presents on peer links (mutual TLS)"},
	{"peer-tls-key", OPT_STR, offsetof(struct node_config, peer_tls_key), NODE_PATH_SIZE,
	 "FILE", "PEM private key of --peer-tls-cert"},
	{"peer-tls-ca", OPT_STR, offsetof(struct node_config, peer_tls_ca), NODE_PATH_SIZE, "FILE",
	 "PEM CA that every peer's certificate must chain to"},
};

/* ZooKeeper's name for the whitelist, accepted in the config file. */
#define ZK_4LW_WHITELIST_KEY "4lw.commands.whitelist"

void node_config_defaults(struct node_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->log_level, sizeof(cfg->log_level), "info");
	cfg->heartbeat_ms = 100;
	cfg->election_timeout_ms = 1000;
	cfg->snapshot_entries = 100000;
	cfg->snapshot_bytes = 64ull << 20;
	cfg->snapshot_trailing = 5000;
	cfg->snapshot_chunk_bytes = 1u << 20;
	cfg->feed_retain_bytes = 64ull << 20;
	cfg->segment_bytes = 64ull << 20;
	cfg->max_packet_bytes = 0xfffff;
	cfg->tick_ms = 2000;
	cfg->max_client_connections = 10000;
	cfg->max_watches_per_connection = 1000000;
	cfg->max_pending_per_connection = 1000;
	cfg->max_client_cnxns = 60;
	cfg->connect_timeout_ms = 10000;
	cfg->frame_timeout_ms = 30000;
	cfg->client_read_budget_bytes = 256ull << 20;
	cfg->client_output_budget_bytes = 512ull << 20;
	cfg->max_watch_bytes_per_connection = 16ull << 20;
	cfg->fd_reserve = 64;
	cfg->max_metrics_connections = 64;
	cfg->metrics_request_timeout_ms = 5000;
	cfg->metrics_idle_timeout_ms = 2000;
	cfg->client_frames_per_turn = 64;
	cfg->client_output_per_turn_bytes = 256u << 10;
	cfg->broker_session_timeout_ms = 9000;
	cfg->leader_rebalance_interval_ms = 300000;
	cfg->housekeeping_ms = 60000;
	cfg->peer_handshake_timeout_ms = 5000;
	cfg->max_peer_handshakes = 32;
	snprintf(cfg->four_letter_whitelist, sizeof(cfg->four_letter_whitelist),
		 "srvr, ruok, mntr, isro");
}

/* Calls fn on each word of a whitelist ("a, b c"); stops when it returns true. */
static bool each_4lw(const char *list, bool (*fn)(const char *w, size_t len, const void *arg),
		     const void *arg)
{
	const char *p = list;
	while (*p != '\0') {
		while (*p == ',' || *p == ' ' || *p == '\t') {
			p++;
		}
		size_t len = strcspn(p, ", \t");
		if (len > 0 && fn(p, len, arg)) {
			return true;
		}
		p += len;
	}
	return false;
}

static bool word_matches(const char *w, size_t len, const void *arg)
{
	return (len == 1 && w[0] == '*') || (len == 4 && memcmp(w, arg, 4) == 0);
}

static bool word_invalid(const char *w, size_t len, const void *arg)
{
	(void)arg;
	if (len == 1 && w[0] == '*') {
		return false;
	}
	if (len != 4) {
		return true;
	}
	for (size_t i = 0; i < 4; i++) {
		if (w[i] < 'a' || w[i] > 'z') {
			return true;
		}
	}
	return false;
}

bool node_config_4lw_allowed(const struct node_config *cfg, const char word[4])
{
	return each_4lw(cfg->four_letter_whitelist, word_matches, word);
}

void node_config_help(FILE *out)
{
	fprintf(out, "usage: keel server --id ID --data-dir DIR --listen HOST:PORT "
		     "--peer-listen HOST:PORT\n"
		     "                   --cluster ID=HOST:PEERPORT,... [--metrics-listen "
		     "HOST:PORT] [--config FILE] [options]\n\noptions:\n");
	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
		char left[64];
		snprintf(left, sizeof(left), "--%s %s", options[i].name, options[i].arg);
		fprintf(out, "  %-34s %s\n", left, options[i].help);
	}
	fprintf(out, "\nEvery option can also be a `name = value` line in the --config file;\n"
		     "flags given on the command line win.\n");
}

enum keel_err node_parse_cluster(const char *text, struct node_member *out, size_t max,
				 size_t *count, char *err, size_t err_size)
{
	*count = 0;
	const char *p = text;
	while (*p != '\0') {
		const char *end = strchr(p, ',');
		size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
		char item[NODE_ADDR_SIZE + 32];
		if (len == 0 || len >= sizeof(item)) {
			snprintf(err, err_size, "bad --cluster entry near '%s'", p);
			return KEEL_CONFIG;
		}
		memcpy(item, p, len);
		item[len] = '\0';
		char *eq = strchr(item, '=');
		char *idend;
		errno = 0;
		unsigned long long id = eq != NULL ? strtoull(item, &idend, 10) : 0;
		if (eq == NULL || idend != eq || id == 0 || id > 254 || errno != 0 ||
		    eq[1] == '\0' || strlen(eq + 1) >= NODE_ADDR_SIZE) {
			snprintf(err, err_size, "bad --cluster entry '%s' (want ID=HOST:PORT, ID 1..254)",
				 item);
			return KEEL_CONFIG;
		}
		if (*count >= max) {
			snprintf(err, err_size, "--cluster lists more than %zu members", max);
			return KEEL_CONFIG;
		}
		for (size_t i = 0; i < *count; i++) {
			if (out[i].id == id) {
				snprintf(err, err_size, "--cluster lists id %llu twice", id);
				return KEEL_CONFIG;
			}
		}
		out[*count].id = id;
		snprintf(out[*count].peer_addr, NODE_ADDR_SIZE, "%s", eq + 1);
		(*count)++;
		p += len;
		if (*p == ',') {
			p++;
		}
	}
	return KEEL_OK;
}

static const struct option_def *find_option(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
		if (strlen(options[i].name) == len && strncmp(options[i].name, name, len) == 0) {
			return &options[i];
		}
	}
	return NULL;
}

static enum keel_err set_option(struct node_config *cfg, const struct option_def *o,
				const char *value, char *err, size_t err_size)
{
	char *base = (char *)cfg;
	char *endp;
	switch (o->kind) {
	case OPT_STR:
		if (strlen(value) >= o->size) {
			snprintf(err, err_size, "--%s: value too long", o->name);
			return KEEL_CONFIG;
		}
		snprintf(base + o->offset, o->size, "%s", value);
		return KEEL_OK;
	case OPT_U32:
	case OPT_U64: {
		errno = 0;
		unsigned long long v = strtoull(value, &endp, 10);
		if (*value == '\0' || *endp != '\0' || errno != 0 || value[0] == '-' ||
		    (o->kind == OPT_U32 && v > UINT32_MAX)) {
			snprintf(err, err_size, "--%s: '%s' is not a valid number", o->name, value);
			return KEEL_CONFIG;
		}
		if (o->kind == OPT_U32) {
			uint32_t v32 = (uint32_t)v;
			memcpy(base + o->offset, &v32, 4);
		} else {
			uint64_t v64 = v;
			memcpy(base + o->offset, &v64, 8);
		}
		return KEEL_OK;
	}
	case OPT_BOOL: {
		bool v = strcmp(value, "true") == 0 || strcmp(value, "1") == 0 ||
			 strcmp(value, "yes") == 0 || value[0] == '\0';
		if (!v && strcmp(value, "false") != 0 && strcmp(value, "0") != 0 &&
		    strcmp(value, "no") != 0) {
			snprintf(err, err_size, "--%s: '%s' is not true/false", o->name, value);
			return KEEL_CONFIG;
		}
		memcpy(base + o->offset, &v, sizeof(v));
		return KEEL_OK;
	}
	case OPT_CLUSTER:
		return node_parse_cluster(value, cfg->cluster, NODE_MAX_MEMBERS, &cfg->cluster_count,
					  err, err_size);
	}
	return KEEL_CONFIG;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t') {
		s++;
	}
	size_t n = strlen(s);
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' ||
			 s[n - 1] == '\r')) {
		s[--n] = '\0';
	}
	return s;
}

static enum keel_err parse_file(struct node_config *cfg, const char *path, char *err,
				size_t err_size)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, err_size, "cannot open config file %s: %s", path, strerror(errno));
		return KEEL_CONFIG;
	}
	char line[2048];
	int lineno = 0;
	enum keel_err rc = KEEL_OK;
	while (rc == KEEL_OK && fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		char *hash = strchr(line, '#');
		if (hash != NULL) {
			*hash = '\0';
		}
		char *s = trim(line);
		if (*s == '\0') {
			continue;
		}
		char *eq = strchr(s, '=');
		if (eq == NULL) {
			snprintf(err, err_size, "%s:%d: want `name = value`", path, lineno);
			rc = KEEL_CONFIG;
			break;
		}
		*eq = '\0';
		const char *name = trim(s);
		char *value = trim(eq + 1);
		if (strcmp(name, ZK_4LW_WHITELIST_KEY) == 0) {
			name = "4lw-whitelist";
		}
		const struct option_def *o = find_option(name, strlen(name));
		if (o == NULL || strcmp(o->name, "config") == 0) {
			snprintf(err, err_size, "%s:%d: unknown option '%s'", path, lineno, name);
			rc = KEEL_CONFIG;
			break;
		}
		rc = set_option(cfg, o, value, err, err_size);
	}
	fclose(f);
	return rc;
}

/* The TLS options come in groups: all of a group or none. secureClientPort
 * becomes --secure-listen on --listen's host. */
static enum keel_err check_tls(struct node_config *cfg, char *err, size_t err_size)
{
	if (cfg->secure_client_port != 0 && cfg->secure_listen[0] == '\0') {
		const char *colon = strrchr(cfg->listen, ':');
		int host_len = colon != NULL ? (int)(colon - cfg->listen) : 0;
		if (cfg->secure_client_port > 65535) {
			snprintf(err, err_size, "secureClientPort: %u is not a port",
				 cfg->secure_client_port);
			return KEEL_CONFIG;
		}
		snprintf(cfg->secure_listen, sizeof(cfg->secure_listen), "%.*s:%u", host_len,
			 cfg->listen, cfg->secure_client_port);
	}
	bool cert = cfg->tls_cert[0] != '\0', key = cfg->tls_key[0] != '\0';
	if (cfg->secure_listen[0] != '\0' && (!cert || !key)) {
		snprintf(err, err_size, "--secure-listen needs --tls-cert FILE and --tls-key FILE");
		return KEEL_CONFIG;
	}
	if (cfg->secure_listen[0] == '\0' && (cert || key || cfg->tls_ca[0] != '\0')) {
		snprintf(err, err_size, "--tls-cert, --tls-key and --tls-ca need --secure-listen");
		return KEEL_CONFIG;
	}
	if (cfg->x509_super_user[0] != '\0' && cfg->tls_ca[0] == '\0') {
		snprintf(err, err_size, "--x509-super-user needs --tls-ca (to verify certificates)");
		return KEEL_CONFIG;
	}
	int peer = (cfg->peer_tls_cert[0] != '\0') + (cfg->peer_tls_key[0] != '\0') +
		   (cfg->peer_tls_ca[0] != '\0');
	if (peer != 0 && peer != 3) {
		snprintf(err, err_size,
			 "peer TLS needs all of --peer-tls-cert, --peer-tls-key and --peer-tls-ca");
		return KEEL_CONFIG;
	}
	return KEEL_OK;
}

/* Applies argv; when `only_config` is set, only picks up --config. */
static enum keel_err parse_args(struct node_config *cfg, int argc, char **argv, bool only_config,
				bool *help, char *err, size_t err_size)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			*help = true;
			return KEEL_OK;
		}
		if (strncmp(a, "--", 2) != 0) {
			snprintf(err, err_size, "unexpected argument '%s'", a);
			return KEEL_CONFIG;
		}
		const char *name = a + 2;
		const char *eq = strchr(name, '=');
		size_t name_len = eq != NULL ? (size_t)(eq - name) : strlen(name);
		const struct option_def *o = find_option(name, name_len);
		if (o == NULL) {
			snprintf(err, err_size, "unknown option '%s' (see --help)", a);
			return KEEL_CONFIG;
		}
		const char *value;
		if (eq != NULL) {
			value = eq + 1;
		} else if (o->kind == OPT_BOOL) {
			value = "true";
		} else if (i + 1 < argc) {
			value = argv[++i];
		} else {
			snprintf(err, err_size, "--%s needs a value", o->name);
			return KEEL_CONFIG;
		}
		bool is_config = strcmp(o->name, "config") == 0;
		if (only_config != is_config) {
			continue;
		}
		enum keel_err rc = set_option(cfg, o, value, err, err_size);
		if (rc != KEEL_OK) {
			return rc;
		}
	}
	return KEEL_OK;
}

enum keel_err node_config_parse(struct node_config *cfg, int argc, char **argv, bool *help,
				char *err, size_t err_size)
{
	*help = false;
	enum keel_err rc = parse_args(cfg, argc, argv, true, help, err, err_size);
	if (rc != KEEL_OK || *help) {
		return rc;
	}
	if (cfg->config_file[0] != '\0') {
		rc = parse_file(cfg, cfg->config_file, err, err_size);
		if (rc != KEEL_OK) {
			return rc;
		}
	}
	rc = parse_args(cfg, argc, argv, false, help, err, err_size);
	if (rc != KEEL_OK || *help) {
		return rc;
	}
	if (cfg->id == 0 || cfg->id > 254) {
		snprintf(err, err_size, "--id is required (1..254)");
		return KEEL_CONFIG;
	}
	if (cfg->data_dir[0] == '\0' || cfg->listen[0] == '\0' || cfg->peer_listen[0] == '\0') {
		snprintf(err, err_size, "--data-dir, --listen and --peer-listen are required");
		return KEEL_CONFIG;
	}
	if (cfg->heartbeat_ms == 0 || cfg->election_timeout_ms < 2 * cfg->heartbeat_ms) {
		snprintf(err, err_size, "--election-timeout-ms must be at least twice --heartbeat-ms");
		return KEEL_CONFIG;
	}
	if (cfg->max_packet_bytes < 1024) {
		snprintf(err, err_size, "--max-packet-bytes must be at least 1024");
		return KEEL_CONFIG;
	}
	if (cfg->min_session_timeout_ms == 0) {
		cfg->min_session_timeout_ms = 2 * cfg->tick_ms;
	}
	if (cfg->max_session_timeout_ms == 0) {
		cfg->max_session_timeout_ms = 20 * cfg->tick_ms;
	}
	if (cfg->min_session_timeout_ms > cfg->max_session_timeout_ms) {
		snprintf(err, err_size, "min session timeout exceeds the max");
		return KEEL_CONFIG;
	}
	if (cfg->broker_session_timeout_ms == 0) {
		snprintf(err, err_size, "--broker-session-timeout-ms must be positive");
		return KEEL_CONFIG;
	}
	if (cfg->cluster_secret_file[0] == '\0' && !cfg->insecure_peers) {
		snprintf(err, err_size,
			 "no cluster secret: give --cluster-secret-file FILE (make one with "
			 "`keel secret generate > FILE`), or --insecure-peers for a throwaway "
			 "cluster that anyone on the network can join");
		return KEEL_CONFIG;
	}
	if (cfg->cluster_secret_file[0] != '\0' && cfg->insecure_peers) {
		snprintf(err, err_size, "give either --cluster-secret-file or --insecure-peers");
		return KEEL_CONFIG;
	}
	if (cfg->peer_handshake_timeout_ms == 0 || cfg->max_peer_handshakes == 0) {
		snprintf(err, err_size,
			 "--peer-handshake-timeout-ms and --max-peer-handshakes must be positive");
		return KEEL_CONFIG;
	}
	if (each_4lw(cfg->four_letter_whitelist, word_invalid, NULL)) {
		snprintf(err, err_size,
			 "--4lw-whitelist: '%s' is not a list of four-letter words or *",
			 cfg->four_letter_whitelist);
		return KEEL_CONFIG;
	}
	if (keel_log_parse_level(cfg->log_level) < 0) {
		snprintf(err, err_size, "--log-level: unknown level '%s'", cfg->log_level);
		return KEEL_CONFIG;
	}
	return check_tls(cfg, err, err_size);
}
