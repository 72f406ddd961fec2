/* scan.c — walks the records of one segment image and decides how it ends.
 *
 * Records are read in order while they are valid, carry the segment's
 * generation and the expected index. Where that stops (offset X, expecting
 * index E), the rest of the file is searched at every 8-byte offset for
 * valid records of the same generation:
 *
 *   none found, X holds zeros or another generation  -> CLEAN (the tail)
 *   none found, X holds a damaged record of ours     -> TORN
 *   found, all in the sync batch that E belongs to   -> TORN (that batch was
 *       never proven synced: a power loss may write its pages in any order)
 *   found one whose batch starts after E, or an index below E
 *                                                    -> CORRUPT (the writer
 *       syncs a batch before it writes the next, so X was synced and is now
 *       damaged)
 *
 * A valid record with the wrong index or a term lower than its predecessor
 * is CORRUPT at once: within one generation the writer only appends.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/assert.h"
#include "base/buf.h"
#include "wal/format.h"

const char *wal_scan_end_name(enum wal_scan_end end)
{
	switch (end) {
	case WAL_SCAN_LIMIT:
		return "limit";
	case WAL_SCAN_CLEAN:
		return "clean";
	case WAL_SCAN_TORN:
		return "torn";
	case WAL_SCAN_CORRUPT:
		return "corrupt";
	}
	return "unknown";
}

static void verdict(struct wal_scan_result *out, enum wal_scan_end end, uint64_t bad_offset,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void verdict(struct wal_scan_result *out, enum wal_scan_end end, uint64_t bad_offset,
		    const char *fmt, ...)
{
	out->end = end;
	out->bad_offset = bad_offset;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out->reason, sizeof(out->reason), fmt, ap);
	va_end(ap);
}

/* Records end at `offset` (where `check` failed) while index `expected` was
 * due: search the rest for later records of this generation. */
static void classify_end(const uint8_t *data, size_t size, uint64_t generation,
			 uint32_t max_payload, uint64_t offset, uint64_t expected,
			 enum wal_record_check check, struct wal_scan_result *out)
{
	bool damaged = check != WAL_RECORD_EMPTY && check != WAL_RECORD_OTHER_GENERATION;
	if (check == WAL_RECORD_BAD_FIELD) {
		verdict(out, WAL_SCAN_CORRUPT, offset,
			"record at offset %" PRIu64 " has a valid checksum but an impossible field",
			offset);
		return;
	}
	bool found_later = false;
	uint64_t p = offset + WAL_RECORD_ALIGN;
	while (p + WAL_RECORD_HEADER_SIZE <= size) {
		if (keel_load_be64(data + p + 8) != generation) {
			p += WAL_RECORD_ALIGN;
			continue;
		}
		struct wal_record rec;
		if (wal_record_decode(data + p, (size_t)(size - p), generation, max_payload, &rec) !=
		    WAL_RECORD_OK) {
			p += WAL_RECORD_ALIGN;
			continue;
		}
		if (rec.index < expected) {
			verdict(out, WAL_SCAN_CORRUPT, offset,
				"records end at offset %" PRIu64 " (%s) but a record for index %" PRIu64
				" follows at offset %" PRIu64 ", out of order",
				offset, wal_record_check_name(check), rec.index, p);
			return;
		}
		uint64_t batch_first = rec.index - rec.batch_offset;
		if (batch_first > expected) {
			verdict(out, WAL_SCAN_CORRUPT, offset,
				"record for index %" PRIu64 " at offset %" PRIu64 " is %s, but index %" PRIu64
				" at offset %" PRIu64 " belongs to a later sync batch, so it was synced",
				expected, offset, wal_record_check_name(check), rec.index, p);
			return;
		}
		found_later = true;
		p += wal_record_encoded_size(rec.size);
	}
	if (damaged || found_later) {
		verdict(out, WAL_SCAN_TORN, offset,
			"record for index %" PRIu64 " at offset %" PRIu64
			" is %s; nothing after it was proven synced (torn last write)",
			expected, offset, found_later ? "missing or damaged" : wal_record_check_name(check));
		return;
	}
	out->ends_in_zeros = check == WAL_RECORD_EMPTY;
	verdict(out, WAL_SCAN_CLEAN, offset, "end of records (%s)", wal_record_check_name(check));
}

enum keel_err wal_scan_segment(const uint8_t *data, size_t size,
			       const struct wal_segment_header *header, uint64_t min_term,
			       uint64_t limit_index, uint32_t max_payload, wal_scan_fn fn, void *arg,
			       struct wal_scan_result *out)
{
	KEEL_ASSERT(header->first_index > 0);
	KEEL_ASSERT(size >= WAL_SEGMENT_HEADER_SIZE);
	memset(out, 0, sizeof(*out));
	out->last_index = header->first_index - 1;
	uint64_t expected = header->first_index;
	uint64_t term = min_term;
	uint64_t offset = WAL_SEGMENT_HEADER_SIZE;
	out->end_offset = offset;
	for (;;) {
		if (expected > limit_index) {
			verdict(out, WAL_SCAN_LIMIT, offset, "stopped at the limit index");
			return KEEL_OK;
		}
		struct wal_record rec;
		enum wal_record_check check = WAL_RECORD_EMPTY;
		if (offset < size) {
			check = wal_record_decode(data + offset, (size_t)(size - offset),
						  header->generation, max_payload, &rec);
		}
		if (check != WAL_RECORD_OK) {
			classify_end(data, size, header->generation, max_payload, offset, expected,
				     check, out);
			return KEEL_OK;
		}
		if (rec.index != expected) {
			verdict(out, WAL_SCAN_CORRUPT, offset,
				"record at offset %" PRIu64 " has index %" PRIu64 ", expected %" PRIu64,
				offset, rec.index, expected);
			return KEEL_OK;
		}
		if (rec.term < term) {
			verdict(out, WAL_SCAN_CORRUPT, offset,
				"record for index %" PRIu64 " at offset %" PRIu64 " has term %" PRIu64
				", lower than the term %" PRIu64 " before it",
				rec.index, offset, rec.term, term);
			return KEEL_OK;
		}
		if (fn != NULL) {
			enum keel_err err = fn(arg, &rec, offset);
			if (err != KEEL_OK) {
				return err;
			}
		}
		offset += wal_record_encoded_size(rec.size);
		term = rec.term;
		expected++;
		out->record_count++;
		out->last_index = rec.index;
		out->last_term = rec.term;
		out->end_offset = offset;
	}
}
