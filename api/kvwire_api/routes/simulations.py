"""``/v1/simulations``: run a scenario synchronously, read its summary, request table and percentiles."""

from __future__ import annotations

import threading
from typing import Annotated, Any, cast

import anyio
import kvwire
import polars as pl
from kvwire.results import report
from litestar import Controller, MediaType, Request, Response, delete, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter

from kvwire_api.cdf import MAX_POINTS, MIN_POINTS, cdf
from kvwire_api.routes.common import check_id, errors, not_found
from kvwire_api.services import Services
from kvwire_api.store import RunRecord, new_id, write_parquet_atomic
from kvwire_api.tables import FormatQuery, TableOperation, negotiate, table_response
from kvwire_api.types import CdfDict, RunListItemDict, ScenarioBody, SimulationDict


def run_simulation(
    svc: Services, run_id: str, scenario: dict[str, Any], cancel: threading.Event | None = None
) -> SimulationDict:
    """Simulate (in a worker thread), store the run, and return its document; ``cancel`` stops the simulation
    (nothing is stored then). A run over ``max_sync_requests`` is refused (counted on the table an uploaded
    trace was read into, so the trace is read once, and not on the event loop).

    The per-request table is built and written as Parquet on a writer thread while this one computes the
    summary (both release the GIL); the row is committed once both are done, so it never lacks its file."""
    sc, requests, ref = svc.split_trace(scenario)
    svc.check_sync(scenario, requests)
    res = kvwire.simulate(sc, requests=requests, keep_requests=True, cancel=cancel)  # the service stores the table
    echo = res.scenario if ref is None else ref.echo_into(res.scenario)
    path = svc.store.run_path(run_id)
    written = svc.writer.submit(lambda: write_parquet_atomic(res.requests, path))
    summary = res.summary
    percentiles = res.percentiles().to_dicts()
    written.result()
    created = svc.store.insert_run(run_id, echo, dict(summary), percentiles, res.requests.height)
    svc.store.trim_runs(svc.settings.max_runs)
    return {"id": run_id, "created_s": created, "summary": summary, "scenario": echo}  # type: ignore[typeddict-item]


class StoredRun:
    """What ``kvwire.report.render`` reads of a result (its summary and resolved scenario), for a stored run."""

    def __init__(self, rec: RunRecord) -> None:
        self.summary = rec.summary
        self.scenario = rec.scenario


def run_report(rec: RunRecord) -> str:
    """The report ``kvwire run`` prints for the run (the same function, on the stored summary and scenario)."""
    return report.render(cast(kvwire.SimResult, StoredRun(rec)))


class SimulationController(Controller):
    path = "/v1/simulations"
    tags = ("simulations",)

    @post(
        "/",
        status_code=201,
        summary="Run a simulation",
        description="Runs the scenario (the same JSON as `kvwire.simulate` takes) and returns its summary with a "
        "run id; `Location` points to the stored run. Synchronous for runs up to the service's "
        "`max_sync_requests`; larger ones are refused with a pointer to jobs (POST /v1/sweeps). A scenario may "
        'replay an uploaded trace: `{"workload": {"trace": {"file": "<id from POST /v1/traces>"}}}`.',
        responses=errors(400, 413, 422, 503),
    )
    async def create(
        self, data: JSONBody[ScenarioBody], request: Request[Any, Any, Any], svc: NamedDependency[Services]
    ) -> Response[SimulationDict]:
        # The typed body has been checked; the library gets the body exactly as sent, so that it refuses
        # unknown keys by name (the typed view drops them).
        raw: dict[str, Any] = await request.json()
        run_id = new_id()
        cancel = threading.Event()
        out = await svc.slots.run(
            lambda: run_simulation(svc, run_id, raw, cancel), svc.settings.run_timeout_s, cancel=cancel
        )
        return Response(out, status_code=201, headers={"Location": f"{self.path}/{run_id}"})

    @get("/", summary="List stored simulations, newest first", responses=errors())
    async def list_runs(
        self,
        svc: NamedDependency[Services],
        limit: Annotated[int, QueryParameter(name="limit", ge=1, le=1000)] = 100,
        offset: Annotated[int, QueryParameter(name="offset", ge=0, le=2**31)] = 0,
    ) -> list[RunListItemDict]:
        rows: list[RunListItemDict] = await anyio.to_thread.run_sync(svc.store.list_runs, limit, offset)  # type: ignore[arg-type]
        return rows

    @staticmethod
    async def _record(svc: Services, run_id: str) -> RunRecord:
        check_id(run_id, "simulation")
        rec = await anyio.to_thread.run_sync(svc.store.get_run, run_id)
        if rec is None:
            raise not_found("simulation", run_id)
        return rec

    @get("/{run_id:str}", summary="A stored simulation: summary and resolved scenario", responses=errors(404))
    async def read(self, run_id: FromPath[str], svc: NamedDependency[Services]) -> SimulationDict:
        rec = await self._record(svc, run_id)
        return {"id": rec.id, "created_s": rec.created_s, "summary": rec.summary, "scenario": rec.scenario}  # type: ignore[typeddict-item]

    @get(
        "/{run_id:str}/requests",
        summary="The per-request table (JSON rows, CSV or Parquet by Accept)",
        operation_class=TableOperation,
        responses=errors(400, 404, 406),
    )
    async def requests(
        self,
        run_id: FromPath[str],
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        fmt: FormatQuery = None,
    ) -> Response[bytes]:
        table_format = negotiate(request.headers, fmt)
        await self._record(svc, run_id)
        path = svc.store.run_path(run_id)
        return await anyio.to_thread.run_sync(table_response, path, table_format, f"{run_id}-requests")

    @get(
        "/{run_id:str}/percentiles",
        summary="Latency percentiles: metric x (count, mean, p50, p90, p95, p99, p99_9, max), seconds",
        operation_class=TableOperation,
        responses=errors(400, 404, 406),
    )
    async def percentiles(
        self,
        run_id: FromPath[str],
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        fmt: FormatQuery = None,
    ) -> Response[bytes]:
        table_format = negotiate(request.headers, fmt)
        rec = await self._record(svc, run_id)
        df = pl.DataFrame(rec.percentiles)
        return table_response(df, table_format, f"{run_id}-percentiles")

    @get(
        "/{run_id:str}/cdf",
        summary="Latency CDFs (TTFT, TPOT, E2E, hand-off), downsampled for a chart",
        description="Each metric's quantile function at `points` evenly spaced fractions plus the named "
        "percentiles (p50 ... p99.9, equal to the summary's), over the same requests as the percentiles.",
        responses=errors(400, 404),
    )
    async def cdf(
        self,
        run_id: FromPath[str],
        svc: NamedDependency[Services],
        points: Annotated[int, QueryParameter(name="points", ge=MIN_POINTS, le=MAX_POINTS)] = 200,
    ) -> CdfDict:
        await self._record(svc, run_id)
        path = svc.store.run_path(run_id)
        columns = ["measured", "ttft_s", "tpot_s", "e2e_s", "handoff_s"]
        return await anyio.to_thread.run_sync(lambda: cdf(pl.read_parquet(path, columns=columns), points))

    @get(
        "/{run_id:str}/report",
        summary="The run's report as `kvwire run` prints it (plain text)",
        description="Latency table, SLO, throughput, utilisation, occupancy, load, energy, link and the hot-spot "
        "sentence, written by the library's report function from the stored summary and scenario.",
        media_type=MediaType.TEXT,
        responses=errors(404),
    )
    async def report(self, run_id: FromPath[str], svc: NamedDependency[Services]) -> str:
        return run_report(await self._record(svc, run_id))

    @delete("/{run_id:str}", summary="Delete a stored simulation", responses=errors(404))
    async def remove(self, run_id: FromPath[str], svc: NamedDependency[Services]) -> None:
        check_id(run_id, "simulation")
        if not await anyio.to_thread.run_sync(svc.store.delete_run, run_id):
            raise not_found("simulation", run_id)


__all__ = ["SimulationController", "run_report", "run_simulation"]
