// SPDX-License-Identifier: Apache-2.0
/*
 * native.c - irqlab-native: cyclictest-class timer wake-up latency probe
 *
 * One thread per selected CPU, pinned, SCHED_FIFO, sleeps with
 * clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) on an absolute schedule
 * and writes (seq, expected ns, actual ns, flags, cpu) into its own v1 ring
 * in a shared-memory area (docs/formats.md sections 2 and 6). Nothing is
 * printed per sample. Exit codes: 0 done (also after SIGINT/SIGTERM),
 * 1 run-time failure, 2 usage, 3 RT priority refused (no --rt-fallback).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/cli.h"
#include "lib/mring.h"
#include "lib/nstime.h"
#include "lib/rt.h"
#include "lib/workers.h"

#ifndef IRQLAB_NATIVE_BUILD_ID
#define IRQLAB_NATIVE_BUILD_ID "irqlab-native-unknown"
#endif

#define START_LEAD_NS		20000000ULL	/* first deadline >= 20 ms away */
#define DEFAULT_PERIOD_NS	1000000ULL

struct options {
	struct probe_opts po;	/* --shm, --priority, --capacity, --duration-ns, ... */
	u64 shm_offset_bytes;
	int cpus[MR_MAX_RINGS];
	int ncpus;
	u64 period_ns;
	u64 samples_per_cpu;
};

static struct options opt = {
	.po = PROBE_OPTS_INIT, .period_ns = DEFAULT_PERIOD_NS,
};
static struct mr_dir *dir;
static struct worker *ctxs;
static u64 start_ns, end_ns;

/* usage - print the options */
static void usage(void)
{
	printf("usage: irqlab-native (--shm PATH | --shm-fd N) [options]\n"
	       "  --shm PATH          shared-memory file (memfd path, ivshmem resource2, ...)\n"
	       "  --shm-fd N          inherited fd of the shared memory instead of --shm\n"
	       "  --shm-offset BYTES  where the ring directory starts (page multiple, default 0)\n"
	       "  --cpus LIST         CPUs to measure, e.g. 0,2-3 (default all online)\n"
	       "  --priority N        SCHED_FIFO priority 1-99 (default 90)\n"
	       "  --rt-fallback       run SCHED_OTHER when RT is refused (recorded)\n"
	       "  --period-ns N       timer period (default 1000000)\n"
	       "  --samples N         stop each CPU after N samples (0 = no limit)\n"
	       "  --duration-ns N     stop after N ns (0 = until SIGINT/SIGTERM)\n"
	       "  --capacity N        records per ring, power of two (default 65536;\n"
	       "                      small values make a slow reader lose samples: test hook)\n"
	       "  -v, --verbose       print the set-up on stderr\n"
	       "exit: 0 done, 1 run-time failure, 2 usage, 3 RT priority refused\n");
}

/*
 * native_opt - @a (with @val, the next word or NULL) when it is one of irqlab-native's
 * own options: the words taken (cli_parse), 0 when unknown; exits 2 on a bad value
 */
static int native_opt(const char *a, const char *val)
{
	if (!val)
		cli_usage_fail("%s needs a value", a);
	if (!strcmp(a, "--shm-offset")) {
		if (parse_dec_u64(val, &opt.shm_offset_bytes) ||
		    opt.shm_offset_bytes % 4096)
			cli_usage_fail("--shm-offset %s must be a multiple of 4096", val);
	} else if (!strcmp(a, "--cpus")) {
		opt.ncpus = parse_cpu_list(val, opt.cpus, MR_MAX_RINGS);
		if (opt.ncpus < 0)
			cli_usage_fail("--cpus %s is not a CPU list like 0,2-3 "
				       "(no repeats, < %d CPUs)", val, MR_MAX_RINGS);
	} else if (!strcmp(a, "--period-ns")) {
		if (parse_dec_u64(val, &opt.period_ns) || opt.period_ns < 1000 ||
		    opt.period_ns > 10000000000ULL)
			cli_usage_fail("--period-ns %s must be 1000 to 10000000000", val);
	} else if (!strcmp(a, "--samples")) {
		if (parse_dec_u64(val, &opt.samples_per_cpu))
			cli_usage_fail("--samples %s is not a count", val);
	} else {
		return 0;
	}
	return 2;
}

/* parse_args - fill @opt from argv; exits 2 on bad usage */
static void parse_args(int argc, char **argv)
{
	cli_init("irqlab-native", "(see --help)");
	cli_parse(argc, argv, &opt.po, usage, native_opt);
	opt.ncpus = wk_cpus(opt.cpus, opt.ncpus);
}

/* hold_dma_latency - keep /dev/cpu_dma_latency at 0 while open; fd or -errno */
static int hold_dma_latency(void)
{
	int fd = open("/dev/cpu_dma_latency", O_RDWR | O_CLOEXEC);
	s32 zero_us = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, &zero_us, sizeof(zero_us)) != sizeof(zero_us)) {
		int err = errno ? errno : EIO;

		close(fd);
		return -err;
	}
	dir->flags |= MR_F_DMA_LATENCY;
	return fd;
}

/* cpu_thread - the measuring loop of one CPU */
static void *cpu_thread(void *arg)
{
	struct worker *c = arg;
	struct ring *r = &c->ring;
	u64 next_ns = start_ns + opt.period_ns;
	u64 seq = 0, now_ns, skipped;
	u32 flags = 0;
	int err;

	err = rt_thread_setup(c->cpu, dir->policy == MR_POLICY_FIFO ? opt.po.priority : 0);
	if (err) {
		c->error = -err;
		ring_set_error(r, (u32)-err, "cpu %d: cannot pin or schedule the thread: %s",
			       c->cpu, strerror(-err));
		goto out;
	}
	wk_prefault_stack();
	ring_set_state(r, RING_RUNNING);

	while (!READ_ONCE(wk_stop_requested) &&
	       (!opt.samples_per_cpu || seq < opt.samples_per_cpu) &&
	       (!end_ns || next_ns <= end_ns)) {
		err = sleep_until_ns(next_ns);
		if (err == -EINTR)
			continue;
		if (err) {
			c->error = -err;
			ring_set_error(r, (u32)-err, "cpu %d: clock_nanosleep: %s", c->cpu,
				       strerror(-err));
			goto out;
		}
		now_ns = monotonic_ns();
		ring_push(r, seq++, next_ns, now_ns, flags);
		flags = 0;
		skipped = period_advance(&next_ns, now_ns, opt.period_ns);
		if (skipped) {
			ring_add_overruns(r, skipped);
			flags = RING_F_OVERRUN;
		}
	}
	ring_set_state(r, RING_DONE);
out:
	wk_done();
	return NULL;
}

int main(int argc, char **argv)
{
	struct mr_ring_cfg cfg = {
		.timer_mode = TIMER_CLOCK_NANOSLEEP, .build_id = IRQLAB_NATIVE_BUILD_ID,
	};
	sigset_t stopset;
	int dma_fd, err;

	parse_args(argc, argv);
	rt_block_stop_signals(&stopset);

	cfg.period_ns = opt.period_ns;		/* given on the command line */
	ctxs = wk_create(&opt.po, opt.shm_offset_bytes, opt.cpus, opt.ncpus,
			 (u32)opt.po.priority, &cfg, &dir);
	if (!ctxs)
		return EXIT_RUNTIME;
	if (rt_preflight(dir, opt.po.priority, opt.po.rt_fallback))
		return EXIT_NO_RT;
	rt_lock_memory(dir);
	dma_fd = hold_dma_latency();
	if (dma_fd < 0)
		fprintf(stderr, "irqlab-native: warning: /dev/cpu_dma_latency: %s (deep "
			"C-states stay allowed)\n", strerror(-dma_fd));

	start_ns = monotonic_ns() + START_LEAD_NS;
	start_ns -= start_ns % 1000;
	end_ns = opt.po.duration_ns ? start_ns + opt.po.duration_ns : 0;
	dir->start_ns = start_ns;
	if (opt.po.verbose)
		fprintf(stderr, "irqlab-native: %d cpu(s), %s priority %d, period %llu ns, "
			"capacity %u, flags %#x\n", opt.ncpus,
			dir->policy == MR_POLICY_FIFO ? "SCHED_FIFO" : "SCHED_OTHER",
			opt.po.priority, (unsigned long long)opt.period_ns, opt.po.capacity,
			dir->flags);
	err = wk_run(dir, ctxs, opt.ncpus, cpu_thread, &stopset);
	if (dma_fd >= 0)
		close(dma_fd);
	return err ? EXIT_RUNTIME : 0;
}
