// SPDX-License-Identifier: Apache-2.0
/*
 * main.c - irqlab x86-64 guest probe: PVH boot, LAPIC timer, isa-debug-exit
 *
 * The measurement (schedule, injection, console sink, end of run) is
 * lib/probe.c; this file boots from hvm_start_info, places the ring at
 * GPA 0x400000, chooses the LAPIC timer mode and runs its interrupt.
 * Deadlines are TSC values.
 *
 * One-shot mode: TMICT counts APIC ticks, so at arm time the remaining TSC
 * ticks are converted with the calibrated ratio (rounded up, so the timer
 * does not fire early because of rounding). A remaining time beyond
 * 2^32 - 1 APIC ticks is armed in steps; an early step is not a sample.
 * Small negative latencies in one-shot mode are ratio error, not bugs.
 *
 * Console (sink=console and messages): COM1 under QEMU,
 * HYPERVISOR_console_io under Xen (console.c).
 */
#include "hw.h"
#include "x86.h"
#include "build_id.h"
#include "../lib/probe.h"
#include "../lib/ring.h"
#include "../lib/string.h"
#include "../lib/printf.h"

#define RING_BASE		0x400000UL

#define DEBUG_EXIT_PORT		0xf4
#define EXIT_DONE		0x10	/* QEMU exit status (0x10 << 1) | 1 = 33 */
#define EXIT_ERROR		0x11	/* QEMU exit status (0x11 << 1) | 1 = 35 */

#define HVM_START_MAGIC		0x336ec578u
#define E820_RAM		1

enum timer_req { TIMER_REQ_AUTO, TIMER_REQ_DEADLINE, TIMER_REQ_ONESHOT };

struct hvm_start_info {
	u32 magic;
	u32 version;
	u32 flags;
	u32 nr_modules;
	u64 modlist_paddr;
	u64 cmdline_paddr;
	u64 rsdp_paddr;
	u64 memmap_paddr;	/* version >= 1 */
	u32 memmap_entries;
	u32 reserved;
};

struct hvm_memmap_entry {
	u64 addr;
	u64 size;
	u32 type;
	u32 reserved;
};

static enum timer_req timer_req = TIMER_REQ_AUTO;
static u32 timer_mode;			/* enum ring_timer_mode */
static u64 apic_per_tick_q32;		/* one-shot: APIC ticks per TSC tick */
static bool oneshot_partial;		/* armed less than the full remainder */
static char cmdline_buf[512];

/* exit_qemu - isa-debug-exit with @code; halts if the device is absent */
static __noreturn void exit_qemu(u32 code)
{
	outl(DEBUG_EXIT_PORT, code);
	printk("irqlab-probe: isa-debug-exit absent, halting\n");
	for (;;)
		__asm__ __volatile__("cli; hlt");
}

/* arch_exit_done - samples reached: QEMU exit status 33 */
void arch_exit_done(void)
{
	exit_qemu(EXIT_DONE);
}

/* arch_exit_error - fatal error reported: QEMU exit status 35 */
void arch_exit_error(void)
{
	exit_qemu(EXIT_ERROR);
}

/* fault_handler - called by isr.S for any unexpected vector */
__noreturn void fault_handler(struct fault_frame *f);
__noreturn void fault_handler(struct fault_frame *f)
{
	probe_fatal(EFAULT, "unexpected vector %lu err 0x%lx rip 0x%lx rsp 0x%lx cr2 0x%lx",
		    f->vector, f->error_code, f->rip, f->rsp, read_cr2());
}

/* arch_param_parse - the x86 key timer=; 0, or -ENOENT for another key */
int arch_param_parse(const struct cmdline_word *w)
{
	if (strcmp(w->key, "timer"))
		return -ENOENT;
	if (!strcmp(w->val, "auto"))
		timer_req = TIMER_REQ_AUTO;
	else if (!strcmp(w->val, "deadline"))
		timer_req = TIMER_REQ_DEADLINE;
	else if (!strcmp(w->val, "oneshot"))
		timer_req = TIMER_REQ_ONESHOT;
	else
		probe_param_error(EINVAL, "timer=%s: expected auto, deadline or oneshot",
				  w->val);
	return 0;
}

/* arch_timer_arm_tick - program the LAPIC timer for TSC @deadline_tick */
void arch_timer_arm_tick(u64 deadline_tick)
{
	u64 now, remaining, apic;

	if (timer_mode == TIMER_TSC_DEADLINE) {
		wrmsr(MSR_IA32_TSC_DEADLINE, deadline_tick);
		return;
	}
	now = rdtsc();
	remaining = deadline_tick > now ? deadline_tick - now : 0;
	apic = (u64)(((unsigned __int128)remaining * apic_per_tick_q32 +
		      0xffffffffu) >> 32);
	oneshot_partial = apic > 0xffffffffULL;
	if (oneshot_partial)
		apic = 0xffffffffULL;
	if (!apic)
		apic = 1;
	lapic_write(APIC_TMICT, (u32)apic);
}

/* timer_isr - C part of the timer interrupt; @entry_tsc read at entry */
void timer_isr(u64 entry_tsc);
void timer_isr(u64 entry_tsc)
{
	bool last;

	if (oneshot_partial && entry_tsc < probe_deadline_tick()) {
		lapic_eoi();
		arch_timer_arm_tick(probe_deadline_tick());	/* long period: next step */
		return;
	}
	last = probe_timer_sample(entry_tsc);
	lapic_eoi();
	if (!last)
		probe_timer_rearm();
}

/* ram_covers - true if the PVH memory map has RAM over [@lo, @hi) */
static bool ram_covers(const struct hvm_start_info *si, u64 lo, u64 hi)
{
	const struct hvm_memmap_entry *e;
	u32 i;

	if (si->version < 1 || !si->memmap_paddr || !si->memmap_entries)
		return true;	/* no map given: assume the runner's 64 MiB */
	e = (const struct hvm_memmap_entry *)(uintptr_t)si->memmap_paddr;
	for (i = 0; i < si->memmap_entries; i++)
		if (e[i].type == E820_RAM && e[i].addr <= lo &&
		    e[i].addr + e[i].size >= hi)
			return true;
	return false;
}

/* boot_info - validate hvm_start_info at @si_pa, copy the command line */
static const struct hvm_start_info *boot_info(u64 si_pa)
{
	const struct hvm_start_info *si =
		(const struct hvm_start_info *)(uintptr_t)si_pa;

	if (!si_pa || si->magic != HVM_START_MAGIC)
		return NULL;
	if (si->cmdline_paddr)
		strlcpy(cmdline_buf, (const char *)(uintptr_t)si->cmdline_paddr,
			sizeof(cmdline_buf));
	return si;
}

static const char *const tick_names[] = {
	"?", "cpuid15", "cpuid16", "hv40000010", "pit", "cntfrq", "?", "xen-leaf",
};
static const char *const timer_names[] = { "?", "tsc-deadline", "oneshot" };

/* probe_main - C entry from entry.S with the hvm_start_info address */
void probe_main(u32 start_info_pa);
void probe_main(u32 start_info_pa)
{
	const u64 ring_end = RING_BASE + RING_BYTES(PROBE_RING_CAPACITY);
	const struct hvm_start_info *si;
	struct probe_clock clk;
	struct tick_info ti;
	char detail[32];
	u32 a, b, c, d, cpu;
	int ret;

	console_init();
	printf_set_console(console_putc);
	cpu_tables_init();
	printk("irqlab-probe %s console=%s\n", IRQLAB_BUILD_ID, console_name());

	si = boot_info(start_info_pa);
	if (si && !ram_covers(si, RING_BASE, ring_end))
		probe_fatal(ENOMEM, "guest RAM does not cover the ring 0x%lx..0x%lx",
			    RING_BASE, ring_end);
	cpuid(1, 0, &a, &b, &c, &d);
	cpu = b >> 24;		/* initial APIC ID */
	probe_ring_init((void *)RING_BASE, RING_ARCH_X86_64, cpu);
	if (!si)
		probe_fatal(EINVAL, "no PVH hvm_start_info (magic) at 0x%x",
			    start_info_pa);
	printk("irqlab-probe: cmdline \"%s\"\n", cmdline_buf);
	probe_parse_cmdline(cmdline_buf);
	probe_params_check();

	ret = lapic_init();
	if (ret)
		probe_fatal(ret, "no usable local APIC");
	pic_mask_all();
	switch (timer_req) {
	case TIMER_REQ_DEADLINE:
		if (!lapic_has_tsc_deadline())
			probe_fatal(ENODEV, "timer=deadline but CPUID.1:ECX.TSC_DEADLINE is 0");
		timer_mode = TIMER_TSC_DEADLINE;
		break;
	case TIMER_REQ_ONESHOT:
		timer_mode = TIMER_LAPIC_ONESHOT;
		break;
	default:
		timer_mode = lapic_has_tsc_deadline() ? TIMER_TSC_DEADLINE :
							TIMER_LAPIC_ONESHOT;
		break;
	}

	ret = tick_init(&ti, timer_mode == TIMER_LAPIC_ONESHOT);
	if (ret)
		probe_fatal(ret, "TSC/APIC timer calibration failed");
	apic_per_tick_q32 = ti.apic_per_tick_q32;

	snprintf(detail, sizeof(detail), "apic_hz=%lu", ti.apic_hz);
	clk = (struct probe_clock){
		.tick_hz = ti.tick_hz,
		.tick_method = ti.tick_method,
		.tick_name = tick_names[ti.tick_method],
		.timer_mode = timer_mode,
		.timer_name = timer_names[timer_mode],
		.ring_apic_hz = timer_mode == TIMER_LAPIC_ONESHOT ? ti.apic_hz : 0,
		.timer_detail = detail,
	};
	probe_start(&clk);

	ret = lapic_timer_start(timer_mode);
	if (ret)
		probe_fatal(ret, "cannot start LAPIC timer");
	probe_run();
}
