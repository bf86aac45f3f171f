"""Property tests of the Python API over random scenarios (Hypothesis).

Scenarios are generated as plain dicts (the public contract): disaggregated or colocated, 1-4 instances per
pool on heterogeneous devices, three models, every link preset with 1-3 channels, compression, Poisson or
gamma arrivals up to heavy overload, fixed/uniform/lognormal lengths (outputs 0 and 1 included, prompts
that overflow small KV caches), explicit request tables with arrival ties and prompts placed exactly on the
rejection boundary (given as ``workload.trace`` or as a Polars ``requests=`` frame), small batching limits,
every router, power caps and warm-up fractions.

Checked on :class:`kvwire.SimResult` (spec/simulator.md (c), (d) and "Clarifications"):

* accounting: every request is rejected (no stage at all) or finished; the summary's counts agree with the
  table; the measured set is the first int(warmup·completed) completed requests by arrival left out;
* per-request stamps are monotone and present exactly when the stage happened; the six stages sum to E2E;
  the derived columns (ttft, tpot, e2e, handoff) follow their definitions;
* the summary is JSON without NaN; every percentile row is ordered p50 ≤ p90 ≤ p95 ≤ p99 ≤ p99.9 ≤ max
  with the mean inside [min, max], and equals numpy's "linear" percentiles of the table (ITL: the exact
  count and mean); Little's law to 1e-6; utilisations in [0, 1]; energy terms finite and non-negative and
  adding up; SLO attainment and goodput recomputed from the table;
* determinism, the macro-step fast path (``engine.macro_steps`` true vs false: identical tables), and the
  two ways of passing a request table (``workload.trace`` vs ``requests=``) give identical results.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import math
import os
import statistics
from collections.abc import Iterator
from typing import Any

import kvwire
import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

DEVICES = ("h100", "a100", "a100-40g", "h200", "b200")
IDLE_TDP = {
    "h100": (100.0, 700.0),
    "h200": (100.0, 700.0),
    "a100": (60.0, 400.0),
    "a100-40g": (60.0, 400.0),
    "b200": (140.0, 1000.0),
}
MODELS = ("llama3-8b", "mistral-7b", "llama3.2-1b")
LINKS = ("nvlink4", "ib-ndr", "pcie5", "pcie4", "eth-100g", "eth-25g", "cpo-optical", "nvlink3", "nvlink5")
TIME_COLUMNS = ("prefill_start_s", "first_token_s", "kv_start_s", "kv_ready_s", "decode_start_s", "finish_s")
PCT = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p99_9", 99.9))

#: Examples per property (a few seconds each); ``KVWIRE_HYPOTHESIS_EXAMPLES`` raises it for a longer bug hunt.
EXAMPLES = int(os.environ.get("KVWIRE_HYPOTHESIS_EXAMPLES", "100"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------------------------------
# Scenario generation


@st.composite
def pools(draw: st.DrawFn) -> dict[str, Any]:
    device = draw(st.sampled_from(DEVICES))
    pool: dict[str, Any] = {
        "device": device,
        "instances": draw(st.integers(1, 4)),
        "devices_per_instance": draw(st.integers(1, 2)),
    }
    if draw(st.booleans()) and draw(st.booleans()):
        idle, tdp = IDLE_TDP[device]
        pool["power_cap_w"] = idle + 1.0 + draw(st.floats(0.0, 1.2)) * (tdp - idle)
    return pool


def lengths(prompt: bool) -> st.SearchStrategy[dict[str, Any]]:
    lo = 1 if prompt else 0
    top = 600_000 if prompt else 300
    fixed = st.builds(
        lambda v: {"dist": "fixed", "value": v},
        st.integers(lo, top) | st.integers(lo, lo + 2) | st.integers(lo, 4000),
    )
    uniform = st.builds(
        lambda a, w: {"dist": "uniform", "min": a, "max": a + w},
        st.integers(lo, lo + 2000 if prompt else lo + 3),
        st.integers(0, top),
    )
    lognormal = st.builds(
        lambda mean, cv, mn, width: {
            "dist": "lognormal",
            "mean": mean,
            "cv": cv,
            "min": mn,
            "max": mn + width,
        },
        st.floats(1.0, 8000.0 if prompt else 200.0),
        st.just(0.0) | st.floats(0.0, 2.0),
        st.integers(lo, lo + 2),
        st.integers(0, 400_000 if prompt else 400),
    )
    return st.one_of(fixed, uniform, lognormal)


@st.composite
def trace_rows(draw: st.DrawFn, max_rows: int) -> list[tuple[float, Any, int]]:
    """(gap, prompt, output); prompt is an int, or ("cap", frac, delta) relative to the KV capacity."""
    gap = st.just(0.0) | st.floats(0.0, 0.3) | st.just(0.25) | st.floats(0.0, 5.0, allow_subnormal=False)
    prompt = (
        st.integers(1, 4000)
        | st.integers(1, 3)
        | st.integers(1, 20_000)
        | st.tuples(st.just("cap"), st.floats(0.2, 1.3), st.just(0))
        | st.tuples(st.just("cap"), st.just(1.0), st.integers(-2, 2))
    )
    output = st.integers(0, 3) | st.integers(0, 300)
    return draw(st.lists(st.tuples(gap, prompt, output), min_size=1, max_size=max_rows))


def kv_capacity(base: dict[str, Any]) -> int:
    """KV capacity (tokens) that decides rejection, read from a one-request run."""
    sc = copy.deepcopy(base)
    sc["workload"] = {"trace": {"arrival_s": [0.0], "prompt_tokens": [1], "output_tokens": [0]}}
    inst = kvwire.simulate(sc).summary["instances"]
    return next(int(i["kv_capacity_tokens"]) for i in inst.values() if i["kv_capacity_tokens"] is not None)


@st.composite
def scenarios(draw: st.DrawFn, max_requests: int = 80) -> tuple[dict[str, Any], pl.DataFrame | None]:
    """A scenario dict and, sometimes, a request table passed beside it (``requests=``)."""
    colocated = draw(st.booleans())
    sc: dict[str, Any] = {
        "model": draw(st.sampled_from(MODELS)),
        "metrics": {
            "warmup_fraction": draw(st.just(0.0) | st.just(0.1) | st.floats(0.0, 0.999)),
            "first_token": draw(st.sampled_from(["prefill", "decode"])),
        },
        "cost": {
            "mem_util": draw(st.just(0.9) | st.floats(0.45, 0.9)),
            "prefill_lm_head": draw(st.sampled_from(["last", "all"])),
            "enforce_tdp": draw(st.booleans() | st.just(True)),
            "dvfs": draw(st.sampled_from([False, False, False, True])),
        },
        "scheduler": {
            "max_prefill_tokens": draw(st.just(8192) | st.integers(1, 600) | st.integers(256, 16384)),
            "max_decode_batch": draw(st.just(256) | st.integers(1, 4) | st.integers(1, 32)),
        },
        "router": {
            "prefill": draw(st.sampled_from(["least_queued_tokens", "round_robin"])),
            "decode": draw(st.sampled_from(["least_loaded", "round_robin"])),
            "colocated": draw(st.sampled_from(["least_loaded", "round_robin"])),
        },
        "engine": {"macro_steps": draw(st.booleans())},
    }
    if colocated:
        sc["mode"] = "colocated"
        sc["colocated"] = draw(pools())
    else:
        sc["mode"] = "disaggregated"
        sc["prefill"] = draw(pools())
        sc["decode"] = draw(pools())
        sc["link"] = {"preset": draw(st.sampled_from(LINKS)), "channels": draw(st.integers(1, 3))}
        sc["handoff"] = {"compression": draw(st.sampled_from(["none", "fp8", "mxfp4"]))}
    if draw(st.booleans()):
        rate = 10.0 ** draw(st.floats(-1.5, 2.7))
        arrivals: dict[str, Any] = {"process": "poisson", "rate_per_s": rate}
        if draw(st.booleans()):
            arrivals = {"process": "gamma", "rate_per_s": rate, "cv": draw(st.floats(0.1, 4.0))}
        sc["workload"] = {
            "requests": draw(st.integers(1, max_requests)),
            "seed": draw(st.integers(0, 2**32)),
            "arrivals": arrivals,
            "prompt_tokens": draw(lengths(True)),
            "output_tokens": draw(lengths(False)),
        }
        return sc, None
    rows = draw(trace_rows(max_requests))
    cap = kv_capacity(sc) if any(isinstance(p, tuple) for _, p, _ in rows) else 0
    t = draw(st.just(0.0) | st.floats(0.0, 10.0, allow_subnormal=False))
    arrival, prompt, output = [], [], []
    for gap, p, o in rows:
        t += gap
        arrival.append(t)
        if isinstance(p, tuple):
            p = math.floor(cap * p[1]) + p[2] - o
        prompt.append(min(max(int(p), 1), 2**32 - 1))
        output.append(o)
    if draw(st.booleans()):
        sc["workload"] = {"trace": {"arrival_s": arrival, "prompt_tokens": prompt, "output_tokens": output}}
        return sc, None
    return sc, pl.DataFrame({"arrival_s": arrival, "prompt_tokens": prompt, "output_tokens": output})


def run(sc: dict[str, Any], requests: pl.DataFrame | None) -> kvwire.SimResult:
    return kvwire.simulate(copy.deepcopy(sc), requests=requests)


def repro(sc: dict[str, Any], requests: pl.DataFrame | None) -> str:
    """The scenario as JSON with the request table folded in: a complete reproduction."""
    sc = copy.deepcopy(sc)
    if requests is not None:
        sc["workload"] = {"trace": {c: requests[c].to_list() for c in requests.columns}}
    return json.dumps(sc)


@contextlib.contextmanager
def reproduction(sc: dict[str, Any], requests: pl.DataFrame | None) -> Iterator[None]:
    """Every failure inside — an assertion, a kvwire error, a ``ValueError`` from ``json.dumps`` of a summary
    holding ``inf``, a Rust panic surfaced as an exception — leaves with the complete reproduction attached as a
    note (printed under the traceback; the exception itself is unchanged): the scenario as JSON with its
    request table folded in (its ``workload.seed`` included), which ``kvwire.simulate(json.loads(...))`` reruns.
    Hypothesis's own report of the example prints the request table as a truncated DataFrame repr, which is
    no reproduction."""
    try:
        yield
    except BaseException as e:
        if not isinstance(e, KeyboardInterrupt | SystemExit | GeneratorExit):
            e.add_note(f"reproduction: kvwire.simulate(json.loads(SCENARIO)) with SCENARIO =\n{repro(sc, requests)}")
        raise


# --------------------------------------------------------------------------------------------------
# Checks


def ordered(vals: list[float]) -> bool:
    """Non-decreasing (ITL quantiles included: the core clamps bucket values to their range)."""
    return all(x <= y for x, y in itertools.pairwise(vals))


def np_pct(values: np.ndarray, p: float) -> float:
    return float(np.percentile(values, p, method="linear"))


def check_accounting(res: kvwire.SimResult) -> None:
    df, s = res.requests, res.summary
    n = df.height
    rejected = df.filter(pl.col("rejected"))
    done = df.filter(~pl.col("rejected"))
    assert s["requests"]["total"] == n
    assert s["requests"]["completed"] == done.height == res.stats["completed"]
    assert s["requests"]["rejected"] == rejected.height == res.stats["rejected"]
    assert done.height + rejected.height == n
    # Rejected: no stage at all, no instance, not measured.
    for c in (*TIME_COLUMNS, "prefill_instance", "decode_instance", "ttft_s", "tpot_s", "e2e_s", "handoff_s"):
        assert rejected[c].null_count() == rejected.height, c
    assert not rejected["measured"].any()
    # Finished: a finish time.
    assert done["finish_s"].null_count() == 0
    # Rejection rule: prompt + output > capacity of the first KV-holding instance (equality admitted).
    cap = next(i["kv_capacity_tokens"] for i in s["instances"].values() if i["kv_capacity_tokens"] is not None)
    res_tokens = df["prompt_tokens"].cast(pl.Int64) + df["output_tokens"].cast(pl.Int64)
    assert (df["rejected"] == (res_tokens > cap)).all()
    # Measured: completed requests by arrival (table order), the first int(w·completed) left out.
    warm = int(res.scenario["metrics"]["warmup_fraction"] * done.height)
    want = [k >= warm for k in range(done.height)]
    assert done["measured"].to_list() == want
    assert s["requests"]["measured"] == res.stats["measured"] == done.height - warm


def check_rows(res: kvwire.SimResult) -> None:
    df = res.requests
    colocated = res.scenario["mode"] == "colocated"
    front = res.scenario["colocated" if colocated else "prefill"]["instances"]
    back = 0 if colocated else res.scenario["decode"]["instances"]
    seen_at_prefill = res.scenario["metrics"]["first_token"] == "prefill"
    for r in df.filter(~pl.col("rejected")).iter_rows(named=True):
        a, ps, ft, ks, kr, ds, fin = (r["arrival_s"], *(r[c] for c in TIME_COLUMNS))
        row = (a, ps, ft, ks, kr, ds, fin)
        assert ps is not None and ft is not None and fin is not None, row
        assert 0 <= r["prefill_instance"] < front
        assert a <= ps < ft <= fin, row
        if r["output_tokens"] <= 1:
            assert fin == ft, row
            assert ks is None and kr is None and ds is None, row
            assert r["decode_instance"] is None
            assert r["tpot_s"] is None
        elif colocated:
            assert ks is None and kr is None and ds == ft < fin, row
        else:
            assert None not in (ks, kr, ds), row
            assert ft <= ks < kr <= ds < fin, row
            assert 0 <= r["decode_instance"] < back
        if colocated and r["output_tokens"] >= 2:
            assert r["decode_instance"] == r["prefill_instance"]
        # Stages (spec (d)) sum to E2E.
        stages = [
            ps - a,
            ft - ps,
            (ks - ft) if ks is not None else 0.0,
            (kr - ks) if ks is not None else 0.0,
            (ds - (kr if kr is not None else ds)) if ds is not None else 0.0,
            (fin - ds) if ds is not None else 0.0,
        ]
        assert min(stages) >= 0.0, (row, stages)
        assert math.isclose(math.fsum(stages), fin - a, rel_tol=1e-12, abs_tol=1e-12 * max(1.0, fin)), row
        # Derived columns. The first token as seen (metrics.first_token): out of prefill unless handed off
        # under the "decode" rule, then at the end of a decode step after the KV landed.
        seen = r["first_token_seen_s"]
        assert seen == ft if kr is None or seen_at_prefill else seen >= kr, row
        assert r["ttft_s"] == seen - a and r["e2e_s"] == fin - a
        assert r["handoff_s"] == ((kr - ft) if kr is not None else None)
        if r["output_tokens"] >= 2:
            assert r["tpot_s"] == (fin - seen) / (r["output_tokens"] - 1)


def check_percentiles(res: kvwire.SimResult) -> None:
    df, pct = res.requests, res.percentiles()
    m = df.filter(pl.col("measured"))
    sets = {
        "ttft_s": m["ttft_s"].drop_nulls().to_numpy(),
        "tpot_s": m["tpot_s"].drop_nulls().to_numpy(),
        "e2e_s": m["e2e_s"].drop_nulls().to_numpy(),
        "handoff_s": df["handoff_s"].drop_nulls().to_numpy(),
    }
    # ITL: one gap per token after the first of every measured request; they add up to finish - the first
    # token as seen.
    mi = m.filter(pl.col("output_tokens") >= 2)
    itl_count = int(mi.select((pl.col("output_tokens").cast(pl.Int64) - 1).sum()).item() or 0)
    spans = (mi["finish_s"] - mi["first_token_seen_s"]).to_list()
    for row in pct.iter_rows(named=True):
        metric = row["metric"]
        keys = ("p50", "p90", "p95", "p99", "p99_9", "max")
        if row["count"] == 0:
            assert all(row[k] is None for k in ("mean", *keys)), row
            continue
        vals = [row[k] for k in keys]
        assert all(v is not None and math.isfinite(v) for v in [*vals, row["mean"]]), row
        assert ordered(vals), f"{metric} percentiles not ordered: {row}"
        if metric == "itl_s":
            assert row["count"] == itl_count
            assert math.isclose(row["mean"], math.fsum(spans) / itl_count, rel_tol=1e-9)
            assert row["p50"] >= 0.0 and row["mean"] <= row["max"], row
            assert row["max"] <= max(spans) * (1 + 1e-12)
            continue
        v = sets[metric]
        assert row["count"] == len(v), metric
        lo, hi = float(v.min()), float(v.max())
        assert lo <= row["mean"] <= hi, f"{metric}: mean {row['mean']!r} outside [{lo!r}, {hi!r}]"
        assert row["max"] == hi
        assert math.isclose(row["mean"], statistics.fmean(v), rel_tol=1e-12, abs_tol=1e-15)
        for k, p in PCT:
            want = np_pct(v, p)
            assert math.isclose(row[k], want, rel_tol=1e-12, abs_tol=1e-15), (metric, k, row[k], want)


def nonfinite(value: Any, path: str = "summary") -> list[str]:
    """Paths of every float in ``value`` (nested dicts and lists) that is NaN or ±inf."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [f"{path} = {value!r}"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in nonfinite(v, f"{path}.{k}")]
    if isinstance(value, list | tuple):
        return [p for i, v in enumerate(value) for p in nonfinite(v, f"{path}[{i}]")]
    return []


def check_summary(res: kvwire.SimResult) -> None:
    df, s, stats = res.requests, res.summary, res.stats
    bad = nonfinite(s)
    assert not bad, f"summary numbers must be finite or None: {bad}"
    text = json.dumps(s, allow_nan=False)  # never NaN / inf
    assert json.loads(text) == s
    latency = s["latency"]
    for metric, row in latency.items():
        vals = [row[k] for k in ("p50", "p90", "p95", "p99", "p99_9", "max")]
        if row["mean"] is None:
            assert all(v is None for v in vals), metric
            continue
        assert ordered(vals), (metric, row)
        assert ordered([row["mean"], row["max"]]), (metric, row)
    done = df.filter(pl.col("finish_s").is_not_null())
    horizon = s["run"]["horizon_s"]
    assert horizon == (done["finish_s"].max() if done.height else 0.0)
    # Little's law: population area / horizon = completed · mean(E2E) / horizon.
    little = s["little"]
    if done.height:
        assert little["l"] is not None and little["lambda_w"] is not None
        assert math.isclose(little["l"], little["lambda_w"], rel_tol=1e-6), little
        assert math.isclose(little["lambda_w"] * horizon, math.fsum(done["e2e_s"].to_list()), rel_tol=1e-9)
    else:
        assert little == {"l": None, "lambda_w": None}
    # Utilisation in [0, 1] (busy time of an instance fits in the horizon; link over channels).
    for name, u in s["utilisation"].items():
        assert u is None or 0.0 <= u <= 1.0 + 1e-12, (name, u)
    assert ("kv-link" in s["utilisation"]) == (res.scenario["mode"] == "disaggregated")
    # Energy: finite, non-negative, adds up; static = Σ idle·horizon.
    e = s["energy"]
    b = e["breakdown"]
    assert all(math.isfinite(x) and x >= 0.0 for x in b.values()), b
    assert math.isclose(e["total_j"], math.fsum(b.values()), rel_tol=1e-12)
    idle = math.fsum(i["idle_w"] for i in stats["instances"])
    assert math.isclose(b["static_j"], idle * horizon, rel_tol=1e-12, abs_tol=1e-12)
    out_tokens = int(done["output_tokens"].cast(pl.Int64).sum())
    if out_tokens:
        assert e["j_per_output_token"] is not None and math.isclose(e["j_per_output_token"], e["total_j"] / out_tokens)
    else:
        assert e["j_per_output_token"] is None
    for inst in s["instances"].values():
        for k in ("power_capped_fraction", "compute_bound_fraction"):
            assert inst[k] is None or 0.0 <= inst[k] <= 1.0 + 1e-12, (k, inst)
        if inst["kv_capacity_tokens"] is not None:
            assert inst["kv_peak_tokens"] <= inst["kv_capacity_tokens"]
    for raw in stats["instances"]:
        assert raw["kv_end_tokens"] == 0, raw["name"]
    # SLO attainment and goodput from the table.
    slo = s["slo"]
    m = df.filter(pl.col("measured"))
    ok = sum(
        1
        for r in m.iter_rows(named=True)
        if r["ttft_s"] <= slo["ttft_s"] and (r["tpot_s"] is None or r["tpot_s"] <= slo["tpot_s"])
    )
    if m.height == 0:
        assert slo["attainment"] is None
    else:
        assert slo["attainment"] == ok / m.height
    window = (m["arrival_s"].max() - m["arrival_s"].min()) if m.height >= 2 else 0.0
    if window > 0 and math.isfinite(ok / window):
        assert slo["goodput_req_per_s"] == ok / window
    else:
        # No window, or one so short (a subnormal gap) that the rate overflows: None with a note, never inf.
        assert slo["goodput_req_per_s"] is None and "goodput_note" in slo
    # Stage means skip requests without the stage.
    for stage, v in s["stages"].items():
        assert v is None or (math.isfinite(v) and v >= 0.0), (stage, v)


def check_all(res: kvwire.SimResult) -> None:
    check_accounting(res)
    check_rows(res)
    check_percentiles(res)
    check_summary(res)


def same_frames(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    return a.equals(b, null_equal=True)


# --------------------------------------------------------------------------------------------------
# Properties


#: Regression examples of the summary's infinities (issue 23): two measured arrivals a subnormal or
#: smallest-normal gap apart made goodput overflow to inf. Run first, on every profile.
SUMMARY_INFINITY = {
    "link": "nvlink4",
    "metrics": {"warmup_fraction": 0.0},
    "workload": {
        "trace": {
            "arrival_s": [0.0, 2.2250738585072014e-308],
            "prompt_tokens": [1, 426788],
            "output_tokens": [0, 0],
        }
    },
}


@SETTINGS
@given(scenarios())
@example(case=(SUMMARY_INFINITY, None))
def test_run_invariants(case: tuple[dict[str, Any], pl.DataFrame | None]) -> None:
    """Every invariant of one run (accounting, rows, percentiles, summary: every summary number finite or
    None). Any failure carries the scenario JSON (:func:`reproduction`)."""
    sc, requests = case
    with reproduction(sc, requests):
        check_all(run(sc, requests))


@SETTINGS
@given(scenarios(max_requests=60))
def test_deterministic_and_fast_path_exact(case: tuple[dict[str, Any], pl.DataFrame | None]) -> None:
    sc, requests = case
    with reproduction(sc, requests):
        runs = []
        for macro in (True, True, False):
            s = copy.deepcopy(sc)
            s.setdefault("engine", {})["macro_steps"] = macro
            runs.append(run(s, requests))
        first = runs[0]
        for other in runs[1:]:
            assert same_frames(first.requests, other.requests)
            a, b = dict(first.summary), dict(other.summary)
            for d in (a, b):
                d["run"] = {k: v for k, v in d["run"].items() if k not in ("wall_s", "events", "calendar_steps")}
            assert a == b


@SETTINGS
@given(scenarios(max_requests=60))
def test_trace_and_requests_frame_agree(case: tuple[dict[str, Any], pl.DataFrame | None]) -> None:
    """The same requests as ``requests=`` or as ``workload.trace`` give the same run (floats in the scenario
    JSON are read back exactly)."""
    sc, requests = case
    with reproduction(sc, requests):
        base = run(sc, requests)
        table = base.requests.select("arrival_s", "prompt_tokens", "output_tokens")
        sc_plain = {k: v for k, v in copy.deepcopy(sc).items() if k != "workload"}
        via_frame = run(sc_plain, table)
        via_trace = run({**sc_plain, "workload": {"trace": {c: table[c].to_list() for c in table.columns}}}, None)
        for other in (via_frame, via_trace):
            assert same_frames(base.requests, other.requests)


@pytest.mark.parametrize("n", [1, 2, 3, 17])
def test_constant_values_mean_within_range(n: int) -> None:
    """Identical requests give identical latencies: the mean must equal them (fmean is correctly rounded)."""
    sc = {
        "model": "llama3.2-1b",
        "prefill": {"instances": 4},
        "metrics": {"warmup_fraction": 0.0},
        "workload": {
            "trace": {
                "arrival_s": [float(k) * 10.0 + 0.1 for k in range(n)],
                "prompt_tokens": [333] * n,
                "output_tokens": [7] * n,
            }
        },
    }
    res = kvwire.simulate(sc)
    check_all(res)


class FakePanic(BaseException):
    """Stands in for ``pyo3_runtime.PanicException``, which derives from ``BaseException``, not ``Exception``."""


def _raise_summary_inf() -> None:
    json.dumps({"goodput_req_per_s": math.inf}, allow_nan=False)  # ValueError, as check_summary's was


@pytest.mark.parametrize(
    ("fail", "cls"),
    [
        pytest.param(lambda: kvwire.simulate({"workload": {"requests": -1}}), kvwire.ScenarioError, id="kvwire-error"),
        pytest.param(_raise_summary_inf, ValueError, id="value-error"),
        pytest.param(lambda: (_ for _ in ()).throw(FakePanic("panicked at kernel.rs")), FakePanic, id="panic"),
        pytest.param(lambda: (_ for _ in ()).throw(AssertionError("p99 > max")), AssertionError, id="assertion"),
    ],
)
def test_every_failure_carries_the_reproduction(fail: Any, cls: type[BaseException]) -> None:
    """Issue 23 item 9: the property tests attached the scenario only to ``AssertionError`` (raised after the
    run), so a kvwire error or panic from ``simulate``, or the ``ValueError`` of ``json.dumps`` on an
    infinite summary, printed no reproduction. :func:`reproduction` notes the scenario JSON on every kind of
    failure, leaves the exception's type alone, and the JSON it prints reruns the same scenario and table."""
    sc = {"link": "nvlink4", "workload": {"seed": 12345}}
    table = pl.DataFrame({"arrival_s": [0.0, 0.5], "prompt_tokens": [10, 20], "output_tokens": [1, 2]})
    with pytest.raises(cls) as e, reproduction(sc, table):
        fail()
    notes = getattr(e.value, "__notes__", [])
    assert len(notes) == 1 and "kvwire.simulate(json.loads(SCENARIO))" in notes[0], notes
    again = json.loads(notes[0].split("\n", 1)[1])
    assert again["link"] == "nvlink4" and again["workload"]["trace"] == table.to_dict(as_series=False)


# --------------------------------------------------------------------------------------------------
# Regression tests: bugs the properties above found (now fixed), as minimal reproductions


def test_trace_arrival_times_survive_the_scenario_json() -> None:
    """The arrival stamp is the given trace value (spec "Clarifications"), whichever way the table is given.

    Regression test of a fixed bug: ``workload.trace`` values go through the core's JSON parser, serde_json without its
    ``float_roundtrip`` feature, which is not correctly rounded: 632/7 = 90.28571428571429 is read as
    90.28571428571428, so the table (and TTFT/E2E) no longer use the given time, and ``workload.trace`` and
    ``requests=`` give different results for the same requests. About 10% of arbitrary doubles (17
    significant digits) are off by one ulp; short decimals such as 0.25 or 8.0 are read exactly.
    """
    given = [1.8606071110652234, 632 / 7]
    table = {"arrival_s": given, "prompt_tokens": [100, 100], "output_tokens": [2, 2]}
    via_trace = kvwire.simulate({"workload": {"trace": table}})
    via_frame = kvwire.simulate(None, requests=table)
    assert via_frame.requests["arrival_s"].to_list() == given
    assert via_trace.requests["arrival_s"].to_list() == given


def test_goodput_of_a_subnormal_window_is_finite() -> None:
    """The summary is JSON without NaN or infinities.

    Regression test of a fixed bug: goodput = SLO-met requests / arrival window; a positive but subnormal
    window (measured arrivals 0 and 5e-324) overflowed to ``inf``, so ``json.dumps(summary, allow_nan=False)``
    raised. The summary reports null with a note, as for an empty window.
    """
    res = kvwire.simulate(
        {"metrics": {"warmup_fraction": 0.0}},
        requests={"arrival_s": [0.0, 5e-324], "prompt_tokens": [1, 1], "output_tokens": [0, 0]},
    )
    json.dumps(res.summary, allow_nan=False)


def test_itl_percentiles_stay_below_the_max() -> None:
    """p50 ≤ p90 ≤ p95 ≤ p99 ≤ p99.9 ≤ max for ITL too (found by test_run_invariants / the Rust properties).

    Regression test of a fixed bug: the core's ITL histogram represented a bucket of distinct values by
    Σ(value·weight)/count, unclamped, which can land an ulp or two outside the bucket's [min, max]. Here p99 = p99.9 =
    0.18890412214363433 > max = 0.18890412214363428.
    """
    sc = {
        "mode": "colocated",
        "colocated": {"device": "b200", "instances": 1},
        "model": "mistral-7b",
        "cost": {"enforce_tdp": False, "step_overhead_s": 0.007460050810613071},
        "scheduler": {"max_decode_batch": 14, "max_prefill_tokens": 14602},
        "workload": {
            "requests": 72,
            "seed": 6220855333609212014,
            "arrivals": {"process": "poisson", "rate_per_s": 493.4154870475996},
            "prompt_tokens": {"dist": "fixed", "value": 2086},
            "output_tokens": {"dist": "lognormal", "mean": 16.64907599673096, "cv": 0.0, "min": 0, "max": 15},
        },
    }
    row = kvwire.simulate(sc).summary["latency"]["itl_s"]
    vals = [row[k] for k in ("p50", "p90", "p95", "p99", "p99_9", "max")]
    assert ordered(vals), row


def test_goodput_over_a_subnormal_window_is_none_not_inf() -> None:
    """Found by ``test_run_invariants``: two measured requests 2.2e-311 s apart make ok / window overflow to
    inf; the summary reports no goodput (with its note) instead of an infinite rate."""
    trace = {"arrival_s": [0.0, 2.225073858507e-311], "prompt_tokens": [1, 1], "output_tokens": [0, 0]}
    res = kvwire.simulate({"metrics": {"warmup_fraction": 0.0}, "workload": {"trace": trace}})
    slo = res.summary["slo"]
    assert slo["attainment"] == 1.0
    assert slo["goodput_req_per_s"] is None and "goodput_note" in slo
