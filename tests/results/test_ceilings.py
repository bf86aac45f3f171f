"""Analytic capacity ceilings (``kvwire.ceilings``, the summary's ``load``; CONTRACTS §1, README "Capacity
ceilings") against simulation.

Oracles: (1) saturation — every request arrives at once, so the binding resource works flat out from start to
end, and its completion rate over the run must equal the ceiling to within the start-up and drain transient
(≈ one batch of 2,000 requests: 1%); (2) queueing — at an offered load f x ceiling with f > 1 the binding
resource's queue grows for the whole run, each request waiting (f - 1) x its arrival time longer than one
that arrived at t = 0 (the fluid limit: the backlog grows at λ - μ and drains at μ), while at f = 0.5 waits
stay bounded and do not grow. The formulas themselves are checked against the spec's step-cost table in
``rust/kvwire-core/src/ceilings.rs``.
"""

from __future__ import annotations

from typing import Any

import kvwire
import numpy as np
import polars as pl
import pytest
from kvwire.results.report import render

CONTRACT_KEYS = {
    "prefill_req_per_s",
    "decode_req_per_s",
    "kv_link_req_per_s",
    "colocated_req_per_s",
    "binding",
    "ceiling_req_per_s",
    "offered_req_per_s",
    "prompt_tokens_mean",
    "output_tokens_mean",
}

#: (binding resource, scenario that makes it bind, the columns between which its queue wait is measured).
BINDING_CASES: list[tuple[str, dict[str, Any], tuple[str, str]]] = [
    ("prefill", {}, ("arrival_s", "prefill_start_s")),
    ("kv-link", {"link": "eth-25g"}, ("first_token_s", "kv_start_s")),
    ("decode", {"scheduler": {"max_decode_batch": 16}}, ("kv_ready_s", "decode_start_s")),
    ("colocated", {"mode": "colocated"}, ("arrival_s", "prefill_start_s")),
]


def burst(scenario: dict[str, Any], n: int, prompt: int, output: int) -> kvwire.SimResult:
    """``n`` requests of fixed lengths arriving within the first millisecond."""
    table = pl.DataFrame(
        {"arrival_s": np.linspace(0.0, 1e-3, n), "prompt_tokens": [prompt] * n, "output_tokens": [output] * n}
    )
    return kvwire.simulate(scenario, requests=table)


def test_contract_shape_and_modes() -> None:
    """``kvwire.ceilings`` returns the contract's keys; the resources that do not exist in a mode are None; the
    binding resource is the lowest ceiling and ``ceiling_req_per_s`` is its value."""
    dis = kvwire.ceilings({"workload": {"requests": 100}})
    colo = kvwire.ceilings({"mode": "colocated", "workload": {"requests": 100}})
    assert set(dis) >= CONTRACT_KEYS and set(colo) >= CONTRACT_KEYS
    assert dis["colocated_req_per_s"] is None
    assert colo["prefill_req_per_s"] is colo["decode_req_per_s"] is colo["kv_link_req_per_s"] is None
    assert colo["binding"] == "colocated"
    for c in (dis, colo):
        named = {
            "prefill": c["prefill_req_per_s"],
            "decode": c["decode_req_per_s"],
            "kv-link": c["kv_link_req_per_s"],
            "colocated": c["colocated_req_per_s"],
        }
        present = {k: v for k, v in named.items() if v is not None}
        assert c["binding"] == min(present, key=lambda k: present[k])
        assert c["ceiling_req_per_s"] == present[c["binding"]]
    assert dis["offered_req_per_s"] == 8.0


def test_ceilings_use_the_request_table() -> None:
    """With ``requests=``, the means and the offered rate are the table's: 5 requests 0.25 s apart offer
    4 req/s; the same table gives the same ceilings whether passed to ``ceilings`` or run by ``simulate``."""
    table = {
        "arrival_s": [0.0, 0.25, 0.5, 0.75, 1.0],
        "prompt_tokens": [100, 300] * 2 + [200],
        "output_tokens": [9] * 5,
    }
    c = kvwire.ceilings({}, requests=table)
    assert c["offered_req_per_s"] == pytest.approx(4.0)
    assert (c["prompt_tokens_mean"], c["output_tokens_mean"]) == (200.0, 9.0)
    res = kvwire.simulate({}, requests=table)
    assert {k: v for k, v in res.summary["load"].items() if k in c} == c


@pytest.mark.parametrize(("binding", "scenario", "output"), [
    ("prefill", {"cost": {"prefill_lm_head": "all"}}, 50),
    ("kv-link", {"link": "eth-25g"}, 50),
    ("decode", {"scheduler": {"max_decode_batch": 16}}, 500),
    ("decode", {"decode": {"device": "a100-40g"}}, 2000),
    ("colocated", {"mode": "colocated"}, 300),
])  # fmt: skip
def test_saturated_throughput_equals_the_ceiling(binding: str, scenario: dict[str, Any], output: int) -> None:
    """2,000 requests at once: the run completes them at the binding resource's ceiling, to within the 1% of
    the start-up and drain transients (fixed lengths, so the ceiling's mean-length batches are the real ones).
    The KV-limited case (A100-40GB decode, 37 sequences of 4,048 tokens) checks the KV-bound steady batch."""
    res = burst(scenario, 2000, 2048, output)
    c = res.ceilings
    assert c is not None
    assert c["binding"] == binding
    rate = 2000 / res.requests["finish_s"].max()
    assert rate == pytest.approx(c["ceiling_req_per_s"], rel=0.012)
    assert rate < c["ceiling_req_per_s"]  # the transients only cost time


@pytest.mark.parametrize(("binding", "scenario", "wait"), BINDING_CASES)
def test_queue_grows_above_the_ceiling_and_not_below(
    binding: str, scenario: dict[str, Any], wait: tuple[str, str]
) -> None:
    """Poisson arrivals at 1.5x the binding ceiling: the binding resource's queue grows for the whole run — the
    last quarter of requests waits longer than the first by (f - 1) = 0.5 of the arrival time between them
    (±15%) — and the summary says overloaded. At 0.5x it does not grow (< 1% of the time between them) and the
    summary says not overloaded."""
    c = kvwire.ceilings(scenario)
    assert c["binding"] == binding
    for factor in (0.5, 1.5):
        sc = {**scenario, "workload": {"requests": 2000, "arrivals": {"rate_per_s": factor * c["ceiling_req_per_s"]}}}
        res = kvwire.simulate(sc)
        df = res.requests.sort("arrival_s")
        w = (df[wait[1]] - df[wait[0]]).to_numpy()
        arrival = df["arrival_s"].to_numpy()
        q = len(w) // 4
        growth = (w[-q:].mean() - w[:q].mean()) / (arrival[-q:].mean() - arrival[:q].mean())
        load = res.summary["load"]
        if factor > 1:
            assert growth == pytest.approx(factor - 1, rel=0.15), growth
            assert load["overloaded"] and binding in load["overload_note"]
        else:
            assert abs(growth) < 0.01, growth
            assert not load["overloaded"] and load["overload_note"] is None


def test_overload_line_in_the_report() -> None:
    """The article's congested link (14 req/s over 25 GbE, hand-off p99 9.7 s): the report says in one line
    that the load exceeds the kv-link's ceiling and gives it (11.6 req/s, the handoff.md link-full rate at
    the workload's mean prompt); the default run at 8 req/s has no such line."""
    res = kvwire.simulate({"link": "eth-25g", "workload": {"arrivals": {"rate_per_s": 14}}})
    text = render(res)
    lines = [ln for ln in text.splitlines() if ln.startswith("overloaded")]
    assert len(lines) == 1, text
    assert "14.00 req/s offered exceeds the kv-link ceiling of 11.61 req/s" in lines[0]
    assert "overloaded" not in render(kvwire.simulate({"workload": {"requests": 200}}))
