"""One number per percentile (issue 27): a real run read through every reader — the run's
own summary, show, list, compare, check, the report's data, matrix, export, the Python
API, and a lab store on a real PostgreSQL server — gives one value per percentile, the
nearest-rank value of its samples.

Before, the run's summary held the live histogram's estimate (a native run's p99.9 was
823.2 us there and 819 us in `check`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import irqlab
from irqlab.durations import format_latency
from irqlab.reports.data import PERCENTILES, figures, load_run
from irqlab.runner.native import NATIVE_PROBE
from irqlab.stats import quantile_rank
from irqlab.stats.fields import CHECK_LIMITS, PERCENTILE_FIELDS
from irqlab.store import open_store
from tests.conftest import DEFAULT_PROBE, call_argv, call_cli, run_cli

# Each test here takes seconds (a measured or reported run as its fixture): out of the
# quick set (./run-tests.sh --quick), in the whole suite.
pytestmark = pytest.mark.slow

KEYS = [f.key for f in PERCENTILE_FIELDS]            # p50_ns .. p9999_ns
# check's option of each percentile (--p99.9 ...): generous limits, only the values matter.
LIMIT_ARGS = [a for c in CHECK_LIMITS if c.field.quantile is not None
              for a in (f"--{c.heading}", "10s")]

RUNS = {
    # The host itself: no QEMU.
    "native": ["--target", "native", "--rt-fallback", "--duration", "2s"],
    # The guest probe under TCG (boots QEMU: run this module under the TCG lock).
    "guest-tcg": ["--target", "guest", "--accel", "tcg", "--period", "1ms",
                  "--samples", "3000", "--window", "1s"],
}


@pytest.fixture(scope="module")
def pg(pg_server):
    return pg_server            # the session's server (tests/conftest.py): fresh databases


@pytest.fixture(scope="module", params=[
    pytest.param(k, marks=pytest.mark.emulated) if k == "guest-tcg" else k
    for k in sorted(RUNS)])          # (emulated: ./run-tests.sh --quick leaves it out)
def measured(request, tmp_path_factory):
    """(db, the run's printed summary): one real run of the target."""
    if request.param == "native":
        subprocess.run(["make", "-s", "-C", str(NATIVE_PROBE.parents[1])], check=True)
    elif not DEFAULT_PROBE.exists():
        pytest.skip("guest probe not built")
    db = tmp_path_factory.mktemp(request.param) / "one.duckdb"
    res = run_cli(["run", *RUNS[request.param], "--name", "one", "--json"], db)
    assert res.code == 0, res.stderr
    return db, res.summary


def _pcts(obj: dict) -> dict:
    return {k: obj[k] for k in KEYS}


def _compare_pcts(obj: dict) -> dict:
    """The percentiles compare shows (a subset of the summary's)."""
    return {k: obj[k] for k, _q, _l in PERCENTILES}


def _cli(*argv: str) -> subprocess.CompletedProcess:
    """A reader's command, in this interpreter (what is checked is its value)."""
    return call_argv(list(argv))


def _lines(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines() if x.startswith("{")]


def _nearest_rank(latency_ns: np.ndarray) -> dict:
    srt = np.sort(latency_ns)
    return {f.key: int(srt[quantile_rank(f.quantile, srt.size) - 1])
            for f in PERCENTILE_FIELDS}


def _readers(ref: str, db: str) -> dict[str, dict]:
    """Every command's percentiles of run `ref` in store `db` (a file or a URL)."""
    out: dict[str, dict] = {}
    show = _cli("show", ref, "--db", db, "--json")
    assert show.returncode == 0, show.stderr
    summary = _lines(show.stdout)[-1]
    out["show"] = _pcts(summary)
    rows = [r for r in _lines(_cli("list", "--db", db, "--json").stdout)
            if r["run_id"] == summary["run_id"]]
    out["list"] = {"p99_ns": rows[0]["p99_ns"]}
    cmp = _lines(_cli("compare", ref, ref, "--db", db, "--json").stdout)
    out["compare"] = _compare_pcts([x for x in cmp if x["type"] == "compare_run"][0])
    chk = _cli("check", ref, *LIMIT_ARGS, "--db", db, "--json")
    assert chk.returncode in (0, 1), chk.stderr      # gates (few samples) may fail it
    limits = _lines(chk.stdout)[0]["limits"]
    by_label = {f.label: f.key for f in PERCENTILE_FIELDS}
    out["check"] = {by_label[x["limit"]]: x["value"] for x in limits}
    # The report's data, read whole and (as a big run is) in batches from the store.
    with open_store(db if "://" in db else Path(db), read_only=True) as store:
        row = store.resolve(ref)
        out["report"] = _compare_pcts(figures(load_run(store, row)))
        out["report (batches)"] = _compare_pcts(figures(load_run(store, row,
                                                                 in_memory_samples=0)))
    with irqlab.open_store(db) as lab:
        sums = lab.summaries().to_pylist()
        api = [s for s in sums if s["run_id"] == summary["run_id"]][0]
        out["api summaries"] = _pcts(api)
        assert api["percentiles_from"] == "exact"
        lat = lab.samples(summary["run_id"]).column("latency_ns").to_numpy()
        out["api samples"] = _nearest_rank(lat)
    return out


def _assert_one_value(printed: dict, readers: dict[str, dict]) -> None:
    for name, got in readers.items():
        want = {k: printed[k] for k in got}
        assert got == want, (name, got, want)


def test_every_reader_gives_the_run_summary_value(measured, tmp_path, pg):
    db, printed = measured
    assert printed["percentiles_from"] == "exact"
    assert all(isinstance(printed[k], int) for k in KEYS)
    readers = _readers("one", str(db))

    # The matrix's cells: a scenario's cell of the same target is a run of its own; its
    # cell line carries that run's stored summary.
    # export: the summaries file and the samples' own nearest rank.
    exp = tmp_path / "exp"
    res = _cli("export", "one", "--parquet", str(exp), "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    readers["export summaries.parquet"] = _pcts(
        pq.read_table(exp / "summaries.parquet").to_pylist()[0])
    lat = pq.read_table(exp / "samples").column("latency_ns").to_numpy()
    readers["export samples"] = _nearest_rank(lat)
    _assert_one_value(printed, readers)

    # The lab store: pushed, then read back by every reader from PostgreSQL.
    lab = pg.database(f"lab_{db.parent.name.replace('-', '_').lower()}")
    push = _cli("push", "one", "--to", lab, "--db", str(db), "--json")
    assert push.returncode == 0, push.stderr
    lab_readers = _readers("one", lab)
    _assert_one_value(printed, {f"lab {k}": v for k, v in lab_readers.items()})


def test_people_see_the_same_text_in_run_show_and_check(measured):
    db, printed = measured
    show = call_cli(["show", "one"], db)
    chk = call_cli(["check", "one", "--p99.9", "10s", "--p99", "10s"], db)
    assert show.code == 0, show.stderr
    for key in ("p99_ns", "p999_ns"):
        text = format_latency(printed[key])
        assert text in show.stdout and text in chk.stdout, (key, text)
    assert "exact (nearest rank over the stored samples)" in show.stdout


MATRIX = """\
name = "one-value"
[run]
target = "native"
rt_fallback = true
duration = "1s"
[matrix]
priority = [80]
"""


@pytest.mark.slow
def test_a_matrix_cell_gives_its_run_summary_value(tmp_path):
    subprocess.run(["make", "-s", "-C", str(NATIVE_PROBE.parents[1])], check=True)
    db = tmp_path / "m.duckdb"
    scn = tmp_path / "m.toml"
    scn.write_text(MATRIX)
    res = run_cli(["matrix", str(scn), "--format", "json"], db)
    assert res.code == 0, res.stderr
    cell = [x for x in res.lines if x.get("type") == "cell"][0]
    assert cell["percentiles_from"] == "exact"
    readers = _readers(str(cell["run_id"]), str(db))
    _assert_one_value(cell, readers)
    # The table, from the store: --raw prints the ns value itself, the default table the
    # one latency text every command prints for it.
    raw = run_cli(["matrix", str(scn), "--resume", "--raw"], db)
    assert raw.code == 0 and str(cell["p999_ns"]) in raw.stdout, raw.stdout
    table = run_cli(["matrix", str(scn), "--resume"], db)
    assert table.code == 0 and format_latency(cell["p999_ns"]) in table.stdout, table.stdout
