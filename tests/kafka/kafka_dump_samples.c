/*
 * kafka_dump_samples — prints keel's encoding of every sample message
 * (tests/unit/test_kafka_samples.h) at every supported version, one line
 * each: "<api_key> <version> <request|response> <hex body>". The body is
 * what follows the header. kafka_python_check.py decodes these lines with
 * kafka-python's own protocol classes, an implementation written apart
 * from keel's.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kafka/api.h"
#include "../unit/test_kafka_samples.h"

static int dump(const struct kafka_api_info *api, int16_t v, bool response)
{
	void *body = NULL;
	bool ok = response ? kafka_sample_response(api->api_key, &body)
	                   : kafka_sample_request(api->api_key, &body);
	if (!ok) {
		fprintf(stderr, "no sample for %s\n", api->name);
		return 1;
	}
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, 1 << 20);
	enum keel_err err = kafka_encode_body(&w, api->api_key, v, response, body);
	if (err != KEEL_OK) {
		fprintf(stderr, "%s v%d: %s\n", api->name, v, keel_errname(err));
		keel_wbuf_free(&w);
		return 1;
	}
	printf("%d %d %s ", api->api_key, v, response ? "response" : "request");
	for (size_t i = 0; i < w.size; i++) {
		printf("%02x", w.data[i]);
	}
	printf("\n");
	keel_wbuf_free(&w);
	return 0;
}

int main(void)
{
	size_t count;
	const struct kafka_api_info *apis = kafka_apis(&count);
	int status = 0;
	for (size_t i = 0; i < count; i++) {
		for (int16_t v = apis[i].min_version; v <= apis[i].max_version; v++) {
			status |= dump(&apis[i], v, false);
			status |= dump(&apis[i], v, true);
		}
	}
	return status;
}
