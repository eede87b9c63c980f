"""A local labgrid lab for the matrix pool (tests/integration/test_matrix_pool.py and
scripts/bench-matrix-pool.py): a real coordinator on a free loopback port in a temporary
directory, places made with ``labgrid-client create`` (tags with ``set-tags``), and a
labgrid environment whose board is QEMU (TCG) running the x86-64 probe."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from irqlab.runner.machines import MACHINES, find_qboot
from irqlab.runner.process import die_with_parent

BIN = Path(sys.executable).parent


def client(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "labgrid-client"), *args], env=env,
                          capture_output=True, text=True, timeout=30)


@contextlib.contextmanager
def local_lab(places: dict[str, dict[str, str]]) -> Iterator[dict[str, str]]:
    """Yields the environment (os.environ + LG_COORDINATOR) of a coordinator holding
    ``places`` (name -> tags); the coordinator is stopped after, also on failure."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="irqlab-lg-") as cwd:
        # The places are written where the coordinator loads them at start
        # (labgrid.remote.coordinator: places.yaml in its working directory; JSON is
        # YAML): one labgrid-client call per place and tag costs ~1.5 s on a busy host.
        Path(cwd, "places.yaml").write_text(json.dumps(
            {name: {"aliases": [], "comment": "", "tags": tags, "matches": []}
             for name, tags in places.items()}))
        proc = subprocess.Popen([str(BIN / "labgrid-coordinator"), "-l", address],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                cwd=cwd, preexec_fn=die_with_parent)
        env = {**os.environ, "LG_COORDINATOR": address}
        try:
            deadline = time.monotonic() + 15
            while sorted(acquired(env, check=False)) != sorted(places):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("labgrid-coordinator did not come up")
                time.sleep(0.3)
            yield env
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def acquired(env: dict[str, str], check: bool = True) -> dict[str, str | None]:
    """Place -> who holds it (None: free), as the coordinator says."""
    from irqlab.cli.matrix_pool import parse_places

    res = client(env, "-v", "places")
    if check:
        res.check_returncode()
    return {p.name: p.acquired for p in parse_places(res.stdout)}


def write_x86_env(path: Path) -> Path:
    """A labgrid environment whose board is QEMU (TCG) running the x86-64 probe."""
    m = MACHINES["x86_64"]
    extra = "-accel tcg -nodefaults -no-reboot" + (
        f" -bios {find_qboot()}" if find_qboot() else "")
    qemu = {"qemu_bin": "qemu", "machine": "pc", "cpu": "max", "memory": "64M",
            "kernel": "probe", "display": "fb-headless", "extra_args": extra}
    env = {"targets": {"main": {"drivers": {"QEMUDriver": qemu}}},
           "tools": {"qemu": f"/usr/bin/{m.qemu}"}, "images": {"probe": str(m.probe)}}
    path.write_text(json.dumps(env))            # JSON is YAML
    return path


def write_scenario(path: Path, env_file: Path, name: str, samples: int,
                   cells: int = 6) -> Path:
    """``cells`` cells of the labgrid board at a 10 ms period (light on the host)."""
    thresholds = ", ".join(f'"{300 + 10 * i}us"' for i in range(cells))
    path.write_text(f'name = "{name}"\n[run]\ntarget = "labgrid"\nlg_env = "{env_file}"\n'
                    f'period = "10ms"\nsamples = {samples}\nwindow = "1s"\n'
                    f'stall_timeout = "30s"\n[matrix]\nthreshold = [{thresholds}]\n')
    return path
