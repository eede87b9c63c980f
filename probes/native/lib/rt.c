// SPDX-License-Identifier: Apache-2.0
/* rt.c - SCHED_FIFO, pinning, mlockall and stop signals for probes/native */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include "cli.h"
#include "mring.h"
#include "rt.h"

/*
 * rt_preflight - check SCHED_FIFO @priority is allowed and record the policy
 * in @dir; 0 (also when refused with @fallback: SCHED_OTHER, flagged) or
 * -errno after reporting it through mr_fail
 */
int rt_preflight(struct mr_dir *dir, int priority, int fallback)
{
	struct sched_param sp = { .sched_priority = priority };
	struct sched_param other = { .sched_priority = 0 };
	int err;

	if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0) {
		/* the main thread only waits: back to normal scheduling */
		sched_setscheduler(0, SCHED_OTHER, &other);
		dir->policy = MR_POLICY_FIFO;
		return 0;
	}
	err = errno;
	if (fallback) {
		fprintf(stderr, "%s: warning: SCHED_FIFO priority %d refused (%s); "
			"--rt-fallback: running SCHED_OTHER, figures are not real-time\n",
			cli_prog(), priority, strerror(err));
		dir->policy = MR_POLICY_OTHER;
		dir->flags |= MR_F_RT_FALLBACK;
		return 0;
	}
	return mr_fail(err, "cannot run at SCHED_FIFO priority %d: %s (needs root or "
		       "CAP_SYS_NICE, or RLIMIT_RTPRIO >= %d); pass --rt-fallback to run "
		       "SCHED_OTHER instead", priority, strerror(err), priority);
}

/*
 * rt_thread_setup - pin the calling thread to @cpu (not when < 0) and run it
 * SCHED_FIFO at @fifo_priority (not when 0); 0 or -errno
 */
int rt_thread_setup(int cpu, int fifo_priority)
{
	struct sched_param sp = { .sched_priority = fifo_priority };
	cpu_set_t set;
	int err;

	if (cpu >= 0) {
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
		if (err)
			return -err;
	}
	if (fifo_priority) {
		err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
		if (err)
			return -err;
	}
	return 0;
}

/*
 * rt_lock_memory - mlockall, flagged in @dir (a program writing no ring
 * directory passes NULL); 0 or -errno (a warning only)
 */
int rt_lock_memory(struct mr_dir *dir)
{
	int err;

	if (mlockall(MCL_CURRENT | MCL_FUTURE) == 0) {
		if (dir)
			dir->flags |= MR_F_MLOCKED;
		return 0;
	}
	err = errno;
	fprintf(stderr, "%s: warning: mlockall: %s (page faults may show as latency)\n",
		cli_prog(), strerror(err));
	return -err;
}

/*
 * rt_block_stop_signals - SIGINT and SIGTERM into @stopset, blocked (before
 * any thread exists, so only sigtimedwait sees them), and a SIGTERM when the
 * parent (irqlab) dies, so the program then stops cleanly
 */
void rt_block_stop_signals(sigset_t *stopset)
{
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	sigemptyset(stopset);
	sigaddset(stopset, SIGINT);
	sigaddset(stopset, SIGTERM);
	pthread_sigmask(SIG_BLOCK, stopset, NULL);
}
