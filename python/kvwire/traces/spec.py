"""``workload.trace.file``: a scenario that replays a trace file, with the reader's options.

.. code-block:: json

    {"workload": {"trace": {"file": "conv_1week.csv", "format": "azure", "start_s": 3600, "duration_s": 600,
                            "time_scale": 0.5, "sample": 0.25, "seed": 7}}}

The Rust core knows only inline traces (``workload.trace = {arrival_s, prompt_tokens, output_tokens}``), so
:func:`kvwire.simulate` takes the file form out of the scenario (:func:`kvwire.scenario.split_file_trace`),
reads the file with :func:`kvwire.read_trace` and passes the table as ``requests=``; the result's ``scenario`` carries
the file form again (:meth:`TraceFile.echo_into`), so ``kvwire.simulate(res.scenario)`` reads the same
requests and reruns the same run. A relative ``file`` is relative to the scenario file's directory (or to
the working directory for a dict); the echo holds the absolute path.

>>> spec = TraceFile.from_dict({"file": "t.csv", "sample": 0.5})
>>> spec.sample, spec.format
(0.5, 'auto')
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from kvwire.errors import ScenarioError, TraceError, TraceFileError
from kvwire.traces.formats import FORMATS, detect
from kvwire.traces.ops import _number, seed_value
from kvwire.traces.read import TraceScan, scan_trace

#: The keys of the file form, in the order the echo writes them.
OPTIONS = (
    "file",
    "format",
    "model",
    "log_type",
    "keep_failed",
    "start_s",
    "duration_s",
    "time_scale",
    "rate_per_s",
    "sample",
    "seed",
)
#: The options that select and rescale requests once they are read (the rest choose how a file is read).
WINDOW_OPTIONS = ("start_s", "duration_s", "time_scale", "rate_per_s", "sample", "seed")
#: The columns of an inline trace (the core's form), which the file form replaces.
INLINE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
#: The workload's generator fields, which a trace file replaces.
GENERATOR_KEYS = ("requests", "seed", "arrivals", "prompt_tokens", "output_tokens")
_BURSTGPT_ONLY = ("model", "log_type", "keep_failed")
#: Where the file form sits in a scenario (the prefix of its error paths).
WHERE = "workload.trace"


def _strings(path: str, value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    values = (value,) if isinstance(value, str) else value
    if not isinstance(values, Sequence) or not values or not all(isinstance(v, str) for v in values):
        raise ScenarioError(f"{path}: expected a string or a non-empty list of strings, got {value!r}", path)
    return tuple(values)


@dataclass(frozen=True)
class TraceFile:
    """The file form of ``workload.trace``, checked (see :func:`kvwire.read_trace` for each option)."""

    file: str
    format: str = "auto"
    model: tuple[str, ...] | None = None
    log_type: tuple[str, ...] | None = None
    keep_failed: bool = False
    start_s: float = 0.0
    duration_s: float | None = None
    time_scale: float = 1.0
    rate_per_s: float | None = None
    sample: float = 1.0
    seed: int = 0

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any], base_dir: Path | None = None) -> TraceFile:
        """Check the file form (types and ranges, not the file itself); ``ScenarioError`` names the field.

        >>> TraceFile.from_dict({"file": "t.csv", "time_scale": 0})
        Traceback (most recent call last):
        ...
        kvwire.errors.ScenarioError: workload.trace.time_scale: must be > 0, got 0
        """
        unknown = [k for k in spec if k not in OPTIONS]
        if unknown:
            accepted = ", ".join(f"`{k}`" for k in OPTIONS)
            raise ScenarioError(
                f"{WHERE}.{unknown[0]}: unknown field `{unknown[0]}`, expected one of {accepted}",
                f"{WHERE}.{unknown[0]}",
            )
        file = spec.get("file")
        if isinstance(file, os.PathLike):
            file = os.fspath(file)
        if not isinstance(file, str) or not file.strip():
            raise ScenarioError(f"{WHERE}.file: expected the path of a trace file, got {file!r}", f"{WHERE}.file")
        full = Path(file).expanduser()
        if not full.is_absolute():
            full = (base_dir or Path.cwd()) / full
        fmt = spec.get("format", "auto")
        if fmt not in ("auto", *FORMATS):
            accepted = ", ".join(f"`{k}`" for k in ("auto", *FORMATS))
            raise ScenarioError(
                f"{WHERE}.format: unknown variant `{fmt}`, expected one of {accepted}", f"{WHERE}.format"
            )
        keep_failed = spec.get("keep_failed", False)
        if not isinstance(keep_failed, bool):
            path = f"{WHERE}.keep_failed"
            raise ScenarioError(f"{path}: expected true or false, got {keep_failed!r}", path)

        def number(key: str, *, positive: bool, at_most: float | None = None) -> float | None:
            value = spec.get(key)
            return None if value is None else _number(f"{WHERE}.{key}", value, positive=positive, at_most=at_most)

        if spec.get("rate_per_s") is not None and spec.get("time_scale") is not None:
            path = f"{WHERE}.rate_per_s"
            raise ScenarioError(f"{path}: give either time_scale or rate_per_s, not both", path)
        seed = spec.get("seed", 0)
        return cls(
            file=os.path.abspath(full),
            format=str(fmt),
            model=_strings(f"{WHERE}.model", spec.get("model")),
            log_type=_strings(f"{WHERE}.log_type", spec.get("log_type")),
            keep_failed=keep_failed,
            start_s=number("start_s", positive=False) or 0.0,
            duration_s=number("duration_s", positive=True),
            time_scale=number("time_scale", positive=True) or 1.0,
            rate_per_s=number("rate_per_s", positive=True),
            sample=number("sample", positive=True, at_most=1.0) or 1.0,
            seed=seed_value(f"{WHERE}.seed", seed),
        )

    def scan(self) -> TraceScan:
        """Plan the read (:func:`kvwire.scan_trace`); option errors name ``workload.trace.<option>``."""
        try:
            return scan_trace(
                self.file,
                self.format,
                model=self.model,
                log_type=self.log_type,
                keep_failed=self.keep_failed,
                start_s=self.start_s,
                duration_s=self.duration_s,
                time_scale=self.time_scale,
                rate_per_s=self.rate_per_s,
                sample=self.sample,
                seed=self.seed,
            )
        except TraceFileError:
            raise
        except ScenarioError as e:
            raise _prefixed(e) from None

    def read(self) -> pl.DataFrame:
        """The request table the scenario replays.

        Raises:
            TraceFileError: the file (named with line and column); ScenarioError naming
                ``workload.trace.<option>`` when the options leave no requests or no mean rate.
        """
        scan = self.scan()
        try:
            df = scan.collect()
        except TraceFileError:
            raise
        except ScenarioError as e:
            raise _prefixed(e) from None
        if df.height == 0:
            raise self.empty_error()
        return df

    def batches(self, rows: int) -> Iterator[pl.DataFrame]:
        """:meth:`TraceScan.batches` of the file (a streamed run reads it so), option errors naming
        ``workload.trace.<option>`` as :meth:`read`'s do."""
        it = self.scan().batches(rows)
        while True:
            try:
                df = next(it)
            except StopIteration:
                return
            except TraceFileError:
                raise
            except ScenarioError as e:
                raise _prefixed(e) from None
            yield df

    def empty_error(self) -> ScenarioError:
        """The error for options that leave no request of the file."""
        key = "start_s" if self.start_s or self.duration_s is not None else "sample"
        end = "end" if self.duration_s is None else f"{self.start_s + self.duration_s:g} s"
        window = f"[{self.start_s:g} s, {end})"
        return ScenarioError(
            f"{WHERE}.{key}: no requests of {self.file} are left in the window {window} with sample {self.sample:g}",
            f"{WHERE}.{key}",
        )

    def check(self) -> None:
        """Check the file's format and the options against it without reading the requests."""
        try:
            src = detect(self.file, self.format)
            if src.format != "burstgpt":
                for key in _BURSTGPT_ONLY:
                    if getattr(self, key) not in (None, False):
                        raise TraceError(
                            f"{key}: only BurstGPT traces have this filter; {self.file} is {src.format}", key
                        )
        except TraceFileError:
            raise
        except ScenarioError as e:
            raise _prefixed(e) from None

    def to_dict(self) -> dict[str, Any]:
        """The file form with every option resolved (``format`` as detected; unset options left out), for
        the scenario echo.

        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
        >>> _ = p.write_text('{"timestamp": 0, "input_length": 9, "output_length": 1}\\n')
        >>> TraceFile.from_dict({"file": str(p)}).to_dict()["format"]
        'mooncake'
        """
        fmt = detect(self.file, self.format).format
        out: dict[str, Any] = {"file": self.file, "format": fmt}
        for key in OPTIONS[2:]:
            value = getattr(self, key)
            if value is None or (key in _BURSTGPT_ONLY and fmt != "burstgpt"):
                continue
            if key == "time_scale" and self.rate_per_s is not None:
                continue
            out[key] = list(value) if isinstance(value, tuple) else value
        return out

    def echo_into(self, echo: dict[str, Any]) -> dict[str, Any]:
        """``echo`` (the core's resolved scenario) with ``workload`` holding this file form instead of the
        table the core saw (its other workload keys kept; generator fields and the marker of a table passed
        beside the scenario, ``external``, left out: the file supplies the table)."""
        workload = echo.get("workload")
        kept = {
            k: v
            for k, v in (workload.items() if isinstance(workload, dict) else ())
            if k not in ("trace", "trace_rows", "external", *GENERATOR_KEYS)
        }
        return {**echo, "workload": {**kept, "trace": self.to_dict()}}


def _prefixed(e: ScenarioError) -> ScenarioError:
    """An option error from the readers, with its path under ``workload.trace``."""
    path = f"{WHERE}.{e.path}" if e.path else WHERE
    message = str(e)
    if e.path and message.startswith(f"{e.path}:"):
        message = path + message[len(e.path) :]
    return type(e)(message, path)


__all__ = ["GENERATOR_KEYS", "INLINE_COLUMNS", "OPTIONS", "WHERE", "WINDOW_OPTIONS", "TraceFile"]
