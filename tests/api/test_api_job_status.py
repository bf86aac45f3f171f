"""A job's status document agrees with itself (issue 23, item 7): ``resumed_from`` is null unless the job resumed
finished work; ``total`` is known from the 202 on and keeps its unit to the end (a best split of 4 instances
went 0/3 ... 19/19, switching from splits to evaluations); ``started_s`` is set whenever ``status`` is
``running`` (the 202 said running with no start time); and ``unit``, ``points`` and ``replicates`` name what is
counted (the page showed "120 of 120 points" for a sweep of 40 points x 3 replicates)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from api_support import make_client, wait_for_job
from kvwire_api import jobs
from kvwire_api.store import Store, new_id
from litestar.testing import TestClient


def follow(client: TestClient[Any], body: dict[str, Any], base: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Start a job and poll it to the end: the 202 document and every status document seen after it."""
    r = client.post(base, json=body)
    assert r.status_code == 202, r.text
    seen = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        doc = client.get(r.headers["location"]).json()
        seen.append(doc)
        if doc["status"] in ("done", "failed", "cancelled"):
            return r.json(), seen
        time.sleep(0.02)
    raise AssertionError(f"{base}: the job did not finish: {seen[-1]}")


def agree(doc: dict[str, Any]) -> None:
    """What every status document must satisfy."""
    if doc["status"] == "running":
        assert doc["started_s"] is not None, doc
    assert doc["total"] is None or 0 <= doc["done"] <= doc["total"], doc


def test_a_sweep_counts_runs_and_names_its_points_and_replicates(client: TestClient[Any]) -> None:
    """4 points x 3 replicates: ``total`` 12 from the 202 on, ``unit`` runs, ``points`` 4, ``replicates`` 3;
    a sweep that started from nothing has ``resumed_from`` null from start to end (it was 0)."""
    body = {"base": {"workload": {"requests": 100}}, "grid": {"workload.seed": [1, 2, 3, 4]}, "replicates": 3}
    accepted, seen = follow(client, body, "/v1/sweeps")
    for doc in [accepted, *seen]:
        agree(doc)
        assert (doc["total"], doc["unit"], doc["points"], doc["replicates"]) == (12, "runs", 4, 3), doc
        assert doc["resumed_from"] is None, doc
    assert (seen[-1]["status"], seen[-1]["done"]) == ("done", 12)


def test_a_best_split_counts_splits_from_start_to_end(client: TestClient[Any]) -> None:
    """A best split of 4 instances: 3 splits, ``total`` 3 from the 202 to the end (``done`` 3 of 3, not the
    19 evaluations of its table), ``unit`` splits, no ``points``/``replicates``, ``resumed_from`` null."""
    body = {"scenario": {"workload": {"requests": 300}}, "total_instances": 4}
    accepted, seen = follow(client, body, "/v1/splits")
    for doc in [accepted, *seen]:
        agree(doc)
        assert (doc["total"], doc["unit"], doc["points"], doc["replicates"]) == (3, "splits", None, None), doc
        assert doc["resumed_from"] is None, doc
    last = seen[-1]
    assert (last["status"], last["done"], last["total"]) == ("done", 3, 3)
    rows = client.get(f"/v1/splits/{last['id']}/results").json()
    assert len(rows) == sum(s["evaluations"] for s in last["result"]["splits"]) > 3  # the table is evaluations


def test_a_capacity_search_counts_evaluations_and_never_resumes(client: TestClient[Any]) -> None:
    """A capacity search: ``unit`` evaluations; its first progress report comes after one simulation, which
    made ``resumed_from`` 1 although nothing was resumed; it ends with ``done`` = ``total`` = its table's rows."""
    accepted, seen = follow(client, {"scenario": {"workload": {"requests": 200}}}, "/v1/capacity")
    for doc in [accepted, *seen]:
        agree(doc)
        assert doc["unit"] == "evaluations" and doc["resumed_from"] is None, doc
    last = seen[-1]
    rows = client.get(f"/v1/capacity/{last['id']}/results").json()
    assert last["status"] == "done" and last["done"] == last["total"] == len(rows) > 1


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Capacity jobs that wait on the returned event (set it to let them end)."""
    release = threading.Event()

    def held(
        definition: dict[str, Any], out: Path, progress: jobs.Progress, cancel: threading.Event, workers: int | None
    ) -> tuple[pl.DataFrame, dict[str, Any] | None]:
        progress(0, 1)
        release.wait(60)
        progress(1, 1)
        return pl.DataFrame({"x": [1.0]}), {}

    monkeypatch.setitem(jobs.KINDS, "capacity", held)
    yield release
    release.set()


def test_running_always_has_a_start_time(tmp_path: Path, gate: threading.Event) -> None:
    """The 202 of a job that a free runner takes at once says ``running``: it has ``started_s`` (it was null
    until the job's thread wrote its row), and keeps the same start time while it runs and once done."""
    with make_client(tmp_path) as c:
        r = c.post("/v1/capacity", json={"scenario": {"workload": {"requests": 100}}})
        accepted = r.json()
        assert accepted["status"] == "running" and accepted["started_s"] is not None, accepted
        running = c.get(r.headers["location"]).json()
        assert running["status"] == "running" and running["started_s"] is not None, running
        gate.set()
        done = wait_for_job(c, r.headers["location"])  # type: ignore[arg-type]
        assert done["status"] == "done" and done["started_s"] is not None
        assert accepted["started_s"] <= done["started_s"] + 1e-3 and done["started_s"] <= done["finished_s"]


def test_a_queued_job_has_no_start_time(tmp_path: Path, gate: threading.Event) -> None:
    """While one job runs (one runner), a second waits ``queued`` with ``started_s`` null and the total it will
    have: a sweep's is known before it starts."""
    with make_client(tmp_path) as c:
        c.post("/v1/capacity", json={"scenario": {"workload": {"requests": 100}}})
        body = {"base": {"workload": {"requests": 100}}, "grid": {"workload.seed": [1, 2]}}
        queued = c.post("/v1/sweeps", json=body).json()
        assert (queued["status"], queued["started_s"], queued["total"], queued["points"]) == ("queued", None, 2, 2)
        gate.set()


def test_a_database_written_before_the_new_column_opens_and_gains_it(tmp_path: Path) -> None:
    """A data directory from before ``replicates`` existed: the store adds the column, its old sweep reads back
    with ``points`` and ``replicates`` null, and new sweeps record theirs."""
    store = Store(tmp_path / "data")
    old = new_id()
    store.put_job(old, "sweep", {"grid": {}, "zip": {}, "replicates": 2}, 4)
    store.close()
    with sqlite3.connect(tmp_path / "data" / "kvwire.sqlite3") as conn:
        conn.execute("ALTER TABLE jobs DROP COLUMN replicates")  # as an older kvwire-api wrote it
    store = Store(tmp_path / "data")
    rec = store.get_job(old)
    assert rec is not None and rec.replicates is None and rec.total == 4
    store.close()
