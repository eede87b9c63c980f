"""Store layer: every run, its metadata, windows, summary and raw samples (DuckDB)."""

from irqlab.store.db import Store, StoreError, default_db_path

__all__ = ["Store", "StoreError", "default_db_path"]
