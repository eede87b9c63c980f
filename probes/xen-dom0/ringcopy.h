/* SPDX-License-Identifier: MIT */
/*
 * ringcopy.h - copy a probe's sample ring (probes/guest/lib/ring.h) from a
 * guest's RAM into the host's view of it (an ivshmem BAR), without the guest
 * doing anything per sample. Used by ringfwd.c (a Xen dom0 mapping a domU's
 * ring) and probes/kvm-host/irqvmm.c (an arm64 KVM host's own VMM).
 *
 * Each step copies the new records first, then the header without its head,
 * then head: the host never sees a head ahead of the records behind it.
 * Records the probe overwrote before a step copied them show up on the host
 * as sequence gaps and are counted as lost there, as for any ring.
 */
#ifndef IRQLAB_RINGCOPY_H
#define IRQLAB_RINGCOPY_H

#include <stdint.h>
#include <string.h>

#define RINGCOPY_MAGIC		0x474E49524C515249ULL
#define RINGCOPY_HDR_SIZE	4096UL
#define RINGCOPY_OFF_RECSIZE	12
#define RINGCOPY_OFF_CAPACITY	16
#define RINGCOPY_OFF_STATE	48
#define RINGCOPY_OFF_HEAD	56
#define RINGCOPY_OFF_GATE	432	/* ring_hdr.start_gate: the one word written */

enum { RINGCOPY_RUNNING = 1, RINGCOPY_DONE = 2, RINGCOPY_ERROR = 3 };

struct ring_copy {
	uint32_t capacity, record_bytes;
	uint64_t bytes;			/* header and records */
	uint64_t copied;		/* records copied so far (head at the last step) */
};

/* ringcopy_rd64 - a 64-bit field of the guest's ring, read once */
static inline uint64_t ringcopy_rd64(const volatile uint8_t *b, size_t off)
{
	return *(const volatile uint64_t *)(b + off);
}

/* ringcopy_rd32 - a 32-bit field of the guest's ring, read once */
static inline uint32_t ringcopy_rd32(const volatile uint8_t *b, size_t off)
{
	return *(const volatile uint32_t *)(b + off);
}

/* ringcopy_ready - whether the probe has written its header at @src */
static inline int ringcopy_ready(const volatile uint8_t *src)
{
	return ringcopy_rd64(src, 0) == RINGCOPY_MAGIC;
}

/*
 * ringcopy_open_gate - let a probe booted with gate=1 start sampling (it waits
 * for this word before its first deadline: ring.h, start_gate)
 */
static inline void ringcopy_open_gate(volatile uint8_t *src)
{
	__atomic_store_n((volatile uint32_t *)(src + RINGCOPY_OFF_GATE), 1,
			 __ATOMIC_RELEASE);
}

/* ringcopy_init - the ring's geometry from its header at @src */
static inline void ringcopy_init(struct ring_copy *rc, const volatile uint8_t *src)
{
	rc->capacity = ringcopy_rd32(src, RINGCOPY_OFF_CAPACITY);
	rc->record_bytes = ringcopy_rd32(src, RINGCOPY_OFF_RECSIZE);
	rc->bytes = RINGCOPY_HDR_SIZE + (uint64_t)rc->capacity * rc->record_bytes;
	rc->copied = 0;
}

/* ringcopy_records - records [from, to) of @rc from @src into @dst */
static inline void ringcopy_records(const struct ring_copy *rc, uint8_t *dst,
				    const volatile uint8_t *src, uint64_t from, uint64_t to)
{
	uint64_t cap = rc->capacity, rsz = rc->record_bytes;

	if (to - from > cap)
		from = to - cap;	/* older ones are overwritten: the host counts them */
	while (from < to) {
		uint64_t slot = from % cap, n = cap - slot;

		if (n > to - from)
			n = to - from;
		memcpy(dst + RINGCOPY_HDR_SIZE + slot * rsz,
		       (const void *)(src + RINGCOPY_HDR_SIZE + slot * rsz), n * rsz);
		from += n;
	}
}

/*
 * ringcopy_step - copy what is new; the probe's state as read before head
 * (RINGCOPY_DONE or RINGCOPY_ERROR: nothing is left behind after this step)
 */
static inline int ringcopy_step(struct ring_copy *rc, uint8_t *dst,
				const volatile uint8_t *src)
{
	uint32_t state = ringcopy_rd32(src, RINGCOPY_OFF_STATE);
	uint64_t head = ringcopy_rd64(src, RINGCOPY_OFF_HEAD);

	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	ringcopy_records(rc, dst, src, rc->copied, head);
	memcpy(dst, (const void *)src, RINGCOPY_OFF_HEAD);
	memcpy(dst + RINGCOPY_OFF_HEAD + 8, (const void *)(src + RINGCOPY_OFF_HEAD + 8),
	       RINGCOPY_HDR_SIZE - RINGCOPY_OFF_HEAD - 8);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	*(volatile uint64_t *)(dst + RINGCOPY_OFF_HEAD) = head;
	rc->copied = head;
	return (int)state;
}

#endif /* IRQLAB_RINGCOPY_H */
