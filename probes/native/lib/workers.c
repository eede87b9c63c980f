// SPDX-License-Identifier: Apache-2.0
/* workers.c - start, stop and wait for the per-CPU measuring threads */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mring.h"
#include "workers.h"

#define STACK_PREFAULT_BYTES	(64 * 1024)
#define THREAD_STACK_BYTES	(256 * 1024)

volatile int wk_stop_requested;
static int threads_left;

/* wk_online_cpus - the online CPU list into @cpus; count or -errno */
int wk_online_cpus(int *cpus, int max)
{
	char buf[4096];
	FILE *f = fopen("/sys/devices/system/cpu/online", "r");
	long n;

	if (f) {
		if (fgets(buf, sizeof(buf), f)) {
			fclose(f);
			return parse_cpu_list(buf, cpus, max);
		}
		fclose(f);
	}
	n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		return -ENODEV;
	for (long i = 0; i < n && i < max; i++)
		cpus[i] = (int)i;
	return n < max ? (int)n : max;
}

/* wk_prefault_stack - touch the stack the calling thread will use while measuring */
void __attribute__((noinline)) wk_prefault_stack(void)
{
	volatile u8 buf[STACK_PREFAULT_BYTES];

	memset((void *)buf, 0, sizeof(buf));
}

/* wk_start - run @fn on each of the @n workers @w, one thread each; 0 or -errno */
int wk_start(struct worker *w, int n, void *(*fn)(void *))
{
	pthread_attr_t attr;
	int err;

	err = pthread_attr_init(&attr);
	if (err)
		return -err;
	pthread_attr_setstacksize(&attr, THREAD_STACK_BYTES);
	threads_left = n;
	for (int i = 0; i < n; i++) {
		err = pthread_create(&w[i].thread, &attr, fn, &w[i]);
		if (err) {
			pthread_attr_destroy(&attr);
			__atomic_store_n(&wk_stop_requested, 1, __ATOMIC_RELEASE);
			__atomic_sub_fetch(&threads_left, n - i, __ATOMIC_ACQ_REL);
			for (int j = 0; j < i; j++)
				pthread_join(w[j].thread, NULL);
			return mr_fail(err, "cannot start the thread of cpu %d: %s",
				       w[i].cpu, strerror(err));
		}
	}
	pthread_attr_destroy(&attr);
	return 0;
}

/* wk_done - a worker thread's last act: it no longer measures */
void wk_done(void)
{
	__atomic_sub_fetch(&threads_left, 1, __ATOMIC_ACQ_REL);
}

/*
 * wk_wait - wait for the @n workers @w to finish, asking them to stop on a
 * signal of @stopset; 0 or -errno of the first that failed (reported)
 */
int wk_wait(struct worker *w, int n, const sigset_t *stopset)
{
	struct timespec poll_ts = { .tv_sec = 0, .tv_nsec = 100000000 };
	int failed = 0;

	while (__atomic_load_n(&threads_left, __ATOMIC_ACQUIRE) > 0) {
		int sig = sigtimedwait(stopset, NULL, &poll_ts);

		if (sig > 0)
			__atomic_store_n(&wk_stop_requested, 1, __ATOMIC_RELEASE);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(w[i].thread, NULL);
		if (w[i].error && !failed) {
			failed = w[i].error;
			mr_fail(failed, "%s", w[i].ring.hdr->message);
		}
	}
	return failed ? -failed : 0;
}
