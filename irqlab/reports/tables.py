"""Formatters of the compare model: cells, markdown, csv and json. They return lines or
objects; the CLI's renderers decide where they go."""

from __future__ import annotations

import csv
import io
from typing import Any

from irqlab.durations import format_latency, format_ns
from irqlab.reports import noise
from irqlab.reports.compare import COMPARE_VERSION
from irqlab.store.provenance import differs_text, fact_text
from irqlab.humanize import format_count, format_ratio
from irqlab.stats.fields import COMPARE_TABLE, METRICS, RATIO_FIELDS


def _figure_columns(human: bool) -> list[tuple[str, str, str]]:
    """The summary figures of the compare table (irqlab.stats.fields.COMPARE_TABLE)."""
    def kind(unit: str, key: str) -> str:
        if unit == "ns":
            return "ns"
        # A terminal shows the above-threshold count and its % in one cell.
        return "above" if human and key == "above_threshold" else "int"
    return [(c.heading, c.key, kind(c.field.unit, c.key)) for c in COMPARE_TABLE]


# Each compared percentile divided by the baseline's: (header, row key, cell kind).
RATIO_COLUMNS: list[tuple[str, str, str]] = [
    (f"{f.label} ×", f"{f.stem}_ratio", "ratio") for f in RATIO_FIELDS]
# (header, row key, cell kind) of the compare table, in order.
COLUMNS: list[tuple[str, str, str]] = [
    ("run", "run", "run"), *_figure_columns(human=False),
    ("above %", "above_threshold_pct", "pct"), *RATIO_COLUMNS,
    ("noise", "noise", "noise"), ("from", "percentiles_from", "str"),
]
# A narrower set for terminals: above-threshold count and % in one cell, the noise verdict
# only (its intervals follow the table as lines), percentile provenance in the notes.
HUMAN_COLUMNS: list[tuple[str, str, str]] = [
    ("run", "run", "run"), *_figure_columns(human=True), *RATIO_COLUMNS,
    ("noise", "noise", "verdict"),
]
CSV_FIELDS = (["run_id", "name", "status", "accel", "emulated"]
              + [c.key for c in COMPARE_TABLE]
              + ["above_threshold_pct", "threshold_ns"]
              + [key for _h, key, _k in RATIO_COLUMNS]
              + ["percentiles_from", "noise_test"]
              + [f"noise_{f.stem}_{part}" for f in RATIO_FIELDS
                 for part in ("ci_low", "ci_high", "p")]
              + ["beyond_noise", "group", "series", "noise_verdict"])
# The noise test names its quantiles by label ("p99.9"); csv columns use the key stem.
_STEM_OF_LABEL = {f.label: f.stem for f in RATIO_FIELDS}


def fmt_p(p: float | None, name: str = "p") -> str:
    if p is None:
        return f"{name} n/a"
    return f"{name}<0.001" if p < 0.001 else f"{name}={p:.2g}"


def _tested(nz: dict[str, Any] | None) -> bool:
    """A noise object with results (not n/a, not the baseline's None)."""
    return bool(nz) and nz["test"] != "n/a" and bool(nz.get("results"))


def noise_cell(row: dict[str, Any]) -> str:
    """Short verdict for the table's noise column."""
    nz = row.get("noise")
    if row.get("baseline"):
        return "baseline"
    if row.get("group") == 0:
        return "baseline group"
    if not _tested(nz):
        return "n/a"
    assert nz is not None
    text = nz["verdict"]
    if nz["test"] == noise.TEST_SINGLE:
        return f"{text} (single runs)"
    worst = min(nz["results"], key=lambda r: 2.0 if r["p_value"] is None else r["p_value"])
    if worst.get("p_adjusted") is None:
        return f"{text} ({worst['quantile']} {fmt_p(worst['p_value'])})"
    # The adjusted p is the one the verdict compares with 0.05.
    return f"{text} ({worst['quantile']} {fmt_p(worst['p_adjusted'], 'p_adj')})"


def short_verdict(row: dict[str, Any]) -> str:
    """One word or two for a terminal's noise column."""
    nz = row.get("noise")
    if row.get("baseline") or row.get("group") == 0:
        return "baseline"
    if not _tested(nz):
        return "n/a"
    assert nz is not None
    if nz["test"] == noise.TEST_SINGLE:
        return "unknown: --repeat"
    return str(nz["verdict"])


def cell(row: dict[str, Any], key: str, kind: str) -> str:
    """One human cell of the compare table."""
    if kind == "run":
        return f"{row['run_id']} {row['name']}"
    if kind == "noise":
        return noise_cell(row)
    if kind == "verdict":
        return short_verdict(row)
    if kind == "above":
        if row.get("above_threshold") is None:
            return "—"
        pct = row.get("above_threshold_pct")
        return format_count(row["above_threshold"]) + (f" ({pct:.3g}%)" if pct is not None
                                                       else "")
    val = row.get(key)
    if val is None:
        return "—"
    if kind == "ns":
        # The one latency style (durations.format_latency): the same text run, show
        # and check print for this value.
        return format_latency(val)
    if kind == "pct":
        return f"{val:.3g}%"
    if kind == "ratio":
        return format_ratio(val)
    if kind == "int" and isinstance(val, int) and not isinstance(val, bool):
        return format_count(val)
    return str(val)


def _group_label(rows: list[dict[str, Any]]) -> str:
    """`#4 name` for one run, `series S (3 runs: #4, #5, #6)` for a group."""
    if len(rows) == 1:
        return f"{rows[0]['run_id']} {rows[0]['name']}"
    ids = ", ".join(f"#{r['run_id']}" for r in rows)
    series = rows[0].get("series")
    return f"series {series} ({len(rows)} runs: {ids})"


def _result_text(r: dict[str, Any], ratio_only: bool = False) -> str:
    """A quantile's ratio, with its interval and p-value unless ``ratio_only`` (single
    runs: those describe the samples within each run, not the configurations)."""
    if r["ratio"] is None:
        return f"{r['quantile']} ratio undefined (a quantile <= 0)" + (
            "" if ratio_only else f", {fmt_p(r['p_value'])}")
    if ratio_only:
        return f"{r['quantile']} ×{r['ratio']:.3g}"
    level = r.get("confidence", 0.95)
    adjusted = "" if r.get("p_adjusted") is None else f", {fmt_p(r['p_adjusted'], 'p_adj')}"
    return (f"{r['quantile']} ×{r['ratio']:.3g} ({level:.1%} CI {r['ci_low']:.3g}–"
            f"{r['ci_high']:.3g}, {fmt_p(r['p_value'])}{adjusted})")


def noise_lines(model: dict[str, Any]) -> list[str]:
    """One line per compared group of runs (a single run is a group of one): each
    quantile's ratio, interval and p-value, the method's facts and the verdict."""
    by_group: dict[int, list[dict[str, Any]]] = {}
    for row in model["rows"]:
        by_group.setdefault(row.get("group", 0 if row["baseline"] else row["run_id"]),
                            []).append(row)
    groups = list(by_group.values())
    base = next(g for g in groups if any(r["baseline"] for r in g))
    out = []
    for rows in groups:
        nz = rows[0].get("noise")
        if rows is base or not nz:
            continue
        head = f"{_group_label(rows)} vs {_group_label(base)}: "
        if not _tested(nz):
            out.append(head + f"n/a ({nz.get('reason', 'no test')})")
            continue
        facts = ""
        single = nz["test"] == noise.TEST_SINGLE
        if single:
            blocks = nz.get("block_len") or []
            facts = (f" [block bootstrap, blocks of {'/'.join(map(str, blocks))} samples; "
                     f"run-to-run variation unknown from one run each: ratios only, the "
                     f"within-run intervals are in --json]")
        elif nz.get("replicates"):
            nb, nr = nz["replicates"]
            facts = f" [t over runs: {nb} vs {nr}]"
        why = "" if single else f" ({nz['reason']})"
        out.append(head + f"{nz['verdict']}{why}: "
                   + "; ".join(_result_text(r, ratio_only=single) for r in nz["results"])
                   + facts)
    return out


# The noise tests by name, for the one method line (the full method, with its sources,
# is the model's noise_method: `compare --verbose` and the JSON header).
METHOD_NAMES = {noise.TEST_REPLICATES: "t-tests on log per-run quantiles between series "
                                        "of runs (larger p of Student's and Welch's)",
                noise.TEST_SINGLE: "block bootstrap within single runs"}


def method_line(model: dict[str, Any]) -> str:
    """One line naming the noise test(s) the rows used."""
    tests = list(dict.fromkeys(
        r["noise"]["test"] for r in model["rows"]
        if r.get("noise") and r["noise"].get("test") in METHOD_NAMES))
    names = "; ".join(METHOD_NAMES[t] for t in tests) or "none (nothing to test)"
    return f"noise test: {names}, Bonferroni, family-wise 5 % (full method: --verbose)"


def notes_lines(model: dict[str, Any], verbose: bool = False) -> list[str]:
    """Method and provenance notes shown under every human table: the noise test in one
    line, or (``verbose``) its whole method with sources."""
    lines = [model["percentiles_note"],
             "noise test: " + model["noise_method"] if verbose else method_line(model)]
    if model.get("metric", "total") != "total":
        lines.insert(0, f"metric: {METRICS[model['metric']]}, over the run's split samples")
    thr = model.get("threshold_override_ns")
    if thr is not None:
        lines.append(f"above threshold: counted against {format_ns(thr, 'sig3')} for every run")
    return lines


def _md(text: str) -> str:
    """Escape what would break a markdown table cell or inject markup."""
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
            .replace(">", "&gt;").replace("\n", " "))


# `compare --per-cpu`: one row per CPU of each run ("#4 T:1"), the compare table's
# figures and the CPU's lost samples.
PER_CPU_COLUMNS: list[tuple[str, str, str]] = [
    ("run", "run", "cpu_run"), *_figure_columns(human=True), ("lost", "lost", "int")]


def per_cpu_rows(model: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of the per-CPU table: each run's CPUs in order, with the run's id and
    name (runs without per-CPU samples have none: per_cpu_notes names them)."""
    return [{"run_id": row["run_id"], "name": row["name"], **fig}
            for row in model["rows"]
            for fig in (row.get("per_cpu") or {}).values()]


def per_cpu_notes(model: dict[str, Any]) -> list[str]:
    """The runs `--per-cpu` has nothing for, said once."""
    if not model.get("per_cpu"):
        return []
    from irqlab.reports.percpu import NO_PER_CPU
    return [f"#{row['run_id']} {row['name']}: {NO_PER_CPU}" for row in model["rows"]
            if not row.get("per_cpu")]


def per_cpu_cell(row: dict[str, Any], key: str, kind: str) -> str:
    """A cell of the per-CPU table ('#4 T:1' for the run, else as `cell`)."""
    if kind == "cpu_run":
        return f"#{row['run_id']} T:{row['cpu']}"
    return cell(row, key, "above" if kind == "above" else kind)


def _per_cpu_markdown(model: dict[str, Any]) -> list[str]:
    rows = per_cpu_rows(model)
    if not model.get("per_cpu"):
        return []
    out = ["", "**Per CPU**", ""]
    if rows:
        out += ["| " + " | ".join(h for h, _, _ in PER_CPU_COLUMNS) + " |",
                "|" + "|".join("---" if k == "cpu_run" else "---:"
                               for _, _, k in PER_CPU_COLUMNS) + "|"]
        out += ["| " + " | ".join(_md(per_cpu_cell(r, key, kind))
                                  for _, key, kind in PER_CPU_COLUMNS) + " |" for r in rows]
    return out + [f"- {_md(x)}" for x in per_cpu_notes(model)]


def markdown_lines(model: dict[str, Any]) -> list[str]:
    heads = [h for h, _, _ in COLUMNS]
    lines = ["| " + " | ".join(heads) + " |",
             "|" + "|".join("---" if k in ("run", "noise", "str") else "---:"
                            for _, _, k in COLUMNS) + "|"]
    for row in model["rows"]:
        lines.append("| " + " | ".join(_md(cell(row, key, kind)) for _, key, kind in COLUMNS)
                     + " |")
    lines.append("")
    lines.extend(f"- {_md(x)}" for x in notes_lines(model))
    noise_text = noise_lines(model)
    if noise_text:
        lines += ["", "**Noise**", ""] + [f"- {_md(x)}" for x in noise_text]
    lines += [f"- {_md(x)}" for x in differs_lines(model)]
    lines += _per_cpu_markdown(model)
    if model["warnings"]:
        lines += ["", "**Warnings**", ""] + [f"- {_md(w['text'])}" for w in model["warnings"]]
    return lines


def _csv_row(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: row.get(k) for k in CSV_FIELDS}
    nz = row.get("noise") or {}
    out["noise_test"] = "baseline" if row["baseline"] else nz.get("test", "n/a")
    for r in nz.get("results", []):
        key = _STEM_OF_LABEL[r["quantile"]]
        out[f"noise_{key}_ci_low"] = r["ci_low"]
        out[f"noise_{key}_ci_high"] = r["ci_high"]
        out[f"noise_{key}_p"] = r["p_value"]
    out["beyond_noise"] = nz.get("beyond_noise")
    out["noise_verdict"] = nz.get("verdict")
    return out


def csv_lines(model: dict[str, Any]) -> list[str]:
    """Machine-friendly: latencies in integer ns, ratios and p-values as numbers. With
    --per-cpu a last column `cpu` (empty on a run's row) and a row per CPU after the
    runs' rows (its figures; the columns that compare runs stay empty)."""
    per_cpu = bool(model.get("per_cpu"))
    fields = CSV_FIELDS + (["cpu"] if per_cpu else [])
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()

    def write(values: dict[str, Any]) -> None:
        writer.writerow({k: ("" if v is None else f"{v:.6g}" if isinstance(v, float) else v)
                         for k, v in values.items()})
    for row in model["rows"]:
        write({**_csv_row(row), **({"cpu": None} if per_cpu else {})})
    if per_cpu:
        by_id = {row["run_id"]: row for row in model["rows"]}
        for fig in per_cpu_rows(model):
            run = by_id[fig["run_id"]]
            write({k: fig.get(k, run.get(k) if k in ("name", "status", "accel", "emulated")
                              else None) for k in fields})
    return buf.getvalue().splitlines()


def id_ranges(ids: list[int]) -> str:
    """Run ids as ranges: '1-3, 7, 9-10'."""
    parts: list[list[int]] = []
    for i in sorted(set(ids)):
        if parts and i == parts[-1][-1] + 1:
            parts[-1].append(i)
        else:
            parts.append([i])
    return ", ".join(f"{p[0]}-{p[-1]}" if len(p) > 1 else str(p[0]) for p in parts)


def warning_lines(warnings: list[dict[str, Any]]) -> list[str]:
    """Compare's warnings folded to one line per kind: a kind several runs share names
    them all and states its advice once (the text after the last ': ' of the first
    run's warning); the JSON keeps one warning per run."""
    kinds: dict[str, list[dict[str, Any]]] = {}
    for w in warnings:
        kinds.setdefault(str(w.get("kind")), []).append(w)
    out: list[str] = []
    for kind, found in kinds.items():
        if len(found) == 1:
            out.append(f"{kind}: {found[0]['text']}")
            continue
        ids = id_ranges([int(w["run_id"]) for w in found if w.get("run_id") is not None])
        advices = {str(w["text"]).rpartition(": ")[2] for w in found}
        advice = (advices.pop() if len(advices) == 1
                  else f"e.g. {found[0]['text']}")
        out.append(f"{kind} (runs {ids}): {advice}")
    return out


def differs_table(model: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """"What differs" as a table: the runs as columns (``#ID``), a row per recorded fact
    whose values are not all equal, in table order ("—": not recorded)."""
    heads = [f"#{r['run_id']}" for r in model["rows"]]
    rows = [[str(d["fact"])] + [fact_text(d["fact"], v) for v in d["values"]]
            for d in model.get("differs") or []]
    return heads, rows


def differs_lines(model: dict[str, Any]) -> list[str]:
    """The "what differs" line: each recorded fact not equal across the runs, with the
    runs' values in table order (irqlab.store.provenance.differs)."""
    if len(model["rows"]) < 2 or "differs" not in model:
        return []
    diff = model["differs"]
    if not diff:
        return ["what differs: nothing recorded (same settings, loads, knobs and host "
                "facts)"]
    return [f"what differs ({len(diff)}): {differs_text(diff)}"]


def json_objects(model: dict[str, Any]) -> list[dict[str, Any]]:
    """JSON lines: a ``compare`` header, one ``compare_run`` per run, then warnings."""
    head = {k: model[k] for k in ("type", "version", "baseline_run_id",
                                  "threshold_override_ns", "noise_method",
                                  "percentiles_note")}
    head["groups"] = model.get("groups", len(model["rows"]))
    head["differs"] = model.get("differs", [])
    head["runs"] = len(model["rows"])
    if "margins" in model:
        head["margins"] = model["margins"]      # the `same` verdict's, per quantile
    head["metric"] = model.get("metric", "total")
    if model.get("per_cpu"):
        head["per_cpu"] = True      # compare --per-cpu: each compare_run has per_cpu
    out = [head]
    out += [{"type": "compare_run", "version": COMPARE_VERSION, **row}
            for row in model["rows"]]
    out += [{"type": "compare_warning", "version": COMPARE_VERSION, **w}
            for w in model["warnings"]]
    return out
