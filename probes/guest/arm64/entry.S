/* SPDX-License-Identifier: Apache-2.0 */
/*
 * entry.S - arm64 Linux Image header and entry at EL1
 *
 * Boot protocol (Linux Documentation/arch/arm64/booting.rst): entered at
 * the Image's first byte with the MMU off, x0 = physical address of the
 * device tree. The same file boots under QEMU -kernel, KVM (QEMU,
 * kvmtool) and Xen (dom0, domU, dom0less) because all of them implement
 * that protocol. The image is linked at 0 and position independent: it
 * applies its own R_AARCH64_RELATIVE relocations, so any 2 MiB-aligned
 * load address works (QEMU and Xen use RAM 0x40000000, kvmtool 0x80000000).
 */
#define R_AARCH64_RELATIVE	1027

	.section .text.head, "ax"
	.global _head
_head:
	b	primary_entry		/* code0 */
	.long	0			/* code1 */
	.quad	0			/* text_offset: load at a 2 MiB boundary */
	.quad	__image_size		/* image_size, bss and stacks included */
	.quad	0xa			/* flags: LE, 4 KiB pages, anywhere in RAM */
	.quad	0			/* res2 */
	.quad	0			/* res3 */
	.quad	0			/* res4 */
	.ascii	"ARM\x64"		/* magic */
	.long	0			/* res5 */

	.text
primary_entry:
	mov	x19, x0			/* DTB physical address */
	msr	daifset, #0xf
	/* EL2 entry (KVM nVHE host-less boards, Xen absent): not supported */
	mrs	x1, CurrentEL
	cmp	x1, #(1 << 2)
	b.ne	.Lhang

	/* apply R_AARCH64_RELATIVE: *(base + off) = base + addend */
	adr	x20, _head
	adrp	x1, __rela_start
	add	x1, x1, :lo12:__rela_start
	adrp	x2, __rela_end
	add	x2, x2, :lo12:__rela_end
1:	cmp	x1, x2
	b.hs	2f
	ldp	x3, x4, [x1], #16	/* r_offset, r_info */
	ldr	x5, [x1], #8		/* r_addend */
	cmp	x4, #R_AARCH64_RELATIVE
	b.ne	1b
	add	x5, x5, x20
	str	x5, [x20, x3]
	b	1b
2:
	/* clear bss (the loader only guarantees image_size is free) */
	adrp	x1, __bss_start
	add	x1, x1, :lo12:__bss_start
	adrp	x2, __bss_end
	add	x2, x2, :lo12:__bss_end
3:	cmp	x1, x2
	b.hs	4f
	str	xzr, [x1], #8
	b	3b
4:
	msr	spsel, #1		/* EL1h: exceptions and code share SP_EL1 */
	adrp	x1, __stack_top
	add	x1, x1, :lo12:__stack_top
	mov	sp, x1
	adrp	x1, vectors
	add	x1, x1, :lo12:vectors
	msr	vbar_el1, x1
	/* FP/SIMD accesses would trap: the probe is built without them */
	isb
	mov	x0, x19
	mov	x1, x20
	bl	probe_main
.Lhang:
	wfe
	b	.Lhang
