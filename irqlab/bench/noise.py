"""``irqlab bench noise``: is compare's noise verdict calibrated on this machine?

A/A: `pairs` pairs, each two series of `runs_per_side` runs of one configuration
(`--target native` by default: the host's own probe, no VM to boot), measured by the run
flow `irqlab run --repeat` uses (irqlab.suite.run_suite: the two series interleaved
A1 B1 A2 B2 ..., so drift hits both alike) into a temporary store, then compared by
`irqlab compare`'s own model (build_compare: grouping by series tag, the noise test).
The share of pairs called `different` should be at most the test's 5 %; the share
called `same` (inside the default margins) is reported beside it.

A/B: the same pairs, B's latencies multiplied by `shift` (1.30) after measurement: a
known difference of exactly 30 % on top of the real run-to-run variation, which the
test should find in >= 90 % of the pairs.

`--repeat auto` (`max_repeat` > runs_per_side): each pair measures max_repeat runs a
side and the auto rule (noise.auto_decision: judge at 3 runs a side, add one a side
until every quantile is `different` or `same`, the level spent over the looks by
Lan-DeMets O'Brien-Fleming spending, irqlab.stats.spending) is
replayed on the first 3, 4, ... of them: its A/A `different` share, its A/B detection
and the runs it used. With replicates the per-run nearest-rank
quantiles are scaled (the quantile of scaled samples is the scaled quantile); with
single runs the samples are, and the block bootstrap runs on them. No run is measured
twice: every pair has its own 2 x runs_per_side runs.

Real A/B (`b_period_ns`, `--b-period`): a scaled copy is a difference the test sees
without any run-to-run variation of its own; a configuration that really differs has
it. So each pair measures a third series B at another probe period (deeper idle between
deadlines at a longer period: a real latency difference on most hosts), interleaved with
the two A series (A1 A'1 B1 A2 ...), and compare judges A against B as it would a user's.

Every share carries a 95 % Wilson score interval (Wilson, JASA 22, 1927), and a goal is
`met` only when the interval clears it: 0/20 still allows up to 16 %, and showing <= 5 %
needs >= 73 pairs (0/73: upper bound 5.0 %); `NOT met` when the interval lies beyond it,
`undecided` in between (more pairs would tell).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from irqlab.reports import noise

DEFAULT_PAIRS = 80            # the fewest for which 0 hits show <= 5 % is 73
DEFAULT_RUNS_PER_SIDE = 3
DEFAULT_MAX_REPEAT = 6        # runs a side measured for the --repeat auto replay
DEFAULT_DURATION_NS = 500_000_000
DEFAULT_PERIOD_NS = 100_000
SHIFT = 1.30
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


def _judge(store: Any, a_ids: list[int], b_ids: list[int], k: int,
           shifts: tuple[float, ...], real_ids: list[int] | None = None) -> dict[str, Any]:
    """The A/A verdict by compare's model on the first k runs a side, the A/B ones with
    B multiplied by each of `shifts` (the first is the headline one), the auto rule's
    replay when more than k runs a side were measured, and with `real_ids` compare's
    verdict of A against that really different series."""
    from irqlab.reports.compare import build_compare
    from irqlab.reports.data import load_runs
    rows = [store.resolve(str(i)) for i in a_ids[:k] + b_ids[:k]]
    runs = load_runs(store, rows)
    model = build_compare(runs)
    aa = model["rows"][k]["noise"]
    real = None
    if real_ids is not None:
        real_runs = load_runs(store, [store.resolve(str(i)) for i in real_ids[:k]])
        real_noise = build_compare(runs[:k] + real_runs)["rows"][k]["noise"]
        real = {"verdict": real_noise["verdict"],
                "p50_ratio": next((r["ratio"] for r in real_noise["results"]
                                   if r["quantile"] == "p50"), None)}
    a_runs, b_runs = runs[:k], runs[k:]
    # Single runs: the block bootstrap costs ~1 s a pair, so only the headline shift.
    ab = {shift: _shifted_verdict(a_runs, b_runs, shift)
          for shift in (shifts if k >= 2 else shifts[:1])}
    auto = None
    if len(a_ids) > k:
        all_runs = load_runs(store, [store.resolve(str(i)) for i in a_ids + b_ids])
        auto = _auto_replay(all_runs[:len(a_ids)], all_runs[len(a_ids):], shifts[0])
    samples = [int(r.latency_tick.size) for r in runs if r.latency_tick is not None]
    return {"aa_verdict": aa["verdict"], "real": real,
            "aa_excludes_1": aa["beyond_noise"] is not False, "ab": ab, "auto": auto,
            "test": aa["test"], "samples": samples, "block_len": aa.get("block_len"),
            "p50_ratio": next((r["ratio"] for r in aa["results"]
                               if r["quantile"] == "p50"), None)}


def _quantiles(runs: list[Any], shift: float = 1.0) -> dict[str, list[float]]:
    """Each run's compared quantiles (label -> per-run values), times `shift`: the
    nearest-rank quantile of scaled samples is the scaled quantile."""
    from irqlab.reports.data import figures
    figs = [figures(r) for r in runs]
    return {label: [f[key] * shift for f in figs] for key, label in _RATIO_KEYS}


def _shifted_verdict(a_runs: list[Any], b_runs: list[Any], shift: float) -> str:
    """compare's row verdict with B's latencies multiplied by `shift`."""
    if min(len(a_runs), len(b_runs)) >= 2:
        qa, qb = _quantiles(a_runs), _quantiles(b_runs, shift)
        results = [noise.run_level_ratio(qa[label], qb[label], label,
                                          margin=noise.DEFAULT_MARGINS.get(label))
                   for _key, label in _RATIO_KEYS]
        return noise.row_verdict(results)[0]
    side_a = noise.BlockSide.of([noise.prepare(r.latency_ns_float()) for r in a_runs])
    side_b = noise.BlockSide.of([noise.prepare(r.latency_ns_float() * shift)
                                 for r in b_runs])
    results = noise.block_bootstrap(side_a, side_b)
    # Single runs are always `unknown`; what is counted is whether even the within-run
    # interval excluded 1 (the pairs told to re-run with --repeat).
    return "excludes 1" if any(r.beyond_noise is None for r in results) else "unknown"


def _auto_replay(a_runs: list[Any], b_runs: list[Any], shift: float) -> dict[str, Any]:
    """The --repeat auto rule replayed on the runs measured: A/A and A/B (x shift)."""
    qa, qa2, qb = _quantiles(a_runs), _quantiles(b_runs), _quantiles(b_runs, shift)
    cap = min(len(a_runs), len(b_runs))
    aa = noise.auto_decision(qa, qa2, noise.DEFAULT_MARGINS, cap)
    ab = noise.auto_decision(qa, qb, noise.DEFAULT_MARGINS, cap)
    return {"aa": aa.verdict, "aa_runs": aa.runs, "ab": ab.verdict, "ab_runs": ab.runs}


def _ratio_keys() -> tuple[tuple[str, str], ...]:
    from irqlab.stats.fields import RATIO_FIELDS
    return tuple((f.key, f.label) for f in RATIO_FIELDS)


_RATIO_KEYS = _ratio_keys()


def _machine() -> dict[str, Any]:
    from irqlab.runner.hostinfo import host_info
    h = host_info()
    return {"cpu_model": h["cpu_model"], "cores": h["cpus_online"],
            "virtual": h["host_is_virtual"], "kernel": h["kernel"]}


def goal_status(lo: float, hi: float, goal: float, at_most: bool) -> str:
    """`met` when the whole interval clears the goal, `NOT met` when it lies wholly on
    the wrong side, else `undecided` (more pairs would tell)."""
    if at_most:
        return "met" if hi <= goal else "NOT met" if lo > goal else "undecided"
    return "met" if lo >= goal else "NOT met" if hi < goal else "undecided"


def _share(label: str, hits: int, pairs: int, goal: float, at_most: bool,
           common: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    lo, hi = noise.wilson_interval(hits, pairs)
    share = hits / pairs
    status = goal_status(lo, hi, goal, at_most)
    m = common["machine"]
    runs = extra.get("runs_per_side_used", common["runs_per_side"])
    text = (f"{label}: {hits}/{pairs} = {share:.0%} (95% Wilson {lo:.1%}–{hi:.1%}; goal "
            f"{'<=' if at_most else '>='} {goal:.0%}: {status}) — "
            f"{runs} vs {runs} runs of "
            f"{common['duration_s']:g} s at {common['period_ns'] / 1000:g} us "
            f"(--target {common['target']}, ~{common['samples_per_run']} samples a run), "
            f"test {common['test']}; {m['cpu_model']}, {m['cores']} cores"
            f"{', virtual' if m['virtual'] else ''}")
    if "same" in extra:
        text += (f"\n  same: {extra['same']}/{pairs} = {extra['same'] / pairs:.0%} "
                 f"(margins {', '.join(f'{k} ±{v:.0%}' for k, v in noise.DEFAULT_MARGINS.items())})")
    if "by_shift" in extra:
        text += "\n  detection by shift of B (same pairs): " + ", ".join(
            f"x{k} {v:.0%}" for k, v in extra["by_shift"].items())
    return {"name": label, "value": share, "unit": "share of pairs", "hits": hits,
            "pairs": pairs, "ci_low": lo, "ci_high": hi, "interval": "95% Wilson (1927)",
            ("goal_max" if at_most else "goal_min"): goal, "met": status == "met",
            "status": status, **common, **extra, "text": text}


def bench_noise(pairs: int = DEFAULT_PAIRS, runs_per_side: int = DEFAULT_RUNS_PER_SIDE,
                duration_ns: int = DEFAULT_DURATION_NS, target: str = "native",
                period_ns: int = DEFAULT_PERIOD_NS, shift: float = SHIFT,
                b_period_ns: int | None = None, max_repeat: int = 0
                ) -> list[dict[str, Any]]:
    """A/A false `different` and A/B detection (B x `shift`) over `pairs` pairs, the
    detection at other shifts of the same pairs (the power curve), and with
    `max_repeat` > runs_per_side the --repeat auto rule replayed."""
    t0 = time.perf_counter()
    shifts = (shift, *(s for s in POWER_SHIFTS if s != shift))
    measured = max(runs_per_side, max_repeat) if runs_per_side >= 2 else 1
    verdicts: list[dict[str, Any]] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="irqlab-bench-noise-") as tmp:
        from irqlab.store import Store
        with Store(Path(tmp) / "noise.duckdb") as store:
            for i in range(pairs):
                got = _measure_pair(store, target, i + 1, measured, duration_ns,
                                    period_ns, b_period_ns)
                # A pair with a failed run is measured again (at most MAX_RETRIES
                # times in all): the bench calibrates the test, not the probe.
                while isinstance(got, str):
                    failures.append(got)
                    if len(failures) > MAX_RETRIES:
                        raise RuntimeError(f"bench noise: runs keep failing ({got}); "
                                           f"try `irqlab run --target {target}` alone")
                    got = _measure_pair(store, target, i + 1, measured, duration_ns,
                                        period_ns, b_period_ns)
                verdicts.append(_judge(store, got[0], got[1], runs_per_side, shifts,
                                       got[2] if len(got) > 2 else None))
    samples = [n for v in verdicts for n in v["samples"]]
    common = {"pairs": pairs, "runs_per_side": runs_per_side,
              "duration_s": duration_ns / 1e9, "period_ns": period_ns, "target": target,
              "samples_per_run": int(statistics.median(samples)) if samples else 0,
              "runs": 2 * pairs * measured, "test": verdicts[0]["test"],
              "machine": _machine(), "seconds": time.perf_counter() - t0,
              "failed_pairs": failures,
              "reuse": "each pair its own 2 x K runs, A and B interleaved; A/B = the same "
                       f"runs with B's latencies x {shift:g} (and x each of "
                       f"{', '.join(f'{x:g}' for x in POWER_SHIFTS)} for by_shift)"}
    diff = noise.VERDICT_DIFFERENT
    aa = sum(v["aa_verdict"] == diff for v in verdicts)
    found = "excludes 1" if runs_per_side == 1 else diff
    ab = sum(v["ab"][shift] == found for v in verdicts)
    by_shift = {f"{x:g}": sum(v["ab"][x] == found for v in verdicts) / pairs
                for x in sorted(verdicts[0]["ab"])}
    extra_aa = {"same": sum(v["aa_verdict"] == noise.VERDICT_SAME for v in verdicts),
                "ci_excludes_1": sum(v["aa_excludes_1"] for v in verdicts),
                "p50_ratios": [v["p50_ratio"] for v in verdicts]}
    extra_ab = {"shift": shift, "by_shift": by_shift}
    if runs_per_side == 1:
        # Single runs are always `unknown` by design: report how often the interval
        # excluded 1 (the pairs told to re-run with --repeat) instead of pretending power.
        extra_aa["note"] = extra_ab["note"] = (
            "single runs are always `unknown` by design; the A/B hits count the pairs "
            "whose within-run interval excluded 1")
        extra_aa["block_len"] = [v["block_len"] for v in verdicts]
        del extra_aa["same"]
    out = [_share("noise A/A", aa, pairs, AA_GOAL, True, common, extra_aa),
           _share(f"noise A/B (x{shift:g})", ab, pairs, AB_GOAL, False, common, extra_ab)]
    autos = [v["auto"] for v in verdicts if v["auto"] is not None]
    if autos:
        used = {"aa": [a["aa_runs"] for a in autos], "ab": [a["ab_runs"] for a in autos]}
        for key, label, goal, at_most, word in (
                ("aa", "noise auto A/A", AA_GOAL, True, diff),
                ("ab", f"noise auto A/B (x{shift:g})", AB_GOAL, False, diff)):
            hits = sum(a[key] == word for a in autos)
            extra = {"runs_per_side_used": f"3..{measured}",
                     "runs_used_median": statistics.median(used[key]),
                     "runs_used_max": max(used[key]), "max_repeat": measured,
                     "same": sum(a[key] == noise.VERDICT_SAME for a in autos)}
            out.append(_share(label, hits, len(autos), goal, at_most, common, extra))
    if b_period_ns is not None:
        real = sum(v["real"]["verdict"] == diff for v in verdicts)
        common["runs"] = 3 * pairs * measured
        out.append(_share(f"noise A/B (real: period {period_ns / 1000:g} us vs "
                          f"{b_period_ns / 1000:g} us)", real, pairs, AB_GOAL, False,
                          common, {"b_period_ns": b_period_ns,
                                   "p50_ratios": [v["real"]["p50_ratio"] for v in verdicts]}))
    return out
