// SPDX-License-Identifier: Apache-2.0
/* frame.c - console sink frames (see frame.h, docs/formats.md section 7) */
#include "frame.h"
#include "printf.h"
#include "string.h"

#define FRAME_TAIL_LEN		11	/* "*" + 8 hex + "\r\n" */

/* crc32_ieee - reflected CRC-32, polynomial 0xedb88320 (zlib's crc32) */
u32 crc32_ieee(const void *buf, size_t len)
{
	const u8 *p = buf;
	u32 crc = ~0u;
	int k;

	while (len--) {
		crc ^= *p++;
		for (k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
	}
	return ~crc;
}

/* frame_send - append "*crc\r\n" to the @len bytes in @line and write them */
static int frame_send(struct frame_out *fo, char *line, size_t len)
{
	u32 crc = crc32_ieee(line + 1, len - 1);

	len += snprintf(line + len, FRAME_TAIL_LEN + 1, "*%08x\r\n", crc);
	fo->write(line, len);
	fo->fseq++;
	return 0;
}

/* clean_text - copy @src to @dst, replacing bytes that would break a frame */
static void clean_text(char *dst, const char *src, size_t size)
{
	size_t i;

	for (i = 0; i + 1 < size && src[i]; i++) {
		char c = src[i];

		dst[i] = (c < 0x20 || c > 0x7e || c == '*' || c == '~' ||
			  c == ',') ? '?' : c;
	}
	dst[i] = '\0';
}

/* frame_ref - emit the C frame: the reference counter and its offset */
static int frame_ref(struct frame_out *fo, const struct ring_hdr *h)
{
	char line[FRAME_LINE_MAX + FRAME_TAIL_LEN + 1];
	s64 off = h->ref_offset_tick;
	int len;

	len = snprintf(line, FRAME_LINE_MAX, "~IQC,%lx,%x,%s%lx,%x", fo->fseq,
		       h->ref_counter, off < 0 ? "-" : "",
		       off < 0 ? (u64)-off : (u64)off, h->ref_offset_err_tick);
	return frame_send(fo, line, len);
}

/*
 * frame_header - emit the H frame (the ring header's constant fields), then
 * the C frame when the probe measured a reference counter
 */
int frame_header(struct frame_out *fo, const struct ring *r)
{
	const struct ring_hdr *h = r->hdr;
	char line[FRAME_LINE_MAX + FRAME_TAIL_LEN + 1], id[RING_BUILD_ID_LEN];
	int len, ret;

	if (!h || !fo->write)
		return -EINVAL;
	clean_text(id, h->build_id, sizeof(id));
	len = snprintf(line, FRAME_LINE_MAX,
		       "~IQH,%lx,%x,%x,%lx,%x,%x,%lx,%x,%x,%lx,%x,%x,%s",
		       fo->fseq, h->version, h->arch, h->tick_hz,
		       h->tick_method, h->timer_mode, h->period_tick, h->idle,
		       h->inject_every, h->inject_irqoff_tick, h->capacity,
		       r->cpu, id);
	if (len >= FRAME_LINE_MAX)
		return -ENOSPC;
	ret = frame_send(fo, line, len);
	if (ret || !h->ref_counter)
		return ret;
	return frame_ref(fo, h);
}

/* frame_state - emit the T frame: state, error, head, overruns, message */
int frame_state(struct frame_out *fo, const struct ring *r)
{
	const struct ring_hdr *h = r->hdr;
	char line[FRAME_LINE_MAX + FRAME_TAIL_LEN + 1], msg[96];
	int len;

	if (!h || !fo->write)
		return -EINVAL;
	clean_text(msg, h->message, sizeof(msg));
	len = snprintf(line, FRAME_LINE_MAX, "~IQT,%lx,%x,%x,%lx,%lx,%s",
		       fo->fseq, READ_ONCE(h->state), READ_ONCE(h->error),
		       READ_ONCE(h->head), READ_ONCE(h->overruns), msg);
	if (len >= FRAME_LINE_MAX)
		len = FRAME_LINE_MAX - 1;	/* message cut, still framed */
	return frame_send(fo, line, len);
}

/*
 * frame_samples - emit one S frame with records *@next.. (below @head)
 *
 * Item i is "lat[:dd[:flags]]": latency in ticks (signed), deadline minus
 * the previous deadline (default period_tick; the frame's <base> stands in
 * for the deadline before item 0) and flags (default 0). Fills the line,
 * advances *@next, returns the number of records sent (0 if none) or
 * -EINVAL. The caller skips records the writer has lapped.
 */
int frame_samples(struct frame_out *fo, const struct ring *r, u64 *next,
		  u64 head)
{
	char line[FRAME_LINE_MAX + FRAME_TAIL_LEN + 1], item[64];
	const struct ring_rec *rec;
	u64 period = r->hdr->period_tick, seq = *next, prev;
	int len, n = 0;

	if (!fo->write || seq >= head)
		return seq > head ? -EINVAL : 0;
	rec = &r->recs[seq & r->mask];
	prev = rec->deadline_tick - period;
	len = snprintf(line, FRAME_LINE_MAX, "~IQS,%lx,%lx,%lx,", fo->fseq,
		       seq, prev);
	for (; seq < head; seq++) {
		s64 lat;
		u64 dd;
		int ilen;

		rec = &r->recs[seq & r->mask];
		lat = (s64)(rec->entry_tick - rec->deadline_tick);
		dd = rec->deadline_tick - prev;
		if (lat < 0)
			ilen = snprintf(item, sizeof(item), "%s-%lx", n ? ";" : "",
					(u64)-lat);
		else
			ilen = snprintf(item, sizeof(item), "%s%lx", n ? ";" : "",
					(u64)lat);
		if (rec->flags)
			ilen += snprintf(item + ilen, sizeof(item) - ilen,
					 ":%lx:%x", dd, rec->flags);
		else if (dd != period)
			ilen += snprintf(item + ilen, sizeof(item) - ilen,
					 ":%lx", dd);
		if (len + ilen >= FRAME_LINE_MAX)
			break;
		memcpy(line + len, item, ilen);
		len += ilen;
		prev = rec->deadline_tick;
		n++;
	}
	*next = seq;
	frame_send(fo, line, len);
	return n;
}
