/*
 * main.c — keel-sim's command line.
 *
 *   keel-sim --seed S [--nodes N] [--steps K] [--verbose]
 *   keel-sim --seeds FIRST:COUNT [--nodes N] [--steps K]
 *   keel-sim --random COUNT [--nodes N] [--steps K]
 * and with any of these: --disk wal (the real WAL over the fault vfs, the
 * only disk), --controller (the servers run the controller glue; the
 * active controller on the leader is fed by simulated brokers).
 *
 *   keel-sim ... --workload zk
 * runs the ZooKeeper workload (zkworld.c: simulated ZooKeeper clients on
 * simulated connections to the servers' real cores, the ZooKeeper
 * checkers) under the same faults as the register workload (kv, the
 * default). Not with --controller.
 *
 * One line per seed: "ok seed=S ... trace=HASH ..." (the same seed always
 * prints the same hash) or, on a violated invariant or liveness failure,
 * "FAIL seed=S ...: why" with the last events. --random draws fresh seeds
 * from the OS (and prints each one, so any failure can be replayed).
 * Exit status: 0 when every seed passed, 1 otherwise, 2 on bad usage.
 * --expect-fail inverts the verdict (for planted-bug builds): exit 0 as soon
 * as one seed fails, 1 if all pass.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "os/log.h"
#include "sim/sim.h"

static void usage(void)
{
	fprintf(stderr, "usage: keel-sim --seed S [--nodes N] [--steps K] [--verbose]\n"
			"       keel-sim --seeds FIRST:COUNT | --random COUNT [--nodes N] "
			"[--steps K] [--expect-fail]\n"
			"       options for both: [--disk wal] [--controller | --workload kv|zk]\n");
}

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	if (s == NULL || *s == '\0') {
		return false;
	}
	unsigned long long v = strtoull(s, &end, 10);
	if (*end != '\0') {
		return false;
	}
	*out = v;
	return true;
}

static uint64_t fresh_seed(void)
{
	uint64_t seed = 0;
	while (getrandom(&seed, sizeof(seed), 0) != (ssize_t)sizeof(seed)) {
	}
	return seed % 1000000000000ull;
}

struct cli {
	struct sim_config cfg;
	uint64_t first;
	uint64_t count;
	uint64_t random_count;
	bool have_seed;
	bool expect_fail;
};

/* Parses "--seeds FIRST:COUNT". */
static bool parse_range(const char *v, uint64_t *first, uint64_t *count)
{
	if (v == NULL || strchr(v, ':') == NULL) {
		return false;
	}
	char buf[64];
	snprintf(buf, sizeof(buf), "%s", v);
	char *colon = strchr(buf, ':');
	*colon = '\0';
	return parse_u64(buf, first) && parse_u64(colon + 1, count);
}

/* Fills cli from argv; false on bad usage. */
static bool parse_args(int argc, char **argv, struct cli *c)
{
	uint64_t nodes = 3;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool takes_value = true;
		if (strcmp(a, "--seed") == 0 && parse_u64(v, &c->cfg.seed)) {
			c->have_seed = true;
		} else if (strcmp(a, "--nodes") == 0 && parse_u64(v, &nodes)) {
		} else if (strcmp(a, "--steps") == 0 && parse_u64(v, &c->cfg.steps)) {
		} else if (strcmp(a, "--random") == 0 && parse_u64(v, &c->random_count)) {
		} else if (strcmp(a, "--seeds") == 0 && parse_range(v, &c->first, &c->count)) {
		} else if (strcmp(a, "--disk") == 0 && v != NULL && strcmp(v, "wal") == 0) {
			/* the only disk: the real WAL (the model of the same
			 * contract went with the stand-in server) */
		} else if (strcmp(a, "--workload") == 0 && v != NULL &&
			   (strcmp(v, "kv") == 0 || strcmp(v, "zk") == 0)) {
			c->cfg.zk = strcmp(v, "zk") == 0;
		} else if (strcmp(a, "--controller") == 0) {
			c->cfg.controller = true;
			takes_value = false;
		} else if (strcmp(a, "--verbose") == 0) {
			c->cfg.verbose = true;
			takes_value = false;
		} else if (strcmp(a, "--expect-fail") == 0) {
			c->expect_fail = true;
			takes_value = false;
		} else {
			return false;
		}
		i += takes_value ? 1 : 0;
	}
	if (nodes < 1 || nodes > SIM_MAX_NODES - 2 ||
	    (!c->have_seed && c->count == 0 && c->random_count == 0) ||
	    (c->cfg.zk && c->cfg.controller)) {
		return false;
	}
	c->cfg.nodes = (uint32_t)nodes;
	return true;
}

int main(int argc, char **argv)
{
	struct cli c = {.cfg = {.seed = 1,
				.nodes = 3,
				.steps = 20000,
				.verbose = false,
				.controller = false}};
	if (!parse_args(argc, argv, &c)) {
		usage();
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* The WAL logs what it repairs and what fails; under injected faults
	 * that is noise unless a run is replayed verbosely. */
	keel_log_set_level(c.cfg.verbose ? KEEL_LOG_INFO : KEEL_LOG_ERROR);
	if (c.have_seed) {
		int rc = sim_run(&c.cfg);
		return c.expect_fail ? !rc : rc;
	}
	uint64_t runs = c.count > 0 ? c.count : c.random_count;
	uint64_t failures = 0;
	for (uint64_t i = 0; i < runs; i++) {
		c.cfg.seed = c.count > 0 ? c.first + i : fresh_seed();
		if ((sim_run(&c.cfg)) != 0) {
			failures++;
			if (c.expect_fail) {
				printf("expected failure found after %llu seeds\n",
				       (unsigned long long)(i + 1));
				return 0;
			}
		}
	}
	printf("%llu of %llu seeds failed\n", (unsigned long long)failures, (unsigned long long)runs);
	if (c.expect_fail) {
		return 1;
	}
	return failures == 0 ? 0 : 1;
}
