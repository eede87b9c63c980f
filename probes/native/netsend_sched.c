// SPDX-License-Identifier: Apache-2.0
/*
 * netsend_sched.c - irqlab-netsend's threads: the sender, one packet per
 * period on an absolute CLOCK_MONOTONIC schedule, and the receiver, which
 * takes replies and commits records; run() starts both after the handshake
 * (which lives here: it waits on the stop signals as the run does)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/mring.h"
#include "lib/nstime.h"
#include "lib/rt.h"
#include "netsend_sched.h"

static volatile int stop_requested;	/* 1: stop sending; 2: stop at once */
static volatile int sending_done;
static u64 start_ns, end_ns;

/* thread_sched - pin (if asked) and schedule the calling thread; 0 or -errno */
static int thread_sched(void)
{
	return rt_thread_setup(opt.cpu, dir->policy == MR_POLICY_FIFO ? opt.po.priority : 0);
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
			return mr_fail(ETIMEDOUT, "no reply from %s port %u within %llu s: "
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
		mr_fail(-err, "cannot schedule the receiver thread: %s", strerror(-err));
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
	struct pending *e = table_entry(seq);
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
	u32 flags = 0;
	int err = thread_sched();

	if (err) {
		mr_fail(-err, "cannot schedule the sender thread: %s", strerror(-err));
		goto out;
	}
	memset(buf, 0, sizeof(buf));
	((struct net_pkt *)(buf + pkt_off))->magic = NET_MAGIC;
	ring_set_state(&ring, RING_RUNNING);
	while (!READ_ONCE(stop_requested) && (!opt.count || seq < opt.count) &&
	       (!end_ns || next_ns <= end_ns)) {
		/* never reuse a table slot whose packet is not committed yet */
		if (table_full(seq)) {
			sleep_until_ns(monotonic_ns() + opt.period_ns);
			continue;
		}
		err = sleep_until_ns(next_ns);
		if (err == -EINTR)
			continue;
		if (err) {
			mr_fail(-err, "clock_nanosleep: %s", strerror(-err));
			break;
		}
		send_one(seq++, flags, buf);
		flags = 0;
		now_ns = monotonic_ns();
		skipped = period_advance(&next_ns, now_ns, opt.period_ns);
		if (skipped) {
			ring_add_overruns(&ring, skipped);
			flags = RING_F_OVERRUN;
		}
	}
out:
	__atomic_store_n(&sending_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* run - handshake, then the two threads until done or stopped; 0 or -errno */
int run(const sigset_t *stopset)
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
	end_ns = opt.po.duration_ns ? start_ns + opt.po.duration_ns : 0;
	dir->start_ns = start_ns;
	__atomic_store_n(&dir->state, RING_RUNNING, __ATOMIC_RELEASE);
	err = pthread_create(&rx, NULL, receiver, NULL);
	if (err)
		return mr_fail(err, "cannot start the receiver thread: %s", strerror(err));
	err = pthread_create(&tx, NULL, sender, NULL);
	if (err) {
		__atomic_store_n(&stop_requested, 2, __ATOMIC_RELEASE);
		pthread_join(rx, NULL);
		return mr_fail(err, "cannot start the sender thread: %s", strerror(err));
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
