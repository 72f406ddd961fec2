/*
 * apis.c — the broker's answers: ApiVersions, Metadata, Produce, Fetch,
 * ListOffsets and OffsetForLeaderEpoch, from the image and the partition
 * logs (broker.h has the rules; docs/brokers.md the table).
 *
 * Every per-partition answer starts from lookup(): the image must know the
 * partition (UNKNOWN_TOPIC_OR_PARTITION), this broker must hold and lead it
 * (NOT_LEADER_OR_FOLLOWER) and its log must be open (KAFKA_STORAGE_ERROR).
 * A client's current_leader_epoch, when it sends one, must match the
 * image's: older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH.
 */
#include <string.h>

#include "base/assert.h"
#include "broker/broker.h"
#include "meta/record.h"

#define ALLOC_ARRAY(arena, ptr, n) ((ptr) = keel_arena_alloc((arena), (size_t)(n) * sizeof(*(ptr))))

bool broker_api_touches_logs(int16_t api_key)
{
	return api_key == KAFKA_API_PRODUCE || api_key == KAFKA_API_FETCH ||
	       api_key == KAFKA_API_LIST_OFFSETS || api_key == KAFKA_API_OFFSET_FOR_LEADER_EPOCH;
}

/* The image's topic of that name, or NULL. */
static const struct meta_topic *image_topic(const struct broker_core *core, struct kafka_str name)
{
	if (!core->has_image || name.len <= 0 || name.len > BROKER_TOPIC_MAX) {
		return NULL;
	}
	char buf[BROKER_TOPIC_MAX + 1];
	memcpy(buf, name.ptr, (size_t)name.len);
	buf[name.len] = '\0';
	return meta_image_topic(&core->image, buf);
}

static int16_t lookup(struct broker_core *core, struct kafka_str topic, int32_t index,
                      int32_t current_leader_epoch, struct broker_partition **out)
{
	*out = NULL;
	const struct meta_topic *t = image_topic(core, topic);
	if (t == NULL || index < 0 || (uint32_t)index >= t->partition_count) {
		return KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
	}
	struct broker_partition *p = broker_core_partition(core, topic, index);
	if (p == NULL || !p->leader) {
		return KAFKA_NOT_LEADER_OR_FOLLOWER;
	}
	if (current_leader_epoch >= 0 && current_leader_epoch < p->leader_epoch) {
		return KAFKA_FENCED_LEADER_EPOCH;
	}
	if (current_leader_epoch > p->leader_epoch) {
		return KAFKA_UNKNOWN_LEADER_EPOCH;
	}
	if (!p->open || p->log.state != PLOG_OPEN) {
		return KAFKA_KAFKA_STORAGE_ERROR;
	}
	*out = p;
	return KAFKA_NONE;
}

/* ---- ApiVersions ---- */

void broker_api_versions(struct broker_core *core, struct keel_arena *arena,
                         struct kafka_api_versions_response *out)
{
	(void)core;
	if (kafka_api_versions_table(arena, BROKER_API_SETS, out) != KEEL_OK) {
		memset(out, 0, sizeof(*out));
		out->error_code = KAFKA_UNKNOWN_SERVER_ERROR;
	}
}

/* ---- Metadata ---- */

static struct kafka_i32_array i32_array(struct keel_arena *arena, const int32_t *v, uint32_t n)
{
	struct kafka_i32_array a = {NULL, 0};
	if (n > 0 && ALLOC_ARRAY(arena, a.items, n) != NULL) {
		memcpy(a.items, v, n * sizeof(*v));
		a.count = (int32_t)n;
	}
	return a;
}

static void metadata_topic(struct broker_core *core, const struct meta_topic *t,
                           struct keel_arena *arena, struct kafka_metadata_topic *out)
{
	const struct meta_image *img = &core->image;
	out->error_code = KAFKA_NONE;
	out->name = kafka_str(t->name);
	memcpy(out->topic_id.b, t->id, 16);
	out->is_internal = strcmp(t->name, "__consumer_offsets") == 0; /* docs/groups.md */
	out->topic_authorized_operations = INT32_MIN;
	if (ALLOC_ARRAY(arena, out->partitions, t->partition_count) == NULL) {
		out->error_code = KAFKA_UNKNOWN_SERVER_ERROR;
		return;
	}
	out->partition_count = (int32_t)t->partition_count;
	for (uint32_t i = 0; i < t->partition_count; i++) {
		const struct meta_partition *mp = &t->partitions[i];
		struct kafka_metadata_partition *mo = &out->partitions[i];
		memset(mo, 0, sizeof(*mo));
		mo->partition_index = (int32_t)i;
		mo->leader_id = mp->leader;
		mo->leader_epoch = mp->leader_epoch;
		mo->error_code =
		        mp->leader == META_NO_LEADER ? KAFKA_LEADER_NOT_AVAILABLE : KAFKA_NONE;
		mo->replica_nodes = i32_array(arena, mp->replicas, mp->replica_count);
		mo->isr_nodes = i32_array(arena, mp->isr, mp->isr_count);
		int32_t offline[64];
		uint32_t n = 0;
		for (uint32_t r = 0; r < mp->replica_count && n < 64; r++) {
			const struct meta_broker *b = meta_image_broker(img, mp->replicas[r]);
			if (b == NULL || b->fenced) {
				offline[n++] = mp->replicas[r];
			}
		}
		mo->offline_replicas = i32_array(arena, offline, n);
	}
}

const struct meta_endpoint *broker_endpoint(const struct meta_broker *b)
{
	for (uint32_t i = 0; i < b->endpoint_count; i++) {
		if (b->endpoints[i].security_protocol == META_SEC_PLAINTEXT) {
			return &b->endpoints[i];
		}
	}
	return b->endpoint_count > 0 ? &b->endpoints[0] : NULL;
}

static void metadata_brokers(struct broker_core *core, struct keel_arena *arena,
                             struct kafka_metadata_response *out)
{
	const struct meta_image *img = &core->image;
	if (img->broker_count == 0 || ALLOC_ARRAY(arena, out->brokers, img->broker_count) == NULL) {
		return;
	}
	int32_t n = 0;
	for (uint32_t i = 0; i < img->broker_count; i++) {
		const struct meta_broker *b = img->brokers[i];
		const struct meta_endpoint *ep = broker_endpoint(b);
		if (b->fenced || ep == NULL) {
			continue; /* as Kafka: only live brokers are listed */
		}
		struct kafka_metadata_broker *mb = &out->brokers[n++];
		mb->node_id = b->id;
		mb->host = kafka_str(ep->host);
		mb->port = ep->port;
		mb->rack = kafka_str(b->rack);
	}
	out->broker_count = n;
}

void broker_metadata(struct broker_core *core, const struct kafka_metadata_request *rq,
                     int16_t version, struct keel_arena *arena, struct kafka_metadata_response *out)
{
	memset(out, 0, sizeof(*out));
	out->cluster_authorized_operations = INT32_MIN;
	/* keel's controller is not a broker; this broker answers for it (admin
	 * requests sent here are forwarded), so it names itself (below: when
	 * its image lists it). */
	out->controller_id = core->config.node_id;
	out->cluster_id = KAFKA_STR_NULL;
	if (!core->has_image) {
		return;
	}
	const struct meta_image *img = &core->image;
	out->cluster_id =
	        kafka_str(meta_image_config(img, META_RESOURCE_BROKER, "", META_CONFIG_CLUSTER_ID));
	metadata_brokers(core, arena, out);
	/* Clients send admin requests to the controller id, and wait while it is
	 * not among the brokers: this broker until it is listed itself. */
	bool listed = false;
	for (int32_t i = 0; i < out->broker_count; i++) {
		listed |= out->brokers[i].node_id == core->config.node_id;
	}
	if (!listed) {
		out->controller_id = out->broker_count > 0 ? out->brokers[0].node_id : -1;
	}
	bool all = rq->topic_count < 0 || (version == 0 && rq->topic_count == 0);
	uint32_t n = all ? img->topic_count : (uint32_t)rq->topic_count;
	if (n == 0 || ALLOC_ARRAY(arena, out->topics, n) == NULL) {
		return;
	}
	memset(out->topics, 0, n * sizeof(*out->topics));
	out->topic_count = (int32_t)n;
	for (uint32_t i = 0; i < n; i++) {
		struct kafka_metadata_topic *mt = &out->topics[i];
		const struct meta_topic *t =
		        all ? img->topics[i] : image_topic(core, rq->topics[i].name);
		if (t != NULL) {
			metadata_topic(core, t, arena, mt);
			continue;
		}
		mt->error_code = KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
		mt->name = rq->topics[i].name;
		mt->topic_authorized_operations = INT32_MIN;
		if (mt->name.len < 0 && version < 12) {
			mt->name = kafka_str("");
		}
	}
}

/* ---- Produce ---- */

static int16_t append_error(enum keel_err err)
{
	switch (err) {
	case KEEL_OK:
		return KAFKA_NONE;
	case KEEL_CORRUPT:
		return KAFKA_CORRUPT_MESSAGE;
	case KEEL_UNSUPPORTED:
		return KAFKA_UNSUPPORTED_FOR_MESSAGE_FORMAT;
	case KEEL_TOOBIG:
		return KAFKA_MESSAGE_TOO_LARGE;
	default:
		return KAFKA_KAFKA_STORAGE_ERROR;
	}
}

static int16_t produce_one(struct broker_core *core, struct kafka_str topic, int16_t acks,
                           struct kafka_produce_partition *pp,
                           struct kafka_produce_partition_response *out,
                           struct broker_partition **appended, int64_t *required)
{
	struct broker_partition *p = NULL;
	int16_t code = lookup(core, topic, pp->index, -1, &p);
	if (code != KAFKA_NONE) {
		return code;
	}
	if (acks == -1 && p->isr_count < p->min_isr) {
		/* Kafka's check, before the append (and before the duplicate
		 * check: a retry is refused too, and retried again later). */
		if (pp->records.data != NULL && pp->records.size > 0) {
			broker_idem_refused(p, pp->records.data, (size_t)pp->records.size);
		}
		return KAFKA_NOT_ENOUGH_REPLICAS;
	}
	if (pp->records.data == NULL || pp->records.size <= 0) {
		return KAFKA_CORRUPT_MESSAGE;
	}
	struct broker_idem idem;
	code = broker_idem_check(core, p, pp->records.data, (size_t)pp->records.size, &idem);
	out->log_start_offset = plog_log_start_offset(&p->log);
	if (code != KAFKA_NONE || idem.is_duplicate) {
		out->base_offset = idem.is_duplicate ? idem.duplicate.first_offset : -1;
		*appended =
		        idem.is_duplicate && broker_idem_duplicate_waits(core, p, &idem, acks == -1)
		                ? p
		                : NULL;
		if (*appended != NULL && acks == -1) {
			/* A retry is acknowledged as its original was: with acks=all,
			 * once the ISR has it (Kafka waits the same way). */
			*required = idem.duplicate.last_offset + 1;
		}
		return code;
	}
	struct plog_append_info info;
	/* The records are a view into the request frame, which the shell owns
	 * and lets the leader rewrite (offsets and epoch, in place). */
	enum keel_err err = plog_append(&p->log, (uint8_t *)(uintptr_t)pp->records.data,
	                                (size_t)pp->records.size, p->leader_epoch, &info);
	if (err != KEEL_OK) {
		return append_error(err);
	}
	broker_idem_appended(p, &idem, &info);
	out->base_offset = info.first_offset;
	*required = info.last_offset + 1;
	if (!p->dirty) {
		p->dirty = true;
		p->sync_err = KEEL_OK;
		core->dirty_count++;
	}
	*appended = p;
	return KAFKA_NONE;
}

void broker_produce(struct broker_core *core, struct kafka_produce_request *rq,
                    struct keel_arena *arena, struct kafka_produce_response *out,
                    struct broker_produce_wait *wait)
{
	memset(out, 0, sizeof(*out));
	memset(wait, 0, sizeof(*wait));
	bool acks_ok = rq->acks == 0 || rq->acks == 1 || rq->acks == -1;
	uint32_t total = 0;
	for (int32_t t = 0; t < rq->topic_count; t++) {
		total += (uint32_t)rq->topics[t].partition_count;
	}
	if (rq->topic_count > 0 && ALLOC_ARRAY(arena, out->topics, rq->topic_count) == NULL) {
		return;
	}
	if (total > 0 && (ALLOC_ARRAY(arena, wait->parts, total) == NULL ||
	                  ALLOC_ARRAY(arena, wait->required, total) == NULL ||
	                  ALLOC_ARRAY(arena, wait->leader_epochs, total) == NULL)) {
		return;
	}
	out->topic_count = rq->topic_count;
	wait->count = total;
	uint32_t flat = 0;
	for (int32_t t = 0; t < rq->topic_count; t++) {
		struct kafka_produce_topic *pt = &rq->topics[t];
		struct kafka_produce_topic_response *ot = &out->topics[t];
		ot->name = pt->name;
		ot->partition_count = pt->partition_count;
		if (pt->partition_count > 0 &&
		    ALLOC_ARRAY(arena, ot->partitions, pt->partition_count) == NULL) {
			ot->partition_count = 0;
			continue;
		}
		for (int32_t i = 0; i < pt->partition_count; i++, flat++) {
			struct kafka_produce_partition_response *op = &ot->partitions[i];
			memset(op, 0, sizeof(*op));
			op->index = pt->partitions[i].index;
			op->base_offset = -1;
			op->log_append_time_ms = -1;
			op->log_start_offset = -1;
			op->error_message = KAFKA_STR_NULL;
			wait->parts[flat] = NULL;
			wait->required[flat] = -1;
			wait->leader_epochs[flat] = -1;
			op->error_code =
			        acks_ok ? produce_one(core, pt->name, rq->acks, &pt->partitions[i],
			                              op, &wait->parts[flat], &wait->required[flat])
			                : KAFKA_INVALID_REQUIRED_ACKS;
			if (wait->parts[flat] != NULL) {
				wait->needs_sync = true;
				wait->needs_isr |= rq->acks == -1;
				wait->leader_epochs[flat] = wait->parts[flat]->leader_epoch;
			}
		}
	}
}

void broker_produce_finish(const struct broker_produce_wait *wait,
                           struct kafka_produce_response *out)
{
	uint32_t flat = 0;
	for (int32_t t = 0; t < out->topic_count; t++) {
		struct kafka_produce_topic_response *ot = &out->topics[t];
		for (int32_t i = 0; i < ot->partition_count && flat < wait->count; i++, flat++) {
			const struct broker_partition *p = wait->parts[flat];
			if (p != NULL && p->sync_err != KEEL_OK) {
				/* Written but not durable: the client must not count it. */
				ot->partitions[i].error_code = KAFKA_KAFKA_STORAGE_ERROR;
				ot->partitions[i].base_offset = -1;
				wait->required[flat] = -1;
			}
		}
	}
}

/* One partition of an acks=all produce: KAFKA_NONE with *done false while
 * it waits. */
static int16_t acked_one(struct broker_core *core, struct kafka_str topic, int32_t index,
                         int64_t required, int32_t epoch, bool *done)
{
	*done = true;
	struct broker_partition *p = broker_core_partition(core, topic, index);
	if (p == NULL || !p->leader || p->leader_epoch != epoch || !p->open) {
		/* Leadership moved while it waited: it may or may not survive. */
		return KAFKA_NOT_LEADER_OR_FOLLOWER;
	}
#ifdef KEEL_PLANT_BUG_ACK_BEFORE_ISR
	/* PLANTED BUG: acks=all answered once the leader alone has it durable. */
	int64_t covered = plog_durable_offset(&p->log);
#else
	int64_t covered = p->high_watermark;
#endif
	if (covered < required) {
		*done = false;
		return KAFKA_NONE;
	}
	return p->isr_count < p->min_isr ? KAFKA_NOT_ENOUGH_REPLICAS_AFTER_APPEND : KAFKA_NONE;
}

bool broker_produce_acked(struct broker_core *core, const struct kafka_produce_request *rq,
                          struct broker_produce_wait *wait, struct kafka_produce_response *out,
                          bool expired)
{
	bool all = true;
	uint32_t flat = 0;
	for (int32_t t = 0; t < out->topic_count && t < rq->topic_count; t++) {
		struct kafka_produce_topic_response *ot = &out->topics[t];
		for (int32_t i = 0; i < ot->partition_count && flat < wait->count; i++, flat++) {
			if (wait->required[flat] < 0) {
				continue;
			}
			struct kafka_produce_partition_response *op = &ot->partitions[i];
			bool done = true;
			int16_t code =
			        acked_one(core, rq->topics[t].name, op->index, wait->required[flat],
			                  wait->leader_epochs[flat], &done);
			if (!done && expired) {
				code = KAFKA_REQUEST_TIMED_OUT;
				done = true;
			}
			if (!done) {
				all = false;
				continue;
			}
			wait->required[flat] = -1;
			if (code != KAFKA_NONE) {
				op->error_code = code;
				op->base_offset = -1;
			}
		}
	}
	return all;
}

/* ---- Fetch ---- */

static void fetch_one(struct broker_core *core, struct kafka_str topic, int32_t replica_id,
                      int32_t max_wait_ms, const struct kafka_fetch_partition *fp,
                      struct keel_arena *arena, uint64_t budget,
                      struct kafka_fetch_partition_data *out, size_t *bytes,
                      struct broker_fetch_range *range)
{
	out->partition_index = fp->partition;
	out->high_watermark = -1;
	out->last_stable_offset = -1;
	out->log_start_offset = -1;
	out->aborted_transaction_count = -1;
	out->preferred_read_replica = -1;
	/* Empty, not null, also for an error (Kafka's MemoryRecords.EMPTY):
	 * librdkafka 2.0.2 fails a whole Fetch response on a null one. */
	out->records = (struct kafka_records){NULL, 0};
	struct broker_partition *p = NULL;
	out->error_code = (int16_t)lookup(core, topic, fp->partition, fp->current_leader_epoch, &p);
	if (p == NULL) {
		return;
	}
	int64_t start = plog_log_start_offset(&p->log);
	out->log_start_offset = start;
	bool in_range =
	        fp->fetch_offset >= start && fp->fetch_offset <= plog_log_end_offset(&p->log);
	if (replica_id >= 0) {
		if (!meta_list_contains(p->replicas, p->replica_count, replica_id)) {
			out->error_code = KAFKA_NOT_LEADER_OR_FOLLOWER;
			return;
		}
		if (in_range) {
			broker_replica_fetched_from(core, p, replica_id, fp->fetch_offset);
		}
	}
	int64_t hw = p->high_watermark;
	out->high_watermark = hw;
	out->last_stable_offset = hw; /* no transactions: everything below the HW is stable */
	if (!in_range) {
		out->error_code = KAFKA_OFFSET_OUT_OF_RANGE;
		return;
	}
	/* Followers read up to the log end, consumers below the HW. */
	int64_t bound = replica_id >= 0 ? plog_log_end_offset(&p->log) : hw;
	if (fp->fetch_offset >= bound || fp->partition_max_bytes <= 0) {
		return;
	}
	uint64_t max = KEEL_MIN(budget, (uint64_t)fp->partition_max_bytes);
	if (replica_id >= 0) {
		/* leader.replication.throttled.*: nothing while its budget is spent */
		max = broker_leader_throttle_budget(core, p, replica_id, max_wait_ms, max);
		if (max == 0) {
			return;
		}
	}
	struct plog_read_result r;
	enum keel_err err = plog_read(&p->log, fp->fetch_offset, bound, max, &r);
	if (err == KEEL_RANGE) {
		out->error_code = KAFKA_OFFSET_OUT_OF_RANGE;
		return;
	}
	if (err != KEEL_OK || r.size == 0) {
		out->error_code = err != KEEL_OK ? KAFKA_KAFKA_STORAGE_ERROR : KAFKA_NONE;
		return;
	}
	if (r.size > INT32_MAX) {
		out->error_code = KAFKA_KAFKA_STORAGE_ERROR;
		return;
	}
	if (replica_id >= 0) {
		broker_leader_throttle_charge(core, p, replica_id, r.size);
	}
	if (range != NULL) {
		/* By reference: the shell sends the file's bytes itself. */
		char *path = keel_arena_alloc(arena, WAL_VFS_PATH_MAX);
		if (path == NULL || plog_segment_path(&p->log, r.segment_base_offset, path,
		                                      WAL_VFS_PATH_MAX) != KEEL_OK) {
			out->error_code = KAFKA_KAFKA_STORAGE_ERROR;
			return;
		}
		*range = (struct broker_fetch_range){path, r.position, r.size};
		out->records = (struct kafka_records){NULL, (int32_t)r.size};
		*bytes += (size_t)r.size;
		return;
	}
	uint8_t *buf = keel_arena_alloc(arena, (size_t)r.size);
	if (buf == NULL || plog_read_copy(&p->log, &r, buf) != KEEL_OK) {
		out->error_code = KAFKA_KAFKA_STORAGE_ERROR;
		return;
	}
	out->records = (struct kafka_records){buf, (int32_t)r.size};
	*bytes += (size_t)r.size;
}

void broker_fetch(struct broker_core *core, const struct kafka_fetch_request *rq,
                  struct keel_arena *arena, struct kafka_fetch_response *out, size_t *bytes)
{
	broker_fetch_ranges(core, rq, arena, out, bytes, NULL);
}

void broker_fetch_ranges(struct broker_core *core, const struct kafka_fetch_request *rq,
                         struct keel_arena *arena, struct kafka_fetch_response *out, size_t *bytes,
                         struct broker_fetch_range **ranges)
{
	memset(out, 0, sizeof(*out));
	*bytes = 0;
	struct broker_fetch_range *flat = NULL;
	if (ranges != NULL) {
		uint32_t total = 0;
		for (int32_t t = 0; t < rq->topic_count; t++) {
			total += (uint32_t)KEEL_MAX(rq->topics[t].partition_count, 0);
		}
		*ranges = NULL;
		if (total > 0 && ALLOC_ARRAY(arena, flat, total) == NULL) {
			out->error_code = KAFKA_UNKNOWN_SERVER_ERROR;
			return;
		}
		if (total > 0) {
			memset(flat, 0, total * sizeof(*flat));
		}
		*ranges = flat;
	}
	out->error_code = KAFKA_NONE;
	out->session_id = 0; /* no fetch sessions: every fetch is a full one */
	if (rq->topic_count > 0 && ALLOC_ARRAY(arena, out->topics, rq->topic_count) == NULL) {
		out->error_code = KAFKA_UNKNOWN_SERVER_ERROR;
		return;
	}
	out->topic_count = rq->topic_count;
	uint64_t max_bytes = rq->max_bytes > 0 ? (uint64_t)rq->max_bytes : 1;
	for (int32_t t = 0; t < rq->topic_count; t++) {
		const struct kafka_fetch_topic *ft = &rq->topics[t];
		struct kafka_fetch_topic_response *ot = &out->topics[t];
		ot->topic = ft->topic;
		ot->partition_count = 0;
		if (ft->partition_count > 0 &&
		    ALLOC_ARRAY(arena, ot->partitions, ft->partition_count) == NULL) {
			continue;
		}
		for (int32_t i = 0; i < ft->partition_count; i++) {
			struct kafka_fetch_partition_data *op = &ot->partitions[i];
			memset(op, 0, sizeof(*op));
			struct broker_fetch_range *range = flat != NULL ? flat++ : NULL;
			/* Past the response's max_bytes only the first batch is
			 * forced in (as Kafka does); later partitions get none. */
			uint64_t budget = *bytes < max_bytes ? max_bytes - *bytes : 0;
			if (budget == 0 && *bytes > 0) {
				struct kafka_fetch_partition nothing = ft->partitions[i];
				nothing.partition_max_bytes = 0;
				fetch_one(core, ft->topic, rq->replica_id, rq->max_wait_ms, &nothing,
				          arena, 0, op, bytes, range);
			} else {
				fetch_one(core, ft->topic, rq->replica_id, rq->max_wait_ms,
				          &ft->partitions[i], arena, KEEL_MAX(budget, 1), op, bytes,
				          range);
			}
			ot->partition_count = i + 1;
		}
	}
}

/* ---- ListOffsets ---- */

static void list_one(struct broker_core *core, struct kafka_str topic,
                     const struct kafka_list_offsets_partition *lp,
                     struct kafka_list_offsets_partition_response *out)
{
	out->partition_index = lp->partition_index;
	out->timestamp = -1;
	out->offset = -1;
	out->leader_epoch = -1;
	struct broker_partition *p = NULL;
	out->error_code =
	        (int16_t)lookup(core, topic, lp->partition_index, lp->current_leader_epoch, &p);
	if (p == NULL) {
		return;
	}
	int64_t hw = p->high_watermark;
	if (lp->timestamp == KAFKA_LIST_OFFSETS_EARLIEST) {
		out->offset = plog_log_start_offset(&p->log);
	} else if (lp->timestamp == KAFKA_LIST_OFFSETS_LATEST) {
		out->offset = hw;
	} else if (lp->timestamp == KAFKA_LIST_OFFSETS_MAX_TIMESTAMP || lp->timestamp < 0) {
		out->error_code = KAFKA_UNSUPPORTED_VERSION;
		return;
	} else {
		int64_t offset = -1, ts = -1;
		enum keel_err err = plog_offset_for_timestamp(&p->log, lp->timestamp, &offset, &ts);
		if (err == KEEL_OK && offset < hw) {
			out->offset = offset;
			out->timestamp = ts;
		} else if (err != KEEL_OK && err != KEEL_NOENT) {
			out->error_code = KAFKA_KAFKA_STORAGE_ERROR;
		}
		return;
	}
	out->leader_epoch = p->leader_epoch;
}

void broker_list_offsets(struct broker_core *core, const struct kafka_list_offsets_request *rq,
                         struct keel_arena *arena, struct kafka_list_offsets_response *out)
{
	memset(out, 0, sizeof(*out));
	if (rq->topic_count > 0 && ALLOC_ARRAY(arena, out->topics, rq->topic_count) == NULL) {
		return;
	}
	out->topic_count = rq->topic_count;
	for (int32_t t = 0; t < rq->topic_count; t++) {
		const struct kafka_list_offsets_topic *lt = &rq->topics[t];
		struct kafka_list_offsets_topic_response *ot = &out->topics[t];
		ot->name = lt->name;
		ot->partition_count = 0;
		if (lt->partition_count > 0 &&
		    ALLOC_ARRAY(arena, ot->partitions, lt->partition_count) == NULL) {
			continue;
		}
		for (int32_t i = 0; i < lt->partition_count; i++) {
			memset(&ot->partitions[i], 0, sizeof(ot->partitions[i]));
			list_one(core, lt->name, &lt->partitions[i], &ot->partitions[i]);
		}
		ot->partition_count = lt->partition_count;
	}
}

/* ---- OffsetForLeaderEpoch ---- */

void broker_offset_for_leader_epoch(struct broker_core *core,
                                    const struct kafka_offset_for_leader_epoch_request *rq,
                                    struct keel_arena *arena,
                                    struct kafka_offset_for_leader_epoch_response *out)
{
	memset(out, 0, sizeof(*out));
	if (rq->topic_count > 0 && ALLOC_ARRAY(arena, out->topics, rq->topic_count) == NULL) {
		return;
	}
	out->topic_count = rq->topic_count;
	for (int32_t t = 0; t < rq->topic_count; t++) {
		const struct kafka_offset_for_leader_topic *lt = &rq->topics[t];
		struct kafka_offset_for_leader_topic_result *ot = &out->topics[t];
		ot->topic = lt->topic;
		ot->partition_count = 0;
		if (lt->partition_count > 0 &&
		    ALLOC_ARRAY(arena, ot->partitions, lt->partition_count) == NULL) {
			continue;
		}
		for (int32_t i = 0; i < lt->partition_count; i++) {
			const struct kafka_offset_for_leader_partition *lp = &lt->partitions[i];
			struct kafka_epoch_end_offset *op = &ot->partitions[i];
			memset(op, 0, sizeof(*op));
			op->partition = lp->partition;
			op->leader_epoch = -1;
			op->end_offset = -1;
			struct broker_partition *p = NULL;
			op->error_code = (int16_t)lookup(core, lt->topic, lp->partition,
			                                 lp->current_leader_epoch, &p);
			if (p != NULL) {
				plog_end_offset_for_epoch(&p->log, lp->leader_epoch,
				                          &op->leader_epoch, &op->end_offset);
				/* Clients may not look past what is durable. */
				op->end_offset =
				        KEEL_MIN(op->end_offset, plog_durable_offset(&p->log));
			}
		}
		ot->partition_count = lt->partition_count;
	}
}
