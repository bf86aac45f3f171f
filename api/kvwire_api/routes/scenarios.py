"""Scenarios without running them: ``GET /v1/scenarios/default`` (the default scenario in full),
``POST /v1/scenarios/validate`` (would ``POST /v1/simulations`` run this scenario? Checked as a run would be: the
library's validation, the uploaded trace it names, the service's synchronous bound; answered with the request
count and the analytic ceilings), and ``POST /v1/scenarios/parse`` / ``/format`` (a scenario file's TOML or JSON
text to its object and back, as the library reads and writes files; :mod:`kvwire_api.scenario_text`). The web
page's editor reads what you type with ``parse`` and checks it with ``validate``."""

from __future__ import annotations

from typing import Any

import anyio
import kvwire
from litestar import Controller, Request, get, post
from litestar.di import NamedDependency
from litestar.exceptions import ValidationException
from litestar.params import JSONBody

from kvwire_api.routes.common import errors
from kvwire_api.scenario_text import format_scenario, parse_text
from kvwire_api.services import Services
from kvwire_api.types import (
    CeilingsDict,
    ParsedScenarioDict,
    ScenarioBody,
    ScenarioFormatBody,
    ScenarioTextBody,
    ScenarioTextDict,
    ValidationDict,
)

#: What the text endpoints' 400 and 422 mean.
TEXT_ERRORS = {
    400: "Malformed body (`path` names the field), or `text` is not a TOML/JSON document of a table/object: "
    "`path` is `text`, `extra[0]` gives the parser's `message` and, when it names one, the `line` and `column`",
    422: "A value no scenario file can hold (a non-finite number, a date, an integer beyond 64 bits, a null in "
    "an array for TOML); `path` names the field",
}


def validate_scenario(svc: Services, scenario: dict[str, Any]) -> ValidationDict:
    """The validation document of ``scenario``, or the error ``POST /v1/simulations`` would give."""
    sc, requests, _ = svc.split_trace(scenario)
    n = svc.check_sync(scenario, requests)
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

    @post(
        "/parse",
        status_code=200,
        summary="Read a scenario file's text (TOML or JSON) as kvwire.load_scenario reads the file",
        description="The object the text holds, exactly as the library reads a `.toml` (tomllib) or `.json` file "
        "of that text: syntax only, not checked as a scenario (POST /v1/scenarios/validate does that), so a "
        "sweep definition reads too. A syntax error is a 400 whose `extra[0]` has the `line` and `column`.",
        responses=errors(400, 413, 422, described=TEXT_ERRORS),
    )
    async def parse(self, data: JSONBody[ScenarioTextBody], request: Request[Any, Any, Any]) -> ParsedScenarioDict:
        only_keys(await request.json(), ScenarioTextBody)
        scenario = await anyio.to_thread.run_sync(parse_text, data["text"], data["format"])
        return {"scenario": scenario}

    @post(
        "/format",
        status_code=200,
        summary="Write a scenario (or any object) as TOML (kvwire.scenario.to_toml) or JSON text",
        description="TOML as kvwire.scenario.to_toml writes it (null fields left out: they mean the default), "
        "JSON indented by 2 spaces; both end with a newline, and POST /v1/scenarios/parse reads either back to "
        "the object (for TOML: without its null fields). Syntax only, like parse.",
        responses=errors(400, 413, 422, described=TEXT_ERRORS),
    )
    async def format(self, data: JSONBody[ScenarioFormatBody], request: Request[Any, Any, Any]) -> ScenarioTextDict:
        only_keys(await request.json(), ScenarioFormatBody)
        try:
            text = await anyio.to_thread.run_sync(format_scenario, data["scenario"], data["format"])
        except kvwire.ScenarioError as e:  # name the field inside the body's `scenario`
            raise _in_scenario(e) from None
        return {"text": text}


def only_keys(raw: dict[str, Any], body: Any) -> None:
    """400 naming the first key of ``raw`` that the TypedDict ``body`` does not have (the decoder drops them)."""
    allowed = list(body.__annotations__)
    unknown = [k for k in raw if k not in allowed]
    if unknown:
        message = f"unknown field (expected {', '.join(allowed)})"
        raise ValidationException(
            detail=f"{unknown[0]}: {message}", extra=[{"key": k, "message": message, "source": "body"} for k in unknown]
        )


def _in_scenario(e: kvwire.ScenarioError) -> kvwire.ScenarioError:
    """``e`` with its path inside the body's ``scenario`` field (``workload.seed`` -> ``scenario.workload.seed``)."""
    message = str(e)
    if not e.path:
        return kvwire.ScenarioError(message, "scenario")
    if message.startswith(e.path):
        message = f"scenario.{message}"
    return kvwire.ScenarioError(message, f"scenario.{e.path}")


__all__ = ["ScenarioController", "only_keys", "validate_scenario"]
