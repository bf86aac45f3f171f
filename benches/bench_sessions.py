"""Closed-loop sessions against an open-loop run of the same requests (pytest-benchmark).

10,000 sessions x 10 turns (1.5 sessions/s, think 2 s, 4 system prompts of 500 tokens, 200-token messages,
100-token outputs: no session reaches Llama-3-8B's context, so 100,000 turns) against the open-loop workload
of the same 100,000 requests: the sessions run's own turns replayed as a request table with the arrival times
the closed loop produced. Same requests, same arrivals: the difference is the closed loop's mechanism (one
arrival event per turn scheduled at the previous turn's finish, and the session bookkeeping).

A normal ``pytest`` run executes each once as a smoke test; to measure:
``pytest benches/bench_sessions.py --benchmark-enable --benchmark-only``.
"""

from __future__ import annotations

from typing import Any

import kvwire
import polars as pl
import pytest

SESSIONS = {"count": 10_000, "turns": 10, "think_s": 2.0, "system_prompts": 4, "system_tokens": 500}


def scenario() -> dict[str, Any]:
    return {
        "workload": {
            "arrivals": {"rate_per_s": 1.5},
            "prompt_tokens": {"dist": "lognormal", "mean": 200.0, "cv": 0.5},
            "output_tokens": {"dist": "lognormal", "mean": 100.0, "cv": 0.5},
            "sessions": SESSIONS,
        }
    }


@pytest.fixture(scope="module")
def replayed() -> pl.DataFrame:
    """The sessions run's requests as an arrival-sorted open-loop table."""
    res = kvwire.simulate(scenario())
    assert res.summary["sessions"]["turns_sent"] == 100_000
    return res.requests.select("arrival_s", "prompt_tokens", "output_tokens").sort("arrival_s")


def test_sessions_run(benchmark: Any) -> None:
    """10,000 sessions x 10 turns, closed loop."""
    res = benchmark.pedantic(kvwire.simulate, args=(scenario(),), rounds=5, iterations=1)
    benchmark.extra_info["core_wall_s"] = res.stats["wall_s"]
    benchmark.extra_info["events"] = res.stats["events"]
    assert res.requests.height == 100_000


def test_open_loop_same_requests(benchmark: Any, replayed: pl.DataFrame) -> None:
    """The same 100,000 requests and arrival times, open loop (a request table)."""
    res = benchmark.pedantic(kvwire.simulate, args=({},), kwargs={"requests": replayed}, rounds=5, iterations=1)
    benchmark.extra_info["core_wall_s"] = res.stats["wall_s"]
    benchmark.extra_info["events"] = res.stats["events"]
    assert res.requests.height == 100_000
