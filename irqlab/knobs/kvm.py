"""KVM knobs: HLT exits off (cpu-pm), per-VM halt polling, global halt_poll_ns."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import struct
from typing import Any

from irqlab.knobs.base import Knob, qemu_accel
from irqlab.journal import journal, undo_kind
from irqlab.knobs.values import parse_duration, parse_onoff

KVM_CAP_HALT_POLL = 182
KVM_ENABLE_CAP = 0x4068AEA3       # _IOW(KVMIO, 0xa3, struct kvm_enable_cap), 104 bytes
_SYS_PIDFD_GETFD = 438
HALT_POLL_NS_PATH = "/sys/module/kvm/parameters/halt_poll_ns"


class CpuPmKnob(Knob):
    key = "cpu_pm"
    accepts_off = True
    metavar = "on|off"
    help = "-overcommit cpu-pm=on: the guest's HLT/MWAIT no longer exit to KVM (KVM only)"

    def parse(self, value: str) -> None:
        self.on = parse_onoff(value)

    def qemu_args(self) -> list[str]:
        return ["-overcommit", "cpu-pm=on"] if self.on else []

    def after_start(self, ctx: Any) -> None:
        accel = qemu_accel(ctx)
        if not self.on:
            self.status = "applied"
            self.details["note"] = "default: HLT exits to the hypervisor"
        elif accel != "kvm":
            self.not_applicable(f"cpu-pm changes KVM's HLT/MWAIT exits; this guest runs "
                                f"under {accel or 'no QEMU accelerator'}, where QEMU ignores it")
        else:
            self.status = "applied"
            self.details["qemu_args"] = self.qemu_args()


def _vm_fd_of(pid: int) -> int:
    """QEMU's KVM VM fd number, as seen in /proc/PID/fd."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:kvm-vm":
                return int(fd)
        except OSError:
            continue
    raise FileNotFoundError(errno.ENOENT, "QEMU holds no kvm-vm file descriptor")


class HaltPollKnob(Knob):
    key = "halt_poll"
    metavar = "DUR"
    help = "per-VM halt polling (KVM_CAP_HALT_POLL), e.g. 0 or 200us"

    def parse(self, value: str) -> None:
        self.ns = parse_duration(value)

    def after_start(self, ctx: Any) -> None:
        accel = qemu_accel(ctx)
        if accel != "kvm":
            self.not_applicable(f"halt polling is a KVM feature; this guest runs under "
                                f"{accel or 'no QEMU accelerator'}")
            return
        # QEMU 7.2 has no option for KVM_CAP_HALT_POLL, so we try the only other way:
        # borrow QEMU's VM fd (pidfd_getfd) and enable the capability ourselves.
        libc = ctypes.CDLL(None, use_errno=True)
        pidfd = vmfd = -1
        try:
            pidfd = os.pidfd_open(ctx.process.proc.pid)
            vmfd = libc.syscall(_SYS_PIDFD_GETFD, pidfd, _vm_fd_of(ctx.process.proc.pid), 0)
            if vmfd < 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))
            arg = bytearray(struct.pack("=IIQQQQ", KVM_CAP_HALT_POLL, 0, self.ns, 0, 0, 0)
                            + bytes(64))
            fcntl.ioctl(vmfd, KVM_ENABLE_CAP, arg)
        except OSError as exc:
            reason = f"{exc.strerror or exc}"
            if exc.errno == errno.EIO:
                reason = ("KVM accepts VM ioctls only from the process that created the VM "
                          "(EIO from irqlab via pidfd_getfd), and QEMU 7.2 has no option "
                          "for KVM_CAP_HALT_POLL")
            self.not_applicable(reason)
            return
        finally:
            for fd in (vmfd, pidfd):
                if fd >= 0:
                    os.close(fd)
        # Nothing to restore: the setting lives and dies with this VM.
        self.status = "applied"
        self.details["halt_poll_ns"] = self.ns


class HaltPollGlobalKnob(Knob):
    key = "halt_poll_global"
    metavar = "DUR"
    help = f"write {HALT_POLL_NS_PATH} (all VMs; restored after the run)"
    path = HALT_POLL_NS_PATH  # tests point this at a scratch file

    def parse(self, value: str) -> None:
        self.ns = parse_duration(value)

    def before_start(self) -> None:
        self._entry: int | None = None
        try:
            with open(self.path) as f:
                self.old = f.read().strip()
        except OSError as exc:
            self.not_applicable(f"{self.path}: {exc.strerror} (KVM not loaded?)")
            return
        self.details["original"] = self.old
        if self.old == str(self.ns):
            self.status = "applied"
            self.details["note"] = "already at this value; nothing changed"
            return
        entry = journal().add("write", path=self.path, old=self.old)
        try:
            with open(self.path, "w") as f:
                f.write(str(self.ns))
        except OSError as exc:
            journal().done(entry)
            self.not_applicable(f"{self.path} is not writable ({exc.strerror}): KVM is "
                                f"built in or its parameters are read-only on this host")
            return
        self._entry = entry
        self.status = "applied"

    def stop(self) -> None:
        if getattr(self, "_entry", None) is None:
            return
        try:
            with open(self.path, "w") as f:
                f.write(self.old)
            self.details["restored"] = True
            journal().done(self._entry)
        except OSError as exc:
            # Left in the journal: the next irqlab start tries again.
            self.details["restored"] = f"failed: {exc.strerror}"
        self._entry = None


@undo_kind("write")
def undo_write(entry: dict[str, Any]) -> str:
    """The journal's undo of op ``write``: the file gets its old value back."""
    with open(entry["path"], "w") as f:
        f.write(str(entry["old"]))
    return f"restored {entry['path']} to {entry['old']!r}"
