"""Changing fields of a scenario by dotted path: the CLI's ``--set PATH=VALUE`` and the swept fields of a sweep
point, with the rules that make the order of the assignments not matter.

>>> from kvwire.scenario import default_scenario, with_override
>>> sc = with_override(default_scenario(), "workload.arrivals.rate_per_s=14")
>>> sc["workload"]["arrivals"]["rate_per_s"]
14
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from kvwire.errors import ScenarioError
from kvwire.scenario.load import _defaults, loads_json

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
        value: Any = loads_json(raw)
    except ScenarioError as e:  # a key given twice in an object value
        path = ".".join(parts) + (f".{e.path}" if e.path else "")
        raise ScenarioError(
            f"--set {path}: the key appears more than once in the same object; give it once", path
        ) from None
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


__all__ = [
    "GENERATOR_FIELDS",
    "KIND_FIELDS",
    "PRESET_PATHS",
    "with_override",
    "with_overrides",
    "with_value",
    "with_values",
    "without_generator",
]
