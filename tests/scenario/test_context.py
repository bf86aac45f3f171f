"""Context length (issue 9 item 4): model presets carry their maximum context with its source; requests whose
prompt + output exceed it are counted and reported, and ``workload.over_context`` runs them ("warn"), refuses
them ("reject") or clips them ("clip"). The case of the issue: the Mooncake conversation trace (a
126,195-token prompt among others) replayed on Llama-3-8B, whose context is 8,192 tokens. Expected counts are
recomputed from the JSONL file with ``json``, not taken from kvwire's reader."""

from __future__ import annotations

import json
from typing import Any

import kvwire
import numpy as np
import polars as pl
import pytest
from kvwire.results.report import render
from shared_paths import DATA

MOONCAKE = DATA / "mooncake" / "conversation_trace.jsonl"

#: config.json max_position_embeddings of each preset's source checkpoint.
CONTEXT = {
    "llama3-8b": 8192,
    "llama3-70b": 8192,
    "mistral-7b": 32768,
    "yi-34b": 4096,
    "opt-13b": 2048,
    "opt-66b": 2048,
    "mixtral-8x7b": 32768,
    "deepseek-v3": 163_840,
    "llama3.2-1b": 131_072,
    "llama3.1-8b": 131_072,
    "llama3.1-70b": 131_072,
    "llama3.1-405b": 131_072,
    "qwen3-32b": 40_960,
    "qwen3-235b-a22b": 40_960,
    "deepseek-r1": 163_840,
    "kimi-k2": 131_072,
    "gpt-oss-120b": 131_072,
    "llama2-70b": 4096,
    "bloom-176b": 2048,
}


def mooncake_rows() -> list[tuple[int, int]]:
    with open(MOONCAKE, encoding="utf-8") as f:
        return [(r["input_length"], r["output_length"]) for r in map(json.loads, f) if r]


def test_presets_carry_their_context_and_its_source() -> None:
    """Every model preset has ``max_context_tokens`` (its checkpoint's ``max_position_embeddings``) and its
    source says where the figure comes from."""
    models = kvwire.catalog()["models"]
    assert set(models) == set(CONTEXT)
    for key, ctx in CONTEXT.items():
        assert models[key]["max_context_tokens"] == ctx, key
        assert "max_position_embeddings" in models[key]["source"], key


def replay(mode: str | None) -> kvwire.SimResult:
    sc: dict[str, Any] = {"workload": {} if mode is None else {"over_context": mode}}
    return kvwire.simulate(sc, requests=kvwire.read_mooncake_jsonl(MOONCAKE))


def test_mooncake_replay_counts_and_reports_long_requests() -> None:
    """Default ``"warn"``: every request runs as given (as before: the same table), and the summary counts
    and the report names the ones beyond 8,192 tokens (5,570 of 12,031, the longest prompt 126,195)."""
    rows = mooncake_rows()
    over = [p + o > 8192 for p, o in rows]
    assert max(p for p, _ in rows) == 126_195
    res = replay(None)
    assert res.summary["requests"]["over_context"] == sum(over) == 5570
    assert res.requests["over_context"].to_list() == over
    assert res.summary["requests"]["rejected"] == 0
    assert res.requests.equals(replay("warn").requests)
    line = next(ln for ln in render(res).splitlines() if ln.startswith("context:"))
    assert line == (
        "context: 5,570 requests exceed Llama-3-8B's 8,192-token context (prompt + output); run as given "
        '(workload.over_context "warn"); a longer-context model fits more of them: deepseek-v3 (163,840 tokens), '
        "deepseek-r1 (163,840 tokens), llama3.2-1b (131,072 tokens)"
    )


def test_mooncake_replay_rejects_long_requests() -> None:
    """``"reject"``: exactly the requests beyond the context are refused at arrival (no stage at all)."""
    over = np.array([p + o > 8192 for p, o in mooncake_rows()])
    res = replay("reject")
    assert res.requests["rejected"].to_numpy().tolist() == over.tolist()
    assert res.summary["requests"]["rejected"] == int(over.sum())
    assert res.summary["requests"]["completed"] == len(over) - int(over.sum())
    assert res.requests.filter(pl.col("rejected"))["prefill_start_s"].null_count() == int(over.sum())
    assert "rejected (workload.over_context" in render(res)


def test_mooncake_replay_clips_long_requests() -> None:
    """``"clip"``: the prompt is cut to 8,191 tokens (room for one output token), then the output to what
    is left; requests that fit are unchanged; nothing is rejected and every request fits the context."""
    rows = mooncake_rows()
    res = replay("clip")
    df = res.requests
    want_p = [min(p, 8191) for p, _ in rows]
    want_o = [min(o, 8192 - p) for p, (_, o) in zip(want_p, rows, strict=True)]
    assert df["prompt_tokens"].to_list() == want_p
    assert df["output_tokens"].to_list() == want_o
    assert ((df["prompt_tokens"] + df["output_tokens"]) <= 8192).all()
    assert res.summary["requests"]["rejected"] == 0
    assert res.summary["requests"]["over_context"] == 5570
    # The ceilings are computed on the clipped requests.
    assert res.summary["load"]["prompt_tokens_mean"] == pytest.approx(float(np.mean(want_p)))


def test_context_rules_need_a_context() -> None:
    """An inline model without ``max_context_tokens`` is not checked ("warn" counts nothing); asking it to
    reject or clip is an error naming the field. A context below 2 tokens is refused."""
    model = {"name": "m", "layers": 2, "d_model": 256, "heads": 4, "kv_heads": 2, "head_dim": 64, "d_ff": 512,
             "vocab": 1000}  # fmt: skip
    table = {"arrival_s": [0.0], "prompt_tokens": [100_000], "output_tokens": [5]}
    assert kvwire.simulate({"model": model}, requests=table).summary["requests"]["over_context"] == 0
    for mode in ("reject", "clip"):
        with pytest.raises(kvwire.ScenarioError) as e:
            kvwire.validate({"model": model, "workload": {"over_context": mode}})
        assert e.value.path == "workload.over_context"
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.validate({"model": {"preset": "llama3-8b", "max_context_tokens": 1}})
    assert e.value.path == "model.max_context_tokens"
    # An override of a preset's context is used (and echoed).
    res = kvwire.simulate({"model": {"preset": "llama3-8b", "max_context_tokens": 50_000}}, requests=table)
    assert res.summary["requests"]["over_context"] == 1
    assert res.scenario["model"]["max_context_tokens"] == 50_000
