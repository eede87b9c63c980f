"""Build step of the wheel: the probes and the C fast paths, carried inside the package.

pyproject.toml holds the metadata; this file only adds to setuptools' build_py that
`pip install .` (or `pip wheel .`) builds the guest probes (x86_64, arm64), the native
probe and irqlab/native's library with make, and puts them in the package
(irqlab/_bin/..., irqlab/native/build/), where irqlab.paths finds them. A part that cannot
be built here (no arm64 cross compiler, say) is left out with a warning: `irqlab doctor`
then says what is missing and how to get it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# (make arguments, built file relative to ROOT, where it goes in the package)
PARTS = [
    (["-C", "probes/guest", "ARCH=x86_64"], "probes/guest/build/x86_64/irqlab-probe.elf",
     "irqlab/_bin/probes/guest/build/x86_64/irqlab-probe.elf"),
    (["-C", "probes/guest", "ARCH=arm64"], "probes/guest/build/arm64/irqlab-probe.bin",
     "irqlab/_bin/probes/guest/build/arm64/irqlab-probe.bin"),
    (["-C", "probes/native"], "probes/native/build/irqlab-native",
     "irqlab/_bin/probes/native/build/irqlab-native"),
    (["-C", "probes/native"], "probes/native/build/irqlab-init",
     "irqlab/_bin/probes/native/build/irqlab-init"),
    (["-C", "probes/native"], "probes/native/build/irqlab-netsend",
     "irqlab/_bin/probes/native/build/irqlab-netsend"),
    (["-C", "probes/native"], "probes/native/build/irqlab-echo",
     "irqlab/_bin/probes/native/build/irqlab-echo"),
    (["-C", "probes/native"], "probes/native/build/irqlab-diskio",
     "irqlab/_bin/probes/native/build/irqlab-diskio"),
    (["-C", "irqlab/native"], "irqlab/native/build/libirqlab.so",
     "irqlab/native/build/libirqlab.so"),
]


class BuildWithProbes(build_py):
    """build_py, then make the probes and the library and copy them into the build."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return          # an editable install uses the checkout's own build/ dirs
        made: set[tuple[str, ...]] = set()
        for args, src, dst in PARTS:
            if tuple(args) not in made:
                made.add(tuple(args))
                res = subprocess.run(["make", "-s", *args], cwd=ROOT, capture_output=True,
                                     text=True)
                if res.returncode:
                    self.warn(f"make {' '.join(args)} failed, left out of the wheel: "
                              f"{res.stderr.strip()[-300:]}")
            if (ROOT / src).exists():
                out = Path(self.build_lib) / dst
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / src, out)


setup(cmdclass={"build_py": BuildWithProbes})
