"""BurstGPT traces (every release): CSV ``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type``
(``BurstGPT_3`` adds ``Session ID`` and ``Elapsed time``), times in seconds; rows filtered by model and log type,
failed requests (no response tokens) dropped unless kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from kvwire.errors import TraceError
from kvwire.traces.source import Plan, Source, csv_scan, finite

#: The typed columns, for finding the first field that is not of its type.
TYPES: dict[str, type[pl.DataType]] = {
    "Timestamp": pl.Float64,
    "Request tokens": pl.Int64,
    "Response tokens": pl.Int64,
    "Elapsed time": pl.Float64,
}


def plan(src: Source, models: Sequence[str] | None, logs: Sequence[str] | None, keep_failed: bool, extra: bool) -> Plan:
    """The lazy scan of a BurstGPT CSV with its row filters (``extra`` keeps model, log type, session, elapsed)."""
    types: dict[str, pl.DataType] = {
        "Timestamp": pl.Float64(),
        "Request tokens": pl.Int64(),
        "Response tokens": pl.Int64(),
    }
    wanted = {"Model": "model", "Log Type": "log_type", "Session ID": "session_id", "Elapsed time": "elapsed_s"}
    extras = {c: n for c, n in wanted.items() if c in src.columns}
    if "Elapsed time" in extras:
        types["Elapsed time"] = pl.Float64()
    lf = csv_scan(src, types)
    filters = []
    for column, values, label in (("Model", models, "model"), ("Log Type", logs, "log_type")):
        if values is not None:
            if column not in src.columns:
                raise TraceError(f"{label}: {src.path} has no {column!r} column to filter on", label)
            lf = lf.filter(pl.col(column).is_in(values))
            filters.append(f"{label} in {list(values)}")
    if not keep_failed:
        lf = lf.filter((pl.col("Response tokens") != 0) | pl.col("Response tokens").is_null())
        filters.append("failed requests (Response tokens = 0) dropped")
    lazy = lf.select(
        "_row",
        finite("Timestamp").alias("_t"),
        pl.col("Request tokens").alias("prompt_tokens"),
        pl.col("Response tokens").alias("output_tokens"),
        *(pl.col(c).alias(n) for c, n in extras.items() if extra),
    )
    names = {"_t": "Timestamp", "prompt_tokens": "Request tokens", "output_tokens": "Response tokens"}
    return Plan(src, lazy, 1.0, True, names, extras, "; ".join(filters))


__all__ = ["TYPES", "plan"]
