/*
 * node.c — a simulated server's life: boot (a member of the initial cluster
 * stores the bootstrap entry), start (its storage recovers, or refuses and
 * the operator repairs it, repair.c), crash, the stop after a storage
 * failure and the restart; what it runs is the real server core (host.c).
 * Also the bookkeeping the host shares with the workload: the writes and
 * reads waiting on a server, the batches it submitted, role changes.
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
	return sim_host_state_hash(n);
}

void sim_node_free(struct sim_node *n)
{
	sim_host_close(n);
	if (n->disk != NULL) {
		n->disk->ops->close(n->disk);
		n->disk = NULL;
	}
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
	struct sim_disk_state st;
	char why[256];
	err = n->disk->ops->load(n->disk, &st, why, sizeof(why));
	KEEL_ASSERT(err == KEEL_OK);
	/* Through the writer, as `keel server` bootstraps (no faults are armed
	 * yet). */
	err = sim_waldisk_bootstrap(n->disk, &boot);
	KEEL_ASSERT(err == KEEL_OK);
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
	sim_host_tick(s, n, n->last_local);
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
	if (sim_host_start(s, n, &st)) {
		started(s, n, st.has_snapshot ? st.snapshot.index : 0);
	}
}

void sim_node_crash(struct sim *s, struct sim_node *n)
{
	if (!n->up) {
		return;
	}
	bool torn = n->disk->ops->crash(n->disk, &s->rng);
	s->stat_crashes++;
	s->stat_torn += torn;
	sim_host_close(n);
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

void sim_node_stop_after_failure(struct sim *s, struct sim_node *n)
{
	s->stat_storage_stops++;
	sim_node_crash(s, n);
	sim_schedule(s, s->now + keel_rng_between(&s->rng, s->opts.election_timeout_ms / 2,
						  3 * s->opts.election_timeout_ms),
		     SIM_EV_RESTART, n->id, 0, NULL);
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
	sim_host_process(s, n);
}

void sim_node_disk_done(struct sim *s, struct sim_node *n)
{
	sim_host_disk_done(s, n);
}

void sim_node_tick(struct sim *s, struct sim_node *n)
{
	uint64_t local = sim_local_time(s, n);
	if (local < n->last_local) {
		local = n->last_local;
	}
	n->last_local = local;
	sim_host_tick(s, n, local);
	sim_host_process(s, n);
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
	return sim_host_propose(s, n, op);
}

bool sim_node_read(struct sim *s, struct sim_node *n, size_t op)
{
	return sim_host_read(s, n, op);
}
