/*
 * fuzz_broker.h — the broker fuzz targets' fixture: one broker core on the
 * fault vfs (data in /d), rebuilt every FUZZ_BROKER_REBUILD_EVERY inputs so
 * that its logs stay small.
 */
#ifndef KEEL_FUZZ_BROKER_H
#define KEEL_FUZZ_BROKER_H

#include "base/assert.h"
#include "base/rng.h"
#include "broker/broker.h"

#define FUZZ_BROKER_REBUILD_EVERY 256

struct fuzz_broker {
	bool ready;
	unsigned inputs;
	struct keel_rng rng;
	struct wal_vfs vfs;
	struct broker_core core;
};

/* A fresh core for broker node_id, no image yet. */
static inline void fuzz_broker_open(struct fuzz_broker *fx, int32_t node_id)
{
	keel_rng_seed(&fx->rng, 1);
	struct wal_vfs_fault_config vc = {.rng = &fx->rng};
	KEEL_ASSERT(wal_vfs_fault_init(&fx->vfs, &vc) == KEEL_OK);
	KEEL_ASSERT(wal_vfs_mkdir(&fx->vfs, "/d") == KEEL_OK);
	struct broker_config bc = {&fx->vfs, "/d", node_id, 65536};
	broker_core_init(&fx->core, &bc);
}

/* After each input: closes the core when it is due for a rebuild. */
static inline void fuzz_broker_input_done(struct fuzz_broker *fx)
{
	if (++fx->inputs % FUZZ_BROKER_REBUILD_EVERY == 0) {
		broker_core_close(&fx->core);
		wal_vfs_fault_close(&fx->vfs);
		fx->ready = false;
	}
}

#endif
