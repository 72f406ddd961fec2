/*
 * epoch.c — the leader-epoch cache (epoch.h).
 */
#include "plog/epoch.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"

void plog_epochs_init(struct plog_epochs *e)
{
	memset(e, 0, sizeof(*e));
}

void plog_epochs_close(struct plog_epochs *e)
{
	free(e->entries);
	memset(e, 0, sizeof(*e));
}

int32_t plog_epochs_latest(const struct plog_epochs *e)
{
	return e->count == 0 ? PLOG_UNDEFINED_EPOCH : e->entries[e->count - 1].epoch;
}

static enum keel_err reserve(struct plog_epochs *e, uint32_t need)
{
	if (need <= e->capacity) {
		return KEEL_OK;
	}
	if (need > PLOG_EPOCH_MAX_ENTRIES) {
		return KEEL_LIMIT;
	}
	uint32_t cap = e->capacity == 0 ? 8 : e->capacity * 2;
	while (cap < need) {
		cap *= 2;
	}
	struct plog_epoch_entry *n = realloc(e->entries, (size_t)cap * sizeof(*n));
	if (n == NULL) {
		return KEEL_NOMEM;
	}
	e->entries = n;
	e->capacity = cap;
	return KEEL_OK;
}

enum keel_err plog_epochs_assign(struct plog_epochs *e, int32_t epoch, int64_t start_offset,
				 bool *changed)
{
	KEEL_ASSERT(epoch >= 0);
	KEEL_ASSERT(start_offset >= 0);
	*changed = false;
	if (e->count > 0) {
		const struct plog_epoch_entry *last = &e->entries[e->count - 1];
		if (epoch == last->epoch) {
			return KEEL_OK;
		}
		if (epoch < last->epoch || start_offset < last->start_offset) {
			return KEEL_STALE;
		}
		/* An epoch that wrote nothing is replaced by the next one. */
		if (start_offset == last->start_offset) {
			e->count--;
		}
	}
	enum keel_err err = reserve(e, e->count + 1);
	if (err != KEEL_OK) {
		return err;
	}
	e->entries[e->count++] = (struct plog_epoch_entry){epoch, start_offset};
	*changed = true;
	return KEEL_OK;
}

void plog_epochs_end_offset_for(const struct plog_epochs *e, int32_t requested,
				int64_t log_end_offset, int32_t *epoch, int64_t *end_offset)
{
	*epoch = PLOG_UNDEFINED_EPOCH;
	*end_offset = PLOG_UNDEFINED_OFFSET;
	if (requested < 0 || e->count == 0) {
		return;
	}
	if (requested == plog_epochs_latest(e)) {
		*epoch = requested;
		*end_offset = log_end_offset;
		return;
	}
	/* higher: the first entry with a larger epoch; floor: the one before. */
	uint32_t lo = 0;
	uint32_t hi = e->count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (e->entries[mid].epoch <= requested) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	if (lo == e->count) {
		return; /* newer than anything we know */
	}
	*end_offset = e->entries[lo].start_offset;
	*epoch = lo == 0 ? requested : e->entries[lo - 1].epoch;
}

bool plog_epochs_truncate_end(struct plog_epochs *e, int64_t end_offset)
{
	uint32_t n = e->count;
	while (e->count > 0 && e->entries[e->count - 1].start_offset >= end_offset) {
		e->count--;
	}
	return n != e->count;
}

bool plog_epochs_truncate_start(struct plog_epochs *e, int64_t start_offset)
{
	uint32_t drop = 0;
	while (drop + 1 < e->count && e->entries[drop + 1].start_offset <= start_offset) {
		drop++;
	}
	bool changed = drop > 0;
	if (drop > 0) {
		memmove(e->entries, e->entries + drop, (size_t)(e->count - drop) * sizeof(*e->entries));
		e->count -= drop;
	}
	if (e->count > 0 && e->entries[0].start_offset < start_offset) {
		e->entries[0].start_offset = start_offset;
		changed = true;
	}
	return changed;
}

enum keel_err plog_epochs_set(struct plog_epochs *e, const struct plog_epoch_entry *entries,
			      uint32_t count)
{
	enum keel_err err = reserve(e, count);
	if (err != KEEL_OK) {
		return err;
	}
	if (count > 0) {
		memcpy(e->entries, entries, (size_t)count * sizeof(*entries));
	}
	e->count = count;
	return KEEL_OK;
}
