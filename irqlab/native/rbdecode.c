// SPDX-License-Identifier: Apache-2.0
/*
 * rbdecode.c - host-side fast path of irqlab's ftrace ring-buffer decoder.
 *
 * The numpy decoder in irqlab/trace/ringbuf.py is the reference and the fallback; this
 * library does the same work in one sequential pass per page so a 1 GiB capture is read
 * once and every output array is written once (on a VM, first writes to fresh memory
 * cost more than the decoding itself). Loaded with ctypes by irqlab/trace/native.py;
 * results must be identical to the numpy path (tests compare them on real captures).
 *
 * Page and record layout: Linux kernel/trace/ring_buffer.c (rb_event_length(),
 * rb_update_read_stamp(), rb_fix_abs_ts(), ring_buffer_read_page()), described by the
 * running kernel's events/header_page and events/header_event.
 *
 * Return convention: >= 0 (a count) on success, -errno on failure.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TYPE_DATA_MAX		28
#define TYPE_PADDING		29
#define TYPE_TIME_EXTEND	30
#define TYPE_TIME_STAMP		31
#define TS_SHIFT		27
#define ABS_TS_MASK		((1ULL << 59) - 1)
#define RB_MISSED_EVENTS	(1ULL << 31)
#define RB_MISSED_STORED	(1ULL << 30)
#define COMMIT_MASK		(RB_MISSED_STORED - 1)

/* struct rb_page_layout - where the stamp, commit word and data sit in a page */
struct rb_page_layout {
	int64_t page_size;
	int64_t ts_offset;
	int64_t commit_offset;
	int64_t data_offset;
	int64_t data_size;
};

/* load_u32 - little-endian 32-bit word at @p (pages are host-endian; hosts here are LE) */
static inline uint32_t load_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* load_u64 - 64-bit word at @p, any alignment */
static inline uint64_t load_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* fix_abs_ts - an absolute stamp's 59 bits completed from the running stamp @now */
static inline uint64_t fix_abs_ts(uint64_t stamp, uint64_t now)
{
	uint64_t val = stamp & ABS_TS_MASK;
	uint64_t msb = now & ~ABS_TS_MASK;

	val |= msb;
	if (msb && val < now)
		val += 1ULL << 59;
	return val;
}

/* layout_ok - a page layout this decoder can read */
static int layout_ok(const struct rb_page_layout *lay)
{
	return !(lay->data_offset % 4 || lay->data_size < 8 ||
		 lay->page_size < lay->data_offset + lay->data_size ||
		 lay->ts_offset + 8 > lay->page_size || lay->commit_offset + 8 > lay->page_size);
}

/*
 * decode_page - the data records of one page
 * @page: the page
 * @lay: page layout
 * @page_off: the page's offset in the shared buffer (payload offsets are relative to it)
 * @ts_out, @type_out, @off_out: NULL (count only), or room for data_size / 8 records
 * @missed: set to -2 when the page follows no lost events, else the lost count (-1:
 *	unknown)
 *
 * Returns the number of data records.
 */
static int64_t decode_page(const uint8_t *page, const struct rb_page_layout *lay,
			   int64_t page_off, uint64_t *ts_out, uint16_t *type_out,
			   int64_t *off_out, int64_t *missed)
{
	const int64_t nwords = lay->data_size / 4;
	const uint8_t *data = page + lay->data_offset;
	uint64_t commit = load_u64(page + lay->commit_offset);
	uint64_t now = load_u64(page + lay->ts_offset);
	int64_t used = (int64_t)(commit & COMMIT_MASK);
	int64_t limit, c = 0, n = 0;

	if (used > lay->data_size)
		used = lay->data_size;
	*missed = -2;
	if (commit & RB_MISSED_EVENTS) {
		*missed = -1;
		if ((commit & RB_MISSED_STORED) && used + 8 <= lay->data_size)
			*missed = (int64_t)load_u64(data + used);
	}
	limit = used / 4;
	while (c < limit) {
		uint32_t w = load_u32(data + 4 * c);
		uint32_t tl = w & 31, delta = w >> 5;
		/* array[0]: the word after the header (clamped to the page's last word) */
		int64_t at0 = c + 1 < nwords ? c + 1 : nwords - 1;
		uint64_t a0 = load_u32(data + 4 * at0);
		int64_t len;

		if (tl == 0 || (tl == TYPE_PADDING && delta)) {
			/* rb_event_length(): array[0] bytes follow the header */
			uint64_t bytes = a0 < (uint64_t)(4 * nwords) ? a0 : (uint64_t)(4 * nwords);

			len = 1 + (int64_t)((bytes + 3) / 4);
		} else if (tl >= TYPE_TIME_EXTEND) {
			len = 2;
		} else {
			len = tl + 1;
		}
		if (tl <= TYPE_DATA_MAX) {
			int64_t pay = 4 * (c + 1) + (tl == 0 ? 4 : 0);

			now += delta;
			if (pay + 2 > lay->data_size)
				break;		/* a record cut by the page end */
			if (ts_out) {
				ts_out[n] = now;
				type_out[n] = (uint16_t)(data[pay] | data[pay + 1] << 8);
				off_out[n] = page_off + lay->data_offset + pay;
			}
			n++;
		} else if (tl == TYPE_TIME_EXTEND) {
			now += (a0 << TS_SHIFT) + delta;
		} else if (tl == TYPE_TIME_STAMP) {
			now = fix_abs_ts((a0 << TS_SHIFT) | delta, now);
		} else if (!delta) {
			break;			/* null padding: rest of the page is empty */
		}
		c += len;
	}
	return n;
}

/*
 * struct rb_runs - where a CPU's records go back in time, found while decoding
 *
 * Each record stamped earlier than the one before it starts a new sorted run: its page
 * (index in the decoded pages), the records of that page before it and its index among
 * all decoded records. Up to @cap are stored, @n counts them all (past @cap: call again
 * with more room). @first and @last: the first and last record's time (any records).
 */
struct rb_runs {
	int64_t *page;
	int64_t *skip;
	int64_t *rec;
	int64_t cap;
	int64_t n;
	uint64_t first;
	uint64_t last;
};

/* note_run - store one run start (page @p, @skip records into it, record @rec) */
static void note_run(struct rb_runs *runs, int64_t p, int64_t skip, int64_t rec)
{
	if (runs->n < runs->cap) {
		runs->page[runs->n] = p;
		runs->skip[runs->n] = skip;
		runs->rec[runs->n] = rec;
	}
	runs->n++;
}

/* note_runs - note the backward steps of one page's @got records (page @p, first @n) */
static void note_runs(struct rb_runs *runs, const uint64_t *ts, int64_t got, int64_t p,
		      int64_t n)
{
	int64_t i;

	if (!n)
		runs->first = ts[0];
	else if (ts[0] < runs->last)
		note_run(runs, p, 0, n);
	for (i = 1; i < got; i++)
		if (ts[i] < ts[i - 1])
			note_run(runs, p, i, n + i);
	runs->last = ts[got - 1];
}

/*
 * irq_rb_decode - decode whole pages of one CPU
 * @buf: the pages (npages * page_size bytes)
 * @npages: page count
 * @lay: page layout
 * @base: added to every payload offset (the pages' position in a shared buffer)
 * @ts_out, @type_out, @off_out: one entry per data record, in page order; all NULL to
 *	only count
 * @cap: room in the three output arrays
 * @miss_ts, @miss_count, @miss_cap: pages flagged with lost events (count -1 = unknown)
 * @nmiss: set to the number of flagged pages (may exceed @miss_cap: then call again)
 * @type_count: NULL, or 65536 counters to which each record's event type is added
 * @runs: NULL, or where the records' stamps go back (see struct rb_runs)
 *
 * Returns the number of data records, -ENOSPC when @cap is too small, -EINVAL on a
 * layout the decoder cannot read.
 */
int64_t irq_rb_decode(const uint8_t *buf, int64_t npages, const struct rb_page_layout *lay,
		      int64_t base, uint64_t *ts_out, uint16_t *type_out, int64_t *off_out,
		      int64_t cap, uint64_t *miss_ts, int64_t *miss_count, int64_t miss_cap,
		      int64_t *nmiss, int64_t *type_count, struct rb_runs *runs)
{
	const int64_t per_page = lay->data_size / 8 + 1;
	uint64_t *pts = NULL;
	uint16_t *pty = NULL;
	int64_t *poff = NULL;
	int64_t n = 0, p, r = 0;

	if (!layout_ok(lay))
		return -EINVAL;
	if (!ts_out && (type_count || runs)) {
		/* counting types (or runs) needs them: decode each page into a scratch page */
		pts = malloc(per_page * sizeof(*pts));
		pty = malloc(per_page * sizeof(*pty));
		poff = malloc(per_page * sizeof(*poff));
		if (!pts || !pty || !poff) {
			r = -ENOMEM;
			goto out;
		}
	}
	*nmiss = 0;
	if (runs)
		runs->n = 0;
	for (p = 0; p < npages; p++) {
		const uint8_t *page = buf + p * lay->page_size;
		int64_t missed, got, i;

		if (ts_out && n + per_page > cap) {
			r = -ENOSPC;
			goto out;
		}
		got = decode_page(page, lay, base + p * lay->page_size,
				  ts_out ? ts_out + n : pts, ts_out ? type_out + n : pty,
				  ts_out ? off_out + n : poff, &missed);
		if (missed != -2) {
			if (*nmiss < miss_cap) {
				miss_ts[*nmiss] = load_u64(page + lay->ts_offset);
				miss_count[*nmiss] = missed;
			}
			(*nmiss)++;
		}
		if (type_count) {
			const uint16_t *ty = ts_out ? type_out + n : pty;

			for (i = 0; i < got; i++)
				type_count[ty[i]]++;
		}
		if (runs && got)
			note_runs(runs, ts_out ? ts_out + n : pts, got, p, n);
		n += got;
	}
	r = n;
out:
	free(pts);
	free(pty);
	free(poff);
	return r;
}

/* struct merge_streams - per-CPU (or per-piece) record streams to merge by time */
struct merge_streams {
	const uint64_t *ts;		/* the streams' times (stream s at [start[s], end[s])) */
	const int64_t *start;
	const int64_t *end;
	int64_t k;			/* stream count */
};

/* emit_fn - consume records [from, to) of stream @s, the next ones in time order */
typedef int64_t (*emit_fn)(void *ctx, int64_t s, int64_t from, int64_t to);

/* struct key_heap - a binary min-heap of items keyed by (time, item index) */
struct key_heap {
	int64_t *h;			/* the items, heap ordered */
	uint64_t *key;			/* per item: the time of its next record */
	int64_t n;
};

/* key_before - item @a sorts before item @b (an earlier item wins equal times) */
static inline int key_before(const struct key_heap *kh, int64_t a, int64_t b)
{
	return kh->key[a] < kh->key[b] || (kh->key[a] == kh->key[b] && a < b);
}

/* heap_sift_down - restore the heap order below slot @i */
static void heap_sift_down(struct key_heap *kh, int64_t i)
{
	int64_t *h = kh->h;
	int64_t x = h[i];

	for (;;) {
		int64_t c = 2 * i + 1;

		if (c >= kh->n)
			break;
		if (c + 1 < kh->n && key_before(kh, h[c + 1], h[c]))
			c++;
		if (!key_before(kh, h[c], x))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = x;
}

/* heap_build - heap-order items 0 .. @n - 1 (their keys set) */
static void heap_build(struct key_heap *kh, int64_t n)
{
	int64_t i;

	for (i = 0; i < n; i++)
		kh->h[i] = i;
	kh->n = n;
	for (i = n / 2 - 1; i >= 0; i--)
		heap_sift_down(kh, i);
}

/*
 * heap_bound - the last time the root item may hand out before another item's turn
 *
 * The next item in heap order is a child of the root. Its key bounds the root's
 * records; if it is an earlier item it wins a tie, so the bound is one less (its key
 * then exceeds the root's, so this cannot wrap). The root's own key always qualifies.
 */
static uint64_t heap_bound(const struct key_heap *kh)
{
	int64_t next = -1;

	if (kh->n > 1)
		next = kh->h[1];
	if (kh->n > 2 && key_before(kh, kh->h[2], next))
		next = kh->h[2];
	if (next < 0)
		return UINT64_MAX;
	return kh->key[next] - (next < kh->h[0]);
}

/* heap_root_moved - the root's key grew (@done: it has no records left) */
static void heap_root_moved(struct key_heap *kh, int done)
{
	if (done)
		kh->h[0] = kh->h[--kh->n];
	if (kh->n)
		heap_sift_down(kh, 0);
}

/* count_runs - number of sorted runs the streams cut into (where a stamp goes back) */
static int64_t count_runs(const struct merge_streams *m)
{
	int64_t s, i, n = 0;

	for (s = 0; s < m->k; s++) {
		if (m->start[s] >= m->end[s])
			continue;
		n++;
		for (i = m->start[s] + 1; i < m->end[s]; i++)
			n += m->ts[i] < m->ts[i - 1];
	}
	return n;
}

/*
 * merge_runs - hand out the streams' records in time order, run by run
 * @m: the streams
 * @emit: called for each run of records; a negative return stops the merge and is
 *	returned
 * @ctx: passed to @emit
 *
 * The order equals a stable sort of the streams' concatenation by time (equal stamps:
 * the earlier in the concatenation first). A stream whose stamps go back somewhere (the
 * kernel's can, across a lost-events gap, and so can synthetic data) is cut there into
 * sorted runs: a merge of sorted runs that breaks ties by run order is exactly that
 * stable sort. The runs sit in a binary heap, so a trace cut into many runs (a 1 GiB
 * synthetic capture gives hundreds) costs log(runs), not runs, per handed-out piece.
 * Returns 0 or -ENOMEM.
 */
static int64_t merge_runs(const struct merge_streams *m, emit_fn emit, void *ctx)
{
	const uint64_t *ts = m->ts;
	int64_t nruns = count_runs(m), alloc = nruns ? nruns : 1;
	int64_t *head = malloc(alloc * sizeof(*head));
	int64_t *end = malloc(alloc * sizeof(*end));
	int64_t *stream = malloc(alloc * sizeof(*stream));
	int64_t *h = malloc(alloc * sizeof(*h));
	uint64_t *key = malloc(alloc * sizeof(*key));
	struct key_heap kh = { h, key, 0 };
	int64_t s, i, n = 0, r = 0;

	if (!head || !end || !stream || !h || !key) {
		r = -ENOMEM;
		goto out;
	}
	for (s = 0; s < m->k; s++) {
		int64_t from = m->start[s];

		for (i = m->start[s] + 1; i <= m->end[s]; i++) {
			if (i < m->end[s] && ts[i] >= ts[i - 1])
				continue;
			head[n] = from;
			end[n] = i;
			stream[n] = s;
			key[n++] = ts[from];
			from = i;
		}
	}
	heap_build(&kh, n);
	while (kh.n) {
		int64_t best = h[0], to = head[best];
		uint64_t bound = heap_bound(&kh);

		while (to < end[best] && ts[to] <= bound)
			to++;
		r = emit(ctx, stream[best], head[best], to);
		if (r < 0)
			goto out;
		head[best] = to;
		if (to < end[best])
			key[best] = ts[to];
		heap_root_moved(&kh, to == end[best]);
	}
out:
	free(head);
	free(end);
	free(stream);
	free(h);
	free(key);
	return r;
}

/* struct merged_columns - output of irq_merge_by_ts() */
struct merged_columns {
	const uint64_t *ts;
	const uint16_t *type;
	const int64_t *off;
	const uint16_t *cpu_of;
	uint64_t *ts_out;
	uint16_t *type_out;
	int64_t *off_out;
	uint16_t *cpu_out;
	int64_t n;
};

/* emit_columns - append a run to the merged columns */
static int64_t emit_columns(void *ctx, int64_t s, int64_t from, int64_t to)
{
	struct merged_columns *mc = ctx;
	int64_t i, n = mc->n;

	for (i = from; i < to; i++, n++) {
		mc->ts_out[n] = mc->ts[i];
		mc->type_out[n] = mc->type[i];
		mc->off_out[n] = mc->off[i];
		mc->cpu_out[n] = mc->cpu_of[s];
	}
	mc->n = n;
	return 0;
}

/*
 * irq_merge_by_ts - merge per-CPU streams into one time order
 * @ts, @type, @off: the streams' records (stream s at [start[s], end[s]))
 * @start, @end: bounds of each stream
 * @k: stream count
 * @cpu_of: CPU number of each stream
 * @ts_out, @type_out, @off_out, @cpu_out: merged columns
 *
 * Returns the record count, or -ENOMEM.
 */
int64_t irq_merge_by_ts(const uint64_t *ts, const uint16_t *type, const int64_t *off,
			const int64_t *start, const int64_t *end, int64_t k,
			const uint16_t *cpu_of,
			uint64_t *ts_out, uint16_t *type_out, int64_t *off_out,
			uint16_t *cpu_out)
{
	struct merge_streams m = { ts, start, end, k };
	struct merged_columns mc = { ts, type, off, cpu_of, ts_out, type_out, off_out,
				     cpu_out, 0 };
	int64_t r = merge_runs(&m, emit_columns, &mc);

	return r < 0 ? r : mc.n;
}

/*
 * struct table_spec - where irq_merge_to_tables() puts each event type's records
 *
 * Per table t: its records' times, CPUs, payload offsets (optional: NULL) and fixed-size
 * fields (fields [field_first[t], field_first[t + 1]) of the field arrays).
 */
struct table_spec {
	const int32_t *table_of_type;	/* 65536 entries: table of an event type, or -1 */
	int64_t ntables;
	uint64_t **ts_out;
	uint16_t **cpu_out;
	int64_t **off_out;
	int64_t *fill;			/* per table: records written so far */
	const int64_t *cap;		/* per table: room */
	const int64_t *field_first;
	const int64_t *field_offset;
	const int64_t *field_size;
	uint8_t **field_out;
	const uint8_t *buf;
	int64_t buf_len;
	/*
	 * Per field (NULL: none is): > 0 to code it, at most that many distinct values
	 * (irq_stream_to_tables() only): its field_out gets an int32 code per record,
	 * field_dict[f] the distinct values (field_size bytes each) in order of first
	 * appearance, field_ndict[f] their count.
	 */
	const int64_t *field_code_cap;
	uint8_t **field_dict;
	int64_t *field_ndict;
};

/* spec_codes - some field of @sp is to be coded (only irq_stream_to_tables() does) */
static int spec_codes(const struct table_spec *sp)
{
	int64_t f;

	for (f = 0; sp->field_code_cap && f < sp->field_first[sp->ntables]; f++)
		if (sp->field_code_cap[f] > 0)
			return 1;
	return 0;
}

/* struct table_merge - irq_merge_to_tables()'s emitter state */
struct table_merge {
	const struct table_spec *spec;
	const uint64_t *ts;
	const uint16_t *type;
	const int64_t *off;
	const uint16_t *cpu_of;
};

/* table_put - append one record to the table of its type (if it has one) */
static int64_t table_put(const struct table_spec *sp, uint64_t ts, uint16_t type,
			 int64_t o, uint16_t cpu)
{
	int64_t t = sp->table_of_type[type], f, row;

	if (t < 0)
		return 0;
	row = sp->fill[t]++;
	if (row >= sp->cap[t])
		return -ENOSPC;
	sp->ts_out[t][row] = ts;
	sp->cpu_out[t][row] = cpu;
	if (sp->off_out[t])
		sp->off_out[t][row] = o;
	for (f = sp->field_first[t]; f < sp->field_first[t + 1]; f++) {
		int64_t sz = sp->field_size[f];
		int64_t at = o + sp->field_offset[f];
		uint8_t *dst = sp->field_out[f] + row * sz;

		/* nothing is trusted from the page: a field past the buffer is an error */
		if (o < 0 || at + sz > sp->buf_len)
			return -ERANGE;
		switch (sz) {
		case 2: memcpy(dst, sp->buf + at, 2); break;
		case 4: memcpy(dst, sp->buf + at, 4); break;
		case 8: memcpy(dst, sp->buf + at, 8); break;
		default: memcpy(dst, sp->buf + at, (size_t)sz); break;
		}
	}
	return 0;
}

/* emit_tables - append a run's records to the tables of their types */
static int64_t emit_tables(void *ctx, int64_t s, int64_t from, int64_t to)
{
	const struct table_merge *tm = ctx;
	int64_t i, r;

	for (i = from; i < to; i++) {
		r = table_put(tm->spec, tm->ts[i], tm->type[i], tm->off[i], tm->cpu_of[s]);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * irq_merge_to_tables - merge per-CPU streams straight into per-type tables
 * @ts, @type, @off, @start, @end, @k, @cpu_of: the streams, as irq_merge_by_ts()
 * @spec: the tables, their fields and their output columns
 *
 * The same order as irq_merge_by_ts() followed by grouping by type, without the merged
 * columns: each record is read once and written once, to its table. Returns 0, -ENOSPC,
 * -ERANGE, -ENOMEM, or -EINVAL for a spec with coded fields.
 */
int64_t irq_merge_to_tables(const uint64_t *ts, const uint16_t *type, const int64_t *off,
			    const int64_t *start, const int64_t *end, int64_t k,
			    const uint16_t *cpu_of, const struct table_spec *spec)
{
	struct merge_streams m = { ts, start, end, k };
	struct table_merge tm = { spec, ts, type, off, cpu_of };

	if (spec_codes(spec))
		return -EINVAL;		/* table_put() copies every field */
	return merge_runs(&m, emit_tables, &tm);
}

#define TAB_MAX	128		/* tables of the streaming merge's compact form, at most */
#define TAB_FIELDS	16		/* fields of one table in that form, at most */

/*
 * struct code_dict - the distinct values of a coded field: @rows (@size bytes each, in
 * order of first appearance, at most @cap) and an open-addressing hash table of their
 * codes + 1 (@mask + 1 slots, at least twice @cap: never full)
 */
struct code_dict {
	uint8_t *rows;
	int64_t size, cap, n, mask;
	int32_t *slot;
};

/* struct tab_out - one table's output columns, laid out together for the merge loop */
struct tab_out {
	uint64_t *ts;
	uint16_t *cpu;
	int64_t *off;
	int64_t fill, cap, nf, f_end;
	int64_t f_offset[TAB_FIELDS];
	int64_t f_size[TAB_FIELDS];
	uint8_t *f_out[TAB_FIELDS];
	struct code_dict *f_dict[TAB_FIELDS];	/* NULL: copied, else coded */
};

/* struct tab_set - every table in compact form and a byte-wide map of types to them */
struct tab_set {
	struct tab_out tab[TAB_MAX];
	uint8_t of_type[65536];		/* table + 1 of an event type, 0: none */
};

/* code_dict_new - an empty dictionary of up to @cap values of @size bytes, or NULL */
static struct code_dict *code_dict_new(uint8_t *rows, int64_t size, int64_t cap)
{
	struct code_dict *d = calloc(1, sizeof(*d));
	int64_t slots = 16;

	if (!d)
		return NULL;
	while (slots < 2 * cap)
		slots *= 2;
	d->slot = calloc((size_t)slots, sizeof(*d->slot));
	if (!d->slot) {
		free(d);
		return NULL;
	}
	d->rows = rows;
	d->size = size;
	d->cap = cap;
	d->mask = slots - 1;
	return d;
}

/* code_dict_free - free @d (not its rows: the caller's) */
static void code_dict_free(struct code_dict *d)
{
	if (d)
		free(d->slot);
	free(d);
}

/* code_of - the code of the @size bytes at @v, added when new; -E2BIG past the cap */
static inline int64_t code_of(struct code_dict *d, const uint8_t *v)
{
	uint64_t h = 0xcbf29ce484222325ULL, w;	/* FNV-1a (Fowler, Noll, Vo) ... */
	int64_t i, at;

	/*
	 * ... a word at a time where the size allows, with a final mix (splitmix64's) so the
	 * low bits that pick the slot depend on every byte: task names are 16 bytes, 2 of
	 * them per switch, and a byte at a time was 32 dependent multiplies a record.
	 */
	for (i = 0; i + 8 <= d->size; i += 8) {
		memcpy(&w, v + i, 8);
		h = (h ^ w) * 0x100000001b3ULL;
	}
	for (; i < d->size; i++)
		h = (h ^ v[i]) * 0x100000001b3ULL;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	for (at = (int64_t)(h & (uint64_t)d->mask);; at = (at + 1) & d->mask) {
		int32_t c = d->slot[at];

		if (!c)
			break;
		if (!memcmp(d->rows + (c - 1) * d->size, v, (size_t)d->size))
			return c - 1;
	}
	if (d->n >= d->cap)
		return -E2BIG;
	memcpy(d->rows + d->n * d->size, v, (size_t)d->size);
	d->slot[at] = (int32_t)(d->n + 1);
	return d->n++;
}

/* tab_set_free - free the dictionaries of the first @ntables tables of @ts */
static void tab_set_free(struct tab_set *ts, int64_t ntables)
{
	int64_t t, f;

	for (t = 0; t < ntables; t++)
		for (f = 0; f < ts->tab[t].nf && f < TAB_FIELDS; f++)
			code_dict_free(ts->tab[t].f_dict[f]);
}

/*
 * tab_set_init - @ts from @sp; -E2BIG when @sp does not fit (use table_put(), which
 * codes no field: a spec with coded fields then fails), -ENOMEM
 */
static int64_t tab_set_init(struct tab_set *ts, const struct table_spec *sp)
{
	int64_t t, f;

	memset(ts->tab, 0, sizeof(ts->tab));
	if (sp->ntables > TAB_MAX - 1)
		return -E2BIG;
	for (t = 0; t < sp->ntables; t++) {
		struct tab_out *o = &ts->tab[t];

		o->nf = sp->field_first[t + 1] - sp->field_first[t];
		if (o->nf > TAB_FIELDS) {
			o->nf = 0;
			tab_set_free(ts, t);
			return -E2BIG;
		}
		o->ts = sp->ts_out[t];
		o->cpu = sp->cpu_out[t];
		o->off = sp->off_out[t];
		o->fill = sp->fill[t];
		o->cap = sp->cap[t];
		o->f_end = 0;
		for (f = 0; f < o->nf; f++) {
			int64_t g = sp->field_first[t] + f;

			o->f_offset[f] = sp->field_offset[g];
			o->f_size[f] = sp->field_size[g];
			o->f_out[f] = sp->field_out[g];
			o->f_dict[f] = NULL;
			if (sp->field_code_cap && sp->field_code_cap[g] > 0) {
				o->f_dict[f] = code_dict_new(sp->field_dict[g], o->f_size[f],
							     sp->field_code_cap[g]);
				if (!o->f_dict[f]) {
					o->nf = f;
					tab_set_free(ts, t + 1);
					return -ENOMEM;
				}
			}
			if (o->f_offset[f] + o->f_size[f] > o->f_end)
				o->f_end = o->f_offset[f] + o->f_size[f];
		}
	}
	for (t = 0; t < 65536; t++) {
		int32_t k = sp->table_of_type[t];

		ts->of_type[t] = (uint8_t)(k >= 0 && k < sp->ntables ? k + 1 : 0);
	}
	return 0;
}

/* tab_put - table_put() on the compact form: the same rows, the same errors */
static inline int64_t tab_put(struct tab_set *ts, const struct table_spec *sp, uint64_t t,
			      uint16_t type, int64_t o, uint16_t cpu)
{
	struct tab_out *tb;
	int64_t row, f;

	if (!ts->of_type[type])
		return 0;
	tb = &ts->tab[ts->of_type[type] - 1];
	row = tb->fill++;
	if (row >= tb->cap)
		return -ENOSPC;
	tb->ts[row] = t;
	tb->cpu[row] = cpu;
	if (tb->off)
		tb->off[row] = o;
	/* nothing is trusted from the page: a field past the buffer is an error */
	if (tb->nf && (o < 0 || o + tb->f_end > sp->buf_len))
		return -ERANGE;
	for (f = 0; f < tb->nf; f++) {
		const uint8_t *src = sp->buf + o + tb->f_offset[f];
		int64_t sz = tb->f_size[f];
		uint8_t *dst = tb->f_out[f] + row * sz;

		if (tb->f_dict[f]) {
			int64_t code = code_of(tb->f_dict[f], src);

			if (code < 0)
				return code;
			((int32_t *)tb->f_out[f])[row] = (int32_t)code;
			continue;
		}
		switch (sz) {
		case 2: memcpy(dst, src, 2); break;
		case 4: memcpy(dst, src, 4); break;
		case 8: memcpy(dst, src, 8); break;
		case 16: memcpy(dst, src, 16); break;
		default: memcpy(dst, src, (size_t)sz); break;
		}
	}
	return 0;
}

/* tab_set_done - the fill counts and dictionary sizes back into @sp */
static void tab_set_done(const struct tab_set *ts, const struct table_spec *sp)
{
	int64_t t, f;

	for (t = 0; t < sp->ntables; t++) {
		sp->fill[t] = ts->tab[t].fill;
		for (f = 0; f < ts->tab[t].nf; f++)
			if (ts->tab[t].f_dict[f])
				sp->field_ndict[sp->field_first[t] + f] = ts->tab[t].f_dict[f]->n;
	}
}

/*
 * struct rb_stream - one sorted run of a CPU's records: from its first page (in the
 * shared buffer), @skip records into it, @count records, the CPU's later pages after it
 */
struct rb_stream {
	int64_t byte_at;
	int64_t npages;
	int64_t cpu;
	int64_t skip;
	int64_t count;
};

/* struct stream_state - a run being merged: its current page, decoded */
struct stream_state {
	const uint8_t *pages;
	int64_t byte_at, npages, next_page, skip, left;
	uint16_t cpu;
	uint64_t *ts;
	uint16_t *type;
	int64_t *off;
	int64_t n, at;
	uint64_t last;
};

/*
 * keep_tabled - move the records [at, n) of types with a table to the front of the
 * run's page buffer, in order; returns how many. A merge orders only these: records of
 * other types (the other threads' tables, types nobody asked for) never change the
 * order of these, which is by (time, run, position in the run) alone.
 */
static int64_t keep_tabled(struct stream_state *st, const struct tab_set *tabs,
			   const struct table_spec *sp)
{
	int64_t i, m = 0;

	for (i = st->at; i < st->n; i++) {
		uint16_t type = st->type[i];

		if (tabs ? !tabs->of_type[type] : sp->table_of_type[type] < 0)
			continue;
		st->ts[m] = st->ts[i];
		st->type[m] = type;
		st->off[m] = st->off[i];
		m++;
	}
	return m;
}

/*
 * stream_refill - decode the run's next page with records of the tables' types (the
 * run's count is of records of every type); 0 when none is left
 */
static int64_t stream_refill(struct stream_state *st, const struct rb_page_layout *lay,
			     const struct tab_set *tabs, const struct table_spec *sp)
{
	int64_t missed;

	st->n = st->at = 0;
	while (st->at == st->n && st->left > 0 && st->next_page < st->npages) {
		int64_t p = st->next_page++;

		st->n = decode_page(st->pages + p * lay->page_size, lay,
				    st->byte_at + p * lay->page_size, st->ts, st->type, st->off,
				    &missed);
		st->at = st->skip < st->n ? st->skip : st->n;
		st->skip = 0;
		if (st->n - st->at > st->left)
			st->n = st->at + st->left;
		st->left -= st->n - st->at;
		st->n = keep_tabled(st, tabs, sp);
		st->at = 0;
	}
	return st->n - st->at;
}

/*
 * irq_stream_to_tables - decode each run's pages and merge them into per-type tables
 * @buf: the pages of all CPUs
 * @streams: the sorted runs of each CPU's records (CPU after CPU, each CPU's in page
 *	order), k of them: a CPU whose stamps never go back is one run
 * @lay: page layout
 * @spec: the tables (sized beforehand from an irq_rb_decode() count, which also finds
 *	the runs)
 *
 * The same tables as irq_rb_decode() + irq_merge_to_tables(), with no decoded copy of
 * the whole trace in between: each run's current page is decoded into a small buffer as
 * the merge reaches it (a page where a run starts is decoded by both of its runs). The
 * runs sit in a heap keyed by (next time, run order), so equal stamps keep the order
 * of a stable sort by time. Fields the spec codes (field_code_cap) get a code per
 * record. Returns 0, -EDOM when a run's stamps go back after all (its bounds disagree
 * with the pages: the caller takes the two-step path), -E2BIG when a coded field has
 * more distinct values than its cap (the caller then copies them), -ENOSPC, -ERANGE,
 * -ENOMEM or -EINVAL.
 */
int64_t irq_stream_to_tables(const uint8_t *buf, const struct rb_stream *streams, int64_t k,
			     const struct rb_page_layout *lay, const struct table_spec *spec)
{
	const int64_t per_page = lay->data_size / 8 + 1;
	struct stream_state *st = calloc((size_t)(k ? k : 1), sizeof(*st));
	int64_t *h = malloc((size_t)(k ? k : 1) * sizeof(*h));
	uint64_t *key = malloc((size_t)(k ? k : 1) * sizeof(*key));
	struct key_heap kh = { h, key, 0 };
	struct tab_set *tabs = malloc(sizeof(*tabs));
	int64_t s, n = 0, r = 0;

	if (!st || !h || !key || !tabs) {
		free(tabs);
		tabs = NULL;		/* not set up: nothing to hand back */
		r = -ENOMEM;
		goto out;
	}
	r = tab_set_init(tabs, spec);
	if (r < 0) {
		free(tabs);
		tabs = NULL;		/* too many tables or fields: the general table_put() */
		if (r != -E2BIG || spec_codes(spec))
			goto out;	/* which codes no field */
		r = 0;
	}
	if (!layout_ok(lay)) {
		r = -EINVAL;
		goto out;
	}
	for (s = 0; s < k; s++) {
		struct stream_state *t = &st[n];

		t->pages = buf + streams[s].byte_at;
		t->byte_at = streams[s].byte_at;
		t->npages = streams[s].npages;
		t->skip = streams[s].skip;
		t->left = streams[s].count;
		t->cpu = (uint16_t)streams[s].cpu;
		t->ts = malloc(per_page * sizeof(*t->ts));
		t->type = malloc(per_page * sizeof(*t->type));
		t->off = malloc(per_page * sizeof(*t->off));
		if (!t->ts || !t->type || !t->off) {
			n++;
			r = -ENOMEM;
			goto out;
		}
		/* runs without records take no heap slot (item order stays run order) */
		if (!stream_refill(t, lay, tabs, spec)) {
			free(t->ts);
			free(t->type);
			free(t->off);
			memset(t, 0, sizeof(*t));
			continue;
		}
		key[n++] = t->ts[t->at];
	}
	heap_build(&kh, n);
	while (kh.n) {
		struct stream_state *b = &st[h[0]];
		uint64_t bound = heap_bound(&kh);
		int done = 0;

		/* its records that sort before every other head (heap_bound() explains) */
		do {
			uint64_t t = b->ts[b->at];

			if (t < b->last) {
				r = -EDOM;
				goto out;
			}
			b->last = t;
			r = tabs ? tab_put(tabs, spec, t, b->type[b->at], b->off[b->at], b->cpu)
				 : table_put(spec, t, b->type[b->at], b->off[b->at], b->cpu);
			if (r < 0)
				goto out;
			if (++b->at == b->n && !stream_refill(b, lay, tabs, spec)) {
				done = 1;
				break;
			}
		} while (b->ts[b->at] <= bound);
		if (!done)
			key[h[0]] = b->ts[b->at];
		heap_root_moved(&kh, done);
	}
out:
	if (tabs) {
		tab_set_done(tabs, spec);
		tab_set_free(tabs, spec->ntables);
	}
	for (s = 0; s < n && st; s++) {
		free(st[s].ts);
		free(st[s].type);
		free(st[s].off);
	}
	free(tabs);
	free(st);
	free(h);
	free(key);
	return r;
}
