"""The self-contained HTML report: one file, no network, images inline as base64 PNG.

Safety: every text that comes from a run (names, tags, metadata, imported lines, messages)
goes through ``esc`` (html.escape with quotes). A Content-Security-Policy in the page
forbids every network fetch and every script except the report's own (allowed by its
SHA-256 hash), so even a missed escape could not run code or load anything.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import html
import json
from typing import Any, Iterable

from irqlab import __version__
from irqlab.durations import format_latency, format_ns
from irqlab.reports import noise
from irqlab.reports.compare import build_compare, noise_seeds
from irqlab.reports.data import FROM_TEXT, RunData, figures
from irqlab.reports.percpu import NO_PER_CPU, cpu_runs, per_cpu_figures
from irqlab.reports.plots import Plot, _lit, overlay_plot, run_plots
from irqlab.reports.scan import scan_runs
from irqlab.reports.provenance import configuration_lines, host_lines
from irqlab.reports.tables import (HUMAN_COLUMNS, PER_CPU_COLUMNS, cell, differs_lines,
                                   differs_table, noise_lines, notes_lines, per_cpu_cell,
                                   warning_lines)
from irqlab.store.provenance import provenance
from irqlab.stats.fields import REPORT_TABLE, WINDOW_TABLE

MAX_WINDOW_ROWS = 2000

# Marks images that failed to decode and records script errors in the DOM, so a reader
# sees a broken image called out and a headless browser test can read the outcome.
_SELF_CHECK = """
(function () {
  var errors = [];
  window.addEventListener('error', function (e) { errors.push(String(e.message)); });
  window.addEventListener('load', function () {
    var imgs = document.images, ok = 0;
    for (var i = 0; i < imgs.length; i++) {
      if (imgs[i].complete && imgs[i].naturalWidth > 0) { ok++; continue; }
      imgs[i].setAttribute('data-broken', 'yes');
      imgs[i].insertAdjacentText('afterend', ' [image failed to load]');
    }
    var root = document.documentElement;
    root.setAttribute('data-images-total', String(imgs.length));
    root.setAttribute('data-images-ok', String(ok));
    root.setAttribute('data-errors', JSON.stringify(errors));
  });
})();
""".strip()
_SCRIPT_HASH = base64.b64encode(hashlib.sha256(_SELF_CHECK.encode()).digest()).decode()
CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
       f"script-src 'sha256-{_SCRIPT_HASH}'; base-uri 'none'; form-action 'none'")

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1100px;color:#222;
padding:0 1em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.9em}
td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right;vertical-align:top;
white-space:nowrap}
th{background:#f3f3f3}
td.l,th.l{text-align:left}
.meta td{text-align:left;font-family:ui-monospace,monospace}
.meta td+td{white-space:normal;word-break:break-all}
.warn{background:#fff4d6;border-left:4px solid #e0a000;padding:.4em .8em;margin:.5em 0}
img{max-width:100%;height:auto;display:block;margin:.5em 0 1.5em}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.8em;white-space:pre-wrap}
section{border-top:2px solid #ddd;margin-top:2em}
.wide{overflow-x:auto;max-width:100%}
""".strip()


def esc(value: Any) -> str:
    """Any value as HTML text (None as an em dash)."""
    return "—" if value is None else html.escape(str(value), quote=True)


def _img(plot: Plot) -> str:
    data = base64.b64encode(plot.png()).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{esc(plot.title)}" '
            f'data-plot="{esc(plot.name)}"><figcaption>{esc(plot.title)}</figcaption>'
            f'</figure>')


def _table(headers: list[str], rows: Iterable[list[str]], left: int = 1,
           cls: str = "") -> list[str]:
    """A table of already-escaped cells; the first ``left`` columns left-aligned."""
    out = [f'<table class="{cls}"><tr>' + "".join(
        f'<th class="{"l" if i < left else ""}">{h}</th>' for i, h in enumerate(headers))
        + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{c}</td>'
                                    for i, c in enumerate(r)) + "</tr>")
    out.append("</table>")
    return out


def _metadata_rows(run: RunData) -> list[tuple[str, Any]]:
    row, meta = run.row, run.row.metadata
    host, probe = meta.get("host") or {}, meta.get("probe") or {}
    return [
        ("run", f"{row.run_id} {row.name}"), ("status", row.status),
        ("message", row.message), ("started (UTC)", row.started_at),
        ("ended (UTC)", row.ended_at), ("kind / source", f"{row.kind} / {row.source}"),
        ("target / arch", f"{row.target} / {row.arch}"),
        ("accel", f"{row.accel} ({'emulated' if row.emulated else 'hardware-assisted'})"
         if row.emulated is not None else row.accel),
        ("period", format_ns(row.period_ns, "sig3")),
        ("threshold", format_ns(run.threshold_ns, "sig3")),
        ("ticks", f"{row.tick_hz} Hz ({probe.get('tick_method', '—')}), timer "
                  f"{probe.get('timer_mode', '—')}, idle {probe.get('idle', '—')}"),
        ("host", f"{host.get('hostname')} — kernel {host.get('kernel')} — "
                 f"{host.get('cpu_model')} ({host.get('cpus_online')} cpus)"
         + (" — itself virtual" if host.get("host_is_virtual") else "")),
        ("qemu", meta.get("qemu_version")), ("probe build", probe.get("build_id")),
        ("probe cmdline", meta.get("probe_cmdline")),
        ("qemu command", " ".join(meta.get("qemu_argv") or []) or None),
        ("tags", ", ".join(f"{k}={v}" for k, v in sorted(row.tags.items())) or None),
        ("suite / cell", f"{row.suite} {json.dumps(row.cell) if row.cell else ''}"
         if row.suite else None),
    ]


def _summary_rows(run: RunData) -> list[list[str]]:
    f = figures(run)
    s = run.row.summary or {}
    pct = f.get("above_threshold_pct")
    rows: list[tuple[str, Any]] = []
    for c in REPORT_TABLE:
        # The report's figures (exact from the raw samples when stored) before the
        # stored summary's.
        val = f.get(c.key) if c.key in f else s.get(c.key)
        if c.field.unit == "ns":
            val = format_latency(val)
        elif c.key == "above_threshold" and pct is not None:
            val = f"{val} ({pct:.3g}%)"
        rows.append((c.heading, val))
    rows.append(("percentiles", FROM_TEXT[f["percentiles_from"]]))
    return [[esc(label), esc(val)] for label, val in rows]


def _window_cell(w: dict[str, Any], key: str, unit: str) -> str:
    return esc(format_latency(w[key]) if unit == "ns" else w[key])


def _windows_table(run: RunData) -> list[str]:
    wins = run.windows
    if not wins:
        return ["<p>No windows stored.</p>"]
    heads = ["#", "start"] + [c.heading for c in WINDOW_TABLE]
    rows = [[esc(w["index"]), esc(f"{w['start_s']:g} s")]
            + [_window_cell(w, c.key, c.field.unit) for c in WINDOW_TABLE]
            for w in wins[:MAX_WINDOW_ROWS]]
    out = _table(heads, rows, left=0)
    if len(wins) > MAX_WINDOW_ROWS:
        out.append(f"<p>{len(wins) - MAX_WINDOW_ROWS} more windows not shown; "
                   f"`irqlab show {run.run_id} --json` lists them all.</p>")
    return out


def _explain_section(js: dict[str, Any] | str) -> list[str]:
    """Where the time goes: the explain object's stage steps and top culprits (or why the
    run's capture could not be explained)."""
    out = ["<h3>Where the time goes</h3>"]
    if isinstance(js, str):
        return out + [f'<p class="warn">Not explained: {esc(js)}</p>']
    bound = format_ns((js.get("clock") or {}).get("error_bound_ns"), "sig3")
    explained = len(js["samples"]) - js["incomplete"] - js["not_traced"]
    out.append(f"<p>From the run's {esc(js.get('source', 'host trace'))} capture "
               f"(<code>irqlab explain {js['run_id']}</code>): {esc(js['selected_by'])}, "
               f"{explained} samples explained, {js['incomplete']} incomplete, "
               f"{js['not_traced']} not traced; clock bound "
               f"{esc(bound)}.</p>")
    steps = js.get("stage_summary") or []
    if steps:
        out += _table(["from", "to", "samples", "p50", "p90", "p99", "max"], (
            [esc(st["from"]), esc(st["to"]), str(st["samples"])]
            + [esc(format_ns(st[k], "sig3"))
               for k in ("p50_ns", "p90_ns", "p99_ns", "max_ns")]
            for st in steps), left=2)
    else:
        out.append("<p>No stage of the path was traced for these samples.</p>")
    for stage, why in (js.get("stages_not_traced") or {}).items():
        out.append(f"<p>Not traced: {esc(stage)}: {esc(why)}</p>")
    if js["culprits"]:
        out += _table(["cause", "total", "worst", "samples"], (
            [esc(c["cause"]), esc(format_ns(c["total_ns"], "sig3")),
             esc(format_ns(c["worst_ns"], "sig3")), str(c["samples"])]
            for c in js["culprits"][:10]))
    return out


def _per_cpu_section(run: RunData, threshold_ns: int | None
                     ) -> tuple[list[str], Plot | None]:
    """report --per-cpu: the run's figures CPU by CPU (irqlab.reports.percpu), the compare
    table's columns (tables.PER_CPU_COLUMNS), and its CPUs' CDF and exceedance curves
    overlaid (runs whose samples are read into memory)."""
    out = ["<h3>Per CPU</h3>"]
    figs = per_cpu_figures(run, threshold_ns)
    if not figs:
        return out + [f"<p>{esc(NO_PER_CPU)}.</p>"], None
    rows = [{"run_id": run.run_id, "name": run.row.name, **f} for f in figs.values()]
    heads = ["cpu"] + [h for h, _, _ in PER_CPU_COLUMNS[1:]]
    out += _table([esc(h) for h in heads], (
        [esc(r["cpu"])] + [esc(per_cpu_cell(r, key, kind))
                           for _, key, kind in PER_CPU_COLUMNS[1:]] for r in rows),
        left=1, cls="per-cpu")
    subs = [sub for _cpu, sub in cpu_runs(run) if sub.stored is None and sub.has_raw]
    plot = overlay_plot(subs) if len(subs) > 1 else None
    if plot is None:
        return out, None
    plot.figure.suptitle(_lit(f"{run.label}: {len(subs)} CPUs overlaid"))
    return out, Plot(f"run{run.run_id}-per-cpu",
                     f"Run {run.run_id}: CDF and exceedance per CPU", plot.figure)


def _facts_table(lines: list[str]) -> list[str]:
    """``fact: value`` lines (irqlab show's blocks) as a two-column table."""
    return _table(["fact", "value"], ([esc(k), esc(v)] for k, v in
                                      (line.split(": ", 1) for line in lines)),
                  left=2, cls="meta")


def _host_section(runs: list[RunData]) -> list[str]:
    """The host facts once for a report of several runs: the facts every run shares
    (those that differ are in the comparison's "what differs")."""
    per_run = [host_lines(provenance(r.row)) for r in runs]
    shared = [line for line in per_run[0] if all(line in lines for lines in per_run[1:])]
    out = ["<section><h2>Host</h2>",
           f"<p>The facts all {len(runs)} runs share; those that differ are under "
           f"\u201cWhat differs\u201d.</p>"]
    return out + _facts_table(shared) + ["</section>"]


def _run_section(run: RunData, plots: list[Plot],
                 explained: dict[str, Any] | str | None = None,
                 per_cpu: bool = False, threshold_ns: int | None = None,
                 host: bool = True) -> list[str]:
    """One run's section; without ``host`` its host table is left out (a report of
    several runs shows the host facts once, and what differs between the runs)."""
    out = [f'<section id="run-{run.run_id}"><h2>Run {esc(run.row.run_id)} '
           f'{esc(run.row.name)}</h2>']
    if run.row.emulated:
        out.append(f'<p class="warn">EMULATED: these latencies come from {esc(run.row.accel)}; '
                   f'they show the pipeline works, not what hardware-assisted '
                   f'virtualisation or bare metal would give.</p>')
    out.append("<h3>Metadata</h3>")
    out += _table(["field", "value"], ([esc(k), esc(v)] for k, v in _metadata_rows(run)),
                  left=2, cls="meta")
    # How the run was made (docs/formats.md §4a), as `irqlab show` prints it.
    record = provenance(run.row)
    blocks = [("Configuration", configuration_lines(record))]
    if host:
        blocks.append(("Host", host_lines(record)))
    for title, lines in blocks:
        out.append(f"<h3>{title}</h3>")
        out += _facts_table(lines)
    out.append("<h3>Summary</h3>")
    out += _table(["statistic", "value"], _summary_rows(run))
    if per_cpu:
        section, cpu_plot = _per_cpu_section(run, threshold_ns)
        out += section
        if cpu_plot:
            plots.append(cpu_plot)       # shown under Plots, written by --png/--svg
    if explained is not None:
        out += _explain_section(explained)
    out += _tail_section(run)
    out.append("<h3>Plots</h3>")
    out += [_img(p) for p in plots] or ["<p>No data to plot.</p>"]
    out.append("<h3>Windows</h3>")
    out += _windows_table(run)
    out.append("<details><summary>All stored metadata and parameters (JSON)</summary><pre>"
               + esc(json.dumps({"params": run.row.params, "metadata": run.row.metadata},
                                indent=1, default=str)) + "</pre></details></section>")
    return out


def _tail_section(run: RunData) -> list[str]:
    """The tail beyond the data (irqlab tail): the extreme-value fit's checks, the
    exceedance probabilities and pWCET, or its refusal; nothing for a run without raw
    samples or with too few for a fit (issue 45)."""
    from irqlab.reports.tail import build_tail, run_count, tail_lines
    from irqlab.stats.evt import CANDIDATE_FRACTIONS, MIN_EXCEEDANCES

    if not run.has_raw:
        return []
    if run_count(run) < MIN_EXCEEDANCES / CANDIDATE_FRACTIONS[0]:
        return []
    model = build_tail([run])
    return ['<h3 id="tail">Tail (extreme-value fit, as <code>irqlab tail</code>)</h3>',
            '<pre class="tail">' + esc("\n".join(tail_lines(model))) + "</pre>"]


def _compare_section(runs: list[RunData],
                     threshold_ns: int | None) -> tuple[list[str], Plot | None]:
    model = build_compare(runs, threshold_ns)
    out = ["<section><h2>Comparison</h2>", '<div class="wide">']
    # The terminal's columns (the noise verdict in a word or two; its intervals follow
    # as lines): the full CSV columns overflowed the page and clipped the verdict.
    out += _table([esc(h) for h, _, _ in HUMAN_COLUMNS],
                  ([esc(cell(r, key, kind)) for _, key, kind in HUMAN_COLUMNS]
                   for r in model["rows"]), cls="compare")
    out.append("</div>")
    out += ["<ul>"] + [f"<li>{esc(x)}</li>" for x in notes_lines(model) + noise_lines(model)] \
        + ["</ul>"]
    heads, rows = differs_table(model)
    if rows:
        out.append(f"<h3>What differs ({len(rows)})</h3>")
        out.append('<div class="wide">')
        out += _table(["fact"] + [esc(h) for h in heads],
                      ([esc(c) for c in r] for r in rows), left=len(heads) + 1,
                      cls="meta")
        out.append("</div>")
    else:
        out += [f'<p>{esc(x)}</p>' for x in differs_lines(model)]
    out += [f'<p class="warn">{esc(x)}</p>' for x in warning_lines(model["warnings"])]
    overlay = overlay_plot(runs)
    if overlay:
        out.append(_img(overlay))
    out.append("</section>")
    return out, overlay


def build_report(runs: list[RunData], threshold_ns: int | None = None,
                 title: str | None = None,
                 explained: dict[int, dict[str, Any] | str] | None = None,
                 per_cpu: bool = False) -> tuple[str, list[Plot]]:
    """The HTML text and every plot in it (for --png/--svg); ``explained``: per run id, its
    explain object (or why it has none) for the runs recorded with a capture; with
    ``per_cpu`` each run's section has a per-CPU table."""
    explained = explained or {}
    plots: list[Plot] = []
    body: list[str] = []
    # Runs kept in the store are read once for the comparison, the tables and the plots.
    scan_runs(runs, {threshold_ns, None},
              noise_seeds(runs, noise.DEFAULT_SEED) if len(runs) > 1 else None, plots=True,
              tail=True)
    if len(runs) > 1:
        section, overlay = _compare_section(runs, threshold_ns)
        body += section + _host_section(runs)
        plots += [overlay] if overlay else []
    for run in runs:
        rp = run_plots(run)
        body += _run_section(run, rp, explained.get(run.run_id), per_cpu, threshold_ns,
                             host=len(runs) == 1)
        plots += rp                     # with the per-CPU plot _run_section added
    heading = title or "irqlab report: " + ", ".join(r.label for r in runs)
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(heading)}</title><style>{_STYLE}</style>",
        f"<script>{_SELF_CHECK}</script></head><body>",
        f"<h1>{esc(heading)}</h1>",
        f"<p>Generated {esc(now)} by irqlab {esc(__version__)} from {len(runs)} "
        f"run{'s' if len(runs) != 1 else ''}.</p>",
    ]
    return "\n".join(head + body + ["</body></html>", ""]), plots
