// SPDX-License-Identifier: Apache-2.0
/*
 * xentrace.c - index the records of a xentrace file in one pass (irqlab/xen/index.py):
 * each record's byte offset, physical CPU, event id, extra-word count and cycle count
 * (its own, or the last one seen on the same CPU), the layout of
 * irqlab/xen/records.py (xen/include/public/trace.h, tools/xentrace/xentrace.c).
 */
#include <errno.h>
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
 * stopped (a truncated last record is left out). Returns the record count, or -ENOSPC
 * when @max is too small, -EINVAL for a CPU number beyond MAX_CPUS.
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
