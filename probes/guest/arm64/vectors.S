/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vectors.S - EL1 exception vectors
 *
 * Only an IRQ taken from EL1 with SP_EL1 is expected. Its first act reads
 * the counter the timer compares against (CNTVCT_EL0 for the virtual timer,
 * CNTPCT_EL0 for the physical one, chosen by irq_use_phys): exception entry
 * is context synchronising, so no ISB is needed before the read. Anything
 * else goes to fault_handler() with the vector number.
 */
	.macro	restore_regs
	ldp	x0, x1, [sp, #(8 * 0)]
	ldp	x2, x3, [sp, #(8 * 2)]
	ldp	x4, x5, [sp, #(8 * 4)]
	ldp	x6, x7, [sp, #(8 * 6)]
	ldp	x8, x9, [sp, #(8 * 8)]
	ldp	x10, x11, [sp, #(8 * 10)]
	ldp	x12, x13, [sp, #(8 * 12)]
	ldp	x14, x15, [sp, #(8 * 14)]
	ldp	x16, x17, [sp, #(8 * 16)]
	ldp	x18, x30, [sp, #(8 * 18)]
	add	sp, sp, #(8 * 20)
	.endm

	.macro	bad_vector num
	.balign	0x80
	sub	sp, sp, #(8 * 20)
	stp	x0, x1, [sp]
	mov	x0, #\num
	b	bad_common
	.endm

	.text
	.balign	0x800
	.global	vectors
vectors:
	bad_vector 0		/* current EL, SP_EL0: sync */
	bad_vector 1		/* irq */
	bad_vector 2		/* fiq */
	bad_vector 3		/* serror */
	bad_vector 4		/* current EL, SP_ELx: sync */
	.balign	0x80		/* 5: current EL, SP_ELx: irq */
	sub	sp, sp, #(8 * 20)
	stp	x0, x1, [sp]
	adrp	x0, irq_use_phys
	ldrb	w0, [x0, :lo12:irq_use_phys]
	cbnz	w0, 1f
	mrs	x0, cntvct_el0
	b	irq_common
1:	mrs	x0, cntpct_el0
	b	irq_common
	bad_vector 6		/* fiq */
	bad_vector 7		/* serror */
	bad_vector 8		/* lower EL, aarch64 */
	bad_vector 9
	bad_vector 10
	bad_vector 11
	bad_vector 12		/* lower EL, aarch32 */
	bad_vector 13
	bad_vector 14
	bad_vector 15

/* irq_common - x0 = counter at entry, x0/x1 already saved at [sp] */
irq_common:
	stp	x2, x3, [sp, #(8 * 2)]
	stp	x4, x5, [sp, #(8 * 4)]
	stp	x6, x7, [sp, #(8 * 6)]
	stp	x8, x9, [sp, #(8 * 8)]
	stp	x10, x11, [sp, #(8 * 10)]
	stp	x12, x13, [sp, #(8 * 12)]
	stp	x14, x15, [sp, #(8 * 14)]
	stp	x16, x17, [sp, #(8 * 16)]
	stp	x18, x30, [sp, #(8 * 18)]
	bl	irq_handler
	restore_regs
	eret

/* bad_common - x0 = vector number; never returns */
bad_common:
	stp	x2, x3, [sp, #(8 * 2)]
	mrs	x1, esr_el1
	mrs	x2, elr_el1
	mrs	x3, far_el1
	bl	fault_handler
	b	.
