// SPDX-License-Identifier: Apache-2.0
/*
 * echo.c - irqlab-echo: the UDP responder of `--target net`, in the guest
 *
 * Binds UDP port NET_PORT (or --port) on every address (or --addr), runs
 * SCHED_FIFO with its memory locked, and sends every irqlab packet
 * (netproto.h) straight back with NET_F_REPLY set. Self-check: with --inject-delay-ns D --inject-every N the
 * reply to every Nth packet (seq + 1 a multiple of N) is held for D and
 * marked NET_F_HELD, while every other packet is still answered at once (a
 * held reply waits in a queue, not in a sleep), so exactly the held packets
 * show the delay. Nothing is printed per packet. Runs until killed (the VM
 * is stopped by the host); exit 2 on bad usage, 1 on a set-up failure.
 *
 * --mode kernel (`--echo kernel`): no responder at all; the guest kernel answers the
 * host's ICMP echo requests itself. It only makes sure the kernel does (its
 * icmp_echo_ignore_all is 0) and then waits, so irqlab-init keeps the guest up.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/cli.h"
#include "lib/nstime.h"
#include "lib/rt.h"
#include "netproto.h"

#define MAX_HELD		256	/* replies waiting for their release */
#define RX_BUF_BYTES		(NET_PAYLOAD_MAX + 64)

struct held_reply {
	u64 release_ns;
	struct sockaddr_storage to;
	socklen_t to_len;
	u32 len;
	u8 data[RX_BUF_BYTES];
};

struct echo_opts {
	struct in_addr addr;	/* where to listen (INADDR_ANY by default) */
	u16 port;
	int priority;
	u64 inject_delay_ns;
	u64 inject_every;
	int kernel;		/* --mode kernel: the kernel's ICMP echo answers */
};

static struct echo_opts opt = { .port = NET_PORT, .priority = 90 };
static struct held_reply held[MAX_HELD];
static unsigned int held_count;
static u64 held_overflow;

/*
 * echo_opt - @a (with @val, the next word or NULL) when it is one of irqlab-echo's
 * options: the words taken (cli_parse), 0 when unknown; exits 2 on a bad value
 */
static int echo_opt(const char *a, const char *val)
{
	u64 v;

	if (!val)
		cli_usage_fail("missing value of %s", a);
	if (!strcmp(a, "--addr")) {
		if (inet_pton(AF_INET, val, &opt.addr) != 1)
			cli_usage_fail("--addr must be an IPv4 address, not %s", val);
	} else if (!strcmp(a, "--port")) {
		if (parse_dec_u64(val, &v) || !v || v > 65535)
			cli_usage_fail("--port must be 1-65535, not %s", val);
		opt.port = (u16)v;
	} else if (!strcmp(a, "--priority")) {
		if (parse_dec_u64(val, &v) || v < 1 || v > 99)
			cli_usage_fail("--priority must be 1-99, not %s", val);
		opt.priority = (int)v;
	} else if (!strcmp(a, "--inject-delay-ns")) {
		if (parse_dec_u64(val, &opt.inject_delay_ns) ||
		    opt.inject_delay_ns > 10000000000ULL)
			cli_usage_fail("--inject-delay-ns must be 0-10000000000, not %s",
				       val);
	} else if (!strcmp(a, "--mode")) {
		if (strcmp(val, "udp") && strcmp(val, "kernel"))
			cli_usage_fail("--mode must be udp or kernel, not %s", val);
		opt.kernel = !strcmp(val, "kernel");
	} else if (!strcmp(a, "--inject-every")) {
		if (parse_dec_u64(val, &opt.inject_every))
			cli_usage_fail("--inject-every is not a count: %s", val);
	} else {
		return 0;
	}
	return 2;
}

/* parse_args - fill @opt from argv; exits 2 on bad usage */
static void parse_args(int argc, char **argv)
{
	cli_init("irqlab-echo", "(options: --addr A.B.C.D --port N --priority N "
		 "--inject-delay-ns D --inject-every N --mode udp|kernel)");
	cli_parse(argc, argv, NULL, NULL, echo_opt);
}

/*
 * setup_rt - SCHED_FIFO at --priority and locked memory (lib/rt.c); 0 or
 * -errno (a warning only: the echo still answers, later)
 */
static int setup_rt(void)
{
	int err = rt_thread_setup(-1, opt.priority);
	int lock_err;

	if (err)
		fprintf(stderr, "irqlab-echo: warning: SCHED_FIFO %d: %s\n", opt.priority,
			strerror(-err));
	lock_err = rt_lock_memory(NULL);
	return lock_err ? lock_err : err;
}

/* open_socket - UDP socket bound to the address and port; fd or -errno */
static int open_socket(void)
{
	struct sockaddr_in sa = {
		.sin_family = AF_INET, .sin_port = htons(opt.port), .sin_addr = opt.addr,
	};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int err;

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* must_hold - is the reply to packet @seq one of the self-check's held ones? */
static int must_hold(u64 seq)
{
	return opt.inject_every && opt.inject_delay_ns && seq != NET_SEQ_HELLO &&
	       (seq + 1) % opt.inject_every == 0;
}

/* send_reply - send @len bytes of @data back to @to; 0 or -errno */
static int send_reply(int fd, const u8 *data, u32 len, const struct sockaddr_storage *to,
		      socklen_t to_len)
{
	if (sendto(fd, data, len, 0, (const struct sockaddr *)to, to_len) < 0)
		return -errno;
	return 0;
}

/* handle_packet - answer one received packet now, or queue it; 0 or -errno */
static int handle_packet(int fd, u8 *buf, u32 len, const struct sockaddr_storage *from,
			 socklen_t from_len, u64 now_ns)
{
	struct net_pkt *p = (struct net_pkt *)buf;
	struct held_reply *h;

	if (len < sizeof(*p) || p->magic != NET_MAGIC || (p->flags & NET_F_REPLY))
		return 0;		/* not ours: ignored */
	p->flags |= NET_F_REPLY;
	if (!must_hold(p->seq))
		return send_reply(fd, buf, len, from, from_len);
	if (held_count == MAX_HELD) {
		/* cannot hold it: answered at once, unmarked, so it does not count as held */
		held_overflow++;
		return send_reply(fd, buf, len, from, from_len);
	}
	p->flags |= NET_F_HELD;
	h = &held[held_count++];
	h->release_ns = now_ns + opt.inject_delay_ns;
	memcpy(&h->to, from, from_len);
	h->to_len = from_len;
	h->len = len;
	memcpy(h->data, buf, len);
	return 0;
}

/* release_due - send the held replies whose time has come; count sent */
static int release_due(int fd, u64 now_ns)
{
	unsigned int i = 0;
	int sent = 0;

	while (i < held_count) {
		if (held[i].release_ns > now_ns) {
			i++;
			continue;
		}
		send_reply(fd, held[i].data, held[i].len, &held[i].to, held[i].to_len);
		held[i] = held[--held_count];
		sent++;
	}
	return sent;
}

/* next_release_ns - earliest release time of a held reply, or 0 when none */
static u64 next_release_ns(void)
{
	u64 first = 0;

	for (unsigned int i = 0; i < held_count; i++)
		if (!first || held[i].release_ns < first)
			first = held[i].release_ns;
	return first;
}

/* serve_one_blocking - wait for one packet and answer it; 0 or -errno */
static int serve_one_blocking(int fd, u8 *buf, size_t size)
{
	struct sockaddr_storage from;
	socklen_t from_len = sizeof(from);
	ssize_t len = recvfrom(fd, buf, size, 0, (struct sockaddr *)&from, &from_len);

	if (len < 0)
		return errno == EINTR ? 0 : -errno;
	return handle_packet(fd, buf, (u32)len, &from, from_len, monotonic_ns());
}

/* serve_with_holds - wait for a packet or the next release, answer, release; 0 or -errno */
static int serve_with_holds(int fd, u8 *buf, size_t size)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	u64 first = next_release_ns(), now_ns = monotonic_ns();
	u64 left = first > now_ns ? first - now_ns : 0;
	struct timespec wait;

	ns_to_ts(left, &wait);
	if (ppoll(&pfd, 1, &wait, NULL) < 0 && errno != EINTR)
		return -errno;
	now_ns = monotonic_ns();
	for (;;) {
		struct sockaddr_storage from;
		socklen_t from_len = sizeof(from);
		ssize_t len = recvfrom(fd, buf, size, MSG_DONTWAIT, (struct sockaddr *)&from,
				       &from_len);

		if (len < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			return -errno;
		}
		handle_packet(fd, buf, (u32)len, &from, from_len, now_ns);
	}
	release_due(fd, monotonic_ns());
	return 0;
}

/*
 * serve - answer packets until killed; -errno on a socket failure
 *
 * With no reply held the responder blocks in recvfrom() alone, as a plain
 * echo server does: nothing but the reply between two packets. Only while
 * replies are held does it wait in ppoll() for the next release too.
 */
static int serve(int fd)
{
	static u8 buf[RX_BUF_BYTES];
	int err;

	for (;;) {
		if (held_count)
			err = serve_with_holds(fd, buf, sizeof(buf));
		else
			err = serve_one_blocking(fd, buf, sizeof(buf));
		if (err)
			return err;
	}
}

/* kernel_echo - let the guest kernel answer ICMP echo and wait until the VM stops */
static int kernel_echo(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/icmp_echo_ignore_all", "w");

	if (!f || fputs("0\n", f) < 0 || fclose(f)) {
		fprintf(stderr, "irqlab-echo: error: icmp_echo_ignore_all: %s\n",
			strerror(errno));
		return EXIT_RUNTIME;
	}
	fprintf(stderr, "irqlab-echo: the kernel answers ICMP echo; no responder\n");
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	int fd, err;

	parse_args(argc, argv);
	if (opt.kernel)
		return kernel_echo();
	setup_rt();
	fd = open_socket();
	if (fd < 0) {
		fprintf(stderr, "irqlab-echo: error: UDP port %u: %s\n", opt.port,
			strerror(-fd));
		return EXIT_RUNTIME;
	}
	fprintf(stderr, "irqlab-echo: answering on UDP port %u (hold every %llu for %llu ns)\n",
		opt.port, (unsigned long long)opt.inject_every,
		(unsigned long long)opt.inject_delay_ns);
	err = serve(fd);
	fprintf(stderr, "irqlab-echo: error: %s (%llu holds overflowed)\n", strerror(-err),
		(unsigned long long)held_overflow);
	return EXIT_RUNTIME;
}
