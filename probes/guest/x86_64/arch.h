/* SPDX-License-Identifier: Apache-2.0 */
/* arch.h - x86-64 side of the probe interface (lib/probe.h): the inline part */
#ifndef IRQLAB_X86_ARCH_H
#define IRQLAB_X86_ARCH_H

#include "x86.h"

#define ARCH_IDLE_NAME		"hlt"	/* idle=hlt on the boot line */

/* arch_counter_read_tick - the TSC, the counter deadlines are kept in */
static inline u64 arch_counter_read_tick(void)
{
	return rdtsc();
}

/* arch_irq_disable - mask interrupts (cli) */
static inline void arch_irq_disable(void)
{
	irq_disable();
}

/* arch_irq_enable - unmask interrupts (sti) */
static inline void arch_irq_enable(void)
{
	irq_enable();
}

/* arch_idle_wait - with interrupts masked: sti;hlt, returns after the ISR */
static inline void arch_idle_wait(void)
{
	safe_halt();
}

/* arch_cpu_relax - spin-loop hint (pause) */
static inline void arch_cpu_relax(void)
{
	cpu_relax();
}

/* arch_wait_u32_set - spin until *@p is non-zero (acquire) */
static inline void arch_wait_u32_set(const u32 *p)
{
	while (!__atomic_load_n(p, __ATOMIC_ACQUIRE))
		cpu_relax();
}

#endif /* IRQLAB_X86_ARCH_H */
