/*
 * snapshot.c — saving and loading the metadata image, its hash, its clone.
 *
 * Format (all big-endian, strings/arrays as in codec.h):
 *
 *   "KMI1" format:u16 (0; 1 when some partition is being reassigned; 2 when
 *                      next_producer_id > 0 — the smallest that carries the
 *                      image, so older servers read what they can)
 *   offset:i64 controller_id:i32 controller_epoch:i32
 *   controller_timestamp_ms:i64 last_broker_epoch:i64
 *   broker_count:u32 topic_count:u32 config_count:u32
 *   entity*  — each  size:u32 body[size], in this order:
 *     broker_count brokers (by id):
 *       id:i32 incarnation:16 epoch:i64 endpoints:[name host port:u16
 *       protocol:i16] rack:str|null fenced:bool in_controlled_shutdown:bool
 *       registered_offset:i64 registered_timestamp_ms:i64
 *     topic_count topics (by name), each followed by its partitions:
 *       topic:     name:str id:16 created_offset:i64 partition_count:u32
 *       partition: replicas:[i32] isr:[i32] leader:i32 leader_epoch:i32
 *                  partition_epoch:i32 recovery:u8 controller_epoch:i32
 *                  changed_offset:i64
 *                  [adding:[i32] removing:[i32]]   (format >= 1)
 *     config_count configs (by type, name, key):
 *       type:u8 name:str key:str value:str
 *   next_producer_id:i64 (> 0)                            (format 2 only)
 *   crc32c:u32 of every byte before it
 *
 * An image without a reassignment saves as format 0, byte for byte as
 * before format 1 existed, so such a snapshot still loads on an older
 * server.
 *
 * The encoding is canonical (one image, one byte string), which is what
 * makes meta_image_hash comparable across servers. Load re-checks order,
 * uniqueness, limits and the partition invariants, so a corrupt or hostile
 * file is refused rather than half-loaded.
 */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/crc32c.h"
#include "meta/codec.h"
#include "meta/image.h"
#include "meta/image_internal.h"

#define SNAP_MAGIC "KMI1"
#define SNAP_FORMAT 2 /* the newest */
#define SNAP_HEADER_SIZE (4 + 2 + 8 + 4 + 4 + 8 + 8 + 4 + 4 + 4)
_Static_assert(SNAP_HEADER_SIZE == 50, "the image snapshot header is 50 bytes");
#define SNAP_MAX_ENTITY (64 * 1024)
#define SNAP_FLUSH_AT (32 * 1024)

/* ---- save ---- */

struct saver {
	uint16_t format;
	meta_write_fn write;
	void *ctx;
	struct keel_wbuf w;
	uint32_t crc;
	enum keel_err err;
};

static void saver_flush(struct saver *s)
{
	if (s->err != KEEL_OK) {
		return;
	}
	if (!keel_wbuf_ok(&s->w)) {
		s->err = KEEL_NOMEM;
		return;
	}
	if (s->w.size > 0) {
		s->crc = keel_crc32c(s->crc, s->w.data, s->w.size);
		s->err = s->write(s->ctx, s->w.data, s->w.size);
	}
	keel_wbuf_reset(&s->w);
}

/* Starts an entity (reserves its size); returns where the size goes. */
static size_t entity_begin(struct saver *s)
{
	size_t at = s->w.size;
	keel_wbuf_u32(&s->w, 0);
	return at;
}

static void entity_end(struct saver *s, size_t at)
{
	if (keel_wbuf_ok(&s->w)) {
		keel_wbuf_patch_u32(&s->w, at, (uint32_t)(s->w.size - at - 4));
	}
	if (s->w.size >= SNAP_FLUSH_AT) {
		saver_flush(s);
	}
}

static void save_broker(struct saver *s, const struct meta_broker *b)
{
	struct keel_wbuf *w = &s->w;
	size_t at = entity_begin(s);
	keel_wbuf_i32(w, b->id);
	meta_enc_uuid(w, b->incarnation_id);
	keel_wbuf_i64(w, b->epoch);
	keel_wbuf_i32(w, (int32_t)b->endpoint_count);
	for (uint32_t i = 0; i < b->endpoint_count; i++) {
		meta_enc_str(w, b->endpoints[i].name);
		meta_enc_str(w, b->endpoints[i].host);
		keel_wbuf_u16(w, b->endpoints[i].port);
		keel_wbuf_u16(w, (uint16_t)b->endpoints[i].security_protocol);
	}
	meta_enc_str(w, b->rack);
	keel_wbuf_bool(w, b->fenced);
	keel_wbuf_bool(w, b->in_controlled_shutdown);
	keel_wbuf_i64(w, b->registered_offset);
	keel_wbuf_i64(w, b->registered_timestamp_ms);
	entity_end(s, at);
}

static void save_topic(struct saver *s, const struct meta_topic *t)
{
	struct keel_wbuf *w = &s->w;
	size_t at = entity_begin(s);
	meta_enc_str(w, t->name);
	meta_enc_uuid(w, t->id);
	keel_wbuf_i64(w, t->created_offset);
	keel_wbuf_u32(w, t->partition_count);
	entity_end(s, at);
	for (uint32_t i = 0; i < t->partition_count && s->err == KEEL_OK; i++) {
		const struct meta_partition *p = &t->partitions[i];
		at = entity_begin(s);
		meta_enc_i32_array(w, p->replicas, p->replica_count);
		meta_enc_i32_array(w, p->isr, p->isr_count);
		keel_wbuf_i32(w, p->leader);
		keel_wbuf_i32(w, p->leader_epoch);
		keel_wbuf_i32(w, p->partition_epoch);
		keel_wbuf_u8(w, p->leader_recovery_state);
		keel_wbuf_i32(w, p->controller_epoch);
		keel_wbuf_i64(w, p->changed_offset);
		if (s->format >= 1) {
			meta_enc_i32_array(w, p->adding, p->adding_count);
			meta_enc_i32_array(w, p->removing, p->removing_count);
		}
		entity_end(s, at);
	}
}

static void save_config(struct saver *s, const struct meta_config_entry *c)
{
	size_t at = entity_begin(s);
	keel_wbuf_u8(&s->w, c->resource_type);
	meta_enc_str(&s->w, c->resource_name);
	meta_enc_str(&s->w, c->key);
	meta_enc_str(&s->w, c->value);
	entity_end(s, at);
}

static bool any_reassignment(const struct meta_image *img)
{
	for (uint32_t t = 0; t < img->topic_count; t++) {
		for (uint32_t p = 0; p < img->topics[t]->partition_count; p++) {
			if (meta_partition_reassigning(&img->topics[t]->partitions[p])) {
				return true;
			}
		}
	}
	return false;
}

enum keel_err meta_image_save(const struct meta_image *img, meta_write_fn write, void *ctx)
{
	struct saver s = {.write = write, .ctx = ctx, .crc = 0, .err = KEEL_OK};
	s.format = img->next_producer_id > 0 ? 2 : any_reassignment(img) ? 1 : 0;
	keel_wbuf_init_dynamic(&s.w, SNAP_FLUSH_AT + SNAP_MAX_ENTITY,
			       SNAP_FLUSH_AT + SNAP_MAX_ENTITY);
	keel_wbuf_bytes(&s.w, SNAP_MAGIC, 4);
	keel_wbuf_u16(&s.w, s.format);
	keel_wbuf_i64(&s.w, img->offset);
	keel_wbuf_i32(&s.w, img->controller_id);
	keel_wbuf_i32(&s.w, img->controller_epoch);
	keel_wbuf_i64(&s.w, img->controller_timestamp_ms);
	keel_wbuf_i64(&s.w, img->last_broker_epoch);
	keel_wbuf_u32(&s.w, img->broker_count);
	keel_wbuf_u32(&s.w, img->topic_count);
	keel_wbuf_u32(&s.w, img->config_count);
	for (uint32_t i = 0; i < img->broker_count && s.err == KEEL_OK; i++) {
		save_broker(&s, img->brokers[i]);
	}
	for (uint32_t i = 0; i < img->topic_count && s.err == KEEL_OK; i++) {
		save_topic(&s, img->topics[i]);
	}
	for (uint32_t i = 0; i < img->config_count && s.err == KEEL_OK; i++) {
		save_config(&s, &img->configs[i]);
	}
	if (s.format >= 2) {
		keel_wbuf_i64(&s.w, img->next_producer_id);
	}
	saver_flush(&s);
	if (s.err == KEEL_OK) {
		uint8_t crc[4];
		keel_store_be32(crc, s.crc);
		s.err = write(ctx, crc, sizeof(crc));
	}
	keel_wbuf_free(&s.w);
	return s.err;
}

/* ---- load ---- */

struct loader {
	uint16_t format;
	meta_read_fn read;
	void *ctx;
	uint32_t crc;
	struct meta_errbuf *eb;
	uint8_t *body; /* SNAP_MAX_ENTITY bytes */
	struct keel_arena arena;
};

static enum keel_err load_bytes(struct loader *l, void *buf, size_t size)
{
	enum keel_err err = l->read(l->ctx, buf, size);
	if (err == KEEL_OK) {
		l->crc = keel_crc32c(l->crc, buf, size);
	} else if (err == KEEL_SHORT) {
		meta_errbuf_set(l->eb, "image snapshot ends early");
	}
	return err;
}

/* Reads the next entity into l->body; a decoder over it goes in *d. */
static enum keel_err load_entity(struct loader *l, struct meta_dec *d)
{
	uint8_t size_be[4];
	enum keel_err err = load_bytes(l, size_be, 4);
	if (err != KEEL_OK) {
		return err;
	}
	uint32_t size = keel_load_be32(size_be);
	if (size > SNAP_MAX_ENTITY) {
		meta_errbuf_set(l->eb, "image snapshot entity larger than the limit");
		return KEEL_CORRUPT;
	}
	err = load_bytes(l, l->body, size);
	if (err != KEEL_OK) {
		return err;
	}
	keel_arena_reset(&l->arena);
	meta_dec_init(d, l->body, size, &l->arena, l->eb);
	return KEEL_OK;
}

static enum keel_err corrupt(struct loader *l, const char *msg)
{
	meta_errbuf_set(l->eb, msg);
	return KEEL_CORRUPT;
}

static enum keel_err load_broker(struct loader *l, struct meta_image *img)
{
	struct meta_dec d;
	enum keel_err err = load_entity(l, &d);
	if (err != KEEL_OK) {
		return err;
	}
	struct meta_register_broker_record r;
	memset(&r, 0, sizeof(r));
	r.broker_id = meta_dec_i32(&d);
	meta_dec_uuid(&d, r.incarnation_id);
	r.broker_epoch = meta_dec_i64(&d);
	uint32_t n = meta_dec_count(&d, META_MAX_ENDPOINTS, 12, "endpoints");
	struct meta_endpoint *eps = meta_dec_alloc(&d, n, sizeof(*eps));
	for (uint32_t i = 0; eps != NULL && i < n; i++) {
		eps[i].name = meta_dec_str(&d, false, META_MAX_SHORT_STRING, "endpoint name");
		eps[i].host = meta_dec_str(&d, false, META_MAX_SHORT_STRING, "endpoint host");
		eps[i].port = (uint16_t)meta_dec_i16(&d);
		eps[i].security_protocol = meta_dec_i16(&d);
	}
	r.endpoints = eps;
	r.endpoint_count = n;
	r.rack = meta_dec_str(&d, true, META_MAX_SHORT_STRING, "rack");
	r.fenced = meta_dec_bool(&d, "fenced");
	r.in_controlled_shutdown = meta_dec_bool(&d, "in_controlled_shutdown");
	int64_t registered_offset = meta_dec_i64(&d);
	int64_t registered_ts = meta_dec_i64(&d);
	err = meta_dec_finish(&d, true, "image broker");
	if (err != KEEL_OK) {
		return err;
	}
	if (r.broker_id < 0 || r.broker_epoch < 0 || r.broker_epoch > img->last_broker_epoch) {
		return corrupt(l, "image broker: bad id or epoch");
	}
	if (img->broker_count > 0 && img->brokers[img->broker_count - 1]->id >= r.broker_id) {
		return corrupt(l, "image brokers out of order");
	}
	struct meta_broker *b = meta_broker_new(&r);
	if (b == NULL) {
		return KEEL_NOMEM;
	}
	b->registered_offset = registered_offset;
	b->registered_timestamp_ms = registered_ts;
	img->brokers[img->broker_count++] = b;
	return KEEL_OK;
}

static enum keel_err load_partition(struct loader *l, struct meta_partition *p)
{
	struct meta_dec d;
	enum keel_err err = load_entity(l, &d);
	if (err != KEEL_OK) {
		return err;
	}
	uint32_t nr, ni;
	const int32_t *replicas = meta_dec_i32_array(&d, META_MAX_REPLICAS, &nr, "replicas");
	const int32_t *isr = meta_dec_i32_array(&d, META_MAX_REPLICAS, &ni, "isr");
	int32_t leader = meta_dec_i32(&d);
	int32_t leader_epoch = meta_dec_i32(&d);
	int32_t partition_epoch = meta_dec_i32(&d);
	uint8_t recovery = (uint8_t)meta_dec_i8(&d);
	int32_t controller_epoch = meta_dec_i32(&d);
	int64_t changed_offset = meta_dec_i64(&d);
	uint32_t na = 0, nrm = 0;
	const int32_t *adding = NULL, *removing = NULL;
	if (l->format >= 1) {
		adding = meta_dec_i32_array(&d, META_MAX_REPLICAS, &na, "adding");
		removing = meta_dec_i32_array(&d, META_MAX_REPLICAS, &nrm, "removing");
	}
	err = meta_dec_finish(&d, true, "image partition");
	if (err != KEEL_OK) {
		return err;
	}
	if (nr == 0 || !meta_broker_list_valid(replicas, nr) || !meta_broker_list_valid(isr, ni)) {
		return corrupt(l, "image partition: bad replica or ISR list");
	}
	for (uint32_t i = 0; i < ni; i++) {
		if (!meta_list_contains(replicas, nr, isr[i])) {
			return corrupt(l, "image partition: ISR not a subset of the replicas");
		}
	}
	if (leader != META_NO_LEADER && !meta_list_contains(isr, ni, leader)) {
		return corrupt(l, "image partition: leader not in the ISR");
	}
	if (leader_epoch < 0 || partition_epoch < 0 || recovery > META_RECOVERING) {
		return corrupt(l, "image partition: bad epoch or recovery state");
	}
	if (!meta_broker_list_valid(adding, na) || !meta_broker_list_valid(removing, nrm)) {
		return corrupt(l, "image partition: bad adding or removing list");
	}
	for (uint32_t i = 0; i < na; i++) {
		if (!meta_list_contains(replicas, nr, adding[i]) ||
		    meta_list_contains(removing, nrm, adding[i])) {
			return corrupt(l, "image partition: adding replica not a replica, or removing");
		}
	}
	for (uint32_t i = 0; i < nrm; i++) {
		if (!meta_list_contains(replicas, nr, removing[i])) {
			return corrupt(l, "image partition: removing replica not a replica");
		}
	}
	if (na > 0) {
		p->adding = malloc((size_t)na * sizeof(int32_t));
		if (p->adding == NULL) {
			return KEEL_NOMEM;
		}
		memcpy(p->adding, adding, (size_t)na * sizeof(int32_t));
		p->adding_count = na;
	}
	if (nrm > 0) {
		p->removing = malloc((size_t)nrm * sizeof(int32_t));
		if (p->removing == NULL) {
			return KEEL_NOMEM;
		}
		memcpy(p->removing, removing, (size_t)nrm * sizeof(int32_t));
		p->removing_count = nrm;
	}
	p->replicas = malloc((size_t)nr * sizeof(int32_t));
	p->isr = malloc((size_t)(ni == 0 ? 1 : ni) * sizeof(int32_t));
	if (p->replicas == NULL || p->isr == NULL) {
		return KEEL_NOMEM;
	}
	memcpy(p->replicas, replicas, (size_t)nr * sizeof(int32_t));
	if (ni > 0) {
		memcpy(p->isr, isr, (size_t)ni * sizeof(int32_t));
	}
	p->replica_count = nr;
	p->isr_count = ni;
	p->leader = leader;
	p->leader_epoch = leader_epoch;
	p->partition_epoch = partition_epoch;
	p->leader_recovery_state = recovery;
	p->controller_epoch = controller_epoch;
	p->changed_offset = changed_offset;
	return KEEL_OK;
}

static enum keel_err load_topic(struct loader *l, struct meta_image *img)
{
	struct meta_dec d;
	enum keel_err err = load_entity(l, &d);
	if (err != KEEL_OK) {
		return err;
	}
	const char *name = meta_dec_str(&d, false, META_MAX_TOPIC_NAME, "topic name");
	uint8_t id[META_UUID_SIZE];
	meta_dec_uuid(&d, id);
	int64_t created_offset = meta_dec_i64(&d);
	uint32_t partition_count = keel_rbuf_u32(&d.r);
	err = meta_dec_finish(&d, true, "image topic");
	if (err != KEEL_OK) {
		return err;
	}
	if (!meta_topic_name_valid(name) || meta_uuid_is_zero(id)) {
		return corrupt(l, "image topic: invalid name or id");
	}
	if (img->topic_count > 0 && strcmp(img->topics[img->topic_count - 1]->name, name) >= 0) {
		return corrupt(l, "image topics out of order");
	}
	if (partition_count > img->limits.max_partitions - img->partition_total) {
		meta_errbuf_set(l->eb, "image holds more partitions than the limit");
		return KEEL_TOOBIG;
	}
	struct meta_topic *t = calloc(1, sizeof(*t));
	if (t == NULL) {
		return KEEL_NOMEM;
	}
	img->topics[img->topic_count] = t;
	img->topics_by_id[img->topic_count] = t;
	img->topic_count++;
	size_t name_size = strlen(name) + 1;
	t->name = malloc(name_size);
	if (t->name == NULL) {
		return KEEL_NOMEM;
	}
	memcpy(t->name, name, name_size);
	memcpy(t->id, id, META_UUID_SIZE);
	t->created_offset = created_offset;
	if (partition_count > 0) {
		/* Grown as partitions arrive: the count alone allocates nothing. */
		for (uint32_t i = 0; i < partition_count; i++) {
			if (t->partition_count == t->partition_capacity) {
				uint32_t cap = t->partition_capacity == 0
						       ? KEEL_MIN(partition_count, 64u)
						       : KEEL_MIN(partition_count,
								  t->partition_capacity * 2);
				void *np = realloc(t->partitions, (size_t)cap * sizeof(*t->partitions));
				if (np == NULL) {
					return KEEL_NOMEM;
				}
				t->partitions = np;
				t->partition_capacity = cap;
			}
			struct meta_partition *p = &t->partitions[t->partition_count];
			memset(p, 0, sizeof(*p));
			t->partition_count++;
			img->partition_total++;
			err = load_partition(l, p);
			if (err != KEEL_OK) {
				return err;
			}
		}
	}
	return KEEL_OK;
}

static enum keel_err load_config(struct loader *l, struct meta_image *img)
{
	struct meta_dec d;
	enum keel_err err = load_entity(l, &d);
	if (err != KEEL_OK) {
		return err;
	}
	uint8_t type = (uint8_t)meta_dec_i8(&d);
	const char *name = meta_dec_str(&d, false, META_MAX_SHORT_STRING, "resource name");
	const char *key = meta_dec_str(&d, false, META_MAX_SHORT_STRING, "config key");
	const char *value = meta_dec_str(&d, false, META_MAX_CONFIG_VALUE, "config value");
	err = meta_dec_finish(&d, true, "image config");
	if (err != KEEL_OK) {
		return err;
	}
	if (type != META_RESOURCE_TOPIC && type != META_RESOURCE_BROKER) {
		return corrupt(l, "image config: unknown resource type");
	}
	if (key[0] == '\0') {
		return corrupt(l, "image config: empty key");
	}
	if (type == META_RESOURCE_TOPIC && meta_image_topic(img, name) == NULL) {
		return corrupt(l, "image config for a topic that does not exist");
	}
	struct meta_config_entry *e = &img->configs[img->config_count];
	if (img->config_count > 0) {
		const struct meta_config_entry *prev = e - 1;
		int c = prev->resource_type != type ? (prev->resource_type < type ? -1 : 1)
						    : strcmp(prev->resource_name, name);
		if (c == 0) {
			c = strcmp(prev->key, key);
		}
		if (c >= 0) {
			return corrupt(l, "image configs out of order");
		}
	}
	e->resource_type = type;
	e->resource_name = malloc(strlen(name) + 1);
	e->key = malloc(strlen(key) + 1);
	e->value = malloc(strlen(value) + 1);
	img->config_count++;
	if (e->resource_name == NULL || e->key == NULL || e->value == NULL) {
		return KEEL_NOMEM;
	}
	strcpy(e->resource_name, name);
	strcpy(e->key, key);
	strcpy(e->value, value);
	return KEEL_OK;
}

static int topic_id_cmp(const void *a, const void *b)
{
	const struct meta_topic *ta = *(const struct meta_topic *const *)a;
	const struct meta_topic *tb = *(const struct meta_topic *const *)b;
	return memcmp(ta->id, tb->id, META_UUID_SIZE);
}

static enum keel_err load_header(struct loader *l, struct meta_image *img, uint32_t counts[3])
{
	uint8_t h[SNAP_HEADER_SIZE];
	enum keel_err err = load_bytes(l, h, sizeof(h));
	if (err != KEEL_OK) {
		return err;
	}
	if (memcmp(h, SNAP_MAGIC, 4) != 0) {
		return corrupt(l, "not a metadata image snapshot (bad magic)");
	}
	l->format = keel_load_be16(h + 4);
	if (l->format > SNAP_FORMAT) {
		meta_errbuf_set(l->eb, "image snapshot format newer than this server supports");
		return KEEL_UNSUPPORTED;
	}
	const uint8_t *p = h + 6;
	img->offset = (int64_t)keel_load_be64(p);
	img->controller_id = (int32_t)keel_load_be32(p + 8);
	img->controller_epoch = (int32_t)keel_load_be32(p + 12);
	img->controller_timestamp_ms = (int64_t)keel_load_be64(p + 16);
	img->last_broker_epoch = (int64_t)keel_load_be64(p + 24);
	for (int i = 0; i < 3; i++) {
		counts[i] = keel_load_be32(p + 32 + 4 * i);
	}
	if (img->offset < 0 || img->last_broker_epoch < 0) {
		return corrupt(l, "image snapshot: negative offset or epoch");
	}
	if (counts[0] > img->limits.max_brokers || counts[1] > img->limits.max_topics ||
	    counts[2] > img->limits.max_configs) {
		meta_errbuf_set(l->eb, "image snapshot holds more than the configured limits");
		return KEEL_TOOBIG;
	}
	return KEEL_OK;
}

static int epoch_cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : (x > y ? 1 : 0);
}

/* The checksum, then the indexes and uniqueness rules that need every
 * entity loaded. */
static enum keel_err finish_load(struct loader *l, struct meta_image *img)
{
	enum keel_err err;
	if (l->format == 1 && !any_reassignment(img)) {
		/* Format 1 exists only for an image with a reassignment (canonical). */
		return corrupt(l, "image snapshot: format 1 without a reassignment");
	}
	if (l->format >= 2) {
		uint8_t next[8];
		if ((err = load_bytes(l, next, sizeof(next))) != KEEL_OK) {
			return err;
		}
		img->next_producer_id = (int64_t)keel_load_be64(next);
		if (img->next_producer_id <= 0) {
			/* Format 2 exists only for a positive one (canonical). */
			return corrupt(l, "image snapshot: next producer id not positive");
		}
	}
	uint32_t expect = l->crc;
	uint8_t crc[4];
	err = l->read(l->ctx, crc, sizeof(crc));
	if (err != KEEL_OK) {
		if (err == KEEL_SHORT) {
			meta_errbuf_set(l->eb, "image snapshot ends early (no checksum)");
		}
		return err;
	}
	if (keel_load_be32(crc) != expect) {
		return corrupt(l, "image snapshot checksum mismatch");
	}
	if (img->topic_count > 1) {
		qsort(img->topics_by_id, img->topic_count, sizeof(*img->topics_by_id),
		      topic_id_cmp);
	}
	for (uint32_t i = 1; i < img->topic_count; i++) {
		if (topic_id_cmp(&img->topics_by_id[i - 1], &img->topics_by_id[i]) == 0) {
			return corrupt(l, "image snapshot: two topics share an id");
		}
	}
	if (img->broker_count < 2) {
		return KEEL_OK;
	}
	int64_t *epochs = malloc((size_t)img->broker_count * sizeof(*epochs));
	if (epochs == NULL) {
		return KEEL_NOMEM;
	}
	for (uint32_t i = 0; i < img->broker_count; i++) {
		epochs[i] = img->brokers[i]->epoch;
	}
	qsort(epochs, img->broker_count, sizeof(*epochs), epoch_cmp);
	bool dup = false;
	for (uint32_t i = 1; i < img->broker_count; i++) {
		dup |= epochs[i - 1] == epochs[i];
	}
	free(epochs);
	return dup ? corrupt(l, "image snapshot: two brokers share an epoch") : KEEL_OK;
}

static enum keel_err load_all(struct loader *l, struct meta_image *img)
{
	uint32_t counts[3];
	enum keel_err err = load_header(l, img, counts);
	if (err != KEEL_OK) {
		return err;
	}
	/* Counts are within the limits; arrays grow as entities arrive so that a
	 * short file with big counts allocates little. */
	for (uint32_t i = 0; i < counts[0]; i++) {
		if (!(img->broker_count < img->broker_capacity)) {
			uint32_t cap = KEEL_MIN(counts[0], KEEL_MAX(16u, img->broker_capacity * 2));
			void *p = realloc(img->brokers, (size_t)cap * sizeof(*img->brokers));
			if (p == NULL) {
				return KEEL_NOMEM;
			}
			img->brokers = p;
			img->broker_capacity = cap;
		}
		if ((err = load_broker(l, img)) != KEEL_OK) {
			return err;
		}
	}
	for (uint32_t i = 0; i < counts[1]; i++) {
		if (!(img->topic_count < img->topic_capacity)) {
			uint32_t cap = KEEL_MIN(counts[1], KEEL_MAX(16u, img->topic_capacity * 2));
			void *a = realloc(img->topics, (size_t)cap * sizeof(*img->topics));
			if (a == NULL) {
				return KEEL_NOMEM;
			}
			img->topics = a;
			void *b = realloc(img->topics_by_id, (size_t)cap * sizeof(*img->topics_by_id));
			if (b == NULL) {
				return KEEL_NOMEM;
			}
			img->topics_by_id = b;
			img->topic_capacity = cap;
		}
		if ((err = load_topic(l, img)) != KEEL_OK) {
			return err;
		}
	}
	for (uint32_t i = 0; i < counts[2]; i++) {
		if (!(img->config_count < img->config_capacity)) {
			uint32_t cap = KEEL_MIN(counts[2], KEEL_MAX(16u, img->config_capacity * 2));
			void *p = realloc(img->configs, (size_t)cap * sizeof(*img->configs));
			if (p == NULL) {
				return KEEL_NOMEM;
			}
			img->configs = p;
			img->config_capacity = cap;
		}
		if ((err = load_config(l, img)) != KEEL_OK) {
			return err;
		}
	}
	return finish_load(l, img);
}

enum keel_err meta_image_load(struct meta_image *img, meta_read_fn read, void *ctx,
			      struct meta_errbuf *eb)
{
	meta_image_clear(img);
	if (eb != NULL) {
		eb->msg[0] = '\0';
	}
	struct loader l = {.read = read, .ctx = ctx, .crc = 0, .eb = eb};
	l.body = malloc(SNAP_MAX_ENTITY);
	if (l.body == NULL) {
		return KEEL_NOMEM;
	}
	keel_arena_init(&l.arena, 16 * 1024);
	enum keel_err err = load_all(&l, img);
	keel_arena_close(&l.arena);
	free(l.body);
	if (err != KEEL_OK) {
		if (err == KEEL_NOMEM && eb != NULL && eb->msg[0] == '\0') {
			meta_errbuf_set(eb, "out of memory loading the image snapshot");
		}
		meta_image_clear(img);
	}
	return err;
}

/* ---- memory helpers, hash, clone ---- */

static enum keel_err write_to_wbuf(void *ctx, const void *data, size_t size)
{
	struct keel_wbuf *w = ctx;
	keel_wbuf_bytes(w, data, size);
	return keel_wbuf_ok(w) ? KEEL_OK : KEEL_TOOBIG;
}

uint8_t *meta_image_save_to_memory(const struct meta_image *img, size_t max_size, size_t *size,
				   enum keel_err *err)
{
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, KEEL_MIN(max_size, (size_t)64 * 1024), max_size);
	enum keel_err e = meta_image_save(img, write_to_wbuf, &w);
	if (err != NULL) {
		*err = e;
	}
	if (e != KEEL_OK) {
		keel_wbuf_free(&w);
		*size = 0;
		return NULL;
	}
	return keel_wbuf_release(&w, size);
}

struct mem_reader {
	const uint8_t *data;
	size_t size;
	size_t pos;
};

static enum keel_err read_from_memory(void *ctx, void *buf, size_t size)
{
	struct mem_reader *m = ctx;
	if (size > m->size - m->pos) {
		return KEEL_SHORT;
	}
	memcpy(buf, m->data + m->pos, size);
	m->pos += size;
	return KEEL_OK;
}

enum keel_err meta_image_load_from_memory(struct meta_image *img, const void *data, size_t size,
					  struct meta_errbuf *eb)
{
	struct mem_reader m = {data, size, 0};
	enum keel_err err = meta_image_load(img, read_from_memory, &m, eb);
	if (err == KEEL_OK && m.pos != size) {
		meta_errbuf_set(eb, "trailing bytes after the image snapshot");
		meta_image_clear(img);
		return KEEL_CORRUPT;
	}
	return err;
}

static enum keel_err hash_bytes(void *ctx, const void *data, size_t size)
{
	uint64_t *h = ctx;
	const uint8_t *p = data;
	for (size_t i = 0; i < size; i++) {
		*h ^= p[i];
		*h *= 0x100000001b3ull;
	}
	return KEEL_OK;
}

uint64_t meta_image_hash(const struct meta_image *img)
{
	uint64_t h = 0xcbf29ce484222325ull;
	enum keel_err err = meta_image_save(img, hash_bytes, &h);
	KEEL_ASSERT(err == KEEL_OK || err == KEEL_NOMEM);
	return h;
}

enum keel_err meta_image_clone(struct meta_image *dst, const struct meta_image *src)
{
	KEEL_ASSERT(dst != src);
	dst->limits = src->limits;
	size_t size;
	enum keel_err err;
	uint8_t *data = meta_image_save_to_memory(src, SIZE_MAX / 2, &size, &err);
	if (data == NULL) {
		meta_image_clear(dst);
		return err;
	}
	err = meta_image_load_from_memory(dst, data, size, NULL);
	free(data);
	return err;
}
