"""The Python API's result shape and definitions (spec/interface.md, spec/simulator.md (d), "Clarifications").

Expected values come from the spec's definitions applied with numpy to the per-request table, from closed
forms (KV capacity, link transfer time and energy, static energy) computed here from the spec's preset
tables, or from comparing two ways of asking for the same thing — never from the library's own output.
"""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path
from typing import Any

import kvwire
import numpy as np
import polars as pl
import pytest
from spec_presets import LINKS

# --------------------------------------------------------------------------------------------------
# Reference data from the spec (simulator.md (a)), typed in by hand.

#: key: (layers, d_model, heads, kv_heads, head_dim, d_ff, vocab) for the dense presets.
MODEL_SHAPES = {
    "llama3-8b": (32, 4096, 32, 8, 128, 14336, 128256),
    "llama3-70b": (80, 8192, 64, 8, 128, 28672, 128256),
    "mistral-7b": (32, 4096, 32, 8, 128, 14336, 32000),
    "yi-34b": (60, 7168, 56, 8, 128, 20480, 64000),
    "opt-13b": (40, 5120, 40, 40, 128, 13653, 50272),
    "opt-66b": (64, 9216, 72, 72, 128, 24576, 50272),  # facebook/opt-66b config.json, 3-matrix d_ff = 2/3·36864
    "llama3.2-1b": (16, 2048, 32, 8, 64, 8192, 128256),
}
#: key: (peak TFLOP/s, HBM TB/s, HBM GB, flops_eff, bw_eff, TDP W, idle W, pJ/FLOP, pJ/byte).
DEVICES = {
    "h100": (989, 3.35, 80, 0.55, 0.80, 700, 100, 1.0, 60),
    "a100": (312, 2.039, 80, 0.55, 0.80, 400, 60, 1.6, 70),
    "a100-40g": (312, 1.555, 40, 0.55, 0.80, 400, 60, 1.6, 70),
    "h200": (989, 4.8, 141, 0.55, 0.80, 700, 100, 1.0, 60),
    "b200": (2250, 8.0, 180, 0.55, 0.80, 1000, 140, 0.6, 45),
}

#: Per-request columns of interface.md, in order, plus README's ``measured``.
COLUMNS = (
    "id", "arrival_s", "prompt_tokens", "output_tokens", "rejected", "prefill_instance", "decode_instance",
    "prefill_start_s", "first_token_s", "kv_start_s", "kv_ready_s", "decode_start_s", "finish_s",
    "ttft_s", "tpot_s", "e2e_s", "handoff_s",
)  # fmt: skip
TIME_COLUMNS = ("prefill_start_s", "first_token_s", "kv_start_s", "kv_ready_s", "decode_start_s", "finish_s")
FLOAT_COLUMNS = ("arrival_s", *TIME_COLUMNS, "ttft_s", "tpot_s", "e2e_s", "handoff_s")
QUANTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p99_9", 99.9))
STATS = ("mean", *(q for q, _ in QUANTILES), "max")

#: interface.md "Summary": keys that must exist.
SUMMARY_KEYS: dict[str, tuple[str, ...]] = {
    "requests": ("total", "completed", "rejected", "measured"),
    "latency": ("ttft_s", "tpot_s", "itl_s", "e2e_s", "handoff_s"),
    "slo": ("attainment", "goodput_req_per_s"),
    "throughput": ("req_per_s", "output_tokens_per_s"),
    "utilisation": (),
    "energy": ("total_j", "j_per_output_token", "breakdown"),
    "stages": ("prefill_queue_s", "prefill_s", "kv_wait_s", "kv_transfer_s", "decode_queue_s", "decode_s"),
    "hotspot": ("stage", "resource", "utilisation"),
    "run": ("events", "horizon_s", "wall_s"),
}
BREAKDOWN_KEYS = ("static_j", "compute_j", "memory_j", "link_j")


def model_params(key: str) -> int:
    """Total parameters by the spec's rule: layers·(2d² + 2d·n_kv·hd + 3d·d_ff) + 2·vocab·d."""
    layers, d, _, n_kv, hd, d_ff, vocab = MODEL_SHAPES[key]
    return layers * (2 * d * d + 2 * d * n_kv * hd + 3 * d * d_ff) + 2 * vocab * d


def kv_bytes_per_token(key: str) -> int:
    """2 (K and V) · layers · n_kv · head_dim · 2 bytes (BF16)."""
    layers, _, _, n_kv, hd, _, _ = MODEL_SHAPES[key]
    return 2 * layers * n_kv * hd * 2


def kv_capacity(model: str, device: str, n: int, mem_util: float = 0.9) -> int:
    """floor((HBM·n·mem_util - resident weight bytes) / KV bytes per token), in exact rational arithmetic."""
    from fractions import Fraction

    hbm = Fraction(DEVICES[device][2]) * 10**9 * n * Fraction(str(mem_util))
    return math.floor((hbm - 2 * model_params(model)) / kv_bytes_per_token(model))


def without_wall(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary without the run's wall-clock time (the only field allowed to differ between runs)."""
    out: dict[str, Any] = json.loads(json.dumps(summary))
    del out["run"]["wall_s"]
    return out


def same_result(a: kvwire.SimResult, b: kvwire.SimResult) -> None:
    """Two results are identical: equal request tables and equal summaries (wall time aside)."""
    assert a.requests.equals(b.requests)
    assert without_wall(a.summary) == without_wall(b.summary)


def mixed_table(n: int = 300, seed: int = 7) -> pl.DataFrame:
    """A request table with every case the table must represent: outputs 0 and 1, arrival ties, and one
    request too large for any KV cache (so it is rejected)."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1 / 10.0, n))
    arrival[5] = arrival[4]  # a tie
    prompt = rng.integers(16, 4096, n)
    output = rng.integers(0, 300, n)
    output[[3, 10, 50]] = 0
    output[[4, 11, 51]] = 1
    prompt[20] = 10_000_000  # never fits: rejected at arrival
    return pl.DataFrame({"arrival_s": arrival, "prompt_tokens": prompt, "output_tokens": output})


DISAGG = {"prefill": {"instances": 2}, "decode": {"instances": 2}, "slo": {"ttft_s": 0.08, "tpot_s": 0.009}}
COLOC = {"mode": "colocated", "colocated": {"instances": 3}, "slo": {"ttft_s": 0.08, "tpot_s": 0.009}}


@pytest.fixture(scope="module")
def disagg() -> kvwire.SimResult:
    """Two prefill and two decode H100s over InfiniBand, on the mixed table."""
    return kvwire.simulate(DISAGG, requests=mixed_table())


@pytest.fixture(scope="module")
def coloc() -> kvwire.SimResult:
    """Three colocated H100 instances, on the mixed table."""
    return kvwire.simulate(COLOC, requests=mixed_table())


@pytest.fixture(scope="module", params=["disaggregated", "colocated"])
def result(request: pytest.FixtureRequest, disagg: kvwire.SimResult, coloc: kvwire.SimResult) -> kvwire.SimResult:
    """Each of the two runs in turn."""
    return disagg if request.param == "disaggregated" else coloc


def col(df: pl.DataFrame, name: str) -> np.ndarray:
    """A column as float numpy, nulls as NaN (for independent arithmetic)."""
    return df[name].cast(pl.Float64).to_numpy().astype(float)


# --------------------------------------------------------------------------------------------------
# The per-request table


def test_request_columns_and_dtypes(result: kvwire.SimResult) -> None:
    """res.requests has every interface.md column plus ``measured``, with integer ids/tokens/instances,
    boolean flags and Float64 times, one row per request in id order."""
    df = result.requests
    for c in (*COLUMNS, "measured"):
        assert c in df.columns, c
    for c in ("id", "prompt_tokens", "output_tokens", "prefill_instance", "decode_instance"):
        assert df.schema[c].is_integer(), (c, df.schema[c])
    for c in ("rejected", "measured"):
        assert df.schema[c] == pl.Boolean, c
    for c in FLOAT_COLUMNS:
        assert df.schema[c] == pl.Float64, c
    table = mixed_table()
    assert df.height == table.height
    assert df["id"].to_list() == list(range(table.height))
    np.testing.assert_array_equal(df["arrival_s"].to_numpy(), table["arrival_s"].to_numpy())
    np.testing.assert_array_equal(df["prompt_tokens"].to_numpy(), table["prompt_tokens"].to_numpy())
    np.testing.assert_array_equal(df["output_tokens"].to_numpy(), table["output_tokens"].to_numpy())


def test_no_nan_anywhere_in_the_frame(result: kvwire.SimResult) -> None:
    """Stages that did not happen are null, never NaN, in every float column."""
    for c in FLOAT_COLUMNS:
        assert result.requests[c].is_nan().sum() == 0, c


def test_nulls_exactly_where_a_stage_did_not_happen(disagg: kvwire.SimResult) -> None:
    """Disaggregated: rejected rows have no stage at all; outputs ≤ 1 stop after prefill (no hand-off, no
    decode, no TPOT); every other row has every stamp."""
    df = disagg.requests
    rej = df["rejected"].to_numpy()
    short = (df["output_tokens"].to_numpy() <= 1) & ~rej
    normal = ~rej & ~short
    assert rej.sum() == 1 and short.sum() == 6 and normal.sum() == df.height - 7
    for c in ("prefill_instance", "decode_instance", *TIME_COLUMNS, "ttft_s", "tpot_s", "e2e_s", "handoff_s"):
        null = df[c].is_null().to_numpy()
        assert null[rej].all(), c
        assert not null[normal].any(), c
    for c in ("prefill_instance", "prefill_start_s", "first_token_s", "finish_s", "ttft_s", "e2e_s"):
        assert not df[c].is_null().to_numpy()[short].any(), c
    for c in ("decode_instance", "kv_start_s", "kv_ready_s", "decode_start_s", "tpot_s", "handoff_s"):
        assert df[c].is_null().to_numpy()[short].all(), c
    assert not df["measured"].to_numpy()[rej].any()


def test_colocated_rows_have_no_handoff(coloc: kvwire.SimResult) -> None:
    """Colocated: kv_start/kv_ready/handoff are null on every row; decode starts at the first token for
    outputs ≥ 2; outputs ≤ 1 have no decode start and no TPOT; rejected rows have nothing."""
    df = coloc.requests
    for c in ("kv_start_s", "kv_ready_s", "handoff_s"):
        assert df[c].is_null().all(), c
    rej = df["rejected"].to_numpy()
    out = df["output_tokens"].to_numpy()
    long = ~rej & (out >= 2)
    short = ~rej & (out <= 1)
    np.testing.assert_array_equal(col(df, "decode_start_s")[long], col(df, "first_token_s")[long])
    assert df["decode_start_s"].is_null().to_numpy()[short].all()
    assert df["tpot_s"].is_null().to_numpy()[short].all()
    for c in ("prefill_instance", *TIME_COLUMNS, "ttft_s", "e2e_s"):
        assert df[c].is_null().to_numpy()[rej].all(), c


def test_derived_columns_follow_their_definitions(result: kvwire.SimResult) -> None:
    """ttft = seen - arrival, where seen is the first token as the user sees it (``first_token_seen_s``:
    ``metrics.first_token``, by default the end of the first decode step of a handed-off request, else
    ``first_token_s``); tpot = (finish - seen)/(output - 1) for output ≥ 2 (null below); e2e = finish -
    arrival; handoff = kv_ready - first_token (out of prefill). The seen column is checked against its own
    definition: ≥ first_token, equal to it where nothing was handed off, and at or after kv_ready otherwise."""
    df = result.requests
    a, ft, fin = col(df, "arrival_s"), col(df, "first_token_s"), col(df, "finish_s")
    seen = col(df, "first_token_seen_s")
    out = df["output_tokens"].to_numpy().astype(float)
    kr = col(df, "kv_ready_s")
    done = ~np.isnan(ft)
    assert (seen[done] >= ft[done]).all()
    handed = done & ~np.isnan(kr)
    np.testing.assert_array_equal(seen[done & ~handed], ft[done & ~handed])
    assert (seen[handed] >= kr[handed]).all()
    np.testing.assert_allclose(col(df, "ttft_s"), seen - a, rtol=1e-15, atol=0, equal_nan=True)
    np.testing.assert_allclose(col(df, "e2e_s"), fin - a, rtol=1e-15, atol=0, equal_nan=True)
    np.testing.assert_allclose(col(df, "handoff_s"), kr - ft, rtol=1e-15, equal_nan=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(out >= 2, (fin - seen) / (out - 1), np.nan)
    np.testing.assert_allclose(col(df, "tpot_s"), tpot, rtol=1e-15, atol=0, equal_nan=True)


def test_stamps_are_ordered_and_stages_sum_to_e2e(result: kvwire.SimResult) -> None:
    """arrival ≤ prefill_start ≤ first_token ≤ kv_start ≤ kv_ready ≤ decode_start ≤ finish, and the six
    stages (missing ones counting 0) add up to e2e on every completed request."""
    df = result.requests.filter(~pl.col("rejected"))
    a = col(df, "arrival_s")
    ps, ft, ks, kr, ds, fin = (col(df, c) for c in TIME_COLUMNS)
    chain = [a, ps, ft, ks, kr, ds, fin]
    prev = a
    for cur in chain[1:]:
        ok = np.isnan(cur) | (cur >= prev)
        assert ok.all()
        prev = np.where(np.isnan(cur), prev, cur)
    kv_wait = np.nan_to_num(ks - ft)
    kv_transfer = np.nan_to_num(kr - ks)
    decode_queue = np.nan_to_num(ds - np.where(np.isnan(kr), ds, kr))
    decode = np.nan_to_num(fin - ds)
    total = (ps - a) + (ft - ps) + kv_wait + kv_transfer + decode_queue + decode
    np.testing.assert_allclose(total, col(df, "e2e_s"), rtol=1e-12, atol=1e-12)


def test_short_outputs_finish_at_prefill_end(result: kvwire.SimResult) -> None:
    """Outputs 0 and 1 finish when their prefill step ends: finish == first_token, e2e == ttft."""
    df = result.requests.filter(~pl.col("rejected") & (pl.col("output_tokens") <= 1))
    assert df.height == 6
    np.testing.assert_array_equal(col(df, "finish_s"), col(df, "first_token_s"))
    np.testing.assert_array_equal(col(df, "e2e_s"), col(df, "ttft_s"))


def test_measured_set_is_completed_after_warmup(result: kvwire.SimResult) -> None:
    """measured = completed requests left after dropping the first int(0.1·completed) by arrival (stable)."""
    df = result.requests
    done = ~df["rejected"].to_numpy()
    idx = np.flatnonzero(done)
    order = idx[np.argsort(df["arrival_s"].to_numpy()[idx], kind="stable")]
    drop = int(0.1 * len(idx))
    expected = np.zeros(df.height, dtype=bool)
    expected[order[drop:]] = True
    np.testing.assert_array_equal(df["measured"].to_numpy(), expected)
    assert result.summary["requests"]["measured"] == expected.sum()


@pytest.mark.parametrize(("fraction", "n"), [(0.3, 10), (0.0, 7), (0.5, 9), (0.7, 10)])
def test_warmup_count_uses_int_of_the_product(fraction: float, n: int) -> None:
    """The warm-up drops int(fraction·completed) requests (Python's int of the float product)."""
    req = {"arrival_s": np.arange(n) * 10.0, "prompt_tokens": np.full(n, 64), "output_tokens": np.full(n, 4)}
    res = kvwire.simulate({"metrics": {"warmup_fraction": fraction}}, requests=req)
    assert res.summary["requests"]["measured"] == n - int(fraction * n)
    assert res.requests["measured"].to_list() == [i >= int(fraction * n) for i in range(n)]


def test_kv_transfer_time_and_link_energy_closed_form(disagg: kvwire.SimResult) -> None:
    """Each hand-off takes latency + prompt·kvpt/bandwidth on ib-ndr (10 µs, 50 GB/s), and link energy is the
    moved bits x 15 pJ (simulator.md (b), (d); no compression)."""
    df = disagg.requests.filter(pl.col("kv_ready_s").is_not_null())
    kvpt = kv_bytes_per_token("llama3-8b")
    prompt = df["prompt_tokens"].to_numpy().astype(float)
    bw, lat_us, pj = LINKS["ib-ndr"]
    expected = lat_us * 1e-6 + prompt * kvpt / (bw * 1e9)
    np.testing.assert_allclose(col(df, "kv_ready_s") - col(df, "kv_start_s"), expected, rtol=1e-9)
    link_j = float(prompt.sum()) * kvpt * 8 * pj * 1e-12
    assert math.isclose(disagg.summary["energy"]["breakdown"]["link_j"], link_j, rel_tol=1e-9)


# --------------------------------------------------------------------------------------------------
# The summary


def test_summary_has_every_interface_key(result: kvwire.SimResult) -> None:
    """res.summary has every key interface.md lists, each latency metric every statistic, and the energy
    breakdown every term."""
    s = result.summary
    for top, keys in SUMMARY_KEYS.items():
        assert top in s, top
        for k in keys:
            assert k in s[top], f"{top}.{k}"
    for metric in SUMMARY_KEYS["latency"]:
        for stat in STATS:
            assert stat in s["latency"][metric], (metric, stat)
    for k in BREAKDOWN_KEYS:
        assert k in s["energy"]["breakdown"], k


def test_summary_is_strict_json(result: kvwire.SimResult) -> None:
    """The summary is plain JSON (no NaN/inf; json.dumps(..., allow_nan=False) works) and round-trips."""
    text = json.dumps(result.summary, allow_nan=False)
    assert json.loads(text) == result.summary


def test_summary_counts(result: kvwire.SimResult) -> None:
    """requests.{total, completed, rejected, measured} count the table's rows."""
    df = result.requests
    r = result.summary["requests"]
    assert r["total"] == df.height
    assert r["rejected"] == int(df["rejected"].sum()) == 1
    assert r["completed"] == df.height - 1 == int(df["finish_s"].is_not_null().sum())
    assert r["measured"] == int(df["measured"].sum())


def test_percentiles_table_shape(result: kvwire.SimResult) -> None:
    """res.percentiles() is one row per latency metric x (mean, p50, p90, p95, p99, p99_9, max)."""
    p = result.percentiles()
    assert isinstance(p, pl.DataFrame)
    assert p["metric"].to_list() == ["ttft_s", "tpot_s", "itl_s", "e2e_s", "handoff_s"]
    for c in STATS:
        assert c in p.columns
        assert p.schema[c] == pl.Float64


def _numpy_stats(x: np.ndarray) -> dict[str, float]:
    out = {"mean": float(np.mean(x)), "max": float(np.max(x))}
    for name, q in QUANTILES:
        out[name] = float(np.percentile(x, q, method="linear"))
    return out


def test_percentiles_equal_numpy(result: kvwire.SimResult) -> None:
    """ttft/tpot/e2e statistics are numpy's linear percentiles and mean over the measured set; handoff's are
    over every transferred request; summary.latency holds the same numbers as res.percentiles()."""
    df = result.requests
    measured = df.filter(pl.col("measured"))
    p = {r["metric"]: r for r in result.percentiles().iter_rows(named=True)}
    sets = {m: measured[m].drop_nulls().to_numpy() for m in ("ttft_s", "tpot_s", "e2e_s")}
    sets["handoff_s"] = df["handoff_s"].drop_nulls().to_numpy()
    for metric, x in sets.items():
        if x.size == 0:
            assert all(p[metric][s] is None for s in STATS)
            assert all(result.summary["latency"][metric][s] is None for s in STATS)
            continue
        expected = _numpy_stats(x)
        for stat, v in expected.items():
            assert math.isclose(p[metric][stat], v, rel_tol=1e-12, abs_tol=1e-15), (metric, stat)
            assert math.isclose(result.summary["latency"][metric][stat], v, rel_tol=1e-12, abs_tol=1e-15)


def test_itl_count_and_mean_closed_form(result: kvwire.SimResult) -> None:
    """ITL: output - 1 gaps per measured request that decodes, whose sum is finish - the first token as seen
    (``first_token_seen_s``; with the default rule a handed-off request's first gap is 0), so the ITL count is
    Σ(output - 1) and its mean Σ(finish - seen)/Σ(output - 1); the max gap ≥ the max TPOT."""
    m = result.requests.filter(pl.col("measured") & (pl.col("output_tokens") >= 2))
    gaps = int((m["output_tokens"].cast(pl.Int64) - 1).sum())
    total = float((col(m, "finish_s") - col(m, "first_token_seen_s")).sum())
    row = result.percentiles().filter(pl.col("metric") == "itl_s").row(0, named=True)
    if "count" in row:
        assert row["count"] == gaps
    assert math.isclose(row["mean"], total / gaps, rel_tol=1e-9)
    assert row["max"] >= float(m["tpot_s"].max()) * (1 - 1e-12)  # type: ignore[arg-type]
    assert row["p50"] <= row["p90"] <= row["p95"] <= row["p99"] <= row["p99_9"] <= row["max"]


def test_slo_attainment_and_goodput(result: kvwire.SimResult) -> None:
    """attainment = share of measured requests with TTFT ≤ slo and (TPOT ≤ slo or undefined); goodput = those
    requests / (last - first measured arrival)."""
    m = result.requests.filter(pl.col("measured"))
    ttft, tpot = col(m, "ttft_s"), col(m, "tpot_s")
    ok = (ttft <= 0.08) & (np.isnan(tpot) | (tpot <= 0.009))
    slo = result.summary["slo"]
    assert 0 < ok.mean() < 1, "the SLOs should split the requests for this test to mean something"
    assert math.isclose(slo["attainment"], ok.mean(), rel_tol=1e-12)
    a = col(m, "arrival_s")
    assert math.isclose(slo["goodput_req_per_s"], ok.sum() / (a.max() - a.min()), rel_tol=1e-12)


def test_throughput_and_energy_definitions(result: kvwire.SimResult) -> None:
    """horizon = last finish; req/s = completed/horizon; output tokens/s = Σ outputs of completed/horizon
    (a 0 counts 0); J/token = total/Σ outputs; total = Σ breakdown; static = idle W · devices · horizon."""
    df = result.requests
    s = result.summary
    done = df.filter(~pl.col("rejected"))
    horizon = float(done["finish_s"].max())  # type: ignore[arg-type]
    assert math.isclose(s["run"]["horizon_s"], horizon, rel_tol=1e-15)
    tokens = int(done["output_tokens"].cast(pl.Int64).sum())
    assert math.isclose(s["throughput"]["req_per_s"], done.height / horizon, rel_tol=1e-12)
    assert math.isclose(s["throughput"]["output_tokens_per_s"], tokens / horizon, rel_tol=1e-12)
    e = s["energy"]
    assert math.isclose(e["total_j"], sum(e["breakdown"].values()), rel_tol=1e-12)
    assert math.isclose(e["j_per_output_token"], e["total_j"] / tokens, rel_tol=1e-12)
    devices = 4 if "prefill-0" in s["utilisation"] else 3
    idle_w = DEVICES["h100"][6]
    assert math.isclose(e["breakdown"]["static_j"], idle_w * devices * horizon, rel_tol=1e-12)


def test_stage_means(result: kvwire.SimResult) -> None:
    """summary.stages are the means over the measured set of each stage, a request without the stage counting
    0 (the reference's rule, so they sum to the mean E2E); summary.stages_present skip requests without it."""
    m = result.requests.filter(pl.col("measured"))
    a = col(m, "arrival_s")
    ps, ft, ks, kr, ds, fin = (col(m, c) for c in TIME_COLUMNS)
    colocated = "colocated-0" in result.summary["utilisation"]
    expected = {
        "prefill_queue_s": ps - a,
        "prefill_s": ft - ps,
        "kv_wait_s": ks - ft,
        "kv_transfer_s": kr - ks,
        "decode_queue_s": ds - (ds if colocated else kr),
        "decode_s": fin - ds,
    }
    for stage, x in expected.items():
        got = result.summary["stages"][stage]
        assert math.isclose(got, float(np.mean(np.nan_to_num(x, nan=0.0))), rel_tol=1e-12, abs_tol=1e-15), stage
        x = x[~np.isnan(x)]
        present = result.summary["stages_present"][stage]
        if x.size == 0:
            assert present is None, stage
        else:
            assert math.isclose(present, float(np.mean(x)), rel_tol=1e-12, abs_tol=1e-15), stage
    e2e = result.summary["latency"]["e2e_s"]["mean"]
    assert math.isclose(math.fsum(result.summary["stages"].values()), e2e, rel_tol=1e-12)


def test_hotspot_is_the_largest_non_decode_stage(result: kvwire.SimResult) -> None:
    """hotspot.stage is the largest mean stage other than decode; its resource belongs to that stage's owner
    and hotspot.utilisation is that resource's utilisation."""
    s = result.summary
    stages = {k: v for k, v in s["stages"].items() if k != "decode_s" and v is not None}
    hot = max(stages, key=lambda k: stages[k])
    assert s["hotspot"]["stage"] == hot
    owner = {"prefill_queue_s": "prefill", "prefill_s": "prefill", "kv_wait_s": "kv-link",
             "kv_transfer_s": "kv-link", "decode_queue_s": "decode"}[hot]  # fmt: skip
    if "colocated-0" in s["utilisation"] and owner != "kv-link":
        owner = "colocated"
    resource = s["hotspot"]["resource"]
    assert resource.startswith(owner)
    assert s["hotspot"]["utilisation"] == s["utilisation"][resource]
    owned = {k: v for k, v in s["utilisation"].items() if k.startswith(owner)}
    assert s["utilisation"][resource] == max(owned.values())


@pytest.mark.parametrize(
    ("scenario", "keys"),
    [
        ({}, ["prefill-0", "decode-0", "kv-link"]),
        ({"prefill": {"instances": 2}, "decode": {"instances": 3}},
         ["prefill-0", "prefill-1", "decode-0", "decode-1", "decode-2", "kv-link"]),
        ({"mode": "colocated"}, ["colocated-0", "colocated-1"]),
        ({"mode": "colocated", "colocated": {"instances": 3}}, ["colocated-0", "colocated-1", "colocated-2"]),
    ],
)  # fmt: skip
def test_utilisation_keys(scenario: dict[str, Any], keys: list[str]) -> None:
    """Utilisation keys are prefill-i, decode-i and kv-link (disaggregated) or colocated-i (colocated, no
    kv-link; 2 instances by default), each a fraction in [0, 1]."""
    sc = {**scenario, "workload": {"requests": 60, "arrivals": {"rate_per_s": 10.0}}}
    u = kvwire.simulate(sc).summary["utilisation"]
    assert sorted(u) == sorted(keys)
    for v in u.values():
        assert 0.0 <= v <= 1.0


# --------------------------------------------------------------------------------------------------
# Rejection boundary, short outputs, goodput edge cases


def test_capacity_formula_matches_spec_examples() -> None:
    """The independent capacity formula reproduces the spec's worked examples (sanity of the reference)."""
    assert kv_capacity("llama3-8b", "h100", 1) == 426_788
    assert kv_capacity("llama3-8b", "a100", 1) == 426_788
    assert kv_capacity("llama3-70b", "h100", 4) == 448_288
    assert kv_capacity("llama3-70b", "h100", 2) == 8_835


@pytest.mark.parametrize(
    ("scenario", "model", "device", "n"),
    [
        ({}, "llama3-8b", "h100", 1),
        ({"decode": {"device": "a100-40g"}}, "llama3-8b", "a100-40g", 1),
        ({"model": "llama3-70b", "prefill": {"devices_per_instance": 4},
          "decode": {"devices_per_instance": 2}}, "llama3-70b", "h100", 2),
        ({"mode": "colocated", "colocated": {"instances": 1}}, "llama3-8b", "h100", 1),
        ({"mode": "colocated", "colocated": {"instances": 1, "device": "h200", "devices_per_instance": 2}},
         "mistral-7b", "h200", 2),
    ],
)  # fmt: skip
def test_rejection_boundary(scenario: dict[str, Any], model: str, device: str, n: int) -> None:
    """prompt + output equal to the KV capacity (computed here from the spec's formula) is admitted; one token
    more is rejected. The decode pool (or the colocated pool) gates admission."""
    sc = {**scenario, "model": model} if model != "llama3-8b" else dict(scenario)
    cap = kv_capacity(model, device, n)
    req = {
        "arrival_s": [0.0, 1000.0, 2000.0],
        "prompt_tokens": [cap - 2, cap - 1, cap - 4],
        "output_tokens": [2, 2, 4],
    }
    res = kvwire.simulate(sc, requests=req)
    assert res.requests["rejected"].to_list() == [False, True, False]
    assert res.summary["requests"]["rejected"] == 1
    if scenario.get("mode") != "colocated":
        assert res.summary["instances"]["decode-0"]["kv_capacity_tokens"] == cap
    rejected = res.requests.row(1, named=True)
    assert all(rejected[c] is None for c in (*TIME_COLUMNS, "prefill_instance", "decode_instance", "ttft_s"))


@pytest.mark.parametrize("mode", ["disaggregated", "colocated"])
def test_zero_and_one_output_tokens(mode: str) -> None:
    """Outputs 0 and 1 finish at the end of prefill with TPOT null; 0 contributes no output tokens to
    throughput or J/token; with only such requests there is no TPOT and no hand-off."""
    req = {
        "arrival_s": [0.0, 1.0, 2.0, 3.0],
        "prompt_tokens": [100, 200, 300, 400],
        "output_tokens": [0, 1, 0, 1],
    }
    res = kvwire.simulate({"mode": mode, "metrics": {"warmup_fraction": 0.0}}, requests=req)
    df = res.requests
    assert df["tpot_s"].is_null().all()
    np.testing.assert_array_equal(col(df, "finish_s"), col(df, "first_token_s"))
    s = res.summary
    horizon = float(df["finish_s"].max())  # type: ignore[arg-type]
    assert math.isclose(s["throughput"]["output_tokens_per_s"], 2 / horizon, rel_tol=1e-12)
    assert math.isclose(s["energy"]["j_per_output_token"], s["energy"]["total_j"] / 2, rel_tol=1e-12)
    assert all(v is None for v in s["latency"]["tpot_s"].values())
    assert all(v is None for v in s["latency"]["handoff_s"].values())
    assert s["slo"]["attainment"] == 1.0  # judged on TTFT alone, all tiny


def test_only_zero_outputs_gives_null_j_per_token() -> None:
    """With no output tokens at all, J per output token is null (not NaN, not inf)."""
    req = {"arrival_s": [0.0, 1.0], "prompt_tokens": [100, 200], "output_tokens": [0, 0]}
    s = kvwire.simulate({}, requests=req).summary
    assert s["energy"]["j_per_output_token"] is None
    json.dumps(s, allow_nan=False)


@pytest.mark.parametrize(
    "req",
    [
        {"arrival_s": [0.5], "prompt_tokens": [100], "output_tokens": [10]},
        {"arrival_s": [0.0, 0.0, 0.0], "prompt_tokens": [100, 200, 300], "output_tokens": [10, 10, 10]},
    ],
    ids=["one-measured", "same-instant"],
)
def test_goodput_null_with_empty_window(req: dict[str, list[Any]]) -> None:
    """Goodput is null (not NaN) with fewer than two measured requests or all arriving at one instant."""
    s = kvwire.simulate({}, requests=req).summary
    assert s["slo"]["goodput_req_per_s"] is None
    assert s["slo"]["attainment"] is not None
    json.dumps(s, allow_nan=False)


def test_goodput_defined_with_two_measured() -> None:
    """Two measured requests at different times give a finite goodput = met / arrival window."""
    req = {"arrival_s": [0.0, 2.0], "prompt_tokens": [100, 200], "output_tokens": [10, 10]}
    s = kvwire.simulate({}, requests=req).summary
    assert s["requests"]["measured"] == 2
    assert math.isclose(s["slo"]["goodput_req_per_s"], 2 / 2.0, rel_tol=1e-12)


def test_all_rejected_summary_is_clean() -> None:
    """When every request is rejected the summary still exists, is strict JSON, and has no latencies."""
    req = {"arrival_s": [0.0, 1.0], "prompt_tokens": [10_000_000, 10_000_000], "output_tokens": [1, 1]}
    res = kvwire.simulate({}, requests=req)
    s = res.summary
    assert s["requests"]["completed"] == 0 and s["requests"]["rejected"] == 2
    json.dumps(s, allow_nan=False)
    assert s["slo"]["goodput_req_per_s"] is None
    assert res.requests["finish_s"].is_null().all()


# --------------------------------------------------------------------------------------------------
# Threads and the GIL


def test_gil_is_released_during_the_core_run() -> None:
    """While simulate runs in one thread, another Python thread keeps running.

    The observer loop yields the GIL on every iteration (time.sleep(0)), so it can only count an iteration
    while the worker is inside simulate if the worker does not hold the GIL. A core run that kept the GIL
    would allow at most a few iterations (at the Python-level edges of the call); with the GIL released the
    observer makes thousands. The run is made long (hundreds of thousands of decode steps) but small in rows,
    so the Python-side work around the core is negligible.
    """
    sc = {
        "engine": {"macro_steps": False},
        "scheduler": {"max_decode_batch": 1},
        "workload": {"requests": 1500, "arrivals": {"rate_per_s": 100.0},
                     "output_tokens": {"dist": "fixed", "value": 4000}},
    }  # fmt: skip
    state = {"inside": False, "done": False}
    box: dict[str, Any] = {}

    def worker() -> None:
        state["inside"] = True
        try:
            box["res"] = kvwire.simulate(sc)
        finally:
            state["inside"] = False
            state["done"] = True

    sightings = 0
    t = threading.Thread(target=worker)
    t.start()
    while not state["done"]:
        if state["inside"]:
            sightings += 1
        time.sleep(0)
    t.join()
    assert box["res"].summary["requests"]["completed"] == 1500
    assert sightings >= 200, f"the observer thread ran only {sightings} times during simulate"


def test_threads_give_the_same_results_as_serial_runs() -> None:
    """Simulations run concurrently from several threads give exactly the serial results."""
    scenarios = [{"workload": {"requests": 300, "seed": s, "arrivals": {"rate_per_s": 6.0 + s}}} for s in range(4)]
    serial = [kvwire.simulate(sc) for sc in scenarios]
    results: list[Any] = [None] * len(scenarios)

    def run(i: int) -> None:
        results[i] = kvwire.simulate(scenarios[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(scenarios))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(serial, results, strict=True):
        same_result(a, b)


# --------------------------------------------------------------------------------------------------
# Ways of passing a scenario and a request table

SMALL = {"workload": {"requests": 120, "seed": 3, "arrivals": {"rate_per_s": 5.0}}}
SMALL_TOML = """\
[workload]
requests = 120
seed = 3

[workload.arrivals]
rate_per_s = 5.0
"""


def test_scenario_as_dict_json_toml_and_str(tmp_path: Path) -> None:
    """A dict, a Path to a .json file, a Path to a .toml file and a str path all run the same scenario."""
    ref = kvwire.simulate(SMALL)
    pj = tmp_path / "s.json"
    pj.write_text(json.dumps(SMALL))
    pt = tmp_path / "s.toml"
    pt.write_text(SMALL_TOML)
    for form in (pj, pt, str(pj), str(pt)):
        same_result(ref, kvwire.simulate(form))
    assert ref.requests.height == 120


def test_none_empty_and_default_scenario_agree() -> None:
    """None, {} and kvwire.default_scenario() run the same default scenario (800 requests by default)."""
    a = kvwire.simulate(None)
    b = kvwire.simulate({})
    c = kvwire.simulate(kvwire.default_scenario())
    d = kvwire.simulate()
    same_result(a, b)
    same_result(a, c)
    same_result(a, d)
    assert a.summary["requests"]["total"] == 800


def test_request_table_forms_agree() -> None:
    """requests= as a Polars frame, a dict of numpy arrays (any int/float width) or a dict of lists all give
    identical results."""
    t = mixed_table(80, seed=3).filter(pl.col("prompt_tokens") < 100_000)
    ref = kvwire.simulate({}, requests=t)
    forms: list[Any] = [
        {c: t[c].to_numpy() for c in t.columns},
        {"arrival_s": t["arrival_s"].to_numpy(),
         "prompt_tokens": t["prompt_tokens"].to_numpy().astype(np.int32),
         "output_tokens": t["output_tokens"].to_numpy().astype(np.float64)},
        t.to_dict(as_series=False),
        t.select(pl.col("arrival_s"), pl.col("prompt_tokens").cast(pl.UInt32), pl.col("output_tokens")),
    ]  # fmt: skip
    for f in forms:
        same_result(ref, kvwire.simulate({}, requests=f))


def test_workload_trace_keeps_given_arrivals_exactly() -> None:
    """workload.trace arrival times are used exactly as given (TTFT is measured from the given arrival), so
    the run equals the same table passed as requests=."""
    rng = np.random.default_rng(0)
    t = pl.DataFrame({"arrival_s": np.cumsum(rng.exponential(0.1, 200)), "prompt_tokens": np.full(200, 64),
                      "output_tokens": np.full(200, 3)})  # fmt: skip
    via_trace = kvwire.simulate({"workload": {"trace": t.to_dict(as_series=False)}})
    np.testing.assert_array_equal(via_trace.requests["arrival_s"].to_numpy(), t["arrival_s"].to_numpy())
    same_result(kvwire.simulate({}, requests=t), via_trace)


def test_scenario_floats_are_read_exactly() -> None:
    """A float in the scenario (here slo.ttft_s) reaches the core unchanged: the echo equals the input
    (0.22719478673441063 is one of the values a non-round-trip JSON float parser reads 1 ULP off)."""
    x = 0.22719478673441063
    res = kvwire.simulate({"slo": {"ttft_s": x}, "workload": {"requests": 5}})
    assert res.scenario["slo"]["ttft_s"] == x
    assert res.summary["slo"]["ttft_s"] == x


def test_same_seed_same_result_other_seed_differs() -> None:
    """A run is a function of its scenario: a seed repeats exactly; another seed changes the workload."""
    a = kvwire.simulate(SMALL)
    same_result(a, kvwire.simulate(SMALL))
    other = kvwire.simulate({"workload": {**SMALL["workload"], "seed": 4}})
    assert not a.requests["prompt_tokens"].equals(other.requests["prompt_tokens"])


def test_validate() -> None:
    """kvwire.validate accepts valid scenarios (dict, None, the default) silently and raises the errors
    simulate raises, without running anything."""
    kvwire.validate({})
    kvwire.validate(None)
    kvwire.validate(kvwire.default_scenario())
    with pytest.raises(kvwire.UnknownPresetError):
        kvwire.validate({"decode": {"device": "nope"}})
    with pytest.raises(kvwire.DoesNotFitError):
        kvwire.validate({"model": "llama3-70b"})


# --------------------------------------------------------------------------------------------------
# Catalog and default scenario


def test_catalog_presets_match_the_spec_tables() -> None:
    """kvwire.catalog() has the spec's devices, links and dense models with the spec's figures; model
    parameter counts and KV bytes/token follow the spec's shape formulas."""
    cat = kvwire.catalog()
    assert set(cat) >= {"models", "devices", "links", "formats"}
    for key, (tf, tb, gb, fe, be, tdp, idle, pjf, pjb) in DEVICES.items():
        d = cat["devices"][key]
        got = (d["peak_tflops"], d["hbm_tb_per_s"], d["hbm_gb"], d["flops_eff"], d["bw_eff"], d["tdp_w"],
               d["idle_w"], d["pj_per_flop"], d["pj_per_byte"])  # fmt: skip
        assert got == (tf, tb, gb, fe, be, tdp, idle, pjf, pjb), key
    for key, (bw, lat, pj) in LINKS.items():
        lk = cat["links"][key]
        assert (lk["bandwidth_gb_per_s"], lk["latency_us"], lk["pj_per_bit"]) == (bw, lat, pj), key
    for key, shape in MODEL_SHAPES.items():
        m = cat["models"][key]
        assert (
            m["layers"],
            m["d_model"],
            m["heads"],
            m["kv_heads"],
            m["head_dim"],
            m["d_ff"],
            m["vocab"],
        ) == shape
        assert m["params"] == model_params(key)
        assert m["kv_bytes_per_token"] == kv_bytes_per_token(key)
        assert m["resident_weight_bytes"] == 2 * model_params(key)
    assert "none" in cat["formats"]
    assert math.isclose(cat["formats"]["mxfp4"]["ratio_vs_bf16"], 64 / 17)
    assert cat["format_aliases"]["fp8"] == "fp8_e4m3"
    assert cat["formats"]["fp8_e4m3"]["ratio_vs_bf16"] == 2.0


def test_every_catalog_preset_is_usable() -> None:
    """Every catalog model/device/link key and format validates as a scenario value."""
    cat = kvwire.catalog()
    for m in cat["models"]:
        kvwire.validate({"model": m, "prefill": {"device": "b200", "devices_per_instance": 8},
                         "decode": {"device": "b200", "devices_per_instance": 8}})  # fmt: skip
    for d in cat["devices"]:
        kvwire.validate({"prefill": {"device": d}, "decode": {"device": d}})
    for lk in cat["links"]:
        kvwire.validate({"link": lk})
        kvwire.validate({"link": {"preset": lk, "channels": 2}})
    for f in cat["formats"]:
        model = "deepseek-v3" if f == "fp8_ds_mla" else "llama3-8b"  # the record exists for MLA caches only
        pools = {"device": "h200", "devices_per_instance": 8} if model == "deepseek-v3" else {}
        kvwire.validate({"model": model, "prefill": pools, "decode": pools, "handoff": {"compression": f}})


def test_default_scenario_is_a_fresh_full_dict() -> None:
    """default_scenario() writes every section out, and each call returns an independent copy."""
    a = kvwire.default_scenario()
    for k in ("model", "mode", "prefill", "decode", "link", "handoff", "workload", "slo", "metrics", "cost"):
        assert k in a, k
    a["workload"]["requests"] = 1
    assert kvwire.default_scenario()["workload"]["requests"] == 800


def test_default_scenario_round_trips_through_json_and_simulate() -> None:
    """default_scenario() → JSON text → dict → simulate gives exactly the result of simulate({})."""
    sc = json.loads(json.dumps(kvwire.default_scenario()))
    same_result(kvwire.simulate(sc), kvwire.simulate({}))
