/*
 * rng.h — a seeded pseudo-random generator passed explicitly.
 *
 * xoshiro256** seeded through splitmix64. No global state: every user (the
 * Raft core's election jitter, the simulator, tests) owns a `struct keel_rng`
 * seeded by its caller, so a run is reproducible from its seed. Not for
 * cryptography (session passwords use the OS random source in the I/O layer).
 */
#ifndef KEEL_BASE_RNG_H
#define KEEL_BASE_RNG_H

#include <stdbool.h>
#include <stdint.h>

struct keel_rng {
	uint64_t s[4];
};

void keel_rng_seed(struct keel_rng *rng, uint64_t seed);

uint64_t keel_rng_next(struct keel_rng *rng);

/* Uniform in [0, bound); bound must be > 0. Unbiased. */
uint64_t keel_rng_below(struct keel_rng *rng, uint64_t bound);

/* Uniform in [lo, hi] inclusive; lo <= hi. */
uint64_t keel_rng_between(struct keel_rng *rng, uint64_t lo, uint64_t hi);

/* True with probability num/den (den > 0, num <= den). */
bool keel_rng_chance(struct keel_rng *rng, uint64_t num, uint64_t den);

/* splitmix64 step: also a good 64-bit mixer for deriving child seeds. */
uint64_t keel_splitmix64(uint64_t *state);

#endif
