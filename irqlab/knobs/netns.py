"""The tap network of ``--target net --net tap``: a network namespace irqlab creates for
one run, with a bridge, a tap for QEMU and the addresses of both ends inside it.

Nothing of it touches the host's own network: QEMU and the sender run inside the
namespace (they join it before exec), the addresses exist only there, and removing the
namespace removes the tap, the bridge and the addresses with it. The namespace is
journalled (irqlab.journal, op ``netns``) *before* it is created, so after a
``kill -9`` the next irqlab command kills what is left inside it and deletes it, saying
so in one line. Its name is unique per process and run (``irqlab-<pid>-<n>``).
"""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from irqlab.journal import journal, undo_kind
from irqlab.runner.net import (RESPONDER_PORT, GuestNetwork, NetdevSetting, NETDEV_ID,
                               virtio_net_device)

NETNS_DIR = Path("/run/netns")      # where `ip netns add` binds a namespace
BRIDGE, TAP = "irqbr0", "irqtap0"   # names inside the namespace: it is ours alone
HOST_ADDR, GUEST_ADDR, PREFIX = "10.77.0.1", "10.77.0.2", 24
_CLONE_NEWNET = 0x40000000
_counter = itertools.count(1)


def _ip(*args: str) -> None:
    """Run iproute2's ``ip``; OSError with its message when it fails."""
    try:
        res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        raise FileNotFoundError("`ip` not found: install Debian's iproute2") from None
    if res.returncode != 0:
        raise OSError(f"ip {' '.join(args)}: {res.stderr.strip() or res.returncode}")


def tap_counters(name: str) -> dict[str, int] | None:
    """Packets and bytes the tap carried to and from the guest (its tx and rx), or None
    when they cannot be read."""
    try:
        res = subprocess.run(["ip", "-n", name, "-s", "-j", "link", "show", "dev", TAP],
                             capture_output=True, text=True, timeout=10)
        stats = json.loads(res.stdout)[0]["stats64"]
    except (OSError, ValueError, LookupError, subprocess.SubprocessError):
        return None
    return {"to_guest_packets": stats["tx"]["packets"], "to_guest_bytes": stats["tx"]["bytes"],
            "from_guest_packets": stats["rx"]["packets"],
            "from_guest_bytes": stats["rx"]["bytes"],
            "dropped": stats["tx"]["dropped"] + stats["rx"]["dropped"]}


def _netns_processes(path: Path) -> list[int]:
    """Pids of the processes in the network namespace bound at ``path``."""
    try:
        want = os.stat(path)
    except OSError:
        return []
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            st = os.stat(f"/proc/{pid}/ns/net")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino):
            out.append(int(pid))
    return out


def remove_netns(name: str, wait_s: float = 3.0) -> list[int]:
    """Kill what still runs in namespace ``name`` (only irqlab's children can be there)
    and delete it; its tap, bridge and addresses go with it. Returns the pids killed."""
    path = NETNS_DIR / name
    killed = _netns_processes(path)
    for pid in killed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    end = time.monotonic() + wait_s
    while _netns_processes(path) and time.monotonic() < end:
        time.sleep(0.02)
    _ip("netns", "delete", name)
    return killed


@undo_kind("netns")
def undo_netns(entry: dict[str, Any]) -> str:
    """The journal's undo of op ``netns`` (one line for the user)."""
    name = str(entry["name"])
    if not (NETNS_DIR / name).exists():
        return f"network namespace {name} already gone"
    killed = remove_netns(name)
    what = f"; killed {len(killed)} process(es) still in it" if killed else ""
    return (f"removed network namespace {name} (its tap {TAP}, bridge {BRIDGE} and "
            f"addresses) left by irqlab pid {entry.get('pid')}{what}")


@dataclass
class NetnsNetwork(GuestNetwork):
    """A tap and a bridge in a namespace of the run's own (see the module docstring)."""

    mode = "tap"
    settings: list[NetdevSetting] = field(default_factory=list)
    name: str = ""
    _fd: int = -1
    _entry: int | None = None
    _netdev_extra: dict[str, str] = field(default_factory=dict)
    _device_extra: dict[str, str] = field(default_factory=dict)
    _error: str | None = None
    _counters: dict[str, int] | None = None

    def setup(self) -> None:
        """Journal, then create: namespace, bridge with the host address, tap on it."""
        for s in self.settings:
            self._netdev_extra.update(s.netdev_options())
            self._device_extra.update(s.device_options())
        # QEMU opens a persistent tap with the flags it was made with: several queues
        # need a multi_queue tap, one queue a plain one.
        multi = ["multi_queue"] if int(self._netdev_extra.get("queues", "1")) > 1 else []
        self.name = f"irqlab-{os.getpid()}-{next(_counter)}"
        self._entry = journal().add("netns", name=self.name, pid=os.getpid())
        _ip("netns", "add", self.name)
        ns = ("-n", self.name)
        _ip(*ns, "link", "set", "lo", "up")
        _ip(*ns, "link", "add", BRIDGE, "type", "bridge")
        _ip(*ns, "tuntap", "add", "dev", TAP, "mode", "tap", *multi)
        _ip(*ns, "link", "set", TAP, "master", BRIDGE)
        _ip(*ns, "addr", "add", f"{HOST_ADDR}/{PREFIX}", "dev", BRIDGE)
        _ip(*ns, "link", "set", BRIDGE, "up")
        _ip(*ns, "link", "set", TAP, "up")
        self._fd = os.open(NETNS_DIR / self.name, os.O_RDONLY | os.O_CLOEXEC)

    def enter(self) -> Callable[[], None]:
        """Join the namespace (in a child, before exec)."""
        fd = self._fd

        def join() -> None:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(fd, _CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns into the run's network namespace: "
                                   f"{os.strerror(err)}")
        return join

    def guest_cidr(self) -> str:
        return f"{GUEST_ADDR}/{PREFIX}"

    def sender_dest(self) -> tuple[str, int]:
        return GUEST_ADDR, RESPONDER_PORT

    def qemu_netdev(self) -> list[str]:
        extra = "".join(f",{k}={v}" for k, v in self._netdev_extra.items())
        return ["-netdev", f"tap,id={NETDEV_ID},ifname={TAP},script=no,downscript=no"
                           f"{extra}",
                "-device", virtio_net_device(self._device_extra)]

    def teardown(self) -> None:
        """Delete the namespace's name (QEMU and the sender are stopped). A load still
        in it (net-flood) is stopped by its own hook right after, which the run flow
        does after the process; the kernel frees the namespace, and its tap, bridge and
        addresses, when the last process leaves. Killing here would fail that load's
        run. An entry that could not be undone stays in the journal for the next start;
        a load is journalled on its own (killpg)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._entry is None:
            return
        try:
            if (NETNS_DIR / self.name).exists():
                self._counters = tap_counters(self.name)
                _ip("netns", "delete", self.name)
        except OSError as exc:
            self._error = f"could not remove network namespace {self.name}: {exc}"
            return
        journal().done(self._entry)
        self._entry = None

    def metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mode": self.mode, "namespace": self.name, "bridge": BRIDGE, "tap": TAP,
            "sender_addr": f"{HOST_ADDR}/{PREFIX}", "guest_addr": self.guest_cidr(),
            "netdev_options": dict(self._netdev_extra),
            "device_options": dict(self._device_extra)}
        if self._counters is not None:
            out["tap_counters"] = self._counters
        if self._error:
            out["error"] = self._error
        return out
