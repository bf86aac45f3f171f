"""Queueing theory the simulator must obey: configurations whose prefill queue is exactly M/D/1 or M/G/1,
checked against the Pollaczek-Khinchine formula, PASTA and the utilisation rho = λ·E[S]; and Little's law
L = λW on assorted runs.

How a queue is made exact (spec/simulator.md (c)): one prefill instance, Poisson arrivals (the core's
generator, ``expovariate``), ``output_tokens`` fixed at 1 so a request finishes when its prefill step ends
(no hand-off, no decode), and a prefill token budget that admits one prompt per batch (the head is always
taken, the next would exceed the budget). The server is then a FIFO single server whose service time is the
step time of one prompt — a function of the prompt length only. The waiting time is
``prefill_start_s - arrival_s``.

Statistical tolerance. Waiting times of successive customers are correlated, so the standard error of
their mean is estimated by **batch means**: the measured requests (the warm-up 10% excluded, which also
removes the empty-start transient) in arrival order are cut into B = 50 contiguous batches of ≥ 800
requests. At rho = 0.8 the waiting-time autocorrelation dies out within a few dozen customers (M/M/1, a
worse case than M/D/1, has an integrated autocorrelation time of about 40 customers there), so the batch
means are close to independent and, by the CLT, close to normal; their mean's error is then t-distributed
with 49 degrees of freedom and |error| > 4 standard errors has probability ≈ 2·10⁻⁴. Runs are seeded, so a
test either always passes or always fails; 4 SE is loose enough not to fail by chance and tight enough to
catch any systematic error above ~1-2% of the waiting time.
"""

from __future__ import annotations

import math
from typing import Any

import kvwire
import numpy as np
import polars as pl
import pytest
from workloads import REFERENCE_COST

#: Prefill step of one 2,048-token Llama-3-8B prompt on one H100, LM head on every token
#: (spec/simulator.md (b), "8B prefill 2048, 1xH100": 59.0332 ms).
D_2048_S = 0.0590332
BATCHES = 50
Z = 4.0


def single_server(rate: float, n: int, prompt: dict[str, Any], budget: int, seed: int = 1) -> kvwire.SimResult:
    """A run whose prefill pool is one FIFO server fed by Poisson arrivals, one prompt per step, outputs 1."""
    return kvwire.simulate(
        {
            "cost": dict(REFERENCE_COST),
            "scheduler": {"max_prefill_tokens": budget},
            "workload": {
                "requests": n,
                "seed": seed,
                "arrivals": {"process": "poisson", "rate_per_s": rate},
                "prompt_tokens": prompt,
                "output_tokens": {"dist": "fixed", "value": 1},
            },
        }
    )


def batch_means(x: np.ndarray, batches: int = BATCHES) -> tuple[float, float]:
    """(mean, standard error) of a correlated series by the method of batch means."""
    m = len(x) // batches
    assert m >= 500, "batches too short to be close to independent"
    bm = x[: m * batches].reshape(batches, m).mean(axis=1)
    return float(x.mean()), float(bm.std(ddof=1) / math.sqrt(batches))


def service_times(res: kvwire.SimResult) -> pl.DataFrame:
    """Per request: prompt length, service time S = first_token - prefill_start, wait W = prefill_start -
    arrival, and whether it is measured; checks each batch held exactly one request."""
    df = res.requests
    assert df["rejected"].sum() == 0
    assert df["finish_s"].null_count() == 0
    # Output 1: the request finishes when its prefill step ends, with no hand-off.
    assert (df["finish_s"] == df["first_token_s"]).all()
    assert df["kv_start_s"].null_count() == df.height
    # One request per step: as many prefill steps as requests.
    assert res.summary["instances"]["prefill-0"]["steps"] == df.height
    assert res.summary["instances"]["prefill-0"]["mean_batch"] == 1.0
    return df.select(
        "prompt_tokens",
        "measured",
        (pl.col("first_token_s") - pl.col("prefill_start_s")).alias("S"),
        (pl.col("prefill_start_s") - pl.col("arrival_s")).alias("W"),
    )


_MD1: dict[float, kvwire.SimResult] = {}


def md1(rho: float) -> kvwire.SimResult:
    """The M/D/1 run at nominal utilisation rho (λ = rho/D): fixed 2,048-token prompts, budget 2,048."""
    if rho not in _MD1:
        n = 50_000 if rho <= 0.5 else 100_000
        _MD1[rho] = single_server(rho / D_2048_S, n, {"dist": "fixed", "value": 2048}, budget=2048)
    return _MD1[rho]


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_md1_mean_wait_matches_pollaczek_khinchine(rho: float) -> None:
    """M/D/1: the service time is one constant D (the published 59.0332 ms step), and the mean wait of the
    measured requests matches Pollaczek-Khinchine Wq = λD²/(2(1 - rho)) within 4 batch-means standard
    errors, at rho = 0.5 and 0.8."""
    lam = rho / D_2048_S
    t = service_times(md1(rho))
    s = t["S"].to_numpy()
    # Constant up to the rounding of (start + D) - start on timestamps of up to ~10⁴ s.
    assert s.max() - s.min() < 1e-9
    d = float(s.mean())
    assert round(d * 1e3, 4) == 59.0332
    rho_true = lam * d
    wq = lam * d * d / (2.0 * (1.0 - rho_true))
    w = t.filter(pl.col("measured"))["W"].to_numpy()
    assert len(w) == int(0.9 * t.height)
    assert (w >= 0).all()
    mean, se = batch_means(w)
    assert abs(mean - wq) <= Z * se, f"rho={rho}: mean wait {mean:.6f} s, PK {wq:.6f} s, SE {se:.6f} s"
    # The tolerance is meaningful: well under 10% of the quantity tested.
    assert Z * se < 0.1 * wq


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_md1_utilisation_and_pasta(rho: float) -> None:
    """M/D/1 utilisation: the summary's ``prefill-0`` busy fraction is exactly n·D/horizon and matches rho =
    λD within 4 standard errors of the empirical arrival rate (relative SE 1/√n for a sum of n
    exponential gaps); and by PASTA the fraction of measured arrivals served at once (no wait) is 1 - rho
    within 4 batch-means standard errors."""
    res = md1(rho)
    lam = rho / D_2048_S
    t = service_times(res)
    n = t.height
    d = float(t["S"].mean())  # type: ignore[arg-type]
    horizon = res.summary["run"]["horizon_s"]
    util = res.summary["utilisation"]["prefill-0"]
    assert util == pytest.approx(n * d / horizon, rel=1e-9)
    assert abs(util - lam * d) <= Z * lam * d / math.sqrt(n)

    idle = (t.filter(pl.col("measured"))["W"].to_numpy() == 0.0).astype(np.float64)
    p0, se = batch_means(idle)
    assert abs(p0 - (1.0 - lam * d)) <= Z * se, f"rho={rho}: P(no wait) {p0:.4f}, 1-rho {1 - lam * d:.4f}"


def test_mg1_uniform_prompts_pollaczek_khinchine() -> None:
    """M/G/1 with prompt lengths uniform on [256, 4096] (one prompt per step via a 1-token budget): the
    service time is a deterministic function of the prompt length (checked), so E[S] and E[S²] are taken
    over the uniform distribution, weighting each length's observed step time equally; the mean measured
    wait matches Pollaczek-Khinchine λE[S²]/(2(1 - λE[S])) within 4 batch-means standard errors
    (λ chosen for rho ≈ 0.74)."""
    lo, hi = 256, 4096
    lam = 0.7 / 0.06
    res = single_server(lam, 100_000, {"dist": "uniform", "min": lo, "max": hi}, budget=1)
    t = service_times(res)
    per_len = t.group_by("prompt_tokens").agg(
        pl.col("S").mean().alias("s"), (pl.col("S").max() - pl.col("S").min()).alias("spread")
    )
    # Every length in the support was drawn (≈ 26 draws each) and none outside it.
    assert sorted(per_len["prompt_tokens"].to_list()) == list(range(lo, hi + 1))
    assert per_len["spread"].max() < 1e-9  # type: ignore[operator]
    s = per_len["s"].to_numpy()
    es, es2 = float(s.mean()), float((s * s).mean())
    rho = lam * es
    assert 0.6 < rho < 0.85
    # The service time grows with the prompt (the longest step is the longest prompt).
    assert float(per_len.sort("prompt_tokens")["s"][-1]) == float(s.max())
    wq = lam * es2 / (2.0 * (1.0 - rho))
    mean, se = batch_means(t.filter(pl.col("measured"))["W"].to_numpy())
    assert abs(mean - wq) <= Z * se, f"mean wait {mean:.6f} s, PK {wq:.6f} s, SE {se:.6f} s"
    assert Z * se < 0.1 * wq
    # And the observed service-time moments agree with the distribution's (a sanity check of the draw).
    obs = t["S"].to_numpy()
    assert abs(float(obs.mean()) - es) <= Z * float(obs.std()) / math.sqrt(len(obs))


# --------------------------------------------------------------------------------------------------
# Little's law.

_LITTLE_SCENARIOS: dict[str, dict[str, Any]] = {
    "disaggregated-reference": {"cost": dict(REFERENCE_COST), "workload": {"requests": 800}},
    "disaggregated-congested-25gbe": {
        "link": {"preset": "eth-25g"},
        "workload": {"requests": 800, "arrivals": {"rate_per_s": 14.0}},
    },
    "colocated": {
        "mode": "colocated",
        "colocated": {"device": "h100", "instances": 2},
        "workload": {"requests": 800, "arrivals": {"rate_per_s": 6.0}},
    },
    "multi-instance-bursty": {
        "prefill": {"device": "h100", "instances": 2},
        "decode": {"device": "a100", "instances": 3},
        "link": {"preset": "eth-100g", "channels": 2},
        "workload": {
            "requests": 1500,
            "seed": 5,
            "arrivals": {"process": "gamma", "rate_per_s": 12.0, "cv": 3.0},
        },
    },
    # Llama-3-70B on 2xH100 decode instances holds only 8,835 KV tokens (simulator.md (b)): requests whose
    # prompt + output exceed it are rejected, the rest are KV-bound at admission.
    "rejections-70b": {
        "model": "llama3-70b",
        "prefill": {"device": "h100", "devices_per_instance": 4},
        "decode": {"device": "h100", "devices_per_instance": 2},
        "workload": {
            "requests": 600,
            "arrivals": {"rate_per_s": 2.0},
            "prompt_tokens": {"dist": "lognormal", "mean": 2048, "cv": 1.2},
        },
    },
    "short-outputs": {
        "workload": {
            "requests": 600,
            "arrivals": {"rate_per_s": 10.0},
            "output_tokens": {"dist": "uniform", "min": 0, "max": 3},
        }
    },
}


@pytest.mark.parametrize("name", list(_LITTLE_SCENARIOS))
def test_littles_law(name: str) -> None:
    """Little's law L = λW: the time-average population (the exact integral of the in-system count over the
    horizon) equals completed/horizon x mean E2E to 1e-6 relative, in disaggregated, colocated,
    multi-instance/bursty, KV-bound-with-rejections and zero/one-token-output runs. Rejected requests never
    enter the system; every completed request is in the system exactly from arrival to finish."""
    res = kvwire.simulate(_LITTLE_SCENARIOS[name])
    s = res.summary
    little = s["little"]
    assert little["l"] is not None and little["lambda_w"] is not None
    assert little["l"] == pytest.approx(little["lambda_w"], rel=1e-6)
    # The same from the request table alone (independent of the summary's own λW arithmetic).
    done = res.requests.filter(pl.col("finish_s").is_not_null())
    area = float(done["e2e_s"].sum())
    assert little["l"] == pytest.approx(area / s["run"]["horizon_s"], rel=1e-6)
    assert s["requests"]["completed"] + s["requests"]["rejected"] == s["requests"]["total"]
    assert s["requests"]["completed"] == done.height
    if name == "rejections-70b":
        rejected = res.requests.filter(pl.col("rejected"))
        assert s["requests"]["rejected"] > 0
        cap = s["instances"]["decode-0"]["kv_capacity_tokens"]
        assert cap == 8835
        # Rejected iff prompt + output > capacity (equality is admitted).
        total = pl.col("prompt_tokens").cast(pl.Int64) + pl.col("output_tokens").cast(pl.Int64)
        assert res.requests.select(((total > cap) == pl.col("rejected")).all()).item()
        assert rejected["finish_s"].null_count() == rejected.height
        # The warm-up is int(0.1 x completed) of the *completed* requests by arrival; rejected ones are
        # neither counted nor measured.
        completed = s["requests"]["completed"]
        assert s["requests"]["measured"] == completed - int(0.1 * completed)
        assert not rejected["measured"].any()
        flags = done.sort("arrival_s", maintain_order=True)["measured"].to_list()
        warm = int(0.1 * completed)
        assert flags == [False] * warm + [True] * (completed - warm)
