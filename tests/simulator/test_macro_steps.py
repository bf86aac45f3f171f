"""The kernel's step calendar (``engine.macro_steps``) on every engine path, from Python.

With macro-steps every batch-step end is taken from the kernel's step calendar (one slot per instance)
instead of its heap, in exactly the heap's ``(time, priority, seq)`` order. Each scenario here is run with
macro-steps on and off: the request tables must be bit-identical column by column and the summaries equal
except the event counts and the wall clock; on, every step ends through the calendar, and the heap's events
plus the calendar's step ends equal the step-by-step run's events. The events per batch step of both runs are
printed (``pytest -s``), not asserted as a speed.
"""

from __future__ import annotations

import copy
from typing import Any

import kvwire
import numpy as np
import pytest

GAMMA = {"process": "gamma", "rate_per_s": 16.0, "cv": 2.0}

#: name → scenario; several instances everywhere the engine can have them.
SCENARIOS: dict[str, dict[str, Any]] = {
    "1P1D": {"workload": {"requests": 400, "seed": 2, "arrivals": {"rate_per_s": 6.0}}},
    "2P2D": {
        "prefill": {"instances": 2},
        "decode": {"instances": 2},
        "link": {"preset": "ib-ndr", "channels": 2},
        "workload": {"requests": 500, "seed": 3, "arrivals": GAMMA},
    },
    "4P4D": {
        "prefill": {"instances": 4},
        "decode": {"instances": 4},
        "workload": {"requests": 600, "seed": 4, "arrivals": {"rate_per_s": 30.0}},
    },
    "colocated-3": {
        "mode": "colocated",
        "colocated": {"device": "h100", "instances": 3},
        "workload": {"requests": 500, "seed": 5, "arrivals": GAMMA},
    },
    "conditional-2P3D": {
        "prefill": {"instances": 2},
        "decode": {"instances": 3},
        "link": {"preset": "eth-25g"},
        "router": {
            "disaggregate": {
                "policy": "conditional",
                "min_prompt_tokens": 1500,
                "min_output_tokens": 100,
                "max_link_wait_s": 0.05,
            }
        },
        "workload": {"requests": 500, "seed": 6, "arrivals": GAMMA},
    },
    "streamed-layer-3P2D": {
        "prefill": {"instances": 3},
        "decode": {"instances": 2},
        "link": {"preset": "eth-100g", "channels": 2},
        "handoff": {"streaming": "layer"},
        "workload": {"requests": 400, "seed": 7, "arrivals": GAMMA},
    },
    "streamed-per-slice-2P2D": {
        "prefill": {"instances": 2},
        "decode": {"instances": 2},
        "link": {"preset": "eth-100g"},
        "handoff": {"streaming": "layer"},
        "engine": {"per_slice_streaming": True},
        "workload": {"requests": 300, "seed": 8, "arrivals": GAMMA},
    },
    "shared-link-2P4D": {
        "prefill": {"instances": 2},
        "decode": {"instances": 4},
        "link": {"preset": "eth-100g", "channels": 3, "model": "shared"},
        "workload": {"requests": 500, "seed": 9, "arrivals": GAMMA},
    },
    "host-staged-2P2D-compressed": {
        "prefill": {"instances": 2},
        "decode": {"instances": 2},
        "link": {"preset": "ib-ndr", "model": "host_staged"},
        "handoff": {"compression": "fp8", "compress_at": "sender", "decompress_at": "receiver"},
        "metrics": {"first_token": "decode"},
        "workload": {"requests": 400, "seed": 10, "arrivals": GAMMA},
    },
}


def with_macro(scenario: dict[str, Any], on: bool) -> dict[str, Any]:
    """``scenario`` with ``engine.macro_steps`` set to ``on`` (other engine options kept)."""
    out = copy.deepcopy(scenario)
    out.setdefault("engine", {})["macro_steps"] = on
    return out


def without_counts(summary: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``summary`` without the run's event counts and wall clock."""
    out = copy.deepcopy(summary)
    for k in ("events", "calendar_steps", "wall_s"):
        del out["run"][k]
    return out


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_step_calendar_is_bit_identical_to_step_by_step(name: str) -> None:
    """Macro-steps on vs off on this path: every column of the request table bit-equal (floats compared as
    raw bits, nulls included), the summaries equal but for the event counts and wall time, every batch step
    ended through the calendar (``calendar_steps`` = ``steps``; 0 step by step) and heap events + calendar
    step ends = the step-by-step run's events. Several instances really ran (the premise)."""
    slow = kvwire.simulate(with_macro(SCENARIOS[name], False))
    fast = kvwire.simulate(with_macro(SCENARIOS[name], True))
    assert fast.requests.columns == slow.requests.columns
    for c in fast.requests.columns:
        a, b = fast.requests[c], slow.requests[c]
        if a.dtype.is_float():
            bits = [s.fill_null(-1.0).to_numpy().view(np.int64) for s in (a, b)]
            assert np.array_equal(bits[0], bits[1]), c
        else:
            assert a.equals(b), c
    assert without_counts(fast.summary) == without_counts(slow.summary)
    run_fast, run_slow = fast.summary["run"], slow.summary["run"]
    assert run_fast["steps"] == run_slow["steps"] > 0
    assert (run_fast["calendar_steps"], run_slow["calendar_steps"]) == (run_fast["steps"], 0)
    assert run_fast["events"] + run_fast["calendar_steps"] == run_slow["events"]
    busy = [i for i, s in fast.summary["instances"].items() if s["steps"] > 0]
    assert len(busy) >= 2, busy
    if name.startswith("conditional"):
        assert fast.requests["local_decode"].any() and not fast.requests["local_decode"].all()
    print(
        f"{name}: {run_fast['steps']:,} steps; heap events per step {run_fast['events'] / run_fast['steps']:.3f} "
        f"with the calendar, {run_slow['events'] / run_slow['steps']:.3f} step by step"
    )
