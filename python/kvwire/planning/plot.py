"""Plots of kvwire results with matplotlib (the ``kvwire[plot]`` extra): latency CDFs, SLO attainment and p99
latencies against a swept field, capacity per prefill:decode split, stage breakdowns, and a deployment plan's
frontier of throughput per GPU against tokens/s per user.

Every function returns a ``matplotlib.figure.Figure`` built without pyplot (no global state, safe in threads
and servers); save it with ``fig.savefig("x.png")`` or ``"x.svg"`` (Agg renders PNG, the SVG backend SVG).

>>> import kvwire
>>> from kvwire import plot
>>> fig = plot.latency_cdf({"ib-ndr": kvwire.simulate({"workload": {"requests": 200}})})
>>> fig.axes[0].get_xlabel()
'TTFT (ms)'
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from kvwire.errors import PlotError
from kvwire.planning.sweep_view import (
    FIRST_TOKEN_SHORT,
    FIRST_TOKEN_WORDS,
    MAX_SERIES,
    SweepView,
    filter_rows,
    sweep_view,
    value_text,
)
from kvwire.results.run import SimResult
from kvwire.results.summary import STAGES

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Points drawn per CDF curve (quantiles at evenly spaced probabilities; the curve's ends are kept).
CDF_POINTS = 500
#: Axis labels and scale of the metrics the plots know (others are drawn as they are, labelled by name).
LABELS: dict[str, tuple[str, float]] = {
    "workload.arrivals.rate_per_s": ("arrival rate (req/s)", 1.0),
    "ttft_s": ("TTFT (ms)", 1e3),
    "tpot_s": ("TPOT (ms)", 1e3),
    "e2e_s": ("end-to-end latency (s)", 1.0),
    "handoff_s": ("KV hand-off (ms)", 1e3),
    "slo.attainment": ("SLO attainment (%)", 100.0),
    "latency.ttft_s.p99": ("TTFT p99 (ms)", 1e3),
    "latency.tpot_s.p99": ("TPOT p99 (ms)", 1e3),
    "latency.e2e_s.p99": ("end-to-end p99 (s)", 1.0),
    "latency.handoff_s.p99": ("hand-off p99 (ms)", 1e3),
    "slo.goodput_req_per_s": ("goodput (req/s)", 1.0),
    "throughput.req_per_s": ("throughput (req/s)", 1.0),
    "energy.j_per_output_token": ("energy (J/output token)", 1.0),
    "utilisation.kv-link": ("KV link busy (%)", 100.0),
    "output_tokens_per_s_per_user": ("output tokens/s per user (interactivity)", 1.0),
    "output_tokens_per_s_per_gpu": ("output tokens/s per GPU", 1.0),
}
STAGE_LABELS = {
    "prefill_queue_s": "prefill queue",
    "prefill_s": "prefill",
    "kv_wait_s": "KV link queue",
    "kv_transfer_s": "KV transfer",
    "decode_queue_s": "decode queue",
    "decode_s": "decode",
}


def _figure(width_in: float = 7.0, height_in: float = 4.5, ncols: int = 1, nrows: int = 1) -> Figure:
    """A figure of ``nrows`` x ``ncols`` panels (none for ``nrows=0``), constrained layout."""
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - the extra is missing
        raise PlotError("plots need matplotlib: pip install 'kvwire[plot]'", "matplotlib") from None
    fig = Figure(figsize=(width_in * ncols if ncols > 1 else width_in, height_in), layout="constrained")
    if nrows:
        fig.subplots(nrows, ncols, squeeze=False)
    return fig


def _label(metric: str) -> tuple[str, float]:
    return LABELS.get(metric, (metric, 1.0))


def _named(results: Any) -> list[tuple[str, pl.DataFrame]]:
    """``{label: result}``, a list of results, or one result -> [(label, per-request table)]."""
    if isinstance(results, SimResult | pl.DataFrame):
        results = [results]
    items = list(results.items()) if isinstance(results, Mapping) else [(None, r) for r in results]
    out = []
    for i, (label, r) in enumerate(items):
        df = r.requests if isinstance(r, SimResult) else r
        if not isinstance(df, pl.DataFrame):
            raise PlotError(f"results[{i}]: expected a SimResult or a per-request DataFrame", f"results[{i}]")
        if label is None and isinstance(r, SimResult):
            s = r.scenario
            link = s.get("link", {}).get("preset") if isinstance(s.get("link"), dict) else None
            label = f"{s.get('mode', '')} {link or ''}".strip()
        out.append((str(label if label is not None else f"run {i}"), df))
    return out


def latency_cdf(
    results: SimResult | pl.DataFrame | Sequence[SimResult | pl.DataFrame] | Mapping[str, SimResult | pl.DataFrame],
    metric: str = "ttft_s",
    *,
    measured_only: bool = True,
    ax: Axes | None = None,
) -> Figure:
    """Empirical CDF of a per-request latency for one or more runs (one curve each, labelled).

    Args:
        results: a :class:`~kvwire.SimResult` or per-request table, a list of them, or ``{label: result}``.
        metric: ``ttft_s``, ``tpot_s``, ``e2e_s`` or ``handoff_s``.
        measured_only: only the measured requests (after the warm-up), as the summary's percentiles
            (``handoff_s`` always uses every transferred request, as the summary does).
        ax: draw into these axes instead of a new figure.
    """
    fig = ax.get_figure() if ax is not None else _figure()
    axes = ax if ax is not None else fig.axes[0]  # type: ignore[union-attr]
    xlabel, scale = _label(metric)
    drawn = 0
    for label, df in _named(results):
        if metric not in df.columns:
            raise PlotError(f"metric: the table has no column {metric!r}", "metric")
        sel = df.filter(pl.col("measured")) if measured_only and metric != "handoff_s" and "measured" in df else df
        x = np.sort(sel[metric].drop_nulls().drop_nans().to_numpy())
        if x.size == 0:
            continue
        p = np.linspace(0.0, 1.0, min(CDF_POINTS, x.size))
        q = np.quantile(x, p)
        axes.plot(q * scale, p * 100.0, label=f"{label} (p99 {np.quantile(x, 0.99) * scale:,.3g})")
        drawn += 1
    if drawn == 0:
        raise PlotError(f"results: no {metric} values to draw", "results")
    axes.set_xlabel(xlabel)
    axes.set_ylabel("requests (%)")
    axes.set_title(f"{xlabel.split(' (')[0]} distribution")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small")
    return fig  # type: ignore[return-value]


#: Markers and dashes cycled with the colours, so that lines that coincide stay distinguishable.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*", "h", "p")
DASHES = ("-", "--", "-.", ":")
#: Width of a categorical x position the points of the lines are spread over (points beside each other).
DODGE = 0.5


def _style(i: int) -> dict[str, Any]:
    """Line ``i``'s colour, dash, and a hollow marker of its own shape, each a little smaller than the one before:
    lines and points that coincide still show every marker (one inside the other) and the dashes alternate."""
    return {
        "color": f"C{i % 10}", "linestyle": DASHES[i % len(DASHES)], "marker": MARKERS[i % len(MARKERS)],
        "markersize": max(3.5, 9.0 - 0.8 * i), "markerfacecolor": "none", "markeredgewidth": 1.4,
    }  # fmt: skip


def _first_token_note(view: SweepView) -> str | None:
    if view.first_token in FIRST_TOKEN_WORDS:
        return FIRST_TOKEN_WORDS[view.first_token]
    if view.first_token == "varies":
        return "TTFT ends where each point's metrics.first_token says (the points differ)"
    return None


def metric_vs(
    table: pl.DataFrame,
    x: str | None = None,
    metrics: Sequence[str] = ("slo.attainment", "latency.ttft_s.p99", "latency.tpot_s.p99"),
    *,
    by: str | Sequence[str] | None = None,
    facet: str | None = None,
    where: Mapping[str, Any] | Sequence[str] | str | None = None,
    aggregate: str | None = None,
    first_token: str | None = None,
    max_series: int = MAX_SERIES,
) -> Figure:
    """Summary metrics against a swept field, one line per configuration (a column of panels per metric, a
    row per ``facet`` value).

    Args:
        table: a :func:`kvwire.sweep` table.
        x: the field on the x axis (default: the first swept field not filtered by ``where``). A numeric
            field is drawn as lines; a categorical one (link presets, models, JSON values) as points at
            each category, side by side, in a meaningful order (links by bandwidth, numbers numerically).
        metrics: summary columns, one panel each (default: SLO attainment, TTFT p99, TPOT p99).
        by: field(s) telling the lines apart (default: every other swept field that varies).
        facet: a field drawn as one row of panels per value.
        where: keep only the rows with these values: ``{"link": "ib-ndr"}`` or ``["link=ib-ndr"]``.
        aggregate: ``"mean"``, ``"min"`` or ``"max"`` over the fields that vary beyond ``x``, ``by`` and
            ``facet``; without it such fields are refused (a line would join different configurations).
        first_token: the TTFT rule of the sweep (``"prefill"`` or ``"decode"``) when the table has no
            ``metrics.first_token`` column; the TTFT panels say it.
        max_series: the most lines one panel may hold (more is refused, naming the fields to facet on).

    With replicates, each point is the mean over replicates with a 95% interval that stays inside what the
    quantity can be: a Wilson score interval for SLO attainment, a t interval clipped at 0 (and 1 for busy
    shares) otherwise (:mod:`kvwire.planning.intervals`). The legend is outside the panels.

    Raises:
        PlotError: an unknown field or metric (naming it and the swept fields), a filter that keeps no row, a
            field varying beyond ``x``/``by``/``facet`` (naming it), too many lines or panels.
    """
    view = sweep_view(table, x, metrics, by=by, facet=facet, where=where, aggregate=aggregate,
                      first_token=first_token, max_series=max_series)  # fmt: skip
    nrows, ncols = len(view.facet_values), len(view.metrics)
    fig = _figure(4.6 * ncols + 1.8, 3.4 * nrows + 0.6, nrows=0)
    grid = fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey="col")
    note = _first_token_note(view)
    handles: dict[str, Any] = {}
    for r, fv in enumerate(view.facet_values):
        for c, metric in enumerate(view.metrics):
            ax = grid[r][c]
            ylabel, scale = _label(metric)
            lines = view.lines(metric, fv)
            for i, line in enumerate(lines):
                style = _style(i)
                if view.categorical:
                    offset = (i - (len(lines) - 1) / 2) * (DODGE / max(1, len(lines))) if len(lines) > 1 else 0.0
                    xs = np.array([view.categories.index(v) for v in line.x], dtype=float) + offset
                    style["linestyle"] = "none"
                else:
                    xs = np.array(line.x, dtype=float)
                ys = line.centre * scale
                if view.replicated:
                    err = np.vstack([ys - line.low * scale, line.high * scale - ys])
                    h = ax.errorbar(xs, ys, yerr=np.nan_to_num(err), capsize=3, label=line.label or None, **style)
                else:
                    (h,) = ax.plot(xs, ys, label=line.label or None, **style)
                if line.label:
                    handles.setdefault(line.label, h)
            if view.categorical:
                ax.set_xticks(range(len(view.categories)), [value_text(v) for v in view.categories])
                ax.set_xlim(-0.5, len(view.categories) - 0.5)
                if len(view.categories) > 4:
                    ax.tick_params(axis="x", labelrotation=30)
            if r == nrows - 1:
                ax.set_xlabel(_label(view.x)[0])
            ax.set_ylabel(ylabel)
            title = ylabel.split(" (")[0]
            if view.first_token in FIRST_TOKEN_SHORT and metric.startswith(
                ("latency.ttft_s", "latency.tpot_s", "latency.itl_s", "slo.")
            ):
                title += f" ({FIRST_TOKEN_SHORT[view.first_token]})"
            if view.facet is not None:
                title += f"\n{view.facet}={value_text(fv)}"
            ax.set_title(title, fontsize="medium")
            ax.grid(True, alpha=0.3)
    suptitle = _sweep_title(view)
    if note and any(m.startswith(("latency.ttft_s", "slo.")) for m in view.metrics):
        suptitle = f"{suptitle}\n{note}" if suptitle else note
    if suptitle:
        fig.suptitle(suptitle, fontsize="small")
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside right upper", fontsize="small",
                   title=", ".join(view.by) if view.by else None, title_fontsize="small")  # fmt: skip
    return fig


def _sweep_title(view: SweepView) -> str:
    parts = [f"{n}={value_text(v)}" for n, v in view.where]
    if view.aggregated_over:
        parts.append(f"{view.aggregate} over {', '.join(view.aggregated_over)}")
    if view.replicated:
        parts.append("mean of replicates, 95% interval")
    return "; ".join(parts)


def capacity_vs_split(split: Any) -> Figure:
    """Highest sustainable rate of every prefill:decode split (a :class:`kvwire.SplitResult` or its
    ``to_dict()``), the best one highlighted."""
    d = split.to_dict() if hasattr(split, "to_dict") else split
    try:
        splits = d["splits"]
        labels = [f"{s['prefill']}:{s['decode']}" for s in splits]
        values = [s["capacity"] if s["capacity"] is not None else 0.0 for s in splits]
        best = d.get("best") or {}
    except (KeyError, TypeError):
        raise PlotError("split: expected a SplitResult or its to_dict()", "split") from None
    fig = _figure()
    ax = fig.axes[0]
    colours = ["tab:orange" if (s["prefill"], s["decode"]) == (best.get("prefill"), best.get("decode")) else "tab:blue"
               for s in splits]  # fmt: skip
    ax.bar(labels, values, color=colours)
    ax.set_xlabel("prefill : decode instances")
    ax.set_ylabel(f"highest sustainable {_label(d.get('field', 'rate'))[0]}")
    ax.set_title(f"capacity at SLO attainment >= {d.get('slo_attainment', 0.9):.0%} by split")
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def stage_breakdown(
    results: pl.DataFrame | Mapping[str, SimResult] | Sequence[SimResult],
    *,
    label: str | Sequence[str] | None = None,
    where: Mapping[str, Any] | Sequence[str] | str | None = None,
) -> Figure:
    """Mean time per request in each stage (prefill queue, prefill, KV queue, transfer, decode queue, decode),
    one stacked bar per run or sweep point.

    Args:
        results: a sweep table (``stages.*`` columns), or runs as a list or ``{label: SimResult}``.
        label: for a sweep table, the column(s) naming each bar (default: the swept columns).
        where: for a sweep table, keep only the rows with these values (as :func:`metric_vs`).
    """
    if isinstance(results, pl.DataFrame):
        table = filter_rows(results, where)
        if label is None:
            swept = table.columns[1 : table.columns.index("replicate")] if "replicate" in table.columns else []
            label = swept or ["point"]
        cols = [label] if isinstance(label, str) else list(label)
        if "replicate" in table.columns:
            table = table.filter(pl.col("replicate") == 0)
        names = [", ".join(str(v) for v in r) for r in table.select(cols).rows()]
        stages = {s: table[f"stages.{s}"].cast(pl.Float64).fill_null(0.0).to_numpy() for s in STAGES}
    else:
        items = list(results.items()) if isinstance(results, Mapping) else [(f"run {i}", r) for i, r in
                                                                            enumerate(results)]  # fmt: skip
        names = [str(k) for k, _ in items]
        stages = {s: np.array([r.summary["stages"][s] or 0.0 for _, r in items]) for s in STAGES}
    if not names:
        raise PlotError("results: nothing to draw", "results")
    fig = _figure(8.0, 1.6 + 0.45 * len(names))
    ax = fig.axes[0]
    left = np.zeros(len(names))
    for s in STAGES:
        ax.barh(names, stages[s] * 1e3, left=left, label=STAGE_LABELS[s])
        left += stages[s] * 1e3
    ax.set_xlabel("mean time per request (ms)")
    ax.set_ylabel("configuration")
    ax.set_title("where a request's time goes")
    ax.invert_yaxis()
    fig.legend(*ax.get_legend_handles_labels(), fontsize="small", ncols=6, loc="outside lower center")
    ax.grid(True, axis="x", alpha=0.3)
    return fig


#: The two axes of a plan's frontier (x: interactivity, y: throughput per GPU), as InferenceMAX draws them.
FRONTIER_X = "output_tokens_per_s_per_user"
FRONTIER_Y = "output_tokens_per_s_per_gpu"
#: The statuses of the rows a plan evaluated (drawn as faint points); pruned and refused rows have no figures.
EVALUATED = ("verified", "screened")


def _is_plan(obj: Any) -> bool:
    """A :class:`~kvwire.PlanResult`, its ``to_dict()`` or a plan table (as opposed to ``{label: plan}``)."""
    if isinstance(obj, pl.DataFrame):
        return True
    if isinstance(obj, Mapping):
        return isinstance(obj.get("table"), list)
    return isinstance(getattr(obj, "table", None), pl.DataFrame) and hasattr(obj, "frontier")


def _pareto_rows(table: pl.DataFrame) -> pl.DataFrame:
    """The verified rows no other verified row beats on both axes (as :func:`kvwire.plan` computes its frontier),
    throughput per GPU descending."""
    from kvwire.planning.plan_result import _pareto

    good = table.filter(
        (pl.col("status") == "verified") & pl.col(FRONTIER_X).is_not_null() & pl.col(FRONTIER_Y).is_not_null()
    )
    rows = good.to_dicts()
    keep = _pareto(rows)
    return good[keep].sort([FRONTIER_Y, FRONTIER_X], descending=True) if keep else good.clear()


def _table_best(table: pl.DataFrame, front: pl.DataFrame) -> dict[str, Any] | None:
    """A plan table's best by the default objective (the most tokens/s per GPU, ties: per user, then fewer GPUs)."""
    if not front.height:
        return None
    by = [FRONTIER_Y, FRONTIER_X] + (["gpus"] if "gpus" in front.columns else [])
    row = front.sort(by, descending=[True, True, False][: len(by)]).row(0, named=True)
    if "mode" not in row:
        return {**row, "configuration": "best"}
    from kvwire.planning.plan_result import VARIED_SHORT, _describe

    def kinds(key: str) -> int:
        cols = [c for c in (f"{p}_device" for p in ("prefill", "decode", "colocated")) if c in table.columns]
        values = [table[c] for c in cols] if key == "device" else [table[key]] if key in table.columns else []
        return len({v for s in values for v in s.to_list() if v is not None})

    varied = tuple(k for k in VARIED_SHORT if kinds(k) > 1)
    try:
        text = _describe(row, varied)
    except KeyError:  # a table without the pool columns: no words for its configuration
        text = "best"
    return {**row, "configuration": text}


def _plan_parts(plan: Any, where: str) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any] | None, str | None]:
    """(evaluated rows, frontier rows, best, "model on N x device") of a PlanResult, its to_dict() or its table."""
    context = None
    if isinstance(plan, pl.DataFrame):
        table, front, best = plan, None, None
    elif isinstance(plan, Mapping) and isinstance(plan.get("table"), list):
        try:
            table = pl.DataFrame(plan["table"], infer_schema_length=None, strict=False)
            front = pl.DataFrame(plan.get("frontier") or [], infer_schema_length=None, strict=False)
        except (TypeError, ValueError, pl.exceptions.PolarsError) as e:
            raise PlotError(f"{where}: cannot read the plan's table: {e}", where) from None
        best = plan.get("best")
        gpus = plan.get("gpus")
        if isinstance(gpus, Mapping) and len(gpus) == 1 and plan.get("model"):
            ((device, n),) = gpus.items()
            context = f"{plan['model']} on {n} x {device}"
    elif isinstance(getattr(plan, "table", None), pl.DataFrame):
        table, front, best = plan.table, plan.frontier, plan.best
        gpus = getattr(plan, "gpus", None)
        if isinstance(gpus, Mapping) and len(gpus) == 1:
            ((device, n),) = gpus.items()
            context = f"{plan.model} on {n} x {device}"
    else:
        raise PlotError(
            f"{where}: expected a PlanResult, its to_dict() (kvwire plan --json) or its table, "
            f"got {type(plan).__name__}",
            where,
        )
    missing = [c for c in ("status", FRONTIER_X, FRONTIER_Y) if c not in table.columns]
    if missing:
        raise PlotError(
            f"{where}: not a plan's table (kvwire.plan or kvwire plan --json): it has no column {missing[0]!r}", where
        )
    if front is None:
        front = _pareto_rows(table)
        best = _table_best(table, front)
    if not front.height or any(c not in front.columns for c in (FRONTIER_X, FRONTIER_Y)):
        raise PlotError(
            f"{where}: the plan has no frontier rows to draw (no verified configuration met the SLO)", where
        )
    evaluated = table.filter(
        pl.col("status").is_in(EVALUATED) & pl.col(FRONTIER_X).is_not_null() & pl.col(FRONTIER_Y).is_not_null()
    )
    return evaluated, front, best, context


def frontier(
    plans: Any,
    *,
    annotate: bool = True,
    ax: Axes | None = None,
) -> Figure:
    """A deployment plan's frontier: output tokens/s per GPU (y) against output tokens/s per user (x, the
    interactivity), the axes InferenceMAX draws. Every evaluated configuration (verified or screened) is a
    faint point, the frontier a line with markers (left to right: more tokens/s per user, fewer per GPU), and
    the best configuration a star, labelled with its configuration and figures.

    Args:
        plans: a :class:`~kvwire.PlanResult`, its ``to_dict()`` (the JSON of ``kvwire plan --json``) or its
            ``table``; or ``{label: plan}`` to overlay several plans (say with and without disaggregation, or
            two links), one colour and one legend entry each. For a table the frontier is its verified rows
            that no other verified row beats on both axes, and the best is the one with the most tokens/s per
            GPU (the default objective; a ``min_gpus`` plan's best needs the PlanResult or its JSON).
        annotate: label each best star with its configuration and figures.
        ax: draw into these axes instead of a new figure.

    Raises:
        PlotError: not a plan (naming ``plans`` or ``plans[label]``), a plan without the frontier's columns, or
            one with no frontier rows (no verified configuration met the SLO).

    >>> import kvwire
    >>> from kvwire import plot
    >>> p = kvwire.plan("llama3-8b", {"h100": 2}, workload={"requests": 200}, space={"tp": [1]})
    >>> plot.frontier(p).axes[0].get_ylabel()
    'output tokens/s per GPU'
    """
    if _is_plan(plans):
        named: list[tuple[str | None, str, Any]] = [(None, "plans", plans)]
    elif isinstance(plans, Mapping):
        named = [(str(k), f"plans[{k!r}]", v) for k, v in plans.items()]
    else:
        raise PlotError(
            f"plans: expected a PlanResult, its to_dict() or table, or {{label: plan}}, got {type(plans).__name__}",
            "plans",
        )
    if not named:
        raise PlotError("plans: nothing to draw (an empty mapping)", "plans")
    parts = [(label, *_plan_parts(plan, where)) for label, where, plan in named]
    if len(parts) > MAX_SERIES:
        raise PlotError(f"plans: {len(parts)} plans, at most {MAX_SERIES} in one figure", "plans")
    fig = ax.get_figure() if ax is not None else _figure(7.5, 5.0)
    axes = ax if ax is not None else fig.axes[0]  # type: ignore[union-attr]
    single = len(parts) == 1

    def highest(col: str) -> float:
        values = [np.asarray(t[col].cast(pl.Float64).drop_nulls().to_numpy()) for _, ev, front, *_ in parts
                  for t in (ev, front)]  # fmt: skip
        return float(np.max(np.concatenate(values), initial=0.0))

    right, top = highest(FRONTIER_X) * 1.12 or 1.0, highest(FRONTIER_Y) * 1.1 or 1.0
    for i, (label, evaluated, front, best, _) in enumerate(parts):
        colour = f"C{i % 10}"
        axes.scatter(
            evaluated[FRONTIER_X].to_numpy(), evaluated[FRONTIER_Y].to_numpy(), s=14, color=colour, alpha=0.25,
            linewidths=0, label="evaluated configurations" if single else "_nolegend_", gid=f"evaluated-{i}",
        )  # fmt: skip
        line = front.select(FRONTIER_X, FRONTIER_Y).sort([FRONTIER_X, FRONTIER_Y], descending=[False, True])
        (h,) = axes.plot(
            line[FRONTIER_X].to_numpy(), line[FRONTIER_Y].to_numpy(), color=colour, marker=MARKERS[i % len(MARKERS)],
            linestyle=DASHES[i % len(DASHES)], markersize=6, label="frontier" if single else label,
        )  # fmt: skip
        h.set_gid(f"frontier-{i}")
        if best is None or best.get(FRONTIER_X) is None or best.get(FRONTIER_Y) is None:
            continue
        bx, by = float(best[FRONTIER_X]), float(best[FRONTIER_Y])
        (star,) = axes.plot(
            [bx], [by], linestyle="none", marker="*", markersize=16, color=colour, markeredgecolor="black",
            markeredgewidth=0.8, zorder=5, label="best" if single else "_nolegend_",
        )  # fmt: skip
        star.set_gid(f"best-{i}")
        if annotate:
            text = f"{best.get('configuration', 'best')}\n{by:,.0f} tok/s/GPU, {bx:,.1f} tok/s/user"
            if not single:
                text = f"{label}: {text}"
            flip = bx > 0.6 * right  # a star on the right half: its label on its left, inside the axes
            axes.annotate(
                text, xy=(bx, by), xytext=(-12 if flip else 12, -18 - 30 * i), textcoords="offset points",
                ha="right" if flip else "left", fontsize="x-small", color=colour,
                arrowprops={"arrowstyle": "-", "color": colour, "linewidth": 0.8}, gid=f"best-label-{i}",
            )  # fmt: skip
    if not single:  # one legend entry for the points and one for the stars of every plan
        axes.scatter([], [], s=14, color="grey", alpha=0.4, linewidths=0, label="evaluated configurations")
        axes.plot([], [], linestyle="none", marker="*", markersize=12, color="white", markeredgecolor="black",
                  label="best", gid="best-legend")  # fmt: skip
    axes.set_xlim(0, right)
    axes.set_ylim(0, top)
    axes.set_xlabel(_label(FRONTIER_X)[0])
    axes.set_ylabel(_label(FRONTIER_Y)[0])
    contexts = {c for *_, c in parts}
    title = "throughput per GPU vs interactivity"
    if len(contexts) == 1 and None not in contexts:
        title = f"{contexts.pop()}: {title}"
    axes.set_title(title, fontsize="medium")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small", loc="best")
    return fig  # type: ignore[return-value]


def read_table(path: str | Path) -> pl.DataFrame | dict[str, Any]:
    """A results file for plotting: a sweep directory (its ``results.parquet``), a ``.parquet``/``.csv`` table
    (a sweep's, or a plan's ``table``), or a ``.json`` result as a dict (a capacity/split result, or a plan's
    from ``kvwire plan --json``: its ``table``, ``frontier`` and ``best``, which :func:`frontier` takes)."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.parquet"
    try:
        if p.suffix == ".json":
            out: dict[str, Any] = json.loads(p.read_text(encoding="utf-8"))
            return out
        if p.suffix == ".csv":
            return pl.read_csv(p)
        return pl.read_parquet(p)
    except (OSError, json.JSONDecodeError, pl.exceptions.PolarsError) as e:
        raise PlotError(f"{path}: cannot read results: {e}", str(path)) from None


def sweep_first_token(path: str | Path) -> str | None:
    """The TTFT rule of a sweep directory's base scenario (``metrics.first_token`` in its ``manifest.json``:
    ``"prefill"`` or ``"decode"``; ``"decode"``, the default, when the base does not name it), or None when
    ``path`` is no sweep directory. (A grid that varies the rule puts it in the table, which says it there.)"""
    manifest = Path(path) / "manifest.json"
    try:
        doc = json.loads(manifest.read_text(encoding="utf-8")) if manifest.is_file() else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    base = doc.get("definition", {}).get("base") if isinstance(doc, dict) else None
    if not isinstance(base, dict):
        return None
    metrics = base.get("metrics")
    rule = metrics.get("first_token") if isinstance(metrics, dict) else base.get("metrics.first_token")
    if rule is None:
        return "decode"
    return rule if rule in ("prefill", "decode") else None


__all__ = [
    "PlotError", "capacity_vs_split", "frontier", "latency_cdf", "metric_vs", "read_table", "stage_breakdown",
    "sweep_first_token",
]  # fmt: skip
