/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rt.h - real-time set-up shared by the measuring programs of probes/native:
 * SCHED_FIFO (or the recorded --rt-fallback), CPU pinning, locked memory,
 * and stop signals taken by sigtimedwait only
 */
#ifndef IRQLAB_NATIVE_RT_H
#define IRQLAB_NATIVE_RT_H

#include <signal.h>

#include "multiring.h"

int rt_preflight(struct mr_dir *dir, int priority, int fallback);
int rt_thread_setup(int cpu, int fifo_priority);
int rt_lock_memory(struct mr_dir *dir);
void rt_block_stop_signals(sigset_t *stopset);

#endif /* IRQLAB_NATIVE_RT_H */
