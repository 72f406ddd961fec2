/*
 * memdisk.c — the in-memory disk model of the simulator (see disk.h),
 * selected with --disk sim; the default is the real WAL (waldisk.c).
 *
 * Durable state: hard state, the log entries after the newest snapshot, the
 * newest and the previous snapshot (the previous one is kept so that a
 * transfer in progress can finish), and the temp file of a snapshot being
 * received. Pending state: a FIFO of submitted batches, each a copy of one
 * ready's persistent part, applied to the durable state by sync_one in
 * the order raft.h prescribes: chunks, install, hard state, entries.
 *
 * A crash drops the pending batches — or, a third of the time, keeps a
 * random prefix of their writes in order (each chunk, install, hard state,
 * each entry per batch): nothing, a torn batch, or whole batches whose fsync never
 * returned. That is what a FIFO writer dying mid-stream can leave. The temp
 * snapshot file is dropped (a restarted node starts any transfer over).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "sim/disk.h"

struct md_entry {
	struct raft_entry e;
	uint8_t *data;
};

struct md_snap {
	bool valid;
	struct raft_snapshot_meta meta;
	uint8_t *bytes;
};

struct md_chunk {
	struct raft_snapshot_chunk c;
	uint8_t *data;
};

struct md_batch {
	uint64_t id;
	bool has_hs;
	struct raft_hard_state hs;
	struct md_chunk *chunks;
	size_t n_chunks;
	bool has_install;
	struct raft_snapshot_install install;
	struct md_entry *entries;
	size_t n_entries;
};

struct memdisk {
	struct sim_disk base;
	struct raft_hard_state hs;
	struct md_entry *log;
	size_t n_log;
	size_t cap_log;
	struct raft_entry *views;
	struct md_snap snap;
	struct md_snap prev_snap;
	/* temp file of a snapshot being received */
	bool temp_valid;
	struct raft_snapshot_meta temp_meta;
	uint8_t *temp;
	size_t temp_size;
	struct md_batch *queue;
	size_t n_queue;
	size_t cap_queue;
	uint64_t torn_crashes;
};

static void *xmalloc(size_t n)
{
	void *p = malloc(n == 0 ? 1 : n);
	KEEL_ASSERT(p != NULL);
	return p;
}

static uint8_t *dup_bytes(const uint8_t *src, size_t n)
{
	uint8_t *p = xmalloc(n);
	if (n > 0) {
		memcpy(p, src, n);
	}
	return p;
}

static void entry_copy(struct md_entry *dst, const struct raft_entry *src)
{
	dst->e = *src;
	dst->data = src->size > 0 ? dup_bytes(src->data, src->size) : NULL;
	dst->e.data = dst->data;
}

static void batch_free(struct md_batch *b)
{
	for (size_t i = 0; i < b->n_chunks; i++) {
		free(b->chunks[i].data);
	}
	free(b->chunks);
	for (size_t i = 0; i < b->n_entries; i++) {
		free(b->entries[i].data);
	}
	free(b->entries);
}

static void snap_free(struct md_snap *s)
{
	free(s->bytes);
	memset(s, 0, sizeof(*s));
}

static void temp_reset(struct memdisk *d)
{
	free(d->temp);
	d->temp = NULL;
	d->temp_size = 0;
	d->temp_valid = false;
}

static enum keel_err md_submit(struct sim_disk *base, const struct raft_ready *rd)
{
	struct memdisk *d = (struct memdisk *)base;
	KEEL_ASSERT(rd->persist_id != 0);
	if (d->n_queue == d->cap_queue) {
		d->cap_queue = d->cap_queue == 0 ? 16 : d->cap_queue * 2;
		d->queue = realloc(d->queue, d->cap_queue * sizeof(*d->queue));
		KEEL_ASSERT(d->queue != NULL);
	}
	struct md_batch *b = &d->queue[d->n_queue++];
	memset(b, 0, sizeof(*b));
	b->id = rd->persist_id;
	b->has_hs = rd->hard_state_changed;
	b->hs = rd->hard_state;
	b->n_chunks = rd->n_chunks;
	b->chunks = xmalloc(sizeof(*b->chunks) * rd->n_chunks);
	for (size_t i = 0; i < rd->n_chunks; i++) {
		b->chunks[i].c = rd->chunks[i];
		b->chunks[i].data = dup_bytes(rd->chunks[i].data, rd->chunks[i].size);
		b->chunks[i].c.data = b->chunks[i].data;
	}
	if (rd->install != NULL) {
		b->has_install = true;
		b->install = *rd->install;
	}
	b->n_entries = rd->n_entries;
	b->entries = xmalloc(sizeof(*b->entries) * rd->n_entries);
	for (size_t i = 0; i < rd->n_entries; i++) {
		entry_copy(&b->entries[i], &rd->entries[i]);
	}
	return KEEL_OK;
}

static void log_truncate(struct memdisk *d, uint64_t from)
{
	while (d->n_log > 0 && d->log[d->n_log - 1].e.index >= from) {
		free(d->log[--d->n_log].data);
	}
}

static void log_drop_upto(struct memdisk *d, uint64_t index)
{
	size_t k = 0;
	for (size_t i = 0; i < d->n_log; i++) {
		if (d->log[i].e.index <= index) {
			free(d->log[i].data);
		} else {
			d->log[k++] = d->log[i];
		}
	}
	d->n_log = k;
}

/* Takes ownership of the entry's data. */
static void log_append(struct memdisk *d, struct md_entry *e)
{
	if (d->n_log > 0) {
		KEEL_ASSERT(e->e.index == d->log[d->n_log - 1].e.index + 1);
	} else if (d->snap.valid) {
		KEEL_ASSERT(e->e.index == d->snap.meta.index + 1);
	}
	if (d->n_log == d->cap_log) {
		d->cap_log = d->cap_log == 0 ? 64 : d->cap_log * 2;
		d->log = realloc(d->log, d->cap_log * sizeof(*d->log));
		KEEL_ASSERT(d->log != NULL);
	}
	d->log[d->n_log++] = *e;
	e->data = NULL;
}

static void apply_chunk(struct memdisk *d, const struct md_chunk *ch)
{
	const struct raft_snapshot_chunk *c = &ch->c;
	bool same = d->temp_valid && d->temp_meta.index == c->meta.index &&
		    d->temp_meta.term == c->meta.term;
	if (c->offset == 0 || !same) {
		temp_reset(d);
		d->temp_valid = true;
		d->temp_meta = c->meta;
	}
	size_t end = (size_t)c->offset + c->size;
	if (end > d->temp_size) {
		d->temp = realloc(d->temp, end);
		KEEL_ASSERT(d->temp != NULL);
		memset(d->temp + d->temp_size, 0, end - d->temp_size);
		d->temp_size = end;
	}
	memcpy(d->temp + c->offset, ch->data, c->size);
}

static void apply_install(struct memdisk *d, const struct raft_snapshot_install *in)
{
	/* The core installs only a snapshot it received completely. */
	KEEL_ASSERT(d->temp_valid);
	KEEL_ASSERT(d->temp_meta.index == in->meta.index);
	KEEL_ASSERT(d->temp_size == in->meta.size_bytes);
	snap_free(&d->prev_snap);
	d->prev_snap = d->snap;
	d->snap.valid = true;
	d->snap.meta = in->meta;
	d->snap.bytes = d->temp;
	d->temp = NULL;
	d->temp_size = 0;
	d->temp_valid = false;
	if (in->discard_log) {
		log_truncate(d, 0);
	} else {
		log_drop_upto(d, in->meta.index);
	}
}

static void apply_entries(struct memdisk *d, struct md_batch *b, size_t n)
{
	if (n == 0) {
		return;
	}
	log_truncate(d, b->entries[0].e.index);
	for (size_t i = 0; i < n; i++) {
		/* A snapshot saved meanwhile covers it (only a node that reports
		 * durability early, the planted bug, gets here). */
		if (d->snap.valid && b->entries[i].e.index <= d->snap.meta.index) {
			continue;
		}
		log_append(d, &b->entries[i]);
	}
}

static void queue_pop(struct memdisk *d)
{
	batch_free(&d->queue[0]);
	memmove(&d->queue[0], &d->queue[1], (d->n_queue - 1) * sizeof(*d->queue));
	d->n_queue--;
}

static enum keel_err md_sync_one(struct sim_disk *base, uint64_t *persist_id)
{
	struct memdisk *d = (struct memdisk *)base;
	*persist_id = 0;
	if (d->n_queue == 0) {
		return KEEL_OK;
	}
	struct md_batch *b = &d->queue[0];
	for (size_t i = 0; i < b->n_chunks; i++) {
		apply_chunk(d, &b->chunks[i]);
	}
	if (b->has_install) {
		apply_install(d, &b->install);
	}
	if (b->has_hs) {
		d->hs = b->hs;
	}
	apply_entries(d, b, b->n_entries);
	*persist_id = b->id;
	queue_pop(d);
	return KEEL_OK;
}

static size_t batch_ops(const struct md_batch *b)
{
	return b->n_chunks + (b->has_install ? 1 : 0) + b->n_entries + (b->has_hs ? 1 : 0);
}

/* Applies the first `cut` writes of a batch in order (each chunk, install,
 * hard state, each entry); returns how many it applied. */
static size_t apply_prefix(struct memdisk *d, struct md_batch *b, size_t cut)
{
	size_t done = 0;
	for (size_t i = 0; i < b->n_chunks && done < cut; i++) {
		apply_chunk(d, &b->chunks[i]);
		done++;
	}
	if (b->has_install && done < cut) {
		apply_install(d, &b->install);
		done++;
	}
	if (b->has_hs && done < cut) {
		d->hs = b->hs;
		done++;
	}
	if (done < cut) {
		size_t n = KEEL_MIN(b->n_entries, cut - done);
		apply_entries(d, b, n);
		done += n;
	}
	return done;
}

static bool md_crash(struct sim_disk *base, struct keel_rng *rng)
{
	struct memdisk *d = (struct memdisk *)base;
	size_t survived = 0;
	if (d->n_queue > 0 && keel_rng_chance(rng, 1, 3)) {
		/* The writes were issued in order; any prefix of them may have
		 * reached the platter before the power went: none, part of a
		 * batch (a torn write), or batches whose fsync never returned. */
		size_t total = 0;
		for (size_t i = 0; i < d->n_queue; i++) {
			total += batch_ops(&d->queue[i]);
		}
		size_t cut = (size_t)keel_rng_below(rng, total + 1);
		for (size_t i = 0; i < d->n_queue && survived < cut; i++) {
			survived += apply_prefix(d, &d->queue[i], cut - survived);
		}
	}
	while (d->n_queue > 0) {
		queue_pop(d);
	}
	temp_reset(d);
	d->torn_crashes += survived > 0;
	return survived > 0;
}

static enum keel_err md_load(struct sim_disk *base, struct sim_disk_state *out, char *why,
			     size_t why_size)
{
	struct memdisk *d = (struct memdisk *)base;
	(void)why;
	(void)why_size;
	KEEL_ASSERT(d->n_queue == 0);
	memset(out, 0, sizeof(*out));
	out->hs = d->hs;
	if (d->snap.valid) {
		out->has_snapshot = true;
		out->snapshot = d->snap.meta;
		out->snapshot_payload = d->snap.bytes;
		out->snapshot_payload_size = d->snap.meta.size_bytes;
	}
	free(d->views);
	d->views = xmalloc(sizeof(*d->views) * (d->n_log + 1));
	for (size_t i = 0; i < d->n_log; i++) {
		d->views[i] = d->log[i].e;
	}
	out->entries = d->views;
	out->n_entries = d->n_log;
	return KEEL_OK;
}

static enum keel_err md_save_snapshot(struct sim_disk *base, const struct raft_snapshot_meta *meta,
				      const uint8_t *payload, uint64_t payload_size,
				      uint64_t *transfer_size)
{
	struct memdisk *d = (struct memdisk *)base;
	KEEL_ASSERT(!d->snap.valid || meta->index > d->snap.meta.index);
	snap_free(&d->prev_snap);
	d->prev_snap = d->snap;
	d->snap.valid = true;
	d->snap.meta = *meta;
	d->snap.meta.size_bytes = payload_size;
	d->snap.bytes = dup_bytes(payload, (size_t)payload_size);
	/* Entries up to the snapshot are durable and committed: compact. */
	log_drop_upto(d, meta->index);
	*transfer_size = payload_size;
	return KEEL_OK;
}

static const uint8_t *md_snapshot_bytes(struct sim_disk *base, uint64_t index, uint64_t term,
					uint64_t *size)
{
	struct memdisk *d = (struct memdisk *)base;
	const struct md_snap *cands[2] = {&d->snap, &d->prev_snap};
	for (int i = 0; i < 2; i++) {
		const struct md_snap *s = cands[i];
		if (s->valid && s->meta.index == index && s->meta.term == term) {
			*size = s->meta.size_bytes;
			return s->bytes;
		}
	}
	return NULL;
}

static size_t md_pending(const struct sim_disk *base)
{
	const struct memdisk *d = (const struct memdisk *)base;
	return d->n_queue;
}

static bool md_failed(const struct sim_disk *base)
{
	(void)base;
	return false;
}

static const char *md_errmsg(const struct sim_disk *base)
{
	(void)base;
	return "";
}

static bool md_inject(struct sim_disk *base, enum sim_disk_fault fault, struct keel_rng *rng)
{
	(void)base;
	(void)fault;
	(void)rng;
	return false; /* the model has no I/O errors, bit flips or power cuts */
}

static void md_heal(struct sim_disk *base)
{
	(void)base;
}

static void md_stats(const struct sim_disk *base, struct sim_disk_stats *out)
{
	const struct memdisk *d = (const struct memdisk *)base;
	memset(out, 0, sizeof(*out));
	out->torn_crashes = d->torn_crashes;
}

static void md_close(struct sim_disk *base)
{
	struct memdisk *d = (struct memdisk *)base;
	while (d->n_queue > 0) {
		queue_pop(d);
	}
	free(d->queue);
	log_truncate(d, 0);
	free(d->log);
	free(d->views);
	snap_free(&d->snap);
	snap_free(&d->prev_snap);
	temp_reset(d);
	free(d);
}

static void md_describe(struct sim_disk *base, char *out, size_t size)
{
	const struct memdisk *d = (const struct memdisk *)base;
	snprintf(out, size, "model: %zu entries, snapshot %llu", d->n_log,
		 (unsigned long long)(d->snap.valid ? d->snap.meta.index : 0));
}

static const struct sim_disk_ops memdisk_ops = {
	.submit = md_submit,
	.sync_one = md_sync_one,
	.crash = md_crash,
	.load = md_load,
	.save_snapshot = md_save_snapshot,
	.snapshot_bytes = md_snapshot_bytes,
	.snapshot_payload = md_snapshot_bytes, /* the model sends the payload itself */
	.pending = md_pending,
	.failed = md_failed,
	.errmsg = md_errmsg,
	.inject = md_inject,
	.heal = md_heal,
	.stats = md_stats,
	.describe = md_describe,
	.close = md_close,
};

struct sim_disk *sim_memdisk_new(void)
{
	struct memdisk *d = calloc(1, sizeof(*d));
	KEEL_ASSERT(d != NULL);
	d->base.ops = &memdisk_ops;
	return &d->base;
}
