// SPDX-License-Identifier: Apache-2.0
/* printf.c - tiny printf for boot/error messages (see printf.h) */
#include "printf.h"
#include "string.h"

struct outbuf {
	char *buf;
	size_t size;
	size_t len;
};

static putc_fn console_putc;

/* out_char - append @c to @o, counting it even when truncated */
static void out_char(struct outbuf *o, char c)
{
	if (o->len + 1 < o->size)
		o->buf[o->len] = c;
	o->len++;
}

/* out_num - format @v in @base with @width and @pad, @neg adds a '-' */
static void out_num(struct outbuf *o, u64 v, unsigned int base, int width,
		    char pad, bool neg)
{
	char tmp[24];
	int n = 0;

	do {
		unsigned int d = v % base;

		tmp[n++] = d < 10 ? '0' + d : 'a' + d - 10;
		v /= base;
	} while (v);
	if (neg)
		width--;
	if (neg && pad == '0')
		out_char(o, '-');
	for (; width > n; width--)
		out_char(o, pad);
	if (neg && pad != '0')
		out_char(o, '-');
	while (n)
		out_char(o, tmp[--n]);
}

/* vsnprintf - format into @buf (NUL-terminated), return untruncated length */
int vsnprintf(char *buf, size_t size, const char *fmt, va_list ap)
{
	struct outbuf o = { buf, size, 0 };

	for (; *fmt; fmt++) {
		int width = 0, lng = 0;
		char pad = ' ';
		u64 uv;
		s64 sv;

		if (*fmt != '%') {
			out_char(&o, *fmt);
			continue;
		}
		fmt++;
		if (*fmt == '0') {
			pad = '0';
			fmt++;
		}
		while (*fmt >= '0' && *fmt <= '9')
			width = width * 10 + (*fmt++ - '0');
		while (*fmt == 'l') {
			lng++;
			fmt++;
		}
		switch (*fmt) {
		case '%':
			out_char(&o, '%');
			break;
		case 'c':
			out_char(&o, (char)va_arg(ap, int));
			break;
		case 's': {
			const char *s = va_arg(ap, const char *);
			int len;

			if (!s)
				s = "(null)";
			len = (int)strlen(s);
			for (; width > len; width--)
				out_char(&o, ' ');
			while (*s)
				out_char(&o, *s++);
			break;
		}
		case 'd':
		case 'i':
			sv = lng ? va_arg(ap, s64) : va_arg(ap, int);
			out_num(&o, sv < 0 ? -(u64)sv : (u64)sv, 10, width, pad,
				sv < 0);
			break;
		case 'u':
			uv = lng ? va_arg(ap, u64) : va_arg(ap, unsigned int);
			out_num(&o, uv, 10, width, pad, false);
			break;
		case 'x':
			uv = lng ? va_arg(ap, u64) : va_arg(ap, unsigned int);
			out_num(&o, uv, 16, width, pad, false);
			break;
		case 'p':
			out_char(&o, '0');
			out_char(&o, 'x');
			out_num(&o, (u64)(uintptr_t)va_arg(ap, void *), 16,
				width, pad, false);
			break;
		case '\0':
			fmt--;
			break;
		default:
			out_char(&o, '%');
			out_char(&o, *fmt);
			break;
		}
	}
	if (size)
		buf[o.len < size ? o.len : size - 1] = '\0';
	return (int)o.len;
}

/* snprintf - format into @buf, return untruncated length */
int snprintf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return n;
}

/* printf_set_console - choose the byte sink used by printk */
void printf_set_console(putc_fn fn)
{
	console_putc = fn;
}

/* printk - format (max 255 chars) to the console; never use per sample */
int printk(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n, i;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (!console_putc)
		return 0;
	for (i = 0; line[i]; i++) {
		if (line[i] == '\n')
			console_putc('\r');
		console_putc(line[i]);
	}
	return n;
}
