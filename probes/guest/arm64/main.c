// SPDX-License-Identifier: MIT
/*
 * main.c - irqlab arm64 guest probe: EL1 generic timer, latency samples
 *
 * Same measurement as the x86-64 probe (../x86_64/main.c): the schedule is
 * kept in counter ticks, deadline[n+1] = deadline[n] + period (no drift);
 * the IRQ vector's first act reads the counter the timer compares against
 * (vectors.S); the sample (deadline = programmed CVAL, entry) goes to the
 * ring (docs/formats.md section 2). Latency = counter at entry - CVAL, in
 * ticks at CNTFRQ_EL0.
 *
 * Timer: the EL1 virtual timer (CNTV_CVAL/CNTVCT) by default, the EL1
 * physical timer (CNTP_CVAL/CNTPCT) with timer=phys. Both are level
 * triggered PPIs whose numbers come from the device tree's /timer node:
 * the ISR re-arms (or disables) the timer before EOI so the line drops.
 *
 * Ring: at RAM bank base + 4 MiB of the bank the Image was loaded into
 * (QEMU virt: GPA 0x40400000 = offset 0x400000 in the guest RAM file).
 *
 * Self-check injection: exactly the x86 rule. Sample k (0-based) is
 * injected when inject_every = N > 0, inject_irqoff_ns = D > 0 and
 * (k + 1) % N == 0: IRQs are masked (PSTATE.I) from deadline_k - period/4
 * until the counter reaches deadline_k + D, so a flagged record has
 * entry_tick - deadline_tick > inject_irqoff_tick.
 *
 * Sinks: the ring is always written. With sink=console the main loop also
 * copies it to the console as framed lines (lib/frame.c), for hosts that
 * cannot map guest memory (Xen on a board). That output runs with IRQs
 * enabled between interrupts; it costs the guest time, not latency
 * accuracy (the ISR is the same).
 *
 * End: samples=N reached -> ring state DONE, PSCI SYSTEM_OFF (QEMU exits
 * 0; the ring state, not the exit status, says done or error).
 */
#include "hw.h"
#include "arm64.h"
#include "build_id.h"
#include "../lib/ring.h"
#include "../lib/string.h"
#include "../lib/printf.h"
#include "../lib/cmdline.h"
#include "../lib/fdt.h"
#include "../lib/frame.h"

#define RING_OFFSET		0x400000UL	/* from the RAM bank's base */
#define RING_CAPACITY		65536u

#define PERIOD_NS_MIN		1000UL
#define PERIOD_NS_MAX		(60 * NSEC_PER_SEC)
#define IRQOFF_NS_MAX		(10 * NSEC_PER_SEC)

#define CONSOLE_BATCH		16	/* samples per console flush */

#define PSCI_SYSTEM_OFF		0x84000008u

#define CNT_CTL_ENABLE		(1u << 0)
#define CNT_CTL_IMASK		(1u << 1)

enum timer_req { TIMER_REQ_AUTO, TIMER_REQ_VIRT, TIMER_REQ_PHYS };
enum sink { SINK_RING, SINK_CONSOLE };

struct probe_cfg {
	u64 period_ns;
	u32 idle;
	u64 inject_irqoff_ns;
	u64 inject_every;
	u64 samples;
	enum timer_req timer;
	enum sink sink;
	bool mmu;
};

/* state shared between the main loop and the ISR */
struct probe_state {
	u64 period_tick;
	u64 irqoff_tick;
	u64 inject_margin_tick;
	u64 inject_every;
	u64 samples;
	u32 timer_mode;
	u32 intid;
	volatile u64 deadline_tick;	/* deadline of sample `seq` */
	volatile u64 seq;		/* next sample number */
	volatile u32 pending_flags;	/* flags for record `seq` */
	volatile bool done;
	u64 injected_seq;
	u64 injections, injections_missed;
	s64 lat_min, lat_max, lat_sum;
	u64 lat_n;
	s64 inj_lat_min;
};

/* read by vectors.S: which counter the IRQ entry samples */
u8 irq_use_phys;

static struct ring ring;
static bool ring_ready;
static struct probe_state P;
static struct platform plat;
static struct probe_cfg cfg = {
	.period_ns = 1000000, .idle = IDLE_HLT, .timer = TIMER_REQ_AUTO,
	.sink = SINK_RING, .mmu = true,
};
static struct frame_out fout = { .write = console_write };
static bool header_sent;
static u64 console_next;		/* next seq to copy to the console */
static char cmdline_buf[512];
static u64 load_base;		/* where the Image runs: ELF address + this */
static int cfg_err;		/* first boot parameter error (cfg_error) */
static char cfg_msg[RING_MESSAGE_LEN];

/* psci_system_off - power off through PSCI; halts if that returns */
__noreturn void psci_system_off(const struct platform *p)
{
	register u64 x0 __asm__("x0") = PSCI_SYSTEM_OFF;

	irq_disable();
	if (p->psci == PSCI_HVC)
		__asm__ __volatile__("hvc #0" : "+r"(x0) :: "memory");
	else if (p->psci == PSCI_SMC)
		__asm__ __volatile__("smc #0" : "+r"(x0) :: "memory");
	printk("irqlab-probe: PSCI SYSTEM_OFF unavailable, halting\n");
	for (;;)
		wfi();
}

/* console_sink_state - header (once) and state frames for sink=console */
static void console_sink_state(void)
{
	if (cfg.sink != SINK_CONSOLE || !ring_ready)
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

	if (cfg.sink != SINK_CONSOLE || !header_sent)
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

/* fatal - record @err in the ring (and console), print it, power off */
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
	psci_system_off(&plat);
}

/*
 * cfg_error - remember the first boot parameter error
 *
 * Parameters are parsed before the ring exists (sink= decides where it may
 * go), so errors are reported once it does: the host reads them there.
 */
static __attribute__((format(printf, 2, 3)))
void cfg_error(int err, const char *fmt, ...)
{
	va_list ap;

	if (cfg_err)
		return;
	cfg_err = err < 0 ? -err : err;
	va_start(ap, fmt);
	vsnprintf(cfg_msg, sizeof(cfg_msg), fmt, ap);
	va_end(ap);
}

/* fault_handler - called by vectors.S for any unexpected exception */
__noreturn void fault_handler(u64 vector, u64 esr, u64 elr, u64 far);
__noreturn void fault_handler(u64 vector, u64 esr, u64 elr, u64 far)
{
	fatal(EFAULT, "exception vector %lu esr 0x%lx elr 0x%lx (image+0x%lx) far 0x%lx",
	      vector, esr, elr, elr - load_base, far);
}

/* counter_read - the counter the selected timer compares against */
static inline u64 counter_read(void)
{
	isb();	/* no speculative read ahead of earlier instructions */
	if (irq_use_phys)
		return read_sysreg(cntpct_el0);
	return read_sysreg(cntvct_el0);
}

/* timer_arm - program the selected EL1 timer for @deadline_tick */
static void timer_arm(u64 deadline_tick)
{
	if (irq_use_phys) {
		write_sysreg(cntp_cval_el0, deadline_tick);
		write_sysreg(cntp_ctl_el0, CNT_CTL_ENABLE);
	} else {
		write_sysreg(cntv_cval_el0, deadline_tick);
		write_sysreg(cntv_ctl_el0, CNT_CTL_ENABLE);
	}
	isb();
}

/* timer_stop - mask and disable the selected timer */
static void timer_stop(void)
{
	if (irq_use_phys)
		write_sysreg(cntp_ctl_el0, CNT_CTL_IMASK);
	else
		write_sysreg(cntv_ctl_el0, CNT_CTL_IMASK);
	isb();
}

/* irq_handler - C part of the IRQ vector; @entry_tick read at entry */
void irq_handler(u64 entry_tick);
void irq_handler(u64 entry_tick)
{
	u64 deadline = P.deadline_tick, seq = P.seq, next, now, skip;
	u32 id = gic_ack(), flags;
	s64 lat;

	if (id >= 1020)
		return;		/* spurious: nothing to EOI */
	if (id != P.intid)
		fatal(EFAULT, "unexpected interrupt %u", id);
	if (P.done || entry_tick < deadline) {
		/* stale level from before a re-arm: not a sample */
		if (P.done)
			timer_stop();
		gic_eoi(id);
		return;
	}
	flags = P.pending_flags;
	P.pending_flags = 0;
	ring_push(&ring, seq, deadline, entry_tick, flags);
	P.seq = seq + 1;

	lat = (s64)(entry_tick - deadline);
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
		timer_stop();
		ring_set_state(&ring, RING_DONE);
		P.done = true;
		gic_eoi(id);
		return;
	}
	next = deadline + P.period_tick;
	now = counter_read();
	if (next <= now) {
		skip = (now - next) / P.period_tick + 1;
		next += skip * P.period_tick;
		ring_add_overruns(&ring, skip);
		P.pending_flags = RING_F_OVERRUN;
	}
	P.deadline_tick = next;
	timer_arm(next);
	gic_eoi(id);
}

/* inject_due - true if the next sample is an injection target */
static bool inject_due(void)
{
	u64 seq = P.seq;

	return P.irqoff_tick && P.inject_every &&
	       (seq + 1) % P.inject_every == 0 && P.injected_seq != seq;
}

/* inject_irqoff - mask IRQs across deadline `seq` (see file header) */
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
		if (counter_read() + P.inject_margin_tick >= P.deadline_tick)
			break;
		irq_enable();
		cpu_relax();
	}
	P.pending_flags |= RING_F_INJECTED;
	end = P.deadline_tick + P.irqoff_tick;
	while (counter_read() < end)
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

/* finish - drain the console sink, print the summary, power off */
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
	psci_system_off(&plat);
}

/* parse_word - apply one key=value boot parameter to @c; 0 or cfg_error */
static int parse_word(const struct cmdline_word *w, struct probe_cfg *c)
{
	u64 *num = NULL;
	int ret;

	if (!strcmp(w->key, "period_ns"))
		num = &c->period_ns;
	else if (!strcmp(w->key, "inject_irqoff_ns"))
		num = &c->inject_irqoff_ns;
	else if (!strcmp(w->key, "inject_every"))
		num = &c->inject_every;
	else if (!strcmp(w->key, "samples"))
		num = &c->samples;
	else if (!strcmp(w->key, "idle")) {
		if (!strcmp(w->val, "wfi") || !strcmp(w->val, "hlt"))
			c->idle = IDLE_HLT;
		else if (!strcmp(w->val, "poll"))
			c->idle = IDLE_POLL;
		else
			cfg_error(EINVAL, "idle=%s: expected wfi or poll", w->val);
	} else if (!strcmp(w->key, "timer")) {
		if (!strcmp(w->val, "auto"))
			c->timer = TIMER_REQ_AUTO;
		else if (!strcmp(w->val, "virt"))
			c->timer = TIMER_REQ_VIRT;
		else if (!strcmp(w->val, "phys"))
			c->timer = TIMER_REQ_PHYS;
		else
			cfg_error(EINVAL, "timer=%s: expected auto, virt or phys", w->val);
	} else if (!strcmp(w->key, "sink")) {
		if (!strcmp(w->val, "ring"))
			c->sink = SINK_RING;
		else if (!strcmp(w->val, "console"))
			c->sink = SINK_CONSOLE;
		else
			cfg_error(EINVAL, "sink=%s: expected ring or console", w->val);
	} else if (!strcmp(w->key, "mmu")) {
		if (!strcmp(w->val, "on") || !strcmp(w->val, "off"))
			c->mmu = !strcmp(w->val, "on");
		else
			cfg_error(EINVAL, "mmu=%s: expected on or off", w->val);
	} else {
		cfg_error(EINVAL, "unknown boot parameter '%s'", w->key);
	}
	if (num) {
		ret = parse_u64(w->val, num);
		if (ret)
			cfg_error(ret, "%s=%s: not a number", w->key, w->val);
	}
	return 0;
}

/* parse_cmdline - fill @c from @line; errors go to cfg_error */
static int parse_cmdline(const char *line, struct probe_cfg *c)
{
	struct cmdline_word w;
	const char *pos = line;
	int ret;

	while ((ret = cmdline_next(&pos, &w)) != 0) {
		if (ret < 0)
			cfg_error(ret, "boot parameter too long near '%s'", w.key);
		else if (!w.has_value)
			cfg_error(EINVAL, "boot parameter '%s' has no '=value'", w.key);
		else
			parse_word(&w, c);
	}
	if (c->period_ns < PERIOD_NS_MIN || c->period_ns > PERIOD_NS_MAX)
		cfg_error(ERANGE, "period_ns=%lu outside [%lu, %lu]", c->period_ns,
		      PERIOD_NS_MIN, PERIOD_NS_MAX);
	if (c->inject_irqoff_ns > IRQOFF_NS_MAX)
		cfg_error(ERANGE, "inject_irqoff_ns=%lu above %lu",
		      c->inject_irqoff_ns, IRQOFF_NS_MAX);
	if (c->inject_every > 0xffffffffULL)
		cfg_error(ERANGE, "inject_every=%lu does not fit 32 bits",
		      c->inject_every);
	return 0;
}

/* overlap - true if [@a, @a + @alen) and [@b, @b + @blen) intersect */
static bool overlap(u64 a, u64 alen, u64 b, u64 blen)
{
	return a < b + blen && b < a + alen;
}

/*
 * ring_place - ring address: RAM bank of the image + RING_OFFSET
 *
 * If the image or DTB is in the way (a loader that put them there), the
 * host could not find the ring: error for sink=ring, and for sink=console
 * (the host does not read it) the first free 2 MiB boundary above them.
 * Returns 0 and *@base, or -ENOMEM.
 */
static int ring_place(u64 img, u64 img_len, u64 dtb, u64 dtb_len, u64 *base)
{
	u64 len = RING_BYTES(RING_CAPACITY), lo, hi, b;
	u32 i;

	for (i = 0; i < plat.nr_ram; i++) {
		lo = plat.ram_base[i];
		hi = lo + plat.ram_size[i];
		if (img < lo || img >= hi)
			continue;
		b = lo + RING_OFFSET;
		if (!overlap(b, len, img, img_len) && !overlap(b, len, dtb, dtb_len) &&
		    b + len <= hi) {
			*base = b;
			return 0;
		}
		if (cfg.sink != SINK_CONSOLE)
			return -ENOMEM;
		b = img + img_len > dtb + dtb_len ? img + img_len : dtb + dtb_len;
		b = (b + 0x1fffff) & ~0x1fffffUL;
		if (b >= lo && b + len <= hi) {
			*base = b;
			return 0;
		}
	}
	return -ENOMEM;
}

static const char *const timer_names[] = { "?", "?", "?", "virt", "phys" };

extern char __image_start[], __image_end[];

/* probe_main - C entry from entry.S with the DTB address and load base */
void probe_main(u64 dtb_pa, u64 load_pa);
void probe_main(u64 dtb_pa, u64 load_pa)
{
	const void *dtb = (const void *)(uintptr_t)dtb_pa;
	u64 img_len = (u64)(__image_end - __image_start), ring_base = 0;
	u64 tick_hz, mpidr;
	u32 dtb_len = 0, cpu;
	int ret, ring_err;

	load_base = load_pa;
	if (fdt_check(dtb, &dtb_len))
		psci_system_off(&plat);	/* no tree: no console, no PSCI */
	ret = platform_probe(dtb, &plat);
	console_init(&plat);
	printf_set_console(console_putc);
	printk("irqlab-probe %s\n", IRQLAB_BUILD_ID);
	if (ret)
		fatal(ret, "device tree: RAM, GIC or /timer PPIs not found (error %d)",
		      ret);
	if (plat.bootargs)
		strlcpy(cmdline_buf, plat.bootargs, sizeof(cmdline_buf));
	/* parse first: sink= decides where the ring may go */
	printk("irqlab-probe: cmdline \"%s\"\n", cmdline_buf);
	parse_cmdline(cmdline_buf, &cfg);

	ring_err = ring_place(load_pa, img_len, dtb_pa, dtb_len, &ring_base);
	if (cfg.mmu) {
		ret = mmu_enable(&plat);
		if (ret)
			printk("irqlab-probe: RAM above 512 GiB, running with the MMU off\n");
	}
	mpidr = read_sysreg(mpidr_el1);
	cpu = (u32)(mpidr & 0xff) | (u32)((mpidr >> 8) & 0xff) << 8;
	printk("irqlab-probe: image 0x%lx+0x%lx dtb 0x%lx+0x%x ram 0x%lx+0x%lx gic v%u d=0x%lx %s=0x%lx ppi virt=%u phys=%u psci=%s console=%s ring=0x%lx\n",
	       load_pa, img_len, dtb_pa, dtb_len, plat.ram_base[0],
	       plat.ram_size[0], plat.gic_version, plat.gicd_base,
	       plat.gic_version == 3 ? "r" : "c",
	       plat.gic_version == 3 ? plat.gicr_base : plat.gicc_base,
	       plat.timer_ppi_virt, plat.timer_ppi_phys,
	       plat.psci == PSCI_HVC ? "hvc" : plat.psci == PSCI_SMC ? "smc" : "none",
	       console_name(), ring_base);
	if (ring_err)
		fatal(ENOMEM, "no room for the ring (0x%lx bytes) at RAM + 0x%lx: image 0x%lx+0x%lx, dtb 0x%lx+0x%x",
		      (u64)RING_BYTES(RING_CAPACITY), RING_OFFSET, load_pa,
		      img_len, dtb_pa, dtb_len);
	ring_init(&ring, (void *)(uintptr_t)ring_base, RING_CAPACITY,
		  RING_ARCH_ARM64, IRQLAB_BUILD_ID, cpu);
	ring_ready = true;
	if (cfg_err)
		fatal(cfg_err, "%s", cfg_msg);

	tick_hz = read_sysreg(cntfrq_el0) & 0xffffffffUL;
	if (!tick_hz)
		tick_hz = plat.timer_freq_hz;
	if (!tick_hz)
		fatal(EIO, "CNTFRQ_EL0 is 0 and /timer has no clock-frequency");
	irq_use_phys = cfg.timer == TIMER_REQ_PHYS;
	P.timer_mode = irq_use_phys ? TIMER_ARM_PHYS : TIMER_ARM_VIRT;
	P.intid = irq_use_phys ? plat.timer_ppi_phys : plat.timer_ppi_virt;
	P.period_tick = ns_to_tick(cfg.period_ns, tick_hz);
	P.irqoff_tick = cfg.inject_every ? ns_to_tick(cfg.inject_irqoff_ns, tick_hz) : 0;
	P.inject_margin_tick = P.period_tick / 4 ? P.period_tick / 4 : 1;
	P.inject_every = cfg.inject_every;
	P.samples = cfg.samples;
	P.injected_seq = ~0ULL;
	P.lat_min = INT64_MAX;
	P.lat_max = INT64_MIN;
	P.inj_lat_min = INT64_MAX;
	if (!P.period_tick)
		fatal(ERANGE, "period_ns=%lu is below one tick", cfg.period_ns);
	ring_set_timing(&ring, tick_hz, TICK_CNTFRQ, P.timer_mode, P.period_tick, 0);
	ring_set_config(&ring, cfg.idle, (u32)cfg.inject_every,
			cfg.inject_every ? P.irqoff_tick : 0);
	printk("irqlab-probe: cpu=%u tick_hz=%lu (cntfrq) timer=%s intid=%u period=%lu ticks idle=%s samples=%lu inject_every=%lu inject_irqoff=%lu ticks sink=%s\n",
	       cpu, tick_hz, timer_names[P.timer_mode], P.intid, P.period_tick,
	       cfg.idle == IDLE_HLT ? "wfi" : "poll", cfg.samples,
	       cfg.inject_every, P.irqoff_tick,
	       cfg.sink == SINK_CONSOLE ? "console" : "ring");

	timer_stop();
	ret = gic_init(&plat, P.intid);
	if (ret)
		fatal(ret, "GICv%u initialisation failed", plat.gic_version);
	ring_set_state(&ring, RING_RUNNING);
	console_sink_state();
	P.deadline_tick = counter_read() + P.period_tick;
	timer_arm(P.deadline_tick);

	for (;;) {
		console_sink_flush(false);
		if (P.done)
			finish(tick_hz);
		if (inject_due()) {
			inject_irqoff();
			continue;
		}
		if (cfg.idle == IDLE_HLT) {
			irq_disable();
			if (!P.done && !inject_due())
				wfi();	/* wakes on the pending IRQ even masked */
			irq_enable();
		} else {
			irq_enable();
			cpu_relax();
		}
	}
}
