/*
 * storage.c — the storage thread: group commit of Raft persist batches.
 *
 * The loop thread copies each persist batch (node_storage_submit) onto the
 * `pending` queue. The storage thread takes EVERY queued batch at once,
 * writes them in order, then makes all of them durable with one
 * fdatasync, and moves them to `done`; a uv_async wakes the loop, which
 * reports them to the node in persist order. While the thread syncs, new
 * batches collect — that is the group commit.
 *
 * Within a batch, in this order (crash-safe at every step):
 *   1. snapshot chunks: pwrite into snap-I-T.snap.tmp, fdatasync;
 *   2. install: rename the temp file into place, fsync the directory,
 *      verify its checksum, then drop the obsolete log (wal_reset or
 *      wal_compact);
 *   3. hard state (term, vote): written atomically BEFORE the entries, so a
 *      crash can never leave entries of a term newer than the hard state;
 *   4. entries: truncate a conflicting suffix, append;
 * and the batch group's fdatasync comes last. After any failure the WAL is
 * sticky-failed: this batch and all later ones report the error.
 *
 * Every file access goes through the vfs (wal/vfs.h), the snapshot files'
 * too: there is no raw open/pwrite here.
 */
#include "node/storage.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "os/clock.h"
#include "os/log.h"
#include "wal/snapshot.h"
#include "wal/wal.h"

struct chunk_copy {
	uint64_t index;
	uint64_t term;
	uint64_t offset;
	uint32_t size;
	bool last;
	uint8_t *data;
};

struct batch {
	uint64_t persist_id;
	struct chunk_copy *chunks;
	size_t n_chunks;
	bool has_install;
	struct raft_snapshot_install install;
	struct wal_entry *entries;
	size_t n_entries;
	uint8_t *entry_data;
	bool has_hard_state;
	struct raft_hard_state hard_state;
	enum keel_err result;
	uint64_t sync_ns;
	struct batch *next;
#ifdef KEEL_PLANT_BUG_ACK_BEFORE_FSYNC
	bool acked_early; /* PLANTED BUG: reported durable at submit */
#endif
};

struct node_storage {
	struct node_storage_options opts;
	struct wal_vfs vfs;
	struct wal_config wal_config;
	struct wal wal;
	bool wal_open;
	char dir[1024];

	pthread_t thread;
	bool thread_running;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct batch *pending_head, *pending_tail; /* loop -> thread */
	struct batch *done_head, *done_tail;       /* thread -> loop */
	uint64_t compact_upto;                     /* 0: nothing asked */
	bool stop;
	bool failed;                               /* sticky, set by the thread */
	char newest_snapshot[WAL_NAME_MAX];        /* under mu */
	uv_async_t async;
	bool async_ready;

	/* Sending snapshots (loop thread only). */
	struct wal_vfs_file *send_file; /* NULL: none open */
	uint64_t send_index, send_term;

	struct wal_recovered recovered;
	bool has_recovered;
#ifdef KEEL_PLANT_BUG_ACK_BEFORE_FSYNC
	/* PLANTED BUG (loop thread only): persist ids reported durable before
	 * the storage thread wrote them, and batches not reported yet. */
	uint64_t early_ids[64];
	size_t n_early;
	size_t unreported;
#endif
};

/* ---- thread side ---- */

static void batch_free(struct batch *b)
{
	for (size_t i = 0; i < b->n_chunks; i++) {
		free(b->chunks[i].data);
	}
	free(b->chunks);
	free(b->entries);
	free(b->entry_data);
	free(b);
}

static enum keel_err write_chunk(struct node_storage *s, const struct chunk_copy *c)
{
	char name[WAL_NAME_MAX], path[2048];
	wal_snapshot_name(name, c->index, c->term, true);
	snprintf(path, sizeof(path), "%s/%s", s->dir, name);
	struct wal_vfs_file *f;
	enum keel_err rc = wal_vfs_open(&s->vfs, path, WAL_VFS_CREATE, &f);
	if (rc != KEEL_OK) {
		KEEL_ERROR("snapshot chunk: cannot open %s: %s", path, wal_vfs_last_error());
		return rc;
	}
	if (c->offset == 0) {
		rc = wal_vfs_truncate(f, 0); /* a transfer starting over */
	}
	if (rc == KEEL_OK) {
		rc = wal_vfs_pwrite(f, c->data, c->size, c->offset);
	}
	if (rc == KEEL_OK) {
		rc = wal_vfs_datasync(f);
	}
	if (rc != KEEL_OK) {
		KEEL_ERROR("snapshot chunk: %s: %s", path, wal_vfs_last_error());
		rc = rc == KEEL_NOSPACE ? KEEL_NOSPACE : KEEL_IO;
	}
	wal_vfs_close(f);
	return rc;
}

static enum keel_err do_install(struct node_storage *s, const struct raft_snapshot_install *in)
{
	char tmp[WAL_NAME_MAX], final_name[WAL_NAME_MAX], from[2048], to[2048];
	wal_snapshot_name(tmp, in->meta.index, in->meta.term, true);
	wal_snapshot_name(final_name, in->meta.index, in->meta.term, false);
	snprintf(from, sizeof(from), "%s/%s", s->dir, tmp);
	snprintf(to, sizeof(to), "%s/%s", s->dir, final_name);
	if (wal_vfs_rename(&s->vfs, from, to) != KEEL_OK) {
		KEEL_ERROR("install snapshot: rename %s: %s", from, wal_vfs_last_error());
		return KEEL_IO;
	}
	if (wal_vfs_sync_dir(&s->vfs, s->dir) != KEEL_OK) {
		KEEL_ERROR("install snapshot: cannot sync directory %s", s->dir);
		return KEEL_IO;
	}
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct wal_snapshot_meta meta;
	char msg[WAL_ERRMSG_SIZE];
	enum keel_err rc = wal_snapshot_verify(&s->wal_config, final_name, &arena, &meta, msg);
	keel_arena_close(&arena);
	if (rc != KEEL_OK) {
		KEEL_ERROR("install snapshot: received file is damaged: %s", msg);
		(void)wal_vfs_unlink(&s->vfs, to);
		return KEEL_CORRUPT;
	}
	/* The core decides discard_log from its in-memory log, which may hold
	 * the snapshot's entry before storage has it: keep the stored log only
	 * if storage itself holds that entry with that term. */
	if (in->discard_log || wal_term_at(&s->wal, in->meta.index) != in->meta.term) {
		rc = wal_reset(&s->wal, in->meta.index, in->meta.term);
	} else {
		rc = wal_compact(&s->wal, in->meta.index);
	}
	if (rc != KEEL_OK) {
		KEEL_ERROR("install snapshot: %s", s->wal.errmsg);
		return rc;
	}
	pthread_mutex_lock(&s->mu);
	snprintf(s->newest_snapshot, sizeof(s->newest_snapshot), "%s", final_name);
	pthread_mutex_unlock(&s->mu);
	char pmsg[WAL_ERRMSG_SIZE];
	wal_snapshot_prune(&s->wal_config, s->wal_config.snapshots_retained, pmsg);
	return KEEL_OK;
}

static enum keel_err write_batch(struct node_storage *s, struct batch *b)
{
	enum keel_err rc = KEEL_OK;
	for (size_t i = 0; rc == KEEL_OK && i < b->n_chunks; i++) {
		rc = write_chunk(s, &b->chunks[i]);
	}
	if (rc == KEEL_OK && b->has_install) {
		rc = do_install(s, &b->install);
	}
	if (rc == KEEL_OK && b->has_hard_state) {
		struct wal_hard_state hs;
		memset(&hs, 0, sizeof(hs));
		hs.term = b->hard_state.term;
		hs.voted_for = b->hard_state.vote;
		rc = wal_save_hard_state(&s->wal, &hs);
		if (rc != KEEL_OK) {
			KEEL_ERROR("hard state: %s", s->wal.errmsg);
		}
	}
	if (rc == KEEL_OK && b->n_entries > 0) {
		uint64_t first = b->entries[0].index;
		if (first <= wal_last_index(&s->wal)) {
			rc = wal_truncate_suffix(&s->wal, first);
			if (rc != KEEL_OK) {
				KEEL_ERROR("truncate from %llu: %s", (unsigned long long)first,
					   s->wal.errmsg);
			}
		}
		if (rc == KEEL_OK) {
			rc = wal_append(&s->wal, b->entries, b->n_entries);
			if (rc != KEEL_OK) {
				KEEL_ERROR("append: %s", s->wal.errmsg);
			}
		}
	}
	return rc;
}

static void *storage_thread(void *arg)
{
	struct node_storage *s = arg;
	bool idle_work = true;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (s->pending_head == NULL && s->compact_upto == 0 && !s->stop) {
			if (idle_work && !s->failed) {
				/* Zero-fill spare segments 1 MiB at a time while idle,
				 * so a segment roll never waits for it. */
				pthread_mutex_unlock(&s->mu);
				bool done = true;
				enum keel_err err = wal_prepare_spare_step(&s->wal, 1u << 20, &done);
				idle_work = err == KEEL_OK && !done;
				pthread_mutex_lock(&s->mu);
				continue;
			}
			pthread_cond_wait(&s->cond, &s->mu);
		}
		idle_work = true;
		if (s->pending_head == NULL && s->compact_upto == 0 && s->stop) {
			break;
		}
		struct batch *head = s->pending_head;
		s->pending_head = s->pending_tail = NULL;
		uint64_t compact = s->compact_upto;
		s->compact_upto = 0;
		bool failed = s->failed;
		pthread_mutex_unlock(&s->mu);

		enum keel_err rc = failed ? KEEL_FAILED : KEEL_OK;
#ifdef KEEL_PLANT_BUG_ACK_BEFORE_FSYNC
		/* PLANTED BUG, continued: the write lags the early ack by a
		 * slow disk's 20 ms. A kill -9 cannot drop the page cache the
		 * way a power cut does, so this lag stands in for the window a
		 * power cut would expose; without it the bug only shows when a
		 * kill lands in the microseconds between ack and write(2). */
		for (struct batch *b = head; b != NULL; b = b->next) {
			if (b->acked_early) {
				usleep(20000);
				break;
			}
		}
#endif
		for (struct batch *b = head; b != NULL; b = b->next) {
			if (rc == KEEL_OK) {
				rc = write_batch(s, b);
			}
			b->result = rc;
		}
		uint64_t sync_ns = 0;
		if (rc == KEEL_OK && head != NULL) {
			uint64_t t0 = keel_clock_mono_ns();
			rc = wal_sync(&s->wal);
			sync_ns = keel_clock_mono_ns() - t0;
			if (rc != KEEL_OK) {
				KEEL_ERROR("fdatasync: %s", s->wal.errmsg);
				for (struct batch *b = head; b != NULL; b = b->next) {
					b->result = rc;
				}
			}
		}
		if (rc == KEEL_OK && compact != 0 && !wal_failed(&s->wal)) {
			if (wal_compact(&s->wal, compact) != KEEL_OK) {
				KEEL_WARN("compaction up to %llu: %s", (unsigned long long)compact,
					  s->wal.errmsg);
			}
			char msg[WAL_ERRMSG_SIZE];
			wal_snapshot_prune(&s->wal_config, s->wal_config.snapshots_retained, msg);
		}
		for (struct batch *b = head; b != NULL; b = b->next) {
			b->sync_ns = sync_ns;
		}

		pthread_mutex_lock(&s->mu);
		if (rc != KEEL_OK) {
			s->failed = true;
		}
		if (head != NULL) {
			struct batch *tail = head;
			while (tail->next != NULL) {
				tail = tail->next;
			}
			if (s->done_tail == NULL) {
				s->done_head = head;
			} else {
				s->done_tail->next = head;
			}
			s->done_tail = tail;
			uv_async_send(&s->async);
		}
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- loop side ---- */

static void on_async(uv_async_t *a)
{
	struct node_storage *s = a->data;
	pthread_mutex_lock(&s->mu);
	struct batch *head = s->done_head;
	s->done_head = s->done_tail = NULL;
	pthread_mutex_unlock(&s->mu);
#ifdef KEEL_PLANT_BUG_ACK_BEFORE_FSYNC
	for (size_t i = 0; i < s->n_early; i++) {
		s->opts.on_durable(s->opts.ctx, s->early_ids[i], KEEL_OK);
	}
	s->n_early = 0;
#endif
	while (head != NULL) {
		struct batch *b = head;
		head = b->next;
		if (s->opts.fsync_hist != NULL && b->sync_ns != 0 && head == NULL) {
			metrics_hist_observe(s->opts.fsync_hist, b->sync_ns / 1000u);
		}
#ifdef KEEL_PLANT_BUG_ACK_BEFORE_FSYNC
		if (b->acked_early) {
			batch_free(b);
			continue;
		}
		s->unreported--;
#endif
		s->opts.on_durable(s->opts.ctx, b->persist_id, b->result);
		batch_free(b);
	}
}

bool node_storage_failed(const struct node_storage *s)
{
	return s->failed;
}

enum keel_err node_storage_submit(struct node_storage *s, const struct raft_ready *rd)
{
	KEEL_ASSERT(rd->persist_id != 0);
	struct batch *b = calloc(1, sizeof(*b));
	if (b == NULL) {
		return KEEL_NOMEM;
	}
	b->persist_id = rd->persist_id;
	if (rd->n_chunks > 0) {
		b->chunks = calloc(rd->n_chunks, sizeof(*b->chunks));
		if (b->chunks == NULL) {
			goto nomem;
		}
		for (size_t i = 0; i < rd->n_chunks; i++) {
			const struct raft_snapshot_chunk *c = &rd->chunks[i];
			struct chunk_copy *cc = &b->chunks[i];
			cc->index = c->meta.index;
			cc->term = c->meta.term;
			cc->offset = c->offset;
			cc->size = c->size;
			cc->last = c->last;
			cc->data = malloc(c->size > 0 ? c->size : 1);
			if (cc->data == NULL) {
				goto nomem;
			}
			if (c->size > 0) {
				memcpy(cc->data, c->data, c->size);
			}
			b->n_chunks++;
		}
	}
	if (rd->install != NULL) {
		b->has_install = true;
		b->install = *rd->install;
	}
	if (rd->n_entries > 0) {
		size_t total = 0;
		for (size_t i = 0; i < rd->n_entries; i++) {
			total += rd->entries[i].size;
		}
		b->entries = calloc(rd->n_entries, sizeof(*b->entries));
		b->entry_data = malloc(total > 0 ? total : 1);
		if (b->entries == NULL || b->entry_data == NULL) {
			goto nomem;
		}
		size_t off = 0;
		for (size_t i = 0; i < rd->n_entries; i++) {
			const struct raft_entry *e = &rd->entries[i];
			struct wal_entry *we = &b->entries[i];
			we->index = e->index;
			we->term = e->term;
			we->type = e->type;
			we->size = e->size;
			we->data = b->entry_data + off;
			if (e->size > 0) {
				memcpy(b->entry_data + off, e->data, e->size);
			}
			off += e->size;
		}
		b->n_entries = rd->n_entries;
	}
	if (rd->hard_state_changed) {
		b->has_hard_state = true;
		b->hard_state = rd->hard_state;
	}
#ifdef KEEL_PLANT_BUG_ACK_BEFORE_FSYNC
	/* PLANTED BUG (tests only: cmake -DKEEL_PLANT_BUG=ACK_BEFORE_FSYNC; the
	 * fault suite must catch it, tests/faults/test_planted_bugs.py): the
	 * batch is reported durable now, before the storage thread has written
	 * it, let alone fdatasync'ed it; a kill -9 loses what was acknowledged.
	 * Snapshot batches, and everything behind a batch not reported yet,
	 * keep the honest path (persist order is kept). */
	if (b->n_chunks == 0 && !b->has_install && s->unreported == 0 &&
	    s->n_early < KEEL_ARRAY_SIZE(s->early_ids)) {
		b->acked_early = true;
		s->early_ids[s->n_early++] = b->persist_id;
		uv_async_send(&s->async);
	} else {
		s->unreported++;
	}
#endif
	pthread_mutex_lock(&s->mu);
	if (s->pending_tail == NULL) {
		s->pending_head = b;
	} else {
		s->pending_tail->next = b;
	}
	s->pending_tail = b;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->mu);
	return KEEL_OK;
nomem:
	batch_free(b);
	return KEEL_NOMEM;
}

void node_storage_compact(struct node_storage *s, uint64_t index)
{
	pthread_mutex_lock(&s->mu);
	if (index > s->compact_upto) {
		s->compact_upto = index;
	}
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->mu);
}

static void newest_snapshot_name(struct node_storage *s, char *out, size_t size)
{
	pthread_mutex_lock(&s->mu);
	snprintf(out, size, "%s", s->newest_snapshot);
	pthread_mutex_unlock(&s->mu);
}

void node_storage_snapshot_path(struct node_storage *s, char *out, size_t size)
{
	char name[WAL_NAME_MAX];
	newest_snapshot_name(s, name, sizeof(name));
	if (name[0] == '\0') {
		out[0] = '\0';
		return;
	}
	snprintf(out, size, "%s/%s", s->dir, name);
}

void node_storage_snapshot_path_for(struct node_storage *s, uint64_t index, uint64_t term,
				    char *out, size_t size)
{
	char name[WAL_NAME_MAX];
	wal_snapshot_name(name, index, term, false);
	snprintf(out, size, "%s/%s", s->dir, name);
}

void node_storage_note_snapshot(struct node_storage *s, uint64_t index, uint64_t term)
{
	char name[WAL_NAME_MAX];
	wal_snapshot_name(name, index, term, false);
	pthread_mutex_lock(&s->mu);
	snprintf(s->newest_snapshot, sizeof(s->newest_snapshot), "%s", name);
	pthread_mutex_unlock(&s->mu);
}

enum keel_err node_storage_snapshot_read(struct node_storage *s, uint64_t index, uint64_t term,
					 uint64_t offset, void *buf, size_t size, size_t *got)
{
	*got = 0;
	if (s->send_file == NULL || s->send_index != index || s->send_term != term) {
		if (s->send_file != NULL) {
			wal_vfs_close(s->send_file);
			s->send_file = NULL;
		}
		char name[WAL_NAME_MAX], path[2048];
		wal_snapshot_name(name, index, term, false);
		snprintf(path, sizeof(path), "%s/%s", s->dir, name);
		if (wal_vfs_open(&s->vfs, path, WAL_VFS_READ_ONLY, &s->send_file) != KEEL_OK) {
			s->send_file = NULL;
			return KEEL_NOENT;
		}
		s->send_index = index;
		s->send_term = term;
	}
	size_t done = 0;
	if (wal_vfs_pread(s->send_file, buf, size, offset, &done) != KEEL_OK) {
		return KEEL_IO;
	}
	*got = done;
	return KEEL_OK;
}

enum keel_err node_storage_open(struct node_storage **out, const struct node_storage_options *opts,
				struct node_recovered *rec, char *err, size_t err_size)
{
	struct node_storage *s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, err_size, "out of memory");
		return KEEL_NOMEM;
	}
	s->opts = *opts;
	s->send_file = NULL;
	snprintf(s->dir, sizeof(s->dir), "%s", opts->data_dir);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cond, NULL);
	*out = s;
	wal_vfs_posix_init(&s->vfs);
	wal_config_init(&s->wal_config, &s->vfs, s->dir);
	if (opts->segment_bytes != 0) {
		s->wal_config.segment_size_bytes = opts->segment_bytes;
	}
	if (opts->max_entry_bytes != 0) {
		s->wal_config.max_entry_size_bytes = opts->max_entry_bytes;
	}
	char msg[WAL_ERRMSG_SIZE];
	if (wal_config_check(&s->wal_config, msg) != KEEL_OK) {
		snprintf(err, err_size, "storage configuration: %s", msg);
		return KEEL_CONFIG;
	}
	enum keel_err rc = wal_open(&s->wal, &s->wal_config, &s->recovered);
	if (rc != KEEL_OK) {
		snprintf(err, err_size, "%s", s->wal.errmsg);
		return rc;
	}
	s->wal_open = true;
	s->has_recovered = true;
	if (s->recovered.notes[0] != '\0') {
		KEEL_WARN("storage recovery: %s", s->recovered.notes);
	}

	memset(rec, 0, sizeof(*rec));
	rec->empty = !s->recovered.has_hard_state && !s->recovered.has_snapshot &&
		     s->recovered.entry_count == 0;
	rec->hard_state.term = s->recovered.hard_state.term;
	rec->hard_state.vote = s->recovered.hard_state.voted_for;
	if (s->recovered.has_snapshot) {
		const struct wal_snapshot_meta *m = &s->recovered.snapshot;
		rec->has_snapshot = true;
		rec->snapshot.index = m->index;
		rec->snapshot.term = m->term;
		if (m->membership_size > 0 &&
		    raft_config_decode(m->membership, m->membership_size, &rec->snapshot.config) !=
			    KEEL_OK) {
			snprintf(err, err_size, "snapshot %s/%s has a malformed membership; "
					       "move it away and restart to recover from the log, "
					       "or wipe the data dir and rejoin",
				 s->dir, m->name);
			return KEEL_CORRUPT;
		}
		snprintf(rec->snapshot_path, sizeof(rec->snapshot_path), "%s/%s", s->dir, m->name);
		snprintf(s->newest_snapshot, sizeof(s->newest_snapshot), "%s", m->name);
		struct wal_vfs_file *f;
		if (wal_vfs_open(&s->vfs, rec->snapshot_path, WAL_VFS_READ_ONLY, &f) == KEEL_OK) {
			uint64_t size = 0;
			if (wal_vfs_size(f, &size) == KEEL_OK) {
				rec->snapshot.size_bytes = size;
			}
			wal_vfs_close(f);
		}
	}
	if (s->recovered.entry_count > 0) {
		rec->entries = calloc(s->recovered.entry_count, sizeof(*rec->entries));
		if (rec->entries == NULL) {
			snprintf(err, err_size, "out of memory loading the log");
			return KEEL_NOMEM;
		}
		for (size_t i = 0; i < s->recovered.entry_count; i++) {
			const struct wal_entry *we = &s->recovered.entries[i];
			rec->entries[i].index = we->index;
			rec->entries[i].term = we->term;
			rec->entries[i].type = we->type;
			rec->entries[i].size = we->size;
			rec->entries[i].data = we->data;
		}
		rec->n_entries = s->recovered.entry_count;
	}

	if (uv_async_init(opts->loop, &s->async, on_async) != 0) {
		snprintf(err, err_size, "cannot set up the storage wake-up");
		return KEEL_IO;
	}
	s->async.data = s;
	s->async_ready = true;
	if (pthread_create(&s->thread, NULL, storage_thread, s) != 0) {
		snprintf(err, err_size, "cannot start the storage thread");
		return KEEL_IO;
	}
	s->thread_running = true;
	return KEEL_OK;
}

void node_storage_release_recovered(struct node_storage *s, struct node_recovered *rec)
{
	free(rec->entries);
	rec->entries = NULL;
	rec->n_entries = 0;
	if (s->has_recovered) {
		wal_recovered_free(&s->recovered);
		s->has_recovered = false;
	}
}

enum keel_err node_storage_bootstrap(struct node_storage *s, const struct raft_entry *entry,
				     const struct raft_hard_state *hs, char *err, size_t err_size)
{
	/* The thread is idle (nothing submitted yet): take the lock anyway so
	 * the WAL is never used by two threads at once. */
	pthread_mutex_lock(&s->mu);
	struct wal_hard_state whs;
	memset(&whs, 0, sizeof(whs));
	whs.term = hs->term;
	whs.voted_for = hs->vote;
	struct wal_entry we = {entry->index, entry->term, entry->type, entry->size, entry->data};
	enum keel_err rc = wal_save_hard_state(&s->wal, &whs);
	if (rc == KEEL_OK) {
		rc = wal_append(&s->wal, &we, 1);
	}
	if (rc == KEEL_OK) {
		rc = wal_sync(&s->wal);
	}
	if (rc != KEEL_OK) {
		snprintf(err, err_size, "cannot write the bootstrap entry: %s", s->wal.errmsg);
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static void storage_free(struct node_storage *s)
{
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cond);
	free(s);
}

static void on_async_closed(uv_handle_t *h)
{
	storage_free(h->data);
}

void node_storage_close(struct node_storage *s)
{
	if (s == NULL) {
		return;
	}
	if (s->thread_running) {
		pthread_mutex_lock(&s->mu);
		s->stop = true;
		pthread_cond_signal(&s->cond);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->thread, NULL);
		s->thread_running = false;
	}
	/* Completions that arrived after the loop stopped: free them. */
	struct batch *b = s->done_head;
	while (b != NULL) {
		struct batch *next = b->next;
		batch_free(b);
		b = next;
	}
	s->done_head = s->done_tail = NULL;
	if (s->send_file != NULL) {
		wal_vfs_close(s->send_file);
		s->send_file = NULL;
	}
	if (s->has_recovered) {
		wal_recovered_free(&s->recovered);
		s->has_recovered = false;
	}
	if (s->wal_open) {
		wal_close(&s->wal);
		s->wal_open = false;
	}
	if (s->async_ready) {
		/* The memory goes when libuv is done with the handle. */
		uv_close((uv_handle_t *)&s->async, on_async_closed);
		return;
	}
	storage_free(s);
}
