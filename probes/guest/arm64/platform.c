// SPDX-License-Identifier: Apache-2.0
/*
 * platform.c - what the probe needs from the device tree
 *
 * RAM banks, the GIC (v2: distributor + CPU interface, v3: distributor +
 * redistributors), the timer PPIs from /timer "interrupts", the PSCI
 * conduit, the console UART and whether we run under Xen. Nothing is
 * assumed about QEMU's addresses. Bus address translation (`ranges`) is
 * not applied: the nodes used here sit at the root on QEMU virt, kvmtool
 * and Xen guests, whose buses map 1:1.
 */
#include "hw.h"
#include "../lib/fdt.h"
#include "../lib/string.h"

struct walk_ctx {
	struct platform *p;
	const u8 *timer_irqs;
	u32 timer_irqs_len;
	const char *stdout_name;	/* last path component of stdout-path */
	size_t stdout_len;
	bool uart_matched;
};

static const char *const gic_v2_compat[] = {
	"arm,gic-400", "arm,cortex-a15-gic", "arm,cortex-a9-gic",
	"arm,cortex-a7-gic", "arm,gic-v2",
};

/* node_okay - false when @n has status = "disabled" (or anything not okay) */
static bool node_okay(const struct fdt_node *n)
{
	const char *s = fdt_prop(n, "status", NULL);

	return !s || !strcmp(s, "okay") || !strcmp(s, "ok");
}

/* visit_gic - record the interrupt controller at @n; 0 */
static int visit_gic(const struct fdt_node *n, struct platform *p, u32 version)
{
	u64 a, s;
	u32 cells;

	if (p->gic_version || !fdt_prop(n, "interrupt-controller", NULL))
		return 0;
	if (fdt_reg(n, 0, &p->gicd_base, &s))
		return 0;
	if (fdt_reg(n, 1, &a, &s))
		return 0;
	if (version == 3) {
		p->gicr_base = a;
		p->gicr_size = s;
	} else {
		p->gicc_base = a;
	}
	p->gic_int_cells = fdt_prop_u32(n, "#interrupt-cells", &cells) ? 3 : cells;
	p->gic_version = version;
	return 0;
}

/* visit_uart - take the first enabled UART, or the stdout-path one */
static void visit_uart(const struct fdt_node *n, struct walk_ctx *c)
{
	bool match = c->stdout_name &&
		     !memcmp(n->name, c->stdout_name, c->stdout_len) &&
		     n->name[c->stdout_len] == '\0';
	u64 base, size;

	if (!node_okay(n) || c->uart_matched)
		return;
	if (c->p->uart_base && !match)
		return;
	if (fdt_reg(n, 0, &base, &size))
		return;
	c->p->uart_base = base;
	c->uart_matched = match;
}

/* visit - fdt_walk() callback collecting struct platform */
static int visit(const struct fdt_node *n, void *ctx)
{
	struct walk_ctx *c = ctx;
	struct platform *p = c->p;
	const char *s;
	u32 i, len;

	if (n->depth == 1 && !strcmp(n->name, "chosen")) {
		p->bootargs = fdt_prop(n, "bootargs", NULL);
		p->stdout_path = fdt_prop(n, "stdout-path", NULL);
		if (!p->stdout_path)
			p->stdout_path = fdt_prop(n, "linux,stdout-path", NULL);
		if (p->stdout_path) {
			const char *base = p->stdout_path, *q;

			for (q = base; *q && *q != ':'; q++)
				if (*q == '/')
					base = q + 1;
			c->stdout_name = base;
			c->stdout_len = q - base;
		}
		return 0;
	}
	s = fdt_prop(n, "device_type", NULL);
	if (s && !strcmp(s, "memory") && node_okay(n)) {
		for (i = 0; p->nr_ram < PLAT_MAX_RAM; i++) {
			u64 a, sz;

			if (fdt_reg(n, i, &a, &sz))
				break;
			if (!sz)
				continue;
			p->ram_base[p->nr_ram] = a;
			p->ram_size[p->nr_ram++] = sz;
		}
		return 0;
	}
	if (fdt_is_compatible(n, "arm,gic-v3"))
		return visit_gic(n, p, 3);
	for (i = 0; i < ARRAY_SIZE(gic_v2_compat); i++)
		if (fdt_is_compatible(n, gic_v2_compat[i]))
			return visit_gic(n, p, 2);
	if (fdt_is_compatible(n, "arm,armv8-timer") ||
	    fdt_is_compatible(n, "arm,armv7-timer")) {
		c->timer_irqs = fdt_prop(n, "interrupts", &len);
		c->timer_irqs_len = c->timer_irqs ? len : 0;
		fdt_prop_u32(n, "clock-frequency", &p->timer_freq_hz);
		return 0;
	}
	if (fdt_is_compatible(n, "arm,psci-1.0") ||
	    fdt_is_compatible(n, "arm,psci-0.2")) {
		s = fdt_prop(n, "method", NULL);
		if (s && !strcmp(s, "hvc"))
			p->psci = PSCI_HVC;
		else if (s && !strcmp(s, "smc"))
			p->psci = PSCI_SMC;
		return 0;
	}
	if (fdt_is_compatible(n, "arm,pl011") ||
	    fdt_is_compatible(n, "arm,sbsa-uart")) {
		visit_uart(n, c);
		return 0;
	}
	if (fdt_is_compatible(n, "xen,xen"))
		p->xen = true;
	return 0;
}

/*
 * platform_probe - fill @p from the tree at @dtb
 *
 * Returns 0, -EINVAL for a bad tree, -ENODEV when RAM, a GIC or the timer
 * is missing. Timer "interrupts": secure phys, non-secure phys, virtual,
 * hypervisor, each <type number flags> with type 1 = PPI (INTID = 16 + n).
 */
int platform_probe(const void *dtb, struct platform *p)
{
	struct walk_ctx c = { .p = p };
	u32 cells, stride;
	int ret;

	memset(p, 0, sizeof(*p));
	ret = fdt_walk(dtb, visit, &c);
	if (ret)
		return ret < 0 ? ret : -EINVAL;
	if (!p->nr_ram || !p->gic_version)
		return -ENODEV;
	cells = p->gic_int_cells;
	stride = cells * 4;
	if (cells < 2 || c.timer_irqs_len < 3 * stride)
		return -ENODEV;
	if (fdt_be32(c.timer_irqs + 1 * stride) != 1 ||
	    fdt_be32(c.timer_irqs + 2 * stride) != 1)
		return -ENODEV;	/* not PPIs */
	p->timer_ppi_phys = 16 + fdt_be32(c.timer_irqs + 1 * stride + 4);
	p->timer_ppi_virt = 16 + fdt_be32(c.timer_irqs + 2 * stride + 4);
	p->have_timer = true;
	return 0;
}
