// SPDX-License-Identifier: Apache-2.0
/*
 * string.c - freestanding mem/string helpers and 64-bit arithmetic
 *
 * gcc may emit calls to memset/memcpy/memmove/memcmp even with
 * -ffreestanding, so these must exist with their standard names.
 */
#include "string.h"

/* memset - fill @n bytes at @dst with byte @c */
void *memset(void *dst, int c, size_t n)
{
	volatile u8 *d = dst;	/* volatile: stop gcc turning this into memset() */

	while (n--)
		*d++ = (u8)c;
	return dst;
}

/* memcpy - copy @n bytes from @src to non-overlapping @dst */
void *memcpy(void *dst, const void *src, size_t n)
{
	volatile u8 *d = dst;
	const u8 *s = src;

	while (n--)
		*d++ = *s++;
	return dst;
}

/* memmove - copy @n bytes from @src to @dst, regions may overlap */
void *memmove(void *dst, const void *src, size_t n)
{
	volatile u8 *d = dst;
	const u8 *s = src;

	if (d <= s || d >= s + n)
		return memcpy(dst, src, n);
	while (n--)
		d[n] = s[n];
	return dst;
}

/* memcmp - compare @n bytes, return <0, 0 or >0 */
int memcmp(const void *a, const void *b, size_t n)
{
	const u8 *x = a, *y = b;

	for (; n; n--, x++, y++)
		if (*x != *y)
			return *x - *y;
	return 0;
}

/* strlen - length of NUL-terminated @s */
size_t strlen(const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	return n;
}

/* strnlen - length of @s, at most @max */
size_t strnlen(const char *s, size_t max)
{
	size_t n = 0;

	while (n < max && s[n])
		n++;
	return n;
}

/* strcmp - compare two NUL-terminated strings */
int strcmp(const char *a, const char *b)
{
	while (*a && *a == *b) {
		a++;
		b++;
	}
	return (u8)*a - (u8)*b;
}

/* strlcpy - bounded copy, always NUL-terminates when @size > 0 */
size_t strlcpy(char *dst, const char *src, size_t size)
{
	size_t len = strlen(src);

	if (size) {
		size_t n = len < size - 1 ? len : size - 1;

		memcpy(dst, src, n);
		dst[n] = '\0';
	}
	return len;
}

/* parse_u64 - parse decimal or 0x-hex @s into @out; 0 or -EINVAL/-ERANGE */
int parse_u64(const char *s, u64 *out)
{
	u64 v = 0, base = 10, d;

	if (!s || !*s)
		return -EINVAL;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
		if (!*s)
			return -EINVAL;
	}
	for (; *s; s++) {
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			return -EINVAL;
		if (v > (~0ULL - d) / base)
			return -ERANGE;
		v = v * base + d;
	}
	*out = v;
	return 0;
}

/*
 * muldiv64 - floor(@a * @b / @c) with a 128-bit intermediate
 *
 * Bitwise long division so no libgcc helper (__udivti3) is needed.
 * Returns ~0 when the quotient does not fit in 64 bits or @c is 0.
 * Slow (64 iterations): for setup code, not for the ISR.
 */
u64 muldiv64(u64 a, u64 b, u64 c)
{
	unsigned __int128 n = (unsigned __int128)a * b;
	u64 hi = (u64)(n >> 64), lo = (u64)n, q = 0;
	int i;

	if (!c || hi >= c)
		return ~0ULL;
	for (i = 63; i >= 0; i--) {
		u64 top = hi >> 63;

		hi = (hi << 1) | (lo >> 63);
		lo <<= 1;
		if (top || hi >= c) {
			hi -= c;
			q |= 1ULL << i;
		}
	}
	return q;
}
