#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""LAVA glue for irqlab (docs/boards.md, "LAVA").

    lava_import.py render TEMPLATE KEY=VALUE... > job.yaml
        fill the @KEY@ placeholders of a job template (lava/jobs/); every one must be given
    lava_import.py import LOG --job ID --device-type T [--board NAME] [--db PATH]
        store the probe's console frames of a finished job with ``irqlab import
        irqlab-console``, tagged lava_job, device_type and board

LOG is the job's log as LAVA keeps it (``lavacli jobs logs --raw ID > LOG``, or
``/api/v0.2/jobs/ID/logs/``): YAML lines ``- {"dt": ..., "lvl": ..., "msg": ...}``. The
board's console is in the ``target`` lines, the probe's frames among them; they are
written to a console log and imported like a log saved from a desk board. The import
runs where the store is (the lab's CI host), not on the board: a board running the bare
probe has no shell, and the store is shared by the whole lab.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

_PLACEHOLDER = re.compile(r"@([A-Z][A-Z0-9_]*)@")


def render(template: str, values: dict[str, str]) -> str:
    """``template`` with every @KEY@ replaced; ValueError naming those not given."""
    missing = sorted(set(_PLACEHOLDER.findall(template)) - set(values))
    if missing:
        raise ValueError(f"no value for {', '.join(missing)}: give KEY=VALUE for each")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def console_text(log_text: str) -> str:
    """The board's console (``target`` lines) of a LAVA job log, one line each."""
    entries = yaml.load(log_text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    lines = [e["msg"] for e in entries or []
             if isinstance(e, dict) and e.get("lvl") == "target"
             and isinstance(e.get("msg"), str)]
    return "".join(line + "\n" for line in lines)


def import_log(log: Path, job: str, device_type: str, board: str | None,
               db: Path | None) -> int:
    """Run ``irqlab import irqlab-console`` on the job's console; its exit code."""
    text = console_text(log.read_text(errors="replace"))
    if "~IQ" not in text:
        print(f"{log}: no irqlab frame in the job's console output (was the probe "
              f"booted with sink=console?)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="irqlab-lava-") as tmp:
        console = Path(tmp) / f"lava-{job}.log"
        console.write_text(text)
        argv = [sys.executable, "-m", "irqlab.cli.main", "import", "irqlab-console",
                str(console), "--name", f"lava-{job}", "--tag", f"lava_job={job}",
                "--tag", f"device_type={device_type}"]
        if board:
            argv += ["--tag", f"board={board}"]
        if db is not None:
            argv += ["--db", str(db)]
        return subprocess.run(argv).returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="lava_import.py",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("render", help="fill a job template's @KEY@ placeholders")
    r.add_argument("template", type=Path)
    r.add_argument("values", nargs="*", metavar="KEY=VALUE")
    i = sub.add_parser("import", help="store a finished job's samples with irqlab")
    i.add_argument("log", type=Path, help="the job log (lavacli jobs logs --raw ID)")
    i.add_argument("--job", required=True, help="LAVA job id")
    i.add_argument("--device-type", required=True)
    i.add_argument("--board", help="the device's hostname in the lab")
    i.add_argument("--db", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "render":
        bad = [v for v in args.values if "=" not in v]
        if bad:
            ap.error(f"expected KEY=VALUE, got {bad[0]!r}")
        try:
            sys.stdout.write(render(args.template.read_text(),
                                    dict(v.split("=", 1) for v in args.values)))
        except (OSError, ValueError) as exc:
            print(f"lava_import.py render: {exc}", file=sys.stderr)
            return 2
        return 0
    return import_log(args.log, args.job, args.device_type, args.board, args.db)


if __name__ == "__main__":
    sys.exit(main())
