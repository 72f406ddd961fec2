/*
 * walk.h — shorthands shared by the message walks (msg_core.c,
 * msg_admin.c); not part of the layer's interface.
 *
 * Minimum wire sizes feed kio_array()'s "can this count fit in what is
 * left" check: a string is at least its length prefix (2 bytes, 1 when
 * compact), an array its count (4, or 1), a tagged section 1 byte in a
 * flexible version and nothing otherwise.
 */
#ifndef KEEL_KAFKA_WALK_H
#define KEEL_KAFKA_WALK_H

#include "kafka/io.h"
#include "kafka/msg.h"

static inline size_t kw_str(const struct kafka_io *io)
{
	return io->flexible ? 1u : 2u;
}

static inline size_t kw_arr(const struct kafka_io *io)
{
	return io->flexible ? 1u : 4u;
}

static inline size_t kw_tags(const struct kafka_io *io)
{
	return io->flexible ? 1u : 0u;
}

/* Walks the header of array field `arr` with count field `cnt`. */
#define KW_ARRAY(io, arr, cnt, min_wire, nullable) \
	kio_array((io), &(cnt), (void **)&(arr), sizeof(*(arr)), (min_wire), (nullable))

#endif
