"""Reference workloads built independently of the library, with CPython's own ``random`` module.

``spec/simulator.md`` (e) defines the reference simulator's workload generator: one
``random.Random(seed)`` (MT19937); for each request in order, ``gap = expovariate(rate)`` (``t += gap``), then
the prompt length, then the output length. Lengths are lognormal in the mean/cv parametrisation
(sigma² = ln(1 + cv²), mu = ln(mean) - sigma²/2, ``x = lognormvariate(mu, sigma)``), rounded half to even
with ``round()`` and clipped to ``[1, 32768]``; ``cv <= 0`` means the fixed ``mean``.

Building the table here, with CPython's generator rather than the Rust port in the core, makes the
reference figures an end-to-end check that does not trust the port, and lets a test compare the two.
"""

from __future__ import annotations

import math
import random
from typing import Any

import polars as pl

#: Length bounds of ``LengthDist`` (spec/simulator.md (e)).
LENGTH_LO = 1
LENGTH_HI = 32768

#: The reference simulator's switches that differ from kvwire's defaults: the LM head is charged on every
#: prompt token (handoff.md "reference configuration"). Warm-up 0.1 and the TDP roof are kvwire defaults.
REFERENCE_COST = {"prefill_lm_head": "all"}


def reference_rule(scenario: dict[str, Any]) -> dict[str, Any]:
    """``scenario`` with TTFT ending at the first token out of prefill (``metrics.first_token = "prefill"``,
    the reference simulator's rule, kvwire's default before issue 23) unless it names a rule itself: the
    reference's figures are measured by that rule."""
    metrics = {"first_token": "prefill", **scenario.get("metrics", {})}
    return {**scenario, "metrics": metrics}


def draw_length(rng: random.Random, mean: float, cv: float, lo: int = LENGTH_LO, hi: int = LENGTH_HI) -> int:
    """One ``LengthDist(mean, cv, lo, hi)`` draw, exactly as the reference simulator makes it."""
    if cv <= 0:
        x = float(mean)
    else:
        sigma2 = math.log(1.0 + cv * cv)
        x = rng.lognormvariate(math.log(mean) - sigma2 / 2.0, math.sqrt(sigma2))
    return int(min(max(round(x), lo), hi))


def reference_workload(
    rate: float,
    n: int = 800,
    seed: int = 1,
    prompt: tuple[float, float] = (2048, 0.5),
    output: tuple[float, float] = (256, 0.5),
) -> pl.DataFrame:
    """The reference simulator's ``poisson_workload(rate, n, prompt, output, seed)`` as a request table.

    Args:
        rate: Poisson arrival rate (requests/s).
        n: number of requests.
        seed: the ``random.Random`` seed.
        prompt: (mean, cv) of the lognormal prompt length.
        output: (mean, cv) of the lognormal output length.

    Returns:
        Columns ``arrival_s`` (Float64), ``prompt_tokens`` and ``output_tokens`` (Int64), in arrival order.
    """
    rng = random.Random(seed)
    t = 0.0
    arrival: list[float] = []
    prompts: list[int] = []
    outputs: list[int] = []
    for _ in range(n):
        t += rng.expovariate(rate)
        arrival.append(t)
        prompts.append(draw_length(rng, *prompt))
        outputs.append(draw_length(rng, *output))
    return pl.DataFrame(
        {"arrival_s": arrival, "prompt_tokens": prompts, "output_tokens": outputs},
        schema={"arrival_s": pl.Float64, "prompt_tokens": pl.Int64, "output_tokens": pl.Int64},
    )


__all__ = ["LENGTH_HI", "LENGTH_LO", "REFERENCE_COST", "draw_length", "reference_rule", "reference_workload"]
