"""`pip install` of the checkout gives a working irqlab outside the checkout (issue 18):
the wheel carries the probes and the C fast paths (setup.py, irqlab.paths)."""

from __future__ import annotations

import json
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DEFAULT_PROBE

XDIST_GROUP = ""              # its 3 s guest asserts nothing about time (tests/conftest.py)
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.emulated          # the installed irqlab runs the guest probe under TCG
@pytest.mark.skipif(not DEFAULT_PROBE.exists(), reason="guest probe not built")
def test_installed_wheel_runs_outside_the_checkout(tmp_path):
    wheels = tmp_path / "wheels"
    # No build isolation: the test environment has setuptools (test extra), and nothing
    # is downloaded. The dependencies come from this venv through a .pth file.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(wheels), str(REPO)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("irqlab-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    sp = subprocess.run([str(py), "-c", "import site; print(site.getsitepackages()[0])"],
                        check=True, capture_output=True, text=True).stdout.strip()
    Path(sp, "deps-from-test-venv.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, capture_output=True, timeout=300)

    work = tmp_path / "elsewhere"
    work.mkdir()
    run = subprocess.run([str(venv / "bin" / "irqlab"), "run", "--accel", "tcg",
                          "--duration", "3s", "--window", "1s", "--json", "--db",
                          str(work / "x.duckdb")], cwd=work, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    summary = [json.loads(x) for x in run.stdout.splitlines()][-1]
    assert summary["type"] == "summary" and summary["status"] == "ok"
    assert summary["samples"] > 100

    doctor = subprocess.run([str(venv / "bin" / "irqlab"), "doctor", "--json"], cwd=work,
                            capture_output=True, text=True, timeout=60)
    checks = {c["check"]: c for c in map(json.loads, doctor.stdout.splitlines())}
    assert checks["probes"]["ok"] and checks["fast_path"]["ok"]
    version = subprocess.run([str(venv / "bin" / "irqlab"), "--version"],
                             capture_output=True, text=True, timeout=60).stdout
    import irqlab
    assert version.strip() == f"irqlab {irqlab.__version__}"
    # It really ran the wheel's copy, not the checkout's.
    where = subprocess.run([str(py), "-c", "import irqlab.paths as p; "
                            "print(p.built('probes/native/build'))"], cwd=work,
                           capture_output=True, text=True).stdout
    assert "/_bin/" in where and str(REPO) not in where
