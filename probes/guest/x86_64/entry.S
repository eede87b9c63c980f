/* SPDX-License-Identifier: Apache-2.0 */
/*
 * entry.S - PVH entry, identity page tables, switch to long mode
 *
 * QEMU's -kernel finds the XEN_ELFNOTE_PHYS32_ENTRY note and starts us in
 * 32-bit flat protected mode, paging off, ebx = hvm_start_info physical
 * address, no usable stack. The 32-bit part is deliberately minimal (no
 * stack, no iret, no loops: the page tables are static data) because some
 * software KVM backends emulate 32-bit code poorly. Everything is linked
 * and runs identity-mapped below 4 MiB.
 */

#define XEN_ELFNOTE_PHYS32_ENTRY	18

#define X86_CR0_PE	0x00000001
#define X86_CR0_PG	0x80000000
#define X86_CR4_PAE	0x00000020
#define MSR_EFER	0xc0000080
#define EFER_LME	0x00000100

#define PTE_P		0x001
#define PTE_W		0x002
#define PTE_PWT		0x008
#define PTE_PCD		0x010
#define PTE_PS		0x080

#define KERNEL_CS	0x08
#define KERNEL_DS	0x10

	.section .note.pvh, "a", @note
	.p2align 2
	.long 4				/* namesz: "Xen\0" */
	.long 4				/* descsz */
	.long XEN_ELFNOTE_PHYS32_ENTRY
	.asciz "Xen"
	.long pvh_start32		/* 32-bit physical entry */

	.section .text.boot, "ax"
	.code32
	.globl pvh_start32
pvh_start32:
	movl	%ebx, pvh_start_info_pa
	lgdt	gdt64_desc
	movl	$pml4, %eax
	movl	%eax, %cr3
	movl	%cr4, %eax
	orl	$X86_CR4_PAE, %eax
	movl	%eax, %cr4
	movl	$MSR_EFER, %ecx
	rdmsr
	orl	$EFER_LME, %eax
	wrmsr
	movl	%cr0, %eax
	orl	$(X86_CR0_PG | X86_CR0_PE), %eax
	movl	%eax, %cr0
	ljmp	$KERNEL_CS, $start64

	.code64
start64:
	movl	$KERNEL_DS, %eax
	movw	%ax, %ds
	movw	%ax, %es
	movw	%ax, %ss
	movw	%ax, %fs
	movw	%ax, %gs
	leaq	boot_stack_top(%rip), %rsp
	cld
	/* .bss (stack included) is not guaranteed to be zero: clear it */
	leaq	__bss_start(%rip), %rdi
	leaq	__bss_end(%rip), %rcx
	subq	%rdi, %rcx
	shrq	$3, %rcx
	xorl	%eax, %eax
	rep stosq
	movl	pvh_start_info_pa(%rip), %edi
	call	probe_main
1:	cli
	hlt
	jmp	1b

	.section .data
	.p2align 3
	.globl pvh_start_info_pa
pvh_start_info_pa:
	.quad	0

	.globl gdt64
gdt64:
	.quad	0			/* 0x00 null */
	.quad	0x00af9a000000ffff	/* 0x08 64-bit code, DPL0 */
	.quad	0x00cf92000000ffff	/* 0x10 data, DPL0 */
	.quad	0, 0			/* 0x18 64-bit TSS, filled by gdt_init_tss */
gdt64_end:
	.p2align 3
	.word	0
gdt64_desc:
	.word	gdt64_end - gdt64 - 1
	.quad	gdt64

	/*
	 * Identity map of the first 4 GiB with 2 MiB pages (1 GiB pages need
	 * pdpe1gb, absent from QEMU's default CPU models). 3..4 GiB (LAPIC,
	 * IOAPIC, PCI holes) is mapped uncached (PCD|PWT).
	 */
	.section .data.pgtable, "aw"
	.p2align 12
	.globl pml4
pml4:
	.quad	pdpt + PTE_P + PTE_W
	.fill	511, 8, 0
pdpt:
	.quad	pd + 0x0000 + PTE_P + PTE_W
	.quad	pd + 0x1000 + PTE_P + PTE_W
	.quad	pd + 0x2000 + PTE_P + PTE_W
	.quad	pd + 0x3000 + PTE_P + PTE_W
	.fill	508, 8, 0
pd:
	.set	i, 0
	.rept	2048
	.if	i < 1536
	.quad	(i << 21) + PTE_P + PTE_W + PTE_PS
	.else
	.quad	(i << 21) + PTE_P + PTE_W + PTE_PS + PTE_PCD + PTE_PWT
	.endif
	.set	i, i + 1
	.endr

	.section .bss
	.p2align 12
boot_stack:
	.skip	16384
	.globl boot_stack_top
boot_stack_top:
