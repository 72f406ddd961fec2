/*
 * linearize.h — the linearizability search of linearize.c, over any
 * single-object model (Wing & Gong's search with Lowe's memoization).
 *
 * The model's state is a 64-bit value; `step` says whether `op` may take
 * effect in `state` and, if so, the state after it (*next starts as
 * `state`). An op with response SIMZK/SIM_TIME_INF (UINT64_MAX) never
 * returned: it may take effect at any point after its invocation, or
 * never. Times are a strict total order (history ticks).
 *
 * Ownership: sim_lin_search sorts `ops` in place by invocation; the ops'
 * `op` pointers are the caller's and only passed to `step`.
 */
#ifndef KEEL_SIM_LINEARIZE_H
#define KEEL_SIM_LINEARIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sim_lin_op {
	uint64_t invoke;
	uint64_t response; /* UINT64_MAX: unknown */
	const void *op;
};

typedef bool (*sim_lin_step_fn)(void *ctx, const void *op, uint64_t state, uint64_t *next);

enum sim_lin_verdict {
	SIM_LIN_OK = 0,
	SIM_LIN_VIOLATION = 1,
	SIM_LIN_GAVE_UP = 2, /* the search exceeded its state budget */
};

enum sim_lin_verdict sim_lin_search(struct sim_lin_op *ops, size_t n, uint64_t init,
				    sim_lin_step_fn step, void *ctx);

#endif
