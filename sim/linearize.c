/*
 * linearize.c — is a register history linearizable? (Wing & Gong's search
 * with Lowe's memoization, one register per key: keys are independent.)
 *
 * Input ops per key: writes that returned OK or whose outcome is UNKNOWN,
 * and reads that returned OK (failed ops had no effect and are left out).
 * An UNKNOWN write never returned (response = infinity): it may take effect
 * at any point after its invocation, or never. Values are unique per write,
 * so an UNKNOWN write that no read observed can always be left out (keeping
 * it can only make things harder) and is dropped up front.
 *
 * Search: the state is (set of ops linearized, register value). An op may
 * go next if it was invoked before every remaining op that returned had
 * returned (min response over remaining OK ops). A read must see the
 * current value. Success once every OK op is linearized. States already
 * explored are memoized by a 64-bit hash of (set, value).
 *
 * The search itself (sim_lin_search, linearize.h) knows nothing of the
 * register: a step function says whether an op may happen in a state and
 * what state follows, so the ZooKeeper checkers (zk_check.c) use the same
 * search with their own model of a znode.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"
#include "sim/linearize.h"
#include "sim/sim.h"

#define MAX_STATES 4000000u

/* A KV register op, for the step function. */
struct kv_op {
	bool write;
	uint64_t value;
};

struct search {
	const struct sim_lin_op *ops;
	sim_lin_step_fn step;
	void *ctx;
	size_t n;
	uint64_t *done; /* bitset */
	size_t words;
	size_t must_left;
	uint64_t *memo;
	size_t memo_cap;
	size_t memo_count;
	size_t explored;
	bool gave_up;
};

static bool bit(const uint64_t *set, size_t i)
{
	return (set[i / 64] >> (i % 64)) & 1;
}

static void flip(uint64_t *set, size_t i)
{
	set[i / 64] ^= 1ull << (i % 64);
}

static uint64_t state_hash(const struct search *st, uint64_t value)
{
	uint64_t h = keel_hash_bytes(st->done, st->words * 8, value);
	return h == 0 ? 1 : h;
}

static bool memo_has(const struct search *st, uint64_t h)
{
	size_t mask = st->memo_cap - 1;
	for (size_t i = (size_t)h & mask; st->memo[i] != 0; i = (i + 1) & mask) {
		if (st->memo[i] == h) {
			return true;
		}
	}
	return false;
}

static void memo_add(struct search *st, uint64_t h)
{
	if ((st->memo_count + 1) * 2 > st->memo_cap) {
		size_t cap = st->memo_cap * 2;
		uint64_t *memo = calloc(cap, sizeof(*memo));
		KEEL_ASSERT(memo != NULL);
		for (size_t i = 0; i < st->memo_cap; i++) {
			if (st->memo[i] != 0) {
				size_t j = (size_t)st->memo[i] & (cap - 1);
				while (memo[j] != 0) {
					j = (j + 1) & (cap - 1);
				}
				memo[j] = st->memo[i];
			}
		}
		free(st->memo);
		st->memo = memo;
		st->memo_cap = cap;
	}
	size_t mask = st->memo_cap - 1;
	size_t i = (size_t)h & mask;
	while (st->memo[i] != 0) {
		i = (i + 1) & mask;
	}
	st->memo[i] = h;
	st->memo_count++;
}

static bool dfs(struct search *st, uint64_t value)
{
	if (st->must_left == 0) {
		return true;
	}
	uint64_t h = state_hash(st, value);
	if (memo_has(st, h)) {
		return false;
	}
	if (++st->explored > MAX_STATES) {
		st->gave_up = true;
		return false;
	}
	uint64_t min_resp = SIM_TIME_INF;
	for (size_t i = 0; i < st->n; i++) {
		if (!bit(st->done, i) && st->ops[i].response < min_resp) {
			min_resp = st->ops[i].response;
		}
	}
	for (size_t i = 0; i < st->n && st->ops[i].invoke < min_resp; i++) {
		const struct sim_lin_op *o = &st->ops[i];
		uint64_t next = value;
		if (bit(st->done, i) || !st->step(st->ctx, o->op, value, &next)) {
			continue;
		}
		bool must = o->response != SIM_TIME_INF;
		flip(st->done, i);
		st->must_left -= must;
		bool ok = dfs(st, next);
		st->must_left += must;
		flip(st->done, i);
		if (ok) {
			return true;
		}
		if (st->gave_up) {
			return false;
		}
	}
	memo_add(st, h);
	return false;
}

static int cmp_invoke(const void *a, const void *b)
{
	const struct sim_lin_op *x = a, *y = b;
	return x->invoke < y->invoke ? -1 : x->invoke > y->invoke;
}

enum sim_lin_verdict sim_lin_search(struct sim_lin_op *ops, size_t n, uint64_t init,
				    sim_lin_step_fn step, void *ctx)
{
	struct search st;
	memset(&st, 0, sizeof(st));
	qsort(ops, n, sizeof(*ops), cmp_invoke);
	st.ops = ops;
	st.n = n;
	st.step = step;
	st.ctx = ctx;
	for (size_t i = 0; i < n; i++) {
		st.must_left += ops[i].response != SIM_TIME_INF;
	}
	st.words = (n + 63) / 64 + 1;
	st.done = calloc(st.words, sizeof(*st.done));
	st.memo_cap = 1024;
	st.memo = calloc(st.memo_cap, sizeof(*st.memo));
	KEEL_ASSERT(st.done != NULL && st.memo != NULL);
	bool ok = dfs(&st, init);
	free(st.done);
	free(st.memo);
	return ok ? SIM_LIN_OK : st.gave_up ? SIM_LIN_GAVE_UP : SIM_LIN_VIOLATION;
}

static bool kv_step(void *ctx, const void *op, uint64_t state, uint64_t *next)
{
	(void)ctx;
	const struct kv_op *o = op;
	if (o->write) {
		*next = o->value;
		return true;
	}
	return o->value == state;
}

static bool value_read(const struct sim_hist_op *ops, size_t n, uint32_t key, uint64_t value)
{
	for (size_t i = 0; i < n; i++) {
		if (ops[i].kind == SIM_READ && ops[i].status == SIM_OP_OK && ops[i].key == key &&
		    ops[i].value == value) {
			return true;
		}
	}
	return false;
}

static bool check_key(const struct sim_hist_op *ops, size_t n, uint32_t key, char *why,
		      size_t why_size)
{
	struct sim_lin_op *lops = calloc(n + 1, sizeof(*lops));
	struct kv_op *kv = calloc(n + 1, sizeof(*kv));
	KEEL_ASSERT(lops != NULL && kv != NULL);
	size_t count = 0;
	for (size_t i = 0; i < n; i++) {
		const struct sim_hist_op *h = &ops[i];
		if (h->key != key) {
			continue;
		}
		bool keep = (h->kind == SIM_READ && h->status == SIM_OP_OK) ||
			    (h->kind == SIM_WRITE && h->status == SIM_OP_OK) ||
			    (h->kind == SIM_WRITE && (h->status == SIM_OP_UNKNOWN ||
						      h->status == SIM_OP_PENDING) &&
			     value_read(ops, n, key, h->value));
		if (!keep) {
			continue;
		}
		kv[count] = (struct kv_op){h->kind == SIM_WRITE, h->value};
		lops[count] = (struct sim_lin_op){
			h->invoke, h->status == SIM_OP_OK ? h->response : SIM_TIME_INF, &kv[count]};
		count++;
	}
	/* A read of a value nobody wrote is wrong whatever the order. */
	for (size_t i = 0; i < count; i++) {
		if (kv[i].write || kv[i].value == 0) {
			continue;
		}
		bool found = false;
		for (size_t j = 0; j < count && !found; j++) {
			found = kv[j].write && kv[j].value == kv[i].value;
		}
		if (!found) {
			snprintf(why, why_size, "key %u: a read returned %llu, which no write wrote",
				 key, (unsigned long long)kv[i].value);
			free(lops);
			free(kv);
			return false;
		}
	}
	enum sim_lin_verdict v = sim_lin_search(lops, count, 0, kv_step, NULL);
	if (v != SIM_LIN_OK) {
		snprintf(why, why_size, "key %u: %zu ops %s", key, count,
			 v == SIM_LIN_GAVE_UP ? "too expensive to check (gave up)"
					      : "are not linearizable");
	}
	free(lops);
	free(kv);
	return v == SIM_LIN_OK;
}

bool sim_linearizable(const struct sim_hist_op *ops, size_t n, char *why, size_t why_size)
{
	for (uint32_t key = 0; key < SIM_KEYS; key++) {
		if (!check_key(ops, n, key, why, why_size)) {
			return false;
		}
	}
	return true;
}
