"""Event payloads holding one ``__data_loc`` string each, for the decoders' tests."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np


def data_loc_payloads(rng: random.Random, names: list[bytes], n: int,
                      pad: Callable[[bytearray], bytes]) -> tuple[bytearray, np.ndarray]:
    """``n`` payloads, each a ``__data_loc`` word (length << 16 | offset 8), 4 bytes and
    one of ``names`` (picked by ``rng``), then ``pad(buf)``; the buffer and the payloads'
    offsets."""
    buf = bytearray()
    offs = []
    for _ in range(n):
        offs.append(len(buf))
        s = rng.choice(names)
        buf += (len(s) << 16 | 8).to_bytes(4, "little") + b"\0" * 4 + s
        buf += pad(buf)
    return buf, np.array(offs, np.int64)
