"""Errors as JSON: one body shape for every refusal, naming the field path as the Python exception does.

Every error response is ``{"status_code", "detail", "path", "extra": [{"key", "message", "source"}, ...]}``:
``path`` is the dotted field of the first problem (``"workload.arrivals.rate_per_s"``, the same as
``kvwire.ScenarioError.path``), ``extra`` lists every problem (a sweep's bad points each add one, with
``point`` and ``values``; a scenario file's syntax error, ``line`` and ``column``). Scenario errors are 422;
malformed bodies (wrong JSON types, text that is not TOML or JSON) are 400.

>>> import kvwire
>>> try:
...     kvwire.validate({"workload": {"arrivals": {"rate_per_s": -1}}})
... except kvwire.ScenarioError as e:
...     body = error_body(e, 422)
>>> body["status_code"], body["path"]
(422, 'workload.arrivals.rate_per_s')
"""

from __future__ import annotations

import logging
import re
from typing import Any

import kvwire
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from kvwire_api.limiter import Overloaded, TimedOut
from kvwire_api.scenario_text import TextSyntaxError

log = logging.getLogger("kvwire_api")


def error_body(e: kvwire.KvwireError, status: int, prefix: str = "") -> dict[str, Any]:
    """The JSON body for a kvwire exception (``prefix`` is prepended to its path, e.g. ``"base."``)."""
    path = f"{prefix}{e.path}" if e.path else prefix.rstrip(".")
    extra: list[dict[str, Any]] = []
    for err in getattr(e, "errors", None) or []:  # kvwire.SweepError: every bad point
        item = {"key": err.get("path", ""), "message": err.get("message", ""), "source": "body"}
        item.update({k: v for k, v in err.items() if k in ("point", "values")})
        extra.append(item)
    if not extra:
        extra.append({"key": path, "message": str(e), "source": "body"})
    return {"status_code": status, "detail": str(e), "path": path or extra[0]["key"], "extra": extra}


def simple_body(status: int, detail: str, path: str = "") -> dict[str, Any]:
    return {"status_code": status, "detail": detail, "path": path, "extra": []}


def _kvwire_error(_: Request[Any, Any, Any], exc: kvwire.KvwireError) -> Response[dict[str, Any]]:
    if isinstance(exc, kvwire.InternalError):
        log.error("internal error of the simulator: %s", exc)
        return Response(simple_body(500, f"internal error of the simulator: {exc}"), status_code=500)
    return Response(error_body(exc, 422), status_code=422)


#: msgspec's message for a required key that is absent: it names the key in the message, not in the location.
_MISSING = re.compile(r"^Object missing required field `([^`]+)`$")


def _body_key(item: dict[str, Any]) -> str:
    """Litestar names the whole body ``data``; the service names it ``""`` (no field), as the library does. A
    missing required key is named by its own path (``total_instances``, ``scenario.x``), not its parent's."""
    key = str(item.get("key", ""))
    key = "" if key == "data" and item.get("source") == "body" else key
    missing = _MISSING.match(str(item.get("message", "")))
    if missing and item.get("source") == "body":
        key = f"{key}.{missing.group(1)}" if key else missing.group(1)
    return key


def _validation_error(_: Request[Any, Any, Any], exc: ValidationException) -> Response[dict[str, Any]]:
    extra = exc.extra if isinstance(exc.extra, list) else []
    items = [
        {"key": _body_key(x), "message": str(x.get("message", "")), "source": str(x.get("source", ""))}
        for x in extra
        if isinstance(x, dict)
    ]
    detail = "; ".join(f"{i['key']}: {i['message']}" if i["key"] else i["message"] for i in items) or exc.detail
    return Response(
        {"status_code": 400, "detail": detail, "path": items[0]["key"] if items else "", "extra": items},
        status_code=400,
    )


def _http_error(_: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    headers = dict(exc.headers or {})
    return Response(simple_body(exc.status_code, exc.detail), status_code=exc.status_code, headers=headers)


def _text_syntax(_: Request[Any, Any, Any], exc: TextSyntaxError) -> Response[dict[str, Any]]:
    """400 naming the body's ``text`` and, in ``extra``, the ``line`` and ``column`` where the parser stopped."""
    item: dict[str, Any] = {"key": "text", "message": exc.message, "source": "body"}
    if exc.line is not None:
        item.update(line=exc.line, column=exc.column)
    return Response({"status_code": 400, "detail": str(exc), "path": "text", "extra": [item]}, status_code=400)


def _overloaded(_: Request[Any, Any, Any], exc: Overloaded) -> Response[dict[str, Any]]:
    return Response(
        simple_body(503, f"{exc}: every simulation thread is busy and the waiting line is full"),
        status_code=503,
        headers={"Retry-After": str(exc.retry_after_s)},
    )


def _timed_out(_: Request[Any, Any, Any], exc: TimedOut) -> Response[dict[str, Any]]:
    return Response(
        simple_body(
            503,
            f"the request {exc}, the limit for synchronous work; run large simulations as a job instead "
            "(POST /v1/sweeps with the scenario as base and no grid)",
        ),
        status_code=503,
        headers={"Retry-After": "5"},
    )


def _too_deep(_: Request[Any, Any, Any], exc: RecursionError) -> Response[dict[str, Any]]:
    # The JSON decoder gives up on bodies nested thousands of levels deep; no scenario is.
    return Response(simple_body(400, "the body is nested too deeply to be a scenario"), status_code=400)


def _unexpected(_: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    log.exception("unexpected error", exc_info=exc)
    return Response(
        simple_body(HTTP_500_INTERNAL_SERVER_ERROR, f"internal error: {type(exc).__name__}"),
        status_code=HTTP_500_INTERNAL_SERVER_ERROR,
    )


EXCEPTION_HANDLERS: dict[Any, Any] = {
    kvwire.KvwireError: _kvwire_error,
    ValidationException: _validation_error,
    HTTPException: _http_error,
    TextSyntaxError: _text_syntax,
    Overloaded: _overloaded,
    TimedOut: _timed_out,
    RecursionError: _too_deep,
    Exception: _unexpected,
}

__all__ = ["EXCEPTION_HANDLERS", "error_body", "simple_body"]
