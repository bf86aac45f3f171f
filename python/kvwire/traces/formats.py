r"""Trace file formats: what a file is (detected from its first bytes), how each format becomes one lazy
Polars scan, and — when Polars refuses a file — where it goes wrong (file, line, column).

The public readers are in :mod:`kvwire.traces`; this module is their machinery. Formats (``spec/traces.md``):

========== ============================================================ ======================================
format     file                                                         time column → ``arrival_s``
========== ============================================================ ======================================
azure      CSV ``TIMESTAMP,ContextTokens,GeneratedTokens`` (2023, 2024; wall clock ``YYYY-MM-DD HH:MM:SS`` with
           2025 multimodal adds ``NumImages``)                          0-9 fractional digits and an optional
                                                                        ``+00:00``; integer nanoseconds
burstgpt   CSV ``Timestamp,Model,Request tokens,Response tokens,Total   seconds (``Timestamp``)
           tokens,Log Type``; ``BurstGPT_3`` adds ``Session ID`` and
           ``Elapsed time``
mooncake   JSON Lines ``timestamp`` (ms), ``input_length``,             milliseconds
           ``output_length``, ``hash_ids``
kvwire     CSV or Parquet with ``arrival_s, prompt_tokens,              seconds, kept as they are (not
           output_tokens`` (e.g. a saved ``res.requests``)              re-based to the first request)
========== ============================================================ ======================================

Any text format may be gzip-compressed (detected from the magic bytes, not the name).

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
>>> _ = p.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
...                  "5,ChatGPT,472,18,490,Conversation log\n")
>>> detect(p).format
'burstgpt'
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, cast

import polars as pl

from kvwire.errors import TraceError, TraceFileError

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

_HEAD_BYTES = 1 << 16
_INT64_MAX = 2**63 - 1
#: The largest token count a request may have (the core keeps lengths in 32 bits).
MAX_TOKENS = 2**32 - 1
TOKEN_RANGE = "token counts are below 2^32"
_TIMESTAMP_FORM = "YYYY-MM-DD HH:MM:SS with up to 9 fractional digits and an optional +00:00"


# --------------------------------------------------------------------------------------------------
# Errors


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


# --------------------------------------------------------------------------------------------------
# Detection


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


def _head(path: str, compressed: bool) -> bytes:
    try:
        with open_binary(path, compressed) as f:
            return f.read(_HEAD_BYTES)
    except (OSError, EOFError, zlib.error) as e:
        if compressed:
            raise fail(path, f"not a readable gzip file ({first_line(e)})") from None
        raise fail(path, f"cannot read the file: {getattr(e, 'strerror', None) or first_line(e)}") from None


def _position(data: bytes, offset: int) -> tuple[int, int]:
    """1-based (line, byte column) of a byte offset."""
    return data.count(b"\n", 0, offset) + 1, offset - (data.rfind(b"\n", 0, offset) + 1) + 1


def _check_text(path: str, head: bytes, truncated: bool) -> str:
    """The head decoded as UTF-8 (cut at its last full line when truncated), or a clear error for UTF-16/32,
    binary data and invalid UTF-8."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or (b"\x00" in head[:200] and _looks_utf16(head[:200])):
        raise fail(path, "not UTF-8 text: the file is UTF-16 encoded (convert it, e.g. `iconv -f UTF-16 -t UTF-8`)")
    nul = head.find(b"\x00")
    if nul >= 0:
        line, col = _position(head, nul)
        raise fail(path, f"not UTF-8 text: binary data (a NUL byte at character {col})", line)
    if truncated:
        cut = head.rfind(b"\n")
        head = head[: cut + 1] if cut >= 0 else head[: max(0, len(head) - 3)]
    try:
        return head.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        start = e.start + (3 if head.startswith(b"\xef\xbb\xbf") else 0)
        line, col = _position(head, start)
        raise fail(path, f"not UTF-8 text (byte 0x{head[start]:02x} at character {col})", line) from None


def _looks_utf16(sample: bytes) -> bool:
    """Mostly ASCII text with every other byte NUL: UTF-16 without a byte-order mark."""
    even, odd = sample[0::2], sample[1::2]
    return max(even.count(0), odd.count(0)) >= 0.4 * len(sample) / 2


def _csv_header(line: str) -> tuple[str, ...]:
    return tuple(next(csv.reader([line])))


def _csv_format(path: str, header: tuple[str, ...], wanted: str) -> tuple[str, str]:
    """(format, layout) of a CSV header; a missing required column is an error naming them."""
    names = set(header)
    if wanted == "auto":
        signatures = (("azure", "ContextTokens"), ("burstgpt", "Request tokens"), ("kvwire", "arrival_s"))
        found = next((fmt for fmt, key in signatures if key in names), None)
        if found is None:
            raise fail(
                path,
                f"unknown trace format: the header {quote(','.join(header))} is not Azure "
                "(TIMESTAMP,ContextTokens,GeneratedTokens), BurstGPT (Timestamp,...,Request tokens,Response "
                "tokens,...) or kvwire (arrival_s,prompt_tokens,output_tokens), and the file is not JSON Lines "
                "(Mooncake); pass the format explicitly",
                1,
            )
        wanted = found
    if wanted == "mooncake":
        raise fail(path, "format 'mooncake' expects JSON Lines, but the file starts with a CSV header", 1)
    missing = [c for c in REQUIRED[wanted] if c not in names]
    if missing:
        raise fail(
            path,
            f"not {NAMES[wanted]} trace: missing column(s) {', '.join(map(repr, missing))} "
            f"(the header is {quote(','.join(header), 200)})",
            1,
        )
    layout = {
        "azure": "azure-multimodal" if "NumImages" in names else "azure",
        "burstgpt": "burstgpt-session" if "Session ID" in names else "burstgpt",
        "kvwire": "kvwire-csv",
    }[wanted]
    return wanted, layout


def _parquet(path: str, wanted: str) -> Source:
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


def detect(path: str | Path, format: str = "auto") -> Source:
    """Open ``path`` and tell what trace it is, from the magic bytes and the first line; with ``format``
    given, check that the file is one.

    Raises:
        TraceFileError: unreadable, empty, not UTF-8 text (UTF-16, binary), an unknown header or one
            missing a required column, a first line that is not a JSON object.
        TraceError: ``format`` is not one of ``auto`` and :data:`FORMATS` (``path`` ``"format"``).
    """
    p = str(path)
    if format not in ("auto", *FORMATS):
        raise TraceError(
            f"format: unknown trace format {format!r}; expected one of auto, {', '.join(FORMATS)}", "format"
        )
    if Path(p).is_dir():
        raise fail(p, "is a directory, not a trace file")
    try:
        with open(p, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise fail(p, f"cannot read the file: {e.strerror or first_line(e)}") from None
    if magic == b"PAR1":
        return _parquet(p, format)
    compressed = magic[:2] == b"\x1f\x8b"
    head = _head(p, compressed)
    if compressed and head.startswith(b"PAR1"):
        raise fail(p, "a gzip-compressed Parquet file: decompress it first")
    if not head.strip():
        raise fail(p, "the file is empty" if not head else "the file has only blank lines, no requests")
    text = _check_text(p, head, truncated=len(head) == _HEAD_BYTES)
    lines = text.splitlines()
    number, first = next(((i + 1, s) for i, s in enumerate(lines) if s.strip()), (1, text))
    if first.lstrip().startswith(("{", "[")):
        if format not in ("auto", "mooncake"):
            raise fail(p, f"format {format!r} expects a CSV header, but the file holds JSON lines", number)
        if head.startswith(b"\xef\xbb\xbf"):
            raise fail(p, "a UTF-8 byte-order mark starts the file, which JSON Lines do not allow: remove it", 1)
        if number < len(lines) or len(head) < _HEAD_BYTES:  # the first line is complete: check it now
            try:
                record = json.loads(first)
            except json.JSONDecodeError as e:
                raise fail(p, f"invalid JSON at character {e.colno}: {e.msg}", number) from None
            except RecursionError:
                record = {}  # too deep for Python's parser: left to Polars' (and refused by it if need be)
            if not isinstance(record, dict):
                raise fail(p, f"not a JSON object (a Mooncake record), got {quote(first)}", number)
        return Source(p, "mooncake", "mooncake", "ndjson", (), compressed)
    if number != 1:
        raise fail(p, "the file starts with a blank line; the CSV header must be the first line", 1)
    header = _csv_header(first)
    fmt, layout = _csv_format(p, header, format)
    return Source(p, fmt, layout, "csv", header, compressed)


# --------------------------------------------------------------------------------------------------
# One lazy scan per format


@dataclass(frozen=True)
class Plan:
    """A lazy scan of a trace file and how to turn it into requests.

    ``lazy`` has ``_row`` (the 0-based data record the row comes from), ``_t`` (the file's time: integer
    nanoseconds for Azure, float seconds for BurstGPT and kvwire, float milliseconds for Mooncake; null where
    the value is not a valid time), ``prompt_tokens``, ``output_tokens`` and the format's extra columns;
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


def _as_tuple(value: str | Sequence[str] | None, name: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    values = (value,) if isinstance(value, str) else tuple(value)
    if not values or not all(isinstance(v, str) for v in values):
        raise TraceError(f"{name}: expected a string or a non-empty list of strings, got {quote(value)}", name)
    return values


def _csv_scan(src: Source, types: dict[str, pl.DataType]) -> pl.LazyFrame:
    return pl.scan_csv(
        src.path, infer_schema=False, schema_overrides=types, row_index_name="_row", raise_if_empty=False
    )


def _azure_ns(lf: pl.LazyFrame) -> pl.LazyFrame:
    """``_t``: integer nanoseconds since the epoch of an Azure TIMESTAMP (null if it is not one) — the minute
    parsed as a date-time plus the seconds (any fraction, ``+00:00`` removed) as a number rounded to the
    nanosecond. The parts are columns of their own so that Polars computes each once."""
    ts = pl.col("TIMESTAMP")
    lf = lf.with_columns(
        _minute=ts.str.slice(0, 16).str.to_datetime("%Y-%m-%d %H:%M", time_unit="ns", strict=False).cast(pl.Int64),
        _sec=ts.str.slice(17).str.strip_suffix("+00:00").cast(pl.Float64, strict=False),
        _colon=ts.str.slice(16, 1) == ":",
    )
    sec = pl.col("_sec")
    ok = pl.col("_colon") & (sec >= 0) & (sec < 60)
    return lf.with_columns(_t=pl.when(ok).then(pl.col("_minute") + (sec * 1e9).round().cast(pl.Int64)))


def _finite(name: str) -> pl.Expr:
    c = pl.col(name)
    return pl.when(c.is_finite()).then(c)


def plan(
    src: Source,
    *,
    model: str | Sequence[str] | None = None,
    log_type: str | Sequence[str] | None = None,
    keep_failed: bool = False,
    extra: bool = True,
) -> Plan:
    """The lazy scan of ``src`` (nothing is read yet). ``model``/``log_type``/``keep_failed`` filter BurstGPT
    rows and are refused for other formats; ``extra`` keeps the format's extra columns."""
    models, logs = _as_tuple(model, "model"), _as_tuple(log_type, "log_type")
    if src.format != "burstgpt":
        for name, given in (
            ("model", models is not None),
            ("log_type", logs is not None),
            ("keep_failed", keep_failed),
        ):
            if given:
                raise TraceError(f"{name}: only BurstGPT traces have this filter; {src.path} is {src.format}", name)
    if src.format == "azure":
        types: dict[str, pl.DataType] = {"ContextTokens": pl.Int64(), "GeneratedTokens": pl.Int64()}
        extras = {"NumImages": "num_images"} if "NumImages" in src.columns else {}
        types.update({c: pl.Int64() for c in extras})
        lazy = _azure_ns(_csv_scan(src, types)).select(
            "_row",
            "_t",
            pl.col("ContextTokens").alias("prompt_tokens"),
            pl.col("GeneratedTokens").alias("output_tokens"),
            *(pl.col(c).alias(n) for c, n in extras.items() if extra),
        )
        names = {"_t": "TIMESTAMP", "prompt_tokens": "ContextTokens", "output_tokens": "GeneratedTokens"}
        return Plan(src, lazy, 1e9, True, names, extras)
    if src.format == "burstgpt":
        types = {"Timestamp": pl.Float64(), "Request tokens": pl.Int64(), "Response tokens": pl.Int64()}
        wanted = {"Model": "model", "Log Type": "log_type", "Session ID": "session_id", "Elapsed time": "elapsed_s"}
        extras = {c: n for c, n in wanted.items() if c in src.columns}
        if "Elapsed time" in extras:
            types["Elapsed time"] = pl.Float64()
        lf = _csv_scan(src, types)
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
            _finite("Timestamp").alias("_t"),
            pl.col("Request tokens").alias("prompt_tokens"),
            pl.col("Response tokens").alias("output_tokens"),
            *(pl.col(c).alias(n) for c, n in extras.items() if extra),
        )
        names = {"_t": "Timestamp", "prompt_tokens": "Request tokens", "output_tokens": "Response tokens"}
        return Plan(src, lazy, 1.0, True, names, extras, "; ".join(filters))
    if src.format == "mooncake":
        schema = {
            "timestamp": pl.Float64(),
            "input_length": pl.Int64(),
            "output_length": pl.Int64(),
            "hash_ids": pl.List(pl.Int64()),
        }
        lazy = pl.scan_ndjson(src.path, schema=schema, row_index_name="_row").select(
            "_row",
            _finite("timestamp").alias("_t"),
            pl.col("input_length").alias("prompt_tokens"),
            pl.col("output_length").alias("output_tokens"),
            *([pl.col("hash_ids")] if extra else []),
        )
        names = {"_t": "timestamp", "prompt_tokens": "input_length", "output_tokens": "output_length"}
        return Plan(src, lazy, 1e3, True, names, {"hash_ids": "hash_ids"})
    # kvwire's own request table
    if src.kind == "parquet":
        base = pl.scan_parquet(src.path, row_index_name="_row")
    else:
        base = _csv_scan(src, {"arrival_s": pl.Float64(), "prompt_tokens": pl.Int64(), "output_tokens": pl.Int64()})
    lazy = base.select(
        "_row",
        _finite("arrival_s").cast(pl.Float64).alias("_t"),
        pl.col("prompt_tokens").cast(pl.Int64),
        pl.col("output_tokens").cast(pl.Int64),
    )
    names = {"_t": "arrival_s", "prompt_tokens": "prompt_tokens", "output_tokens": "output_tokens"}
    return Plan(src, lazy, 1.0, False, names)


# --------------------------------------------------------------------------------------------------
# Where a file goes wrong (error paths only: they may read the file again, in Polars or line by line)


def line_of(src: Source, row: int) -> int | None:
    """The 1-based line of data record ``row`` (``None`` for Parquet): the header is line 1 of a CSV file;
    JSON Lines skip blank lines, so they are counted."""
    if src.kind == "csv":
        return row + 2
    if src.kind == "parquet":
        return None
    return _ndjson_record(src, row)[0]


def _ndjson_lines(src: Source) -> Iterator[tuple[int, str]]:
    with open_binary(src.path, src.compressed) as raw, io.TextIOWrapper(raw, encoding="utf-8-sig") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                yield number, line


def _ndjson_record(src: Source, row: int) -> tuple[int, Any]:
    for i, (number, line) in enumerate(_ndjson_lines(src)):
        if i == row:
            try:
                return number, json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                return number, None
    return 0, None


def raw_record(src: Source, row: int) -> dict[str, Any]:
    """Data record ``row`` as the file has it (CSV fields as text, JSON values as parsed)."""
    if src.kind == "ndjson":
        record = _ndjson_record(src, row)[1]
        return record if isinstance(record, dict) else {}
    if src.kind == "parquet":
        return pl.scan_parquet(src.path).slice(row, 1).collect().to_dicts()[0]
    frame = pl.scan_csv(src.path, infer_schema=False, row_index_name="_row").filter(pl.col("_row") == row).collect()
    return frame.to_dicts()[0] if frame.height else {}


def bad_value(src: Source, plan_: Plan, row: int, column: str) -> TraceFileError:
    """The error for a null in output ``column`` at data record ``row``: what the file has there and why it
    is not acceptable."""
    name = plan_.names[column]
    raw = raw_record(src, row).get(name)
    line = line_of(src, row)
    where = f"row {row + 1}: " if line is None else ""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        what = "the field is missing or null" if src.kind == "ndjson" else "the value is empty"
        return fail(src.path, f"{where}{what}", line, name)
    if column == "_t":
        if src.format == "azure":
            return fail(src.path, f"{where}{quote(raw)} is not a timestamp ({_TIMESTAMP_FORM})", line, name)
        unit = "milliseconds" if src.format == "mooncake" else "seconds"
        return fail(src.path, f"{where}{quote(raw)} is not a finite number of {unit}", line, name)
    return fail(src.path, f"{where}{quote(raw)} is not a whole number of tokens", line, name)


def diagnose(src: Source, exc: BaseException) -> TraceFileError:
    """Why Polars could not scan ``src``: the first invalid UTF-8 byte, the first value that is not of its
    column's type, a line with too many fields, invalid JSON — each with its line and column — or, failing
    all of these, Polars' own first line of explanation."""
    if src.kind == "parquet":
        return fail(src.path, f"cannot read the Parquet file ({first_line(exc)})")
    found = _bad_utf8(src)
    if found is None and src.kind == "csv":
        found = _bad_csv_value(src) or _bad_csv_shape(src)
    elif found is None:
        found = _bad_json_line(src)
    return found or fail(src.path, f"cannot be read as {NAMES[src.format]} trace ({first_line(exc)})")


def _bad_utf8(src: Source) -> TraceFileError | None:
    line, carry, chunk_size = 1, b"", 1 << 20
    with open_binary(src.path, src.compressed) as f:
        while True:
            chunk = f.read(chunk_size)
            buf = carry + chunk
            if not buf:
                return None
            cut = buf.rfind(b"\n") + 1 if chunk else len(buf)
            if cut == 0 and len(buf) > 4 * chunk_size:
                cut = len(buf) - 3
            part, carry = buf[:cut], buf[cut:]
            try:
                part.decode("utf-8")
            except UnicodeDecodeError as e:
                at_line, col = _position(part, e.start)
                return fail(
                    src.path, f"not UTF-8 text (byte 0x{part[e.start]:02x} at character {col})", line + at_line - 1
                )
            line += part.count(b"\n")
            if not chunk:
                return None


def _bad_csv_value(src: Source) -> TraceFileError | None:
    """The first field that does not parse as its column's type, found by a second scan of every field as
    text (vectorised)."""
    by_format: dict[str, dict[str, type[pl.DataType]]] = {
        "azure": {"ContextTokens": pl.Int64, "GeneratedTokens": pl.Int64, "NumImages": pl.Int64},
        "burstgpt": {
            "Timestamp": pl.Float64,
            "Request tokens": pl.Int64,
            "Response tokens": pl.Int64,
            "Elapsed time": pl.Float64,
        },
        "kvwire": {"arrival_s": pl.Float64, "prompt_tokens": pl.Int64, "output_tokens": pl.Int64},
    }
    typed = {c: t for c, t in by_format[src.format].items() if c in src.columns}
    try:
        raw = pl.scan_csv(src.path, infer_schema=False, row_index_name="_row", truncate_ragged_lines=True)
        firsts = raw.select(
            pl.col("_row").filter(pl.col(c).is_not_null() & pl.col(c).cast(t, strict=False).is_null()).min().alias(c)
            for c, t in typed.items()
        ).collect()
    except SCAN_ERRORS:
        return None
    hits = [(row, c) for c, row in firsts.row(0, named=True).items() if row is not None]
    if not hits:
        return None
    row, column = min(hits)
    value = str(raw_record(src, row).get(column))
    if typed[column] == pl.Float64:
        return fail(src.path, f"{quote(value)} is not a number", row + 2, column)
    digits = value.strip().lstrip("+-")
    too_big = digits.isdigit() and int(digits) > _INT64_MAX
    reason = f"is out of range ({TOKEN_RANGE})" if too_big else "is not a whole number of tokens"
    return fail(src.path, f"{quote(value)} {reason}", row + 2, column)


def _bad_csv_shape(src: Source) -> TraceFileError | None:
    with open_binary(src.path, src.compressed) as raw, io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        width = len(next(reader, []))
        for record in reader:
            if len(record) > width:
                return fail(src.path, f"has {len(record)} fields, but the header has {width}", reader.line_num)
    return None


def _bad_json_line(src: Source) -> TraceFileError | None:
    names = REQUIRED["mooncake"]
    for number, line in _ndjson_lines(src):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            return fail(src.path, f"invalid JSON at character {e.colno}: {e.msg}", number)
        except RecursionError:
            return fail(src.path, "JSON nested too deeply (a Mooncake record is one flat object)", number)
        if not isinstance(record, dict):
            return fail(src.path, f"not a JSON object (a Mooncake record), got {quote(line.strip())}", number)
        for name in names:
            value = record.get(name)
            if value is None:
                continue  # reported as missing by the row check
            if name == "timestamp":
                ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
                if not ok:
                    return fail(src.path, f"{quote(value)} is not a number of milliseconds", number, name)
            elif isinstance(value, bool) or not isinstance(value, int):
                return fail(src.path, f"{quote(value)} is not a whole number of tokens", number, name)
            elif abs(value) > _INT64_MAX:
                return fail(src.path, f"{quote(value)} is out of range ({TOKEN_RANGE})", number, name)
        ids = record.get("hash_ids")
        if ids is not None:
            good = isinstance(ids, list) and all(
                isinstance(i, int) and not isinstance(i, bool) and abs(i) <= _INT64_MAX for i in ids
            )
            if not good:
                return fail(src.path, f"{quote(ids)} is not a list of integer block hashes", number, "hash_ids")
    return None


__all__ = ["FORMATS", "REQUIRED", "Plan", "Source", "detect", "diagnose", "plan"]
