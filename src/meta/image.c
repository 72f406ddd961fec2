/*
 * image.c — the metadata image: storage, lookups, change sets and apply
 * (see image.h). Snapshot, hash and clone are in snapshot.c.
 *
 * Apply discipline: every record handler first validates against the image
 * and prepares every allocation it needs, and only then mutates. So a
 * record is either applied whole or not at all, and a failed allocation
 * leaves the image as it was.
 */
#include "meta/image.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "meta/image_internal.h"

void meta_image_limits_default(struct meta_image_limits *limits)
{
	limits->max_brokers = 10000;
	limits->max_topics = 100000;
	limits->max_partitions = 1000000;
	limits->max_configs = 100000;
}

void meta_image_init(struct meta_image *img, const struct meta_image_limits *limits)
{
	memset(img, 0, sizeof(*img));
	img->controller_id = -1;
	img->controller_epoch = -1;
	if (limits != NULL) {
		img->limits = *limits;
	} else {
		meta_image_limits_default(&img->limits);
	}
}

void meta_broker_free(struct meta_broker *b)
{
	if (b == NULL) {
		return;
	}
	for (uint32_t i = 0; i < b->endpoint_count; i++) {
		free((char *)b->endpoints[i].name);
		free((char *)b->endpoints[i].host);
	}
	free(b->endpoints);
	free(b->rack);
	free(b);
}

void meta_topic_free(struct meta_topic *t)
{
	if (t == NULL) {
		return;
	}
	for (uint32_t i = 0; i < t->partition_count; i++) {
		free(t->partitions[i].replicas);
		free(t->partitions[i].isr);
		free(t->partitions[i].adding);
		free(t->partitions[i].removing);
	}
	free(t->partitions);
	free(t->name);
	free(t);
}

void meta_config_entry_free(struct meta_config_entry *c)
{
	free(c->resource_name);
	free(c->key);
	free(c->value);
}

void meta_image_clear(struct meta_image *img)
{
	struct meta_image_limits limits = img->limits;
	for (uint32_t i = 0; i < img->broker_count; i++) {
		meta_broker_free(img->brokers[i]);
	}
	for (uint32_t i = 0; i < img->topic_count; i++) {
		meta_topic_free(img->topics[i]);
	}
	for (uint32_t i = 0; i < img->config_count; i++) {
		meta_config_entry_free(&img->configs[i]);
	}
	free(img->brokers);
	free(img->topics);
	free(img->topics_by_id);
	free(img->configs);
	meta_image_init(img, &limits);
}

void meta_image_close(struct meta_image *img)
{
	meta_image_clear(img);
}

/* ---- sorted-array searches: the index of the first element >= key ---- */

static uint32_t broker_lower_bound(const struct meta_image *img, int32_t id)
{
	uint32_t lo = 0, hi = img->broker_count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (img->brokers[mid]->id < id) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

static uint32_t topic_name_lower_bound(const struct meta_image *img, const char *name)
{
	uint32_t lo = 0, hi = img->topic_count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (strcmp(img->topics[mid]->name, name) < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

static uint32_t topic_id_lower_bound(const struct meta_image *img, const uint8_t *id)
{
	uint32_t lo = 0, hi = img->topic_count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (memcmp(img->topics_by_id[mid]->id, id, META_UUID_SIZE) < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

static int config_cmp(const struct meta_config_entry *c, uint8_t type, const char *name,
		      const char *key)
{
	if (c->resource_type != type) {
		return c->resource_type < type ? -1 : 1;
	}
	int r = strcmp(c->resource_name, name);
	if (r != 0 || key == NULL) {
		return r;
	}
	return strcmp(c->key, key);
}

/* key NULL: the first entry of the resource. */
static uint32_t config_lower_bound(const struct meta_image *img, uint8_t type, const char *name,
				   const char *key)
{
	uint32_t lo = 0, hi = img->config_count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (config_cmp(&img->configs[mid], type, name, key) < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

/* ---- lookups ---- */

static struct meta_broker *find_broker(const struct meta_image *img, int32_t id)
{
	uint32_t i = broker_lower_bound(img, id);
	return (i < img->broker_count && img->brokers[i]->id == id) ? img->brokers[i] : NULL;
}

static struct meta_topic *find_topic(const struct meta_image *img, const char *name)
{
	uint32_t i = topic_name_lower_bound(img, name);
	return (i < img->topic_count && strcmp(img->topics[i]->name, name) == 0) ? img->topics[i]
										 : NULL;
}

static struct meta_topic *find_topic_by_id(const struct meta_image *img, const uint8_t *id)
{
	uint32_t i = topic_id_lower_bound(img, id);
	return (i < img->topic_count && memcmp(img->topics_by_id[i]->id, id, META_UUID_SIZE) == 0)
		       ? img->topics_by_id[i]
		       : NULL;
}

const struct meta_broker *meta_image_broker(const struct meta_image *img, int32_t id)
{
	return find_broker(img, id);
}

const struct meta_topic *meta_image_topic(const struct meta_image *img, const char *name)
{
	return name != NULL ? find_topic(img, name) : NULL;
}

const struct meta_topic *meta_image_topic_by_id(const struct meta_image *img,
						const uint8_t id[META_UUID_SIZE])
{
	return find_topic_by_id(img, id);
}

const struct meta_partition *meta_image_partition(const struct meta_image *img,
						  const uint8_t topic_id[META_UUID_SIZE],
						  int32_t partition_id)
{
	const struct meta_topic *t = find_topic_by_id(img, topic_id);
	if (t == NULL || partition_id < 0 || (uint32_t)partition_id >= t->partition_count) {
		return NULL;
	}
	return &t->partitions[partition_id];
}

bool meta_broker_active(const struct meta_broker *b)
{
	return b != NULL && !b->fenced && !b->in_controlled_shutdown;
}

bool meta_image_broker_active(const struct meta_image *img, int32_t id)
{
	return meta_broker_active(find_broker(img, id));
}

const char *meta_image_config(const struct meta_image *img, uint8_t resource_type,
			      const char *resource_name, const char *key)
{
	uint32_t i = config_lower_bound(img, resource_type, resource_name, key);
	if (i < img->config_count &&
	    config_cmp(&img->configs[i], resource_type, resource_name, key) == 0) {
		return img->configs[i].value;
	}
	return NULL;
}

uint32_t meta_image_config_range(const struct meta_image *img, uint8_t resource_type,
				 const char *resource_name, uint32_t *first)
{
	uint32_t i = config_lower_bound(img, resource_type, resource_name, NULL);
	uint32_t n = 0;
	while (i + n < img->config_count &&
	       config_cmp(&img->configs[i + n], resource_type, resource_name, NULL) == 0) {
		n++;
	}
	*first = i;
	return n;
}

bool meta_image_unclean_election(const struct meta_image *img, const char *topic)
{
	const char *v = meta_image_config(img, META_RESOURCE_TOPIC, topic,
					  META_CONFIG_UNCLEAN_ELECTION);
	if (v == NULL) {
		v = meta_image_config(img, META_RESOURCE_BROKER, "", META_CONFIG_UNCLEAN_ELECTION);
	}
	return v != NULL && strcmp(v, "true") == 0;
}

/* ---- change sets ---- */

void meta_changes_init(struct meta_changes *ch, uint32_t max_count)
{
	memset(ch, 0, sizeof(*ch));
	ch->max_count = max_count;
	keel_arena_init(&ch->names, 4096);
}

void meta_changes_reset(struct meta_changes *ch)
{
	ch->count = 0;
	ch->overflow = false;
	keel_arena_reset(&ch->names);
}

void meta_changes_close(struct meta_changes *ch)
{
	free(ch->items);
	keel_arena_close(&ch->names);
	memset(ch, 0, sizeof(*ch));
}

static void note(struct meta_changes *ch, const struct meta_change *c)
{
	if (ch == NULL || ch->overflow) {
		return;
	}
	if (ch->count == ch->max_count) {
		ch->overflow = true;
		return;
	}
	if (ch->count == ch->capacity) {
		uint32_t cap = ch->capacity == 0 ? 64 : ch->capacity * 2;
		struct meta_change *items = realloc(ch->items, (size_t)cap * sizeof(*items));
		if (items == NULL) {
			ch->overflow = true;
			return;
		}
		ch->items = items;
		ch->capacity = cap;
	}
	struct meta_change *dst = &ch->items[ch->count];
	*dst = *c;
	if (c->name != NULL) {
		dst->name = keel_arena_dup(&ch->names, c->name, strlen(c->name) + 1);
		if (dst->name == NULL) {
			ch->overflow = true;
			return;
		}
	}
	ch->count++;
}

static void note_broker(struct meta_changes *ch, int32_t id)
{
	struct meta_change c = {.kind = META_CHANGE_BROKER, .broker_id = id};
	note(ch, &c);
}

static void note_partition(struct meta_changes *ch, const uint8_t *topic_id, int32_t partition,
			   bool created, bool replicas_changed, bool reassignment_changed)
{
	struct meta_change c = {.kind = META_CHANGE_PARTITION,
				.partition_id = partition,
				.created = created,
				.replicas_changed = replicas_changed,
				.reassignment_changed = reassignment_changed};
	memcpy(c.topic_id, topic_id, META_UUID_SIZE);
	note(ch, &c);
}

/* ---- small helpers for apply ---- */

/* Sets the reason a record was ignored and returns `err`. */
static enum keel_err ignore(struct meta_errbuf *why, enum keel_err err, const char *msg)
{
	meta_errbuf_set(why, msg);
	return err;
}

static char *dup_str(const char *s, bool *failed)
{
	if (s == NULL) {
		return NULL;
	}
	size_t n = strlen(s) + 1;
	char *d = malloc(n);
	if (d == NULL) {
		*failed = true;
		return NULL;
	}
	memcpy(d, s, n);
	return d;
}

static int32_t *dup_list(const int32_t *v, uint32_t n, bool *failed)
{
	int32_t *d = malloc(n == 0 ? sizeof(int32_t) : (size_t)n * sizeof(int32_t));
	if (d == NULL) {
		*failed = true;
		return NULL;
	}
	if (n > 0) {
		memcpy(d, v, (size_t)n * sizeof(int32_t));
	}
	return d;
}

/* Grows *arr (elements of `elem` bytes) to hold at least `need`. */
static bool ensure_capacity(void **arr, uint32_t *capacity, uint32_t need, size_t elem)
{
	if (need <= *capacity) {
		return true;
	}
	uint32_t cap = *capacity == 0 ? 8 : *capacity;
	while (cap < need) {
		cap = cap > UINT32_MAX / 2 ? need : cap * 2;
	}
	void *p = realloc(*arr, (size_t)cap * elem);
	if (p == NULL) {
		return false;
	}
	*arr = p;
	*capacity = cap;
	return true;
}

static bool is_subset(const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb)
{
	for (uint32_t i = 0; i < na; i++) {
		if (!meta_list_contains(b, nb, a[i])) {
			return false;
		}
	}
	return true;
}

/* The partition-state rules every Partition and PartitionChange must keep. */
static enum keel_err check_partition_state(const int32_t *replicas, uint32_t nr,
					   const int32_t *isr, uint32_t ni, int32_t leader,
					   struct meta_errbuf *why)
{
	if (!is_subset(isr, ni, replicas, nr)) {
		return ignore(why, KEEL_INVAL, "ISR member not among the replicas");
	}
	if (leader != META_NO_LEADER && !meta_list_contains(isr, ni, leader)) {
		return ignore(why, KEEL_INVAL, "leader not in the ISR");
	}
	return KEEL_OK;
}

/* A reassignment's lists must stay inside the replicas (the codec checked
 * that they are distinct ids and disjoint). */
static enum keel_err check_reassignment_state(const int32_t *replicas, uint32_t nr,
					      const int32_t *adding, uint32_t na,
					      const int32_t *removing, uint32_t nrm,
					      struct meta_errbuf *why)
{
	if (!is_subset(adding, na, replicas, nr) || !is_subset(removing, nrm, replicas, nr)) {
		return ignore(why, KEEL_INVAL, "adding or removing replica not among the replicas");
	}
	return KEEL_OK;
}

/* Copies of a reassignment's lists; NULL for an empty one. */
static bool dup_reassignment(const int32_t *adding, uint32_t na, const int32_t *removing,
			     uint32_t nrm, int32_t **out_adding, int32_t **out_removing)
{
	bool failed = false;
	*out_adding = na > 0 ? dup_list(adding, na, &failed) : NULL;
	*out_removing = nrm > 0 ? dup_list(removing, nrm, &failed) : NULL;
	if (failed) {
		free(*out_adding);
		free(*out_removing);
		*out_adding = NULL;
		*out_removing = NULL;
	}
	return !failed;
}

/* ---- brokers ---- */

struct meta_broker *meta_broker_new(const struct meta_register_broker_record *r)
{
	bool failed = false;
	struct meta_broker *b = calloc(1, sizeof(*b));
	if (b == NULL) {
		return NULL;
	}
	b->id = r->broker_id;
	memcpy(b->incarnation_id, r->incarnation_id, META_UUID_SIZE);
	b->epoch = r->broker_epoch;
	b->fenced = r->fenced;
	b->in_controlled_shutdown = r->in_controlled_shutdown;
	b->rack = dup_str(r->rack, &failed);
	if (r->endpoint_count > 0) {
		b->endpoints = calloc(r->endpoint_count, sizeof(*b->endpoints));
		failed |= b->endpoints == NULL;
	}
	for (uint32_t i = 0; !failed && i < r->endpoint_count; i++) {
		b->endpoint_count = i + 1;
		b->endpoints[i].name = dup_str(r->endpoints[i].name, &failed);
		b->endpoints[i].host = dup_str(r->endpoints[i].host, &failed);
		b->endpoints[i].port = r->endpoints[i].port;
		b->endpoints[i].security_protocol = r->endpoints[i].security_protocol;
	}
	if (failed) {
		meta_broker_free(b);
		return NULL;
	}
	return b;
}

static enum keel_err apply_register(struct meta_image *img,
				    const struct meta_register_broker_record *r,
				    struct meta_changes *ch, struct meta_errbuf *why)
{
	if (r->broker_epoch <= img->last_broker_epoch) {
		return ignore(why, KEEL_STALE, "broker epoch not newer than the last one assigned");
	}
	uint32_t at = broker_lower_bound(img, r->broker_id);
	bool exists = at < img->broker_count && img->brokers[at]->id == r->broker_id;
	if (!exists && img->broker_count >= img->limits.max_brokers) {
		return ignore(why, KEEL_LIMIT, "too many brokers");
	}
	if (!exists && !ensure_capacity((void **)&img->brokers, &img->broker_capacity,
					img->broker_count + 1, sizeof(*img->brokers))) {
		return KEEL_NOMEM;
	}
	struct meta_broker *b = meta_broker_new(r);
	if (b == NULL) {
		return KEEL_NOMEM;
	}
	b->registered_offset = img->offset;
	b->registered_timestamp_ms = img->batch_timestamp_ms;
	if (exists) {
		meta_broker_free(img->brokers[at]);
	} else {
		memmove(&img->brokers[at + 1], &img->brokers[at],
			(size_t)(img->broker_count - at) * sizeof(*img->brokers));
		img->broker_count++;
	}
	img->brokers[at] = b;
	img->last_broker_epoch = r->broker_epoch;
	note_broker(ch, r->broker_id);
	return KEEL_OK;
}

/* The registration a ref record names, or NULL with the reason in `why`. */
static struct meta_broker *ref_broker(struct meta_image *img, int32_t id, int64_t epoch,
				      enum keel_err *err, struct meta_errbuf *why)
{
	struct meta_broker *b = find_broker(img, id);
	if (b == NULL) {
		*err = ignore(why, KEEL_NOENT, "broker not registered");
		return NULL;
	}
	if (b->epoch != epoch) {
		*err = ignore(why, KEEL_STALE, "broker epoch does not match the registration");
		return NULL;
	}
	*err = KEEL_OK;
	return b;
}

static enum keel_err apply_unregister(struct meta_image *img, const struct meta_broker_ref_record *r,
				      struct meta_changes *ch, struct meta_errbuf *why)
{
	enum keel_err err;
	struct meta_broker *b = ref_broker(img, r->broker_id, r->broker_epoch, &err, why);
	if (b == NULL) {
		return err;
	}
	uint32_t at = broker_lower_bound(img, r->broker_id);
	KEEL_ASSERT(img->brokers[at] == b);
	meta_broker_free(b);
	memmove(&img->brokers[at], &img->brokers[at + 1],
		(size_t)(img->broker_count - at - 1) * sizeof(*img->brokers));
	img->broker_count--;
	note_broker(ch, r->broker_id);
	return KEEL_OK;
}

static enum keel_err apply_fencing(struct meta_image *img, const struct meta_broker_ref_record *r,
				   bool fence, struct meta_changes *ch, struct meta_errbuf *why)
{
	enum keel_err err;
	struct meta_broker *b = ref_broker(img, r->broker_id, r->broker_epoch, &err, why);
	if (b == NULL) {
		return err;
	}
	if (b->fenced == fence) {
		return ignore(why, KEEL_STALE, fence ? "already fenced" : "already unfenced");
	}
	if (!fence && b->in_controlled_shutdown) {
		return ignore(why, KEEL_INVAL, "a broker in controlled shutdown cannot be unfenced");
	}
	b->fenced = fence;
	note_broker(ch, r->broker_id);
	return KEEL_OK;
}

static enum keel_err apply_broker_change(struct meta_image *img,
					 const struct meta_broker_change_record *r,
					 struct meta_changes *ch, struct meta_errbuf *why)
{
	enum keel_err err;
	struct meta_broker *b = ref_broker(img, r->broker_id, r->broker_epoch, &err, why);
	if (b == NULL) {
		return err;
	}
	bool fenced = r->fenced == META_CHANGE_NONE ? b->fenced : r->fenced == 1;
	bool shutdown = r->in_controlled_shutdown == META_CHANGE_NONE
				? b->in_controlled_shutdown
				: r->in_controlled_shutdown == 1;
	if (fenced == b->fenced && shutdown == b->in_controlled_shutdown) {
		return ignore(why, KEEL_STALE, "changes nothing");
	}
	if (!fenced && shutdown && b->fenced) {
		return ignore(why, KEEL_INVAL, "a broker in controlled shutdown cannot be unfenced");
	}
	b->fenced = fenced;
	b->in_controlled_shutdown = shutdown;
	note_broker(ch, r->broker_id);
	return KEEL_OK;
}

/* ---- topics and partitions ---- */

static enum keel_err apply_topic(struct meta_image *img, const struct meta_topic_record *r,
				 struct meta_changes *ch, struct meta_errbuf *why)
{
	if (find_topic(img, r->name) != NULL) {
		return ignore(why, KEEL_EXIST, "a topic with this name exists");
	}
	if (find_topic_by_id(img, r->topic_id) != NULL) {
		return ignore(why, KEEL_EXIST, "a topic with this id exists");
	}
	if (img->topic_count >= img->limits.max_topics) {
		return ignore(why, KEEL_LIMIT, "too many topics");
	}
	uint32_t cap = img->topic_capacity;
	if (!ensure_capacity((void **)&img->topics, &cap, img->topic_count + 1,
			     sizeof(*img->topics))) {
		return KEEL_NOMEM;
	}
	cap = img->topic_capacity;
	if (!ensure_capacity((void **)&img->topics_by_id, &cap, img->topic_count + 1,
			     sizeof(*img->topics_by_id))) {
		return KEEL_NOMEM;
	}
	img->topic_capacity = cap;
	bool failed = false;
	struct meta_topic *t = calloc(1, sizeof(*t));
	if (t == NULL) {
		return KEEL_NOMEM;
	}
	t->name = dup_str(r->name, &failed);
	if (failed) {
		free(t);
		return KEEL_NOMEM;
	}
	memcpy(t->id, r->topic_id, META_UUID_SIZE);
	t->created_offset = img->offset;

	uint32_t at = topic_name_lower_bound(img, r->name);
	memmove(&img->topics[at + 1], &img->topics[at],
		(size_t)(img->topic_count - at) * sizeof(*img->topics));
	img->topics[at] = t;
	uint32_t at_id = topic_id_lower_bound(img, r->topic_id);
	memmove(&img->topics_by_id[at_id + 1], &img->topics_by_id[at_id],
		(size_t)(img->topic_count - at_id) * sizeof(*img->topics_by_id));
	img->topics_by_id[at_id] = t;
	img->topic_count++;

	struct meta_change c = {.kind = META_CHANGE_TOPIC_CREATED};
	memcpy(c.topic_id, t->id, META_UUID_SIZE);
	note(ch, &c);
	return KEEL_OK;
}

static enum keel_err apply_partition(struct meta_image *img, const struct meta_partition_record *r,
				     struct meta_changes *ch, struct meta_errbuf *why)
{
	struct meta_topic *t = find_topic_by_id(img, r->topic_id);
	if (t == NULL) {
		return ignore(why, KEEL_NOENT, "unknown topic id");
	}
	if ((uint32_t)r->partition_id != t->partition_count) {
		return ignore(why, (uint32_t)r->partition_id < t->partition_count ? KEEL_EXIST
										  : KEEL_INVAL,
			      "partitions must be added in order 0, 1, 2, ...");
	}
	if (img->partition_total >= img->limits.max_partitions) {
		return ignore(why, KEEL_LIMIT, "too many partitions");
	}
	enum keel_err err = check_partition_state(r->replicas, r->replica_count, r->isr,
						  r->isr_count, r->leader, why);
	if (err == KEEL_OK) {
		err = check_reassignment_state(r->replicas, r->replica_count, r->adding,
					       r->adding_count, r->removing, r->removing_count,
					       why);
	}
	if (err != KEEL_OK) {
		return err;
	}
	if (!ensure_capacity((void **)&t->partitions, &t->partition_capacity,
			     t->partition_count + 1, sizeof(*t->partitions))) {
		return KEEL_NOMEM;
	}
	bool failed = false;
	int32_t *replicas = dup_list(r->replicas, r->replica_count, &failed);
	int32_t *isr = dup_list(r->isr, r->isr_count, &failed);
	int32_t *adding = NULL;
	int32_t *removing = NULL;
	failed |= !dup_reassignment(r->adding, r->adding_count, r->removing, r->removing_count,
				    &adding, &removing);
	if (failed) {
		free(replicas);
		free(isr);
		free(adding);
		free(removing);
		return KEEL_NOMEM;
	}
	struct meta_partition *p = &t->partitions[t->partition_count];
	p->adding = adding;
	p->adding_count = r->adding_count;
	p->removing = removing;
	p->removing_count = r->removing_count;
	p->replicas = replicas;
	p->replica_count = r->replica_count;
	p->isr = isr;
	p->isr_count = r->isr_count;
	p->leader = r->leader;
	p->leader_epoch = r->leader_epoch;
	p->partition_epoch = r->partition_epoch;
	p->leader_recovery_state = r->leader_recovery_state;
	p->controller_epoch = img->controller_epoch;
	p->changed_offset = img->offset;
	t->partition_count++;
	img->partition_total++;
	note_partition(ch, t->id, r->partition_id, true, true, r->adding_count + r->removing_count > 0);
	return KEEL_OK;
}

static enum keel_err apply_partition_change(struct meta_image *img,
					    const struct meta_partition_change_record *r,
					    struct meta_changes *ch, struct meta_errbuf *why)
{
	struct meta_topic *t = find_topic_by_id(img, r->topic_id);
	if (t == NULL) {
		return ignore(why, KEEL_NOENT, "unknown topic id");
	}
	if ((uint32_t)r->partition_id >= t->partition_count) {
		return ignore(why, KEEL_NOENT, "unknown partition");
	}
	struct meta_partition *p = &t->partitions[r->partition_id];
	if (r->partition_epoch != p->partition_epoch + 1) {
		return ignore(why, KEEL_STALE, "partition epoch does not follow the current one");
	}
	bool leader_change = (r->fields & META_PC_LEADER) != 0;
	if (leader_change && r->leader_epoch != p->leader_epoch + 1) {
		return ignore(why, KEEL_STALE, "leader epoch does not follow the current one");
	}
	const int32_t *replicas = p->replicas;
	uint32_t nr = p->replica_count;
	const int32_t *isr = p->isr;
	uint32_t ni = p->isr_count;
	if (r->fields & META_PC_REPLICAS) {
		replicas = r->replicas;
		nr = r->replica_count;
	}
	if (r->fields & META_PC_ISR) {
		isr = r->isr;
		ni = r->isr_count;
	}
	bool reassign = (r->fields & META_PC_REASSIGNMENT) != 0;
	const int32_t *adding = reassign ? r->adding : p->adding;
	uint32_t na = reassign ? r->adding_count : p->adding_count;
	const int32_t *removing = reassign ? r->removing : p->removing;
	uint32_t nrm = reassign ? r->removing_count : p->removing_count;
	int32_t leader = leader_change ? r->leader : p->leader;
	enum keel_err err = check_partition_state(replicas, nr, isr, ni, leader, why);
	if (err == KEEL_OK) {
		err = check_reassignment_state(replicas, nr, adding, na, removing, nrm, why);
	}
	if (err != KEEL_OK) {
		return err;
	}
	bool failed = false;
	int32_t *new_replicas = NULL;
	int32_t *new_isr = NULL;
	int32_t *new_adding = NULL;
	int32_t *new_removing = NULL;
	if (r->fields & META_PC_REPLICAS) {
		new_replicas = dup_list(replicas, nr, &failed);
	}
	if (r->fields & META_PC_ISR) {
		new_isr = dup_list(isr, ni, &failed);
	}
	if (reassign) {
		failed |= !dup_reassignment(adding, na, removing, nrm, &new_adding, &new_removing);
	}
	if (failed) {
		free(new_replicas);
		free(new_isr);
		free(new_adding);
		free(new_removing);
		return KEEL_NOMEM;
	}
	if (reassign) {
		free(p->adding);
		free(p->removing);
		p->adding = new_adding;
		p->adding_count = na;
		p->removing = new_removing;
		p->removing_count = nrm;
	}
	if (new_replicas != NULL) {
		free(p->replicas);
		p->replicas = new_replicas;
		p->replica_count = nr;
	}
	if (new_isr != NULL) {
		free(p->isr);
		p->isr = new_isr;
		p->isr_count = ni;
	}
	if (leader_change) {
		p->leader = r->leader;
		p->leader_epoch = r->leader_epoch;
	}
	if (r->fields & META_PC_RECOVERY) {
		p->leader_recovery_state = r->leader_recovery_state;
	}
	p->partition_epoch = r->partition_epoch;
	p->controller_epoch = img->controller_epoch;
	p->changed_offset = img->offset;
	note_partition(ch, t->id, r->partition_id, false, (r->fields & META_PC_REPLICAS) != 0,
		       reassign);
	return KEEL_OK;
}

static void remove_configs_of(struct meta_image *img, uint8_t type, const char *name)
{
	uint32_t first;
	uint32_t n = meta_image_config_range(img, type, name, &first);
	if (n == 0) {
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		meta_config_entry_free(&img->configs[first + i]);
	}
	memmove(&img->configs[first], &img->configs[first + n],
		(size_t)(img->config_count - first - n) * sizeof(*img->configs));
	img->config_count -= n;
}

static enum keel_err apply_remove_topic(struct meta_image *img,
					const struct meta_remove_topic_record *r,
					struct meta_changes *ch, struct meta_errbuf *why)
{
	struct meta_topic *t = find_topic_by_id(img, r->topic_id);
	if (t == NULL) {
		return ignore(why, KEEL_NOENT, "unknown topic id");
	}
	struct meta_change c = {.kind = META_CHANGE_TOPIC_REMOVED,
				.name = t->name,
				.partition_count = t->partition_count};
	memcpy(c.topic_id, t->id, META_UUID_SIZE);
	note(ch, &c);

	remove_configs_of(img, META_RESOURCE_TOPIC, t->name);
	uint32_t at = topic_name_lower_bound(img, t->name);
	KEEL_ASSERT(img->topics[at] == t);
	memmove(&img->topics[at], &img->topics[at + 1],
		(size_t)(img->topic_count - at - 1) * sizeof(*img->topics));
	uint32_t at_id = topic_id_lower_bound(img, t->id);
	KEEL_ASSERT(img->topics_by_id[at_id] == t);
	memmove(&img->topics_by_id[at_id], &img->topics_by_id[at_id + 1],
		(size_t)(img->topic_count - at_id - 1) * sizeof(*img->topics_by_id));
	img->topic_count--;
	img->partition_total -= t->partition_count;
	meta_topic_free(t);
	return KEEL_OK;
}

/* ---- configs ---- */

static enum keel_err apply_config(struct meta_image *img, const struct meta_config_record *r,
				  struct meta_changes *ch, struct meta_errbuf *why)
{
	if (r->resource_type == META_RESOURCE_TOPIC && find_topic(img, r->resource_name) == NULL) {
		return ignore(why, KEEL_NOENT, "config for a topic that does not exist");
	}
	uint32_t at = config_lower_bound(img, r->resource_type, r->resource_name, r->key);
	bool exists = at < img->config_count &&
		      config_cmp(&img->configs[at], r->resource_type, r->resource_name, r->key) == 0;
	bool failed = false;
	if (r->value == NULL) {
		if (!exists) {
			return ignore(why, KEEL_NOENT, "deletes a config key that is not set");
		}
		meta_config_entry_free(&img->configs[at]);
		memmove(&img->configs[at], &img->configs[at + 1],
			(size_t)(img->config_count - at - 1) * sizeof(*img->configs));
		img->config_count--;
	} else if (exists) {
		char *value = dup_str(r->value, &failed);
		if (failed) {
			return KEEL_NOMEM;
		}
		free(img->configs[at].value);
		img->configs[at].value = value;
	} else {
		if (img->config_count >= img->limits.max_configs) {
			return ignore(why, KEEL_LIMIT, "too many config entries");
		}
		if (!ensure_capacity((void **)&img->configs, &img->config_capacity,
				     img->config_count + 1, sizeof(*img->configs))) {
			return KEEL_NOMEM;
		}
		struct meta_config_entry e = {r->resource_type, dup_str(r->resource_name, &failed),
					      dup_str(r->key, &failed), dup_str(r->value, &failed)};
		if (failed) {
			meta_config_entry_free(&e);
			return KEEL_NOMEM;
		}
		memmove(&img->configs[at + 1], &img->configs[at],
			(size_t)(img->config_count - at) * sizeof(*img->configs));
		img->configs[at] = e;
		img->config_count++;
	}
	struct meta_change c = {.kind = META_CHANGE_CONFIG,
				.resource_type = r->resource_type,
				.name = r->resource_name};
	note(ch, &c);
	return KEEL_OK;
}

static enum keel_err apply_producer_ids(struct meta_image *img,
					const struct meta_producer_ids_record *r,
					struct meta_errbuf *why)
{
	if (r->next_producer_id <= img->next_producer_id) {
		return ignore(why, KEEL_STALE, "next producer id does not move forward");
	}
	img->next_producer_id = r->next_producer_id;
	return KEEL_OK;
}

/* ---- apply ---- */

enum keel_err meta_image_apply_record(struct meta_image *img, const struct meta_record *rec,
				      struct meta_changes *changes, struct meta_errbuf *why)
{
	if (why != NULL) {
		why->msg[0] = '\0';
	}
	switch (rec->type) {
	case META_REC_REGISTER_BROKER:
		return apply_register(img, &rec->register_broker, changes, why);
	case META_REC_UNREGISTER_BROKER:
		return apply_unregister(img, &rec->unregister_broker, changes, why);
	case META_REC_FENCE_BROKER:
		return apply_fencing(img, &rec->fence_broker, true, changes, why);
	case META_REC_UNFENCE_BROKER:
		return apply_fencing(img, &rec->unfence_broker, false, changes, why);
	case META_REC_BROKER_REGISTRATION_CHANGE:
		return apply_broker_change(img, &rec->broker_change, changes, why);
	case META_REC_TOPIC:
		return apply_topic(img, &rec->topic, changes, why);
	case META_REC_PARTITION:
		return apply_partition(img, &rec->partition, changes, why);
	case META_REC_PARTITION_CHANGE:
		return apply_partition_change(img, &rec->partition_change, changes, why);
	case META_REC_REMOVE_TOPIC:
		return apply_remove_topic(img, &rec->remove_topic, changes, why);
	case META_REC_CONFIG:
		return apply_config(img, &rec->config, changes, why);
	case META_REC_PRODUCER_IDS:
		return apply_producer_ids(img, &rec->producer_ids, why);
	case META_REC_NOOP:
		return KEEL_OK;
	default:
		return ignore(why, KEEL_INVAL, "unknown record type");
	}
}

enum keel_err meta_image_begin_batch(struct meta_image *img, int64_t offset,
				     const struct meta_batch_header *hdr,
				     struct meta_changes *changes)
{
	if (offset <= img->offset) {
		return KEEL_INVAL;
	}
	img->offset = offset;
	img->batch_timestamp_ms = hdr->timestamp_ms;
	if (hdr->controller_epoch < img->controller_epoch) {
		return KEEL_STALE;
	}
	if (hdr->controller_epoch == img->controller_epoch &&
	    hdr->controller_id != img->controller_id) {
		/* Two controllers in one epoch cannot happen under Raft; if it
		 * does, the first one to write keeps the epoch. */
		return KEEL_STALE;
	}
	if (hdr->controller_epoch > img->controller_epoch) {
		img->controller_id = hdr->controller_id;
		img->controller_epoch = hdr->controller_epoch;
		img->controller_timestamp_ms = hdr->timestamp_ms;
		struct meta_change c = {.kind = META_CHANGE_CONTROLLER};
		note(changes, &c);
	}
	return KEEL_OK;
}

enum keel_err meta_image_apply(struct meta_image *img, int64_t offset,
			       const struct meta_batch *batch, struct meta_changes *changes,
			       struct meta_apply_result *result)
{
	struct meta_apply_result local;
	if (result == NULL) {
		result = &local;
	}
	memset(result, 0, sizeof(*result));
	enum keel_err err = meta_image_begin_batch(img, offset, &batch->hdr, changes);
	if (err == KEEL_INVAL) {
		return KEEL_INVAL;
	}
	if (err == KEEL_STALE) {
		result->batch_ignored = true;
		result->ignored = batch->count;
		return KEEL_OK;
	}
	for (uint32_t i = 0; i < batch->count; i++) {
		err = meta_image_apply_record(img, &batch->records[i], changes, NULL);
		if (err == KEEL_NOMEM) {
			return KEEL_NOMEM;
		}
		if (err == KEEL_OK) {
			result->applied++;
		} else {
			result->ignored++;
		}
	}
	return KEEL_OK;
}

/* ---- invariant check ---- */

static bool fail_check(struct meta_errbuf *eb, const char *msg)
{
	meta_errbuf_set(eb, msg);
	return false;
}

static bool check_topic(const struct meta_image *img, const struct meta_topic *t,
			struct meta_errbuf *eb)
{
	if (!meta_topic_name_valid(t->name)) {
		return fail_check(eb, "invalid topic name");
	}
	if (find_topic_by_id(img, t->id) != t) {
		return fail_check(eb, "topic missing from the id index");
	}
	for (uint32_t p = 0; p < t->partition_count; p++) {
		const struct meta_partition *part = &t->partitions[p];
		if (part->replica_count == 0 ||
		    !meta_broker_list_valid(part->replicas, part->replica_count)) {
			return fail_check(eb, "bad replica list");
		}
		if (!meta_broker_list_valid(part->isr, part->isr_count) ||
		    !is_subset(part->isr, part->isr_count, part->replicas, part->replica_count)) {
			return fail_check(eb, "ISR not a subset of the replicas");
		}
		if (part->leader != META_NO_LEADER &&
		    !meta_list_contains(part->isr, part->isr_count, part->leader)) {
			return fail_check(eb, "leader not in the ISR");
		}
		if (part->leader_epoch < 0 || part->partition_epoch < 0) {
			return fail_check(eb, "negative epoch");
		}
		if (!meta_broker_list_valid(part->adding, part->adding_count) ||
		    !meta_broker_list_valid(part->removing, part->removing_count) ||
		    !is_subset(part->adding, part->adding_count, part->replicas,
			       part->replica_count) ||
		    !is_subset(part->removing, part->removing_count, part->replicas,
			       part->replica_count)) {
			return fail_check(eb, "adding or removing replicas not among the replicas");
		}
		for (uint32_t i = 0; i < part->adding_count; i++) {
			if (meta_list_contains(part->removing, part->removing_count,
					       part->adding[i])) {
				return fail_check(eb, "a replica both adding and removing");
			}
		}
	}
	return true;
}

bool meta_image_check(const struct meta_image *img, struct meta_errbuf *eb)
{
	for (uint32_t i = 0; i < img->broker_count; i++) {
		const struct meta_broker *b = img->brokers[i];
		if (i > 0 && img->brokers[i - 1]->id >= b->id) {
			return fail_check(eb, "brokers not sorted by id");
		}
		if (b->epoch > img->last_broker_epoch) {
			return fail_check(eb, "broker epoch above last_broker_epoch");
		}
		for (uint32_t j = 0; j < i; j++) {
			if (img->brokers[j]->epoch == b->epoch) {
				return fail_check(eb, "two brokers share an epoch");
			}
		}
	}
	uint32_t partitions = 0;
	for (uint32_t i = 0; i < img->topic_count; i++) {
		const struct meta_topic *t = img->topics[i];
		if (i > 0 && strcmp(img->topics[i - 1]->name, t->name) >= 0) {
			return fail_check(eb, "topics not sorted by name");
		}
		if (i > 0 && memcmp(img->topics_by_id[i - 1]->id, img->topics_by_id[i]->id,
				    META_UUID_SIZE) >= 0) {
			return fail_check(eb, "topic id index not sorted");
		}
		if (!check_topic(img, t, eb)) {
			return false;
		}
		partitions += t->partition_count;
	}
	if (partitions != img->partition_total) {
		return fail_check(eb, "partition_total out of step");
	}
	for (uint32_t i = 1; i < img->config_count; i++) {
		const struct meta_config_entry *a = &img->configs[i - 1];
		if (config_cmp(a, img->configs[i].resource_type, img->configs[i].resource_name,
			       img->configs[i].key) >= 0) {
			return fail_check(eb, "configs not sorted");
		}
	}
	return true;
}
