// SPDX-License-Identifier: Apache-2.0
/* fdt.c - read-only flattened device tree walker (see fdt.h) */
#include "fdt.h"
#include "string.h"

#define FDT_BEGIN_NODE		1
#define FDT_END_NODE		2
#define FDT_PROP		3
#define FDT_NOP			4
#define FDT_END			9

struct fdt_hdr {
	u32 magic, totalsize, off_dt_struct, off_dt_strings, off_mem_rsvmap;
	u32 version, last_comp_version, boot_cpuid_phys, size_dt_strings;
	u32 size_dt_struct;
};

/* hdr_field - big-endian header field @f of @fdt */
#define hdr_field(fdt, f) \
	fdt_be32((const u8 *)(fdt) + __builtin_offsetof(struct fdt_hdr, f))

/* align4 - round @v up to 4 bytes */
static u32 align4(u32 v)
{
	return (v + 3) & ~3u;
}

/* fdt_check - validate the header; 0 and *@size_bytes, or -EINVAL */
int fdt_check(const void *fdt, u32 *size_bytes)
{
	if (!fdt || ((uintptr_t)fdt & 7))
		return -EINVAL;
	if (hdr_field(fdt, magic) != FDT_MAGIC)
		return -EINVAL;
	if (hdr_field(fdt, last_comp_version) > 17)
		return -EINVAL;
	if (size_bytes)
		*size_bytes = hdr_field(fdt, totalsize);
	return 0;
}

/* fdt_cells - read a @cells-cell (1 or 2) big-endian number at @p */
u64 fdt_cells(const void *p, u32 cells)
{
	const u8 *b = p;

	if (cells == 1)
		return fdt_be32(b);
	return ((u64)fdt_be32(b) << 32) | fdt_be32(b + 4);
}

/* prop_next - step over the property at struct offset @off, return next */
static u32 prop_next(const u8 *st, u32 off)
{
	u32 len = fdt_be32(st + off + 4);

	return off + 12 + align4(len);
}

/* node_props - offset of the first token after the node name at @off */
static u32 node_props(const u8 *st, u32 off)
{
	const char *name = (const char *)st + off + 4;

	return off + 4 + align4(strlen(name) + 1);
}

/* fdt_prop - property @name of node @n (value, *@len bytes) or NULL */
const void *fdt_prop(const struct fdt_node *n, const char *name, u32 *len)
{
	const u8 *fdt = n->fdt;
	const u8 *st = fdt + hdr_field(fdt, off_dt_struct);
	const char *strs = (const char *)fdt + hdr_field(fdt, off_dt_strings);
	u32 off = node_props(st, n->off);

	for (;;) {
		u32 tok = fdt_be32(st + off);

		if (tok == FDT_NOP) {
			off += 4;
			continue;
		}
		if (tok != FDT_PROP)
			return NULL;
		if (!strcmp(strs + fdt_be32(st + off + 8), name)) {
			if (len)
				*len = fdt_be32(st + off + 4);
			return st + off + 12;
		}
		off = prop_next(st, off);
	}
}

/* fdt_is_compatible - true if @compat is one of @n's compatible strings */
bool fdt_is_compatible(const struct fdt_node *n, const char *compat)
{
	u32 len, pos = 0;
	const char *s = fdt_prop(n, "compatible", &len);

	if (!s)
		return false;
	while (pos < len) {
		if (!strcmp(s + pos, compat))
			return true;
		pos += strnlen(s + pos, len - pos) + 1;
	}
	return false;
}

/* fdt_reg - @index-th (address, size) pair of @n's reg; 0 or -ENODEV */
int fdt_reg(const struct fdt_node *n, u32 index, u64 *addr, u64 *size)
{
	u32 len, stride = (n->addr_cells + n->size_cells) * 4;
	const u8 *reg = fdt_prop(n, "reg", &len);

	if (!reg || !stride || n->addr_cells > 2 || n->size_cells > 2 ||
	    (index + 1) * stride > len)
		return -ENODEV;
	reg += index * stride;
	*addr = fdt_cells(reg, n->addr_cells);
	*size = n->size_cells ? fdt_cells(reg + n->addr_cells * 4,
					  n->size_cells) : 0;
	return 0;
}

/* fdt_prop_u32 - one-cell property @name of @n; 0, -ENODEV or -EINVAL */
int fdt_prop_u32(const struct fdt_node *n, const char *name, u32 *val)
{
	u32 len;
	const void *p = fdt_prop(n, name, &len);

	if (!p)
		return -ENODEV;
	if (len != 4)
		return -EINVAL;
	*val = fdt_be32(p);
	return 0;
}

/*
 * fdt_walk - call @visit for every node, depth first, with its parent's
 * #address-cells/#size-cells (defaults 2 and 1, as the spec says)
 *
 * Returns 0 after the last node, the visitor's non-zero value if it
 * stopped the walk, or -EINVAL for a malformed tree.
 */
int fdt_walk(const void *fdt, fdt_visit_fn visit, void *ctx)
{
	const u8 *st;
	u32 off, end, acells[FDT_MAX_DEPTH + 1], scells[FDT_MAX_DEPTH + 1];
	const char *names[FDT_MAX_DEPTH + 1];
	int depth = -1, ret;

	if (fdt_check(fdt, NULL))
		return -EINVAL;
	st = (const u8 *)fdt + hdr_field(fdt, off_dt_struct);
	end = hdr_field(fdt, size_dt_struct);
	off = 0;
	while (off < end) {
		u32 tok = fdt_be32(st + off);
		struct fdt_node n;
		u32 v;

		switch (tok) {
		case FDT_BEGIN_NODE:
			if (++depth > FDT_MAX_DEPTH)
				return -EINVAL;
			n.fdt = fdt;
			n.off = off;
			n.depth = depth;
			n.name = (const char *)st + off + 4;
			n.path_parent = depth ? names[depth - 1] : "";
			n.addr_cells = depth ? acells[depth - 1] : 2;
			n.size_cells = depth ? scells[depth - 1] : 1;
			names[depth] = n.name;
			/* this node's own cells, used by its children */
			acells[depth] = fdt_prop_u32(&n, "#address-cells", &v) ? 2 : v;
			scells[depth] = fdt_prop_u32(&n, "#size-cells", &v) ? 1 : v;
			ret = visit(&n, ctx);
			if (ret)
				return ret;
			off = node_props(st, off);
			break;
		case FDT_PROP:
			off = prop_next(st, off);
			break;
		case FDT_END_NODE:
			if (--depth < -1)
				return -EINVAL;
			off += 4;
			break;
		case FDT_NOP:
			off += 4;
			break;
		case FDT_END:
			return 0;
		default:
			return -EINVAL;
		}
	}
	return -EINVAL;
}
