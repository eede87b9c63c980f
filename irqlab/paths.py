"""Where irqlab's built parts are: in a checkout, or inside an installed wheel.

In a checkout the probes and the C fast paths are built in place (setup.sh runs make).
A wheel built from the checkout (setup.py) carries the same files under irqlab/_bin/,
so `pip install .` gives an irqlab whose probes need no checkout.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGED = Path(__file__).resolve().parent / "_bin"


def built(rel: str) -> Path:
    """The built artefact ``rel`` (a path relative to the checkout, e.g.
    ``probes/native/build``): the checkout's when it is there, else the wheel's."""
    checkout = REPO_ROOT / rel
    packaged = PACKAGED / rel
    return packaged if not checkout.exists() and packaged.exists() else checkout
