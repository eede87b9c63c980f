"""``irqlab bench serve``: the dashboard's runs page over a store of 100,000 runs.

The store: one run imported by `irqlab import tscdeadline` (a real run row: summary,
metadata, windows), copied by SQL into ``runs`` runs with their own ids, names, start
times, tags and p99.9 (so sorting and filtering see different values). Then `irqlab
serve` is started as a user starts it (its own process, a free port on 127.0.0.1; its
start, which reads every run's sort figures before it prints its URL, is a figure of its
own) and the runs page is fetched over HTTP: the first request after start, then
``rounds`` rounds of the first page in the default order and sorted by p99.9 (median,
min, max), and of the first page while another process holds the file writable (as a
run does: the server borrows it through the lending socket).
Memory is the server's peak RSS (VmHWM) after the rounds.

The baseline, measured in the same run on the same store: `irqlab list --json` (what a
user runs today to see the runs), its wall time and its peak RSS. Goals (issue 34):
first page <= 300 ms, server memory <= 300 MB.
"""

from __future__ import annotations

import http.client
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from irqlab.bench import irqlab_argv

GOAL_MS = 300.0
GOAL_MB = 300.0
_LOG_LINES = 10_000


def make_store(path: Path, runs: int) -> None:
    """A store of ``runs`` runs: one imported, the rest SQL copies of it."""
    from irqlab.bench.compare import write_log
    from irqlab.store.db import Store

    log = path.with_suffix(".log")
    write_log(log, _LOG_LINES)
    subprocess.run([*irqlab_argv(), "import", "tscdeadline", str(log),
                    "--tick-hz", "2400000000", "--db", str(path), "--json"],
                   check=True, stdout=subprocess.DEVNULL, timeout=300)
    with Store(path) as store:
        # Columns other than the ones varied are the imported run's own.
        store.con.execute(f"""
            INSERT INTO runs (run_id, name, target, arch, accel, emulated, status,
                started_at, ended_at, tick_hz, period_ns, threshold_ns, message, params,
                metadata, summary, kind, source, tags, suite, cell)
            SELECT nextval('run_id_seq'), 'bench-' || (i % 500), target, arch, accel,
                emulated, status, started_at + i * INTERVAL 1 MINUTE, ended_at, tick_hz,
                period_ns, threshold_ns, message, params, metadata,
                json_merge_patch(summary, json_object(
                    'p999_ns', CAST(json_extract(summary, '$.p999_ns') AS BIGINT)
                               + (i * 7919) % 5000)),
                kind, source, json_object('board', 'b' || (i % 40)), suite, cell
            FROM runs, range({runs - 1}) AS t(i) WHERE run_id = 1""")
        store.con.execute("CHECKPOINT")


def _get_ms(port: int, path: str) -> float:
    t0 = time.perf_counter()
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        con.request("GET", path)
        response = con.getresponse()
        body = response.read()
    finally:
        con.close()
    elapsed = (time.perf_counter() - t0) * 1e3
    if response.status != 200 or b"<table id=\"runs\">" not in body:
        raise RuntimeError(f"GET {path}: HTTP {response.status}")
    return elapsed


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc: cannot measure the server's memory")


def _start_server(db: Path) -> tuple[subprocess.Popen, int, float]:
    """The server process, its port, and ms from its start to its URL line (imports,
    the store's check, the figure cache filled)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([*irqlab_argv(), "serve", "--db", str(db),
                             "--bind", "127.0.0.1:0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if "http://127.0.0.1:" not in line:
        proc.kill()
        raise RuntimeError(f"irqlab serve did not start: {line}{proc.communicate()[1]}")
    return proc, int(line.rsplit(":", 1)[1].strip().strip("/")), (
        time.perf_counter() - t0) * 1e3


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# A process holding the store writable, as a run does (it lends it: store/share.py).
_HOLDER = ("import sys\nfrom irqlab.store import Store\nstore = Store(sys.argv[1])\n"
           "print('held', flush=True)\nsys.stdin.read()\nstore.close()")


def _held_rounds(db: Path, port: int, rounds: int) -> list[float]:
    """The first page while another process holds the file: the server borrows it, and
    the holder cuts the page (store/share.py's run_ids_page)."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(db)], text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        if holder.stdout is None or holder.stdout.readline().strip() != "held":
            raise RuntimeError("the holding process did not open the store")
        return [_get_ms(port, "/") for _ in range(rounds)]
    finally:
        if holder.stdin is not None:
            holder.stdin.close()           # it closes the store and exits
        try:
            holder.wait(timeout=60)
        except subprocess.TimeoutExpired:
            _stop(holder)


def _baseline(db: Path, rounds: int) -> tuple[list[float], float]:
    """`irqlab list --json` wall times (ms) and its peak RSS (MB)."""
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        subprocess.run([*irqlab_argv(), "list", "--db", str(db), "--json"],
                       check=True, stdout=subprocess.DEVNULL, timeout=600)
        times.append((time.perf_counter() - t0) * 1e3)
    # Children's peak RSS: the largest of every child waited for so far, i.e. `list`
    # (the import that built the store is smaller: one 10,000-line log).
    return times, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def bench_serve(runs: int = 100_000, rounds: int = 7) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "serve.duckdb"
        t0 = time.perf_counter()
        make_store(db, runs)
        build_s = time.perf_counter() - t0
        base_ms, base_mb = _baseline(db, max(1, rounds // 2))
        proc, port, start_ms = _start_server(db)
        try:
            first = _get_ms(port, "/")
            plain = [_get_ms(port, "/") for _ in range(rounds)]
            sorted_ = [_get_ms(port, "/?sort=p999_ns") for _ in range(rounds)]
            last = _get_ms(port, f"/?page={runs // 50}")
            held = _held_rounds(db, port, rounds)
            rss_mb = _peak_rss_mb(proc.pid)
        finally:
            _stop(proc)
    base = statistics.median(base_ms)
    figures = []
    for name, values in (("runs page, first request", [first]),
                         ("runs page", plain), ("runs page sorted by p99.9", sorted_),
                         ("runs page, last page", [last]),
                         ("runs page while another process holds the store", held)):
        med = statistics.median(values)
        figures.append({"name": f"serve {name}", "value": med, "unit": "ms",
                        "runs": runs, "rounds": len(values), "min_ms": min(values),
                        "max_ms": max(values), "goal_ms": GOAL_MS,
                        "met": bool(med <= GOAL_MS), "baseline": base,
                        "baseline_name": "irqlab list --json (all runs)",
                        "ratio": med / base})
    figures.append({"name": "serve start", "value": start_ms, "unit": "ms", "runs": runs,
                    "text": f"serve start: {start_ms:.0f} ms from the process start to its "
                            f"URL ({runs} runs: imports, the store's check, the figure "
                            f"cache filled)"})
    figures.append({"name": "serve peak RSS", "value": rss_mb, "unit": "MB", "runs": runs,
                    "goal_mb": GOAL_MB, "met": bool(rss_mb <= GOAL_MB),
                    "baseline": base_mb, "baseline_name": "irqlab list --json peak RSS",
                    "store_build_s": build_s})
    for f in figures:
        if "text" not in f:
            f["text"] = _text(f)
    return figures


def _text(f: dict[str, Any]) -> str:
    if f["unit"] == "MB":
        return (f"{f['name']}: {f['value']:.0f} MB with {f['runs']} runs (baseline "
                f"{f['baseline_name']}: {f['baseline']:.0f} MB); goal <= "
                f"{f['goal_mb']:.0f} MB: {'met' if f['met'] else 'NOT met'}")
    return (f"{f['name']}: {f['value']:.1f} ms median (min {f['min_ms']:.1f}, max "
            f"{f['max_ms']:.1f}; {f['rounds']} rounds; {f['runs']} runs), baseline "
            f"{f['baseline_name']}: {f['baseline']:.0f} ms; goal <= {f['goal_ms']:.0f} ms: "
            f"{'met' if f['met'] else 'NOT met'}")
