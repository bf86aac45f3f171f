"""What the route handlers share: settings, the store, the simulation limiter and the job runner, plus the
helpers that turn a request body into library calls (trace references, request-count bounds)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

import kvwire
import polars as pl
from kvwire.traces.spec import WINDOW_OPTIONS, TraceFile

from kvwire_api.config import Settings
from kvwire_api.jobs import JobRunner
from kvwire_api.limiter import SimSlots
from kvwire_api.store import Store, TraceRecord, valid_id

# A scenario may give WINDOW_OPTIONS beside an uploaded trace's id (``workload.trace = {"file": id, ...}``):
# the window, rate and sampling of kvwire.read_trace. The reader's own options (``format`` and BurstGPT's
# filters) were fixed when the trace was uploaded.


@dataclasses.dataclass(frozen=True)
class UploadedTrace:
    """A scenario's reference to an uploaded trace: the stored record and the checked window options."""

    record: TraceRecord
    spec: TraceFile
    #: The options as the scenario gave them (for the echo).
    options: dict[str, Any]

    @property
    def windowed(self) -> bool:
        return bool(self.options)

    def echo_into(self, echo: dict[str, Any]) -> dict[str, Any]:
        """The resolved scenario of a run with the trace reference (id and options) in place of the table
        the core saw, so that the echo can be posted again."""
        out = self.spec.echo_into(echo)
        out["workload"]["trace"] = {"file": self.record.id, **self.options}
        return out


class TooLarge(kvwire.ScenarioError):
    """A run bigger than the service's bounds (maps to 422 with the field path, like any scenario error)."""


#: What the synchronous bound says when a scenario is refused (POST /v1/simulations and its validation); kept
#: for callers of :meth:`Services.check_requests`: :meth:`Services.check_sync` says more.
SYNC_WHAT = "of a synchronous simulation; run larger ones as a job (POST /v1/sweeps with this scenario as base)"
#: The largest count any field of a scenario takes (the core's unsigned 64-bit integers).
MAX_COUNT = 2**64 - 1
#: What a job's per-simulation bound adds: where the bound comes from and what to do instead.
POINT_HINT = (
    " (this service's KVWIRE_API_MAX_POINT_REQUESTS): ask for fewer requests, or run it with the kvwire library "
    "or CLI on your own machine, which bound it only by time and memory"
)


@cache
def default_requests() -> int:
    """The number of requests a scenario generates when ``workload.requests`` is omitted."""
    return int(kvwire.default_scenario()["workload"]["requests"])


@dataclasses.dataclass
class Services:
    settings: Settings
    store: Store
    slots: SimSlots
    runner: JobRunner
    #: Writes result tables while the simulation thread computes the summary (one per simulation thread).
    writer: ThreadPoolExecutor

    def request_count(self, scenario: Mapping[str, Any], path: str = "") -> int:
        """How many requests ``scenario`` would simulate (generated, inline trace, or uploaded trace; an uploaded
        trace with window options is read to count them)."""
        wl = scenario.get("workload")
        if not isinstance(wl, Mapping):
            return default_requests()
        trace = wl.get("trace")
        if isinstance(trace, Mapping):
            if "file" in trace:
                ref = self.uploaded_trace(trace, path)
                return self.read_trace(ref, path).height if ref.windowed else ref.record.requests
            arrivals = trace.get("arrival_s")
            return len(arrivals) if isinstance(arrivals, list) else 0
        n = wl.get("requests", default_requests())
        return int(n) if isinstance(n, int) and not isinstance(n, bool) else 0  # the core refuses other types

    def check_requests(
        self, scenario: Mapping[str, Any], limit: int, path: str, what: str, table: pl.DataFrame | None = None
    ) -> int:
        """Refuse a scenario with more than ``limit`` requests, naming the field that sets the count. ``table``:
        the request table :meth:`split_trace` already read for it (counted instead of reading the trace again)."""
        n = table.height if table is not None else self.request_count(scenario, path)
        if n > limit:
            wl = scenario.get("workload")
            field = "workload.trace" if isinstance(wl, Mapping) and "trace" in wl else "workload.requests"
            raise TooLarge(f"{path}{field}: {n:,} requests is more than {limit:,}, the limit {what}", path + field)
        return n

    def check_sync(self, scenario: Mapping[str, Any], table: pl.DataFrame | None = None) -> int:
        """The bound of a synchronous simulation (``max_sync_requests``), refused with what to do instead: a run
        a job can take is pointed to jobs (``POST /v1/sweeps``); one over the jobs' bound too
        (``max_point_requests``) is told both limits, never pointed to a job that would refuse it as well."""
        n = table.height if table is not None else self.request_count(scenario)
        sync, point = self.settings.max_sync_requests, self.settings.max_point_requests
        if n <= sync:
            return n
        wl = scenario.get("workload")
        field = "workload.trace" if isinstance(wl, Mapping) and "trace" in wl else "workload.requests"
        if n <= point:
            message = (
                f"{field}: {n:,} requests is more than {sync:,}, the limit of a synchronous simulation; run it as "
                f"a job instead: POST /v1/sweeps with this scenario as base and no grid (a job's simulations take "
                f"up to {point:,} requests)"
            )
        else:
            message = (
                f"{field}: {n:,} requests is more than this service simulates in one run: {sync:,} synchronously "
                f"(POST /v1/simulations) and {point:,} in a job (POST /v1/sweeps, per point); ask for at most "
                f"{point:,} (a summary's percentiles settle on far fewer requests)"
            )
            if n <= MAX_COUNT and not (isinstance(wl, Mapping) and "trace" in wl):
                message += ", or run it with the kvwire library or CLI on your own machine (bounded only by time)"
            elif n > MAX_COUNT:
                message += f"; no scenario can have more than {MAX_COUNT:,}"
        raise TooLarge(message, field)

    def trace_record(self, trace_id: Any, path: str) -> TraceRecord:
        if not isinstance(trace_id, str) or not valid_id(trace_id):
            raise kvwire.TraceError(f"{path}: not a trace id (upload the file with POST /v1/traces)", path)
        rec = self.store.get_trace(trace_id)
        if rec is None:
            raise kvwire.TraceError(f"{path}: no uploaded trace has the id {trace_id!r}", path)
        return rec

    def uploaded_trace(self, trace: Mapping[str, Any], path: str = "") -> UploadedTrace:
        """The uploaded trace a ``workload.trace`` object names, with its window options checked (errors
        name ``<path>workload.trace.<key>``)."""
        where = f"{path}workload.trace"
        others = sorted(set(trace) - {"file", *WINDOW_OPTIONS})
        if others:
            p = f"{where}.{others[0]}"
            accepted = ", ".join(("file", *WINDOW_OPTIONS))
            raise kvwire.TraceError(
                f"{p}: not an option of an uploaded trace (its format and filters were fixed at upload); "
                f"the options are {accepted}",
                p,
            )
        rec = self.trace_record(trace["file"], f"{where}.file")
        options = {k: trace[k] for k in WINDOW_OPTIONS if k in trace}
        try:
            spec = TraceFile.from_dict({**options, "file": str(self.store.trace_path(rec.id)), "format": "kvwire"})
        except kvwire.ScenarioError as e:
            raise type(e)(f"{path}{e}", f"{path}{e.path}") from None
        return UploadedTrace(rec, spec, options)

    def read_trace(self, ref: UploadedTrace, path: str = "") -> pl.DataFrame:
        """The request table of an uploaded trace after its window options (errors name the trace by id,
        never by the file the service stored it in)."""
        if not ref.windowed:
            return pl.read_parquet(ref.spec.file)
        try:
            return ref.spec.read()
        except kvwire.ScenarioError as e:
            message = str(e).replace(ref.spec.file, f"the uploaded trace {ref.record.id}")
            raise type(e)(f"{path}{message}", f"{path}{e.path}") from None

    def split_trace(
        self, scenario: Mapping[str, Any], path: str = ""
    ) -> tuple[dict[str, Any], pl.DataFrame | None, UploadedTrace | None]:
        """The scenario without a ``workload.trace.file`` reference, the referenced request table after its
        window options (or None), and the reference (for the run's echo).

        The id is resolved to a file the service stored (never a path from the request). Keys other than
        ``file`` and :data:`WINDOW_OPTIONS` are refused, as the library refuses unknown keys."""
        sc = dict(scenario)
        wl = sc.get("workload")
        if not isinstance(wl, Mapping) or not isinstance(wl.get("trace"), Mapping) or "file" not in wl["trace"]:
            return sc, None, None
        ref = self.uploaded_trace(wl["trace"], path)
        table = self.read_trace(ref, path)
        rest = {k: v for k, v in wl.items() if k != "trace"}
        if rest:
            sc["workload"] = rest
        else:
            sc.pop("workload")
        return sc, table, ref

    def inline_trace(self, scenario: Mapping[str, Any], path: str = "") -> dict[str, Any]:
        """The scenario with a ``workload.trace.file`` reference replaced by the trace's columns inline (for
        sweeps and capacity searches, whose definitions must stand alone to be resumed)."""
        sc, table, _ = self.split_trace(scenario, path)
        if table is None:
            return sc
        sc = copy.deepcopy(sc)
        sc.setdefault("workload", {})["trace"] = table.to_dict(as_series=False)
        return sc


__all__ = [
    "MAX_COUNT",
    "POINT_HINT",
    "SYNC_WHAT",
    "WINDOW_OPTIONS",
    "Services",
    "TooLarge",
    "UploadedTrace",
    "default_requests",
]
