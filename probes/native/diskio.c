// SPDX-License-Identifier: Apache-2.0
/*
 * diskio.c - irqlab-diskio: block I/O inside the net target's guest
 *
 * The `guest-disk` load (seed 003: QEMU's block I/O workers disturbing a
 * network round trip): random O_DIRECT reads and/or writes of one block on
 * the guest's virtio-blk disk, flat out or at --rate operations per second,
 * at SCHED_OTHER (the responder's SCHED_FIFO preempts it). Every request
 * goes to QEMU, which serves it with the run's aio mode and iothread. One
 * line on the console when it starts, nothing per request. Runs until the
 * VM is stopped; exit 2 on bad usage, 1 when the disk cannot be used.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/cli.h"
#include "lib/nstime.h"

#define DEV_WAIT_MS		10000	/* virtio-blk probes asynchronously */
#define BLOCK_MAX		(1u << 20)

enum io_mode { MODE_RANDRW, MODE_READ, MODE_WRITE };

struct diskio_opts {
	const char *dev;
	enum io_mode mode;
	u32 block_bytes;
	u64 rate;		/* operations per second, 0 = flat out */
};

static struct diskio_opts opt = { .dev = "/dev/vda", .block_bytes = 4096 };
static const char *const mode_names[] = { "randrw", "read", "write" };

/*
 * diskio_opt - @a (with @val, the next word or NULL) when it is one of irqlab-diskio's
 * options: the words taken (cli_parse), 0 when unknown; exits 2 on a bad value
 */
static int diskio_opt(const char *a, const char *val)
{
	u64 v;

	if (!val)
		cli_usage_fail("missing value of %s", a);
	if (!strcmp(a, "--dev")) {
		opt.dev = val;
	} else if (!strcmp(a, "--mode")) {
		unsigned int m;

		for (m = 0; m < ARRAY_SIZE(mode_names); m++)
			if (!strcmp(val, mode_names[m]))
				break;
		if (m == ARRAY_SIZE(mode_names))
			cli_usage_fail("--mode must be randrw, read or write, not %s", val);
		opt.mode = (enum io_mode)m;
	} else if (!strcmp(a, "--block")) {
		if (parse_dec_u64(val, &v) || v < 512 || v > BLOCK_MAX || (v & 511))
			cli_usage_fail("--block must be a multiple of 512 up to 1 MiB, "
				       "not %s", val);
		opt.block_bytes = (u32)v;
	} else if (!strcmp(a, "--rate")) {
		if (parse_dec_u64(val, &opt.rate))
			cli_usage_fail("--rate is not a count: %s", val);
	} else {
		return 0;
	}
	return 2;
}

/* parse_args - fill @opt from argv; exits 2 on bad usage */
static void parse_args(int argc, char **argv)
{
	cli_init("irqlab-diskio", "(options: --dev PATH --mode randrw|read|write "
		 "--block BYTES --rate OPS)");
	cli_parse(argc, argv, NULL, NULL, diskio_opt);
}

/* open_disk - wait for the device and open it for direct I/O; fd or -errno */
static int open_disk(u64 *size_bytes)
{
	struct timespec nap = { .tv_sec = 0, .tv_nsec = 10000000 };
	int fd = -1;

	for (int waited_ms = 0; waited_ms < DEV_WAIT_MS && fd < 0; waited_ms += 10) {
		fd = open(opt.dev, O_RDWR | O_DIRECT | O_CLOEXEC);
		if (fd < 0 && errno != ENOENT && errno != ENXIO)
			return -errno;
		if (fd < 0)
			nanosleep(&nap, NULL);
	}
	if (fd < 0)
		return -ENODEV;
	if (ioctl(fd, BLKGETSIZE64, size_bytes) || *size_bytes < opt.block_bytes) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

/* next_offset - a random block-aligned offset on a disk of @blocks blocks */
static off_t next_offset(u64 blocks, u64 *state)
{
	/* xorshift64: cheap, and the same sequence every run */
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return (off_t)((*state % blocks) * opt.block_bytes);
}

/* one_op - the @n-th request at @off; 0 or -errno */
static int one_op(int fd, void *buf, off_t off, u64 n)
{
	int write_it = opt.mode == MODE_WRITE || (opt.mode == MODE_RANDRW && (n & 1));
	ssize_t done = write_it ? pwrite(fd, buf, opt.block_bytes, off)
				: pread(fd, buf, opt.block_bytes, off);

	return done == (ssize_t)opt.block_bytes ? 0 : (done < 0 ? -errno : -EIO);
}

/* run_io - requests until the VM stops; -errno on a disk error */
static int run_io(int fd, u64 size_bytes)
{
	u64 blocks = size_bytes / opt.block_bytes, state = 0x9e3779b97f4a7c15ULL, next_ns;
	u64 period_ns = opt.rate ? NS_PER_SEC / opt.rate : 0;
	void *buf;
	int err;

	if (posix_memalign(&buf, 4096, opt.block_bytes))
		return -ENOMEM;
	memset(buf, 0x5a, opt.block_bytes);
	next_ns = monotonic_ns();
	for (u64 n = 0;; n++) {
		err = one_op(fd, buf, next_offset(blocks, &state), n);
		if (err)
			return err;
		if (period_ns) {
			next_ns += period_ns;
			sleep_until_ns(next_ns);
		}
	}
}

int main(int argc, char **argv)
{
	u64 size_bytes = 0;
	int fd, err;

	parse_args(argc, argv);
	fd = open_disk(&size_bytes);
	if (fd < 0) {
		fprintf(stderr, "irqlab-diskio: error: %s: %s\n", opt.dev, strerror(-fd));
		return EXIT_RUNTIME;
	}
	fprintf(stderr, "irqlab-diskio: %s, %llu bytes, %s of %u-byte blocks, %s\n", opt.dev,
		(unsigned long long)size_bytes, mode_names[opt.mode], opt.block_bytes,
		opt.rate ? "paced" : "flat out");
	err = run_io(fd, size_bytes);
	fprintf(stderr, "irqlab-diskio: error: %s\n", strerror(-err));
	return EXIT_RUNTIME;
}
