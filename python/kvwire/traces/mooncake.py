"""Mooncake traces (FAST '25): JSON Lines with ``timestamp`` (ms), ``input_length``, ``output_length`` and
``hash_ids`` (the prompt's 512-token block hashes), and where a bad line is when Polars refuses one.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterator
from typing import Any

import polars as pl

from kvwire.errors import TraceFileError
from kvwire.traces.source import INT64_MAX, REQUIRED, TOKEN_RANGE, Plan, Source, fail, finite, open_binary, quote


def plan(src: Source, extra: bool) -> Plan:
    """The lazy scan of a Mooncake JSON Lines file (``extra`` keeps ``hash_ids``)."""
    schema = {
        "timestamp": pl.Float64(),
        "input_length": pl.Int64(),
        "output_length": pl.Int64(),
        "hash_ids": pl.List(pl.Int64()),
    }
    lazy = pl.scan_ndjson(src.path, schema=schema, row_index_name="_row").select(
        "_row",
        finite("timestamp").alias("_t"),
        pl.col("input_length").alias("prompt_tokens"),
        pl.col("output_length").alias("output_tokens"),
        *([pl.col("hash_ids")] if extra else []),
    )
    names = {"_t": "timestamp", "prompt_tokens": "input_length", "output_tokens": "output_length"}
    return Plan(src, lazy, 1e3, True, names, {"hash_ids": "hash_ids"})


class BigInt:
    """An integer of more digits than any token count or hash has (Python refuses to parse those beyond 4,300
    digits), kept as its digit count for the error that refuses it."""

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"an integer of {self.digits:,} digits"


def _parse_int(text: str) -> int | BigInt:
    digits = len(text.lstrip("-"))
    return BigInt(digits) if digits > 30 else int(text)


def loads(line: str) -> Any:
    """One JSON Lines record as Python values; integers beyond 30 digits become :class:`BigInt`.

    >>> loads('{"input_length": ' + "9" * 5000 + "}")
    {'input_length': an integer of 5,000 digits}
    """
    return json.loads(line, parse_int=_parse_int)


def lines(src: Source) -> Iterator[tuple[int, str]]:
    with open_binary(src.path, src.compressed) as raw, io.TextIOWrapper(raw, encoding="utf-8-sig") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                yield number, line


def record(src: Source, row: int) -> tuple[int, Any]:
    for i, (number, line) in enumerate(lines(src)):
        if i == row:
            try:
                return number, loads(line)
            except (json.JSONDecodeError, RecursionError):
                return number, None
    return 0, None


def bad_line(src: Source) -> TraceFileError | None:
    names = REQUIRED["mooncake"]
    for number, line in lines(src):
        try:
            record = loads(line)
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
            elif isinstance(value, BigInt):
                return fail(src.path, f"{quote(value)} is out of range ({TOKEN_RANGE})", number, name)
            elif isinstance(value, bool) or not isinstance(value, int):
                return fail(src.path, f"{quote(value)} is not a whole number of tokens", number, name)
            elif abs(value) > INT64_MAX:
                return fail(src.path, f"{quote(value)} is out of range ({TOKEN_RANGE})", number, name)
        ids = record.get("hash_ids")
        if ids is not None:
            good = isinstance(ids, list) and all(
                isinstance(i, int) and not isinstance(i, bool) and abs(i) <= INT64_MAX for i in ids
            )
            if not good:
                return fail(src.path, f"{quote(ids)} is not a list of integer block hashes", number, "hash_ids")
    return None


__all__ = ["BigInt", "bad_line", "lines", "loads", "plan", "record"]
