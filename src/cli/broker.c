/*
 * broker.c — `keel broker`: a Kafka-style broker's side of the controller
 * (docs/controller.md). It registers, heartbeats, follows the metadata log
 * into its own image, logs every change of its role in a partition, asks
 * for ISR changes as a partition leader, and shuts down in a controlled way
 * on SIGTERM (ISR changes are asked for by the loop thread, which sees the
 * followers' progress, through forward_admin). It also serves Kafka clients on --host/--port from partition
 * logs under --data-dir: broker_server.c runs that on its own thread and
 * gets every new image from here (docs/brokers.md).
 *
 *	keel broker --id N --servers HOSTS --data-dir DIR [--rack R]
 *	            [--host H] [--port P] [--heartbeat-interval-ms MS]
 *	            [--fetch-interval-ms MS] [--shutdown-timeout-ms MS]
 *	            [--handshake-timeout-ms MS] [--metrics-port P]
 *
 *   START --BrokerRegistration--> REGISTERED, fenced
 *         (DUPLICATE_BROKER_REGISTRATION while an earlier run's session
 *          lives: retried)
 *   REGISTERED --heartbeat once its image has the registration--> ACTIVE
 *   ACTIVE --heartbeats missed for the session timeout--> fenced by the
 *          controller; the next heartbeat unfences it again
 *   STALE_BROKER_EPOCH / BROKER_ID_NOT_REGISTERED --> registers again
 *   SIGTERM/SIGINT --> SHUTTING DOWN: heartbeats want_shutdown until the
 *          controller answers should_shut_down (its leaderships have moved),
 *          fetches at least up to the index that answer was sent at
 *          (ReplyHeader.zxid) and until its own image shows it leads
 *          nothing, exits 0
 *
 * Role changes come from meta_follower (follower.h) and are logged exactly
 * as it formats them (except while replaying the log at start: roles held
 * on the way are not announced; once caught up, the roles held then are
 * logged in the same form): `leader of sensor-data-0 at epoch 3`,
 * `follower of sensor-data-0 at epoch 3 (leader: Broker-2)`,
 * `no longer a replica of sensor-data-0`. The broker leads a partition
 * exactly when its image — the committed log up to its offset — says so.
 *
 * This thread holds one ZooKeeper session (src/client); the session only carries
 * the requests, liveness is the heartbeats. --data-dir holds
 * meta.properties (the broker id it belongs to) and a lock, so that two
 * brokers never share one directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/assert.h"
#include "cli/broker_server.h"
#include "cli/cli.h"
#include "cli/meta_cli.h"
#include "meta/follower.h"
#include "meta/proto.h"
#include "net/tls.h"
#include "node/peer_auth.h"
#include "node/sasl_load.h"
#include "os/clock.h"
#include "os/log.h"

#define FETCH_MAX_BYTES (1 << 20)
#define FETCH_ROUNDS 16
#define RETRY_MS 200
#define KC_SESSION_TIMEOUT_MS 10000
#define KC_CALL_TIMEOUT_MS 5000
#define ADMIN_POLL_MS 50u

struct broker_options {
	int32_t id;
	const char *servers;
	const char *data_dir;
	const char *rack;
	const char *host;
	uint16_t port;
	uint16_t advertised_port; /* registered endpoint's port; 0: --port */
	uint16_t metrics_port;
	int heartbeat_ms;
	int fetch_ms;
	int shutdown_timeout_ms;
	int duplicate_id_timeout_ms;
	int handshake_timeout_ms;
	int retention_check_ms;
	int hw_checkpoint_ms;
	const char *log_level;
	const char *secret_file;    /* --cluster-secret-file */
	struct peer_auth_keys keys; /* loaded from it */
	const char *sasl_users_file;   /* --sasl-users-file */
	struct sasl_users *sasl_users; /* loaded from it; NULL: no SASL on the listener */
	const char *tls_cert;       /* --listener-tls-cert: TLS on the Kafka listener */
	const char *tls_key;
	const char *tls_ca;
};

struct broker {
	struct broker_options opt;
	struct kc_client kc;
	bool kc_open;
	struct meta_follower follower;
	struct keel_arena arena;
	struct keel_wbuf req;
	uint8_t incarnation[META_UUID_SIZE];
	int64_t epoch; /* -1: not registered */
	bool fenced;
	bool caught_up;
	bool waiting_logged;
	bool replaying;          /* catching up with the metadata log at start: roles not logged */
	uint64_t duplicate_since_ms; /* first DUPLICATE_BROKER_REGISTRATION of a run; 0: none */
	uint64_t unreachable_since_ms; /* first failed call of a run of failures; 0: reachable */
	uint64_t unreachable_logged_ms;
	bool shutting_down;
	bool should_shut_down;
	bool failed;
	bool proved; /* this session proved the cluster credential */
	uint64_t shutdown_deadline_ms;
	int64_t shutdown_index; /* the server's applied index when it said should_shut_down */
	int64_t fetched_to;     /* the high watermark of the last fetch that caught up */
	uint64_t next_register_ms;
	uint64_t next_heartbeat_ms;
	uint64_t next_fetch_ms;
	struct broker_server *server; /* the Kafka listener (broker_server.c) */
	int64_t offered_offset;       /* image offset last handed to it */
};

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static int usage(FILE *out)
{
	fprintf(out,
		"usage: keel broker --id N --servers HOSTS --data-dir DIR [--rack R]\n"
		"                   [--advertised-port P]\n"
		"                   [--host H] [--port P] [--heartbeat-interval-ms MS]\n"
		"                   [--fetch-interval-ms MS] [--shutdown-timeout-ms MS]\n"
		"                   [--duplicate-id-timeout-ms MS] [--handshake-timeout-ms MS]\n"
		"                   [--retention-check-interval-ms MS] [--metrics-port P]\n"
		"                   [--hw-checkpoint-interval-ms MS]\n"
		"                   [--log-level LEVEL] [--cluster-secret-file FILE]\n"
		"                   [--sasl-users-file FILE]\n"
		"                   [--listener-tls-cert FILE --listener-tls-key FILE\n"
		"                    --listener-tls-ca FILE]\n\n"
		"Runs a broker: registers with the controller, heartbeats (default every\n"
		"2000 ms), follows the metadata log (polled every 200 ms) and logs every\n"
		"change of its partition roles. SIGTERM does a controlled shutdown.\n"
		"It registers --advertised-port (default --port: another one when a\n"
		"proxy stands in front).\n"
		"If another live broker holds the id for --duplicate-id-timeout-ms\n"
		"(default 30000: longer than a dead broker's session lasts), it exits 1.\n"
		"Serves Kafka clients on --host:--port (default 127.0.0.1:9092) from\n"
		"partition logs under --data-dir; a client that sends no whole request\n"
		"within --handshake-timeout-ms (default 10000) is disconnected.\n"
		"Every --retention-check-interval-ms (default 300000, Kafka's\n"
		"log.retention.check.interval.ms) it deletes the old segments that the\n"
		"topics' retention.ms / retention.bytes no longer keep.\n"
		"Every --hw-checkpoint-interval-ms (default 5000, Kafka's\n"
		"replica.high.watermark.checkpoint.interval.ms) and at a clean stop it\n"
		"writes its partitions' high watermarks to DIR/replication-offset-checkpoint;\n"
		"after a restart each partition starts from its checkpointed one.\n"
		"With --cluster-secret-file (the servers' secret) it proves on its\n"
		"session that it belongs to the cluster; servers that have a secret\n"
		"refuse registrations and heartbeats without it.\n"
		"With --sasl-users-file (NAME:PASSWORD lines) the listener requires SASL\n"
		"(SASL_PLAINTEXT: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) before any other\n"
		"request but ApiVersions.\n"
		"--metrics-port serves Prometheus metrics on http://HOST:P/metrics\n"
		"(replication health, request rates and latencies; default: none).\n"
		"--listener-tls-cert/-key put the Kafka listener inside TLS (clients use\n"
		"security.protocol=SSL); --listener-tls-ca is the CA of the brokers'\n"
		"certificates: replica fetchers verify leaders with it and present\n"
		"their own, and a client certificate, when presented, must chain to it.\n");
	return out == stdout ? 0 : 2;
}

/* With SASL on the listener the brokers replicate from each other as
 * BROKER_REPLICA_SASL_USER, whose password is derived from the cluster
 * secret (its current key): HMAC-SHA256(key, "keel-broker-sasl-v1") in hex.
 * It is added to the users table; a users file may not define that name. */
static bool replica_sasl_setup(struct broker_options *o, char password[2 * 32 + 1])
{
	password[0] = '\0';
	if (o->secret_file == NULL) {
		if (o->sasl_users != NULL) {
			KEEL_WARN("--sasl-users-file without --cluster-secret-file: other brokers "
				  "cannot authenticate to this listener, so partitions led here do "
				  "not replicate");
		}
		return true;
	}
	/* With a cluster secret the listener always knows the brokers' own
	 * user: replica fetches must prove it (broker_server.c, OFFERED). */
	if (o->sasl_users == NULL) {
		o->sasl_users = calloc(1, sizeof(*o->sasl_users));
		if (o->sasl_users == NULL) {
			fprintf(stderr, "keel broker: out of memory\n");
			return false;
		}
		sasl_users_init(o->sasl_users);
	}
	static const char label[] = "keel-broker-sasl-v1";
	uint8_t mac[32];
	unsigned int n = 0;
	if (HMAC(EVP_sha256(), o->keys.key[0].bytes, (int)o->keys.key[0].size,
		 (const uint8_t *)label, sizeof(label) - 1, mac, &n) == NULL ||
	    n != sizeof(mac)) {
		fprintf(stderr, "keel broker: cannot derive the brokers' SASL password\n");
		return false;
	}
	peer_auth_hex(mac, sizeof(mac), password);
	enum keel_err rc = sasl_users_add(o->sasl_users, BROKER_REPLICA_SASL_USER,
					  strlen(BROKER_REPLICA_SASL_USER), password,
					  strlen(password));
	if (rc != KEEL_OK) {
		fprintf(stderr, "keel broker: %s: the user name %s is reserved for the brokers\n",
			o->sasl_users_file, BROKER_REPLICA_SASL_USER);
		return false;
	}
	return true;
}

static bool parse_int(const char *text, long min, long max, long *out)
{
	char *end = NULL;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || v < min || v > max) {
		return false;
	}
	*out = v;
	return true;
}

static bool parse_options(struct broker_options *o, int argc, char **argv)
{
	memset(o, 0, sizeof(*o));
	o->id = -1;
	o->host = "127.0.0.1";
	o->port = 9092;
	o->heartbeat_ms = 2000;
	o->fetch_ms = 200;
	o->shutdown_timeout_ms = 15000;
	o->duplicate_id_timeout_ms = 30000;
	o->handshake_timeout_ms = 10000;
	o->retention_check_ms = 300000;
	o->hw_checkpoint_ms = 5000;
	o->log_level = "info";
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (i + 1 >= argc) {
			fprintf(stderr, "keel broker: '%s' needs a value\n", arg);
			return false;
		}
		const char *v = argv[++i];
		long n = 0;
		if (strcmp(arg, "--id") == 0 && parse_int(v, 0, INT32_MAX, &n)) {
			o->id = (int32_t)n;
		} else if (strcmp(arg, "--servers") == 0) {
			o->servers = v;
		} else if (strcmp(arg, "--data-dir") == 0) {
			o->data_dir = v;
		} else if (strcmp(arg, "--rack") == 0) {
			o->rack = v;
		} else if (strcmp(arg, "--host") == 0) {
			o->host = v;
		} else if (strcmp(arg, "--port") == 0 && parse_int(v, 1, 65535, &n)) {
			o->port = (uint16_t)n;
		} else if (strcmp(arg, "--advertised-port") == 0 && parse_int(v, 1, 65535, &n)) {
			o->advertised_port = (uint16_t)n;
		} else if (strcmp(arg, "--metrics-port") == 0 && parse_int(v, 0, 65535, &n)) {
			o->metrics_port = (uint16_t)n;
		} else if (strcmp(arg, "--heartbeat-interval-ms") == 0 &&
			   parse_int(v, 10, 600000, &n)) {
			o->heartbeat_ms = (int)n;
		} else if (strcmp(arg, "--fetch-interval-ms") == 0 && parse_int(v, 10, 600000, &n)) {
			o->fetch_ms = (int)n;
		} else if (strcmp(arg, "--shutdown-timeout-ms") == 0 &&
			   parse_int(v, 0, 3600000, &n)) {
			o->shutdown_timeout_ms = (int)n;
		} else if (strcmp(arg, "--duplicate-id-timeout-ms") == 0 &&
			   parse_int(v, 0, 3600000, &n)) {
			o->duplicate_id_timeout_ms = (int)n;
		} else if (strcmp(arg, "--handshake-timeout-ms") == 0 &&
			   parse_int(v, 10, 3600000, &n)) {
			o->handshake_timeout_ms = (int)n;
		} else if (strcmp(arg, "--hw-checkpoint-interval-ms") == 0 &&
			   parse_int(v, 10, 86400000, &n)) {
			o->hw_checkpoint_ms = (int)n;
		} else if (strcmp(arg, "--retention-check-interval-ms") == 0 &&
			   parse_int(v, 10, 86400000, &n)) {
			o->retention_check_ms = (int)n;
		} else if (strcmp(arg, "--cluster-secret-file") == 0) {
			char err[512];
			if (peer_auth_load_file(v, &o->keys, err, sizeof(err)) != KEEL_OK) {
				fprintf(stderr, "keel broker: %s\n", err);
				return false;
			}
			o->secret_file = v;
		} else if (strcmp(arg, "--sasl-users-file") == 0) {
			char err[512];
			node_sasl_free(o->sasl_users);
			if (node_sasl_load(v, "", &o->sasl_users, err, sizeof(err)) != KEEL_OK) {
				fprintf(stderr, "keel broker: %s\n", err);
				return false;
			}
			o->sasl_users_file = v;
		} else if (strcmp(arg, "--log-level") == 0 && keel_log_parse_level(v) >= 0) {
			o->log_level = v;
		} else if (strcmp(arg, "--listener-tls-cert") == 0) {
			o->tls_cert = v;
		} else if (strcmp(arg, "--listener-tls-key") == 0) {
			o->tls_key = v;
		} else if (strcmp(arg, "--listener-tls-ca") == 0) {
			o->tls_ca = v;
		} else {
			fprintf(stderr, "keel broker: bad option '%s %s'\n", arg, v);
			return false;
		}
	}
	if (o->id < 0 || o->servers == NULL || o->data_dir == NULL) {
		fprintf(stderr, "keel broker: --id, --servers and --data-dir are required\n");
		return false;
	}
	int tls = (o->tls_cert != NULL) + (o->tls_key != NULL) + (o->tls_ca != NULL);
	if (tls != 0 && tls != 3) {
		fprintf(stderr, "keel broker: listener TLS needs all of --listener-tls-cert, "
				"--listener-tls-key and --listener-tls-ca\n");
		return false;
	}
	return true;
}

/* The listener's and the replica fetchers' TLS contexts (both NULL without
 * --listener-tls-*). */
static bool listener_tls_open(const struct broker_options *o, struct net_tls_ctx **listener,
			      struct net_tls_ctx **fetch)
{
	*listener = *fetch = NULL;
	if (o->tls_cert == NULL) {
		return true;
	}
	char err[512];
	struct net_tls_options lo = {o->tls_cert, o->tls_key, o->tls_ca, true, false};
	struct net_tls_options fo = {o->tls_cert, o->tls_key, o->tls_ca, false, false};
	if (net_tls_ctx_new(listener, &lo, err, sizeof(err)) != KEEL_OK ||
	    net_tls_ctx_new(fetch, &fo, err, sizeof(err)) != KEEL_OK) {
		fprintf(stderr, "keel broker: %s\n", err);
		net_tls_ctx_free(*listener);
		*listener = NULL;
		return false;
	}
	KEEL_INFO("Kafka listener in TLS (CA %s)", o->tls_ca);
	return true;
}

/* ---- the data directory ---- */

/* Creates DIR and meta.properties (or checks the id in it) and locks the
 * directory for this process. Returns the lock's fd, or -1 (message
 * printed). */
static int prepare_data_dir(const struct broker_options *o)
{
	if (mkdir(o->data_dir, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "keel broker: cannot create %s: %s\n", o->data_dir, strerror(errno));
		return -1;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/broker.lock", o->data_dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
		fprintf(stderr, "keel broker: %s is in use by another broker (or unwritable): %s\n",
			o->data_dir, strerror(errno));
		if (fd >= 0) {
			close(fd);
		}
		return -1;
	}
	snprintf(path, sizeof(path), "%s/meta.properties", o->data_dir);
	FILE *f = fopen(path, "r");
	if (f != NULL) {
		char line[256];
		long stored = -1;
		while (fgets(line, sizeof(line), f) != NULL) {
			if (strncmp(line, "broker.id=", 10) == 0) {
				line[strcspn(line, "\r\n")] = '\0';
				if (!parse_int(line + 10, 0, INT32_MAX, &stored)) {
					stored = -2;
				}
			}
		}
		fclose(f);
		if (stored != o->id) {
			fprintf(stderr, "keel broker: %s belongs to broker.id %ld, not %d\n",
				o->data_dir, stored, o->id);
			close(fd);
			return -1;
		}
		return fd;
	}
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (f == NULL || fprintf(f, "# keel broker\nversion=1\nbroker.id=%d\n", o->id) < 0 ||
	    fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
		fprintf(stderr, "keel broker: cannot write %s: %s\n", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- requests ---- */

static void log_role_changes(const struct meta_role_change *changes, uint32_t count)
{
	for (uint32_t i = 0; i < count; i++) {
		char line[512];
		struct meta_fmt f;
		meta_fmt_init(&f, line, sizeof(line));
		meta_format_role_change(&f, &changes[i]);
		KEEL_INFO("%s", line);
	}
}

/* Sends the request in b->req; ZK_OK with the reply body, else a
 * ZooKeeper error (logged at debug level: the caller retries). */
/* A call that cannot reach any server is said plainly at WARN: once when
 * it starts failing, then every UNREACHABLE_LOG_MS, and once when it comes
 * back; other failures stay at debug level (the caller retries). */
#define UNREACHABLE_LOG_MS 10000

static void note_reachability(struct broker *b, enum meta_api api, int32_t err)
{
	uint64_t now = meta_cli_now_ms();
	bool unreachable = err == ZK_CONNECTION_LOSS || err == ZK_OPERATION_TIMEOUT;
	if (!unreachable) {
		if (b->unreachable_since_ms != 0) {
			KEEL_INFO("reached the quorum again after %llu ms",
				  (unsigned long long)(now - b->unreachable_since_ms));
		}
		b->unreachable_since_ms = 0;
		return;
	}
	if (b->unreachable_since_ms == 0) {
		b->unreachable_since_ms = now;
		b->unreachable_logged_ms = 0;
	}
	if (b->unreachable_logged_ms == 0 || now - b->unreachable_logged_ms >= UNREACHABLE_LOG_MS) {
		KEEL_WARN("cannot reach the quorum at %s for %llu ms (%s: %s%s%s); retrying",
			  b->opt.servers, (unsigned long long)(now - b->unreachable_since_ms),
			  meta_api_name(api), kc_err_message(err),
			  kc_message(&b->kc)[0] != '\0' ? ", " : "", kc_message(&b->kc));
		b->unreachable_logged_ms = now;
	}
}

static int32_t broker_call(struct broker *b, enum meta_api api, struct kc_raw_reply *reply)
{
	int32_t err = meta_cli_call(&b->kc, api, &b->req, reply);
	if (err == ZK_NO_AUTH) {
		KEEL_ERROR("%s: the servers ask for the cluster credential: run keel broker with "
			   "--cluster-secret-file FILE (the servers' secret)",
			   meta_api_name(api));
		b->failed = true;
		return err;
	}
	if (err != ZK_OK) {
		KEEL_DEBUG("%s: %s (%s)", meta_api_name(api), kc_err_message(err),
			   kc_message(&b->kc));
	}
	note_reachability(b, api, err);
	return err;
}

static void do_register(struct broker *b, uint64_t now)
{
	uint16_t port = b->opt.advertised_port != 0 ? b->opt.advertised_port : b->opt.port;
	struct meta_endpoint ep = {"PLAINTEXT", b->opt.host, port, META_SEC_PLAINTEXT};
	if (b->opt.sasl_users_file != NULL) {
		ep = (struct meta_endpoint){"SASL_PLAINTEXT", b->opt.host, port,
					    META_SEC_SASL_PLAINTEXT};
	}
	struct meta_broker_registration_request rq = {
		.broker_id = b->opt.id,
		.endpoints = &ep,
		.endpoint_count = 1,
		.rack = b->opt.rack,
		.previous_broker_epoch = -1,
	};
	memcpy(rq.incarnation_id, b->incarnation, META_UUID_SIZE);
	keel_wbuf_reset(&b->req);
	meta_encode_broker_registration_request(&b->req, &rq);
	b->next_register_ms = now + RETRY_MS;
	struct kc_raw_reply reply;
	if (broker_call(b, META_API_BROKER_REGISTRATION, &reply) != ZK_OK) {
		return;
	}
	struct meta_broker_registration_response rs;
	keel_arena_reset(&b->arena);
	if (meta_decode_broker_registration_response(reply.body, reply.body_size, &b->arena, &rs,
						     NULL) != KEEL_OK) {
		KEEL_WARN("BrokerRegistration: the reply does not decode");
		return;
	}
	switch (rs.error) {
	case META_ERR_NONE:
		b->duplicate_since_ms = 0;
		b->epoch = rs.broker_epoch;
		b->fenced = true;
		b->caught_up = false;
		b->next_heartbeat_ms = now;
		KEEL_INFO("registered with broker epoch %" PRId64 " (fenced until caught up)",
			  b->epoch);
		return;
	case META_ERR_NOT_CONTROLLER:
		return;
	case META_ERR_DUPLICATE_BROKER_REGISTRATION:
		if (b->duplicate_since_ms == 0) {
			b->duplicate_since_ms = now;
		}
		if (now - b->duplicate_since_ms >= (uint64_t)b->opt.duplicate_id_timeout_ms) {
			/* A dead run's session would have expired by now: the id
			 * belongs to a broker that is alive and heartbeating. */
			KEEL_ERROR("broker id %d is taken by another live broker (still registered "
				   "after %d ms): exiting; give this broker another --id",
				   b->opt.id, b->opt.duplicate_id_timeout_ms);
			b->failed = true;
			return;
		}
		if (!b->waiting_logged) {
			KEEL_INFO("broker %d is still registered by an earlier run: waiting for its "
				  "session to expire",
				  b->opt.id);
			b->waiting_logged = true;
		}
		b->next_register_ms = now + 500;
		return;
	default:
		KEEL_WARN("registration refused: %s%s%s", meta_error_name(rs.error),
			  rs.error_message ? ": " : "", rs.error_message ? rs.error_message : "");
		b->next_register_ms = now + 1000;
		return;
	}
}

static void do_heartbeat(struct broker *b, uint64_t now)
{
	struct meta_broker_heartbeat_request rq = {b->opt.id, b->epoch,
						   meta_follower_offset(&b->follower), false,
						   b->shutting_down};
	keel_wbuf_reset(&b->req);
	meta_encode_broker_heartbeat_request(&b->req, &rq);
	b->next_heartbeat_ms = now + RETRY_MS;
	struct kc_raw_reply reply;
	if (broker_call(b, META_API_BROKER_HEARTBEAT, &reply) != ZK_OK) {
		return;
	}
	struct meta_broker_heartbeat_response rs;
	keel_arena_reset(&b->arena);
	if (meta_decode_broker_heartbeat_response(reply.body, reply.body_size, &b->arena, &rs,
						  NULL) != KEEL_OK) {
		KEEL_WARN("BrokerHeartbeat: the reply does not decode");
		return;
	}
	if (rs.error == META_ERR_STALE_BROKER_EPOCH || rs.error == META_ERR_BROKER_ID_NOT_REGISTERED) {
		KEEL_WARN("registration with epoch %" PRId64 " is gone (%s): registering again",
			  b->epoch, meta_error_name(rs.error));
		b->epoch = -1;
		b->next_register_ms = now;
		return;
	}
	if (rs.error != META_ERR_NONE) {
		if (rs.error != META_ERR_NOT_CONTROLLER) {
			KEEL_WARN("heartbeat: %s", meta_error_name(rs.error));
		}
		return;
	}
	if (rs.is_fenced != b->fenced) {
		KEEL_INFO("%s", rs.is_fenced ? "fenced by the controller" : "unfenced: active");
	}
	b->fenced = rs.is_fenced;
	b->caught_up = rs.is_caught_up;
	if (rs.should_shut_down && b->shutting_down && !b->should_shut_down) {
		KEEL_INFO("the controller moved this broker's leaderships: may shut down");
		b->should_shut_down = true;
		/* The reply was sent once the server had applied the move: fetch
		 * at least that far before checking the own image. */
		b->shutdown_index = reply.zxid;
		b->next_fetch_ms = now;
	}
	int interval = b->opt.heartbeat_ms;
	if (b->shutting_down || b->fenced || !b->caught_up) {
		interval = KEEL_MIN(interval, 250);
	}
	b->next_heartbeat_ms = now + (uint64_t)interval;
}

/* One FetchMetadata round; false when there is nothing more to fetch now. */
/* After the replay at start: the roles this broker holds now, in the same
 * lines as a change (the roles it held on the way are not announced). */
static void log_current_roles(struct broker *b)
{
	const struct meta_image *img = &b->follower.image;
	uint32_t leads = 0, follows = 0;
	for (uint32_t t = 0; t < img->topic_count; t++) {
		const struct meta_topic *topic = img->topics[t];
		for (uint32_t p = 0; p < topic->partition_count; p++) {
			const struct meta_partition *part = &topic->partitions[p];
			if (!meta_list_contains(part->replicas, part->replica_count, b->opt.id)) {
				continue;
			}
			struct meta_role_change c;
			memset(&c, 0, sizeof(c));
			c.topic = topic->name;
			memcpy(c.topic_id, topic->id, META_UUID_SIZE);
			c.partition_id = (int32_t)p;
			c.old_role = META_ROLE_NONE;
			c.new_role = part->leader == b->opt.id ? META_ROLE_LEADER : META_ROLE_FOLLOWER;
			c.leader = part->leader;
			c.leader_epoch = part->leader_epoch;
			c.partition_epoch = part->partition_epoch;
			leads += c.new_role == META_ROLE_LEADER ? 1u : 0u;
			follows += c.new_role == META_ROLE_FOLLOWER ? 1u : 0u;
			log_role_changes(&c, 1);
		}
	}
	KEEL_INFO("caught up with the metadata log at offset %" PRId64
		  ": leader of %u and follower of %u partitions",
		  meta_follower_offset(&b->follower), leads, follows);
}

static bool fetch_once(struct broker *b)
{
	struct meta_fetch_metadata_request rq = {meta_follower_offset(&b->follower) + 1,
						 FETCH_MAX_BYTES};
	keel_wbuf_reset(&b->req);
	meta_encode_fetch_metadata_request(&b->req, &rq);
	struct kc_raw_reply reply;
	if (broker_call(b, META_API_FETCH_METADATA, &reply) != ZK_OK) {
		return false;
	}
	struct meta_fetch_metadata_response rs;
	struct meta_errbuf eb;
	memset(&eb, 0, sizeof(eb));
	keel_arena_reset(&b->arena);
	if (meta_decode_fetch_metadata_response(reply.body, reply.body_size, &b->arena, &rs, &eb) !=
	    KEEL_OK) {
		KEEL_WARN("FetchMetadata: the reply does not decode: %s", eb.msg);
		return false;
	}
	if (rs.error != META_ERR_NONE) {
		KEEL_WARN("FetchMetadata: %s", meta_error_name(rs.error));
		return false;
	}
	const struct meta_role_change *changes;
	uint32_t count = 0;
	if (rs.snapshot_offset >= 0) {
		if (meta_follower_load_snapshot(&b->follower, rs.snapshot, rs.snapshot_size,
						&changes, &count, &eb) != KEEL_OK) {
			KEEL_ERROR("the metadata image at offset %" PRId64 " does not load: %s",
				   rs.snapshot_offset, eb.msg);
			b->failed = true;
			return false;
		}
		KEEL_INFO("loaded the metadata image at offset %" PRId64, rs.snapshot_offset);
		if (!b->replaying) {
			log_role_changes(changes, count);
		}
	}
	for (uint32_t i = 0; i < rs.batch_count; i++) {
		const struct meta_fetch_batch *mb = &rs.batches[i];
		if (meta_follower_apply(&b->follower, mb->offset, mb->data, mb->size, &changes,
					&count, &eb) != KEEL_OK) {
			KEEL_ERROR("the metadata batch at offset %" PRId64 " cannot be applied: %s "
				   "(is this broker older than the servers?)",
				   mb->offset, eb.msg);
			b->failed = true;
			return false;
		}
		if (!b->replaying) {
			log_role_changes(changes, count);
		}
	}
	bool more = rs.batch_count > 0 && meta_follower_offset(&b->follower) < rs.high_watermark;
	if (!more) {
		b->fetched_to = KEEL_MAX(b->fetched_to, rs.high_watermark);
		if (b->replaying) {
			b->replaying = false;
			log_current_roles(b);
		}
	}
	return more;
}

static void do_fetch(struct broker *b, uint64_t now)
{
	for (int i = 0; i < FETCH_ROUNDS && !b->failed && fetch_once(b); i++) {
	}
	int64_t offset = meta_follower_offset(&b->follower);
	if (b->server != NULL && offset != b->offered_offset) {
		broker_server_offer_image(b->server, &b->follower.image);
		b->offered_offset = offset;
	}
	b->next_fetch_ms = now + (uint64_t)b->opt.fetch_ms;
}

/* Does this broker's image still make it the leader of any partition? */
static bool leads_anything(const struct broker *b)
{
	const struct meta_image *img = &b->follower.image;
	for (uint32_t t = 0; t < img->topic_count; t++) {
		const struct meta_topic *topic = img->topics[t];
		for (uint32_t p = 0; p < topic->partition_count; p++) {
			if (topic->partitions[p].leader == b->opt.id) {
				return true;
			}
		}
	}
	return false;
}

/* Admin requests from Kafka clients, forwarded to the controller as the
 * CLI sends them (broker_server.h); one call each, no retry: a client
 * retries on REQUEST_TIMED_OUT or NOT_CONTROLLER itself. */
static void forward_admin(struct broker *b)
{
	struct broker_admin_job *job;
	enum meta_api api;
	const struct keel_wbuf *body;
	while (b->server != NULL && broker_server_take_admin(b->server, &job, &api, &body)) {
		struct kc_raw_reply reply;
		int32_t err = meta_cli_call(&b->kc, api, body, &reply);
		note_reachability(b, api, err);
		if (err != ZK_OK) {
			KEEL_INFO("forwarding %s for a Kafka client: %s", meta_api_name(api),
				  kc_err_message(err));
			broker_server_admin_done(b->server, job, NULL, 0);
		} else {
			KEEL_DEBUG("forwarded %s for a Kafka client", meta_api_name(api));
			broker_server_admin_done(b->server, job, reply.body, reply.body_size);
		}
	}
}

/* ---- the loop ---- */

static bool ensure_session(struct broker *b)
{
	if (b->kc_open) {
		enum kc_state st = kc_state(&b->kc);
		if (st != KC_EXPIRED && st != KC_AUTH_FAILED && st != KC_CLOSED) {
			return true;
		}
		KEEL_INFO("ZooKeeper session ended: opening a new one");
		kc_close(&b->kc);
		b->kc_open = false;
	}
	struct kc_options opt;
	memset(&opt, 0, sizeof(opt));
	opt.servers = b->opt.servers;
	opt.session_timeout_ms = KC_SESSION_TIMEOUT_MS;
	opt.call_timeout_ms = KC_CALL_TIMEOUT_MS;
	if (kc_init(&b->kc, &opt) != KEEL_OK) {
		KEEL_ERROR("cannot set up a client for %s: %s", b->opt.servers, kc_message(&b->kc));
		b->failed = true;
		return false;
	}
	b->kc_open = true;
	b->proved = false;
	return true;
}

/* Proves the cluster credential on a new session (nothing to prove without
 * --cluster-secret-file). False while it could not yet: after a pause when
 * no server answered, or with b->failed set when the servers refused it. */
static bool ensure_proved(struct broker *b)
{
	if (b->proved) {
		return true;
	}
	int32_t err = meta_cli_prove(&b->kc, b->opt.secret_file != NULL ? &b->opt.keys : NULL,
				     NULL);
	if (err == ZK_OK) {
		b->proved = true;
		return true;
	}
	if (err == ZK_AUTH_FAILED) {
		KEEL_ERROR("the servers refused the cluster credential made from %s: it is not "
			   "their secret",
			   b->opt.secret_file);
		b->failed = true;
		return false;
	}
	note_reachability(b, META_API_BROKER_REGISTRATION, err);
	meta_cli_sleep(&b->kc, RETRY_MS);
	return false;
}

static void wait_for_work(struct broker *b, uint64_t now)
{
	uint64_t next = b->next_fetch_ms;
	uint64_t other = b->epoch < 0 ? b->next_register_ms : b->next_heartbeat_ms;
	next = KEEL_MIN(next, other);
	/* At most ADMIN_POLL_MS, so that forwarded admin requests wait little. */
	int ms = next > now ? (int)KEEL_MIN(next - now, ADMIN_POLL_MS) : 0;
	if (ms == 0 || (stop_requested && !b->shutting_down)) {
		return;
	}
	if (kc_state(&b->kc) == KC_CONNECTED || kc_state(&b->kc) == KC_DISCONNECTED ||
	    kc_state(&b->kc) == KC_IDLE) {
		(void)kc_poll(&b->kc, ms); /* returns early on a signal */
	} else {
		struct timespec ts = {0, (long)ms * 1000000L};
		nanosleep(&ts, NULL);
	}
}

static void begin_shutdown(struct broker *b, uint64_t now)
{
	b->shutting_down = true;
	b->shutdown_deadline_ms = now + (uint64_t)b->opt.shutdown_timeout_ms;
	b->next_heartbeat_ms = now;
	KEEL_INFO("controlled shutdown: asking the controller to move this broker's "
		  "leaderships");
}

static int broker_run(struct broker *b)
{
	for (;;) {
		uint64_t now = meta_cli_now_ms();
		if (stop_requested && !b->shutting_down) {
			begin_shutdown(b, now);
		}
		if (b->shutting_down) {
			if (b->epoch < 0) {
				KEEL_INFO("stopped (was not registered)");
				return 0;
			}
			if (b->should_shut_down && b->fetched_to >= b->shutdown_index &&
			    !leads_anything(b)) {
				KEEL_INFO("controlled shutdown complete: leads no partition");
				return 0;
			}
			if (now >= b->shutdown_deadline_ms) {
				KEEL_WARN("controlled shutdown did not complete within %d ms: "
					  "stopping anyway",
					  b->opt.shutdown_timeout_ms);
				return 1;
			}
		}
		if (b->failed || !ensure_session(b)) {
			return 1;
		}
		if (!ensure_proved(b)) {
			if (b->failed) {
				return 1;
			}
			continue;
		}
		if (b->epoch < 0 && now >= b->next_register_ms) {
			do_register(b, now);
		}
		if (now >= b->next_fetch_ms) {
			do_fetch(b, now);
		}
		if (b->failed) {
			return 1;
		}
		if (b->epoch >= 0 && !b->should_shut_down && now >= b->next_heartbeat_ms) {
			do_heartbeat(b, meta_cli_now_ms());
		}
		/* ISR changes are the loop thread's (it sees the followers'
		 * progress); it sends them through forward_admin with this epoch. */
		broker_server_set_broker_epoch(b->server, b->epoch >= 0 && !b->fenced &&
								  !b->shutting_down
							  ? b->epoch
							  : -1);
		forward_admin(b);
		wait_for_work(b, meta_cli_now_ms());
	}
}

int cli_broker(int argc, char **argv)
{
	static struct broker b;
	memset(&b, 0, sizeof(b));
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		return usage(stdout);
	}
	if (!parse_options(&b.opt, argc, argv)) {
		return usage(stderr);
	}
	char prefix[32];
	snprintf(prefix, sizeof(prefix), "broker=%d", b.opt.id);
	keel_log_set_prefix(prefix);
	keel_log_set_level((enum keel_log_level)keel_log_parse_level(b.opt.log_level));
	char replica_password[2 * 32 + 1];
	if (!replica_sasl_setup(&b.opt, replica_password)) {
		node_sasl_free(b.opt.sasl_users);
		return 1;
	}
	int lock_fd = prepare_data_dir(&b.opt);
	if (lock_fd < 0) {
		return 1;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART: a signal cuts the wait short */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (keel_os_random(b.incarnation, sizeof(b.incarnation)) != KEEL_OK) {
		fprintf(stderr, "keel broker: no random source for the incarnation id\n");
		close(lock_fd);
		return 1;
	}
	b.epoch = -1;
	b.replaying = true;
	meta_follower_init(&b.follower, b.opt.id, NULL);
	keel_arena_init(&b.arena, 64 * 1024);
	keel_wbuf_init_dynamic(&b.req, 1024, 1u << 20);
	char incarnation[META_UUID_TEXT_LEN + 1];
	struct meta_fmt f;
	meta_fmt_init(&f, incarnation, sizeof(incarnation));
	meta_fmt_uuid(&f, b.incarnation);
	KEEL_INFO("keel broker %d (incarnation %s, rack %s) for servers %s, data in %s", b.opt.id,
		  incarnation, b.opt.rack != NULL ? b.opt.rack : "none", b.opt.servers,
		  b.opt.data_dir);
	struct broker_server_options so = {b.opt.id, b.opt.host, b.opt.port, b.opt.data_dir,
					   b.opt.handshake_timeout_ms, 100u << 20,
					   b.opt.retention_check_ms, b.opt.metrics_port,
					   b.opt.hw_checkpoint_ms,
					   b.opt.sasl_users,
					   b.opt.sasl_users_file != NULL,
					   b.opt.secret_file != NULL ? replica_password : NULL,
					   NULL, NULL};
	bool tls_ok = listener_tls_open(&b.opt, &so.listener_tls, &so.fetch_tls);
	b.server = tls_ok ? broker_server_start(&so) : NULL;
	if (b.server == NULL) {
		net_tls_ctx_free(so.listener_tls);
		net_tls_ctx_free(so.fetch_tls);
		meta_follower_close(&b.follower);
		keel_arena_close(&b.arena);
		keel_wbuf_free(&b.req);
		close(lock_fd);
		return 1;
	}
	b.offered_offset = -1;
	int status = broker_run(&b);
	broker_server_stop(b.server);
	net_tls_ctx_free(so.listener_tls);
	net_tls_ctx_free(so.fetch_tls);
	if (b.kc_open) {
		kc_close(&b.kc);
	}
	meta_follower_close(&b.follower);
	keel_arena_close(&b.arena);
	keel_wbuf_free(&b.req);
	close(lock_fd);
	node_sasl_free(b.opt.sasl_users);
	KEEL_INFO("stopped");
	return status;
}
