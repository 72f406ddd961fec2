/*
 * partitions.c — the set of partitions a broker holds, kept in line with
 * its metadata image: plogs opened (and recovered) as the broker becomes a
 * replica, closed as it stops being one; group-committed syncs.
 *
 *   (not held) --image lists this broker as a replica--> OPEN (leader or
 *   follower, per the image) --image drops it--> closed (data stays on
 *   disk; a later topic with the same name but another id empties it)
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "broker/broker.h"
#include "broker/groups.h"
#include "meta/fmt.h"

void broker_core_init(struct broker_core *core, const struct broker_config *config)
{
	KEEL_ASSERT(config->vfs != NULL);
	KEEL_ASSERT(config->data_dir != NULL);
	memset(core, 0, sizeof(*core));
	core->config = *config;
	size_t n = strlen(config->data_dir);
	KEEL_ASSERT(n < sizeof(core->data_dir));
	memcpy(core->data_dir, config->data_dir, n + 1);
	core->config.data_dir = core->data_dir;
	meta_image_init(&core->image, NULL);
	broker_groups_init(core);
}

static void close_log(struct broker_partition *p)
{
	if (p->open) {
		broker_idem_before_close(p);
		plog_close(&p->log);
		p->open = false;
	}
	p->producers_ready = false;
}

static void close_partition(struct broker_partition *p)
{
	close_log(p);
	plog_producers_close(&p->producers);
	free(p);
}

void broker_core_close(struct broker_core *core)
{
	for (uint32_t i = 0; i < core->part_count; i++) {
		close_partition(core->parts[i]);
	}
	free(core->parts);
	broker_groups_close(core);
	broker_hw_restored_drop(core);
	meta_image_close(&core->image);
	memset(core, 0, sizeof(*core));
}

static int compare_key(const char *topic_a, int32_t index_a, const char *topic_b, int32_t index_b)
{
	int c = strcmp(topic_a, topic_b);
	if (c != 0) {
		return c;
	}
	return index_a < index_b ? -1 : index_a > index_b ? 1 : 0;
}

/* Position of (topic, index) in core->parts, or where it would go. */
static uint32_t find_slot(const struct broker_core *core, const char *topic, int32_t index,
                          bool *found)
{
	uint32_t lo = 0, hi = core->part_count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct broker_partition *p = core->parts[mid];
		int c = compare_key(p->topic, p->index, topic, index);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	*found = false;
	return lo;
}

struct broker_partition *broker_core_partition(struct broker_core *core, struct kafka_str topic,
                                               int32_t index)
{
	if (topic.len <= 0 || topic.len > BROKER_TOPIC_MAX) {
		return NULL;
	}
	char name[BROKER_TOPIC_MAX + 1];
	memcpy(name, topic.ptr, (size_t)topic.len);
	name[topic.len] = '\0';
	bool found = false;
	uint32_t i = find_slot(core, name, index, &found);
	return found ? core->parts[i] : NULL;
}

static void set_why(struct broker_core *core, const struct broker_partition *p, const char *what,
                    const char *detail)
{
	struct meta_fmt f;
	meta_fmt_init(&f, core->why, sizeof(core->why));
	meta_fmt_str(&f, p->topic);
	meta_fmt_char(&f, '-');
	meta_fmt_i64(&f, p->index);
	meta_fmt_str(&f, ": ");
	meta_fmt_str(&f, what);
	if (detail != NULL && detail[0] != '\0') {
		meta_fmt_str(&f, ": ");
		meta_fmt_str(&f, detail);
	}
}

/* Opens p's log under <data_dir>/<topic>-<index>; false (core->why) on failure. */
static bool open_partition(struct broker_core *core, struct broker_partition *p,
                           struct broker_image_report *report)
{
	char dir[WAL_VFS_PATH_MAX];
	struct meta_fmt f;
	meta_fmt_init(&f, dir, sizeof(dir));
	meta_fmt_str(&f, core->data_dir);
	meta_fmt_char(&f, '/');
	meta_fmt_str(&f, p->topic);
	meta_fmt_char(&f, '-');
	meta_fmt_i64(&f, p->index);
	if (f.truncated) {
		set_why(core, p, "the partition directory's path is too long", NULL);
		return false;
	}
	struct plog_config config;
	plog_config_init(&config, core->config.vfs, dir);
	if (core->config.max_batch_bytes != 0) {
		config.max_batch_bytes = core->config.max_batch_bytes;
	}
	struct plog_recovery rec;
	if (plog_open(&p->log, &config, &rec) != KEEL_OK) {
		set_why(core, p, "cannot open the log", plog_why(&p->log));
		return false;
	}
	report->recovered_bytes_cut += rec.truncated_bytes;
	enum keel_err err = KEEL_OK;
	if (p->log.has_topic_id && memcmp(p->log.topic_id, p->topic_id, 16) != 0) {
		/* An earlier topic of the same name left this directory. */
		err = plog_reset(&p->log, 0);
		if (err == KEEL_OK) {
			err = plog_producers_drop_snapshots(&p->log, 0);
		}
	}
	if (err == KEEL_OK && !p->log.has_topic_id) {
		err = plog_set_topic_id(&p->log, p->topic_id);
	}
	if (err != KEEL_OK) {
		set_why(core, p, "cannot claim the log for its topic id", plog_why(&p->log));
		plog_close(&p->log);
		return false;
	}
	p->open = true;
	p->producers_ready = false;
	return true;
}

static bool grow(struct broker_core *core)
{
	if (core->part_count < core->part_capacity) {
		return true;
	}
	uint32_t cap = core->part_capacity == 0 ? 16 : core->part_capacity * 2;
	struct broker_partition **n = realloc(core->parts, cap * sizeof(*n));
	if (n == NULL) {
		return false;
	}
	core->parts = n;
	core->part_capacity = cap;
	return true;
}

/* A partition opened after a start begins at its checkpointed high
 * watermark; broker_replica_adopt caps it at the log (hwcheck.c). */
static void restore_hw(struct broker_core *core, struct broker_partition *p)
{
	int64_t hw = broker_hw_restored(core, p->topic_id, p->index);
	if (hw > p->high_watermark) {
		p->high_watermark = hw;
		core->hw_restored_used++;
	}
}

/* Finds or adds the partition (topic, index) as a replica. */
static void hold_partition(struct broker_core *core, const struct meta_topic *topic, int32_t index,
                           const struct meta_partition *mp, struct broker_image_report *report)
{
	if (strlen(topic->name) > BROKER_TOPIC_MAX) {
		return;
	}
	bool found = false;
	uint32_t slot = find_slot(core, topic->name, index, &found);
	struct broker_partition *p = found ? core->parts[slot] : NULL;
	if (p != NULL && memcmp(p->topic_id, topic->id, 16) != 0) {
		/* Deleted and re-created between two images: start over. */
		close_log(p);
		memcpy(p->topic_id, topic->id, 16);
	}
	if (p == NULL) {
		if (!grow(core) || (p = calloc(1, sizeof(*p))) == NULL) {
			report->failed++;
			return;
		}
		memcpy(p->topic, topic->name, strlen(topic->name) + 1);
		p->index = index;
		memcpy(p->topic_id, topic->id, 16);
		memmove(&core->parts[slot + 1], &core->parts[slot],
		        (core->part_count - slot) * sizeof(*core->parts));
		core->parts[slot] = p;
		core->part_count++;
	}
	p->seen = true;
	bool fresh = !p->open;
	bool was_leader = p->leader;
	int32_t old_epoch = p->leader_epoch;
	broker_idem_leadership(p, mp->leader == core->config.node_id, mp->leader_epoch);
	p->leader = mp->leader == core->config.node_id;
	p->leader_epoch = mp->leader_epoch;
	if (!p->open) {
		if (open_partition(core, p, report)) {
			report->opened++;
			restore_hw(core, p);
		} else {
			report->failed++;
		}
	}
	broker_apply_log_config(core, p);
	bool new_term = fresh || was_leader != p->leader || old_epoch != p->leader_epoch;
	broker_replica_adopt(core, p, topic->name, mp, new_term);
}

void broker_core_set_image(struct broker_core *core, struct meta_image *img,
                           struct broker_image_report *report)
{
	KEEL_ASSERT(core->dirty_count == 0);
	memset(report, 0, sizeof(*report));
	meta_image_close(&core->image);
	core->image = *img;
	meta_image_init(img, &core->image.limits);
	core->has_image = true;
	core->replica_lag_time_max_ms =
	        broker_replica_lag_time_max_ms(&core->image, core->config.node_id);
	/* follower.replication.throttled.rate and leader.replication.throttled.rate
	 * (bytes/s): this broker's, else the cluster default; unset or not
	 * positive: no throttle. */
	int64_t rate = broker_config_i64(core, NULL, "follower.replication.throttled.rate", -1);
	core->throttle_rate = rate > 0 ? rate : -1;
	rate = broker_config_i64(core, NULL, "leader.replication.throttled.rate", -1);
	core->leader_throttle_rate = rate > 0 ? rate : -1;
	for (uint32_t i = 0; i < core->part_count; i++) {
		core->parts[i]->seen = false;
	}
	const struct meta_image *im = &core->image;
	for (uint32_t t = 0; t < im->topic_count; t++) {
		const struct meta_topic *topic = im->topics[t];
		for (uint32_t i = 0; i < topic->partition_count; i++) {
			const struct meta_partition *mp = &topic->partitions[i];
			if (meta_list_contains(mp->replicas, mp->replica_count,
			                       core->config.node_id)) {
				hold_partition(core, topic, (int32_t)i, mp, report);
			}
		}
	}
	uint32_t kept = 0;
	for (uint32_t i = 0; i < core->part_count; i++) {
		struct broker_partition *p = core->parts[i];
		if (p->seen) {
			core->parts[kept++] = p;
			continue;
		}
		report->closed++;
		close_partition(p);
	}
	core->part_count = kept;
	broker_hw_restored_drop(core); /* only the first image after a start uses it */
	broker_groups_image_changed(core);
}

bool broker_core_dirty(const struct broker_core *core)
{
	return core->dirty_count > 0;
}

void broker_core_sync(struct broker_core *core)
{
	for (uint32_t i = 0; i < core->part_count; i++) {
		struct broker_partition *p = core->parts[i];
		if (p->dirty) {
			KEEL_ASSERT(p->open);
			p->sync_err = plog_sync(&p->log, NULL);
			broker_idem_after_sync(p);
		}
	}
}

void broker_core_sync_done(struct broker_core *core)
{
	for (uint32_t i = 0; i < core->part_count; i++) {
		struct broker_partition *p = core->parts[i];
		if (p->dirty && p->leader) {
			broker_replica_update_hw(core, p); /* its own durable end moved */
		}
		p->dirty = false;
	}
	core->dirty_count = 0;
}
