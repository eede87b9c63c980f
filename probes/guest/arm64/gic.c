// SPDX-License-Identifier: Apache-2.0
/*
 * gic.c - just enough GICv2/GICv3 to take one PPI (the timer) on this CPU
 *
 * The interrupt is made Group 1 and given the highest usable priority; with
 * GICv3 the CPU interface is used through system registers (ICC_SRE_EL1.SRE
 * must stick, which is the case under KVM, Xen and QEMU's GICv3). EOImode
 * 0: one EOIR write both drops priority and deactivates. Acknowledging
 * through IAR/EOIR (not ICPENDR) is also what Xen's vGIC honours.
 */
#include "hw.h"
#include "arm64.h"

/* distributor */
#define GICD_CTLR		0x0000
#define GICD_IGROUPR		0x0080
#define GICD_ISENABLER		0x0100
#define GICD_ICENABLER		0x0180
#define GICD_IPRIORITYR		0x0400
#define GICD_CTLR_RWP		(1u << 31)

/* v2 CPU interface */
#define GICC_CTLR		0x0000
#define GICC_PMR		0x0004
#define GICC_BPR		0x0008
#define GICC_IAR		0x000c
#define GICC_EOIR		0x0010

/* v3 redistributor: RD_base frame, then SGI_base frame at +64 KiB */
#define GICR_CTLR		0x0000
#define GICR_TYPER		0x0008
#define GICR_WAKER		0x0014
#define GICR_SGI_OFFSET		0x10000
#define GICR_TYPER_VLPIS	(1u << 1)
#define GICR_TYPER_LAST		(1u << 4)
#define GICR_WAKER_SLEEP	(1u << 1)
#define GICR_WAKER_ASLEEP	(1u << 2)

#define TIMER_PRIORITY		0x80
#define SPIN_MAX		1000000

static u32 gic_version;
static u64 gicc_base;

/* gicd_wait_rwp - wait for a distributor register write to take effect */
static int gicd_wait_rwp(u64 gicd)
{
	int i;

	for (i = 0; i < SPIN_MAX; i++)
		if (!(mmio_read32(gicd + GICD_CTLR) & GICD_CTLR_RWP))
			return 0;
	return -EIO;
}

/* gicv2_init - enable @intid at the distributor and the CPU interface */
static int gicv2_init(const struct platform *p, u32 intid)
{
	u64 d = p->gicd_base;

	mmio_write32(d + GICD_CTLR, 0);
	mmio_write8(d + GICD_IPRIORITYR + intid, TIMER_PRIORITY);
	mmio_write32(d + GICD_ISENABLER, 1u << intid);
	mmio_write32(d + GICD_CTLR, 1);
	gicc_base = p->gicc_base;
	mmio_write32(gicc_base + GICC_PMR, 0xf0);
	mmio_write32(gicc_base + GICC_BPR, 0);
	mmio_write32(gicc_base + GICC_CTLR, 1);
	return 0;
}

/* mpidr_aff - this CPU's affinity as GICR_TYPER[63:32] encodes it */
static u32 mpidr_aff(void)
{
	u64 m = read_sysreg(mpidr_el1);

	return (u32)(m & 0xffffff) | (u32)((m >> 32) & 0xff) << 24;
}

/* gicr_find - redistributor frame of this CPU in region 0, or 0 */
static u64 gicr_find(const struct platform *p)
{
	u64 rd = p->gicr_base, end = p->gicr_base + p->gicr_size;
	u32 aff = mpidr_aff();

	while (rd < end) {
		u32 lo = mmio_read32(rd + GICR_TYPER);
		u32 hi = mmio_read32(rd + GICR_TYPER + 4);

		if (hi == aff)
			return rd;
		if (lo & GICR_TYPER_LAST)
			break;
		rd += (lo & GICR_TYPER_VLPIS) ? 0x40000 : 0x20000;
	}
	return 0;
}

/* gicv3_init - wake our redistributor, enable @intid as Group 1 */
static int gicv3_init(const struct platform *p, u32 intid)
{
	u64 d = p->gicd_base, rd, sgi;
	int i;

	mmio_write32(d + GICD_CTLR, 0);
	if (gicd_wait_rwp(d))
		return -EIO;
	/* ARE | EnableGrp1(A) | EnableGrp0/Grp1: covers the DS=1 and NS views */
	mmio_write32(d + GICD_CTLR, (1u << 4) | 3);
	if (gicd_wait_rwp(d))
		return -EIO;
	rd = gicr_find(p);
	if (!rd)
		return -ENODEV;
	mmio_write32(rd + GICR_WAKER,
		     mmio_read32(rd + GICR_WAKER) & ~GICR_WAKER_SLEEP);
	for (i = 0; mmio_read32(rd + GICR_WAKER) & GICR_WAKER_ASLEEP; i++)
		if (i > SPIN_MAX)
			return -EIO;
	sgi = rd + GICR_SGI_OFFSET;
	mmio_write32(sgi + GICD_IGROUPR, mmio_read32(sgi + GICD_IGROUPR) |
		     (1u << intid));
	mmio_write8(sgi + GICD_IPRIORITYR + intid, TIMER_PRIORITY);
	mmio_write32(sgi + GICD_ISENABLER, 1u << intid);

	write_sysreg(ICC_SRE_EL1, read_sysreg(ICC_SRE_EL1) | 1);
	isb();
	if (!(read_sysreg(ICC_SRE_EL1) & 1))
		return -ENODEV;
	write_sysreg(ICC_PMR_EL1, 0xff);
	write_sysreg(ICC_BPR1_EL1, 0);
	write_sysreg(ICC_CTLR_EL1, 0);
	write_sysreg(ICC_IGRPEN1_EL1, 1);
	isb();
	return 0;
}

/* gic_init - set up the GIC found in @p to deliver PPI @intid; 0 or -errno */
int gic_init(const struct platform *p, u32 intid)
{
	int ret;

	if (intid < 16 || intid > 31)
		return -EINVAL;
	if (p->gic_version == 3)
		ret = gicv3_init(p, intid);
	else if (p->gic_version == 2)
		ret = gicv2_init(p, intid);
	else
		ret = -ENODEV;
	if (!ret)
		gic_version = p->gic_version;
	return ret;
}

/* gic_ack - acknowledge the highest pending interrupt, return its INTID */
u32 gic_ack(void)
{
	u32 id;

	if (gic_version == 3) {
		id = (u32)read_sysreg(ICC_IAR1_EL1) & 0xffffff;
		dsb(sy);
		return id;
	}
	return mmio_read32(gicc_base + GICC_IAR) & 0x3ff;
}

/* gic_eoi - end of interrupt @intid (priority drop + deactivate) */
void gic_eoi(u32 intid)
{
	if (gic_version == 3) {
		write_sysreg(ICC_EOIR1_EL1, intid);
		isb();
		return;
	}
	mmio_write32(gicc_base + GICC_EOIR, intid);
}
