// SPDX-License-Identifier: Apache-2.0
/*
 * gaps.c - host-side fast path of explain's switch-chain repair (irqlab/explain/timeline.py,
 * _infer() and _last_wakeup_before()).
 *
 * A "gap" is the time on one CPU between a recorded switch to task A and the next
 * recorded switch whose previous task is B != A: a switch between them was not recorded.
 * The events that happened on that CPU inside the gap tell which task ran when. numpy
 * finds each event's gap with a binary search per event over all switches; here one
 * pointer per CPU walks the switch times as the events go by in time order.
 * The numpy code is the reference: results are identical (tests compare both).
 *
 * Return convention: >= 0 (a count) on success, -errno on failure.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* struct gap_switches - the recorded switches sorted by (cpu, time) and their gaps */
struct gap_switches {
	const int64_t *sw_ts;		/* switch times, CPU after CPU, time ordered */
	const int64_t *gap_after;	/* per switch: the gap that follows it, or -1 */
	const int64_t *cpu_lo;		/* per CPU: first switch index */
	const int64_t *cpu_hi;		/* per CPU: one past its last switch */
	int64_t ncpu;
	const int64_t *gap_end_ts;	/* per gap: time of the switch that closes it */
	const int64_t *gap_a;		/* per gap: the task switched in before it */
	const int64_t *gap_b;		/* per gap: the task switched out after it */
};

/* last_before - index of the last of sw_ts[lo, hi) strictly before @t, or lo - 1 */
static int64_t last_before(const int64_t *sw_ts, int64_t lo, int64_t hi, int64_t t)
{
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;

		if (sw_ts[mid] < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo - 1;
}

/*
 * gap_of - the gap event (t, cpu) lies in, or -1
 * @sw: switches and gaps
 * @cur: per CPU, the index of the last switch strictly before the previous event's time
 *
 * The gap of an event is the one after the last switch of its CPU strictly before it,
 * if the event is also strictly before the switch that closes that gap.
 */
static int64_t gap_of(const struct gap_switches *sw, int64_t *cur, int64_t t, int64_t cpu)
{
	int64_t lo, hi, j, g;

	if (cpu < 0 || cpu >= sw->ncpu)
		return -1;
	lo = sw->cpu_lo[cpu];
	hi = sw->cpu_hi[cpu];
	if (lo >= hi)
		return -1;
	j = cur[cpu];
	if (j >= lo && sw->sw_ts[j] >= t)
		j = last_before(sw->sw_ts, lo, hi, t);	/* time went back: search */
	while (j + 1 < hi && sw->sw_ts[j + 1] < t)
		j++;
	cur[cpu] = j;
	if (j < lo)
		return -1;
	g = sw->gap_after[j];
	if (g < 0 || t >= sw->gap_end_ts[g])
		return -1;
	return g;
}

/* cursors - per-CPU walk positions, each before its CPU's first switch */
static int64_t *cursors(const struct gap_switches *sw)
{
	int64_t *cur = malloc((size_t)(sw->ncpu ? sw->ncpu : 1) * sizeof(*cur));
	int64_t c;

	if (cur)
		for (c = 0; c < sw->ncpu; c++)
			cur[c] = sw->cpu_lo[c] - 1;
	return cur;
}

/* key_of - the task key of @pid, or -1 when the pid is not one of the keyed tasks */
static inline int64_t key_of(int32_t pid, const int64_t *lut, int64_t lut_len, int64_t nkeys)
{
	int64_t k;

	if (pid < 0 || pid >= lut_len - 1)
		return -1;
	k = lut[pid];
	return k < nkeys ? k : -1;
}

/*
 * irq_gap_bounds - fold one table's events into the gaps' bounds
 * @sw: switches and gaps
 * @ts, @cpu, @pid: the table's events (time ordered), n of them
 * @last_a: per gap, raised to the last event time of task A inside it
 * @first_b: per gap, lowered to the first event time of task B inside it
 * @other: per gap, set to 1 when a third task has an event inside it
 *
 * Returns the number of the table's events inside a gap.
 */
int64_t irq_gap_bounds(const struct gap_switches *sw, const int64_t *ts, const uint16_t *cpu,
		       const int32_t *pid, int64_t n, int64_t *last_a, int64_t *first_b,
		       uint8_t *other)
{
	int64_t *cur = cursors(sw);
	int64_t i, inside = 0;

	if (!cur)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		int64_t g = gap_of(sw, cur, ts[i], cpu[i]);
		int is_a, is_b;

		if (g < 0)
			continue;
		inside++;
		is_a = pid[i] == sw->gap_a[g];
		is_b = pid[i] == sw->gap_b[g];
		if (is_a && ts[i] > last_a[g])
			last_a[g] = ts[i];
		if (is_b && ts[i] < first_b[g])
			first_b[g] = ts[i];
		if (!is_a && !is_b)
			other[g] = 1;
	}
	free(cur);
	return inside;
}

/*
 * irq_gap_events - one table's events inside the gaps marked in @want
 * @sw, @ts, @cpu, @pid, @n: as irq_gap_bounds()
 * @want: per gap, nonzero to collect its events
 * @gap_out, @ts_out, @pid_out: the collected events in table order, at most @cap
 *
 * Returns the number collected, or -ENOSPC when more than @cap would be.
 */
int64_t irq_gap_events(const struct gap_switches *sw, const int64_t *ts, const uint16_t *cpu,
		       const int32_t *pid, int64_t n, const uint8_t *want, int64_t *gap_out,
		       int64_t *ts_out, int64_t *pid_out, int64_t cap)
{
	int64_t *cur = cursors(sw);
	int64_t i, k = 0;

	if (!cur)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		int64_t g = gap_of(sw, cur, ts[i], cpu[i]);

		if (g < 0 || !want[g])
			continue;
		if (k >= cap) {
			free(cur);
			return -ENOSPC;
		}
		gap_out[k] = g;
		ts_out[k] = ts[i];
		pid_out[k] = pid[i];
		k++;
	}
	free(cur);
	return k;
}

/*
 * irq_last_event_before - per query, the latest event of its task strictly before a time
 * @pid, @ts: the events (time ordered), n of them
 * @lut, @lut_len: task key of each pid (pid in [0, lut_len - 1) with lut[pid] >= 0;
 *	other events are ignored)
 * @nkeys: key count
 * @q_key, @q_before: the queries, nq of them
 * @found: per query, set to the event's time when one exists (else left alone)
 * @has: per query, set to 1 when one exists (else left alone)
 *
 * Events are grouped by key with a stable counting sort (each group stays time ordered),
 * then each query is a binary search in its group. Returns the number found, or -errno.
 */
int64_t irq_last_event_before(const int32_t *pid, const int64_t *ts, int64_t n,
			      const int64_t *lut, int64_t lut_len, int64_t nkeys,
			      const int64_t *q_key, const int64_t *q_before, int64_t nq,
			      int64_t *found, uint8_t *has)
{
	int64_t *start = calloc((size_t)nkeys + 1, sizeof(*start));
	int64_t *fill = malloc((size_t)(nkeys ? nkeys : 1) * sizeof(*fill));
	int64_t *sorted = malloc((size_t)(n ? n : 1) * sizeof(*sorted));
	int64_t i, hits = 0;

	if (!start || !fill || !sorted) {
		free(start);
		free(fill);
		free(sorted);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		int64_t k = key_of(pid[i], lut, lut_len, nkeys);

		if (k >= 0)
			start[k + 1]++;
	}
	for (i = 0; i < nkeys; i++) {
		start[i + 1] += start[i];
		fill[i] = start[i];
	}
	for (i = 0; i < n; i++) {
		int64_t k = key_of(pid[i], lut, lut_len, nkeys);

		if (k >= 0)
			sorted[fill[k]++] = ts[i];
	}
	for (i = 0; i < nq; i++) {
		int64_t k = q_key[i], j;

		if (k < 0 || k >= nkeys)
			continue;
		/* a group can hold equal times: any of them is the same answer */
		j = last_before(sorted, start[k], start[k + 1], q_before[i]);
		if (j >= start[k]) {
			found[i] = sorted[j];
			has[i] = 1;
			hits++;
		}
	}
	free(start);
	free(fill);
	free(sorted);
	return hits;
}
