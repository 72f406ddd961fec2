/*
 * api.h — what a Kafka peer sees first: API keys, the versions keel
 * supports, request/response headers and size-prefixed frames.
 *
 * A frame on the wire is an int32 size, then a header, then the body:
 *
 *   request header v0  api_key i16 | api_version i16 | correlation_id i32
 *                  v1  ... | client_id nullable string (int16 length)
 *                  v2  ... | tagged fields   (client_id stays int16-length)
 *                  (v0 is used only by ControlledShutdown v0, which keel
 *                  does not serve; the header codecs below speak it)
 *   response header v0 correlation_id i32
 *                   v1 ... | tagged fields
 *
 * A request uses header v2 exactly when its version is flexible, else v1;
 * a response uses header v1 when flexible, else v0 — except ApiVersions
 * responses, always header v0 so that a client can read one whatever
 * version it asked for (KIP-511).
 *
 * Ownership: a decoded request (struct kafka_request) holds views into the
 * frame it was decoded from and arrays in the caller's arena; it lives as
 * long as both. Encoders write into a caller's keel_wbuf and allocate
 * nothing else.
 *
 * The "frame" passed to the decoders below is the bytes after the size
 * prefix; kafka_frame_size() reads and checks that prefix.
 */
#ifndef KEEL_KAFKA_API_H
#define KEEL_KAFKA_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "kafka/errors.h"
#include "kafka/io.h"
#include "kafka/msg.h"

enum kafka_api_key {
	KAFKA_API_PRODUCE = 0,
	KAFKA_API_FETCH = 1,
	KAFKA_API_LIST_OFFSETS = 2,
	KAFKA_API_METADATA = 3,
	KAFKA_API_OFFSET_COMMIT = 8,
	KAFKA_API_OFFSET_FETCH = 9,
	KAFKA_API_FIND_COORDINATOR = 10,
	KAFKA_API_JOIN_GROUP = 11,
	KAFKA_API_HEARTBEAT = 12,
	KAFKA_API_LEAVE_GROUP = 13,
	KAFKA_API_SYNC_GROUP = 14,
	KAFKA_API_DESCRIBE_GROUPS = 15,
	KAFKA_API_LIST_GROUPS = 16,
	KAFKA_API_SASL_HANDSHAKE = 17,
	KAFKA_API_API_VERSIONS = 18,
	KAFKA_API_CREATE_TOPICS = 19,
	KAFKA_API_DELETE_TOPICS = 20,
	KAFKA_API_INIT_PRODUCER_ID = 22,
	KAFKA_API_OFFSET_FOR_LEADER_EPOCH = 23,
	KAFKA_API_DESCRIBE_CONFIGS = 32,
	KAFKA_API_ALTER_CONFIGS = 33,
	KAFKA_API_SASL_AUTHENTICATE = 36,
	KAFKA_API_CREATE_PARTITIONS = 37,
	KAFKA_API_DELETE_GROUPS = 42,
	KAFKA_API_INCREMENTAL_ALTER_CONFIGS = 44,
	KAFKA_API_ALTER_PARTITION_REASSIGNMENTS = 45,
	KAFKA_API_LIST_PARTITION_REASSIGNMENTS = 46,
	KAFKA_API_OFFSET_DELETE = 47,
	KAFKA_API_DESCRIBE_CLUSTER = 60,
};

/*
 * APIs come in sets, so that a broker advertises in ApiVersions only what it
 * serves (a client that sees JoinGroup will use groups): pass a mask of
 * these to kafka_api_versions_table() and kafka_encode_unsupported().
 */
enum kafka_api_set {
	KAFKA_SET_CORE = 1 << 0,     /* ApiVersions, Metadata, Produce, Fetch, ... */
	KAFKA_SET_ADMIN = 1 << 1,    /* topics and configs, forwarded to the controller */
	KAFKA_SET_GROUP = 1 << 2,    /* consumer groups and committed offsets */
	KAFKA_SET_PRODUCER = 1 << 3, /* InitProducerId (idempotence) */
	KAFKA_SET_SASL = 1 << 4,     /* SaslHandshake, SaslAuthenticate */
	KAFKA_SET_ALL = (1 << 5) - 1,
};

/* One API keel implements: the versions it advertises in ApiVersions and
 * its codecs walk (the same range), and where flexible versions start. */
struct kafka_api_info {
	int16_t api_key;
	const char *name; /* Kafka's name, e.g. "Metadata" */
	unsigned set;     /* one enum kafka_api_set */
	int16_t min_version;
	int16_t max_version;
	int16_t first_flexible_version; /* INT16_MAX: never flexible */
	size_t request_size;            /* sizeof the request body struct */
	size_t response_size;           /* sizeof the response body struct */
	kafka_walk_fn walk_request;
	kafka_walk_fn walk_response;
};

/* The table, in api_key order (static, never NULL). */
const struct kafka_api_info *kafka_apis(size_t *count);

/* The API with this key, or NULL when keel does not implement it. */
const struct kafka_api_info *kafka_api_find(int16_t api_key);

/* True when keel implements api_key at this version. */
bool kafka_api_supported(int16_t api_key, int16_t version);

/* True when api_key is one of the APIs in `sets` (a mask of enum
 * kafka_api_set): what a broker that serves those sets answers. */
bool kafka_api_in_sets(int16_t api_key, unsigned sets);

/* Whether (api_key, version) is flexible; false for unknown APIs. */
bool kafka_api_flexible(int16_t api_key, int16_t version);

/* Header versions for a supported (api_key, version). */
int kafka_request_header_version(int16_t api_key, int16_t version);
int kafka_response_header_version(int16_t api_key, int16_t version);

/* ---- frames ---- */

/*
 * Reads a frame's int32 size prefix from `data` (at least 4 bytes).
 * KEEL_OK with *frame_size set, KEEL_SHORT with fewer than 4 bytes,
 * KEEL_CORRUPT for a negative size, KEEL_TOOBIG above limits->max_frame_size.
 */
enum keel_err kafka_frame_size(const void *data, size_t size, const struct kafka_limits *limits,
                               uint32_t *frame_size);

struct kafka_request_header {
	int16_t api_key;
	int16_t api_version;
	int32_t correlation_id;
	struct kafka_str client_id; /* header v1+, nullable */
};

/* A decoded request: the header and the body for header.api_key. */
struct kafka_request {
	struct kafka_request_header header;
	union {
#define KAFKA_REQUEST_MEMBER(name) struct kafka_##name##_request name;
		KAFKA_MESSAGES(KAFKA_REQUEST_MEMBER)
#undef KAFKA_REQUEST_MEMBER
	} body;
};

/* The response bodies, for code that handles any of them. */
union kafka_response_body {
#define KAFKA_RESPONSE_MEMBER(name) struct kafka_##name##_response name;
	KAFKA_MESSAGES(KAFKA_RESPONSE_MEMBER)
#undef KAFKA_RESPONSE_MEMBER
};

/*
 * Decodes the common start of every request header (api_key, api_version,
 * correlation_id, and client_id, all of which sit at the same place in
 * headers v1 and v2), whatever the API: enough to answer an unsupported
 * one. Returns KEEL_SHORT/KEEL_CORRUPT when even that is not there.
 */
enum keel_err kafka_decode_request_prefix(const void *frame, size_t size,
                                          struct kafka_request_header *header);

/*
 * Headers alone, at an explicit header version (request 0-2, response
 * 0-1); *header_size is the number of bytes the header took. Decoding
 * skips the header's tagged fields; encoding writes none.
 */
enum keel_err kafka_decode_request_header(const void *data, size_t size, int header_version,
                                          struct keel_arena *arena,
                                          const struct kafka_limits *limits,
                                          struct kafka_request_header *header,
                                          size_t *header_size);
enum keel_err kafka_encode_request_header(struct keel_wbuf *w,
                                          const struct kafka_request_header *header,
                                          int header_version);
enum keel_err kafka_decode_response_header(const void *data, size_t size, int header_version,
                                           struct keel_arena *arena,
                                           const struct kafka_limits *limits,
                                           int32_t *correlation_id, size_t *header_size);
enum keel_err kafka_encode_response_header(struct keel_wbuf *w, int32_t correlation_id,
                                           int header_version);

/*
 * Decodes a whole request frame. KEEL_UNSUPPORTED when the API or version is
 * not supported (header->api_key etc. are still set, so the caller can
 * answer with kafka_encode_unsupported()); other errors as in io.h, with a
 * static description in *why (may be NULL).
 */
enum keel_err kafka_decode_request(const void *frame, size_t size, struct keel_arena *arena,
                                   const struct kafka_limits *limits, struct kafka_request *req,
                                   const char **why);

/* Encodes a whole request frame (size prefix included); `body` is the
 * struct for header->api_key. KEEL_UNSUPPORTED for an unsupported version. */
enum keel_err kafka_encode_request(struct keel_wbuf *w, const struct kafka_request_header *header,
                                   const void *body);

/*
 * Encodes a whole response frame (size prefix included) for a request of
 * (api_key, version). With `splices` non-NULL (Fetch only), each non-empty
 * records field becomes a hole recorded in splices[0..*splice_count) (at
 * most splice_capacity; KEEL_LIMIT past it) and the size prefix counts the
 * records' bytes; see kafka_splice in io.h.
 */
enum keel_err kafka_encode_response(struct keel_wbuf *w, int32_t correlation_id, int16_t api_key,
                                    int16_t version, const void *body, struct kafka_splice *splices,
                                    size_t splice_capacity, size_t *splice_count);

/*
 * Decodes a response frame to a request of (api_key, version) the caller
 * sent: *correlation_id and the body struct `body` (of response_size).
 */
enum keel_err kafka_decode_response(const void *frame, size_t size, int16_t api_key,
                                    int16_t version, struct keel_arena *arena,
                                    const struct kafka_limits *limits, int32_t *correlation_id,
                                    void *body, const char **why);

/* Body-only codecs (no header, no size prefix), for tests and tools. */
enum keel_err kafka_decode_body(const void *data, size_t size, int16_t api_key, int16_t version,
                                bool response, struct keel_arena *arena,
                                const struct kafka_limits *limits, void *body, const char **why);
enum keel_err kafka_encode_body(struct keel_wbuf *w, int16_t api_key, int16_t version,
                                bool response, const void *body);

/*
 * The answer to a request keel cannot serve at its version, done the way
 * Kafka does it: an ApiVersions request of any version gets an ApiVersions
 * v0 response with UNSUPPORTED_VERSION and the table (the APIs in `sets`),
 * so the client can retry with a version both sides know. Any other API key
 * or version has no response it could parse: returns KEEL_UNSUPPORTED and
 * writes nothing — the caller closes the connection (as a Kafka broker
 * does).
 */
enum keel_err kafka_encode_unsupported(struct keel_wbuf *w,
                                       const struct kafka_request_header *header, unsigned sets);

/* The ApiVersions response body advertising the APIs in `sets` (a mask of
 * enum kafka_api_set); api_keys in the arena. error_code NONE, throttle 0. */
enum keel_err kafka_api_versions_table(struct keel_arena *arena, unsigned sets,
                                       struct kafka_api_versions_response *out);

#endif
