"""The report names the hand-off placement the core really charges (issue 12 item 1): for every combination of
where a compression runs (in transit, on the prefill GPU) and what the receiver does with it (decompresses on
the decode GPU, keeps it as its cache format, nothing modelled), the report's header says so, the echo re-runs
to the same placement, and a one-request simulation's timings show the work exactly where the words put it.

The timing oracles are the link's fields (spec/handoff.md: 25 GbE = 3.125 GB/s, 20 us latency; the in-transit
stage adds 1 us and fp8 is not transit-bound) and comparisons against the uncompressed run, not the code's
own figures."""

from __future__ import annotations

import json
from typing import Any

import kvwire
import pytest
from kvwire import _core
from kvwire.results.report import render

PROMPT = 2048
S_BYTES = PROMPT * 131_072  # Llama-3-8B bf16 KV, 128 KiB per token
B_BYTES_PER_S = 3.125e9  # eth-25g
LATENCY_S = 20e-6
TRANSIT_STAGE_S = 1e-6


def _run(handoff: dict[str, Any], decode: dict[str, Any] | None = None) -> kvwire.SimResult:
    sc: dict[str, Any] = {
        "link": "eth-25g",
        "handoff": handoff,
        "workload": {"trace": {"arrival_s": [0.5], "prompt_tokens": [PROMPT], "output_tokens": [4]}},
    }
    if decode:
        sc["decode"] = decode
    return kvwire.simulate(sc)


def _times(res: kvwire.SimResult) -> tuple[float, float, float]:
    """(prefill step, hand-off transfer, decode) seconds of the one request."""
    row = res.requests.row(0, named=True)
    return (
        row["first_token_s"] - row["prefill_start_s"],
        row["kv_ready_s"] - row["first_token_s"],
        row["finish_s"] - row["decode_start_s"],
    )


# (compress_at, decompress_at, decode keeps fp8, words in the header, compressed on sender, decompressed on receiver)
CASES = [
    ("transit", "none", False, "fp8_e4m3 compressed in transit, decompression not modelled", False, False),
    ("transit", "receiver", False, "fp8_e4m3 compressed in transit, decompressed on the decode GPU", False, True),
    ("transit", "none", True, "fp8_e4m3 compressed in transit, kept as fp8_e4m3 by decode", False, False),
    ("sender", "none", False, "fp8_e4m3 compressed on the prefill GPU, decompression not modelled", True, False),
    ("sender", "receiver", False, "fp8_e4m3 compressed on the prefill GPU, decompressed on the decode GPU", True, True),
    ("sender", "none", True, "fp8_e4m3 compressed on the prefill GPU, kept as fp8_e4m3 by decode", True, False),
]


@pytest.mark.parametrize(("at", "decompress", "keeps", "words", "on_sender", "on_receiver"), CASES)
def test_report_names_the_placement_the_run_charged(
    at: str, decompress: str, keeps: bool, words: str, on_sender: bool, on_receiver: bool
) -> None:
    """Each placement combination: the header names it, and the run shows it. Compression on the prefill GPU
    lengthens the prefill step (in transit leaves it as uncompressed); in transit the transfer takes the stage's
    1 us more than the precompressed bytes alone (20 us + S/2/B); decompression on the decode GPU lengthens the
    decode, nothing else does (a decode pool keeping fp8 reads half the KV, so it is no slower)."""
    decode = {"kv_format": "fp8"} if keeps else None
    res = _run({"compression": "fp8", "compress_at": at, "decompress_at": decompress}, decode)
    first = render(res).splitlines()[0]
    assert words in first, first
    plain_prefill, plain_transfer, plain_decode = _times(_run({}))
    prefill_s, transfer_s, decode_s = _times(res)
    if on_sender:
        assert prefill_s > plain_prefill
    else:
        assert prefill_s == plain_prefill
    want_transfer = LATENCY_S + (0.0 if on_sender else TRANSIT_STAGE_S) + S_BYTES / 2 / B_BYTES_PER_S
    assert transfer_s == pytest.approx(want_transfer, rel=1e-9)
    assert plain_transfer == pytest.approx(LATENCY_S + S_BYTES / B_BYTES_PER_S, rel=1e-9)
    if on_receiver:
        assert decode_s > plain_decode
    else:
        assert decode_s <= plain_decode


@pytest.mark.parametrize(("at", "decompress", "keeps"), [(c[0], c[1], c[2]) for c in CASES])
def test_echo_reruns_to_the_same_placement(at: str, decompress: str, keeps: bool) -> None:
    """The resolved-scenario echo of each combination validates to the same plan placement as the scenario the
    user wrote, so a report rendered from the echo (or a re-run of it) describes the run that happened."""
    decode = {"kv_format": "fp8"} if keeps else {}
    sc = {
        "link": "eth-25g",
        "decode": decode,
        "handoff": {"compression": "fp8", "compress_at": at, "decompress_at": decompress},
        "workload": {"requests": 5},
    }
    echo = kvwire.simulate(sc).scenario
    assert json.loads(_core.placement_json(json.dumps(echo))) == json.loads(_core.placement_json(json.dumps(sc)))


def test_uncompressed_and_colocated_name_no_compression() -> None:
    """Without compression the header names none (no "compressed", no "decompress"); a colocated run has no
    hand-off at all, and its placement has no hops."""
    first = render(_run({})).splitlines()[0]
    assert "compress" not in first
    colocated = json.loads(_core.placement_json(json.dumps({"mode": "colocated"})))
    assert colocated["hops"] == [] and colocated["compression"] is None


def test_host_staged_placement_lists_the_hops_in_order() -> None:
    """A host-staged path with a host conversion: the plan crosses PCIe out, the host converter, the network and
    PCIe in, in that order, and the header names the conversion on the host."""
    sc = {
        "link": {"preset": "eth-25g", "model": "host_staged"},
        "handoff": {
            "compression": "fp8",
            "compress_at": "sender",
            "convert": {"from": "vllm_nhd", "to": "sglang", "at": "host"},
        },
        "workload": {"requests": 5},
    }
    plan = json.loads(_core.placement_json(json.dumps(sc)))
    assert plan["hops"] == ["pcie-prefill", "host-convert", "kv-link", "pcie-decode"]
    assert plan["compressed_at"] == "sender"
    assert plan["convert"] == {"from": "vllm_nhd", "to": "sglang", "at": "host"}
    first = render(kvwire.simulate(sc)).splitlines()[0]
    assert "fp8_e4m3 compressed on the prefill GPU" in first
    assert "layout vllm_nhd -> sglang on the host" in first
