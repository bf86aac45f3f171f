"""The KV hand-off in closed form: size, time on the wire, exposed time after prefill, link-full rate.

>>> from kvwire import handoff
>>> h = handoff("llama3-8b", 2048, link="eth-25g", cost={"prefill_lm_head": "all"})
>>> round(h["handoff_bytes"] / 1e6, 1), round(h["transfer_s"] * 1e3, 1), round(h["link_full_rate_per_s"], 1)
(268.4, 85.9, 11.6)
>>> round(handoff("llama3-8b", 2048, link="eth-25g", streaming="layer",
...               cost={"prefill_lm_head": "all"})["exposed_s"] * 1e3, 1)
28.7
"""

from __future__ import annotations

import json
from typing import Any, Literal

from kvwire import _core
from kvwire.scenario import scenario_json


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
) -> dict[str, Any]:
    """Hand-off of one ``prompt_tokens`` prompt of ``model`` from a prefill instance of ``device`` over an idle
    ``link``, in closed form (no queueing): ``bytes_per_token``, ``handoff_bytes``, ``wire_bytes``,
    ``transfer_s`` (latency + wire time), ``prefill_s``, ``exposed_s`` (time after the prefill until the KV
    has landed; with ``streaming="layer"`` each layer's slice leaves when that layer's prefill ends:
    latency + max(T_x'/L, T_x' - (L-1)/L·T_p)), and ``link_full_rate_per_s`` (requests/s of this size at which
    hand-offs alone fill the link). Presets and fields are those of a scenario; ``cost`` takes the scenario's
    cost switches (e.g. ``{"prefill_lm_head": "all"}`` for the reference's prefill).
    """
    if not isinstance(prompt_tokens, int) or isinstance(prompt_tokens, bool) or prompt_tokens < 1:
        from kvwire.errors import ScenarioError

        raise ScenarioError(f"prompt_tokens: must be a positive integer, got {prompt_tokens!r}", "prompt_tokens")
    sc: dict[str, Any] = {
        "model": model,
        "prefill": {"device": device, "devices_per_instance": devices_per_instance},
        "link": link,
        "handoff": {"compression": compression},
    }
    if cost is not None:
        sc["cost"] = cost
    out: dict[str, Any] = json.loads(_core.handoff_json(scenario_json(sc), prompt_tokens, streaming))
    return out


__all__ = ["handoff"]
