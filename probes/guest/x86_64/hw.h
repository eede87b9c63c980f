/* SPDX-License-Identifier: Apache-2.0 */
/* hw.h - x86-64 platform pieces of the probe: cpu tables, serial, LAPIC, ticks */
#ifndef IRQLAB_X86_HW_H
#define IRQLAB_X86_HW_H

#include "../lib/types.h"

#define TIMER_VECTOR		0x40
#define SPURIOUS_VECTOR		0xff

/* registers saved by fault_common (isr.S), lowest address first */
struct fault_frame {
	u64 r15, r14, r13, r12, r11, r10, r9, r8;
	u64 rbp, rdi, rsi, rdx, rcx, rbx, rax;
	u64 vector, error_code;
	u64 rip, cs, rflags, rsp, ss;
};

/* cpu.c */
int cpu_tables_init(void);

/* serial.c */
int serial_init(void);
void serial_putc(char c);

/* console.c */
int console_init(void);
void console_putc(char c);
const char *console_name(void);
u32 xen_cpuid_base(void);

/* lapic.c */
#define APIC_ID			0x020
#define APIC_TPR		0x080
#define APIC_EOI		0x0b0
#define APIC_SVR		0x0f0
#define APIC_LVT_TIMER		0x320
#define APIC_LVT_LINT0		0x350
#define APIC_LVT_LINT1		0x360
#define APIC_LVT_ERROR		0x370
#define APIC_TMICT		0x380
#define APIC_TMCCT		0x390
#define APIC_TDCR		0x3e0

#define APIC_LVT_MASKED		(1u << 16)
#define APIC_LVT_TSC_DEADLINE	(2u << 17)

extern volatile u32 *lapic_mmio;

/* lapic_read - read xAPIC register at byte offset @reg */
static inline u32 lapic_read(u32 reg)
{
	return lapic_mmio[reg / 4];
}

/* lapic_write - write @v to xAPIC register at byte offset @reg */
static inline void lapic_write(u32 reg, u32 v)
{
	lapic_mmio[reg / 4] = v;
}

/* lapic_eoi - signal end of interrupt */
static inline void lapic_eoi(void)
{
	lapic_write(APIC_EOI, 0);
}

int lapic_init(void);
bool lapic_has_tsc_deadline(void);
int lapic_timer_start(u32 timer_mode);
void pic_mask_all(void);

/* tick.c */
struct tick_info {
	u64 tick_hz;
	u32 tick_method;
	u64 apic_hz;		/* 0 unless measured/known */
	u64 apic_per_tick_q32;	/* APIC ticks per TSC tick, 32.32 fixed point */
};

int tick_init(struct tick_info *ti, bool need_apic);

#endif /* IRQLAB_X86_HW_H */
