/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mring.h - writing the multi-ring shared-memory area (multiring.h,
 * docs/formats.md sections 2 and 6) from a Linux program
 *
 * The layers, as in probes/guest: the format is ../multiring.h and
 * probes/guest/lib/ring.h; each ring's header and records are written by
 * probes/guest/lib/ring.c (one ring writer for the guest and the host); this
 * file maps the area, writes the directory around the rings and reports a
 * failure into it.
 */
#ifndef IRQLAB_NATIVE_MRING_H
#define IRQLAB_NATIVE_MRING_H

#include "multiring.h"

#if defined(__x86_64__)
#define PROBE_ARCH		RING_ARCH_X86_64
#elif defined(__aarch64__)
#define PROBE_ARCH		RING_ARCH_ARM64
#else
#error "probes/native: unsupported architecture"
#endif

/* what a ring's header says about its samples, besides the ring itself */
struct mr_ring_cfg {
	u32 cpu;		/* written into every record */
	u32 timer_mode;		/* TIMER_CLOCK_NANOSLEEP, TIMER_UDP_ROUND_TRIP, ... */
	u32 idle;		/* IDLE_POLL for a busy loop; 0: IDLE_SLEEP */
	u64 period_ns;
	u64 inject_every;	/* the self-check, echoed into the header */
	u64 inject_delay_ns;
	const char *build_id;
};

int mr_map(const char *path, int fd, u64 offset_bytes, int nrings, u32 capacity,
	   void **area);
struct mr_dir *mr_dir_begin(void *area, int nrings, u32 capacity, u64 period_ns,
			    u32 priority);
int mr_ring_init(struct mr_dir *dir, int i, u32 capacity, const struct mr_ring_cfg *cfg,
		 struct ring *r);
void mr_dir_publish(struct mr_dir *dir);
void mr_fail_into(struct mr_dir *dir, struct ring *r);
int mr_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* IRQLAB_NATIVE_MRING_H */
