// SPDX-License-Identifier: Apache-2.0
/* cli.c - number parsing and usage errors for the programs of probes/native */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *prog_name = "irqlab";
static const char *usage_hint = "(see --help)";

/* cli_init - name the program and the hint that ends every usage error */
void cli_init(const char *prog, const char *hint)
{
	prog_name = prog;
	usage_hint = hint;
}

/* cli_prog - the program name given to cli_init, for message prefixes */
const char *cli_prog(void)
{
	return prog_name;
}

/* cli_usage_fail - print "<prog>: error: <message> <hint>" and exit 2 */
void cli_usage_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: error: ", prog_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " %s\n", usage_hint);
	exit(EXIT_USAGE);
}

/*
 * scan_dec_u64 - strict decimal number at the start of @s into @out, @end
 * past its last digit; 0, -EINVAL (no digit, or a leading zero) or -ERANGE
 */
int scan_dec_u64(const char *s, const char **end, u64 *out)
{
	const char *p = s;
	u64 v = 0;

	if (!s || *p < '0' || *p > '9')
		return -EINVAL;
	if (p[0] == '0' && p[1] >= '0' && p[1] <= '9')
		return -EINVAL;		/* 010: octal in C, so neither reading */
	for (; *p >= '0' && *p <= '9'; p++) {
		u64 d = (u64)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*end = p;
	*out = v;
	return 0;
}

/* parse_dec_u64 - the whole of @s as a strict decimal number; 0 or -errno */
int parse_dec_u64(const char *s, u64 *out)
{
	const char *end;
	u64 v;
	int err = scan_dec_u64(s, &end, &v);

	if (err)
		return err;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* parse_cpu_list - "0-3,6" (decimal) into @cpus, at most @max; count or -errno */
int parse_cpu_list(const char *s, int *cpus, int max)
{
	int n = 0;

	while (*s) {
		u64 lo, hi;

		if (scan_dec_u64(s, &s, &lo))
			return -EINVAL;
		hi = lo;
		if (*s == '-' && (scan_dec_u64(s + 1, &s, &hi) || hi < lo))
			return -EINVAL;
		for (u64 c = lo; c <= hi; c++) {
			for (int i = 0; i < n; i++)
				if ((u64)cpus[i] == c)
					return -EINVAL;
			if (n >= max || c >= CPU_SETSIZE)
				return -ERANGE;
			cpus[n++] = (int)c;
		}
		if (*s == ',' || *s == '\n')
			s++;
		else if (*s)
			return -EINVAL;
	}
	return n ? n : -EINVAL;
}

/*
 * cli_probe_opt - @arg (with @val, the next word or NULL) when it is one of
 * struct probe_opts' options: the words it takes (1 a flag, 2 with its value),
 * 0 when it is not one of them; exits 2 on a bad or missing value
 */
int cli_probe_opt(struct probe_opts *po, const char *arg, const char *val)
{
	u64 v;

	if (!strcmp(arg, "--rt-fallback")) {
		po->rt_fallback = 1;
		return 1;
	}
	if (!strcmp(arg, "-v") || !strcmp(arg, "--verbose")) {
		po->verbose = 1;
		return 1;
	}
	if (strcmp(arg, "--shm") && strcmp(arg, "--shm-fd") && strcmp(arg, "--priority") &&
	    strcmp(arg, "--capacity") && strcmp(arg, "--duration-ns"))
		return 0;
	if (!val)
		cli_usage_fail("%s needs a value", arg);
	if (!strcmp(arg, "--shm")) {
		po->shm_path = val;
	} else if (!strcmp(arg, "--shm-fd")) {
		if (parse_dec_u64(val, &v) || v > INT_MAX)
			cli_usage_fail("--shm-fd %s is not a file descriptor", val);
		po->shm_fd = (int)v;
	} else if (!strcmp(arg, "--priority")) {
		if (parse_dec_u64(val, &v) || v < 1 || v > 99)
			cli_usage_fail("--priority %s must be 1-99", val);
		po->priority = (int)v;
	} else if (!strcmp(arg, "--capacity")) {
		if (parse_dec_u64(val, &v) || v < 2 || v > (1u << 26) || (v & (v - 1)))
			cli_usage_fail("--capacity %s must be a power of two, 2 to 2^26", val);
		po->capacity = (u32)v;
	} else if (parse_dec_u64(val, &po->duration_ns)) {
		cli_usage_fail("--duration-ns %s is not a count of ns", val);
	}
	return 2;
}

/* cli_probe_opts_check - what @po needs whole: one of --shm and --shm-fd; exits 2 if not */
void cli_probe_opts_check(const struct probe_opts *po)
{
	if (!po->shm_path == (po->shm_fd < 0))
		cli_usage_fail("give exactly one of --shm PATH and --shm-fd N");
}

/*
 * cli_parse - every option of @argv: struct probe_opts' into @po (when not
 * NULL), -h/--help through @usage (when not NULL, then exit 0), the rest
 * through @own, which returns the words it took (1 or 2), or 0 for an unknown
 * option (then exit 2); @po is then checked whole (cli_probe_opts_check)
 */
void cli_parse(int argc, char **argv, struct probe_opts *po, void (*usage)(void),
	       int (*own)(const char *arg, const char *val))
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		int words = po ? cli_probe_opt(po, a, val) : 0;

		if (!words && usage && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
			usage();
			exit(0);
		}
		if (!words)
			words = own(a, val);
		if (!words)
			cli_usage_fail("unknown option %s", a);
		i += words - 1;
	}
	if (po)
		cli_probe_opts_check(po);
}
