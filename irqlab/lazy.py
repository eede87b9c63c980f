"""A module imported when it is first used, for the store's numpy and pyarrow.

`irqlab list` reads the store through DuckDB alone, while the store's writers and
sample readers need numpy and pyarrow (together 0.1-0.2 s to import, more than
DuckDB itself on a busy machine). ``np = lazy_import("numpy")`` keeps the familiar
``np.`` spelling and imports numpy at the first attribute read, so a command pays
only for what it uses (docs/design.md, "Start-up"). It is a stand-in for one name in
one module, not an entry in sys.modules: other modules and libraries that check
sys.modules (pyarrow probes for pandas that way) see the truth. The standard
library's importlib.util.LazyLoader would put a half-made module into sys.modules and
cannot defer a submodule (pyarrow.parquet) without importing its package.
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands for module ``name``; imports it at the first attribute read."""

    __slots__ = ("_lazy_name", "_lazy_module")

    def __init__(self, name: str) -> None:
        self._lazy_name = name
        self._lazy_module: Any = None

    def __getattr__(self, attr: str) -> Any:
        # Called only for names the instance lacks, i.e. every module attribute.
        module = self._lazy_module
        if module is None:
            module = self._lazy_module = importlib.import_module(self._lazy_name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        state = "imported" if self._lazy_module is not None else "not imported yet"
        return f"<lazy module {self._lazy_name!r} ({state})>"


def lazy_import(name: str) -> Any:
    """A stand-in for module ``name`` (dotted names too) that imports it when first used."""
    return LazyModule(name)
