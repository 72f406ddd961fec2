/*
 * api.c — the supported-version table, headers and frames (see api.h).
 *
 * The table is in api_key order.
 * The version ranges are chosen so that every client keel is tested with
 * finds a common version: record batches are magic 2 only, so Produce starts
 * at 3 and Fetch at 4; Fetch stops at 12 because 13+ names topics by id.
 */
#include "kafka/api.h"

#include <string.h>

#include "base/assert.h"

#define NEVER INT16_MAX

#define API(key, kname, msg, kset, lo, hi, flex)                                       \
	{                                                                              \
		.api_key = (key), .name = (kname), .set = (kset), .min_version = (lo), \
		.max_version = (hi), .first_flexible_version = (flex),                 \
		.request_size = sizeof(struct kafka_##msg##_request),                  \
		.response_size = sizeof(struct kafka_##msg##_response),                \
		.walk_request = kafka_walk_##msg##_request,                            \
		.walk_response = kafka_walk_##msg##_response,                          \
	}

static const struct kafka_api_info apis[] = {
        API(KAFKA_API_PRODUCE, "Produce", produce, KAFKA_SET_CORE, 3, 9, 9),
        API(KAFKA_API_FETCH, "Fetch", fetch, KAFKA_SET_CORE, 4, 12, 12),
        API(KAFKA_API_LIST_OFFSETS, "ListOffsets", list_offsets, KAFKA_SET_CORE, 1, 7, 6),
        API(KAFKA_API_METADATA, "Metadata", metadata, KAFKA_SET_CORE, 0, 12, 9),
        API(KAFKA_API_OFFSET_COMMIT, "OffsetCommit", offset_commit, KAFKA_SET_GROUP, 0, 8, 8),
        API(KAFKA_API_OFFSET_FETCH, "OffsetFetch", offset_fetch, KAFKA_SET_GROUP, 0, 8, 6),
        API(KAFKA_API_FIND_COORDINATOR, "FindCoordinator", find_coordinator, KAFKA_SET_GROUP, 0, 4,
            3),
        API(KAFKA_API_JOIN_GROUP, "JoinGroup", join_group, KAFKA_SET_GROUP, 0, 9, 6),
        API(KAFKA_API_HEARTBEAT, "Heartbeat", heartbeat, KAFKA_SET_GROUP, 0, 4, 4),
        API(KAFKA_API_LEAVE_GROUP, "LeaveGroup", leave_group, KAFKA_SET_GROUP, 0, 5, 4),
        API(KAFKA_API_SYNC_GROUP, "SyncGroup", sync_group, KAFKA_SET_GROUP, 0, 5, 4),
        API(KAFKA_API_DESCRIBE_GROUPS, "DescribeGroups", describe_groups, KAFKA_SET_GROUP, 0, 5, 5),
        API(KAFKA_API_LIST_GROUPS, "ListGroups", list_groups, KAFKA_SET_GROUP, 0, 4, 3),
        API(KAFKA_API_SASL_HANDSHAKE, "SaslHandshake", sasl_handshake, KAFKA_SET_SASL, 0, 1, NEVER),
        API(KAFKA_API_API_VERSIONS, "ApiVersions", api_versions, KAFKA_SET_CORE, 0, 3, 3),
        API(KAFKA_API_CREATE_TOPICS, "CreateTopics", create_topics, KAFKA_SET_ADMIN, 0, 7, 5),
        API(KAFKA_API_DELETE_TOPICS, "DeleteTopics", delete_topics, KAFKA_SET_ADMIN, 0, 6, 4),
        API(KAFKA_API_INIT_PRODUCER_ID, "InitProducerId", init_producer_id, KAFKA_SET_PRODUCER, 0,
            4, 2),
        API(KAFKA_API_OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", offset_for_leader_epoch,
            KAFKA_SET_CORE, 0, 4, 4),
        API(KAFKA_API_DESCRIBE_CONFIGS, "DescribeConfigs", describe_configs, KAFKA_SET_ADMIN, 0, 4,
            4),
        API(KAFKA_API_SASL_AUTHENTICATE, "SaslAuthenticate", sasl_authenticate, KAFKA_SET_SASL, 0,
            2, 2),
        API(KAFKA_API_CREATE_PARTITIONS, "CreatePartitions", create_partitions, KAFKA_SET_ADMIN, 0,
            3, 2),
        API(KAFKA_API_DELETE_GROUPS, "DeleteGroups", delete_groups, KAFKA_SET_GROUP, 0, 2, 2),
        API(KAFKA_API_INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs",
            incremental_alter_configs, KAFKA_SET_ADMIN, 0, 1, 1),
        API(KAFKA_API_DESCRIBE_CLUSTER, "DescribeCluster", describe_cluster, KAFKA_SET_ADMIN, 0, 1,
            0),
};

_Static_assert(NEVER == INT16_MAX, "NEVER is the largest version");

const struct kafka_api_info *kafka_apis(size_t *count)
{
	*count = KEEL_ARRAY_SIZE(apis);
	return apis;
}

const struct kafka_api_info *kafka_api_find(int16_t api_key)
{
	for (size_t i = 0; i < KEEL_ARRAY_SIZE(apis); i++) {
		if (apis[i].api_key == api_key) {
			return &apis[i];
		}
	}
	return NULL;
}

bool kafka_api_supported(int16_t api_key, int16_t version)
{
	const struct kafka_api_info *api = kafka_api_find(api_key);
	return api != NULL && version >= api->min_version && version <= api->max_version;
}

bool kafka_api_flexible(int16_t api_key, int16_t version)
{
	const struct kafka_api_info *api = kafka_api_find(api_key);
	return api != NULL && version >= api->first_flexible_version;
}

int kafka_request_header_version(int16_t api_key, int16_t version)
{
	KEEL_ASSERT(kafka_api_supported(api_key, version));
	return kafka_api_flexible(api_key, version) ? 2 : 1;
}

int kafka_response_header_version(int16_t api_key, int16_t version)
{
	KEEL_ASSERT(kafka_api_supported(api_key, version));
	if (api_key == KAFKA_API_API_VERSIONS) {
		return 0;
	}
	return kafka_api_flexible(api_key, version) ? 1 : 0;
}

enum keel_err kafka_frame_size(const void *data, size_t size, const struct kafka_limits *limits,
                               uint32_t *frame_size)
{
	if (size < 4) {
		return KEEL_SHORT;
	}
	int32_t n = (int32_t)keel_load_be32(data);
	if (n < 0) {
		return KEEL_CORRUPT;
	}
	if ((uint32_t)n > limits->max_frame_size) {
		return KEEL_TOOBIG;
	}
	*frame_size = (uint32_t)n;
	return KEEL_OK;
}

/* ---- headers ---- */

/* The fixed part and client_id, as laid out in headers v1 and v2. */
static void walk_header_start(struct kafka_io *io, struct kafka_request_header *h)
{
	bool flexible = io->flexible;
	kio_i16(io, &h->api_key);
	kio_i16(io, &h->api_version);
	kio_i32(io, &h->correlation_id);
	io->flexible = false; /* client_id keeps its int16 length in v2 */
	kio_str(io, &h->client_id, true);
	io->flexible = flexible;
}

enum keel_err kafka_decode_request_prefix(const void *frame, size_t size,
                                          struct kafka_request_header *header)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, frame, size);
	header->api_key = kafka_read_i16(&r);
	header->api_version = kafka_read_i16(&r);
	header->correlation_id = keel_rbuf_i32(&r);
	int16_t len = kafka_read_i16(&r);
	if (!keel_rbuf_ok(&r)) {
		return KEEL_SHORT;
	}
	if (len < -1) {
		return KEEL_CORRUPT;
	}
	const uint8_t *p = len > 0 ? keel_rbuf_bytes(&r, (size_t)len) : NULL;
	if (!keel_rbuf_ok(&r)) {
		return KEEL_SHORT;
	}
	header->client_id = (struct kafka_str){len == 0 ? "" : (const char *)p, len};
	return KEEL_OK;
}

static void set_why(const char **why, const char *text)
{
	if (why != NULL) {
		*why = text;
	}
}

/* Walks a body that starts at the reader's position of `outer`, which must
 * then have been fully consumed. */
static enum keel_err decode_rest(const struct kafka_api_info *api, bool response,
                                 const uint8_t *data, size_t size, int16_t version,
                                 struct keel_arena *arena, const struct kafka_limits *limits,
                                 void *body, const char **why)
{
	memset(body, 0, response ? api->response_size : api->request_size);
	struct kafka_io io;
	kafka_io_reader(&io, data, size, version, version >= api->first_flexible_version, arena,
	                limits);
	(response ? api->walk_response : api->walk_request)(&io, body);
	enum keel_err err = kafka_io_finish(&io);
	set_why(why, io.why);
	return err;
}

enum keel_err kafka_decode_request(const void *frame, size_t size, struct keel_arena *arena,
                                   const struct kafka_limits *limits, struct kafka_request *req,
                                   const char **why)
{
	memset(&req->header, 0, sizeof(req->header));
	set_why(why, NULL);
	enum keel_err err = kafka_decode_request_prefix(frame, size, &req->header);
	if (err != KEEL_OK) {
		set_why(why, "the request header is cut short or corrupt");
		return err;
	}
	const struct kafka_request_header *h = &req->header;
	const struct kafka_api_info *api = kafka_api_find(h->api_key);
	if (api == NULL || !kafka_api_supported(h->api_key, h->api_version)) {
		set_why(why, api == NULL ? "unknown API key" : "unsupported API version");
		return KEEL_UNSUPPORTED;
	}
	size_t pos = 10 + (h->client_id.len > 0 ? (size_t)h->client_id.len : 0u);
	const uint8_t *p = (const uint8_t *)frame + pos;
	size_t left = size - pos;
	bool flexible = kafka_api_flexible(h->api_key, h->api_version);
	if (flexible) {
		/* Header v2 ends with tagged fields (none known: all skipped). */
		struct kafka_io io;
		kafka_io_reader(&io, p, left, h->api_version, true, arena, limits);
		kio_no_tags(&io);
		if (!kafka_io_ok(&io)) {
			set_why(why,
			        io.err != KEEL_OK ? io.why : "the request header is cut short");
			return io.err != KEEL_OK ? io.err : KEEL_SHORT;
		}
		p += io.r.pos;
		left -= io.r.pos;
	}
	return decode_rest(api, false, p, left, h->api_version, arena, limits, &req->body, why);
}

/* Writes the body with a size prefix patched over `total extra` bytes. */
static enum keel_err encode_body_into(struct keel_wbuf *w, const struct kafka_api_info *api,
                                      int16_t version, bool response, const void *body,
                                      struct kafka_splice *splices, size_t splice_capacity,
                                      size_t *splice_count)
{
	struct kafka_io io;
	kafka_io_writer(&io, w, version, version >= api->first_flexible_version);
	io.splices = splices;
	io.splice_capacity = splice_capacity;
	(response ? api->walk_response : api->walk_request)(&io, (void *)body);
	if (splice_count != NULL) {
		*splice_count = io.splice_count;
	}
	return kafka_io_finish(&io);
}

/* Patches the size prefix at `start` to cover everything written since
 * plus `extra` bytes the caller will splice in. */
static enum keel_err finish_frame(struct keel_wbuf *w, size_t start, uint64_t extra)
{
	uint64_t n = (uint64_t)(w->size - start - 4) + extra;
	if (n > INT32_MAX) {
		return KEEL_TOOBIG;
	}
	keel_wbuf_patch_u32(w, start, (uint32_t)n);
	return keel_wbuf_ok(w) ? KEEL_OK : KEEL_TOOBIG;
}

enum keel_err kafka_encode_request(struct keel_wbuf *w, const struct kafka_request_header *header,
                                   const void *body)
{
	const struct kafka_api_info *api = kafka_api_find(header->api_key);
	if (api == NULL || !kafka_api_supported(header->api_key, header->api_version)) {
		return KEEL_UNSUPPORTED;
	}
	size_t start = w->size;
	keel_wbuf_u32(w, 0);
	struct kafka_io io;
	bool flexible = kafka_api_flexible(header->api_key, header->api_version);
	kafka_io_writer(&io, w, header->api_version, flexible);
	walk_header_start(&io, (struct kafka_request_header *)header);
	kio_no_tags(&io);
	enum keel_err err = kafka_io_finish(&io);
	if (err == KEEL_OK) {
		err = encode_body_into(w, api, header->api_version, false, body, NULL, 0, NULL);
	}
	return err == KEEL_OK ? finish_frame(w, start, 0) : err;
}

enum keel_err kafka_encode_response(struct keel_wbuf *w, int32_t correlation_id, int16_t api_key,
                                    int16_t version, const void *body, struct kafka_splice *splices,
                                    size_t splice_capacity, size_t *splice_count)
{
	const struct kafka_api_info *api = kafka_api_find(api_key);
	if (api == NULL || !kafka_api_supported(api_key, version)) {
		return KEEL_UNSUPPORTED;
	}
	KEEL_ASSERT(splices == NULL || api_key == KAFKA_API_FETCH);
	KEEL_ASSERT(splices == NULL || splice_count != NULL);
	size_t start = w->size;
	keel_wbuf_u32(w, 0);
	keel_wbuf_i32(w, correlation_id);
	if (kafka_response_header_version(api_key, version) >= 1) {
		kafka_write_uvarint(w, 0); /* no header tagged fields */
	}
	size_t count = 0;
	enum keel_err err =
	        encode_body_into(w, api, version, true, body, splices, splice_capacity, &count);
	if (err != KEEL_OK) {
		return err;
	}
	uint64_t extra = 0;
	for (size_t i = 0; i < count; i++) {
		extra += splices[i].size;
	}
	if (splice_count != NULL) {
		*splice_count = count;
	}
	return finish_frame(w, start, extra);
}

enum keel_err kafka_decode_response(const void *frame, size_t size, int16_t api_key,
                                    int16_t version, struct keel_arena *arena,
                                    const struct kafka_limits *limits, int32_t *correlation_id,
                                    void *body, const char **why)
{
	const struct kafka_api_info *api = kafka_api_find(api_key);
	set_why(why, NULL);
	if (api == NULL || !kafka_api_supported(api_key, version)) {
		set_why(why, "unsupported API or version");
		return KEEL_UNSUPPORTED;
	}
	struct kafka_io io;
	kafka_io_reader(&io, frame, size, version, true, arena, limits);
	kio_i32(&io, correlation_id);
	if (kafka_response_header_version(api_key, version) >= 1) {
		kio_no_tags(&io);
	}
	if (!kafka_io_ok(&io)) {
		set_why(why, io.err != KEEL_OK ? io.why : "the response header is cut short");
		return io.err != KEEL_OK ? io.err : KEEL_SHORT;
	}
	return decode_rest(api, true, (const uint8_t *)frame + io.r.pos, size - io.r.pos, version,
	                   arena, limits, body, why);
}

enum keel_err kafka_decode_body(const void *data, size_t size, int16_t api_key, int16_t version,
                                bool response, struct keel_arena *arena,
                                const struct kafka_limits *limits, void *body, const char **why)
{
	const struct kafka_api_info *api = kafka_api_find(api_key);
	set_why(why, NULL);
	if (api == NULL || !kafka_api_supported(api_key, version)) {
		set_why(why, "unsupported API or version");
		return KEEL_UNSUPPORTED;
	}
	return decode_rest(api, response, data, size, version, arena, limits, body, why);
}

enum keel_err kafka_encode_body(struct keel_wbuf *w, int16_t api_key, int16_t version,
                                bool response, const void *body)
{
	const struct kafka_api_info *api = kafka_api_find(api_key);
	if (api == NULL || !kafka_api_supported(api_key, version)) {
		return KEEL_UNSUPPORTED;
	}
	return encode_body_into(w, api, version, response, body, NULL, 0, NULL);
}

/* ---- ApiVersions and unsupported requests ---- */

enum keel_err kafka_api_versions_table(struct keel_arena *arena, unsigned sets,
                                       struct kafka_api_versions_response *out)
{
	memset(out, 0, sizeof(*out));
	struct kafka_api_version *v =
	        keel_arena_alloc(arena, sizeof(apis) / sizeof(apis[0]) * sizeof(*v));
	if (v == NULL) {
		return KEEL_NOMEM;
	}
	int32_t n = 0;
	for (size_t i = 0; i < KEEL_ARRAY_SIZE(apis); i++) {
		if ((apis[i].set & sets) != 0) {
			v[n++] = (struct kafka_api_version){apis[i].api_key, apis[i].min_version,
			                                    apis[i].max_version};
		}
	}
	out->error_code = KAFKA_NONE;
	out->api_keys = v;
	out->api_key_count = n;
	out->throttle_time_ms = 0;
	return KEEL_OK;
}

enum keel_err kafka_encode_unsupported(struct keel_wbuf *w,
                                       const struct kafka_request_header *header, unsigned sets)
{
	if (header->api_key != KAFKA_API_API_VERSIONS) {
		return KEEL_UNSUPPORTED;
	}
	/* The v0 body: error_code, then the table; written here without an
	 * arena since the table is static. */
	size_t start = w->size;
	keel_wbuf_u32(w, 0);
	keel_wbuf_i32(w, header->correlation_id);
	kafka_write_i16(w, KAFKA_UNSUPPORTED_VERSION);
	size_t count_at = w->size;
	int32_t count = 0;
	keel_wbuf_i32(w, 0);
	for (size_t i = 0; i < KEEL_ARRAY_SIZE(apis); i++) {
		if ((apis[i].set & sets) == 0) {
			continue;
		}
		count++;
		kafka_write_i16(w, apis[i].api_key);
		kafka_write_i16(w, apis[i].min_version);
		kafka_write_i16(w, apis[i].max_version);
	}
	keel_wbuf_patch_u32(w, count_at, (uint32_t)count);
	return finish_frame(w, start, 0);
}
