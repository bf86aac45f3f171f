"""Determinism and the exactness of the decode fast path.

* A scenario and its seed fix the run: repeated runs, and runs made from several Python threads at once
  (the core releases the GIL), give identical request tables and identical summaries apart from the
  wall-clock time; a different seed gives a different run.
* ``"engine": {"macro_steps": true}`` (running sums, lazy per-sequence bookkeeping, consecutive decode
  steps processed inline while they precede every other pending event) must reproduce the step-by-step
  engine (``false``: per-sequence records, one kernel event per step) bit for bit — spec/simulator.md (c),
  "Fast path": "It reproduced the baseline bit for bit". Only ``run.events`` (fewer with macro steps) and
  ``run.wall_s`` may differ.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import kvwire
import numpy as np
import pytest
from workloads import REFERENCE_COST, reference_workload

#: Scenarios covering the engine's paths. Each builds its own workload from the core's generator.
SCENARIOS: dict[str, dict[str, Any]] = {
    "reference-ib": {"cost": dict(REFERENCE_COST), "workload": {"requests": 800}},
    # Several prefill and decode instances, two link channels and bursty gamma arrivals (cv 3), so many
    # transfers land mid-macro-step and decode instances are woken while others run.
    "disaggregated-bursty-multi-decode": {
        "cost": dict(REFERENCE_COST),
        "prefill": {"device": "h100", "instances": 2},
        "decode": {"device": "a100", "instances": 3},
        "link": {"preset": "eth-100g", "channels": 2},
        "workload": {
            "requests": 1500,
            "seed": 11,
            "arrivals": {"process": "gamma", "rate_per_s": 14.0, "cv": 3.0},
        },
    },
    "colocated": {
        "mode": "colocated",
        "colocated": {"device": "h100", "instances": 2},
        "workload": {"requests": 800, "seed": 3, "arrivals": {"rate_per_s": 7.0}},
    },
    # mem_util 0.25 leaves (20 GB - 16.06 GB resident) / 128 KiB ≈ 30k KV tokens per decode instance: the
    # decode queue is held back by KV admission, not by the batch limit.
    "kv-capacity-bound-decode": {
        "cost": {**REFERENCE_COST, "mem_util": 0.25},
        "decode": {"device": "h100", "instances": 2},
        "workload": {"requests": 800, "seed": 4, "arrivals": {"rate_per_s": 10.0}},
    },
    # 14 req/s over 25 GbE: the reference's congested link (94% busy), long hand-off queues.
    "congested-25gbe": {
        "cost": dict(REFERENCE_COST),
        "link": {"preset": "eth-25g"},
        "workload": {"requests": 800, "arrivals": {"rate_per_s": 14.0}},
    },
    # A decode batch limit of 4 and short outputs (0-40 tokens): finishes nearly every step, and requests that
    # never reach decode (outputs 0 and 1).
    "batch-limited-short-outputs": {
        "scheduler": {"max_decode_batch": 4},
        "workload": {
            "requests": 800,
            "seed": 9,
            "arrivals": {"rate_per_s": 12.0},
            "output_tokens": {"dist": "uniform", "min": 0, "max": 40},
        },
    },
}


def without(summary: dict[str, Any], *run_keys: str) -> dict[str, Any]:
    """A deep copy of ``summary`` with the given ``summary["run"]`` keys removed."""
    out = copy.deepcopy(summary)
    for k in run_keys:
        del out["run"][k]
    return out


def with_engine(scenario: dict[str, Any], macro_steps: bool) -> dict[str, Any]:
    return {**scenario, "engine": {"macro_steps": macro_steps}}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_repeated_runs_are_identical(name: str) -> None:
    """Running the same scenario and seed twice gives equal request tables and equal summaries, wall-clock
    time aside (and the same number of kernel events)."""
    a = kvwire.simulate(SCENARIOS[name])
    b = kvwire.simulate(SCENARIOS[name])
    assert a.requests.equals(b.requests)
    assert without(a.summary, "wall_s") == without(b.summary, "wall_s")


def test_explicit_requests_are_deterministic() -> None:
    """The same explicit request table (the CPython-built reference workload) gives the same run twice."""
    w = reference_workload(8.0)
    a = kvwire.simulate({"cost": dict(REFERENCE_COST)}, requests=w)
    b = kvwire.simulate({"cost": dict(REFERENCE_COST)}, requests=w.clone())
    assert a.requests.equals(b.requests)
    assert without(a.summary, "wall_s") == without(b.summary, "wall_s")


def test_concurrent_runs_from_threads_are_identical() -> None:
    """Several scenarios run at once from 8 Python threads (each scenario three times, interleaved, the GIL
    released by the core) give exactly the tables and summaries of sequential runs: no shared mutable state
    leaks between concurrent simulations."""
    names = list(SCENARIOS)
    sequential = {n: kvwire.simulate(SCENARIOS[n]) for n in names}
    jobs = names * 3
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda n: kvwire.simulate(SCENARIOS[n]), jobs))
    for n, res in zip(jobs, results, strict=True):
        assert res.requests.equals(sequential[n].requests), n
        assert without(res.summary, "wall_s") == without(sequential[n].summary, "wall_s"), n


_CHILD = """
import json, sys
import kvwire
sys.path[:0] = sys.argv[1:3]
from test_determinism import SCENARIOS
out = {}
for name in sys.argv[3:]:
    res = kvwire.simulate(SCENARIOS[name])
    summary = res.summary
    del summary["run"]["wall_s"]
    out[name] = {"summary": summary, "requests": res.requests.to_dict(as_series=False)}
print(json.dumps(out))
"""


def test_runs_in_a_fresh_process_are_identical() -> None:
    """A run in a separate interpreter (fresh process state, its own allocator and hash seeds) gives exactly
    the table and summary of the same run here: nothing depends on process-level state."""
    names = ["disaggregated-bursty-multi-decode", "colocated"]
    here = Path(__file__).resolve().parent  # this module, and the helpers it imports one folder up
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(here), str(here.parent), *names],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    child = json.loads(proc.stdout)
    for name in names:
        res = kvwire.simulate(SCENARIOS[name])
        assert child[name]["summary"] == without(res.summary, "wall_s"), name
        assert child[name]["requests"] == res.requests.to_dict(as_series=False), name


@pytest.mark.parametrize("name", ["reference-ib", "disaggregated-bursty-multi-decode", "colocated"])
def test_different_seeds_differ(name: str) -> None:
    """Changing only the seed changes the workload (arrivals and lengths) and hence the results."""
    sc = SCENARIOS[name]
    other = {**sc, "workload": {**sc["workload"], "seed": sc["workload"].get("seed", 1) + 1000}}
    a = kvwire.simulate(sc)
    b = kvwire.simulate(other)
    assert a.requests.height == b.requests.height
    for c in ("arrival_s", "prompt_tokens", "output_tokens", "finish_s"):
        assert not a.requests[c].equals(b.requests[c]), c
    assert a.summary["latency"] != b.summary["latency"]
    assert a.summary["energy"] != b.summary["energy"]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_macro_steps_are_bit_identical_to_step_by_step(name: str) -> None:
    """The decode fast path is exact: macro steps on and off give bit-identical request tables (every
    timestamp, instance and flag) and identical summaries except ``run.events``, ``run.calendar_steps`` and
    ``run.wall_s``, and the fast path processes strictly fewer kernel events for the same number of batch
    steps."""
    slow = kvwire.simulate(with_engine(SCENARIOS[name], False))
    fast = kvwire.simulate(with_engine(SCENARIOS[name], True))
    assert fast.requests.equals(slow.requests)
    skip = ("events", "calendar_steps", "wall_s")
    assert without(fast.summary, *skip) == without(slow.summary, *skip)
    # Bit-identical, not merely equal as Python floats: compare the raw float bits of every time column.
    for c in ("prefill_start_s", "first_token_s", "kv_start_s", "kv_ready_s", "decode_start_s", "finish_s"):
        bits = [r.requests[c].fill_null(-1.0).to_numpy().view(np.int64) for r in (slow, fast)]
        assert np.array_equal(bits[0], bits[1]), c
    assert fast.summary["run"]["steps"] == slow.summary["run"]["steps"]
    assert fast.summary["run"]["events"] < slow.summary["run"]["events"]
    if name == "kv-capacity-bound-decode":
        # The scenario really is KV-bound: capacity floor((80 GB · 0.25 - 2 · 8,029,995,008 B) / 131,072 B)
        # = 30,059 tokens, nearly filled, and requests wait in the decode queue.
        for d in ("decode-0", "decode-1"):
            inst = slow.summary["instances"][d]
            assert inst["kv_capacity_tokens"] == 30_059
            assert inst["kv_peak_tokens"] > 0.95 * 30_059
        assert slow.summary["stages"]["decode_queue_s"] > 0


def test_step_by_step_engine_is_one_event_per_step() -> None:
    """Without macro steps every batch step is its own kernel event: in a disaggregated run the events are
    at least the arrivals + prefill steps + decode steps + transfers (plus wake-ups), so the event count is
    ≥ steps + transfers + requests; with macro steps every step end comes from the kernel's step calendar
    instead (``calendar_steps`` = steps), so the heap's events plus the calendar's step ends are exactly the
    step-by-step run's events, and the reference run needs fewer heap events than it has batch steps."""
    sc = SCENARIOS["reference-ib"]
    slow = kvwire.simulate(with_engine(sc, False)).summary
    fast = kvwire.simulate(with_engine(sc, True)).summary
    floor = slow["run"]["steps"] + slow["link"]["transfers"] + slow["requests"]["total"]
    assert slow["run"]["events"] >= floor
    assert fast["run"]["steps"] == slow["run"]["steps"]
    assert fast["run"]["events"] < fast["run"]["steps"]
    assert (slow["run"]["calendar_steps"], fast["run"]["calendar_steps"]) == (0, fast["run"]["steps"])
    assert fast["run"]["events"] + fast["run"]["calendar_steps"] == slow["run"]["events"]
