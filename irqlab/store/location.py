"""Where a store is, without opening one: the default file, whether a --db value is a
lab store's URL, and the hook through which a store tells the user what it did.

Light on purpose (no DuckDB, numpy or pyarrow): the parser names the default file in
`--help` and `irqlab --help` must not pay for the store's imports (docs/design.md,
"Start-up").
"""

from __future__ import annotations

import os
import re
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


def is_export_dir(ref: str | Path | None) -> bool:
    """Is ``ref`` (a --db value) a directory `irqlab export --parquet` wrote?"""
    if ref is None or is_url(ref):
        return False
    folder = Path(ref).expanduser()
    return folder.is_dir() and (folder / "runs.parquet").is_file()


def keeps_files(ref: str | Path | None) -> bool:
    """Does the store at ``ref`` keep files beside it (a run's capture, big runs' sample
    files, a monitor's)? A DuckDB file does; a lab store (a URL) and an export directory
    do not. Commands ask this, never which backend a value names."""
    return not is_url(ref) and not is_export_dir(ref)


# A password in a URL's userinfo (libpq ends the userinfo at the first "@"
# before any "/"), and any ``password=`` parameter (a URL's query string, or a libpq
# key=value string that a driver's error message may quote). Patterns, compiled at
# their first use (re's cache), not at every command's start (issue 28).
# The scheme is bounded (real ones are short: postgresql, postgres): unbounded, the
# pattern rescans a long run of letters from every start in it, quadratic in the text's
# length (a 64 k-character selector took 16.7 s, issue 47). Bounded, each start scans at
# most SCHEME_MAX characters before the "://" it needs, so the whole is linear.
SCHEME_MAX = 32
_USERINFO_PASSWORD = (r"(?i)([a-z][a-z0-9+.-]{0,%d}:/{1,2}[^@/\s:]*:)[^@/\s]*@"
                      % (SCHEME_MAX - 1))
_PASSWORD_PARAM = r"(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^&#\s'\"]*)"


def redact(text: str) -> str:
    """``text`` (a URL, or a message that may quote one) with every password replaced by
    ``***``: the one function through which irqlab shows a store's URL. Each pattern
    runs only over text holding what it needs (":/", "password"): linear, but from every
    start of a 100 k-character selector the scheme's scan took 0.17 s (issue 47)."""
    if ":/" in text:
        text = re.sub(_USERINFO_PASSWORD, r"\1***@", text)
    if "password" in text.lower():
        text = re.sub(_PASSWORD_PARAM, r"\1***", text)
    return text
