/*
 * host.h — the libuv shell as the core's host (core.h).
 */
#ifndef KEEL_NODE_HOST_H
#define KEEL_NODE_HOST_H

#include "core/core.h"

struct node;

/* The host table of the real server, its context the node itself. */
struct core_host node_host(struct node *n);

#endif
