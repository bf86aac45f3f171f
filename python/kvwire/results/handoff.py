"""The KV hand-off in closed form: size, time on the wire, exposed time after prefill, link-full rate.

>>> from kvwire import handoff
>>> h = handoff("llama3-8b", 2048, link="eth-25g", cost={"prefill_lm_head": "all"})
>>> round(h["handoff_bytes"] / 1e6, 1), round(h["transfer_s"] * 1e3, 1), round(h["link_full_rate_per_s"], 1)
(268.4, 85.9, 11.6)
>>> round(handoff("llama3-8b", 2048, link="eth-25g", streaming="layer",
...               cost={"prefill_lm_head": "all"})["exposed_s"] * 1e3, 1)
28.7

mxfp4 in transit is held to the stage's ops budget (max(S/rho/B, ops/(1.6·B))), as in the simulation; a model
that needs several devices sizes both pools with ``devices_per_instance``:

>>> round(handoff("llama3-8b", 2048, link="eth-25g", compression="mxfp4")["transfer_s"] * 1e3, 1)
53.7
>>> handoff("deepseek-v3", 2048, device="h200", devices_per_instance=8)["bytes_per_token"]
70272.0

The transfer layer is the link's: a NIXL connector's launch overhead (``ib-ndr-nixl``), registering ad-hoc
buffers per transfer, several NICs per transfer at a measured efficiency (``roce-4x200g``):

>>> h = handoff("llama3-8b", 2048, link={"preset": "ib-ndr", "registration": "per_transfer"})
>>> round(h["registration_s"] * 1e3, 2), h["registration_s"] == 78.125e-3 * h["wire_bytes"] / 1e9
(20.97, True)

A cross-vendor hand-off: prefill on MI300X, decode on another device, the cache converted from the producer's
layout and fp8 flavour to the consumer's (``convert``), at the ``"sender"``, ``"receiver"`` or ``"host"``
(with ``link={"model": "host_staged", ...}``):

>>> h = handoff({"preset": "llama3-8b", "kv_bytes_per_value": 1}, 2048, device="mi300x", decode_device="h100",
...             convert={"from": "vllm_hnd", "from_dtype": "fp8_e4m3fnuz", "to": "neutral", "to_dtype": "fp8_e4m3",
...                      "at": "receiver"})
>>> h["convert_at"], round(h["convert_s"] * 1e6, 1)
('receiver', 100.2)
"""

from __future__ import annotations

import json
from typing import Any, Literal

import kvwire._core as _core
from kvwire.results.types import HandoffResultDict
from kvwire.scenario.load import scenario_json


def handoff(
    model: str | dict[str, Any] = "llama3-8b",
    prompt_tokens: int = 2048,
    *,
    link: str | dict[str, Any] = "ib-ndr",
    compression: str = "none",
    streaming: Literal["whole", "layer"] = "whole",
    device: str | dict[str, Any] = "h100",
    devices_per_instance: int = 1,
    cost: dict[str, Any] | None = None,
    decode_device: str | dict[str, Any] | None = None,
    decode_devices_per_instance: int | None = None,
    compress_at: Literal["transit", "sender"] = "transit",
    convert: dict[str, Any] | None = None,
    parallel: dict[str, Any] | None = None,
    decode_parallel: dict[str, Any] | None = None,
) -> HandoffResultDict:
    """Hand-off of one ``prompt_tokens`` prompt of ``model`` from a prefill instance of ``devices_per_instance``
    x ``device`` over an idle ``link``, in closed form (no queueing): ``bytes_per_token``, ``handoff_bytes``,
    ``wire_bytes``, ``transfer_s`` (latency + data time; a compression runs in transit, adding the stage's
    1 µs, and its data time is max(S/rho/B, ops/(1.6·B)), as in the simulation), ``prefill_s``, ``exposed_s``
    (time after the prefill until the KV has landed; with ``streaming="layer"`` each layer's slice leaves when
    that layer's prefill ends: latency + max(T_x'/L, T_x' - (L-1)/L·T_p) with T_x' the data time), and
    ``link_full_rate_per_s`` (requests/s of this size at which hand-offs alone fill the link: 1 / data time).
    ``transfer_s`` runs over every hop (host-staged: PCIe out, a host conversion, the network, PCIe in) and
    includes the transfer layer: ``launch_s`` (the connector's launch overhead), ``registration_s``
    (``link.registration = "per_transfer"``: registration_ms_per_gb x the bytes handed to the NIC; 0 with a
    pre-registered pool) and ``staging_s`` (the hops other than the network). ``convert`` is a scenario's
    ``handoff.convert`` (``{"from", "to", "at", "from_dtype", "to_dtype", ...}``): ``convert_s`` is the
    conversion alone at ``convert_at`` (in ``prefill_s`` on the sender, added to the first decode step on the
    receiver, in ``staging_s`` on the host). The decode pool is ``decode_device`` x
    ``decode_devices_per_instance`` (default: the same as the prefill pool; only its fit is checked unless it
    converts). Presets and fields are those of a scenario; ``cost`` takes the scenario's cost switches (e.g.
    ``{"prefill_lm_head": "all"}`` for the reference's prefill); ``compress_at`` places the compression.
    ``parallel`` / ``decode_parallel`` are the pools' parallel layouts (a scenario pool's ``parallel``; the decode
    pool's defaults to the prefill pool's): with both, ``rank_pairs`` counts the (prefill rank, decode rank)
    pairs that exchange KV heads and ``descriptors_s`` is what the busiest rank's extra transfers and
    descriptors add to ``transfer_s`` (docs: concepts/parallelism, "The hand-off between layouts").

    Example:
        >>> import kvwire
        >>> unlike = kvwire.handoff("llama3-70b", 2048, link={"preset": "ib-ndr", "descriptor_us": 2.0},
        ...                         parallel={"tp": 8}, decode_parallel={"tp": 2})
        >>> unlike["rank_pairs"]
        8
    """
    if not isinstance(prompt_tokens, int) or isinstance(prompt_tokens, bool) or not 1 <= prompt_tokens < 2**32:
        from kvwire.errors import ScenarioError

        big = isinstance(prompt_tokens, int) and abs(prompt_tokens) >= 10**20
        shown = "a number of more than 20 digits" if big else repr(prompt_tokens)
        raise ScenarioError(
            f"prompt_tokens: must be a whole number of tokens from 1 to 4,294,967,295, got {shown}", "prompt_tokens"
        )
    # The decode pool mirrors the prefill pool: the scenario is validated whole, and a default 1-device decode
    # pool would refuse any model that needs several devices per instance.
    pool: dict[str, Any] = {"device": device, "devices_per_instance": devices_per_instance}
    decode: dict[str, Any] = {
        "device": device if decode_device is None else decode_device,
        "devices_per_instance": devices_per_instance
        if decode_devices_per_instance is None
        else decode_devices_per_instance,
    }
    if parallel is not None:
        pool["parallel"] = parallel
        if decode_parallel is None and decode_devices_per_instance is None:
            decode["parallel"] = parallel
    if decode_parallel is not None:
        decode["parallel"] = decode_parallel
    hand: dict[str, Any] = {"compression": compression}
    if compress_at != "transit":
        hand["compress_at"] = compress_at
    if convert is not None:
        hand["convert"] = convert
    sc: dict[str, Any] = {
        "model": model,
        "prefill": dict(pool),
        "decode": decode,
        "link": link,
        "handoff": hand,
    }
    if cost is not None:
        sc["cost"] = cost
    out: HandoffResultDict = json.loads(_core.handoff_json(scenario_json(sc), prompt_tokens, streaming))
    return out


__all__ = ["handoff"]
