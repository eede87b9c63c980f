// SPDX-License-Identifier: Apache-2.0
/*
 * console.c - boot messages and console-sink frames: COM1 or Xen console_io
 *
 * Under Xen (CPUID leaf 0x40000x00 signature "XenVMMXenVMM", at the first
 * 0x100-aligned leaf from 0x40000000) COM1 belongs to the hypervisor, so
 * text goes through HYPERVISOR_console_io(CONSOLEIO_write, len, buf): one
 * hypercall per line, and Xen prints dom0's lines on its own console. The
 * hypercall is reached through the hypercall page: the guest writes the
 * physical address of a page to the MSR whose number leaf 0x40000x02 EBX
 * gives, and Xen fills that page with one 32-byte stub per hypercall
 * (xen/include/public/arch-x86/cpuid.h, xen-x86_64.h: arguments in rdi,
 * rsi, rdx, result in rax, argument registers clobbered).
 *
 * Otherwise COM1 (serial.c), as under plain QEMU. Only the main loop and
 * boot/end code write here, never the interrupt handler.
 */
#include "hw.h"
#include "x86.h"
#include "../lib/probe.h"

#define XEN_CPUID_FIRST		0x40000000u
#define XEN_CPUID_LAST		0x40010000u
#define XEN_CPUID_STEP		0x100u
#define XEN_SIG_EBX		0x566e6558u	/* "XenV" */
#define XEN_SIG_ECX		0x65584d4du	/* "MMXe" */
#define XEN_SIG_EDX		0x4d4d566eu	/* "nVMM" */

#define HYPERCALL_STUB_LEN	32
#define HYPERVISOR_console_io	18
#define CONSOLEIO_write		0

#define LINE_BUF_LEN		128	/* printk bytes per hypercall */

enum console_kind { CONSOLE_UART, CONSOLE_XEN };

static enum console_kind kind;
static u8 hypercall_page[4096] __aligned(4096);
static char line_buf[LINE_BUF_LEN];
static size_t line_len;

/* xen_cpuid_base - first Xen CPUID leaf (0x40000x00), 0 when not under Xen */
u32 xen_cpuid_base(void)
{
	u32 leaf, a, b, c, d;

	for (leaf = XEN_CPUID_FIRST; leaf < XEN_CPUID_LAST; leaf += XEN_CPUID_STEP) {
		cpuid(leaf, 0, &a, &b, &c, &d);
		if (b == XEN_SIG_EBX && c == XEN_SIG_ECX && d == XEN_SIG_EDX &&
		    a - leaf >= 2)
			return leaf;
	}
	return 0;
}

/* xen_console_io - HYPERVISOR_console_io(@cmd, @len, @buf) via the page */
static long xen_console_io(u64 cmd, u64 len, const char *buf)
{
	void *stub = hypercall_page + HYPERVISOR_console_io * HYPERCALL_STUB_LEN;
	register u64 rdi __asm__("rdi") = cmd;
	register u64 rsi __asm__("rsi") = len;
	register u64 rdx __asm__("rdx") = (u64)(uintptr_t)buf;
	long ret;

	__asm__ __volatile__("call *%[stub]"
			     : "=a"(ret), "+r"(rdi), "+r"(rsi), "+r"(rdx)
			     : [stub] "r"(stub)
			     : "rcx", "r8", "r9", "r10", "r11", "memory", "cc");
	return ret;
}

/* xen_init - set up the hypercall page; 0, or -ENODEV when not under Xen */
static int xen_init(void)
{
	u32 base = xen_cpuid_base(), a, b, c, d;

	if (!base)
		return -ENODEV;
	cpuid(base + 2, 0, &a, &b, &c, &d);	/* EAX pages, EBX MSR base */
	if (!a || !b)
		return -ENODEV;
	wrmsr(b, (u64)(uintptr_t)hypercall_page);
	if (xen_console_io(CONSOLEIO_write, 0, "") < 0)
		return -ENODEV;
	return 0;
}

/* console_init - Xen console_io under Xen, else COM1; 0 */
int console_init(void)
{
	serial_init();
	kind = xen_init() ? CONSOLE_UART : CONSOLE_XEN;
	return 0;
}

/* arch_console_write - write @len bytes of @buf (a whole line if possible) */
void arch_console_write(const char *buf, size_t len)
{
	size_t i;

	if (kind == CONSOLE_XEN) {
		xen_console_io(CONSOLEIO_write, len, buf);
		return;
	}
	for (i = 0; i < len; i++)
		serial_putc(buf[i]);
}

/* console_putc - printk's byte sink: line-buffered under Xen */
void console_putc(char c)
{
	if (kind != CONSOLE_XEN) {
		serial_putc(c);
		return;
	}
	line_buf[line_len++] = c;
	if (c == '\n' || line_len == sizeof(line_buf)) {
		xen_console_io(CONSOLEIO_write, line_len, line_buf);
		line_len = 0;
	}
}

/* console_name - which console is in use, for the boot banner */
const char *console_name(void)
{
	return kind == CONSOLE_XEN ? "xen-console_io" : "com1";
}
