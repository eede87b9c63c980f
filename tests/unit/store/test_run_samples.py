"""One run's raw samples behind one interface (irqlab.store.interface.RunSamples, issue
43): a pushed run's Parquet file (SamplesFile) and the lab store's table (TableSamples)
take the same calls and give the same records, latencies, deadline order and exact
figures for the same samples; the lab store reads through whichever holds the run."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from irqlab.importers.ingest import _records
from irqlab.store import PgStore
from irqlab.store.interface import NewRun, RunSamples
from irqlab.store.pg import TableSamples
from irqlab.store.samples_file import SamplesFile, write_samples_file

QS = [0.0, 0.5, 0.99, 1.0]


def _protocol_methods() -> dict[str, inspect.Signature]:
    return {name: inspect.signature(fn) for name, fn in vars(RunSamples).items()
            if inspect.isfunction(fn) and not name.startswith("_")}


@pytest.mark.parametrize("cls", [SamplesFile, TableSamples])
def test_each_implements_the_protocol_s_calls(cls):
    methods = _protocol_methods()
    assert set(methods) == {"count", "figures", "iter_samples", "iter_latency",
                            "iter_by_deadline"}
    for name, sig in methods.items():
        got = inspect.signature(getattr(cls, name))
        assert list(got.parameters) == list(sig.parameters), (cls.__name__, name)
        assert [p.default for p in got.parameters.values()] == \
            [p.default for p in sig.parameters.values()], (cls.__name__, name)


@pytest.mark.slow
def test_file_and_table_give_the_same_samples(pg_server, tmp_path):
    rng = np.random.default_rng(43)
    lat = rng.lognormal(8, 1.0, 40_000).astype(np.int64)
    # Deadlines out of sequence order in places: the deadline order is a real sort.
    records = _records(lat, origin=2**41, first_seq=0)
    deadline = 2**41 + np.arange(lat.size, dtype=np.int64) * 1_000_000
    deadline[100:200] = deadline[100:200][::-1]
    records["deadline_tick"] = deadline.astype(np.uint64)
    records["entry_tick"] = (deadline + lat).astype(np.uint64)
    with PgStore(pg_server.database("run_samples")) as lab:
        rid = lab.create_run(NewRun("t", "synthetic", {}, {}, status="ok"))
        lab.add_samples(rid, records)
        table = lab._samples(rid)
        assert isinstance(table, TableSamples)
        path = tmp_path / "run.parquet"
        assert write_samples_file(table.iter_samples(7_000), path) == lat.size
        file = SamplesFile(str(path))
        both: list[RunSamples] = [table, file]
        counts = [s.count() for s in both]
        figures = [s.figures(QS, threshold_tick=3000) for s in both]
        lats = [np.concatenate(list(s.iter_latency(9_000))) for s in both]
        pairs = [[np.concatenate(x) for x in zip(*s.iter_latency(9_000, True))]
                 for s in both]
        orders = [[np.concatenate(x) for x in zip(*s.iter_by_deadline(9_000))] for s in both]
        seqs = [np.concatenate([rb.column("seq").to_numpy() for rb in s.iter_samples()])
                for s in both]
    assert counts == [lat.size, lat.size]
    assert figures[0] == figures[1] and figures[0].count == lat.size
    assert figures[0].max_tick == int(lat.max()) and figures[0].above == int(
        np.count_nonzero(lat > 3000))
    for got in lats:
        assert np.array_equal(got, lat)
    for got in pairs:
        assert np.array_equal(got[0], lat) and np.array_equal(
            got[1], records["deadline_tick"].astype(np.int64))
    assert all(np.array_equal(a, b) for a, b in zip(*orders))
    assert np.array_equal(orders[0][0], np.sort(deadline))          # deadline order
    assert np.array_equal(orders[0][1] - orders[0][0], lat[np.argsort(deadline)])
    for got in seqs:
        assert np.array_equal(got, np.arange(lat.size))
