"""Restore journal: how to undo every host change irqlab makes, written *before* the change.

One JSON-lines file per irqlab process under ``$IRQLAB_STATE_DIR`` (default
``$XDG_STATE_HOME/irqlab/journal``, i.e. ~/.local/state/irqlab/journal). The owner holds an
exclusive ``flock`` on its file for as long as it lives; the kernel drops the lock when the
process dies, however it dies (SIGKILL, OOM, power cut aside). At the next start irqlab
(``irqlab.cli.main``) takes the lock of every file it finds; a file it can lock belongs to a
dead process, so its open entries are undone newest first and the file is deleted.

Entries (``op``):
- ``write``: a file (sysfs/procfs knob) held ``old`` before irqlab wrote to it.
- ``killpg``: a load's process group; killed only if its leader is still the same process
  (pid and start time match), so a reused pid is never hit.
- ``sched``: a thread's scheduling policy, priority and CPU affinity before irqlab changed
  them; restored only if the thread is still the same one.
- ``trace_instance``: a private tracefs instance (``path``), journalled before ``mkdir``;
  undone by turning its tracing off and removing it (its buffers go with it).
- ``umount``: a file system irqlab mounted in a temporary directory (``path``), journalled
  before ``mount``; undone by unmounting it and removing the directory.
- ``netns``: a network namespace (``name``) of ``--target net --net tap``, with the tap,
  bridge and addresses inside it; undone by killing what still runs in it and deleting
  it (irqlab.knobs.netns), which removes everything inside.
A line ``{"done": ID}`` closes entry ID (the change was undone normally).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any


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
        """Record how to undo a change about to be made; returns the entry id."""
        self._ensure()
        entry_id = self._next
        self._next += 1
        entry = {"id": entry_id, "op": op, **data}
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
    op = entry.get("op")
    if op == "write":
        with open(entry["path"], "w") as f:
            f.write(str(entry["old"]))
        return f"restored {entry['path']} to {entry['old']!r}"
    if op == "killpg":
        pid, pgid = int(entry["pid"]), int(entry["pgid"])
        if proc_starttime(pid) != entry.get("starttime"):
            return f"load {entry.get('name')} (pid {pid}) already gone"
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return f"load {entry.get('name')} (pid {pid}) already gone"
        return f"killed leftover load {entry.get('name')} (process group {pgid})"
    if op == "sched":
        pid, tid = int(entry["pid"]), int(entry["tid"])
        if proc_starttime(pid, tid) != entry.get("starttime"):
            return f"thread {tid} already gone"
        os.sched_setscheduler(tid, entry["policy"], os.sched_param(entry["priority"]))
        os.sched_setaffinity(tid, entry["affinity"])
        return f"restored scheduling of thread {tid}"
    if op == "trace_instance":
        path = Path(entry["path"])
        if not path.is_dir():
            return f"trace instance {path} already gone"
        try:
            (path / "tracing_on").write_text("0")
        except OSError:
            pass                # rmdir below says whether the instance can go
        os.rmdir(path)
        return (f"removed trace instance {path} left by irqlab pid {entry.get('pid')} "
                f"(its tracing was still on)")
    if op == "umount":
        path = Path(entry["path"])
        if not os.path.ismount(path):
            if path.is_dir():
                with contextlib.suppress(OSError):
                    path.rmdir()
            return f"{entry.get('fstype', 'mount')} at {path} already unmounted"
        res = subprocess.run(["umount", str(path)], capture_output=True, text=True)
        if res.returncode != 0:
            # Busy (a process still holds a file in it): detach it now, the kernel frees
            # it when the last user goes.
            res = subprocess.run(["umount", "-l", str(path)], capture_output=True, text=True)
        if res.returncode != 0:
            raise OSError(f"umount {path}: {res.stderr.strip()}")
        with contextlib.suppress(OSError):
            path.rmdir()
        return f"unmounted {entry.get('fstype', 'a file system')} at {path}"
    if op == "netns":
        from irqlab.knobs.netns import undo_netns     # iproute2 calls live there
        return undo_netns(entry)
    return f"unknown journal entry {entry!r} skipped"


def replay_stale(directory: Path | None = None) -> list[str]:
    """Undo what dead irqlab processes left behind; returns one line per action."""
    directory = directory or journal_dir()
    if not directory.is_dir():
        return []
    out: list[str] = []
    for path in sorted(directory.glob("*.jsonl")):
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
