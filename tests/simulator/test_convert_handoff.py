"""``handoff.convert``: a KV layout conversion on the hand-off path, charged where it runs.

Oracles: the byte formulas of the layouts (whole blocks, K and V, every layer), the derated HBM bandwidth and
pJ/byte of the H100 preset (``simulator.md`` (a), typed in here), and the host converter's declared throughput
and power. Each run is one request on an idle system, so the shift a conversion causes is exactly its own
cost, with nothing queued behind or in front of it.
"""

from __future__ import annotations

from typing import Any

import kvwire
import pytest

#: Llama-3-8B: 32 layers x (K, V) x 8 KV heads x 128 values x 2 bytes per token.
KV_BYTES_PER_TOKEN = 32 * 2 * 8 * 128 * 2
#: H100-SXM (simulator.md (a)): derated HBM bytes/s and pJ per byte.
H100_RATE_B = 3.35e12 * 0.80
H100_J_BYTE = 60e-12


def one_request(prompt: int, *, output: int = 4, **extra: Any) -> dict[str, Any]:
    sc: dict[str, Any] = {
        "workload": {"trace": {"arrival_s": [0.0], "prompt_tokens": [prompt], "output_tokens": [output]}}
    }
    sc.update(extra)
    return sc


def row(res: kvwire.SimResult) -> dict[str, Any]:
    return res.requests.row(0, named=True)


def paged_tokens(tokens: int, block: int) -> int:
    return -(-tokens // block) * block


@pytest.mark.parametrize(("prompt", "from_bs", "to_bs"), [(2048, 16, 16), (17, 16, 1), (1000, 64, 16)])
def test_sender_conversion_is_an_hbm_pass_in_the_prefill_step(prompt: int, from_bs: int, to_bs: int) -> None:
    """On the prefill GPU, the conversion lengthens the prefill step by (bytes of the source layout's whole
    blocks + bytes of the destination's) / derated HBM bandwidth, and adds that traffic's memory energy."""
    conv = {"from": "vllm_hnd", "to": "sglang", "at": "sender", "from_block_size": from_bs, "to_block_size": to_bs}
    base = kvwire.simulate(one_request(prompt))
    conv_run = kvwire.simulate(one_request(prompt, handoff={"convert": conv}))
    moved = (paged_tokens(prompt, from_bs) + paged_tokens(prompt, to_bs)) * KV_BYTES_PER_TOKEN
    assert row(conv_run)["first_token_s"] - row(base)["first_token_s"] == pytest.approx(moved / H100_RATE_B, rel=1e-9)
    d_mem = conv_run.summary["energy"]["breakdown"]["memory_j"] - base.summary["energy"]["breakdown"]["memory_j"]
    assert d_mem == pytest.approx(moved * H100_J_BYTE, rel=1e-6)
    # The transfer itself is unchanged: the conversion changes order, not size.
    assert row(conv_run)["handoff_s"] == pytest.approx(row(base)["handoff_s"], rel=1e-12)


def test_receiver_conversion_lengthens_the_first_decode_step() -> None:
    """On the decode GPU, the pass joins the first decode step after admission: TTFT unchanged, the request
    finishes later by exactly the pass time."""
    conv = {"from": "vllm_nhd", "to": "trtllm", "at": "receiver", "to_block_size": 32}
    base = kvwire.simulate(one_request(2048))
    conv_run = kvwire.simulate(one_request(2048, handoff={"convert": conv}))
    moved = (2048 + paged_tokens(2048, 32)) * KV_BYTES_PER_TOKEN
    assert row(conv_run)["first_token_s"] == row(base)["first_token_s"]
    assert row(conv_run)["finish_s"] - row(base)["finish_s"] == pytest.approx(moved / H100_RATE_B, rel=1e-9)


def test_receiver_conversion_of_a_compressed_cache_moves_fewer_bytes() -> None:
    """A decode pool that keeps its cache in fp8 converts fp8 values: half the bytes of bf16."""
    conv = {"from": "vllm_hnd", "to": "sglang", "at": "receiver"}
    fp8_pool: dict[str, Any] = {"decode": {"device": "h100", "kv_format": "fp8"}}
    base = kvwire.simulate(one_request(2048, **fp8_pool))
    conv_run = kvwire.simulate(one_request(2048, handoff={"convert": conv}, **fp8_pool))
    moved = 2 * 2048 * KV_BYTES_PER_TOKEN / 2
    assert row(conv_run)["finish_s"] - row(base)["finish_s"] == pytest.approx(moved / H100_RATE_B, rel=1e-9)


@pytest.mark.parametrize(("gb_per_s", "threads", "watts"), [(13.8, 1, 3.75), (2.0, 4, 10.0)])
def test_host_conversion_is_a_hop_with_its_own_throughput_and_power(
    gb_per_s: float, threads: int, watts: float
) -> None:
    """On the sender's host (host-staged link), the conversion is a store-and-forward hop: the hand-off takes
    longer by hand-off bytes / host throughput, the hop reports that busy time, and its energy is busy time x
    watts per thread, reported as ``convert_j``."""
    conv = {"from": "vllm_hnd", "to": "sglang", "at": "host", "host_gb_per_s": gb_per_s, "host_threads": threads,
            "host_w_per_thread": watts}  # fmt: skip
    link = {"preset": "ib-ndr", "model": "host_staged"}
    base = kvwire.simulate(one_request(2048, link=link))
    conv_run = kvwire.simulate(one_request(2048, link=link, handoff={"convert": conv}))
    seconds = 2048 * KV_BYTES_PER_TOKEN / (gb_per_s * 1e9)
    assert row(conv_run)["handoff_s"] - row(base)["handoff_s"] == pytest.approx(seconds, rel=1e-9)
    hop = next(h for h in conv_run.summary["hops"] if h["resource"] == "host-convert-0")
    assert hop["channels"] == threads and hop["transfers"] == 1
    assert hop["convert_j"] == pytest.approx(seconds * watts, rel=1e-9)
    assert conv_run.summary["energy"]["breakdown"]["convert_j"] == pytest.approx(seconds * watts, rel=1e-9)
    assert base.summary["energy"]["breakdown"]["convert_j"] == 0.0


def test_host_converter_queues_fcfs_on_its_threads() -> None:
    """Two requests prefilled back to back reach a one-thread host converter while it is still busy with the
    first: the second's hand-off lands one conversion time after the first's. With two threads it does not
    wait, so the two land as far apart as without any conversion (their prefill gap)."""
    trace = {"arrival_s": [0.0, 0.0], "prompt_tokens": [2048, 2048], "output_tokens": [4, 4]}
    link = {"preset": "nvlink4", "model": "host_staged"}
    seconds = 2048 * KV_BYTES_PER_TOKEN / 1e9  # host_gb_per_s 1

    def ready(threads: int | None) -> list[float]:
        sc: dict[str, Any] = {"workload": {"trace": trace}, "link": link}
        if threads:
            sc["handoff"] = {"convert": {"from": "vllm_hnd", "to": "sglang", "at": "host", "host_gb_per_s": 1.0,
                                         "host_threads": threads}}  # fmt: skip
        return sorted(kvwire.simulate(sc).requests["kv_ready_s"].to_list())

    one, two, none = ready(1), ready(2), ready(None)
    assert none[1] - none[0] < seconds  # the second reaches the host before the first conversion ends
    assert one[1] - one[0] == pytest.approx(seconds, rel=1e-9)
    assert two[1] - two[0] == pytest.approx(none[1] - none[0], rel=1e-9)


def test_local_decodes_are_not_converted() -> None:
    """Requests kept on their prefill instance (conditional routing) never cross the link, so no conversion is
    charged for them: the run equals the same run without a conversion."""
    router = {"disaggregate": {"policy": "conditional", "min_prompt_tokens": 10_000}}
    conv = {"from": "vllm_hnd", "to": "sglang", "at": "sender"}
    sc: dict[str, Any] = {"workload": {"requests": 50}, "router": router}
    base = kvwire.simulate(sc)
    conv_run = kvwire.simulate({**sc, "handoff": {"convert": conv}})
    assert conv_run.requests["local_decode"].all()
    assert conv_run.requests.equals(base.requests)


def test_mla_models_take_mla_layouts() -> None:
    """DeepSeek-V3 converts between MLA layouts (576 values per token and layer, one 'head'): the pass moves
    61 x 1152 bytes per token each way."""
    pools: dict[str, Any] = {
        "prefill": {"device": "h200", "devices_per_instance": 8},
        "decode": {"device": "h200", "devices_per_instance": 8},
    }
    base = kvwire.simulate(one_request(1024, model="deepseek-v3", **pools))
    conv = {"from": "mla", "to": "mla_neutral", "at": "sender", "from_block_size": 64}
    conv_run = kvwire.simulate(one_request(1024, model="deepseek-v3", handoff={"convert": conv}, **pools))
    moved = 2 * 1024 * 61 * 1152
    rate = 8 * 4.8e12 * 0.80
    assert row(conv_run)["first_token_s"] - row(base)["first_token_s"] == pytest.approx(moved / rate, rel=1e-9)


def conv(at: str = "sender", **extra: Any) -> dict[str, Any]:
    return {"handoff": {"convert": {"from": "vllm_hnd", "to": "sglang", "at": at, **extra}}}


STAGED = {"link": {"preset": "ib-ndr", "model": "host_staged"}}


@pytest.mark.parametrize(
    ("extra", "path", "words"),
    [
        (conv("host"), "handoff.convert.at", "host_staged"),
        ({"handoff": {"convert": {"from": "vllm_hnx", "to": "sglang", "at": "sender"}}}, "handoff.convert.from",
         "unknown layout"),
        ({"handoff": {"convert": {"from": "mla", "to": "sglang", "at": "sender"}}}, "handoff.convert.from",
         "K/V layout"),
        (conv("gpu"), "handoff.convert.at", ""),
        ({"handoff": {"convert": {"from": "vllm_hnd", "to": "sglang"}}}, "handoff.convert", "at"),
        (conv(host_threads=2), "handoff.convert.at", "host"),
        (conv(to_block_size=0), "handoff.convert.to_block_size", ""),
        ({**STAGED, **conv("host", host_gb_per_s=0)}, "handoff.convert.host_gb_per_s", ""),
        ({"mode": "colocated", **conv()}, "handoff.convert", "colocated"),
    ],
)  # fmt: skip
def test_impossible_conversions_are_refused_with_the_field(extra: dict[str, Any], path: str, words: str) -> None:
    """Each impossible ``handoff.convert`` raises ScenarioError naming the field and why; the process keeps
    working."""
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.validate(one_request(64, **extra))
    assert e.value.path.startswith(path), (e.value.path, str(e.value))
    assert words in str(e.value)
    assert kvwire.simulate(one_request(64)).summary["requests"]["completed"] == 1


def test_the_resolved_scenario_echoes_the_conversion() -> None:
    """The resolved scenario returned with a result documents the conversion and its defaults."""
    conv = {"from": "vllm_hnd", "to": "sglang", "at": "receiver", "to_block_size": 1}
    echo = kvwire.simulate(one_request(64, handoff={"convert": conv})).scenario["handoff"]["convert"]
    assert echo == {"from": "vllm_hnd", "to": "sglang", "at": "receiver", "from_block_size": 16, "to_block_size": 1}
    host = {"from": "vllm_hnd", "to": "sglang", "at": "host"}
    link = {"preset": "eth-25g", "model": "host_staged"}
    echo = kvwire.simulate(one_request(64, handoff={"convert": host}, link=link)).scenario["handoff"]["convert"]
    assert echo == {**host, "from_block_size": 16, "to_block_size": 16, "host_gb_per_s": 13.8, "host_threads": 1,
                    "host_w_per_thread": 3.75}  # fmt: skip
