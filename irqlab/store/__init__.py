"""Store layer: every run, its metadata, windows, summary and raw samples (DuckDB), the
lab store on PostgreSQL (pg.py) that many hosts push their runs to, and an `irqlab
export` directory read as a store (export_dir.py). Every backend implements the
interface of interface.py (RunReader; the DuckDB file RunWriter too) and is one line of
BACKENDS: open_store picks it by the reference, and no caller asks which it got.

The classes load on first use (PEP 562 module __getattr__): `from irqlab.store import
open_store, is_url, StoreError` costs no DuckDB, numpy or pyarrow import, so commands can name the
store at parse time and `irqlab --help` stays fast (docs/design.md, "Start-up").
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from irqlab.store.errors import StoreError, StoreWriteError
from irqlab.store.location import default_db_path, is_export_dir, is_url, keeps_files

if TYPE_CHECKING:
    from irqlab.store.db import Store
    from irqlab.store.interface import RunReader
    from irqlab.store.pg import PgStore

__all__ = ["PgStore", "Store", "StoreError", "StoreWriteError", "default_db_path",
           "is_url", "keeps_files", "open_store"]

# Name -> the module defining it, imported when the name is first asked for.
_LAZY = {"Store": "irqlab.store.db", "PgStore": "irqlab.store.pg"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


# Every backend, one line each: (does it open this --db value?, its module, its class).
# The first that takes the value opens it; a DuckDB file takes the rest.
BACKENDS: tuple[tuple[Callable[[Any], bool], str, str], ...] = (
    (is_url, "irqlab.store.pg", "PgStore"),
    (is_export_dir, "irqlab.store.export_dir", "ExportStore"),
    (lambda ref: True, "irqlab.store.db", "Store"),
)


def open_store(ref: str | Path, read_only: bool = False) -> RunReader:
    """The store at ``ref`` (a DuckDB file or an export directory, ``~`` expanded; a lab
    store's postgresql:// URL), by the first of BACKENDS that takes it."""
    if not is_url(ref):
        ref = Path(ref).expanduser()
    module, name = next((m, n) for takes, m, n in BACKENDS if takes(ref))
    return getattr(importlib.import_module(module), name)(ref, read_only=read_only)
