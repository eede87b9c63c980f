// SPDX-License-Identifier: Apache-2.0
/*
 * gtrace.c - irqlab-gtrace: the Linux guest's own ftrace, streamed to the host
 *
 * Usage: irqlab-gtrace SHM_PATH READY_FD [EXTRA_EVENTS]
 *
 * Started by irqlab-init when the host gave the guest a second ivshmem-plain
 * device at the trace slot (`irqlab run --target linux-guest --trace`). It
 * mounts tracefs, sets the trace clock to mono (the clock the probe's samples
 * are read on, so a sample's window is trace time as it is), enables the
 * scheduler, IRQ, softirq, timer and irq_vectors events (and preemptirq's where
 * the kernel has them) and EXTRA_EVENTS (a comma list of GROUP/EVENT: an
 * arm64 KVM host's kvm events, irqlab.runner.kvm_arm64), writes one byte to READY_FD once tracing is on, then
 * copies every ring page of per_cpu/cpuN/trace_pipe_raw into the shared
 * memory every 50 ms until SIGUSR1 (one last drain) or SIGTERM. The host reads
 * the memory after the run; a page is visible to it once `committed` covers it.
 *
 * Layout (little endian; docs/formats.md "guest trace region"):
 *   0    char magic[8] "IRQGTR01"
 *   8    u32 version (1)          12  u32 state (1 recording, 2 done, 3 error)
 *   16   u64 committed (bytes of records after the 4 KiB header)
 *   24   u64 dropped_pages (the region was full)
 *   32   u32 ncpus                36  u32 page_bytes
 *   40   u64 region_bytes
 *   48   char error[200]
 *   256  u32 n_anchors (2)        264 anchors[2] of {u64 mono_ns, u64 counter}
 *        (start, latest drain): the guest's clock and its counter read back to
 *        back (x86: the TSC; arm64: CNTVCT_EL0, the virtual counter)
 *   296  u64 counter_hz (version 2): the counter's rate, CNTFRQ_EL0 on arm64;
 *        0 on x86 (the TSC's rate is not architectural: the host fits it)
 *   304  u64 gap_ns[2] (version 2): each anchor's two clock reads apart (the
 *        best of ANCHOR_TRIES: its mono_ns is within half of it)
 *   4096 records: u32 type (1 file, 2 page), u32 cpu, u32 len, u32 name_len,
 *        name, data, zero padding to 8 bytes
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "lib/textfile.h"

#define TRACEFS		"/sys/kernel/tracing"
#define HEADER_BYTES	4096
#define PAGE_BYTES	4096
#define MAX_CPUS	64
#define DRAIN_NS	50000000L
#define BUFFER_KB	"4096"
#define ANCHOR_TRIES	16

enum { REC_FILE = 1, REC_PAGE = 2 };
enum { ST_RECORDING = 1, ST_DONE = 2, ST_ERROR = 3 };

struct region {
	char magic[8];
	uint32_t version, state;
	uint64_t committed, dropped_pages;
	uint32_t ncpus, page_bytes;
	uint64_t region_bytes;
	char error[200];
	char pad[256 - 48 - 200];
	uint32_t n_anchors, pad2;
	struct { uint64_t mono_ns, counter; } anchors[2];
	uint64_t counter_hz;
	uint64_t gap_ns[2];
};

/* the events irqlab's explainers read; a missing one is listed, not an error */
static const char *const EVENTS[] = {
	"sched/sched_switch", "sched/sched_waking", "sched/sched_wakeup",
	"irq/irq_handler_entry", "irq/irq_handler_exit",
	"irq/softirq_entry", "irq/softirq_exit",
	"timer/hrtimer_start", "timer/hrtimer_expire_entry",
	"timer/hrtimer_expire_exit", "timer/hrtimer_cancel",
	"preemptirq/irq_disable", "preemptirq/irq_enable",
	"preemptirq/preempt_disable", "preemptirq/preempt_enable",
	NULL,
};

static volatile sig_atomic_t last_drain, quit;
static struct region *hdr;
static char *data;
static uint64_t data_bytes;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		last_drain = 1;
	else
		quit = 1;
}

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

#if defined(__x86_64__)
/* counter_read - the TSC */
static uint64_t counter_read(void)
{
	return __rdtsc();
}

/* counter_rate - 0: the TSC's rate is not architectural (the host fits it) */
static uint64_t counter_rate(void)
{
	return 0;
}
#elif defined(__aarch64__)
/* counter_read - CNTVCT_EL0, the virtual counter the kernel's clock runs on */
static uint64_t counter_read(void)
{
	uint64_t v;

	asm volatile("isb; mrs %0, cntvct_el0" : "=r"(v) : : "memory");
	return v;
}

/* counter_rate - CNTFRQ_EL0 in Hz */
static uint64_t counter_rate(void)
{
	uint64_t v;

	asm volatile("mrs %0, cntfrq_el0" : "=r"(v));
	return v;
}
#else
#error "irqlab-gtrace: unsupported architecture"
#endif

/* anchor - the clock and the counter read back to back into anchor @slot */
static void anchor(int slot)
{
	uint64_t best = UINT64_MAX;

	/*
	 * the counter between two clock reads: the pair is bounded by their gap, so
	 * the narrowest of a few tries (an IRQ or a preemption between two reads
	 * once put a mid-run mapping 30 us off)
	 */
	for (int i = 0; i < ANCHOR_TRIES; i++) {
		uint64_t a = mono_ns(), counter = counter_read(), b = mono_ns();

		if (b - a < best) {
			best = b - a;
			hdr->anchors[slot].mono_ns = a + (b - a) / 2;
			hdr->anchors[slot].counter = counter;
		}
	}
	hdr->gap_ns[slot] = best;
}

/* put - append one record; 0, or -ENOSPC when the region is full */
static int put(uint32_t type, uint32_t cpu, const char *name, const void *buf, uint32_t len)
{
	uint32_t name_len = name ? (uint32_t)strlen(name) : 0;
	uint64_t need = (16 + name_len + len + 7) & ~7ULL;
	uint64_t at = hdr->committed;
	uint32_t head[4] = { type, cpu, len, name_len };

	if (at + need > data_bytes)
		return -ENOSPC;
	memcpy(data + at, head, sizeof(head));
	memcpy(data + at + 16, name, name_len);
	memcpy(data + at + 16 + name_len, buf, len);
	memset(data + at + 16 + name_len + len, 0, need - 16 - name_len - len);
	__sync_synchronize();		/* the record before the count that shows it */
	hdr->committed = at + need;
	return 0;
}

/* ship_file - copy a tracefs text file into the region under @name */
static void ship_file(const char *rel, const char *name)
{
	static char buf[65536];
	char path[512];
	int n;

	snprintf(path, sizeof(path), TRACEFS "/%s", rel);
	n = text_read(path, buf, sizeof(buf));
	if (n >= 0)
		put(REC_FILE, 0, name, buf, (uint32_t)n);
}

static void fail(const char *what, int err)
{
	snprintf(hdr->error, sizeof(hdr->error), "%s: %s", what, strerror(err));
	hdr->state = ST_ERROR;
	fprintf(stderr, "irqlab-gtrace: %s\n", hdr->error);
	exit(1);
}

/* enable_event - enable GROUP/EVENT @ev, ship its format; listed in @enabled or @missing */
static void enable_event(const char *ev, char *enabled, char *missing, size_t size)
{
	char path[512], fmt[320];
	char *out = missing;

	snprintf(path, sizeof(path), TRACEFS "/events/%s/enable", ev);
	if (!text_write(path, "1")) {
		out = enabled;
		snprintf(fmt, sizeof(fmt), "events/%s/format", ev);
		ship_file(fmt, fmt);
	}
	strncat(out, ev, size - strlen(out) - 2);
	strcat(out, "\n");
}

static int setup_tracing(const char *extra)
{
	static char enabled[4096], missing[4096], extra_buf[1024];
	char path[512];

	if (access(TRACEFS "/trace_clock", F_OK) &&
	    mount("tracefs", TRACEFS, "tracefs", 0, NULL))
		return -errno;
	text_write(TRACEFS "/tracing_on", "0");
	if (text_write(TRACEFS "/trace_clock", "mono"))
		return -EINVAL;
	text_write(TRACEFS "/buffer_size_kb", BUFFER_KB);
	for (int i = 0; EVENTS[i]; i++)
		enable_event(EVENTS[i], enabled, missing, sizeof(enabled));
	if (extra) {
		snprintf(extra_buf, sizeof(extra_buf), "%s", extra);
		for (char *save = NULL, *ev = strtok_r(extra_buf, ",", &save); ev;
		     ev = strtok_r(NULL, ",", &save))
			enable_event(ev, enabled, missing, sizeof(enabled));
	}
	/* the x86 system vectors (local timer, IPIs...): every _entry and _exit */
	static char list[16384];
	if (text_read(TRACEFS "/available_events", list, sizeof(list)) > 0) {
		for (char *save = NULL, *ev = strtok_r(list, "\n", &save); ev;
		     ev = strtok_r(NULL, "\n", &save)) {
			size_t n = strlen(ev);
			char rel[200], fmt[256];

			if (strncmp(ev, "irq_vectors:", 12) ||
			    !((n > 6 && !strcmp(ev + n - 6, "_entry")) ||
			      (n > 5 && !strcmp(ev + n - 5, "_exit"))))
				continue;
			snprintf(rel, sizeof(rel), "irq_vectors/%s", ev + 12);
			snprintf(path, sizeof(path), TRACEFS "/events/%s/enable", rel);
			if (text_write(path, "1"))
				continue;
			snprintf(fmt, sizeof(fmt), "events/%s/format", rel);
			ship_file(fmt, fmt);
			strncat(enabled, rel, sizeof(enabled) - strlen(enabled) - 2);
			strcat(enabled, "\n");
		}
	}
	/* trace_marker writes (the guest-hog's stamps) land as ftrace:print */
	ship_file("events/ftrace/print/format", "events/ftrace/print/format");
	/* which tracers the guest kernel has (timerlat/osnoise: rtla's side by side) */
	ship_file("available_tracers", "available_tracers");
	ship_file("events/header_page", "header_page");
	ship_file("events/header_event", "header_event");
	put(REC_FILE, 0, "enabled", enabled, (uint32_t)strlen(enabled));
	put(REC_FILE, 0, "missing", missing, (uint32_t)strlen(missing));
	static char uts[512];
	if (text_read("/proc/sys/kernel/osrelease", uts, sizeof(uts)) > 0)
		put(REC_FILE, 0, "kernel", uts, (uint32_t)strlen(uts));
	return text_write(TRACEFS "/tracing_on", "1");
}

static void drain(int *fds, int ncpus)
{
	static char page[PAGE_BYTES];

	for (int c = 0; c < ncpus; c++) {
		ssize_t n;

		while (fds[c] >= 0 && (n = read(fds[c], page, sizeof(page))) > 0) {
			if (put(REC_PAGE, (uint32_t)c, NULL, page, (uint32_t)n))
				hdr->dropped_pages++;
		}
	}
	anchor(1);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct timespec nap = { .tv_sec = 0, .tv_nsec = DRAIN_NS };
	int fds[MAX_CPUS], ncpus, fd, err;
	struct stat st;
	void *mem;

	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: irqlab-gtrace SHM_PATH READY_FD [EXTRA_EVENTS]\n");
		return 2;
	}
	fd = open(argv[1], O_RDWR | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		perror(argv[1]);
		return 1;
	}
	mem = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	hdr = mem;
	data = (char *)mem + HEADER_BYTES;
	data_bytes = (uint64_t)st.st_size - HEADER_BYTES;
	memset(hdr, 0, sizeof(*hdr));
	hdr->version = 2;
	hdr->counter_hz = counter_rate();
	hdr->page_bytes = PAGE_BYTES;
	hdr->region_bytes = (uint64_t)st.st_size;
	hdr->n_anchors = 2;
	ncpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpus > MAX_CPUS)
		ncpus = MAX_CPUS;
	hdr->ncpus = (uint32_t)ncpus;
	memcpy(hdr->magic, "IRQGTR01", 8);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	err = setup_tracing(argc == 4 ? argv[3] : NULL);
	if (err)
		fail("tracefs set-up", -err);
	for (int c = 0; c < ncpus; c++) {
		char path[128];

		snprintf(path, sizeof(path), TRACEFS "/per_cpu/cpu%d/trace_pipe_raw", c);
		fds[c] = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	}
	anchor(0);
	anchor(1);
	hdr->state = ST_RECORDING;
	if (write(atoi(argv[2]), "1", 1) != 1)
		fail("ready pipe", errno);
	close(atoi(argv[2]));
	/* below the probe: an ordinary task at the lowest CFS weight */
	if (nice(19) < 0 && errno)
		perror("nice");
	while (!last_drain && !quit) {
		drain(fds, ncpus);
		nanosleep(&nap, NULL);
	}
	text_write(TRACEFS "/tracing_on", "0");
	drain(fds, ncpus);
	__sync_synchronize();
	hdr->state = ST_DONE;
	return 0;
}
