// SPDX-License-Identifier: Apache-2.0
/*
 * netsend.c - irqlab-netsend: the host side of `--target net`
 *
 * Sends one UDP packet (netproto.h) per period to irqlab-echo in a guest, on
 * an absolute CLOCK_MONOTONIC schedule (clock_nanosleep, TIMER_ABSTIME), from
 * a SCHED_FIFO thread; a second SCHED_FIFO thread takes the replies. Each
 * round trip becomes one record of a v1 ring behind a one-ring directory
 * (multiring.h; docs/formats.md sections 2, 6 and 10) in the shared memory
 * irqlab reads: deadline_tick = the send time, entry_tick = the send time +
 * the round trip, CLOCK_MONOTONIC ns. The round trip comes from the kernel's
 * software timestamps of the send and of the receive (SO_TIMESTAMPING) when
 * the socket gives both, else from clock_gettime() around send() and after
 * recv() (record flag NET_REC_F_USER_TS).
 *
 * Records are written in send order: a packet is committed when its reply
 * has come or its reply timeout has passed; a packet without a reply is a
 * gap in the ring (a slot whose seq is not its own), which the host counts as
 * lost. So every packet sent is a sample or lost, never neither.
 *
 * Traffic goes only to a loopback address or, from inside a network
 * namespace other than its parent's and PID 1's (one irqlab created for the
 * run), to an address there: the lab's rule, checked before any packet is
 * sent.
 *
 * Exit: 0 done (also after SIGINT/SIGTERM), 1 run-time failure (no reply to
 * the handshake, socket error), 2 usage, 3 RT priority refused.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "multiring.h"
#include "netproto.h"

#ifndef IRQLAB_NATIVE_BUILD_ID
#define IRQLAB_NATIVE_BUILD_ID "irqlab-netsend-unknown"
#endif

#if defined(__x86_64__)
#define PROBE_ARCH		RING_ARCH_X86_64
#elif defined(__aarch64__)
#define PROBE_ARCH		RING_ARCH_ARM64
#else
#error "irqlab-netsend: unsupported architecture"
#endif

#define EXIT_RUNTIME		1
#define EXIT_USAGE		2
#define EXIT_NO_RT		3

#define START_LEAD_NS		20000000ULL	/* first send >= 20 ms after the handshake */
#define HELLO_EVERY_NS		100000000ULL	/* handshake retry */
#define RX_WAIT_MAX_NS		5000000ULL	/* receiver wakes at least this often */
#define DEFAULT_TIMEOUT_NS	1000000000ULL
#define DEFAULT_READY_NS	300000000000ULL
#define DEFAULT_CAPACITY	65536
#define MAX_TABLE		(1u << 20)	/* packets in flight at most */
#define BUF_BYTES		2048
#define CTRL_BYTES		512

/* pending.state */
enum { PKT_FREE, PKT_SENT, PKT_REPLIED, PKT_SEND_FAILED };

struct pending {
	u64 seq;
	u64 tx_user_ns;		/* CLOCK_MONOTONIC right before send() */
	u64 tx_kernel_ns;	/* kernel TX software stamp (CLOCK_REALTIME), 0 = none */
	u64 rx_user_ns;		/* CLOCK_MONOTONIC right after recvmsg() */
	u64 rx_kernel_ns;	/* kernel RX software stamp (CLOCK_REALTIME), 0 = none */
	u32 state;
	u32 flags;		/* record flags known at send (overrun) and reply (held) */
};

struct options {
	const char *shm_path;
	int shm_fd;
	const char *dest;
	u16 port;
	int priority;
	int rt_fallback;
	int cpu;		/* -1: not pinned */
	u64 period_ns;
	u64 payload_bytes;
	u64 count;
	u64 duration_ns;
	u64 timeout_ns;
	u64 ready_timeout_ns;
	u64 inject_delay_ns;
	u64 inject_every;
	u32 capacity;
	int no_kernel_ts;
	int icmp;		/* --icmp: the kernel's own echo answers */
	int verbose;
};

static struct options opt = {
	.shm_fd = -1, .port = NET_PORT, .priority = 90, .cpu = -1,
	.period_ns = 1000000, .payload_bytes = 64, .timeout_ns = DEFAULT_TIMEOUT_NS,
	.ready_timeout_ns = DEFAULT_READY_NS, .capacity = DEFAULT_CAPACITY,
};
static struct mr_dir *dir;
static struct net_block *nb;
static struct ring ring;
static struct pending *table;
static u32 table_mask;
static int sock = -1;
static struct sockaddr_storage dest_sa;
static socklen_t dest_len;
static int kernel_ts;			/* SO_TIMESTAMPING is on */
/* --icmp: our packet follows an ICMP echo header (8 bytes) in every datagram */
static size_t pkt_off;
static u64 start_ns, end_ns;
static u64 sent;			/* packets published by the sender thread */
static u64 committed;			/* packets committed by the receiver thread */
static volatile int stop_requested;	/* 1: stop sending; 2: stop at once */
static volatile int sending_done;

/* die_usage - print a usage error and exit 2 */
static void __attribute__((noreturn, format(printf, 1, 2))) die_usage(const char *fmt, ...)
{
	va_list ap;

	fputs("irqlab-netsend: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see --help)\n", stderr);
	exit(EXIT_USAGE);
}

/* dir_fail - report @err with a message on stderr and in the directory; -@err */
static int __attribute__((format(printf, 2, 3))) dir_fail(int err, const char *fmt, ...)
{
	char msg[MR_MESSAGE_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "irqlab-netsend: error: %s\n", msg);
	if (dir) {
		memcpy(dir->message, msg, sizeof(msg));
		memcpy(ring.hdr->message, msg, RING_MESSAGE_LEN);
		WRITE_ONCE(dir->error, (u32)err);
		WRITE_ONCE(ring.hdr->error, (u32)err);
		__atomic_store_n(&ring.hdr->state, RING_ERROR, __ATOMIC_RELEASE);
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
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* usage - print the options */
static void usage(void)
{
	printf("usage: irqlab-netsend (--shm PATH | --shm-fd N) --dest ADDR [options]\n"
	       "  --dest ADDR           responder's IPv4/IPv6 address (loopback, or inside\n"
	       "                        this process's own network namespace)\n"
	       "  --port N              responder's UDP port (default %u)\n"
	       "  --period-ns N         one packet per period (default 1000000)\n"
	       "  --payload N           UDP payload bytes, %u-%u (default 64)\n"
	       "  --count N             stop after N packets\n"
	       "  --duration-ns N       stop sending after N ns (one of the two is required)\n"
	       "  --timeout-ns N        a reply later than this is lost (default 1 s)\n"
	       "  --ready-timeout-ns N  give up when the handshake gets no reply (300 s)\n"
	       "  --priority N          SCHED_FIFO priority 1-99 (default 90)\n"
	       "  --rt-fallback         run SCHED_OTHER when RT is refused (recorded)\n"
	       "  --cpu N               pin both threads to CPU N\n"
	       "  --capacity N          records in the ring, power of two (default 65536)\n"
	       "  --inject-delay-ns D, --inject-every N\n"
	       "                        the responder's self-check, recorded in the header\n"
	       "  --no-kernel-ts        time in user space only (tests the fallback)\n"
	       "  --icmp                ICMP echo requests (ping socket) answered by the\n"
	       "                        guest kernel itself; only inside our own namespace\n"
	       "  -v, --verbose         print the set-up on stderr\n"
	       "exit: 0 done, 1 run-time failure, 2 usage, 3 RT priority refused\n",
	       NET_PORT, NET_PAYLOAD_MIN, NET_PAYLOAD_MAX);
}

/* parse_dest - @text as an IPv4 or IPv6 literal into dest_sa; 0 or -EINVAL */
static int parse_dest(const char *text)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)&dest_sa;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&dest_sa;

	memset(&dest_sa, 0, sizeof(dest_sa));
	if (inet_pton(AF_INET, text, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(opt.port);
		dest_len = sizeof(*in4);
		return 0;
	}
	if (inet_pton(AF_INET6, text, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(opt.port);
		dest_len = sizeof(*in6);
		return 0;
	}
	return -EINVAL;
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
		} else if (!strcmp(a, "--icmp")) {
			opt.icmp = 1;
			takes = 0;
		} else if (!strcmp(a, "--no-kernel-ts")) {
			opt.no_kernel_ts = 1;
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
		} else if (!strcmp(a, "--dest")) {
			opt.dest = val;
		} else if (!strcmp(a, "--port")) {
			if (parse_u64(val, &v) || !v || v > 65535)
				die_usage("--port %s must be 1-65535", val);
			opt.port = (u16)v;
		} else if (!strcmp(a, "--priority")) {
			if (parse_u64(val, &v) || v < 1 || v > 99)
				die_usage("--priority %s must be 1-99", val);
			opt.priority = (int)v;
		} else if (!strcmp(a, "--cpu")) {
			if (parse_u64(val, &v) || v >= CPU_SETSIZE)
				die_usage("--cpu %s is not a CPU number", val);
			opt.cpu = (int)v;
		} else if (!strcmp(a, "--period-ns")) {
			if (parse_u64(val, &opt.period_ns) || opt.period_ns < 10000 ||
			    opt.period_ns > 10000000000ULL)
				die_usage("--period-ns %s must be 10000 to 10000000000", val);
		} else if (!strcmp(a, "--payload")) {
			if (parse_u64(val, &opt.payload_bytes) ||
			    opt.payload_bytes < NET_PAYLOAD_MIN ||
			    opt.payload_bytes > NET_PAYLOAD_MAX)
				die_usage("--payload %s must be %u-%u bytes", val,
					  NET_PAYLOAD_MIN, NET_PAYLOAD_MAX);
		} else if (!strcmp(a, "--count")) {
			if (parse_u64(val, &opt.count))
				die_usage("--count %s is not a count", val);
		} else if (!strcmp(a, "--duration-ns")) {
			if (parse_u64(val, &opt.duration_ns))
				die_usage("--duration-ns %s is not a count of ns", val);
		} else if (!strcmp(a, "--timeout-ns")) {
			if (parse_u64(val, &opt.timeout_ns) || opt.timeout_ns < 1000000 ||
			    opt.timeout_ns > 60000000000ULL)
				die_usage("--timeout-ns %s must be 1 ms to 60 s", val);
		} else if (!strcmp(a, "--ready-timeout-ns")) {
			if (parse_u64(val, &opt.ready_timeout_ns) || !opt.ready_timeout_ns)
				die_usage("--ready-timeout-ns %s must be more than 0", val);
		} else if (!strcmp(a, "--inject-delay-ns")) {
			if (parse_u64(val, &opt.inject_delay_ns))
				die_usage("--inject-delay-ns %s is not a count of ns", val);
		} else if (!strcmp(a, "--inject-every")) {
			if (parse_u64(val, &opt.inject_every))
				die_usage("--inject-every %s is not a count", val);
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
	if (!opt.dest || parse_dest(opt.dest))
		die_usage("--dest %s is not an IPv4 or IPv6 address", opt.dest ? opt.dest : "(none)");
	if (!opt.count && !opt.duration_ns)
		die_usage("give --count N or --duration-ns N: the traffic must be bounded");
	if (opt.timeout_ns / opt.period_ns >= MAX_TABLE - 64)
		die_usage("--timeout-ns / --period-ns must stay below %u packets in flight",
			  MAX_TABLE - 64);
}

/* dest_is_loopback - is the destination 127.0.0.0/8 or ::1? */
static int dest_is_loopback(void)
{
	if (dest_sa.ss_family == AF_INET) {
		u32 a = ntohl(((struct sockaddr_in *)&dest_sa)->sin_addr.s_addr);

		return (a >> 24) == 127;
	}
	return IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&dest_sa)->sin6_addr);
}

/* same_netns - is @other the same network namespace as @self? 1, 0, or -errno */
static int same_netns(const struct stat *self, const char *other)
{
	struct stat st;

	if (stat(other, &st))
		return -errno;
	return st.st_ino == self->st_ino && st.st_dev == self->st_dev;
}

/*
 * own_netns - is this process in a network namespace of its own: not its
 * parent's (irqlab stays in the host's and made this one for the run), and
 * not PID 1's where that can be read (it cannot in some containers)?
 */
static int own_netns(void)
{
	char parent[64];
	struct stat self;
	int same;

	if (stat("/proc/self/ns/net", &self))
		return 0;	/* cannot tell: treat as the host's */
	snprintf(parent, sizeof(parent), "/proc/%d/ns/net", (int)getppid());
	same = same_netns(&self, parent);
	if (same != 0)
		return 0;	/* the parent's, or unknown */
	return same_netns(&self, "/proc/1/ns/net") != 1;
}

/* check_dest - the lab's rule: loopback, or inside our own namespace; 0 or -EPERM */
static int check_dest(void)
{
	if (dest_is_loopback()) {
		nb->flags |= NET_B_LOOPBACK;
		return 0;
	}
	if (own_netns()) {
		nb->flags |= NET_B_OWN_NETNS;
		return 0;
	}
	return dir_fail(EPERM, "refusing to send to %s: not a loopback address, and this "
			"process is in the host's network namespace (traffic goes only to "
			"loopback or inside a namespace irqlab created)", opt.dest);
}

/* map_shm - map the area and check it holds the directory and the ring; 0 or -errno */
static int map_shm(void **area)
{
	u64 need_bytes = MR_BYTES(1, opt.capacity);
	int fd = opt.shm_fd;
	struct stat st;
	void *p;

	if (opt.shm_path) {
		fd = open(opt.shm_path, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "irqlab-netsend: error: cannot open --shm %s: %s\n",
				opt.shm_path, strerror(errno));
			return -errno;
		}
	}
	if (fstat(fd, &st))
		return -errno;
	if ((u64)st.st_size < need_bytes) {
		fprintf(stderr, "irqlab-netsend: error: shared memory is %lld bytes; a ring "
			"of %u records needs %llu\n", (long long)st.st_size, opt.capacity,
			(unsigned long long)need_bytes);
		return -ENOSPC;
	}
	p = mmap(NULL, need_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "irqlab-netsend: error: mmap of the shared memory: %s\n",
			strerror(errno));
		return -errno;
	}
	if (opt.shm_path)
		close(fd);
	*area = p;
	return 0;
}

/* area_setup - directory, net block and ring header (state BOOTING); 0 */
static int area_setup(u8 *area)
{
	u8 *base = area + MR_DIR_SIZE;
	struct ring_hdr *h = (struct ring_hdr *)base;

	dir = (struct mr_dir *)area;
	nb = (struct net_block *)(area + NET_BLOCK_OFFSET);
	__atomic_store_n(&dir->magic, 0, __ATOMIC_RELEASE);
	memset(area + sizeof(dir->magic), 0, MR_DIR_SIZE - sizeof(dir->magic));
	dir->version = MR_VERSION;
	dir->ring_count = 1;
	dir->ring_stride = MR_STRIDE(opt.capacity);
	dir->first_ring = MR_DIR_SIZE;
	dir->period_ns = opt.period_ns;
	dir->priority = (u32)opt.priority;
	dir->state = RING_BOOTING;
	dir->cpu[0] = opt.cpu < 0 ? 0 : (u32)opt.cpu;

	nb->version = NET_BLOCK_VERSION;
	nb->timeout_ns = opt.timeout_ns;
	nb->payload_bytes = opt.payload_bytes;
	nb->inject_delay_ns = opt.inject_delay_ns;
	nb->inject_every = opt.inject_every;
	nb->port = opt.port;
	snprintf(nb->dest, sizeof(nb->dest), "%s", opt.dest);
	__atomic_store_n(&nb->magic, NET_BLOCK_MAGIC, __ATOMIC_RELEASE);

	ring.hdr = h;
	ring.recs = (struct ring_rec *)(base + RING_HDR_SIZE);
	ring.mask = opt.capacity - 1;
	ring.head = 0;
	ring.cpu = dir->cpu[0];
	__atomic_store_n(&h->magic, 0, __ATOMIC_RELEASE);
	memset(base + sizeof(h->magic), 0, RING_HDR_SIZE - sizeof(h->magic));
	/* touch every record page now, not while measuring */
	memset(ring.recs, 0, (size_t)opt.capacity * RING_RECORD_SIZE);
	h->version = RING_VERSION;
	h->record_size = RING_RECORD_SIZE;
	h->capacity = opt.capacity;
	h->arch = PROBE_ARCH;
	h->tick_hz = 1000000000ULL;
	h->tick_method = TICK_CLOCK_MONOTONIC;
	h->timer_mode = TIMER_UDP_ROUND_TRIP;
	h->period_tick = opt.period_ns;
	h->idle = IDLE_SLEEP;
	h->inject_every = (u32)(opt.inject_every > UINT32_MAX ? UINT32_MAX : opt.inject_every);
	h->inject_irqoff_tick = opt.inject_delay_ns;
	h->state = RING_BOOTING;
	snprintf(h->build_id, sizeof(h->build_id), "%s", IRQLAB_NATIVE_BUILD_ID);
	__atomic_store_n(&h->magic, RING_MAGIC, __ATOMIC_RELEASE);
	__atomic_store_n(&dir->magic, MR_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

/* rt_preflight - check SCHED_FIFO @priority is allowed; 0 or -EPERM */
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
		fprintf(stderr, "irqlab-netsend: warning: SCHED_FIFO priority %d refused (%s); "
			"--rt-fallback: running SCHED_OTHER\n", opt.priority, strerror(err));
		dir->policy = MR_POLICY_OTHER;
		dir->flags |= MR_F_RT_FALLBACK;
		return 0;
	}
	return dir_fail(err, "cannot run at SCHED_FIFO priority %d: %s (needs root or "
			"CAP_SYS_NICE); pass --rt-fallback to run SCHED_OTHER instead",
			opt.priority, strerror(err));
}

/* thread_sched - pin (if asked) and schedule the calling thread; 0 or -errno */
static int thread_sched(void)
{
	struct sched_param sp = { .sched_priority = opt.priority };
	cpu_set_t set;
	int err;

	if (opt.cpu >= 0) {
		CPU_ZERO(&set);
		CPU_SET(opt.cpu, &set);
		err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
		if (err)
			return -err;
	}
	if (dir->policy == MR_POLICY_FIFO) {
		err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
		if (err)
			return -err;
	}
	return 0;
}

/*
 * allow_ping - let every group open ICMP ping sockets in this network namespace
 * (net.ipv4.ping_group_range, per namespace): only ever called inside the namespace
 * irqlab made for the run, which is deleted with it; 0 or -errno
 */
static int allow_ping(void)
{
	static const char range[] = "0 2147483647\n";
	int fd = open("/proc/sys/net/ipv4/ping_group_range", O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, range, sizeof(range) - 1);
	close(fd);
	return n == (ssize_t)sizeof(range) - 1 ? 0 : -EIO;
}

/* icmp_socket - an ICMP echo ("ping") socket for --icmp; the fd or -errno */
static int icmp_socket(void)
{
	int proto = dest_sa.ss_family == AF_INET ? IPPROTO_ICMP : IPPROTO_ICMPV6;
	int fd = socket(dest_sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, proto);

	if (fd < 0 && errno == EACCES && own_netns() && !allow_ping())
		fd = socket(dest_sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, proto);
	if (fd < 0 && errno == EACCES)
		return dir_fail(EACCES, "ICMP ping sockets are not allowed for this group "
				"(net.ipv4.ping_group_range); irqlab changes that only in a "
				"network namespace of its own (--net tap)");
	if (fd < 0)
		return dir_fail(errno, "ICMP socket: %s", strerror(errno));
	return fd;
}

/* icmp_header - the echo request header in front of packet @seq (checksum and id: the kernel's) */
static void icmp_header(u8 *buf, u64 seq)
{
	u16 seq16 = htons((u16)seq);

	memset(buf, 0, pkt_off);
	buf[0] = dest_sa.ss_family == AF_INET ? ICMP_ECHO : 128;	/* ICMP6_ECHO_REQUEST */
	memcpy(buf + 6, &seq16, sizeof(seq16));
}

/*
 * reply_pkt - our packet in the @n bytes of a received datagram at @buf when it is a
 * reply: the responder's flag, or with --icmp an echo reply; else NULL
 */
static const struct net_pkt *reply_pkt(const u8 *buf, ssize_t n)
{
	const struct net_pkt *p = (const struct net_pkt *)(buf + pkt_off);
	u8 echo_reply = dest_sa.ss_family == AF_INET ? ICMP_ECHOREPLY : 129;

	if (n < 0 || (size_t)n < pkt_off + sizeof(*p) || p->magic != NET_MAGIC)
		return NULL;
	if (pkt_off)
		return buf[0] == echo_reply ? p : NULL;
	return (p->flags & NET_F_REPLY) ? p : NULL;
}

/* open_socket - UDP (or --icmp: ICMP echo) socket connected to the responder; 0 or -errno */
static int open_socket(void)
{
	int rcvbuf = 4 << 20;

	if (opt.icmp) {
		pkt_off = 8;
		nb->flags |= NET_B_ICMP;
		((struct sockaddr_in *)&dest_sa)->sin_port = 0;	/* same offset in sin6 */
		sock = icmp_socket();
		if (sock < 0)
			return sock;
	} else {
		sock = socket(dest_sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (sock < 0)
			return dir_fail(errno, "socket: %s", strerror(errno));
	}
	/* replies of a long hold must not be dropped by a small buffer */
	setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	/* connected: the kernel hands us only the responder's datagrams */
	if (connect(sock, (struct sockaddr *)&dest_sa, dest_len))
		return dir_fail(errno, "connect to %s port %u: %s", opt.dest, opt.port,
				strerror(errno));
	return 0;
}

/* enable_kernel_ts - software TX and RX timestamps on the socket; 0 or -errno */
static int enable_kernel_ts(void)
{
	int flags = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_RX_SOFTWARE |
		    SOF_TIMESTAMPING_SOFTWARE;

	if (opt.no_kernel_ts)
		return -EOPNOTSUPP;
	if (setsockopt(sock, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof(flags)))
		return -errno;
	kernel_ts = 1;
	nb->flags |= NET_B_KERNEL_TS;
	return 0;
}

/* stop_pending - has a stop signal arrived (checked without blocking)? */
static int stop_pending(const sigset_t *stopset)
{
	struct timespec zero = { 0, 0 };

	if (sigtimedwait(stopset, NULL, &zero) > 0)
		__atomic_store_n(&stop_requested, 1, __ATOMIC_RELEASE);
	return READ_ONCE(stop_requested);
}

/* handshake - hello packets until one comes back; 0 or -errno */
static int handshake(const sigset_t *stopset)
{
	static u8 buf[BUF_BYTES];
	struct net_pkt *p = (struct net_pkt *)(buf + pkt_off);
	u64 first_ns = monotonic_ns(), last_hello = 0, now_ns;
	struct pollfd pfd = { .fd = sock, .events = POLLIN };

	for (;;) {
		now_ns = monotonic_ns();
		if (stop_pending(stopset))
			return -EINTR;
		if (now_ns - first_ns > opt.ready_timeout_ns)
			return dir_fail(ETIMEDOUT, "no reply from %s port %u within %llu s: "
					"the responder did not start", opt.dest, opt.port,
					(unsigned long long)(opt.ready_timeout_ns / 1000000000ULL));
		if (!last_hello || now_ns - last_hello >= HELLO_EVERY_NS) {
			memset(buf, 0, pkt_off + opt.payload_bytes);
			if (pkt_off)
				icmp_header(buf, NET_SEQ_HELLO);
			p->magic = NET_MAGIC;
			p->seq = NET_SEQ_HELLO;
			p->send_ns = now_ns;
			/* refused (nothing listens yet) or unreachable: try again */
			send(sock, buf, pkt_off + opt.payload_bytes, 0);
			last_hello = now_ns;
		}
		if (poll(&pfd, 1, 10) <= 0)
			continue;
		for (;;) {
			ssize_t n = recv(sock, buf, sizeof(buf), MSG_DONTWAIT);

			if (n < 0) {
				if (errno == EAGAIN)
					break;
				continue;	/* ECONNREFUSED of an early hello */
			}
			if (reply_pkt(buf, n) && p->seq == NET_SEQ_HELLO) {
				nb->handshake_ns = monotonic_ns() - first_ns;
				return 0;
			}
		}
	}
}

/* ring_skip - mark packet @seq lost: a slot whose seq is not its own, head past it */
static void ring_skip(u64 seq)
{
	struct ring_rec *rec = &ring.recs[seq & ring.mask];

	WRITE_ONCE(rec->seq, ~0ULL);
	ring.head = seq + 1;
	__atomic_store_n(&ring.hdr->head, ring.head, __ATOMIC_RELEASE);
}

/* commit_one - write packet @e's record (or its loss); 1 if committed, 0 if not yet */
static int commit_one(struct pending *e, u64 now_ns)
{
	u32 state = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
	u64 rtt_ns;
	u32 flags;

	if (state == PKT_SEND_FAILED) {
		ring_skip(e->seq);
		return 1;
	}
	if (state == PKT_SENT) {
		if (now_ns < e->tx_user_ns + opt.timeout_ns)
			return 0;
		nb->timed_out++;
		ring_skip(e->seq);
		return 1;
	}
	if (state != PKT_REPLIED)
		return 0;
	flags = e->flags;
	if (e->tx_kernel_ns && e->rx_kernel_ns && e->rx_kernel_ns > e->tx_kernel_ns) {
		rtt_ns = e->rx_kernel_ns - e->tx_kernel_ns;
		nb->kernel_ts++;
	} else {
		rtt_ns = e->rx_user_ns - e->tx_user_ns;
		flags |= NET_REC_F_USER_TS;
		nb->user_ts++;
	}
	ring_push(&ring, e->seq, e->tx_user_ns, e->tx_user_ns + rtt_ns, flags);
	return 1;
}

/* commit_ready - commit packets in send order as far as they are resolved */
static void commit_ready(void)
{
	u64 upto = __atomic_load_n(&sent, __ATOMIC_ACQUIRE), now_ns = monotonic_ns();

	while (committed < upto) {
		struct pending *e = &table[committed & table_mask];

		if (!commit_one(e, now_ns))
			break;
		__atomic_store_n(&e->state, PKT_FREE, __ATOMIC_RELEASE);
		/* the sender reads it to keep off slots still in flight */
		__atomic_store_n(&committed, committed + 1, __ATOMIC_RELEASE);
	}
}

/* cmsg_stamp - the software stamp of an SCM_TIMESTAMPING cmsg in @msg, or 0 */
static u64 cmsg_stamp(struct msghdr *msg)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING) {
			struct scm_timestamping ts;

			memcpy(&ts, CMSG_DATA(c), sizeof(ts));
			return ts_to_ns(&ts.ts[0]);
		}
	}
	return 0;
}

/* find_pkt - our packet inside @len bytes of @buf (a looped-back frame has headers); or NULL */
static struct net_pkt *find_pkt(u8 *buf, size_t len)
{
	u64 magic = NET_MAGIC;

	for (size_t off = 0; off + sizeof(struct net_pkt) <= len; off++)
		if (!memcmp(buf + off, &magic, sizeof(magic)))
			return (struct net_pkt *)(buf + off);
	return NULL;
}

/* outstanding - the table entry of packet @seq if it still waits for a reply, else NULL */
static struct pending *outstanding(u64 seq)
{
	struct pending *e;

	if (seq >= __atomic_load_n(&sent, __ATOMIC_ACQUIRE) || seq < committed)
		return NULL;
	e = &table[seq & table_mask];
	if (e->seq != seq)
		return NULL;
	return e;
}

/* drain_errqueue - take the kernel's TX timestamps of sent packets */
static void drain_errqueue(void)
{
	static u8 buf[BUF_BYTES], ctrl[CTRL_BYTES];

	if (!kernel_ts)
		return;
	for (;;) {
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr msg = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = ctrl, .msg_controllen = sizeof(ctrl),
		};
		ssize_t n = recvmsg(sock, &msg, MSG_ERRQUEUE | MSG_DONTWAIT);
		struct net_pkt *p;
		struct pending *e;
		u64 stamp;

		if (n < 0)
			return;
		stamp = cmsg_stamp(&msg);
		p = find_pkt(buf, (size_t)n);
		if (!stamp || !p || p->seq == NET_SEQ_HELLO)
			continue;
		e = outstanding(p->seq);
		if (e && !e->tx_kernel_ns)
			e->tx_kernel_ns = stamp;
	}
}

/* take_reply - match the reply of @n bytes in @buf (cmsgs in @msg) to its packet */
static void take_reply(const u8 *buf, ssize_t n, struct msghdr *msg, u64 rx_user_ns)
{
	const struct net_pkt *p = reply_pkt(buf, n);
	struct pending *e;

	if (!p) {
		nb->bad++;
		return;
	}
	if (p->seq == NET_SEQ_HELLO)
		return;		/* a late handshake echo */
	e = outstanding(p->seq);
	if (!e) {
		if (p->seq < committed)
			nb->late++;
		else
			nb->bad++;
		return;
	}
	if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != PKT_SENT) {
		nb->bad++;	/* a duplicate */
		return;
	}
	e->rx_user_ns = rx_user_ns;
	e->rx_kernel_ns = kernel_ts ? cmsg_stamp(msg) : 0;
	if (p->flags & NET_F_HELD) {
		e->flags |= RING_F_INJECTED;
		nb->held++;
	}
	nb->replied++;
	__atomic_store_n(&e->state, PKT_REPLIED, __ATOMIC_RELEASE);
}

/*
 * recv_reply - receive one reply with @flags (0 blocks up to SO_RCVTIMEO);
 * 1 if one was taken, 0 if none was there or the socket reported an error
 * (ECONNREFUSED and the like: those packets time out)
 */
static int recv_reply(int flags)
{
	static u8 buf[BUF_BYTES], ctrl[CTRL_BYTES];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctrl, .msg_controllen = sizeof(ctrl),
	};
	ssize_t n = recvmsg(sock, &msg, flags);
	u64 rx_user_ns = monotonic_ns();

	if (n < 0)
		return 0;
	take_reply(buf, n, &msg, rx_user_ns);
	return 1;
}

/* drain_replies - take every reply already queued */
static void drain_replies(void)
{
	while (recv_reply(MSG_DONTWAIT) > 0)
		;
}

/*
 * receiver - take replies and TX stamps, commit records, until all are
 * resolved. It blocks in recvmsg() itself (as a ping-pong client does: no
 * poll before it), woken at least every RX_WAIT_MAX_NS by SO_RCVTIMEO to
 * commit the packets whose reply timed out.
 */
static void *receiver(void *arg)
{
	struct timeval tick = { .tv_sec = 0, .tv_usec = RX_WAIT_MAX_NS / 1000 };
	int err = thread_sched();

	if (err) {
		dir_fail(-err, "cannot schedule the receiver thread: %s", strerror(-err));
		__atomic_store_n(&stop_requested, 2, __ATOMIC_RELEASE);
		return NULL;
	}
	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tick, sizeof(tick));
	while (READ_ONCE(stop_requested) < 2) {
		if (recv_reply(0) > 0)
			drain_replies();
		drain_errqueue();
		commit_ready();
		nb->sent = __atomic_load_n(&sent, __ATOMIC_ACQUIRE);
		if (READ_ONCE(sending_done) && committed == nb->sent)
			break;
	}
	return NULL;
}

/* send_one - stamp, publish and send packet @seq with record @flags */
static void send_one(u64 seq, u32 flags, u8 *buf)
{
	struct pending *e = &table[seq & table_mask];
	struct net_pkt *p = (struct net_pkt *)(buf + pkt_off);

	e->seq = seq;
	e->tx_kernel_ns = 0;
	e->rx_kernel_ns = 0;
	e->flags = flags;
	e->tx_user_ns = monotonic_ns();
	__atomic_store_n(&e->state, PKT_SENT, __ATOMIC_RELEASE);
	/* published before send(): the reply may come back before send() returns */
	__atomic_store_n(&sent, seq + 1, __ATOMIC_RELEASE);
	p->seq = seq;
	p->send_ns = e->tx_user_ns;
	if (pkt_off)
		icmp_header(buf, seq);
	if (send(sock, buf, pkt_off + opt.payload_bytes, 0) < 0) {
		nb->send_errors++;
		__atomic_store_n(&e->state, PKT_SEND_FAILED, __ATOMIC_RELEASE);
	}
}

/* sender - one packet per period on the absolute schedule until told to stop */
static void *sender(void *arg)
{
	static u8 buf[BUF_BYTES];
	u64 next_ns = start_ns + opt.period_ns, seq = 0, now_ns, skipped;
	struct timespec ts;
	u32 flags = 0;
	int err = thread_sched();

	if (err) {
		dir_fail(-err, "cannot schedule the sender thread: %s", strerror(-err));
		goto out;
	}
	memset(buf, 0, sizeof(buf));
	((struct net_pkt *)(buf + pkt_off))->magic = NET_MAGIC;
	__atomic_store_n(&ring.hdr->state, RING_RUNNING, __ATOMIC_RELEASE);
	while (!READ_ONCE(stop_requested) && (!opt.count || seq < opt.count) &&
	       (!end_ns || next_ns <= end_ns)) {
		/* never reuse a table slot whose packet is not committed yet */
		if (seq - __atomic_load_n(&committed, __ATOMIC_ACQUIRE) > table_mask) {
			ns_to_ts(monotonic_ns() + opt.period_ns, &ts);
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
			continue;
		}
		ns_to_ts(next_ns, &ts);
		err = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		if (err == EINTR)
			continue;
		if (err) {
			dir_fail(err, "clock_nanosleep: %s", strerror(err));
			break;
		}
		send_one(seq++, flags, buf);
		flags = 0;
		now_ns = monotonic_ns();
		next_ns += opt.period_ns;
		if (next_ns <= now_ns) {
			/* woke a whole period late: skip to the next future send time */
			skipped = (now_ns - next_ns) / opt.period_ns + 1;
			next_ns += skipped * opt.period_ns;
			WRITE_ONCE(ring.hdr->overruns, ring.hdr->overruns + skipped);
			flags = RING_F_OVERRUN;
		}
	}
out:
	__atomic_store_n(&sending_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* table_setup - the in-flight table, a power of two above timeout / period; 0 or -ENOMEM */
static int table_setup(void)
{
	u64 need = opt.timeout_ns / opt.period_ns + 64, size = 64;

	while (size < need)
		size <<= 1;
	table = calloc(size, sizeof(*table));
	if (!table)
		return -ENOMEM;
	table_mask = (u32)(size - 1);
	return 0;
}

/* run - handshake, then the two threads until done or stopped; 0 or -errno */
static int run(const sigset_t *stopset)
{
	struct timespec poll_ts = { .tv_sec = 0, .tv_nsec = 100000000 };
	pthread_t tx, rx;
	int err;

	err = handshake(stopset);
	if (err == -EINTR)
		return 0;	/* stopped before it began: nothing was measured */
	if (err)
		return err;
	if (enable_kernel_ts())
		fprintf(stderr, "irqlab-netsend: note: no kernel timestamps on this socket; "
			"round trips are timed in user space\n");
	drain_replies();	/* late handshake echoes */
	start_ns = monotonic_ns() + START_LEAD_NS;
	end_ns = opt.duration_ns ? start_ns + opt.duration_ns : 0;
	dir->start_ns = start_ns;
	__atomic_store_n(&dir->state, RING_RUNNING, __ATOMIC_RELEASE);
	err = pthread_create(&rx, NULL, receiver, NULL);
	if (err)
		return dir_fail(err, "cannot start the receiver thread: %s", strerror(err));
	err = pthread_create(&tx, NULL, sender, NULL);
	if (err) {
		__atomic_store_n(&stop_requested, 2, __ATOMIC_RELEASE);
		pthread_join(rx, NULL);
		return dir_fail(err, "cannot start the sender thread: %s", strerror(err));
	}
	/* a first signal stops sending (the receiver still resolves what is in flight),
	 * a second one stops at once */
	while (pthread_tryjoin_np(rx, NULL) == EBUSY) {
		if (sigtimedwait(stopset, NULL, &poll_ts) > 0)
			__atomic_add_fetch(&stop_requested, 1, __ATOMIC_ACQ_REL);
	}
	pthread_join(tx, NULL);
	nb->sent = __atomic_load_n(&sent, __ATOMIC_ACQUIRE);
	return READ_ONCE(dir->state) == RING_ERROR ? -EIO : 0;
}

int main(int argc, char **argv)
{
	sigset_t stopset;
	void *area = NULL;
	int err;

	parse_args(argc, argv);
	/* a SIGTERM if the parent (irqlab) dies: we then stop cleanly */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	sigemptyset(&stopset);
	sigaddset(&stopset, SIGINT);
	sigaddset(&stopset, SIGTERM);
	/* blocked before any thread exists, so only sigtimedwait sees them */
	pthread_sigmask(SIG_BLOCK, &stopset, NULL);

	if (map_shm(&area) || !area)
		return EXIT_RUNTIME;
	area_setup(area);
	if (check_dest())
		return EXIT_RUNTIME;
	if (table_setup()) {
		dir_fail(ENOMEM, "no memory for %llu packets in flight",
			 (unsigned long long)(opt.timeout_ns / opt.period_ns));
		return EXIT_RUNTIME;
	}
	if (rt_preflight())
		return EXIT_NO_RT;
	if (mlockall(MCL_CURRENT | MCL_FUTURE) == 0)
		dir->flags |= MR_F_MLOCKED;
	else
		fprintf(stderr, "irqlab-netsend: warning: mlockall: %s\n", strerror(errno));
	if (open_socket())
		return EXIT_RUNTIME;
	if (opt.verbose)
		fprintf(stderr, "irqlab-netsend: to %s port %u, %s priority %d, period %llu ns, "
			"payload %llu bytes\n", opt.dest, opt.port,
			dir->policy == MR_POLICY_FIFO ? "SCHED_FIFO" : "SCHED_OTHER",
			opt.priority, (unsigned long long)opt.period_ns,
			(unsigned long long)opt.payload_bytes);
	err = run(&stopset);
	if (err)
		return EXIT_RUNTIME;
	__atomic_store_n(&ring.hdr->state, RING_DONE, __ATOMIC_RELEASE);
	__atomic_store_n(&dir->state, RING_DONE, __ATOMIC_RELEASE);
	return 0;
}
