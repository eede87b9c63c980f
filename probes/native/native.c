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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "multiring.h"

#ifndef IRQLAB_NATIVE_BUILD_ID
#define IRQLAB_NATIVE_BUILD_ID "irqlab-native-unknown"
#endif

#if defined(__x86_64__)
#define PROBE_ARCH		RING_ARCH_X86_64
#elif defined(__aarch64__)
#define PROBE_ARCH		RING_ARCH_ARM64
#else
#error "irqlab-native: unsupported architecture"
#endif

#define EXIT_RUNTIME		1
#define EXIT_USAGE		2
#define EXIT_NO_RT		3

#define STACK_PREFAULT_BYTES	(64 * 1024)
#define THREAD_STACK_BYTES	(256 * 1024)
#define START_LEAD_NS		20000000ULL	/* first deadline >= 20 ms away */
#define DEFAULT_CAPACITY	65536
#define DEFAULT_PERIOD_NS	1000000ULL

struct options {
	const char *shm_path;
	int shm_fd;
	u64 shm_offset_bytes;
	int cpus[MR_MAX_RINGS];
	int ncpus;
	int priority;
	int rt_fallback;
	u64 period_ns;
	u64 samples_per_cpu;
	u64 duration_ns;
	u32 capacity;
	int verbose;
};

struct cpu_ctx {
	pthread_t thread;
	struct ring ring;
	int cpu;
	int error;		/* 0 or positive errno, set by the thread */
};

static struct options opt = {
	.shm_fd = -1, .priority = 90, .period_ns = DEFAULT_PERIOD_NS,
	.capacity = DEFAULT_CAPACITY,
};
static struct mr_dir *dir;
static struct cpu_ctx *ctxs;
static volatile int stop_requested;
static int threads_left;
static u64 start_ns, end_ns;

/* die_usage - print a usage error and exit 2 */
static void __attribute__((noreturn, format(printf, 1, 2))) die_usage(const char *fmt, ...)
{
	va_list ap;

	fputs("irqlab-native: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see --help)\n", stderr);
	exit(EXIT_USAGE);
}

/* dir_fail - report @err with a message on stderr and in the directory */
static int __attribute__((format(printf, 2, 3))) dir_fail(int err, const char *fmt, ...)
{
	char msg[MR_MESSAGE_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "irqlab-native: error: %s\n", msg);
	if (dir) {
		memcpy(dir->message, msg, sizeof(msg));
		WRITE_ONCE(dir->error, (u32)err);
		__atomic_store_n(&dir->state, RING_ERROR, __ATOMIC_RELEASE);
	}
	return -err;
}

/* ts_to_ns - timespec to ns */
static inline u64 ts_to_ns(const struct timespec *ts)
{
	return (u64)ts->tv_sec * 1000000000ULL + (u64)ts->tv_nsec;
}

/* ns_to_ts - ns to timespec */
static inline void ns_to_ts(u64 ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000ULL);
	ts->tv_nsec = (long)(ns % 1000000000ULL);
}

/* monotonic_ns - CLOCK_MONOTONIC now, in ns */
static inline u64 monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts_to_ns(&ts);
}

/* parse_u64 - strict decimal parse of @s into @out; 0 or -EINVAL */
static int parse_u64(const char *s, u64 *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* parse_cpu_list - "0-3,6" into @cpus (at most @max); count or -errno */
static int parse_cpu_list(const char *s, int *cpus, int max)
{
	int n = 0;

	while (*s) {
		char *end;
		long lo, hi;

		errno = 0;
		lo = strtol(s, &end, 10);
		if (errno || end == s || lo < 0)
			return -EINVAL;
		hi = lo;
		s = end;
		if (*s == '-') {
			hi = strtol(s + 1, &end, 10);
			if (errno || end == s + 1 || hi < lo)
				return -EINVAL;
			s = end;
		}
		for (long c = lo; c <= hi; c++) {
			for (int i = 0; i < n; i++)
				if (cpus[i] == c)
					return -EINVAL;
			if (n >= max || c >= CPU_SETSIZE)
				return -ERANGE;
			cpus[n++] = (int)c;
		}
		if (*s == ',' || *s == '\n')
			s++;
		else if (*s)
			return -EINVAL;
	}
	return n ? n : -EINVAL;
}

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

/* parse_args - fill @opt from argv; exits 2 on bad usage */
static void parse_args(int argc, char **argv)
{
	u64 v;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;
		int takes = 1;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage();
			exit(0);
		} else if (!strcmp(a, "--rt-fallback")) {
			opt.rt_fallback = 1;
			takes = 0;
		} else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
			opt.verbose = 1;
			takes = 0;
		} else if (!val) {
			die_usage("%s needs a value", a);
		} else if (!strcmp(a, "--shm")) {
			opt.shm_path = val;
		} else if (!strcmp(a, "--shm-fd")) {
			if (parse_u64(val, &v) || v > INT_MAX)
				die_usage("--shm-fd %s is not a file descriptor", val);
			opt.shm_fd = (int)v;
		} else if (!strcmp(a, "--shm-offset")) {
			if (parse_u64(val, &opt.shm_offset_bytes) ||
			    opt.shm_offset_bytes % 4096)
				die_usage("--shm-offset %s must be a multiple of 4096", val);
		} else if (!strcmp(a, "--cpus")) {
			opt.ncpus = parse_cpu_list(val, opt.cpus, MR_MAX_RINGS);
			if (opt.ncpus < 0)
				die_usage("--cpus %s is not a CPU list like 0,2-3 (no repeats, < %d CPUs)",
					  val, MR_MAX_RINGS);
		} else if (!strcmp(a, "--priority")) {
			if (parse_u64(val, &v) || v < 1 || v > 99)
				die_usage("--priority %s must be 1-99", val);
			opt.priority = (int)v;
		} else if (!strcmp(a, "--period-ns")) {
			if (parse_u64(val, &opt.period_ns) || opt.period_ns < 1000 ||
			    opt.period_ns > 10000000000ULL)
				die_usage("--period-ns %s must be 1000 to 10000000000", val);
		} else if (!strcmp(a, "--samples")) {
			if (parse_u64(val, &opt.samples_per_cpu))
				die_usage("--samples %s is not a count", val);
		} else if (!strcmp(a, "--duration-ns")) {
			if (parse_u64(val, &opt.duration_ns))
				die_usage("--duration-ns %s is not a count of ns", val);
		} else if (!strcmp(a, "--capacity")) {
			if (parse_u64(val, &v) || v < 2 || v > (1u << 26) || (v & (v - 1)))
				die_usage("--capacity %s must be a power of two, 2 to 2^26", val);
			opt.capacity = (u32)v;
		} else {
			die_usage("unknown option %s", a);
		}
		i += takes;
	}
	if (!opt.shm_path == (opt.shm_fd < 0))
		die_usage("give exactly one of --shm PATH and --shm-fd N");
	if (!opt.ncpus) {
		opt.ncpus = online_cpus(opt.cpus, MR_MAX_RINGS);
		if (opt.ncpus < 0)
			die_usage("cannot list the online CPUs: %s", strerror(-opt.ncpus));
	}
}

/* map_shm - map the area and check it holds every ring; 0 or -errno */
static int map_shm(void **area)
{
	u64 need_bytes = MR_BYTES(opt.ncpus, opt.capacity);
	int fd = opt.shm_fd;
	struct stat st;
	void *p;

	if (opt.shm_path) {
		fd = open(opt.shm_path, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "irqlab-native: error: cannot open --shm %s: %s\n",
				opt.shm_path, strerror(errno));
			return -errno;
		}
	}
	if (fstat(fd, &st)) {
		fprintf(stderr, "irqlab-native: error: fstat of the shared memory: %s\n",
			strerror(errno));
		return -errno;
	}
	if ((u64)st.st_size < opt.shm_offset_bytes + need_bytes) {
		fprintf(stderr, "irqlab-native: error: shared memory is %lld bytes; %d rings "
			"of %u records at offset %llu need %llu\n", (long long)st.st_size,
			opt.ncpus, opt.capacity, (unsigned long long)opt.shm_offset_bytes,
			(unsigned long long)(opt.shm_offset_bytes + need_bytes));
		return -ENOSPC;
	}
	p = mmap(NULL, need_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 (off_t)opt.shm_offset_bytes);
	if (p == MAP_FAILED) {
		fprintf(stderr, "irqlab-native: error: mmap of the shared memory: %s\n",
			strerror(errno));
		return -errno;
	}
	if (opt.shm_path)
		close(fd);
	*area = p;
	return 0;
}

/* ring_setup - write ring @i's v1 header (state BOOTING) at its offset */
static int ring_setup(struct cpu_ctx *c, u8 *area, int i)
{
	u8 *base = area + MR_DIR_SIZE + (u64)i * MR_STRIDE(opt.capacity);
	struct ring_hdr *h = (struct ring_hdr *)base;

	c->ring.hdr = h;
	c->ring.recs = (struct ring_rec *)(base + RING_HDR_SIZE);
	c->ring.mask = opt.capacity - 1;
	c->ring.head = 0;
	c->ring.cpu = (u32)c->cpu;
	__atomic_store_n(&h->magic, 0, __ATOMIC_RELEASE);
	memset(base + sizeof(h->magic), 0, RING_HDR_SIZE - sizeof(h->magic));
	/* touch every record page now, not in the measuring loop */
	memset(c->ring.recs, 0, (size_t)opt.capacity * RING_RECORD_SIZE);
	h->version = RING_VERSION;
	h->record_size = RING_RECORD_SIZE;
	h->capacity = opt.capacity;
	h->arch = PROBE_ARCH;
	h->tick_hz = 1000000000ULL;
	h->tick_method = TICK_CLOCK_MONOTONIC;
	h->timer_mode = TIMER_CLOCK_NANOSLEEP;
	h->period_tick = opt.period_ns;
	h->idle = IDLE_SLEEP;
	h->state = RING_BOOTING;
	snprintf(h->build_id, sizeof(h->build_id), "%s", IRQLAB_NATIVE_BUILD_ID);
	__atomic_store_n(&h->magic, RING_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

/* dir_setup - write the directory and every ring header; 0 or -errno */
static int dir_setup(u8 *area)
{
	dir = (struct mr_dir *)area;
	__atomic_store_n(&dir->magic, 0, __ATOMIC_RELEASE);
	memset(area + sizeof(dir->magic), 0, MR_DIR_SIZE - sizeof(dir->magic));
	dir->version = MR_VERSION;
	dir->ring_count = (u32)opt.ncpus;
	dir->ring_stride = MR_STRIDE(opt.capacity);
	dir->first_ring = MR_DIR_SIZE;
	dir->period_ns = opt.period_ns;
	dir->priority = (u32)opt.priority;
	dir->state = RING_BOOTING;
	for (int i = 0; i < opt.ncpus; i++) {
		dir->cpu[i] = (u32)opt.cpus[i];
		ctxs[i].cpu = opt.cpus[i];
		ring_setup(&ctxs[i], area, i);
	}
	__atomic_store_n(&dir->magic, MR_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

/* rt_preflight - check SCHED_FIFO @priority is allowed; 0, or -EPERM */
static int rt_preflight(void)
{
	struct sched_param sp = { .sched_priority = opt.priority };
	struct sched_param other = { .sched_priority = 0 };
	int err;

	if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0) {
		/* the main thread only waits: back to normal scheduling */
		sched_setscheduler(0, SCHED_OTHER, &other);
		dir->policy = MR_POLICY_FIFO;
		return 0;
	}
	err = errno;
	if (opt.rt_fallback) {
		fprintf(stderr, "irqlab-native: warning: SCHED_FIFO priority %d refused (%s); "
			"--rt-fallback: running SCHED_OTHER, figures are not real-time\n",
			opt.priority, strerror(err));
		dir->policy = MR_POLICY_OTHER;
		dir->flags |= MR_F_RT_FALLBACK;
		return 0;
	}
	dir_fail(err, "cannot run at SCHED_FIFO priority %d: %s (needs root or "
		 "CAP_SYS_NICE, or RLIMIT_RTPRIO >= %d); pass --rt-fallback to run "
		 "SCHED_OTHER instead", opt.priority, strerror(err), opt.priority);
	return -err;
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

/* prefault_stack - touch the stack this thread will use while measuring */
static void __attribute__((noinline)) prefault_stack(void)
{
	volatile u8 buf[STACK_PREFAULT_BYTES];

	memset((void *)buf, 0, sizeof(buf));
}

/* thread_sched - pin and schedule the calling thread for @c; 0 or -errno */
static int thread_sched(struct cpu_ctx *c)
{
	struct sched_param sp = { .sched_priority = opt.priority };
	cpu_set_t set;
	int err;

	CPU_ZERO(&set);
	CPU_SET(c->cpu, &set);
	err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (err)
		return -err;
	if (dir->policy == MR_POLICY_FIFO) {
		err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
		if (err)
			return -err;
	}
	return 0;
}

/* cpu_thread - the measuring loop of one CPU */
static void *cpu_thread(void *arg)
{
	struct cpu_ctx *c = arg;
	struct ring *r = &c->ring;
	u64 next_ns = start_ns + opt.period_ns;
	u64 seq = 0, now_ns, skipped;
	struct timespec ts;
	u32 flags = 0;
	int err;

	err = thread_sched(c);
	if (err) {
		c->error = -err;
		snprintf(r->hdr->message, RING_MESSAGE_LEN, "cpu %d: cannot pin or schedule "
			 "the thread: %s", c->cpu, strerror(-err));
		WRITE_ONCE(r->hdr->error, (u32)-err);
		__atomic_store_n(&r->hdr->state, RING_ERROR, __ATOMIC_RELEASE);
		goto out;
	}
	prefault_stack();
	__atomic_store_n(&r->hdr->state, RING_RUNNING, __ATOMIC_RELEASE);

	while (!READ_ONCE(stop_requested) &&
	       (!opt.samples_per_cpu || seq < opt.samples_per_cpu) &&
	       (!end_ns || next_ns <= end_ns)) {
		ns_to_ts(next_ns, &ts);
		err = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		if (err == EINTR)
			continue;
		if (err) {
			c->error = err;
			snprintf(r->hdr->message, RING_MESSAGE_LEN,
				 "cpu %d: clock_nanosleep: %s", c->cpu, strerror(err));
			WRITE_ONCE(r->hdr->error, (u32)err);
			__atomic_store_n(&r->hdr->state, RING_ERROR, __ATOMIC_RELEASE);
			goto out;
		}
		now_ns = monotonic_ns();
		ring_push(r, seq++, next_ns, now_ns, flags);
		flags = 0;
		next_ns += opt.period_ns;
		if (next_ns <= now_ns) {
			/* woke a whole period late: skip to the next future deadline */
			skipped = (now_ns - next_ns) / opt.period_ns + 1;
			next_ns += skipped * opt.period_ns;
			WRITE_ONCE(r->hdr->overruns, r->hdr->overruns + skipped);
			flags = RING_F_OVERRUN;
		}
	}
	__atomic_store_n(&r->hdr->state, RING_DONE, __ATOMIC_RELEASE);
out:
	__atomic_sub_fetch(&threads_left, 1, __ATOMIC_ACQ_REL);
	return NULL;
}

/* start_threads - one pinned thread per CPU; 0 or -errno */
static int start_threads(void)
{
	pthread_attr_t attr;
	int err;

	err = pthread_attr_init(&attr);
	if (err)
		return -err;
	pthread_attr_setstacksize(&attr, THREAD_STACK_BYTES);
	threads_left = opt.ncpus;
	for (int i = 0; i < opt.ncpus; i++) {
		err = pthread_create(&ctxs[i].thread, &attr, cpu_thread, &ctxs[i]);
		if (err) {
			pthread_attr_destroy(&attr);
			__atomic_store_n(&stop_requested, 1, __ATOMIC_RELEASE);
			__atomic_sub_fetch(&threads_left, opt.ncpus - i, __ATOMIC_ACQ_REL);
			for (int j = 0; j < i; j++)
				pthread_join(ctxs[j].thread, NULL);
			return dir_fail(err, "cannot start the thread of cpu %d: %s",
					ctxs[i].cpu, strerror(err));
		}
	}
	pthread_attr_destroy(&attr);
	return 0;
}

/* wait_threads - wait for the threads to finish or a stop signal; 0 or -errno */
static int wait_threads(const sigset_t *stopset)
{
	struct timespec poll_ts = { .tv_sec = 0, .tv_nsec = 100000000 };
	int failed = 0;

	while (__atomic_load_n(&threads_left, __ATOMIC_ACQUIRE) > 0) {
		int sig = sigtimedwait(stopset, NULL, &poll_ts);

		if (sig > 0)
			__atomic_store_n(&stop_requested, 1, __ATOMIC_RELEASE);
	}
	for (int i = 0; i < opt.ncpus; i++) {
		pthread_join(ctxs[i].thread, NULL);
		if (ctxs[i].error && !failed) {
			failed = ctxs[i].error;
			dir_fail(failed, "%s", ctxs[i].ring.hdr->message);
		}
	}
	return failed ? -failed : 0;
}

int main(int argc, char **argv)
{
	sigset_t stopset;
	void *area = NULL;
	int dma_fd, err;

	parse_args(argc, argv);
	/* a SIGTERM if the parent (irqlab) dies: we then stop cleanly */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	sigemptyset(&stopset);
	sigaddset(&stopset, SIGINT);
	sigaddset(&stopset, SIGTERM);
	/* blocked before any thread exists, so only sigtimedwait sees them */
	pthread_sigmask(SIG_BLOCK, &stopset, NULL);

	ctxs = calloc((size_t)opt.ncpus, sizeof(*ctxs));
	if (!ctxs)
		return EXIT_RUNTIME;
	if (map_shm(&area))
		return EXIT_RUNTIME;
	dir_setup(area);
	if (rt_preflight())
		return EXIT_NO_RT;
	if (mlockall(MCL_CURRENT | MCL_FUTURE) == 0)
		dir->flags |= MR_F_MLOCKED;
	else
		fprintf(stderr, "irqlab-native: warning: mlockall: %s (page faults may "
			"show as latency)\n", strerror(errno));
	dma_fd = hold_dma_latency();
	if (dma_fd < 0)
		fprintf(stderr, "irqlab-native: warning: /dev/cpu_dma_latency: %s (deep "
			"C-states stay allowed)\n", strerror(-dma_fd));

	start_ns = monotonic_ns() + START_LEAD_NS;
	start_ns -= start_ns % 1000;
	end_ns = opt.duration_ns ? start_ns + opt.duration_ns : 0;
	dir->start_ns = start_ns;
	if (opt.verbose)
		fprintf(stderr, "irqlab-native: %d cpu(s), %s priority %d, period %llu ns, "
			"capacity %u, flags %#x\n", opt.ncpus,
			dir->policy == MR_POLICY_FIFO ? "SCHED_FIFO" : "SCHED_OTHER",
			opt.priority, (unsigned long long)opt.period_ns, opt.capacity,
			dir->flags);
	__atomic_store_n(&dir->state, RING_RUNNING, __ATOMIC_RELEASE);
	err = start_threads();
	if (!err)
		err = wait_threads(&stopset);
	if (dma_fd >= 0)
		close(dma_fd);
	if (err)
		return EXIT_RUNTIME;
	__atomic_store_n(&dir->state, RING_DONE, __ATOMIC_RELEASE);
	return 0;
}
