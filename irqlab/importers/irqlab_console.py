"""irqlab's own probe console output (`sink=console`, docs/formats.md section 7), saved from
a board or a Xen console (`xl console`, a serial terminal log): the framed lines carry
the probe's header and every sample record with a CRC, so the import keeps the exact
records (seq, deadline, entry, flags) and counts damaged or missing frames as lost.
"""

from __future__ import annotations

from irqlab.importers.base import (Lines, ParsedRun, ParseOptions, ParseResult, Text,
                                   whole_text)
from irqlab.samples.layout import FRAME_MARK

FRAME_PREFIX = FRAME_MARK.decode()


def parse_irqlab_console(path: str, text: Text, options: ParseOptions) -> ParseResult:
    from irqlab.samples.console import ConsoleReader   # numpy: once there is a file

    text = whole_text(text)              # its records are kept whole (ParsedRun.records)
    src = Lines(path, text, options)
    reader = ConsoleReader()
    reader.feed(text.encode("utf-8", "surrogateescape"))
    reader.finish()
    if not reader.magic_ok():
        src.error(None, f"an irqlab probe header frame (lines starting {FRAME_PREFIX!r}; "
                        f"{reader.bad_frames} damaged frames seen)")
    hdr = reader.header()
    batch = reader.poll()
    first = next((n for n, raw in src if FRAME_PREFIX in raw), 1)
    run = ParsedRun(source="irqlab-console", path=path, line=first, tick_hz=hdr.tick_hz,
                    period_ns=hdr.period_tick * 1_000_000_000 // hdr.tick_hz
                    if hdr.tick_hz else None)
    run.records = batch.records
    run.latency_tick = batch.latency_tick
    run.figures = {"lost": reader.lost, "overruns": hdr.overruns}
    run.provenance = {"arch": hdr.arch, "timer_mode": hdr.timer_mode, "idle": hdr.idle,
                      "build_id": hdr.build_id, "probe_state": hdr.state,
                      **reader.stats()}
    run.probe = {"build_id": hdr.build_id, "tick_hz": hdr.tick_hz,
                 "timer_mode": hdr.timer_mode, "idle": hdr.idle,
                 "period_tick": hdr.period_tick,
                 **({"ref_counter": ref} if (ref := hdr.ref_meta()) else {})}
    if hdr.state != "done":
        run.notes.append(f"the probe's last state was {hdr.state!r}: the log may be cut")
    return ParseResult([run], src.skipped)


def sniff_irqlab_console(text: str) -> int:
    return 95 if FRAME_PREFIX in text[:200_000] else 0
