/* SPDX-License-Identifier: Apache-2.0 */
/* hw.h - arm64 platform pieces of the probe: DT facts, GIC, console, MMU */
#ifndef IRQLAB_ARM64_HW_H
#define IRQLAB_ARM64_HW_H

#include "../lib/types.h"

#define PLAT_MAX_RAM		8

enum psci_conduit { PSCI_NONE, PSCI_HVC, PSCI_SMC };

/* what the device tree tells the probe (platform.c) */
struct platform {
	u64 ram_base[PLAT_MAX_RAM], ram_size[PLAT_MAX_RAM];
	u32 nr_ram;
	u32 gic_version;		/* 2 or 3; 0 = not found */
	u64 gicd_base;			/* distributor */
	u64 gicc_base;			/* v2 CPU interface */
	u64 gicr_base, gicr_size;	/* v3 redistributor region 0 */
	u32 gic_int_cells;
	bool have_timer;
	u32 timer_ppi_phys;		/* INTIDs (PPI number + 16) */
	u32 timer_ppi_virt;
	u32 timer_freq_hz;		/* clock-frequency, 0 if absent */
	enum psci_conduit psci;
	u64 uart_base;			/* PL011/SBSA UART, 0 if none */
	bool xen;			/* /hypervisor compatible "xen,xen" */
	const char *bootargs;		/* /chosen bootargs or NULL */
	const char *stdout_path;	/* /chosen stdout-path or NULL */
};

/* platform.c */
int platform_probe(const void *dtb, struct platform *p);

/* gic.c */
int gic_init(const struct platform *p, u32 intid);
u32 gic_ack(void);
void gic_eoi(u32 intid);
#define GIC_SPURIOUS		1023

/* console.c */
int console_init(const struct platform *p);
void console_putc(char c);
const char *console_name(void);

/* mmu.c */
int mmu_enable(const struct platform *p);

/* psci (main.c) */
__noreturn void psci_system_off(const struct platform *p);

#endif /* IRQLAB_ARM64_HW_H */
