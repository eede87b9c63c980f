"""Device trees for Xen on QEMU ``virt``: QEMU's own tree plus Xen's ``/chosen`` nodes.

Xen on Arm takes its command line, dom0's kernel and dom0less domains from ``/chosen``
(Xen's docs/misc/arm/device-tree/booting.txt and docs/misc/arm/dom0less.md). QEMU writes
its generated tree with ``-M virt,...,dumpdtb=FILE``; we decompile it with ``dtc``
(Debian's device-tree-compiler), append a second ``/ { chosen { ... }; };`` block — dtc
merges nodes of the same path, and always emits a node's properties before its subnodes,
as the flattened format requires — and compile it back. QEMU boots Xen with ``-dtb``; it
then drops guest-loader's nodes, so modules are loaded with ``-device loader`` at the
addresses written here.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

DTC_HINT = "install Debian's device-tree-compiler (the README's set-up command does)"
# Xen's module compatibles (booting.txt): a kernel is "multiboot,kernel".
MODULE_COMPATIBLE = '"multiboot,kernel", "multiboot,module"'
RAMDISK_COMPATIBLE = '"multiboot,ramdisk", "multiboot,module"'


class FdtError(RuntimeError):
    """dtc or QEMU could not produce the tree; the message says which and why."""


@dataclass
class Module:
    """A boot module QEMU loads at ``addr``: a kernel Image with its command line, or
    (``bootargs`` None) the ramdisk of the kernel before it."""

    addr: int
    size: int
    bootargs: str | None

    def dts(self, indent: str) -> str:
        # Xen wants the reg size to cover the file; round up to 4 KiB for clarity.
        size = (self.size + 0xFFF) & ~0xFFF
        compatible = MODULE_COMPATIBLE if self.bootargs is not None else RAMDISK_COMPATIBLE
        args = (f"{indent}\tbootargs = {_string(self.bootargs)};\n"
                if self.bootargs is not None else "")
        return (f"{indent}module@{self.addr:x} {{\n"
                f"{indent}\tcompatible = {compatible};\n"
                f"{indent}\treg = <0x0 {self.addr:#x} 0x0 {size:#x}>;\n"
                + args + f"{indent}}};\n")


@dataclass
class Domain:
    """A dom0less domU (dom0less.md): memory in KiB, vCPUs, a vpl011 console."""

    name: str
    module: Module
    memory_kib: int = 64 * 1024
    vcpus: int = 1
    # vpl011: the domain gets an emulated PL011 whose output Xen prints as "(XEN) DOMn:";
    # newer Xen also requires it for console_io from dom0less domains (notes).
    vpl011: bool = True
    extra: dict[str, str] = field(default_factory=dict)   # raw property -> DTS value

    def dts(self, indent: str) -> str:
        out = (f"{indent}{self.name} {{\n"
               f'{indent}\tcompatible = "xen,domain";\n'
               f"{indent}\t#address-cells = <2>;\n"
               f"{indent}\t#size-cells = <2>;\n"
               f"{indent}\tmemory = <0x0 {self.memory_kib:#x}>;\n"
               f"{indent}\tcpus = <{self.vcpus}>;\n")
        if self.vpl011:
            out += f"{indent}\tvpl011;\n"
        for key, val in self.extra.items():
            out += f"{indent}\t{key} = {val};\n"
        return out + self.module.dts(indent + "\t") + f"{indent}}};\n"


def _string(text: str) -> str:
    """A DTS string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def chosen_block(xen_bootargs: str, dom0: list[Module], domains: list[Domain]) -> str:
    """The ``/chosen`` additions as DTS source (a second root block dtc merges); dom0:
    none (dom0less), its kernel, or its kernel and ramdisk modules."""
    body = ("\t\t#address-cells = <2>;\n\t\t#size-cells = <2>;\n"
            f"\t\txen,xen-bootargs = {_string(xen_bootargs)};\n")
    for module in dom0:
        body += module.dts("\t\t")
    for dom in domains:
        body += dom.dts("\t\t")
    return "\n/ {\n\tchosen {\n" + body + "\t};\n};\n"


def _dtc() -> str:
    path = shutil.which("dtc")
    if path is None:
        raise FdtError(f"dtc not found: {DTC_HINT}")
    return path


def dump_machine_dtb(qemu_argv: list[str], dest: Path, timeout_s: float = 20.0) -> Path:
    """Ask QEMU for the tree of the machine ``qemu_argv`` describes (``-M`` is given
    ``dumpdtb=``; QEMU writes the file and exits without running anything)."""
    argv = list(qemu_argv)
    try:
        i = argv.index("-M")
    except ValueError:
        raise FdtError("QEMU arguments have no -M machine option") from None
    argv[i + 1] += f",dumpdtb={dest}"
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise FdtError(f"QEMU did not dump its device tree within {timeout_s:g} s") from None
    if not dest.exists():
        raise FdtError(f"QEMU did not dump its device tree (exit {proc.returncode}): "
                       f"{proc.stderr.strip()[-300:]}")
    return dest


def decompile(dtb: Path) -> str:
    proc = subprocess.run([_dtc(), "-q", "-I", "dtb", "-O", "dts", str(dtb)],
                          capture_output=True, text=True)
    if proc.returncode:
        raise FdtError(f"dtc could not read {dtb}: {proc.stderr.strip()[-300:]}")
    return proc.stdout


def compile_dts(source: str, dest: Path) -> Path:
    proc = subprocess.run([_dtc(), "-q", "-I", "dts", "-O", "dtb", "-o", str(dest), "-"],
                          input=source, capture_output=True, text=True)
    if proc.returncode:
        raise FdtError(f"dtc rejected the tree: {proc.stderr.strip()[-500:]}")
    return dest


def xen_tree(qemu_argv: list[str], workdir: Path, xen_bootargs: str,
             dom0: list[Module], domains: list[Domain]) -> tuple[Path, str]:
    """QEMU's tree for ``qemu_argv`` with Xen's /chosen nodes: (dtb path, added DTS)."""
    base = dump_machine_dtb(qemu_argv, workdir / "machine.dtb")
    added = chosen_block(xen_bootargs, dom0, domains)
    source = decompile(base) + added
    (workdir / "xen-tree.dts").write_text(source)
    return compile_dts(source, workdir / "xen-tree.dtb"), added
