"""Per-request prompt block hashes (Mooncake's ``hash_ids`` list column) as the CSR pair the core reads for
prefix caching: request ``r``'s ids are ``ids[offsets[r]:offsets[r + 1]]``, block ``i`` covering prompt tokens
``[512·i, 512·(i + 1))``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from kvwire.errors import ScenarioError, TraceError

#: The request-table column holding each request's block hashes (a list of integers per row).
HASH_COLUMN = "hash_ids"
#: Prompt tokens per hash block (Mooncake's layout; the core's ``HASH_BLOCK_TOKENS``).
HASH_BLOCK_TOKENS = 512


def hash_arrays(requests: pl.DataFrame | Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """The ``hash_ids`` column of a request table as ``(offsets, ids)`` int64 arrays (``offsets`` has one
    more entry than the table has rows), or ``None`` when the table has no such column. A null row has no
    blocks.

    Raises:
        TraceError: the column is not a list of integers, or a list holds a null (``path`` names the row).

    >>> import polars as pl
    >>> o, i = hash_arrays(pl.DataFrame({"hash_ids": [[0, 1], [], [0, 2, 3]]}))
    >>> o.tolist(), i.tolist()
    ([0, 2, 2, 5], [0, 1, 0, 2, 3])
    """
    if HASH_COLUMN not in (requests.columns if isinstance(requests, pl.DataFrame) else requests):
        return None
    col = requests[HASH_COLUMN]
    path = f"requests.{HASH_COLUMN}"
    try:
        s = col if isinstance(col, pl.Series) else pl.Series(HASH_COLUMN, col)
    except (TypeError, ValueError, pl.exceptions.PolarsError) as e:
        raise TraceError(f"{path}: expected a list of integer block hashes per row ({e})", path) from None
    if not isinstance(s.dtype, pl.List) or not (s.dtype.inner.is_integer() or s.dtype.inner == pl.Null):
        raise TraceError(f"{path}: expected a list of integer block hashes per row, got {s.dtype}", path)
    lens = s.list.len().fill_null(0).to_numpy().astype(np.int64)
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    flat = s.filter(pl.Series(lens > 0)).explode()
    if flat.null_count():
        k = int(flat.is_null().arg_max() or 0)
        r = int(np.searchsorted(offsets, k, side="right")) - 1
        raise TraceError(f"{path}[{r}]: block {k - offsets[r]} is null; block hashes are integers ≥ 0", f"{path}[{r}]")
    try:
        ids = flat.cast(pl.Int64, strict=True).to_numpy()
    except pl.exceptions.PolarsError:
        raise TraceError(f"{path}: a block hash is out of the int64 range", path) from None
    return offsets, np.ascontiguousarray(ids, dtype=np.int64)


def prefix_cache_enabled(scenario_text: str) -> bool:
    """Whether the scenario (the JSON text the core reads) turns prefix caching on.

    >>> prefix_cache_enabled('{"prefix_cache": {"enabled": true}}'), prefix_cache_enabled("{}")
    (True, False)
    """
    section = json.loads(scenario_text).get("prefix_cache")
    return isinstance(section, dict) and section.get("enabled") is True


def streamed_hashes_error() -> ScenarioError:
    """The error for prefix caching in a streamed run (``keep_requests=False``): chunks carry no hashes."""
    return ScenarioError(
        "prefix_cache.enabled: a streamed run (keep_requests=False) does not carry the trace's block hashes yet; "
        "run with keep_requests=None or True (the table is then held in memory)",
        "prefix_cache.enabled",
    )


__all__ = ["HASH_BLOCK_TOKENS", "HASH_COLUMN", "hash_arrays", "prefix_cache_enabled", "streamed_hashes_error"]
