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

from kvwire_api.config import Settings
from kvwire_api.jobs import JobRunner
from kvwire_api.limiter import SimSlots
from kvwire_api.store import Store, TraceRecord, valid_id


class TooLarge(kvwire.ScenarioError):
    """A run bigger than the service's bounds (maps to 422 with the field path, like any scenario error)."""


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
        """How many requests ``scenario`` would simulate (generated, inline trace, or uploaded trace)."""
        wl = scenario.get("workload")
        if not isinstance(wl, Mapping):
            return default_requests()
        trace = wl.get("trace")
        if isinstance(trace, Mapping):
            if "file" in trace:
                return self.trace_record(trace["file"], f"{path}workload.trace.file").requests
            arrivals = trace.get("arrival_s")
            return len(arrivals) if isinstance(arrivals, list) else 0
        n = wl.get("requests", default_requests())
        return int(n) if isinstance(n, int) and not isinstance(n, bool) else 0  # the core refuses other types

    def check_requests(self, scenario: Mapping[str, Any], limit: int, path: str, what: str) -> int:
        """Refuse a scenario with more than ``limit`` requests, naming the field that sets the count."""
        n = self.request_count(scenario, path)
        if n > limit:
            wl = scenario.get("workload")
            field = "workload.trace" if isinstance(wl, Mapping) and "trace" in wl else "workload.requests"
            raise TooLarge(f"{path}{field}: {n:,} requests is more than {limit:,}, the limit {what}", path + field)
        return n

    def trace_record(self, trace_id: Any, path: str) -> TraceRecord:
        if not isinstance(trace_id, str) or not valid_id(trace_id):
            raise kvwire.TraceError(f"{path}: not a trace id (upload the file with POST /v1/traces)", path)
        rec = self.store.get_trace(trace_id)
        if rec is None:
            raise kvwire.TraceError(f"{path}: no uploaded trace has the id {trace_id!r}", path)
        return rec

    def split_trace(self, scenario: Mapping[str, Any], path: str = "") -> tuple[dict[str, Any], pl.DataFrame | None]:
        """The scenario without a ``workload.trace.file`` reference, and the referenced request table (or None).

        The id is resolved to a file the service stored (never a path from the request). Other keys of the
        trace object are refused, as the library refuses unknown keys."""
        sc = dict(scenario)
        wl = sc.get("workload")
        if not isinstance(wl, Mapping) or not isinstance(wl.get("trace"), Mapping) or "file" not in wl["trace"]:
            return sc, None
        trace = wl["trace"]
        others = sorted(set(trace) - {"file"})
        if others:
            p = f"{path}workload.trace.{others[0]}"
            raise kvwire.TraceError(f"{p}: a trace given by file takes no other keys", p)
        rec = self.trace_record(trace["file"], f"{path}workload.trace.file")
        table = pl.read_parquet(self.store.trace_path(rec.id))
        rest = {k: v for k, v in wl.items() if k != "trace"}
        if rest:
            sc["workload"] = rest
        else:
            sc.pop("workload")
        return sc, table

    def inline_trace(self, scenario: Mapping[str, Any], path: str = "") -> dict[str, Any]:
        """The scenario with a ``workload.trace.file`` reference replaced by the trace's columns inline (for
        sweeps and capacity searches, whose definitions must stand alone to be resumed)."""
        sc, table = self.split_trace(scenario, path)
        if table is None:
            return sc
        sc = copy.deepcopy(sc)
        sc.setdefault("workload", {})["trace"] = table.to_dict(as_series=False)
        return sc


__all__ = ["Services", "TooLarge", "default_requests"]
