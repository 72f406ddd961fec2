/*
 * list.h — an intrusive, circular, doubly-linked list.
 *
 * The caller embeds a `struct keel_list` node in its item and keeps one more
 * as the list head; KEEL_LIST_ITEM() gets from a node back to the item. The
 * list never allocates and never owns its items.
 *
 * Invariants: a head is linked to itself when the list is empty; a node that
 * is in no list is linked to itself too (keel_list_init, and every removal
 * re-initialises the node), so keel_list_linked() tells membership without
 * a flag and removing a node twice is harmless.
 *
 * Iteration while removing the current item: take the next node first
 *
 *	struct keel_list *it, *next;
 *	KEEL_LIST_FOR_EACH_SAFE (it, next, &head) { ... keel_list_remove(it); }
 */
#ifndef KEEL_BASE_LIST_H
#define KEEL_BASE_LIST_H

#include <stdbool.h>
#include <stddef.h>

#include "base/assert.h"

struct keel_list {
	struct keel_list *prev;
	struct keel_list *next;
};

#define KEEL_LIST_ITEM(node, type, member) KEEL_CONTAINER_OF(node, type, member)

#define KEEL_LIST_FOR_EACH(it, head) for ((it) = (head)->next; (it) != (head); (it) = (it)->next)

#define KEEL_LIST_FOR_EACH_SAFE(it, tmp, head)                                          \
	for ((it) = (head)->next, (tmp) = (it)->next; (it) != (head);                   \
	     (it) = (tmp), (tmp) = (it)->next)

/* An empty list head, or a node in no list. */
static inline void keel_list_init(struct keel_list *l)
{
	l->prev = l;
	l->next = l;
}

static inline bool keel_list_empty(const struct keel_list *head)
{
	return head->next == head;
}

/* Is this node in a list? (For a head: is the list non-empty.) */
static inline bool keel_list_linked(const struct keel_list *node)
{
	return node->next != node;
}

static inline void keel_list_insert_between(struct keel_list *node, struct keel_list *prev,
					    struct keel_list *next)
{
	KEEL_ASSERT(!keel_list_linked(node));
	node->prev = prev;
	node->next = next;
	prev->next = node;
	next->prev = node;
}

static inline void keel_list_push_back(struct keel_list *head, struct keel_list *node)
{
	keel_list_insert_between(node, head->prev, head);
}

static inline void keel_list_push_front(struct keel_list *head, struct keel_list *node)
{
	keel_list_insert_between(node, head, head->next);
}

/* Unlinks `node` from its list (no-op when it is in none). */
static inline void keel_list_remove(struct keel_list *node)
{
	node->prev->next = node->next;
	node->next->prev = node->prev;
	keel_list_init(node);
}

/* The first / last node, or NULL when the list is empty. */
static inline struct keel_list *keel_list_first(const struct keel_list *head)
{
	return keel_list_empty(head) ? NULL : head->next;
}

static inline struct keel_list *keel_list_last(const struct keel_list *head)
{
	return keel_list_empty(head) ? NULL : head->prev;
}

/* Removes and returns the first node, or NULL when the list is empty. */
static inline struct keel_list *keel_list_pop_front(struct keel_list *head)
{
	struct keel_list *node = keel_list_first(head);
	if (node != NULL) {
		keel_list_remove(node);
	}
	return node;
}

/* Moves every node of `from` to the end of `to`; `from` ends empty. */
static inline void keel_list_splice_back(struct keel_list *to, struct keel_list *from)
{
	if (keel_list_empty(from)) {
		return;
	}
	struct keel_list *first = from->next;
	struct keel_list *last = from->prev;
	first->prev = to->prev;
	to->prev->next = first;
	last->next = to;
	to->prev = last;
	keel_list_init(from);
}

/* Number of nodes (O(n): tests and assertions). */
static inline size_t keel_list_length(const struct keel_list *head)
{
	size_t count = 0;
	for (const struct keel_list *it = head->next; it != head; it = it->next) {
		count++;
	}
	return count;
}

#endif
