/* SPDX-License-Identifier: Apache-2.0 */
/*
 * netsend.h - what the parts of irqlab-netsend share (netsend.c: command line;
 * netsend_sock.c: socket and timestamps; netsend_ring.c: in-flight table and
 * records; netsend_sched.c: the sender and receiver threads)
 *
 * Each variable has one writing thread, named beside it; the others read it
 * with the ordering its comment gives.
 */
#ifndef IRQLAB_NETSEND_H
#define IRQLAB_NETSEND_H

#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "lib/cli.h"
#include "multiring.h"
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

extern struct options opt;		/* netsend.c, set before any thread */

/* netsend_sock.c: main thread sets them up before the threads start */
extern int sock;
extern struct sockaddr_storage dest_sa;
extern socklen_t dest_len;
extern int kernel_ts;			/* SO_TIMESTAMPING is on */
extern size_t pkt_off;			/* --icmp: our packet follows an 8-byte ICMP echo header */

/* netsend_ring.c */
extern struct mr_dir *dir;
extern struct net_block *nb;
extern struct ring ring;
extern u64 committed;			/* packets committed by the receiver thread */

/* netsend_sched.c */
extern u64 sent;			/* packets published by the sender thread */
extern volatile int stop_requested;	/* 1: stop sending; 2: stop at once */

/* netsend_sock.c */
int dest_parse(const char *text);
int check_dest(void);
int open_socket(void);
int enable_kernel_ts(void);
void icmp_header(u8 *buf, u64 seq);
const struct net_pkt *reply_pkt(const u8 *buf, ssize_t n);
u64 cmsg_stamp(struct msghdr *msg);
int handshake(const sigset_t *stopset);
void drain_errqueue(void);
void drain_replies(void);
int recv_reply(int flags);

/* netsend_ring.c */
int area_setup(u8 *area);
int table_setup(void);
struct pending *table_entry(u64 seq);
int table_full(u64 seq);
struct pending *outstanding(u64 seq);
void take_reply(const u8 *buf, ssize_t n, struct msghdr *msg, u64 rx_user_ns);
void commit_ready(void);

/* netsend_sched.c */
int stop_pending(const sigset_t *stopset);
int run(const sigset_t *stopset);

#endif /* IRQLAB_NETSEND_H */
