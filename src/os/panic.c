/* panic.c — what a failed KEEL_ASSERT does: print where, then abort. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/assert.h"

_Noreturn void keel_assert_fail(const char *expr, const char *file, int line,
				const char *func)
{
	char msg[512];
	int n = snprintf(msg, sizeof(msg), "keel: assertion failed: %s (%s:%d in %s)\n", expr,
			 file, line, func);
	if (n > 0) {
		ssize_t w = write(STDERR_FILENO, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
		(void)w;
	}
	abort();
}
