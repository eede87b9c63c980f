"""Host-side decoder of the probe's console sink (docs/formats.md section 7).

Where the host cannot map guest RAM (Xen on a board, a serial-only lab), the probe (arm64
or x86-64) copies its sample ring to the console as framed text lines. This module turns
those lines back into what :class:`irqlab.samples.ring.RingReader` gives: a
:class:`RingHeader`, the probe state and :class:`SampleBatch` es with loss accounting, so
the rest of the pipeline does not know which sink was used.

A frame is ``~IQ<kind>,<frame seq>,<fields>*<crc32>`` anywhere in a line (Xen prefixes
domU output with ``(d1) ``). Frames failing their CRC or syntax are counted in
``bad_frames`` and dropped; the samples they carried show up as a gap in the sample
sequence and are counted as ``lost``, never invented.

The probe repeats its ``H`` and ``T`` frames every second, so a reader attached to a
console that is already running (``ConsoleReader(read, attach=True)``: a board's UART)
synchronises on the first good frame: what came before is not lost, a gap after is.

Offline: ``python -m irqlab.samples.console saved-console.log [--json]`` decodes a saved
console log (:func:`decode_log`).
"""

from __future__ import annotations

import argparse
import json
import sys
import zlib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from irqlab.samples.record import RECORD_DTYPE, SampleBatch
from irqlab.samples.layout import (ARCH_NAMES, FRAME_MARK, IDLE_NAMES, STATE_NAMES,
                                   TICK_METHODS, TIMER_MODES, RingError, RingHeader,
                                   ref_counter_name)
from irqlab.samples.source import SampleSource

FRAME_VERSION = 1                    # the ring version the H frame echoes
_TERMINAL = ("done", "error")
_MAX_PARTIAL = 4096                  # a "line" longer than this is noise, not a frame
# S frames held, on late attach, until the repeated H frame tells how to decode them:
# the probe repeats H every second, i.e. after ~80 frames at a 1 ms period.
_MAX_EARLY_FRAMES = 1024

# read(pos) -> (bytes after pos, new pos, bytes dropped before them)
StreamRead = Callable[[int], tuple[bytes, int, int]]


class FrameError(ValueError):
    """One line that looked like a frame but is not a valid one."""


def parse_frame(line: bytes) -> tuple[str, int, list[str]] | None:
    """(kind, frame seq, fields) of the frame in ``line``; None when the line has no
    frame marker; FrameError when it has one but the frame is damaged."""
    start = line.rfind(FRAME_MARK)
    if start < 0:
        return None
    body_and_crc = line[start + 1:].rstrip(b"\r\n\t ")
    star = body_and_crc.rfind(b"*")
    if star < 0 or len(body_and_crc) - star - 1 != 8:
        raise FrameError("no *crc32 trailer")
    body, crc_hex = body_and_crc[:star], body_and_crc[star + 1:]
    try:
        crc = int(crc_hex, 16)
    except ValueError:
        raise FrameError("crc is not hex") from None
    if zlib.crc32(body) != crc:
        raise FrameError("crc mismatch")
    try:
        text = body.decode("ascii")
    except UnicodeDecodeError:
        raise FrameError("non-ASCII frame") from None
    parts = text.split(",")
    if len(parts) < 2 or len(parts[0]) != 3:
        raise FrameError("no kind/sequence")
    try:
        fseq = int(parts[1], 16)
    except ValueError:
        raise FrameError("bad frame sequence") from None
    return parts[0][2], fseq, parts[2:]


def frame_line(kind: str, fseq: int, fields: list[str]) -> bytes:
    """One frame as the probe writes it (lib/frame.c): for tests and other emitters."""
    body = ",".join([f"IQ{kind}", f"{fseq:x}", *fields]).encode("ascii")
    return b"~" + body + f"*{zlib.crc32(body):08x}\r\n".encode("ascii")


def _hex(s: str) -> int:
    return -int(s[1:], 16) if s.startswith("-") else int(s, 16)


class ConsoleReader(SampleSource):
    """Decodes console frames incrementally (a SampleSource, like RingReader).

    ``attach``: the stream starts somewhere in a running probe's output (a board's
    UART opened late) instead of at its boot. The first good frame is then the
    synchronisation point: damaged bytes before it are skipped, not counted as bad
    frames, and samples before the first decoded ``S`` frame are not lost; S frames
    arriving before the (repeated) ``H`` frame are held and decoded once it comes."""

    def __init__(self, read: StreamRead | None = None, *, attach: bool = False) -> None:
        self._read = read
        self.attach = attach
        self._synced = not attach            # frame numbering known
        self._seq_synced = not attach        # sample numbering known
        self._early: list[list[str]] = []    # attach: S frames before the first H
        self._restarted = False
        self._pos = 0
        self._partial = b""
        self._hdr: dict | None = None
        self._state = "booting"
        self._error = 0
        self._head = 0
        self._overruns = 0
        self._message = ""
        self._ref = (0, 0, 0)                # C frame: code, offset_tick, error_tick
        self._pending: list[np.ndarray] = []
        self._pending_lost = 0
        self._next_fseq = 0
        self.next_seq = 0
        self.lost = 0
        self.frames = 0
        self.bad_frames = 0          # CRC or syntax errors
        self.missing_frames = 0      # gaps in the frame sequence
        self.dropped_bytes = 0       # console bytes the source could not keep
        self.header_repeats = 0      # H frames equal to the first one
        self.skipped_lines = 0       # attach: damaged lines before the first good frame
        self.skipped_frames = 0      # attach: S frames before sync that were not kept
        self.ignored_frames = 0      # frames after the probe restarted

    # -- input -------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Decode ``data`` (any chunking: partial lines are kept for the next call)."""
        buf = self._partial + data
        lines = buf.split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > _MAX_PARTIAL:
            self._partial = self._partial[-_MAX_PARTIAL:]
        for line in lines:
            self._line(line)

    def finish(self) -> None:
        """End of input: decode a last line that had no newline."""
        if self._partial:
            line, self._partial = self._partial, b""
            self._line(line)

    def _pump(self) -> None:
        if self._read is None:
            return
        data, self._pos, dropped = self._read(self._pos)
        if dropped:
            self.dropped_bytes += dropped
            self._partial = b""      # the line it belonged to is gone
        if data:
            self.feed(data)

    # -- frames ------------------------------------------------------------------------

    def _line(self, line: bytes) -> None:
        try:
            frame = parse_frame(line)
        except FrameError:
            # On late attach the first line is usually cut: not a damaged frame.
            if self._synced:
                self.bad_frames += 1
            else:
                self.skipped_lines += 1
            return
        if frame is None:
            return
        kind, fseq, fields = frame
        if self._restarted:
            self.ignored_frames += 1
            return
        if not self._synced:
            self._synced, self._next_fseq = True, fseq
        elif fseq < self._next_fseq:
            # Frame numbers only grow while one probe runs: it booted again.
            self._restart(f"the probe restarted (frame number went back from "
                          f"{self._next_fseq - 1} to {fseq}): the board rebooted")
            return
        try:
            handler = {"H": self._on_header, "T": self._on_state,
                       "S": self._on_samples, "C": self._on_ref}.get(kind)
            if handler is None:
                raise FrameError(f"unknown frame kind {kind!r}")
            handler(fields)
        except (FrameError, ValueError, IndexError):
            self.bad_frames += 1
            return
        if fseq > self._next_fseq:
            self.missing_frames += fseq - self._next_fseq
        self._next_fseq = max(self._next_fseq, fseq + 1)
        self.frames += 1

    def _on_header(self, f: list[str]) -> None:
        if len(f) < 12:
            raise FrameError("short H frame")
        (version, arch, tick_hz, tick_method, timer_mode, period_tick, idle,
         inject_every, inject_irqoff_tick, capacity, cpu) = (int(x, 16) for x in f[:11])
        if version != FRAME_VERSION:
            raise FrameError(f"H frame version {version}")
        if tick_hz == 0 or period_tick == 0:
            raise FrameError("H frame without tick rate or period")
        hdr = dict(version=version, arch=arch, tick_hz=tick_hz, tick_method=tick_method,
                   timer_mode=timer_mode, period_tick=period_tick, idle=idle,
                   inject_every=inject_every, inject_irqoff_tick=inject_irqoff_tick,
                   capacity=capacity, cpu=cpu, build_id=",".join(f[11:]))
        if self._hdr is None:
            self._hdr = hdr
            early, self._early = self._early, []
            for fields in early:         # late attach: S frames that came before it
                try:
                    self._on_samples(fields)
                except (FrameError, ValueError, IndexError):
                    self.bad_frames += 1
        elif hdr == self._hdr:
            self.header_repeats += 1     # the probe repeats it every second
        else:
            self._restart("the probe's header changed (tick rate, period or build): "
                          "another probe run started")

    def _on_ref(self, f: list[str]) -> None:
        """The C frame (after each H): the reference counter, its offset from the
        probe's counter (signed hex) and the offset's bound."""
        if len(f) < 3:
            raise FrameError("short C frame")
        code, err = int(f[0], 16), int(f[2], 16)
        offset = -int(f[1][1:], 16) if f[1].startswith("-") else int(f[1], 16)
        self._ref = (code, offset, err)

    def _on_state(self, f: list[str]) -> None:
        if len(f) < 4:
            raise FrameError("short T frame")
        state, error, head, overruns = (int(x, 16) for x in f[:4])
        self._state = STATE_NAMES.get(state, f"unknown({state})")
        self._error, self._head, self._overruns = error, head, overruns
        self._message = ",".join(f[4:])
        if self._state in _TERMINAL and self._seq_synced and head > self.next_seq:
            # Every sample below head was sent before this frame: missing ones are lost.
            self._lose(head - self.next_seq)
            self.next_seq = head

    def _on_samples(self, f: list[str]) -> None:
        if len(f) < 3:
            raise FrameError("short S frame")
        seq0, base = int(f[0], 16), int(f[1], 16)
        items = f[2].split(";")
        if self._hdr is None:
            if self.attach:
                # Decoded when the repeated H frame comes (bounded: the oldest go).
                self._early.append(f)
                if len(self._early) > _MAX_EARLY_FRAMES:
                    del self._early[0]
                    self.skipped_frames += 1
                return
            # Without the header there is no period nor tick rate to decode against.
            raise FrameError("S frame before the H frame")
        period = self._hdr["period_tick"]
        recs = np.zeros(len(items), RECORD_DTYPE)
        deadline = base
        for i, item in enumerate(items):
            parts = item.split(":")
            if len(parts) > 3 or not parts[0]:
                raise FrameError("bad sample item")
            deadline += int(parts[1], 16) if len(parts) > 1 and parts[1] else period
            recs[i] = (seq0 + i, deadline, deadline + _hex(parts[0]),
                       int(parts[2], 16) if len(parts) > 2 else 0, self._hdr["cpu"])
        if not self._seq_synced:
            # Late attach: the first samples seen start the run; none before are lost.
            self._seq_synced, self.next_seq = True, seq0
            if self._state == "booting":
                self._state = "running"  # S frames are only sent while running
        if seq0 > self.next_seq:
            self._lose(seq0 - self.next_seq)
        elif seq0 < self.next_seq:
            recs = recs[recs["seq"] >= np.uint64(self.next_seq)]   # repeated: keep once
        if len(recs):
            self._pending.append(recs)
            self.next_seq = int(recs["seq"][-1]) + 1

    def _restart(self, why: str) -> None:
        """Stop decoding: what follows belongs to another probe run (state error)."""
        self._restarted = True
        self._state, self._error, self._message = "error", 0, why

    def _lose(self, n: int) -> None:
        self.lost += n
        self._pending_lost += n

    # -- RingReader interface ----------------------------------------------------------

    def magic_ok(self) -> bool:
        """True once the header frame has been decoded."""
        self._pump()
        return self._hdr is not None

    def state(self) -> str:
        self._pump()
        return self._state

    def header(self) -> RingHeader:
        self._pump()
        h = self._hdr
        if h is None:
            raise RingError("no irqlab header frame on the console yet: the probe did not "
                            "start, or does not run with sink=console")
        return RingHeader(
            version=h["version"], record_size=RECORD_DTYPE.itemsize, capacity=h["capacity"],
            arch=ARCH_NAMES.get(h["arch"], f"unknown({h['arch']})"), tick_hz=h["tick_hz"],
            tick_method=TICK_METHODS.get(h["tick_method"], f"unknown({h['tick_method']})"),
            timer_mode=TIMER_MODES.get(h["timer_mode"], f"unknown({h['timer_mode']})"),
            period_tick=h["period_tick"], state=self._state, error=self._error,
            head=max(self._head, self.next_seq), overruns=self._overruns, apic_hz=0,
            idle=IDLE_NAMES.get(h["idle"], f"unknown({h['idle']})"),
            inject_every=h["inject_every"], inject_irqoff_tick=h["inject_irqoff_tick"],
            build_id=h["build_id"], message=self._message,
            ref_counter=ref_counter_name(self._ref[0]), ref_offset_tick=self._ref[1],
            ref_offset_err_tick=self._ref[2])

    def poll(self, max_records: int | None = None) -> SampleBatch:
        """Samples decoded since the last poll, and how many were lost before them."""
        self._pump()
        recs = (np.concatenate(self._pending) if len(self._pending) > 1
                else self._pending[0] if self._pending else np.empty(0, RECORD_DTYPE))
        self._pending = []
        if max_records is not None and len(recs) > max_records:
            self._pending = [recs[max_records:]]
            recs = recs[:max_records]
        lost, self._pending_lost = self._pending_lost, 0
        return SampleBatch(records=recs, lost=lost)

    def stats(self) -> dict[str, int]:
        """Frame-level counters, for run metadata."""
        out = {"frames": self.frames, "bad_frames": self.bad_frames,
               "missing_frames": self.missing_frames, "dropped_bytes": self.dropped_bytes,
               "header_repeats": self.header_repeats}
        if self.attach:
            out.update(skipped_lines=self.skipped_lines,
                       skipped_frames=self.skipped_frames + len(self._early))
        if self._restarted:
            out["ignored_frames"] = self.ignored_frames
        return out

    def metadata(self) -> dict[str, Any]:
        return {"console_sink": self.stats()}

    def close(self) -> None:
        self._read = None


def decode_log(path: str | Path) -> tuple[ConsoleReader, SampleBatch]:
    """Decode a saved console log: (reader with header/state/counters, all samples)."""
    reader = ConsoleReader()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            reader.feed(chunk)
    reader.finish()
    return reader, reader.poll()


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m irqlab.samples.console",
        description="Decode an irqlab probe console log (sink=console) into samples.")
    ap.add_argument("log", type=Path, help="saved console output (e.g. xl console > FILE)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of text")
    ap.add_argument("--latencies", type=Path, default=None,
                    help="also write one latency in ns per line to this file")
    args = ap.parse_args(argv)
    reader, batch = decode_log(args.log)
    if not reader.magic_ok():
        print(f"{args.log}: no irqlab header frame found "
              f"({reader.bad_frames} damaged frames)", file=sys.stderr)
        return 1
    hdr = reader.header()
    lat_ns = batch.latency_tick * 1e9 / hdr.tick_hz
    out = {"arch": hdr.arch, "state": hdr.state, "tick_hz": hdr.tick_hz,
           "timer_mode": hdr.timer_mode, "idle": hdr.idle, "build_id": hdr.build_id,
           "samples": len(batch), "lost": reader.lost, "overruns": hdr.overruns,
           "ref_counter": hdr.ref_meta(), **reader.stats()}
    if len(batch):
        out.update({"min_ns": float(lat_ns.min()), "mean_ns": float(lat_ns.mean()),
                    "max_ns": float(lat_ns.max()),
                    **{f"p{p}_ns": float(np.percentile(lat_ns, p)) for p in (50, 99, 99.9)}})
    if args.latencies:
        np.savetxt(args.latencies, lat_ns, fmt="%.0f")
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>15}: {v:.0f}" if isinstance(v, float) else f"{k:>15}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
