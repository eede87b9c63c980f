"""Run a computation through irqlab's C fast path and through its numpy reference."""

from __future__ import annotations

from irqlab import native


def both_ways(fn):
    """(C result, numpy result) of ``fn()``; fails if the C library is not loaded."""
    assert native.lib() is not None, native.why_not()
    fast = fn()
    native.set_enabled(False)
    try:
        slow = fn()
    finally:
        native.set_enabled(True)
    return fast, slow
