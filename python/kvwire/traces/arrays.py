"""An explicit request table (``arrival_s``, ``prompt_tokens``, ``output_tokens``: a Polars DataFrame or a
mapping of columns) as the contiguous arrays the core reads, checked for what numpy can tell.

>>> a, p, o = request_arrays({"arrival_s": [0.0, 0.5], "prompt_tokens": [100, 200], "output_tokens": [10, 20]})
>>> a.dtype.name, p.dtype.name, p.tolist()
('float64', 'int64', [100, 200])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from kvwire.errors import TraceError

#: The columns of a request table, in the order the core takes them.
REQUEST_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")


def _column(requests: Any, name: str, offset: int = 0) -> np.ndarray:
    try:
        series = requests[name]
    except (KeyError, TypeError, pl.exceptions.ColumnNotFoundError):
        raise TraceError(
            f"requests.{name}: column is missing (need {', '.join(REQUEST_COLUMNS)})", f"requests.{name}"
        ) from None
    if isinstance(series, pl.Series):
        if series.null_count():
            first = offset + int(series.is_null().arg_max() or 0)
            raise TraceError(f"requests.{name}[{first}]: null value", f"requests.{name}[{first}]")
        if not series.dtype.is_numeric():
            raise TraceError(f"requests.{name}: expected a numeric column, got {series.dtype}", f"requests.{name}")
        arr = series.to_numpy()
    else:
        arr = np.asarray(series)
    if arr.ndim != 1:
        raise TraceError(f"requests.{name}: expected a 1-D column, got shape {arr.shape}", f"requests.{name}")
    if arr.dtype.kind not in "iuf":
        raise TraceError(f"requests.{name}: expected numbers, got dtype {arr.dtype}", f"requests.{name}")
    if name == "arrival_s":
        return np.ascontiguousarray(arr, dtype=np.float64)
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.floor(arr))
        if bad.any():
            i = int(np.argmax(bad))
            raise TraceError(
                f"requests.{name}[{offset + i}]: token counts must be whole numbers, got {arr[i]}",
                f"requests.{name}[{offset + i}]",
            )
        if np.abs(arr).max(initial=0) >= 2.0**53:
            i = int(np.argmax(np.abs(arr) >= 2.0**53))
            j = offset + i
            raise TraceError(f"requests.{name}[{j}]: out of range: {arr[i]}", f"requests.{name}[{j}]")
    elif arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and arr.size and arr.max() > np.iinfo(np.int64).max:
        i = int(np.argmax(arr > np.iinfo(np.int64).max))
        j = offset + i
        raise TraceError(f"requests.{name}[{j}]: out of range: {arr[i]}", f"requests.{name}[{j}]")
    return np.ascontiguousarray(arr, dtype=np.int64)


def request_arrays(
    requests: pl.DataFrame | Mapping[str, Any], offset: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three columns of an explicit request table as the contiguous arrays the core reads (``arrival_s``
    float64, ``prompt_tokens`` and ``output_tokens`` int64), checked here for what numpy can tell. ``offset``
    is the table's first row number in a larger table (a chunk of a streamed run), for the errors.

    Raises:
        TraceError: a column is missing, null, not numeric, not 1-D, or holds non-whole token counts.
    """
    a, p, o = (_column(requests, c, offset) for c in REQUEST_COLUMNS)
    return a, p, o


__all__ = ["REQUEST_COLUMNS", "request_arrays"]
