"""The types of the HTTP bodies, taken from the Python API so that there is one definition of each.

- Scenarios are :class:`kvwire.ScenarioDict` (``kvwire.scenario``) with one service addition that the
  contract names: ``workload.trace`` may be ``{"file": "<id of an uploaded trace>"}``. The derived types
  below copy every annotation of the library's TypedDicts and add that key; ``tests/test_api_types.py``
  checks that the OpenAPI document equals the library's types key for key.
- Summaries and hand-off results are :mod:`kvwire.results`' TypedDicts.
- The hand-off request is built from :func:`kvwire.handoff`'s signature (its keyword arguments).
- The sweep and capacity bodies are the arguments of ``kvwire.sweep`` / ``kvwire.load_sweep`` and
  ``kvwire.capacity``, checked against their signatures by the tests.
"""

from __future__ import annotations

import inspect
import typing
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import kvwire
from kvwire.results import HandoffResultDict, PercentileRowDict, SummaryDict
from kvwire.scenario import ScenarioDict, TraceDict, WorkloadDict


def _with_keys(name: str, base: Any, extra: dict[str, Any], doc: str) -> Any:
    """A TypedDict named ``name`` with every annotation of ``base`` replaced or extended by ``extra`` (all keys
    optional, as in the library's scenario types)."""
    hints = typing.get_type_hints(base)
    td: Any = TypedDict(name, {**hints, **extra}, total=False)  # type: ignore[misc]
    td.__doc__ = doc
    return td


def _from_signature(name: str, fn: Any, doc: str, replace: dict[str, Any] | None = None) -> Any:
    """A TypedDict of the arguments of ``fn`` (all optional: each has a default there), without the callbacks
    ``progress`` and ``cancel``, with the annotations in ``replace`` swapped in (a JSON form for a Python one)."""
    hints = {**typing.get_type_hints(fn), **(replace or {})}
    params = inspect.signature(fn).parameters
    fields = {p: hints[p] for p in params if p in hints and p not in ("progress", "cancel")}
    td: Any = TypedDict(name, fields, total=False)  # type: ignore[misc]
    td.__doc__ = doc
    return td


if TYPE_CHECKING:
    TraceBody = TraceDict
    WorkloadBody = WorkloadDict
    ScenarioBody = ScenarioDict
    HandoffBody = dict[str, Any]
    CapacityBody = dict[str, Any]
else:
    TraceBody = _with_keys(
        "TraceBody",
        TraceDict,
        {"file": str},
        "Explicit requests: the three columns inline, or `file`: the id of a trace uploaded with POST /v1/traces.",
    )
    WorkloadBody = _with_keys("WorkloadBody", WorkloadDict, {"trace": TraceBody}, WorkloadDict.__doc__ or "")
    ScenarioBody = _with_keys("ScenarioBody", ScenarioDict, {"workload": WorkloadBody}, ScenarioDict.__doc__ or "")
    HandoffBody = _from_signature(
        "HandoffBody",
        kvwire.handoff,
        "The closed-form hand-off of one request: the keyword arguments of kvwire.handoff.",
    )
    CapacityBody = _from_signature(
        "CapacityBody",
        kvwire.capacity,
        "A capacity search, kvwire.capacity's arguments: the highest value of `field` (by default the arrival "
        "rate) at which the scenario still meets its SLO for `slo_attainment` of the requests; `bounds` "
        "[low, high] to search between (default for the rate: from the analytic ceilings).",
        {"scenario": ScenarioBody},
    )


class SimulationDict(TypedDict):
    """A finished simulation: its id, the summary and the resolved scenario that ran."""

    id: str
    created_s: float
    summary: SummaryDict
    scenario: dict[str, Any]


class RunListItemDict(TypedDict):
    id: str
    created_s: float
    requests: int


class SweepBody(TypedDict, total=False):
    """A sweep definition, exactly ``kvwire.sweep``'s: ``base`` scenario, ``grid`` (product of the listed values
    per field path), ``zip`` (lists of equal length, varied together) and ``replicates`` (seeds per point)."""

    base: ScenarioBody
    grid: dict[str, list[Any]]
    zip: dict[str, list[Any]]
    replicates: int


#: ``?format=`` of a trace upload (overrides the content type).
TraceFormatName = Literal["azure", "mooncake"]

JobStatus = Literal["queued", "running", "done", "failed", "cancelled"]


class ErrorDict(TypedDict):
    """Every error response: ``path`` names the offending field as ``kvwire.ScenarioError.path`` does."""

    status_code: int
    detail: str
    path: str
    extra: list[dict[str, Any]]


class JobDict(TypedDict):
    """A sweep or capacity job: status, progress (points done of total), ETA, and the result when done."""

    id: str
    kind: Literal["sweep", "capacity"]
    status: JobStatus
    done: int
    total: int | None
    eta_s: float | None
    cancel_requested: bool
    created_s: float
    started_s: float | None
    finished_s: float | None
    restarts: int
    #: Points already finished when the current (or last) run of the job started: > 0 after a resume.
    resumed_from: int | None
    error: ErrorDict | None
    result: dict[str, Any] | None


class TraceInfoDict(TypedDict):
    """An uploaded trace; reference it from a scenario as ``{"workload": {"trace": {"file": id}}}``."""

    id: str
    created_s: float
    filename: str
    format: Literal["azure", "mooncake"]
    requests: int
    bytes: int
    duration_s: float


class SlotsDict(TypedDict):
    threads: int
    running: int
    waiting: int
    queue: int
    rejected: int


class HealthDict(TypedDict):
    status: Literal["ok"]
    version: str
    kvwire_version: str
    simulations: SlotsDict
    jobs: dict[str, int]
    auth: bool


class LimitsDict(TypedDict):
    max_body_bytes: int
    max_trace_bytes: int
    max_sync_requests: int
    max_point_requests: int
    max_sweep_points: int
    run_timeout_s: float
    job_timeout_s: float


class CatalogDict(TypedDict):
    models: dict[str, dict[str, Any]]
    devices: dict[str, dict[str, Any]]
    links: dict[str, dict[str, Any]]
    formats: dict[str, dict[str, Any]]
    format_aliases: dict[str, str]


__all__ = [
    "CapacityBody",
    "CatalogDict",
    "ErrorDict",
    "HandoffBody",
    "HandoffResultDict",
    "HealthDict",
    "JobDict",
    "LimitsDict",
    "PercentileRowDict",
    "RunListItemDict",
    "ScenarioBody",
    "SimulationDict",
    "SlotsDict",
    "SummaryDict",
    "SweepBody",
    "TraceBody",
    "TraceFormatName",
    "TraceInfoDict",
    "WorkloadBody",
]
