"""A load: processes started around a run to disturb it (a RunHook, see irqlab.measure).

Every load runs in its own session and process group, on the CPUs of its ``cpus=``
placement (affinity set before exec, inherited by every child). ``stop()`` measures the
group's CPU time from /proc (proof that it loaded the system), checks its exit status (a
load that died during the run is an error, recorded in the run), then stops the whole group
(SIGTERM, then SIGKILL) and sweeps it until no member is left: no orphan survives. The group
is journalled (irqlab.journal) so a crashed irqlab's loads are killed at the next start.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Any

from irqlab.cpus import format_cpu_list, online_cpus, parse_available_cpus
from irqlab.journal import journal, proc_starttime, undo_kind
from irqlab.knobs.values import parse_duration
from irqlab.runner.process import die_with_parent

_SETTLE_S = 0.15          # a load that dies this fast had bad arguments or a missing piece
_STOP_WAIT_S = 3.0
_CLK_TCK = os.sysconf("SC_CLK_TCK")


class LoadError(OSError):
    """A load could not start. An OSError so that the run is recorded as failed with this
    message (irqlab.measure treats OSError as a clean failure, other errors as bugs)."""


def group_members(pgid: int) -> list[int]:
    """Pids whose process group is pgid (zombies included: they are not reaped yet)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue
        if int(text[text.rfind(")") + 2:].split()[2]) == pgid:
            out.append(int(entry))
    return out


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU time of a process group, reaped children included."""
    ticks = 0
    for pid in group_members(pgid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()
        ticks += sum(int(x) for x in fields[11:15])   # utime stime cutime cstime
    return ticks / _CLK_TCK


def parse_params(text: str) -> dict[str, str]:
    """'cpus=0,1,workers=2' -> {'cpus': '0,1', 'workers': '2'}: a part without '=' continues
    the previous value, so CPU lists need no quoting."""
    params: dict[str, str] = {}
    last = None
    for part in (p.strip() for p in text.split(",")) if text else ():
        if "=" in part:
            key, _, val = part.partition("=")
            last = key.strip().replace("-", "_")
            params[last] = val.strip()
        elif last is not None and part:
            params[last] += "," + part
        elif part:
            raise ValueError(f"{part!r} is not KEY=VALUE")
    return params


class Load:
    """Base class: a subclass names its tool and builds its command line."""

    kind = ""
    tool = ""                   # executable that must exist
    package = ""                # Debian package providing it
    params: dict[str, str] = {}  # accepted parameters and their meaning (docs, errors)
    ok_exit_codes: tuple[int, ...] = (0, -signal.SIGTERM, 128 + signal.SIGTERM)
    requires: str | None = None  # a target capability (RunHook.requires); host loads: none

    def __init__(self, params: dict[str, str], index: int = 1) -> None:
        accepted = {"cpus": "CPU placement", "delay": "start DUR after the probe runs",
                    **self.params}
        for key in params:
            if key not in accepted:
                raise ValueError(f"load {self.kind} has no parameter {key!r}; parameters: "
                                 f"{', '.join(f'{k} ({v})' for k, v in accepted.items())}")
        self.raw = dict(params)
        self.index = index
        self.cpus = (parse_available_cpus(params["cpus"]) if "cpus" in params
                     else online_cpus())
        self.delay_ns = parse_duration(params["delay"]) if "delay" in params else None
        self.configure(params)
        self.proc: subprocess.Popen | None = None
        self.argv: list[str] = []
        self.details: dict[str, Any] = {}
        self.error: str | None = None
        self._entry: int | None = None
        self._stderr = None
        self._started_at = 0.0
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def name(self) -> str:
        return f"load:{self.kind}" + (f"#{self.index}" if self.index > 1 else "")

    # -- subclass interface -----------------------------------------------------------
    def configure(self, params: dict[str, str]) -> None:
        """Parse the intensity parameters; raise ValueError naming the fix."""

    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """Create what the command needs (scratch files); undone in cleanup()."""

    def cleanup(self) -> None:
        pass

    def starts_after_boot(self) -> bool:
        """Loads that must hit a *running* probe (a VM being created) start in after_start."""
        return self.delay_ns is not None

    def enter(self) -> None:
        """Runs in the load's leader before exec, after its CPU placement (e.g. joining
        the run's network namespace); raises OSError to fail the start."""

    # -- RunHook ----------------------------------------------------------------------
    def qemu_args(self) -> list[str]:
        return []

    def before_start(self) -> None:
        if not self.starts_after_boot():
            self._start()

    def after_start(self, ctx: Any) -> None:
        if not self.starts_after_boot():
            return
        if self.delay_ns:
            self._timer = threading.Timer(self.delay_ns / 1e9, self._start_quietly)
            self._timer.daemon = True
            self._timer.start()
        else:
            self._start()

    def _start_quietly(self) -> None:
        try:
            self._start()
        except OSError as exc:
            self.error = str(exc)

    def _start(self) -> None:
        with self._lock:
            if self._stopped:
                return
            if self.tool and shutil.which(self.tool) is None:
                raise LoadError(f"load {self.kind}: {self.tool} not found; install Debian's "
                                f"{self.package} (./setup.sh does)")
            self.prepare()
            self.argv = self.command()
            self._stderr = tempfile.TemporaryFile()
            cpus = set(self.cpus)

            def child() -> None:
                os.sched_setaffinity(0, cpus)
                self.enter()
                # The leader dies with irqlab; the journal covers the rest of the group.
                die_with_parent()

            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=self._stderr,
                                         start_new_session=True, preexec_fn=child)
            self._started_at = time.monotonic()
            # Written right after the spawn (the pid is unknown before): a crash in between
            # is covered by PDEATHSIG above.
            self._entry = journal().add("killpg", name=self.name, pid=self.proc.pid,
                                        pgid=self.proc.pid,
                                        starttime=proc_starttime(self.proc.pid))
        time.sleep(_SETTLE_S)
        code = self.proc.poll()
        if code is not None:
            self.error = f"exited at once with code {code}: {self._stderr_tail()}"
            raise LoadError(f"load {self.kind} ({' '.join(self.argv)}) {self.error}")

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read()[-400:].decode("utf-8", "replace").strip() or "(no stderr)"

    def cpu_seconds(self) -> float:
        return group_cpu_seconds(self.proc.pid) if self.proc else 0.0

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        if self.proc is None:
            self.cleanup()
            return
        pgid = self.proc.pid
        wall = time.monotonic() - self._started_at
        cpu = group_cpu_seconds(pgid)
        self.details.update({"cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
                             "cpu_util": round(cpu / wall, 3) if wall > 0 else None})
        code = self.proc.poll()
        early = code is not None
        if not early:
            self._signal(pgid, signal.SIGTERM)
            try:
                code = self.proc.wait(_STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self._signal(pgid, signal.SIGKILL)
                code = self.proc.wait()
        # Sweep: members that ignored SIGTERM or outlived the leader.
        deadline = time.monotonic() + _STOP_WAIT_S
        while group_members(pgid) and time.monotonic() < deadline:
            self._signal(pgid, signal.SIGKILL)
            time.sleep(0.02)
        left = group_members(pgid)
        self.details["exit_code"] = code
        if early:
            self.error = self.error or (f"exited with code {code} during the run: "
                                        f"{self._stderr_tail()}")
        elif code not in self.ok_exit_codes:
            self.error = f"exited with code {code} when stopped: {self._stderr_tail()}"
        if left:
            self.error = (self.error or "") + f" processes {left} survived SIGKILL"
        else:
            journal().done(self._entry)
        if self._stderr is not None:
            self._stderr.close()
        self.cleanup()

    @staticmethod
    def _signal(pgid: int, sig: int) -> None:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass

    def guest_metadata(self, where: str, started: bool) -> dict[str, Any]:
        """The metadata of a load that runs inside the measured guest (no host process):
        ``where`` it ran, ``started``: whether the run got as far as the guest."""
        out: dict[str, Any] = {"kind": self.kind, "params": self.raw, "where": where,
                               **self.details}
        out["status"] = "error" if self.error else ("ok" if started else
                                                    "not started (the run ended first)")
        if self.error:
            out["error"] = self.error
        return out

    def metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "params": self.raw,
                               "cpus": format_cpu_list(self.cpus), "argv": self.argv,
                               **self.details}
        if self.proc is None and self.error is None:
            out["status"] = "not started (the run ended before the probe ran)"
        else:
            out["status"] = "error" if self.error else "ok"
        if self.error:
            out["error"] = self.error
        return out


@undo_kind("killpg")
def undo_killpg(entry: dict[str, Any]) -> str:
    """The journal's undo of op ``killpg``: kill a load's process group, only if its
    leader is still the same process (pid and start time match)."""
    pid, pgid = int(entry["pid"]), int(entry["pgid"])
    if proc_starttime(pid) != entry.get("starttime"):
        return f"load {entry.get('name')} (pid {pid}) already gone"
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return f"load {entry.get('name')} (pid {pid}) already gone"
    return f"killed leftover load {entry.get('name')} (process group {pgid})"
