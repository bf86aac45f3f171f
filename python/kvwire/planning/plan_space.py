"""The space :func:`kvwire.plan` searches: what may vary (``space``, with defaults from the model, the device's
scale-up domain and the base scenario), every configuration within a GPU budget, and each as a scenario.

>>> sp = _space({"tp": [1, 2]}, {}, "h100", "llama3-8b")
>>> len(_configs({"h100": sp}, {"h100": 2})), sp.domain
(4, 8)
>>> len(_configs({"h100": sp, "h200": sp}, {"h100": 1, "h200": 1}))  # 1 colocated of each, P/D one of each
4
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kvwire.errors import ScenarioError
from kvwire.planning.capacity import _current
from kvwire.presets import catalog

#: The fields of ``space`` and what each varies.
SPACE_FIELDS = (
    "mode",
    "tp",
    "pp",
    "ep",
    "dp",
    "prefill_instances",
    "decode_instances",
    "colocated_instances",
    "max_decode_batch",
    "max_num_batched_tokens",
    "kv_format",
    "compression",
    "link",
)

POOL_FIELDS = ("instances", "tp", "pp", "ep", "dp")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _budget(gpus: Any) -> dict[str, int]:
    """The budget: each device kind and its count, in name order (the plan does not depend on the order)."""
    if not isinstance(gpus, Mapping) or not gpus:
        raise ScenarioError(
            f"gpus: expected device counts, e.g. {{'h200': 32}} or {{'h100': 16, 'h200': 16}}, got {gpus!r}", "gpus"
        )
    devices = catalog()["devices"]
    out: dict[str, int] = {}
    for device, n in gpus.items():
        if not isinstance(device, str) or device not in devices:
            raise ScenarioError(f"gpus: unknown device {device!r}; known: {', '.join(sorted(devices))}", "gpus")
        if not _is_int(n) or n < 1:
            raise ScenarioError(f"gpus: expected a whole number of {device} >= 1, got {n!r}", "gpus")
        out[device] = int(n)
    return dict(sorted(out.items()))


def _budget_text(budget: Mapping[str, int]) -> str:
    """``16 x h100 + 16 x h200``."""
    return " + ".join(f"{n} x {device}" for device, n in budget.items())


def _model_field(model: Any, key: str) -> int | None:
    """A whole-number field of the model (its table's, else its preset's), None when unknown."""
    models = catalog()["models"]
    if isinstance(model, str):
        return int(models[model][key]) if model in models and key in models[model] else None
    if isinstance(model, Mapping):
        if key in model:
            return int(model[key])
        preset = model.get("preset")
        if isinstance(preset, str) and preset in models and key in models[preset]:
            return int(models[preset][key])
    return None


def _model_heads(model: Any) -> int | None:
    return _model_field(model, "heads")


def _values(space: Mapping[str, Any], key: str, default: list[Any]) -> list[Any]:
    if key not in space:
        return default
    value = space[key]
    if not isinstance(value, list | tuple) or not value:
        raise ScenarioError(f"space.{key}: expected a non-empty list, got {value!r}", f"space.{key}")
    return list(dict.fromkeys(value))


def _int_values(space: Mapping[str, Any], key: str, default: list[int]) -> list[int]:
    values = _values(space, key, default)
    for v in values:
        if not _is_int(v) or v < 1:
            raise ScenarioError(f"space.{key}: expected whole numbers >= 1, got {v!r}", f"space.{key}")
    return sorted(values)


@dataclass(frozen=True)
class _Space:
    modes: list[str]
    layouts: list[tuple[int, int, int, int]]  # (tp, pp, ep, dp)
    instances: dict[str, list[int] | None]
    max_decode_batch: list[int]
    max_num_batched_tokens: list[int]
    kv_format: list[str]
    compression: list[str]
    link: list[Any]
    domain: int | None


def _space(space: Any, base: Mapping[str, Any], device: str, model: Any) -> _Space:
    if space is None:
        space = {}
    if not isinstance(space, Mapping):
        raise ScenarioError(f"space: expected a dict, got {type(space).__name__}", "space")
    unknown = sorted(set(space) - set(SPACE_FIELDS))
    if unknown:
        raise ScenarioError(
            f"space.{unknown[0]}: unknown field; the space varies {', '.join(SPACE_FIELDS)}", f"space.{unknown[0]}"
        )
    modes = _values(space, "mode", ["disaggregated", "colocated"])
    for m in modes:
        if m not in ("disaggregated", "colocated"):
            raise ScenarioError(f"space.mode: expected 'disaggregated' or 'colocated', got {m!r}", "space.mode")
    scale_up = catalog()["devices"][device].get("scale_up")
    domain = int(scale_up["domain"]) if isinstance(scale_up, Mapping) and scale_up.get("domain") else None
    heads = _model_heads(model)
    top = domain or 1
    default_tp = [t for t in range(1, top + 1) if heads is None or heads % t == 0]
    if heads is None:
        default_tp = [t for t in default_tp if t & (t - 1) == 0]
    tps = _int_values(space, "tp", default_tp)
    pps = _int_values(space, "pp", [1])
    eps = _int_values(space, "ep", [1])
    dps = _int_values(space, "dp", [1])
    layouts = [
        (t, p, e, d)
        for t, p, e, d in itertools.product(tps, pps, eps, dps)
        if domain is None or t * p * d <= domain or "tp" in space or "pp" in space or "dp" in space
    ]
    if "ep" not in space and _model_field(model, "n_experts"):
        # A mixture of experts: each layout also with its experts spread over all its TP x DP ranks.
        layouts += [(t, p, t * d, d) for t, p, e, d in list(layouts) if e == 1 and t * d > 1]
        layouts = sorted(set(layouts), key=layouts.index)
    if domain is None:
        layouts = [lay for lay in layouts if lay == (1, 1, 1, 1)] or layouts
    instances: dict[str, list[int] | None] = {
        pool: (_int_values(space, f"{pool}_instances", []) if f"{pool}_instances" in space else None)
        for pool in ("prefill", "decode", "colocated")
    }
    mdb = _int_values(space, "max_decode_batch", [int(_current(base, "scheduler.max_decode_batch"))])
    mnbt = _int_values(space, "max_num_batched_tokens", [int(_current(base, "scheduler.max_num_batched_tokens"))])
    kvf = _values(space, "kv_format", [_current(base, "decode.kv_format") or "none"])
    comp = _values(space, "compression", [_current(base, "handoff.compression") or "none"])
    link_default = _current(base, "link")
    link_default = link_default.get("preset", link_default) if isinstance(link_default, Mapping) else link_default
    links = _values(space, "link", [link_default])
    return _Space(modes, layouts, instances, mdb, mnbt, kvf, comp, links, domain)


def _pool(device: str, n: int, layout: tuple[int, int, int, int], domain: int | None) -> dict[str, Any]:
    tp, pp, ep, dp = layout
    out: dict[str, Any] = {"device": device, "instances": n}
    if domain is not None:
        out["parallel"] = {"tp": tp, "pp": pp, "ep": ep, "dp": dp}
        if pp > 1:  # engines keep one batch per stage in flight (vLLM's virtual engines)
            out["parallel"]["micro_batches"] = pp
    else:
        out["devices_per_instance"] = 1
    return out


def _devices(layout: tuple[int, int, int, int]) -> int:
    return layout[0] * layout[1] * layout[3]


def _configs(spaces: Mapping[str, _Space], budget: Mapping[str, int]) -> list[dict[str, Any]]:
    """Every configuration of the spaces (one per device kind: their layouts differ with the scale-up domain)
    within the budget: one dict of its fields, in a fixed order. A colocated pool is of one kind; a disaggregated
    configuration's prefill and decode pools may be of two kinds, each within its own count."""
    out: list[dict[str, Any]] = []
    devices = list(budget)
    first = spaces[devices[0]]
    knobs = list(itertools.product(first.max_decode_batch, first.max_num_batched_tokens, first.kv_format))
    for mode in first.modes:
        if mode == "colocated":
            for dev in devices:
                sp = spaces[dev]
                for lay in sp.layouts:
                    per = _devices(lay)
                    counts = sp.instances["colocated"] or list(range(1, budget[dev] // per + 1))
                    for n in counts:
                        if n * per > budget[dev]:
                            continue
                        for mdb, mnbt, kvf in knobs:
                            out.append(
                                {
                                    "mode": mode,
                                    "colocated": (n, *lay),
                                    "colocated_device": dev,
                                    "max_decode_batch": mdb,
                                    "max_num_batched_tokens": mnbt,
                                    "kv_format": kvf,
                                    "compression": None,
                                    "link": None,
                                }
                            )
            continue
        for dev_p, dev_d in itertools.product(devices, devices):
            sp_p, sp_d = spaces[dev_p], spaces[dev_d]
            for lp, ld in itertools.product(sp_p.layouts, sp_d.layouts):
                per_p, per_d = _devices(lp), _devices(ld)
                for p in sp_p.instances["prefill"] or list(range(1, budget[dev_p] // per_p + 1)):
                    if p * per_p > budget[dev_p]:
                        continue
                    left = budget[dev_d] - (p * per_p if dev_p == dev_d else 0)
                    for d in sp_d.instances["decode"] or list(range(1, max(left, 0) // per_d + 1)):
                        if d * per_d > left:
                            continue
                        for (mdb, mnbt, kvf), comp, link in itertools.product(knobs, first.compression, first.link):
                            out.append(
                                {
                                    "mode": mode,
                                    "prefill": (p, *lp),
                                    "prefill_device": dev_p,
                                    "decode": (d, *ld),
                                    "decode_device": dev_d,
                                    "max_decode_batch": mdb,
                                    "max_num_batched_tokens": mnbt,
                                    "kv_format": kvf,
                                    "compression": comp,
                                    "link": link,
                                }
                            )
    return out


def _gpus(cfg: Mapping[str, Any]) -> int:
    pools = ["colocated"] if cfg["mode"] == "colocated" else ["prefill", "decode"]
    return sum(cfg[p][0] * cfg[p][1] * cfg[p][2] * cfg[p][4] for p in pools)


def _scenario(base: Mapping[str, Any], cfg: Mapping[str, Any], domains: Mapping[str, int | None]) -> dict[str, Any]:
    """The configuration as a scenario on the base; ``domains``: each device kind's scale-up domain."""
    sc = copy.deepcopy(dict(base))
    sc["mode"] = cfg["mode"]
    sched = dict(sc.get("scheduler", {}))
    sched["max_decode_batch"] = cfg["max_decode_batch"]
    sched["max_num_batched_tokens"] = cfg["max_num_batched_tokens"]
    sc["scheduler"] = sched
    if cfg["mode"] == "colocated":
        for key in ("prefill", "decode", "link", "handoff"):
            sc.pop(key, None)
        n, *lay = cfg["colocated"]
        dev = cfg["colocated_device"]
        sc["colocated"] = {**_pool(dev, n, tuple(lay), domains[dev]), "kv_format": cfg["kv_format"]}
        return sc
    sc.pop("colocated", None)
    p, *lp = cfg["prefill"]
    d, *ld = cfg["decode"]
    dev_p, dev_d = cfg["prefill_device"], cfg["decode_device"]
    sc["prefill"] = _pool(dev_p, p, tuple(lp), domains[dev_p])
    sc["decode"] = {**_pool(dev_d, d, tuple(ld), domains[dev_d]), "kv_format": cfg["kv_format"]}
    handoff = dict(sc.get("handoff", {}))
    handoff["compression"] = cfg["compression"]
    sc["handoff"] = handoff
    link = sc.get("link")
    if isinstance(link, Mapping):
        sc["link"] = {**link, "preset": cfg["link"]}
    else:
        sc["link"] = cfg["link"]
    return sc


def _row_fields(cfg: Mapping[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"mode": cfg["mode"], "gpus": _gpus(cfg)}
    for pool in ("prefill", "decode", "colocated"):
        values = cfg.get(pool)
        row[f"{pool}_device"] = cfg.get(f"{pool}_device")
        for name, i in zip(POOL_FIELDS, range(5), strict=True):
            row[f"{pool}_{name}"] = values[i] if values else None
    for key in ("max_decode_batch", "max_num_batched_tokens", "kv_format", "compression", "link"):
        row[key] = cfg[key]
    return row


__all__ = ["POOL_FIELDS", "SPACE_FIELDS"]
