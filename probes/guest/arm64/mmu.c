// SPDX-License-Identifier: Apache-2.0
/*
 * mmu.c - identity map with caches on
 *
 * With the MMU off every data access is Device-nGnRnE: slow, alignment
 * checked, and (under KVM or Xen) not coherent with the host's cacheable
 * view of the ring. So the probe maps the low 512 GiB 1:1 (4 KiB granule,
 * 39-bit VA, walk from level 1): 2 MiB Normal write-back blocks for every
 * 2 MiB that overlaps RAM, Device-nGnRnE for everything else (GIC, UART).
 *
 * Everything written before this point (relocations, bss, tables) went to
 * memory uncached, so stale clean lines for those addresses are
 * invalidated before the caches are switched on.
 */
#include "hw.h"
#include "arm64.h"
#include "../lib/string.h"

#define L1_SHIFT		30
#define L2_SHIFT		21
#define PT_ENTRIES		512
#define L2_POOL			4
#define VA_BITS			39

#define PTE_VALID		(1ul << 0)
#define PTE_TABLE		(1ul << 1)
#define PTE_ATTR(i)		((u64)(i) << 2)
#define PTE_SH_INNER		(3ul << 8)
#define PTE_AF			(1ul << 10)
#define PTE_PXN			(1ul << 53)
#define PTE_UXN			(1ul << 54)

#define ATTR_DEVICE		0	/* MAIR attr 0: Device-nGnRnE */
#define ATTR_NORMAL		1	/* MAIR attr 1: Normal WB RW-allocate */
#define MAIR_VALUE		(0xfful << 8)

#define TCR_T0SZ		(64 - VA_BITS)
#define TCR_IRGN0_WBWA		(1ul << 8)
#define TCR_ORGN0_WBWA		(1ul << 10)
#define TCR_SH0_INNER		(3ul << 12)
#define TCR_EPD1		(1ul << 23)
#define TCR_IPS_SHIFT		32

#define SCTLR_M			(1ul << 0)
#define SCTLR_A			(1ul << 1)
#define SCTLR_C			(1ul << 2)
#define SCTLR_I			(1ul << 12)

static u64 l1[PT_ENTRIES] __aligned(4096);
static u64 l2[L2_POOL][PT_ENTRIES] __aligned(4096);

extern char __image_start[], __image_end[];

/* overlaps_ram - true if [@lo, @lo + @len) touches a RAM bank of @p */
static bool overlaps_ram(const struct platform *p, u64 lo, u64 len)
{
	u32 i;

	for (i = 0; i < p->nr_ram; i++)
		if (lo < p->ram_base[i] + p->ram_size[i] &&
		    p->ram_base[i] < lo + len)
			return true;
	return false;
}

/* block - a block descriptor for @pa, Normal or Device */
static u64 block(u64 pa, bool normal)
{
	if (normal)
		return pa | PTE_VALID | PTE_AF | PTE_SH_INNER |
		       PTE_ATTR(ATTR_NORMAL);
	return pa | PTE_VALID | PTE_AF | PTE_ATTR(ATTR_DEVICE) | PTE_PXN |
	       PTE_UXN;
}

/* dcache_inval - invalidate data cache lines over [@start, @end) */
static void dcache_inval(u64 start, u64 end)
{
	u64 line = 4ul << ((read_sysreg(ctr_el0) >> 16) & 0xf);

	for (start &= ~(line - 1); start < end; start += line)
		__asm__ __volatile__("dc ivac, %0" :: "r"(start) : "memory");
	dsb(sy);
}

/* mmu_enable - build the identity map for @p and turn MMU and caches on */
int mmu_enable(const struct platform *p)
{
	u64 i, j, used = 0, pa_range, sctlr;

	for (i = 0; i < p->nr_ram; i++)
		if (p->ram_base[i] + p->ram_size[i] > (1ul << VA_BITS))
			return -ERANGE;
	for (i = 0; i < PT_ENTRIES; i++) {
		u64 gib = i << L1_SHIFT;

		if (!overlaps_ram(p, gib, 1ul << L1_SHIFT) || used == L2_POOL) {
			l1[i] = block(gib, false);
			continue;
		}
		for (j = 0; j < PT_ENTRIES; j++) {
			u64 pa = gib + (j << L2_SHIFT);

			l2[used][j] = block(pa, overlaps_ram(p, pa, 1ul << L2_SHIFT));
		}
		l1[i] = (u64)(uintptr_t)l2[used++] | PTE_VALID | PTE_TABLE;
	}
	dcache_inval((u64)(uintptr_t)__image_start, (u64)(uintptr_t)__image_end);

	pa_range = read_sysreg(id_aa64mmfr0_el1) & 0xf;
	if (pa_range > 5)
		pa_range = 5;
	write_sysreg(mair_el1, MAIR_VALUE);
	write_sysreg(tcr_el1, TCR_T0SZ | TCR_IRGN0_WBWA | TCR_ORGN0_WBWA |
		     TCR_SH0_INNER | TCR_EPD1 | (pa_range << TCR_IPS_SHIFT));
	write_sysreg(ttbr0_el1, (u64)(uintptr_t)l1);
	isb();
	__asm__ __volatile__("tlbi vmalle1\n\tdsb nsh\n\tic iallu\n\tdsb nsh"
			     ::: "memory");
	isb();
	sctlr = read_sysreg(sctlr_el1);
	sctlr |= SCTLR_M | SCTLR_C | SCTLR_I;
	sctlr &= ~SCTLR_A;
	write_sysreg(sctlr_el1, sctlr);
	isb();
	return 0;
}
