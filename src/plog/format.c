/*
 * format.c — file names, index files, the epoch checkpoint and
 * partition.metadata (format.h).
 */
#include "plog/format.h"

#include <string.h>

#include "base/assert.h"
#include "base/buf.h"
#include "base/crc32c.h"

#define INDEX_MAGIC "KEELPIDX"
#define TIMEINDEX_MAGIC "KEELPTIX"
#define EPOCH_MAGIC "KEELPEPO"
#define METADATA_MAGIC "KEELPMET"
#define MAGIC_SIZE 8
#define INDEX_CRC_POS 44

_Static_assert(sizeof(INDEX_MAGIC) - 1 == MAGIC_SIZE, "magic size");
_Static_assert(PLOG_METADATA_FILE_SIZE == MAGIC_SIZE + 4 + PLOG_TOPIC_ID_SIZE + 4,
	       "metadata size");

static const char *suffix_of(enum plog_file_kind kind)
{
	switch (kind) {
	case PLOG_FILE_LOG:
		return ".log";
	case PLOG_FILE_INDEX:
		return ".index";
	case PLOG_FILE_TIMEINDEX:
		return ".timeindex";
	case PLOG_FILE_SNAPSHOT:
		return ".snapshot";
	default:
		KEEL_UNREACHABLE();
		return "";
	}
}

void plog_file_name(char *out, int64_t base_offset, enum plog_file_kind kind)
{
	KEEL_ASSERT(base_offset >= 0);
	uint64_t v = (uint64_t)base_offset;
	for (int i = PLOG_OFFSET_DIGITS - 1; i >= 0; i--) {
		out[i] = (char)('0' + v % 10);
		v /= 10;
	}
	const char *suffix = suffix_of(kind);
	size_t n = strlen(suffix);
	KEEL_ASSERT(PLOG_OFFSET_DIGITS + n < PLOG_NAME_MAX);
	memcpy(out + PLOG_OFFSET_DIGITS, suffix, n + 1);
}

enum plog_file_kind plog_parse_file_name(const char *name, int64_t *base_offset)
{
	size_t len = strlen(name);
	size_t tl = sizeof(PLOG_TEMP_SUFFIX) - 1;
	if (len > tl && strcmp(name + len - tl, PLOG_TEMP_SUFFIX) == 0) {
		return PLOG_FILE_TEMP;
	}
	if (len <= PLOG_OFFSET_DIGITS) {
		return PLOG_FILE_OTHER;
	}
	uint64_t v = 0;
	for (size_t i = 0; i < PLOG_OFFSET_DIGITS; i++) {
		if (name[i] < '0' || name[i] > '9') {
			return PLOG_FILE_OTHER;
		}
		uint64_t digit = (uint64_t)(name[i] - '0');
		if (v > ((uint64_t)INT64_MAX - digit) / 10) {
			return PLOG_FILE_OTHER; /* past the largest offset */
		}
		v = v * 10 + digit;
	}
	const enum plog_file_kind kinds[] = {PLOG_FILE_LOG, PLOG_FILE_INDEX, PLOG_FILE_TIMEINDEX,
					     PLOG_FILE_SNAPSHOT};
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		if (strcmp(name + PLOG_OFFSET_DIGITS, suffix_of(kinds[k])) == 0) {
			*base_offset = (int64_t)v;
			return kinds[k];
		}
	}
	return PLOG_FILE_OTHER;
}

/* ---- index files ---- */

static void index_header_encode(uint8_t *out, const char *magic, const struct plog_index_header *h)
{
	memcpy(out, magic, MAGIC_SIZE);
	keel_store_be32(out + 8, PLOG_FORMAT_VERSION);
	keel_store_be32(out + 12, h->entry_count);
	keel_store_be64(out + 16, h->log_size);
	keel_store_be64(out + 24, (uint64_t)h->end_offset);
	keel_store_be64(out + 32, (uint64_t)h->max_timestamp);
	keel_store_be32(out + 40, 0);
}

/* The CRC covers the header before it and every entry after it. */
static uint32_t index_crc(const uint8_t *file, size_t size)
{
	uint32_t crc = keel_crc32c(0, file, INDEX_CRC_POS);
	return keel_crc32c(crc, file + PLOG_INDEX_HEADER_SIZE, size - PLOG_INDEX_HEADER_SIZE);
}

void plog_index_encode(uint8_t *out, const struct plog_index_header *h,
		       const struct plog_index_entry *entries)
{
	index_header_encode(out, INDEX_MAGIC, h);
	uint8_t *p = out + PLOG_INDEX_HEADER_SIZE;
	for (uint32_t i = 0; i < h->entry_count; i++) {
		keel_store_be32(p, entries[i].relative_offset);
		keel_store_be32(p + 4, entries[i].position);
		p += PLOG_INDEX_ENTRY_SIZE;
	}
	size_t size = plog_index_file_size(h->entry_count, PLOG_INDEX_ENTRY_SIZE);
	keel_store_be32(out + INDEX_CRC_POS, index_crc(out, size));
}

void plog_timeindex_encode(uint8_t *out, const struct plog_index_header *h,
			   const struct plog_time_entry *entries)
{
	index_header_encode(out, TIMEINDEX_MAGIC, h);
	uint8_t *p = out + PLOG_INDEX_HEADER_SIZE;
	for (uint32_t i = 0; i < h->entry_count; i++) {
		keel_store_be64(p, (uint64_t)entries[i].timestamp);
		keel_store_be32(p + 8, entries[i].relative_offset);
		p += PLOG_TIMEINDEX_ENTRY_SIZE;
	}
	size_t size = plog_index_file_size(h->entry_count, PLOG_TIMEINDEX_ENTRY_SIZE);
	keel_store_be32(out + INDEX_CRC_POS, index_crc(out, size));
}

/* Checks magic, version, size and CRC; fills h. */
static enum keel_err index_header_decode(const uint8_t *buf, size_t size, const char *magic,
					 size_t entry_size, struct plog_index_header *h)
{
	if (size < PLOG_INDEX_HEADER_SIZE || memcmp(buf, magic, MAGIC_SIZE) != 0) {
		return KEEL_CORRUPT;
	}
	if (keel_load_be32(buf + 8) != PLOG_FORMAT_VERSION) {
		return KEEL_UNSUPPORTED;
	}
	h->entry_count = keel_load_be32(buf + 12);
	if ((size - PLOG_INDEX_HEADER_SIZE) / entry_size != h->entry_count ||
	    (size - PLOG_INDEX_HEADER_SIZE) % entry_size != 0) {
		return KEEL_CORRUPT;
	}
	if (index_crc(buf, size) != keel_load_be32(buf + INDEX_CRC_POS)) {
		return KEEL_CORRUPT;
	}
	h->log_size = keel_load_be64(buf + 16);
	h->end_offset = (int64_t)keel_load_be64(buf + 24);
	h->max_timestamp = (int64_t)keel_load_be64(buf + 32);
	return KEEL_OK;
}

enum keel_err plog_index_peek_count(const uint8_t *buf, size_t size, bool time_index,
				    uint32_t *count)
{
	struct plog_index_header h;
	enum keel_err err =
		index_header_decode(buf, size, time_index ? TIMEINDEX_MAGIC : INDEX_MAGIC,
				    time_index ? PLOG_TIMEINDEX_ENTRY_SIZE : PLOG_INDEX_ENTRY_SIZE, &h);
	if (err == KEEL_OK) {
		*count = h.entry_count;
	}
	return err;
}

enum keel_err plog_index_decode(const uint8_t *buf, size_t size, struct plog_index_header *h,
				struct plog_index_entry *entries)
{
	enum keel_err err = index_header_decode(buf, size, INDEX_MAGIC, PLOG_INDEX_ENTRY_SIZE, h);
	if (err != KEEL_OK) {
		return err;
	}
	const uint8_t *p = buf + PLOG_INDEX_HEADER_SIZE;
	for (uint32_t i = 0; i < h->entry_count; i++) {
		entries[i].relative_offset = keel_load_be32(p);
		entries[i].position = keel_load_be32(p + 4);
		p += PLOG_INDEX_ENTRY_SIZE;
	}
	return KEEL_OK;
}

enum keel_err plog_timeindex_decode(const uint8_t *buf, size_t size, struct plog_index_header *h,
				    struct plog_time_entry *entries)
{
	enum keel_err err =
		index_header_decode(buf, size, TIMEINDEX_MAGIC, PLOG_TIMEINDEX_ENTRY_SIZE, h);
	if (err != KEEL_OK) {
		return err;
	}
	const uint8_t *p = buf + PLOG_INDEX_HEADER_SIZE;
	for (uint32_t i = 0; i < h->entry_count; i++) {
		entries[i].timestamp = (int64_t)keel_load_be64(p);
		entries[i].relative_offset = keel_load_be32(p + 8);
		p += PLOG_TIMEINDEX_ENTRY_SIZE;
	}
	return KEEL_OK;
}

/* ---- leader-epoch checkpoint ---- */

void plog_epoch_file_encode(uint8_t *out, const struct plog_epoch_entry *entries,
			    uint32_t count)
{
	memcpy(out, EPOCH_MAGIC, MAGIC_SIZE);
	keel_store_be32(out + 8, PLOG_FORMAT_VERSION);
	keel_store_be32(out + 12, count);
	uint8_t *p = out + PLOG_EPOCH_HEADER_SIZE;
	for (uint32_t i = 0; i < count; i++) {
		keel_store_be32(p, (uint32_t)entries[i].epoch);
		keel_store_be64(p + 4, (uint64_t)entries[i].start_offset);
		p += PLOG_EPOCH_ENTRY_SIZE;
	}
	keel_store_be32(p, keel_crc32c(0, out, (size_t)(p - out)));
}

enum keel_err plog_epoch_file_decode(const uint8_t *buf, size_t size,
				     struct plog_epoch_entry *entries, uint32_t max_count,
				     uint32_t *count)
{
	if (size < plog_epoch_file_size(0) || memcmp(buf, EPOCH_MAGIC, MAGIC_SIZE) != 0) {
		return KEEL_CORRUPT;
	}
	if (keel_load_be32(buf + 8) != PLOG_FORMAT_VERSION) {
		return KEEL_UNSUPPORTED;
	}
	uint32_t n = keel_load_be32(buf + 12);
	if (n > PLOG_EPOCH_MAX_ENTRIES || plog_epoch_file_size(n) != size) {
		return KEEL_CORRUPT;
	}
	if (n > max_count) {
		return KEEL_TOOBIG;
	}
	if (keel_crc32c(0, buf, size - 4) != keel_load_be32(buf + size - 4)) {
		return KEEL_CORRUPT;
	}
	const uint8_t *p = buf + PLOG_EPOCH_HEADER_SIZE;
	for (uint32_t i = 0; i < n; i++) {
		entries[i].epoch = (int32_t)keel_load_be32(p);
		entries[i].start_offset = (int64_t)keel_load_be64(p + 4);
		p += PLOG_EPOCH_ENTRY_SIZE;
		if (entries[i].epoch < 0 || entries[i].start_offset < 0) {
			return KEEL_CORRUPT;
		}
		if (i > 0 && (entries[i].epoch <= entries[i - 1].epoch ||
			      entries[i].start_offset < entries[i - 1].start_offset)) {
			return KEEL_CORRUPT;
		}
	}
	*count = n;
	return KEEL_OK;
}

/* ---- partition.metadata ---- */

void plog_metadata_encode(uint8_t out[PLOG_METADATA_FILE_SIZE],
			  const uint8_t topic_id[PLOG_TOPIC_ID_SIZE])
{
	memcpy(out, METADATA_MAGIC, MAGIC_SIZE);
	keel_store_be32(out + 8, PLOG_FORMAT_VERSION);
	memcpy(out + 12, topic_id, PLOG_TOPIC_ID_SIZE);
	keel_store_be32(out + 28, keel_crc32c(0, out, 28));
}

enum keel_err plog_metadata_decode(const uint8_t *buf, size_t size,
				   uint8_t topic_id[PLOG_TOPIC_ID_SIZE])
{
	if (size != PLOG_METADATA_FILE_SIZE || memcmp(buf, METADATA_MAGIC, MAGIC_SIZE) != 0) {
		return KEEL_CORRUPT;
	}
	if (keel_load_be32(buf + 8) != PLOG_FORMAT_VERSION) {
		return KEEL_UNSUPPORTED;
	}
	if (keel_crc32c(0, buf, 28) != keel_load_be32(buf + 28)) {
		return KEEL_CORRUPT;
	}
	memcpy(topic_id, buf + 12, PLOG_TOPIC_ID_SIZE);
	return KEEL_OK;
}
