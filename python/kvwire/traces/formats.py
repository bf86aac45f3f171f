r"""Trace file formats: what a file is (detected from its first bytes), which format module turns it into one lazy
Polars scan (``azure``, ``burstgpt``, ``mooncake``, ``table``), and — when Polars refuses a file — where it goes
wrong (file, line, column).

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
import io
import json
import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from kvwire.errors import TraceError, TraceFileError
from kvwire.traces import azure, burstgpt, mooncake, table
from kvwire.traces.source import (
    FORMATS,
    INT64_MAX,
    NAMES,
    REQUIRED,
    SCAN_ERRORS,
    TOKEN_RANGE,
    Plan,
    Source,
    fail,
    first_line,
    open_binary,
    quote,
)

#: Bytes read to tell a file's format (and check it is text).
HEAD_BYTES = 1 << 16


#: Magic bytes of the compressions kvwire does not read (gzip is read; Parquet compresses itself).
OTHER_COMPRESSIONS: tuple[tuple[bytes, str, str], ...] = (
    (b"\x28\xb5\x2f\xfd", "zstd", "zstd -d"),
    (b"\xfd7zXZ\x00", "xz", "xz -d"),
    (b"BZh", "bzip2", "bzip2 -d"),
    (b"\x04\x22\x4d\x18", "lz4", "lz4 -d"),
    (b"PK\x03\x04", "zip", "unzip"),
    (b"PK\x05\x06", "zip", "unzip"),
    (b"7z\xbc\xaf\x27\x1c", "7z", "7z x"),
)
#: Bytes read from the start of a file to tell Parquet, gzip and the other compressions apart.
MAGIC_BYTES = 8
#: What the readers take, for the messages that refuse something else.
SUPPORTED = "plain UTF-8 text (CSV or JSON Lines), gzip-compressed text, or Parquet"


def other_compression(path: str, magic: bytes, inside_gzip: bool = False) -> TraceFileError | None:
    """The error for a file compressed by something other than gzip (zstd, xz, bzip2, lz4, zip, 7z; told by
    its magic bytes), or ``None``; ``inside_gzip``: ``magic`` is the start of a gzip file's content.

    >>> e = other_compression("t.csv.zst", bytes.fromhex("28b52ffd0400"))
    >>> str(e)[:60]
    't.csv.zst: the file is zstd-compressed data, which kvwire do'
    >>> other_compression("t.csv", b"arrival_") is None
    True
    """
    for prefix, name, command in OTHER_COMPRESSIONS:
        if magic.startswith(prefix):
            held = f"a {name} archive" if name in ("zip", "7z") else f"{name}-compressed data"
            what = f"the gzip file holds {held}" if inside_gzip else f"the file is {held}"
            return fail(
                path,
                f"{what}, which kvwire does not read: it reads {SUPPORTED}; decompress it first ({command})"
                + ("" if name in ("zip", "7z") else " or recompress it with gzip"),
            )
    return None


def gzip_reason(e: BaseException) -> str:
    """Why a gzip stream could not be read: cut short (``EOFError``) or corrupt (a bad CRC, bad data)."""
    if isinstance(e, EOFError):
        return (
            "the gzip file is truncated: its compressed data ends before the gzip end-of-stream marker (it was "
            "cut short, e.g. by an interrupted download or copy); fetch or copy it again"
        )
    return f"the gzip file is corrupt ({first_line(e)}); fetch or copy it again"


def gzip_error(src: Source) -> TraceFileError | None:
    """The error for a gzip file whose stream is cut short or corrupt, found by decompressing it all (an
    error path: what Polars refused is explained before any line-by-line reading), or ``None`` if it reads."""
    if not src.compressed:
        return None
    size = 0
    try:
        with open_binary(src.path, True) as f:
            while chunk := f.read(1 << 20):
                size += len(chunk)
    except (OSError, EOFError, zlib.error) as e:
        return fail(src.path, f"{gzip_reason(e)} ({size:,} bytes decompressed before it ends)")
    return None


def _head(path: str, compressed: bool) -> bytes:
    try:
        with open_binary(path, compressed) as f:
            return f.read(HEAD_BYTES)
    except (OSError, EOFError, zlib.error) as e:
        if compressed:
            raise fail(path, gzip_reason(e)) from None
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
    """Mostly ASCII text with every other byte NUL: UTF-16 without a byte-order mark (the bytes between the
    NULs mostly not NUL, so that a run of NULs — a zeroed file — is binary data, not UTF-16).

    >>> _looks_utf16("arrival_s".encode("utf-16-le")), _looks_utf16(bytes(10))
    (True, False)
    """
    even, odd = sample[0::2], sample[1::2]
    half = len(sample) / 2
    nuls = sorted((even.count(0), odd.count(0)))
    return nuls[1] >= 0.4 * half and nuls[0] <= 0.1 * half


#: The optional columns each CSV format reads (a header naming one of these, or a required one, twice is refused).
_EXTRA_COLUMNS: dict[str, tuple[str, ...]] = {
    "azure": ("NumImages",),
    "burstgpt": ("Model", "Log Type", "Session ID", "Elapsed time"),
    "kvwire": (),
}


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
    used = (*REQUIRED[wanted], *_EXTRA_COLUMNS[wanted])
    twice = next((c for c in used if header.count(c) > 1), None)
    if twice is not None:
        raise fail(path, f"the header names column {twice!r} twice; which one holds the values is ambiguous", 1)
    layout = {
        "azure": "azure-multimodal" if "NumImages" in names else "azure",
        "burstgpt": "burstgpt-session" if "Session ID" in names else "burstgpt",
        "kvwire": "kvwire-csv",
    }[wanted]
    return wanted, layout


def detect(path: str | Path, format: str = "auto") -> Source:
    """Open ``path`` and tell what trace it is, from the magic bytes and the first line; with ``format``
    given, check that the file is one.

    Raises:
        TraceFileError: unreadable, empty, not UTF-8 text (UTF-16, binary), an unknown header or one
            missing a required column, a first line that is not a JSON object.
        TraceError: ``format`` is not one of ``auto`` and :data:`FORMATS` (``path`` ``"format"``).
    """
    if not isinstance(path, str | os.PathLike) or isinstance(path, bytes):
        raise TraceError(f"path: expected the path of a trace file (a str or pathlib.Path), got {quote(path)}", "path")
    p = os.fspath(path)
    if not isinstance(p, str):
        raise TraceError(f"path: expected the path of a trace file (a str or pathlib.Path), got {quote(path)}", "path")
    if format not in ("auto", *FORMATS):
        raise TraceError(
            f"format: unknown trace format {format!r}; expected one of auto, {', '.join(FORMATS)}", "format"
        )
    if Path(p).is_dir():
        raise fail(p, "is a directory, not a trace file")
    try:
        with open(p, "rb") as f:
            magic = f.read(MAGIC_BYTES)
    except OSError as e:
        raise fail(p, f"cannot read the file: {e.strerror or first_line(e)}") from None
    if magic.startswith(b"PAR1"):
        return table.parquet_source(p, format)
    other = other_compression(p, magic)
    if other is not None:
        raise other
    compressed = magic[:2] == b"\x1f\x8b"
    head = _head(p, compressed)
    if compressed and head.startswith(b"PAR1"):
        raise fail(p, "a gzip-compressed Parquet file: decompress it first")
    other = other_compression(p, head, inside_gzip=True) if compressed else None
    if other is not None:
        raise other
    if not head.strip():
        raise fail(p, "the file is empty" if not head else "the file has only blank lines, no requests")
    text = _check_text(p, head, truncated=len(head) == HEAD_BYTES)
    lines = text.splitlines()
    number, first = next(((i + 1, s) for i, s in enumerate(lines) if s.strip()), (1, text))
    if first.lstrip().startswith(("{", "[")):
        if format not in ("auto", "mooncake"):
            raise fail(p, f"format {format!r} expects a CSV header, but the file holds JSON lines", number)
        if head.startswith(b"\xef\xbb\xbf"):
            raise fail(p, "a UTF-8 byte-order mark starts the file, which JSON Lines do not allow: remove it", 1)
        if number < len(lines) or len(head) < HEAD_BYTES:  # the first line is complete: check it now
            try:
                record = mooncake.loads(first)
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


def _as_tuple(value: str | Sequence[str] | None, name: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    values = (value,) if isinstance(value, str) else tuple(value)
    if not values or not all(isinstance(v, str) for v in values):
        raise TraceError(f"{name}: expected a string or a non-empty list of strings, got {quote(value)}", name)
    return values


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
        return azure.plan(src, extra)
    if src.format == "burstgpt":
        return burstgpt.plan(src, models, logs, keep_failed, extra)
    if src.format == "mooncake":
        return mooncake.plan(src, extra)
    return table.plan(src)


# --------------------------------------------------------------------------------------------------
# Where a file goes wrong (error paths only: they may read the file again, in Polars or line by line)


def line_of(src: Source, row: int) -> int | None:
    """The 1-based line of data record ``row`` (``None`` for Parquet): the header is line 1 of a CSV file;
    JSON Lines skip blank lines, so they are counted."""
    if src.kind == "csv":
        return row + 2
    if src.kind == "parquet":
        return None
    return mooncake.record(src, row)[0]


def raw_record(src: Source, row: int) -> dict[str, Any]:
    """Data record ``row`` as the file has it (CSV fields as text, JSON values as parsed)."""
    if src.kind == "ndjson":
        record = mooncake.record(src, row)[1]
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
            return fail(src.path, f"{where}{quote(raw)} is not a timestamp ({azure.TIMESTAMP_FORM})", line, name)
        unit = "milliseconds" if src.format == "mooncake" else "seconds"
        return fail(src.path, f"{where}{quote(raw)} is not a finite number of {unit}", line, name)
    return fail(src.path, f"{where}{quote(raw)} is not a whole number of tokens", line, name)


def diagnose(src: Source, exc: BaseException) -> TraceFileError:
    """Why Polars could not scan ``src``: the first invalid UTF-8 byte, the first value that is not of its
    column's type, a line with too many fields, invalid JSON — each with its line and column — or, failing
    all of these, Polars' own first line of explanation."""
    if src.kind == "parquet":
        return fail(src.path, f"cannot read the Parquet file ({first_line(exc)})")
    found = gzip_error(src)  # first: the line-by-line passes below read the stream again
    if found is not None:
        return found
    found = _bad_utf8(src)
    if found is None and src.kind == "csv":
        found = unclosed_quote(src) or _bad_csv_value(src) or _bad_csv_shape(src)
    elif found is None:
        found = mooncake.bad_line(src)
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


def unclosed_quote(src: Source) -> TraceFileError | None:
    """The line where a quoted CSV field opens and never closes (an odd number of ``"`` from there to the end of
    the file: Polars reads the rest of the file as that one field), or ``None``."""
    if src.kind != "csv":
        return None
    opened: int | None = None
    with open_binary(src.path, src.compressed) as raw, io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as f:
        for number, line in enumerate(f, 1):
            if line.count('"') % 2:
                opened = number if opened is None else None
    if opened is None:
        return None
    return fail(src.path, 'a quoted field opens on this line (a " with no closing ") and runs to the end of the file',
                opened)  # fmt: skip


def _bad_csv_value(src: Source) -> TraceFileError | None:
    """The first field that does not parse as its column's type, found by a second scan of every field as
    text (vectorised)."""
    by_format = {"azure": azure.TYPES, "burstgpt": burstgpt.TYPES, "kvwire": table.TYPES}
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
    # By length first: Python refuses int() of more than 4,300 digits.
    too_big = digits.isascii() and digits.isdigit() and (len(digits) > 19 or int(digits) > INT64_MAX)
    reason = f"is out of range ({TOKEN_RANGE})" if too_big else "is not a whole number of tokens"
    shown = f"an integer of {len(digits):,} digits" if too_big and len(digits) > 30 else quote(value)
    return fail(src.path, f"{shown} {reason}", row + 2, column)


def _bad_csv_shape(src: Source) -> TraceFileError | None:
    with open_binary(src.path, src.compressed) as raw, io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        width = len(next(reader, []))
        for record in reader:
            if len(record) > width:
                return fail(src.path, f"has {len(record)} fields, but the header has {width}", reader.line_num)
    return None


__all__ = [
    "FORMATS",
    "REQUIRED",
    "Plan",
    "Source",
    "bad_value",
    "detect",
    "diagnose",
    "line_of",
    "other_compression",
    "plan",
    "unclosed_quote",
]
