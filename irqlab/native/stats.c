// SPDX-License-Identifier: Apache-2.0
/*
 * stats.c - host-side fast path of irqlab's streaming statistics (irqlab/stats/).
 *
 * One sequential pass over a batch of (deadline, latency) ticks computes what the numpy
 * reference (irqlab/stats/segments.py reduce_segments() + histogram.py LogHistogram.add())
 * computes with a dozen whole-array passes and temporaries: per guest-time window the
 * sample count, exact sum and sum of squares, min, max and count above the threshold,
 * and the log-linear histogram tally of every latency. A latency below the valid
 * minimum (a run's: 0, an ISR entered before its deadline) is no latency: it is only
 * counted as invalid in its window, and left out of every other figure and the tally.
 * Loaded with ctypes by
 * irqlab/stats/native.py; the results must equal the numpy path's (tests compare them).
 *
 * Exactness: |v| <= 2^63, so a window's sum fits in an __int128 for any count below
 * 2^63; a square is < 2^126, so sums of squares are kept in 192 bits (an unsigned
 * __int128 plus a 64-bit carry word).
 *
 * Histogram layout: HdrHistogram's log-linear buckets (Gil Tene, http://hdrhistogram.org)
 * on w = v + 2^P, as documented in irqlab/stats/histogram.py:
 *	index = (E - P) * 2^P + (w >> (E - P)) - 2^P,  E = floor(log2(w)).
 *
 * Return convention: >= 0 (a count) on success, -errno on failure.
 */
#include <errno.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

/* The block kernels below are plain loops written for gcc's vectorizer (-O3 level). */
#pragma GCC optimize("O3")

/* Parameter slots of irq_stats_reduce()'s @params array. */
enum {
	PARAM_ORIGIN_TICK,
	PARAM_WINDOW_TICK,
	PARAM_THRESHOLD_TICK,
	PARAM_PRECISION_BITS,
	PARAM_MAX_VALUE_BITS,
	PARAM_VALID_MIN_TICK,	/* latencies below it are invalid (INT64_MIN: none) */
	PARAM_COUNT,
};

/* Rows of irq_stats_reduce()'s @seg output (each @max_segments long). */
enum {
	SEG_INDEX,
	SEG_COUNT,
	SEG_MIN,
	SEG_MAX,
	SEG_ABOVE,
	SEG_S1_LO,	/* sum, two's complement __int128: low word */
	SEG_S1_HI,	/* high word */
	SEG_S2_LO,	/* sum of squares, unsigned 192 bits: low word */
	SEG_S2_MID,
	SEG_S2_HI,
	SEG_INVALID,	/* samples below the valid minimum, in no other row */
	SEG_ROWS,
};

/* struct seg_acc - the window being reduced (min INT64_MAX, max INT64_MIN while
 * count is 0: a window of invalid samples only is stored so) */
struct seg_acc {
	int64_t index;
	int64_t count;
	int64_t invalid;
	int64_t min;
	int64_t max;
	int64_t above;
	__int128 s1;
	unsigned __int128 s2;
	uint64_t s2_carry;
};

/* seg_store - write accumulator @a as segment @k of the @max_segments-long rows */
static void seg_store(const struct seg_acc *a, int64_t *seg, int64_t max_segments,
		      int64_t k)
{
	int64_t *row = seg + k;

	row[SEG_INDEX * max_segments] = a->index;
	row[SEG_COUNT * max_segments] = a->count;
	row[SEG_MIN * max_segments] = a->min;
	row[SEG_MAX * max_segments] = a->max;
	row[SEG_ABOVE * max_segments] = a->above;
	row[SEG_S1_LO * max_segments] = (int64_t)(uint64_t)a->s1;
	row[SEG_S1_HI * max_segments] = (int64_t)(a->s1 >> 64);
	row[SEG_S2_LO * max_segments] = (int64_t)(uint64_t)a->s2;
	row[SEG_S2_MID * max_segments] = (int64_t)(uint64_t)(a->s2 >> 64);
	row[SEG_S2_HI * max_segments] = (int64_t)a->s2_carry;
	row[SEG_INVALID * max_segments] = a->invalid;
}

/* seg_start - reset accumulator @a for window @index */
static inline void seg_start(struct seg_acc *a, int64_t index)
{
	a->index = index;
	a->count = 0;
	a->invalid = 0;
	a->min = INT64_MAX;
	a->max = INT64_MIN;
	a->above = 0;
	a->s1 = 0;
	a->s2 = 0;
	a->s2_carry = 0;
}

/* Vectorized copies for x86-64-v3 hosts (AVX2, LZCNT), picked at load time by ifunc. */
#if defined(__x86_64__) && defined(__GNUC__)
#define FAST_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define FAST_CLONES
#endif

/* Tally slot of bucket 0; slot 0 counts values below 0 (as histogram.py's codes). */
#define SLOT_OFFSET	2

/* Samples per block: sums of 1024 values below 2^26 and their squares fit in int64. */
#define BLOCK_LEN	1024
#define SMALL_BOUND	(1LL << 26)

/* struct block_sums - one block's reductions; s1/s2 wrap unless the block is small */
struct block_sums {
	int64_t min;
	int64_t max;
	int64_t above;
	uint64_t s1;
	uint64_t s2;	/* of the low 32 bits of |v|: exact only when |v| < SMALL_BOUND */
};

/* block_scan - reductions of @n values in one vectorizable pass */
FAST_CLONES
static void block_scan(const int64_t *v, int64_t n, int64_t threshold_tick,
		       struct block_sums *out)
{
	int64_t lo = v[0], hi = v[0], above = 0, i;
	uint64_t s1 = 0, s2 = 0;

	for (i = 0; i < n; i++) {
		const uint64_t sign = (uint64_t)(v[i] >> 63);
		const uint32_t m = (uint32_t)(((uint64_t)v[i] ^ sign) - sign);	/* |v| */

		lo = v[i] < lo ? v[i] : lo;
		hi = v[i] > hi ? v[i] : hi;
		above += v[i] > threshold_tick;
		s1 += (uint64_t)v[i];
		s2 += (uint64_t)m * m;
	}
	out->min = lo;
	out->max = hi;
	out->above = above;
	out->s1 = s1;
	out->s2 = s2;
}

/* s2_add - add a square (or a sum of squares) @sq to @a's 192-bit sum of squares */
static inline void s2_add(struct seg_acc *a, unsigned __int128 sq)
{
	a->s2 += sq;
	a->s2_carry += a->s2 < sq;
}

/* block_fold - add one block's reductions @bs of its @n values @v to accumulator @a */
static inline void block_fold(const struct block_sums *bs, const int64_t *v, int64_t n,
			      struct seg_acc *a)
{
	int64_t i;

	a->count += n;
	a->min = bs->min < a->min ? bs->min : a->min;
	a->max = bs->max > a->max ? bs->max : a->max;
	a->above += bs->above;
	if (bs->min > -SMALL_BOUND && bs->max < SMALL_BOUND) {
		/* no wrap-around: n * 2^26 and n * 2^52 are below 2^63 */
		a->s1 += (int64_t)bs->s1;
		s2_add(a, bs->s2);
		return;
	}
	for (i = 0; i < n; i++) {
		a->s1 += v[i];
		s2_add(a, (unsigned __int128)((__int128)v[i] * v[i]));
	}
}

/*
 * keep_valid - copy the values of @v[0..n) not below @valid_min into @kept; returns
 * how many (the rare path: out of line, so the common one stays tight)
 */
static __attribute__((noinline)) int64_t keep_valid(const int64_t *v, int64_t n,
						    int64_t valid_min, int64_t *kept)
{
	int64_t i, m = 0;

	for (i = 0; i < n; i++)
		if (v[i] >= valid_min)
			kept[m++] = v[i];
	return m;
}

/* struct hist_layout - LogHistogram's bucket layout (irqlab/stats/histogram.py) */
struct hist_layout {
	int p;				/* precision bits */
	int64_t max_trackable;		/* largest value of the last regular bucket */
};

/* 2^52 as a double: OR-ing an integer below 2^52 into its mantissa and subtracting it
 * converts the integer to double exactly, in vector registers (AVX2 has no int64 ->
 * double conversion). */
#define F64_TWO_52_BITS	0x4330000000000000ULL
#define F64_TWO_52	4503599627370496.0

/* block_slots - tally slot of each of @n values: the float64 bucket trick of
 * histogram.py's LogHistogram._codes(), values clipped to [-1, max_trackable + 1]
 * so that underflow lands on slot 0 and overflow on slot n_buckets + 2 */
FAST_CLONES
static void block_slots(const int64_t *v, int64_t n, const struct hist_layout *lay,
			int64_t *slot)
{
	const int p = lay->p;
	const int64_t top = lay->max_trackable + 1;
	const int64_t bias = ((int64_t)(1023 + p) << p) - SLOT_OFFSET;
	int64_t i;

	for (i = 0; i < n; i++) {
		int64_t c = v[i] < -1 ? -1 : v[i] > top ? top : v[i];
		uint64_t w = (uint64_t)(c + (1LL << p)) | F64_TWO_52_BITS;
		double f;
		int64_t bits;

		memcpy(&f, &w, sizeof(f));
		f -= F64_TWO_52;
		memcpy(&bits, &f, sizeof(bits));
		slot[i] = (bits >> (52 - p)) - bias;
	}
}

/* hist_tally - add @n values to @hist (SLOT_OFFSET layout: see irq_stats_reduce()) */
static void hist_tally(const int64_t *v, int64_t n, const struct hist_layout *lay,
		       int64_t *hist)
{
	int64_t slot[BLOCK_LEN], i;

	block_slots(v, n, lay, slot);
	for (i = 0; i < n; i++)
		hist[slot[i]]++;
}

/* window_of - window index of @deadline_tick, or -EDOM (before origin) / -ERANGE */
static inline int64_t window_of(int64_t deadline_tick, int64_t origin_tick,
				int64_t window_tick)
{
	__int128 rel = (__int128)deadline_tick - origin_tick;

	if (rel < 0)
		return -EDOM;
	rel /= window_tick;
	if (rel > INT64_MAX)
		return -ERANGE;
	return (int64_t)rel;
}

/* block_in_window - whether all @n deadlines lie in [@low_tick, @last_tick] */
FAST_CLONES
static int block_in_window(const int64_t *d, int64_t n, int64_t low_tick, int64_t last_tick)
{
	int64_t outside = 0, i;

	for (i = 0; i < n; i++)
		outside |= (d[i] < low_tick) | (d[i] > last_tick);
	return !outside;
}

/*
 * window_end - for deadlines sorted from @start on, the index of the first one in
 * [@start, @n) above @last_tick, else @n; in any order an index whose deadline is above
 * @last_tick (or @n), with every deadline before it not above (binary search invariant)
 */
static int64_t window_end(const int64_t *d, int64_t start, int64_t n, int64_t last_tick)
{
	int64_t lo = start, hi = n;

	while (lo < hi) {
		const int64_t mid = lo + (hi - lo) / 2;

		if (d[mid] <= last_tick)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* window_span - first and last deadline of window @w, clamped to the int64 range */
static void window_span(int64_t origin_tick, int64_t window_tick, int64_t w,
			int64_t *low_tick, int64_t *last_tick)
{
	const __int128 low = (__int128)origin_tick + (__int128)w * window_tick;
	const __int128 last = low + window_tick - 1;

	*low_tick = low < INT64_MIN ? INT64_MIN : low > INT64_MAX ? INT64_MAX : (int64_t)low;
	*last_tick = last > INT64_MAX ? INT64_MAX : (int64_t)last;
}

/*
 * irq_stats_reduce - per-window reductions and histogram tally of one batch
 * @deadline_tick: n deadlines, in non-decreasing window order; NULL: all in window 0
 * @latency_tick: n latencies
 * @n: samples in the batch (> 0)
 * @params: origin, window, threshold ticks, histogram precision and max value bits,
 *	    valid minimum latency (see the top comment)
 * @hist: NULL, or the tally, added to: [underflow, unused, bucket 0 .. nb-1, overflow]
 * @max_segments: length of each row of @seg (at most this many windows are touched)
 * @seg: SEG_ROWS rows of @max_segments int64 (see the SEG_* enum)
 *
 * Returns the number of (non-empty, increasing) windows written to @seg (a window of
 * invalid samples only has count 0, min INT64_MAX, max INT64_MIN); -EDOM when a
 * deadline precedes the origin, -EINVAL when the window index goes back, -ENOSPC when
 * more than @max_segments windows are touched, -ERANGE on an unrepresentable index.
 * On error @hist may be partly updated: callers pass a scratch tally.
 */
int64_t irq_stats_reduce_valid(const int64_t *deadline_tick, const int64_t *latency_tick,
			       int64_t n, const int64_t *params, int64_t *hist,
			       int64_t max_segments, int64_t *seg)
{
	const int64_t origin_tick = params[PARAM_ORIGIN_TICK];
	const int64_t window_tick = params[PARAM_WINDOW_TICK];
	const int64_t threshold_tick = params[PARAM_THRESHOLD_TICK];
	const int p = (int)params[PARAM_PRECISION_BITS];
	const int b = (int)params[PARAM_MAX_VALUE_BITS];
	const int64_t valid_min = params[PARAM_VALID_MIN_TICK];
	int64_t kept[BLOCK_LEN];
	struct hist_layout lay;
	struct seg_acc a;
	int64_t low_tick, last_tick;	/* deadlines of the current window */
	int64_t nseg = 0, start = 0, w;

	if (n <= 0 || window_tick <= 0 || max_segments <= 0 || p < 1 || p > 16 ||
	    b <= p || b > 52)
		return -EINVAL;
	lay.p = p;
	lay.max_trackable = (1LL << b) - (1LL << p) - 1;
	w = deadline_tick ? window_of(deadline_tick[0], origin_tick, window_tick) : 0;
	if (w < 0)
		return w;
	seg_start(&a, w);
	window_span(origin_tick, window_tick, w, &low_tick, &last_tick);
	while (start < n) {
		/* Where the current window ends (guessed for sorted deadlines, then checked). */
		int64_t end = deadline_tick ? window_end(deadline_tick, start, n, last_tick) : n;

		while (start < end) {
			int64_t stop = start + BLOCK_LEN < end ? start + BLOCK_LEN : end;

			if (deadline_tick && !block_in_window(deadline_tick + start,
							      stop - start, low_tick, last_tick)) {
				/* Unsorted deadlines: the window ends earlier. */
				end = start;
				while (end < stop && deadline_tick[end] >= low_tick &&
				       deadline_tick[end] <= last_tick)
					end++;
				stop = end;
				if (stop == start)
					break;
			}
			{
				const int64_t *v = latency_tick + start;
				int64_t m = stop - start;
				struct block_sums bs;

				block_scan(v, m, threshold_tick, &bs);
				if (bs.min < valid_min) {
					/* invalid values (the block's min says so for free) */
					m = keep_valid(v, m, valid_min, kept);
					a.invalid += stop - start - m;
					v = kept;
					if (m)
						block_scan(v, m, threshold_tick, &bs);
				}
				if (m) {
					block_fold(&bs, v, m, &a);
					if (hist)
						hist_tally(v, m, &lay, hist);
				}
			}
			start = stop;
		}
		if (start >= n)
			break;
		/* deadline_tick[start] leaves the current window. */
		w = window_of(deadline_tick[start], origin_tick, window_tick);
		if (w < 0)
			return w;
		if (w < a.index)
			return -EINVAL;
		if (nseg + 1 >= max_segments)
			return -ENOSPC;
		seg_store(&a, seg, max_segments, nseg++);
		seg_start(&a, w);
		window_span(origin_tick, window_tick, w, &low_tick, &last_tick);
	}
	seg_store(&a, seg, max_segments, nseg++);
	return nseg;
}
