"""tracefs: find or mount it, and drive a private instance without touching the global one.

Every value written through :class:`Instance` is remembered with its old value and put
back by :meth:`Instance.close` (in reverse order); the instance directory is removed and a
tracefs we mounted ourselves is unmounted. Nothing is written to the global buffer.

The instance and every private mount are entered in the restore journal
(irqlab.journal) *before* they are made, so a process killed with SIGKILL leaves
nothing behind: the next irqlab start removes them and says so.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from irqlab.journal import journal, undo_kind

# The events of issue 8, in (system, name) form; ``irq_vectors:*`` is expanded at run time.
WANTED_EVENTS: tuple[tuple[str, str], ...] = (
    ("sched", "sched_switch"), ("sched", "sched_waking"), ("sched", "sched_wakeup"),
    ("irq", "irq_handler_entry"), ("irq", "irq_handler_exit"),
    ("irq", "softirq_entry"), ("irq", "softirq_exit"),
    ("timer", "hrtimer_start"), ("timer", "hrtimer_expire_entry"),
    ("timer", "hrtimer_expire_exit"), ("timer", "hrtimer_cancel"),
    ("kvm", "kvm_msr"), ("kvm", "kvm_apic_accept_irq"), ("kvm", "kvm_inj_virq"),
    ("kvm", "kvm_entry"), ("kvm", "kvm_exit"), ("kvm", "kvm_wait_lapic_expire"),
    ("kvm", "kvm_hv_timer_state"), ("kvm", "kvm_vcpu_wakeup"), ("kvm", "kvm_halt_poll_ns"),
    ("kvm", "kvm_userspace_exit"), ("kvm", "kvm_write_tsc_offset"),
    # Not in issue 8: the guest's EOIs, a tighter per-sample clock anchor
    # (irqlab/explain/clock.py; arch/x86/kvm/lapic.c, apic_set_eoi() -> trace_kvm_eoi()).
    ("kvm", "kvm_eoi"),
    # A stop signal's time: a thread stops only when it next runs (irqlab/explain/stops.py).
    ("signal", "signal_generate"),
)
# Events whose noise we cut with a pid filter (the VMM's threads): the scheduler's
# switch events and the irq/timer events must stay unfiltered to see who else ran.
PID_FILTERED = {"sched_waking": "pid", "sched_wakeup": "pid"}
KVM_SYSTEM = "kvm"


class TraceError(OSError):
    """Tracing cannot be set up; the message says why and what to do.

    An OSError so that measure.run() records the run as failed with this message
    (it treats OSError as an environment problem, anything else as a bug)."""


def find_mount(fstype: str) -> Path | None:
    """Where a file system of type ``fstype`` is mounted (/proc/mounts), or None."""
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        # Another irqlab's private mount (mount_private) is not ours to use: it goes away
        # with that run, and using it would keep that run from unmounting it.
        if (len(parts) >= 3 and parts[2] == fstype
                and not Path(parts[1]).name.startswith(_PRIVATE_PREFIX)):
            return Path(parts[1])
    return None


_PRIVATE_PREFIX = "irqlab-"


def find_tracefs() -> Path | None:
    """A mounted tracefs (its own mount or debugfs/tracing)."""
    return find_mount("tracefs")


def mount_private(fstype: str, read_only: bool = False) -> tuple[Path | None, str]:
    """Mount ``fstype`` in a new temporary directory: (its path, "") or (None, why not).
    Undo with :func:`unmount_private`; nothing is left behind on failure."""
    try:
        mnt = Path(tempfile.mkdtemp(prefix=f"{_PRIVATE_PREFIX}{fstype}-"))
    except OSError as exc:
        return None, f"no temporary directory ({exc})"
    try:
        entry = journal().add("umount", path=str(mnt), fstype=fstype, pid=os.getpid())
    except OSError as exc:
        mnt.rmdir()
        return None, f"cannot write the restore journal ({exc})"
    cmd = ["mount", "-t", fstype] + (["-o", "ro"] if read_only else []) + ["nodev", str(mnt)]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True)
        err = res.stderr.strip() if res.returncode != 0 else ""
    except OSError as exc:
        err = str(exc)
    if err:
        mnt.rmdir()
        journal().done(entry)
        return None, err
    _MOUNT_ENTRIES[str(mnt)] = entry
    return mnt, ""


# Journal entry of each private mount still mounted (path -> entry id).
_MOUNT_ENTRIES: dict[str, int] = {}


def unmount_private(mnt: Path) -> None:
    """Unmount and remove a directory made by :func:`mount_private`."""
    res = subprocess.run(["umount", str(mnt)], capture_output=True)
    try:
        mnt.rmdir()
    except OSError:
        pass
    entry = _MOUNT_ENTRIES.pop(str(mnt), None)
    if entry is not None and res.returncode == 0:
        journal().done(entry)


class Tracefs:
    """A tracefs mount point; mounts a private one when none is mounted."""

    def __init__(self) -> None:
        self.root = find_tracefs()
        self.mounted_by_us = False
        if self.root is None:
            mnt, err = mount_private("tracefs")
            if mnt is None:
                raise TraceError(f"tracefs is not mounted and mounting it failed "
                                 f"({err}): run as root, or mount it with "
                                 f"`mount -t tracefs nodev /sys/kernel/tracing`")
            self.root, self.mounted_by_us = mnt, True

    def close(self) -> None:
        if self.mounted_by_us and self.root is not None:
            unmount_private(self.root)
            self.mounted_by_us = False

    def read(self, rel: str) -> str:
        return (self.root / rel).read_text()


class Instance:
    """``instances/<name>`` of a tracefs: created here, settings restored, removed."""

    def __init__(self, fs: Tracefs, name: str) -> None:
        self.fs = fs
        self.name = name
        self.path = fs.root / "instances" / name
        self._undo: list[tuple[Path, str]] = []
        self._entry: int | None = None
        if self.path.exists():
            raise TraceError(f"trace instance {self.path} already exists (another irqlab "
                             f"run, or a crash left it): remove it with `rmdir {self.path}`")
        # Journalled before it exists: a SIGKILL between mkdir and close() must not leave
        # the kernel tracing into a buffer nobody reads.
        try:
            self._entry = journal().add("trace_instance", path=str(self.path),
                                        pid=os.getpid())
        except OSError as exc:
            raise TraceError(f"cannot write the restore journal ({exc}): set "
                             f"$IRQLAB_STATE_DIR to a writable directory") from exc
        try:
            self.path.mkdir()
        except OSError as exc:
            journal().done(self._entry)
            self._entry = None
            raise TraceError(f"cannot create trace instance {self.path}: {exc}") from exc

    def write(self, rel: str, value: str) -> None:
        """Write a setting, remembering the old value to restore it."""
        p = self.path / rel
        old = p.read_text()
        self._undo.append((p, _restore_value(rel, old)))
        with open(p, "w") as f:
            f.write(value)

    def try_write(self, rel: str, value: str) -> str | None:
        """Write a setting; None on success, else the kernel's reason."""
        try:
            self.write(rel, value)
            return None
        except OSError as exc:
            return exc.strerror or str(exc)

    def has_event(self, system: str, event: str) -> bool:
        return (self.path / "events" / system / event / "enable").exists()

    def events_of(self, system: str) -> list[str]:
        d = self.path / "events" / system
        if not d.is_dir():
            return []
        return sorted(p.name for p in d.iterdir() if (p / "enable").exists())

    def cpu_count(self) -> int:
        return len([p for p in (self.path / "per_cpu").iterdir() if p.name.startswith("cpu")])

    def read(self, rel: str) -> str:
        return (self.path / rel).read_text()

    def marker(self, text: str) -> None:
        """A text marker in this instance's buffer (timestamped in its trace clock)."""
        with open(self.path / "trace_marker", "w") as f:
            f.write(text)

    def close(self) -> list[str]:
        """Restore every setting (reverse order) and remove the instance; returns problems."""
        problems: list[str] = []
        for p, old in reversed(self._undo):
            try:
                with open(p, "w") as f:
                    f.write(old)
            except OSError as exc:
                problems.append(f"restore {p}: {exc.strerror}")
        self._undo.clear()
        if self.path.exists():
            try:
                os.rmdir(self.path)
            except OSError as exc:
                problems.append(f"rmdir {self.path}: {exc.strerror}")
        if self._entry is not None and not self.path.exists():
            journal().done(self._entry)
            self._entry = None
        return problems


def _restore_value(rel: str, old: str) -> str:
    """What to write back to get ``old`` again (tracefs shows some files decorated)."""
    name = rel.rsplit("/", 1)[-1]
    text = old.strip()
    if name == "trace_clock":                 # "[local] global x86-tsc" -> "local"
        for word in text.split():
            if word.startswith("["):
                return word.strip("[]")
    if name == "filter" and text == "none":
        return "0"                            # writing 0 clears a filter
    if name == "buffer_size_kb":              # "7 (expanded: 1408)" on a fresh buffer
        return text.split()[0]
    return text


@undo_kind("trace_instance")
def undo_trace_instance(entry: dict[str, Any]) -> str:
    """The journal's undo of op ``trace_instance``: tracing off, the instance removed (its
    buffers go with it)."""
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


@undo_kind("umount")
def undo_umount(entry: dict[str, Any]) -> str:
    """The journal's undo of op ``umount``: unmount (lazily when busy), remove the
    directory."""
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
