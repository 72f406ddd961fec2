/* err.c — messages and names for the error table in err.h. */
#include "base/err.h"

static const char *const err_messages[] = {
#define KEEL_ERR_MSG(name, msg) msg,
	KEEL_ERRORS(KEEL_ERR_MSG)
#undef KEEL_ERR_MSG
};

static const char *const err_names[] = {
#define KEEL_ERR_NAME(name, msg) "KEEL_" #name,
	KEEL_ERRORS(KEEL_ERR_NAME)
#undef KEEL_ERR_NAME
};

_Static_assert(sizeof(err_messages) / sizeof(err_messages[0]) == KEEL_ERR_COUNT,
	       "one message per error");

const char *keel_strerror(enum keel_err err)
{
	if ((unsigned)err >= KEEL_ERR_COUNT) {
		return "unknown error";
	}
	return err_messages[err];
}

const char *keel_errname(enum keel_err err)
{
	if ((unsigned)err >= KEEL_ERR_COUNT) {
		return "KEEL_UNKNOWN";
	}
	return err_names[err];
}
