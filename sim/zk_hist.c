/*
 * zk_hist.c — the history of the ZooKeeper workload (zk_sim.h): ops in
 * invoke order, watch events, strays, and the tick clock that orders them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "sim/zk_sim.h"
#include "zk/zk_codes.h"

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

void simzk_history_print(const struct simzk_history *h, FILE *out)
{
	size_t e = 0;
	for (size_t i = 0; i < h->op_count || e < h->event_count;) {
		/* ops by invoke, events by arrival, merged by tick */
		if (e < h->event_count && (i == h->op_count || h->events[e].at < h->ops[i].invoke)) {
			const struct simzk_event *ev = &h->events[e++];
			fprintf(out, "%8llu event conn=%llu server=%u type=%d path=%s\n",
				(unsigned long long)ev->at, (unsigned long long)ev->conn, ev->server,
				ev->type, ev->path);
			continue;
		}
		const struct simzk_op *o = &h->ops[i++];
		static const char *const status[] = {"pending", "ok", "unknown"};
		fprintf(out,
			"%8llu %6llums op#%zu client=%u conn=%llu server=%u session=0x%llx %s xid=%d %s "
			"value=%llu version=%d flags=%d watch=%d -> %s",
			(unsigned long long)o->invoke, (unsigned long long)o->invoke_ms, i - 1, o->client, (unsigned long long)o->conn,
			o->server, (unsigned long long)o->session,
			o->kind == SIMZK_CONNECT  ? "connect"
			: o->kind == SIMZK_EXPIRE ? "abandon"
						  : zk_op_name(o->opcode),
			o->xid, o->path, (unsigned long long)o->value, o->version, o->flags, o->watch,
			status[o->status]);
		if (o->status == SIMZK_OK) {
			fprintf(out, " at %llu (%llums) err=%s zxid=%lld read=%llu version=%d%s%s%s\n",
				(unsigned long long)o->complete, (unsigned long long)o->complete_ms,
				zk_err_name(o->err),
				(long long)o->zxid, (unsigned long long)o->read_value,
				o->stat.version, o->expired ? " expired" : "",
				o->created[0] != '\0' ? " created=" : "", o->created);
		} else {
			fprintf(out, "\n");
		}
	}
	for (size_t i = 0; i < h->stray_count; i++) {
		fprintf(out, "%8llu stray conn=%llu xid=%d: %s\n", (unsigned long long)h->strays[i].at,
			(unsigned long long)h->strays[i].conn, h->strays[i].xid, h->strays[i].what);
	}
}

static const char *const watchable[SIMZK_WATCHABLE] = {
	"/w", "/e", "/s", "/w/k0", "/w/k1", "/w/k2", "/w/k3", "/e/k0", "/e/k1", "/e/k2", "/e/k3",
};
_Static_assert(SIMZK_KEYS == 4, "watchable paths are listed for four registers per directory");

int simzk_path_index(const char *path)
{
	for (int i = 0; i < SIMZK_WATCHABLE; i++) {
		if (strcmp(path, watchable[i]) == 0) {
			return i;
		}
	}
	return -1;
}

const char *simzk_path_name(int index)
{
	return index >= 0 && index < SIMZK_WATCHABLE ? watchable[index] : "";
}
