/* format.c — encoders and decoders of the WAL's on-disk structures and file
 * names (layouts in format.h and docs/storage-format.md). */
#include "wal/format.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/assert.h"
#include "base/buf.h"
#include "base/crc32c.h"

_Static_assert(sizeof(WAL_SEGMENT_MAGIC) - 1 == 8, "segment magic is 8 bytes");
_Static_assert(sizeof(WAL_HARD_STATE_MAGIC) - 1 == 8, "hard state magic is 8 bytes");
_Static_assert(sizeof(WAL_SNAPSHOT_MAGIC) - 1 == 8, "snapshot magic is 8 bytes");
/* The fixed sizes are the sums of the fields laid out in format.h. */
_Static_assert(WAL_SEGMENT_HEADER_SIZE == 8 + 4 + 4 + 8 + 8 + 8 + 8 + 12 + 4,
	       "segment header: magic, version, header size, generation, first index, "
	       "segment size, prev term, reserved, crc");
_Static_assert(WAL_RECORD_HEADER_SIZE == 4 + 4 + 8 + 8 + 8 + 4 + 1 + 3,
	       "record header: size, crc, generation, term, index, batch offset, type, pad");
_Static_assert(WAL_HARD_STATE_FIXED_SIZE == 8 + 4 + 4, "hard state: magic, version, body size");
_Static_assert(WAL_HARD_STATE_BODY_V1 == 8 + 8 + 8 + 4,
	       "hard state body v1: term, voted_for, commit index, extra size");
_Static_assert(WAL_SNAPSHOT_FIXED_SIZE == 8 + 4 + 4 + 8 + 8 + 8 + 4 + 4,
	       "snapshot header: magic, version, membership size, index, term, payload size, "
	       "payload crc, header crc");
_Static_assert(WAL_SEGMENT_HEADER_SIZE % WAL_RECORD_ALIGN == 0, "records start aligned");
_Static_assert(WAL_RECORD_HEADER_SIZE % WAL_RECORD_ALIGN == 0, "payloads start aligned");

#define SEGMENT_CRC_OFFSET 60

static void set_why(char *why, size_t why_size, const char *text)
{
	if (why != NULL && why_size > 0) {
		snprintf(why, why_size, "%s", text);
	}
}

/* ---- segment header ---- */

void wal_segment_header_encode(uint8_t out[WAL_SEGMENT_HEADER_SIZE],
			       const struct wal_segment_header *h)
{
	KEEL_ASSERT(h->generation > 0);
	KEEL_ASSERT(h->first_index > 0);
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, out, WAL_SEGMENT_HEADER_SIZE);
	keel_wbuf_bytes(&w, WAL_SEGMENT_MAGIC, 8);
	keel_wbuf_u32(&w, WAL_FORMAT_VERSION);
	keel_wbuf_u32(&w, WAL_SEGMENT_HEADER_SIZE);
	keel_wbuf_u64(&w, h->generation);
	keel_wbuf_u64(&w, h->first_index);
	keel_wbuf_u64(&w, h->segment_size_bytes);
	keel_wbuf_u64(&w, h->prev_term);
	keel_wbuf_zero(&w, SEGMENT_CRC_OFFSET - 48);
	keel_wbuf_u32(&w, keel_crc32c(0, out, SEGMENT_CRC_OFFSET));
	KEEL_ASSERT(keel_wbuf_ok(&w));
	KEEL_ASSERT(w.size == WAL_SEGMENT_HEADER_SIZE);
}

enum keel_err wal_segment_header_decode(const uint8_t *buf, size_t size,
					struct wal_segment_header *out, char *why,
					size_t why_size)
{
	if (size < WAL_SEGMENT_HEADER_SIZE) {
		set_why(why, why_size, "file is shorter than a segment header");
		return KEEL_SHORT;
	}
	struct keel_rbuf r;
	keel_rbuf_init(&r, buf, WAL_SEGMENT_HEADER_SIZE);
	const uint8_t *magic = keel_rbuf_bytes(&r, 8);
	uint32_t version = keel_rbuf_u32(&r);
	uint32_t header_size = keel_rbuf_u32(&r);
	out->version = version;
	out->generation = keel_rbuf_u64(&r);
	out->first_index = keel_rbuf_u64(&r);
	out->segment_size_bytes = keel_rbuf_u64(&r);
	out->prev_term = keel_rbuf_u64(&r);
	keel_rbuf_bytes(&r, SEGMENT_CRC_OFFSET - 48);
	uint32_t crc = keel_rbuf_u32(&r);
	KEEL_ASSERT(keel_rbuf_done(&r));
	if (memcmp(magic, WAL_SEGMENT_MAGIC, 8) != 0) {
		set_why(why, why_size, "bad segment magic");
		return KEEL_CORRUPT;
	}
	if (crc != keel_crc32c(0, buf, SEGMENT_CRC_OFFSET)) {
		set_why(why, why_size, "segment header checksum mismatch");
		return KEEL_CORRUPT;
	}
	if (version > WAL_FORMAT_VERSION) {
		set_why(why, why_size, "segment written by a newer keel (format version too high)");
		return KEEL_UNSUPPORTED;
	}
	if (version == 0 || header_size != WAL_SEGMENT_HEADER_SIZE || out->generation == 0 ||
	    out->first_index == 0) {
		set_why(why, why_size, "segment header has an impossible field");
		return KEEL_CORRUPT;
	}
	return KEEL_OK;
}

/* ---- records ---- */

static uint32_t record_crc(const uint8_t *rec, uint32_t payload_size)
{
	uint32_t crc = keel_crc32c(0, rec, 4);
	return keel_crc32c(crc, rec + 8, WAL_RECORD_HEADER_SIZE - 8 + (size_t)payload_size);
}

void wal_record_encode_header(uint8_t out[WAL_RECORD_HEADER_SIZE], const struct wal_record *rec)
{
	KEEL_ASSERT(rec->generation > 0);
	KEEL_ASSERT(rec->index > 0);
	KEEL_ASSERT(rec->batch_offset < rec->index);
	KEEL_ASSERT(rec->size == 0 || rec->data != NULL);
	keel_store_be32(out, rec->size);
	keel_store_be64(out + 8, rec->generation);
	keel_store_be64(out + 16, rec->term);
	keel_store_be64(out + 24, rec->index);
	keel_store_be32(out + 32, rec->batch_offset);
	out[36] = rec->type;
	out[37] = 0;
	out[38] = 0;
	out[39] = 0;
	uint32_t crc = keel_crc32c(0, out, 4);
	crc = keel_crc32c(crc, out + 8, WAL_RECORD_HEADER_SIZE - 8);
	crc = keel_crc32c(crc, rec->data, rec->size);
	keel_store_be32(out + 4, crc);
}

void wal_record_encode(uint8_t *out, const struct wal_record *rec)
{
	wal_record_encode_header(out, rec);
	if (rec->size > 0) {
		memcpy(out + WAL_RECORD_HEADER_SIZE, rec->data, rec->size);
	}
	uint64_t total = wal_record_encoded_size(rec->size);
	size_t padding = (size_t)(total - WAL_RECORD_HEADER_SIZE - rec->size);
	memset(out + WAL_RECORD_HEADER_SIZE + rec->size, 0, padding);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] != 0) {
			return false;
		}
	}
	return true;
}

enum wal_record_check wal_record_decode(const uint8_t *buf, size_t avail, uint64_t generation,
					uint32_t max_payload, struct wal_record *out)
{
	if (avail < WAL_RECORD_HEADER_SIZE) {
		return all_zero(buf, avail) ? WAL_RECORD_EMPTY : WAL_RECORD_SHORT;
	}
	if (all_zero(buf, WAL_RECORD_HEADER_SIZE)) {
		return WAL_RECORD_EMPTY;
	}
	if (keel_load_be64(buf + 8) != generation) {
		return WAL_RECORD_OTHER_GENERATION;
	}
	uint32_t size = keel_load_be32(buf);
	if (size > max_payload) {
		return WAL_RECORD_BAD_SIZE;
	}
	if (wal_record_encoded_size(size) > avail) {
		return WAL_RECORD_SHORT;
	}
	if (keel_load_be32(buf + 4) != record_crc(buf, size)) {
		return WAL_RECORD_BAD_CHECKSUM;
	}
	out->generation = generation;
	out->term = keel_load_be64(buf + 16);
	out->index = keel_load_be64(buf + 24);
	out->batch_offset = keel_load_be32(buf + 32);
	out->type = buf[36];
	out->size = size;
	out->data = buf + WAL_RECORD_HEADER_SIZE;
	if (out->index == 0 || out->batch_offset >= out->index || !all_zero(buf + 37, 3)) {
		return WAL_RECORD_BAD_FIELD;
	}
	return WAL_RECORD_OK;
}

const char *wal_record_check_name(enum wal_record_check check)
{
	switch (check) {
	case WAL_RECORD_OK:
		return "valid";
	case WAL_RECORD_EMPTY:
		return "zeros (never written)";
	case WAL_RECORD_OTHER_GENERATION:
		return "another generation (stale)";
	case WAL_RECORD_SHORT:
		return "cut short by the end of the file";
	case WAL_RECORD_BAD_SIZE:
		return "payload size over the limit";
	case WAL_RECORD_BAD_CHECKSUM:
		return "checksum mismatch";
	case WAL_RECORD_BAD_FIELD:
		return "impossible field";
	}
	return "unknown";
}

/* ---- hard state ---- */

size_t wal_hard_state_encoded_size(const struct wal_hard_state *hs)
{
	return WAL_HARD_STATE_FIXED_SIZE + WAL_HARD_STATE_BODY_V1 + (size_t)hs->extra_size + 4;
}

void wal_hard_state_encode(uint8_t *out, const struct wal_hard_state *hs)
{
	KEEL_ASSERT(hs->extra_size <= WAL_HARD_STATE_MAX_EXTRA);
	KEEL_ASSERT(hs->extra_size == 0 || hs->extra != NULL);
	size_t total = wal_hard_state_encoded_size(hs);
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, out, total);
	keel_wbuf_bytes(&w, WAL_HARD_STATE_MAGIC, 8);
	keel_wbuf_u32(&w, WAL_FORMAT_VERSION);
	keel_wbuf_u32(&w, WAL_HARD_STATE_BODY_V1 + hs->extra_size);
	keel_wbuf_u64(&w, hs->term);
	keel_wbuf_u64(&w, hs->voted_for);
	keel_wbuf_u64(&w, hs->commit_index);
	keel_wbuf_u32(&w, hs->extra_size);
	keel_wbuf_bytes(&w, hs->extra, hs->extra_size);
	keel_wbuf_u32(&w, keel_crc32c(0, out, total - 4));
	KEEL_ASSERT(keel_wbuf_ok(&w));
	KEEL_ASSERT(w.size == total);
}

enum keel_err wal_hard_state_decode(const uint8_t *buf, size_t size, struct wal_hard_state *out,
				    char *why, size_t why_size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, buf, size);
	const uint8_t *magic = keel_rbuf_bytes(&r, 8);
	uint32_t version = keel_rbuf_u32(&r);
	uint32_t body_size = keel_rbuf_u32(&r);
	if (!keel_rbuf_ok(&r)) {
		set_why(why, why_size, "hard state file is shorter than its header");
		return KEEL_SHORT;
	}
	if (memcmp(magic, WAL_HARD_STATE_MAGIC, 8) != 0) {
		set_why(why, why_size, "bad hard state magic");
		return KEEL_CORRUPT;
	}
	if ((uint64_t)body_size + WAL_HARD_STATE_FIXED_SIZE + 4 != size) {
		set_why(why, why_size, "hard state body size does not match the file size");
		return KEEL_CORRUPT;
	}
	if (keel_load_be32(buf + size - 4) != keel_crc32c(0, buf, size - 4)) {
		set_why(why, why_size, "hard state checksum mismatch");
		return KEEL_CORRUPT;
	}
	if (version > WAL_FORMAT_VERSION) {
		set_why(why, why_size, "hard state written by a newer keel (format version too high)");
		return KEEL_UNSUPPORTED;
	}
	out->term = keel_rbuf_u64(&r);
	out->voted_for = keel_rbuf_u64(&r);
	out->commit_index = keel_rbuf_u64(&r);
	out->extra_size = keel_rbuf_u32(&r);
	out->extra = NULL;
	if (out->extra_size > WAL_HARD_STATE_MAX_EXTRA ||
	    body_size != WAL_HARD_STATE_BODY_V1 + (uint64_t)out->extra_size || version == 0) {
		set_why(why, why_size, "hard state has an impossible field");
		return KEEL_CORRUPT;
	}
	if (out->extra_size > 0) {
		out->extra = keel_rbuf_bytes(&r, out->extra_size);
	}
	keel_rbuf_u32(&r); /* the checksum, verified above */
	if (!keel_rbuf_done(&r)) {
		set_why(why, why_size, "hard state layout is inconsistent");
		return KEEL_CORRUPT;
	}
	return KEEL_OK;
}

/* ---- snapshot header ---- */

#define SNAPSHOT_HEADER_CRC_OFFSET 44

static uint32_t snapshot_header_crc(const uint8_t *buf, uint32_t membership_size)
{
	uint32_t crc = keel_crc32c(0, buf, SNAPSHOT_HEADER_CRC_OFFSET);
	return keel_crc32c(crc, buf + WAL_SNAPSHOT_FIXED_SIZE, membership_size);
}

void wal_snapshot_header_encode(uint8_t *out, const struct wal_snapshot_header *h)
{
	KEEL_ASSERT(h->membership_size == 0 || h->membership != NULL);
	KEEL_ASSERT(h->index > 0);
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, out, WAL_SNAPSHOT_FIXED_SIZE + (size_t)h->membership_size);
	keel_wbuf_bytes(&w, WAL_SNAPSHOT_MAGIC, 8);
	keel_wbuf_u32(&w, WAL_FORMAT_VERSION);
	keel_wbuf_u32(&w, h->membership_size);
	keel_wbuf_u64(&w, h->index);
	keel_wbuf_u64(&w, h->term);
	keel_wbuf_u64(&w, h->payload_size);
	keel_wbuf_u32(&w, h->payload_crc);
	keel_wbuf_u32(&w, 0); /* patched below */
	keel_wbuf_bytes(&w, h->membership, h->membership_size);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	keel_store_be32(out + SNAPSHOT_HEADER_CRC_OFFSET, snapshot_header_crc(out, h->membership_size));
}

enum keel_err wal_snapshot_header_decode(const uint8_t *buf, size_t size,
					 uint32_t max_membership,
					 struct wal_snapshot_header *out, size_t *header_size,
					 char *why, size_t why_size)
{
	*header_size = WAL_SNAPSHOT_FIXED_SIZE;
	struct keel_rbuf r;
	keel_rbuf_init(&r, buf, size);
	const uint8_t *magic = keel_rbuf_bytes(&r, 8);
	out->version = keel_rbuf_u32(&r);
	out->membership_size = keel_rbuf_u32(&r);
	out->index = keel_rbuf_u64(&r);
	out->term = keel_rbuf_u64(&r);
	out->payload_size = keel_rbuf_u64(&r);
	out->payload_crc = keel_rbuf_u32(&r);
	uint32_t crc = keel_rbuf_u32(&r);
	if (!keel_rbuf_ok(&r)) {
		set_why(why, why_size, "snapshot is shorter than its header");
		return KEEL_SHORT;
	}
	if (memcmp(magic, WAL_SNAPSHOT_MAGIC, 8) != 0) {
		set_why(why, why_size, "bad snapshot magic");
		return KEEL_CORRUPT;
	}
	if (out->membership_size > max_membership) {
		set_why(why, why_size, "snapshot membership blob is over the configured limit");
		return KEEL_TOOBIG;
	}
	*header_size = WAL_SNAPSHOT_FIXED_SIZE + (size_t)out->membership_size;
	out->membership = keel_rbuf_bytes(&r, out->membership_size);
	if (!keel_rbuf_ok(&r)) {
		set_why(why, why_size, "snapshot is shorter than its membership blob");
		return KEEL_SHORT;
	}
	if (crc != snapshot_header_crc(buf, out->membership_size)) {
		set_why(why, why_size, "snapshot header checksum mismatch");
		return KEEL_CORRUPT;
	}
	if (out->version > WAL_FORMAT_VERSION) {
		set_why(why, why_size, "snapshot written by a newer keel (format version too high)");
		return KEEL_UNSUPPORTED;
	}
	if (out->version == 0 || out->index == 0) {
		set_why(why, why_size, "snapshot header has an impossible field");
		return KEEL_CORRUPT;
	}
	if (out->membership_size == 0) {
		out->membership = NULL;
	}
	return KEEL_OK;
}

/* ---- file names ---- */

void wal_segment_name(char out[WAL_NAME_MAX], uint64_t generation)
{
	snprintf(out, WAL_NAME_MAX, "seg-%016" PRIx64 ".wal", generation);
}

void wal_spare_name(char out[WAL_NAME_MAX], uint64_t generation)
{
	snprintf(out, WAL_NAME_MAX, "spare-%016" PRIx64 ".wal", generation);
}

void wal_snapshot_name(char out[WAL_NAME_MAX], uint64_t index, uint64_t term, bool tmp)
{
	snprintf(out, WAL_NAME_MAX, "snap-%016" PRIx64 "-%016" PRIx64 ".snap%s", index, term,
		 tmp ? ".tmp" : "");
}

/* Parses exactly 16 lowercase hex digits. */
static bool parse_hex16(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	for (int i = 0; i < 16; i++) {
		char c = s[i];
		uint64_t d;
		if (c >= '0' && c <= '9') {
			d = (uint64_t)(c - '0');
		} else if (c >= 'a' && c <= 'f') {
			d = (uint64_t)(c - 'a' + 10);
		} else {
			return false;
		}
		v = v << 4 | d;
	}
	*out = v;
	return true;
}

static bool has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

enum wal_file_kind wal_parse_file_name(const char *name, uint64_t *a, uint64_t *b)
{
	size_t n = strlen(name);
	*a = 0;
	*b = 0;
	if (strcmp(name, WAL_HARD_STATE_NAME) == 0) {
		return WAL_FILE_HARD_STATE;
	}
	if (strcmp(name, WAL_HARD_STATE_TMP_NAME) == 0) {
		return WAL_FILE_HARD_STATE_TMP;
	}
	if (n == 24 && has_prefix(name, "seg-") && strcmp(name + 20, ".wal") == 0 &&
	    parse_hex16(name + 4, a)) {
		return WAL_FILE_SEGMENT;
	}
	if (n == 26 && has_prefix(name, "spare-") && strcmp(name + 22, ".wal") == 0 &&
	    parse_hex16(name + 6, a)) {
		return WAL_FILE_SPARE;
	}
	if ((n == 43 || n == 47) && has_prefix(name, "snap-") && name[21] == '-' &&
	    parse_hex16(name + 5, a) && parse_hex16(name + 22, b)) {
		if (n == 43 && strcmp(name + 38, ".snap") == 0) {
			return WAL_FILE_SNAPSHOT;
		}
		if (n == 47 && strcmp(name + 38, ".snap.tmp") == 0) {
			return WAL_FILE_SNAPSHOT_TMP;
		}
	}
	*a = 0;
	*b = 0;
	return WAL_FILE_OTHER;
}
