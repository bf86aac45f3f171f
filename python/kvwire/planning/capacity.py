"""Capacity planning: the highest load that still meets the SLO, the best prefill:decode split, and
disaggregated vs colocated on the same hardware.

:func:`capacity` starts from the analytic ceilings (:func:`kvwire.ceilings`: the arrival rate at which each
resource — prefill pool, decode pool, KV link, colocated pool — would be busy all the time at the workload's
mean lengths; no queue is stable above the lowest one), brackets the SLO's edge just below the binding
ceiling, and bisects it (in ratio) with simulations until the bracket is within ``rel_tol``. Every evaluated
point is kept. The search assumes that SLO attainment falls as the field grows (true of the arrival rate,
prompt and output lengths); with common random numbers (the same seed at every rate, so arrivals are one
draw scaled) attainment is in practice monotone in the rate.

>>> import kvwire
>>> r = kvwire.capacity({"workload": {"requests": 2000}, "link": "eth-25g"})
>>> r.binding, r.evaluations <= 8, r.capacity < r.ceilings["ceiling_req_per_s"]
('kv-link', True, True)
"""

from __future__ import annotations

import copy
import math
import threading
import typing
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

import polars as pl

from kvwire.errors import Cancelled, ScenarioError
from kvwire.planning.progress import ProgressFn
from kvwire.planning.sweep import DEFAULT_IN_FLIGHT, check_arguments, default_workers, flatten_summary
from kvwire.planning.tasks import summary_on
from kvwire.results.run import simulate
from kvwire.scenario.check import validate
from kvwire.scenario.load import _defaults, load_scenario
from kvwire.scenario.overrides import with_value
from kvwire.scenario.types import ScenarioDict

#: The field :func:`capacity` searches by default.
RATE_FIELD = "workload.arrivals.rate_per_s"
#: First probe below the ceiling when the ceiling itself misses the SLO (then x this squared, if needed).
FIRST_STEP_DOWN = 0.8
#: Growth of the probe while the SLO is still met above the ceiling (a short run can outlast a slow queue).
STEP_UP = 1.25
#: Probes allowed to find each end of the bracket before giving up with a note.
MAX_BRACKET_PROBES = 12
#: The arrival rates a scenario takes (``workload.arrivals.rate_per_s``, the core's ``MIN_RATE`` and
#: ``MAX_QUANTITY`` in ``rust/kvwire-core/src/limits.rs``): the search's probes stay within them.
MIN_RATE, MAX_RATE = 1e-6, 1e9


def _scenario(scenario: Mapping[str, Any] | str | Path | None) -> dict[str, Any]:
    if scenario is None:
        return {}
    if isinstance(scenario, str | Path):
        return load_scenario(scenario)
    if not isinstance(scenario, Mapping):
        raise ScenarioError(f"scenario: expected a dict or a path, got {type(scenario).__name__}", "scenario")
    return copy.deepcopy(dict(scenario))


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _check(slo_attainment: float, rel_tol: float) -> None:
    if not _is_number(slo_attainment) or not 0.0 < slo_attainment <= 1.0:
        raise ScenarioError(f"slo_attainment: expected a fraction in (0, 1], got {slo_attainment!r}", "slo_attainment")
    if not _is_number(rel_tol) or not 0.0 < rel_tol < 0.5:
        raise ScenarioError(f"rel_tol: expected a relative tolerance in (0, 0.5), got {rel_tol!r}", "rel_tol")


def _check_callbacks(progress: Any, cancel: Any) -> None:
    """A search's ``progress`` must be a callable (no progress bar of its own: ``True`` is refused too) and its
    ``cancel`` a ``threading.Event``; a ScenarioError names the wrong one."""
    if isinstance(progress, bool):
        raise ScenarioError(f"progress: expected a callable progress(done, total), got {progress!r}", "progress")
    check_arguments(progress=progress, cancel=cancel)


def _schema_type(path: str) -> type | None:
    """``int`` or ``float`` when the typed scenario (:class:`kvwire.scenario.ScenarioDict`) says which the field
    at ``path`` is (``workload.prompt_tokens.value``: int, ``.mean``: float), else None."""
    hint: Any = ScenarioDict
    for part in path.split("."):
        tables = [h for h in (typing.get_args(hint) or (hint,)) if typing.is_typeddict(h)]
        hints = [typing.get_type_hints(t) for t in tables]
        found = [h[part] for h in hints if part in h]
        if not found:
            return None
        hint = found[0]
    kinds = {a for a in (typing.get_args(hint) or (hint,)) if a in (int, float, bool)}
    return kinds.pop() if len(kinds) == 1 and bool not in kinds else None


def _current(scenario: Mapping[str, Any], path: str) -> Any:
    """The value at ``path`` in the scenario, else in the default scenario (``None`` when neither has it)."""
    for source in (scenario, _defaults()):
        node: Any = source
        for part in path.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if node is not None:
            return node
    return None


def field_type(scenario: Mapping[str, Any], path: str) -> type:
    """Whether :func:`capacity` searches ``path`` over whole numbers (``int``) or real numbers (``float``):
    the scenario schema's type of the field, or, for a field it does not type (inside a custom model or
    device table), the type of the field's current value in the scenario (or its default).

    >>> field_type({}, "workload.prompt_tokens.value"), field_type({}, "workload.prompt_tokens.mean")
    (<class 'int'>, <class 'float'>)
    >>> field_type({"model": {"layers": 32}}, "model.layers"), field_type({}, "workload.requests")
    (<class 'int'>, <class 'int'>)
    """
    kind = _schema_type(path)
    if kind is not None:
        return kind
    current = _current(scenario, path)
    return int if isinstance(current, int) and not isinstance(current, bool) else float


def _ceilings(scenario: Mapping[str, Any]) -> dict[str, Any]:
    from kvwire.results.ceilings import ceilings

    out: dict[str, Any] = ceilings(scenario)
    return out


def _clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become None (the summary never holds them; this guards the ceilings)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _clean_dict(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = _clean(d)
    return out


@dataclass
class CapacityResult:
    """What :func:`capacity` found.

    Attributes:
        field: the searched field (dotted path).
        slo_attainment: the target share of measured requests meeting the SLO.
        rel_tol: the bracket's relative width at the end.
        capacity: the highest evaluated value that met the target (``None`` if none did); an ``int`` for a
            whole-number field (``workload.requests``, ``workload.prompt_tokens.value``, ...).
        failed_at: the lowest evaluated value above it that missed the target (``None`` if none did).
        ceilings: the analytic ceilings the search started from (``None`` when the field is not the rate).
        binding: the resource with the lowest ceiling (``"prefill"``, ``"decode"``, ``"kv-link"``, ``"colocated"``).
        evaluations: simulations run.
        note: why the search stopped early, or that the answer is at the largest (smallest) rate a scenario
            takes, if so (``None`` otherwise).
        points: every evaluated point: ``<field>``, ``met``, then the flattened summary, in evaluation order.
    """

    field: str
    slo_attainment: float
    rel_tol: float
    capacity: float | int | None
    failed_at: float | int | None
    ceilings: dict[str, Any] | None
    binding: str | None
    evaluations: int
    note: str | None
    points: pl.DataFrame = dataclass_field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable (no NaN), with the points as a list of rows.

        >>> import json, kvwire
        >>> json.loads(json.dumps(kvwire.capacity({"workload": {"requests": 200}}).to_dict()))["field"]
        'workload.arrivals.rate_per_s'
        """
        return _clean_dict(
            {
                "field": self.field,
                "slo_attainment": self.slo_attainment,
                "rel_tol": self.rel_tol,
                "capacity": self.capacity,
                "failed_at": self.failed_at,
                "ceilings": self.ceilings,
                "binding": self.binding,
                "evaluations": self.evaluations,
                "note": self.note,
                "points": self.points.to_dicts(),
            }
        )


class _Search:
    """Evaluations of one capacity search: the field's value -> attainment, each kept as a table row."""

    def __init__(
        self,
        base: dict[str, Any],
        field_path: str,
        target: float,
        progress: ProgressFn | None,
        cancel: threading.Event | None,
        executor: Executor | None = None,
    ) -> None:
        self.base, self.field, self.target = base, field_path, target
        self.progress, self.cancel, self.executor = progress, cancel, executor
        self.rows: list[dict[str, Any]] = []

    def _cancelled(self) -> Cancelled:
        return Cancelled(f"capacity search cancelled after {len(self.rows)} simulations", "cancel")

    def met(self, value: float) -> bool:
        if self.cancel is not None and self.cancel.is_set():
            raise self._cancelled()
        scenario = with_value(self.base, self.field, value)
        if self.executor is None:  # here, ``cancel`` stops the simulation within milliseconds
            summary = dict(simulate(scenario, cancel=self.cancel).summary)
        else:
            summary = summary_on(self.executor, scenario, self.cancel, self._cancelled)
        attainment = summary["slo"]["attainment"]
        ok = attainment is not None and attainment >= self.target
        self.rows.append({self.field: value, "met": ok, **flatten_summary(summary)})
        if self.progress is not None:
            self.progress(len(self.rows), len(self.rows) + 1)
        return ok

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame(self.rows, infer_schema_length=None, strict=False)


def _bisect(search: _Search, lo: float, hi: float, rel_tol: float) -> tuple[float, float]:
    """Narrow [lo met, hi missed] until hi ≤ lo·(1 + rel_tol) (geometric midpoints when lo > 0)."""
    while hi > lo * (1.0 + rel_tol) and hi - lo > 1e-12 * max(abs(hi), 1.0):
        mid = math.sqrt(lo * hi) if lo > 0 else 0.5 * (lo + hi)
        if search.met(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def _bisect_int(search: _Search, lo: int, hi: int, rel_tol: float) -> tuple[int, int]:
    """:func:`_bisect` over whole numbers: narrow [lo met, hi missed] until hi ≤ lo·(1 + rel_tol) or hi = lo + 1
    (then lo is the largest whole number meeting the target), at whole geometric midpoints."""
    while hi - lo > 1 and hi > lo * (1.0 + rel_tol):
        mid = math.isqrt(lo * hi) if lo > 0 else (lo + hi) // 2
        mid = min(max(mid, lo + 1), hi - 1)
        if search.met(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def _check_bound(base: dict[str, Any], field: str, value: float | int, which: str) -> None:
    """A bound the scenario does not take is refused naming ``bounds`` (before any simulation)."""
    try:
        validate(with_value(base, field, value))
    except ScenarioError as e:
        raise ScenarioError(
            f"bounds: the {which} bound {value!r} is not a value {field} takes: {e}", "bounds"
        ) from None


def _search_bounds(base: dict[str, Any], field: str, bounds: Any, kind: type) -> tuple[float, float] | tuple[int, int]:
    """``bounds`` checked: two finite numbers, low < high (whole numbers inside them for an integer field),
    each a value the scenario takes."""
    if (
        not isinstance(bounds, tuple | list)
        or len(bounds) != 2
        or not all(_is_number(b) and math.isfinite(b) for b in bounds)
        or not bounds[0] < bounds[1]
    ):
        raise ScenarioError(f"bounds: expected (low, high) with low < high, got {bounds!r}", "bounds")
    if kind is int:
        low, high = math.ceil(bounds[0]), math.floor(bounds[1])
        if not low < high:
            raise ScenarioError(
                f"bounds: {field} is a whole number and {bounds!r} holds fewer than two whole numbers", "bounds"
            )
        _check_bound(base, field, low, "lower")
        _check_bound(base, field, high, "upper")
        return low, high
    _check_bound(base, field, float(bounds[0]), "lower")
    _check_bound(base, field, float(bounds[1]), "upper")
    return float(bounds[0]), float(bounds[1])


def capacity(
    scenario: Mapping[str, Any] | str | Path | None = None,
    *,
    slo_attainment: float = 0.9,
    field: str = RATE_FIELD,
    rel_tol: float = 0.02,
    bounds: tuple[float, float] | None = None,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    executor: Executor | None = None,
) -> CapacityResult:
    """The highest value of ``field`` (default: the arrival rate) at which the SLO is still met.

    Args:
        scenario: the scenario (dict, file, or None for the default); its own value of ``field`` is ignored.
        slo_attainment: the share of measured requests that must meet the scenario's SLO (TTFT and TPOT).
        field: a numeric field whose growth makes attainment fall. A whole-number field (by the scenario
            schema: ``workload.requests``, ``workload.prompt_tokens.value``, ...; see :func:`field_type`) is
            searched over whole numbers and its capacity is an ``int``.
        rel_tol: stop when the first failing value is within this ratio above the last passing one (for a
            whole-number field, also when it is the next whole number: then the capacity is the largest whole
            number meeting the target).
        bounds: (low, high) to search between (for a whole-number field, the whole numbers inside them); each
            must be a value the scenario takes. Default for the arrival rate: from the analytic ceilings,
            the probes kept within the rates a scenario takes (``MIN_RATE`` to ``MAX_RATE``, 1e-6 to 1e9
            req/s; ``note`` says when the answer is at that bound).
        progress: ``progress(simulations done, expected)`` after each simulation.
        cancel: a ``threading.Event``; once set, :class:`kvwire.Cancelled` is raised before the next simulation.
        executor: a ``concurrent.futures.Executor`` (e.g. Dask's ``client.get_executor()``) to run each
            simulation on, one task at a time (the search is sequential: each value depends on the answers
            before it); the result is the same as without it. ``cancel`` then cancels the running task.

    Raises:
        ScenarioError: a bad scenario, target, tolerance, field or bounds (naming it).
        Cancelled: ``cancel`` was set.

    >>> import kvwire
    >>> r = kvwire.capacity({"workload": {"requests": 400}})
    >>> r.points.height == r.evaluations and r.points["met"].any()
    True
    """
    _check(slo_attainment, rel_tol)
    _check_callbacks(progress, cancel)
    check_arguments(executor=executor)
    if not isinstance(field, str) or not field or any(not part for part in field.split(".")):
        raise ScenarioError(f"field: expected a dotted field path, got {field!r}", "field")
    base = _scenario(scenario)
    validate(base)
    if field == RATE_FIELD and isinstance(base.get("workload"), Mapping) and "trace" in base["workload"]:
        raise ScenarioError("workload.trace: capacity over the arrival rate needs a generated workload", "workload")
    current = _current(base, field)
    if _schema_type(field) is None and current is not None and not _is_number(current):
        raise ScenarioError(
            f"field: {field} is not a numeric field (its value is a {type(current).__name__}); capacity searches a "
            "number whose growth makes attainment fall",
            "field",
        )
    kind = field_type(base, field)
    checked = _search_bounds(base, field, bounds, kind) if bounds is not None else None
    ceil = _ceilings(base) if field == RATE_FIELD else None
    search = _Search(base, field, float(slo_attainment), progress, cancel, executor)
    note: str | None = None
    lo: Any = None
    hi: Any = None
    if checked is not None:
        low, high = checked
        if search.met(high):
            lo, note = high, f"the SLO is met at the upper bound {high:g}; the capacity may be higher"
        elif not search.met(low):
            hi, note = low, f"the SLO is missed already at the lower bound {low:g}"
        elif kind is int:
            lo, hi = _bisect_int(search, int(low), int(high), rel_tol)
        else:
            lo, hi = _bisect(search, low, high, rel_tol)
    else:
        if ceil is None:
            raise ScenarioError(f"bounds: give (low, high) to search {field} (only the rate has ceilings)", "bounds")
        ceiling = float(ceil["ceiling_req_per_s"])
        if not math.isfinite(ceiling) or ceiling <= 0:
            raise ScenarioError(f"{field}: the analytic ceiling is {ceiling}, nothing to search", field)
        start = min(max(ceiling, MIN_RATE), MAX_RATE)  # the probes stay within the rates a scenario takes
        top = f"{MAX_RATE:,.0f} req/s, the largest rate a scenario takes"
        if search.met(start):
            lo, probe = start, min(start * STEP_UP, MAX_RATE)
            for _ in range(MAX_BRACKET_PROBES):
                if lo >= MAX_RATE:
                    note = f"the SLO is met at {top}: the capacity is at least that"
                    break
                if not search.met(probe):
                    hi = probe
                    break
                lo, probe = probe, min(probe * STEP_UP, MAX_RATE)
            else:
                note = f"the SLO is met up to {lo:g} ({lo / ceiling:.2f} x the ceiling): the run may be too short"
        else:
            hi, probe = start, max(start * FIRST_STEP_DOWN, MIN_RATE)
            for _ in range(MAX_BRACKET_PROBES):
                if search.met(probe):
                    lo = probe
                    break
                if probe <= MIN_RATE:
                    hi = probe
                    note = f"the SLO is missed down to {MIN_RATE:g} req/s, the smallest rate a scenario takes"
                    break
                hi, probe = probe, max(probe * FIRST_STEP_DOWN**2, MIN_RATE)
            else:
                note = f"the SLO is missed down to {hi:g} ({hi / ceiling:.3f} x the ceiling)"
        if lo is not None and hi is not None:
            lo, hi = _bisect(search, lo, hi, rel_tol)
            if ceiling > MAX_RATE:
                note = f"the analytic ceiling ({ceiling:g} req/s) is above {top}; the search stayed below it"
    return CapacityResult(
        field=field,
        slo_attainment=float(slo_attainment),
        rel_tol=float(rel_tol),
        capacity=lo,
        failed_at=hi,
        ceilings=ceil,
        binding=ceil["binding"] if ceil else None,
        evaluations=len(search.rows),
        note=note,
        points=search.frame(),
    )


# --------------------------------------------------------------------------------------------------
# Prefill:decode split


@dataclass
class SplitResult:
    """What :func:`best_split` found.

    Attributes:
        total_instances: the instances shared between the pools.
        splits: one dict per split ``{"prefill", "decode", "capacity", "binding", "ceiling", "evaluations",
            "note"}``, prefill instances ascending.
        best: the split with the highest capacity (ties: fewer prefill instances).
        field, slo_attainment: as :func:`capacity`.
        points: every evaluated point: ``prefill``, ``decode``, the field, ``met`` and the flattened summary.
    """

    total_instances: int
    field: str
    slo_attainment: float
    splits: list[dict[str, Any]]
    best: dict[str, Any] | None
    points: pl.DataFrame = dataclass_field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable (no NaN), with the points as a list of rows."""
        return _clean_dict(
            {
                "total_instances": self.total_instances,
                "field": self.field,
                "slo_attainment": self.slo_attainment,
                "splits": self.splits,
                "best": self.best,
                "points": self.points.to_dicts(),
            }
        )


def best_split(
    scenario: Mapping[str, Any] | str | Path | None,
    total_instances: int,
    *,
    slo_attainment: float = 0.9,
    field: str = RATE_FIELD,
    rel_tol: float = 0.02,
    bounds: tuple[float, float] | None = None,
    workers: int | None = None,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    executor: Executor | None = None,
) -> SplitResult:
    """The capacity (:func:`capacity`) of every prefill:decode split of ``total_instances`` instances, and
    the best split. Splits are searched in parallel threads (``workers``, default: all cores), or with
    ``executor`` their simulations run on it.

    Args:
        scenario: a disaggregated scenario; its pools' devices are kept, their instance counts replaced.
        total_instances: instances to share, ≥ 2 (every split has at least one of each).
        workers: splits searched at once (threads; default: all cores, at most 1,024; with ``executor``, every
            split, at most 256).
        executor: an executor (Dask's ``client.get_executor()``): each split's search runs in a thread here
            as :func:`capacity` with ``executor``, so the splits' simulations run on it side by side.
        progress: ``progress(splits done, splits)``, called from the calling thread.
        cancel: a ``threading.Event``; once set, every search stops within its running simulation and
            :class:`kvwire.Cancelled` is raised. Ctrl-C stops them the same way.

    >>> import kvwire
    >>> r = kvwire.best_split({"workload": {"requests": 300}}, 3)
    >>> [(s["prefill"], s["decode"]) for s in r.splits]
    [(1, 2), (2, 1)]
    """
    if isinstance(total_instances, bool) or not isinstance(total_instances, int) or total_instances < 2:
        raise ScenarioError(
            f"total_instances: expected a whole number >= 2, got {total_instances!r}", "total_instances"
        )
    _check(slo_attainment, rel_tol)
    check_arguments(workers=workers, executor=executor)
    _check_callbacks(progress, cancel)
    base = _scenario(scenario)
    if base.get("mode", "disaggregated") != "disaggregated":
        raise ScenarioError("mode: best_split needs a disaggregated scenario", "mode")
    variants = []
    for p in range(1, total_instances):
        sc = with_value(with_value(base, "prefill.instances", p), "decode.instances", total_instances - p)
        validate(sc)
        variants.append((p, total_instances - p, sc))
    n = len(variants)
    if progress is not None:
        progress(0, n)
    # The searches look at ``stop``, never at ``cancel`` itself: the calling thread sets it when ``cancel`` is
    # set, on Ctrl-C and on any failure, and each search then stops within its running simulation.
    stop = threading.Event()

    def one(p: int, d: int, sc: dict[str, Any]) -> tuple[int, int, CapacityResult]:
        r = capacity(sc, slo_attainment=slo_attainment, field=field, rel_tol=rel_tol, bounds=bounds, cancel=stop,
                     executor=executor)  # fmt: skip
        return p, d, r

    # With an executor the threads only wait for its tasks: one per split, at most DEFAULT_IN_FLIGHT by default.
    threads = workers or (DEFAULT_IN_FLIGHT if executor is not None else default_workers())
    pool = ThreadPoolExecutor(min(threads, n), thread_name_prefix="kvwire-split")
    futures: list[Future[tuple[int, int, CapacityResult]]] = [pool.submit(one, p, d, sc) for p, d, sc in variants]
    results: dict[int, tuple[int, int, CapacityResult]] = {}
    try:
        pending = set(futures)
        while pending:
            if cancel is not None and cancel.is_set():
                stop.set()
            finished, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            for fut in sorted(finished, key=futures.index):
                try:
                    p, d, r = fut.result()
                except Cancelled:
                    if cancel is not None and cancel.is_set():
                        raise Cancelled(f"best split cancelled after {len(results)} of {n} splits", "cancel") from None
                    raise
                results[p] = (p, d, r)
                if progress is not None:
                    progress(len(results), n)
    except BaseException:
        stop.set()
        for fut in futures:
            fut.cancel()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    splits: list[dict[str, Any]] = []
    frames: list[pl.DataFrame] = []
    for p, d, r in (results[k] for k in sorted(results)):
        splits.append(
            {
                "prefill": p,
                "decode": d,
                "capacity": r.capacity,
                "failed_at": r.failed_at,
                "binding": r.binding,
                "ceiling": r.ceilings["ceiling_req_per_s"] if r.ceilings else None,
                "evaluations": r.evaluations,
                "note": r.note,
            }
        )
        frames.append(r.points.select(pl.lit(p).alias("prefill"), pl.lit(d).alias("decode"), pl.all()))
    feasible = [s for s in splits if s["capacity"] is not None]
    best = max(feasible, key=lambda s: (float(s["capacity"]), -int(s["prefill"]))) if feasible else None
    return SplitResult(
        total_instances=total_instances,
        field=field,
        slo_attainment=float(slo_attainment),
        splits=splits,
        best=best,
        points=pl.concat(frames, how="diagonal_relaxed"),
    )


# --------------------------------------------------------------------------------------------------
# Disaggregated vs colocated


@dataclass
class CompareResult:
    """What :func:`compare` found: the same hardware and workload, disaggregated and colocated.

    Attributes:
        scenarios: ``{"disaggregated": scenario, "colocated": scenario}`` as run.
        summaries: ``{"disaggregated": summary, "colocated": summary}`` at the scenario's own load.
        capacity: ``{"disaggregated": CapacityResult, "colocated": CapacityResult}`` (empty if not asked).
        points: one row per mode: ``mode``, the flattened summary at the scenario's load, ``capacity``.
    """

    scenarios: dict[str, dict[str, Any]]
    summaries: dict[str, dict[str, Any]]
    capacity: dict[str, CapacityResult]
    points: pl.DataFrame = dataclass_field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable (no NaN)."""
        return _clean_dict(
            {
                "scenarios": self.scenarios,
                "summaries": self.summaries,
                "capacity": {k: v.to_dict() for k, v in self.capacity.items()},
                "points": self.points.to_dicts(),
            }
        )


POOL_HARDWARE = ("device", "devices_per_instance", "power_cap_w")


def _counterparts(base: dict[str, Any], split: tuple[int, int] | None) -> dict[str, dict[str, Any]]:
    """The disaggregated scenario and its colocated twin on the same instances (or the reverse)."""
    defaults = {"device": "h100", "instances": 1, "devices_per_instance": 1}
    if base.get("mode", "disaggregated") == "colocated":
        pool = {**defaults, "instances": 2, **base.get("colocated", {})}
        n = int(pool["instances"])
        if split is not None and (
            not isinstance(split, tuple | list)
            or len(split) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in split)
        ):
            raise ScenarioError(
                f"split: expected (prefill, decode), two whole numbers >= 1 adding up to {n}, got {split!r}", "split"
            )
        p, d = split if split is not None else (max(1, n // 2), n - max(1, n // 2))
        if p < 1 or d < 1 or p + d != n:
            raise ScenarioError(f"split: expected (prefill, decode) >= 1 adding up to {n}, got {split!r}", "split")
        hw = {k: pool[k] for k in POOL_HARDWARE if k in pool}
        dis = {k: v for k, v in base.items() if k not in ("mode", "colocated")}
        dis.update({"mode": "disaggregated", "prefill": {**hw, "instances": p}, "decode": {**hw, "instances": d}})
        return {"disaggregated": dis, "colocated": base}
    if split is not None:
        raise ScenarioError(
            "split: only for a colocated scenario (a disaggregated one's pools are its split; change "
            "prefill.instances and decode.instances instead)",
            "split",
        )
    prefill = {**defaults, **base.get("prefill", {})}
    decode = {**defaults, **base.get("decode", {})}
    for key in POOL_HARDWARE:
        if prefill.get(key) != decode.get(key):
            raise ScenarioError(
                f"decode.{key}: compare needs the same hardware in both pools ({prefill.get(key)!r} vs "
                f"{decode.get(key)!r})",
                f"decode.{key}",
            )
    hw = {k: prefill[k] for k in POOL_HARDWARE if k in prefill}
    col = {k: v for k, v in base.items() if k not in ("mode", "prefill", "decode", "link", "handoff", "router")}
    col.update(
        {"mode": "colocated", "colocated": {**hw, "instances": int(prefill["instances"]) + int(decode["instances"])}}
    )
    return {"disaggregated": base, "colocated": col}


def compare(
    scenario: Mapping[str, Any] | str | Path | None = None,
    *,
    with_capacity: bool = True,
    split: tuple[int, int] | None = None,
    slo_attainment: float = 0.9,
    rel_tol: float = 0.02,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> CompareResult:
    """Serve the same workload on the same instances disaggregated (prefill pool → link → decode pool) and
    colocated (every instance prefills and decodes), side by side; optionally the capacity of each.

    Args:
        scenario: a disaggregated scenario (its colocated twin has prefill + decode instances of the same
            device), or a colocated one (its twin splits the instances ``split`` = (prefill, decode), default
            half and half, over the scenario's ``link``).
        with_capacity: also search the highest sustainable arrival rate of each (:func:`capacity`).
        progress: ``progress(simulations done, expected)``.

    >>> import kvwire
    >>> r = kvwire.compare({"workload": {"requests": 200}}, with_capacity=False)
    >>> r.points["mode"].to_list(), r.scenarios["colocated"]["colocated"]["instances"]
    (['disaggregated', 'colocated'], 2)
    """
    _check(slo_attainment, rel_tol)
    _check_callbacks(progress, cancel)
    if not isinstance(with_capacity, bool):
        raise ScenarioError(f"with_capacity: expected True or False, got {with_capacity!r}", "with_capacity")
    base = _scenario(scenario)
    validate(base)
    pair = _counterparts(base, split)
    for sc in pair.values():
        validate(sc)
    rows, summaries, caps = [], {}, {}
    done = [0]

    def tick(_: int = 0, __: int = 0) -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], max(done[0] + 1, 2 + (16 if with_capacity else 0)))

    for mode, sc in pair.items():
        if cancel is not None and cancel.is_set():
            raise Cancelled("compare cancelled", "cancel")
        summaries[mode] = simulate(sc, cancel=cancel).summary
        tick()
        row: dict[str, Any] = {"mode": mode, **flatten_summary(summaries[mode])}
        if with_capacity:
            caps[mode] = capacity(sc, slo_attainment=slo_attainment, rel_tol=rel_tol, progress=tick, cancel=cancel)
            row["capacity"] = caps[mode].capacity
            row["capacity_binding"] = caps[mode].binding
        rows.append(row)
    return CompareResult(
        scenarios=pair,
        summaries=summaries,
        capacity=caps,
        points=pl.DataFrame(rows, infer_schema_length=None, strict=False),
    )


__all__ = ["CapacityResult", "CompareResult", "SplitResult", "best_split", "capacity", "compare"]
