// SPDX-License-Identifier: Apache-2.0
/* compat.c - what probes/guest/lib/ring.c needs from a libc that lacks it */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

size_t strlcpy(char *dst, const char *src, size_t size);

/*
 * strlcpy - copy @src into @dst of @size bytes, always terminated; strlen(@src)
 * (glibc has it only from 2.38; weak, so a libc's own one wins)
 */
__attribute__((weak)) size_t strlcpy(char *dst, const char *src, size_t size)
{
	return (size_t)snprintf(dst, size, "%s", src);
}
