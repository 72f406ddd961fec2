/* vfs.c — helpers shared by every vfs implementation (see vfs.h): the
 * per-thread error detail, exact reads, zero filling and path joining. */
#include "wal/vfs.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/assert.h"

/* One detail string per thread, so that the storage thread and the snapshot
 * thread never read each other's failures. */
static _Thread_local char vfs_error_detail[256];

const char *wal_vfs_last_error(void)
{
	return vfs_error_detail;
}

void wal_vfs_set_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(vfs_error_detail, sizeof(vfs_error_detail), fmt, ap);
	va_end(ap);
}

enum keel_err wal_vfs_pread_exact(struct wal_vfs_file *file, void *buf, size_t size,
				  uint64_t offset)
{
	size_t nread = 0;
	enum keel_err err = wal_vfs_pread(file, buf, size, offset, &nread);
	if (err != KEEL_OK) {
		return err;
	}
	if (nread != size) {
		wal_vfs_set_error("read of %zu bytes at offset %llu: file ends after %zu", size,
				  (unsigned long long)offset, nread);
		return KEEL_SHORT;
	}
	return KEEL_OK;
}

enum keel_err wal_vfs_write_zeros(struct wal_vfs_file *file, uint64_t offset, uint64_t size)
{
	static const uint8_t zeros[64 * 1024];
	while (size > 0) {
		size_t chunk = size < sizeof(zeros) ? (size_t)size : sizeof(zeros);
		enum keel_err err = wal_vfs_pwrite(file, zeros, chunk, offset);
		if (err != KEEL_OK) {
			return err;
		}
		offset += chunk;
		size -= chunk;
	}
	return KEEL_OK;
}

enum keel_err wal_vfs_join(char *out, size_t out_size, const char *dir, const char *name)
{
	KEEL_ASSERT(out_size > 0);
	size_t dir_len = strlen(dir);
	while (dir_len > 0 && dir[dir_len - 1] == '/') {
		dir_len--; /* "d/" and "d" name the same directory; "/" becomes "" */
	}
	int n = snprintf(out, out_size, "%.*s/%s", (int)dir_len, dir, name);
	if (n < 0 || (size_t)n >= out_size) {
		wal_vfs_set_error("path %s/%s is longer than %zu bytes", dir, name, out_size - 1);
		return KEEL_TOOBIG;
	}
	return KEEL_OK;
}
