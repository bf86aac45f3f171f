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
from kvwire.errors import TraceError
from kvwire.scenario import scenario_json
from kvwire.summary import PCT_SCHEMA, percentile_rows, requests_frame, summarise, with_derived

REQUEST_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")


class SimResult:
    """The outcome of one run.

    Attributes:
        requests: one row per request (Polars DataFrame), see the README for the columns.
        summary: the summary dict (JSON-serialisable; ``None`` where a figure does not exist, never NaN).
        scenario: the resolved scenario that ran (presets expanded, defaults filled).
        stats: the core's raw run totals (per instance, link, ITL).
        ceilings: the scenario's analytic ceilings for the requests that ran (:func:`kvwire.ceilings`).
    """

    def __init__(
        self,
        columns: Mapping[str, np.ndarray],
        stats: dict[str, Any],
        scenario: dict[str, Any],
        ceilings: dict[str, Any] | None = None,
    ) -> None:
        self._columns = columns
        self.stats = stats
        self.scenario = scenario
        self.ceilings = ceilings

    @cached_property
    def requests(self) -> pl.DataFrame:
        """One row per request (built on first use from the core's columns, without copying them)."""
        return requests_frame(dict(self._columns))

    def percentiles(self) -> pl.DataFrame:
        """Latency percentiles: one row per metric (``ttft_s, tpot_s, itl_s, e2e_s, handoff_s``), columns
        ``metric, count, mean, p50, p90, p95, p99, p99_9, max`` in seconds (linear interpolation)."""
        return self._percentiles

    @cached_property
    def _percentiles(self) -> pl.DataFrame:
        return pl.DataFrame(self._latency_rows, schema=PCT_SCHEMA)

    @cached_property
    def _summary_columns(self) -> Mapping[str, np.ndarray]:
        return with_derived(self._columns)

    @cached_property
    def _latency_rows(self) -> list[dict[str, Any]]:
        return percentile_rows(self._summary_columns, self.stats["itl_s"])

    @cached_property
    def summary(self) -> dict[str, Any]:
        # From the core's columns with numpy: no Polars table is built for a summary alone (sweeps).
        return summarise(self._summary_columns, self._latency_rows, self.stats, self.scenario, self.ceilings)

    def __repr__(self) -> str:
        s = self.stats
        return (
            f"SimResult({len(self._columns['id'])} requests: {s['completed']} completed, "
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


def request_arrays(requests: pl.DataFrame | Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three columns of an explicit request table as the contiguous arrays the core reads (``arrival_s``
    float64, ``prompt_tokens`` and ``output_tokens`` int64), checked here for what numpy can tell.

    Raises:
        TraceError: a column is missing, null, not numeric, not 1-D, or holds non-whole token counts.
    """
    a, p, o = (_column(requests, c) for c in REQUEST_COLUMNS)
    return a, p, o


def simulate(
    scenario: Mapping[str, Any] | str | Path | None = None,
    requests: pl.DataFrame | Mapping[str, Any] | None = None,
) -> SimResult:
    """Simulate one scenario.

    Args:
        scenario: a scenario dict (see :class:`kvwire.scenario.ScenarioDict`), a path to a ``.json`` or
            ``.toml`` file, or ``None`` for the built-in default.
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
    text = scenario_json(scenario)
    out = _core.simulate(text) if requests is None else _core.simulate(text, *request_arrays(requests))
    stats = json.loads(out["stats_json"])
    echo = json.loads(out["scenario_json"])
    return SimResult(out["columns"], stats, echo, json.loads(out["ceilings_json"]))


__all__ = ["SimResult", "request_arrays", "simulate"]
