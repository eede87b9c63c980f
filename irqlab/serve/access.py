"""The store as the dashboard reads it: opened read-only for one request, then closed.

A DuckDB file opened even read-only cannot be opened for writing by another process
(DuckDB's file lock), and a run that finds the file locked by a process that does not
lend it waits and then gives up (irqlab/store/share.py, ``IRQLAB_DB_WAIT_S``). So the
server never keeps the file open between requests: each request opens it, reads, and
closes it, and while a run holds the file the open borrows the run's connection through
its lending socket like any other read command. One request at a time reads the store
(a lock): the dashboard is for a handful of people, and one open at a time keeps the
time the file is busy short.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from irqlab.store import open_store

if TYPE_CHECKING:
    from irqlab.store.interface import RunReader


class StoreAccess:
    """Where the store is, and the one way pages open it."""

    def __init__(self, ref: str | Path) -> None:
        self.ref = ref
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def open(self) -> Iterator[RunReader]:
        with self._lock:
            store = open_store(self.ref, read_only=True)
            try:
                yield store
            finally:
                store.close()
