// SPDX-License-Identifier: Apache-2.0
/*
 * tick.c - TSC rate and LAPIC-timer/TSC ratio
 *
 * TSC rate, first source that gives a plausible non-zero value:
 *   1. CPUID 0x15 with a crystal frequency (ECX != 0): ECX * EBX / EAX
 *   2. hypervisor leaf 0x40000010 (EAX = TSC kHz), when the hypervisor
 *      range reaches it
 *   3. under Xen, its leaf 0x40000x03 sub-leaf 0 ECX (guest TSC kHz)
 *   4. CPUID 0x16 EAX (nominal base MHz)
 *   5. PIT channel 2 calibration: three ~20 ms windows, median, rounded to
 *      1 kHz (the window's own resolution is ~1 PIT clock = 0.84 us).
 * The hypervisor leaf is preferred over 0x16 because it reports the rate
 * the guest TSC actually runs at, while 0x16 is the host CPU's nominal MHz.
 *
 * LAPIC one-shot needs APIC ticks per TSC tick. Leaf 0x40000010 EBX (bus
 * kHz) gives it when present; otherwise the same PIT windows count APIC
 * ticks (TMCCT, divide 1) against TSC ticks across all windows, so the
 * ratio does not depend on the PIT's own accuracy. Without a PIT (a Xen
 * PVH domain has none) and with a known TSC rate, the APIC count-down is
 * timed against the TSC alone, over APIC_WINDOWS windows of APIC_WINDOW_MS,
 * and the largest ratio is kept: Xen's default timer mode for HVM/PVH
 * guests (delay_for_missed_ticks, xen/arch/x86/hvm/vpt.c pt_freeze_time)
 * stops a descheduled vCPU's platform time, which the vLAPIC counts down
 * in, while its TSC runs on. Issue 27's domain-create cell (dom0 sharing
 * the pCPU; entries up to 1.75 ms before 10 ms deadlines) fits one 20 ms
 * window taken while the domain was descheduled: a ratio ~17 % low, every
 * one-shot early by that share. A starved window can only lower the
 * ratio; the largest is the least disturbed, and errs late, never early. Each TMCCT read is bracketed by TSC
 * reads, the narrowest of APIC_SAMPLE_TRIES kept (a read that exits to the
 * hypervisor and is descheduled there would move the midpoint).
 */
#include "hw.h"
#include "x86.h"
#include "../lib/ring.h"
#include "../lib/string.h"
#include "../lib/printf.h"

#define PIT_HZ			1193182ULL
#define PIT_CH2			0x42
#define PIT_CMD			0x43
#define PIT_PORT_B		0x61
#define PIT_GATE2		0x01
#define PIT_SPEAKER		0x02
#define PIT_OUT2		0x20
#define PIT_WINDOW_MS		20
#define PIT_WINDOWS		3
#define PIT_MAX_POLLS		50000000u
#define APIC_WINDOW_MS		20
#define APIC_WINDOWS		5
#define APIC_SAMPLE_TRIES	4

#define TICK_HZ_MIN		1000000ULL		/* 1 MHz */
#define TICK_HZ_MAX		100000000000ULL		/* 100 GHz */

struct pit_window {
	u64 tsc_delta;
	u64 tsc_hz;
};

struct apic_ratio {
	u64 apic_delta;
	u64 tsc_delta;
};

/* apic_sample - TMCCT and the TSC midpoint around its (MMIO) read */
static u32 apic_sample(u64 *tsc)
{
	u64 a = rdtsc();
	u32 cnt = lapic_read(APIC_TMCCT);
	u64 b = rdtsc();

	*tsc = a + (b - a) / 2;
	return cnt;
}

/* apic_sample_tight - apic_sample() with the narrowest TSC bracket of a few */
static u32 apic_sample_tight(u64 *tsc)
{
	u64 best = ~0ULL, a, b;
	u32 cnt, out = 0;
	int i;

	for (i = 0; i < APIC_SAMPLE_TRIES; i++) {
		a = rdtsc();
		cnt = lapic_read(APIC_TMCCT);
		b = rdtsc();
		if (b - a < best) {
			best = b - a;
			out = cnt;
			*tsc = a + (b - a) / 2;
		}
	}
	return out;
}

/* plausible_hz - true if @hz is a believable counter rate */
static bool plausible_hz(u64 hz)
{
	return hz >= TICK_HZ_MIN && hz <= TICK_HZ_MAX;
}

/* tsc_hz_cpuid - rate from CPUID 0x15/0x40000010/Xen/0x16; 0 or -ENODEV */
static int tsc_hz_cpuid(u64 *hz, u32 *method, u64 *apic_hz)
{
	u32 a, b, c, d, max, hv_max;

	*apic_hz = 0;
	cpuid(0, 0, &max, &b, &c, &d);
	if (max >= 0x15) {
		cpuid(0x15, 0, &a, &b, &c, &d);
		if (a && b && c && plausible_hz(muldiv64(c, b, a))) {
			*hz = muldiv64(c, b, a);
			*method = TICK_CPUID_15;
			return 0;
		}
	}
	cpuid(1, 0, &a, &b, &c, &d);
	if (c & (1u << 31)) {		/* hypervisor present */
		cpuid(0x40000000, 0, &hv_max, &b, &c, &d);
		if (hv_max >= 0x40000010 && hv_max < 0x40010000) {
			cpuid(0x40000010, 0, &a, &b, &c, &d);
			if (plausible_hz((u64)a * 1000)) {
				*hz = (u64)a * 1000;
				*method = TICK_HV_40000010;
				*apic_hz = (u64)b * 1000;
				return 0;
			}
		}
	}
	hv_max = xen_cpuid_base();
	if (hv_max) {
		cpuid(hv_max + 3, 0, &a, &b, &c, &d);
		if (plausible_hz((u64)c * 1000)) {
			*hz = (u64)c * 1000;
			*method = TICK_XEN_LEAF;
			return 0;
		}
	}
	if (max >= 0x16) {
		cpuid(0x16, 0, &a, &b, &c, &d);
		a &= 0xffff;
		if (plausible_hz((u64)a * 1000000)) {
			*hz = (u64)a * 1000000;
			*method = TICK_CPUID_16;
			return 0;
		}
	}
	return -ENODEV;
}

/*
 * pit_measure - one PIT channel 2 mode-0 window of @latch PIT clocks
 *
 * Counting starts with the write of the count's high byte: its time is
 * taken as the midpoint of TSC reads around that outb. The end is the TSC
 * read just before the first poll that sees OUT2 high (the edge lies between
 * the last "low" poll and that one). Under emulation each port access can
 * take microseconds, so both refinements matter.
 */
static int pit_measure(u32 latch, struct pit_window *w)
{
	u32 polls = 0;
	u64 t0a, t0b, t0, tp;
	u8 portb = inb(PIT_PORT_B), v;

	outb(PIT_PORT_B, (portb & ~PIT_SPEAKER) | PIT_GATE2);
	outb(PIT_CMD, 0xb0);		/* ch2, lobyte/hibyte, mode 0, binary */
	outb(PIT_CH2, latch & 0xff);
	t0a = rdtsc();
	outb(PIT_CH2, latch >> 8);	/* counting starts now */
	t0b = rdtsc();
	t0 = t0a + (t0b - t0a) / 2;
	do {
		tp = rdtsc();
		v = inb(PIT_PORT_B);
		if (++polls > PIT_MAX_POLLS)
			return -EIO;
	} while (!(v & PIT_OUT2));
	outb(PIT_PORT_B, portb & ~(PIT_SPEAKER | PIT_GATE2));
	if (polls < 3 || tp <= t0)
		return -EIO;		/* OUT2 stuck high: no PIT */
	w->tsc_delta = tp - t0;
	w->tsc_hz = muldiv64(w->tsc_delta, PIT_HZ, latch);
	return 0;
}

/*
 * pit_calibrate - median of PIT_WINDOWS windows (by TSC rate) into @out
 *
 * A free-running, masked APIC count-down is sampled before the first and
 * after the last window, giving the APIC/TSC ratio over ~60 ms in @ratio.
 */
static int pit_calibrate(struct pit_window *out, struct apic_ratio *ratio)
{
	struct pit_window w[PIT_WINDOWS], t;
	u32 latch = PIT_HZ * PIT_WINDOW_MS / 1000, a0, a1;
	u64 s0, s1;
	int i, j, ret;

	lapic_write(APIC_LVT_TIMER, APIC_LVT_MASKED | TIMER_VECTOR);
	lapic_write(APIC_TMICT, 0xffffffff);
	a0 = apic_sample(&s0);
	for (i = 0; i < PIT_WINDOWS; i++) {
		ret = pit_measure(latch, &w[i]);
		if (ret)
			goto out;
	}
	a1 = apic_sample(&s1);
	ratio->apic_delta = a0 - a1;
	ratio->tsc_delta = s1 - s0;
	for (i = 1; i < PIT_WINDOWS; i++)
		for (j = i; j > 0 && w[j].tsc_hz < w[j - 1].tsc_hz; j--) {
			t = w[j];
			w[j] = w[j - 1];
			w[j - 1] = t;
		}
	*out = w[PIT_WINDOWS / 2];
	ret = plausible_hz(out->tsc_hz) ? 0 : -EIO;
out:
	lapic_write(APIC_TMICT, 0);
	return ret;
}

/*
 * tsc_apic_ratio - time a masked APIC count-down against @tsc_hz alone:
 * the largest APIC/TSC ratio of APIC_WINDOWS windows (see the top comment)
 */
static int tsc_apic_ratio(u64 tsc_hz, struct apic_ratio *ratio)
{
	u64 s0 = 0, s1 = 0, end;
	u32 a0, a1;
	int i, ret = -EIO;

	ratio->apic_delta = 0;
	ratio->tsc_delta = 1;
	lapic_write(APIC_LVT_TIMER, APIC_LVT_MASKED | TIMER_VECTOR);
	for (i = 0; i < APIC_WINDOWS; i++) {
		lapic_write(APIC_TMICT, 0xffffffff);
		a0 = apic_sample_tight(&s0);
		end = s0 + tsc_hz * APIC_WINDOW_MS / 1000;
		while (rdtsc() < end)
			cpu_relax();
		a1 = apic_sample_tight(&s1);
		if (a0 <= a1 || s1 <= s0)
			continue;	/* wrapped or stuck: not a window */
		/* (a0 - a1) / (s1 - s0) > apic_delta / tsc_delta, in 128 bits */
		if ((unsigned __int128)(a0 - a1) * ratio->tsc_delta >
		    (unsigned __int128)ratio->apic_delta * (s1 - s0)) {
			ratio->apic_delta = a0 - a1;
			ratio->tsc_delta = s1 - s0;
		}
		ret = 0;
	}
	lapic_write(APIC_TMICT, 0);
	return ret;
}

/* tick_init - fill @ti; @need_apic also asks for the APIC/TSC ratio */
int tick_init(struct tick_info *ti, bool need_apic)
{
	struct pit_window w = { 0 };
	struct apic_ratio r;
	u64 hv_apic_hz = 0;
	int ret;

	memset(ti, 0, sizeof(*ti));
	ret = tsc_hz_cpuid(&ti->tick_hz, &ti->tick_method, &hv_apic_hz);
	if (!ret && !need_apic)
		return 0;
	if (!ret && need_apic && plausible_hz(hv_apic_hz)) {
		ti->apic_hz = hv_apic_hz;
		ti->apic_per_tick_q32 = muldiv64(hv_apic_hz, 1ULL << 32,
						 ti->tick_hz);
		return 0;
	}
	ret = pit_calibrate(&w, &r);
	if (ret && ti->tick_hz && need_apic)
		ret = tsc_apic_ratio(ti->tick_hz, &r);	/* no PIT */
	if (ret)
		return ret;
	if (!ti->tick_hz) {
		ti->tick_hz = (w.tsc_hz + 500) / 1000 * 1000;
		ti->tick_method = TICK_PIT;
	}
	if (need_apic) {
		if (!r.apic_delta || !r.tsc_delta)
			return -EIO;
		ti->apic_per_tick_q32 = muldiv64(r.apic_delta, 1ULL << 32,
						 r.tsc_delta);
		ti->apic_hz = muldiv64(r.apic_delta, ti->tick_hz, r.tsc_delta);
	}
	return 0;
}
