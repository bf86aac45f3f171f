"""Latency distributions of a stored run, downsampled for a chart: the quantile function at a grid of fractions.

The values are numpy's ``"linear"`` quantiles (what the percentiles use), over the same requests: the measured
ones for TTFT, TPOT and E2E, every transferred request for the hand-off. The grid holds ``points`` evenly
spaced fractions (fewer when there are fewer requests) plus the named percentiles, so a chart's p50, p90, p95,
p99 and p99.9 are the summary's exactly.

>>> import polars as pl
>>> df = pl.DataFrame({"measured": [True] * 5, "ttft_s": [0.1, 0.2, 0.3, 0.4, 0.5], "tpot_s": [None] * 5,
...                    "e2e_s": [1.0] * 5, "handoff_s": [None] * 5}, schema_overrides={"tpot_s": pl.Float64,
...                    "handoff_s": pl.Float64})
>>> c = cdf(df, points=3)
>>> c["ttft_s"]["count"], [round(v, 3) for v in c["ttft_s"]["values_s"][:3]], c["ttft_s"]["fractions"][:3]
(5, [0.1, 0.3, 0.46], [0.0, 0.5, 0.9])
>>> c["tpot_s"]
{'count': 0, 'values_s': [], 'fractions': []}
"""

from __future__ import annotations

import numpy as np
import polars as pl

from kvwire_api.types import CdfDict, CdfSeriesDict

#: The fractions of the summary's named percentiles (p50 ... p99.9), always on the grid.
NAMED = (0.5, 0.9, 0.95, 0.99, 0.999)
#: Metrics over the measured requests; ``handoff_s`` is over every request that has one.
MEASURED = ("ttft_s", "tpot_s", "e2e_s")
#: Bounds of ``points``.
MIN_POINTS, MAX_POINTS = 2, 2000


def series(values: np.ndarray, points: int) -> CdfSeriesDict:
    """The quantiles of ``values`` (no NaN) at ``points`` evenly spaced fractions (at most one per value)
    and at :data:`NAMED`."""
    n = int(values.size)
    if n == 0:
        return {"count": 0, "values_s": [], "fractions": []}
    q = np.unique(np.concatenate((np.linspace(0.0, 1.0, min(points, n)), NAMED)))
    return {"count": n, "values_s": np.quantile(values, q).tolist(), "fractions": q.tolist()}


def cdf(requests: pl.DataFrame, points: int = 200) -> CdfDict:
    """The CDF of each latency of a per-request table (``measured``, ``ttft_s``, ``tpot_s``, ``e2e_s``,
    ``handoff_s`` columns, nulls where a stage did not happen)."""
    measured = requests.filter(pl.col("measured"))

    def values(df: pl.DataFrame, metric: str) -> np.ndarray:
        return df.get_column(metric).drop_nulls().drop_nans().to_numpy().astype(np.float64, copy=False)

    return {
        "ttft_s": series(values(measured, "ttft_s"), points),
        "tpot_s": series(values(measured, "tpot_s"), points),
        "e2e_s": series(values(measured, "e2e_s"), points),
        "handoff_s": series(values(requests, "handoff_s"), points),
    }


__all__ = ["MAX_POINTS", "MIN_POINTS", "NAMED", "cdf", "series"]
