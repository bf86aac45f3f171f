"""The transfer layer and the cross-vendor devices (issue 15): link fields priced by the calculator
(``kvwire.handoff``) and the simulator identically, the measured link presets, the AMD and wafer-scale devices,
and a hand-off conversion between fp8 flavours at each placement.

Oracles: the formulas written out here from the link's and device's published numbers (typed in from the
sources the presets cite: Mooncake's 87 GB/s on 4x200 Gb/s and 190 GB/s on 8x400 Gb/s, libfabric's 20 s per
256 GB of registration, AMD's and the vendor's datasheet figures), and one-request simulations on an idle
system, where the hand-off (kv_ready - first_token) is exactly the path's own time.
"""

from __future__ import annotations

import math
import pickle
from typing import Any

import kvwire
import pytest

#: Llama-3-8B: 32 layers x (K, V) x 8 KV heads x 128 values x 2 bytes per token.
KV_BYTES_PER_TOKEN = 32 * 2 * 8 * 128 * 2
PROMPT = 2048
#: ib-ndr (reference link table): 50 GB/s, 10 µs.
IB_B, IB_L = 50e9, 10e-6


def one_request(prompt: int = PROMPT, *, output: int = 2, **extra: Any) -> dict[str, Any]:
    sc: dict[str, Any] = {
        "workload": {"trace": {"arrival_s": [0.5], "prompt_tokens": [prompt], "output_tokens": [output]}}
    }
    sc.update(extra)
    return sc


def simulated_handoff(sc: dict[str, Any]) -> float:
    """kv_ready - first_token of a one-request run."""
    r = kvwire.simulate(sc).requests.row(0, named=True)
    return float(r["kv_ready_s"] - r["first_token_s"])


def calc(link: Any, **kw: Any) -> kvwire.HandoffResultDict:
    return kvwire.handoff("llama3-8b", PROMPT, link=link, **kw)


# --- 1. each transfer-layer cost is its formula, in the calculator and the simulation ---------------------

S = PROMPT * KV_BYTES_PER_TOKEN

#: (link, the network time written out from the link's numbers)
FORMULAS: list[tuple[Any, float]] = [
    ({"preset": "ib-ndr", "launch_overhead_us": 3000}, IB_L + 3e-3 + S / IB_B),
    ({"preset": "ib-ndr", "registration": "per_transfer"}, IB_L + 78.125e-3 * S / 1e9 + S / IB_B),
    (
        {"preset": "ib-ndr", "registration": "per_transfer", "registration_ms_per_gb": 10},
        IB_L + 1e-2 * S / 1e9 + S / IB_B,
    ),
    ("ib-ndr-nixl", IB_L + 7e-3 + S / IB_B),
    ("roce-4x200g", IB_L + S / (4 * 25e9 * 0.87)),
    ("roce-8x400g", IB_L + S / (8 * 50e9 * 0.475)),
    ({"preset": "ib-ndr", "gpus_per_nic": 2}, IB_L + S / (IB_B / 2)),
    ({"preset": "eth-100g", "nics": 4}, 20e-6 + S / (4 * 12.5e9 * 0.87)),
    ({"preset": "eth-100g", "nics": 2, "nic_efficiency": 0.5}, 20e-6 + S / (2 * 12.5e9 * 0.5)),
]


@pytest.mark.parametrize(("link", "network_s"), FORMULAS, ids=[str(f[0]) for f in FORMULAS])
def test_each_transfer_layer_cost_is_its_formula(link: Any, network_s: float) -> None:
    """The calculator's transfer time is latency + launch overhead + per-transfer registration + S / (line
    rate x NICs x efficiency / GPUs per NIC), each term from the link's published numbers; and a one-request
    simulation's hand-off takes exactly that long."""
    h = calc(link)
    assert h["transfer_s"] == pytest.approx(network_s, rel=1e-12)
    assert simulated_handoff(one_request(link=link)) == pytest.approx(h["transfer_s"], rel=1e-9)


def test_launch_and_registration_are_reported_apart() -> None:
    """``launch_s`` and ``registration_s`` are the formula's terms (registration of the bytes handed to the NIC:
    the compressed bytes when the sender compresses, the uncompressed ones when an in-transit stage does), and
    a pre-registered pool reports no registration."""
    link = {"preset": "ib-ndr", "launch_overhead_us": 250, "registration": "per_transfer"}
    h = calc(link)
    assert h["launch_s"] == 250e-6
    assert h["registration_s"] == pytest.approx(78.125e-3 * S / 1e9, rel=1e-15)
    sender = calc(link, compression="fp8", compress_at="sender")
    assert sender["registration_s"] == pytest.approx(78.125e-3 * (S / 2) / 1e9, rel=1e-15)
    transit = calc(link, compression="fp8")
    assert transit["registration_s"] == pytest.approx(78.125e-3 * S / 1e9, rel=1e-15)
    assert calc("ib-ndr")["registration_s"] == 0.0 and calc("ib-ndr")["launch_s"] == 0.0


@pytest.mark.parametrize("model", ["fcfs", "shared", "host_staged"])
def test_pool_and_per_transfer_differ_by_exactly_the_registration(model: str) -> None:
    """Registering per transfer instead of once for a pool costs each hand-off exactly registration_ms_per_gb x
    its GB, on every link model, in the calculator and in a one-request simulation."""
    runs = {}
    for reg in ("pool", "per_transfer"):
        link = {"preset": "eth-100g", "model": model, "registration": reg, "registration_ms_per_gb": 40}
        runs[reg] = (calc(link), simulated_handoff(one_request(link=link)))
    cost = 40e-3 * S / 1e9
    assert runs["per_transfer"][0]["registration_s"] == pytest.approx(cost, rel=1e-15)
    assert runs["per_transfer"][0]["transfer_s"] - runs["pool"][0]["transfer_s"] == pytest.approx(cost, rel=1e-9)
    assert runs["per_transfer"][1] - runs["pool"][1] == pytest.approx(cost, rel=1e-9)


def test_host_staged_path_is_priced_hop_by_hop() -> None:
    """No GPUDirect (``link.model = "host_staged"``): the calculator's transfer is the PCIe hop out, the
    network and the PCIe hop in, one after the other (``staging_s`` the two PCIe hops), as the simulation
    stores and forwards them; GPUDirect over the same network is the network alone."""
    direct = calc("eth-100g")
    staged = calc({"preset": "eth-100g", "model": "host_staged", "launch_overhead_us": 1000})
    pcie = 2 * (5e-6 + S / 64e9)
    assert staged["staging_s"] == pytest.approx(pcie, rel=1e-12)
    assert staged["transfer_s"] == pytest.approx(direct["transfer_s"] + 1e-3 + pcie, rel=1e-12)
    assert direct["staging_s"] == 0.0 and math.copysign(1.0, direct["staging_s"]) == 1.0  # +0, never -0
    link = {"preset": "eth-100g", "model": "host_staged", "launch_overhead_us": 1000}
    assert simulated_handoff(one_request(link=link)) == pytest.approx(staged["transfer_s"], rel=1e-9)


def test_streaming_carries_the_transfer_layer_delays_once() -> None:
    """Layer-wise streaming: exposed = latency' + max(T_x/L, T_x - (L-1)/L T_p), the launch overhead and the
    registration in latency' once per transfer, as in the simulation."""
    link = {"preset": "eth-25g", "launch_overhead_us": 2000, "registration": "per_transfer"}
    h = calc(link, streaming="layer")
    t_x = S / 3.125e9
    lat = 20e-6 + 2e-3 + 78.125e-3 * S / 1e9
    assert h["exposed_s"] == pytest.approx(lat + max(t_x / 32, t_x - 31 / 32 * h["prefill_s"]), rel=1e-12)
    sc = one_request(link=link, handoff={"streaming": "layer"})
    assert simulated_handoff(sc) == pytest.approx(h["exposed_s"], rel=1e-9)


def test_reference_presets_keep_the_ideal_transfer_layer() -> None:
    """The reference simulator's links are unchanged: one NIC at line rate, no launch overhead, a pool (so
    its figures stand), and the resolved scenario states the efficiency that ran (a rerun is identical)."""
    cat = kvwire.catalog()["links"]
    for key in ("nvlink4", "ib-ndr", "eth-100g", "eth-25g", "pcie5", "cpo-optical"):
        lk = cat[key]
        assert (lk["nics"], lk["gpus_per_nic"], lk["launch_overhead_us"], lk["registration"]) == (1, 1, 0.0, "pool")
        assert "ideal" in lk["source"]
    res = kvwire.simulate(one_request(link="roce-4x200g"))
    link = res.scenario["link"]
    assert (link["nics"], link["nic_efficiency"], link["registration"]) == (4, 0.87, "pool")
    again = kvwire.simulate(res.scenario)
    assert again.requests["kv_ready_s"].to_list() == res.requests["kv_ready_s"].to_list()


def test_measured_presets_cite_their_measurements() -> None:
    """Every transfer-layer preset names the measurement its numbers come from."""
    cat = kvwire.catalog()["links"]
    assert "Mooncake" in cat["roce-4x200g"]["source"] and "87 GB/s" in cat["roce-4x200g"]["source"]
    assert "190 GB/s" in cat["roce-8x400g"]["source"]
    assert "#50913" in cat["ib-ndr-nixl"]["source"] and cat["ib-ndr-nixl"]["launch_overhead_us"] == 7000
    assert all("libfabric issue #4738" in cat[k]["source"] for k in ("ib-ndr-nixl", "roce-4x200g", "roce-8x400g"))
    assert all(lk["registration_ms_per_gb"] == 78.125 for lk in cat.values())


@pytest.mark.parametrize(
    ("link", "path"),
    [
        ({"preset": "ib-ndr", "nics": 0}, "link.nics"),
        ({"preset": "ib-ndr", "gpus_per_nic": 0}, "link.gpus_per_nic"),
        ({"preset": "ib-ndr", "nic_efficiency": 1.5}, "link.nic_efficiency"),
        ({"preset": "ib-ndr", "nic_efficiency": 0}, "link.nic_efficiency"),
        ({"preset": "ib-ndr", "launch_overhead_us": -1}, "link.launch_overhead_us"),
        ({"preset": "ib-ndr", "registration_ms_per_gb": float("nan")}, "link.registration_ms_per_gb"),
        ({"preset": "ib-ndr", "registration": "sometimes"}, "link.registration"),
        ({"preset": "ib-ndr", "bandwidth_gb_per_s": 2e-6, "gpus_per_nic": 4}, "link.gpus_per_nic"),
    ],
)
def test_bad_transfer_layer_fields_name_the_field(link: dict[str, Any], path: str) -> None:
    """Out-of-range transfer-layer fields are refused with a ScenarioError naming the field."""
    with pytest.raises(kvwire.ScenarioError) as ei:
        kvwire.validate({"link": link})
    assert ei.value.path == path


# --- 2. devices --------------------------------------------------------------------------------------------


def test_amd_and_wafer_scale_presets_state_their_sources() -> None:
    """MI300X and MI355X carry AMD's datasheet peaks, memory and TDP (and say which coefficients are
    assumed); the wafer-scale device is marked illustrative in its name, its source and its facts, and its
    44 GB are on-chip SRAM."""
    dev = kvwire.catalog()["devices"]
    mi300x, mi355x, wafer = dev["mi300x"], dev["mi355x"], dev["wafer-scale"]
    assert (mi300x["peak_tflops"], mi300x["hbm_tb_per_s"], mi300x["hbm_gb"], mi300x["tdp_w"]) == (1307.4, 5.3, 192, 750)
    assert mi300x["fp8_peak_tflops"] == 2614.9 and "Infinity Fabric" in mi300x["scale_up_fabric"]
    assert mi300x["scale_up"] == {"domain": 8, "bandwidth_gb_per_s": 448.0, "latency_us": 5.0}
    assert (mi355x["peak_tflops"], mi355x["hbm_tb_per_s"], mi355x["hbm_gb"], mi355x["tdp_w"]) == (2516.6, 8, 288, 1400)
    assert "datasheet" in mi300x["source"] and "assumed" in mi300x["source"]
    assert wafer["illustrative"] and "illustrative" in wafer["name"] and wafer["source"].startswith("ILLUSTRATIVE")
    assert wafer["hbm_gb"] == 44 and wafer["memory"].startswith("on-chip SRAM")
    assert not any(d["illustrative"] for k, d in dev.items() if k != "wafer-scale")


@pytest.mark.parametrize(("model", "needed"), [("llama3-70b", 4), ("opt-66b", 4), ("llama3-8b", 1)])
def test_a_model_that_does_not_fit_the_wafer_names_the_wafers_it_needs(model: str, needed: int) -> None:
    """Weights and KV must fit in SRAM: a model too large for one wafer is refused with DoesNotFitError naming
    the pool and the fewest wafers that hold it (weights 2 B/parameter within 0.9 x 44 GB per wafer), and that
    many wafers are accepted while one fewer is refused."""
    big_prefill = {"device": "mi300x"}  # 192 GB: holds every model here on one device
    sc: dict[str, Any] = {"model": model, "prefill": big_prefill, "decode": {"device": "wafer-scale"}}
    if needed == 1:
        kvwire.validate(sc)
        return
    with pytest.raises(kvwire.DoesNotFitError) as ei:
        kvwire.validate(sc)
    e = ei.value
    assert e.path == "decode" and e.devices_needed == needed
    assert f"needs at least {needed} devices per instance" in str(e) and "SRAM" in str(e)
    params = kvwire.catalog()["models"][model]["resident_weight_bytes"]
    assert (needed - 1) * 44e9 * 0.9 < params <= needed * 44e9 * 0.9
    wafers = {"device": "wafer-scale", "devices_per_instance": needed}
    kvwire.validate({"model": model, "prefill": big_prefill, "decode": wafers})
    with pytest.raises(kvwire.DoesNotFitError):
        kvwire.validate(
            {"model": model, "prefill": big_prefill, "decode": {**wafers, "devices_per_instance": needed - 1}}
        )
    back = pickle.loads(pickle.dumps(e))
    assert back.devices_needed == needed and back.path == "decode"


def test_a_model_beyond_any_instance_says_so() -> None:
    """When not even 1,024 devices hold the weights, ``devices_needed`` is None and the message says so."""
    huge = {"preset": "llama3-70b", "layers": 80_000}
    with pytest.raises(kvwire.DoesNotFitError) as ei:
        kvwire.validate({"model": huge, "prefill": {"device": "wafer-scale"}})
    assert ei.value.devices_needed is None and "not even 1024 devices" in str(ei.value)


# --- 3. a cross-vendor conversion at each placement ---------------------------------------------------------

#: MI300X prefill (vLLM ROCm: HND, E4M3FNUZ) → a decode engine that wants a neutral E4M3FN request.
FP8_MODEL = {"preset": "llama3-8b", "kv_bytes_per_value": 1}
CONVERT = {"from": "vllm_hnd", "from_dtype": "fp8_e4m3fnuz", "to": "neutral", "to_dtype": "fp8_e4m3"}
#: Bytes the conversion reads and writes: 2048 tokens x 32 layers x 2 x 8 heads x 128 B, both layouts (whole
#: blocks of 16: 2048 is a multiple), plus the neutral side's 32 x 2 separate fp32 scales on each side.
MOVED = 2 * (PROMPT * KV_BYTES_PER_TOKEN // 2 + 32 * 2 * 4)


def test_cross_vendor_conversion_costs_its_hbm_pass_where_it_runs() -> None:
    """``convert_s`` is the conversion's bytes over the derated memory bandwidth of the device it runs on
    (the MI300X sender: 5.3 TB/s x 0.8; an H100 receiver: 3.35 TB/s x 0.8), or over the host converter's
    throughput (13.8 GB/s); the sender's is inside ``prefill_s``, the host's inside ``staging_s``."""
    common: dict[str, Any] = {"device": "mi300x", "decode_device": "h100"}
    base = kvwire.handoff(FP8_MODEL, PROMPT, **common)
    snd = kvwire.handoff(FP8_MODEL, PROMPT, convert={**CONVERT, "at": "sender"}, **common)
    rcv = kvwire.handoff(FP8_MODEL, PROMPT, convert={**CONVERT, "at": "receiver"}, **common)
    host = kvwire.handoff(
        FP8_MODEL,
        PROMPT,
        link={"preset": "ib-ndr", "model": "host_staged"},
        convert={**CONVERT, "at": "host"},
        **common,
    )
    assert snd["convert_s"] == pytest.approx(MOVED / (5.3e12 * 0.8), rel=1e-12)
    assert snd["prefill_s"] - base["prefill_s"] == pytest.approx(snd["convert_s"], rel=1e-9)
    assert rcv["convert_s"] == pytest.approx(MOVED / (3.35e12 * 0.8), rel=1e-12)
    assert rcv["prefill_s"] == base["prefill_s"] and rcv["transfer_s"] == base["transfer_s"]
    assert host["convert_s"] == pytest.approx(PROMPT * KV_BYTES_PER_TOKEN / 2 / 13.8e9, rel=1e-12)
    assert (snd["convert_at"], rcv["convert_at"], host["convert_at"], base["convert_at"]) == (
        "sender",
        "receiver",
        "host",
        None,
    )


@pytest.mark.parametrize("at", ["sender", "receiver", "host"])
def test_cross_vendor_conversion_agrees_with_a_one_request_simulation(at: str) -> None:
    """MI300X prefill → H100 decode with the fnuz → fn conversion: the simulation charges exactly the
    calculator's ``convert_s`` where it runs — in the prefill step (sender), the first decode step (receiver:
    the request finishes that much later), or the host hop (the hand-off that much longer)."""
    link: Any = {"preset": "ib-ndr", "model": "host_staged"} if at == "host" else "ib-ndr"
    pools: dict[str, Any] = {"prefill": {"device": "mi300x"}, "decode": {"device": "h100"}, "link": link}
    plain = kvwire.simulate(one_request(model=FP8_MODEL, **pools)).requests.row(0, named=True)
    conv = kvwire.simulate(
        one_request(model=FP8_MODEL, handoff={"convert": {**CONVERT, "at": at}}, **pools)
    ).requests.row(0, named=True)
    h = kvwire.handoff(
        FP8_MODEL, PROMPT, link=link, device="mi300x", decode_device="h100", convert={**CONVERT, "at": at}
    )
    shift = {"sender": "first_token_s", "receiver": "finish_s", "host": "kv_ready_s"}[at]
    assert conv[shift] - plain[shift] == pytest.approx(h["convert_s"], rel=1e-9)
    assert conv["kv_ready_s"] - conv["first_token_s"] == pytest.approx(h["transfer_s"], rel=1e-9)


@pytest.mark.parametrize(
    ("convert", "model", "path"),
    [
        ({**CONVERT, "to_dtype": "bfloat16", "at": "sender"}, FP8_MODEL, "handoff.convert.to_dtype"),
        ({**CONVERT, "to_dtype": "fp8_e5m2", "at": "sender"}, FP8_MODEL, "handoff.convert.to_dtype"),
        ({**CONVERT, "at": "sender"}, "llama3-8b", "handoff.convert.from_dtype"),
        ({**CONVERT, "from_dtype": "fp9", "at": "sender"}, FP8_MODEL, "handoff.convert.from_dtype"),
    ],
)
def test_bad_conversion_dtypes_name_the_field(convert: dict[str, Any], model: Any, path: str) -> None:
    """A conversion changes layout and fp8 flavour, not precision or element; its dtypes must hold the
    model's KV bytes per value; unknown dtypes are named."""
    with pytest.raises(kvwire.ScenarioError) as ei:
        kvwire.validate({"model": model, "handoff": {"convert": convert}})
    assert ei.value.path == path


def test_explicit_dtypes_and_compression_do_not_mix() -> None:
    """With explicit dtypes the cache moves as stored, so a hand-off compression is refused (naming the
    conversion's dtype field)."""
    with pytest.raises(kvwire.ScenarioError) as ei:
        kvwire.validate({"model": FP8_MODEL, "handoff": {"compression": "fp8", "convert": {**CONVERT, "at": "sender"}}})
    assert ei.value.path == "handoff.convert.from_dtype"


def test_conversion_dtypes_echo_and_rerun() -> None:
    """The resolved scenario keeps the conversion's dtypes, and running it again gives the same requests."""
    res = kvwire.simulate(
        one_request(model=FP8_MODEL, prefill={"device": "mi300x"}, handoff={"convert": {**CONVERT, "at": "receiver"}})
    )
    conv = res.scenario["handoff"]["convert"]
    assert (conv["from_dtype"], conv["to_dtype"]) == ("fp8_e4m3fnuz", "fp8_e4m3")
    assert kvwire.simulate(res.scenario).requests["finish_s"].to_list() == res.requests["finish_s"].to_list()


def test_kvwire_presets_shows_the_transfer_layer_and_the_converters() -> None:
    """``kvwire presets`` lists each measured link's transfer layer (NICs and efficiency, launch overhead) and
    nothing for the reference's ideal links, and says the wafer-scale device runs no KV conversion (and is
    illustrative)."""
    from click.testing import CliRunner
    from kvwire.cli import main

    out = CliRunner().invoke(main, ["presets"]).output
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert lines["roce-4x200g"].endswith("4 NICs at 0.870 of line rate")
    assert lines["roce-8x400g"].endswith("8 NICs at 0.475 of line rate")
    assert lines["ib-ndr-nixl"].endswith("launch 7 ms")
    assert lines["ib-ndr"].endswith("pJ/bit")
    assert "runs no KV conversion" in lines["wafer-scale"] and "ILLUSTRATIVE" in lines["wafer-scale"]
    assert "runs no KV conversion" not in lines["mi300x"]


def test_transfer_layer_words_for_every_field() -> None:
    """The presets listing's words for a link object: shared NICs, per-transfer registration, and a NIC count
    whose efficiency the core defaults (absent from the object) are each stated."""
    from kvwire.cli import transfer_layer

    assert transfer_layer({"nics": 1, "gpus_per_nic": 2}) == ", 2 GPUs per NIC"
    assert transfer_layer({"nics": 2}) == ", 2 NICs"
    reg = {"registration": "per_transfer", "registration_ms_per_gb": 78.125}
    assert transfer_layer(reg) == ", registration per transfer 78.125 ms/GB"
    assert transfer_layer({}) == ""
