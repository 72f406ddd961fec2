/* buf.c — the out-of-line parts of the buffer writer (see buf.h). */
#include "base/buf.h"

#include <stdlib.h>

#include "base/assert.h"

void keel_wbuf_init_fixed(struct keel_wbuf *w, void *mem, size_t capacity)
{
	KEEL_ASSERT(mem != NULL || capacity == 0);
	w->data = (uint8_t *)mem;
	w->size = 0;
	w->capacity = capacity;
	w->max_size = capacity;
	w->dynamic = false;
	w->failed = false;
}

void keel_wbuf_init_dynamic(struct keel_wbuf *w, size_t initial, size_t max_size)
{
	KEEL_ASSERT(initial <= max_size);
	w->data = NULL;
	w->size = 0;
	w->capacity = 0;
	w->max_size = max_size;
	w->dynamic = true;
	w->failed = false;
	if (initial > 0) {
		w->data = malloc(initial);
		if (w->data == NULL) {
			w->failed = true;
			return;
		}
		w->capacity = initial;
	}
}

void keel_wbuf_free(struct keel_wbuf *w)
{
	if (w->dynamic) {
		free(w->data);
		w->data = NULL;
		w->capacity = 0;
	}
	w->size = 0;
}

uint8_t *keel_wbuf_release(struct keel_wbuf *w, size_t *size)
{
	KEEL_ASSERT(w->dynamic);
	if (w->failed) {
		*size = 0;
		return NULL;
	}
	uint8_t *data = w->data;
	*size = w->size;
	w->data = NULL;
	w->size = 0;
	w->capacity = 0;
	return data;
}

bool keel_wbuf_grow(struct keel_wbuf *w, size_t need)
{
	if (!w->dynamic) {
		return false;
	}
	if (need > w->max_size || w->size > w->max_size - need) {
		return false;
	}
	size_t want = w->size + need;
	size_t cap = w->capacity > 0 ? w->capacity : 64;
	while (cap < want) {
		cap = cap > w->max_size / 2 ? w->max_size : cap * 2;
	}
	uint8_t *data = realloc(w->data, cap);
	if (data == NULL) {
		return false;
	}
	w->data = data;
	w->capacity = cap;
	return true;
}
