// SPDX-License-Identifier: Apache-2.0
/* ring.c - guest->host sample ring writer (docs/formats.md section 2) */
#include <stdarg.h>
#include "ring.h"
#include "string.h"
#include "printf.h"

/* ring_init - clear the header and publish an empty ring in state BOOTING */
int ring_init(struct ring *r, void *base, u32 capacity, u32 arch,
	      const char *build_id, u32 cpu)
{
	struct ring_hdr *h = base;

	if (!capacity || (capacity & (capacity - 1)))
		return -EINVAL;
	r->hdr = h;
	r->recs = (struct ring_rec *)((u8 *)base + RING_HDR_SIZE);
	r->mask = capacity - 1;
	r->head = 0;
	r->cpu = cpu;

	/* hide the old magic first so a reader never mixes two runs */
	__atomic_store_n(&h->magic, 0, __ATOMIC_RELEASE);
	memset((u8 *)base + sizeof(h->magic), 0,
	       RING_HDR_SIZE - sizeof(h->magic));
	h->version = RING_VERSION;
	h->record_size = RING_RECORD_SIZE;
	h->capacity = capacity;
	h->arch = arch;
	h->state = RING_BOOTING;
	strlcpy(h->build_id, build_id, sizeof(h->build_id));
	__atomic_store_n(&h->magic, RING_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

/* ring_set_timing - record the tick source and timer mode */
int ring_set_timing(struct ring *r, u64 tick_hz, u32 tick_method,
		    u32 timer_mode, u64 period_tick, u64 apic_hz)
{
	struct ring_hdr *h = r->hdr;

	if (!h)
		return -EINVAL;
	WRITE_ONCE(h->tick_hz, tick_hz);
	WRITE_ONCE(h->tick_method, tick_method);
	WRITE_ONCE(h->timer_mode, timer_mode);
	WRITE_ONCE(h->period_tick, period_tick);
	WRITE_ONCE(h->apic_hz, apic_hz);
	return 0;
}

/* ring_set_config - echo the idle mode and self-check parameters */
int ring_set_config(struct ring *r, u32 idle, u32 inject_every,
		    u64 inject_irqoff_tick)
{
	struct ring_hdr *h = r->hdr;

	if (!h)
		return -EINVAL;
	WRITE_ONCE(h->idle, idle);
	WRITE_ONCE(h->inject_every, inject_every);
	WRITE_ONCE(h->inject_irqoff_tick, inject_irqoff_tick);
	return 0;
}

/* ring_set_ref_counter - record the reference counter and its offset */
int ring_set_ref_counter(struct ring *r, u32 ref_counter, s64 offset_tick,
			 u32 err_tick)
{
	struct ring_hdr *h = r->hdr;

	if (!h || ref_counter > REF_COUNTER_ARM64_CNTPCT)
		return -EINVAL;
	WRITE_ONCE(h->ref_offset_tick, offset_tick);
	WRITE_ONCE(h->ref_offset_err_tick, err_tick);
	WRITE_ONCE(h->ref_counter, ref_counter);
	return 0;
}

/* ring_set_state - publish @state (release: earlier header writes first) */
int ring_set_state(struct ring *r, u32 state)
{
	if (!r->hdr || state > RING_ERROR)
		return -EINVAL;
	__atomic_store_n(&r->hdr->state, state, __ATOMIC_RELEASE);
	return 0;
}

/* ring_set_error - store @error and a formatted message, then state ERROR */
int ring_set_error(struct ring *r, u32 error, const char *fmt, ...)
{
	struct ring_hdr *h = r->hdr;
	char msg[RING_MESSAGE_LEN];
	va_list ap;

	if (!h)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	memcpy(h->message, msg, sizeof(msg));
	WRITE_ONCE(h->error, error);
	return ring_set_state(r, RING_ERROR);
}

/* ring_add_overruns - add @n skipped periods to the header counter */
int ring_add_overruns(struct ring *r, u64 n)
{
	if (!r->hdr)
		return -EINVAL;
	WRITE_ONCE(r->hdr->overruns, r->hdr->overruns + n);
	return 0;
}
