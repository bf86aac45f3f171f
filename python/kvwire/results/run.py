"""Run a scenario: :func:`simulate` and its :class:`SimResult`."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, overload

import numpy as np
import polars as pl

import kvwire._core as _core
from kvwire._system import available_memory_bytes
from kvwire.errors import RequestsNotKeptError, ResourceError, ScenarioError
from kvwire.results.summary import (
    PCT_SCHEMA,
    percentile_rows,
    requests_frame,
    streamed_percentile_rows,
    streamed_row_figures,
    summarise,
    with_derived,
)
from kvwire.results.timeline import trace_dict, write_trace
from kvwire.results.writer import RowWriter
from kvwire.scenario.check import split_file_trace
from kvwire.scenario.load import scenario_json
from kvwire.traces.arrays import request_arrays
from kvwire.traces.hashes import hash_arrays, prefix_cache_enabled, streamed_hashes_error
from kvwire.traces.read import TraceScan
from kvwire.traces.spec import TraceFile

#: Runs of more requests than this do not keep their per-request table unless asked (``keep_requests=None``):
#: the summary is computed in the core as requests finish, holding only those in flight. About 0.8 GB of table
#: and summary at :data:`BYTES_PER_REQUEST`.
KEEP_REQUESTS_MAX = 2_000_000
#: Requests per chunk read from a trace file (or a table) into the core in a streamed run.
STREAM_CHUNK_ROWS = 1 << 18
#: Finished rows per table handed to ``out=`` (one Parquet row group each) in a streamed run.
OUT_ROWS = 1 << 18

#: Memory a run holds per request at its peak — the core's table and the Polars summary built from it — with
#: margin: measured 150-280 B per request (1M and 200k requests, peak RSS, ``benches/HISTORY.md``), taken as 400.
BYTES_PER_REQUEST = 400


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
    """The request count a scenario dict asks the generator for (800 by default; count x turns for sessions),
    if it is a plain integer."""
    if not isinstance(scenario, Mapping):
        return None
    workload = scenario.get("workload")
    if workload is None:
        return 800
    if not isinstance(workload, Mapping) or "trace" in workload or workload.get("external"):
        return None
    sessions = workload.get("sessions")
    if isinstance(sessions, Mapping):  # closed-loop sessions: at most count x turns requests
        count, turns = sessions.get("count"), sessions.get("turns")
        n = count * turns if isinstance(count, int) and isinstance(turns, int) and count > 0 and turns > 0 else None
    else:
        n = workload.get("requests", 800)
    return n if isinstance(n, int) and not isinstance(n, bool) and 0 < n < 2**63 else None


class SimResult:
    """The outcome of one run.

    Attributes:
        requests: one row per request (Polars DataFrame), see ``docs/reference/requests.md`` for the columns.
        summary: the summary dict (JSON-serialisable; ``None`` where a figure does not exist, never NaN).
        scenario: the resolved scenario that ran (presets expanded, defaults filled).
        stats: the core's raw run totals (per instance, link, ITL).
        ceilings: the scenario's analytic ceilings for the requests that ran (:func:`kvwire.ceilings`).
    """

    def __init__(
        self,
        columns: Mapping[str, np.ndarray] | None,
        stats: dict[str, Any],
        scenario: dict[str, Any],
        ceilings: dict[str, Any] | None = None,
        *,
        rows: dict[str, Any] | None = None,
        out: Path | None = None,
        timeline: Mapping[str, Any] | None = None,
    ) -> None:
        if columns is None and rows is None:
            raise TypeError("SimResult: give the columns of the table or a streamed run's figures (rows)")
        self._columns = columns
        self._rows = rows
        self.stats = stats
        self.scenario = scenario
        self.ceilings = ceilings
        #: Where the per-request table was written (``out=``), or None.
        self.out = out
        self._timeline = timeline

    @overload
    def timeline(self) -> dict[str, Any]: ...

    @overload
    def timeline(self, path: str | Path) -> Path: ...

    def timeline(self, path: str | Path | None = None) -> dict[str, Any] | Path:
        """The run's timeline as a Chrome / Perfetto trace (:mod:`kvwire.timeline`): one complete event per
        batch step (a thread per instance, a process per pool) and per hop transfer (threads per hop lane),
        times in microseconds. Without ``path`` the trace dict ``{"traceEvents": [...], "displayTimeUnit":
        "ms"}``; with it, the trace written there as JSON (event by event) and the path returned — open it in
        https://ui.perfetto.dev or ``chrome://tracing``.

        Raises:
            ScenarioError: the run did not record a timeline (``engine.timeline`` was not true), or ``path``
                is not a path or cannot be written (nothing is left behind).
            ResourceError: the trace as a dict would not fit in the memory available (pass a ``path``).

        >>> import kvwire
        >>> res = kvwire.simulate({"workload": {"requests": 20}, "engine": {"timeline": True}})
        >>> trace = res.timeline()
        >>> sorted({e["name"] for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "step"})
        ['decode', 'prefill']
        """
        if self._timeline is None:
            raise ScenarioError(
                'timeline: this run recorded no timeline; run it with "engine": {"timeline": true} '
                "(kvwire run --timeline FILE.json)",
                "engine.timeline",
            )
        if path is None:
            return trace_dict(self._timeline, self.stats, available_memory_bytes())
        return write_trace(path, self._timeline, self.stats)

    @property
    def requests_kept(self) -> bool:
        """Whether the per-request table was kept in memory (``False`` after ``keep_requests=False``)."""
        return self._columns is not None

    @cached_property
    def requests(self) -> pl.DataFrame:
        """One row per request (built on first use from the core's columns, without copying them).

        Raises:
            RequestsNotKeptError: the run did not keep its table (``keep_requests=False``, or more than
                :data:`KEEP_REQUESTS_MAX` requests); the message says how to get it.
        """
        if self._columns is None:
            n = self.stats["completed"] + self.stats["rejected"]
            where = (
                f"it was written to {self.out}: polars.scan_parquet / read it there"
                if self.out is not None
                else "pass out='requests.parquet' to stream it to a file (row groups, never held whole), or "
                f"keep_requests=True to hold it in memory (about {BYTES_PER_REQUEST} B per request)"
            )
            raise RequestsNotKeptError(
                f"requests: this run of {n:,} requests did not keep its per-request table (keep_requests=False, "
                f"or more than kvwire.results.run.KEEP_REQUESTS_MAX = {KEEP_REQUESTS_MAX:,} requests); the summary was "
                f"computed as requests finished. To get the table, {where}",
                "requests",
            )
        return requests_frame(dict(self._columns))

    def percentiles(self) -> pl.DataFrame:
        """Latency percentiles: one row per metric (``ttft_s, tpot_s, itl_s, e2e_s, handoff_s``), columns
        ``metric, count, mean, p50, p90, p95, p99, p99_9, max`` in seconds (linear interpolation)."""
        return self._percentiles

    @cached_property
    def _percentiles(self) -> pl.DataFrame:
        return pl.DataFrame(self._latency_rows, schema=PCT_SCHEMA)

    @cached_property
    def _summary_columns(self) -> Mapping[str, np.ndarray] | None:
        return None if self._columns is None else with_derived(self._columns)

    @cached_property
    def _latency_rows(self) -> list[dict[str, Any]]:
        cols = self._summary_columns
        if cols is None:
            assert self._rows is not None
            return streamed_percentile_rows(self._rows, self.stats["itl_s"])
        return percentile_rows(cols, self.stats["itl_s"])

    @cached_property
    def summary(self) -> dict[str, Any]:
        # From the core's columns with numpy: no Polars table is built for a summary alone (sweeps); a streamed
        # run's per-request figures come from the core.
        figures = None if self._rows is None or self._columns is not None else streamed_row_figures(self._rows)
        return summarise(
            self._summary_columns, self._latency_rows, self.stats, self.scenario, self.ceilings, figures=figures
        )

    def __repr__(self) -> str:
        s = self.stats
        n = s["completed"] + s["rejected"]
        kept = "" if self.requests_kept else ", table not kept"
        return (
            f"SimResult({n} requests: {s['completed']} completed, "
            f"{s['rejected']} rejected; horizon {s['horizon_s']:.3f} s{kept})"
        )


Chunks = Callable[[], Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]]


def _table_chunks(arrays: tuple[np.ndarray, np.ndarray, np.ndarray]) -> Chunks:
    """A request table already in memory, handed to the core in chunks of :data:`STREAM_CHUNK_ROWS` rows."""
    a, p, o = arrays

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for i in range(0, len(a), STREAM_CHUNK_ROWS):
            j = i + STREAM_CHUNK_ROWS
            yield a[i:j], p[i:j], o[i:j]

    return chunks


def _scan_chunks(scan: TraceScan, spec: TraceFile | None) -> Chunks:
    """A trace file read lazily (:meth:`TraceScan.batches`), chunk by chunk, each checked (rows numbered from
    the table's start); with ``spec``, options that leave no request raise its error."""

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        offset = 0
        for df in scan.batches(STREAM_CHUNK_ROWS) if spec is None else spec.batches(STREAM_CHUNK_ROWS):
            yield request_arrays(df, offset)
            offset += df.height
        if offset == 0 and spec is not None:
            raise spec.empty_error()

    return chunks


def _finish(
    out: dict[str, Any],
    trace_file: TraceFile | None,
    writer: RowWriter | None,
) -> SimResult:
    stats = json.loads(out["stats_json"])
    echo = json.loads(out["scenario_json"])
    if trace_file is not None:
        echo = trace_file.echo_into(echo)
    columns = out["columns"]
    rows = None if out.get("rows_json") is None else json.loads(out["rows_json"])
    res = SimResult(columns, stats, echo, json.loads(out["ceilings_json"]), rows=rows, timeline=out.get("timeline"))
    if writer is not None:
        if columns is not None:
            # Kept in memory: the whole table at once (a streamed run wrote it as rows finished).
            writer.whole(res.requests)
        res.out = writer.close()
    return res


def simulate(
    scenario: Mapping[str, Any] | str | Path | None = None,
    requests: pl.DataFrame | Mapping[str, Any] | TraceScan | None = None,
    *,
    keep_requests: bool | None = None,
    out: str | Path | None = None,
    cancel: threading.Event | None = None,
) -> SimResult:
    """Simulate one scenario.

    Args:
        scenario: a scenario dict (see :class:`kvwire.scenario.ScenarioDict`), a path to a ``.json`` or
            ``.toml`` file, or ``None`` for the built-in default. A ``workload.trace.file`` is read here
            (:mod:`kvwire.trace_spec`) and replayed.
        requests: optional explicit requests — a Polars DataFrame (or a mapping of columns) with
            ``arrival_s`` (seconds, sorted), ``prompt_tokens`` (≥ 1) and ``output_tokens`` (≥ 0), or a
            :class:`~kvwire.TraceScan` (:func:`kvwire.scan_trace`), read in chunks. The scenario must then not
            describe a generated workload.
        keep_requests: keep the per-request table (``res.requests``)? ``False``: no — the core computes the
            summary as requests finish, holding only those in flight (bounded memory; percentiles from a
            quantile sketch within ``summary["accuracy"]["relative_error"]``, 2⁻¹³); a trace file or
            :class:`~kvwire.TraceScan` is then read in chunks, twice, never whole. ``None`` (default): keep it
            unless the run has more than :data:`KEEP_REQUESTS_MAX` requests. ``True``: keep it.
        out: also write the per-request table to this ``.parquet`` (or ``.csv``) file; a run that does not keep
            the table writes it as requests finish (request-id order, one Parquet row group per
            :data:`OUT_ROWS` rows), never holding it whole. Written under a temporary name and renamed when
            complete. Parquet needs ``pyarrow`` (``pip install 'kvwire[stream]'``).
        cancel: optional ``threading.Event``; setting it (from another thread) stops the run within
            milliseconds with :class:`~kvwire.errors.Cancelled` (a service's time limit, a user's stop button).

    Returns:
        A :class:`SimResult`. The GIL is released while the Rust core validates and runs the scenario.

    Ctrl-C (any Python signal whose handler raises) stops a running simulation within milliseconds with
    ``KeyboardInterrupt``; the process stays usable.

    Raises:
        RequestsNotKeptError: later, reading ``res.requests`` of a run that did not keep its table.
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
    >>> big = kvwire.simulate({"workload": {"requests": 200, "arrivals": {"rate_per_s": 4}}}, keep_requests=False)
    >>> big.summary["requests"]["completed"], big.summary["accuracy"]["requests_kept"]
    (200, False)
    """
    # A scenario file is loaded here; workload.trace.file is read here (whole, or in chunks by the core).
    if keep_requests is not None and not isinstance(keep_requests, bool):
        raise ScenarioError(f"keep_requests: expected True, False or None, got {keep_requests!r}", "keep_requests")
    scenario, trace_file = split_file_trace(scenario)
    scan: TraceScan | None = requests if isinstance(requests, TraceScan) else None
    if trace_file is not None:
        if requests is not None:
            raise ScenarioError(
                "workload.trace: a request table was passed as well: give the requests once", "workload.trace"
            )
        scan = trace_file.scan()
    text = scenario_json(scenario)
    # Prefix caching reads the table's block hashes (hash_ids), which only an in-memory run carries.
    prefix_on = prefix_cache_enabled(text)
    # Faults run only in memory (the core refuses them in a streamed run): kept unless keep_requests=False.
    in_memory = prefix_on or faults_enabled(text)
    writer = RowWriter(out) if out is not None else None
    try:
        if scan is not None:
            if keep_requests or (in_memory and keep_requests is None):
                table = trace_file.read() if trace_file is not None else scan.collect()
                return _finish(_run_table(text, table, cancel, prefix_on), trace_file, writer)
            if prefix_on:
                raise streamed_hashes_error()
            # Streamed: the core reads the file twice, in chunks; a run of at most KEEP_REQUESTS_MAX requests
            # (keep_requests=None) keeps its table all the same.
            keep_up_to = None if keep_requests is False else KEEP_REQUESTS_MAX
            if writer is not None:
                writer.require_streaming()
            res = _core.simulate_stream(
                text,
                _scan_chunks(scan, trace_file),
                None if writer is None else writer,
                sink_rows=OUT_ROWS,
                keep_up_to=keep_up_to,
                cancel=cancel,
            )
            return _finish(res, trace_file, writer)
        if requests is not None:
            assert not isinstance(requests, TraceScan)  # handled above
            arrays = request_arrays(requests)
            n = len(arrays[0])
            hashes = hash_arrays(requests) if prefix_on else None
            if keep_requests or (keep_requests is None and (n <= KEEP_REQUESTS_MAX or in_memory)):
                check_memory(n, "requests")
                return _finish(_simulate_table(text, arrays, hashes, cancel), None, writer)
            if hashes is not None:
                raise streamed_hashes_error()
            if writer is not None:
                writer.require_streaming()
            return _finish(
                _core.simulate_stream(text, _table_chunks(arrays), writer, sink_rows=OUT_ROWS, cancel=cancel),
                None,
                writer,
            )
        n_generated = _generated_requests(scenario)
        if keep_requests or (
            keep_requests is None and (n_generated is None or n_generated <= KEEP_REQUESTS_MAX or in_memory)
        ):
            if n_generated is not None:
                check_memory(n_generated, "workload.requests")
            return _finish(_core.simulate(text, cancel=cancel), None, writer)
        if writer is not None:
            writer.require_streaming()
        return _finish(
            _core.simulate_stream(text, None, writer, chunk_rows=STREAM_CHUNK_ROWS, sink_rows=OUT_ROWS, cancel=cancel),
            None,
            writer,
        )
    except BaseException:
        if writer is not None:
            writer.abort()
        raise


def faults_enabled(scenario_text: str) -> bool:
    """Whether the scenario (the JSON text the core reads) has a ``faults`` section.

    >>> faults_enabled('{"faults": {"events": []}}'), faults_enabled("{}")
    (True, False)
    """
    return json.loads(scenario_text).get("faults") is not None


def _run_table(text: str, table: pl.DataFrame, cancel: threading.Event | None, prefix_on: bool) -> dict[str, Any]:
    arrays = request_arrays(table)
    check_memory(len(arrays[0]), "requests")
    return _simulate_table(text, arrays, hash_arrays(table) if prefix_on else None, cancel)


def _simulate_table(
    text: str,
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray],
    hashes: tuple[np.ndarray, np.ndarray] | None,
    cancel: threading.Event | None,
) -> dict[str, Any]:
    """One in-memory run of a request table, with its block hashes when given (prefix caching)."""
    if hashes is None:
        return dict(_core.simulate(text, *arrays, cancel=cancel))
    return dict(_core.simulate(text, *arrays, cancel=cancel, hash_offsets=hashes[0], hash_ids=hashes[1]))


__all__ = ["KEEP_REQUESTS_MAX", "SimResult", "request_arrays", "simulate"]
