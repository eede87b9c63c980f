"""``--target net``: the round trip of a UDP packet from the host to a Linux guest and
back (an external event reaching a guest, seeds 003 and 004; docs/design.md, "Network
round trips").

The guest is the ``linux-guest`` kernel with irqlab's initramfs in echo mode: a
SCHED_FIFO responder (irqlab-echo) on virtio-net, or with ``--echo kernel`` the guest
kernel's own ICMP echo (no user space in the reply path; tap mode only). The host sender (irqlab-netsend,
SCHED_FIFO, absolute schedule) sends a packet per period and writes each round trip as a
sample into the native probe's ring format, so windows, summary, store and the read
commands are those of every run. ``--net user``: QEMU's user network with a forward on
127.0.0.1; ``--net tap``: a tap and bridge in a network namespace irqlab creates for the
run (irqlab.knobs.netns). The self-check ``--inject-delay D --inject-every N`` makes the
responder hold every Nth reply for D: exactly those samples carry the delay.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from irqlab.argtypes import count, duration
from irqlab.durations import format_ns
from irqlab.doctor import SETUP, Check
from irqlab.knobs.netns import NetnsNetwork
from irqlab.runner.accel import AccelPlan
from irqlab.runner.hostinfo import qemu_version
from irqlab.runner.machines import machine_for
from irqlab.runner.net import (REPLY_TIMEOUT_NS, DiskSetting, GuestDisk, GuestNetwork,
                               InGuestDiskLoad, NetdevSetting, NetGuest, UserNetwork)
from irqlab.runner.process import MeasuredProcess
from irqlab.samples.multiring import layout_bytes
from irqlab.samples.net import NetSource
from irqlab.samples.source import SampleSource
from irqlab.targets import options as o
from irqlab.targets.base import Option, Target, TargetOptions, TargetUsageError

NET_MODES = ("user", "tap")
# A packet queued to a device (bridge, tap, lo) and received by one (include/trace/
# events/net.h): where the round trip crosses the host's stack.
NET_TRACE_EVENTS = (("net", "net_dev_queue"), ("net", "netif_receive_skb"),
                    ("net", "netif_rx"))
PAYLOAD_MIN, PAYLOAD_MAX = 32, 1472       # probes/native/netproto.h: one 1500-byte frame
HELD_MAX = 256                            # replies the responder holds at once (echo.c)
# A Linux kernel reaches init in ~1-2 s under real KVM; a software KVM backend hangs
# stock kernels silently, so under --accel auto KVM gets at most this (as linux-guest).
_AUTO_KVM_BOOT_S = 10.0
# The sender's own time bound beyond the run's: irqlab ends the run first.
_SENDER_BACKSTOP_NS = 60_000_000_000

NET = Option("--net", "net", dict(
    choices=NET_MODES,
    help="how packets reach the guest: user (QEMU's user network, a forward on "
         "127.0.0.1; default) or tap (a tap and bridge in a network namespace irqlab "
         "creates for the run and removes)"))
PAYLOAD = Option("--payload", "payload", dict(
    type=count, metavar="BYTES",
    help=f"UDP payload of each packet, {PAYLOAD_MIN}-{PAYLOAD_MAX} (default 64)"))
ECHO_MODES = ("user", "kernel")
ECHO = Option("--echo", "echo", dict(
    choices=ECHO_MODES,
    help="who answers in the guest: user (irqlab's SCHED_FIFO UDP responder; default) "
         "or kernel (the guest kernel's own ICMP echo, no user space; needs --net tap)"))
INJECT_DELAY = Option("--inject-delay", "inject_delay", dict(
    type=duration, metavar="DUR",
    help="self-check: the guest holds the reply to every --inject-every'th packet for "
         "DUR"))


@dataclass
class NetOptions(TargetOptions):
    """The net target's options (field names are the stored run parameters)."""

    accel: str = "auto"
    net: str = "user"
    payload_bytes: int = 64
    inject_delay_ns: int = 0
    inject_every: int = 0
    echo: str = "user"
    priority: int = 90
    rt_fallback: bool = False

    def capabilities(self) -> frozenset[str]:
        """"guest-disk": a guest with a disk its loads run on (both modes);
        "guest-net": a network of the run's own that loads may join to reach the guest
        (the tap mode's namespace; QEMU's user network has none)."""
        return frozenset({"guest-disk", "guest-net"} if self.net == "tap"
                         else {"guest-disk"})


class NetTarget(Target):
    name = "net"
    boot_estimate_s = 5.0
    help = "UDP round trips from the host to a Linux guest on virtio-net"
    options = (o.ARCH, o.ACCEL, NET, ECHO, PAYLOAD, INJECT_DELAY, o.INJECT_EVERY,
               o.PRIORITY, o.RT_FALLBACK)
    why_not = {"icount": "round trips are timed on the host in real time; --icount "
                         "makes the guest's time virtual",
               "inject_irqoff": "use --inject-delay: the guest's responder holds every "
                                "Nth reply",
               "idle": "the guest is Linux; its responder blocks in the kernel",
               "cpus": "one sender and one responder: pin with --pin"}
    min_period_ns = 10_000      # probes/native/netsend.c --period-ns

    def doctor(self) -> list[Check]:
        """Its programs, the guest kernel's virtio modules, iproute2 and root for tap
        mode; vhost-net said as a fact (the knob reports it not applicable without it)."""
        import os
        import shutil

        from irqlab.knobs.net import vhost_net_missing
        from irqlab.runner.linux_arch import LINUX_ARCHES
        from irqlab.runner.net import DISKIO, ECHO, NETSEND, net_modules_dir
        missing = [p.name for p in (NETSEND, ECHO, DISKIO) if not p.exists()]
        if missing:
            return [Check("net", False, f"not built: {', '.join(missing)}",
                          "make -C probes/native")]
        ready = []
        for arch, guest in LINUX_ARCHES.items():
            kernel = guest.find_kernel()
            if kernel is not None and (net_modules_dir(kernel, arch) / "load-order").exists():
                ready.append(arch)
            elif arch == "x86_64":
                return [Check("net", False, "no virtio-net modules for the Linux guest "
                                            "kernel",
                              f"scripts/fetch-linux-net.sh (or {SETUP})")]
        vhost = vhost_net_missing()
        if not shutil.which("ip"):
            tap = "--net tap needs iproute2's `ip` (apt-get install iproute2)"
        elif os.geteuid() != 0:
            tap = "--net tap needs root (it creates a network namespace and a tap)"
        else:
            tap = "--net tap ready"
        return [Check("net", True, f"--target net ready (--net user; --arch "
                                   f"{', '.join(ready)}); {tap}; vhost: "
                                   f"{'available' if vhost is None else vhost}")]

    def configure(self, given: dict[str, Any], period_ns: int) -> NetOptions:
        priority, rt_fallback = o.check_rt(given)
        payload = given.get("payload", 64)
        if not PAYLOAD_MIN <= payload <= PAYLOAD_MAX:
            raise TargetUsageError(f"--payload {payload} must be {PAYLOAD_MIN}-{PAYLOAD_MAX} "
                                   f"bytes (one 1500-byte frame, no fragments)")
        delay, every = given.get("inject_delay") or 0, given.get("inject_every") or 0
        if (delay > 0) != (every > 0):
            raise TargetUsageError("--inject-delay and --inject-every go together, e.g. "
                                   "--inject-delay 5ms --inject-every 100")
        echo, net = given.get("echo", "user"), given.get("net", "user")
        if echo == "kernel" and net == "user":
            raise TargetUsageError("--echo kernel needs --net tap: QEMU's user network "
                                   "answers ICMP echo itself, so the guest would never "
                                   "see the requests")
        if echo == "kernel" and every:
            raise TargetUsageError("--inject-delay needs --echo user: the guest kernel "
                                   "answers ICMP echo at once and cannot hold a reply")
        if delay >= REPLY_TIMEOUT_NS:
            raise TargetUsageError(f"--inject-delay must be shorter than the reply timeout "
                                   f"({REPLY_TIMEOUT_NS // 1_000_000} ms), or every held "
                                   f"packet would count as lost")
        if every and -(-delay // (every * period_ns)) > HELD_MAX:
            raise TargetUsageError(f"--inject-delay {format_ns(delay, 'exact')} at "
                                   f"--inject-every {every} and --period "
                                   f"{format_ns(period_ns, 'exact')} "
                                   f"holds more than {HELD_MAX} replies at once: inject "
                                   f"less often or hold shorter")
        arch = o.linux_guest_arch(given)
        o.check_kvm_arch(given.get("accel", "auto"), arch)
        return NetOptions(arch=arch, accel=given.get("accel", "auto"),
                          net=net, payload_bytes=payload, echo=echo,
                          inject_delay_ns=delay, inject_every=every, priority=priority,
                          rt_fallback=rt_fallback)

    def accel_plans(self, cfg: Any) -> list[AccelPlan]:
        return o.arch_plans(cfg.options.accel, False, cfg.options.arch)

    def boot_timeout_s(self, cfg: Any, plan: AccelPlan) -> float:
        if cfg.options.accel == "auto" and plan.accel == "kvm":
            return min(cfg.boot_timeout_s, _AUTO_KVM_BOOT_S)
        return cfg.boot_timeout_s

    def stall_timeout_s(self, cfg: Any) -> float:
        # A lost packet is committed only after its reply timeout.
        return max(3.0 + REPLY_TIMEOUT_NS / 1e9, 20 * cfg.period_ns / 1e9)

    def run_metadata(self, cfg: Any) -> dict[str, Any]:
        return {"qemu_version": qemu_version(machine_for(cfg.options.arch).qemu)}

    def network(self, cfg: Any) -> GuestNetwork:
        """The run's network, with the netdev settings (vhost ...) among its hooks."""
        settings = [h for h in cfg.hooks if isinstance(h, NetdevSetting)]
        if cfg.options.net == "tap":
            return NetnsNetwork(settings=settings)
        for s in settings:
            s.not_applicable_to(f"--net {cfg.options.net}")
        return UserNetwork()

    def disk(self, cfg: Any) -> GuestDisk | None:
        """The guest's disk when a knob or a load of the run asks for one; the knobs
        set its back end, the load what the guest does on it."""
        settings = [h for h in cfg.hooks if isinstance(h, DiskSetting)]
        loads = [h for h in cfg.hooks if isinstance(h, InGuestDiskLoad)]
        if not settings and not loads:
            return None
        disk = GuestDisk()
        for s in settings:
            s.apply_to_disk(disk)
        if loads:
            disk.load_args = loads[0].diskio_args()
        return disk

    def spawn(self, cfg: Any, plan: AccelPlan, name: str,
              process_args: list[str]) -> MeasuredProcess:
        opts: NetOptions = cfg.options
        packets = cfg.target_samples() or 0
        bound_ns = (packets * cfg.period_ns if packets else cfg.duration_ns or 0)
        return NetGuest(cfg.period_ns, plan, self.network(cfg),
                        payload_bytes=opts.payload_bytes, packets=packets,
                        max_duration_ns=bound_ns + _SENDER_BACKSTOP_NS,
                        priority=opts.priority, rt_fallback=opts.rt_fallback,
                        inject_delay_ns=opts.inject_delay_ns,
                        inject_every=opts.inject_every, echo=opts.echo, disk=self.disk(cfg),
                        extra_qemu_args=list(process_args), name=name,
                        layout_bytes=layout_bytes, arch=opts.arch)

    def open_source(self, cfg: Any, process: MeasuredProcess) -> SampleSource:
        assert isinstance(process, NetGuest)
        return NetSource(process.mem_path, on_finish=process.request_stop,
                         finish_wait_s=REPLY_TIMEOUT_NS / 1e9 + 2.0,
                         guest_arch=cfg.options.arch)

    def process_metadata(self, process: MeasuredProcess) -> dict[str, Any]:
        assert isinstance(process, NetGuest)
        out: dict[str, Any] = {"network": {**process.network.metadata(),
                                           "sender_argv": process.sender_argv,
                                           "qemu_exit_code": process.qemu_exit_code()}}
        if process.disk is not None:
            out["guest_disk"] = {**process.disk.metadata(), "qemu_io": process.disk_io}
        return out

    def trace_capture(self, options: TargetOptions, db_path: Path, period_ns: int) -> Any:
        """The host capture on CLOCK_MONOTONIC (the samples' own clock: they map onto it
        exactly), with the packet's network events and the sender's threads, for the
        explain along the packet's path (irqlab.explain.netpath)."""
        from irqlab.trace.capture import TraceHook
        return TraceHook(db_path, period_ns, clock="mono", extra_events=NET_TRACE_EVENTS,
                         path_kind="net")

    def boot_failure_detail(self, process: MeasuredProcess) -> str:
        text = f"serial: {process.serial().strip()[-300:]!r}"
        err = process.stderr().strip()
        return text + (f"; stderr: {err[-300:]!r}" if err else "")
