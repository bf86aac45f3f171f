"""kvwire.sweep on a real Dask cluster: ``distributed.LocalCluster`` with two worker processes (one per core),
reused for the module and shut down at its end. The table equals the thread pool's, row for row."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from typing import Any

import distributed  # the `dask` extra, part of `test`: no skip, a missing install fails
import kvwire
import pytest
from polars.testing import assert_frame_equal

DEFINITION: dict[str, Any] = {
    "base": {"workload": {"requests": 500}},
    "grid": {"link": ["ib-ndr", "eth-25g"], "workload.arrivals.rate_per_s": [4.0, 8.0, 12.0]},
    "replicates": 2,
}


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1"
    )
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def test_dask_cluster_gives_the_thread_pools_table(client: Any) -> None:
    """Points run in the cluster's worker processes (not in this one) and the table equals the threads' one,
    except the measured wall time."""
    pids = set(client.run(os.getpid).values())
    assert len(pids) == 2 and os.getpid() not in pids
    dask = kvwire.sweep(DEFINITION, executor=client.get_executor())
    chunked = kvwire.sweep(DEFINITION, executor=client.get_executor(), chunk=5)
    threads = kvwire.sweep(DEFINITION, workers=2)
    assert dask.height == 12
    timing = ["run.wall_s", "run.wall_s:mean", "run.wall_s:ci95"]
    assert_frame_equal(dask.drop(timing), threads.drop(timing))
    assert_frame_equal(chunked.drop(timing), threads.drop(timing))


class Counting(Executor):
    """Passes every task to the Dask executor and counts them."""

    def __init__(self, inner: Executor) -> None:
        self.inner, self.count = inner, 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.count += 1
        return self.inner.submit(fn, *args, **kwargs)


def test_dask_resume_and_invalid_points(client: Any, tmp_path: Any) -> None:
    """With out=DIR on the cluster, a resumed sweep sends no task again and returns the same table; invalid
    points fail before any task is sent."""
    ex = Counting(client.get_executor())
    first = kvwire.sweep(DEFINITION, executor=ex, out=tmp_path / "o")
    assert ex.count == 12
    again = kvwire.sweep(DEFINITION, executor=ex, out=tmp_path / "o", resume=True)
    assert ex.count == 12
    assert_frame_equal(first, again)
    with pytest.raises(kvwire.SweepError) as info:
        kvwire.sweep({"grid": {"link": ["ib-ndr", "bogus"]}}, executor=ex)
    assert [e["point"] for e in info.value.errors] == [1]
    assert ex.count == 12


def test_capacity_and_best_split_on_the_cluster_equal_the_threads(client: Any) -> None:
    """kvwire.capacity and kvwire.best_split with ``executor=`` send every simulation to the cluster (the
    counting executor sees each evaluation) and give the same answer and the same points table as in
    process, except the measured wall time."""
    scenario = {"workload": {"requests": 300}}
    ex = Counting(client.get_executor())
    local = kvwire.capacity(scenario)
    remote = kvwire.capacity(scenario, executor=ex)
    assert ex.count == remote.evaluations == local.evaluations > 1
    assert remote.to_dict() | {"points": None} == local.to_dict() | {"points": None}
    assert_frame_equal(remote.points.drop("run.wall_s"), local.points.drop("run.wall_s"))
    ex.count = 0
    split_local = kvwire.best_split(scenario, 3, workers=1)
    split_remote = kvwire.best_split(scenario, 3, executor=ex)
    assert ex.count == sum(s["evaluations"] for s in split_remote.splits) > 2
    assert split_remote.splits == split_local.splits and split_remote.best == split_local.best
    assert_frame_equal(split_remote.points.drop("run.wall_s"), split_local.points.drop("run.wall_s"))


def test_capacity_on_the_cluster_stops_when_cancelled(client: Any) -> None:
    """A cancel set during a search on the cluster (here by the progress callback, after the first
    evaluation) raises kvwire.Cancelled and sends no further simulation."""
    stop = threading.Event()
    seen: list[int] = []

    def progress(done: int, total: int) -> None:
        seen.append(done)
        stop.set()

    with pytest.raises(kvwire.Cancelled):
        kvwire.capacity({"workload": {"requests": 300}}, executor=client.get_executor(), progress=progress, cancel=stop)
    assert seen == [1]
