/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ring.h - guest->host sample ring, version 1 (docs/formats.md section 2)
 *
 * One writer (the probe), no locks. The host maps guest RAM and reads; it
 * never writes. Records are written first, then `head` with release order.
 */
#ifndef IRQLAB_RING_H
#define IRQLAB_RING_H

#include "types.h"

#define RING_MAGIC		0x474e49524c515249ULL	/* "IRQLRING" */
#define RING_VERSION		1
#define RING_HDR_SIZE		4096
#define RING_RECORD_SIZE	32
#define RING_BUILD_ID_LEN	64
#define RING_MESSAGE_LEN	256

enum ring_arch {
	RING_ARCH_X86_64	= 1,
	RING_ARCH_ARM64		= 2,
};

enum ring_tick_method {
	TICK_CPUID_15		= 1,
	TICK_CPUID_16		= 2,
	TICK_HV_40000010	= 3,
	TICK_PIT		= 4,
	TICK_CNTFRQ		= 5,
	/* 6: CLOCK_MONOTONIC, the native probe (probes/native) */
	TICK_XEN_LEAF		= 7,	/* Xen CPUID leaf 0x40000x03 ECX (kHz) */
};

enum ring_timer_mode {
	TIMER_TSC_DEADLINE	= 1,
	TIMER_LAPIC_ONESHOT	= 2,
	TIMER_ARM_VIRT		= 3,
	TIMER_ARM_PHYS		= 4,
};

enum ring_state {
	RING_BOOTING		= 0,
	RING_RUNNING		= 1,
	RING_DONE		= 2,
	RING_ERROR		= 3,
};

/*
 * ring_hdr.ref_counter: a second counter the probe read beside its own, one
 * that host-side traces stamp their records with, and the constant offset
 * between them (ref = probe counter + ref_offset_tick, within
 * +-ref_offset_err_tick). Xen on Arm lets a guest read the physical counter
 * (CNTHCTL_EL2.EL1PCTEN) and stamps xentrace records with it; the guest's
 * virtual counter is that counter minus the domain's CNTVOFF.
 */
enum ring_ref_counter {
	REF_COUNTER_NONE	= 0,
	REF_COUNTER_ARM64_CNTPCT = 1,
};

enum ring_idle {
	IDLE_HLT		= 1,	/* hlt (x86) / wfi (arm64) */
	IDLE_POLL		= 2,
};

/*
 * Error codes stored in ring_hdr.error when state == RING_ERROR
 * (positive errno numbers; ring_hdr.message has the detail):
 *   EINVAL (22)  bad boot parameter: unknown key, missing '=', bad number
 *   ENOSPC (28)  boot parameter word too long
 *   ERANGE (34)  parameter out of range (period too short/long, ...)
 *   ENODEV (19)  required hardware missing (no LAPIC, timer mode forced by
 *                `timer=` not available, no usable tick source)
 *   EIO     (5)  tick/timer calibration failed
 *   ENOMEM (12)  ring does not fit in guest RAM (not written: ring unusable)
 *   EFAULT (14)  unexpected CPU exception or interrupt vector
 */

/* record flags */
#define RING_F_INJECTED		(1u << 0)	/* injected irq-off delay */
#define RING_F_OVERRUN		(1u << 1)	/* period(s) skipped before */

struct ring_hdr {
	u64 magic;			/*   0 */
	u32 version;			/*   8 */
	u32 record_size;		/*  12 */
	u32 capacity;			/*  16 */
	u32 arch;			/*  20 */
	u64 tick_hz;			/*  24 */
	u32 tick_method;		/*  32 */
	u32 timer_mode;			/*  36 */
	u64 period_tick;		/*  40 */
	u32 state;			/*  48 */
	u32 error;			/*  52 */
	u64 head;			/*  56 */
	u64 overruns;			/*  64 */
	u64 apic_hz;			/*  72 */
	u32 idle;			/*  80 */
	u32 inject_every;		/*  84 */
	u64 inject_irqoff_tick;		/*  88 */
	char build_id[RING_BUILD_ID_LEN];	/*  96 */
	char message[RING_MESSAGE_LEN];	/* 160 */
	s64 ref_offset_tick;		/* 416: ref counter - probe counter */
	u32 ref_counter;		/* 424: enum ring_ref_counter */
	u32 ref_offset_err_tick;	/* 428: bound of ref_offset_tick */
	u32 start_gate;			/* 432: set by the forwarder, see below */
	u32 reserved;			/* 436 */
	u64 progress_tick;		/* 440: every record below it is written */
	u64 busy_start_tick;		/* 448: busy-loop probe: its first clock read */
	u64 noise_tick;			/* 456: busy-loop probe: sum of its gaps */
};

/*
 * progress_tick, busy_start_tick, noise_tick: written by the busy-loop probe
 * (probes/native/noise.c) only, 0 elsewhere. progress_tick is its last clock
 * read, stored (release) after every record whose deadline_tick lies below
 * it, so a reader that reads it before the records knows no later record
 * starts before it; noise_tick sums every gap recorded, lost records
 * included, and progress_tick - busy_start_tick is the time it measured.
 */

/*
 * start_gate - the one header word another writer sets: with the boot
 * parameter gate=1 the probe waits, before its first deadline, until the
 * forwarder that copies its ring out (probes/xen-dom0/ringfwd.c, in a dom0
 * that booted after a dom0less probe) writes a non-zero value here, so
 * that no sample is taken before the host can see it and its trace runs.
 */

struct ring_rec {
	u64 seq;
	u64 deadline_tick;
	u64 entry_tick;
	u32 flags;
	u32 cpu;
};

_Static_assert(__builtin_offsetof(struct ring_hdr, tick_hz) == 24, "hdr");
_Static_assert(__builtin_offsetof(struct ring_hdr, state) == 48, "hdr");
_Static_assert(__builtin_offsetof(struct ring_hdr, head) == 56, "hdr");
_Static_assert(__builtin_offsetof(struct ring_hdr, apic_hz) == 72, "hdr");
_Static_assert(__builtin_offsetof(struct ring_hdr, inject_irqoff_tick) == 88,
	       "hdr");
_Static_assert(__builtin_offsetof(struct ring_hdr, build_id) == 96, "hdr");
_Static_assert(__builtin_offsetof(struct ring_hdr, message) == 160, "hdr");
_Static_assert(__builtin_offsetof(struct ring_hdr, ref_offset_tick) == 416,
	       "hdr");
_Static_assert(__builtin_offsetof(struct ring_hdr, start_gate) == 432, "hdr");
_Static_assert(__builtin_offsetof(struct ring_hdr, progress_tick) == 440, "hdr");
_Static_assert(__builtin_offsetof(struct ring_hdr, noise_tick) == 456, "hdr");
_Static_assert(sizeof(struct ring_hdr) <= RING_HDR_SIZE, "hdr size");
_Static_assert(sizeof(struct ring_rec) == RING_RECORD_SIZE, "rec size");

struct ring {
	struct ring_hdr *hdr;
	struct ring_rec *recs;
	u64 head;		/* private copy of hdr->head */
	u32 mask;		/* capacity - 1 */
	u32 cpu;		/* written into every record */
};

/* bytes a ring of @capacity records occupies (header + records) */
#define RING_BYTES(capacity)	(RING_HDR_SIZE + (u64)(capacity) * RING_RECORD_SIZE)

int ring_init(struct ring *r, void *base, u32 capacity, u32 arch,
	      const char *build_id, u32 cpu);
int ring_set_timing(struct ring *r, u64 tick_hz, u32 tick_method,
		    u32 timer_mode, u64 period_tick, u64 apic_hz);
int ring_set_config(struct ring *r, u32 idle, u32 inject_every,
		    u64 inject_irqoff_tick);
int ring_set_ref_counter(struct ring *r, u32 ref_counter, s64 offset_tick,
			 u32 err_tick);
int ring_set_state(struct ring *r, u32 state);
int ring_set_error(struct ring *r, u32 error, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int ring_add_overruns(struct ring *r, u64 n);

/*
 * ring_push - append one sample; @seq must equal the number of records
 * written so far. Inline: it runs in the timer ISR.
 */
static inline int ring_push(struct ring *r, u64 seq, u64 deadline_tick,
			    u64 entry_tick, u32 flags)
{
	struct ring_rec *rec;

	if (seq != r->head)
		return -EINVAL;
	rec = &r->recs[seq & r->mask];
	WRITE_ONCE(rec->seq, seq);
	WRITE_ONCE(rec->deadline_tick, deadline_tick);
	WRITE_ONCE(rec->entry_tick, entry_tick);
	WRITE_ONCE(rec->flags, flags);
	WRITE_ONCE(rec->cpu, r->cpu);
	r->head = seq + 1;
	__atomic_store_n(&r->hdr->head, r->head, __ATOMIC_RELEASE);
	return 0;
}

#endif /* IRQLAB_RING_H */
