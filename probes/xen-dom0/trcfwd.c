// SPDX-License-Identifier: MIT
/*
 * trcfwd.c - dom0 side of `irqlab run --target xen --xen-dom0 linux --trace`: copies
 * xentrace's output (its stdout, through a pipe) into a byte ring in the BAR 2 of a
 * second ivshmem-plain device, a host memfd irqlab drains into the run's capture file.
 * Nothing goes through Xen's console: the bytes only cross dom0's memory.
 *
 *   xentrace -e MASK ... | trcfwd SHM_PATH
 *
 * Ring layout (docs/formats.md section 9a): a 4096-byte header - u64 magic
 * "IRQLXTR1", u64 capacity (data bytes), u64 head (bytes written, by us), u64 tail
 * (bytes consumed, by the host), u32 state (0 running, 1 done, 2 error), u32 pad,
 * u64 stalls (times we waited for the host to make room) - then the data. The ring
 * is lossless: when it is full we wait, the pipe fills, xentrace stops draining
 * Xen's per-CPU buffers and Xen counts what it drops in TRC_LOST_RECORDS records,
 * which the capture counts.
 *
 * Ends at EOF on stdin (state done, exit 0) or on an error (state error, exit 1).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HDR_SIZE	4096UL
#define XTR_MAGIC	0x315254584C515249ULL	/* "IRQLXTR1" read little-endian */
#define OFF_MAGIC	0
#define OFF_CAPACITY	8
#define OFF_HEAD	16
#define OFF_TAIL	24
#define OFF_STATE	32
#define OFF_STALLS	40
#define STATE_DONE	1
#define STATE_ERROR	2
#define CHUNK		65536
#define WAIT_US		1000

/* field64 - a u64 of the shared header */
static volatile uint64_t *field64(uint8_t *shm, size_t off)
{
	return (volatile uint64_t *)(shm + off);
}

/* sleep_us - nanosleep for @us microseconds */
static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/* put - append @n bytes to the ring, waiting for room; returns 0 */
static int put(uint8_t *shm, uint64_t cap, const uint8_t *buf, size_t n)
{
	uint64_t head = *field64(shm, OFF_HEAD);

	while (n) {
		uint64_t tail = __atomic_load_n(field64(shm, OFF_TAIL), __ATOMIC_ACQUIRE);
		uint64_t room = cap - (head - tail), slot = head % cap, k = n;

		if (!room) {
			*field64(shm, OFF_STALLS) += 1;
			sleep_us(WAIT_US);
			continue;
		}
		if (k > room)
			k = room;
		if (k > cap - slot)
			k = cap - slot;
		memcpy(shm + HDR_SIZE + slot, buf, k);
		head += k;
		buf += k;
		n -= k;
		__atomic_store_n(field64(shm, OFF_HEAD), head, __ATOMIC_RELEASE);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static uint8_t buf[CHUNK];
	struct stat st;
	uint8_t *shm;
	uint64_t cap, total = 0;
	ssize_t got;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: xentrace ... | trcfwd SHM_PATH\n");
		return 2;
	}
	fd = open(argv[1], O_RDWR | O_SYNC);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= (off_t)HDR_SIZE) {
		perror("trcfwd: open shm");
		return 1;
	}
	shm = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (shm == MAP_FAILED) {
		perror("trcfwd: mmap shm");
		return 1;
	}
	cap = st.st_size - HDR_SIZE;
	*field64(shm, OFF_CAPACITY) = cap;
	*field64(shm, OFF_HEAD) = 0;
	*field64(shm, OFF_STALLS) = 0;
	*(volatile uint32_t *)(shm + OFF_STATE) = 0;
	__atomic_store_n(field64(shm, OFF_MAGIC), XTR_MAGIC, __ATOMIC_RELEASE);
	for (;;) {
		got = read(0, buf, sizeof(buf));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		put(shm, cap, buf, got);
		total += got;
	}
	__atomic_store_n((volatile uint32_t *)(shm + OFF_STATE),
			 got < 0 ? STATE_ERROR : STATE_DONE, __ATOMIC_RELEASE);
	fprintf(stderr, "trcfwd: bytes=%llu stalls=%llu%s\n", (unsigned long long)total,
		(unsigned long long)*field64(shm, OFF_STALLS), got < 0 ? " read_error=1" : "");
	return got < 0 ? 1 : 0;
}
