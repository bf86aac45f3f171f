"""Checks of our own for the schemathesis run (``SCHEMATHESIS_HOOKS=schemathesis_hooks``): every JSON response
is strict JSON (no ``NaN``/``Infinity``, which a browser's ``JSON.parse`` refuses), and no error names the request
body ``data`` (Litestar's internal name) instead of the field."""

from __future__ import annotations

import json
from typing import Any

import schemathesis


def content_type(response: Any) -> str:
    """The response's content type, whatever the case of the header's name."""
    return ";".join(v for k, vs in response.headers.items() if k.lower() == "content-type" for v in vs)


def _refuse(constant: str) -> Any:
    raise AssertionError(f"the response is not strict JSON: it holds {constant}")


@schemathesis.check
def strict_json(ctx: Any, response: Any, case: Any) -> bool | None:
    """A JSON response parses with a parser that refuses ``NaN``, ``Infinity`` and ``-Infinity``."""
    if "json" not in content_type(response) or not response.content:
        return None
    json.loads(response.content, parse_constant=_refuse)
    return True


@schemathesis.check
def errors_name_the_field(ctx: Any, response: Any, case: Any) -> bool | None:
    """An error body never gives ``'data'`` as its detail (an empty body is named as the request body)."""
    if response.status_code < 400 or "json" not in content_type(response):
        return None
    body = json.loads(response.content)
    if isinstance(body, dict) and body.get("detail") == "'data'":
        raise AssertionError("the error names the body 'data' instead of saying what is wrong")
    return True
