"""Where a store is, without opening one: the default file, whether a --db value is a
lab store's URL, and the hook through which a store tells the user what it did.

Light on purpose (no DuckDB, numpy or pyarrow): the parser names the default file in
`--help` and `irqlab --help` must not pay for the store's imports (docs/design.md,
"Start-up").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

URL_PREFIXES = ("postgresql://", "postgres://")

# Where the store tells the user what it did on its own (dead runs closed); the CLI sets it.
notice: Callable[[str], None] | None = None


def default_db_path() -> Path:
    """``$IRQLAB_DB``, else ``$XDG_DATA_HOME/irqlab/irqlab.duckdb`` (~/.local/share/...)."""
    env = os.environ.get("IRQLAB_DB")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return Path(base) / "irqlab" / "irqlab.duckdb"


def is_url(ref: str | Path | None) -> bool:
    """Is ``ref`` (a --db value) a PostgreSQL URL rather than a file?"""
    return isinstance(ref, str) and ref.startswith(URL_PREFIXES)
