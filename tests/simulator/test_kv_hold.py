"""KV holding in disaggregated runs with paged KV (issue 12 item 3): the ``kv_hold_wait_s`` column and the
``kv_hold`` summary section, seen from Python. The engine's behaviour (exact times, conservation, equality
with reserved KV) is tested in ``rust/kvwire-core/tests/kv_hold.rs``."""

from __future__ import annotations

from typing import Any

import kvwire
import polars as pl
import pytest
from kvwire.results.report import render

#: 1P1D whose caches (2,592 tokens) hold one 1,500-token request at a time on each side.
TIGHT: dict[str, Any] = {
    "cost": {"mem_util": 0.205},
    "metrics": {"warmup_fraction": 0.0},
    "kv": {"policy": "paged", "block_size": 16, "watermark": 0},
    "workload": {
        "trace": {
            "arrival_s": [0.001 * i for i in range(6)],
            "prompt_tokens": [1500] * 6,
            "output_tokens": [60] * 6,
        }
    },
}


def test_waits_for_decode_room_are_reported_per_request_and_in_the_summary() -> None:
    """Six 1,500-token requests through caches that hold one at a time: every request after the first waits
    for room on the decode instance (``kv_hold_wait_s`` > 0), its transfer starts after its first token plus
    that wait, and ``kv_hold`` counts the hand-offs and the waiting ones, with the mean over all hand-offs
    and the longest wait equal to the column's; each pool's peak is one request's blocks (94 held on the
    prefill instance, 98 in use on the decode instance after growth)."""
    res = kvwire.simulate(TIGHT)
    df = res.requests
    waits = df["kv_hold_wait_s"]
    assert waits[0] == 0.0
    assert (waits[1:] > 0).all()
    started = df["kv_start_s"] - df["first_token_s"] - df["kv_hold_wait_s"]
    assert (started >= 0).all()
    h = res.summary["kv_hold"]
    assert h["handoffs"] == 6
    assert h["waited"] == 5
    assert h["wait_s_mean"] == pytest.approx(waits.mean(), rel=1e-12)
    assert h["wait_s_max"] == waits.max()
    assert (h["prefill_held_peak_blocks"], h["decode_peak_blocks"]) == (94, 98)
    assert res.summary["instances"]["prefill-0"]["kv_capacity_tokens"] == 2592


def test_streamed_run_reports_the_same_kv_hold() -> None:
    """A run that does not keep its table computes ``kv_hold`` from the core's totals: the same section as
    the in-memory run's."""
    kept = kvwire.simulate(TIGHT)
    streamed = kvwire.simulate(TIGHT, keep_requests=False)
    assert streamed.summary["kv_hold"] == kept.summary["kv_hold"]


def test_reserved_kv_holds_nothing() -> None:
    """With reserved KV (the default) nothing is held or waited for: the column is all 0 and every figure of
    ``kv_hold`` is 0; the prefill instance still reports no KV capacity."""
    res = kvwire.simulate({**TIGHT, "kv": {"policy": "reserve"}})
    assert res.requests["kv_hold_wait_s"].to_list() == [0.0] * 6
    assert res.requests.schema["kv_hold_wait_s"] == pl.Float64
    assert set(res.summary["kv_hold"].values()) == {0}
    assert res.summary["instances"]["prefill-0"].get("kv_capacity_tokens") is None


def test_a_prompt_longer_than_the_prefill_cache_is_rejected() -> None:
    """With paged KV a prefill instance must hold a whole prompt: with the decode pool keeping fp8 (twice
    the tokens of the bf16 prefill cache), a prompt that fits the decode cache but not the prefill one is
    rejected at arrival instead of blocking the queue forever; the other requests finish."""
    sc = {
        **TIGHT,
        "decode": {"kv_format": "fp8"},
        "workload": {"trace": {"arrival_s": [0.0, 0.1], "prompt_tokens": [3000, 1000], "output_tokens": [10, 10]}},
    }
    res = kvwire.simulate(sc)
    assert res.requests["rejected"].to_list() == [True, False]
    assert res.summary["requests"]["completed"] == 1


def test_hotspot_of_a_wait_for_decode_memory_is_the_decode_pool() -> None:
    """With three prefill instances the prompts no longer queue, so ``kv_wait_s`` is the longest stage; here it
    is all waiting for room on the decode instance (``kv_hold.wait_s_mean`` equals the stage's mean), not for the
    link (busy ~1% of the time), so the hot-spot names ``decode-0`` and the report says so; reserve mode on the
    same run still gives the link for a link wait."""
    res = kvwire.simulate({**TIGHT, "prefill": {"instances": 3}})
    s = res.summary
    assert s["hotspot"]["stage"] == "kv_wait_s"
    assert s["kv_hold"]["wait_s_mean"] == pytest.approx(s["stages"]["kv_wait_s"], rel=1e-12)
    assert s["hotspot"]["resource"] == "decode-0"
    assert "on decode-0" in render(res)
    slow_link = {**TIGHT, "kv": {"policy": "reserve"}, "link": "eth-25g", "prefill": {"instances": 3}}
    slow = kvwire.simulate({**slow_link, "cost": {"mem_util": 0.9}}).summary
    assert slow["hotspot"]["stage"] == "kv_wait_s"
    assert slow["hotspot"]["resource"] == "kv-link"
