/* Unit tests: metadata record and batch codec — round trips for every type,
 * rejection of newer versions, truncation, limits and malformed fields. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "meta/codec.h"
#include "meta/record.h"

static const int32_t replicas3[] = {1, 2, 3};
static const int32_t isr2[] = {1, 2};
static const int32_t adding1[] = {3};
static const int32_t removing1[] = {1};
static const struct meta_endpoint endpoints[] = {
	{"PLAINTEXT", "10.0.0.1", 9092, META_SEC_PLAINTEXT},
	{"SSL", "broker-1.example", 9093, META_SEC_SSL},
};

/* One record of every type, with every optional part present somewhere. */
static uint32_t sample_records(struct meta_record *r)
{
	uint32_t n = 0;
	memset(r, 0, 16 * sizeof(*r));

	r[n].type = META_REC_REGISTER_BROKER;
	r[n].register_broker.broker_id = 1;
	memset(r[n].register_broker.incarnation_id, 0xab, 16);
	r[n].register_broker.broker_epoch = 42;
	r[n].register_broker.endpoints = endpoints;
	r[n].register_broker.endpoint_count = 2;
	r[n].register_broker.rack = "rack-a";
	r[n].register_broker.fenced = true;
	n++;

	r[n].type = META_REC_REGISTER_BROKER; /* no rack, no endpoints */
	r[n].register_broker.broker_id = 7;
	r[n].register_broker.broker_epoch = 0;
	r[n].register_broker.in_controlled_shutdown = true;
	n++;

	r[n].type = META_REC_UNREGISTER_BROKER;
	r[n].unregister_broker = (struct meta_broker_ref_record){3, 17};
	n++;
	r[n].type = META_REC_FENCE_BROKER;
	r[n].fence_broker = (struct meta_broker_ref_record){4, 18};
	n++;
	r[n].type = META_REC_UNFENCE_BROKER;
	r[n].unfence_broker = (struct meta_broker_ref_record){5, 19};
	n++;
	r[n].type = META_REC_BROKER_REGISTRATION_CHANGE;
	r[n].broker_change = (struct meta_broker_change_record){6, 20, META_CHANGE_NONE, 1};
	n++;

	r[n].type = META_REC_TOPIC;
	r[n].topic.name = "sensor-data";
	memset(r[n].topic.topic_id, 0x11, 16);
	n++;

	r[n].type = META_REC_PARTITION;
	memset(r[n].partition.topic_id, 0x11, 16);
	r[n].partition.partition_id = 5;
	r[n].partition.replicas = replicas3;
	r[n].partition.replica_count = 3;
	r[n].partition.isr = isr2;
	r[n].partition.isr_count = 2;
	r[n].partition.leader = 1;
	r[n].partition.leader_epoch = 3;
	r[n].partition.partition_epoch = 9;
	r[n].partition.leader_recovery_state = META_RECOVERING;
	n++;

	r[n].type = META_REC_PARTITION_CHANGE; /* every field (a reassignment: version 1) */
	r[n].version = 1;
	r[n].partition_change.adding = adding1;
	r[n].partition_change.adding_count = 1;
	r[n].partition_change.removing = removing1;
	r[n].partition_change.removing_count = 1;
	memset(r[n].partition_change.topic_id, 0x11, 16);
	r[n].partition_change.partition_id = 5;
	r[n].partition_change.partition_epoch = 10;
	r[n].partition_change.fields = META_PC_ALL;
	r[n].partition_change.leader = 2;
	r[n].partition_change.leader_epoch = 4;
	r[n].partition_change.isr = isr2;
	r[n].partition_change.isr_count = 2;
	r[n].partition_change.replicas = replicas3;
	r[n].partition_change.replica_count = 3;
	r[n].partition_change.leader_recovery_state = META_RECOVERED;
	n++;

	r[n].type = META_REC_PARTITION_CHANGE; /* only the ISR, emptied */
	memset(r[n].partition_change.topic_id, 0x11, 16);
	r[n].partition_change.partition_id = 0;
	r[n].partition_change.partition_epoch = 1;
	r[n].partition_change.fields = META_PC_ISR;
	r[n].partition_change.isr = isr2;
	r[n].partition_change.isr_count = 0;
	n++;

	r[n].type = META_REC_REMOVE_TOPIC;
	memset(r[n].remove_topic.topic_id, 0x11, 16);
	n++;

	r[n].type = META_REC_CONFIG;
	r[n].config = (struct meta_config_record){META_RESOURCE_TOPIC, "sensor-data",
						  "unclean.leader.election.enable", "true"};
	n++;
	r[n].type = META_REC_CONFIG; /* a delete */
	r[n].config = (struct meta_config_record){META_RESOURCE_BROKER, "", "retention.ms", NULL};
	n++;

	r[n].type = META_REC_PRODUCER_IDS;
	r[n].producer_ids = (struct meta_producer_ids_record){2, 21, 3000};
	n++;

	r[n].type = META_REC_NOOP;
	n++;

	r[n].type = META_REC_PARTITION; /* version 1: being reassigned */
	r[n].version = 1;
	memset(r[n].partition.topic_id, 0x11, 16);
	r[n].partition.partition_id = 6;
	r[n].partition.replicas = replicas3;
	r[n].partition.replica_count = 3;
	r[n].partition.isr = isr2;
	r[n].partition.isr_count = 2;
	r[n].partition.leader = 2;
	r[n].partition.adding = adding1;
	r[n].partition.adding_count = 1;
	r[n].partition.removing = removing1;
	r[n].partition.removing_count = 1;
	n++;
	return n;
}

static uint8_t *encode_batch(const struct meta_batch *b, size_t *size)
{
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 1 << 20);
	assert_int_equal(meta_batch_encode(b, &w), KEEL_OK);
	uint8_t *data = keel_wbuf_release(&w, size);
	assert_non_null(data);
	return data;
}

static void test_batch_roundtrip_every_type(void **state)
{
	(void)state;
	struct meta_record recs[16];
	struct meta_batch b = {{3, 7, 1700000000123ll}, recs, sample_records(recs)};
	size_t size;
	uint8_t *data = encode_batch(&b, &size);

	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct meta_batch out;
	struct meta_errbuf eb;
	assert_int_equal(meta_batch_decode(data, size, &arena, &out, &eb), KEEL_OK);
	assert_int_equal(out.count, b.count);
	assert_int_equal(out.hdr.controller_id, 3);
	assert_int_equal(out.hdr.controller_epoch, 7);
	assert_true(out.hdr.timestamp_ms == 1700000000123ll);

	/* Field spot checks. */
	const struct meta_register_broker_record *rb = &out.records[0].register_broker;
	assert_int_equal(rb->broker_id, 1);
	assert_int_equal(rb->broker_epoch, 42);
	assert_int_equal(rb->endpoint_count, 2);
	assert_string_equal(rb->endpoints[1].host, "broker-1.example");
	assert_int_equal(rb->endpoints[1].port, 9093);
	assert_int_equal(rb->endpoints[1].security_protocol, META_SEC_SSL);
	assert_string_equal(rb->rack, "rack-a");
	assert_true(rb->fenced);
	assert_false(rb->in_controlled_shutdown);
	assert_null(out.records[1].register_broker.rack);
	assert_true(out.records[1].register_broker.in_controlled_shutdown);
	assert_int_equal(out.records[5].broker_change.fenced, META_CHANGE_NONE);
	assert_int_equal(out.records[5].broker_change.in_controlled_shutdown, 1);
	assert_string_equal(out.records[6].topic.name, "sensor-data");
	const struct meta_partition_record *p = &out.records[7].partition;
	assert_int_equal(p->replica_count, 3);
	assert_int_equal(p->replicas[2], 3);
	assert_int_equal(p->isr_count, 2);
	assert_int_equal(p->leader_recovery_state, META_RECOVERING);
	const struct meta_partition_change_record *pc = &out.records[9].partition_change;
	assert_int_equal(pc->fields, META_PC_ISR);
	assert_int_equal(pc->isr_count, 0);
	assert_int_equal(pc->leader, META_NO_LEADER);
	assert_null(out.records[12].config.value);
	/* Version 1: the reassignment lists come back. */
	const struct meta_partition_change_record *full = &out.records[8].partition_change;
	assert_int_equal(out.records[8].version, 1);
	assert_int_equal(full->fields, META_PC_ALL);
	assert_int_equal(full->adding_count, 1);
	assert_int_equal(full->adding[0], 3);
	assert_int_equal(full->removing_count, 1);
	assert_int_equal(full->removing[0], 1);
	const struct meta_partition_record *p1 = &out.records[15].partition;
	assert_int_equal(out.records[15].version, 1);
	assert_int_equal(p1->adding_count, 1);
	assert_int_equal(p1->adding[0], 3);
	assert_int_equal(p1->removing_count, 1);
	assert_int_equal(p1->removing[0], 1);
	/* Version 0 partitions decode with no reassignment. */
	assert_int_equal(out.records[7].version, 0);
	assert_int_equal(out.records[7].partition.adding_count, 0);
	assert_int_equal(out.records[7].partition.removing_count, 0);
	assert_string_equal(out.records[11].config.value, "true");
	const struct meta_producer_ids_record *pi = &out.records[13].producer_ids;
	assert_int_equal(pi->broker_id, 2);
	assert_int_equal(pi->broker_epoch, 21);
	assert_int_equal(pi->next_producer_id, 3000);

	/* Byte-exact: re-encoding what was decoded gives the same bytes. */
	size_t size2;
	uint8_t *data2 = encode_batch(&out, &size2);
	assert_int_equal(size2, size);
	assert_memory_equal(data, data2, size);
	free(data2);
	free(data);
	keel_arena_close(&arena);
}

static void test_every_truncation_fails_cleanly(void **state)
{
	(void)state;
	struct meta_record recs[16];
	struct meta_batch b = {{1, 1, 5}, recs, sample_records(recs)};
	size_t size;
	uint8_t *data = encode_batch(&b, &size);
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	for (size_t cut = 0; cut < size; cut++) {
		struct meta_batch out;
		/* Copy so ASan sees reads past the cut. */
		uint8_t *copy = malloc(cut + 1);
		memcpy(copy, data, cut);
		enum keel_err err = meta_batch_decode(copy, cut, &arena, &out, NULL);
		assert_true(err == KEEL_SHORT || err == KEEL_CORRUPT);
		free(copy);
		keel_arena_reset(&arena);
	}
	keel_arena_close(&arena);
	free(data);
}

static void test_newer_version_rejected_with_message(void **state)
{
	(void)state;
	struct meta_record rec = {.type = META_REC_NOOP};
	struct meta_batch b = {{1, 1, 0}, &rec, 1};
	size_t size;
	uint8_t *data = encode_batch(&b, &size);
	/* Record header starts after the 22-byte batch header: type u16, version u16. */
	assert_int_equal(data[22], 0);
	assert_int_equal(data[23], META_REC_NOOP);
	data[25] = 3; /* version 3 */
	struct keel_arena arena;
	keel_arena_init(&arena, 1024);
	struct meta_batch out;
	struct meta_errbuf eb;
	assert_int_equal(meta_batch_decode(data, size, &arena, &out, &eb), KEEL_UNSUPPORTED);
	assert_string_equal(eb.msg, "record type 20 (NoOp) version 3 is newer than this server "
				    "supports (max 0)");

	data[25] = 0;
	data[23] = 99; /* unknown type */
	assert_int_equal(meta_batch_decode(data, size, &arena, &out, &eb), KEEL_UNSUPPORTED);
	assert_non_null(strstr(eb.msg, "unknown record type 99"));

	data[23] = META_REC_NOOP;
	data[1] = 1; /* batch format 1 */
	assert_int_equal(meta_batch_decode(data, size, &arena, &out, &eb), KEEL_UNSUPPORTED);
	assert_non_null(strstr(eb.msg, "batch format 1"));

	/* Encoding at a version this code does not know is refused too. */
	rec.version = 1;
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 1024);
	assert_int_equal(meta_record_encode(&rec, &w), KEEL_INVAL);
	keel_wbuf_free(&w);
	keel_arena_close(&arena);
	free(data);
}

/* Encodes a batch with one record whose body is `body` (hand-made bytes). */
static enum keel_err decode_raw(uint16_t type, const uint8_t *body, size_t body_size,
				struct meta_errbuf *eb)
{
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 1 << 20);
	keel_wbuf_u16(&w, 0);
	keel_wbuf_i32(&w, 1);
	keel_wbuf_i32(&w, 1);
	keel_wbuf_i64(&w, 0);
	keel_wbuf_i32(&w, 1);
	keel_wbuf_u16(&w, type);
	keel_wbuf_u16(&w, 0);
	keel_wbuf_u32(&w, (uint32_t)body_size);
	keel_wbuf_bytes(&w, body, body_size);
	struct keel_arena arena;
	keel_arena_init(&arena, 1024);
	struct meta_batch out;
	enum keel_err err = meta_batch_decode(w.data, w.size, &arena, &out, eb);
	keel_arena_close(&arena);
	keel_wbuf_free(&w);
	return err;
}

static void test_malformed_fields(void **state)
{
	(void)state;
	struct meta_errbuf eb;
	/* Topic with a NUL inside its name. */
	uint8_t topic_nul[4 + 3 + 16] = {0, 0, 0, 3, 'a', 0, 'b'};
	memset(topic_nul + 7, 1, 16);
	assert_int_equal(decode_raw(META_REC_TOPIC, topic_nul, sizeof(topic_nul), &eb),
			 KEEL_CORRUPT);
	assert_non_null(strstr(eb.msg, "NUL"));

	/* Topic with an invalid name ("a/b"). */
	uint8_t topic_bad[4 + 3 + 16] = {0, 0, 0, 3, 'a', '/', 'b'};
	memset(topic_bad + 7, 1, 16);
	assert_int_equal(decode_raw(META_REC_TOPIC, topic_bad, sizeof(topic_bad), &eb),
			 KEEL_CORRUPT);
	assert_non_null(strstr(eb.msg, "invalid topic name"));

	/* Topic name length over the limit. */
	uint8_t topic_long[4 + 16] = {0, 0, 1, 0};
	assert_int_equal(decode_raw(META_REC_TOPIC, topic_long, sizeof(topic_long), &eb),
			 KEEL_TOOBIG);

	/* A replica count of 2^31-1 must fail before any allocation. */
	uint8_t part_huge[16 + 4 + 4] = {0};
	memset(part_huge, 1, 16);
	part_huge[20] = 0x7f;
	part_huge[21] = 0xff;
	part_huge[22] = 0xff;
	part_huge[23] = 0xff;
	assert_int_equal(decode_raw(META_REC_PARTITION, part_huge, sizeof(part_huge), &eb),
			 KEEL_TOOBIG);

	/* Duplicate replicas. */
	uint8_t part_dup[16 + 4 + 4 + 8 + 4 + 12 + 1] = {0};
	size_t o = 16 + 4;
	part_dup[o + 3] = 2; /* 2 replicas: 1, 1 */
	part_dup[o + 7] = 1;
	part_dup[o + 11] = 1;
	assert_int_equal(decode_raw(META_REC_PARTITION, part_dup, sizeof(part_dup), &eb),
			 KEEL_CORRUPT);
	assert_non_null(strstr(eb.msg, "distinct"));

	/* A bool that is neither 0 nor 1. */
	uint8_t reg[4 + 16 + 8 + 4 + 4 + 2] = {0};
	reg[4 + 16 + 8 + 3] = 0;    /* 0 endpoints */
	memset(reg + 32, 0xff, 4);  /* rack: null */
	reg[36] = 2;                /* fenced = 2 */
	assert_int_equal(decode_raw(META_REC_REGISTER_BROKER, reg, sizeof(reg), &eb),
			 KEEL_CORRUPT);

	/* Trailing bytes inside a record body. */
	uint8_t noop_extra[1] = {0};
	assert_int_equal(decode_raw(META_REC_NOOP, noop_extra, 1, &eb), KEEL_CORRUPT);
	assert_non_null(strstr(eb.msg, "trailing"));

	/* A body shorter than its fields. */
	uint8_t fence_short[6] = {0};
	assert_int_equal(decode_raw(META_REC_FENCE_BROKER, fence_short, 6, &eb), KEEL_CORRUPT);

	/* PartitionChange with no field bits. */
	uint8_t pc_none[16 + 4 + 4 + 1] = {0};
	assert_int_equal(decode_raw(META_REC_PARTITION_CHANGE, pc_none, sizeof(pc_none), &eb),
			 KEEL_CORRUPT);
}

static void test_encode_refuses_what_decode_would_refuse(void **state)
{
	(void)state;
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 4096);
	struct meta_record rec;
	memset(&rec, 0, sizeof(rec));
	rec.type = META_REC_TOPIC;
	rec.topic.name = "bad name";
	memset(rec.topic.topic_id, 1, 16);
	assert_int_equal(meta_record_encode(&rec, &w), KEEL_INVAL);
	rec.topic.name = "good";
	memset(rec.topic.topic_id, 0, 16);
	assert_int_equal(meta_record_encode(&rec, &w), KEEL_INVAL); /* zero id */

	static const int32_t dup[] = {1, 1};
	memset(&rec, 0, sizeof(rec));
	rec.type = META_REC_PARTITION;
	rec.partition.replicas = dup;
	rec.partition.replica_count = 2;
	assert_int_equal(meta_record_encode(&rec, &w), KEEL_INVAL);

	rec.type = 250;
	assert_int_equal(meta_record_encode(&rec, &w), KEEL_INVAL);

	/* A reassignment needs version 1, its lists inside the replicas and
	 * disjoint. */
	static const int32_t reps[] = {1, 2, 3};
	static const int32_t three[] = {3};
	static const int32_t four[] = {4};
	memset(&rec, 0, sizeof(rec));
	rec.type = META_REC_PARTITION_CHANGE;
	rec.partition_change.fields = META_PC_REASSIGNMENT;
	rec.partition_change.adding = three;
	rec.partition_change.adding_count = 1;
	assert_int_equal(meta_record_encode(&rec, &w), KEEL_INVAL); /* version 0 */
	rec.version = 1;
	assert_int_equal(meta_record_encode(&rec, &w), KEEL_OK);
	rec.partition_change.removing = three; /* both adding and removing */
	rec.partition_change.removing_count = 1;
	assert_int_equal(meta_record_encode(&rec, &w), KEEL_INVAL);
	memset(&rec, 0, sizeof(rec));
	rec.type = META_REC_PARTITION;
	rec.version = 1;
	rec.partition.replicas = reps;
	rec.partition.replica_count = 3;
	rec.partition.adding = four; /* not a replica */
	rec.partition.adding_count = 1;
	assert_int_equal(meta_record_encode(&rec, &w), KEEL_INVAL);
	rec.partition.adding = three;
	assert_int_equal(meta_record_encode(&rec, &w), KEEL_OK);
	rec.version = 0; /* version 0 cannot carry it */
	assert_int_equal(meta_record_encode(&rec, &w), KEEL_INVAL);

	/* A version-0 PartitionChange with the reassignment bit does not decode. */
	keel_wbuf_reset(&w);
	memset(&rec, 0, sizeof(rec));
	rec.type = META_REC_PARTITION_CHANGE;
	rec.version = 1;
	rec.partition_change.fields = META_PC_REASSIGNMENT;
	assert_int_equal(meta_record_encode(&rec, &w), KEEL_OK);
	w.data[3] = 0; /* the version field, low byte */
	struct keel_arena arena;
	keel_arena_init(&arena, 1024);
	struct meta_dec d;
	meta_dec_init(&d, w.data, w.size, &arena, NULL);
	struct meta_record back;
	assert_int_equal(meta_record_decode(&d, &back), KEEL_CORRUPT);
	keel_arena_close(&arena);
	keel_wbuf_reset(&w);

	/* A full writer reports TOOBIG. */
	uint8_t small[10];
	struct keel_wbuf fw;
	keel_wbuf_init_fixed(&fw, small, sizeof(small));
	memset(&rec, 0, sizeof(rec));
	rec.type = META_REC_TOPIC;
	rec.topic.name = "a-topic-name";
	memset(rec.topic.topic_id, 1, 16);
	assert_int_equal(meta_record_encode(&rec, &fw), KEEL_TOOBIG);
	keel_wbuf_free(&w);
}

static void test_topic_name_rules(void **state)
{
	(void)state;
	assert_true(meta_topic_name_valid("sensor-data"));
	assert_true(meta_topic_name_valid("a.b_c-D9"));
	assert_false(meta_topic_name_valid(""));
	assert_false(meta_topic_name_valid("."));
	assert_false(meta_topic_name_valid(".."));
	assert_true(meta_topic_name_valid("..."));
	assert_false(meta_topic_name_valid("a b"));
	assert_false(meta_topic_name_valid("a/b"));
	char longname[251];
	memset(longname, 'x', 250);
	longname[250] = '\0';
	assert_false(meta_topic_name_valid(longname));
	longname[249] = '\0';
	assert_true(meta_topic_name_valid(longname));
}

static void test_uuid_text_roundtrip(void **state)
{
	(void)state;
	uint8_t id[16];
	for (int i = 0; i < 16; i++) {
		id[i] = (uint8_t)(i * 37 + 5);
	}
	char text[32];
	struct meta_fmt f;
	meta_fmt_init(&f, text, sizeof(text));
	meta_fmt_uuid(&f, id);
	assert_int_equal(strlen(text), META_UUID_TEXT_LEN);
	uint8_t back[16];
	assert_true(meta_uuid_parse(text, back));
	assert_memory_equal(id, back, 16);
	assert_false(meta_uuid_parse("short", back));
	text[3] = '!';
	assert_false(meta_uuid_parse(text, back));
	/* All-zero id is "AAAAAAAAAAAAAAAAAAAAAA" (as Kafka prints Uuid.ZERO_UUID). */
	memset(id, 0, 16);
	meta_fmt_init(&f, text, sizeof(text));
	meta_fmt_uuid(&f, id);
	assert_string_equal(text, "AAAAAAAAAAAAAAAAAAAAAA");
}

static void test_formatter_truncates_safely(void **state)
{
	(void)state;
	char buf[8];
	struct meta_fmt f;
	meta_fmt_init(&f, buf, sizeof(buf));
	meta_fmt_str(&f, "Broker-");
	meta_fmt_i64(&f, -9223372036854775807ll - 1);
	assert_true(f.truncated);
	assert_int_equal(strlen(buf), 7);
	assert_string_equal(buf, "Broker-");
	char big[32];
	meta_fmt_init(&f, big, sizeof(big));
	meta_fmt_i64(&f, -9223372036854775807ll - 1);
	assert_string_equal(big, "-9223372036854775808");
	assert_false(f.truncated);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_roundtrip_every_type),
		cmocka_unit_test(test_every_truncation_fails_cleanly),
		cmocka_unit_test(test_newer_version_rejected_with_message),
		cmocka_unit_test(test_malformed_fields),
		cmocka_unit_test(test_encode_refuses_what_decode_would_refuse),
		cmocka_unit_test(test_topic_name_rules),
		cmocka_unit_test(test_uuid_text_roundtrip),
		cmocka_unit_test(test_formatter_truncates_safely),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
