"""--break-at (issue 32) through the run flow with the fake target: every 50th sample is
80 us late, the others 5 us (tests/unit/measure/fake_target.py)."""

from __future__ import annotations

import json

from irqlab.cli.main import main
from tests.unit.measure.fake_target import LATENCY_NS, SPIKE_EVERY, SPIKE_NS
from tests.unit.measure.test_run_flow import (PERIOD_NS, Recorder, _cfg, fake,  # noqa: F401
                                              store)


def test_the_run_stops_at_the_first_sample_above_the_limit(fake, store):
    fake()
    res = run_cfg(store, break_at_ns=50_000)
    s = res.summary
    assert res.status == "stopped-at-break", s["message"]
    # The 50th sample (seq 49) is the first above 50 us and the run's last.
    assert s["samples"] == SPIKE_EVERY and s["max_ns"] == SPIKE_NS
    assert s["break_sample"]["latency_ns"] == SPIKE_NS
    assert s["break_sample"]["seq"] == SPIKE_EVERY - 1
    assert store.sample_count(res.run_id) == SPIKE_EVERY
    assert "above --break-at 50 us: 80.0 us (seq 49" in s["message"]
    row = store.resolve(str(res.run_id))
    assert row.status == "stopped-at-break"
    assert row.metadata["break_at"]["sample"] == s["break_sample"]
    assert row.params["break_at_ns"] == 50_000


def test_a_sample_equal_to_the_limit_is_not_above_it(fake, store):
    fake()
    res = run_cfg(store, break_at_ns=SPIKE_NS)
    assert res.status == "ok", res.summary["message"]
    assert res.summary["samples"] == 120 and "break_sample" not in res.summary
    meta = store.resolve(str(res.run_id)).metadata["break_at"]
    assert (meta["limit_ns"], meta["sample"]) == (SPIKE_NS, None)


def test_samples_of_the_first_read_do_not_break_the_run_later_ones_do():
    # The first read holds what the probe took while the hooks started (a trace
    # capture enabling its events): kept, never a break. Then the first sample above
    # the limit is the last kept, and later reads keep no later deadline.
    import numpy as np
    from irqlab.measure.stream import BreakAt
    from irqlab.samples.record import RECORD_DTYPE

    def recs(deadlines, latencies):
        r = np.zeros(len(deadlines), dtype=RECORD_DTYPE)
        r["seq"] = np.arange(len(deadlines))
        r["deadline_tick"] = deadlines
        r["entry_tick"] = np.add(deadlines, latencies)
        return r, np.asarray(latencies, dtype=np.int64)

    b = BreakAt(limit_ns=1_000, tick_hz=2_000_000_000)   # 2000 ticks; above: >= 2001
    assert b.keep(*recs([10, 20], [5_000, 7])) is None    # first read: not armed
    b.armed = True
    assert b.keep(*recs([30, 40], [2_000, 3])) is None    # equal to the limit: not above
    mask = b.keep(*recs([50, 60, 70], [3, 2_001, 9]))
    assert mask.tolist() == [True, True, False]
    assert (b.sample["deadline_tick"], b.sample["latency_ns"]) == (60, 1_001)  # 1000.5 ns rounded
    assert b.keep(*recs([55, 65], [1, 1])).tolist() == [True, False]
    assert b.metadata()["armed_after"] == 2


def test_without_break_at_nothing_changes(fake, store):
    fake()
    res = run_cfg(store)
    assert res.status == "ok" and res.summary["samples"] == 120
    assert "break_at_ns" not in store.resolve(str(res.run_id)).params
    assert "break_at" not in store.resolve(str(res.run_id)).metadata


def test_irqlab_run_break_at_exits_1_and_says_why(fake, tmp_path, capsys):
    fake()
    db = tmp_path / "cli.duckdb"
    code = main(["run", "--target", "fake", "--samples", "300", "-i", "1ms",
                 "--break-at", "10us", "--json", "--db", str(db)])
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    summary = next(o for o in out if o["type"] == "summary")
    assert code == 1
    assert summary["status"] == "stopped-at-break"
    assert summary["break_sample"]["latency_ns"] == SPIKE_NS > 10_000 > LATENCY_NS
    # check: a break is a result (the status gate passes); the break sample is among the
    # figures, so a limit below it fails and one above it passes.
    run_id = str(summary["run_id"])
    assert main(["check", run_id, "--max", "50us", "--db", str(db)]) == 1
    assert "FAIL max" in capsys.readouterr().out
    assert main(["check", run_id, "--max", "100us", "--db", str(db)]) == 0
    assert "PASS status stopped-at-break" in capsys.readouterr().out


def run_cfg(store, **common):
    from irqlab.measure import run
    return run(_cfg(samples=120, duration_ns=None, **common), store, Recorder())


def test_a_scenario_takes_break_at_as_a_key(tmp_path):
    from irqlab.cli import cmd_run
    from irqlab.cli.scenario import ScenarioError, load_scenario, parse_cell_args
    path = tmp_path / "s.toml"
    path.write_text('name = "b"\n[run]\ntarget = "native"\nbreak_at = "1ms"\n'
                    '[matrix]\nperiod = ["1ms", "500us"]\n')
    scn = load_scenario(path)
    cfgs = [cmd_run.run_config(parse_cell_args(scn, c), tmp_path / "x.duckdb")
            for c in scn.cells()]
    assert [c.break_at_ns for c in cfgs] == [1_000_000, 1_000_000]
    path.write_text('name = "b"\n[run]\nbreak_at = "1"\n')
    try:
        load_scenario(path)
    except ScenarioError as exc:
        assert "break_at" in str(exc) and "no unit" in str(exc)
    else:
        raise AssertionError("a bare break_at was taken")
