"""Analytic capacity ceilings: the largest arrival rate each resource (prefill pool, decode pool, KV link,
colocated pool) sustains at the workload's mean prompt and output lengths, computed by the Rust core from the
cost model and the hand-off path's transfer costs (``docs/concepts/ceilings.md`` gives the formulas).

>>> import kvwire
>>> c = kvwire.ceilings({"link": "eth-25g"})
>>> c["binding"], round(c["kv_link_req_per_s"], 1)
('kv-link', 11.6)
>>> c["colocated_req_per_s"] is None
True
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

import kvwire._core as _core
from kvwire.scenario.load import scenario_json
from kvwire.traces.arrays import request_arrays


def ceilings(
    scenario: Mapping[str, Any] | str | Path | None = None,
    requests: pl.DataFrame | Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Each resource's analytic ceiling, arriving requests/s, for ``scenario`` (and ``requests``, an explicit
    request table as :func:`kvwire.simulate` takes).

    Returns a dict with ``prefill_req_per_s``, ``decode_req_per_s``, ``kv_link_req_per_s``,
    ``colocated_req_per_s`` (``None`` where the resource does not exist in this mode or carries no work),
    ``binding`` (the resource with the lowest ceiling), ``ceiling_req_per_s`` (its ceiling),
    ``offered_req_per_s`` (the workload's mean arrival rate, ``None`` if undefined), ``prompt_tokens_mean``
    and ``output_tokens_mean`` (what the ceilings were computed at: the served requests' means), and the
    details ``admitted_fraction``, ``handoff_fraction``, ``prefill_batch_prompts``, ``decode_batch`` and
    ``hops`` (each hop of the hand-off path with its own ceiling).

    Raises:
        ScenarioError: as :func:`kvwire.simulate` for a bad scenario or request table.

    >>> round(ceilings({"workload": {"requests": 50}})["prefill_req_per_s"], 1)
    19.7
    """
    text = scenario_json(scenario)
    arrays = () if requests is None else request_arrays(requests)
    out = _core.ceilings_json(text, *arrays)
    result: dict[str, Any] = json.loads(out)
    return result


def compact(x: float, fmt: str = ",.2f") -> str:
    """``x`` in ``fmt``, or in three significant digits beyond ten million, so that a rate over a vanishing
    window is not printed with 300 digits (the overload note's and the report's numbers).

    >>> compact(18.2249), compact(4.494e307)
    ('18.22', '4.49e+307')
    """
    return f"{x:.3g}" if abs(x) >= 1e7 else format(x, fmt)


def load(ceiling: Mapping[str, Any]) -> dict[str, Any]:
    """The summary's ``load`` entry: the ceilings plus ``load_factor`` (offered load / each resource's ceiling,
    ``None`` when the offered rate is undefined), ``overloaded`` (the workload's mean arrival rate exceeds the
    binding resource's ceiling, so its queue grows for as long as arrivals last) and ``overload_note`` (the
    report's one-line sentence, ``None`` when not overloaded). When every request was rejected at arrival
    (``admitted_fraction`` 0), ``all_rejected`` is true, nothing is overloaded, ``load_factor`` is ``None``
    and the note says what happened instead.

    >>> print(load({"binding": "kv-link", "ceiling_req_per_s": 11.6, "offered_req_per_s": 14.0})["overload_note"])
    overloaded: 14.00 req/s offered exceeds the kv-link ceiling of 11.60 req/s (its queue grows for as long as
    arrivals last)
    >>> print(load({"binding": "prefill", "ceiling_req_per_s": 2.1e-05, "offered_req_per_s": 1.0,
    ...             "admitted_fraction": 0.0})["overload_note"])  # doctest: +ELLIPSIS
    nothing was served: every request was rejected at arrival ...
    """
    out = dict(ceiling)
    offered, limit = out.get("offered_req_per_s"), out["ceiling_req_per_s"]
    if out.get("admitted_fraction") == 0.0:
        # Nothing reached the pools: no resource carried any load, and nothing queued.
        out["load_factor"] = None
        out["overloaded"] = False
        out["all_rejected"] = True
        out["overload_note"] = (
            "nothing was served: every request was rejected at arrival (its prompt and output exceed the KV "
            "capacity), so no resource carried load; the ceilings are for requests of this size, were they "
            "admitted (a larger-memory device, more devices per instance or shorter requests fit)"
        )
        return out
    out["all_rejected"] = False
    named = {
        "prefill": out.get("prefill_req_per_s"),
        "decode": out.get("decode_req_per_s"),
        "kv-link": out.get("kv_link_req_per_s"),
        "colocated": out.get("colocated_req_per_s"),
    }
    # Offered load over each resource's ceiling: one measure for pools and link alike (a decoding instance is
    # "busy" whenever anything runs, so busy time says little about how close it is to its limit).
    out["load_factor"] = (
        None if offered is None else {k: offered / v for k, v in named.items() if v is not None and v > 0}
    )
    over = offered is not None and offered > limit
    out["overloaded"] = over
    out["overload_note"] = (
        f"overloaded: {compact(float(offered))} req/s offered exceeds the {out['binding']} ceiling of "
        f"{compact(limit)} req/s (its queue grows for as long as arrivals last)"
        if over and offered is not None
        else None
    )
    return out


__all__ = ["ceilings", "compact", "load"]
