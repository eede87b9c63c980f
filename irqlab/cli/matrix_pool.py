"""``irqlab matrix FILE --lg-places MATCH --parallel N``: a matrix spread over a pool of
labgrid places (docs/matrix.md, "A pool of boards").

labgrid's coordinator already schedules boards (places, tags, acquire/release), so the
pool only picks: for each cell it takes a matching place the coordinator listed free and
sends the cell to one of up to N worker processes (``python -m irqlab.cli.matrix_pool``),
which runs it as ``irqlab run --target labgrid --lg-place PLACE`` does (the labgrid
target acquires the place, boots, measures, releases) and answers with its result.

- One writer: the workers open the store the parent holds; a DuckDB file is then lent
  over the holder's socket (irqlab/store/share.py), a lab store is PostgreSQL.
- A place whose run fails (boot failure, console gone, QEMU killed) is marked failed and
  not used again by this matrix; the cell is retried once on another place, and the
  retry's run records the failure (metadata ``pool.failed``) and the cell a note. A
  place someone else took between the listing and the acquire is not a failure: the
  cell waits for the next free place.
- Ctrl-C / SIGTERM: every busy worker is told (SIGINT), its run stops and stores what it
  has and its target releases the place; a place a worker still holds after that (a
  worker killed) is released here. --resume then skips the cells done.
"""

from __future__ import annotations

import fnmatch
import getpass
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from irqlab.cli.common import UsageError
from irqlab.cli.matrix import (CellResult, MatrixObserver, _key, previous_results,
                               previous_series)
from irqlab.cli.scenario import Scenario, cell_id, load_scenario

if TYPE_CHECKING:
    import argparse

    from irqlab.store import Store

_CLIENT_TIMEOUT_S = 30.0
_POLL_S = 0.1
# A worker told to stop ends its run, stores it and releases its place: QEMU's end,
# labgrid's clean-up and the release take seconds, a loaded host more.
_STOP_GRACE_S = 60.0
# How often free places are looked for while every matching one is taken by others.
_WAIT_NOTICE_S = 30.0
_LIST_EVERY_S = 1.0
ACQUIRE_FAILED = "cannot acquire labgrid place"    # irqlab.targets.labgrid's message


@dataclass
class PlaceInfo:
    name: str
    tags: dict[str, str]
    acquired: str | None          # "host/user", or None when free


def me() -> str:
    """Who labgrid-client says acquired a place from here (its gethostname/getuser)."""
    return (os.environ.get("LG_HOSTNAME", socket.gethostname()) + "/"
            + os.environ.get("LG_USERNAME", getpass.getuser()))


def parse_places(text: str) -> list[PlaceInfo]:
    """``labgrid-client -v places`` output (labgrid.remote.common.Place.show): a
    "Place 'NAME':" line, then indented "tags: k=v, ..." and "acquired: X" lines."""
    out: list[PlaceInfo] = []
    for line in text.splitlines():
        if line.startswith("Place '") and line.rstrip().endswith("':"):
            out.append(PlaceInfo(line.strip()[len("Place '"):-2], {}, None))
        elif out and line.startswith("  tags: "):
            for item in line[len("  tags: "):].split(", "):
                k, _, v = item.partition("=")
                out[-1].tags[k.strip()] = v.strip()
        elif out and line.startswith("  acquired: "):
            who = line[len("  acquired: "):].strip()
            out[-1].acquired = None if who == "None" else who
    return out


def matches(place: PlaceInfo, match: str) -> bool:
    """MATCH: ``tag=value`` (several joined by ',' must all hold) or an fnmatch pattern
    over the place's name."""
    if "=" in match:
        wanted = [item.partition("=") for item in match.split(",")]
        return all(place.tags.get(k.strip()) == v.strip() for k, _, v in wanted)
    return fnmatch.fnmatchcase(place.name, match)


class Coordinator:
    """labgrid-client calls to one coordinator (the CLI, as the labgrid target uses)."""

    def __init__(self, address: str | None) -> None:
        from irqlab.targets.labgrid import labgrid_client

        self.address = address
        self.argv = labgrid_client() + (["-x", address] if address else [])

    def _call(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*self.argv, *args], capture_output=True, text=True,
                              timeout=_CLIENT_TIMEOUT_S, stdin=subprocess.DEVNULL)

    def places(self) -> list[PlaceInfo]:
        res = self._call("-v", "places")
        if res.returncode != 0:
            lines = (res.stderr or res.stdout).strip().splitlines() or [
                f"labgrid-client exit code {res.returncode}"]
            raise OSError(lines[-1][-300:])     # its last line says what failed
        return parse_places(res.stdout)

    def release(self, place: str) -> str | None:
        """Release ``place``; None when done, else the client's message."""
        res = self._call("-p", place, "release")
        return None if res.returncode == 0 else (res.stderr or res.stdout).strip()[-300:]


@dataclass
class Job:
    cell: dict[str, Any]
    series: tuple[str, int] | None
    tried: list[str] = field(default_factory=list)             # places, in order
    failures: list[dict[str, Any]] = field(default_factory=list)


class Worker:
    """A worker process: it runs the cells sent to it one after another (a new one a
    cell would cost an interpreter start and irqlab's imports, ~2 CPU s, each time)."""

    def __init__(self, spec: dict[str, Any], coordinator: str | None) -> None:
        from irqlab.runner.process import die_with_parent

        env = dict(os.environ)
        if coordinator:
            env["LG_COORDINATOR"] = coordinator
        self.log = tempfile.TemporaryFile("w+")
        # Its own session: a terminal's Ctrl-C reaches the parent only, which tells each
        # busy worker once (a second SIGINT would not let a run store what it has).
        self.proc = subprocess.Popen([sys.executable, "-m", "irqlab.cli.matrix_pool",
                                      json.dumps(spec, default=str)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, env=env, start_new_session=True,
                                     preexec_fn=die_with_parent)
        self.job: Job | None = None
        self.place = ""
        self.buf = b""

    def send(self, job: Job, place: str, pool: dict[str, Any]) -> None:
        self.job, self.place = job, place
        line = {"place": place, "cell": job.cell, "series": job.series, "pool": pool}
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(line, default=str) + "\n").encode())
        self.proc.stdin.flush()

    def fileno(self) -> int:
        assert self.proc.stdout is not None
        return self.proc.stdout.fileno()

    def read(self) -> dict[str, Any] | None:
        """The job's result once its line is complete; None before. A worker that
        ended without one gives a failed result naming its last words."""
        chunk = os.read(self.fileno(), 1 << 16)
        self.buf += chunk
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            if line.startswith(b'{"type": "pool_result"'):
                return json.loads(line)
        if chunk:
            return None
        self.proc.wait()
        self.log.seek(0)
        tail = self.log.read().strip().splitlines()[-1:] or [
            f"exit code {self.proc.returncode}"]
        return {"run_id": None, "status": "failed", "summary": {}, "notes": [],
                "message": f"worker failed: {tail[0][-300:]}"}

    def close(self, wait_s: float) -> None:
        """End it: stdin closed (it exits between cells), killed after ``wait_s``."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Pool:
    """Runs a scenario's cells over the matching places, N at a time."""

    def __init__(self, scn: Scenario, spec: dict[str, Any], coordinator: Coordinator,
                 match: str, places: list[str], parallel: int) -> None:
        self.scn, self.spec, self.coordinator = scn, spec, coordinator
        self.match, self.places, self.parallel = match, places, parallel
        self.failed: dict[str, str] = {}      # place -> why it was marked failed
        self.used: set[str] = set()
        self._next_listing = 0.0
        self.free: set[str] = set()           # places last listed free, not yet used
        self.workers: list[Worker] = []
        # Places a run may have left acquired: sent a cell whose run has not said it
        # released the place (until it does).
        self.unreleased: set[str] = set()
        self.held: list[str] = []             # "place by host/user", others' places

    # -- set-up -----------------------------------------------------------------------

    @classmethod
    def from_args(cls, args: argparse.Namespace, scn: Scenario) -> Pool:
        """Check the scenario runs on labgrid and the coordinator has matching places;
        bad input is a UsageError (exit 2)."""
        from irqlab.cli import cmd_run
        from irqlab.cli.common import db_path
        from irqlab.cli.scenario import parse_cell_args
        from irqlab.targets import get_target

        first = next(scn.iter_cells(), {})
        cfg = cmd_run.run_config(parse_cell_args(scn, first))
        if not get_target(cfg.target).runs_on_lg_places:
            raise UsageError(f"--lg-places runs cells on labgrid places: the scenario's "
                             f"target is {cfg.target}; set target = \"labgrid\" and lg_env "
                             f"in [run] (or --set target=labgrid --set lg_env=ENV.yaml)")
        keys = {k.replace("-", "_") for k in scn.run} | {
            part.replace("-", "_") for k in scn.matrix for part in k.split("+")}
        if "lg_place" in keys:
            raise UsageError("--lg-places picks each cell's place: remove lg_place from "
                             "the scenario")
        coordinator = Coordinator(cfg.options.coordinator)
        spec = {"file": str(Path(args.file).resolve()), "repeat": args.repeat,
                "max_cells": args.max_cells, "overrides": dict(args.overrides),
                "db": str(db_path(args)), "match": args.lg_places}
        pool = cls(scn, spec, coordinator, args.lg_places, [], args.parallel)
        # The workers start now: their imports (~2 CPU s each) overlap the listing and
        # the store's opening instead of delaying the first cells.
        for _ in range(min(args.parallel, scn.cell_count() * scn.repeat)):
            pool.workers.append(Worker(spec, coordinator.address))
        try:
            pool._places_from(coordinator, args.lg_places)
        except BaseException:
            pool.close_workers()
            raise
        for w in pool.workers[len(pool.places):]:   # more workers than places
            w.close(0)
        del pool.workers[len(pool.places):]
        return pool

    def _places_from(self, coordinator: Coordinator, match: str) -> None:
        """The matching places, and which of them are free now; UsageError if none."""
        try:
            listed = coordinator.places()
        except (OSError, subprocess.TimeoutExpired) as exc:
            where = coordinator.address or "LG_COORDINATOR / 127.0.0.1:20408"
            raise UsageError(f"--lg-places: cannot list the places of the labgrid "
                             f"coordinator at {where}: {exc}; start it or set "
                             f"LG_COORDINATOR=HOST:PORT") from None
        self.places = sorted(p.name for p in listed if matches(p, match))
        if not self.places:
            known = ", ".join(sorted(p.name for p in listed)) or "none"
            raise UsageError(f"--lg-places {match}: no place of the coordinator "
                             f"matches (its places: {known}); give a name pattern such "
                             f"as 'rig-*' or tag=value")
        self.free = {p.name for p in listed if p.name in self.places and not p.acquired}
        self.held = [f"{p.name} by {p.acquired}" for p in listed
                     if p.name in self.places and p.acquired]
        self._next_listing = time.monotonic() + _LIST_EVERY_S

    def close_workers(self) -> None:
        for w in self.workers:
            w.close(0 if w.job is not None else 10)
        self.workers = []

    # -- the run ----------------------------------------------------------------------

    def _jobs(self, store: Store, resume: bool) -> tuple[list[Job], dict[str, Any], int]:
        """(jobs to run, results already stored keyed by cell, runs in all)."""
        from irqlab.suite import interleave, new_series_id

        if self.scn.repeat == 1:
            done = previous_results(store, self.scn) if resume else {}
            cells = list(self.scn.iter_cells())
            return ([Job(c, None) for c in cells if _key(c) not in done],
                    {k: [v] for k, v in done.items()}, len(cells))
        series = previous_series(store, self.scn) if resume else {}
        plans, stored = [], {}
        for cell in self.scn.cells():
            sid, ok = series.get(_key(cell)) or (
                new_series_id(f"{self.scn.name}/{cell_id(cell)}"), {})
            stored[_key(cell)] = [ok[i] for i in sorted(ok) if i <= self.scn.repeat]
            plans.append([Job(cell, (sid, i)) for i in range(1, self.scn.repeat + 1)
                          if i not in ok])
        return interleave(plans), stored, self.scn.cell_count() * self.scn.repeat

    def run(self, store: Store, observer: MatrixObserver,
            resume: bool = False) -> tuple[list[CellResult], bool]:
        """Every job on a place, N at a time; returns (results in cell order,
        interrupted?) as run_matrix does."""
        from irqlab.measure.boot import StopFlag

        jobs, stored, total = self._jobs(store, resume)
        if resume and total > len(jobs):
            observer.notice(f"resuming {self.scn.name}: {total - len(jobs)} of {total} "
                            f"runs already done")
        queue: deque[Job] = deque(jobs)
        results: dict[str, list[CellResult]] = {k: list(v) for k, v in stored.items()}
        started, waiting_since = 0, None
        interrupted = False

        def record(res: CellResult) -> None:
            results.setdefault(_key(res.cell), []).append(res)
            observer.cell_done(res)

        with StopFlag() as stop:
            try:
                while queue or self._busy():
                    if stop.signum is not None:
                        interrupted = True
                        break
                    started, waiting_since = self._dispatch(queue, observer, started,
                                                            len(jobs), waiting_since)
                    for res in self._collect(queue, observer, _POLL_S):
                        record(res)
                        interrupted |= res.status == "interrupted"
                    if interrupted:
                        break
                    if not self._busy() and queue and self._usable() == []:
                        for job in queue:       # every place failed: nothing can run
                            record(self._unrun(job))
                        queue.clear()
            finally:
                for res in self._stop_workers(observer):
                    record(res)
                self._release_leftovers(observer)
        ordered = [r for c in self.scn.iter_cells()
                   for r in sorted(results.get(_key(c), []),
                                   key=lambda r: (r.index or 0, r.run_id or 0))]
        return ordered, interrupted or stop.signum is not None

    def _usable(self) -> list[str]:
        return [p for p in self.places if p not in self.failed]

    def _busy(self) -> list[Worker]:
        return [w for w in self.workers if w.job is not None]

    def _dispatch(self, queue: deque[Job], observer: MatrixObserver, started: int,
                  total: int, waiting_since: float | None) -> tuple[int, float | None]:
        """Give jobs to workers while jobs wait, fewer than N run and a place is free."""
        while queue and len(self._busy()) < self.parallel:
            job = queue[0]
            busy = {w.place for w in self._busy()}
            # A retry goes to a place the cell has not tried.
            choice = next((p for p in self._usable() if p in self.free and p not in busy
                           and p not in job.tried), None)
            if choice is None and self._relist(observer):
                continue
            if choice is None:
                break
            queue.popleft()
            self.free.discard(choice)
            self._start(job, choice)
            observer.cell_started(started, total, job.cell)
            started += 1
            waiting_since = None
        if queue and not self._busy():
            now = time.monotonic()
            if waiting_since is None or now - waiting_since > _WAIT_NOTICE_S:
                observer.notice(f"waiting for a free place matching {self.match} "
                                f"(held by others: {', '.join(self.held) or 'none'})")
                waiting_since = now
        return started, waiting_since

    def _relist(self, observer: MatrixObserver) -> bool:
        """Ask the coordinator which places are free; False when asked less than a second
        ago. Free places are remembered between listings (each is a labgrid-client
        process, ~0.5 CPU s): one this matrix's worker released is free again, and one
        someone else took meanwhile only makes that worker's acquire fail (the cell
        then waits, see _finished)."""
        if time.monotonic() < self._next_listing:
            return False
        self._next_listing = time.monotonic() + _LIST_EVERY_S
        try:
            listed = [p for p in self.coordinator.places() if p.name in self.places]
        except (OSError, subprocess.TimeoutExpired) as exc:
            observer.notice(f"labgrid coordinator: {exc}; retrying")
            return False
        self.free = {p.name for p in listed if p.acquired is None}
        self.held = [f"{p.name} by {p.acquired}" for p in listed if p.acquired]
        return bool(self.free)

    def _start(self, job: Job, place: str) -> None:
        """Send ``job`` to an idle worker (a new one while fewer than N exist)."""
        self.used.add(place)
        self.unreleased.add(place)
        job.tried.append(place)
        for dead in [w for w in self.workers if w.job is None and w.proc.poll() is not None]:
            self.workers.remove(dead)          # ended while idle: replaced below
            dead.close(0)
        worker = next((w for w in self.workers if w.job is None), None)
        if worker is None:
            worker = Worker(self.spec, self.coordinator.address)
            self.workers.append(worker)
        pool = {"match": self.match, "place": place, "attempt": len(job.tried),
                "failed": job.failures}
        try:
            worker.send(job, place, pool)
        except OSError:
            # It died just now: its pipe's end is read as a failed result (_collect),
            # which counts against the place like any failed run.
            worker.job, worker.place = job, place

    def _collect(self, queue: deque[Job], observer: MatrixObserver,
                 timeout_s: float) -> list[CellResult]:
        """Results of the busy workers that finished within ``timeout_s``."""
        import select

        busy = self._busy()
        if not busy:
            time.sleep(timeout_s)
            return []
        ready, _w, _x = select.select(busy, [], [], timeout_s)
        out = []
        for w in ready:
            row = w.read()
            if row is None:
                continue
            job, place = w.job, w.place
            w.job = None
            if w.proc.poll() is not None:       # died: a new one takes its place
                self.workers.remove(w)
                w.close(0)
            assert job is not None
            res = self._finished(job, place, row, queue, observer)
            if res is not None:
                out.append(res)
        return out

    def _finished(self, job: Job, place: str, row: dict[str, Any], queue: deque[Job],
                  observer: MatrixObserver) -> CellResult | None:
        """A worker's result; None when the cell goes back to the queue."""
        if row.get("released"):
            self.unreleased.discard(place)
        message = row.get("message") or ""
        if row["status"] == "failed" and ACQUIRE_FAILED in message:
            # Taken by someone else after we listed it free: not this place's fault.
            job.tried.remove(place)
            queue.appendleft(job)
            return None
        if row["status"] != "failed":
            self.free.add(place)      # its run released it (checked at the end)
        res = CellResult(job.cell, row["run_id"], row["status"], row["summary"],
                         row["notes"], series=None if job.series is None
                         else job.series[0],
                         index=None if job.series is None else job.series[1],
                         place=place)
        if row["status"] != "failed":
            res.notes[:0] = self._failure_notes(job)
            return res
        # A failed run: the place is suspect (boot failure, console gone).
        self.failed[place] = message
        job.failures.append({"place": place, "run_id": row["run_id"],
                               "message": message})
        observer.notice(f"place {place} failed ({message}); not used again by this "
                        f"matrix")
        if len(job.tried) < 2 and any(p not in job.tried for p in self._usable()):
            queue.appendleft(job)     # retried once, on another place
            return None
        res.notes[:0] = self._failure_notes(job)
        return res

    @staticmethod
    def _failure_notes(job: Job) -> list[str]:
        return [f"place {f['place']} failed (run {f['run_id']}: {f['message']}); "
                + (f"retried on {job.tried[-1]}" if job.tried[-1] != f["place"]
                   else "no retry left") for f in job.failures]

    def _unrun(self, job: Job) -> CellResult:
        why = "; ".join(f"{p}: {m}" for p, m in self.failed.items())
        res = CellResult(job.cell, None, "failed", {}, self._failure_notes(job) + [
            f"not run: every place matching {self.match} failed ({why})"],
            series=None if job.series is None else job.series[0],
            index=None if job.series is None else job.series[1])
        return res

    def _stop_workers(self, observer: MatrixObserver) -> list[CellResult]:
        """SIGINT to every busy worker (its run stops, stores what it has, releases its
        place); their results; then every worker ends."""
        busy = self._busy()
        for w in busy:
            if w.proc.poll() is None:
                w.proc.send_signal(signal.SIGINT)
        out: list[CellResult] = []
        deadline = time.monotonic() + _STOP_GRACE_S
        drop: deque[Job] = deque()              # no retry while stopping
        while self._busy() and time.monotonic() < deadline:
            out += self._collect(drop, observer, 0.2)
        for w in self._busy():
            observer.notice(f"the run on {w.place} did not stop in {_STOP_GRACE_S:.0f} s: "
                            f"killed")
        self.close_workers()
        return out

    def _release_leftovers(self, observer: MatrixObserver) -> None:
        """Release any place this matrix used that is still acquired from here (a worker
        that was killed could not); asked only when a run did not say it released its
        place (each run's labgrid.released)."""
        if not self.unreleased:
            return
        try:
            listed = self.coordinator.places()
        except (OSError, subprocess.TimeoutExpired) as exc:
            observer.notice(f"could not check the places are released: {exc}; release "
                            f"them with labgrid-client -p PLACE release")
            return
        mine = me()
        for p in listed:
            if p.name in self.unreleased and p.acquired == mine:
                err = self.coordinator.release(p.name)
                observer.notice(f"released place {p.name}" if err is None
                                else f"could not release place {p.name}: {err}")


# -- the worker -----------------------------------------------------------------------

class _Quiet:
    """The worker's matrix observer: the parent shows progress, the worker says only
    its result (stdout)."""

    def cell_started(self, index: int, total: int, cell: dict[str, Any]) -> None:
        pass

    def cell_progress(self, fraction: float) -> None:
        pass

    def cell_done(self, result: CellResult) -> None:
        pass

    def notice(self, text: str) -> None:
        print(text, file=sys.stderr)


def worker_main(argv: list[str]) -> int:
    """``python -m irqlab.cli.matrix_pool SPEC``: read jobs (JSON lines: place, cell,
    series, pool) from stdin, run each cell on its place into the store SPEC names, and
    print each result as one JSON line; ends at the end of stdin."""
    from irqlab.cli.matrix import _run_cell
    from irqlab.store import open_store

    spec = json.loads(argv[0])
    # What a cell needs, imported while the matrix lists the places and opens the store.
    import irqlab.measure.run  # noqa: F401
    import irqlab.store.db  # noqa: F401
    import irqlab.targets.labgrid  # noqa: F401
    import labgrid  # noqa: F401
    import labgrid.remote.client  # noqa: F401

    scn = load_scenario(spec["file"], repeat=spec["repeat"], max_cells=spec["max_cells"],
                        overrides=spec["overrides"])
    try:
        first = sys.stdin.readline()    # the store is opened once the matrix holds it
        if not first:
            return 0
        with open_store(spec["db"]) as store:
            for line in itertools.chain([first], sys.stdin):
                job = json.loads(line)
                # Inherited by what the run starts (labgrid's QEMU): which place a
                # process belongs to, for whoever looks at the host's processes.
                os.environ["IRQLAB_LG_PLACE"] = job["place"]
                series = tuple(job["series"]) if job["series"] else None
                res = _run_cell(scn, job["cell"], store, _Quiet(),   # type: ignore[arg-type]
                                series, place=job["place"], pool=job["pool"])
                meta = store.resolve(str(res.run_id)).metadata if res.run_id else {}
                print(json.dumps({"type": "pool_result", "run_id": res.run_id,
                                  "status": res.status, "summary": res.summary,
                                  "notes": res.notes,
                                  "message": res.summary.get("message"),
                                  "released": (meta.get("labgrid") or {}).get("released")},
                                 default=str), flush=True)
    except KeyboardInterrupt:          # told to stop between two cells
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
