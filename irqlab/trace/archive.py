"""The capture kept with a run: one gzip file next to the database (docs/formats.md §9).

Layout of the decompressed stream: ``IRQLTRC1\\n``, a u32 length and that many bytes of
JSON (header: clock, page header and event format texts, CPUs, per-CPU stats, VMM threads,
clock anchors...), then chunks ``u32 cpu, u32 nbytes, nbytes of whole ring pages`` exactly
as read from ``per_cpu/cpuN/trace_pipe_raw``, in read order.
"""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path
from typing import Any, BinaryIO, Iterator

MAGIC = b"IRQLTRC1\n"
XENTRACE_MAGIC = b"IRQLXTR1\n"
_CHUNK = struct.Struct("<II")


def trace_dir_for(db_path: Path) -> Path:
    """Where a database's captures live: ``<db file>.traces/`` beside it."""
    return db_path.with_name(db_path.name + ".traces")


def trace_file_for(db_path: Path, run_id: int) -> Path:
    return trace_dir_for(db_path) / f"run-{run_id}.irqtrace.gz"


def spike_files_of(db_path: Path, run_id: int) -> list[Path]:
    """The flight recorder's kept windows of a run (spike_file_for's names)."""
    return sorted(trace_dir_for(db_path).glob(f"run-{run_id}-spike-*.irqtrace.gz"))


def spike_file_for(db_path: Path, run_id: int, seq: int, cpu: int) -> Path:
    """A flight recorder's kept window around sample ``seq`` of ``cpu`` (irqlab.trace.
    recorder): found by its name, so `irqlab explain --spike` needs no index."""
    return trace_dir_for(db_path) / f"run-{run_id}-spike-{seq}-cpu{cpu}.irqtrace.gz"


def xentrace_file_for(db_path: Path, run_id: int) -> Path:
    """A Xen run's xentrace capture (irqlab.xen.capture), in the same directory."""
    return trace_dir_for(db_path) / f"run-{run_id}.xentrace.gz"


def write_archive(path: Path, header: dict[str, Any], spool: BinaryIO,
                  magic: bytes = MAGIC) -> int:
    """Write header + the spooled body (host captures: chunk layout; xentrace captures:
    xentrace's bytes, ``magic`` XENTRACE_MAGIC); returns bytes written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".part")
    raw = json.dumps(header).encode()
    # Level 1: ring pages compress ~5-10x at >100 MB/s; higher levels cost much more
    # time for little gain, and this runs when the run stops.
    with gzip.open(tmp, "wb", compresslevel=1) as out:
        out.write(magic + struct.pack("<I", len(raw)) + raw)
        spool.seek(0)
        while block := spool.read(1 << 20):
            out.write(block)
    tmp.replace(path)
    return path.stat().st_size


def spool_chunk(spool: BinaryIO, cpu: int, data: bytes) -> None:
    spool.write(_CHUNK.pack(cpu, len(data)))
    spool.write(data)


def _chunks(stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    while head := stream.read(_CHUNK.size):
        cpu, n = _CHUNK.unpack(head)
        yield cpu, stream.read(n)


def _read_header(f: BinaryIO, path: Path) -> dict[str, Any]:
    if f.read(len(MAGIC)) != MAGIC:
        raise ValueError(f"{path} is not an irqlab trace capture")
    (n,) = struct.unpack("<I", f.read(4))
    return json.loads(f.read(n))


def read_header(path: Path) -> dict[str, Any]:
    """A capture's header alone (the pages after it are not read)."""
    with gzip.open(path, "rb") as f:
        return _read_header(f, path)


def read_archive(path: Path) -> tuple[dict[str, Any], dict[int, bytes]]:
    """(header, {cpu: all pages of that cpu in order})."""
    with gzip.open(path, "rb") as f:
        header = _read_header(f, path)
        parts: dict[int, list[bytes]] = {}
        for cpu, data in _chunks(f):
            parts.setdefault(cpu, []).append(data)
    return header, {cpu: b"".join(p) for cpu, p in parts.items()}
