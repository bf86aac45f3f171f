"""Polars views of a run: the per-request table, the percentile table and the summary dict.

Percentiles use linear interpolation between closest ranks (numpy's default ``"linear"`` method; Polars'
own default is ``"nearest"``, so it is always passed explicitly). Latency figures use the *measured* set —
completed requests after the warm-up fraction, by arrival — except ``handoff_s``, which uses every
request whose KV was transferred. Inter-token latency (``itl_s``) comes from the core, which aggregates
per-token gaps per decode step instead of storing one value per token (see ``metrics/itl.rs``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from kvwire.results.ceilings import load
from kvwire.results.sessions import sessions_summary

#: Percentile columns of :func:`percentiles` / keys of each ``summary["latency"][metric]``.
QUANTILES: tuple[tuple[str, float], ...] = (
    ("p50", 0.5),
    ("p90", 0.9),
    ("p95", 0.95),
    ("p99", 0.99),
    ("p99_9", 0.999),
)
LATENCY_METRICS = ("ttft_s", "tpot_s", "itl_s", "e2e_s", "handoff_s")
#: Relative error bound of a percentile read from the core's quantile sketch (log buckets keyed by the top 13
#: mantissa bits, ``metrics/itl.rs``): 2⁻¹³ of the exact (numpy "linear") value.
SKETCH_RELATIVE_ERROR = 2.0**-13
#: Latency metrics whose percentiles come from the sketch even when the table is kept (one value per token).
APPROXIMATE_IN_MEMORY = ("itl_s",)
_TIME_COLUMNS = (
    "prefill_start_s",
    "first_token_s",
    "kv_start_s",
    "kv_ready_s",
    "decode_start_s",
    "finish_s",
)
STAGES = ("prefill_queue_s", "prefill_s", "kv_wait_s", "kv_transfer_s", "decode_queue_s", "decode_s")


def kv_hold(h: Mapping[str, Any]) -> dict[str, Any]:
    """The summary's ``kv_hold`` section from the core's totals (paged KV in a disaggregated run; all 0 otherwise).

    >>> kv_hold({"handoffs": 4, "waited": 1, "wait_s_sum": 0.5, "wait_s_max": 0.5,
    ...          "prefill_held_peak_blocks": 9, "decode_peak_blocks": 30})["wait_s_mean"]
    0.125
    """
    handoffs = int(h["handoffs"])
    return {
        "handoffs": handoffs,
        "waited": int(h["waited"]),
        "wait_s_mean": float(h["wait_s_sum"]) / handoffs if handoffs else 0.0,
        "wait_s_max": float(h["wait_s_max"]),
        "prefill_held_peak_blocks": int(h["prefill_held_peak_blocks"]),
        "decode_peak_blocks": int(h["decode_peak_blocks"]),
    }


def requests_frame(columns: dict[str, np.ndarray]) -> pl.DataFrame:
    """Build the per-request DataFrame from the core's columns.

    The numeric columns are wrapped without copying; stage times the core marks as NaN (the stage did not
    happen) and instance index -1 become nulls, and the derived latencies are added.
    """
    df = pl.DataFrame({name: columns[name] for name in columns})
    col = pl.col
    seen = "first_token_seen_s" if "first_token_seen_s" in df.columns else "first_token_s"
    df = df.with_columns(
        *[col(c).fill_nan(None) for c in _TIME_COLUMNS],
        *[pl.when(col(c) >= 0).then(col(c)).alias(c) for c in ("prefill_instance", "decode_instance")],
    )
    if seen == "first_token_s":
        df = df.with_columns(col("first_token_s").alias("first_token_seen_s"))
    else:
        df = df.with_columns(col(seen).fill_nan(None))
    # The seen column after finish_s whichever way it came (alias of first_token_s by default).
    order = [c for c in df.columns if c != "first_token_seen_s"]
    df = df.select(*order[: order.index("finish_s") + 1], "first_token_seen_s", *order[order.index("finish_s") + 1 :])
    return df.with_columns(
        (col("first_token_seen_s") - col("arrival_s")).alias("ttft_s"),
        pl.when(col("output_tokens") >= 2)
        .then((col("finish_s") - col("first_token_seen_s")) / (col("output_tokens").cast(pl.Float64) - 1.0))
        .alias("tpot_s"),
        (col("finish_s") - col("arrival_s")).alias("e2e_s"),
        (col("kv_ready_s") - col("first_token_s")).alias("handoff_s"),
    )


#: The core's per-request columns as numpy arrays (times NaN where a stage did not happen).
Columns = Mapping[str, np.ndarray]


def _core_columns(requests: pl.DataFrame | Columns) -> Columns:
    """The core's raw columns as numpy arrays (NaN for a missing time), from either form of the table."""
    if not isinstance(requests, pl.DataFrame):
        return requests
    out: dict[str, np.ndarray] = {}
    for name in (
        "arrival_s",
        "output_tokens",
        "measured",
        "local_decode",
        "over_context",
        "failed",
        "first_token_seen_s",
        *_TIME_COLUMNS,
    ):
        if name in requests.columns:
            series = requests[name]
            out[name] = series.to_numpy() if series.dtype == pl.Boolean else series.cast(pl.Float64).to_numpy()
    return out


def _derived(cols: Columns) -> dict[str, np.ndarray]:
    """ttft, tpot, e2e and hand-off per request (NaN where undefined), as in :func:`requests_frame`."""
    first = cols["first_token_s"]
    # When the user sees the first token (metrics.first_token): after prefill (default) or after the KV lands
    # and the first decode step; TTFT and TPOT count from it, the hand-off from the prefill's first token.
    seen = cols.get("first_token_seen_s", first)
    finish = cols["finish_s"]
    out_tokens = cols["output_tokens"]
    tpot = np.subtract(finish, seen)
    with np.errstate(invalid="ignore", divide="ignore"):
        np.divide(tpot, out_tokens - 1.0, out=tpot)
    tpot[out_tokens < 2] = np.nan
    return {
        "ttft_s": seen - cols["arrival_s"],
        "tpot_s": tpot,
        "e2e_s": finish - cols["arrival_s"],
        "handoff_s": cols["kv_ready_s"] - first,
    }


def with_derived(cols: Columns) -> Columns:
    """The core's columns with the derived latencies (``ttft_s``, ``tpot_s``, ``e2e_s``, ``handoff_s``) added,
    once; the percentiles and the summary reuse them."""
    if "ttft_s" in cols:
        return cols
    return {**cols, **_derived(cols)}


def _rows(mask: np.ndarray) -> slice | np.ndarray:
    """Index of the rows a boolean mask selects: a slice (no copies) when they are one contiguous run, as
    the measured set is when nothing was rejected (every request after the warm-up, in arrival order)."""
    first = int(np.argmax(mask)) if mask.size else 0
    n = int(mask.sum())
    if n == 0 or mask[first : first + n].all():
        return slice(first, first + n)
    return mask


def _present(x: np.ndarray) -> np.ndarray:
    """The non-missing values of a float column (the core marks a missing time with NaN); the column itself,
    without a copy, when its sum shows that nothing is missing (the times are finite)."""
    if not math.isnan(float(np.add.reduce(x))):
        return x
    present: np.ndarray = x[~np.isnan(x)]
    return present


def _clamped_mean(v: np.ndarray, lo: float, hi: float) -> float | None:
    """The mean of ``v`` kept inside [min, max]: a floating-point sum can land one ulp outside when every
    value is (almost) the same, where the true mean cannot."""
    return _opt(min(max(float(v.mean()), lo), hi))


def _mean(x: np.ndarray) -> float | None:
    v = _present(x)
    return _clamped_mean(v, float(v.min()), float(v.max())) if v.size else None


_Q = np.array([100.0 * q for _, q in QUANTILES]) / 100.0  # as np.percentile scales them


def _stats(x: np.ndarray) -> dict[str, Any]:
    """count, mean, the :data:`QUANTILES` and max of the present values.

    The quantiles are numpy's ``"linear"`` method (virtual index (n - 1)·q, then numpy's two-sided lerp)
    computed from one ``np.partition`` at the needed ranks instead of one selection per quantile.
    """
    v = _present(x)
    n = v.size
    if n == 0:
        return {"count": 0, "mean": None, **{name: None for name, _ in QUANTILES}, "max": None}
    h = _Q * (n - 1)
    lo = np.floor(h).astype(np.intp)
    hi = np.minimum(lo + 1, n - 1)
    part = np.partition(v, np.unique(np.concatenate((lo, hi, [0, n - 1]))))
    a, b, t = part[lo], part[hi], h - lo
    diff = b - a
    qs = np.where(t >= 0.5, b - diff * (1.0 - t), a + diff * t)
    return {
        "count": int(n),
        "mean": _clamped_mean(v, float(part[0]), float(part[n - 1])),
        **{name: _opt(q) for (name, _), q in zip(QUANTILES, qs, strict=True)},
        "max": _opt(part[n - 1]),
    }


def _opt(x: Any) -> float | None:
    """A finite float, or None (never NaN)."""
    if x is None:
        return None
    f = float(x)
    return f if math.isfinite(f) else None


#: Column types of :func:`percentiles`.
PCT_SCHEMA: dict[str, Any] = {
    "metric": pl.String,
    "count": pl.Int64,
    **{k: pl.Float64 for k in ("mean", *[n for n, _ in QUANTILES], "max")},
}


def percentile_rows(cols: Columns, itl: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of :func:`percentiles` as dicts (what :func:`summarise` reads)."""
    derived = with_derived(cols)
    measured = _rows(cols["measured"])
    rows = []
    for metric in LATENCY_METRICS:
        if metric == "itl_s":
            raw = {k: itl.get(k) for k in ("count", "mean", *[n for n, _ in QUANTILES], "max")}
            stats = {k: (_opt(v) if k != "count" else int(v or 0)) for k, v in raw.items()}
        elif metric == "handoff_s":
            stats = _stats(derived[metric])
        else:
            stats = _stats(derived[metric][measured])
        rows.append({"metric": metric, **stats})
    return rows


def streamed_percentile_rows(rows: dict[str, Any], itl: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of :func:`percentiles` of a streamed run, from the core's per-request figures (``rows``: the
    quantile sketches of ``ttft_s``, ``tpot_s``, ``e2e_s``, ``handoff_s``) and the ITL histogram."""
    out = []
    for metric in LATENCY_METRICS:
        raw = itl if metric == "itl_s" else rows["latency"][metric]
        out.append(
            {
                "metric": metric,
                "count": int(raw.get("count") or 0),
                **{k: _opt(raw.get(k)) for k in ("mean", *[n for n, _ in QUANTILES], "max")},
            }
        )
    return out


def percentiles(df: pl.DataFrame | Columns, itl: dict[str, Any]) -> pl.DataFrame:
    """One row per latency metric: ``metric, count, mean, p50, p90, p95, p99, p99_9, max`` (seconds).

    ``df`` is the per-request table or the core's raw columns (numpy arrays, NaN for a missing time); the
    figures are computed with numpy on the columns (its sort-based percentiles release the GIL), which is
    what makes a summary cheap next to the run (``benches/HISTORY.md``, issue 10).
    """
    return pl.DataFrame(percentile_rows(with_derived(_core_columns(df)), itl), schema=PCT_SCHEMA)


def _occupancy(i: dict[str, Any], horizon: float, scheduler: dict[str, Any]) -> dict[str, float | None]:
    """How full an instance ran, besides busy time (which reads ~100% for any decoding instance): mean decode
    batch / max_decode_batch, mean prefill tokens per step / the step's prompt-token budget
    (:func:`prefill_token_budget`; > 1 when an oversize prompt runs alone), and KV reserved over the run
    (time-mean and peak) / KV capacity."""
    cap = i["kv_capacity_tokens"]
    return {
        "decode_batch_occupancy": _safe_div(i["decode_batch_sum"], i["decode_steps"] * scheduler["max_decode_batch"]),
        "prefill_token_occupancy": _safe_div(
            i["prefill_tokens_sum"], i["prefill_steps"] * prefill_token_budget(scheduler)
        ),
        "kv_occupancy_mean": _safe_div(i["kv_token_s"], horizon * cap) if cap else None,
        "kv_occupancy_peak": _safe_div(i["kv_peak_tokens"], cap) if cap else None,
    }


def prefill_token_budget(scheduler: Mapping[str, Any]) -> int:
    """The prompt tokens one prefill step may hold: ``max_prefill_tokens`` for whole-prompt batching,
    ``max_num_batched_tokens`` (decode rows included) for chunked prefill.

    >>> prefill_token_budget({"policy": "chunked", "max_prefill_tokens": 8192, "max_num_batched_tokens": 512})
    512
    >>> prefill_token_budget({"max_prefill_tokens": 8192})
    8192
    """
    if scheduler.get("policy") == "chunked":
        return int(scheduler["max_num_batched_tokens"])
    return int(scheduler["max_prefill_tokens"])


def _safe_div(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (inf, -inf, NaN) at any depth of dicts, lists and tuples (which
    become lists) replaced by ``None``: the summary's guarantee that every number is finite or ``None``, so
    that every JSON written of it passes a strict parser.

    >>> finite({"load_factor": {"prefill": float("inf"), "decode": 0.5}, "xs": [1.0, float("nan")]})
    {'load_factor': {'prefill': None, 'decode': 0.5}, 'xs': [1.0, None]}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def _prefix_cache(p: dict[str, Any]) -> dict[str, Any]:
    """The summary's ``prefix_cache`` from the core's totals (``hit_token_ratio`` 0.0 when nothing was
    prefilled)."""
    prompt, cached = int(p["prompt_tokens"]), int(p["cached_tokens"])
    return {
        "hit_token_ratio": cached / prompt if prompt > 0 else 0.0,
        "cached_tokens": cached,
        "prompt_tokens": prompt,
        "hit_requests": int(p["hit_requests"]),
        "link_tokens_skipped": int(p["link_tokens_skipped"]),
        "link_bytes_saved": float(p["link_bytes_saved"]),
    }


def _kv_tier(t: dict[str, Any]) -> dict[str, Any]:
    """One entry of the summary's ``kv_tiers`` from the core's totals of that tier."""
    return {
        "kind": str(t["kind"]),
        "capacity_bytes": float(t["capacity_bytes"]),
        "hit_tokens": int(t["hit_tokens"]),
        "hit_requests": int(t["hit_requests"]),
        "read_bytes": float(t["read_bytes"]),
        "written_bytes": float(t["written_bytes"]),
        "load_s": float(t["load_s"]),
        "peak_bytes": float(t["peak_bytes"]),
    }


def _stage_means(m: Columns) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Mean of each stage over the (measured) rows of ``m``: counting a skipped stage as 0 (the reference's
    rule, so the six means sum to the mean E2E: no hand-off or decode for outputs of 0-1 tokens, no link when
    colocated or kept local), and over only the rows that had the stage. One scratch buffer."""
    buf = np.empty_like(m["arrival_s"])
    spans = {
        "prefill_queue_s": ("prefill_start_s", "arrival_s"),
        "prefill_s": ("first_token_s", "prefill_start_s"),
        "kv_wait_s": ("kv_start_s", "first_token_s"),
        "kv_transfer_s": ("kv_ready_s", "kv_start_s"),
        "decode_queue_s": ("decode_start_s", "kv_ready_s"),
        "decode_s": ("finish_s", "decode_start_s"),
    }
    out: dict[str, float | None] = {}
    present: dict[str, float | None] = {}
    n = m["arrival_s"].size
    for stage in STAGES:
        end, start = spans[stage]
        np.subtract(m[end], m[start], out=buf)
        if stage == "decode_queue_s":
            # A request decoded where it was prefilled has no KV arrival: it waited 0 for it.
            no_kv = np.isnan(m["kv_ready_s"])
            if no_kv.any():
                buf[no_kv] = m["decode_start_s"][no_kv] - m["decode_start_s"][no_kv]
        present[stage] = _mean(buf)
        had = ~np.isnan(buf)
        out[stage] = _opt(float(buf[had].sum()) / n) if n else None
    return out, present


def row_figures(df: pl.DataFrame | Columns, scenario: dict[str, Any]) -> dict[str, Any]:
    """The per-request figures of the summary, from the table's columns: counts, the measured requests' SLO
    count and arrival window, stage means, output tokens and mean E2E of the completed requests. A streamed
    run gets the same figures from the core (:func:`streamed_row_figures`)."""
    cols = _core_columns(df)
    slo = scenario["slo"]
    derived = with_derived(cols)
    measured = _rows(cols["measured"])
    m = {name: cols[name][measured] for name in ("arrival_s", *_TIME_COLUMNS)}
    ttft, tpot = derived["ttft_s"][measured], derived["tpot_s"][measured]
    with np.errstate(invalid="ignore"):  # NaN (a stage that did not happen) compares False, as null does
        meets = (ttft <= slo["ttft_s"]) & (np.isnan(tpot) | (tpot <= slo["tpot_s"]))
    if "failed" in cols:
        # Faults: a request that failed for good (never finished) misses its SLO whatever it had seen.
        meets &= ~cols["failed"][measured]
    n_measured = int(ttft.size)
    window = float(m["arrival_s"].max() - m["arrival_s"].min()) if n_measured >= 2 else 0.0
    stages, stages_present = _stage_means(m)
    done = ~np.isnan(cols["finish_s"])
    return {
        "total": int(cols["arrival_s"].size),
        "measured": n_measured,
        "slo_met": int(meets.sum()),
        "window_s": window,
        "stages": stages,
        "stages_present": stages_present,
        "output_tokens": int(cols["output_tokens"][done].sum(dtype=np.int64)),
        "mean_e2e_s": _mean(derived["e2e_s"][done]),
        # prompt + output above the model's context (run, rejected or clipped by workload.over_context)
        "over_context": int(cols["over_context"].sum()) if "over_context" in cols else 0,
        "local_decodes": int(cols["local_decode"].sum()),
    }


def streamed_row_figures(rows: dict[str, Any]) -> dict[str, Any]:
    """:func:`row_figures` of a streamed run, from the core's accumulated figures (``rows``)."""
    n = int(rows["measured"])
    arrival = rows["measured_arrival"]
    stages = rows["stages"]
    return {
        "total": int(rows["total"]),
        "measured": n,
        "slo_met": int(rows["slo_met"]),
        "window_s": float(arrival["max"] - arrival["min"]) if n >= 2 else 0.0,
        "stages": {k: (_opt(stages[k]["sum"] / n) if n else None) for k in STAGES},
        "stages_present": {k: _opt(stages[k]["mean"]) for k in STAGES},
        "output_tokens": int(rows["output_tokens_done"]),
        "mean_e2e_s": _opt(rows["e2e_done"]["mean"]),
        "over_context": int(rows["over_context"]),
        "local_decodes": int(rows["local_decode"]),
    }


def summarise(
    df: pl.DataFrame | Columns | None,
    pct: pl.DataFrame | list[dict[str, Any]],
    stats: dict[str, Any],
    scenario: dict[str, Any],
    ceilings: dict[str, Any] | None = None,
    *,
    figures: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The summary dict of ``docs/reference/summary.md``, JSON-serialisable, with no NaN anywhere.

    ``df`` is the per-request table or the core's raw columns; ``pct`` the :func:`percentiles` table (or its
    rows). Computed with numpy on the columns, without building the Polars table. ``ceilings`` (the core's
    analytic ceilings for the run) become the ``load`` entry. A streamed run passes ``df=None`` and its
    ``figures`` (:func:`streamed_row_figures`) instead; its percentiles are then the sketch's.
    """
    horizon = float(stats["horizon_s"])
    slo = scenario["slo"]
    colocated = scenario["mode"] == "colocated"
    streamed = figures is not None
    if figures is None:
        if df is None:
            raise TypeError("summarise: give the table (df) or a streamed run's figures")
        figures = row_figures(df, scenario)

    rows = pct.iter_rows(named=True) if isinstance(pct, pl.DataFrame) else pct
    latency = {r["metric"]: {k: r[k] for k in ("mean", *[n for n, _ in QUANTILES], "max")} for r in rows}

    n_measured = int(figures["measured"])
    ok = int(figures["slo_met"])
    window = float(figures["window_s"])
    stages, stages_present = figures["stages"], figures["stages_present"]
    slo_out: dict[str, Any] = {
        "ttft_s": slo["ttft_s"],
        "tpot_s": slo["tpot_s"],
        "attainment": ok / n_measured if n_measured else None,
        "goodput_req_per_s": _opt(ok / window) if window > 0 else None,
        # The reference's goodput divides by the measured requests' arrival window (first to last arrival),
        # throughput by the whole run (to the last completion), so goodput can exceed throughput.
        "goodput_window_s": window if n_measured >= 2 else None,
    }
    if slo_out["goodput_req_per_s"] is None:
        slo_out["goodput_note"] = "fewer than two measured requests, or their arrival window is too short to divide by"
    if n_measured == 0:
        slo_out["attainment_note"] = "no measured requests"

    out_tokens = int(figures["output_tokens"])
    completed = int(stats["completed"])

    instances = stats["instances"]
    utilisation = {i["name"]: _safe_div(i["busy_s"], horizon) for i in instances}
    links = stats["links"]
    for lk in links:
        utilisation[lk["resource"]] = _safe_div(lk["busy_s"], lk["channels"] * horizon)
    link = next((lk for lk in links if lk["resource"] == "kv-link"), None)

    compute_j = sum(i["compute_j"] for i in instances)
    memory_j = sum(i["memory_j"] for i in instances)
    link_j = sum(lk["link_j"] for lk in links)
    transit_j = sum(lk["transit_j"] for lk in links)
    convert_j = sum(lk["convert_j"] for lk in links)
    static_j = float(stats["static_j"])
    total_j = static_j + compute_j + memory_j + link_j + transit_j + convert_j

    hot_stage, hot_owner = None, None
    candidates = {k: v for k, v in stages.items() if k != "decode_s" and v is not None}
    if candidates:
        hot_stage = max(candidates, key=lambda k: candidates[k])
        owner = {
            "prefill_queue_s": "prefill",
            "prefill_s": "prefill",
            "kv_wait_s": "kv-link",
            "kv_transfer_s": "kv-link",
            "decode_queue_s": "decode",
        }[hot_stage]
        hold = stats["kv_hold"]
        if (
            hot_stage == "kv_wait_s"
            and hold["handoffs"]
            and hold["wait_s_sum"] / hold["handoffs"] >= 0.5 * candidates[hot_stage]
        ):
            # Paged KV holding: most of the wait is for room on the decode instance, not for the link.
            owner = "decode"
        hot_owner = "colocated" if colocated and owner != "kv-link" else owner
    util_known = {k: v for k, v in utilisation.items() if v is not None}
    hot_resource = None
    if util_known:
        owned = {k: v for k, v in util_known.items() if hot_owner and k.startswith(hot_owner)}
        pool = owned or util_known
        hot_resource = max(pool, key=lambda k: pool[k])

    population = float(stats["population_area"])
    mean_e2e = figures["mean_e2e_s"]
    little_l = _safe_div(population, horizon)
    lam_w = _safe_div(completed * float(mean_e2e), horizon) if mean_e2e is not None else None

    summary: dict[str, Any] = {
        "requests": {
            "total": int(figures["total"]),
            "completed": completed,
            "rejected": int(stats["rejected"]),
            "measured": n_measured,
            "over_context": int(figures["over_context"]),
        },
        "latency": latency,
        "slo": slo_out,
        "throughput": {
            "req_per_s": _safe_div(completed, horizon),
            "output_tokens_per_s": _safe_div(out_tokens, horizon),
            "window_s": horizon,
        },
        "utilisation": utilisation,
        "energy": {
            "total_j": total_j,
            "j_per_output_token": _safe_div(total_j, out_tokens),
            "avg_power_w": _safe_div(total_j, horizon),
            "breakdown": {
                "static_j": static_j,
                "compute_j": compute_j,
                "memory_j": memory_j,
                "link_j": link_j,
                "transit_j": transit_j,
                "convert_j": convert_j,
            },
        },
        "stages": stages,
        "stages_present": stages_present,
        "hotspot": {
            "stage": hot_stage,
            "resource": hot_resource,
            "utilisation": util_known.get(hot_resource) if hot_resource else None,
            "busy_over_90": sorted(k for k, v in util_known.items() if v > 0.9),
        },
        "instances": {
            i["name"]: {
                "device": i["device"],
                "devices": i["devices"],
                "compute_format": i["compute_format"],
                "compute_fallback_from": i["compute_wanted"],
                "steps": i["steps"],
                "mean_batch": _safe_div(i["batch_sum"], i["steps"]),
                "power_capped_fraction": _safe_div(i["power_bound_s"], i["busy_s"]),
                "compute_bound_fraction": _safe_div(i["compute_bound_s"], i["busy_s"]),
                "comm_fraction": _safe_div(i["comm_s"], i["busy_s"]),
                "avg_power_w": _safe_div(i["idle_w"] * horizon + i["compute_j"] + i["memory_j"], horizon),
                "peak_step_power_w": i["peak_step_power_w"] if i["steps"] else None,
                "mfu": _safe_div(i["flops"], horizon * i["peak_flops_per_s"]),
                "mbu": _safe_div(i["bytes"], horizon * i["peak_bytes_per_s"]),
                "kv_capacity_tokens": i["kv_capacity_tokens"],
                "kv_peak_tokens": i["kv_peak_tokens"],
                **_occupancy(i, horizon, scenario["scheduler"]),
            }
            for i in instances
        },
        "link": None
        if link is None
        else {
            "preset": link["name"],
            "channels": link["channels"],
            "transfers": link["transfers"],
            "handoff_gb": link["handoff_bytes"] / 1e9,
            "wire_gb": link["wire_bytes"] / 1e9,
            "mean_wait_s": _safe_div(link["wait_s"], link["transfers"]),
            "achieved_gb_per_s": _safe_div(link["wire_bytes"] / 1e9, link["busy_s"]),
            "link_j_per_transfer": _safe_div(link["link_j"], link["transfers"]),
            "local_decodes": int(figures["local_decodes"]) if not colocated else 0,
            "transit_bound_fraction": _safe_div(link["transit_bound"], link["transfers"]),
        },
        "hops": [
            {
                "resource": lk["resource"],
                "preset": lk["name"],
                "channels": lk["channels"],
                "transfers": lk["transfers"],
                "wire_gb": lk["wire_bytes"] / 1e9,
                "utilisation": _safe_div(lk["busy_s"], lk["channels"] * horizon),
                "link_j": lk["link_j"],
                "convert_j": lk["convert_j"],
            }
            for lk in links
        ],
        "little": {"l": little_l, "lambda_w": lam_w},
        "load": None if ceilings is None else load(ceilings),
        "run": {
            "events": int(stats["events"]),
            "calendar_steps": int(stats["calendar_steps"]),
            "horizon_s": horizon,
            "wall_s": float(stats["wall_s"]),
            "steps": sum(int(i["steps"]) for i in instances),
        },
        "preemptions": {
            "count": int(stats["preemptions"]["count"]),
            "recompute_tokens": int(stats["preemptions"]["recompute_tokens"]),
            "swap_bytes": float(stats["preemptions"]["swap_bytes"]),
        },
        "kv_hold": kv_hold(stats["kv_hold"]),
        "prefix_cache": _prefix_cache(stats["prefix_cache"]),
        "accuracy": {
            "requests_kept": not streamed,
            "approximate": list(LATENCY_METRICS if streamed else APPROXIMATE_IN_MEMORY),
            "relative_error": SKETCH_RELATIVE_ERROR,
        },
    }
    sessions = None if df is None else sessions_summary(df, scenario)
    if sessions is not None:
        summary["sessions"] = sessions
    if scenario.get("speculative") is not None:
        verified = sum(int(i["spec_rows"]) for i in instances)
        accepted = sum(int(i["spec_accepted"]) for i in instances)
        draft_s = sum(float(i["draft_s"]) for i in instances)
        summary["speculative"] = {
            # Per sequence and verify step: the drafts kept, and the tokens got (those plus the step's own).
            "accepted_tokens_per_step": _safe_div(accepted, verified),
            "tokens_per_step": _safe_div(verified + accepted, verified),
            "verified_sequence_steps": verified,
            "draft_s": draft_s,
            "draft_share_of_busy": _safe_div(draft_s, sum(float(i["busy_s"]) for i in instances)),
        }
    faults = stats.get("faults")
    if faults is not None:
        summary["faults"] = {
            "instance_failures": int(faults["instance_failures"]),
            "transfer_failures": int(faults["transfer_failures"]),
            "link_failures": int(faults["link_failures"]),
            "retried_requests": int(faults["retried_requests"]),
            "failed_requests": int(faults["failed_requests"]),
            "lost_work_s": float(faults["lost_work_s"]),
            "downtime_s": float(faults["downtime_s"]),
            "availability": float(faults["availability"]),
        }
    tiers = stats.get("kv_tiers") or []
    if tiers:
        summary["kv_tiers"] = [_kv_tier(t) for t in tiers]
    # Ratios of finite figures can still overflow (an offered rate over a subnormal arrival window).
    out: dict[str, Any] = finite(summary)
    return out


__all__ = [
    "APPROXIMATE_IN_MEMORY",
    "LATENCY_METRICS",
    "QUANTILES",
    "SKETCH_RELATIVE_ERROR",
    "STAGES",
    "finite",
    "percentile_rows",
    "percentiles",
    "requests_frame",
    "row_figures",
    "streamed_percentile_rows",
    "streamed_row_figures",
    "summarise",
    "with_derived",
]
