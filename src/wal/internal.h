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

/* wal_write_atomic and wal_read_whole: wal/vfs.h (the broker's checkpoint
 * uses them too). */
_Static_assert(WAL_VFS_ERRMSG_SIZE == WAL_ERRMSG_SIZE, "one message size");

/* Grows a malloc'd array to hold at least `need` items (doubling). */
bool wal_grow(void **items, size_t *capacity, size_t need, size_t item_size);

#endif
