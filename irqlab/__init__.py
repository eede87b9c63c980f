"""irqlab: interrupt latency lab for bare metal and virtual machines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from irqlab.api import StoreView


def open_store(ref: Any) -> "StoreView":
    """A store's runs, summaries, windows and samples as Arrow tables in ns (irqlab.api;
    imported on first use, so `import irqlab` stays light)."""
    from irqlab.api import open_store as _open
    return _open(ref)
