// SPDX-License-Identifier: Apache-2.0
/*
 * console.c - boot messages and console-sink frames
 *
 * Under Xen (the tree has a "xen,xen" node) the console is the
 * console_io hypercall: one trap per line, and it works for dom0 and for
 * domUs (their output appears prefixed "(dN)"). Otherwise a PL011/SBSA
 * UART from the tree (stdout-path first). With neither, output is dropped
 * and only the ring carries data.
 */
#include "hw.h"
#include "arm64.h"
#include "../lib/probe.h"

#define UART_DR			0x00
#define UART_FR			0x18
#define UART_FR_TXFF		(1u << 5)

#define XEN_HYPERCALL_TAG	0xea1
#define HYPERVISOR_console_io	18
#define CONSOLEIO_write		0

enum console_kind { CONSOLE_NONE, CONSOLE_UART, CONSOLE_XEN };

static enum console_kind kind;
static u64 uart_base;

/* xen_console_write - HYPERVISOR_console_io(CONSOLEIO_write, @len, @buf) */
static long xen_console_write(const char *buf, size_t len)
{
	register u64 x0 __asm__("x0") = CONSOLEIO_write;
	register u64 x1 __asm__("x1") = len;
	register u64 x2 __asm__("x2") = (u64)(uintptr_t)buf;
	register u64 x16 __asm__("x16") = HYPERVISOR_console_io;

	__asm__ __volatile__("hvc #0xea1"
			     : "+r"(x0) : "r"(x1), "r"(x2), "r"(x16) : "memory");
	return (long)x0;
}

/* uart_putc - wait for FIFO room, send @c */
static void uart_putc(char c)
{
	while (mmio_read32(uart_base + UART_FR) & UART_FR_TXFF)
		cpu_relax();
	mmio_write32(uart_base + UART_DR, (u8)c);
}

/* console_init - choose the console from @p; 0, or -ENODEV if none */
int console_init(const struct platform *p)
{
	if (p->xen && xen_console_write("", 0) >= 0) {
		kind = CONSOLE_XEN;
		return 0;
	}
	if (p->uart_base) {
		uart_base = p->uart_base;
		kind = CONSOLE_UART;
		return 0;
	}
	kind = CONSOLE_NONE;
	return -ENODEV;
}

/* arch_console_write - write @len bytes of @buf (a whole line if possible) */
void arch_console_write(const char *buf, size_t len)
{
	size_t i;

	if (kind == CONSOLE_XEN) {
		xen_console_write(buf, len);
		return;
	}
	if (kind == CONSOLE_UART)
		for (i = 0; i < len; i++)
			uart_putc(buf[i]);
}

/* console_putc - printk's byte sink */
void console_putc(char c)
{
	arch_console_write(&c, 1);
}

/* console_name - which console is in use, for the boot banner */
const char *console_name(void)
{
	return kind == CONSOLE_XEN ? "xen-console_io" :
	       kind == CONSOLE_UART ? "pl011" : "none";
}
