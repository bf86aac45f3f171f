"""``/v1/sweeps`` and ``/v1/capacity``: long work as jobs (202 + id), their status, progress events, results.

A definition is checked completely before the job is accepted (the library validates every point before any
work; the service adds its bounds), so a 202 means the job will run. Status: ``GET /{id}`` (points done of
total, ETA); progress as Server-Sent Events: ``GET /{id}/events``; results: ``GET /{id}/results`` (JSON, CSV
or Parquet; while running or after a failure, the points finished so far with ``Kvwire-Complete: false``);
``POST /{id}/cancel`` stops a queued or running job and keeps it, ``cancelled``, with its finished points (202);
``DELETE /{id}`` deletes a job in any state with its results (204): from then on every read of it is a 404.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import threading
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import anyio
import kvwire
import polars as pl
from litestar import Controller, Request, Response, delete, get, post
from litestar.di import NamedDependency
from litestar.exceptions import HTTPException
from litestar.openapi.spec import OpenAPIMediaType, OpenAPIType, Operation, Reference, Schema
from litestar.params import FromPath, JSONBody
from litestar.response import ServerSentEvent, ServerSentEventMessage

from kvwire_api.jobs import PLAN_TRACE_KEY, partial_table
from kvwire_api.jsonsafe import dumps
from kvwire_api.routes.common import check_id, errors, not_found
from kvwire_api.services import POINT_HINT, Services, TooLarge
from kvwire_api.store import TERMINAL, JobRecord, new_id
from kvwire_api.tables import FormatQuery, TableOperation, negotiate, table_response
from kvwire_api.types import NOT_FROM_REQUESTS, CapacityBody, JobDict, PlanBody, SplitBody, SweepBody

#: Checks a job's body: (service, body) -> (the definition to run, its number of points if known).
Prepare = Callable[[Services, dict[str, Any]], tuple[dict[str, Any], int | None]]
#: The arguments of kvwire.capacity and kvwire.best_split a request may set.
CAPACITY_ARGS = tuple(p for p in inspect.signature(kvwire.capacity).parameters if p not in NOT_FROM_REQUESTS)
SPLIT_ARGS = tuple(p for p in inspect.signature(kvwire.best_split).parameters if p not in NOT_FROM_REQUESTS)
PLAN_ARGS = tuple(p for p in inspect.signature(kvwire.plan).parameters if p not in NOT_FROM_REQUESTS)


def dry_run(call: Any) -> None:
    """Run a library job function with ``cancel`` already set: it validates everything, then stops before the
    first point with ``kvwire.Cancelled``. Validation errors propagate."""
    stop = threading.Event()
    stop.set()
    with contextlib.suppress(kvwire.Cancelled):
        call(stop)


def prepare_sweep(svc: Services, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The normalised sweep definition and its task count (points x replicates), or the error that refuses it.

    ``kvwire.sweep_points`` resolves and validates every point (a ``SweepError`` lists all bad ones); the
    service adds its bounds. A base must be a scenario object (the library would read a file named by a
    string), and no swept field may name a trace: the service reads no paths from requests."""
    base = body.get("base")
    if base is not None and not isinstance(base, dict):
        raise kvwire.ScenarioError(
            "base: must be a scenario object (the service reads no files named in requests)", "base"
        )
    for section in ("grid", "zip"):
        table = body.get(section)
        for key in table if isinstance(table, dict) else ():
            if isinstance(key, str) and (key == "workload" or key.startswith("workload.trace")):
                path = f"{section}.{key}"
                raise kvwire.ScenarioError(
                    f"{path}: a sweep cannot vary the trace (upload it and set base.workload.trace.file)", path
                )
    if isinstance(base, dict):
        body = {**body, "base": svc.inline_trace(base, "base.")}
    definition = kvwire.load_sweep(body)
    n_zip = len(next(iter(definition["zip"].values()))) if definition["zip"] else 1
    n_tasks = math.prod(len(v) for v in definition["grid"].values()) * n_zip * definition["replicates"]
    limit = svc.settings.max_sweep_points
    if n_tasks > limit:  # counted before the points are resolved, so a huge grid costs nothing
        path = "replicates" if definition["replicates"] > limit else "grid"
        smaller = "ask for fewer replicates" if path == "replicates" else "split it into several sweeps"
        raise TooLarge(
            f"{path}: {n_tasks:,} runs (points x replicates) is more than {limit:,}, the limit of one sweep job "
            f"(this service's KVWIRE_API_MAX_SWEEP_POINTS): {smaller}, or run it with the kvwire library or CLI on "
            "your own machine",
            path,
        )
    tasks = kvwire.sweep_points(definition)
    for task in tasks:
        try:
            svc.check_requests(
                task["scenario"], svc.settings.max_point_requests, "", f"of one simulation of a sweep job{POINT_HINT}"
            )
        except TooLarge as e:
            raise TooLarge(f"point {task['point']} ({task['values']}): {e}", e.path) from None
    return definition, len(tasks)


def _search_definition(svc: Services, body: dict[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    """A capacity or split body with its scenario checked and any uploaded trace inlined."""
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise kvwire.ScenarioError(f"{unknown[0]}: unknown field, expected one of {', '.join(allowed)}", unknown[0])
    scenario = body.get("scenario", {})
    if not isinstance(scenario, dict):
        raise kvwire.ScenarioError(
            "scenario: must be a scenario object (the service reads no files named in requests)", "scenario"
        )
    scenario = svc.inline_trace(scenario, "scenario.")
    svc.check_requests(
        scenario,
        svc.settings.max_point_requests,
        "scenario.",
        f"of one simulation of a capacity search{POINT_HINT}",
    )
    return {**body, "scenario": scenario}


def prepare_capacity(svc: Services, body: dict[str, Any]) -> dict[str, Any]:
    """The capacity definition (the scenario with any trace inlined), or the error that refuses it."""
    definition = _search_definition(svc, body, CAPACITY_ARGS)
    args = {k: v for k, v in definition.items() if k != "scenario"}
    dry_run(lambda stop: kvwire.capacity(definition["scenario"], **args, cancel=stop))
    return definition


def prepare_split(svc: Services, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The best-split definition and its number of splits, or the error that refuses it. The number of splits
    (``total_instances`` - 1) is bounded by the service's ``max_sweep_points`` before anything is resolved."""
    definition = _search_definition(svc, body, SPLIT_ARGS)
    n: Any = definition.get("total_instances")  # best_split checks it (a whole number >= 2)
    limit = svc.settings.max_sweep_points
    if isinstance(n, int) and not isinstance(n, bool) and n - 1 > limit:
        raise TooLarge(
            f"total_instances: {n - 1:,} splits is more than {limit:,}, the limit of one job (this service's "
            "KVWIRE_API_MAX_SWEEP_POINTS): ask for fewer instances",
            "total_instances",
        )
    args = {k: v for k, v in definition.items() if k not in ("scenario", "total_instances")}
    dry_run(lambda stop: kvwire.best_split(definition["scenario"], n, **args, workers=1, cancel=stop))
    return definition, int(n) - 1


def prepare_plan(svc: Services, body: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
    """The plan definition, or the error that refuses it: kvwire.plan's own checks (a dry run: the space
    enumerated and every configuration validated, stopped before the first simulation), and the service's bound
    on one simulation's requests.

    A trace workload names an uploaded trace (``workload.trace.file``: its id, with window options): the plan
    searches its rate by rescaling the file the service stored for it, so the definition names that file (under
    :data:`PLAN_TRACE_KEY` too); no message or result names it (errors and scenarios say the id)."""
    unknown = sorted(set(body) - set(PLAN_ARGS))
    if unknown:
        raise kvwire.ScenarioError(f"{unknown[0]}: unknown field, expected one of {', '.join(PLAN_ARGS)}", unknown[0])
    for key in ("model", "gpus"):
        if key not in body:
            raise kvwire.ScenarioError(f"{key}: required", key)
    scenario = body.get("scenario", {})
    if not isinstance(scenario, dict):
        raise kvwire.ScenarioError(
            "scenario: must be a scenario object (the service reads no files named in requests)", "scenario"
        )
    if isinstance(scenario.get("workload"), dict) and "trace" in scenario["workload"]:
        raise kvwire.ScenarioError(
            "scenario.workload.trace: give the plan's trace as workload.trace (an uploaded trace's id)",
            "scenario.workload.trace",
        )
    workload = body.get("workload")
    if workload is not None and not isinstance(workload, dict):
        raise kvwire.ScenarioError(f"workload: expected a dict, got {type(workload).__name__}", "workload")
    definition = dict(body)
    upload: dict[str, str] | None = None
    table = None
    trace = (workload or {}).get("trace")
    if trace is not None:
        if not isinstance(trace, dict) or "file" not in trace:
            raise kvwire.ScenarioError(
                "workload.trace: a plan searches the trace's rate: name an uploaded trace ({'file': its id, "
                "...window options}; POST /v1/traces), not inline arrays",
                "workload.trace",
            )
        ref = svc.uploaded_trace(trace, "")
        table = svc.read_trace(ref)
        upload = {"id": ref.record.id, "file": str(svc.store.trace_path(ref.record.id))}
        options = {k: v for k, v in trace.items() if k != "file"}
        definition["workload"] = {**workload, "trace": {"file": upload["file"], "format": "kvwire", **options}}  # type: ignore[dict-item]
        definition[PLAN_TRACE_KEY] = upload
    merged = {**scenario, "workload": {**scenario.get("workload", {}), **(workload or {})}}
    svc.check_requests(
        merged, svc.settings.max_point_requests, "", f"of one simulation of a plan job{POINT_HINT}", table=table
    )
    args = {k: v for k, v in definition.items() if k not in ("model", "gpus", PLAN_TRACE_KEY)}
    totals: list[int] = []  # the plan reports (0, configurations) once they are enumerated and validated
    try:
        dry_run(
            lambda stop: kvwire.plan(
                body["model"], body["gpus"], **args, workers=1, progress=lambda _d, t: totals.append(t), cancel=stop
            )
        )
    except kvwire.ScenarioError as e:
        if upload is None or upload["file"] not in str(e):
            raise
        raise type(e)(str(e).replace(upload["file"], f"the uploaded trace {upload['id']}"), e.path) from None
    return definition, (totals[0] if totals else None)


@dataclass
class EventsOperation(Operation):
    """The events endpoint answers with a text/event-stream; each event's ``data`` is a JobDict as JSON."""

    def __post_init__(self) -> None:
        ok: Any = (self.responses or {}).get("200")
        if ok is None:
            return
        event = Schema(
            type=OpenAPIType.OBJECT,
            properties={
                "id": Schema(type=OpenAPIType.STRING),
                "event": Schema(type=OpenAPIType.STRING, enum=["progress", *TERMINAL, "deleted"]),
                "data": Schema(
                    type=OpenAPIType.STRING,
                    content_media_type="application/json",
                    content_schema=Reference(ref="#/components/schemas/JobDict"),
                ),
            },
            required=["data"],
            description="One Server-Sent Event",
        )
        ok.description = "A stream of `progress` events, then one named after the final status"
        ok.content = {"text/event-stream": OpenAPIMediaType(schema=event)}


class JobController(Controller):
    """The endpoints every job kind shares; subclasses set ``path`` and ``kind``."""

    kind: ClassVar[str] = ""

    async def _job(self, svc: Services, job_id: FromPath[str], definition: bool = False) -> JobRecord:
        check_id(job_id, f"{self.kind} job")
        rec = await anyio.to_thread.run_sync(lambda: svc.store.get_job(job_id, definition))
        if rec is None or rec.kind != self.kind:
            raise not_found(f"{self.kind} job", job_id)
        return rec

    async def _start(self, request: Request[Any, Any, Any], svc: Services, prepare: Prepare) -> Response[JobDict]:
        """Check the body exactly as sent (the library refuses unknown keys by name; the typed view drops them)
        with ``prepare`` on a simulation slot, then record the job and answer 202."""
        raw: dict[str, Any] = await request.json()
        definition, total = await svc.slots.run(lambda: prepare(svc, raw), svc.settings.run_timeout_s)
        return await self._accept(svc, definition, total)

    async def _accept(self, svc: Services, definition: dict[str, Any], total: int | None) -> Response[JobDict]:
        job_id = new_id()
        rec = await anyio.to_thread.run_sync(svc.runner.submit, self.kind, definition, total, job_id)
        return Response(
            svc.runner.snapshot(rec),  # type: ignore[arg-type]
            status_code=202,
            headers={"Location": f"{self.path}/{job_id}"},
        )

    @get("/", summary="Jobs of this kind, oldest first", responses=errors())
    async def list_jobs(self, svc: NamedDependency[Services]) -> list[JobDict]:
        recs = await anyio.to_thread.run_sync(lambda: svc.store.list_jobs(kind=self.kind))
        return [svc.runner.snapshot(r) for r in recs]  # type: ignore[misc]

    @get("/{job_id:str}", summary="Status: points done of total, ETA, result or error", responses=errors(404))
    async def status(self, job_id: FromPath[str], svc: NamedDependency[Services]) -> JobDict:
        return svc.runner.snapshot(await self._job(svc, job_id))  # type: ignore[return-value]

    @get(
        "/{job_id:str}/events",
        summary="Progress as Server-Sent Events",
        operation_class=EventsOperation,
        description="`progress` events carry the status document (as GET /{id}) whenever it changes; the last "
        "event is named after the final status (`done`, `failed` or `cancelled`) and the stream ends; if the job is "
        "deleted meanwhile, the last event is `deleted`.",
        responses=errors(404),
    )
    async def events(self, job_id: FromPath[str], svc: NamedDependency[Services]) -> ServerSentEvent:
        await self._job(svc, job_id)

        async def stream() -> AsyncGenerator[ServerSentEventMessage, None]:
            last: tuple[Any, ...] | None = None
            n = 0
            idle = 0.0
            while True:
                rec = await anyio.to_thread.run_sync(lambda: svc.store.get_job(job_id, False))
                if rec is None:  # deleted while streaming
                    yield ServerSentEventMessage(data=json.dumps({"id": job_id, "status": "deleted"}), event="deleted")
                    return
                snap = svc.runner.snapshot(rec)
                key = (snap["status"], snap["done"], snap["total"])
                final = snap["status"] in TERMINAL and svc.runner.live(job_id) is None
                if key != last or final:
                    n += 1
                    last, idle = key, 0.0
                    event = snap["status"] if final else "progress"
                    yield ServerSentEventMessage(data=dumps(snap), event=event, id=str(n))
                if final:
                    return
                await anyio.sleep(0.2)
                idle += 0.2
                if idle >= 15.0:
                    idle = 0.0
                    yield ServerSentEventMessage(comment="keep-alive")

        return ServerSentEvent(stream())

    @get(
        "/{job_id:str}/results",
        summary="The result table (JSON rows, CSV or Parquet); partial while running or after a failure",
        operation_class=TableOperation,
        responses=errors(400, 404, 406),
    )
    async def results(
        self,
        job_id: FromPath[str],
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        fmt: FormatQuery = None,
    ) -> Response[bytes]:
        table_format = negotiate(request.headers, fmt)
        rec = await self._job(svc, job_id)
        out = svc.store.job_dir(job_id)
        name = f"{self.kind}-{job_id}"
        if rec.status == "done" and (out / "result.parquet").exists():
            resp = await anyio.to_thread.run_sync(table_response, out / "result.parquet", table_format, name)
            resp.headers["Kvwire-Complete"] = "true"
            return resp
        if rec.kind == "sweep":
            full = await self._job(svc, job_id, definition=True)
            df = await anyio.to_thread.run_sync(partial_table, out / "parts", full.definition)
        else:
            df = None
        resp = await anyio.to_thread.run_sync(
            table_response, df if df is not None else pl.DataFrame(), table_format, name
        )
        resp.headers["Kvwire-Complete"] = "false"
        return resp

    @post(
        "/{job_id:str}/cancel",
        status_code=202,
        summary="Cancel a queued or running job, keeping it and the points it finished",
        description="A queued job becomes `cancelled` at once; a running one is asked to stop "
        "(`cancel_requested: true`) and becomes `cancelled` when its in-flight points end, its finished points "
        "readable at /results (`Kvwire-Complete: false`). The answer is the job's status document. A finished "
        "job (`done`, `failed` or `cancelled`) cannot be cancelled: 409 naming its status. To remove a job, "
        "whatever its state, DELETE it.",
        responses=errors(404, 409),
    )
    async def cancel(self, job_id: FromPath[str], svc: NamedDependency[Services]) -> Response[JobDict]:
        rec = await self._job(svc, job_id)
        if await anyio.to_thread.run_sync(svc.runner.cancel, job_id):
            fresh = await self._job(svc, job_id)
            return Response(svc.runner.snapshot(fresh), status_code=202)  # type: ignore[arg-type]
        if rec.status in TERMINAL:
            raise HTTPException(
                status_code=409, detail=f"the job is already {rec.status}; only an active job can be cancelled"
            )
        raise HTTPException(status_code=409, detail="the job is changing state; retry")  # being picked up

    @delete(
        "/{job_id:str}",
        status_code=204,
        summary="Delete a job in any state and its results",
        description="The job is gone when the answer (204) arrives: its status, /results and /events are 404 "
        "from then on (a client following /events gets a last `deleted` event), and it is not resumed when the "
        "service restarts. A queued job never runs; a running one is stopped, and its files are removed as soon "
        "as its in-flight points end. To stop a job and keep what it finished, POST /{id}/cancel instead.",
        responses=errors(404),
    )
    async def remove(self, job_id: FromPath[str], svc: NamedDependency[Services]) -> None:
        await self._job(svc, job_id)
        if not await anyio.to_thread.run_sync(svc.runner.delete, job_id):
            raise not_found(f"{self.kind} job", job_id)  # deleted by another request meanwhile


class SweepController(JobController):
    path = "/v1/sweeps"
    tags = ("sweeps",)
    kind = "sweep"

    @post(
        "/",
        status_code=202,
        summary="Start a sweep job",
        description="The body is a kvwire.sweep definition: `base` scenario, `grid` {field path: [values]} "
        "(product), `zip` {field path: [values]} (equal lengths, varied together) and `replicates`. Every "
        "point is validated before the job is accepted; a bad definition is a 422 listing every bad point.",
        responses=errors(400, 413, 422, 503),
    )
    async def create(
        self, data: JSONBody[SweepBody], request: Request[Any, Any, Any], svc: NamedDependency[Services]
    ) -> Response[JobDict]:
        return await self._start(request, svc, prepare_sweep)


class CapacityController(JobController):
    path = "/v1/capacity"
    tags = ("capacity",)
    kind = "capacity"

    @post(
        "/",
        status_code=202,
        summary="Start a capacity search job",
        description="The highest arrival rate (or `field`) at which the scenario still meets its SLO for "
        "`slo_attainment` of the requests (kvwire.capacity). The result is in the job's `result` when done; "
        "the evaluated points in /results.",
        responses=errors(400, 413, 422, 503),
    )
    async def create(
        self, data: JSONBody[CapacityBody], request: Request[Any, Any, Any], svc: NamedDependency[Services]
    ) -> Response[JobDict]:
        return await self._start(request, svc, lambda s, body: (prepare_capacity(s, body), None))


class SplitController(JobController):
    path = "/v1/splits"
    tags = ("capacity",)
    kind = "split"

    @post(
        "/",
        status_code=202,
        summary="Start a best-split job: the capacity of every prefill:decode split",
        description="kvwire.best_split: for `total_instances` instances, the capacity (as POST /v1/capacity) of "
        "every split p:(N-p), each pool keeping the scenario's device. Progress counts splits; the job's "
        "`result` is SplitResult.to_dict() without `points`, which are its /results table.",
        responses=errors(400, 413, 422, 503),
    )
    async def create(
        self, data: JSONBody[SplitBody], request: Request[Any, Any, Any], svc: NamedDependency[Services]
    ) -> Response[JobDict]:
        return await self._start(request, svc, prepare_split)


class PlanController(JobController):
    path = "/v1/plans"
    tags = ("plans",)
    kind = "plan"

    @post(
        "/",
        status_code=202,
        summary="Start a plan job: the best deployment of a model on a GPU budget",
        description="kvwire.plan: every configuration the `gpus` budget holds (colocated or disaggregated, each "
        "pool's instances and parallel layout, and what `space` varies), pruned with the analytic ceilings, each "
        "survivor's capacity at the SLO, the frontier verified by full-length runs. Progress counts configurations; "
        "the job's `result` is PlanResult.to_dict() without `table` (its /results table) and with the text "
        "`report`. The whole body is checked (every configuration validated) before the 202.",
        responses=errors(400, 413, 422, 503),
    )
    async def create(
        self, data: JSONBody[PlanBody], request: Request[Any, Any, Any], svc: NamedDependency[Services]
    ) -> Response[JobDict]:
        return await self._start(request, svc, prepare_plan)


__all__ = [
    "CapacityController",
    "PlanController",
    "SplitController",
    "SweepController",
    "prepare_capacity",
    "prepare_plan",
    "prepare_split",
    "prepare_sweep",
]
