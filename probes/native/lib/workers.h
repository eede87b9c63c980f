/* SPDX-License-Identifier: Apache-2.0 */
/*
 * workers.h - one pinned measuring thread per CPU, each writing its own ring,
 * for the programs of probes/native that measure CPUs (native.c, noise.c)
 */
#ifndef IRQLAB_NATIVE_WORKERS_H
#define IRQLAB_NATIVE_WORKERS_H

#include <pthread.h>
#include <signal.h>

#include "multiring.h"

struct worker {
	pthread_t thread;
	struct ring ring;
	int cpu;
	int error;		/* 0 or positive errno, set by the thread */
};

/* what every worker thread reads while it runs */
extern volatile int wk_stop_requested;

int wk_online_cpus(int *cpus, int max);
void wk_prefault_stack(void);
int wk_start(struct worker *w, int n, void *(*fn)(void *));
void wk_done(void);
int wk_wait(struct worker *w, int n, const sigset_t *stopset);

#endif /* IRQLAB_NATIVE_WORKERS_H */
