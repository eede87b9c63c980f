"""Scratch directories in the restore journal (irqlab.journal), like namespaces and
trace instances: a run's initramfs (``/tmp/irqlab-net-*/initramfs.cpio``, 3.7 MB) or
dom0 image (``/tmp/irqlab-xen-*/dom0.cpio``, 7.6 MB) is removed when the run ends, and by
the next irqlab start if the run was killed (``kill -9``), instead of staying forever.

The name is chosen and journalled *before* ``mkdir`` (the journal's rule: the undo is on
disk before the change), so a kill between the two leaves an entry for a directory that
does not exist, which the undo skips.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import tempfile
import weakref
from pathlib import Path
from typing import Any

from irqlab.journal import Journal, journal, undo_kind

# Only directories with this prefix are ever removed by a journal entry: an entry is ours
# (0600), but a removal that could reach anything else must not depend on that alone.
PREFIX = "irqlab-"
_ATTEMPTS = 100


@undo_kind("scratch_dir")
def _undo_scratch_dir(entry: dict[str, Any]) -> str:
    path = Path(entry["path"])
    if not os.path.lexists(path):
        return f"scratch directory {path}: already gone"
    if not _is_ours(path):
        return f"left {path} alone: not an irqlab scratch directory of this user"
    shutil.rmtree(path, ignore_errors=True)
    return f"removed scratch directory {path}"


def _is_ours(path: Path) -> bool:
    """A real directory (not a link) named irqlab-*, owned by this user."""
    if not path.name.startswith(PREFIX):
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()


def _remove(path: Path, owner: Journal, entry: int) -> None:
    shutil.rmtree(path, ignore_errors=True)
    owner.done(entry)


class ScratchDir:
    """A private (0700) directory ``<base>/<prefix>XXXXXXXXXXXX`` (base: ``$TMPDIR`` unless
    given), journalled; removed by cleanup(), at interpreter exit if cleanup() was never
    called (as tempfile.TemporaryDirectory), or by the next irqlab start after a kill."""

    def __init__(self, prefix: str, base: Path | None = None) -> None:
        if not prefix.startswith(PREFIX):
            raise ValueError(f"scratch directory prefix {prefix!r} must start with {PREFIX!r}")
        base = Path(base) if base is not None else Path(tempfile.gettempdir())
        owner = journal()          # the one this entry is in, whatever happens later
        for _ in range(_ATTEMPTS):
            path = base / f"{prefix}{secrets.token_hex(6)}"
            entry = owner.add("scratch_dir", path=str(path))
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                owner.done(entry)              # someone's name: never ours to remove
                continue
            except BaseException:
                owner.done(entry)
                raise
            self.name = str(path)
            self._finalizer = weakref.finalize(self, _remove, path, owner, entry)
            return
        raise FileExistsError(f"no free scratch directory name {prefix}* in {base}")

    def cleanup(self) -> None:
        """Remove the directory and close its journal entry (once)."""
        self._finalizer()
