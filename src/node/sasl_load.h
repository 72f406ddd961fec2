/*
 * sasl_load.h — reading SASL user files (sasl/sasl_users.h has the
 * formats) for `keel server` (--sasl-users-file, --jaas-file) and
 * `keel broker` (--sasl-users-file).
 */
#ifndef KEEL_NODE_SASL_LOAD_H
#define KEEL_NODE_SASL_LOAD_H

#include <stddef.h>

#include "base/err.h"
#include "sasl/sasl_users.h"

/* The JAAS login context ZooKeeper reads (zookeeper.sasl.serverconfig). */
#define NODE_SASL_JAAS_SECTION "Server"

/* Adds the users of one file to `users`: the JAAS format when `jaas`, the
 * users file format otherwise. Warns when others may read the file. */
enum keel_err node_sasl_load_file(struct sasl_users *users, const char *path, bool jaas,
				  char *err, size_t err_size);

/* The table for the server's flags: NULL in *out when neither file is
 * given (no SASL mechanism); otherwise at least one user. Free with
 * node_sasl_free. */
enum keel_err node_sasl_load(const char *users_file, const char *jaas_file,
			     struct sasl_users **out, char *err, size_t err_size);
void node_sasl_free(struct sasl_users *users);

#endif
