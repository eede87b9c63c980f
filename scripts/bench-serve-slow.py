#!/usr/bin/env python3
"""Issue 47 figure: how long `irqlab serve`'s `/` takes while 30 slow requests are in
flight (a real server on 127.0.0.1, real HTTP clients), against `/` alone in the same
run. Usage: scripts/bench-serve-slow.py [PATH?QUERY] (default: /api/compare?runs= and
16,000 characters). Prints one line; a figure, never a test."""

from __future__ import annotations

import http.client
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.cli._report_store import make_store  # noqa: E402  (the suite's 4-run store)

IN_FLIGHT = 30


def _get(port: int, path: str) -> tuple[int, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    start = time.monotonic()
    conn.request("GET", path)
    reply = conn.getresponse()
    reply.read()
    conn.close()
    return reply.status, time.monotonic() - start


def main() -> None:
    slow = sys.argv[1] if len(sys.argv) > 1 else "/api/compare?runs=" + "A" * 16_000
    with tempfile.TemporaryDirectory() as tmp:
        db = make_store(Path(tmp) / "serve.duckdb")
        proc = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "serve", "--db",
                                 str(db), "--bind", "127.0.0.1:0"], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            url = proc.stdout.readline().strip().split()[-1]
            port = int(url.rsplit(":", 1)[1].strip("/"))
            alone = [_get(port, "/")[1] for _ in range(5)]
            results: list[tuple[int, float]] = []
            threads = [threading.Thread(target=lambda: results.append(_get(port, slow)))
                       for _ in range(IN_FLIGHT)]
            start = time.monotonic()
            for t in threads:
                t.start()
            during: list[float] = []
            while any(t.is_alive() for t in threads):
                during.append(_get(port, "/")[1])
                time.sleep(0.05)
            took = time.monotonic() - start
        finally:
            proc.terminate()
            proc.wait(30)
    print(f"{slow[:50]}{'…' if len(slow) > 50 else ''} x{IN_FLIGHT}: / alone median "
          f"{statistics.median(alone) * 1000:.0f} ms; / during: {len(during)} requests, "
          f"median {statistics.median(during) * 1000:.0f} ms, max {max(during) * 1000:.0f} "
          f"ms; slow ones {sorted({s for s, _ in results})} in {took:.2f} s")


if __name__ == "__main__":
    main()
