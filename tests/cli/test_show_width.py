"""No line of `irqlab show` is wider than 120 columns (issue 32): a real native run, a
stored run with a 600-character kernel command line and QEMU command, and imports."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from irqlab.runner.native import NATIVE_PROBE
from irqlab.store import Store
from tests.conftest import call_cli, run_cli
from tests.unit.reports._runs import add_run, latencies

FIXTURES = Path(__file__).parents[1] / "fixtures" / "import"
# A kernel command line as long as real ones get (boot loaders, Firecracker, CI images).
LONG_CMDLINE = " ".join(f"option{i}.parameter_name=value{i}" for i in range(20)) + \
    " init=/" + "very-long-path-component/" * 8 + "init"
LONG_ARGV = ["qemu-system-x86_64"] + [f"-device virtio-net-pci,netdev=n{i},mac=52:54:00:"
                                      f"12:34:{i:02d}" for i in range(12)]


@pytest.fixture(scope="module")
def native_built():
    subprocess.run(["make", "-s", "-C", str(NATIVE_PROBE.parents[1])], check=True)
    return NATIVE_PROBE


def _wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > 120]


@pytest.mark.slow             # a real native run (3 s of its start-up and measuring)
def test_show_of_a_real_native_run_fits_120_columns(tmp_path, native_built):
    db = tmp_path / "n.duckdb"
    res = run_cli(["run", "--target", "native", "--rt-fallback", "--samples", "200",
                   "--period", "500us", "-q"], db)
    assert res.code == 0, res.stderr
    for extra in ([], ["--hist"]):
        shown = call_cli(["show", "1", *extra], db)
        assert shown.code == 0, shown.stderr
        assert extra or "T:  0 (cpu 0)" in shown.stdout      # its per-CPU lines
        assert _wide(shown.stdout) == [], extra


def test_show_lines_fit_120_columns(tmp_path):
    db = tmp_path / "w.duckdb"
    with Store(db) as st:
        add_run(st, "long-cmdline", latencies("ramp", 1000),
                extra_meta={"host": {"hostname": "h1", "kernel": "6.1.0",
                                     "kernel_cmdline": LONG_CMDLINE, "cpu_model": "Test CPU",
                                     "cpus_online": 2, "host_is_virtual": False},
                            "qemu_argv": LONG_ARGV})
    assert len(LONG_CMDLINE) > 600
    imp = call_cli(["import", "auto", str(FIXTURES / "cyclictest_h.json"),
                    str(FIXTURES / "rtla_timerlat_hist.txt")], db)
    assert imp.code == 0, imp.stderr
    for run in ("long-cmdline", "cyclictest_h", "rtla_timerlat_hist"):
        for extra in ([], ["--hist"]):
            shown = call_cli(["show", run, *extra], db)
            assert shown.code == 0, shown.stderr
            assert _wide(shown.stdout) == [], (run, extra)
    shown = call_cli(["show", "long-cmdline"], db).stdout
    # Wrapped, not cut: every word of the command line is still there, in order.
    start = shown.index("kernel_cmdline: ")
    block = shown[start:shown.index("\n  preempt_model" if "preempt_model" in shown[start:]
                                    else "\n  machine", start)]
    # (a word longer than a line, the init path, is cut at 120 columns: spaces aside)
    assert "".join(block.removeprefix("kernel_cmdline: ").split()) == \
        "".join(LONG_CMDLINE.split())
    assert "\n      option" in block                 # continuation lines indented
    # --json keeps the value whole.
    line = call_cli(["show", "long-cmdline", "--json"], db).summary
    assert line["host"]["kernel_cmdline"] == LONG_CMDLINE
