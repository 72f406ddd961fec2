/* util.c — configuration defaults and checks, error formatting, and the
 * whole-file helpers (atomic replace, read all) the WAL's modules share. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "wal/format.h"
#include "wal/internal.h"

void wal_config_init(struct wal_config *config, struct wal_vfs *vfs, const char *dir)
{
	*config = (struct wal_config){
		.vfs = vfs,
		.dir = dir,
		.segment_size_bytes = 64ull << 20,
		.max_entry_size_bytes = 16u << 20,
		.prealloc = WAL_PREALLOC_ZERO_FILL,
		.spare_segments = 2,
		.write_buffer_bytes = 1u << 20,
		.snapshots_retained = 2,
		.max_membership_bytes = 1u << 20,
		.max_snapshot_bytes = 64ull << 30,
		.max_recovery_bytes = 1ull << 30,
	};
}

enum keel_err wal_config_check(const struct wal_config *config, char errmsg[WAL_ERRMSG_SIZE])
{
	if (config->vfs == NULL || config->dir == NULL || config->dir[0] == '\0') {
		return wal_fail(errmsg, KEEL_CONFIG, "wal: no vfs or directory configured");
	}
	if (strlen(config->dir) + WAL_NAME_MAX + 2 > WAL_VFS_PATH_MAX) {
		return wal_fail(errmsg, KEEL_CONFIG, "wal: directory name too long");
	}
	uint64_t one_record = WAL_SEGMENT_HEADER_SIZE +
			      wal_record_encoded_size(config->max_entry_size_bytes);
	if (config->segment_size_bytes < one_record) {
		return wal_fail(errmsg, KEEL_CONFIG,
				"wal: segment_size_bytes (%llu) cannot hold one entry of "
				"max_entry_size_bytes (%u)",
				(unsigned long long)config->segment_size_bytes,
				config->max_entry_size_bytes);
	}
	if (config->segment_size_bytes > (1ull << 32)) {
		return wal_fail(errmsg, KEEL_CONFIG, "wal: segment_size_bytes over 4 GiB");
	}
	if (config->write_buffer_bytes < 4096) {
		return wal_fail(errmsg, KEEL_CONFIG, "wal: write_buffer_bytes under 4 KiB");
	}
	if (config->snapshots_retained < 1) {
		return wal_fail(errmsg, KEEL_CONFIG, "wal: snapshots_retained must be at least 1");
	}
	if (config->prealloc > WAL_PREALLOC_NONE) {
		return wal_fail(errmsg, KEEL_CONFIG, "wal: unknown prealloc mode");
	}
	return KEEL_OK;
}

enum keel_err wal_fail(char *errmsg, enum keel_err err, const char *fmt, ...)
{
	KEEL_ASSERT(err != KEEL_OK);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(errmsg, WAL_ERRMSG_SIZE, fmt, ap);
	va_end(ap);
	return err;
}

enum keel_err wal_fail_io(char *errmsg, enum keel_err err, const char *fmt, ...)
{
	KEEL_ASSERT(err != KEEL_OK);
	char detail[256];
	snprintf(detail, sizeof(detail), "%s", wal_vfs_last_error());
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(errmsg, WAL_ERRMSG_SIZE, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < WAL_ERRMSG_SIZE) {
		snprintf(errmsg + n, WAL_ERRMSG_SIZE - (size_t)n, ": %s (%s)",
			 detail[0] ? detail : keel_strerror(err), keel_errname(err));
	}
	return err;
}

void wal_path(char out[WAL_VFS_PATH_MAX], const char *dir, const char *name)
{
	enum keel_err err = wal_vfs_join(out, WAL_VFS_PATH_MAX, dir, name);
	KEEL_ASSERT(err == KEEL_OK);
}

enum keel_err wal_write_atomic(struct wal_vfs *vfs, const char *dir, const char *name,
			       const char *tmp_name, const void *data, size_t size,
			       char errmsg[WAL_VFS_ERRMSG_SIZE])
{
	char tmp_path[WAL_VFS_PATH_MAX];
	char path[WAL_VFS_PATH_MAX];
	wal_path(tmp_path, dir, tmp_name);
	wal_path(path, dir, name);
	struct wal_vfs_file *f;
	enum keel_err err = wal_vfs_open(vfs, tmp_path, WAL_VFS_CREATE, &f);
	if (err != KEEL_OK) {
		return wal_fail_io(errmsg, err, "wal: create %s", tmp_path);
	}
	/* A leftover temp file from a crash may be longer than this one. */
	err = wal_vfs_truncate(f, 0);
	if (err == KEEL_OK) {
		err = wal_vfs_pwrite(f, data, size, 0);
	}
	if (err == KEEL_OK) {
		err = wal_vfs_datasync(f);
	}
	wal_vfs_close(f);
	if (err != KEEL_OK) {
		return wal_fail_io(errmsg, err, "wal: write %s", tmp_path);
	}
	err = wal_vfs_rename(vfs, tmp_path, path);
	if (err != KEEL_OK) {
		return wal_fail_io(errmsg, err, "wal: rename %s to %s", tmp_path, name);
	}
	err = wal_vfs_sync_dir(vfs, dir);
	if (err != KEEL_OK) {
		return wal_fail_io(errmsg, err, "wal: sync directory %s", dir);
	}
	return KEEL_OK;
}

enum keel_err wal_read_whole(struct wal_vfs *vfs, const char *path, uint64_t max_size,
			     uint8_t **data, size_t *size, char errmsg[WAL_VFS_ERRMSG_SIZE])
{
	struct wal_vfs_file *f;
	enum keel_err err = wal_vfs_open(vfs, path, WAL_VFS_READ_ONLY, &f);
	if (err != KEEL_OK) {
		return wal_fail_io(errmsg, err, "wal: open %s", path);
	}
	uint64_t file_size = 0;
	uint8_t *buf = NULL;
	err = wal_vfs_size(f, &file_size);
	if (err != KEEL_OK) {
		err = wal_fail_io(errmsg, err, "wal: size of %s", path);
		goto close;
	}
	if (file_size > max_size) {
		err = wal_fail(errmsg, KEEL_TOOBIG, "wal: %s is %llu bytes, over the limit of %llu",
			       path, (unsigned long long)file_size, (unsigned long long)max_size);
		goto close;
	}
	buf = malloc(file_size > 0 ? (size_t)file_size : 1);
	if (buf == NULL) {
		err = wal_fail(errmsg, KEEL_NOMEM, "wal: no memory to read %s", path);
		goto close;
	}
	size_t n = 0;
	err = wal_vfs_pread(f, buf, (size_t)file_size, 0, &n);
	if (err != KEEL_OK) {
		err = wal_fail_io(errmsg, err, "wal: read %s", path);
		free(buf);
		goto close;
	}
	*data = buf;
	*size = n;
close:
	wal_vfs_close(f);
	return err;
}

bool wal_grow(void **items, size_t *capacity, size_t need, size_t item_size)
{
	if (need <= *capacity) {
		return true;
	}
	size_t cap = *capacity ? *capacity * 2 : 8;
	while (cap < need) {
		cap *= 2;
	}
	void *p = realloc(*items, cap * item_size);
	if (p == NULL) {
		return false;
	}
	*items = p;
	*capacity = cap;
	return true;
}
