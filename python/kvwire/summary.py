"""Polars views of a run: the per-request table, the percentile table and the summary dict.

Percentiles use linear interpolation between closest ranks (numpy's default ``"linear"`` method; Polars'
own default is ``"nearest"``, so it is always passed explicitly). Latency figures use the *measured* set —
completed requests after the warm-up fraction, by arrival — except ``handoff_s``, which uses every
request whose KV was transferred. Inter-token latency (``itl_s``) comes from the core, which aggregates
per-token gaps per decode step instead of storing one value per token (see ``metrics/itl.rs``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from kvwire.ceilings import load

#: Percentile columns of :func:`percentiles` / keys of each ``summary["latency"][metric]``.
QUANTILES: tuple[tuple[str, float], ...] = (
    ("p50", 0.5),
    ("p90", 0.9),
    ("p95", 0.95),
    ("p99", 0.99),
    ("p99_9", 0.999),
)
LATENCY_METRICS = ("ttft_s", "tpot_s", "itl_s", "e2e_s", "handoff_s")
_TIME_COLUMNS = (
    "prefill_start_s",
    "first_token_s",
    "kv_start_s",
    "kv_ready_s",
    "decode_start_s",
    "finish_s",
)
STAGES = ("prefill_queue_s", "prefill_s", "kv_wait_s", "kv_transfer_s", "decode_queue_s", "decode_s")


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


def _stats_exprs(metric: str) -> list[pl.Expr]:
    c = pl.col(metric)
    return [
        c.count().alias(f"{metric}:count"),
        c.mean().alias(f"{metric}:mean"),
        *[c.quantile(q, interpolation="linear").alias(f"{metric}:{name}") for name, q in QUANTILES],
        c.max().alias(f"{metric}:max"),
    ]


def _opt(x: Any) -> float | None:
    """A finite float, or None (never NaN)."""
    if x is None:
        return None
    f = float(x)
    return f if math.isfinite(f) else None


def percentiles(df: pl.DataFrame, itl: dict[str, Any]) -> pl.DataFrame:
    """One row per latency metric: ``metric, count, mean, p50, p90, p95, p99, p99_9, max`` (seconds)."""
    measured = df.lazy().filter(pl.col("measured"))
    per_request = ("ttft_s", "tpot_s", "e2e_s")
    row = (
        pl.concat(
            [
                measured.select([e for m in per_request for e in _stats_exprs(m)]),
                df.lazy().select(_stats_exprs("handoff_s")),
            ],
            how="horizontal",
        )
        .collect()
        .row(0, named=True)
    )
    rows = []
    for metric in LATENCY_METRICS:
        if metric == "itl_s":
            stats = {k: itl.get(k) for k in ("count", "mean", *[n for n, _ in QUANTILES], "max")}
        else:
            stats = {k.split(":", 1)[1]: v for k, v in row.items() if k.startswith(metric + ":")}
        rows.append({"metric": metric, **{k: (_opt(v) if k != "count" else int(v or 0)) for k, v in stats.items()}})
    schema: dict[str, Any] = {"metric": pl.String, "count": pl.Int64}
    schema.update({k: pl.Float64 for k in ("mean", *[n for n, _ in QUANTILES], "max")})
    return pl.DataFrame(rows, schema=schema)


def _occupancy(i: dict[str, Any], horizon: float, scheduler: dict[str, Any]) -> dict[str, float | None]:
    """How full an instance ran, besides busy time (which reads ~100% for any decoding instance): mean decode
    batch / max_decode_batch, mean prefill tokens per step / max_prefill_tokens (> 1 when an oversize prompt
    runs alone), and KV reserved over the run (time-mean and peak) / KV capacity."""
    cap = i["kv_capacity_tokens"]
    return {
        "decode_batch_occupancy": _safe_div(i["decode_batch_sum"], i["decode_steps"] * scheduler["max_decode_batch"]),
        "prefill_token_occupancy": _safe_div(
            i["prefill_tokens_sum"], i["prefill_steps"] * scheduler["max_prefill_tokens"]
        ),
        "kv_occupancy_mean": _safe_div(i["kv_token_s"], horizon * cap) if cap else None,
        "kv_occupancy_peak": _safe_div(i["kv_peak_tokens"], cap) if cap else None,
    }


def _stage_exprs() -> list[tuple[str, pl.Expr]]:
    """Each stage's duration per request (null where the request skipped the stage: no hand-off or decode
    for outputs of 0-1 tokens, no link when colocated or kept local). They sum to E2E."""
    col = pl.col
    return [
        ("prefill_queue_s", col("prefill_start_s") - col("arrival_s")),
        ("prefill_s", col("first_token_s") - col("prefill_start_s")),
        ("kv_wait_s", col("kv_start_s") - col("first_token_s")),
        ("kv_transfer_s", col("kv_ready_s") - col("kv_start_s")),
        ("decode_queue_s", col("decode_start_s") - pl.coalesce(col("kv_ready_s"), col("decode_start_s"))),
        ("decode_s", col("finish_s") - col("decode_start_s")),
    ]


def _safe_div(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def summarise(
    df: pl.DataFrame,
    pct: pl.DataFrame,
    stats: dict[str, Any],
    scenario: dict[str, Any],
    ceilings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The summary dict of ``README.md`` ("Summary"), JSON-serialisable, with no NaN anywhere. ``ceilings``
    (the core's analytic ceilings for the run) become the ``load`` entry."""
    col = pl.col
    horizon = float(stats["horizon_s"])
    slo = scenario["slo"]
    colocated = scenario["mode"] == "colocated"

    latency = {
        r["metric"]: {k: r[k] for k in ("mean", *[n for n, _ in QUANTILES], "max")} for r in pct.iter_rows(named=True)
    }

    m = df.filter(col("measured"))
    meets = (col("ttft_s") <= slo["ttft_s"]) & (col("tpot_s").is_null() | (col("tpot_s") <= slo["tpot_s"]))
    agg = m.select(
        meets.sum().alias("ok"),
        pl.len().alias("n"),
        col("arrival_s").min().alias("first"),
        col("arrival_s").max().alias("last"),
        *[e.fill_null(0.0).mean().alias(name) for name, e in _stage_exprs()],
        *[e.mean().alias(f"present:{name}") for name, e in _stage_exprs()],
    ).row(0, named=True)
    n_measured = int(agg["n"])
    ok = int(agg["ok"] or 0)
    window = (agg["last"] - agg["first"]) if n_measured >= 2 else 0.0
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

    done = df.filter(col("finish_s").is_not_null())
    out_tokens = int(done.select(col("output_tokens").cast(pl.Int64).sum()).item() or 0)
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

    # A skipped stage counts as 0 (the reference's rule), so the stage means sum to the mean E2E; the means
    # over the requests that had each stage are kept under "stages_present".
    stages = {s: _opt(agg[s]) for s in STAGES}
    stages_present = {s: _opt(agg[f"present:{s}"]) for s in STAGES}
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
        hot_owner = "colocated" if colocated and owner != "kv-link" else owner
    util_known = {k: v for k, v in utilisation.items() if v is not None}
    hot_resource = None
    if util_known:
        owned = {k: v for k, v in util_known.items() if hot_owner and k.startswith(hot_owner)}
        pool = owned or util_known
        hot_resource = max(pool, key=lambda k: pool[k])

    population = float(stats["population_area"])
    mean_e2e = done.select(col("e2e_s").mean()).item()
    little_l = _safe_div(population, horizon)
    lam_w = _safe_div(completed * float(mean_e2e), horizon) if mean_e2e is not None else None

    return {
        "requests": {
            "total": df.height,
            "completed": completed,
            "rejected": int(stats["rejected"]),
            "measured": n_measured,
            # prompt + output above the model's context (run, rejected or clipped by workload.over_context)
            "over_context": int(df["over_context"].sum()),
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
                "steps": i["steps"],
                "mean_batch": _safe_div(i["batch_sum"], i["steps"]),
                "power_capped_fraction": _safe_div(i["power_bound_s"], i["busy_s"]),
                "compute_bound_fraction": _safe_div(i["compute_bound_s"], i["busy_s"]),
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
            "local_decodes": int(df.select(col("local_decode").sum()).item() or 0) if not colocated else 0,
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
            "horizon_s": horizon,
            "wall_s": float(stats["wall_s"]),
            "steps": sum(int(i["steps"]) for i in instances),
        },
    }


__all__ = ["LATENCY_METRICS", "QUANTILES", "STAGES", "percentiles", "requests_frame", "summarise"]
