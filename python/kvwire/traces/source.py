"""What every trace format shares: the format names and required columns, the :class:`Source` a detected file
is, the :class:`Plan` a format turns it into (one lazy Polars scan), and the errors that name a file, a line and a
column. The formats themselves are ``azure``, ``burstgpt``, ``mooncake`` and ``table`` (kvwire's own).

>>> print(fail("t.csv", "is not a number", 3, "Timestamp"))
t.csv: line 3, column 'Timestamp': is not a number
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from typing import IO, Literal, cast

import polars as pl

from kvwire.errors import TraceFileError

FORMATS = ("azure", "burstgpt", "mooncake", "kvwire")
NAMES = {"azure": "an Azure", "burstgpt": "a BurstGPT", "mooncake": "a Mooncake", "kvwire": "a kvwire"}
Kind = Literal["csv", "ndjson", "parquet"]

#: Columns each format needs (the file's own names).
REQUIRED: dict[str, tuple[str, str, str]] = {
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "burstgpt": ("Timestamp", "Request tokens", "Response tokens"),
    "mooncake": ("timestamp", "input_length", "output_length"),
    "kvwire": ("arrival_s", "prompt_tokens", "output_tokens"),
}

#: Everything Polars (or the file system underneath it) raises while scanning; a panic is not an Exception.
SCAN_ERRORS: tuple[type[BaseException], ...] = (
    pl.exceptions.PolarsError,
    pl.exceptions.PanicException,
    OSError,
    ValueError,
    zlib.error,
    EOFError,
)

#: The largest integer a 64-bit column holds.
INT64_MAX = 2**63 - 1
#: The largest token count a request may have (the core keeps lengths in 32 bits).
MAX_TOKENS = 2**32 - 1
TOKEN_RANGE = "token counts are below 2^32"


def quote(value: object, limit: int = 60) -> str:
    """``repr`` of an offending value, cut to about ``limit`` characters (a 100 MB field stays short)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def fail(file: str, reason: str, line: int | None = None, column: str | None = None) -> TraceFileError:
    """A :class:`TraceFileError` whose message starts with ``FILE: line L, column 'C':``."""
    where = ", ".join(
        part for part in (f"line {line}" if line is not None else "", f"column {column!r}" if column else "") if part
    )
    path = file + (f":{line}" if line is not None else "") + (f":{column}" if column else "")
    return TraceFileError(f"{file}: {where}: {reason}" if where else f"{file}: {reason}", path, file, line, column)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (Polars adds pages of hints), cut to 200 characters."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text if len(text) <= 200 else text[:197] + "..."


@dataclass(frozen=True)
class Source:
    """A trace file and what it holds.

    Attributes:
        path: the file as given.
        format: ``azure``, ``burstgpt``, ``mooncake`` or ``kvwire``.
        layout: the variant: ``azure``, ``azure-multimodal``, ``burstgpt``, ``burstgpt-session`` (with
            ``Session ID`` and ``Elapsed time``), ``mooncake``, ``kvwire-csv``, ``kvwire-parquet``.
        kind: ``csv``, ``ndjson`` or ``parquet``.
        columns: the CSV header or Parquet column names (empty for JSON Lines).
        compressed: gzip-compressed.
    """

    path: str
    format: str
    layout: str
    kind: Kind
    columns: tuple[str, ...] = ()
    compressed: bool = False


def open_binary(path: str, compressed: bool) -> IO[bytes]:
    """The file's (decompressed) bytes as a stream."""
    if compressed:
        return cast(IO[bytes], gzip.GzipFile(path, "rb"))
    return open(path, "rb")


@dataclass(frozen=True)
class Plan:
    """A lazy scan of a trace file and how to turn it into requests.

    ``lazy`` has ``_row`` (the 0-based data record the row comes from), ``_t`` (the file's time: integer
    nanoseconds for Azure, in 128 bits so that every year 0001-9999 and their differences are exact; float
    seconds for BurstGPT and kvwire, float milliseconds for Mooncake; null where the value is not a valid
    time), ``prompt_tokens``, ``output_tokens`` and the format's extra columns;
    the format's row filters are applied.
    """

    source: Source
    lazy: pl.LazyFrame
    #: arrival_s = (_t - t0) / divisor (1 for seconds; no re-basing for kvwire's own tables).
    divisor: float
    rebase: bool
    #: output column -> the file's column, for messages.
    names: dict[str, str]
    #: extra output columns (file column -> output name), kept when ``extra=True``.
    extras: dict[str, str] = field(default_factory=dict)
    #: the row filters, described for the "no requests" message.
    filters: str = ""


def csv_scan(src: Source, types: dict[str, pl.DataType]) -> pl.LazyFrame:
    return pl.scan_csv(
        src.path, infer_schema=False, schema_overrides=types, row_index_name="_row", raise_if_empty=False
    )


def finite(name: str) -> pl.Expr:
    """The column, null where it is not a finite number."""
    c = pl.col(name)
    return pl.when(c.is_finite()).then(c)


__all__ = [
    "FORMATS",
    "INT64_MAX",
    "MAX_TOKENS",
    "NAMES",
    "REQUIRED",
    "SCAN_ERRORS",
    "TOKEN_RANGE",
    "Plan",
    "Source",
    "csv_scan",
    "fail",
    "finite",
    "first_line",
    "open_binary",
    "quote",
]
