/* SPDX-License-Identifier: Apache-2.0 */
/*
 * netproto.h - the UDP round-trip protocol of `--target net`
 * (docs/formats.md section 10)
 *
 * irqlab-netsend (host) sends one packet per period to irqlab-echo (in the
 * guest), which sends the same bytes back with NET_F_REPLY set, at once or,
 * for every Nth packet of the self-check, after the injected delay with
 * NET_F_HELD set. The packet is at least struct net_pkt; the rest of the
 * payload is zeros. All fields little-endian (both ends are x86-64 or arm64).
 */
#ifndef IRQLAB_NETPROTO_H
#define IRQLAB_NETPROTO_H

#include "types.h"

#define NET_MAGIC		0x3154454e4c515249ULL	/* "IRQLNET1" */
#define NET_PORT		7010		/* the responder's UDP port */
#define NET_SEQ_HELLO		(~0ULL)		/* handshake: echoed, never held */
#define NET_PAYLOAD_MIN		32
#define NET_PAYLOAD_MAX		1472		/* one 1500-byte IPv4 frame */

/* net_pkt.flags */
#define NET_F_REPLY		(1u << 0)	/* set by the responder */
#define NET_F_HELD		(1u << 1)	/* reply held for the injected delay */

struct net_pkt {
	u64 magic;			/*  0 */
	u64 seq;			/*  8: packet number, 0-based */
	u64 send_ns;			/* 16: sender's CLOCK_MONOTONIC (echoed) */
	u32 flags;			/* 24 */
	u32 reserved;			/* 28 */
};

_Static_assert(sizeof(struct net_pkt) == NET_PAYLOAD_MIN, "net_pkt");

/*
 * What irqlab-netsend adds to the native probe's shared memory (multiring.h,
 * one ring): a ring_hdr timer_mode, a record flag, and the net block in the
 * directory's free space at NET_BLOCK_OFFSET. Each counter has one writer.
 */
#define TIMER_UDP_ROUND_TRIP	6	/* ring_hdr.timer_mode: UDP round trips */
#define NET_REC_F_USER_TS	(1u << 2)	/* record timed in user space */

#define NET_BLOCK_OFFSET	3072
#define NET_BLOCK_MAGIC		0x4254454e4c515249ULL	/* "IRQLNETB" */
#define NET_BLOCK_VERSION	1

/* net_block.flags */
#define NET_B_KERNEL_TS		(1u << 0)	/* SO_TIMESTAMPING software stamps on */
#define NET_B_LOOPBACK		(1u << 1)	/* destination is a loopback address */
#define NET_B_OWN_NETNS		(1u << 2)	/* sender runs in its own network namespace */
#define NET_B_ICMP		(1u << 3)	/* ICMP echo (--icmp): the guest kernel answers */

struct net_block {
	u64 magic;			/*   0 */
	u32 version;			/*   8 */
	u32 flags;			/*  12 */
	u64 sent;			/*  16: packets sent or tried (= samples + lost) */
	u64 replied;			/*  24: replies matched before their timeout */
	u64 timed_out;			/*  32: no reply within timeout_ns */
	u64 send_errors;		/*  40: send() failed (also lost) */
	u64 late;			/*  48: replies after their packet was lost */
	u64 bad;			/*  56: duplicates, unknown or foreign datagrams */
	u64 held;			/*  64: replies marked NET_F_HELD */
	u64 kernel_ts;			/*  72: samples timed by kernel stamps */
	u64 user_ts;			/*  80: samples timed in user space */
	u64 timeout_ns;			/*  88 */
	u64 payload_bytes;		/*  96 */
	u64 handshake_ns;		/* 104: first hello to its echo */
	u64 inject_delay_ns;		/* 112 */
	u64 inject_every;		/* 120 */
	u32 port;			/* 128 */
	u32 reserved;			/* 132 */
	char dest[64];			/* 136: responder's address as given */
};

_Static_assert(sizeof(struct net_block) == 200, "net_block");

#endif /* IRQLAB_NETPROTO_H */
