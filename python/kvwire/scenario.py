"""Scenarios: load them from JSON/TOML files, check them at the boundary, and the typed shape of the dict.

A scenario is a plain dict (or a JSON/TOML file) following the public contract in ``README.md``; every
field is optional and ``{}`` is the built-in default. The TypedDicts below describe it for type checkers.

>>> from kvwire.scenario import default_scenario, with_override
>>> sc = with_override(default_scenario(), "workload.arrivals.rate_per_s=14")
>>> sc["workload"]["arrivals"]["rate_per_s"]
14
"""

from __future__ import annotations

import copy
import json
import math
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypedDict

from kvwire import _core
from kvwire.errors import ScenarioError

# --------------------------------------------------------------------------------------------------
# Typed shape (documentation for type checkers; the Rust core is the validator and the source of truth,
# and tests/test_schema.py checks these keys against its default scenario).


class PoolDict(TypedDict, total=False):
    device: str | dict[str, Any]
    instances: int
    devices_per_instance: int
    power_cap_w: float
    kv_format: str


class LinkDict(TypedDict, total=False):
    preset: str
    channels: int
    model: Literal["fcfs", "shared", "host_staged"]
    host_link: str | dict[str, Any]
    name: str
    bandwidth_gb_per_s: float
    latency_us: float
    pj_per_bit: float
    source: str


#: ``handoff.convert``: a layout conversion on the hand-off path (``from`` is a Python keyword, hence this form).
ConvertDict = TypedDict(
    "ConvertDict",
    {
        "from": str,
        "to": str,
        "at": Literal["sender", "receiver", "host"],
        "from_block_size": int,
        "to_block_size": int,
        "host_gb_per_s": float,
        "host_threads": int,
        "host_w_per_thread": float,
    },
    total=False,
)


class HandoffDict(TypedDict, total=False):
    compression: str
    compress_at: Literal["transit", "sender"]
    decompress_at: Literal["none", "receiver"]
    streaming: Literal["whole", "layer"]
    convert: ConvertDict


class ArrivalsDict(TypedDict, total=False):
    process: Literal["poisson", "gamma"]
    rate_per_s: float
    cv: float


class LengthDict(TypedDict, total=False):
    dist: Literal["fixed", "uniform", "lognormal"]
    value: int
    mean: float
    cv: float
    min: int
    max: int


class TraceDict(TypedDict):
    arrival_s: list[float]
    prompt_tokens: list[int]
    output_tokens: list[int]


class _TraceFileRequired(TypedDict):
    file: str


class TraceFileDict(_TraceFileRequired, total=False):
    """``workload.trace`` as a file to read (handled in Python, :mod:`kvwire.trace_spec`)."""

    format: Literal["auto", "azure", "burstgpt", "mooncake", "kvwire"]
    model: str | list[str]
    log_type: str | list[str]
    keep_failed: bool
    start_s: float
    duration_s: float
    time_scale: float
    rate_per_s: float
    sample: float
    seed: int


class WorkloadDict(TypedDict, total=False):
    requests: int
    seed: int
    arrivals: ArrivalsDict
    prompt_tokens: LengthDict
    output_tokens: LengthDict
    trace: TraceDict | TraceFileDict


class SloDict(TypedDict, total=False):
    ttft_s: float
    tpot_s: float


class MetricsDict(TypedDict, total=False):
    warmup_fraction: float


class CostDict(TypedDict, total=False):
    step_overhead_s: float
    mem_util: float
    prefill_lm_head: Literal["last", "all"]
    enforce_tdp: bool
    dvfs: bool
    s_min: float


class SchedulerDict(TypedDict, total=False):
    max_prefill_tokens: int
    max_decode_batch: int


class DisaggregateDict(TypedDict, total=False):
    policy: Literal["always", "conditional"]
    min_prompt_tokens: int
    min_output_tokens: int
    max_link_wait_s: float


class RouterDict(TypedDict, total=False):
    prefill: Literal["least_queued_tokens", "round_robin"]
    decode: Literal["least_loaded", "round_robin"]
    colocated: Literal["least_loaded", "round_robin"]
    disaggregate: DisaggregateDict


class EngineDict(TypedDict, total=False):
    macro_steps: bool
    per_slice_streaming: bool


class ScenarioDict(TypedDict, total=False):
    """A kvwire scenario. Every key is optional; omitted keys take the documented defaults."""

    model: str | dict[str, Any]
    mode: Literal["disaggregated", "colocated"]
    prefill: PoolDict
    decode: PoolDict
    colocated: PoolDict
    link: str | LinkDict
    handoff: HandoffDict
    workload: WorkloadDict
    slo: SloDict
    metrics: MetricsDict
    cost: CostDict
    scheduler: SchedulerDict
    router: RouterDict
    engine: EngineDict


# --------------------------------------------------------------------------------------------------


def default_scenario() -> dict[str, Any]:
    """The built-in default scenario written out in full (what ``{}`` means).

    >>> default_scenario()["model"]
    'llama3-8b'
    """
    out: dict[str, Any] = json.loads(_core.default_scenario_json())
    return out


def load_scenario(path: str | Path) -> dict[str, Any]:
    """Read a scenario from a ``.json`` or ``.toml`` file.

    Raises:
        ScenarioError: the file is missing, unreadable, not valid JSON/TOML, or not a table/object.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ScenarioError(f"{p}: cannot read scenario file: {e.strerror or e}", str(p)) from None
    suffix = p.suffix.lower()
    try:
        if suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            raise ScenarioError(f"{p}: scenario files must end in .json or .toml", str(p))
    except json.JSONDecodeError as e:
        raise ScenarioError(f"{p}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}", str(p)) from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{p}: invalid TOML: {e}", str(p)) from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{p}: a scenario must be a JSON object / TOML table", str(p))
    return data


def _plain(value: Any, path: str) -> Any:
    """Convert to JSON-able builtins, refusing non-finite numbers and non-string keys with their path."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ScenarioError(f"{path or 'scenario'}: must be a finite number, got {value}", path)
        return float(value)
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ScenarioError(f"{path or 'scenario'}: keys must be strings, got {k!r}", path)
            out[k] = _plain(v, f"{path}.{k}" if path else k)
        return out
    if isinstance(value, Sequence):
        return [_plain(v, f"{path}[{i}]") for i, v in enumerate(value)]
    # numpy scalars and arrays, without importing numpy here.
    if hasattr(value, "tolist") and callable(value.tolist):
        return _plain(value.tolist(), path)
    raise ScenarioError(f"{path or 'scenario'}: unsupported value of type {type(value).__name__}: {value!r}", path)


def scenario_json(scenario: Mapping[str, Any] | str | Path | None) -> str:
    """The scenario as the JSON text the core reads (a file path is loaded first; ``None`` is ``{}``)."""
    if scenario is None:
        return "{}"
    if isinstance(scenario, str | Path):
        scenario = load_scenario(scenario)
    if not isinstance(scenario, Mapping):
        raise ScenarioError(
            f"scenario: expected a dict or a path to a .json/.toml file, got {type(scenario).__name__}", ""
        )
    return json.dumps(_plain(scenario, ""), allow_nan=False)


def validate(scenario: Mapping[str, Any] | str | Path | None) -> None:
    """Check a scenario without running it; raises the same errors as :func:`kvwire.simulate`.

    >>> validate({"decode": {"device": "a100"}})
    """
    from kvwire.trace_spec import split_file_trace  # (imports this module)

    scenario, trace_file = split_file_trace(scenario)
    if trace_file is not None:
        trace_file.check()  # the file's format and the options, without reading the requests
    _core.validate(scenario_json(scenario))


def with_override(scenario: Mapping[str, Any], assignment: str) -> dict[str, Any]:
    """Return a copy of ``scenario`` with ``"dotted.path=value"`` applied (the CLI's ``--set``).

    The value is parsed as JSON when it parses (numbers, booleans, objects), else taken as a string. An
    object the scenario does not have yet starts from its default when that default is a flat table (so
    ``link.channels=2`` keeps the default link and ``workload.prompt_tokens.mean=1000`` the default
    distribution); a preset name becomes ``{"preset": name}`` so that its fields can be overridden.
    """
    if "=" not in assignment:
        raise ScenarioError(f"--set {assignment!r}: expected dotted.path=value", assignment)
    key, raw = assignment.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ScenarioError(f"--set {assignment!r}: empty path segment", key)
    try:
        value: Any = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    out = copy.deepcopy(dict(scenario))
    node: dict[str, Any] = out
    default: Any = default_scenario()
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        default = default.get(part) if isinstance(default, dict) else None
        if child is None:
            flat = isinstance(default, dict) and not any(isinstance(v, dict) for v in default.values())
            child = node[part] = copy.deepcopy(default) if flat else {}
        elif isinstance(child, str):
            # A preset name written as a string becomes {"preset": name} so fields can be overridden.
            child = node[part] = {"preset": child}
        elif not isinstance(child, dict):
            raise ScenarioError(
                f"--set {assignment!r}: {'.'.join(parts[: i + 1])} is not an object", ".".join(parts[: i + 1])
            )
        node = child
    node[parts[-1]] = value
    return out


__all__ = [
    "ScenarioDict",
    "default_scenario",
    "load_scenario",
    "scenario_json",
    "validate",
    "with_override",
]
