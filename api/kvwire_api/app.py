"""The Litestar application: routes, the shared services (store, limiter, job runner), errors, auth, OpenAPI.

>>> import tempfile
>>> from litestar.testing import TestClient
>>> from kvwire_api.config import Settings
>>> with TestClient(create_app(Settings(data_dir=tempfile.mkdtemp()))) as client:
...     client.get("/health").json()["status"]
'ok'
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

import anyio
from litestar import Litestar, Request, Response
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme

from kvwire_api.auth import require_token
from kvwire_api.cluster import Cluster
from kvwire_api.config import Settings
from kvwire_api.errors import EXCEPTION_HANDLERS
from kvwire_api.jobs import JobRunner
from kvwire_api.limiter import SimSlots
from kvwire_api.openapi import ClosedTypedDictPlugin
from kvwire_api.routes.catalog import CatalogController
from kvwire_api.routes.common import provide_services
from kvwire_api.routes.docs import docs_router
from kvwire_api.routes.health import health
from kvwire_api.routes.jobs import CapacityController, PlanController, SplitController, SweepController
from kvwire_api.routes.page import index, static_router
from kvwire_api.routes.scenarios import ScenarioController
from kvwire_api.routes.schema_ui import assets_router, render_plugins
from kvwire_api.routes.simulations import SimulationController
from kvwire_api.routes.traces import TraceController
from kvwire_api.scenario_text import refuse_server_files
from kvwire_api.services import Services
from kvwire_api.store import Store
from kvwire_api.types import (
    CapacityBody,
    HandoffBody,
    PlanBody,
    ScenarioBody,
    ScenarioFormatBody,
    ScenarioTextBody,
    SplitBody,
    SweepBody,
)
from kvwire_api.version import __version__

log = logging.getLogger("kvwire_api")

DESCRIPTION = """kvwire as a service: simulate disaggregated LLM serving (prefill pool -> KV link -> decode pool)
and colocated serving. Scenarios are the JSON of `kvwire.simulate`; summaries are `kvwire.SummaryDict`. Long work
(sweeps, capacity searches) runs as persistent jobs. Errors are JSON whose `path` names the offending field."""


async def allow_header(request: Request[Any, Any, Any]) -> Response[None] | None:
    """Answer OPTIONS with every method of the path (Litestar's own OPTIONS handler can miss methods
    registered on the same path by one controller); refuse a JSON body that names a file on the server
    (``model.hf_config`` or ``cost.timing.file``, anywhere in it: a scenario, a sweep's base or grid, a hand-off
    call) with a 422
    naming the field, before any handler sees it."""
    if request.method in ("POST", "PUT", "PATCH"):
        body = await request.body()
        # "file" may end a dotted key (a sweep's "cost.timing.file") and a key may be spelt with \u escapes
        # ("hf_confi\u0067"): a body with either is read too
        if b"hf_config" in body or b'file"' in body or b"\\u" in body:
            try:
                data = json.loads(body)
            except (ValueError, RecursionError):
                return None  # not JSON: the handler refuses it as it would any other body
            refuse_server_files(data)
    if request.method != "OPTIONS":
        return None
    template = request.scope.get("path_template")
    methods = sorted({m for r in request.app.routes if r.path_format == template for m in r.methods})
    return Response(None, status_code=204, headers={"Allow": ", ".join(methods)})


def create_app(settings: Settings, cluster: Cluster | None = None) -> Litestar:
    """The service for ``settings`` (its data directory is created if needed). Serve it with one worker
    process: the simulations run in threads inside it. With ``settings.dask_scheduler`` the jobs run on that
    Dask cluster: ``cluster`` is its client, connected already (``kvwire serve`` connects before it binds, to
    refuse an unreachable scheduler with a message), else the service connects at start; either way it closes
    the client when it stops."""

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        dask = cluster
        if dask is None and settings.dask_scheduler is not None:
            dask = await anyio.to_thread.run_sync(Cluster.connect, settings.dask_scheduler, settings.dask_timeout_s)
        try:
            async with _services(app, dask):
                yield
        finally:
            if dask is not None:
                await anyio.to_thread.run_sync(dask.close)

    @asynccontextmanager
    async def _services(app: Litestar, dask: Cluster | None) -> AsyncIterator[None]:
        store = Store(settings.data_dir)
        removed = store.sweep_orphans()
        if removed:
            log.info("removed %d files left by an interrupted write", len(removed))
        slots = SimSlots(threads=settings.sim_threads, queue=settings.sim_queue)
        runner = JobRunner(store, settings, cluster=dask)
        if dask is not None:
            log.info("jobs run on the Dask cluster at %s", dask.address)
        writer = ThreadPoolExecutor(max_workers=settings.sim_threads, thread_name_prefix="kvwire-writer")
        app.state.services = Services(settings=settings, store=store, slots=slots, runner=runner, writer=writer)
        resumed = runner.recover()
        if resumed:
            log.info("resuming %d job(s) interrupted by the last stop: %s", len(resumed), ", ".join(resumed))
        try:
            yield
        finally:
            runner.shutdown()
            slots.shutdown()
            writer.shutdown(wait=True)
            store.close()

    components: Components | None = None
    security: list[dict[str, list[str]]] | None = None
    if settings.token is not None:
        components = Components(security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer")})
        security = [{"bearer": []}]

    schema_assets = assets_router()
    return Litestar(
        route_handlers=[
            health,
            SimulationController,
            ScenarioController,
            SweepController,
            CapacityController,
            SplitController,
            PlanController,
            CatalogController,
            TraceController,
            index,
            static_router(),
            docs_router(settings.docs_dir),
            *([schema_assets] if schema_assets is not None else []),
        ],
        plugins=[
            ClosedTypedDictPlugin(
                ScenarioBody,
                SweepBody,
                CapacityBody,
                SplitBody,
                PlanBody,
                HandoffBody,
                ScenarioTextBody,
                ScenarioFormatBody,
            )
        ],
        before_request=allow_header,
        lifespan=[lifespan],
        dependencies={"svc": Provide(provide_services, sync_to_thread=False)},
        guards=[require_token],
        exception_handlers=EXCEPTION_HANDLERS,
        request_max_body_size=settings.max_body_bytes,
        openapi_config=OpenAPIConfig(
            title="kvwire",
            version=__version__,
            description=DESCRIPTION,
            components=components or Components(),
            security=security,
            render_plugins=render_plugins(),
        ),
        debug=False,
    )


__all__ = ["create_app"]
