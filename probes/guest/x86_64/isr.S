/* SPDX-License-Identifier: Apache-2.0 */
/*
 * isr.S - interrupt entry stubs
 *
 * vector_stubs: 256 stubs, 16 bytes apart, each pushes (error code or 0,
 * vector) and jumps to fault_common, which calls the C fatal handler. The
 * timer and spurious vectors get their own stubs in the IDT instead.
 */

#define STUB_SIZE	16

	.text
	.p2align 4
	.globl vector_stubs
vector_stubs:
	.set	v, 0
	.rept	256
	.p2align 4
	.if	(v == 8) || (v == 10) || (v == 11) || (v == 12) || (v == 13) || (v == 14) || (v == 17) || (v == 21) || (v == 29) || (v == 30)
	/* the CPU pushed an error code */
	.else
	pushq	$0
	.endif
	pushq	$v
	jmp	fault_common
	.set	v, v + 1
	.endr

fault_common:
	pushq	%rax
	pushq	%rbx
	pushq	%rcx
	pushq	%rdx
	pushq	%rsi
	pushq	%rdi
	pushq	%rbp
	pushq	%r8
	pushq	%r9
	pushq	%r10
	pushq	%r11
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	movq	%rsp, %rdi		/* struct fault_frame * */
	andq	$-16, %rsp
	cld
	call	fault_handler		/* does not return */
1:	cli
	hlt
	jmp	1b

	/*
	 * timer_entry - LAPIC timer vector
	 *
	 * The TSC is read as early as possible: rdtsc needs rax/rdx, so the
	 * only instructions before it are the two pushes that preserve them.
	 * Plain rdtsc, not lfence;rdtsc or rdtscp: nothing of interest runs
	 * before it in this handler (interrupt delivery already ordered the
	 * interrupted code), a serializing read could only add delay to the
	 * timestamp, rdtscp's TSC_AUX is not needed and clobbers rcx, and
	 * software instruction emulators may not implement lfence/rdtscp.
	 *
	 * Stack alignment: the CPU aligns rsp to 16 and pushes 5 qwords; the
	 * 9 pushes below make 14 qwords, so rsp is 16-byte aligned at the call.
	 * Only caller-saved registers need saving: timer_isr() is C code.
	 */
	.p2align 4
	.globl timer_entry
timer_entry:
	pushq	%rax
	pushq	%rdx
	rdtsc
	shlq	$32, %rdx
	orq	%rdx, %rax
	pushq	%rcx
	pushq	%rsi
	pushq	%rdi
	pushq	%r8
	pushq	%r9
	pushq	%r10
	pushq	%r11
	movq	%rax, %rdi		/* entry_tsc */
	call	timer_isr
	popq	%r11
	popq	%r10
	popq	%r9
	popq	%r8
	popq	%rdi
	popq	%rsi
	popq	%rcx
	popq	%rdx
	popq	%rax
	iretq

	/* spurious_entry - LAPIC spurious vector: no EOI, just return */
	.p2align 4
	.globl spurious_entry
spurious_entry:
	iretq
