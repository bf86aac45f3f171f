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
    nics: int
    nic_efficiency: float
    gpus_per_nic: int
    launch_overhead_us: float
    registration: Literal["pool", "per_transfer"]
    registration_ms_per_gb: float
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
        "from_dtype": str,
        "to_dtype": str,
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
    skip_cached_prefix: bool


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


class _SessionsRequired(TypedDict):
    count: int
    turns: int


class SessionsDict(_SessionsRequired, total=False):
    """``workload.sessions``: closed-loop multi-turn sessions (README "Sessions")."""

    think_s: float
    system_prompts: int
    system_tokens: int


class WorkloadDict(TypedDict, total=False):
    requests: int
    seed: int
    arrivals: ArrivalsDict
    prompt_tokens: LengthDict
    output_tokens: LengthDict
    trace: TraceDict | TraceFileDict
    external: bool
    over_context: Literal["warn", "reject", "clip"]
    sessions: SessionsDict


class SloDict(TypedDict, total=False):
    ttft_s: float
    tpot_s: float


class MetricsDict(TypedDict, total=False):
    warmup_fraction: float
    first_token: Literal["prefill", "decode"]


class CostDict(TypedDict, total=False):
    step_overhead_s: float
    mem_util: float
    prefill_lm_head: Literal["last", "all"]
    enforce_tdp: bool
    dvfs: bool
    s_min: float


class SchedulerDict(TypedDict, total=False):
    policy: Literal["whole", "chunked"]
    max_prefill_tokens: int
    max_decode_batch: int
    max_num_batched_tokens: int


class KvDict(TypedDict, total=False):
    policy: Literal["reserve", "paged"]
    block_size: int
    watermark: float
    preemption: Literal["recompute", "swap"]


class DisaggregateDict(TypedDict, total=False):
    policy: Literal["always", "conditional"]
    min_prompt_tokens: int
    min_output_tokens: int
    max_link_wait_s: float


class RouterDict(TypedDict, total=False):
    prefill: Literal["least_queued_tokens", "round_robin", "prefix_affinity"]
    decode: Literal["least_loaded", "round_robin"]
    colocated: Literal["least_loaded", "round_robin"]
    disaggregate: DisaggregateDict


class EngineDict(TypedDict, total=False):
    macro_steps: bool
    per_slice_streaming: bool
    max_steps: int
    timeline: bool
    timeline_max_spans: int


class PrefixCacheDict(TypedDict, total=False):
    enabled: bool
    capacity_tokens: int | None


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
    kv: KvDict
    router: RouterDict
    engine: EngineDict
    prefix_cache: PrefixCacheDict


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
    except UnicodeDecodeError as e:
        raise ScenarioError(
            f"{p}: not UTF-8 text (byte {e.start}: {e.reason}); scenario files are UTF-8 JSON or TOML, not binary "
            "or UTF-16",
            str(p),
        ) from None
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
    except RecursionError:
        raise ScenarioError(f"{p}: nested too deeply to be a scenario", str(p)) from None
    except ValueError as e:
        why = "it holds an integer of more than 4,300 digits" if "4300 digits" in str(e) else str(e)
        raise ScenarioError(f"{p}: cannot read the file: {why}", str(p)) from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{p}: a scenario must be a JSON object / TOML table", str(p))
    return data


#: Deepest nesting a scenario may have (the real schema is 4 levels deep).
MAX_DEPTH = 32


def _plain(value: Any, path: str, depth: int = 0) -> Any:
    """Convert to JSON-able builtins, refusing non-finite numbers, integers beyond 64 bits, non-string keys and
    nesting deeper than :data:`MAX_DEPTH` with their path."""
    if depth > MAX_DEPTH:
        raise ScenarioError(f"{path}: nested more than {MAX_DEPTH} levels deep; a scenario is a few levels", path)
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not -(2**63) <= value < 2**64:
            digits = len(str(abs(value))) if value.bit_length() < 14_000 else int(value.bit_length() * 0.30103) + 1
            raise ScenarioError(
                f"{path or 'scenario'}: an integer of {digits:,} digits is out of range (the largest any field "
                "takes is 18,446,744,073,709,551,615)",
                path,
            )
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
            out[k] = _plain(v, f"{path}.{k}" if path else k, depth + 1)
        return out
    if isinstance(value, Sequence):
        return [_plain(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
    # numpy scalars and arrays, without importing numpy here.
    if hasattr(value, "tolist") and callable(value.tolist):
        return _plain(value.tolist(), path, depth)
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


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_drop_nulls(v) for v in value]
    return value


def to_toml(scenario: Mapping[str, Any]) -> str:
    """The scenario as TOML text (written by ``tomli-w``). TOML has no null: a ``None`` field means "the
    default" in a scenario, so it is left out, which means the same. ``load_scenario`` reads the text back.

    >>> print(to_toml({"link": "eth-25g", "workload": {"arrivals": {"rate_per_s": 14.0}, "seed": None}}))
    link = "eth-25g"
    <BLANKLINE>
    [workload.arrivals]
    rate_per_s = 14.0
    <BLANKLINE>

    Raises:
        ScenarioError: a value TOML cannot hold (a non-finite number, a non-string key).
    """
    import tomli_w

    return tomli_w.dumps(_drop_nulls(_plain(scenario, "")))


def validate(scenario: Mapping[str, Any] | str | Path | None) -> None:
    """Check a scenario without running it; raises the same errors as :func:`kvwire.simulate`.

    >>> validate({"decode": {"device": "a100"}})
    """
    from kvwire.trace_spec import split_file_trace  # (imports this module)

    scenario, trace_file = split_file_trace(scenario)
    if trace_file is not None:
        trace_file.check()  # the file's format and the options, without reading the requests
    _core.validate(scenario_json(scenario))


#: Fields that name a preset: a string there is a preset name, and may be given before or after its overrides.
PRESET_PATHS = ("model", "link", "link.host_link", "prefill.device", "decode.device", "colocated.device")
#: Fields that choose which sibling fields apply (a length distribution's ``dist``, the arrival ``process``),
#: and the siblings each kind uses (the core refuses the others).
KIND_FIELDS: dict[str, dict[str, set[str]]] = {
    "dist": {"fixed": {"value"}, "uniform": {"min", "max"}, "lognormal": {"mean", "cv", "min", "max"}},
    "process": {"poisson": {"rate_per_s"}, "gamma": {"rate_per_s", "cv"}},
}
#: Workload fields a request table replaces (``kvwire run --trace``, :func:`without_generator`).
GENERATOR_FIELDS = ("requests", "seed", "arrivals", "prompt_tokens", "output_tokens", "trace", "external", "sessions")


def _parse_assignment(assignment: str) -> tuple[list[str], Any]:
    if "=" not in assignment:
        raise ScenarioError(f"--set {assignment!r}: expected dotted.path=value", assignment)
    key, raw = assignment.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ScenarioError(f"--set {assignment!r}: empty path segment", key)
    try:
        value: Any = json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        value = raw
    except ValueError:  # an integer of more than 4,300 digits
        raise ScenarioError(
            f"--set {key.strip()}: an integer of more than 4,300 digits is out of range", key.strip()
        ) from None
    return parts, value


def with_overrides(scenario: Mapping[str, Any], assignments: Sequence[str]) -> dict[str, Any]:
    """Return a copy of ``scenario`` with every ``"dotted.path=value"`` applied (the CLI's ``--set``).

    The value is parsed as JSON when it parses (numbers, booleans, null, objects, lists), else taken as a
    string. Rules, so that the order of the assignments does not change their meaning:

    * **Presets first**: a preset name (``model=``, ``link=``, ``link.host_link=``, ``prefill.device=`` ...) is
      applied before the field assignments, and keeps the fields already set beside it, so ``link.channels=2``
      and ``link=eth-25g`` give two channels of 25 GbE in either order.
    * An object the scenario does not have yet starts from its default when that default is a flat table (so
      ``link.channels=2`` keeps the default link and ``workload.prompt_tokens.mean=1000`` the default
      distribution); a preset name becomes ``{"preset": name}`` so that its fields can be overridden.
    * Changing a distribution's ``dist`` (or the arrival ``process``) drops the fields the new kind does not use
      that only came from the old default, so ``workload.prompt_tokens.dist=fixed`` then ``.value=1000``
      works; a field the scenario or an assignment set stays, and the core refuses it if the new kind does not
      use it.

    >>> sc = with_overrides({}, ["link.channels=2", "link=eth-25g"])
    >>> sc["link"]["preset"], sc["link"]["channels"]
    ('eth-25g', 2)
    >>> with_overrides({}, ["workload.prompt_tokens.dist=fixed", "workload.prompt_tokens.value=1000"])["workload"]
    {'prompt_tokens': {'dist': 'fixed', 'value': 1000}}
    """
    parsed = [_parse_assignment(a) for a in assignments]
    try:
        return with_values(scenario, [(".".join(parts), value) for parts, value in parsed])
    except ScenarioError as e:
        raise ScenarioError(f"--set {e}", e.path) from None


def with_values(scenario: Mapping[str, Any], assignments: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """Return a copy of ``scenario`` with each ``(dotted_path, value)`` set, by the rules of
    :func:`with_overrides` (presets first, defaults for new objects, a ``dist``/``process`` change dropping the
    old kind's defaults). Sweeps set each point's swept fields with it.

    >>> with_values({}, [("link.channels", 2), ("link", "eth-25g")])["link"]
    {'preset': 'eth-25g', 'channels': 2}
    """
    pairs = []
    for path, value in assignments:
        parts = path.split(".")
        if not all(parts):
            raise ScenarioError(f"{path!r}: empty path segment", path)
        pairs.append((parts, value))
    preset = [isinstance(v, str) and ".".join(parts) in PRESET_PATHS for parts, v in pairs]
    ordered = [x for x, p in zip(pairs, preset, strict=True) if p] + [
        x for x, p in zip(pairs, preset, strict=True) if not p
    ]
    out = copy.deepcopy(dict(scenario))
    defaulted: set[str] = set()
    for parts, value in ordered:
        _assign(out, parts, copy.deepcopy(value), defaulted)
    return out


def with_value(scenario: Mapping[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Return a copy of ``scenario`` with the field at the dotted ``path`` set to ``value`` (sweeps, ``--set``).

    An object the scenario does not have yet starts from its default when that default is a flat table (so
    ``link.channels`` keeps the default link and ``workload.prompt_tokens.mean`` the default distribution);
    a preset name becomes ``{"preset": name}`` so that its fields can be overridden.

    >>> with_value({"link": "eth-25g"}, "link.channels", 2)["link"]
    {'preset': 'eth-25g', 'channels': 2}
    """
    return with_values(scenario, [(path, value)])


def _assign(out: dict[str, Any], parts: list[str], value: Any, defaulted: set[str]) -> None:
    """Apply one assignment, recording in ``defaulted`` the paths filled from defaults (not set by anyone)."""
    node: dict[str, Any] = out
    default: Any = _defaults()
    where = ".".join(parts)
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        default = default.get(part) if isinstance(default, dict) else None
        here = ".".join(parts[: i + 1])
        if child is None:
            flat = isinstance(default, dict) and not any(isinstance(v, dict) for v in default.values())
            child = node[part] = copy.deepcopy(default) if flat else {}
            defaulted.update(f"{here}.{k}" for k in child)
        elif isinstance(child, str):
            # A preset name written as a string becomes {"preset": name} so fields can be overridden.
            child = node[part] = {"preset": child}
        elif not isinstance(child, dict):
            raise ScenarioError(f"{where}: {here} is not an object", here)
        node = child
    key = parts[-1]
    current = node.get(key)
    if isinstance(value, str) and where in PRESET_PATHS and isinstance(current, dict) and "preset" in current:
        current["preset"] = value  # a new preset under the fields already set beside it
    else:
        uses = KIND_FIELDS.get(key, {}).get(value) if isinstance(value, str) else None
        if uses is not None and current is not None and value != current:
            prefix = ".".join(parts[:-1])
            for k in [k for k in node if k != key and k not in uses and f"{prefix}.{k}" in defaulted]:
                del node[k]
        node[key] = value
    defaulted.discard(where)


def with_override(scenario: Mapping[str, Any], assignment: str) -> dict[str, Any]:
    """One ``"dotted.path=value"`` assignment: ``with_overrides(scenario, [assignment])``."""
    return with_overrides(scenario, [assignment])


def without_generator(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``scenario`` for a run given a request table: the workload's generator fields
    (``requests``, ``seed``, ``arrivals``, the length distributions, an inline ``trace``) are dropped, since
    the table replaces them; the other workload fields (``over_context``) stay.

    >>> without_generator({"workload": {"requests": 10, "over_context": "clip"}, "link": "eth-25g"})
    {'workload': {'over_context': 'clip'}, 'link': 'eth-25g'}
    """
    out = copy.deepcopy(dict(scenario))
    workload = out.get("workload")
    if isinstance(workload, dict):
        out["workload"] = {k: v for k, v in workload.items() if k not in GENERATOR_FIELDS}
    return out


_DEFAULT: dict[str, Any] = {}


def _defaults() -> dict[str, Any]:
    """The default scenario, read once (callers never modify it)."""
    if not _DEFAULT:
        _DEFAULT.update(default_scenario())
    return _DEFAULT


__all__ = [
    "ScenarioDict",
    "default_scenario",
    "load_scenario",
    "scenario_json",
    "to_toml",
    "validate",
    "with_override",
    "with_overrides",
    "with_value",
    "with_values",
    "without_generator",
]
