/* SPDX-License-Identifier: Apache-2.0 */
/* x86.h - x86-64 instruction wrappers used by the probe */
#ifndef IRQLAB_X86_H
#define IRQLAB_X86_H

#include "../lib/types.h"

#define MSR_IA32_APIC_BASE	0x0000001b
#define MSR_IA32_TSC_DEADLINE	0x000006e0

/* rdtsc - read the time-stamp counter */
static inline u64 rdtsc(void)
{
	u32 lo, hi;

	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return ((u64)hi << 32) | lo;
}

/* rdmsr - read model-specific register @msr */
static inline u64 rdmsr(u32 msr)
{
	u32 lo, hi;

	__asm__ __volatile__("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	return ((u64)hi << 32) | lo;
}

/* wrmsr - write @val to model-specific register @msr */
static inline void wrmsr(u32 msr, u64 val)
{
	__asm__ __volatile__("wrmsr" : : "c"(msr), "a"((u32)val),
			     "d"((u32)(val >> 32)) : "memory");
}

/* cpuid - execute CPUID for @leaf/@subleaf */
static inline void cpuid(u32 leaf, u32 subleaf, u32 *a, u32 *b, u32 *c,
			 u32 *d)
{
	__asm__ __volatile__("cpuid" : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d)
			     : "a"(leaf), "c"(subleaf));
}

/* outb - write byte @v to I/O port @port */
static inline void outb(u16 port, u8 v)
{
	__asm__ __volatile__("outb %0, %1" : : "a"(v), "Nd"(port));
}

/* outl - write dword @v to I/O port @port */
static inline void outl(u16 port, u32 v)
{
	__asm__ __volatile__("outl %0, %1" : : "a"(v), "Nd"(port));
}

/* inb - read a byte from I/O port @port */
static inline u8 inb(u16 port)
{
	u8 v;

	__asm__ __volatile__("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

/* irq_disable - cli */
static inline void irq_disable(void)
{
	__asm__ __volatile__("cli" ::: "memory");
}

/* irq_enable - sti (the next instruction still runs with IF shadowed) */
static inline void irq_enable(void)
{
	__asm__ __volatile__("sti" ::: "memory");
}

/* safe_halt - sti;hlt: the sti shadow makes the pair atomic vs. the irq */
static inline void safe_halt(void)
{
	__asm__ __volatile__("sti; hlt" ::: "memory");
}

/* cpu_relax - pause hint for spin loops */
static inline void cpu_relax(void)
{
	__asm__ __volatile__("pause" ::: "memory");
}

/* read_cr2 - faulting linear address of the last #PF */
static inline u64 read_cr2(void)
{
	u64 v;

	__asm__ __volatile__("mov %%cr2, %0" : "=r"(v));
	return v;
}

#endif /* IRQLAB_X86_H */
