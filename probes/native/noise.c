// SPDX-License-Identifier: Apache-2.0
/*
 * noise.c - irqlab-noise: operating-system noise probe (rtla osnoise class)
 *
 * One thread per selected CPU, pinned, reads CLOCK_MONOTONIC in a tight loop
 * and records every gap between two consecutive reads of at least
 * --threshold-ns: the time something else (an IRQ, a softirq, an NMI, another
 * thread, the hypervisor) took the CPU from the loop. A record is (seq, gap
 * start ns, gap end ns, 0, cpu) in the thread's own v1 ring (docs/formats.md
 * sections 2 and 6), so the ring bounds the memory a noisy CPU can take: a
 * slow reader loses records (counted), never the totals, which the ring
 * header keeps (noise_tick, progress_tick - busy_start_tick). Policy: SCHED_OTHER
 * with --other (rtla osnoise without -P), else SCHED_FIFO --priority. Exit
 * codes: 0 done (also after SIGINT/SIGTERM), 1 run-time failure, 2 usage,
 * 3 RT priority refused (no --rt-fallback).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "lib/cli.h"
#include "lib/mring.h"
#include "lib/nstime.h"
#include "lib/rt.h"
#include "lib/workers.h"

#ifndef IRQLAB_NATIVE_BUILD_ID
#define IRQLAB_NATIVE_BUILD_ID "irqlab-native-unknown"
#endif

#define START_LEAD_NS		20000000ULL	/* every thread starts together */
#define DEFAULT_THRESHOLD_NS	5000ULL		/* rtla osnoise's default, 5 us */
#define MIN_THRESHOLD_NS	100ULL		/* below: the clock read itself */
#define MAX_THRESHOLD_NS	1000000000ULL
#define PROGRESS_EVERY_NS	1000000ULL	/* how often progress_tick moves */

struct options {
	struct probe_opts po;	/* --shm, --priority, --capacity, --duration-ns, ... */
	int cpus[MR_MAX_RINGS];
	int ncpus;
	int other;		/* --other: SCHED_OTHER, no RT asked */
	u64 threshold_ns;
};

static struct options opt = {
	.po = PROBE_OPTS_INIT, .threshold_ns = DEFAULT_THRESHOLD_NS,
};
static struct mr_dir *dir;
static struct worker *workers;
static u64 start_ns, end_ns;

/* usage - print the options */
static void usage(void)
{
	printf("usage: irqlab-noise (--shm PATH | --shm-fd N) [options]\n"
	       "  --shm PATH          shared-memory file (a memfd path)\n"
	       "  --shm-fd N          inherited fd of the shared memory instead of --shm\n"
	       "  --cpus LIST         CPUs to measure, e.g. 0,2-3 (default all online)\n"
	       "  --threshold-ns N    record gaps of at least N ns (default 5000)\n"
	       "  --other             run SCHED_OTHER (default: SCHED_FIFO --priority)\n"
	       "  --priority N        SCHED_FIFO priority 1-99 (default 90)\n"
	       "  --rt-fallback       run SCHED_OTHER when RT is refused (recorded)\n"
	       "  --duration-ns N     stop after N ns (0 = until SIGINT/SIGTERM)\n"
	       "  --capacity N        records per ring, power of two (default 65536)\n"
	       "  -v, --verbose       print the set-up on stderr\n"
	       "exit: 0 done, 1 run-time failure, 2 usage, 3 RT priority refused\n");
}

/*
 * noise_opt - @a (with @val, the next word or NULL) when it is one of
 * irqlab-noise's own options: the words taken (cli_parse), 0 when unknown;
 * exits 2 on a bad value
 */
static int noise_opt(const char *a, const char *val)
{
	if (!strcmp(a, "--other")) {
		opt.other = 1;
		return 1;
	}
	if (strcmp(a, "--cpus") && strcmp(a, "--threshold-ns"))
		return 0;
	if (!val)
		cli_usage_fail("%s needs a value", a);
	if (!strcmp(a, "--cpus")) {
		opt.ncpus = parse_cpu_list(val, opt.cpus, MR_MAX_RINGS);
		if (opt.ncpus < 0)
			cli_usage_fail("--cpus %s is not a CPU list like 0,2-3 "
				       "(no repeats, < %d CPUs)", val, MR_MAX_RINGS);
	} else if (parse_dec_u64(val, &opt.threshold_ns) ||
		   opt.threshold_ns < MIN_THRESHOLD_NS || opt.threshold_ns > MAX_THRESHOLD_NS) {
		cli_usage_fail("--threshold-ns %s must be %llu to %llu", val,
			       MIN_THRESHOLD_NS, MAX_THRESHOLD_NS);
	}
	return 2;
}

/* parse_args - fill @opt from argv; exits 2 on bad usage */
static void parse_args(int argc, char **argv)
{
	cli_init("irqlab-noise", "(see --help)");
	cli_parse(argc, argv, &opt.po, usage, noise_opt);
	opt.ncpus = wk_cpus(opt.cpus, opt.ncpus);
}

/* publish_progress - the totals so far into @h (progress last, release) */
static inline void publish_progress(struct ring_hdr *h, u64 noise_ns, u64 now_ns)
{
	WRITE_ONCE(h->noise_tick, noise_ns);
	__atomic_store_n(&h->progress_tick, now_ns, __ATOMIC_RELEASE);
}

/* noise_thread - the busy loop of one CPU */
static void *noise_thread(void *arg)
{
	struct worker *w = arg;
	struct ring *r = &w->ring;
	struct ring_hdr *h = r->hdr;
	u64 seq = 0, noise_ns = 0, last_ns, now_ns, published_ns;
	int err;

	err = rt_thread_setup(w->cpu, dir->policy == MR_POLICY_FIFO ? opt.po.priority : 0);
	if (err) {
		w->error = -err;
		ring_set_error(r, (u32)-err, "cpu %d: cannot pin or schedule the thread: %s",
			       w->cpu, strerror(-err));
		goto out;
	}
	prctl(PR_SET_NAME, "irqlab-noise");
	wk_prefault_stack();
	while ((err = sleep_until_ns(start_ns)) == -EINTR)
		;
	last_ns = published_ns = monotonic_ns();
	WRITE_ONCE(h->busy_start_tick, last_ns);
	publish_progress(h, 0, last_ns);
	ring_set_state(r, RING_RUNNING);

	while (!READ_ONCE(wk_stop_requested) && (!end_ns || last_ns < end_ns)) {
		now_ns = monotonic_ns();
		if (now_ns - last_ns >= opt.threshold_ns) {
			ring_push(r, seq++, last_ns, now_ns, 0);
			noise_ns += now_ns - last_ns;
		}
		last_ns = now_ns;
		if (now_ns - published_ns >= PROGRESS_EVERY_NS) {
			publish_progress(h, noise_ns, now_ns);
			published_ns = now_ns;
		}
	}
	publish_progress(h, noise_ns, last_ns);
	ring_set_state(r, RING_DONE);
out:
	wk_done();
	return NULL;
}

int main(int argc, char **argv)
{
	/* no period: gaps come when they come (the host counts no overruns) */
	struct mr_ring_cfg cfg = {
		.timer_mode = TIMER_BUSY_LOOP, .idle = IDLE_POLL,
		.period_ns = 0, .build_id = IRQLAB_NATIVE_BUILD_ID,
	};
	sigset_t stopset;

	parse_args(argc, argv);
	rt_block_stop_signals(&stopset);

	workers = wk_create(&opt.po, 0, opt.cpus, opt.ncpus,
			    opt.other ? 0 : (u32)opt.po.priority, &cfg, &dir);
	if (!workers)
		return EXIT_RUNTIME;
	if (!opt.other && rt_preflight(dir, opt.po.priority, opt.po.rt_fallback))
		return EXIT_NO_RT;
	rt_lock_memory(dir);

	start_ns = monotonic_ns() + START_LEAD_NS;
	end_ns = opt.po.duration_ns ? start_ns + opt.po.duration_ns : 0;
	dir->start_ns = start_ns;
	if (opt.po.verbose)
		fprintf(stderr, "irqlab-noise: %d cpu(s), %s priority %d, threshold %llu ns, "
			"capacity %u, flags %#x\n", opt.ncpus,
			dir->policy == MR_POLICY_FIFO ? "SCHED_FIFO" : "SCHED_OTHER",
			dir->policy == MR_POLICY_FIFO ? opt.po.priority : 0,
			(unsigned long long)opt.threshold_ns, opt.po.capacity, dir->flags);
	return wk_run(dir, workers, opt.ncpus, noise_thread, &stopset) ? EXIT_RUNTIME : 0;
}
