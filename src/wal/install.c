/*
 * install.c — a received snapshot's chunks and its install (install.h).
 */
#include "wal/install.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "wal/snapshot.h"

/* Writes a failure's reason (truncated to fit). */
__attribute__((format(printf, 2, 3))) static void set_error(char errmsg[WAL_ERRMSG_SIZE],
							    const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(errmsg, WAL_ERRMSG_SIZE, fmt, ap);
	va_end(ap);
}

enum keel_err wal_install_write_chunk(const struct wal_config *config, uint64_t index,
				      uint64_t term, uint64_t offset, const void *data,
				      size_t size, char errmsg[WAL_ERRMSG_SIZE])
{
	char name[WAL_NAME_MAX], path[WAL_VFS_PATH_MAX];
	wal_snapshot_name(name, index, term, true);
	if (wal_vfs_join(path, sizeof(path), config->dir, name) != KEEL_OK) {
		set_error(errmsg, "snapshot chunk: path too long in %s",
			 config->dir);
		return KEEL_INVAL;
	}
	struct wal_vfs_file *f;
	enum keel_err rc = wal_vfs_open(config->vfs, path, WAL_VFS_CREATE, &f);
	if (rc != KEEL_OK) {
		set_error(errmsg, "snapshot chunk: cannot open %s: %s", path,
			 wal_vfs_last_error());
		return rc == KEEL_NOSPACE ? KEEL_NOSPACE : KEEL_IO;
	}
	if (offset == 0) {
		rc = wal_vfs_truncate(f, 0); /* a transfer starting over */
	}
	if (rc == KEEL_OK) {
		rc = wal_vfs_pwrite(f, data, size, offset);
	}
	if (rc == KEEL_OK) {
		rc = wal_vfs_datasync(f);
	}
	if (rc != KEEL_OK) {
		set_error(errmsg, "snapshot chunk: %s: %s", path,
			 wal_vfs_last_error());
		rc = rc == KEEL_NOSPACE ? KEEL_NOSPACE : KEEL_IO;
	}
	wal_vfs_close(f);
	return rc;
}

enum keel_err wal_install_snapshot(struct wal *wal, uint64_t index, uint64_t term,
				   bool discard_log, char name[WAL_NAME_MAX],
				   char errmsg[WAL_ERRMSG_SIZE])
{
	const struct wal_config *config = &wal->config;
	char tmp[WAL_NAME_MAX], from[WAL_VFS_PATH_MAX], to[WAL_VFS_PATH_MAX];
	wal_snapshot_name(tmp, index, term, true);
	wal_snapshot_name(name, index, term, false);
	if (wal_vfs_join(from, sizeof(from), config->dir, tmp) != KEEL_OK ||
	    wal_vfs_join(to, sizeof(to), config->dir, name) != KEEL_OK) {
		set_error(errmsg, "install snapshot: path too long in %s",
			 config->dir);
		return KEEL_INVAL;
	}
	if (wal_vfs_rename(config->vfs, from, to) != KEEL_OK) {
		set_error(errmsg, "install snapshot: rename %s: %s", from,
			 wal_vfs_last_error());
		return KEEL_IO;
	}
	if (wal_vfs_sync_dir(config->vfs, config->dir) != KEEL_OK) {
		set_error(errmsg, "install snapshot: cannot sync directory %s: %s",
			 config->dir, wal_vfs_last_error());
		return KEEL_IO;
	}
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct wal_snapshot_meta meta;
	char msg[WAL_ERRMSG_SIZE];
	enum keel_err rc = wal_snapshot_verify(config, name, &arena, &meta, msg);
	keel_arena_close(&arena);
	if (rc != KEEL_OK) {
		set_error(errmsg, "install snapshot: received file is damaged: %s",
			 msg);
		(void)wal_vfs_unlink(config->vfs, to);
		return KEEL_CORRUPT;
	}
	if (discard_log || wal_term_at(wal, index) != term) {
		rc = wal_reset(wal, index, term);
	} else {
		rc = wal_compact(wal, index);
	}
	if (rc != KEEL_OK) {
		set_error(errmsg, "install snapshot: %s", wal->errmsg);
	}
	return rc;
}
