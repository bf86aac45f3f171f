"""The measured source: NVIDIA's AIConfigurator kernel database (the Apache-2.0 package ``aiconfigurator-core``,
``pip install 'kvwire[measured]'``), asked for whole-step latencies through its ``EngineHandle``.

For a pool, kvwire compiles the provider's engine for the model, system, serving engine and parallel layout,
then asks ``predict_prefill_latency(bs, isl, prefix)`` (``isl`` counts the cached prefix) at every prefill
point and ``decode_step_latency(bs, isl, osl=0)`` (a step at context ``isl + 1``) at every decode point of
:mod:`kvwire.timing.grid`, in milliseconds, stored in seconds.

How kvwire's fields map to the provider's (anything else is refused naming the field):

- ``model``: the presets in :data:`MODELS` (Llama 3 8B/70B run as Llama 3.1 8B/70B: the same shapes), or
  ``cost.timing.model``, a Hugging Face id the package knows (:func:`models`).
- the pool's ``device``: :data:`SYSTEMS` (or ``cost.timing.system`` for every pool).
- ``parallel``: ``tp`` → ``tp_size``, ``pp`` → ``pp_size``, ``dp`` → ``attention_dp_size``, ``ep`` →
  ``moe_ep_size`` with ``moe_tp_size = tp·dp/ep``; without ``parallel``, ``tp_size = devices_per_instance``.
- ``model.weights`` (when the scenario sets it): :data:`WEIGHTS`; otherwise the checkpoint's own (the
  provider reads it from the model's config, as kvwire's presets do).
- the pool's ``kv_format``: FP8 formats → ``fp8``, INT8 → ``int8``, none → BF16; others are refused.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import io
import os
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import kvwire.timing.grid as grid
from kvwire.errors import ScenarioError

#: The package that holds the measurements.
PACKAGE = "aiconfigurator-core"

#: kvwire device presets → the provider's systems (SXM boards; the PCIe ones only by ``cost.timing.system``).
SYSTEMS = {
    "a100": "a100_sxm",
    "h100": "h100_sxm",
    "h200": "h200_sxm",
    "b200": "b200_sxm",
    "gb200": "gb200",
    "gb300": "gb300",
}

#: kvwire model presets → the provider's models (Hugging Face ids).
MODELS = {
    "llama3-8b": "meta-llama/Meta-Llama-3.1-8B",
    "llama3.1-8b": "meta-llama/Meta-Llama-3.1-8B",
    "llama3-70b": "meta-llama/Meta-Llama-3.1-70B",
    "llama3.1-70b": "meta-llama/Meta-Llama-3.1-70B",
    "llama3.1-405b": "meta-llama/Meta-Llama-3.1-405B",
    "qwen3-32b": "Qwen/Qwen3-32B",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "deepseek-r1": "deepseek-ai/DeepSeek-R1",
    "gpt-oss-120b": "openai/gpt-oss-120b",
}

#: ``model.weights`` → the provider's (GEMM, MoE) quantisation modes.
WEIGHTS = {
    "bf16": ("bfloat16", "bfloat16"),
    "fp8": ("fp8", "fp8"),
    "nvfp4": ("nvfp4", "nvfp4"),
    "fp4": ("nvfp4", "nvfp4"),
    "mxfp4": ("bfloat16", "w4a16_mxfp4"),
}

#: The serving engines the database measured.
BACKENDS = ("vllm", "sglang", "trtllm")


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ScenarioError(
            'cost.timing.source: the "aiconfigurator" source needs the aiconfigurator-core package: '
            "pip install 'kvwire[measured]'",
            "cost.timing.source",
        ) from exc


def version() -> str:
    """The installed package's version, read from its metadata without importing it (``ScenarioError`` naming
    ``cost.timing.source`` when it is absent)."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        _module("aiconfigurator_core")  # raises the error that says what to install
        raise


def installed() -> bool:
    """Whether the package can be imported."""
    try:
        version()
    except ScenarioError:
        return False
    return True


def _data_root() -> Path:
    return Path(_module("aiconfigurator_core").__file__).parent / "systems"


def models() -> list[str]:
    """The Hugging Face ids of the models the package ships a config for (the only ones kvwire asks it about:
    any other id would make it download from the Hub). Read once per process, as :func:`offered`."""
    return list(_models())


@functools.cache
def _models() -> tuple[str, ...]:
    utils = _module("aiconfigurator_core.sdk.utils")
    return tuple(sorted(utils.DefaultHFModels))


@functools.cache
def _offered() -> tuple[dict[str, Any], ...]:
    """The installed package's data folders, scanned once per process (every scenario naming a system checks it:
    a sweep's points would scan them again each)."""
    root = _data_root() / "data"
    rows = []
    for system in sorted(p.name for p in root.iterdir() if p.is_dir()):
        for backend in BACKENDS:
            gemm = root / system / "gemm" / backend
            if not gemm.is_dir():
                continue
            versions = sorted((p.name for p in gemm.iterdir() if p.is_dir()), key=_version_key, reverse=True)
            rows.append({"system": system, "backend": backend, "versions": versions})
    return tuple(rows)


def offered() -> list[dict[str, Any]]:
    """What the installed package measured: one row per system and engine with its data versions (the
    newest first) — what the web page's timing-source selector offers.

    >>> rows = offered() if installed() else [{"system": "h100_sxm", "backend": "vllm", "versions": []}]
    >>> {"system", "backend", "versions"} <= set(rows[0])
    True
    """
    return [{**r, "versions": list(r["versions"])} for r in _offered()]


def _version_key(v: str) -> tuple[Any, ...]:
    parts = []
    for piece in v.replace("rc", ".-1.").split("."):
        parts.append((0, int(piece)) if piece.lstrip("-").isdigit() else (1, piece))
    return tuple(parts)


def literal_version(system: str, backend: str, requested: str | None) -> str | None:
    """The data version a request resolves to (``None``: the package's current one)."""
    perf = _module("aiconfigurator_core.sdk.perf_database")
    try:
        if perf.get_version_slots(system, backend) is None:
            return requested
        return str(perf.resolve_query_version(system, backend, "current" if requested is None else requested))
    except (ValueError, KeyError, FileNotFoundError) as exc:
        raise ScenarioError(f"cost.timing.version: {exc}", "cost.timing.version") from exc


def compile_kwargs(pool: dict[str, Any], path: str, experts: int, weights: str | None) -> dict[str, Any]:
    """The provider's layout and quantisation arguments for a pool of the echoed scenario."""
    par = pool.get("parallel")
    if isinstance(par, dict):
        tp, pp, ep, dp = (int(par.get(k, 1)) for k in ("tp", "pp", "ep", "dp"))
    else:
        tp, pp, ep, dp = int(pool.get("devices_per_instance", 1)), 1, 1, 1
    kw: dict[str, Any] = {"tp_size": tp, "pp_size": pp, "attention_dp_size": dp}
    if experts > 0:
        if (tp * dp) % ep:
            raise ScenarioError(
                f"{path}.parallel.ep: the provider needs tp·dp ({tp * dp}) to be a multiple of ep ({ep})",
                f"{path}.parallel.ep",
            )
        kw |= {"moe_tp_size": tp * dp // ep, "moe_ep_size": ep}
    kv = pool.get("kv_format") or "none"
    if kv.startswith("fp8"):
        kw["kvcache_quant_mode"] = "fp8"
    elif kv.startswith("int8"):
        kw["kvcache_quant_mode"] = "int8"
    elif kv != "none":
        raise ScenarioError(
            f"{path}.kv_format: the measured source has BF16, FP8 and INT8 KV caches, not {kv!r}",
            f"{path}.kv_format",
        )
    if weights is not None:
        if weights not in WEIGHTS:
            raise ScenarioError(
                f"model.weights: the measured source maps {sorted(WEIGHTS)}, not {weights!r}", "model.weights"
            )
        gemm, moe = WEIGHTS[weights]
        kw["gemm_quant_mode"] = gemm
        if experts > 0:
            kw["moe_quant_mode"] = moe
    return kw


def _quiet(f: Callable[[], Any]) -> Any:
    """``f()`` with the package's progress lines (printed while it loads its tables) kept off the user's
    terminal."""
    sink = io.StringIO()
    with redirect_stdout(sink), redirect_stderr(sink):
        return f()


def build(
    model_id: str,
    system: str,
    backend: str,
    data_version: str | None,
    kwargs: dict[str, Any],
    path: str,
) -> tuple[dict[str, Any], Callable[[str, int, int, int], float]]:
    """The pool's table (:func:`kvwire.timing.grid.table`) and the provider's step time, s, for further
    shapes (``("prefill", bs, tokens, cached)`` or ``("decode", bs, 0, context)``), to measure the bound."""
    sdk = _module("aiconfigurator_core.sdk")
    try:
        handle = _quiet(
            lambda: sdk.EngineHandle.compile(model_id, system, backend, backend_version=data_version, **kwargs)
        )
    except Exception as exc:  # a third-party package: whatever it raises, the pool is refused, named
        raise ScenarioError(
            f"{path}: the measured source cannot model this pool ({model_id} on {system}, {backend}, {kwargs}): {exc}",
            path,
        ) from exc

    def step_s(phase: str, bs: int, tokens: int, context: int) -> float:
        if phase == "prefill":
            ms = handle.predict_prefill_latency(bs, tokens + context, context)
        else:
            ms = handle.decode_step_latency(bs, max(context - 1, 0), 0)
        return float(ms) / 1e3

    try:
        prefill = grid.fill(grid.prefill_axes(), lambda b, q, p: step_s("prefill", b, q, p))
        decode = grid.fill(grid.decode_axes(), lambda b, c: step_s("decode", b, 0, c))
    except Exception as exc:  # as above
        raise ScenarioError(f"{path}: the measured source refused a step of the grid: {exc}", path) from exc
    return grid.table(prefill, decode), step_s


def systems_path_env() -> str | None:
    """``AICONFIGURATOR_SYSTEMS_PATH`` if the user points the package at other data (part of the cache key)."""
    return os.environ.get("AICONFIGURATOR_SYSTEMS_PATH")


__all__ = [
    "BACKENDS",
    "MODELS",
    "PACKAGE",
    "SYSTEMS",
    "WEIGHTS",
    "build",
    "compile_kwargs",
    "installed",
    "literal_version",
    "models",
    "offered",
    "version",
]
