/* snapshot.c — writing, reading, listing and pruning snapshot files (see
 * snapshot.h for the contract, format.h for the layout). */
#include "wal/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/crc32c.h"
#include "os/log.h"
#include "wal/internal.h"

#define READ_CHUNK (256u * 1024)

/* ---- writing ---- */

enum keel_err wal_snapshot_begin(struct wal_snapshot_writer *w, const struct wal_config *config,
				 uint64_t index, uint64_t term, const void *membership,
				 uint32_t membership_size)
{
	memset(w, 0, sizeof(*w));
	w->config = *config;
	if (index == 0) {
		return wal_fail(w->errmsg, KEEL_INVAL, "wal: a snapshot needs an index above 0");
	}
	if (membership_size > config->max_membership_bytes) {
		return wal_fail(w->errmsg, KEEL_TOOBIG,
				"wal: snapshot membership of %u bytes is over the limit of %u",
				membership_size, config->max_membership_bytes);
	}
	wal_snapshot_name(w->tmp_name, index, term, true);
	wal_snapshot_name(w->name, index, term, false);
	w->header_size = WAL_SNAPSHOT_FIXED_SIZE + (size_t)membership_size;
	w->header_bytes = malloc(w->header_size);
	if (w->header_bytes == NULL) {
		return wal_fail(w->errmsg, KEEL_NOMEM, "wal: no memory for a snapshot header");
	}
	w->header = (struct wal_snapshot_header){
		.version = WAL_FORMAT_VERSION,
		.index = index,
		.term = term,
		.membership_size = membership_size,
		.membership = membership,
	};
	/* The payload size and checksum are patched in at commit. */
	wal_snapshot_header_encode(w->header_bytes, &w->header);
	w->header.membership = w->header_bytes + WAL_SNAPSHOT_FIXED_SIZE;

	char path[WAL_VFS_PATH_MAX];
	wal_path(path, config->dir, w->tmp_name);
	enum keel_err err = wal_vfs_open(config->vfs, path, WAL_VFS_CREATE, &w->file);
	if (err != KEEL_OK) {
		err = wal_fail_io(w->errmsg, err, "wal: create %s", path);
		goto fail;
	}
	err = wal_vfs_truncate(w->file, 0);
	if (err == KEEL_OK) {
		err = wal_vfs_pwrite(w->file, w->header_bytes, w->header_size, 0);
	}
	if (err != KEEL_OK) {
		err = wal_fail_io(w->errmsg, err, "wal: write %s", path);
		wal_vfs_close(w->file);
		(void)wal_vfs_unlink(config->vfs, path);
		goto fail;
	}
	return KEEL_OK;
fail:
	free(w->header_bytes);
	w->header_bytes = NULL;
	w->file = NULL;
	return err;
}

enum keel_err wal_snapshot_append(struct wal_snapshot_writer *w, const void *data, size_t size)
{
	KEEL_ASSERT(w->file != NULL);
	if (w->failed) {
		return KEEL_FAILED;
	}
	if (size > w->config.max_snapshot_bytes - w->written) {
		w->failed = true;
		return wal_fail(w->errmsg, KEEL_TOOBIG,
				"wal: snapshot payload over the limit of %llu bytes",
				(unsigned long long)w->config.max_snapshot_bytes);
	}
	enum keel_err err = wal_vfs_pwrite(w->file, data, size, w->header_size + w->written);
	if (err != KEEL_OK) {
		w->failed = true;
		return wal_fail_io(w->errmsg, err, "wal: write %s", w->tmp_name);
	}
	w->crc = keel_crc32c(w->crc, data, size);
	w->written += size;
	return KEEL_OK;
}

static void writer_release(struct wal_snapshot_writer *w)
{
	if (w->file != NULL) {
		wal_vfs_close(w->file);
		w->file = NULL;
	}
	free(w->header_bytes);
	w->header_bytes = NULL;
}

void wal_snapshot_abort(struct wal_snapshot_writer *w)
{
	if (w->file == NULL) {
		return;
	}
	writer_release(w);
	char path[WAL_VFS_PATH_MAX];
	wal_path(path, w->config.dir, w->tmp_name);
	(void)wal_vfs_unlink(w->config.vfs, path);
}

enum keel_err wal_snapshot_commit(struct wal_snapshot_writer *w)
{
	KEEL_ASSERT(w->file != NULL);
	struct wal_vfs *vfs = w->config.vfs;
	const char *dir = w->config.dir;
	if (w->failed) {
		wal_snapshot_abort(w);
		return KEEL_FAILED;
	}
	w->header.payload_size = w->written;
	w->header.payload_crc = w->crc;
	wal_snapshot_header_encode(w->header_bytes, &w->header);
	enum keel_err err = wal_vfs_pwrite(w->file, w->header_bytes, w->header_size, 0);
	if (err == KEEL_OK) {
		err = wal_vfs_datasync(w->file);
	}
	if (err != KEEL_OK) {
		err = wal_fail_io(w->errmsg, err, "wal: write %s", w->tmp_name);
		wal_snapshot_abort(w);
		return err;
	}
	writer_release(w);
	char tmp_path[WAL_VFS_PATH_MAX];
	char path[WAL_VFS_PATH_MAX];
	wal_path(tmp_path, dir, w->tmp_name);
	wal_path(path, dir, w->name);
	err = wal_vfs_rename(vfs, tmp_path, path);
	if (err != KEEL_OK) {
		err = wal_fail_io(w->errmsg, err, "wal: rename %s", tmp_path);
		(void)wal_vfs_unlink(vfs, tmp_path);
		return err;
	}
	err = wal_vfs_sync_dir(vfs, dir);
	if (err != KEEL_OK) {
		return wal_fail_io(w->errmsg, err, "wal: sync directory %s", dir);
	}
	/* The snapshot is durable now; failing to remove old ones is worth a
	 * warning, not a failed commit (the next commit prunes again). */
	char prune_errmsg[WAL_ERRMSG_SIZE];
	if (wal_snapshot_prune(&w->config, w->config.snapshots_retained, prune_errmsg) != KEEL_OK) {
		KEEL_WARN("%s", prune_errmsg);
	}
	return KEEL_OK;
}

enum keel_err wal_snapshot_save(const struct wal_config *config, uint64_t index, uint64_t term,
				const void *membership, uint32_t membership_size,
				const void *payload, uint64_t payload_size,
				char errmsg[WAL_ERRMSG_SIZE])
{
	struct wal_snapshot_writer w;
	enum keel_err err = wal_snapshot_begin(&w, config, index, term, membership, membership_size);
	if (err == KEEL_OK && payload_size > SIZE_MAX) {
		wal_snapshot_abort(&w);
		return wal_fail(errmsg, KEEL_TOOBIG, "wal: snapshot payload too large");
	}
	if (err == KEEL_OK) {
		err = wal_snapshot_append(&w, payload, (size_t)payload_size);
		if (err != KEEL_OK) {
			wal_snapshot_abort(&w);
		}
	}
	if (err == KEEL_OK) {
		err = wal_snapshot_commit(&w);
	}
	if (err != KEEL_OK) {
		memcpy(errmsg, w.errmsg, WAL_ERRMSG_SIZE);
	}
	return err;
}

/* ---- reading ---- */

enum keel_err wal_snapshot_open(struct wal_snapshot_reader *r, const struct wal_config *config,
				const char *name, struct keel_arena *arena)
{
	memset(r, 0, sizeof(*r));
	char path[WAL_VFS_PATH_MAX];
	wal_path(path, config->dir, name);
	enum keel_err err = wal_vfs_open(config->vfs, path, WAL_VFS_READ_ONLY, &r->file);
	if (err != KEEL_OK) {
		return wal_fail_io(r->errmsg, err, "wal: open %s", path);
	}
	uint64_t file_size = 0;
	uint8_t *head = NULL;
	err = wal_vfs_size(r->file, &file_size);
	if (err != KEEL_OK) {
		err = wal_fail_io(r->errmsg, err, "wal: size of %s", path);
		goto fail;
	}
	size_t head_size = (size_t)KEEL_MIN(file_size, (uint64_t)WAL_SNAPSHOT_FIXED_SIZE +
								config->max_membership_bytes);
	head = malloc(head_size > 0 ? head_size : 1);
	if (head == NULL) {
		err = wal_fail(r->errmsg, KEEL_NOMEM, "wal: no memory to read %s", path);
		goto fail;
	}
	err = wal_vfs_pread_exact(r->file, head, head_size, 0);
	if (err != KEEL_OK) {
		err = wal_fail_io(r->errmsg, err, "wal: read %s", path);
		goto fail;
	}
	struct wal_snapshot_header h;
	size_t header_size = 0;
	char why[128];
	err = wal_snapshot_header_decode(head, head_size, config->max_membership_bytes, &h,
					 &header_size, why, sizeof(why));
	if (err == KEEL_OK && file_size != header_size + h.payload_size) {
		snprintf(why, sizeof(why), "file is %llu bytes, the header says %llu",
			 (unsigned long long)file_size,
			 (unsigned long long)(header_size + h.payload_size));
		err = KEEL_CORRUPT;
	}
	if (err != KEEL_OK) {
		err = wal_fail(r->errmsg, err == KEEL_SHORT || err == KEEL_TOOBIG ? KEEL_CORRUPT : err,
			       "wal: snapshot %s at offset 0: %s", path, why);
		goto fail;
	}
	r->meta = (struct wal_snapshot_meta){
		.index = h.index,
		.term = h.term,
		.payload_size = h.payload_size,
		.payload_crc = h.payload_crc,
		.membership_size = h.membership_size,
	};
	snprintf(r->meta.name, sizeof(r->meta.name), "%s", name);
	if (arena != NULL && h.membership_size > 0) {
		r->meta.membership = keel_arena_dup(arena, h.membership, h.membership_size);
		if (r->meta.membership == NULL) {
			err = wal_fail(r->errmsg, KEEL_NOMEM, "wal: no memory for a membership blob");
			goto fail;
		}
	}
	r->payload_offset = header_size;
	free(head);
	return KEEL_OK;
fail:
	free(head);
	wal_vfs_close(r->file);
	r->file = NULL;
	return err;
}

enum keel_err wal_snapshot_read(struct wal_snapshot_reader *r, void *buf, size_t size,
				size_t *nread)
{
	KEEL_ASSERT(r->file != NULL);
	*nread = 0;
	uint64_t left = r->meta.payload_size - r->read;
	size_t n = (size_t)KEEL_MIN((uint64_t)size, left);
	if (n == 0) {
		return KEEL_OK;
	}
	enum keel_err err = wal_vfs_pread_exact(r->file, buf, n, r->payload_offset + r->read);
	if (err != KEEL_OK) {
		return wal_fail_io(r->errmsg, err == KEEL_SHORT ? KEEL_CORRUPT : err,
				   "wal: read snapshot %s at offset %llu", r->meta.name,
				   (unsigned long long)(r->payload_offset + r->read));
	}
	r->crc = keel_crc32c(r->crc, buf, n);
	r->read += n;
	*nread = n;
	if (r->read == r->meta.payload_size && r->crc != r->meta.payload_crc) {
		return wal_fail(r->errmsg, KEEL_CORRUPT,
				"wal: snapshot %s: payload checksum mismatch (payload at offset "
				"%llu, %llu bytes)",
				r->meta.name, (unsigned long long)r->payload_offset,
				(unsigned long long)r->meta.payload_size);
	}
	return KEEL_OK;
}

void wal_snapshot_close(struct wal_snapshot_reader *r)
{
	if (r->file != NULL) {
		wal_vfs_close(r->file);
		r->file = NULL;
	}
}

static enum keel_err verify_once(const struct wal_config *config, const char *name,
				 struct keel_arena *arena, struct wal_snapshot_meta *meta,
				 uint8_t *chunk, char errmsg[WAL_ERRMSG_SIZE])
{
	struct wal_snapshot_reader r;
	enum keel_err err = wal_snapshot_open(&r, config, name, arena);
	if (err != KEEL_OK) {
		memcpy(errmsg, r.errmsg, WAL_ERRMSG_SIZE);
		return err;
	}
	size_t n;
	do {
		err = wal_snapshot_read(&r, chunk, READ_CHUNK, &n);
	} while (err == KEEL_OK && n > 0);
	if (err != KEEL_OK) {
		memcpy(errmsg, r.errmsg, WAL_ERRMSG_SIZE);
	} else {
		*meta = r.meta;
	}
	wal_snapshot_close(&r);
	return err;
}

enum keel_err wal_snapshot_verify(const struct wal_config *config, const char *name,
				  struct keel_arena *arena, struct wal_snapshot_meta *meta,
				  char errmsg[WAL_ERRMSG_SIZE])
{
	uint8_t *chunk = malloc(READ_CHUNK);
	if (chunk == NULL) {
		return wal_fail(errmsg, KEEL_NOMEM, "wal: no memory to verify a snapshot");
	}
	enum keel_err err = verify_once(config, name, arena, meta, chunk, errmsg);
	if (err == KEEL_CORRUPT) {
		err = verify_once(config, name, arena, meta, chunk, errmsg);
	}
	free(chunk);
	return err;
}

/* ---- listing and pruning ---- */

struct list_ctx {
	struct wal_snapshot_list *out;
};

static bool newer(uint64_t index_a, uint64_t term_a, uint64_t index_b, uint64_t term_b)
{
	return index_a > index_b || (index_a == index_b && term_a > term_b);
}

static void list_one(void *arg, const char *name)
{
	struct wal_snapshot_list *out = arg;
	uint64_t index;
	uint64_t term;
	if (wal_parse_file_name(name, &index, &term) != WAL_FILE_SNAPSHOT) {
		return;
	}
	/* Insertion into the newest-first array, dropping the oldest if full. */
	size_t at = out->count;
	while (at > 0 && newer(index, term, out->items[at - 1].index, out->items[at - 1].term)) {
		at--;
	}
	if (at >= WAL_SNAPSHOT_LIST_MAX) {
		return;
	}
	size_t last = out->count < WAL_SNAPSHOT_LIST_MAX ? out->count : WAL_SNAPSHOT_LIST_MAX - 1;
	memmove(&out->items[at + 1], &out->items[at], (last - at) * sizeof(out->items[0]));
	out->items[at].index = index;
	out->items[at].term = term;
	snprintf(out->items[at].name, WAL_NAME_MAX, "%s", name);
	if (out->count < WAL_SNAPSHOT_LIST_MAX) {
		out->count++;
	}
}

enum keel_err wal_snapshot_list(const struct wal_config *config, struct wal_snapshot_list *out,
				char errmsg[WAL_ERRMSG_SIZE])
{
	out->count = 0;
	enum keel_err err = wal_vfs_list(config->vfs, config->dir, list_one, out);
	if (err != KEEL_OK) {
		return wal_fail_io(errmsg, err, "wal: list %s", config->dir);
	}
	return KEEL_OK;
}

enum keel_err wal_snapshot_prune(const struct wal_config *config, uint32_t retain,
				 char errmsg[WAL_ERRMSG_SIZE])
{
	KEEL_ASSERT(retain >= 1);
	struct wal_snapshot_list *list = malloc(sizeof(*list));
	if (list == NULL) {
		return wal_fail(errmsg, KEEL_NOMEM, "wal: no memory to list snapshots");
	}
	enum keel_err err = wal_snapshot_list(config, list, errmsg);
	for (size_t i = retain; err == KEEL_OK && i < list->count; i++) {
		char path[WAL_VFS_PATH_MAX];
		wal_path(path, config->dir, list->items[i].name);
		err = wal_vfs_unlink(config->vfs, path);
		if (err != KEEL_OK) {
			err = wal_fail_io(errmsg, err, "wal: remove old snapshot %s", path);
		}
	}
	free(list);
	/* Removing old snapshots needs no directory sync: if a crash brings one
	 * back, the next prune removes it again. */
	return err;
}
