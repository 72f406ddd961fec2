/*
 * waldisk.c — the real write-ahead log under a simulated server (disk.h).
 *
 * Each server owns one fault-injecting in-memory file system (src/wal/vfs.h,
 * seeded from the run's seed) holding one WAL directory. The server core
 * persists through the real WAL writer (wal/writer.h) in manual mode over
 * it, exactly as `keel server` does on its storage thread
 * (sim_waldisk_writer_*; host.c builds the batches):
 *
 *   run:      the group: the newest hard state, each batch's prelude
 *             (received chunks and the install, wal/install.h), truncation,
 *             entries, one wal_sync; then, idle, a spare segment step;
 *   snapshot: the server's own, wal_snapshot_save (temp, sync, rename,
 *             dir sync, prune); the compaction behind it is a writer batch;
 *   crash:    with batches queued, half of the time the power goes inside
 *             the group's writes and sync (power_off_after 0-3 calls, so
 *             torn records really reach the file), else they are dropped
 *             unwritten; then wal_close and wal_vfs_fault_crash: only synced
 *             data is sure to survive; a torn prefix of unsynced writes, or
 *             a scramble of their sectors, may; un-fsynced directory
 *             operations may be lost;
 *   load:     wal_open (recovery) — a refusal (KEEL_CORRUPT) is passed on
 *             with the WAL's message: the server needs repair (repair.c).
 *
 * A snapshot's transfer bytes are the whole snapshot file (header with the
 * membership, then the payload), as the server sends them; the receiver
 * writes them to its temp file and the WAL verifies them at install. Reads
 * of snapshot files are checked (header, size, payload CRC) and re-read on
 * a mismatch, so a bit flipped on the way from the disk never spreads; an
 * installed snapshot stays readable until the server has loaded it.
 *
 * Every I/O error — injected EIO, a power cut, a received snapshot that
 * does not verify — makes the disk failed (sticky) until the next crash:
 * the server stops. The simulator reads a few private fields of struct wal
 * (segments, spares) only to count segment rolls, reuse and compaction for
 * its report; nothing depends on them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/buf.h"
#include "base/crc32c.h"
#include "sim/disk.h"
#include "wal/install.h"
#include "wal/snapshot.h"
#include "wal/wal.h"
#include "wal/writer.h"

#define WD_DIR "/wal"
#define WD_SNAP_CACHE 12 /* > the persist batches in flight: pinned installs fit */
#define WD_READ_ATTEMPTS 3
#define WD_MAX_SNAPSHOT_FILE (16u << 20)

/* Per-run WAL shape, the same on every node (sim_waldisk_params). */
static const uint32_t segment_sizes_kib[] = {4, 8, 16, 32, 64};

struct wd_snap {
	bool valid;
	uint64_t index;
	uint64_t term;
	uint8_t *file; /* the whole snapshot file */
	size_t size;
	size_t payload_offset;
	uint64_t used; /* LRU stamp */
	bool pinned;   /* an installed snapshot not yet loaded: kept even if pruned */
};

struct wd_shape {
	uint64_t tail_generation;
	size_t spare_count;
	size_t file_count;
};

struct waldisk {
	struct sim_disk base;
	struct keel_rng rng; /* drives the vfs: crash outcomes, flips, rates */
	struct wal_vfs vfs;
	struct wal_config config;
	struct wal wal;
	bool open;
	bool failed;
	bool power_armed;
	char errmsg[WAL_ERRMSG_SIZE];
	struct wal_recovered rec;
	bool has_rec;
	struct raft_entry *views;
	struct wd_snap cache[WD_SNAP_CACHE];
	uint64_t cache_clock;
	struct sim_disk_stats stats;
	struct wd_shape shape;
	/* The server's persistence path (sim/host.c): the real WAL writer in
	 * manual mode, between load and crash. */
	struct wal_writer writer;
	bool writer_on;
	bool writer_dead; /* crashing: completions are the dead process's */
	struct {
		wal_writer_done_fn fn;
		void *arg;
	} done; /* the host's completion callback */
};

static struct waldisk *wd_of(struct sim_disk *base)
{
	return (struct waldisk *)base;
}

static const struct waldisk *wd_of_const(const struct sim_disk *base)
{
	return (const struct waldisk *)base;
}

/* ---- errors ---- */

static bool io_trouble(const struct waldisk *d, enum keel_err err)
{
	return err == KEEL_IO || err == KEEL_NOSPACE || err == KEEL_FAILED ||
	       (d->open && wal_failed(&d->wal)) || wal_vfs_fault_powered_off(&d->vfs);
}

/* Records a failure: storage trouble makes the disk failed (sticky), any
 * other error is handed back for the simulator to report. */
static enum keel_err wd_fail(struct waldisk *d, enum keel_err err, const char *what,
			     const char *detail)
{
	KEEL_ASSERT(err != KEEL_OK);
	snprintf(d->errmsg, sizeof(d->errmsg), "%s: %s (%s)", what, detail, keel_errname(err));
	if (io_trouble(d, err)) {
		d->failed = true;
	}
	return err;
}

/* ---- statistics from the WAL's shape ---- */

static struct wd_shape shape_of(const struct wal *wal)
{
	struct wd_shape sh = {0, wal->spare_count, wal->segment_count + wal->obsolete_count};
	if (wal->segment_count > 0) {
		sh.tail_generation = wal->segments[wal->segment_count - 1].generation;
	}
	return sh;
}

static void note_shape(struct waldisk *d)
{
	if (!d->open) {
		return;
	}
	struct wd_shape now = shape_of(&d->wal);
	if (now.tail_generation != d->shape.tail_generation && now.tail_generation != 0) {
		d->stats.segment_rolls++;
		d->stats.segments_reused += now.spare_count < d->shape.spare_count;
	}
	d->shape = now;
}

static void note_compaction(struct waldisk *d, size_t files_before)
{
	if (d->open && d->wal.segment_count + d->wal.obsolete_count < files_before) {
		d->stats.compactions++;
	}
}

/* ---- snapshot files ---- */

static void cache_drop(struct wd_snap *c)
{
	free(c->file);
	memset(c, 0, sizeof(*c));
}

static void cache_clear(struct waldisk *d)
{
	for (size_t i = 0; i < WD_SNAP_CACHE; i++) {
		cache_drop(&d->cache[i]);
	}
}

static void snap_path(char out[WAL_VFS_PATH_MAX], uint64_t index, uint64_t term, bool tmp)
{
	char name[WAL_NAME_MAX];
	wal_snapshot_name(name, index, term, tmp);
	enum keel_err err = wal_vfs_join(out, WAL_VFS_PATH_MAX, WD_DIR, name);
	KEEL_ASSERT(err == KEEL_OK);
}

/* Reads a whole file; KEEL_NOENT when it is missing. */
static enum keel_err read_file(struct waldisk *d, const char *path, uint8_t **data, size_t *size)
{
	struct wal_vfs_file *f;
	enum keel_err err = wal_vfs_open(&d->vfs, path, WAL_VFS_READ_ONLY, &f);
	if (err != KEEL_OK) {
		return err;
	}
	uint64_t file_size = 0;
	err = wal_vfs_size(f, &file_size);
	if (err == KEEL_OK && file_size > WD_MAX_SNAPSHOT_FILE) {
		err = KEEL_TOOBIG;
	}
	uint8_t *buf = NULL;
	if (err == KEEL_OK) {
		buf = malloc(file_size > 0 ? (size_t)file_size : 1);
		KEEL_ASSERT(buf != NULL);
		err = wal_vfs_pread_exact(f, buf, (size_t)file_size, 0);
	}
	wal_vfs_close(f);
	if (err != KEEL_OK) {
		free(buf);
		return err;
	}
	*data = buf;
	*size = (size_t)file_size;
	return KEEL_OK;
}

/* Checks a snapshot file's header against (index, term), its size and the
 * payload's checksum; fills the payload offset. */
static bool snapshot_file_ok(const struct waldisk *d, const uint8_t *file, size_t size,
			     uint64_t index, uint64_t term, size_t *payload_offset)
{
	struct wal_snapshot_header h;
	size_t header_size = 0;
	char why[128];
	if (wal_snapshot_header_decode(file, size, d->config.max_membership_bytes, &h, &header_size,
				       why, sizeof(why)) != KEEL_OK) {
		return false;
	}
	if (h.index != index || h.term != term || header_size > size ||
	    size - header_size != h.payload_size) {
		return false;
	}
	if (keel_crc32c(0, file + header_size, (size_t)h.payload_size) != h.payload_crc) {
		return false;
	}
	*payload_offset = header_size;
	return true;
}

/* The retained snapshot (index, term), read and verified (cached while its
 * file exists). NULL when it is gone or cannot be read intact. */
static struct wd_snap *snapshot_get(struct waldisk *d, uint64_t index, uint64_t term)
{
	for (size_t i = 0; i < WD_SNAP_CACHE; i++) {
		struct wd_snap *c = &d->cache[i];
		if (c->valid && c->pinned && c->index == index && c->term == term) {
			return c; /* the node holds it open: pruning does not take it */
		}
	}
	char path[WAL_VFS_PATH_MAX];
	snap_path(path, index, term, false);
	struct wal_vfs_file *f;
	if (wal_vfs_open(&d->vfs, path, WAL_VFS_READ_ONLY, &f) != KEEL_OK) {
		for (size_t i = 0; i < WD_SNAP_CACHE; i++) {
			if (d->cache[i].valid && d->cache[i].index == index && d->cache[i].term == term) {
				cache_drop(&d->cache[i]); /* pruned */
			}
		}
		return NULL;
	}
	wal_vfs_close(f);
	struct wd_snap *victim = &d->cache[0];
	for (size_t i = 0; i < WD_SNAP_CACHE; i++) {
		struct wd_snap *c = &d->cache[i];
		if (c->valid && c->index == index && c->term == term) {
			c->used = ++d->cache_clock;
			return c;
		}
		if (!c->pinned && (!c->valid || victim->pinned ||
				   (victim->valid && c->used < victim->used))) {
			victim = c;
		}
	}
	KEEL_ASSERT(!victim->pinned);
	for (int attempt = 0; attempt < WD_READ_ATTEMPTS; attempt++) {
		uint8_t *file = NULL;
		size_t size = 0;
		size_t payload_offset = 0;
		if (read_file(d, path, &file, &size) != KEEL_OK) {
			return NULL;
		}
		if (snapshot_file_ok(d, file, size, index, term, &payload_offset)) {
			cache_drop(victim);
			*victim = (struct wd_snap){true, index, term, file, size, payload_offset,
						   ++d->cache_clock, false};
			return victim;
		}
		free(file); /* a flipped bit on the way, or damage: read again */
	}
	return NULL;
}

static const uint8_t *wd_snapshot_bytes(struct sim_disk *base, uint64_t index, uint64_t term,
					uint64_t *size)
{
	struct wd_snap *c = snapshot_get(wd_of(base), index, term);
	if (c == NULL) {
		return NULL;
	}
	*size = c->size;
	return c->file;
}

static const uint8_t *wd_snapshot_payload(struct sim_disk *base, uint64_t index, uint64_t term,
					  uint64_t *size)
{
	struct wd_snap *c = snapshot_get(wd_of(base), index, term);
	if (c == NULL) {
		return NULL;
	}
	c->pinned = false; /* loaded now (the bytes stay until evicted) */
	*size = c->size - c->payload_offset;
	return c->file + c->payload_offset;
}

/* ---- the server's persistence path: the real WAL writer (sim/host.c) ---- */

static void writer_done(void *arg, const struct wal_completion *c)
{
	struct waldisk *d = arg;
	if (c->result != KEEL_OK && !d->failed) {
		snprintf(d->errmsg, sizeof(d->errmsg), "%s", c->errmsg);
		d->failed = true;
	}
	if (!d->writer_dead) {
		d->done.fn(d->done.arg, c);
	}
}

enum keel_err sim_waldisk_writer_start(struct sim_disk *base, wal_writer_done_fn done, void *arg)
{
	struct waldisk *d = wd_of(base);
	KEEL_ASSERT(d->open);
	KEEL_ASSERT(!d->writer_on);
	d->done.fn = done;
	d->done.arg = arg;
	d->writer_dead = false;
	/* No back-pressure, as in the server (node/storage.c): the Raft core
	 * bounds what it hands out. */
	struct wal_writer_config wc = {
		.done = writer_done,
		.done_arg = d,
		.max_queued_batches = UINT32_MAX,
		.max_queued_bytes = UINT64_MAX,
		.prepare_spares = true,
		.prepare_step_bytes = 16u << 10,
		.manual = true,
	};
	enum keel_err err = wal_writer_start(&d->writer, &d->wal, &wc);
	if (err == KEEL_OK) {
		d->writer_on = true;
	}
	return err;
}

enum keel_err sim_waldisk_writer_submit(struct sim_disk *base, const struct wal_batch *batch)
{
	struct waldisk *d = wd_of(base);
	KEEL_ASSERT(d->writer_on);
	uint64_t seq = 0;
	enum keel_err err = wal_writer_submit(&d->writer, batch, &seq);
	if (err == KEEL_FAILED) {
		d->failed = true;
	}
	return err;
}

size_t sim_waldisk_writer_run(struct sim_disk *base)
{
	struct waldisk *d = wd_of(base);
	KEEL_ASSERT(d->writer_on);
	size_t files = d->wal.segment_count + d->wal.obsolete_count;
	size_t count = wal_writer_run(&d->writer);
	note_shape(d);
	note_compaction(d, files);
	if (count > 0 && d->writer.queued_batches == 0 && !d->failed) {
		/* Idle: a step of spare preparation, as the storage thread does. */
		bool done = true;
		(void)wal_writer_idle_step(&d->writer, &done);
	}
	if (wal_vfs_fault_powered_off(&d->vfs) || wal_writer_failed(&d->writer)) {
		if (!d->failed) {
			wd_fail(d, KEEL_IO, "storage", "the power went off");
		}
	}
	return count;
}

static void bootstrap_done(void *arg, const struct wal_completion *c)
{
	*(enum keel_err *)arg = c->result;
}

enum keel_err sim_waldisk_bootstrap(struct sim_disk *base, const struct raft_entry *entry)
{
	struct waldisk *d = wd_of(base);
	enum keel_err result = KEEL_SHUTDOWN; /* no completion */
	enum keel_err err = sim_waldisk_writer_start(base, bootstrap_done, &result);
	if (err != KEEL_OK) {
		return err;
	}
	struct wal_hard_state hs = {.term = 1};
	struct wal_entry e = {entry->index, entry->term, entry->type, entry->size, entry->data};
	struct wal_batch b = {.hard_state = &hs, .entries = &e, .entry_count = 1};
	err = sim_waldisk_writer_submit(base, &b);
	if (err == KEEL_OK) {
		(void)sim_waldisk_writer_run(base);
		err = result;
	}
	wal_writer_stop(&d->writer);
	d->writer_on = false;
	return err;
}

/* A crash with the writer on: half of the time with batches queued, the
 * power goes while the group is written and synced (some writes reach the
 * file); otherwise nothing queued was written. Returns whether batches
 * were in flight. */
static bool writer_crash(struct waldisk *d, struct keel_rng *rng)
{
	bool in_flight = d->writer.queued_batches > 0;
	d->writer_dead = true;
	if (in_flight && !d->failed && keel_rng_chance(rng, 1, 2)) {
		wal_vfs_fault_power_off_after(&d->vfs, keel_rng_below(rng, 4));
		(void)wal_writer_run(&d->writer);
	}
	(void)wal_writer_drop_queued(&d->writer);
	wal_writer_stop(&d->writer);
	d->writer_on = false;
	return in_flight;
}

/* The prelude of a batch carrying received snapshot chunks and an install
 * (wal/install.h, the server's code); the installed file is kept readable
 * until the node loads it, like a file the server holds open. */
enum keel_err sim_waldisk_receive(struct sim_disk *base, struct wal *wal,
				  const struct raft_snapshot_chunk *chunks, size_t n_chunks,
				  const struct raft_snapshot_install *install,
				  char *errmsg)
{
	struct waldisk *d = wd_of(base);
	enum keel_err err = KEEL_OK;
	for (size_t i = 0; err == KEEL_OK && i < n_chunks; i++) {
		const struct raft_snapshot_chunk *c = &chunks[i];
		err = wal_install_write_chunk(&d->config, c->meta.index, c->meta.term, c->offset,
					      c->data, c->size, errmsg);
	}
	if (err != KEEL_OK || install == NULL) {
		return err;
	}
	char name[WAL_NAME_MAX];
	size_t files = d->wal.segment_count + d->wal.obsolete_count;
	err = wal_install_snapshot(wal, install->meta.index, install->meta.term,
				   install->discard_log, name, errmsg);
	note_shape(d);
	note_compaction(d, files);
	if (err != KEEL_OK) {
		return err;
	}
	struct wd_snap *c = snapshot_get(d, install->meta.index, install->meta.term);
	if (c == NULL) {
		snprintf(errmsg, WAL_ERRMSG_SIZE, "install snapshot: cannot read %s back", name);
		return KEEL_IO;
	}
	c->pinned = true;
	return KEEL_OK;
}

/* A snapshot the node took, written durably (temp, sync, rename, dir
 * sync, prune) as the server's snapshotter does; the log is compacted
 * behind it by a writer batch (compact_upto), not here. */
enum keel_err sim_waldisk_snapshot_file(struct sim_disk *base,
					const struct raft_snapshot_meta *meta,
					const uint8_t *payload, uint64_t payload_size,
					uint64_t *transfer_size)
{
	struct waldisk *d = wd_of(base);
	KEEL_ASSERT(d->open);
	if (d->failed) {
		return KEEL_FAILED;
	}
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, d->config.max_membership_bytes);
	raft_config_encode(&meta->config, &w);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	char msg[WAL_ERRMSG_SIZE];
	enum keel_err err = wal_snapshot_save(&d->config, meta->index, meta->term, w.data,
					      (uint32_t)w.size, payload, payload_size, msg);
	*transfer_size = WAL_SNAPSHOT_FIXED_SIZE + w.size + payload_size;
	keel_wbuf_free(&w);
	if (err != KEEL_OK) {
		return wd_fail(d, err, "save snapshot", msg);
	}
	return KEEL_OK;
}

/* ---- crash and recovery ---- */

static void cancel_scripts(struct waldisk *d)
{
	for (int op = 0; op < WAL_VFS_OP_COUNT; op++) {
		wal_vfs_fault_fail_nth(&d->vfs, (enum wal_vfs_op)op, 0, KEEL_IO);
		wal_vfs_fault_set_fail_rate(&d->vfs, (enum wal_vfs_op)op, 0, 0);
	}
}

static void release_recovered(struct waldisk *d)
{
	if (d->has_rec) {
		wal_recovered_free(&d->rec);
		d->has_rec = false;
	}
}

static bool wd_crash(struct sim_disk *base, struct keel_rng *rng)
{
	struct waldisk *d = wd_of(base);
	bool in_flight = d->writer_on && writer_crash(d, rng);
	if (d->open) {
		wal_close(&d->wal);
		d->open = false;
	}
	release_recovered(d);
	static const enum wal_vfs_crash_mode modes[] = {
		WAL_VFS_CRASH_DROP_UNSYNCED, WAL_VFS_CRASH_TORN, WAL_VFS_CRASH_TORN,
		WAL_VFS_CRASH_SCRAMBLE};
	struct wal_vfs_crash crash;
	crash.mode = modes[keel_rng_below(rng, KEEL_ARRAY_SIZE(modes))];
	crash.lose_dir_ops = keel_rng_chance(rng, 1, 2); /* (not in one initializer: unsequenced) */
	wal_vfs_fault_crash(&d->vfs, &crash);
	cancel_scripts(d);
	d->power_armed = false;
	d->failed = false;
	cache_clear(d);
	d->stats.torn_crashes += in_flight && crash.mode != WAL_VFS_CRASH_DROP_UNSYNCED;
	return in_flight;
}

/* The newest snapshot recovery kept, with its payload. */
static enum keel_err load_snapshot(struct waldisk *d, struct sim_disk_state *out, char *why,
				   size_t why_size)
{
	const struct wal_snapshot_meta *m = &d->rec.snapshot;
	out->has_snapshot = true;
	out->snapshot.index = m->index;
	out->snapshot.term = m->term;
	if (raft_config_decode(m->membership, m->membership_size, &out->snapshot.config) !=
	    KEEL_OK) {
		snprintf(why, why_size, "snapshot %s: its membership does not decode", m->name);
		return KEEL_CORRUPT;
	}
	struct wd_snap *c = snapshot_get(d, m->index, m->term);
	if (c == NULL) {
		snprintf(why, why_size, "snapshot %s cannot be read back intact", m->name);
		return KEEL_CORRUPT;
	}
	out->snapshot.size_bytes = c->size;
	out->snapshot_payload = c->file + c->payload_offset;
	out->snapshot_payload_size = c->size - c->payload_offset;
	return KEEL_OK;
}

static enum keel_err wd_load(struct sim_disk *base, struct sim_disk_state *out, char *why,
			     size_t why_size)
{
	struct waldisk *d = wd_of(base);
	KEEL_ASSERT(!d->writer_on);
	memset(out, 0, sizeof(*out));
	if (d->open) { /* a clean restart */
		wal_close(&d->wal);
		d->open = false;
	}
	release_recovered(d);
	cache_clear(d);
	d->failed = false;
	enum keel_err err = wal_open(&d->wal, &d->config, &d->rec);
	if (err != KEEL_OK) {
		snprintf(why, why_size, "%s", d->wal.errmsg);
		return err;
	}
	d->open = true;
	d->has_rec = true;
	d->stats.repairs_at_start += d->rec.notes[0] != '\0';
	out->hs.term = d->rec.hard_state.term;
	out->hs.vote = d->rec.hard_state.voted_for;
	free(d->views);
	d->views = calloc(d->rec.entry_count + 1, sizeof(*d->views));
	KEEL_ASSERT(d->views != NULL);
	for (size_t i = 0; i < d->rec.entry_count; i++) {
		const struct wal_entry *e = &d->rec.entries[i];
		d->views[i] = (struct raft_entry){e->term, e->index, e->type, e->size, e->data};
	}
	out->entries = d->views;
	out->n_entries = d->rec.entry_count;
	if (d->rec.has_snapshot) {
		err = load_snapshot(d, out, why, why_size);
		if (err != KEEL_OK) {
			wal_close(&d->wal);
			d->open = false;
			return err;
		}
	}
	d->shape = shape_of(&d->wal);
	return KEEL_OK;
}

/* ---- faults ---- */

struct rot_pick {
	struct keel_rng *rng;
	uint64_t tail_generation;
	char names[64][WAL_NAME_MAX];
	size_t count;
};

static void list_for_rot(void *arg, const char *name)
{
	struct rot_pick *p = arg;
	uint64_t a = 0, b = 0;
	if (wal_parse_file_name(name, &a, &b) == WAL_FILE_SEGMENT && a > p->tail_generation) {
		p->tail_generation = a;
	}
	if (p->count < KEEL_ARRAY_SIZE(p->names)) {
		snprintf(p->names[p->count++], WAL_NAME_MAX, "%s", name);
	}
}

/* The length of a file up to its last nonzero byte (preallocated segments
 * are mostly zeros; rot there is harmless and teaches nothing). */
static uint64_t used_length(struct waldisk *d, const char *path)
{
	uint8_t *data = NULL;
	size_t size = 0;
	if (read_file(d, path, &data, &size) != KEEL_OK) {
		return 0;
	}
	while (size > 0 && data[size - 1] == 0) {
		size--;
	}
	free(data);
	return size;
}

/* Flips one stored bit in the used part of a file other than the tail
 * segment: damage in the tail's last sync batch looks exactly like a torn
 * write and is cut (the documented limit of a log without per-batch commit
 * records, docs/storage-format.md), so it is left out; everywhere else the
 * WAL must either not care or refuse to start. */
static bool bit_rot(struct waldisk *d, struct keel_rng *rng)
{
	if (d->open) {
		return false;
	}
	struct rot_pick *p = calloc(1, sizeof(*p));
	KEEL_ASSERT(p != NULL);
	p->rng = rng;
	bool done = false;
	if (wal_vfs_list(&d->vfs, WD_DIR, list_for_rot, p) == KEEL_OK && p->count > 0) {
		for (int attempt = 0; attempt < 8 && !done; attempt++) {
			const char *name = p->names[keel_rng_below(rng, p->count)];
			uint64_t a = 0, b = 0;
			if (wal_parse_file_name(name, &a, &b) == WAL_FILE_SEGMENT &&
			    a == p->tail_generation) {
				continue;
			}
			char path[WAL_VFS_PATH_MAX];
			KEEL_ASSERT(wal_vfs_join(path, sizeof(path), WD_DIR, name) == KEEL_OK);
			uint64_t used = used_length(d, path);
			if (used == 0) {
				continue;
			}
			uint8_t mask = (uint8_t)(1u << keel_rng_below(rng, 8));
			done = wal_vfs_fault_corrupt(&d->vfs, path, keel_rng_below(rng, used), mask) ==
			       KEEL_OK;
		}
	}
	free(p);
	return done;
}

static bool inject_eio(struct waldisk *d, struct keel_rng *rng)
{
	static const enum wal_vfs_op eio_ops[] = {WAL_VFS_OP_SYNC, WAL_VFS_OP_SYNC, WAL_VFS_OP_WRITE,
						  WAL_VFS_OP_SYNC_DIR, WAL_VFS_OP_RENAME};
	if (!d->open || d->failed) {
		return false;
	}
	/* Separate statements: the order in which a call's arguments are
	 * evaluated is unspecified, and every compiler must draw alike. */
	enum wal_vfs_op op = eio_ops[keel_rng_below(rng, KEEL_ARRAY_SIZE(eio_ops))];
	uint64_t nth = keel_rng_between(rng, 1, 12);
	wal_vfs_fault_fail_nth(&d->vfs, op, nth, KEEL_IO);
	return true;
}

static bool wd_inject(struct sim_disk *base, enum sim_disk_fault fault, struct keel_rng *rng)
{
	struct waldisk *d = wd_of(base);
	switch (fault) {
	case SIM_DISK_EIO_SOON:
		return inject_eio(d, rng);
	case SIM_DISK_POWER_CUT_SOON:
		if (!d->open || d->failed || d->power_armed) {
			return false;
		}
		wal_vfs_fault_power_off_after(&d->vfs, keel_rng_below(rng, 40));
		d->power_armed = true;
		return true;
	case SIM_DISK_READ_FLIP:
		/* One flip, within the next few reads: a re-read sees the true
		 * bytes, so the WAL must never call it damage. (A steady flip
		 * rate can flip both reads of a check, and recovery then renames
		 * an intact snapshot to .corrupt for good.) */
		wal_vfs_fault_flip_nth_read(&d->vfs, keel_rng_between(rng, 1, 12));
		return true;
	case SIM_DISK_BIT_ROT:
		return bit_rot(d, rng);
	}
	return false;
}

static void wd_heal(struct sim_disk *base)
{
	struct waldisk *d = wd_of(base);
	cancel_scripts(d);
	wal_vfs_fault_set_read_flip_rate(&d->vfs, 0, 0);
	wal_vfs_fault_flip_nth_read(&d->vfs, 0);
	if (d->power_armed && !wal_vfs_fault_powered_off(&d->vfs)) {
		/* Disarm: a budget that never runs out. */
		wal_vfs_fault_power_off_after(&d->vfs, UINT64_MAX);
	}
}

/* ---- the rest of the table ---- */

static bool wd_failed(const struct sim_disk *base)
{
	return wd_of_const(base)->failed;
}

static const char *wd_errmsg(const struct sim_disk *base)
{
	return wd_of_const(base)->errmsg;
}

static void wd_stats(const struct sim_disk *base, struct sim_disk_stats *out)
{
	const struct waldisk *d = wd_of_const(base);
	*out = d->stats;
	struct wal_vfs_fault_stats vs;
	wal_vfs_fault_get_stats(&d->vfs, &vs);
	out->injected_failures = vs.injected_failures;
	out->read_flips = vs.read_bit_flips;
}

static void wd_close(struct sim_disk *base)
{
	struct waldisk *d = wd_of(base);
	if (d->writer_on) {
		d->writer_dead = true;
		wal_writer_drop_queued(&d->writer);
		wal_writer_stop(&d->writer);
		d->writer_on = false;
	}
	if (d->open) {
		wal_close(&d->wal);
	}
	release_recovered(d);
	cache_clear(d);
	wal_vfs_fault_close(&d->vfs);
	free(d->views);
	free(d);
}

struct describe_ctx {
	struct waldisk *d;
	char *out;
	size_t size;
	size_t used;
};

static void describe_one(void *arg, const char *name)
{
	struct describe_ctx *c = arg;
	char path[WAL_VFS_PATH_MAX];
	uint64_t size = 0, durable = 0;
	if (wal_vfs_join(path, sizeof(path), WD_DIR, name) != KEEL_OK) {
		return;
	}
	struct wal_vfs_file *f;
	if (wal_vfs_open(&c->d->vfs, path, WAL_VFS_READ_ONLY, &f) == KEEL_OK) {
		wal_vfs_size(f, &size);
		wal_vfs_close(f);
	}
	wal_vfs_fault_durable_size(&c->d->vfs, path, &durable);
	if (c->used < c->size) {
		int n = snprintf(c->out + c->used, c->size - c->used, "%s%s(%llu/%llu)",
				 c->used > 0 ? " " : "", name, (unsigned long long)size,
				 (unsigned long long)durable);
		c->used += n > 0 ? (size_t)n : 0;
	}
}

static void wd_describe(struct sim_disk *base, char *out, size_t size)
{
	struct describe_ctx c = {wd_of(base), out, size, 0};
	out[0] = '\0';
	wal_vfs_list(&c.d->vfs, WD_DIR, describe_one, &c);
}

static const struct sim_disk_ops waldisk_ops = {
	.load = wd_load,
	.crash = wd_crash,
	.snapshot_bytes = wd_snapshot_bytes,
	.snapshot_payload = wd_snapshot_payload,
	.failed = wd_failed,
	.errmsg = wd_errmsg,
	.inject = wd_inject,
	.heal = wd_heal,
	.stats = wd_stats,
	.describe = wd_describe,
	.close = wd_close,
};

static void set_segment_size(struct sim_wal_params *out, uint64_t segment_size_bytes)
{
	out->segment_size_bytes = segment_size_bytes;
	/* Room for one record of the largest entry in a segment. */
	out->max_entry_bytes = (uint32_t)(out->segment_size_bytes - WAL_SEGMENT_HEADER_SIZE -
					  WAL_RECORD_HEADER_SIZE - WAL_RECORD_ALIGN);
}

void sim_waldisk_params(struct keel_rng *rng, struct sim_wal_params *out)
{
	set_segment_size(out, (uint64_t)segment_sizes_kib[keel_rng_below(
					  rng, KEEL_ARRAY_SIZE(segment_sizes_kib))]
				      << 10);
}

void sim_waldisk_params_at_least(struct sim_wal_params *p, uint64_t segment_size_bytes)
{
	if (p->segment_size_bytes < segment_size_bytes) {
		set_segment_size(p, segment_size_bytes);
	}
}

struct sim_disk *sim_waldisk_new(uint64_t seed, const struct sim_wal_params *params)
{
	struct waldisk *d = calloc(1, sizeof(*d));
	KEEL_ASSERT(d != NULL);
	d->base.ops = &waldisk_ops;
	keel_rng_seed(&d->rng, seed);
	struct wal_vfs_fault_config fc = {.rng = &d->rng, .max_file_size_bytes = 0};
	enum keel_err err = wal_vfs_fault_init(&d->vfs, &fc);
	KEEL_ASSERT(err == KEEL_OK);
	wal_config_init(&d->config, &d->vfs, WD_DIR);
	d->config.segment_size_bytes = params->segment_size_bytes;
	d->config.max_entry_size_bytes = params->max_entry_bytes;
	static const enum wal_prealloc prealloc[] = {WAL_PREALLOC_ZERO_FILL, WAL_PREALLOC_ZERO_FILL,
						     WAL_PREALLOC_FALLOCATE, WAL_PREALLOC_NONE};
	d->config.prealloc = prealloc[keel_rng_below(&d->rng, KEEL_ARRAY_SIZE(prealloc))];
	d->config.spare_segments = (uint32_t)keel_rng_between(&d->rng, 1, 3);
	d->config.write_buffer_bytes = (uint32_t)keel_rng_between(&d->rng, 4096, 16384);
	d->config.snapshots_retained = (uint32_t)keel_rng_between(&d->rng, 1, 3);
	char msg[WAL_ERRMSG_SIZE];
	err = wal_config_check(&d->config, msg);
	KEEL_ASSERT(err == KEEL_OK);
	return &d->base;
}
