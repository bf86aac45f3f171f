"""What the service says when it refuses work is true and says what to do (issue 23, item 8), and no hostile
body gets a 500 (items 7 and 8): the corpus below gives a 4xx whose body is strict JSON, and the service keeps
serving.

Before: a run of 1e26 requests was told to "run larger ones as a job (POST /v1/sweeps ...)", a job that refuses
anything over 2,000,000 requests; a body over the size limit got only "Request Entity Too Large"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from api_support import make_client
from litestar.testing import TestClient


def _refuse(constant: str) -> Any:
    raise AssertionError(f"not strict JSON: {constant}")


def detail(client: TestClient[Any], url: str, body: Any) -> tuple[int, str, str]:
    r = client.post(url, json=body)
    doc = json.loads(r.content, parse_constant=_refuse)
    return r.status_code, doc["path"], doc["detail"]


@pytest.mark.parametrize("url", ["/v1/simulations", "/v1/scenarios/validate"])
@pytest.mark.parametrize("n", [10**26, 2**64, 10**7, 2_000_001])
def test_a_run_too_large_for_jobs_too_is_not_pointed_to_a_job(client: TestClient[Any], url: str, n: int) -> None:
    """More requests than a job's simulation takes: the answer names both limits (200,000 synchronous,
    2,000,000 in a job) and asks for at most 2,000,000, instead of pointing to a job that refuses it too."""
    status, path, text = detail(client, url, {"workload": {"requests": n}})
    assert (status, path) == (422, "workload.requests"), text
    assert "200,000" in text and "ask for at most 2,000,000" in text, text
    assert "run it as a job" not in text and "run larger ones as a job" not in text, text
    if n > 2**64 - 1:
        assert "18,446,744,073,709,551,615" in text, text  # the largest count any scenario has
    else:
        assert "kvwire library or CLI" in text, text


def test_a_run_a_job_can_take_is_pointed_to_jobs_with_their_limit(client: TestClient[Any]) -> None:
    """Over the synchronous limit but within a job's: pointed to POST /v1/sweeps, saying what a job takes."""
    status, path, text = detail(client, "/v1/simulations", {"workload": {"requests": 300_000}})
    assert (status, path) == (422, "workload.requests")
    assert "run it as a job" in text and "POST /v1/sweeps" in text and "2,000,000" in text, text


@pytest.mark.parametrize(
    ("url", "body", "path", "words"),
    [
        (
            "/v1/sweeps",
            {"base": {"workload": {"requests": 10**7}}},
            "workload.requests",
            "KVWIRE_API_MAX_POINT_REQUESTS",
        ),
        (
            "/v1/capacity",
            {"scenario": {"workload": {"requests": 10**7}}},
            "scenario.workload.requests",
            "fewer requests",
        ),
        ("/v1/sweeps", {"replicates": 10**9}, "replicates", "ask for fewer replicates"),
        ("/v1/sweeps", {"grid": {"workload.seed": list(range(10_001))}}, "grid", "split it into several sweeps"),
        ("/v1/splits", {"scenario": {}, "total_instances": 10**6}, "total_instances", "ask for fewer instances"),
    ],
)
def test_job_bounds_say_where_they_come_from_and_what_to_do(
    client: TestClient[Any], url: str, body: dict[str, Any], path: str, words: str
) -> None:
    """Each job bound names the field, the limit's setting and what to do instead."""
    status, got_path, text = detail(client, url, body)
    assert (status, got_path) == (422, path), text
    assert words in text and "KVWIRE_API_MAX_" in text, text


def test_a_body_over_the_limit_says_the_limit_and_how_to_send_a_trace(tmp_path: Path) -> None:
    """413 over max_body_bytes names the limit and its setting, and how to replay a long trace (upload it)."""
    with make_client(tmp_path, max_body_bytes=1000) as c:
        r = c.post("/v1/simulations", json={"workload": {"trace": {"arrival_s": [0.0] * 500}}})
        assert r.status_code == 413
        text = r.json()["detail"]
        assert "1,000 bytes" in text and "KVWIRE_API_MAX_BODY_BYTES" in text and "POST /v1/traces" in text, text


def test_a_trace_over_the_limit_says_the_limit(tmp_path: Path) -> None:
    """413 over max_trace_bytes names the limit and its setting."""
    with make_client(tmp_path, max_trace_bytes=1000) as c:
        r = c.post("/v1/traces", content=b"x" * 2000, headers={"Content-Type": "text/csv"})
        assert r.status_code == 413
        assert "1,000 bytes" in r.json()["detail"] and "KVWIRE_API_MAX_TRACE_BYTES" in r.json()["detail"]


#: Hostile bodies (endpoint, raw JSON text): each must get a 4xx with a strict-JSON error body, never a 500.
HOSTILE: list[tuple[str, str]] = [
    ("/v1/simulations", '{"workload": {"requests": 1e999}}'),
    ("/v1/simulations", '{"workload": {"arrivals": {"rate_per_s": 1e999}}}'),
    ("/v1/simulations", '{"workload": {"arrivals": {"rate_per_s": -1e999}}}'),
    ("/v1/simulations", '{"slo": {"ttft_s": 1e999}, "workload": {"requests": 10}}'),
    ("/v1/simulations", '{"workload": {"requests": 18446744073709551616}}'),
    ("/v1/simulations", '{"workload": {"requests": -18446744073709551616}}'),
    ("/v1/simulations", '{"workload": {"trace": {"arrival_s": [1e999], "prompt_tokens": [1], "output_tokens": [1]}}}'),
    ("/v1/simulations", '{"workload": {"trace": {"arrival_s": [0.0], "prompt_tokens": [1e30], "output_tokens": [1]}}}'),
    ("/v1/simulations", '{"workload": {"trace": {"file": 1e999}}}'),
    ("/v1/simulations", '{"workload": {"trace": {"file": "../../etc/passwd"}}}'),
    ("/v1/simulations", '{"": {}}'),
    ("/v1/simulations", '{"workload": ' * 200 + "{}" + "}" * 200),
    ("/v1/scenarios/validate", '{"workload": {"requests": 1e999}}'),
    ("/v1/scenarios/parse", '{"text": "a = inf", "format": "toml"}'),
    ("/v1/scenarios/parse", '{"text": "' + "[" * 5000 + '", "format": "json"}'),
    ("/v1/scenarios/format", '{"scenario": {"a": 1e999}, "format": "toml"}'),
    ("/v1/scenarios/format", '{"scenario": {"a": 1e999}, "format": "json"}'),
    ("/v1/sweeps", '{"grid": {"workload.arrivals.rate_per_s": [1e999, -1e999]}}'),
    ("/v1/sweeps", '{"grid": {"workload.requests": [18446744073709551616]}}'),
    ("/v1/sweeps", '{"replicates": 1e999}'),
    ("/v1/sweeps", '{"replicates": 18446744073709551616}'),
    ("/v1/sweeps", '{"zip": {"workload.seed": [1, 2], "workload.requests": [10]}}'),
    ("/v1/capacity", '{"scenario": {}, "bounds": [1e999, 1e999]}'),
    ("/v1/capacity", '{"scenario": {}, "slo_attainment": 1e999}'),
    ("/v1/capacity", '{"scenario": {}, "rel_tol": -1e999}'),
    ("/v1/splits", '{"scenario": {}, "total_instances": 1000000000000000000000000000000}'),
    ("/v1/splits", '{"scenario": {}, "total_instances": 1e999}'),
    ("/v1/handoff", '{"model": "llama3-8b", "link": "nvlink4", "prompt_tokens": 1e999}'),
    ("/v1/handoff", '{"model": "llama3-8b", "link": "nvlink4", "prompt_tokens": 18446744073709551616}'),
    ("/v1/handoff/batch", '[{"model": "llama3-8b", "link": "nvlink4", "prompt_tokens": 1e999}]'),
]


@pytest.mark.parametrize(("url", "raw"), HOSTILE, ids=[f"{i}-{u}" for i, (u, _) in enumerate(HOSTILE)])
def test_hostile_bodies_get_a_4xx_in_strict_json(client: TestClient[Any], url: str, raw: str) -> None:
    """Each hostile body: a 4xx whose body parses strictly, with a detail; the service still answers."""
    r = client.post(url, content=raw.encode(), headers={"Content-Type": "application/json"})
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:500])
    assert json.loads(r.content, parse_constant=_refuse)["detail"]
    assert client.get("/health").status_code == 200
