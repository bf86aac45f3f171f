"""Resolving the hand-off once into a plan (issue 12 item 1) changed where the hand-off is interpreted, not what
it costs: the default scenario and hand-off variants (compression in transit and on the sender, decompression,
layer streaming, a host-staged path with a host conversion, conversions on either GPU, a decode pool keeping fp8,
processor sharing with per-transfer registration, conditional disaggregation, colocated) give bit-identical
summaries, per-request tables, ceilings and closed-form hand-off figures to the code before the change.

The expected values in ``data/plan_regression.json`` were written by ``python tests/test_plan_regression.py``
run against main 2c6f28d (the code before the plan, with its own build), not by the code under test. Floats
are compared exactly (JSON keeps the shortest round-trip repr). A deliberate change to the physics must
regenerate the file and say why.

Later changes may add summary keys and table columns (new keys, never redefined ones — the compatibility rule),
so the comparison covers the keys and columns the fixture holds; ``run.events`` is left out since the step
calendar (issue 12, multi-instance macro-steps) takes batch-step ends out of the kernel's heap: it counts
mechanism, not a result, and ``run.steps`` (compared) still counts every batch step."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import kvwire
import pytest
from workloads import reference_rule

FIXTURE = Path(__file__).resolve().parent / "data" / "plan_regression.json"

SCENARIOS: dict[str, dict[str, Any]] = {
    "default": {},
    "fp8_transit": {"link": "eth-25g", "handoff": {"compression": "fp8"}},
    "fp8_sender_receiver": {
        "link": "eth-25g",
        "handoff": {"compression": "fp8", "compress_at": "sender", "decompress_at": "receiver"},
    },
    "mxfp4_sender": {"link": "eth-25g", "handoff": {"compression": "mxfp4", "compress_at": "sender"}},
    "fp8_layer": {"link": "eth-25g", "handoff": {"compression": "fp8", "streaming": "layer"}},
    "host_staged_host_convert": {
        "link": {"preset": "eth-25g", "model": "host_staged"},
        "handoff": {
            "compression": "fp8",
            "compress_at": "sender",
            "convert": {"from": "vllm_nhd", "to": "sglang", "at": "host"},
        },
    },
    "decode_keeps_fp8_receiver_convert": {
        "link": "ib-ndr",
        "decode": {"kv_format": "fp8"},
        "handoff": {"compression": "fp8", "convert": {"from": "vllm_nhd", "to": "sglang", "at": "receiver"}},
    },
    "sender_convert": {"link": "ib-ndr", "handoff": {"convert": {"from": "vllm_nhd", "to": "sglang", "at": "sender"}}},
    "shared_per_transfer": {
        "link": {"preset": "ib-ndr", "model": "shared", "channels": 2, "registration": "per_transfer"},
        "prefill": {"instances": 2},
        "decode": {"instances": 2},
    },
    "conditional": {"link": "eth-25g", "router": {"disaggregate": {"policy": "conditional", "min_prompt_tokens": 512}}},
    "colocated": {"mode": "colocated"},
}

HANDOFFS: list[dict[str, Any]] = (
    [
        {"link": link, "compression": comp, "compress_at": at, "streaming": streaming}
        for link in ["ib-ndr", "eth-25g", "roce-8x400g"]
        for comp, at in [
            ("none", "transit"),
            ("fp8", "transit"),
            ("fp8", "sender"),
            ("mxfp4", "transit"),
            ("mxfp4", "sender"),
        ]
        for streaming in ["whole", "layer"]
    ]
    + [
        {
            "link": {"preset": "eth-25g", "model": "host_staged"},
            "compression": "fp8",
            "compress_at": at,
            "convert": conv,
        }
        for at in ["transit", "sender"]
        for conv in [None, {"from": "vllm_nhd", "to": "sglang", "at": "host"}]
    ]
    + [{"link": "ib-ndr", "convert": {"from": "vllm_nhd", "to": "sglang", "at": at}} for at in ["sender", "receiver"]]
)


#: The per-request columns of main 2c6f28d, which the fixture's digest covers (in this order).
COLUMNS = ["id", "arrival_s", "prompt_tokens", "output_tokens", "rejected", "measured", "over_context",
           "local_decode", "prefill_instance", "decode_instance", "prefill_start_s", "first_token_s", "kv_start_s",
           "kv_ready_s", "decode_start_s", "finish_s", "first_token_seen_s", "ttft_s", "tpot_s", "e2e_s",
           "handoff_s"]  # fmt: skip


def _table_digest(df: Any) -> str:
    h = hashlib.sha256()
    for name in COLUMNS:
        h.update(name.encode())
        h.update(df[name].to_numpy().tobytes())
    return h.hexdigest()


def figures() -> dict[str, Any]:
    """What the fixture holds: per scenario (2,000 requests) the summary without wall time, the per-request
    table's digest and the ceilings; the closed-form figures of each hand-off variant for a 3,000-token prompt."""
    out: dict[str, Any] = {"runs": {}, "handoff": []}
    for name, sc in SCENARIOS.items():
        # Recorded before the TTFT default changed (issue 23): by the reference's rule.
        sc = reference_rule({**sc, "workload": {"requests": 2000}})
        res = kvwire.simulate(sc)
        summary = res.summary
        summary["run"].pop("wall_s")
        summary["run"].pop("events")
        out["runs"][name] = {
            "summary": summary,
            "table": _table_digest(res.requests),
            "ceilings": kvwire.ceilings(sc),
        }
    out["handoff"] = [kvwire.handoff(prompt_tokens=3000, **kw) for kw in HANDOFFS]
    # One JSON round trip, so the comparison sees exactly what the file holds.
    result: dict[str, Any] = json.loads(json.dumps(out, sort_keys=True))
    return result


@pytest.fixture(scope="module")
def expected() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


@pytest.fixture(scope="module")
def got() -> dict[str, Any]:
    return figures()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_runs_are_bit_identical_to_before_the_plan(name: str, expected: dict[str, Any], got: dict[str, Any]) -> None:
    """Summary (every key the fixture holds, every float), per-request table and ceilings of each scenario equal
    the pre-plan code's."""
    want = expected["runs"][name]
    want["summary"]["run"].pop("events", None)
    assert _restrict(got["runs"][name], want) == want


def _restrict(got: Any, like: Any) -> Any:
    """``got`` keeping only the keys ``like`` has, at every depth (dicts); other values as they are."""
    if isinstance(got, dict) and isinstance(like, dict):
        return {k: _restrict(got[k], like[k]) if k in got else got.get(k) for k in like}
    return got


def test_handoff_figures_are_bit_identical_to_before_the_plan(expected: dict[str, Any], got: dict[str, Any]) -> None:
    """Every closed-form hand-off variant (links, formats, both compression sites, streaming, host staging,
    conversions at the sender, the receiver and the host) gives the pre-plan figures exactly."""
    assert len(got["handoff"]) == len(HANDOFFS)
    for kw, g, e in zip(HANDOFFS, got["handoff"], expected["handoff"], strict=True):
        assert {k: g[k] for k in e} == e, kw
        # Keys added since (issue 24): one transfer per hand-off and no descriptor cost without parallel layouts.
        assert set(g) - set(e) <= {"descriptors_s", "rank_pairs"}, kw
        assert (g["descriptors_s"], g["rank_pairs"]) == (0.0, 1), kw


if __name__ == "__main__":  # regenerate: python tests/test_plan_regression.py
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps(figures(), sort_keys=True, indent=1) + "\n")
    sys.stdout.write(f"wrote {FIXTURE}\n")
