"""Service benchmarks (pytest-benchmark) against a real server process on 127.0.0.1 (uvicorn, one worker,
the default settings: two simulation threads here).

- ``POST /v1/simulations`` of a 10,000-request scenario over HTTP (validation, simulation, summary, the
  per-request table written as Parquet, the SQLite row, the JSON response) against the direct library call
  that gives the same summary (``kvwire.simulate(s).summary``). Target: overhead <= 10% + 5 ms.
- ``/health`` latency (p50, p99, max) while both cores run simulations. Target: p99 <= 50 ms.
- Throughput of small (100-request) simulations, four clients at a time.

A normal ``pytest`` run executes each once as a smoke test (smaller counts); measure with
``pytest benches/bench_api.py --benchmark-enable --benchmark-only`` and record machine, load and date in
``benches/README.md``.
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import kvwire
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from api_support import Server

SCENARIO_10K = {"workload": {"requests": 10_000, "arrivals": {"rate_per_s": 8.0}}}
SMALL = {"workload": {"requests": 100, "arrivals": {"rate_per_s": 8.0}}}
PATH = "/v1/simulations"
LOAD = {"workload": {"requests": 50_000, "arrivals": {"rate_per_s": 8.0}}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KVWIRE_API_")}
    srv = Server(tmp_path_factory.mktemp("bench") / "data", env).start()
    try:
        yield srv
    finally:
        srv.stop()


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), without numpy."""
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def test_library_simulate_10k(benchmark: Any) -> None:
    """The direct library call: kvwire.simulate(10k requests).summary."""

    def run() -> Any:
        return kvwire.simulate(SCENARIO_10K).summary

    summary = benchmark.pedantic(run, rounds=30, iterations=1, warmup_rounds=2)
    assert summary["requests"]["total"] == 10_000


def test_http_post_simulation_10k(benchmark: Any, server: Server) -> None:
    """The same scenario through POST /v1/simulations (keep-alive client)."""
    with server.client() as c:

        def post() -> dict[str, Any]:
            r = c.post("/v1/simulations", json=SCENARIO_10K)
            assert r.status_code == 201, r.text
            body: dict[str, Any] = r.json()
            return body

        body = benchmark.pedantic(post, rounds=30, iterations=1, warmup_rounds=2)
    assert body["summary"]["requests"]["total"] == 10_000


def test_post_vs_library_interleaved(benchmark: Any, server: Server) -> None:
    """The two alternately, pair by pair (so a change of machine load hits both alike): extra_info holds each
    one's median and minimum and the median of the per-pair overhead, ms."""
    n = 3 if benchmark.disabled else 60

    def pairs() -> tuple[list[float], list[float]]:
        lib, http = [], []
        with server.client() as c:
            for _ in range(n):
                t = time.perf_counter()
                assert kvwire.simulate(SCENARIO_10K).summary["requests"]["total"] == 10_000
                lib.append(time.perf_counter() - t)
                t = time.perf_counter()
                assert c.post(PATH, json=SCENARIO_10K).status_code == 201
                http.append(time.perf_counter() - t)
        return lib, http

    lib, http = benchmark.pedantic(pairs, rounds=1, iterations=1)
    overhead = [h - x for x, h in zip(lib, http, strict=True)]
    benchmark.extra_info.update(
        library_median_ms=percentile(lib, 0.5) * 1e3,
        library_min_ms=min(lib) * 1e3,
        http_median_ms=percentile(http, 0.5) * 1e3,
        http_min_ms=min(http) * 1e3,
        overhead_median_ms=percentile(overhead, 0.5) * 1e3,
        pairs=n,
    )


def test_health_latency_while_cores_simulate(benchmark: Any, server: Server) -> None:
    """/health p50/p99/max (extra_info, ms) while two clients keep both simulation threads busy with
    50,000-request runs."""
    n = 20 if benchmark.disabled else 400
    stop = threading.Event()
    busy: list[int] = []

    def load() -> None:
        with server.client() as c:
            while not stop.is_set():
                busy.append(c.post("/v1/simulations", json=LOAD).status_code)

    def measure() -> list[float]:
        workers = [threading.Thread(target=load) for _ in range(2)]
        for w in workers:
            w.start()
        time.sleep(0.5)  # both threads inside a simulation
        out = []
        with httpx.Client(base_url=server.url, timeout=30) as c:
            for _ in range(n):
                t = time.perf_counter()
                assert c.get("/health").status_code == 200
                out.append(time.perf_counter() - t)
                time.sleep(0.01)
        stop.set()
        for w in workers:
            w.join()
        return out

    lat = benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info.update(
        p50_ms=percentile(lat, 0.5) * 1e3, p99_ms=percentile(lat, 0.99) * 1e3, max_ms=max(lat) * 1e3, n=len(lat)
    )
    assert busy and set(busy) == {201}


def test_small_simulations_per_second(benchmark: Any, server: Server) -> None:
    """Throughput of 100-request simulations over HTTP, four clients at a time (extra_info: sims_per_s)."""
    total = 20 if benchmark.disabled else 400

    def burst() -> float:
        clients = [server.client() for _ in range(4)]
        t = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            codes = list(pool.map(lambda i: clients[i % 4].post(PATH, json=SMALL).status_code, range(total)))
        elapsed = time.perf_counter() - t
        for c in clients:
            c.close()
        assert set(codes) == {201}
        return total / elapsed

    rate = benchmark.pedantic(burst, rounds=1, iterations=1)
    benchmark.extra_info["sims_per_s"] = rate
