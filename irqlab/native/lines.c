// SPDX-License-Identifier: Apache-2.0
/*
 * lines.c - host-side fast path of raw-sample log import (irqlab/importers/).
 *
 * A raw-sample log is millions of identical lines ("latency: 1283\n", kvm-unit-tests
 * x86/tscdeadline_latency) and a handful of others (the TSC rate, comments, the line
 * that stopped a breakmax run). This reads the run of plain sample lines at the start of
 * a buffer straight into an int64 array and stops at the first line of any other shape,
 * which the Python importer reads with its own rules (the reference: the same file
 * without this library, or IRQLAB_NATIVE=0, gives the same run).
 *
 * Return convention: >= 0 (a count) on success, -errno on failure.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

/* Longest digit run taken here: 18 digits are below 10^18, the importers' bound. */
#define MAX_DIGITS	18

/*
 * irq_parse_prefixed_ints - values of the leading lines "<prefix>-?<digits>\n" of @buf
 * @buf: bytes of the log
 * @len: bytes in @buf
 * @prefix: the text before the number ("latency: ")
 * @prefix_len: its length
 * @out: room for @max_out values
 * @max_out: at most this many lines are read
 * @consumed: set to the bytes read (whole lines only)
 *
 * Stops before the first line that is not exactly that shape (another text, spaces, a
 * carriage return, more than MAX_DIGITS digits) and before an unterminated last line.
 * Returns the number of values written, or -EINVAL for bad arguments.
 */
int64_t irq_parse_prefixed_ints(const char *buf, int64_t len, const char *prefix,
				int64_t prefix_len, int64_t *out, int64_t max_out,
				int64_t *consumed)
{
	int64_t pos = 0, count = 0;

	if (len < 0 || prefix_len < 0 || max_out < 0)
		return -EINVAL;
	while (count < max_out) {
		const char *p = buf + pos;
		const int64_t room = len - pos;
		int64_t i = prefix_len, value = 0;
		int negative = 0, digits = 0;

		if (room <= prefix_len + 1 || memcmp(p, prefix, (size_t)prefix_len))
			break;
		if (p[i] == '-') {
			negative = 1;
			i++;
		}
		while (i < room && p[i] >= '0' && p[i] <= '9' && digits < MAX_DIGITS) {
			value = value * 10 + (p[i] - '0');
			digits++;
			i++;
		}
		/* a 19th digit, or anything but the newline, is the Python reader's */
		if (!digits || i >= room || p[i] != '\n')
			break;
		out[count++] = negative ? -value : value;
		pos += i + 1;
	}
	*consumed = pos;
	return count;
}
