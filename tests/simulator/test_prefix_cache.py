"""Prefix caching (issue 12 item 4): the per-instance LRU of prompt blocks matched by the requests' block hashes
(Mooncake's ``hash_ids``), the prefill it skips, the hand-off bytes it saves and the cache-aware router.

Oracles: the set of block ids seen earlier, computed here in plain Python from the trace's hash ids (prefix
semantics, the last prompt token recomputed); chunked prefill's own costing of "a chunk of c tokens after p
cached" (a different code path of the engine: the scheduler's chunks); the closed-form hand-off of
``kvwire.handoff``; Little's law."""

from __future__ import annotations

import math
from typing import Any

import kvwire
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kvwire import _core
from kvwire.errors import ScenarioError, TraceError
from shared_paths import DATA

CONVERSATION = DATA / "mooncake" / "conversation_trace.jsonl"
BLOCK = 512
#: The first rows of the conversation trace (enough to reuse prefixes, fast enough for the suite).
ROWS = 3000


@pytest.fixture(scope="module")
def conversation() -> pl.DataFrame:
    return kvwire.read_trace(CONVERSATION).head(ROWS)


def table(rows: list[tuple[float, int, int, list[int]]]) -> pl.DataFrame:
    """A request table with block hashes: (arrival_s, prompt_tokens, output_tokens, hash_ids) per row."""
    return pl.DataFrame(
        {
            "arrival_s": [r[0] for r in rows],
            "prompt_tokens": [r[1] for r in rows],
            "output_tokens": [r[2] for r in rows],
            "hash_ids": [r[3] for r in rows],
        },
        schema_overrides={"hash_ids": pl.List(pl.Int64)},
    )


def run(scenario: dict[str, Any], requests: pl.DataFrame, **kw: Any) -> kvwire.SimResult:
    return kvwire.simulate({"workload": {"external": True}, **scenario}, requests=requests, **kw)


def oracle_cached_tokens(df: pl.DataFrame, skip: list[bool]) -> list[int]:
    """Per request, in arrival order: the leading blocks whose id some earlier (prefilled) request carried,
    stopping at the first unseen one, as tokens, less the last prompt token (always recomputed):
    min(k*512, prompt - 1). Requests marked in ``skip`` (rejected: never prefilled) neither hit nor insert."""
    seen: set[int] = set()
    out = []
    for prompt, ids, s in zip(df["prompt_tokens"].to_list(), df["hash_ids"].to_list(), skip, strict=True):
        if s:
            out.append(0)
            continue
        ids = ids[: math.ceil(prompt / BLOCK)]
        k = 0
        while k < len(ids) and ids[k] in seen:
            k += 1
        out.append(min(k * BLOCK, prompt - 1))
        seen.update(ids)
    return out


def test_infinite_cache_hits_exactly_the_blocks_seen_before(conversation: pl.DataFrame) -> None:
    """With an unbounded cache on one prefill instance, every request's ``cached_tokens`` equals the oracle's
    (its leading blocks seen in any earlier request, prefix semantics, last token recomputed), so the summary's
    hit ratio is exactly Σ oracle / Σ prompt tokens; the block-level fraction of blocks seen before (as a prefix)
    is reported for the record. Conservation and Little's law hold with caching on."""
    res = run({"prefix_cache": {"enabled": True, "capacity_tokens": 10**15}}, conversation)
    req = res.requests
    rejected = req["rejected"].to_list()
    assert sum(rejected) < ROWS // 100  # the oracle skips them; they must stay a handful
    want = oracle_cached_tokens(conversation, rejected)
    assert req["cached_tokens"].to_list() == want
    served_prompt = int(req.filter(~pl.col("rejected"))["prompt_tokens"].sum())
    pc = res.summary["prefix_cache"]
    assert pc["cached_tokens"] == sum(want)
    assert pc["prompt_tokens"] == served_prompt
    assert pc["hit_token_ratio"] == sum(want) / served_prompt
    assert pc["hit_requests"] == sum(1 for w in want if w > 0)
    assert 0.1 < pc["hit_token_ratio"] < 0.9  # the trace does reuse prefixes (and not everything)
    s = res.summary
    assert s["requests"]["completed"] + s["requests"]["rejected"] == s["requests"]["total"] == ROWS
    assert s["little"]["l"] == pytest.approx(s["little"]["lambda_w"], rel=1e-6)


def test_zero_size_cache_equals_no_caching(conversation: pl.DataFrame) -> None:
    """``capacity_tokens = 0`` holds nothing, so every column of the per-request table and every summary figure
    (but the wall time and the new ``prefix_cache`` totals, whose hit figures are 0) equals a run without
    prefix caching, bit for bit."""
    base: dict[str, Any] = {"prefill": {"instances": 2}, "decode": {"instances": 2}}
    off = run(base, conversation)
    zero = run({**base, "prefix_cache": {"enabled": True, "capacity_tokens": 0}}, conversation)
    assert zero.requests.equals(off.requests)
    a, b = dict(off.summary), dict(zero.summary)
    for s in (a, b):
        s["run"] = {k: v for k, v in s["run"].items() if k != "wall_s"}
    pa, pb = a.pop("prefix_cache"), b.pop("prefix_cache")
    assert a == b
    assert pb["cached_tokens"] == pb["hit_requests"] == 0 and pb["hit_token_ratio"] == 0.0
    assert pa == {
        "hit_token_ratio": 0.0,
        "cached_tokens": 0,
        "prompt_tokens": 0,
        "hit_requests": 0,
        "link_tokens_skipped": 0,
        "link_bytes_saved": 0.0,
    }


def test_caching_off_ignores_the_hash_column(conversation: pl.DataFrame) -> None:
    """With prefix caching off (the default) a table's ``hash_ids`` column changes nothing: the run equals the
    run of the three request columns alone, and ``cached_tokens`` is 0 everywhere."""
    with_hashes = run({}, conversation.head(500))
    without = run({}, conversation.head(500).drop("hash_ids"))
    assert with_hashes.requests.equals(without.requests)
    assert int(with_hashes.requests["cached_tokens"].max() or 0) == 0


def test_chunked_with_an_ample_budget_equals_whole_prompt_batching(conversation: pl.DataFrame) -> None:
    """With prefix caching on, chunked prefill whose token budget never binds (and no decode rows: disaggregated
    prefill instances) takes the same prompts per step as whole-prompt batching whose token limit never binds,
    matching and inserting each prompt's blocks in the same order: identical per-request tables (cached tokens
    included) and summaries (but ``load``: the analytic ceilings are computed per scheduler policy)."""
    big = 10**8
    base: dict[str, Any] = {"prefix_cache": {"enabled": True}, "prefill": {"instances": 2}, "decode": {"instances": 2}}
    whole = run({**base, "scheduler": {"max_prefill_tokens": big}}, conversation)
    chunked = run({**base, "scheduler": {"policy": "chunked", "max_num_batched_tokens": big}}, conversation)
    assert chunked.requests.equals(whole.requests, null_equal=True)
    assert int(chunked.requests["cached_tokens"].sum()) > 0
    a, b = dict(whole.summary), dict(chunked.summary)
    for s in (a, b):
        s["run"] = {k: v for k, v in s["run"].items() if k != "wall_s"}
        s.pop("load")
    assert a == b


def test_a_hit_costs_the_prefill_of_the_uncached_chunk() -> None:
    """One request on an idle prefill instance whose first block (512 tokens) is cached takes exactly as long to
    prefill as the second step of chunked prefill over the same 1024-token prompt in 512-token chunks (a chunk
    of 512 tokens after 512 cached ones, no decode rows: the chunk formula), and less than the uncached
    prefill."""
    reqs = table([(0.0, 1024, 1, [7, 100]), (100.0, 1024, 1, [7, 200])])
    res = run({"prefix_cache": {"enabled": True}}, reqs)
    r = res.requests.row(1, named=True)
    assert r["cached_tokens"] == 512
    cached_prefill_s = r["first_token_s"] - r["prefill_start_s"]
    uncached = res.requests.row(0, named=True)
    uncached_prefill_s = uncached["first_token_s"] - uncached["prefill_start_s"]

    chunked = run(
        {"scheduler": {"policy": "chunked", "max_num_batched_tokens": 512}, "engine": {"timeline": True}},
        reqs.head(1),
    )
    steps = chunked.timeline()
    assert isinstance(steps, dict)
    spans = sorted(
        (e["ts"], e["dur"]) for e in steps["traceEvents"] if e.get("ph") == "X" and e.get("name") == "prefill"
    )
    assert len(spans) == 2
    second_step_s = spans[1][1] / 1e6
    assert cached_prefill_s == pytest.approx(second_step_s, rel=1e-9, abs=2e-12)
    # The whole prompt uncached is both chunks' work (and more than the cached chunk's).
    assert uncached_prefill_s > cached_prefill_s


def test_skip_cached_prefix_saves_the_cached_tokens_bytes() -> None:
    """With ``handoff.skip_cached_prefix`` the decode instance's own cache (filled by the first hand-off that
    landed) leaves the shared 1024-token prefix off the wire: ``link_bytes_saved`` = 1024 x bytes per token of
    ``kvwire.handoff``, and the second transfer takes the closed-form time of a 512-token hand-off (idle link)
    where without the skip it takes that of 1536 tokens."""
    reqs = table([(0.0, 1536, 4, [1, 2, 3]), (100.0, 1536, 4, [1, 2, 4])])
    scen: dict[str, Any] = {"link": "eth-25g", "prefix_cache": {"enabled": True}}
    plain = run(scen, reqs)
    skip = run({**scen, "handoff": {"skip_cached_prefix": True}}, reqs)
    full = kvwire.handoff("llama3-8b", 1536, link="eth-25g")
    part = kvwire.handoff("llama3-8b", 512, link="eth-25g")
    per_token = full["bytes_per_token"]
    assert full["wire_bytes"] == pytest.approx(1536 * per_token, rel=1e-12)
    pc = skip.summary["prefix_cache"]
    assert pc["link_tokens_skipped"] == 1024
    assert pc["link_bytes_saved"] == pytest.approx(1024 * per_token, rel=1e-12)
    assert plain.summary["prefix_cache"]["link_bytes_saved"] == 0.0

    def transfer_s(res: kvwire.SimResult) -> float:
        r = res.requests.row(1, named=True)
        return float(r["kv_ready_s"] - r["kv_start_s"])

    assert transfer_s(plain) == pytest.approx(full["transfer_s"], rel=1e-9)
    assert transfer_s(skip) == pytest.approx(part["transfer_s"], rel=1e-9)
    # The first hand-off found an empty cache: sent whole in both runs.
    r0p, r0s = plain.requests.row(0, named=True), skip.requests.row(0, named=True)
    assert r0s["kv_ready_s"] - r0s["kv_start_s"] == pytest.approx(r0p["kv_ready_s"] - r0p["kv_start_s"], rel=1e-12)
    wire = {h["resource"]: h["wire_gb"] for h in skip.summary["hops"]}["kv-link"]
    wire_plain = {h["resource"]: h["wire_gb"] for h in plain.summary["hops"]}["kv-link"]
    assert (wire_plain - wire) * 1e9 == pytest.approx(1024 * per_token, rel=1e-9)


def _affinity_trace() -> pl.DataFrame:
    # A0 warms instance 0's cache with blocks 1, 2, 3. At t = 10: X starts on instance 0, Y waits in its queue
    # (1536 tokens), then A1 (prefix 1, 2) arrives: instance 0 holds 1024 of its tokens, instance 1 is idle.
    return table(
        [
            (0.0, 1536, 1, [1, 2, 3]),
            (10.0, 1536, 1, [11, 12, 13]),
            (10.0, 1536, 1, [21, 22, 23]),
            (10.0, 1536, 1, [1, 2, 4]),
        ]
    )


def test_prefix_affinity_follows_the_prefix_and_falls_back_under_load() -> None:
    """``router.prefill = "prefix_affinity"`` sends a request to the instance holding its prefix even though
    another is less loaded (least-queued routing sends it to the idle one, which holds nothing); when the
    holder's queued tokens exceed the least-queued instance's by more than ``scheduler.max_prefill_tokens``, it
    falls back to the least-queued instance."""
    reqs = _affinity_trace()
    base: dict[str, Any] = {"prefill": {"instances": 2}, "prefix_cache": {"enabled": True}}
    least = run(base, reqs)
    affinity = run({**base, "router": {"prefill": "prefix_affinity"}}, reqs)
    loaded = run({**base, "router": {"prefill": "prefix_affinity"}, "scheduler": {"max_prefill_tokens": 1024}}, reqs)
    assert least.requests["prefill_instance"].to_list() == [0, 0, 0, 1]
    assert least.requests["cached_tokens"].to_list()[3] == 0
    assert affinity.requests["prefill_instance"].to_list() == [0, 0, 0, 0]
    assert affinity.requests["cached_tokens"].to_list()[3] == 1024
    assert loaded.requests["prefill_instance"].to_list()[3] == 1
    assert loaded.requests["cached_tokens"].to_list()[3] == 0


@pytest.mark.parametrize(
    ("scenario", "path"),
    [
        ({"prefix_cache": {"enabled": True, "capacity_tokens": -1}}, "prefix_cache.capacity_tokens"),
        ({"prefix_cache": {"enabled": True, "capacity_tokens": 1.5}}, "prefix_cache.capacity_tokens"),
        ({"prefix_cache": {"enabled": "yes"}}, "prefix_cache.enabled"),
        ({"handoff": {"skip_cached_prefix": True}}, "handoff.skip_cached_prefix"),
        (
            {"mode": "colocated", "prefix_cache": {"enabled": True}, "handoff": {"skip_cached_prefix": True}},
            "handoff.skip_cached_prefix",
        ),
        ({"router": {"prefill": "prefix_affinity"}}, "router.prefill"),
    ],
)
def test_bad_options_name_the_field(scenario: dict[str, Any], path: str) -> None:
    """Bad prefix-caching options raise ScenarioError naming the field."""
    with pytest.raises(ScenarioError) as e:
        kvwire.simulate({"workload": {"requests": 5}, **scenario})
    assert e.value.path.startswith(path), e.value.path


def test_bad_hash_columns_name_the_column_and_row() -> None:
    """A negative or null block hash, a column that is not a list of integers, and a CSR pair that does not
    match the table are refused with the column and row named (TraceError, a ScenarioError)."""
    on: dict[str, Any] = {"prefix_cache": {"enabled": True}}
    good = table([(0.0, 600, 1, [1, 2]), (1.0, 600, 1, [1, 3])])
    with pytest.raises(TraceError) as e:
        run(on, good.with_columns(pl.Series("hash_ids", [[1, 2], [1, -3]])))
    assert e.value.path == "requests.hash_ids[1]"
    with pytest.raises(TraceError) as e:
        run(on, good.with_columns(pl.Series("hash_ids", [[1, None], [1, 3]])))
    assert e.value.path == "requests.hash_ids[0]"
    with pytest.raises(TraceError) as e:
        run(on, good.with_columns(pl.Series("hash_ids", ["a", "b"])))
    assert e.value.path == "requests.hash_ids"
    a = np.array([0.0, 1.0])
    p = np.array([600, 600], dtype=np.int64)
    o = np.array([1, 1], dtype=np.int64)
    text = '{"workload": {"external": true}, "prefix_cache": {"enabled": true}}'
    for offsets, ids, where in [
        ([0, 2], [1, 2], "requests.hash_offsets"),
        ([0, 2, 1], [1, 2], "requests.hash_offsets[2]"),
        ([0, 1, 3], [1, 2], "requests.hash_offsets[2]"),
    ]:
        with pytest.raises(TraceError) as e:
            _core.simulate(
                text, a, p, o, hash_offsets=np.array(offsets, dtype=np.int64), hash_ids=np.array(ids, dtype=np.int64)
            )
        assert e.value.path == where


def test_a_streamed_run_refuses_hashes_it_cannot_carry(conversation: pl.DataFrame) -> None:
    """``keep_requests=False`` streams the table in chunks, which carry no block hashes yet: with prefix caching
    on that is refused (naming ``prefix_cache.enabled``) rather than silently hitting nothing."""
    with pytest.raises(ScenarioError) as e:
        run({"prefix_cache": {"enabled": True}}, conversation.head(10), keep_requests=False)
    assert e.value.path == "prefix_cache.enabled"


def test_trace_file_scenario_uses_the_hashes(tmp_path: Any) -> None:
    """A ``workload.trace.file`` scenario (Mooncake JSONL) with prefix caching reads the file's ``hash_ids``:
    it equals the same rows passed as a table."""
    lines = CONVERSATION.read_text().splitlines()[:300]
    f = tmp_path / "head.jsonl"
    f.write_text("\n".join(lines) + "\n")
    on: dict[str, Any] = {"prefix_cache": {"enabled": True, "capacity_tokens": 10**12}}
    from_file = kvwire.simulate({"workload": {"trace": {"file": str(f)}}, **on})
    from_table = run(on, kvwire.read_trace(f))
    assert from_file.requests["cached_tokens"].to_list() == from_table.requests["cached_tokens"].to_list()
    assert from_file.summary["prefix_cache"]["cached_tokens"] > 0


def test_sessions_turns_hit_the_previous_turns_full_blocks() -> None:
    """A ``workload.sessions`` run carries its turns' block hashes into the cache: on one prefill instance with an
    unbounded cache, every later turn (k ≥ 2) finds exactly the previous turn's full 512-token blocks (its
    partial last block has an id of its own turn), capped at prompt - 1."""
    sc = {
        "workload": {
            "seed": 3,
            "arrivals": {"rate_per_s": 0.5},
            "prompt_tokens": {"dist": "uniform", "min": 100, "max": 900},
            "output_tokens": {"dist": "uniform", "min": 2, "max": 400},
            "sessions": {"count": 20, "turns": 4, "think_s": 1.0},
        },
        "prefix_cache": {"enabled": True, "capacity_tokens": 10**12},
    }
    req = kvwire.simulate(sc).requests.sort("session", "turn")
    assert not req["rejected"].any()
    prev: dict[int, int] = {}
    checked = 0
    for s, k, p, c in zip(req["session"], req["turn"], req["prompt_tokens"], req["cached_tokens"], strict=True):
        if k >= 2:
            assert c == min(BLOCK * (prev[s] // BLOCK), p - 1), (s, k)
            checked += c > 0
        prev[s] = p
    assert checked > 10


# KV tiers (issue 28 item 2): the prefix cache spills to host memory and SSD below GPU memory.

HOST_PCIE5 = {"bytes_per_s": 64e9, "latency_s": 5e-6}  # the pcie5 link preset: 64 GB/s, 5 µs
SSD = {"kind": "ssd", "capacity_gb": 10**6, "gb_per_s": 7.0, "latency_us": 80.0}


def kv_bytes_per_token(res: kvwire.SimResult) -> float:
    """K and V of every layer of one token, from the echoed model: 2 x layers x kv_heads x head_dim x bytes."""
    m = res.scenario["model"]
    return 2.0 * m["layers"] * m["kv_heads"] * m["head_dim"] * m["kv_bytes_per_value"]


def test_tiers_that_never_receive_a_block_change_nothing(conversation: pl.DataFrame) -> None:
    """With a GPU cache that never evicts, a host tier receives nothing and loads nothing: the per-request table
    and every summary figure but the new ``kv_tiers`` equal the run without tiers, bit for bit."""
    base: dict[str, Any] = {"prefix_cache": {"enabled": True, "capacity_tokens": 10**15}}
    without = run(base, conversation)
    tiers = run({**base, "kv_tiers": [{"kind": "host", "capacity_gb": 100}]}, conversation)
    assert tiers.requests.equals(without.requests, null_equal=True)
    a, b = dict(without.summary), dict(tiers.summary)
    for s in (a, b):
        s["run"] = {k: v for k, v in s["run"].items() if k != "wall_s"}
    (t,) = b.pop("kv_tiers")
    assert a == b
    assert "kv_tiers" not in without.summary
    assert (t["hit_tokens"], t["written_bytes"], t["load_s"], t["peak_bytes"]) == (0, 0.0, 0.0, 0.0)
    assert t["kind"] == "host" and t["capacity_bytes"] == 100e9


def test_an_unbounded_host_tier_hits_every_block_seen_before(conversation: pl.DataFrame) -> None:
    """A GPU cache that holds nothing (``capacity_tokens = 0``) spills every block to an unbounded host tier:
    every request's ``cached_tokens`` equals the oracle of blocks seen before (as with an unbounded GPU cache),
    all of them loaded from the host tier: its hit tokens are the run's cached tokens, its bytes read those
    tokens x the model's KV bytes per token, its requests those with a hit, and its load time one load per
    request of latency + bytes / 64 GB/s (pcie5)."""
    res = run(
        {"prefix_cache": {"enabled": True, "capacity_tokens": 0}, "kv_tiers": [{"kind": "host", "capacity_gb": 10**6}]},
        conversation,
    )
    req = res.requests
    rejected = req["rejected"].to_list()
    assert sum(rejected) < ROWS // 100
    want = oracle_cached_tokens(conversation, rejected)
    assert req["cached_tokens"].to_list() == want
    (t,) = res.summary["kv_tiers"]
    hits = [w for w in want if w > 0]
    assert t["hit_tokens"] == sum(want) == res.summary["prefix_cache"]["cached_tokens"] > 0
    assert t["hit_requests"] == len(hits)
    kvb = kv_bytes_per_token(res)
    assert t["read_bytes"] == pytest.approx(sum(want) * kvb, rel=1e-12)
    load_s = sum(HOST_PCIE5["latency_s"] + w * kvb / HOST_PCIE5["bytes_per_s"] for w in hits)
    assert t["load_s"] == pytest.approx(load_s, rel=1e-9)
    assert 0 < t["peak_bytes"] <= t["capacity_bytes"]


@pytest.mark.parametrize(
    ("tiers", "cost"),
    [
        ([{"kind": "host", "capacity_gb": 100}], HOST_PCIE5),
        (
            [
                {
                    "kind": "host",
                    "capacity_gb": 100,
                    "link": {"preset": "pcie4", "bandwidth_gb_per_s": 10.0, "latency_us": 50.0},
                }
            ],
            {"bytes_per_s": 10e9, "latency_s": 50e-6},
        ),
        # A host tier of no capacity passes every block on to the SSD, which serves the hit.
        ([{"kind": "host", "capacity_gb": 0}, SSD], {"bytes_per_s": 7e9, "latency_s": 80e-6}),
    ],
)
def test_a_tier_hit_adds_its_load_to_the_prefill(tiers: list[dict[str, Any]], cost: dict[str, float]) -> None:
    """Two requests sharing their first block, far apart on an idle cluster: the second's prefill with the block
    loaded from a tier takes exactly as long as with the block in GPU memory plus one load (latency + 512 tokens
    x KV bytes per token / the tier's rate), from the tier that holds it."""
    reqs = table([(0.0, 1024, 2, [7, 100]), (100.0, 1024, 2, [7, 200])])
    gpu = run({"prefix_cache": {"enabled": True, "capacity_tokens": 10**9}}, reqs)
    tier = run({"prefix_cache": {"enabled": True, "capacity_tokens": 0}, "kv_tiers": tiers}, reqs)

    def prefill_s(res: kvwire.SimResult) -> float:
        r = res.requests.row(1, named=True)
        assert r["cached_tokens"] == BLOCK
        return float(r["first_token_s"] - r["prefill_start_s"])

    load_s = cost["latency_s"] + BLOCK * kv_bytes_per_token(gpu) / cost["bytes_per_s"]
    assert prefill_s(tier) - prefill_s(gpu) == pytest.approx(load_s, rel=1e-9)
    serving = [t for t in tier.summary["kv_tiers"] if t["hit_tokens"] > 0]
    assert len(serving) == 1 and serving[0]["kind"] == tiers[-1]["kind"]
    assert serving[0]["load_s"] == pytest.approx(load_s, rel=1e-12)
    assert serving[0]["hit_tokens"] == BLOCK and serving[0]["hit_requests"] == 1


@settings(max_examples=12)
@given(
    host_gb=st.floats(0.0, 40.0),
    ssd_gb=st.floats(0.0, 200.0),
    gpu_tokens=st.sampled_from([0, 2048, 20_000, None]),
    chunked=st.booleans(),
    start=st.integers(0, 2000),
)
def test_tier_capacities_are_never_exceeded(
    conversation: pl.DataFrame, host_gb: float, ssd_gb: float, gpu_tokens: int | None, chunked: bool, start: int
) -> None:
    """Whatever the sizes, no instance's tier ever holds more than its capacity (its peak after every spill),
    a tier of less than one block holds and serves nothing, the tiers' hits are part of the cached tokens, and
    every byte read is a hit token's KV."""
    sc: dict[str, Any] = {
        "prefix_cache": {"enabled": True, "capacity_tokens": gpu_tokens},
        "prefill": {"instances": 2},
        "kv_tiers": [{"kind": "host", "capacity_gb": host_gb}, {**SSD, "capacity_gb": ssd_gb}],
    }
    if chunked:
        sc["scheduler"] = {"policy": "chunked"}
    res = run(sc, conversation.slice(start, 400))
    kvb = kv_bytes_per_token(res)
    for t in res.summary["kv_tiers"]:
        assert t["peak_bytes"] <= t["capacity_bytes"]
        if t["capacity_bytes"] < BLOCK * kvb:
            assert t["peak_bytes"] == t["hit_tokens"] == t["written_bytes"] == 0
        assert t["read_bytes"] == pytest.approx(t["hit_tokens"] * kvb, rel=1e-12)
    assert sum(t["hit_tokens"] for t in res.summary["kv_tiers"]) <= res.summary["prefix_cache"]["cached_tokens"]


def test_tiers_are_deterministic_and_echoed_in_full(conversation: pl.DataFrame) -> None:
    """The same scenario gives the same table and tier totals; the echo writes the host tier's link out in full
    (its preset's fields), and running the echo gives the same results."""
    sc: dict[str, Any] = {
        "prefix_cache": {"enabled": True, "capacity_tokens": 4096},
        "kv_tiers": [{"kind": "host", "capacity_gb": 2}, SSD],
    }
    a, b = run(sc, conversation.head(800)), run(sc, conversation.head(800))
    assert a.requests.equals(b.requests, null_equal=True)
    assert a.summary["kv_tiers"] == b.summary["kv_tiers"]
    host, ssd = a.scenario["kv_tiers"]
    assert host["link"]["preset"] == "pcie5" and host["link"]["bandwidth_gb_per_s"] == 64.0
    assert ssd == SSD | {"capacity_gb": float(SSD["capacity_gb"])}
    again = kvwire.simulate(a.scenario, requests=conversation.head(800))
    assert again.requests.equals(a.requests, null_equal=True)
    assert again.summary["kv_tiers"] == a.summary["kv_tiers"]


@pytest.mark.parametrize(
    ("scenario", "path"),
    [
        ({"kv_tiers": [{"kind": "host", "capacity_gb": 1}]}, "kv_tiers"),
        ({"prefix_cache": {"enabled": True}, "kv_tiers": []}, "kv_tiers"),
        ({"prefix_cache": {"enabled": True}, "kv_tiers": [{"kind": "tape", "capacity_gb": 1}]}, "kv_tiers[0].kind"),
        ({"prefix_cache": {"enabled": True}, "kv_tiers": [{"kind": "host"}]}, "kv_tiers[0]"),
        (
            {"prefix_cache": {"enabled": True}, "kv_tiers": [{"kind": "host", "capacity_gb": -1}]},
            "kv_tiers[0].capacity_gb",
        ),
        (
            {"prefix_cache": {"enabled": True}, "kv_tiers": [{"kind": "host", "capacity_gb": 1, "gb_per_s": 5}]},
            "kv_tiers[0].gb_per_s",
        ),
        (
            {"prefix_cache": {"enabled": True}, "kv_tiers": [{"kind": "host", "capacity_gb": 1, "link": "pcie9"}]},
            "kv_tiers[0].link",
        ),
        (
            {"prefix_cache": {"enabled": True}, "kv_tiers": [{"kind": "ssd", "capacity_gb": 1, "latency_us": 80}]},
            "kv_tiers[0].gb_per_s",
        ),
        ({"prefix_cache": {"enabled": True}, "kv_tiers": [{**SSD, "gb_per_s": 0}]}, "kv_tiers[0].gb_per_s"),
        ({"prefix_cache": {"enabled": True}, "kv_tiers": [{**SSD, "link": "pcie5"}]}, "kv_tiers[0].link"),
        ({"prefix_cache": {"enabled": True}, "kv_tiers": [{**SSD, "size": 1}]}, "kv_tiers[0]"),
        ({"prefix_cache": {"enabled": True}, "kv_tiers": [SSD] * 5}, "kv_tiers"),
        ({"prefix_cache": {"enabled": True}, "kv_tiers": [[SSD]]}, "kv_tiers[0]"),
    ],
)
def test_bad_tiers_name_the_field(scenario: dict[str, Any], path: str) -> None:
    """Bad ``kv_tiers`` raise ScenarioError naming the field (and the tier's index)."""
    with pytest.raises(ScenarioError) as e:
        kvwire.simulate({"workload": {"requests": 5}, **scenario})
    assert e.value.path.startswith(path), (e.value.path, str(e.value))
