// SPDX-License-Identifier: Apache-2.0
/* lapic.c - xAPIC (MMIO) setup and timer mode selection */
#include "hw.h"
#include "x86.h"
#include "../lib/ring.h"

#define APIC_BASE_ENABLE	(1ULL << 11)
#define APIC_BASE_ADDR_MASK	0xfffff000ULL
#define APIC_SVR_ENABLE		0x100
#define APIC_TDCR_DIV1		0x0b
#define APIC_LVT_NMI		(4u << 8)

#define CPUID1_EDX_APIC		(1u << 9)
#define CPUID1_ECX_TSC_DEADLINE	(1u << 24)

volatile u32 *lapic_mmio;

/* lapic_init - enable the xAPIC, mask LINT0/error, program divide-by-1 */
int lapic_init(void)
{
	u32 a, b, c, d;
	u64 base;

	cpuid(1, 0, &a, &b, &c, &d);
	if (!(d & CPUID1_EDX_APIC))
		return -ENODEV;
	base = rdmsr(MSR_IA32_APIC_BASE);
	if (!(base & APIC_BASE_ENABLE)) {
		base |= APIC_BASE_ENABLE;
		wrmsr(MSR_IA32_APIC_BASE, base);
	}
	if ((base & APIC_BASE_ADDR_MASK) >= (4ULL << 30))
		return -ENODEV;		/* outside our identity map */
	lapic_mmio = (volatile u32 *)(uintptr_t)(base & APIC_BASE_ADDR_MASK);

	lapic_write(APIC_SVR, APIC_SVR_ENABLE | SPURIOUS_VECTOR);
	lapic_write(APIC_TPR, 0);
	lapic_write(APIC_LVT_LINT0, APIC_LVT_MASKED);
	lapic_write(APIC_LVT_LINT1, APIC_LVT_NMI);
	lapic_write(APIC_LVT_ERROR, APIC_LVT_MASKED);
	lapic_write(APIC_LVT_TIMER, APIC_LVT_MASKED | TIMER_VECTOR);
	lapic_write(APIC_TDCR, APIC_TDCR_DIV1);
	lapic_write(APIC_TMICT, 0);
	return 0;
}

/* lapic_has_tsc_deadline - CPUID.1:ECX[24] */
bool lapic_has_tsc_deadline(void)
{
	u32 a, b, c, d;

	cpuid(1, 0, &a, &b, &c, &d);
	return c & CPUID1_ECX_TSC_DEADLINE;
}

/*
 * lapic_timer_start - unmask the timer LVT in @timer_mode (ring.h values)
 *
 * Nothing is armed yet: TMICT is 0 and IA32_TSC_DEADLINE is cleared.
 */
int lapic_timer_start(u32 timer_mode)
{
	lapic_write(APIC_TMICT, 0);
	switch (timer_mode) {
	case TIMER_TSC_DEADLINE:
		lapic_write(APIC_LVT_TIMER, APIC_LVT_TSC_DEADLINE | TIMER_VECTOR);
		wrmsr(MSR_IA32_TSC_DEADLINE, 0);
		return 0;
	case TIMER_LAPIC_ONESHOT:
		lapic_write(APIC_TDCR, APIC_TDCR_DIV1);
		lapic_write(APIC_LVT_TIMER, TIMER_VECTOR);
		return 0;
	default:
		return -EINVAL;
	}
}

/* pic_mask_all - mask every 8259 input so only the LAPIC timer interrupts */
void pic_mask_all(void)
{
	outb(0x21, 0xff);
	outb(0xa1, 0xff);
}
