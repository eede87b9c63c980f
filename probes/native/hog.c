// SPDX-License-Identifier: Apache-2.0
/*
 * hog.c - irqlab-hog: a known preempter inside the Linux guest (--load guest-hog)
 *
 * Usage: irqlab-hog CPU PRIO SPIN_NS EVERY_NS DELAY_NS
 *
 * Pinned to CPU at SCHED_FIFO PRIO with its memory locked (lib/rt.c, as the
 * probe), it sleeps DELAY_NS, then spins SPIN_NS every EVERY_NS (absolute
 * CLOCK_MONOTONIC deadlines, lib/nstime.h) for as long as the guest runs. After
 * each spin it writes its start and end (CLOCK_MONOTONIC ns) to the trace
 * marker as "irqlab-hog spin START END", so a guest trace carries the hog's own
 * account of when it held the CPU. Numbers are strict decimal (lib/cli.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "lib/cli.h"
#include "lib/nstime.h"
#include "lib/rt.h"

#define HOG_MAX_CPU		4095
#define HOG_MAX_PRIO		99

struct hog_opts {
	u64 cpu;
	u64 prio;
	u64 spin_ns;
	u64 every_ns;
	u64 delay_ns;
};

/* hog_arg - positional argument @s named @name, at most @max; exits 2 when bad */
static u64 hog_arg(const char *s, const char *name, u64 max)
{
	u64 v;

	if (parse_dec_u64(s, &v) || v > max)
		cli_usage_fail("%s %s is not a decimal number up to %llu", name, s,
			       (unsigned long long)max);
	return v;
}

/* parse_args - the five positional arguments into @o; exits 2 when bad */
static void parse_args(int argc, char **argv, struct hog_opts *o)
{
	cli_init("irqlab-hog", "(usage: irqlab-hog CPU PRIO SPIN_NS EVERY_NS DELAY_NS)");
	if (argc != 6)
		cli_usage_fail("needs 5 arguments, got %d", argc - 1);
	o->cpu = hog_arg(argv[1], "CPU", HOG_MAX_CPU);
	o->prio = hog_arg(argv[2], "PRIO", HOG_MAX_PRIO);
	o->spin_ns = hog_arg(argv[3], "SPIN_NS", UINT64_MAX);
	o->every_ns = hog_arg(argv[4], "EVERY_NS", UINT64_MAX);
	o->delay_ns = hog_arg(argv[5], "DELAY_NS", UINT64_MAX);
	if (o->prio == 0 || o->every_ns == 0)
		cli_usage_fail("PRIO and EVERY_NS must be at least 1");
}

/* mark_spin - "irqlab-hog spin START END" into @marker; 0 or -errno */
static int mark_spin(int marker, u64 start_ns, u64 end_ns)
{
	char line[96];
	int n = snprintf(line, sizeof(line), "irqlab-hog spin %llu %llu",
			 (unsigned long long)start_ns, (unsigned long long)end_ns);

	return write(marker, line, (size_t)n) < 0 ? -errno : 0;
}

int main(int argc, char **argv)
{
	struct hog_opts o;
	u64 next_ns;
	int marker, err;

	parse_args(argc, argv, &o);
	prctl(PR_SET_NAME, "irqlab-hog");
	err = rt_thread_setup((int)o.cpu, (int)o.prio);
	if (err) {
		fprintf(stderr, "irqlab-hog: error: CPU %llu at SCHED_FIFO %llu: %s\n",
			(unsigned long long)o.cpu, (unsigned long long)o.prio,
			strerror(-err));
		return EXIT_RUNTIME;
	}
	rt_lock_memory(NULL);
	marker = open("/sys/kernel/tracing/trace_marker", O_WRONLY | O_CLOEXEC);
	next_ns = monotonic_ns() + o.delay_ns;
	for (;;) {
		u64 start_ns, end_ns;

		sleep_until_ns(next_ns);
		start_ns = monotonic_ns();
		while ((end_ns = monotonic_ns()) - start_ns < o.spin_ns)
			;
		if (marker >= 0 && mark_spin(marker, start_ns, end_ns))
			marker = -1;
		next_ns += o.every_ns;
	}
}
