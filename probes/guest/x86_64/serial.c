// SPDX-License-Identifier: Apache-2.0
/* serial.c - polled COM1 output (boot, error and end messages only) */
#include "hw.h"
#include "x86.h"

#define COM1		0x3f8
#define UART_THR	0
#define UART_IER	1
#define UART_FCR	2
#define UART_LCR	3
#define UART_MCR	4
#define UART_LSR	5
#define UART_LSR_THRE	0x20

/* serial_init - 115200 8n1, FIFOs on, interrupts off */
int serial_init(void)
{
	outb(COM1 + UART_IER, 0x00);
	outb(COM1 + UART_LCR, 0x80);		/* DLAB */
	outb(COM1 + 0, 0x01);			/* divisor 1 = 115200 baud */
	outb(COM1 + 1, 0x00);
	outb(COM1 + UART_LCR, 0x03);		/* 8n1 */
	outb(COM1 + UART_FCR, 0xc7);
	outb(COM1 + UART_MCR, 0x03);
	return 0;
}

/* serial_putc - wait (bounded) for the transmitter, send @c */
void serial_putc(char c)
{
	unsigned int spins = 100000;

	while (!(inb(COM1 + UART_LSR) & UART_LSR_THRE) && --spins)
		cpu_relax();
	outb(COM1 + UART_THR, (u8)c);
}
