/* vfs_posix.c — the real file system behind `struct wal_vfs` (see vfs.h).
 *
 * Thin wrappers over open/pwrite/pread/fdatasync/fallocate/rename/unlink/
 * opendir. Each maps errno to an `enum keel_err` and records the detail
 * (operation, path, strerror, errno) with wal_vfs_set_error(). Partial
 * writes and reads are retried; EINTR is retried. No state: safe from any
 * thread. */
#include "wal/vfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/assert.h"

struct posix_file {
	struct wal_vfs_file base;
	int fd;
	char path[WAL_VFS_PATH_MAX];
};

static struct posix_file *posix_file(struct wal_vfs_file *file)
{
	return KEEL_CONTAINER_OF(file, struct posix_file, base);
}

static enum keel_err map_errno(int e)
{
	switch (e) {
	case ENOSPC:
	case EDQUOT:
		return KEEL_NOSPACE;
	case ENOENT:
	case ENOTDIR:
		return KEEL_NOENT;
	case EEXIST:
		return KEEL_EXIST;
	case ENOMEM:
		return KEEL_NOMEM;
	case EINVAL:
		return KEEL_INVAL;
	case EOPNOTSUPP:
		return KEEL_UNSUPPORTED;
	case ENAMETOOLONG:
	case EFBIG:
		return KEEL_TOOBIG;
	default:
		return KEEL_IO;
	}
}

/* Records the detail and maps the current errno. */
static enum keel_err fail(const char *op, const char *path)
{
	int e = errno;
	wal_vfs_set_error("%s %s: %s (errno %d)", op, path, strerror(e), e);
	return map_errno(e);
}

static enum keel_err posix_open(struct wal_vfs *vfs, const char *path, unsigned flags,
				struct wal_vfs_file **out)
{
	if (strlen(path) >= WAL_VFS_PATH_MAX) {
		wal_vfs_set_error("open: path too long");
		return KEEL_TOOBIG;
	}
	int oflags = O_CLOEXEC;
	oflags |= (flags & WAL_VFS_READ_ONLY) ? O_RDONLY : O_RDWR;
	if (flags & WAL_VFS_CREATE) {
		oflags |= O_CREAT;
		if (flags & WAL_VFS_EXCLUSIVE) {
			oflags |= O_EXCL;
		}
	}
	struct posix_file *f = malloc(sizeof(*f));
	if (f == NULL) {
		wal_vfs_set_error("open %s: out of memory", path);
		return KEEL_NOMEM;
	}
	int fd;
	do {
		fd = open(path, oflags, 0644);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		enum keel_err err = fail("open", path);
		free(f);
		return err;
	}
	f->base.vfs = vfs;
	f->fd = fd;
	strcpy(f->path, path);
	*out = &f->base;
	return KEEL_OK;
}

static void posix_close(struct wal_vfs_file *file)
{
	struct posix_file *f = posix_file(file);
	/* A close error after fdatasync carries no durability information we
	 * have not already acted on; the descriptor is gone either way. */
	(void)close(f->fd);
	free(f);
}

static enum keel_err posix_pwrite(struct wal_vfs_file *file, const void *buf, size_t size,
				  uint64_t offset)
{
	struct posix_file *f = posix_file(file);
	const uint8_t *p = buf;
	while (size > 0) {
		ssize_t n = pwrite(f->fd, p, size, (off_t)offset);
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			return fail("pwrite", f->path);
		}
		KEEL_ASSERT(n > 0);
		p += n;
		size -= (size_t)n;
		offset += (uint64_t)n;
	}
	return KEEL_OK;
}

static enum keel_err posix_pread(struct wal_vfs_file *file, void *buf, size_t size,
				 uint64_t offset, size_t *nread)
{
	struct posix_file *f = posix_file(file);
	uint8_t *p = buf;
	size_t done = 0;
	while (done < size) {
		ssize_t n = pread(f->fd, p + done, size - done, (off_t)(offset + done));
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			return fail("pread", f->path);
		}
		if (n == 0) {
			break; /* end of file */
		}
		done += (size_t)n;
	}
	*nread = done;
	return KEEL_OK;
}

static enum keel_err posix_datasync(struct wal_vfs_file *file)
{
	struct posix_file *f = posix_file(file);
	/* No retry on EINTR or anything else: after a failed fdatasync the
	 * kernel may have dropped the dirty pages, so a second call that
	 * succeeds proves nothing. The caller enters its failed state. */
	if (fdatasync(f->fd) != 0) {
		return fail("fdatasync", f->path);
	}
	return KEEL_OK;
}

static enum keel_err posix_truncate(struct wal_vfs_file *file, uint64_t size)
{
	struct posix_file *f = posix_file(file);
	if (ftruncate(f->fd, (off_t)size) != 0) {
		return fail("ftruncate", f->path);
	}
	return KEEL_OK;
}

static enum keel_err posix_allocate(struct wal_vfs_file *file, uint64_t size)
{
	struct posix_file *f = posix_file(file);
	/* posix_fallocate returns the error instead of setting errno; it falls
	 * back to writing zeros where fallocate() is not supported. */
	int e = posix_fallocate(f->fd, 0, (off_t)size);
	if (e != 0) {
		errno = e;
		return fail("fallocate", f->path);
	}
	return KEEL_OK;
}

static enum keel_err posix_size(struct wal_vfs_file *file, uint64_t *size)
{
	struct posix_file *f = posix_file(file);
	struct stat st;
	if (fstat(f->fd, &st) != 0) {
		return fail("fstat", f->path);
	}
	*size = (uint64_t)st.st_size;
	return KEEL_OK;
}

static enum keel_err posix_sync_dir(struct wal_vfs *vfs, const char *dir)
{
	(void)vfs;
	int fd;
	do {
		fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		return fail("open directory", dir);
	}
	enum keel_err err = KEEL_OK;
	if (fsync(fd) != 0) {
		err = fail("fsync directory", dir);
	}
	(void)close(fd);
	return err;
}

static enum keel_err posix_rename(struct wal_vfs *vfs, const char *from, const char *to)
{
	(void)vfs;
	if (rename(from, to) != 0) {
		return fail("rename", from);
	}
	return KEEL_OK;
}

static enum keel_err posix_unlink(struct wal_vfs *vfs, const char *path)
{
	(void)vfs;
	if (unlink(path) != 0) {
		return fail("unlink", path);
	}
	return KEEL_OK;
}

static enum keel_err posix_list(struct wal_vfs *vfs, const char *dir, wal_vfs_list_fn fn,
				void *arg)
{
	(void)vfs;
	DIR *d = opendir(dir);
	if (d == NULL) {
		return fail("opendir", dir);
	}
	for (;;) {
		errno = 0;
		struct dirent *e = readdir(d);
		if (e == NULL) {
			break;
		}
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
			continue;
		}
		fn(arg, e->d_name);
	}
	enum keel_err err = KEEL_OK;
	if (errno != 0) {
		err = fail("readdir", dir);
	}
	(void)closedir(d);
	return err;
}

static enum keel_err posix_mkdir(struct wal_vfs *vfs, const char *path)
{
	(void)vfs;
	if (mkdir(path, 0755) != 0) {
		return fail("mkdir", path);
	}
	return KEEL_OK;
}

static const struct wal_vfs_ops posix_ops = {
	.open = posix_open,
	.close = posix_close,
	.pwrite = posix_pwrite,
	.pread = posix_pread,
	.datasync = posix_datasync,
	.truncate = posix_truncate,
	.allocate = posix_allocate,
	.size = posix_size,
	.sync_dir = posix_sync_dir,
	.rename = posix_rename,
	.unlink = posix_unlink,
	.list = posix_list,
	.mkdir = posix_mkdir,
};

void wal_vfs_posix_init(struct wal_vfs *vfs)
{
	vfs->ops = &posix_ops;
	vfs->impl = NULL;
}
