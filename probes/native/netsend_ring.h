/* SPDX-License-Identifier: Apache-2.0 */
/*
 * netsend_ring.h - irqlab-netsend's records (netsend_ring.c): the area, the
 * table of packets in flight, records committed in send order
 */
#ifndef IRQLAB_NETSEND_RING_H
#define IRQLAB_NETSEND_RING_H

#include "multiring.h"
#include "netsend.h"

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

extern struct mr_dir *dir;
extern struct net_block *nb;
extern struct ring ring;
extern u64 committed;			/* packets committed by the receiver thread */
extern u64 sent;			/* packets published by the sender thread */

int area_setup(u8 *area);
int table_setup(void);
struct pending *table_entry(u64 seq);
int table_full(u64 seq);
struct pending *outstanding(u64 seq);
void take_reply(const struct net_pkt *p, u64 rx_user_ns, u64 rx_kernel_ns);
void commit_ready(void);

#endif /* IRQLAB_NETSEND_RING_H */
