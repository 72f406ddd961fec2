/*
 * vfs.h — the file-system interface under the WAL, and its two implementations.
 *
 * Every byte the WAL (segments, hard state, snapshots) reads or writes goes
 * through a `struct wal_vfs`: a small table of operations on paths and open
 * files. Two implementations live here:
 *
 *   POSIX   (wal_vfs_posix_init)  the real thing: open/pwrite/fdatasync/...
 *   fault   (wal_vfs_fault_init)  an in-memory file system that models
 *           durability exactly and injects faults, for unit tests and for the
 *           simulator (which puts the real WAL under its simulated nodes).
 *
 * Semantics every implementation keeps (the WAL relies on nothing else):
 *
 *  - pwrite writes all `size` bytes at `offset` or fails; writing past the
 *    end extends the file, a hole reads as zeros. pread reads up to `size`
 *    bytes and reports how many (fewer only at end of file).
 *  - A write is durable only after datasync() on that file returned KEEL_OK
 *    (fdatasync: data and the size, not the directory entry).
 *  - create, rename and unlink are durable only after sync_dir() on the
 *    directory that holds the name returned KEEL_OK. rename replaces an
 *    existing target atomically and stays within one directory.
 *  - allocate(size) makes the file at least `size` bytes long with blocks
 *    reserved (fallocate); the new bytes read as zeros. truncate sets the
 *    size exactly.
 *  - list() calls `fn` once per name in the directory ("." and ".." left
 *    out), in no promised order.
 *  - Errors are `enum keel_err` (KEEL_IO, KEEL_NOSPACE, KEEL_NOENT,
 *    KEEL_EXIST, ...); raw errno never leaves this layer. The detail (the
 *    operation, the path, strerror, or "injected EIO on sync #3") is kept
 *    per thread and read with wal_vfs_last_error() right after the failure.
 *
 * Threads: the POSIX vfs is stateless and safe from any thread. The fault
 * vfs serializes all calls with a mutex, so it is safe too, but it is only
 * deterministic when its calls come in a deterministic order (one thread).
 * One open file handle must not be used by two threads at once.
 *
 * Ownership: open() returns a handle owned by the caller until close().
 * Paths are copied; the caller's strings may die after each call.
 *
 * The fault model (wal_vfs_fault_*), for tests and the simulator:
 *
 *   Each file has durable contents and a list of pending (unsynced)
 *   operations; reads see the pending state. Each directory has a durable
 *   name table and a list of pending create/rename/unlink operations.
 *   wal_vfs_fault_crash() is a power loss followed by a reboot: every file
 *   keeps its durable contents plus what the crash mode lets through of its
 *   pending writes (nothing; an ordered prefix whose last write may be torn;
 *   or a scrambled, sector-wise subset, like out-of-order writeback), and
 *   every directory keeps its durable names plus all, or (lose_dir_ops) a
 *   random prefix, of its pending name operations. Handles opened before the
 *   crash go stale (every call but close fails with KEEL_IO).
 *
 *   Faults: the Nth call of an operation fails (scripted); each call of an
 *   operation fails with a probability; each read flips one bit of the data
 *   it returns with a probability (the stored bytes stay intact);
 *   wal_vfs_fault_corrupt() flips bits of the stored bytes themselves (bit
 *   rot); wal_vfs_fault_power_off_after(n) cuts the power after n more
 *   mutating calls — that call and all later ones fail with KEEL_IO until
 *   wal_vfs_fault_crash(). A failed write changes nothing; a failed datasync
 *   leaves the pending writes pending (their fate is decided by the crash),
 *   as a failed fsync on Linux promises nothing about the data.
 *
 *   Randomness comes only from the `struct keel_rng` the caller passes in,
 *   and list() returns names in sorted order, so a run is reproducible.
 */
#ifndef KEEL_WAL_VFS_H
#define KEEL_WAL_VFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct keel_rng;
struct wal_vfs;

/* Longest path any vfs accepts (including the terminating NUL). */
#define WAL_VFS_PATH_MAX 4096

/* An open file. Implementations embed this as their first member. */
struct wal_vfs_file {
	struct wal_vfs *vfs;
};

enum wal_vfs_open_flag {
	WAL_VFS_READ_ONLY = 1u << 0, /* no writes through this handle */
	WAL_VFS_CREATE = 1u << 1,    /* create the file if it is missing */
	WAL_VFS_EXCLUSIVE = 1u << 2, /* with CREATE: KEEL_EXIST if it exists */
};

typedef void (*wal_vfs_list_fn)(void *arg, const char *name);

struct wal_vfs_ops {
	enum keel_err (*open)(struct wal_vfs *vfs, const char *path, unsigned flags,
			      struct wal_vfs_file **file);
	/* Always succeeds (a stale or failed handle is still freed). */
	void (*close)(struct wal_vfs_file *file);
	enum keel_err (*pwrite)(struct wal_vfs_file *file, const void *buf, size_t size,
				uint64_t offset);
	enum keel_err (*pread)(struct wal_vfs_file *file, void *buf, size_t size, uint64_t offset,
			       size_t *nread);
	enum keel_err (*datasync)(struct wal_vfs_file *file);
	enum keel_err (*truncate)(struct wal_vfs_file *file, uint64_t size);
	enum keel_err (*allocate)(struct wal_vfs_file *file, uint64_t size);
	enum keel_err (*size)(struct wal_vfs_file *file, uint64_t *size);
	enum keel_err (*sync_dir)(struct wal_vfs *vfs, const char *dir);
	enum keel_err (*rename)(struct wal_vfs *vfs, const char *from, const char *to);
	enum keel_err (*unlink)(struct wal_vfs *vfs, const char *path);
	enum keel_err (*list)(struct wal_vfs *vfs, const char *dir, wal_vfs_list_fn fn, void *arg);
	/* KEEL_EXIST when the directory is already there. */
	enum keel_err (*mkdir)(struct wal_vfs *vfs, const char *path);
};

struct wal_vfs {
	const struct wal_vfs_ops *ops;
	void *impl; /* the implementation's state (NULL for POSIX) */
};

/* ---- calling through the table ---- */

static inline enum keel_err wal_vfs_open(struct wal_vfs *vfs, const char *path, unsigned flags,
					 struct wal_vfs_file **file)
{
	return vfs->ops->open(vfs, path, flags, file);
}

static inline void wal_vfs_close(struct wal_vfs_file *file)
{
	file->vfs->ops->close(file);
}

static inline enum keel_err wal_vfs_pwrite(struct wal_vfs_file *file, const void *buf,
					   size_t size, uint64_t offset)
{
	return file->vfs->ops->pwrite(file, buf, size, offset);
}

static inline enum keel_err wal_vfs_pread(struct wal_vfs_file *file, void *buf, size_t size,
					  uint64_t offset, size_t *nread)
{
	return file->vfs->ops->pread(file, buf, size, offset, nread);
}

static inline enum keel_err wal_vfs_datasync(struct wal_vfs_file *file)
{
	return file->vfs->ops->datasync(file);
}

static inline enum keel_err wal_vfs_truncate(struct wal_vfs_file *file, uint64_t size)
{
	return file->vfs->ops->truncate(file, size);
}

static inline enum keel_err wal_vfs_allocate(struct wal_vfs_file *file, uint64_t size)
{
	return file->vfs->ops->allocate(file, size);
}

static inline enum keel_err wal_vfs_size(struct wal_vfs_file *file, uint64_t *size)
{
	return file->vfs->ops->size(file, size);
}

static inline enum keel_err wal_vfs_sync_dir(struct wal_vfs *vfs, const char *dir)
{
	return vfs->ops->sync_dir(vfs, dir);
}

static inline enum keel_err wal_vfs_rename(struct wal_vfs *vfs, const char *from, const char *to)
{
	return vfs->ops->rename(vfs, from, to);
}

static inline enum keel_err wal_vfs_unlink(struct wal_vfs *vfs, const char *path)
{
	return vfs->ops->unlink(vfs, path);
}

static inline enum keel_err wal_vfs_list(struct wal_vfs *vfs, const char *dir, wal_vfs_list_fn fn,
					 void *arg)
{
	return vfs->ops->list(vfs, dir, fn, arg);
}

static inline enum keel_err wal_vfs_mkdir(struct wal_vfs *vfs, const char *path)
{
	return vfs->ops->mkdir(vfs, path);
}

/* ---- helpers on top of the table (vfs.c) ---- */

/* The calling thread's detail of its last vfs failure; "" when none. The
 * string lives in thread-local storage until the thread's next failure. */
const char *wal_vfs_last_error(void);

/* For implementations: records the detail of a failure on this thread. */
__attribute__((format(printf, 1, 2))) void wal_vfs_set_error(const char *fmt, ...);

/* Reads exactly `size` bytes at `offset`: KEEL_SHORT if the file ends first. */
enum keel_err wal_vfs_pread_exact(struct wal_vfs_file *file, void *buf, size_t size,
				  uint64_t offset);

/* Writes `size` zero bytes at `offset` (in chunks; preallocation by writing). */
enum keel_err wal_vfs_write_zeros(struct wal_vfs_file *file, uint64_t offset, uint64_t size);

/* Size of the errmsg buffers below (WAL_ERRMSG_SIZE). */
#define WAL_VFS_ERRMSG_SIZE 512

/* Writes `size` bytes to dir/tmp_name, datasyncs it, renames it over
 * dir/name and syncs the directory: afterwards dir/name holds the data
 * durably, and a crash at any point leaves either the old or the new file. */
enum keel_err wal_write_atomic(struct wal_vfs *vfs, const char *dir, const char *name,
			       const char *tmp_name, const void *data, size_t size,
			       char errmsg[WAL_VFS_ERRMSG_SIZE]);

/* Reads a whole file of at most max_size bytes into malloc'd memory (the
 * caller frees *data). KEEL_NOENT when missing, KEEL_TOOBIG when larger. */
enum keel_err wal_read_whole(struct wal_vfs *vfs, const char *path, uint64_t max_size,
			     uint8_t **data, size_t *size, char errmsg[WAL_VFS_ERRMSG_SIZE]);

/* Joins dir and name into out ("dir/name"); KEEL_TOOBIG if it does not fit. */
enum keel_err wal_vfs_join(char *out, size_t out_size, const char *dir, const char *name);

/* ---- POSIX ---- */

/* Fills `vfs` with the POSIX implementation (no state, nothing to close). */
void wal_vfs_posix_init(struct wal_vfs *vfs);

/* ---- fault-injecting, in-memory ---- */

/* Operations, for scripting failures and counting calls. */
enum wal_vfs_op {
	WAL_VFS_OP_OPEN,
	WAL_VFS_OP_WRITE,
	WAL_VFS_OP_READ,
	WAL_VFS_OP_SYNC,     /* datasync */
	WAL_VFS_OP_SYNC_DIR,
	WAL_VFS_OP_RENAME,
	WAL_VFS_OP_UNLINK,
	WAL_VFS_OP_TRUNCATE,
	WAL_VFS_OP_ALLOCATE,
	WAL_VFS_OP_MKDIR,
	WAL_VFS_OP_COUNT,
};

/* What a crash does with unsynced file data. */
enum wal_vfs_crash_mode {
	/* Only synced data survives. */
	WAL_VFS_CRASH_DROP_UNSYNCED,
	/* An ordered prefix of each file's pending operations survives (maybe
	 * all, maybe none); the last surviving write may be torn (a prefix of
	 * its bytes). */
	WAL_VFS_CRASH_TORN,
	/* Each pending write survives, vanishes, or survives only in some of
	 * its 512-byte sectors, independently (out-of-order writeback). */
	WAL_VFS_CRASH_SCRAMBLE,
};

struct wal_vfs_crash {
	enum wal_vfs_crash_mode mode;
	/* When set, each directory keeps only a random prefix of its pending
	 * (un-fsynced) create/rename/unlink operations; otherwise all survive. */
	bool lose_dir_ops;
};

struct wal_vfs_fault_config {
	/* Drives every random choice (crash outcomes, fault rates). Not owned;
	 * must outlive the vfs. */
	struct keel_rng *rng;
	/* Files may not grow past this (KEEL_NOSPACE); 0 means 1 GiB. */
	uint64_t max_file_size_bytes;
};

/* Counters, for tests and the simulator's reports. */
struct wal_vfs_fault_stats {
	uint64_t calls[WAL_VFS_OP_COUNT];
	uint64_t injected_failures;
	uint64_t read_bit_flips;
	uint64_t mutations; /* mutating calls (the unit of power_off_after) */
	uint64_t crashes;
};

/* Creates an empty file system (with the root directory "/" and ".").
 * KEEL_NOMEM when out of memory. */
enum keel_err wal_vfs_fault_init(struct wal_vfs *vfs, const struct wal_vfs_fault_config *config);

/* Frees everything. Handles still open must not be used afterwards. */
void wal_vfs_fault_close(struct wal_vfs *vfs);

/* The nth call of `op` from now on (1 = the next one) fails with `err`
 * (KEEL_IO or KEEL_NOSPACE). One script per operation; 0 cancels it. */
void wal_vfs_fault_fail_nth(struct wal_vfs *vfs, enum wal_vfs_op op, uint64_t nth,
			    enum keel_err err);

/* Each call of `op` fails with KEEL_IO with probability num/den (0 = never). */
void wal_vfs_fault_set_fail_rate(struct wal_vfs *vfs, enum wal_vfs_op op, uint64_t num,
				 uint64_t den);

/* Each read flips one random bit of the returned data with probability
 * num/den. The stored contents are not changed. */
void wal_vfs_fault_set_read_flip_rate(struct wal_vfs *vfs, uint64_t num, uint64_t den);

/* The nth read from now on (1 = the next one) flips one random bit of the
 * data it returns (stored bytes untouched). 0 cancels. */
void wal_vfs_fault_flip_nth_read(struct wal_vfs *vfs, uint64_t nth);

/* The same, aimed: the nth read flips the bits `mask` of the byte at
 * `file_offset` if it returns that byte (else it flips nothing). */
void wal_vfs_fault_flip_nth_read_at(struct wal_vfs *vfs, uint64_t nth, uint64_t file_offset,
				    uint8_t mask);

/* After `mutations` more mutating calls (write, datasync, truncate, allocate,
 * create, rename, unlink, sync_dir, mkdir) the power goes off: the call that
 * would be number mutations+1 and everything after it fails with KEEL_IO and
 * changes nothing. 0 cuts the power now. Cleared by wal_vfs_fault_crash(). */
void wal_vfs_fault_power_off_after(struct wal_vfs *vfs, uint64_t mutations);

bool wal_vfs_fault_powered_off(const struct wal_vfs *vfs);

/* Power loss and reboot now (see the model above). Clears power_off_after,
 * keeps scripted failures and rates. */
void wal_vfs_fault_crash(struct wal_vfs *vfs, const struct wal_vfs_crash *crash);

/* XORs `mask` into the stored byte at `offset` of `path`, in both its current
 * and its durable contents (bit rot). KEEL_NOENT / KEEL_INVAL on a bad path
 * or an offset past the end. */
enum keel_err wal_vfs_fault_corrupt(struct wal_vfs *vfs, const char *path, uint64_t offset,
				    uint8_t mask);

/* Size of the named file's durable contents after a crash that kept nothing
 * pending (KEEL_NOENT when the durable name table lacks it). */
enum keel_err wal_vfs_fault_durable_size(struct wal_vfs *vfs, const char *path, uint64_t *size);

void wal_vfs_fault_get_stats(const struct wal_vfs *vfs, struct wal_vfs_fault_stats *stats);

#endif
