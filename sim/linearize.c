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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"
#include "sim/sim.h"

#define MAX_STATES 4000000u

struct lop {
	uint64_t invoke;
	uint64_t response; /* SIM_TIME_INF: unknown */
	bool write;
	uint64_t value;
	size_t hist_index;
};

struct search {
	struct lop *ops;
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
		const struct lop *o = &st->ops[i];
		if (bit(st->done, i) || (!o->write && o->value != value)) {
			continue;
		}
		bool must = o->response != SIM_TIME_INF;
		flip(st->done, i);
		st->must_left -= must;
		bool ok = dfs(st, o->write ? o->value : value);
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
	const struct lop *x = a, *y = b;
	return x->invoke < y->invoke ? -1 : x->invoke > y->invoke;
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
	struct search st;
	memset(&st, 0, sizeof(st));
	st.ops = calloc(n + 1, sizeof(*st.ops));
	KEEL_ASSERT(st.ops != NULL);
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
		struct lop *o = &st.ops[st.n++];
		o->invoke = h->invoke;
		o->response = h->status == SIM_OP_OK ? h->response : SIM_TIME_INF;
		o->write = h->kind == SIM_WRITE;
		o->value = h->value;
		o->hist_index = i;
		st.must_left += h->status == SIM_OP_OK;
	}
	qsort(st.ops, st.n, sizeof(*st.ops), cmp_invoke);
	/* A read of a value nobody wrote is wrong whatever the order. */
	for (size_t i = 0; i < st.n; i++) {
		if (st.ops[i].write || st.ops[i].value == 0) {
			continue;
		}
		bool found = false;
		for (size_t j = 0; j < st.n && !found; j++) {
			found = st.ops[j].write && st.ops[j].value == st.ops[i].value;
		}
		if (!found) {
			snprintf(why, why_size, "key %u: a read returned %llu, which no write wrote",
				 key, (unsigned long long)st.ops[i].value);
			free(st.ops);
			return false;
		}
	}
	st.words = (st.n + 63) / 64 + 1;
	st.done = calloc(st.words, sizeof(*st.done));
	st.memo_cap = 1024;
	st.memo = calloc(st.memo_cap, sizeof(*st.memo));
	KEEL_ASSERT(st.done != NULL && st.memo != NULL);
	bool ok = dfs(&st, 0);
	if (!ok) {
		snprintf(why, why_size, "key %u: %zu ops %s", key, st.n,
			 st.gave_up ? "too expensive to check (gave up)" : "are not linearizable");
	}
	free(st.ops);
	free(st.done);
	free(st.memo);
	return ok;
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
