/*
 * replica.c — replication in the broker core: the leader's view of its
 * followers (progress, high watermark, the ISR it wants), and the
 * follower's side (the requests it sends its leader and what it does with
 * the answers). Pure: time comes in with broker_core_set_time; the shell
 * (src/cli/broker_fetcher.c) owns the connections.
 *
 * Leader. A follower's fetch offset is its durable log end (it fetches the
 * next range only after its fdatasync), so
 *
 *     high watermark = min(own durable end, log end of every other ISR member)
 *
 * counts only fsynced copies, and never goes down while this broker leads.
 * A follower is caught up at time T when its fetch at T asked for the
 * leader's log end then, or when it has reached the log end the leader had
 * at its previous fetch (Kafka's lastCaughtUpTime). The ISR itself is the
 * image's: the leader asks the controller to change it (AlterPartition)
 * and adopts what the next image says — it never changes it on its own.
 *
 * Follower, per partition:
 *
 *   TRUNCATE --OffsetForLeaderEpoch(last epoch in our log) answered-->
 *            cut the log where it diverges (KIP-101/279) --> FETCH
 *   FETCH --fetch answered--> append the leader's batches as they are
 *         --OFFSET_OUT_OF_RANGE--> below the leader's start: empty the log
 *           there; else TRUNCATE again
 *   any state --new leader or leader epoch in the image--> TRUNCATE
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "broker/broker.h"
#include "meta/fmt.h"
#include "meta/stats.h"

#define ALLOC_ARRAY(arena, ptr, n)  ((ptr) = keel_arena_alloc((arena), (size_t)(n) * sizeof(*(ptr))))

#define REPLICA_FETCH_MAX_BYTES     (16 << 20)
#define REPLICA_PARTITION_MAX_BYTES (1 << 20)
#define DEFAULT_LAG_TIME_MAX_MS     10000

void broker_core_set_time(struct broker_core *core, int64_t now_ms)
{
	core->now_ms = now_ms;
}

static bool parse_ms(const char *text, int64_t *out)
{
	if (text == NULL || *text == '\0') {
		return false;
	}
	int64_t v = 0;
	for (const char *c = text; *c != '\0'; c++) {
		if (*c < '0' || *c > '9' || v > INT64_MAX / 10 - 10) {
			return false;
		}
		v = v * 10 + (*c - '0');
	}
	*out = v;
	return true;
}

int64_t broker_replica_lag_time_max_ms(const struct meta_image *img, int32_t node_id)
{
	char id[16];
	struct meta_fmt f;
	meta_fmt_init(&f, id, sizeof(id));
	meta_fmt_i64(&f, node_id);
	int64_t v = DEFAULT_LAG_TIME_MAX_MS;
	if (!parse_ms(meta_image_config(img, META_RESOURCE_BROKER, id, "replica.lag.time.max.ms"),
	              &v)) {
		(void)parse_ms(
		        meta_image_config(img, META_RESOURCE_BROKER, "", "replica.lag.time.max.ms"),
		        &v);
	}
	return v;
}

/* ---- taking the image ---- */

static void mark_dirty(struct broker_core *core, struct broker_partition *p)
{
	if (!p->dirty) {
		p->dirty = true;
		p->sync_err = KEEL_OK;
		core->dirty_count++;
	}
}

static int32_t replica_slot(const struct broker_partition *p, int32_t id)
{
	for (uint32_t i = 0; i < p->replica_count; i++) {
		if (p->replicas[i] == id) {
			return (int32_t)i;
		}
	}
	return -1;
}

/* Kafka's follower.replication.throttled.replicas and
 * leader.replication.throttled.replicas (`key`): "*" or "P:B,P:B,...", the
 * (partition, broker) pairs whose replication is throttled — on the
 * follower side when B is this follower, on the leader side when B is this
 * leader. */
static bool replica_throttled(const struct broker_core *core, const char *topic, int32_t index,
                              const char *key)
{
	const char *v = meta_image_config(&core->image, META_RESOURCE_TOPIC, topic, key);
	if (v == NULL) {
		return false;
	}
	while (*v == ' ') {
		v++;
	}
	if (strcmp(v, "*") == 0) {
		return true;
	}
	while (*v != '\0') {
		char *end = NULL;
		long part = strtol(v, &end, 10);
		if (end == v || *end != ':') {
			return false; /* not the format: nothing throttled */
		}
		v = end + 1;
		long broker = strtol(v, &end, 10);
		if (end == v) {
			return false;
		}
		if (part == index && broker == core->config.node_id) {
			return true;
		}
		v = *end == ',' ? end + 1 : end;
		if (*end != ',' && *end != '\0') {
			return false;
		}
	}
	return false;
}

void broker_replica_adopt(struct broker_core *core, struct broker_partition *p, const char *topic,
                          const struct meta_partition *mp, bool new_term)
{
	p->throttled =
	        replica_throttled(core, topic, p->index, "follower.replication.throttled.replicas");
	p->leader_throttled =
	        replica_throttled(core, topic, p->index, "leader.replication.throttled.replicas");
	KEEL_ASSERT(mp->replica_count <= META_MAX_REPLICAS);
	KEEL_ASSERT(mp->isr_count <= META_MAX_REPLICAS);
	/* Progress follows the replica, not its slot, across reassignments. */
	struct broker_replica old[META_MAX_REPLICAS];
	int32_t old_ids[META_MAX_REPLICAS];
	uint32_t old_count = p->replica_count;
	memcpy(old, p->progress, sizeof(old));
	memcpy(old_ids, p->replicas, sizeof(old_ids));
	if (p->partition_epoch != mp->partition_epoch || new_term) {
		p->alter_sent_ms = -1; /* the image answered (or moved on) */
	}
	p->leader_id = mp->leader;
	p->partition_epoch = mp->partition_epoch;
	p->recovery_state = mp->leader_recovery_state;
	p->min_isr = meta_min_isr(&core->image, topic);
	const char *policy =
	        meta_image_config(&core->image, META_RESOURCE_TOPIC, topic, "flush.policy");
	if (policy == NULL) {
		policy = meta_image_config(&core->image, META_RESOURCE_BROKER, "", "flush.policy");
	}
	p->replication_flush = policy != NULL && strcmp(policy, "replication") == 0;
	p->replica_count = mp->replica_count;
	memcpy(p->replicas, mp->replicas, mp->replica_count * sizeof(int32_t));
	p->isr_count = mp->isr_count;
	memcpy(p->isr, mp->isr, mp->isr_count * sizeof(int32_t));
	for (uint32_t i = 0; i < p->replica_count; i++) {
		struct broker_replica *r = &p->progress[i];
		*r = (struct broker_replica){-1, core->now_ms, -1, -1};
		for (uint32_t j = 0; j < old_count && !new_term; j++) {
			if (old_ids[j] == p->replicas[i]) {
				*r = old[j];
			}
		}
	}
	if (!p->open) {
		return;
	}
	if (new_term) {
		/* The high watermark this broker knew stays (it only rises). */
		p->high_watermark = KEEL_MAX(p->high_watermark, plog_log_start_offset(&p->log));
		p->high_watermark = KEEL_MIN(p->high_watermark, plog_durable_offset(&p->log));
		p->follow = BROKER_FOLLOW_TRUNCATE;
		if (p->leader && p->leader_epoch >= 0) {
			/* Kafka's makeLeader: the epoch starts at the log end. */
			(void)plog_assign_epoch(&p->log, p->leader_epoch);
		}
	}
	if ((p->leader || !p->replication_flush) &&
	    plog_durable_offset(&p->log) < plog_log_end_offset(&p->log)) {
		/* What a follower under flush.policy=replication fetched is not
		 * synced: a leader counts only its durable end, and a follower
		 * under the default policy reports only its durable end. */
		mark_dirty(core, p);
	}
	if (p->leader) {
		broker_replica_update_hw(core, p);
	}
}

/* ---- leader ---- */

void broker_replica_update_hw(struct broker_core *core, struct broker_partition *p)
{
	if (!p->leader || !p->open) {
		return;
	}
	int64_t hw = plog_durable_offset(&p->log);
	for (uint32_t i = 0; i < p->isr_count; i++) {
		int32_t id = p->isr[i];
		if (id == core->config.node_id) {
			continue;
		}
		int32_t slot = replica_slot(p, id);
		int64_t end = slot < 0 ? -1 : p->progress[slot].log_end_offset;
		if (end < 0) {
			return; /* not heard from at this epoch: no rise */
		}
		hw = KEEL_MIN(hw, end);
	}
	if (hw > p->high_watermark) {
		p->high_watermark = hw;
		core->hw_moved = true;
	}
}

void broker_replica_fetched_from(struct broker_core *core, struct broker_partition *p,
                                 int32_t replica_id, int64_t fetch_offset)
{
	int32_t slot = replica_slot(p, replica_id);
	if (slot < 0 || replica_id == core->config.node_id) {
		return;
	}
	struct broker_replica *r = &p->progress[slot];
	int64_t end = plog_log_end_offset(&p->log);
	if (fetch_offset >= end) {
		r->caught_up_ms = core->now_ms;
	} else if (r->fetch_ms >= 0 && fetch_offset >= r->leader_end_at_fetch) {
		r->caught_up_ms = KEEL_MAX(r->caught_up_ms, r->fetch_ms);
	}
	r->fetch_ms = core->now_ms;
	r->leader_end_at_fetch = end;
	r->log_end_offset = KEEL_MIN(fetch_offset, end);
	core->stats.follower_fetches++;
	broker_replica_update_hw(core, p);
}

/* ---- leader-side throttle (leader.replication.throttled.*) ---- */

/* Whether replica_id's fetch of p is under the leader throttle: p is in
 * leader.replication.throttled.replicas for this broker, a rate is set,
 * and the follower is not in the ISR (Kafka throttles only the replicas
 * that are catching up, never the ones acks=all waits for). */
static bool leader_throttles(const struct broker_core *core, const struct broker_partition *p,
                             int32_t replica_id)
{
	return p->leader && p->leader_throttled && core->leader_throttle_rate > 0 &&
	       !meta_list_contains(p->isr, p->isr_count, replica_id);
}

uint64_t broker_leader_throttle_budget(const struct broker_core *core,
                                       const struct broker_partition *p, int32_t replica_id,
                                       int32_t max_wait_ms, uint64_t max_bytes)
{
	if (!leader_throttles(core, p, replica_id)) {
		return max_bytes;
	}
	if (core->now_ms < core->leader_throttle_next_ms) {
		return 0; /* the budget is spent: nothing now, the follower asks again */
	}
	/* As much as the rate allows over the follower's wait, so that an
	 * answer per wait keeps the rate (at least a batch's worth). */
	int64_t window_ms = KEEL_MIN(KEEL_MAX(max_wait_ms, 100), 10000);
	int64_t rate = KEEL_MIN(core->leader_throttle_rate, INT64_C(1) << 40); /* no overflow */
	int64_t chunk = KEEL_MAX(rate * window_ms / 1000, 1024);
	return KEEL_MIN(max_bytes, (uint64_t)chunk);
}

void broker_leader_throttle_charge(struct broker_core *core, const struct broker_partition *p,
                                   int32_t replica_id, uint64_t bytes)
{
	if (bytes == 0 || !leader_throttles(core, p, replica_id)) {
		return;
	}
	core->leader_throttle_next_ms = KEEL_MAX(core->leader_throttle_next_ms, core->now_ms) +
	                                (int64_t)bytes * 1000 / core->leader_throttle_rate;
	core->leader_throttled_bytes += bytes;
}

/* Where this leader's epoch starts in its log (its log end if it has not
 * appended at this epoch yet). */
static int64_t epoch_start(const struct broker_partition *p)
{
	const struct plog_epochs *e = &p->log.epochs;
	if (e->count > 0 && e->entries[e->count - 1].epoch == p->leader_epoch) {
		return e->entries[e->count - 1].start_offset;
	}
	return plog_log_end_offset(&p->log);
}

uint32_t broker_replica_wanted_isr(const struct broker_core *core, const struct broker_partition *p,
                                   int32_t *isr)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < p->replica_count; i++) {
		int32_t id = p->replicas[i];
		const struct broker_replica *r = &p->progress[i];
		bool in = meta_list_contains(p->isr, p->isr_count, id);
		bool keep;
		if (id == core->config.node_id) {
			keep = true;
		} else if (in) {
			keep = core->now_ms - r->caught_up_ms <= core->replica_lag_time_max_ms;
		} else {
			keep = r->log_end_offset >= 0 && r->log_end_offset >= p->high_watermark &&
			       r->log_end_offset >= epoch_start(p) &&
			       meta_image_broker_active(&core->image, id);
		}
		if (keep) {
			isr[n++] = id;
		}
	}
	return n;
}

static bool same_set(const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb)
{
	if (na != nb) {
		return false;
	}
	for (uint32_t i = 0; i < na; i++) {
		if (!meta_list_contains(b, nb, a[i])) {
			return false;
		}
	}
	return true;
}

/* The AlterPartition item for p, or false when its ISR is as wanted. */
static bool isr_item(struct broker_core *core, struct broker_partition *p, int64_t resend_ms,
                     struct keel_arena *arena, struct meta_alter_partition_item *item)
{
	if (!p->leader || !p->open || p->leader_epoch < 0) {
		return false;
	}
	if (p->alter_sent_ms >= 0 && core->now_ms - p->alter_sent_ms < resend_ms) {
		return false;
	}
	int32_t want[META_MAX_REPLICAS];
	uint32_t n = broker_replica_wanted_isr(core, p, want);
	bool same = same_set(want, n, p->isr, p->isr_count);
	if (same && p->recovery_state == META_RECOVERED) {
		return false;
	}
#ifdef KEEL_PLANT_BUG_ISR_SHRINK_BY_LEADER
	/* PLANTED BUG: the leader drops lagging replicas from its ISR on its
	 * own, without the controller (whose ISR keeps them, so it may elect
	 * one later), and counts acks=all against the smaller set. */
	if (n < p->isr_count) {
		memcpy(p->isr, want, n * sizeof(int32_t));
		p->isr_count = n;
		broker_replica_update_hw(core, p);
		return false;
	}
#endif
	int32_t *copy = keel_arena_dup(arena, want, (size_t)n * sizeof(int32_t));
	if (copy == NULL) {
		return false;
	}
	for (uint32_t i = 0; i < n; i++) {
		core->stats.isr_expands += !meta_list_contains(p->isr, p->isr_count, want[i]);
	}
	for (uint32_t i = 0; i < p->isr_count; i++) {
		core->stats.isr_shrinks += !meta_list_contains(want, n, p->isr[i]);
	}
	*item = (struct meta_alter_partition_item){
	        p->index, p->leader_epoch, p->partition_epoch, copy, n, META_RECOVERED};
	p->alter_sent_ms = core->now_ms;
	return true;
}

bool broker_replica_isr_request(struct broker_core *core, int64_t broker_epoch, int64_t resend_ms,
                                struct keel_arena *arena, struct keel_wbuf *w)
{
	struct meta_alter_partition_topic *topics = NULL;
	struct meta_alter_partition_item *items = NULL;
	uint32_t topic_count = 0, item_count = 0;
	if (core->part_count == 0 || ALLOC_ARRAY(arena, topics, core->part_count) == NULL ||
	    ALLOC_ARRAY(arena, items, core->part_count) == NULL) {
		return false;
	}
	/* parts are sorted by (topic, index): one topic entry per run. */
	for (uint32_t i = 0; i < core->part_count; i++) {
		struct broker_partition *p = core->parts[i];
		if (!isr_item(core, p, resend_ms, arena, &items[item_count])) {
			continue;
		}
		struct meta_alter_partition_topic *t =
		        topic_count > 0 ? &topics[topic_count - 1] : NULL;
		if (t == NULL || memcmp(t->topic_id, p->topic_id, 16) != 0) {
			t = &topics[topic_count++];
			memcpy(t->topic_id, p->topic_id, 16);
			t->partitions = &items[item_count];
			t->partition_count = 0;
		}
		t->partition_count++;
		item_count++;
	}
	if (item_count == 0) {
		return false;
	}
	struct meta_alter_partition_request rq = {core->config.node_id, broker_epoch, topics,
	                                          topic_count};
	return meta_encode_alter_partition_request(w, &rq) == KEEL_OK;
}

/* ---- follower ---- */

static bool follows(const struct broker_partition *p, int32_t leader_id)
{
	return p->open && !p->leader && p->leader_id == leader_id && leader_id >= 0 &&
	       p->log.state == PLOG_OPEN;
}

uint32_t broker_replica_leaders(const struct broker_core *core, int32_t *out, uint32_t cap)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < core->part_count; i++) {
		const struct broker_partition *p = core->parts[i];
		if (!follows(p, p->leader_id) || meta_list_contains(out, n, p->leader_id)) {
			continue;
		}
		if (n < cap) {
			out[n++] = p->leader_id;
		}
	}
	return n;
}

bool broker_replica_endpoint(const struct broker_core *core, int32_t broker_id, const char **host,
                             uint16_t *port)
{
	const struct meta_broker *b =
	        core->has_image ? meta_image_broker(&core->image, broker_id) : NULL;
	if (b == NULL) {
		return false;
	}
	for (uint32_t i = 0; i < b->endpoint_count; i++) {
		/* SASL_PLAINTEXT: the fetcher authenticates first (cli/broker_fetcher.h). */
		if (b->endpoints[i].security_protocol == META_SEC_PLAINTEXT ||
		    b->endpoints[i].security_protocol == META_SEC_SASL_PLAINTEXT) {
			*host = b->endpoints[i].host;
			*port = b->endpoints[i].port;
			return true;
		}
	}
	return false;
}

/* The partitions following leader_id in `state`, grouped by topic: fills
 * topics (one per run of a name) through the callback's per-partition slot. */
/* A throttled partition waits while the throttle's budget is spent. */
static bool held_back(const struct broker_core *core, const struct broker_partition *p)
{
	return p->follow == BROKER_FOLLOW_FETCH && p->throttled && core->throttle_rate > 0 &&
	       core->now_ms < core->throttle_next_ms;
}

static uint32_t count_following(const struct broker_core *core, int32_t leader_id,
                                enum broker_follow_state state, uint32_t *topics)
{
	uint32_t n = 0;
	*topics = 0;
	const char *last = NULL;
	for (uint32_t i = 0; i < core->part_count; i++) {
		const struct broker_partition *p = core->parts[i];
		if (!follows(p, leader_id) || p->follow != state || held_back(core, p)) {
			continue;
		}
		if (last == NULL || strcmp(last, p->topic) != 0) {
			(*topics)++;
			last = p->topic;
		}
		n++;
	}
	return n;
}

#ifdef KEEL_PLANT_BUG_TRUNCATE_TO_HW
/* PLANTED BUG: a follower cuts its log at its high watermark (Kafka before
 * KIP-101) instead of asking the leader where the logs diverge. */
static void truncate_to_hw(struct broker_core *core, int32_t leader_id)
{
	for (uint32_t i = 0; i < core->part_count; i++) {
		struct broker_partition *p = core->parts[i];
		if (follows(p, leader_id) && p->follow == BROKER_FOLLOW_TRUNCATE) {
			int64_t to = KEEL_MAX(p->high_watermark, plog_log_start_offset(&p->log));
			if (to < plog_log_end_offset(&p->log) &&
			    plog_truncate(&p->log, to) == KEEL_OK) {
				core->stats.truncations++;
			}
			p->follow = BROKER_FOLLOW_FETCH;
		}
	}
}
#endif

/* Whether p's topic differs from the current run's. */
static bool starts_topic(struct kafka_str current, const struct broker_partition *p)
{
	return current.len != (int32_t)strlen(p->topic) ||
	       memcmp(current.ptr, p->topic, (size_t)current.len) != 0;
}

static bool epoch_request(struct broker_core *core, int32_t leader_id, uint32_t n,
                          uint32_t topic_count, struct keel_arena *arena, struct kafka_request *req)
{
	struct kafka_offset_for_leader_epoch_request *rq = &req->body.offset_for_leader_epoch;
	memset(rq, 0, sizeof(*rq));
	rq->replica_id = core->config.node_id;
	struct kafka_offset_for_leader_partition *parts;
	if (ALLOC_ARRAY(arena, rq->topics, topic_count) == NULL ||
	    ALLOC_ARRAY(arena, parts, n) == NULL) {
		return false;
	}
	struct kafka_offset_for_leader_topic *t = NULL;
	for (uint32_t i = 0; i < core->part_count; i++) {
		struct broker_partition *p = core->parts[i];
		if (!follows(p, leader_id) || p->follow != BROKER_FOLLOW_TRUNCATE) {
			continue;
		}
		if (t == NULL || starts_topic(t->topic, p)) {
			t = &rq->topics[rq->topic_count++];
			t->topic = kafka_str(p->topic);
			t->partitions = parts;
			t->partition_count = 0;
		}
		*parts++ = (struct kafka_offset_for_leader_partition){
		        p->index, p->leader_epoch, plog_epochs_latest(&p->log.epochs)};
		t->partition_count++;
	}
	req->header.api_key = KAFKA_API_OFFSET_FOR_LEADER_EPOCH;
	req->header.api_version = 3;
	return true;
}

static bool fetch_request(struct broker_core *core, int32_t leader_id, int32_t max_wait_ms,
                          uint32_t n, uint32_t topic_count, struct keel_arena *arena,
                          struct kafka_request *req)
{
	struct kafka_fetch_request *rq = &req->body.fetch;
	memset(rq, 0, sizeof(*rq));
	rq->replica_id = core->config.node_id;
	rq->max_wait_ms = max_wait_ms;
	rq->min_bytes = 1;
	rq->max_bytes = REPLICA_FETCH_MAX_BYTES;
	rq->isolation_level = 0;
	rq->session_id = 0;
	rq->session_epoch = -1; /* full fetches, no session */
	rq->rack_id = kafka_str("");
	rq->cluster_id = KAFKA_STR_NULL;
	struct kafka_fetch_partition *parts;
	if (ALLOC_ARRAY(arena, rq->topics, topic_count) == NULL ||
	    ALLOC_ARRAY(arena, parts, n) == NULL) {
		return false;
	}
	struct kafka_fetch_topic *t = NULL;
	for (uint32_t i = 0; i < core->part_count; i++) {
		struct broker_partition *p = core->parts[i];
		if (!follows(p, leader_id) || p->follow != BROKER_FOLLOW_FETCH || held_back(core, p)) {
			continue;
		}
		/* A throttled partition asks for a quarter second of its rate. */
		int32_t max_bytes = REPLICA_PARTITION_MAX_BYTES;
		if (p->throttled && core->throttle_rate > 0) {
			max_bytes = (int32_t)KEEL_MIN(max_bytes, KEEL_MAX(core->throttle_rate / 4, 1024));
		}
		/* Only durable data is reported: the fetch offset is the durable
		 * end (the shell fetches only when nothing is dirty) — unless
		 * flush.policy=replication, where the log end is reported
		 * (Kafka's page-cache acknowledgement). */
		KEEL_ASSERT(!p->dirty);
		KEEL_ASSERT(p->replication_flush ||
		            plog_durable_offset(&p->log) == plog_log_end_offset(&p->log));
		if (t == NULL || starts_topic(t->topic, p)) {
			t = &rq->topics[rq->topic_count++];
			t->topic = kafka_str(p->topic);
			t->partitions = parts;
			t->partition_count = 0;
		}
		*parts++ = (struct kafka_fetch_partition){p->index,
		                                          p->leader_epoch,
		                                          plog_log_end_offset(&p->log),
		                                          -1,
		                                          plog_log_start_offset(&p->log),
		                                          max_bytes};
		t->partition_count++;
	}
	req->header.api_key = KAFKA_API_FETCH;
	req->header.api_version = 11;
	return true;
}

bool broker_replica_request(struct broker_core *core, int32_t leader_id, int32_t max_wait_ms,
                            struct keel_arena *arena, struct kafka_request *req)
{
	memset(&req->header, 0, sizeof(req->header));
	uint32_t topics = 0;
#ifdef KEEL_PLANT_BUG_TRUNCATE_TO_HW
	truncate_to_hw(core, leader_id);
#endif
	uint32_t n = count_following(core, leader_id, BROKER_FOLLOW_TRUNCATE, &topics);
	if (n > 0) {
		return epoch_request(core, leader_id, n, topics, arena, req);
	}
	n = count_following(core, leader_id, BROKER_FOLLOW_FETCH, &topics);
	if (n == 0) {
		return false;
	}
	return fetch_request(core, leader_id, max_wait_ms, n, topics, arena, req);
}

int64_t broker_replica_throttle_wait_ms(const struct broker_core *core, int32_t leader_id)
{
	for (uint32_t i = 0; i < core->part_count; i++) {
		const struct broker_partition *p = core->parts[i];
		if (follows(p, leader_id) && held_back(core, p)) {
			return core->throttle_next_ms - core->now_ms;
		}
	}
	return 0;
}

static bool str_same(struct kafka_str a, struct kafka_str b)
{
	return a.len == b.len && (a.len <= 0 || memcmp(a.ptr, b.ptr, (size_t)a.len) == 0);
}

static void report_error(struct broker_replica_report *rep, const struct broker_partition *p,
                         const char *what, const char *detail)
{
	rep->errors++;
	struct meta_fmt f;
	meta_fmt_init(&f, rep->why, sizeof(rep->why));
	meta_fmt_str(&f, p->topic);
	meta_fmt_char(&f, '-');
	meta_fmt_i64(&f, p->index);
	meta_fmt_str(&f, ": ");
	meta_fmt_str(&f, what);
	if (detail != NULL) {
		meta_fmt_str(&f, ": ");
		meta_fmt_str(&f, detail);
	}
}

/* The partition an answer is for, if this broker still follows leader_id
 * there at the epoch the request was sent with. */
static struct broker_partition *answered(struct broker_core *core, int32_t leader_id,
                                         struct kafka_str topic, int32_t index, int32_t sent_epoch,
                                         enum broker_follow_state state)
{
	struct broker_partition *p = broker_core_partition(core, topic, index);
	if (p == NULL || !follows(p, leader_id) || p->leader_epoch != sent_epoch ||
	    p->follow != state) {
		return NULL;
	}
	return p;
}

static void cut(struct broker_core *core, struct broker_partition *p, int64_t to,
                struct broker_replica_report *rep)
{
	int64_t end = plog_log_end_offset(&p->log);
	if (to >= end) {
		return;
	}
	to = KEEL_MAX(to, plog_log_start_offset(&p->log));
	if (plog_truncate(&p->log, to) != KEEL_OK) {
		report_error(rep, p, "cannot truncate", plog_why(&p->log));
		return;
	}
	core->stats.truncations++;
	core->stats.truncated_offsets += (uint64_t)(end - plog_log_end_offset(&p->log));
	rep->truncated_partitions++;
	p->high_watermark = KEEL_MIN(p->high_watermark, plog_log_end_offset(&p->log));
}

/* KIP-279: the leader says its log at `epoch` (the largest it knows at or
 * below ours) ends at `end`: ours must end no later than that, nor later
 * than where our own `epoch` ends. */
static void truncate_by_epoch(struct broker_core *core, struct broker_partition *p,
                              const struct kafka_epoch_end_offset *e,
                              struct broker_replica_report *rep)
{
	int32_t ours = plog_epochs_latest(&p->log.epochs);
	if (ours < 0) {
		p->follow = BROKER_FOLLOW_FETCH; /* nothing of ours to doubt */
		return;
	}
	if (e->end_offset < 0 || e->leader_epoch < 0) {
		/* The leader knows no epoch at or below ours: its log has none of
		 * our epochs; keep what the HW says was committed. */
		cut(core, p, p->high_watermark, rep);
		p->follow = BROKER_FOLLOW_FETCH;
		return;
	}
	int64_t to = e->end_offset;
	if (e->leader_epoch < ours) {
		int32_t found = -1;
		int64_t own_end = -1;
		plog_end_offset_for_epoch(&p->log, e->leader_epoch, &found, &own_end);
		if (own_end >= 0) {
			to = KEEL_MIN(to, own_end);
		}
	}
	cut(core, p, to, rep);
	p->follow = BROKER_FOLLOW_FETCH;
}

void broker_replica_epoch_answer(struct broker_core *core, int32_t leader_id,
                                 const struct kafka_offset_for_leader_epoch_request *rq,
                                 const struct kafka_offset_for_leader_epoch_response *rs,
                                 struct broker_replica_report *report)
{
	memset(report, 0, sizeof(*report));
	for (int32_t t = 0; t < rs->topic_count; t++) {
		const struct kafka_offset_for_leader_topic_result *rt = &rs->topics[t];
		for (int32_t i = 0; i < rt->partition_count; i++) {
			const struct kafka_epoch_end_offset *e = &rt->partitions[i];
			/* The epoch we sent for it. */
			int32_t sent = -2;
			for (int32_t a = 0; a < rq->topic_count && sent == -2; a++) {
				const struct kafka_offset_for_leader_topic *qt = &rq->topics[a];
				if (!str_same(qt->topic, rt->topic)) {
					continue;
				}
				for (int32_t b = 0; b < qt->partition_count; b++) {
					if (qt->partitions[b].partition == e->partition) {
						sent = qt->partitions[b].current_leader_epoch;
					}
				}
			}
			struct broker_partition *p =
			        answered(core, leader_id, rt->topic, e->partition, sent,
			                 BROKER_FOLLOW_TRUNCATE);
			if (p == NULL) {
				continue;
			}
			if (e->error_code != KAFKA_NONE) {
				report_error(report, p, "OffsetForLeaderEpoch",
				             kafka_error_name(e->error_code));
				continue;
			}
			truncate_by_epoch(core, p, e, report);
		}
	}
}

static void fetched_partition(struct broker_core *core, struct broker_partition *p,
                              const struct kafka_fetch_partition_data *d,
                              struct broker_replica_report *rep)
{
	if (d->error_code == KAFKA_OFFSET_OUT_OF_RANGE) {
		if (d->log_start_offset > plog_log_end_offset(&p->log)) {
			/* Behind the leader's log start: start over there. */
			if (plog_reset(&p->log, d->log_start_offset) != KEEL_OK) {
				report_error(rep, p, "cannot reset the log", plog_why(&p->log));
				return;
			}
			p->high_watermark = d->log_start_offset;
		} else {
			p->follow = BROKER_FOLLOW_TRUNCATE; /* ahead of the leader */
		}
		return;
	}
	if (d->error_code != KAFKA_NONE) {
		report_error(rep, p, "fetch", kafka_error_name(d->error_code));
		return;
	}
	if (d->records.data != NULL && d->records.size > 0) {
		struct plog_append_info info;
		enum keel_err err = plog_append_follower(&p->log, d->records.data,
		                                         (size_t)d->records.size, &info);
		if (err != KEEL_OK) {
			report_error(rep, p, "the leader's batches do not append",
			             plog_why(&p->log));
			if (p->log.state == PLOG_OPEN) {
				p->follow = BROKER_FOLLOW_TRUNCATE; /* find out where we are */
			}
			return;
		}
		if (!p->replication_flush) {
			mark_dirty(core, p); /* synced before the next fetch reports it */
		}
		rep->appended_partitions++;
		rep->appended_bytes += (uint64_t)d->records.size;
		core->stats.follower_bytes += (uint64_t)d->records.size;
		if (p->throttled && core->throttle_rate > 0) {
			/* The throttle: these bytes push the next throttled fetch
			 * back by size / rate. */
			core->throttle_next_ms = KEEL_MAX(core->throttle_next_ms, core->now_ms) +
			                         (int64_t)d->records.size * 1000 / core->throttle_rate;
			core->throttled_bytes += (uint64_t)d->records.size;
		}
	}
	if (d->high_watermark >= 0) {
		p->high_watermark = KEEL_MIN(d->high_watermark, plog_log_end_offset(&p->log));
	}
}

void broker_replica_fetch_answer(struct broker_core *core, int32_t leader_id,
                                 const struct kafka_fetch_request *rq,
                                 const struct kafka_fetch_response *rs,
                                 struct broker_replica_report *report)
{
	memset(report, 0, sizeof(*report));
	if (rs->error_code != KAFKA_NONE) {
		report->errors++;
		return;
	}
	for (int32_t t = 0; t < rs->topic_count; t++) {
		const struct kafka_fetch_topic_response *rt = &rs->topics[t];
		for (int32_t i = 0; i < rt->partition_count; i++) {
			const struct kafka_fetch_partition_data *d = &rt->partitions[i];
			int32_t sent = -2;
			int64_t sent_offset = -1;
			for (int32_t a = 0; a < rq->topic_count && sent == -2; a++) {
				const struct kafka_fetch_topic *qt = &rq->topics[a];
				if (!str_same(qt->topic, rt->topic)) {
					continue;
				}
				for (int32_t b = 0; b < qt->partition_count; b++) {
					if (qt->partitions[b].partition == d->partition_index) {
						sent = qt->partitions[b].current_leader_epoch;
						sent_offset = qt->partitions[b].fetch_offset;
					}
				}
			}
			struct broker_partition *p =
			        answered(core, leader_id, rt->topic, d->partition_index, sent,
			                 BROKER_FOLLOW_FETCH);
			if (p == NULL || plog_log_end_offset(&p->log) != sent_offset) {
				continue; /* moved on since (an image, a truncation) */
			}
			fetched_partition(core, p, d, report);
		}
	}
}
