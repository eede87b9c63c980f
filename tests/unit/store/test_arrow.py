"""irqlab/store/arrow.py: numpy <-> Arrow for sample columns, exact and without importing
pandas (pyarrow's own conversions import it: 0.2 s a command)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from irqlab.store.arrow import numeric_array, numeric_view

DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
          np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_is_exact_for_every_numeric_type(dtype) -> None:
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else np.finfo(dtype)
    values = np.array([info.min, info.max, 0, 1, info.max, info.min], dtype=dtype)
    arr = numeric_array(values)
    assert arr.type == pa.from_numpy_dtype(np.dtype(dtype)) and arr.null_count == 0
    assert arr.equals(pa.array(values))              # what pyarrow itself would make
    assert np.array_equal(numeric_view(arr), values)
    assert np.array_equal(numeric_view(arr.slice(2, 3)), values[2:5])    # an offset
    chunked = pa.chunked_array([arr.slice(0, 2), arr.slice(2)])
    assert np.array_equal(numeric_view(chunked), values)


def test_strided_empty_and_refused_inputs() -> None:
    rec = np.zeros(5, [("a", "<u8"), ("b", "<u4")])
    rec["a"] = np.arange(5) * 3
    assert numeric_view(numeric_array(rec["a"])).tolist() == [0, 3, 6, 9, 12]
    assert numeric_view(numeric_array(np.empty(0, np.int64))).size == 0
    assert numeric_view(pa.chunked_array([], pa.int64())).size == 0
    with pytest.raises(TypeError, match="numeric"):
        numeric_array(np.array([True, False]))
    with pytest.raises(TypeError, match="without nulls"):
        numeric_view(pa.array([1, None], pa.int64()))


@pytest.mark.slow
def test_commands_reading_and_writing_samples_do_not_import_pandas(tmp_path) -> None:
    code = f"""
import sys
from irqlab.cli.main import main
log = {str(tmp_path / 't.txt')!r}
open(log, 'w').write(''.join(f'latency: {{v}}\\n' for v in range(1, 5000)))
assert main(['import', 'tscdeadline', log, '--tick-hz', '1000000000', '--db',
             {str(tmp_path / 'x.duckdb')!r}]) == 0
assert main(['import', 'tscdeadline', log, '--tick-hz', '1000000000', '--db',
             {str(tmp_path / 'x.duckdb')!r}]) == 0
for args in (['show', '1'], ['compare', '1', '2'], ['check', '1', '--max', '1ms'],
             ['report', '1', '2', '-o', {str(tmp_path / 'r.html')!r}]):
    assert main([*args, '--db', {str(tmp_path / 'x.duckdb')!r}]) == 0, args
print('pandas' in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()
    assert out[-1] == "False"
