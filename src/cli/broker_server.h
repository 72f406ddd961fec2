/*
 * broker_server.h — the Kafka side of `keel broker`: a libuv loop on its own
 * thread that accepts Kafka clients on --host/--port and answers them
 * through the broker core (src/broker). The controller conversation stays
 * on the calling thread (broker.c) and hands each new metadata image over
 * with broker_server_offer_image().
 */
#ifndef KEEL_CLI_BROKER_SERVER_H
#define KEEL_CLI_BROKER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "meta/image.h"
#include "meta/proto.h"

struct broker_server;

struct sasl_users;

struct broker_server_options {
	int32_t node_id;
	const char *host;
	uint16_t port;
	const char *data_dir;
	int handshake_timeout_ms; /* a connection with no whole request by then is closed */
	uint32_t max_frame_bytes; /* the largest request frame accepted */
	int retention_check_ms;   /* how often retention runs */
	uint16_t metrics_port;    /* /metrics on host:metrics_port; 0: none */
	int hw_checkpoint_ms;     /* how often the high-watermark checkpoint is written */
	/* SASL users of the listener (caller owns); NULL: no SASL. Required of
	 * every client when sasl_required, else offered only (the brokers'
	 * own user, for replication: a replica Fetch needs it). */
	const struct sasl_users *sasl_users;
	bool sasl_required;
	/* The replica fetchers authenticate to SASL listeners as
	 * BROKER_REPLICA_SASL_USER with this password; NULL: they do not. */
	const char *replica_sasl_password;
	/* TLS on the listener (net/tls.h; NULL: plaintext), and for this
	 * broker's replica fetchers dialing other brokers' listeners. Both
	 * outlive the server. */
	struct net_tls_ctx *listener_tls;
	struct net_tls_ctx *fetch_tls;
};

/* The brokers' own SASL user, for replication (docs/security.md): its
 * password is derived from the cluster secret, so every broker of the
 * cluster knows it and a users file may not define the name. */
#define BROKER_REPLICA_SASL_USER "keel-broker"

/* Binds and listens (errors printed, NULL returned), then serves on a new
 * thread with SIGTERM/SIGINT blocked (the caller's thread handles them). */
struct broker_server *broker_server_start(const struct broker_server_options *options);

/* Hands a copy of `img` to the server (the latest offer wins). Any thread. */
void broker_server_offer_image(struct broker_server *s, const struct meta_image *img);

/*
 * Admin requests to forward to the controller (docs/brokers.md). The
 * controller thread takes one (false: none waiting), sends `*body` as
 * opcode `*api`, and hands back the reply body (NULL: no answer) with
 * broker_server_admin_done, which copies it. The job belongs to the server.
 */
struct broker_admin_job;
bool broker_server_take_admin(struct broker_server *s, struct broker_admin_job **job,
                              enum meta_api *api, const struct keel_wbuf **body);
void broker_server_admin_done(struct broker_server *s, struct broker_admin_job *job,
                              const void *reply, size_t size);

/* The broker epoch to send AlterPartition with (the loop thread asks for
 * ISR changes as partition leader); -1 while unregistered or fenced. */
void broker_server_set_broker_epoch(struct broker_server *s, int64_t epoch);

/* Stops serving (waits for syncs in flight), joins the thread, frees. */
void broker_server_stop(struct broker_server *s);

#endif
