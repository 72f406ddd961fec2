/*
 * producers.c — the idempotent producer on a broker: InitProducerId from a
 * block of ids the controller gave this broker, and the sequence checks of
 * a partition leader (plog/producer.h has the rules; docs/brokers.md the
 * story).
 *
 * A partition's producer state is rebuilt from its log (newest snapshot +
 * the batches after it) the first time an idempotent batch arrives after
 * the log was opened or this broker became its leader; from then on each
 * append updates it. After a sync that follows a segment roll, the state
 * is written to `<log end>.snapshot`, so a rebuild reads only the tail.
 */
#include <string.h>

#include "base/assert.h"
#include "broker/broker.h"
#include "meta/proto.h"

/* ---- InitProducerId ---- */

/* The id to hand out from the current block, or -1 when it is used up. */
static int64_t take_id(struct broker_core *core)
{
	if (core->producer_id_next >= core->producer_id_end) {
		return -1;
	}
	return core->producer_id_next++;
}

static int64_t last_segment_base(const struct plog *log)
{
	struct plog_segment_info info;
	plog_segment_info(log, log->segment_count - 1, &info);
	return info.base_offset;
}

static void init_answer(struct kafka_init_producer_id_response *out, int16_t error, int64_t id)
{
	memset(out, 0, sizeof(*out));
	out->error_code = error;
	out->producer_id = error == KAFKA_NONE ? id : -1;
	out->producer_epoch = error == KAFKA_NONE ? 0 : -1;
}

bool broker_init_producer_id(struct broker_core *core,
                             const struct kafka_init_producer_id_request *rq,
                             struct kafka_init_producer_id_response *out)
{
	if (rq->transactional_id.len >= 0) {
		/* No transaction coordinator: refused the way Kafka refuses a
		 * transactional id the producer may not use (a fatal, clear error
		 * in the clients rather than endless retries). */
		init_answer(out, KAFKA_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1);
		return true;
	}
	int64_t id = take_id(core);
	if (id < 0) {
		return false;
	}
	/* Kafka gives a producer without a transactional id a new id at epoch
	 * 0 every time, even when it names its old id and epoch (v3+). */
	init_answer(out, KAFKA_NONE, id);
	return true;
}

enum keel_err broker_producer_ids_request(struct broker_core *core, struct keel_wbuf *w)
{
	const struct meta_broker *b =
	        core->has_image ? meta_image_broker(&core->image, core->config.node_id) : NULL;
	if (b == NULL) {
		return KEEL_NOENT;
	}
	struct meta_allocate_producer_ids_request rq = {b->id, b->epoch};
	return meta_encode_allocate_producer_ids_request(w, &rq);
}

void broker_producer_ids_reply(struct broker_core *core, const uint8_t *reply, size_t size,
                               struct keel_arena *arena,
                               struct kafka_init_producer_id_response *out)
{
	struct meta_allocate_producer_ids_response rs;
	if (reply != NULL &&
	    meta_decode_allocate_producer_ids_response(reply, size, arena, &rs, NULL) == KEEL_OK &&
	    rs.error == META_ERR_NONE && rs.producer_id_start >= 0 && rs.producer_id_len > 0 &&
	    rs.producer_id_start <= INT64_MAX - rs.producer_id_len) {
		/* The new block replaces a used-up one; a block fetched while
		 * another request refilled it first serves this answer only (its
		 * other ids stay unused: never handed out twice). */
		if (core->producer_id_next >= core->producer_id_end) {
			core->producer_id_next = rs.producer_id_start + 1;
			core->producer_id_end = rs.producer_id_start + rs.producer_id_len;
		}
		init_answer(out, KAFKA_NONE, rs.producer_id_start);
		return;
	}
	/* Retriable for the clients: they ask again after a backoff. */
	init_answer(out, KAFKA_COORDINATOR_NOT_AVAILABLE, -1);
}

/* ---- sequence checks ---- */

static void mark_dirty(struct broker_core *core, struct broker_partition *p)
{
	if (!p->dirty) {
		p->dirty = true;
		p->sync_err = KEEL_OK;
		core->dirty_count++;
	}
}

/* The one batch of an idempotent producer in `data` (one partition's
 * records): KAFKA_NONE with *idempotent false for other producers' data
 * (or a malformed one, which plog_append refuses), else its checks. */
static int16_t idem_batch(const uint8_t *data, size_t size, struct plog_batch *b, bool *idempotent)
{
	uint32_t batches = 0;
	*idempotent = false;
	for (size_t pos = 0; pos < size;) {
		struct plog_batch next;
		if (plog_batch_parse_header(data + pos, size - pos, UINT32_MAX, &next) !=
		            PLOG_BATCH_OK ||
		    next.size > size - pos) {
			*idempotent = false;
			return KAFKA_NONE; /* malformed: plog_append refuses it */
		}
		if (batches++ == 0) {
			*b = next;
		}
		*idempotent |= next.producer_id >= 0;
		pos += next.size;
	}
	if (!*idempotent) {
		return KAFKA_NONE;
	}
	if (batches != 1) {
		return KAFKA_INVALID_RECORD; /* Kafka: one batch per partition (v3+) */
	}
	if (b->attributes & PLOG_ATTR_TRANSACTIONAL) {
		return KAFKA_INVALID_TXN_STATE; /* no transactions here */
	}
	if (b->producer_epoch < 0 || b->base_sequence < 0 || (b->attributes & PLOG_ATTR_CONTROL)) {
		return KAFKA_INVALID_RECORD;
	}
	return KAFKA_NONE;
}

/* The partition's producer state, rebuilt from the log when it is not
 * current: false on an I/O error. */
static bool producers_ready(struct broker_partition *p)
{
	if (!p->producers_ready) {
		if (plog_producers_rebuild(&p->log, &p->producers, NULL) != KEEL_OK) {
			return false;
		}
		p->producers_ready = true;
		p->snapshot_segment = last_segment_base(&p->log);
	}
	return true;
}

int16_t broker_idem_check(struct broker_core *core, struct broker_partition *p, const uint8_t *data,
                          size_t size, struct broker_idem *idem)
{
	memset(idem, 0, sizeof(*idem));
	struct plog_batch b;
	bool idempotent = false;
	int16_t code = idem_batch(data, size, &b, &idempotent);
	if (code != KAFKA_NONE || !idempotent) {
		return code;
	}
	if (!producers_ready(p)) {
		return KAFKA_KAFKA_STORAGE_ERROR;
	}
	idem->active = true;
	idem->producer_id = b.producer_id;
	idem->epoch = b.producer_epoch;
	idem->first_seq = b.base_sequence;
	idem->last_seq = plog_producer_last_seq(b.base_sequence, b.last_offset_delta);
	switch (plog_producers_check(&p->producers, b.producer_id, b.producer_epoch,
	                             idem->first_seq, idem->last_seq, &idem->duplicate)) {
	case PLOG_SEQ_APPEND:
		return KAFKA_NONE;
	case PLOG_SEQ_DUPLICATE:
		idem->is_duplicate = true;
		core->duplicates++;
		return KAFKA_NONE;
	case PLOG_SEQ_OLD_EPOCH:
		return KAFKA_INVALID_PRODUCER_EPOCH;
	case PLOG_SEQ_AFTER_REFUSED:
		/* The batch before it was refused for the ISR: so is this one. */
		core->refused_after++;
		return KAFKA_NOT_ENOUGH_REPLICAS;
	default:
		return KAFKA_OUT_OF_ORDER_SEQUENCE_NUMBER;
	}
}

void broker_idem_refused(struct broker_partition *p, const uint8_t *data, size_t size)
{
	struct plog_batch b;
	bool idempotent = false;
	if (idem_batch(data, size, &b, &idempotent) != KAFKA_NONE || !idempotent ||
	    !producers_ready(p)) {
		return;
	}
	plog_producers_refuse(&p->producers, b.producer_id, b.producer_epoch, b.base_sequence);
}

bool broker_idem_duplicate_waits(struct broker_core *core, struct broker_partition *p,
                                 const struct broker_idem *idem, bool for_isr)
{
	if (idem->duplicate.last_offset < plog_durable_offset(&p->log)) {
		if (!for_isr || p->high_watermark > idem->duplicate.last_offset) {
			return false;
		}
		/* acks=all and the ISR does not have it yet: wait as a produce
		 * does (a sync first, which the shell's waits start from). */
		mark_dirty(core, p);
		return true;
	}
	/* The original is written but not yet synced: this answer waits for
	 * the same sync. */
	mark_dirty(core, p);
	return true;
}

void broker_idem_appended(struct broker_partition *p, const struct broker_idem *idem,
                          const struct plog_append_info *info)
{
	if (!idem->active) {
		return;
	}
	struct plog_producer_batch pb = {idem->first_seq, idem->last_seq, info->first_offset,
	                                 info->last_offset};
	if (plog_producers_update(&p->producers, idem->producer_id, idem->epoch, &pb) != KEEL_OK) {
		p->producers_ready = false; /* out of memory: rebuild from the log next time */
	}
}

void broker_idem_after_sync(struct broker_partition *p)
{
	if (!p->producers_ready || p->sync_err != KEEL_OK) {
		return;
	}
	int64_t base = last_segment_base(&p->log);
	if (base == p->snapshot_segment) {
		return;
	}
	/* A snapshot is an optimization: a failed one only means a longer
	 * rebuild later (the files are replaced atomically). */
	if (plog_producers_save(&p->log, &p->producers) == KEEL_OK) {
		p->snapshot_segment = base;
	}
}

void broker_idem_before_close(struct broker_partition *p)
{
	if (p->producers_ready && p->log.state == PLOG_OPEN &&
	    plog_durable_offset(&p->log) == plog_log_end_offset(&p->log)) {
		/* A clean stop: the next open rebuilds from here. */
		(void)plog_producers_save(&p->log, &p->producers);
	}
}

void broker_idem_leadership(struct broker_partition *p, bool leader, int32_t leader_epoch)
{
	if (!leader || !p->leader || leader_epoch != p->leader_epoch) {
		/* Only a leader keeps the state (a follower's appends do not
		 * update it, so neither may its snapshots be written); becoming
		 * leader (again) rebuilds it from the log. */
		p->producers_ready = false;
	}
}
