"""Debian's Linux kernel (amd64, and arm64 on QEMU virt) boots under TCG with irqlab's
initramfs and delivers samples."""

from __future__ import annotations

import subprocess

import pytest

from irqlab.runner.linux_guest import find_kernel
from irqlab.runner.native import NATIVE_PROBE
from tests.conftest import run_cli

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU


@pytest.fixture(scope="module", params=["x86_64", "arm64"])
def arch(request):
    path = find_kernel(request.param)
    if path is None or not path.exists():
        pytest.skip(f"no {request.param} Linux guest kernel: ./setup.sh --install-only "
                    f"fetches it")
    subprocess.run(["make", "-s", "-C", str(NATIVE_PROBE.parents[1])], check=True)
    return request.param


def test_linux_guest_boots_under_tcg_and_delivers_samples(db, arch):
    # (boot timeout and timeout: hang guards only; how long TCG takes to boot on a
    # loaded host is not this test's business)
    res = run_cli(["run", "--target", "linux-guest", "--arch", arch, "--accel", "tcg",
                   "--samples", "600", "--window", "1s", "--boot-timeout", "120s",
                   "--json", "--name", "lg"], db, timeout=180)
    assert res.code == 0, res.stderr + res.stdout[-2000:]
    s = res.summary
    assert (s["status"], s["target"], s["arch"], s["accel"], s["emulated"]) == \
        ("ok", "linux-guest", arch, "tcg", True)
    assert s["samples"] == 600 and s["lost"] == 0 and s["tick_hz"] == 1_000_000_000
    assert [c["cpu"] for c in s["per_cpu"]] == [0]
    assert s["per_cpu"][0]["samples"] == 600
    assert 0 < s["min_ns"] <= s["p50_ns"] <= s["max_ns"]
