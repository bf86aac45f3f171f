"""Scenario files and text: read a ``.json``/``.toml`` file, the built-in default written out, a scenario as the
JSON the core reads and as TOML.

>>> from kvwire.scenario import to_toml
>>> print(to_toml({"link": "eth-25g"}))
link = "eth-25g"
<BLANKLINE>
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import kvwire._core as _core
from kvwire.errors import ScenarioError
from kvwire.scenario.hf import resolve_hf_model
from kvwire.timing import resolve_timing
from kvwire.timing.resolve import dumps as timing_dumps


def default_scenario() -> dict[str, Any]:
    """The built-in default scenario written out in full (what ``{}`` means).

    >>> default_scenario()["model"]
    'llama3-8b'
    """
    out: dict[str, Any] = json.loads(_core.default_scenario_json())
    return out


def loads_json(text: str) -> Any:
    """``json.loads`` of a scenario, a sweep definition or a ``--set`` value, refusing a key given twice in one
    object (which ``json.loads`` would settle silently by keeping the last value; TOML refuses it too).
    Every JSON scenario text kvwire reads goes through here: scenario and sweep files, ``--set`` values and the
    service's ``POST /v1/scenarios/parse``.

    >>> loads_json('{"link": "eth-25g", "workload": {"seed": 1}}')
    {'link': 'eth-25g', 'workload': {'seed': 1}}
    >>> try:
    ...     loads_json('{"workload": {"seed": 1, "requests": 10, "seed": 2}}')
    ... except ScenarioError as e:
    ...     print(e.path)
    workload.seed

    Raises:
        ScenarioError: a key given twice; ``path`` is its dotted path (``"grid[0].link"`` inside an array).
        json.JSONDecodeError, RecursionError, ValueError: as ``json.loads`` (callers say where).
    """
    repeated: dict[int, tuple[dict[str, Any], str]] = {}  # id -> (the object, kept alive so ids stay unique; key)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out and id(out) not in repeated:
                repeated[id(out)] = (out, key)
            out[key] = value
        return out

    data = json.loads(text, object_pairs_hook=pairs)
    if repeated:
        path = _repeated_path(data, "", repeated)
        where = path or "scenario"
        raise ScenarioError(
            f"{where}: the key appears more than once in the same object; give it once (JSON readers disagree on "
            "which value a repeated key means)",
            path,
        )
    return data


def _repeated_path(value: Any, path: str, repeated: dict[int, tuple[dict[str, Any], str]]) -> str:
    """The dotted path of the first repeated key in ``value`` (depth first, in the document's order). An object
    that a repeated key replaced is not in ``value``, but its parent's repeated key is, so one is found."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        node, here = stack.pop()
        if isinstance(node, dict):
            if id(node) in repeated:
                key = repeated[id(node)][1]
                return f"{here}.{key}" if here else key
            stack.extend((v, f"{here}.{k}" if here else k) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((v, f"{here}[{i}]") for i, v in reversed(list(enumerate(node))))
    return path


def load_scenario(path: str | Path) -> dict[str, Any]:
    """Read a scenario from a ``.json`` or ``.toml`` file. A ``model.hf_config`` (a Hugging Face
    ``config.json``, relative to the scenario file) is read into the inline model (:mod:`kvwire.scenario.hf`).

    Raises:
        ScenarioError: the file is missing, unreadable, not valid JSON/TOML, or not a table/object (``path``
            the file); a key given twice in one object (``path`` the key's dotted path, the message naming the
            file); a ``model.hf_config`` that cannot be read (``path`` ``model.hf_config...``).
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
    if suffix not in (".json", ".toml"):
        raise ScenarioError(f"{p}: scenario files must end in .json or .toml", str(p))
    try:
        data: Any = tomllib.loads(text) if suffix == ".toml" else loads_json(text)
    except ScenarioError as e:  # a repeated key, named by its dotted path
        raise ScenarioError(f"{p}: {e}", e.path) from None
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
    # A model.hf_config is read here, relative to the scenario file (as a trace file is); a calibration file
    # (cost.timing.file) is made relative to it too, and read when the scenario runs.
    base = Path(os.path.abspath(p)).parent
    return _calibration_relative_to(dict(resolve_hf_model(data, base)), base)


def _calibration_relative_to(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """``data`` with a relative ``cost.timing.file`` made relative to ``base`` (the scenario file's folder)."""
    cost = data.get("cost")
    if not isinstance(cost, dict) or not isinstance(cost.get("timing"), dict):
        return data
    timing = cost["timing"]
    file = timing.get("file")
    if not isinstance(file, str) or not file or Path(file).is_absolute():
        return data
    return {**data, "cost": {**cost, "timing": {**timing, "file": str(base / file)}}}


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
    """The scenario as the JSON text the core reads (a file path is loaded first; ``None`` is ``{}``; a
    ``model.hf_config`` is read into the inline model, :mod:`kvwire.scenario.hf`)."""
    if scenario is None:
        return "{}"
    if isinstance(scenario, str | Path):
        scenario = load_scenario(scenario)
    if not isinstance(scenario, Mapping):
        raise ScenarioError(
            f"scenario: expected a dict or a path to a .json/.toml file, got {type(scenario).__name__}", ""
        )
    # A dict's model.hf_config (a relative path: relative to the working directory) becomes the inline model.
    # cost.timing: a measured source's tables are built (or read from the cache) here, on plain data.
    return timing_dumps(resolve_timing(_plain(resolve_hf_model(scenario, None), "")))


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


_DEFAULT: dict[str, Any] = {}


def _defaults() -> dict[str, Any]:
    """The default scenario, read once (callers never modify it)."""
    if not _DEFAULT:
        _DEFAULT.update(default_scenario())
    return _DEFAULT


__all__ = ["MAX_DEPTH", "default_scenario", "load_scenario", "loads_json", "scenario_json", "to_toml"]
