/* follower.c — a broker's image and its role changes (see follower.h). */
#include "meta/follower.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "meta/record.h"

struct meta_role_entry {
	uint8_t topic_id[META_UUID_SIZE];
	int32_t partition_id;
	uint8_t role;
	int32_t leader;
	int32_t leader_epoch;
	int32_t partition_epoch;
	char *topic; /* owned */
};

void meta_follower_init(struct meta_follower *f, int32_t broker_id,
			const struct meta_image_limits *limits)
{
	memset(f, 0, sizeof(*f));
	f->broker_id = broker_id;
	meta_image_init(&f->image, limits);
	meta_changes_init(&f->changes, 1u << 20);
	keel_arena_init(&f->arena, 16 * 1024);
}

void meta_follower_close(struct meta_follower *f)
{
	for (uint32_t i = 0; i < f->role_count; i++) {
		free(f->roles[i].topic);
	}
	free(f->roles);
	meta_image_close(&f->image);
	meta_changes_close(&f->changes);
	keel_arena_close(&f->arena);
	memset(f, 0, sizeof(*f));
}

static int key_cmp(const struct meta_role_entry *e, const uint8_t *id, int32_t pid)
{
	int c = memcmp(e->topic_id, id, META_UUID_SIZE);
	if (c != 0) {
		return c;
	}
	return e->partition_id < pid ? -1 : (e->partition_id > pid ? 1 : 0);
}

static uint32_t role_lower_bound(const struct meta_follower *f, const uint8_t *id, int32_t pid)
{
	uint32_t lo = 0, hi = f->role_count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (key_cmp(&f->roles[mid], id, pid) < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

enum meta_role meta_follower_role(const struct meta_follower *f, const uint8_t topic_id[16],
				  int32_t partition_id)
{
	uint32_t i = role_lower_bound(f, topic_id, partition_id);
	if (i < f->role_count && key_cmp(&f->roles[i], topic_id, partition_id) == 0) {
		return (enum meta_role)f->roles[i].role;
	}
	return META_ROLE_NONE;
}

static enum keel_err push_change(struct meta_follower *f, const struct meta_role_change *c)
{
	if (f->out_count == f->out_capacity) {
		uint32_t cap = f->out_capacity == 0 ? 16 : f->out_capacity * 2;
		struct meta_role_change *n = keel_arena_alloc(&f->arena, (size_t)cap * sizeof(*n));
		if (n == NULL) {
			return KEEL_NOMEM;
		}
		if (f->out_count > 0) {
			memcpy(n, f->out, (size_t)f->out_count * sizeof(*n));
		}
		f->out = n;
		f->out_capacity = cap;
	}
	struct meta_role_change *dst = &f->out[f->out_count++];
	*dst = *c;
	dst->topic = keel_arena_dup(&f->arena, c->topic, strlen(c->topic) + 1);
	return dst->topic != NULL ? KEEL_OK : KEEL_NOMEM;
}

/*
 * Brings the role table in line with one partition's state (p NULL: the
 * partition is gone), reporting a change when the role or, while holding
 * one, the leader epoch moved.
 */
static enum keel_err update_role(struct meta_follower *f, const char *topic, const uint8_t *id,
				 int32_t pid, const struct meta_partition *p)
{
	uint8_t role = META_ROLE_NONE;
	if (p != NULL && p->leader == f->broker_id) {
		role = META_ROLE_LEADER;
	} else if (p != NULL && meta_list_contains(p->replicas, p->replica_count, f->broker_id)) {
		role = META_ROLE_FOLLOWER;
	}
	uint32_t i = role_lower_bound(f, id, pid);
	struct meta_role_entry *e =
		(i < f->role_count && key_cmp(&f->roles[i], id, pid) == 0) ? &f->roles[i] : NULL;
	uint8_t old = e != NULL ? e->role : META_ROLE_NONE;
	bool report = old != role ||
		      (role != META_ROLE_NONE && p != NULL && e != NULL && e->leader_epoch != p->leader_epoch);
	if (report) {
		struct meta_role_change c = {
			.topic = topic,
			.partition_id = pid,
			.old_role = old,
			.new_role = role,
			.leader = p != NULL ? p->leader : META_NO_LEADER,
			.leader_epoch = p != NULL ? p->leader_epoch : e->leader_epoch,
			.partition_epoch = p != NULL ? p->partition_epoch : e->partition_epoch,
		};
		memcpy(c.topic_id, id, META_UUID_SIZE);
		enum keel_err err = push_change(f, &c);
		if (err != KEEL_OK) {
			return err;
		}
	}
	if (role == META_ROLE_NONE) {
		if (e != NULL) {
			free(e->topic);
			memmove(e, e + 1, (size_t)(f->role_count - i - 1) * sizeof(*e));
			f->role_count--;
		}
		return KEEL_OK;
	}
	if (e == NULL) {
		if (f->role_count == f->role_capacity) {
			uint32_t cap = f->role_capacity == 0 ? 64 : f->role_capacity * 2;
			struct meta_role_entry *n = realloc(f->roles, (size_t)cap * sizeof(*n));
			if (n == NULL) {
				return KEEL_NOMEM;
			}
			f->roles = n;
			f->role_capacity = cap;
		}
		char *name = malloc(strlen(topic) + 1);
		if (name == NULL) {
			return KEEL_NOMEM;
		}
		strcpy(name, topic);
		e = &f->roles[i];
		memmove(e + 1, e, (size_t)(f->role_count - i) * sizeof(*e));
		f->role_count++;
		memset(e, 0, sizeof(*e));
		memcpy(e->topic_id, id, META_UUID_SIZE);
		e->partition_id = pid;
		e->topic = name;
	}
	e->role = role;
	e->leader = p->leader;
	e->leader_epoch = p->leader_epoch;
	e->partition_epoch = p->partition_epoch;
	return KEEL_OK;
}

/* Every entry of a removed topic goes to NONE. */
static enum keel_err drop_topic(struct meta_follower *f, const uint8_t *id)
{
	uint32_t i = role_lower_bound(f, id, INT32_MIN);
	while (i < f->role_count && memcmp(f->roles[i].topic_id, id, META_UUID_SIZE) == 0) {
		struct meta_role_entry *e = &f->roles[i];
		/* The name is freed by update_role: copy it for the report. */
		char name[META_MAX_TOPIC_NAME + 1];
		strcpy(name, e->topic);
		enum keel_err err = update_role(f, name, id, e->partition_id, NULL);
		if (err != KEEL_OK) {
			return err;
		}
	}
	return KEEL_OK;
}

/* Compares every partition of the image with the table (and drops entries
 * of topics that are gone). */
static enum keel_err full_diff(struct meta_follower *f)
{
	for (uint32_t t = 0; t < f->image.topic_count; t++) {
		const struct meta_topic *topic = f->image.topics[t];
		for (uint32_t p = 0; p < topic->partition_count; p++) {
			enum keel_err err =
				update_role(f, topic->name, topic->id, (int32_t)p, &topic->partitions[p]);
			if (err != KEEL_OK) {
				return err;
			}
		}
	}
	uint32_t i = 0;
	while (i < f->role_count) {
		if (meta_image_topic_by_id(&f->image, f->roles[i].topic_id) == NULL) {
			uint8_t id[META_UUID_SIZE];
			memcpy(id, f->roles[i].topic_id, META_UUID_SIZE);
			enum keel_err err = drop_topic(f, id);
			if (err != KEEL_OK) {
				return err;
			}
			continue;
		}
		i++;
	}
	return KEEL_OK;
}

static enum keel_err apply_changes(struct meta_follower *f)
{
	if (f->changes.overflow) {
		return full_diff(f);
	}
	for (uint32_t i = 0; i < f->changes.count; i++) {
		const struct meta_change *c = &f->changes.items[i];
		enum keel_err err = KEEL_OK;
		if (c->kind == META_CHANGE_PARTITION) {
			const struct meta_topic *t = meta_image_topic_by_id(&f->image, c->topic_id);
			if (t != NULL && (uint32_t)c->partition_id < t->partition_count) {
				err = update_role(f, t->name, t->id, c->partition_id,
						  &t->partitions[c->partition_id]);
			}
		} else if (c->kind == META_CHANGE_TOPIC_REMOVED) {
			err = drop_topic(f, c->topic_id);
		}
		if (err != KEEL_OK) {
			return err;
		}
	}
	return KEEL_OK;
}

static void begin(struct meta_follower *f, const struct meta_role_change **changes,
		  uint32_t *count)
{
	keel_arena_reset(&f->arena);
	f->out = NULL;
	f->out_count = 0;
	f->out_capacity = 0;
	*changes = NULL;
	*count = 0;
	meta_changes_reset(&f->changes);
}

enum keel_err meta_follower_apply(struct meta_follower *f, int64_t offset, const void *data,
				  size_t size, const struct meta_role_change **changes,
				  uint32_t *count, struct meta_errbuf *eb)
{
	begin(f, changes, count);
	if (offset <= f->image.offset) {
		return KEEL_OK;
	}
	struct meta_batch batch;
	enum keel_err err = meta_batch_decode(data, size, &f->arena, &batch, eb);
	if (err != KEEL_OK) {
		return err;
	}
	err = meta_image_apply(&f->image, offset, &batch, &f->changes, NULL);
	if (err == KEEL_OK) {
		err = apply_changes(f);
	}
	*changes = f->out;
	*count = f->out_count;
	return err;
}

enum keel_err meta_follower_load_snapshot(struct meta_follower *f, const void *data, size_t size,
					  const struct meta_role_change **changes, uint32_t *count,
					  struct meta_errbuf *eb)
{
	begin(f, changes, count);
	struct meta_image next;
	meta_image_init(&next, &f->image.limits);
	enum keel_err err = meta_image_load_from_memory(&next, data, size, eb);
	if (err != KEEL_OK) {
		meta_image_close(&next);
		return err;
	}
	meta_image_close(&f->image);
	f->image = next;
	err = full_diff(f);
	*changes = f->out;
	*count = f->out_count;
	return err;
}

/* The ISR the leader wants for one partition; false when it is as wanted. */
static bool wanted_isr(const struct meta_follower *f, const struct meta_topic *t, uint32_t pid,
		       meta_caught_up_fn caught_up, void *ctx, int32_t *isr, uint32_t *count)
{
	const struct meta_partition *p = &t->partitions[pid];
	uint32_t n = 0;
	for (uint32_t r = 0; r < p->replica_count; r++) {
		int32_t id = p->replicas[r];
		bool in = meta_list_contains(p->isr, p->isr_count, id);
		bool join = !in && meta_image_broker_active(&f->image, id) &&
			    (caught_up == NULL || caught_up(ctx, t->id, (int32_t)pid, id));
		if (in || join) {
			isr[n++] = id;
		}
	}
	*count = n;
	return n != p->isr_count || p->leader_recovery_state != META_RECOVERED;
}

bool meta_follower_isr_request(struct meta_follower *f, int64_t broker_epoch,
			       meta_caught_up_fn caught_up, void *ctx,
			       struct meta_alter_partition_request *req)
{
	struct meta_alter_partition_topic *topics = NULL;
	uint32_t topic_count = 0;
	for (uint32_t t = 0; t < f->image.topic_count; t++) {
		const struct meta_topic *topic = f->image.topics[t];
		struct meta_alter_partition_item *items = NULL;
		uint32_t item_count = 0;
		for (uint32_t pid = 0; pid < topic->partition_count; pid++) {
			const struct meta_partition *p = &topic->partitions[pid];
			int32_t isr[META_MAX_REPLICAS];
			uint32_t n;
			if (p->leader != f->broker_id ||
			    !wanted_isr(f, topic, pid, caught_up, ctx, isr, &n)) {
				continue;
			}
			if (items == NULL) {
				items = keel_arena_alloc(&f->arena,
							 (size_t)topic->partition_count * sizeof(*items));
			}
			int32_t *copy = keel_arena_dup(&f->arena, isr, (size_t)n * sizeof(int32_t));
			if (items == NULL || copy == NULL) {
				return false; /* out of memory: ask next time */
			}
			items[item_count++] = (struct meta_alter_partition_item){
				(int32_t)pid, p->leader_epoch, p->partition_epoch, copy, n,
				META_RECOVERED};
		}
		if (item_count == 0) {
			continue;
		}
		if (topics == NULL) {
			topics = keel_arena_alloc(&f->arena,
						  (size_t)f->image.topic_count * sizeof(*topics));
			if (topics == NULL) {
				return false;
			}
		}
		memcpy(topics[topic_count].topic_id, topic->id, META_UUID_SIZE);
		topics[topic_count].partitions = items;
		topics[topic_count].partition_count = item_count;
		topic_count++;
	}
	if (topic_count == 0) {
		return false;
	}
	req->broker_id = f->broker_id;
	req->broker_epoch = broker_epoch;
	req->topics = topics;
	req->topic_count = topic_count;
	return true;
}

void meta_format_role_change(struct meta_fmt *f, const struct meta_role_change *c)
{
	switch (c->new_role) {
	case META_ROLE_LEADER:
		meta_fmt_str(f, "leader of ");
		break;
	case META_ROLE_FOLLOWER:
		meta_fmt_str(f, "follower of ");
		break;
	default:
		meta_fmt_str(f, "no longer a replica of ");
		break;
	}
	meta_fmt_str(f, c->topic);
	meta_fmt_char(f, '-');
	meta_fmt_i64(f, c->partition_id);
	if (c->new_role == META_ROLE_NONE) {
		return;
	}
	meta_fmt_str(f, " at epoch ");
	meta_fmt_i64(f, c->leader_epoch);
	if (c->new_role == META_ROLE_FOLLOWER) {
		meta_fmt_str(f, " (leader: ");
		if (c->leader == META_NO_LEADER) {
			meta_fmt_str(f, "none");
		} else {
			meta_fmt_str(f, "Broker-");
			meta_fmt_i64(f, c->leader);
		}
		meta_fmt_char(f, ')');
	}
}
