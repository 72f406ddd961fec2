/* election.c — leader/ISR election and replica placement (see election.h). */
#include "meta/election.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"

static bool same_list(const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb)
{
	return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof(int32_t)) == 0);
}

/* The new ISR: eligible members only, but never empty (the KRaft rule). */
static void target_isr(const struct meta_image *img, const struct meta_partition *p,
		       struct meta_partition_target *t)
{
	t->isr_count = 0;
	for (uint32_t i = 0; i < p->isr_count; i++) {
		if (meta_image_broker_active(img, p->isr[i])) {
			t->isr[t->isr_count++] = p->isr[i];
		}
	}
	if (t->isr_count == 0 && p->isr_count > 0) {
		bool leader_in = p->leader != META_NO_LEADER &&
				 meta_list_contains(p->isr, p->isr_count, p->leader);
		t->isr[t->isr_count++] = leader_in ? p->leader : p->isr[0];
	}
}

static int32_t first_eligible(const struct meta_image *img, const struct meta_partition *p,
			      const struct meta_partition_target *t, bool need_in_isr)
{
	for (uint32_t i = 0; i < p->replica_count; i++) {
		int32_t r = p->replicas[i];
		if (!meta_image_broker_active(img, r)) {
			continue;
		}
		if (need_in_isr && !meta_list_contains(t->isr, t->isr_count, r)) {
			continue;
		}
		return r;
	}
	return META_NO_LEADER;
}

bool meta_partition_elect(const struct meta_image *img, const struct meta_topic *topic,
			  uint32_t partition_id, bool preferred, bool unclean,
			  struct meta_partition_target *target,
			  struct meta_partition_change_record *out)
{
	KEEL_ASSERT(partition_id < topic->partition_count);
	const struct meta_partition *p = &topic->partitions[partition_id];
	target_isr(img, p, target);

	int32_t leader = p->leader;
	uint8_t recovery = p->leader_recovery_state;
	bool leader_ok = leader != META_NO_LEADER && meta_image_broker_active(img, leader) &&
			 meta_list_contains(target->isr, target->isr_count, leader);
	if (leader_ok && preferred) {
		int32_t pref = p->replicas[0];
		if (pref != leader && meta_image_broker_active(img, pref) &&
		    meta_list_contains(target->isr, target->isr_count, pref)) {
			leader = pref;
		}
	}
	if (!leader_ok) {
		leader = first_eligible(img, p, target, true);
		if (leader == META_NO_LEADER && unclean) {
			leader = first_eligible(img, p, target, false);
			if (leader != META_NO_LEADER) {
				target->isr[0] = leader;
				target->isr_count = 1;
				recovery = META_RECOVERING;
			}
		}
	}
	KEEL_ASSERT(leader == META_NO_LEADER ||
		    meta_list_contains(target->isr, target->isr_count, leader));

	memset(out, 0, sizeof(*out));
	memcpy(out->topic_id, topic->id, META_UUID_SIZE);
	out->partition_id = (int32_t)partition_id;
	out->leader = leader;
	if (leader != p->leader) {
		out->fields |= META_PC_LEADER;
		out->leader_epoch = p->leader_epoch + 1;
	}
	if (!same_list(target->isr, target->isr_count, p->isr, p->isr_count)) {
		out->fields |= META_PC_ISR;
		out->isr = target->isr;
		out->isr_count = target->isr_count;
	}
	if (recovery != p->leader_recovery_state) {
		out->fields |= META_PC_RECOVERY;
		out->leader_recovery_state = recovery;
	}
	if (out->fields == 0) {
		return false;
	}
	out->partition_epoch = p->partition_epoch + 1;
	return true;
}

uint32_t meta_active_broker_count(const struct meta_image *img)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < img->broker_count; i++) {
		n += meta_broker_active(img->brokers[i]) ? 1 : 0;
	}
	return n;
}

/* NULL racks sort first and compare equal to each other. */
static int rack_cmp(const char *a, const char *b)
{
	if (a == NULL && b == NULL) {
		return 0;
	}
	if (a == NULL || b == NULL) {
		return a == NULL ? -1 : 1;
	}
	return strcmp(a, b);
}

static int broker_rack_cmp(const void *x, const void *y)
{
	const struct meta_broker *a = *(const struct meta_broker *const *)x;
	const struct meta_broker *b = *(const struct meta_broker *const *)y;
	int r = rack_cmp(a->rack, b->rack);
	if (r != 0) {
		return r;
	}
	return a->id < b->id ? -1 : (a->id > b->id ? 1 : 0);
}

/*
 * Orders the active brokers by alternating racks into `order` (n entries):
 * rack A's first, rack B's first, ..., rack A's second, ...
 */
static bool rack_alternated(const struct meta_image *img, const struct meta_broker **order,
			    uint32_t n)
{
	const struct meta_broker **by_rack = malloc((size_t)n * sizeof(*by_rack));
	uint32_t *rack_start = malloc((size_t)(n + 1) * sizeof(*rack_start));
	uint32_t *taken = calloc(n, sizeof(*taken));
	if (by_rack == NULL || rack_start == NULL || taken == NULL) {
		free(by_rack);
		free(rack_start);
		free(taken);
		return false;
	}
	uint32_t k = 0;
	for (uint32_t i = 0; i < img->broker_count; i++) {
		if (meta_broker_active(img->brokers[i])) {
			by_rack[k++] = img->brokers[i];
		}
	}
	KEEL_ASSERT(k == n);
	qsort(by_rack, n, sizeof(*by_rack), broker_rack_cmp);
	uint32_t racks = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (i == 0 || rack_cmp(by_rack[i - 1]->rack, by_rack[i]->rack) != 0) {
			rack_start[racks++] = i;
		}
	}
	rack_start[racks] = n;
	uint32_t placed = 0;
	while (placed < n) {
		for (uint32_t r = 0; r < racks; r++) {
			uint32_t idx = rack_start[r] + taken[r];
			if (idx < rack_start[r + 1]) {
				order[placed++] = by_rack[idx];
				taken[r]++;
			}
		}
	}
	free(by_rack);
	free(rack_start);
	free(taken);
	return true;
}

static bool rack_used(const struct meta_broker **chosen, uint32_t count, const char *rack)
{
	for (uint32_t i = 0; i < count; i++) {
		if (rack_cmp(chosen[i]->rack, rack) == 0) {
			return true;
		}
	}
	return false;
}

static bool chosen_has(const struct meta_broker **chosen, uint32_t count,
		       const struct meta_broker *b)
{
	for (uint32_t i = 0; i < count; i++) {
		if (chosen[i] == b) {
			return true;
		}
	}
	return false;
}

bool meta_place_replicas(const struct meta_image *img, uint32_t partition_count,
			 uint32_t replication_factor, uint64_t start, int32_t *out, bool *nomem)
{
	*nomem = false;
	uint32_t n = meta_active_broker_count(img);
	if (replication_factor == 0 || replication_factor > n ||
	    replication_factor > META_MAX_REPLICAS) {
		return false;
	}
	const struct meta_broker **order = malloc((size_t)n * sizeof(*order));
	if (order == NULL || !rack_alternated(img, order, n)) {
		free(order);
		*nomem = true;
		return false;
	}
	const struct meta_broker *chosen[META_MAX_REPLICAS];
	for (uint32_t p = 0; p < partition_count; p++) {
		uint32_t first = (uint32_t)((start + p) % n);
		chosen[0] = order[first];
		uint32_t count = 1;
		uint32_t shift = n > 1 ? (uint32_t)(((start / n) + p / n) % (n - 1)) : 0;
		/* Two passes over the other brokers: new racks first, then any. */
		for (int pass = 0; pass < 2 && count < replication_factor; pass++) {
			for (uint32_t k = 0; k + 1 < n && count < replication_factor; k++) {
				uint32_t idx = (first + 1 + (shift + k) % (n - 1)) % n;
				const struct meta_broker *b = order[idx];
				if (chosen_has(chosen, count, b)) {
					continue;
				}
				if (pass == 0 && rack_used(chosen, count, b->rack)) {
					continue;
				}
				chosen[count++] = b;
			}
		}
		KEEL_ASSERT(count == replication_factor);
		for (uint32_t r = 0; r < replication_factor; r++) {
			out[(size_t)p * replication_factor + r] = chosen[r]->id;
		}
	}
	free(order);
	return true;
}
