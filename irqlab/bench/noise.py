"""``irqlab bench noise``: is compare's noise verdict calibrated on this machine?

A/A: `pairs` pairs, each two series of `runs_per_side` runs of one configuration
(`--target native` by default: the host's own probe, no VM to boot), measured by the run
flow `irqlab run --repeat` uses (irqlab.suite.run_suite: the two series interleaved
A1 B1 A2 B2 ..., so drift hits both alike) into a temporary store, then compared by
`irqlab compare`'s own model (build_compare: grouping by series tag, the noise test).
The share of pairs called "beyond noise" should be at most the test's 5 %.

A/B: the same pairs, B's latencies multiplied by `shift` (1.10) after measurement: a
known difference of exactly 10 % on top of the real run-to-run variation, which the
test should find in >= 90 % of the pairs. With replicates the per-run nearest-rank
quantiles are scaled (the quantile of scaled samples is the scaled quantile); with
single runs the samples are, and the block bootstrap runs on them. No run is measured
twice: every pair has its own 2 x runs_per_side runs.

Real A/B (`b_period_ns`, `--b-period`): a scaled copy is a difference the test sees
without any run-to-run variation of its own; a configuration that really differs has
it. So each pair measures a third series B at another probe period (deeper idle between
deadlines at a longer period: a real latency difference on most hosts), interleaved with
the two A series (A1 A'1 B1 A2 ...), and compare judges A against B as it would a user's.

Both shares carry a 95 % Wilson score interval (Wilson, JASA 22, 1927): with 20 pairs
0/20 still allows up to 16 %, so the interval, not only the share, is the result.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from irqlab.reports import noise

DEFAULT_PAIRS = 20
DEFAULT_RUNS_PER_SIDE = 3
DEFAULT_DURATION_NS = 500_000_000
DEFAULT_PERIOD_NS = 100_000
SHIFT = 1.10
# The power curve: the same pairs with B shifted by each factor (no new runs).
POWER_SHIFTS = (1.05, 1.10, 1.20, 1.30, 1.50, 2.00)
MAX_RETRIES = 5
AA_GOAL = 0.05
AB_GOAL = 0.90


class _Quiet:
    """An observer that shows nothing (the bench prints its figures at the end)."""

    def on_started(self, info: dict[str, Any]) -> None: ...
    def on_window(self, window: dict[str, Any], line: str) -> None: ...
    def on_progress(self, fraction: float, detail: str) -> None: ...
    def on_notice(self, text: str) -> None: ...


def _config(target: str, name: str, duration_ns: int, period_ns: int) -> Any:
    from irqlab.measure import config_for_target
    from irqlab.targets import get_target
    from irqlab.targets.options import RT_FALLBACK
    # A target that asks for SCHED_FIFO falls back to normal priority without the right
    # (and says so in the run's metadata) instead of failing: the bench measures what
    # the host allows.
    takes_fallback = RT_FALLBACK in get_target(target).options
    given = {RT_FALLBACK.dest: True} if takes_fallback else {}
    return config_for_target(target, given, period_ns=period_ns, duration_ns=duration_ns,
                                window_ns=duration_ns, name=name)


def _measure_pair(store: Any, target: str, index: int, k: int, duration_ns: int,
                  period_ns: int, b_period_ns: int | None = None
                  ) -> tuple[list[int], ...] | str:
    """Two series of k runs of one configuration (A and A'), and with `b_period_ns` a
    third at that period (B), interleaved: their run ids; or why a run did not end ok."""
    from irqlab.suite import run_suite
    sides = [("A", period_ns), ("B", period_ns)]
    if b_period_ns is not None:
        sides.append(("real-B", b_period_ns))
    cfgs = [_config(target, f"noise-bench-{index}-{side}", duration_ns, period)
            for side, period in sides]
    if k == 1:
        # One run a side is not a series (run_suite makes none for repeat 1).
        results = [run_suite([cfg], store, _Quiet()).results[0] for cfg in cfgs]
        ids = [[r.run_id] for r in results]
    else:
        suite = run_suite(cfgs, store, _Quiet(), repeat=k)
        results = suite.results
        ids = [list(s.run_ids) for s in suite.series]
    bad = [r for r in results if r.status != "ok"]
    if bad or len(ids) != len(sides) or any(len(i) != k for i in ids):
        return "; ".join(f"run {r.run_id} {r.status}: {r.summary.get('message')}"
                         for r in bad) or "a series is short"
    return tuple(ids)


def _judge(store: Any, a_ids: list[int], b_ids: list[int],
           shifts: tuple[float, ...], real_ids: list[int] | None = None) -> dict[str, Any]:
    """The A/A verdict by compare's model, the A/B ones with B multiplied by each of
    `shifts` (the first is the headline one), and with `real_ids` compare's verdict of
    A against that really different series."""
    from irqlab.reports.compare import build_compare
    from irqlab.reports.data import load_runs
    rows = [store.resolve(str(i)) for i in a_ids + b_ids]
    runs = load_runs(store, rows)
    model = build_compare(runs)
    aa = model["rows"][len(a_ids)]["noise"]
    real = None
    if real_ids is not None:
        real_runs = load_runs(store, [store.resolve(str(i)) for i in real_ids])
        real_noise = build_compare(runs[:len(a_ids)] + real_runs)["rows"][len(a_ids)]["noise"]
        real = {"beyond": real_noise["beyond_noise"] is True,
                "p50_ratio": next((r["ratio"] for r in real_noise["results"]
                                   if r["quantile"] == "p50"), None)}
    a_runs, b_runs = runs[:len(a_ids)], runs[len(a_ids):]
    # Single runs: the block bootstrap costs ~1 s a pair, so only the headline shift.
    ab = {shift: _shifted_verdict(a_runs, b_runs, shift)
          for shift in (shifts if min(len(a_ids), len(b_ids)) >= 2 else shifts[:1])}
    samples = [int(r.latency_tick.size) for r in runs if r.latency_tick is not None]
    return {"aa_beyond": aa["beyond_noise"] is True, "aa_verdict": aa["verdict"],
            "real": real,
            "aa_excludes_1": aa["beyond_noise"] is not False, "ab": ab,
            "test": aa["test"], "samples": samples, "block_len": aa.get("block_len"),
            "p50_ratio": next((r["ratio"] for r in aa["results"]
                               if r["quantile"] == "p50"), None)}


def _shifted_verdict(a_runs: list[Any], b_runs: list[Any], shift: float) -> bool | None:
    """compare's verdict with B's latencies multiplied by `shift`."""
    from irqlab.reports.data import figures
    if min(len(a_runs), len(b_runs)) >= 2:
        # The nearest-rank quantile of scaled samples is the scaled quantile.
        figs_a, figs_b = [figures(r) for r in a_runs], [figures(r) for r in b_runs]
        results = [noise.welch_log_ratio([f[key] for f in figs_a],
                                         [f[key] * shift for f in figs_b], label)
                   for key, label in _RATIO_KEYS]
        return noise.verdict(noise.TEST_REPLICATES, results)[0]
    side_a = noise.BlockSide.of([noise.prepare(r.latency_ns_float()) for r in a_runs])
    side_b = noise.BlockSide.of([noise.prepare(r.latency_ns_float() * shift)
                                 for r in b_runs])
    return noise.verdict(noise.TEST_SINGLE, noise.block_bootstrap(side_a, side_b))[0]


def _ratio_keys() -> tuple[tuple[str, str], ...]:
    from irqlab.stats.fields import RATIO_FIELDS
    return tuple((f.key, f.label) for f in RATIO_FIELDS)


_RATIO_KEYS = _ratio_keys()


def _machine() -> dict[str, Any]:
    from irqlab.runner.hostinfo import host_info
    h = host_info()
    return {"cpu_model": h["cpu_model"], "cores": h["cpus_online"],
            "virtual": h["host_is_virtual"], "kernel": h["kernel"]}


def _share(label: str, hits: int, pairs: int, goal: float, at_most: bool,
           common: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    lo, hi = noise.wilson_interval(hits, pairs)
    share = hits / pairs
    met = share <= goal if at_most else share >= goal
    m = common["machine"]
    text = (f"{label}: {hits}/{pairs} = {share:.0%} (95% Wilson {lo:.0%}–{hi:.0%}; goal "
            f"{'<=' if at_most else '>='} {goal:.0%}: {'met' if met else 'NOT met'}) — "
            f"{common['runs_per_side']} vs {common['runs_per_side']} runs of "
            f"{common['duration_s']:g} s at {common['period_ns'] / 1000:g} us "
            f"(--target {common['target']}, ~{common['samples_per_run']} samples a run), "
            f"test {common['test']}; {m['cpu_model']}, {m['cores']} cores"
            f"{', virtual' if m['virtual'] else ''}")
    if "by_shift" in extra:
        text += "\n  detection by shift of B (same pairs): " + ", ".join(
            f"x{k} {v:.0%}" for k, v in extra["by_shift"].items())
    return {"name": label, "value": share, "unit": "share of pairs", "hits": hits,
            "pairs": pairs, "ci_low": lo, "ci_high": hi, "interval": "95% Wilson (1927)",
            ("goal_max" if at_most else "goal_min"): goal, "met": met, **common, **extra,
            "text": text}


def bench_noise(pairs: int = DEFAULT_PAIRS, runs_per_side: int = DEFAULT_RUNS_PER_SIDE,
                duration_ns: int = DEFAULT_DURATION_NS, target: str = "native",
                period_ns: int = DEFAULT_PERIOD_NS, shift: float = SHIFT,
                b_period_ns: int | None = None) -> list[dict[str, Any]]:
    """A/A false "beyond noise" and A/B detection (B x `shift`) over `pairs` pairs, and
    the detection at other shifts of the same pairs (the power curve)."""
    t0 = time.perf_counter()
    shifts = (shift, *(s for s in POWER_SHIFTS if s != shift))
    verdicts: list[dict[str, Any]] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="irqlab-bench-noise-") as tmp:
        from irqlab.store import Store
        with Store(Path(tmp) / "noise.duckdb") as store:
            for i in range(pairs):
                got = _measure_pair(store, target, i + 1, runs_per_side, duration_ns,
                                    period_ns, b_period_ns)
                # A pair with a failed run is measured again (at most MAX_RETRIES
                # times in all): the bench calibrates the test, not the probe.
                while isinstance(got, str):
                    failures.append(got)
                    if len(failures) > MAX_RETRIES:
                        raise RuntimeError(f"bench noise: runs keep failing ({got}); "
                                           f"try `irqlab run --target {target}` alone")
                    got = _measure_pair(store, target, i + 1, runs_per_side,
                                        duration_ns, period_ns, b_period_ns)
                verdicts.append(_judge(store, got[0], got[1], shifts,
                                       got[2] if len(got) > 2 else None))
    samples = [n for v in verdicts for n in v["samples"]]
    common = {"pairs": pairs, "runs_per_side": runs_per_side,
              "duration_s": duration_ns / 1e9, "period_ns": period_ns, "target": target,
              "samples_per_run": int(statistics.median(samples)) if samples else 0,
              "runs": 2 * pairs * runs_per_side, "test": verdicts[0]["test"],
              "machine": _machine(), "seconds": time.perf_counter() - t0,
              "failed_pairs": failures,
              "reuse": "each pair its own 2 x K runs, A and B interleaved; A/B = the same "
                       f"runs with B's latencies x {shift:g} (and x each of "
                       f"{', '.join(f'{x:g}' for x in POWER_SHIFTS)} for by_shift)"}
    aa = sum(v["aa_beyond"] for v in verdicts)
    ab = sum(v["ab"][shift] is True for v in verdicts)
    by_shift = {f"{x:g}": sum(v["ab"][x] is True for v in verdicts) / pairs
                for x in sorted(verdicts[0]["ab"])}
    extra_aa = {"ci_excludes_1": sum(v["aa_excludes_1"] for v in verdicts),
                "p50_ratios": [v["p50_ratio"] for v in verdicts]}
    extra_ab = {"shift": shift, "ci_excludes_1": sum(v["ab"][shift] is not False
                                                      for v in verdicts),
                "by_shift": by_shift}
    if runs_per_side == 1:
        # Single runs are never called beyond noise: report how often the interval
        # excluded 1 (the "re-run with --repeat" verdict) instead of pretending power.
        extra_aa["note"] = extra_ab["note"] = (
            "single runs are never 'beyond noise' by design; ci_excludes_1 counts the "
            "pairs told to re-run with --repeat")
        extra_aa["block_len"] = [v["block_len"] for v in verdicts]
    out = [_share("noise A/A", aa, pairs, AA_GOAL, True, common, extra_aa),
           _share(f"noise A/B (x{shift:g})", ab, pairs, AB_GOAL, False, common, extra_ab)]
    if b_period_ns is not None:
        real = sum(v["real"]["beyond"] for v in verdicts)
        common["runs"] = 3 * pairs * runs_per_side
        out.append(_share(f"noise A/B (real: period {period_ns / 1000:g} us vs "
                          f"{b_period_ns / 1000:g} us)", real, pairs, AB_GOAL, False,
                          common, {"b_period_ns": b_period_ns,
                                   "p50_ratios": [v["real"]["p50_ratio"] for v in verdicts]}))
    return out
