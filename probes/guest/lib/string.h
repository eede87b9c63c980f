/* SPDX-License-Identifier: Apache-2.0 */
/* string.h - freestanding mem and string helpers */
#ifndef IRQLAB_STRING_H
#define IRQLAB_STRING_H

#include "types.h"

void *memset(void *dst, int c, size_t n);
void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
size_t strnlen(const char *s, size_t max);
int strcmp(const char *a, const char *b);
size_t strlcpy(char *dst, const char *src, size_t size);
int parse_u64(const char *s, u64 *out);
u64 muldiv64(u64 a, u64 b, u64 c);

#endif /* IRQLAB_STRING_H */
