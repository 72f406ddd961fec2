/*
 * fmt.c — keel_fmt: the small printf of the pure layers (see fmt.h).
 */
#include "base/fmt.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/assert.h"

struct out {
	char *buf;
	size_t size;
	size_t len; /* the length the output would have */
};

static void put(struct out *o, char ch)
{
	if (o->len + 1 < o->size) {
		o->buf[o->len] = ch;
	}
	o->len++;
}

static void pad(struct out *o, char ch, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		put(o, ch);
	}
}

struct spec {
	bool left;
	bool zero;
	size_t width;
	bool has_precision;
	size_t precision;
};

/* Writes `len` bytes of `s` in the field. */
static void put_field(struct out *o, const struct spec *sp, const char *s, size_t len)
{
	size_t fill = sp->width > len ? sp->width - len : 0;
	if (!sp->left) {
		pad(o, ' ', fill);
	}
	for (size_t i = 0; i < len; i++) {
		put(o, s[i]);
	}
	if (sp->left) {
		pad(o, ' ', fill);
	}
}

/* Writes a number: `neg` and the magnitude `v` in base 10 or 16. */
static void put_number(struct out *o, const struct spec *sp, bool neg, uint64_t v, unsigned base,
                       bool upper)
{
	const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	char tmp[24];
	size_t n = 0;
	do {
		tmp[n++] = digits[v % base];
		v /= base;
	} while (v != 0);
	size_t len = n + (neg ? 1u : 0u);
	size_t fill = sp->width > len ? sp->width - len : 0;
	if (!sp->left && !sp->zero) {
		pad(o, ' ', fill);
	}
	if (neg) {
		put(o, '-');
	}
	if (!sp->left && sp->zero) {
		pad(o, '0', fill);
	}
	while (n > 0) {
		put(o, tmp[--n]);
	}
	if (sp->left) {
		pad(o, ' ', fill);
	}
}

enum length { LEN_INT, LEN_CHAR, LEN_SHORT, LEN_LONG, LEN_LLONG, LEN_SIZE, LEN_MAX };

static int64_t arg_signed(va_list *ap, enum length l)
{
	switch (l) {
	case LEN_LONG:
		return va_arg(*ap, long);
	case LEN_LLONG:
		return va_arg(*ap, long long);
	case LEN_SIZE:
		return (int64_t)va_arg(*ap, size_t);
	case LEN_MAX:
		return va_arg(*ap, intmax_t);
	case LEN_CHAR:
		return (signed char)va_arg(*ap, int);
	case LEN_SHORT:
		return (short)va_arg(*ap, int);
	case LEN_INT:
		break;
	}
	return va_arg(*ap, int);
}

static uint64_t arg_unsigned(va_list *ap, enum length l)
{
	switch (l) {
	case LEN_LONG:
		return va_arg(*ap, unsigned long);
	case LEN_LLONG:
		return va_arg(*ap, unsigned long long);
	case LEN_SIZE:
		return va_arg(*ap, size_t);
	case LEN_MAX:
		return va_arg(*ap, uintmax_t);
	case LEN_CHAR:
		return (unsigned char)va_arg(*ap, unsigned);
	case LEN_SHORT:
		return (unsigned short)va_arg(*ap, unsigned);
	case LEN_INT:
		break;
	}
	return va_arg(*ap, unsigned);
}

static const char *parse_length(const char *f, enum length *l)
{
	*l = LEN_INT;
	if (f[0] == 'h' && f[1] == 'h') {
		*l = LEN_CHAR;
		return f + 2;
	}
	if (f[0] == 'l' && f[1] == 'l') {
		*l = LEN_LLONG;
		return f + 2;
	}
	switch (f[0]) {
	case 'h':
		*l = LEN_SHORT;
		return f + 1;
	case 'l':
		*l = LEN_LONG;
		return f + 1;
	case 'z':
		*l = LEN_SIZE;
		return f + 1;
	case 'j':
		*l = LEN_MAX;
		return f + 1;
	default:
		return f;
	}
}

/* Parses flags, width and precision after '%'. */
static const char *parse_spec(const char *f, va_list *ap, struct spec *sp)
{
	memset(sp, 0, sizeof(*sp));
	for (;; f++) {
		if (*f == '-') {
			sp->left = true;
		} else if (*f == '0') {
			sp->zero = true;
		} else {
			break;
		}
	}
	if (*f == '*') {
		int w = va_arg(*ap, int);
		sp->left = sp->left || w < 0;
		sp->width = (size_t)(w < 0 ? -(int64_t)w : w);
		f++;
	}
	while (*f >= '0' && *f <= '9') {
		sp->width = sp->width * 10u + (size_t)(*f++ - '0');
	}
	if (*f == '.') {
		f++;
		sp->has_precision = true;
		if (*f == '*') {
			int p = va_arg(*ap, int);
			sp->precision = p < 0 ? 0 : (size_t)p;
			sp->has_precision = p >= 0;
			f++;
		}
		while (*f >= '0' && *f <= '9') {
			sp->precision = sp->precision * 10u + (size_t)(*f++ - '0');
		}
	}
	return f;
}

static void put_string(struct out *o, const struct spec *sp, const char *s)
{
	if (s == NULL) {
		s = "(null)";
	}
	size_t len = 0;
	/* The precision first: "%.*s" may point at bytes with no NUL after them. */
	while ((!sp->has_precision || len < sp->precision) && s[len] != '\0') {
		len++;
	}
	put_field(o, sp, s, len);
}

size_t keel_vfmt(char *buf, size_t size, const char *fmt, va_list ap)
{
	struct out o = {buf, size, 0};
	va_list args;
	va_copy(args, ap);
	for (const char *f = fmt; *f != '\0'; f++) {
		if (*f != '%') {
			put(&o, *f);
			continue;
		}
		struct spec sp;
		enum length l;
		f = parse_length(parse_spec(f + 1, &args, &sp), &l);
		switch (*f) {
		case '%':
			put(&o, '%');
			break;
		case 'd':
		case 'i': {
			int64_t v = arg_signed(&args, l);
			uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
			put_number(&o, &sp, v < 0, mag, 10, false);
			break;
		}
		case 'u':
			put_number(&o, &sp, false, arg_unsigned(&args, l), 10, false);
			break;
		case 'x':
		case 'X':
			put_number(&o, &sp, false, arg_unsigned(&args, l), 16, *f == 'X');
			break;
		case 'p':
			put(&o, '0');
			put(&o, 'x');
			put_number(&o, &sp, false, (uint64_t)(uintptr_t)va_arg(args, void *), 16,
			           false);
			break;
		case 'c': {
			char ch = (char)va_arg(args, int);
			put_field(&o, &sp, &ch, 1);
			break;
		}
		case 's':
			put_string(&o, &sp, va_arg(args, const char *));
			break;
		default:
			KEEL_UNREACHABLE(); /* a conversion keel_fmt does not support */
		}
	}
	va_end(args);
	if (size > 0) {
		buf[o.len < size ? o.len : size - 1] = '\0';
	}
	return o.len;
}

size_t keel_fmt(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t len = keel_vfmt(buf, size, fmt, ap);
	va_end(ap);
	return len;
}
