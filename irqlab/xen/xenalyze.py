"""Xen's own analyser, ``xenalyze`` (Debian's xen-utils-common), as the reference
`irqlab xentrace` is checked and benchmarked against: found on the PATH, in Debian's
/usr/lib/xen-*/bin, or in the dom0 toolstack cache (scripts/fetch-xen-dom0.sh unpacks it
there, never installed), where it runs with the cache's libraries."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from irqlab.runner.xen_dom0 import dom0_cache_dir


@dataclass(frozen=True)
class Xenalyze:
    path: Path
    env: dict[str, str]

    def summary(self, trace: Path, cpu_hz: int | None = None, svm: bool = True,
                timeout_s: float = 600.0) -> subprocess.CompletedProcess:
        """``xenalyze --summary`` of a plain xentrace file. ``svm``: the exits are AMD
        SVM's (Xen under QEMU TCG uses SVM; xenalyze assumes VMX and stops at the first
        SVM exit code above VMX's otherwise)."""
        argv = [str(self.path), "--summary"] + (["--svm-mode"] if svm else [])
        if cpu_hz:
            argv.append(f"--cpu-hz={cpu_hz}")
        return subprocess.run(argv + [str(trace)], capture_output=True, text=True,
                              env=self.env, timeout=timeout_s)


def find_xenalyze() -> Xenalyze | None:
    env = dict(os.environ)
    found = shutil.which("xenalyze") or next(
        (str(p) for p in sorted(Path("/usr/lib").glob("xen-*/bin/xenalyze"))), None)
    if found:
        return Xenalyze(Path(found), env)
    root = dom0_cache_dir("amd64") / "root"
    tool = root / "usr/bin/xenalyze"
    if not tool.is_file():
        return None
    libs = [str(root / "usr/lib/x86_64-linux-gnu"), str(root / "usr/lib")]
    env["LD_LIBRARY_PATH"] = ":".join(libs + [env.get("LD_LIBRARY_PATH", "")]).rstrip(":")
    return Xenalyze(tool, env)
