"""Mutation fuzzing of the importers, storing included (issue 20).

Each case starts from a real fixture file (tests/fixtures/import), mutates a few of its
lines (huge, negative, fractional or non-ASCII numbers, digit runs, truncation,
duplicated or dropped lines, random bytes), parses it with its format and stores what
parses in a DuckDB store through the import's own path (ingest.store_runs, one
transaction a case). Every case ends one of three ways:

* ``rejected``: a clean ImportFormatError (the CLI prints it as one line, exit 2);
* ``accepted``: parsed and stored;
* ``crash``: anything else (a traceback for a user): a bug.

A worker keeps one store file (in a temporary folder) for ``rotate_every`` cases, then
checkpoints, closes and deletes it and opens a new one: opening a store (schema, server)
costs far more than a case, and a file that grows without bound would slow every insert.
Each case's runs go in as new runs (fresh run ids) beside the earlier cases' runs.

Used by ``scripts/fuzz-import`` and by tests/unit/importers/test_fuzz.py and
test_hostile_imports.py.
"""

from __future__ import annotations

import random
import shutil
import signal
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from irqlab.importers import (FORMATS, ImportFormatError, ParseOptions, parse_text,
                              stream_file)
from irqlab.importers.ingest import StoredRun, run_names, store_runs
from irqlab.store import Store, StoreError

# Cases a worker's store file holds before it is replaced by a new one.
ROTATE_EVERY = 5_000

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
    store_rejected: int = 0        # of the rejected: by a StoreError (not the parser)
    runs_stored: int = 0           # runs the accepted cases stored
    stores_opened: int = 0         # store files a worker opened (one per rotate_every)
    store_crashes: int = 0         # checkpoints of a rotated store that failed
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
        self.store_rejected += other.store_rejected
        self.runs_stored += other.runs_stored
        self.stores_opened += other.stores_opened
        self.store_crashes += other.store_crashes
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


def run_case_stored(store: Store, path: str, fmt: str, text: str, tick_hz: int | None,
                    skip_bad: bool = False, case_dir: Path | None = None
                    ) -> tuple[str, list[StoredRun]]:
    """Parse and store one input as ``irqlab import`` does: ("rejected", []) for an
    ImportFormatError, ("store-rejected", []) for a StoreError (also one clean line for
    the user, but on a healthy store a sign of trouble: counted apart), or ("accepted",
    the stored runs); anything else raises.

    With ``case_dir``, a format that streams (tscdeadline) reads the input from a file
    written there, its samples streamed into the store while it is stored: the path
    ``irqlab import`` takes for it (stream_file), not the whole-text parser."""
    options = ParseOptions(tick_hz=tick_hz, skip_bad=skip_bad)
    try:
        if case_dir is not None and FORMATS[fmt].stream is not None:
            file = case_dir / path
            file.write_text(text, encoding="utf-8")
            result = stream_file(fmt, file, options)
        else:
            result = parse_text(fmt, path, text, options)
        names = run_names(result.runs, None)
        stored = store_runs(store, [(result.runs, names)], {}, {"format": fmt})
    except ImportFormatError:
        return "rejected", []
    except StoreError:
        return "store-rejected", []
    return "accepted", stored


def run_case(store: Store, path: str, fmt: str, text: str, tick_hz: int | None,
             skip_bad: bool = False) -> str:
    """Parse and store one input: "rejected" or "accepted"; anything else raises."""
    kind = run_case_stored(store, path, fmt, text, tick_hz, skip_bad)[0]
    return "rejected" if kind == "store-rejected" else kind


def open_store(folder: Path) -> Store:
    """A worker's store: a new DuckDB file in ``folder``, as ``irqlab import --db`` opens.

    Two settings differ from a command's, for speed only (what a case stores and how is
    unchanged): one DuckDB thread (a case's statements are tiny; a second thread only
    adds hand-offs, and the machine's other core is someone else's), and no automatic
    checkpoint (Store sets a 2 MB threshold to bound a long run's memory, which made
    every few dozen commits a checkpoint): `close_store` checkpoints once instead."""
    store = Store(folder / "fuzz.duckdb")
    store.con.execute("SET threads = 1")
    store.con.execute("SET checkpoint_threshold = '1GB'")
    return store


def close_store(store: Store) -> None:
    """Checkpoint (the write a 2 MB threshold would have made along the way), close."""
    try:
        store.con.execute("CHECKPOINT")
    finally:
        store.close()


class _WorkerStore:
    """The store one worker writes its cases to, replaced by a new file every
    ``rotate_every`` cases and after a crash (which may have left it unusable)."""

    def __init__(self, rotate_every: int, out: Outcome) -> None:
        self.rotate_every = max(1, rotate_every)
        self.out = out
        self.folder: Path | None = None
        self.store: Store | None = None
        self.cases = 0

    def get(self, k: int) -> Store:
        """The store for case ``k`` (0-based), a new one every ``rotate_every`` cases."""
        if self.store is not None and self.cases >= self.rotate_every:
            self.finish(k)
        store = self.current()
        self.cases += 1
        return store

    def current(self) -> Store:
        """The open store (a new one if none is), without counting a case: for the
        slowest cases timed again."""
        if self.store is None:
            self.folder = Path(tempfile.mkdtemp(prefix="irqlab-fuzz-"))
            self.store = open_store(self.folder)
            self.out.stores_opened += 1
            self.cases = 0
        return self.store

    def finish(self, k: int) -> None:
        """Checkpoint, close and delete the store of the cases before case ``k``; a
        failure there is a crash too (of those cases' stored data, not of one case)."""
        first = k - self.cases
        try:
            self.close()
        except Exception as exc:
            self.out.store_crashes += 1
            self.out.crash_examples.append(
                f"checkpoint of the store holding cases {first}..{k - 1}: "
                f"{type(exc).__name__}: {str(exc)[:200]}\n"
                + "".join(traceback.format_exc().splitlines(True)[-4:]))

    def close(self, checkpoint: bool = True) -> None:
        """Checkpoint, close and delete the store file; after a crash (``checkpoint``
        False) only close and delete: the crash is counted already."""
        store, folder, self.store, self.folder = self.store, self.folder, None, None
        try:
            if store is not None and checkpoint:
                close_store(store)
            elif store is not None:
                try:
                    store.close()
                except Exception:       # noqa: BLE001 - the store is thrown away
                    pass
        finally:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)


def _crash_text(name: str, case_seed: int, skip_bad: bool, exc: BaseException) -> str:
    """What a crash example says: the case to replay, then the traceback's end."""
    return (f"{name} seed={case_seed} skip_bad={skip_bad}: {type(exc).__name__}: "
            f"{str(exc)[:200]}\n" + "".join(traceback.format_exc().splitlines(True)[-4:]))


def _count(out: Outcome, fmt: str, kind: str, runs: int, dt: float, name: str,
           case_seed: int, skip_bad: bool) -> None:
    if kind == "store-rejected":
        out.store_rejected += 1
        kind = "rejected"
    if kind == "rejected":
        out.rejected += 1
    elif kind == "accepted":
        out.accepted += 1
        out.runs_stored += runs
    else:
        out.crashes += 1
    out.kinds[f"{fmt}:{kind}"] = out.kinds.get(f"{fmt}:{kind}", 0) + 1
    if dt > out.slowest_s:
        out.slowest_s, out.slowest_case = dt, f"{name} seed={case_seed}"
    if len(out.slowest) < 5 or dt > out.slowest[-1][0]:
        out.slowest = sorted(out.slowest + [(dt, name, case_seed, skip_bad)],
                             reverse=True)[:5]


def fuzz(n: int, folder: Path, seed: int = 0, store: Store | None = None,
         progress: bool = False, max_examples: int = 10,
         max_seconds: float | None = None, rotate_every: int = ROTATE_EVERY) -> Outcome:
    """Run ``n`` mutated cases round-robin over the fixtures (fewer when ``max_seconds``
    runs out first). Without ``store``, the cases go to a store file of this worker's,
    a new one every ``rotate_every`` cases, and a streaming format's cases are read from
    a file as ``irqlab import`` reads them (run_case_stored's ``case_dir``)."""
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    rng = random.Random(seed)
    sources = fixture_texts(folder)
    out = Outcome()
    worker = None if store is not None else _WorkerStore(rotate_every, out)
    # Ctrl-C ends the campaign after the case at hand, with its figures: raised inside
    # a case, DuckDB turns it into InterruptException, which would count as a crash.
    stopped: list[int] = []
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, lambda signum, _frame: stopped.append(signum))
    try:
        for k in range(n):
            if stopped or (deadline is not None and time.monotonic() > deadline):
                break
            name, fmt, text, hz = sources[k % len(sources)]
            case_seed = rng.getrandbits(48)
            crng = random.Random(case_seed)
            mutated = mutate(crng, text)
            skip_bad = crng.random() < 0.3
            target = store if worker is None else worker.get(k)
            case_dir = None if worker is None else worker.folder
            t0 = time.perf_counter()
            try:
                kind, runs = run_case_stored(target, name, fmt, mutated, hz, skip_bad,
                                             case_dir)
            except Exception as exc:        # a crash: what a user would see as traceback
                kind, runs = "crash", []
                if len(out.crash_examples) < max_examples:
                    out.crash_examples.append(_crash_text(name, case_seed, skip_bad, exc))
                if worker is not None:      # the next case gets a store known to work
                    worker.close(checkpoint=False)
            _count(out, fmt, kind, len(runs), time.perf_counter() - t0, name, case_seed,
                   skip_bad)
            if progress and (k + 1) % 10_000 == 0:
                print(f"  {k + 1} cases: {out.rejected} rejected, {out.accepted} accepted, "
                      f"{out.crashes} crashes, slowest {out.slowest_s:.3f} s", flush=True)
        for dt, name, case_seed, skip_bad in out.slowest:
            fmt, hz = FIXTURES[name]
            text = mutate(random.Random(case_seed), (folder / name).read_text(
                encoding="utf-8", errors="replace"))
            target = store if worker is None else worker.current()
            case_dir = None if worker is None else worker.folder
            # CPU seconds, not wall: a fuzz at nice 19 beside a busy machine waited 10 s
            # for a CPU in cases that take 0.04 s of one (the store uses one thread).
            t0 = time.process_time()
            try:
                run_case_stored(target, name, fmt, text, hz, skip_bad, case_dir)
            except Exception:
                pass
            out.retimed.append((dt, time.process_time() - t0, name, case_seed))
        if worker is not None:
            worker.finish(n)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        if worker is not None:
            worker.close(checkpoint=False)     # only after an error: finish() closed it
    return out


def replay(folder: Path, name: str, case_seed: int, skip_bad: bool) -> str:
    """The mutated text of one reported case (to reproduce a crash)."""
    fmt, hz = FIXTURES[name]
    text = (folder / name).read_text(encoding="utf-8", errors="replace")
    crng = random.Random(case_seed)
    return mutate(crng, text)


__all__ = ["FIXTURES", "ROTATE_EVERY", "Outcome", "close_store", "fuzz", "mutate",
           "open_store", "replay", "run_case", "run_case_stored"]
