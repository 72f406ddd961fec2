/*
 * broker_server.h — the Kafka side of `keel broker`: a libuv loop on its own
 * thread that accepts Kafka clients on --host/--port and answers them
 * through the broker core (src/broker). The controller conversation stays
 * on the calling thread (broker.c) and hands each new metadata image over
 * with broker_server_offer_image().
 */
#ifndef KEEL_CLI_BROKER_SERVER_H
#define KEEL_CLI_BROKER_SERVER_H

#include <stdint.h>

#include "meta/image.h"

struct broker_server;

struct broker_server_options {
	int32_t node_id;
	const char *host;
	uint16_t port;
	const char *data_dir;
	int handshake_timeout_ms; /* a connection with no whole request by then is closed */
	uint32_t max_frame_bytes; /* the largest request frame accepted */
};

/* Binds and listens (errors printed, NULL returned), then serves on a new
 * thread with SIGTERM/SIGINT blocked (the caller's thread handles them). */
struct broker_server *broker_server_start(const struct broker_server_options *options);

/* Hands a copy of `img` to the server (the latest offer wins). Any thread. */
void broker_server_offer_image(struct broker_server *s, const struct meta_image *img);

/* Stops serving (waits for syncs in flight), joins the thread, frees. */
void broker_server_stop(struct broker_server *s);

#endif
