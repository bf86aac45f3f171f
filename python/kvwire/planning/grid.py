"""Sweep definitions and their points: ``{"base": scenario, "grid": {path: [values]}, "zip": {path: [values]},
"replicates": n}`` normalised (:func:`load_sweep`), every (point, replicate) resolved to a validated scenario
before anything runs (:func:`sweep_points`), and the replicate seeds (common random numbers at replicate 0).

>>> [(t["point"], t["values"]) for t in sweep_points({"grid": {"link": ["ib-ndr", "eth-25g"]}})]
[(0, {'link': 'ib-ndr'}), (1, {'link': 'eth-25g'})]
"""

from __future__ import annotations

import itertools
import json
import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import kvwire._core as _core
from kvwire.errors import Cancelled, KvwireError, ScenarioError, SweepError
from kvwire.scenario.load import _defaults, _plain, load_scenario, scenario_json
from kvwire.scenario.overrides import with_value, with_values

#: The keys of a sweep definition (a dict, or a TOML/JSON file).
DEFINITION_KEYS = ("base", "grid", "zip", "replicates")
#: Most replicates (seeds) per point: far beyond any confidence interval's needs (the 95% half-width over 10,000
#: draws is already 2% of their standard deviation), and a bound on the tasks one point may hold in memory.
MAX_REPLICATES = 10_000
#: Most (point, replicate) tasks of one sweep: each is resolved to its scenario JSON (about 2 kB) before any
#: runs, so 10 million of them are about 20 GB of memory; split a larger study into several sweeps.
MAX_TASKS = 10_000_000
#: Points validated between two looks at a sweep's ``cancel`` event while it resolves them.
CANCEL_CHECK_EVERY = 64

# Definitions


def _is_definition(obj: Mapping[str, Any]) -> bool:
    return any(k in obj for k in DEFINITION_KEYS)


def _read_file(path: Path) -> dict[str, Any]:
    return load_scenario(path)  # same reader and errors (JSON/TOML, a table at the top)


#: Where each field of a sweep was named: field path -> (section, the keys as written).
_Seen = dict[str, tuple[str, tuple[str, ...]]]


def _spelling(section: str, keys: tuple[str, ...]) -> str:
    """How a grid key was written: ``grid["link"]["preset"]`` (nested tables) or ``grid["link.preset"]``."""
    return section + "".join('["' + k + '"]' for k in keys)


def _flatten_fields(table: Any, where: str, seen: _Seen | None = None) -> dict[str, Any]:
    """``{"link": {"preset": [..]}}`` (a TOML table) and ``{"link.preset": [..]}`` are the same grid.

    "Nested" means: a value that is a table (a dict) is a level of the field path, never a value — the values
    of a field are always a list. So ``{"link": {"preset": [...]}}`` is the field ``link.preset``, and an
    empty table names no field and is refused (it would silently sweep nothing). Two keys that name the same
    field, or a field and a field inside it (``workload`` and ``workload.arrivals.rate_per_s``: every point
    would set both, the later overriding the earlier), are refused naming both keys — within one section and
    across ``grid`` and ``zip`` (``seen`` carries the fields of the sections read before).
    """
    return _flatten_checked(table, where, (), {} if seen is None else seen)


def _flatten_checked(table: Any, where: str, keys: tuple[str, ...], seen: _Seen) -> dict[str, Any]:
    here = ".".join((where, *keys))
    if not isinstance(table, Mapping):
        raise ScenarioError(f"{here}: expected a table of field path -> list of values", here)
    if keys and not table:
        raise ScenarioError(f"{here}: an empty table names no field (expected field path -> list of values)", here)
    out: dict[str, Any] = {}
    for key, values in table.items():
        if not isinstance(key, str) or not key or any(not p for p in key.split(".")):
            raise ScenarioError(f"{here}: {key!r} is not a dotted field path", here)
        if isinstance(values, Mapping):
            out.update(_flatten_checked(values, where, (*keys, key), seen))
            continue
        path = ".".join((*keys, key))
        _check_overlap(path, where, (*keys, key), seen)
        out[path] = values
    return out


def _check_overlap(path: str, where: str, keys: tuple[str, ...], seen: _Seen) -> None:
    """Refuse ``path`` when an earlier key names the same field, a field inside it or the field around it."""
    for other, (other_where, other_keys) in seen.items():
        inner_outer = "put the inner field in the outer one's values, or vary only one of them"
        if other == path:
            why, fix = f"both name the field {path}", "list all its values under one key"
        elif path.startswith(other + "."):
            why, fix = f"{path} is inside {other}", inner_outer
        elif other.startswith(path + "."):
            why, fix = f"{other} is inside {path}", inner_outer
        else:
            continue
        raise ScenarioError(
            f"{where}.{path}: the keys {_spelling(other_where, other_keys)} and {_spelling(where, keys)} overlap "
            f"({why}): every point would set both and one would silently override the other; {fix}",
            f"{where}.{path}",
        )
    seen[path] = (where, keys)


def _values(values: Any, where: str) -> list[Any]:
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise ScenarioError(f"{where}: expected a list of values, got {type(values).__name__}", where)
    if len(values) == 0:
        raise ScenarioError(f"{where}: the list of values is empty", where)
    plain: list[Any] = _plain(list(values), where)
    return plain


def load_sweep(definition: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """Normalise a sweep definition: ``{"base": scenario, "grid": {path: [values]}, "zip": {path: [values]},
    "replicates": int}`` from a dict or a ``.toml``/``.json`` file.

    ``base`` may be a scenario dict or the path of a scenario file (relative to the sweep file); ``grid`` and
    ``zip`` map dotted field paths to lists of values (nested TOML tables are joined with dots); every ``zip``
    list has the same length. Missing keys mean: the default scenario, no grid, no zip, 1 replicate.

    Raises:
        ScenarioError: naming the bad key (``grid.link.preset``, ``zip``, ``replicates``, ...).

    >>> load_sweep({"grid": {"link": {"preset": ["ib-ndr", "eth-25g"]}}})["grid"]
    {'link.preset': ['ib-ndr', 'eth-25g']}
    """
    root = Path(".")
    if isinstance(definition, str | Path):
        root = Path(definition).parent
        definition = _read_file(Path(definition))
    if not isinstance(definition, Mapping):
        raise ScenarioError(f"sweep: expected a dict or a .toml/.json file, got {type(definition).__name__}", "")
    unknown = [k for k in definition if k not in DEFINITION_KEYS]
    if unknown:
        raise ScenarioError(
            f"{unknown[0]}: unknown key of a sweep definition (expected {', '.join(DEFINITION_KEYS)})", str(unknown[0])
        )
    base = definition.get("base")
    if base is None:
        base = {}
    elif isinstance(base, str | Path):
        p = Path(base)
        base = load_scenario(p if p.is_absolute() else root / p)
    if not isinstance(base, Mapping):
        raise ScenarioError(f"base: expected a scenario table or a scenario file, got {type(base).__name__}", "base")
    seen: _Seen = {}
    grid_table = _flatten_fields(definition.get("grid") or {}, "grid", seen)
    zip_table = _flatten_fields(definition.get("zip") or {}, "zip", seen)
    grid = {k: _values(v, f"grid.{k}") for k, v in grid_table.items()}
    zipped = {k: _values(v, f"zip.{k}") for k, v in zip_table.items()}
    lengths = {k: len(v) for k, v in zipped.items()}
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"{k}: {n}" for k, n in lengths.items())
        first = next(iter(zipped))
        bad = next(k for k, n in lengths.items() if n != lengths[first])
        raise ScenarioError(f"zip.{bad}: every zip list must have the same length ({detail})", f"zip.{bad}")
    replicates = definition.get("replicates", 1)
    if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 1:
        raise ScenarioError(f"replicates: expected a whole number >= 1, got {replicates!r}", "replicates")
    return {"base": _plain(base, "base"), "grid": grid, "zip": zipped, "replicates": int(replicates)}


def definition_of(
    base: Mapping[str, Any] | str | Path | None,
    grid: Mapping[str, Any] | None,
    zip_: Mapping[str, Any] | None,
    replicates: int | None,
) -> dict[str, Any]:
    """The normalised definition of :func:`sweep`'s arguments (a definition dict/file, or base + grid)."""
    loaded: Mapping[str, Any] | None = None
    if isinstance(base, str | Path):
        loaded = _read_file(Path(base))
        if _is_definition(loaded):
            if grid is not None or zip_ is not None:
                raise ScenarioError("grid: given both in the sweep file and as an argument", "grid")
            d = load_sweep(base)
            if replicates is not None:
                d["replicates"] = load_sweep({"replicates": replicates})["replicates"]
            return d
    elif isinstance(base, Mapping) and _is_definition(base):
        if grid is not None or zip_ is not None:
            raise ScenarioError("grid: given both in the sweep definition and as an argument", "grid")
        merged = dict(base)
        if replicates is not None:
            merged["replicates"] = replicates
        return load_sweep(merged)
    return load_sweep(
        {
            "base": loaded if loaded is not None else base,
            "grid": grid or {},
            "zip": zip_ or {},
            "replicates": 1 if replicates is None else replicates,
        }
    )


# Points and seeds

_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def replicate_seed(base_seed: int, replicate: int) -> int:
    """The workload seed of a replicate: the base seed itself for replicate 0 (common random numbers across
    points), else SplitMix64(SplitMix64(base) XOR replicate) cut to 53 bits (exact in JSON and JavaScript).

    It depends on the base seed and the replicate index only — never on the worker, the order or the executor.

    >>> replicate_seed(1, 0), replicate_seed(1, 1) == replicate_seed(1, 1), replicate_seed(1, 1) != 1
    (1, True, True)
    """
    if replicate == 0:
        return base_seed
    return _splitmix64(_splitmix64(base_seed & _MASK64) ^ replicate) >> 11


def _base_seed(scenario: Mapping[str, Any]) -> int | None:
    """The workload seed a scenario runs with, or None when it replays explicit requests."""
    workload = scenario.get("workload")
    if isinstance(workload, Mapping):
        if "trace" in workload:
            return None
        seed = workload.get("seed")
        if isinstance(seed, int) and not isinstance(seed, bool):
            return seed
    default_seed: int = _defaults()["workload"]["seed"]
    return default_seed


def iter_point_values(definition: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The swept values of each point, in point order (grid-major, then zip), made one at a time."""
    grid: dict[str, list[Any]] = definition["grid"]
    zipped: dict[str, list[Any]] = definition["zip"]
    n_zip = len(next(iter(zipped.values()))) if zipped else 1
    for combo in itertools.product(*grid.values()):
        for j in range(n_zip):
            values = dict(zip(grid, combo, strict=True))
            values.update({k: v[j] for k, v in zipped.items()})
            yield values


def point_values(definition: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The swept values of every point, in point order (refused beyond :data:`MAX_TASKS`, :func:`check_size`)."""
    check_size(definition)
    return list(iter_point_values(definition))


def _error(point: int, values: dict[str, Any], e: KvwireError) -> dict[str, Any]:
    return {"point": point, "values": values, "path": e.path, "message": str(e)}


def task_count(definition: Mapping[str, Any]) -> int:
    """Points x replicates of a normalised definition, counted without making the points.

    >>> task_count(load_sweep({"grid": {"link": ["ib-ndr", "eth-25g"]}, "zip": {"workload.seed": [1, 2, 3]},
    ...                        "replicates": 2}))
    12
    """
    n_zip = len(next(iter(definition["zip"].values()))) if definition["zip"] else 1
    return math.prod(len(v) for v in definition["grid"].values()) * n_zip * int(definition["replicates"])


def check_size(definition: Mapping[str, Any]) -> None:
    """Refuse a definition beyond :data:`MAX_REPLICATES` replicates or :data:`MAX_TASKS` tasks, before any
    point is made (a ``ScenarioError`` naming ``replicates`` or ``grid``).

    >>> check_size(load_sweep({"replicates": 10**9}))
    Traceback (most recent call last):
    ...
    kvwire.errors.ScenarioError: replicates: 1,000,000,000 replicates is more than 10,000, the most one sweep takes
    """
    replicates = int(definition["replicates"])
    if replicates > MAX_REPLICATES:
        raise ScenarioError(
            f"replicates: {replicates:,} replicates is more than {MAX_REPLICATES:,}, the most one sweep takes",
            "replicates",
        )
    n = task_count(definition)
    if n > MAX_TASKS:
        raise ScenarioError(
            f"grid: {n:,} runs (points x replicates) is more than {MAX_TASKS:,}, the most one sweep takes (each "
            "is resolved and held in memory before any runs): split it into several sweeps",
            "grid",
        )


def resolve(definition: Mapping[str, Any], cancel: threading.Event | None = None) -> list[dict[str, Any]]:
    """Every (point, replicate) task with its scenario; raises :class:`SweepError` with all bad points,
    :class:`~kvwire.errors.Cancelled` once ``cancel`` is set (looked at every :data:`CANCEL_CHECK_EVERY`
    points), and ``ScenarioError`` for a definition too large (:func:`check_size`)."""
    check_size(definition)
    base = definition["base"]
    replicates = definition["replicates"]
    errors: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] = []
    n_points = task_count(definition) // replicates
    for i, values in enumerate(iter_point_values(definition)):
        if cancel is not None and i % CANCEL_CHECK_EVERY == 0 and cancel.is_set():
            raise Cancelled(f"sweep cancelled while validating its points ({i:,} of {n_points:,} done)", "cancel")
        try:
            sc = with_values(base, list(values.items()))
            text = scenario_json(sc)
            _core.validate(text)
        except KvwireError as e:
            errors.append(_error(i, values, e))
            continue
        seed = _base_seed(sc)
        if seed is None and replicates > 1:
            msg = "replicates: more than 1 replicate needs a generated workload (this point replays workload.trace)"
            errors.append({"point": i, "values": values, "path": "replicates", "message": msg})
            continue
        for r in range(replicates):
            if r == 0 or seed is None:
                task_text, task_seed = text, seed
            else:
                task_seed = replicate_seed(seed, r)
                task_text = scenario_json(with_value(sc, "workload.seed", task_seed))
            tasks.append({"point": i, "replicate": r, "seed": task_seed, "values": values, "scenario_json": task_text})
    if errors:
        shown = "\n".join(
            f"  point {e['point']} ({', '.join(f'{k}={v!r}' for k, v in e['values'].items())}): {e['message']}"
            for e in errors[:20]
        )
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        points = len({e["point"] for e in errors})
        raise SweepError(
            f"sweep: {points} of {n_points} points are invalid (nothing was run):\n{shown}{more}",
            errors[0]["path"],
            errors,
        )
    return tasks


def sweep_points(definition: Mapping[str, Any] | str | Path) -> list[dict[str, Any]]:
    """The resolved and validated tasks of a sweep definition, one per (point, replicate), in order.

    Each is ``{"point", "replicate", "seed", "values": {path: value}, "scenario": dict}``; ``len()`` is the
    total a sweep's progress counts to.

    Raises:
        SweepError: every invalid point at once (``e.errors``), before anything runs.

    >>> [(t["point"], t["replicate"]) for t in sweep_points({"grid": {"link": ["ib-ndr"]}, "replicates": 2})]
    [(0, 0), (0, 1)]
    """
    tasks = resolve(load_sweep(definition))
    return [
        {
            "point": t["point"],
            "replicate": t["replicate"],
            "seed": t["seed"],
            "values": t["values"],
            "scenario": json.loads(t["scenario_json"]),
        }
        for t in tasks
    ]


__all__ = [
    "CANCEL_CHECK_EVERY",
    "DEFINITION_KEYS",
    "MAX_REPLICATES",
    "MAX_TASKS",
    "check_size",
    "definition_of",
    "load_sweep",
    "point_values",
    "replicate_seed",
    "resolve",
    "sweep_points",
    "task_count",
]
