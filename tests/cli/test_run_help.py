"""`irqlab run --help` in groups: target, timing, statistics, the target options (shared,
then one group per target), loads and knobs, output; examples at the end. Only the help
changed: the options, their destinations and defaults are those of the flat list."""

from __future__ import annotations

import argparse
import re

from irqlab.cli import cmd_run
from irqlab.cli.main import build_parser
from irqlab.targets import TARGETS, all_options

GROUPS = ["target", "timing", "statistics", "target options shared by several targets",
          *(f"{name} options (--target {name})" for name in TARGETS),
          "loads and knobs", "output and recording", "examples"]


def _run_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def _sections(text: str) -> dict[str, str]:
    """Group heading (a line at column 0 ending in ':') -> its text."""
    out: dict[str, str] = {}
    head = None
    for line in text.splitlines():
        if re.match(r"^\S.*:$", line):
            head = line[:-1]
            out[head] = ""
        elif head is not None:
            out[head] += line + "\n"
    return out


def test_groups_come_in_order_and_examples_last():
    text = _run_parser().format_help()
    heads = list(_sections(text))
    found = [next(i for i, h in enumerate(heads) if h.startswith(g)) for g in GROUPS]
    assert found == sorted(found), heads
    assert heads[-1] == "examples"
    examples = _sections(text)["examples"]
    assert examples.count("  irqlab run") >= 5
    # Every example is a valid command line: it parses (nothing runs).
    for line in examples.splitlines():
        if line.startswith("  irqlab run"):
            argv = line.split("|")[0].split()[1:]
            build_parser().parse_args(argv)


def test_every_option_is_in_exactly_one_group_and_target_options_under_their_target():
    text = _run_parser().format_help()
    sections = _sections(text)
    flags = [f for a in _run_parser()._actions for f in a.option_strings if f.startswith("--")]
    for flag in flags:
        holders = [h for h, body in sections.items()
                   if re.search(rf"^  (-\w( \S+)?, )?{re.escape(flag)}\b", body, re.M)]
        assert len(holders) == 1, (flag, holders)
    for opt, names in all_options().values():
        (holder,) = [h for h, body in sections.items()
                     if re.search(rf"^  (-\w( \S+)?, )?{re.escape(opt.flag)}\b", body, re.M)]
        if len(names) == 1:
            assert holder.startswith(f"{names[0]} options"), (opt.flag, holder)
        else:
            assert holder.startswith("target options shared"), (opt.flag, holder)
            # ... and each target's own group says it takes it too.
            for name in names:
                body = sections[next(h for h in sections
                                     if h.startswith(f"{name} options"))]
                assert opt.flag in " ".join(body.split()), (name, opt.flag)


def test_options_and_defaults_are_unchanged():
    ns = build_parser().parse_args(["run"])
    # The defaults scripts rely on (README's contract).
    assert (ns.target, ns.period, ns.duration, ns.samples, ns.window,
            ns.warmup, ns.name, ns.trace, ns.json, ns.load, ns.knob) == (
        "guest", 1_000_000, None, None, 10_000_000_000, 1, None, False, False,
        [], [])
    # --threshold not given is the target's own default: 30 us, the noise target's 5 us
    # (the shortest gap its probe records, rtla osnoise's default).
    assert ns.threshold is None
    (cfg,) = cmd_run.run_configs(ns)
    assert cfg.threshold_ns == 30_000
    (noise,) = cmd_run.run_configs(build_parser().parse_args(["run", "--target", "noise"]))
    assert noise.threshold_ns == 5_000
    for dest in all_options():
        assert getattr(ns, dest) is None      # "not given": each target applies its own
    ns = build_parser().parse_args(
        ["run", "--target", "native", "--cpus", "1", "--priority", "80", "--samples", "5",
         "--pin", "1", "--load", "cpu:cpus=1", "--json"])
    assert (ns.cpus, ns.priority, ns.samples, ns.knob_pin, ns.load, ns.json) == (
        [1], 80, 5, "1", ["cpu:cpus=1"], True)


def test_load_help_lists_every_registered_load_kind():
    # The kinds come from irqlab.loads.LOADS: a load registered there is listed here.
    from irqlab.loads import LOADS
    # Undo argparse's wrapping, which may break a line after a hyphen (dom0-cpu).
    help_text = re.sub(r"-\s+", "-", " ".join(_run_parser().format_help().split()))
    kinds = re.search(r"\(kinds: ([^)]*)\)", help_text).group(1).split(", ")
    assert kinds == ["none", *LOADS] and len(LOADS) >= 13
