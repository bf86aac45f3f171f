"""Serving levers through the Python face: chunked prefill (``scheduler.policy = "chunked"``).

Oracles: whole-prompt batching where the two must agree, the ceiling ⌈n/b⌉ for one long prompt's steps, and
the validation contract (a :class:`kvwire.ScenarioError` naming the field).
"""

from __future__ import annotations

import json
import math
from typing import Any

import kvwire
import polars as pl
import pytest
from click.testing import CliRunner
from kvwire.cli import main as cli_main

STAMPS = ["prefill_start_s", "first_token_s", "kv_start_s", "kv_ready_s", "decode_start_s", "finish_s"]


def _chunked(sc: dict[str, Any], budget: int) -> dict[str, Any]:
    return {**sc, "scheduler": {**sc.get("scheduler", {}), "policy": "chunked", "max_num_batched_tokens": budget}}


def _bits(df: pl.DataFrame) -> pl.DataFrame:
    """The stamp columns as their IEEE bit patterns (null kept), for an exact comparison."""
    return df.select(pl.col(c).cast(pl.Float64).reinterpret(signed=False).alias(c) for c in STAMPS)


@pytest.mark.parametrize("colocated", [False, True])
def test_chunked_with_an_unfillable_budget_and_no_decode_rows_equals_whole(colocated: bool) -> None:
    """With no decode rows in any step (the disaggregated prefill pool; colocated with outputs of 0 or 1 token)
    and a budget no step fills (no prompt is split), chunked prefill is whole-prompt batching under the same
    budget: every request stamp is bit-equal and the summary's instance totals agree."""
    huge = 4_000_000_000
    sc: dict[str, Any] = {
        "workload": {
            "requests": 120,
            "seed": 7,
            "arrivals": {"process": "poisson", "rate_per_s": 20.0},
            "output_tokens": {"dist": "uniform", "min": 0, "max": 1} if colocated else {"dist": "fixed", "value": 40},
        },
        "scheduler": {"max_prefill_tokens": huge},
    }
    if colocated:
        sc |= {"mode": "colocated"}
    whole = kvwire.simulate(sc)
    chunked = kvwire.simulate(_chunked(sc, huge))
    assert _bits(whole.requests).equals(_bits(chunked.requests))
    assert whole.requests.drop(STAMPS).equals(chunked.requests.drop(STAMPS))
    assert whole.summary["instances"] == chunked.summary["instances"]


@pytest.mark.parametrize("budget", [1000, 2048, 4095, 12_000])
def test_a_long_prompt_takes_ceil_n_over_b_steps(budget: int) -> None:
    """One 12,000-token prompt (output 1: no decode) takes ⌈12,000 / b⌉ prefill steps under a budget of b,
    and its prefill time is that many steps back to back (the instance's busy time)."""
    n = 12_000
    sc = {"workload": {"trace": {"arrival_s": [0.0], "prompt_tokens": [n], "output_tokens": [1]}}}
    res = kvwire.simulate(_chunked(sc, budget))
    assert res.summary["instances"]["prefill-0"]["steps"] == math.ceil(n / budget)
    row = res.requests.row(0, named=True)
    busy = res.summary["utilisation"]["prefill-0"] * res.summary["run"]["horizon_s"]
    assert row["first_token_s"] - row["prefill_start_s"] == pytest.approx(busy, rel=1e-12)


def test_chunked_prefill_shortens_the_decode_stall() -> None:
    """Colocated, one instance: a long prompt arriving while another request decodes stalls that decode for a
    whole prefill step under whole-prompt batching, but only for one mixed step (a small fraction of it)
    under chunked prefill: the largest inter-token gap drops by more than 10x."""
    sc = {
        "mode": "colocated",
        "colocated": {"instances": 1},
        "workload": {"trace": {"arrival_s": [0.0, 1.0], "prompt_tokens": [100, 30_000], "output_tokens": [3000, 2]}},
        "metrics": {"warmup_fraction": 0.0},
    }
    whole = kvwire.simulate(sc)
    chunked = kvwire.simulate(_chunked(sc, 512))
    stall = whole.requests.row(1, named=True)
    step = stall["first_token_s"] - stall["prefill_start_s"]
    assert whole.summary["latency"]["itl_s"]["max"] >= step
    assert chunked.summary["latency"]["itl_s"]["max"] < step / 10


@pytest.mark.parametrize(
    ("scheduler", "extra", "path"),
    [
        ({"max_num_batched_tokens": 0}, {}, "scheduler.max_num_batched_tokens"),
        ({"max_num_batched_tokens": -1}, {}, "scheduler.max_num_batched_tokens"),
        ({"max_num_batched_tokens": "many"}, {}, "scheduler.max_num_batched_tokens"),
        ({"policy": "sarathi"}, {}, "scheduler.policy"),
        ({"policy": "chunked"}, {"handoff": {"streaming": "layer"}}, "scheduler.policy"),
    ],
)
def test_bad_chunked_settings_name_their_field(scheduler: dict[str, Any], extra: dict[str, Any], path: str) -> None:
    """Bad chunked-prefill settings are a ScenarioError whose ``.path`` names the field (a non-positive or
    non-integer budget, an unknown policy, chunked prefill with layer-wise streaming)."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.validate({"scheduler": scheduler, **extra})
    assert info.value.path == path


def test_cli_runs_chunked_prefill_from_the_scenario() -> None:
    """``kvwire run --set scheduler.policy=chunked`` runs chunked prefill: the echoed scenario says so and
    the prefill instance took more, smaller steps than whole-prompt batching."""
    args = ["run", "--json", "--set", "workload.requests=40"]
    whole = CliRunner().invoke(cli_main, args)
    chunked = CliRunner().invoke(
        cli_main, [*args, "--set", "scheduler.policy=chunked", "--set", "scheduler.max_num_batched_tokens=256"]
    )
    assert whole.exit_code == 0 and chunked.exit_code == 0, chunked.output
    w, c = json.loads(whole.output), json.loads(chunked.output)
    assert c["scenario"]["scheduler"]["policy"] == "chunked"
    steps = [x["summary"]["instances"]["prefill-0"]["steps"] for x in (w, c)]
    assert steps[1] > 4 * steps[0]


# --------------------------------------------------------------------------------------------------
# Paged KV (``kv.policy = "paged"``)


@pytest.mark.parametrize("mode", ["disaggregated", "colocated"])
@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_paged_with_ample_memory_equals_reserve(mode: str, preemption: str) -> None:
    """With memory to spare (100 requests on an H100's 426k-token cache) paged KV admits and decodes exactly
    as reserved KV: every request stamp bit-equal, no preemption, the same latency figures."""
    sc: dict[str, Any] = {"mode": mode, "workload": {"requests": 100, "seed": 3}}
    reserve = kvwire.simulate(sc)
    paged = kvwire.simulate({**sc, "kv": {"policy": "paged", "preemption": preemption}})
    assert _bits(reserve.requests).equals(_bits(paged.requests))
    assert paged.requests["preemptions"].sum() == 0
    assert paged.summary["preemptions"] == {"count": 0, "recompute_tokens": 0, "swap_bytes": 0.0}
    assert reserve.summary["latency"] == paged.summary["latency"]


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_preemption_under_memory_pressure_loses_no_request(preemption: str) -> None:
    """A colocated instance whose paged cache (~2k tokens) cannot hold every decoding sequence: requests
    are preempted, yet every request finishes with all its tokens (the ITL count is sum of output - 1), the
    per-request ``preemptions`` column sums to ``summary["preemptions"]["count"]``, every block comes
    back, and only the chosen mode's cost appears."""
    sc = {
        "mode": "colocated",
        "colocated": {"instances": 1},
        "cost": {"mem_util": 0.207},
        "metrics": {"warmup_fraction": 0.0},
        "kv": {"policy": "paged", "preemption": preemption},
        "workload": {
            "trace": {
                "arrival_s": [0.01 * i for i in range(12)],
                "prompt_tokens": [200] * 12,
                "output_tokens": [600] * 12,
            }
        },
    }
    res = kvwire.simulate(sc)
    s = res.summary
    assert s["requests"]["completed"] == 12
    assert res.stats["itl_s"]["count"] == 12 * 599
    assert s["preemptions"]["count"] > 0
    assert res.requests["preemptions"].sum() == s["preemptions"]["count"]
    assert s["instances"]["colocated-0"]["kv_occupancy_peak"] <= 1.0
    if preemption == "swap":
        assert s["preemptions"]["swap_bytes"] > 0 and s["preemptions"]["recompute_tokens"] == 0
    else:
        assert s["preemptions"]["recompute_tokens"] > 0 and s["preemptions"]["swap_bytes"] == 0


@pytest.mark.parametrize(
    ("kv", "path"),
    [
        ({"block_size": 0}, "kv.block_size"),
        ({"block_size": 1.5}, "kv.block_size"),
        ({"watermark": 1.0}, "kv.watermark"),
        ({"policy": "lru"}, "kv.policy"),
        ({"preemption": "kill"}, "kv.preemption"),
    ],
)
def test_bad_kv_settings_name_their_field(kv: dict[str, Any], path: str) -> None:
    """Bad ``kv`` settings are a ScenarioError whose ``.path`` names the field."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.validate({"kv": kv})
    assert info.value.path == path
