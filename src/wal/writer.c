/* writer.c — the storage thread: group commit over the synchronous WAL (see
 * writer.h for the contract).
 *
 *   loop thread: submit -> [queue] <- storage thread: take all, write all,
 *                                      one fdatasync, complete each in order
 *
 * State of the storage thread:
 *
 *   waiting --submit--> writing group --sync ok--> completing --> waiting
 *      |  \                   | error                    ^
 *      |   idle: zero-fill    v                          |
 *      |   a spare step    failed (sticky): every group completes with the
 *      |                   error, every submit returns KEEL_FAILED
 *      +--stop, queue empty--> exit
 *
 * The mutex guards the queue, the counters, `failed` and `stopping`; the
 * struct wal is touched only by the storage thread while it runs.
 */
#include "wal/writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"

struct wal_pending {
	struct wal_pending *next;
	uint64_t seq;
	uint64_t bytes; /* this allocation, counted against max_queued_bytes */
	bool has_hard_state;
	struct wal_hard_state hard_state; /* extra points into this allocation */
	wal_prelude_fn prelude;
	uint64_t truncate_from;
	uint64_t compact_upto;
	bool prune_snapshots;
	void *user_data;
	size_t entry_count;
	struct wal_entry *entries; /* data points into this allocation */
};

/* ---- submit ---- */

/* Checks a batch against what has been submitted so far and computes the
 * size of its copy. */
static enum keel_err check_batch(struct wal_writer *w, const struct wal_batch *b,
				 uint64_t *next_index, uint64_t *bytes)
{
	uint64_t expected = w->next_index;
	uint64_t floor = 0; /* truncate_from must be above it */
	if (b->install_index != 0) {
		/* Reset: continues at install_index+1; kept: where it did. */
		expected = KEEL_MAX(expected, b->install_index + 1);
		floor = b->install_index;
	}
	if (b->truncate_from != 0) {
		if (b->truncate_from > expected || b->truncate_from <= floor) {
			return KEEL_INVAL;
		}
		expected = b->truncate_from;
	}
	if (b->entry_count > 0 && b->entries == NULL) {
		return KEEL_INVAL;
	}
	uint64_t size = sizeof(struct wal_pending) + b->entry_count * sizeof(struct wal_entry);
	if (b->hard_state != NULL) {
		if (b->hard_state->extra_size > WAL_HARD_STATE_MAX_EXTRA) {
			return KEEL_TOOBIG;
		}
		size += b->hard_state->extra_size;
	}
	for (size_t i = 0; i < b->entry_count; i++) {
		const struct wal_entry *e = &b->entries[i];
		if (e->index != expected + i) {
			return KEEL_INVAL;
		}
		if (e->size > w->wal->config.max_entry_size_bytes) {
			return KEEL_TOOBIG;
		}
		if (e->size > 0 && e->data == NULL) {
			return KEEL_INVAL;
		}
		size += e->size;
	}
	*next_index = expected + b->entry_count;
	*bytes = size;
	return KEEL_OK;
}

/* One allocation holding the batch and copies of everything it points to. */
static struct wal_pending *copy_batch(const struct wal_batch *b, uint64_t bytes)
{
	if (bytes > SIZE_MAX) {
		return NULL;
	}
	struct wal_pending *p = malloc((size_t)bytes);
	if (p == NULL) {
		return NULL;
	}
	memset(p, 0, sizeof(*p));
	uint8_t *at = (uint8_t *)(p + 1);
	p->entries = (struct wal_entry *)(void *)at;
	at += b->entry_count * sizeof(struct wal_entry);
	p->bytes = bytes;
	p->prelude = b->prelude;
	p->truncate_from = b->truncate_from;
	p->compact_upto = b->compact_upto;
	p->prune_snapshots = b->prune_snapshots;
	p->user_data = b->user_data;
	p->entry_count = b->entry_count;
	if (b->hard_state != NULL) {
		p->has_hard_state = true;
		p->hard_state = *b->hard_state;
		if (b->hard_state->extra_size > 0) {
			memcpy(at, b->hard_state->extra, b->hard_state->extra_size);
			p->hard_state.extra = at;
			at += b->hard_state->extra_size;
		}
	}
	for (size_t i = 0; i < b->entry_count; i++) {
		p->entries[i] = b->entries[i];
		if (b->entries[i].size > 0) {
			memcpy(at, b->entries[i].data, b->entries[i].size);
			p->entries[i].data = at;
			at += b->entries[i].size;
		}
	}
	KEEL_ASSERT((uint64_t)(at - (uint8_t *)p) == bytes);
	return p;
}

enum keel_err wal_writer_submit(struct wal_writer *w, const struct wal_batch *batch,
				uint64_t *seq)
{
	enum keel_err err = KEEL_OK;
	uint64_t next_index = 0;
	uint64_t bytes = 0;
	pthread_mutex_lock(&w->mutex);
	if (w->stopping) {
		err = KEEL_SHUTDOWN;
	} else if (w->failed) {
		err = KEEL_FAILED;
	} else {
		err = check_batch(w, batch, &next_index, &bytes);
	}
	if (err == KEEL_OK && bytes > w->config.max_queued_bytes) {
		err = KEEL_TOOBIG; /* would never fit, however long the caller waits */
	}
	if (err == KEEL_OK && (w->queued_batches >= w->config.max_queued_batches ||
			       bytes > w->config.max_queued_bytes - w->queued_bytes)) {
		err = KEEL_BUSY;
	}
	struct wal_pending *p = NULL;
	if (err == KEEL_OK) {
		p = copy_batch(batch, bytes);
		if (p == NULL) {
			err = KEEL_NOMEM;
		}
	}
	if (err == KEEL_OK) {
		p->seq = w->next_seq++;
		if (w->tail != NULL) {
			w->tail->next = p;
		} else {
			w->head = p;
		}
		w->tail = p;
		w->queued_batches++;
		w->queued_bytes += bytes;
		w->next_index = next_index;
		*seq = p->seq;
		pthread_cond_signal(&w->wake);
	}
	pthread_mutex_unlock(&w->mutex);
	return err;
}

/* ---- the storage thread ---- */

/* One batch's operations after the group's hard state, in the documented
 * order. On an error, errmsg says why. */
static enum keel_err write_batch(struct wal *wal, struct wal_pending *p,
				 char errmsg[WAL_ERRMSG_SIZE])
{
	enum keel_err err = KEEL_OK;
	if (p->prelude != NULL) {
		errmsg[0] = '\0';
		err = p->prelude(p->user_data, wal, errmsg);
		if (err != KEEL_OK) {
			if (errmsg[0] == '\0') {
				snprintf(errmsg, WAL_ERRMSG_SIZE, "wal writer: batch prelude failed: %s",
					 keel_strerror(err));
			}
			return err;
		}
	}
	if (p->truncate_from != 0) {
		err = wal_truncate_suffix(wal, p->truncate_from);
	}
	if (err == KEEL_OK && p->entry_count > 0) {
		err = wal_append(wal, p->entries, p->entry_count);
	}
	if (err == KEEL_OK && p->compact_upto != 0) {
		err = wal_compact(wal, p->compact_upto);
	}
	if (err == KEEL_OK && p->prune_snapshots) {
		char ignored[WAL_ERRMSG_SIZE];
		(void)wal_snapshot_prune(&wal->config, wal->config.snapshots_retained, ignored);
	}
	if (err != KEEL_OK) {
		memcpy(errmsg, wal->errmsg, WAL_ERRMSG_SIZE);
	}
	return err;
}

/* Writes a group: the newest hard state, then each batch's operations, then
 * one sync (timed into *sync_ns). Returns the first error, its reason in
 * errmsg. */
static enum keel_err write_group(struct wal_writer *w, struct wal_pending *list,
				 uint64_t *sync_ns, char errmsg[WAL_ERRMSG_SIZE])
{
	struct wal *wal = w->wal;
	const struct wal_hard_state *hard_state = NULL;
	for (struct wal_pending *p = list; p != NULL; p = p->next) {
		if (p->has_hard_state) {
			hard_state = &p->hard_state;
		}
	}
	enum keel_err err = KEEL_OK;
	if (hard_state != NULL) {
		err = wal_save_hard_state(wal, hard_state);
		if (err != KEEL_OK) {
			memcpy(errmsg, wal->errmsg, WAL_ERRMSG_SIZE);
		}
	}
	for (struct wal_pending *p = list; err == KEEL_OK && p != NULL; p = p->next) {
		err = write_batch(wal, p, errmsg);
	}
	if (err == KEEL_OK) {
		uint64_t t0 = w->config.clock != NULL ? w->config.clock(w->config.clock_arg) : 0;
		err = wal_sync(wal);
		if (w->config.clock != NULL) {
			*sync_ns = w->config.clock(w->config.clock_arg) - t0;
		}
		if (err != KEEL_OK) {
			memcpy(errmsg, wal->errmsg, WAL_ERRMSG_SIZE);
		}
	}
	return err;
}

static void process_group(struct wal_writer *w, struct wal_pending *list, bool failed)
{
	char errmsg[WAL_ERRMSG_SIZE];
	errmsg[0] = '\0';
	uint64_t sync_ns = 0;
	enum keel_err err = failed ? KEEL_FAILED : write_group(w, list, &sync_ns, errmsg);
	if (err != KEEL_OK) {
		pthread_mutex_lock(&w->mutex);
		if (!w->failed) {
			w->failed = true;
			memcpy(w->errmsg, errmsg, WAL_ERRMSG_SIZE);
		}
		pthread_mutex_unlock(&w->mutex);
	}
	struct wal_completion c = {
		.result = err,
		.durable_index = wal_durable_index(w->wal),
		.durable_term = wal_durable_term(w->wal),
		.group = ++w->rounds,
		.sync_ns = sync_ns,
		.errmsg = err == KEEL_OK ? "" : w->errmsg,
	};
	uint64_t batches = 0;
	uint64_t entries = 0;
	uint64_t bytes = 0;
	while (list != NULL) {
		struct wal_pending *p = list;
		list = p->next;
		c.seq = p->seq;
		c.user_data = p->user_data;
		w->config.done(w->config.done_arg, &c);
		batches++;
		entries += p->entry_count;
		bytes += p->bytes;
		free(p);
	}
	pthread_mutex_lock(&w->mutex);
	KEEL_ASSERT(w->queued_batches >= batches);
	KEEL_ASSERT(w->queued_bytes >= bytes);
	w->queued_batches -= (uint32_t)batches;
	w->queued_bytes -= bytes;
	w->stats.batches += batches;
	w->stats.entries += entries;
	w->stats.groups += err == KEEL_OK;
	w->stats.max_group = KEEL_MAX(w->stats.max_group, batches);
	pthread_mutex_unlock(&w->mutex);
}

static void *writer_main(void *arg)
{
	struct wal_writer *w = arg;
	bool idle_work = w->config.prepare_spares;
	pthread_mutex_lock(&w->mutex);
	for (;;) {
		if (w->head == NULL && !w->stopping) {
			if (idle_work && !w->failed) {
				pthread_mutex_unlock(&w->mutex);
				bool done = true;
				enum keel_err err = wal_prepare_spare_step(
					w->wal, w->config.prepare_step_bytes, &done);
				idle_work = err == KEEL_OK && !done;
				pthread_mutex_lock(&w->mutex);
				continue;
			}
			pthread_cond_wait(&w->wake, &w->mutex);
			continue;
		}
		if (w->head == NULL) {
			break; /* stopping, and everything is completed */
		}
		struct wal_pending *list = w->head;
		w->head = NULL;
		w->tail = NULL;
		bool failed = w->failed;
		pthread_mutex_unlock(&w->mutex);
		process_group(w, list, failed);
		idle_work = w->config.prepare_spares;
		pthread_mutex_lock(&w->mutex);
	}
	pthread_mutex_unlock(&w->mutex);
	return NULL;
}

/* ---- start, stop ---- */

enum keel_err wal_writer_start(struct wal_writer *w, struct wal *wal,
			       const struct wal_writer_config *config)
{
	memset(w, 0, sizeof(*w));
	if (config->done == NULL || !wal->open) {
		return KEEL_INVAL;
	}
	w->wal = wal;
	w->config = *config;
	if (w->config.max_queued_batches == 0) {
		w->config.max_queued_batches = 1024;
	}
	if (w->config.max_queued_bytes == 0) {
		w->config.max_queued_bytes = 64ull << 20;
	}
	if (w->config.prepare_step_bytes == 0) {
		w->config.prepare_step_bytes = 1u << 20;
	}
	w->next_index = wal_last_index(wal) + 1;
	w->failed = wal_failed(wal);
	if (w->failed) {
		memcpy(w->errmsg, wal->errmsg, WAL_ERRMSG_SIZE);
	}
	pthread_mutex_init(&w->mutex, NULL);
	pthread_cond_init(&w->wake, NULL);
	if (w->config.manual) {
		w->running = true;
		return KEEL_OK;
	}
	if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
		pthread_cond_destroy(&w->wake);
		pthread_mutex_destroy(&w->mutex);
		return KEEL_IO;
	}
	w->running = true;
	return KEEL_OK;
}

void wal_writer_stop(struct wal_writer *w)
{
	if (!w->running) {
		return;
	}
	if (w->config.manual) {
		while (wal_writer_run(w) > 0) {
		}
	}
	pthread_mutex_lock(&w->mutex);
	w->stopping = true;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->mutex);
	if (!w->config.manual) {
		pthread_join(w->thread, NULL);
	}
	KEEL_ASSERT(w->head == NULL);
	KEEL_ASSERT(w->queued_batches == 0);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->mutex);
	w->running = false;
}

bool wal_writer_failed(struct wal_writer *w)
{
	pthread_mutex_lock(&w->mutex);
	bool failed = w->failed;
	pthread_mutex_unlock(&w->mutex);
	return failed;
}

void wal_writer_get_stats(struct wal_writer *w, struct wal_writer_stats *stats)
{
	pthread_mutex_lock(&w->mutex);
	*stats = w->stats;
	pthread_mutex_unlock(&w->mutex);
}

/* ---- manual mode (no thread) ---- */

/* Takes everything queued, as the storage thread does. */
static struct wal_pending *take_queued(struct wal_writer *w, bool *failed)
{
	pthread_mutex_lock(&w->mutex);
	struct wal_pending *list = w->head;
	w->head = NULL;
	w->tail = NULL;
	*failed = w->failed;
	pthread_mutex_unlock(&w->mutex);
	return list;
}

size_t wal_writer_run(struct wal_writer *w)
{
	KEEL_ASSERT(w->config.manual);
	KEEL_ASSERT(w->running);
	bool failed = false;
	struct wal_pending *list = take_queued(w, &failed);
	size_t count = 0;
	for (struct wal_pending *p = list; p != NULL; p = p->next) {
		count++;
	}
	if (list != NULL) {
		process_group(w, list, failed);
	}
	return count;
}

enum keel_err wal_writer_idle_step(struct wal_writer *w, bool *done)
{
	KEEL_ASSERT(w->config.manual);
	KEEL_ASSERT(w->head == NULL);
	*done = true;
	if (!w->config.prepare_spares || wal_writer_failed(w)) {
		return KEEL_OK;
	}
	return wal_prepare_spare_step(w->wal, w->config.prepare_step_bytes, done);
}

size_t wal_writer_drop_queued(struct wal_writer *w)
{
	KEEL_ASSERT(w->config.manual);
	bool failed = false;
	struct wal_pending *list = take_queued(w, &failed);
	size_t count = 0;
	uint64_t bytes = 0;
	while (list != NULL) {
		struct wal_pending *p = list;
		list = p->next;
		bytes += p->bytes;
		count++;
		free(p);
	}
	pthread_mutex_lock(&w->mutex);
	KEEL_ASSERT(w->queued_batches >= count);
	w->queued_batches -= (uint32_t)count;
	w->queued_bytes -= bytes;
	pthread_mutex_unlock(&w->mutex);
	return count;
}
