/*
 * zk_hist.c — the history of the ZooKeeper workload (zk_sim.h): ops in
 * invoke order, watch events, strays, and the tick clock that orders them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "sim/zk_sim.h"

static void *grow(void *p, size_t *capacity, size_t count, size_t item)
{
	if (count < *capacity) {
		return p;
	}
	size_t cap = *capacity == 0 ? 256 : *capacity * 2;
	void *q = realloc(p, cap * item);
	KEEL_ASSERT(q != NULL);
	*capacity = cap;
	return q;
}

void simzk_history_init(struct simzk_history *h)
{
	memset(h, 0, sizeof(*h));
}

void simzk_history_free(struct simzk_history *h)
{
	free(h->ops);
	free(h->events);
	free(h->strays);
	memset(h, 0, sizeof(*h));
}

size_t simzk_history_invoke(struct simzk_history *h, const struct simzk_op *op)
{
	h->ops = grow(h->ops, &h->op_capacity, h->op_count, sizeof(*h->ops));
	struct simzk_op *o = &h->ops[h->op_count];
	*o = *op;
	o->invoke = ++h->clock;
	o->complete = SIMZK_TIME_INF;
	o->status = SIMZK_PENDING;
	return h->op_count++;
}

struct simzk_op *simzk_history_complete(struct simzk_history *h, size_t index)
{
	KEEL_ASSERT(index < h->op_count);
	struct simzk_op *o = &h->ops[index];
	KEEL_ASSERT(o->status == SIMZK_PENDING);
	o->status = SIMZK_OK;
	o->complete = ++h->clock;
	return o;
}

void simzk_history_unknown(struct simzk_history *h, size_t index)
{
	KEEL_ASSERT(index < h->op_count);
	struct simzk_op *o = &h->ops[index];
	KEEL_ASSERT(o->status == SIMZK_PENDING);
	o->status = SIMZK_UNKNOWN;
}

void simzk_history_event(struct simzk_history *h, const struct simzk_event *ev)
{
	h->events = grow(h->events, &h->event_capacity, h->event_count, sizeof(*h->events));
	h->events[h->event_count] = *ev;
	h->events[h->event_count].at = ++h->clock;
	h->event_count++;
}

void simzk_history_stray(struct simzk_history *h, uint32_t client, uint64_t conn, int32_t xid,
			 const char *what)
{
	h->strays = grow(h->strays, &h->stray_capacity, h->stray_count, sizeof(*h->strays));
	struct simzk_stray *s = &h->strays[h->stray_count++];
	memset(s, 0, sizeof(*s));
	s->client = client;
	s->conn = conn;
	s->xid = xid;
	s->at = ++h->clock;
	snprintf(s->what, sizeof(s->what), "%s", what);
}
