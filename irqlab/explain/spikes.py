"""The flight recorder's kept windows (irqlab.trace.recorder) as captures to explain:
`irqlab explain RUN --spike SEQ` finds the window that holds sample SEQ by the files'
headers, so a monitor still running (its metadata not yet written) is explained too."""

from __future__ import annotations

from pathlib import Path

from irqlab.store import StoreError
from irqlab.trace.archive import read_header, spike_files_of


def spike_capture(db_path: Path, run_id: int, seq: int) -> tuple[Path, str]:
    """(the kept window holding sample ``seq``, its capture kind), or StoreError naming
    the samples whose windows were kept."""
    kept: list[int] = []
    for path in spike_files_of(Path(db_path), run_id):
        try:
            rec = read_header(path).get("recorder") or {}
        except (OSError, ValueError, EOFError):
            continue                     # being written, or damaged: not this one
        seqs = [int(s["seq"]) for s in rec.get("spikes", [])]
        if seq in seqs:
            return path, str(rec.get("kind", "native"))
        kept += seqs
    if not kept:
        raise StoreError(f"run {run_id} has no kept trace window: record one with "
                         f"--trace --on-threshold LAT")
    shown = ", ".join(map(str, sorted(kept)[:20])) + (" ..." if len(kept) > 20 else "")
    raise StoreError(f"run {run_id} kept no trace window around sample {seq}: the kept "
                     f"spikes are {shown}")
