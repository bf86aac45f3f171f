"""kvwire.capacity, best_split and compare.

Oracles: closed forms independent of the simulator — a link-saturated scenario's capacity is channels ÷
transfer time (``handoff.md``: T = latency + bytes / bandwidth), a prefill-bound one's is 1 ÷ the prefill
step time of one prompt (the reference step table of ``simulator.md`` (b): 59.0332 ms for a 2,048-token
Llama-3-8B prompt on one H100) — with near-deterministic arrivals and fixed lengths, so that no queue forms
below that rate and one grows without bound above it. best_split is checked against a brute-force sweep,
compare against single simulations.
"""

from __future__ import annotations

import json
import math
import threading
from typing import Any

import kvwire
import polars as pl
import pytest

#: Near-deterministic arrivals (gamma, cv 0.01) and fixed lengths: queues form only above the bottleneck.
STEADY: dict[str, Any] = {
    "requests": 3000,
    "seed": 3,
    "arrivals": {"process": "gamma", "cv": 0.01, "rate_per_s": 1.0},
    "prompt_tokens": {"dist": "fixed", "value": 2048},
}

LLAMA3_8B_KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, 8 KV heads, head_dim 128, bf16


def attainment(scenario: dict[str, Any], rate: float) -> float:
    s = kvwire.simulate({**scenario, "workload": {**scenario["workload"], "arrivals": {
        **scenario["workload"]["arrivals"], "rate_per_s": rate}}}).summary  # fmt: skip
    a: float = s["slo"]["attainment"]
    return a


def check_edge(scenario: dict[str, Any], r: kvwire.CapacityResult) -> None:
    """The issue's acceptance: attainment ≥ target at the returned rate, below it at rate x (1 + 2·rel_tol)."""
    assert r.capacity is not None and r.failed_at is not None
    assert r.failed_at <= r.capacity * (1 + r.rel_tol) + 1e-9
    assert attainment(scenario, r.capacity) >= r.slo_attainment
    assert attainment(scenario, r.capacity * (1 + 2 * r.rel_tol)) < r.slo_attainment


def test_link_saturated_capacity_is_channels_over_transfer_time() -> None:
    """25 GbE carrying 2,048-token hand-offs: capacity = 1 / (20 µs + 268.4 MB / 3.125 GB/s) = 11.64 req/s;
    the search brackets it, starting from the kv-link ceiling, in at most 8 simulations."""
    sc = {
        "link": "eth-25g",
        "workload": {**STEADY, "output_tokens": {"dist": "fixed", "value": 64}},
        "slo": {"ttft_s": 1.0, "tpot_s": 0.025},
    }
    transfer_s = 20e-6 + 2048 * LLAMA3_8B_KV_BYTES_PER_TOKEN / 3.125e9
    closed = 1.0 / transfer_s
    assert closed == pytest.approx(11.64, abs=0.01)
    r = kvwire.capacity(sc)
    assert r.binding == "kv-link"
    assert r.ceilings is not None and r.ceilings["kv_link_req_per_s"] == pytest.approx(closed, rel=1e-6)
    assert r.capacity is not None and r.failed_at is not None
    assert closed / (1 + r.rel_tol) ** 2 <= r.capacity <= closed * 1.01
    assert r.failed_at >= closed * 0.999
    assert r.evaluations <= 8
    check_edge(sc, r)


def test_prefill_bound_capacity_is_one_over_the_prefill_step() -> None:
    """One H100 prefilling fixed 2,048-token prompts with the LM head on every token (the reference step
    table: 59.0332 ms) behind a fast link, TTFT SLO 80 ms: any queue breaks it, so the capacity is
    1 / 59.0332 ms = 16.94 req/s, bracketed by the search."""
    sc = {
        "link": "nvlink4",
        "cost": {"prefill_lm_head": "all"},
        "workload": {**STEADY, "output_tokens": {"dist": "fixed", "value": 16}},
        "slo": {"ttft_s": 0.080, "tpot_s": 0.1},
    }
    closed = 1.0 / 0.0590332
    r = kvwire.capacity(sc)
    assert r.binding == "prefill"
    assert r.capacity is not None and r.failed_at is not None
    assert closed / (1 + r.rel_tol) ** 2 <= r.capacity <= closed * 1.01
    assert r.failed_at >= closed * 0.999
    check_edge(sc, r)


def test_result_records_every_point_and_serialises() -> None:
    """points has one row per simulation (the field, met, the summary); to_dict is JSON without NaN; the
    passing rows are exactly those with attainment ≥ target; capacity is the largest passing value."""
    r = kvwire.capacity({"workload": {"requests": 600}, "link": "eth-25g"}, rel_tol=0.05)
    p = r.points
    assert p.height == r.evaluations >= 3
    assert p["met"].to_list() == (p["slo.attainment"] >= 0.9).to_list()
    assert r.capacity == p.filter(pl.col("met"))["workload.arrivals.rate_per_s"].max()
    d = json.loads(json.dumps(r.to_dict(), allow_nan=False))
    assert d["capacity"] == r.capacity and len(d["points"]) == r.evaluations
    assert d["binding"] == r.binding == r.ceilings["binding"]  # type: ignore[index]


def test_other_fields_need_bounds_and_bad_arguments_are_named() -> None:
    """A field without ceilings needs bounds; bad targets, tolerances and bounds are ScenarioErrors naming them;
    with bounds the search works on any field whose growth makes attainment fall."""
    sc = {"workload": {"requests": 400, "arrivals": {"rate_per_s": 10.0}}, "link": "eth-25g"}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"slo_attainment": 0.0}, "slo_attainment"),
        ({"slo_attainment": 1.5}, "slo_attainment"),
        ({"rel_tol": 0.0}, "rel_tol"),
        ({"field": "workload.prompt_tokens.mean"}, "bounds"),
        ({"bounds": (5.0, 1.0)}, "bounds"),
        ({"bounds": (1.0, math.inf)}, "bounds"),
    ]
    for kwargs, path in cases:
        with pytest.raises(kvwire.ScenarioError) as info:
            kvwire.capacity(sc, **kwargs)
        assert info.value.path == path, kwargs
    r = kvwire.capacity(sc, field="workload.prompt_tokens.mean", bounds=(256.0, 8192.0), rel_tol=0.05)
    assert r.ceilings is None and r.capacity is not None and 256.0 <= r.capacity < 8192.0
    assert r.points.filter(pl.col("met"))["workload.prompt_tokens.mean"].max() == r.capacity


def test_capacity_cancel_and_progress() -> None:
    """progress counts simulations; a set cancel raises Cancelled before the next one."""
    calls: list[int] = []
    stop = threading.Event()

    def progress(done: int, total: int) -> None:
        calls.append(done)
        if done == 2:
            stop.set()

    with pytest.raises(kvwire.Cancelled):
        kvwire.capacity({"workload": {"requests": 300}}, progress=progress, cancel=stop)
    assert calls == [1, 2]


def test_best_split_agrees_with_a_brute_force_sweep() -> None:
    """Three H100s, long prompts: every split's capacity from best_split matches the highest passing rate of
    a fine rate sweep of that split (within the search's tolerance and the grid step), and the best split is
    the brute force's."""
    sc = {
        "workload": {"requests": 800, "seed": 5, "prompt_tokens": {"dist": "lognormal", "mean": 4096, "cv": 0.3},
                     "output_tokens": {"dist": "lognormal", "mean": 128, "cv": 0.3}},
        "slo": {"ttft_s": 2.0, "tpot_s": 0.05},
    }  # fmt: skip
    r = kvwire.best_split(sc, 3, rel_tol=0.02)
    assert [(s["prefill"], s["decode"]) for s in r.splits] == [(1, 2), (2, 1)]
    top = max(s["failed_at"] or s["capacity"] for s in r.splits)
    rates = [top * 1.2 * (i + 1) / 80 for i in range(80)]  # step 1.5% of the top capacity
    brute = kvwire.sweep(
        sc, {"workload.arrivals.rate_per_s": rates}, zip={"prefill.instances": [1, 2], "decode.instances": [2, 1]}
    )
    best_brute = None
    for s in r.splits:
        rows = brute.filter((pl.col("prefill.instances") == s["prefill"]) & (pl.col("slo.attainment") >= 0.9))
        highest = rows["workload.arrivals.rate_per_s"].max()
        assert highest is not None
        step = top * 1.2 / 80
        assert abs(s["capacity"] - highest) <= step + s["capacity"] * 0.02 + 1e-9, (s, highest)  # type: ignore[operator]
        if best_brute is None or highest > best_brute[1]:  # type: ignore[operator]
            best_brute = (s["prefill"], highest)
    assert r.best is not None and r.best["prefill"] == best_brute[0]  # type: ignore[index]
    assert set(r.points["prefill"].unique().to_list()) == {1, 2}
    json.dumps(r.to_dict(), allow_nan=False)


def test_best_split_refuses_bad_input() -> None:
    """Fewer than two instances or a colocated scenario are refused, naming the argument."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.best_split({}, 1)
    assert info.value.path == "total_instances"
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.best_split({"mode": "colocated"}, 4)
    assert info.value.path == "mode"


def test_compare_runs_the_same_hardware_both_ways() -> None:
    """The colocated twin of 1 + 1 H100s is 2 colocated H100s with the same workload and SLO; each side's
    summary equals a direct simulation; a colocated scenario's twin is split half and half; pools of different
    devices are refused."""
    sc = {"workload": {"requests": 300, "arrivals": {"rate_per_s": 6.0}}, "slo": {"ttft_s": 0.5, "tpot_s": 0.02}}
    r = kvwire.compare(sc, with_capacity=False)
    col = r.scenarios["colocated"]
    assert col["mode"] == "colocated" and col["colocated"]["instances"] == 2 and col["colocated"]["device"] == "h100"
    assert col["workload"] == sc["workload"] and col["slo"] == sc["slo"] and "link" not in col
    assert r.summaries["colocated"]["slo"] == kvwire.simulate(col).summary["slo"]
    assert r.summaries["disaggregated"]["latency"] == kvwire.simulate(sc).summary["latency"]
    assert r.points["mode"].to_list() == ["disaggregated", "colocated"]
    back = kvwire.compare({"mode": "colocated", "colocated": {"instances": 4}, "workload": {"requests": 100}},
                          with_capacity=False)  # fmt: skip
    dis = back.scenarios["disaggregated"]
    assert dis["prefill"]["instances"] == 2 and dis["decode"]["instances"] == 2
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.compare({"decode": {"device": "a100"}})
    assert info.value.path == "decode.device"


def test_compare_with_capacity() -> None:
    """With capacity, each mode's search is kept and its capacity is in the points table."""
    r = kvwire.compare({"workload": {"requests": 400}}, rel_tol=0.05)
    assert set(r.capacity) == {"disaggregated", "colocated"}
    assert r.capacity["colocated"].binding == "colocated"
    assert r.points["capacity"].to_list() == [r.capacity["disaggregated"].capacity, r.capacity["colocated"].capacity]
    json.dumps(r.to_dict(), allow_nan=False)


def test_cli_capacity_best_split_compare(tmp_path: Any) -> None:
    """The three commands print their result (and JSON with --json); bad input is a clean error."""
    from click.testing import CliRunner
    from kvwire.cli import main

    runner = CliRunner()
    res = runner.invoke(main, ["capacity", "--set", "workload.requests=400", "--set", "link=eth-25g"])
    assert res.exit_code == 0, res.output
    assert "binding: kv-link" in res.output and "capacity:" in res.output
    res = runner.invoke(main, ["capacity", "--set", "workload.requests=400", "--json", "--rel-tol", "0.05"])
    assert json.loads(res.output)["capacity"] > 0
    res = runner.invoke(main, ["best-split", "--instances", "3", "--set", "workload.requests=300", "--json"])
    assert res.exit_code == 0, res.output
    split = tmp_path / "split.json"
    split.write_text(res.output)
    assert len(json.loads(res.output)["splits"]) == 2
    plotted = runner.invoke(main, ["plot", str(split), "--kind", "split", "-o", str(tmp_path / "s.png")])
    assert plotted.exit_code == 0, plotted.output
    res = runner.invoke(main, ["compare", "--set", "workload.requests=300", "--no-capacity"])
    assert res.exit_code == 0 and "colocated" in res.output
    bad = runner.invoke(main, ["capacity", "--field", "workload.prompt_tokens.mean"])
    assert bad.exit_code != 0 and "bounds" in bad.output
