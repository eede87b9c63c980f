// SPDX-License-Identifier: Apache-2.0
/*
 * xentrace.c - index the records of a xentrace file in one pass (irqlab/xen/index.py):
 * each record's byte offset, physical CPU, event id, extra-word count and cycle count
 * (its own, or the last one seen on the same CPU), the layout of
 * irqlab/xen/records.py (xen/include/public/trace.h, tools/xentrace/xentrace.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#define TRC_CYCLE_FLAG		0x80000000u
#define TRC_EVENT_MASK		0x0FFFFFFFu
#define TRC_CPU_CHANGE		0x0001F003u
#define MAX_CPUS		4096

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/*
 * irq_xen_index - decode record headers of @data (@n bytes) into the arrays (room for
 * @max records each): @off byte offset, @cpu, @event, @nextra, @flags (bit 0: the
 * record has its own cycle count, bit 1: it inherited one, bit 2: a CPU_CHANGE window
 * header), @tsc (0 when none is known yet). @end receives the offset where decoding
 * stopped (a truncated last record is left out). With @off NULL only counts (so the
 * caller allocates exactly). Returns the record count, or -ENOSPC when @max is too
 * small, -EINVAL for a CPU number beyond MAX_CPUS.
 */
int64_t irq_xen_index(const uint8_t *data, int64_t n, int64_t *off, int32_t *cpu,
		      uint32_t *event, uint8_t *nextra, uint8_t *flags, uint64_t *tsc,
		      int64_t max, int64_t *end)
{
	uint64_t last[MAX_CPUS];
	uint8_t seen[MAX_CPUS];
	int64_t pos = 0, k = 0, window_end = -1;
	uint32_t cur = 0;

	memset(seen, 0, sizeof(seen));
	while (pos + 4 <= n) {
		uint32_t hdr = rd32(data + pos), ev = hdr & TRC_EVENT_MASK;
		uint32_t ne = (hdr >> 28) & 7, has = hdr >> 31;
		int64_t size = 4 + 8 * has + 4 * ne;
		uint64_t t = 0;
		uint8_t fl = 0;

		if (pos + size > n)
			break;
		if (!off) {		/* counting pass: only windows matter */
			if (ev == TRC_CPU_CHANGE && !has && ne == 2 && pos >= window_end)
				window_end = pos + size + rd32(data + pos + 8);
			k++;
			pos += size;
			continue;
		}
		if (k >= max)
			return -ENOSPC;
		if (ev == TRC_CPU_CHANGE && !has && ne == 2 && pos >= window_end) {
			cur = rd32(data + pos + 4);
			if (cur >= MAX_CPUS)
				return -EINVAL;
			window_end = pos + size + rd32(data + pos + 8);
			fl = 4;
		} else if (has) {
			t = rd32(data + pos + 4) | (uint64_t)rd32(data + pos + 8) << 32;
			last[cur] = t;
			seen[cur] = 1;
			fl = 1;
		} else if (seen[cur]) {
			t = last[cur];
			fl = 2;
		}
		off[k] = pos;
		cpu[k] = cur;
		event[k] = ev;
		nextra[k] = ne;
		flags[k] = fl;
		tsc[k] = t;
		k++;
		pos += size;
	}
	*end = pos;
	return k;
}

/*
 * The runstate and hypercall replay of irqlab/xen/summary.py (xenalyze --summary's
 * accounting, tools/xentrace/xenalyze.c of Xen 4.17), in one pass over the records in
 * cycle order. summary.py stays the reference and explains each rule; the names here are
 * its names.
 */
enum { RS_RUNNING, RS_RUNNABLE, RS_BLOCKED, RS_OFFLINE, RS_LOST, RS_QUEUED, RS_INIT };

#define XS_STATES		7
#define XS_OPS			56	/* PV_HYPERCALL_MAX */
#define XS_MAX_SLOTS		4096
#define XS_HASH			8192	/* power of two, > XS_MAX_SLOTS */
#define XS_DEFAULT_DOMAIN	32768
#define XS_TRC_LOST		0x0001F001u	/* TRC_LOST_RECORDS, public/trace.h */
#define XS_SCHED_MIN_MASK	0x0FFFF000u
#define XS_SCHED_MIN		0x00021000u
#define XS_PV_MAIN		0x00200000u
#define XS_HVM_MAIN		0x00080000u
#define XS_SHADOW_MAIN		0x00400000u

struct xs_vcpu {
	int state, wrong, actual, activated;
	int64_t tsc;
	int pcpu;		/* -1: none */
};

struct xs_pcpu {
	int64_t first_tsc, last_tsc;
	int current;		/* slot, -1: none */
	int seen_valid_schedule;
	int present;
};

struct xs {
	struct xs_vcpu v[XS_MAX_SLOTS];
	uint32_t key[XS_MAX_SLOTS];
	int32_t hash[XS_HASH];
	int nslots;
	struct xs_pcpu p[MAX_CPUS];
	int64_t *acc;		/* [slot][state][count, cycles] */
};

/* xs_slot - the slot of vCPU @key (domain << 16 | vcpu), made on first use; -ENOSPC when full */
static int xs_slot(struct xs *s, uint32_t key)
{
	uint32_t h = (key * 2654435761u) & (XS_HASH - 1);

	while (s->hash[h] >= 0) {
		if (s->key[s->hash[h]] == key)
			return s->hash[h];
		h = (h + 1) & (XS_HASH - 1);
	}
	if (s->nslots >= XS_MAX_SLOTS)
		return -ENOSPC;
	s->key[s->nslots] = key;
	s->v[s->nslots] = (struct xs_vcpu){ .state = RS_INIT, .wrong = RS_INIT,
					    .actual = RS_INIT, .pcpu = -1 };
	s->hash[h] = s->nslots;
	return s->nslots++;
}

/* xs_update - close @k's interval of its state at @t (when its start is known), enter @new */
static void xs_update(struct xs *s, int k, int new, int64_t t)
{
	struct xs_vcpu *v = &s->v[k];

	if (v->tsc > 0 && v->tsc < t) {
		int64_t *cell = s->acc + ((int64_t)k * XS_STATES + v->state) * 2;

		cell[0] += 1;
		cell[1] += t - v->tsc;
	}
	v->state = new;
	v->tsc = t;
}

/* xs_prev_update - @k leaves pCPU @p (-1: none) for @new */
static void xs_prev_update(struct xs *s, int p, int k, int new, int64_t t)
{
	struct xs_vcpu *v = &s->v[k];
	struct xs_pcpu *pc = p >= 0 ? &s->p[p] : NULL;

	if (v->pcpu != p || !pc || pc->current != k || v->state != RS_RUNNING)
		v->tsc = 0;
	if (pc)
		pc->current = -1;
	xs_update(s, k, new, t);
}

/* xs_next_update - @k starts running on pCPU @p; 0, or -EAGAIN when xenalyze refuses */
static int xs_next_update(struct xs *s, int p, int k, int64_t t)
{
	struct xs_pcpu *pc = &s->p[p];
	struct xs_vcpu *v = &s->v[k];

	if (pc->current >= 0) {
		if (pc->seen_valid_schedule)
			return -EAGAIN;
		xs_update(s, pc->current, RS_LOST, t);
		pc->current = -1;
	}
	if (v->activated) {
		if (v->state == RS_RUNNING && (s->key[k] >> 16) != XS_DEFAULT_DOMAIN)
			v->tsc = 0;
	} else {
		v->activated = 1;
	}
	xs_update(s, k, RS_RUNNING, t);
	v->pcpu = p;
	pc->current = k;
	pc->seen_valid_schedule = 1;
	return 0;
}

/* xs_start - the first runstate record of @k (summary.py's start) */
static void xs_start(struct xs *s, int p, int k, int old, int new, int64_t t)
{
	struct xs_pcpu *pc = &s->p[p];

	if (old == RS_RUNNING)
		pc->current = -1;
	if (new != RS_RUNNING)
		return;
	xs_update(s, k, RS_RUNNING, old == RS_RUNNING ? pc->first_tsc : t);
	pc->current = k;
	s->v[k].pcpu = p;
}

/* xs_apply - one runstate record (sched_runstate_process()'s branches, summary._apply) */
static void xs_apply(struct xs *s, int k, int p, int64_t t, int cont, int old, int new)
{
	struct xs_vcpu *v = &s->v[k];
	int wrong = v->wrong, actual = v->actual;

	v->wrong = RS_INIT;
	if (v->state == RS_INIT) {
		xs_start(s, p, k, old, new, t);
		return;
	}
	if (v->state != old) {
		if (v->state == RS_LOST) {
			if (new != RS_RUNNING)
				return;
		} else if (wrong == new && actual == old) {
			return;
		} else {
			v->wrong = old;
			v->actual = v->state;
			if (v->state == RS_RUNNING)
				return;
		}
	}
	if (cont) {
		if (v->state == RS_LOST) {
			if (s->p[p].current >= 0)
				xs_prev_update(s, p, s->p[p].current, RS_LOST, t);
			xs_next_update(s, p, k, t);
		} else if (v->state != RS_RUNNING || v->pcpu != p) {
			return;
		}
		xs_update(s, k, RS_RUNNING, t);
	} else if (old == RS_RUNNING || v->state == RS_RUNNING) {
		xs_prev_update(s, old == RS_RUNNING ? p : v->pcpu, k, new, t);
	} else if (new == RS_RUNNING) {
		xs_next_update(s, p, k, t);
	} else {
		xs_update(s, k, new, t);
	}
}

/* xs_step - one timed record of pCPU @p at cycle @t: first sight of the pCPU, runstate
 * and lost records, hypercall counts against the vCPU current there */
static int xs_step(struct xs *s, int p, int64_t t, uint32_t ev, unsigned int ne,
		   const uint8_t *w0, int64_t *calls, int8_t *first_type, int64_t *lost)
{
	struct xs_pcpu *pc = &s->p[p];
	uint32_t main = ev & 0x0FFF0000u;

	if (!pc->present) {
		/* xenalyze's default vCPU is current until the first schedule */
		pc->present = 1;
		pc->first_tsc = t;
		pc->current = xs_slot(s, (uint32_t)XS_DEFAULT_DOMAIN << 16 | p);
		if (pc->current < 0)
			return pc->current;
	}
	pc->last_tsc = t;
	if ((ev & XS_SCHED_MIN_MASK) == XS_SCHED_MIN && ((ev & 0xF) == 1 || (ev & 0xF) == 2) &&
	    ne >= 1) {
		int cont = (ev & 0xF) == 2;
		int k = xs_slot(s, rd32(w0));

		if (k < 0)
			return k;
		xs_apply(s, k, p, t, cont, cont ? RS_RUNNING : (int)(ev >> 8) & 0xF,
			 cont ? RS_RUNNING : (int)(ev >> 4) & 0xF);
	} else if (ev == XS_TRC_LOST) {
		if (pc->current >= 0)
			xs_update(s, pc->current, RS_LOST, t);
		pc->current = -1;
		pc->seen_valid_schedule = 0;
		if (ne >= 1)
			*lost += rd32(w0);
	} else if (main == XS_PV_MAIN || main == XS_HVM_MAIN || main == XS_SHADOW_MAIN) {
		int k = pc->current;
		uint32_t minor = ev & 0xFF, op;

		if (k < 0)
			return 0;
		if (!first_type[k])
			first_type[k] = main == XS_PV_MAIN ? 1 : 2;
		if (main != XS_PV_MAIN || (minor != 13 && minor != 14) || ne < 1)
			return 0;
		op = rd32(w0) & 0x000FFFFFu;
		if (op < XS_OPS)
			calls[(int64_t)k * XS_OPS + op]++;
	}
	return 0;
}

/* xs_finish - deactivate_pcpu for every pCPU, then the slots' keys and the pCPUs seen */
static int64_t xs_finish(struct xs *s, uint32_t *keys, uint8_t *cpus)
{
	int c;

	for (c = 0; c < MAX_CPUS; c++) {
		cpus[c] = s->p[c].present;
		if (s->p[c].present && s->p[c].current >= 0)
			xs_update(s, s->p[c].current, RS_LOST, s->p[c].last_tsc);
	}
	memcpy(keys, s->key, sizeof(uint32_t) * s->nslots);
	return s->nslots;
}

/* xs_new - an empty replay writing its intervals into @acc; NULL without memory */
static struct xs *xs_new(int64_t *acc)
{
	struct xs *s = calloc(1, sizeof(*s));

	if (s) {
		memset(s->hash, 0xff, sizeof(s->hash));
		s->acc = acc;
	}
	return s;
}

/*
 * irq_xen_summary - replay the runstate and hypercall accounting over @n records taken in
 * cycle order (@rows: their rows in the index arrays @off, @cpu, @event, @nextra, @flags,
 * @tsc of irq_xen_index over @data). Out: @keys (domain << 16 | vcpu per slot), @cpus
 * (1 per pCPU seen, MAX_CPUS long), @acc (int64 [slot][7 states][count, cycles]),
 * @calls (int64 [slot][56 ops]), @first_type (per slot: 0 none, 1 its first PV/HVM
 * record was PV, 2 HVM), @lost (Xen's lost-record count, summed), @span (first and last
 * cycle count). The per-slot arrays are XS_MAX_SLOTS long and zeroed by the caller.
 * Returns the slot count, -ENOSPC beyond XS_MAX_SLOTS vCPUs, -ENOMEM.
 */
int64_t irq_xen_summary(const uint8_t *data, const int64_t *off, const int32_t *cpu,
			const uint32_t *event, const uint8_t *nextra, const uint8_t *flags,
			const uint64_t *tsc, const int64_t *rows, int64_t n, uint32_t *keys,
			uint8_t *cpus, int64_t *acc, int64_t *calls, int8_t *first_type,
			int64_t *lost, int64_t *span)
{
	struct xs *s = xs_new(acc);
	int64_t i, ret = 0;

	if (!s)
		return -ENOMEM;
	*lost = 0;
	span[0] = INT64_MAX;
	span[1] = INT64_MIN;
	for (i = 0; i < n && ret == 0; i++) {
		int64_t r = rows[i], t = (int64_t)tsc[r];

		span[0] = t < span[0] ? t : span[0];
		span[1] = t > span[1] ? t : span[1];
		ret = xs_step(s, cpu[r], t, event[r], nextra[r],
			      data + off[r] + 4 + 8 * (flags[r] & 1), calls, first_type, lost);
	}
	if (ret == 0)
		ret = xs_finish(s, keys, cpus);
	free(s);
	return ret;
}

/*
 * irq_xen_summary_raw - irq_xen_summary straight from the file's @n bytes at @data in
 * one walk (the record layout of irq_xen_index, no index arrays), for a file whose
 * timed records are in cycle order as written (one pCPU, or windows that never go
 * back); @records receives the record count. Returns as irq_xen_summary, or -EDOM as
 * soon as a cycle count goes back (the caller indexes and sorts), -EINVAL for a CPU
 * number beyond MAX_CPUS.
 */
int64_t irq_xen_summary_raw(const uint8_t *data, int64_t n, uint32_t *keys, uint8_t *cpus,
			    int64_t *acc, int64_t *calls, int8_t *first_type, int64_t *lost,
			    int64_t *span, int64_t *records)
{
	struct xs *s = xs_new(acc);
	uint64_t last[MAX_CPUS];
	uint8_t seen[MAX_CPUS];
	int64_t pos = 0, window_end = -1, ret = 0, k = 0;
	uint32_t cur = 0;

	if (!s)
		return -ENOMEM;
	memset(seen, 0, sizeof(seen));
	*lost = 0;
	span[0] = INT64_MAX;
	span[1] = INT64_MIN;
	while (pos + 4 <= n && ret == 0) {
		uint32_t hdr = rd32(data + pos), ev = hdr & TRC_EVENT_MASK;
		uint32_t ne = (hdr >> 28) & 7, has = hdr >> 31;
		int64_t size = 4 + 8 * has + 4 * ne, t;

		if (pos + size > n)
			break;
		k++;
		if (ev == TRC_CPU_CHANGE && !has && ne == 2 && pos >= window_end) {
			cur = rd32(data + pos + 4);
			if (cur >= MAX_CPUS) {
				ret = -EINVAL;
				break;
			}
			window_end = pos + size + rd32(data + pos + 8);
			pos += size;
			continue;
		}
		if (has) {
			last[cur] = rd32(data + pos + 4) | (uint64_t)rd32(data + pos + 8) << 32;
			seen[cur] = 1;
		} else if (!seen[cur]) {
			pos += size;
			continue;		/* no cycle count known yet: not replayed */
		}
		t = (int64_t)last[cur];
		if (t < span[1]) {
			ret = -EDOM;
			break;
		}
		span[0] = t < span[0] ? t : span[0];
		span[1] = t;
		ret = xs_step(s, cur, t, ev, ne, data + pos + 4 + 8 * has, calls, first_type,
			      lost);
		pos += size;
	}
	*records = k;
	if (ret == 0)
		ret = xs_finish(s, keys, cpus);
	free(s);
	return ret;
}
