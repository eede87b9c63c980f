/* SPDX-License-Identifier: Apache-2.0 */
/* arch.h - arm64 side of the probe interface (lib/probe.h): the inline part */
#ifndef IRQLAB_ARM64_ARCH_H
#define IRQLAB_ARM64_ARCH_H

#include "arm64.h"

#define ARCH_IDLE_NAME		"wfi"	/* idle=wfi (or hlt) on the boot line */

/* which counter the IRQ entry samples and the timer compares (main.c, vectors.S) */
extern u8 irq_use_phys;

/* arch_counter_read_tick - the counter the selected EL1 timer compares against */
static inline u64 arch_counter_read_tick(void)
{
	isb();	/* no speculative read ahead of earlier instructions */
	if (irq_use_phys)
		return read_sysreg(cntpct_el0);
	return read_sysreg(cntvct_el0);
}

/* arch_irq_disable - mask IRQs (PSTATE.I) */
static inline void arch_irq_disable(void)
{
	irq_disable();
}

/* arch_irq_enable - unmask IRQs */
static inline void arch_irq_enable(void)
{
	irq_enable();
}

/* arch_idle_wait - with IRQs masked: wfi (wakes on a pending IRQ), unmask */
static inline void arch_idle_wait(void)
{
	wfi();
	irq_enable();
}

/* arch_cpu_relax - spin-loop hint (yield) */
static inline void arch_cpu_relax(void)
{
	cpu_relax();
}

/*
 * arch_wait_u32_set - until *@p is non-zero (acquire), in WFE between checks
 *
 * The exclusive load arms the monitor: another CPU's store to the word
 * clears it and wakes the WFE (Linux's smp_cond_load_acquire on arm64), as
 * does any exception return; Xen traps WFE by default and yields the pCPU,
 * so a waiting domain leaves its pCPU to a booting dom0.
 */
static inline void arch_wait_u32_set(const u32 *p)
{
	u32 v;

	for (;;) {
		__asm__ __volatile__("ldaxr %w0, [%1]" : "=&r"(v) : "r"(p) : "memory");
		if (v)
			return;
		__asm__ __volatile__("wfe" ::: "memory");
	}
}

#endif /* IRQLAB_ARM64_ARCH_H */
