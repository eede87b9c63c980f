"""An arm64 KVM host nested under QEMU TCG, running the arm64 probe as its KVM guest
(``--target kvm-arm64``; docs/arm64.md, "A nested arm64 KVM host").

QEMU's ``virt`` machine with ``virtualization=on`` and ``-cpu max`` emulates EL2, so
Debian's arm64 kernel (the one scripts/fetch-xen-dom0.sh caches for the arm64 dom0)
boots at EL2 and initialises KVM (VHE). irqlab writes its initramfs per run: busybox
(from the same cache), ``irqvmm`` (probes/kvm-host/irqvmm.c: one vCPU, in-kernel
GICv3 and arch timer), the probe's Image and a device tree for it (:func:`guest_dts`:
QEMU virt's addresses, so the probe's ring is at RAM base + 4 MiB as everywhere), and,
with ``--trace``, ``irqlab-gtrace`` (the L1 kernel's ftrace with its KVM, vGIC and
arch-timer events, streamed into a second ivshmem device as a Linux guest's is) and,
with ``--load kvm-host-hog``, ``irqlab-hog`` pinned to the vCPU thread's CPU.

The ring reaches the host as under a Xen dom0: irqvmm maps the guest's RAM (it is its
own memory) and copies the ring into an ivshmem-plain BAR (probes/xen-dom0/ringcopy.h),
a memfd the host reads with its ordinary ring reader. The L1 reports what it did as
``irqlab-kvm: KEY k=v ...`` console lines (:func:`parse_reports`): the vCPU thread's
tid and CPU, and the guest counter's offset from the L1 counter (KVM_REG_ARM_TIMER_CNT
read between two counter reads), which explain uses to put samples on the L1's clock.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irqlab.paths import built
from irqlab.runner.accel import AccelPlan
from irqlab.runner.fdt import FdtError, compile_dts
from irqlab.runner.linux_arch import LINUX_ARCHES
from irqlab.runner.linux_guest import write_newc
from irqlab.runner.process import MeasuredProcess, marked_lines
from irqlab.runner.qemu import base_argv, memfd_backend
from irqlab.runner.xen_dom0 import dom0_cache_dir, fetch_hint

KVM_HOST_SRC = Path(__file__).resolve().parents[2] / "probes" / "kvm-host"
NATIVE_SRC = KVM_HOST_SRC.parent / "native"
KVM_HOST_BUILD = built("probes/kvm-host/build")
PROGRAMS = ("irqvmm", "irqlab-gtrace", "irqlab-hog")
QEMU = "qemu-system-aarch64"
REPORT_MARK = "irqlab-kvm:"
# The L1 machine: EL2 (KVM), GICv3; -cpu max for VHE, with QEMU's cheap pointer
# authentication (the architected one makes TCG markedly slower for nothing we measure).
L1_MACHINE = ["-M", "virt,virtualization=on,gic-version=3", "-accel", "tcg,thread=multi",
              "-cpu", "max,pauth-impdef=on"]
L1_MEMORY_MIB = 512
L1_CPUS = 2
L1_CMDLINE = "console=ttyAMA0 quiet panic=-1"
VCPU_CPU = 1                    # the L1 CPU the vCPU thread is pinned to (and the hog)
GUEST_MEMORY_MIB = 64
GUEST_RAM_BASE = 0x40000000     # irqvmm.c RAM_BASE: QEMU virt's, so the ring is at +4 MiB
# The ring's BAR: header + 65,536 records of 32 bytes, rounded to a power of two.
SHM_BYTES = 4 << 20
# The trace channel's BAR (irqlab.trace.kvm_host): told apart from the ring's by size.
TRACE_BYTES = 64 << 20
RING_POLL_US = 20000            # irqvmm's copy interval: 65 s of ring at 1 ms
# The L1 kernel's events beyond gtrace's own (sched, irq, softirq, hrtimer): a guest
# timer IRQ's path through KVM on arm64 (arch/arm64/kvm/trace_arm.h, vgic/trace.h).
KVM_EVENTS = ("kvm/kvm_entry", "kvm/kvm_exit", "kvm/kvm_wfx_arm64", "kvm/kvm_vcpu_wakeup",
              "kvm/kvm_timer_update_irq", "kvm/vgic_update_irq_pending",
              "kvm/kvm_timer_hrtimer_expire", "kvm/kvm_userspace_exit")
TRACE_END_WAIT_S = 20.0         # the L1's last trace drain after the probe is done


def guest_dts(bootargs: str, memory_mib: int = GUEST_MEMORY_MIB) -> str:
    """The probe's device tree under irqvmm: RAM, GICv3 (distributor, redistributor),
    the arch timer's PPIs, PSCI over HVC (KVM's own) and a PL011 irqvmm prints."""
    text = bootargs.replace("\\", "\\\\").replace('"', '\\"')
    return f"""/dts-v1/;
/ {{
	compatible = "linux,dummy-virt";
	#address-cells = <2>;
	#size-cells = <2>;
	interrupt-parent = <&gic>;
	chosen {{
		bootargs = "{text}";
		stdout-path = "/pl011@9000000";
	}};
	memory@{GUEST_RAM_BASE:x} {{
		device_type = "memory";
		reg = <0x0 {GUEST_RAM_BASE:#x} 0x0 {memory_mib << 20:#x}>;
	}};
	cpus {{
		#address-cells = <1>;
		#size-cells = <0>;
		cpu@0 {{
			device_type = "cpu";
			compatible = "arm,arm-v8";
			reg = <0>;
			enable-method = "psci";
		}};
	}};
	psci {{
		compatible = "arm,psci-0.2";
		method = "hvc";
	}};
	gic: intc@8000000 {{
		compatible = "arm,gic-v3";
		#interrupt-cells = <3>;
		#address-cells = <2>;
		#size-cells = <2>;
		interrupt-controller;
		reg = <0x0 0x8000000 0x0 0x10000>, <0x0 0x80a0000 0x0 0x20000>;
	}};
	timer {{
		compatible = "arm,armv8-timer";
		interrupts = <1 13 0x104>, <1 14 0x104>, <1 11 0x104>, <1 10 0x104>;
	}};
	pl011@9000000 {{
		compatible = "arm,pl011", "arm,primecell";
		reg = <0x0 0x9000000 0x0 0x1000>;
	}};
}};
"""


class InL1Trace(ABC):
    """A run hook that records the L1 kernel's ftrace (irqlab.trace.kvm_host): the
    target finds it among the run's hooks and has the L1's init start irqlab-gtrace."""

    @abstractmethod
    def l1_trace_events(self) -> tuple[str, ...]:
        """GROUP/EVENT names gtrace enables beyond its own."""


class InL1Hog(ABC):
    """A load the L1's init runs (irqlab.loads.kvm_host_hog): irqlab-hog's arguments,
    its CPU being the vCPU thread's."""

    @abstractmethod
    def l1_hog_args(self, vcpu_cpu: int) -> list[str]:
        """irqlab-hog's arguments (probes/native/hog.c)."""


def init_script(vmm_args: list[str], trace_events: tuple[str, ...] | None,
                hog_args: list[str]) -> str:
    """The L1's /init: find the ivshmem BARs, start the tracer and the hog, run irqvmm,
    let the tracer drain; every step an ``irqlab-kvm:`` line on the console."""
    s = [
        "#!/bin/busybox sh",
        "/bin/busybox --install -s /bin",
        f"say() {{ echo \"{REPORT_MARK} $*\" > /dev/console; }}",
        "fail() { say fatal \"$*\"; while :; do sleep 3600; done; }",
        "mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev",
        "mkdir -p /tmp",
        "[ -c /dev/kvm ] || fail no /dev/kvm: the kernel did not start KVM at EL2",
        "say ready uptime=$(cut -d' ' -f1 /proc/uptime) "
        "kvm=\"$(dmesg | grep -m1 -o 'kvm \\[1\\]: .* mode initialized.*' | tr ' ' _)\"",
        # the ivshmem-plain devices (1af4:1110), told apart by size
        "shm=''; tshm=''; for d in /sys/bus/pci/devices/*; do",
        "  if [ \"$(cat $d/vendor)\" = 0x1af4 ] && [ \"$(cat $d/device)\" = 0x1110 ]; then",
        f"    echo 1 > $d/enable; if [ $(stat -c %s $d/resource2) = {TRACE_BYTES} ]; "
        "then tshm=$d/resource2; else shm=$d/resource2; fi; fi; done",
        "[ -n \"$shm\" ] || fail no ivshmem-plain device for the ring",
    ]
    if trace_events is not None:
        s += ["[ -n \"$tshm\" ] || fail no ivshmem-plain device for the trace",
              "mkfifo /tmp/gready",
              f"irqlab-gtrace $tshm 3 {','.join(trace_events)} 3>/tmp/gready "
              "2>/dev/console & gpid=$!",
              "read -n 1 x < /tmp/gready; say trace started pid=$gpid"]
    if hog_args:
        s += [f"irqlab-hog {' '.join(hog_args)} 2>/dev/console & "
              "say hog started pid=$! args=" + ",".join(hog_args)]
    s += [f"irqvmm /irqlab/probe.bin /irqlab/guest.dtb $shm {' '.join(vmm_args)} "
          "2>/dev/console; rc=$?",
          "say vmm rc=$rc"]
    if trace_events is not None:
        s += ["kill -USR1 $gpid; wait $gpid; say trace done rc=$?"]
    s += ["[ $rc = 0 ] || fail irqvmm exited with $rc",
          "say end uptime=$(cut -d' ' -f1 /proc/uptime)",
          "while :; do sleep 3600; done"]
    return "\n".join(s) + "\n"


def parse_reports(text: str) -> list[tuple[str, dict[str, str]]]:
    """``irqlab-kvm: KEY k=v ...`` console lines -> [(key, {k: v})], in order; a word
    without ``=`` is kept under its own name with the value ""."""
    return [(key, {w.split("=", 1)[0]: w.split("=", 1)[1] if "=" in w else ""
                   for w in rest.split()}) for key, rest in marked_lines(text, REPORT_MARK)]


def reports_metadata(text: str) -> dict[str, Any]:
    """What the L1 said it did (run metadata ``kvm_host``): the last report of each key,
    and the fatal one's words."""
    out: dict[str, Any] = {}
    for key, kv in parse_reports(text):
        if key == "fatal":
            out["fatal"] = " ".join(k if not v else f"{k}={v}" for k, v in kv.items())
        elif key in ("trace", "hog"):
            state = next(iter(kv), "")
            out.setdefault(key, {})[state] = kv
        else:
            out[key] = kv
    return out


def build_programs() -> dict[str, Path]:
    """The L1's programs, (re)built by make when missing or older than their sources:
    irqvmm from probes/kvm-host, gtrace and the hog as an arm64 Linux guest has them
    (probes/native's arm64 build: one build of each program). FileNotFoundError naming
    the fix."""
    arm64 = LINUX_ARCHES["arm64"]
    where = {"irqvmm": KVM_HOST_BUILD / "irqvmm"}
    where.update({p: arm64.program(p) for p in PROGRAMS if p != "irqvmm"})
    if shutil.which("aarch64-linux-gnu-gcc") is None:
        missing = [p for p, path in where.items() if not path.exists()]
        if missing:
            raise FileNotFoundError(f"{', '.join(missing)} not built and "
                                    "aarch64-linux-gnu-gcc not found: run ./setup.sh "
                                    "--install-only")
        return where
    for src, args in ((KVM_HOST_SRC, []), (NATIVE_SRC, ["ARCH=arm64"])):
        if (src / "Makefile").exists():
            proc = subprocess.run(["make", "-s", "-C", str(src), *args],
                                  capture_output=True, text=True)
            if proc.returncode:
                raise OSError(f"building {src.name} for arm64 failed: "
                              f"{proc.stderr.strip()[-500:]}")
    return where


def build_initramfs(dest: Path, init: str, programs: dict[str, Path], probe: Path,
                    dtb: Path, busybox: Path) -> Path:
    """The L1's initramfs (uncompressed newc): /init, busybox, the programs in /bin,
    the probe and its tree in /irqlab."""
    members: list[tuple[str, int, bytes]] = [
        (d, stat.S_IFDIR | 0o755, b"") for d in ("bin", "dev", "proc", "sys", "tmp",
                                                "irqlab")]
    members.append(("dev/console", stat.S_IFCHR | 0o600, b""))
    members.append(("init", stat.S_IFREG | 0o755, init.encode()))
    members.append(("bin/busybox", stat.S_IFREG | 0o755, busybox.read_bytes()))
    for name, path in programs.items():
        members.append((f"bin/{name}", stat.S_IFREG | 0o755, path.read_bytes()))
    members.append(("irqlab/probe.bin", stat.S_IFREG | 0o644, probe.read_bytes()))
    members.append(("irqlab/guest.dtb", stat.S_IFREG | 0o644, dtb.read_bytes()))
    return write_newc(dest, members)


def l1_kernel() -> Path:
    """Debian's arm64 kernel Image (the arm64 dom0's), with KVM built in."""
    path = dom0_cache_dir("arm64") / "vmlinuz"
    if not path.exists():
        raise FileNotFoundError(f"no arm64 kernel: {fetch_hint('arm64')}")
    return path


def l1_busybox() -> Path:
    path = dom0_cache_dir("arm64") / "root" / "bin" / "busybox"
    if not path.exists():
        raise FileNotFoundError(f"no arm64 busybox: {fetch_hint('arm64')}")
    return path


@dataclass
class KvmArm64Host(MeasuredProcess):
    """QEMU (TCG, EL2) running Debian's arm64 kernel as a KVM host whose irqvmm runs the
    probe; the ring in an ivshmem memfd (see the module docstring)."""

    plan: AccelPlan
    probe: Path
    probe_cmdline: str
    name: str = "irqlab"
    trace_events: tuple[str, ...] | None = None      # --trace: gtrace's extra events
    hog_args: list[str] = field(default_factory=list)
    extra_qemu_args: list[str] = field(default_factory=list)
    fatal: str | None = None

    def build(self, workdir: Path) -> list[str]:
        """Write the tree and the initramfs; QEMU's argv."""
        try:
            dtb = compile_dts(guest_dts(self.probe_cmdline), workdir / "guest.dtb")
        except FdtError as exc:
            raise OSError(str(exc)) from None
        programs = build_programs()
        if self.trace_events is None:
            programs.pop("irqlab-gtrace")
        if not self.hog_args:
            programs.pop("irqlab-hog")
        vmm_args = ["-m", str(GUEST_MEMORY_MIB), "-c", str(VCPU_CPU), "-p",
                    str(RING_POLL_US)]
        initrd = build_initramfs(workdir / "l1.cpio",
                                 init_script(vmm_args, self.trace_events, self.hog_args),
                                 programs, self.probe, dtb, l1_busybox())
        return (base_argv(QEMU, self.name, L1_MEMORY_MIB, smp=L1_CPUS) + L1_MACHINE
                + memfd_backend("irqlab-shm", str(SHM_BYTES), self.mem_fd)
                + ["-device", "ivshmem-plain,memdev=irqlab-shm"]
                + self.extra_qemu_args
                + ["-kernel", str(l1_kernel().resolve()), "-initrd", str(initrd),
                   "-append", L1_CMDLINE])

    def start(self) -> None:
        """Check the pieces, build, start QEMU; OSError (FileNotFoundError) with the fix."""
        if not self.probe.exists():
            raise FileNotFoundError(f"arm64 probe {self.probe} is not built: run `make -C "
                                    f"probes/guest ARCH=arm64` (or ./setup.sh --install-only)")
        if shutil.which(QEMU) is None:
            raise FileNotFoundError(f"{QEMU} not found: install Debian's qemu-system-arm "
                                    f"(the README's set-up command does)")
        self._create_memfd("irqlab-kvm-ring", SHM_BYTES)
        self._spawn(self.build(self._workdir("irqlab-kvm-arm64-")))

    # -- what the L1 said ---------------------------------------------------------------
    def host_metadata(self) -> dict[str, Any]:
        """The L1's reports (run metadata ``kvm_host``)."""
        return reports_metadata(self.serial())

    def exit_code(self) -> int | None:
        code = super().exit_code()
        if code is None and self._child is not None and self.fatal is None:
            fatal = self.host_metadata().get("fatal")
            if fatal:
                self.fatal = fatal
                code = self.stop()
        return code

    def exited_done(self, code: int) -> bool:
        return code == 0 and self.fatal is None

    def exited_error(self, code: int) -> bool:
        return self.fatal is not None

    def stderr(self) -> str:
        qemu = super().stderr().strip()
        tail = " | ".join(ln for ln in self.serial().splitlines()[-6:] if ln.strip())
        return (qemu + "\n" if qemu else "") + (f"L1 stopped: {self.fatal}; " if self.fatal
                                                else "") + f"L1 console, last lines: {tail}"

    def stop(self, timeout_s: float = 5.0) -> int | None:
        if self.trace_events is not None:
            self._await_trace_end()
        return super().stop(timeout_s)

    def _await_trace_end(self) -> None:
        """Let gtrace drain the L1's last pages before QEMU stops: only when the probe
        finished (its ring, as irqvmm forwards it, says done) and QEMU still runs, until
        the L1 reports the trace's end, at most TRACE_END_WAIT_S. A run stopped early
        does not wait."""
        def said_done() -> bool:
            meta = self.host_metadata()
            return "done" in meta.get("trace", {}) or "fatal" in meta
        self._await_after_done(said_done, TRACE_END_WAIT_S)
