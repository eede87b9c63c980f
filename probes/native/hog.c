// SPDX-License-Identifier: Apache-2.0
/*
 * hog.c - irqlab-hog: a known preempter inside the Linux guest (--load guest-hog)
 *
 * Usage: irqlab-hog CPU PRIO SPIN_NS EVERY_NS DELAY_NS
 *
 * Pinned to CPU at SCHED_FIFO PRIO with its memory locked, it sleeps DELAY_NS,
 * then spins SPIN_NS every EVERY_NS (absolute CLOCK_MONOTONIC deadlines) for as
 * long as the guest runs. After each spin it writes its start and end
 * (CLOCK_MONOTONIC ns) to the trace marker as "irqlab-hog spin START END", so a
 * guest trace carries the hog's own account of when it held the CPU.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static long long mono(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv)
{
	struct sched_param sp;
	cpu_set_t set;
	long long spin, every, next;
	int marker;

	if (argc != 6) {
		fprintf(stderr, "usage: irqlab-hog CPU PRIO SPIN_NS EVERY_NS DELAY_NS\n");
		return 2;
	}
	CPU_ZERO(&set);
	CPU_SET(atoi(argv[1]), &set);
	sp.sched_priority = atoi(argv[2]);
	spin = atoll(argv[3]);
	every = atoll(argv[4]);
	prctl(PR_SET_NAME, "irqlab-hog");
	if (sched_setaffinity(0, sizeof(set), &set) || sched_setscheduler(0, SCHED_FIFO, &sp) ||
	    mlockall(MCL_CURRENT | MCL_FUTURE)) {
		perror("irqlab-hog");
		return 1;
	}
	marker = open("/sys/kernel/tracing/trace_marker", O_WRONLY | O_CLOEXEC);
	next = mono() + atoll(argv[5]);
	for (;;) {
		struct timespec t = { next / 1000000000LL, next % 1000000000LL };
		long long a, b;
		char line[96];

		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
		a = mono();
		while ((b = mono()) - a < spin)
			;
		if (marker >= 0) {
			int n = snprintf(line, sizeof(line), "irqlab-hog spin %lld %lld", a, b);

			if (write(marker, line, (size_t)n) < 0)
				marker = -1;
		}
		next += every;
	}
}
