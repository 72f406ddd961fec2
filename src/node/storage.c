/*
 * storage.c — the node's side of the WAL writer (wal/writer.h): an adapter
 * from Raft readies to writer batches and from writer completions back to
 * the loop thread.
 *
 *   loop: node_storage_submit(ready) --> struct batch (our copy of the
 *         snapshot chunks and install) + wal_batch (hard state, entries:
 *         the writer copies them) --> wal_writer_submit
 *   storage thread (the writer's): group commit; per batch, before its
 *         entries, our prelude writes the chunks and installs; one
 *         fdatasync per group; on_written() queues each batch on `done`
 *         and wakes the loop (uv_async)
 *   loop: on_async() reports each batch, in persist order, to on_durable
 *
 * Within a group, in this order (crash-safe at every step):
 *   1. hard state (term, vote): the group's newest, written atomically
 *      before anything else, so a crash never leaves entries of a term
 *      newer than the hard state;
 *   2. per batch, the prelude: snapshot chunks pwritten into
 *      snap-I-T.snap.tmp and fdatasynced; an install renames the temp file
 *      into place, fsyncs the directory, verifies the checksum and then
 *      drops the obsolete log: wal_reset, or wal_compact when the log on
 *      disk holds the snapshot's entry with its term;
 *   3. per batch, its entries: a conflicting suffix truncated, appended;
 * and the group's fdatasync comes last. After any failure the writer is
 * sticky-failed: this batch and all later ones report the error.
 *
 * Compaction (after the node's own snapshot) is an empty batch carrying
 * compact_upto and prune_snapshots; its completion reports nothing.
 *
 * Every file access goes through the vfs (wal/vfs.h), the snapshot files'
 * too: there is no raw open/pwrite here.
 */
#include "node/storage.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef KEEL_PLANT_BUG_ACK_BEFORE_FSYNC
#include <unistd.h>
#endif

#include "base/assert.h"
#include "os/clock.h"
#include "os/log.h"
#include "wal/install.h"
#include "wal/ready.h"
#include "wal/snapshot.h"
#include "wal/wal.h"
#include "wal/writer.h"

struct chunk_copy {
	uint64_t index;
	uint64_t term;
	uint64_t offset;
	uint32_t size;
	bool last;
	uint8_t *data;
};

enum batch_kind {
	BATCH_PERSIST,   /* a Raft ready's: reported to on_durable */
	BATCH_COMPACT,   /* compaction: reported to nobody */
	BATCH_BOOTSTRAP, /* node_storage_bootstrap waits for it */
};

/* What the writer does not copy for us, and what comes back. Owned by the
 * storage from submit until the loop reports it (or close frees it). */
struct batch {
	struct node_storage *s;
	enum batch_kind kind;
	uint64_t persist_id;
	struct chunk_copy *chunks;
	size_t n_chunks;
	bool has_install;
	struct raft_snapshot_install install;
	/* Filled by the completion (storage thread). */
	enum keel_err result;
	uint64_t group;
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
	struct wal_writer writer;
	bool writer_running;
	char dir[1024];

	pthread_mutex_t mu;
	pthread_cond_t cond;                 /* bootstrap_done changed */
	struct batch *done_head, *done_tail; /* thread -> loop */
	bool failed;                         /* sticky, set by the thread */
	bool bootstrap_done;                 /* under mu */
	enum keel_err bootstrap_result;
	char bootstrap_errmsg[WAL_ERRMSG_SIZE];
	char newest_snapshot[WAL_NAME_MAX];  /* under mu */
	uv_async_t async;
	bool async_ready;

	/* Loop thread only. */
	uint64_t last_group_observed; /* for the fsync histogram */
	struct wal_ready_scratch scratch; /* the ready as a writer batch */

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

/* ---- the prelude (storage thread) ---- */

static void batch_free(struct batch *b)
{
	for (size_t i = 0; i < b->n_chunks; i++) {
		free(b->chunks[i].data);
	}
	free(b->chunks);
	free(b);
}

/* The install (wal/install.h), then the name of the newest snapshot. */
static enum keel_err do_install(struct node_storage *s, struct wal *wal,
			       const struct raft_snapshot_install *in,
			       char errmsg[WAL_ERRMSG_SIZE])
{
	char name[WAL_NAME_MAX];
	enum keel_err rc = wal_install_snapshot(wal, in->meta.index, in->meta.term,
						in->discard_log, name, errmsg);
	if (rc != KEEL_OK) {
		return rc;
	}
	pthread_mutex_lock(&s->mu);
	snprintf(s->newest_snapshot, sizeof(s->newest_snapshot), "%s", name);
	pthread_mutex_unlock(&s->mu);
	return KEEL_OK; /* the batch's prune_snapshots prunes the older ones */
}

/* The writer's prelude: a batch's snapshot chunks and install, before its
 * entries. */
static enum keel_err prelude(void *user_data, struct wal *wal, char errmsg[WAL_ERRMSG_SIZE])
{
	struct batch *b = user_data;
	struct node_storage *s = b->s;
	enum keel_err rc = KEEL_OK;
#ifdef KEEL_PLANT_BUG_ACK_BEFORE_FSYNC
	/* PLANTED BUG, continued: the write lags the early ack by a slow
	 * disk's 20 ms. A kill -9 cannot drop the page cache the way a power
	 * cut does, so this lag stands in for the window a power cut would
	 * expose; without it the bug only shows when a kill lands in the
	 * microseconds between ack and write(2). */
	if (b->acked_early) {
		usleep(20000);
	}
#endif
	for (size_t i = 0; rc == KEEL_OK && i < b->n_chunks; i++) {
		const struct chunk_copy *c = &b->chunks[i];
		rc = wal_install_write_chunk(&s->wal_config, c->index, c->term, c->offset,
					     c->data, c->size, errmsg);
	}
	if (rc == KEEL_OK && b->has_install) {
		rc = do_install(s, wal, &b->install, errmsg);
	}
	return rc;
}

/* The writer's completion (storage thread): hand the batch to the loop. */
static void on_written(void *arg, const struct wal_completion *c)
{
	struct node_storage *s = arg;
	struct batch *b = c->user_data;
	b->result = c->result;
	b->group = c->group;
	b->sync_ns = c->sync_ns;
	pthread_mutex_lock(&s->mu);
	if (c->result != KEEL_OK && !s->failed) {
		KEEL_ERROR("storage failed: %s", c->errmsg); /* once: the first failure */
		s->failed = true;
	}
	if (b->kind == BATCH_BOOTSTRAP) {
		s->bootstrap_done = true;
		s->bootstrap_result = c->result;
		snprintf(s->bootstrap_errmsg, sizeof(s->bootstrap_errmsg), "%s", c->errmsg);
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->mu);
		batch_free(b);
		return;
	}
	if (s->done_tail == NULL) {
		s->done_head = b;
	} else {
		s->done_tail->next = b;
	}
	s->done_tail = b;
	pthread_mutex_unlock(&s->mu);
	uv_async_send(&s->async);
}

static uint64_t mono_ns(void *arg)
{
	(void)arg;
	return keel_clock_mono_ns();
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
		if (b->kind == BATCH_COMPACT) {
			if (b->result != KEEL_OK) {
				KEEL_ERROR("compaction failed (%s): storage stops", keel_strerror(b->result));
			}
			batch_free(b);
			continue;
		}
		KEEL_ASSERT(b->kind == BATCH_PERSIST);
		/* One observation per write+sync round. */
		if (s->opts.fsync_hist != NULL && b->result == KEEL_OK &&
		    b->group != s->last_group_observed) {
			s->last_group_observed = b->group;
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

/* Hands a batch to the writer. The writer's queue is unbounded (see
 * node_storage_open), so it is never busy; on an error the batch is ours
 * again and freed. */
static enum keel_err writer_submit(struct node_storage *s, struct wal_batch *wb, struct batch *b)
{
	wb->user_data = b;
	if (b->n_chunks > 0 || b->has_install) {
		wb->prelude = prelude;
	}
#ifdef KEEL_PLANT_BUG_ACK_BEFORE_FSYNC
	if (b->acked_early) {
		wb->prelude = prelude;
	}
#endif
	uint64_t seq = 0;
	enum keel_err rc = wal_writer_submit(&s->writer, wb, &seq);
	KEEL_ASSERT(rc != KEEL_BUSY);
	if (rc != KEEL_OK) {
		KEEL_ERROR("storage refused a batch: %s", keel_strerror(rc));
		batch_free(b);
	}
	return rc;
}

/* Copies a ready's snapshot chunks (the writer copies only entries). */
static enum keel_err copy_chunks(struct batch *b, const struct raft_ready *rd)
{
	if (rd->n_chunks == 0) {
		return KEEL_OK;
	}
	b->chunks = calloc(rd->n_chunks, sizeof(*b->chunks));
	if (b->chunks == NULL) {
		return KEEL_NOMEM;
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
			return KEEL_NOMEM;
		}
		if (c->size > 0) {
			memcpy(cc->data, c->data, c->size);
		}
		b->n_chunks++;
	}
	return KEEL_OK;
}

enum keel_err node_storage_submit(struct node_storage *s, const struct raft_ready *rd)
{
	KEEL_ASSERT(rd->persist_id != 0);
	struct batch *b = calloc(1, sizeof(*b));
	if (b == NULL) {
		return KEEL_NOMEM;
	}
	b->s = s;
	b->kind = BATCH_PERSIST;
	b->persist_id = rd->persist_id;
	struct wal_batch wb;
	if (copy_chunks(b, rd) != KEEL_OK || wal_batch_from_ready(rd, &s->scratch, &wb) != KEEL_OK) {
		batch_free(b);
		return KEEL_NOMEM;
	}
	if (rd->install != NULL) {
		b->has_install = true;
		b->install = *rd->install;
	}
#ifdef KEEL_PLANT_BUG_ACK_BEFORE_FSYNC
	/* PLANTED BUG (tests only: cmake -DKEEL_PLANT_BUG=ACK_BEFORE_FSYNC; the
	 * fault suite must catch it, tests/faults/test_planted_bugs.py): the
	 * batch is reported durable now, before the storage thread has written
	 * it, let alone fdatasync'ed it; a kill -9 loses what was acknowledged.
	 * Snapshot batches, and everything behind a batch not reported yet,
	 * keep the honest path (persist order is kept). */
	bool early = b->n_chunks == 0 && !b->has_install && s->unreported == 0 &&
		     s->n_early < KEEL_ARRAY_SIZE(s->early_ids);
	b->acked_early = early;
#endif
	enum keel_err rc = writer_submit(s, &wb, b);
#ifdef KEEL_PLANT_BUG_ACK_BEFORE_FSYNC
	if (rc == KEEL_OK && early) {
		s->early_ids[s->n_early++] = rd->persist_id;
		uv_async_send(&s->async);
	} else if (rc == KEEL_OK) {
		s->unreported++;
	}
#endif
	return rc;
}

void node_storage_compact(struct node_storage *s, uint64_t index)
{
	struct batch *b = calloc(1, sizeof(*b));
	if (b == NULL) {
		KEEL_WARN("no memory to compact the log up to %llu", (unsigned long long)index);
		return;
	}
	b->s = s;
	b->kind = BATCH_COMPACT;
	struct wal_batch wb = {.compact_upto = index, .prune_snapshots = true};
	(void)writer_submit(s, &wb, b);
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

struct wal_vfs *node_storage_vfs(struct node_storage *s)
{
	return &s->vfs;
}

enum keel_err node_storage_snapshot_size(struct node_storage *s, uint64_t index, uint64_t term,
					 uint64_t *size)
{
	char path[2048];
	node_storage_snapshot_path_for(s, index, term, path, sizeof(path));
	struct wal_vfs_file *f;
	enum keel_err rc = wal_vfs_open(&s->vfs, path, WAL_VFS_READ_ONLY, &f);
	if (rc != KEEL_OK) {
		return rc;
	}
	rc = wal_vfs_size(f, size);
	wal_vfs_close(f);
	return rc;
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
	/* No back-pressure here: the Raft core bounds what it hands out
	 * (entries in flight, snapshot chunks), and a busy writer would need
	 * a retry path the ready loop does not have. */
	struct wal_writer_config wc = {
		.done = on_written,
		.done_arg = s,
		.max_queued_batches = UINT32_MAX,
		.max_queued_bytes = UINT64_MAX,
		.prepare_spares = true,
		.prepare_step_bytes = 1u << 20,
		.clock = mono_ns,
	};
	if (wal_writer_start(&s->writer, &s->wal, &wc) != KEEL_OK) {
		snprintf(err, err_size, "cannot start the storage thread");
		return KEEL_IO;
	}
	s->writer_running = true;
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
	struct batch *b = calloc(1, sizeof(*b));
	if (b == NULL) {
		snprintf(err, err_size, "out of memory");
		return KEEL_NOMEM;
	}
	b->s = s;
	b->kind = BATCH_BOOTSTRAP;
	struct wal_hard_state whs;
	memset(&whs, 0, sizeof(whs));
	whs.term = hs->term;
	whs.voted_for = hs->vote;
	struct wal_entry we = {entry->index, entry->term, entry->type, entry->size, entry->data};
	struct wal_batch wb = {.hard_state = &whs, .entries = &we, .entry_count = 1};
	pthread_mutex_lock(&s->mu);
	s->bootstrap_done = false;
	pthread_mutex_unlock(&s->mu);
	enum keel_err rc = writer_submit(s, &wb, b);
	if (rc == KEEL_OK) {
		/* The loop is not running yet: wait for the storage thread. */
		pthread_mutex_lock(&s->mu);
		while (!s->bootstrap_done) {
			pthread_cond_wait(&s->cond, &s->mu);
		}
		rc = s->bootstrap_result;
		if (rc != KEEL_OK) {
			snprintf(err, err_size, "cannot write the bootstrap entry: %s",
				 s->bootstrap_errmsg);
		}
		pthread_mutex_unlock(&s->mu);
	} else {
		snprintf(err, err_size, "cannot write the bootstrap entry: %s", keel_strerror(rc));
	}
	return rc;
}

static void storage_free(struct node_storage *s)
{
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cond);
	wal_ready_scratch_free(&s->scratch);
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
	if (s->writer_running) {
		wal_writer_stop(&s->writer); /* completes everything queued */
		s->writer_running = false;
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
