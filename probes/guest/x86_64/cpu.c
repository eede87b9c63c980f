// SPDX-License-Identifier: Apache-2.0
/* cpu.c - IDT and TSS setup */
#include "hw.h"
#include "../lib/string.h"

struct idt_gate {
	u16 offset0;
	u16 selector;
	u8 ist;
	u8 type_attr;
	u16 offset1;
	u32 offset2;
	u32 reserved;
} __packed;

struct desc_ptr {
	u16 limit;
	u64 base;
} __packed;

struct tss64 {
	u32 reserved0;
	u64 rsp[3];
	u64 reserved1;
	u64 ist[7];
	u64 reserved2;
	u16 reserved3;
	u16 iomap_base;
} __packed;

#define KERNEL_CS		0x08
#define TSS_SEL			0x18
#define GATE_INTERRUPT		0x8e	/* present, DPL0, 64-bit interrupt gate */
#define STUB_SIZE		16

extern char vector_stubs[];
extern void timer_entry(void);
extern void spurious_entry(void);
extern u64 gdt64[];

static struct idt_gate idt[256] __aligned(16);
static struct tss64 tss __aligned(16);

/* idt_set - point vector @vec at handler @fn */
static void idt_set(unsigned int vec, void *fn)
{
	u64 addr = (u64)(uintptr_t)fn;
	struct idt_gate *g = &idt[vec];

	g->offset0 = (u16)addr;
	g->selector = KERNEL_CS;
	g->ist = 0;
	g->type_attr = GATE_INTERRUPT;
	g->offset1 = (u16)(addr >> 16);
	g->offset2 = (u32)(addr >> 32);
	g->reserved = 0;
}

/* tss_install - fill the GDT's TSS descriptor and load the task register */
static void tss_install(void)
{
	u64 base = (u64)(uintptr_t)&tss;
	u64 limit = sizeof(tss) - 1;

	memset(&tss, 0, sizeof(tss));
	tss.iomap_base = sizeof(tss);	/* no I/O bitmap */
	gdt64[3] = (limit & 0xffff) | ((base & 0xffffff) << 16) |
		   (0x89ULL << 40) | (((limit >> 16) & 0xf) << 48) |
		   (((base >> 24) & 0xff) << 56);
	gdt64[4] = base >> 32;
	__asm__ __volatile__("ltr %w0" : : "r"(TSS_SEL) : "memory");
}

/* cpu_tables_init - load an IDT (all vectors fatal except timer/spurious) and a TSS */
int cpu_tables_init(void)
{
	struct desc_ptr dp;
	unsigned int v;

	for (v = 0; v < 256; v++)
		idt_set(v, vector_stubs + v * STUB_SIZE);
	idt_set(TIMER_VECTOR, timer_entry);
	idt_set(SPURIOUS_VECTOR, spurious_entry);
	dp.limit = sizeof(idt) - 1;
	dp.base = (u64)(uintptr_t)idt;
	__asm__ __volatile__("lidt %0" : : "m"(dp) : "memory");
	tss_install();
	return 0;
}
