"""``cost.timing`` resolved before the core sees a scenario: a measured source gets one step-time table per pool
(built through the provider, or read from the cache), a calibrated one its fitted device in the pools.

The tables are built at validation, so a run, its ceilings, a sweep's points and the service all time steps
alike; within one process each table is read from disk once. What the tables came from is written to
``cost.timing.provenance`` (the package and data versions, the layout each pool was measured in, the
interpolation bound), which the run's ``scenario`` echoes; whether a table came from the cache is not (a run's
result does not depend on it), but :data:`LAST_BUILD` says.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from typing import Any

import kvwire._core as _core
import kvwire.timing.aiconfigurator as aic
import kvwire.timing.cache as cache
import kvwire.timing.grid as grid
from kvwire.errors import ScenarioError

#: The sources ``cost.timing.source`` takes.
SOURCES = ("roofline", "aiconfigurator", "calibrated")

#: How the last measured-source resolution got each pool's table: ``{pool: {"cache": "memory" | "disk" |
#: "built" | "shared", "seconds": float, "key": str}}`` (for the grid-building benchmark and the cache tests).
#: Written once a resolution ends: resolutions in other threads (the service validates one scenario while it
#: runs another) work on their own record.
LAST_BUILD: dict[str, dict[str, Any]] = {}

#: Tables already read in this process, by cache key.
_MEMORY: dict[str, dict[str, Any]] = {}
_MEMORY_LIMIT = 16
_MEMORY_LOCK = threading.Lock()


class TableText(str):
    """A table already serialised as JSON text (the core's ``TableSpec``): :func:`dumps` splices it into the
    scenario's text instead of encoding a few hundred kB of floats again for every run of a sweep."""

    __slots__ = ()


_MARK = "\u0000kvwire-table-{}\u0000"


def dumps(scenario: dict[str, Any]) -> str:
    """``scenario`` as the core's JSON text, with any :class:`TableText` spliced in as it is."""
    cost = scenario.get("cost")
    timing = cost.get("timing") if isinstance(cost, Mapping) else None
    tables = timing.get("tables") if isinstance(timing, Mapping) else None
    if not isinstance(tables, Mapping) or not any(isinstance(t, TableText) for t in tables.values()):
        return json.dumps(scenario, allow_nan=False)
    assert isinstance(cost, Mapping) and isinstance(timing, Mapping)
    texts = {name: t for name, t in tables.items() if isinstance(t, TableText)}
    marked = {name: (_MARK.format(name) if name in texts else t) for name, t in tables.items()}
    out = json.dumps({**scenario, "cost": {**cost, "timing": {**timing, "tables": marked}}}, allow_nan=False)
    for name, text in texts.items():
        out = out.replace(json.dumps(_MARK.format(name)), text, 1)
    return out


def resolve_timing(scenario: dict[str, Any]) -> dict[str, Any]:
    """``scenario`` (plain JSON data) with its ``cost.timing`` resolved; unchanged for the roofline. A bad
    timing field raises :class:`~kvwire.ScenarioError` naming it; a type the core refuses is left to the core.
    """
    cost = scenario.get("cost")
    timing = cost.get("timing") if isinstance(cost, Mapping) else None
    if not isinstance(timing, Mapping):
        return scenario
    source = timing.get("source")
    if source == "aiconfigurator" and "tables" not in timing:
        return _measured(scenario, dict(timing))
    if source == "calibrated" and "provenance" not in timing:
        from kvwire.timing.calibration import apply_calibration

        return apply_calibration(scenario, dict(timing))
    return scenario


def _without_timing(scenario: dict[str, Any]) -> dict[str, Any]:
    cost = {k: v for k, v in scenario["cost"].items() if k != "timing"}
    return {**scenario, "cost": cost}


def _pools(echo: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if echo.get("mode") == "colocated":
        return [("colocated", echo["colocated"])]
    return [("prefill", echo["prefill"]), ("decode", echo["decode"])]


#: Model fields that change what a step computes: a preset with any of them overridden is not the
#: provider's model any more.
SHAPE_FIELDS = (
    "layers", "d_model", "heads", "kv_heads", "head_dim", "d_ff", "vocab", "attention", "kv_lora_rank",
    "qk_rope_dim", "qk_nope_dim", "v_head_dim", "q_lora_rank", "n_experts", "top_k", "n_shared_experts",
    "moe_d_ff", "dense_layers",
)  # fmt: skip


def _model(echo: dict[str, Any], timing: dict[str, Any]) -> tuple[str, int, str | None]:
    """The provider's model id, the model's expert count and the weights format when it is not the preset's."""
    from kvwire.presets import catalog

    m = echo["model"]
    key = m.get("preset")
    preset = catalog()["models"].get(key) if isinstance(key, str) else None
    experts = int(m.get("n_experts", 0) or 0)
    weights = m.get("weights")
    if preset is not None and weights == preset.get("weights"):
        weights = None
    override = timing.get("model")
    if override is not None:
        if not isinstance(override, str):
            raise ScenarioError("cost.timing.model: expected a Hugging Face model id (a string)", "cost.timing.model")
        known = aic.models()
        if override not in known:
            raise ScenarioError(
                f"cost.timing.model: the measured source does not know {override!r}; it knows {', '.join(known)}",
                "cost.timing.model",
            )
        return override, experts, weights
    if preset is None or key not in aic.MODELS:
        raise ScenarioError(
            f"cost.timing.model: the measured source maps the presets {', '.join(sorted(aic.MODELS))}; for this "
            "model give the provider's id in cost.timing.model (kvwire.timing.aiconfigurator.models() lists them)",
            "cost.timing.model",
        )
    changed = [f for f in SHAPE_FIELDS if f in preset and m.get(f) != preset[f]]
    if changed:
        raise ScenarioError(
            f"model.{changed[0]}: the preset {key!r} with its shape changed is not the measured source's "
            f"{aic.MODELS[key]}; give the provider's id in cost.timing.model, or leave the shape as it is",
            f"model.{changed[0]}",
        )
    return aic.MODELS[key], experts, weights


def _system(timing: dict[str, Any], pool: dict[str, Any], path: str) -> str:
    system = timing.get("system")
    if system is not None:
        if not isinstance(system, str):
            raise ScenarioError("cost.timing.system: expected a system name (a string)", "cost.timing.system")
        known = sorted({r["system"] for r in aic.offered()})
        if system not in known:
            raise ScenarioError(
                f"cost.timing.system: the measured source has no system {system!r}; it has {', '.join(known)}",
                "cost.timing.system",
            )
        return system
    dev = pool.get("device")
    name = dev if isinstance(dev, str) else dev.get("preset") if isinstance(dev, dict) else None
    if name not in aic.SYSTEMS:
        raise ScenarioError(
            f"{path}.device: the measured source maps the devices {', '.join(sorted(aic.SYSTEMS))}; for "
            f"{name or 'an inline device'} give cost.timing.system",
            f"{path}.device",
        )
    return aic.SYSTEMS[name]


def _measured(scenario: dict[str, Any], timing: dict[str, Any]) -> dict[str, Any]:
    if "file" in timing:
        raise ScenarioError('cost.timing.file: only used with source "calibrated"', "cost.timing.file")
    rest = _without_timing(scenario)
    echo: dict[str, Any] = json.loads(_core.echo_json(json.dumps(rest, allow_nan=False)))
    if echo.get("speculative") is not None:
        raise ScenarioError(
            'speculative: not supported with a measured timing source yet (cost.timing.source "aiconfigurator"): '
            "use the roofline",
            "speculative",
        )
    backend = timing.get("backend", "vllm")
    if backend not in aic.BACKENDS:
        names = ", ".join(f"`{b}`" for b in aic.BACKENDS)
        raise ScenarioError(
            f"cost.timing.backend: unknown variant `{backend}`, expected one of {names}", "cost.timing.backend"
        )
    requested = timing.get("version")
    if requested is not None and not isinstance(requested, str):
        raise ScenarioError("cost.timing.version: expected a version string or null", "cost.timing.version")
    package = aic.version()
    model_id, experts, weights = _model(echo, timing)
    tables: dict[str, Any] = {}
    prov: dict[str, Any] = {}
    fresh: dict[str, tuple[dict[str, Any], Any]] = {}
    builds: dict[str, dict[str, Any]] = {}  # this resolution's LAST_BUILD, with each pool's entry
    for name, pool in _pools(echo):
        t0 = time.perf_counter()
        system = _system(timing, pool, name)
        kwargs = aic.compile_kwargs(pool, name, experts, weights)
        # The version as requested (null: the package's newest): with the package's own version in the key it
        # names one data version, which the entry records (resolving it costs the package half a second).
        key = {
            "provider": aic.PACKAGE,
            "provider_version": package,
            "systems_path": aic.systems_path_env(),
            "system": system,
            "backend": backend,
            "version": requested,
            "model": model_id,
            "layout": kwargs,
            "grid": grid.fingerprint(),
        }
        h = cache.key_of(key)
        entry = _MEMORY.get(h)
        how = "memory"
        if entry is None:
            entry = cache.load(key)
            how = "disk"
        if entry is None:
            # Pools measured in the same layout share one table (built once).
            twin = next((n for n, (k, _) in fresh.items() if k == key), None)
            if twin is not None:
                entry, how = builds[twin]["entry"], "shared"
            else:
                data_version = aic.literal_version(system, backend, requested)
                table, step_s = aic.build(model_id, system, backend, data_version, kwargs, f"cost.timing ({name} pool)")
                entry = {"table": table, "data_version": data_version}
                fresh[name] = (key, step_s)
                how = "built"
        if "text" not in entry:
            entry["text"] = TableText(json.dumps(entry["table"], allow_nan=False, separators=(",", ":")))
        tables[name] = entry["text"]
        prov[name] = {"system": system, "backend": backend, "version": entry.get("data_version"), "model": model_id}
        prov[name] |= kwargs
        builds[name] = {"cache": how, "seconds": time.perf_counter() - t0, "key": h, "entry": entry}
    resolved = {**timing, "backend": backend, "tables": tables}
    out = {**rest, "cost": {**rest["cost"], "timing": resolved}}
    for name, (key, step_s) in fresh.items():
        t0 = time.perf_counter()
        entry = builds[name]["entry"]
        entry["bound"] = _bound(out, name, step_s)
        cache.store(key, {k: v for k, v in entry.items() if k != "text"})
        builds[name]["seconds"] += time.perf_counter() - t0
    for name in prov:
        entry = builds[name].pop("entry")
        entry.pop("table", None)  # kept as text: the core reads that
        prov[name]["bound"] = entry.get("bound")
        with _MEMORY_LOCK:
            if len(_MEMORY) >= _MEMORY_LIMIT:
                _MEMORY.pop(next(iter(_MEMORY)))
            _MEMORY[builds[name]["key"]] = entry
    LAST_BUILD.clear()
    LAST_BUILD.update(builds)
    resolved["provenance"] = {"provider": f"{aic.PACKAGE} {package}", "pools": prov}
    return out


def _bound(scenario: dict[str, Any], pool: str, step_s: Any) -> dict[str, float]:
    """The stated interpolation error of a pool's table, per phase: twice the largest relative error of the core's
    interpolation against the provider at the cell centres of the grid (for a smooth curve the error between
    two points is largest at the centre; for a jump in the provider's own table, a kernel's tile boundary, it
    is up to twice the centre's just after the jump), with the median error at the centres."""
    pa, da = grid.prefill_axes(), grid.decode_axes()
    rows: list[tuple[str, int, int, int]] = []
    for b in grid.centres(pa[0]):
        for q in grid.centres(pa[1]):
            for p in grid.centres(pa[2]):
                rows.append(("prefill", b, q, p))
    for b in grid.centres(da[0]):
        for c in grid.centres(da[1]):
            rows.append(("decode", b, 0, c))
    got = step_times(scenario, pool, rows)
    errors: dict[str, list[float]] = {"prefill": [], "decode": []}
    for r, t in zip(rows, got, strict=True):
        want = step_s(*r)
        errors[r[0]].append(abs(t - want) / want)
    out: dict[str, float] = {}
    for phase, e in errors.items():
        e.sort()
        out[phase] = 2 * e[-1]
        out[f"{phase}_median_at_centres"] = e[len(e) // 2]
    return out


def step_times(scenario: dict[str, Any], pool: str, rows: list[tuple[str, int, int, int]]) -> list[float]:
    """The core's time, s, of each ``(phase, batch, prompt_tokens, context_tokens)`` step on ``pool``."""
    out = json.loads(
        _core.step_times_json(
            dumps(scenario),
            pool,
            [r[0] for r in rows],
            [r[1] for r in rows],
            [r[2] for r in rows],
            [r[3] for r in rows],
        )
    )
    return [float(a["time_s"]) for a in out]


__all__ = ["LAST_BUILD", "SOURCES", "TableText", "dumps", "resolve_timing", "step_times"]
