"""Samples layer: the guest->host ring (docs/formats.md section 2) and sample batches."""

from irqlab.samples.record import RECORD_DTYPE, SampleBatch
from irqlab.samples.ring import RingHeader, RingReader, RingError

__all__ = ["RECORD_DTYPE", "SampleBatch", "RingHeader", "RingReader", "RingError"]
