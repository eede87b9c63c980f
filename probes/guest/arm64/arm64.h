/* SPDX-License-Identifier: Apache-2.0 */
/* arm64.h - system register access, barriers and interrupt masking */
#ifndef IRQLAB_ARM64_H
#define IRQLAB_ARM64_H

#include "../lib/types.h"

#define read_sysreg(r) ({					\
	u64 __v;						\
	__asm__ __volatile__("mrs %0, " #r : "=r"(__v));	\
	__v;							\
})

#define write_sysreg(r, v) do {					\
	u64 __v = (u64)(v);					\
	__asm__ __volatile__("msr " #r ", %0" :: "r"(__v));	\
} while (0)

/* GICv3 CPU interface registers by encoding (older assemblers lack names) */
#define ICC_PMR_EL1		S3_0_C4_C6_0
#define ICC_IAR1_EL1		S3_0_C12_C12_0
#define ICC_EOIR1_EL1		S3_0_C12_C12_1
#define ICC_BPR1_EL1		S3_0_C12_C12_3
#define ICC_CTLR_EL1		S3_0_C12_C12_4
#define ICC_SRE_EL1		S3_0_C12_C12_5
#define ICC_IGRPEN1_EL1		S3_0_C12_C12_7

#define isb()		__asm__ __volatile__("isb" ::: "memory")
#define dsb(opt)	__asm__ __volatile__("dsb " #opt ::: "memory")
#define wfi()		__asm__ __volatile__("wfi" ::: "memory")
#define cpu_relax()	__asm__ __volatile__("yield" ::: "memory")

/* irq_disable - mask IRQs (PSTATE.I) */
static inline void irq_disable(void)
{
	__asm__ __volatile__("msr daifset, #2" ::: "memory");
}

/* irq_enable - unmask IRQs */
static inline void irq_enable(void)
{
	__asm__ __volatile__("msr daifclr, #2" ::: "memory");
}

/* mmio_read32 - 32-bit device register read */
static inline u32 mmio_read32(u64 addr)
{
	u32 v = *(volatile u32 *)(uintptr_t)addr;

	dsb(ld);
	return v;
}

/* mmio_write32 - 32-bit device register write, ordered after prior stores */
static inline void mmio_write32(u64 addr, u32 v)
{
	dsb(st);
	*(volatile u32 *)(uintptr_t)addr = v;
}

/* mmio_write8 - 8-bit device register write */
static inline void mmio_write8(u64 addr, u8 v)
{
	dsb(st);
	*(volatile u8 *)(uintptr_t)addr = v;
}

#endif /* IRQLAB_ARM64_H */
