/* SPDX-License-Identifier: Apache-2.0 */
/*
 * netsend_sched.h - irqlab-netsend's run (netsend_sched.c), above the socket:
 * the handshake, then the sender and receiver threads on their schedule
 */
#ifndef IRQLAB_NETSEND_SCHED_H
#define IRQLAB_NETSEND_SCHED_H

#include <signal.h>

#include "netsend_sock.h"

int run(const sigset_t *stopset);

#endif /* IRQLAB_NETSEND_SCHED_H */
