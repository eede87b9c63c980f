// SPDX-License-Identifier: Apache-2.0
/*
 * probe.c - the measurement, the same on every architecture
 *
 * The schedule is kept in counter ticks: deadline[n+1] = deadline[n] +
 * period (no drift). The interrupt entry's first act reads the counter the
 * timer compares against; the sample (deadline, entry) goes to the ring
 * (docs/formats.md section 2). Latency = entry_tick - deadline_tick.
 *
 * Self-check injection (inject_every = N > 0 and inject_irqoff_ns = D > 0):
 *   The sample with seq k is injected when (k + 1) % N == 0, i.e. the Nth,
 *   2Nth, ... sample (1-based). Once sample k-1 is recorded, the main loop
 *   polls with interrupts enabled until counter >= deadline_k - margin
 *   (margin = period/4), disables interrupts, verifies the interrupt for k
 *   has not been taken yet (otherwise the injection is skipped, counted as
 *   missed, and the record is not flagged), spins until counter >=
 *   deadline_k + D (D in ticks, header field inject_irqoff_tick), then
 *   enables interrupts. The record for k carries flag bit 0 and, because
 *   the interrupt cannot be taken before the spin ends, entry_tick -
 *   deadline_tick > inject_irqoff_tick: D is a strict lower bound of an
 *   injected sample's latency; the excess over D is the normal delivery
 *   latency of an already pending interrupt (on arm64, with a coarser
 *   counter, >= D: docs/arm64.md). Interrupts are off for margin + D in
 *   total. With idle=hlt/wfi the wait before the spin polls
 *   instead of sleeping (there is no second timer to wake us).
 *
 * Sinks: the ring is always written. With sink=console the main loop also
 * copies it to the console as framed lines (lib/frame.c, docs/formats.md
 * section 7) in batches of CONSOLE_BATCH samples, between interrupts and
 * with interrupts enabled, never from the interrupt handler (whose cost is
 * unchanged), for hosts that cannot map guest RAM. The H and T frames are
 * repeated every HEADER_REPEAT_S (console_sink_repeat) so that a host
 * attaching to a running board can decode what follows.
 */
#include "probe.h"
#include "arch.h"	/* <arch>/arch.h: the inline part of the arch interface */
#include "build_id.h"
#include "ring.h"
#include "string.h"
#include "printf.h"
#include "frame.h"

#define PERIOD_NS_MIN		1000UL
#define PERIOD_NS_MAX		(60 * NSEC_PER_SEC)
#define IRQOFF_NS_MAX		(10 * NSEC_PER_SEC)

#define CONSOLE_BATCH		16	/* samples per console flush */
#define HEADER_REPEAT_S		1	/* H + T frames again every this many s */

/* state shared between the main loop and the timer interrupt */
struct probe_state {
	u64 tick_hz;
	u64 period_tick;
	u64 irqoff_tick;
	u64 inject_margin_tick;
	volatile u64 deadline_tick;	/* deadline of sample `seq` */
	volatile u64 seq;		/* next sample number */
	volatile u32 pending_flags;	/* flags for record `seq` */
	volatile bool done;
	u64 injected_seq;		/* last seq handled by the injector */
	u64 injections, injections_missed;
	/* end-of-run summary (console only) */
	s64 lat_min, lat_max, lat_sum;
	u64 lat_n;
	s64 inj_lat_min;
};

static struct probe_params params = {
	.period_ns = 1000000, .idle = IDLE_HLT, .sink = SINK_RING,
};
static int param_err;			/* first boot parameter error */
static char param_msg[RING_MESSAGE_LEN];
static struct ring ring;
static bool ring_ready;
static struct probe_state P;
static struct frame_out fout = { .write = arch_console_write };
static bool header_sent;
static u64 console_next;		/* next seq to copy to the console */
static u64 header_repeat_tick;		/* deadline after which H + T repeat */

/* console_sink_state - header (once) and state frames for sink=console */
static void console_sink_state(void)
{
	if (params.sink != SINK_CONSOLE || !ring_ready)
		return;
	if (!header_sent) {
		frame_header(&fout, &ring);
		header_sent = true;
	}
	frame_state(&fout, &ring);
}

/*
 * console_sink_repeat - H and T frames again once per HEADER_REPEAT_S
 *
 * A host attaching to a console that is already running (a board's UART)
 * needs the tick rate and period of the H frame to decode S frames: it
 * gets them within HEADER_REPEAT_S. Paced by the sample schedule, so it
 * costs a compare per loop and ~125 bytes per second whatever the period
 * (1.5-2 % of the frame bytes at a 1 ms period).
 * Returns 0 (sent, or not due yet) or the frame writer's -errno.
 */
static int console_sink_repeat(void)
{
	u64 deadline = P.deadline_tick;
	int ret;

	if (params.sink != SINK_CONSOLE || !header_sent)
		return 0;
	if (!header_repeat_tick)
		header_repeat_tick = deadline + HEADER_REPEAT_S * P.tick_hz;
	if ((s64)(deadline - header_repeat_tick) < 0)
		return 0;
	header_repeat_tick = deadline + HEADER_REPEAT_S * P.tick_hz;
	ret = frame_header(&fout, &ring);
	return ret ? ret : frame_state(&fout, &ring);
}

/* console_sink_flush - copy ring records to the console; @all: no batching */
static void console_sink_flush(bool all)
{
	u64 head;

	if (params.sink != SINK_CONSOLE || !header_sent)
		return;
	for (;;) {
		head = READ_ONCE(ring.hdr->head);
		if (head - console_next > PROBE_RING_CAPACITY)
			console_next = head - PROBE_RING_CAPACITY;	/* lapped: a gap */
		if (head == console_next ||
		    (!all && head - console_next < CONSOLE_BATCH))
			return;
		frame_samples(&fout, &ring, &console_next, head);
	}
}

/* probe_fatal - record @err in the ring (and console), print it, exit */
void probe_fatal(int err, const char *fmt, ...)
{
	char msg[RING_MESSAGE_LEN];
	va_list ap;

	arch_irq_disable();
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (err < 0)
		err = -err;
	if (ring_ready) {
		ring_set_error(&ring, (u32)err, "%s", msg);
		console_sink_flush(true);
		console_sink_state();
	}
	printk("irqlab-probe: error %d: %s\n", err, msg);
	arch_exit_error();
}

/*
 * probe_param_error - remember the first boot parameter error
 *
 * Parameters are parsed before the ring may exist (on arm64 sink= decides
 * where it goes), so errors are reported once it does, by
 * probe_params_check(): the host reads them there.
 */
void probe_param_error(int err, const char *fmt, ...)
{
	va_list ap;

	if (param_err)
		return;
	param_err = err < 0 ? -err : err;
	va_start(ap, fmt);
	vsnprintf(param_msg, sizeof(param_msg), fmt, ap);
	va_end(ap);
}

/* parse_word - apply one key=value boot parameter; errors to probe_param_error */
static void parse_word(const struct cmdline_word *w)
{
	u64 *num = NULL;
	int ret;

	if (!strcmp(w->key, "period_ns"))
		num = &params.period_ns;
	else if (!strcmp(w->key, "inject_irqoff_ns"))
		num = &params.inject_irqoff_ns;
	else if (!strcmp(w->key, "inject_every"))
		num = &params.inject_every;
	else if (!strcmp(w->key, "samples"))
		num = &params.samples;
	else if (!strcmp(w->key, "idle")) {
		if (!strcmp(w->val, ARCH_IDLE_NAME) || !strcmp(w->val, "hlt"))
			params.idle = IDLE_HLT;
		else if (!strcmp(w->val, "poll"))
			params.idle = IDLE_POLL;
		else
			probe_param_error(EINVAL, "idle=%s: expected %s or poll",
					  w->val, ARCH_IDLE_NAME);
	} else if (!strcmp(w->key, "gate")) {
		if (!strcmp(w->val, "0") || !strcmp(w->val, "1"))
			params.gate = w->val[0] == '1';
		else
			probe_param_error(EINVAL, "gate=%s: expected 0 or 1", w->val);
	} else if (!strcmp(w->key, "sink")) {
		if (!strcmp(w->val, "ring"))
			params.sink = SINK_RING;
		else if (!strcmp(w->val, "console"))
			params.sink = SINK_CONSOLE;
		else
			probe_param_error(EINVAL, "sink=%s: expected ring or console",
					  w->val);
	} else if (arch_param_parse(w) == -ENOENT) {
		probe_param_error(EINVAL, "unknown boot parameter '%s'", w->key);
	}
	if (num) {
		ret = parse_u64(w->val, num);
		if (ret)
			probe_param_error(ret, "%s=%s: not a number", w->key, w->val);
	}
}

/* probe_parse_cmdline - set the boot parameters from @line; 0 or the first error */
int probe_parse_cmdline(const char *line)
{
	struct cmdline_word w;
	const char *pos = line;
	int ret;

	while ((ret = cmdline_next(&pos, &w)) != 0) {
		if (ret < 0)
			probe_param_error(ret, "boot parameter too long near '%s'", w.key);
		else if (!w.has_value)
			probe_param_error(EINVAL, "boot parameter '%s' has no '=value'",
					  w.key);
		else
			parse_word(&w);
	}
	if (params.period_ns < PERIOD_NS_MIN || params.period_ns > PERIOD_NS_MAX)
		probe_param_error(ERANGE, "period_ns=%lu outside [%lu, %lu]",
				  params.period_ns, PERIOD_NS_MIN, PERIOD_NS_MAX);
	if (params.inject_irqoff_ns > IRQOFF_NS_MAX)
		probe_param_error(ERANGE, "inject_irqoff_ns=%lu above %lu",
				  params.inject_irqoff_ns, IRQOFF_NS_MAX);
	if (params.inject_every > 0xffffffffULL)
		probe_param_error(ERANGE, "inject_every=%lu does not fit 32 bits",
				  params.inject_every);
	return -param_err;
}

/* probe_params - the boot parameters as parsed (defaults before) */
const struct probe_params *probe_params(void)
{
	return &params;
}

/* probe_ring_init - the ring at @base; from here errors are reported in it */
int probe_ring_init(void *base, u32 arch, u32 cpu)
{
	int ret;

	ret = ring_init(&ring, base, PROBE_RING_CAPACITY, arch, IRQLAB_BUILD_ID,
			cpu);
	ring_ready = true;
	return ret;
}

/* probe_params_check - fatal with the first boot parameter error, if any */
void probe_params_check(void)
{
	if (param_err)
		probe_fatal(param_err, "%s", param_msg);
}

/* ns_to_tick - convert @ns to ticks at @hz */
static u64 ns_to_tick(u64 ns, u64 hz)
{
	return muldiv64(ns, hz, NSEC_PER_SEC);
}

/* tick_to_ns - convert signed @tick to ns at @hz */
static s64 tick_to_ns(s64 tick, u64 hz)
{
	if (tick < 0)
		return -(s64)muldiv64((u64)-tick, NSEC_PER_SEC, hz);
	return (s64)muldiv64((u64)tick, NSEC_PER_SEC, hz);
}

/* probe_start - schedule in @clk ticks, ring timing/config, the boot line */
void probe_start(const struct probe_clock *clk)
{
	P.tick_hz = clk->tick_hz;
	P.period_tick = ns_to_tick(params.period_ns, clk->tick_hz);
	P.irqoff_tick = params.inject_every ?
			ns_to_tick(params.inject_irqoff_ns, clk->tick_hz) : 0;
	P.inject_margin_tick = P.period_tick / 4 ? P.period_tick / 4 : 1;
	P.injected_seq = ~0ULL;
	P.lat_min = INT64_MAX;
	P.lat_max = INT64_MIN;
	P.inj_lat_min = INT64_MAX;
	if (!P.period_tick)
		probe_fatal(ERANGE, "period_ns=%lu is below one tick", params.period_ns);

	ring_set_timing(&ring, clk->tick_hz, clk->tick_method, clk->timer_mode,
			P.period_tick, clk->ring_apic_hz);
	ring_set_config(&ring, params.idle, (u32)params.inject_every,
			params.inject_every ? P.irqoff_tick : 0);
	if (clk->ref_counter)
		ring_set_ref_counter(&ring, clk->ref_counter, clk->ref_offset_tick,
				     clk->ref_offset_err_tick);
	printk("irqlab-probe: cpu=%u tick_hz=%lu (%s) timer=%s %s period=%lu ticks idle=%s samples=%lu inject_every=%lu inject_irqoff=%lu ticks sink=%s\n",
	       ring.cpu, clk->tick_hz, clk->tick_name, clk->timer_name,
	       clk->timer_detail, P.period_tick,
	       params.idle == IDLE_HLT ? ARCH_IDLE_NAME : "poll", params.samples,
	       params.inject_every, P.irqoff_tick,
	       params.sink == SINK_CONSOLE ? "console" : "ring");
}

/* probe_deadline_tick - the deadline of the next sample */
u64 probe_deadline_tick(void)
{
	return P.deadline_tick;
}

/* probe_done - true once the last sample is recorded */
bool probe_done(void)
{
	return P.done;
}

/*
 * probe_timer_sample - record the sample taken at @entry_tick
 *
 * Called by the timer interrupt for a deadline that has passed. Returns
 * true when it was the last one (ring state DONE): then the caller does
 * not re-arm; otherwise it calls probe_timer_rearm().
 */
bool probe_timer_sample(u64 entry_tick)
{
	u64 deadline = P.deadline_tick, seq = P.seq;
	u32 flags = P.pending_flags;
	s64 lat;

	P.pending_flags = 0;
	ring_push(&ring, seq, deadline, entry_tick, flags);
	P.seq = seq + 1;

	lat = (s64)(entry_tick - deadline);
	if (flags & RING_F_INJECTED) {
		if (lat < P.inj_lat_min)
			P.inj_lat_min = lat;
	} else {
		if (lat < P.lat_min)
			P.lat_min = lat;
		if (lat > P.lat_max)
			P.lat_max = lat;
		P.lat_sum += lat;
		P.lat_n++;
	}

	if (params.samples && seq + 1 >= params.samples) {
		ring_set_state(&ring, RING_DONE);
		P.done = true;
		return true;
	}
	return false;
}

/* probe_timer_rearm - arm the next deadline, skipping (counting) past ones */
void probe_timer_rearm(void)
{
	u64 next = P.deadline_tick + P.period_tick, now, skip;

	now = arch_counter_read_tick();
	if (next <= now) {
		skip = (now - next) / P.period_tick + 1;
		next += skip * P.period_tick;
		ring_add_overruns(&ring, skip);
		P.pending_flags = RING_F_OVERRUN;
	}
	P.deadline_tick = next;
	arch_timer_arm_tick(next);
}

/* inject_due - true if sample @seq (the next one) is an injection target */
static bool inject_due(u64 seq)
{
	return P.irqoff_tick && params.inject_every &&
	       (seq + 1) % params.inject_every == 0 && P.injected_seq != seq;
}

/*
 * inject_irqoff - mask interrupts across deadline @k (see file header). @k is
 * the seq inject_due() chose, not P.seq read again: the interrupt for k may
 * come in between, and the injection must then be missed, not moved to k + 1
 * (which is no target: seen as seq 50 flagged with every 50 under Xen on a
 * loaded TCG host).
 */
static void inject_irqoff(u64 k)
{
	u64 end_tick;

	P.injected_seq = k;
	for (;;) {
		arch_irq_disable();
		if (P.seq != k || P.done) {
			P.injections_missed++;
			arch_irq_enable();
			return;
		}
		if (arch_counter_read_tick() + P.inject_margin_tick >= P.deadline_tick)
			break;
		arch_irq_enable();
		arch_cpu_relax();
	}
	P.pending_flags |= RING_F_INJECTED;
	end_tick = P.deadline_tick + P.irqoff_tick;
	while (arch_counter_read_tick() < end_tick)
		arch_cpu_relax();
	P.injections++;
	arch_irq_enable();
}

/* finish - drain the console sink, print the summary, exit (done) */
static __noreturn void finish(void)
{
	u64 hz = P.tick_hz;

	arch_irq_disable();
	console_sink_flush(true);
	console_sink_state();
	printk("irqlab-probe: done samples=%lu overruns=%lu injected=%lu missed=%lu\n",
	       ring.head, ring.hdr->overruns, P.injections, P.injections_missed);
	if (P.lat_n)
		printk("irqlab-probe: latency ns min=%ld mean=%ld max=%ld (non-injected)\n",
		       tick_to_ns(P.lat_min, hz),
		       tick_to_ns(P.lat_sum / (s64)P.lat_n, hz),
		       tick_to_ns(P.lat_max, hz));
	if (P.injections)
		printk("irqlab-probe: injected min latency ns=%ld (bound %lu)\n",
		       tick_to_ns(P.inj_lat_min, hz),
		       muldiv64(P.irqoff_tick, NSEC_PER_SEC, hz));
	arch_exit_done();
}

/* probe_run - state RUNNING, arm the first deadline, measure until done */
void probe_run(void)
{
	if (params.gate) {
		printk("irqlab-probe: waiting for the start gate\n");
		arch_wait_u32_set(&ring.hdr->start_gate);
		printk("irqlab-probe: start gate open\n");
	}
	ring_set_state(&ring, RING_RUNNING);
	console_sink_state();
	arch_irq_disable();
	P.deadline_tick = arch_counter_read_tick() + P.period_tick;
	arch_timer_arm_tick(P.deadline_tick);

	for (;;) {
		console_sink_flush(false);
		console_sink_repeat();
		if (P.done)
			finish();
		u64 seq = READ_ONCE(P.seq);

		if (inject_due(seq)) {
			inject_irqoff(seq);
			continue;
		}
		if (params.idle == IDLE_HLT) {
			arch_irq_disable();
			if (!P.done && !inject_due(P.seq))
				arch_idle_wait();	/* returns after the interrupt */
			else
				arch_irq_enable();
		} else {
			arch_irq_enable();
			arch_cpu_relax();
		}
	}
}
