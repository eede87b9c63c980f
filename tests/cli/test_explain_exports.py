"""`irqlab explain --text / --perfetto / --chrome-json` on a stored real capture
(tests/unit/explain/data, 5,293 events on 2 CPUs, x86-tsc clock).

The run's samples are placed inside the capture (tick rate 1 GHz, clock offset 0), so
they are explained: the Perfetto file must hold them, their spikes and attribution. The
ftrace text is parsed back (with the line pattern of Perfetto's systrace tokenizer) into
the same events explain decoded, and compared with `trace-cmd report` of the --dat file.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from irqlab.explain.export import task_state
from irqlab.explain.load import load_capture
from irqlab.measure import window_dict
from irqlab.samples.record import RECORD_DTYPE
from irqlab.stats import RunStats
from irqlab.store import Store
from irqlab.store.interface import NewRun
from tests.conftest import call_cli

CAPTURE = (Path(__file__).parents[1] / "unit" / "explain" / "data"
           / "idle_exit_unrecorded.irqtrace.gz")
EVENTS = 5293
SPAN = (5906602402638, 5906789666742)     # start/stop markers of the capture (ticks)
N_SAMPLES, SPIKE_EVERY, SPIKE_NS = 150, 10, 80_000

# Perfetto's systrace line tokenizer (src/trace_processor/importers/systrace/
# systrace_line_tokenizer.cc): what its text importer requires of a line.
PERFETTO_LINE = re.compile(r"-(\d+)\s+\(?\s*(\d+|-+)?\)?\s?\[(\d+)\]\s*"
                           r"[a-zA-Z0-9.]{0,4}\s+(\d+\.\d+):\s+(\S+):")
LINE = re.compile(r"^\s*(?P<comm>.+)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+"
                  r"(?P<secs>\d+)\.(?P<ns>\d{9}): (?P<event>\S+): ?(?P<fields>.*)$")


def _add_traced_run(store: Store) -> int:
    """A 1 GHz run whose deadlines fall inside the capture, every 10th sample a spike."""
    tick_hz, period = 1_000_000_000, 1_000_000
    meta = {"host": {"hostname": "h"}, "probe": {"timer_mode": "tsc-deadline"},
            "hooks": {"trace": {"file": str(CAPTURE)}}}
    rid = store.create_run(NewRun("traced", "guest", {"window_ns": 10**9, "warmup": 1,
                                                      "period_ns": period}, meta))
    store.update_run(rid, arch="x86_64", accel="kvm", emulated=False, tick_hz=tick_hz,
                     period_ns=period, threshold_ns=30_000)
    rec = np.zeros(N_SAMPLES, RECORD_DTYPE)
    rec["seq"] = np.arange(N_SAMPLES)
    rec["deadline_tick"] = SPAN[0] + 500_000 + rec["seq"] * period
    lat = np.where(rec["seq"] % SPIKE_EVERY == 0, SPIKE_NS, 5_000).astype(np.int64)
    rec["entry_tick"] = rec["deadline_tick"] + lat.astype(np.uint64)
    stats = RunStats(tick_hz, 30_000, 10**9, 1)
    wins = stats.add(rec["deadline_tick"].astype(np.int64), lat)
    last, s = stats.finish()
    store.add_windows(rid, [window_dict(w, tick_hz) for w in wins + last])
    store.add_samples(rid, rec)
    store.finish_run(rid, "ok", {"type": "summary", "version": 1, "run_id": rid,
                                 "name": "traced", "samples": s.samples,
                                 "tick_hz": tick_hz, "status": "ok"})
    return rid


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("exports")
    db = tmp / "irqlab.duckdb"
    with Store(db) as st:
        _add_traced_run(st)
    files = {k: tmp / name for k, name in (("text", "t.txt"), ("perfetto", "t.pftrace"),
                                           ("chrome", "t.json"), ("dat", "t.dat"))}
    res = call_cli(["explain", "1", "--json", "--text", str(files["text"]),
                   "--perfetto", str(files["perfetto"]), "--chrome-json",
                   str(files["chrome"]), "--dat", str(files["dat"])], db)
    assert res.code == 0, res.stderr
    (info,) = res.lines
    return {"info": info, "files": files, "db": db}


def _expected() -> Counter:
    """(ns, cpu, pid, event) of every event, from explain's own decoded tables."""
    tr = load_capture(CAPTURE)
    out: Counter = Counter()
    for name, tb in tr.tables.items():
        for ts, cpu, pid in zip(tb["ts"].tolist(), tb["cpu"].tolist(),
                                tb["common_pid"].tolist()):
            out[(ts, cpu, pid, name)] += 1       # 1 GHz: a tick is a ns
    return out


def _parse_text(path: Path) -> list[dict]:
    events = []
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            continue
        assert PERFETTO_LINE.search(line), line
        m = LINE.match(line)
        assert m, line
        events.append({"comm": m["comm"].strip(), "pid": int(m["pid"]), "cpu": int(m["cpu"]),
                       "ns": int(m["secs"]) * 10**9 + int(m["ns"]), "event": m["event"],
                       "fields": m["fields"]})
    return events


def _fields(text: str, names: list[str]) -> dict[str, str]:
    """name=value pairs of a line, the names known and in order (values may hold spaces)."""
    out, rest = {}, text.replace(" ==> ", " ")
    for i, name in enumerate(names):
        assert rest.startswith(f"{name}="), (name, rest)
        rest = rest[len(name) + 1:]
        cut = rest.find(f" {names[i + 1]}=") if i + 1 < len(names) else len(rest)
        out[name], rest = rest[:cut], rest[cut + 1:]
    return out


def test_ftrace_text_parses_back_into_the_same_events(exported):
    assert exported["info"]["text"]["events"] == EVENTS
    text = exported["files"]["text"]
    assert text.read_text().startswith("# tracer: nop\n")   # how Perfetto detects it
    events = _parse_text(text)
    assert Counter((e["ns"], e["cpu"], e["pid"], e["event"]) for e in events) == _expected()
    assert [e["ns"] for e in events] == sorted(e["ns"] for e in events)
    # Field values: those explain decoded, compared one by one.
    tr = load_capture(CAPTURE)
    sw = tr.t("sched_switch")
    lines = [e for e in events if e["event"] == "sched_switch"]
    assert len(lines) == len(sw)
    names = ["prev_comm", "prev_pid", "prev_prio", "prev_state", "next_comm", "next_pid",
             "next_prio"]
    for e, i in zip(lines, range(len(sw))):
        f = _fields(e["fields"], names)
        assert int(f["prev_pid"]) == sw["prev_pid"][i] and int(f["next_pid"]) == sw["next_pid"][i]
        assert f["prev_comm"] == sw["prev_comm"][i].decode()
        assert f["prev_state"] == task_state(int(sw["prev_state"][i]))
        assert e["pid"] == sw["common_pid"][i]
    irq = [_fields(e["fields"], ["irq", "name"]) for e in events
           if e["event"] == "irq_handler_entry"]
    assert [x["name"] for x in irq] == tr.t("irq_handler_entry")["name"].tolist()
    prints = [_fields(e["fields"], ["ip", "buf"])["buf"] for e in events
              if e["event"] == "print"]
    assert [p.encode() for p in prints] == tr.t("print")["buf"].tolist()
    # Task names: the vCPU thread is named (from the capture's own switches).
    assert any(e["comm"] == "CPU 0/TCG" and e["pid"] == 11258 for e in events)


def test_ftrace_text_agrees_with_trace_cmd_report(exported):
    """trace-cmd report prints the --dat file's stamps in seconds, the same to the us as
    the --text file's (issue 29: it printed raw TSC counts before)."""
    exe = shutil.which("trace-cmd")
    if exe is None:
        pytest.skip("trace-cmd is not installed (./setup.sh installs it)")
    proc = subprocess.run([exe, "report", "-i", str(exported["files"]["dat"])],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    theirs = Counter()
    for line in proc.stdout.splitlines():
        m = re.match(r"^\s*(.+)-(\d+)\s+\[(\d+)\]\s*(\d+)\.(\d{6}): (\S+):", line)
        if m:       # seconds.microseconds, as for any ns clock
            theirs[(m[1].strip(), int(m[2]), int(m[3]), int(m[4]) * 10**6 + int(m[5]),
                    m[6])] += 1
    # trace-cmd rounds ns to the nearest us (trace-read.c: (ts + 500) / 1000).
    ours = Counter((e["comm"], e["pid"], e["cpu"], (e["ns"] + 500) // 1000, e["event"])
                   for e in _parse_text(exported["files"]["text"]))
    assert sum(theirs.values()) == EVENTS and ours == theirs


def test_perfetto_protobuf_reads_back_with_perfettos_definitions(exported):
    pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    trace = pb.Trace()
    trace.ParseFromString(exported["files"]["perfetto"].read_bytes())
    info = exported["info"]
    # Host events: every one, on its CPU, at its time, typed where Perfetto has a type.
    got: Counter = Counter()
    typed = Counter()
    for p in trace.packet:
        if p.HasField("ftrace_events"):
            for e in p.ftrace_events.event:
                kind = e.WhichOneof("event")
                name = e.generic.event_name if kind == "generic" else kind
                typed[kind != "generic"] += 1
                got[(e.timestamp, p.ftrace_events.cpu, e.pid, name)] += 1
    assert got == _expected()
    assert typed[True] > 0.9 * EVENTS          # sched, irq, softirq, hrtimer, timer, print
    switches = [e.sched_switch for p in trace.packet if p.HasField("ftrace_events")
                for e in p.ftrace_events.event if e.HasField("sched_switch")]
    assert sum(s.next_comm == "CPU 0/TCG" for s in switches) > 0
    # The tracks of the run: latency counter, spikes, attribution.
    tracks = {p.track_descriptor.uuid: p.track_descriptor.name for p in trace.packet
              if p.HasField("track_descriptor")}
    assert "irqlab run 1" in tracks.values()
    by_track: dict[str, list] = {}
    for p in trace.packet:
        if p.HasField("track_event"):
            by_track.setdefault(tracks[p.track_event.track_uuid], []).append(p)
    counter = next(v for k, v in by_track.items() if k.startswith("sample latency"))
    assert len(counter) == N_SAMPLES == info["perfetto"]["samples"]
    assert sorted(p.track_event.counter_value for p in counter)[-1] == SPIKE_NS
    assert counter[0].timestamp == SPAN[0] + 500_000             # the first deadline
    spikes = [p for k, v in by_track.items() if k.startswith("spikes") for p in v
              if p.track_event.name.startswith("sample ")]
    explained = {s["seq"]: s for s in info["samples"]}
    assert len(spikes) == len(explained) == N_SAMPLES // SPIKE_EVERY
    for p in spikes:
        ann = {a.name: a for a in p.track_event.debug_annotations}
        s = explained[ann["seq"].int_value]
        assert ann["latency_ns"].int_value == s["latency_ns"] == SPIKE_NS
        assert p.timestamp == SPAN[0] + 500_000 + s["seq"] * 1_000_000
        for c in s["causes"]:
            assert ann[f"cause: {c['cause']}"].int_value == c["ns"]
    causes = [p for k, v in by_track.items() if k.startswith("attribution") for p in v]
    names = {p.track_event.name for p in causes if p.track_event.name}
    assert names == {c["cause"] for s in info["samples"] for c in s["causes"] if c["ns"]}


def test_chrome_json_is_kept_and_outputs_are_reported(exported):
    data = json.loads(exported["files"]["chrome"].read_text())
    assert len(data["traceEvents"]) == exported["info"]["chrome_json"]["events"]
    res = call_cli(["explain", "1", "--perfetto", str(exported["files"]["perfetto"])],
                  exported["db"])
    assert res.code == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1].startswith(
        f"wrote {exported['files']['perfetto']}: Perfetto protobuf trace, {EVENTS} host events")


def test_two_outputs_on_one_file_is_a_usage_error(exported, tmp_path):
    out = tmp_path / "same"
    res = call_cli(["explain", "1", "--text", str(out), "--perfetto", str(out)],
                  exported["db"])
    assert res.code == 2 and "--text and --perfetto both name" in res.stderr
    assert not out.exists()


def test_overlapping_spikes_get_lanes_of_their_own():
    from irqlab.explain.perfetto import _lanes, _merged
    windows = [(0, 10), (5, 15), (10, 20), (12, 13), (30, 40)]
    assert _lanes(windows) == [0, 1, 0, 2, 0]
    assert _merged(windows) == [(0, 20), (30, 40)]
