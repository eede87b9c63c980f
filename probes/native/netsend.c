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
 *
 * The program by concern, layered one way (netsend.h): this file is the
 * command line and main(); netsend_sched.c the handshake and the sender and
 * receiver threads on their schedule; netsend_sock.c the socket, kernel
 * timestamps and the destination rule; netsend_ring.c the in-flight table and
 * the records; netsend_opts.c the options.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cli.h"
#include "lib/mring.h"
#include "lib/nstime.h"
#include "lib/rt.h"
#include "netsend_sched.h"

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

/*
 * netsend_opt - @a (with @val, the next word or NULL) when it is one of irqlab-netsend's
 * own options: the words taken (cli_parse), 0 when unknown; exits 2 on a bad value
 */
static int netsend_opt(const char *a, const char *val)
{
	u64 v;

	if (!strcmp(a, "--icmp")) {
		opt.icmp = 1;
		return 1;
	}
	if (!strcmp(a, "--no-kernel-ts")) {
		opt.no_kernel_ts = 1;
		return 1;
	}
	if (!val)
		cli_usage_fail("%s needs a value", a);
	if (!strcmp(a, "--dest")) {
		opt.dest = val;
	} else if (!strcmp(a, "--port")) {
		if (parse_dec_u64(val, &v) || !v || v > 65535)
			cli_usage_fail("--port %s must be 1-65535", val);
		opt.port = (u16)v;
	} else if (!strcmp(a, "--cpu")) {
		if (parse_dec_u64(val, &v) || v >= CPU_SETSIZE)
			cli_usage_fail("--cpu %s is not a CPU number", val);
		opt.cpu = (int)v;
	} else if (!strcmp(a, "--period-ns")) {
		if (parse_dec_u64(val, &opt.period_ns) || opt.period_ns < 10000 ||
		    opt.period_ns > 10000000000ULL)
			cli_usage_fail("--period-ns %s must be 10000 to 10000000000", val);
	} else if (!strcmp(a, "--payload")) {
		if (parse_dec_u64(val, &opt.payload_bytes) ||
		    opt.payload_bytes < NET_PAYLOAD_MIN ||
		    opt.payload_bytes > NET_PAYLOAD_MAX)
			cli_usage_fail("--payload %s must be %u-%u bytes", val,
				       NET_PAYLOAD_MIN, NET_PAYLOAD_MAX);
	} else if (!strcmp(a, "--count")) {
		if (parse_dec_u64(val, &opt.count))
			cli_usage_fail("--count %s is not a count", val);
	} else if (!strcmp(a, "--timeout-ns")) {
		if (parse_dec_u64(val, &opt.timeout_ns) || opt.timeout_ns < 1000000 ||
		    opt.timeout_ns > 60000000000ULL)
			cli_usage_fail("--timeout-ns %s must be 1 ms to 60 s", val);
	} else if (!strcmp(a, "--ready-timeout-ns")) {
		if (parse_dec_u64(val, &opt.ready_timeout_ns) || !opt.ready_timeout_ns)
			cli_usage_fail("--ready-timeout-ns %s must be more than 0", val);
	} else if (!strcmp(a, "--inject-delay-ns")) {
		if (parse_dec_u64(val, &opt.inject_delay_ns))
			cli_usage_fail("--inject-delay-ns %s is not a count of ns", val);
	} else if (!strcmp(a, "--inject-every")) {
		if (parse_dec_u64(val, &opt.inject_every))
			cli_usage_fail("--inject-every %s is not a count", val);
	} else {
		return 0;
	}
	return 2;
}

/* parse_args - fill @opt from argv; exits 2 on bad usage */
static void parse_args(int argc, char **argv)
{
	cli_init("irqlab-netsend", "(see --help)");
	cli_parse(argc, argv, &opt.po, usage, netsend_opt);
	if (!opt.dest || dest_parse(opt.dest))
		cli_usage_fail("--dest %s is not an IPv4 or IPv6 address",
			       opt.dest ? opt.dest : "(none)");
	if (!opt.count && !opt.po.duration_ns)
		cli_usage_fail("give --count N or --duration-ns N: the traffic must be bounded");
	if (opt.timeout_ns / opt.period_ns >= MAX_TABLE - 64)
		cli_usage_fail("--timeout-ns / --period-ns must stay below %u packets in flight",
			       MAX_TABLE - 64);
}

int main(int argc, char **argv)
{
	sigset_t stopset;
	void *area = NULL;
	int err;

	parse_args(argc, argv);
	rt_block_stop_signals(&stopset);

	if (mr_map(opt.po.shm_path, opt.po.shm_fd, 0, 1, opt.po.capacity, &area))
		return EXIT_RUNTIME;
	if (area_setup(area))
		return EXIT_RUNTIME;
	if (check_dest())
		return EXIT_RUNTIME;
	if (table_setup()) {
		mr_fail(ENOMEM, "no memory for %llu packets in flight",
			(unsigned long long)(opt.timeout_ns / opt.period_ns));
		return EXIT_RUNTIME;
	}
	if (rt_preflight(dir, opt.po.priority, opt.po.rt_fallback))
		return EXIT_NO_RT;
	rt_lock_memory(dir);
	if (open_socket())
		return EXIT_RUNTIME;
	if (opt.po.verbose)
		fprintf(stderr, "irqlab-netsend: to %s port %u, %s priority %d, period %llu ns, "
			"payload %llu bytes\n", opt.dest, opt.port,
			dir->policy == MR_POLICY_FIFO ? "SCHED_FIFO" : "SCHED_OTHER",
			opt.po.priority, (unsigned long long)opt.period_ns,
			(unsigned long long)opt.payload_bytes);
	err = run(&stopset);
	if (err)
		return EXIT_RUNTIME;
	ring_set_state(&ring, RING_DONE);
	__atomic_store_n(&dir->state, RING_DONE, __ATOMIC_RELEASE);
	return 0;
}
