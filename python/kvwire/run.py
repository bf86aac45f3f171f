"""Run a scenario: :func:`simulate` and its :class:`SimResult`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from kvwire import _core
from kvwire.errors import ScenarioError, TraceError
from kvwire.scenario import scenario_json
from kvwire.summary import percentiles as _percentiles
from kvwire.summary import requests_frame, summarise
from kvwire.trace_spec import split_file_trace

REQUEST_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")


class SimResult:
    """The outcome of one run.

    Attributes:
        requests: one row per request (Polars DataFrame), see the README for the columns.
        summary: the summary dict (JSON-serialisable; ``None`` where a figure does not exist, never NaN).
        scenario: the resolved scenario that ran (presets expanded, defaults filled).
        stats: the core's raw run totals (per instance, link, ITL).
    """

    def __init__(self, requests: pl.DataFrame, stats: dict[str, Any], scenario: dict[str, Any]) -> None:
        self.requests = requests
        self.stats = stats
        self.scenario = scenario

    def percentiles(self) -> pl.DataFrame:
        """Latency percentiles: one row per metric (``ttft_s, tpot_s, itl_s, e2e_s, handoff_s``), columns
        ``metric, count, mean, p50, p90, p95, p99, p99_9, max`` in seconds (linear interpolation)."""
        return self._percentiles

    @cached_property
    def _percentiles(self) -> pl.DataFrame:
        return _percentiles(self.requests, self.stats["itl_s"])

    @cached_property
    def summary(self) -> dict[str, Any]:
        return summarise(self.requests, self._percentiles, self.stats, self.scenario)

    def __repr__(self) -> str:
        s = self.stats
        return (
            f"SimResult({self.requests.height} requests: {s['completed']} completed, "
            f"{s['rejected']} rejected; horizon {s['horizon_s']:.3f} s)"
        )


def _column(requests: Any, name: str) -> np.ndarray:
    try:
        series = requests[name]
    except (KeyError, TypeError, pl.exceptions.ColumnNotFoundError):
        raise TraceError(
            f"requests.{name}: column is missing (need {', '.join(REQUEST_COLUMNS)})", f"requests.{name}"
        ) from None
    if isinstance(series, pl.Series):
        if series.null_count():
            first = int(series.is_null().arg_max() or 0)
            raise TraceError(f"requests.{name}[{first}]: null value", f"requests.{name}[{first}]")
        if not series.dtype.is_numeric():
            raise TraceError(f"requests.{name}: expected a numeric column, got {series.dtype}", f"requests.{name}")
        arr = series.to_numpy()
    else:
        arr = np.asarray(series)
    if arr.ndim != 1:
        raise TraceError(f"requests.{name}: expected a 1-D column, got shape {arr.shape}", f"requests.{name}")
    if arr.dtype.kind not in "iuf":
        raise TraceError(f"requests.{name}: expected numbers, got dtype {arr.dtype}", f"requests.{name}")
    if name == "arrival_s":
        return np.ascontiguousarray(arr, dtype=np.float64)
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.floor(arr))
        if bad.any():
            i = int(np.argmax(bad))
            raise TraceError(
                f"requests.{name}[{i}]: token counts must be whole numbers, got {arr[i]}",
                f"requests.{name}[{i}]",
            )
        if np.abs(arr).max(initial=0) >= 2.0**53:
            i = int(np.argmax(np.abs(arr) >= 2.0**53))
            raise TraceError(f"requests.{name}[{i}]: out of range: {arr[i]}", f"requests.{name}[{i}]")
    elif arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and arr.size and arr.max() > np.iinfo(np.int64).max:
        i = int(np.argmax(arr > np.iinfo(np.int64).max))
        raise TraceError(f"requests.{name}[{i}]: out of range: {arr[i]}", f"requests.{name}[{i}]")
    return np.ascontiguousarray(arr, dtype=np.int64)


def simulate(
    scenario: Mapping[str, Any] | str | Path | None = None,
    requests: pl.DataFrame | Mapping[str, Any] | None = None,
) -> SimResult:
    """Simulate one scenario.

    Args:
        scenario: a scenario dict (see :class:`kvwire.scenario.ScenarioDict`), a path to a ``.json`` or
            ``.toml`` file, or ``None`` for the built-in default. A ``workload.trace.file`` is read here
            (:mod:`kvwire.trace_spec`) and replayed.
        requests: optional explicit requests — a Polars DataFrame (or a mapping of columns) with
            ``arrival_s`` (seconds, sorted), ``prompt_tokens`` (≥ 1) and ``output_tokens`` (≥ 0). The
            scenario must then not describe a generated workload.

    Returns:
        A :class:`SimResult`. The GIL is released while the Rust core validates and runs the scenario.

    Raises:
        ScenarioError: a field is wrong (``e.path`` names it); subclasses for unknown presets
            (:class:`~kvwire.errors.UnknownPresetError`), models that do not fit
            (:class:`~kvwire.errors.DoesNotFitError`) and malformed request tables
            (:class:`~kvwire.errors.TraceError`).

    >>> import kvwire
    >>> res = kvwire.simulate({"workload": {"requests": 200, "arrivals": {"rate_per_s": 4}}})
    >>> res.summary["requests"]["completed"]
    200
    >>> res.percentiles().columns
    ['metric', 'count', 'mean', 'p50', 'p90', 'p95', 'p99', 'p99_9', 'max']
    """
    scenario, trace_file = split_file_trace(scenario)  # workload.trace.file: read here, passed as requests
    if trace_file is not None:
        if requests is not None:
            raise ScenarioError(
                "workload.trace: a request table was passed as well: give the requests once", "workload.trace"
            )
        requests = trace_file.read()
    text = scenario_json(scenario)
    if requests is None:
        out = _core.simulate(text)
    else:
        a, p, o = (_column(requests, c) for c in REQUEST_COLUMNS)
        out = _core.simulate(text, a, p, o)
    stats = json.loads(out["stats_json"])
    echo = json.loads(out["scenario_json"])
    if trace_file is not None:
        echo = trace_file.echo_into(echo)
    return SimResult(requests_frame(out["columns"]), stats, echo)


__all__ = ["SimResult", "simulate"]
