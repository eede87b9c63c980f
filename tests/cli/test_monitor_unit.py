"""contrib/irqlab-monitor.service (issue 33): its ExecStart is an `irqlab monitor` line
this parser takes, and `systemd-analyze verify` finds nothing to say about the unit
(skipped where systemd-analyze is not installed)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from irqlab.cli.main import build_parser

UNIT = Path(__file__).resolve().parents[2] / "contrib" / "irqlab-monitor.service"
INSTALLED_AT = "/usr/local/bin/irqlab"


def _exec_start() -> list[str]:
    (line,) = [x for x in UNIT.read_text().splitlines() if x.startswith("ExecStart=")]
    return shlex.split(line[len("ExecStart="):])


def test_exec_start_is_a_monitor_line_irqlab_takes():
    argv = _exec_start()
    assert argv[0] == INSTALLED_AT and argv[1] == "monitor"
    args = build_parser("monitor").parse_args(argv[1:])
    assert args.metrics == "127.0.0.1:9464" and args.keep_raw == 86_400.0
    assert str(args.db) == "/var/lib/irqlab/monitor.duckdb"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed on this host")
def test_systemd_analyze_verify_has_nothing_to_say(tmp_path):
    # The unit as installed here: ExecStart names this checkout's irqlab (verify checks
    # that it is executable). --man=no: the man page is installed by setup.sh, not here.
    irqlab = Path(sys.executable).with_name("irqlab")
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace(INSTALLED_AT, str(irqlab)))
    proc = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr.strip() == "", proc.stderr
