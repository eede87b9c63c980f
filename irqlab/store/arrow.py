"""numpy → Arrow for the store's sample columns, without pyarrow's pandas probe.

``pa.array()`` asks whether its argument is a pandas object before converting it, and the
first time it asks it imports pandas: 0.16-0.20 s on this machine, a fifth of a 10 M-line
``irqlab import``'s time and most of a small command's. A contiguous numeric numpy array
already is an Arrow buffer: it is wrapped, not copied (a strided one is copied once).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from irqlab.lazy import lazy_import

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
else:
    # numpy and pyarrow on first use (irqlab/lazy.py): `irqlab list` needs neither.
    np = lazy_import("numpy")
    pa = lazy_import("pyarrow")


def numeric_array(values: np.ndarray) -> pa.Array:
    """An Arrow array over a numeric (not bool) numpy array's memory, no nulls."""
    v = np.ascontiguousarray(values)
    if v.dtype.kind not in "iuf" or v.ndim != 1:
        raise TypeError(f"numeric_array takes a 1-d numeric array, not {v.dtype} "
                        f"with {v.ndim} dimensions")
    return pa.Array.from_buffers(pa.from_numpy_dtype(v.dtype), len(v),
                                 [None, pa.py_buffer(v)])


@cache
def _numpy_of() -> dict[Any, Any]:
    """Arrow numeric type -> numpy type (a function: built when first needed)."""
    return {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32,
            pa.int64(): np.int64, pa.uint8(): np.uint8, pa.uint16(): np.uint16,
            pa.uint32(): np.uint32, pa.uint64(): np.uint64, pa.float32(): np.float32,
            pa.float64(): np.float64}


def numeric_view(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A read-only numpy view of a numeric Arrow column without nulls (``to_numpy()``
    probes for pandas too); a column of several chunks is joined (one copy)."""
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 1:
            return numeric_view(values.chunk(0))
        parts = [numeric_view(c) for c in values.chunks]
        return np.concatenate(parts) if parts else np.empty(
            0, _numpy_of()[values.type])
    if values.type not in _numpy_of() or values.null_count:
        raise TypeError(f"numeric_view takes a numeric column without nulls, not "
                        f"{values.type} with {values.null_count} nulls")
    dtype = np.dtype(_numpy_of()[values.type])
    data = values.buffers()[1]
    if data is None:                                 # an empty array has no buffer
        return np.empty(0, dtype)
    return np.frombuffer(data, dtype, len(values), values.offset * dtype.itemsize)
