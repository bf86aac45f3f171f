"""Deleting and cancelling jobs: ``DELETE /v1/<kind>/{id}`` removes a job in any state (204; every read of it is a
404 from then on, no row and no files are left once its thread stops, and it is never resumed), while
``POST /v1/<kind>/{id}/cancel`` stops an active job and keeps it with its finished points (202; 409 for a
finished job). In process (``TestClient``), on the runner directly (a controllable job kind), and on a real
server that is killed right after a DELETE."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path
from typing import Any

import kvwire
import polars as pl
import pytest
from api_support import make_client, parse_sse, running, wait_for_job
from kvwire_api.config import Settings
from kvwire_api.jobs import JobRunner
from kvwire_api.store import Store, new_id
from litestar.testing import TestClient

#: A sweep long enough to be deleted or cancelled while it runs (it is stopped after a few points).
LONG = {"base": {"workload": {"requests": 4000}}, "grid": {"workload.seed": list(range(200))}}
SHORT = {"base": {"workload": {"requests": 100}}, "grid": {"workload.seed": [1, 2]}}


def wait_until(predicate: Any, timeout_s: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def job_threads(job_id: str) -> list[threading.Thread]:
    """The runner threads of a job (named after its id), alive or not yet joined."""
    return [t for t in threading.enumerate() if t.name == f"kvwire-job-{job_id[:8]}"]


def start_and_wait_for_points(c: TestClient[Any], definition: dict[str, Any], points: int) -> str:
    loc: str = c.post("/v1/sweeps", json=definition).headers["location"]
    wait_until(lambda: c.get(loc).json()["done"] >= points, what=f"{points} points of {loc}")
    return loc


def stored_row(data: Path, job_id: str) -> Any:
    store = Store(data)
    try:
        return store.get_job(job_id)
    finally:
        store.close()


def test_delete_a_running_job_removes_it_at_once_and_leaves_nothing(tmp_path: Path) -> None:
    """DELETE on a running sweep answers 204; at once its status, results and events are 404 and it is not
    listed; when its runner thread stops there is no SQLite row and no job directory; and the service goes on
    running new jobs to completion."""
    data = tmp_path / "data"
    with make_client(tmp_path, job_workers=1) as c:
        loc = start_and_wait_for_points(c, LONG, 2)
        job_id = loc.rsplit("/", 1)[1]
        assert (data / "jobs" / job_id / "parts").is_dir()
        r = c.delete(loc)
        assert r.status_code == 204 and r.content == b""
        for url in (loc, f"{loc}/results", f"{loc}/results?format=parquet", f"{loc}/events"):
            got = c.get(url)
            assert got.status_code == 404, url
            assert job_id in got.json()["detail"]
        assert job_id not in [j["id"] for j in c.get("/v1/sweeps").json()]
        assert c.delete(loc).status_code == 404
        assert c.post(f"{loc}/cancel").status_code == 404
        for t in job_threads(job_id):
            t.join(60)
            assert not t.is_alive()
        assert stored_row(data, job_id) is None
        assert not (data / "jobs" / job_id).exists()
        assert list((data / "jobs").iterdir()) == []
        after = c.post("/v1/sweeps", json=SHORT).headers["location"]
        assert wait_for_job(c, after)["status"] == "done"  # type: ignore[arg-type]
        assert c.get(loc).status_code == 404


def test_delete_a_queued_job_removes_it_and_it_never_runs(tmp_path: Path) -> None:
    """With one job at a time, DELETE on a waiting sweep removes its row and directory before answering (204);
    the running sweep is untouched, and once that one is deleted too the store holds no job."""
    data = tmp_path / "data"
    with make_client(tmp_path, job_workers=1, max_running_jobs=1) as c:
        first = start_and_wait_for_points(c, LONG, 1)
        second = c.post("/v1/sweeps", json=SHORT).headers["location"]
        second_id = second.rsplit("/", 1)[1]
        assert c.get(second).json()["status"] == "queued"
        assert c.delete(second).status_code == 204
        assert c.get(second).status_code == 404
        assert stored_row(data, second_id) is None and not (data / "jobs" / second_id).exists()
        assert job_threads(second_id) == []
        assert c.get(first).json()["status"] == "running"
        assert c.delete(first).status_code == 204
        for t in job_threads(first.rsplit("/", 1)[1]):
            t.join(60)
        assert list((data / "jobs").iterdir()) == []
        assert Store(data).list_jobs() == []


def test_cancel_keeps_the_job_with_its_finished_points(tmp_path: Path) -> None:
    """POST .../cancel on a running sweep answers 202 with its status document (cancel_requested); it ends
    ``cancelled`` and stays, with the points it finished readable (Kvwire-Complete: false, one row per
    finished point, each with its swept value)."""
    with make_client(tmp_path, job_workers=1) as c:
        loc = start_and_wait_for_points(c, LONG, 3)
        r = c.post(f"{loc}/cancel")
        assert r.status_code == 202
        assert r.json()["cancel_requested"] is True and r.json()["id"] == loc.rsplit("/", 1)[1]
        job = wait_for_job(c, loc)  # type: ignore[arg-type]
        assert job["status"] == "cancelled" and 3 <= job["done"] < 200
        part = c.get(f"{loc}/results?format=parquet")
        assert part.status_code == 200 and part.headers["kvwire-complete"] == "false"
        rows = pl.read_parquet(io.BytesIO(part.content))
        assert 3 <= rows.height <= job["done"]
        assert rows["workload.seed"].to_list() == rows["point"].to_list()
        assert c.get(loc).json()["status"] == "cancelled"  # kept


def test_cancel_a_finished_job_is_409_naming_its_status(tmp_path: Path) -> None:
    """A done job, and a job already cancelled, cannot be cancelled: 409 whose detail names the status; the
    job is unchanged and can still be deleted (204)."""
    with make_client(tmp_path, job_workers=1, max_running_jobs=1) as c:
        done = c.post("/v1/sweeps", json=SHORT).headers["location"]
        assert wait_for_job(c, done)["status"] == "done"  # type: ignore[arg-type]
        r = c.post(f"{done}/cancel")
        assert r.status_code == 409 and "done" in r.json()["detail"]
        assert c.get(done).json()["status"] == "done"
        running_loc = start_and_wait_for_points(c, LONG, 1)
        queued = c.post("/v1/sweeps", json=SHORT).headers["location"]
        r = c.post(f"{queued}/cancel")
        assert r.status_code == 202 and r.json()["status"] == "cancelled"
        r = c.post(f"{queued}/cancel")
        assert r.status_code == 409 and "cancelled" in r.json()["detail"]
        assert c.get(queued).json()["started_s"] is None  # a cancelled queued job never ran
        assert c.delete(running_loc).status_code == 204
        assert c.delete(done).status_code == 204 and c.delete(queued).status_code == 204


@pytest.mark.parametrize("kind", ["sweeps", "capacity", "splits"])
def test_cancel_and_delete_of_an_unknown_job_are_404(tmp_path: Path, kind: str) -> None:
    """An id no job has, a malformed id, and a job of another kind are 404 for both cancel and delete."""
    with make_client(tmp_path) as c:
        other = "capacity" if kind == "sweeps" else "sweeps"
        body = SHORT if other == "sweeps" else {"scenario": {"workload": {"requests": 100}}}
        foreign = c.post(f"/v1/{other}", json=body).headers["location"].rsplit("/", 1)[1]
        for job_id in (new_id(), "not-an-id", foreign):
            assert c.post(f"/v1/{kind}/{job_id}/cancel").status_code == 404
            assert c.delete(f"/v1/{kind}/{job_id}").status_code == 404
        assert c.get(f"/v1/{other}/{foreign}").status_code == 200  # untouched


def test_runner_never_writes_a_deleted_job(tmp_path: Path) -> None:
    """On the runner itself, with a job kind that finishes only when told (ignoring its cancel event) and
    writes into its directory after the delete: the deleted job's row is not re-created or updated, no result
    is written, and its directory is gone once its thread ends. A second such job whose work raises a kvwire
    error after its delete is not recorded as failed either."""
    store = Store(tmp_path / "data")
    release = threading.Event()
    started = threading.Semaphore(0)

    def work(definition: dict[str, Any], out: Path, progress: Any, cancel: threading.Event, workers: Any) -> Any:
        progress(0, 1)
        started.release()
        release.wait(60)
        out.mkdir(parents=True, exist_ok=True)
        (out / "late.parquet").write_bytes(b"written after the delete")
        if definition.get("raise"):
            raise kvwire.ScenarioError("x: fails after the delete", "x")
        progress(1, 1)
        return pl.DataFrame({"point": [0]}), {"answer": 1}

    runner = JobRunner(store, Settings(data_dir=tmp_path / "data", max_running_jobs=2), kinds={"sweep": work})
    ids = [new_id(), new_id()]
    for job_id, definition in zip(ids, ({}, {"raise": True}), strict=True):
        runner.submit("sweep", definition, 1, job_id)
    for _ in ids:
        assert started.acquire(timeout=60)
    threads = [t for job_id in ids for t in job_threads(job_id)]
    assert len(threads) == 2
    for job_id in ids:
        assert runner.delete(job_id) is True
        assert store.get_job(job_id) is None
        assert runner.delete(job_id) is False
    release.set()
    for t in threads:
        t.join(60)
        assert not t.is_alive()
    assert store.list_jobs() == []
    assert list((tmp_path / "data" / "jobs").iterdir()) == []
    assert runner.counts() == {"running": 0, "queued": 0}
    store.close()


def test_events_end_with_deleted_and_a_deleted_job_is_not_resumed_after_a_crash(tmp_path: Path) -> None:
    """On a real server: a client following a running sweep's events gets a last ``deleted`` event when another
    client deletes it. Then a second running sweep is deleted and the server is killed at once (SIGKILL, its
    runner thread may still be writing points): after a restart both jobs are 404, not listed, not resumed
    (no job runs), and no file of them is left."""
    data = tmp_path / "data"
    with running(data, {"KVWIRE_API_JOB_WORKERS": "1"}) as server, server.client() as c:
        loc = c.post("/v1/sweeps", json=LONG).headers["location"]
        wait_until(lambda: c.get(loc).json()["done"] >= 1, what="the first point")
        deleted = False
        text = ""
        with server.client() as watcher, watcher.stream("GET", f"{loc}/events") as stream:
            assert stream.status_code == 200
            for chunk in stream.iter_text():  # ends when the server ends the stream
                text += chunk
                if "event: progress" in text and not deleted:
                    assert c.delete(loc).status_code == 204
                    deleted = True
        events = parse_sse(text)
        assert events[-1]["event"] == "deleted"
        assert all(e["event"] == "progress" for e in events[:-1])
        second = c.post("/v1/sweeps", json=LONG).headers["location"]
        wait_until(lambda: c.get(second).json()["status"] == "running", what="the second sweep to run")
        assert c.delete(second).status_code == 204
        server.kill()
    with running(data) as server, server.client() as c:
        for gone in (loc, second):
            assert c.get(gone).status_code == 404
            assert c.get(f"{gone}/results").status_code == 404
        assert c.get("/v1/sweeps").json() == []
        assert list((data / "jobs").iterdir()) == []
        assert stored_row(data, second.rsplit("/", 1)[1]) is None
