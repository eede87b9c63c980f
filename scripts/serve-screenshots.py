#!/usr/bin/env python3
"""Screenshots of every page of `irqlab serve` in the real headless Chromium, for
docs/serve.md (docs/img/serve-*.png). The pages of a store of real runs (e.g. a few
`irqlab run --target native` runs, a --repeat series and a run with a load):

    .venv/bin/python scripts/serve-screenshots.py --db STORE --run ID --compare SEL,SEL \\
        --series SEL [--out docs/img]

Each page is shot at 1280 px wide, as tall as it is (at most 2400 px), and stored as a
palette PNG (64 colours) so each file stays under 150 KB.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/ helpers

from PIL import Image  # noqa: E402  (matplotlib's dependency)

from tests.integration._browser import chromium, start_server, stop, wait  # noqa: E402

WIDTH, MAX_HEIGHT, COLOURS = 1280, 2400, 64


def shoot(driver, url: str, out: Path) -> int:
    """Open ``url``, wait for its charts, save the page as a small PNG; its size."""
    driver.set_size(WIDTH, 900)
    driver.get(url)
    wait("the page's charts", lambda: driver.js(
        "return document.readyState === 'complete' && document.querySelectorAll("
        "'[data-chart]').length <= document.querySelectorAll('.uplot').length"),
        timeout=30)
    height = min(MAX_HEIGHT, int(driver.js(
        "return document.documentElement.scrollHeight")))
    driver.set_size(WIDTH, height)
    time.sleep(0.3)
    image = Image.open(io.BytesIO(driver.screenshot())).convert("RGB")
    small = image.quantize(colors=COLOURS, method=Image.Quantize.MEDIANCUT)
    small.save(out, optimize=True)
    return out.stat().st_size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, type=Path)
    ap.add_argument("--run", required=True, help="a run id with per-CPU samples")
    ap.add_argument("--compare", required=True, help="the compare page's selectors")
    ap.add_argument("--series", required=True, help="the trends page's selector")
    ap.add_argument("--series-name", required=True, help="a series id (series page)")
    ap.add_argument("--out", type=Path, default=Path("docs/img"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    server, base = start_server(args.db)
    pages = {"runs": "/", "run": f"/runs/{args.run}",
             "histogram": f"/runs/{args.run}/histogram",
             "compare": f"/compare?runs={args.compare}",
             "series": f"/series/{args.series_name}",
             "trends": f"/trends?series={args.series}&metric=p99",
             "live": f"/runs/{args.run}/live"}
    try:
        with tempfile.TemporaryDirectory() as profile, chromium(Path(profile)) as driver:
            for name, path in pages.items():
                size = shoot(driver, base + path, args.out / f"serve-{name}.png")
                print(f"{args.out}/serve-{name}.png: {size:,} bytes ({path})")
    finally:
        stop(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
