"""Sweep, Dask and capacity-search benchmarks (issue 10).

A normal ``pytest`` run executes each once as a smoke test on a small sweep. To measure (results in
``benches/README.md``)::

    KVWIRE_BENCH_POINTS=1000 pytest benches/bench_sweep.py --benchmark-enable --benchmark-only \\
        --benchmark-json=benches/results/<date>-sweep.json

* ``test_sweep_workers``: ``KVWIRE_BENCH_POINTS`` points (default 12) of ``KVWIRE_BENCH_REQUESTS`` requests
  (default 10,000) on 1 and 2 threads; ``extra_info`` holds the core's own time (Σ ``run.wall_s``) and the
  share of the wall time spent outside it.
* ``test_threads_summary``: the issue's GIL check — 4 simulations of 100k requests in 2 threads vs serially,
  with and without building ``.summary``.
* ``test_dask_overhead``: the same small points on a ``distributed.LocalCluster`` (2 worker processes) and on
  2 threads; ``extra_info`` holds the time per point on each.
* ``test_capacity_evaluations``: simulations a capacity search needs on the README's scenarios, against a
  40-point rate grid over the same range.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import kvwire
import pytest

MEASURE = "KVWIRE_BENCH_POINTS" in os.environ  # else: a quick smoke run
POINTS = int(os.environ.get("KVWIRE_BENCH_POINTS", "12"))
REQUESTS = int(os.environ.get("KVWIRE_BENCH_REQUESTS", "10000"))


def sweep_definition(points: int, requests: int) -> dict[str, Any]:
    """``points`` points: 4 links x rates spread from 2 to 11 req/s (Llama-3-8B, 1 + 1 H100)."""
    links = ["ib-ndr", "eth-100g", "eth-25g", "nvlink4"]
    per_link = max(1, points // len(links))
    rates = [2.0 + 9.0 * i / max(1, per_link - 1) for i in range(per_link)]
    grid = {"link": links, "workload.arrivals.rate_per_s": rates}
    return {"base": {"workload": {"requests": requests}}, "grid": grid}


@pytest.mark.parametrize(("kind", "workers"), [("threads", 1), ("threads", 2), ("processes", 2)])
def test_sweep_workers(benchmark: Any, kind: str, workers: int) -> None:
    """Wall time of a whole sweep on 1 or 2 threads (or 2 spawned processes, started and warmed up outside
    the timing), and the share of the workers' time spent outside the Rust core."""
    definition = sweep_definition(POINTS, REQUESTS)
    pool = None
    if kind == "processes":
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
        kvwire.sweep(sweep_definition(4, 100), executor=pool, workers=workers)
    walls: list[float] = []

    def run() -> Any:
        start = time.perf_counter()
        out = kvwire.sweep(definition, workers=workers, executor=pool)
        walls.append(time.perf_counter() - start)
        return out

    try:
        df = benchmark.pedantic(run, rounds=1, iterations=1)
    finally:
        if pool is not None:
            pool.shutdown()
    core = float(df["run.wall_s"].sum())
    benchmark.extra_info.update(
        points=df.height,
        requests=REQUESTS,
        wall_s=walls[-1],
        core_s=core,
        outside_core_share=1.0 - core / (workers * walls[-1]),
    )
    assert df.height == len(kvwire.sweep_points(definition))


def _four(fn: Callable[[int], Any], threads: int) -> None:
    if threads == 1:
        for i in range(4):
            fn(i)
    else:
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(fn, range(4)))


@pytest.mark.parametrize("summary", [False, True], ids=["no-summary", "summary"])
@pytest.mark.parametrize("threads", [1, 2])
def test_threads_summary(benchmark: Any, threads: int, summary: bool) -> None:
    """4 simulations of 100k requests (10k in the smoke run), serial or 2 threads, with or without .summary."""
    n = 100_000 if MEASURE else 10_000
    sc = {"workload": {"requests": n}}

    def one(_: int) -> Any:
        res = kvwire.simulate(sc)
        return res.summary if summary else res.stats

    benchmark.pedantic(_four, args=(one, threads), rounds=5 if MEASURE else 1, iterations=1)


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Any]:
    import distributed

    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1"
    )
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


@pytest.mark.parametrize("where", ["threads", "dask"])
def test_dask_overhead(benchmark: Any, where: str, dask_client: Any) -> None:
    """Small points (1,000 requests) on 2 threads vs a 2-process LocalCluster: the per-point cost of Dask."""
    definition = sweep_definition(max(POINTS, 40) if MEASURE else 8, 1000)
    kwargs: dict[str, Any] = {"workers": 2}
    if where == "dask":  # default in-flight (256 tasks) and chunking (points / 256, at most 32 per task)
        kwargs = {"executor": dask_client.get_executor()}
        kvwire.sweep(sweep_definition(4, 100), **kwargs)  # workers import kvwire outside the timed rounds
    df = benchmark.pedantic(kvwire.sweep, args=(definition,), kwargs=kwargs, rounds=3 if MEASURE else 1, iterations=1)
    benchmark.extra_info.update(points=df.height, core_s=float(df["run.wall_s"].sum()))


CAPACITY_CASES = {
    "default": {"workload": {"requests": 2000}},
    "eth-25g": {"workload": {"requests": 2000}, "link": "eth-25g"},
    "decode-a100": {"workload": {"requests": 2000}, "decode": {"device": "a100"}},
    "colocated": {"workload": {"requests": 2000}, "mode": "colocated"},
}


@pytest.mark.parametrize("case", list(CAPACITY_CASES))
def test_capacity_evaluations(benchmark: Any, case: str) -> None:
    """Simulations and time of a capacity search (rel_tol 2%) vs a 40-point grid up to the ceiling."""
    sc = CAPACITY_CASES[case]
    r = benchmark.pedantic(kvwire.capacity, args=(sc,), rounds=1, iterations=1)
    ceiling = r.ceilings["ceiling_req_per_s"] if r.ceilings else 1.0
    start = time.perf_counter()
    grid = kvwire.sweep(sc, {"workload.arrivals.rate_per_s": [ceiling * (i + 1) / 40 for i in range(40)]})
    met = grid.filter(grid["slo.attainment"] >= 0.9)["workload.arrivals.rate_per_s"]
    benchmark.extra_info.update(
        evaluations=r.evaluations,
        capacity=r.capacity,
        binding=r.binding,
        grid_points=grid.height,
        grid_s=time.perf_counter() - start,
        grid_capacity=float(met.max()) if met.len() else None,  # type: ignore[arg-type]
    )
    assert r.evaluations <= 12
