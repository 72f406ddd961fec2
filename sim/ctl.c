/*
 * ctl.c — controller mode, server side: what the simulator does around the
 * real controller glue (core/controller.c) that every server core runs:
 *
 *   requests  a broker's or the admin client's request reaches a server
 *             (SIM_EV_CTL_REQUEST) and is sent to its core as a keel
 *             extension frame on a ZooKeeper connection (host.c); the core
 *             runs it on the active controller or forwards it to the
 *             leader, holds the answer until applied, and answers on the
 *             connection;
 *   replies   checked against the answering server's image (ctl_check.c),
 *             then sent back (delayed, sometimes lost);
 *   the log   the first time any server applies a metadata batch, it joins
 *             the committed metadata log the brokers follow (ctl_int.h)
 *             and is checked (sim_ctl_check_first_apply).
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/buf.h"
#include "meta/format.h"
#include "meta/proto.h"
#include "sim/ctl_int.h"

/* ---- the replicated part ---- */

static bool first_apply(const struct sim *s, uint64_t index)
{
	return index >= s->cap_committed || !s->committed[index].known;
}

static void log_append(struct sim_ctl_world *w, uint64_t index, const uint8_t *data, size_t size)
{
	KEEL_ASSERT(w->n_log == 0 || w->log[w->n_log - 1].index < index);
	if (w->n_log == w->cap_log) {
		w->cap_log = w->cap_log == 0 ? 64 : w->cap_log * 2;
		w->log = realloc(w->log, w->cap_log * sizeof(*w->log));
		KEEL_ASSERT(w->log != NULL);
	}
	uint8_t *copy = malloc(size > 0 ? size : 1);
	KEEL_ASSERT(copy != NULL);
	memcpy(copy, data, size);
	w->log[w->n_log++] = (struct sim_meta_entry){index, copy, size};
}

static void trace_line(void *ctx, const char *line)
{
	sim_tracef(ctx, "  meta: %.140s", line);
}

/* --verbose: the batch as `keel log dump` prints it. */
static void trace_batch(struct sim *s, const struct meta_image *img, uint64_t index,
			const struct meta_batch *batch)
{
	struct meta_image copy;
	meta_image_init(&copy, NULL);
	if (meta_image_clone(&copy, img) == KEEL_OK) {
		meta_log_dump_batch(&copy, (int64_t)index, batch, trace_line, s);
	}
	meta_image_close(&copy);
}

void sim_ctl_note_applied(struct sim *s, struct sim_node *n, uint64_t index, const uint8_t *data,
			  size_t size, const struct meta_apply_result *res)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	if (!first_apply(s, index)) {
		return;
	}
	keel_arena_reset(&w->arena);
	struct meta_batch batch;
	struct meta_errbuf eb;
	memset(&eb, 0, sizeof(eb));
	enum keel_err err = meta_batch_decode(data, size, &w->arena, &batch, &eb);
	KEEL_ASSERT(err == KEEL_OK); /* the server applied it */
	if (s->cfg.verbose) {
		trace_batch(s, n->sm.image, index, &batch);
	}
	log_append(w, index, data, size);
	sim_ctl_check_first_apply(s, n, index, res);
	w->stat_batches++;
	w->stat_records += batch.count;
	for (uint32_t i = 0; i < batch.count; i++) {
		const struct meta_record *r = &batch.records[i];
		w->stat_registrations += r->type == META_REC_REGISTER_BROKER;
		w->stat_fences += r->type == META_REC_FENCE_BROKER;
		if (r->type == META_REC_PARTITION_CHANGE) {
			w->stat_leader_changes += (r->partition_change.fields & META_PC_LEADER) != 0;
			w->stat_isr_changes += (r->partition_change.fields & META_PC_ISR) != 0;
		}
		w->stat_topics += r->type == META_REC_TOPIC;
	}
}

bool sim_node_controller(const struct sim_node *n, const struct meta_controller **ctl,
			 uint64_t *last_proposed_index)
{
	*ctl = sim_host_controller(n, last_proposed_index);
	return *ctl != NULL;
}

/* ---- replies ---- */

/* Sends a reply from server `from` to its broker (or the admin client). */
static void send_reply(struct sim *s, uint64_t from, struct sim_ctl_msg *m)
{
	m->server = from;
	if (keel_rng_chance(&s->rng, s->net.drop_per_mille, 1000)) {
		free(m); /* lost: the broker times out and asks again */
		return;
	}
	struct sim_packet pkt = {from, 0, (uint8_t *)m, sizeof(*m)};
	uint64_t delay = keel_rng_between(&s->rng, s->net.min_delay_ms, s->net.max_delay_ms);
	sim_schedule(s, s->now + delay, SIM_EV_CTL_REPLY, (uint64_t)m->broker, 0, &pkt);
}

void sim_ctl_release(struct sim *s, struct sim_node *n, struct sim_ctl_msg *reply)
{
	if (reply->error == META_ERR_NOT_CONTROLLER) {
		reply->leader_hint = n->up ? raft_leader(n->r) : 0;
		sim_ctlw(s)->stat_not_controller++;
	} else {
		sim_ctl_check_reply(s, n, reply);
	}
	send_reply(s, n->id, reply);
}

/* ---- requests ---- */

void sim_ctl_request(struct sim *s, struct sim_event *ev)
{
	struct sim_node *n = &s->nodes[ev->node];
	const struct sim_ctl_msg *m = (const struct sim_ctl_msg *)ev->pkt.bytes;
	KEEL_ASSERT(ev->pkt.size == sizeof(*m));
	if (!n->up) {
		return; /* nobody listens: the broker times out */
	}
	sim_ctlw(s)->stat_requests++;
	sim_host_ctl_request(s, n, m);
}
