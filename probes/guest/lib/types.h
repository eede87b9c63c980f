/* SPDX-License-Identifier: Apache-2.0 */
/*
 * types.h - fixed-width types and errno values for the freestanding probe
 *
 * Shared by every architecture. Only compiler-provided freestanding headers
 * are used (stdint.h, stddef.h, stdbool.h, stdarg.h).
 */
#ifndef IRQLAB_TYPES_H
#define IRQLAB_TYPES_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int8_t s8;
typedef int16_t s16;
typedef int32_t s32;
typedef int64_t s64;

/* errno-like codes; positive values go into ring_hdr.error (see ring.h) */
#define ENOENT		2	/* internal only (arch_param_parse), never in the ring */
#define EIO		5
#define ENOMEM		12
#define EFAULT		14
#define ENODEV		19
#define EINVAL		22
#define ENOSPC		28
#define ERANGE		34

#define NSEC_PER_SEC	1000000000UL

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define barrier()	__asm__ __volatile__("" ::: "memory")
#define READ_ONCE(x)	(*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))
#define __noreturn	__attribute__((noreturn))
#define __aligned(n)	__attribute__((aligned(n)))
#define __packed	__attribute__((packed))

#endif /* IRQLAB_TYPES_H */
