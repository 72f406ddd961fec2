/*
 * broker.c — controller mode, client side: simulated brokers, the admin
 * client and the broker nemesis.
 *
 * A broker is a process with a timer (every BROKER_TICK_MS). While it runs
 * and is not paused it
 *   - follows the committed metadata log (ctl_int.h) through a
 *     meta_follower, up to what its fetch server has applied; every role
 *     change it sees goes to the split-brain checker;
 *   - registers (a new incarnation id per process start; after a
 *     controlled shutdown it presents its old epoch), then heartbeats
 *     every heartbeat_ms with its metadata offset (and, when it wants to
 *     stop, want_shutdown);
 *   - as partition leader, asks the controller (AlterPartition, from its
 *     own image's epochs) to shrink the ISR of replicas that are down or
 *     paused longer than a lag, to add back replicas that run again, and to
 *     mark an uncleanly elected partition RECOVERED.
 * Requests go to the server it believes is the controller; a reply of
 * NOT_CONTROLLER names another, silence (a lost message, a dead server, a
 * reply held past the broker's patience) makes it try elsewhere. It has
 * two channels (heartbeats; ISR changes) with one request each in flight.
 *
 * The nemesis kills brokers (kill -9, restart later as a new incarnation:
 * half of the restarts load a snapshot of a server's image instead of
 * replaying the log), pauses them (no heartbeats: fenced after the session
 * timeout), asks them to shut down in a controlled way, and moves their
 * fetching elsewhere. The admin client creates topics (sometimes with
 * unclean election on), deletes them and toggles the cluster-wide unclean
 * default. After heal every broker runs again and the admin stops; the
 * run then waits for the metadata to settle (sim_ctl_settled).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "meta/proto.h"
#include "sim/ctl_int.h"

#define BROKER_TICK_MS 50

static const char *const topic_names[] = {"t0", "t1", "t2", "sensor-data"};

static uint64_t timeout_ms(const struct sim *s)
{
	return s->opts.election_timeout_ms;
}

static struct sim_broker *broker_of(struct sim *s, uint64_t id)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	KEEL_ASSERT(id >= 1 && id <= w->n_brokers);
	return &w->brokers[id - 1];
}

static uint64_t random_server(struct sim *s)
{
	uint64_t start = keel_rng_below(&s->rng, s->n_slots);
	for (uint64_t i = 0; i < s->n_slots; i++) {
		uint64_t id = 1 + (start + i) % s->n_slots;
		if (s->nodes[id].up && !s->nodes[id].paused) {
			return id;
		}
	}
	return 1 + start;
}

/* A server that follows the log: up, and a member in its own view (a
 * spare or removed server stops applying). */
static bool follows_log(const struct sim_node *n)
{
	return n->up && !n->paused && raft_config_role(raft_config(n->r), n->id) != 0;
}

static uint64_t random_fetch_server(struct sim *s)
{
	uint64_t start = keel_rng_below(&s->rng, s->n_slots);
	for (uint64_t i = 0; i < s->n_slots; i++) {
		uint64_t id = 1 + (start + i) % s->n_slots;
		if (follows_log(&s->nodes[id])) {
			return id;
		}
	}
	return 1 + start;
}

void sim_ctl_send(struct sim *s, uint64_t server, const struct sim_ctl_msg *m)
{
	if (server < 1 || server > s->n_slots ||
	    keel_rng_chance(&s->rng, s->net.drop_per_mille, 1000)) {
		return;
	}
	struct sim_ctl_msg *copy = malloc(sizeof(*copy));
	KEEL_ASSERT(copy != NULL);
	*copy = *m;
	struct sim_packet pkt = {0, server, (uint8_t *)copy, sizeof(*copy)};
	uint64_t delay = keel_rng_between(&s->rng, s->net.min_delay_ms, s->net.max_delay_ms);
	sim_schedule(s, s->now + delay, SIM_EV_CTL_REQUEST, server, 0, &pkt);
}

/* ---- the broker's image ---- */

static void follower_reset(struct sim_broker *b)
{
	if (b->has_follower) {
		meta_follower_close(&b->follower);
	}
	meta_follower_init(&b->follower, b->id, NULL);
	b->has_follower = true;
	b->log_pos = 0;
}

static void note_roles(struct sim *s, struct sim_broker *b, const struct meta_role_change *changes,
		       uint32_t count)
{
	for (uint32_t i = 0; i < count && !s->failed; i++) {
		sim_ctl_check_role(s, b->id, &changes[i]);
		sim_ctlw(s)->stat_role_changes++;
	}
}

/* A restarted broker starts from a snapshot of its fetch server's image. */
static void load_snapshot(struct sim *s, struct sim_broker *b)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	const struct sim_node *srv = &s->nodes[b->fetch_server];
	if (!srv->up || srv->sm.image->offset == 0) {
		return;
	}
	size_t size = 0;
	enum keel_err err = KEEL_OK;
	uint8_t *data = meta_image_save_to_memory(srv->sm.image, 16u << 20, &size, &err);
	KEEL_ASSERT(data != NULL);
	const struct meta_role_change *changes;
	uint32_t count = 0;
	struct meta_errbuf eb;
	err = meta_follower_load_snapshot(&b->follower, data, size, &changes, &count, &eb);
	free(data);
	if (err != KEEL_OK) {
		sim_fail(s, "broker %d: a server's image does not load as a snapshot: %s", b->id,
			 eb.msg);
		return;
	}
	note_roles(s, b, changes, count);
	int64_t offset = meta_follower_offset(&b->follower);
	while (b->log_pos < w->n_log && (int64_t)w->log[b->log_pos].index <= offset) {
		b->log_pos++;
	}
}

static void fetch(struct sim *s, struct sim_broker *b)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	const struct sim_node *srv = &s->nodes[b->fetch_server];
	if (!follows_log(srv)) {
		b->fetch_server = random_fetch_server(s);
		return;
	}
	if (b->log_pos < w->n_log && w->log[b->log_pos].index > srv->sm.applied &&
	    s->now > b->last_fetch_progress + 2 * w->heartbeat_ms) {
		/* Its server stopped following (removed, cut off): the broker
		 * learns of newer metadata from the controller and moves. */
		b->fetch_server = random_fetch_server(s);
		b->last_fetch_progress = s->now;
		return;
	}
	if (b->log_pos == w->n_log || w->log[b->log_pos].index <= srv->sm.applied) {
		b->last_fetch_progress = s->now;
	}
	while (b->log_pos < w->n_log && w->log[b->log_pos].index <= srv->sm.applied && !s->failed) {
		const struct sim_meta_entry *e = &w->log[b->log_pos];
		const struct meta_role_change *changes;
		uint32_t count = 0;
		struct meta_errbuf eb;
		enum keel_err err = meta_follower_apply(&b->follower, (int64_t)e->index, e->data,
							e->size, &changes, &count, &eb);
		if (err != KEEL_OK) {
			sim_fail(s, "broker %d: committed batch %llu does not apply: %s", b->id,
				 (unsigned long long)e->index, eb.msg);
			return;
		}
		note_roles(s, b, changes, count);
		b->log_pos++;
	}
}

/* ---- requests ---- */

static void request(struct sim *s, struct sim_broker *b, uint8_t channel, struct sim_ctl_msg *m)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	struct sim_broker_chan *ch = &b->chan[channel];
	m->broker = b->id;
	m->incarnation = b->incarnation;
	m->channel = channel;
	m->seq = ++w->next_seq;
	ch->busy = true;
	ch->seq = m->seq;
	ch->deadline = s->now + w->request_timeout_ms;
	sim_ctl_send(s, b->guess_server, m);
}

static void send_register(struct sim *s, struct sim_broker *b)
{
	struct sim_ctl_msg m;
	memset(&m, 0, sizeof(m));
	m.api = SIM_API_REGISTER;
	m.broker_epoch = b->epoch > 0 && b->clean_stop ? b->epoch : -1;
	snprintf(m.rack, sizeof(m.rack), "%s", b->rack);
	request(s, b, 0, &m);
}

static void send_heartbeat(struct sim *s, struct sim_broker *b)
{
	struct sim_ctl_msg m;
	memset(&m, 0, sizeof(m));
	m.api = SIM_API_HEARTBEAT;
	m.broker_epoch = b->epoch;
	m.metadata_offset = meta_follower_offset(&b->follower);
	m.want_shutdown = b->shutting_down;
	request(s, b, 0, &m);
	b->next_heartbeat_at = s->now + sim_ctlw(s)->heartbeat_ms;
}

static bool replica_runs(struct sim *s, int32_t id, uint64_t lag_ms)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	if (id < 1 || (uint32_t)id > w->n_brokers) {
		return false;
	}
	const struct sim_broker *r = &w->brokers[id - 1];
	return (r->alive && !r->paused) || s->now < r->down_since + lag_ms;
}

static bool caught_up(void *ctx, const uint8_t topic_id[16], int32_t partition_id, int32_t replica)
{
	(void)topic_id;
	(void)partition_id;
	return replica_runs(ctx, replica, 0);
}

/* A leader drops replicas that stopped running a while ago from its ISR. */
static bool shrink_request(struct sim *s, struct sim_broker *b, struct sim_ctl_msg *m)
{
	const struct meta_image *img = &b->follower.image;
	uint64_t lag = 2 * sim_ctlw(s)->heartbeat_ms;
	for (uint32_t t = 0; t < img->topic_count; t++) {
		const struct meta_topic *topic = img->topics[t];
		for (uint32_t pid = 0; pid < topic->partition_count; pid++) {
			const struct meta_partition *p = &topic->partitions[pid];
			if (p->leader != b->id || p->leader_recovery_state != META_RECOVERED) {
				continue;
			}
			uint32_t n = 0;
			for (uint32_t i = 0; i < p->isr_count && n < SIM_MAX_ISR; i++) {
				if (p->isr[i] == b->id || replica_runs(s, p->isr[i], lag)) {
					m->isr[n++] = p->isr[i];
				}
			}
			if (n == p->isr_count) {
				continue;
			}
			memcpy(m->topic_id, topic->id, META_UUID_SIZE);
			m->partition = (int32_t)pid;
			m->leader_epoch = p->leader_epoch;
			m->partition_epoch = p->partition_epoch;
			m->isr_count = n;
			m->recovery = META_RECOVERED;
			return true;
		}
	}
	return false;
}

static void isr_duties(struct sim *s, struct sim_broker *b)
{
	struct sim_ctl_msg m;
	memset(&m, 0, sizeof(m));
	m.api = SIM_API_ALTER_PARTITION;
	m.broker_epoch = b->epoch;
	bool ask = shrink_request(s, b, &m);
	struct meta_alter_partition_request req;
	if (!ask && meta_follower_isr_request(&b->follower, b->epoch, caught_up, s, &req)) {
		const struct meta_alter_partition_topic *t = &req.topics[0];
		const struct meta_alter_partition_item *it = &t->partitions[0];
		memcpy(m.topic_id, t->topic_id, META_UUID_SIZE);
		m.partition = it->partition_id;
		m.leader_epoch = it->leader_epoch;
		m.partition_epoch = it->partition_epoch;
		m.isr_count = KEEL_MIN(it->new_isr_count, SIM_MAX_ISR);
		memcpy(m.isr, it->new_isr, m.isr_count * sizeof(int32_t));
		m.recovery = it->leader_recovery_state;
		ask = true;
	}
	if (ask) {
		request(s, b, 1, &m);
	}
	b->next_isr_at = s->now + keel_rng_between(&s->rng, BROKER_TICK_MS, 4 * BROKER_TICK_MS);
}

/* ---- the broker's life ---- */

static void broker_start(struct sim *s, struct sim_broker *b)
{
	b->alive = true;
	b->paused = false;
	b->shutting_down = false;
	b->incarnation++;
	b->registered = false;
	memset(b->chan, 0, sizeof(b->chan));
	b->fetch_server = random_fetch_server(s);
	b->guess_server = random_server(s);
	follower_reset(b);
	if (keel_rng_chance(&s->rng, 1, 2)) {
		load_snapshot(s, b);
	}
	sim_tracef(s, "broker %d: start (incarnation %u)", b->id, b->incarnation);
}

static void broker_stop(struct sim *s, struct sim_broker *b, bool clean)
{
	b->alive = false;
	b->paused = false;
	b->registered = false;
	b->clean_stop = clean;
	b->down_since = s->now;
	memset(b->chan, 0, sizeof(b->chan));
	uint64_t session = (uint64_t)sim_ctlw(s)->cfg.session_timeout_ms;
	sim_schedule(s, s->now + keel_rng_between(&s->rng, timeout_ms(s) / 2, 3 * session),
		     SIM_EV_BROKER_RESTART, (uint64_t)b->id, 0, NULL);
	sim_tracef(s, "broker %d: %s", b->id, clean ? "stops after a controlled shutdown" : "killed");
}

static void broker_tick(struct sim *s, struct sim_broker *b)
{
	for (int i = 0; i < 2; i++) {
		if (b->chan[i].busy && s->now >= b->chan[i].deadline) {
			b->chan[i].busy = false; /* gave up: try another server */
			b->guess_server = random_server(s);
		}
	}
	if (!b->alive || b->paused) {
		return;
	}
	fetch(s, b);
	if (!b->chan[0].busy) {
		if (!b->registered) {
			send_register(s, b);
		} else if (s->now >= b->next_heartbeat_at) {
			send_heartbeat(s, b);
		}
	}
	if (b->registered && !b->chan[1].busy && s->now >= b->next_isr_at) {
		isr_duties(s, b);
	}
}

void sim_broker_event(struct sim *s, struct sim_event *ev)
{
	struct sim_broker *b = broker_of(s, ev->node);
	switch (ev->kind) {
	case SIM_EV_BROKER:
		broker_tick(s, b);
		sim_schedule(s, s->now + BROKER_TICK_MS, SIM_EV_BROKER, ev->node, 0, NULL);
		break;
	case SIM_EV_BROKER_RESTART:
		if (!b->alive) {
			broker_start(s, b);
		}
		break;
	case SIM_EV_BROKER_RESUME:
		if (b->alive && b->paused) {
			b->paused = false;
			sim_tracef(s, "broker %d: resumes", b->id);
		}
		break;
	default:
		KEEL_UNREACHABLE();
	}
}

/* The connection that carried request `m` was closed before its answer
 * (the server's ZooKeeper session could not be had or ended): its sender
 * hears of it at once and tries another server, as a broker's client does
 * on a connection loss. */
void sim_broker_request_lost(struct sim *s, const struct sim_ctl_msg *m)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	if (m->broker == 0) {
		if (w->admin_busy && m->seq == w->admin_seq) {
			w->admin_busy = false;
		}
		return;
	}
	struct sim_broker *b = broker_of(s, (uint64_t)m->broker);
	if (!b->alive || m->incarnation != b->incarnation || m->channel > 1 ||
	    !b->chan[m->channel].busy || b->chan[m->channel].seq != m->seq) {
		return;
	}
	b->chan[m->channel].busy = false;
	b->guess_server = random_server(s);
}

static void on_broker_reply(struct sim *s, struct sim_broker *b, const struct sim_ctl_msg *m)
{
	if (!b->alive || m->incarnation != b->incarnation || m->channel > 1 ||
	    !b->chan[m->channel].busy || b->chan[m->channel].seq != m->seq) {
		return; /* for an earlier process, or a request it gave up on */
	}
	b->chan[m->channel].busy = false;
	if (m->error == META_ERR_NOT_CONTROLLER) {
		b->guess_server = m->leader_hint != 0 ? m->leader_hint : random_server(s);
		b->next_heartbeat_at = s->now;
		return;
	}
	b->guess_server = m->server;
	if (m->api == SIM_API_REGISTER && m->error == META_ERR_NONE) {
		b->registered = true;
		b->epoch = m->assigned_epoch;
		b->clean_stop = false;
		b->next_heartbeat_at = s->now;
		sim_tracef(s, "broker %d: registered with epoch %lld", b->id,
			   (long long)b->epoch);
	} else if (m->api == SIM_API_HEARTBEAT) {
		if (s->cfg.verbose) {
			sim_tracef(s, "broker %d: heartbeat: %s%s%s%s (offset %lld)", b->id,
				   meta_error_name(m->error), m->is_caught_up ? " caught-up" : "",
				   m->is_fenced ? " fenced" : "",
				   m->should_shut_down ? " should-shut-down" : "",
				   (long long)meta_follower_offset(&b->follower));
		}
		if (m->error == META_ERR_STALE_BROKER_EPOCH ||
		    m->error == META_ERR_BROKER_ID_NOT_REGISTERED) {
			b->registered = false;
		} else if (m->error == META_ERR_NONE && m->should_shut_down && b->shutting_down) {
			sim_ctlw(s)->stat_shutdowns++;
			broker_stop(s, b, true);
		}
	}
}

static void schedule_admin(struct sim *s, uint64_t at)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	w->admin_gen++; /* earlier admin events are void */
	sim_schedule(s, at, SIM_EV_ADMIN, 0, w->admin_gen, NULL);
}

void sim_ctl_reply(struct sim *s, struct sim_event *ev)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	const struct sim_ctl_msg *m = (const struct sim_ctl_msg *)ev->pkt.bytes;
	KEEL_ASSERT(ev->pkt.size == sizeof(*m));
	if (m->broker != 0) {
		on_broker_reply(s, broker_of(s, (uint64_t)m->broker), m);
		return;
	}
	if (!w->admin_busy || m->seq != w->admin_seq) {
		return;
	}
	w->admin_busy = false;
	static const char *const apis[] = {"?", "register", "heartbeat", "alter partition",
					   "create topic", "delete topic", "alter config"};
	sim_tracef(s, "admin: %s %s: %s (server %llu, hint %llu)", apis[m->api <= SIM_API_ALTER_CONFIG ? m->api : 0],
		   m->api == SIM_API_ALTER_CONFIG ? (m->unclean ? "unclean on" : "unclean off")
						  : m->topic,
		   meta_error_name(m->error), (unsigned long long)m->server,
		   (unsigned long long)m->leader_hint);
	if (m->error == META_ERR_NOT_CONTROLLER) {
		w->admin_guess = m->leader_hint != 0 ? m->leader_hint : random_server(s);
		schedule_admin(s, s->now + BROKER_TICK_MS);
	}
}

/* ---- the nemesis and the admin ---- */

void sim_broker_fault(struct sim *s)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	struct sim_broker *b = &w->brokers[keel_rng_below(&s->rng, w->n_brokers)];
	uint64_t session = (uint64_t)w->cfg.session_timeout_ms;
	uint64_t k = keel_rng_below(&s->rng, 10);
	if (k < 3 && b->alive) {
		w->stat_broker_kills++;
		broker_stop(s, b, false);
	} else if (k < 6 && b->alive && !b->paused) {
		b->paused = true;
		b->down_since = s->now;
		sim_schedule(s, s->now + keel_rng_between(&s->rng, session / 4, 2 * session),
			     SIM_EV_BROKER_RESUME, (uint64_t)b->id, 0, NULL);
		sim_tracef(s, "fault: broker %d paused", b->id);
	} else if (k < 8 && b->alive && b->registered && !b->shutting_down) {
		b->shutting_down = true;
		sim_tracef(s, "fault: broker %d asks for a controlled shutdown", b->id);
	} else if (k < 9) {
		b->fetch_server = random_fetch_server(s);
	}
	if (w->broker_faults_on) {
		sim_schedule(s, s->now + keel_rng_between(&s->rng, timeout_ms(s) / 2, 3 * timeout_ms(s)),
			     SIM_EV_BROKER_FAULT, 0, 0, NULL);
	}
}

void sim_admin_event(struct sim *s, uint64_t gen)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	if (!w->admin_on || gen != w->admin_gen) {
		return;
	}
	if (w->admin_busy && s->now >= w->admin_deadline) {
		w->admin_busy = false;
		w->admin_guess = random_server(s);
	}
	if (!w->admin_busy) {
		struct sim_ctl_msg m;
		memset(&m, 0, sizeof(m));
		uint64_t k = keel_rng_below(&s->rng, 8);
		m.api = k < 4 ? SIM_API_CREATE_TOPIC : k < 6 ? SIM_API_DELETE_TOPIC : SIM_API_ALTER_CONFIG;
		snprintf(m.topic, sizeof(m.topic), "%s",
			 topic_names[keel_rng_below(&s->rng, KEEL_ARRAY_SIZE(topic_names))]);
		m.partitions = (int32_t)keel_rng_between(&s->rng, 1, 4);
		m.replication_factor = (int16_t)keel_rng_between(&s->rng, 1, 3);
		m.unclean = keel_rng_chance(&s->rng, 1, 4);
		m.seq = ++w->next_seq;
		w->admin_busy = true;
		w->admin_seq = m.seq;
		w->admin_deadline = s->now + w->request_timeout_ms;
		sim_ctl_send(s, w->admin_guess, &m);
	}
	schedule_admin(s, s->now + keel_rng_between(&s->rng, 2 * timeout_ms(s), 8 * timeout_ms(s)));
}

void sim_ctl_heal(struct sim *s)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	w->broker_faults_on = false;
	w->admin_on = false;
	for (uint32_t i = 0; i < w->n_brokers; i++) {
		struct sim_broker *b = &w->brokers[i];
		if (!b->alive) {
			broker_start(s, b);
		}
		b->paused = false;
		/* A broker in a controlled shutdown finishes it (it cannot be
		 * unfenced before it restarts), then restarts. */
	}
}

bool sim_ctl_settled(struct sim *s, char *why, size_t why_size)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	const struct sim_node *l = NULL;
	uint64_t last_proposed = 0;
	for (uint32_t id = 1; id <= s->n_slots; id++) {
		const struct sim_node *n = &s->nodes[id];
		const struct meta_controller *ctl;
		uint64_t last = 0;
		if (n->up && sim_node_controller(n, &ctl, &last)) {
			l = n;
			last_proposed = last;
		}
	}
	if (l == NULL) {
		snprintf(why, why_size, "no active controller");
		return false;
	}
	if (last_proposed > l->sm.applied) {
		snprintf(why, why_size, "controller on node %llu has batches in flight",
			 (unsigned long long)l->id);
		return false;
	}
	for (uint32_t i = 0; i < w->n_brokers; i++) {
		const struct sim_broker *b = &w->brokers[i];
		if (!b->registered) {
			snprintf(why, why_size, "broker %d is not registered", b->id);
			return false;
		}
	}
	return sim_ctl_image_settled(w, l->sm.image, why, why_size);
}

/* ---- setup ---- */

void sim_ctl_world_new(struct sim *s)
{
	struct sim_ctl_world *w = calloc(1, sizeof(*w));
	KEEL_ASSERT(w != NULL);
	s->ctlw = w;
	struct meta_controller_config *cfg = &w->cfg;
	meta_controller_config_default(cfg);
	cfg->session_timeout_ms = (int64_t)keel_rng_between(&s->rng, 600, SIM_CTL_SESSION_MAX_MS);
	cfg->rebalance_interval_ms =
		keel_rng_chance(&s->rng, 1, 2) ? (int64_t)keel_rng_between(&s->rng, 1000, 4000) : 0;
	cfg->noop_interval_ms =
		keel_rng_chance(&s->rng, 1, 3) ? (int64_t)keel_rng_between(&s->rng, 500, 2000) : 0;
	/* Every decision here fits one batch (6 brokers, 16 partitions). A cap
	 * below a decision's size splits it — a fence in one batch, the
	 * elections it forces in the next — and the log then shows a fenced
	 * broker leading between the two (found with caps of 2-8; see
	 * docs/simulator.md): the cap stays at or above 64 here. */
	cfg->max_records_per_batch = (uint32_t)keel_rng_between(&s->rng, 64, 20000);
}

const struct meta_controller_config *sim_ctl_config(const struct sim *s)
{
	return &sim_ctlw(s)->cfg;
}

void sim_ctl_world_init(struct sim *s)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	const struct meta_controller_config *cfg = &w->cfg;
	w->heartbeat_ms = (uint64_t)cfg->session_timeout_ms / keel_rng_between(&s->rng, 3, 5);
	w->request_timeout_ms = keel_rng_between(&s->rng, 2 * timeout_ms(s), 6 * timeout_ms(s));
	w->broker_faults_on = true;
	w->admin_on = true;
	w->n_brokers = (uint32_t)keel_rng_between(&s->rng, 3, SIM_MAX_BROKERS);
	uint64_t racks = keel_rng_between(&s->rng, 1, 3);
	for (uint32_t i = 0; i < w->n_brokers; i++) {
		struct sim_broker *b = &w->brokers[i];
		b->id = (int32_t)(i + 1);
		if (racks > 1) {
			snprintf(b->rack, sizeof(b->rack), "r%u", (unsigned)(i % racks));
		}
		broker_start(s, b);
		sim_schedule(s, s->now + keel_rng_below(&s->rng, 200), SIM_EV_BROKER, (uint64_t)b->id,
			     0, NULL);
	}
	w->admin_guess = random_server(s);
	keel_arena_init(&w->arena, 16384);
	sim_ctl_check_init(w);
	sim_schedule(s, s->now + keel_rng_between(&s->rng, 2 * timeout_ms(s), 6 * timeout_ms(s)),
		     SIM_EV_BROKER_FAULT, 0, 0, NULL);
	schedule_admin(s, s->now + keel_rng_between(&s->rng, 100, 500));
}

void sim_ctl_world_free(struct sim *s)
{
	struct sim_ctl_world *w = sim_ctlw(s);
	if (w == NULL) {
		return;
	}
	for (uint32_t i = 0; i < w->n_brokers; i++) {
		if (w->brokers[i].has_follower) {
			meta_follower_close(&w->brokers[i].follower);
		}
	}
	for (size_t i = 0; i < w->n_log; i++) {
		free(w->log[i].data);
	}
	free(w->log);
	sim_ctl_check_free(w);
	keel_arena_close(&w->arena);
	free(w);
	s->ctlw = NULL;
}

void sim_ctl_report(const struct sim *s, char *out, size_t size)
{
	const struct sim_ctl_world *w = sim_ctlw(s);
	snprintf(out, size,
		 " ctl_batches=%llu controllers=%llu brokers=%u registrations=%llu fences=%llu "
		 "leader_changes=%llu isr_changes=%llu shutdowns=%llu kills=%llu topics=%llu "
		 "roles=%llu",
		 (unsigned long long)w->stat_batches, (unsigned long long)w->stat_controllers,
		 w->n_brokers, (unsigned long long)w->stat_registrations,
		 (unsigned long long)w->stat_fences, (unsigned long long)w->stat_leader_changes,
		 (unsigned long long)w->stat_isr_changes, (unsigned long long)w->stat_shutdowns,
		 (unsigned long long)w->stat_broker_kills, (unsigned long long)w->stat_topics,
		 (unsigned long long)w->stat_role_changes);
}
