"""Azure LLM inference traces (2023, 2024 and the 2025 multimodal release): CSV ``TIMESTAMP,ContextTokens,
GeneratedTokens`` (and ``NumImages``), wall-clock timestamps ``YYYY-MM-DD HH:MM:SS`` with 0-9 fractional digits and
an optional ``+00:00``, turned into integer nanoseconds (128-bit: any year from 0001 to 9999, exactly) and then
seconds after the first request.
"""

from __future__ import annotations

import polars as pl

from kvwire.traces.source import Plan, Source, csv_scan

#: How a timestamp must look (for the error that shows one that does not).
TIMESTAMP_FORM = "YYYY-MM-DD HH:MM:SS with up to 9 fractional digits and an optional +00:00"
#: The typed columns, for finding the first field that is not of its type.
TYPES: dict[str, type[pl.DataType]] = {"ContextTokens": pl.Int64, "GeneratedTokens": pl.Int64, "NumImages": pl.Int64}


def _nanoseconds(lf: pl.LazyFrame) -> pl.LazyFrame:
    """``_t``: integer nanoseconds since the epoch of an Azure TIMESTAMP (null if it is not one) — the minute
    parsed as a date-time plus the seconds (any fraction, ``+00:00`` removed) as a number rounded to the
    nanosecond. The parts are columns of their own so that Polars computes each once.

    In 128 bits: 64-bit nanoseconds hold only the years 1678 to 2262 and differences of 292 years, and a
    timestamp of year 0001 or 9999 would wrap around (a wrong arrival time, not an error); Int128 holds every
    year ``%Y`` reads, and their differences, exactly. The minute is parsed in milliseconds (years ±292
    million) and widened before it is scaled."""
    ts = pl.col("TIMESTAMP")
    minute = ts.str.slice(0, 16).str.to_datetime("%Y-%m-%d %H:%M", time_unit="ms", strict=False)
    lf = lf.with_columns(
        _minute=minute.cast(pl.Int64).cast(pl.Int128) * 1_000_000,
        _sec=ts.str.slice(17).str.strip_suffix("+00:00").cast(pl.Float64, strict=False),
        _colon=ts.str.slice(16, 1) == ":",
    )
    sec = pl.col("_sec")
    ok = pl.col("_colon") & (sec >= 0) & (sec < 60)
    return lf.with_columns(_t=pl.when(ok).then(pl.col("_minute") + (sec * 1e9).round().cast(pl.Int64)))


def plan(src: Source, extra: bool) -> Plan:
    """The lazy scan of an Azure CSV (``extra`` keeps ``NumImages`` as ``num_images``)."""
    types: dict[str, pl.DataType] = {"ContextTokens": pl.Int64(), "GeneratedTokens": pl.Int64()}
    extras = {"NumImages": "num_images"} if "NumImages" in src.columns else {}
    types.update({c: pl.Int64() for c in extras})
    lazy = _nanoseconds(csv_scan(src, types)).select(
        "_row",
        "_t",
        pl.col("ContextTokens").alias("prompt_tokens"),
        pl.col("GeneratedTokens").alias("output_tokens"),
        *(pl.col(c).alias(n) for c, n in extras.items() if extra),
    )
    names = {"_t": "TIMESTAMP", "prompt_tokens": "ContextTokens", "output_tokens": "GeneratedTokens"}
    return Plan(src, lazy, 1e9, True, names, extras)


__all__ = ["TIMESTAMP_FORM", "TYPES", "plan"]
