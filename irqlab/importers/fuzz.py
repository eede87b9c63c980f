"""Mutation fuzzing of the importers, storing included (issue 20).

Each case starts from a real fixture file (tests/fixtures/import), mutates a few of its
lines (huge, negative, fractional or non-ASCII numbers, digit runs, truncation,
duplicated or dropped lines, random bytes), parses it with its format and stores what
parses in a DuckDB store. Every case ends one of three ways:

* ``rejected``: a clean ImportFormatError (the CLI prints it as one line, exit 2);
* ``accepted``: parsed and stored;
* ``crash``: anything else (a traceback for a user): a bug.

Used by ``scripts/fuzz-import`` and by tests/unit/importers/test_fuzz.py.
"""

from __future__ import annotations

import random
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from irqlab.importers import ImportFormatError, ParseOptions, parse_text
from irqlab.importers.ingest import run_names, store_runs
from irqlab.store import Store, StoreError

# fixture file -> (format, --tick-hz it needs)
FIXTURES: dict[str, tuple[str, int | None]] = {
    "rt_eval_zephyr.txt": ("rt-eval", None),
    "rt_eval_quoted.txt": ("rt-eval", None),
    "rt_eval_wrapped.txt": ("rt-eval", None),
    "rt_eval_tmu.txt": ("rt-eval-tmu", None),
    "rt_eval_tmu_minmax.txt": ("rt-eval-tmu", None),
    "tbm_tables.txt": ("tbm", None),
    "tbm_live.txt": ("tbm", None),
    "net_rtt_seed003.txt": ("net-rtt", None),
    "cyclictest_q.txt": ("cyclictest", None),
    "cyclictest_h.txt": ("cyclictest", None),
    "cyclictest.json": ("cyclictest", None),
    "cyclictest_h.json": ("cyclictest", None),
    "cyclictest_h50_overflow.json": ("cyclictest", None),
    "stress-ng_cyclic.txt": ("stress-ng-cyclic", None),
    "jitterdebugger_results.json": ("jitterdebugger", None),
    "jitterdebugger_nsec_results.json": ("jitterdebugger", None),
    "rtla_timerlat_hist.txt": ("rtla-timerlat", None),
    "tscdeadline_latency.txt": ("tscdeadline", 2_000_000_000),
    "irqlab_console_arm64.log": ("irqlab-console", None),
}

_NUMBERS = ["0", "-1", "-0", "1", "9" * 19, "9" * 20, "1" + "0" * 30, "9" * 400,
            "-" + "9" * 25, "18446744073709551616", "9223372036854775808",
            "-9223372036854775809", "4294967296", "1e30", "1e400", "nan", "inf", "-inf",
            "0.0000000001", "1." + "9" * 50, "١٢٣", "²", "0x10", "1_000", "+5", "00000001",
            "3.5", "-3.5", "1e-30", "NaN", "Infinity", "9" * 5000]
_JUNK = ["", " ", "\x00", "\x1b[2J", "\ufffd", "{", "}", "[", "]", '"', ":", ",", "/",
         "%", "\t", "latency", "Total:", "us", "ns", "max=", "T:", "Avg:", "#"]


@dataclass
class Outcome:
    rejected: int = 0
    accepted: int = 0
    crashes: int = 0
    slowest_s: float = 0.0
    slowest_case: str = ""
    crash_examples: list[str] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    # The slowest cases (seconds, file, seed, skip_bad), and their time when run again
    # alone: a shared, loaded machine makes single cases slow that are not.
    slowest: list[tuple[float, str, int, bool]] = field(default_factory=list)
    retimed: list[tuple[float, float, str, int]] = field(default_factory=list)

    def merge(self, other: "Outcome") -> None:
        """Add another worker's outcome to this one (``scripts/fuzz-import --jobs``)."""
        self.rejected += other.rejected
        self.accepted += other.accepted
        self.crashes += other.crashes
        if other.slowest_s > self.slowest_s:
            self.slowest_s, self.slowest_case = other.slowest_s, other.slowest_case
        self.crash_examples += other.crash_examples
        for kind, n in other.kinds.items():
            self.kinds[kind] = self.kinds.get(kind, 0) + n
        self.slowest = sorted(self.slowest + other.slowest, reverse=True)[:5]
        self.retimed += other.retimed

    @property
    def cases(self) -> int:
        return self.rejected + self.accepted + self.crashes


def fixture_texts(folder: Path) -> list[tuple[str, str, str, int | None]]:
    """(file, format, text, tick_hz) of every fixture."""
    out = []
    for name, (fmt, hz) in FIXTURES.items():
        path = folder / name
        if path.exists():
            out.append((name, fmt, path.read_text(encoding="utf-8", errors="replace"), hz))
    return out


def _mutate_line(rng: random.Random, line: str) -> str:
    choice = rng.random()
    digits = [i for i, ch in enumerate(line) if ch.isdigit()]
    if choice < 0.55 and digits:
        # Replace one number (a maximal digit run, with its sign/decimals) by another.
        i = rng.choice(digits)
        lo, hi = i, i
        while lo > 0 and (line[lo - 1].isdigit() or line[lo - 1] in ".-"):
            lo -= 1
        while hi < len(line) and (line[hi].isdigit() or line[hi] == "."):
            hi += 1
        return line[:lo] + rng.choice(_NUMBERS) + line[hi:]
    if choice < 0.7:
        cut = rng.randrange(len(line) + 1)
        return line[:cut]
    if choice < 0.85:
        pos = rng.randrange(len(line) + 1)
        return line[:pos] + rng.choice(_JUNK + _NUMBERS) + line[pos:]
    if choice < 0.93:
        return "".join(chr(rng.randrange(1, 0x2FF)) for _ in range(rng.randrange(1, 40)))
    return line + " " + rng.choice(_NUMBERS) * rng.randrange(1, 3)


def mutate(rng: random.Random, text: str, edits: int | None = None) -> str:
    lines = text.splitlines()
    if not lines:
        return text
    for _ in range(edits or rng.randrange(1, 4)):
        op = rng.random()
        i = rng.randrange(len(lines))
        if op < 0.8:
            lines[i] = _mutate_line(rng, lines[i])
        elif op < 0.88:
            lines.insert(i, lines[rng.randrange(len(lines))])
        elif op < 0.95 and len(lines) > 1:
            del lines[i]
        else:
            lines = lines[: i + 1]
    return "\n".join(lines) + ("\n" if rng.random() < 0.9 else "")


def run_case(store: Store, path: str, fmt: str, text: str, tick_hz: int | None,
             skip_bad: bool = False) -> str:
    """Parse and store one input: "rejected" or "accepted"; anything else raises."""
    try:
        result = parse_text(fmt, path, text, ParseOptions(tick_hz=tick_hz, skip_bad=skip_bad))
        names = run_names(result.runs, None)
        store_runs(store, [(result.runs, names)], {}, {"format": fmt})
    except (ImportFormatError, StoreError):
        return "rejected"
    return "accepted"


def fuzz(n: int, folder: Path, seed: int = 0, store: Store | None = None,
         progress: bool = False, max_examples: int = 10,
         max_seconds: float | None = None) -> Outcome:
    """Run ``n`` mutated cases round-robin over the fixtures (fewer when ``max_seconds``
    runs out first)."""
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    rng = random.Random(seed)
    sources = fixture_texts(folder)
    own = store is None
    store = store or Store(":memory:")
    out = Outcome()
    try:
        for k in range(n):
            if deadline is not None and time.monotonic() > deadline:
                break
            name, fmt, text, hz = sources[k % len(sources)]
            case_seed = rng.getrandbits(48)
            crng = random.Random(case_seed)
            mutated = mutate(crng, text)
            skip_bad = crng.random() < 0.3
            t0 = time.perf_counter()
            try:
                kind = run_case(store, name, fmt, mutated, hz, skip_bad)
            except Exception as exc:        # a crash: what a user would see as traceback
                kind = "crash"
                if len(out.crash_examples) < max_examples:
                    out.crash_examples.append(
                        f"{name} seed={case_seed} skip_bad={skip_bad}: "
                        f"{type(exc).__name__}: {str(exc)[:200]}\n"
                        + "".join(traceback.format_exc().splitlines(True)[-4:]))
            dt = time.perf_counter() - t0
            if dt > out.slowest_s:
                out.slowest_s, out.slowest_case = dt, f"{name} seed={case_seed}"
            if len(out.slowest) < 5 or dt > out.slowest[-1][0]:
                out.slowest = sorted(out.slowest + [(dt, name, case_seed, skip_bad)],
                                     reverse=True)[:5]
            setattr(out, {"rejected": "rejected", "accepted": "accepted",
                          "crash": "crashes"}[kind],
                    getattr(out, {"rejected": "rejected", "accepted": "accepted",
                                  "crash": "crashes"}[kind]) + 1)
            out.kinds[f"{fmt}:{kind}"] = out.kinds.get(f"{fmt}:{kind}", 0) + 1
            if progress and (k + 1) % 10_000 == 0:
                print(f"  {k + 1} cases: {out.rejected} rejected, {out.accepted} accepted, "
                      f"{out.crashes} crashes, slowest {out.slowest_s:.3f} s", flush=True)
            if own and (k + 1) % 20_000 == 0:
                store.close()              # keep the in-memory store small
                store = Store(":memory:")
        for dt, name, case_seed, skip_bad in out.slowest:
            fmt, hz = FIXTURES[name]
            text = mutate(random.Random(case_seed), (folder / name).read_text(
                encoding="utf-8", errors="replace"))
            t0 = time.perf_counter()
            try:
                run_case(store, name, fmt, text, hz, skip_bad)
            except Exception:
                pass
            out.retimed.append((dt, time.perf_counter() - t0, name, case_seed))
    finally:
        if own:
            store.close()
    return out


def replay(folder: Path, name: str, case_seed: int, skip_bad: bool) -> str:
    """The mutated text of one reported case (to reproduce a crash)."""
    fmt, hz = FIXTURES[name]
    text = (folder / name).read_text(encoding="utf-8", errors="replace")
    crng = random.Random(case_seed)
    return mutate(crng, text)


__all__ = ["FIXTURES", "Outcome", "fuzz", "mutate", "run_case", "replay"]
