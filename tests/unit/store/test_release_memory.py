"""Store.release_memory: DuckDB's cache of written blocks is given back (a long run's
memory must not grow with its samples), the memory limit is restored exactly, and
nothing is evicted while another process works through this one."""

from __future__ import annotations

import numpy as np
import pytest

from irqlab.samples.record import RECORD_DTYPE
from irqlab.store import Store
from irqlab.store import db as store_db
from irqlab.store import share
from irqlab.store.interface import NewRun


def _cached_kib(store: Store) -> int:
    rows = store.con.execute("SELECT tag, memory_usage_bytes FROM duckdb_memory()"
                             ).fetchall()
    return dict(rows).get("BASE_TABLE", 0) >> 10


def _fill(store: Store, n: int = 2_000_000) -> None:
    rid = store.create_run(NewRun("big", "native", {}, {}))
    rng = np.random.default_rng(3)
    for start in range(0, n, 500_000):
        rec = np.zeros(500_000, RECORD_DTYPE)
        rec["seq"] = np.arange(start, start + 500_000)
        rec["deadline_tick"] = rec["seq"] * 1_000_000
        rec["entry_tick"] = rec["deadline_tick"] + rng.integers(1000, 90_000, 500_000)
        store.add_samples(rid, rec)
    store.con.execute("CHECKPOINT")


@pytest.mark.slow
def test_cache_of_written_blocks_stops_growing_with_the_samples(tmp_path, monkeypatch):
    monkeypatch.setattr(store_db, "_RELEASE_EVERY_S", 0.0)
    with Store(tmp_path / "x.duckdb") as store:
        _fill(store)
        first = _cached_kib(store)
        store.release_memory()
        released_once = _cached_kib(store)
        _fill(store)                           # as much again
        grown = _cached_kib(store)
        assert grown > first + 2048, (first, grown)   # without release: grows with data
        store.release_memory()
        released_twice = _cached_kib(store)
        assert released_twice < grown - 2048, (grown, released_twice)
        # What stays (DuckDB keeps some blocks loaded) grows far slower than the data.
        assert released_twice - released_once < (grown - first) / 3, (
            first, grown, released_once, released_twice)
        # The limit reads back rounded ('18.8 GiB'): restored from the first reading, it
        # does not drift however often memory is released.
        limit = store.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        for _ in range(3):
            store.release_memory()
        assert store.con.execute("SELECT current_setting('memory_limit')"
                                 ).fetchone()[0] == limit
        assert sum(store.sample_count(r.run_id) for r in store.runs()) == 4_000_000


def test_not_while_another_process_is_served(tmp_path, monkeypatch):
    monkeypatch.setattr(store_db, "_RELEASE_EVERY_S", 0.0)
    with Store(tmp_path / "x.duckdb") as store:
        _fill(store, 1_000_000)
        remote = share.connect(tmp_path / "x.duckdb")
        assert remote is not None
        try:
            before = _cached_kib(store)
            store.release_memory()
            assert _cached_kib(store) == before
        finally:
            remote.close()
