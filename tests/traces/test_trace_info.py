"""``kvwire.trace_info`` and ``kvwire trace-info``: counts, span, rate over time, length percentiles,
burstiness and Mooncake prefix reuse, each checked against an independent computation (Python's
``statistics``, numpy, a set-based loop over the real Mooncake file), plus the PNG plot.
"""

from __future__ import annotations

import builtins
import itertools
import json
import statistics
from pathlib import Path
from typing import Any

import kvwire
import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from kvwire.cli import main
from kvwire.traces.stats import default_bin_s, prefix_reuse
from shared_paths import DATA

CONV = DATA / "azure-llm-2023" / "conv.csv"
MC_CONV = DATA / "mooncake" / "conversation_trace.jsonl"


def test_small_table_figures() -> None:
    """A hand-made table: count, span, mean rate (n - 1)/span, inter-arrival CV (population standard deviation
    over mean, Python's statistics), length percentiles (numpy's linear interpolation), zero outputs and
    per-bin rates counted by hand."""
    arrivals = [0.0, 0.5, 0.6, 2.0, 2.1, 2.2, 7.9]
    prompts = [10, 200, 35, 4000, 8, 77, 512]
    outputs = [0, 5, 1, 0, 300, 2, 9]
    info = kvwire.trace_info(pl.DataFrame({"arrival_s": arrivals, "prompt_tokens": prompts, "output_tokens": outputs}),
                             bin_s=2.0)  # fmt: skip
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert info["requests"] == 7 and info["span_s"] == 7.9
    assert info["mean_rate_per_s"] == pytest.approx(6 / 7.9, rel=1e-15)
    assert info["interarrival"]["cv"] == pytest.approx(statistics.pstdev(gaps) / statistics.mean(gaps), rel=1e-12)
    assert info["interarrival"]["max_s"] == pytest.approx(5.7)
    for key, values in (("prompt_tokens", prompts), ("output_tokens", outputs)):
        s = info[key]
        assert s["mean"] == pytest.approx(statistics.mean(values))
        assert (s["min"], s["max"], s["total"]) == (min(values), max(values), sum(values))
        assert [s["p50"], s["p90"], s["p99"]] == pytest.approx(np.quantile(values, [0.5, 0.9, 0.99]).tolist())
    assert info["zero_output"] == 2
    # bins [0,2): 3 requests, [2,4): 3, [4,6): 0, [6,8): 1
    assert info["rate"]["series_req_per_s"] == [1.5, 1.5, 0.0, 0.5]
    assert info["rate"]["peak_req_per_s"] == 1.5 and info["rate"]["min_req_per_s"] == 0.0
    assert info["prefix"] is None
    json.dumps(info, allow_nan=False)


def test_burstiness_of_known_processes() -> None:
    """Evenly spaced arrivals have CV 0; 50,000 seeded Poisson arrivals have CV within 0.02 of 1."""
    even = pl.DataFrame({"arrival_s": [0.25 * i for i in range(100)], "prompt_tokens": [1] * 100,
                         "output_tokens": [1] * 100})  # fmt: skip
    assert kvwire.trace_info(even)["interarrival"]["cv"] == 0.0
    gaps = np.random.default_rng(3).exponential(0.1, 50_000)
    poisson = pl.DataFrame({"arrival_s": np.cumsum(gaps), "prompt_tokens": np.ones(50_000, dtype=np.int64),
                            "output_tokens": np.ones(50_000, dtype=np.int64)})  # fmt: skip
    assert abs(kvwire.trace_info(poisson)["interarrival"]["cv"] - 1.0) < 0.02


def reuse_by_hand(lists: list[list[int]]) -> tuple[int, int, int]:
    """(blocks, distinct, blocks whose id appeared in an earlier request), by a plain loop."""
    seen: set[int] = set()
    total = reused = 0
    for ids in lists:
        for i in ids:
            total += 1
            reused += i in seen
        seen.update(ids)
    return total, len(seen), reused


def test_prefix_reuse_on_the_real_mooncake_trace() -> None:
    """The Mooncake conversation trace's block count (= Σ ceil(input_length / 512), data/README.md), distinct
    blocks and reuse ratio equal a plain loop over the JSON lines."""
    records = [json.loads(line) for line in MC_CONV.read_text().splitlines() if line.strip()]
    total, distinct, reused = reuse_by_hand([r["hash_ids"] for r in records])
    assert total == sum(-(-r["input_length"] // 512) for r in records)
    info = kvwire.trace_info(MC_CONV)
    assert info["format"] == "mooncake"
    p = info["prefix"]
    assert (p["blocks"], p["unique_blocks"], p["reused_blocks"]) == (total, distinct, reused)
    assert p["reuse_ratio"] == reused / total
    assert p["block_tokens"] == 512


def test_prefix_reuse_counts_earlier_requests_only() -> None:
    """A block repeated inside one request is not "seen before"; empty lists and nulls carry no blocks."""
    ids = [[1, 2, 2], [], None, [2, 3], [1]]
    p = prefix_reuse(pl.Series(ids, dtype=pl.List(pl.Int64)))
    assert (p["blocks"], p["unique_blocks"], p["reused_blocks"]) == (6, 3, 2)
    assert prefix_reuse(pl.Series([[], []], dtype=pl.List(pl.Int64)))["reuse_ratio"] is None


def test_real_azure_figures_and_options() -> None:
    """On the real conversation trace: data/README.md's row count and span, every request in one bin; reader
    options apply (a 10-minute window has read_trace's count and, at time scale 0.5, spans ≤ 5 minutes)."""
    info = kvwire.trace_info(CONV)
    assert info["requests"] == 19366 and abs(info["span_s"] - (58 * 60 + 21.72)) < 0.01
    assert info["layout"] == "azure"
    assert info["rate"]["bin_s"] == default_bin_s(info["span_s"]) == 30.0
    assert sum(info["rate"]["series_req_per_s"]) * 30.0 == pytest.approx(19366)
    window = kvwire.trace_info(CONV, start_s=600, duration_s=600, time_scale=0.5)
    assert window["requests"] == kvwire.read_trace(CONV, start_s=600, duration_s=600).height
    assert window["span_s"] <= 300.0


def test_default_bins() -> None:
    """The default bin is the smallest round width giving at most 200 bins."""
    assert [default_bin_s(s) for s in (0.0, 150.0, 250.0, 3600.0, 7 * 86400.0)] == [1.0, 1.0, 2.0, 30.0, 3600.0]


# --------------------------------------------------------------------------------------------------
# kvwire trace-info


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def test_cli_text_and_json() -> None:
    """``kvwire trace-info`` prints the count, span, burstiness and length table; ``--json`` prints the dict
    trace_info returns."""
    r = cli("trace-info", str(CONV))
    assert r.exit_code == 0, r.output
    assert "requests: 19,366" in r.stdout and "burstiness (CV)" in r.stdout and "prompt" in r.stdout
    r = cli("trace-info", str(MC_CONV), "--json", "--bin-s", "60")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == json.loads(json.dumps(kvwire.trace_info(MC_CONV, bin_s=60)))
    assert "reuse ratio" in cli("trace-info", str(MC_CONV)).stdout


def test_cli_plot_writes_a_png(tmp_path: Path) -> None:
    """``-o FILE.png`` writes a PNG image of the rate over time (matplotlib, Agg backend)."""
    out = tmp_path / "rate.png"
    r = cli("trace-info", str(CONV), "-o", str(out), "--start-s", "60", "--duration-s", "1200")
    assert r.exit_code == 0, r.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5_000


def test_cli_plot_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without matplotlib the plot fails with one line saying what to install, no traceback."""
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("matplotlib"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    r = cli("trace-info", str(CONV), "-o", str(tmp_path / "x.png"))
    assert r.exit_code != 0 and "kvwire[plot]" in r.output and "Traceback" not in r.output


def test_cli_errors(tmp_path: Path) -> None:
    """A malformed file or a bad option fails cleanly naming the line or the option."""
    p = tmp_path / "t.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": 1, "input_length": -2}\n')
    r = cli("trace-info", str(p))
    assert r.exit_code != 0 and "line 2" in r.output and "Traceback" not in r.output
    r = cli("trace-info", str(CONV), "--sample", "0")
    assert r.exit_code != 0 and "sample" in r.output
