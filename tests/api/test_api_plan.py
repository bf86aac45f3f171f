"""POST /v1/plans: kvwire.plan as a job (issue 26, item 1).

Oracle: the library itself, called in the test with the same arguments (the job must add nothing and lose
nothing), and the service's rules: a body is checked whole before the 202 (errors name the field), no field
may name a server file, and a trace workload is refused with what to do instead."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import kvwire
import polars as pl
from api_support import make_client, wait_for_job
from litestar.testing import TestClient
from polars.testing import assert_frame_equal

PLAN: dict[str, Any] = {
    "model": "llama3-8b",
    "gpus": {"h100": 2},
    "workload": {"requests": 150, "seed": 3},
    "space": {"tp": [1]},
    "slo": {"ttft_s": 1.0, "tpot_s": 0.05, "attainment": 0.9},
}


def test_a_plan_job_equals_the_library(client: TestClient[Any]) -> None:
    """The job's result is PlanResult.to_dict() without the table (which is /results, equal to the library's
    table) and with the report; progress counts configurations from a total known at the 202 to done == total;
    the best's scenario runs as is through POST /v1/simulations and meets the SLO target there."""
    args = {k: v for k, v in PLAN.items() if k not in ("model", "gpus")}
    expected = kvwire.plan(PLAN["model"], PLAN["gpus"], **args)
    r = client.post("/v1/plans", json=PLAN)
    assert r.status_code == 202, r.text
    accepted = r.json()
    assert accepted["kind"] == "plan" and accepted["unit"] == "configurations"
    assert accepted["total"] == expected.considered - expected.refused
    loc = r.headers["location"]
    assert loc == f"/v1/plans/{accepted['id']}"
    job = wait_for_job(client, loc)  # type: ignore[arg-type]
    assert job["status"] == "done", job
    assert (job["done"], job["total"]) == (accepted["total"], accepted["total"])
    want = {k: v for k, v in expected.to_dict().items() if k != "table"}
    got = dict(job["result"])
    assert got.pop("report") == expected.report()
    assert got == json.loads(json.dumps(want))
    table = pl.read_parquet(io.BytesIO(client.get(f"{loc}/results?format=parquet").content))
    assert_frame_equal(table, expected.table)
    assert [j["id"] for j in client.get("/v1/plans").json()] == [job["id"]]
    run = client.post("/v1/simulations", json=job["result"]["best"]["scenario"])
    assert run.status_code == 201, run.text
    assert run.json()["summary"]["slo"]["attainment"] >= 0.9


def test_plan_errors_name_the_field_before_any_job(tmp_path: Path) -> None:
    """What kvwire.plan refuses is a 422 naming the argument, and so are the service's own refusals (a trace
    workload, a calibration file, too many requests for one simulation); model and gpus are required; no job
    is created by any of them."""
    with make_client(tmp_path, max_point_requests=1000) as c:
        for body, status, path in (
            ({"gpus": {"h100": 0}}, 422, "gpus"),
            ({"gpus": {"nope": 2}}, 422, "gpus"),
            ({"objective": "min_gpus"}, 422, "rate_per_s"),
            ({"space": {"colour": ["red"]}}, 422, "space.colour"),
            ({"workers": 2}, 422, "workers"),
            ({"out": "/tmp"}, 422, "out"),  # the service names the directory itself
            ({"slo": {"ttft_s": -1.0}}, 422, "slo.ttft_s"),
            ({"colour": 1}, 422, "colour"),
            ({"workload": {"trace": {"file": "abc"}}}, 422, "workload.trace"),
            ({"scenario": {"workload": {"trace": {"arrival_s": [0.0]}}}}, 422, "scenario.workload.trace"),
            ({"workload": {"requests": 5000}}, 422, "workload.requests"),
            ({"timing": {"source": "calibrated", "file": "/etc/passwd"}}, 422, "timing.file"),
            ({"model": "llama3-70b", "gpus": {"h100": 1}}, 422, "gpus"),
        ):
            r = c.post("/v1/plans", json={**PLAN, **body})
            assert (r.status_code, r.json().get("path")) == (status, path), (body, r.text)
        assert c.post("/v1/plans", json={"gpus": {"h100": 1}}).status_code in (400, 422)
        assert c.get("/v1/plans").json() == []


def test_a_plan_job_can_be_cancelled(tmp_path: Path) -> None:
    """A cancel of a queued or running plan stops it: the job ends cancelled, not done."""
    big = {**PLAN, "gpus": {"h100": 8}, "space": {"tp": [1, 2]}, "workload": {"requests": 400}}
    with make_client(tmp_path) as c:
        r = c.post("/v1/plans", json=big)
        assert r.status_code == 202, r.text
        loc = r.headers["location"]
        assert c.post(f"{loc}/cancel").status_code in (202, 409)
        job = wait_for_job(c, loc)  # type: ignore[arg-type]
        assert job["status"] == "cancelled", job
