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
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import kvwire._core as _core
from kvwire.errors import ScenarioError


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


_DEFAULT: dict[str, Any] = {}


def _defaults() -> dict[str, Any]:
    """The default scenario, read once (callers never modify it)."""
    if not _DEFAULT:
        _DEFAULT.update(default_scenario())
    return _DEFAULT


__all__ = ["MAX_DEPTH", "default_scenario", "load_scenario", "scenario_json", "to_toml"]
