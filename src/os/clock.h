/*
 * clock.h — the process's view of time, for the I/O layers only.
 *
 * Pure layers never call these: the node reads the clock and passes the
 * value in (tick(now_ms), the stamped time of a log entry).
 */
#ifndef KEEL_OS_CLOCK_H
#define KEEL_OS_CLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Monotonic milliseconds/nanoseconds since an arbitrary start. */
uint64_t keel_clock_mono_ms(void);
uint64_t keel_clock_mono_ns(void);

/* Wall-clock milliseconds since the Unix epoch (znode ctime/mtime). */
int64_t keel_clock_wall_ms(void);

/* Fills buf with bytes from the kernel's random source (session passwords,
 * seeds). */
enum keel_err keel_os_random(void *buf, size_t size);

#endif
