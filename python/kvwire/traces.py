r"""Readers for public request traces, returning the request table :func:`kvwire.simulate` accepts
(``arrival_s``, ``prompt_tokens``, ``output_tokens``; arrivals relative to the first request).

Formats (``spec/traces.md``): the Azure LLM inference traces (CSV ``TIMESTAMP,ContextTokens,GeneratedTokens``,
wall-clock timestamps with up to 7 fractional digits, optionally a ``+00:00`` zone) and the Mooncake traces
(JSON Lines with ``timestamp`` in milliseconds, ``input_length``, ``output_length``).

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
>>> _ = p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
...     "2023-11-16 18:17:03.9799600,4808,10\r\n2023-11-16 18:17:04.0319600,3180,8")
>>> [round(t, 9) for t in read_azure_csv(p)["arrival_s"]]
[0.0, 0.052]
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl

from kvwire.errors import TraceError

_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")


def _check_sorted(df: pl.DataFrame, path: str) -> pl.DataFrame:
    if df.height == 0:
        raise TraceError(f"{path}: the trace has no requests", path)
    bad = df.select((pl.col("arrival_s").diff() < 0).arg_max()).item()
    if bad and df["arrival_s"][bad] < df["arrival_s"][bad - 1]:
        raise TraceError(f"{path}: row {bad} arrives before row {bad - 1}; traces must be time-ordered", path)
    return df


def _check_text(p: str) -> None:
    """Refuse a file that is not UTF-8 text (a binary file, or UTF-16 with its byte-order mark or NULs)."""
    try:
        with open(p, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise TraceError(f"{p}: cannot read trace: {e.strerror or e}", p) from None
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in head:
        raise TraceError(f"{p}: not UTF-8 text (UTF-16 or binary); traces are UTF-8 CSV or JSON Lines", p)


def read_azure_csv(path: str | Path) -> pl.DataFrame:
    """Read an Azure LLM inference trace (2023 or 2024 release)."""
    p = str(path)
    _check_text(p)
    try:
        raw = pl.read_csv(p, infer_schema=False)  # every column as text; parsed strictly below
    except (OSError, pl.exceptions.PolarsError) as e:
        raise TraceError(f"{p}: cannot read Azure CSV: {e}", p) from None
    missing = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} - set(raw.columns)
    if missing:
        raise TraceError(f"{p}: not an Azure LLM trace, missing columns {sorted(missing)}", p)
    # Drop a "+00:00" zone suffix, then parse up to nanoseconds (the 2023 files have 7 fractional digits).
    ts = (
        pl.col("TIMESTAMP")
        .str.strip_chars()
        .str.replace(r"\+00:00$", "")
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="ns", strict=False)
    )
    tokens = [
        pl.col(c).str.strip_chars().cast(pl.Int64, strict=False).alias(name)
        for c, name in (("ContextTokens", "prompt_tokens"), ("GeneratedTokens", "output_tokens"))
    ]
    df = raw.select(ts.alias("t"), *tokens)
    checks = (("t", "TIMESTAMP"), ("prompt_tokens", "ContextTokens"), ("output_tokens", "GeneratedTokens"))
    for col, source in checks:
        if df[col].null_count():
            i = int(df[col].is_null().arg_max() or 0)
            what = "timestamp" if col == "t" else "whole number of tokens"
            raise TraceError(f"{p}: row {i}: {source} {raw[source][i]!r} is not a {what}", f"{p}[{i}].{source}")
    out = df.select(
        ((pl.col("t") - pl.col("t").first()).dt.total_nanoseconds() / 1e9).alias("arrival_s"),
        pl.col("prompt_tokens"),
        pl.col("output_tokens"),
    )
    return _check_sorted(out, p)


def read_mooncake_jsonl(path: str | Path) -> pl.DataFrame:
    """Read a Mooncake trace (``timestamp`` ms, ``input_length``, ``output_length``; ``hash_ids`` ignored)."""
    p = str(path)
    _check_text(p)
    rows: list[tuple[float, int, int]] = []
    try:
        with open(p, encoding="utf-8") as f:
            for i, line in enumerate(f):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                    ts, inp, out = r["timestamp"], r["input_length"], r["output_length"]
                    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
                        raise TypeError(f"timestamp must be a finite number of milliseconds, got {ts!r}")
                    for name, v in (("input_length", inp), ("output_length", out)):
                        if isinstance(v, bool) or not isinstance(v, int):
                            raise TypeError(f"{name} must be a whole number of tokens, got {v!r}")
                        if not 0 <= v < 2**32:
                            raise TypeError(f"{name} must be a whole number of tokens below 2^32, got {v}")
                    rows.append((float(ts) / 1e3, inp, out))
                except RecursionError:
                    raise TraceError(f"{p}: line {i + 1}: nested too deeply", f"{p}:{i + 1}") from None
                except (ValueError, KeyError, TypeError, OverflowError) as e:
                    raise TraceError(f"{p}: line {i + 1}: not a Mooncake record ({e})", f"{p}:{i + 1}") from None
    except OSError as e:
        raise TraceError(f"{p}: cannot read Mooncake trace: {e}", p) from None
    except UnicodeDecodeError as e:
        raise TraceError(f"{p}: not UTF-8 text (byte {e.start}: {e.reason})", p) from None
    df = pl.DataFrame(
        rows,
        schema={"arrival_s": pl.Float64, "prompt_tokens": pl.Int64, "output_tokens": pl.Int64},
        orient="row",
    )
    if df.height:
        df = df.with_columns(pl.col("arrival_s") - pl.col("arrival_s").first())
    return _check_sorted(df, p)


def read_trace(path: str | Path) -> pl.DataFrame:
    """Read a trace by extension: ``.csv`` (Azure) or ``.jsonl`` (Mooncake)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return read_azure_csv(path)
    if suffix in (".jsonl", ".json"):
        return read_mooncake_jsonl(path)
    raise TraceError(f"{path}: unknown trace format (expected .csv for Azure or .jsonl for Mooncake)", str(path))


__all__ = ["read_azure_csv", "read_mooncake_jsonl", "read_trace"]
