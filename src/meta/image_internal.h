/*
 * image_internal.h — constructors and destructors of image entities, shared
 * by image.c (apply) and snapshot.c (load). Not for use outside src/meta.
 */
#ifndef KEEL_META_IMAGE_INTERNAL_H
#define KEEL_META_IMAGE_INTERNAL_H

#include "meta/image.h"

/* A heap copy of a registration (fields only; offsets left zero), or NULL
 * when memory ran out. Free with meta_broker_free. */
struct meta_broker *meta_broker_new(const struct meta_register_broker_record *r);
void meta_broker_free(struct meta_broker *b);

/* Frees a topic, its partitions and its name. */
void meta_topic_free(struct meta_topic *t);

void meta_config_entry_free(struct meta_config_entry *c);

#endif
