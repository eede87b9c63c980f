/* SPDX-License-Identifier: Apache-2.0 */
/*
 * netsend_sock.h - irqlab-netsend's socket (netsend_sock.c), above the records:
 * the destination and the lab's rule, the socket and its kernel timestamps,
 * replies and TX stamps read into the table
 */
#ifndef IRQLAB_NETSEND_SOCK_H
#define IRQLAB_NETSEND_SOCK_H

#include <sys/socket.h>
#include <sys/types.h>

#include "netsend_ring.h"

/* the main thread sets them up before the threads start */
extern int sock;
extern struct sockaddr_storage dest_sa;
extern socklen_t dest_len;
extern int kernel_ts;			/* SO_TIMESTAMPING is on */
extern size_t pkt_off;			/* --icmp: our packet follows an 8-byte ICMP echo header */

int dest_parse(const char *text);
int check_dest(void);
int open_socket(void);
int enable_kernel_ts(void);
void icmp_header(u8 *buf, u64 seq);
const struct net_pkt *reply_pkt(const u8 *buf, ssize_t n);
void drain_errqueue(void);
void drain_replies(void);
int recv_reply(int flags);

#endif /* IRQLAB_NETSEND_SOCK_H */
