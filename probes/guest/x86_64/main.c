// SPDX-License-Identifier: MIT
/*
 * main.c - irqlab x86-64 guest probe: periodic LAPIC timer, latency samples
 *
 * The schedule is kept in TSC ticks: deadline[n+1] = deadline[n] + period
 * (no drift). The ISR's first act reads the TSC; the sample (deadline,
 * entry) goes to the ring at 0x400000 (docs/formats.md section 2).
 *
 * Self-check injection (inject_every = N > 0 and inject_irqoff_ns = D > 0):
 *   The sample with seq k is injected when (k + 1) % N == 0, i.e. the Nth,
 *   2Nth, ... sample (1-based). Once sample k-1 is recorded, the main loop
 *   polls with interrupts enabled until TSC >= deadline_k - margin
 *   (margin = period/4), disables interrupts, verifies the ISR for k has not
 *   run yet (otherwise the injection is skipped and the record is not
 *   flagged), spins until TSC >= deadline_k + D (D in ticks, header field
 *   inject_irqoff_tick), then enables interrupts. The record for k carries
 *   flag bit 0 and, because the interrupt cannot be taken before the spin
 *   ends, entry_tick - deadline_tick > inject_irqoff_tick: D is a strict
 *   lower bound of an injected sample's latency; the excess over D is the
 *   normal delivery latency of an already pending interrupt. Interrupts are
 *   off for margin + D in total. With idle=hlt the wait before the spin
 *   polls instead of halting (there is no second timer to wake us).
 *
 * One-shot mode: TMICT counts APIC ticks, so at arm time the remaining TSC
 * ticks are converted with the calibrated ratio (rounded up, so the timer
 * does not fire early because of rounding). A remaining time beyond
 * 2^32 - 1 APIC ticks is armed in steps; an early step is not a sample.
 * Small negative latencies in one-shot mode are ratio error, not bugs.
 *
 * Sinks: the ring is always written. With sink=console the main loop also
 * copies it to the console as framed lines (lib/frame.c, docs/formats.md
 * section 7) in batches of CONSOLE_BATCH samples, between interrupts and
 * with interrupts enabled, never from the ISR (whose cost is unchanged):
 * COM1 under QEMU, HYPERVISOR_console_io under Xen (console.c), where the
 * host cannot map guest RAM.
 */
#include "hw.h"
#include "x86.h"
#include "build_id.h"
#include "../lib/ring.h"
#include "../lib/string.h"
#include "../lib/printf.h"
#include "../lib/cmdline.h"
#include "../lib/frame.h"

#define RING_BASE		0x400000UL
#define RING_CAPACITY		65536u		/* 2 MiB of records */

#define DEBUG_EXIT_PORT		0xf4
#define EXIT_DONE		0x10	/* QEMU exit status (0x10 << 1) | 1 = 33 */
#define EXIT_ERROR		0x11	/* QEMU exit status (0x11 << 1) | 1 = 35 */

#define PERIOD_NS_MIN		1000UL
#define PERIOD_NS_MAX		(60 * NSEC_PER_SEC)
#define IRQOFF_NS_MAX		(10 * NSEC_PER_SEC)

#define CONSOLE_BATCH		16	/* samples per console flush */

#define HVM_START_MAGIC		0x336ec578u
#define E820_RAM		1

enum timer_req { TIMER_REQ_AUTO, TIMER_REQ_DEADLINE, TIMER_REQ_ONESHOT };
enum sink { SINK_RING, SINK_CONSOLE };

struct hvm_start_info {
	u32 magic;
	u32 version;
	u32 flags;
	u32 nr_modules;
	u64 modlist_paddr;
	u64 cmdline_paddr;
	u64 rsdp_paddr;
	u64 memmap_paddr;	/* version >= 1 */
	u32 memmap_entries;
	u32 reserved;
};

struct hvm_memmap_entry {
	u64 addr;
	u64 size;
	u32 type;
	u32 reserved;
};

struct probe_cfg {
	u64 period_ns;
	u32 idle;
	u64 inject_irqoff_ns;
	u64 inject_every;
	u64 samples;
	enum timer_req timer;
	enum sink sink;
};

/* state shared between the main loop and the ISR */
struct probe_state {
	u64 period_tick;
	u64 irqoff_tick;
	u64 inject_margin_tick;
	u64 inject_every;
	u64 samples;
	u32 timer_mode;
	u64 apic_per_tick_q32;
	volatile u64 deadline_tick;	/* deadline of sample `seq` */
	volatile u64 seq;		/* next sample number */
	volatile u32 pending_flags;	/* flags for record `seq` */
	volatile bool done;
	bool oneshot_partial;		/* armed less than the full remainder */
	u64 injected_seq;		/* last seq handled by the injector */
	u64 injections, injections_missed;
	/* end-of-run summary (serial only) */
	s64 lat_min, lat_max, lat_sum;
	u64 lat_n;
	s64 inj_lat_min;
};

static struct ring ring;
static bool ring_ready;
static struct probe_state P;
static char cmdline_buf[512];
static enum sink sink = SINK_RING;
static struct frame_out fout = { .write = console_write };
static bool header_sent;
static u64 console_next;		/* next seq to copy to the console */

/* exit_qemu - isa-debug-exit with @code; halts if the device is absent */
static __noreturn void exit_qemu(u32 code)
{
	outl(DEBUG_EXIT_PORT, code);
	printk("irqlab-probe: isa-debug-exit absent, halting\n");
	for (;;)
		__asm__ __volatile__("cli; hlt");
}

/* console_sink_state - header (once) and state frames for sink=console */
static void console_sink_state(void)
{
	if (sink != SINK_CONSOLE || !ring_ready)
		return;
	if (!header_sent) {
		frame_header(&fout, &ring);
		header_sent = true;
	}
	frame_state(&fout, &ring);
}

/* console_sink_flush - copy ring records to the console; @all: no batching */
static void console_sink_flush(bool all)
{
	u64 head;

	if (sink != SINK_CONSOLE || !header_sent)
		return;
	for (;;) {
		head = READ_ONCE(ring.hdr->head);
		if (head - console_next > RING_CAPACITY)
			console_next = head - RING_CAPACITY;	/* lapped: a gap */
		if (head == console_next ||
		    (!all && head - console_next < CONSOLE_BATCH))
			return;
		frame_samples(&fout, &ring, &console_next, head);
	}
}

/* fatal - record @err in the ring (and console), print it, exit QEMU */
static __noreturn __attribute__((format(printf, 2, 3)))
void fatal(int err, const char *fmt, ...)
{
	char msg[RING_MESSAGE_LEN];
	va_list ap;

	irq_disable();
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (err < 0)
		err = -err;
	if (ring_ready) {
		ring_set_error(&ring, (u32)err, "%s", msg);
		console_sink_flush(true);
		console_sink_state();
	}
	printk("irqlab-probe: error %d: %s\n", err, msg);
	exit_qemu(EXIT_ERROR);
}

/* fault_handler - called by isr.S for any unexpected vector */
__noreturn void fault_handler(struct fault_frame *f);
__noreturn void fault_handler(struct fault_frame *f)
{
	fatal(EFAULT, "unexpected vector %lu err 0x%lx rip 0x%lx rsp 0x%lx cr2 0x%lx",
	      f->vector, f->error_code, f->rip, f->rsp, read_cr2());
}

/* timer_arm - program the LAPIC timer for @deadline_tsc */
static void timer_arm(u64 deadline_tsc)
{
	u64 now, remaining, apic;

	if (P.timer_mode == TIMER_TSC_DEADLINE) {
		wrmsr(MSR_IA32_TSC_DEADLINE, deadline_tsc);
		return;
	}
	now = rdtsc();
	remaining = deadline_tsc > now ? deadline_tsc - now : 0;
	apic = (u64)(((unsigned __int128)remaining * P.apic_per_tick_q32 +
		      0xffffffffu) >> 32);
	P.oneshot_partial = apic > 0xffffffffULL;
	if (P.oneshot_partial)
		apic = 0xffffffffULL;
	if (!apic)
		apic = 1;
	lapic_write(APIC_TMICT, (u32)apic);
}

/* timer_isr - C part of the timer interrupt; @entry_tsc read at entry */
void timer_isr(u64 entry_tsc);
void timer_isr(u64 entry_tsc)
{
	u64 deadline = P.deadline_tick, seq = P.seq, next, now, skip;
	u32 flags = P.pending_flags;
	s64 lat;

	if (P.oneshot_partial && entry_tsc < deadline) {
		lapic_eoi();
		timer_arm(deadline);	/* long period: next step */
		return;
	}
	P.pending_flags = 0;
	ring_push(&ring, seq, deadline, entry_tsc, flags);
	P.seq = seq + 1;
	lapic_eoi();

	lat = (s64)(entry_tsc - deadline);
	if (flags & RING_F_INJECTED) {
		if (lat < P.inj_lat_min)
			P.inj_lat_min = lat;
	} else {
		if (lat < P.lat_min)
			P.lat_min = lat;
		if (lat > P.lat_max)
			P.lat_max = lat;
		P.lat_sum += lat;
		P.lat_n++;
	}

	if (P.samples && seq + 1 >= P.samples) {
		ring_set_state(&ring, RING_DONE);
		P.done = true;
		return;
	}
	next = deadline + P.period_tick;
	now = rdtsc();
	if (next <= now) {
		skip = (now - next) / P.period_tick + 1;
		next += skip * P.period_tick;
		ring_add_overruns(&ring, skip);
		P.pending_flags = RING_F_OVERRUN;
	}
	P.deadline_tick = next;
	timer_arm(next);
}

/* inject_due - true if the next sample is an injection target */
static bool inject_due(void)
{
	u64 seq = P.seq;

	return P.irqoff_tick && P.inject_every &&
	       (seq + 1) % P.inject_every == 0 && P.injected_seq != seq;
}

/* inject_irqoff - mask interrupts across deadline `seq` (see file header) */
static void inject_irqoff(void)
{
	u64 k = P.seq, end;

	P.injected_seq = k;
	for (;;) {
		irq_disable();
		if (P.seq != k || P.done) {
			P.injections_missed++;
			irq_enable();
			return;
		}
		if (rdtsc() + P.inject_margin_tick >= P.deadline_tick)
			break;
		irq_enable();
		cpu_relax();
	}
	P.pending_flags |= RING_F_INJECTED;
	end = P.deadline_tick + P.irqoff_tick;
	while (rdtsc() < end)
		cpu_relax();
	P.injections++;
	irq_enable();
}

/* ns_to_tick - convert @ns to ticks at @hz */
static u64 ns_to_tick(u64 ns, u64 hz)
{
	return muldiv64(ns, hz, NSEC_PER_SEC);
}

/* tick_to_ns - convert signed @tick to ns at @hz */
static s64 tick_to_ns(s64 tick, u64 hz)
{
	if (tick < 0)
		return -(s64)muldiv64((u64)-tick, NSEC_PER_SEC, hz);
	return (s64)muldiv64((u64)tick, NSEC_PER_SEC, hz);
}

/* finish - drain the console sink, print the summary, isa-debug-exit */
static __noreturn void finish(u64 tick_hz)
{
	irq_disable();
	console_sink_flush(true);
	console_sink_state();
	printk("irqlab-probe: done samples=%lu overruns=%lu injected=%lu missed=%lu\n",
	       ring.head, ring.hdr->overruns, P.injections, P.injections_missed);
	if (P.lat_n)
		printk("irqlab-probe: latency ns min=%ld mean=%ld max=%ld (non-injected)\n",
		       tick_to_ns(P.lat_min, tick_hz),
		       tick_to_ns(P.lat_sum / (s64)P.lat_n, tick_hz),
		       tick_to_ns(P.lat_max, tick_hz));
	if (P.injections)
		printk("irqlab-probe: injected min latency ns=%ld (bound %lu)\n",
		       tick_to_ns(P.inj_lat_min, tick_hz),
		       muldiv64(P.irqoff_tick, NSEC_PER_SEC, tick_hz));
	exit_qemu(EXIT_DONE);
}

/* parse_cmdline - fill @cfg from @line; 0 or -EINVAL/-ENOSPC/-ERANGE */
static int parse_cmdline(const char *line, struct probe_cfg *cfg)
{
	struct cmdline_word w;
	const char *pos = line;
	int ret;

	while ((ret = cmdline_next(&pos, &w)) != 0) {
		u64 *num = NULL;

		if (ret < 0)
			fatal(ret, "boot parameter too long near '%s'", w.key);
		if (!w.has_value)
			fatal(EINVAL, "boot parameter '%s' has no '=value'", w.key);
		if (!strcmp(w.key, "period_ns"))
			num = &cfg->period_ns;
		else if (!strcmp(w.key, "inject_irqoff_ns"))
			num = &cfg->inject_irqoff_ns;
		else if (!strcmp(w.key, "inject_every"))
			num = &cfg->inject_every;
		else if (!strcmp(w.key, "samples"))
			num = &cfg->samples;
		else if (!strcmp(w.key, "idle")) {
			if (!strcmp(w.val, "hlt"))
				cfg->idle = IDLE_HLT;
			else if (!strcmp(w.val, "poll"))
				cfg->idle = IDLE_POLL;
			else
				fatal(EINVAL, "idle=%s: expected hlt or poll", w.val);
		} else if (!strcmp(w.key, "timer")) {
			if (!strcmp(w.val, "auto"))
				cfg->timer = TIMER_REQ_AUTO;
			else if (!strcmp(w.val, "deadline"))
				cfg->timer = TIMER_REQ_DEADLINE;
			else if (!strcmp(w.val, "oneshot"))
				cfg->timer = TIMER_REQ_ONESHOT;
			else
				fatal(EINVAL, "timer=%s: expected auto, deadline or oneshot",
				      w.val);
		} else if (!strcmp(w.key, "sink")) {
			if (!strcmp(w.val, "ring"))
				cfg->sink = SINK_RING;
			else if (!strcmp(w.val, "console"))
				cfg->sink = SINK_CONSOLE;
			else
				fatal(EINVAL, "sink=%s: expected ring or console", w.val);
		} else {
			fatal(EINVAL, "unknown boot parameter '%s'", w.key);
		}
		if (num) {
			ret = parse_u64(w.val, num);
			if (ret)
				fatal(ret, "%s=%s: not a number", w.key, w.val);
		}
	}
	if (cfg->period_ns < PERIOD_NS_MIN || cfg->period_ns > PERIOD_NS_MAX)
		fatal(ERANGE, "period_ns=%lu outside [%lu, %lu]", cfg->period_ns,
		      PERIOD_NS_MIN, PERIOD_NS_MAX);
	if (cfg->inject_irqoff_ns > IRQOFF_NS_MAX)
		fatal(ERANGE, "inject_irqoff_ns=%lu above %lu",
		      cfg->inject_irqoff_ns, IRQOFF_NS_MAX);
	if (cfg->inject_every > 0xffffffffULL)
		fatal(ERANGE, "inject_every=%lu does not fit 32 bits",
		      cfg->inject_every);
	return 0;
}

/* ram_covers - true if the PVH memory map has RAM over [@lo, @hi) */
static bool ram_covers(const struct hvm_start_info *si, u64 lo, u64 hi)
{
	const struct hvm_memmap_entry *e;
	u32 i;

	if (si->version < 1 || !si->memmap_paddr || !si->memmap_entries)
		return true;	/* no map given: assume the runner's 64 MiB */
	e = (const struct hvm_memmap_entry *)(uintptr_t)si->memmap_paddr;
	for (i = 0; i < si->memmap_entries; i++)
		if (e[i].type == E820_RAM && e[i].addr <= lo &&
		    e[i].addr + e[i].size >= hi)
			return true;
	return false;
}

/* boot_info - validate hvm_start_info at @si_pa, copy the command line */
static const struct hvm_start_info *boot_info(u64 si_pa)
{
	const struct hvm_start_info *si =
		(const struct hvm_start_info *)(uintptr_t)si_pa;

	if (!si_pa || si->magic != HVM_START_MAGIC)
		return NULL;
	if (si->cmdline_paddr)
		strlcpy(cmdline_buf, (const char *)(uintptr_t)si->cmdline_paddr,
			sizeof(cmdline_buf));
	return si;
}

static const char *const tick_names[] = {
	"?", "cpuid15", "cpuid16", "hv40000010", "pit", "cntfrq", "?", "xen-leaf",
};
static const char *const timer_names[] = { "?", "tsc-deadline", "oneshot" };

/* probe_main - C entry from entry.S with the hvm_start_info address */
void probe_main(u32 start_info_pa);
void probe_main(u32 start_info_pa)
{
	struct probe_cfg cfg = {
		.period_ns = 1000000, .idle = IDLE_HLT, .timer = TIMER_REQ_AUTO,
	};
	const struct hvm_start_info *si;
	struct tick_info ti;
	u32 a, b, c, d, cpu;
	int ret;

	console_init();
	printf_set_console(console_putc);
	cpu_tables_init();
	printk("irqlab-probe %s console=%s\n", IRQLAB_BUILD_ID, console_name());

	si = boot_info(start_info_pa);
	if (si && !ram_covers(si, RING_BASE, RING_BASE + RING_BYTES(RING_CAPACITY)))
		fatal(ENOMEM, "guest RAM does not cover the ring 0x%lx..0x%lx",
		      RING_BASE, RING_BASE + RING_BYTES(RING_CAPACITY));
	cpuid(1, 0, &a, &b, &c, &d);
	cpu = b >> 24;		/* initial APIC ID */
	ring_init(&ring, (void *)RING_BASE, RING_CAPACITY, RING_ARCH_X86_64,
		  IRQLAB_BUILD_ID, cpu);
	ring_ready = true;
	if (!si)
		fatal(EINVAL, "no PVH hvm_start_info (magic) at 0x%x", start_info_pa);
	printk("irqlab-probe: cmdline \"%s\"\n", cmdline_buf);
	parse_cmdline(cmdline_buf, &cfg);
	sink = cfg.sink;

	ret = lapic_init();
	if (ret)
		fatal(ret, "no usable local APIC");
	pic_mask_all();
	switch (cfg.timer) {
	case TIMER_REQ_DEADLINE:
		if (!lapic_has_tsc_deadline())
			fatal(ENODEV, "timer=deadline but CPUID.1:ECX.TSC_DEADLINE is 0");
		P.timer_mode = TIMER_TSC_DEADLINE;
		break;
	case TIMER_REQ_ONESHOT:
		P.timer_mode = TIMER_LAPIC_ONESHOT;
		break;
	default:
		P.timer_mode = lapic_has_tsc_deadline() ? TIMER_TSC_DEADLINE :
							  TIMER_LAPIC_ONESHOT;
		break;
	}

	ret = tick_init(&ti, P.timer_mode == TIMER_LAPIC_ONESHOT);
	if (ret)
		fatal(ret, "TSC/APIC timer calibration failed");

	P.period_tick = ns_to_tick(cfg.period_ns, ti.tick_hz);
	P.irqoff_tick = cfg.inject_every ? ns_to_tick(cfg.inject_irqoff_ns, ti.tick_hz) : 0;
	P.inject_margin_tick = P.period_tick / 4 ? P.period_tick / 4 : 1;
	P.inject_every = cfg.inject_every;
	P.samples = cfg.samples;
	P.apic_per_tick_q32 = ti.apic_per_tick_q32;
	P.injected_seq = ~0ULL;
	P.lat_min = INT64_MAX;
	P.lat_max = INT64_MIN;
	P.inj_lat_min = INT64_MAX;
	if (!P.period_tick)
		fatal(ERANGE, "period_ns=%lu is below one tick", cfg.period_ns);

	ring_set_timing(&ring, ti.tick_hz, ti.tick_method, P.timer_mode,
			P.period_tick,
			P.timer_mode == TIMER_LAPIC_ONESHOT ? ti.apic_hz : 0);
	ring_set_config(&ring, cfg.idle, (u32)cfg.inject_every,
			cfg.inject_every ? P.irqoff_tick : 0);
	printk("irqlab-probe: cpu=%u tick_hz=%lu (%s) timer=%s apic_hz=%lu period=%lu ticks idle=%s samples=%lu inject_every=%lu inject_irqoff=%lu ticks sink=%s\n",
	       cpu, ti.tick_hz, tick_names[ti.tick_method],
	       timer_names[P.timer_mode], ti.apic_hz, P.period_tick,
	       cfg.idle == IDLE_HLT ? "hlt" : "poll", cfg.samples,
	       cfg.inject_every, P.irqoff_tick,
	       cfg.sink == SINK_CONSOLE ? "console" : "ring");

	ret = lapic_timer_start(P.timer_mode);
	if (ret)
		fatal(ret, "cannot start LAPIC timer");
	ring_set_state(&ring, RING_RUNNING);
	console_sink_state();
	irq_disable();
	P.deadline_tick = rdtsc() + P.period_tick;
	timer_arm(P.deadline_tick);

	for (;;) {
		console_sink_flush(false);
		if (P.done)
			finish(ti.tick_hz);
		if (inject_due()) {
			inject_irqoff();
			continue;
		}
		if (cfg.idle == IDLE_HLT) {
			irq_disable();
			if (!P.done && !inject_due())
				safe_halt();	/* returns after the ISR, IF=1 */
			else
				irq_enable();
		} else {
			irq_enable();
			cpu_relax();
		}
	}
}
