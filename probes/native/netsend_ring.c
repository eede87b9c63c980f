// SPDX-License-Identifier: Apache-2.0
/*
 * netsend_ring.c - irqlab-netsend's records: the area (directory, net block,
 * one ring), the table of packets in flight, replies matched to their packet,
 * and records committed in send order (a lost packet is a gap in the ring)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/mring.h"
#include "lib/nstime.h"
#include "netsend_ring.h"

struct mr_dir *dir;
struct net_block *nb;
struct ring ring;
u64 committed;
u64 sent;
static struct pending *table;
static u32 table_mask;

/* area_setup - directory, net block and ring header (state BOOTING); 0 or -errno */
int area_setup(u8 *area)
{
	struct mr_ring_cfg cfg = {
		.cpu = opt.cpu < 0 ? 0 : (u32)opt.cpu, .timer_mode = TIMER_UDP_ROUND_TRIP,
		.period_ns = opt.period_ns, .inject_every = opt.inject_every,
		.inject_delay_ns = opt.inject_delay_ns, .build_id = IRQLAB_NATIVE_BUILD_ID,
	};
	int err;

	dir = mr_dir_begin(area, 1, opt.po.capacity, opt.period_ns, (u32)opt.po.priority);
	nb = (struct net_block *)(area + NET_BLOCK_OFFSET);
	nb->version = NET_BLOCK_VERSION;
	nb->timeout_ns = opt.timeout_ns;
	nb->payload_bytes = opt.payload_bytes;
	nb->inject_delay_ns = opt.inject_delay_ns;
	nb->inject_every = opt.inject_every;
	nb->port = opt.port;
	snprintf(nb->dest, sizeof(nb->dest), "%s", opt.dest);
	__atomic_store_n(&nb->magic, NET_BLOCK_MAGIC, __ATOMIC_RELEASE);
	err = mr_ring_init(dir, 0, opt.po.capacity, &cfg, &ring);
	if (err)
		return err;
	mr_dir_publish(dir);
	mr_fail_into(dir, &ring);
	return 0;
}

/* table_setup - the in-flight table, a power of two above timeout / period; 0 or -ENOMEM */
int table_setup(void)
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

/* table_entry - the in-flight table's slot of packet @seq */
struct pending *table_entry(u64 seq)
{
	return &table[seq & table_mask];
}

/* table_full - would packet @seq take a slot whose packet is not committed yet? */
int table_full(u64 seq)
{
	return seq - __atomic_load_n(&committed, __ATOMIC_ACQUIRE) > table_mask;
}

/* outstanding - the table entry of packet @seq if it still waits for a reply, else NULL */
struct pending *outstanding(u64 seq)
{
	struct pending *e;

	if (seq >= __atomic_load_n(&sent, __ATOMIC_ACQUIRE) || seq < committed)
		return NULL;
	e = table_entry(seq);
	if (e->seq != seq)
		return NULL;
	return e;
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
void commit_ready(void)
{
	u64 upto = __atomic_load_n(&sent, __ATOMIC_ACQUIRE), now_ns = monotonic_ns();

	while (committed < upto) {
		struct pending *e = table_entry(committed);

		if (!commit_one(e, now_ns))
			break;
		__atomic_store_n(&e->state, PKT_FREE, __ATOMIC_RELEASE);
		/* the sender reads it to keep off slots still in flight */
		__atomic_store_n(&committed, committed + 1, __ATOMIC_RELEASE);
	}
}

/*
 * take_reply - match reply @p (NULL: not one of ours) to its packet, received
 * at @rx_user_ns, kernel-stamped at @rx_kernel_ns (0: none)
 */
void take_reply(const struct net_pkt *p, u64 rx_user_ns, u64 rx_kernel_ns)
{
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
	e->rx_kernel_ns = rx_kernel_ns;
	if (p->flags & NET_F_HELD) {
		e->flags |= RING_F_INJECTED;
		nb->held++;
	}
	nb->replied++;
	__atomic_store_n(&e->state, PKT_REPLIED, __ATOMIC_RELEASE);
}
