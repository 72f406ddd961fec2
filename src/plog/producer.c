/*
 * producer.c — idempotent producers' state, its snapshot files and its
 * rebuild from the log (see producer.h for the rules and the format).
 */
#include "plog/producer.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/buf.h"
#include "base/crc32c.h"
#include "plog/internal.h"

#define SNAP_MAGIC "KEELPSNP"
#define SNAP_VERSION 1
#define SNAP_HEADER_SIZE 44
#define SNAP_BATCH_SIZE 24
#define SNAP_PRODUCER_MIN (8 + 2 + 1)
_Static_assert(SNAP_HEADER_SIZE == 8 + 4 + 4 + 8 + 4 + PLOG_TOPIC_ID_SIZE,
	       "the snapshot header is 44 bytes");
_Static_assert(SNAP_BATCH_SIZE == 4 + 4 + 8 + 8, "a kept batch is 24 bytes");
/* Largest snapshot file read: every producer with every batch. */
#define SNAP_MAX_SIZE                                                                          \
	((uint64_t)SNAP_HEADER_SIZE +                                                          \
	 (uint64_t)PLOG_MAX_PRODUCERS * (SNAP_PRODUCER_MIN + PLOG_PRODUCER_BATCHES * SNAP_BATCH_SIZE) + \
	 4)

void plog_producers_init(struct plog_producers *ps)
{
	memset(ps, 0, sizeof(*ps));
}

void plog_producers_close(struct plog_producers *ps)
{
	free(ps->items);
	memset(ps, 0, sizeof(*ps));
}

void plog_producers_clear(struct plog_producers *ps)
{
	ps->count = 0;
}

/* Index of the producer, or where it would go. */
static uint32_t lower_bound(const struct plog_producers *ps, int64_t producer_id)
{
	uint32_t lo = 0, hi = ps->count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (ps->items[mid].producer_id < producer_id) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

const struct plog_producer *plog_producers_find(const struct plog_producers *ps,
						int64_t producer_id)
{
	uint32_t at = lower_bound(ps, producer_id);
	return at < ps->count && ps->items[at].producer_id == producer_id ? &ps->items[at] : NULL;
}

int32_t plog_producer_last_seq(int32_t first_seq, int32_t last_offset_delta)
{
	if (first_seq > INT32_MAX - last_offset_delta) {
		return (int32_t)((int64_t)first_seq + last_offset_delta - INT32_MAX - 1);
	}
	return first_seq + last_offset_delta;
}

static bool in_sequence(int32_t last_seq, int32_t next_seq)
{
	return (int64_t)next_seq == (int64_t)last_seq + 1 || (next_seq == 0 && last_seq == INT32_MAX);
}

/* Whether seq comes after `from` (less than half the sequence space ahead,
 * sequences wrapping after INT32_MAX to 0). */
static bool seq_after(int32_t from, int32_t seq)
{
	int64_t d = (int64_t)seq - from;
	if (d < 0) {
		d += (int64_t)INT32_MAX + 1;
	}
	return d > 0 && d <= INT32_MAX / 2;
}

enum plog_seq_verdict plog_producers_check(const struct plog_producers *ps, int64_t producer_id,
					   int16_t epoch, int32_t first_seq, int32_t last_seq,
					   struct plog_producer_batch *dup)
{
	const struct plog_producer *p = plog_producers_find(ps, producer_id);
	if (p == NULL || p->count == 0) {
		return PLOG_SEQ_APPEND; /* unknown producer: any sequence (KIP-360) */
	}
	if (epoch < p->epoch) {
		return PLOG_SEQ_OLD_EPOCH;
	}
	if (epoch > p->epoch) {
		return first_seq == 0 ? PLOG_SEQ_APPEND : PLOG_SEQ_OUT_OF_ORDER;
	}
	for (uint32_t i = 0; i < p->count; i++) {
		if (p->batches[i].first_seq == first_seq && p->batches[i].last_seq == last_seq) {
			if (dup != NULL) {
				*dup = p->batches[i];
			}
			return PLOG_SEQ_DUPLICATE;
		}
	}
	int32_t last = p->batches[p->count - 1].last_seq;
	if (in_sequence(last, first_seq)) {
		return PLOG_SEQ_APPEND;
	}
	if (p->refused_seq >= 0 && in_sequence(last, p->refused_seq) &&
	    seq_after(p->refused_seq, first_seq)) {
		return PLOG_SEQ_AFTER_REFUSED;
	}
	return PLOG_SEQ_OUT_OF_ORDER;
}

void plog_producers_refuse(struct plog_producers *ps, int64_t producer_id, int16_t epoch,
			   int32_t first_seq)
{
	uint32_t at = lower_bound(ps, producer_id);
	if (at >= ps->count || ps->items[at].producer_id != producer_id) {
		return; /* unknown: its next batch is taken at any sequence */
	}
	struct plog_producer *p = &ps->items[at];
	if (p->count > 0 && epoch == p->epoch &&
	    in_sequence(p->batches[p->count - 1].last_seq, first_seq)) {
		p->refused_seq = first_seq;
	}
}

/* Forgets the producer whose last batch is oldest (the table is full). */
static void evict_oldest(struct plog_producers *ps)
{
	uint32_t victim = 0;
	int64_t oldest = INT64_MAX;
	for (uint32_t i = 0; i < ps->count; i++) {
		const struct plog_producer *p = &ps->items[i];
		int64_t last = p->count > 0 ? p->batches[p->count - 1].last_offset : -1;
		if (last < oldest) {
			oldest = last;
			victim = i;
		}
	}
	memmove(&ps->items[victim], &ps->items[victim + 1],
		(size_t)(ps->count - victim - 1) * sizeof(*ps->items));
	ps->count--;
}

/* The entry for producer_id, added (empty) when missing; NULL: no memory. */
static struct plog_producer *entry_for(struct plog_producers *ps, int64_t producer_id)
{
	uint32_t at = lower_bound(ps, producer_id);
	if (at < ps->count && ps->items[at].producer_id == producer_id) {
		return &ps->items[at];
	}
	if (ps->count >= PLOG_MAX_PRODUCERS) {
		evict_oldest(ps);
		at = lower_bound(ps, producer_id);
	}
	if (ps->count == ps->capacity) {
		uint32_t cap = ps->capacity == 0 ? 8 : ps->capacity * 2;
		struct plog_producer *n = realloc(ps->items, (size_t)cap * sizeof(*n));
		if (n == NULL) {
			return NULL;
		}
		ps->items = n;
		ps->capacity = cap;
	}
	memmove(&ps->items[at + 1], &ps->items[at], (size_t)(ps->count - at) * sizeof(*ps->items));
	ps->count++;
	struct plog_producer *p = &ps->items[at];
	memset(p, 0, sizeof(*p));
	p->producer_id = producer_id;
	p->refused_seq = -1;
	return p;
}

enum keel_err plog_producers_update(struct plog_producers *ps, int64_t producer_id, int16_t epoch,
				    const struct plog_producer_batch *batch)
{
	struct plog_producer *p = entry_for(ps, producer_id);
	if (p == NULL) {
		return KEEL_NOMEM;
	}
	if (p->count == 0 || epoch != p->epoch) {
		p->count = 0;
		p->epoch = epoch;
	}
	p->refused_seq = -1; /* the sequence moved on */
	KEEL_ASSERT(p->count <= PLOG_PRODUCER_BATCHES);
	if (p->count == PLOG_PRODUCER_BATCHES) {
		memmove(&p->batches[0], &p->batches[1],
			(PLOG_PRODUCER_BATCHES - 1) * sizeof(p->batches[0]));
		p->count--;
	}
	p->batches[p->count++] = *batch;
	KEEL_ASSERT(p->count >= 1);
	KEEL_ASSERT(p->count <= PLOG_PRODUCER_BATCHES);
	return KEEL_OK;
}

/* Records one batch header when it is an idempotent producer's data. */
static enum keel_err note_batch(struct plog_producers *ps, const struct plog_batch *b)
{
	if (b->producer_id < 0 || b->base_sequence < 0 || (b->attributes & PLOG_ATTR_CONTROL)) {
		return KEEL_OK;
	}
	struct plog_producer_batch pb = {
		.first_seq = b->base_sequence,
		.last_seq = plog_producer_last_seq(b->base_sequence, b->last_offset_delta),
		.first_offset = b->base_offset,
		.last_offset = plog_batch_last_offset(b),
	};
	return plog_producers_update(ps, b->producer_id, b->producer_epoch, &pb);
}

enum keel_err plog_producers_update_from(struct plog_producers *ps, const uint8_t *data,
					 size_t size)
{
	size_t pos = 0;
	while (pos + PLOG_BATCH_HEADER_SIZE <= size) {
		struct plog_batch b;
		if (plog_batch_parse_header(data + pos, size - pos, UINT32_MAX, &b) != PLOG_BATCH_OK ||
		    b.size > size - pos) {
			return KEEL_CORRUPT;
		}
		enum keel_err err = note_batch(ps, &b);
		if (err != KEEL_OK) {
			return err;
		}
		pos += b.size;
	}
	return pos == size ? KEEL_OK : KEEL_CORRUPT;
}

/* ---- snapshot encoding ---- */

uint8_t *plog_producers_encode(const struct plog_producers *ps, int64_t offset,
			       int32_t epoch_before, const uint8_t topic_id[PLOG_TOPIC_ID_SIZE],
			       size_t *size)
{
	size_t cap = SNAP_HEADER_SIZE + 4;
	for (uint32_t i = 0; i < ps->count; i++) {
		cap += SNAP_PRODUCER_MIN + (size_t)ps->items[i].count * SNAP_BATCH_SIZE;
	}
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, cap, cap);
	keel_wbuf_bytes(&w, SNAP_MAGIC, 8);
	keel_wbuf_u32(&w, SNAP_VERSION);
	keel_wbuf_u32(&w, ps->count);
	keel_wbuf_i64(&w, offset);
	keel_wbuf_i32(&w, epoch_before);
	keel_wbuf_bytes(&w, topic_id, PLOG_TOPIC_ID_SIZE);
	for (uint32_t i = 0; i < ps->count; i++) {
		const struct plog_producer *p = &ps->items[i];
		keel_wbuf_i64(&w, p->producer_id);
		keel_wbuf_u16(&w, (uint16_t)p->epoch);
		keel_wbuf_u8(&w, p->count);
		for (uint32_t j = 0; j < p->count; j++) {
			keel_wbuf_i32(&w, p->batches[j].first_seq);
			keel_wbuf_i32(&w, p->batches[j].last_seq);
			keel_wbuf_i64(&w, p->batches[j].first_offset);
			keel_wbuf_i64(&w, p->batches[j].last_offset);
		}
	}
	if (keel_wbuf_ok(&w)) {
		keel_wbuf_u32(&w, keel_crc32c(0, w.data, w.size));
	}
	if (!keel_wbuf_ok(&w)) {
		keel_wbuf_free(&w);
		return NULL;
	}
	return keel_wbuf_release(&w, size);
}

enum keel_err plog_producers_decode(struct plog_producers *ps, const uint8_t *data, size_t size,
				    int64_t *offset, int32_t *epoch_before,
				    uint8_t topic_id[PLOG_TOPIC_ID_SIZE])
{
	plog_producers_clear(ps);
	if (size < SNAP_HEADER_SIZE + 4 || memcmp(data, SNAP_MAGIC, 8) != 0) {
		return KEEL_CORRUPT;
	}
	if (keel_load_be32(data + size - 4) != keel_crc32c(0, data, size - 4)) {
		return KEEL_CORRUPT;
	}
	if (keel_load_be32(data + 8) != SNAP_VERSION) {
		return KEEL_UNSUPPORTED;
	}
	uint32_t count = keel_load_be32(data + 12);
	*offset = (int64_t)keel_load_be64(data + 16);
	*epoch_before = (int32_t)keel_load_be32(data + 24);
	memcpy(topic_id, data + 28, PLOG_TOPIC_ID_SIZE);
	size_t body = size - 4 - SNAP_HEADER_SIZE;
	if (*offset < 0 || count > PLOG_MAX_PRODUCERS || count > body / SNAP_PRODUCER_MIN) {
		return KEEL_CORRUPT;
	}
	struct keel_rbuf r;
	keel_rbuf_init(&r, data + SNAP_HEADER_SIZE, body);
	int64_t prev = -1;
	for (uint32_t i = 0; i < count; i++) {
		int64_t pid = keel_rbuf_i64(&r);
		int16_t epoch = (int16_t)keel_rbuf_u16(&r);
		uint8_t n = keel_rbuf_u8(&r);
		if (!keel_rbuf_ok(&r) || pid <= prev || n == 0 || n > PLOG_PRODUCER_BATCHES) {
			return KEEL_CORRUPT;
		}
		prev = pid;
		for (uint8_t j = 0; j < n; j++) {
			struct plog_producer_batch b;
			b.first_seq = keel_rbuf_i32(&r);
			b.last_seq = keel_rbuf_i32(&r);
			b.first_offset = keel_rbuf_i64(&r);
			b.last_offset = keel_rbuf_i64(&r);
			if (!keel_rbuf_ok(&r) || b.first_seq < 0 || b.last_seq < 0 ||
			    b.first_offset < 0 || b.last_offset < b.first_offset ||
			    b.last_offset >= *offset) {
				plog_producers_clear(ps);
				return KEEL_CORRUPT;
			}
			enum keel_err err = plog_producers_update(ps, pid, epoch, &b);
			if (err != KEEL_OK) {
				plog_producers_clear(ps);
				return err;
			}
		}
	}
	if (keel_rbuf_remaining(&r) != 0) {
		plog_producers_clear(ps);
		return KEEL_CORRUPT;
	}
	return KEEL_OK;
}

/* ---- files ---- */

/* The epoch of the batch holding offset - 1 per the epoch cache (-1: none). */
static int32_t epoch_before(const struct plog *log, int64_t offset)
{
	int32_t epoch = PLOG_UNDEFINED_EPOCH;
	for (uint32_t i = 0; i < log->epochs.count; i++) {
		if (log->epochs.entries[i].start_offset < offset) {
			epoch = log->epochs.entries[i].epoch;
		}
	}
	return epoch;
}

#define MAX_LISTED 64

struct snap_list {
	int64_t offsets[MAX_LISTED];
	uint32_t count;
};

static void list_one(void *arg, const char *name)
{
	struct snap_list *l = arg;
	int64_t base;
	if (plog_parse_file_name(name, &base) == PLOG_FILE_SNAPSHOT && l->count < MAX_LISTED) {
		l->offsets[l->count++] = base;
	}
}

static int offset_desc(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? 1 : (x > y ? -1 : 0);
}

/* The snapshot files of the log, newest first. */
static enum keel_err list_snapshots(struct plog *log, struct snap_list *l)
{
	l->count = 0;
	enum keel_err err = wal_vfs_list(log->config.vfs, log->dir, list_one, l);
	if (err == KEEL_OK && l->count > 1) {
		qsort(l->offsets, l->count, sizeof(l->offsets[0]), offset_desc);
	}
	return err;
}

static enum keel_err unlink_snapshot(struct plog *log, int64_t offset)
{
	char name[PLOG_NAME_MAX];
	char path[WAL_VFS_PATH_MAX];
	plog_file_name(name, offset, PLOG_FILE_SNAPSHOT);
	enum keel_err err = plog_path(log, path, sizeof(path), name);
	if (err == KEEL_OK) {
		err = wal_vfs_unlink(log->config.vfs, path);
	}
	return err == KEEL_NOENT ? KEEL_OK : err;
}

enum keel_err plog_producers_save(struct plog *log, const struct plog_producers *ps)
{
	int64_t end = plog_log_end_offset(log);
	size_t size = 0;
	uint8_t *data = plog_producers_encode(ps, end, epoch_before(log, end), log->topic_id, &size);
	if (data == NULL) {
		return KEEL_NOMEM;
	}
	char name[PLOG_NAME_MAX];
	plog_file_name(name, end, PLOG_FILE_SNAPSHOT);
	enum keel_err err = plog_replace_file(log, name, data, size);
	free(data);
	struct snap_list l;
	if (err == KEEL_OK) {
		err = list_snapshots(log, &l);
	}
	/* Keep this one and the one before it. */
	for (uint32_t i = 2; err == KEEL_OK && i < l.count; i++) {
		err = unlink_snapshot(log, l.offsets[i]);
	}
	return err;
}

enum keel_err plog_producers_drop_snapshots(struct plog *log, int64_t offset)
{
	struct snap_list l;
	enum keel_err err = list_snapshots(log, &l);
	for (uint32_t i = 0; err == KEEL_OK && i < l.count; i++) {
		if (l.offsets[i] >= offset) {
			err = unlink_snapshot(log, l.offsets[i]);
		}
	}
	if (err == KEEL_OK) {
		err = wal_vfs_sync_dir(log->config.vfs, log->dir);
	}
	return err;
}

/* Loads the snapshot at `offset` when it matches the log: true on success. */
static bool load_snapshot(struct plog *log, int64_t offset, struct plog_producers *ps,
			  enum keel_err *io_err)
{
	if (offset > plog_log_end_offset(log) || offset < plog_log_start_offset(log)) {
		return false;
	}
	char name[PLOG_NAME_MAX];
	char path[WAL_VFS_PATH_MAX];
	plog_file_name(name, offset, PLOG_FILE_SNAPSHOT);
	if (plog_path(log, path, sizeof(path), name) != KEEL_OK) {
		return false;
	}
	uint8_t *data = NULL;
	size_t size = 0;
	enum keel_err err = plog_read_file(log, path, SNAP_MAX_SIZE, &data, &size);
	if (err != KEEL_OK) {
		if (err != KEEL_TOOBIG && err != KEEL_NOENT && err != KEEL_CORRUPT) {
			*io_err = err;
		}
		return false;
	}
	int64_t at;
	int32_t epoch;
	uint8_t topic_id[PLOG_TOPIC_ID_SIZE];
	err = plog_producers_decode(ps, data, size, &at, &epoch, topic_id);
	free(data);
	if (err == KEEL_NOMEM) {
		*io_err = err;
	}
	bool same_topic = !log->has_topic_id || memcmp(topic_id, log->topic_id, 16) == 0;
	if (err != KEEL_OK || at != offset || !same_topic || epoch != epoch_before(log, offset)) {
		plog_producers_clear(ps);
		return false;
	}
	return true;
}

/* Feeds every batch header of [from, log end) to the state. */
static enum keel_err scan_from(struct plog *log, int64_t from, struct plog_producers *ps,
			       int64_t *scanned)
{
	if (from >= plog_log_end_offset(log)) {
		return KEEL_OK;
	}
	for (uint32_t s = plog_find_segment(log, from); s < log->segment_count; s++) {
		const struct plog_segment *seg = log->segments[s];
		uint64_t pos = 0;
		if (from > seg->base_offset) {
			enum keel_err err = plog_segment_position_of(log, seg, from, &pos);
			if (err != KEEL_OK) {
				return err;
			}
		}
		while (pos < seg->size_bytes) {
			struct plog_batch b;
			enum keel_err err = plog_segment_read_header(log, seg, pos, &b);
			if (err == KEEL_OK) {
				err = note_batch(ps, &b);
			}
			if (err != KEEL_OK) {
				return err;
			}
			(*scanned)++;
			pos += b.size;
		}
	}
	return KEEL_OK;
}

enum keel_err plog_producers_rebuild(struct plog *log, struct plog_producers *ps,
				     struct plog_producers_rebuild_info *info)
{
	struct plog_producers_rebuild_info local;
	if (info == NULL) {
		info = &local;
	}
	memset(info, 0, sizeof(*info));
	info->snapshot_offset = -1;
	plog_producers_clear(ps);
	struct snap_list l;
	enum keel_err err = list_snapshots(log, &l);
	for (uint32_t i = 0; err == KEEL_OK && i < l.count; i++) {
		if (load_snapshot(log, l.offsets[i], ps, &err)) {
			info->snapshot_offset = l.offsets[i];
			break;
		}
		info->snapshots_ignored++;
	}
	int64_t from = plog_log_start_offset(log);
	if (info->snapshot_offset > from) {
		from = info->snapshot_offset;
	}
	if (err == KEEL_OK) {
		err = scan_from(log, from, ps, &info->scanned_batches);
	}
	if (err != KEEL_OK) {
		plog_producers_clear(ps);
	}
	return err;
}
