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
        API(KAFKA_API_ALTER_CONFIGS, "AlterConfigs", alter_configs, KAFKA_SET_ADMIN, 0, 2, 2),
        API(KAFKA_API_SASL_AUTHENTICATE, "SaslAuthenticate", sasl_authenticate, KAFKA_SET_SASL, 0,
            2, 2),
        API(KAFKA_API_CREATE_PARTITIONS, "CreatePartitions", create_partitions, KAFKA_SET_ADMIN, 0,
            3, 2),
        API(KAFKA_API_DELETE_GROUPS, "DeleteGroups", delete_groups, KAFKA_SET_GROUP, 0, 2, 2),
        API(KAFKA_API_INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs",
            incremental_alter_configs, KAFKA_SET_ADMIN, 0, 1, 1),
        API(KAFKA_API_ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments",
            alter_partition_reassignments, KAFKA_SET_ADMIN, 0, 0, 0),
        API(KAFKA_API_LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignments",
            list_partition_reassignments, KAFKA_SET_ADMIN, 0, 0, 0),
        API(KAFKA_API_OFFSET_DELETE, "OffsetDelete", offset_delete, KAFKA_SET_GROUP, 0, 0,
            NEVER),
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

bool kafka_api_in_sets(int16_t api_key, unsigned sets)
{
	const struct kafka_api_info *api = kafka_api_find(api_key);
	return api != NULL && (api->set & sets) != 0;
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

/* Request header v0: key, version, correlation id; v1 adds client_id (an
 * int16-length string even in v2); v2 adds tagged fields. */
static void walk_request_header(struct kafka_io *io, struct kafka_request_header *h,
                                int header_version)
{
	io->flexible = false;
	kio_i16(io, &h->api_key);
	kio_i16(io, &h->api_version);
	kio_i32(io, &h->correlation_id);
	if (header_version >= 1) {
		kio_str(io, &h->client_id, true);
	} else if (!io->writing) {
		h->client_id = KAFKA_STR_NULL;
	}
	io->flexible = header_version >= 2;
	kio_no_tags(io);
}

/* Response header v0: correlation id; v1 adds tagged fields. */
static void walk_response_header(struct kafka_io *io, int32_t *correlation_id,
                                 int header_version)
{
	io->flexible = header_version >= 1;
	kio_i32(io, correlation_id);
	kio_no_tags(io);
}

/* The outcome of a header walk over the start of a buffer; *header_size is
 * what it consumed. */
static enum keel_err header_read(const struct kafka_io *io, size_t *header_size)
{
	if (io->err != KEEL_OK) {
		return io->err;
	}
	if (!keel_rbuf_ok(&io->r)) {
		return KEEL_SHORT;
	}
	*header_size = io->r.pos;
	return KEEL_OK;
}

enum keel_err kafka_decode_request_header(const void *data, size_t size, int header_version,
                                          struct keel_arena *arena,
                                          const struct kafka_limits *limits,
                                          struct kafka_request_header *header,
                                          size_t *header_size)
{
	KEEL_ASSERT(header_version >= 0 && header_version <= 2);
	struct kafka_io io;
	kafka_io_reader(&io, data, size, 0, false, arena, limits);
	walk_request_header(&io, header, header_version);
	return header_read(&io, header_size);
}

enum keel_err kafka_encode_request_header(struct keel_wbuf *w,
                                          const struct kafka_request_header *header,
                                          int header_version)
{
	KEEL_ASSERT(header_version >= 0 && header_version <= 2);
	struct kafka_io io;
	kafka_io_writer(&io, w, 0, false);
	walk_request_header(&io, (struct kafka_request_header *)header, header_version);
	return kafka_io_finish(&io);
}

enum keel_err kafka_decode_response_header(const void *data, size_t size, int header_version,
                                           struct keel_arena *arena,
                                           const struct kafka_limits *limits,
                                           int32_t *correlation_id, size_t *header_size)
{
	KEEL_ASSERT(header_version >= 0 && header_version <= 1);
	struct kafka_io io;
	kafka_io_reader(&io, data, size, 0, false, arena, limits);
	walk_response_header(&io, correlation_id, header_version);
	return header_read(&io, header_size);
}

enum keel_err kafka_encode_response_header(struct keel_wbuf *w, int32_t correlation_id,
                                           int header_version)
{
	KEEL_ASSERT(header_version >= 0 && header_version <= 1);
	struct kafka_io io;
	kafka_io_writer(&io, w, 0, false);
	walk_response_header(&io, &correlation_id, header_version);
	return kafka_io_finish(&io);
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

/* Decodes data[0..size) as the whole body of a request or response of
 * `api` at `version` (every byte must be consumed). */
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
	int16_t key = req->header.api_key;
	int16_t version = req->header.api_version;
	const struct kafka_api_info *api = kafka_api_find(key);
	if (api == NULL || !kafka_api_supported(key, version)) {
		set_why(why, api == NULL ? "unknown API key" : "unsupported API version");
		return KEEL_UNSUPPORTED;
	}
	size_t header_size = 0;
	err = kafka_decode_request_header(frame, size, kafka_request_header_version(key, version),
	                                  arena, limits, &req->header, &header_size);
	if (err != KEEL_OK) {
		set_why(why, "the request header is cut short or corrupt");
		return err;
	}
	return decode_rest(api, false, (const uint8_t *)frame + header_size, size - header_size,
	                   version, arena, limits, &req->body, why);
}

/* Appends the body (no size prefix); with `splices`, leaves holes for the
 * records (see kafka_splice) and reports how many in *splice_count. */
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
	enum keel_err err = kafka_encode_request_header(
		w, header, kafka_request_header_version(header->api_key, header->api_version));
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
	enum keel_err err = kafka_encode_response_header(
		w, correlation_id, kafka_response_header_version(api_key, version));
	size_t count = 0;
	if (err == KEEL_OK) {
		err = encode_body_into(w, api, version, true, body, splices, splice_capacity,
		                       &count);
	}
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
	size_t header_size = 0;
	enum keel_err err = kafka_decode_response_header(
		frame, size, kafka_response_header_version(api_key, version), arena, limits,
		correlation_id, &header_size);
	if (err != KEEL_OK) {
		set_why(why, "the response header is cut short or corrupt");
		return err;
	}
	return decode_rest(api, true, (const uint8_t *)frame + header_size, size - header_size,
	                   version, arena, limits, body, why);
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
