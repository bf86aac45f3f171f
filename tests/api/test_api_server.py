"""The service as a real server process (``python -m kvwire_api.server``, what ``kvwire-api`` and
``kvwire serve`` run: uvicorn, one worker) on 127.0.0.1 with a free port and a temporary data directory:
HTTP round trips, a crash in the middle of a sweep, the limiter under a burst, the token rule, the CLI."""

from __future__ import annotations

import concurrent.futures
import io
import json
import os
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import httpx
import kvwire
import polars as pl
from api_support import Server, free_port, running, wait_for_job, without_wall_clock
from polars.testing import assert_frame_equal
from shared_paths import ROOT


def env_without_token(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KVWIRE_API_")}
    env.update(extra)
    return env


def test_real_server_round_trip(tmp_path: Path) -> None:
    """Over real HTTP: a simulation's summary and Parquet table equal the library's, the OpenAPI document and
    its HTML page are served, and a 413 comes back for a body over the configured limit."""
    scenario = {"link": "eth-25g", "workload": {"requests": 500}}
    res = kvwire.simulate(scenario)
    env = env_without_token(KVWIRE_API_MAX_BODY_BYTES="5000")
    with running(tmp_path / "data", env) as server, server.client() as c:
        r = c.post("/v1/simulations", json=scenario)
        assert r.status_code == 201, r.text
        assert without_wall_clock(r.json()["summary"]) == without_wall_clock(res.summary)
        pq = c.get(f"{r.headers['location']}/requests", headers={"Accept": "application/vnd.apache.parquet"})
        assert_frame_equal(pl.read_parquet(io.BytesIO(pq.content)), res.requests)
        doc = c.get("/schema/openapi.json").json()
        assert "/v1/simulations" in doc["paths"] and doc["info"]["title"] == "kvwire"
        assert c.get("/schema").headers["content-type"].startswith("text/html")
        big = {"workload": {"trace": {"arrival_s": [0.0] * 2000, "prompt_tokens": [1] * 2000,
                                      "output_tokens": [1] * 2000}}}  # fmt: skip
        assert c.post("/v1/simulations", json=big).status_code == 413
        assert c.get("/health").json()["status"] == "ok"


def test_restart_after_a_crash_mid_sweep_loses_nothing(tmp_path: Path) -> None:
    """SIGKILL the server while a sweep runs (some points written, not all), start it again on the same data
    directory: a simulation finished before the crash reads back unchanged; the sweep resumes from the points it
    had written (``resumed_from`` = their number, those part files untouched, ``restarts`` = 1) and completes
    with the same table as an uninterrupted run of the same definition."""
    data = tmp_path / "data"
    env = env_without_token(KVWIRE_API_JOB_WORKERS="1")
    definition = {"base": {"workload": {"requests": 20000}}, "grid": {"workload.seed": list(range(1, 81))}}
    server = Server(data, env).start()
    try:
        with server.client() as c:
            run = c.post("/v1/simulations", json={"workload": {"requests": 400}})
            assert run.status_code == 201
            loc = c.post("/v1/sweeps", json=definition).headers["location"]
            job_id = loc.rsplit("/", 1)[1]
            parts_dir = data / "jobs" / job_id / "parts"
            deadline = time.monotonic() + 120
            while not list(parts_dir.glob("part-*.parquet")) and time.monotonic() < deadline:
                time.sleep(0.01)
            before = c.get(loc).json()
        server.kill()
    finally:
        server.stop()
    assert before["status"] == "running" and before["done"] < before["total"] == 80
    written = {p.name: p.read_bytes() for p in parts_dir.glob("part-*.parquet")}
    n_written = sum(pl.read_parquet(io.BytesIO(b)).height for b in written.values())
    assert 0 < n_written < 80

    with running(data, env) as again, again.client() as c:
        stored = c.get(run.headers["location"]).json()
        assert stored["summary"] == run.json()["summary"]
        assert c.get(f"{run.headers['location']}/requests").status_code == 200
        job = wait_for_job(c, loc)
        assert (job["status"], job["done"], job["restarts"], job["resumed_from"]) == ("done", 80, 1, n_written)
        table = pl.read_parquet(io.BytesIO(c.get(f"{loc}/results?format=parquet").content))
    for name, content in written.items():
        assert (parts_dir / name).read_bytes() == content
    uninterrupted = kvwire.sweep(definition, workers=2)
    drop = [c for c in table.columns if c.startswith("run.wall_s")]
    assert_frame_equal(table.drop(drop), uninterrupted.drop(drop))


def test_restart_after_a_crash_mid_plan_resumes_from_its_evaluations(tmp_path: Path) -> None:
    """SIGKILL the server while a plan job runs (some evaluations written, not all), start it again: the plan
    resumes from them (the lines written before the crash stay the file's first lines, no evaluation is
    recorded twice) and its result and table equal the library's uninterrupted plan."""
    data = tmp_path / "data"
    env = env_without_token(KVWIRE_API_JOB_WORKERS="1")
    body = {"model": "llama3-8b", "gpus": {"h100": 8}, "workload": {"requests": 3000}, "space": {"tp": [1, 2]},
            "prune": False}  # fmt: skip
    server = Server(data, env).start()
    try:
        with server.client() as c:
            loc = c.post("/v1/plans", json=body).headers["location"]
            evals = data / "jobs" / loc.rsplit("/", 1)[1] / "parts" / "evaluations.jsonl"
            deadline = time.monotonic() + 120
            while not (evals.exists() and evals.read_text().count("\n") >= 8) and time.monotonic() < deadline:
                time.sleep(0.01)
            before = c.get(loc).json()
        server.kill()
    finally:
        server.stop()
    assert before["status"] == "running", before
    written = evals.read_text().splitlines()
    with running(data, env) as again, again.client() as c:
        job = wait_for_job(c, loc, timeout_s=600)
        assert (job["status"], job["restarts"]) == ("done", 1), job
        table = pl.read_parquet(io.BytesIO(c.get(f"{loc}/results?format=parquet").content))
    lines = evals.read_text().splitlines()
    assert lines[: len(written)] == written and len(written) < len(lines)
    keys = [json.loads(line)["key"] for line in lines]
    assert len(keys) == len(set(keys))
    args = {k: v for k, v in body.items() if k not in ("model", "gpus")}
    expected = kvwire.plan(body["model"], body["gpus"], **args)
    assert_frame_equal(table, expected.table)
    assert job["result"]["best"] == json.loads(json.dumps(expected.to_dict()["best"]))


def test_limiter_answers_every_request_while_health_keeps_answering(tmp_path: Path) -> None:
    """One simulation thread and a waiting line of two: a burst of 16 concurrent POSTs gets every answer as
    201 or 503 with Retry-After (some of each), never an error or a dropped connection, while /health polled
    during the burst answers 200 every time."""
    env = env_without_token(KVWIRE_API_SIM_THREADS="1", KVWIRE_API_SIM_QUEUE="2")
    scenario = {"workload": {"requests": 150000, "arrivals": {"rate_per_s": 8.0}}}
    with running(tmp_path / "data", env) as server:
        burst_over = threading.Event()
        health: list[tuple[int, bool]] = []

        def poll_health() -> None:
            with server.client() as c:
                while not burst_over.is_set():
                    status = c.get("/health").status_code
                    health.append((status, not burst_over.is_set()))
                    time.sleep(0.02)

        def post(_: int) -> tuple[int, str | None]:
            with server.client() as c:
                r = c.post("/v1/simulations", json=scenario)
                return r.status_code, r.headers.get("retry-after")

        poller = threading.Thread(target=poll_health)
        poller.start()
        try:
            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                answers = list(pool.map(post, range(16)))
        finally:
            burst_over.set()
            poller.join()
        with server.client() as c:
            assert c.get("/health").json()["simulations"]["rejected"] == sum(1 for s, _ in answers if s == 503)
    statuses = sorted(s for s, _ in answers)
    assert set(statuses) == {201, 503}, statuses
    assert all(retry is not None and int(retry) >= 1 for s, retry in answers if s == 503)
    assert statuses.count(201) >= 3  # the thread and both waiting places served
    during = [s for s, in_burst in health if in_burst]
    assert len(during) >= 3 and set(during) == {200}, health


def test_token_rule_on_a_real_server(tmp_path: Path) -> None:
    """Started with KVWIRE_API_TOKEN, the server answers /health without it and everything else only with
    ``Authorization: Bearer <token>``."""
    env = env_without_token(KVWIRE_API_TOKEN="tok-123")
    with running(tmp_path / "data", env) as server, server.client() as c:
        assert c.get("/health").status_code == 200
        assert c.get("/v1/presets").status_code == 401
        assert c.get("/schema/openapi.json").status_code == 401
        assert c.post("/v1/simulations", json={}, headers={"Authorization": "Bearer nope"}).status_code == 401
        ok = c.post("/v1/simulations", json={"workload": {"requests": 50}}, headers={"Authorization": "Bearer tok-123"})
        assert ok.status_code == 201


def test_refuses_a_public_bind_without_a_token(tmp_path: Path) -> None:
    """``kvwire-api --host 0.0.0.0`` and ``kvwire serve --host 0.0.0.0`` without KVWIRE_API_TOKEN exit with an
    error that names the variable, and never start serving."""
    port = str(free_port())
    for cmd in (
        [sys.executable, "-m", "kvwire_api.server", "--host", "0.0.0.0", "--port", port],
        [sys.executable, "-m", "kvwire.cli", "serve", "--host", "0.0.0.0", "--port", port],
    ):
        out = subprocess.run(
            [*cmd, "--data-dir", str(tmp_path / "d")],
            capture_output=True,
            text=True,
            env=env_without_token(),
            timeout=60,
        )
        assert out.returncode != 0
        assert "KVWIRE_API_TOKEN" in out.stderr and "refusing to bind to 0.0.0.0" in out.stderr
        assert not (tmp_path / "d").exists()


def test_kvwire_serve_starts_the_service(tmp_path: Path) -> None:
    """``kvwire serve --port P --data-dir D`` serves the API on 127.0.0.1:P with its data in D, and SIGTERM shuts
    it down gracefully (the lifespan's shutdown runs; uvicorn then re-raises the signal)."""
    port = free_port()
    data = tmp_path / "data"
    cmd = [sys.executable, "-m", "kvwire.cli", "serve", "--port", str(port), "--data-dir", str(data)]
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env_without_token())
    try:
        deadline = time.monotonic() + 60
        status = None
        while status != 200 and time.monotonic() < deadline and proc.poll() is None:
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code
            except httpx.HTTPError:
                time.sleep(0.1)
        assert status == 200, (tmp_path / "serve.log").read_text()
        assert (data / "kvwire.sqlite3").exists()
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
    assert "Application shutdown complete" in (tmp_path / "serve.log").read_text()


def test_kvwire_serve_without_the_service_package(tmp_path: Path) -> None:
    """Without kvwire-api installed, ``kvwire serve`` exits with a message that says how to install it."""
    code = "import sys; sys.modules['kvwire_api'] = None; from kvwire.cli import main; main(['serve'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 1
    assert "pip install ./api" in out.stderr and "kvwire-api" in out.stderr


def test_the_kvwire_api_script_is_the_server_command() -> None:
    """api/pyproject.toml declares the ``kvwire-api`` script as the command the tests start, which is a click
    command with --host, --port, --data-dir, --docs, --no-docs and --dask."""
    meta = tomllib.loads((ROOT / "api" / "pyproject.toml").read_text())
    target = meta["project"]["scripts"]["kvwire-api"]
    module, _, attr = target.partition(":")
    command = getattr(__import__(module, fromlist=[attr]), attr)
    assert module == "kvwire_api.server"
    assert {p.name for p in command.params} == {"host", "port", "data_dir", "docs_dir", "no_docs", "dask_scheduler"}
    assert meta["project"]["name"] == "kvwire-api" and "kvwire" in meta["project"]["dependencies"]
    assert meta["build-system"]["build-backend"] == "hatchling.build"
