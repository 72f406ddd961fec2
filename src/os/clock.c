/* clock.c — clocks and the OS random source (see clock.h). */
#include "os/clock.h"

#include <errno.h>
#include <sys/random.h>
#include <time.h>

uint64_t keel_clock_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t keel_clock_mono_ms(void)
{
	return keel_clock_mono_ns() / 1000000u;
}

int64_t keel_clock_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

enum keel_err keel_os_random(void *buf, size_t size)
{
	unsigned char *p = buf;
	while (size > 0) {
		ssize_t n = getrandom(p, size, 0);
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			return KEEL_IO;
		}
		p += n;
		size -= (size_t)n;
	}
	return KEEL_OK;
}
