/* SPDX-License-Identifier: Apache-2.0 */
/*
 * printf.h - tiny printf for boot/error messages
 *
 * Conversions: %% %c %s %d %i %u %x %p, length modifiers l and ll (both mean
 * 64 bit), flag '0' and a field width. Nothing else.
 */
#ifndef IRQLAB_PRINTF_H
#define IRQLAB_PRINTF_H

#include <stdarg.h>
#include "types.h"

typedef void (*putc_fn)(char c);

int vsnprintf(char *buf, size_t size, const char *fmt, va_list ap);
int snprintf(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void printf_set_console(putc_fn fn);
int printk(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* IRQLAB_PRINTF_H */
