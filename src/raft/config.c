/*
 * config.c — configurations (who votes, who learns) and their encoding.
 *
 * Encoding (the data of a CONFIG entry; also inside snapshot chunks):
 *	u8 version (1) | u32 count | count * (u64 id | u8 role)
 * Members sorted by id, ids distinct and nonzero, role VOTER or LEARNER.
 */
#include <string.h>

#include "raft/raft_int.h"

#define CONFIG_VERSION 1

bool raft_config_valid(const struct raft_config *config)
{
	if (config->count > RAFT_MAX_MEMBERS) {
		return false;
	}
	for (uint32_t i = 0; i < config->count; i++) {
		const struct raft_member *m = &config->members[i];
		if (m->id == 0) {
			return false;
		}
		if (m->role != RAFT_VOTER && m->role != RAFT_LEARNER) {
			return false;
		}
		if (i > 0 && config->members[i - 1].id >= m->id) {
			return false; /* unsorted or duplicate */
		}
	}
	return true;
}

bool raft_config_equal(const struct raft_config *a, const struct raft_config *b)
{
	if (a->count != b->count) {
		return false;
	}
	for (uint32_t i = 0; i < a->count; i++) {
		if (a->members[i].id != b->members[i].id || a->members[i].role != b->members[i].role) {
			return false;
		}
	}
	return true;
}

uint8_t raft_config_role(const struct raft_config *config, uint64_t id)
{
	for (uint32_t i = 0; i < config->count; i++) {
		if (config->members[i].id == id) {
			return config->members[i].role;
		}
	}
	return 0;
}

uint32_t raft_config_voters(const struct raft_config *config)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < config->count; i++) {
		n += config->members[i].role == RAFT_VOTER;
	}
	return n;
}

enum keel_err raft_config_set(struct raft_config *config, uint64_t id, uint8_t role)
{
	KEEL_ASSERT(id != 0);
	KEEL_ASSERT(role == RAFT_VOTER || role == RAFT_LEARNER);
	uint32_t i = 0;
	while (i < config->count && config->members[i].id < id) {
		i++;
	}
	if (i < config->count && config->members[i].id == id) {
		config->members[i].role = role;
		return KEEL_OK;
	}
	if (config->count == RAFT_MAX_MEMBERS) {
		return KEEL_LIMIT;
	}
	memmove(&config->members[i + 1], &config->members[i],
		(config->count - i) * sizeof(config->members[0]));
	config->members[i].id = id;
	config->members[i].role = role;
	config->count++;
	KEEL_ASSERT(raft_config_valid(config));
	return KEEL_OK;
}

void raft_config_remove(struct raft_config *config, uint64_t id)
{
	for (uint32_t i = 0; i < config->count; i++) {
		if (config->members[i].id == id) {
			memmove(&config->members[i], &config->members[i + 1],
				(config->count - i - 1) * sizeof(config->members[0]));
			config->count--;
			return;
		}
	}
}

void raft_config_encode(const struct raft_config *config, struct keel_wbuf *w)
{
	KEEL_ASSERT(raft_config_valid(config));
	keel_wbuf_u8(w, CONFIG_VERSION);
	keel_wbuf_u32(w, config->count);
	for (uint32_t i = 0; i < config->count; i++) {
		keel_wbuf_u64(w, config->members[i].id);
		keel_wbuf_u8(w, config->members[i].role);
	}
}

enum keel_err raft_config_decode(const void *data, size_t size, struct raft_config *config)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, data, size);
	uint8_t version = keel_rbuf_u8(&r);
	uint32_t count = keel_rbuf_u32(&r);
	if (!keel_rbuf_ok(&r) || version != CONFIG_VERSION || count > RAFT_MAX_MEMBERS) {
		return KEEL_CORRUPT;
	}
	struct raft_config c;
	memset(&c, 0, sizeof(c));
	c.count = count;
	for (uint32_t i = 0; i < count; i++) {
		c.members[i].id = keel_rbuf_u64(&r);
		c.members[i].role = keel_rbuf_u8(&r);
	}
	if (!keel_rbuf_done(&r) || !raft_config_valid(&c)) {
		return KEEL_CORRUPT;
	}
	*config = c;
	return KEEL_OK;
}

enum keel_err raft_bootstrap_entry(const struct raft_config *config, struct keel_wbuf *w,
				   struct raft_entry *entry)
{
	if (!raft_config_valid(config) || raft_config_voters(config) == 0) {
		return KEEL_CONFIG;
	}
	size_t start = w->size;
	raft_config_encode(config, w);
	if (!keel_wbuf_ok(w)) {
		return KEEL_NOMEM;
	}
	entry->index = 1;
	entry->term = 1;
	entry->type = RAFT_ENTRY_CONFIG;
	entry->size = (uint32_t)(w->size - start);
	entry->data = w->data + start;
	return KEEL_OK;
}
