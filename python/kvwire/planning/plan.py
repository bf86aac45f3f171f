"""Plan a deployment: the best serving configuration for a model on a GPU budget.

:func:`plan` enumerates the configurations the budget holds (colocated or disaggregated, each pool's
instances and parallel layout, batch limits, KV format, hand-off compression, link preset), prunes with the
analytic ceilings (:func:`kvwire.ceilings`: no rate above a configuration's binding ceiling is sustainable,
so a configuration whose ceiling is below the best already verified cannot win), finds each survivor's
highest SLO-meeting arrival rate with :func:`kvwire.capacity` on short common-random-number runs (one seed
for all), and verifies the leaders and the frontier with full-length runs.

The capacity the plan counts is :func:`kvwire.capacity`'s answer capped at the analytic ceiling (a short run
can meet the SLO above it while its queue still grows): that cap is what makes the pruning exact.

>>> import kvwire
>>> p = kvwire.plan("llama3-8b", {"h100": 2}, workload={"requests": 200}, space={"tp": [1]})
>>> p.best["scenario"]["mode"], p.best["gpus"]
('colocated', 2)
"""

from __future__ import annotations

import copy
import itertools
import math
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ThreadPoolExecutor, wait
from typing import Any

import polars as pl

from kvwire.errors import Cancelled, DoesNotFitError, ScenarioError
from kvwire.planning.capacity import RATE_FIELD, _current, capacity
from kvwire.planning.plan_result import PlanResult, _describe, _launch, _pareto
from kvwire.planning.plan_space import (
    _budget,
    _budget_text,
    _configs,
    _devices,
    _is_int,
    _row_fields,
    _scenario,
    _Space,
    _space,
)
from kvwire.planning.plan_store import Evaluations
from kvwire.planning.sweep import check_arguments, default_workers
from kvwire.results.ceilings import ceilings
from kvwire.scenario.check import validate

#: The objectives :func:`plan` takes.
OBJECTIVES = ("throughput_per_gpu", "min_gpus")
#: Configurations screened per round (fixed, so that the plan does not depend on ``workers``).
ROUND = 8
#: Configurations verified with full-length runs beyond the frontier: the best by screened objective.
VERIFY_TOP = 4
#: Requests per screening run (the workload's own count when it has fewer).
SCREEN_REQUESTS = 400

#: The field searched for a trace file's workload (its arrivals rescaled to a mean rate), and the lowest rate
#: tried, as a fraction of the configuration's ceiling.
TRACE_RATE_FIELD = "workload.trace.rate_per_s"
TRACE_LOWEST = 1e-3


def _with_requests(sc: Mapping[str, Any], requests: int | None) -> dict[str, Any]:
    out = copy.deepcopy(dict(sc))
    if requests is not None:
        out["workload"] = {**out.get("workload", {}), "requests": requests}
    return out


def _evaluate(
    sc: dict[str, Any],
    ceiling: float,
    slo_attainment: float,
    rel_tol: float,
    cancel: threading.Event | None,
    trace: bool = False,
) -> dict[str, Any]:
    """The plan's figures of one scenario: :func:`kvwire.capacity` capped at the ceiling, and the summary at it.
    A trace file's rate (``workload.trace.rate_per_s``, its arrivals rescaled) is searched between
    ``TRACE_LOWEST`` x the ceiling and the ceiling."""
    field = TRACE_RATE_FIELD if trace else RATE_FIELD
    bounds = (ceiling * TRACE_LOWEST, ceiling) if trace else None
    r = capacity(sc, slo_attainment=slo_attainment, rel_tol=rel_tol, field=field, bounds=bounds, cancel=cancel)
    out: dict[str, Any] = {"simulations": r.evaluations, "capacity_note": r.note}
    if r.capacity is None:
        out["capacity_req_per_s"] = None
        return out
    cap = float(r.capacity)
    met = r.points.filter(pl.col("met"))
    at = met.filter(pl.col(field) == cap)
    if cap > ceiling:
        # The SLO was met above the ceiling (a short run outlasting a growing queue): count the best run at or
        # below the ceiling, or the ceiling itself with the figures of the run just above it.
        below = met.filter(pl.col(field) <= ceiling).sort(field)
        at = below.tail(1) if below.height else met.sort(field).head(1)
        cap = float(below[field][-1]) if below.height else ceiling
        out["capacity_note"] = "capped at the analytic ceiling (the SLO was met above it in a finite run)"
    row = at.row(0, named=True)
    out["capacity_req_per_s"] = cap
    out["summary"] = row
    return out


def _trace_requests(base: Mapping[str, Any]) -> pl.DataFrame | None:
    """The request table of the base's trace file (its options applied, at its own rate: the ceilings depend
    only on the lengths), or None for a generated workload; an inline trace is refused (no rate to search)."""
    wl = base.get("workload")
    if not isinstance(wl, Mapping) or "trace" not in wl:
        return None
    trace = wl["trace"]
    if not isinstance(trace, Mapping) or "file" not in trace:
        raise ScenarioError(
            "workload.trace: the plan searches the arrival rate: give a trace file ({'file': ...}, its arrivals "
            "rescaled by workload.trace.rate_per_s), not inline arrays",
            "workload.trace",
        )
    from kvwire.traces.read import read_trace

    options = {k: v for k, v in trace.items() if k not in ("file", "rate_per_s")}
    try:
        return read_trace(trace["file"], **options)
    except TypeError as e:
        raise ScenarioError(f"workload.trace: {e}", "workload.trace") from None


def _without_trace(sc: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(sc)
    out["workload"] = {k: v for k, v in sc["workload"].items() if k != "trace"}
    return out


def _check_slo(slo: Any, slo_attainment: Any) -> tuple[dict[str, float], float]:
    if slo is None:
        slo = {}
    if not isinstance(slo, Mapping):
        raise ScenarioError(f"slo: expected a dict with ttft_s, tpot_s and attainment, got {slo!r}", "slo")
    unknown = sorted(set(slo) - {"ttft_s", "tpot_s", "attainment"})
    if unknown:
        raise ScenarioError(f"slo.{unknown[0]}: unknown field (ttft_s, tpot_s, attainment)", f"slo.{unknown[0]}")
    attainment = slo.get("attainment", slo_attainment)
    if isinstance(attainment, bool) or not isinstance(attainment, int | float) or not 0.0 < attainment <= 1.0:
        raise ScenarioError(f"slo.attainment: expected a fraction in (0, 1], got {attainment!r}", "slo.attainment")
    return {k: v for k, v in slo.items() if k != "attainment"}, float(attainment)


#: The scenario fields a configuration sets (an error there is the configuration's, not the base's).
CONFIGURED = ("mode", "prefill", "decode", "colocated", "link", "handoff", "scheduler.max_decode_batch",
              "scheduler.max_num_batched_tokens")  # fmt: skip


def _configured(path: str | None) -> bool:
    """Whether a field path is (inside) one a configuration sets."""
    return path is None or any(path == p or path.startswith((f"{p}.", f"{p}[")) for p in CONFIGURED)


def _smallest_budget(base: Mapping[str, Any], sp: _Space, device: str) -> int | None:
    """The fewest devices that hold the model in the space's layouts (one colocated instance, or two pools)."""
    per_mode = []
    for lay in sorted(sp.layouts, key=_devices):
        cfg = {
            "mode": "colocated",
            "colocated": (1, *lay),
            "colocated_device": device,
            "max_decode_batch": sp.max_decode_batch[0],
            "max_num_batched_tokens": sp.max_num_batched_tokens[0],
            "kv_format": sp.kv_format[0],
            "compression": None,
            "link": None,
        }
        try:
            validate(_scenario(base, cfg, {device: sp.domain}))
        except ScenarioError:
            continue
        per_mode.append(_devices(lay))
        break
    if not per_mode:
        return None
    n = per_mode[0]
    return n if "colocated" in sp.modes else 2 * n


def plan(
    model: str | Mapping[str, Any],
    gpus: Mapping[str, int],
    *,
    workload: Mapping[str, Any] | None = None,
    slo: Mapping[str, Any] | None = None,
    objective: str = "throughput_per_gpu",
    rate_per_s: float | None = None,
    space: Mapping[str, Any] | None = None,
    timing: Mapping[str, Any] | None = None,
    scenario: Mapping[str, Any] | None = None,
    slo_attainment: float = 0.9,
    rel_tol: float = 0.05,
    screen_requests: int | None = SCREEN_REQUESTS,
    prune: bool = True,
    workers: int | None = None,
    executor: Executor | None = None,
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
    out: str | os.PathLike[str] | None = None,
) -> PlanResult:
    """The best serving configuration of ``model`` on the ``gpus`` budget for a workload and an SLO.

    Args:
        model: a model preset name or a model table, as a scenario's ``model``.
        gpus: the budget, each device kind and its count: ``{"h200": 32}``, or several kinds for heterogeneous
            pools, ``{"h100": 16, "h200": 16}`` (a colocated pool is of one kind; a disaggregated configuration's
            prefill and decode pools may be of two kinds, each within its own count; throughput per GPU counts
            every GPU alike).
        workload: the scenario's ``workload`` (a generated workload; its arrival rate is searched).
        slo: ``{"ttft_s", "tpot_s", "attainment"}``: the scenario's SLO and the share of measured requests that
            must meet it (default: the scenario's SLO and ``slo_attainment``).
        objective: ``"throughput_per_gpu"`` (the most output tokens/s per GPU at the SLO) or ``"min_gpus"`` (the
            fewest GPUs whose capacity reaches ``rate_per_s``; ties: the higher capacity).
        rate_per_s: the target arrival rate of ``"min_gpus"``.
        space: what may vary (each a list; absent: the default): ``mode`` (both), ``tp`` (the divisors of the
            model's attention heads within the device's scale-up domain), ``pp``, ``ep``, ``dp`` (``[1]``),
            ``prefill_instances``, ``decode_instances``, ``colocated_instances`` (every count the budget holds),
            ``max_decode_batch``, ``max_num_batched_tokens``, ``kv_format`` (the decode pool's KV format),
            ``compression`` (the hand-off's), ``link`` (preset names) — each default the scenario's one value.
            Both pools take every layout independently; an instance's ``tp * pp * dp`` stays within the
            scale-up domain unless ``tp``, ``pp`` or ``dp`` is given.
        timing: ``cost.timing`` (docs: concepts/timing), the roofline when absent.
        scenario: any other scenario fields (scheduler policy, cost, kv, router, ...) as a base.
        rel_tol: each capacity search's relative tolerance (:func:`kvwire.capacity`).
        screen_requests: requests per screening run (``None``: the workload's own; then screening is exact).
        prune: skip the configurations whose ceiling cannot beat the best verified (``False``: evaluate every
            configuration, for a complete frontier; the best is the same either way).
        workers: threads evaluating configurations (default: all cores); the plan does not depend on it.
        executor: any ``concurrent.futures.Executor`` to evaluate configurations on instead of the own threads,
            e.g. Dask's ``distributed.Client(...).get_executor()`` (not shut down); each task is one
            configuration's capacity search; the plan is the same as on threads.
        progress: ``progress(done, total)``: configurations decided (evaluated or pruned) of those kvwire
            accepts, ``done == 0`` once they are enumerated (before any simulation), after each round, and
            ``done == total`` at the end.
        cancel: a ``threading.Event``; once set, :class:`kvwire.Cancelled` is raised (on an executor: between
            tasks, its queued tasks cancelled).
        out: a directory for the plan's finished evaluations (each configuration's search, written as each round
            ends): the same plan run again with the same ``out`` reuses them, so an interrupted plan resumes
            where it stopped and equals the uninterrupted one; a directory of another plan is refused.

    Raises:
        ScenarioError: a bad argument, naming it; DoesNotFitError (naming ``gpus``) when the budget cannot hold
            the model, with the smallest budget that can.

    >>> import kvwire
    >>> p = kvwire.plan("llama3-8b", {"h100": 2}, workload={"requests": 200}, space={"tp": [1]})
    >>> p.considered, p.table.height, p.frontier.height >= 1
    (3, 3, True)
    """
    budget = _budget(gpus)
    if objective not in OBJECTIVES:
        raise ScenarioError(f"objective: expected one of {', '.join(OBJECTIVES)}, got {objective!r}", "objective")
    if objective == "min_gpus" and (
        isinstance(rate_per_s, bool) or not isinstance(rate_per_s, int | float) or not rate_per_s > 0
    ):
        raise ScenarioError(f"rate_per_s: min_gpus needs a target rate > 0, got {rate_per_s!r}", "rate_per_s")
    if screen_requests is not None and (not _is_int(screen_requests) or screen_requests < 1):
        raise ScenarioError(
            f"screen_requests: expected a whole number >= 1 or None, got {screen_requests!r}", "screen_requests"
        )
    if not isinstance(prune, bool):
        raise ScenarioError(f"prune: expected True or False, got {prune!r}", "prune")
    check_arguments(workers=workers, executor=executor, cancel=cancel, out=out)
    if progress is not None and (isinstance(progress, bool) or not callable(progress)):
        raise ScenarioError(f"progress: expected a callable progress(done, total), got {progress!r}", "progress")
    if scenario is not None and not isinstance(scenario, Mapping):
        raise ScenarioError(f"scenario: expected a dict, got {type(scenario).__name__}", "scenario")
    base: dict[str, Any] = copy.deepcopy(dict(scenario or {}))
    base["model"] = copy.deepcopy(model)
    if workload is not None:
        if not isinstance(workload, Mapping):
            raise ScenarioError(f"workload: expected a dict, got {type(workload).__name__}", "workload")
        base["workload"] = copy.deepcopy(dict(workload))
    trace_requests = _trace_requests(base)
    slo_fields, attainment = _check_slo(slo, slo_attainment)
    if slo_fields:
        base["slo"] = {**base.get("slo", {}), **slo_fields}
    if timing is not None:
        if not isinstance(timing, Mapping):
            raise ScenarioError(f"timing: expected a cost.timing dict, got {type(timing).__name__}", "timing")
        base["cost"] = {**base.get("cost", {}), "timing": copy.deepcopy(dict(timing))}
    timing_source = str((_current(base, "cost.timing") or {}).get("source", "roofline"))
    spaces = {device: _space(space, base, device, model) for device in budget}
    domains = {device: s.domain for device, s in spaces.items()}
    sp = next(iter(spaces.values()))  # the fields every kind shares (its layouts are the first kind's)
    if trace_requests is not None:
        screen_n = None  # a trace is run whole: no shorter screening run
    else:
        full_requests = int(_current(base, "workload.requests"))
        screen_n = None if screen_requests is None or screen_requests >= full_requests else screen_requests

    # Enumerate and refuse what kvwire refuses; the ceilings of the rest (of the full-length workload).
    configs = _configs(spaces, budget)
    rows: list[dict[str, Any]] = []
    scenarios: list[dict[str, Any] | None] = []
    fit_errors: list[DoesNotFitError] = []
    other_errors: list[ScenarioError] = []
    for cfg in configs:
        row = _row_fields(cfg)
        sc = _scenario(base, cfg, domains)
        try:
            validate(sc)
            c = ceilings(sc) if trace_requests is None else ceilings(_without_trace(sc), trace_requests)
        except ScenarioError as e:
            if isinstance(e, DoesNotFitError):
                fit_errors.append(e)
            else:
                other_errors.append(e)
            row.update(status="refused", note=str(e))
            rows.append(row)
            scenarios.append(None)
            continue
        ceiling = float(c["ceiling_req_per_s"])
        out_mean = float(c["output_tokens_mean"])
        row.update(
            status="pruned",
            note=None,
            ceiling_req_per_s=ceiling,
            binding=c["binding"],
            output_tokens_mean=out_mean,
            bound_tokens_per_s_per_gpu=ceiling * out_mean / row["gpus"],
        )
        rows.append(row)
        scenarios.append(sc)
    live = [i for i, sc in enumerate(scenarios) if sc is not None]
    if not live:
        paths = {e.path for e in other_errors}
        if other_errors and not fit_errors and len(paths) == 1 and not _configured(next(iter(paths))):
            # Every configuration refused for one field the configurations do not set: a field of the base (the
            # SLO, the workload, ...). Said as kvwire says it, naming that field.
            raise other_errors[0]
        first = next((r["note"] for r in rows if r.get("note")), "no configuration")
        smallest = {d: n for d in budget if (n := _smallest_budget(base, spaces[d], d)) is not None}
        if not smallest:
            needed = [e.devices_needed for e in fit_errors if e.devices_needed]
            raise DoesNotFitError(
                f"gpus: no layout of the space holds the model, whatever the budget ({first}); give space the tp "
                "(pp) values that fit",
                "gpus",
                devices_needed=min(needed) if needed else None,
            )
        if all(n > budget[d] for d, n in smallest.items()):
            device, n = min(smallest.items(), key=lambda t: (t[1], t[0]))
            raise DoesNotFitError(
                f"gpus: {_budget_text(budget)} cannot hold the model in this space; the smallest budget that can is "
                f"{n} x {device} (--gpus {device}={n})",
                "gpus",
                devices_needed=n,
            )
        raise ScenarioError(f"gpus: no configuration of the space is valid on {_budget_text(budget)}: {first}", "gpus")

    store = None
    if out is not None:
        store = Evaluations(
            out,
            {
                "model": model, "gpus": budget, "workload": workload, "slo": slo, "objective": objective,
                "rate_per_s": rate_per_s, "space": space, "timing": timing, "scenario": scenario,
                "slo_attainment": slo_attainment, "rel_tol": rel_tol, "screen_requests": screen_requests,
                "prune": prune,
            },
        )  # fmt: skip
    own = executor is None
    pool: Executor = (
        ThreadPoolExecutor(min(workers or default_workers(), ROUND), thread_name_prefix="kvwire-plan")
        if own
        else executor  # type: ignore[assignment]
    )
    simulations = [0]

    def run(indices: list[int], requests: int | None) -> list[dict[str, Any]]:
        # Evaluations a previous run of this plan finished (out=) are taken as they are: the plan is deterministic.
        keys = [f"{i}:{requests}" for i in indices]
        kept = {k: r for k in keys if store is not None and (r := store.get(k)) is not None}
        # On the caller's executor (perhaps processes) the event does not travel: it is looked at here.
        futures: dict[str, Future[dict[str, Any]]] = {
            k: pool.submit(
                _evaluate,
                _with_requests(scenarios[i] or {}, requests),
                rows[i]["ceiling_req_per_s"],
                attainment,
                rel_tol,
                cancel if own else None,
                trace_requests is not None,
            )
            for i, k in zip(indices, keys, strict=True)
            if k not in kept
        }
        pending: set[Future[dict[str, Any]]] = set(futures.values())
        while pending:
            if cancel is not None and cancel.is_set():
                for j in pending:
                    j.cancel()
                raise Cancelled(f"plan cancelled after {simulations[0]} simulations", "cancel")
            _, pending = wait(pending, timeout=0.1 if cancel is not None else None, return_when=FIRST_COMPLETED)
        for k, fut in futures.items():
            kept[k] = fut.result()
            if store is not None:
                store.put(k, kept[k])
        results = [kept[k] for k in keys]
        simulations[0] += sum(r["simulations"] for r in results)
        return results

    def report_progress(done: int) -> None:
        if progress is not None:
            progress(done, len(live))

    def objective_value(result: Mapping[str, Any], i: int) -> float | None:
        cap = result.get("capacity_req_per_s")
        if cap is None:
            return None
        return float(cap) * float(rows[i]["output_tokens_mean"]) / float(rows[i]["gpus"])

    screened: dict[int, dict[str, Any]] = {}
    verified: dict[int, dict[str, Any]] = {}

    def verify(indices: list[int]) -> None:
        todo = [i for i in indices if i not in verified]
        if screen_n is None:
            for i in todo:
                verified[i] = screened[i]
            return
        for i, res in zip(todo, run(todo, None), strict=True):
            verified[i] = res

    report_progress(0)
    try:
        if objective == "throughput_per_gpu":
            order = sorted(live, key=lambda i: (-rows[i]["bound_tokens_per_s_per_gpu"], i))
            best_value = -math.inf
            pos = 0
            while pos < len(order):
                batch = [i for i in order[pos : pos + ROUND] if rows[i]["bound_tokens_per_s_per_gpu"] >= best_value]
                pos += ROUND
                if not batch:
                    break
                for i, res in zip(batch, run(batch, screen_n), strict=True):
                    screened[i] = res
                report_progress(min(pos, len(order)))
                # Verify this round's leader when it could be the best; prune against verified values only.
                values = [(objective_value(screened[i], i), i) for i in batch]
                cands = [(v, i) for v, i in values if v is not None]
                if cands:
                    v, lead = max(cands, key=lambda t: (t[0], -t[1]))
                    if v >= best_value:
                        verify([lead])
                        fv = objective_value(verified[lead], lead)
                        if fv is not None and prune:
                            best_value = max(best_value, fv)
        else:
            target = float(rate_per_s)  # type: ignore[arg-type]
            order = sorted(
                (i for i in live if not prune or rows[i]["ceiling_req_per_s"] >= target),
                key=lambda i: (rows[i]["gpus"], -rows[i]["ceiling_req_per_s"], i),
            )
            found_at: int | None = None
            for gpus_level, group in itertools.groupby(order, key=lambda i: rows[i]["gpus"]):
                if found_at is not None and prune:
                    break
                members = list(group)
                for k in range(0, len(members), ROUND):
                    batch = members[k : k + ROUND]
                    for i, res in zip(batch, run(batch, screen_n), strict=True):
                        screened[i] = res
                    report_progress(len(screened))
                meeting = [i for i in members if (screened[i].get("capacity_req_per_s") or 0.0) >= target]
                verify(meeting)
                if any((verified[i].get("capacity_req_per_s") or 0.0) >= target for i in meeting):
                    found_at = gpus_level

        # Verify the leaders by screened objective and the screened frontier.
        def figures(i: int, res: Mapping[str, Any]) -> dict[str, Any] | None:
            s = res.get("summary")
            if s is None:
                return None
            tpot = s.get("latency.tpot_s.mean")
            return {
                "capacity_req_per_s": res["capacity_req_per_s"],
                "output_tokens_per_s_per_gpu": objective_value(res, i),
                "output_tokens_per_s_per_user": 1.0 / tpot if tpot else None,
                "ttft_p50_s": s.get("latency.ttft_s.p50"),
                "ttft_p90_s": s.get("latency.ttft_s.p90"),
                "ttft_p99_s": s.get("latency.ttft_s.p99"),
                "tpot_p50_s": s.get("latency.tpot_s.p50"),
                "tpot_p90_s": s.get("latency.tpot_s.p90"),
                "tpot_p99_s": s.get("latency.tpot_s.p99"),
                "slo_attainment": s.get("slo.attainment"),
                "link_utilisation": s.get("utilisation.kv-link"),
                "j_per_output_token": s.get("energy.j_per_output_token"),
            }

        scored = [(i, figures(i, r)) for i, r in screened.items()]
        scored_ok = [(i, f) for i, f in scored if f is not None and f["output_tokens_per_s_per_user"] is not None]
        front = [scored_ok[k][0] for k in _pareto([f for _, f in scored_ok])]
        top = sorted(scored_ok, key=lambda t: (-t[1]["output_tokens_per_s_per_gpu"], t[0]))[:VERIFY_TOP]
        verify(sorted(set(front) | {i for i, _ in top}))
    finally:
        if own:
            pool.shutdown(wait=True, cancel_futures=True)
    report_progress(len(live))

    for i, res in screened.items():
        rows[i]["status"] = "screened"
        rows[i]["screen_capacity_req_per_s"] = res.get("capacity_req_per_s")
        rows[i]["simulations"] = res["simulations"]
        rows[i]["note"] = res.get("capacity_note")
        rows[i].update(figures(i, res) or {"capacity_req_per_s": None})
    for i, res in verified.items():
        rows[i]["status"] = "verified"
        if screen_n is not None:
            rows[i]["simulations"] = rows[i].get("simulations", 0) + res["simulations"]
        rows[i]["note"] = res.get("capacity_note")
        rows[i].update(figures(i, res) or {"capacity_req_per_s": None, "output_tokens_per_s_per_gpu": None})
    table = pl.DataFrame(rows, infer_schema_length=None, strict=False)
    good = [
        i
        for i in verified
        if rows[i].get("capacity_req_per_s") is not None and rows[i].get("output_tokens_per_s_per_user") is not None
    ]
    front_rows = [rows[good[k]] for k in _pareto([rows[i] for i in good])]
    front_idx = sorted(
        (good[k] for k in _pareto([rows[i] for i in good])), key=lambda i: (-rows[i]["output_tokens_per_s_per_gpu"], i)
    )
    frontier = pl.DataFrame([rows[i] for i in front_idx], schema=table.schema) if front_rows else table.clear()
    best_i: int | None = None
    if objective == "throughput_per_gpu":
        if good:
            best_i = max(
                good,
                key=lambda i: (
                    rows[i]["output_tokens_per_s_per_gpu"],
                    rows[i]["output_tokens_per_s_per_user"],
                    -rows[i]["gpus"],
                    -i,
                ),
            )
    else:
        meets = [i for i in good if rows[i]["capacity_req_per_s"] >= float(rate_per_s)]  # type: ignore[arg-type]
        if meets:
            best_i = min(meets, key=lambda i: (rows[i]["gpus"], -rows[i]["capacity_req_per_s"], i))
    varied = tuple(
        key
        for key, values in (
            ("device", list(budget)),
            ("max_decode_batch", sp.max_decode_batch),
            ("max_num_batched_tokens", sp.max_num_batched_tokens),
            ("kv_format", sp.kv_format),
            ("compression", sp.compression),
            ("link", sp.link),
        )
        if len(values) > 1
    )

    def at_capacity(i: int) -> dict[str, Any]:
        """Configuration ``i``'s complete scenario at its capacity (the arrival rate, or a trace's rescaled one)."""
        sc = copy.deepcopy(scenarios[i] or {})
        rate = float(rows[i]["capacity_req_per_s"])
        wl = dict(sc.get("workload", {}))
        if trace_requests is not None:
            wl["trace"] = {**dict(wl["trace"]), "rate_per_s": rate}
        else:
            wl["arrivals"] = {**dict(wl.get("arrivals", {})), "rate_per_s": rate}
        sc["workload"] = wl
        return sc

    best: dict[str, Any] | None = None
    launch: dict[str, Any] | None = None
    if best_i is not None:
        r = rows[best_i]
        sc = at_capacity(best_i)
        rate = float(r["capacity_req_per_s"])
        best = {
            "scenario": sc,
            "rate_per_s": rate,
            "gpus": r["gpus"],
            "configuration": _describe(r, varied),
            "binding": r["binding"],
            **{
                k: r.get(k)
                for k in (
                    "output_tokens_per_s_per_gpu",
                    "output_tokens_per_s_per_user",
                    "ttft_p50_s",
                    "ttft_p90_s",
                    "ttft_p99_s",
                    "tpot_p50_s",
                    "tpot_p90_s",
                    "tpot_p99_s",
                    "link_utilisation",
                    "j_per_output_token",
                    "slo_attainment",
                )
            },
        }
        launch = _launch(configs[best_i], model, sc)
    return PlanResult(
        model=model if isinstance(model, str) else "custom model",
        varied=varied,
        objective=objective,
        timing=timing_source,
        gpus=budget,
        considered=len(configs),
        refused=sum(1 for r in rows if r["status"] == "refused"),
        pruned=sum(1 for r in rows if r["status"] == "pruned"),
        simulations=simulations[0],
        best=best,
        launch=launch,
        table=table,
        frontier=frontier,
        frontier_scenarios=[at_capacity(i) for i in front_idx],
    )


__all__ = ["PlanResult", "plan"]
