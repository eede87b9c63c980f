/* SPDX-License-Identifier: Apache-2.0 */
/*
 * probe.h - the architecture-neutral probe: boot parameters, the
 * measurement loop, self-check injection, console sink, end of run
 *
 * lib/probe.c owns the ring, the schedule (deadline_tick, seq) and the
 * state shared with the timer interrupt; each architecture (<arch>/main.c)
 * boots, finds its counter and timer, places the ring and calls, in order:
 *
 *   probe_parse_cmdline()   boot parameters (errors kept, not yet fatal)
 *   probe_ring_init()       the ring exists: errors can be reported there
 *   probe_params_check()    fatal with the first boot parameter error
 *   probe_start()           ticks from ns, ring header, boot line
 *   probe_run()             arm the first deadline, main loop, never returns
 *
 * and from its timer interrupt probe_timer_sample() + probe_timer_rearm().
 *
 * The architecture provides the functions declared at the end of this file
 * and, as static inlines in <arch>/arch.h (found through -I<arch>), the
 * hot-path ones: arch_counter_read_tick(), arch_irq_disable(),
 * arch_irq_enable(), arch_idle_wait(), arch_cpu_relax(),
 * arch_wait_u32_set() (the start gate) and the macro
 * ARCH_IDLE_NAME ("hlt" or "wfi", the name of idle=hlt on the boot line).
 */
#ifndef IRQLAB_PROBE_H
#define IRQLAB_PROBE_H

#include "types.h"
#include "cmdline.h"

#define PROBE_RING_CAPACITY	65536u	/* records: 2 MiB */

enum probe_sink { SINK_RING, SINK_CONSOLE };

/* the architecture-neutral boot parameters (docs/formats.md section 1) */
struct probe_params {
	u64 period_ns;
	u32 idle;			/* enum ring_idle */
	u64 inject_irqoff_ns;
	u64 inject_every;		/* periods; 0 = never */
	u64 samples;			/* 0 = run until killed */
	enum probe_sink sink;
	bool gate;			/* wait for ring_hdr.start_gate before sampling */
};

/* how the architecture counts and interrupts, for the ring and boot line */
struct probe_clock {
	u64 tick_hz;			/* counter rate */
	u32 tick_method;		/* enum ring_tick_method */
	const char *tick_name;		/* how tick_hz was found */
	u32 timer_mode;			/* enum ring_timer_mode */
	const char *timer_name;
	u64 ring_apic_hz;		/* ring header apic_hz (0 unless one-shot) */
	const char *timer_detail;	/* boot line field after timer=, e.g. "intid=27" */
	u32 ref_counter;		/* enum ring_ref_counter (0: none) */
	s64 ref_offset_tick;		/* ref counter - this counter */
	u32 ref_offset_err_tick;	/* bound of ref_offset_tick */
};

int probe_parse_cmdline(const char *line);
__attribute__((format(printf, 2, 3)))
void probe_param_error(int err, const char *fmt, ...);
const struct probe_params *probe_params(void);
int probe_ring_init(void *base, u32 arch, u32 cpu);
void probe_params_check(void);
void probe_start(const struct probe_clock *clk);
__noreturn void probe_run(void);

u64 probe_deadline_tick(void);
bool probe_done(void);
bool probe_timer_sample(u64 entry_tick);
void probe_timer_rearm(void);

__noreturn __attribute__((format(printf, 2, 3)))
void probe_fatal(int err, const char *fmt, ...);

/* provided by each architecture (<arch>/main.c, <arch>/console.c) */
int arch_param_parse(const struct cmdline_word *w);
void arch_timer_arm_tick(u64 deadline_tick);
void arch_console_write(const char *buf, size_t len);
__noreturn void arch_exit_done(void);
__noreturn void arch_exit_error(void);

#endif /* IRQLAB_PROBE_H */
