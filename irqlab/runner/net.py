"""Network round trips to a Linux guest (``--target net``): QEMU running Debian's kernel
with irqlab's UDP responder on virtio-net, and the host sender beside it.

Two children make one MeasuredProcess: the guest (QEMU; its vCPU threads are what knobs
pin) and ``irqlab-netsend``, which sends one packet per period and writes each round
trip into a v1 ring behind a one-ring directory in a memfd irqlab reads, exactly as the
native probe writes its rings (docs/formats.md sections 6 and 10). The guest writes no
samples; its console says only how the network came up.

How the packets travel is a :class:`GuestNetwork`: QEMU's user network with a forward
on 127.0.0.1 (:class:`UserNetwork`, no host state), or a tap and bridge inside a network
namespace irqlab creates for the run (irqlab.knobs.netns, which journals it). A network
may run the children inside its namespace (``enter``), and is torn down after both
children are stopped.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from irqlab.runner.accel import AccelPlan
from irqlab.runner.linux_arch import LinuxGuestArch, linux_arch
from irqlab.runner.linux_guest import INIT, PROBE, build_initramfs, check_built
from irqlab.runner.machines import Machine, machine_for
from irqlab.runner.native import NATIVE_BUILD, no_layout
from irqlab.runner.process import ChildProcess, MeasuredProcess
from irqlab.runner.qemu import base_argv

NETSEND = NATIVE_BUILD / "irqlab-netsend"
ECHO = NATIVE_BUILD / "irqlab-echo"          # this host's build (the guest's: by arch)
DISKIO = NATIVE_BUILD / "irqlab-diskio"
DISK_ID = "irqlab-disk"
IOTHREAD_ID = "irqlab-io"
# Where the guest disk's (unlinked) file lives: disk-backed by the FHS, so O_DIRECT
# works (tmpfs refuses it, and every aio mode here runs with cache.direct=on).
DISK_DIR = Path("/var/tmp")
RESPONDER_PORT = 7010            # probes/native/netproto.h NET_PORT
REPLY_TIMEOUT_NS = 1_000_000_000  # a reply later than this is a lost packet
RING_CAPACITY = 65536            # records: 65 s at 1 ms, ample for 20 ms polls
NETDEV_ID = "irqlab-net"
# Exit codes of irqlab-netsend (probes/native/netsend.c).
SENDER_DONE, SENDER_ERRORS = 0, (1, 2, 3)


class GuestNetwork(ABC):
    """How the sender reaches the guest's responder (see the module docstring)."""

    mode: str

    @abstractmethod
    def setup(self) -> None:
        """Create what the network needs on the host; OSError with the reason."""

    @abstractmethod
    def guest_cidr(self) -> str:
        """The guest NIC's address and prefix, e.g. "10.0.2.15/24"."""

    @abstractmethod
    def sender_dest(self) -> tuple[str, int]:
        """(address, UDP port) the sender sends to."""

    @abstractmethod
    def qemu_netdev(self) -> list[str]:
        """QEMU's -netdev and the virtio-net device on it."""

    def enter(self) -> Callable[[], None] | None:
        """What a child runs before exec to be on this network (None: nothing)."""
        return None

    def teardown(self) -> None:
        """Undo :meth:`setup` (both children are stopped); must not raise."""

    def metadata(self) -> dict[str, Any]:
        """What the run records about the network."""
        return {"mode": self.mode}


class NetdevSetting(ABC):
    """A setting of the guest's QEMU network back end (e.g. vhost) that a run hook
    carries (a knob); the network that builds the -netdev asks it, so the hook records
    whether it was applied or why not."""

    @abstractmethod
    def netdev_options(self) -> dict[str, str]:
        """``-netdev tap`` options to add ({"vhost": "on"}), {} when not applicable here
        (the setting then records why)."""

    @abstractmethod
    def not_applicable_to(self, what: str) -> None:
        """This run's network has no such back end (``what`` names it, "--net user")."""

    def device_options(self) -> dict[str, str]:
        """virtio-net-pci options the setting needs beside its -netdev ones (asked
        after :meth:`netdev_options`); most need none."""
        return {}


@dataclass
class GuestDisk:
    """The net guest's virtio-blk disk (seed 003's block I/O path): a sparse raw file
    created, opened and unlinked by irqlab and handed to QEMU by fd, so nothing is left
    on disk however either process ends. Every aio mode runs with ``cache.direct=on``
    (``aio=native`` needs it; the same for all so only the engine differs, and the host's
    page cache does not absorb the guest's I/O). ``load_args``: irqlab-diskio's options
    when a load makes the guest use it (None: the disk is there, idle)."""

    size_mib: int = 256
    aio: str | None = None           # threads | native | io_uring; None: QEMU's default
    iothread: bool = False
    load_args: list[str] | None = None

    def qemu_args(self, fd: int) -> list[str]:
        drive = (f"file=/proc/self/fd/{fd},if=none,id={DISK_ID},format=raw,"
                 f"cache.direct=on")
        if self.aio:
            drive += f",aio={self.aio}"
        device = f"virtio-blk-pci,drive={DISK_ID}"
        out = ["-drive", drive]
        if self.iothread:
            out += ["-object", f"iothread,id={IOTHREAD_ID}"]
            device += f",iothread={IOTHREAD_ID}"
        return out + ["-device", device]

    def metadata(self) -> dict[str, Any]:
        return {"size_mib": self.size_mib, "aio": self.aio or "QEMU default (threads)",
                "iothread": self.iothread, "cache_direct": True,
                "guest_load": self.load_args}


class DiskSetting(ABC):
    """A setting of the guest disk's QEMU back end (aio mode, iothread) that a knob
    carries; the net target applies it to the run's :class:`GuestDisk`."""

    @abstractmethod
    def apply_to_disk(self, disk: GuestDisk) -> None:
        """Set this on ``disk`` (and record it as applied)."""


class InGuestDiskLoad(ABC):
    """A load the net guest runs on its own disk (irqlab.loads.guest_disk)."""

    @abstractmethod
    def diskio_args(self) -> list[str]:
        """irqlab-diskio's options (probes/native/diskio.c)."""


def qemu_io_bytes(pid: int) -> dict[str, int] | None:
    """Bytes a process read from and wrote to storage (/proc/PID/io), or None."""
    try:
        with open(f"/proc/{pid}/io") as f:
            fields = dict(line.split(": ", 1) for line in f.read().splitlines())
        return {"read_bytes": int(fields["read_bytes"]),
                "write_bytes": int(fields["write_bytes"])}
    except (OSError, KeyError, ValueError):
        return None


def free_udp_port(host: str = "127.0.0.1") -> int:
    """A UDP port nothing listens on now (QEMU binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class UserNetwork(GuestNetwork):
    """QEMU's user network (slirp) with a UDP forward from 127.0.0.1: the only host
    address the sender touches is loopback. The guest can address nothing but the
    forward's peer: its NIC has 10.0.2.15/24 and no default route (irqlab-init runs no
    DHCP), and slirp's IPv6 is off (its router advertisements would give one).
    ``restrict=on`` would be the stronger fence, but libslirp then drops the guest's
    replies to the forward as well (tried: no echo ever came back)."""

    mode = "user"
    guest_addr: str = "10.0.2.15"     # slirp's first address, where hostfwd points
    host_port: int = 0

    def setup(self) -> None:
        self.host_port = free_udp_port()

    def guest_cidr(self) -> str:
        return f"{self.guest_addr}/24"

    def sender_dest(self) -> tuple[str, int]:
        return "127.0.0.1", self.host_port

    def qemu_netdev(self) -> list[str]:
        return ["-netdev", f"user,id={NETDEV_ID},net=10.0.2.0/24,ipv6=off,"
                           f"hostfwd=udp:127.0.0.1:{self.host_port}-{self.guest_addr}:"
                           f"{RESPONDER_PORT}",
                "-device", virtio_net_device()]

    def metadata(self) -> dict[str, Any]:
        return {"mode": self.mode, "sender_dest": f"127.0.0.1:{self.host_port}",
                "guest_addr": self.guest_cidr()}


def sender_argv(dest: str, port: int, mem_fd: int, *, period_ns: int, payload_bytes: int,
                packets: int, max_duration_ns: int, priority: int, rt_fallback: bool,
                inject_delay_ns: int = 0, inject_every: int = 0,
                timeout_ns: int = REPLY_TIMEOUT_NS, icmp: bool = False) -> list[str]:
    """irqlab-netsend's command line (probes/native/netsend.c). It is bounded in count
    and in time whatever irqlab does: a run by samples sends exactly ``packets``;
    ``max_duration_ns`` is a backstop behind the run's own end."""
    argv = [str(NETSEND), "--shm-fd", str(mem_fd), "--dest", dest, "--port", str(port),
            "--period-ns", str(period_ns), "--payload", str(payload_bytes),
            "--priority", str(priority), "--timeout-ns", str(timeout_ns),
            "--capacity", str(RING_CAPACITY), "--duration-ns", str(max_duration_ns)]
    if packets:
        argv += ["--count", str(packets)]
    if inject_every and inject_delay_ns:
        argv += ["--inject-delay-ns", str(inject_delay_ns), "--inject-every", str(inject_every)]
    if rt_fallback:
        argv.append("--rt-fallback")
    if icmp:
        argv.append("--icmp")         # ICMP echo, answered by the guest kernel
    return argv


def virtio_net_device(options: dict[str, str] | None = None) -> str:
    """The guest's NIC; no option ROM (qboot loads none, and it saves reading one)."""
    extra = "".join(f",{k}={v}" for k, v in (options or {}).items())
    return f"virtio-net-pci,netdev={NETDEV_ID},romfile={extra}"


def net_modules_dir(kernel: Path, arch: str = "x86_64") -> Path:
    """The virtio-net modules of ``kernel`` (scripts/fetch-linux-net.sh puts them
    beside the cached kernel of ``arch``; the architecture's ``modules_env``,
    $IRQLAB_LINUX_NET_MODULES for x86_64, overrides)."""
    guest = linux_arch(arch)
    env = os.environ.get(guest.modules_env)
    if env:
        return Path(env)
    version = Path(os.path.realpath(kernel)).name.removeprefix("vmlinuz-")
    return guest.kernel_cache_dir() / f"net-modules-{version}"


def initramfs_extra(modules: Path, guest: LinuxGuestArch | None = None
                    ) -> list[tuple[str, int, bytes]]:
    """The responder and the modules (in their load order) for build_initramfs; the
    responder built for ``guest``'s architecture (default x86_64)."""
    guest = guest or linux_arch("x86_64")
    order = (modules / "load-order").read_text().split()
    out = [("irqlab-echo", stat.S_IFREG | 0o755, guest.program("irqlab-echo").read_bytes()),
           ("irqlab-diskio", stat.S_IFREG | 0o755,
            guest.program("irqlab-diskio").read_bytes()),
           ("lib", stat.S_IFDIR | 0o755, b""),
           ("lib/modules", stat.S_IFDIR | 0o755, b""),
           ("lib/modules/load-order", stat.S_IFREG | 0o644, "\n".join(order).encode())]
    out += [(f"lib/modules/{name}", stat.S_IFREG | 0o644, (modules / name).read_bytes())
            for name in order]
    return out


@dataclass
class NetGuest(MeasuredProcess):
    """The guest with the responder (QEMU) and the host sender, as one target process.

    ``_child`` (the base class's) is the sender: its exit ends the run; ``proc`` is QEMU,
    whose threads the vCPU knobs look for."""

    program = "irqlab-netsend"

    period_ns: int
    plan: AccelPlan
    network: GuestNetwork
    payload_bytes: int = 64
    packets: int = 0                 # 0: until stopped (the run's wall clock)
    max_duration_ns: int = 0         # the sender's own bound in time
    priority: int = 90
    rt_fallback: bool = False
    inject_delay_ns: int = 0
    inject_every: int = 0
    echo: str = "user"               # "kernel": the guest kernel's ICMP echo answers
    memory_mib: int = 256
    kernel: Path | None = None
    disk: GuestDisk | None = None
    extra_qemu_args: list[str] = field(default_factory=list)
    name: str = "irqlab"
    # Bytes the directory + ring take, (rings, capacity) -> bytes: the format belongs
    # to the samples layer, which the runner does not import.
    layout_bytes: Callable[[int, int], int] = no_layout
    sender_argv: list[str] = field(default_factory=list, init=False)
    _qemu: ChildProcess | None = field(default=None, init=False, repr=False)
    _ended: str = field(default="", init=False)
    _network_up: bool = field(default=False, init=False)
    _disk_fd: int = field(default=-1, init=False)
    disk_io: dict[str, int] | None = field(default=None, init=False)
    arch: str = "x86_64"

    @property
    def machine(self) -> Machine:
        return machine_for(self.arch)

    @property
    def guest(self) -> LinuxGuestArch:
        return linux_arch(self.arch)

    @property
    def proc(self):
        """QEMU (the vCPU knobs and the trace capture look at its threads)."""
        return self._qemu.proc if self._qemu else None

    def peer_pids(self) -> list[int]:
        """The sender: its threads send and receive every packet."""
        return [self._child.proc.pid] if self._child is not None else []

    def guest_cmdline(self) -> str:
        """The kernel's command line: irqlab-init's echo mode (probes/native/init.c)."""
        echo = ["--port", str(RESPONDER_PORT), "--priority", str(self.priority)]
        if self.echo == "kernel":
            echo += ["--mode", "kernel"]
        if self.inject_every and self.inject_delay_ns:
            echo += ["--inject-delay-ns", str(self.inject_delay_ns),
                     "--inject-every", str(self.inject_every)]
        disk = ""
        if self.disk is not None and self.disk.load_args:
            disk = f" irqlab.disk={';'.join(['--dev', '/dev/vda', *self.disk.load_args])}"
        return (f"{self.guest.cmdline()} "
                f"irqlab.net={self.network.guest_cidr()} irqlab.echo={';'.join(echo)}"
                + disk)

    def build_argv(self, kernel: Path, initrd: Path) -> list[str]:
        return (base_argv(self.machine.qemu, self.name, self.memory_mib, smp=1)
                + self.machine.argv(self.plan, False)
                + self.network.qemu_netdev()
                + (self.disk.qemu_args(self._disk_fd) if self.disk is not None else [])
                + self.extra_qemu_args
                + ["-kernel", str(kernel), "-initrd", str(initrd),
                   "-append", self.guest_cmdline()])

    def build_sender_argv(self) -> list[str]:
        dest, port = self.network.sender_dest()
        return sender_argv(dest, port, self.mem_fd, period_ns=self.period_ns,
                           payload_bytes=self.payload_bytes, packets=self.packets,
                           max_duration_ns=self.max_duration_ns, priority=self.priority,
                           rt_fallback=self.rt_fallback,
                           inject_delay_ns=self.inject_delay_ns,
                           inject_every=self.inject_every, icmp=self.echo == "kernel")

    def _check(self) -> tuple[Path, Path]:
        """The kernel and its virtio-net modules; FileNotFoundError naming the fix."""
        guest = self.guest
        kernel = self.kernel or guest.find_kernel()
        if kernel is None or not kernel.exists():
            raise FileNotFoundError(guest.missing_kernel())
        modules = net_modules_dir(kernel, self.arch)
        if not (modules / "load-order").exists():
            raise FileNotFoundError(
                f"no virtio-net modules for {kernel.name} in {modules}: run "
                f"scripts/fetch-linux-net.sh {guest.deb_arch} (./setup.sh --install-only "
                f"runs it)")
        if not NETSEND.exists():
            raise FileNotFoundError(f"{NETSEND} is not built: run `make -C probes/native`")
        check_built(guest, ("irqlab-echo", "irqlab-diskio", INIT, PROBE))
        if shutil.which(self.machine.qemu) is None:
            raise FileNotFoundError(f"{self.machine.qemu} not found: "
                                    f"{self.machine.install_hint}")
        return kernel, modules

    def start(self) -> None:
        """Network, initramfs, QEMU, then the sender; OSError (with the fix) on failure.
        Whatever was made is undone by stop(), which the run flow always calls."""
        kernel, modules = self._check()
        guest = self.guest
        initrd = build_initramfs(self._workdir("irqlab-net-") / "initramfs.cpio",
                                 init=guest.program(INIT), probe=guest.program(PROBE),
                                 extra=initramfs_extra(modules, guest))
        self._create_memfd("irqlab-net-ring", self.layout_bytes(1, RING_CAPACITY))
        if self.disk is not None:
            self._create_disk(self.disk.size_mib << 20)
        self._network_up = True
        self.network.setup()
        enter = self.network.enter()
        self.argv = self.build_argv(kernel, initrd)
        disk_fds = (self._disk_fd,) if self._disk_fd >= 0 else ()
        self._qemu = ChildProcess(self.argv, disk_fds, enter=enter)
        self.sender_argv = self.build_sender_argv()
        self._child = ChildProcess(self.sender_argv, (self.mem_fd,), enter=enter)

    def _create_disk(self, size: int) -> None:
        """A sparse file, unlinked at once: only our fd (and QEMU's) keep it."""
        fd, path = tempfile.mkstemp(prefix="irqlab-disk-", suffix=".raw", dir=DISK_DIR)
        os.unlink(path)
        os.ftruncate(fd, size)
        self._disk_fd = fd

    def request_stop(self) -> None:
        """Ask the sender to stop sending; it still resolves the packets in flight
        (reply or timeout), so every packet it sent is a sample or lost."""
        if self._child is not None and self._child.poll() is None:
            self._child.proc.send_signal(signal.SIGTERM)

    def exit_code(self) -> int | None:
        """The sender's exit code, or QEMU's when the guest went first (a failure)."""
        code = self._child.poll() if self._child else None
        if code is not None:
            self._ended = "sender"
            return code
        code = self._qemu.poll() if self._qemu else None
        if code is not None:
            self._ended = "QEMU"
        return code

    def exit_description(self, code: int) -> str:
        who = "QEMU (the guest)" if self._ended == "QEMU" else self.program
        return f"{who} exited with code {code}"

    def exited_done(self, code: int) -> bool:
        return self._ended == "sender" and code == SENDER_DONE

    def exited_error(self, code: int) -> bool:
        if self._ended == "QEMU":
            return code in self.machine.error_exit_codes
        return code in SENDER_ERRORS

    def stop(self, timeout_s: float = 5.0) -> int | None:
        """The sender, then QEMU, then the network; the sender's exit code."""
        code = super().stop(timeout_s)   # the sender, the memfd, the scratch directory
        if self._qemu is not None:
            if self.disk is not None and self._qemu.poll() is None:
                self.disk_io = qemu_io_bytes(self._qemu.proc.pid)
            self._qemu.stop(timeout_s)
        if self._disk_fd >= 0:
            os.close(self._disk_fd)
            self._disk_fd = -1
        if self._network_up:
            self._network_up = False
            self.network.teardown()
        return code

    def serial(self) -> str:
        return self._qemu.stdout.text() if self._qemu else ""

    def serial_read(self, pos: int) -> tuple[bytes, int, int]:
        if not self._qemu:
            return b"", pos, 0
        exited = self._qemu.poll() is not None
        return self._qemu.stdout.read_from(pos, wait_eof_s=1.0 if exited else 0.0)

    def stderr(self) -> str:
        """Both children's standard error, each named."""
        parts = []
        if self._qemu is not None and (text := self._qemu.stderr.text().strip()):
            parts.append(f"QEMU: {text}")
        if self._child is not None and (text := self._child.stderr.text().strip()):
            parts.append(f"irqlab-netsend: {text}")
        return "\n".join(parts)

    def qemu_exit_code(self) -> int | None:
        return self._qemu.poll() if self._qemu else None
