/*
 * node.c — one simulated server: the glue between a Raft core, its disk,
 * its state machine and the clients connected to it. This is the code the
 * real node (src/node) does with libuv and a storage thread; the rules are
 * the same:
 *
 *   - every ready's persist batch goes to the disk; raft_persisted(id) only
 *     after the disk says the batch is durable (a FIFO of completions);
 *   - messages are sent at once (the core holds back what must wait);
 *   - snapshot chunk messages get their bytes here, from the disk;
 *   - committed entries are applied in order, exactly once; a write's client
 *     gets its answer when the entry is applied on this server;
 *   - a read is served once applied >= its read index;
 *   - a snapshot install is loaded into the state machine when its batch is
 *     durable, before the core hears raft_persisted for that batch.
 *
 * KEEL_PLANT_BUG_ACK_BEFORE_PERSIST breaks the first rule: batches are
 * reported durable as soon as they are submitted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"
#include "sim/sim.h"

#define SIM_TICK_MS 10

void sim_node_submitted_push(struct sim_node *n, const struct sim_submitted *sub)
{
	if (n->n_submitted == n->cap_submitted) {
		n->cap_submitted = n->cap_submitted == 0 ? 16 : n->cap_submitted * 2;
		n->submitted = realloc(n->submitted, n->cap_submitted * sizeof(*n->submitted));
		KEEL_ASSERT(n->submitted != NULL);
	}
	n->submitted[n->n_submitted++] = *sub;
}

void sim_node_submitted_pop(struct sim_node *n)
{
	memmove(&n->submitted[0], &n->submitted[1], (n->n_submitted - 1) * sizeof(*n->submitted));
	n->n_submitted--;
}

void sim_disk_stats_add(struct sim_disk_stats *sum, const struct sim_disk_stats *add)
{
	sum->segment_rolls += add->segment_rolls;
	sum->segments_reused += add->segments_reused;
	sum->compactions += add->compactions;
	sum->torn_crashes += add->torn_crashes;
	sum->injected_failures += add->injected_failures;
	sum->read_flips += add->read_flips;
	sum->repairs_at_start += add->repairs_at_start;
}

uint64_t sim_node_state_hash(const struct sim_node *n)
{
	return n->host != NULL ? sim_host_state_hash(n) : sim_sm_hash(&n->sm);
}

void sim_node_free(struct sim_node *n)
{
	sim_host_close(n);
	if (n->r != NULL) {
		raft_close(n->r);
		n->r = NULL;
	}
	if (n->disk != NULL) {
		n->disk->ops->close(n->disk);
		n->disk = NULL;
	}
	sim_sm_free(&n->sm);
	free(n->writes);
	free(n->reads);
	n->writes = NULL;
	n->reads = NULL;
	free(n->submitted);
	n->submitted = NULL;
}

uint64_t sim_local_time(const struct sim *s, const struct sim_node *n)
{
	return n->clock_base + (uint64_t)((double)s->now * n->clock_rate);
}

static void schedule_tick(struct sim *s, struct sim_node *n)
{
	sim_schedule(s, s->now + SIM_TICK_MS, SIM_EV_TICK, n->id, 0, NULL);
}

static struct sim_disk *new_disk(struct sim *s)
{
	if (s->cfg.disk == SIM_DISK_MODEL) {
		return sim_memdisk_new();
	}
	return sim_waldisk_new(keel_rng_next(&s->rng), &s->wal_params);
}

/* Writes what a brand-new member of the initial cluster stores. */
static void write_bootstrap(struct sim *s, struct sim_node *n)
{
	struct raft_config config;
	memset(&config, 0, sizeof(config));
	for (uint32_t i = 1; i <= s->cfg.nodes; i++) {
		config.members[config.count].id = i;
		config.members[config.count].role = RAFT_VOTER;
		config.count++;
	}
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 4096);
	struct raft_entry boot;
	enum keel_err err = raft_bootstrap_entry(&config, &w, &boot);
	KEEL_ASSERT(err == KEEL_OK);
	struct raft_ready rd;
	memset(&rd, 0, sizeof(rd));
	rd.persist_id = 1;
	rd.entries = &boot;
	rd.n_entries = 1;
	rd.hard_state_changed = true;
	rd.hard_state.term = 1;
	struct sim_disk_state st;
	char why[256];
	uint64_t id = 0;
	err = n->disk->ops->load(n->disk, &st, why, sizeof(why));
	if (err == KEEL_OK) {
		err = n->disk->ops->submit(n->disk, &rd);
	}
	if (err == KEEL_OK) {
		err = n->disk->ops->sync_one(n->disk, &id);
	}
	KEEL_ASSERT(err == KEEL_OK && id == 1); /* no faults are armed yet */
	keel_wbuf_free(&w);
}

void sim_node_boot(struct sim *s, struct sim_node *n, bool member_of_initial)
{
	n->disk = new_disk(s);
	if (member_of_initial) {
		write_bootstrap(s, n);
	}
	sim_node_start(s, n);
}

/* The node's storage refused to start: once more later (a bit flipped on
 * the way from the disk is gone then), after that the node needs repair. */
static void refused_to_start(struct sim *s, struct sim_node *n, enum keel_err err,
			     const char *why)
{
	n->refusals++;
	s->stat_refusals++;
	sim_tracef(s, "node %llu: refuses to start (%s): %.90s", (unsigned long long)n->id,
		   keel_errname(err), why);
	if (s->cfg.verbose) {
		char files[1024];
		n->disk->ops->describe(n->disk, files, sizeof(files));
		printf("  %s\n  files (size/durable): %s\n", why, files);
	}
	/* Crashes, torn and scrambled writes, lost directory operations, EIO
	 * and single flipped reads are all the WAL must ride out: only bit
	 * rot may make it refuse. */
	if (!n->rotted || (err != KEEL_CORRUPT && err != KEEL_IO)) {
		sim_fail(s, "node %llu: storage recovery failed%s: %s: %s", (unsigned long long)n->id,
			 n->rotted ? "" : " without bit rot", keel_errname(err), why);
		return;
	}
	if (n->refusals < 2) {
		sim_schedule(s, s->now + s->opts.election_timeout_ms, SIM_EV_RESTART, n->id, 0, NULL);
		return;
	}
	n->broken = true;
	sim_repair_needed(s, n);
}

/* A node's core is restored: it runs. */
static void started(struct sim *s, struct sim_node *n, uint64_t snapshot_index)
{
	n->up = true;
	n->paused = false;
	n->stop_pending = false;
	n->disk_busy_until = s->now;
	n->last_commit = raft_commit_index(n->r);
	n->last_role = RAFT_FOLLOWER;
	n->last_leader = 0;
	n->lead_term = 0;
	n->n_submitted = 0;
	n->last_local = sim_local_time(s, n);
	if (n->host != NULL) {
		sim_host_tick(s, n, n->last_local);
	} else {
		raft_tick(n->r, n->last_local);
	}
	schedule_tick(s, n);
	sim_tracef(s, "node %llu: start (incarnation %llu, last %llu, snapshot %llu)",
		   (unsigned long long)n->id, (unsigned long long)n->incarnation,
		   (unsigned long long)raft_last_index(n->r), (unsigned long long)snapshot_index);
}

void sim_node_start(struct sim *s, struct sim_node *n)
{
	KEEL_ASSERT(!n->up);
	if (n->broken || n->retired) {
		return; /* waits for repair, or was replaced */
	}
	n->incarnation++;
	struct sim_disk_state st;
	char why[256] = "";
	enum keel_err err = n->disk->ops->load(n->disk, &st, why, sizeof(why));
	if (err != KEEL_OK) {
		refused_to_start(s, n, err, why);
		return;
	}
	n->refusals = 0;
	if (s->rot_node == n->id) {
		s->rot_node = 0; /* the rot did no harm that recovery could see */
	}
	if (s->core_mode) {
		if (sim_host_start(s, n, &st)) {
			started(s, n, st.has_snapshot ? st.snapshot.index : 0);
		}
		return;
	}
	struct raft_options o = s->opts;
	o.id = n->id;
	keel_rng_seed(&o.rng, keel_rng_next(&s->rng));
	err = raft_init(&n->r, &o);
	KEEL_ASSERT(err == KEEL_OK);
	err = raft_restore(n->r, &st.hs, st.has_snapshot ? &st.snapshot : NULL, st.entries,
			   st.n_entries);
	if (err != KEEL_OK) {
		sim_fail(s, "node %llu: restore from its disk failed: %s", (unsigned long long)n->id,
			 keel_errname(err));
		raft_close(n->r);
		n->r = NULL;
		return;
	}
	sim_sm_reset(s, &n->sm);
	if (st.has_snapshot) {
		bool ok = sim_sm_load(s, &n->sm, st.snapshot_payload, st.snapshot_payload_size);
		KEEL_ASSERT(ok);
		KEEL_ASSERT(n->sm.applied == st.snapshot.index);
		sim_check_snapshot_loaded(s, n);
		n->last_snapshot_index = st.snapshot.index;
	} else {
		n->last_snapshot_index = 0;
	}
	started(s, n, st.has_snapshot ? st.snapshot.index : 0);
}

void sim_node_crash(struct sim *s, struct sim_node *n)
{
	if (!n->up) {
		return;
	}
	bool torn = n->disk->ops->crash(n->disk, &s->rng);
	s->stat_crashes++;
	s->stat_torn += torn;
	sim_ctl_on_node_down(s, n);
	if (n->host != NULL) {
		sim_host_close(n);
	} else {
		raft_close(n->r);
	}
	n->r = NULL;
	n->up = false;
	n->paused = false;
	n->incarnation++; /* its ticks and disk completions are void */
	sim_clients_on_node_crash(s, n);
	n->n_writes = 0;
	n->n_reads = 0;
	n->n_submitted = 0;
	n->stop_pending = false;
	sim_tracef(s, "node %llu: crash%s", (unsigned long long)n->id,
		   torn ? " (unsynced writes in flight)" : "");
}

/* After a storage call failed: a failed disk stops the node (the server
 * stops serving and restarts, which runs recovery); any other error means
 * the node asked its storage for something inconsistent. */
static void storage_error(struct sim *s, struct sim_node *n, enum keel_err err, const char *what)
{
	if (n->disk->ops->failed(n->disk)) {
		if (!n->stop_pending) {
			sim_tracef(s, "node %llu: storage failed in %s: %.100s", (unsigned long long)n->id,
				   what, n->disk->ops->errmsg(n->disk));
		}
		n->stop_pending = true;
		return;
	}
	sim_fail(s, "node %llu: storage refused %s: %s: %s", (unsigned long long)n->id, what,
		 keel_errname(err), n->disk->ops->errmsg(n->disk));
}

void sim_node_stop_after_failure(struct sim *s, struct sim_node *n)
{
	s->stat_storage_stops++;
	sim_node_crash(s, n);
	sim_schedule(s, s->now + keel_rng_between(&s->rng, s->opts.election_timeout_ms / 2,
						  3 * s->opts.election_timeout_ms),
		     SIM_EV_RESTART, n->id, 0, NULL);
}

static void send_msg(struct sim *s, struct sim_node *n, const struct raft_msg *m,
		     uint64_t *failed_peer)
{
	if (m->type != RAFT_MSG_SNAPSHOT) {
		sim_net_send(s, m);
		return;
	}
	/* The core asked for a chunk: read it from our retained snapshot. */
	uint64_t size = 0;
	const uint8_t *bytes = n->disk->ops->snapshot_bytes(n->disk, m->snapshot.meta.index,
							      m->snapshot.meta.term, &size);
	if (bytes == NULL || m->snapshot.offset + m->snapshot.size > size) {
		*failed_peer = m->to;
		return;
	}
	KEEL_ASSERT(size == m->snapshot.meta.size_bytes);
	struct raft_msg copy = *m;
	copy.snapshot.data = bytes + m->snapshot.offset;
	sim_net_send(s, &copy);
}

void sim_node_complete_writes(struct sim *s, struct sim_node *n, const struct raft_entry *e,
			      bool applied_ok)
{
	size_t k = 0;
	for (size_t i = 0; i < n->n_writes; i++) {
		struct sim_pending_write *w = &n->writes[i];
		if (w->index != e->index) {
			n->writes[k++] = *w;
			continue;
		}
		/* Same index, same term: our entry (apply decides whether it
		 * succeeded). Another term: it was lost. */
		bool ok = w->term == e->term && applied_ok;
		sim_hist_complete(s, w->op, ok ? SIM_OP_OK : SIM_OP_FAILED, 0);
	}
	n->n_writes = k;
}

static void apply_committed(struct sim *s, struct sim_node *n, const struct raft_ready *rd)
{
	for (size_t i = 0; i < rd->n_committed; i++) {
		const struct raft_entry *e = &rd->committed[i];
		if (e->index != n->sm.applied + 1) {
			sim_fail(s, "apply order: node %llu got entry %llu after %llu",
				 (unsigned long long)n->id, (unsigned long long)e->index,
				 (unsigned long long)n->sm.applied);
			return;
		}
		sim_sm_apply(s, n, e);
		sim_check_applied(s, n, e);
		sim_node_complete_writes(s, n, e, true);
	}
}

void sim_node_take_reads(struct sim *s, struct sim_node *n, const struct raft_read_result *reads,
			 size_t count)
{
	for (size_t i = 0; i < count; i++) {
		const struct raft_read_result *res = &reads[i];
		for (size_t j = 0; j < n->n_reads; j++) {
			struct sim_pending_read *p = &n->reads[j];
			if (p->ctx != res->ctx) {
				continue;
			}
			if (res->err == KEEL_OK) {
				KEEL_ASSERT(res->index > 0);
				p->index = res->index;
				s->hist[p->op].index = res->index;
			} else {
				sim_hist_complete(s, p->op, SIM_OP_FAILED, 0);
				n->reads[j] = n->reads[--n->n_reads];
			}
			break;
		}
	}
}

static void serve_reads(struct sim *s, struct sim_node *n)
{
	size_t k = 0;
	for (size_t i = 0; i < n->n_reads; i++) {
		struct sim_pending_read *p = &n->reads[i];
		if (p->index != 0 && n->sm.applied >= p->index) {
			uint32_t key = s->hist[p->op].key;
			sim_hist_complete(s, p->op, SIM_OP_OK, n->sm.values[key]);
		} else {
			n->reads[k++] = *p;
		}
	}
	n->n_reads = k;
}

static void maybe_snapshot(struct sim *s, struct sim_node *n)
{
	if (n->stop_pending || n->sm.applied < n->last_snapshot_index + n->snapshot_every) {
		return;
	}
	size_t size;
	uint8_t *bytes = sim_sm_snapshot(s, &n->sm, &size);
	struct raft_snapshot_meta meta;
	memset(&meta, 0, sizeof(meta));
	meta.index = n->sm.applied;
	meta.term = n->sm.applied_term;
	meta.config = n->sm.config;
	/* Written durably first (as the server's snapshot child does), then
	 * reported to the core with the size its followers will receive. */
	enum keel_err err = n->disk->ops->save_snapshot(n->disk, &meta, bytes, size, &meta.size_bytes);
	free(bytes);
	if (err != KEEL_OK) {
		storage_error(s, n, err, "a snapshot");
		return;
	}
	err = raft_snapshot_taken(n->r, &meta);
	if (err != KEEL_OK) {
		sim_fail(s, "node %llu: raft_snapshot_taken(%llu/%llu) failed: %s",
			 (unsigned long long)n->id, (unsigned long long)meta.index,
			 (unsigned long long)meta.term, keel_errname(err));
		return;
	}
	n->last_snapshot_index = meta.index;
	s->stat_snapshots++;
}

void sim_node_writes_unknown_below(struct sim *s, struct sim_node *n, uint64_t index)
{
	/* Writes waiting at or below a loaded snapshot: outcome unknown here. */
	size_t k = 0;
	for (size_t i = 0; i < n->n_writes; i++) {
		if (n->writes[i].index <= index) {
			sim_hist_complete(s, n->writes[i].op, SIM_OP_UNKNOWN, 0);
		} else {
			n->writes[k++] = n->writes[i];
		}
	}
	n->n_writes = k;
}

/* Reports durable batches to the core, in order, loading a snapshot
 * install into the state machine first. */
static void report_durable(struct sim *s, struct sim_node *n, uint64_t durable_id, bool early)
{
	while (n->n_submitted > 0) {
		struct sim_submitted *sub = &n->submitted[0];
		if (sub->id > durable_id) {
			break;
		}
		if (sub->install) {
			if (early) {
				break; /* an install is loaded only once it is on disk */
			}
			uint64_t size = 0;
			const uint8_t *bytes = n->disk->ops->snapshot_payload(
				n->disk, sub->meta.index, sub->meta.term, &size);
			if (bytes == NULL) {
				/* Installed and verified, but unreadable now (the
				 * power went): the node stops. */
				KEEL_ASSERT(n->disk->ops->failed(n->disk) || early);
				n->stop_pending = true;
				break;
			}
			bool ok = sim_sm_load(s, &n->sm, bytes, size);
			KEEL_ASSERT(ok);
			KEEL_ASSERT(n->sm.applied == sub->meta.index);
			sim_ctl_image_replaced(s, n);
			sim_check_snapshot_loaded(s, n);
			n->last_snapshot_index = sub->meta.index;
			s->stat_snap_installs++;
			sim_node_writes_unknown_below(s, n, sub->meta.index);
		}
		enum keel_err err = raft_persisted(n->r, sub->id);
		KEEL_ASSERT(err == KEEL_OK);
		n->reported_batches = sub->id;
		if (sub->install) {
			raft_applied(n->r, n->sm.applied);
		}
		sim_node_submitted_pop(n);
	}
}

void sim_node_note_persist(struct sim *s, struct sim_node *n, const struct raft_ready *rd)
{
	sim_check_entries(s, n, rd->entries, rd->n_entries);
	if (s->cfg.verbose) {
		sim_tracef(s, "node %llu: persist batch %llu: %zu chunks%s, entries %llu..%llu%s",
			   (unsigned long long)n->id, (unsigned long long)rd->persist_id,
			   rd->n_chunks, rd->install != NULL ? ", install" : "",
			   (unsigned long long)(rd->n_entries > 0 ? rd->entries[0].index : 0),
			   (unsigned long long)(rd->n_entries > 0
							? rd->entries[rd->n_entries - 1].index
							: 0),
			   rd->hard_state_changed ? ", hard state" : "");
	}
}

static bool submit_batch(struct sim *s, struct sim_node *n, const struct raft_ready *rd)
{
	sim_node_note_persist(s, n, rd);
	enum keel_err err = n->disk->ops->submit(n->disk, rd);
	if (err != KEEL_OK) {
		storage_error(s, n, err, "a persist batch");
		return false;
	}
	struct sim_submitted sub;
	memset(&sub, 0, sizeof(sub));
	sub.id = rd->persist_id;
	sub.install = rd->install != NULL;
	if (rd->install != NULL) {
		sub.meta = rd->install->meta;
		sim_tracef(s, "node %llu: install snapshot %llu/%llu (batch %llu)%s",
			   (unsigned long long)n->id, (unsigned long long)sub.meta.index,
			   (unsigned long long)sub.meta.term, (unsigned long long)sub.id,
			   rd->install->discard_log ? ", log discarded" : "");
	}
	sim_node_submitted_push(n, &sub);
	uint64_t start = KEEL_MAX(s->now, n->disk_busy_until);
	uint64_t done = start + keel_rng_between(&s->rng, n->fsync_min_ms, n->fsync_max_ms);
	n->disk_busy_until = done;
	sim_schedule(s, done, SIM_EV_DISK, n->id, rd->persist_id, NULL);
	sim_trace_hash(s, rd->persist_id ^ (rd->n_entries << 32));
	return true;
}

void sim_node_note_role(struct sim *s, struct sim_node *n, uint8_t role, uint64_t leader,
			uint64_t term)
{
	if (role == n->last_role && leader == n->last_leader) {
		return;
	}
	if (role == RAFT_LEADER && n->last_role != RAFT_LEADER) {
		s->stat_elections++;
		sim_on_new_leader(s, n);
	}
	sim_tracef(s, "node %llu: %s term=%llu leader=%llu", (unsigned long long)n->id,
		   raft_role_name(role), (unsigned long long)term, (unsigned long long)leader);
	n->last_role = role;
	n->last_leader = leader;
}

void sim_node_check_commit(struct sim *s, struct sim_node *n)
{
	uint64_t commit = raft_commit_index(n->r);
	if (commit < n->last_commit) {
		sim_fail(s, "commit index went back on node %llu: %llu -> %llu",
			 (unsigned long long)n->id, (unsigned long long)n->last_commit,
			 (unsigned long long)commit);
	}
	n->last_commit = commit;
}

void sim_node_process(struct sim *s, struct sim_node *n)
{
	if (n->host != NULL) {
		sim_host_process(s, n);
		return;
	}
	if (!n->up || s->failed) {
		return;
	}
	struct raft_ready rd;
	while (raft_ready(n->r, &rd)) {
		uint64_t failed_peers[64];
		size_t n_failed = 0;
		sim_node_note_role(s, n, rd.role, rd.leader, rd.term);
		bool submitted = false;
		if (rd.persist_id != 0 && !n->stop_pending) {
			submitted = submit_batch(s, n, &rd);
		}
		for (size_t i = 0; i < rd.n_msgs; i++) {
			uint64_t failed = 0;
			send_msg(s, n, &rd.msgs[i], &failed);
			if (failed != 0 && n_failed < 64) {
				failed_peers[n_failed++] = failed;
			}
		}
		apply_committed(s, n, &rd);
		sim_node_take_reads(s, n, rd.reads, rd.n_reads);
		uint64_t persist_id = rd.persist_id;
		raft_advance(n->r, &rd);
		if (s->failed) {
			return;
		}
		raft_applied(n->r, n->sm.applied);
		for (size_t i = 0; i < n_failed; i++) {
			raft_report_snapshot(n->r, failed_peers[i], RAFT_SNAPSHOT_FAILED);
		}
#ifdef KEEL_PLANT_BUG_ACK_BEFORE_PERSIST
		/* planted bug: claim durability before the disk has it */
		if (submitted) {
			report_durable(s, n, persist_id, true);
		}
#else
		(void)persist_id;
		(void)submitted;
#endif
		serve_reads(s, n);
		maybe_snapshot(s, n);
		sim_ctl_after_apply(s, n);
		if (n->stop_pending || s->failed) {
			break;
		}
	}
	if (n->stop_pending && !s->failed) {
		sim_node_stop_after_failure(s, n);
		return;
	}
	sim_node_check_commit(s, n);
}

void sim_node_disk_done(struct sim *s, struct sim_node *n)
{
	if (n->host != NULL) {
		sim_host_disk_done(s, n);
		return;
	}
	uint64_t id = 0;
	enum keel_err err = n->disk->ops->sync_one(n->disk, &id);
	if (err != KEEL_OK) {
		storage_error(s, n, err, "a sync");
	} else {
		KEEL_ASSERT(id != 0);
		report_durable(s, n, id, false);
	}
	sim_node_process(s, n);
}

void sim_node_tick(struct sim *s, struct sim_node *n)
{
	uint64_t local = sim_local_time(s, n);
	if (local < n->last_local) {
		local = n->last_local;
	}
	n->last_local = local;
	if (n->host != NULL) {
		sim_host_tick(s, n, local);
	} else {
		raft_tick(n->r, local);
		sim_ctl_tick(s, n);
	}
	sim_node_process(s, n);
	if (n->up) {
		schedule_tick(s, n);
	}
}

void sim_node_add_write(struct sim_node *n, size_t op, uint64_t index, uint64_t term)
{
	if (n->n_writes == n->cap_writes) {
		n->cap_writes = n->cap_writes == 0 ? 16 : n->cap_writes * 2;
		n->writes = realloc(n->writes, n->cap_writes * sizeof(*n->writes));
		KEEL_ASSERT(n->writes != NULL);
	}
	n->writes[n->n_writes++] = (struct sim_pending_write){.op = op, .index = index, .term = term};
}

void sim_node_add_read(struct sim_node *n, size_t op, uint64_t ctx)
{
	if (n->n_reads == n->cap_reads) {
		n->cap_reads = n->cap_reads == 0 ? 16 : n->cap_reads * 2;
		n->reads = realloc(n->reads, n->cap_reads * sizeof(*n->reads));
		KEEL_ASSERT(n->reads != NULL);
	}
	n->reads[n->n_reads++] = (struct sim_pending_read){.op = op, .ctx = ctx, .index = 0};
}

bool sim_node_propose(struct sim *s, struct sim_node *n, size_t op)
{
	if (n->host != NULL) {
		return sim_host_propose(s, n, op);
	}
	struct sim_hist_op *h = &s->hist[op];
	struct sim_op_data data = {.op_id = ++s->next_op_id, .key = h->key, .value = h->value};
	uint8_t buf[SIM_OP_BYTES];
	sim_op_encode(&data, buf);
	uint64_t index, term;
	if (raft_propose(n->r, buf, SIM_OP_BYTES, &index, &term) != KEEL_OK) {
		return false;
	}
	h->index = index;
	h->term = term;
	h->node = n->id;
	sim_node_add_write(n, op, index, term);
	sim_node_process(s, n);
	return true;
}

bool sim_node_read(struct sim *s, struct sim_node *n, size_t op)
{
	if (n->host != NULL) {
		return sim_host_read(s, n, op);
	}
	uint64_t ctx = ++s->next_ctx;
	if (raft_read_index(n->r, ctx) != KEEL_OK) {
		return false;
	}
	s->hist[op].node = n->id;
	sim_node_add_read(n, op, ctx);
	sim_node_process(s, n);
	return true;
}
