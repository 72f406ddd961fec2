/*
 * kafka_conn.h — the blocking Kafka connection the small CLI clients share
 * (`keel produce`, `keel consume`, `keel groups`): one socket, one request
 * at a time, responses decoded with src/kafka.
 *
 * A decoded response lives in k->arena and k->frame: it is valid until the
 * next kclient_call (copy what must outlive it).
 */
#ifndef KEEL_CLI_KAFKA_CONN_H
#define KEEL_CLI_KAFKA_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "kafka/api.h"

struct kclient {
	const char *who; /* prefix of error messages */
	int fd;
	int32_t correlation_id;
	struct keel_arena arena;
	struct kafka_limits limits;
	uint8_t *frame;
	size_t frame_cap;
};

/* A connected socket to HOST:PORT, or -1 (the error is printed). */
int kclient_dial(const char *who, const char *hostport);

/* Sends one request on k->fd and decodes its response into `resp`; false
 * (printed) when the connection fails or the response does not decode. */
bool kclient_call(struct kclient *k, int16_t api_key, int16_t version, const void *body,
                  void *resp);

#endif
