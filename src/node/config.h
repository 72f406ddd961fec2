/*
 * config.h — the `keel server` configuration: flags and config file.
 *
 * Every option can be given as a flag (`--name value` or `--name=value`) or
 * as a `name = value` line in the file named by --config (# starts a comment).
 * Flags override the file. node_config_help() prints the table, so the help
 * text and the parser can never disagree.
 */
#ifndef KEEL_NODE_CONFIG_H
#define KEEL_NODE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"

#define NODE_MAX_MEMBERS 16
#define NODE_ADDR_SIZE 128
#define NODE_PATH_SIZE 1024

struct node_member {
	uint64_t id;
	char peer_addr[NODE_ADDR_SIZE]; /* HOST:PORT of its Raft port */
};

struct node_config {
	uint64_t id;
	char data_dir[NODE_PATH_SIZE];
	char listen[NODE_ADDR_SIZE];
	char peer_listen[NODE_ADDR_SIZE];
	char metrics_listen[NODE_ADDR_SIZE]; /* empty: no metrics endpoint */
	char config_file[NODE_PATH_SIZE];
	struct node_member cluster[NODE_MAX_MEMBERS];
	size_t cluster_count;
	bool join;                 /* start empty and wait to be added */
	char log_level[16];

	/* Raft timing. */
	uint32_t heartbeat_ms;
	uint32_t election_timeout_ms;
	/* Snapshots and log retention. */
	uint64_t snapshot_entries;       /* take a snapshot after this many applied */
	uint64_t snapshot_bytes;         /* ... or after this many bytes of entries */
	uint64_t snapshot_trailing;      /* entries kept behind a snapshot */
	uint32_t snapshot_chunk_bytes;
	/* Storage. */
	uint64_t segment_bytes;
	/* ZooKeeper limits (ZooKeeper's defaults). */
	uint32_t max_packet_bytes;       /* jute.maxbuffer */
	uint32_t tick_ms;                /* ZooKeeper tickTime */
	uint32_t min_session_timeout_ms; /* 0: 2 x tick */
	uint32_t max_session_timeout_ms; /* 0: 20 x tick */
	uint32_t max_client_connections;
	uint32_t max_watches_per_connection;
	uint32_t max_pending_per_connection;
	/* Abuse limits (docs/operations.md, "Limits"). */
	uint32_t max_client_cnxns;        /* per source IP; 0: unlimited (maxClientCnxns) */
	uint32_t connect_timeout_ms;      /* first frame (ConnectRequest) deadline */
	uint32_t frame_timeout_ms;        /* an unfinished frame's deadline */
	uint64_t client_read_budget_bytes; /* all partial-frame buffers; 0: unlimited */
	uint64_t client_output_budget_bytes; /* all unsent replies; 0: unlimited */
	uint64_t max_watch_bytes_per_connection; /* watched path bytes; 0: unlimited */
	uint32_t fd_reserve;              /* descriptors clients never take */
	uint32_t max_metrics_connections;
	uint32_t metrics_request_timeout_ms; /* whole request head within this */
	uint32_t metrics_idle_timeout_ms;    /* no progress for this long */
	uint32_t client_frames_per_turn;     /* fairness: requests per turn */
	uint32_t client_output_per_turn_bytes; /* fairness: reply bytes per turn */
	uint32_t housekeeping_ms;        /* container/TTL scan interval */
	char super_digest[256];          /* "super:BASE64" or empty */
	bool no_read_only;               /* readonlymode.enabled=false (client_zk.c) */
	/* Controller. */
	uint32_t broker_session_timeout_ms;
	uint32_t leader_rebalance_interval_ms; /* preferred-leader pass; 0 = never */
	/* Authentication (docs/security.md). */
	char cluster_secret_file[NODE_PATH_SIZE];
	bool insecure_peers;               /* no secret: anyone may join the peer port */
	uint32_t peer_handshake_timeout_ms;
	uint32_t max_peer_handshakes;      /* unauthenticated peer connections at once */
	char four_letter_whitelist[256];   /* 4lw.commands.whitelist: words or "*" */
	/* The change feed (docs/change-feed.md). */
	uint64_t feed_retain_bytes;        /* history of changes held in memory */
	/* SASL for ZooKeeper clients (node/sasl_load.h); all empty: none. */
	char sasl_users_file[NODE_PATH_SIZE];
	char jaas_file[NODE_PATH_SIZE];
	char sasl_super_user[256];
	/* TLS (docs/security.md); empty strings: off. */
	char secure_listen[NODE_ADDR_SIZE]; /* secure client port */
	uint32_t secure_client_port;       /* zoo.cfg secureClientPort: on --listen's host */
	char tls_cert[NODE_PATH_SIZE];
	char tls_key[NODE_PATH_SIZE];
	char tls_ca[NODE_PATH_SIZE];       /* client certificates: x509 identity */
	char x509_super_user[512];         /* a client certificate's DN that is super */
	char peer_tls_cert[NODE_PATH_SIZE];
	char peer_tls_key[NODE_PATH_SIZE];
	char peer_tls_ca[NODE_PATH_SIZE];
};

/* True when the four-letter word is on cfg's whitelist. */
bool node_config_4lw_allowed(const struct node_config *cfg, const char word[4]);

/* Defaults for every field (no members, no id). */
void node_config_defaults(struct node_config *cfg);

/* Parses argv (after the subcommand name) and, if given, the --config file.
 * On error writes a message to err and returns KEEL_CONFIG. Sets *help when
 * --help was asked for. */
enum keel_err node_config_parse(struct node_config *cfg, int argc, char **argv, bool *help,
				char *err, size_t err_size);

/* Parses "1=host:port,2=host:port". */
enum keel_err node_parse_cluster(const char *text, struct node_member *out, size_t max,
				 size_t *count, char *err, size_t err_size);

void node_config_help(FILE *out);

#endif
