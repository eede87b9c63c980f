"""LAVA's side of a board run, end to end but for the lab: the x86-64 probe's real console
(sink=console, QEMU TCG) wrapped as a LAVA job log, then ``lava/lava_import.py import``
stores exactly its samples, tagged with the job, the device type and the board."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from irqlab.runner.machines import MACHINES, X86_EXIT_DONE
from irqlab.runner.qemu import GuestConfig
from irqlab.store import Store
from tests.integration._helpers import run_to_end

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU

LAVA = Path(__file__).resolve().parents[2] / "lava"


def test_job_log_is_imported_with_its_tags(probe_built, tmp_path):
    subprocess.run(["make", "-s", "-C", str(MACHINES["x86_64"].probe.parents[2]),
                    "ARCH=x86_64"], check=True)
    guest = run_to_end(GuestConfig(period_ns=1_000_000, samples=500, sink="console"),
                       X86_EXIT_DONE, "irqlab-test-lava", timeout_s=60.0)
    try:
        console = guest.serial()
    finally:
        guest.stop()
    entries = [{"dt": "2026-11-23T20:00:00.000000", "lvl": "info",
                "msg": "start: 2.4 uboot-commands (timeout 00:03:00) [common]"}]
    entries += [{"dt": "2026-11-23T20:00:01.000000", "lvl": "target", "msg": line}
                for line in console.splitlines()]
    entries.append({"dt": "2026-11-23T20:00:02.000000", "lvl": "results",
                    "msg": {"definition": "0_irqlab-latency", "case": "samples",
                            "result": "pass", "measurement": 500}})
    log = tmp_path / "job-4711.log"
    log.write_text("".join(f"- {yaml.safe_dump(e, default_flow_style=True, width=1 << 16)}"
                           for e in entries))
    db = tmp_path / "db.duckdb"
    res = subprocess.run([sys.executable, str(LAVA / "lava_import.py"), "import", str(log),
                          "--job", "4711", "--device-type", "qemu-x86_64", "--board",
                          "qemu-01", "--db", str(db)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr + res.stdout
    with Store(db, read_only=True) as st:
        run = next(r for r in st.runs() if r.name == "lava-4711")
        assert st.sample_count(run.run_id) == 500
    assert run.summary["lost"] == 0 and run.summary["samples"] == 500
    tags = run.tags
    assert {"lava_job": "4711", "device_type": "qemu-x86_64",
            "board": "qemu-01"}.items() <= tags.items(), tags
