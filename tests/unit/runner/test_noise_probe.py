"""irqlab-noise's command line (probes/native/noise.c): the values it refuses, each one
line on stderr and exit 2 before anything is mapped or started (lib/cli.c), and the
options irqlab gives it (runner/noise.py)."""

from __future__ import annotations

import subprocess

import pytest

from irqlab.runner.noise import NOISE_PROBE, noise_args


def _probe(*args: str) -> subprocess.CompletedProcess:
    if not NOISE_PROBE.exists():
        pytest.skip("irqlab-noise is not built (make -C probes/native)")
    return subprocess.run([str(NOISE_PROBE), *args], capture_output=True, text=True,
                          timeout=30)


@pytest.mark.parametrize("args, says", [
    (["--shm-fd", "9", "--threshold-ns", "99"], "--threshold-ns 99 must be 100 to"),
    (["--shm-fd", "9", "--threshold-ns", "1000000001"], "must be 100 to 1000000000"),
    (["--shm-fd", "9", "--threshold-ns", "5us"], "--threshold-ns 5us must be"),
    (["--shm-fd", "9", "--period-ns", "1000"], "unknown option --period-ns"),
    (["--threshold-ns", "5000"], "give exactly one of --shm PATH and --shm-fd N"),
    (["--shm-fd", "9", "--cpus", "1,1"], "--cpus 1,1 is not a CPU list"),
])
def test_bad_values_are_one_line_and_exit_2(args, says):
    res = _probe(*args)
    assert res.returncode == 2 and says in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_help_names_its_options():
    res = _probe("--help")
    assert res.returncode == 0
    for opt in ("--threshold-ns", "--other", "--cpus", "--duration-ns", "--capacity"):
        assert opt in res.stdout


def test_irqlab_asks_for_sched_other_unless_given_a_priority():
    assert noise_args([0, 1, 3], 5_000, 16, 0, None, False) == [
        "--cpus", "0-1,3", "--threshold-ns", "5000", "--capacity", "16", "--other"]
    assert noise_args([2], 7_000, 16, 10**9, 80, True) == [
        "--cpus", "2", "--threshold-ns", "7000", "--capacity", "16", "--duration-ns",
        "1000000000", "--priority", "80", "--rt-fallback"]
