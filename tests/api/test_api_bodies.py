"""Request bodies that are not what an endpoint takes get a 400 that says what is wrong and where (issue 23,
item 7): an empty body is named as the request body (it was ``'data'``, Litestar's internal name for it), and a
body that is not JSON gives the line and column where the parser stopped (it gave a byte offset only)."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import TestClient

#: What an empty body is told.
EMPTY_BODY = "the request body is empty: this endpoint takes a JSON object"

#: Every endpoint that takes a JSON body.
JSON_ENDPOINTS = (
    "/v1/simulations",
    "/v1/scenarios/validate",
    "/v1/scenarios/parse",
    "/v1/scenarios/format",
    "/v1/sweeps",
    "/v1/capacity",
    "/v1/splits",
    "/v1/plans",
    "/v1/handoff",
    "/v1/handoff/batch",
)


def post(client: TestClient[Any], url: str, raw: bytes, content_type: str | None = "application/json") -> Any:
    headers = {"Content-Type": content_type} if content_type else {}
    return client.post(url, content=raw, headers=headers)


@pytest.mark.parametrize("url", JSON_ENDPOINTS)
@pytest.mark.parametrize("raw", [b"", b"   ", b"\n\t "], ids=["nothing", "spaces", "whitespace"])
def test_an_empty_body_is_named_as_the_body(client: TestClient[Any], url: str, raw: bytes) -> None:
    """An empty (or blank) body: 400 whose detail says the request body is empty, never ``'data'``."""
    r = post(client, url, raw)
    assert r.status_code == 400, (url, r.status_code, r.text)
    body = r.json()
    assert body["detail"] == EMPTY_BODY and "'data'" not in r.text and "data" not in body["path"], body
    assert body["extra"] and body["extra"][0]["message"] == EMPTY_BODY


def test_an_empty_body_without_a_content_type_is_named_too(client: TestClient[Any]) -> None:
    """``curl -X POST`` sends no content type and no body: the same answer."""
    r = post(client, "/v1/simulations", b"", None)
    assert r.status_code == 400 and r.json()["detail"] == EMPTY_BODY, r.text


#: Bodies that are not JSON, each with where a reader finds the fault (line, column, both from 1).
NOT_JSON = [
    (b'{\n  "workload": {"requests": ,}\n}', 2, 28, "invalid character"),
    (b'{"workload": {"requests": 10}', 1, 30, "ends before"),
    (b'{"a": 1}\n{"b": 2}', 2, 1, "trailing characters"),
    (b"\xff\xfe{}", 1, 1, "invalid character"),
    (b"{'model': 'llama3-8b'}", 1, 2, "object keys must be strings"),
    (b'{\n\n   "x": tru}', 3, 13, "invalid character"),  # where "tru" stops being "true"
]


@pytest.mark.parametrize(("raw", "line", "column", "what"), NOT_JSON)
def test_a_body_that_is_not_json_says_where(
    client: TestClient[Any], raw: bytes, line: int, column: int, what: str
) -> None:
    """400 whose detail names the line and column; ``extra[0]`` has ``line``, ``column`` and ``byte``."""
    r = post(client, "/v1/simulations", raw)
    assert r.status_code == 400, r.text
    body = r.json()
    item = body["extra"][0]
    assert (item["line"], item["column"]) == (line, column), body
    assert f"line {line}, column {column}" in body["detail"] and what in body["detail"], body
    assert body["detail"].startswith("the request body is not JSON"), body


@pytest.mark.parametrize(("raw", "expected"), [(b"null", "null"), (b"[1, 2]", "array"), (b'"x"', "str")])
def test_a_body_of_the_wrong_json_type_is_named_as_the_body(client: TestClient[Any], raw: bytes, expected: str) -> None:
    """A JSON value that is not an object: 400 saying it is the request body that should be an object."""
    r = post(client, "/v1/simulations", raw)
    assert r.status_code == 400, r.text
    assert r.json()["detail"].startswith("the request body: expected `object`, got"), r.text
    assert expected in r.json()["detail"]


def test_a_missing_key_is_still_named_by_its_own_path(client: TestClient[Any]) -> None:
    """An object body missing a required key is not called empty: the key is named."""
    r = client.post("/v1/splits", json={"scenario": {}})
    assert r.status_code == 400 and r.json()["path"] == "total_instances", r.text
    assert r.json()["detail"] != EMPTY_BODY
    r = client.post("/v1/plans", json={"model": "llama3-8b"})
    assert r.status_code == 400 and r.json()["path"] == "gpus", r.text
