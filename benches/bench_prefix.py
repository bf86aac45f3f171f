"""Prefix-caching benchmarks (pytest-benchmark): the overhead of ``prefix_cache`` on 1M synthetic requests (no
block hashes: nothing can hit, so this is the bookkeeping's cost), with whole-prompt batching and with chunked
prefill + paged KV (issue 12's ≤ 3 s target), and the Mooncake conversation trace (12,031 requests with
``hash_ids``) with caching off and on, 2 prefill + 2 decode H100s.

A normal ``pytest`` run executes each benchmark once as a smoke test. To measure: ``pytest
benches/bench_prefix.py --benchmark-enable --benchmark-only``; results with machine and date in
``benches/README.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kvwire
import polars as pl
import pytest

#: ``<repository>/../shared``: the shared traces (README "Data").
CONVERSATION = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mooncake" / "conversation_trace.jsonl"

SYNTHETIC: dict[str, dict[str, Any]] = {
    "default": {},
    "chunked_paged": {"scheduler": {"policy": "chunked"}, "kv": {"policy": "paged"}},
}


@pytest.mark.parametrize("variant", list(SYNTHETIC))
def test_1m_synthetic_with_prefix_cache(benchmark: Any, variant: str) -> None:
    """1M generated requests, prefix caching on (no hashes: every lookup misses), kept table."""
    sc = {"workload": {"requests": 1_000_000, "arrivals": {"rate_per_s": 8.0}}, "prefix_cache": {"enabled": True}}
    res = benchmark.pedantic(kvwire.simulate, args=({**sc, **SYNTHETIC[variant]},), rounds=3, iterations=1)
    benchmark.extra_info["core_wall_s"] = res.stats["wall_s"]
    assert res.summary["prefix_cache"]["cached_tokens"] == 0


@pytest.fixture(scope="module")
def conversation() -> pl.DataFrame:
    return kvwire.read_trace(CONVERSATION)


@pytest.mark.parametrize("cache", ["off", "on", "on_skip_affinity"])
def test_mooncake_conversation(benchmark: Any, conversation: pl.DataFrame, cache: str) -> None:
    """The Mooncake conversation trace at its own timestamps, 2P2D, prefix caching off / on (free KV) / on with
    the wire skip and prefix-affinity routing."""
    sc: dict[str, Any] = {"workload": {"external": True}, "prefill": {"instances": 2}, "decode": {"instances": 2}}
    if cache != "off":
        sc["prefix_cache"] = {"enabled": True}
    if cache == "on_skip_affinity":
        sc["handoff"] = {"skip_cached_prefix": True}
        sc["router"] = {"prefill": "prefix_affinity"}
    res = benchmark.pedantic(kvwire.simulate, args=(sc,), kwargs={"requests": conversation}, rounds=5, iterations=1)
    s = res.summary
    benchmark.extra_info.update(
        core_wall_s=res.stats["wall_s"],
        hit_token_ratio=s["prefix_cache"]["hit_token_ratio"],
        ttft_mean_s=s["latency"]["ttft_s"]["mean"],
        ttft_p99_s=s["latency"]["ttft_s"]["p99"],
        link_bytes_saved=s["prefix_cache"]["link_bytes_saved"],
    )
    assert s["requests"]["total"] == conversation.height
