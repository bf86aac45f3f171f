"""Simulator benchmarks (pytest-benchmark). Llama-3-8B, 1 prefill + 1 decode H100, InfiniBand NDR, default
lengths (lognormal 2,048/256, cv 0.5), Poisson 8 req/s.

A normal ``pytest`` run executes each benchmark once as a smoke test (``--benchmark-disable`` in
pyproject). To measure: ``pytest benches --benchmark-enable --benchmark-only``; record the results with the
machine and date in ``benches/README.md``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import kvwire
import pytest

SIZES = [1_000, 100_000, 1_000_000]


def scenario(n: int) -> dict[str, Any]:
    return {"workload": {"requests": n, "arrivals": {"rate_per_s": 8.0}}}


@pytest.mark.parametrize("n", SIZES, ids=[f"{n}req" for n in SIZES])
def test_simulate_core_and_table(benchmark: Any, n: int) -> None:
    """Rust run + zero-copy Polars table (what `kvwire.simulate` returns before any summary)."""
    res = benchmark.pedantic(kvwire.simulate, args=(scenario(n),), rounds=3 if n >= 100_000 else 10, iterations=1)
    benchmark.extra_info["core_wall_s"] = res.stats["wall_s"]
    benchmark.extra_info["events"] = res.stats["events"]
    assert res.requests.height == n


@pytest.mark.parametrize("n", SIZES, ids=[f"{n}req" for n in SIZES])
def test_simulate_with_summary(benchmark: Any, n: int) -> None:
    """Rust run + Polars table + summary (percentiles, SLO, energy, hot-spot)."""

    def run() -> dict[str, Any]:
        return kvwire.simulate(scenario(n)).summary

    s = benchmark.pedantic(run, rounds=3 if n >= 100_000 else 10, iterations=1)
    assert s["requests"]["completed"] == n


# Peak RSS from VmHWM of the child's own address space (ru_maxrss would carry the parent's peak across
# fork + exec on Linux).
_RSS_PROBE = """
import json, sys, kvwire
n = int(sys.argv[1])
res = kvwire.simulate({"workload": {"requests": n, "arrivals": {"rate_per_s": 8.0}}})
_ = res.summary
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
print(json.dumps({"maxrss_kib": int(hwm)}))
"""


def _peak_rss_kib(n: int) -> int:
    out = subprocess.run([sys.executable, "-c", _RSS_PROBE, str(n)], capture_output=True, text=True, check=True)
    return int(json.loads(out.stdout)["maxrss_kib"])


def test_peak_memory_per_request(benchmark: Any) -> None:
    """Peak RSS of a 1M-request run (table + summary) minus a 1k-request run, per request, in bytes."""

    def measure() -> float:
        return (_peak_rss_kib(1_000_000) - _peak_rss_kib(1_000)) * 1024 / 999_000

    per_request = benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info["peak_bytes_per_request"] = per_request
    assert per_request > 0
