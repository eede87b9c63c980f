// SPDX-License-Identifier: Apache-2.0
/*
 * explain.c - host-side fast paths of explain's set-up (irqlab/explain/timeline.py):
 * the threads' state machine (thread_timelines()), rows inserted into time-ordered
 * columns (complete_switches()), distinct rows of fixed-width keys (irq handler names,
 * labels) and interrupt entry/exit pairs (irq_intervals()).
 *
 * numpy does these with many whole-array passes (masks, gathers, a sort of every event
 * of the followed threads); here each input column is read once in order and each
 * output written once. The numpy code is the reference: results are identical (tests
 * compare both on the real captures of tests/unit/explain/data).
 *
 * Return convention: >= 0 (a count) on success, -errno on failure.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* thread states, as timeline.py numbers them */
enum { ST_RUNNING, ST_RUNNABLE, ST_SLEEPING, ST_STOPPED, ST_UNKNOWN };

#define STOP_BITS		(0x4 | 0x8)
#define PREV_STATE_UNKNOWN	(-1)

/*
 * DEFINE_INSERT - insert_<type>(): irq_insert_rows() for rows of one machine word width.
 * Runs of kept rows between two added ones are short when many rows are added (the bench's
 * capture: 2.3 M into 4.1 M, two rows a run): a memcpy() call per run cost more than the
 * copy, so short runs are copied by a loop and long ones by memcpy().
 */
#define DEFINE_INSERT(name, type)						\
static void name(const type *src, int64_t n, const type *add, int64_t k,	\
		 const int64_t *at, type *out)					\
{										\
	int64_t j, from = 0, pos = 0;						\
										\
	for (j = 0; j < k; j++) {						\
		if (at[j] - pos >= 32) {					\
			memcpy(out + pos, src + from,				\
			       (size_t)(at[j] - pos) * sizeof(type));		\
			from += at[j] - pos;					\
			pos = at[j];						\
		}								\
		while (pos < at[j])						\
			out[pos++] = src[from++];				\
		out[pos++] = add[j];						\
	}									\
	memcpy(out + pos, src + from, (size_t)(n - from) * sizeof(type));	\
}

DEFINE_INSERT(insert_u8, uint8_t)
DEFINE_INSERT(insert_u16, uint16_t)
DEFINE_INSERT(insert_u32, uint32_t)
DEFINE_INSERT(insert_u64, uint64_t)

/*
 * irq_insert_rows - time-ordered rows with a few more put in at given places
 * @src: @n rows of @width bytes
 * @add: @k rows of @width bytes, in the order they are put in
 * @at: per added row, its index in the output (strictly increasing, below @n + @k)
 * @out: room for @n + @k rows
 *
 * The output is @src with @add[j] at @at[j]: the kept rows in their order around them.
 * Returns @n + @k, or -EINVAL when @at is not strictly increasing or out of range.
 */
int64_t irq_insert_rows(const uint8_t *src, int64_t n, const uint8_t *add, int64_t k,
			const int64_t *at, int64_t width, uint8_t *out)
{
	int64_t j, from = 0, pos = 0;

	for (j = 0; j < k; j++)
		if (at[j] < (j ? at[j - 1] + 1 : 0) || at[j] >= n + k)
			return -EINVAL;
	switch (width) {
	case 1:
		insert_u8(src, n, add, k, at, out);
		return n + k;
	case 2:
		insert_u16((const uint16_t *)src, n, (const uint16_t *)add, k, at,
			   (uint16_t *)out);
		return n + k;
	case 4:
		insert_u32((const uint32_t *)src, n, (const uint32_t *)add, k, at,
			   (uint32_t *)out);
		return n + k;
	case 8:
		insert_u64((const uint64_t *)src, n, (const uint64_t *)add, k, at,
			   (uint64_t *)out);
		return n + k;
	}
	for (j = 0; j < k; j++) {
		int64_t run = at[j] - pos;	/* kept rows before this added one */

		memcpy(out + pos * width, src + from * width, (size_t)(run * width));
		memcpy(out + at[j] * width, add + j * width, (size_t)width);
		from += run;
		pos = at[j] + 1;
	}
	memcpy(out + pos * width, src + from * width, (size_t)((n - from) * width));
	return n + k;
}

/*
 * irq_insert_positions - where time ordered rows go into a time ordered column
 * @ts: @n times, nondecreasing
 * @q: @k times to put in, nondecreasing
 * @at: per @q[j], its index in the merged output: after every @ts row at or before its
 *	time (recorded rows first on equal times) and after the @j put in before it
 *
 * One merge pass (numpy's searchsorted() is a binary search per row: 67 ms for 2.3 M rows
 * into 4.1 M). Returns @k, or -EINVAL when @q goes back.
 */
int64_t irq_insert_positions(const int64_t *ts, int64_t n, const int64_t *q, int64_t k,
			     int64_t *at)
{
	int64_t i = 0, j;

	for (j = 0; j < k; j++) {
		if (j && q[j] < q[j - 1])
			return -EINVAL;
		while (i < n && ts[i] <= q[j])
			i++;
		at[j] = i + j;
	}
	return k;
}

/* row_hash - 64-bit hash of a row of @w words and its @extra key */
static inline uint64_t row_hash(const uint64_t *row, int64_t w, uint64_t extra)
{
	uint64_t h = extra * 0x9E3779B97F4A7C15ULL;
	int64_t i;

	for (i = 0; i < w; i++) {
		h ^= row[i];
		h *= 0xBF58476D1CE4E5B9ULL;
		h ^= h >> 31;
	}
	return h;
}

/* grow_slots - a table of twice the slots, the distinct rows rehashed into it */
static int64_t *grow_slots(int64_t *slots, int64_t *mask, const uint64_t *hash_of,
			   int64_t nrep)
{
	int64_t size = 2 * (*mask + 1), i;
	int64_t *fresh = malloc((size_t)size * sizeof(*fresh));

	if (!fresh)
		return NULL;
	for (i = 0; i < size; i++)
		fresh[i] = -1;
	for (i = 0; i < nrep; i++) {
		int64_t s = (int64_t)(hash_of[i] & (uint64_t)(size - 1));

		while (fresh[s] >= 0)
			s = (s + 1) & (size - 1);
		fresh[s] = i;
	}
	free(slots);
	*mask = size - 1;
	return fresh;
}

/*
 * irq_factorize_rows - distinct rows and the code of every row
 * @rows: @n rows of @w 64-bit words
 * @extra: NULL, or one more key per row (rows equal in words but not here differ)
 * @code: per row, the index of its distinct row in @rep
 * @rep: room for @n: the first row of each distinct value, in order of first appearance
 *
 * An open-addressing hash table of the distinct rows (few: handler names), every
 * candidate compared word by word, so the result is exact. Returns the number of
 * distinct rows, or -ENOMEM.
 */
int64_t irq_factorize_rows(const uint64_t *rows, int64_t n, int64_t w, const int64_t *extra,
			   int64_t *code, int64_t *rep)
{
	int64_t mask = 255, nrep = 0, i;
	int64_t *slots = malloc((mask + 1) * sizeof(*slots));
	uint64_t *hash_of = malloc((size_t)(n ? n : 1) * sizeof(*hash_of));

	if (!slots || !hash_of) {
		free(slots);
		free(hash_of);
		return -ENOMEM;
	}
	for (i = 0; i <= mask; i++)
		slots[i] = -1;
	for (i = 0; i < n; i++) {
		const uint64_t *row = rows + i * w;
		uint64_t x = extra ? (uint64_t)extra[i] : 0;
		uint64_t h = row_hash(row, w, x);
		int64_t s = (int64_t)(h & (uint64_t)mask), r;

		for (;;) {
			r = slots[s];
			if (r < 0)
				break;
			if (hash_of[r] == h && (!extra || extra[rep[r]] == extra[i]) &&
			    !memcmp(rows + rep[r] * w, row, (size_t)w * 8))
				break;
			s = (s + 1) & mask;
		}
		if (r < 0) {
			r = nrep++;
			rep[r] = i;
			hash_of[r] = h;
			slots[s] = r;
			if (2 * nrep > mask) {
				slots = grow_slots(slots, &mask, hash_of, nrep);
				if (!slots) {
					free(hash_of);
					return -ENOMEM;
				}
			}
		}
		code[i] = r;
	}
	free(slots);
	free(hash_of);
	return nrep;
}

/*
 * irq_string_rows - each string of a buffer as a zero-padded fixed-width row
 * @buf: @buf_len bytes
 * @start, @len: per string, its first byte and length (at most @width are kept)
 * @width: bytes of each output row (a multiple of 8)
 * @out: @n rows of @width bytes: the string's bytes, then zeros
 *
 * Returns @n, or -ERANGE when a string's kept bytes run past the buffer (the numpy
 * path then clamps and reads, as before).
 */
int64_t irq_string_rows(const uint8_t *buf, int64_t buf_len, const int64_t *start,
			const int64_t *len, int64_t n, int64_t width, uint8_t *out)
{
	int64_t i;

	for (i = 0; i < n; i++) {
		int64_t keep = len[i] < width ? len[i] : width;

		if (start[i] < 0 || keep < 0 || start[i] + width > buf_len)
			return -ERANGE;
		memcpy(out + i * width, buf + start[i], (size_t)keep);
		memset(out + i * width + keep, 0, (size_t)(width - keep));
	}
	return n;
}

/* loc_hash - hash of @len bytes at @p (the kept bytes of a string, trailing zeros cut) */
static uint64_t loc_hash(const uint8_t *p, int64_t len)
{
	uint64_t hash = 0x9E3779B97F4A7C15ULL ^ (uint64_t)len, w;
	int64_t j;

	for (j = 0; j + 8 <= len; j += 8) {
		memcpy(&w, p + j, 8);
		hash ^= w;
		hash *= 0xBF58476D1CE4E5B9ULL;
		hash ^= hash >> 31;
	}
	if (j < len) {
		w = 0;
		memcpy(&w, p + j, (size_t)(len - j));
		hash ^= w;
		hash *= 0xBF58476D1CE4E5B9ULL;
		hash ^= hash >> 31;
	}
	return hash;
}

/*
 * irq_data_loc_rows - the distinct strings of a __data_loc field and each record's code
 * @buf: @buf_len bytes (the pages)
 * @off: per record, its payload's offset in @buf; n of them
 * @field_offset: the field's offset in the payload (its u32: length << 16 | offset)
 * @code: per record, the index of its string's first record among the distinct ones
 * @rows: room for @cap distinct rows of *@wide bytes
 * @width_out: set to the kept width (the longest length, 1 .. 4096) and *@wide to it
 *	rounded up to 8
 *
 * One pass for what ringbuf._strings does through irq_string_rows() and
 * irq_factorize_rows() with numpy in between (the locations, starts and lengths, the
 * n rows of bytes: ~100 MB of new arrays for 2.4 M irq handler names): the same
 * widths, the same zero-padded rows told apart exactly, codes in order of first
 * appearance. Two rows padded with zeros to one width are equal exactly when their
 * bytes are with the trailing zeros cut, so strings are told apart that way as they
 * come, and the width is known at the end: one read of each record (they lie all over
 * the pages: a second pass for the width first cost as much again, ~70 ms for 2.2 M).
 * Returns the number of distinct rows, -ERANGE when a location or a kept string lies
 * past the buffer (as irq_string_rows(): the caller takes its numpy path), -ENOSPC past
 * @cap distinct rows, -ENOMEM.
 */
int64_t irq_data_loc_rows(const uint8_t *buf, int64_t buf_len, const int64_t *off, int64_t n,
			  int64_t field_offset, int64_t *code, uint8_t *rows, int64_t cap,
			  int64_t *width_out, int64_t *wide_out)
{
	int64_t i, maxlen = 0, max_start = 0, width, wide, k = 0, mask = 1, r = 0;
	int64_t *slot = NULL, *rep_start = NULL, *rep_len = NULL;

	while (mask + 1 < 2 * cap)
		mask = 2 * mask + 1;
	slot = malloc((size_t)(mask + 1) * sizeof(*slot));
	rep_start = malloc((size_t)(cap ? cap : 1) * sizeof(*rep_start));
	rep_len = malloc((size_t)(cap ? cap : 1) * sizeof(*rep_len));
	if (!slot || !rep_start || !rep_len) {
		r = -ENOMEM;
		goto out;
	}
	memset(slot, 0xff, (size_t)(mask + 1) * sizeof(*slot));	/* all -1: empty */
	for (i = 0; i < n; i++) {
		int64_t at = off[i] + field_offset, start, len, h;
		uint32_t loc;

		if (off[i] < 0 || at < 0 || at + 4 > buf_len) {
			r = -ERANGE;
			goto out;
		}
		memcpy(&loc, buf + at, 4);
		start = off[i] + (loc & 0xFFFF);
		if ((int64_t)(loc >> 16) > maxlen)
			maxlen = loc >> 16;
		if (start > max_start)
			max_start = start;
		len = (int64_t)(loc >> 16) < 4096 ? (int64_t)(loc >> 16) : 4096;
		if (start + len > buf_len) {
			r = -ERANGE;
			goto out;
		}
		while (len > 0 && !buf[start + len - 1])
			len--;
		/* runs of one interrupt's records: the previous record's string first */
		if (i && rep_len[code[i - 1]] == len &&
		    !memcmp(buf + rep_start[code[i - 1]], buf + start, (size_t)len)) {
			code[i] = code[i - 1];
			continue;
		}
		for (h = (int64_t)(loc_hash(buf + start, len) & (uint64_t)mask);;
		     h = (h + 1) & mask) {
			int64_t s = slot[h];

			if (s < 0) {
				if (k == cap) {
					r = -ENOSPC;
					goto out;
				}
				rep_start[k] = start;
				rep_len[k] = len;
				slot[h] = k;
				code[i] = k++;
				break;
			}
			if (rep_len[s] == len && !memcmp(buf + rep_start[s], buf + start,
							 (size_t)len)) {
				code[i] = s;
				break;
			}
		}
	}
	width = maxlen < 1 ? 1 : maxlen > 4096 ? 4096 : maxlen;
	wide = (width + 7) / 8 * 8;
	*width_out = width;
	*wide_out = wide;
	if (n && max_start + wide > buf_len) {	/* a padded row would read past the pages */
		r = -ERANGE;
		goto out;
	}
	for (i = 0; i < k; i++) {
		memcpy(rows + i * wide, buf + rep_start[i], (size_t)rep_len[i]);
		memset(rows + i * wide + rep_len[i], 0, (size_t)(wide - rep_len[i]));
	}
	r = k;
out:
	free(slot);
	free(rep_start);
	free(rep_len);
	return r;
}

/*
 * struct tl_input - the switch and waking columns thread_timelines() reads
 *
 * Switches (completed: time ordered): @sw_inferred may be NULL (none inferred).
 * Wakings: @wk_n may be 0 (then their columns are not read).
 */
struct tl_input {
	const int64_t *sw_ts;
	const uint16_t *sw_cpu;
	const int32_t *sw_prev;
	const int32_t *sw_next;
	const int64_t *sw_prev_state;
	const uint8_t *sw_inferred;
	const int64_t *sw_ts_max;
	int64_t sw_n;
	const int64_t *wk_ts;
	const int32_t *wk_pid;
	const int32_t *wk_target_cpu;
	const int32_t *wk_waker;
	int64_t wk_n;
	int64_t end_ts;
};

/* struct tl_output - one thread's segments (NULL columns: only count them) */
struct tl_output {
	int64_t *start;
	int64_t *end;
	int8_t *state;
	int64_t *cpu;
	int64_t *waker;
	int64_t *end_max;
	int64_t cap;
};

/* struct tl_event - one event of the thread: a switch out (0) or in (1), or a waking (2) */
struct tl_event {
	int64_t ts, tmax, cpu, arg;
	int kind, state;
};

/* struct tl_cursor - a walk over one part's rows that concern the thread */
struct tl_cursor {
	int64_t at;		/* the current matching row, or n when none is left */
	int64_t last_ts;	/* time of the previous match (the part must be in order) */
};

/* state_after_out - the state a thread enters at switch row @i, from its prev_state */
static int state_after_out(const struct tl_input *in, int64_t i)
{
	int64_t arg = in->sw_prev_state[i];

	if ((in->sw_inferred && in->sw_inferred[i]) || arg == PREV_STATE_UNKNOWN)
		return ST_UNKNOWN;
	if (!(arg & 0xFF))
		return ST_RUNNABLE;
	return (arg & STOP_BITS) ? ST_STOPPED : ST_SLEEPING;
}

/* next_match - advance @c to the next row from @from whose @col is @tid */
static void next_match(struct tl_cursor *c, const int32_t *col, int64_t n, int64_t from,
		       int64_t tid)
{
	while (from < n && col[from] != tid)
		from++;
	c->at = from;
}

/* take_event - the row of part @kind under its cursor as an event */
static void take_event(const struct tl_input *in, int kind, int64_t i, struct tl_event *e)
{
	e->kind = kind;
	e->arg = 0;
	if (kind == 2) {
		e->ts = e->tmax = in->wk_ts[i];
		e->cpu = in->wk_target_cpu[i];
		e->arg = in->wk_waker[i];
		e->state = ST_RUNNABLE;
		return;
	}
	e->ts = in->sw_ts[i];
	e->tmax = in->sw_ts_max[i];
	e->cpu = in->sw_cpu[i];
	e->state = kind == 0 ? state_after_out(in, i) : ST_RUNNING;
}

/* put_segment - write segment @p (ended by @nx, or by the capture's end when NULL) */
static int64_t put_segment(struct tl_output *o, int64_t row, const struct tl_event *p,
			   const struct tl_event *nx, int64_t end_ts)
{
	int state = p->state;
	int64_t cpu = p->cpu;

	if (!o->start)
		return 0;
	if (row >= o->cap)
		return -ENOSPC;
	if (nx && state == ST_UNKNOWN && nx->kind == 2)
		state = ST_SLEEPING;
	if (nx && state == ST_UNKNOWN && nx->kind == 1)
		state = ST_RUNNABLE;
	if (nx && state == ST_RUNNABLE && nx->kind == 1)
		cpu = nx->cpu;
	o->start[row] = p->ts;
	o->end[row] = nx ? nx->ts : (end_ts > p->ts ? end_ts : p->ts);
	o->end_max[row] = nx ? nx->tmax : (end_ts > p->ts ? end_ts : p->ts);
	o->state[row] = (int8_t)state;
	o->cpu[row] = cpu;
	o->waker[row] = nx && nx->kind == 2 ? nx->arg : -1;
	return 0;
}

/*
 * irq_thread_timeline - one thread's states from the switches and wakings
 * @in: the columns
 * @tid: the thread
 * @out: its segments (or NULL columns: only count)
 *
 * The thread's switch-outs, switch-ins and wakings merged by time (equal times: out,
 * in, waking, each in table order: the numpy path's stable sort), then one pass: every
 * switch starts a segment; a waking starts one only as the thread's first event or
 * right after a switch out into a sleeping, stopped or unknown state. A segment ends at
 * the next one's start (an unknown state becomes sleeping when a waking ends it,
 * runnable when a switch-in does; runnable ended by a switch-in is charged to that CPU).
 * Returns the segment count, -EDOM when a part's times go back (the caller sorts, as
 * numpy does), or -ENOSPC.
 */
int64_t irq_thread_timeline(const struct tl_input *in, int64_t tid, struct tl_output *out)
{
	struct tl_cursor c[3];
	const int32_t *col[3] = { in->sw_prev, in->sw_next, in->wk_pid };
	const int64_t *tcol[3] = { in->sw_ts, in->sw_ts, in->wk_ts };
	int64_t lim[3] = { in->sw_n, in->sw_n, in->wk_n };
	struct tl_event ev, pend;
	int64_t rows = 0, events = 0, r;
	int have = 0, prev_kind = -1, prev_state = 0, k;

	if (tid < INT32_MIN || tid > INT32_MAX)
		return 0;		/* no pid column can hold it */
	for (k = 0; k < 3; k++) {
		next_match(&c[k], col[k], lim[k], 0, tid);
		c[k].last_ts = INT64_MIN;
	}
	for (;;) {
		int best = -1;

		for (k = 0; k < 3; k++)
			if (c[k].at < lim[k] && (best < 0 ||
			    tcol[k][c[k].at] < tcol[best][c[best].at]))
				best = k;
		if (best < 0)
			break;
		if (tcol[best][c[best].at] < c[best].last_ts)
			return -EDOM;
		c[best].last_ts = tcol[best][c[best].at];
		take_event(in, best, c[best].at, &ev);
		next_match(&c[best], col[best], lim[best], c[best].at + 1, tid);
		/* a waking counts only first, or right after a switch out it can end */
		if (ev.kind == 2 && events &&
		    !(prev_kind == 0 && prev_state != ST_RUNNABLE && prev_state != ST_RUNNING))
			goto next;
		if (have) {
			r = put_segment(out, rows++, &pend, &ev, in->end_ts);
			if (r < 0)
				return r;
		}
		pend = ev;
		have = 1;
next:
		events++;
		prev_kind = ev.kind;
		prev_state = ev.state;
	}
	if (have) {
		r = put_segment(out, rows++, &pend, NULL, in->end_ts);
		if (r < 0)
			return r;
	}
	return rows;
}

/*
 * irq_pair_intervals - entry/exit pairs per CPU, for time-ordered entries and exits
 * @ts_in, @cpu_in: @n_in entries (time ordered)
 * @ts_out, @cpu_out: @n_out exits (time ordered)
 * @ncpu: CPU numbers are below it
 * @next_exit: scratch, @n_out entries
 * @cpu_at: per CPU, where its pairs start in the outputs (its entries before it in
 *	CPU order); set here, @ncpu + 1 entries
 * @npairs: per CPU, its pairs (@ncpu entries)
 * @start, @end, @entry: room for @n_in: each pair's entry time, exit time and entry
 *	index, CPU after CPU, each CPU's in entry order
 *
 * An entry pairs with the first exit of its CPU at or after it (in the merged order,
 * entries first on equal times) unless the CPU's next entry comes first. Returns the
 * number of pairs, or -EINVAL on a CPU number >= @ncpu.
 */
int64_t irq_pair_intervals(const int64_t *ts_in, const uint16_t *cpu_in, int64_t n_in,
			   const int64_t *ts_out, const uint16_t *cpu_out, int64_t n_out,
			   int64_t ncpu, int64_t *next_exit, int64_t *cpu_at, int64_t *npairs,
			   int64_t *start, int64_t *end, int64_t *entry)
{
	int64_t *cur = calloc((size_t)(3 * ncpu + 1), sizeof(*cur));
	int64_t *pend, *pend_si, i, c, total = 0;

	if (!cur)
		return -ENOMEM;
	pend = cur + ncpu;		/* per CPU: its last entry not yet paired, or -1 */
	pend_si = pend + ncpu;		/* and that entry's exit position */
	for (c = 0; c < ncpu; c++) {
		cur[c] = -1;
		pend[c] = -1;
		npairs[c] = 0;
		cpu_at[c] = 0;
	}
	cpu_at[ncpu] = 0;
	for (i = 0; i < n_in; i++) {
		if (cpu_in[i] >= ncpu)
			goto bad;
		cpu_at[cpu_in[i] + 1]++;
	}
	for (c = 0; c < ncpu; c++)
		cpu_at[c + 1] += cpu_at[c];
	/* each exit's next exit of the same CPU; cur[c]: the CPU's first one */
	for (i = n_out - 1; i >= 0; i--) {
		if (cpu_out[i] >= ncpu)
			goto bad;
		next_exit[i] = cur[cpu_out[i]];
		cur[cpu_out[i]] = i;
	}
	for (i = 0; i < n_in; i++) {
		int64_t k = cpu_in[i], x = cur[k];

		/* the CPU's exits strictly before this entry are passed */
		while (x >= 0 && ts_out[x] < ts_in[i])
			x = next_exit[x];
		cur[k] = x;
		if (pend[k] >= 0 && pend_si[k] != x) {
			int64_t row = cpu_at[k] + npairs[k]++;

			start[row] = ts_in[pend[k]];
			end[row] = ts_out[pend_si[k]];
			entry[row] = pend[k];
			total++;
		}
		pend[k] = x >= 0 ? i : -1;
		pend_si[k] = x;
	}
	for (c = 0; c < ncpu; c++) {
		if (pend[c] < 0)
			continue;
		i = cpu_at[c] + npairs[c]++;
		start[i] = ts_in[pend[c]];
		end[i] = ts_out[pend_si[c]];
		entry[i] = pend[c];
		total++;
	}
	free(cur);
	return total;
bad:
	free(cur);
	return -EINVAL;
}
