"""trace.dat written from real captures must read back in trace-cmd exactly as irqlab's own
decoder reads the capture: same events, CPUs, timestamps, event names, pids, task names.

The captures are the real ones of tests/unit/explain/data (see its README): one with the
x86-tsc clock and the kernel's header_event, one without clock or header_event (the
defaults are then written)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from irqlab.explain.load import decode_capture
from irqlab.trace.archive import read_archive
from irqlab.trace.formats import parse_format, parse_header_page
from irqlab.trace.ringbuf import RB_MISSED_EVENTS, decode
from irqlab.trace.tracedat import (MAGIC, cmdlines_from_switches, write_capture_tracedat,
                                   write_tracedat)

DATA = Path(__file__).parents[1] / "explain" / "data"
TSC_CAPTURE = DATA / "idle_exit_unrecorded.irqtrace.gz"        # clock x86-tsc, 2 CPUs
PLAIN_CAPTURE = DATA / "idle_exits_recorded.irqtrace.gz"       # no clock / header_event
CAPTURES = [TSC_CAPTURE, PLAIN_CAPTURE]

# "   comm-pid   [cpu] ts: name:" as trace-cmd report prints each record (comm may hold
# spaces and dashes, e.g. "CPU 0/TCG"; the pid is the last "-digits" before the CPU).
_LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s*"
                   r"(?P<ts>\d+(?:\.\d+)?):\s+(?P<name>\w+):(?P<rest>.*)$")


def _trace_cmd() -> str:
    exe = shutil.which("trace-cmd")
    if exe is None:
        pytest.skip("trace-cmd is not installed (./setup.sh installs it): cannot check "
                    "that it reads the written trace.dat")
    return exe


def _report(path: Path, *extra: str) -> list[dict]:
    """trace-cmd report -t (full-precision stamps) of a file, one dict per record; fails
    on a non-zero exit or on any output line that is neither a record nor known chatter.
    A record whose format the capture did not keep prints as ``[UNKNOWN EVENT]`` with no
    stamp: it becomes a row with name None."""
    proc = subprocess.run([_trace_cmd(), "report", "-t", "-i", str(path), *extra],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "error" not in proc.stderr.lower() and "failed" not in proc.stderr.lower(), \
        proc.stderr
    rows = []
    for line in proc.stdout.splitlines():
        m = _LINE.match(line)
        if m is None and line.startswith("[UNKNOWN EVENT]"):
            rows.append({"name": None, "line": line})
            continue
        if m is None:
            assert line.startswith("cpus=") or "EVENTS DROPPED" in line or not line, line
            continue
        rows.append({"comm": m["comm"].strip(), "pid": int(m["pid"]), "cpu": int(m["cpu"]),
                     "ts": _ns(m["ts"]), "name": m["name"], "rest": m["rest"],
                     "line": line})
    return rows


def _ns(text: str) -> int:
    """trace-cmd's stamp in ns: raw counts for counter clocks (x86-tsc), else
    seconds.nanoseconds with -t."""
    if "." not in text:
        return int(text)
    sec, frac = text.split(".")
    assert len(frac) == 9, text
    return int(sec) * 1_000_000_000 + int(frac)


def _ours(header: dict, per_cpu: dict[int, bytes]) -> tuple[list[tuple], int]:
    """(ts, cpu, event name, common_pid) of every record of a stored format, from irqlab's
    decoder, and how many records have no stored format."""
    ev = decode(per_cpu, parse_header_page(header["header_page"]))
    names = np.empty(len(ev), object)
    pids = np.empty(len(ev), np.int64)
    for key, text in header["formats"].items():
        fmt = parse_format(text, key.split(":")[0])
        idx = ev.select(fmt)
        names[idx] = fmt.name
        pids[idx] = ev.columns(fmt, ["common_pid"], idx)["common_pid"]
    known = [i for i, n in enumerate(names.tolist()) if n is not None]
    rows = sorted(zip(ev.ts[known].tolist(), ev.cpu[known].tolist(), names[known].tolist(),
                      pids[known].tolist()))
    return rows, len(ev) - len(known)


def _theirs(rows: list[dict]) -> tuple[list[tuple], int]:
    known = [r for r in rows if r["name"] is not None]
    return (sorted((r["ts"], r["cpu"], r["name"], r["pid"]) for r in known),
            len(rows) - len(known))


@pytest.fixture(scope="module", params=CAPTURES, ids=lambda p: p.name.split(".")[0])
def capture(request):
    header, per_cpu = read_archive(request.param)
    return header, per_cpu


def _write(tmp_path: Path, header: dict, per_cpu: dict, **kw) -> tuple[Path, int]:
    out = tmp_path / "trace.dat"
    tr = decode_capture(header, per_cpu)
    cmdlines = kw.pop("cmdlines", cmdlines_from_switches(tr.t("sched_switch").cols,
                                                         header.get("vmm_threads")))
    n = write_capture_tracedat(out, {**header, **kw}, per_cpu, cmdlines)
    return out, n


def test_every_record_reads_back_with_the_same_stamp_cpu_name_and_pid(tmp_path, capture):
    header, per_cpu = capture
    out, n = _write(tmp_path, header, per_cpu)
    assert n == out.stat().st_size and out.read_bytes().startswith(MAGIC + b"6\0")
    rows = _report(out)
    (ours, our_unknown), (theirs, their_unknown) = _ours(header, per_cpu), _theirs(rows)
    assert len(rows) == len(ours) + our_unknown == decode_capture(header, per_cpu).events
    assert len(ours) > 1000 and their_unknown == our_unknown
    assert theirs == ours
    # Both CPUs and several event types are really in there (not a degenerate match).
    assert {c for _, c, _, _ in theirs} == set(per_cpu)
    assert len({name for _, _, name, _ in theirs}) >= 5


def test_tsc_stamps_are_printed_as_raw_counts_and_first_records_match(tmp_path):
    header, per_cpu = read_archive(TSC_CAPTURE)
    assert header["clock"] == "x86-tsc"
    out, _ = _write(tmp_path, header, per_cpu)
    rows = _report(out)
    assert all("." not in r["line"].split("]", 1)[1].split(":", 1)[0] for r in rows[:50])
    # The first records of the capture, as irqlab's text export shows them too.
    assert [(r["ts"], r["cpu"], r["name"]) for r in rows[:3]] == [
        (5906602402638, 1, "sched_waking"), (5906602406200, 1, "sched_wakeup"),
        (5906602408826, 1, "softirq_exit")]


def test_another_clock_is_shown_in_seconds_with_the_same_ns(tmp_path):
    header, per_cpu = read_archive(TSC_CAPTURE)
    out, _ = _write(tmp_path, header, per_cpu, clock="mono")
    rows = _report(out)
    assert "." in rows[0]["line"].split("]", 1)[1].split(":", 1)[0]
    assert _theirs(rows) == _ours(header, per_cpu)
    assert _theirs(rows)[0][0][0] == 5906602402638


@pytest.mark.parametrize("tick_hz", [1_000_000_000, 2_893_437_000, 24_000_000])
def test_tsc_stamps_at_the_run_rate_print_in_seconds_as_the_text_export(tmp_path, tick_hz):
    """With the run's tick rate the x86-tsc stamps print in seconds, each the ftrace
    text's ns (irqlab.explain.export: count * 1e9 // rate) to within 2 ns, on the same
    timeline (issue 29). 24 MHz: an arm64 counter's rate, where a rate below 1 GHz
    stretches the stamps."""
    from irqlab.explain.export import to_ns_function
    header, per_cpu = read_archive(TSC_CAPTURE)
    out = tmp_path / "trace.dat"
    write_capture_tracedat(out, header, per_cpu, {}, tick_hz)
    rows = _report(out)
    assert all("." in r["line"].split("]", 1)[1].split(":", 1)[0] for r in rows[:50])
    ours, _ = _ours(header, per_cpu)
    expected = to_ns_function(header, tick_hz)(np.array([r[0] for r in ours], np.uint64))
    theirs, _ = _theirs(rows)
    assert len(theirs) == len(ours) > 1000
    diff = np.array([t[0] for t in theirs], np.int64) - np.sort(expected)
    assert np.abs(diff).max() <= 2, np.abs(diff).max()
    assert [t[1:] for t in theirs][:3] == [o[1:] for o in ours][:3]


def test_task_names_come_from_the_switches_and_the_vmm_threads(tmp_path):
    header, per_cpu = read_archive(TSC_CAPTURE)
    tr = decode_capture(header, per_cpu)
    names = cmdlines_from_switches(tr.t("sched_switch").cols, header["vmm_threads"])
    assert names[26393] == "fio" and names[11258] == "CPU 0/TCG" and 0 not in names
    out, _ = _write(tmp_path, header, per_cpu)
    rows = _report(out)
    named = [r for r in rows if r["pid"] in names]
    assert len(named) > 100
    assert all(r["comm"] == names[r["pid"]] for r in named)
    assert any(r["comm"] == "CPU 0/TCG" for r in rows)
    # Without cmdlines trace-cmd learns a name only at the task's first switch: records
    # before it are "<...>". So the names of the early records above came from the file.
    bare, _ = _write(tmp_path, header, per_cpu, cmdlines={})
    unnamed = {r["pid"] for r in _report(bare) if r["comm"] == "<...>"}
    assert unnamed and unnamed <= set(names)


def test_switch_fields_decode_like_ours(tmp_path):
    header, per_cpu = read_archive(TSC_CAPTURE)
    sw = decode_capture(header, per_cpu).t("sched_switch")
    out, _ = _write(tmp_path, header, per_cpu)
    theirs = [(r["ts"], re.search(r"==> (.+):(\d+) \[", r["rest"]))
              for r in _report(out) if r["name"] == "sched_switch"]
    ours = [(ts, comm.split(b"\0")[0].decode(), pid) for ts, comm, pid in
            zip(sw["ts"].tolist(), sw["next_comm"].tolist(), sw["next_pid"].tolist())]
    assert len(ours) > 50
    assert sorted((ts, m[1], int(m[2])) for ts, m in theirs) == sorted(ours)


def test_a_cpu_missing_from_the_capture_gets_an_empty_slot(tmp_path):
    # A tracing_cpumask of CPUs 0 and 3: trace-cmd numbers CPUs by slot, so 1 and 2 must
    # be present and empty for the records to land on CPU 3.
    header, per_cpu = read_archive(TSC_CAPTURE)
    moved = {0: per_cpu[0], 3: per_cpu[1]}
    out, _ = _write(tmp_path, header, moved)
    rows = _report(out)
    assert Counter(r["cpu"] for r in rows) == Counter(c for _, c, _, _ in
                                                      _ours(header, moved)[0])
    assert {r["cpu"] for r in rows} == {0, 3}


def test_lost_events_flag_reaches_trace_cmd(tmp_path):
    header, per_cpu = read_archive(TSC_CAPTURE)
    hdr = parse_header_page(header["header_page"])
    pages = bytearray(per_cpu[1])
    at = 5 * hdr.page_size + hdr.commit_offset          # 6th page of CPU 1
    (commit,) = struct.unpack_from("<Q", pages, at)
    struct.pack_into("<Q", pages, at, commit | RB_MISSED_EVENTS)
    lossy = {0: per_cpu[0], 1: bytes(pages)}
    assert len(decode(lossy, hdr).missed) == 1
    out, _ = _write(tmp_path, header, lossy)
    proc = subprocess.run([_trace_cmd(), "report", "-i", str(out)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("EVENTS DROPPED") == 1


def test_pages_are_page_aligned_and_stored_untouched(tmp_path):
    header, per_cpu = read_archive(TSC_CAPTURE)
    out, _ = _write(tmp_path, header, per_cpu)
    raw = out.read_bytes()
    for cpu, blob in per_cpu.items():
        at = raw.find(blob[:4096])
        assert at > 0 and at % 4096 == 0
        assert raw[at:at + len(blob)] == blob


def test_partial_pages_and_bad_page_sizes_are_refused(tmp_path):
    header, per_cpu = read_archive(TSC_CAPTURE)
    kw = dict(header_page=header["header_page"], header_event=None,
              formats=header["formats"], clock=None)
    with pytest.raises(ValueError, match="not whole 4096-byte pages"):
        write_tracedat(tmp_path / "a.dat", pages_per_cpu={0: per_cpu[0][:-1]},
                       page_size=4096, **kw)
    with pytest.raises(ValueError, match="power of two"):
        write_tracedat(tmp_path / "b.dat", pages_per_cpu=per_cpu, page_size=4000, **kw)
    assert list(tmp_path.iterdir()) == []


def test_trace_cmd_dump_sees_the_headers_the_clock_and_the_cpu_data(tmp_path):
    """trace-cmd's own file dump: version, page size, the clock kept after the CPU pairs
    (v6 readers take the clock from there), the task names, and (offset, size) per CPU
    pointing at the capture's pages."""
    header, per_cpu = read_archive(TSC_CAPTURE)
    out, _ = _write(tmp_path, header, per_cpu)
    proc = subprocess.run([_trace_cmd(), "dump", "-i", str(out), "--summary", "--options",
                           "--flyrecord", "--clock", "--cmd-lines"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout + proc.stderr
    for want in ("6\t[Version]", "0\t[Little endian]", "8\t[Bytes in a long]",
                 "4096\t[Page size, bytes]", "2 [CPUs with tracing data]",
                 "[Option TRACECLOCK", "11258 CPU 0/TCG", "26393 fio"):
        assert want in text, want
    assert re.search(r"\[Tracing clock\]\s*\n\s*\[x86-tsc\]", text), text
    pairs = [tuple(map(int, m)) for m in
             re.findall(r"^\s*(\d+)\s+(\d+)\s+\[offset, size of cpu \d+\]", text, re.M)]
    raw = out.read_bytes()
    assert len(pairs) == 2
    for (offset, size), cpu in zip(pairs, (0, 1)):
        assert offset % 4096 == 0 and raw[offset:offset + size] == per_cpu[cpu]
