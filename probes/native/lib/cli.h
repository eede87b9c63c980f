/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli.h - command-line helpers shared by the programs of probes/native
 *
 * One behaviour for numbers: strict decimal. A number is one or more ASCII
 * digits and nothing else: no sign, no blank, no 0x/0 prefix (a leading zero
 * is refused unless the number is 0, so "010" cannot mean 8 in one program
 * and 10 in another), no unit, and it fits in 64 bits. Usage errors are one
 * line on stderr, "<program>: error: <what> <hint>", and exit 2.
 */
#ifndef IRQLAB_NATIVE_CLI_H
#define IRQLAB_NATIVE_CLI_H

#include "types.h"

/* exit codes every program here shares (docs/formats.md, runner/native.py) */
#define EXIT_RUNTIME		1
#define EXIT_USAGE		2
#define EXIT_NO_RT		3

/* the options of every program that writes a ring directory (native, netsend) */
struct probe_opts {
	const char *shm_path;	/* --shm PATH */
	int shm_fd;		/* --shm-fd N, -1 when not given */
	int priority;		/* --priority N, SCHED_FIFO 1-99 */
	int rt_fallback;	/* --rt-fallback */
	int verbose;		/* -v, --verbose */
	u32 capacity;		/* --capacity N, records per ring */
	u64 duration_ns;	/* --duration-ns N, 0 = no limit */
};

#define PROBE_OPTS_INIT { .shm_fd = -1, .priority = 90, .capacity = 65536 }

void cli_init(const char *prog, const char *hint);
const char *cli_prog(void);
void cli_usage_fail(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2)));
int scan_dec_u64(const char *s, const char **end, u64 *out);
int parse_dec_u64(const char *s, u64 *out);
int parse_cpu_list(const char *s, int *cpus, int max);
int cli_probe_opt(struct probe_opts *po, const char *arg, const char *val);
void cli_parse(int argc, char **argv, struct probe_opts *po, void (*usage)(void),
	       int (*own)(const char *arg, const char *val));
void cli_probe_opts_check(const struct probe_opts *po);

#endif /* IRQLAB_NATIVE_CLI_H */
