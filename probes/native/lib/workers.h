/* SPDX-License-Identifier: Apache-2.0 */
/*
 * workers.h - one pinned measuring thread per CPU, each writing its own ring,
 * for the programs of probes/native that measure CPUs (native.c, noise.c)
 */
#ifndef IRQLAB_NATIVE_WORKERS_H
#define IRQLAB_NATIVE_WORKERS_H

#include <pthread.h>
#include <signal.h>

#include "cli.h"
#include "mring.h"

struct worker {
	pthread_t thread;
	struct ring ring;
	int cpu;
	int error;		/* 0 or positive errno, set by the thread */
};

/* what every worker thread reads while it runs */
extern volatile int wk_stop_requested;

int wk_cpus(int *cpus, int n);
struct worker *wk_create(const struct probe_opts *po, u64 offset_bytes, const int *cpus,
			 int n, u32 priority, struct mr_ring_cfg *cfg, struct mr_dir **dir);
void wk_prefault_stack(void);
int wk_start(struct worker *w, int n, void *(*fn)(void *));
void wk_done(void);
int wk_wait(struct worker *w, int n, const sigset_t *stopset);
int wk_run(struct mr_dir *dir, struct worker *w, int n, void *(*fn)(void *),
	   const sigset_t *stopset);

#endif /* IRQLAB_NATIVE_WORKERS_H */
