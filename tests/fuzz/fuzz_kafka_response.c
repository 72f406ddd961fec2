/*
 * fuzz_kafka_response.c — every Kafka response decoder (fuzz_kafka.h): what
 * a keel client or a follower broker reads from a peer it does not trust.
 */
#include "fuzz_kafka.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_kafka_body(data, size, true);
	return 0;
}
