/*
 * internal.h — helpers shared by the WAL's own .c files; not an API.
 */
#ifndef KEEL_WAL_INTERNAL_H
#define KEEL_WAL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "wal/config.h"
#include "wal/vfs.h"

/* Formats into errmsg (WAL_ERRMSG_SIZE bytes) and returns err. */
__attribute__((format(printf, 3, 4))) enum keel_err wal_fail(char *errmsg, enum keel_err err,
							      const char *fmt, ...);

/* Like wal_fail, with ": <vfs detail>" appended (the failed call's detail). */
__attribute__((format(printf, 3, 4))) enum keel_err wal_fail_io(char *errmsg, enum keel_err err,
								 const char *fmt, ...);

/* dir/name into out; asserts it fits (wal_config_check bounded dir). */
void wal_path(char out[WAL_VFS_PATH_MAX], const char *dir, const char *name);

/* Writes `size` bytes to dir/tmp_name, datasyncs it, renames it over
 * dir/name and syncs the directory: afterwards dir/name holds the data
 * durably, and a crash at any point leaves either the old or the new file. */
enum keel_err wal_write_atomic(struct wal_vfs *vfs, const char *dir, const char *name,
			       const char *tmp_name, const void *data, size_t size,
			       char errmsg[WAL_ERRMSG_SIZE]);

/* Reads a whole file of at most max_size bytes into malloc'd memory (the
 * caller frees *data). KEEL_NOENT when missing, KEEL_TOOBIG when larger. */
enum keel_err wal_read_whole(struct wal_vfs *vfs, const char *path, uint64_t max_size,
			     uint8_t **data, size_t *size, char errmsg[WAL_ERRMSG_SIZE]);

/* Grows a malloc'd array to hold at least `need` items (doubling). */
bool wal_grow(void **items, size_t *capacity, size_t need, size_t item_size);

#endif
