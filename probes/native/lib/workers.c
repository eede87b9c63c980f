// SPDX-License-Identifier: Apache-2.0
/* workers.c - start, stop and wait for the per-CPU measuring threads */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mring.h"
#include "workers.h"

#define STACK_PREFAULT_BYTES	(64 * 1024)
#define THREAD_STACK_BYTES	(256 * 1024)

volatile int wk_stop_requested;
static int threads_left;

/* online_cpus - the online CPU list into @cpus; count or -errno */
static int online_cpus(int *cpus, int max)
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

/*
 * wk_cpus - @n when CPUs were given (--cpus), else every online CPU into
 * @cpus; the count (exits 2 when the online CPUs cannot be listed)
 */
int wk_cpus(int *cpus, int n)
{
	if (n)
		return n;
	n = online_cpus(cpus, MR_MAX_RINGS);
	if (n < 0)
		cli_usage_fail("cannot list the online CPUs: %s", strerror(-n));
	return n;
}

/*
 * wk_create - the @n workers of @cpus and their rings: @po's shared memory
 * mapped at @offset_bytes, the directory (@priority, @cfg's period) and one
 * ring per worker from @cfg written, failures reported into the directory
 * from then on; the workers (*@dir set) or NULL, the reason on stderr
 */
struct worker *wk_create(const struct probe_opts *po, u64 offset_bytes, const int *cpus,
			 int n, u32 priority, struct mr_ring_cfg *cfg, struct mr_dir **dir)
{
	struct worker *w = calloc((size_t)n, sizeof(*w));
	void *area = NULL;

	if (!w)
		return NULL;
	if (mr_map(po->shm_path, po->shm_fd, offset_bytes, n, po->capacity, &area))
		goto fail;
	*dir = mr_dir_begin(area, n, po->capacity, cfg->period_ns, priority);
	for (int i = 0; i < n; i++) {
		w[i].cpu = cpus[i];
		cfg->cpu = (u32)cpus[i];
		if (mr_ring_init(*dir, i, po->capacity, cfg, &w[i].ring))
			goto fail;
	}
	mr_dir_publish(*dir);
	mr_fail_into(*dir, NULL);
	return w;
fail:
	free(w);
	return NULL;
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

/*
 * wk_run - run @fn on the @n workers @w until they end or a signal of
 * @stopset stops them, the directory @dir running meanwhile and done after;
 * 0 or -errno of the first failure (reported)
 */
int wk_run(struct mr_dir *dir, struct worker *w, int n, void *(*fn)(void *),
	   const sigset_t *stopset)
{
	int err;

	__atomic_store_n(&dir->state, RING_RUNNING, __ATOMIC_RELEASE);
	err = wk_start(w, n, fn);
	if (!err)
		err = wk_wait(w, n, stopset);
	if (!err)
		__atomic_store_n(&dir->state, RING_DONE, __ATOMIC_RELEASE);
	return err;
}
