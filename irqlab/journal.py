"""Restore journal: how to undo every host change irqlab makes, written *before* the change.

One JSON-lines file per irqlab process under ``$IRQLAB_STATE_DIR`` (default
``$XDG_STATE_HOME/irqlab/journal``, i.e. ~/.local/state/irqlab/journal). The owner holds an
exclusive ``flock`` on its file for as long as it lives; the kernel drops the lock when the
process dies, however it dies (SIGKILL, OOM, power cut aside). At the next start irqlab
(``irqlab.cli.main``) takes the lock of every file it finds; a file it can lock belongs to a
dead process, so its open entries are undone newest first and the file is deleted.

Entries (``op``): each kind of change registers its undo where the change is made
(``@undo_kind("netns")`` in irqlab.knobs.netns), so this module names no kind. Every entry
records that module (key ``undo``); a later irqlab that finds the entry of a dead process
imports it to get the undo (only ``irqlab.*`` modules; entries from before the key
existed use the table ``_UNDO_BEFORE_2026_11_26``). The kinds and where they live:
- ``write`` (irqlab.knobs.kvm): a file (sysfs/procfs knob) held ``old`` before irqlab
  wrote to it.
- ``killpg`` (irqlab.loads.base): a load's process group; killed only if its leader is
  still the same process (pid and start time match), so a reused pid is never hit.
- ``sched`` (irqlab.knobs.vcpu): a thread's scheduling policy, priority and CPU affinity
  before irqlab changed them; restored only if the thread is still the same one.
- ``trace_instance`` (irqlab.trace.tracefs): a private tracefs instance (``path``),
  journalled before ``mkdir``; undone by turning its tracing off and removing it.
- ``umount`` (irqlab.trace.tracefs): a file system irqlab mounted in a temporary
  directory (``path``), journalled before ``mount``; undone by unmounting it.
- ``netns`` (irqlab.knobs.netns): a network namespace (``name``) of ``--target net
  --net tap``, with the tap, bridge and addresses inside it; undone by killing what still
  runs in it and deleting it, which removes everything inside.
- ``flood_netns`` (irqlab.loads.netns_flood): one of the two network namespaces
  (``name``) of a ``netns-flood`` load, journalled before it is made; undone by killing
  what still runs in it and deleting it (the veth pair goes with it).
- ``scratch_dir`` (irqlab.runner.scratch): a run's scratch directory (``path``, initramfs
  or dom0 image under $TMPDIR), journalled before ``mkdir``; undone by removing it if it
  is still a real ``irqlab-*`` directory of this user.
- ``samples_file`` (irqlab.store.samples_file): a push's samples file (``path``, the lab
  store's ``url`` without its password), journalled before it is created; undone by
  removing it unless a committed run of that store names it.
A line ``{"done": ID}`` closes entry ID (the change was undone normally).
"""

from __future__ import annotations

import fcntl
import importlib
import json
import os
from pathlib import Path
from typing import Any, Callable


def journal_dir() -> Path:
    env = os.environ.get("IRQLAB_STATE_DIR")
    if env:
        return Path(env) / "journal"
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(base) / "irqlab" / "journal"


def proc_starttime(pid: int, tid: int | None = None) -> int | None:
    """Start time (clock ticks since boot) of a process or thread; None if it is gone."""
    path = f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat"
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    return int(text[text.rfind(")") + 2:].split()[19])


Undo = Callable[[dict[str, Any]], str]

# op -> how to undo it (one line for the user); filled by @undo_kind where each change is made.
_UNDO: dict[str, Undo] = {}

# Entries written before 2026-11-26 carry no ``undo`` key: where their kinds lived then.
# Frozen; a new kind is found through the key its entries carry.
_UNDO_BEFORE_2026_11_26 = {
    "write": "irqlab.knobs.kvm", "killpg": "irqlab.loads.base", "sched": "irqlab.knobs.vcpu",
    "trace_instance": "irqlab.trace.tracefs", "umount": "irqlab.trace.tracefs",
    "netns": "irqlab.knobs.netns",
}


def undo_kind(op: str) -> Callable[[Undo], Undo]:
    """Register ``func`` as the undo of entries ``op`` (a decorator, used at import)."""
    def register(func: Undo) -> Undo:
        _UNDO[op] = func
        return func
    return register


def _undo_of(entry: dict[str, Any]) -> Undo | None:
    op = entry.get("op")
    if not isinstance(op, str):
        return None
    if op not in _UNDO:
        module = entry.get("undo") or _UNDO_BEFORE_2026_11_26.get(op)
        # A journal file is ours (0600), but never import outside the package from it.
        if isinstance(module, str) and module.startswith("irqlab."):
            try:
                importlib.import_module(module)   # registers its kinds
            except ImportError:
                return None                       # left by another irqlab version
    return _UNDO.get(op)


class Journal:
    """This process's journal; the file appears with the first entry."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or journal_dir()
        self.path: Path | None = None
        self._fd = -1
        self._next = 1
        self._open: dict[int, dict[str, Any]] = {}

    def _ensure(self) -> None:
        if self._fd >= 0:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / f"{os.getpid()}-{proc_starttime(os.getpid())}.jsonl"
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def _write(self, obj: dict[str, Any]) -> None:
        os.write(self._fd, (json.dumps(obj) + "\n").encode())
        os.fsync(self._fd)  # the entry must be on disk before the change it protects

    def add(self, op: str, **data: Any) -> int:
        """Record how to undo a change about to be made (``op``: a kind registered with
        @undo_kind by the module making the change); returns the entry id."""
        if op not in _UNDO:
            # Journalling what nothing could undo would leave the change for good.
            raise ValueError(f"journal op {op!r} has no registered undo (@undo_kind)")
        self._ensure()
        entry_id = self._next
        self._next += 1
        entry = {"id": entry_id, "op": op, "undo": _UNDO[op].__module__, **data}
        self._write(entry)
        self._open[entry_id] = entry
        return entry_id

    def done(self, entry_id: int) -> None:
        """The change was undone normally; delete the file when nothing is left open."""
        if self._open.pop(entry_id, None) is None:
            return
        self._write({"done": entry_id})
        if not self._open:
            self.close()

    def close(self) -> None:
        if self._fd >= 0:
            if not self._open and self.path is not None:
                self.path.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = -1


# One journal per state directory for the whole process: its file is named after the
# process, and a second object for the same file would flock it again through another
# open file and wait for itself forever (flock locks belong to the open file).
_JOURNALS: dict[Path, Journal] = {}


def journal() -> Journal:
    """This process's journal in the current state directory (created on first use)."""
    directory = journal_dir()
    if directory not in _JOURNALS:
        _JOURNALS[directory] = Journal(directory)
    return _JOURNALS[directory]


def undo(entry: dict[str, Any]) -> str:
    """Undo one entry; returns what was done (for the user)."""
    func = _undo_of(entry)
    if func is None:
        return f"unknown journal entry {entry!r} skipped"
    return func(entry)


def replay_stale(directory: Path | None = None) -> list[str]:
    """Undo what dead irqlab processes left behind; returns one line per action."""
    directory = directory or journal_dir()
    if not directory.is_dir():
        return []
    out: list[str] = []
    # A listing, not Path.glob: glob compiles a pattern (a regular expression) on every
    # command's start, for a directory that is usually empty (issue 28).
    try:
        with os.scandir(directory) as listing:
            names = sorted(e.name for e in listing if e.name.endswith(".jsonl"))
    except FileNotFoundError:       # removed since is_dir(): nothing left behind
        return []
    for path in (directory / name for name in names):
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its owner is alive
            entries: dict[int, dict[str, Any]] = {}
            for line in path.read_text().splitlines():
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line torn by the crash: its change never happened
                if "done" in obj:
                    entries.pop(obj["done"], None)
                elif "id" in obj:
                    entries[obj["id"]] = obj
            for entry in sorted(entries.values(), key=lambda e: -e["id"]):
                try:
                    out.append(undo(entry))
                except (OSError, KeyError, TypeError, ValueError) as exc:
                    out.append(f"could not undo {entry}: {exc}")
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return out
