"""Disk I/O with page-cache drops (seed 004's `drop_caches; bonnie` loop): fio.

fio does random read/write on scratch files; a thread writes /proc/sys/vm/drop_caches every
``drop`` so reads keep going to the disk instead of the page cache. Scratch files live under
irqlab's state directory (on disk; /tmp may be RAM) and are removed at stop.
"""

from __future__ import annotations

import threading
from pathlib import Path

from irqlab.journal import journal_dir
from irqlab.knobs.values import parse_duration, parse_int, parse_size
from irqlab.loads.base import Load
from irqlab.runner.scratch import ScratchDir

DROP_CACHES = "/proc/sys/vm/drop_caches"


class IoLoad(Load):
    kind = "io"
    tool = "fio"
    package = "fio"
    # fio exits 128 when its jobs are ended by our SIGTERM (seen with fio 3.33).
    ok_exit_codes = Load.ok_exit_codes + (128,)
    params = {"workers": "fio jobs (default 1)", "size": "file size per job (default 64M)",
              "drop": "drop the page cache every DUR, 0 = never (default 1s)",
              "dir": "scratch directory (default irqlab's state directory)"}

    def configure(self, params: dict[str, str]) -> None:
        self.workers = parse_int(params.get("workers", "1"), 1, 64, "workers")
        self.size = parse_size(params.get("size", "64M"))
        self.drop_ns = parse_duration(params.get("drop", "1s"))
        self.base = Path(params["dir"]) if "dir" in params else journal_dir().parent / "io"
        self.scratch: Path | None = None
        self._scratch: ScratchDir | None = None
        self._halt = threading.Event()
        self._dropper: threading.Thread | None = None
        self.drops = 0

    def prepare(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        # Journalled (irqlab.runner.scratch): fio's files go with it after a kill -9 too.
        self._scratch = ScratchDir("irqlab-io-", base=self.base)
        self.scratch = Path(self._scratch.name)
        if self.drop_ns:
            self._dropper = threading.Thread(target=self._drop_loop, daemon=True)
            self._dropper.start()

    def _drop_loop(self) -> None:
        while not self._halt.wait(self.drop_ns / 1e9):
            try:
                with open(DROP_CACHES, "w") as f:
                    f.write("1")
                self.drops += 1
            except OSError as exc:
                self.details["drop_caches"] = (f"not applicable here: {DROP_CACHES}: "
                                               f"{exc.strerror}")
                return

    def command(self) -> list[str]:
        return ["fio", "--name=irqlab-io", f"--directory={self.scratch}", "--rw=randrw",
                "--bs=4k", f"--size={self.size}", f"--numjobs={self.workers}",
                "--ioengine=psync", "--time_based", "--runtime=24h", "--group_reporting",
                "--output=/dev/null"]

    def cleanup(self) -> None:
        self._halt.set()
        if self._dropper is not None:
            self._dropper.join(5)
        self.details.setdefault("drop_caches", f"{self.drops} drops")
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None
