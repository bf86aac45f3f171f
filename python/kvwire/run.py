"""Run a scenario: :func:`simulate` and its :class:`SimResult`."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from kvwire import _core
from kvwire.errors import ResourceError, ScenarioError, TraceError
from kvwire.scenario import scenario_json
from kvwire.summary import PCT_SCHEMA, percentile_rows, requests_frame, summarise, with_derived
from kvwire.trace_spec import split_file_trace

REQUEST_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")

#: Memory a run holds per request at its peak — the core's table and the Polars summary built from it — with
#: margin: measured 150-280 B per request (1M and 200k requests, peak RSS, ``benches/README.md``), taken as 400.
BYTES_PER_REQUEST = 400


def available_memory_bytes() -> int | None:
    """Memory this process may still use, bytes: the lowest of Linux's MemAvailable and the cgroup limit minus
    its usage; ``None`` where neither can be read (then no run is refused up front)."""
    limits: list[int] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            limit, usage = Path(limit_file).read_text().strip(), Path(usage_file).read_text().strip()
            if limit != "max" and int(limit) < 2**60:
                limits.append(max(0, int(limit) - int(usage)))
        except (OSError, ValueError):
            continue
    return min(limits) if limits else None


def check_memory(n: int, path: str, available: int | None = None) -> None:
    """Refuse a run of ``n`` requests that cannot fit in memory, before it starts.

    Raises:
        ResourceError: ``n`` x :data:`BYTES_PER_REQUEST` exceeds ``available`` (default: what
            :func:`available_memory_bytes` reads); the message gives both figures.
    """
    free = available_memory_bytes() if available is None else available
    need = n * BYTES_PER_REQUEST
    if free is not None and need > free:
        raise ResourceError(
            f"{path}: a run of {n:,} requests needs about {need / 1e9:,.1f} GB (about {BYTES_PER_REQUEST} B per "
            f"request for its results and summary) but {free / 1e9:,.1f} GB of memory is available; run fewer "
            "requests or split the study",
            path,
        )


def _generated_requests(scenario: Mapping[str, Any] | str | Path | None) -> int | None:
    """The request count a scenario dict asks the generator for (800 by default), if it is a plain integer."""
    if not isinstance(scenario, Mapping):
        return None
    workload = scenario.get("workload")
    if workload is None:
        return 800
    if not isinstance(workload, Mapping) or "trace" in workload or workload.get("external"):
        return None
    n = workload.get("requests", 800)
    return n if isinstance(n, int) and not isinstance(n, bool) and 0 < n < 2**63 else None


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
    *,
    cancel: threading.Event | None = None,
) -> SimResult:
    """Simulate one scenario.

    Args:
        scenario: a scenario dict (see :class:`kvwire.scenario.ScenarioDict`), a path to a ``.json`` or
            ``.toml`` file, or ``None`` for the built-in default. A ``workload.trace.file`` is read here
            (:mod:`kvwire.trace_spec`) and replayed.
        requests: optional explicit requests — a Polars DataFrame (or a mapping of columns) with
            ``arrival_s`` (seconds, sorted), ``prompt_tokens`` (≥ 1) and ``output_tokens`` (≥ 0). The
            scenario must then not describe a generated workload.
        cancel: optional ``threading.Event``; setting it (from another thread) stops the run within
            milliseconds with :class:`~kvwire.errors.Cancelled` (a service's time limit, a user's stop button).

    Returns:
        A :class:`SimResult`. The GIL is released while the Rust core validates and runs the scenario.

    Ctrl-C (any Python signal whose handler raises) stops a running simulation within milliseconds with
    ``KeyboardInterrupt``; the process stays usable.

    Raises:
        Cancelled: ``cancel`` was set before the run finished.
        ResourceError: the run would not fit in memory (a ``MemoryError``, raised before it starts with the
            estimate).
        ScenarioError: a field is wrong (``e.path`` names it), or the run took more than ``engine.max_steps``
            batch steps (that path); subclasses for unknown presets
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
    # A scenario file is loaded here; workload.trace.file is read here and passed as requests.
    scenario, trace_file = split_file_trace(scenario)
    if trace_file is not None:
        if requests is not None:
            raise ScenarioError(
                "workload.trace: a request table was passed as well: give the requests once", "workload.trace"
            )
        requests = trace_file.read()
    text = scenario_json(scenario)
    if requests is None:
        n = _generated_requests(scenario)
        if n is not None:
            check_memory(n, "workload.requests")
        out = _core.simulate(text, cancel=cancel)
    else:
        arrays = request_arrays(requests)
        check_memory(len(arrays[0]), "requests")
        out = _core.simulate(text, *arrays, cancel=cancel)
    stats = json.loads(out["stats_json"])
    echo = json.loads(out["scenario_json"])
    if trace_file is not None:
        echo = trace_file.echo_into(echo)
    return SimResult(out["columns"], stats, echo, json.loads(out["ceilings_json"]))


__all__ = ["SimResult", "request_arrays", "simulate"]
