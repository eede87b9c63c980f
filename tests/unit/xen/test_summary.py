"""`irqlab xentrace` counts as xenalyze --summary does.

The capture tests/fixtures/xen/dom0-cpu.xentrace.xz was recorded here under QEMU TCG
(tests/fixtures/xen/README.md): Xen 4.17 + Debian's Linux dom0 + the probe as a PVH domU on
one pCPU, dom0 burning CPU. The real xenalyze (Debian's, from the dom0 toolstack cache) is
run on it and on a synthetic file, and its per-vCPU runstate counts and hypercall counts
must equal ours, its totals (count x its integer mean cycles) within 1 %. The replay's
rules are also checked on hand-made records (continue_running, start of day, the last
running interval), and the C record index against the Python reference."""

from __future__ import annotations

import json
import lzma
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from irqlab.xen.index import index_records, index_records_python
from irqlab.xen.records import encode_record, encode_window
from irqlab.xen.summary import STATE_NAMES, summarize
from irqlab.xen.xenalyze import find_xenalyze

FIXTURES = Path(__file__).parents[2] / "fixtures" / "xen"
CAPTURE = FIXTURES / "dom0-cpu.xentrace.xz"
RUN = json.loads((FIXTURES / "dom0-cpu.samples.json").read_text())["run"]
HZ = RUN["tsc_hz"]
RUNNING, RUNNABLE, BLOCKED = 0, 1, 2


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("xentrace") / "dom0-cpu.trc"
    out.write_bytes(lzma.decompress(CAPTURE.read_bytes()))
    return out


def run_cli(args: list[str], _db: None = None) -> SimpleNamespace:
    """`irqlab ARGS` in a child process (the command takes no --db)."""
    proc = subprocess.run([sys.executable, "-m", "irqlab.cli.main", *args],
                          capture_output=True, text=True, timeout=120)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    return SimpleNamespace(code=proc.returncode, lines=lines, stdout=proc.stdout,
                           stderr=proc.stderr)


def parse_xenalyze(text: str) -> tuple[dict, dict]:
    """({(dom, vcpu, state): (count, mean cycles)}, {(dom, vcpu, name): count}) of the
    per-vCPU sections of `xenalyze --summary`."""
    runstates: dict = {}
    calls: dict = {}
    dom = vcpu = None
    section = None
    for line in text.splitlines():
        if m := re.match(r"\|-- Domain (\d+) --\|", line):
            dom, vcpu, section = int(m.group(1)), None, None
        elif m := re.match(r"-- v(\d+) --", line):
            vcpu, section = int(m.group(1)), None
        elif vcpu is None:
            continue
        elif line.strip() == "Runstates:":
            section = "runstates"
        elif line.startswith("PV events:"):
            section = "pv"
        elif section == "runstates" and (m := re.match(
                r"\s+(\w+):\s+(\d+)\s+[\d.]+s\s+(\d+)", line)):
            if m.group(1) in STATE_NAMES:
                runstates[(dom, vcpu, m.group(1))] = (int(m.group(2)), int(m.group(3)))
        elif section == "runstates" and not line.startswith(" "):
            section = None
        elif section == "pv" and (m := re.match(r"\s+(\S+)\s+\[\s*\d+\]:\s+(\d+)", line)):
            calls[(dom, vcpu, m.group(1))] = int(m.group(2))
    return runstates, calls


def ours(path: Path) -> tuple[dict, dict]:
    res = run_cli(["xentrace", str(path), "--tsc-hz", str(HZ), "--json"], None)
    assert res.code == 0, res.stderr
    runstates = {(x["domain"], x["vcpu"], x["state"]): (x["count"], x["total_ns"])
                 for x in res.lines if x["type"] == "runstate" and x["count"]}
    calls = {(x["domain"], x["vcpu"], x["name"]): x["count"]
             for x in res.lines if x["type"] == "hypercall"}
    return runstates, calls


def assert_agree(path: Path) -> None:
    tool = find_xenalyze()
    if tool is None:
        pytest.skip("xenalyze not found: run scripts/fetch-xen-dom0.sh (./setup.sh does)")
    proc = tool.summary(path, HZ)
    assert proc.returncode == 0, proc.stderr[-500:]
    theirs_rs, theirs_calls = parse_xenalyze(proc.stdout)
    our_rs, our_calls = ours(path)
    assert theirs_rs, proc.stdout[:500]
    assert {k: v[0] for k, v in our_rs.items()} == {k: v[0] for k, v in theirs_rs.items()}
    for key, (count, mean_cycles) in theirs_rs.items():
        total_ns = count * mean_cycles * 1e9 / HZ       # its mean is truncated
        assert our_rs[key][1] == pytest.approx(total_ns, rel=0.01, abs=count * 1e9 / HZ)
    assert our_calls == theirs_calls


@pytest.mark.slow
def test_agrees_with_xenalyze_on_a_tcg_capture(plain: Path) -> None:
    assert_agree(plain)
    rs, calls = ours(plain)
    # dom0 burning CPU on the probe's one pCPU: the probe waits runnable most of the time
    assert rs[(1, 0, "runnable")][1] > rs[(1, 0, "running")][1]
    assert calls[(0, 0, "mmu_update")] > 0


def _synthetic() -> bytes:
    ev = 0x00021001

    def rs(dom: int, old: int, new: int, t: int) -> bytes:
        return encode_record(ev | old << 8 | new << 4, (dom << 16,), t)
    cont = 0x00021002
    hc = 0x0020110D       # TRC_PV_HYPERCALL_V2 | TRC_64_FLAG, op in the first word
    recs = b"".join([
        encode_record(hc, (29,), 50),                    # before any schedule: default
        encode_record(cont, (0 << 16,), 100),            # d0 ran from the start
        encode_record(hc, (1 | 1 << 20, 5), 120),        # mmu_update with an argument
        rs(0, RUNNING, BLOCKED, 200), rs(1, BLOCKED, RUNNABLE, 200),
        rs(1, RUNNABLE, RUNNING, 210),                   # d1 first seen running: starts
        rs(1, RUNNING, BLOCKED, 300), rs(0, BLOCKED, RUNNABLE, 310),
        rs(0, RUNNABLE, RUNNING, 320),
        encode_record(hc, (29,), 330), encode_record(hc, (29,), 340),
        encode_record(cont, (0 << 16,), 400),            # splits d0's running
        encode_record(0x0002800A, (0, 0, 1, 0), 450),    # a switch record: no effect
        encode_record(hc, (24 | 3 << 20, 1, 2), 500),
    ])
    return encode_window(0, recs)


def test_replay_rules_on_synthetic_records(tmp_path: Path) -> None:
    s = summarize(index_records(_synthetic()))
    d0 = s.runstates[(0, 0)]
    # running: first_tsc(50)->200 (start of day), 320->400 (continue), 400->500 (end)
    assert d0[RUNNING] == [3, 150 + 80 + 100]
    assert d0[BLOCKED] == [1, 110] and d0[RUNNABLE] == [1, 10]
    # d1 left INIT at 210: its blocked->runnable at 200 is not counted
    assert s.runstates[(1, 0)][RUNNING] == [1, 90] and s.runstates[(1, 0)][RUNNABLE] == [0, 0]
    assert s.hypercalls == {(0, 0): {1: 1, 24: 1, 29: 2}}
    trc = tmp_path / "synthetic.trc"
    trc.write_bytes(_synthetic())
    assert_agree(trc)


def test_c_index_equals_the_python_reference() -> None:
    data = lzma.decompress(CAPTURE.read_bytes())
    a, b = index_records(data), index_records_python(data)
    for col in ("off", "cpu", "event", "nextra", "flags", "tsc"):
        assert np.array_equal(getattr(a, col), getattr(b, col)), col
    assert a.end == b.end == len(data)


@pytest.mark.slow
def test_bad_input_is_one_line_exit_2(tmp_path: Path, plain: Path) -> None:
    res = run_cli(["xentrace", str(plain)], None)
    assert res.code == 2 and "--tsc-hz" in res.stderr and "Traceback" not in res.stderr
    res = run_cli(["xentrace", str(tmp_path / "missing.trc"), "--tsc-hz", "1e9"], None)
    assert res.code == 2 and "no such file" in res.stderr
    junk = tmp_path / "junk"
    junk.write_bytes(b"")
    res = run_cli(["xentrace", str(junk), "--tsc-hz", "1e9"], None)
    assert res.code == 2 and "no timed xentrace record" in res.stderr
    res = run_cli(["xentrace", str(plain), "--tsc-hz", "-5"], None)
    assert res.code == 2


def _random_trace(seed: int) -> bytes:
    """Records that break the rules too: 3 pCPUs in windows, vCPUs of 3 domains moving
    between them with states that often disagree with what was seen, continue_running,
    lost records, hypercalls (V2 and multicall entries, ops beyond the table), HVM
    records, records cut short; odd seeds put windows out of time order (the replay then
    sorts, even ones are replayed in file order)."""
    rng = np.random.default_rng(seed)
    out, t = b"", 100
    for _w in range(40):
        cpu = int(rng.integers(0, 3))
        if seed % 2 and t > 500:
            t -= int(rng.integers(0, 400))     # windows of pCPUs dumped out of time order
        recs = b""
        for _r in range(int(rng.integers(1, 30))):
            t += int(rng.integers(0, 50))
            kind = rng.random()
            key = int(rng.integers(0, 3)) << 16 | int(rng.integers(0, 2))
            if kind < 0.45:
                old, new = (int(x) for x in rng.integers(0, 4, size=2))
                recs += encode_record(0x00021001 | old << 8 | new << 4, (key,), t)
            elif kind < 0.55:
                recs += encode_record(0x00021002, (key,), t)
            elif kind < 0.58:
                recs += encode_record(0x0001F001, (int(rng.integers(1, 9)),), t)
            elif kind < 0.85:
                minor = int(rng.choice([13, 14, 1]))
                op = int(rng.choice([1, 12, 24, 29, 36, 70]))
                recs += encode_record(0x00201000 | minor, (op | 1 << 20, 3), t)
            elif kind < 0.95:
                recs += encode_record(0x00081001, (), t)          # an HVM record
            else:
                recs += encode_record(0x00021001, (), t)          # no vCPU word
        out += encode_window(cpu, recs)
    return out


@pytest.mark.parametrize("source", ["capture", "synthetic"] + [f"random-{k}" for k in range(25)])
def test_c_replay_equals_the_python_reference(source: str) -> None:
    from irqlab import native
    from irqlab.xen.summary import summarize_data, summarize_python
    if native.lib() is None:
        pytest.skip(f"irqlab/native not usable ({native.why_not()}): make -C irqlab/native")
    data = (lzma.decompress(CAPTURE.read_bytes()) if source == "capture" else
            _synthetic() if source == "synthetic" else _random_trace(int(source[7:])))
    idx = index_records(data)
    ref = summarize_python(idx)
    # the C replay over the index, and the one C walk over the bytes (which gives way to
    # the index when windows go back in time: odd random seeds)
    for fast in (summarize(idx), summarize_data(data)):
        assert fast.lines(HZ) == ref.lines(HZ)
        assert (fast.records, fast.lost_records, fast.cpus, fast.first_tsc,
                fast.last_tsc) == (ref.records, ref.lost_records, ref.cpus, ref.first_tsc,
                                   ref.last_tsc)
