"""The one interface the run flow reads samples through (ring, multi-ring, console).

Every reader answers the same questions, so irqlab.measure never asks which kind it holds:
a reader that has nothing to say for a question gives the neutral answer below (no rings
per CPU, no metadata, nothing to release at the end).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from irqlab.samples.layout import RingHeader

if TYPE_CHECKING:       # record imports numpy; the targets (and so the parser) import this
    from irqlab.samples.record import SampleBatch


class RingPeek(ABC):
    """A view of the newest sample that another thread may read while the run's reader
    polls (the trace capture's clock anchors); it outlives the reader."""

    @abstractmethod
    def latest(self) -> tuple[int, int]:
        """(samples written, entry tick of the newest one; 0 when it was being rewritten
        while read, so it bounds nothing)."""

    @abstractmethod
    def close(self) -> None:
        """Release the view."""


class SampleSource(ABC):
    """Samples of one run, as the probe produces them (see the module docstring)."""

    lost: int = 0          # samples known to be lost so far (overwritten, gaps)

    @abstractmethod
    def magic_ok(self) -> bool:
        """True once the probe has published its header."""

    @abstractmethod
    def state(self) -> str:
        """The probe's state: booting, running, done, error (or unknown)."""

    @abstractmethod
    def header(self) -> RingHeader:
        """The probe's header (tick rate, timer, counters); RingError when malformed."""

    @abstractmethod
    def poll(self, max_records: int | None = None) -> SampleBatch:
        """Samples since the last poll, in deadline order, and how many were lost."""

    @abstractmethod
    def close(self) -> None:
        """Release the source (it is not read again)."""

    def finish(self) -> None:
        """The run is over: the next poll returns whatever is still held back."""

    def ring_cpus(self) -> list[int]:
        """CPUs measured with a ring each (per-CPU statistics); [] for one stream."""
        return []

    def per_ring(self) -> list[dict[str, Any]]:
        """Per ring: cpu, lost, overruns, written, state; [] for one stream."""
        return []

    def metadata(self) -> dict[str, Any]:
        """Entries this source adds to the run's metadata (docs/formats.md section 3)."""
        return {}

    def notices(self) -> list[str]:
        """What the user must be told once samples flow (e.g. RT priority refused)."""
        return []

    def peek(self) -> RingPeek | None:
        """An independent view of the newest sample, or None when the samples do not sit
        in shared memory (console frames)."""
        return None
