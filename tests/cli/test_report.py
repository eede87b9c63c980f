"""`irqlab report`: the file, plot files, and the page opened in headless Chromium
(Debian's /usr/bin/chromium): a screenshot is taken, the page reports no script errors,
every image decoded (naturalWidth > 0), and a run named <script>...</script> stays text."""

import io
import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PIL import Image

from tests.cli._report_store import make_store
from tests.conftest import call_cli

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One report of three runs (one with a hostile name), plus PNG and SVG plot files."""
    tmp = tmp_path_factory.mktemp("rep")
    db = make_store(tmp / "r.duckdb")
    out = tmp / "out"
    out.mkdir()          # -o's directory must exist (issue 47: a missing one is refused)
    res = call_cli(["report", "base", "double", "3", "-o", str(out / "report.html"),
                   "--png", str(out / "png"), "--svg", str(out / "svg"), "--json"], db)
    assert res.code == 0, res.stderr
    return out, res.lines[0]


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (./setup.sh installs it)")
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    profile.mkdir()
    return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=90)


@pytest.mark.slow
def test_report_and_plot_files_are_written(built):
    out, info = built
    # The overlay, then per run: histogram, exceedance, over time, heat map.
    assert info["type"] == "report" and info["plots"] == 1 + 3 * 4
    assert info["runs"] == [1, 2, 3]
    pngs = sorted((out / "png").glob("*.png"))
    svgs = sorted((out / "svg").glob("*.svg"))
    assert [p.stem for p in pngs] == [p.stem for p in svgs] and len(pngs) == info["plots"]
    for p in pngs:
        img = Image.open(p)
        img.load()
        assert img.size in ((800, 420), (1000, 440))
    for s in svgs:
        assert ET.parse(s).getroot().tag.endswith("svg")
    assert info["bytes"] == (out / "report.html").stat().st_size


@pytest.mark.slow
def test_report_opens_in_chromium_without_errors_and_images_load(built, tmp_path):
    out, _ = built
    url = (out / "report.html").resolve().as_uri()
    # --virtual-time-budget lets the load event (the page's self-check) run before the dump.
    # --enable-logging=stderr copies the page's console (errors, CSP violations) to stderr.
    dom = _chromium(tmp_path, "--enable-logging=stderr", "--v=0",
                    "--virtual-time-budget=10000", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    root = re.search(r"<html[^>]*>", dom.stdout).group(0)
    total = int(re.search(r'data-images-total="(\d+)"', root).group(1))
    ok = int(re.search(r'data-images-ok="(\d+)"', root).group(1))
    errors = json.loads(re.search(r"data-errors=\"([^\"]*)\"", root).group(1)
                        .replace("&quot;", '"'))
    assert total == 1 + 3 * 4 and ok == total and errors == []   # with the heat maps
    assert 'data-broken="yes"' not in dom.stdout
    # The console saw nothing: no script error, no fetch blocked by the page's CSP.
    console = [ln for ln in dom.stderr.splitlines() if ":CONSOLE" in ln]
    assert console == []
    # The hostile run name is text in the live DOM, not an element.
    assert dom.stdout.count("<script") == 1
    assert "Run 3 &lt;script&gt;alert(1)&lt;/script&gt;" in dom.stdout


@pytest.mark.slow
def test_chromium_screenshot_shows_the_page(built, tmp_path):
    out, _ = built
    shot = tmp_path / "shot.png"
    res = _chromium(tmp_path, "--window-size=1200,1600", f"--screenshot={shot}",
                    (out / "report.html").resolve().as_uri())
    assert res.returncode == 0 and shot.exists(), res.stderr[-2000:]
    img = Image.open(io.BytesIO(shot.read_bytes()))
    img.load()
    assert img.size == (1200, 1600)
    # Not a blank page: text, tables and a plot give many distinct colours.
    assert len(img.convert("RGB").getcolors(maxcolors=1 << 20)) > 50


def test_report_needs_an_output_and_a_known_run(tmp_path):
    db = make_store(tmp_path / "r.duckdb")
    res = call_cli(["report", "base"], db)
    assert res.code == 2 and "-o report.html" in res.stderr
    res = call_cli(["report", "nope", "-o", str(tmp_path / "x.html")], db)
    assert res.code == 2 and not (tmp_path / "x.html").exists()
