"""Confidence intervals of a sweep point over its replicates that stay inside what the quantity can be: a Wilson
score interval for SLO attainment (a share of requests, in [0, 1]) and a Student-t interval clipped to the
quantity's range for everything else (latencies, rates and energies are >= 0; busy shares lie in [0, 1]).

The sweep table's ``<column>:ci95`` is the half-width of the plain t interval ``mean ± t·s/√k``; with two
replicates ``t = 12.7``, so an attainment of 90% and 60% gave 75% ± 191%, a bar from -116% to 266%. The plots
draw the intervals computed here instead.

>>> import numpy as np
>>> lo, hi = wilson(0.9, 100)
>>> round(lo, 4), round(hi, 4)
(0.8256, 0.9448)
>>> c, lo, hi = attainment_interval(np.array([0.9, 0.6]), np.array([900, 900]))
>>> 0.0 <= lo < c < hi <= 1.0
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from kvwire.planning.sweep import t_quantile_975

#: The 0.975 quantile of the standard normal distribution (a two-sided 95% interval).
Z_975 = 1.959963984540054

#: Columns that are shares of the run or of the requests, in [0, 1] (exact names and name endings).
SHARE_COLUMNS = ("slo.attainment", "load.admitted_fraction", "load.handoff_fraction", "link.transit_bound_fraction",
                 "prefix_cache.hit_token_ratio", "hotspot.utilisation")  # fmt: skip
SHARE_PREFIXES = ("utilisation.",)
SHARE_SUFFIXES = (".compute_bound_fraction", ".power_capped_fraction", ".mbu", ".mfu")


def is_share(metric: str) -> bool:
    """Whether a summary column is a share in [0, 1] (SLO attainment, utilisation, ...).

    >>> is_share("slo.attainment"), is_share("utilisation.decode-0"), is_share("load.load_factor.decode")
    (True, True, False)
    """
    return metric in SHARE_COLUMNS or metric.startswith(SHARE_PREFIXES) or metric.endswith(SHARE_SUFFIXES)


def wilson(p: float, n: float, z: float = Z_975) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``p`` observed over ``n`` trials (E. B. Wilson, "Probable
    inference, the law of succession, and statistical inference", J. Amer. Statist. Assoc. 22 (1927) 209-212).

    It always lies in [0, 1] and contains ``p``; unlike ``p ± z·√(p(1-p)/n)`` it does not collapse to a point
    at p = 0 or 1. ``n`` may be fractional (an effective number of trials).

    >>> wilson(1.0, 50)[1], round(wilson(1.0, 50)[0], 4)
    (1.0, 0.9287)
    """
    if not (n > 0 and math.isfinite(n)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"wilson: needs 0 <= p <= 1 and n > 0, got p={p!r}, n={n!r}")
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    lo, hi = max(0.0, centre - half), min(1.0, centre + half)
    return min(lo, p), max(hi, p)  # guard the last bit of rounding: the interval holds p


def attainment_interval(values: np.ndarray, measured: np.ndarray | None = None) -> tuple[float, float, float]:
    """(mean, low, high) of SLO attainment over a point's replicates: a 95% Wilson interval around the mean of
    the replicates' attainments, over an effective number of requests.

    The requests of one run are not independent trials (a queue couples neighbours), so the number of trials is
    the replicates' measured requests ``N`` reduced by the design effect the replicates show (L. Kish, *Survey
    Sampling*, Wiley, 1965): ``n = min(N, p(1-p)·k / s²)`` for ``k`` replicates whose attainments have sample
    variance ``s²`` -- the n at which a binomial share would vary between replicates as much as they do. Without
    ``measured`` counts, ``N`` is ``k`` (each replicate one trial). The interval is always inside [0, 1].

    >>> attainment_interval(np.array([1.0, 1.0]), np.array([720, 720]))[0]
    1.0
    """
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    k = v.size
    if k == 0:
        return math.nan, math.nan, math.nan
    p = float(np.clip(v.mean(), 0.0, 1.0))
    if k == 1:
        return p, p, p
    total = float(k)
    if measured is not None:
        m = np.asarray(measured, dtype=float)
        if m.size == np.asarray(values).size and np.all(np.isfinite(m)) and float(m.sum()) > 0:
            total = float(m.sum())
    s2 = float(v.var(ddof=1))
    n = total if s2 <= 0.0 else min(total, p * (1.0 - p) * k / s2)
    if n <= 0.0:  # p is 0 or 1 but the replicates differ: cannot happen for shares; be safe
        n = float(k)
    lo, hi = wilson(p, n)
    return p, lo, hi


def mean_interval(values: np.ndarray, bounds: Sequence[float] = (-math.inf, math.inf)) -> tuple[float, float, float]:
    """(mean, low, high): the 95% Student-t interval of the mean over replicates, clipped to ``bounds`` (what
    the quantity can be: ``(0, inf)`` for a latency, ``(0, 1)`` for a busy share).

    >>> c, lo, hi = mean_interval(np.array([0.01, 0.5]), (0.0, math.inf))
    >>> round(c, 3), lo, round(hi, 3)
    (0.255, 0.0, 3.368)
    """
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return math.nan, math.nan, math.nan
    c = float(v.mean())
    if v.size == 1:
        return c, c, c
    half = t_quantile_975(v.size - 1) * float(v.std(ddof=1)) / math.sqrt(v.size)
    lo, hi = max(bounds[0], c - half), min(bounds[1], c + half)
    return c, min(lo, c), max(hi, c)


def bounds_of(metric: str, values: np.ndarray) -> tuple[float, float]:
    """What ``metric`` can be: [0, 1] for a share, [0, inf) when every value seen is >= 0 (latencies, rates,
    energies, counts), else unbounded.

    >>> bounds_of("latency.ttft_s.p99", np.array([0.1, 0.2]))
    (0.0, inf)
    """
    if is_share(metric):
        return 0.0, 1.0
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return (0.0, math.inf) if v.size == 0 or float(v.min()) >= 0.0 else (-math.inf, math.inf)


def interval(metric: str, values: np.ndarray, measured: np.ndarray | None = None) -> tuple[float, float, float]:
    """(mean, low, high) of ``metric`` over a point's replicates: :func:`attainment_interval` for SLO
    attainment, else :func:`mean_interval` clipped to :func:`bounds_of`."""
    if metric == "slo.attainment":
        return attainment_interval(values, measured)
    return mean_interval(values, bounds_of(metric, values))


__all__ = ["Z_975", "attainment_interval", "bounds_of", "interval", "is_share", "mean_interval", "wilson"]
