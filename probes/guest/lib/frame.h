/* SPDX-License-Identifier: Apache-2.0 */
/*
 * frame.h - console sink: samples as compact framed text lines
 *
 * For targets where the host cannot map guest RAM (Xen on a board, a
 * serial-only setup), the probe copies its ring to the console as lines
 * (docs/formats.md section 7):
 *
 *   ~IQ<kind>,<frame seq>,<fields...>*<crc32>\r\n
 *
 * Numbers are lowercase hex. The CRC-32 (IEEE, as zlib) covers the bytes
 * from 'I' up to, not including, '*'. A frame stays below FRAME_LINE_MAX
 * bytes plus its 11-byte trailer: Xen's vpl011 (dom0less) cuts a domU's
 * output into pieces of 128 bytes, which would split longer frames.
 *
 * frame_header() and frame_state() may be called again at any time: the
 * probe repeats them every second (probe.c, console_sink_repeat) so that a
 * host attaching to a running console can decode what follows.
 */
#ifndef IRQLAB_FRAME_H
#define IRQLAB_FRAME_H

#include "types.h"
#include "ring.h"

#define FRAME_LINE_MAX		100

typedef void (*frame_write_fn)(const char *buf, size_t len);

struct frame_out {
	frame_write_fn write;
	u64 fseq;		/* next frame sequence number */
};

u32 crc32_ieee(const void *buf, size_t len);
int frame_header(struct frame_out *fo, const struct ring *r);
int frame_state(struct frame_out *fo, const struct ring *r);
int frame_samples(struct frame_out *fo, const struct ring *r, u64 *next,
		  u64 head);

#endif /* IRQLAB_FRAME_H */
