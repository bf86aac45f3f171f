"""Reference data and the closed-form calculator: presets, formats, layouts, timing sources, limits and
``POST /v1/handoff``."""

from __future__ import annotations

import inspect
from typing import Any, cast

import anyio
import kvwire
from kvwire import layout, quant
from litestar import Controller, Request, get, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from kvwire_api.routes.common import errors
from kvwire_api.services import Services
from kvwire_api.types import (
    CatalogDict,
    HandoffBody,
    HandoffResultDict,
    LimitsDict,
    OfferedDict,
    TimingSourceName,
    TimingSourcesDict,
)

HANDOFF_ARGS = tuple(inspect.signature(kvwire.handoff).parameters)
#: The most calls one ``POST /v1/handoff/batch`` takes (each is a closed form of about 0.1 ms).
MAX_BATCH = 2000


def handoff_call(body: dict[str, Any]) -> HandoffResultDict:
    """``kvwire.handoff(**body)``, refusing keys it does not take by name (as the scenario refuses them)."""
    unknown = sorted(set(body) - set(HANDOFF_ARGS))
    if unknown:
        raise kvwire.ScenarioError(
            f"{unknown[0]}: unknown field, expected one of {', '.join(HANDOFF_ARGS)}", unknown[0]
        )
    return kvwire.handoff(**body)


def handoff_batch(bodies: list[dict[str, Any]]) -> list[HandoffResultDict]:
    """``handoff_call`` of every body, in order; an error names the call's index (``[3].prompt_tokens``)."""
    if len(bodies) > MAX_BATCH:
        raise kvwire.ScenarioError(f"{len(bodies):,} calls is more than {MAX_BATCH:,}, the limit of one batch", "")
    out = []
    for i, body in enumerate(bodies):
        if not isinstance(body, dict):
            raise kvwire.ScenarioError(f"[{i}]: expected an object of kvwire.handoff arguments", f"[{i}]")
        try:
            out.append(handoff_call(body))
        except kvwire.ScenarioError as e:
            path = f"[{i}].{e.path}" if e.path else f"[{i}]"
            raise type(e)(f"[{i}].{e}", path) from None
    return out


def timing_sources() -> TimingSourcesDict:
    """What ``cost.timing`` can name here: the sources, and whether the measured one's package is installed,
    its version and the systems, serving engines and data versions it offers (what the page's timing-source
    selector lists)."""
    from kvwire.timing import SOURCES
    from kvwire.timing import aiconfigurator as aic

    installed = aic.installed()
    offered = cast("list[OfferedDict]", aic.offered() if installed else [])
    return {
        "sources": cast("list[TimingSourceName]", list(SOURCES)),
        "aiconfigurator": {
            "installed": installed,
            "version": aic.version() if installed else None,
            "install": "pip install 'kvwire[measured]'",
            "offered": offered,
        },
    }


class CatalogController(Controller):
    path = "/v1"
    tags = ("reference",)

    @get("/presets", summary="Model, device and link presets (with sources) and hand-off formats", responses=errors())
    async def presets(self) -> CatalogDict:
        return kvwire.catalog()  # type: ignore[return-value]

    @get("/formats", summary="The KV number formats (kvwire.quant.formats())", responses=errors())
    async def formats(self) -> list[dict[str, Any]]:
        return quant.formats().to_dicts()

    @get("/layouts", summary="The engine KV-cache layouts (kvwire.layout.layouts())", responses=errors())
    async def layouts(self) -> list[dict[str, Any]]:
        return layout.layouts().to_dicts()

    @get(
        "/timing",
        summary="The timing sources and the measured systems this service has",
        description="The values `cost.timing.source` takes, and the measured source's package (aiconfigurator-core): "
        "whether it is installed, its version, the command that installs it and, per system and serving engine, "
        "the data versions it holds (newest first). The web page's timing-source selector lists them.",
        responses=errors(),
    )
    async def timing(self) -> TimingSourcesDict:
        return await anyio.to_thread.run_sync(timing_sources)

    @get("/limits", summary="The bounds this service enforces", responses=errors())
    async def limits(self, svc: NamedDependency[Services]) -> LimitsDict:
        s = svc.settings
        return {
            "max_body_bytes": s.max_body_bytes,
            "max_trace_bytes": s.max_trace_bytes,
            "max_sync_requests": s.max_sync_requests,
            "max_point_requests": s.max_point_requests,
            "max_sweep_points": s.max_sweep_points,
            "run_timeout_s": s.run_timeout_s,
            "job_timeout_s": s.job_timeout_s,
            "executor": svc.runner.describe(),
        }

    @post(
        "/handoff",
        status_code=200,
        summary="The closed-form hand-off of one request (kvwire.handoff)",
        description="Size, time on the wire, prefill time, time exposed after the prefill and the rate at which "
        "hand-offs alone fill the link, for one prompt on an idle link. Every field is optional.",
        responses=errors(400, 413, 422),
    )
    async def handoff(self, data: JSONBody[HandoffBody], request: Request[Any, Any, Any]) -> HandoffResultDict:
        raw: dict[str, Any] = await request.json()
        return await anyio.to_thread.run_sync(handoff_call, raw)

    @post(
        "/handoff/batch",
        status_code=200,
        summary="Many closed-form hand-offs in one request (kvwire.handoff for each)",
        description="A list of POST /v1/handoff bodies (at most 2,000); the answer lists their results in the "
        "same order. An error names the call by its index: `[3].prompt_tokens`. The web page's explorer draws "
        "its curves with it.",
        responses=errors(400, 413, 422),
    )
    async def handoff_batch(
        self, data: JSONBody[list[HandoffBody]], request: Request[Any, Any, Any]
    ) -> list[HandoffResultDict]:
        raw: list[dict[str, Any]] = await request.json()
        return await anyio.to_thread.run_sync(handoff_batch, raw)


__all__ = ["MAX_BATCH", "CatalogController", "handoff_batch", "handoff_call"]
