/*
 * hwcheck.c — the high-watermark checkpoint (Kafka's
 * replication-offset-checkpoint): the high watermark of every partition a
 * broker holds, written every --hw-checkpoint-interval-ms and at a clean
 * stop, read back at start. A partition opened from the first image after
 * a start begins at its checkpointed high watermark (capped at its log end
 * by broker_replica_adopt) instead of its log start, so a restarted leader
 * does not serve a high watermark (ListOffsets latest, Fetch) lower than
 * the one it checkpointed, and consumers do not see it jump back.
 *
 * File <data_dir>/replication-offset-checkpoint, replaced atomically
 * (written to replication-offset-checkpoint.tmp, fdatasync, rename,
 * directory sync), big-endian:
 *
 *     magic "KHWC" | version u16 (1) | count u32 |
 *     count x { topic_id[16] | partition i32 | high_watermark i64 } |
 *     crc32c u32 of every byte before it
 *
 * A file that does not check (magic, version, length, CRC, a negative
 * offset) is reported and ignored: every partition then starts as without
 * one (from its log start, until the leader's first answers). The
 * guarantee is the checkpoint's: after kill -9, a high watermark that rose
 * after the last checkpoint starts from the checkpointed value, not the
 * newest; after a clean stop, from the newest.
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/crc32c.h"
#include "base/sort.h"
#include "broker/broker.h"
#include "meta/fmt.h"
#include "wal/vfs.h"

#define HW_MAGIC       0x4b485743u /* "KHWC" */
#define HW_VERSION     1
#define HW_HEADER_SIZE 10u /* magic, version, count */
#define HW_ENTRY_SIZE  28u
#define HW_MAX_FILE    (64u << 20)
_Static_assert(HW_HEADER_SIZE == 4 + 2 + 4, "header: u32 magic, u16 version, u32 count");
_Static_assert(HW_ENTRY_SIZE == 16 + 4 + 8, "entry: topic id, i32 partition, i64 high watermark");

enum keel_err broker_hw_checkpoint_encode(const struct broker_core *core, struct keel_wbuf *w)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < core->part_count; i++) {
		n += core->parts[i]->open ? 1u : 0u;
	}
	keel_wbuf_reset(w);
	keel_wbuf_u32(w, HW_MAGIC);
	keel_wbuf_u16(w, HW_VERSION);
	keel_wbuf_u32(w, n);
	for (uint32_t i = 0; i < core->part_count; i++) {
		const struct broker_partition *p = core->parts[i];
		if (p->open) {
			keel_wbuf_bytes(w, p->topic_id, 16);
			keel_wbuf_i32(w, p->index);
			keel_wbuf_i64(w, p->high_watermark);
		}
	}
	keel_wbuf_u32(w, keel_crc32c(0, w->data, w->size));
	return keel_wbuf_ok(w) ? KEEL_OK : KEEL_NOMEM;
}

static enum keel_err corrupt(char *why, size_t why_size, const char *what)
{
	struct meta_fmt f;
	meta_fmt_init(&f, why, why_size);
	meta_fmt_str(&f, what);
	return KEEL_CORRUPT;
}

enum keel_err broker_hw_checkpoint_decode(const void *data, size_t size,
                                          struct broker_hw_entry **entries, uint32_t *count,
                                          char *why, size_t why_size)
{
	*entries = NULL;
	*count = 0;
	if (size < HW_HEADER_SIZE + 4) {
		return corrupt(why, why_size, "shorter than its header");
	}
	struct keel_rbuf r;
	keel_rbuf_init(&r, data, size);
	if (keel_rbuf_u32(&r) != HW_MAGIC) {
		return corrupt(why, why_size, "not a high-watermark checkpoint (bad magic)");
	}
	if (keel_rbuf_u16(&r) != HW_VERSION) {
		return corrupt(why, why_size, "an unknown version");
	}
	uint32_t n = keel_rbuf_u32(&r);
	if ((size - HW_HEADER_SIZE - 4) / HW_ENTRY_SIZE != n ||
	    (size - HW_HEADER_SIZE - 4) % HW_ENTRY_SIZE != 0) {
		return corrupt(why, why_size, "its length does not match its entry count");
	}
	const uint8_t *tail = (const uint8_t *)data + size - 4;
	uint32_t crc = (uint32_t)tail[0] << 24 | (uint32_t)tail[1] << 16 | (uint32_t)tail[2] << 8 | tail[3];
	if (crc != keel_crc32c(0, data, size - 4)) {
		return corrupt(why, why_size, "its checksum does not match");
	}
	struct broker_hw_entry *e = calloc((size_t)n + 1, sizeof(*e));
	if (e == NULL) {
		return KEEL_NOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		keel_rbuf_copy(&r, e[i].topic_id, 16);
		e[i].partition = keel_rbuf_i32(&r);
		e[i].high_watermark = keel_rbuf_i64(&r);
		if (e[i].partition < 0 || e[i].high_watermark < 0) {
			free(e);
			return corrupt(why, why_size, "a negative partition or offset");
		}
	}
	KEEL_ASSERT(keel_rbuf_ok(&r));
	KEEL_ASSERT(keel_rbuf_remaining(&r) == 4);
	*entries = e;
	*count = n;
	return KEEL_OK;
}

static int entry_cmp(const void *a, const void *b, void *ctx)
{
	(void)ctx;
	const struct broker_hw_entry *x = a;
	const struct broker_hw_entry *y = b;
	int c = memcmp(x->topic_id, y->topic_id, 16);
	if (c != 0) {
		return c;
	}
	return (x->partition > y->partition) - (x->partition < y->partition);
}

enum keel_err broker_hw_checkpoint_store(struct wal_vfs *vfs, const char *data_dir,
                                         const void *data, size_t size, char *errmsg)
{
	return wal_write_atomic(vfs, data_dir, BROKER_HW_CHECKPOINT_FILE,
	                        BROKER_HW_CHECKPOINT_FILE ".tmp", data, size, errmsg);
}

enum keel_err broker_hw_checkpoint_load(struct broker_core *core, uint32_t *count, char *why,
                                        size_t why_size)
{
	*count = 0;
	why[0] = '\0';
	char path[WAL_VFS_PATH_MAX];
	if (wal_vfs_join(path, sizeof(path), core->data_dir, BROKER_HW_CHECKPOINT_FILE) !=
	    KEEL_OK) {
		return corrupt(why, why_size, "the data directory's path is too long");
	}
	uint8_t *data = NULL;
	size_t size = 0;
	char errmsg[WAL_VFS_ERRMSG_SIZE];
	enum keel_err err =
	        wal_read_whole(core->config.vfs, path, HW_MAX_FILE, &data, &size, errmsg);
	if (err == KEEL_NOENT) {
		return KEEL_NOENT;
	}
	if (err != KEEL_OK) {
		struct meta_fmt f;
		meta_fmt_init(&f, why, why_size);
		meta_fmt_str(&f, errmsg);
		return err;
	}
	struct broker_hw_entry *e = NULL;
	uint32_t n = 0;
	err = broker_hw_checkpoint_decode(data, size, &e, &n, why, why_size);
	free(data);
	if (err != KEEL_OK) {
		return err;
	}
	keel_sort(e, n, sizeof(*e), entry_cmp, NULL);
	free(core->hw_restored);
	core->hw_restored = e;
	core->hw_restored_count = n;
	*count = n;
	return KEEL_OK;
}

int64_t broker_hw_restored(const struct broker_core *core, const uint8_t topic_id[16],
                           int32_t partition)
{
	struct broker_hw_entry key;
	memcpy(key.topic_id, topic_id, 16);
	key.partition = partition;
	uint32_t lo = 0, hi = core->hw_restored_count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = entry_cmp(&core->hw_restored[mid], &key, NULL);
		if (c == 0) {
			return core->hw_restored[mid].high_watermark;
		}
		if (c < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return -1;
}

void broker_hw_restored_drop(struct broker_core *core)
{
	free(core->hw_restored);
	core->hw_restored = NULL;
	core->hw_restored_count = 0;
}
