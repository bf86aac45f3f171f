"""The HTTP service in process (``litestar.testing.TestClient`` with the app's lifespan): every endpoint's
happy path gives the library's values for the same input, errors are JSON naming the field path as the
Python exception does, bounds refuse what they should, and the SQLite/Parquet store behaves."""

from __future__ import annotations

import asyncio
import doctest
import importlib
import io
import json
import threading
import time
from pathlib import Path
from typing import Any

import kvwire
import polars as pl
import pytest
from api_support import make_client, parse_sse, wait_for_job, without_wall_clock
from kvwire_api.config import Settings, SettingsError
from kvwire_api.limiter import Overloaded, SimSlots, TimedOut
from kvwire_api.store import Store, new_id
from litestar.testing import TestClient
from polars.testing import assert_frame_equal
from shared_paths import DATA

AZURE = DATA / "azure-llm-2023" / "code.csv"
MOONCAKE = DATA / "mooncake" / "synthetic_trace.jsonl"

SMALL = {"workload": {"requests": 300, "arrivals": {"rate_per_s": 6.0}}}
TRACE = {"arrival_s": [0.0, 0.2, 0.5], "prompt_tokens": [100, 2000, 300], "output_tokens": [10, 1, 40]}
SCENARIOS = {
    "default": {},
    "small": SMALL,
    "colocated": {"mode": "colocated", "workload": {"requests": 200}},
    "inline-trace": {"link": "eth-25g", "workload": {"trace": TRACE}},
    # The only decode instance down for 5 s: the requests it held fail (max_retries 0), the rest wait for it.
    "faults": {**SMALL, "faults": {"events": [{"instance": "decode-0", "at_s": 10.0, "for_s": 5.0}], "max_retries": 0}},
}


def frame_from_json_rows(body: bytes, like: pl.DataFrame) -> pl.DataFrame:
    return pl.DataFrame(json.loads(body), schema=like.schema)


# --------------------------------------------------------------------------------------------------
# Simulations


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_simulation_equals_library(client: TestClient[Any], name: str) -> None:
    """POST /v1/simulations returns 201, a Location and the library's summary for the same scenario (all but the
    wall-clock time); the stored run reads back the same, and its per-request table (JSON, CSV, Parquet) and
    percentiles equal the library's."""
    scenario = SCENARIOS[name]
    res = kvwire.simulate(scenario)
    r = client.post("/v1/simulations", json=scenario)
    assert r.status_code == 201, r.text
    body = r.json()
    assert r.headers["location"] == f"/v1/simulations/{body['id']}"
    assert without_wall_clock(body["summary"]) == without_wall_clock(res.summary)
    assert body["scenario"] == res.scenario

    got = client.get(r.headers["location"]).json()
    assert without_wall_clock(got["summary"]) == without_wall_clock(res.summary)
    assert got["id"] == body["id"]

    loc = r.headers["location"]
    js = client.get(f"{loc}/requests")
    assert js.headers["content-type"].startswith("application/json")
    assert_frame_equal(frame_from_json_rows(js.content, res.requests), res.requests)
    csv = client.get(f"{loc}/requests", headers={"Accept": "text/csv"})
    assert csv.headers["content-type"].startswith("text/csv")
    assert_frame_equal(pl.read_csv(io.BytesIO(csv.content), schema=res.requests.schema), res.requests)
    pq = client.get(f"{loc}/requests", headers={"Accept": "application/vnd.apache.parquet"})
    assert pq.headers["content-type"] == "application/vnd.apache.parquet"
    assert_frame_equal(pl.read_parquet(io.BytesIO(pq.content)), res.requests)
    assert client.get(f"{loc}/requests?format=parquet").content == pq.content

    pct = client.get(f"{loc}/percentiles")
    assert pct.json() == res.percentiles().to_dicts()
    pct_csv = client.get(f"{loc}/percentiles", headers={"Accept": "text/csv"})
    assert_frame_equal(pl.read_csv(io.BytesIO(pct_csv.content)), res.percentiles(), check_dtypes=False)


def test_simulation_list_and_delete(client: TestClient[Any]) -> None:
    """Stored runs are listed newest first; DELETE removes the run, its table file and every view of it."""
    ids = [client.post("/v1/simulations", json=SMALL).json()["id"] for _ in range(2)]
    listed = [r["id"] for r in client.get("/v1/simulations").json()]
    assert listed == ids[::-1]
    run_file = Path(client.app.state.services.store.run_path(ids[0]))
    assert run_file.exists()
    assert client.delete(f"/v1/simulations/{ids[0]}").status_code == 204
    assert not run_file.exists()
    for suffix in ("", "/requests", "/percentiles"):
        assert client.get(f"/v1/simulations/{ids[0]}{suffix}").status_code == 404
    assert client.delete(f"/v1/simulations/{ids[0]}").status_code == 404
    assert client.get(f"/v1/simulations/{ids[1]}").status_code == 200


def test_retention_keeps_the_newest_runs(tmp_path: Path) -> None:
    """With max_runs=2, a third run deletes the oldest (row and Parquet file)."""
    with make_client(tmp_path, max_runs=2) as c:
        ids = [c.post("/v1/simulations", json=SMALL).json()["id"] for _ in range(3)]
        assert c.get(f"/v1/simulations/{ids[0]}").status_code == 404
        assert [c.get(f"/v1/simulations/{i}").status_code for i in ids[1:]] == [200, 200]
        assert sorted(p.stem for p in (tmp_path / "data" / "runs").iterdir()) == sorted(ids[1:])


@pytest.mark.parametrize(
    ("scenario", "path"),
    [
        ({"workload": {"arrivals": {"rate_per_s": -1}}}, "workload.arrivals.rate_per_s"),
        ({"workload": {"bogus": 1}}, "workload.bogus"),
        ({"zz": 1}, "zz"),
        ({"model": "no-such-model"}, "model"),
        ({"faults": {"events": [{"instance": "decode-7", "at_s": 1.0, "for_s": 1.0}]}}, "faults.events[0].instance"),
        ({"decode": {"device": "h100"}, "model": "deepseek-v3"}, None),
    ],
)
def test_scenario_errors_are_422_with_the_python_path(client: TestClient[Any], scenario: Any, path: str | None) -> None:
    """A scenario the library refuses is a 422 whose ``path`` is the Python exception's ``path``."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.validate(scenario)
    r = client.post("/v1/simulations", json=scenario)
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["path"] == info.value.path
    if path is not None:
        assert body["path"] == path
    assert body["detail"] == str(info.value)
    assert body["extra"][0]["key"] == info.value.path


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"workload": {"requests": "many"}}, "workload.requests"),
        ({"workload": {"arrivals": {"process": "uniform"}}}, "workload.arrivals.process"),
        ({"prefill": {"instances": 1.5}}, "prefill.instances"),
        ([1, 2], ""),
    ],
)
def test_wrong_json_types_are_400_with_the_path(client: TestClient[Any], body: Any, path: str) -> None:
    """A value of the wrong JSON type (or a body that is not an object) is a 400 naming the field."""
    r = client.post("/v1/simulations", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["path"] == path


@pytest.mark.parametrize(
    "raw", [b"{", b"", b"null", b'"x"', b"\xff\xfe", b'{"workload": {"requests": 1e999}}', b"[" * 10000]
)
def test_malformed_bodies_are_4xx_never_500(client: TestClient[Any], raw: bytes) -> None:
    """Bodies that are not JSON objects get a 4xx JSON error, and the service keeps serving."""
    r = client.post("/v1/simulations", content=raw, headers={"Content-Type": "application/json"})
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    assert "detail" in r.json()
    assert client.get("/health").status_code == 200


def test_synchronous_size_limit_points_to_jobs(tmp_path: Path) -> None:
    """A run larger than max_sync_requests is refused (422 at workload.requests, or workload.trace for an inline
    trace) with a message pointing to jobs; one at the limit runs."""
    with make_client(tmp_path, max_sync_requests=500) as c:
        r = c.post("/v1/simulations", json={"workload": {"requests": 501}})
        assert r.status_code == 422
        assert r.json()["path"] == "workload.requests"
        assert "POST /v1/sweeps" in r.json()["detail"]
        n = 501
        trace = {"arrival_s": [i * 0.1 for i in range(n)], "prompt_tokens": [10] * n, "output_tokens": [5] * n}
        r = c.post("/v1/simulations", json={"workload": {"trace": trace}})
        assert (r.status_code, r.json()["path"]) == (422, "workload.trace")
        assert c.post("/v1/simulations", json={"workload": {"requests": 500}}).status_code == 201


def test_synchronous_timeout_is_503_with_retry_after(tmp_path: Path) -> None:
    """A simulation running past run_timeout_s is answered 503 with Retry-After and a pointer to jobs; the
    service keeps serving."""
    with make_client(tmp_path, run_timeout_s=0.001) as c:
        r = c.post("/v1/simulations", json={"workload": {"requests": 50_000}})
        assert r.status_code == 503
        assert int(r.headers["retry-after"]) >= 1
        assert "POST /v1/sweeps" in r.json()["detail"]
        assert c.get("/health").status_code == 200


def test_synchronous_timeout_stops_the_simulation(tmp_path: Path) -> None:
    """A synchronous simulation past run_timeout_s is not left running: its cancel event stops the core, the
    simulation thread is freed (/health shows none running) and nothing is stored — had the run gone on, it
    would have been stored when it ended (a run of hours here). The 120 s bound only guards against a hang."""
    n = 5_000
    scenario = {
        "scheduler": {"max_decode_batch": 1},
        "engine": {"max_steps": 10**15},
        "workload": {"trace": {"arrival_s": [0.0] * n, "prompt_tokens": [1] * n, "output_tokens": [400_000] * n}},
    }
    with make_client(tmp_path, run_timeout_s=0.5) as c:
        assert c.post("/v1/simulations", json=scenario).status_code == 503
        deadline = time.monotonic() + 120
        while c.get("/health").json()["simulations"]["running"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.get("/health").json()["simulations"]["running"] == 0
        assert c.get("/v1/simulations").json() == []
        assert c.post("/v1/simulations", json={"workload": {"requests": 50}}).status_code == 201


def test_body_size_limit_is_413(tmp_path: Path) -> None:
    """A body over max_body_bytes is refused with 413 (JSON), smaller ones pass, and the service keeps serving."""
    with make_client(tmp_path, max_body_bytes=2_000) as c:
        n = 200
        trace = {"arrival_s": [i * 0.1 for i in range(n)], "prompt_tokens": [100] * n, "output_tokens": [5] * n}
        big = json.dumps({"workload": {"trace": trace}})
        assert len(big) > 2_000
        r = c.post("/v1/simulations", content=big, headers={"Content-Type": "application/json"})
        assert r.status_code == 413
        assert r.json()["status_code"] == 413
        assert c.post("/v1/simulations", json=SMALL).status_code == 201


def test_not_acceptable_and_unknown_format(client: TestClient[Any]) -> None:
    """A table asked in a format the service cannot produce is 406; an unknown ?format= is 400."""
    loc = client.post("/v1/simulations", json=SMALL).headers["location"]
    assert client.get(f"{loc}/requests", headers={"Accept": "image/png"}).status_code == 406
    assert client.get(f"{loc}/requests?format=xlsx").status_code == 400
    assert client.get(f"{loc}/requests", headers={"Accept": "image/png, text/csv;q=0.5"}).status_code == 200


def test_ids_are_never_paths(client: TestClient[Any]) -> None:
    """Ids that are not the service's own (path tricks included) are 404 without touching the file system."""
    for bad in ("..%2F..%2Fetc%2Fpasswd", "0" * 31, "g" * 32, "%00"):
        assert client.get(f"/v1/simulations/{bad}/requests").status_code == 404
        assert client.get(f"/v1/sweeps/{bad}").status_code == 404
        assert client.get(f"/v1/traces/{bad}").status_code == 404


# --------------------------------------------------------------------------------------------------
# Reference data and the calculator


def test_reference_endpoints_equal_library(client: TestClient[Any]) -> None:
    """/v1/presets, /v1/formats and /v1/layouts return the library's catalog, format table and layout table."""
    assert client.get("/v1/presets").json() == kvwire.catalog()
    assert client.get("/v1/formats").json() == kvwire.quant.formats().to_dicts()
    assert client.get("/v1/layouts").json() == kvwire.layout.layouts().to_dicts()
    limits = client.get("/v1/limits").json()
    assert limits["max_sync_requests"] == Settings(data_dir=Path(".")).max_sync_requests


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"model": "llama3-8b", "prompt_tokens": 2048, "link": "eth-25g", "cost": {"prefill_lm_head": "all"}},
        {"link": "eth-25g", "compression": "mxfp4", "streaming": "layer"},
        {"model": "deepseek-v3", "device": "h200", "devices_per_instance": 8},
    ],
)
def test_handoff_equals_library(client: TestClient[Any], args: dict[str, Any]) -> None:
    """POST /v1/handoff returns kvwire.handoff(**body)."""
    r = client.post("/v1/handoff", json=args)
    assert r.status_code == 200, r.text
    assert r.json() == kvwire.handoff(**args)


def test_handoff_errors(client: TestClient[Any]) -> None:
    """Unknown keys and values the library refuses are 422 naming the argument; wrong types are 400."""
    assert client.post("/v1/handoff", json={"promt_tokens": 5}).json()["path"] == "promt_tokens"
    for tokens in (0, 2**70):  # 2**70 once escaped as an OverflowError (a 500), found by schemathesis
        r = client.post("/v1/handoff", json={"prompt_tokens": tokens})
        assert (r.status_code, r.json()["path"]) == (422, "prompt_tokens")
    r = client.post("/v1/handoff", json={"link": "no-such-link"})
    assert (r.status_code, r.json()["path"]) == (422, "link")
    r = client.post("/v1/handoff", json={"streaming": "sideways"})
    assert (r.status_code, r.json()["path"]) == (400, "streaming")


# --------------------------------------------------------------------------------------------------
# Traces


def test_trace_upload_and_replay_equal_library(client: TestClient[Any]) -> None:
    """An uploaded Azure CSV or Mooncake JSONL is parsed by the library's reader (same request count), and a
    scenario naming its id gives the library's result for that request table."""
    for path, ctype in ((AZURE, "text/csv"), (MOONCAKE, "application/x-ndjson")):
        table = kvwire.read_trace(path)
        r = client.post(f"/v1/traces?filename={path.name}", content=path.read_bytes(), headers={"Content-Type": ctype})
        assert r.status_code == 201, r.text
        info = r.json()
        assert (info["requests"], info["bytes"], info["filename"]) == (table.height, path.stat().st_size, path.name)
        assert client.get(f"/v1/traces/{info['id']}").json() == info
        head = table.head(300)
        scenario = {"link": "eth-100g", "workload": {"trace": {"file": info["id"]}}}
        if table.height > 300:  # replay the first 300 requests: upload that part as its own trace
            buf = io.BytesIO()
            if ctype == "text/csv":
                buf.write(b"\n".join(path.read_bytes().splitlines()[:301]))
            else:
                buf.write(b"\n".join(path.read_bytes().splitlines()[:300]))
            r = client.post("/v1/traces", content=buf.getvalue(), headers={"Content-Type": ctype})
            scenario["workload"]["trace"]["file"] = r.json()["id"]
        res = kvwire.simulate({"link": "eth-100g"}, requests=head)
        run = client.post("/v1/simulations", json=scenario)
        assert run.status_code == 201, run.text
        assert without_wall_clock(run.json()["summary"]) == without_wall_clock(res.summary)
    assert len(client.get("/v1/traces").json()) >= 2


def upload_mooncake(client: TestClient[Any]) -> str:
    r = client.post("/v1/traces", content=MOONCAKE.read_bytes(), headers={"Content-Type": "application/x-ndjson"})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


WINDOWS: list[dict[str, Any]] = [
    {"start_s": 100.0, "duration_s": 60.0},
    {"duration_s": 120.0, "time_scale": 0.5},
    {"start_s": 30.0, "duration_s": 200.0, "sample": 0.4, "seed": 11},
    {"duration_s": 90.0, "rate_per_s": 2.5},
]


@pytest.mark.parametrize("options", WINDOWS, ids=lambda o: ",".join(o))
def test_uploaded_trace_window_equals_library(client: TestClient[Any], options: dict[str, Any]) -> None:
    """An uploaded trace named with window options (``start_s``, ``duration_s``, ``time_scale`` or
    ``rate_per_s``, ``sample``, ``seed``) gives the library's result for the original file read with the same
    options (the service reads its stored copy, the library the file), and validation counts the windowed
    requests. The run's echo names the trace by id with the options, and posting it again gives the same run."""
    tid = upload_mooncake(client)
    scenario = {"link": "eth-100g", "workload": {"trace": {"file": tid, **options}}}
    lib = kvwire.simulate({"link": "eth-100g", "workload": {"trace": {"file": str(MOONCAKE), **options}}})
    assert 0 < lib.requests.height < 3993  # the window selects a part of the trace
    checked = client.post("/v1/scenarios/validate", json=scenario)
    assert checked.status_code == 200, checked.text
    assert checked.json()["requests"] == lib.requests.height
    run = client.post("/v1/simulations", json=scenario)
    assert run.status_code == 201, run.text
    assert without_wall_clock(run.json()["summary"]) == without_wall_clock(lib.summary)
    echo = run.json()["scenario"]
    assert echo["workload"]["trace"] == {"file": tid, **options}
    again = client.post("/v1/simulations", json=echo)
    assert again.status_code == 201, again.text
    assert without_wall_clock(again.json()["summary"]) == without_wall_clock(lib.summary)


def test_uploaded_trace_window_errors(client: TestClient[Any]) -> None:
    """Window options are checked like the library's (422 naming ``workload.trace.<option>``); the reader's
    options (format, BurstGPT filters) are refused with an uploaded trace; a window that leaves no request is
    a 422 naming the trace by id, never by the file the service keeps it in."""
    tid = upload_mooncake(client)
    cases = {
        "time_scale": ({"time_scale": 0}, "must be > 0"),
        "rate_per_s": ({"time_scale": 2.0, "rate_per_s": 3.0}, "either time_scale or rate_per_s"),
        "sample": ({"sample": 1.5}, "sample"),
        "format": ({"format": "azure"}, "fixed at upload"),
        "model": ({"model": "ChatGPT"}, "fixed at upload"),
    }
    for key, (options, words) in cases.items():
        r = client.post("/v1/simulations", json={"workload": {"trace": {"file": tid, **options}}})
        assert (r.status_code, r.json()["path"]) == (422, f"workload.trace.{key}"), r.text
        assert words in r.json()["detail"]
    r = client.post("/v1/simulations", json={"workload": {"trace": {"file": tid, "start_s": 1e9}}})
    assert (r.status_code, r.json()["path"]) == (422, "workload.trace.start_s"), r.text
    assert tid in r.json()["detail"] and "parquet" not in r.json()["detail"]
    r = client.post("/v1/sweeps", json={"base": {"workload": {"trace": {"file": tid, "sample": -1}}}, "grid": {}})
    assert (r.status_code, r.json()["path"]) == (422, "base.workload.trace.sample"), r.text
    assert client.get("/health").status_code == 200


def test_trace_errors(tmp_path: Path) -> None:
    """A malformed trace is a 422 naming the upload and row; an unknown format 415; a trace over
    max_trace_bytes 413; an unknown or path-like id in a scenario a 422 at workload.trace.file (no file read)."""
    with make_client(tmp_path, max_trace_bytes=10_000) as c:
        r = c.post("/v1/traces?filename=t.csv", content=b"TIMESTAMP,ContextTokens,GeneratedTokens\nnot-a-time,1,2\n",
                   headers={"Content-Type": "text/csv"})  # fmt: skip
        assert r.status_code == 422
        assert "t.csv" in r.json()["detail"] and "TIMESTAMP" in r.json()["detail"]
        assert c.post("/v1/traces", content=b"x", headers={"Content-Type": "image/png"}).status_code == 415
        r = c.post("/v1/traces", content=AZURE.read_bytes(), headers={"Content-Type": "text/csv"})
        assert r.status_code == 413
        for bad in ("0" * 32, "/etc/passwd", "../kvwire.sqlite3"):
            r = c.post("/v1/simulations", json={"workload": {"trace": {"file": bad}}})
            assert (r.status_code, r.json()["path"]) == (422, "workload.trace.file"), r.text
        assert not list((tmp_path / "data" / "traces").iterdir())  # nothing left from the refused uploads


def test_trace_delete(client: TestClient[Any]) -> None:
    """DELETE /v1/traces/{id} removes it; scenarios naming it are then refused."""
    tid = client.post("/v1/traces", content=MOONCAKE.read_bytes(), headers={"Content-Type": "application/x-ndjson"})
    tid_s = tid.json()["id"]
    assert client.delete(f"/v1/traces/{tid_s}").status_code == 204
    assert client.get(f"/v1/traces/{tid_s}").status_code == 404
    assert client.post("/v1/simulations", json={"workload": {"trace": {"file": tid_s}}}).status_code == 422


# --------------------------------------------------------------------------------------------------
# Sweeps

SWEEP = {
    "base": {"workload": {"requests": 200}},
    "grid": {"link": ["ib-ndr", "eth-25g"]},
    "zip": {"workload.arrivals.rate_per_s": [2.0, 6.0], "workload.seed": [1, 2]},
}


def without_wall_column(df: pl.DataFrame) -> pl.DataFrame:
    return df.drop([c for c in df.columns if c.startswith("run.wall_s")])


def test_sweep_job_equals_library(client: TestClient[Any]) -> None:
    """POST /v1/sweeps is accepted (202, Location), runs to done with points done = total, its results (JSON,
    CSV, Parquet) equal kvwire.sweep(definition) but for wall-clock time, and its event stream reports progress
    and ends with a ``done`` event."""
    expected = without_wall_column(kvwire.sweep(SWEEP, workers=1))
    r = client.post("/v1/sweeps", json=SWEEP)
    assert r.status_code == 202, r.text
    loc = r.headers["location"]
    assert r.json()["total"] == expected.height == 4
    job = wait_for_job(client, loc)  # type: ignore[arg-type]
    assert (job["status"], job["done"], job["total"], job["resumed_from"]) == ("done", 4, 4, None)
    pq = client.get(f"{loc}/results?format=parquet")
    assert pq.headers["kvwire-complete"] == "true"
    got = without_wall_column(pl.read_parquet(io.BytesIO(pq.content)))
    assert_frame_equal(got, expected)
    rows = client.get(f"{loc}/results").json()
    assert len(rows) == 4 and rows[1]["link"] == "ib-ndr" and rows[2]["link"] == "eth-25g"
    assert [r["slo.attainment"] for r in rows] == expected["slo.attainment"].to_list()
    with client.stream("GET", f"{loc}/events") as s:
        assert s.headers["content-type"].startswith("text/event-stream")
        text = s.read().decode()
    events = parse_sse(text)
    assert events[-1]["event"] == "done"
    assert json.loads(events[-1]["data"])["done"] == 4
    assert all(e["event"] == "progress" for e in events[:-1])
    assert [j["id"] for j in client.get("/v1/sweeps").json()] == [r.json()["id"]]


def test_sweep_errors_list_every_bad_point(client: TestClient[Any]) -> None:
    """A definition with bad points is refused before any work with a 422 listing each point and field."""
    r = client.post("/v1/sweeps", json={"grid": {"workload.arrivals.rate_per_s": [1.0, -2.0, 3.0, 0.0]}})
    assert r.status_code == 422
    extra = r.json()["extra"]
    rate = "workload.arrivals.rate_per_s"
    assert [(e["point"], e["key"]) for e in extra] == [(1, rate), (3, rate)]
    assert client.get("/v1/sweeps").json() == []
    r = client.post("/v1/sweeps", json={"gird": {}})
    assert (r.status_code, r.json()["path"]) == (422, "gird")
    r = client.post("/v1/sweeps", json={"base": "/etc/passwd"})
    assert (r.status_code, r.json()["path"]) == (400, "base")
    r = client.post("/v1/sweeps", json={"grid": {"workload.trace.file": ["x"]}})
    assert (r.status_code, r.json()["path"]) == (422, "grid.workload.trace.file")


def test_sweep_bounds(tmp_path: Path) -> None:
    """Sweeps over max_sweep_points (points x replicates, counted before resolving them) or with a point over
    max_point_requests are refused with 422 naming grid, replicates or workload.requests."""
    with make_client(tmp_path, max_sweep_points=10, max_point_requests=1000) as c:
        r = c.post("/v1/sweeps", json={"grid": {"workload.seed": list(range(11))}})
        assert (r.status_code, r.json()["path"]) == (422, "grid")
        r = c.post("/v1/sweeps", json={"replicates": 10**15})
        assert (r.status_code, r.json()["path"]) == (422, "replicates")
        r = c.post("/v1/sweeps", json={"grid": {"workload.requests": [10, 2000]}})
        assert (r.status_code, r.json()["path"]) == (422, "workload.requests")
        assert "point 1" in r.json()["detail"]
        assert c.post("/v1/sweeps", json={"grid": {"workload.requests": [10, 1000]}}).status_code == 202


def test_sweep_with_uploaded_trace(client: TestClient[Any]) -> None:
    """A sweep whose base names an uploaded trace runs each point on that trace, as the library does with the
    trace inline."""
    lines = MOONCAKE.read_bytes().splitlines()[:150]
    tid = client.post("/v1/traces", content=b"\n".join(lines), headers={"Content-Type": "application/x-ndjson"})
    table = kvwire.read_mooncake_jsonl(MOONCAKE).head(150)
    definition = {"base": {"workload": {"trace": {"file": tid.json()["id"]}}}, "grid": {"link": ["ib-ndr", "eth-25g"]}}
    loc = client.post("/v1/sweeps", json=definition).headers["location"]
    assert wait_for_job(client, loc)["status"] == "done"  # type: ignore[arg-type]
    got = pl.read_parquet(io.BytesIO(client.get(f"{loc}/results?format=parquet").content))
    inline = {"base": {"workload": {"trace": table.to_dict(as_series=False)}}, "grid": definition["grid"]}
    assert_frame_equal(without_wall_column(got), without_wall_column(kvwire.sweep(inline, workers=1)))


def test_cancel_keeps_finished_points_and_delete_removes(tmp_path: Path) -> None:
    """POST .../cancel on a running sweep asks it to stop (202, cancel_requested); it ends ``cancelled`` with the
    points it finished readable (Kvwire-Complete: false, fewer rows than points); DELETE on the cancelled job
    removes it and its files (204, then 404)."""
    with make_client(tmp_path, job_workers=1) as c:
        definition = {"base": {"workload": {"requests": 4000}}, "grid": {"workload.seed": list(range(200))}}
        loc = c.post("/v1/sweeps", json=definition).headers["location"]
        deadline = time.monotonic() + 60
        while c.get(loc).json()["done"] < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        r = c.post(f"{loc}/cancel")
        assert r.status_code == 202 and r.json()["cancel_requested"] is True
        job = wait_for_job(c, loc)  # type: ignore[arg-type]
        assert job["status"] == "cancelled"
        assert 3 <= job["done"] < 200
        part = c.get(f"{loc}/results?format=parquet")
        assert part.headers["kvwire-complete"] == "false"
        rows = pl.read_parquet(io.BytesIO(part.content))
        assert 0 < rows.height <= job["done"] and "workload.seed" in rows.columns
        assert rows["workload.seed"].to_list() == rows["point"].to_list()
        job_dir = tmp_path / "data" / "jobs" / job["id"]
        assert job_dir.exists()
        assert c.delete(loc).status_code == 204
        assert c.get(loc).status_code == 404
        assert not job_dir.exists()


def test_cancel_a_queued_job(tmp_path: Path) -> None:
    """With one job at a time, a second sweep waits queued; cancelling it never runs it."""
    with make_client(tmp_path, job_workers=1, max_running_jobs=1) as c:
        first = c.post("/v1/sweeps", json={"base": {"workload": {"requests": 3000}},
                                           "grid": {"workload.seed": list(range(100))}})  # fmt: skip
        second = c.post("/v1/sweeps", json={"grid": {"workload.seed": [1, 2]}})
        assert c.get(second.headers["location"]).json()["status"] == "queued"
        r = c.post(f"{second.headers['location']}/cancel")
        assert r.status_code == 202 and r.json()["status"] == "cancelled"
        c.post(f"{first.headers['location']}/cancel")
        assert wait_for_job(c, first.headers["location"])["status"] == "cancelled"  # type: ignore[arg-type]
        assert c.get(second.headers["location"]).json()["started_s"] is None


# --------------------------------------------------------------------------------------------------
# Capacity searches

CAPACITY = {"scenario": {"link": "eth-25g", "workload": {"requests": 300}}, "slo_attainment": 0.9, "rel_tol": 0.05}


def test_capacity_job_equals_library(client: TestClient[Any]) -> None:
    """POST /v1/capacity runs kvwire.capacity as a job: its result is the library's (without the points, which
    are the job's result table, equal to the library's ``points`` but for wall-clock time)."""
    expected = kvwire.capacity(CAPACITY["scenario"], slo_attainment=0.9, rel_tol=0.05)
    r = client.post("/v1/capacity", json=CAPACITY)
    assert r.status_code == 202, r.text
    loc = r.headers["location"]
    job = wait_for_job(client, loc)  # type: ignore[arg-type]
    assert job["status"] == "done", job
    want = {k: v for k, v in expected.to_dict().items() if k != "points"}
    assert job["result"] == json.loads(json.dumps(want))
    assert job["done"] == job["total"] == expected.evaluations
    got = pl.read_parquet(io.BytesIO(client.get(f"{loc}/results?format=parquet").content))
    assert_frame_equal(without_wall_column(got), without_wall_column(expected.points))
    assert client.get("/v1/sweeps/" + job["id"]).status_code == 404  # each kind under its own path


def test_capacity_errors(client: TestClient[Any]) -> None:
    """Arguments the library refuses are 422 naming them before any job is made; unknown keys too; a scenario
    given as a string (a file path, for the library) is refused."""
    for body, path in (
        ({"slo_attainment": 2}, "slo_attainment"),
        ({"rel_tol": 0.9}, "rel_tol"),
        ({"bounds": [5, 1]}, "bounds"),
        ({"scenario": {"workload": {"arrivals": {"rate_per_s": -1}}}}, "workload.arrivals.rate_per_s"),
        ({"slo": 0.9}, "slo"),
    ):
        r = client.post("/v1/capacity", json=body)
        assert (r.status_code, r.json()["path"]) == (422, path), r.text
    r = client.post("/v1/capacity", json={"scenario": "/etc/passwd"})
    assert (r.status_code, r.json()["path"]) == (400, "scenario")
    assert client.get("/v1/capacity").json() == []


# --------------------------------------------------------------------------------------------------
# Token rule, settings


def test_token_guards_every_endpoint_but_health(tmp_path: Path) -> None:
    """With a token, /health answers without it; everything else (the OpenAPI document included) is 401
    without it or with a wrong one, and works with ``Authorization: Bearer <token>``."""
    with make_client(tmp_path, token="s3cret-token") as c:
        assert c.get("/health").status_code == 200
        for method, path in (("GET", "/v1/presets"), ("POST", "/v1/simulations"), ("GET", "/schema/openapi.json")):
            assert c.request(method, path, json={}).status_code == 401
            r = c.request(method, path, json={}, headers={"Authorization": "Bearer wrong"})
            assert r.status_code == 401
            assert r.headers["www-authenticate"].startswith("Bearer")
            r = c.request(method, path, json={}, headers={"Authorization": "Bearer s3cret-token"})
            assert r.status_code in (200, 201), r.text


def test_public_bind_needs_a_token() -> None:
    """Settings refuse a non-loopback host without KVWIRE_API_TOKEN, and accept it with one (or on loopback)."""
    for host in ("0.0.0.0", "192.0.2.10", "::", "example.org"):
        with pytest.raises(SettingsError, match="KVWIRE_API_TOKEN"):
            Settings.from_env(environ={}, host=host, data_dir="d")
        assert Settings.from_env(environ={"KVWIRE_API_TOKEN": "t"}, host=host, data_dir="d").token == "t"
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert Settings.from_env(environ={}, host=host, data_dir="d").token is None
    with pytest.raises(SettingsError, match="must not be empty"):
        Settings.from_env(environ={"KVWIRE_API_TOKEN": " "}, data_dir="d")
    with pytest.raises(SettingsError, match="expected a number"):
        Settings.from_env(environ={"KVWIRE_API_MAX_RUNS": "many"}, data_dir="d")
    with pytest.raises(SettingsError, match="must be positive"):
        Settings.from_env(environ={"KVWIRE_API_SIM_THREADS": "0"}, data_dir="d")


# --------------------------------------------------------------------------------------------------
# The limiter (unit level: the real server test is in test_api_server.py)


def test_limiter_bounds_running_and_waiting_work() -> None:
    """SimSlots(1 thread, 1 waiting): a third call is refused at once (Overloaded) while the first runs and the
    second waits; a waiting call that times out is withdrawn and never runs; never more than one runs."""
    slots = SimSlots(threads=1, queue=1)
    release = threading.Event()
    ran: list[str] = []
    active: list[int] = []

    def work(name: str) -> str:
        active.append(1)
        assert len(active) == 1
        release.wait(10)
        ran.append(name)
        active.pop()
        return name

    async def scenario() -> None:
        first = asyncio.ensure_future(slots.run(lambda: work("first"), timeout_s=30))
        await asyncio.sleep(0.05)
        with pytest.raises(TimedOut):  # waits behind "first", times out, is withdrawn
            await slots.run(lambda: work("withdrawn"), timeout_s=0.1)
        second = asyncio.ensure_future(slots.run(lambda: work("second"), timeout_s=30))
        await asyncio.sleep(0.05)
        assert (slots.running, slots.waiting) == (1, 1)
        with pytest.raises(Overloaded):
            await slots.run(lambda: work("third"), timeout_s=30)
        release.set()
        assert await first == "first"
        assert await second == "second"

    asyncio.run(scenario())
    slots.shutdown()
    assert ran == ["first", "second"]
    assert slots.rejected == 1


def test_limiter_sets_the_cancel_event_of_a_timed_out_call() -> None:
    """A running call that times out gets its ``cancel`` event set (so the work can stop), and gives up its
    thread when it returns; a call that finishes in time never sees its event set."""
    slots = SimSlots(threads=1, queue=0)
    late, prompt = threading.Event(), threading.Event()

    def work(event: threading.Event) -> bool:
        return event.wait(30)

    async def scenario() -> None:
        with pytest.raises(TimedOut):
            await slots.run(lambda: work(late), timeout_s=0.1, cancel=late)
        assert late.is_set()
        while slots.running:
            await asyncio.sleep(0.01)
        prompt_done = await slots.run(lambda: not prompt.is_set(), timeout_s=30, cancel=prompt)
        assert prompt_done and not prompt.is_set()

    asyncio.run(scenario())
    slots.shutdown()


# --------------------------------------------------------------------------------------------------
# Store and recovery


def test_orphan_files_are_removed_at_start(tmp_path: Path) -> None:
    """Files without a row (a crash between writing a file and committing its row) and temporary files are
    removed when the service starts; stored runs are kept."""
    with make_client(tmp_path) as c:
        kept = c.post("/v1/simulations", json=SMALL).json()["id"]
    runs = tmp_path / "data" / "runs"
    (runs / f"{new_id()}.parquet").write_bytes(b"half")
    (runs / f"{kept}.parquet.tmp-1234abcd").write_bytes(b"half")
    (tmp_path / "data" / "jobs" / new_id()).mkdir()
    with make_client(tmp_path) as c:
        assert sorted(p.name for p in runs.iterdir()) == [f"{kept}.parquet"]
        assert list((tmp_path / "data" / "jobs").iterdir()) == []
        assert c.get(f"/v1/simulations/{kept}/requests").status_code == 200


def test_interrupted_jobs_resume_or_fail_after_too_many_restarts(tmp_path: Path) -> None:
    """At start, a job left 'running' by a crash is resumed (restarts + 1) and completes; one that has already
    been interrupted max_job_restarts times is marked failed with its message instead."""
    store = Store(tmp_path / "data")
    definition = kvwire.load_sweep({"grid": {"workload.seed": [1, 2]}, "base": {"workload": {"requests": 100}}})
    again, given_up = new_id(), new_id()
    for job_id, restarts in ((again, 0), (given_up, 3)):
        store.put_job(job_id, "sweep", definition, 2)
        store.update_job(job_id, status="running", restarts=restarts)
    store.close()
    with make_client(tmp_path, max_job_restarts=3) as c:
        job = wait_for_job(c, f"/v1/sweeps/{again}")  # type: ignore[arg-type]
        assert (job["status"], job["restarts"], job["done"]) == ("done", 1, 2)
        failed = c.get(f"/v1/sweeps/{given_up}").json()
        assert failed["status"] == "failed" and failed["restarts"] == 4
        assert "interrupted 4 times" in failed["error"]["detail"]


def test_graceful_stop_requeues_running_jobs(tmp_path: Path) -> None:
    """Stopping the service (lifespan shutdown) while a sweep runs stops it after its in-flight points, writes
    them, and leaves it queued (not failed, not counted as a restart); the next start resumes it from those
    points and completes it with the library's table."""
    definition = {"base": {"workload": {"requests": 3000}}, "grid": {"workload.seed": list(range(1, 121))}}
    with make_client(tmp_path, job_workers=1) as c:
        loc = c.post("/v1/sweeps", json=definition).headers["location"]
        deadline = time.monotonic() + 120
        while c.get(loc).json()["done"] < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
    store = Store(tmp_path / "data")
    rec = store.get_job(loc.rsplit("/", 1)[1])
    store.close()
    assert rec is not None and rec.status == "queued" and rec.restarts == 0 and 5 <= rec.done < 120
    with make_client(tmp_path) as c:
        job = wait_for_job(c, loc)  # type: ignore[arg-type]
        assert (job["status"], job["restarts"]) == ("done", 0)
        assert job["resumed_from"] >= 5
        got = pl.read_parquet(io.BytesIO(c.get(f"{loc}/results?format=parquet").content))
    assert_frame_equal(without_wall_column(got), without_wall_column(kvwire.sweep(definition)))


def test_options_lists_every_method(client: TestClient[Any]) -> None:
    """OPTIONS answers with every method of the path (Allow)."""
    assert client.options("/v1/simulations").headers["allow"] == "GET, OPTIONS, POST"
    assert client.options(f"/v1/sweeps/{new_id()}").headers["allow"] == "DELETE, GET, OPTIONS"
    assert client.options(f"/v1/sweeps/{new_id()}/cancel").headers["allow"] == "OPTIONS, POST"


@pytest.mark.parametrize(
    "name", ["kvwire_api", "kvwire_api.app", "kvwire_api.config", "kvwire_api.errors", "kvwire_api.store",
             "kvwire_api.tables"],
)  # fmt: skip
def test_docstring_examples(name: str) -> None:
    """Every ``>>>`` example of the service's modules runs and prints what its docstring says."""
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
