"""Store layer: every run, its metadata, windows, summary and raw samples (DuckDB), and
the lab store on PostgreSQL (pg.py) that many hosts push their runs to.

The classes load on first use (PEP 562 module __getattr__): `from irqlab.store import
open_store, is_url, StoreError` costs no DuckDB, numpy or pyarrow import, so commands can name the
store at parse time and `irqlab --help` stays fast (docs/design.md, "Start-up").
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from irqlab.store.errors import StoreError, StoreWriteError
from irqlab.store.location import default_db_path, is_url

if TYPE_CHECKING:
    from irqlab.store.db import Store
    from irqlab.store.pg import PgStore

__all__ = ["PgStore", "Store", "StoreError", "StoreWriteError", "default_db_path",
           "is_url", "open_store"]

# Name -> the module defining it, imported when the name is first asked for.
_LAZY = {"Store": "irqlab.store.db", "PgStore": "irqlab.store.pg"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def open_store(ref: str | Path, read_only: bool = False) -> Store | PgStore:
    """The store at ``ref``: a DuckDB file, or a lab store at a postgresql:// URL."""
    if is_url(ref):
        from irqlab.store.pg import PgStore
        return PgStore(str(ref), read_only=read_only)
    from irqlab.store.db import Store
    return Store(ref, read_only=read_only)
