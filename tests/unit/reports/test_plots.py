"""Plots rendered by matplotlib (Agg) and checked: decodable PNGs of sane size, the
threshold line and the p99.9 / p99.99 markers present, SVG output, hostile names."""

import io

import pytest
from PIL import Image

from irqlab.reports.data import load_run, load_runs
from irqlab.reports.plots import (exceedance_plot, histogram_plot, over_time_plot,
                                  overlay_plot, run_plots, threshold_artists)
from irqlab.reports.select import select_runs


def _png_size(data: bytes) -> tuple[int, int]:
    img = Image.open(io.BytesIO(data))
    img.load()   # decodes the whole image, not just the header
    assert img.format == "PNG"
    return img.size


@pytest.mark.slow
def test_every_run_plot_renders_with_the_threshold_marked(store, tmp_path):
    run = load_run(store, store.resolve("logn-a"))
    plots = run_plots(run)
    assert [p.name for p in plots] == ["run6-histogram", "run6-exceedance", "run6-over-time",
                                       "run6-heat-map"]
    for plot in plots:
        lines = list(threshold_artists(plot.figure))
        assert len(lines) == 1 and lines[0].get_label() == "threshold 30.0 us"
        path = tmp_path / f"{plot.name}.png"
        path.write_bytes(plot.png())
        assert 10_000 < path.stat().st_size < 1_000_000
        assert _png_size(path.read_bytes()) == (800, 420)


def test_threshold_line_sits_at_the_threshold(store):
    run = load_run(store, store.resolve("elsewhere"))   # threshold 5 us
    hist = histogram_plot(run)
    (line,) = threshold_artists(hist.figure)
    assert list(line.get_xdata()) == [5000, 5000]
    (hline,) = threshold_artists(over_time_plot(run).figure)
    assert list(hline.get_ydata()) == [5000, 5000]


def test_exceedance_marks_p999_and_p9999_at_their_values(store):
    run = load_run(store, store.resolve("base"))   # ramp 1..10000: p99.9 9990, p99.99 9999
    fig = exceedance_plot(run).figure
    marks = {ln.get_gid(): (ln.get_xdata()[0], ln.get_ydata()[0])
             for ln in fig.axes[0].get_lines() if (ln.get_gid() or "").startswith("marker")}
    assert marks == {"marker-p99.9": (9990, 1e-3), "marker-p99.99": (9999, 1e-4)}
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["p99.9 = 9.99 us", "p99.99 = 10.0 us"]


def test_over_time_shows_every_sample_above_threshold(store):
    run = load_run(store, store.resolve("elsewhere"))   # 5000 samples above 5 us
    fig = over_time_plot(run).figure
    (pts,) = [ln for ln in fig.axes[0].get_lines() if ln.get_gid() == "above-threshold"]
    assert len(pts.get_xdata()) == 5000 and min(pts.get_ydata()) > 5000
    assert any(c.get_gid() == "band" for c in fig.axes[0].collections)


def test_summary_only_run_still_plots_and_overlay_has_a_curve_per_run(store):
    runs = load_runs(store, select_runs(store, ["base", "double", "summary-only"]))
    assert len(run_plots(runs[2])) == 2   # no raw samples: no histogram of samples...
    ov = overlay_plot(runs)
    cdf_ax, exc_ax = ov.figure.axes
    assert [ln.get_label() for ln in exc_ax.get_lines()][:3] == [
        "#1 base", "#2 double", "#4 summary-only"]
    assert exc_ax.get_yscale() == "log" and exc_ax.get_xscale() == "log"
    assert _png_size(ov.png()) == (1000, 440)


def test_svg_output_and_hostile_run_names_render_literally(store):
    run = load_run(store, store.resolve("5"))
    plot = histogram_plot(run)
    assert "<script>alert(1)</script>" in plot.figure.axes[0].get_title()
    svg = plot.svg()
    assert svg.lstrip().startswith("<?xml") and "<script>alert" not in svg
