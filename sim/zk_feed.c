/*
 * zk_feed.c — the change feed under the ZooKeeper workload (zk_sim.h,
 * docs/change-feed.md).
 *
 * Every server of the cluster under test keeps its feed history (the real
 * struct zk_feed_log, appended as it applies); this file runs consumers
 * against those histories with the real cursor (zk_feed_cursor), as the
 * server's feed code does, and with the client's resume rule (after the
 * last position delivered, zk_feed_position_before), as kc_feed does:
 *
 *	SUBSCRIBE on its server (from the position after the last change it
 *	got; a server whose history no longer holds it: try the others; none
 *	does: an announced gap, as a consumer that restarts from the oldest)
 *	  -> READ a few changes at a time
 *	  -> now and then its server "dies": SUBSCRIBE on another one
 *	  -> now and then a server compacts its history (as after a snapshot)
 *
 * The checker: each consumer's output is exactly the committed changes
 * under its path (a reference history appended at commit), in position
 * order, each once, with the same Stat version and mzxid — except inside
 * the gaps it announced.
 *
 * Randomness is the feed's own PRNG, so the workload's runs (and their
 * traces) are the same with or without it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"
#include "sim/zk_sim.h"

static const char *const prefixes[SIMZK_FEED_CONSUMERS] = {"/", "/w", "/e"};

void simzk_feed_init(struct simzk_feed *f, uint64_t seed, enum simzk_bug bug)
{
	memset(f, 0, sizeof(*f));
	keel_rng_seed(&f->rng, seed);
	f->bug = bug;
	zk_feed_log_init(&f->ref, SIZE_MAX, 0);
	for (uint32_t i = 0; i < SIMZK_FEED_CONSUMERS; i++) {
		struct simzk_feed_consumer *c = &f->c[i];
		c->prefix = prefixes[i];
		c->flags = keel_rng_chance(&f->rng, 1, 2) ? ZK_FEED_CHILDREN : 0;
		c->next_zxid = 1;
	}
}

void simzk_feed_free(struct simzk_feed *f)
{
	zk_feed_log_close(&f->ref);
	for (uint32_t i = 0; i < SIMZK_FEED_CONSUMERS; i++) {
		free(f->c[i].got);
		free(f->c[i].gaps);
	}
}

size_t simzk_feed_history_bytes(struct simzk_feed *f)
{
	return (size_t)keel_rng_between(&f->rng, 16u << 10, 1u << 20);
}

void simzk_feed_on_commit(struct simzk_feed *f, const struct zk_state *st,
			  const struct zk_result *res)
{
	KEEL_ASSERT(zk_feed_log_append(&f->ref, st, res) == KEEL_OK);
}

static void *grow(void *p, size_t *cap, size_t need, size_t item)
{
	if (need <= *cap) {
		return p;
	}
	size_t cap2 = *cap == 0 ? 64 : *cap * 2;
	void *q = realloc(p, cap2 * item);
	KEEL_ASSERT(q != NULL);
	*cap = cap2;
	return q;
}

static void record(struct simzk_feed_consumer *c, const struct zk_feed_change *ch, uint32_t i)
{
	const struct zk_feed_rec *r = &ch->recs[i];
	c->got = grow(c->got, &c->got_cap, c->got_count + 1, sizeof(*c->got));
	struct zk_bytes path = zk_feed_rec_path(ch, r);
	c->got[c->got_count++] = (struct simzk_feed_got){
		.zxid = ch->zxid,
		.seq = (int32_t)i,
		.type = r->type,
		.path_hash = keel_hash_bytes(path.data, zk_bytes_len(path), 0),
		.version = r->stat.version,
		.mzxid = r->stat.mzxid,
	};
}

static void announce_gap(struct simzk_feed_consumer *c, int64_t to_zxid)
{
	c->gaps = grow(c->gaps, &c->gap_cap, c->gap_count + 1, sizeof(*c->gaps));
	c->gaps[c->gap_count++] = (struct simzk_feed_gap){c->next_zxid, c->next_seq, to_zxid};
	c->next_zxid = to_zxid + 1;
	c->next_seq = 0;
}

/* Subscribes on c->server, or the first server after it that holds the
 * consumer's position; none: an announced gap up to the oldest it holds. */
static void subscribe(struct simzk_feed *f, struct simzk_feed_consumer *c,
		      struct zk_feed_log *const *logs, uint32_t servers)
{
	uint32_t k = 0;
	while (k < servers && c->next_zxid < zk_feed_log_oldest(logs[(c->server + k) % servers])) {
		k++;
	}
	if (k == servers) {
		announce_gap(c, zk_feed_log_oldest(logs[c->server]) - 1);
		k = 0;
		c->gap_moves++;
	}
	c->server = (c->server + k) % servers;
	int64_t from_zxid = c->next_zxid;
	int32_t from_seq = c->next_seq;
	if (f->bug == SIMZK_BUG_FEED_RESUME_BY_ZXID && from_seq > 0) {
		/* PLANTED BUG: resume after the last transaction seen, not after
		 * the last change: the rest of a half-read multi is lost. */
		from_zxid++;
		from_seq = 0;
	}
	zk_feed_cursor_init(&c->cur, logs[c->server], from_zxid, from_seq, zk_bytes_str(c->prefix),
			    c->flags, NULL);
	c->subscribed = true;
}

/* Reads up to `max` changes (all with max 0). */
static void consume(struct simzk_feed *f, struct simzk_feed_consumer *c,
		    struct zk_feed_log *const *logs, uint32_t servers, uint64_t max)
{
	for (uint64_t n = 0; max == 0 || n < max; n++) {
		if (!c->subscribed) {
			subscribe(f, c, logs, servers);
		}
		const struct zk_feed_change *ch;
		uint32_t i;
		enum zk_feed_step step = zk_feed_cursor_next(&c->cur, logs[c->server], &ch, &i);
		if (step == ZK_FEED_STEP_END) {
			return;
		}
		if (step == ZK_FEED_STEP_COMPACTED) {
			c->subscribed = false;
			c->compacted++;
			continue;
		}
		if (zk_feed_position_before(ch->zxid, (int32_t)i, c->next_zxid, c->next_seq)) {
			continue; /* the client drops what it already has */
		}
		record(c, ch, i);
		c->next_zxid = ch->zxid;
		c->next_seq = (int32_t)i + 1;
	}
}

void simzk_feed_step(struct simzk_feed *f, struct zk_feed_log *const *logs, uint32_t servers)
{
	f->steps++;
	uint64_t r = keel_rng_below(&f->rng, 1000);
	if (r < 3) {
		/* A server compacts its history (a snapshot and its trailing log). */
		struct zk_feed_log *log = logs[keel_rng_below(&f->rng, servers)];
		int64_t keep = (int64_t)keel_rng_between(&f->rng, 20, 400);
		if (log->last_zxid > keep) {
			zk_feed_log_trim(log, log->last_zxid - keep);
		}
		return;
	}
	struct simzk_feed_consumer *c = &f->c[keel_rng_below(&f->rng, SIMZK_FEED_CONSUMERS)];
	if (r < 13 && f->steps >= c->stalled_until) {
		/* Its server dies: the next read is on another one. */
		c->server = (c->server + 1 + (uint32_t)keel_rng_below(&f->rng, servers)) % servers;
		c->subscribed = false;
		c->moves++;
		return;
	}
	if (r < 15) {
		/* It stops reading for a while (histories move on meanwhile). */
		c->stalled_until = f->steps + keel_rng_between(&f->rng, 100, 1500);
		return;
	}
	if (f->steps >= c->stalled_until) {
		consume(f, c, logs, servers, keel_rng_between(&f->rng, 1, 6));
	}
}

void simzk_feed_drain(struct simzk_feed *f, struct zk_feed_log *const *logs, uint32_t servers)
{
	for (uint32_t i = 0; i < SIMZK_FEED_CONSUMERS; i++) {
		consume(f, &f->c[i], logs, servers, 0);
	}
}

static bool in_gap(const struct simzk_feed_consumer *c, int64_t zxid, int32_t seq)
{
	for (size_t g = 0; g < c->gap_count; g++) {
		const struct simzk_feed_gap *gap = &c->gaps[g];
		if (!zk_feed_position_before(zxid, seq, gap->from_zxid, gap->from_seq) &&
		    zxid <= gap->to_zxid) {
			return true;
		}
	}
	return false;
}

static bool check_consumer(const struct simzk_feed *f, uint32_t n, char *why, size_t why_size)
{
	const struct simzk_feed_consumer *c = &f->c[n];
	struct zk_feed_cursor cur;
	zk_feed_cursor_init(&cur, &f->ref, 1, 0, zk_bytes_str(c->prefix), c->flags, NULL);
	size_t k = 0;
	const struct zk_feed_change *ch;
	uint32_t i;
	while (zk_feed_cursor_next(&cur, &f->ref, &ch, &i) == ZK_FEED_STEP_EVENT) {
		if (in_gap(c, ch->zxid, (int32_t)i)) {
			continue;
		}
		const struct zk_feed_rec *r = &ch->recs[i];
		struct zk_bytes path = zk_feed_rec_path(ch, r);
		if (k == c->got_count) {
			snprintf(why, why_size, "feed: consumer %u (%s) missed %lld.%u %s %.*s", n,
				 c->prefix, (long long)ch->zxid, i, zk_feed_type_name(r->type),
				 (int)zk_bytes_len(path), (const char *)path.data);
			return false;
		}
		const struct simzk_feed_got *g = &c->got[k++];
		if (g->zxid != ch->zxid || g->seq != (int32_t)i || g->type != r->type ||
		    g->path_hash != keel_hash_bytes(path.data, zk_bytes_len(path), 0) ||
		    g->version != r->stat.version || g->mzxid != r->stat.mzxid) {
			snprintf(why, why_size,
				 "feed: consumer %u (%s) change %zu is %lld.%d %s, expected %lld.%u %s "
				 "%.*s",
				 n, c->prefix, k - 1, (long long)g->zxid, g->seq,
				 zk_feed_type_name(g->type), (long long)ch->zxid, i,
				 zk_feed_type_name(r->type), (int)zk_bytes_len(path),
				 (const char *)path.data);
			return false;
		}
	}
	if (k != c->got_count) {
		snprintf(why, why_size, "feed: consumer %u (%s) got %zu changes, %zu committed", n,
			 c->prefix, c->got_count, k);
		return false;
	}
	return true;
}

bool simzk_check_feed(const struct simzk_feed *f, char *why, size_t why_size)
{
	for (uint32_t n = 0; n < SIMZK_FEED_CONSUMERS; n++) {
		if (!check_consumer(f, n, why, why_size)) {
			return false;
		}
	}
	return true;
}
