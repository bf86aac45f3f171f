"""Issue 29's performance figure (``benches/README.md``): what the service's cluster path adds per point over the
library's. A ``distributed.LocalCluster`` of two worker processes (one thread each) and a real service process
started with ``--dask`` on it; then, alternating, the same sweep (``--points`` points of ``--requests``
requests, 1,000 x 1,000 by default) as a job through the service (POST /v1/sweeps to ``done``: validation, the
chunks on the cluster, the parts and the result written; its status polled every 10 ms) and as
``kvwire.sweep(definition, executor=client.get_executor())`` with a client of the same cluster. It prints each
pair and the median difference per point (target: <= 2 ms per point).

    python benches/issue29_dask_jobs.py [--points 1000] [--requests 1000] [--pairs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import distributed
import httpx
import kvwire

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from api_support import Server  # the tests' real-server helper


def definition(points: int, requests: int, salt: int) -> dict[str, Any]:
    """A sweep over ``points`` seeds (``salt`` moves them, so no run of a pair repeats one of another)."""
    return {"base": {"workload": {"requests": requests}}, "grid": {"workload.seed": [salt + i for i in range(points)]}}


def through_service(c: httpx.Client, body: dict[str, Any]) -> float:
    t = time.perf_counter()
    r = c.post("/v1/sweeps", json=body)
    assert r.status_code == 202, r.text
    loc = r.headers["location"]
    while True:
        job = c.get(loc).json()
        if job["status"] in ("done", "failed", "cancelled"):
            break
        time.sleep(0.01)
    wall = time.perf_counter() - t
    assert job["status"] == "done" and job["executor"]["kind"] == "dask", job
    return wall


def through_library(client: Any, body: dict[str, Any]) -> float:
    t = time.perf_counter()
    kvwire.sweep(body, executor=client.get_executor())
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    print(f"cores: {len(os.sched_getaffinity(0))}, load: {os.getloadavg()[0]:.2f}, kvwire {kvwire.__version__}")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1"
    )
    client = distributed.Client(cluster)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KVWIRE_API_", "KVWIRE_DASK_"))}
    env["KVWIRE_API_MAX_SWEEP_POINTS"] = str(max(10_000, args.points))
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "data", env, args=["--dask", cluster.scheduler_address]).start()
        try:
            with server.client() as c:
                through_service(c, definition(20, args.requests, 10**6))  # warm both paths up
                through_library(client, definition(20, args.requests, 2 * 10**6))
                pairs = []
                for i in range(args.pairs):
                    salt = 1 + 2 * i * args.points
                    service = through_service(c, definition(args.points, args.requests, salt))
                    library = through_library(client, definition(args.points, args.requests, salt + args.points))
                    pair = {
                        "service_s": round(service, 3),
                        "library_s": round(library, 3),
                        "per_point_ms": round((service - library) / args.points * 1e3, 3),
                    }
                    pairs.append(pair)
                    print(json.dumps(pair), flush=True)
        finally:
            server.stop()
    client.close()
    cluster.close()
    median = statistics.median(p["per_point_ms"] for p in pairs)
    print(
        f"{args.points} points x {args.requests} requests: the service's cluster path adds {median:.3f} ms per point "
        f"(median of {len(pairs)} pairs; target <= 2 ms); load now {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
