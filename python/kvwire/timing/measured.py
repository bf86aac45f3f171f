"""Files of measured step times read into one table: kvwire's own CSV and Splitwise's ``perf_model.csv``
(Vidur's per-operator profiles are recognised and refused: they do not hold whole steps).

Every reader gives the same normalised table, one row per measured step:

============== ======= ===================================================================================
column         type    meaning
============== ======= ===================================================================================
phase          str     ``prefill`` or ``decode``
model          str     the kvwire model preset the step ran (the file's name, mapped as below)
device         str     the kvwire device preset it ran on (``None`` when the file does not say)
tp             int     tensor-parallel degree
batch          int     sequences in the step
prompt_tokens  int     prefill: new tokens per sequence; decode: 0
context_tokens int     prefill: cached tokens per sequence before the new ones; decode: tokens of KV context
time_s         float   the step's time, s (> 0)
source_row     int     the 1-based line of the file the row came from (a Splitwise line gives two rows)
============== ======= ===================================================================================

Formats (:data:`FORMATS`; detected from the header, or given):

- ``kvwire``: the calibration CSV that ``benches/measured/measure_steps.py`` writes: header
  ``phase,model,tp,batch,prompt_tokens,context_tokens,time_s`` after ``#`` comment lines (``# key: value``,
  :func:`comments`); a ``device`` column, if present, names the kvwire preset. ``model`` is taken as written.
- ``splitwise``: Splitwise's measured performance model (github.com/Mutinifni/splitwise-sim, ``data/perf_model.csv``,
  commit 8f99e7d), header ``model,hardware,prompt_size,batch_size,token_size,...,prompt_time,token_time,...,
  tensor_parallel``. Its simulator (``performance_model.py``, ``DatabasePerformanceModel``) reads
  ``prompt_time`` and ``token_time`` in milliseconds (it divides both by 1000), takes ``prompt_time`` as the
  time of a prompt iteration of ``batch_size`` prompts of ``prompt_size`` tokens, and charges a token task
  ``token_time x token_size``: ``token_time`` is the time of one decode iteration of the batch. For 324 of the
  420 A100 rows ``e2e_time = prompt_time + (token_size - 1) x token_time`` within 1%: a mean over the
  ``token_size - 1`` decode iterations after the prefill, whose contexts run from ``prompt_size + 1`` to
  ``prompt_size + token_size - 1``. So one line gives two steps: a prefill (``batch_size`` x ``prompt_size``
  new tokens, nothing cached) and a decode at the mean context ``prompt_size + token_size // 2`` (only when
  ``token_size ≥ 2``). Names map to kvwire presets (:data:`SPLITWISE_MODELS`, :data:`SPLITWISE_HARDWARE`):
  ``llama2-70b`` → ``llama2-70b``, ``bloom-176b`` → ``bloom-176b``, ``a100-80gb`` → ``a100``,
  ``h100-80gb`` → ``h100``; a hardware name without a preset (``h100-80gb-pcap``, a power-capped H100) is kept
  as written, so its rows match no device.
- ``vidur``: Vidur's ``data/profiling/compute/<device>/<model>/mlp.csv`` and ``attention.csv`` (headers of
  ``time_stats.<op>.<stat>`` columns) are refused with :class:`~kvwire.MeasurementError`: each row times the
  operators of one layer (the MLP profile runs with attention no-op'd; the attention profile times the
  attention kernel alone), and Vidur builds a step from them together with a separately profiled all-reduce
  and CPU overheads through its own fitted predictors; no one file is a step's time.

>>> import tempfile
>>> from pathlib import Path
>>> text = ("# device: H100\\nphase,model,tp,batch,prompt_tokens,context_tokens,time_s\\n"
...         "prefill,llama3-8b,1,1,512,0,0.02\\n")
>>> with tempfile.TemporaryDirectory() as d:
...     path = Path(d) / "m.csv"
...     _ = path.write_text(text)
...     t = read_measured(path)
>>> t.select("phase", "batch", "prompt_tokens", "time_s", "source_row").row(0)
('prefill', 1, 512, 0.02, 3)
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from kvwire.errors import MeasurementError

#: The formats :func:`read_measured` knows (``vidur`` only to refuse it).
FORMATS = ("kvwire", "splitwise", "vidur")
#: kvwire's calibration CSV columns, in order.
KVWIRE_COLUMNS = ("phase", "model", "tp", "batch", "prompt_tokens", "context_tokens", "time_s")
#: The Splitwise columns the reader needs.
SPLITWISE_COLUMNS = (
    "model", "hardware", "prompt_size", "batch_size", "token_size", "prompt_time", "token_time", "tensor_parallel",
)  # fmt: skip
#: Splitwise model names → kvwire model presets.
SPLITWISE_MODELS = {"llama2-70b": "llama2-70b", "bloom-176b": "bloom-176b"}
#: Splitwise hardware names → kvwire device presets.
SPLITWISE_HARDWARE = {"a100-80gb": "a100", "a100-40gb": "a100-40g", "h100-80gb": "h100"}
#: The phases a row may have.
PHASES = ("prefill", "decode")

#: The normalised table's schema.
SCHEMA = {
    "phase": pl.Utf8,
    "model": pl.Utf8,
    "device": pl.Utf8,
    "tp": pl.Int64,
    "batch": pl.Int64,
    "prompt_tokens": pl.Int64,
    "context_tokens": pl.Int64,
    "time_s": pl.Float64,
    "source_row": pl.Int64,
}

VIDUR_WHY = (
    "a Vidur profiling CSV holds per-operator times of one layer (mlp.csv: the projections, norms and activation "
    "with attention no-op'd; attention.csv: the attention kernel alone), not whole steps: Vidur builds a step from "
    "them, a separately profiled all-reduce and CPU overheads through its own fitted predictors, so no one file "
    "is a step's time. Measure whole steps instead (benches/measured/measure_steps.py writes kvwire's CSV)"
)


class _File:
    """One file being read: its name as given and the error it raises."""

    def __init__(self, path: str | Path) -> None:
        self.name = str(path)

    def fail(self, why: str, line: int | None = None, column: str | None = None) -> MeasurementError:
        where = self.name
        if line is not None:
            where += f", line {line}"
        if column is not None:
            where += f", column {column}"
        path = ":".join([self.name, *([str(line)] if line is not None else []), *([column] if column else [])])
        return MeasurementError(f"{where}: {why}", path, file=self.name, line=line, column=column)


def _lines(f: _File, path: str | Path) -> list[str]:
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise f.fail(f"cannot read the file: {e.strerror or e}") from None
    if b"\x00" in raw[:4096]:
        raise f.fail("a binary file, not CSV text")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise f.fail(f"not UTF-8 text (byte {e.start}: {e.reason})") from None
    return text.splitlines()


def comments(path: str | Path) -> dict[str, str]:
    """The ``# key: value`` comment lines at the top of a kvwire CSV (a key given twice keeps its last value;
    comment lines of another shape are skipped).

    Raises:
        MeasurementError: the file cannot be read as text.
    """
    out: dict[str, str] = {}
    for line in _lines(_File(path), path):
        if not line.startswith("#"):
            break
        key, sep, value = line[1:].partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def _header(f: _File, lines: list[str]) -> tuple[int, list[str]]:
    """The index of the header line and its columns (comment and blank lines before it skipped)."""
    for i, line in enumerate(lines):
        if not line.strip() or line.startswith("#"):
            continue
        return i, [c.strip() for c in next(csv.reader([line]))]
    raise f.fail("empty: no header line (and no rows)")


def detect(columns: Sequence[str]) -> str | None:
    """The format a header belongs to, or ``None``.

    >>> detect(["phase", "model", "tp", "batch", "prompt_tokens", "context_tokens", "time_s"])
    'kvwire'
    >>> detect(["model", "hardware", "prompt_size", "prompt_time"])
    'splitwise'
    >>> detect(["time_stats.emb.median", "num_tokens"])
    'vidur'
    """
    cols = set(columns)
    if {"phase", "time_s"} <= cols:
        return "kvwire"
    if cols & {"prompt_time", "token_time"} or {"prompt_size", "batch_size", "tensor_parallel"} <= cols:
        return "splitwise"
    if any(c.startswith("time_stats.") for c in cols):
        return "vidur"
    return None


def file_format(path: str | Path) -> str | None:
    """The format of a file's header (:func:`detect`), or ``None`` when it is none of them.

    Raises:
        MeasurementError: the file cannot be read as text, or is empty.
    """
    f = _File(path)
    return detect(_header(f, _lines(f, path))[1])


def _need(f: _File, columns: list[str], need: Sequence[str], line: int, fmt: str) -> dict[str, int]:
    index = {c: i for i, c in enumerate(columns)}
    missing = [c for c in need if c not in index]
    if missing:
        raise f.fail(f"missing column {missing[0]!r}: a {fmt} file needs {', '.join(need)}", line, missing[0])
    return index


def _int(f: _File, text: str, line: int, column: str, low: int) -> int:
    s = text.strip()
    try:
        v = int(s)
    except ValueError:
        try:
            x = float(s)
        except ValueError:
            raise f.fail(f"not a number: {s!r}" if s else "empty cell: expected a whole number", line, column) from None
        raise f.fail(f"not a whole number: {x!r}", line, column) from None
    if v < low:
        raise f.fail(f"must be at least {low}, got {v}", line, column)
    return v


def _time(f: _File, text: str, line: int, column: str, scale: float) -> float:
    s = text.strip()
    try:
        v = float(s)
    except ValueError:
        raise f.fail(f"not a number: {s!r}" if s else "empty cell: expected a time", line, column) from None
    if not math.isfinite(v) or v <= 0:
        raise f.fail(f"a step time must be positive and finite, got {s}", line, column)
    return v * scale


def _rows(lines: list[str], start: int) -> list[tuple[int, list[str]]]:
    out = []
    for i in range(start + 1, len(lines)):
        if not lines[i].strip():
            continue
        out.append((i + 1, next(csv.reader([lines[i]]))))
    return out


def _cell(f: _File, cells: list[str], index: dict[str, int], column: str, line: int) -> str:
    i = index[column]
    if i >= len(cells):
        raise f.fail(f"the row has {len(cells)} cells; the header names {len(index)} columns", line, column)
    return cells[i]


def _read_kvwire(f: _File, lines: list[str], at: int, columns: list[str]) -> list[dict[str, Any]]:
    index = _need(f, columns, KVWIRE_COLUMNS, at + 1, "kvwire")
    out = []
    for line, cells in _rows(lines, at):

        def cell(c: str, cells: list[str] = cells, line: int = line) -> str:
            return _cell(f, cells, index, c, line)

        phase = cell("phase").strip()
        if phase not in PHASES:
            raise f.fail(f"unknown phase {phase!r}: expected prefill or decode", line, "phase")
        model = cell("model").strip()
        if not model:
            raise f.fail("empty cell: expected a model name", line, "model")
        tp = _int(f, cell("tp"), line, "tp", 1)
        batch = _int(f, cell("batch"), line, "batch", 1)
        prompt = _int(f, cell("prompt_tokens"), line, "prompt_tokens", 1 if phase == "prefill" else 0)
        if phase == "decode" and prompt != 0:
            raise f.fail(f"a decode row has prompt_tokens 0, got {prompt}", line, "prompt_tokens")
        device = (cell("device").strip() or None) if "device" in index else None
        out.append(
            {
                "phase": phase,
                "model": model,
                "device": device,
                "tp": tp,
                "batch": batch,
                "prompt_tokens": prompt,
                "context_tokens": _int(f, cell("context_tokens"), line, "context_tokens", 0),
                "time_s": _time(f, cell("time_s"), line, "time_s", 1.0),
                "source_row": line,
            }
        )
    return out


def _read_splitwise(f: _File, lines: list[str], at: int, columns: list[str]) -> list[dict[str, Any]]:
    index = _need(f, columns, SPLITWISE_COLUMNS, at + 1, "Splitwise perf_model.csv")
    out = []
    for line, cells in _rows(lines, at):

        def cell(c: str, cells: list[str] = cells, line: int = line) -> str:
            return _cell(f, cells, index, c, line)

        name = cell("model").strip()
        if not name:
            raise f.fail("empty cell: expected a model name", line, "model")
        hardware = cell("hardware").strip()
        if not hardware:
            raise f.fail("empty cell: expected a hardware name", line, "hardware")
        base = {
            "model": SPLITWISE_MODELS.get(name, name),
            "device": SPLITWISE_HARDWARE.get(hardware, hardware),
            "tp": _int(f, cell("tensor_parallel"), line, "tensor_parallel", 1),
            "batch": _int(f, cell("batch_size"), line, "batch_size", 1),
            "source_row": line,
        }
        prompt = _int(f, cell("prompt_size"), line, "prompt_size", 1)
        tokens = _int(f, cell("token_size"), line, "token_size", 1)
        prefill_s = _time(f, cell("prompt_time"), line, "prompt_time", 1e-3)
        out.append({**base, "phase": "prefill", "prompt_tokens": prompt, "context_tokens": 0, "time_s": prefill_s})
        if tokens >= 2:
            decode_s = _time(f, cell("token_time"), line, "token_time", 1e-3)
            context = prompt + tokens // 2
            out.append({**base, "phase": "decode", "prompt_tokens": 0, "context_tokens": context, "time_s": decode_s})
    return out


def read_measured(path: str | Path, fmt: str | None = None) -> pl.DataFrame:
    """The measured steps of a file as the normalised table (this module's docstring), rows in file order.

    Args:
        path: a kvwire calibration CSV or a Splitwise ``perf_model.csv``.
        fmt: ``"kvwire"`` or ``"splitwise"``; ``None`` detects it from the header (:func:`detect`).

    Raises:
        MeasurementError: the file cannot be read, is empty, has an unknown format or is of Vidur's, lacks a
            column, or holds a cell that is not a number or whole number where one is needed, a time that is
            not positive, an unknown phase, an empty name or no rows; the message names the file, the line
            and the column.
    """
    f = _File(path)
    if fmt is not None and fmt not in FORMATS:
        raise MeasurementError(f"format: expected one of {', '.join(FORMATS)}, got {fmt!r}", "format", file=f.name)
    lines = _lines(f, path)
    at, columns = _header(f, lines)
    found = detect(columns)
    kind = fmt or found
    if kind == "vidur":
        raise f.fail(VIDUR_WHY, at + 1)
    if kind is None:
        raise f.fail(
            "unknown format: expected kvwire's header (" + ",".join(KVWIRE_COLUMNS) + ") or Splitwise's "
            "perf_model.csv (" + ",".join(SPLITWISE_COLUMNS) + ")",
            at + 1,
        )
    rows = _read_kvwire(f, lines, at, columns) if kind == "kvwire" else _read_splitwise(f, lines, at, columns)
    if not rows:
        raise f.fail("no rows after the header", at + 1)
    return pl.DataFrame(rows, schema=SCHEMA)


def check_table(table: pl.DataFrame, name: str = "measured") -> pl.DataFrame:
    """A table given in memory checked as a file would be, in the normalised schema (``device`` and
    ``source_row`` optional: null devices, row numbers from 1).

    Raises:
        MeasurementError: a missing column, a null or out-of-range value, a phase that is not prefill or decode
            (``path`` ``name[row].column``, the row 0-based).
    """
    if not isinstance(table, pl.DataFrame):
        raise MeasurementError(f"{name}: expected a file path or a polars DataFrame, got {type(table).__name__}", name)
    if table.height == 0:
        raise MeasurementError(f"{name}: no rows", name)
    missing = [c for c in KVWIRE_COLUMNS if c not in table.columns]
    if missing:
        raise MeasurementError(f"{name}: missing column {missing[0]!r} (needs {', '.join(KVWIRE_COLUMNS)})", name)
    if "device" not in table.columns:
        table = table.with_columns(device=pl.lit(None, pl.Utf8))
    if "source_row" not in table.columns:
        table = table.with_row_index("source_row", offset=1)
    try:
        table = table.select(pl.col(c).cast(t, strict=True) for c, t in SCHEMA.items())
    except (pl.exceptions.InvalidOperationError, pl.exceptions.ComputeError) as e:
        raise MeasurementError(f"{name}: a column of the wrong type: {e}", name) from None
    lows = {"tp": 1, "batch": 1, "prompt_tokens": 0, "context_tokens": 0}
    for i, row in enumerate(table.iter_rows(named=True)):
        if row["phase"] not in PHASES:
            raise MeasurementError(
                f"{name}[{i}].phase: expected prefill or decode, got {row['phase']!r}", f"{name}[{i}].phase"
            )
        if not row["model"]:
            raise MeasurementError(f"{name}[{i}].model: expected a model name", f"{name}[{i}].model")
        for c, low in lows.items():
            if row[c] is None or row[c] < low:
                raise MeasurementError(
                    f"{name}[{i}].{c}: must be a whole number ≥ {low}, got {row[c]}", f"{name}[{i}].{c}"
                )
        t = row["time_s"]
        if t is None or not math.isfinite(t) or t <= 0:
            raise MeasurementError(f"{name}[{i}].time_s: must be positive and finite, got {t}", f"{name}[{i}].time_s")
    return table


__all__ = [
    "FORMATS",
    "KVWIRE_COLUMNS",
    "PHASES",
    "SCHEMA",
    "SPLITWISE_COLUMNS",
    "SPLITWISE_HARDWARE",
    "SPLITWISE_MODELS",
    "check_table",
    "comments",
    "detect",
    "file_format",
    "read_measured",
]
