/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fdt.h - read-only walker for a flattened device tree (DTB, version 17)
 *
 * Arch-neutral: the arm64 probe finds RAM, GIC, timer, PSCI and the console
 * with it. Every read is 4-byte aligned (cells are big-endian u32), so it
 * also works before the MMU is on, when unaligned accesses fault.
 */
#ifndef IRQLAB_FDT_H
#define IRQLAB_FDT_H

#include "types.h"

#define FDT_MAGIC		0xd00dfeedu
#define FDT_MAX_DEPTH		16

/* one node as seen by the fdt_walk() visitor */
struct fdt_node {
	const void *fdt;
	u32 off;		/* offset of the node's FDT_BEGIN_NODE token */
	int depth;		/* root = 0 */
	const char *name;	/* unit name, "" for the root */
	const char *path_parent;	/* name of the parent node ("" = root) */
	u32 addr_cells;		/* #address-cells of the parent */
	u32 size_cells;		/* #size-cells of the parent */
};

/* visitor: return 0 to go on, anything else stops the walk with that value */
typedef int (*fdt_visit_fn)(const struct fdt_node *n, void *ctx);

/* fdt_be32 - big-endian 32-bit load (aligned) */
static inline u32 fdt_be32(const void *p)
{
	return __builtin_bswap32(*(const u32 *)p);
}

int fdt_check(const void *fdt, u32 *size_bytes);
int fdt_walk(const void *fdt, fdt_visit_fn visit, void *ctx);
const void *fdt_prop(const struct fdt_node *n, const char *name, u32 *len);
bool fdt_is_compatible(const struct fdt_node *n, const char *compat);
int fdt_reg(const struct fdt_node *n, u32 index, u64 *addr, u64 *size);
int fdt_prop_u32(const struct fdt_node *n, const char *name, u32 *val);
u64 fdt_cells(const void *p, u32 cells);

#endif /* IRQLAB_FDT_H */
