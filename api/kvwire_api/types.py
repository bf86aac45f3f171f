"""The types of the HTTP bodies, taken from the Python API so that there is one definition of each.

- Scenarios are :class:`kvwire.ScenarioDict` (``kvwire.scenario``) with one service addition that the
  contract names: ``workload.trace`` may be ``{"file": "<id of an uploaded trace>"}``. The derived types
  below copy every annotation of the library's TypedDicts and add that key; ``tests/api/test_api_types.py``
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
from kvwire.results import CeilingsDict, HandoffResultDict, PercentileRowDict, SummaryDict
from kvwire.scenario import ScenarioDict, TraceDict, TraceFileDict, WorkloadDict
from kvwire.traces.spec import WINDOW_OPTIONS


def _with_keys(name: str, base: Any, extra: dict[str, Any], doc: str) -> Any:
    """A TypedDict named ``name`` with every annotation of ``base`` replaced or extended by ``extra`` (all keys
    optional, as in the library's scenario types)."""
    hints = typing.get_type_hints(base)
    td: Any = TypedDict(name, {**hints, **extra}, total=False)  # type: ignore[misc]
    td.__doc__ = doc
    return td


#: Arguments of the library's job functions that a request never sets: callbacks, the thread count (the
#: service's ``job_workers``), the executor (the service's) and a directory (the service names the job's own).
NOT_FROM_REQUESTS = ("progress", "cancel", "workers", "executor", "out")


def _from_signature(
    name: str, fn: Any, doc: str, replace: dict[str, Any] | None = None, required: tuple[str, ...] = ()
) -> Any:
    """A TypedDict of the arguments of ``fn`` (optional, except ``required``: those without a default there),
    without :data:`NOT_FROM_REQUESTS`, with the annotations in ``replace`` swapped in (a JSON form for a Python
    one)."""
    hints = {**typing.get_type_hints(fn), **(replace or {})}
    params = inspect.signature(fn).parameters
    fields = {p: hints[p] for p in params if p in hints and p not in NOT_FROM_REQUESTS}
    if required:
        fields = {p: (typing.Required[t] if p in required else t) for p, t in fields.items()}
    td: Any = TypedDict(name, fields, total=False)  # type: ignore[misc]
    td.__doc__ = doc
    return td


if TYPE_CHECKING:
    TraceBody = TraceDict
    WorkloadBody = WorkloadDict
    ScenarioBody = ScenarioDict
    HandoffBody = dict[str, Any]
    CapacityBody = dict[str, Any]
    SplitBody = dict[str, Any]
    PlanBody = dict[str, Any]
else:
    TraceBody = _with_keys(
        "TraceBody",
        TraceDict,
        {
            "file": str,
            **{k: v for k, v in typing.get_type_hints(TraceFileDict).items() if k in WINDOW_OPTIONS},
        },
        "Explicit requests: the three columns inline, or `file`: the id of a trace uploaded with POST /v1/traces, "
        "with optional window options (`start_s`, `duration_s`, `time_scale` or `rate_per_s`, `sample`, `seed`: "
        "as kvwire.read_trace takes them).",
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
    SplitBody = _from_signature(
        "SplitBody",
        kvwire.best_split,
        "The capacity of every prefill:decode split of `total_instances` instances, kvwire.best_split's "
        "arguments: each split's pools keep the scenario's devices; the search per split is kvwire.capacity's.",
        {"scenario": ScenarioBody},
        required=("total_instances",),
    )
    PlanBody = _from_signature(
        "PlanBody",
        kvwire.plan,
        "The best deployment of `model` on the `gpus` budget ({device: count}, one kind or several), kvwire.plan's "
        "arguments: a generated `workload` (its arrival rate is searched), the `slo`, the `objective` "
        "(`throughput_per_gpu`, or `min_gpus` with `rate_per_s`), what `space` varies, `timing` (cost.timing) "
        "and a base `scenario`.",
        {
            "model": str | dict[str, Any],
            "gpus": dict[str, int],
            "workload": WorkloadBody,
            "space": dict[str, list[Any]],
            "slo": dict[str, float],
            "timing": dict[str, Any],
            "scenario": ScenarioBody,
        },
        required=("model", "gpus"),
    )


class SimulationDict(TypedDict):
    """A finished simulation: its id, the summary and the resolved scenario that ran."""

    id: str
    created_s: float
    summary: SummaryDict
    scenario: dict[str, Any]


class RunListItemDict(TypedDict):
    """A stored run in the list: what ran (from its resolved scenario) and its headline figures (from its
    summary); ``None`` where the run has no such figure."""

    id: str
    created_s: float
    requests: int
    model: str | None
    mode: str | None
    link: str | None
    rate_per_s: float | None
    ttft_p99_s: float | None
    tpot_p99_s: float | None
    slo_attainment: float | None


class CdfSeriesDict(TypedDict):
    """One metric's distribution: ``values_s[i]`` is its quantile at ``fractions[i]`` (linear interpolation,
    as the percentiles), over ``count`` requests; empty lists when no request has the metric."""

    count: int
    values_s: list[float]
    fractions: list[float]


class CdfDict(TypedDict):
    """The CDFs of a run's latencies, over the same requests as its percentiles (the measured ones; hand-off
    over every transferred request)."""

    ttft_s: CdfSeriesDict
    tpot_s: CdfSeriesDict
    e2e_s: CdfSeriesDict
    handoff_s: CdfSeriesDict


class ValidationDict(TypedDict):
    """A scenario that ``POST /v1/simulations`` would run: how many requests, and its analytic ceilings
    (``kvwire.ceilings``; ``None`` when they cannot be computed for it)."""

    requests: int
    ceilings: CeilingsDict | None


class SweepBody(TypedDict, total=False):
    """A sweep definition, exactly ``kvwire.sweep``'s: ``base`` scenario, ``grid`` (product of the listed values
    per field path), ``zip`` (lists of equal length, varied together) and ``replicates`` (seeds per point)."""

    base: ScenarioBody
    grid: dict[str, list[Any]]
    zip: dict[str, list[Any]]
    replicates: int


#: The text formats of a scenario file (``kvwire.load_scenario`` reads both).
ScenarioTextFormat = Literal["toml", "json"]


class ScenarioTextBody(TypedDict):
    """A scenario file's text and its format, to be read as ``kvwire.load_scenario`` reads a ``.toml`` or
    ``.json`` file."""

    text: str
    format: ScenarioTextFormat


class ScenarioFormatBody(TypedDict):
    """An object (a scenario, or any document of one: syntax only) to be written as text of ``format``."""

    scenario: dict[str, Any]
    format: ScenarioTextFormat


class ParsedScenarioDict(TypedDict):
    """The object a scenario file's text holds, exactly as ``kvwire.load_scenario`` reads it (not validated:
    check it with POST /v1/scenarios/validate)."""

    scenario: dict[str, Any]


class ScenarioTextDict(TypedDict):
    """An object written as text: TOML by ``kvwire.scenario.to_toml`` (null fields left out, as TOML has no
    null), JSON indented by 2 spaces; both end with a newline."""

    text: str


#: ``?format=`` of a trace upload (overrides the content type).
TraceFormatName = Literal["azure", "mooncake"]

JobStatus = Literal["queued", "running", "done", "failed", "cancelled"]


class ErrorDict(TypedDict):
    """Every error response: ``path`` names the offending field as ``kvwire.ScenarioError.path`` does."""

    status_code: int
    detail: str
    path: str
    extra: list[dict[str, Any]]


class ExecutorDict(TypedDict):
    """What runs the service's jobs: this process's threads (``kind`` "threads", ``scheduler`` null, ``workers``
    = ``threads`` = the job threads), or a Dask cluster (``kind`` "dask", given by ``kvwire serve --dask`` or
    ``KVWIRE_DASK_SCHEDULER``: its scheduler's address, workers and threads, as last reported by the scheduler)."""

    kind: Literal["threads", "dask"]
    scheduler: str | None
    workers: int
    threads: int


class JobExecutorDict(TypedDict):
    """Where this service runs a job: ``"threads"`` (in its own process) or ``"dask"`` (on the cluster at
    ``scheduler``). A single simulation always runs in the service's process."""

    kind: Literal["threads", "dask"]
    scheduler: str | None


class JobDict(TypedDict):
    """A sweep, capacity or best-split job: status, progress (``done`` of ``total``, counted in ``unit``), ETA,
    and the result when done. ``started_s`` is set whenever ``status`` is ``running``."""

    id: str
    kind: Literal["sweep", "capacity", "split"]
    status: JobStatus
    done: int
    total: int | None
    eta_s: float | None
    cancel_requested: bool
    created_s: float
    started_s: float | None
    finished_s: float | None
    restarts: int
    #: A sweep's runs already finished when the current (or last) run of the job started, when it resumed
    #: from some (after a restart of the service); None for a job that started from nothing, and always for a
    #: capacity search or best split, which run again from the start.
    resumed_from: int | None
    error: ErrorDict | None
    result: dict[str, Any] | None
    #: What ``done`` and ``total`` count: a sweep's ``runs`` (one simulation of one point's replicate), a
    #: capacity search's ``evaluations`` (one simulation each; ``total`` is null until the search ends), a best
    #: split's ``splits`` (each a whole capacity search; its /results table has a row per evaluation).
    unit: Literal["runs", "evaluations", "splits"]
    #: A sweep's points (distinct configurations: ``total`` = ``points`` x ``replicates``); null otherwise.
    points: int | None
    #: A sweep's replicates of each point; null otherwise.
    replicates: int | None
    #: Where this service runs the job (its threads or the Dask cluster it was started with).
    executor: JobExecutorDict


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
    #: Where the service serves the documentation site (``"/docs/"``), or None when it serves none.
    docs: str | None
    #: What runs the jobs: the service's threads or a Dask cluster.
    executor: ExecutorDict


class LimitsDict(TypedDict):
    max_body_bytes: int
    max_trace_bytes: int
    max_sync_requests: int
    max_point_requests: int
    max_sweep_points: int
    run_timeout_s: float
    job_timeout_s: float
    #: What runs the jobs: the service's threads or a Dask cluster.
    executor: ExecutorDict


class OfferedDict(TypedDict):
    """One system and serving engine the measured database covers, with its data versions, newest first."""

    system: str
    backend: Literal["vllm", "sglang", "trtllm"]
    versions: list[str]


class AiconfiguratorDict(TypedDict):
    """The measured source's package here: whether it is installed, its version (None when absent), the
    command that installs it and what it measured (``[]`` when absent)."""

    installed: bool
    version: str | None
    install: str
    offered: list[OfferedDict]


#: The values ``cost.timing.source`` takes (``kvwire.timing.SOURCES``).
TimingSourceName = Literal["roofline", "aiconfigurator", "calibrated"]


class TimingSourcesDict(TypedDict):
    """``GET /v1/timing``: the values ``cost.timing.source`` takes, and the measured source's package."""

    sources: list[TimingSourceName]
    aiconfigurator: AiconfiguratorDict


class CatalogDict(TypedDict):
    models: dict[str, dict[str, Any]]
    devices: dict[str, dict[str, Any]]
    links: dict[str, dict[str, Any]]
    formats: dict[str, dict[str, Any]]
    format_aliases: dict[str, str]


__all__ = [
    "AiconfiguratorDict",
    "CapacityBody",
    "CatalogDict",
    "CdfDict",
    "CdfSeriesDict",
    "CeilingsDict",
    "ErrorDict",
    "ExecutorDict",
    "HandoffBody",
    "HandoffResultDict",
    "HealthDict",
    "JobDict",
    "JobExecutorDict",
    "LimitsDict",
    "OfferedDict",
    "ParsedScenarioDict",
    "PercentileRowDict",
    "PlanBody",
    "RunListItemDict",
    "ScenarioBody",
    "ScenarioFormatBody",
    "ScenarioTextBody",
    "ScenarioTextDict",
    "ScenarioTextFormat",
    "SimulationDict",
    "SlotsDict",
    "SplitBody",
    "SummaryDict",
    "SweepBody",
    "TimingSourceName",
    "TimingSourcesDict",
    "TraceBody",
    "TraceFormatName",
    "TraceInfoDict",
    "ValidationDict",
    "WorkloadBody",
]
