"""The store's errors, light (no DuckDB): commands and selectors name them at import
time, and `irqlab --help` must not import the store (docs/design.md, "Start-up")."""

from __future__ import annotations


class StoreError(Exception):
    """The database cannot be used as asked; the message says why and what to do."""


class StoreWriteError(StoreError):
    """A write failed (disk full, I/O error): what was committed before is kept."""
