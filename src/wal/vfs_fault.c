/* vfs_fault.c — an in-memory file system that models durability and injects
 * faults (the model is described in vfs.h).
 *
 * State:
 *   inodes      every file's contents: `current` (what reads see), `durable`
 *               (what survives a crash) and `pending`, the writes and size
 *               changes since the last datasync, in order.
 *   names       the current name table (path -> inode) and the durable one;
 *               `dirops` holds the create/rename/unlink operations not yet
 *               made durable by sync_dir, in order.
 *   dirs        the set of directories (mkdir is durable at once).
 *   boot        incremented by every crash; a handle from an earlier boot is
 *               stale.
 *
 * An inode is freed when no open handle, no name (current or durable) and no
 * pending directory operation refers to it (fault_gc).
 *
 *   running --power_off_after(n), n mutations--> powered off --crash()--> running
 *      ^                                                                  |
 *      +---------------------------- crash() -----------------------------+
 */
#include "wal/vfs.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/rng.h"

#define SECTOR_SIZE 512

struct bytes {
	uint8_t *data;
	uint64_t size;
	uint64_t capacity;
};

enum pending_kind { PENDING_WRITE, PENDING_RESIZE };

struct pending {
	enum pending_kind kind;
	uint64_t offset; /* WRITE: where; RESIZE: the new size */
	uint64_t size;   /* WRITE: byte count */
	uint8_t *bytes;  /* WRITE: a copy of the data */
};

struct inode {
	struct bytes current;
	struct bytes durable;
	struct pending *pending;
	size_t pending_count;
	size_t pending_capacity;
	unsigned open_count;
	struct inode *next;
};

struct name {
	char *path;
	struct inode *inode;
};

/* Sorted by path, so that listing is deterministic. */
struct name_table {
	struct name *names;
	size_t count;
	size_t capacity;
};

enum dirop_kind { DIROP_LINK, DIROP_UNLINK, DIROP_RENAME };

struct dirop {
	enum dirop_kind kind;
	char *dir;
	char *path;
	char *to; /* RENAME only */
	struct inode *inode;
	bool decided; /* scratch for crash_dirops */
};

struct fault_vfs {
	pthread_mutex_t mutex;
	struct keel_rng *rng;
	uint64_t max_file_size;
	struct inode *inodes;
	struct name_table current;
	struct name_table durable;
	struct dirop *dirops;
	size_t dirop_count;
	size_t dirop_capacity;
	char **dirs;
	size_t dir_count;
	size_t dir_capacity;
	uint64_t boot;
	uint64_t fail_nth[WAL_VFS_OP_COUNT];
	enum keel_err fail_err[WAL_VFS_OP_COUNT];
	uint64_t fail_num[WAL_VFS_OP_COUNT];
	uint64_t fail_den[WAL_VFS_OP_COUNT];
	uint64_t flip_num;
	uint64_t flip_den;
	uint64_t flip_nth;
	bool flip_aimed;      /* the nth read flips flip_mask at flip_offset */
	uint64_t flip_offset; /* a file offset */
	uint8_t flip_mask;
	bool power_armed;
	uint64_t power_budget;
	bool powered_off;
	struct wal_vfs_fault_stats stats;
};

struct fault_file {
	struct wal_vfs_file base;
	struct inode *inode;
	uint64_t boot;
	bool read_only;
	char *path;
};

static const char *const op_names[WAL_VFS_OP_COUNT] = {
	"open", "write", "read", "datasync", "sync_dir", "rename", "unlink", "truncate",
	"allocate", "mkdir",
};

static struct fault_vfs *fault_of(struct wal_vfs *vfs)
{
	return vfs->impl;
}

static struct fault_file *fault_file(struct wal_vfs_file *file)
{
	return KEEL_CONTAINER_OF(file, struct fault_file, base);
}

/* ---- small containers ---- */

static bool grow_array(void **items, size_t *capacity, size_t need, size_t item_size)
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

static bool bytes_reserve(struct bytes *b, uint64_t size)
{
	if (size <= b->capacity) {
		return true;
	}
	uint64_t cap = b->capacity ? b->capacity : 4096;
	while (cap < size) {
		cap *= 2;
	}
	uint8_t *p = realloc(b->data, (size_t)cap);
	if (p == NULL) {
		return false;
	}
	b->data = p;
	b->capacity = cap;
	return true;
}

/* Sets the size; new bytes are zero. */
static bool bytes_resize(struct bytes *b, uint64_t size)
{
	if (!bytes_reserve(b, size)) {
		return false;
	}
	if (size > b->size) {
		memset(b->data + b->size, 0, (size_t)(size - b->size));
	}
	b->size = size;
	return true;
}

static bool bytes_write(struct bytes *b, uint64_t offset, const uint8_t *src, uint64_t size)
{
	if (offset + size > b->size && !bytes_resize(b, offset + size)) {
		return false;
	}
	if (size > 0) {
		memcpy(b->data + offset, src, (size_t)size);
	}
	return true;
}

static bool bytes_copy(struct bytes *dst, const struct bytes *src)
{
	if (!bytes_reserve(dst, src->size)) {
		return false;
	}
	if (src->size > 0) {
		memcpy(dst->data, src->data, (size_t)src->size);
	}
	dst->size = src->size;
	return true;
}

static char *dup_string(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = malloc(n);
	if (p != NULL) {
		memcpy(p, s, n);
	}
	return p;
}

/* Strips trailing slashes (the root stays "/"). */
static void normalize(char *out, const char *path)
{
	size_t n = strlen(path);
	KEEL_ASSERT(n < WAL_VFS_PATH_MAX);
	while (n > 1 && path[n - 1] == '/') {
		n--;
	}
	memcpy(out, path, n);
	out[n] = '\0';
}

/* The directory holding `path`: "a/b" -> "a", "/a" -> "/", "a" -> ".". */
static void parent_of(char *out, const char *path)
{
	const char *slash = strrchr(path, '/');
	if (slash == NULL) {
		strcpy(out, ".");
	} else if (slash == path) {
		strcpy(out, "/");
	} else {
		size_t n = (size_t)(slash - path);
		memcpy(out, path, n);
		out[n] = '\0';
	}
}

static const char *base_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

static size_t table_find(const struct name_table *t, const char *path, bool *found)
{
	size_t lo = 0;
	size_t hi = t->count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(t->names[mid].path, path);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	*found = false;
	return lo;
}

static struct inode *table_get(const struct name_table *t, const char *path)
{
	bool found;
	size_t i = table_find(t, path, &found);
	return found ? t->names[i].inode : NULL;
}

/* Points `path` at `inode`, replacing an existing name. */
static bool table_set(struct name_table *t, const char *path, struct inode *inode)
{
	bool found;
	size_t i = table_find(t, path, &found);
	if (found) {
		t->names[i].inode = inode;
		return true;
	}
	char *copy = dup_string(path);
	if (copy == NULL ||
	    !grow_array((void **)&t->names, &t->capacity, t->count + 1, sizeof(struct name))) {
		free(copy);
		return false;
	}
	memmove(&t->names[i + 1], &t->names[i], (t->count - i) * sizeof(struct name));
	t->names[i].path = copy;
	t->names[i].inode = inode;
	t->count++;
	return true;
}

static void table_remove(struct name_table *t, const char *path)
{
	bool found;
	size_t i = table_find(t, path, &found);
	if (!found) {
		return;
	}
	free(t->names[i].path);
	memmove(&t->names[i], &t->names[i + 1], (t->count - i - 1) * sizeof(struct name));
	t->count--;
}

static void table_clear(struct name_table *t)
{
	for (size_t i = 0; i < t->count; i++) {
		free(t->names[i].path);
	}
	t->count = 0;
}

static bool table_copy(struct name_table *dst, const struct name_table *src)
{
	table_clear(dst);
	for (size_t i = 0; i < src->count; i++) {
		if (!table_set(dst, src->names[i].path, src->names[i].inode)) {
			return false;
		}
	}
	return true;
}

static bool dir_exists(const struct fault_vfs *fv, const char *dir)
{
	for (size_t i = 0; i < fv->dir_count; i++) {
		if (strcmp(fv->dirs[i], dir) == 0) {
			return true;
		}
	}
	return false;
}

static bool dir_add(struct fault_vfs *fv, const char *dir)
{
	char *copy = dup_string(dir);
	if (copy == NULL ||
	    !grow_array((void **)&fv->dirs, &fv->dir_capacity, fv->dir_count + 1, sizeof(char *))) {
		free(copy);
		return false;
	}
	fv->dirs[fv->dir_count++] = copy;
	return true;
}

/* ---- inodes ---- */

static struct inode *inode_new(struct fault_vfs *fv)
{
	struct inode *ino = calloc(1, sizeof(*ino));
	if (ino == NULL) {
		return NULL;
	}
	ino->next = fv->inodes;
	fv->inodes = ino;
	return ino;
}

static void pending_clear(struct inode *ino)
{
	for (size_t i = 0; i < ino->pending_count; i++) {
		free(ino->pending[i].bytes);
	}
	ino->pending_count = 0;
}

static void inode_free(struct inode *ino)
{
	pending_clear(ino);
	free(ino->pending);
	free(ino->current.data);
	free(ino->durable.data);
	free(ino);
}

static bool inode_referenced(const struct fault_vfs *fv, const struct inode *ino)
{
	if (ino->open_count > 0) {
		return true;
	}
	for (size_t i = 0; i < fv->current.count; i++) {
		if (fv->current.names[i].inode == ino) {
			return true;
		}
	}
	for (size_t i = 0; i < fv->durable.count; i++) {
		if (fv->durable.names[i].inode == ino) {
			return true;
		}
	}
	for (size_t i = 0; i < fv->dirop_count; i++) {
		if (fv->dirops[i].inode == ino) {
			return true;
		}
	}
	return false;
}

static void fault_gc(struct fault_vfs *fv)
{
	struct inode **link = &fv->inodes;
	while (*link != NULL) {
		struct inode *ino = *link;
		if (inode_referenced(fv, ino)) {
			link = &ino->next;
		} else {
			*link = ino->next;
			inode_free(ino);
		}
	}
}

static bool pending_add(struct inode *ino, enum pending_kind kind, uint64_t offset,
			const void *data, uint64_t size)
{
	if (!grow_array((void **)&ino->pending, &ino->pending_capacity, ino->pending_count + 1,
			sizeof(struct pending))) {
		return false;
	}
	uint8_t *copy = NULL;
	if (kind == PENDING_WRITE && size > 0) {
		copy = malloc((size_t)size);
		if (copy == NULL) {
			return false;
		}
		memcpy(copy, data, (size_t)size);
	}
	ino->pending[ino->pending_count++] = (struct pending){
		.kind = kind, .offset = offset, .size = size, .bytes = copy};
	return true;
}

/* ---- fault decisions ---- */

/* Called at the start of every operation, under the mutex. Returns the
 * injected failure, if any, with its detail recorded. */
static enum keel_err fault_begin(struct fault_vfs *fv, enum wal_vfs_op op, bool mutating)
{
	fv->stats.calls[op]++;
	if (fv->powered_off) {
		wal_vfs_set_error("%s: the power is off (simulated crash)", op_names[op]);
		return KEEL_IO;
	}
	if (mutating) {
		if (fv->power_armed) {
			if (fv->power_budget == 0) {
				fv->powered_off = true;
				wal_vfs_set_error("%s: the power is off (simulated crash)", op_names[op]);
				return KEEL_IO;
			}
			fv->power_budget--;
		}
		fv->stats.mutations++;
	}
	if (fv->fail_nth[op] > 0 && --fv->fail_nth[op] == 0) {
		fv->stats.injected_failures++;
		wal_vfs_set_error("%s: injected %s (scripted, call #%llu)", op_names[op],
				  keel_errname(fv->fail_err[op]),
				  (unsigned long long)fv->stats.calls[op]);
		return fv->fail_err[op];
	}
	if (fv->fail_den[op] > 0 && keel_rng_chance(fv->rng, fv->fail_num[op], fv->fail_den[op])) {
		fv->stats.injected_failures++;
		wal_vfs_set_error("%s: injected EIO (random, call #%llu)", op_names[op],
				  (unsigned long long)fv->stats.calls[op]);
		return KEEL_IO;
	}
	return KEEL_OK;
}

/* A handle from before the last crash, or a write through a read-only one. */
static enum keel_err check_handle(struct fault_vfs *fv, struct fault_file *f, bool write)
{
	if (f->boot != fv->boot) {
		wal_vfs_set_error("%s: stale handle from before a crash", f->path);
		return KEEL_IO;
	}
	if (write && f->read_only) {
		wal_vfs_set_error("%s: write through a read-only handle", f->path);
		return KEEL_INVAL;
	}
	return KEEL_OK;
}

static enum keel_err no_memory(const char *what)
{
	wal_vfs_set_error("%s: out of memory", what);
	return KEEL_NOMEM;
}

/* ---- operations ---- */

static enum keel_err fault_open(struct wal_vfs *vfs, const char *path_in, unsigned flags,
				struct wal_vfs_file **out)
{
	struct fault_vfs *fv = fault_of(vfs);
	if (strlen(path_in) >= WAL_VFS_PATH_MAX) {
		wal_vfs_set_error("open: path too long");
		return KEEL_TOOBIG;
	}
	char path[WAL_VFS_PATH_MAX];
	char dir[WAL_VFS_PATH_MAX];
	normalize(path, path_in);
	parent_of(dir, path);
	pthread_mutex_lock(&fv->mutex);
	struct inode *ino = table_get(&fv->current, path);
	bool create = ino == NULL && (flags & WAL_VFS_CREATE);
	enum keel_err err = fault_begin(fv, WAL_VFS_OP_OPEN, create);
	if (err != KEEL_OK) {
		goto out;
	}
	if (ino != NULL && (flags & WAL_VFS_CREATE) && (flags & WAL_VFS_EXCLUSIVE)) {
		wal_vfs_set_error("open %s: file exists", path);
		err = KEEL_EXIST;
		goto out;
	}
	if (ino == NULL && !create) {
		wal_vfs_set_error("open %s: no such file", path);
		err = KEEL_NOENT;
		goto out;
	}
	if (create && !dir_exists(fv, dir)) {
		wal_vfs_set_error("open %s: no such directory %s", path, dir);
		err = KEEL_NOENT;
		goto out;
	}
	struct fault_file *f = calloc(1, sizeof(*f));
	char *path_copy = dup_string(path);
	if (f == NULL || path_copy == NULL) {
		free(f);
		free(path_copy);
		err = no_memory(path);
		goto out;
	}
	if (create) {
		struct dirop op = {.kind = DIROP_LINK};
		ino = inode_new(fv);
		op.dir = dup_string(dir);
		op.path = dup_string(path);
		op.inode = ino;
		if (ino == NULL || op.dir == NULL || op.path == NULL ||
		    !grow_array((void **)&fv->dirops, &fv->dirop_capacity, fv->dirop_count + 1,
				sizeof(struct dirop)) ||
		    !table_set(&fv->current, path, ino)) {
			free(op.dir);
			free(op.path);
			free(f);
			free(path_copy);
			fault_gc(fv);
			err = no_memory(path);
			goto out;
		}
		fv->dirops[fv->dirop_count++] = op;
	}
	ino->open_count++;
	f->base.vfs = vfs;
	f->inode = ino;
	f->boot = fv->boot;
	f->read_only = (flags & WAL_VFS_READ_ONLY) != 0;
	f->path = path_copy;
	*out = &f->base;
out:
	pthread_mutex_unlock(&fv->mutex);
	return err;
}

static void fault_close_file(struct wal_vfs_file *file)
{
	struct fault_file *f = fault_file(file);
	struct fault_vfs *fv = fault_of(file->vfs);
	pthread_mutex_lock(&fv->mutex);
	if (f->boot == fv->boot) {
		KEEL_ASSERT(f->inode->open_count > 0);
		f->inode->open_count--;
		fault_gc(fv);
	}
	pthread_mutex_unlock(&fv->mutex);
	free(f->path);
	free(f);
}

static enum keel_err fault_pwrite(struct wal_vfs_file *file, const void *buf, size_t size,
				  uint64_t offset)
{
	struct fault_file *f = fault_file(file);
	struct fault_vfs *fv = fault_of(file->vfs);
	pthread_mutex_lock(&fv->mutex);
	enum keel_err err = fault_begin(fv, WAL_VFS_OP_WRITE, true);
	if (err == KEEL_OK) {
		err = check_handle(fv, f, true);
	}
	if (err == KEEL_OK && (offset > fv->max_file_size || size > fv->max_file_size - offset)) {
		wal_vfs_set_error("pwrite %s: file would exceed %llu bytes", f->path,
				  (unsigned long long)fv->max_file_size);
		err = KEEL_NOSPACE;
	}
	if (err == KEEL_OK && !pending_add(f->inode, PENDING_WRITE, offset, buf, size)) {
		err = no_memory(f->path);
	} else if (err == KEEL_OK && !bytes_write(&f->inode->current, offset, buf, size)) {
		/* A failed write changes nothing (vfs.h): forget its pending copy. */
		struct pending *last = &f->inode->pending[--f->inode->pending_count];
		free(last->bytes);
		err = no_memory(f->path);
	}
	pthread_mutex_unlock(&fv->mutex);
	return err;
}

static void maybe_flip(struct fault_vfs *fv, uint8_t *buf, size_t size, uint64_t offset)
{
	bool scripted = fv->flip_nth > 0 && --fv->flip_nth == 0;
	bool random = fv->flip_den > 0 && keel_rng_chance(fv->rng, fv->flip_num, fv->flip_den);
	if (scripted && fv->flip_aimed) {
		fv->flip_aimed = false;
		if (fv->flip_offset >= offset && fv->flip_offset - offset < size) {
			buf[fv->flip_offset - offset] ^= fv->flip_mask;
			fv->stats.read_bit_flips++;
		}
		scripted = false;
	}
	if (size == 0 || !(scripted || random)) {
		return;
	}
	uint64_t bit = keel_rng_below(fv->rng, (uint64_t)size * 8);
	buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	fv->stats.read_bit_flips++;
}

static enum keel_err fault_pread(struct wal_vfs_file *file, void *buf, size_t size,
				 uint64_t offset, size_t *nread)
{
	struct fault_file *f = fault_file(file);
	struct fault_vfs *fv = fault_of(file->vfs);
	pthread_mutex_lock(&fv->mutex);
	enum keel_err err = fault_begin(fv, WAL_VFS_OP_READ, false);
	if (err == KEEL_OK) {
		err = check_handle(fv, f, false);
	}
	if (err == KEEL_OK) {
		const struct bytes *b = &f->inode->current;
		size_t n = 0;
		if (offset < b->size) {
			n = (size_t)KEEL_MIN((uint64_t)size, b->size - offset);
			memcpy(buf, b->data + offset, n);
		}
		maybe_flip(fv, buf, n, offset);
		*nread = n;
	}
	pthread_mutex_unlock(&fv->mutex);
	return err;
}

static enum keel_err fault_datasync(struct wal_vfs_file *file)
{
	struct fault_file *f = fault_file(file);
	struct fault_vfs *fv = fault_of(file->vfs);
	pthread_mutex_lock(&fv->mutex);
	enum keel_err err = fault_begin(fv, WAL_VFS_OP_SYNC, true);
	if (err == KEEL_OK) {
		err = check_handle(fv, f, false);
	}
	if (err == KEEL_OK) {
		/* current == durable + pending, so replaying the pending
		 * operations makes durable equal current, in time proportional
		 * to what was written since the last sync. */
		struct inode *ino = f->inode;
		bool ok = true;
		for (size_t i = 0; ok && i < ino->pending_count; i++) {
			const struct pending *p = &ino->pending[i];
			ok = p->kind == PENDING_WRITE
				     ? bytes_write(&ino->durable, p->offset, p->bytes, p->size)
				     : bytes_resize(&ino->durable, p->offset);
		}
		if (!ok) {
			err = no_memory(f->path);
		} else {
			pending_clear(ino);
			KEEL_DEBUG_ASSERT(ino->durable.size == ino->current.size);
			KEEL_DEBUG_ASSERT(ino->current.size == 0 ||
					  memcmp(ino->durable.data, ino->current.data,
						 (size_t)ino->current.size) == 0);
		}
	}
	pthread_mutex_unlock(&fv->mutex);
	return err;
}

/* truncate and allocate: both are size changes the crash may keep or lose. */
static enum keel_err fault_resize(struct wal_vfs_file *file, uint64_t size, enum wal_vfs_op op)
{
	struct fault_file *f = fault_file(file);
	struct fault_vfs *fv = fault_of(file->vfs);
	pthread_mutex_lock(&fv->mutex);
	enum keel_err err = fault_begin(fv, op, true);
	if (err == KEEL_OK) {
		err = check_handle(fv, f, true);
	}
	if (err == KEEL_OK && size > fv->max_file_size) {
		wal_vfs_set_error("%s %s: file would exceed %llu bytes", op_names[op], f->path,
				  (unsigned long long)fv->max_file_size);
		err = KEEL_NOSPACE;
	}
	if (err == KEEL_OK && op == WAL_VFS_OP_ALLOCATE && size <= f->inode->current.size) {
		goto out; /* already big enough */
	}
	if (err == KEEL_OK && (!pending_add(f->inode, PENDING_RESIZE, size, NULL, 0) ||
			       !bytes_resize(&f->inode->current, size))) {
		err = no_memory(f->path);
	}
out:
	pthread_mutex_unlock(&fv->mutex);
	return err;
}

static enum keel_err fault_truncate(struct wal_vfs_file *file, uint64_t size)
{
	return fault_resize(file, size, WAL_VFS_OP_TRUNCATE);
}

static enum keel_err fault_allocate(struct wal_vfs_file *file, uint64_t size)
{
	return fault_resize(file, size, WAL_VFS_OP_ALLOCATE);
}

static enum keel_err fault_size(struct wal_vfs_file *file, uint64_t *size)
{
	struct fault_file *f = fault_file(file);
	struct fault_vfs *fv = fault_of(file->vfs);
	pthread_mutex_lock(&fv->mutex);
	enum keel_err err = KEEL_OK;
	if (fv->powered_off) {
		wal_vfs_set_error("size: the power is off (simulated crash)");
		err = KEEL_IO;
	}
	if (err == KEEL_OK) {
		err = check_handle(fv, f, false);
	}
	if (err == KEEL_OK) {
		*size = f->inode->current.size;
	}
	pthread_mutex_unlock(&fv->mutex);
	return err;
}

/* Applies one directory operation to a name table. */
static bool dirop_apply(struct name_table *t, const struct dirop *op)
{
	switch (op->kind) {
	case DIROP_LINK:
		return table_set(t, op->path, op->inode);
	case DIROP_UNLINK:
		table_remove(t, op->path);
		return true;
	case DIROP_RENAME:
		table_remove(t, op->path);
		return table_set(t, op->to, op->inode);
	}
	KEEL_UNREACHABLE();
}

static void dirop_free(struct dirop *op)
{
	free(op->dir);
	free(op->path);
	free(op->to);
}

static enum keel_err fault_sync_dir(struct wal_vfs *vfs, const char *dir_in)
{
	struct fault_vfs *fv = fault_of(vfs);
	char dir[WAL_VFS_PATH_MAX];
	if (strlen(dir_in) >= WAL_VFS_PATH_MAX) {
		return KEEL_TOOBIG;
	}
	normalize(dir, dir_in);
	pthread_mutex_lock(&fv->mutex);
	enum keel_err err = fault_begin(fv, WAL_VFS_OP_SYNC_DIR, true);
	if (err == KEEL_OK && !dir_exists(fv, dir)) {
		wal_vfs_set_error("sync_dir %s: no such directory", dir);
		err = KEEL_NOENT;
	}
	if (err == KEEL_OK) {
		size_t kept = 0;
		for (size_t i = 0; i < fv->dirop_count; i++) {
			struct dirop *op = &fv->dirops[i];
			if (strcmp(op->dir, dir) != 0) {
				fv->dirops[kept++] = *op;
				continue;
			}
			if (!dirop_apply(&fv->durable, op)) {
				err = no_memory(dir);
			}
			dirop_free(op);
		}
		fv->dirop_count = kept;
		fault_gc(fv);
	}
	pthread_mutex_unlock(&fv->mutex);
	return err;
}

static enum keel_err fault_rename(struct wal_vfs *vfs, const char *from_in, const char *to_in)
{
	struct fault_vfs *fv = fault_of(vfs);
	if (strlen(from_in) >= WAL_VFS_PATH_MAX || strlen(to_in) >= WAL_VFS_PATH_MAX) {
		return KEEL_TOOBIG;
	}
	char from[WAL_VFS_PATH_MAX];
	char to[WAL_VFS_PATH_MAX];
	char dir[WAL_VFS_PATH_MAX];
	char to_dir[WAL_VFS_PATH_MAX];
	normalize(from, from_in);
	normalize(to, to_in);
	parent_of(dir, from);
	parent_of(to_dir, to);
	pthread_mutex_lock(&fv->mutex);
	enum keel_err err = fault_begin(fv, WAL_VFS_OP_RENAME, true);
	struct inode *ino = NULL;
	if (err == KEEL_OK && strcmp(dir, to_dir) != 0) {
		wal_vfs_set_error("rename %s -> %s: across directories", from, to);
		err = KEEL_INVAL;
	}
	if (err == KEEL_OK && (ino = table_get(&fv->current, from)) == NULL) {
		wal_vfs_set_error("rename %s: no such file", from);
		err = KEEL_NOENT;
	}
	if (err == KEEL_OK && strcmp(from, to) != 0) {
		struct dirop op = {.kind = DIROP_RENAME, .inode = ino};
		op.dir = dup_string(dir);
		op.path = dup_string(from);
		op.to = dup_string(to);
		if (op.dir == NULL || op.path == NULL || op.to == NULL ||
		    !grow_array((void **)&fv->dirops, &fv->dirop_capacity, fv->dirop_count + 1,
				sizeof(struct dirop)) ||
		    !dirop_apply(&fv->current, &op)) {
			dirop_free(&op);
			err = no_memory(from);
		} else {
			fv->dirops[fv->dirop_count++] = op;
		}
		fault_gc(fv);
	}
	pthread_mutex_unlock(&fv->mutex);
	return err;
}

static enum keel_err fault_unlink(struct wal_vfs *vfs, const char *path_in)
{
	struct fault_vfs *fv = fault_of(vfs);
	if (strlen(path_in) >= WAL_VFS_PATH_MAX) {
		return KEEL_TOOBIG;
	}
	char path[WAL_VFS_PATH_MAX];
	char dir[WAL_VFS_PATH_MAX];
	normalize(path, path_in);
	parent_of(dir, path);
	pthread_mutex_lock(&fv->mutex);
	enum keel_err err = fault_begin(fv, WAL_VFS_OP_UNLINK, true);
	struct inode *ino = NULL;
	if (err == KEEL_OK && (ino = table_get(&fv->current, path)) == NULL) {
		wal_vfs_set_error("unlink %s: no such file", path);
		err = KEEL_NOENT;
	}
	if (err == KEEL_OK) {
		struct dirop op = {.kind = DIROP_UNLINK, .inode = ino};
		op.dir = dup_string(dir);
		op.path = dup_string(path);
		if (op.dir == NULL || op.path == NULL ||
		    !grow_array((void **)&fv->dirops, &fv->dirop_capacity, fv->dirop_count + 1,
				sizeof(struct dirop))) {
			dirop_free(&op);
			err = no_memory(path);
		} else {
			table_remove(&fv->current, path);
			fv->dirops[fv->dirop_count++] = op;
		}
		fault_gc(fv);
	}
	pthread_mutex_unlock(&fv->mutex);
	return err;
}

struct name_list {
	char **names;
	size_t count;
	size_t capacity;
};

static bool name_list_add(struct name_list *l, const char *name)
{
	char *copy = dup_string(name);
	if (copy == NULL ||
	    !grow_array((void **)&l->names, &l->capacity, l->count + 1, sizeof(char *))) {
		free(copy);
		return false;
	}
	l->names[l->count++] = copy;
	return true;
}

static enum keel_err fault_list(struct wal_vfs *vfs, const char *dir_in, wal_vfs_list_fn fn,
				void *arg)
{
	struct fault_vfs *fv = fault_of(vfs);
	if (strlen(dir_in) >= WAL_VFS_PATH_MAX) {
		return KEEL_TOOBIG;
	}
	char dir[WAL_VFS_PATH_MAX];
	char parent[WAL_VFS_PATH_MAX];
	normalize(dir, dir_in);
	struct name_list list = {0};
	pthread_mutex_lock(&fv->mutex);
	enum keel_err err = fault_begin(fv, WAL_VFS_OP_READ, false);
	if (err == KEEL_OK && !dir_exists(fv, dir)) {
		wal_vfs_set_error("list %s: no such directory", dir);
		err = KEEL_NOENT;
	}
	for (size_t i = 0; err == KEEL_OK && i < fv->current.count; i++) {
		parent_of(parent, fv->current.names[i].path);
		if (strcmp(parent, dir) == 0 && !name_list_add(&list, base_of(fv->current.names[i].path))) {
			err = no_memory(dir);
		}
	}
	for (size_t i = 0; err == KEEL_OK && i < fv->dir_count; i++) {
		if (strcmp(fv->dirs[i], dir) == 0 || strcmp(fv->dirs[i], "/") == 0) {
			continue;
		}
		parent_of(parent, fv->dirs[i]);
		if (strcmp(parent, dir) == 0 && !name_list_add(&list, base_of(fv->dirs[i]))) {
			err = no_memory(dir);
		}
	}
	pthread_mutex_unlock(&fv->mutex);
	/* Called without the lock: fn may call back into the vfs. */
	for (size_t i = 0; i < list.count; i++) {
		if (err == KEEL_OK) {
			fn(arg, list.names[i]);
		}
		free(list.names[i]);
	}
	free(list.names);
	return err;
}

static enum keel_err fault_mkdir(struct wal_vfs *vfs, const char *path_in)
{
	struct fault_vfs *fv = fault_of(vfs);
	if (strlen(path_in) >= WAL_VFS_PATH_MAX) {
		return KEEL_TOOBIG;
	}
	char path[WAL_VFS_PATH_MAX];
	char parent[WAL_VFS_PATH_MAX];
	normalize(path, path_in);
	parent_of(parent, path);
	pthread_mutex_lock(&fv->mutex);
	enum keel_err err = fault_begin(fv, WAL_VFS_OP_MKDIR, true);
	if (err == KEEL_OK && (dir_exists(fv, path) || table_get(&fv->current, path) != NULL)) {
		wal_vfs_set_error("mkdir %s: exists", path);
		err = KEEL_EXIST;
	}
	if (err == KEEL_OK && !dir_exists(fv, parent)) {
		wal_vfs_set_error("mkdir %s: no such directory %s", path, parent);
		err = KEEL_NOENT;
	}
	if (err == KEEL_OK && !dir_add(fv, path)) {
		err = no_memory(path);
	}
	pthread_mutex_unlock(&fv->mutex);
	return err;
}

static const struct wal_vfs_ops fault_ops = {
	.open = fault_open,
	.close = fault_close_file,
	.pwrite = fault_pwrite,
	.pread = fault_pread,
	.datasync = fault_datasync,
	.truncate = fault_truncate,
	.allocate = fault_allocate,
	.size = fault_size,
	.sync_dir = fault_sync_dir,
	.rename = fault_rename,
	.unlink = fault_unlink,
	.list = fault_list,
	.mkdir = fault_mkdir,
};

/* ---- setup and control ---- */

enum keel_err wal_vfs_fault_init(struct wal_vfs *vfs, const struct wal_vfs_fault_config *config)
{
	KEEL_ASSERT(config->rng != NULL);
	struct fault_vfs *fv = calloc(1, sizeof(*fv));
	if (fv == NULL) {
		return KEEL_NOMEM;
	}
	pthread_mutex_init(&fv->mutex, NULL);
	fv->rng = config->rng;
	fv->max_file_size = config->max_file_size_bytes ? config->max_file_size_bytes : 1ull << 30;
	if (!dir_add(fv, "/") || !dir_add(fv, ".")) {
		vfs->impl = fv;
		wal_vfs_fault_close(vfs);
		return KEEL_NOMEM;
	}
	vfs->ops = &fault_ops;
	vfs->impl = fv;
	return KEEL_OK;
}

void wal_vfs_fault_close(struct wal_vfs *vfs)
{
	struct fault_vfs *fv = fault_of(vfs);
	if (fv == NULL) {
		return;
	}
	while (fv->inodes != NULL) {
		struct inode *ino = fv->inodes;
		fv->inodes = ino->next;
		inode_free(ino);
	}
	table_clear(&fv->current);
	table_clear(&fv->durable);
	free(fv->current.names);
	free(fv->durable.names);
	for (size_t i = 0; i < fv->dirop_count; i++) {
		dirop_free(&fv->dirops[i]);
	}
	free(fv->dirops);
	for (size_t i = 0; i < fv->dir_count; i++) {
		free(fv->dirs[i]);
	}
	free(fv->dirs);
	pthread_mutex_destroy(&fv->mutex);
	free(fv);
	vfs->impl = NULL;
}

void wal_vfs_fault_fail_nth(struct wal_vfs *vfs, enum wal_vfs_op op, uint64_t nth,
			    enum keel_err err)
{
	struct fault_vfs *fv = fault_of(vfs);
	KEEL_ASSERT(op < WAL_VFS_OP_COUNT);
	KEEL_ASSERT(nth == 0 || err != KEEL_OK);
	pthread_mutex_lock(&fv->mutex);
	fv->fail_nth[op] = nth;
	fv->fail_err[op] = err;
	pthread_mutex_unlock(&fv->mutex);
}

void wal_vfs_fault_set_fail_rate(struct wal_vfs *vfs, enum wal_vfs_op op, uint64_t num,
				 uint64_t den)
{
	struct fault_vfs *fv = fault_of(vfs);
	KEEL_ASSERT(op < WAL_VFS_OP_COUNT);
	KEEL_ASSERT(num <= den);
	pthread_mutex_lock(&fv->mutex);
	fv->fail_num[op] = num;
	fv->fail_den[op] = num == 0 ? 0 : den;
	pthread_mutex_unlock(&fv->mutex);
}

void wal_vfs_fault_set_read_flip_rate(struct wal_vfs *vfs, uint64_t num, uint64_t den)
{
	struct fault_vfs *fv = fault_of(vfs);
	KEEL_ASSERT(num <= den);
	pthread_mutex_lock(&fv->mutex);
	fv->flip_num = num;
	fv->flip_den = num == 0 ? 0 : den;
	pthread_mutex_unlock(&fv->mutex);
}

void wal_vfs_fault_flip_nth_read(struct wal_vfs *vfs, uint64_t nth)
{
	struct fault_vfs *fv = fault_of(vfs);
	pthread_mutex_lock(&fv->mutex);
	fv->flip_nth = nth;
	fv->flip_aimed = false;
	pthread_mutex_unlock(&fv->mutex);
}

void wal_vfs_fault_flip_nth_read_at(struct wal_vfs *vfs, uint64_t nth, uint64_t file_offset,
				    uint8_t mask)
{
	struct fault_vfs *fv = fault_of(vfs);
	pthread_mutex_lock(&fv->mutex);
	fv->flip_nth = nth;
	fv->flip_aimed = nth > 0;
	fv->flip_offset = file_offset;
	fv->flip_mask = mask;
	pthread_mutex_unlock(&fv->mutex);
}

void wal_vfs_fault_power_off_after(struct wal_vfs *vfs, uint64_t mutations)
{
	struct fault_vfs *fv = fault_of(vfs);
	pthread_mutex_lock(&fv->mutex);
	fv->power_armed = true;
	fv->power_budget = mutations;
	pthread_mutex_unlock(&fv->mutex);
}

bool wal_vfs_fault_powered_off(const struct wal_vfs *vfs)
{
	struct fault_vfs *fv = vfs->impl;
	pthread_mutex_lock(&fv->mutex);
	bool off = fv->powered_off;
	pthread_mutex_unlock(&fv->mutex);
	return off;
}

/* Applies the bytes of one pending write to `b`, maybe only some sectors. */
static bool crash_apply_write(struct fault_vfs *fv, struct bytes *b, const struct pending *p,
			      bool sector_wise)
{
	if (!sector_wise) {
		return bytes_write(b, p->offset, p->bytes, p->size);
	}
	uint64_t at = p->offset;
	uint64_t end = p->offset + p->size;
	while (at < end) {
		uint64_t sector_end = (at / SECTOR_SIZE + 1) * SECTOR_SIZE;
		uint64_t n = KEEL_MIN(sector_end, end) - at;
		if (keel_rng_chance(fv->rng, 1, 2) &&
		    !bytes_write(b, at, p->bytes + (at - p->offset), n)) {
			return false;
		}
		at += n;
	}
	return true;
}

/* The durable contents after a crash: what was synced, plus what the mode
 * lets through of the pending operations. */
static void crash_inode(struct fault_vfs *fv, struct inode *ino, enum wal_vfs_crash_mode mode)
{
	struct bytes *b = &ino->durable;
	size_t keep = 0;
	if (mode == WAL_VFS_CRASH_TORN) {
		keep = (size_t)keel_rng_below(fv->rng, ino->pending_count + 1);
	}
	bool ok = true;
	for (size_t i = 0; ok && i < ino->pending_count; i++) {
		const struct pending *p = &ino->pending[i];
		if (mode == WAL_VFS_CRASH_DROP_UNSYNCED) {
			break;
		}
		if (mode == WAL_VFS_CRASH_TORN) {
			if (i > keep) {
				break;
			}
			if (i == keep) { /* the first lost one may be torn */
				if (p->kind == PENDING_WRITE && p->size > 1 &&
				    keel_rng_chance(fv->rng, 1, 2)) {
					struct pending torn = *p;
					torn.size = keel_rng_between(fv->rng, 1, p->size - 1);
					ok = crash_apply_write(fv, b, &torn, false);
				}
				break;
			}
			ok = p->kind == PENDING_WRITE ? crash_apply_write(fv, b, p, false)
						      : bytes_resize(b, p->offset);
			continue;
		}
		/* SCRAMBLE: each one kept, lost or sector-wise, independently. */
		uint64_t pick = keel_rng_below(fv->rng, 3);
		if (pick == 0) {
			continue;
		}
		if (p->kind == PENDING_RESIZE) {
			ok = bytes_resize(b, p->offset);
		} else {
			ok = crash_apply_write(fv, b, p, pick == 2);
		}
	}
	KEEL_ASSERT(ok); /* out of memory while simulating a crash */
	bool copied = bytes_copy(&ino->current, b);
	KEEL_ASSERT(copied);
	pending_clear(ino);
	ino->open_count = 0;
}

/* Makes the surviving directory operations durable: all, or a random prefix
 * per directory (a journal commits one directory's operations in order). */
static void crash_dirops(struct fault_vfs *fv, bool lose_dir_ops)
{
	for (size_t i = 0; i < fv->dirop_count; i++) {
		if (fv->dirops[i].decided) {
			continue;
		}
		const char *dir = fv->dirops[i].dir;
		size_t total = 0;
		for (size_t j = i; j < fv->dirop_count; j++) {
			total += strcmp(fv->dirops[j].dir, dir) == 0;
		}
		size_t keep = lose_dir_ops ? (size_t)keel_rng_below(fv->rng, total + 1) : total;
		for (size_t j = i; j < fv->dirop_count; j++) {
			struct dirop *op = &fv->dirops[j];
			if (strcmp(op->dir, dir) != 0) {
				continue;
			}
			if (keep > 0) {
				bool applied = dirop_apply(&fv->durable, op);
				KEEL_ASSERT(applied); /* out of memory while simulating a crash */
				keep--;
			}
			op->decided = true;
		}
	}
	for (size_t i = 0; i < fv->dirop_count; i++) {
		dirop_free(&fv->dirops[i]);
	}
	fv->dirop_count = 0;
}

void wal_vfs_fault_crash(struct wal_vfs *vfs, const struct wal_vfs_crash *crash)
{
	struct fault_vfs *fv = fault_of(vfs);
	pthread_mutex_lock(&fv->mutex);
	for (struct inode *ino = fv->inodes; ino != NULL; ino = ino->next) {
		crash_inode(fv, ino, crash->mode);
	}
	crash_dirops(fv, crash->lose_dir_ops);
	bool copied = table_copy(&fv->current, &fv->durable);
	KEEL_ASSERT(copied);
	fv->boot++;
	fv->powered_off = false;
	fv->power_armed = false;
	fv->stats.crashes++;
	fault_gc(fv);
	pthread_mutex_unlock(&fv->mutex);
}

enum keel_err wal_vfs_fault_corrupt(struct wal_vfs *vfs, const char *path_in, uint64_t offset,
				    uint8_t mask)
{
	struct fault_vfs *fv = fault_of(vfs);
	char path[WAL_VFS_PATH_MAX];
	if (strlen(path_in) >= WAL_VFS_PATH_MAX) {
		return KEEL_TOOBIG;
	}
	normalize(path, path_in);
	pthread_mutex_lock(&fv->mutex);
	enum keel_err err = KEEL_OK;
	struct inode *ino = table_get(&fv->current, path);
	if (ino == NULL) {
		err = KEEL_NOENT;
	} else if (offset >= ino->current.size) {
		err = KEEL_INVAL;
	} else {
		ino->current.data[offset] ^= mask;
		if (offset < ino->durable.size) {
			ino->durable.data[offset] ^= mask;
		}
		/* Keep current == durable + pending: the pending writes that
		 * cover the byte carry the flip too. */
		for (size_t i = 0; i < ino->pending_count; i++) {
			struct pending *p = &ino->pending[i];
			if (p->kind == PENDING_WRITE && offset >= p->offset &&
			    offset - p->offset < p->size) {
				p->bytes[offset - p->offset] ^= mask;
			}
		}
	}
	pthread_mutex_unlock(&fv->mutex);
	return err;
}

enum keel_err wal_vfs_fault_durable_size(struct wal_vfs *vfs, const char *path_in, uint64_t *size)
{
	struct fault_vfs *fv = fault_of(vfs);
	char path[WAL_VFS_PATH_MAX];
	if (strlen(path_in) >= WAL_VFS_PATH_MAX) {
		return KEEL_TOOBIG;
	}
	normalize(path, path_in);
	pthread_mutex_lock(&fv->mutex);
	struct inode *ino = table_get(&fv->durable, path);
	if (ino != NULL) {
		*size = ino->durable.size;
	}
	pthread_mutex_unlock(&fv->mutex);
	return ino != NULL ? KEEL_OK : KEEL_NOENT;
}

void wal_vfs_fault_get_stats(const struct wal_vfs *vfs, struct wal_vfs_fault_stats *stats)
{
	struct fault_vfs *fv = vfs->impl;
	pthread_mutex_lock(&fv->mutex);
	*stats = fv->stats;
	pthread_mutex_unlock(&fv->mutex);
}
