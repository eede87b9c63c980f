/* SPDX-License-Identifier: Apache-2.0 */
/*
 * netsend.h - irqlab-netsend's options and limits, the floor every part stands on
 *
 * The program is layered one way, a header per layer, each file calling only
 * the layers below its own (tests/unit/test_c_layers.py checks it):
 *   netsend.c        command line and main()
 *   netsend_sched.c  the handshake, the sender and receiver threads (netsend_sched.h)
 *   netsend_sock.c   socket, destination rule, kernel timestamps, reading replies
 *                    into the table (netsend_sock.h)
 *   netsend_ring.c   the area, the in-flight table and the records (netsend_ring.h)
 *   netsend_opts.c   the options (this header)
 *
 * Each variable has one writing thread, named beside it; the others read it
 * with the ordering its comment gives.
 */
#ifndef IRQLAB_NETSEND_H
#define IRQLAB_NETSEND_H

#include "lib/cli.h"
#include "netproto.h"

#ifndef IRQLAB_NATIVE_BUILD_ID
#define IRQLAB_NATIVE_BUILD_ID "irqlab-netsend-unknown"
#endif

#define START_LEAD_NS		20000000ULL	/* first send >= 20 ms after the handshake */
#define HELLO_EVERY_NS		100000000ULL	/* handshake retry */
#define RX_WAIT_MAX_NS		5000000ULL	/* receiver wakes at least this often */
#define DEFAULT_TIMEOUT_NS	1000000000ULL
#define DEFAULT_READY_NS	300000000000ULL
#define MAX_TABLE		(1u << 20)	/* packets in flight at most */
#define BUF_BYTES		2048
#define CTRL_BYTES		512

struct options {
	struct probe_opts po;	/* --shm, --priority, --capacity, --duration-ns, ... */
	const char *dest;
	u16 port;
	int cpu;		/* -1: not pinned */
	u64 period_ns;
	u64 payload_bytes;
	u64 count;
	u64 timeout_ns;
	u64 ready_timeout_ns;
	u64 inject_delay_ns;
	u64 inject_every;
	int no_kernel_ts;
	int icmp;		/* --icmp: the kernel's own echo answers */
};

extern struct options opt;		/* netsend_opts.c; netsend.c fills it before any thread */

#endif /* IRQLAB_NETSEND_H */
