/*
 * fuzz_plog_recover.c — partition log recovery over a fuzzed segment file.
 *
 * The input becomes the only segment (the tail) of a partition directory on
 * the fault vfs, or (first byte odd) an older segment followed by an empty
 * tail whose base offset comes from the next 8 bytes. Opening must never
 * crash; when it succeeds, the indexes must agree with a full scan, every
 * offset of the log must be readable, and a new batch must append and read
 * back. A tail is only ever cut, never refused.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/buf.h"
#include "base/rng.h"
#include "plog/plog.h"
#include "fuzz_batch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DIR "/p/t-0"

static void write_file(struct wal_vfs *vfs, int64_t base, const uint8_t *data, size_t size)
{
	char path[128];
	snprintf(path, sizeof(path), DIR "/%020lld.log", (long long)base);
	struct wal_vfs_file *f;
	KEEL_ASSERT(wal_vfs_open(vfs, path, WAL_VFS_CREATE, &f) == KEEL_OK);
	if (size > 0) {
		KEEL_ASSERT(wal_vfs_pwrite(f, data, size, 0) == KEEL_OK);
	}
	wal_vfs_close(f);
}


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct keel_rng rng;
	keel_rng_seed(&rng, 1);
	struct wal_vfs vfs;
	struct wal_vfs_fault_config vc = {.rng = &rng};
	KEEL_ASSERT(wal_vfs_fault_init(&vfs, &vc) == KEEL_OK);
	KEEL_ASSERT(wal_vfs_mkdir(&vfs, "/p") == KEEL_OK);
	KEEL_ASSERT(wal_vfs_mkdir(&vfs, DIR) == KEEL_OK);
	bool older = size > 9 && (data[0] & 1) != 0;
	if (older) {
		int64_t tail = (int64_t)(keel_load_be64(data + 1) & 0xffff);
		write_file(&vfs, 0, data + 9, size - 9);
		if (tail > 0) {
			write_file(&vfs, tail, NULL, 0);
		}
	} else {
		write_file(&vfs, 0, data, size);
	}
	struct plog_config config;
	plog_config_init(&config, &vfs, DIR);
	config.max_batch_bytes = 1 << 16;
	config.segment_bytes = 1 << 20;
	config.verify_all_segments = true;
	struct plog log;
	struct plog_recovery rec;
	enum keel_err err = plog_open(&log, &config, &rec);
	KEEL_ASSERT(older || err == KEEL_OK);
	if (err == KEEL_OK) {
		KEEL_ASSERT(plog_check(&log) == KEEL_OK);
		int64_t end = plog_log_end_offset(&log);
		for (int64_t off = plog_log_start_offset(&log); off < end;) {
			struct plog_read_result r;
			KEEL_ASSERT(plog_read(&log, off, end, 1, &r) == KEEL_OK);
			KEEL_ASSERT(r.size > 0 && r.next_offset > off);
			off = r.next_offset;
		}
		uint8_t batch[128];
		size_t n = fuzz_tiny_batch(batch);
		struct plog_append_info info;
		int32_t epoch = plog_epochs_latest(&log.epochs);
		KEEL_ASSERT(plog_append(&log, batch, n, epoch < 0 ? 0 : epoch, &info) == KEEL_OK);
		KEEL_ASSERT(info.first_offset == end);
		KEEL_ASSERT(plog_check(&log) == KEEL_OK);
		plog_close(&log);
	}
	wal_vfs_fault_close(&vfs);
	return 0;
}
