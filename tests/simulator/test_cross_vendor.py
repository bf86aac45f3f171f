"""The cross-vendor hand-off end to end (issue 15, item 4) and ``examples/cross_vendor.py``.

MI300X prefill → the illustrative wafer-scale decode engine, OPT-66B (the Splitwise request: 512 tokens,
1.208 GB = 1.125 GiB of BF16 KV), over RoCE 4x200 Gb/s. Oracles: the hand-off's bytes from the model's shape
(64 layers x K,V x 72 heads x 128 values x 2 B per token), the devices' and links' published numbers as typed in
``tests/test_transfer_layer.py``, and one-request simulations on an idle system, where each stage takes exactly
its own time. The example's figures are checked against ``kvwire.handoff`` / ``kvwire.simulate`` recomputed
here, and against those oracles.
"""

from __future__ import annotations

import json
import runpy
from typing import Any

import kvwire
import pytest
from shared_paths import EXAMPLES

CV: dict[str, Any] = runpy.run_path(str(EXAMPLES / "cross_vendor.py"), run_name="cross_vendor")

#: OPT-66B: 64 layers x (K, V) x 72 heads x 128 values x 2 bytes per token; the Splitwise prompt.
S = 512 * 64 * 2 * 72 * 128 * 2
#: RoCE 4x200 Gb/s as Mooncake measured it: 4 x 25 GB/s x 0.87, 10 µs; MI300X 5.3 TB/s x 0.8; host 13.8 GB/s.
ROCE_B, ROCE_L = 4 * 25e9 * 0.87, 10e-6
MI300X_BW = 5.3e12 * 0.8
HOST_GB_PER_S = 13.8e9
#: The conversion's HBM traffic on the sender: read the HND blocks, write the neutral request (512 tokens are
#: whole blocks of 16), plus the neutral form's 64 x 2 separate fp32 scales when the cache is fp8.
MOVED_BF16 = 2 * S


def one_request(sc: dict[str, Any]) -> dict[str, Any]:
    """The scenario's single request, arriving at 0.5 s to an idle system, as a row of its requests table."""
    sc = {**sc, "workload": {"trace": {"arrival_s": [0.5], "prompt_tokens": [512], "output_tokens": [4]}}}
    return dict(kvwire.simulate(sc).requests.row(0, named=True))


def test_the_splitwise_request_and_the_wafers_it_needs() -> None:
    """The example's request is Splitwise's 1.13 GB (it is 1.125 GiB: 1.208e9 B), and the wafers it gives the
    decode pool are the fewest that hold OPT-66B's 132.3 GB of BF16 weights within 0.9 x 44 GB each: 4 (also
    with an fp8 cache, whose weights stay BF16)."""
    h = kvwire.handoff("opt-66b", 512, link="roce-4x200g", device="mi300x")
    assert h["handoff_bytes"] == S and S / 2**30 == 1.125  # Splitwise rounds it to 1.13
    weights = kvwire.catalog()["models"]["opt-66b"]["resident_weight_bytes"]
    assert 3 * 0.9 * 44e9 < weights <= 4 * 0.9 * 44e9
    assert CV["wafers_needed"]() == 4 and CV["wafers_needed"](fp8=True) == 4


def test_a_wafer_too_few_is_refused_by_the_simulator_naming_the_pool() -> None:
    """``kvwire.simulate`` (not only validate) refuses a decode pool of 3 wafers for OPT-66B with
    DoesNotFitError at ``decode``, naming the 4 it needs and that the memory is on-chip SRAM."""
    sc = CV["scenario"]("bilateral format", requests=10)
    sc["decode"] = {"device": "wafer-scale", "devices_per_instance": 3}
    with pytest.raises(kvwire.DoesNotFitError) as ei:
        kvwire.simulate(sc)
    assert ei.value.path == "decode" and ei.value.devices_needed == 4
    assert "on-chip SRAM" in str(ei.value) and "devices_per_instance = 4" in str(ei.value)


def test_the_wafer_cannot_run_the_conversion_but_the_gpus_can() -> None:
    """The wafer-scale preset says it runs no KV conversion (``converts_kv`` false; every GPU preset true), so a
    receiver-side conversion onto it is refused at ``handoff.convert.at`` (naming the decode pool and the
    alternatives), and so is a sender-side one from a wafer prefill pool; the same conversion on an MI355X
    receiver is accepted."""
    devices = kvwire.catalog()["devices"]
    assert {k for k, d in devices.items() if not d["converts_kv"]} == {"wafer-scale"}
    r = CV["row"]("receiver (wafer)", requests=10)
    assert r["summary"] is None and "decode pool" in r["refused"] and '"sender" or "host"' in r["refused"]
    with pytest.raises(kvwire.ScenarioError) as ei:
        kvwire.simulate(CV["scenario"]("receiver (wafer)", requests=10))
    assert ei.value.path == "handoff.convert.at"
    wafer_prefill = {
        "model": "llama3-8b",
        "prefill": {"device": "wafer-scale"},
        "handoff": {"convert": {"from": "vllm_hnd", "to": "neutral", "at": "sender"}},
    }
    with pytest.raises(kvwire.ScenarioError) as ei:
        kvwire.validate(wafer_prefill)
    assert ei.value.path == "handoff.convert.at" and "prefill pool" in str(ei.value)
    sc = CV["scenario"]("receiver (wafer)", requests=10)
    sc["decode"] = {"device": "mi355x"}
    kvwire.validate(sc)
    inline = {"preset": "h100", "converts_kv": False}
    with pytest.raises(kvwire.ScenarioError):
        kvwire.validate({**sc, "decode": {"device": inline}})


@pytest.mark.parametrize("fp8", [False, True], ids=["bf16", "fp8"])
def test_each_placement_costs_its_formula(fp8: bool) -> None:
    """The example's closed-form row per placement is its formula: the network S'/(4 x 25 GB/s x 0.87) + 10 µs
    (S' = S, or S/2 for fp8); the sender's conversion its HBM pass over 5.3 TB/s x 0.8 (read + write, plus the
    fp8 neutral form's separate scales); the host's conversion S'/13.8 GB/s, inside the staging hops."""
    size = S // 2 if fp8 else S
    net = ROCE_L + size / ROCE_B
    base = CV["closed_form"]("bilateral format", fp8=fp8)
    assert base["transfer_s"] == pytest.approx(net, rel=1e-12) and base["convert_s"] == 0.0
    snd = CV["closed_form"]("sender (MI300X)", fp8=fp8)
    moved = 2 * (size + 64 * 2 * 4) if fp8 else MOVED_BF16
    assert snd["convert_s"] == pytest.approx(moved / MI300X_BW, rel=1e-12)
    assert snd["prefill_s"] - base["prefill_s"] == pytest.approx(snd["convert_s"], rel=1e-9)
    host = CV["closed_form"]("host CPU", fp8=fp8)
    bounce = CV["closed_form"]("host bounce, no conversion", fp8=fp8)
    assert host["convert_s"] == pytest.approx(size / HOST_GB_PER_S, rel=1e-12)
    assert host["transfer_s"] - bounce["transfer_s"] == pytest.approx(host["convert_s"], rel=1e-9)
    assert bounce["transfer_s"] - base["transfer_s"] == pytest.approx(bounce["staging_s"], rel=1e-9)


@pytest.mark.parametrize("placement", ["bilateral format", "sender (MI300X)", "host bounce, no conversion", "host CPU"])
def test_one_request_simulation_agrees_with_the_closed_form(placement: str) -> None:
    """MI300X → 4 wafers, one idle request: the simulated hand-off (kv_ready - first_token) is the calculator's
    transfer_s, and the simulated prefill (first_token - prefill_start) its prefill_s (the sender's conversion
    included)."""
    h = CV["closed_form"](placement)
    r = one_request(CV["scenario"](placement))
    assert r["kv_ready_s"] - r["first_token_s"] == pytest.approx(h["transfer_s"], rel=1e-9)
    assert r["first_token_s"] - r["prefill_start_s"] == pytest.approx(h["prefill_s"], rel=1e-9)


def test_registration_per_transfer_costs_exactly_its_formula_cross_vendor() -> None:
    """Ad-hoc buffers on the cross-vendor path: per-transfer registration adds 78.125 ms/GB x 1.208 GB to each
    hand-off, in the calculator and in a one-request simulation."""
    cost = 78.125e-3 * S / 1e9
    pool = CV["closed_form"]("sender (MI300X)")
    per = CV["closed_form"]("sender (MI300X)", registration="per_transfer")
    assert per["registration_s"] == pytest.approx(cost, rel=1e-12)
    assert per["transfer_s"] - pool["transfer_s"] == pytest.approx(cost, rel=1e-9)
    a = one_request(CV["scenario"]("sender (MI300X)"))
    b = one_request(CV["scenario"]("sender (MI300X)", registration="per_transfer"))
    assert (b["kv_ready_s"] - b["first_token_s"]) - (a["kv_ready_s"] - a["first_token_s"]) == pytest.approx(
        cost, rel=1e-9
    )


def test_the_example_rows_are_kvwire_results() -> None:
    """``row`` returns what ``kvwire.handoff`` and ``kvwire.simulate`` give for the same scenario (recomputed
    here), and at 10 req/s the host converters' measured utilisation is the offered work: rate x S/13.8 GB/s
    spread over the 4 prefill hosts (within the simulation's sampling)."""
    r = CV["row"]("host CPU", requests=400)
    sc = CV["scenario"]("host CPU", requests=400)
    again = kvwire.simulate(sc).summary
    assert {k: v for k, v in r["summary"].items() if k != "run"} == {k: v for k, v in again.items() if k != "run"}
    assert r["handoff"] == CV["closed_form"]("host CPU")
    offered = 10.0 * (S / HOST_GB_PER_S) / 4
    assert CV["utilisation"](r["summary"], "host-convert") == pytest.approx(offered, rel=0.15)
    assert r["summary"]["latency"]["handoff_s"]["p50"] >= r["handoff"]["transfer_s"] * (1 - 1e-9)


def test_crossings_are_where_the_advantage_changes_sign() -> None:
    """``crossings`` brackets each sign change of the split's advantage (one vendor's metric minus the split's,
    both simulated) to 1%: just below the rate the advantage has one sign, just above the other; for the BF16
    host conversion on mean TTFT (the 139 ms host path against one vendor's 14 ms hand-off and first MI300X
    step), the split pays only above some rate, and the one vendor's decode ceiling (20.6 req/s, decode-bound)
    lies above that rate."""
    rates = CV["rate_grid"]("host CPU", points=8)
    xs = CV["crossings"]("host CPU", "mean TTFT", rates=rates, requests=300)
    assert xs, "the split's TTFT advantage should change sign"
    r, up = xs[0]
    assert up
    assert CV["advantage_s"]("host CPU", r * 0.98, "mean TTFT", 300) < 0
    assert CV["advantage_s"]("host CPU", r * 1.02, "mean TTFT", 300) > 0
    one = kvwire.ceilings(CV["scenario"]("host CPU", one_vendor=True))
    assert one["binding"] == "decode" and r < one["ceiling_req_per_s"]
    assert CV["advantage_s"]("host CPU", rates[0], "mean TTFT", 300) < 0


def test_the_example_runs_and_prints_every_table(capsys: pytest.CaptureFixture[str]) -> None:
    """The example runs end to end (fewer requests here) and prints both placement tables, the transfer-layer
    table and a verdict per placement, cache and metric."""
    CV["main"].__globals__["REQUESTS"] = 300
    try:
        CV["main"]()
    finally:
        CV["main"].__globals__["REQUESTS"] = 2000
    out = capsys.readouterr().out
    assert out.count("refused: handoff.convert.at") == 2
    assert sum(1 for line in out.splitlines() if line.startswith(("BF16 ", "fp8 "))) == 8
    assert "roce-4x200g, per_transfer" in out and "Ceilings: one vendor" in out


def test_cli_handoff_cross_vendor_options() -> None:
    """``kvwire handoff`` reaches every cross-vendor argument of ``kvwire.handoff``: ``--decode-device``,
    ``--decode-devices-per-instance``, ``--compress-at``, ``--convert FROM TO`` with ``--convert-at``: its
    ``--json`` equals the library called with the same arguments, a receiver-side conversion costs the decode
    GPUs' HBM time for the bytes of both layouts (1.208 GB each way at four H100s' derated HBM), and the text
    report names the decode pool, the placement and the conversion."""
    from click.testing import CliRunner
    from kvwire.cli import main

    args = ["handoff", "--model", "opt-66b", "--prompt-tokens", "512", "--device", "mi300x",
            "--devices-per-instance", "4", "--decode-device", "h100", "--decode-devices-per-instance", "4",
            "--compression", "fp8", "--compress-at", "sender", "--convert", "vllm_hnd", "neutral",
            "--convert-at", "receiver"]  # fmt: skip
    r = CliRunner().invoke(main, [*args, "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    want = kvwire.handoff(
        "opt-66b", 512, device="mi300x", devices_per_instance=4, decode_device="h100",
        decode_devices_per_instance=4, compression="fp8", compress_at="sender",
        convert={"from": "vllm_hnd", "to": "neutral", "at": "receiver"},
    )  # fmt: skip
    assert got == want
    assert got["convert_at"] == "receiver"
    # Four H100s (3.35 TB/s each, derated 0.8 as the MI300X above) read the HND blocks and write the neutral form.
    assert got["convert_s"] == pytest.approx(MOVED_BF16 / (4 * 3.35e12 * 0.8), rel=1e-12)
    assert got["wire_bytes"] == pytest.approx(S / 2, rel=1e-12)  # fp8: one byte per value on the wire
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert "decode on 4 x h100" in r.output
    assert "fp8 (on the sender)" in r.output
    assert "convert (receiver)" in r.output


def test_cli_handoff_convert_errors() -> None:
    """Bad conversion options fail with the field or option named and no traceback: an unknown layout names
    ``handoff.convert.from``; a dtype without ``--convert`` is a usage error."""
    from click.testing import CliRunner
    from kvwire.cli import main

    r = CliRunner().invoke(main, ["handoff", "--convert", "nope", "neutral"])
    assert r.exit_code != 0 and "handoff.convert.from" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["handoff", "--to-dtype", "fp8_e4m3"])
    assert r.exit_code == 2 and "--convert FROM TO" in r.output
