"""Raw-sample logs stream from file to store: the same run as the in-memory parser (C
line reader or not, any batch size), one transaction, and a file bigger than memory
allows in one piece imports."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from irqlab import native
from irqlab.importers import (ImportFormatError, ParseOptions, parse_file, run_names,
                              store_runs, stream_file)
from irqlab.importers.base import read_text
from irqlab.importers.tscdeadline import parse_tscdeadline, stream_tscdeadline
from irqlab.store import Store

ODD_LINES = [
    "# kvm-unit-tests x86/tscdeadline_latency", "", "latency: 1283", "latency: 0007",
    "latency: -12", "  latency: 44  ", "latency: 55\r", "hit max: 100000 < latency: 133245",
    "latency: 123456789012345678", "latency: 999999999999999999", "latency: 1000000000000000000",
    "tsc_hz=2400000000", "boot: ünïcode line", "latency:\x8512", "latency: 9\u20282",
    "latency: 5 6", "latency: 12abc", "breakmax=100000", "latency: 17",
]


def write_log(path: Path, rng: np.random.Generator, n: int, odd_every: int) -> Path:
    """n sample lines with the odd lines above sprinkled in, no newline at the end."""
    lines = [f"latency: {v}" for v in rng.integers(-5, 50_000, n).tolist()]
    for k, odd in enumerate(ODD_LINES):
        lines.insert(min(len(lines), k * odd_every), odd)
    path.write_bytes("\n".join(lines).encode())
    return path


def streamed(path: Path, options: ParseOptions, batch: int):
    res = stream_tscdeadline(path, options, batch_samples=batch)
    run = res.runs[0]
    values = np.concatenate(list(run.samples.batches()))
    run.samples.finish(run)
    return run, values, [str(e) for e in res.skipped]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("batch", [1, 333, 1 << 20])
def test_stream_reads_what_the_text_parser_reads(tmp_path, fast, batch):
    path = write_log(tmp_path / "t.txt", np.random.default_rng(batch), 5_000, 300)
    options = ParseOptions(skip_bad=True)
    # The format's own parser on the whole text (no range check: 10^18 is read here).
    ref = parse_tscdeadline(str(path), read_text(path), options)
    native.set_enabled(fast)
    try:
        run, values, skipped = streamed(path, options, batch)
    finally:
        native.set_enabled(True)
    want = ref.runs[0]
    assert values.tolist() == want.latency_tick.tolist()
    assert skipped == [str(e) for e in ref.skipped] and len(skipped) >= 3
    assert (run.line, run.tick_hz, run.provenance, run.notes) == \
        (want.line, want.tick_hz, want.provenance, want.notes)


def test_a_bad_line_is_located_and_nothing_lands(tmp_path):
    path = write_log(tmp_path / "t.txt", np.random.default_rng(1), 3_000, 200)
    db = tmp_path / "s.duckdb"
    with Store(db) as st:
        res = stream_file("tscdeadline", path, ParseOptions())
        with pytest.raises(ImportFormatError, match=r"t\.txt:\d+: expected 'latency: N'"):
            store_runs(st, [(res.runs, run_names(res.runs, None))], {}, {})
        assert st.runs() == [] and st._query("SELECT count(*) FROM samples").fetchone() == (0,)
        assert st._query("SELECT count(*) FROM sample_files").fetchone() == (0,)
    with Store(db):                  # the files of the rolled-back import are swept
        assert not list((tmp_path / "s.duckdb.samples").rglob("*.parquet"))


def test_streamed_import_stores_what_the_in_memory_import_stores(tmp_path):
    # A lower latency in a later batch moves the origin of the rows stored before it.
    rng = np.random.default_rng(2)
    values = np.concatenate([rng.integers(0, 9_000, 2_500), [-40],
                             rng.integers(-3, 9_000, 2_500)])
    path = tmp_path / "t.txt"
    path.write_text("".join(f"latency: {v}\n" for v in values.tolist()) + "tsc_hz=1000000\n")
    got = {}
    for how in ("stream", "memory"):
        db = tmp_path / f"{how}.duckdb"
        with Store(db) as st:
            opts = ParseOptions()
            res = (stream_tscdeadline(path, opts, batch_samples=1000) if how == "stream"
                   else parse_file("tscdeadline", path, opts))
            [stored] = store_runs(st, [(res.runs, ["r"])], {}, {})
            rows = [(int(s), int(d), int(e)) for b in st.iter_samples(stored.run_id)
                    for s, d, e in zip(*(b.column(k).to_pylist()
                                         for k in ("seq", "deadline_tick", "entry_tick")))]
            got[how] = (stored.summary, stored.samples_stored, rows)
    assert got["stream"] == got["memory"]
    assert got["stream"][0]["min_ns"] == -40_000 and got["stream"][1] == values.size


@pytest.mark.slow
def test_a_file_bigger_than_memory_allows_in_one_piece_imports(tmp_path):
    """Under an address-space limit the in-memory parser cannot read the file, the
    streamed import stores every sample of it."""
    n = 2_500_000     # ~35 MB; read whole it takes ~300 MB, streamed a few MB
    path = tmp_path / "big.txt"
    rng = np.random.default_rng(3)
    with path.open("w") as f:
        for start in range(0, n, 500_000):
            f.write("".join(f"latency: {v}\n" for v in
                            rng.integers(100, 60_000, 500_000).tolist()))
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("latency: 5\n")
    child = textwrap.dedent("""
        import resource, sys
        from pathlib import Path
        limit_mb, what, path, db = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
        if limit_mb:
            resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))
        from irqlab.importers import ParseOptions, parse_file
        from irqlab.cli.main import main
        if what == "parse":
            try:
                parse_file("tscdeadline", Path(path), ParseOptions(tick_hz=10**9))
                print("parsed")
            except MemoryError:
                print("MemoryError")
            peak = [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmPeak")]
            print("vmpeak_kb", peak[0])
            sys.exit(0)
        code = main(["import", "tscdeadline", path, "--tick-hz", "1000000000",
                     "--db", db, "--json"])
        peak = [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmPeak")]
        print("code", code, "vmpeak_kb", peak[0])
    """)

    def run(limit_mb: int, what: str, file: Path) -> str:
        db = tmp_path / f"{what}-{limit_mb}-{file.stem}.duckdb"
        proc = subprocess.run([sys.executable, "-c", child, str(limit_mb), what, str(file),
                               str(db)], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "IRQLAB_DB": str(db)})
        return proc.stdout + proc.stderr

    def limit(what: str) -> int:
        """The address space this program takes for a one-line file, + 150 MiB."""
        out = run(0, what, tiny)
        return int(out.split("vmpeak_kb")[1].split()[0]) // 1024 + 150

    assert "MemoryError" in run(limit("parse"), "parse", path)
    import_limit = limit("import")
    out = run(import_limit, "import", path)
    assert "code 0" in out, out
    with Store(tmp_path / f"import-{import_limit}-big.duckdb", read_only=True) as st:
        assert st.sample_count(st.resolve("big").run_id) == n
