"""Store layer: every run, its metadata, windows, summary and raw samples (DuckDB), and
the lab store on PostgreSQL (pg.py) that many hosts push their runs to."""

from __future__ import annotations

from pathlib import Path

from irqlab.store.db import Store, StoreError, StoreWriteError, default_db_path
from irqlab.store.pg import PgStore, is_url

__all__ = ["PgStore", "Store", "StoreError", "StoreWriteError", "default_db_path",
           "is_url", "open_store"]


def open_store(ref: str | Path, read_only: bool = False) -> Store | PgStore:
    """The store at ``ref``: a DuckDB file, or a lab store at a postgresql:// URL."""
    if is_url(ref):
        return PgStore(str(ref), read_only=read_only)
    return Store(ref, read_only=read_only)
