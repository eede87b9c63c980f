// SPDX-License-Identifier: Apache-2.0
/*
 * main.c - irqlab arm64 guest probe: device tree boot, EL1 generic timer,
 * GIC, PSCI
 *
 * The measurement (schedule, injection, console sink, end of run) is
 * lib/probe.c, as on x86-64; this file reads the device tree, places the
 * ring, selects the timer and runs the IRQ handler. Deadlines are values
 * of the counter the timer compares against (CVAL); the IRQ vector's first
 * act reads that counter (vectors.S). Ticks at CNTFRQ_EL0.
 *
 * Timer: the EL1 virtual timer (CNTV_CVAL/CNTVCT) by default, the EL1
 * physical timer (CNTP_CVAL/CNTPCT) with timer=phys. Both are level
 * triggered PPIs whose numbers come from the device tree's /timer node:
 * the ISR re-arms (or disables) the timer before EOI so the line drops.
 *
 * Ring: at RAM bank base + 4 MiB of the bank the Image was loaded into
 * (QEMU virt: GPA 0x40400000 = offset 0x400000 in the guest RAM file).
 *
 * End: samples=N reached -> ring state DONE, PSCI SYSTEM_OFF (QEMU exits
 * 0; the ring state, not the exit status, says done or error).
 */
#include "hw.h"
#include "arm64.h"
#include "arch.h"
#include "build_id.h"
#include "../lib/probe.h"
#include "../lib/ring.h"
#include "../lib/string.h"
#include "../lib/printf.h"
#include "../lib/fdt.h"

#define RING_OFFSET		0x400000UL	/* from the RAM bank's base */

#define PSCI_SYSTEM_OFF		0x84000008u

#define CNT_CTL_ENABLE		(1u << 0)
#define CNT_CTL_IMASK		(1u << 1)

enum timer_req { TIMER_REQ_AUTO, TIMER_REQ_VIRT, TIMER_REQ_PHYS };

/* read by vectors.S: which counter the IRQ entry samples */
u8 irq_use_phys;

static struct platform plat;
static enum timer_req timer_req = TIMER_REQ_AUTO;
static bool mmu_on = true;		/* mmu= */
static u32 timer_intid;
static char cmdline_buf[512];
static u64 load_base;		/* where the Image runs: ELF address + this */

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

/* arch_exit_done - samples reached: power off (the ring says done) */
void arch_exit_done(void)
{
	psci_system_off(&plat);
}

/* arch_exit_error - fatal error reported: power off (the ring says error) */
void arch_exit_error(void)
{
	psci_system_off(&plat);
}

/* fault_handler - called by vectors.S for any unexpected exception */
__noreturn void fault_handler(u64 vector, u64 esr, u64 elr, u64 far);
__noreturn void fault_handler(u64 vector, u64 esr, u64 elr, u64 far)
{
	probe_fatal(EFAULT, "exception vector %lu esr 0x%lx elr 0x%lx (image+0x%lx) far 0x%lx",
		    vector, esr, elr, elr - load_base, far);
}

/* arch_param_parse - the arm64 keys timer= and mmu=; 0, or -ENOENT for another key */
int arch_param_parse(const struct cmdline_word *w)
{
	if (!strcmp(w->key, "timer")) {
		if (!strcmp(w->val, "auto"))
			timer_req = TIMER_REQ_AUTO;
		else if (!strcmp(w->val, "virt"))
			timer_req = TIMER_REQ_VIRT;
		else if (!strcmp(w->val, "phys"))
			timer_req = TIMER_REQ_PHYS;
		else
			probe_param_error(EINVAL, "timer=%s: expected auto, virt or phys",
					  w->val);
	} else if (!strcmp(w->key, "mmu")) {
		if (!strcmp(w->val, "on") || !strcmp(w->val, "off"))
			mmu_on = !strcmp(w->val, "on");
		else
			probe_param_error(EINVAL, "mmu=%s: expected on or off", w->val);
	} else {
		return -ENOENT;
	}
	return 0;
}

/* arch_timer_arm_tick - program the selected EL1 timer for @deadline_tick */
void arch_timer_arm_tick(u64 deadline_tick)
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
	u32 id = gic_ack();

	if (id >= 1020)
		return;		/* spurious: nothing to EOI */
	if (id != timer_intid)
		probe_fatal(EFAULT, "unexpected interrupt %u", id);
	if (probe_done() || entry_tick < probe_deadline_tick()) {
		/* stale level from before a re-arm: not a sample */
		if (probe_done())
			timer_stop();
		gic_eoi(id);
		return;
	}
	if (probe_timer_sample(entry_tick))
		timer_stop();		/* the last one */
	else
		probe_timer_rearm();
	gic_eoi(id);
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
	u64 len = RING_BYTES(PROBE_RING_CAPACITY), lo, hi, b;
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
		if (probe_params()->sink != SINK_CONSOLE)
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

#define REF_ROUNDS		16

/*
 * ref_counter_measure - offset of the physical counter from the timer's
 *
 * xentrace stamps Xen on Arm's records with CNTPCT_EL0 (get_cycles()), and
 * Xen lets EL1 read it (CNTHCTL_EL2.EL1PCTEN); the virtual counter is it
 * minus the domain's CNTVOFF, constant for the domain's life. A round reads
 * virt, phys, virt in order (isb), so the offset is within half their gap
 * of phys - the middle virt; the narrowest of REF_ROUNDS rounds is kept.
 * With timer=phys the probe's counter is CNTPCT itself.
 */
static void ref_counter_measure(struct probe_clock *clk)
{
	u64 v1, v2, phys, best_tick = ~0ULL;
	int i;

	clk->ref_counter = REF_COUNTER_ARM64_CNTPCT;
	clk->ref_offset_tick = 0;
	clk->ref_offset_err_tick = 0;
	if (irq_use_phys)
		return;
	for (i = 0; i < REF_ROUNDS; i++) {
		isb();
		v1 = read_sysreg(cntvct_el0);
		isb();
		phys = read_sysreg(cntpct_el0);
		isb();
		v2 = read_sysreg(cntvct_el0);
		if (v2 - v1 >= best_tick)
			continue;
		best_tick = v2 - v1;
		clk->ref_offset_tick = (s64)(phys - (v1 + best_tick / 2));
		clk->ref_offset_err_tick = (u32)((best_tick + 1) / 2);
	}
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
	u32 dtb_len = 0, cpu, timer_mode;
	struct probe_clock clk;
	char detail[32];
	int ret, ring_err;

	load_base = load_pa;
	if (fdt_check(dtb, &dtb_len))
		psci_system_off(&plat);	/* no tree: no console, no PSCI */
	ret = platform_probe(dtb, &plat);
	console_init(&plat);
	printf_set_console(console_putc);
	printk("irqlab-probe %s\n", IRQLAB_BUILD_ID);
	if (ret)
		probe_fatal(ret, "device tree: RAM, GIC or /timer PPIs not found (error %d)",
			    ret);
	if (plat.bootargs)
		strlcpy(cmdline_buf, plat.bootargs, sizeof(cmdline_buf));
	/* parse first: sink= decides where the ring may go */
	printk("irqlab-probe: cmdline \"%s\"\n", cmdline_buf);
	probe_parse_cmdline(cmdline_buf);

	ring_err = ring_place(load_pa, img_len, dtb_pa, dtb_len, &ring_base);
	if (mmu_on) {
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
		probe_fatal(ENOMEM, "no room for the ring (0x%lx bytes) at RAM + 0x%lx: image 0x%lx+0x%lx, dtb 0x%lx+0x%x",
			    (u64)RING_BYTES(PROBE_RING_CAPACITY), RING_OFFSET, load_pa,
			    img_len, dtb_pa, dtb_len);
	probe_ring_init((void *)(uintptr_t)ring_base, RING_ARCH_ARM64, cpu);
	probe_params_check();

	tick_hz = read_sysreg(cntfrq_el0) & 0xffffffffUL;
	if (!tick_hz)
		tick_hz = plat.timer_freq_hz;
	if (!tick_hz)
		probe_fatal(EIO, "CNTFRQ_EL0 is 0 and /timer has no clock-frequency");
	irq_use_phys = timer_req == TIMER_REQ_PHYS;
	timer_mode = irq_use_phys ? TIMER_ARM_PHYS : TIMER_ARM_VIRT;
	timer_intid = irq_use_phys ? plat.timer_ppi_phys : plat.timer_ppi_virt;
	snprintf(detail, sizeof(detail), "intid=%u", timer_intid);
	clk = (struct probe_clock){
		.tick_hz = tick_hz,
		.tick_method = TICK_CNTFRQ,
		.tick_name = "cntfrq",
		.timer_mode = timer_mode,
		.timer_name = timer_names[timer_mode],
		.ring_apic_hz = 0,
		.timer_detail = detail,
	};
	ref_counter_measure(&clk);
	printk("irqlab-probe: cntpct - counter = %s%lu ticks (+-%u)\n",
	       clk.ref_offset_tick < 0 ? "-" : "",
	       clk.ref_offset_tick < 0 ? (u64)-clk.ref_offset_tick :
	       (u64)clk.ref_offset_tick, clk.ref_offset_err_tick);
	probe_start(&clk);

	timer_stop();
	ret = gic_init(&plat, timer_intid);
	if (ret)
		probe_fatal(ret, "GICv%u initialisation failed", plat.gic_version);
	probe_run();
}
