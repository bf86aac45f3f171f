"""Errors as JSON: one body shape for every refusal, naming the field path as the Python exception does.

Every error response is ``{"status_code", "detail", "path", "extra": [{"key", "message", "source"}, ...]}``:
``path`` is the dotted field of the first problem (``"workload.arrivals.rate_per_s"``, the same as
``kvwire.ScenarioError.path``), ``extra`` lists every problem (a sweep's bad points each add one, with
``point`` and ``values``; a scenario file's syntax error, ``line`` and ``column``). Scenario errors are 422;
malformed bodies (wrong JSON types, text that is not TOML or JSON) are 400. A request body that is empty says
so (it is never named ``data``, Litestar's name for it); a body that is not JSON says where the parser stopped:
``extra[0]`` has its ``line`` and ``column`` (both from 1) and ``byte`` (from 0).

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
import msgspec
from litestar import Request, Response
from litestar.exceptions import ClientException, HTTPException, SerializationException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR
from litestar.utils.scope.state import ScopeState

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
#: msgspec's message for a body that is not JSON, with the offset where it stopped.
_MALFORMED = re.compile(r"^JSON is malformed: (?P<what>.*) \(byte (?P<byte>\d+)\)$")
#: msgspec's message for a body that ends inside a JSON value (or holds none).
_TRUNCATED = "Input data was truncated"
#: What an empty body is told (Litestar reports it as a missing ``data``).
EMPTY_BODY = "the request body is empty: this endpoint takes a JSON object"


def where(body: bytes, offset: int) -> tuple[int, int]:
    r"""The line and column (both from 1, the column in characters) of byte ``offset`` of ``body``.

    >>> where(b'{\n  "a": ,}', 9)
    (2, 8)
    """
    before = body[: max(0, offset)].decode("utf-8", errors="replace")
    return before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1


def _request_body(request: Request[Any, Any, Any]) -> bytes | None:
    """The body Litestar has already read for ``request`` (None if it has not)."""
    try:
        body = ScopeState.from_scope(request.scope).body
    except (AttributeError, KeyError, TypeError):  # an internal of Litestar's: do without it if it moves
        return None
    return body if isinstance(body, bytes) else None  # Empty (not read yet) is not bytes


def _not_json(request: Request[Any, Any, Any], exc: ClientException) -> Response[dict[str, Any]] | None:
    """The 400 for a body that is empty or not JSON (a JSON decoding error of the body), else None."""
    cause = exc.__cause__
    if not isinstance(cause, SerializationException) or not isinstance(cause.__cause__, msgspec.DecodeError):
        return None
    body = _request_body(request)
    message = str(cause.__cause__)
    malformed = _MALFORMED.match(message)
    if message == _TRUNCATED and body is not None and not body.strip():
        empty = {"key": "", "message": EMPTY_BODY, "source": "body"}
        return Response({**simple_body(400, EMPTY_BODY), "extra": [empty]}, status_code=400)
    if malformed:
        what, offset = malformed.group("what"), int(malformed.group("byte"))
        if what == "trailing characters":  # msgspec names the byte after the first one of them
            offset = max(0, offset - 1)
    elif message == _TRUNCATED:
        what, offset = "it ends before the JSON value does", len(body or b"")
    else:
        return None
    item: dict[str, Any] = {"key": "", "message": what, "source": "body", "byte": offset}
    detail = f"the request body is not JSON: {what}"
    if body is not None:
        line, column = where(body, offset)
        item.update(line=line, column=column)
        detail += f" at line {line}, column {column}"
    return Response({"status_code": 400, "detail": detail, "path": "", "extra": [item]}, status_code=400)


def _body_key(item: dict[str, Any]) -> str:
    """Litestar names the whole body ``data``; the service names it ``""`` (no field), as the library does. A
    missing required key is named by its own path (``total_instances``, ``scenario.x``), not its parent's."""
    key = str(item.get("key", ""))
    key = "" if key == "data" and item.get("source") == "body" else key
    missing = _MISSING.match(str(item.get("message", "")))
    if missing and item.get("source") == "body":
        key = f"{key}.{missing.group(1)}" if key else missing.group(1)
    return key


def _body_message(item: dict[str, Any]) -> str:
    """The message of a problem, with the whole body named as such: an absent body (Litestar: ``'data'``) is
    :data:`EMPTY_BODY`; a body of the wrong JSON type says it is the request body that was expected otherwise."""
    message = str(item.get("message", ""))
    if item.get("source") != "body" or item.get("key") != "data":
        return message
    if message == "'data'":  # the body is absent (a body missing a required key names that key instead)
        return EMPTY_BODY
    return f"the request body: {message[:1].lower()}{message[1:]}" if message.startswith("Expected") else message


def _validation_error(_: Request[Any, Any, Any], exc: ValidationException) -> Response[dict[str, Any]]:
    extra = exc.extra if isinstance(exc.extra, list) else []
    items = [
        {"key": _body_key(x), "message": _body_message(x), "source": str(x.get("source", ""))}
        for x in extra
        if isinstance(x, dict)
    ]
    detail = "; ".join(f"{i['key']}: {i['message']}" if i["key"] else i["message"] for i in items) or exc.detail
    return Response(
        {"status_code": 400, "detail": detail, "path": items[0]["key"] if items else "", "extra": items},
        status_code=400,
    )


def _body_too_large(request: Request[Any, Any, Any]) -> str:
    """The 413 of a body over ``max_body_bytes`` (Litestar says only "Request Entity Too Large")."""
    limit = request.app.state.services.settings.max_body_bytes
    return (
        f"the request body is larger than {limit:,} bytes, this service's limit (KVWIRE_API_MAX_BODY_BYTES); "
        "to replay a long trace, upload it (POST /v1/traces) and name it by id: "
        '{"workload": {"trace": {"file": "<id>"}}}'
    )


def _http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    if isinstance(exc, ClientException):
        not_json = _not_json(request, exc)
        if not_json is not None:
            return not_json
    headers = dict(exc.headers or {})
    detail = exc.detail
    if exc.status_code == 413 and detail == "Request Entity Too Large":
        detail = _body_too_large(request)
    return Response(simple_body(exc.status_code, detail), status_code=exc.status_code, headers=headers)


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

__all__ = ["EMPTY_BODY", "EXCEPTION_HANDLERS", "error_body", "simple_body", "where"]
