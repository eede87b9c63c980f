// SPDX-License-Identifier: Apache-2.0
/* mring.c - map the shared memory, write the ring directory, report failures */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "nstime.h"
#include "mring.h"

static struct mr_dir *fail_dir;		/* where mr_fail reports, once set up */
static struct ring *fail_ring;

/*
 * mr_map - map @nrings rings of @capacity records at @offset_bytes of the
 * file @path (or the inherited @fd when @path is NULL); 0 or -errno, and the
 * reason on stderr
 */
int mr_map(const char *path, int fd, u64 offset_bytes, int nrings, u32 capacity,
	   void **area)
{
	u64 need_bytes = MR_BYTES(nrings, capacity);
	struct stat st;
	void *p;
	int err;

	if (path) {
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			err = errno;
			fprintf(stderr, "%s: error: cannot open --shm %s: %s\n", cli_prog(),
				path, strerror(err));
			return -err;
		}
	}
	if (fstat(fd, &st)) {
		err = errno;
		fprintf(stderr, "%s: error: fstat of the shared memory: %s\n", cli_prog(),
			strerror(err));
		return -err;
	}
	if ((u64)st.st_size < offset_bytes + need_bytes) {
		fprintf(stderr, "%s: error: shared memory is %lld bytes; %d ring(s) of %u "
			"records at offset %llu need %llu\n", cli_prog(), (long long)st.st_size,
			nrings, capacity, (unsigned long long)offset_bytes,
			(unsigned long long)(offset_bytes + need_bytes));
		return -ENOSPC;
	}
	p = mmap(NULL, need_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)offset_bytes);
	if (p == MAP_FAILED) {
		err = errno;
		fprintf(stderr, "%s: error: mmap of the shared memory: %s\n", cli_prog(),
			strerror(err));
		return -err;
	}
	if (path)
		close(fd);
	*area = p;
	return 0;
}

/*
 * mr_dir_begin - hide the directory at @area (magic 0), clear it and write
 * its fields, state BOOTING; the directory. mr_dir_publish shows it again.
 */
struct mr_dir *mr_dir_begin(void *area, int nrings, u32 capacity, u64 period_ns,
			    u32 priority)
{
	struct mr_dir *dir = area;

	__atomic_store_n(&dir->magic, 0, __ATOMIC_RELEASE);
	memset((u8 *)area + sizeof(dir->magic), 0, MR_DIR_SIZE - sizeof(dir->magic));
	dir->version = MR_VERSION;
	dir->ring_count = (u32)nrings;
	dir->ring_stride = MR_STRIDE(capacity);
	dir->first_ring = MR_DIR_SIZE;
	dir->period_ns = period_ns;
	dir->priority = priority;
	dir->state = RING_BOOTING;
	return dir;
}

/* mr_ring_init - ring @i of @dir: records touched, v1 header from @cfg (BOOTING); 0 or -errno */
int mr_ring_init(struct mr_dir *dir, int i, u32 capacity, const struct mr_ring_cfg *cfg,
		 struct ring *r)
{
	u8 *base = (u8 *)dir + dir->first_ring + (u64)i * dir->ring_stride;
	u32 every = cfg->inject_every > UINT32_MAX ? UINT32_MAX : (u32)cfg->inject_every;
	int err;

	/* touch every record page now, not in the measuring loop */
	memset(base + RING_HDR_SIZE, 0, (size_t)capacity * RING_RECORD_SIZE);
	err = ring_init(r, base, capacity, PROBE_ARCH, cfg->build_id, cfg->cpu);
	if (err)
		return err;
	ring_set_timing(r, NS_PER_SEC, TICK_CLOCK_MONOTONIC, cfg->timer_mode,
			cfg->period_ns, 0);
	ring_set_config(r, cfg->idle ? cfg->idle : IDLE_SLEEP, every, cfg->inject_delay_ns);
	dir->cpu[i] = cfg->cpu;
	return 0;
}

/* mr_dir_publish - show the directory (magic, release: every field before it) */
void mr_dir_publish(struct mr_dir *dir)
{
	__atomic_store_n(&dir->magic, MR_MAGIC, __ATOMIC_RELEASE);
}

/* mr_fail_into - let mr_fail report into @dir (and @r, when not NULL) from now on */
void mr_fail_into(struct mr_dir *dir, struct ring *r)
{
	fail_dir = dir;
	fail_ring = r;
}

/* mr_fail - report @err with a message on stderr and in the area; -@err */
int mr_fail(int err, const char *fmt, ...)
{
	char msg[MR_MESSAGE_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: error: %s\n", cli_prog(), msg);
	if (fail_ring)
		ring_set_error(fail_ring, (u32)err, "%s", msg);
	if (fail_dir) {
		memcpy(fail_dir->message, msg, sizeof(msg));
		WRITE_ONCE(fail_dir->error, (u32)err);
		__atomic_store_n(&fail_dir->state, RING_ERROR, __ATOMIC_RELEASE);
	}
	return -err;
}
