/* SPDX-License-Identifier: Apache-2.0 */
/*
 * multiring.h - several v1 sample rings in one shared-memory area
 * (docs/formats.md section 6)
 *
 * A 4096-byte directory at the area's start names the rings; ring i (a
 * plain v1 ring, probes/guest/lib/ring.h) starts at first_ring + i *
 * ring_stride from the directory. Each ring has exactly one writer (the
 * thread of one CPU); the host only reads.
 */
#ifndef IRQLAB_MULTIRING_H
#define IRQLAB_MULTIRING_H

#include "ring.h"

#define MR_MAGIC		0x544c554d4c515249ULL	/* "IRQLMULT" */
#define MR_VERSION		1
#define MR_DIR_SIZE		4096
#define MR_MAX_RINGS		512
#define MR_MESSAGE_LEN		256

/* ring_hdr values the native probe adds to the v1 enumerations */
#define TICK_CLOCK_MONOTONIC	6	/* tick = CLOCK_MONOTONIC ns */
#define TIMER_CLOCK_NANOSLEEP	5	/* clock_nanosleep(TIMER_ABSTIME) */
#define IDLE_SLEEP		3	/* the thread blocks in the kernel */
#define TIMER_BUSY_LOOP		7	/* no timer: noise.c reads the clock in a loop */

/* mr_dir.policy */
#define MR_POLICY_OTHER		0
#define MR_POLICY_FIFO		1

/* mr_dir.flags */
#define MR_F_RT_FALLBACK	(1u << 0)	/* RT refused, ran SCHED_OTHER */
#define MR_F_MLOCKED		(1u << 1)	/* mlockall succeeded */
#define MR_F_DMA_LATENCY	(1u << 2)	/* /dev/cpu_dma_latency held at 0 */

struct mr_dir {
	u64 magic;			/*   0 */
	u32 version;			/*   8 */
	u32 ring_count;			/*  12 */
	u64 ring_stride;		/*  16 */
	u64 first_ring;			/*  24 */
	u32 state;			/*  32: enum ring_state */
	u32 error;			/*  36 */
	u32 policy;			/*  40 */
	u32 priority;			/*  44 */
	u32 flags;			/*  48 */
	u32 reserved;			/*  52 */
	u64 period_ns;			/*  56 */
	u64 start_ns;			/*  64 */
	u8 pad0[128 - 72];
	char message[MR_MESSAGE_LEN];	/* 128 */
	u8 pad1[512 - 384];
	u32 cpu[MR_MAX_RINGS];		/* 512 */
};

_Static_assert(__builtin_offsetof(struct mr_dir, state) == 32, "dir");
_Static_assert(__builtin_offsetof(struct mr_dir, start_ns) == 64, "dir");
_Static_assert(__builtin_offsetof(struct mr_dir, message) == 128, "dir");
_Static_assert(__builtin_offsetof(struct mr_dir, cpu) == 512, "dir");
_Static_assert(sizeof(struct mr_dir) <= MR_DIR_SIZE, "dir size");

/* bytes between two ring bases for @capacity records (page multiple) */
#define MR_STRIDE(capacity)	((RING_BYTES(capacity) + 4095) & ~4095ULL)
/* bytes the whole area takes for @n rings of @capacity records */
#define MR_BYTES(n, capacity)	(MR_DIR_SIZE + (u64)(n) * MR_STRIDE(capacity))

#endif /* IRQLAB_MULTIRING_H */
