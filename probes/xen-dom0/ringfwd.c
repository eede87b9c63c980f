// SPDX-License-Identifier: MIT
/*
 * ringfwd.c - dom0 side of `--target xen --xen-dom0 linux`: forwards the probe's
 * sample ring from a domU's RAM to the host, without the domU doing anything per
 * sample (no console write, trap or hypercall in the measured domain).
 *
 *   ringfwd DOMID RING_GPA SHM_PATH [POLL_US]
 *
 * The ring (probes/guest/lib/ring.h) sits at RING_GPA in the domU (a PVH guest: gfn
 * = gpa >> 12). It is mapped with libxenforeignmemory (privcmd); the one word written
 * is the header's start_gate, set once the copy can begin (a dom0less probe booted
 * with gate=1 waits for it: it runs before dom0 does). The ring is copied
 * into SHM_PATH, the BAR 2 of QEMU's ivshmem-plain device as dom0 sees it
 * (/sys/bus/pci/devices/<bdf>/resource2), which the host reads with its ordinary ring
 * reader. Each poll copies the new records first, then the header without its head,
 * then head: the host never sees a head ahead of the records behind it. Records the
 * probe overwrote before a poll copied them show up on the host as sequence gaps and
 * are counted as lost there, as for any ring.
 *
 * Ends when the probe's state is done or error and everything is copied (exit 0), or
 * on an error (exit 1, the reason on stderr, which init sends to dom0's console).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ringcopy.h"

#define PAGE_SIZE	4096UL
#define WAIT_RING_S	120

/* libxenforeignmemory (xen/include/xenforeignmemory.h), declared here: no -dev
 * package is installed on the host that builds this. xen_pfn_t is unsigned long. */
typedef struct xenforeignmemory_handle xenforeignmemory_handle;
xenforeignmemory_handle *xenforeignmemory_open(void *logger, unsigned int flags);
void *xenforeignmemory_map(xenforeignmemory_handle *fmem, uint32_t dom, int prot,
			   size_t pages, const unsigned long arr[], int err[]);
int xenforeignmemory_unmap(xenforeignmemory_handle *fmem, void *addr, size_t pages);

/* map_gfns - map @pages guest frames of @dom from @gfn with @prot, or NULL */
static void *map_gfns(xenforeignmemory_handle *fm, uint32_t dom, unsigned long gfn,
		      size_t pages, int prot)
{
	unsigned long *arr = calloc(pages, sizeof(*arr));
	int *err = calloc(pages, sizeof(*err));
	void *p;
	size_t i;

	if (!arr || !err)
		return NULL;
	for (i = 0; i < pages; i++)
		arr[i] = gfn + i;
	p = xenforeignmemory_map(fm, dom, prot, pages, arr, err);
	for (i = 0; p && i < pages; i++) {
		if (err[i]) {
			xenforeignmemory_unmap(fm, p, pages);
			p = NULL;
		}
	}
	free(arr);
	free(err);
	return p;
}

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	xenforeignmemory_handle *fm;
	const volatile uint8_t *src = NULL;
	struct ring_copy rc;
	uint8_t *dst;
	uint64_t gpa;
	uint32_t dom;
	long poll_us = argc > 4 ? atol(argv[4]) : 5000;
	size_t pages;
	int fd, waited, state;

	if (argc < 4) {
		fprintf(stderr, "usage: ringfwd DOMID RING_GPA SHM_PATH [POLL_US]\n");
		return 2;
	}
	dom = strtoul(argv[1], NULL, 0);
	gpa = strtoull(argv[2], NULL, 0);
	fm = xenforeignmemory_open(NULL, 0);
	if (!fm) {
		perror("ringfwd: xenforeignmemory_open");
		return 1;
	}
	/* the probe writes the header once it has booted: wait for its magic */
	for (waited = 0;; waited++) {
		src = map_gfns(fm, dom, gpa / PAGE_SIZE, 1, PROT_READ);
		if (src && ringcopy_ready(src))
			break;
		if (src)
			xenforeignmemory_unmap(fm, (void *)src, 1);
		if (waited >= WAIT_RING_S * 10) {
			fprintf(stderr, "ringfwd: no ring in domain %u at %#llx\n", dom,
				(unsigned long long)gpa);
			return 1;
		}
		sleep_us(100000);
	}
	ringcopy_init(&rc, src);
	xenforeignmemory_unmap(fm, (void *)src, 1);
	pages = (rc.bytes + PAGE_SIZE - 1) / PAGE_SIZE;
	src = map_gfns(fm, dom, gpa / PAGE_SIZE, pages, PROT_READ | PROT_WRITE);
	if (!src) {
		perror("ringfwd: map ring");
		return 1;
	}
	fd = open(argv[3], O_RDWR | O_SYNC);
	if (fd < 0) {
		perror("ringfwd: open shm");
		return 1;
	}
	dst = mmap(NULL, rc.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (dst == MAP_FAILED) {
		perror("ringfwd: mmap shm");
		return 1;
	}
	fprintf(stderr, "ringfwd: domain %u ring %#llx: %u records of %u bytes\n", dom,
		(unsigned long long)gpa, rc.capacity, rc.record_bytes);
	/* a probe booted with gate=1 (a dom0less domU) starts sampling now */
	ringcopy_open_gate((volatile uint8_t *)src);
	for (;;) {
		state = ringcopy_step(&rc, dst, src);
		if (state == RINGCOPY_DONE || state == RINGCOPY_ERROR) {
			/* the state was read before head: nothing is left behind */
			fprintf(stderr, "ringfwd: probe %s after %llu records\n",
				state == RINGCOPY_DONE ? "done" : "failed",
				(unsigned long long)rc.copied);
			return 0;
		}
		sleep_us(poll_us);
	}
}
