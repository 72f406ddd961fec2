/*
 * errors.c — names of Kafka's protocol error codes.
 */
#include "kafka/errors.h"

const char *kafka_error_name(int16_t code)
{
	switch (code) {
#define KAFKA_ERROR_CASE(name, value) \
	case (value):                 \
		return #name;
		KAFKA_ERRORS(KAFKA_ERROR_CASE)
#undef KAFKA_ERROR_CASE
	default:
		return "UNKNOWN";
	}
}
