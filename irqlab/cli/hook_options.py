"""``irqlab run`` options for loads and knobs, and the hooks they make.

Every knob has its own option (``--prio 80``) and is also reachable as ``--knob prio=80``;
scenario files use the bare names (``prio = 80``). Knobs come first in the hook list and
loads after them, so loads are stopped before host settings are restored.
"""

from __future__ import annotations

import argparse
from typing import Any

from irqlab.knobs import KNOBS, Knob, make_knob, parse_knob


def option_dest(key: str) -> str:
    return f"knob_{key}"


def load_kinds() -> list[str]:
    """Every ``--load`` KIND: ``none`` (the unloaded baseline) and the registry's
    (irqlab.loads.LOADS), so a new load is listed where it is registered."""
    from irqlab.loads import LOADS   # here: only the run parser lists them
    return ["none", *LOADS]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--load", action="append", default=[], metavar="SPEC",
                   help="interference load, repeatable: KIND[:KEY=V,...], e.g. "
                        f"cpu:cpus=1,workers=1 (kinds: {', '.join(load_kinds())})")
    p.add_argument("--knob", action="append", default=[], metavar="KEY=V",
                   help=f"host/VMM knob, repeatable ({', '.join(KNOBS)})")
    for key, cls in KNOBS.items():
        p.add_argument(f"--{key.replace('_', '-')}", dest=option_dest(key), default=None,
                       metavar=cls.metavar, help=cls.help)


def hooks_from_args(args: argparse.Namespace) -> list[Any]:
    """Knobs then loads; ValueError (message names the option and the fix) on bad specs."""
    from irqlab.loads import parse_loads

    knobs: dict[str, Knob | None] = {}
    for key in KNOBS:
        val = getattr(args, option_dest(key), None)
        if val is not None:
            knobs[key] = make_knob(key, val)
    for spec in getattr(args, "knob", []) or []:
        key = spec.partition("=")[0].strip().replace("-", "_")
        knob = parse_knob(spec)
        if key in knobs and (knobs[key] and knobs[key].value) != (knob and knob.value):
            raise ValueError(f"knob {key} given twice with different values")
        knobs[key] = knob
    return ([k for k in knobs.values() if k is not None]
            + parse_loads(getattr(args, "load", []) or []))
