/*
 * fmt.h — printf-style formatting into a caller's buffer, for pure layers
 * (which include no stdio).
 *
 * Conversions: %d %i %u %x %X %c %s %p and %%, with the length modifiers
 * hh h l ll z j, the flags '-' and '0', a field width and, for %s, a
 * precision ("%.*s" included). No floating point: a conversion outside
 * this set asserts (the format attribute makes the compiler check the
 * arguments of every call). Output is truncated to size - 1 bytes and
 * always terminated when size > 0.
 *
 * Returns the length the whole output would have had (as snprintf), so
 * `ret >= size` means it was truncated.
 */
#ifndef KEEL_BASE_FMT_H
#define KEEL_BASE_FMT_H

#include <stdarg.h>
#include <stddef.h>

__attribute__((format(printf, 3, 4))) size_t keel_fmt(char *buf, size_t size, const char *fmt, ...);
__attribute__((format(printf, 3, 0))) size_t keel_vfmt(char *buf, size_t size, const char *fmt,
                                                       va_list ap);

#endif
