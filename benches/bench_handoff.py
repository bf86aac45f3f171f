"""Hand-off pipeline benchmarks: the 1M-request scenario of ``bench_simulate.py`` (Llama-3-8B, 1 prefill +
1 decode H100, InfiniBand NDR, default lengths, 8 req/s) with layer-wise streaming, each link model and
conditional disaggregation. Measured with ``--benchmark-enable`` at 1M requests; a normal ``pytest`` run
executes each once at 10k requests as a smoke test.

    pytest benches/bench_handoff.py --benchmark-enable --benchmark-only \
        --benchmark-json=benches/results/<date>-handoff.json
"""

from __future__ import annotations

from typing import Any

import kvwire
import pytest

CASES: dict[str, dict[str, Any]] = {
    "whole": {},
    "layer_streaming": {"handoff": {"streaming": "layer"}},
    "layer_streaming_per_slice": {"handoff": {"streaming": "layer"}, "engine": {"per_slice_streaming": True}},
    "shared_link": {"link": {"preset": "ib-ndr", "model": "shared"}},
    "host_staged": {"link": {"preset": "ib-ndr", "model": "host_staged"}},
    "conditional": {
        "router": {"disaggregate": {"policy": "conditional", "min_prompt_tokens": 1024, "max_link_wait_s": 0.05}}
    },
}


@pytest.mark.parametrize("case", list(CASES))
def test_handoff_variants_1m(benchmark: Any, case: str) -> None:
    """Rust run + zero-copy table for one hand-off variant."""
    n = 10_000 if benchmark.disabled else 1_000_000
    sc = {"workload": {"requests": n, "arrivals": {"rate_per_s": 8.0}}, **CASES[case]}
    res = benchmark.pedantic(kvwire.simulate, args=(sc,), rounds=3, iterations=1)
    benchmark.extra_info["core_wall_s"] = res.stats["wall_s"]
    benchmark.extra_info["events"] = res.stats["events"]
    assert res.summary["requests"]["completed"] == n
