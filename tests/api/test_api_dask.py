"""The service's jobs on a Dask cluster (``kvwire-api --dask ADDRESS``): a real ``distributed.LocalCluster`` of
two worker processes (one thread each) started by this module, and real server processes connected to it.

A scheduler plugin counts the tasks the cluster finished, by function, so that a test sees the work ran on the
cluster and not in the server. Each job's table is compared with the same job run locally (an in-process
service without a cluster, or the library), except the measured wall time."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import distributed  # the `dask` extra, part of `test`: no skip, a missing install fails
import httpx
import kvwire
import polars as pl
import pytest
from api_support import Server, free_port, make_client, parse_sse, wait_for_job
from dask.utils import key_split
from distributed.diagnostics.plugin import SchedulerPlugin
from polars.testing import assert_frame_equal

#: Fast points: the equality tests.
SWEEP: dict[str, Any] = {
    "base": {"workload": {"requests": 1000}},
    "grid": {"link": ["ib-ndr", "eth-25g"], "workload.arrivals.rate_per_s": [4.0, 8.0, 12.0]},
    "replicates": 2,
}
#: Slower points (about 0.2 s each): jobs that are still running when a test interrupts them.
SLOW: dict[str, Any] = {"base": {"workload": {"requests": 200_000}}, "grid": {"workload.seed": list(range(1, 33))}}


def without_wall(df: pl.DataFrame) -> pl.DataFrame:
    return df.drop([c for c in df.columns if c.startswith("run.wall_s")])


class TaskCounter(SchedulerPlugin):
    """Counts the tasks that finished (reached memory), by the function's name (the key's prefix)."""

    def __init__(self) -> None:
        self.finished: Counter[str] = Counter()

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if finish == "memory":
            self.finished[key_split(key)] += 1


class Cluster:
    def __init__(self) -> None:
        self.local = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1"
        )
        self.address: str = self.local.scheduler_address
        self.client = distributed.Client(self.local)
        self.tasks = TaskCounter()
        self.local.scheduler.add_plugin(self.tasks, name="kvwire-test-counter")

    def queued(self, prefix: str) -> list[str]:
        """Keys of ``prefix`` the scheduler still holds (waiting, queued or processing)."""
        return [str(k) for k in list(self.local.scheduler.tasks) if str(k).startswith(prefix)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    try:
        yield c
    finally:
        c.client.close()
        c.local.close()


@pytest.fixture(scope="module")
def uninterrupted() -> pl.DataFrame:
    """The table of the slow sweep run by the library in this process, without its wall-time columns."""
    return without_wall(kvwire.sweep(SLOW, workers=2))


def server_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KVWIRE_API_", "KVWIRE_DASK_"))}
    return {**env, **extra}


@pytest.fixture(scope="module")
def server(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose jobs run on the cluster."""
    s = Server(tmp_path_factory.mktemp("dask") / "data", server_env(), args=["--dask", cluster.address]).start()
    try:
        yield s
    finally:
        s.stop()


def table(c: httpx.Client, location: str) -> pl.DataFrame:
    r = c.get(f"{location}/results?format=parquet")
    assert r.headers["kvwire-complete"] == "true"
    return pl.read_parquet(io.BytesIO(r.content))


def test_health_and_limits_name_the_cluster(cluster: Cluster, server: Server, tmp_path: Path) -> None:
    """/health and /v1/limits of a service with --dask report the cluster (scheduler, 2 workers, 2 threads), as
    does an app made in process with ``Settings(dask_scheduler=...)`` (it connects at start); a service without
    it reports its own threads, and its other keys are unchanged."""
    expected = {"kind": "dask", "scheduler": cluster.address, "workers": 2, "threads": 2}
    with server.client() as c:
        health = c.get("/health").json()
        assert health["executor"] == expected and health["status"] == "ok"
        assert c.get("/v1/limits").json()["executor"] == expected
    with make_client(tmp_path / "in-process", dask_scheduler=cluster.address) as app:  # the app connects itself
        assert app.get("/health").json()["executor"] == expected
    with make_client(tmp_path, job_workers=3) as local:
        assert local.get("/health").json()["executor"] == {
            "kind": "threads",
            "scheduler": None,
            "workers": 3,
            "threads": 3,
        }
        limits = local.get("/v1/limits").json()
        assert limits["executor"]["kind"] == "threads" and limits["max_sweep_points"] == 10_000


def test_jobs_on_the_cluster_equal_local_jobs(cluster: Cluster, server: Server, tmp_path: Path) -> None:
    """A sweep, a capacity search, a best split and a plan through the cluster's server run their work as
    cluster tasks (sweep chunks, search simulations, a plan's capacity searches) and give the same tables and
    results as the same jobs on a service without a cluster; their status says where they ran."""
    capacity = {"scenario": {"workload": {"requests": 400}}}
    split = {"scenario": {"workload": {"requests": 300}}, "total_instances": 3}
    plan = {"model": "llama3-8b", "gpus": {"h100": 2}, "workload": {"requests": 150}, "space": {"tp": [1]}}
    kinds = (("/v1/sweeps", SWEEP), ("/v1/capacity", capacity), ("/v1/splits", split), ("/v1/plans", plan))
    before = Counter(cluster.tasks.finished)
    jobs = {}
    with server.client() as c:
        for path, body in kinds:
            r = c.post(path, json=body)
            assert r.status_code == 202, r.text
            assert r.json()["executor"] == {"kind": "dask", "scheduler": cluster.address}
            jobs[path] = r.headers["location"]
        remote = {p: (wait_for_job(c, loc), table(c, loc)) for p, loc in jobs.items()}
    with make_client(tmp_path) as local:
        for path, body in kinds:
            loc = local.post(path, json=body).headers["location"]
            job = wait_for_job(local, loc)  # type: ignore[arg-type]
            assert job["executor"] == {"kind": "threads", "scheduler": None}
            got = pl.read_parquet(io.BytesIO(local.get(f"{loc}/results?format=parquet").content))
            rjob, rtable = remote[path]
            assert rjob["status"] == job["status"] == "done", rjob
            assert (rjob["done"], rjob["total"]) == (job["done"], job["total"])
            assert_frame_equal(without_wall(rtable), without_wall(got))
            if job["result"] is not None:  # the search's answer, apart from the points (the table)
                assert rjob["result"] == job["result"]
    done = cluster.tasks.finished - before
    assert done["run_points"] >= 1  # the sweep's chunks (12 runs)
    evaluations = remote["/v1/capacity"][0]["result"]["evaluations"]
    split_evaluations = sum(s["evaluations"] for s in remote["/v1/splits"][0]["result"]["splits"])
    # A plan's task is one configuration's whole search (plan._evaluate: the same key name); with 150 requests
    # (fewer than a screening run's) each of its 3 configurations is searched once.
    assert done["evaluate"] == evaluations + split_evaluations + remote["/v1/plans"][0]["total"]


def test_cancel_stops_the_job_on_the_cluster(cluster: Cluster, server: Server) -> None:
    """Cancelling a running sweep on the cluster makes it ``cancelled`` with some runs finished and not all;
    its queued tasks are cancelled (the scheduler holds none of its chunks soon after), and its partial table
    has each finished run once."""
    with server.client() as c:
        loc = c.post("/v1/sweeps", json=SLOW).headers["location"]
        deadline = time.monotonic() + 60
        while c.get(loc).json()["done"] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert c.post(f"{loc}/cancel").status_code == 202
        job = wait_for_job(c, loc)
        assert job["status"] == "cancelled" and 0 < job["done"] < job["total"] == 32, job
        partial = pl.read_parquet(io.BytesIO(c.get(f"{loc}/results?format=parquet").content))
    assert partial.height == job["done"] == partial.select("point", "replicate").unique().height
    deadline = time.monotonic() + 30
    while cluster.queued("run_points") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert cluster.queued("run_points") == []


def test_a_worker_killed_mid_job_has_its_chunk_run_again(
    cluster: Cluster, server: Server, uninterrupted: pl.DataFrame
) -> None:
    """SIGKILL a worker process while it runs a chunk of a sweep: the scheduler runs that chunk again on a
    worker that lives, the job's event stream reports progress as chunks finish (never going back) and ends
    ``done``, and its table has every (point, replicate) once and equals an uninterrupted run's."""
    scheduler = cluster.local.scheduler
    with server.client() as c:
        loc = c.post("/v1/sweeps", json=SLOW).headers["location"]
        deadline = time.monotonic() + 60
        busy: list[str] = []
        while time.monotonic() < deadline:
            busy = [
                addr for addr, ws in list(scheduler.workers.items())
                if any(str(ts.key).startswith("run_points") for ts in ws.processing)
            ]  # fmt: skip
            if busy and c.get(loc).json()["done"] > 0:
                break
            time.sleep(0.02)
        assert busy, "no worker was running a chunk of the sweep"
        pid = cluster.client.run(os.getpid, workers=[busy[0]])[busy[0]]
        os.kill(pid, signal.SIGKILL)
        with c.stream("GET", f"{loc}/events") as stream:  # ends with the job's final status
            events = parse_sse(stream.read().decode())
        job = json.loads(events[-1]["data"])
        assert (events[-1]["event"], job["done"], job["total"]) == ("done", 32, 32), job
        progress = [json.loads(e["data"])["done"] for e in events[:-1]]
        assert all(e["event"] == "progress" for e in events[:-1]) and progress == sorted(progress), events
        got = table(c, loc)
    assert got.select("point", "replicate").unique().height == got.height == 32
    assert_frame_equal(without_wall(got), uninterrupted)
    cluster.client.wait_for_workers(2, timeout=60)  # the nanny restarts the worker for the tests after this


def test_kill_9_of_the_server_mid_job_resumes_on_the_cluster(
    cluster: Cluster, tmp_path: Path, uninterrupted: pl.DataFrame
) -> None:
    """SIGKILL the server while a sweep runs on the cluster (some parts written), start it again with the same
    --dask and data directory: it reconnects, resumes from the written runs (``resumed_from``, ``restarts`` =
    1) and completes with each run once and the table of an uninterrupted run."""
    data = tmp_path / "data"
    args = ["--dask", cluster.address]
    first = Server(data, server_env(), args=args).start()
    try:
        with first.client() as c:
            loc = c.post("/v1/sweeps", json=SLOW).headers["location"]
            parts = data / "jobs" / loc.rsplit("/", 1)[1] / "parts"
            deadline = time.monotonic() + 60
            while not list(parts.glob("part-*.parquet")) and time.monotonic() < deadline:
                time.sleep(0.01)
        first.kill()
    finally:
        first.stop()
    written = sum(pl.read_parquet(p).height for p in parts.glob("part-*.parquet"))
    assert 0 < written < 32
    again = Server(data, server_env(), args=args).start()
    try:
        with again.client() as c:
            job = wait_for_job(c, loc, timeout_s=120)
            assert (job["status"], job["done"], job["restarts"], job["resumed_from"]) == ("done", 32, 1, written)
            assert job["executor"]["kind"] == "dask"
            got = table(c, loc)
    finally:
        again.stop()
    assert got.select("point", "replicate").unique().height == got.height == 32
    assert_frame_equal(without_wall(got), uninterrupted)


@pytest.mark.parametrize("command", [["-m", "kvwire_api.server"], ["-m", "kvwire.cli", "serve"]])
def test_an_unreachable_scheduler_is_a_clear_error(tmp_path: Path, command: list[str]) -> None:
    """``kvwire-api --dask ADDR`` and ``kvwire serve --dask ADDR`` with no scheduler at ADDR exit with status 1,
    a message naming the address and no traceback, before anything is written; so does KVWIRE_DASK_SCHEDULER,
    and a malformed address is refused naming it."""
    address = f"tcp://127.0.0.1:{free_port()}"
    data = tmp_path / "d"
    base = [sys.executable, *command, "--port", str(free_port()), "--data-dir", str(data)]
    env = server_env(KVWIRE_API_DASK_TIMEOUT_S="1")
    for cmd, extra in (
        ([*base, "--dask", address], {}),
        (base, {"KVWIRE_DASK_SCHEDULER": address}),
        ([*base, "--dask", "scheduler-without-port"], {}),
    ):
        out = subprocess.run(cmd, capture_output=True, text=True, env={**env, **extra}, timeout=60)
        assert out.returncode == 1, out.stderr
        assert "Traceback" not in out.stderr, out.stderr
        if cmd[-1] == "scheduler-without-port":
            assert "'scheduler-without-port' is not a scheduler address" in out.stderr, out.stderr
        else:
            assert f"cannot reach the scheduler at {address}" in out.stderr, out.stderr
    assert not data.exists()


def test_a_port_that_is_no_scheduler_is_a_clear_error(tmp_path: Path) -> None:
    """A --dask address whose port accepts connections but never answers as a scheduler (a dashboard's port,
    say) is refused within the timeout and a few seconds, naming the address, not waited on for ever."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # connections complete in the backlog; nothing ever answers them
        address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        cmd = [sys.executable, "-m", "kvwire_api.server", "--port", str(free_port()), "--data-dir", str(tmp_path / "d")]
        out = subprocess.run(
            [*cmd, "--dask", address],
            capture_output=True,
            text=True,
            env=server_env(KVWIRE_API_DASK_TIMEOUT_S="1"),
            timeout=60,
        )
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert f"nothing at {address} answered as a Dask scheduler" in out.stderr, out.stderr
    assert not (tmp_path / "d").exists()
