"""Samples layer: the guest->host ring (docs/formats.md section 2) and sample batches.

The names load on first use (PEP 562 module __getattr__): targets import
irqlab.samples.source to declare their readers, and the parser imports targets, so this
package must not import numpy by itself (docs/design.md, "Start-up").
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from irqlab.samples.record import RECORD_DTYPE, SampleBatch
    from irqlab.samples.ring import RingError, RingHeader, RingReader

_LAZY = {"RECORD_DTYPE": "record", "SampleBatch": "record", "RingHeader": "ring",
         "RingReader": "ring", "RingError": "ring"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = ["RECORD_DTYPE", "SampleBatch", "RingHeader", "RingReader", "RingError"]
