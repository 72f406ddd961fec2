/*
 * err.h — the one error enum of the whole project.
 *
 * Functions that act return `enum keel_err` (KEEL_OK is zero, failures are
 * positive); predicates return bool. Raw errno values never cross a module
 * boundary: the I/O layers map them here and keep the detail in a message
 * buffer of their own. ZooKeeper error codes are a protocol detail, mapped at
 * the zk/ boundary.
 */
#ifndef KEEL_BASE_ERR_H
#define KEEL_BASE_ERR_H

/* X(NAME, message) — one table, so names and messages never drift apart. */
#define KEEL_ERRORS(X)                                                        \
	X(OK, "success")                                                      \
	X(NOMEM, "out of memory")                                             \
	X(INVAL, "invalid argument")                                          \
	X(SHORT, "input ends early")                                          \
	X(TOOBIG, "size over the configured limit")                           \
	X(CORRUPT, "data is corrupt (checksum or structure mismatch)")        \
	X(IO, "input/output error")                                           \
	X(NOSPACE, "no space left on device")                                 \
	X(NOENT, "not found")                                                 \
	X(EXIST, "already exists")                                            \
	X(FAILED, "storage is in a failed state and refuses writes")          \
	X(NOTLEADER, "this server is not the leader")                         \
	X(NOLEADER, "no leader is known")                                     \
	X(BUSY, "busy, try again")                                            \
	X(SHUTDOWN, "shutting down")                                          \
	X(CANCELED, "canceled")                                               \
	X(PROTO, "protocol violation")                                        \
	X(UNSUPPORTED, "not supported")                                       \
	X(TIMEOUT, "timed out")                                               \
	X(LIMIT, "limit reached")                                             \
	X(STALE, "stale term or epoch")                                       \
	X(CONFIG, "invalid configuration")                                    \
	X(RANGE, "offset out of range")

enum keel_err {
#define KEEL_ERR_ENUM(name, msg) KEEL_##name,
	KEEL_ERRORS(KEEL_ERR_ENUM)
#undef KEEL_ERR_ENUM
	KEEL_ERR_COUNT
};

/* Static, never NULL: "unknown error" for values outside the table. */
const char *keel_strerror(enum keel_err err);

/* The symbolic name, e.g. "KEEL_CORRUPT" (for logs and test output). */
const char *keel_errname(enum keel_err err);

#endif
