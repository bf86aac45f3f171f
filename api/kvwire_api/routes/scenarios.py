"""Scenarios without running them: ``GET /v1/scenarios/default`` (the default scenario in full) and
``POST /v1/scenarios/validate`` (would ``POST /v1/simulations`` run this scenario? Checked as a run would be: the
library's validation, the uploaded trace it names, the service's synchronous bound; answered with the request
count and the analytic ceilings). The web page checks its editor with it as you type."""

from __future__ import annotations

from typing import Any

import kvwire
from litestar import Controller, Request, get, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from kvwire_api.routes.common import errors
from kvwire_api.services import SYNC_WHAT, Services
from kvwire_api.types import CeilingsDict, ScenarioBody, ValidationDict


def validate_scenario(svc: Services, scenario: dict[str, Any]) -> ValidationDict:
    """The validation document of ``scenario``, or the error ``POST /v1/simulations`` would give."""
    sc, requests, _ = svc.split_trace(scenario)
    n = svc.check_requests(scenario, svc.settings.max_sync_requests, "", SYNC_WHAT, requests)
    kvwire.validate(sc)
    ceilings: CeilingsDict | None
    try:
        ceilings = kvwire.ceilings(sc, requests=requests)  # type: ignore[assignment]
    except kvwire.ScenarioError:  # the run itself is valid; only the ceilings cannot be priced for it
        ceilings = None
    return {"requests": n, "ceilings": ceilings}


class ScenarioController(Controller):
    path = "/v1/scenarios"
    tags = ("simulations",)

    @get("/default", summary="The default scenario, every field (kvwire.default_scenario())", responses=errors())
    async def default(self) -> ScenarioBody:
        return kvwire.default_scenario()  # type: ignore[return-value]

    @post(
        "/validate",
        status_code=200,
        summary="Check a scenario without running it",
        description="The same checks as POST /v1/simulations (unknown keys, values, presets, fit, an uploaded "
        "trace's id, the synchronous request bound) and the same errors; 200 with the number of requests and "
        "the analytic ceilings (kvwire.ceilings) when it would run.",
        responses=errors(400, 413, 422, 503),
    )
    async def validate(
        self, data: JSONBody[ScenarioBody], request: Request[Any, Any, Any], svc: NamedDependency[Services]
    ) -> ValidationDict:
        raw: dict[str, Any] = await request.json()
        return await svc.slots.run(lambda: validate_scenario(svc, raw), svc.settings.run_timeout_s)


__all__ = ["ScenarioController", "validate_scenario"]
