/*
 * log.c — the in-memory log: every entry since the last compaction point.
 *
 * One array of entry structs, live in slots [off, off + count). Appends go
 * at the end (the array doubles when full); compaction moves `off` forward
 * and slides the live part down once the dead prefix outgrows it, so the
 * live entries stay contiguous and a run of them is a plain pointer.
 *
 * Invariants: entry i sits at slots[off + (i - base_index - 1)]; indexes are
 * contiguous; terms never decrease along the log; base_term <= first term;
 * bytes == sum of live entries' sizes. Entry data is malloc'd here and freed
 * when the entry leaves the log.
 */
#include <stdlib.h>
#include <string.h>

#include "raft/raft_int.h"

void raft_log_init(struct raft_log *log)
{
	memset(log, 0, sizeof(*log));
}

static void entry_free(struct raft_entry *e)
{
	free((void *)e->data);
	e->data = NULL;
}

void raft_log_close(struct raft_log *log)
{
	for (size_t i = 0; i < log->count; i++) {
		entry_free(&log->slots[log->off + i]);
	}
	free(log->slots);
	memset(log, 0, sizeof(*log));
}

const struct raft_entry *raft_log_get(const struct raft_log *log, uint64_t index)
{
	KEEL_ASSERT(index > log->base_index);
	KEEL_ASSERT(index <= raft_log_last(log));
	const struct raft_entry *e = &log->slots[log->off + (size_t)(index - log->base_index - 1)];
	KEEL_ASSERT(e->index == index);
	return e;
}

bool raft_log_term(const struct raft_log *log, uint64_t index, uint64_t *term)
{
	if (index == log->base_index) {
		*term = log->base_term;
		return true;
	}
	if (index < log->base_index || index > raft_log_last(log)) {
		*term = 0;
		return false;
	}
	*term = raft_log_get(log, index)->term;
	return true;
}

uint64_t raft_log_last_term(const struct raft_log *log)
{
	if (log->count == 0) {
		return log->base_term;
	}
	return raft_log_get(log, raft_log_last(log))->term;
}

static enum keel_err make_room(struct raft_log *log)
{
	if (log->off + log->count < log->cap) {
		return KEEL_OK;
	}
	if (log->off > 0 && log->off >= log->count) {
		/* Slide the live part down: cheaper than growing. */
		memmove(log->slots, log->slots + log->off, log->count * sizeof(*log->slots));
		log->off = 0;
		return KEEL_OK;
	}
	size_t cap = log->cap == 0 ? 64 : log->cap * 2;
	struct raft_entry *slots = realloc(log->slots, cap * sizeof(*slots));
	if (slots == NULL) {
		return KEEL_NOMEM;
	}
	log->slots = slots;
	log->cap = cap;
	return KEEL_OK;
}

enum keel_err raft_log_append(struct raft_log *log, const struct raft_entry *entry)
{
	KEEL_ASSERT(entry->index == raft_log_last(log) + 1);
	KEEL_ASSERT(entry->term >= raft_log_last_term(log));
	KEEL_ASSERT(entry->term > 0);
	KEEL_ASSERT(entry->size == 0 || entry->data != NULL);
	enum keel_err err = make_room(log);
	if (err != KEEL_OK) {
		return err;
	}
	uint8_t *data = NULL;
	if (entry->size > 0) {
		data = malloc(entry->size);
		if (data == NULL) {
			return KEEL_NOMEM;
		}
		memcpy(data, entry->data, entry->size);
	}
	struct raft_entry *slot = &log->slots[log->off + log->count];
	*slot = *entry;
	slot->data = data;
	log->count++;
	log->bytes += entry->size;
	return KEEL_OK;
}

void raft_log_truncate(struct raft_log *log, uint64_t index)
{
	KEEL_ASSERT(index > log->base_index);
	uint64_t last = raft_log_last(log);
	if (index > last) {
		return;
	}
	for (uint64_t i = index; i <= last; i++) {
		struct raft_entry *e = &log->slots[log->off + (size_t)(i - log->base_index - 1)];
		log->bytes -= e->size;
		entry_free(e);
	}
	log->count = (size_t)(index - log->base_index - 1);
}

void raft_log_compact(struct raft_log *log, uint64_t index)
{
	KEEL_ASSERT(index > log->base_index);
	KEEL_ASSERT(index <= raft_log_last(log));
	uint64_t term = raft_log_get(log, index)->term;
	size_t drop = (size_t)(index - log->base_index);
	for (size_t i = 0; i < drop; i++) {
		struct raft_entry *e = &log->slots[log->off + i];
		log->bytes -= e->size;
		entry_free(e);
	}
	log->off += drop;
	log->count -= drop;
	log->base_index = index;
	log->base_term = term;
	if (log->count == 0) {
		log->off = 0;
	}
}

void raft_log_reset(struct raft_log *log, uint64_t index, uint64_t term)
{
	for (size_t i = 0; i < log->count; i++) {
		entry_free(&log->slots[log->off + i]);
	}
	log->off = 0;
	log->count = 0;
	log->bytes = 0;
	log->base_index = index;
	log->base_term = term;
}

uint64_t raft_log_find_conflict_by_term(const struct raft_log *log, uint64_t index,
					uint64_t term)
{
	uint64_t last = raft_log_last(log);
	if (index > last) {
		index = last;
	}
	if (index < log->base_index) {
		return index; /* behind our log: the caller falls back to a snapshot */
	}
	while (index > log->base_index) {
		if (raft_log_get(log, index)->term <= term) {
			return index;
		}
		index--;
	}
	return log->base_index;
}
