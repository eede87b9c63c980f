"""Debian's Linux kernel boots under TCG with irqlab's initramfs and delivers samples."""

from __future__ import annotations

import subprocess
import time

import pytest

from irqlab.runner.linux_guest import find_kernel
from irqlab.runner.native import NATIVE_PROBE
from tests.conftest import run_cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kernel():
    path = find_kernel()
    if path is None or not path.exists():
        pytest.skip("no Linux guest kernel: ./setup.sh --install-only fetches it")
    subprocess.run(["make", "-s", "-C", str(NATIVE_PROBE.parents[1])], check=True)
    return path


def test_linux_guest_boots_under_tcg_and_delivers_samples(db, kernel):
    t0 = time.monotonic()
    res = run_cli(["run", "--target", "linux-guest", "--accel", "tcg", "--samples", "600",
                   "--window", "1s", "--json", "--name", "lg"], db, timeout=90)
    elapsed = time.monotonic() - t0
    assert res.code == 0, res.stderr + res.stdout[-2000:]
    s = res.summary
    assert (s["status"], s["target"], s["accel"], s["emulated"]) == \
        ("ok", "linux-guest", "tcg", True)
    assert s["samples"] == 600 and s["lost"] == 0 and s["tick_hz"] == 1_000_000_000
    assert [c["cpu"] for c in s["per_cpu"]] == [0]
    assert s["per_cpu"][0]["samples"] == 600
    assert 0 < s["min_ns"] <= s["p50_ns"] <= s["max_ns"]
    assert elapsed < 60, f"boot + 600 samples took {elapsed:.1f} s"
