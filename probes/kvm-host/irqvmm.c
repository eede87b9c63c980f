// SPDX-License-Identifier: Apache-2.0
/*
 * irqvmm.c - a minimal arm64 VMM on the KVM API: the L1 side of
 * `irqlab run --target kvm-arm64` (an arm64 KVM host nested under QEMU TCG).
 *
 *   irqvmm IMAGE DTB SHM_PATH [-m MEM_MIB] [-c CPU] [-f FIFO_PRIO] [-p POLL_US]
 *
 * One vCPU, an in-kernel GICv3 (KVM_DEV_TYPE_ARM_VGIC_V3) at QEMU virt's
 * addresses, the in-kernel arch timer, PSCI 0.2 in KVM. Guest RAM starts at
 * RAM_BASE (0x40000000, as on QEMU virt), so the probe's ring is at
 * RAM_BASE + 4 MiB as the host expects. IMAGE (the probe's Linux Image) is
 * loaded at RAM_BASE, the DTB (written by the host: memory, GIC, timer, PSCI,
 * a PL011 and /chosen/bootargs) at RAM_BASE + 16 MiB and handed over in x0.
 *
 * The vCPU runs on its own thread (named "irqvmm-vcpu0"), pinned to CPU and
 * at SCHED_FIFO FIFO_PRIO when asked. Writes to the PL011's data register
 * are copied to stderr; PSCI SYSTEM_OFF ends the vCPU. The main thread copies
 * the probe's ring into SHM_PATH (an ivshmem BAR) every POLL_US, records
 * first, then the header, then head (probes/xen-dom0/ringcopy.h).
 *
 * Reports on stderr, for the host (irqlab.runner.kvm_arm64):
 *   irqlab-kvm: vcpu tid=T cpu=C
 *   irqlab-kvm: clock voffset_tick=O bound_tick=B   (guest CNTVCT = host - O)
 *   irqlab-kvm: exit reason=R ...   (the vCPU stopped)
 * Exit 0 when the probe's ring is done, 1 on an error, 2 on a usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../xen-dom0/ringcopy.h"

#define RAM_BASE	0x40000000ULL
#define RING_GPA	(RAM_BASE + 0x400000ULL)
#define DTB_OFFSET	(16ULL << 20)
#define GICD_BASE	0x08000000ULL
#define GICR_BASE	0x080A0000ULL
#define UART_BASE	0x09000000ULL
#define UART_SIZE	0x1000ULL
#define CLOCK_TRIES	64
#define WAIT_RING_S	120
#define SYSTEM_OFF_WAIT_MS 2000

struct vm {
	int kvm, vm, vcpu, gic;
	struct kvm_run *run;
	uint8_t *ram;
	uint64_t ram_bytes;
	int cpu, fifo_prio;
	volatile int vcpu_done;		/* 1 stopped normally, -1 on an error */
};

/* die - print @what and errno's text, exit 1 */
static void die(const char *what)
{
	fprintf(stderr, "irqvmm: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* counter - this host's virtual counter (its physical count under VHE) */
static uint64_t counter(void)
{
	uint64_t v;

	__asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v) :: "memory");
	return v;
}

/* load_file - read @path into guest RAM at @off; its size, or -errno */
static long load_file(struct vm *v, const char *path, uint64_t off)
{
	struct stat st;
	long n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st))
		return -errno;
	if ((uint64_t)st.st_size > v->ram_bytes - off) {
		close(fd);
		return -EFBIG;
	}
	while (n < st.st_size) {
		ssize_t r = read(fd, v->ram + off + n, (size_t)(st.st_size - n));

		if (r <= 0) {
			close(fd);
			return r < 0 ? -errno : -EIO;
		}
		n += r;
	}
	close(fd);
	return n;
}

/* set_reg - KVM_SET_ONE_REG of a 64-bit register; 0 or -errno */
static int set_reg(struct vm *v, uint64_t id, uint64_t val)
{
	struct kvm_one_reg r = { .id = id, .addr = (uint64_t)(uintptr_t)&val };

	return ioctl(v->vcpu, KVM_SET_ONE_REG, &r) ? -errno : 0;
}

/* get_reg - KVM_GET_ONE_REG of a 64-bit register; 0 or -errno */
static int get_reg(struct vm *v, uint64_t id, uint64_t *val)
{
	struct kvm_one_reg r = { .id = id, .addr = (uint64_t)(uintptr_t)val };

	return ioctl(v->vcpu, KVM_GET_ONE_REG, &r) ? -errno : 0;
}

#define CORE_REG(x) (KVM_REG_ARM64 | KVM_REG_SIZE_U64 | KVM_REG_ARM_CORE | \
		     (offsetof(struct kvm_regs, x) / sizeof(uint32_t)))

/* gic_attr - KVM_SET_DEVICE_ATTR on the vGIC; 0 or -errno */
static int gic_attr(struct vm *v, uint32_t group, uint64_t attr, void *val)
{
	struct kvm_device_attr a = {
		.group = group, .attr = attr, .addr = (uint64_t)(uintptr_t)val,
	};

	return ioctl(v->gic, KVM_SET_DEVICE_ATTR, &a) ? -errno : 0;
}

/* create_vm - the VM, its RAM, one vCPU with PSCI 0.2 and a GICv3; 0 or -errno */
static int create_vm(struct vm *v, uint64_t mem_bytes)
{
	struct kvm_userspace_memory_region mr = { 0 };
	struct kvm_create_device dev = { .type = KVM_DEV_TYPE_ARM_VGIC_V3 };
	struct kvm_vcpu_init init;
	uint64_t gicd = GICD_BASE, gicr = GICR_BASE;
	uint32_t nr_irqs = 128;
	long run_bytes;

	v->kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (v->kvm < 0)
		return -errno;
	v->vm = ioctl(v->kvm, KVM_CREATE_VM, 0);
	if (v->vm < 0)
		return -errno;
	v->ram_bytes = mem_bytes;
	v->ram = mmap(NULL, mem_bytes, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (v->ram == MAP_FAILED)
		return -errno;
	mr.guest_phys_addr = RAM_BASE;
	mr.memory_size = mem_bytes;
	mr.userspace_addr = (uint64_t)(uintptr_t)v->ram;
	if (ioctl(v->vm, KVM_SET_USER_MEMORY_REGION, &mr))
		return -errno;
	v->vcpu = ioctl(v->vm, KVM_CREATE_VCPU, 0);
	if (v->vcpu < 0)
		return -errno;
	run_bytes = ioctl(v->kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (run_bytes <= 0)
		return -errno;
	v->run = mmap(NULL, (size_t)run_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, v->vcpu, 0);
	if (v->run == MAP_FAILED)
		return -errno;
	memset(&init, 0, sizeof(init));
	if (ioctl(v->vm, KVM_ARM_PREFERRED_TARGET, &init))
		return -errno;
	init.features[0] |= 1U << KVM_ARM_VCPU_PSCI_0_2;
	if (ioctl(v->vcpu, KVM_ARM_VCPU_INIT, &init))
		return -errno;
	if (ioctl(v->vm, KVM_CREATE_DEVICE, &dev))
		return -errno;
	v->gic = (int)dev.fd;
	if (gic_attr(v, KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V3_ADDR_TYPE_DIST, &gicd) ||
	    gic_attr(v, KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V3_ADDR_TYPE_REDIST, &gicr) ||
	    gic_attr(v, KVM_DEV_ARM_VGIC_GRP_NR_IRQS, 0, &nr_irqs) ||
	    gic_attr(v, KVM_DEV_ARM_VGIC_GRP_CTRL, KVM_DEV_ARM_VGIC_CTRL_INIT, NULL))
		return -errno;
	return 0;
}

/*
 * clock_offset - the guest's virtual counter offset (host count - guest count)
 * from KVM_REG_ARM_TIMER_CNT read between two host counter reads; the
 * tightest of CLOCK_TRIES pairs. 0 or -errno.
 */
static int clock_offset(struct vm *v, int64_t *off, uint64_t *bound)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < CLOCK_TRIES; i++) {
		uint64_t a = counter(), g, b;
		int err = get_reg(v, KVM_REG_ARM_TIMER_CNT, &g);

		b = counter();
		if (err)
			return err;
		if (b - a < best) {
			best = b - a;
			*off = (int64_t)(a + (b - a) / 2 - g);
		}
	}
	*bound = (best + 1) / 2;
	return 0;
}

/* mmio - a PL011 access: data register writes go to stderr, reads are 0 */
static void mmio(struct vm *v)
{
	uint64_t addr = v->run->mmio.phys_addr;

	if (addr >= UART_BASE && addr < UART_BASE + UART_SIZE) {
		if (v->run->mmio.is_write && addr == UART_BASE)
			fputc(v->run->mmio.data[0], stderr);
		else if (!v->run->mmio.is_write)
			memset(v->run->mmio.data, 0, sizeof(v->run->mmio.data));
		return;
	}
	if (!v->run->mmio.is_write)
		memset(v->run->mmio.data, 0, sizeof(v->run->mmio.data));
	fprintf(stderr, "irqlab-kvm: mmio addr=%#llx write=%d ignored\n",
		(unsigned long long)addr, v->run->mmio.is_write);
}

/* vcpu_thread - KVM_RUN until the guest powers off or something fails */
static void *vcpu_thread(void *arg)
{
	struct vm *v = arg;

	prctl(PR_SET_NAME, "irqvmm-vcpu0");
	if (v->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(v->cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			perror("irqvmm: pin vCPU");
	}
	if (v->fifo_prio > 0) {
		struct sched_param sp = { .sched_priority = v->fifo_prio };

		if (sched_setscheduler(0, SCHED_FIFO, &sp))
			perror("irqvmm: SCHED_FIFO");
	}
	fprintf(stderr, "irqlab-kvm: vcpu tid=%ld cpu=%d prio=%d\n",
		(long)syscall(SYS_gettid), v->cpu, v->fifo_prio);
	for (;;) {
		if (ioctl(v->vcpu, KVM_RUN, 0)) {
			if (errno == EINTR)
				continue;	/* a signal: its exit reason is stale */
			fprintf(stderr, "irqlab-kvm: exit reason=run_failed errno=%d\n", errno);
			v->vcpu_done = -1;
			return NULL;
		}
		switch (v->run->exit_reason) {
		case KVM_EXIT_MMIO:
			mmio(v);
			break;
		case KVM_EXIT_INTR:
			break;
		case KVM_EXIT_SYSTEM_EVENT:
			fprintf(stderr, "irqlab-kvm: exit reason=system_event type=%u\n",
				v->run->system_event.type);
			v->vcpu_done = 1;
			return NULL;
		default:
			fprintf(stderr, "irqlab-kvm: exit reason=unhandled code=%u\n",
				v->run->exit_reason);
			v->vcpu_done = -1;
			return NULL;
		}
	}
}

/* sleep_us - nanosleep for @us microseconds */
static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/* forward - copy the ring into @shm_path until the probe is done; 0 or -errno */
static int forward(struct vm *v, const char *shm_path, long poll_us)
{
	const uint8_t *src = v->ram + (RING_GPA - RAM_BASE);
	struct ring_copy rc = { 0 };
	uint8_t *dst;
	int fd, state;

	for (int waited = 0; !ringcopy_ready(src); waited++) {
		if (v->vcpu_done || waited > WAIT_RING_S * 10) {
			fprintf(stderr, "irqvmm: no ring at %#llx\n", RING_GPA);
			return -ENODEV;
		}
		sleep_us(100000);
	}
	ringcopy_init(&rc, src);
	fd = open(shm_path, O_RDWR | O_SYNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	dst = mmap(NULL, rc.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (dst == MAP_FAILED)
		return -errno;
	fprintf(stderr, "irqlab-kvm: ring records=%u record_bytes=%u\n", rc.capacity,
		rc.record_bytes);
	for (;;) {
		state = ringcopy_step(&rc, dst, src);
		if (state == RINGCOPY_DONE || state == RINGCOPY_ERROR) {
			fprintf(stderr, "irqlab-kvm: ring %s records=%llu\n",
				state == RINGCOPY_DONE ? "done" : "error",
				(unsigned long long)rc.copied);
			return state == RINGCOPY_DONE ? 0 : -EIO;
		}
		if (v->vcpu_done < 0)
			return -EIO;
		sleep_us(poll_us);
	}
}

/* usage - the one usage line, exit 2 */
static void usage(void)
{
	fprintf(stderr, "usage: irqvmm IMAGE DTB SHM_PATH [-m MEM_MIB] [-c CPU] "
		"[-f FIFO_PRIO] [-p POLL_US]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct vm v = { .cpu = -1 };
	uint64_t mem_mib = 64, bound;
	long poll_us = 20000, n;
	int64_t off = 0;
	pthread_t t;
	int opt, err;

	while ((opt = getopt(argc, argv, "m:c:f:p:")) != -1) {
		char *end;
		long val = strtol(optarg, &end, 10);

		if (*optarg == '\0' || *end != '\0' || val < 0)
			usage();
		if (opt == 'm')
			mem_mib = (uint64_t)val;
		else if (opt == 'c')
			v.cpu = (int)val;
		else if (opt == 'f')
			v.fifo_prio = (int)val;
		else if (opt == 'p')
			poll_us = val;
		else
			usage();
	}
	if (argc - optind != 3 || mem_mib < 32)
		usage();
	err = create_vm(&v, mem_mib << 20);
	if (err) {
		errno = -err;
		die("creating the VM (GICv3, vCPU)");
	}
	n = load_file(&v, argv[optind], 0);
	if (n < 0) {
		errno = (int)-n;
		die(argv[optind]);
	}
	n = load_file(&v, argv[optind + 1], DTB_OFFSET);
	if (n < 0) {
		errno = (int)-n;
		die(argv[optind + 1]);
	}
	if (set_reg(&v, CORE_REG(regs.pc), RAM_BASE) ||
	    set_reg(&v, CORE_REG(regs.regs[0]), RAM_BASE + DTB_OFFSET))
		die("setting the boot registers");
	err = clock_offset(&v, &off, &bound);
	if (err) {
		errno = -err;
		die("reading the guest counter");
	}
	fprintf(stderr, "irqlab-kvm: clock voffset_tick=%lld bound_tick=%llu\n",
		(long long)off, (unsigned long long)bound);
	if (pthread_create(&t, NULL, vcpu_thread, &v))
		die("starting the vCPU thread");
	err = forward(&v, argv[optind + 2], poll_us);
	if (err) {
		fprintf(stderr, "irqvmm: forwarding the ring: %s\n", strerror(-err));
		return 1;
	}
	/* the probe powers off after its last record: let the vCPU report it */
	for (int i = 0; i < SYSTEM_OFF_WAIT_MS / 10 && !v.vcpu_done; i++)
		sleep_us(10000);
	return 0;
}
