/*
 * broker_fetcher.h — a broker's follower side on the loop thread: one
 * client connection per leader broker, carrying one request at a time for
 * all the partitions this broker follows there (as Kafka's
 * ReplicaFetcherThread): OffsetForLeaderEpoch for the partitions that must
 * truncate first, else a Fetch from their durable log ends. The broker core
 * (src/broker/replica.c) builds the requests and applies the answers; this
 * file moves the bytes, non-blocking.
 *
 *   per leader: IDLE --connect--> CONNECTING --> READY --request--> WAITING
 *               (with SASL: CONNECTING --> WAITING on SaslHandshake, then on
 *               two SaslAuthenticate rounds of SCRAM --> READY)
 *               --answer--> (HELD while a sync runs) --applied--> READY
 *               any error --> closed, back off, IDLE --> connect again
 *
 * The core is touched only when `busy` says no sync is in flight, and a
 * Fetch is sent only when no partition is dirty, so the offsets it reports
 * are durable.
 */
#ifndef KEEL_CLI_BROKER_FETCHER_H
#define KEEL_CLI_BROKER_FETCHER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "broker/broker.h"

struct broker_fetchers;

struct net_tls_ctx;

/* `sync_in_flight` is read on every step: while true the core is not
 * touched. `tls` (may be NULL: plaintext) is the client context for
 * leaders' TLS listeners; it outlives the fetchers. */
struct broker_fetchers *broker_fetchers_new(uv_loop_t *loop, struct broker_core *core,
                                            const bool *sync_in_flight, struct net_tls_ctx *tls);

/* Leaders' listeners require SASL: authenticate every new connection with
 * SCRAM-SHA-256 as `user` (copied) before any request. */
void broker_fetchers_set_sasl(struct broker_fetchers *f, const char *user, const char *password);

/* After a new image: a fetcher for every leader this broker follows, none
 * for the others. */
void broker_fetchers_update(struct broker_fetchers *f);

/* The core may be touched: apply held answers, send what is due. */
void broker_fetchers_kick(struct broker_fetchers *f);

/* Closes every connection; the memory goes once libuv is done with it. */
void broker_fetchers_close(struct broker_fetchers *f);

/* After the loop has run its close callbacks. */
void broker_fetchers_free(struct broker_fetchers *f);

/* Totals for the log at stop. */
struct broker_fetcher_totals {
	uint64_t fetches;
	uint64_t epoch_requests;
	uint64_t connects;
};
void broker_fetchers_totals(const struct broker_fetchers *f, struct broker_fetcher_totals *out);

#endif
