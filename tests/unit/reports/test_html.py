"""The HTML report's content and safety (the browser test is in tests/cli/test_report.py)."""

import re

import pytest

from irqlab.reports.data import load_runs
from irqlab.reports.html import CSP, build_report
from irqlab.reports.select import select_runs

# Each test here takes seconds (a measured or reported run as its fixture): out of the
# quick set (./run-tests.sh --quick), in the whole suite.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report(report_db):
    """One report of a hostile run, the baseline and a run from elsewhere (built once:
    rendering the plots is most of the cost)."""
    from irqlab.store import Store
    with Store(report_db, read_only=True) as st:
        runs = load_runs(st, select_runs(st, ["base", "5", "elsewhere"]))
    return build_report(runs, title="T & <T>")


@pytest.mark.slow
def test_run_text_is_escaped_everywhere_and_nothing_is_fetched(report):
    text, plots = report
    assert "<script>alert" not in text and "<img src=x" not in text
    assert "</pre><script>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;img src=x onerror=alert(2)&gt;" in text
    assert "alert(3)" in text   # the imported line is shown, escaped
    # Only our own script and only data: images; no URL anywhere a browser would fetch.
    assert text.count("<script>") == 1 and CSP in text
    srcs = re.findall(r'(?:src|href)="([^"]*)"', text)
    # The overlay, then per run: histogram, exceedance, over time, heat map.
    assert len(srcs) == len(plots) == 1 + 3 * 4
    assert all(s.startswith("data:image/png;base64,") for s in srcs)


def test_sections_metadata_windows_and_comparison(report):
    text, _ = report
    assert "<title>T &amp; &lt;T&gt;</title>" in text
    for part in ("<h2>Comparison</h2>", "<h2>Run 1 base</h2>", "<h3>Windows</h3>",
                 "<h3>What differs (",
                 '<td class="l">host.hostname</td><td class="l">h1</td><td class="l">h1</td>'
                 '<td class="l">h2</td>', "EMULATED",
                 "kernel 6.6", "calibrated-pit", "<h3>Configuration</h3>", "<h2>Host</h2>",
                 '<td class="l">clocksource</td><td class="l">unknown</td>',
                 '<td class="l">period</td>', "Overlaid CDF and exceedance curves"):
        assert part in text, part
