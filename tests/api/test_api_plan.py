"""POST /v1/plans: kvwire.plan as a job (issue 26, item 1).

Oracle: the library itself, called in the test with the same arguments (the job must add nothing and lose
nothing), and the service's rules: a body is checked whole before the 202 (errors name the field), no field
may name a server file (an uploaded trace is named by its id, in the request and in every scenario returned)."""

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
    """What kvwire.plan refuses is a 422 naming the argument, and so are the service's own refusals (a trace that
    is no uploaded one, inline trace arrays, a calibration file, a directory, too many requests for one
    simulation); model and gpus are required; no job is created by any of them."""
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
            ({"workload": {"trace": {"file": "abc"}}}, 422, "workload.trace.file"),  # no such uploaded trace
            ({"workload": {"trace": {"file": "/etc/passwd"}}}, 422, "workload.trace.file"),
            (
                {"workload": {"trace": {"arrival_s": [0.0], "prompt_tokens": [1], "output_tokens": [1]}}},
                422,
                "workload.trace",
            ),
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


def test_a_plan_over_an_uploaded_trace_equals_the_library_on_its_file(tmp_path: Path) -> None:
    """``workload.trace.file`` = an uploaded trace's id (with a window option): the job plans the trace at its
    rescaled rate exactly as the library does on the file the service stored (same table and best); the
    returned scenarios name the id, never the stored file, and the best's runs as is through POST
    /v1/simulations, meeting the SLO target there."""
    from shared_paths import DATA

    with make_client(tmp_path) as c:
        up = c.post("/v1/traces", content=(DATA / "mooncake" / "synthetic_trace.jsonl").read_bytes(),
                    headers={"Content-Type": "application/x-ndjson"})  # fmt: skip
        assert up.status_code == 201, up.text
        tid = up.json()["id"]
        trace = {"file": tid, "duration_s": 120}
        body = {"model": "llama3-8b", "gpus": {"h100": 2}, "space": {"tp": [1]}, "workload": {"trace": trace},
                "slo": {"ttft_s": 20.0, "tpot_s": 0.2}}  # fmt: skip
        r = c.post("/v1/plans", json=body)
        assert r.status_code == 202, r.text
        job = wait_for_job(c, r.headers["location"])  # type: ignore[arg-type]
        assert job["status"] == "done", job
        table = pl.read_parquet(io.BytesIO(c.get(f"{r.headers['location']}/results?format=parquet").content))
        assert str(tmp_path) not in json.dumps(job)
        best = job["result"]["best"]
        assert best is not None and best["scenario"]["workload"]["trace"]["file"] == tid
        assert all(sc["workload"]["trace"]["file"] == tid for sc in job["result"]["frontier_scenarios"])
        run = c.post("/v1/simulations", json=best["scenario"])
        assert run.status_code == 201, run.text
        assert run.json()["summary"]["slo"]["attainment"] >= 0.9
    stored = tmp_path / "data" / "traces" / f"{tid}.parquet"
    expected = kvwire.plan(
        "llama3-8b", {"h100": 2}, space={"tp": [1]}, slo={"ttft_s": 20.0, "tpot_s": 0.2},
        workload={"trace": {"file": str(stored), "format": "kvwire", "duration_s": 120}},
    )  # fmt: skip
    assert_frame_equal(table, expected.table)
    assert expected.best is not None and best["rate_per_s"] == expected.best["rate_per_s"]
