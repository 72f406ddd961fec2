/* rng.c — xoshiro256** (Blackman and Vigna) with splitmix64 seeding. */
#include "base/rng.h"

#include "base/assert.h"

uint64_t keel_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void keel_rng_seed(struct keel_rng *rng, uint64_t seed)
{
	uint64_t st = seed;
	for (int i = 0; i < 4; i++) {
		rng->s[i] = keel_splitmix64(&st);
	}
	/* The all-zero state is the one state xoshiro cannot leave. */
	KEEL_ASSERT((rng->s[0] | rng->s[1] | rng->s[2] | rng->s[3]) != 0);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t keel_rng_next(struct keel_rng *rng)
{
	uint64_t *s = rng->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

uint64_t keel_rng_below(struct keel_rng *rng, uint64_t bound)
{
	KEEL_ASSERT(bound > 0);
	/* Lemire's multiply-and-reject: unbiased, usually one multiplication. */
	unsigned __int128 m = (unsigned __int128)keel_rng_next(rng) * bound;
	uint64_t low = (uint64_t)m;
	if (low < bound) {
		uint64_t threshold = (0 - bound) % bound;
		while (low < threshold) {
			m = (unsigned __int128)keel_rng_next(rng) * bound;
			low = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

uint64_t keel_rng_between(struct keel_rng *rng, uint64_t lo, uint64_t hi)
{
	KEEL_ASSERT(lo <= hi);
	if (lo == 0 && hi == UINT64_MAX) {
		return keel_rng_next(rng);
	}
	return lo + keel_rng_below(rng, hi - lo + 1);
}

bool keel_rng_chance(struct keel_rng *rng, uint64_t num, uint64_t den)
{
	KEEL_ASSERT(den > 0);
	KEEL_ASSERT(num <= den);
	return keel_rng_below(rng, den) < num;
}
