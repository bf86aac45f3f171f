"""kvwire's own request table as a trace: CSV or Parquet with ``arrival_s, prompt_tokens, output_tokens`` (a saved
``res.requests``, for instance), times in seconds kept as they are (not re-based to the first request).
"""

from __future__ import annotations

import polars as pl

from kvwire.traces.source import REQUIRED, SCAN_ERRORS, Plan, Source, csv_scan, fail, finite, first_line

#: The typed columns, for finding the first field that is not of its type.
TYPES: dict[str, type[pl.DataType]] = {"arrival_s": pl.Float64, "prompt_tokens": pl.Int64, "output_tokens": pl.Int64}


def parquet_source(path: str, wanted: str) -> Source:
    """A Parquet file checked to be a kvwire request table (``wanted``: the format asked for)."""
    if wanted not in ("auto", "kvwire"):
        raise fail(path, f"format {wanted!r} is a text format, but the file is Parquet (kvwire's own table)")
    try:
        schema = pl.read_parquet_schema(path)
    except SCAN_ERRORS as e:
        raise fail(path, f"not a readable Parquet file ({first_line(e)})") from None
    missing = [c for c in REQUIRED["kvwire"] if c not in schema]
    if missing:
        raise fail(path, f"not a kvwire request table: missing column(s) {', '.join(map(repr, missing))}")
    for name in REQUIRED["kvwire"]:
        dtype = schema[name]
        ok = dtype.is_numeric() if name == "arrival_s" else dtype.is_integer()
        if not ok:
            what = "numbers" if name == "arrival_s" else "whole numbers of tokens"
            raise fail(path, f"column has type {dtype}, expected {what}", column=name)
    return Source(path, "kvwire", "kvwire-parquet", "parquet", tuple(schema), False)


def plan(src: Source) -> Plan:
    """The lazy scan of a kvwire request table (CSV or Parquet)."""
    if src.kind == "parquet":
        base = pl.scan_parquet(src.path, row_index_name="_row")
    else:
        base = csv_scan(src, {"arrival_s": pl.Float64(), "prompt_tokens": pl.Int64(), "output_tokens": pl.Int64()})
    lazy = base.select(
        "_row",
        finite("arrival_s").cast(pl.Float64).alias("_t"),
        pl.col("prompt_tokens").cast(pl.Int64),
        pl.col("output_tokens").cast(pl.Int64),
    )
    names = {"_t": "arrival_s", "prompt_tokens": "prompt_tokens", "output_tokens": "output_tokens"}
    return Plan(src, lazy, 1.0, False, names)


__all__ = ["TYPES", "parquet_source", "plan"]
